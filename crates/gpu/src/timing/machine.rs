//! The persistent machine: one object that owns the SMs, the memory system, device memory
//! and the clock, and outlives launches, so caches stay warm between the launches of a
//! program as on hardware.
//!
//! It holds any number of launches at once, each an owned [`LaunchCtx`] with its kernel as
//! timed ([`TimedKernel`]), and is driven from outside: [`Machine::submit`] a launch,
//! [`Machine::step`] one core cycle at a time with a [`Control`], and read the [`Event`]s it
//! produced. What runs where is not the machine's business: the control (the SM driver of a
//! scheduling framework, or the one-launch driver of [`super::run_timed`]) decides, through
//! [`Machine::request`] and the control protocol of [`super::control`].
//!
//! **One cycle**, in a fixed order so results are deterministic (DESIGN.md §1.5): every SM
//! takes its completed memory accesses (releasing their registers) and runs its schedulers
//! (each issues at most one warp instruction), SMs independently and, with
//! [`TimingOptions::threads`] above 1, on several threads (`Machine::step_sms`); every
//! SM's global writes of the cycle are applied, in SM order (`Sm::commit`, ARCHITECTURE.md
//! "Memory visibility"); every SM completes barriers, retires finished
//! TBs and acknowledges what completed (events, per SM in the order of [`Event`]'s kinds:
//! finished, drained, evicted, transfers, stopped, routines, checkpoints); the control acts;
//! the occupancy is sampled; launches whose TBs are all done and whose accesses have all
//! completed finish ([`Event::LaunchFinished`]); the memory system advances to the next core
//! edge.
//!
//! **State stays where it lives.** Each SM keeps its resident TBs, its resources
//! ([`super::SmLedger`]) and its accesses in flight per launch. The statistics are a probe,
//! [`super::Counters`], which the machine always holds and every SM reports to (statically,
//! beside any attached probe); a launch's [`TimedStats`] are its differences between
//! snapshots. While they issue, SMs share nothing mutable: each has its own memory port
//! and counters, and reads device memory as the cycle began.
//!
//! **The memory hierarchy** is a [`MemoryBackend`]: the full `memsys` model by default, or,
//! for tests of SMs alone, [`super::backend::FixedLatency`].

use kir::Id;
use lockstep::Team;
use memsys::{MemConfig, MemorySystem};

use super::backend::{MemoryBackend, SmMemory, Through};
use super::context::TbContext;
use super::control::{HoldState, TbCheckpoint, TbControl};
use super::counters::{Counters, LaunchTally, SmCounters};
use super::ids::{HoldId, LaunchId, SmId, TbRef, TransferId};
use super::launch::{frontend_total, Launch, Snapshot, TimedKernel};
use super::ledger::SmLedger;
use super::probe::{Probe, Watch};
use super::scheduler::AnyScheduler;
use super::sm::{Retired, Shortcuts, Sm, Specs};
use super::stats::{OccupancyTrace, Rates, SchedulerStats, SmStats, TimedStats, Utilisation};
use super::view::{TbProgress, WarpView};
use super::{TimingError, TimingOptions};
use crate::config::GpuConfig;
use crate::error::ExecError;
use crate::exec::LaunchCtx;
use crate::limits::{stall_window, Limit};
use crate::memory::DeviceMemory;
use crate::occupancy::{Occupancy, TbDemand};

/// What the machine reports, stamped with the core cycle it happened in. Every request of
/// the control protocol is acknowledged by one of these (named in [`super::Request`]).
#[derive(Debug)]
pub enum Event {
    /// A new TB of a launch was placed on an SM.
    TbDispatched {
        cycle: u64,
        sm: SmId,
        tb: TbRef,
    },
    /// A TB finished (its warps exited and their loads returned) and left its SM.
    TbFinished {
        cycle: u64,
        sm: SmId,
        tb: TbRef,
    },
    /// A stopped TB left its SM; its state is the context, to be installed again. With a
    /// hold, its resources stay taken until released.
    TbEvicted {
        cycle: u64,
        sm: SmId,
        context: Box<TbContext>,
        hold: Option<HoldId>,
    },
    /// A warp of a TB stopped with per-warp reports has drained: it is halted, its issued
    /// instructions have finished and its registers are final ([`Machine::idle_warp`] reads
    /// them). Comes before the TB's own acknowledgement.
    WarpDrained {
        cycle: u64,
        sm: SmId,
        tb: TbRef,
        warp: u32,
    },
    /// A TB was thrown away; it will run again from its start.
    TbDiscarded {
        cycle: u64,
        sm: SmId,
        tb: TbRef,
    },
    /// A context transfer completed: every store acknowledged, every load returned.
    TransferDone {
        cycle: u64,
        sm: SmId,
        id: TransferId,
    },
    /// A stopped TB's context was installed on an SM.
    TbRestored {
        cycle: u64,
        sm: SmId,
        tb: TbRef,
    },
    /// A stop that keeps the TB resident completed: every warp halted, held or finished,
    /// nothing in flight.
    TbStopped {
        cycle: u64,
        sm: SmId,
        tb: TbRef,
    },
    /// A stopped TB's warps issue again.
    TbResumed {
        cycle: u64,
        sm: SmId,
        tb: TbRef,
    },
    /// A warp's routine ended and its accesses completed; the warp is halted where it was.
    RoutineDone {
        cycle: u64,
        sm: SmId,
        tb: TbRef,
        warp: u32,
    },
    /// A warp was held, or released.
    WarpHeld {
        cycle: u64,
        sm: SmId,
        tb: TbRef,
        warp: u32,
    },
    WarpReleased {
        cycle: u64,
        sm: SmId,
        tb: TbRef,
        warp: u32,
    },
    /// Resources were taken under a hold, given back, parked or unparked.
    HoldTaken {
        cycle: u64,
        sm: SmId,
        hold: HoldId,
    },
    HoldReleased {
        cycle: u64,
        sm: SmId,
        hold: HoldId,
    },
    HoldParked {
        cycle: u64,
        sm: SmId,
        hold: HoldId,
    },
    HoldUnparked {
        cycle: u64,
        sm: SmId,
        hold: HoldId,
    },
    /// A checkpoint's bytes are in device memory; the checkpoint is the TB as it stood when
    /// it was requested.
    CheckpointDone {
        cycle: u64,
        sm: SmId,
        checkpoint: Box<TbCheckpoint>,
    },
    /// A stopped TB was put back in the state of its checkpoints.
    TbRolledBack {
        cycle: u64,
        sm: SmId,
        tb: TbRef,
    },
    /// A launch's limits on an SM were set.
    LimitsSet {
        cycle: u64,
        sm: SmId,
        launch: LaunchId,
    },
    /// A launch's TBs on an SM count basic-block entries from now on (or stopped).
    BlockCountSet {
        cycle: u64,
        sm: SmId,
        launch: LaunchId,
    },
    /// A warp of TB `tb`, whose launch counts basic-block entries, entered one block the
    /// set number of times since the TB's last checkpoint: a checkpoint is due. Raised once
    /// until the TB's next checkpoint.
    CheckpointDue {
        cycle: u64,
        sm: SmId,
        tb: TbRef,
    },
    /// Every TB of the launch finished and every access it made completed; its statistics
    /// are in [`Launch::stats`].
    LaunchFinished {
        cycle: u64,
        launch: LaunchId,
    },
}

impl Event {
    /// The core cycle of the event.
    pub fn cycle(&self) -> u64 {
        match self {
            Event::TbDispatched { cycle, .. }
            | Event::TbFinished { cycle, .. }
            | Event::TbEvicted { cycle, .. }
            | Event::TbDiscarded { cycle, .. }
            | Event::WarpDrained { cycle, .. }
            | Event::TransferDone { cycle, .. }
            | Event::TbRestored { cycle, .. }
            | Event::TbStopped { cycle, .. }
            | Event::TbResumed { cycle, .. }
            | Event::RoutineDone { cycle, .. }
            | Event::WarpHeld { cycle, .. }
            | Event::WarpReleased { cycle, .. }
            | Event::HoldTaken { cycle, .. }
            | Event::HoldReleased { cycle, .. }
            | Event::HoldParked { cycle, .. }
            | Event::HoldUnparked { cycle, .. }
            | Event::CheckpointDone { cycle, .. }
            | Event::TbRolledBack { cycle, .. }
            | Event::LimitsSet { cycle, .. }
            | Event::BlockCountSet { cycle, .. }
            | Event::CheckpointDue { cycle, .. }
            | Event::LaunchFinished { cycle, .. } => *cycle,
        }
    }

    /// The SM it happened on (`None` for a launch's end).
    pub fn sm(&self) -> Option<SmId> {
        match self {
            Event::TbDispatched { sm, .. }
            | Event::TbFinished { sm, .. }
            | Event::TbEvicted { sm, .. }
            | Event::TbDiscarded { sm, .. }
            | Event::WarpDrained { sm, .. }
            | Event::TransferDone { sm, .. }
            | Event::TbRestored { sm, .. }
            | Event::TbStopped { sm, .. }
            | Event::TbResumed { sm, .. }
            | Event::RoutineDone { sm, .. }
            | Event::WarpHeld { sm, .. }
            | Event::WarpReleased { sm, .. }
            | Event::HoldTaken { sm, .. }
            | Event::HoldReleased { sm, .. }
            | Event::HoldParked { sm, .. }
            | Event::HoldUnparked { sm, .. }
            | Event::CheckpointDone { sm, .. }
            | Event::TbRolledBack { sm, .. }
            | Event::LimitsSet { sm, .. }
            | Event::BlockCountSet { sm, .. }
            | Event::CheckpointDue { sm, .. } => Some(*sm),
            Event::LaunchFinished { .. } => None,
        }
    }
}

/// Whoever decides what the machine runs: an SM driver.
///
/// **Contract:** [`Control::on_cycle`] is called once every core cycle, after the SMs have
/// issued and retired and before the clock advances: the one point in a cycle at which
/// requests are made ([`Machine::request`]). It may read everything the machine shows and
/// take its events; it must not change device memory while TBs that use it are resident (a
/// host copy belongs to moments the program's stream order allows). It must be
/// deterministic: the machine's results are a function of its inputs and of the control's
/// decisions.
pub trait Control<B: MemoryBackend = MemorySystem> {
    fn on_cycle(&mut self, machine: &mut Machine<B>) -> Result<(), TimingError>;
}

/// Places no TB: for stepping a machine whose launches are driven elsewhere, or to let it
/// drain.
pub struct Idle;

impl<B: MemoryBackend> Control<B> for Idle {
    fn on_cycle(&mut self, _: &mut Machine<B>) -> Result<(), TimingError> {
        Ok(())
    }
}

/// Cycles between checks of the instruction limit.
const LIMIT_CHECK_INTERVAL: u64 = 64;

/// The GPU: SMs, memory system, device memory, clock and launches.
pub struct Machine<B: MemoryBackend = MemorySystem> {
    gpu: GpuConfig,
    opts: TimingOptions,
    pub(super) memcfg: MemConfig,
    pub(super) memsys: B,
    pub(super) mem: DeviceMemory,
    pub(super) sms: Vec<Sm>,
    pub(super) launches: Vec<Launch>,
    /// Submitted and not finished, in submission order.
    active: Vec<LaunchId>,
    pub(super) events: Vec<Event>,
    retired: Retired,
    /// `(cycle, resident warps on the whole GPU)` every `sample_interval` cycles.
    occupancy: Vec<(u64, u32)>,
    /// The statistics, a probe always attached ([`Counters`]).
    counters: Counters,
    /// The observer, and how many of `events` it and `counters` have been shown.
    probe: Option<Box<dyn Probe>>,
    shown: usize,
    /// The threads SMs are stepped on, with `TimingOptions::threads` above 1.
    team: Option<Team>,
    /// TB switching on fault, when the GPU has it (`memsys::TbSwitch`).
    pub(super) local: Option<super::local::LocalScheduler>,
    /// GPUDuet's throughput monitors, one per kernel whose extra TBs they set
    /// (`[sm.tlp] dynamic`).
    pub(super) monitors: Vec<super::tlp_monitor::Monitor>,
    /// Whether every SM's L1 is bypassed, a context store for a monitor's kernel.
    pub(super) l1_store: bool,
}

impl Machine {
    /// An idle machine at cycle 0 whose device memory is `mem`, with the memory hierarchy
    /// `gpu` describes.
    pub fn new(
        gpu: GpuConfig,
        opts: TimingOptions,
        mem: DeviceMemory,
    ) -> Result<Machine, TimingError> {
        let memcfg = Machine::memory_config_of(&gpu);
        let memsys = MemorySystem::new(memcfg)?;
        Ok(Machine::with_backend(gpu, opts, mem, memsys))
    }

    /// The memory hierarchy's configuration for `gpu` (its SM count and core clock).
    pub fn memory_config_of(gpu: &GpuConfig) -> MemConfig {
        let mut memcfg = gpu.memory.clone();
        memcfg.num_sms = gpu.sm.count as usize;
        memcfg.clocks.core_mhz = gpu.sm.clock_mhz;
        memcfg
    }
}

impl<B: MemoryBackend> Machine<B> {
    /// An idle machine at cycle 0 on the memory hierarchy `memsys`.
    pub fn with_backend(
        gpu: GpuConfig,
        opts: TimingOptions,
        mem: DeviceMemory,
        memsys: B,
    ) -> Machine<B> {
        let memcfg = Machine::memory_config_of(&gpu);
        let sms = (0..gpu.sm.count)
            .map(|i| {
                let scheds = (0..gpu.sm.warp_schedulers)
                    .map(|_| AnyScheduler::new(gpu.sm.scheduler, gpu.pipeline.two_level_active))
                    .collect();
                Sm::new(
                    SmId(i),
                    &gpu.sm.resources,
                    scheds,
                    &gpu.pipeline,
                    if opts.shortcuts {
                        Shortcuts::On
                    } else {
                        Shortcuts::Off
                    },
                    gpu.sm.tlp,
                )
                .with_wrong_replay(opts.wrong_replay)
            })
            .collect();
        let counters = Counters::new(gpu.sm.count as usize, gpu.sm.warp_schedulers as usize);
        let opts_threads = opts.threads.min(gpu.sm.count as usize);
        let local = memcfg.translating().and_then(|t| {
            super::local::LocalScheduler::new(t.tb_switch, t.tb_switch_extra, gpu.sm.count as usize)
        });
        Machine {
            gpu,
            opts,
            memcfg,
            memsys,
            mem,
            sms,
            launches: Vec::new(),
            active: Vec::new(),
            events: Vec::new(),
            retired: Retired::default(),
            occupancy: Vec::new(),
            counters,
            probe: None,
            shown: 0,
            team: Team::new(opts_threads),
            local,
            monitors: Vec::new(),
            l1_store: false,
        }
    }

    /// Attaches `probe` (replacing any), which from now on is told of every issue, memory
    /// request and event.
    pub fn attach(&mut self, probe: Box<dyn Probe>) {
        self.show_events();
        self.probe = Some(probe);
        self.shown = self.events.len();
    }

    /// Takes the probe off.
    pub fn detach(&mut self) -> Option<Box<dyn Probe>> {
        self.show_events();
        self.probe.take()
    }

    /// Shows the statistics and the probe the events they have not seen.
    fn show_events(&mut self) {
        for e in &self.events[self.shown.min(self.events.len())..] {
            self.counters.on_event(e);
            if let Some(p) = self.probe.as_deref_mut() {
                p.on_event(e);
            }
        }
        self.shown = self.events.len();
    }

    /// The machine's statistics probe: every SM's counts and every launch's so far (events
    /// not yet shown to probes excepted; every step shows them before it returns). The
    /// cycles of sleeping SMs the machine skipped are counted first.
    pub fn counters(&mut self) -> &Counters {
        self.counters.settle();
        &self.counters
    }

    /// [`Machine::counters`] for a caller that may only read the machine (an injector
    /// sampling between cycles): a copy, with the skipped cycles counted in it.
    pub fn counters_now(&self) -> Counters {
        let mut c = self.counters.clone();
        c.settle();
        c
    }

    pub fn config(&self) -> &GpuConfig {
        &self.gpu
    }

    pub fn options(&self) -> &TimingOptions {
        &self.opts
    }

    /// The current core cycle.
    pub fn cycle(&self) -> u64 {
        self.memsys.core_cycle()
    }

    /// The current time in femtoseconds (every clock domain shares it).
    pub fn now_fs(&self) -> u64 {
        self.memsys.now_fs()
    }

    /// Femtoseconds per core cycle.
    pub fn core_period_fs(&self) -> u64 {
        self.memsys.core_period_fs()
    }

    pub fn memory(&self) -> &DeviceMemory {
        &self.mem
    }

    pub fn memory_mut(&mut self) -> &mut DeviceMemory {
        &mut self.mem
    }

    /// The memory hierarchy, for what the host changes in it between cycles: the
    /// residency of managed memory (`memsys::MemorySystem::manage`, issue 26's demand
    /// paging). Its timing state is the machine's; nothing else should be changed here.
    pub fn hierarchy_mut(&mut self) -> &mut B {
        &mut self.memsys
    }

    /// Gives the device memory back (the machine is done).
    pub fn into_memory(self) -> DeviceMemory {
        self.mem
    }

    /// The memory system's counters since the machine was built.
    pub fn memory_stats(&self) -> memsys::MemStats {
        self.memsys.stats()
    }

    /// The memory hierarchy's configuration.
    pub fn memory_config(&self) -> &MemConfig {
        &self.memcfg
    }

    pub fn sm_count(&self) -> u32 {
        self.sms.len() as u32
    }

    /// Cuts the memory system into `instances` partitions, SM `sm` sending its accesses to
    /// partition `instance_of_sm[sm]` only (NVIDIA's MIG: each instance its own L2 slices
    /// and DRAM channels). Before anything has run.
    pub fn partition_memory(
        &mut self,
        instance_of_sm: &[Option<u32>],
        instances: u32,
    ) -> Result<(), TimingError> {
        Ok(self.memsys.partition(instance_of_sm, instances)?)
    }

    pub fn sm_ids(&self) -> impl Iterator<Item = SmId> {
        (0..self.sms.len() as u32).map(SmId)
    }

    /// What the TBs on `sm` hold.
    pub fn ledger(&self, sm: SmId) -> &SmLedger {
        self.sms[sm.index()].ledger()
    }

    /// The TBs on `sm` and their control states.
    pub fn resident(&self, sm: SmId) -> impl Iterator<Item = (TbRef, TbControl)> + '_ {
        self.sms[sm.index()].resident()
    }

    /// The holds on `sm` and their states.
    pub fn holds(&self, sm: SmId) -> impl Iterator<Item = (HoldId, HoldState)> + '_ {
        self.sms[sm.index()].holds()
    }

    /// The warps of TB `tb` on `sm` as they stand (for inspection: tests, traces, debugging).
    pub fn warps_of(&self, sm: SmId, tb: TbRef) -> Option<Vec<WarpView>> {
        self.sms.get(sm.index())?.warps_of(tb)
    }

    /// The progress of resident TB `tb` on `sm`.
    pub fn tb_progress(&self, sm: SmId, tb: TbRef) -> Option<TbProgress> {
        self.sms.get(sm.index())?.progress(tb)
    }

    /// The state of warp `warp` (its index in the TB) of TB `tb` on `sm`, while it is halted
    /// by a stop, held or finished (its registers and SIMT stack do not change then).
    pub fn idle_warp(&self, sm: SmId, tb: TbRef, warp: u32) -> Option<&crate::exec::Warp> {
        self.sms.get(sm.index())?.idle_warp(tb, warp)
    }

    /// Whether `sm` has nothing running or moving: no TB resident, no context transfer,
    /// every hold parked. (A reserved SM is set up for its next kernel then.)
    pub fn vacated(&self, sm: SmId) -> bool {
        self.sms.get(sm.index()).is_some_and(Sm::vacated)
    }

    /// Whether one more TB of `launch` fits on `sm` now, within its limits there.
    pub fn fits(&self, sm: SmId, launch: LaunchId) -> bool {
        self.sms[sm.index()]
            .ledger()
            .fits_for(launch, &self.launches[launch.index()].demand)
    }

    /// How many more TBs of `launch` fit on `sm` now, within its limits there (what a
    /// partial preemption waits for).
    pub fn room_for(&self, sm: SmId, launch: LaunchId) -> u32 {
        self.sms[sm.index()]
            .ledger()
            .room_for(launch, &self.launches[launch.index()].demand)
    }

    /// Whether nothing on `sm` is on its way out: every resident TB running, no context
    /// transfer in flight, every hold parked. (A partial preemption whose TBs have all
    /// left is over, whether or not it made the room it asked for.)
    pub fn settled(&self, sm: SmId) -> bool {
        self.sms.get(sm.index()).is_some_and(Sm::settled)
    }

    /// Whether parked hold `hold` on `sm` could take back what it gave up.
    pub fn fits_unpark(&self, sm: SmId, hold: HoldId) -> bool {
        self.sms
            .get(sm.index())
            .is_some_and(|s| s.fits_unpark(hold))
    }

    /// A launch submitted to this machine.
    pub fn launch(&self, id: LaunchId) -> &Launch {
        &self.launches[id.index()]
    }

    /// Warp instructions `launch` has executed so far.
    pub fn warp_instructions(&self, launch: LaunchId) -> u64 {
        self.counters.launch(launch).warp_instructions
    }

    /// Request packets `launch`'s accesses (its context transfers included) have sent
    /// towards the L2 so far, over every SM ([`super::LaunchTally::noc_requests`]).
    pub fn noc_requests(&self, launch: LaunchId) -> u64 {
        self.counters.launch(launch).noc_requests
    }

    /// DRAM bytes `launch`'s accesses (its context transfers included) have caused so
    /// far: its L2 misses' fetches and the write-backs its fills and writes evicted
    /// ([`MemoryBackend::dram_bytes`]).
    pub fn dram_bytes(&self, launch: LaunchId) -> u64 {
        self.memsys.dram_bytes(launch.0)
    }

    /// Interconnect flits launch `launch`'s accesses have moved so far, request and reply
    /// packets (`memsys::MemorySystem::noc_flits`).
    pub fn noc_flits(&self, launch: LaunchId) -> u64 {
        self.memsys.noc_flits(launch.0)
    }

    /// Launches submitted and not finished, in submission order.
    pub fn active(&self) -> &[LaunchId] {
        &self.active
    }

    /// The events since they were last taken, oldest first.
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// Takes the events since they were last taken.
    pub fn take_events(&mut self) -> Vec<Event> {
        self.show_events();
        self.shown = 0;
        std::mem::take(&mut self.events)
    }

    /// Drops the events since they were last taken.
    pub fn clear_events(&mut self) {
        self.show_events();
        self.shown = 0;
        self.events.clear();
    }

    /// Every `mma` of the launch's kernel runs on this GPU's tensor cores (a GPU before Volta
    /// has none, and each generation supports its own multiplicand types).
    fn check_tensor_cores(&self, ctx: &LaunchCtx) -> Result<(), TimingError> {
        for inst in ctx.kernel.insts.as_slice() {
            let kir::Op::Mma { a, .. } = inst.op else {
                continue;
            };
            let why = match &self.gpu.pipeline.tensor {
                None => "it has no tensor cores (presets with them: v100, a100, h100)".to_string(),
                Some(t) if t.timing(inst).is_none() => {
                    format!("its tensor cores do not multiply .{} values", a.name())
                }
                Some(_) => continue,
            };
            return Err(TimingError::NoTensorCore {
                kernel: ctx.kernel.name.clone(),
                location: ctx.source.location(inst.span),
                inst: ctx
                    .source
                    .text
                    .get(inst.span.start as usize..inst.span.end as usize)
                    .and_then(|t| t.split_whitespace().next())
                    .unwrap_or("mma")
                    .to_string(),
                why,
                gpu: self.gpu.name.clone(),
            });
        }
        Ok(())
    }

    /// Adds a launch; it arrives at the current cycle and waits for a control to dispatch
    /// its TBs. `ctx` is the launch as the host built it; its kernel is replaced by `timed`'s
    /// (the same kernel after register allocation, normally). Refused when not even one TB
    /// fits on an empty SM, or when the kernel needs tensor cores the GPU lacks.
    pub fn submit(
        &mut self,
        mut ctx: LaunchCtx,
        timed: &TimedKernel,
    ) -> Result<LaunchId, TimingError> {
        self.check_tensor_cores(&ctx)?;
        if timed.kernel.warp_smem != ctx.kernel.warp_smem {
            // A kernel pass gave each warp shared memory of its own (OSRB's backups,
            // CTXBack's uniform registers): the TB's shared memory grows by it.
            let layout = crate::exec::SharedLayout::of(&timed.kernel, ctx.block, ctx.dynamic_smem);
            ctx.smem_size = layout.size;
            ctx.warp_smem_base = layout.warp_base;
        }
        let (demand, occupancy, regs) = self.occupancy(&ctx, timed)?;
        ctx.kernel = timed.kernel.clone();
        ctx.num_sms = self.gpu.sm.count;
        let id = LaunchId(self.launches.len() as u32);
        let mut launch = Launch::new(
            ctx,
            demand,
            occupancy,
            regs,
            timed.origins.clone(),
            self.cycle(),
        );
        let tlp = self.gpu.sm.tlp;
        if !tlp.is_off() {
            // The live registers at its switch points bound what a spilled register
            // context takes (papers/lin-thesis §3.6.6).
            let words = launch.live_registers_at_switch_points(tlp.compression);
            launch.context_registers = words;
            let live = (u64::from(launch.demand.registers) * u64::from(words))
                .div_ceil(u64::from(regs.max(1))) as u32;
            launch.tlp = crate::tlp::extra_tbs(
                &tlp,
                &self.gpu.sm.resources,
                &launch.demand,
                &launch.occupancy,
                live,
                0,
            );
            // GPUDuet's third store, the L1 bypassed (§3.6.4): only the monitor, which
            // measures the L1's use, can decide for it.
            if tlp.dynamic && tlp.scheme == crate::tlp::TlpScheme::Gpuduet {
                launch.extra_with_l1 = crate::tlp::extra_tbs(
                    &tlp,
                    &self.gpu.sm.resources,
                    &launch.demand,
                    &launch.occupancy,
                    live,
                    self.gpu.memory.l1.size_bytes,
                )
                .extra;
            }
        }
        // The warps the launch can have resident at once, on every SM.
        let per_sm = launch.tlp.native + launch.tlp.extra;
        let resident_warps = (u64::from(per_sm) * self.sms.len() as u64).min(launch.total)
            * u64::from(launch.ctx.warps_per_tb());
        launch.instruction_limit = Limit::total_or(
            self.opts.instruction_limit,
            Limit::WithoutProgress(stall_window(
                self.opts.stall_instructions,
                self.opts.stall_instructions_per_warp,
                resident_warps,
            )),
        );
        launch.max_cycles = Limit::total_or(
            self.opts.max_cycles,
            Limit::WithoutProgress(self.opts.stall_cycles),
        );
        self.show_events();
        launch.start = Some(Box::new(self.snapshot()));
        let (extra, with_l1) = (launch.tlp.extra, launch.extra_with_l1);
        self.launches.push(launch);
        self.active.push(id);
        if extra > 0 || with_l1 > 0 {
            if tlp.dynamic {
                // The monitor sets them (papers/lin-thesis §3.6.4).
                self.start_monitor(id, extra, with_l1.max(extra));
            } else {
                self.set_extra(id, extra);
            }
        }
        Ok(id)
    }

    /// What one TB of `ctx` (timed as `timed`) takes, how many fit on an SM, and the
    /// registers per thread assumed; an error when not even one fits on an empty SM.
    pub fn occupancy(
        &self,
        ctx: &LaunchCtx,
        timed: &TimedKernel,
    ) -> Result<(TbDemand, Occupancy, u32), TimingError> {
        let res = &self.gpu.sm.resources;
        let regs = self.opts.regs_per_thread.unwrap_or(timed.regs_per_thread);
        let demand = TbDemand::for_kernel(res, ctx.threads_per_tb(), regs, ctx.smem_size);
        let occupancy = Occupancy::of(res, &demand);
        if occupancy.tbs_per_sm == 0 {
            return Err(TimingError::DoesNotFit {
                kernel: ctx.kernel.name.clone(),
                gpu: self.gpu.name.clone(),
                threads: ctx.threads_per_tb(),
                regs_per_thread: regs,
                smem: ctx.smem_size,
            });
        }
        Ok((demand, occupancy, regs))
    }

    /// Whether nothing is running: no TB resident and the memory system idle.
    pub fn is_idle(&self) -> bool {
        self.sms.iter().all(|s| s.is_empty() && !s.has_backlog())
            && self.memsys.is_idle()
            && self.local.as_ref().is_none_or(|l| l.idle())
    }

    /// Jumps an idle machine ([`Machine::is_idle`]) to the first core cycle at or after time
    /// `t_fs`: with no TB resident and nothing in flight, the skipped cycles would only count
    /// idle cycles. (Idle time is not charged to any launch.)
    pub fn skip_idle_to(&mut self, t_fs: u64) {
        assert!(self.is_idle(), "only an idle machine skips time");
        self.memsys.skip_idle_to(t_fs);
    }

    /// A TB left `sm` as `context` (its resources under `hold`, if kept): its launch holds it
    /// now, and the event says so.
    pub(super) fn left(&mut self, sm: SmId, context: TbContext, hold: Option<HoldId>, now: u64) {
        let l = &mut self.launches[context.tb.launch.index()];
        l.resident -= 1;
        l.held += 1;
        self.events.push(Event::TbEvicted {
            cycle: now,
            sm,
            context: Box::new(context),
            hold,
        });
    }

    /// Runs one core cycle (see the module documentation).
    pub fn step(&mut self, ctl: &mut dyn Control<B>) -> Result<(), TimingError> {
        let now = self.cycle();
        self.step_sms(now)?;
        // The cycle's global writes become visible, SM by SM (ARCHITECTURE.md, "Memory
        // visibility").
        for sm in &mut self.sms {
            sm.commit(&self.launches, &mut self.mem)?;
        }
        if now.is_multiple_of(LIMIT_CHECK_INTERVAL) {
            self.check_instruction_limit()?;
        }
        let mut last_tbs = Vec::new();
        for i in 0..self.sms.len() {
            let sm = SmId(i as u32);
            self.sms[i].retire(&self.launches, now, &mut self.retired)?;
            if self.retired.is_empty() {
                continue;
            }
            for (tb, frame, executed, cycles) in self.retired.finished.drain(..) {
                let l = &mut self.launches[tb.launch.index()];
                l.resident -= 1;
                l.done += 1;
                l.done_instructions += executed;
                l.done_cycles += cycles;
                l.progress.stalled_cycles = 0;
                l.give_frame(frame);
                if l.done == l.total {
                    l.last_tb_at = Some(now);
                    last_tbs.push(tb.launch);
                }
                self.events.push(Event::TbFinished { cycle: now, sm, tb });
            }
            for (tb, warp) in self.retired.drained.drain(..) {
                self.events.push(Event::WarpDrained {
                    cycle: now,
                    sm,
                    tb,
                    warp,
                });
            }
            let evicted = std::mem::take(&mut self.retired.evicted);
            for (context, hold) in evicted {
                self.left(sm, context, hold, now);
            }
            for id in std::mem::take(&mut self.retired.transfers) {
                if !self.local.as_mut().is_some_and(|l| l.transfer_done(sm, id)) {
                    self.events.push(Event::TransferDone { cycle: now, sm, id });
                }
            }
            for (context, hold) in std::mem::take(&mut self.retired.switched) {
                self.switched_out(sm, context, hold, now);
            }
            for tb in self.retired.stopped.drain(..) {
                self.events.push(Event::TbStopped { cycle: now, sm, tb });
            }
            for (tb, warp) in self.retired.routines.drain(..) {
                self.events.push(Event::RoutineDone {
                    cycle: now,
                    sm,
                    tb,
                    warp,
                });
            }
            for checkpoint in self.retired.checkpoints.drain(..) {
                self.events.push(Event::CheckpointDone {
                    cycle: now,
                    sm,
                    checkpoint: Box::new(checkpoint),
                });
            }
            for tb in self.retired.due.drain(..) {
                self.events
                    .push(Event::CheckpointDue { cycle: now, sm, tb });
            }
        }
        if !last_tbs.is_empty() {
            self.show_events();
            let sms = self.sm_stats();
            for l in last_tbs {
                self.launches[l.index()].at_last_tb = Some(sms.clone());
            }
        }
        // TB switching on fault: the SMs' local schedulers go before the control, so
        // that a switched-out TB ready to resume takes the room before a new TB.
        self.local_schedule(now)?;
        // Extra TBs (papers/lin-thesis ch. 3): each SM's context switching logic.
        if !self.gpu.sm.tlp.is_off() {
            for sm in &mut self.sms {
                sm.tlp_step(&self.launches, now);
            }
            if !self.monitors.is_empty() {
                self.tlp_monitor();
            }
        }
        self.show_events();
        ctl.on_cycle(self)?;
        self.show_events();
        let interval = self.opts.sample_interval.max(1);
        if now.is_multiple_of(interval) {
            let warps = self.sms.iter().map(Sm::resident_warps).sum();
            self.occupancy.push((now, warps));
        }
        self.finish_launches(now)?;
        self.memsys.tick_core();
        Ok(())
    }

    /// Every SM's part of cycle `now`: it takes its completed accesses, then its schedulers
    /// issue (ARCHITECTURE.md, "Parallel stepping"). With the backend's ports, each SM
    /// touches only its own state, its own port and its own counters, and reads the
    /// launches and device memory as the cycle began (its writes wait in its log): so the
    /// SMs run on the machine's threads, and the result is the same on any number. The
    /// error of the lowest SM that failed is reported.
    fn step_sms(&mut self, now: u64) -> Result<(), ExecError> {
        let specs = Specs {
            pipeline: &self.gpu.pipeline,
            memory: &self.memcfg,
        };
        let (launches, mem) = (&self.launches[..], &self.mem);
        let probe_hears_sms = self
            .probe
            .as_ref()
            .is_some_and(|p| p.interests().hears_sms());
        if !probe_hears_sms {
            if let Some(ports) = self.memsys.ports() {
                type Item<'m, P> = ((&'m mut Sm, P), SmCounters<'m>);
                let one = |((sm, port), counters): &mut Item<'_, B::Port<'_>>| {
                    // A sleeping SM with no completion waiting would only repeat its last
                    // cycle: skipped, and its counters tally it (`Doze`).
                    if let Some(doze) = sm.dozing(now) {
                        if !port.completions_waiting() && counters.repeats(doze) {
                            counters.skipped();
                            return Ok(());
                        }
                    }
                    let mut watch = Watch::new(counters.reborrow(), None);
                    sm.complete(port, launches, &mut watch, now);
                    sm.issue(launches, &specs, port, mem, &mut watch, now)
                };
                let items = self.sms.iter_mut().zip(ports).zip(self.counters.per_sm());
                let Some(team) = &self.team else {
                    // One thread: straight through, nothing collected.
                    for mut item in items {
                        one(&mut item)?;
                    }
                    return Ok(());
                };
                let mut items: Vec<Item<'_, B::Port<'_>>> = items.collect();
                // Chunks in SM order, each stopping at its first error: the first error of
                // the first failing chunk is the lowest SM's.
                let results =
                    team.for_chunks(&mut items, |chunk| chunk.iter_mut().try_for_each(one));
                return results.into_iter().collect();
            }
        }
        // One SM after another through the backend; an attached probe hears them in SM
        // order, every completion before any issue.
        for (i, sm) in self.sms.iter_mut().enumerate() {
            let id = SmId(i as u32);
            let mut watch = Watch::new(self.counters.of_sm(id), self.probe.as_deref_mut());
            let mut port = Through {
                backend: &mut self.memsys,
                sm: id,
            };
            sm.complete(&mut port, launches, &mut watch, now);
        }
        for (i, sm) in self.sms.iter_mut().enumerate() {
            let id = SmId(i as u32);
            let mut watch = Watch::new(self.counters.of_sm(id), self.probe.as_deref_mut());
            let mut port = Through {
                backend: &mut self.memsys,
                sm: id,
            };
            sm.issue(launches, &specs, &mut port, mem, &mut watch, now)?;
        }
        Ok(())
    }

    /// Steps until the core cycle `cycle` (or not at all if it has passed), with `ctl`
    /// placing TBs.
    pub fn run_until(&mut self, cycle: u64, ctl: &mut dyn Control<B>) -> Result<(), TimingError> {
        while self.cycle() < cycle {
            self.step(ctl)?;
        }
        Ok(())
    }

    /// Steps until `launch` has finished, with `ctl` placing TBs.
    pub fn run_until_finished(
        &mut self,
        launch: LaunchId,
        ctl: &mut dyn Control<B>,
    ) -> Result<&TimedStats, TimingError> {
        while self.launches[launch.index()].finished_at.is_none() {
            self.step(ctl)?;
        }
        Ok(self.launches[launch.index()]
            .stats()
            .expect("a finished launch has statistics"))
    }

    /// Every SM's counters now (front end included; the events are shown).
    fn sm_stats(&mut self) -> Vec<SmStats> {
        self.counters.settle();
        self.sms
            .iter()
            .zip(self.counters.sms())
            .map(|(s, c)| SmStats {
                frontend: s.frontend_stats(),
                ..c.clone()
            })
            .collect()
    }

    pub(super) fn snapshot(&mut self) -> Snapshot {
        Snapshot {
            memory: self.memsys.stats(),
            sms: self.sm_stats(),
        }
    }

    /// A launch's accesses in flight, summed over SMs.
    fn in_flight(&self, launch: LaunchId) -> u64 {
        self.sms.iter().map(|sm| sm.in_flight(launch)).sum()
    }

    /// Stops a launch that broke its instruction rule ([`crate::limits`]); progress counts
    /// from the check that first sees a TB finished.
    fn check_instruction_limit(&mut self) -> Result<(), TimingError> {
        for i in 0..self.active.len() {
            let l = self.active[i];
            let executed = self.counters.launch(l).warp_instructions;
            let launch = &mut self.launches[l.index()];
            if launch.done != launch.progress.done {
                launch.progress.done = launch.done;
                launch.progress.instructions = executed;
            }
            let since = executed - launch.progress.instructions;
            if launch.instruction_limit.exceeded(executed, since) {
                let kernel = launch.ctx.kernel.name.clone();
                return Err(match launch.instruction_limit {
                    Limit::Total(limit) => ExecError::InstructionLimit { kernel, limit },
                    Limit::WithoutProgress(limit) => ExecError::NoProgress { kernel, limit },
                }
                .into());
            }
        }
        Ok(())
    }

    /// Finishes launches whose TBs are done and whose accesses have completed; stops at the
    /// cycle limit a launch that has run too long.
    fn finish_launches(&mut self, now: u64) -> Result<(), TimingError> {
        let mut i = 0;
        while i < self.active.len() {
            let id = self.active[i];
            let l = &mut self.launches[id.index()];
            if l.done < l.total {
                if l.resident > 0 {
                    l.progress.stalled_cycles += 1;
                }
                let (spent, since) = (now - l.submitted_at, l.progress.stalled_cycles);
                // A total counts every cycle from submission, as before (`>=`: the cycle
                // that reaches it is the last one allowed).
                if l.max_cycles.exceeded(spent + 1, since) {
                    let kernel = l.ctx.kernel.name.clone();
                    return Err(match l.max_cycles {
                        Limit::Total(limit) => TimingError::CycleLimit { kernel, limit },
                        Limit::WithoutProgress(limit) => TimingError::NoProgress { kernel, limit },
                    });
                }
                i += 1;
                continue;
            }
            if self.in_flight(id) > 0 {
                i += 1;
                continue;
            }
            let counters = self.counters.launch(id);
            let stats = self.launch_stats(id, &counters, now);
            let l = &mut self.launches[id.index()];
            l.finished_at = Some(now);
            l.stats = Some(Box::new(stats));
            l.free_frames(&mut self.mem);
            if l.tlp.extra > 0 {
                for sm in &mut self.sms {
                    sm.set_tlp(id, None);
                }
            }
            self.stop_monitor(id);
            self.active.remove(i);
            self.events.push(Event::LaunchFinished {
                cycle: now,
                launch: id,
            });
        }
        Ok(())
    }

    /// The statistics of launch `id`, finishing at `now`.
    fn launch_stats(&mut self, id: LaunchId, k: &LaunchTally, now: u64) -> TimedStats {
        let memory_now = self.memsys.stats();
        let interval = self.opts.sample_interval.max(1);
        let l = &mut self.launches[id.index()];
        let start = l
            .start
            .take()
            .expect("a launch keeps its starting snapshot");
        let at_last = l.at_last_tb.take().expect("the last TB has finished");
        let last_tb = l.last_tb_at.expect("the last TB has finished");
        let memory = memory_now.since(&start.memory);
        let sms: Vec<SmStats> = at_last
            .iter()
            .zip(&start.sms)
            .map(|(a, b)| a.since(b))
            .collect();
        let mut schedulers = SchedulerStats::default();
        for sm in &sms {
            for s in &sm.schedulers {
                schedulers.add(s);
            }
        }
        let (warp_cycles, active): (u64, u64) = sms.iter().fold((0, 0), |(w, a), s| {
            (w + s.resident_warp_cycles, a + s.active_cycles)
        });
        let from = self.occupancy.partition_point(|&(c, _)| c < l.submitted_at);
        let to = self.occupancy.partition_point(|&(c, _)| c <= last_tb);
        let cycles = (now - l.submitted_at).max(1);
        let res = &self.gpu.sm.resources;
        TimedStats {
            kernel: l.ctx.kernel.name.clone(),
            gpu: self.gpu.name.clone(),
            cycles,
            cycles_to_last_tb: last_tb - l.submitted_at,
            submitted_at: l.submitted_at,
            started_at: l.started_at.unwrap_or(l.submitted_at),
            finished_at: now,
            tbs: l.total,
            warps: l.total * u64::from(l.warps_per_tb()),
            warp_instructions: k.warp_instructions,
            thread_instructions: k.thread_instructions,
            ipc: k.warp_instructions as f64 / cycles as f64,
            tbs_per_sm: l.occupancy.tbs_per_sm,
            extra_tbs: l.tlp.extra,
            context_registers: l.context_registers,
            l1_store: l.l1_store,
            occupancy_limit: l.occupancy.clone(),
            regs_per_thread: l.regs_per_thread,
            achieved_occupancy: if active == 0 {
                0.0
            } else {
                warp_cycles as f64 / active as f64 / f64::from(res.max_warps)
            },
            occupancy: OccupancyTrace {
                interval,
                warps: self.occupancy[from..to].iter().map(|&(_, w)| w).collect(),
            },
            global_loads: k.global_loads,
            mean_load_latency: if k.global_loads == 0 {
                0.0
            } else {
                k.load_latency as f64 / k.global_loads as f64
            },
            shared_accesses: k.shared_accesses,
            shared_passes: k.shared_passes,
            frontend: frontend_total(&sms),
            utilisation: Utilisation::of(&schedulers, &memory, &self.memcfg),
            rates: Rates::of(&memory, &self.memcfg),
            schedulers,
            sms,
            memory,
        }
    }
}
