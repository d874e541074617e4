//! The control protocol of the machine: every change to what runs where — placing, stopping,
//! resuming, evicting and discarding TBs, holding and parking their resources, moving context
//! bytes, sending a warp through a routine, checkpointing and rolling back — is a [`Request`]
//! to [`super::Machine::request`], answered at once with a [`Ticket`] (or refused with the
//! request handed back, [`Refused`]) and acknowledged by an [`super::Event`] when the work is
//! done (Akita's pause / drain / flush protocol is the model, shared/STYLE.md).
//!
//! **States.** A resident TB is in one [`TbControl`] state and each of its warps in one
//! [`WarpControl`] state; a TB that is not resident but still has resources on an SM is a
//! hold in one [`HoldState`]. Which request is legal in which state is the table in
//! ARCHITECTURE.md ("The control protocol"); every other combination is refused with
//! [`ControlError::Illegal`], which names the request, the TB or hold and its state.
//!
//! The SM derives everything its issue stage reads of a warp (the compact `WarpHot`
//! mirror, the schedulers' views, whether it may sleep) from these states through one
//! function after every change, so no request needs to know what to invalidate.

use serde::Serialize;

use super::context::TbContext;
use super::ids::{CheckpointId, HoldId, LaunchId, SmId, TbRef, TransferId};
use super::ledger::KernelLimits;
use crate::barrier::{Barriers, WarpStatus};
use crate::exec::StackEntry;

/// Where a stopped TB's warps halt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum StopAt {
    /// At once: no warp of the TB issues another instruction.
    Boundary,
    /// Each warp runs on until it has executed a preemption point (`pp`, or a `bar.pp`
    /// where it then waits) or finishes; a warp waiting at any barrier stops there too
    /// (warps halted at points could never release it). A kernel without preemption points
    /// or barriers therefore stops only when its warps finish (draining, as
    /// papers/lin-lightweight §IV-A notes).
    PreemptionPoint,
    /// As [`StopAt::PreemptionPoint`], but a warp whose next instruction follows a `pp` has
    /// just executed it (branches into the instruction after a `pp` target the `pp`), so it
    /// stands at the point and halts at once instead of running on to its next one (CKPT's
    /// checkpoint places: a checkpoint falls due as a warp enters a block, often through the
    /// block's own `pp`, papers/ji-ctxback §V).
    AtPoint,
}

impl StopAt {
    /// Whether warps run on to a preemption point.
    pub fn at_points(self) -> bool {
        matches!(self, StopAt::PreemptionPoint | StopAt::AtPoint)
    }
}

/// What happens to a TB once its stop is complete (every warp halted or finished, every
/// access it issued complete).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum AfterStop {
    /// It leaves the SM as a [`TbContext`] and its resources go back
    /// ([`super::Event::TbEvicted`] without a hold).
    Leave,
    /// It leaves the SM, but its resources stay taken under a hold until released (a
    /// context save in progress occupies the registers and shared memory it reads).
    LeaveHolding,
    /// It stays resident with every warp halted ([`TbControl::Stopped`],
    /// [`super::Event::TbStopped`]), for routines, a checkpoint, a rollback, an eviction or
    /// a resume.
    Stay,
}

/// Whether a stop reports each warp as it drains.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum WarpReports {
    /// Only the TB's acknowledgement.
    None,
    /// [`super::Event::WarpDrained`] for every warp once it has halted and its issued
    /// instructions have finished, so a save pipeline can start on it before the whole TB
    /// has stopped (papers/lin-lightweight §IV-C).
    EachWarp,
}

/// What a parked hold keeps on its SM (in-place context switching, papers/lin-lightweight
/// §III-A).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Keep {
    Registers,
    SharedMemory,
    Both,
}

impl Keep {
    /// The parts kept, if any (`None` when neither is).
    pub fn of(registers: bool, shared_memory: bool) -> Option<Keep> {
        match (registers, shared_memory) {
            (true, true) => Some(Keep::Both),
            (true, false) => Some(Keep::Registers),
            (false, true) => Some(Keep::SharedMemory),
            (false, false) => None,
        }
    }

    pub fn registers(self) -> bool {
        matches!(self, Keep::Registers | Keep::Both)
    }

    pub fn shared_memory(self) -> bool {
        matches!(self, Keep::SharedMemory | Keep::Both)
    }
}

/// Which way context bytes move.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Direction {
    /// From the SM to device memory (stores).
    Save,
    /// From device memory to the SM (loads).
    Restore,
}

/// How an installed TB starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Start {
    /// Its warps issue at once.
    Running,
    /// Every warp halted ([`TbControl::Stopped`]): resume routines run first, then
    /// [`Request::Resume`].
    Stopped,
}

/// Where a routine ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum RoutineEnd {
    /// When its lanes have executed `exit` (a preemption routine, papers/ji-ctxback §IV-A).
    Exit,
    /// When its lanes reach this PC of the kernel (a resume routine's final jump and the
    /// instructions it re-executes on the way, §III-B's `JUMP`).
    Reach(u32),
}

/// Code a halted warp runs as ordinary timed instructions, under a lane mask, before it goes
/// back to where it was (papers/ji-ctxback §IV-A: dedicated preemption and resume routines).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Routine {
    /// The routine's first instruction (a PC of the timed kernel, normally past the
    /// kernel's own code).
    pub entry: u32,
    /// The lanes that run it: a subset of the warp's lanes that have not exited.
    pub lanes: u32,
    pub end: RoutineEnd,
}

/// How much of a TB a checkpoint captures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Scope {
    /// Every register of every warp, the shared memory, the SIMT stacks and barrier state.
    Full,
    /// Only what changed since the TB's last checkpoint (for its first, since it was
    /// placed): registers written since (their dirty bits, set at writeback, papers/li-pep
    /// §3.1), the shared memory if it was stored to since (always at the first), and the
    /// SIMT stacks and barrier state (always).
    Dirty,
    /// The registers live at each warp's PCs (the union over its SIMT stack entries with
    /// lanes; a register dead there is never read before it is written again), the shared
    /// memory under [`Scope::Dirty`]'s rule, and the SIMT stacks and barrier state: CKPT's
    /// checkpoint of the live registers (papers/ji-ctxback §V). A rollback to it alone is
    /// complete whenever it holds the shared memory.
    Live,
}

/// A request to the machine. The ticket comes back at once; the acknowledgement comes as
/// an event when the work is done (named per variant).
#[derive(Debug)]
pub enum Request {
    /// Place the next new TB of `launch` on `sm` ([`super::Event::TbDispatched`]).
    Dispatch { sm: SmId, launch: LaunchId },
    /// Place a stopped TB's context on `sm`, into the resources of hold `into` when given
    /// (it must be restoring there) ([`super::Event::TbRestored`]).
    Install {
        sm: SmId,
        context: Box<TbContext>,
        into: Option<HoldId>,
        start: Start,
    },
    /// Stop TB `tb`: its warps halt `at`, what they issued finishes, and `then` happens
    /// ([`super::Event::TbEvicted`] or [`super::Event::TbStopped`]; a TB that finishes
    /// first reports [`super::Event::TbFinished`] instead).
    Stop {
        sm: SmId,
        tb: TbRef,
        at: StopAt,
        then: AfterStop,
        reports: WarpReports,
    },
    /// A stopped TB's halted warps issue again ([`super::Event::TbResumed`]).
    Resume { sm: SmId, tb: TbRef },
    /// A stopped TB leaves its SM, its resources given back or held
    /// ([`super::Event::TbEvicted`]).
    Evict {
        sm: SmId,
        tb: TbRef,
        then: AfterStop,
    },
    /// Throw `tb` away at once; its launch runs it again from its start, before any new TB
    /// (flushing: the caller decides re-execution is harmless) ([`super::Event::TbDiscarded`]).
    Discard { sm: SmId, tb: TbRef },
    /// Take on `sm` the resources one TB of `launch` needs, for a context to be installed
    /// there ([`super::Event::HoldTaken`]).
    Hold { sm: SmId, launch: LaunchId },
    /// Give a hold's resources back ([`super::Event::HoldReleased`]).
    Release { sm: SmId, hold: HoldId },
    /// Park a saving hold: keep `keep` on the SM and give back the rest, its TB and warp
    /// slots included ([`super::Event::HoldParked`]).
    Park { sm: SmId, hold: HoldId, keep: Keep },
    /// Take back what a parked hold gave up; it is then restoring
    /// ([`super::Event::HoldUnparked`]).
    Unpark { sm: SmId, hold: HoldId },
    /// Move `bytes` bytes between the SM and device memory at `base` as line-sized accesses
    /// at context priority through the SM's LD/ST unit in cycles no warp uses it, none
    /// before core cycle `not_before`; only the traffic is simulated
    /// ([`super::Event::TransferDone`]). Transfers of an SM go in order.
    Transfer {
        sm: SmId,
        direction: Direction,
        base: u64,
        bytes: u64,
        launch: LaunchId,
        not_before: u64,
    },
    /// Warp `warp` (its index in the TB) of a stopping or stopped TB, halted, runs
    /// `routine`, then goes back to where it was, halted ([`super::Event::RoutineDone`]).
    Routine {
        sm: SmId,
        tb: TbRef,
        warp: u32,
        routine: Routine,
    },
    /// Warp `warp` of a running TB issues nothing until released; what it issued finishes
    /// ([`super::Event::WarpHeld`]).
    HoldWarp { sm: SmId, tb: TbRef, warp: u32 },
    /// A held warp issues again ([`super::Event::WarpReleased`]).
    ReleaseWarp { sm: SmId, tb: TbRef, warp: u32 },
    /// Capture TB `tb` as it stands, while it keeps running, and write the captured bytes
    /// to device memory at `base` as context traffic ([`super::Event::CheckpointDone`]
    /// carries the checkpoint once its bytes are in memory).
    Checkpoint {
        sm: SmId,
        tb: TbRef,
        scope: Scope,
        base: u64,
    },
    /// From now on, `launch` may hold on `sm` at most what `limits` say, and issue at most
    /// its quota of warp instructions per epoch (several kernels co-resident on one SM under
    /// quotas, papers/lin-thesis ch. 4); what it holds already stays
    /// ([`super::Event::LimitsSet`]).
    Limit {
        sm: SmId,
        launch: LaunchId,
        limits: KernelLimits,
    },
    /// From now on, every TB of `launch` on `sm` counts how often each of its warps enters
    /// each basic block, and the machine raises [`super::Event::CheckpointDue`] for the TB
    /// when a warp has entered one block `every` times since the TB's last checkpoint (or
    /// its placement): CKPT's interval, papers/ji-ctxback §V. 0 stops the counting
    /// ([`super::Event::BlockCountSet`]).
    CountBlocks {
        sm: SmId,
        launch: LaunchId,
        every: u32,
    },
    /// Put a stopped TB back in the state of its checkpoints, applied in order (a full or
    /// live one, then dirty or live ones after it); the last must be the TB's latest, and the TB must not
    /// have issued a store or atomic to global or local memory since it, or re-executing
    /// would not be harmless ([`super::Event::TbRolledBack`]). Registers no checkpoint of
    /// the chain holds read garbage; the caller moves the bytes ([`Request::Transfer`]).
    Rollback {
        sm: SmId,
        tb: TbRef,
        chain: Vec<TbCheckpoint>,
    },
}

impl Request {
    /// The request's name, as the state table and errors spell it.
    pub fn name(&self) -> &'static str {
        match self {
            Request::Dispatch { .. } => "dispatch",
            Request::Install { .. } => "install",
            Request::Stop { .. } => "stop",
            Request::Resume { .. } => "resume",
            Request::Evict { .. } => "evict",
            Request::Discard { .. } => "discard",
            Request::Hold { .. } => "hold",
            Request::Release { .. } => "release",
            Request::Park { .. } => "park",
            Request::Unpark { .. } => "unpark",
            Request::Transfer { .. } => "transfer",
            Request::Routine { .. } => "routine",
            Request::HoldWarp { .. } => "hold-warp",
            Request::ReleaseWarp { .. } => "release-warp",
            Request::Checkpoint { .. } => "checkpoint",
            Request::Rollback { .. } => "rollback",
            Request::Limit { .. } => "limit",
            Request::CountBlocks { .. } => "count-blocks",
        }
    }

    /// The SM the request is for.
    pub fn sm(&self) -> SmId {
        match *self {
            Request::Dispatch { sm, .. }
            | Request::Install { sm, .. }
            | Request::Stop { sm, .. }
            | Request::Resume { sm, .. }
            | Request::Evict { sm, .. }
            | Request::Discard { sm, .. }
            | Request::Hold { sm, .. }
            | Request::Release { sm, .. }
            | Request::Park { sm, .. }
            | Request::Unpark { sm, .. }
            | Request::Transfer { sm, .. }
            | Request::Routine { sm, .. }
            | Request::HoldWarp { sm, .. }
            | Request::ReleaseWarp { sm, .. }
            | Request::Checkpoint { sm, .. }
            | Request::Rollback { sm, .. }
            | Request::Limit { sm, .. }
            | Request::CountBlocks { sm, .. } => sm,
        }
    }
}

/// The immediate answer to an accepted request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ticket {
    /// The TB concerned (a dispatch names the new TB).
    Tb(TbRef),
    Hold(HoldId),
    Transfer(TransferId),
    Checkpoint(CheckpointId),
    /// The launch whose limits were set.
    Launch(LaunchId),
}

impl Ticket {
    /// The TB of a dispatch (or of any TB request).
    pub fn tb(self) -> Option<TbRef> {
        match self {
            Ticket::Tb(t) => Some(t),
            _ => None,
        }
    }

    pub fn hold(self) -> Option<HoldId> {
        match self {
            Ticket::Hold(h) => Some(h),
            _ => None,
        }
    }

    pub fn transfer(self) -> Option<TransferId> {
        match self {
            Ticket::Transfer(t) => Some(t),
            _ => None,
        }
    }

    pub fn checkpoint(self) -> Option<CheckpointId> {
        match self {
            Ticket::Checkpoint(c) => Some(c),
            _ => None,
        }
    }
}

/// A refused request: why, and the request itself, handed back untouched (a context it
/// carried is not lost).
#[derive(Debug, thiserror::Error)]
#[error("{error}")]
pub struct Refused {
    pub error: ControlError,
    pub request: Box<Request>,
}

/// Why a request was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ControlError {
    #[error("{tb} is not resident on {sm}")]
    NotResident { sm: SmId, tb: TbRef },
    #[error("{tb} does not fit on {sm} now")]
    NoRoom { sm: SmId, tb: TbRef },
    #[error("{tb} belongs to a launch that has finished or was never submitted")]
    UnknownLaunch { tb: TbRef },
    #[error("no SM {sm}")]
    NoSuchSm { sm: SmId },
    #[error("{sm} has no {hold}")]
    NoHold { sm: SmId, hold: HoldId },
    #[error("{hold} on {sm}: what it gave up does not fit now")]
    CannotUnpark { sm: SmId, hold: HoldId },
    #[error("{tb} has no warp {warp}")]
    NoWarp { tb: TbRef, warp: u32 },
    /// The request is not legal in the state of its TB, warp or hold (the protocol's table).
    #[error("`{request}` is not legal for {what} while it is {state}")]
    Illegal {
        request: &'static str,
        what: String,
        state: String,
    },
    /// A routine that cannot run: an entry outside the kernel, or lanes the warp does not
    /// have.
    #[error("{tb} warp {warp}: {why}")]
    BadRoutine { tb: TbRef, warp: u32, why: String },
    /// A rollback whose re-execution would not be harmless, or whose checkpoints do not
    /// make a chain ending at the TB's latest.
    #[error("cannot roll {tb} back: {why}")]
    NoRollback { tb: TbRef, why: String },
}

/// The control state of a resident TB.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum TbControl {
    /// Its warps issue (some may be held).
    Running,
    /// Asked to stop: warps halt `at`; once everything issued has finished, `then`.
    Stopping {
        at: StopAt,
        then: AfterStop,
        reports: WarpReports,
    },
    /// Resident with every warp halted, held or finished, nothing in flight but routines.
    Stopped,
}

impl TbControl {
    pub fn name(&self) -> &'static str {
        match self {
            TbControl::Running => "running",
            TbControl::Stopping { .. } => "stopping",
            TbControl::Stopped => "stopped",
        }
    }
}

/// The control state of a resident warp (its progress — ready, at a barrier, finished — is
/// [`WarpStatus`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WarpControl {
    /// It issues when the scheduler picks it.
    Running,
    /// Halted by its TB's stop request; issues nothing.
    Halted,
    /// Halted, to be reported once drained ([`WarpReports::EachWarp`]).
    HaltedReporting,
    /// Running a routine; its own SIMT stack, exited lanes and barrier status are put
    /// aside until the routine's code ends.
    InRoutine(Box<RoutineRun>),
    /// The routine's code has ended and the warp is back where it was; the acknowledgement
    /// waits for the routine's accesses to complete.
    RoutineDraining,
    /// Held by [`Request::HoldWarp`] (a faulting instruction waits, papers/tanasic-thesis
    /// §6.3); issues nothing until released.
    Held,
}

impl WarpControl {
    pub fn name(&self) -> &'static str {
        match self {
            WarpControl::Running => "running",
            WarpControl::Halted | WarpControl::HaltedReporting => "halted",
            WarpControl::InRoutine(_) => "in a routine",
            WarpControl::RoutineDraining => "finishing a routine",
            WarpControl::Held => "held",
        }
    }

    /// Whether the warp is halted by its TB (reporting or not).
    pub fn halted(&self) -> bool {
        matches!(self, WarpControl::Halted | WarpControl::HaltedReporting)
    }
}

/// A routine in progress and what the warp put aside for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoutineRun {
    pub routine: Routine,
    pub stack: Vec<StackEntry>,
    pub exited: u32,
    pub status: WarpStatus,
}

/// The state of a hold: resources an SM keeps for a TB that is not resident.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum HoldState {
    /// Left by a TB stopped with [`AfterStop::LeaveHolding`]: its context is being saved.
    Saving,
    /// Taken by [`Request::Hold`] or [`Request::Unpark`]: a context is being restored into
    /// it.
    Restoring,
    /// Parked: only the registers and/or shared memory of `keep` stay on the SM.
    Parked { keep: Keep },
}

impl HoldState {
    pub fn name(&self) -> &'static str {
        match self {
            HoldState::Saving => "saving",
            HoldState::Restoring => "restoring",
            HoldState::Parked { .. } => "parked",
        }
    }
}

/// The state of one warp as a checkpoint captured it.
#[derive(Clone, Debug)]
pub struct WarpCheckpoint {
    pub stack: Vec<StackEntry>,
    pub exited: u32,
    pub status: WarpStatus,
    pub executed: u64,
    pub thread_executed: u64,
    /// The registers captured (indices into the kernel's registers), each with its 32 lane
    /// values in `values` (`values[k * 32 + lane]` for the `k`-th register captured).
    pub registers: Vec<u32>,
    pub values: Vec<u64>,
}

/// A TB as a checkpoint captured it ([`Request::Checkpoint`]).
#[derive(Clone, Debug)]
pub struct TbCheckpoint {
    pub id: CheckpointId,
    pub tb: TbRef,
    pub scope: Scope,
    /// The core cycle it was taken.
    pub taken_at: u64,
    /// In warp order.
    pub warps: Vec<WarpCheckpoint>,
    /// The TB's shared memory, when captured.
    pub shared: Option<Vec<u8>>,
    pub barriers: Barriers,
    /// The bytes it wrote to device memory.
    pub bytes: u64,
}
