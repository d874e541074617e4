//! The executor's row fast paths (`Exec::fast_arith`) compute what the general path
//! (`alu::arith`) computes, bit for bit: each operation that has one runs on a kernel over
//! operand pairs that include the IEEE special values (signed zeros, infinities, quiet and
//! signalling NaNs of both signs, subnormals) and pseudo-random bit patterns, on whole warps
//! and on warps whose odd lanes have left (the per-lane form), and every result is compared
//! with `gpu::alu::arith` on the same operands.

use gpu::{DevPtr, Gpu, KernelArg};
use kir::inst::{ArithOp, FloatMode};
use kir::Ty;

/// How an instruction takes its operands: `a`, `b` (and `c`, here `a` again) of 32 or 64
/// bits; a 64-bit `a` shifted by the 32-bit `b`; two 32-bit sources and a 64-bit result.
#[derive(Clone, Copy, PartialEq)]
enum Form {
    A32,
    Ab32,
    Abc32,
    A64,
    Ab64,
    Abc64,
    Shift64,
    Wide,
    /// A 32-bit result of a 64-bit `a` (`popc.b64`).
    Count64,
}

/// Every operation with a fast path: (PTX instruction, operation, type, operands).
const OPS: &[(&str, ArithOp, Ty, Form)] = &[
    ("add.s32", ArithOp::Add, Ty::S32, Form::Ab32),
    ("add.s64", ArithOp::Add, Ty::S64, Form::Ab64),
    ("sub.s32", ArithOp::Sub, Ty::S32, Form::Ab32),
    ("sub.s64", ArithOp::Sub, Ty::S64, Form::Ab64),
    ("mul.lo.s32", ArithOp::MulLo, Ty::S32, Form::Ab32),
    ("mul.lo.u64", ArithOp::MulLo, Ty::U64, Form::Ab64),
    ("mad.lo.s32", ArithOp::MadLo, Ty::S32, Form::Abc32),
    ("mad.lo.u64", ArithOp::MadLo, Ty::U64, Form::Abc64),
    ("mul.wide.s32", ArithOp::MulWide, Ty::S32, Form::Wide),
    ("mul.wide.u32", ArithOp::MulWide, Ty::U32, Form::Wide),
    ("mul.hi.s32", ArithOp::MulHi, Ty::S32, Form::Ab32),
    ("mul.hi.u32", ArithOp::MulHi, Ty::U32, Form::Ab32),
    ("and.b32", ArithOp::And, Ty::B32, Form::Ab32),
    ("or.b64", ArithOp::Or, Ty::B64, Form::Ab64),
    ("xor.b32", ArithOp::Xor, Ty::B32, Form::Ab32),
    ("not.b32", ArithOp::Not, Ty::B32, Form::A32),
    ("not.b64", ArithOp::Not, Ty::B64, Form::A64),
    ("shl.b32", ArithOp::Shl, Ty::B32, Form::Ab32),
    ("shr.u32", ArithOp::Shr, Ty::U32, Form::Ab32),
    ("shr.s32", ArithOp::Shr, Ty::S32, Form::Ab32),
    ("shl.b64", ArithOp::Shl, Ty::B64, Form::Shift64),
    ("shr.u64", ArithOp::Shr, Ty::U64, Form::Shift64),
    ("shr.s64", ArithOp::Shr, Ty::S64, Form::Shift64),
    ("min.s32", ArithOp::Min, Ty::S32, Form::Ab32),
    ("max.u32", ArithOp::Max, Ty::U32, Form::Ab32),
    ("add.rn.f32", ArithOp::Add, Ty::F32, Form::Ab32),
    ("sub.rn.f32", ArithOp::Sub, Ty::F32, Form::Ab32),
    ("mul.rn.f32", ArithOp::Mul, Ty::F32, Form::Ab32),
    ("fma.rn.f32", ArithOp::Fma, Ty::F32, Form::Abc32),
    ("div.rn.f32", ArithOp::Div, Ty::F32, Form::Ab32),
    ("rcp.rn.f32", ArithOp::Rcp, Ty::F32, Form::A32),
    ("sqrt.rn.f32", ArithOp::Sqrt, Ty::F32, Form::A32),
    ("neg.f32", ArithOp::Neg, Ty::F32, Form::A32),
    ("abs.f32", ArithOp::Abs, Ty::F32, Form::A32),
    ("min.f32", ArithOp::Min, Ty::F32, Form::Ab32),
    ("max.f32", ArithOp::Max, Ty::F32, Form::Ab32),
    ("add.rn.f64", ArithOp::Add, Ty::F64, Form::Ab64),
    ("mul.rn.f64", ArithOp::Mul, Ty::F64, Form::Ab64),
    ("fma.rn.f64", ArithOp::Fma, Ty::F64, Form::Abc64),
    ("div.rn.f64", ArithOp::Div, Ty::F64, Form::Ab64),
    ("neg.f64", ArithOp::Neg, Ty::F64, Form::A64),
    ("abs.f64", ArithOp::Abs, Ty::F64, Form::A64),
    ("popc.b32", ArithOp::Popc, Ty::B32, Form::A32),
    ("popc.b64", ArithOp::Popc, Ty::B64, Form::Count64),
];

fn kernel(odd_lanes_leave: bool) -> String {
    let mut body = String::new();
    for (j, &(inst, _, _, form)) in OPS.iter().enumerate() {
        let (dst, srcs) = match form {
            Form::A32 => ("%r3", "%r1"),
            Form::Ab32 => ("%r3", "%r1, %r2"),
            Form::Abc32 => ("%r3", "%r1, %r2, %r1"),
            Form::A64 => ("%rd3", "%rd1"),
            Form::Ab64 => ("%rd3", "%rd1, %rd2"),
            Form::Abc64 => ("%rd3", "%rd1, %rd2, %rd1"),
            Form::Shift64 => ("%rd3", "%rd1, %r2"),
            Form::Wide => ("%rd3", "%r1, %r2"),
            Form::Count64 => ("%r3", "%rd1"),
        };
        let st = if dst == "%r3" { "u32" } else { "u64" };
        body += &format!(
            "    {inst} {dst}, {srcs};\n    st.global.{st} [%rd10+{}], {dst};\n",
            8 * j
        );
    }
    ptx_over_operands(odd_lanes_leave, 8 * OPS.len(), &body)
}

/// A kernel whose threads load their operands (`%r1`, `%r2` from `a32`, `b32`; `%rd1`,
/// `%rd2` from `a64`, `b64`), point `%rd10` at their `stride` bytes of `out`, then run
/// `body`; with `odd_lanes_leave`, odd threads return first.
fn ptx_over_operands(odd_lanes_leave: bool, stride: usize, body: &str) -> String {
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
    .reg .b16 %rs<8>;
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
"#
    )
}

/// Runs `ptx_over_operands`' kernel `k` on `tbs` × `threads` threads over the operands
/// `(a32, b32, a64, b64)`, each thread writing `per` words; returns `out`'s bytes.
fn run_over_operands(
    ptx: &str,
    (tbs, threads): (u32, u32),
    per: usize,
    (a32, b32, a64, b64): &(Vec<u32>, Vec<u32>, Vec<u64>, Vec<u64>),
) -> Vec<u8> {
    let n = (tbs * threads) as usize;
    let mut gpu = Gpu::new();
    let m = gpu.load_ptx("fast.ptx", ptx).expect("loads");
    let mut buf = |data: Vec<u8>| {
        let p = gpu.alloc(data.len() as u64);
        gpu.copy_to_device(p, &data).expect("copy");
        p
    };
    let pa32 = buf(bytes(a32, |x| x.to_le_bytes().to_vec()));
    let pb32 = buf(bytes(b32, |x| x.to_le_bytes().to_vec()));
    let pa64 = buf(bytes(a64, |x| x.to_le_bytes().to_vec()));
    let pb64 = buf(bytes(b64, |x| x.to_le_bytes().to_vec()));
    let out = buf(vec![0; n * per * 8]);
    let args = [pa32, pb32, pa64, pb64, out].map(KernelArg::Ptr);
    gpu.launch(m, "k", [tbs, 1, 1], [threads, 1, 1], 0, &args)
        .expect("runs");
    gpu.copy_from_device(DevPtr(out.0), (n * per * 8) as u64)
        .expect("copy back")
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
            // A third of the second operands small, so that shifts also shift by less than
            // the width.
            b32.push(if i % 3 == 0 {
                (next() % 70) as u32
            } else {
                next() as u32
            });
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
    let ops = operands(n);
    let (a32, b32, a64, b64) = &ops;
    let per = OPS.len();
    for odd_lanes_leave in [false, true] {
        let got = run_over_operands(&kernel(odd_lanes_leave), (tbs, threads), per, &ops);
        let word = |i: usize, j: usize| {
            let at = (i * per + j) * 8;
            u64::from_le_bytes(got[at..at + 8].try_into().unwrap())
        };
        for i in 0..n {
            let left = odd_lanes_leave && i % 2 == 1;
            for (j, &(inst, op, ty, form)) in OPS.iter().enumerate() {
                let (a, b) = match form {
                    Form::A32 | Form::Ab32 | Form::Abc32 | Form::Wide => {
                        (u64::from(a32[i]), u64::from(b32[i]))
                    }
                    Form::A64 | Form::Ab64 | Form::Abc64 | Form::Count64 => (a64[i], b64[i]),
                    Form::Shift64 => (a64[i], u64::from(b32[i])),
                };
                let c = if matches!(form, Form::Abc32 | Form::Abc64) {
                    a
                } else {
                    0
                };
                let b = if matches!(form, Form::A32 | Form::A64 | Form::Count64) {
                    0
                } else {
                    b
                };
                let mask = if matches!(form, Form::A32 | Form::Ab32 | Form::Abc32 | Form::Count64) {
                    0xffff_ffff
                } else {
                    u64::MAX
                };
                let want = if left {
                    0
                } else {
                    gpu::alu::arith(op, ty, FloatMode::default(), a, b, c, 0).expect("defined")
                        & mask
                };
                assert_eq!(word(i, j), want, "{inst} {a:#x} {b:#x} (thread {i})");
            }
        }
    }
}

/// `cvt` between integer types (the executor converts them without `alu::cvt`'s per-lane
/// dispatch) computes what `alu::cvt` computes: every pair of 8- to 64-bit integer types,
/// on the special and pseudo-random patterns, whole warps and warps whose odd lanes left.
#[test]
fn integer_cvt_computes_what_alu_cvt_computes() {
    const INTS: [(&str, Ty); 8] = [
        ("u8", Ty::U8),
        ("s8", Ty::S8),
        ("u16", Ty::U16),
        ("s16", Ty::S16),
        ("u32", Ty::U32),
        ("s32", Ty::S32),
        ("u64", Ty::U64),
        ("s64", Ty::S64),
    ];
    // The register (and store width) a type lives in, and its 64-bit source.
    let reg = |ty: Ty| match ty.bits() {
        8 | 16 => ("%rs1", "%rs3", "u16", 0xffffu64),
        32 => ("%r1", "%r3", "u32", 0xffff_ffff),
        _ => ("%rd1", "%rd3", "u64", u64::MAX),
    };
    let pairs: Vec<(&str, Ty, &str, Ty)> = INTS
        .iter()
        .flat_map(|&(dn, dt)| INTS.iter().map(move |&(sn, st)| (dn, dt, sn, st)))
        .collect();
    // Every source width reads the low bits of the 64-bit operand.
    let mut body = String::from("    cvt.u32.u64 %r1, %rd1;\n    cvt.u16.u64 %rs1, %rd1;\n");
    for (j, &(dn, dt, sn, st)) in pairs.iter().enumerate() {
        let (src, _, _, _) = reg(st);
        let (_, dst, width, _) = reg(dt);
        body += &format!(
            "    cvt.{dn}.{sn} {dst}, {src};\n    st.global.{width} [%rd10+{}], {dst};\n",
            8 * j
        );
    }
    let (tbs, threads) = (2u32, 128u32);
    let ops = operands((tbs * threads) as usize);
    let a64 = &ops.2;
    let per = pairs.len();
    for odd_lanes_leave in [false, true] {
        let ptx = ptx_over_operands(odd_lanes_leave, 8 * per, &body);
        let got = run_over_operands(&ptx, (tbs, threads), per, &ops);
        for (i, &raw) in a64.iter().enumerate() {
            let left = odd_lanes_leave && i % 2 == 1;
            for (j, &(dn, dt, sn, st)) in pairs.iter().enumerate() {
                let (_, _, _, src_mask) = reg(st);
                let (_, _, _, width_mask) = reg(dt);
                let at = (i * per + j) * 8;
                let word = u64::from_le_bytes(got[at..at + 8].try_into().unwrap());
                let a = raw & src_mask;
                let want = if left {
                    0
                } else {
                    gpu::alu::cvt(dt, st, None, false, false, a) & width_mask
                };
                assert_eq!(word, want, "cvt.{dn}.{sn} {a:#x} (thread {i})");
            }
        }
    }
}

/// Extended-precision arithmetic (the executor decodes its operands once per instruction
/// and inlines `alu::carry` per operation and type) computes what `alu::carry` computes,
/// carry flag included: a chain of `add.cc addc.cc sub.cc subc.cc mad.lo.cc madc.hi.cc
/// madc.lo addc` per type, each result and the final carry checked against `alu::carry`
/// folded along the same chain, with a constant operand too, on whole warps and warps
/// whose odd lanes left.
#[test]
fn carry_chains_compute_what_alu_carry_computes() {
    use ArithOp::{AddC, MadC, SubC};
    // (mnemonic, operation, sources as (register or constant), carry-out written)
    let chain: [(&str, ArithOp, &str, bool); 9] = [
        ("add.cc", AddC { carry_in: false }, "a, b", true),
        ("addc.cc", AddC { carry_in: true }, "b, a", true),
        ("sub.cc", SubC { carry_in: false }, "a, b", true),
        ("subc.cc", SubC { carry_in: true }, "b, 7", true),
        (
            "mad.lo.cc",
            MadC {
                hi: false,
                carry_in: false,
            },
            "a, b, a",
            true,
        ),
        (
            "madc.hi.cc",
            MadC {
                hi: true,
                carry_in: true,
            },
            "a, b, b",
            true,
        ),
        (
            "madc.lo.cc",
            MadC {
                hi: false,
                carry_in: true,
            },
            "b, b, a",
            true,
        ),
        (
            "madc.hi",
            MadC {
                hi: true,
                carry_in: true,
            },
            "a, a, b",
            false,
        ),
        ("addc", AddC { carry_in: true }, "a, 0", false),
    ];
    for (tyname, ty, bits) in [
        ("u32", Ty::U32, 32),
        ("s32", Ty::S32, 32),
        ("u64", Ty::U64, 64),
        ("s64", Ty::S64, 64),
    ] {
        let (ra, rb, rd, width, mask) = if bits == 32 {
            ("%r1", "%r2", "%r3", "u32", 0xffff_ffffu64)
        } else {
            ("%rd1", "%rd2", "%rd3", "u64", u64::MAX)
        };
        let mut body = String::new();
        for (j, &(m, _, srcs, _)) in chain.iter().enumerate() {
            let srcs = srcs.replace('a', ra).replace('b', rb);
            body += &format!(
                "    {m}.{tyname} {rd}, {srcs};\n    st.global.{width} [%rd10+{}], {rd};\n",
                8 * j
            );
        }
        let (tbs, threads) = (2u32, 128u32);
        let n = (tbs * threads) as usize;
        let ops = operands(n);
        let (a32, b32, a64, b64) = &ops;
        let per = chain.len();
        for odd_lanes_leave in [false, true] {
            let ptx = ptx_over_operands(odd_lanes_leave, 8 * per, &body);
            let got = run_over_operands(&ptx, (tbs, threads), per, &ops);
            for i in 0..n {
                let left = odd_lanes_leave && i % 2 == 1;
                let (a, b) = if bits == 32 {
                    (u64::from(a32[i]), u64::from(b32[i]))
                } else {
                    (a64[i], b64[i])
                };
                let mut cf = false;
                for (j, &(m, op, srcs, carry_out)) in chain.iter().enumerate() {
                    let val = |t: &str| match t {
                        "a" => a,
                        "b" => b,
                        k => k.parse().expect("a constant"),
                    };
                    let x: Vec<u64> = srcs.split(", ").map(val).collect();
                    let x = [x[0], x[1], x.get(2).copied().unwrap_or(0), 0];
                    let (v, out) = gpu::alu::carry(op, ty, x, cf);
                    if carry_out {
                        cf = out;
                    }
                    let at = (i * per + j) * 8;
                    let word = u64::from_le_bytes(got[at..at + 8].try_into().unwrap());
                    let want = if left { 0 } else { v & mask };
                    assert_eq!(word, want, "{m}.{tyname} {a:#x} {b:#x} (thread {i})");
                }
            }
        }
    }
}
