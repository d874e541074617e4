//! The SM's side of TB switching on fault (papers/tanasic-thesis §6.4.1): which resident
//! TBs are blocked, the stop that switches one out, and the counters. The local TB
//! scheduler that decides and moves the contexts is [`crate::timing::local`].
//!
//! A TB is *blocked* when every warp of it that has not finished is waiting for a fault
//! (a squashed access whose fault is not serviced) or at a barrier, and at least one waits
//! for a fault (§6.5.3: "consider switching out the thread block once all the warps in a
//! thread block are blocked (faulted or at a barrier)"). Switching it out is a stop at the
//! next instruction boundary that keeps its resources under a hold while its context is
//! saved; its squashed instructions go with the context (`replay`).

use crate::barrier::WarpStatus;
use crate::timing::control::{AfterStop, StopAt, TbControl, WarpControl, WarpReports};
use crate::timing::ids::TbRef;
use crate::timing::launch::Launch;

use super::Sm;

/// TB switching's counters on one SM ([`crate::timing::FrontendStats`]).
#[derive(Clone, Copy, Debug, Default)]
pub(in crate::timing) struct SwitchCounters {
    /// TBs switched out, and switched-out TBs switched back in.
    pub out: u64,
    pub resumed: u64,
    /// Cycles contexts spent moving (saves and restores), summed.
    pub cycles: u64,
    /// The most TBs switched out here and not yet resumed at once.
    pub peak: u64,
}

impl Sm {
    /// The first resident TB that is blocked (see the module documentation) and may be
    /// switched out: running, with no warp held or in a routine.
    pub(in crate::timing) fn blocked_tb(&self) -> Option<TbRef> {
        self.res
            .resident()
            .filter(|t| t.control == TbControl::Running && !t.switch_out)
            .find(|t| {
                let mut faulted = false;
                let blocked = t.slots.iter().all(|&s| {
                    let w = self.res.warp(s);
                    if w.status == WarpStatus::Done {
                        return true;
                    }
                    if w.control != WarpControl::Running {
                        return false;
                    }
                    faulted |= w.faults > 0;
                    w.faults > 0 || matches!(w.status, WarpStatus::Waiting(_))
                });
                blocked && faulted
            })
            .map(|t| t.tb)
    }

    /// Switches resident TB `tb` out: it stops at once, and once everything it issued has
    /// completed or been squashed it leaves with its context, its resources held
    /// ([`super::Retired::switched`]).
    pub(in crate::timing) fn switch_out(&mut self, launches: &[Launch], tb: TbRef) {
        let r = self.stop(
            launches,
            tb,
            StopAt::Boundary,
            AfterStop::LeaveHolding,
            WarpReports::None,
        );
        debug_assert!(r.is_ok(), "a blocked TB is running");
        if let Some(k) = self.res.find(tb) {
            self.res.tb_mut(k).switch_out = true;
        }
    }

    /// Whether TB `tb` is resident here.
    pub(in crate::timing) fn holds_tb(&self, tb: TbRef) -> bool {
        self.res.find(tb).is_some()
    }
}
