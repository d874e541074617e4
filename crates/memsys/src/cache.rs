//! A set-associative, sectored cache with LRU replacement and MSHRs: the storage model shared
//! by the L1 data cache, the constant cache and the L2 slices.
//!
//! Model (GPGPU-Sim v3.x as used by papers/lin-thesis §3.3.1 and §4.3.1; papers/lin-thesis
//! Table 4.1 lists the L1 as 128 B blocks with 256 MSHRs and the L2 as "WBWA"):
//! * Lines of `line_bytes`, each divided into sectors of `sector_bytes` (a multiple of 32 B;
//!   `sector_bytes == line_bytes` is a non-sectored cache). Masks passed in and out are always
//!   in 32-byte units; the cache widens a request to its own sector granularity.
//! * A read that finds all its sectors valid hits. Otherwise it needs the missing sectors: if an
//!   MSHR already tracks the line the read *merges* into it (up to `mshr_max_merge` requests per
//!   entry; sectors not yet requested are fetched by an extra downstream request); otherwise it
//!   takes a new MSHR entry. With no entry free, or the merge limit reached, the access is refused
//!   (a *reservation failure*, GPGPU-Sim's term) and the requester must retry: that is the stall.
//! * Lines are allocated when their data arrives (allocate-on-fill), evicting the LRU line of
//!   the set; a dirty victim yields a write-back.
//! * Writes follow [`WritePolicy`].
//!
//! The cache holds no time: latencies are applied by the controller that owns it (the L1 in
//! `system.rs`, the L2 slice in `system.rs`). It is generic over the *waiter* `W`, the
//! controller's note of who is waiting on an MSHR.
//!
//! Invariants: a valid line has a non-zero valid mask; dirty ⊆ valid; at most one MSHR entry
//! per line; an MSHR entry lives until all its downstream fetches have been filled.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use serde::{Deserialize, Serialize};

use crate::coalesce::SECTOR_BYTES;
use crate::ConfigError;

/// What a write does to the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WritePolicy {
    /// Write-through, no allocate, and a write hit *evicts* the line (GPGPU-Sim's Fermi L1 for
    /// global data: stores never leave stale or partially-written lines in the L1).
    WriteEvict,
    /// Write-through, no allocate; a write hit updates the line in place.
    WriteThrough,
    /// Write-back, write-allocate: a write marks its sectors valid and dirty (allocating the
    /// line without fetching: writes are assumed to cover whole sectors); dirty sectors are
    /// written back when the line is evicted. The L2 policy (papers/lin-thesis Table 4.1).
    WriteBackAllocate,
}

/// The fixed description of one cache.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheSpec {
    /// Capacity in bytes (sets × associativity × line size).
    pub size_bytes: u64,
    /// Ways per set.
    pub assoc: u32,
    /// Line (block) size in bytes; must equal the memory system's line size.
    pub line_bytes: u64,
    /// Sector size in bytes: a multiple of 32 that divides `line_bytes`.
    pub sector_bytes: u64,
    /// Miss status holding registers: lines that may be outstanding at once.
    pub mshr_entries: u32,
    /// Requests one MSHR entry may hold (the first miss plus merged ones).
    pub mshr_max_merge: u32,
    /// Hit latency in cycles of the cache's clock domain (core for L1/constant, L2 for L2).
    pub hit_latency: u64,
    /// What a write does.
    pub write_policy: WritePolicy,
}

impl CacheSpec {
    /// Number of sets.
    pub fn sets(&self) -> u64 {
        self.size_bytes / (u64::from(self.assoc) * self.line_bytes)
    }

    /// Checks the geometry; `what` names the cache in the error.
    pub fn validate(&self, what: &'static str, line_bytes: u64) -> Result<(), ConfigError> {
        let bad = |reason: String| Err(ConfigError::Invalid { what, reason });
        if self.line_bytes != line_bytes {
            return bad(format!(
                "line_bytes {} differs from the system line size {line_bytes}",
                self.line_bytes
            ));
        }
        if self.sector_bytes < SECTOR_BYTES
            || !self.sector_bytes.is_multiple_of(SECTOR_BYTES)
            || !self.line_bytes.is_multiple_of(self.sector_bytes)
        {
            return bad(format!(
                "sector_bytes {} must be a multiple of 32 dividing line_bytes {}",
                self.sector_bytes, self.line_bytes
            ));
        }
        if self.assoc == 0
            || self.sets() == 0
            || self.sets() * u64::from(self.assoc) * self.line_bytes != self.size_bytes
        {
            return bad(format!(
                "size_bytes {} is not sets × assoc {} × line_bytes {}",
                self.size_bytes, self.assoc, self.line_bytes
            ));
        }
        if self.mshr_entries == 0 || self.mshr_max_merge == 0 {
            return bad("mshr_entries and mshr_max_merge must be at least 1".into());
        }
        Ok(())
    }
}

/// Counters of one cache.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheStats {
    /// Read and write accesses that were accepted (reservation failures excluded).
    pub accesses: u64,
    /// Accepted reads (atomics at the L2 count here).
    pub reads: u64,
    /// Accepted writes.
    pub writes: u64,
    /// Accesses that found everything they needed (a write hit: the line was present).
    pub hits: u64,
    /// Accesses whose line was absent (or, for reads, already being fetched: see `mshr_merges`).
    pub misses: u64,
    /// Reads whose line was present but lacked some requested sectors.
    pub sector_misses: u64,
    /// Reads merged into an existing MSHR entry (also counted in `misses`).
    pub mshr_merges: u64,
    /// Accesses refused because no MSHR entry, merge slot or downstream queue slot was free.
    pub reservation_fails: u64,
    /// Lines evicted to make room.
    pub evictions: u64,
    /// Dirty lines written back.
    pub writebacks: u64,
    /// Fills received from below.
    pub fills: u64,
}

impl CacheStats {
    /// The counts between the snapshot `earlier` and `self` (counters only grow).
    pub fn since(&self, earlier: &CacheStats) -> CacheStats {
        CacheStats {
            accesses: self.accesses - earlier.accesses,
            reads: self.reads - earlier.reads,
            writes: self.writes - earlier.writes,
            hits: self.hits - earlier.hits,
            misses: self.misses - earlier.misses,
            sector_misses: self.sector_misses - earlier.sector_misses,
            mshr_merges: self.mshr_merges - earlier.mshr_merges,
            reservation_fails: self.reservation_fails - earlier.reservation_fails,
            evictions: self.evictions - earlier.evictions,
            writebacks: self.writebacks - earlier.writebacks,
            fills: self.fills - earlier.fills,
        }
    }

    /// Adds `o` into `self` (for totals over SMs or slices).
    pub fn add(&mut self, o: &CacheStats) {
        self.accesses += o.accesses;
        self.reads += o.reads;
        self.writes += o.writes;
        self.hits += o.hits;
        self.misses += o.misses;
        self.sector_misses += o.sector_misses;
        self.mshr_merges += o.mshr_merges;
        self.reservation_fails += o.reservation_fails;
        self.evictions += o.evictions;
        self.writebacks += o.writebacks;
        self.fills += o.fills;
    }
}

/// Why an access was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReservationFail {
    /// Every MSHR entry is in use.
    MshrFull,
    /// The line's MSHR entry already holds `mshr_max_merge` requests.
    MergeLimit,
}

/// What a read will do (from [`Cache::probe_read`]) or did (from [`Cache::read`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadOutcome {
    /// All sectors present.
    Hit,
    /// Merged into the line's MSHR entry; `fetch` (32-byte mask, possibly 0) must be requested
    /// from below.
    Merged {
        /// Sectors to fetch in addition to those already requested.
        fetch: u8,
    },
    /// Took a new MSHR entry; `fetch` must be requested from below.
    Allocated {
        /// Sectors to fetch.
        fetch: u8,
    },
    /// Refused; nothing changed.
    Fail(ReservationFail),
}

impl ReadOutcome {
    /// Sectors this read sends below (0 for a hit, a silent merge or a failure).
    pub fn fetch(self) -> u8 {
        match self {
            ReadOutcome::Merged { fetch } | ReadOutcome::Allocated { fetch } => fetch,
            _ => 0,
        }
    }
}

/// A dirty line leaving the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Writeback {
    /// Line address (as the cache was addressed).
    pub line_addr: u64,
    /// Dirty sectors (32-byte mask).
    pub sectors: u8,
}

/// What a write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteOutcome {
    /// The line was present.
    pub hit: bool,
    /// The write must be forwarded below (write-through policies).
    pub forward: bool,
    /// A dirty victim evicted by write-allocation.
    pub writeback: Option<Writeback>,
}

#[derive(Debug, Clone, Copy, Default)]
struct Line {
    tag: u64,
    valid: u8,
    dirty: u8,
    lru: u64,
}

/// The key of a line with no valid sector: no line address (they are line-aligned).
const NO_KEY: u64 = u64::MAX;

#[derive(Debug, Clone)]
struct Mshr<W> {
    requested: u8,
    outstanding: u32,
    waiters: Vec<W>,
}

/// Hashes line addresses for the MSHR table: one multiply (Fibonacci hashing). Line
/// addresses are already well spread in their upper bits, and the table is probed for every
/// line of every access, so the default SipHash dominated the cost of a cache lookup. Only
/// lookups use the hash (the table is never iterated), so results do not depend on it.
#[derive(Default)]
pub struct LineHasher(u64);

impl Hasher for LineHasher {
    fn finish(&self) -> u64 {
        // The product's high bits are mixed; fold them into the low bits the table indexes by
        // (line addresses have zero low bits, and so do their products).
        self.0 ^ (self.0 >> 29)
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0 ^ x).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// The mutable state and counters of one cache (its spec inside).
#[derive(Debug, Clone)]
pub struct Cache<W> {
    spec: CacheSpec,
    sets: u64,
    /// With power-of-two lines and sets (every preset), the set of a line address is a
    /// shift and a mask: `(shift, sets - 1)`. A probe happens for every line of every
    /// access, and two divisions cost more than the rest of the lookup.
    pow2: Option<(u32, u64)>,
    lines: Vec<Line>,
    /// Per line: its tag while it holds any valid sector, [`NO_KEY`] otherwise — what a
    /// lookup compares, packed apart from the rest of the line so that a set's ways share a
    /// host cache line or two (every line of every access is looked up).
    keys: Vec<u64>,
    stamp: u64,
    mshr: HashMap<u64, Mshr<W>, BuildHasherDefault<LineHasher>>,
    spare: Vec<Vec<W>>,
    stats: CacheStats,
    /// Bumped by every call that may change lines or MSHRs (see [`Cache::version`]).
    version: u64,
}

impl<W> Cache<W> {
    /// An empty cache. The spec must have been validated.
    pub fn new(spec: CacheSpec) -> Self {
        let sets = spec.sets().max(1);
        let lines = vec![Line::default(); (sets * u64::from(spec.assoc)) as usize];
        let keys = vec![NO_KEY; lines.len()];
        let pow2 = (spec.line_bytes.is_power_of_two() && sets.is_power_of_two())
            .then(|| (spec.line_bytes.trailing_zeros(), sets - 1));
        Self {
            spec,
            sets,
            pow2,
            lines,
            keys,
            stamp: 0,
            mshr: HashMap::default(),
            spare: Vec::new(),
            stats: CacheStats::default(),
            version: 0,
        }
    }

    /// The fixed description.
    pub fn spec(&self) -> &CacheSpec {
        &self.spec
    }

    /// The counters.
    pub fn stats(&self) -> &CacheStats {
        &self.stats
    }

    /// Changes whenever the cache's contents or MSHRs may have changed: two equal versions
    /// mean [`Cache::probe_read`] answers the same (a controller may remember a refusal).
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Counts a refusal the controller decided on (e.g. no room downstream).
    pub fn record_reservation_fail(&mut self) {
        self.stats.reservation_fails += 1;
    }

    /// MSHR entries in use.
    pub fn mshrs_in_use(&self) -> usize {
        self.mshr.len()
    }

    /// MSHR entries free.
    pub fn mshrs_free(&self) -> usize {
        self.spec.mshr_entries as usize - self.mshr.len()
    }

    /// True when the line has an MSHR entry.
    pub fn is_pending(&self, line_addr: u64) -> bool {
        self.mshr.contains_key(&line_addr)
    }

    /// Widens a 32-byte mask to whole cache sectors.
    fn widen(&self, mask: u8) -> u8 {
        let per = (self.spec.sector_bytes / SECTOR_BYTES) as u32;
        if per <= 1 {
            return mask;
        }
        let group = ((1u16 << per) - 1) as u8;
        let mut out = 0u8;
        let mut i = 0;
        while i < 8 {
            if mask & (group << i) != 0 {
                out |= group << i;
            }
            i += per;
        }
        out
    }

    fn full_mask(&self) -> u8 {
        let n = (self.spec.line_bytes / SECTOR_BYTES) as u32;
        ((1u16 << n) - 1) as u8
    }

    fn set_range(&self, line_addr: u64) -> std::ops::Range<usize> {
        let set = match self.pow2 {
            Some((shift, mask)) => (line_addr >> shift) & mask,
            None => (line_addr / self.spec.line_bytes) % self.sets,
        };
        let a = self.spec.assoc as usize;
        let start = set as usize * a;
        start..start + a
    }

    fn find(&self, line_addr: u64) -> Option<usize> {
        debug_assert_ne!(line_addr, NO_KEY, "a line address is line-aligned");
        let range = self.set_range(line_addr);
        let start = range.start;
        self.keys[range]
            .iter()
            .position(|&k| k == line_addr)
            .map(|w| start + w)
    }

    /// Brings line `i`'s key up to date after its tag or valid sectors changed.
    fn sync_key(&mut self, i: usize) {
        let l = &self.lines[i];
        self.keys[i] = if l.valid != 0 { l.tag } else { NO_KEY };
    }

    fn touch(&mut self, i: usize) {
        self.stamp += 1;
        self.lines[i].lru = self.stamp;
    }

    /// Valid sectors of the line (0 when absent).
    pub fn valid_sectors(&self, line_addr: u64) -> u8 {
        self.find(line_addr).map_or(0, |i| self.lines[i].valid)
    }

    /// Dirty sectors of the line (0 when absent).
    pub fn dirty_sectors(&self, line_addr: u64) -> u8 {
        self.find(line_addr).map_or(0, |i| self.lines[i].dirty)
    }

    /// What [`Cache::read`] would do, without changing anything.
    pub fn probe_read(&self, line_addr: u64, mask: u8) -> ReadOutcome {
        let mask = self.widen(mask);
        let valid = self.valid_sectors(line_addr);
        if mask & !valid == 0 {
            return ReadOutcome::Hit;
        }
        if let Some(e) = self.mshr.get(&line_addr) {
            if e.waiters.len() >= self.spec.mshr_max_merge as usize {
                return ReadOutcome::Fail(ReservationFail::MergeLimit);
            }
            return ReadOutcome::Merged {
                fetch: mask & !valid & !e.requested,
            };
        }
        if self.mshr.len() >= self.spec.mshr_entries as usize {
            return ReadOutcome::Fail(ReservationFail::MshrFull);
        }
        ReadOutcome::Allocated {
            fetch: mask & !valid,
        }
    }

    /// Reads sectors `mask` of a line. On a miss `waiter` is parked in the line's MSHR entry and
    /// returned by [`Cache::fill`]; on a hit or a failure it is dropped.
    pub fn read(&mut self, line_addr: u64, mask: u8, waiter: W) -> ReadOutcome {
        let out = self.probe_read(line_addr, mask);
        self.read_probed(line_addr, mask, waiter, out)
    }

    /// [`Cache::read`] of a line whose [`Cache::probe_read`] answered `out` and that nothing
    /// has changed since (an SM's L1 checks every line of an access before it reads any,
    /// and reading one line changes no other line's answer).
    pub fn read_probed(
        &mut self,
        line_addr: u64,
        mask: u8,
        waiter: W,
        out: ReadOutcome,
    ) -> ReadOutcome {
        debug_assert_eq!(out, self.probe_read(line_addr, mask), "a stale probe");
        self.version += 1;
        match out {
            ReadOutcome::Fail(_) => {
                self.stats.reservation_fails += 1;
                return out;
            }
            ReadOutcome::Hit => {
                self.stats.hits += 1;
                let i = self.find(line_addr).expect("hit line present");
                self.touch(i);
            }
            ReadOutcome::Merged { fetch } => {
                self.stats.misses += 1;
                self.stats.mshr_merges += 1;
                let e = self.mshr.get_mut(&line_addr).expect("merge target");
                e.waiters.push(waiter);
                if fetch != 0 {
                    e.requested |= fetch;
                    e.outstanding += 1;
                }
            }
            ReadOutcome::Allocated { fetch } => {
                if self.find(line_addr).is_some() {
                    self.stats.sector_misses += 1;
                } else {
                    self.stats.misses += 1;
                }
                let mut waiters = self.spare.pop().unwrap_or_default();
                waiters.push(waiter);
                self.mshr.insert(
                    line_addr,
                    Mshr {
                        requested: fetch,
                        outstanding: 1,
                        waiters,
                    },
                );
            }
        }
        self.stats.accesses += 1;
        self.stats.reads += 1;
        out
    }

    /// Writes sectors `mask` of a line according to the write policy.
    pub fn write(&mut self, line_addr: u64, mask: u8) -> WriteOutcome {
        self.version += 1;
        let mask = self.widen(mask);
        self.stats.accesses += 1;
        self.stats.writes += 1;
        let found = self.find(line_addr);
        if found.is_some() {
            self.stats.hits += 1;
        } else {
            self.stats.misses += 1;
        }
        match self.spec.write_policy {
            WritePolicy::WriteEvict => {
                if let Some(i) = found {
                    self.lines[i] = Line::default();
                    self.sync_key(i);
                }
                WriteOutcome {
                    hit: found.is_some(),
                    forward: true,
                    writeback: None,
                }
            }
            WritePolicy::WriteThrough => {
                if let Some(i) = found {
                    self.lines[i].valid |= mask;
                    self.sync_key(i);
                    self.touch(i);
                }
                WriteOutcome {
                    hit: found.is_some(),
                    forward: true,
                    writeback: None,
                }
            }
            WritePolicy::WriteBackAllocate => {
                let (i, writeback) = match found {
                    Some(i) => (i, None),
                    None => self.allocate(line_addr),
                };
                self.lines[i].valid |= mask;
                self.lines[i].dirty |= mask;
                self.sync_key(i);
                self.touch(i);
                WriteOutcome {
                    hit: found.is_some(),
                    forward: false,
                    writeback,
                }
            }
        }
    }

    /// Marks sectors of a present line dirty (an atomic performed at this cache). Returns false
    /// when the line is absent.
    pub fn mark_dirty(&mut self, line_addr: u64, mask: u8) -> bool {
        self.version += 1;
        let mask = self.widen(mask);
        match self.find(line_addr) {
            Some(i) => {
                self.lines[i].valid |= mask;
                self.lines[i].dirty |= mask;
                self.sync_key(i);
                true
            }
            None => false,
        }
    }

    fn allocate(&mut self, line_addr: u64) -> (usize, Option<Writeback>) {
        let range = self.set_range(line_addr);
        let victim = range
            .clone()
            .find(|&i| self.keys[i] == NO_KEY)
            .unwrap_or_else(|| {
                range
                    .min_by_key(|&i| self.lines[i].lru)
                    .expect("assoc >= 1")
            });
        let old = self.lines[victim];
        let mut wb = None;
        if old.valid != 0 {
            self.stats.evictions += 1;
            if old.dirty != 0 {
                self.stats.writebacks += 1;
                wb = Some(Writeback {
                    line_addr: old.tag,
                    sectors: old.dirty,
                });
            }
        }
        self.lines[victim] = Line {
            tag: line_addr,
            valid: 0,
            dirty: 0,
            lru: 0,
        };
        self.keys[victim] = NO_KEY;
        (victim, wb)
    }

    /// Data for sectors `mask` of a line arrived from below: installs it (allocating and maybe
    /// evicting a dirty victim, returned) and, when the line's MSHR entry has no fetch left
    /// outstanding, frees the entry and appends its waiters to `done` in arrival order.
    pub fn fill(&mut self, line_addr: u64, mask: u8, done: &mut Vec<W>) -> Option<Writeback> {
        self.version += 1;
        self.stats.fills += 1;
        let (i, wb) = match self.find(line_addr) {
            Some(i) => (i, None),
            None => self.allocate(line_addr),
        };
        self.lines[i].valid |= self.widen(mask) & self.full_mask();
        self.sync_key(i);
        self.touch(i);
        let finished = match self.mshr.get_mut(&line_addr) {
            Some(e) => {
                e.outstanding = e.outstanding.saturating_sub(1);
                e.outstanding == 0
            }
            None => false,
        };
        if finished {
            let mut e = self.mshr.remove(&line_addr).expect("entry present");
            done.append(&mut e.waiters);
            self.spare.push(e.waiters);
        }
        wb
    }

    /// Sectors a fill of `mask` should request from below when this cache is non-sectored
    /// (the mask widened to the cache's sector size).
    pub fn fetch_mask(&self, mask: u8) -> u8 {
        self.widen(mask)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(policy: WritePolicy) -> CacheSpec {
        CacheSpec {
            size_bytes: 2 * 2 * 128,
            assoc: 2,
            line_bytes: 128,
            sector_bytes: 32,
            mshr_entries: 2,
            mshr_max_merge: 2,
            hit_latency: 1,
            write_policy: policy,
        }
    }

    /// Lookups (a set's packed keys) find every way of a set after fills, lose exactly the
    /// evicted line, and see a write-evicted line gone; the next fill takes the freed way.
    #[test]
    fn lookups_follow_fills_evictions_and_invalidations() {
        let spec = CacheSpec {
            size_bytes: 2 * 4 * 128, // 2 sets of 4 ways
            assoc: 4,
            mshr_entries: 8,
            ..spec(WritePolicy::WriteEvict)
        };
        let mut c: Cache<u32> = Cache::new(spec);
        let mut done = Vec::new();
        // Lines 0, 256, 512, 768 share set 0; 128 lives in set 1.
        let set0 = [0u64, 256, 512, 768];
        for (k, &a) in set0.iter().enumerate() {
            c.fill(a, 1 << k, &mut done);
        }
        c.fill(128, 0b1111, &mut done);
        for (k, &a) in set0.iter().enumerate() {
            assert_eq!(c.valid_sectors(a), 1 << k, "way of line {a}");
        }
        assert_eq!(c.valid_sectors(128), 0b1111);
        // A fifth line evicts the least recently used: line 0.
        c.fill(1024, 0b0001, &mut done);
        assert_eq!(c.valid_sectors(0), 0, "evicted");
        for &a in &[256, 512, 768, 1024, 128] {
            assert_ne!(c.valid_sectors(a), 0, "line {a} kept");
        }
        // A write evicts line 512; the next fill takes its way, and line 256 (the least
        // recently used) stays.
        assert!(c.write(512, 0b0001).hit);
        assert_eq!(c.valid_sectors(512), 0, "write-evicted");
        c.fill(1280, 0b0010, &mut done);
        assert_eq!(c.valid_sectors(1280), 0b0010);
        assert_eq!(c.valid_sectors(256), 0b0010, "the LRU line stays");
        assert!(done.is_empty(), "nothing was waiting");
    }

    #[test]
    fn miss_merge_fill_hit() {
        let mut c: Cache<u32> = Cache::new(spec(WritePolicy::WriteEvict));
        assert_eq!(
            c.read(0, 0b0011, 1),
            ReadOutcome::Allocated { fetch: 0b0011 }
        );
        assert_eq!(c.read(0, 0b0001, 2), ReadOutcome::Merged { fetch: 0 });
        assert_eq!(
            c.read(0, 0b0100, 3),
            ReadOutcome::Fail(ReservationFail::MergeLimit)
        );
        assert_eq!(c.read(256, 1, 4), ReadOutcome::Allocated { fetch: 1 });
        assert_eq!(
            c.read(512, 1, 5),
            ReadOutcome::Fail(ReservationFail::MshrFull)
        );
        let mut done = Vec::new();
        c.fill(0, 0b0011, &mut done);
        assert_eq!(done, vec![1, 2]);
        assert_eq!(c.read(0, 0b0011, 6), ReadOutcome::Hit);
        // Sector miss: the line is present but sector 2 is not.
        assert_eq!(
            c.read(0, 0b0100, 7),
            ReadOutcome::Allocated { fetch: 0b0100 }
        );
        assert_eq!(c.stats().sector_misses, 1);
        assert_eq!(c.stats().reservation_fails, 2);
    }

    #[test]
    fn version_tracks_every_change_a_probe_can_see() {
        let mut c: Cache<u32> = Cache::new(spec(WritePolicy::WriteEvict));
        c.read(0, 1, 1);
        c.read(256, 1, 2);
        let v = c.version();
        let full = c.probe_read(512, 1);
        assert_eq!(full, ReadOutcome::Fail(ReservationFail::MshrFull));
        // Probing and counting refusals change nothing.
        c.record_reservation_fail();
        assert_eq!((c.version(), c.probe_read(512, 1)), (v, full));
        // A fill frees an MSHR: the version moves and the same probe now succeeds.
        c.fill(0, 1, &mut Vec::new());
        assert_ne!(c.version(), v);
        assert_eq!(c.probe_read(512, 1), ReadOutcome::Allocated { fetch: 1 });
    }

    #[test]
    fn non_sectored_fetches_whole_line() {
        let mut s = spec(WritePolicy::WriteEvict);
        s.sector_bytes = 128;
        let mut c: Cache<()> = Cache::new(s);
        assert_eq!(
            c.read(0, 0b0001, ()),
            ReadOutcome::Allocated { fetch: 0b1111 }
        );
    }

    #[test]
    fn write_back_allocate_evicts_dirty() {
        let mut c: Cache<()> = Cache::new(spec(WritePolicy::WriteBackAllocate));
        // Lines 0, 256 and 512 map to set 0 (2 sets of 128 B lines).
        assert_eq!(c.write(0, 0b1111).writeback, None);
        assert_eq!(c.write(256, 0b0001).writeback, None);
        let w = c.write(512, 0b0001);
        assert!(!w.hit && !w.forward);
        assert_eq!(
            w.writeback,
            Some(Writeback {
                line_addr: 0,
                sectors: 0b1111
            })
        );
        assert_eq!(c.stats().writebacks, 1);
    }

    #[test]
    fn write_evict_invalidates() {
        let mut c: Cache<()> = Cache::new(spec(WritePolicy::WriteEvict));
        c.read(0, 1, ());
        c.fill(0, 1, &mut Vec::new());
        assert!(c.write(0, 1).hit);
        assert_eq!(c.valid_sectors(0), 0);
    }
}
