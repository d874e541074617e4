//! The warp-level matrix instructions' shapes, element types and fragment layouts (PTX ISA
//! §9.7.14 "Warp-level matrix multiply-accumulate instructions").
//!
//! A fragment is the part of a matrix one lane holds, in registers: element `i` of a
//! fragment lives in register `i / per_reg` at bit `(i % per_reg) * bits`. Which matrix
//! element (row, column) it is depends on the shape, the matrix (A, B or the accumulator)
//! and the type, as the ISA's §9.7.14.5 tables give it with `groupID = %laneid >> 2` and
//! `threadID_in_group = %laneid % 4`.
//!
//! `wmma` fragments are opaque in PTX ("the mapping is unspecified"); Switchyard lays them
//! out as the fragments of a grid of `mma` tiles ([`wmma_plan`], [`wmma_layout`]), so one
//! `wmma.mma` is that many `mma`s: two `mma.m16n8k16` for `m16n16k16`.

/// Element types of `mma` and `wmma`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MmaElem {
    F16,
    Bf16,
    /// TensorFloat-32: an `.f32` bit pattern of which the tensor core reads the sign, the
    /// 8 exponent bits and the top 10 mantissa bits.
    Tf32,
    F32,
    F64,
    S8,
    U8,
    S32,
}

impl MmaElem {
    pub fn from_name(name: &str) -> Option<MmaElem> {
        Some(match name {
            "f16" => MmaElem::F16,
            "bf16" => MmaElem::Bf16,
            "tf32" => MmaElem::Tf32,
            "f32" => MmaElem::F32,
            "f64" => MmaElem::F64,
            "s8" => MmaElem::S8,
            "u8" => MmaElem::U8,
            "s32" => MmaElem::S32,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            MmaElem::F16 => "f16",
            MmaElem::Bf16 => "bf16",
            MmaElem::Tf32 => "tf32",
            MmaElem::F32 => "f32",
            MmaElem::F64 => "f64",
            MmaElem::S8 => "s8",
            MmaElem::U8 => "u8",
            MmaElem::S32 => "s32",
        }
    }

    /// Bits of one element in a register (a tf32 takes a whole 32-bit register).
    pub fn bits(self) -> u32 {
        match self {
            MmaElem::S8 | MmaElem::U8 => 8,
            MmaElem::F16 | MmaElem::Bf16 => 16,
            MmaElem::Tf32 | MmaElem::F32 | MmaElem::S32 => 32,
            MmaElem::F64 => 64,
        }
    }

    /// Elements packed in one register.
    pub fn per_reg(self) -> u32 {
        match self {
            MmaElem::F64 => 1,
            e => 32 / e.bits(),
        }
    }

    /// The register type that holds a fragment's registers.
    pub fn reg_ty(self) -> crate::inst::Ty {
        use crate::inst::Ty;
        match self {
            MmaElem::F32 => Ty::F32,
            MmaElem::F64 => Ty::F64,
            MmaElem::S32 => Ty::S32,
            _ => Ty::B32,
        }
    }
}

/// `mma` shapes (M×N×K).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MmaShape {
    pub m: u8,
    pub n: u8,
    pub k: u8,
}

impl MmaShape {
    pub const M16N8K16: MmaShape = MmaShape { m: 16, n: 8, k: 16 };

    /// Parses `m16n8k16`.
    pub fn from_name(name: &str) -> Option<MmaShape> {
        let rest = name.strip_prefix('m')?;
        let (m, rest) = rest.split_once('n')?;
        let (n, k) = rest.split_once('k')?;
        Some(MmaShape {
            m: m.parse().ok()?,
            n: n.parse().ok()?,
            k: k.parse().ok()?,
        })
    }

    pub fn name(self) -> String {
        format!("m{}n{}k{}", self.m, self.n, self.k)
    }
}

/// Which matrix a fragment holds: the multiplicands A (M×K) and B (K×N), or the accumulator
/// C/D (M×N).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Frag {
    A,
    B,
    C,
}

/// The multiplicand types `mma` supports for a shape (Ampere and Hopper: PTX ISA
/// §9.7.14.5.14 table "mma shapes and types"), and the accumulator types they take.
pub fn mma_supported(shape: MmaShape, ab: MmaElem, acc: MmaElem) -> bool {
    use MmaElem::*;
    let s = (shape.m, shape.n, shape.k);
    match ab {
        F16 => matches!(s, (16, 8, 16) | (16, 8, 8)) && matches!(acc, F16 | F32),
        Bf16 => matches!(s, (16, 8, 16) | (16, 8, 8)) && acc == F32,
        Tf32 => matches!(s, (16, 8, 8) | (16, 8, 4)) && acc == F32,
        F64 => s == (8, 8, 4) && acc == F64,
        S8 | U8 => matches!(s, (16, 8, 32) | (16, 8, 16) | (8, 8, 16)) && acc == S32,
        F32 | S32 => false,
    }
}

/// Elements of a fragment per lane: the matrix's elements shared over 32 lanes.
pub fn frag_elems(shape: MmaShape, frag: Frag) -> u32 {
    let (m, n, k) = (u32::from(shape.m), u32::from(shape.n), u32::from(shape.k));
    match frag {
        Frag::A => m * k / 32,
        Frag::B => k * n / 32,
        Frag::C => m * n / 32,
    }
}

/// Registers of a fragment per lane.
pub fn frag_regs(shape: MmaShape, frag: Frag, elem: MmaElem) -> u32 {
    frag_elems(shape, frag).div_ceil(elem.per_reg())
}

/// (row, column) of element `i` of lane `lane`'s fragment, for the shapes and types of
/// [`mma_supported`] (PTX ISA §9.7.14.5.7–.10). A and C are indexed (row of M, column of
/// K or N); B is indexed (row of K, column of N).
pub fn mma_element(shape: MmaShape, frag: Frag, elem: MmaElem, lane: u32, i: u32) -> (u32, u32) {
    let (g, t) = (lane >> 2, lane % 4);
    let wide = elem.bits() >= 32;
    let byte = elem.bits() == 8;
    match (frag, shape.m, shape.k) {
        // The accumulators: two rows (g and g + 8) of pairs for M = 16, one row for M = 8.
        (Frag::C, 16, _) => (g + 8 * (i >> 1), 2 * t + (i & 1)),
        (Frag::C, _, _) => (g, 2 * t + i),
        // m8n8k4 f64 and m8n8k16 s8/u8: one row per group.
        (Frag::A, 8, _) if byte => (g, 4 * t + i),
        (Frag::A, 8, _) => (g, t),
        (Frag::B, 8, _) if byte => (4 * t + i, g),
        (Frag::B, 8, _) => (t, g),
        // tf32: one element per register, the second row (g + 8) before the second column.
        (Frag::A, _, 4) if wide => (g + 8 * i, t),
        (Frag::A, _, _) if wide => (g + 8 * (i & 1), t + 4 * (i >> 1)),
        (Frag::B, _, 4) if wide => (t, g),
        (Frag::B, _, _) if wide => (t + 4 * i, g),
        // s8/u8: four consecutive columns (of A) or rows (of B) per register.
        (Frag::A, _, 16) if byte => (g + 8 * (i >> 2), 4 * t + (i & 3)),
        (Frag::A, _, _) if byte => (g + 8 * ((i >> 2) & 1), 4 * t + (i & 3) + 16 * (i >> 3)),
        (Frag::B, _, 16) if byte => (4 * t + i, g),
        (Frag::B, _, _) if byte => (4 * t + (i & 3) + 16 * (i >> 2), g),
        // f16/bf16: pairs of consecutive columns (A) or rows (B).
        (Frag::A, _, 8) => (g + 8 * (i >> 1), 2 * t + (i & 1)),
        (Frag::A, _, _) => (g + 8 * ((i >> 1) & 1), 2 * t + (i & 1) + 8 * (i >> 2)),
        (Frag::B, _, 8) => (2 * t + i, g),
        (Frag::B, _, _) => (2 * t + (i & 1) + 8 * (i >> 1), g),
    }
}

/// `ldmatrix`/`stmatrix` `.m8n8` with `.b16` elements: lane `lane` holds, in its register
/// for each 8×8 matrix, the elements (row, column) `(lane / 4, 2 (lane % 4) + i)` for
/// `i` in 0..2; with `.trans`, the same elements of the transposed matrix (PTX ISA
/// §9.7.14.5.15). The rows' addresses come from lanes `8 j .. 8 j + 8` for matrix `j`.
pub fn ldmatrix_element(lane: u32, i: u32, trans: bool) -> (u32, u32) {
    let (r, c) = (lane / 4, 2 * (lane % 4) + i);
    if trans {
        (c, r)
    } else {
        (r, c)
    }
}

/// Registers of one part of a `wmma` fragment (the instruction is split in parts of at most
/// this many registers).
pub const WMMA_PART_REGS: u32 = 4;

/// How Switchyard computes a `wmma` shape: as a grid of `rows` × `cols` tiles of one `mma`
/// shape, the wmma tile's rows `mma.m` at a time and its columns 8 at a time. With `half`,
/// the wmma tile has 8 rows computed by 16-row tiles whose rows 8–15 are padding: A's and
/// the accumulator's registers are those of the `mma` fragment's rows 0–7 only, the others
/// read zero and their results are dropped (`m8n32k16`, which no `mma` shape computes
/// directly; its tensor-core work is timed as that of the 16-row tiles).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WmmaPlan {
    pub mma: MmaShape,
    pub rows: u32,
    pub cols: u32,
    pub half: bool,
}

/// The plan for `wmma` shape `shape` with multiplicands of type `ab`, for the shapes and
/// types Ampere and Hopper support (PTX ISA §9.7.14.4.1): `m16n16k16`, `m32n8k16` and
/// `m8n32k16` with f16, bf16, s8 or u8; `m16n16k8` with tf32; `m8n8k4` with f64.
pub fn wmma_plan(shape: MmaShape, ab: MmaElem) -> Option<WmmaPlan> {
    use MmaElem::*;
    let plan = |m: u8, k: u8, rows, cols, half| WmmaPlan {
        mma: MmaShape { m, n: 8, k },
        rows,
        cols,
        half,
    };
    Some(match ((shape.m, shape.n, shape.k), ab) {
        ((16, 16, 16), F16 | Bf16 | S8 | U8) => plan(16, 16, 1, 2, false),
        ((32, 8, 16), F16 | Bf16 | S8 | U8) => plan(16, 16, 2, 1, false),
        ((8, 32, 16), F16 | Bf16 | S8 | U8) => plan(16, 16, 1, 4, true),
        ((16, 16, 8), Tf32) => plan(16, 8, 1, 2, false),
        ((8, 8, 4), F64) => plan(8, 4, 1, 1, false),
        _ => return None,
    })
}

/// The multiplicand type whose plan an accumulator fragment of type `c` follows (a
/// `wmma.load.c`/`wmma.store.d` names only the accumulator type).
pub fn wmma_operand_of(shape: MmaShape, c: MmaElem) -> Option<MmaElem> {
    use MmaElem::*;
    Some(match ((shape.m, shape.n, shape.k), c) {
        ((16, 16, 16) | (32, 8, 16) | (8, 32, 16), F16 | F32) => F16,
        ((16, 16, 16) | (32, 8, 16) | (8, 32, 16), S32) => S8,
        ((16, 16, 8), F32) => Tf32,
        ((8, 8, 4), F64) => F64,
        _ => return None,
    })
}

/// The plan of a `wmma` fragment `frag` of type `elem` (an accumulator's type for C).
pub fn wmma_frag_plan(shape: MmaShape, frag: Frag, elem: MmaElem) -> Option<WmmaPlan> {
    let ab = match frag {
        Frag::A | Frag::B => elem,
        Frag::C => wmma_operand_of(shape, elem)?,
    };
    wmma_plan(shape, ab)
}

/// The `mma` tiles of a plan that fragment `frag` spans: row groups for A, column groups for
/// B, both for the accumulator.
fn groups(plan: WmmaPlan, frag: Frag) -> u32 {
    match frag {
        Frag::A => plan.rows,
        Frag::B => plan.cols,
        Frag::C => plan.rows * plan.cols,
    }
}

/// Whether a wmma fragment holds register `k` of each `mma` tile's fragment: all of them, or
/// for a `half` plan's A and accumulator those holding rows 0–7.
fn holds(plan: WmmaPlan, frag: Frag, elem: MmaElem, k: u32) -> bool {
    let (row, _) = mma_element(plan.mma, frag, elem, 0, k * elem.per_reg());
    !(plan.half && frag != Frag::B && row >= 8)
}

/// Which registers of one `mma` fragment a wmma fragment holds, in order (`None` marks those
/// it does not hold: they read zero and their results are dropped).
pub fn wmma_tile_regs(plan: WmmaPlan, frag: Frag, elem: MmaElem) -> Vec<Option<u32>> {
    let mut next = 0;
    (0..frag_regs(plan.mma, frag, elem))
        .map(|k| {
            holds(plan, frag, elem, k).then(|| {
                next += 1;
                next - 1
            })
        })
        .collect()
}

/// Registers per `mma` tile that a wmma fragment holds (without allocating: the layout
/// functions run for every element a wmma load or store moves).
fn regs_per_tile(plan: WmmaPlan, frag: Frag, elem: MmaElem) -> u32 {
    (0..frag_regs(plan.mma, frag, elem))
        .filter(|&k| holds(plan, frag, elem, k))
        .count() as u32
}

/// Registers of a `wmma` fragment, as PTX declares them: the plan's `mma` fragments side by
/// side, except that `.f16` A and B fragments are always 8 registers (Volta's layout, which
/// holds elements more than once: twice for m16n16k16, B four times for m32n8k16, A four
/// times for m8n32k16).
pub fn wmma_regs(plan: WmmaPlan, frag: Frag, elem: MmaElem) -> u32 {
    if elem == MmaElem::F16 && frag != Frag::C {
        return 8;
    }
    groups(plan, frag) * regs_per_tile(plan, frag, elem)
}

/// Which matrix element register `reg` (element `i` within it) of a `wmma` fragment holds
/// (row, column), with the layout Switchyard gives these opaque fragments: the plan's `mma`
/// fragments one after another — A's row groups, B's column groups, the accumulator's tiles
/// row group by row group — and, where PTX declares more registers than that (`.f16` A and
/// B), the same registers again.
pub fn wmma_layout(
    plan: WmmaPlan,
    frag: Frag,
    elem: MmaElem,
    lane: u32,
    reg: u32,
    i: u32,
) -> (u32, u32) {
    let per = regs_per_tile(plan, frag, elem);
    let reg = reg % (groups(plan, frag) * per);
    let (g, r) = (reg / per, reg % per);
    // The `mma` register this one is: the `r`-th one held.
    let k = (0..frag_regs(plan.mma, frag, elem))
        .filter(|&k| holds(plan, frag, elem, k))
        .nth(r as usize)
        .expect("r < per");
    let (row, col) = mma_element(plan.mma, frag, elem, lane, k * elem.per_reg() + i);
    let m = u32::from(plan.mma.m);
    match frag {
        Frag::A => (row + m * g, col),
        Frag::B => (row, col + 8 * g),
        Frag::C => (row + m * (g / plan.cols), col + 8 * (g % plan.cols)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every element of every supported fragment is held by exactly one (lane, index): the
    /// layouts partition the matrices.
    #[test]
    fn mma_layouts_cover_each_element_once() {
        use MmaElem::*;
        let cases = [
            (MmaShape::M16N8K16, F16, F32),
            (MmaShape { m: 16, n: 8, k: 8 }, Bf16, F32),
            (MmaShape { m: 16, n: 8, k: 8 }, Tf32, F32),
            (MmaShape { m: 16, n: 8, k: 4 }, Tf32, F32),
            (MmaShape { m: 8, n: 8, k: 4 }, F64, F64),
            (MmaShape { m: 16, n: 8, k: 32 }, S8, S32),
            (MmaShape { m: 16, n: 8, k: 16 }, U8, S32),
            (MmaShape { m: 8, n: 8, k: 16 }, S8, S32),
        ];
        for (s, ab, acc) in cases {
            assert!(mma_supported(s, ab, acc), "{s:?} {ab:?}");
            for (frag, elem, rows, cols) in [
                (Frag::A, ab, s.m, s.k),
                (Frag::B, ab, s.k, s.n),
                (Frag::C, acc, s.m, s.n),
            ] {
                let mut seen = vec![0u32; usize::from(rows) * usize::from(cols)];
                for lane in 0..32 {
                    for i in 0..frag_elems(s, frag) {
                        let (r, c) = mma_element(s, frag, elem, lane, i);
                        assert!(r < u32::from(rows) && c < u32::from(cols), "{s:?} {frag:?}");
                        seen[(r * u32::from(cols) + c) as usize] += 1;
                    }
                }
                assert!(seen.iter().all(|&n| n == 1), "{s:?} {frag:?} {elem:?}");
            }
        }
        assert!(!mma_supported(MmaShape::M16N8K16, Bf16, F16));
        assert!(!mma_supported(MmaShape { m: 8, n: 8, k: 4 }, F16, F32));
    }

    /// Spot checks against the ISA's figures, written out by hand: m16n8k16 f16 A
    /// (Figure 79), B (Figure 81) and the f32 accumulator (Figure 82), m16n8k8 tf32 A
    /// (Figure 72), m16n8k32 s8 A (Figure 88).
    #[test]
    fn mma_layouts_match_the_isa_figures() {
        use MmaElem::*;
        let s = MmaShape::M16N8K16;
        // Lane 5: groupID 1, threadID_in_group 1.
        let a: Vec<_> = (0..8).map(|i| mma_element(s, Frag::A, F16, 5, i)).collect();
        assert_eq!(
            a,
            [
                (1, 2),
                (1, 3),
                (9, 2),
                (9, 3),
                (1, 10),
                (1, 11),
                (9, 10),
                (9, 11)
            ]
        );
        let b: Vec<_> = (0..4).map(|i| mma_element(s, Frag::B, F16, 5, i)).collect();
        assert_eq!(b, [(2, 1), (3, 1), (10, 1), (11, 1)]);
        let c: Vec<_> = (0..4)
            .map(|i| mma_element(s, Frag::C, F32, 31, i))
            .collect();
        assert_eq!(c, [(7, 6), (7, 7), (15, 6), (15, 7)]);
        let tf = MmaShape { m: 16, n: 8, k: 8 };
        let a: Vec<_> = (0..4)
            .map(|i| mma_element(tf, Frag::A, Tf32, 6, i))
            .collect();
        assert_eq!(a, [(1, 2), (9, 2), (1, 6), (9, 6)]);
        let i8s = MmaShape { m: 16, n: 8, k: 32 };
        let a: Vec<_> = [0, 3, 4, 8, 15]
            .iter()
            .map(|&i| mma_element(i8s, Frag::A, S8, 2, i))
            .collect();
        assert_eq!(a, [(0, 8), (0, 11), (8, 8), (0, 24), (8, 27)]);
    }

    #[test]
    fn ldmatrix_rows_and_transpose() {
        assert_eq!(ldmatrix_element(0, 0, false), (0, 0));
        assert_eq!(ldmatrix_element(7, 1, false), (1, 7));
        assert_eq!(ldmatrix_element(7, 1, true), (7, 1));
        assert_eq!(ldmatrix_element(31, 0, false), (7, 6));
    }

    /// Every wmma layout holds every element of A, B and C, each equally often (f16 A and B
    /// more than once, as their 8 registers repeat), in as many registers as PTX declares.
    #[test]
    fn wmma_layouts_cover_their_tiles_with_the_isa_register_counts() {
        use MmaElem::*;
        let shape = |m, n, k| MmaShape { m, n, k };
        // (shape, A/B type, accumulator type, registers of A, B and C as PTX declares them:
        // PTX ISA §9.7.14.4.1).
        let cases = [
            (shape(16, 16, 16), F16, F32, [8, 8, 8]),
            (shape(16, 16, 16), F16, F16, [8, 8, 4]),
            (shape(32, 8, 16), F16, F32, [8, 8, 8]),
            (shape(32, 8, 16), F16, F16, [8, 8, 4]),
            (shape(16, 16, 16), Bf16, F32, [4, 4, 8]),
            (shape(32, 8, 16), Bf16, F32, [8, 2, 8]),
            (shape(16, 16, 16), S8, S32, [2, 2, 8]),
            (shape(32, 8, 16), U8, S32, [4, 1, 8]),
            (shape(8, 32, 16), F16, F32, [8, 8, 8]),
            (shape(8, 32, 16), F16, F16, [8, 8, 4]),
            (shape(8, 32, 16), Bf16, F32, [2, 8, 8]),
            (shape(8, 32, 16), S8, S32, [1, 4, 8]),
            (shape(16, 16, 8), Tf32, F32, [4, 4, 8]),
            (shape(8, 8, 4), F64, F64, [1, 1, 2]),
        ];
        for (s, ab, acc, regs) in cases {
            let plan = wmma_plan(s, ab).unwrap();
            assert_eq!(
                wmma_operand_of(s, acc),
                Some(if ab == U8 {
                    S8
                } else if ab == Bf16 {
                    F16
                } else {
                    ab
                })
            );
            let (m, n, k) = (u32::from(s.m), u32::from(s.n), u32::from(s.k));
            for (frag, elem, (rows, cols), want) in [
                (Frag::A, ab, (m, k), regs[0]),
                (Frag::B, ab, (k, n), regs[1]),
                (Frag::C, acc, (m, n), regs[2]),
            ] {
                assert_eq!(wmma_regs(plan, frag, elem), want, "{s:?} {frag:?} {elem:?}");
                let mut seen = vec![0u32; (rows * cols) as usize];
                for lane in 0..32 {
                    for reg in 0..want {
                        for i in 0..elem.per_reg() {
                            let (r, c) = wmma_layout(plan, frag, elem, lane, reg, i);
                            assert!(r < rows && c < cols, "{s:?} {frag:?}: ({r}, {c})");
                            seen[(r * cols + c) as usize] += 1;
                        }
                    }
                }
                // Every element held, each as often as the registers allow.
                let copies = want * elem.per_reg() * 32 / (rows * cols);
                assert!(
                    copies >= 1 && seen.iter().all(|&x| x == copies),
                    "{s:?} {frag:?} {elem:?}"
                );
            }
        }
        let m16 = wmma_plan(
            MmaShape {
                m: 16,
                n: 16,
                k: 16,
            },
            F16,
        )
        .unwrap();
        assert_eq!(wmma_layout(m16, Frag::C, F16, 0, 2, 1), (0, 9));
        // m32n8k16: the accumulator's second register group holds rows 16-31.
        let m32 = wmma_plan(MmaShape { m: 32, n: 8, k: 16 }, F16).unwrap();
        assert_eq!(wmma_layout(m32, Frag::C, F32, 0, 4, 0), (16, 0));
        // m8n32k16: A is the rows 0-7 registers of the mma fragment (0 and 2 of 4).
        let m8 = wmma_plan(MmaShape { m: 8, n: 32, k: 16 }, F16).unwrap();
        assert_eq!(
            wmma_tile_regs(m8, Frag::A, F16),
            [Some(0), None, Some(1), None]
        );
        assert_eq!(wmma_layout(m8, Frag::C, F32, 5, 7, 0), (1, 27));
        assert_eq!(wmma_plan(MmaShape { m: 8, n: 32, k: 8 }, F16), None);
    }
}
