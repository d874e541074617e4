//! Lowering of the warp-level matrix instructions, asynchronous copies, `mbarrier` and the
//! packing conversions: the forms NVRTC 12 and 13 emit for sm_80/sm_90 (and library code
//! writes as inline PTX) lower to their operations over the registers the PTX names, and
//! malformed or unsupported ones are errors naming what is wrong.

use kir::inst::{Fp8, MbarrierOp, Op};
use kir::lower::{lower_module, LowerError};
use kir::Module;

fn lower(body: &str) -> Result<Module, Vec<LowerError>> {
    let src = format!(
        ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k()\n{{\n\
         .reg .pred %p<4>;\n.reg .b16 %h<4>;\n.reg .b32 %r<40>;\n.reg .f32 %f<40>;\n\
         .reg .f64 %fd<8>;\n.reg .b64 %rd<8>;\n.shared .align 16 .b8 s[1024];\n{body}\nret;\n}}"
    );
    lower_module(&ptx::parse(&src).expect("parses"), "t.ptx")
}

/// The operations of `body`'s instructions, without the final `exit`.
fn ops(body: &str) -> Vec<(Op, usize, usize)> {
    let m = lower(body).unwrap_or_else(|e| panic!("{body}: {e:?}"));
    let k = m.kernels.values().next().unwrap();
    k.insts
        .iter()
        .map(|(_, i)| (i.op, i.dsts().len(), i.srcs().len()))
        .filter(|(op, ..)| !matches!(op, Op::Exit))
        .collect()
}

fn rejects(cases: &[(&str, &str)]) {
    for (body, needle) in cases {
        let errs = lower(body).expect_err(body);
        let text = errs
            .iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
            .join("; ");
        assert!(text.contains(needle), "{body}: {text}");
    }
}

#[test]
fn mma_and_wmma_lower_over_every_named_register() {
    let mma = ops("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f0,%f1,%f2,%f3}, {%r1,%r2,%r3,%r4}, {%r5,%r6}, {%f0,%f1,%f2,%f3};");
    assert!(matches!(mma[0].0, Op::Mma { .. }));
    assert_eq!((mma[0].1, mma[0].2), (4, 10));
    let f64s = ops(
        "mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%fd0,%fd1}, {%fd2}, {%fd3}, {%fd4,%fd5};",
    );
    assert_eq!((f64s[0].1, f64s[0].2), (2, 4));
    // wmma.load of 8 registers is two instructions of 4; wmma.mma two m16n8k16.
    let load = ops("wmma.load.a.sync.aligned.row.m16n16k16.shared.f16 {%r0,%r1,%r2,%r3,%r4,%r5,%r6,%r7}, [s], %r8;");
    assert_eq!(load.len(), 2);
    assert!(load
        .iter()
        .all(|(op, d, s)| matches!(op, Op::WmmaLoad { .. }) && *d == 4 && *s == 2));
    let mma = ops("wmma.mma.sync.aligned.row.col.m16n16k16.f32.f32 {%f8,%f9,%f10,%f11,%f12,%f13,%f14,%f15}, {%r0,%r1,%r2,%r3,%r4,%r5,%r6,%r7}, {%r8,%r9,%r10,%r11,%r12,%r13,%r14,%r15}, {%f0,%f1,%f2,%f3,%f4,%f5,%f6,%f7};");
    assert_eq!(mma.len(), 2);
    assert!(mma
        .iter()
        .all(|(op, d, s)| matches!(op, Op::Mma { .. }) && *d == 4 && *s == 10));
    let store = ops("wmma.store.d.sync.aligned.row.m16n16k16.global.f32 [%rd1], {%f8,%f9,%f10,%f11,%f12,%f13,%f14,%f15}, %r1;");
    assert!(store
        .iter()
        .all(|(op, d, s)| matches!(op, Op::WmmaStore { .. }) && *d == 0 && *s == 6));
    let ld = ops("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%r1,%r2,%r3,%r4}, [%r5];");
    assert!(matches!(
        ld[0].0,
        Op::Ldmatrix {
            count: 4,
            trans: true,
            ..
        }
    ));
    let st = ops("stmatrix.sync.aligned.m8n8.x2.shared.b16 [%r5], {%r1,%r2};");
    assert!(matches!(
        st[0].0,
        Op::Stmatrix {
            count: 2,
            trans: false,
            ..
        }
    ));
    assert_eq!(st[0].2, 3);
}

#[test]
fn async_copies_mbarrier_and_conversions_lower() {
    let cp = ops("cp.async.cg.shared.global [%r1], [%rd1], 16, %r2;\ncp.async.ca.shared.global.L2::128B [%r1+16], [%rd1+16], 8;\ncp.async.commit_group;\ncp.async.wait_group 1;\ncp.async.wait_all;");
    assert!(matches!(
        cp[0].0,
        Op::CpAsync {
            bytes: 16,
            bypass_l1: true,
            src_size: true,
            ..
        }
    ));
    assert!(matches!(
        cp[1].0,
        Op::CpAsync {
            bytes: 8,
            bypass_l1: false,
            dst_offset: 16,
            src_offset: 16,
            ..
        }
    ));
    assert!(matches!(cp[2].0, Op::CpAsyncCommit));
    assert!(matches!(
        cp[3].0,
        Op::CpAsyncWait {
            groups: 1,
            all: false
        }
    ));
    assert!(matches!(
        cp[4].0,
        Op::CpAsyncWait {
            groups: 0,
            all: true
        }
    ));
    let mb = ops("mbarrier.init.shared::cta.b64 [s], 64;\nmbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [s], 256;\nmbarrier.try_wait.parity.shared::cta.b64 %p1, [s], %r1, 1000;\nmbarrier.test_wait.shared.b64 %p1, [s], %rd1;\nmbarrier.pending_count.b64 %r2, %rd1;\ncp.async.mbarrier.arrive.noinc.shared.b64 [s];");
    let kinds: Vec<MbarrierOp> = mb
        .iter()
        .map(|(op, ..)| match op {
            Op::Mbarrier { op, .. } => *op,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            MbarrierOp::Init,
            MbarrierOp::Arrive {
                drop: false,
                expect_tx: true,
                no_complete: false
            },
            MbarrierOp::Wait { parity: true },
            MbarrierOp::Wait { parity: false },
            MbarrierOp::PendingCount,
            MbarrierOp::CpAsyncArrive { noinc: true },
        ]
    );
    let cvt = ops("cvt.rn.relu.f16x2.f32 %r1, %f1, %f2;\ncvt.rna.tf32.f32 %r2, %f3;\nfns.b32 %r3, %r4, %r5, %r6;\napplypriority.global.L2::evict_normal [%rd1], 128;");
    assert!(matches!(cvt[0].0, Op::CvtPack { relu: true, .. }));
    assert!(matches!(cvt[1].0, Op::CvtTf32 { away: true, .. }));
    assert!(matches!(cvt[3].0, Op::Nop));
    // The FP8 conversions NVRTC emits for `__nv_cvt_float2_to_fp8x2` and friends.
    let fp8 = ops("cvt.rn.satfinite.e4m3x2.f32 %h0, %f1, %f2;\n\
         cvt.rn.satfinite.relu.e5m2x2.f16x2 %h1, %r1;\n\
         cvt.rn.f16x2.e4m3x2 %r2, %h0;");
    assert_eq!(
        fp8.iter()
            .map(|(op, d, s)| (*op, *d, *s))
            .collect::<Vec<_>>(),
        [
            (
                Op::CvtFp8 {
                    format: Fp8::E4m3,
                    to_f16x2: false,
                    from_f16x2: false,
                    relu: false
                },
                1,
                2
            ),
            (
                Op::CvtFp8 {
                    format: Fp8::E5m2,
                    to_f16x2: false,
                    from_f16x2: true,
                    relu: true
                },
                1,
                1
            ),
            (
                Op::CvtFp8 {
                    format: Fp8::E4m3,
                    to_f16x2: true,
                    from_f16x2: false,
                    relu: false
                },
                1,
                1
            ),
        ]
    );
}

#[test]
fn malformed_and_unsupported_forms_are_errors() {
    rejects(&[
        // FP8: `.satfinite` is required towards FP8, `.rn` always; the packed result is 16 bits.
        ("cvt.rn.e4m3x2.f32 %h0, %f0, %f1;", "`.satfinite`"),
        ("cvt.rz.satfinite.e4m3x2.f32 %h0, %f0, %f1;", "`.rn`"),
        ("cvt.rn.satfinite.e5m2x2.f32 %r0, %f0, %f1;", "%r0"),
        ("cvt.rn.satfinite.e4m3x2.f32 %h0, %f0;", "3"),
        ("cvt.rn.satfinite.f16x2.e4m3x2 %r0, %h0;", "no `.satfinite`"),
        // Three A registers where m16n8k16 f16 takes four.
        (
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f0,%f1,%f2,%f3}, {%r1,%r2,%r3}, {%r5,%r6}, {%f0,%f1,%f2,%f3};",
            "4 registers",
        ),
        // A shape Ampere/Hopper mma does not have for f16.
        (
            "mma.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32 {%f0,%f1,%f2,%f3}, {%r1,%r2,%r3,%r4}, {%r5,%r6}, {%f0,%f1,%f2,%f3};",
            "supported are",
        ),
        // bf16 into f16 accumulators does not exist.
        (
            "mma.sync.aligned.m16n8k16.row.col.f16.bf16.bf16.f16 {%r0,%r1}, {%r1,%r2,%r3,%r4}, {%r5,%r6}, {%r7,%r8};",
            "supported are",
        ),
        ("mma.m16n8k16.row.col.f32.f16.f16.f32 {%f0,%f1,%f2,%f3}, {%r1,%r2,%r3,%r4}, {%r5,%r6}, {%f0,%f1,%f2,%f3};", "`.sync.aligned`"),
        (
            "wmma.load.a.sync.aligned.row.m8n32k8.global.f16 {%r0,%r1,%r2,%r3,%r4,%r5,%r6,%r7}, [%rd1];",
            "wmma supports m16n16k16, m32n8k16 and m8n32k16",
        ),
        // tf32 only in m16n16k8; f64 accumulators only with f64; satfinite only for integers.
        (
            "wmma.load.a.sync.aligned.row.m16n16k16.global.tf32 {%r0,%r1,%r2,%r3}, [%rd1];",
            "no .tf32 A fragment",
        ),
        (
            "wmma.load.c.sync.aligned.row.m16n16k16.global.f64 {%fd0,%fd1}, [%rd1];",
            "no .f64 C fragment",
        ),
        (
            "wmma.mma.sync.aligned.row.col.m16n16k16.f32.bf16.bf16.f32.satfinite {%f0,%f1,%f2,%f3,%f4,%f5,%f6,%f7}, {%r0,%r1,%r2,%r3}, {%r4,%r5,%r6,%r7}, {%f0,%f1,%f2,%f3,%f4,%f5,%f6,%f7};",
            "`.satfinite` is for integer",
        ),
        // Two s8 A registers, not three.
        (
            "wmma.load.a.sync.aligned.row.m16n16k16.global.s8 {%r0,%r1,%r2}, [%rd1];",
            "2 registers",
        ),
        ("wmma.load.a.sync.aligned.m16n16k16.global.f16 {%r0,%r1,%r2,%r3,%r4,%r5,%r6,%r7}, [%rd1];", "layout"),
        ("ldmatrix.sync.aligned.m16n16.x2.shared.b8 {%r1,%r2}, [%r5];", "m8n8"),
        ("ldmatrix.sync.aligned.m8n8.x3.shared.b16 {%r1,%r2,%r3}, [%r5];", "`.x1`, `.x2` or `.x4`"),
        // .cg copies 16 bytes only; sizes are 4, 8 or 16.
        ("cp.async.cg.shared.global [%r1], [%rd1], 8;", "16 bytes"),
        ("cp.async.ca.shared.global [%r1], [%rd1], 12;", "4, 8 or 16"),
        ("cp.async.bulk.shared.global [%r1], [%rd1], 128;", "cp.async.bulk"),
        ("mbarrier.init.shared.b64 [s];", "operands"),
        ("mbarrier.arrive.shared.b32 %r1, [s];", "b32"),
        ("fma.rn.relu.f32 %f1, %f2, %f3, %f4;", "f32"),
        ("cvt.rn.f16x2.f32 %r1, %f1;", "3"),
    ]);
}
