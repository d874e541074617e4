//! The functional-only driver: runs a whole grid, one TB after another, interleaving the
//! warps of a TB round-robin with a fixed quantum. The order is fixed, so atomics and every
//! result are deterministic.
//!
//! Barrier semantics (PTX `bar.sync a{, b}`): a barrier completes when the expected number of
//! threads has arrived — `b` if given, else every thread of the TB that has not exited. The
//! model counts whole warps (a warp arrives once, with whichever lanes are active), as
//! pre-Volta hardware does. When every live warp waits and no barrier can complete, the TB
//! is deadlocked, and that is reported with each warp's PC instead of hanging.

use crate::barrier::{deadlock, Barriers, TbWarps, WarpStatus};
use crate::error::ExecError;
use crate::exec::{step, LaunchCtx, Step, TbView, Warp};
use crate::limits::Limit;
use crate::memory::DeviceMemory;
use crate::timing::Progress;

/// Instructions a warp runs before the driver moves to the next warp.
const QUANTUM: u32 = 256;

/// Counters of a launch, counted the same way by both engines. Every instruction a warp
/// issues is one warp instruction: `ret`, `exit` (also the one lowering places at the end of
/// every kernel, when control reaches it), branches, barriers, and instructions whose guard
/// predicate is false in every lane all count. Thread instructions add the lanes active in
/// the warp's SIMT mask when it issues, before the guard predicate: a lane whose guard is
/// false still counts; a lane that has exited, or is waiting on the other side of a branch,
/// does not.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LaunchStats {
    pub tbs: u64,
    pub warps: u64,
    pub warp_instructions: u64,
    pub thread_instructions: u64,
}

impl From<&crate::timing::TimedStats> for LaunchStats {
    /// The counts a functional launch reports, of a timed launch.
    fn from(s: &crate::timing::TimedStats) -> LaunchStats {
        LaunchStats {
            tbs: s.tbs,
            warps: s.warps,
            warp_instructions: s.warp_instructions,
            thread_instructions: s.thread_instructions,
        }
    }
}

impl LaunchStats {
    pub fn add(&mut self, o: &LaunchStats) {
        self.tbs += o.tbs;
        self.warps += o.warps;
        self.warp_instructions += o.warp_instructions;
        self.thread_instructions += o.thread_instructions;
    }
}

/// Something that looks at, and may change, a warp just before each of its instructions
/// executes on the functional driver: a test's probe, a tracer, a fault injector.
pub trait StepHook {
    fn before_step(
        &mut self,
        ctx: &LaunchCtx,
        tb: &mut TbView<'_>,
        warp: &mut Warp,
        mem: &mut DeviceMemory,
    );
}

/// The hook of a plain run: nothing (compiled away).
struct NoHook;

impl StepHook for NoHook {
    #[inline(always)]
    fn before_step(
        &mut self,
        _: &LaunchCtx,
        _: &mut TbView<'_>,
        _: &mut Warp,
        _: &mut DeviceMemory,
    ) {
    }
}

/// Runs every TB of the launch to completion, stopping a runaway by `limit` (a number is a
/// total, [`Limit::Total`]).
pub fn run(
    ctx: &LaunchCtx,
    mem: &mut DeviceMemory,
    limit: impl Into<Limit>,
) -> Result<LaunchStats, ExecError> {
    run_tbs(ctx, mem, limit.into(), &mut NoHook, &mut |_| {})
}

/// [`run`], calling `progress` after every TB (its `cycle` stays 0: the functional core has
/// no clock).
pub fn run_reporting(
    ctx: &LaunchCtx,
    mem: &mut DeviceMemory,
    limit: impl Into<Limit>,
    progress: &mut dyn FnMut(Progress),
) -> Result<LaunchStats, ExecError> {
    run_tbs(ctx, mem, limit.into(), &mut NoHook, progress)
}

/// [`run`], calling `hook` before every warp instruction.
pub fn run_with_hook<H: StepHook>(
    ctx: &LaunchCtx,
    mem: &mut DeviceMemory,
    limit: impl Into<Limit>,
    hook: &mut H,
) -> Result<LaunchStats, ExecError> {
    run_tbs(ctx, mem, limit.into(), hook, &mut |_| {})
}

fn run_tbs<H: StepHook>(
    ctx: &LaunchCtx,
    mem: &mut DeviceMemory,
    limit: Limit,
    hook: &mut H,
    progress: &mut dyn FnMut(Progress),
) -> Result<LaunchStats, ExecError> {
    let mut stats = LaunchStats::default();
    let mut shared = vec![0u8; ctx.smem_size as usize];
    // One TB runs at a time, so one local-memory frame serves them all; it starts zeroed for
    // every TB, as a fresh TB's local memory reads zero in every engine of this simulator.
    let frame = vec![0u8; ctx.local_frame_bytes() as usize];
    let local_base = if frame.is_empty() {
        0
    } else {
        mem.alloc(frame.len() as u64)
    };
    let result = (|| {
        for linear in 0..ctx.num_tbs() {
            shared.fill(0);
            if !frame.is_empty() {
                mem.write_bytes(local_base, &frame)
                    .expect("the frame was allocated with this size");
            }
            let mut tb = TbView {
                ctaid: ctx.ctaid(linear),
                shared: &mut shared,
                sm: (linear % ctx.num_sms.max(1) as u64) as u32,
                clock: None,
                local_base,
            };
            // One TB runs at a time, so a TB finishing is the launch's progress: under the
            // progress rule each TB may run the whole window. Under a total, each TB may run
            // what the earlier ones left of it, and a TB that runs past it is reported
            // against the launch's total, the one the user set.
            let tb_limit = match limit {
                Limit::Total(n) => n.saturating_sub(stats.warp_instructions),
                Limit::WithoutProgress(n) => n,
            };
            let s = run_tb(ctx, &mut tb, mem, tb_limit, hook).map_err(|e| match e {
                ExecError::InstructionLimit { kernel, .. } => match limit {
                    Limit::Total(limit) => ExecError::InstructionLimit { kernel, limit },
                    Limit::WithoutProgress(limit) => ExecError::NoProgress { kernel, limit },
                },
                e => e,
            })?;
            stats.add(&s);
            progress(Progress {
                cycle: 0,
                tbs_done: linear + 1,
                tbs_total: ctx.num_tbs(),
                warp_instructions: stats.warp_instructions,
            });
        }
        Ok(stats)
    })();
    if !frame.is_empty() {
        mem.free(local_base);
    }
    result
}

fn run_tb<H: StepHook>(
    ctx: &LaunchCtx,
    tb: &mut TbView<'_>,
    mem: &mut DeviceMemory,
    limit: u64,
    hook: &mut H,
) -> Result<LaunchStats, ExecError> {
    let n = ctx.warps_per_tb();
    let mut warps: Vec<Warp> = (0..n).map(|i| Warp::new(ctx, i)).collect();
    let mut status = vec![WarpStatus::Ready; n as usize];
    let mut bars = Barriers::default();
    let mut executed = 0u64;
    loop {
        let mut progressed = false;
        for w in 0..n as usize {
            if status[w] != WarpStatus::Ready {
                continue;
            }
            for _ in 0..QUANTUM {
                hook.before_step(ctx, tb, &mut warps[w], mem);
                match step(ctx, tb, &mut warps[w], mem)? {
                    Step::Executed => {}
                    Step::Barrier(a) => {
                        bars.arrive(&a);
                        if a.wait {
                            status[w] = WarpStatus::Waiting(a);
                        }
                        break;
                    }
                    Step::Done => {
                        status[w] = WarpStatus::Done;
                        break;
                    }
                }
            }
            progressed = true;
            executed += QUANTUM as u64;
            if executed > limit {
                let done: u64 = warps.iter().map(|w| w.executed).sum();
                if done > limit {
                    return Err(ExecError::InstructionLimit {
                        kernel: ctx.kernel.name.clone(),
                        limit,
                    });
                }
            }
            if bars.release(&mut FuncWarps(&mut status, &mut warps)) {
                progressed = true;
            }
        }
        if status.iter().all(|s| *s == WarpStatus::Done) {
            break;
        }
        if bars.release(&mut FuncWarps(&mut status, &mut warps)) {
            continue;
        }
        if !progressed || status.iter().all(|s| *s != WarpStatus::Ready) {
            return Err(deadlock(ctx, tb.ctaid, &FuncWarps(&mut status, &mut warps)));
        }
    }
    Ok(LaunchStats {
        tbs: 1,
        warps: n as u64,
        warp_instructions: warps.iter().map(|w| w.executed).sum(),
        thread_instructions: warps.iter().map(|w| w.thread_executed).sum(),
    })
}

/// The functional driver keeps statuses and warps in parallel vectors.
struct FuncWarps<'a>(&'a mut [WarpStatus], &'a mut [Warp]);

impl TbWarps for FuncWarps<'_> {
    fn warp_count(&self) -> usize {
        self.1.len()
    }
    fn get(&self, i: usize) -> (WarpStatus, &Warp) {
        (self.0[i], &self.1[i])
    }
    fn get_mut(&mut self, i: usize) -> (&mut WarpStatus, &mut Warp) {
        (&mut self.0[i], &mut self.1[i])
    }
}
