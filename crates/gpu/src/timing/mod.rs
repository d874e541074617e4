//! The cycle-level timing model: SMs with warp schedulers, a scoreboard and functional
//! units, driving the memory-hierarchy model of the `memsys` crate, with a TB dispatcher
//! bounded by occupancy (DESIGN.md §2, "Timing model").
//!
//! Values stay real: an instruction executes functionally ([`crate::exec::step`]) at the
//! cycle it issues, so results are those of the functional core and the timing model only
//! decides the order and the cycle of each issue (DESIGN.md §1.2). Atomics therefore happen
//! in timing order, which may differ from the functional driver's order.
//!
//! * [`spec`]: the pipeline description (operation classes, latencies, intervals, units).
//! * [`scheduler`]: the [`WarpScheduler`] trait and LRR, GTO and two-level policies.
//! * [`stats`]: [`TimedStats`], per-scheduler stall reasons.
//! * `sm`: one SM (issue, scoreboard, memory path); `barrier`: barrier bookkeeping.
//!
//! **One cycle** (core clock), in a fixed order so results are deterministic (DESIGN.md §1.5):
//! completed memory accesses release their registers; every SM, in index order, runs its
//! schedulers in index order, each issuing at most one warp instruction; barriers complete and
//! finished TBs leave; each SM with a free TB slot receives at most one new TB (lowest linear
//! index first, SMs in index order); the memory system advances to the next core edge.
//!
//! **Dispatch.** TBs per SM come from [`crate::occupancy::Occupancy::of`]. Registers per thread
//! are [`TimingOptions::regs_per_thread`] when given, otherwise the count of the `regalloc`
//! allocator (what `ptxas -v` would report, within the margin `regalloc/REGISTERS.md`
//! measures) under the SM's `max_registers_per_thread`. The timed kernel itself is not
//! rewritten: a kernel the allocator would spill is timed without its spill code. Should
//! allocation fail, the virtual register count, capped, stands in.
//!
//! **End of a launch.** When the last TB has finished, the memory system runs until every
//! store is acknowledged; `cycles` includes that drain. Each launch starts with a fresh
//! memory system (cold caches).

mod frontend;
pub mod scheduler;
mod sm;
pub mod spec;
pub mod stats;

use memsys::{Domain, MemorySystem};
use serde::{Deserialize, Serialize};

use crate::config::GpuConfig;
use crate::error::ExecError;
use crate::exec::LaunchCtx;
use crate::memory::DeviceMemory;
use crate::occupancy::{Occupancy, TbDemand};

pub use scheduler::{AnyScheduler, Gto, Lrr, TwoLevel, WarpInfo, WarpScheduler};
pub use spec::{FetchSpec, OpClass, OpTiming, PipelineSpec, Unit};
pub use stats::{
    FrontendStats, OccupancyTrace, Rates, SchedulerStats, SmStats, StallReason, TimedStats,
    Utilisation, UtilisationClass,
};

use sm::{Env, Sm};

/// Settings of a timed run that are not part of the GPU configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TimingOptions {
    /// Registers per thread for occupancy (see the module documentation for the default).
    pub regs_per_thread: Option<u32>,
    /// A launch still running after this many core cycles is stopped with an error.
    pub max_cycles: u64,
    /// Warp instructions one launch may execute before it is stopped as a runaway.
    pub instruction_limit: u64,
    /// Core cycles between two samples of the occupancy trace ([`TimedStats::occupancy`]).
    pub sample_interval: u64,
    /// The engine's exact speed shortcuts (an SM sleeping through cycles that would repeat,
    /// a refused access known to be refused again, lazy warp checks along an LRR/GTO order;
    /// see `sm`). They never change a result; turning them off checks exactly that.
    pub shortcuts: bool,
}

impl Default for TimingOptions {
    fn default() -> Self {
        TimingOptions {
            regs_per_thread: None,
            max_cycles: 1 << 32,
            instruction_limit: 1 << 36,
            sample_interval: 1000,
            shortcuts: true,
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
    #[error("kernel `{kernel}` did not finish within {limit} cycles")]
    CycleLimit { kernel: String, limit: u64 },
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
    pub fn new(gpu: GpuConfig) -> TimedGpu {
        TimedGpu {
            gpu,
            options: TimingOptions::default(),
        }
    }

    /// Runs one launch to completion; see [`run_timed`].
    pub fn launch(
        &self,
        ctx: &LaunchCtx,
        mem: &mut DeviceMemory,
    ) -> Result<TimedStats, TimingError> {
        run_timed(ctx, mem, &self.gpu, &self.options, &mut |_| {})
    }
}

/// Registers per thread of `kernel` after allocation under `max` (see the module docs).
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

/// Runs every TB of a launch on the timed GPU, updating `mem` exactly as the functional core
/// would (up to the order of atomics), and calls `progress` every [`PROGRESS_INTERVAL`] core
/// cycles.
pub fn run_timed(
    ctx: &LaunchCtx,
    mem: &mut DeviceMemory,
    gpu: &GpuConfig,
    opts: &TimingOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<TimedStats, TimingError> {
    let kernel = &ctx.kernel.name;
    let mut memcfg = gpu.memory.clone();
    memcfg.num_sms = gpu.sm.count as usize;
    memcfg.clocks.core_mhz = gpu.sm.clock_mhz;
    let mut memsys = MemorySystem::new(memcfg.clone())?;

    let res = &gpu.sm.resources;
    let regs = opts
        .regs_per_thread
        .unwrap_or_else(|| physical_registers(&ctx.kernel, res.max_registers_per_thread));
    let demand = TbDemand::for_kernel(res, ctx.threads_per_tb(), regs, ctx.smem_size);
    let occ = Occupancy::of(res, &demand);
    if occ.tbs_per_sm == 0 {
        return Err(TimingError::DoesNotFit {
            kernel: kernel.clone(),
            gpu: gpu.name.clone(),
            threads: ctx.threads_per_tb(),
            regs_per_thread: regs,
            smem: ctx.smem_size,
        });
    }
    let warps_per_tb = ctx.warps_per_tb();
    let mut sms: Vec<Sm> = (0..gpu.sm.count)
        .map(|i| {
            let scheds = (0..gpu.sm.warp_schedulers)
                .map(|_| AnyScheduler::new(gpu.sm.scheduler, gpu.pipeline.two_level_active))
                .collect();
            Sm::new(
                i,
                occ.tbs_per_sm,
                warps_per_tb,
                scheds,
                &gpu.pipeline,
                opts.shortcuts,
            )
        })
        .collect();
    let mut env = Env {
        ctx,
        spec: &gpu.pipeline,
        memcfg: &memcfg,
        frame_words: u64::from(ctx.kernel.local_size.div_ceil(4)),
        frame_bytes: ctx.local_frame_bytes(),
        frames: if ctx.local_frame_bytes() == 0 {
            Vec::new()
        } else {
            (0..gpu.sm.count * occ.tbs_per_sm)
                .map(|_| mem.alloc(ctx.local_frame_bytes()))
                .collect()
        },
        global_loads: 0,
        load_latency: 0,
        shared_accesses: 0,
        shared_passes: 0,
        warp_instructions: 0,
        thread_instructions: 0,
        decoded: sm::Decoded::of(&ctx.kernel),
    };

    let total = ctx.num_tbs();
    let mut next_tb = 0u64;
    let mut resident = 0u64;
    let mut tbs_done = 0u64;
    let interval = opts.sample_interval.max(1);
    let mut trace = OccupancyTrace {
        interval,
        warps: Vec::new(),
    };
    let core_step = |m: &mut MemorySystem| while !m.tick().contains(Domain::Core) {};
    let last_tb_cycle = loop {
        let now = memsys.core_cycle();
        for sm in &mut sms {
            sm.complete(&mut memsys, &mut env, now);
        }
        for sm in &mut sms {
            sm.issue(&mut env, &mut memsys, mem, now)?;
        }
        if env.warp_instructions > opts.instruction_limit {
            return Err(ExecError::InstructionLimit {
                kernel: kernel.clone(),
                limit: opts.instruction_limit,
            }
            .into());
        }
        for sm in &mut sms {
            let r = u64::from(sm.retire(ctx)?);
            resident -= r;
            tbs_done += r;
        }
        for sm in &mut sms {
            if next_tb < total && sm.has_free_tb_slot() {
                sm.dispatch(&env, mem, next_tb, now);
                next_tb += 1;
                resident += 1;
            }
        }
        if now.is_multiple_of(interval) {
            trace.warps.push(sms.iter().map(Sm::resident_warps).sum());
        }
        if now.is_multiple_of(PROGRESS_INTERVAL) {
            progress(Progress {
                cycle: now,
                tbs_done,
                tbs_total: total,
                warp_instructions: env.warp_instructions,
            });
        }
        if next_tb == total && resident == 0 && sms.iter().all(|s| !s.has_backlog()) {
            break now;
        }
        if now >= opts.max_cycles {
            return Err(TimingError::CycleLimit {
                kernel: kernel.clone(),
                limit: opts.max_cycles,
            });
        }
        core_step(&mut memsys);
    };
    // Drain stores (their completions carry no tag and are dropped).
    loop {
        for sm in &mut sms {
            let now = memsys.core_cycle();
            sm.complete(&mut memsys, &mut env, now);
        }
        if memsys.is_idle() {
            break;
        }
        core_step(&mut memsys);
    }

    let cycles = memsys.core_cycle().max(1);
    let mut frontend = FrontendStats::default();
    for sm in &mut sms {
        sm.stats.frontend = sm.frontend_stats();
        frontend.add(&sm.stats.frontend);
    }
    let mut schedulers = SchedulerStats::default();
    for sm in &sms {
        for s in &sm.stats.schedulers {
            schedulers.add(s);
        }
    }
    let (warp_cycles, active): (u64, u64) = sms.iter().fold((0, 0), |(w, a), s| {
        (w + s.stats.resident_warp_cycles, a + s.stats.active_cycles)
    });
    let memory = memsys.stats();
    Ok(TimedStats {
        kernel: kernel.clone(),
        gpu: gpu.name.clone(),
        cycles,
        cycles_to_last_tb: last_tb_cycle,
        tbs: total,
        warps: total * u64::from(warps_per_tb),
        warp_instructions: env.warp_instructions,
        thread_instructions: env.thread_instructions,
        ipc: env.warp_instructions as f64 / cycles as f64,
        tbs_per_sm: occ.tbs_per_sm,
        occupancy_limit: occ,
        regs_per_thread: regs,
        achieved_occupancy: if active == 0 {
            0.0
        } else {
            warp_cycles as f64 / active as f64 / f64::from(res.max_warps)
        },
        occupancy: trace,
        global_loads: env.global_loads,
        mean_load_latency: if env.global_loads == 0 {
            0.0
        } else {
            env.load_latency as f64 / env.global_loads as f64
        },
        shared_accesses: env.shared_accesses,
        shared_passes: env.shared_passes,
        frontend,
        utilisation: Utilisation::of(&schedulers, &memory, &memcfg),
        rates: Rates::of(&memory, &memcfg),
        schedulers,
        sms: sms.into_iter().map(|s| s.stats).collect(),
        memory,
    })
}
