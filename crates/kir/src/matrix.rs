//! The warp-level matrix instructions' shapes, element types and fragment layouts (PTX ISA
//! §9.7.14 "Warp-level matrix multiply-accumulate instructions").
//!
//! A fragment is the part of a matrix one lane holds, in registers: element `i` of a
//! fragment lives in register `i / per_reg` at bit `(i % per_reg) * bits`. Which matrix
//! element (row, column) it is depends on the shape, the matrix (A, B or the accumulator)
//! and the type, as the ISA's §9.7.14.5 tables give it with `groupID = %laneid >> 2` and
//! `threadID_in_group = %laneid % 4`.
//!
//! `wmma` fragments are opaque in PTX ("the mapping is unspecified"); Switchyard lays the
//! 16×16×16 ones out as pairs of `mma.m16n8k16` fragments ([`wmma_layout`]), so one
//! `wmma.mma` is two `mma.m16n8k16`.

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

/// Registers of one part of a 16×16×16 `wmma` fragment (the instruction is split in parts
/// of at most this many registers).
pub const WMMA_PART_REGS: u32 = 4;

/// Which matrix element register `reg` (element `i` within it) of a `wmma.m16n16k16`
/// fragment holds (row, column), with the layout Switchyard gives these opaque fragments:
/// A is the `mma.m16n8k16` A fragment in registers 0–3, repeated in 4–7; B is the B
/// fragment of columns 0–7 in registers 0–1 and of columns 8–15 in 2–3, repeated in 4–7;
/// the accumulator is the `mma` accumulator of columns 0–7, then of columns 8–15 (4 f32
/// registers each, or 2 packed f16 ones).
pub fn wmma_layout(frag: Frag, elem: MmaElem, lane: u32, reg: u32, i: u32) -> (u32, u32) {
    let s = MmaShape::M16N8K16;
    let per = elem.per_reg();
    match frag {
        Frag::A => mma_element(s, Frag::A, elem, lane, (reg % 4) * per + i),
        Frag::B => {
            let (half, r) = ((reg % 4) / 2, reg % 2);
            let (row, col) = mma_element(s, Frag::B, elem, lane, r * per + i);
            (row, col + 8 * half)
        }
        Frag::C => {
            let regs_per_half = frag_regs(s, Frag::C, elem);
            let (half, r) = (reg / regs_per_half, reg % regs_per_half);
            let (row, col) = mma_element(s, Frag::C, elem, lane, r * per + i);
            (row, col + 8 * half)
        }
    }
}

/// Registers of a whole `wmma.m16n16k16` fragment, as PTX declares them: 8 for `.f16` A
/// and B (Volta's layout, which holds every element twice), 4 for `.bf16` ones; 8 for `.f32`
/// accumulators, 4 for `.f16` ones.
pub fn wmma_regs(frag: Frag, elem: MmaElem) -> u32 {
    match (frag, elem) {
        (Frag::A | Frag::B, MmaElem::F16) => 8,
        (Frag::A | Frag::B, _) => 4,
        (Frag::C, _) => 2 * frag_regs(MmaShape::M16N8K16, Frag::C, elem),
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

    /// The wmma layout holds every element of A, B and C (A and B twice, as their 8
    /// registers repeat), and its two accumulator halves are the mma accumulators of
    /// columns 0–7 and 8–15.
    #[test]
    fn wmma_layout_covers_the_16x16_tiles() {
        use MmaElem::*;
        for (frag, elem, copies) in [
            (Frag::A, F16, 2),
            (Frag::B, F16, 2),
            (Frag::A, Bf16, 1),
            (Frag::B, Bf16, 1),
            (Frag::C, F32, 1),
            (Frag::C, F16, 1),
        ] {
            let mut seen = [0u32; 256];
            for lane in 0..32 {
                for reg in 0..wmma_regs(frag, elem) {
                    for i in 0..elem.per_reg() {
                        let (r, c) = wmma_layout(frag, elem, lane, reg, i);
                        seen[(r * 16 + c) as usize] += 1;
                    }
                }
            }
            assert!(seen.iter().all(|&n| n == copies), "{frag:?}");
        }
        assert_eq!(wmma_regs(Frag::C, F16), 4);
        assert_eq!(wmma_layout(Frag::C, F16, 0, 2, 1), (0, 9));
    }
}
