//! Per-warp memory coalescing and shared-memory bank conflicts.
//!
//! **Coalescing.** A warp memory instruction carries up to 32 lane addresses. As on Fermi and
//! later NVIDIA GPUs (the GPGPU-Sim model used by papers/lin-thesis §3.3.1 and §4.3.1), the lanes
//! are merged per warp into the set of 128-byte cache lines they touch, each with a mask of the
//! 32-byte sectors touched. A line request is the unit that the L1, the interconnect and the L2
//! see; the number of sectors sets the data size on the interconnect and the DRAM bus.
//!
//! **Bank conflicts.** Shared memory has 32 banks of 4-byte words (word `w` lives in bank
//! `w % 32`). A warp access is served in as many passes as the most-loaded bank has *distinct*
//! words; several lanes reading the same word are served by one broadcast and cost nothing extra.
//!
//! Invariants: lines are reported in order of first touch by increasing lane index (so the
//! output is deterministic), each line once; masks are never empty.

/// Bytes in a sector: the unit of a sector mask and of DRAM/interconnect data transfers.
pub const SECTOR_BYTES: u64 = 32;

/// Lanes in a warp as the coalescer sees it (the length of a per-lane address array).
pub const WARP_LANES: usize = 32;

/// One cache line touched by a warp access, with the 32-byte sectors it needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LineRequest {
    /// Byte address of the first byte of the line (aligned to the line size).
    pub line_addr: u64,
    /// Bit `i` set = sector `i` of the line (bytes `32*i .. 32*i+32`) is touched.
    pub sectors: u8,
}

impl LineRequest {
    /// Number of sectors requested.
    pub fn sector_count(&self) -> u32 {
        self.sectors.count_ones()
    }

    /// Bytes of data the request moves (sectors × 32).
    pub fn bytes(&self) -> u32 {
        self.sector_count() * SECTOR_BYTES as u32
    }
}

/// Coalesces one warp access into line requests, appending them to `out` (cleared first).
///
/// `lanes[i]` is lane `i`'s byte address, `None` when the lane is inactive. Each active lane
/// touches `access_bytes` bytes from its address (an access that straddles a sector or a line
/// touches both). `line_bytes` must be a power of two between 32 and 256.
pub fn coalesce_into(
    lanes: &[Option<u64>],
    access_bytes: u32,
    line_bytes: u64,
    out: &mut Vec<LineRequest>,
) {
    debug_assert!(line_bytes.is_power_of_two() && (32..=256).contains(&line_bytes));
    out.clear();
    let size = u64::from(access_bytes.max(1));
    for addr in lanes.iter().flatten() {
        let first = addr / SECTOR_BYTES;
        let last = (addr + size - 1) / SECTOR_BYTES;
        for sector in first..=last {
            let byte = sector * SECTOR_BYTES;
            let line_addr = byte & !(line_bytes - 1);
            let bit = 1u8 << ((byte - line_addr) / SECTOR_BYTES);
            match out.iter_mut().find(|l| l.line_addr == line_addr) {
                Some(l) => l.sectors |= bit,
                None => out.push(LineRequest {
                    line_addr,
                    sectors: bit,
                }),
            }
        }
    }
}

/// [`coalesce_into`] returning a fresh vector.
pub fn coalesce(lanes: &[Option<u64>], access_bytes: u32, line_bytes: u64) -> Vec<LineRequest> {
    let mut out = Vec::new();
    coalesce_into(lanes, access_bytes, line_bytes, &mut out);
    out
}

/// Passes needed to serve a shared-memory warp access on 32 banks of 4-byte words.
///
/// Returns the maximum over banks of the number of distinct words the active lanes touch in
/// that bank (0 when no lane is active). Equal words are broadcast.
pub fn shared_bank_conflicts(lanes: &[Option<u64>], access_bytes: u32) -> u32 {
    shared_bank_conflicts_with(lanes, access_bytes, 32, 4)
}

/// [`shared_bank_conflicts`] for `banks` banks of `bank_bytes`-byte words.
pub fn shared_bank_conflicts_with(
    lanes: &[Option<u64>],
    access_bytes: u32,
    banks: u32,
    bank_bytes: u32,
) -> u32 {
    let banks = u64::from(banks.max(1));
    let word = u64::from(bank_bytes.max(1));
    let size = u64::from(access_bytes.max(1));
    // At most 32 lanes × a few words each: a small linear set beats hashing here.
    let mut words: Vec<u64> = Vec::with_capacity(lanes.len() * 2);
    for addr in lanes.iter().flatten() {
        for w in (addr / word)..=((addr + size - 1) / word) {
            if !words.contains(&w) {
                words.push(w);
            }
        }
    }
    let mut per_bank = vec![0u32; banks as usize];
    for w in &words {
        per_bank[(w % banks) as usize] += 1;
    }
    per_bank.into_iter().max().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strided(base: u64, stride: u64) -> Vec<Option<u64>> {
        (0..32).map(|i| Some(base + i * stride)).collect()
    }

    #[test]
    fn unit_stride_f32_is_one_line_four_sectors() {
        let l = coalesce(&strided(0x1000, 4), 4, 128);
        assert_eq!(
            l,
            vec![LineRequest {
                line_addr: 0x1000,
                sectors: 0b1111
            }]
        );
        assert_eq!(l[0].bytes(), 128);
    }

    #[test]
    fn stride_two_is_two_lines() {
        let l = coalesce(&strided(0x1000, 8), 4, 128);
        assert_eq!(l.len(), 2);
        assert!(l.iter().all(|l| l.sectors == 0b1111));
    }

    #[test]
    fn scattered_is_32_lines_one_sector_each() {
        let l = coalesce(&strided(0, 4096 + 32), 4, 128);
        assert_eq!(l.len(), 32);
        assert!(l.iter().all(|l| l.sector_count() == 1));
    }

    #[test]
    fn inactive_lanes_and_straddling() {
        let mut lanes = vec![None; 32];
        lanes[3] = Some(126); // 4 bytes straddle lines 0 and 128
        let l = coalesce(&lanes, 4, 128);
        assert_eq!(
            l,
            vec![
                LineRequest {
                    line_addr: 0,
                    sectors: 0b1000
                },
                LineRequest {
                    line_addr: 128,
                    sectors: 0b0001
                }
            ]
        );
        assert!(coalesce(&[None; 32], 4, 128).is_empty());
    }

    #[test]
    fn bank_conflicts() {
        assert_eq!(shared_bank_conflicts(&strided(0, 4), 4), 1);
        assert_eq!(shared_bank_conflicts(&strided(0, 8), 4), 2);
        assert_eq!(shared_bank_conflicts(&strided(0, 128), 4), 32);
        assert_eq!(shared_bank_conflicts(&[Some(64); 32], 4), 1);
        assert_eq!(shared_bank_conflicts(&[None; 32], 4), 0);
        // 64-bit unit stride touches 64 words: two per bank.
        assert_eq!(shared_bank_conflicts(&strided(0, 8), 8), 2);
    }
}
