//! The memory-system facade: configuration, address mapping, and the stepping of every
//! component in its clock domain.
//!
//! Path of a request (papers/lin-thesis §4.3.1: "requests that miss the L1 D-cache go through
//! the interconnect along the SM-to-L2 direction; the corresponding replies go through the
//! interconnect along the L2-to-SM direction"):
//!
//! 1. **Issue (core domain).** [`MemorySystem::issue`] takes one coalesced warp access. It is
//!    accepted whole or refused whole ([`Stall`]): the L1 tag port must be free, an access slot
//!    free, every missing line must get an MSHR entry or merge, and the SM's input queue of the
//!    request network must hold every packet the access sends. The L1 port then stays busy one
//!    cycle per `l1_lines_per_cycle` lines. Loads to `Global`/`Local` use the L1 data cache,
//!    loads to `Const` the constant cache; hits return `hit_latency` core cycles after their
//!    lookup. Stores follow the L1 write policy and always travel to the L2 (write-through);
//!    atomics bypass the L1 and are performed at the L2. An SM's L1 may be bypassed
//!    altogether ([`MemorySystem::set_l1_bypass`], GPUDuet's third context store): its
//!    global and local loads then go to the L2 without a lookup or an MSHR, one request
//!    per line, and fill nothing; its stores leave the L1 alone.
//!
//!    **Ports.** All of this touches only the SM's own front-end state (`SmState`), so an
//!    SM may do it through its [`SmPort`] ([`MemorySystem::ports`]) on any thread: the
//!    packets an access sends are *staged* in the SM's front end (its input queue's room
//!    counts them) and enter the request network when [`MemorySystem::tick`] next runs,
//!    SM by SM in index order, before any domain ticks. A packet is stamped as it always
//!    was (grantable from the next interconnect cycle), so staging changes no timing.
//!
//!    **With address translation** (`MemConfig::translation` enabled, [`crate::tlb`]) an access
//!    is first translated at its SM's L1 TLB: accepted when its missing pages get L1 TLB
//!    MSHRs (or merge) and the SM has an access slot free, refused whole otherwise
//!    ([`Stall::TlbMshrFull`]). It then waits in the SM's front end until its last page is
//!    translated, and enters the L1 as above at that cycle or later (one access per cycle,
//!    the earliest translated first, retried while the L1 refuses it). Its latency counts
//!    from its acceptance, translation included. With demand paging
//!    (`translation.faults`, [`crate::fault`]) a page of managed memory
//!    ([`MemorySystem::manage`]) not yet on the GPU faults at its walk, and the access waits
//!    in the front end until the fault's batch has been serviced (stall on fault). With a
//!    pipeline that replays ([`crate::Pipeline::squashes`]) it is squashed instead once its
//!    fault is detected, freeing its access slot ([`MemorySystem::pop_squashed`]), and the
//!    SM replays it after the fault is serviced ([`MemorySystem::pop_serviced`]).
//! 2. **SM→L2 network (interconnect domain).** See [`crate::icnt`]. A read request is a header;
//!    a store or atomic carries its sectors.
//! 3. **L2 slice (L2 domain).** A request accepted from the network spends `hit_latency` L2
//!    cycles in the slice pipeline, then looks up the tags (one request per L2 cycle): a read
//!    hit is answered; a miss takes or merges into an MSHR entry and fetches the missing sectors
//!    from DRAM; a write is absorbed write-back write-allocate (papers/lin-thesis Table 4.1:
//!    WBWA) and acknowledged; an atomic reads the line and marks it dirty. Evicted dirty lines
//!    become DRAM writes. Without an MSHR or queue slot the head request waits.
//! 4. **DRAM channel (DRAM domain).** See [`crate::dram`]. Read data returns to its slice,
//!    which fills the line and answers every merged request.
//! 5. **L2→SM network**, then the SM fills its L1 or constant cache (`l1_fills_per_cycle` per
//!    core cycle) and counts the line done. When the last line of an access is done, a
//!    [`Completion`] appears in [`MemorySystem::pop_completed`]. Stores complete when every
//!    line's write acknowledgement has returned (a context save needs to know that).
//!
//! **Address mapping** (documented choice, GPGPU-Sim-like): the address is split into chunks of
//! `interleave_bytes` (256 B by default). Chunk `c` goes to DRAM channel `(c mod n + h(c div n))
//! mod n` with `h = 0` for [`AddressHash::Linear`] and an XOR-fold of the upper bits for
//! [`AddressHash::Fold`] (which spreads power-of-two strides; it permutes channels within each
//! group of `n` chunks, so no two addresses alias). Within the channel, group `g = c div n`
//! goes to sub-slice `g mod s` (s = L2 slices per channel), and the channel-local address is
//! `g × interleave + offset`; the L2 indexes its sets with the slice-local address
//! `(g div s) × interleave + offset` so that every set is used.
//!
//! **Clocks.** Components tick at their own domain's edges ([`crate::clock`]); when edges
//! coincide the order is core, interconnect, L2, DRAM, and inside a domain components go in
//! index order. Every queue between domains is stamped in its producer's cycles with a ready
//! time strictly after the producer's current cycle, so data never crosses in zero time.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::cache::{Cache, CacheSpec, CacheStats, ReadOutcome, ReservationFail};
use crate::clock::{ClockScheduler, ClockSpec, Domain, DomainSet};
use crate::coalesce::{LineRequest, SECTOR_BYTES};
use crate::dram::{DramChannel, DramRequest, DramSpec, DramStats};
use crate::fault::{FarFaults, Populate, PENDING};
use crate::icnt::{Crossbar, IcntSpec, IcntStats, Packet};
use crate::port::DelayQueue;
use crate::tlb::{Lookup, SharedTlb, Tlb, TranslationSpec, TranslationStats, Vpn};
use crate::{ConfigError, Priority};

/// What a warp memory instruction does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum AccessKind {
    /// Read; data returns to the SM.
    Load,
    /// Write; an acknowledgement returns.
    Store,
    /// Read-modify-write performed at the L2; data returns.
    Atomic,
}

/// The state space an access targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Space {
    /// Global memory (through the L1 data cache).
    Global,
    /// Constant memory (loads through the constant cache; stores are treated as global).
    Const,
    /// Per-thread local memory (spills, context save areas): treated like global.
    Local,
}

/// One coalesced warp memory access.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemAccess {
    /// Load, store or atomic.
    pub kind: AccessKind,
    /// Which space (and so which first-level cache).
    pub space: Space,
    /// Arbitration class in the interconnect and DRAM.
    pub priority: Priority,
    /// Lines touched, from [`crate::coalesce`]: distinct, each with a non-empty sector mask.
    pub lines: Vec<LineRequest>,
    /// Opaque tag returned with the completion (e.g. warp id and destination register).
    pub tag: u64,
    /// Whose traffic it is (the timing model gives the launch): the DRAM bytes it causes
    /// are counted under it ([`MemorySystem::dram_bytes`]). Nothing else depends on it.
    pub owner: u32,
}

/// Identifier of an accepted access, unique over the life of the memory system.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RequestId(pub u64);

impl std::fmt::Display for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "req{}", self.0)
    }
}

/// Why an access was refused; the SM retries it later. Nothing changed in the memory system.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Stall {
    /// The L1 tag port is still busy with the lines of an earlier access.
    #[error("L1 port busy")]
    L1Busy,
    /// The SM already has `max_outstanding_accesses` accesses in flight.
    #[error("too many outstanding accesses")]
    TooManyOutstanding,
    /// The L1 (or constant cache) has no free MSHR entry for a missing line.
    #[error("MSHRs full")]
    MshrFull,
    /// A missing line's MSHR entry has reached its merge limit.
    #[error("MSHR merge limit")]
    MergeLimit,
    /// The L1 TLB has too few free MSHRs for the access's missing pages.
    #[error("L1 TLB MSHRs full")]
    TlbMshrFull,
    /// The SM's input queue of the request network cannot hold the access's packets.
    #[error("interconnect input queue full")]
    InterconnectFull,
    /// The SM index is out of range.
    #[error("no such SM")]
    NoSuchSm,
}

/// A finished access.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Completion {
    /// The id [`MemorySystem::issue`] returned.
    pub id: RequestId,
    /// The tag of the access.
    pub tag: u64,
    /// Core cycle of issue.
    pub issued: u64,
    /// Core cycle at which the last line was done.
    pub completed: u64,
}

impl Completion {
    /// Core cycles from issue to completion.
    pub fn latency(&self) -> u64 {
        self.completed - self.issued
    }
}

/// Shared memory (modelled by [`crate::coalesce::shared_bank_conflicts`]; the SM applies it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SharedMemSpec {
    /// Bytes per SM.
    pub size_bytes: u64,
    /// Banks (32 on every NVIDIA GPU since Fermi).
    pub banks: u32,
    /// Bytes per bank word.
    pub bank_bytes: u32,
    /// Core cycles of one conflict-free access.
    pub latency: u64,
}

impl SharedMemSpec {
    /// Core cycles for a warp access that needs `passes` serialized passes (from
    /// [`crate::coalesce::shared_bank_conflicts`]): the latency plus one cycle per extra pass.
    pub fn access_cycles(&self, passes: u32) -> u64 {
        self.latency + u64::from(passes.max(1) - 1)
    }
}

/// How addresses are spread over DRAM channels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AddressHash {
    /// Chunk `c` to channel `c mod n`.
    Linear,
    /// Channel rotated by an XOR-fold of the chunk's upper bits.
    Fold,
}

/// The address mapping (see the module documentation).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AddressMapping {
    /// Bytes of consecutive addresses kept in one channel / slice (a multiple of the line size).
    pub interleave_bytes: u64,
    /// Channel selection function.
    pub hash: AddressHash,
}

/// The DRAM channels (and so the L2 slices) an SM's accesses may use: every one, or under
/// MIG its instance's (`MemorySystem::partition`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Channels {
    /// The first channel.
    pub first: usize,
    /// How many consecutive channels, from `first`.
    pub count: usize,
}

impl Channels {
    /// Every channel of `cfg`.
    pub fn all(cfg: &MemConfig) -> Channels {
        Channels {
            first: 0,
            count: cfg.dram_channels,
        }
    }
}

/// Where a line lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Location {
    /// L2 slice (global index).
    pub slice: usize,
    /// DRAM channel.
    pub channel: usize,
    /// Address as the slice's cache sees it.
    pub slice_addr: u64,
    /// Byte address within the channel.
    pub dram_addr: u64,
}

/// The whole memory system's description. Every cycle count is in the named domain's cycles.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemConfig {
    /// Number of SMs (inputs of the request network). A GPU configuration file leaves it
    /// out: it is the GPU's `sm.count`.
    #[serde(default)]
    pub num_sms: usize,
    /// Cache line size in bytes (128 on NVIDIA GPUs); the coalescer's line.
    pub line_bytes: u64,
    /// Clock frequencies.
    pub clocks: ClockSpec,
    /// L1 data cache per SM (core cycles).
    pub l1: CacheSpec,
    /// Constant cache per SM (core cycles).
    pub const_cache: CacheSpec,
    /// Lines the L1 tag port looks up per core cycle.
    pub l1_lines_per_cycle: u32,
    /// Replies the SM accepts from the reply network per core cycle.
    pub l1_fills_per_cycle: u32,
    /// Warp accesses an SM may have in flight.
    pub max_outstanding_accesses: usize,
    /// Shared memory per SM.
    pub shared: SharedMemSpec,
    /// SM→L2 request network.
    pub icnt_request: IcntSpec,
    /// L2→SM reply network.
    pub icnt_reply: IcntSpec,
    /// Total L2 slices (a multiple of `dram_channels`).
    pub l2_slices: usize,
    /// One L2 slice (L2 cycles; `hit_latency` is the slice pipeline before the tag lookup).
    pub l2: CacheSpec,
    /// Requests an L2 slice pipeline holds.
    pub l2_input_queue: usize,
    /// Replies an L2 slice holds while waiting for the reply network.
    pub l2_reply_queue: usize,
    /// Requests an L2 slice holds for DRAM.
    pub l2_dram_queue: usize,
    /// DRAM channels (memory controllers).
    pub dram_channels: usize,
    /// One DRAM channel (DRAM cycles).
    pub dram: DramSpec,
    /// Address to slice / channel / bank / row.
    pub mapping: AddressMapping,
    /// Address translation (`[memory.translation]`, [`crate::tlb`]): absent, or present
    /// with `enabled = false`, accesses are not translated. Written out only when enabled,
    /// so a configuration without translation serializes (in `--stats`, say) as it did
    /// before translation existed.
    #[serde(default, skip_serializing_if = "translation_off")]
    pub translation: Option<TranslationSpec>,
}

/// Whether `t` leaves translation off (absent or not enabled).
fn translation_off(t: &Option<TranslationSpec>) -> bool {
    !t.as_ref().is_some_and(|t| t.enabled)
}

impl MemConfig {
    /// The translation the memory system models, if it is enabled.
    pub fn translating(&self) -> Option<&TranslationSpec> {
        self.translation.as_ref().filter(|t| t.enabled)
    }

    /// Peak DRAM bandwidth, in bytes per core cycle (every channel's bus busy).
    pub fn dram_bytes_per_core_cycle(&self) -> f64 {
        self.dram_channels as f64 * f64::from(self.dram.bus_bytes_per_cycle) * self.clocks.dram_mhz
            / self.clocks.core_mhz
    }

    /// Peak interconnect flits one SM's traffic moves per core cycle, over both networks
    /// (what [`MemorySystem::noc_flits`] counts): on each, the SM's own port, or its even
    /// share of the L2 slices' ports where there are fewer slices than SMs. CCBP's NoC
    /// bandwidth (papers/lin-thesis §4.5, `sched::ccbp`).
    pub fn noc_flits_per_sm_core_cycle(&self) -> f64 {
        let ratio = self.clocks.icnt_mhz / self.clocks.core_mhz;
        let share = (self.l2_slices as f64 / self.num_sms.max(1) as f64).min(1.0);
        [&self.icnt_request, &self.icnt_reply]
            .iter()
            .map(|n| f64::from(n.flits_per_cycle) * ratio * share)
            .sum()
    }

    /// Checks every field; the error names the parameter.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |what: &'static str, reason: String| Err(ConfigError::Invalid { what, reason });
        if !self.line_bytes.is_power_of_two() || !(32..=256).contains(&self.line_bytes) {
            return bad(
                "line_bytes",
                format!("{} is not a power of two in 32..=256", self.line_bytes),
            );
        }
        if self.num_sms == 0 {
            return bad("num_sms", "must be at least 1".into());
        }
        for (what, mhz) in [
            ("clocks.core_mhz", self.clocks.core_mhz),
            ("clocks.icnt_mhz", self.clocks.icnt_mhz),
            ("clocks.l2_mhz", self.clocks.l2_mhz),
            ("clocks.dram_mhz", self.clocks.dram_mhz),
        ] {
            if !(mhz.is_finite() && (1.0..=1.0e6).contains(&mhz)) {
                return bad(what, format!("{mhz} MHz is out of range"));
            }
        }
        self.l1.validate("l1", self.line_bytes)?;
        self.const_cache.validate("const_cache", self.line_bytes)?;
        self.l2.validate("l2", self.line_bytes)?;
        if self.l1_lines_per_cycle == 0
            || self.l1_fills_per_cycle == 0
            || self.max_outstanding_accesses == 0
        {
            return bad(
                "l1_lines_per_cycle / l1_fills_per_cycle / max_outstanding_accesses",
                "must be at least 1".into(),
            );
        }
        for (what, s) in [
            ("icnt_request", &self.icnt_request),
            ("icnt_reply", &self.icnt_reply),
        ] {
            if s.flit_bytes == 0
                || s.flits_per_cycle == 0
                || s.input_buffer == 0
                || s.output_buffer == 0
            {
                return bad(
                    what,
                    "flit_bytes, flits_per_cycle and buffers must be at least 1".into(),
                );
            }
        }
        if self.dram_channels == 0
            || self.l2_slices == 0
            || !self.l2_slices.is_multiple_of(self.dram_channels)
        {
            return bad(
                "l2_slices",
                format!(
                    "{} is not a positive multiple of dram_channels {}",
                    self.l2_slices, self.dram_channels
                ),
            );
        }
        if self.l2_reply_queue < self.l2.mshr_max_merge as usize + 1 {
            return bad(
                "l2_reply_queue",
                "must exceed l2.mshr_max_merge (a fill answers every merged request)".into(),
            );
        }
        if self.l2_input_queue == 0 || self.l2_dram_queue == 0 {
            return bad(
                "l2_input_queue / l2_dram_queue",
                "must be at least 1".into(),
            );
        }
        if self.dram.banks == 0
            || self.dram.row_bytes < self.line_bytes
            || self.dram.bus_bytes_per_cycle == 0
            || self.dram.queue_entries == 0
        {
            return bad(
                "dram",
                "banks, queue_entries, bus_bytes_per_cycle must be ≥ 1 and row_bytes ≥ line_bytes"
                    .into(),
            );
        }
        // Every t_refi cycles a refresh closes the banks for t_rp + t_rfc: with no cycle
        // left between refreshes, no request is ever served.
        let d = &self.dram;
        let refresh = d.t_rp.saturating_add(d.t_rfc);
        if d.t_refi != 0 && d.t_refi <= refresh {
            return bad(
                "dram.t_refi",
                format!(
                    "{} cycles between refreshes is not more than a refresh takes (t_rp + t_rfc = {refresh}): the DRAM would always be refreshing (0 turns refresh off)",
                    d.t_refi
                ),
            );
        }
        let i = self.mapping.interleave_bytes;
        if i < self.line_bytes || !i.is_multiple_of(self.line_bytes) {
            return bad(
                "mapping.interleave_bytes",
                format!("{i} is not a multiple of line_bytes {}", self.line_bytes),
            );
        }
        if self.shared.banks == 0 || self.shared.bank_bytes == 0 {
            return bad("shared", "banks and bank_bytes must be at least 1".into());
        }
        if let Some(t) = &self.translation {
            t.validate()?;
        }
        Ok(())
    }

    /// L2 slices per DRAM channel.
    pub fn slices_per_channel(&self) -> usize {
        self.l2_slices / self.dram_channels
    }

    /// Where the line holding `addr` lives.
    pub fn locate(&self, addr: u64) -> Location {
        self.locate_in(addr, Channels::all(self))
    }

    /// Where the line holding `addr` lives when the memory is cut into partitions and the
    /// access comes from partition `part` (its own channels and their slices): the mapping
    /// of a GPU with only those channels, moved to them.
    pub fn locate_in(&self, addr: u64, part: Channels) -> Location {
        let il = self.mapping.interleave_bytes;
        let n = part.count.max(1) as u64;
        let s = self.slices_per_channel() as u64;
        let (chunk, off) = (addr / il, addr % il);
        let group = chunk / n;
        let h = match self.mapping.hash {
            AddressHash::Linear => 0,
            AddressHash::Fold => {
                let g = group;
                g ^ (g >> 5) ^ (g >> 11) ^ (g >> 17)
            }
        };
        let channel = part.first + ((chunk % n + h % n) % n) as usize;
        let sub = (group % s) as usize;
        let line_off = off & !(self.line_bytes - 1);
        Location {
            slice: channel * s as usize + sub,
            channel,
            slice_addr: (group / s) * il + line_off,
            dram_addr: group * il + line_off,
        }
    }

    /// Channel-local DRAM address of a line known to the L2 slice `slice` as `slice_addr`.
    fn dram_addr_of(&self, slice: usize, slice_addr: u64) -> u64 {
        let il = self.mapping.interleave_bytes;
        let s = self.slices_per_channel() as u64;
        let sub = slice as u64 % s;
        ((slice_addr / il) * s + sub) * il + slice_addr % il
    }

    /// Fills in the SM count and core clock, which a GPU configuration file gives in its
    /// `[sm]` section; a value already present must agree.
    pub fn complete(&mut self, num_sms: usize, core_mhz: f64) -> Result<(), ConfigError> {
        let bad = |what: &'static str, reason: String| Err(ConfigError::Invalid { what, reason });
        if self.num_sms != 0 && self.num_sms != num_sms {
            return bad(
                "num_sms",
                format!("{} differs from the GPU's SM count {num_sms}", self.num_sms),
            );
        }
        if self.clocks.core_mhz != 0.0 && self.clocks.core_mhz != core_mhz {
            return bad(
                "clocks.core_mhz",
                format!(
                    "{} differs from the GPU's core clock {core_mhz}",
                    self.clocks.core_mhz
                ),
            );
        }
        self.num_sms = num_sms;
        self.clocks.core_mhz = core_mhz;
        Ok(())
    }

    /// Peak DRAM bandwidth in bytes per second over all channels.
    pub fn dram_peak_bytes_per_s(&self) -> f64 {
        self.dram_channels as f64
            * f64::from(self.dram.bus_bytes_per_cycle)
            * self.clocks.dram_mhz
            * 1.0e6
    }
}

/// A snapshot of every counter, serializable to JSON.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MemStats {
    /// Core cycles simulated.
    pub core_cycles: u64,
    /// Interconnect cycles simulated.
    pub icnt_cycles: u64,
    /// L2 cycles simulated.
    pub l2_cycles: u64,
    /// DRAM cycles simulated.
    pub dram_cycles: u64,
    /// Accesses accepted by `issue`.
    pub accesses_issued: u64,
    /// Accesses completed.
    pub accesses_completed: u64,
    /// `issue` calls refused, by any [`Stall`].
    pub issue_stalls: u64,
    /// Sum over accepted accesses of their latency in core cycles.
    pub total_latency_core_cycles: u64,
    /// L1 data caches, per SM.
    pub l1: Vec<CacheStats>,
    /// L1 data caches, summed.
    pub l1_total: CacheStats,
    /// Constant caches, summed.
    pub const_total: CacheStats,
    /// SM→L2 network.
    pub icnt_request: IcntStats,
    /// L2→SM network.
    pub icnt_reply: IcntStats,
    /// L2 slices.
    pub l2: Vec<CacheStats>,
    /// L2 slices, summed.
    pub l2_total: CacheStats,
    /// DRAM channels.
    pub dram: Vec<DramStats>,
    /// DRAM channels, summed (`cycles` summed too).
    pub dram_total: DramStats,
    /// Address translation, when it is enabled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub translation: Option<TranslationStats>,
}

impl MemStats {
    /// The counts between the snapshot `earlier` and `self`, both of the same memory system
    /// (counters only grow): what happened in between.
    pub fn since(&self, earlier: &MemStats) -> MemStats {
        fn each<T>(now: &[T], then: &[T], f: impl Fn(&T, &T) -> T) -> Vec<T> {
            now.iter().zip(then).map(|(a, b)| f(a, b)).collect()
        }
        MemStats {
            core_cycles: self.core_cycles - earlier.core_cycles,
            icnt_cycles: self.icnt_cycles - earlier.icnt_cycles,
            l2_cycles: self.l2_cycles - earlier.l2_cycles,
            dram_cycles: self.dram_cycles - earlier.dram_cycles,
            accesses_issued: self.accesses_issued - earlier.accesses_issued,
            accesses_completed: self.accesses_completed - earlier.accesses_completed,
            issue_stalls: self.issue_stalls - earlier.issue_stalls,
            total_latency_core_cycles: self.total_latency_core_cycles
                - earlier.total_latency_core_cycles,
            l1: each(&self.l1, &earlier.l1, CacheStats::since),
            l1_total: self.l1_total.since(&earlier.l1_total),
            const_total: self.const_total.since(&earlier.const_total),
            icnt_request: self.icnt_request.since(&earlier.icnt_request),
            icnt_reply: self.icnt_reply.since(&earlier.icnt_reply),
            l2: each(&self.l2, &earlier.l2, CacheStats::since),
            l2_total: self.l2_total.since(&earlier.l2_total),
            dram: each(&self.dram, &earlier.dram, DramStats::since),
            dram_total: self.dram_total.since(&earlier.dram_total),
            translation: match (&self.translation, &earlier.translation) {
                (Some(a), Some(b)) => Some(a.since(b)),
                (a, _) => a.clone(),
            },
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReqKind {
    Read,
    Write,
    Atomic,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FillTarget {
    L1,
    Const,
    None,
}

/// A request travelling from an SM to an L2 slice (and parked in L2 MSHRs).
#[derive(Debug, Clone, Copy)]
struct ReqMsg {
    sm: u32,
    slot: u32,
    /// [`MemAccess::owner`].
    owner: u32,
    slice_addr: u64,
    line_addr: u64,
    sectors: u8,
    kind: ReqKind,
    fill: FillTarget,
    priority: Priority,
}

/// A reply travelling from an L2 slice to an SM.
#[derive(Debug, Clone, Copy)]
struct ReplyMsg {
    slot: u32,
    line_addr: u64,
    sectors: u8,
    fill: FillTarget,
}

#[derive(Debug, Clone, Copy)]
struct DramTag {
    slice: u32,
    slice_addr: u64,
    sectors: u8,
}

#[derive(Debug, Clone, Copy)]
struct AccessEntry {
    id: RequestId,
    tag: u64,
    issued: u64,
    pending: u32,
}

#[derive(Debug)]
struct SmState {
    l1: Cache<u32>,
    cc: Cache<u32>,
    l1_free_at: u64,
    hits: DelayQueue<u32>,
    slots: Vec<Option<AccessEntry>>,
    free_slots: Vec<u32>,
    completed: VecDeque<Completion>,
    /// The last load refused for want of an MSHR: (L1 version, constant-cache version,
    /// whether it read the constant cache, the refusal), its lines in `refused_lines`. A
    /// retry of the same lines before either cache changes gets the same answer without
    /// probing every line again (an SM retries a refused access every cycle, so this is
    /// the hot path of a memory-bound kernel).
    refused: Option<(u64, u64, bool, Stall)>,
    /// The lines of the `refused` load (kept, not reallocated, from one refusal to the
    /// next).
    refused_lines: Vec<LineRequest>,
    /// What the L1 (or constant cache) answered for each line of the load last checked
    /// ([`SmPort::check_lines`]): what its reads find ([`SmPort::send_lines`]), since
    /// reading one line of an access changes no other line's answer.
    probed: Vec<ReadOutcome>,
    /// Whether global and local accesses bypass the L1 data cache: loads are not looked up
    /// and their replies fill nothing, stores leave it alone (papers/lin-thesis §3.6.4:
    /// GPUDuet keeps spilled contexts in a bypassed L1). Lines already there stay, unused,
    /// and fills of misses already in flight still land.
    l1_bypass: bool,
    /// The channels (and their slices) this SM's accesses go to: all of them, or its MIG
    /// instance's ([`MemorySystem::partition`]).
    channels: Channels,
    /// The L1 TLB, with translation on.
    tlb: Option<Tlb>,
    /// Accepted accesses whose translation is under way or whose L1 lookup waits: each
    /// holds its access slot.
    translating: Vec<Translating>,
    /// The cycle the last access accepted with translation on has its last page translated
    /// ([`PENDING`] while a page waits for a fault); see [`MemorySystem::last_translated`].
    last_translated: u64,
    /// Faulting accesses under a pipeline that replays ([`crate::Pipeline::squashes`]):
    /// each holds its access slot until its fault is detected, is then squashed (the slot
    /// freed, the access moved to `faulted`) and waits here, holding nothing, until its
    /// fault is serviced, when its tag moves to `serviced`.
    squashed: Vec<Squashed>,
    /// Squashed accesses not yet popped by the SM ([`MemorySystem::pop_squashed`]), and
    /// tags of squashed accesses whose faults have been serviced, in the order they were
    /// ([`MemorySystem::pop_serviced`]).
    faulted: VecDeque<MemAccess>,
    serviced: VecDeque<u64>,
    next_seq: u64,
    /// Packets this SM's accesses sent into the request network during the current core
    /// cycle, with the interconnect cycle from which each may be granted, and their count
    /// per class: the network takes them, SM by SM, before it next ticks
    /// ([`MemorySystem::merge_staged`]), so SMs can offer accesses independently.
    staged: Vec<(u64, Packet<ReqMsg>)>,
    staged_per_class: [usize; 2],
    /// Request packets (L1 misses, stores, atomics) this SM has sent into the request
    /// network, ever: what an issue-rate controller charges ([`SmPort::noc_requests`]).
    noc_requests: u64,
    /// Flits of those packets by [`MemAccess::owner`] ([`MemorySystem::noc_flits`]).
    request_flits_by_owner: Vec<u64>,
    /// Accesses accepted so far (also the sequence part of their [`RequestId`]), completed,
    /// in flight, refused, and the latency of the completed ones summed.
    issued: u64,
    done: u64,
    in_flight: usize,
    stalls: u64,
    total_latency: u64,
}

impl SmState {
    /// The id of the access this SM accepts next: unique over the memory system's life,
    /// and independent of what other SMs do.
    fn next_id(&self, sm: usize) -> RequestId {
        RequestId((self.issued << 20) | sm as u64)
    }
}

/// An accepted access waiting for its translation, then for the L1.
#[derive(Debug)]
struct Translating {
    /// The cycle its last page is translated ([`PENDING`] while a page waits for a fault
    /// whose batch has not started), and its order of acceptance (ties).
    ready: u64,
    seq: u64,
    /// The cycle it was accepted, and the latest arrival of its pages not waiting for a
    /// fault (its translation ends then once its faults are serviced).
    accepted: u64,
    known: u64,
    slot: u32,
    access: MemAccess,
}

/// An accepted access that faults, under a pipeline that replays: it holds its access
/// slot until its fault is detected (`detect`), then is squashed (`reported` to the SM)
/// and waits, holding nothing, for its fault's service (`t.ready`).
#[derive(Debug)]
struct Squashed {
    t: Translating,
    detect: u64,
    reported: bool,
}

#[derive(Debug)]
struct SliceState {
    cache: Cache<ReqMsg>,
    pipe: DelayQueue<ReqMsg>,
    replies: VecDeque<Packet<ReplyMsg>>,
    to_dram: DelayQueue<DramRequest<DramTag>>,
    fills: DelayQueue<DramTag>,
}

/// See [`MemorySystem::issue_state`]. The default is the state of a memory that never
/// refuses (a test double's).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IssueState {
    l1_busy: bool,
    free_slots: usize,
    l1_version: u64,
    cc_version: u64,
    icnt_free: [usize; 2],
    /// The L1 TLB's state (`Tlb::state`: its version and its MSHRs in flight, as one
    /// word); zero without translation.
    tlb: u64,
    /// Whether the L1 data cache is bypassed ([`MemorySystem::set_l1_bypass`]).
    l1_bypass: bool,
    /// Whether addresses are translated (an offer then goes through the TLBs first).
    translating: bool,
}

impl IssueState {
    /// Whether an offer refused with `stall` in state `then` is refused the same way in this
    /// state, so that the refusal may be counted again without the offer
    /// ([`SmPort::repeat_refusal`]). Equal states always refuse again; otherwise it follows
    /// the order of `SmPort::try_issue`'s checks (L1 port, access slots, the lines' MSHRs,
    /// the request network's room): every check before the refusing one passes as it did, and
    /// the refusing one still refuses. A refusal for want of MSHRs, say, repeats while the
    /// caches are unchanged however the request network drains, and one for want of room
    /// repeats while the caches are unchanged and the room has not grown. With translation
    /// on, only an equal state does.
    #[inline]
    pub fn refuses_again(&self, then: &IssueState, stall: Stall) -> bool {
        if self == then {
            return true;
        }
        if self.translating || then.translating || self.l1_bypass != then.l1_bypass {
            return false;
        }
        let lines_same = || {
            !self.l1_busy
                && self.free_slots > 0
                && self.l1_version == then.l1_version
                && self.cc_version == then.cc_version
        };
        match stall {
            Stall::L1Busy => self.l1_busy,
            Stall::TooManyOutstanding => !self.l1_busy && self.free_slots == 0,
            Stall::MshrFull | Stall::MergeLimit => lines_same(),
            Stall::InterconnectFull => {
                lines_same()
                    && self.icnt_free[0] <= then.icnt_free[0]
                    && self.icnt_free[1] <= then.icnt_free[1]
            }
            Stall::TlbMshrFull | Stall::NoSuchSm => false,
        }
    }
}

/// The memory system of one GPU: state of every component, driven by [`MemorySystem::tick`].
#[derive(Debug)]
pub struct MemorySystem {
    cfg: MemConfig,
    clock: ClockScheduler,
    sms: Vec<SmState>,
    req_net: Crossbar<ReqMsg>,
    reply_net: Crossbar<ReplyMsg>,
    slices: Vec<SliceState>,
    channels: Vec<DramChannel<DramTag>>,
    waiters: Vec<u32>,
    /// DRAM bytes by [`MemAccess::owner`] ([`MemorySystem::dram_bytes`]).
    dram_by_owner: Vec<u64>,
    /// Reply-network flits by [`MemAccess::owner`] ([`MemorySystem::noc_flits`]).
    reply_flits_by_owner: Vec<u64>,
    l2_waiters: Vec<ReqMsg>,
    /// Offers refused because they named no SM.
    stalls_no_sm: u64,
    /// With translation on: the shared L2 TLB and walkers, the page size, and counters.
    shared_tlb: Option<SharedTlb>,
    page_bytes: u64,
    translated: u64,
    translation_cycles: u64,
    translation_stalls: u64,
    /// A port was handed out since the last merge, so packets may be staged: only then
    /// does [`MemorySystem::merge_staged`] look at the SMs (it runs at every tick, several
    /// per core cycle, and SMs stage only between core cycles).
    ports_out: bool,
}

impl MemorySystem {
    /// Builds an idle memory system at time 0.
    pub fn new(cfg: MemConfig) -> Result<Self, ConfigError> {
        cfg.validate()?;
        let max_lines = (cfg.line_bytes / SECTOR_BYTES) as usize * 8;
        let sms = (0..cfg.num_sms)
            .map(|_| SmState {
                l1: Cache::new(cfg.l1.clone()),
                cc: Cache::new(cfg.const_cache.clone()),
                l1_free_at: 0,
                refused: None,
                refused_lines: Vec::new(),
                probed: Vec::new(),
                l1_bypass: false,
                hits: DelayQueue::new(cfg.max_outstanding_accesses * 32 * max_lines.max(1), 1),
                slots: vec![None; cfg.max_outstanding_accesses],
                free_slots: (0..cfg.max_outstanding_accesses as u32).rev().collect(),
                completed: VecDeque::new(),
                channels: Channels::all(&cfg),
                tlb: cfg.translating().map(|t| Tlb::new(t.l1_tlb.clone())),
                squashed: Vec::new(),
                faulted: VecDeque::new(),
                serviced: VecDeque::new(),
                translating: Vec::new(),
                last_translated: 0,
                next_seq: 0,
                staged: Vec::new(),
                staged_per_class: [0; 2],
                noc_requests: 0,
                request_flits_by_owner: Vec::new(),
                issued: 0,
                done: 0,
                in_flight: 0,
                stalls: 0,
                total_latency: 0,
            })
            .collect();
        let slices = (0..cfg.l2_slices)
            .map(|_| SliceState {
                cache: Cache::new(cfg.l2.clone()),
                pipe: DelayQueue::new(cfg.l2_input_queue, cfg.l2.hit_latency),
                replies: VecDeque::with_capacity(cfg.l2_reply_queue),
                to_dram: DelayQueue::new(cfg.l2_dram_queue, 1),
                fills: DelayQueue::new(usize::MAX / 2, 1),
            })
            .collect();
        Ok(Self {
            clock: ClockScheduler::new(&cfg.clocks),
            sms,
            req_net: Crossbar::new(cfg.icnt_request.clone(), cfg.num_sms, cfg.l2_slices),
            reply_net: Crossbar::new(cfg.icnt_reply.clone(), cfg.l2_slices, cfg.num_sms),
            slices,
            channels: (0..cfg.dram_channels)
                .map(|_| DramChannel::new(cfg.dram.clone()))
                .collect(),
            waiters: Vec::new(),
            dram_by_owner: Vec::new(),
            reply_flits_by_owner: Vec::new(),
            l2_waiters: Vec::new(),
            stalls_no_sm: 0,
            shared_tlb: cfg.translating().map(|t| {
                let l2 = SharedTlb::new(t.l2_tlb.clone(), t.walkers, t.walk_latency);
                match &t.faults {
                    Some(f) => l2.with_faults(
                        FarFaults::new(f, cfg.clocks.core_mhz, t.page_bytes()),
                        t.page_bytes(),
                    ),
                    None => l2,
                }
            }),
            page_bytes: cfg.translating().map_or(0, TranslationSpec::page_bytes),
            translated: 0,
            translation_cycles: 0,
            translation_stalls: 0,
            ports_out: false,
            cfg,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &MemConfig {
        &self.cfg
    }

    /// The current core cycle (the cycle at which `issue` takes effect).
    pub fn core_cycle(&self) -> u64 {
        self.clock.cycle(Domain::Core)
    }

    /// The current cycle of any domain: the edges counted so far, which is the domain's cycle
    /// at the current global time (the clock scheduler's invariant) without a division.
    pub fn cycle(&self, d: Domain) -> u64 {
        self.clock.cycle(d)
    }

    /// Global time in femtoseconds.
    pub fn now_fs(&self) -> u64 {
        self.clock.now_fs()
    }

    /// Declares `[start, start + bytes)` managed memory (`cudaMallocManaged`), resident on
    /// the host: the GPU's first touch of each region faults ([`crate::fault`]). Returns
    /// false, changing nothing, when the memory system has no demand paging (translation
    /// off, or no `translation.faults`): the memory is then on the GPU from the start.
    pub fn manage(&mut self, start: u64, bytes: u64, populate: Populate) -> bool {
        match self.shared_tlb.as_mut().and_then(SharedTlb::faults_mut) {
            Some(f) => {
                f.manage(start, bytes, populate);
                true
            }
            None => false,
        }
    }

    /// Bytes a far fault migrates (its *region*), when the memory system pages on demand.
    pub fn fault_region_bytes(&self) -> Option<u64> {
        self.shared_tlb
            .as_ref()
            .and_then(SharedTlb::faults)
            .map(FarFaults::region_bytes)
    }

    /// The host wrote `[start, start + bytes)`: every managed allocation it touches holds
    /// host data from now on, so a fault on a region of it not yet on the GPU migrates it
    /// ([`crate::fault::FarFaults::populate`]). Nothing without demand paging.
    pub fn populate(&mut self, start: u64, bytes: u64) {
        if let Some(f) = self.shared_tlb.as_mut().and_then(SharedTlb::faults_mut) {
            f.populate(start, bytes);
        }
    }

    /// Offers one warp access from SM `sm` at the current core cycle. Accepted whole, or
    /// refused whole with the reason (and nothing changed but the stall counters).
    pub fn issue(&mut self, sm: usize, access: MemAccess) -> Result<RequestId, Stall> {
        self.offer(sm, &access)
    }

    /// [`MemorySystem::issue`] without giving up the access (an SM that retries a refused
    /// access keeps it).
    pub fn offer(&mut self, sm: usize, access: &MemAccess) -> Result<RequestId, Stall> {
        if sm >= self.sms.len() {
            self.stalls_no_sm += 1;
            return Err(Stall::NoSuchSm);
        }
        if self.shared_tlb.is_some() && !access.lines.is_empty() {
            let r = self.try_translate(sm, access);
            if r.is_err() {
                self.sms[sm].stalls += 1;
            }
            return r;
        }
        self.port(sm).offer(access)
    }

    /// Offers `access` from SM `sm` again after it was refused with `stall`, to a memory
    /// system whose [`MemorySystem::issue_state`] refuses it again the same way
    /// ([`IssueState::refuses_again`]): refused again, counted as the refusal was
    /// ([`SmPort::repeat_refusal`]; with translation on, offered again).
    pub fn repeat_refusal(&mut self, sm: usize, access: &MemAccess, stall: Stall) {
        if sm >= self.sms.len() || (self.shared_tlb.is_some() && !access.lines.is_empty()) {
            let r = self.offer(sm, access);
            debug_assert_eq!(r, Err(stall), "an unchanged memory system refuses again");
            return;
        }
        self.port(sm).repeat_refusal(access, stall);
    }

    /// With translation on: the cycle at which the last access SM `sm` had accepted has its
    /// last page translated (its last TLB check passes), or [`PENDING`] while one of its
    /// pages waits for a fault whose batch has not started. `None` without translation (no
    /// access can fault). What an SM pipeline that disables a warp until the last TLB check
    /// reads (`tlb::Pipeline::WdLastcheck`).
    pub fn last_translated(&self, sm: usize) -> Option<u64> {
        self.shared_tlb.as_ref()?;
        Some(self.sms[sm].last_translated)
    }

    /// Everything the answer to an offer from SM `sm` at the current core cycle depends on
    /// besides the offer itself. Two equal states give the same answer to the same offer, so
    /// an SM that was refused can tell that retrying would be refused again.
    #[inline]
    pub fn issue_state(&self, sm: usize) -> IssueState {
        issue_state_of(&self.sms[sm], &self.req_net, sm, self.core_cycle())
    }

    /// Whether SM `sm`'s memory system now refuses again an access it refused with `stall`
    /// in state `then`: [`IssueState::refuses_again`] of [`MemorySystem::issue_state`],
    /// answered from the refusal's own part of the state (the whole state is built only
    /// with translation, or for a stall without its own rule).
    #[inline]
    pub fn refuses_again(&self, sm: usize, then: &IssueState, stall: Stall) -> bool {
        refuses_again_of(
            &self.sms[sm],
            &self.req_net,
            sm,
            self.core_cycle(),
            then,
            stall,
        )
    }

    /// SM `sm`'s port for the current core cycle.
    #[inline]
    fn port(&mut self, sm: usize) -> SmPort<'_> {
        self.ports_out = true;
        SmPort {
            sm,
            now: self.clock.cycle(Domain::Core),
            icnt_now: self.clock.cycle(Domain::Icnt),
            cfg: &self.cfg,
            req_net: &self.req_net,
            st: &mut self.sms[sm],
        }
    }

    /// The channels SM `sm`'s accesses go to ([`MemorySystem::partition`]).
    pub fn channels_of(&self, sm: usize) -> Channels {
        self.sms[sm].channels
    }

    /// Cuts the memory into `instances` equal partitions, as NVIDIA's Multi-Instance GPU
    /// does: partition `j` holds the DRAM channels `j × w` to `(j + 1) × w − 1`, `w = ⌊channels
    /// / instances⌋`, with their L2 slices, and SM `sm` sends every access to the partition
    /// `instance_of_sm[sm]` (`None`: an SM no instance holds keeps every channel). Each
    /// partition maps its addresses as a GPU with only its channels would; the channels left
    /// over are unused. SMs of different partitions then share no L2 slice, DRAM channel,
    /// request-network output or reply-network input, so one instance's traffic cannot slow
    /// another's. With more instances than channels (no MIG GPU has that: its instances are
    /// at most its memory slices) partition `j` gets channel `⌊j × channels / instances⌋`
    /// alone, so neighbouring instances share a channel and its slices. Only before any
    /// access.
    pub fn partition(
        &mut self,
        instance_of_sm: &[Option<u32>],
        instances: u32,
    ) -> Result<(), ConfigError> {
        let bad = |reason: String| {
            Err(ConfigError::Invalid {
                what: "mig instances",
                reason,
            })
        };
        let channels = self.cfg.dram_channels;
        let n = instances.max(1) as usize;
        let width = channels / n;
        if instance_of_sm.len() != self.sms.len() {
            return bad(format!(
                "an instance for {} SMs; the GPU has {}",
                instance_of_sm.len(),
                self.sms.len()
            ));
        }
        if !self.is_idle() || self.sms.iter().any(|st| st.issued != 0) {
            return bad("the memory has already been used".into());
        }
        for (st, j) in self.sms.iter_mut().zip(instance_of_sm) {
            st.channels = match *j {
                Some(j) if j < instances && width > 0 => Channels {
                    first: j as usize * width,
                    count: width,
                },
                Some(j) if j < instances => Channels {
                    first: j as usize * channels / n,
                    count: 1,
                },
                Some(j) => return bad(format!("instance {j} of {instances}")),
                None => Channels::all(&self.cfg),
            };
        }
        Ok(())
    }

    /// Every SM's port for the current core cycle, in SM order, each borrowing only its own
    /// SM's front end (L1, constant cache, MSHRs, access slots, staged packets) and reading
    /// the rest: so SMs may offer accesses, read their issue state and pop completions on
    /// different threads, and the result is the same in any order. `None` with address
    /// translation on: an L1 TLB miss goes to the shared L2 TLB at once, so SMs must offer
    /// one after another through [`MemorySystem::offer`].
    pub fn ports(&mut self) -> Option<SmPorts<'_>> {
        if self.shared_tlb.is_some() {
            return None;
        }
        self.ports_out = true;
        Some(SmPorts {
            sms: self.sms.iter_mut().enumerate(),
            now: self.clock.cycle(Domain::Core),
            icnt_now: self.clock.cycle(Domain::Icnt),
            cfg: &self.cfg,
            req_net: &self.req_net,
        })
    }

    /// Moves the packets every SM staged into the request network's input queues, SM by SM
    /// (each SM's in the order it sent them): the one point where SMs' traffic meets, in an
    /// order that does not depend on how the SMs were stepped.
    fn merge_staged(&mut self) {
        if !std::mem::take(&mut self.ports_out) {
            return;
        }
        for (sm, st) in self.sms.iter_mut().enumerate() {
            if st.staged.is_empty() {
                continue;
            }
            for (ready, pkt) in st.staged.drain(..) {
                self.req_net.inject_checked(ready, sm, pkt);
            }
            st.staged_per_class = [0; 2];
        }
    }

    /// Accepts an access into SM `sm`'s front end with translation on: it takes an access
    /// slot and its pages' translations (refused whole when the slot or L1 TLB MSHRs lack),
    /// then waits for them (see [`MemorySystem::start_translated`]).
    fn try_translate(&mut self, sm: usize, a: &MemAccess) -> Result<RequestId, Stall> {
        let now = self.core_cycle();
        let page = self.page_bytes;
        let st = &mut self.sms[sm];
        let Some(&slot) = st.free_slots.last() else {
            return Err(Stall::TooManyOutstanding);
        };
        let l1 = st
            .tlb
            .as_mut()
            .expect("an L1 TLB per SM with translation on");
        let l2 = self.shared_tlb.as_mut().expect("translation on");
        let pages = a.lines.iter().map(|l| Vpn(l.line_addr / page));
        let (mut known, mut pending) = (now, false);
        // When the SM learns that a page faults: at its walk's end for a miss (the
        // fault's raise, walker queueing aside), after the L1 lookup for a page whose
        // fault is already being waited for.
        let t = self.cfg.translation.as_ref().expect("translation on");
        let squashes = t.pipeline.squashes();
        let (l1_latency, miss_latency) = (
            t.l1_tlb.latency,
            t.l1_tlb.latency + t.l2_tlb.latency + t.walk_latency,
        );
        let mut detect = now;
        let translated = l1.translate(pages, now, l2, |_, o| match o {
            Lookup::Miss { ready: PENDING } => {
                pending = true;
                detect = detect.max(now + miss_latency);
            }
            Lookup::Merged { ready: PENDING } => {
                pending = true;
                detect = detect.max(now + l1_latency);
            }
            o => known = known.max(o.ready()),
        });
        let Ok(ready) = translated else {
            self.translation_stalls += 1;
            return Err(Stall::TlbMshrFull);
        };
        st.free_slots.pop();
        let id = st.next_id(sm);
        st.issued += 1;
        st.in_flight += 1;
        self.translated += 1;
        if pending {
            // Its translation time is counted once its faults are serviced.
            if let Some(f) = l2.faults_mut() {
                f.count_faulted_access();
            }
        } else {
            self.translation_cycles += ready - now;
        }
        st.slots[slot as usize] = Some(AccessEntry {
            id,
            tag: a.tag,
            issued: now,
            pending: a.lines.len() as u32,
        });
        st.last_translated = ready;
        let t = Translating {
            ready,
            seq: st.next_seq,
            accepted: now,
            known,
            slot,
            access: a.clone(),
        };
        if pending && squashes {
            // Squashed once its fault is detected (papers/tanasic-thesis §6.3): it leaves
            // the front end then, freeing its access slot, and the SM replays it once the
            // fault is serviced ([`MemorySystem::release_squashed`]).
            st.squashed.push(Squashed {
                t,
                detect,
                reported: false,
            });
        } else {
            st.translating.push(t);
        }
        st.next_seq += 1;
        Ok(id)
    }

    /// Every SM's [`MemorySystem::start_translated`], in SM order (kept out of `tick`'s
    /// loop, which runs every core cycle with or without translation).
    #[inline(never)]
    fn start_translations(&mut self, now: u64) {
        self.service_faults(now);
        for sm in 0..self.sms.len() {
            if !self.sms[sm].translating.is_empty() {
                self.start_translated(sm, now);
            }
            if !self.sms[sm].squashed.is_empty() {
                self.release_squashed(sm, now);
            }
        }
    }

    /// Squashes SM `sm`'s faulting accesses whose faults are detected by `now` (their
    /// access slots are freed; the SM hears of each through
    /// [`MemorySystem::pop_squashed`]), then hands the SM those whose faults are serviced
    /// ([`MemorySystem::pop_serviced`]), in (cycle, acceptance) order: they leave the
    /// memory system, and their replays are new accesses.
    fn release_squashed(&mut self, sm: usize, now: u64) {
        let st = &mut self.sms[sm];
        st.squashed.sort_by_key(|s| (s.detect, s.t.seq));
        for s in st.squashed.iter_mut() {
            if s.detect > now {
                break;
            }
            if !s.reported {
                s.reported = true;
                st.slots[s.t.slot as usize] = None;
                st.free_slots.push(s.t.slot);
                st.faulted.push_back(s.t.access.clone());
            }
        }
        st.squashed
            .sort_by_key(|s| (!s.reported, s.t.ready, s.t.seq));
        let n = st
            .squashed
            .partition_point(|s| s.reported && s.t.ready <= now);
        for s in st.squashed.drain(..n) {
            st.serviced.push_back(s.t.access.tag);
        }
    }

    /// Takes the oldest access of SM `sm` squashed because it faulted (with a pipeline
    /// that replays, [`crate::Pipeline::squashes`]): it is out of the memory system, and
    /// its lines wait for the SM to replay them.
    pub fn pop_squashed(&mut self, sm: usize) -> Option<MemAccess> {
        self.sms.get_mut(sm)?.faulted.pop_front()
    }

    /// Takes the tag of the oldest squashed access of SM `sm` whose fault has been
    /// serviced: the SM may replay it now.
    pub fn pop_serviced(&mut self, sm: usize) -> Option<u64> {
        let st = self.sms.get_mut(sm)?;
        let tag = st.serviced.pop_front()?;
        // In flight (the memory system not idle) until the SM has heard of it.
        st.in_flight -= 1;
        Some(tag)
    }

    /// Starts the fault batches due by `now` ([`crate::fault`]) and gives their regions'
    /// arrival to every L1 TLB and every access waiting for them.
    fn service_faults(&mut self, now: u64) {
        let Some(l2) = self.shared_tlb.as_mut() else {
            return;
        };
        let resolved = l2.service_faults(now);
        if resolved.is_empty() {
            return;
        }
        let page = self.page_bytes;
        for st in &mut self.sms {
            let Some(l1) = st.tlb.as_mut() else {
                continue;
            };
            for (vpns, ready) in resolved {
                l1.resolve(vpns.clone(), *ready);
            }
            // An access waiting for faults ends its translation when its last page
            // arrives: its L1 TLB MSHRs say when, once no page of it is pending.
            let squashed = st.squashed.iter_mut().map(|s| &mut s.t);
            let waiting = st.translating.iter_mut().chain(squashed);
            for t in waiting.filter(|t| t.ready == PENDING) {
                let mut ready = t.known;
                for l in &t.access.lines {
                    match l1.fetch_ready(Vpn(l.line_addr / page)) {
                        Some(PENDING) => {
                            ready = PENDING;
                            break;
                        }
                        Some(r) => ready = ready.max(r),
                        None => {}
                    }
                }
                if ready != PENDING {
                    t.ready = ready;
                    self.translation_cycles += ready - t.accepted;
                }
            }
        }
    }

    /// Sends the earliest translated access of SM `sm` whose translation is done into the
    /// L1, if the L1 takes it now (else it waits and is tried again next cycle).
    fn start_translated(&mut self, sm: usize, now: u64) {
        let st = &self.sms[sm];
        if now < st.l1_free_at {
            return;
        }
        let Some((i, _)) = st
            .translating
            .iter()
            .enumerate()
            .filter(|(_, t)| t.ready <= now)
            .min_by_key(|(_, t)| (t.ready, t.seq))
        else {
            return;
        };
        let t = self.sms[sm].translating.swap_remove(i);
        let mut port = self.port(sm);
        if port.check_lines(&t.access).is_err() {
            port.st.translating.push(t);
            return;
        }
        port.send_lines(t.slot, &t.access);
    }
}

/// Every SM's [`SmPort`] for one core cycle, in SM order ([`MemorySystem::ports`]): an
/// iterator, so that stepping the SMs allocates nothing per cycle.
#[derive(Debug)]
pub struct SmPorts<'a> {
    sms: std::iter::Enumerate<std::slice::IterMut<'a, SmState>>,
    now: u64,
    icnt_now: u64,
    cfg: &'a MemConfig,
    req_net: &'a Crossbar<ReqMsg>,
}

impl<'a> Iterator for SmPorts<'a> {
    type Item = SmPort<'a>;

    #[inline]
    fn next(&mut self) -> Option<SmPort<'a>> {
        let (sm, st) = self.sms.next()?;
        Some(SmPort {
            sm,
            now: self.now,
            icnt_now: self.icnt_now,
            cfg: self.cfg,
            req_net: self.req_net,
            st,
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.sms.size_hint()
    }
}

impl ExactSizeIterator for SmPorts<'_> {}

/// One SM's side of the memory system during one core cycle ([`MemorySystem::ports`]).
#[derive(Debug)]
pub struct SmPort<'a> {
    sm: usize,
    now: u64,
    icnt_now: u64,
    cfg: &'a MemConfig,
    req_net: &'a Crossbar<ReqMsg>,
    st: &'a mut SmState,
}

/// See [`MemorySystem::issue_state`].
#[inline]
fn issue_state_of(st: &SmState, req_net: &Crossbar<ReqMsg>, sm: usize, now: u64) -> IssueState {
    let room = |p| input_room(st, req_net, sm, p);
    IssueState {
        l1_busy: now < st.l1_free_at,
        free_slots: st.free_slots.len(),
        l1_version: st.l1.version(),
        cc_version: st.cc.version(),
        icnt_free: [room(Priority::Normal), room(Priority::Context)],
        tlb: match &st.tlb {
            None => 0,
            Some(t) => t.state(now),
        },
        l1_bypass: st.l1_bypass,
        translating: st.tlb.is_some(),
    }
}

/// [`IssueState::refuses_again`] of SM `sm`'s state at `now`, reading only what a refusal
/// for `stall` turns on: an SM asleep on a refused access asks every cycle, and the whole
/// state (every field read, then compared) was most of the question's cost. The same
/// answer (debug builds compare): without translation a refusal's rule holds whenever the
/// whole state is unchanged (a refusal for want of MSHRs was made with the L1 port free and
/// an access slot free, so an equal state passes `lines_same`), so only the rule is asked;
/// with translation, or for the stalls without a rule, only an equal state refuses again.
#[inline]
fn refuses_again_of(
    st: &SmState,
    req_net: &Crossbar<ReqMsg>,
    sm: usize,
    now: u64,
    then: &IssueState,
    stall: Stall,
) -> bool {
    let holds = if st.tlb.is_some()
        || then.translating
        || matches!(stall, Stall::TlbMshrFull | Stall::NoSuchSm)
    {
        // Only an equal state refuses again.
        issue_state_of(st, req_net, sm, now) == *then
    } else if st.l1_bypass != then.l1_bypass {
        false
    } else {
        // Each rule below holds whenever the whole state is unchanged (the refusal's own
        // part of an equal state), so the equality need not be asked.
        let l1_busy = now < st.l1_free_at;
        let lines_same = || {
            !l1_busy
                && !st.free_slots.is_empty()
                && st.l1.version() == then.l1_version
                && st.cc.version() == then.cc_version
        };
        match stall {
            Stall::L1Busy => l1_busy,
            Stall::TooManyOutstanding => !l1_busy && st.free_slots.is_empty(),
            Stall::MshrFull | Stall::MergeLimit => lines_same(),
            Stall::InterconnectFull => {
                lines_same()
                    && input_room(st, req_net, sm, Priority::Normal) <= then.icnt_free[0]
                    && input_room(st, req_net, sm, Priority::Context) <= then.icnt_free[1]
            }
            // Answered above by the equality.
            Stall::TlbMshrFull | Stall::NoSuchSm => false,
        }
    };
    debug_assert_eq!(
        holds,
        issue_state_of(st, req_net, sm, now).refuses_again(then, stall),
        "the quick answer is refuses_again's"
    );
    holds
}

/// Free slots of SM `sm`'s request-network input for `priority`, less what it staged.
#[inline]
fn input_room(st: &SmState, req_net: &Crossbar<ReqMsg>, sm: usize, priority: Priority) -> usize {
    req_net.input_free(sm, priority) - st.staged_per_class[priority.class()]
}

impl SmPort<'_> {
    /// [`MemorySystem::offer`] from this port's SM (without translation).
    pub fn offer(&mut self, a: &MemAccess) -> Result<RequestId, Stall> {
        let r = self.try_issue(a);
        if r.is_err() {
            self.st.stalls += 1;
        }
        r
    }

    /// Counts a refusal of `a`, which this port's SM was refused with `stall`, by a memory
    /// system that would refuse it again the same way ([`IssueState::refuses_again`] of the
    /// state at the refusal): what that offer would count, without looking its lines up
    /// again. An SM whose LD/ST unit holds a refused access retries it every cycle, for its
    /// counters.
    ///
    /// Besides the SM's stall count, only a load refused at a cache's MSHRs (none free, or
    /// the merge limit) counts something: a reservation failure of the cache it reads.
    #[inline]
    pub fn repeat_refusal(&mut self, a: &MemAccess, stall: Stall) {
        let st = &mut *self.st;
        st.stalls += 1;
        if matches!(stall, Stall::MshrFull | Stall::MergeLimit) {
            if a.space == Space::Const && a.kind == AccessKind::Load {
                st.cc.record_reservation_fail();
            } else {
                st.l1.record_reservation_fail();
            }
        }
    }

    /// [`MemorySystem::issue_state`] of this port's SM.
    #[inline]
    pub fn issue_state(&self) -> IssueState {
        issue_state_of(self.st, self.req_net, self.sm, self.now)
    }

    /// [`MemorySystem::refuses_again`] of this port's SM.
    #[inline]
    pub fn refuses_again(&self, then: &IssueState, stall: Stall) -> bool {
        refuses_again_of(self.st, self.req_net, self.sm, self.now, then, stall)
    }

    /// [`MemorySystem::noc_requests`] of this port's SM.
    #[inline]
    pub fn noc_requests(&self) -> u64 {
        self.st.noc_requests
    }

    /// [`MemorySystem::pop_completed`] of this port's SM.
    #[inline]
    pub fn pop_completed(&mut self) -> Option<Completion> {
        self.st.completed.pop_front()
    }

    /// Whether completions wait to be popped ([`SmPort::pop_completed`]).
    #[inline]
    pub fn completions_waiting(&self) -> bool {
        !self.st.completed.is_empty()
    }

    fn try_issue(&mut self, a: &MemAccess) -> Result<RequestId, Stall> {
        let now = self.now;
        let st = &mut *self.st;
        if now < st.l1_free_at {
            return Err(Stall::L1Busy);
        }
        let Some(&slot) = st.free_slots.last() else {
            return Err(Stall::TooManyOutstanding);
        };
        self.check_lines(a)?;
        // Pass 2: apply.
        let sm = self.sm;
        let st = &mut *self.st;
        st.free_slots.pop();
        let id = st.next_id(sm);
        st.issued += 1;
        st.in_flight += 1;
        if a.lines.is_empty() {
            // No line: the port is still taken for the cycle.
            st.l1_free_at = now + 1;
            st.completed.push_back(Completion {
                id,
                tag: a.tag,
                issued: now,
                completed: now,
            });
            st.free_slots.push(slot);
            st.in_flight -= 1;
            st.done += 1;
            return Ok(id);
        }
        st.slots[slot as usize] = Some(AccessEntry {
            id,
            tag: a.tag,
            issued: now,
            pending: a.lines.len() as u32,
        });
        self.send_lines(slot, a);
        Ok(id)
    }

    /// Pass 1 of an access's L1 lookup: whether every missing line gets an MSHR (or
    /// merges) and the request network's input queue holds every packet, changing nothing
    /// but the refusal counters.
    #[inline(always)]
    fn check_lines(&mut self, a: &MemAccess) -> Result<(), Stall> {
        let st = &mut *self.st;
        let use_const = a.space == Space::Const && a.kind == AccessKind::Load;
        if st.l1_bypass && !use_const {
            // Every line a packet, no MSHR: only the request network can refuse.
            if a.lines.len() > input_room(self.st, self.req_net, self.sm, a.priority) {
                return Err(Stall::InterconnectFull);
            }
            return Ok(());
        }
        if let Some((v1, vc, c, stall)) = &st.refused {
            if a.kind == AccessKind::Load
                && *c == use_const
                && *v1 == st.l1.version()
                && *vc == st.cc.version()
                && st.refused_lines == a.lines
            {
                let cache = if use_const { &mut st.cc } else { &mut st.l1 };
                cache.record_reservation_fail();
                return Err(*stall);
            }
        }
        // Pass 1: check, changing nothing. A load is refused at the first line that finds
        // no MSHR (or its merge limit), or once its lines need more new MSHRs than are
        // free: either way the cache counts one reservation failure, and the refusal is
        // remembered for the retry.
        let mut new_mshrs = 0usize;
        let mut packets = 0usize;
        let cache_free = if use_const {
            st.cc.mshrs_free()
        } else {
            st.l1.mshrs_free()
        };
        st.probed.clear();
        let mut refusal = None;
        for l in &a.lines {
            match a.kind {
                AccessKind::Load => {
                    let cache = if use_const { &st.cc } else { &st.l1 };
                    let out = cache.probe_read(l.line_addr, l.sectors);
                    st.probed.push(out);
                    match out {
                        ReadOutcome::Hit => {}
                        ReadOutcome::Merged { fetch } => packets += usize::from(fetch != 0),
                        ReadOutcome::Allocated { .. } => {
                            new_mshrs += 1;
                            packets += 1;
                            if new_mshrs > cache_free {
                                refusal = Some(Stall::MshrFull);
                                break;
                            }
                        }
                        ReadOutcome::Fail(f) => {
                            refusal = Some(match f {
                                ReservationFail::MshrFull => Stall::MshrFull,
                                ReservationFail::MergeLimit => Stall::MergeLimit,
                            });
                            break;
                        }
                    }
                }
                AccessKind::Store | AccessKind::Atomic => packets += 1,
            }
        }
        if let Some(stall) = refusal {
            let cache = if use_const { &mut st.cc } else { &mut st.l1 };
            cache.record_reservation_fail();
            let versions = (st.l1.version(), st.cc.version());
            st.refused = Some((versions.0, versions.1, use_const, stall));
            st.refused_lines.clone_from(&a.lines);
            return Err(stall);
        }
        if packets > input_room(self.st, self.req_net, self.sm, a.priority) {
            return Err(Stall::InterconnectFull);
        }
        Ok(())
    }

    /// Pass 2 of an access's L1 lookup, for the access in slot `slot` (checked by
    /// [`SmPort::check_lines`]): the L1 port busy for its lines, hits queued, misses,
    /// stores and atomics sent into the request network.
    #[inline(always)]
    fn send_lines(&mut self, slot: u32, a: &MemAccess) {
        let (now, icnt_now, sm) = (self.now, self.icnt_now, self.sm);
        let use_const = a.space == Space::Const && a.kind == AccessKind::Load;
        let st = &mut *self.st;
        let n = a.lines.len() as u64;
        let per = u64::from(self.cfg.l1_lines_per_cycle);
        st.l1_free_at = now + n.div_ceil(per).max(1);
        for (j, l) in a.lines.iter().enumerate() {
            let loc = self.cfg.locate_in(l.line_addr, st.channels);
            let mut msg = ReqMsg {
                sm: sm as u32,
                slot,
                owner: a.owner,
                slice_addr: loc.slice_addr,
                line_addr: l.line_addr,
                sectors: l.sectors,
                kind: ReqKind::Read,
                fill: FillTarget::None,
                priority: a.priority,
            };
            let send = match a.kind {
                AccessKind::Load if st.l1_bypass && !use_const => {
                    // Straight to the L2; the reply completes the line without a fill.
                    true
                }
                AccessKind::Store if st.l1_bypass => {
                    msg.kind = ReqKind::Write;
                    true
                }
                AccessKind::Load => {
                    let (cache, target) = if use_const {
                        (&mut st.cc, FillTarget::Const)
                    } else {
                        (&mut st.l1, FillTarget::L1)
                    };
                    let out = cache.read_probed(l.line_addr, l.sectors, slot, st.probed[j]);
                    if out == ReadOutcome::Hit {
                        let ready = now + j as u64 / per + cache.spec().hit_latency.max(1);
                        if st.hits.try_send_at(ready, slot).is_err() {
                            unreachable!("hit queue sized for every outstanding line");
                        }
                    }
                    msg.fill = target;
                    msg.sectors = out.fetch();
                    out.fetch() != 0
                }
                AccessKind::Store => {
                    st.l1.write(l.line_addr, l.sectors);
                    msg.kind = ReqKind::Write;
                    true
                }
                AccessKind::Atomic => {
                    msg.kind = ReqKind::Atomic;
                    true
                }
            };
            if send {
                let data = if msg.kind == ReqKind::Read {
                    0
                } else {
                    msg.sectors.count_ones() * SECTOR_BYTES as u32
                };
                let pkt = Packet {
                    dest: loc.slice,
                    flits: self.cfg.icnt_request.flits(data),
                    priority: a.priority,
                    payload: msg,
                };
                // Staged: the network takes it before it next ticks, in SM order (space
                // checked in pass 1, counting what is staged).
                debug_assert!(input_room(st, self.req_net, sm, pkt.priority) > 0);
                st.staged_per_class[pkt.priority.class()] += 1;
                st.noc_requests += 1;
                add_to(
                    &mut st.request_flits_by_owner,
                    a.owner,
                    u64::from(pkt.flits),
                );
                st.staged.push((icnt_now + 1, pkt));
            }
        }
    }
}

impl MemorySystem {
    /// DRAM bytes (reads and write-backs) the accesses of `owner` ([`MemAccess::owner`])
    /// have caused so far: an L2 miss's fetch is charged to the request that missed, a
    /// dirty line's write-back to the request whose fill or write evicted it (a merged
    /// request costs nothing more). Counted when the DRAM request is made.
    pub fn dram_bytes(&self, owner: u32) -> u64 {
        self.dram_by_owner.get(owner as usize).copied().unwrap_or(0)
    }

    /// Interconnect flits the accesses of `owner` ([`MemAccess::owner`]) have moved so
    /// far: their request packets' (a store's or atomic's carry its data) and the replies'
    /// (a read's carry the sectors it fetched). What a request towards the L2 costs the
    /// NoC, which CCBP needs per kernel (papers/lin-thesis §4.5.3).
    pub fn noc_flits(&self, owner: u32) -> u64 {
        let o = owner as usize;
        self.reply_flits_by_owner.get(o).copied().unwrap_or(0)
            + self
                .sms
                .iter()
                .map(|st| st.request_flits_by_owner.get(o).copied().unwrap_or(0))
                .sum::<u64>()
    }

    /// Makes SM `sm`'s global and local accesses bypass its L1 data cache (`on`), or use it
    /// again: GPUDuet's third context store (papers/lin-thesis §3.6.4). Accesses already
    /// accepted finish as they started.
    pub fn set_l1_bypass(&mut self, sm: usize, on: bool) {
        if let Some(st) = self.sms.get_mut(sm) {
            st.l1_bypass = on;
            st.refused = None;
        }
    }

    /// Whether SM `sm` bypasses its L1 data cache ([`MemorySystem::set_l1_bypass`]).
    pub fn l1_bypassed(&self, sm: usize) -> bool {
        self.sms.get(sm).is_some_and(|st| st.l1_bypass)
    }

    /// Request packets SM `sm` has sent into the SM→L2 network so far: one per L1 miss
    /// that fetches, per store and per atomic line (papers/lin-thesis §4.5.1: CCBP's issue
    /// rate controllers count "how many L1D misses are sent to the L1-to-L2 NoC per time
    /// unit"). An access counts what it sends when the L1 accepts it.
    pub fn noc_requests(&self, sm: usize) -> u64 {
        self.sms[sm].noc_requests
    }

    /// Takes the oldest completed access of SM `sm`.
    pub fn pop_completed(&mut self, sm: usize) -> Option<Completion> {
        self.sms.get_mut(sm)?.completed.pop_front()
    }

    /// Completed accesses of SM `sm` not yet popped, oldest first.
    pub fn completed(&self, sm: usize) -> impl Iterator<Item = &Completion> + '_ {
        self.sms[sm].completed.iter()
    }

    /// True when no access is in flight and every queue is empty (completions not yet popped
    /// do not count).
    pub fn is_idle(&self) -> bool {
        self.sms.iter().all(|st| st.in_flight == 0)
            && self.req_net.is_idle()
            && self.reply_net.is_idle()
            && self.slices.iter().all(|s| {
                s.pipe.is_empty()
                    && s.replies.is_empty()
                    && s.to_dram.is_empty()
                    && s.fills.is_empty()
                    && s.cache.mshrs_in_use() == 0
            })
            && self.channels.iter().all(DramChannel::is_idle)
    }

    /// Jumps an idle memory system to the first core edge at or after `t_fs`: nothing is in
    /// flight, so the skipped edges would change nothing but the clocks (and the per-tick
    /// cycle counters of the DRAM channels and networks, which do not count skipped time).
    pub fn skip_idle_to(&mut self, t_fs: u64) {
        debug_assert!(self.is_idle(), "only an idle memory system skips time");
        self.clock.jump_to_core_edge(t_fs);
    }

    /// Ticks until [`MemorySystem::is_idle`] or `max_ticks` global steps; returns true when idle.
    pub fn run_until_idle(&mut self, max_ticks: u64) -> bool {
        for _ in 0..max_ticks {
            if self.is_idle() {
                return true;
            }
            self.tick();
        }
        self.is_idle()
    }

    /// Advances global time to the next clock edge and ticks the domains that have one, in the
    /// order core, interconnect, L2, DRAM. Returns the domains that ticked.
    pub fn tick(&mut self) -> DomainSet {
        self.merge_staged();
        let set = self.clock.advance();
        if set.contains(Domain::Core) {
            let now = self.clock.cycle(Domain::Core);
            for sm in 0..self.sms.len() {
                self.tick_sm(sm, now);
            }
            if self.shared_tlb.is_some() {
                self.start_translations(now);
            }
        }
        if set.contains(Domain::Icnt) {
            let now = self.clock.cycle(Domain::Icnt);
            self.req_net.tick(now);
            self.reply_net.tick(now);
        }
        if set.contains(Domain::L2) {
            let now = self.clock.cycle(Domain::L2);
            for s in 0..self.slices.len() {
                self.tick_slice(s, now);
            }
        }
        if set.contains(Domain::Dram) {
            let now = self.clock.cycle(Domain::Dram);
            for c in 0..self.channels.len() {
                self.tick_channel(c, now);
            }
        }
        set
    }

    fn line_done(&mut self, sm: usize, slot: u32, now: u64) {
        let st = &mut self.sms[sm];
        let e = st.slots[slot as usize].as_mut().expect("live access slot");
        e.pending -= 1;
        if e.pending == 0 {
            let e = st.slots[slot as usize].take().expect("live access slot");
            st.completed.push_back(Completion {
                id: e.id,
                tag: e.tag,
                issued: e.issued,
                completed: now,
            });
            st.free_slots.push(slot);
            st.in_flight -= 1;
            st.done += 1;
            st.total_latency += now - e.issued;
        }
    }

    fn tick_sm(&mut self, sm: usize, now: u64) {
        while let Some(slot) = self.sms[sm].hits.recv(now) {
            self.line_done(sm, slot, now);
        }
        let icnt_now = self.cycle(Domain::Icnt);
        for _ in 0..self.cfg.l1_fills_per_cycle {
            let Some(r) = self.reply_net.recv(icnt_now, sm) else {
                break;
            };
            let mut waiters = std::mem::take(&mut self.waiters);
            let st = &mut self.sms[sm];
            match r.fill {
                FillTarget::L1 => {
                    st.l1.fill(r.line_addr, r.sectors, &mut waiters);
                }
                FillTarget::Const => {
                    st.cc.fill(r.line_addr, r.sectors, &mut waiters);
                }
                FillTarget::None => waiters.push(r.slot),
            }
            for slot in waiters.drain(..) {
                self.line_done(sm, slot, now);
            }
            self.waiters = waiters;
        }
    }

    /// Queues slice `s`'s reply to `m` (with the sectors it asked for, when `data`), its
    /// flits charged to `m`'s owner ([`MemorySystem::noc_flits`]).
    fn push_reply(&mut self, s: usize, m: &ReqMsg, data: bool) {
        let bytes = if data {
            m.sectors.count_ones() * SECTOR_BYTES as u32
        } else {
            0
        };
        let p = Packet {
            dest: m.sm as usize,
            flits: self.cfg.icnt_reply.flits(bytes),
            priority: m.priority,
            payload: ReplyMsg {
                slot: m.slot,
                line_addr: m.line_addr,
                sectors: m.sectors,
                fill: m.fill,
            },
        };
        add_to(&mut self.reply_flits_by_owner, m.owner, u64::from(p.flits));
        self.slices[s].replies.push_back(p);
    }

    fn tick_slice(&mut self, s: usize, now: u64) {
        let icnt_now = self.cycle(Domain::Icnt);
        let dram_now = self.cycle(Domain::Dram);
        let reply_cap = self.cfg.l2_reply_queue;
        // 1. Replies into the reply network.
        while let Some(p) = self.slices[s].replies.front() {
            if !self.reply_net.can_inject(s, p.priority) {
                break;
            }
            let p = self.slices[s].replies.pop_front().expect("front");
            if self.reply_net.try_inject(icnt_now, s, p).is_err() {
                unreachable!("checked can_inject");
            }
        }
        // 2. One DRAM fill per cycle.
        let merge = self.cfg.l2.mshr_max_merge as usize;
        let sl = &self.slices[s];
        if sl.fills.peek(dram_now).is_some()
            && sl.replies.len() + merge <= reply_cap
            && !sl.to_dram.is_full()
        {
            let f = self.slices[s].fills.recv(dram_now).expect("peeked");
            let mut done = std::mem::take(&mut self.l2_waiters);
            let sl = &mut self.slices[s];
            if let Some(wb) = sl.cache.fill(f.slice_addr, f.sectors, &mut done) {
                // The write-back is charged to the request whose fill evicted the line.
                if let Some(first) = done.first() {
                    self.charge_dram(first.owner, wb.sectors);
                }
                let req = self.writeback(s, wb.line_addr, wb.sectors);
                self.slices[s]
                    .to_dram
                    .try_send(now, req)
                    .expect("space checked");
            }
            for m in done.drain(..) {
                if m.kind == ReqKind::Atomic {
                    self.slices[s].cache.mark_dirty(m.slice_addr, m.sectors);
                }
                self.push_reply(s, &m, true);
            }
            self.l2_waiters = done;
        }
        // 3. The head of the slice pipeline looks up the tags.
        if let Some(&m) = self.slices[s].pipe.peek(now) {
            let sl = &self.slices[s];
            let reply_room = sl.replies.len() < reply_cap;
            let dram_room = !sl.to_dram.is_full();
            let proceed = match m.kind {
                ReqKind::Read | ReqKind::Atomic => {
                    match sl.cache.probe_read(m.slice_addr, m.sectors) {
                        ReadOutcome::Hit => reply_room,
                        ReadOutcome::Merged { fetch: 0 } => true,
                        ReadOutcome::Merged { .. } | ReadOutcome::Allocated { .. } => dram_room,
                        ReadOutcome::Fail(_) => false,
                    }
                }
                ReqKind::Write => reply_room && dram_room,
            };
            if !proceed {
                self.slices[s].cache.record_reservation_fail();
            } else {
                self.slices[s].pipe.recv(now);
                match m.kind {
                    ReqKind::Read | ReqKind::Atomic => {
                        let out = self.slices[s].cache.read(m.slice_addr, m.sectors, m);
                        match out {
                            ReadOutcome::Hit => {
                                if m.kind == ReqKind::Atomic {
                                    self.slices[s].cache.mark_dirty(m.slice_addr, m.sectors);
                                }
                                self.push_reply(s, &m, true);
                            }
                            o => {
                                let fetch = o.fetch();
                                if fetch != 0 {
                                    self.charge_dram(m.owner, fetch);
                                    let req = DramRequest {
                                        local_addr: self.cfg.dram_addr_of(s, m.slice_addr),
                                        bytes: fetch.count_ones() * SECTOR_BYTES as u32,
                                        write: false,
                                        priority: m.priority,
                                        payload: DramTag {
                                            slice: s as u32,
                                            slice_addr: m.slice_addr,
                                            sectors: fetch,
                                        },
                                    };
                                    self.slices[s]
                                        .to_dram
                                        .try_send(now, req)
                                        .expect("space checked");
                                }
                            }
                        }
                    }
                    ReqKind::Write => {
                        let w = self.slices[s].cache.write(m.slice_addr, m.sectors);
                        // A write-through L2 (not a preset) forwards the write itself.
                        let forward = w.forward.then_some(crate::cache::Writeback {
                            line_addr: m.slice_addr,
                            sectors: m.sectors,
                        });
                        if let Some(wb) = w.writeback.or(forward) {
                            self.charge_dram(m.owner, wb.sectors);
                            let req = self.writeback(s, wb.line_addr, wb.sectors);
                            self.slices[s]
                                .to_dram
                                .try_send(now, req)
                                .expect("space checked");
                        }
                        self.push_reply(s, &m, false);
                    }
                }
            }
        }
        // 4. Accept one request from the request network.
        if !self.slices[s].pipe.is_full() {
            if let Some(m) = self.req_net.recv(icnt_now, s) {
                self.slices[s].pipe.try_send(now, m).expect("not full");
            }
        }
    }

    /// Counts `sectors` of DRAM traffic under `owner`.
    fn charge_dram(&mut self, owner: u32, sectors: u8) {
        let bytes = u64::from(sectors.count_ones()) * SECTOR_BYTES;
        add_to(&mut self.dram_by_owner, owner, bytes);
    }

    fn writeback(&self, s: usize, slice_addr: u64, sectors: u8) -> DramRequest<DramTag> {
        DramRequest {
            local_addr: self.cfg.dram_addr_of(s, slice_addr),
            bytes: sectors.count_ones() * SECTOR_BYTES as u32,
            write: true,
            priority: Priority::Normal,
            payload: DramTag {
                slice: s as u32,
                slice_addr,
                sectors,
            },
        }
    }

    fn tick_channel(&mut self, c: usize, now: u64) {
        let l2_now = self.cycle(Domain::L2);
        let spc = self.cfg.slices_per_channel();
        // Accept from the channel's slices, round-robin starting at a rotating slice.
        let mut accepted = true;
        let start = (now % spc as u64) as usize;
        while accepted && self.channels[c].can_accept() {
            accepted = false;
            for k in 0..spc {
                let s = c * spc
                    + if start + k < spc {
                        start + k
                    } else {
                        start + k - spc
                    };
                if !self.channels[c].can_accept() {
                    break;
                }
                if let Some(req) = self.slices[s].to_dram.recv(l2_now) {
                    self.channels[c].try_enqueue(req).expect("can_accept");
                    accepted = true;
                }
            }
        }
        self.channels[c].tick(now);
        while let Some(tag) = self.channels[c].pop_return(now) {
            self.slices[tag.slice as usize]
                .fills
                .try_send(now, tag)
                .expect("unbounded");
        }
    }

    /// A snapshot of every counter.
    pub fn stats(&self) -> MemStats {
        let mut s = MemStats {
            core_cycles: self.clock.cycle(Domain::Core),
            icnt_cycles: self.clock.cycle(Domain::Icnt),
            l2_cycles: self.clock.cycle(Domain::L2),
            dram_cycles: self.clock.cycle(Domain::Dram),
            accesses_issued: self.sms.iter().map(|st| st.issued).sum(),
            accesses_completed: self.sms.iter().map(|st| st.done).sum(),
            issue_stalls: self.stalls_no_sm + self.sms.iter().map(|st| st.stalls).sum::<u64>(),
            total_latency_core_cycles: self.sms.iter().map(|st| st.total_latency).sum(),
            icnt_request: self.req_net.stats().clone(),
            icnt_reply: self.reply_net.stats().clone(),
            ..MemStats::default()
        };
        for sm in &self.sms {
            s.l1.push(sm.l1.stats().clone());
            s.l1_total.add(sm.l1.stats());
            s.const_total.add(sm.cc.stats());
        }
        for sl in &self.slices {
            s.l2.push(sl.cache.stats().clone());
            s.l2_total.add(sl.cache.stats());
        }
        for ch in &self.channels {
            s.dram.push(ch.stats().clone());
            s.dram_total.add(ch.stats());
        }
        if let Some(l2) = &self.shared_tlb {
            let mut t = TranslationStats {
                l2_tlb: l2.stats(),
                walks: l2.walks().0,
                walk_queue_cycles: l2.walks().1,
                accesses: self.translated,
                translation_cycles: self.translation_cycles,
                stall_cycles: self.translation_stalls,
                faults: l2.faults().map(FarFaults::stats),
                ..TranslationStats::default()
            };
            for sm in &self.sms {
                if let Some(l1) = &sm.tlb {
                    t.l1_tlb.add(&l1.stats());
                }
            }
            s.translation = Some(t);
        }
        s
    }
}

/// Adds `n` to `v[owner]`, growing `v` as needed.
fn add_to(v: &mut Vec<u64>, owner: u32, n: u64) {
    let o = owner as usize;
    if v.len() <= o {
        v.resize(o + 1, 0);
    }
    v[o] += n;
}

#[cfg(test)]
mod issue_state_tests {
    use super::*;

    fn state() -> IssueState {
        IssueState {
            free_slots: 4,
            l1_version: 7,
            icnt_free: [3, 3],
            ..IssueState::default()
        }
    }

    /// A refusal repeats in another state exactly when `SmPort::try_issue`'s checks, in
    /// their order, would refuse the same way.
    #[test]
    fn refusals_repeat_as_the_checks_order_them() {
        let then = state();
        let drained = IssueState {
            icnt_free: [4, 3],
            ..then
        };
        let filled = IssueState {
            l1_version: 8,
            ..then
        };
        let fuller = IssueState {
            icnt_free: [2, 3],
            ..then
        };
        for stall in [Stall::MshrFull, Stall::MergeLimit, Stall::InterconnectFull] {
            assert!(then.refuses_again(&then, stall));
            assert!(
                !filled.refuses_again(&then, stall),
                "{stall:?}: the lines may fit"
            );
        }
        // The request network drained: only its own refusal may not repeat.
        assert!(drained.refuses_again(&then, Stall::MshrFull));
        assert!(!drained.refuses_again(&then, Stall::InterconnectFull));
        assert!(fuller.refuses_again(&then, Stall::InterconnectFull));
        // A busy L1 port refuses first, whatever else changed; once free, the rest decides.
        let busy = IssueState {
            l1_busy: true,
            ..filled
        };
        assert!(busy.refuses_again(&then, Stall::L1Busy));
        assert!(!filled.refuses_again(&busy, Stall::L1Busy));
        assert!(!busy.refuses_again(&then, Stall::MshrFull));
        // No access slot: refused before the lines are looked at.
        let full = IssueState {
            free_slots: 0,
            ..filled
        };
        assert!(full.refuses_again(&then, Stall::TooManyOutstanding));
        assert!(!then.refuses_again(&full, Stall::TooManyOutstanding));
        assert!(!full.refuses_again(&then, Stall::MshrFull));
        // With translation only an equal state repeats a refusal.
        let t = IssueState {
            translating: true,
            ..then
        };
        let t_drained = IssueState {
            icnt_free: [4, 3],
            ..t
        };
        assert!(t.refuses_again(&t, Stall::MshrFull));
        assert!(!t_drained.refuses_again(&t, Stall::MshrFull));
    }
}
