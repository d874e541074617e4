//! The SM front end and operand collector state: the instruction cache, the fetch port and
//! the register-file banks (the model is described in [`crate::pipeline`]). With
//! sub-cores (Volta and later) every scheduler has its own fetch unit and register banks.

use crate::pipeline::{FetchSpec, PipelineSpec};
use crate::timing::ids::WarpSlotId;
use crate::timing::stats::FrontendStats;

use super::warp::{WarpHot, NO_PC};

/// How the SM's schedulers share the front end and the register file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum CoreLayout {
    /// One fetch unit and one set of register banks for the whole SM.
    Shared,
    /// One of each per scheduler (`PipelineSpec::sub_cores`).
    SubCores,
}

/// The fetch units and register banks of an SM.
pub(super) struct FrontEnd {
    fetch: Vec<FetchUnit>,
    banks: Vec<RegisterBanks>,
    pub layout: CoreLayout,
    /// Instructions one fetch brings into a warp's buffer.
    ibuffer_entries: u32,
}

impl FrontEnd {
    pub fn new(spec: &PipelineSpec, schedulers: usize) -> FrontEnd {
        let (layout, n) = if spec.sub_cores {
            (CoreLayout::SubCores, schedulers)
        } else {
            (CoreLayout::Shared, 1)
        };
        FrontEnd {
            fetch: (0..n).map(|_| FetchUnit::new(&spec.fetch)).collect(),
            banks: (0..n)
                .map(|_| RegisterBanks::new(spec.register_banks))
                .collect(),
            layout,
            ibuffer_entries: spec.fetch.ibuffer_entries.max(1),
        }
    }

    /// The register banks scheduler `sched` reads through.
    #[inline]
    pub fn banks_of(&mut self, sched: usize) -> &mut RegisterBanks {
        let set = match self.layout {
            CoreLayout::SubCores => sched,
            CoreLayout::Shared => 0,
        };
        &mut self.banks[set]
    }

    /// Whether scheduler `sched`'s banks can read `mask` at `now` (always, without
    /// sub-cores: there a conflict only delays the result).
    #[inline]
    pub fn banks_free(&self, sched: usize, mask: u64, now: u64) -> bool {
        match self.layout {
            CoreLayout::SubCores => self.banks[sched].free(mask, now),
            CoreLayout::Shared => true,
        }
    }

    /// The banks whose conflicts stall issue (sub-cores), for [`WarpHot::derive`].
    #[inline]
    pub fn stalling_banks(&self) -> Option<&RegisterBanks> {
        match self.layout {
            CoreLayout::SubCores => self.banks.first(),
            CoreLayout::Shared => None,
        }
    }

    /// Starts the fetch that fills the instruction buffer of the warp in `slot` (mirrored
    /// by `hot`) from its next PC.
    #[inline]
    pub fn fill_buffer(&mut self, hot: &mut WarpHot, slot: WarpSlotId, now: u64) {
        if hot.next_pc == NO_PC {
            return;
        }
        let unit = match self.layout {
            CoreLayout::SubCores => slot.0 as usize % self.fetch.len(),
            CoreLayout::Shared => 0,
        };
        hot.fetch_ready = self.fetch[unit].fetch(hot.next_pc, now);
        hot.buffer_end = hot.next_pc.saturating_add(self.ibuffer_entries);
    }

    /// Front-end counters so far.
    pub fn stats(&self) -> FrontendStats {
        FrontendStats {
            fetches: self.fetch.iter().map(|f| f.fetches).sum(),
            icache_misses: self.fetch.iter().map(|f| f.misses).sum(),
            operand_conflict_cycles: self.banks.iter().map(|b| b.conflict_cycles).sum(),
            ..FrontendStats::default()
        }
    }
}

/// A set-associative instruction cache with LRU replacement, holding line numbers.
#[derive(Clone, Debug)]
pub(super) struct ICache {
    sets: usize,
    assoc: usize,
    /// `sets × assoc` entries: (line, last use), `u64::MAX` line when empty.
    ways: Vec<(u64, u64)>,
    clock: u64,
}

impl ICache {
    pub(super) fn new(spec: &FetchSpec) -> ICache {
        let assoc = spec.icache_assoc.max(1) as usize;
        let lines = (spec.icache_bytes / spec.icache_line_bytes.max(1)).max(1) as usize;
        let sets = (lines / assoc).max(1);
        ICache {
            sets,
            assoc,
            ways: vec![(u64::MAX, 0); sets * assoc],
            clock: 0,
        }
    }

    /// Looks up `line`, filling it on a miss (evicting the least recently used way); true
    /// on a hit.
    pub(super) fn access(&mut self, line: u64) -> bool {
        self.clock += 1;
        // Set counts are powers of two in every preset: a mask, not a division, per fetch.
        let set = if self.sets.is_power_of_two() {
            line as usize & (self.sets - 1)
        } else {
            (line % self.sets as u64) as usize
        };
        let ways = &mut self.ways[set * self.assoc..(set + 1) * self.assoc];
        if let Some(w) = ways.iter_mut().find(|w| w.0 == line) {
            w.1 = self.clock;
            return true;
        }
        let victim = ways
            .iter_mut()
            .min_by_key(|w| w.1)
            .expect("at least one way");
        *victim = (line, self.clock);
        false
    }
}

/// The SM's instruction fetch: one fetch may start per cycle.
#[derive(Clone, Debug)]
pub(super) struct FetchUnit {
    icache: ICache,
    /// The first cycle at which the fetch port is free.
    port_free: u64,
    line_insts: u64,
    hit_latency: u64,
    miss_latency: u64,
    pub fetches: u64,
    pub misses: u64,
}

impl FetchUnit {
    pub(super) fn new(spec: &FetchSpec) -> FetchUnit {
        FetchUnit {
            icache: ICache::new(spec),
            port_free: 0,
            line_insts: u64::from((spec.icache_line_bytes / spec.inst_bytes.max(1)).max(1)),
            hit_latency: u64::from(spec.hit_latency.max(1)),
            miss_latency: u64::from(spec.miss_latency),
            fetches: 0,
            misses: 0,
        }
    }

    /// Starts a fetch of the instructions at `pc` requested at cycle `now` (it starts on the
    /// first free cycle of the port after `now`); returns the cycle its instructions can
    /// issue.
    #[inline]
    pub(super) fn fetch(&mut self, pc: u32, now: u64) -> u64 {
        let start = (now + 1).max(self.port_free);
        self.port_free = start + 1;
        self.fetches += 1;
        let line = if self.line_insts.is_power_of_two() {
            u64::from(pc) >> self.line_insts.trailing_zeros()
        } else {
            u64::from(pc) / self.line_insts
        };
        let hit = self.icache.access(line);
        if !hit {
            self.misses += 1;
        }
        start + self.hit_latency + if hit { 0 } else { self.miss_latency }
    }
}

/// The register-file banks, each serving one read per cycle.
#[derive(Clone, Debug)]
pub(super) struct RegisterBanks {
    free_at: Vec<u64>,
    /// `banks - 1` when the bank count is a power of two (every preset): a register's bank
    /// is then a mask, not a division, on every issue.
    pow2_mask: Option<u32>,
    pub conflict_cycles: u64,
}

impl RegisterBanks {
    pub(super) fn new(banks: u32) -> RegisterBanks {
        let banks = banks.max(1);
        RegisterBanks {
            free_at: vec![0; banks as usize],
            pow2_mask: banks.is_power_of_two().then(|| banks - 1),
            conflict_cycles: 0,
        }
    }

    /// The bank of register `r` (registers interleave over the banks).
    #[inline(always)]
    fn bank(&self, r: u32) -> u32 {
        match self.pow2_mask {
            Some(m) => r & m,
            None => r % self.free_at.len() as u32,
        }
    }

    /// Reads the source registers `regs` (virtual register indices, possibly repeated) of an
    /// instruction issued at `now`; returns the cycles its operands arrive later than a
    /// conflict-free read would.
    #[inline]
    pub(super) fn read(&mut self, regs: &[u32], now: u64) -> u64 {
        let mut extra = 0;
        for (i, &r) in regs.iter().enumerate() {
            // One read serves every use of the same register. (A plain loop: `contains`
            // on integers is built for long slices, chunked, and these hold one to four.)
            #[allow(clippy::manual_contains)]
            if regs[..i].iter().any(|&x| x == r) {
                continue;
            }
            let bank = self.bank(r) as usize;
            let b = &mut self.free_at[bank];
            let slot = now.max(*b);
            *b = slot + 1;
            extra = extra.max(slot - now);
        }
        self.conflict_cycles += extra;
        extra
    }

    /// Whether every bank of `mask` (bit `b`: bank `b`) can take a read at `now`.
    #[inline]
    pub(super) fn free(&self, mask: u64, now: u64) -> bool {
        let mut m = mask;
        while m != 0 {
            let b = m.trailing_zeros() as usize;
            m &= m - 1;
            if self.free_at.get(b).is_some_and(|&t| t > now) {
                return false;
            }
        }
        true
    }

    /// The banks (bit `b`: bank `b`, the first 64) that reading `regs` uses.
    #[inline]
    pub(super) fn mask(&self, regs: &[u32]) -> u64 {
        regs.iter()
            .map(|&r| self.bank(r))
            .filter(|&b| b < 64)
            .fold(0, |m, b| m | 1 << b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> FetchSpec {
        FetchSpec {
            icache_bytes: 4 * 128,
            icache_line_bytes: 128,
            icache_assoc: 2,
            ..FetchSpec::default()
        }
    }

    #[test]
    fn icache_is_lru_within_a_set() {
        // 2 sets × 2 ways: lines 0, 2, 4 share set 0.
        let mut c = ICache::new(&spec());
        assert!(!c.access(0));
        assert!(!c.access(2));
        assert!(c.access(0));
        assert!(!c.access(4)); // evicts 2, the least recently used
        assert!(c.access(0));
        assert!(!c.access(2));
        // Set 1 is independent of set 0.
        assert!(!c.access(1));
        assert!(c.access(1));
        assert!(c.access(0));
        assert!(!c.access(4)); // 2 evicted 4 above
    }

    #[test]
    fn fetch_port_takes_one_fetch_per_cycle() {
        let s = spec();
        let mut f = FetchUnit::new(&s);
        let miss = u64::from(s.hit_latency + s.miss_latency);
        // 16 instructions of 8 B per 128 B line: pcs 0 and 15 share line 0.
        assert_eq!(f.fetch(0, 10), 11 + miss);
        assert_eq!(f.fetch(15, 10), 12 + u64::from(s.hit_latency));
        assert_eq!(f.fetch(16, 20), 21 + miss);
        assert_eq!((f.fetches, f.misses), (3, 2));
    }

    #[test]
    fn banks_serialise_reads_of_one_bank() {
        let mut b = RegisterBanks::new(4);
        assert_eq!(b.read(&[1, 2, 3], 100), 0);
        // Registers 1 and 5 share bank 1; reading r1 twice is one read.
        assert_eq!(b.read(&[1, 5, 1], 200), 1);
        // The same cycle as an earlier reader of bank 1: wait behind it.
        assert_eq!(b.read(&[9], 200), 2);
        assert_eq!(b.conflict_cycles, 3);
    }
}
