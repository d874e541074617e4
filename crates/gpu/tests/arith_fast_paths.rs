//! The executor's row fast paths (`Exec::fast_arith`) compute what the general path
//! (`alu::arith`) computes, bit for bit: each operation that has one runs on a kernel over
//! operand pairs that include the IEEE special values (signed zeros, infinities, quiet and
//! signalling NaNs of both signs, subnormals) and pseudo-random bit patterns, on whole warps
//! and on warps whose odd lanes have left (the per-lane form), and every result is compared
//! with `gpu::alu::arith` on the same operands.

use gpu::{DevPtr, Gpu, KernelArg};
use kir::inst::{ArithOp, FloatMode};
use kir::Ty;

/// (PTX instruction, operation, type, two sources?) for the 32-bit operands.
const OPS32: &[(&str, ArithOp, Ty, bool)] = &[
    ("div.rn.f32", ArithOp::Div, Ty::F32, true),
    ("rcp.rn.f32", ArithOp::Rcp, Ty::F32, false),
    ("sqrt.rn.f32", ArithOp::Sqrt, Ty::F32, false),
    ("neg.f32", ArithOp::Neg, Ty::F32, false),
    ("abs.f32", ArithOp::Abs, Ty::F32, false),
    ("min.f32", ArithOp::Min, Ty::F32, true),
    ("max.f32", ArithOp::Max, Ty::F32, true),
    ("mul.hi.s32", ArithOp::MulHi, Ty::S32, true),
    ("mul.hi.u32", ArithOp::MulHi, Ty::U32, true),
    ("not.b32", ArithOp::Not, Ty::B32, false),
];
/// The same for the 64-bit operands.
const OPS64: &[(&str, ArithOp, Ty, bool)] = &[
    ("div.rn.f64", ArithOp::Div, Ty::F64, true),
    ("neg.f64", ArithOp::Neg, Ty::F64, false),
    ("abs.f64", ArithOp::Abs, Ty::F64, false),
    ("not.b64", ArithOp::Not, Ty::B64, false),
];

fn kernel(odd_lanes_leave: bool) -> String {
    let mut body = String::new();
    for (j, &(inst, _, _, two)) in OPS32.iter().enumerate() {
        let srcs = if two { "%r1, %r2" } else { "%r1" };
        body += &format!(
            "    {inst} %r3, {srcs};\n    st.global.u32 [%rd10+{}], %r3;\n",
            8 * j
        );
    }
    for (j, &(inst, _, _, two)) in OPS64.iter().enumerate() {
        let srcs = if two { "%rd1, %rd2" } else { "%rd1" };
        let at = 8 * (OPS32.len() + j);
        body += &format!("    {inst} %rd3, {srcs};\n    st.global.u64 [%rd10+{at}], %rd3;\n");
    }
    let leave = if odd_lanes_leave {
        "    and.b32 %r9, %r0, 1;\n    setp.ne.u32 %p1, %r9, 0;\n    @%p1 ret;\n"
    } else {
        ""
    };
    format!(
        r#".version 8.0
.target sm_70
.address_size 64
.visible .entry k(.param .u64 a32, .param .u64 b32, .param .u64 a64, .param .u64 b64, .param .u64 out)
{{
    .reg .pred %p<4>;
    .reg .b32 %r<16>;
    .reg .b64 %rd<16>;
    mov.u32 %r4, %tid.x;
    mov.u32 %r5, %ctaid.x;
    mov.u32 %r6, %ntid.x;
    mad.lo.s32 %r0, %r5, %r6, %r4;
{leave}    mul.wide.u32 %rd4, %r0, 4;
    mul.wide.u32 %rd5, %r0, 8;
    mul.wide.u32 %rd6, %r0, {stride};
    ld.param.u64 %rd7, [a32];
    add.s64 %rd7, %rd7, %rd4;
    ld.global.u32 %r1, [%rd7];
    ld.param.u64 %rd7, [b32];
    add.s64 %rd7, %rd7, %rd4;
    ld.global.u32 %r2, [%rd7];
    ld.param.u64 %rd7, [a64];
    add.s64 %rd7, %rd7, %rd5;
    ld.global.u64 %rd1, [%rd7];
    ld.param.u64 %rd7, [b64];
    add.s64 %rd7, %rd7, %rd5;
    ld.global.u64 %rd2, [%rd7];
    ld.param.u64 %rd10, [out];
    add.s64 %rd10, %rd10, %rd6;
{body}    ret;
}}
"#,
        stride = 8 * (OPS32.len() + OPS64.len())
    )
}

/// Operands: every pair of the special values, then pseudo-random patterns (a fixed LCG).
fn operands(n: usize) -> (Vec<u32>, Vec<u32>, Vec<u64>, Vec<u64>) {
    let s32 = [
        0u32,
        0x8000_0000,
        0x3f80_0000,
        0xbf80_0000,
        0x7f80_0000,
        0xff80_0000,
        0x7fc0_0000,
        0xffc0_0001,
        0x7f80_0001,
        0x0000_0001,
        0x8000_0001,
        0x7f7f_ffff,
        0x0080_0000,
        0x4049_0fdb,
    ];
    let s64 = [
        0u64,
        1 << 63,
        0x3ff0_0000_0000_0000,
        0xbff0_0000_0000_0000,
        0x7ff0_0000_0000_0000,
        0xfff0_0000_0000_0000,
        0x7ff8_0000_0000_0000,
        0xfff8_0000_0000_0001,
        0x7ff0_0000_0000_0001,
        1,
        0x8000_0000_0000_0001,
        0x7fef_ffff_ffff_ffff,
        0x0010_0000_0000_0000,
        0x4009_21fb_5444_2d18,
    ];
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        x ^ (x >> 29)
    };
    let (mut a32, mut b32, mut a64, mut b64) = (vec![], vec![], vec![], vec![]);
    for i in 0..n {
        let (k, m) = (i / s32.len(), i % s32.len());
        if k < s32.len() {
            a32.push(s32[k]);
            b32.push(s32[m]);
            a64.push(s64[k]);
            b64.push(s64[m]);
        } else {
            a32.push(next() as u32);
            b32.push(next() as u32);
            a64.push(next());
            b64.push(next());
        }
    }
    (a32, b32, a64, b64)
}

fn bytes<T: Copy>(v: &[T], f: impl Fn(T) -> Vec<u8>) -> Vec<u8> {
    v.iter().flat_map(|&x| f(x)).collect()
}

#[test]
fn fast_paths_compute_what_the_general_path_computes() {
    let (tbs, threads) = (3u32, 128u32);
    let n = (tbs * threads) as usize;
    let (a32, b32, a64, b64) = operands(n);
    let per = OPS32.len() + OPS64.len();
    for odd_lanes_leave in [false, true] {
        let mut gpu = Gpu::new();
        let m = gpu
            .load_ptx("fast.ptx", &kernel(odd_lanes_leave))
            .expect("loads");
        let mut buf = |data: Vec<u8>| {
            let p = gpu.alloc(data.len() as u64);
            gpu.copy_to_device(p, &data).expect("copy");
            p
        };
        let pa32 = buf(bytes(&a32, |x| x.to_le_bytes().to_vec()));
        let pb32 = buf(bytes(&b32, |x| x.to_le_bytes().to_vec()));
        let pa64 = buf(bytes(&a64, |x| x.to_le_bytes().to_vec()));
        let pb64 = buf(bytes(&b64, |x| x.to_le_bytes().to_vec()));
        let out = buf(vec![0; n * per * 8]);
        let args = [pa32, pb32, pa64, pb64, out].map(KernelArg::Ptr);
        gpu.launch(m, "k", [tbs, 1, 1], [threads, 1, 1], 0, &args)
            .expect("runs");
        let got = gpu
            .copy_from_device(DevPtr(out.0), (n * per * 8) as u64)
            .expect("copy back");
        let word = |i: usize, j: usize| {
            let at = (i * per + j) * 8;
            u64::from_le_bytes(got[at..at + 8].try_into().unwrap())
        };
        for i in 0..n {
            let left = odd_lanes_leave && i % 2 == 1;
            for (j, &(inst, op, ty, _)) in OPS32.iter().enumerate() {
                let (a, b) = (u64::from(a32[i]), u64::from(b32[i]));
                let want = if left {
                    0
                } else {
                    gpu::alu::arith(op, ty, FloatMode::default(), a, b, 0, 0).expect("defined")
                        & 0xffff_ffff
                };
                assert_eq!(word(i, j), want, "{inst} {a:#x} {b:#x} (thread {i})");
            }
            for (j, &(inst, op, ty, _)) in OPS64.iter().enumerate() {
                let (a, b) = (a64[i], b64[i]);
                let want = if left {
                    0
                } else {
                    gpu::alu::arith(op, ty, FloatMode::default(), a, b, 0, 0).expect("defined")
                };
                assert_eq!(
                    word(i, OPS32.len() + j),
                    want,
                    "{inst} {a:#x} {b:#x} (thread {i})"
                );
            }
        }
    }
}
