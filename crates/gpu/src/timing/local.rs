//! TB switching on fault: each SM's local TB scheduler (papers/tanasic-thesis §6.4.1,
//! §6.5.3, Figure 6.13), on when the GPU's `[memory.translation]` has `tb_switch` (which
//! needs a pipeline that squashes faulting accesses: a TB can leave only if its faults
//! are preemptible).
//!
//! The rules, as §6.4.1 and §6.5.3 state them:
//! * a resident TB is switched out once all its warps are blocked, faulted or at a barrier
//!   ([`super::sm::Sm::blocked_tb`]), if something can take its place: a TB switched out
//!   on this SM whose faults have all been serviced, or else a new TB of its kernel;
//! * on a switch the scheduler first looks for a switched-out TB whose faults are
//!   resolved; if none, it asks the global TB scheduler for a new pending TB of the
//!   kernel, as when a TB finishes (a `Dispatch`);
//! * at most `tb_switch_extra` extra TBs per SM (TBs switched out here and not yet back);
//!   once the limit is reached a blocked TB is switched out only for a switched-out TB
//!   whose faults are resolved: the SM cycles through its active and off-chip TBs only;
//! * a switched-out TB is switched back in on the same SM (the thesis keeps it local) once
//!   all its faults have been serviced and there is room; resumed TBs come before new
//!   ones (the scheduler runs before the machine's control each cycle).
//!
//! A switch moves one context at a time per SM (the fault handler's one switch): the TB
//! stops, drains what is not squashed, and leaves with its squashed instructions in its
//! context (`sm::replay`), its resources held while the context is saved; then the
//! replacement is restored (its resources held while its context loads) or dispatched.
//! `save` moves the context's bytes ([`TbContext::sizes`], and its squashed instructions'
//! operands and lines) through the SM's LD/ST unit at context priority to a context area
//! per SM in device memory, and back; `ideal` takes 1 cycle each way (Figure 6.13's
//! "ideal 1 cycle context switching"). The contexts wait here, off-chip. No event is
//! raised for a switch (it is the SM's own business, not the control's); a TB dispatched
//! to take a switched-out TB's place is an ordinary `TbDispatched`.

use kir::Id;
use memsys::TbSwitch;

use super::backend::MemoryBackend;
use super::context::TbContext;
use super::control::{Direction, Request, TbControl};
use super::ids::{HoldId, SmId, TbRef, TransferId};
use super::machine::Machine;
use super::TimingError;

/// Where the context areas of switched-out TBs lie: one 4 GiB window per SM, 16 MiB per
/// TB slot in it (a TB's context is at most its registers and shared memory, far less).
const CONTEXT_AREA: u64 = 0x7000_0000_0000;
const AREA_PER_SM: u64 = 1 << 32;
const AREA_PER_TB: u64 = 1 << 24;

/// The local TB schedulers of the machine's SMs.
pub(super) struct LocalScheduler {
    mode: TbSwitch,
    extra: u32,
    sms: Vec<SmLocal>,
}

/// One SM's local scheduler.
#[derive(Default)]
struct SmLocal {
    /// TBs switched out and not yet back, oldest first.
    out: Vec<TbContext>,
    /// The TB stopping to be switched out.
    stopping: Option<TbRef>,
    /// The context moving now.
    moving: Option<Move>,
    /// Whether the TB switching out is swapped for a switched-out TB whose faults are
    /// resolved (which then counts as resumed: the swap keeps the number off-chip).
    swap: bool,
}

/// A context on its way out or back in, its resources held.
struct Move {
    direction: Direction,
    hold: HoldId,
    context: Box<TbContext>,
    started: u64,
    until: Until,
}

/// When a move ends.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Until {
    Cycle(u64),
    Transfer(TransferId),
    Done,
}

impl LocalScheduler {
    /// The schedulers of `sms` SMs, or `None` with switching off.
    pub(super) fn new(mode: TbSwitch, extra: u32, sms: usize) -> Option<LocalScheduler> {
        (!mode.is_off()).then(|| LocalScheduler {
            mode,
            extra,
            sms: (0..sms).map(|_| SmLocal::default()).collect(),
        })
    }

    /// Whether context transfer `id` on `sm` is one of a switch's (it then ends that move,
    /// and the control hears nothing of it).
    pub(super) fn transfer_done(&mut self, sm: SmId, id: TransferId) -> bool {
        match &mut self.sms[sm.index()].moving {
            Some(m) if m.until == Until::Transfer(id) => {
                m.until = Until::Done;
                true
            }
            _ => false,
        }
    }

    /// Whether no TB is switched out, stopping to be or moving (a machine with one is not
    /// idle: the TB comes back).
    pub(super) fn idle(&self) -> bool {
        self.sms
            .iter()
            .all(|s| s.out.is_empty() && s.stopping.is_none() && s.moving.is_none())
    }

    /// TBs switched out on `sm` and not yet resumed: at rest off-chip, or being saved
    /// (less the one a swap brings back); a TB being restored counts as resumed.
    fn off_chip(&self, sm: usize) -> u64 {
        let s = &self.sms[sm];
        let saving = s
            .moving
            .as_ref()
            .is_some_and(|m| m.direction == Direction::Save);
        (s.out.len() + usize::from(saving && !s.swap)) as u64
    }
}

/// Bytes a switch moves for `context`: its architectural state and its squashed
/// instructions (4 bytes per lane per source register, 8 per line).
fn context_bytes(context: &TbContext) -> u64 {
    let s = context.sizes();
    let replays: u64 = context
        .warps
        .iter()
        .flat_map(|w| &w.replays)
        .map(|a| (a.operands.len() * 4 + (a.lines.len() + a.resend.len()) * 8 + 16) as u64)
        .sum();
    s.registers + s.shared + s.simt_stack + replays
}

impl<B: MemoryBackend> Machine<B> {
    /// TB `context` left `sm`, switched out on fault, its resources under `hold`: its
    /// context is saved.
    pub(super) fn switched_out(&mut self, sm: SmId, context: TbContext, hold: HoldId, now: u64) {
        let l = &mut self.launches[context.tb.launch.index()];
        l.resident -= 1;
        l.held += 1;
        let Some(local) = self.local.as_mut() else {
            debug_assert!(false, "only the local scheduler switches TBs out");
            return;
        };
        let mode = local.mode;
        let s = &mut local.sms[sm.index()];
        s.stopping = None;
        let until = self.move_until(sm, mode, Direction::Save, &context, now);
        let local = self.local.as_mut().expect("checked");
        local.sms[sm.index()].moving = Some(Move {
            direction: Direction::Save,
            hold,
            context: Box::new(context),
            started: now,
            until,
        });
        self.sms[sm.index()].switching.out += 1;
        self.note_peak(sm);
    }

    /// Keeps the most TBs switched out on `sm` at once.
    fn note_peak(&mut self, sm: SmId) {
        if let Some(local) = self.local.as_ref() {
            let c = &mut self.sms[sm.index()].switching;
            c.peak = c.peak.max(local.off_chip(sm.index()));
        }
    }

    /// When a move of `context` in `direction` started at `now` ends.
    fn move_until(
        &mut self,
        sm: SmId,
        mode: TbSwitch,
        direction: Direction,
        context: &TbContext,
        now: u64,
    ) -> Until {
        match mode {
            TbSwitch::Save => {
                let base = CONTEXT_AREA
                    + u64::from(sm.0) * AREA_PER_SM
                    + (context.tb.index % (AREA_PER_SM / AREA_PER_TB)) * AREA_PER_TB;
                let bytes = context_bytes(context);
                Until::Transfer(self.transfer(sm, direction, base, bytes, context.tb.launch, now))
            }
            TbSwitch::Ideal | TbSwitch::Off => Until::Cycle(now + 1),
        }
    }

    /// Each SM's local scheduler's cycle (see the module documentation): moves that ended
    /// complete, switched-out TBs whose faults are serviced come back, and blocked TBs
    /// are switched out.
    pub(super) fn local_schedule(&mut self, now: u64) -> Result<(), TimingError> {
        let Some(local) = self.local.as_ref() else {
            return Ok(());
        };
        let n = local.sms.len();
        for i in 0..n {
            let sm = SmId(i as u32);
            self.end_move(sm, now)?;
            let local = self.local.as_mut().expect("checked");
            let s = &mut local.sms[i];
            if let Some(tb) = s.stopping {
                // A TB asked to switch out that finished first is gone.
                if !self.sms[i].holds_tb(tb) {
                    s.stopping = None;
                    s.swap = false;
                }
            }
            if s.stopping.is_some() || s.moving.is_some() {
                continue;
            }
            if self.resume(sm, now) {
                continue;
            }
            self.consider_switch(sm);
        }
        Ok(())
    }

    /// Ends `sm`'s move if its time has come: a saved context waits off-chip and its
    /// replacement comes in; a restored one is installed.
    fn end_move(&mut self, sm: SmId, now: u64) -> Result<(), TimingError> {
        let local = self.local.as_mut().expect("on");
        let s = &mut local.sms[sm.index()];
        let ended = s.moving.as_ref().is_some_and(|m| match m.until {
            Until::Cycle(c) => c <= now,
            Until::Transfer(_) => false,
            Until::Done => true,
        });
        if !ended {
            return Ok(());
        }
        let m = s.moving.take().expect("checked");
        self.sms[sm.index()].switching.cycles += now - m.started;
        let _ = self.sms[sm.index()].release(m.hold);
        match m.direction {
            Direction::Save => {
                let launch = m.context.tb.launch;
                s.out.push(*m.context);
                s.swap = false;
                // §6.4.1: first a switched-out TB whose faults are resolved, else a new TB
                // from the global scheduler.
                if !self.resume(sm, now)
                    && self.launches[launch.index()].undispatched() > 0
                    && self.fits(sm, launch)
                {
                    self.request(Request::Dispatch { sm, launch })?;
                }
                self.note_peak(sm);
            }
            Direction::Restore => {
                let tb = m.context.tb;
                let l = &mut self.launches[tb.launch.index()];
                l.held -= 1;
                l.resident += 1;
                self.sms[sm.index()].install(
                    &self.launches[tb.launch.index()],
                    m.context,
                    TbControl::Running,
                    now,
                );
                self.sms[sm.index()].switching.resumed += 1;
            }
        }
        Ok(())
    }

    /// Starts switching back in the oldest TB switched out on `sm` whose faults have all
    /// been serviced, if its resources fit; whether one was.
    fn resume(&mut self, sm: SmId, now: u64) -> bool {
        let local = self.local.as_ref().expect("on");
        let s = &local.sms[sm.index()];
        if s.moving.is_some() {
            return false;
        }
        let Some(i) = s
            .out
            .iter()
            .position(|c| !self.sms[sm.index()].unserviced(c.tb) && self.fits(sm, c.tb.launch))
        else {
            return false;
        };
        let mode = local.mode;
        let context = Box::new(
            self.local.as_mut().expect("on").sms[sm.index()]
                .out
                .remove(i),
        );
        let launch = context.tb.launch;
        let demand = self.launches[launch.index()].demand;
        let hold = self.sms[sm.index()].hold(launch, &demand);
        let until = self.move_until(sm, mode, Direction::Restore, &context, now);
        self.local.as_mut().expect("on").sms[sm.index()].moving = Some(Move {
            direction: Direction::Restore,
            hold,
            context,
            started: now,
            until,
        });
        true
    }

    /// Switches out a blocked TB of `sm` if something can take its place (see the module
    /// documentation).
    fn consider_switch(&mut self, sm: SmId) {
        let Some(tb) = self.sms[sm.index()].blocked_tb() else {
            return;
        };
        let local = self.local.as_ref().expect("on");
        let s = &local.sms[sm.index()];
        let resolved = s.out.iter().any(|c| !self.sms[sm.index()].unserviced(c.tb));
        let fresh = self.launches[tb.launch.index()].undispatched() > 0
            && (s.out.len() as u64) < u64::from(local.extra);
        if !resolved && !fresh {
            return;
        }
        self.sms[sm.index()].switch_out(&self.launches, tb);
        let s = &mut self.local.as_mut().expect("on").sms[sm.index()];
        s.stopping = Some(tb);
        // §6.4.1: a switched-out TB whose faults are resolved comes first.
        s.swap = resolved;
    }
}
