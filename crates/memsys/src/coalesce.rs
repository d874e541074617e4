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
    // Active lanes whose bytes start where the previous active lane's end (a coalesced
    // access, or each row of a 2D block's warp) form a run of bytes: its sectors, in
    // ascending order, are those its lanes touch in the order they first touch them, so a
    // run is walked line by line instead of lane by lane.
    let mut active = lanes.iter().flatten().copied();
    let Some(mut start) = active.next() else {
        return;
    };
    let mut end = start + size;
    let mut lines = LineSet::new(line_bytes);
    for addr in active {
        if addr == end {
            end += size;
        } else if addr < start || addr + size > end {
            lines.add_run(start, end, out);
            (start, end) = (addr, addr + size);
        }
        // Else the lane's bytes lie inside the run (a broadcast): nothing new.
    }
    lines.add_run(start, end, out);
}

/// The lines [`coalesce_into`] has appended so far, for finding a sector's line.
struct LineSet {
    line_bytes: u64,
    /// Where the line last touched is in `out`: neighbouring runs mostly touch it again,
    /// so it is tried before the others.
    last: usize,
    /// A bit per line index modulo 64 for the lines in `out`: a line whose bit is clear is
    /// new and appended without searching (a scattered warp's 32 lines each needed a
    /// search of those before).
    seen: u64,
}

impl LineSet {
    fn new(line_bytes: u64) -> Self {
        Self {
            line_bytes,
            last: 0,
            seen: 0,
        }
    }

    /// Sets the sectors of bytes `start..end` in their lines, appending each line the first
    /// time it is touched (in ascending order, the order the run's lanes touch them).
    #[inline(always)]
    fn add_run(&mut self, start: u64, end: u64, out: &mut Vec<LineRequest>) {
        let mut line_addr = start & !(self.line_bytes - 1);
        if start / SECTOR_BYTES == (end - 1) / SECTOR_BYTES {
            // One sector (a scattered warp's lanes, one each).
            let bit = 1u8 << ((start - line_addr) / SECTOR_BYTES);
            self.set(line_addr, bit, out);
            return;
        }
        while line_addr < end {
            // The sectors from the run's first byte in this line to its last.
            let lo = (start.max(line_addr) - line_addr) / SECTOR_BYTES;
            let hi = (end.min(line_addr + self.line_bytes) - 1 - line_addr) / SECTOR_BYTES;
            self.set(line_addr, ((1u16 << (hi + 1)) - (1u16 << lo)) as u8, out);
            line_addr += self.line_bytes;
        }
    }

    /// Sets `sectors` in the line at `line_addr`, appending it when new.
    #[inline(always)]
    fn set(&mut self, line_addr: u64, sectors: u8, out: &mut Vec<LineRequest>) {
        let same_line = out.get(self.last).is_some_and(|l| l.line_addr == line_addr);
        if !same_line {
            let key = 1u64 << ((line_addr >> self.line_bytes.trailing_zeros()) & 63);
            let found = if self.seen & key == 0 {
                self.seen |= key;
                None
            } else {
                out.iter().position(|l| l.line_addr == line_addr)
            };
            self.last = match found {
                Some(i) => i,
                None => {
                    out.push(LineRequest {
                        line_addr,
                        sectors: 0,
                    });
                    out.len() - 1
                }
            };
        }
        out[self.last].sectors |= sectors;
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
    let (banks, word, size) = (banks.max(1), bank_bytes.max(1), access_bytes.max(1));
    // Every word an access can touch, bounded (a warp's 32 lanes of up to 16 bytes touch at
    // most 160 words of 4 bytes).
    let per_lane = size.div_ceil(word) as usize + 1;
    if banks <= MAX_FAST_BANKS
        && banks.is_power_of_two()
        && word.is_power_of_two()
        && lanes.len() * per_lane <= MAX_FAST_WORDS
    {
        if size <= word && lanes.len() <= MAX_ONE_WORD_LANES {
            if let Some(passes) = bank_conflicts_one_word(lanes, size, banks, word) {
                return passes;
            }
        }
        bank_conflicts_pow2(lanes, size, banks, word)
    } else {
        bank_conflicts_any(lanes, u64::from(size), u64::from(banks), u64::from(word))
    }
}

/// Banks the stack-only path of [`shared_bank_conflicts_with`] handles.
const MAX_FAST_BANKS: u32 = 64;
/// Words (lanes × words per lane) the stack-only path handles.
const MAX_FAST_WORDS: usize = 256;

/// [`shared_bank_conflicts_with`] for a power-of-two number of banks and word size, without
/// allocating or dividing: it runs for every shared-memory warp access. Each bank remembers
/// the first word seen in it; a different word is looked up among the other distinct words
/// seen so far (few: only conflicting ones get there) and counted once.
fn bank_conflicts_pow2(lanes: &[Option<u64>], size: u32, banks: u32, word: u32) -> u32 {
    let shift = word.trailing_zeros();
    let mask = u64::from(banks - 1);
    let mut first = [0u64; MAX_FAST_BANKS as usize];
    let mut count = [0u32; MAX_FAST_BANKS as usize];
    let mut others = [0u64; MAX_FAST_WORDS];
    let mut n_others = 0;
    for &addr in lanes.iter().flatten() {
        let last = addr.saturating_add(u64::from(size) - 1) >> shift;
        for w in (addr >> shift)..=last {
            let b = (w & mask) as usize;
            if count[b] == 0 {
                first[b] = w;
                count[b] = 1;
            } else if first[b] != w && !others[..n_others].contains(&w) {
                others[n_others] = w;
                n_others += 1;
                count[b] += 1;
            }
        }
    }
    count[..banks as usize].iter().copied().max().unwrap_or(0)
}

/// Lanes [`bank_conflicts_one_word`] handles (a warp's).
const MAX_ONE_WORD_LANES: usize = 32;

/// [`bank_conflicts_pow2`] when every lane's access lies in one word (no wider than a word
/// and not straddling two: every aligned shared access of up to a bank's width), `None`
/// when one does not. The common case of every shared-memory warp access, with a bit per
/// bank for the banks seen and nothing larger than a warp's words to clear.
fn bank_conflicts_one_word(lanes: &[Option<u64>], size: u32, banks: u32, word: u32) -> Option<u32> {
    let shift = word.trailing_zeros();
    let mask = u64::from(banks - 1);
    let mut seen = 0u64;
    let mut first = [0u64; MAX_FAST_BANKS as usize];
    // Per bank: distinct words after its first; `others` holds them all (a lane adds one
    // at most).
    let mut extra = [0u32; MAX_FAST_BANKS as usize];
    let mut others = [0u64; MAX_ONE_WORD_LANES];
    let (mut n_others, mut most, mut straddles) = (0, 0, 0);
    for &lane in lanes {
        let Some(addr) = lane else { continue };
        let w = addr >> shift;
        straddles |= (addr.saturating_add(u64::from(size) - 1) >> shift) ^ w;
        let b = (w & mask) as usize;
        let bit = 1u64 << b;
        if seen & bit == 0 {
            first[b] = w;
        }
        seen |= bit;
        if first[b] != w && !others[..n_others].contains(&w) {
            others[n_others] = w;
            n_others += 1;
            extra[b] += 1;
            most = most.max(extra[b]);
        }
    }
    if straddles != 0 {
        return None;
    }
    Some(if seen == 0 { 0 } else { most + 1 })
}

/// [`shared_bank_conflicts_with`] for any number of banks and word size.
fn bank_conflicts_any(lanes: &[Option<u64>], size: u64, banks: u64, word: u64) -> u32 {
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

    /// The allocation-free path counts exactly what the general one counts: random warps of
    /// every access size, strides, broadcasts, unaligned and inactive lanes.
    #[test]
    fn the_fast_bank_count_agrees_with_the_general_one() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let (mut conflicted, mut one_word) = (0, 0);
        for case in 0..20_000 {
            let size = [1u32, 2, 4, 8, 12, 16][case % 6];
            let (banks, word) = [(32u32, 4u32), (16, 4), (32, 8), (64, 4), (1, 4)][case / 6 % 5];
            let stride = [0u64, 1, 2, 4, 8, 33, 128, 132, 4096][(next() % 9) as usize];
            let base = next() % 65_536;
            let lanes: Vec<Option<u64>> = (0..32u64)
                .map(|i| match next() % 8 {
                    0 => None,
                    1 => Some(next() % 65_536),
                    _ => Some(base + i * stride),
                })
                .collect();
            let fast = bank_conflicts_pow2(&lanes, size, banks, word);
            let dispatched = shared_bank_conflicts_with(&lanes, size, banks, word);
            let any =
                bank_conflicts_any(&lanes, u64::from(size), u64::from(banks), u64::from(word));
            assert_eq!(
                (fast, dispatched),
                (any, any),
                "size {size}, {banks} banks of {word} B, lanes {lanes:?}"
            );
            one_word += usize::from(
                size <= word && bank_conflicts_one_word(&lanes, size, banks, word).is_some(),
            );
            conflicted += usize::from(any > 1);
        }
        assert!(
            conflicted > 1_000,
            "the cases must include conflicts: {conflicted}"
        );
        assert!(
            one_word > 1_000,
            "the cases must include one-word warps: {one_word}"
        );
    }

    /// Coalescing as the module's doc defines it, byte by byte: each touched byte's line in
    /// order of first touch, with the byte's sector set.
    fn coalesce_by_definition(lanes: &[Option<u64>], size: u32, line: u64) -> Vec<LineRequest> {
        let mut out: Vec<LineRequest> = Vec::new();
        for addr in lanes.iter().flatten() {
            for byte in *addr..addr + u64::from(size.max(1)) {
                let line_addr = byte & !(line - 1);
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
        out
    }

    /// The coalescer (which walks runs of side-by-side lanes line by line and tries the
    /// line last touched first) gives the definition's lines in the definition's order:
    /// random warps of every access and line size, strides, one or two side-by-side runs,
    /// lanes that go back to an earlier line, unaligned, straddling and inactive lanes.
    #[test]
    fn coalescing_follows_the_definition() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let (mut revisits, mut runs) = (0, 0);
        for case in 0..20_000 {
            let size = [1u32, 2, 4, 8, 12, 16][case % 6];
            let line = [32u64, 64, 128, 256][case / 6 % 4];
            let stride = [0u64, 1, 4, 8, 33, 128, 132, 4096][(next() % 8) as usize];
            let base = next() % 65_536;
            let lanes: Vec<Option<u64>> = if case % 3 == 0 {
                // Side by side (a coalesced access), with some lanes inactive, in one run
                // or, like a 2D block's warp, in two (the second from lane 16 elsewhere).
                let mut at = base;
                let second = next() % 2 == 0;
                (0..32)
                    .map(|i| {
                        if i == 16 && second {
                            at = next() % 65_536;
                        }
                        match next() % 6 {
                            0 => None,
                            _ => {
                                at += u64::from(size);
                                Some(at - u64::from(size))
                            }
                        }
                    })
                    .collect()
            } else {
                (0..32u64)
                    .map(|i| match next() % 8 {
                        0 => None,
                        1 => Some(next() % 65_536),
                        2 => Some(base + (i % 3) * 300),
                        _ => Some(base + i * stride),
                    })
                    .collect()
            };
            let active: Vec<u64> = lanes.iter().flatten().copied().collect();
            let breaks = active
                .windows(2)
                .filter(|w| w[1] != w[0] + u64::from(size))
                .count();
            runs += usize::from(active.len() > 8 && breaks <= 1);
            let want = coalesce_by_definition(&lanes, size, line);
            assert_eq!(
                coalesce(&lanes, size, line),
                want,
                "size {size}, line {line}, lanes {lanes:?}"
            );
            revisits += usize::from(want.len() > 2);
        }
        assert!(
            revisits > 1_000,
            "the cases must touch several lines: {revisits}"
        );
        assert!(
            runs > 5_000,
            "the cases must include warps in one or two runs: {runs}"
        );
    }

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
