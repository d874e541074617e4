//! The cycle-level timing model: a persistent [`Machine`] of SMs with warp schedulers, a
//! scoreboard and functional units, driving the memory-hierarchy model of the `memsys`
//! crate, holding the launches of any number of programs at once (DESIGN.md §2, "Timing
//! model").
//!
//! Values stay real: an instruction executes functionally ([`crate::exec::step`]) at the
//! cycle it issues, so results are those of the functional core and the timing model only
//! decides the order and the cycle of each issue (DESIGN.md §1.2). Atomics therefore happen
//! in timing order, which may differ from the functional driver's order. Global writes
//! (stores, atomics) take effect at the end of their cycle, SM by SM in index order, so
//! every result is the same however many threads step the SMs (`machine`, ARCHITECTURE.md
//! "Memory visibility").
//!
//! * [`machine`]: the [`Machine`] (SMs, memory system, device memory, clock, launches), its
//!   [`Control`] hook and its [`Event`]s; one cycle's order is documented there.
//! * [`control`]: the control protocol — [`Request`]s, their [`Ticket`]s and refusals, and
//!   the states of TBs, warps and holds they move between; `request` carries it out.
//! * [`probe`]: observers told of every issue, memory request and event ([`Probe`]).
//! * [`backend`]: the memory hierarchy as the SMs see it ([`MemoryBackend`]); the full
//!   `memsys` model, or a fixed latency for tests of SMs alone.
//! * [`crate::harness`]: one SM over a fixed-latency memory, for tests that assert events
//!   and the cycles between them.
//! * [`ledger`]: an SM's resources ([`SmLedger`]), shared by the TBs of any launches.
//! * [`context`]: a stopped TB's captured state ([`TbContext`]), the primitive of every
//!   preemption mechanism.
//! * [`crate::pipeline`] (also `spec`): the pipeline description (operation classes,
//!   latencies, intervals, units), part of the GPU configuration.
//! * [`scheduler`]: the [`WarpScheduler`] trait and LRR, GTO and two-level policies.
//! * [`stats`]: [`TimedStats`], per-scheduler stall reasons.
//! * `sm`: one SM, as sub-components that own their state (residency, front end, issue,
//!   load-store unit, retirement, control, checkpoints).
//!
//! **The timed kernel** is, by default, the kernel after register allocation
//! ([`TimedKernel::allocated`], the `regalloc` crate): registers per thread for occupancy,
//! register-bank conflicts and context sizes are those of physical registers, and spill code
//! (`st.local`/`ld.local` into device memory) is timed. [`TimingOptions::allocate`] turns it
//! off (the PTX kernel is timed as written, with the allocator's count for occupancy), and
//! [`TimingOptions::regs_per_thread`] overrides the count used for occupancy. A
//! [`KernelPass`] in [`TimingOptions::pass`] then rewrites it the way a compiler would for
//! a mechanism that needs it (preemption points, papers/lin-lightweight §IV-A).
//!
//! **One launch alone**: [`run_timed`] runs a launch on a fresh machine with [`GridDriver`],
//! which submits it in the first cycle and gives each SM with room one new TB per cycle
//! (SMs in index order, lowest TB index first), until its last TB has finished and every
//! access it made has completed (stores acknowledged); `cycles` includes that drain.
//!
//! **Counting.** A launch submitted during a cycle's control phase (as every control does)
//! arrives in that cycle; its per-scheduler counters start after that cycle's issue stage,
//! so every cycle after its arrival up to its last TB is exactly one issue or one stall per
//! scheduler.

pub mod backend;
pub mod context;
pub mod control;
pub mod counters;
mod decoded;
pub mod ids;
mod launch;
pub mod ledger;
mod local;
pub mod machine;
pub mod probe;
mod request;
pub mod scheduler;
mod sm;
pub mod stats;
mod tlp_monitor;
pub mod view;

#[cfg(test)]
mod corun_tests;
#[cfg(test)]
mod protocol_tests;
#[cfg(test)]
mod tlp_tests;

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::config::GpuConfig;
use crate::error::ExecError;
use crate::exec::LaunchCtx;
use crate::memory::DeviceMemory;

pub use backend::{FixedLatency, MemoryBackend};
pub use context::{ContextSizes, SquashedAccess, TbContext, WarpContext};
pub use control::{
    AfterStop, ControlError, Direction, HoldState, Keep, Refused, Request, Routine, RoutineEnd,
    Scope, Start, StopAt, TbCheckpoint, TbControl, Ticket, WarpCheckpoint, WarpControl,
    WarpReports,
};
pub use counters::{Counters, LaunchTally};
pub use ids::{
    CheckpointId, HoldId, LaunchId, PendingId, SmId, TbRef, TbSlotId, TransferId, WarpSlotId,
};
pub use launch::{Launch, TimedKernel};
pub use ledger::{KernelLimits, Share, SmLedger, Usage, IRC_WINDOW};
pub use machine::{Control, Event, Idle, Machine};
pub use probe::{
    Interests, Issue, Move, Probe, Replay, ReplayReason, Residency, ResidencyLog, SmCycle,
    StallTimeline,
};
pub use view::{TbProgress, WarpView};

pub use crate::pipeline::{FetchSpec, OpClass, OpTiming, PipelineSpec, TensorSpec, Unit};
pub use scheduler::{AnyScheduler, Gto, Lrr, Quota, TwoLevel, WarpInfo, WarpScheduler};

/// The pipeline description lives in [`crate::pipeline`] (it is part of a GPU's
/// configuration); this path keeps naming it.
pub mod spec {
    pub use crate::pipeline::*;
}
pub use stats::{
    FrontendStats, OccupancyTrace, Rates, SchedulerCycle, SchedulerStats, SmStats, StallReason,
    TimedStats, Utilisation, UtilisationClass, UtilisationCounts,
};

/// Settings of a timed run that are not part of the GPU configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TimingOptions {
    /// Registers per thread for occupancy (see the module documentation for the default).
    pub regs_per_thread: Option<u32>,
    /// A launch still running this many core cycles after its submission is stopped with
    /// an error; `None`: the progress rule ([`crate::limits`]).
    pub max_cycles: Option<u64>,
    /// Warp instructions one launch may execute in all before it is stopped as a runaway;
    /// `None`: the progress rule.
    pub instruction_limit: Option<u64>,
    /// The progress rule ([`crate::limits`]): a launch may execute `stall_instructions`
    /// plus `stall_instructions_per_warp` per warp it can have resident at once without a TB
    /// finishing, and spend `stall_cycles` with TBs resident and none finishing.
    pub stall_instructions: u64,
    pub stall_instructions_per_warp: u64,
    pub stall_cycles: u64,
    /// Core cycles between two samples of the occupancy trace ([`TimedStats::occupancy`]).
    pub sample_interval: u64,
    /// The engine's exact speed shortcuts (an SM sleeping through cycles that would repeat,
    /// a refused access known to be refused again, lazy warp checks along an LRR/GTO order;
    /// see `sm`). They never change a result; turning them off checks exactly that.
    pub shortcuts: bool,
    /// Time the kernel after register allocation (see the module documentation); when off,
    /// the PTX kernel is timed as written.
    pub allocate: bool,
    /// A rewrite applied to every timed kernel after register allocation.
    #[serde(skip)]
    pub pass: Option<Pass>,
    /// Threads the SMs are stepped on (at least 1). Every result is the same for any
    /// number (ARCHITECTURE.md, "Parallel stepping"), so it is not part of a run's
    /// description and is not written out.
    #[serde(skip)]
    pub threads: usize,
    /// For tests only: a deliberately wrong replay ([`WrongReplay`]), which the check every
    /// replay makes must catch. Not written out.
    #[serde(skip)]
    pub wrong_replay: WrongReplay,
}

/// A deliberately wrong replay of a faulting memory instruction (papers/tanasic-thesis
/// §6.2's two problems), for the tests that show the replay check catches each.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WrongReplay {
    /// The replay is right.
    #[default]
    None,
    /// A replay reads its operands from the register file as it is now, not from its
    /// replay-queue or operand-log entry (RAW on replay).
    RegisterFile,
    /// A warp's replay also replays its most recent memory instruction that passed its
    /// last TLB check (sparse replay: a committed instruction replayed).
    Committed,
}

/// A compile-time rewrite of a kernel after register allocation and before it is timed
/// (the preemption points a mechanism relies on are the example). It must keep the
/// kernel's meaning: results stay those of the functional core.
pub trait KernelPass: Send + Sync {
    fn name(&self) -> &str;
    /// The rewritten kernel and, for each of its instructions, the instruction of `kernel`
    /// it serves (an inserted instruction: the one it was inserted before); `None` leaves
    /// the kernel as it is.
    /// `sm` is the SM the kernel will run on (its uniform registers, say).
    fn run(
        &self,
        kernel: &kir::Kernel,
        sm: &crate::occupancy::SmResources,
    ) -> Option<(kir::Kernel, Vec<kir::InstId>)>;
}

/// A shared [`KernelPass`], compared by name.
#[derive(Clone)]
pub struct Pass(pub Arc<dyn KernelPass>);

impl std::fmt::Debug for Pass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Pass({})", self.0.name())
    }
}

impl PartialEq for Pass {
    fn eq(&self, other: &Pass) -> bool {
        self.0.name() == other.0.name()
    }
}

impl Default for TimingOptions {
    fn default() -> Self {
        TimingOptions {
            regs_per_thread: None,
            max_cycles: None,
            instruction_limit: None,
            stall_instructions: crate::limits::STALL_WARP_INSTRUCTIONS,
            stall_instructions_per_warp: crate::limits::STALL_INSTRUCTIONS_PER_WARP,
            stall_cycles: crate::limits::STALL_CYCLES,
            sample_interval: 1000,
            shortcuts: true,
            allocate: true,
            pass: None,
            threads: 1,
            wrong_replay: WrongReplay::None,
        }
    }
}

/// Where a running launch stands, reported every [`PROGRESS_INTERVAL`] core cycles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    pub cycle: u64,
    pub tbs_done: u64,
    pub tbs_total: u64,
    pub warp_instructions: u64,
}

/// Core cycles between two progress reports.
pub const PROGRESS_INTERVAL: u64 = 1 << 16;

/// Why a timed launch failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TimingError {
    /// The kernel faulted, deadlocked or ran away (as on the functional core).
    #[error(transparent)]
    Exec(#[from] ExecError),
    #[error(transparent)]
    MemoryConfig(#[from] memsys::ConfigError),
    /// Not even one TB fits on an SM.
    #[error("kernel `{kernel}` does not fit on an SM of `{gpu}`: a TB of {threads} threads with {regs_per_thread} registers per thread and {smem} bytes of shared memory")]
    DoesNotFit {
        kernel: String,
        gpu: String,
        threads: u32,
        regs_per_thread: u32,
        smem: u32,
    },
    /// The kernel has a tensor-core instruction the GPU's tensor cores do not execute (or the
    /// GPU has none).
    #[error("{location}: kernel `{kernel}` uses `{inst}`, which `{gpu}` cannot run: {why}")]
    NoTensorCore {
        kernel: String,
        location: String,
        inst: String,
        why: String,
        gpu: String,
    },
    #[error("kernel `{kernel}` did not finish within {limit} cycles (an endless loop? raise the limit with --max-cycles)")]
    CycleLimit { kernel: String, limit: u64 },
    /// The default runaway rule ([`crate::limits`]): `limit` cycles passed with TBs of the
    /// launch resident and none finishing.
    #[error("kernel `{kernel}` ran {limit} cycles with TBs resident and none finishing (an endless loop? a kernel whose TBs run longer sets a total with --max-cycles)")]
    NoProgress { kernel: String, limit: u64 },
    /// A control asked the machine for something it cannot do.
    #[error(transparent)]
    Control(#[from] ControlError),
    /// A preemption mechanism found the machine in a state its contract excludes.
    #[error("preemption mechanism: {0}")]
    Mechanism(String),
}

/// A GPU with a timing model: its configuration (SMs, memory hierarchy, pipeline) and the
/// options of a run.
#[derive(Clone, Debug, PartialEq)]
pub struct TimedGpu {
    pub gpu: GpuConfig,
    pub options: TimingOptions,
}

impl TimedGpu {
    /// The GPU with default options.
    pub fn new(gpu: GpuConfig) -> Self {
        TimedGpu {
            gpu,
            options: TimingOptions::default(),
        }
    }

    /// `kernel` as this GPU times it (see the module documentation).
    pub fn timed_kernel(&self, kernel: &Arc<kir::Kernel>) -> TimedKernel {
        let r = &self.gpu.sm.resources;
        let max = r.max_registers_per_thread;
        let timed = if self.options.allocate {
            TimedKernel::allocated(kernel, max, r.uniform_registers)
        } else {
            TimedKernel::unallocated(kernel, max)
        };
        match &self.options.pass {
            Some(pass) => timed.rewritten(pass.0.as_ref(), r),
            None => timed,
        }
    }
}

/// Registers per thread of `kernel` after allocation under `max`; the virtual register
/// count, capped, should allocation fail.
pub fn physical_registers(kernel: &kir::Kernel, max: u32) -> u32 {
    let config = regalloc::AllocConfig {
        max_registers: max.max(1),
        ..Default::default()
    };
    match regalloc::allocate(kernel, &config) {
        Ok(a) => a.gpr_count.max(1),
        Err(_) => (kernel.regs.len() as u32).clamp(1, max.max(1)),
    }
}

/// The control of one launch run alone: it submits the launch in its first cycle (the way
/// a scheduling framework does, so that counters are the same either way), then every
/// cycle gives each SM with room for another TB of the launch its next new TB (SMs in index
/// order).
pub struct GridDriver {
    pending: Option<(LaunchCtx, TimedKernel)>,
    launch: Option<LaunchId>,
    /// Per SM: its ledger's [`ledger::SmLedger::changes`] when the launch last did not
    /// fit there (it still does not until they grow).
    full_at: Vec<Option<u64>>,
}

impl GridDriver {
    /// A driver that will submit `ctx` with its kernel as `timed`.
    pub fn new(ctx: LaunchCtx, timed: TimedKernel) -> GridDriver {
        GridDriver {
            pending: Some((ctx, timed)),
            launch: None,
            full_at: Vec::new(),
        }
    }

    /// The launch, once submitted.
    pub fn launch(&self) -> Option<LaunchId> {
        self.launch
    }
}

impl<B: MemoryBackend> Control<B> for GridDriver {
    fn on_cycle(&mut self, m: &mut Machine<B>) -> Result<(), TimingError> {
        m.clear_events();
        if let Some((ctx, timed)) = self.pending.take() {
            self.launch = Some(m.submit(ctx, &timed)?);
        }
        let Some(launch) = self.launch else {
            return Ok(());
        };
        self.full_at.resize(m.sm_count() as usize, None);
        // TBs left to place (read again only after a dispatch, the one thing here that
        // changes it).
        let mut left = m.launch(launch).undispatched();
        for sm in 0..m.sm_count() {
            if left == 0 {
                break;
            }
            let (i, sm) = (sm as usize, SmId(sm));
            let changes = m.ledger(sm).changes();
            if self.full_at[i] == Some(changes) {
                continue;
            }
            if m.fits(sm, launch) {
                m.request(Request::Dispatch { sm, launch })?;
                left = m.launch(launch).undispatched();
            } else {
                self.full_at[i] = Some(changes);
            }
        }
        Ok(())
    }
}

impl From<Refused> for TimingError {
    fn from(r: Refused) -> TimingError {
        TimingError::Control(r.error)
    }
}

/// Runs every TB of a launch on a fresh machine of `gpu`, updating `mem` exactly as the
/// functional core would (up to the order of atomics), and calls `progress` every
/// [`PROGRESS_INTERVAL`] core cycles. The machine borrows `mem` for the run.
pub fn run_timed(
    ctx: &LaunchCtx,
    mem: &mut DeviceMemory,
    gpu: &GpuConfig,
    opts: &TimingOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<TimedStats, TimingError> {
    let config = TimedGpu {
        gpu: gpu.clone(),
        options: opts.clone(),
    };
    let timed = config.timed_kernel(&ctx.kernel);
    let mut m = Machine::new(config.gpu, config.options, std::mem::take(mem))?;
    let result = run_launch(&mut m, ctx.clone(), &timed, progress);
    *mem = m.into_memory();
    result
}

/// Runs a launch alone on `m` to completion with [`GridDriver`] (it arrives in the next
/// cycle), calling `progress` every [`PROGRESS_INTERVAL`] core cycles.
pub fn run_launch<B: MemoryBackend>(
    m: &mut Machine<B>,
    ctx: LaunchCtx,
    timed: &TimedKernel,
    progress: &mut dyn FnMut(Progress),
) -> Result<TimedStats, TimingError> {
    let mut driver = GridDriver::new(ctx, timed.clone());
    loop {
        m.step(&mut driver)?;
        let id = driver.launch().expect("submitted in the first cycle");
        let l = m.launch(id);
        if let Some(s) = l.stats() {
            return Ok(s.clone());
        }
        let now = m.cycle();
        if now.is_multiple_of(PROGRESS_INTERVAL) {
            progress(Progress {
                cycle: now - l.submitted_at(),
                tbs_done: l.done(),
                tbs_total: l.tbs(),
                warp_instructions: m.warp_instructions(id),
            });
        }
    }
}
