//! Observers of the machine (shared/STYLE.md, after Ramulator 2: plug-ins whose hooks do
//! nothing by default). A probe is told of every issued warp instruction, every memory
//! access the memory system accepts from an SM, every load whose data came back and every
//! shared-memory access, every SM's cycle (whether TBs are resident, how many warps, and
//! what every warp scheduler did: an issue or one stall reason, the cycles a sleeping SM
//! repeats included), and every event the machine reports (each acknowledgement of the
//! control protocol included), in the order they happen. It only reads: it cannot change
//! the run, so a run with a probe attached gives the same results as one without.
//!
//! The machine's own statistics are a probe too: [`super::Counters`], which the machine
//! always holds and calls through the same hooks, dispatched statically (so it costs what
//! the counters cost, nothing more); any other probe is attached beside it
//! ([`super::Machine::attach`]) and costs one branch per hook when it is absent.

use std::any::Any;

use memsys::MemAccess;
use serde::Serialize;

use super::counters::SmCounters;
use super::ids::{LaunchId, SmId, TbRef, WarpSlotId};
use super::machine::Event;
use super::stats::{SchedulerCycle, SchedulerStats};

/// A warp instruction as it issues.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Issue {
    pub cycle: u64,
    pub sm: SmId,
    pub launch: LaunchId,
    pub warp: WarpSlotId,
    /// The PC of the timed kernel it executes.
    pub pc: u32,
    /// The lanes it runs for (the active mask of its SIMT stack entry; its thread
    /// instructions are their count).
    pub lanes: u32,
}

/// Why an instruction replays.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplayReason {
    /// A part of its access faulted and was squashed; the fault has been serviced.
    Fault,
}

/// A memory instruction replayed (papers/tanasic-thesis §6.3; pipelines that replay,
/// `memsys::Pipeline::squashes`): it re-issued and re-sent the parts of its access that
/// faulted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Replay {
    pub cycle: u64,
    pub sm: SmId,
    pub launch: LaunchId,
    pub warp: WarpSlotId,
    /// The PC of the timed kernel it executes.
    pub pc: u32,
    /// Its place in its warp's instruction stream: the warp instructions the warp had
    /// issued before it (replays not counted).
    pub seq: u64,
    pub reason: ReplayReason,
}

/// One SM's cycle, as its warp schedulers end it.
#[derive(Clone, Copy, Debug)]
pub struct SmCycle<'a> {
    pub cycle: u64,
    pub sm: SmId,
    /// Whether a TB was resident (the SM's active cycles count these).
    pub active: bool,
    /// Warp slots held by resident TBs (0 when not `active`).
    pub resident_warps: u32,
    /// What each warp scheduler did, in scheduler order.
    pub schedulers: &'a [SchedulerCycle],
}

/// An observer of the machine. [`super::Machine::detach`] hands it back, and
/// [`downcast`](trait.Probe.html#method.downcast) gives back its own type.
pub trait Probe: Any {
    /// Which hooks it wants called (all by default). The machine skips the others: a probe
    /// that only reads events costs nothing per instruction.
    fn interests(&self) -> Interests {
        Interests::ALL
    }
    /// A warp instruction issued.
    fn on_issue(&mut self, _issue: &Issue) {}
    /// A memory instruction replayed (with [`Interests::ISSUES`]).
    fn on_replay(&mut self, _replay: &Replay) {}
    /// The memory system accepted `access` (a warp's access, or a part of a split one, or a
    /// chunk of a context transfer) from `sm` at `cycle`.
    fn on_memory_request(&mut self, _sm: SmId, _access: &MemAccess, _cycle: u64) {}
    /// A load or atomic part whose data a warp waited for came back to `sm` at `cycle`,
    /// `latency` core cycles after it was issued.
    fn on_load_done(&mut self, _sm: SmId, _launch: LaunchId, _latency: u64, _cycle: u64) {}
    /// A warp's shared-memory access on `sm` took `passes` bank-conflict passes.
    fn on_shared_access(&mut self, _sm: SmId, _launch: LaunchId, _passes: u32, _cycle: u64) {}
    /// An accepted access of `launch` (a warp's, a part of a split one, or a chunk of its
    /// context transfer) sent `n` request packets from `sm` towards the L2 at `cycle` (its
    /// L1 misses, stores, atomics).
    fn on_noc_requests(&mut self, _sm: SmId, _launch: LaunchId, _n: u64, _cycle: u64) {}
    /// An SM's cycle: residency and what each warp scheduler did (the counts
    /// [`super::SmStats`] keeps, cycle by cycle).
    fn on_sm_cycle(&mut self, _cycle: &SmCycle) {}
    /// The machine reported `event`.
    fn on_event(&mut self, _event: &Event) {}
}

/// The hooks a probe wants called beside [`Probe::on_event`] (always called).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interests(u8);

impl Interests {
    /// Events only.
    pub const EVENTS: Interests = Interests(0);
    /// Events and issued instructions.
    pub const ISSUES: Interests = Interests(1);
    /// Events and memory: requests accepted (and the interconnect requests they sent),
    /// loads' data back, shared-memory accesses.
    pub const MEMORY: Interests = Interests(2);
    /// Events and every SM's cycles.
    pub const CYCLES: Interests = Interests(4);
    pub const ALL: Interests = Interests(7);

    pub fn and(self, other: Interests) -> Interests {
        Interests(self.0 | other.0)
    }

    fn has(self, other: Interests) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether it hears anything an SM reports while it steps (not events only): the
    /// machine then steps SMs one after another so the probe hears them in SM order.
    pub fn hears_sms(self) -> bool {
        self.0 != 0
    }
}

impl dyn Probe {
    /// The probe as its own type, if it is a `T`.
    pub fn downcast<T: Probe>(self: Box<Self>) -> Option<Box<T>> {
        let any: Box<dyn Any> = self;
        any.downcast().ok()
    }
}

/// How a TB came to or left an SM.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Move {
    /// A new TB was placed.
    Dispatched,
    /// A stopped TB's context was installed.
    Restored,
    /// It finished.
    Finished,
    /// It was stopped and left with its context.
    Evicted,
    /// It was thrown away, to run again from its start.
    Discarded,
}

impl Move {
    /// Whether the TB arrived (else it left).
    pub fn arrives(self) -> bool {
        matches!(self, Move::Dispatched | Move::Restored)
    }
}

/// A TB arriving on or leaving an SM, at a core cycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Residency {
    pub cycle: u64,
    pub sm: SmId,
    pub tb: TbRef,
    pub how: Move,
}

/// A probe that logs every TB arriving on or leaving an SM, in order: what timelines (the
/// Chrome trace's SM tracks) and per-kernel times are built from.
#[derive(Debug, Default)]
pub struct ResidencyLog {
    pub moves: Vec<Residency>,
}

impl Probe for ResidencyLog {
    fn interests(&self) -> Interests {
        Interests::EVENTS
    }

    fn on_event(&mut self, event: &Event) {
        let (cycle, sm, tb, how) = match *event {
            Event::TbDispatched { cycle, sm, tb } => (cycle, sm, tb, Move::Dispatched),
            Event::TbRestored { cycle, sm, tb } => (cycle, sm, tb, Move::Restored),
            Event::TbFinished { cycle, sm, tb } => (cycle, sm, tb, Move::Finished),
            Event::TbEvicted {
                cycle,
                sm,
                ref context,
                ..
            } => (cycle, sm, context.tb, Move::Evicted),
            Event::TbDiscarded { cycle, sm, tb } => (cycle, sm, tb, Move::Discarded),
            _ => return,
        };
        self.moves.push(Residency { cycle, sm, tb, how });
    }
}

/// A probe that counts every warp scheduler's issues and stalls, summed over the GPU, per
/// window of `interval` core cycles (window `k` holds cycles `k × interval` to
/// `(k + 1) × interval - 1`): where the cycles went over time — around a preemption, say —
/// which a launch's [`super::TimedStats::schedulers`] gives only in total.
#[derive(Debug)]
pub struct StallTimeline {
    pub interval: u64,
    pub windows: Vec<SchedulerStats>,
}

impl StallTimeline {
    /// An empty timeline of windows of `interval` cycles (at least 1).
    pub fn new(interval: u64) -> StallTimeline {
        StallTimeline {
            interval: interval.max(1),
            windows: Vec::new(),
        }
    }

    /// The counts of the windows that hold cycles `from..=to` (exactly those cycles when
    /// windows are single cycles).
    pub fn between(&self, from: u64, to: u64) -> SchedulerStats {
        let mut total = SchedulerStats::default();
        let (from, to) = (from / self.interval, to / self.interval);
        for w in self
            .windows
            .iter()
            .take(to as usize + 1)
            .skip(from as usize)
        {
            total.add(w);
        }
        total
    }
}

impl Probe for StallTimeline {
    fn interests(&self) -> Interests {
        Interests::CYCLES
    }

    fn on_sm_cycle(&mut self, c: &SmCycle) {
        let k = (c.cycle / self.interval) as usize;
        if self.windows.len() <= k {
            self.windows.resize(k + 1, SchedulerStats::default());
        }
        for &s in c.schedulers {
            self.windows[k].count(s);
        }
    }
}

/// What one SM's part of a step reports to: the SM's own counters (the machine's
/// [`super::Counters`]), always, and the attached probe, if any, for the hooks it wants.
pub struct Watch<'a> {
    counters: SmCounters<'a>,
    probe: Option<&'a mut (dyn Probe + 'static)>,
    interests: Interests,
}

impl<'a> Watch<'a> {
    pub(super) fn new(
        counters: SmCounters<'a>,
        probe: Option<&'a mut (dyn Probe + 'static)>,
    ) -> Watch<'a> {
        let interests = probe.as_deref().map_or(Interests::EVENTS, Probe::interests);
        Watch {
            counters,
            probe,
            interests,
        }
    }

    #[inline]
    fn wants(&mut self, what: Interests) -> Option<&mut (dyn Probe + 'static)> {
        match self.probe.as_deref_mut() {
            Some(p) if self.interests.has(what) => Some(p),
            _ => None,
        }
    }

    #[inline]
    pub(super) fn issue(&mut self, issue: Issue) {
        self.counters.on_issue(&issue);
        if let Some(p) = self.wants(Interests::ISSUES) {
            p.on_issue(&issue);
        }
    }

    #[inline]
    pub(super) fn replay(&mut self, replay: Replay) {
        if let Some(p) = self.wants(Interests::ISSUES) {
            p.on_replay(&replay);
        }
    }

    /// The SM's cycle; `sleep` is the serial of the sleep it slept through it in
    /// ([`super::counters::Doze`]).
    #[inline(always)]
    pub(super) fn cycle(&mut self, cycle: SmCycle, sleep: Option<u64>) {
        self.counters.on_sm_cycle(&cycle, sleep);
        if let Some(p) = self.wants(Interests::CYCLES) {
            p.on_sm_cycle(&cycle);
        }
    }

    #[inline]
    pub(super) fn memory(&mut self, sm: SmId, access: &MemAccess, cycle: u64) {
        if let Some(p) = self.wants(Interests::MEMORY) {
            p.on_memory_request(sm, access, cycle);
        }
    }

    #[inline]
    pub(super) fn noc_requests(&mut self, sm: SmId, launch: LaunchId, n: u64, cycle: u64) {
        self.counters.on_noc_requests(launch, n);
        if let Some(p) = self.wants(Interests::MEMORY) {
            p.on_noc_requests(sm, launch, n, cycle);
        }
    }

    #[inline]
    pub(super) fn load_done(&mut self, sm: SmId, launch: LaunchId, latency: u64, cycle: u64) {
        self.counters.on_load_done(launch, latency);
        if let Some(p) = self.wants(Interests::MEMORY) {
            p.on_load_done(sm, launch, latency, cycle);
        }
    }

    #[inline]
    pub(super) fn shared_access(&mut self, sm: SmId, launch: LaunchId, passes: u32, cycle: u64) {
        self.counters.on_shared_access(launch, passes);
        if let Some(p) = self.wants(Interests::MEMORY) {
            p.on_shared_access(sm, launch, passes, cycle);
        }
    }
}
