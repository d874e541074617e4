//! The SM's side of the control protocol ([`crate::timing::control`]): each request checks
//! the state of its TB, warp or hold against the protocol's table, changes it, and lets the
//! SM re-derive what its issue stage reads ([`Sm::sync`]). The machine keeps the launches'
//! books and turns the results into acknowledgements.

use kir::inst::Op;
use kir::{Id, InstId};

use crate::barrier::WarpStatus;
use crate::exec::StackEntry;
use crate::occupancy::TbDemand;
use crate::timing::context::TbContext;
use crate::timing::control::{
    AfterStop, ControlError, HoldState, Keep, Routine, RoutineEnd, RoutineRun, StopAt, TbControl,
    WarpControl, WarpReports,
};
use crate::timing::ids::{HoldId, LaunchId, TbRef, TbSlotId, WarpSlotId};
use crate::timing::launch::Launch;

use super::retire::Resources;
use super::warp::WarpSlot;
use super::Sm;

/// The error for `request` on a TB (or its warp) in the wrong state.
fn illegal(request: &'static str, what: String, state: &str) -> ControlError {
    ControlError::Illegal {
        request,
        what,
        state: state.to_string(),
    }
}

impl Sm {
    /// The slot of resident TB `tb`, or the error naming it.
    fn resident_slot(&self, tb: TbRef) -> Result<TbSlotId, ControlError> {
        self.res
            .find(tb)
            .ok_or(ControlError::NotResident { sm: self.id, tb })
    }

    /// The slot of warp `warp` of TB slot `k`.
    fn warp_slot(&self, k: TbSlotId, warp: u32) -> Result<WarpSlotId, ControlError> {
        let t = self.res.tb(k);
        t.slots
            .get(warp as usize)
            .copied()
            .ok_or(ControlError::NoWarp { tb: t.tb, warp })
    }

    /// The control state of the TB in slot `k`, checked to be one `ok` accepts.
    fn tb_in(
        &self,
        request: &'static str,
        k: TbSlotId,
        ok: impl Fn(&TbControl) -> bool,
    ) -> Result<TbControl, ControlError> {
        let t = self.res.tb(k);
        if ok(&t.control) {
            Ok(t.control)
        } else {
            Err(illegal(
                request,
                format!("{} on {}", t.tb, self.id),
                t.control.name(),
            ))
        }
    }

    /// Asks TB `tb` to stop ([`crate::timing::Request::Stop`]); legal while it runs.
    pub(in crate::timing) fn stop(
        &mut self,
        launches: &[Launch],
        tb: TbRef,
        at: StopAt,
        then: AfterStop,
        reports: WarpReports,
    ) -> Result<(), ControlError> {
        let k = self.resident_slot(tb)?;
        self.tb_in("stop", k, |c| *c == TbControl::Running)?;
        self.res.tb_mut(k).control = TbControl::Stopping { at, then, reports };
        self.res.stopping += 1;
        self.retire_soon();
        let halted = match reports {
            WarpReports::EachWarp => WarpControl::HaltedReporting,
            WarpReports::None => WarpControl::Halted,
        };
        let launch = &launches[tb.launch.index()];
        let decoded = &launch.decoded;
        let insts = &launch.ctx.kernel.insts;
        for i in 0..self.res.slots_of(k).len() {
            let s = self.res.slots_of(k)[i];
            let w = self.res.warp_mut(s);
            let waiting = matches!(w.status, WarpStatus::Waiting(_));
            let past_point = at == StopAt::AtPoint
                && w.warp.pc().is_some_and(|pc| {
                    pc.index() > 0 && matches!(insts[InstId::new(pc.index() - 1)].op, Op::Pp { .. })
                });
            if w.status != WarpStatus::Done
                && w.control == WarpControl::Running
                && (at == StopAt::Boundary || waiting || past_point)
            {
                w.control = halted.clone();
                self.sync(decoded, s);
            }
        }
        Ok(())
    }

    /// A stopped TB's halted warps issue again (held ones stay held).
    pub(in crate::timing) fn resume(
        &mut self,
        launches: &[Launch],
        tb: TbRef,
    ) -> Result<(), ControlError> {
        let k = self.resident_slot(tb)?;
        self.tb_in("resume", k, |c| *c == TbControl::Stopped)?;
        self.no_routine("resume", k)?;
        self.res.tb_mut(k).control = TbControl::Running;
        let decoded = &launches[tb.launch.index()].decoded;
        for i in 0..self.res.slots_of(k).len() {
            let s = self.res.slots_of(k)[i];
            let w = self.res.warp_mut(s);
            if w.control.halted() {
                w.control = WarpControl::Running;
                self.sync(decoded, s);
            }
        }
        self.retire_soon();
        Ok(())
    }

    /// Refuses `request` while a warp of TB slot `k` runs a routine or waits for its
    /// accesses.
    fn no_routine(&self, request: &'static str, k: TbSlotId) -> Result<(), ControlError> {
        let t = self.res.tb(k);
        for (i, &s) in t.slots.iter().enumerate() {
            let c = &self.res.warp(s).control;
            if matches!(c, WarpControl::InRoutine(_) | WarpControl::RoutineDraining) {
                return Err(illegal(
                    request,
                    format!("{} on {} (warp {i})", t.tb, self.id),
                    c.name(),
                ));
            }
        }
        Ok(())
    }

    /// A stopped TB leaves the SM now; its resources go back (`Leave`) or stay under a hold
    /// (`LeaveHolding`).
    pub(in crate::timing) fn evict(
        &mut self,
        tb: TbRef,
        then: AfterStop,
        now: u64,
    ) -> Result<(TbContext, Option<HoldId>), ControlError> {
        let k = self.resident_slot(tb)?;
        self.tb_in("evict", k, |c| *c == TbControl::Stopped)?;
        self.no_routine("evict", k)?;
        match then {
            AfterStop::Leave => Ok((self.capture(k, now, Resources::Release), None)),
            AfterStop::LeaveHolding => {
                let demand = self.res.tb(k).demand;
                let context = self.capture(k, now, Resources::Keep);
                Ok((
                    context,
                    Some(self.res.new_hold(tb.launch, demand, HoldState::Saving)),
                ))
            }
            AfterStop::Stay => Err(illegal(
                "evict",
                format!("{tb} on {} (to stay is not to leave)", self.id),
                "stopped",
            )),
        }
    }

    /// Throws TB `tb` away at once (its warps stop mid-flight; accesses in flight complete
    /// unobserved); returns its local-memory frame.
    pub(in crate::timing) fn discard(&mut self, tb: TbRef) -> Result<u64, ControlError> {
        let k = self.resident_slot(tb)?;
        for s in self.res.slots_of(k).to_vec() {
            let mut w = self.res.warps[s].take().expect("resident warp");
            self.abandon(&mut w);
            self.res.warps[s] = Some(w);
        }
        self.issue.wake();
        Ok(self.vacate(k, Resources::Release).local_base)
    }

    /// Sends a halted warp of a stopping or stopped TB through `routine`.
    pub(in crate::timing) fn start_routine(
        &mut self,
        launches: &[Launch],
        tb: TbRef,
        warp: u32,
        routine: Routine,
        now: u64,
    ) -> Result<(), ControlError> {
        let k = self.resident_slot(tb)?;
        self.tb_in("routine", k, |c| {
            matches!(c, TbControl::Stopping { .. } | TbControl::Stopped)
        })?;
        let s = self.warp_slot(k, warp)?;
        let launch = &launches[tb.launch.index()];
        let code = launch.ctx.kernel.insts.len() as u64;
        let w = self.res.warp(s);
        let bad = |why: String| ControlError::BadRoutine { tb, warp, why };
        if w.status == WarpStatus::Done {
            return Err(illegal(
                "routine",
                format!("{tb} warp {warp} on {}", self.id),
                "finished",
            ));
        }
        if !w.control.halted() {
            return Err(illegal(
                "routine",
                format!("{tb} warp {warp} on {}", self.id),
                w.control.name(),
            ));
        }
        let live = w.warp.valid & !w.warp.exited;
        if routine.lanes == 0 || routine.lanes & !live != 0 {
            return Err(bad(format!(
                "lanes {:#010x} are not a non-empty subset of its live lanes {live:#010x}",
                routine.lanes
            )));
        }
        if u64::from(routine.entry) >= code {
            return Err(bad(format!(
                "the routine's entry pc{} is outside the kernel's {code} instructions",
                routine.entry
            )));
        }
        if let RoutineEnd::Reach(pc) = routine.end {
            if u64::from(pc) >= code {
                return Err(bad(format!(
                    "the routine's end pc{pc} is outside the kernel's {code} instructions"
                )));
            }
        }
        let w = self.res.warp_mut(s);
        let run = RoutineRun {
            routine,
            stack: std::mem::replace(
                &mut w.warp.stack,
                vec![StackEntry {
                    pc: routine.entry,
                    rpc: match routine.end {
                        RoutineEnd::Exit => u32::MAX,
                        RoutineEnd::Reach(pc) => pc,
                    },
                    mask: routine.lanes,
                }],
            ),
            exited: w.warp.exited,
            status: std::mem::replace(&mut w.status, WarpStatus::Ready),
        };
        w.control = WarpControl::InRoutine(Box::new(run));
        self.sync(&launch.decoded, s);
        self.front.fill_buffer(&mut self.res.hot[s], s, now);
        Ok(())
    }

    /// The routine of `ws` has run its last instruction: the warp goes back to where it was
    /// and waits for the routine's accesses.
    pub(super) fn end_routine(&mut self, ws: &mut WarpSlot) {
        let WarpControl::InRoutine(run) =
            std::mem::replace(&mut ws.control, WarpControl::RoutineDraining)
        else {
            unreachable!("only a warp in a routine ends one");
        };
        let RoutineRun {
            stack,
            exited,
            status,
            ..
        } = *run;
        ws.warp.stack = stack;
        ws.warp.exited = exited;
        ws.status = status;
        self.retire_soon();
    }

    /// Holds warp `warp` of a running TB (it issues nothing until released).
    pub(in crate::timing) fn hold_warp(
        &mut self,
        launches: &[Launch],
        tb: TbRef,
        warp: u32,
    ) -> Result<(), ControlError> {
        let k = self.resident_slot(tb)?;
        self.tb_in("hold-warp", k, |c| *c == TbControl::Running)?;
        let s = self.warp_slot(k, warp)?;
        let w = self.res.warp_mut(s);
        if w.status == WarpStatus::Done || w.control != WarpControl::Running {
            let state = if w.status == WarpStatus::Done {
                "finished"
            } else {
                w.control.name()
            };
            return Err(illegal(
                "hold-warp",
                format!("{tb} warp {warp} on {}", self.id),
                state,
            ));
        }
        w.control = WarpControl::Held;
        self.sync(&launches[tb.launch.index()].decoded, s);
        Ok(())
    }

    /// Releases a held warp: it runs again, or, if its TB has been asked to stop at once
    /// or has stopped since, it is halted with the others.
    pub(in crate::timing) fn release_warp(
        &mut self,
        launches: &[Launch],
        tb: TbRef,
        warp: u32,
    ) -> Result<(), ControlError> {
        let k = self.resident_slot(tb)?;
        let s = self.warp_slot(k, warp)?;
        let control = self.res.tb(k).control;
        let w = self.res.warp_mut(s);
        if w.control != WarpControl::Held {
            return Err(illegal(
                "release-warp",
                format!("{tb} warp {warp} on {}", self.id),
                w.control.name(),
            ));
        }
        w.control = match control {
            TbControl::Running => WarpControl::Running,
            TbControl::Stopping { at, .. } if at.at_points() => WarpControl::Running,
            TbControl::Stopping {
                reports: WarpReports::EachWarp,
                ..
            } => WarpControl::HaltedReporting,
            TbControl::Stopping { .. } | TbControl::Stopped => WarpControl::Halted,
        };
        self.sync(&launches[tb.launch.index()].decoded, s);
        self.retire_soon();
        Ok(())
    }

    /// Takes a TB's resources for a context of `launch` about to be restored.
    pub(in crate::timing) fn hold(&mut self, launch: LaunchId, demand: &TbDemand) -> HoldId {
        self.res.take_hold(launch, demand)
    }

    /// The state of hold `hold`, checked to be one `ok` accepts.
    fn hold_in(
        &self,
        request: &'static str,
        hold: HoldId,
        ok: impl Fn(&HoldState) -> bool,
    ) -> Result<(), ControlError> {
        let Some(h) = self.res.hold(hold) else {
            return Err(ControlError::NoHold { sm: self.id, hold });
        };
        if ok(&h.state) {
            Ok(())
        } else {
            Err(illegal(
                request,
                format!("{hold} on {}", self.id),
                h.state.name(),
            ))
        }
    }

    /// Gives a hold's resources back.
    pub(in crate::timing) fn release(&mut self, hold: HoldId) -> Result<(), ControlError> {
        self.hold_in("release", hold, |_| true)?;
        self.res.release(hold);
        self.issue.views_changed();
        self.issue.wake();
        Ok(())
    }

    /// Parks a saving hold (in-place context switching, papers/lin-lightweight §III-A).
    pub(in crate::timing) fn park(&mut self, hold: HoldId, keep: Keep) -> Result<(), ControlError> {
        self.hold_in("park", hold, |s| *s == HoldState::Saving)?;
        self.res.park(hold, keep);
        self.issue.views_changed();
        self.issue.wake();
        Ok(())
    }

    /// Whether parked hold `hold` could take back what it gave up.
    pub(in crate::timing) fn fits_unpark(&self, hold: HoldId) -> bool {
        self.res.fits_unpark(hold)
    }

    /// Takes back what a parked hold gave up; it is restoring then.
    pub(in crate::timing) fn unpark(&mut self, hold: HoldId) -> Result<(), ControlError> {
        self.hold_in("unpark", hold, |s| matches!(s, HoldState::Parked { .. }))?;
        self.res
            .unpark(hold)
            .ok_or(ControlError::CannotUnpark { sm: self.id, hold })?;
        self.issue.views_changed();
        Ok(())
    }

    /// Checks that hold `hold` is restoring (a context may be installed into it).
    pub(in crate::timing) fn restoring(&self, hold: HoldId) -> Result<(), ControlError> {
        self.hold_in("install", hold, |s| *s == HoldState::Restoring)
    }

    /// The holds on this SM and their states.
    pub(in crate::timing) fn holds(&self) -> impl Iterator<Item = (HoldId, HoldState)> + '_ {
        self.res.holds().map(|h| (h.id, h.state))
    }
}
