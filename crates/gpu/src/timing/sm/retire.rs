//! The end of an SM cycle: barriers complete, finished TBs leave, warps of stopping TBs are
//! reported as they drain, routines whose accesses have completed are acknowledged, and
//! stops complete (the TB leaves as a [`TbContext`], or stays, stopped). A TB whose live
//! warps all wait at barriers that cannot complete is a deadlock.

use kir::{Id, IdVec};

use crate::barrier::{deadlock, TbWarps, WarpStatus};
use crate::error::ExecError;
use crate::exec::Warp;
use crate::timing::context::{TbContext, WarpContext};
use crate::timing::control::{AfterStop, HoldState, TbControl, WarpControl};
use crate::timing::ids::{TbSlotId, WarpSlotId};
use crate::timing::launch::Launch;

use super::residency::TbSlot;
use super::warp::{WarpHot, WarpSlot};
use super::{RetireDue, Retired, Sm};

/// Whether a TB leaving its SM gives its resources back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Resources {
    Release,
    /// Kept under a hold (its context is being saved).
    Keep,
}

impl Sm {
    /// Completes barriers, retires finished TBs and acknowledges what completed into `out`.
    /// Called for every SM every cycle; most cycles nothing is due, so only that check is
    /// inlined into the caller.
    #[inline(always)]
    pub(in crate::timing) fn retire(
        &mut self,
        launches: &[Launch],
        now: u64,
        out: &mut Retired,
    ) -> Result<(), ExecError> {
        if self.retire_due == RetireDue::No {
            return Ok(());
        }
        self.retire_due_work(launches, now, out)
    }

    #[inline(never)]
    fn retire_due_work(
        &mut self,
        launches: &[Launch],
        now: u64,
        out: &mut Retired,
    ) -> Result<(), ExecError> {
        // A stopping TB is looked at every cycle: its in-flight work finishes with time.
        self.retire_due = if self.res.stopping > 0 {
            RetireDue::Yes
        } else {
            RetireDue::No
        };
        out.due.append(&mut self.due);
        let mut done_transfers = Vec::new();
        self.ldst.take_completed_transfers(&mut done_transfers);
        for id in done_transfers {
            match self.ckpt.completed(id) {
                Some(c) => out.checkpoints.push(c),
                None => out.transfers.push(id),
            }
        }
        for k in self.res.tbs.ids() {
            let Some(tb) = self.res.tbs[k].as_mut() else {
                continue;
            };
            let released = tb.bars.release(&mut SlotWarps {
                slots: &tb.slots,
                warps: &mut self.res.warps,
            });
            let (tbref, control) = (tb.tb, tb.control);
            if released {
                let decoded = &launches[tbref.launch.index()].decoded;
                for i in 0..self.res.slots_of(k).len() {
                    let s = self.res.slots_of(k)[i];
                    self.sync(decoded, s);
                }
            }
            let slots = self.res.slots_of(k);
            let done = slots.iter().all(|&s| {
                let w = self.res.warp(s);
                w.status == WarpStatus::Done && w.outstanding == 0
            });
            if done {
                // A TB that finished before it could stop needs no context saved: its
                // resources go back even if a stop asked to keep them.
                let executed = slots
                    .iter()
                    .map(|&s| self.res.warp(s).warp.executed)
                    .sum::<u64>();
                let tb = self.vacate(k, Resources::Release);
                out.finished
                    .push((tb.tb, tb.local_base, executed, now - tb.placed_at));
                continue;
            }
            if control == TbControl::Running {
                // A barrier that just completed lets its warps go on.
                if !released {
                    self.check_deadlock(launches, k)?;
                }
                continue;
            }
            // Routines whose code has ended are acknowledged once their accesses complete.
            for i in 0..self.res.slots_of(k).len() {
                let s = self.res.slots_of(k)[i];
                let w = self.res.warp_mut(s);
                if w.control != WarpControl::RoutineDraining {
                    continue;
                }
                if w.drained(now) {
                    w.control = WarpControl::Halted;
                    out.routines.push((tbref, i as u32));
                } else {
                    self.retire_due = RetireDue::Yes;
                }
            }
            let TbControl::Stopping { then, .. } = control else {
                continue;
            };
            for i in 0..self.res.slots_of(k).len() {
                let s = self.res.slots_of(k)[i];
                let w = self.res.warp_mut(s);
                if w.control == WarpControl::HaltedReporting
                    && w.outstanding == 0
                    && w.ready_at.iter().all(|&t| t <= now)
                {
                    w.control = WarpControl::Halted;
                    out.drained.push((tbref, i as u32));
                }
            }
            if !self.quiesced(k, now) {
                continue;
            }
            match then {
                AfterStop::Leave => {
                    let context = self.capture(k, now, Resources::Release);
                    out.evicted.push((context, None));
                }
                AfterStop::LeaveHolding => {
                    let (demand, switching) = {
                        let t = self.res.tb(k);
                        (t.demand, t.switch_out)
                    };
                    let context = self.capture(k, now, Resources::Keep);
                    let hold = self.res.new_hold(tbref.launch, demand, HoldState::Saving);
                    if switching {
                        out.switched.push((context, hold));
                    } else {
                        out.evicted.push((context, Some(hold)));
                    }
                }
                AfterStop::Stay => {
                    self.res.tb_mut(k).control = TbControl::Stopped;
                    self.res.stopping -= 1;
                    out.stopped.push(tbref);
                }
            }
        }
        Ok(())
    }

    /// A running TB whose live warps all wait at barriers that cannot complete is a
    /// deadlock.
    fn check_deadlock(&mut self, launches: &[Launch], k: TbSlotId) -> Result<(), ExecError> {
        let tb = self.res.tbs[k].as_ref().expect("resident TB");
        let ws = |s: &WarpSlotId| self.res.warp(*s);
        let live = tb.slots.iter().filter(|s| ws(s).status != WarpStatus::Done);
        let all_waiting = live
            .clone()
            .all(|s| matches!(ws(s).status, WarpStatus::Waiting(_)));
        if all_waiting && live.count() > 0 {
            let tb = self.res.tbs[k].as_mut().expect("resident TB");
            let view = SlotWarps {
                slots: &tb.slots,
                warps: &mut self.res.warps,
            };
            let launch = &launches[tb.tb.launch.index()];
            return Err(launch.ptx_error(deadlock(&launch.ctx, tb.ctaid, &view)));
        }
        Ok(())
    }

    /// Whether the TB in slot `k` has nothing left in flight: every warp halted, held or
    /// finished (none in a routine), every access it issued complete (stores acknowledged)
    /// or wholly squashed for a fault (its replay goes with the TB: `replay`), no part of
    /// one still waiting to be offered, and every result written but those the squashed
    /// accesses will write.
    pub(super) fn quiesced(&self, k: TbSlotId, now: u64) -> bool {
        let slots = self.res.slots_of(k);
        !self.ldst.backlog_of(slots)
            && slots.iter().all(|&s| {
                let w = self.res.warp(s);
                w.idle() && self.drained_but_squashed(w, now)
            })
    }

    /// Takes the TB in slot `k` off the SM, giving its resources back or keeping them; its
    /// warps' accesses still in flight (stores of finished warps) stay counted for its
    /// launch.
    pub(super) fn vacate(&mut self, k: TbSlotId, resources: Resources) -> TbSlot {
        let tb = self.res.tbs[k].take().expect("resident TB");
        for &s in &tb.slots {
            self.ldst.pending.orphan(s);
            if self.ldst.refused.is_some_and(|r| r.slot == s) {
                self.ldst.refused = None;
            }
            self.issue.finishing.retain(|&f| f != s);
            self.res.warps[s] = None;
            self.res.hot[s] = WarpHot::EMPTY;
            self.issue.unpark(s);
        }
        if matches!(tb.control, TbControl::Stopping { .. }) {
            self.res.stopping -= 1;
        }
        if resources == Resources::Release {
            self.res.ledger.give_for(tb.tb.launch, &tb.demand);
        }
        self.issue.views_changed();
        tb
    }

    /// Captures the quiesced TB in slot `k` and takes it off the SM.
    pub(super) fn capture(&mut self, k: TbSlotId, now: u64, resources: Resources) -> TbContext {
        let slots = self.res.slots_of(k).to_vec();
        let tbref = self.res.tb(k).tb;
        let warps = slots
            .iter()
            .map(|&s| {
                let mut w = self.res.warps[s].take().expect("resident warp");
                let replays = self.carry(&mut w, tbref);
                WarpContext {
                    warp: w.warp,
                    status: w.status,
                    dirty: w.dirty,
                    replays,
                }
            })
            .collect();
        let tb = self.vacate(k, resources);
        TbContext {
            tb: tb.tb,
            ctaid: tb.ctaid,
            warps,
            shared: tb.shared,
            barriers: tb.bars,
            local_base: tb.local_base,
            from: self.id,
            evicted_at: now,
        }
    }
}

/// A resident TB's warps: slots into the SM's warp table.
pub(super) struct SlotWarps<'a> {
    pub slots: &'a [WarpSlotId],
    pub warps: &'a mut IdVec<WarpSlotId, Option<Box<WarpSlot>>>,
}

impl TbWarps for SlotWarps<'_> {
    fn warp_count(&self) -> usize {
        self.slots.len()
    }
    fn get(&self, i: usize) -> (WarpStatus, &Warp) {
        let w = self.warps[self.slots[i]].as_ref().expect("resident warp");
        (w.status, &w.warp)
    }
    fn get_mut(&mut self, i: usize) -> (&mut WarpStatus, &mut Warp) {
        let w = self.warps[self.slots[i]].as_mut().expect("resident warp");
        (&mut w.status, &mut w.warp)
    }
}
