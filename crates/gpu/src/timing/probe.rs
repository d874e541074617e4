//! Observers of the machine (shared/STYLE.md, after Ramulator 2: plug-ins whose hooks do
//! nothing by default). A probe is told of every issued warp instruction, every memory
//! access the memory system accepts from an SM, what every warp scheduler did in every
//! cycle (an issue or one stall reason, the cycles a sleeping SM repeats included), and every
//! event the machine reports (each acknowledgement of the control protocol included), in the
//! order they happen. It only
//! reads: it cannot change the run, so a run with a probe attached gives the same results
//! as one without. With none attached the machine pays one branch per hook.

use std::any::Any;

use memsys::MemAccess;
use serde::Serialize;

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
    /// The lanes it runs for (the active mask of its SIMT stack entry).
    pub lanes: u32,
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
    /// The memory system accepted `access` (a warp's access, or a part of a split one, or a
    /// chunk of a context transfer) from `sm` at `cycle`.
    fn on_memory_request(&mut self, _sm: SmId, _access: &MemAccess, _cycle: u64) {}
    /// What each warp scheduler of `sm` did at `cycle`, in scheduler order (the counts
    /// [`super::SmStats::schedulers`] keep, cycle by cycle).
    fn on_scheduler_cycles(&mut self, _sm: SmId, _cycle: u64, _schedulers: &[SchedulerCycle]) {}
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
    /// Events and memory requests.
    pub const MEMORY: Interests = Interests(2);
    /// Events and every scheduler's cycles.
    pub const CYCLES: Interests = Interests(4);
    pub const ALL: Interests = Interests(7);

    pub fn and(self, other: Interests) -> Interests {
        Interests(self.0 | other.0)
    }

    fn has(self, other: Interests) -> bool {
        self.0 & other.0 == other.0
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

    fn on_scheduler_cycles(&mut self, _sm: SmId, cycle: u64, schedulers: &[SchedulerCycle]) {
        let k = (cycle / self.interval) as usize;
        if self.windows.len() <= k {
            self.windows.resize(k + 1, SchedulerStats::default());
        }
        for &c in schedulers {
            self.windows[k].count(c);
        }
    }
}

/// The probe a step of the machine reports to, if any, and what it wants to hear.
pub struct Watch<'a> {
    probe: Option<&'a mut (dyn Probe + 'static)>,
    interests: Interests,
}

impl<'a> Watch<'a> {
    pub(super) fn new(probe: Option<&'a mut (dyn Probe + 'static)>) -> Watch<'a> {
        let interests = probe.as_deref().map_or(Interests::EVENTS, Probe::interests);
        Watch { probe, interests }
    }

    #[inline]
    pub(super) fn issue(&mut self, issue: impl FnOnce() -> Issue) {
        if let Some(p) = self.probe.as_deref_mut() {
            if self.interests.has(Interests::ISSUES) {
                p.on_issue(&issue());
            }
        }
    }

    #[inline]
    pub(super) fn cycle(&mut self, sm: SmId, cycle: u64, schedulers: &[SchedulerCycle]) {
        if let Some(p) = self.probe.as_deref_mut() {
            if self.interests.has(Interests::CYCLES) {
                p.on_scheduler_cycles(sm, cycle, schedulers);
            }
        }
    }

    #[inline]
    pub(super) fn memory(&mut self, sm: SmId, access: &MemAccess, cycle: u64) {
        if let Some(p) = self.probe.as_deref_mut() {
            if self.interests.has(Interests::MEMORY) {
                p.on_memory_request(sm, access, cycle);
            }
        }
    }
}
