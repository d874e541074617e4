//! The warp-level matrix instructions against the PTX ISA's fragment layouts, element by
//! element, on both engines.
//!
//! Each `mma` test builds A, B and C fragments *in PTX*, every lane computing the matrix
//! element its register holds from the (row, column) the ISA's §9.7.14.5 formulas give
//! (written out below as tables, independently of `kir::matrix`), runs the instruction, and
//! stores D; the test checks each lane's D elements, at the positions the ISA gives, against
//! a matrix product computed here. Inputs are small integers, so every product and sum is
//! exact in every type and the comparison is bit-exact.

use gpu::{DevPtr, Gpu, KernelArg};

/// An element position affine in groupID `g` and threadID_in_group `t`:
/// `(g_coef * g + t_coef * t + constant)`.
#[derive(Clone, Copy)]
struct Affine(u32, u32, u32);

/// (row, column) of one fragment element.
type Pos = (Affine, Affine);

/// `A[r][k]`, `B[k][n]` and `C[r][n]`: small integers, each `(x row + y col) % m - o` as
/// the kernels compute them ([`A_VALUE`], [`B_VALUE`], [`C_VALUE`]).
fn value((x, y, m, o): (u32, u32, u32, i64), row: u32, col: u32) -> i64 {
    i64::from((x * row + y * col) % m) - o
}
const A_VALUE: (u32, u32, u32, i64) = (3, 5, 9, 4);
const B_VALUE: (u32, u32, u32, i64) = (7, 2, 5, 2);
const C_VALUE: (u32, u32, u32, i64) = (1, 2, 7, 3);

/// How a fragment's elements are typed in registers.
#[derive(Clone, Copy, PartialEq)]
enum Elem {
    F16,
    Bf16,
    Tf32,
    F32,
    F64,
    S8,
    S32,
}

impl Elem {
    fn per_reg(self) -> usize {
        match self {
            Elem::F16 | Elem::Bf16 => 2,
            Elem::S8 => 4,
            _ => 1,
        }
    }
    fn name(self) -> &'static str {
        match self {
            Elem::F16 => "f16",
            Elem::Bf16 => "bf16",
            Elem::Tf32 => "tf32",
            Elem::F32 => "f32",
            Elem::F64 => "f64",
            Elem::S8 => "s8",
            Elem::S32 => "s32",
        }
    }
}

/// PTX that computes `value(row, col)` of `table[i]` into element registers and packs them
/// into `%{prefix}{j}` registers.
fn fragment(
    out: &mut String,
    prefix: &str,
    table: &[Pos],
    e: Elem,
    value: (u32, u32, u32, i64),
) -> Vec<String> {
    let (rm, cm, modulo, off) = value;
    let mut regs = Vec::new();
    for (j, chunk) in table.chunks(e.per_reg()).enumerate() {
        let reg = format!("%{prefix}{j}");
        out.push_str("    mov.b32 %r30, 0;\n");
        for (k, (row, col)) in chunk.iter().enumerate() {
            // row and col from g (%r10) and t (%r11); the value (rm row + cm col) % modulo - off.
            out.push_str(&format!(
                "    mul.lo.u32 %r20, %r10, {};\n    mad.lo.u32 %r20, %r11, {}, %r20;\n    add.u32 %r20, %r20, {};\n",
                row.0, row.1, row.2
            ));
            out.push_str(&format!(
                "    mul.lo.u32 %r21, %r10, {};\n    mad.lo.u32 %r21, %r11, {}, %r21;\n    add.u32 %r21, %r21, {};\n",
                col.0, col.1, col.2
            ));
            out.push_str(&format!(
                "    mul.lo.u32 %r22, %r20, {rm};\n    mad.lo.u32 %r22, %r21, {cm}, %r22;\n    rem.u32 %r22, %r22, {modulo};\n    sub.s32 %r22, %r22, {off};\n"
            ));
            match e {
                Elem::F16 => out.push_str(&format!(
                    "    cvt.rn.f16.s32 %h1, %r22;\n    cvt.u32.u16 %r23, %h1;\n    shl.b32 %r23, %r23, {};\n    or.b32 %r30, %r30, %r23;\n",
                    16 * k
                )),
                Elem::Bf16 => out.push_str(&format!(
                    "    cvt.rn.f32.s32 %f1, %r22;\n    cvt.rn.bf16.f32 %h1, %f1;\n    cvt.u32.u16 %r23, %h1;\n    shl.b32 %r23, %r23, {};\n    or.b32 %r30, %r30, %r23;\n",
                    16 * k
                )),
                Elem::S8 => out.push_str(&format!(
                    "    and.b32 %r23, %r22, 255;\n    shl.b32 %r23, %r23, {};\n    or.b32 %r30, %r30, %r23;\n",
                    8 * k
                )),
                Elem::Tf32 | Elem::F32 => {
                    out.push_str("    cvt.rn.f32.s32 %f1, %r22;\n    mov.b32 %r30, %f1;\n")
                }
                Elem::S32 => out.push_str("    mov.b32 %r30, %r22;\n"),
                Elem::F64 => out.push_str(&format!("    cvt.rn.f64.s32 {reg}, %r22;\n")),
            }
        }
        match e {
            Elem::F32 => out.push_str(&format!("    mov.b32 {reg}, %r30;\n")),
            Elem::F64 => {}
            _ => out.push_str(&format!("    mov.b32 {reg}, %r30;\n")),
        }
        regs.push(reg);
    }
    regs
}

struct MmaCase {
    shape: (u32, u32, u32),
    ab: Elem,
    acc: Elem,
    a: Vec<Pos>,
    b: Vec<Pos>,
    c: Vec<Pos>,
}

fn reg_decl(e: Elem, prefix: &str) -> String {
    match e {
        Elem::F32 => format!("    .reg .f32 %{prefix}<8>;\n"),
        Elem::F64 => format!("    .reg .f64 %{prefix}<8>;\n"),
        Elem::S32 => format!("    .reg .s32 %{prefix}<8>;\n"),
        _ => format!("    .reg .b32 %{prefix}<8>;\n"),
    }
}

/// The kernel for one case; each lane stores its D registers as 32-bit words.
fn mma_kernel(c: &MmaCase) -> String {
    let mut body = String::new();
    let a = fragment(&mut body, "ra", &c.a, c.ab, A_VALUE);
    let b = fragment(&mut body, "rb", &c.b, c.ab, B_VALUE);
    let cregs = fragment(&mut body, "rc", &c.c, c.acc, C_VALUE);
    let (m, n, k) = c.shape;
    let d: Vec<String> = (0..cregs.len()).map(|j| format!("%rd{j}")).collect();
    let acc = c.acc.name();
    let ab = c.ab.name();
    body.push_str(&format!(
        "    mma.sync.aligned.m{m}n{n}k{k}.row.col.{acc}.{ab}.{ab}.{acc} {{{}}}, {{{}}}, {{{}}}, {{{}}};\n",
        d.join(", "),
        a.join(", "),
        b.join(", "),
        cregs.join(", ")
    ));
    let words = if c.acc == Elem::F64 { 2 } else { 1 };
    body.push_str(&format!(
        "    mul.wide.u32 %rx2, %r1, {};\n    add.s64 %rx3, %rx1, %rx2;\n",
        4 * words * d.len()
    ));
    for (j, reg) in d.iter().enumerate() {
        let st = if c.acc == Elem::F64 {
            "st.global.f64"
        } else {
            "st.global.b32"
        };
        body.push_str(&format!("    {st} [%rx3+{}], {reg};\n", 4 * words * j));
    }
    format!(
        r#".version 8.0
.target sm_80
.address_size 64
.visible .entry k(.param .u64 out)
{{
    .reg .b32 %r<40>;
    .reg .b64 %rx<8>;
    .reg .f32 %f<4>;
    .reg .b16 %h<4>;
{}{}{}{}
    ld.param.u64 %rx1, [out];
    cvta.to.global.u64 %rx1, %rx1;
    mov.u32 %r1, %laneid;
    shr.u32 %r10, %r1, 2;
    and.b32 %r11, %r1, 3;
{body}
    ret;
}}
"#,
        reg_decl(c.ab, "ra").replace(".f32", ".b32"),
        reg_decl(c.ab, "rb").replace(".f32", ".b32"),
        reg_decl(c.acc, "rc"),
        reg_decl(c.acc, "rd"),
    )
}

/// Runs `ptx` on one warp, functionally and timed on `preset`; returns the words of `out`.
fn run_both(ptx: &str, words: u64, preset: &str) -> Vec<u32> {
    let read = |gpu: &mut Gpu, out: DevPtr| -> Vec<u32> {
        gpu.copy_from_device(out, words * 4)
            .unwrap()
            .chunks(4)
            .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
            .collect()
    };
    let mut gpu = Gpu::new();
    let m = gpu
        .load_ptx("mma.ptx", ptx)
        .unwrap_or_else(|e| panic!("{e}\n{ptx}"));
    let out = gpu.alloc(words * 4);
    gpu.launch(m, "k", [1, 1, 1], [32, 1, 1], 0, &[KernelArg::Ptr(out)])
        .unwrap_or_else(|e| panic!("{e}"));
    let functional = read(&mut gpu, out);

    let timing = gpu::timing::TimedGpu::new(gpu::config::GpuConfig::preset(preset).unwrap());
    let mut gpu = Gpu::timed(timing).unwrap();
    let m = gpu.load_ptx("mma.ptx", ptx).unwrap();
    let out = gpu.alloc(words * 4);
    gpu.launch_timed(
        m,
        "k",
        [1, 1, 1],
        [32, 1, 1],
        0,
        &[KernelArg::Ptr(out)],
        &mut |_| {},
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let timed = read(&mut gpu, out);
    assert_eq!(functional, timed, "the engines disagree");
    functional
}

/// Decodes a D word of the accumulator type as an integer.
fn word_value(acc: Elem, words: &[u32]) -> i64 {
    match acc {
        Elem::F32 => f32::from_bits(words[0]) as i64,
        Elem::S32 => i64::from(words[0] as i32),
        Elem::F64 => f64::from_bits(u64::from(words[0]) | u64::from(words[1]) << 32) as i64,
        Elem::F16 => {
            // Two f16 halves are not needed by these cases.
            unreachable!("f16 accumulators are checked elsewhere")
        }
        _ => unreachable!(),
    }
}

fn check_mma(c: &MmaCase, preset: &str) {
    let (_, _, k) = c.shape;
    let words_per = if c.acc == Elem::F64 { 2 } else { 1 };
    let regs = c.c.len();
    let out = run_both(&mma_kernel(c), (32 * regs * words_per) as u64, preset);
    for lane in 0..32u32 {
        let (g, t) = (lane >> 2, lane % 4);
        for (i, (row, col)) in c.c.iter().enumerate() {
            let r = row.0 * g + row.1 * t + row.2;
            let n = col.0 * g + col.1 * t + col.2;
            let want = value(C_VALUE, r, n)
                + (0..k)
                    .map(|kk| value(A_VALUE, r, kk) * value(B_VALUE, kk, n))
                    .sum::<i64>();
            let at = (lane as usize * regs + i) * words_per;
            let got = word_value(c.acc, &out[at..at + words_per]);
            assert_eq!(got, want, "lane {lane} element {i} (row {r}, col {n})");
        }
    }
}

// The ISA's layouts (§9.7.14.5), as (row, column) affine in (g, t), element by element.
fn acc_m16n8() -> Vec<Pos> {
    // c0, c1: row g, cols 2t, 2t+1; c2, c3: row g + 8.
    vec![
        (Affine(1, 0, 0), Affine(0, 2, 0)),
        (Affine(1, 0, 0), Affine(0, 2, 1)),
        (Affine(1, 0, 8), Affine(0, 2, 0)),
        (Affine(1, 0, 8), Affine(0, 2, 1)),
    ]
}

#[test]
fn mma_m16n8k16_f16_matches_the_isa_layout() {
    // Figure 79: a_i row g (+8 for i = 2, 3, 6, 7), col 2t + (i & 1) (+8 for i >= 4).
    let a = (0..8)
        .map(|i| {
            (
                Affine(1, 0, 8 * ((i >> 1) & 1)),
                Affine(0, 2, (i & 1) + 8 * (i >> 2)),
            )
        })
        .collect();
    // Figure 81: b_i row 2t + (i & 1) (+8 for i >= 2), col g.
    let b = (0..4)
        .map(|i| (Affine(0, 2, (i & 1) + 8 * (i >> 1)), Affine(1, 0, 0)))
        .collect();
    for (ab, preset) in [(Elem::F16, "a100"), (Elem::Bf16, "h100")] {
        check_mma(
            &MmaCase {
                shape: (16, 8, 16),
                ab,
                acc: Elem::F32,
                a: Vec::clone(&a),
                b: Vec::clone(&b),
                c: acc_m16n8(),
            },
            preset,
        );
    }
}

#[test]
fn mma_m16n8k8_tf32_matches_the_isa_layout() {
    // Figure 72: a0 (g, t), a1 (g + 8, t), a2 (g, t + 4), a3 (g + 8, t + 4).
    let a = vec![
        (Affine(1, 0, 0), Affine(0, 1, 0)),
        (Affine(1, 0, 8), Affine(0, 1, 0)),
        (Affine(1, 0, 0), Affine(0, 1, 4)),
        (Affine(1, 0, 8), Affine(0, 1, 4)),
    ];
    // b0 (t, g), b1 (t + 4, g).
    let b = vec![
        (Affine(0, 1, 0), Affine(1, 0, 0)),
        (Affine(0, 1, 4), Affine(1, 0, 0)),
    ];
    check_mma(
        &MmaCase {
            shape: (16, 8, 8),
            ab: Elem::Tf32,
            acc: Elem::F32,
            a,
            b,
            c: acc_m16n8(),
        },
        "a100",
    );
}

#[test]
fn mma_m16n8k32_s8_matches_the_isa_layout() {
    // Figure 88: a_i row g for i in 0..4 and 8..12, else g + 8; col 4t + (i & 3) (+16 for
    // i >= 8).
    let a = (0..16)
        .map(|i| {
            (
                Affine(1, 0, 8 * ((i >> 2) & 1)),
                Affine(0, 4, (i & 3) + 16 * (i >> 3)),
            )
        })
        .collect();
    // b_i row 4t + (i & 3) (+16 for i >= 4), col g.
    let b = (0..8)
        .map(|i| (Affine(0, 4, (i & 3) + 16 * (i >> 2)), Affine(1, 0, 0)))
        .collect();
    check_mma(
        &MmaCase {
            shape: (16, 8, 32),
            ab: Elem::S8,
            acc: Elem::S32,
            a,
            b,
            c: acc_m16n8(),
        },
        "h100",
    );
}

#[test]
fn mma_m8n8k4_f64_matches_the_isa_layout() {
    // a0 (g, t); b0 (t, g); c0, c1 (g, 2t + i).
    check_mma(
        &MmaCase {
            shape: (8, 8, 4),
            ab: Elem::F64,
            acc: Elem::F64,
            a: vec![(Affine(1, 0, 0), Affine(0, 1, 0))],
            b: vec![(Affine(0, 1, 0), Affine(1, 0, 0))],
            c: vec![
                (Affine(1, 0, 0), Affine(0, 2, 0)),
                (Affine(1, 0, 0), Affine(0, 2, 1)),
            ],
        },
        "a100",
    );
}

/// `ldmatrix` of four 8×8 matrices of 16-bit values `0x100 j + 8 r + c` (matrix j, row r,
/// column c) in shared memory, rows 16 bytes apart and each matrix's row addresses supplied
/// by its 8 lanes: lane l's register j holds row l / 4, columns 2 (l % 4) and +1 (§9.7.14.5.15),
/// or with `.trans` the same positions of the transpose.
#[test]
fn ldmatrix_distributes_rows_as_the_isa_says() {
    for trans in [false, true] {
        let t = if trans { ".trans" } else { "" };
        let ptx = format!(
            r#".version 8.0
.target sm_80
.address_size 64
.visible .entry k(.param .u64 out)
{{
    .reg .b32 %r<16>;
    .reg .b64 %rx<8>;
    .reg .b16 %h<2>;
    .reg .pred %p<2>;
    .shared .align 16 .b8 tile[512];
    ld.param.u64 %rx1, [out];
    cvta.to.global.u64 %rx1, %rx1;
    mov.u32 %r1, %laneid;
    // Each lane writes 8 elements: element e = 8 lane + q, matrix e / 64, row (e / 8) % 8,
    // column e % 8, at byte 2 e.
    mov.u32 %r2, 0;
FILL:
    shl.b32 %r3, %r1, 3;
    add.u32 %r3, %r3, %r2;
    shr.u32 %r4, %r3, 6;
    shl.b32 %r4, %r4, 8;
    and.b32 %r5, %r3, 63;
    add.u32 %r4, %r4, %r5;
    cvt.u16.u32 %h1, %r4;
    mov.u32 %r6, tile;
    shl.b32 %r7, %r3, 1;
    add.u32 %r6, %r6, %r7;
    st.shared.u16 [%r6], %h1;
    add.u32 %r2, %r2, 1;
    setp.lt.u32 %p1, %r2, 8;
    @%p1 bra FILL;
    bar.sync 0;
    // Lane l gives the address of row l % 8 of matrix l / 8.
    mov.u32 %r8, tile;
    shl.b32 %r9, %r1, 4;
    add.u32 %r8, %r8, %r9;
    ldmatrix.sync.aligned.m8n8.x4{t}.shared.b16 {{%r10, %r11, %r12, %r13}}, [%r8];
    mul.wide.u32 %rx2, %r1, 16;
    add.s64 %rx3, %rx1, %rx2;
    st.global.v4.b32 [%rx3], {{%r10, %r11, %r12, %r13}};
    ret;
}}
"#
        );
        let out = run_both(&ptx, 128, "a100");
        for lane in 0..32u32 {
            for j in 0..4u32 {
                let word = out[(lane * 4 + j) as usize];
                for i in 0..2u32 {
                    let (r, c) = (lane / 4, 2 * (lane % 4) + i);
                    let (r, c) = if trans { (c, r) } else { (r, c) };
                    let want = 0x100 * j + 8 * r + c;
                    let got = (word >> (16 * i)) & 0xffff;
                    assert_eq!(
                        got, want,
                        "trans {trans} lane {lane} matrix {j} element {i}"
                    );
                }
            }
        }
    }
}

/// Runs `ptx` (entry `k(.param .u64 out, .param .u64 in)`) on one warp with `input` in a
/// buffer, functionally and timed on `preset`; returns the words of `out`.
fn run_with_input(ptx: &str, input: &[u8], words: u64, preset: &str) -> Vec<u32> {
    let go = |gpu: &mut Gpu, timed: bool| -> Vec<u32> {
        let m = gpu
            .load_ptx("t.ptx", ptx)
            .unwrap_or_else(|e| panic!("{e}\n{ptx}"));
        let out = gpu.alloc(words * 4);
        let inp = gpu.alloc(input.len() as u64);
        gpu.copy_to_device(inp, input).unwrap();
        let args = [KernelArg::Ptr(out), KernelArg::Ptr(inp)];
        if timed {
            gpu.launch_timed(m, "k", [1, 1, 1], [32, 1, 1], 0, &args, &mut |_| {})
                .map(|_| ())
        } else {
            gpu.launch(m, "k", [1, 1, 1], [32, 1, 1], 0, &args)
                .map(|_| ())
        }
        .unwrap_or_else(|e| panic!("{e}"));
        gpu.copy_from_device(out, words * 4)
            .unwrap()
            .chunks(4)
            .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
            .collect()
    };
    let functional = go(&mut Gpu::new(), false);
    let timing = gpu::timing::TimedGpu::new(gpu::config::GpuConfig::preset(preset).unwrap());
    let timed = go(&mut Gpu::timed(timing).unwrap(), true);
    assert_eq!(functional, timed, "the engines disagree");
    functional
}

fn f16_bits(v: f32) -> u16 {
    // Small integers only: exact in f16.
    assert!(v.fract() == 0.0 && v.abs() <= 2048.0);
    if v == 0.0 {
        return 0;
    }
    let (sign, m) = (if v < 0.0 { 0x8000 } else { 0 }, v.abs() as u32);
    let e = 31 - m.leading_zeros();
    let frac = (m << (10 - e.min(10))) & 0x3ff;
    sign | ((e + 15) << 10) as u16 | frac as u16
}

/// `wmma.load`/`wmma.mma`/`wmma.store` for every shape and type: D = A·B + C with A
/// row-major in an M×(K+8) array (an explicit stride, padding that must not be read), B
/// column-major and C row-major at their dense default strides, D stored row-major, checked
/// against the product computed here. The fragment layout is opaque in PTX; what must hold
/// is that a load, the product and a store together compute the matrix product. The register
/// counts are the ISA's (§9.7.14.4.1).
#[test]
fn wmma_computes_the_tile_product() {
    // (m, n, k, multiplicand type, accumulator type, A, B and C registers).
    type Case = (u32, u32, u32, &'static str, &'static str, [u32; 3]);
    let cases: [Case; 13] = [
        (16, 16, 16, "f16", "f32", [8, 8, 8]),
        (8, 32, 16, "f16", "f32", [8, 8, 8]),
        (8, 32, 16, "f16", "f16", [8, 8, 4]),
        (8, 32, 16, "bf16", "f32", [2, 8, 8]),
        (8, 32, 16, "s8", "s32", [1, 4, 8]),
        (16, 16, 16, "f16", "f16", [8, 8, 4]),
        (32, 8, 16, "f16", "f32", [8, 8, 8]),
        (16, 16, 16, "bf16", "f32", [4, 4, 8]),
        (32, 8, 16, "bf16", "f32", [8, 2, 8]),
        (16, 16, 16, "s8", "s32", [2, 2, 8]),
        (32, 8, 16, "u8", "s32", [4, 1, 8]),
        (16, 16, 8, "tf32", "f32", [4, 4, 8]),
        (8, 8, 4, "f64", "f64", [1, 1, 2]),
    ];
    for (m, n, k, ab, acc, [na, nb, nc]) in cases {
        let unsigned = ab == "u8";
        let a = |r: u32, c: u32| ((3 * r + 5 * c) % 9) as f64 - if unsigned { 0.0 } else { 4.0 };
        let b = |r: u32, c: u32| ((7 * r + 2 * c) % 5) as f64 - if unsigned { 0.0 } else { 2.0 };
        let c = |r: u32, c: u32| r as f64 - c as f64;
        let enc = |ty: &str, v: f64| -> Vec<u8> {
            match ty {
                "f16" => f16_bits(v as f32).to_le_bytes().to_vec(),
                "bf16" => (((v as f32).to_bits() >> 16) as u16).to_le_bytes().to_vec(),
                "tf32" | "f32" => (v as f32).to_le_bytes().to_vec(),
                "s8" | "u8" => vec![v as i8 as u8],
                "s32" => (v as i32).to_le_bytes().to_vec(),
                "f64" => v.to_le_bytes().to_vec(),
                _ => unreachable!(),
            }
        };
        let mut input = Vec::new();
        let lda = k + 8;
        for r in 0..m {
            for kk in 0..lda {
                input.extend(enc(ab, if kk < k { a(r, kk) } else { 99.0 }));
            }
        }
        while input.len() % 16 != 0 {
            input.push(0);
        }
        let b_at = input.len();
        for col in 0..n {
            for kk in 0..k {
                input.extend(enc(ab, b(kk, col)));
            }
        }
        while input.len() % 16 != 0 {
            input.push(0);
        }
        let c_at = input.len();
        for r in 0..m {
            for col in 0..n {
                input.extend(enc(acc, c(r, col)));
            }
        }
        let shape = format!("m{m}n{n}k{k}");
        let list = |p: &str, count: u32| {
            (0..count)
                .map(|x| format!("%{p}{x}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let (ab_reg, acc_reg) = (
            if ab == "f64" { "f64" } else { "b32" },
            match acc {
                "f16" => "b32",
                t => t,
            },
        );
        let types = if ab == "f16" {
            format!("{acc}.{acc}")
        } else {
            format!("{acc}.{ab}.{ab}.{acc}")
        };
        let ptx = format!(
            r#".version 8.0
.target sm_80
.address_size 64
.visible .entry k(.param .u64 out, .param .u64 in)
{{
    .reg .b32 %r<4>;
    .reg .{ab_reg} %a<8>;
    .reg .{ab_reg} %b<8>;
    .reg .{acc_reg} %c<8>;
    .reg .{acc_reg} %d<8>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    ld.param.u64 %rd2, [in];
    cvta.to.global.u64 %rd2, %rd2;
    mov.u32 %r1, {lda};
    wmma.load.a.sync.aligned.row.{shape}.global.{ab} {{{la}}}, [%rd2], %r1;
    wmma.load.b.sync.aligned.col.{shape}.global.{ab} {{{lb}}}, [%rd2+{b_at}];
    wmma.load.c.sync.aligned.row.{shape}.global.{acc} {{{lc}}}, [%rd2+{c_at}];
    wmma.mma.sync.aligned.row.col.{shape}.{types} {{{ld}}}, {{{la}}}, {{{lb}}}, {{{lc}}};
    wmma.store.d.sync.aligned.row.{shape}.global.{acc} [%rd1], {{{ld}}}, {n};
    ret;
}}
"#,
            la = list("a", na),
            lb = list("b", nb),
            lc = list("c", nc),
            ld = list("d", nc),
        );
        let size = match acc {
            "f16" => 2,
            "f64" => 8,
            _ => 4,
        };
        let words = u64::from(m * n * size / 4);
        let out = run_with_input(&ptx, &input, words, "a100");
        let bytes: Vec<u8> = out.iter().flat_map(|w| w.to_le_bytes()).collect();
        for r in 0..m {
            for col in 0..n {
                let want = c(r, col) + (0..k).map(|kk| a(r, kk) * b(kk, col)).sum::<f64>();
                let at = ((r * n + col) * size) as usize;
                let got = match acc {
                    "f16" => {
                        let h = u16::from_le_bytes([bytes[at], bytes[at + 1]]);
                        f64::from(f16_value_of(h))
                    }
                    "f32" => f64::from(f32::from_le_bytes(bytes[at..at + 4].try_into().unwrap())),
                    "s32" => f64::from(i32::from_le_bytes(bytes[at..at + 4].try_into().unwrap())),
                    _ => f64::from_le_bytes(bytes[at..at + 8].try_into().unwrap()),
                };
                assert_eq!(got, want, "{shape} .{ab} into .{acc}: D[{r}][{col}]");
            }
        }
    }
}

/// The value of f16 bits that hold a small integer (the inverse of `f16_bits`).
fn f16_value_of(h: u16) -> f32 {
    let e = i32::from((h >> 10) & 0x1f);
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    if e == 0 {
        return sign * f32::from(h & 0x3ff) * 2f32.powi(-24);
    }
    sign * (1024.0 + f32::from(h & 0x3ff)) * 2f32.powi(e - 25)
}

/// `cp.async` copies 16 bytes per lane into shared memory, zero-filling past `src-size`
/// (lane l reads l % 17 bytes); the data is read back after `wait_group 0`.
#[test]
fn cp_async_copies_and_zero_fills() {
    let input: Vec<u8> = (0..512u32).map(|i| (i * 7 + 1) as u8).collect();
    let ptx = r#".version 8.0
.target sm_80
.address_size 64
.visible .entry k(.param .u64 out, .param .u64 in)
{
    .reg .b32 %r<16>;
    .reg .b64 %rd<8>;
    .shared .align 16 .b8 buf[512];
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    ld.param.u64 %rd2, [in];
    cvta.to.global.u64 %rd2, %rd2;
    mov.u32 %r1, %laneid;
    shl.b32 %r2, %r1, 4;
    mov.u32 %r3, buf;
    add.u32 %r3, %r3, %r2;
    cvt.u64.u32 %rd3, %r2;
    add.s64 %rd4, %rd2, %rd3;
    rem.u32 %r4, %r1, 17;
    cp.async.cg.shared.global [%r3], [%rd4], 16, %r4;
    cp.async.commit_group;
    cp.async.wait_group 0;
    ld.shared.v4.b32 {%r5, %r6, %r7, %r8}, [%r3];
    mul.wide.u32 %rd5, %r1, 16;
    add.s64 %rd6, %rd1, %rd5;
    st.global.v4.b32 [%rd6], {%r5, %r6, %r7, %r8};
    ret;
}
"#;
    let out = run_with_input(ptx, &input, 128, "a100");
    let bytes: Vec<u8> = out.iter().flat_map(|w| w.to_le_bytes()).collect();
    for lane in 0..32usize {
        let valid = lane % 17;
        for b in 0..16 {
            let want = if b < valid { input[lane * 16 + b] } else { 0 };
            assert_eq!(bytes[lane * 16 + b], want, "lane {lane} byte {b}");
        }
    }
}

/// `cvt.{rn,rz}{.relu}{.satfinite}.{f16x2,bf16x2}.f32 d, a, b` packs `a` high and `b` low.
#[test]
fn cvt_packs_two_floats() {
    let one = |modifiers: &str, a: f32, b: f32| -> u32 {
        let ptx = format!(
            r#".version 8.0
.target sm_80
.address_size 64
.visible .entry k(.param .u64 out, .param .u64 in)
{{
    .reg .b32 %r<4>;
    .reg .f32 %f<4>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    mov.b32 %f1, 0f{:08X};
    mov.b32 %f2, 0f{:08X};
    cvt.{modifiers}.f32 %r1, %f1, %f2;
    st.global.u32 [%rd1], %r1;
    ret;
}}
"#,
            a.to_bits(),
            b.to_bits()
        );
        run_with_input(&ptx, &[0; 4], 1, "a100")[0]
    };
    // f16: 1.0 = 0x3c00, -2.5 = 0xc100, 65504 = 0x7bff (the largest finite).
    assert_eq!(one("rn.f16x2", 1.0, -2.5), 0x3c00_c100);
    assert_eq!(one("rn.relu.f16x2", 1.0, -2.5), 0x3c00_0000);
    assert_eq!(one("rn.f16x2", 1.0e6, 0.0), 0x7c00_0000);
    assert_eq!(one("rn.satfinite.f16x2", 1.0e6, -1.0e6), 0x7bff_fbff);
    // 1 + 2^-11 is halfway between two f16 values: .rn goes to even (1.0), .rz down too;
    // 1 + 3 * 2^-12 rounds up under .rn only.
    let x = 1.0 + 3.0 * (2.0f32).powi(-12);
    assert_eq!(one("rn.f16x2", x, x), 0x3c01_3c01);
    assert_eq!(one("rz.f16x2", x, x), 0x3c00_3c00);
    // bf16: 1.0 = 0x3f80, 3.0 = 0x4040.
    assert_eq!(one("rn.bf16x2", 1.0, 3.0), 0x3f80_4040);
}

/// The FP8 conversions (sm_89+): E4M3 has bias 7, 3 mantissa bits, no infinities and its
/// largest finite value 448 = 0x7e; E5M2 has bias 15, 2 mantissa bits, infinities, and 57344
/// = 0x7b as its largest finite value. Expected bits are worked out by hand from those.
#[test]
fn cvt_converts_to_and_from_fp8() {
    let run = |body: &str| -> u32 {
        let ptx = format!(
            r#".version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 out, .param .u64 in)
{{
    .reg .b16 %h<4>;
    .reg .b32 %r<4>;
    .reg .f32 %f<4>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
{body}
    st.global.u32 [%rd1], %r1;
    ret;
}}
"#
        );
        run_with_input(&ptx, &[0; 4], 1, "h100")[0]
    };
    let to_fp8 = |fmt: &str, a: f32, b: f32| -> u32 {
        run(&format!(
            "    mov.b32 %f1, 0f{:08X};
    mov.b32 %f2, 0f{:08X};
                 cvt.rn.satfinite.{fmt}.f32 %h1, %f1, %f2;
    cvt.u32.u16 %r1, %h1;",
            a.to_bits(),
            b.to_bits()
        ))
    };
    let two = |e: i32| 2f32.powi(e);
    // E4M3: 1.0 = 0x38, -2.0 = 0xc0; `a` goes to the upper byte.
    assert_eq!(to_fp8("e4m3x2", 1.0, -2.0), 0x38c0);
    // 448 is the largest finite; 500 and infinity saturate to it; NaN is 0x7f.
    assert_eq!(to_fp8("e4m3x2", 448.0, 500.0), 0x7e7e);
    assert_eq!(to_fp8("e4m3x2", f32::NEG_INFINITY, f32::NAN), 0xfe7f);
    // Round half to even: 1 + 1/16 → 1.0 (0x38); 1 + 3/16 → 1.25 (0x3a).
    assert_eq!(to_fp8("e4m3x2", 1.0625, 1.1875), 0x383a);
    // Subnormals: 2^-9 is the smallest (0x01); 2^-10 ties to even, 0; 3 * 2^-10 → 2 * 2^-9.
    assert_eq!(to_fp8("e4m3x2", two(-9), two(-10)), 0x0100);
    assert_eq!(to_fp8("e4m3x2", 3.0 * two(-10), 0.0), 0x0200);
    // E5M2: 1.0 = 0x3c; infinity saturates to 57344 = 0x7b; 2^-16 is the smallest subnormal.
    assert_eq!(to_fp8("e5m2x2", 1.0, f32::INFINITY), 0x3c7b);
    assert_eq!(to_fp8("e5m2x2", two(-16), -57344.0), 0x01fb);
    // `.relu`: negatives become +0.
    assert_eq!(
        run("    mov.b32 %f1, 0fC0000000;
    mov.b32 %f2, 0f3F800000;
                 cvt.rn.satfinite.relu.e4m3x2.f32 %h1, %f1, %f2;
    cvt.u32.u16 %r1, %h1;"),
        0x0038
    );
    // From f16x2: {1.0, -2.0} as f16 (0x3c00, 0xc000).
    assert_eq!(
        run("    mov.b32 %r2, 0x3c00c000;
    cvt.rn.satfinite.e4m3x2.f16x2 %h1, %r2;
                 cvt.u32.u16 %r1, %h1;"),
        0x38c0
    );
    // Back to f16x2: E4M3 448 (0x7e) is f16 0x5f00; 2^-9 (0x01) is f16 0x1800.
    let to_f16 = |fmt: &str, bits: u16| -> u32 {
        run(&format!(
            "    mov.b16 %h1, {bits};
    cvt.rn.f16x2.{fmt} %r1, %h1;"
        ))
    };
    assert_eq!(to_f16("e4m3x2", 0x7e01), 0x5f00_1800);
    // E4M3 NaN (0x7f) is f16's canonical NaN; negative zero stays negative.
    assert_eq!(to_f16("e4m3x2", 0x7f80), 0x7fff_8000);
    // E5M2 is the upper byte of an f16: 0x3c is 1.0, 0x7c infinity, 0xc0 -2.0.
    assert_eq!(to_f16("e5m2x2", 0x3c7c), 0x3c00_7c00);
    assert_eq!(to_f16("e5m2x2", 0xc07f), 0xc000_7fff);
}

/// A one-warp kernel running `body` `n` times (the loop counter in `%r39`, counted before
/// the body so that the loop's own instructions overlap it); the cycles it takes timed on
/// `preset`, or the launch's error.
fn timed_loop(body: &str, n: u32, preset: &str) -> Result<u64, gpu::GpuError> {
    let ptx = format!(
        r#".version 8.0
.target sm_80
.address_size 64
.visible .entry k(.param .u64 out, .param .u64 in)
{{
    .reg .b32 %r<40>;
    .reg .f32 %f<40>;
    .reg .f64 %fd<8>;
    .reg .b64 %rd<8>;
    .reg .pred %p<2>;
    .shared .align 16 .b8 buf[4096];
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    ld.param.u64 %rd2, [in];
    cvta.to.global.u64 %rd2, %rd2;
    mov.u32 %r1, %laneid;
    mov.u32 %r39, 0;
L:
    add.u32 %r38, %r39, 1;
    setp.lt.u32 %p1, %r38, {n};
{body}
    mov.u32 %r39, %r38;
    @%p1 bra L;
    st.global.f32 [%rd1], %f0;
    ret;
}}
"#
    );
    let timing = gpu::timing::TimedGpu::new(gpu::config::GpuConfig::preset(preset).unwrap());
    let mut gpu = Gpu::timed(timing).unwrap();
    let m = gpu
        .load_ptx("t.ptx", &ptx)
        .unwrap_or_else(|e| panic!("{e}\n{ptx}"));
    let out = gpu.alloc(64);
    let inp = gpu.alloc(1 << 20);
    let args = [KernelArg::Ptr(out), KernelArg::Ptr(inp)];
    gpu.launch_timed(m, "k", [1, 1, 1], [32, 1, 1], 0, &args, &mut |_| {})
        .map(|s| s.cycles)
}

const MMA_CHAIN: &str = "    mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f0, %f1, %f2, %f3}, {%r2, %r3, %r4, %r5}, {%r6, %r7}, {%f0, %f1, %f2, %f3};\n";

/// On a GPU without tensor cores (GTX480), or whose tensor cores lack the type (V100 and
/// bf16), an `mma` is an error naming the instruction, its line and the GPU.
#[test]
fn mma_needs_tensor_cores_for_its_types() {
    let e = timed_loop(MMA_CHAIN, 1, "gtx480").unwrap_err().to_string();
    assert!(
        e.contains("mma.sync")
            && e.contains("no tensor cores")
            && e.contains("gtx480")
            && e.contains("t.ptx:"),
        "{e}"
    );
    let bf16 = MMA_CHAIN.replace(".f16.f16", ".bf16.bf16");
    let e = timed_loop(&bf16, 1, "v100").unwrap_err().to_string();
    assert!(e.contains(".bf16") && e.contains("v100"), "{e}");
    assert!(timed_loop(&bf16, 1, "a100").is_ok());
}

/// The tensor core's timing (configs/a100.toml: 256 multiply-adds per cycle, latency 16): a
/// chain of dependent m16n8k16 (2,048 multiply-adds each) takes 8 + 16 cycles per `mma`;
/// eight independent chains keep the unit busy, one `mma` per 8 cycles.
#[test]
fn tensor_core_latency_and_throughput_follow_the_preset() {
    let per = |body: &str| {
        let long = timed_loop(body, 64, "a100").unwrap();
        let short = timed_loop(body, 32, "a100").unwrap();
        (long - short) as f64 / 32.0
    };
    let dependent = per(MMA_CHAIN);
    assert!(
        (dependent - 24.0).abs() <= 2.0,
        "{dependent} cycles per dependent mma"
    );
    let independent: String = (0..8)
        .map(|c| {
            MMA_CHAIN.replace(
                "{%f0, %f1, %f2, %f3}",
                &format!(
                    "{{%f{0}, %f{1}, %f{2}, %f{3}}}",
                    4 * c,
                    4 * c + 1,
                    4 * c + 2,
                    4 * c + 3
                ),
            )
        })
        .collect();
    // 64 cycles of tensor-core work per iteration; in-order issue adds the branch, the
    // refetch after it and the counter's dependent compare (a few cycles) on top.
    let eight = per(&independent);
    assert!(
        (64.0..=72.0).contains(&eight),
        "{eight} cycles per 8 independent mma"
    );
    // H100's tensor core is twice as fast (512 per cycle): 4 + 16 per dependent mma.
    let long = timed_loop(MMA_CHAIN, 64, "h100").unwrap();
    let short = timed_loop(MMA_CHAIN, 32, "h100").unwrap();
    let h100 = (long - short) as f64 / 32.0;
    assert!(
        (h100 - 20.0).abs() <= 2.0,
        "{h100} cycles per dependent mma on h100"
    );
}

/// `cp.async.wait_group` waits for the copies of its groups: a warp that waits for each copy
/// takes about a global-memory round trip per iteration; one that waits only for the group
/// before the last (`wait_group 1`), with one new group per iteration, overlaps the copies.
#[test]
fn cp_async_wait_group_waits_for_its_groups() {
    // Each iteration copies a fresh 16-byte chunk per lane (a cold line: DRAM latency).
    let copy = |wait: u32| {
        format!(
            r#"    shl.b32 %r2, %r39, 9;
    shl.b32 %r3, %r1, 4;
    add.u32 %r2, %r2, %r3;
    cvt.u64.u32 %rd3, %r2;
    add.s64 %rd4, %rd2, %rd3;
    and.b32 %r4, %r2, 4095;
    mov.u32 %r5, buf;
    add.u32 %r5, %r5, %r4;
    cp.async.cg.shared.global [%r5], [%rd4], 16;
    cp.async.commit_group;
    cp.async.wait_group {wait};
"#
        )
    };
    let per = |body: &str| {
        let long = timed_loop(body, 48, "a100").unwrap();
        let short = timed_loop(body, 16, "a100").unwrap();
        (long - short) as f64 / 32.0
    };
    let each = per(&copy(0));
    let overlapped = per(&copy(1));
    let no_wait = per(&copy(8));
    // A100: an unloaded DRAM read is about 480 core cycles (configs/a100.toml).
    assert!(each > 300.0, "{each} cycles per waited copy");
    assert!(overlapped < each * 0.6, "{overlapped} vs {each}");
    assert!(no_wait < overlapped, "{no_wait} vs {overlapped}");
}

/// `mbarrier` as a producer/consumer barrier between two warps, on both engines: every thread
/// stores a value and arrives; each waits (`test_wait` on its state, then `try_wait.parity`
/// on phase 1 with a transaction count that thread 0 expects and every thread completes)
/// and reads a value the other warp wrote. A phase completes only when every arrival and
/// every transaction byte is in.
#[test]
fn mbarrier_phases_complete_on_arrivals_and_transactions() {
    let ptx = r#".version 8.0
.target sm_80
.address_size 64
.visible .entry k(.param .u64 out, .param .u64 in)
{
    .reg .b32 %r<16>;
    .reg .b64 %rd<8>;
    .reg .pred %p<4>;
    .shared .align 8 .b64 bar;
    .shared .align 4 .b8 vals[512];
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, bar;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra INIT_DONE;
    mbarrier.init.shared.b64 [%r2], 64;
INIT_DONE:
    bar.sync 0;
    // Phase 0: value 100 + tid at vals[tid].
    mov.u32 %r3, vals;
    shl.b32 %r4, %r1, 2;
    add.u32 %r5, %r3, %r4;
    add.u32 %r6, %r1, 100;
    st.shared.u32 [%r5], %r6;
    mbarrier.arrive.shared.b64 %rd2, [%r2];
    mbarrier.pending_count.b64 %r12, %rd2;
WAIT0:
    mbarrier.test_wait.shared.b64 %p2, [%r2], %rd2;
    @!%p2 bra WAIT0;
    // The other warp's value: (tid + 32) % 64.
    add.u32 %r7, %r1, 32;
    and.b32 %r7, %r7, 63;
    shl.b32 %r7, %r7, 2;
    add.u32 %r7, %r3, %r7;
    ld.shared.u32 %r8, [%r7];
    // Phase 1: thread 0 expects 128 transaction bytes; every thread completes 2 and arrives.
    @%p1 bra ARRIVE1;
    mbarrier.expect_tx.shared.b64 [%r2], 128;
ARRIVE1:
    bar.sync 0;
    st.shared.u32 [%r5], %r1;
    mbarrier.complete_tx.shared.b64 [%r2], 2;
    mbarrier.arrive.shared.b64 %rd3, [%r2];
WAIT1:
    mbarrier.try_wait.parity.shared.b64 %p3, [%r2], 1;
    @!%p3 bra WAIT1;
    ld.shared.u32 %r9, [%r7];
    // out[tid] = {phase-0 value, phase-1 value, pending count after this thread's arrival}.
    mul.wide.u32 %rd4, %r1, 12;
    add.s64 %rd5, %rd1, %rd4;
    st.global.u32 [%rd5], %r8;
    st.global.u32 [%rd5+4], %r9;
    st.global.u32 [%rd5+8], %r12;
    ret;
}
"#;
    let go = |timed: bool| -> Vec<u32> {
        let mut gpu = if timed {
            Gpu::timed(gpu::timing::TimedGpu::new(
                gpu::config::GpuConfig::preset("a100").unwrap(),
            ))
            .unwrap()
        } else {
            Gpu::new()
        };
        let m = gpu
            .load_ptx("mbar.ptx", ptx)
            .unwrap_or_else(|e| panic!("{e}"));
        let out = gpu.alloc(64 * 12);
        let inp = gpu.alloc(4);
        let args = [KernelArg::Ptr(out), KernelArg::Ptr(inp)];
        if timed {
            gpu.launch_timed(m, "k", [1, 1, 1], [64, 1, 1], 0, &args, &mut |_| {})
                .map(|_| ())
        } else {
            gpu.launch(m, "k", [1, 1, 1], [64, 1, 1], 0, &args)
                .map(|_| ())
        }
        .unwrap_or_else(|e| panic!("{e}"));
        gpu.copy_from_device(out, 64 * 12)
            .unwrap()
            .chunks(4)
            .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
            .collect()
    };
    // The engines order the warps' arrivals differently (as atomics), so only the values
    // must agree; each engine's pending counts are checked as a set.
    for out in [go(false), go(true)] {
        let mut pending = Vec::new();
        for t in 0..64u32 {
            let other = (t + 32) % 64;
            assert_eq!(out[(3 * t) as usize], 100 + other, "thread {t} phase 0");
            assert_eq!(out[(3 * t + 1) as usize], other, "thread {t} phase 1");
            pending.push(out[(3 * t + 2) as usize]);
        }
        // Arrivals happen one at a time: the pending counts after them are 63, 62, ..., 0.
        pending.sort_unstable();
        assert_eq!(pending, (0..64).collect::<Vec<u32>>());
    }
}

/// A phase with every arrival in but transaction bytes pending stays open until
/// `complete_tx` brings the count to zero.
#[test]
fn mbarrier_waits_for_pending_transactions() {
    let ptx = r#".version 8.0
.target sm_80
.address_size 64
.visible .entry k(.param .u64 out, .param .u64 in)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;
    .reg .pred %p<4>;
    .shared .align 8 .b64 bar;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r1, %laneid;
    mov.u32 %r2, bar;
    setp.eq.u32 %p1, %r1, 0;
    @%p1 mbarrier.init.shared.b64 [%r2], 32;
    @%p1 mbarrier.expect_tx.shared.b64 [%r2], 64;
    mbarrier.arrive.shared.b64 %rd2, [%r2];
    mbarrier.test_wait.shared.b64 %p2, [%r2], %rd2;
    mbarrier.complete_tx.shared.b64 [%r2], 2;
    mbarrier.test_wait.shared.b64 %p3, [%r2], %rd2;
    selp.u32 %r3, 1, 0, %p2;
    selp.u32 %r4, 2, 0, %p3;
    or.b32 %r5, %r3, %r4;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd4, %rd1, %rd3;
    st.global.u32 [%rd4], %r5;
    ret;
}
"#;
    // Before complete_tx: not complete (bit 0 clear); after every lane's 2 bytes: complete.
    assert_eq!(run_with_input(ptx, &[0; 4], 32, "a100"), vec![2; 32]);
}

/// `stmatrix` is `ldmatrix`'s inverse: lane l's register j holds row l / 4, columns
/// 2 (l % 4) and + 1 of matrix j (or of its transpose), written to the row addresses lanes
/// 8 j .. 8 j + 8 give; reading the tile back gives every element where the ISA puts it.
#[test]
fn stmatrix_writes_the_fragments_ldmatrix_reads() {
    for trans in [false, true] {
        let t = if trans { ".trans" } else { "" };
        let ptx = format!(
            r#".version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 out, .param .u64 in)
{{
    .reg .b32 %r<16>;
    .reg .b64 %rd<8>;
    .shared .align 16 .b8 tile[512];
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r1, %laneid;
    // Register j of lane l: 0x100 j + l in each half, the high half + 0x80.
    shl.b32 %r14, %r1, 16;
    add.u32 %r14, %r14, 0x00800000;
    or.b32 %r10, %r14, %r1;
    add.u32 %r11, %r10, 0x01000100;
    add.u32 %r12, %r10, 0x02000200;
    add.u32 %r13, %r10, 0x03000300;
    mov.u32 %r8, tile;
    shl.b32 %r9, %r1, 4;
    add.u32 %r8, %r8, %r9;
    stmatrix.sync.aligned.m8n8.x4{t}.shared.b16 [%r8], {{%r10, %r11, %r12, %r13}};
    bar.sync 0;
    // Lane l copies 16 bytes of the tile: bytes 16 l .. 16 l + 16.
    ld.shared.v4.b32 {{%r3, %r4, %r5, %r6}}, [%r8];
    mul.wide.u32 %rd2, %r1, 16;
    add.s64 %rd3, %rd1, %rd2;
    st.global.v4.b32 [%rd3], {{%r3, %r4, %r5, %r6}};
    ret;
}}
"#
        );
        let out = run_with_input(&ptx, &[0; 4], 128, "h100");
        let halves: Vec<u32> = out.iter().flat_map(|w| [w & 0xffff, w >> 16]).collect();
        for lane in 0..32u32 {
            for j in 0..4u32 {
                for i in 0..2u32 {
                    let (r, c) = (lane / 4, 2 * (lane % 4) + i);
                    let (r, c) = if trans { (c, r) } else { (r, c) };
                    // Matrix j's row r starts at byte 16 (8 j + r): element c is half
                    // 8 (8 j + r) + c.
                    let at = (8 * (8 * j + r) + c) as usize;
                    let want = 0x100 * j + lane + 0x80 * i;
                    assert_eq!(
                        halves[at], want,
                        "trans {trans} lane {lane} matrix {j} half {i}"
                    );
                }
            }
        }
    }
}

/// `nanosleep t` suspends the warp for t nanoseconds: on the A100 preset (1410 MHz) a loop
/// of 1,000 ns sleeps takes about 1,410 core cycles per iteration; the functional result is
/// untouched.
#[test]
fn nanosleep_suspends_the_warp_for_its_time() {
    let per = |body: &str| {
        let long = timed_loop(body, 24, "a100").unwrap();
        let short = timed_loop(body, 8, "a100").unwrap();
        (long - short) as f64 / 16.0
    };
    let sleep = per("    nanosleep.u32 1000;\n");
    assert!(
        (1410.0..=1425.0).contains(&sleep),
        "{sleep} cycles per 1 us sleep"
    );
    // From a register, and the longest of the lanes' requests: lane 31 asks for 2,000 ns
    // (plus the dependent multiply and add that compute it, about 10 cycles each time).
    let lanes =
        per("    mul.lo.u32 %r3, %r1, 64;\n    add.u32 %r3, %r3, 16;\n    nanosleep.u32 %r3;\n");
    assert!(
        (2820.0..=2850.0).contains(&lanes),
        "{lanes} cycles per sleep of up to 2 us"
    );
}
