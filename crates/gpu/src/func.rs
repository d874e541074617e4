//! The functional-only driver: runs a whole grid, one TB after another, interleaving the
//! warps of a TB round-robin with a fixed quantum. The order is fixed, so atomics and every
//! result are deterministic.
//!
//! Barrier semantics (PTX `bar.sync a{, b}`): a barrier completes when the expected number of
//! threads has arrived — `b` if given, else every thread of the TB that has not exited. The
//! model counts whole warps (a warp arrives once, with whichever lanes are active), as
//! pre-Volta hardware does. When every live warp waits and no barrier can complete, the TB
//! is deadlocked, and that is reported with each warp's PC instead of hanging.

use crate::error::{ExecError, WaitingWarp};
use crate::exec::{step, BarrierArrival, LaunchCtx, Step, TbView, Warp, WARP_SIZE};
use crate::memory::DeviceMemory;
use kir::inst::BarKind;
use kir::Id;

/// Instructions a warp runs before the driver moves to the next warp.
const QUANTUM: u32 = 256;

/// Counters of a functional launch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LaunchStats {
    pub tbs: u64,
    pub warps: u64,
    pub warp_instructions: u64,
    pub thread_instructions: u64,
}

impl LaunchStats {
    pub fn add(&mut self, o: &LaunchStats) {
        self.tbs += o.tbs;
        self.warps += o.warps;
        self.warp_instructions += o.warp_instructions;
        self.thread_instructions += o.thread_instructions;
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WarpStatus {
    Ready,
    Waiting(BarrierArrival),
    Done,
}

/// Barrier bookkeeping of one TB (16 named barriers, as PTX defines).
#[derive(Default)]
struct Barriers {
    /// Warps arrived at each barrier id since it last completed.
    arrived: [u32; 16],
    /// Reduction accumulator per barrier id (popc sum, and, or).
    reduce: [u32; 16],
}

/// Runs every TB of the launch to completion.
pub fn run(
    ctx: &LaunchCtx<'_>,
    mem: &mut DeviceMemory,
    limit: u64,
) -> Result<LaunchStats, ExecError> {
    let mut stats = LaunchStats::default();
    let mut shared = vec![0u8; ctx.smem_size as usize];
    for linear in 0..ctx.num_tbs() {
        shared.fill(0);
        let mut tb = TbView {
            ctaid: ctx.ctaid(linear),
            shared: &mut shared,
            sm: (linear % ctx.num_sms.max(1) as u64) as u32,
        };
        let s = run_tb(
            ctx,
            &mut tb,
            mem,
            limit.saturating_sub(stats.warp_instructions),
        )?;
        stats.add(&s);
    }
    Ok(stats)
}

fn run_tb(
    ctx: &LaunchCtx<'_>,
    tb: &mut TbView<'_>,
    mem: &mut DeviceMemory,
    limit: u64,
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
            if release(&mut bars, &mut status, &mut warps) {
                progressed = true;
            }
        }
        if status.iter().all(|s| *s == WarpStatus::Done) {
            break;
        }
        if release(&mut bars, &mut status, &mut warps) {
            continue;
        }
        if !progressed || status.iter().all(|s| *s != WarpStatus::Ready) {
            let waiting = status
                .iter()
                .enumerate()
                .filter_map(|(i, s)| match s {
                    WarpStatus::Waiting(a) => Some(WaitingWarp {
                        warp: i as u32,
                        pc: a.pc,
                        location: ctx.location(a.pc),
                        barrier: a.id,
                    }),
                    _ => None,
                })
                .collect();
            return Err(ExecError::BarrierDeadlock {
                kernel: ctx.kernel.name.clone(),
                ctaid: tb.ctaid,
                waiting,
                exited_warps: status.iter().filter(|s| **s == WarpStatus::Done).count() as u32,
            });
        }
    }
    Ok(LaunchStats {
        tbs: 1,
        warps: n as u64,
        warp_instructions: warps.iter().map(|w| w.executed).sum(),
        thread_instructions: warps.iter().map(|w| w.thread_executed).sum(),
    })
}

impl Barriers {
    fn arrive(&mut self, a: &BarrierArrival) {
        let id = a.id as usize;
        if self.arrived[id] == 0 {
            self.reduce[id] = match a.reduction.map(|r| r.kind) {
                Some(BarKind::RedAnd) => 1,
                _ => 0,
            };
        }
        self.arrived[id] += 1;
        if let Some(r) = a.reduction {
            self.reduce[id] = match r.kind {
                BarKind::RedPopc => self.reduce[id] + r.partial,
                BarKind::RedAnd => self.reduce[id] & r.partial,
                _ => self.reduce[id] | r.partial,
            };
        }
    }
}

/// Completes every barrier whose expected warps have all arrived; true if one did.
fn release(bars: &mut Barriers, status: &mut [WarpStatus], warps: &mut [Warp]) -> bool {
    let live = status.iter().filter(|s| **s != WarpStatus::Done).count() as u32;
    let mut any = false;
    for id in 0..16usize {
        if bars.arrived[id] == 0 {
            continue;
        }
        // The expected count comes from any waiting warp's instruction (they agree in
        // well-formed code; the first one is taken).
        let count = status.iter().find_map(|s| match s {
            WarpStatus::Waiting(a) if a.id as usize == id => Some(a.count),
            _ => None,
        });
        let Some(count) = count else {
            continue;
        };
        let expected = match count {
            Some(c) => c.div_ceil(WARP_SIZE as u32),
            None => live,
        };
        if bars.arrived[id] < expected {
            continue;
        }
        let total = bars.reduce[id];
        for (w, s) in status.iter_mut().enumerate() {
            if let WarpStatus::Waiting(a) = *s {
                if a.id as usize == id {
                    if let Some(r) = a.reduction {
                        if let Some(dst) = r.dst {
                            let base = dst.index() * WARP_SIZE;
                            let mut m = r.mask;
                            while m != 0 {
                                let l = m.trailing_zeros() as usize;
                                m &= m - 1;
                                warps[w].regs[base + l] = total as u64;
                            }
                        }
                    }
                    *s = WarpStatus::Ready;
                }
            }
        }
        bars.arrived[id] = 0;
        any = true;
    }
    any
}
