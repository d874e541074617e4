//! Barrier bookkeeping of one TB, shared by the functional driver ([`crate::func`]) and the
//! timing engine ([`crate::timing`]).
//!
//! Semantics (PTX `bar.sync a{, b}`): a barrier completes when the expected number of threads
//! has arrived — `b` rounded up to whole warps if given, else every warp of the TB that has
//! not exited. A warp arrives once, with whichever lanes are active (pre-Volta). `bar.red`
//! reduces a predicate over the arriving warps and hands every waiting warp the result.

use kir::inst::BarKind;
use kir::Id;

use crate::error::{ExecError, WaitingWarp};
use crate::exec::{BarrierArrival, LaunchCtx, Warp, WARP_SIZE};

/// Where a warp stands with respect to barriers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WarpStatus {
    Ready,
    Waiting(BarrierArrival),
    Done,
}

/// A TB's warps as the barrier logic sees them, whatever container a driver keeps them in.
pub trait TbWarps {
    fn warp_count(&self) -> usize;
    fn get(&self, i: usize) -> (WarpStatus, &Warp);
    fn get_mut(&mut self, i: usize) -> (&mut WarpStatus, &mut Warp);
}

/// The 16 named barriers of a TB.
#[derive(Clone, Debug, Default)]
pub struct Barriers {
    /// Warps arrived at each barrier id since it last completed.
    arrived: [u32; 16],
    /// Reduction accumulator per barrier id (popc sum, and, or).
    reduce: [u32; 16],
}

impl Barriers {
    /// Records a warp's arrival (and its `bar.red` partial result).
    pub fn arrive(&mut self, a: &BarrierArrival) {
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

    /// Completes every barrier whose expected warps have all arrived, making their warps
    /// ready and writing `bar.red` results; true if one did.
    pub fn release(&mut self, warps: &mut impl TbWarps) -> bool {
        if self.arrived.iter().all(|&a| a == 0) {
            return false;
        }
        let n = warps.warp_count();
        let live = (0..n)
            .filter(|&i| warps.get(i).0 != WarpStatus::Done)
            .count() as u32;
        let mut any = false;
        for id in 0..16usize {
            if self.arrived[id] == 0 {
                continue;
            }
            // The expected count comes from any waiting warp's instruction (they agree in
            // well-formed code; the first one is taken).
            let Some(count) = (0..n).find_map(|i| match warps.get(i).0 {
                WarpStatus::Waiting(a) if a.id as usize == id => Some(a.count),
                _ => None,
            }) else {
                continue;
            };
            let expected = match count {
                Some(c) => c.div_ceil(WARP_SIZE as u32),
                None => live,
            };
            if self.arrived[id] < expected {
                continue;
            }
            let total = self.reduce[id];
            for i in 0..n {
                let (status, warp) = warps.get_mut(i);
                let WarpStatus::Waiting(a) = *status else {
                    continue;
                };
                if a.id as usize != id {
                    continue;
                }
                if let Some(dst) = a.reduction.and_then(|r| r.dst.map(|d| (d, r.mask))) {
                    let (dst, mut m) = dst;
                    let base = dst.index() * WARP_SIZE;
                    while m != 0 {
                        let l = m.trailing_zeros() as usize;
                        m &= m - 1;
                        warp.regs[base + l] = total as u64;
                    }
                }
                *status = WarpStatus::Ready;
            }
            self.arrived[id] = 0;
            any = true;
        }
        any
    }
}

/// The error for a TB whose live warps all wait at barriers that cannot complete.
pub fn deadlock(ctx: &LaunchCtx, ctaid: [u32; 3], warps: &impl TbWarps) -> ExecError {
    let mut waiting = Vec::new();
    let mut exited_warps = 0;
    for i in 0..warps.warp_count() {
        match warps.get(i) {
            (WarpStatus::Waiting(a), w) => waiting.push(WaitingWarp {
                warp: w.index,
                pc: a.pc,
                location: ctx.location(a.pc),
                barrier: a.id,
            }),
            (WarpStatus::Done, _) => exited_warps += 1,
            _ => {}
        }
    }
    ExecError::BarrierDeadlock {
        kernel: ctx.kernel.name.clone(),
        ctaid,
        waiting,
        exited_warps,
    }
}
