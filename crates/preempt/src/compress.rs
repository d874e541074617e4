//! Register value compression (papers/lin-lightweight §III-C), measured on the real values
//! a context holds.
//!
//! **Warp level.** A 32-bit vector register is examined in pattern analysing groups (PAGs)
//! of `PAG = min(warp width, the TB's x dimension)` consecutive lanes, so that a 16×16 TB's
//! `ty` (uniform over each half-warp) and `tx` (strided over each half-warp) compress. In a
//! group the values are *uniform* (`v_i = a`), *strided* (`v_i = a·i + b`) or *random*
//! (Figure 10's subtractors and comparator). A register takes the weakest pattern of its
//! groups and stores, per group, one scalar (uniform), a base and a stride (strided) or
//! every value (random); only lanes that exist and have not exited count. Each warp's
//! context carries a pattern vector of two bits per register (uniform, strided, random,
//! dead), the metadata decompression reads first (§IV-B, Figure 12). A 64-bit value held in
//! a register pair is compressed as its two 32-bit halves, as the hardware would see them.
//! Predicates (one bit per lane) and uniform registers (one scalar per warp) are stored as
//! they are.
//!
//! **TB level** (Figure 11, only where every warp of the TB waits at the same `bar.pp`): a
//! register random in any warp is random everywhere; otherwise the bases and strides of
//! every group of the TB form a base vector and a stride vector. Strides all zero and bases
//! all equal: *global uniform*, one scalar for the TB. Bases continuing one arithmetic
//! progression across groups (`base[g+1] − base[g] = stride · PAG`) with one stride:
//! *global strided*, a base and a stride for the TB. Otherwise the warp-level encoding.
//! The paper records the global/local distinction; this model counts one more bit per
//! register per TB for it.

use serde::Serialize;

use gpu::exec::WARP_SIZE;

/// The value pattern of a register (or of one group of its lanes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Pattern {
    Uniform,
    Strided,
    Random,
}

/// The pattern analysing group of a TB whose x dimension is `block_x`.
pub fn pag(block_x: u32) -> u32 {
    block_x.clamp(1, WARP_SIZE as u32)
}

/// The pattern of `values` (Figure 10: differences of adjacent values, all zero → uniform,
/// all equal → strided). Arithmetic wraps, as 32-bit hardware subtractors do.
pub fn group_pattern(values: &[u32]) -> Pattern {
    if values.len() < 2 {
        return Pattern::Uniform;
    }
    let d = values[1].wrapping_sub(values[0]);
    if values.windows(2).any(|w| w[1].wrapping_sub(w[0]) != d) {
        Pattern::Random
    } else if d == 0 {
        Pattern::Uniform
    } else {
        Pattern::Strided
    }
}

/// One 32-bit vector register of a warp, compressed at warp level.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Compressed {
    pub pattern: Pattern,
    /// Bytes it takes.
    pub bytes: u64,
    /// Per group (in lane order, groups without lanes left out): its first value and its
    /// stride (zero for uniform), when the register is not random.
    pub groups: Vec<(u32, u32)>,
}

/// Compresses one 32-bit vector register whose lane `l` holds `value(l)`, over the lanes
/// in `lanes`, in groups of `pag` lanes.
pub fn compress_register(value: impl Fn(usize) -> u32, lanes: u32, pag: u32) -> Compressed {
    let pag = pag.clamp(1, WARP_SIZE as u32) as usize;
    let mut pattern = Pattern::Uniform;
    let mut groups = Vec::new();
    let mut count = 0u64;
    let mut buf = Vec::with_capacity(pag);
    for start in (0..WARP_SIZE).step_by(pag) {
        buf.clear();
        buf.extend(
            (start..(start + pag).min(WARP_SIZE))
                .filter(|&l| lanes & (1 << l) != 0)
                .map(&value),
        );
        if buf.is_empty() {
            continue;
        }
        count += buf.len() as u64;
        let p = group_pattern(&buf);
        pattern = pattern.max(p);
        let stride = if buf.len() > 1 {
            buf[1].wrapping_sub(buf[0])
        } else {
            0
        };
        groups.push((buf[0], stride));
    }
    let bytes = match pattern {
        Pattern::Uniform => 4 * groups.len() as u64,
        Pattern::Strided => 8 * groups.len() as u64,
        Pattern::Random => 4 * count,
    };
    if pattern == Pattern::Random {
        groups.clear();
    }
    Compressed {
        pattern,
        bytes,
        groups,
    }
}

/// How one register compresses across a TB (Figure 11).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TbPattern {
    GlobalUniform,
    GlobalStrided,
    /// The warp-level encoding of each warp.
    Local,
    Random,
}

/// The TB-level encoding of one register, given each warp's warp-level compression of it:
/// the pattern, and the bytes it takes for the whole TB.
pub fn compress_tb_register(warps: &[Compressed], pag: u32) -> (TbPattern, u64) {
    let local: u64 = warps.iter().map(|c| c.bytes).sum();
    if warps.iter().any(|c| c.pattern == Pattern::Random) {
        return (TbPattern::Random, local);
    }
    let groups: Vec<(u32, u32)> = warps
        .iter()
        .flat_map(|c| c.groups.iter().copied())
        .collect();
    let Some(&(base0, stride0)) = groups.first() else {
        return (TbPattern::Local, local);
    };
    if groups.iter().all(|&(b, s)| b == base0 && s == 0) {
        return (TbPattern::GlobalUniform, 4);
    }
    let step = stride0.wrapping_mul(pag);
    let continues = groups.iter().all(|&(_, s)| s == stride0)
        && groups
            .windows(2)
            .all(|w| w[1].0.wrapping_sub(w[0].0) == step);
    if stride0 != 0 && continues {
        return (TbPattern::GlobalStrided, 8);
    }
    (TbPattern::Local, local)
}

/// Bytes of a pattern vector for `registers` registers (two bits each, whole bytes).
pub fn pattern_vector_bytes(registers: usize) -> u64 {
    (2 * registers as u64).div_ceil(8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_of_groups() {
        assert_eq!(group_pattern(&[7, 7, 7, 7]), Pattern::Uniform);
        assert_eq!(group_pattern(&[3, 5, 7, 9]), Pattern::Strided);
        assert_eq!(group_pattern(&[3, 5, 7, 10]), Pattern::Random);
        // Wrapping differences: 0xffff_fffe, 0xffff_ffff, 0, 1 is stride 1.
        assert_eq!(
            group_pattern(&[u32::MAX - 1, u32::MAX, 0, 1]),
            Pattern::Strided
        );
        assert_eq!(group_pattern(&[9]), Pattern::Uniform);
    }

    #[test]
    fn a_16_wide_tb_compresses_ty_and_tx_by_half_warp() {
        // Warp 0 of a 16×16 TB: ty = 0 (lanes 0–15), 1 (lanes 16–31); tx = lane % 16.
        let ty = compress_register(|l| (l / 16) as u32, u32::MAX, pag(16));
        assert_eq!(ty.pattern, Pattern::Uniform);
        assert_eq!(ty.bytes, 8, "one scalar per half-warp");
        let tx = compress_register(|l| (l % 16) as u32, u32::MAX, pag(16));
        assert_eq!(tx.pattern, Pattern::Strided);
        assert_eq!(tx.bytes, 16, "base and stride per half-warp");
        // Analysed over the whole warp instead, neither compresses (BP_vec in Figure 8).
        assert_eq!(
            compress_register(|l| (l / 16) as u32, u32::MAX, 32).pattern,
            Pattern::Random
        );
        assert_eq!(
            compress_register(|l| (l % 16) as u32, u32::MAX, 32).bytes,
            128
        );
    }

    #[test]
    fn only_existing_lanes_count() {
        // A partial warp of 5 lanes whose absent lanes hold garbage.
        let c = compress_register(|l| if l < 5 { 42 } else { l as u32 * 1000 }, 0b11111, 32);
        assert_eq!((c.pattern, c.bytes), (Pattern::Uniform, 4));
        let r = compress_register(|l| (l * l) as u32, 0b11111, 32);
        assert_eq!((r.pattern, r.bytes), (Pattern::Random, 20));
    }

    #[test]
    fn tb_level_finds_global_patterns() {
        // The index ty·16 + tx of a 16×16 TB is strided across the whole TB.
        let warps: Vec<Compressed> = (0..8)
            .map(|w| compress_register(|l| (w * 32 + l) as u32, u32::MAX, 16))
            .collect();
        assert_eq!(
            compress_tb_register(&warps, 16),
            (TbPattern::GlobalStrided, 8)
        );
        // A loop counter, equal everywhere.
        let warps: Vec<Compressed> = (0..8)
            .map(|_| compress_register(|_| 3, u32::MAX, 16))
            .collect();
        assert_eq!(
            compress_tb_register(&warps, 16),
            (TbPattern::GlobalUniform, 4)
        );
        // ty: uniform per group but different across groups — local.
        let warps: Vec<Compressed> = (0..8)
            .map(|w| compress_register(|l| (w * 2 + l / 16) as u32, u32::MAX, 16))
            .collect();
        assert_eq!(compress_tb_register(&warps, 16), (TbPattern::Local, 8 * 8));
        // tx: strided per group, restarting in each — local.
        let warps: Vec<Compressed> = (0..8)
            .map(|_| compress_register(|l| (l % 16) as u32, u32::MAX, 16))
            .collect();
        assert_eq!(compress_tb_register(&warps, 16), (TbPattern::Local, 8 * 16));
        // Random in one warp: random for the TB.
        let mut warps: Vec<Compressed> = (0..3)
            .map(|_| compress_register(|_| 1, u32::MAX, 32))
            .collect();
        warps.push(compress_register(|l| (l * l) as u32, u32::MAX, 32));
        assert_eq!(
            compress_tb_register(&warps, 32),
            (TbPattern::Random, 3 * 4 + 128)
        );
    }

    #[test]
    fn pattern_vectors_take_two_bits_a_register() {
        assert_eq!(pattern_vector_bytes(64), 16, "the paper's 128-bit vector");
        assert_eq!(pattern_vector_bytes(13), 4);
        assert_eq!(pattern_vector_bytes(0), 0);
    }
}
