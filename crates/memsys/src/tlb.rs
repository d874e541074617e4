//! Address translation: a per-SM L1 TLB, a shared L2 TLB and page-table walkers
//! (papers/tanasic-thesis §2.3 and Figure 2.6: "each SM has a private L1 cache and L1 TLB,
//! while the L2 cache and TLB are shared between all SMs. A shared fill unit implements the
//! hardware logic of page table walkers"; the parameters of §6.5.1, Table 6.1).
//!
//! Every page is mapped (identity translation): the model prices the *time* a translation
//! takes, not its result. With demand paging (`faults`, [`crate::fault`]) a walk that ends
//! on a managed page not resident on the GPU raises a far fault, and the page's translation
//! completes when its region has migrated: the walker and the L2 MSHR are free when the walk
//! ends (the fault waits in the fault buffer, not in the walker), while the page's entry in
//! the L2 TLB's and the L1 TLBs' MSHRs waits, [`crate::fault::PENDING`] until the fault's
//! batch starts, then the batch's end ([`SharedTlb::service_faults`], [`Tlb::resolve`]).
//! A faulting page holds its L1 TLB MSHR for the whole fault: the SM stalls on the fault.
//!
//! **Model.** A warp access is translated once per distinct page its lines touch (the
//! coalescer's lines, §6.3.1 Figure 6.5: the TLB is checked for the requests the coalescing
//! unit generates; requests to one page share a translation). For each page the L1 TLB
//! ([`Tlb`]) answers at the access's cycle `now`:
//! * a **hit** is ready `latency` cycles later;
//! * a page already being fetched **merges** into its MSHR and is ready when it is;
//! * a **miss** takes an MSHR; the request reaches the shared L2 TLB ([`SharedTlb`]) after
//!   the L1 lookup, at `now + latency`, and the L1 fills when the L2 answers.
//!
//! The access is refused whole (nothing changed) when its misses need more L1 MSHRs than are
//! free: the SM retries, a translation stall. At the L2 a hit answers `latency` cycles after
//! arrival, a page being walked merges into its MSHR, and a miss walks the page table: it
//! needs an L2 MSHR and a walker, each held until the walk ends `walk_latency` cycles after
//! it starts; with none free the walk waits for the first to free (so a burst of misses
//! queues at the walkers instead of refusing the SM).
//!
//! **Time.** A TLB keeps, per MSHR, the cycle its page arrives, and fills the page into the
//! set-associative array (LRU within the set) lazily, before the next lookup at or after that
//! cycle, in (cycle, page) order. Lookups arrive in non-decreasing cycles (an SM's at its
//! core cycle; the L2's at core cycle + the L1 latency, the same for every SM), so the array
//! holds exactly what it would have held had every fill happened at its own cycle. The L2 is
//! reached by a call in SM order within a cycle, as the rest of the memory system is today;
//! when the memory front end moves into the SM (issue "Parallel machine"), this call becomes
//! a port with the same latency. Nothing iterates a hash map: results are deterministic.

use serde::{Deserialize, Serialize};

use crate::fault::{FarFaults, FaultSpec, FaultStats, PENDING};
use crate::ConfigError;

/// The page sizes a translation may use, in KiB (4 KiB, 64 KiB and 2 MiB: the sizes of
/// NVIDIA's GPU page tables since Pascal; papers/tanasic-thesis §6.5.1 assumes 4 KiB pages
/// and handles faults at 64 KiB).
pub const PAGE_KB: [u32; 3] = [4, 64, 2048];

/// The most MSHRs a TLB may have (its in-flight count is part of a 16-bit state field).
pub const MAX_MSHRS: u32 = 4096;

/// A virtual page number (address / page size).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Vpn(pub u64);

impl std::fmt::Display for Vpn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "vpn{:#x}", self.0)
    }
}

/// One TLB's fixed description.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlbSpec {
    /// Translations held (sets × `assoc`).
    pub entries: u32,
    /// Ways per set (LRU within a set); divides `entries`.
    pub assoc: u32,
    /// Core cycles of a lookup (a hit is ready this long after it is asked).
    pub latency: u64,
    /// Pages that may be missing at once (misses to one page merge into one entry).
    pub mshrs: u32,
}

/// Address translation of a GPU: the `[memory.translation]` section of a GPU file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TranslationSpec {
    /// Whether accesses are translated at all; off, the section is only checked.
    pub enabled: bool,
    /// Page size in KiB: one of [`PAGE_KB`].
    pub page_kb: u32,
    /// The TLB of every SM.
    pub l1_tlb: TlbSpec,
    /// The TLB all SMs share.
    pub l2_tlb: TlbSpec,
    /// Page-table walkers (the shared fill unit), each walking one page at a time.
    pub walkers: u32,
    /// Core cycles of one page-table walk.
    pub walk_latency: u64,
    /// Demand paging of managed memory (`[memory.translation.faults]`); absent, managed
    /// memory cannot be declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub faults: Option<FaultSpec>,
    /// How the SM's pipeline holds a warp around an access that may fault
    /// (papers/tanasic-thesis §6.3; [`Pipeline`]). Written out only when it is not the
    /// baseline, so a preset without it serializes as before.
    #[serde(default, skip_serializing_if = "Pipeline::is_stall")]
    pub pipeline: Pipeline,
    /// The operand log's bytes per SM under [`Pipeline::OperandLog`] (8–32 KiB; written
    /// out only when not the default, 16 KiB).
    #[serde(default = "default_log", skip_serializing_if = "is_default_log")]
    pub operand_log_bytes: u32,
    /// TB switching on fault (papers/tanasic-thesis §6.4.1; [`TbSwitch`]): off by default
    /// and then not written out. Needs a pipeline that squashes
    /// ([`Pipeline::squashes`]): a TB can leave its SM only if its faults are preemptible.
    #[serde(default, skip_serializing_if = "TbSwitch::is_off")]
    pub tb_switch: TbSwitch,
    /// At most this many extra TBs per SM under TB switching: TBs switched out on the SM
    /// and not yet resumed (§6.5.3: "a maximum of 4 extra thread blocks per SM"; 1 to 64,
    /// written out only when not the default, 4).
    #[serde(default = "default_extra", skip_serializing_if = "is_default_extra")]
    pub tb_switch_extra: u32,
}

/// TB switching on fault (papers/tanasic-thesis §6.4.1, §6.5.3, Figure 6.13): a per-SM
/// local scheduler switches out a TB whose every warp is blocked (waiting for a fault or
/// at a barrier) and switches in a switched-out TB whose faults are serviced, or else a
/// new TB of the kernel.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TbSwitch {
    /// No switching (the baseline: a faulted TB keeps its SM resources).
    #[default]
    Off,
    /// The context moves through the save/restore path at its real cost: its bytes are
    /// stored to (and loaded back from) a context area in device memory at context
    /// priority through the SM's LD/ST unit.
    Save,
    /// Ideal switching: 1 cycle to save and 1 to restore (Figure 6.13's "ideal 1 cycle
    /// context switching").
    Ideal,
}

impl TbSwitch {
    /// Whether switching is off (the default).
    pub fn is_off(&self) -> bool {
        *self == TbSwitch::Off
    }

    /// Its name in GPU files.
    pub fn name(self) -> &'static str {
        match self {
            TbSwitch::Off => "off",
            TbSwitch::Save => "save",
            TbSwitch::Ideal => "ideal",
        }
    }
}

/// The default of `tb_switch_extra` (§6.5.3) and its bounds.
pub const TB_SWITCH_EXTRA: u32 = 4;
pub const TB_SWITCH_EXTRA_RANGE: std::ops::RangeInclusive<u32> = 1..=64;

fn default_extra() -> u32 {
    TB_SWITCH_EXTRA
}

fn is_default_extra(n: &u32) -> bool {
    *n == TB_SWITCH_EXTRA
}

/// The SM pipeline organisation around accesses that may fault (papers/tanasic-thesis §6.3,
/// Figures 6.11–6.12): what a warp may issue after a memory instruction whose translation
/// is not known to succeed, and (all but stall) the squash and replay of a faulting access.
/// The SM executes at issue, so results do not change; a replay is checked against the
/// operands its instruction read at issue.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pipeline {
    /// Stall on fault (today's GPUs, the baseline): a warp goes on issuing after a memory
    /// instruction; a fault holds the access in the SM's front end until it is serviced.
    #[default]
    Stall,
    /// Warp disable until commit (§6.3.1): after issuing a memory instruction the warp
    /// issues nothing more until that instruction completes (every part's data or
    /// acknowledgement back).
    WdCommit,
    /// Warp disable until the last TLB check (§6.3.1, Figure 6.5): the warp is enabled
    /// again once the instruction's last part has been offered and its last page is
    /// translated without a fault.
    WdLastcheck,
    /// Replay queue (§6.3.2): the warp goes on issuing, but a memory instruction's source
    /// registers are released only at its last TLB check, so a younger instruction of the
    /// warp that overwrites one of them (a WAR hazard) waits until then.
    ReplayQueue,
    /// Operand log (§6.3.3): the replay queue without the source hold: a memory
    /// instruction's source operands are copied into a per-SM log (`operand_log_bytes`)
    /// at issue and a replay reads them from it; a full log stalls the issue of memory
    /// instructions.
    OperandLog,
}

impl Pipeline {
    /// Whether this is the baseline (stall on fault).
    pub fn is_stall(&self) -> bool {
        *self == Pipeline::Stall
    }

    /// Its name in presets and scenarios.
    pub fn name(self) -> &'static str {
        match self {
            Pipeline::Stall => "stall",
            Pipeline::WdCommit => "wd-commit",
            Pipeline::WdLastcheck => "wd-lastcheck",
            Pipeline::ReplayQueue => "replay-queue",
            Pipeline::OperandLog => "operand-log",
        }
    }

    /// Whether a faulting access is squashed and replayed once its fault is serviced
    /// (every organisation but stall on fault, which holds it in the SM's front end).
    pub fn squashes(self) -> bool {
        self != Pipeline::Stall
    }
}

/// The operand log's default size (papers/tanasic-thesis §6.5.2, Figure 6.12: 16 KB gives
/// 99.8% of the baseline).
pub const OPERAND_LOG_BYTES: u32 = 16 * 1024;
/// The sizes Figure 6.12 explores: 8 KB (the least that holds an entry for every warp of
/// a full SM) to 32 KB.
pub const OPERAND_LOG_RANGE: std::ops::RangeInclusive<u32> = 8 * 1024..=32 * 1024;

fn is_default_log(b: &u32) -> bool {
    *b == OPERAND_LOG_BYTES
}

fn default_log() -> u32 {
    OPERAND_LOG_BYTES
}

impl TranslationSpec {
    /// Bytes per page.
    pub fn page_bytes(&self) -> u64 {
        u64::from(self.page_kb) * 1024
    }

    /// Checks every field; the error names it (`translation.l1_tlb.assoc`, ...).
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |what: &'static str, reason: String| Err(ConfigError::Invalid { what, reason });
        if !PAGE_KB.contains(&self.page_kb) {
            return bad(
                "translation.page_kb",
                format!(
                    "{} KiB is not a page size: 4 (4 KiB), 64 (64 KiB) or 2048 (2 MiB)",
                    self.page_kb
                ),
            );
        }
        for (names, t) in [
            (
                [
                    "translation.l1_tlb.entries",
                    "translation.l1_tlb.assoc",
                    "translation.l1_tlb.latency",
                    "translation.l1_tlb.mshrs",
                ],
                &self.l1_tlb,
            ),
            (
                [
                    "translation.l2_tlb.entries",
                    "translation.l2_tlb.assoc",
                    "translation.l2_tlb.latency",
                    "translation.l2_tlb.mshrs",
                ],
                &self.l2_tlb,
            ),
        ] {
            if t.entries == 0 {
                return bad(names[0], "must be at least 1".into());
            }
            if t.assoc == 0 || t.assoc > t.entries || !t.entries.is_multiple_of(t.assoc) {
                return bad(
                    names[1],
                    format!("{} ways do not divide {} entries", t.assoc, t.entries),
                );
            }
            if t.latency == 0 {
                return bad(names[2], "must be at least 1 cycle".into());
            }
            if !(1..=MAX_MSHRS).contains(&t.mshrs) {
                return bad(names[3], format!("{} is not in 1..={MAX_MSHRS}", t.mshrs));
            }
        }
        if self.walkers == 0 {
            return bad("translation.walkers", "must be at least 1".into());
        }
        if self.walk_latency == 0 {
            return bad(
                "translation.walk_latency",
                "must be at least 1 cycle".into(),
            );
        }
        if !OPERAND_LOG_RANGE.contains(&self.operand_log_bytes) {
            return bad(
                "translation.operand_log_bytes",
                format!(
                    "{} bytes is not in 8192..=32768 (8 to 32 KiB)",
                    self.operand_log_bytes
                ),
            );
        }
        if !TB_SWITCH_EXTRA_RANGE.contains(&self.tb_switch_extra) {
            return bad(
                "translation.tb_switch_extra",
                format!("{} TBs is not in 1..=64", self.tb_switch_extra),
            );
        }
        if !self.tb_switch.is_off() {
            // §6.4.1: switching needs preemptible faults.
            if !self.pipeline.squashes() {
                return bad(
                    "translation.tb_switch",
                    format!(
                        "\"{}\" needs a pipeline that squashes faulting accesses \
                         (wd-commit, wd-lastcheck, replay-queue or operand-log), not \"stall\"",
                        self.tb_switch.name()
                    ),
                );
            }
            if !self.enabled {
                return bad(
                    "translation.tb_switch",
                    format!(
                        "\"{}\" needs address translation (enabled = true)",
                        self.tb_switch.name()
                    ),
                );
            }
        }
        if let Some(f) = &self.faults {
            f.validate()?;
        }
        Ok(())
    }
}

/// One TLB's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TlbStats {
    /// Page lookups (one per distinct page of an accepted access).
    pub lookups: u64,
    /// Lookups that found the page.
    pub hits: u64,
    /// Lookups that found the page being fetched and merged into its MSHR.
    pub merges: u64,
    /// Lookups that took a new MSHR (sent below: to the L2 TLB, or to a walker).
    pub misses: u64,
    /// Pages evicted to make room.
    pub evictions: u64,
}

impl TlbStats {
    /// The counts between `earlier` and `self` (counters only grow).
    pub fn since(&self, earlier: &TlbStats) -> TlbStats {
        TlbStats {
            lookups: self.lookups - earlier.lookups,
            hits: self.hits - earlier.hits,
            merges: self.merges - earlier.merges,
            misses: self.misses - earlier.misses,
            evictions: self.evictions - earlier.evictions,
        }
    }

    /// Adds `o` into `self`.
    pub fn add(&mut self, o: &TlbStats) {
        self.lookups += o.lookups;
        self.hits += o.hits;
        self.merges += o.merges;
        self.misses += o.misses;
        self.evictions += o.evictions;
    }

    /// Hits over lookups (0 without lookups).
    pub fn hit_rate(&self) -> f64 {
        if self.lookups == 0 {
            0.0
        } else {
            self.hits as f64 / self.lookups as f64
        }
    }
}

/// The translation counters of a memory system.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TranslationStats {
    /// Every SM's L1 TLB, summed.
    pub l1_tlb: TlbStats,
    /// The shared L2 TLB.
    pub l2_tlb: TlbStats,
    /// Page-table walks (one per L2 TLB miss).
    pub walks: u64,
    /// Cycles walks waited for a free walker or L2 MSHR, summed.
    pub walk_queue_cycles: u64,
    /// Accesses translated.
    pub accesses: u64,
    /// Cycles from an access's acceptance to the end of its translation, summed over accesses
    /// (the translation time added to the memory latency).
    pub translation_cycles: u64,
    /// Offers refused for want of a free L1 TLB MSHR: SM cycles stalled on translation (a
    /// stalled SM offers again every cycle).
    pub stall_cycles: u64,
    /// Demand paging, when the GPU has it ([`crate::fault`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub faults: Option<FaultStats>,
}

impl TranslationStats {
    /// The counts between `earlier` and `self`.
    pub fn since(&self, earlier: &TranslationStats) -> TranslationStats {
        TranslationStats {
            l1_tlb: self.l1_tlb.since(&earlier.l1_tlb),
            l2_tlb: self.l2_tlb.since(&earlier.l2_tlb),
            walks: self.walks - earlier.walks,
            walk_queue_cycles: self.walk_queue_cycles - earlier.walk_queue_cycles,
            accesses: self.accesses - earlier.accesses,
            translation_cycles: self.translation_cycles - earlier.translation_cycles,
            stall_cycles: self.stall_cycles - earlier.stall_cycles,
            faults: match (&self.faults, &earlier.faults) {
                (Some(a), Some(b)) => Some(a.since(b)),
                (a, _) => *a,
            },
        }
    }
}

/// A set-associative array of pages with LRU replacement within a set.
#[derive(Debug, Clone)]
struct TlbArray {
    sets: u64,
    ways: usize,
    /// `sets × ways` slots: the page and its last use (a counter, larger is more recent).
    slots: Vec<Option<(Vpn, u64)>>,
    uses: u64,
}

impl TlbArray {
    fn new(spec: &TlbSpec) -> TlbArray {
        let ways = spec.assoc.max(1) as usize;
        TlbArray {
            sets: u64::from((spec.entries / spec.assoc.max(1)).max(1)),
            ways,
            slots: vec![None; spec.entries.max(1) as usize],
            uses: 0,
        }
    }

    fn set(&self, vpn: Vpn) -> std::ops::Range<usize> {
        let s = (vpn.0 % self.sets) as usize * self.ways;
        s..s + self.ways
    }

    fn contains(&self, vpn: Vpn) -> bool {
        self.slots[self.set(vpn)]
            .iter()
            .any(|e| e.is_some_and(|(p, _)| p == vpn))
    }

    /// Looks `vpn` up, making it the most recently used on a hit.
    fn touch(&mut self, vpn: Vpn) -> bool {
        self.uses += 1;
        let uses = self.uses;
        let range = self.set(vpn);
        for e in self.slots[range].iter_mut().flatten() {
            if e.0 == vpn {
                e.1 = uses;
                return true;
            }
        }
        false
    }

    /// Puts `vpn` in its set as the most recently used: into a free way (the lowest), else
    /// over the least recently used. Returns whether a page was evicted.
    fn insert(&mut self, vpn: Vpn) -> bool {
        if self.touch(vpn) {
            return false;
        }
        let uses = self.uses;
        let range = self.set(vpn);
        let set = &mut self.slots[range];
        if let Some(free) = set.iter_mut().find(|e| e.is_none()) {
            *free = Some((vpn, uses));
            return false;
        }
        let victim = set
            .iter_mut()
            .min_by_key(|e| e.map_or(0, |(_, u)| u))
            .expect("a set has at least one way");
        *victim = Some((vpn, uses));
        true
    }
}

/// A page being fetched: the cycle it arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Mshr {
    vpn: Vpn,
    ready: u64,
}

/// Fills, into `array`, every MSHR whose page has arrived by `now`, in (cycle, page) order.
fn retire(array: &mut TlbArray, mshrs: &mut Vec<Mshr>, stats: &mut TlbStats, now: u64) {
    if !mshrs.iter().any(|m| m.ready <= now) {
        return;
    }
    mshrs.sort_unstable_by_key(|m| (m.ready, m.vpn));
    let n = mshrs.partition_point(|m| m.ready <= now);
    for m in mshrs.drain(..n) {
        if array.insert(m.vpn) {
            stats.evictions += 1;
        }
    }
}

/// Sets the arrival of every MSHR of `vpns` waiting for a fault to `ready`.
fn resolve(mshrs: &mut [Mshr], vpns: std::ops::Range<u64>, ready: u64) {
    for m in mshrs
        .iter_mut()
        .filter(|m| m.ready == PENDING && vpns.contains(&m.vpn.0))
    {
        m.ready = ready;
    }
}

/// What a per-SM L1 TLB says of one page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    /// Present: ready at the cycle given.
    Hit { ready: u64 },
    /// Being fetched: merged, ready when the fetch arrives.
    Merged { ready: u64 },
    /// Absent: a new MSHR, the page fetched from the L2 TLB, ready at the cycle given.
    Miss { ready: u64 },
}

impl Lookup {
    /// The cycle the translation is ready.
    pub fn ready(self) -> u64 {
        match self {
            Lookup::Hit { ready } | Lookup::Merged { ready } | Lookup::Miss { ready } => ready,
        }
    }
}

/// A refused translation: too few free L1 TLB MSHRs for the access's missing pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MshrFull {
    /// MSHRs the access needs and MSHRs free.
    pub needed: u32,
    pub free: u32,
}

/// The L1 TLB of one SM.
#[derive(Debug, Clone)]
pub struct Tlb {
    spec: TlbSpec,
    array: TlbArray,
    mshrs: Vec<Mshr>,
    stats: TlbStats,
    /// Changes with every translation accepted (see [`Tlb::state`]).
    version: u64,
    /// Scratch: the access's distinct pages.
    pages: Vec<Vpn>,
}

impl Tlb {
    /// An empty TLB.
    pub fn new(spec: TlbSpec) -> Tlb {
        Tlb {
            array: TlbArray::new(&spec),
            mshrs: Vec::with_capacity(spec.mshrs as usize),
            spec,
            stats: TlbStats::default(),
            version: 0,
            pages: Vec::new(),
        }
    }

    /// Its counters.
    pub fn stats(&self) -> TlbStats {
        self.stats
    }

    /// MSHRs whose page has not arrived by `now`.
    pub fn in_flight(&self, now: u64) -> u32 {
        self.mshrs.iter().filter(|m| m.ready > now).count() as u32
    }

    /// Everything the answer to a translation at `now` depends on besides its pages, as one
    /// word (the version above 16 bits of MSHRs in flight, at most [`MAX_MSHRS`]): two equal states give the same answer to the same pages (fills are applied
    /// by time, and the in-flight count at `now` says which have been).
    pub fn state(&self, now: u64) -> u64 {
        (self.version << 16) | u64::from(self.in_flight(now) & 0xffff)
    }

    /// Whether `vpn` is present at `now` (for tests and checks; changes nothing visible).
    pub fn holds(&mut self, vpn: Vpn, now: u64) -> bool {
        retire(&mut self.array, &mut self.mshrs, &mut self.stats, now);
        self.array.contains(vpn)
    }

    /// The cycle the page `vpn` being fetched arrives ([`PENDING`] while it waits for a
    /// fault's batch); `None` when it is not being fetched.
    pub fn fetch_ready(&self, vpn: Vpn) -> Option<u64> {
        self.mshrs.iter().find(|m| m.vpn == vpn).map(|m| m.ready)
    }

    /// Every page of `vpns` waiting for a fault arrives at `ready` (its batch has started).
    pub fn resolve(&mut self, vpns: std::ops::Range<u64>, ready: u64) {
        resolve(&mut self.mshrs, vpns, ready);
    }

    /// Translates the distinct pages of `pages` (any order, repeats allowed) at `now`,
    /// sending misses to `l2`: the cycle the last page is ready, or a refusal (nothing
    /// changed) when the misses need more MSHRs than are free. `each` is told every page's
    /// outcome (tests).
    pub fn translate(
        &mut self,
        pages: impl IntoIterator<Item = Vpn>,
        now: u64,
        l2: &mut SharedTlb,
        mut each: impl FnMut(Vpn, Lookup),
    ) -> Result<u64, MshrFull> {
        retire(&mut self.array, &mut self.mshrs, &mut self.stats, now);
        let mut distinct = std::mem::take(&mut self.pages);
        distinct.clear();
        distinct.extend(pages);
        distinct.sort_unstable();
        distinct.dedup();
        // Pass 1: the MSHRs the misses need, changing nothing.
        let needed = distinct
            .iter()
            .filter(|&&p| !self.array.contains(p) && !self.mshrs.iter().any(|m| m.vpn == p))
            .count() as u32;
        let free = self.spec.mshrs.saturating_sub(self.mshrs.len() as u32);
        // An access needing more MSHRs than the TLB has would never be taken: it is taken
        // when every MSHR is free, its extra misses held beyond the count until they
        // return (the SM's LD/ST unit sends no more lines at once than there are MSHRs, so
        // only a direct user of the memory system does this).
        let idle = self.mshrs.is_empty();
        if needed > free && !idle {
            self.pages = distinct;
            return Err(MshrFull { needed, free });
        }
        // Pass 2: apply.
        self.version += 1;
        let mut last = now;
        for &p in &distinct {
            self.stats.lookups += 1;
            let out = if self.array.touch(p) {
                self.stats.hits += 1;
                Lookup::Hit {
                    ready: now + self.spec.latency,
                }
            } else if let Some(m) = self.mshrs.iter().find(|m| m.vpn == p) {
                // §6.5.1 Table 6.1: the L1 TLB has MSHRs; a second miss to a page being
                // fetched waits for that fetch.
                self.stats.merges += 1;
                Lookup::Merged { ready: m.ready }
            } else {
                self.stats.misses += 1;
                let ready = l2.translate(p, now + self.spec.latency);
                self.mshrs.push(Mshr { vpn: p, ready });
                Lookup::Miss { ready }
            };
            each(p, out);
            last = last.max(out.ready());
        }
        self.pages = distinct;
        Ok(last)
    }
}

/// The L2 TLB all SMs share, with its MSHRs and the page-table walkers.
#[derive(Debug, Clone)]
pub struct SharedTlb {
    spec: TlbSpec,
    walk_latency: u64,
    array: TlbArray,
    /// Pages being walked, each with the cycle its walk ends.
    mshrs: Vec<Mshr>,
    /// Per MSHR and per walker, the cycle it is free again.
    mshr_free: Vec<u64>,
    walker_free: Vec<u64>,
    stats: TlbStats,
    walks: u64,
    walk_queue_cycles: u64,
    /// The last arrival (arrivals never go back in time).
    last_arrival: u64,
    /// Demand paging, and the page size it sees walks in.
    faults: Option<FarFaults>,
    page_bytes: u64,
    /// Scratch: regions whose batch started, with their arrival, as regions and as pages.
    done: Vec<(u64, u64)>,
    resolved: Vec<(std::ops::Range<u64>, u64)>,
}

impl SharedTlb {
    /// An empty L2 TLB with `walkers` idle walkers of `walk_latency` cycles.
    pub fn new(spec: TlbSpec, walkers: u32, walk_latency: u64) -> SharedTlb {
        SharedTlb {
            array: TlbArray::new(&spec),
            mshrs: Vec::new(),
            mshr_free: vec![0; spec.mshrs.max(1) as usize],
            walker_free: vec![0; walkers.max(1) as usize],
            spec,
            walk_latency,
            stats: TlbStats::default(),
            walks: 0,
            walk_queue_cycles: 0,
            last_arrival: 0,
            faults: None,
            page_bytes: 1,
            done: Vec::new(),
            resolved: Vec::new(),
        }
    }

    /// Walks of pages of `page_bytes` may end in far faults, handled by `faults`.
    pub fn with_faults(mut self, faults: FarFaults, page_bytes: u64) -> SharedTlb {
        self.faults = Some(faults);
        self.page_bytes = page_bytes.max(1);
        self
    }

    /// The demand-paging handler, if the GPU has one.
    pub fn faults(&self) -> Option<&FarFaults> {
        self.faults.as_ref()
    }

    /// The demand-paging handler, mutably (to declare managed memory, count accesses).
    pub fn faults_mut(&mut self) -> Option<&mut FarFaults> {
        self.faults.as_mut()
    }

    /// Starts the fault batches that start by `now` and sets the arrival of the L2 TLB's
    /// waiting pages; returns each started region's pages (a range of page numbers) and
    /// arrival, for the L1 TLBs (empty without faults waiting).
    pub fn service_faults(&mut self, now: u64) -> &[(std::ops::Range<u64>, u64)] {
        self.resolved.clear();
        let Some(f) = self.faults.as_mut().filter(|f| f.has_waiting()) else {
            return &self.resolved;
        };
        self.done.clear();
        f.service(now, &mut self.done);
        let per = f.region_bytes() / self.page_bytes;
        for &(region, ready) in &self.done {
            let vpns = region * per..(region + 1) * per;
            resolve(&mut self.mshrs, vpns.clone(), ready);
            self.resolved.push((vpns, ready));
        }
        &self.resolved
    }

    /// Its lookup counters.
    pub fn stats(&self) -> TlbStats {
        self.stats
    }

    /// Page-table walks so far, and the cycles they waited for a walker or MSHR.
    pub fn walks(&self) -> (u64, u64) {
        (self.walks, self.walk_queue_cycles)
    }

    /// Translates `vpn` for a request arriving at `arrival` (not before an earlier
    /// arrival): the cycle the translation is back.
    pub fn translate(&mut self, vpn: Vpn, arrival: u64) -> u64 {
        debug_assert!(arrival >= self.last_arrival, "L2 TLB arrivals go forward");
        self.last_arrival = arrival;
        retire(&mut self.array, &mut self.mshrs, &mut self.stats, arrival);
        self.stats.lookups += 1;
        let looked_up = arrival + self.spec.latency;
        if self.array.touch(vpn) {
            self.stats.hits += 1;
            return looked_up;
        }
        if let Some(m) = self.mshrs.iter().find(|m| m.vpn == vpn) {
            self.stats.merges += 1;
            return m.ready;
        }
        self.stats.misses += 1;
        self.walks += 1;
        // The walk needs an MSHR and a walker (Table 6.1: 128 MSHRs, 64 walkers): the
        // first of each to be free, lowest index on a tie.
        let first_free = |v: &[u64]| {
            v.iter()
                .enumerate()
                .min_by_key(|&(i, &t)| (t, i))
                .map(|(i, &t)| (i, t))
                .expect("at least one")
        };
        let (m, m_free) = first_free(&self.mshr_free);
        let (w, w_free) = first_free(&self.walker_free);
        let start = looked_up.max(m_free).max(w_free);
        let ready = start + self.walk_latency;
        self.walk_queue_cycles += start - looked_up;
        self.mshr_free[m] = ready;
        self.walker_free[w] = ready;
        // A far fault: the walk ends on a managed page not on the GPU; the page arrives
        // when its region has migrated.
        let page = self.page_bytes;
        let ready = match &mut self.faults {
            Some(f) => f.walk(vpn.0 * page, page, ready).unwrap_or(ready),
            None => ready,
        };
        self.mshrs.push(Mshr { vpn, ready });
        ready
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(entries: u32, assoc: u32, latency: u64, mshrs: u32) -> TlbSpec {
        TlbSpec {
            entries,
            assoc,
            latency,
            mshrs,
        }
    }

    /// Table 6.1's L2 TLB with 64 walkers of 500 cycles.
    fn table61_l2() -> SharedTlb {
        SharedTlb::new(spec(1024, 8, 70, 128), 64, 500)
    }

    fn pages(v: &[u64]) -> Vec<Vpn> {
        v.iter().map(|&p| Vpn(p)).collect()
    }

    #[test]
    fn miss_then_hit_costs_the_table_latencies() {
        let mut l1 = Tlb::new(spec(32, 8, 40, 32));
        let mut l2 = table61_l2();
        // Cold: L1 lookup 40, L2 lookup 70, walk 500.
        let r = l1.translate(pages(&[7]), 100, &mut l2, |_, _| {}).unwrap();
        assert_eq!(r, 100 + 40 + 70 + 500);
        assert_eq!(l2.walks().0, 1);
        // Before the fill arrives the page is in flight: a merge, ready at the same cycle.
        let mut seen = Vec::new();
        let r2 = l1
            .translate(pages(&[7]), 200, &mut l2, |p, o| seen.push((p, o)))
            .unwrap();
        assert_eq!(r2, r);
        assert_eq!(seen, vec![(Vpn(7), Lookup::Merged { ready: r })]);
        // After it: an L1 hit.
        let r3 = l1.translate(pages(&[7]), 1000, &mut l2, |_, _| {}).unwrap();
        assert_eq!(r3, 1040);
        assert_eq!(l1.stats().lookups, 3);
        assert_eq!(
            (l1.stats().hits, l1.stats().merges, l1.stats().misses),
            (1, 1, 1)
        );
        // A second SM's L1 misses but the L2 has the page now: no second walk.
        let mut other = Tlb::new(spec(32, 8, 40, 32));
        let r4 = other
            .translate(pages(&[7]), 2000, &mut l2, |_, _| {})
            .unwrap();
        assert_eq!(r4, 2000 + 40 + 70);
        assert_eq!(l2.walks().0, 1);
        assert_eq!(l2.stats().hits, 1);
    }

    #[test]
    fn one_translation_per_distinct_page_of_an_access() {
        let mut l1 = Tlb::new(spec(32, 8, 40, 32));
        let mut l2 = table61_l2();
        let mut n = 0;
        l1.translate(pages(&[3, 1, 3, 2, 1, 1]), 0, &mut l2, |_, _| n += 1)
            .unwrap();
        assert_eq!(n, 3);
        assert_eq!(l1.stats().lookups, 3);
        assert_eq!(l2.walks().0, 3);
    }

    #[test]
    fn lru_evicts_the_least_recently_used_page_of_the_set() {
        // 4 entries, 2 ways: 2 sets; even pages in set 0.
        let mut l1 = Tlb::new(spec(4, 2, 1, 8));
        let mut l2 = table61_l2();
        let mut t = 0;
        let mut go = |l1: &mut Tlb, p: u64| {
            t += 10_000;
            l1.translate(pages(&[p]), t, &mut l2, |_, _| {}).unwrap();
            t
        };
        go(&mut l1, 0);
        go(&mut l1, 2);
        go(&mut l1, 0); // 0 is now more recent than 2
        go(&mut l1, 1); // other set: no effect on set 0
        let now = go(&mut l1, 4); // evicts 2, the LRU of set 0
        let later = now + 10_000;
        assert!(l1.holds(Vpn(0), later));
        assert!(!l1.holds(Vpn(2), later));
        assert!(l1.holds(Vpn(4), later));
        assert!(l1.holds(Vpn(1), later));
        assert_eq!(l1.stats().evictions, 1);
    }

    #[test]
    fn mshr_full_refuses_the_whole_access_and_changes_nothing() {
        let mut l1 = Tlb::new(spec(32, 8, 40, 2));
        let mut l2 = table61_l2();
        l1.translate(pages(&[1, 2]), 0, &mut l2, |_, _| {}).unwrap();
        let before = (l1.stats(), l1.state(1), l2.walks());
        // A third page needs an MSHR: refused, while the two are in flight.
        let e = l1.translate(pages(&[1, 3]), 1, &mut l2, |_, _| {});
        assert_eq!(e, Err(MshrFull { needed: 1, free: 0 }));
        assert_eq!((l1.stats(), l1.state(1), l2.walks()), before);
        // Pages in flight merge without an MSHR.
        assert!(l1.translate(pages(&[2]), 1, &mut l2, |_, _| {}).is_ok());
        // Once the first pages arrive the MSHRs are free again.
        let arrived = 40 + 70 + 500;
        assert_eq!(l1.in_flight(arrived), 0);
        assert!(l1
            .translate(pages(&[3]), arrived, &mut l2, |_, _| {})
            .is_ok());
    }

    #[test]
    fn same_page_misses_of_two_sms_merge_at_the_l2() {
        let mut a = Tlb::new(spec(32, 8, 40, 32));
        let mut b = Tlb::new(spec(32, 8, 40, 32));
        let mut l2 = table61_l2();
        let ra = a.translate(pages(&[9]), 10, &mut l2, |_, _| {}).unwrap();
        let rb = b.translate(pages(&[9]), 20, &mut l2, |_, _| {}).unwrap();
        assert_eq!(rb, ra, "the second miss waits for the first walk");
        assert_eq!(l2.walks().0, 1);
        assert_eq!(l2.stats().merges, 1);
    }

    #[test]
    fn walks_queue_for_walkers() {
        // One walker of 100 cycles, 8 MSHRs: three misses at once end 100 cycles apart.
        let mut l1 = Tlb::new(spec(32, 8, 1, 32));
        let mut l2 = SharedTlb::new(spec(64, 8, 1, 8), 1, 100);
        let mut ready = Vec::new();
        l1.translate(pages(&[1, 2, 3]), 0, &mut l2, |_, o| ready.push(o.ready()))
            .unwrap();
        assert_eq!(ready, vec![102, 202, 302]);
        assert_eq!(l2.walks(), (3, 300));
    }

    #[test]
    fn page_size_decides_which_addresses_share_a_translation() {
        // Addresses 0, 8 KiB and 100 KiB: three 4 KiB pages, two 64 KiB pages, one 2 MiB page.
        let addrs = [0u64, 8 << 10, 100 << 10];
        for (kb, walks) in [(4u64, 3), (64, 2), (2048, 1)] {
            let mut l1 = Tlb::new(spec(32, 8, 40, 32));
            let mut l2 = table61_l2();
            let page = kb * 1024;
            l1.translate(addrs.iter().map(|a| Vpn(a / page)), 0, &mut l2, |_, _| {})
                .unwrap();
            assert_eq!(l2.walks().0, walks, "{kb} KiB pages");
        }
    }

    #[test]
    fn bad_specs_name_their_field() {
        let good = TranslationSpec {
            enabled: true,
            page_kb: 4,
            l1_tlb: spec(32, 8, 40, 32),
            l2_tlb: spec(1024, 8, 70, 128),
            walkers: 64,
            walk_latency: 500,
            faults: None,
            pipeline: Pipeline::Stall,
            operand_log_bytes: crate::OPERAND_LOG_BYTES,
            tb_switch: TbSwitch::Off,
            tb_switch_extra: TB_SWITCH_EXTRA,
        };
        assert!(good.validate().is_ok());
        let field = |f: &dyn Fn(&mut TranslationSpec)| {
            let mut s = good.clone();
            f(&mut s);
            let ConfigError::Invalid { what, .. } = s.validate().unwrap_err();
            what
        };
        assert_eq!(field(&|s| s.page_kb = 8), "translation.page_kb");
        // TB switching (§6.4.1): bounded extra TBs, and only with preemptible faults.
        for n in [0, 65] {
            assert_eq!(
                field(&|s| s.tb_switch_extra = n),
                "translation.tb_switch_extra"
            );
        }
        assert_eq!(
            field(&|s| s.tb_switch = TbSwitch::Ideal),
            "translation.tb_switch"
        );
        assert_eq!(
            field(&|s| {
                s.tb_switch = TbSwitch::Save;
                s.pipeline = Pipeline::ReplayQueue;
                s.enabled = false;
            }),
            "translation.tb_switch"
        );
        let mut on = good.clone();
        (on.tb_switch, on.pipeline) = (TbSwitch::Save, Pipeline::OperandLog);
        assert!(on.validate().is_ok());
        assert_eq!(
            field(&|s| s.l1_tlb.entries = 0),
            "translation.l1_tlb.entries"
        );
        assert_eq!(field(&|s| s.l1_tlb.assoc = 3), "translation.l1_tlb.assoc");
        assert_eq!(field(&|s| s.l2_tlb.assoc = 0), "translation.l2_tlb.assoc");
        assert_eq!(field(&|s| s.l2_tlb.mshrs = 0), "translation.l2_tlb.mshrs");
        assert_eq!(
            field(&|s| s.l1_tlb.latency = 0),
            "translation.l1_tlb.latency"
        );
        assert_eq!(field(&|s| s.walkers = 0), "translation.walkers");
        assert_eq!(
            field(&|s| s.operand_log_bytes = 4096),
            "translation.operand_log_bytes"
        );
        assert_eq!(
            field(&|s| s.operand_log_bytes = 33 * 1024),
            "translation.operand_log_bytes"
        );
        assert_eq!(field(&|s| s.walk_latency = 0), "translation.walk_latency");
    }
}
