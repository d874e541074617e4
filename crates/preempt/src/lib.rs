//! Preemption mechanisms: how an SM gives up the TBs it runs when the scheduling framework
//! reserves it for another kernel (papers/tanasic-thesis §5.2.2), separate from the policy
//! that decides when and for whom (DESIGN.md §1.1).
//!
//! * [`drain::Drain`]: nothing is taken away; the SM is free when its TBs finish.
//! * [`flush::Flush`]: TBs that can be re-executed harmlessly (strict or relaxed
//!   idempotence, papers/lin-lightweight §II-B) are thrown away at once and run again from
//!   their start; the others drain, and the mechanism says so.
//! * [`switch::Switch`]: the TBs stop at an instruction boundary, their in-flight work
//!   finishes, and a trap routine saves their context to a context area in device memory —
//!   every allocated register (BASELINE) or only the registers live at each warp's
//!   instruction (LIVE, SIMT-aware) — with the TB's shared memory, SIMT stacks and barrier
//!   state; restoring is symmetric. Saves and restores are real traffic through the SM's
//!   LD/ST unit, the L1, the interconnect, the L2 and DRAM at context priority
//!   ([`gpu::timing::Request::Transfer`]), and the TB's resources stay taken while its
//!   context moves.
//! * [`ctxback::RoutineSwitch`]: CTXBack, CTXBack+CS-Defer and CS-Defer (papers/ji-ctxback):
//!   the TBs stop at once and every warp saves its registers by running the dedicated
//!   preemption routine of its instruction — which may revert, or run on to a deferral
//!   point, before it saves — on the SM as ordinary timed instructions, into each thread's
//!   local memory; the resume routine reloads, re-executes and jumps back.
//! * [`chimera::Chimera`]: per TB, drain, flush or switch to meet a deadline; Chimera+dirty
//!   switches only the registers whose dirty bits are set (papers/li-pep §4).
//! * [`pep::Pep`]: PEP (papers/li-pep §3): at the host's launch call, a base checkpoint of
//!   the TBs predicted to be preempted while they run; at the request, an incremental one
//!   (in place for PEP+in-place).
//!
//! Every mechanism logs, per TB, when the request came, when the TB stopped, when its
//! resources were released and what its context cost ([`Record`]), and refuses honestly
//! what it cannot do ([`Record::Refused`]).

pub mod chimera;
pub mod ckpt;
pub mod compress;
pub mod ctxback;
pub mod drain;
pub mod flush;
pub mod kind;
pub mod pep;
pub mod switch;
pub mod want;

use std::sync::Arc;

use gpu::timing::{
    Direction, Event, HoldId, LaunchId, Machine, Pass, Request, SmId, TbContext, TbRef, Ticket,
    TimingError, TransferId,
};
use serde::{Deserialize, Serialize};

pub use chimera::{Chimera, Estimates, Technique};
pub use ckpt::{Ckpt, CKPT_EVERY};
pub use ctxback::{RoutineDesign, RoutineSwitch};
pub use drain::Drain;
pub use flush::Flush;
pub use kind::{MechanismKind, CHIMERA_DEADLINE_US, COMPRESSOR_LATENCY};
pub use pep::{Pep, PepCase, PepConfig, PEP_PREDICTED_LAUNCH_US};
pub use switch::{Compression, PointPass, RegisterCensus, Registers, Switch, SwitchConfig};
pub use want::Want;

/// What a mechanism may touch: the machine, and where it puts what it produces.
pub struct Cx<'a> {
    pub machine: &'a mut Machine,
    pub out: &'a mut Output,
}

/// What mechanisms hand back to the framework.
#[derive(Default)]
pub struct Output {
    /// TBs whose context is saved: they go to their kernel's PTBQ.
    pub preempted: Vec<Preempted>,
    /// What happened, for reports.
    pub records: Vec<Record>,
    /// TBs requests took ([`Cx::take`]), by SM: the framework follows them until they
    /// leave.
    pub taken: Vec<(SmId, TbRef)>,
}

/// A TB off its SM, waiting to be resumed by the mechanism that took it off.
#[derive(Debug)]
pub struct Preempted {
    pub context: Box<TbContext>,
    /// Where its context was saved, and how much of it.
    pub area: u64,
    pub bytes: ContextBytes,
}

/// The bytes a context moves, by part (DESIGN.md §6).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextBytes {
    pub registers: u64,
    pub shared: u64,
    /// SIMT stacks, warp barrier status and the TB's named-barrier counters.
    pub stack_barrier: u64,
    /// What the mechanism adds to describe the context (liveness or pattern vectors).
    pub metadata: u64,
}

impl ContextBytes {
    pub fn total(&self) -> u64 {
        self.registers + self.shared + self.stack_barrier + self.metadata
    }
}

/// How a TB gave up its SM.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum How {
    /// It finished.
    Drained,
    /// It was thrown away, losing this many warp instructions of work.
    Flushed { discarded_instructions: u64 },
    /// Its context was saved.
    Switched,
}

/// What a mechanism did (core cycles).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Record {
    /// The framework asked for `sm`, which then held `tbs` TBs.
    Requested { cycle: u64, sm: SmId, tbs: u32 },
    /// A TB gave up `sm`: asked at `requested`, stopped (its warps halted and its in-flight
    /// work done, or, draining, finished) at `stopped`, resources released at `released`.
    /// `moving` holds the spans during which its context was on its way to memory, each
    /// from the cycle a transfer could start (its data ready) to its last acknowledgement
    /// (several, before `stopped`, when warps are saved as they drain; none when nothing
    /// moved).
    Preempted {
        sm: SmId,
        tb: TbRef,
        how: How,
        requested: u64,
        stopped: u64,
        moving: Vec<(u64, u64)>,
        released: u64,
        bytes: ContextBytes,
        /// What its registers held and how they compressed (context switches).
        registers: RegisterCensus,
    },
    /// A TB's context was restored onto `sm` between `started` and `finished`.
    Restored {
        sm: SmId,
        tb: TbRef,
        started: u64,
        finished: u64,
        bytes: ContextBytes,
    },
    /// A mechanism that decides per TB chose `technique` for `tb` from `estimates`.
    Chose {
        cycle: u64,
        sm: SmId,
        tb: TbRef,
        technique: Technique,
        estimates: Estimates,
    },
    /// PEP wrote a base checkpoint of `tb` (papers/li-pep §3.3): the TB was asked to pause
    /// at `paused` and ran again (or left) once its `bytes` were written, at `written`.
    Checkpointed {
        sm: SmId,
        tb: TbRef,
        paused: u64,
        written: u64,
        bytes: ContextBytes,
    },
    /// PEP gave up `tb` as case `case` of papers/li-pep Figures 3–4.
    Case {
        cycle: u64,
        sm: SmId,
        tb: TbRef,
        case: PepCase,
    },
    /// CKPT rolled `tb` back to its latest checkpoint at a request, discarding the warp
    /// instructions its warps had executed since, which took `discarded_cycles` (from its
    /// run after the checkpoint was written to the request) and run again after the resume.
    RolledBack {
        cycle: u64,
        sm: SmId,
        tb: TbRef,
        discarded_instructions: u64,
        discarded_cycles: u64,
    },
    /// The mechanism could not take this TB away; it drains instead.
    Refused {
        cycle: u64,
        sm: SmId,
        tb: TbRef,
        why: String,
    },
}

/// A preemption mechanism.
///
/// **Contract.** The framework calls [`Mechanism::preempt`] once per request: when a policy
/// reserves an SM ([`Want::Sm`], naming the kernel the SM is reserved for: from then on the
/// SM driver issues no new TB there, and the SM is set up for that kernel once it is vacated
/// — no TB resident, no context transfer in flight, and every hold released or parked,
/// [`gpu::timing::Machine::vacated`]), or when it asks for room for some TBs of a kernel on
/// an SM that keeps running the rest ([`Want::Room`]: the SM driver issues no new TB of the
/// SM's other kernels there until the room is made or nothing is leaving any more,
/// [`gpu::timing::Machine::settled`]). The mechanism takes the TBs [`Cx::take`] gives it
/// for the request, and no other. The mechanism may stop TBs (with or without holding
/// their resources, reporting each warp as it drains or not), discard them, or let them
/// finish; it hears of the warps and TBs it stopped ([`Mechanism::warp_drained`],
/// [`Mechanism::evicted`]), of TBs that finished on reserved SMs ([`Mechanism::finished`]),
/// of its transfers ([`Mechanism::transfer_done`]) and of every SM set up for a kernel
/// ([`Mechanism::assigned`]). Each TB it takes off with its state saved goes to
/// [`Output::preempted`]; the framework queues it in its kernel's PTBQ and, when an SM runs
/// that kernel and the mechanism says the TB can resume there ([`Mechanism::can_resume`]),
/// calls [`Mechanism::resume`], which must eventually install it (the SM driver places no
/// other TB on that SM in the same cycle). A mechanism never changes a result: device memory
/// at the end of a run is bit-identical to the uninterrupted run's. It sees what hardware
/// would know (compiler tables, counters), never the future; it reports every TB it gave
/// up, how and at what cost ([`Record`]), and what it could not do ([`Record::Refused`]).
pub trait Mechanism {
    fn name(&self) -> String;
    /// The compiler pass every timed kernel must go through for this mechanism to work
    /// (preemption points with their liveness vectors, say), applied after register
    /// allocation when the machine is built; `None` (the default): the kernels as
    /// allocated. A mechanism that wraps another forwards its pass.
    fn kernel_pass(&self) -> Option<Pass> {
        None
    }
    /// The host called a launch that may preempt the kernels on `sms` once it reaches the
    /// GPU, a launch latency from now (papers/li-pep §3.3: `cudaLaunch` precedes the
    /// kernel's arrival); the mechanism may prepare. By default nothing.
    fn launch_called(&mut self, _sms: &[SmId], _cx: &mut Cx) -> Result<(), TimingError> {
        Ok(())
    }
    /// The framework wants `sm`, or room on it ([`Want`]).
    fn preempt(&mut self, sm: SmId, want: Want, cx: &mut Cx) -> Result<(), TimingError>;
    /// Whether preempted TB `tb` can be resumed on `sm` now (by default: when a whole TB of
    /// its kernel fits there).
    fn can_resume(&self, sm: SmId, tb: &Preempted, m: &Machine) -> bool {
        m.fits(sm, tb.context.tb.launch)
    }
    /// `sm` was set up for `launch` (`None`: left idle).
    fn assigned(
        &mut self,
        _sm: SmId,
        _launch: Option<LaunchId>,
        _cx: &mut Cx,
    ) -> Result<(), TimingError> {
        Ok(())
    }
    /// A TB this mechanism stopped left `sm`.
    fn evicted(
        &mut self,
        sm: SmId,
        context: Box<TbContext>,
        hold: Option<HoldId>,
        cx: &mut Cx,
    ) -> Result<(), TimingError>;
    /// Warp `warp` of `tb`, stopped with per-warp reports ([`gpu::timing::WarpReports::EachWarp`]), drained on `sm`.
    fn warp_drained(
        &mut self,
        _sm: SmId,
        _tb: TbRef,
        _warp: u32,
        _cx: &mut Cx,
    ) -> Result<(), TimingError> {
        Ok(())
    }
    /// A TB finished on `sm` at `cycle` (only reported while a request for `sm` is open).
    fn finished(&mut self, _sm: SmId, _tb: TbRef, _cycle: u64, _cx: &mut Cx) {}
    /// A transfer this mechanism started completed.
    fn transfer_done(
        &mut self,
        _sm: SmId,
        _id: TransferId,
        _cx: &mut Cx,
    ) -> Result<(), TimingError> {
        Ok(())
    }
    /// Brings `tb` back on `sm`, which has room for it.
    fn resume(&mut self, sm: SmId, tb: Preempted, cx: &mut Cx) -> Result<(), TimingError>;
    /// Any other acknowledgement of a request this mechanism made (a TB stopped in place, a
    /// routine done, a checkpoint written, a rollback, a warp held or released, a TB
    /// resumed); by default none is expected, and one is an error.
    fn acknowledged(&mut self, event: Event, _cx: &mut Cx) -> Result<(), TimingError> {
        Err(TimingError::Mechanism(format!(
            "{} was told of {event:?}, which it never asks for",
            self.name()
        )))
    }
}

impl Cx<'_> {
    /// Makes a request of the machine (its refusal is an error of the mechanism's run).
    pub fn ask(&mut self, request: Request) -> Result<Ticket, TimingError> {
        Ok(self.machine.request(request)?)
    }

    /// Moves `bytes` context bytes of `launch` between `sm` and device memory at `base`,
    /// none before core cycle `not_before` ([`Request::Transfer`]); the transfer's id.
    pub fn transfer(
        &mut self,
        sm: SmId,
        direction: Direction,
        base: u64,
        bytes: u64,
        launch: LaunchId,
        not_before: u64,
    ) -> Result<TransferId, TimingError> {
        let ticket = self.ask(Request::Transfer {
            sm,
            direction,
            base,
            bytes,
            launch,
            not_before,
        })?;
        Ok(ticket.transfer().expect("a transfer's ticket names it"))
    }

    /// The TBs on `sm` a request takes ([`want::victims`]: for the whole SM, every TB still
    /// running, not stopping or stopped); records the request.
    pub fn take(&mut self, sm: SmId, want: &Want) -> Vec<TbRef> {
        let tbs = want::victims(self.machine, sm, want);
        self.out.taken.extend(tbs.iter().map(|&tb| (sm, tb)));
        self.out.records.push(Record::Requested {
            cycle: self.machine.cycle(),
            sm,
            tbs: tbs.len() as u32,
        });
        tbs
    }
}

impl Record {
    /// TB `tb`, asked for at `requested`, drained: it finished on `sm` at `cycle`.
    pub fn drained(sm: SmId, tb: TbRef, requested: u64, cycle: u64) -> Record {
        Record::Preempted {
            sm,
            tb,
            how: How::Drained,
            requested,
            stopped: cycle,
            moving: Vec::new(),
            released: cycle,
            bytes: ContextBytes::default(),
            registers: RegisterCensus::default(),
        }
    }
}

/// Per SM, the TBs a request is waiting for and when it came.
#[derive(Default)]
pub(crate) struct Requests {
    /// (sm, tb, requested cycle).
    waiting: Vec<(SmId, TbRef, u64)>,
}

impl Requests {
    pub(crate) fn add(&mut self, sm: SmId, tb: TbRef, cycle: u64) {
        self.waiting.push((sm, tb, cycle));
    }

    /// Removes and returns when `tb`'s request came, if it is waiting.
    pub(crate) fn take(&mut self, sm: SmId, tb: TbRef) -> Option<u64> {
        let i = self
            .waiting
            .iter()
            .position(|&(s, t, _)| s == sm && t == tb)?;
        Some(self.waiting.remove(i).2)
    }
}

/// The preemption-point pass with the paper's parameters.
pub fn points_pass() -> Pass {
    Pass(Arc::new(PointPass {
        config: Default::default(),
    }))
}
