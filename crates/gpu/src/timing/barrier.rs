//! Barrier bookkeeping of one resident TB, with the semantics of the functional driver
//! ([`crate::func`]): a barrier completes when the expected number of warps has arrived — the
//! `bar.sync a, b` thread count rounded up to warps if given, else every warp of the TB that
//! has not exited; a warp arrives once, with whichever lanes are active (pre-Volta).
//!
//! This is a copy of the functional driver's logic over resident warp slots instead of a
//! TB-local warp array; the two should be merged into one type both drivers use.

use kir::inst::BarKind;
use kir::Id;

use super::sm::{WarpSlot, WarpStatus};
use crate::exec::{BarrierArrival, WARP_SIZE};

/// The 16 named barriers of a TB.
#[derive(Clone, Debug, Default)]
pub(super) struct Barriers {
    /// Warps arrived at each barrier id since it last completed.
    arrived: [u32; 16],
    /// Reduction accumulator per barrier id (popc sum, and, or).
    reduce: [u32; 16],
}

impl Barriers {
    pub(super) fn arrive(&mut self, a: &BarrierArrival) {
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
    /// ready (and writing `bar.red` results); true if one did. `slots` are the TB's warps.
    pub(super) fn release(&mut self, slots: &[u32], warps: &mut [Option<WarpSlot>]) -> bool {
        let status = |warps: &[Option<WarpSlot>], s: &u32| {
            warps[*s as usize].as_ref().expect("resident warp").status
        };
        let live = slots
            .iter()
            .filter(|s| status(warps, s) != WarpStatus::Done)
            .count() as u32;
        let mut any = false;
        for id in 0..16usize {
            if self.arrived[id] == 0 {
                continue;
            }
            // The expected count comes from any waiting warp's instruction (they agree in
            // well-formed code; the first one is taken).
            let count = slots.iter().find_map(|s| match status(warps, s) {
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
            if self.arrived[id] < expected {
                continue;
            }
            let total = self.reduce[id];
            for s in slots {
                let w = warps[*s as usize].as_mut().expect("resident warp");
                if let WarpStatus::Waiting(a) = w.status {
                    if a.id as usize == id {
                        if let Some(r) = a.reduction {
                            if let Some(dst) = r.dst {
                                let base = dst.index() * WARP_SIZE;
                                let mut m = r.mask;
                                while m != 0 {
                                    let l = m.trailing_zeros() as usize;
                                    m &= m - 1;
                                    w.warp.regs[base + l] = total as u64;
                                }
                            }
                        }
                        w.status = WarpStatus::Ready;
                    }
                }
            }
            self.arrived[id] = 0;
            any = true;
        }
        any
    }
}
