//! The issue stage: each cycle every warp scheduler ranks its warps and the SM issues the
//! first that can (see the module documentation of [`super`]), executing it functionally at
//! once; and the exact shortcuts that keep that fast.

use kir::inst::{Op, Operand};
use kir::{Id, IdVec};

use crate::error::ExecError;
use crate::exec::{guard_mask, lanes, step_guarded, Step, TbView, WARP_SIZE};
use crate::memory::DeviceMemory;
use crate::pipeline::{OpClass, Unit};
use crate::timing::backend::SmMemory;
use crate::timing::control::{TbControl, WarpControl};
use crate::timing::ids::LaunchId;
use crate::timing::ids::WarpSlotId;
use crate::timing::launch::Launch;
use crate::timing::probe::{Issue, SmCycle, Watch};
use crate::timing::scheduler::{AnyScheduler, Quota, WarpInfo, WarpScheduler};
use crate::timing::stats::{SchedulerCycle, StallReason};

use super::memplan::{Access, MemPlan};
use super::warp::{HotState, MEM_PENDING, NO_PC};
use super::{Sm, Specs};
use crate::barrier::WarpStatus;

/// Whether the engine's exact speed shortcuts are on ([`crate::timing::TimingOptions::shortcuts`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::timing) enum Shortcuts {
    On,
    Off,
}

/// Whether a warp can issue this cycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Check {
    Ready,
    Blocked(StallReason),
    /// The warp has no more instructions (its stack emptied without an `exit` reporting it).
    Finished,
}

/// What one scheduler's policy sees of its warps, and its last order.
struct SchedulerView {
    infos: Vec<WarpInfo>,
    /// The order the policy wrote last, read from `start` on, wrapping around (a round
    /// robin's next order is a new start, [`WarpScheduler::reorder`]).
    order: Vec<WarpSlotId>,
    start: usize,
    /// Warps came or went since `infos` was built.
    stale: bool,
    /// The order still holds (a lazy policy's order changes only when a warp issues or the
    /// view changes).
    order_valid: bool,
    /// A lazy policy's walk passes over parked warps ([`IssueStage::parked`]) without
    /// checking them: bit `j` is set while `order[j]` is not parked. Built when an order is
    /// walked a second time (a greedy policy's order, rebuilt after most issues, would pay
    /// for it every cycle), kept while the order holds; only for at most 64 warps
    /// (`walks_open`).
    open: u64,
    walks_open: bool,
    /// Parked warps of the order, by what they wait for (the stall reason a walk that
    /// issued nothing charges includes theirs).
    parked_on_memory: u32,
    parked_on_barrier: u32,
    /// The order's warps parked at the LD/ST unit ([`Parked::LdSt`]), a bit each like
    /// `open`: a walk takes them in while the unit is free, and otherwise charges them
    /// all at once.
    on_ldst: u64,
}

impl SchedulerView {
    /// Counts warp `j` of the order parked for `p` (`add`), or no longer (`!add`).
    #[inline]
    fn count_parked(&mut self, j: usize, p: Parked, add: bool) {
        match p {
            Parked::Wait(r) => {
                let n = self.parked_on(r);
                if add {
                    *n += 1;
                } else {
                    *n -= 1;
                }
            }
            Parked::LdSt if add => self.on_ldst |= 1 << j,
            Parked::LdSt => self.on_ldst &= !(1 << j),
        }
    }

    /// The count of the order's warps parked on `r` (a load's data or a barrier).
    #[inline]
    fn parked_on(&mut self, r: StallReason) -> &mut u32 {
        match r {
            StallReason::Memory => &mut self.parked_on_memory,
            _ => &mut self.parked_on_barrier,
        }
    }
}

/// The cycle at which the units an instruction needs are free.
struct Units {
    /// Per scheduler: its SP pipeline and its tensor core.
    sp: Vec<u64>,
    tensor: Vec<u64>,
    sfu: u64,
}

/// Why an SM sleeps: its cycles repeat exactly until `until`, a completion, a new TB or a
/// change in the memory system's answer to a refused access.
#[derive(Clone, Copy, Debug)]
struct Sleep {
    until: u64,
    /// Which of the SM's sleeps this is (they are numbered from 1): the counters tell a
    /// sleep's repeated cycle from an earlier sleep's by it.
    serial: u64,
    /// The cycle repeats a refused offer (repeated for its counters) while the memory
    /// system's state is unchanged.
    on_refusal: Option<()>,
}

/// Why a lazy walk passes over a warp ([`IssueStage::parked`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Parked {
    /// A long wait of its own: its load's data (`Memory`) or a barrier (`Barrier`).
    Wait(StallReason),
    /// At the LD/ST unit: its next instruction needs the unit, and every check before the
    /// unit's passed, which only a change to its hot state undoes (time only moves past
    /// its fetch and its scoreboard). Whether it can issue then depends on the unit alone,
    /// the same for all such warps ([`Sm::ldst_block`]): most checks of a memory-bound
    /// kernel find the unit busy, refused or splitting an access.
    LdSt,
}

/// What the checks of one cycle found about sleeping.
struct SleepCheck {
    /// Every warp checked so far waits on something only a completion, a new TB or `wake`
    /// or a change in the memory system's answer to the refused access can change, and
    /// nothing issued.
    possible: bool,
    wake: u64,
    /// Ready warps checked, and issues attempted (every ready warp must have been tried and
    /// refused for the cycle to repeat).
    ready: u32,
    attempted: u32,
    /// Checks whose answer depends on more than the warp's own [`WarpHot`] (a finished
    /// warp, or one that got as far as its unit and register banks): a scheduler's cycle
    /// with any of them cannot be memoised (see [`Memo`]).
    unit_bound: u32,
    /// What the last check found its warp blocked by, if a walk may park it there
    /// ([`Parked`]): a long wait of its own (its load's data or a barrier), which only a
    /// change to its hot state ends, or the LD/ST unit (the walk parks it there only if
    /// the check found it blocked).
    parks: Option<Parked>,
}

impl SleepCheck {
    /// Nothing checked yet; sleeping is `possible` so far.
    fn new(possible: bool) -> SleepCheck {
        SleepCheck {
            possible,
            wake: u64::MAX,
            ready: 0,
            attempted: 0,
            unit_bound: 0,
            parks: None,
        }
    }
}

/// A lazy scheduler's stalled cycle that repeats: every warp it checked was blocked by
/// its own [`WarpHot`] alone (a barrier, its fetch, a load, or its scoreboard), so until
/// the earliest of their wake-up cycles, or until any of its warps' hot state or its
/// view changes, each cycle finds the same stall and notes the same wake-up for sleeping.
/// The scan is skipped then. This is what the SM's own sleep does for all schedulers at
/// once, per scheduler: one scheduler waiting on loads while another issues every cycle
/// is common.
#[derive(Clone, Copy, Debug)]
struct Memo {
    until: u64,
    reason: StallReason,
}

/// The warp schedulers of an SM and what they need each cycle.
pub(super) struct IssueStage {
    scheds: Vec<Quota<AnyScheduler>>,
    views: Vec<SchedulerView>,
    /// Per warp slot: this cycle's check (policies that read long waits check every warp
    /// first).
    checks: IdVec<WarpSlotId, Check>,
    /// What each scheduler did in the last fully evaluated cycle (what a sleep repeats:
    /// every scheduler stalled, since nothing issued).
    outcomes: Vec<SchedulerCycle>,
    units: Units,
    sleep: Option<Sleep>,
    /// Sleeps so far (the last one's [`Sleep::serial`]).
    sleeps: u64,
    /// Per scheduler: its stalled cycle, while it repeats ([`Memo`]).
    memos: Vec<Option<Memo>>,
    /// Per scheduler: whether its policy ignores long waits and the shortcuts are on, so
    /// its warps are checked lazily along its order (fixed for the SM's life).
    lazy: Vec<bool>,
    /// Warps whose last issue left them without a next instruction: they are finished from
    /// the next cycle on (what a check of them would find then).
    pub finishing: Vec<WarpSlotId>,
    /// Per warp slot: the long wait a lazy walk's check found it in, a load's data or a
    /// barrier, which only a change to its hot state ends ([`IssueStage::touched`]). Until
    /// then every check of it would find the same, without side effects: the walks pass
    /// over it (most warps of a memory-bound kernel wait on loads). A speed shortcut.
    parked: IdVec<WarpSlotId, Option<Parked>>,
    /// Per warp slot: its index in its scheduler's order, while that view `walks_open`.
    position: IdVec<WarpSlotId, u8>,
    shortcuts: Shortcuts,
}

impl IssueStage {
    pub fn new(scheds: Vec<AnyScheduler>, warps: usize, shortcuts: Shortcuts) -> IssueStage {
        let n = scheds.len();
        let lazy = scheds
            .iter()
            .map(|s| shortcuts == Shortcuts::On && !s.reads_long_wait())
            .collect();
        IssueStage {
            views: (0..n)
                .map(|_| SchedulerView {
                    infos: Vec::with_capacity(warps),
                    order: Vec::with_capacity(warps),
                    start: 0,
                    stale: true,
                    order_valid: false,
                    open: 0,
                    walks_open: false,
                    parked_on_memory: 0,
                    parked_on_barrier: 0,
                    on_ldst: 0,
                })
                .collect(),
            scheds: scheds.into_iter().map(Quota::new).collect(),
            checks: IdVec::from_vec(vec![Check::Ready; warps]),
            outcomes: Vec::with_capacity(n),
            units: Units {
                sp: vec![0; n],
                tensor: vec![0; n],
                sfu: 0,
            },
            sleep: None,
            sleeps: 0,
            memos: vec![None; n],
            lazy,
            finishing: Vec::new(),
            parked: IdVec::from_vec(vec![None; warps]),
            position: IdVec::from_vec(vec![0; warps]),
            shortcuts,
        }
    }

    /// Warps came, went, halted or resumed: every scheduler's view must be rebuilt.
    #[inline]
    pub fn views_changed(&mut self) {
        for v in &mut self.views {
            v.stale = true;
        }
        self.memos.fill(None);
    }

    /// Something changed that a sleeping SM's cycles would not repeat.
    #[inline]
    pub fn wake(&mut self) {
        self.sleep = None;
        self.memos.fill(None);
    }

    /// The hot state of the warp in `slot` changed: a sleeping SM wakes, and the
    /// scheduler of the slot checks its warps again.
    #[inline]
    pub fn touched(&mut self, slot: WarpSlotId) {
        self.sleep = None;
        let s = self.scheduler_of(slot);
        self.memos[s] = None;
        self.unpark(slot);
    }

    /// The scheduler of the warp in `slot`: slots are dealt to the schedulers in turn. Every
    /// issue asks (through [`IssueStage::touched`]), so a power-of-two count, the usual,
    /// takes a mask instead of a division.
    #[inline]
    fn scheduler_of(&self, slot: WarpSlotId) -> usize {
        let n = self.memos.len();
        if n.is_power_of_two() {
            slot.index() & (n - 1)
        } else {
            slot.index() % n
        }
    }

    /// The warp in `slot` is not parked any more (its hot state changed, or it left).
    #[inline]
    pub fn unpark(&mut self, slot: WarpSlotId) {
        let Some(p) = self.parked[slot].take() else {
            return;
        };
        let s = self.scheduler_of(slot);
        let view = &mut self.views[s];
        // Only while the warp is where the order had it: an order rebuilt since counts
        // from `parked` again.
        let j = self.position[slot];
        if view.walks_open && view.order.get(usize::from(j)) == Some(&slot) {
            view.open |= 1 << j;
            view.count_parked(usize::from(j), p, false);
        }
    }

    /// The warp in `slot`, at index `j` of its scheduler's order (`s`), was found
    /// blocked for `p` (a long wait of its own, or at the LD/ST unit).
    #[inline]
    fn park(&mut self, s: usize, j: usize, slot: WarpSlotId, p: Parked) {
        if self.parked[slot].is_some() {
            // Taken into the walk while parked at the LD/ST unit, and blocked there again.
            debug_assert_eq!(self.parked[slot], Some(p));
            return;
        }
        self.parked[slot] = Some(p);
        let view = &mut self.views[s];
        if view.walks_open {
            view.open &= !(1 << j);
            view.count_parked(j, p, true);
        }
    }

    /// Scheduler `s`'s order, walked again unchanged: its open warps and parked counts
    /// from `parked`, and every warp's position (kept until the order is written again).
    fn open_order(&mut self, s: usize) {
        let view = &mut self.views[s];
        view.walks_open = view.order.len() <= 64;
        if !view.walks_open {
            return;
        }
        view.open = 0;
        view.parked_on_memory = 0;
        view.parked_on_barrier = 0;
        view.on_ldst = 0;
        for j in 0..view.order.len() {
            let slot = view.order[j];
            self.position[slot] = j as u8;
            match self.parked[slot] {
                None => view.open |= 1 << j,
                Some(p) => view.count_parked(j, p, true),
            }
        }
    }

    /// Sets `launch`'s issue quota on every scheduler; their orders change.
    pub fn set_quota(&mut self, launch: LaunchId, quota: Option<u32>) {
        for s in &mut self.scheds {
            s.set(launch, quota);
        }
        for v in &mut self.views {
            v.order_valid = false;
        }
        self.wake();
    }
}

impl Sm {
    /// One cycle of every warp scheduler.
    #[inline(always)]
    pub(in crate::timing) fn issue<P: SmMemory>(
        &mut self,
        launches: &[Launch],
        specs: &Specs,
        memsys: &mut P,
        mem: &DeviceMemory,
        watch: &mut Watch,
        now: u64,
    ) -> Result<(), ExecError> {
        // Residency as the cycle starts, for the statistics (`Counters`).
        let active = !self.is_empty();
        let resident_warps = if active { self.resident_warps() } else { 0 };
        if let Some(sleep) = self.issue.sleep {
            let holds = sleep.on_refusal.is_none() || self.ldst.refusal_holds(memsys);
            if now < sleep.until && holds {
                if sleep.on_refusal.is_some() {
                    // The cycle repeats, and so does its refused offer (and its counters).
                    self.ldst.repeat_refusal(memsys, now);
                }
                // A sleep on a refused access is never skipped: nothing to record.
                let serial = sleep.on_refusal.is_none().then_some(sleep.serial);
                self.record_cycle(watch, now, active, resident_warps, serial);
                return Ok(());
            }
            self.issue.sleep = None;
        }
        self.issue_awake(
            launches,
            specs,
            memsys,
            mem,
            watch,
            now,
            active,
            resident_warps,
        )
    }

    /// What a cycle of this SM at `now` would count, when it would only repeat its last:
    /// it sleeps, not on a refused access (whose retry the memory's state decides), and
    /// nothing waits to retire. The machine then skips the SM's cycle, provided no
    /// completion waits for it, and the counters tally the cycle ([`super::super::counters::Doze`]).
    /// The answer is the sleep's serial, and (active, resident warps), what [`Sm::issue`]
    /// would count.
    #[inline(always)]
    pub(in crate::timing) fn dozing(&self, now: u64) -> Option<(u64, bool, u32)> {
        let s = self.issue.sleep?;
        if now >= s.until || s.on_refusal.is_some() || self.retire_due() {
            return None;
        }
        debug_assert!(self.writes.is_empty(), "a sleeping SM wrote nothing");
        let active = !self.is_empty();
        Some((
            s.serial,
            active,
            if active { self.resident_warps() } else { 0 },
        ))
    }

    /// [`Sm::issue`] of a cycle that is not slept through (kept out of line: most SMs
    /// of a large GPU sleep through most cycles, and their check stays small).
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    fn issue_awake<P: SmMemory>(
        &mut self,
        launches: &[Launch],
        specs: &Specs,
        memsys: &mut P,
        mem: &DeviceMemory,
        watch: &mut Watch,
        now: u64,
        active: bool,
        resident_warps: u32,
    ) -> Result<(), ExecError> {
        for i in 0..self.issue.finishing.len() {
            let slot = self.issue.finishing[i];
            if self.res.warps[slot].is_some() {
                self.mark_done(launches, slot);
            }
        }
        self.issue.finishing.clear();
        if let Some(tag) = self
            .ldst
            .drain_backlog(self.id, specs.memory, memsys, watch, now)
        {
            self.part_accepted(launches, specs, memsys, tag, now);
        }
        let n = self.issue.scheds.len();
        // Whether this cycle can repeat unchanged (see `Sleep`), and until when.
        let mut sleep = SleepCheck::new(!self.ldst.has_backlog());
        self.issue.outcomes.clear();
        for s in 0..n {
            // A policy that ignores long waits gets its order first and the warps are checked
            // lazily along it; otherwise every warp is checked first.
            let lazy = self.issue.lazy[s];
            if let Some(m) = self.issue.memos[s] {
                if now < m.until {
                    sleep.wake = sleep.wake.min(m.until);
                    self.issue.outcomes.push(SchedulerCycle::Stalled(m.reason));
                    continue;
                }
                self.issue.memos[s] = None;
            }
            let (wake_before, bound_before) = (sleep.wake, sleep.unit_bound);
            sleep.wake = u64::MAX;
            let mut best: Option<StallReason> = None;
            // A lazy policy's view (live warps and ages) changes only when warps come and go.
            if !lazy || self.issue.views[s].stale {
                self.issue.views[s].stale = false;
                self.issue.views[s].order_valid = false;
                self.issue.views[s].infos.clear();
                for slot in (s..self.res.warps.len()).step_by(n).map(WarpSlotId::new) {
                    let h = &self.res.hot[slot];
                    if !h.live() {
                        continue;
                    }
                    let (age, launch) = (h.age, h.launch);
                    let long_wait = if lazy {
                        false
                    } else {
                        let c = self.check_noting(launches, slot, s, now, &mut sleep);
                        self.issue.checks[slot] = c;
                        match c {
                            Check::Finished => continue,
                            Check::Blocked(r) => best = best.max(Some(r)),
                            Check::Ready => {}
                        }
                        matches!(
                            c,
                            Check::Blocked(StallReason::Memory | StallReason::Barrier)
                        )
                    };
                    self.issue.views[s].infos.push(WarpInfo {
                        slot,
                        age,
                        long_wait,
                        launch,
                    });
                }
            }
            // A lazy policy's order is a pure function of its view and of its state, which
            // only `issued` changes (the `reads_long_wait` contract): reuse it until either
            // changes.
            if !lazy || !self.issue.views[s].order_valid {
                let view = &mut self.issue.views[s];
                self.issue.scheds[s].order(&view.infos, &mut view.order);
                view.start = 0;
                view.order_valid = lazy;
                view.walks_open = false;
            } else if lazy && !self.issue.views[s].walks_open {
                self.issue.open_order(s);
            }
            let mut issued = false;
            let view = &self.issue.views[s];
            let (len, start) = (view.order.len(), view.start);
            // The walk: every warp from `start` on, wrapping around; a lazy one over the
            // open warps only (as bits: those from `start` on, then those before).
            let open = lazy && view.walks_open;
            // The warps parked at the LD/ST unit are walked while the unit is free; while
            // it is not (it stays so for the walk: no memory instruction can issue), each
            // would be found blocked there, which the walk charges at its end instead.
            let mut ldst_block = if open && view.on_ldst != 0 {
                self.ldst_block(now)
            } else {
                None
            };
            let (mut ahead, mut behind) = if open {
                let from = !0u64 << start;
                let walked = view.open
                    | if ldst_block.is_some() {
                        0
                    } else {
                        view.on_ldst
                    };
                (walked & from, walked & !from)
            } else {
                (0, 0)
            };
            let steps = if open {
                (ahead | behind).count_ones() as usize
            } else {
                len
            };
            for i in 0..steps {
                if open && ahead | behind == 0 {
                    // The rest were parked at the LD/ST unit, refused this cycle (below).
                    break;
                }
                let j = if open {
                    let bits = if ahead != 0 { &mut ahead } else { &mut behind };
                    let j = bits.trailing_zeros() as usize;
                    *bits &= *bits - 1;
                    j
                } else if start + i < len {
                    start + i
                } else {
                    start + i - len
                };
                let slot = self.issue.views[s].order[j];
                let c = if lazy {
                    sleep.parks = None;
                    let c = self.check_noting(launches, slot, s, now, &mut sleep);
                    if let (Check::Blocked(_), Some(p)) = (c, sleep.parks) {
                        self.issue.park(s, j, slot, p);
                    }
                    c
                } else {
                    self.issue.checks[slot]
                };
                match c {
                    Check::Finished => {}
                    Check::Blocked(r) => {
                        if lazy {
                            best = best.max(Some(r));
                        }
                    }
                    Check::Ready => {
                        sleep.attempted += 1;
                        let r =
                            self.try_issue(launches, specs, memsys, mem, watch, slot, s, now)?;
                        if self.log_full_at == now {
                            // Refused for want of operand-log space: the log frees at its
                            // entries' last TLB checks, which no completion announces.
                            sleep.wake = sleep.wake.min(self.log_frees_at);
                        }
                        if self.ldst.throttled_at == now {
                            // Over its issue rate: the next window brings tokens, which no
                            // completion announces.
                            let next =
                                (now / crate::timing::IRC_WINDOW + 1) * crate::timing::IRC_WINDOW;
                            sleep.wake = sleep.wake.min(next);
                        }
                        match r {
                            Ok(()) => {
                                let keeps = self.issue.scheds[s].keeps_order(slot);
                                self.issue.scheds[s].issued(slot);
                                let view = &mut self.issue.views[s];
                                if view.order_valid && !keeps {
                                    match self.issue.scheds[s].reorder(&view.order, j) {
                                        Some(start) => view.start = start,
                                        None => view.order_valid = false,
                                    }
                                }
                                issued = true;
                                break;
                            }
                            Err(r) => {
                                best = best.max(Some(r));
                                // Refused, the LD/ST unit takes nothing more this cycle:
                                // the warps parked there that the walk has not reached
                                // are passed over and charged at its end, like those of a
                                // walk that starts with the unit taken (the refused
                                // warp's own check noted the same already: the charge
                                // keeps the rule in one place).
                                let on_ldst = self.issue.views[s].on_ldst;
                                if open && ldst_block.is_none() && on_ldst != 0 {
                                    ldst_block = self.ldst_block(now);
                                    if ldst_block.is_some() {
                                        ahead &= !on_ldst;
                                        behind &= !on_ldst;
                                    }
                                }
                            }
                        }
                    }
                }
            }
            if open && !issued {
                // The parked warps would have been found waiting as they were parked.
                let view = &self.issue.views[s];
                if view.parked_on_memory > 0 {
                    best = best.max(Some(StallReason::Memory));
                } else if view.parked_on_barrier > 0 {
                    best = best.max(Some(StallReason::Barrier));
                }
                // And those parked at the LD/ST unit, passed over: what each check there
                // would have noted.
                if let Some((reason, wake)) = ldst_block {
                    best = best.max(Some(reason));
                    sleep.unit_bound += view.on_ldst.count_ones();
                    sleep.wake = sleep.wake.min(wake);
                }
                #[cfg(debug_assertions)]
                self.check_parked(launches, s, now);
            }
            // This scheduler's own earliest wake-up, then the SM's.
            let wake = sleep.wake;
            sleep.wake = wake_before.min(wake);
            let o = if issued {
                sleep.possible = false;
                SchedulerCycle::Issued
            } else {
                let reason = best.unwrap_or(StallReason::NoWarp);
                if lazy && sleep.unit_bound == bound_before && wake > now + 1 {
                    self.issue.memos[s] = Some(Memo {
                        until: wake,
                        reason,
                    });
                }
                SchedulerCycle::Stalled(reason)
            };
            self.issue.outcomes.push(o);
        }
        self.record_cycle(watch, now, active, resident_warps, None);
        self.ldst
            .offer_transfer(self.id, specs.memory, memsys, watch, now);
        if self.issue.shortcuts == Shortcuts::On
            && sleep.possible
            && sleep.ready == sleep.attempted
            && sleep.wake > now + 1
        {
            self.issue.sleeps += 1;
            self.issue.sleep = Some(Sleep {
                until: sleep.wake,
                serial: self.issue.sleeps,
                on_refusal: self.ldst.refused_now(now).then_some(()),
            });
        }
        Ok(())
    }

    /// Tells `watch` this SM's cycle `now`: its schedulers' outcomes, and the sleep's
    /// `serial` when the cycle repeats a sleep that may be skipped (`counters::Doze`).
    #[inline]
    fn record_cycle(
        &self,
        watch: &mut Watch,
        now: u64,
        active: bool,
        resident_warps: u32,
        serial: Option<u64>,
    ) {
        watch.cycle(
            SmCycle {
                cycle: now,
                sm: self.id,
                active,
                resident_warps,
                schedulers: &self.issue.outcomes,
            },
            serial,
        );
    }

    /// Whether the warp in `slot` can issue at `now`, from its `WarpHot` (the same answer
    /// as looking at the warp itself, which the hot copy mirrors); marks a finished warp
    /// done, and notes in `sleep` what the answer means for sleeping: a warp waiting at a
    /// barrier or for a load (or for the LD/ST unit another warp's refused access holds
    /// this cycle) changes only on a completion or a new TB; one waiting for its fetch or an
    /// arithmetic result, or for its busy unit, is ready at a known cycle (`wake`); a ready
    /// warp keeps the cycle repeatable only if its issue is attempted and refused (counted
    /// against `attempted`); busy register banks do not. `wake` and `ready` matter only while
    /// `sleep.possible` holds, so they are noted unconditionally.
    #[inline(always)]
    fn check_noting(
        &mut self,
        launches: &[Launch],
        slot: WarpSlotId,
        sched: usize,
        now: u64,
        sleep: &mut SleepCheck,
    ) -> Check {
        let h = &self.res.hot[slot];
        if h.state == HotState::Waiting {
            sleep.parks = Some(Parked::Wait(StallReason::Barrier));
            return Check::Blocked(StallReason::Barrier);
        }
        if h.next_pc == NO_PC {
            sleep.unit_bound += 1;
            self.mark_done(launches, slot);
            return Check::Finished;
        }
        if now < h.fetch_ready {
            sleep.wake = sleep.wake.min(h.fetch_ready);
            return Check::Blocked(StallReason::Fetch);
        }
        if h.ready == MEM_PENDING {
            sleep.parks = Some(Parked::Wait(StallReason::Memory));
            return Check::Blocked(StallReason::Memory);
        }
        if h.ready > now {
            sleep.wake = sleep.wake.min(h.ready);
            return Check::Blocked(StallReason::Scoreboard);
        }
        sleep.unit_bound += 1;
        let free = match h.class.unit() {
            Unit::Sp => self.issue.units.sp[sched],
            Unit::Tensor => self.issue.units.tensor[sched],
            Unit::Sfu => self.issue.units.sfu,
            Unit::LdSt => {
                // The same answer for every warp at the unit (`ldst_block`, which a walk
                // also asks for the warps parked there).
                sleep.parks = Some(Parked::LdSt);
                if let Some((reason, wake)) = self.ldst_block(now) {
                    sleep.wake = sleep.wake.min(wake);
                    return Check::Blocked(reason);
                }
                now
            }
        };
        if free > now {
            // A busy unit frees at a known cycle, which only this SM's next issue to it
            // changes: the cycle repeats until then, like a scoreboard wait. (A split
            // access's backlog, `MEM_PENDING`, keeps the SM awake by itself.)
            sleep.wake = sleep.wake.min(free);
            return Check::Blocked(StallReason::PipelineBusy);
        }
        // Sub-cores: the operand collector cannot read a bank still busy this cycle.
        if !self.front.banks_free(sched, h.src_banks, now) {
            sleep.possible = false;
            return Check::Blocked(StallReason::PipelineBusy);
        }
        sleep.ready += 1;
        Check::Ready
    }

    /// Whether the LD/ST unit takes no instruction at `now`, and then what a check of a
    /// warp that got as far as the unit finds ([`Sm::check_noting`]): the stall reason,
    /// and the cycle it notes for waking (`u64::MAX`: none). A split access's backlog
    /// ([`MEM_PENDING`]), a refusal this cycle, or the unit busy until a known cycle.
    #[inline]
    fn ldst_block(&self, now: u64) -> Option<(StallReason, u64)> {
        if self.ldst.backlog.is_some() {
            Some((StallReason::PipelineBusy, MEM_PENDING))
        } else if self.ldst.refused_at == now {
            Some((StallReason::Memory, u64::MAX))
        } else if self.ldst.free_at > now {
            Some((StallReason::PipelineBusy, self.ldst.free_at))
        } else {
            None
        }
    }

    /// The long wait the warp in `slot` is in by its hot state alone, which lasts until that
    /// state changes: a barrier, or (with its next instruction fetched, which time does
    /// not undo) a load's data. What [`Sm::check_noting`] finds first when there is one
    /// (debug builds check parked warps by it).
    #[cfg(debug_assertions)]
    fn hot_long_wait(&self, slot: WarpSlotId, now: u64) -> Option<StallReason> {
        let h = &self.res.hot[slot];
        if h.state == HotState::Waiting {
            Some(StallReason::Barrier)
        } else if h.next_pc != NO_PC && now >= h.fetch_ready && h.ready == MEM_PENDING {
            Some(StallReason::Memory)
        } else {
            None
        }
    }

    /// Debug builds: every warp scheduler `s`'s walk passed over is still in the wait it
    /// was parked in (or, parked at the LD/ST unit, still gets that far and is found
    /// blocked there when the unit is), and the view's bits and counts agree with
    /// `parked`.
    #[cfg(debug_assertions)]
    fn check_parked(&mut self, launches: &[Launch], s: usize, now: u64) {
        let view = &self.issue.views[s];
        let (mut memory, mut barrier, mut on_ldst) = (0, 0, 0u64);
        let mut at_ldst = Vec::new();
        for (j, &slot) in view.order.iter().enumerate() {
            let parked = self.issue.parked[slot];
            assert_eq!(
                view.open & (1 << j) == 0,
                parked.is_some(),
                "{slot:?}'s bit"
            );
            match parked {
                Some(Parked::Wait(r)) => {
                    assert_eq!(self.hot_long_wait(slot, now), Some(r), "{slot:?} parked");
                    memory += u32::from(r == StallReason::Memory);
                    barrier += u32::from(r == StallReason::Barrier);
                }
                Some(Parked::LdSt) => {
                    on_ldst |= 1 << j;
                    at_ldst.push(slot);
                }
                None => {}
            }
        }
        assert_eq!(
            (memory, barrier, on_ldst),
            (view.parked_on_memory, view.parked_on_barrier, view.on_ldst)
        );
        let block = self.ldst_block(now);
        for slot in at_ldst {
            let mut probe = SleepCheck::new(true);
            let c = self.check_noting(launches, slot, s, now, &mut probe);
            assert_eq!(
                probe.parks,
                Some(Parked::LdSt),
                "{slot:?} parked at the LD/ST unit gets there"
            );
            if let Some((reason, wake)) = block {
                assert_eq!(c, Check::Blocked(reason), "{slot:?} at the LD/ST unit");
                assert_eq!(
                    (probe.wake, probe.unit_bound),
                    (wake, 1),
                    "{slot:?}'s notes"
                );
            }
        }
    }

    /// The warp in `slot` has finished (rare: kept out of the checks it is called from).
    #[inline(never)]
    fn mark_done(&mut self, launches: &[Launch], slot: WarpSlotId) {
        let w = self.res.warp_mut(slot);
        w.status = WarpStatus::Done;
        let launch = w.launch;
        self.sync(&launches[launch.index()].decoded, slot);
        self.retire_soon();
    }

    /// Issues the next instruction of the warp in `slot` (its check said ready). The outer
    /// error is a functional fault; the inner one a memory-system refusal (nothing happened).
    #[allow(clippy::too_many_arguments)]
    fn try_issue<P: SmMemory>(
        &mut self,
        launches: &[Launch],
        specs: &Specs,
        memsys: &mut P,
        mem: &DeviceMemory,
        watch: &mut Watch,
        slot: WarpSlotId,
        sched: usize,
        now: u64,
    ) -> Result<Result<(), StallReason>, ExecError> {
        if self.replays_next(slot) {
            return self.try_replay(launches, specs, memsys, mem, watch, slot, now);
        }
        let same_offer = self
            .ldst
            .refused
            .is_some_and(|r| r.slot == slot && r.pc == self.res.hot[slot].next_pc);
        if self.issue.shortcuts == Shortcuts::On
            && same_offer
            && self.ldst.refused_at != now
            && self.ldst.refusal_holds(memsys)
        {
            // The same offer, to a memory system in the same state: refused again (made,
            // for its counters).
            self.ldst.repeat_refusal(memsys, now);
            return Ok(Err(StallReason::Memory));
        }
        let mut ws = self.res.warps[slot].take().expect("resident");
        let launch = &launches[ws.launch.index()];
        let ctx = &launch.ctx;
        let top = ws.warp.next_entry().expect("checked ready");
        let inst = &ctx.kernel.insts.as_slice()[top.pc as usize];
        let exec = guard_mask(inst, &ws.warp, top.mask);
        let class = self.res.hot[slot].class;
        if class.unit() == Unit::LdSt && self.ldst.refused_at == now {
            // Checked ready earlier this cycle, before another warp's access was refused.
            self.res.warps[slot] = Some(ws);
            return Ok(Err(StallReason::Memory));
        }
        if class == OpClass::Mem && exec != 0 && !self.log_has_room(specs, &ws, inst, now) {
            // The operand log is full: the instruction waits at issue. The LD/ST unit does
            // not: it never received the instruction, and a warp replaying a squashed
            // access through it is what frees log entries (blocking the unit here let a
            // log-full warp, checked first every cycle, starve the replays forever).
            self.res.warps[slot] = Some(ws);
            return Ok(Err(StallReason::Memory));
        }
        let plan = if class == OpClass::Mem && exec != 0 {
            let access = Access {
                launch,
                ws: &ws,
                local_base: self.res.tb(ws.tb).local_base,
                inst,
                pc: top.pc,
                exec,
                slot,
                now,
                textures: mem.textures(),
            };
            match self.plan_memory(specs, memsys, &access, watch) {
                Ok(p) => {
                    if let Some((tag, until)) = self.ldst.disable.take() {
                        match specs.memory.translating().map(|t| t.pipeline) {
                            Some(memsys::Pipeline::ReplayQueue) => self.hold_sources(
                                &mut ws,
                                launch.decoded.sources(top.pc),
                                tag,
                                until,
                                now,
                            ),
                            // The log holds a copy of the sources: nothing waits.
                            Some(memsys::Pipeline::OperandLog) => {}
                            _ => self.disable(&mut ws, tag, until, now),
                        }
                        self.log_entry(specs, &mut ws, launch, inst, top.pc, exec, tag, now);
                    }
                    p
                }
                Err(r) => {
                    // Held back by its issue rate controller, the access never reached the
                    // unit: it stays free for another warp's this cycle.
                    if self.ldst.throttled_at != now {
                        self.ldst.refused_at = now;
                    }
                    self.res.warps[slot] = Some(ws);
                    return Ok(Err(r));
                }
            }
        } else {
            MemPlan::None
        };

        let (sm, launch_id) = (self.id, ws.launch);
        watch.issue(Issue {
            cycle: now,
            sm,
            launch: launch_id,
            warp: slot,
            pc: top.pc,
            lanes: top.mask,
        });
        let before = (ws.warp.executed, ws.warp.thread_executed);
        let tb = self.res.tbs[ws.tb].as_mut().expect("resident TB");
        let mut view = TbView {
            ctaid: tb.ctaid,
            shared: &mut tb.shared,
            sm: self.id.0,
            clock: Some(now),
            local_base: tb.local_base,
        };
        let mut global = super::writes::CycleView {
            base: mem,
            log: &mut self.writes,
            slot,
        };
        let result = match step_guarded(ctx, &mut view, &mut ws.warp, &mut global, exec) {
            Ok(r) => r,
            Err(e) => {
                self.res.warps[slot] = Some(ws);
                return Err(launch.ptx_error(e));
            }
        };
        // After a checkpoint: what re-executing this instruction after a rollback would
        // repeat (a store or atomic to global or local memory), and whether it changed
        // shared memory (the registers it writes are marked dirty below, always).
        let tracking = tb.checkpoints.latest.is_some();
        if tracking && exec != 0 {
            tb.checkpoints.note(inst, top.pc);
        }
        // CKPT's interval: a warp entering a basic block (its first instruction issues)
        // counts; the `every`-th entry of one block calls for a checkpoint of the TB.
        if exec != 0 && !self.counting.is_empty() && !tb.blocks.due {
            if let Some(&(_, every)) = self.counting.iter().find(|(l, _)| *l == launch_id) {
                let cfg = &ctx.kernel.cfg;
                let pc = top.pc as usize;
                if let Some(&b) = cfg.block_of.get(pc) {
                    if cfg.blocks[b].start.index() == pc {
                        let n = cfg.blocks.len();
                        if tb.blocks.counts.is_empty() {
                            tb.blocks.counts = vec![0; tb.slots.len() * n];
                        }
                        let i = ws.warp.index as usize * n + b.index();
                        let c = &mut tb.blocks.counts[i];
                        *c = c.saturating_add(1);
                        if *c >= every {
                            tb.blocks.due = true;
                            self.due.push(tb.tb);
                            self.retire_due = super::RetireDue::Yes;
                        }
                    }
                }
            }
        }
        // A TB stopping at preemption points halts each warp right after its `pp` (or at
        // the `bar.pp` it now waits at), papers/lin-lightweight §IV-A; a warp that comes to
        // wait at any other barrier stops there too, or the TB could never stop.
        let running = matches!(ws.control, WarpControl::Running);
        let halts = running
            && matches!(tb.control, TbControl::Stopping { at, .. } if at.at_points())
            && (matches!(inst.op, Op::Pp { .. } | Op::Bar { pp: Some(_), .. })
                || matches!(result, Step::Barrier(a) if a.wait));
        let routine_ended = !running
            && match (&ws.control, result) {
                (WarpControl::InRoutine(_), Step::Barrier(_)) => {
                    let what = format!(
                        "warp {} reached a barrier at pc{} inside a routine",
                        ws.warp.index, top.pc
                    );
                    self.res.warps[slot] = Some(ws);
                    return Err(ExecError::Internal {
                        kernel: ctx.kernel.name.clone(),
                        what,
                    });
                }
                (WarpControl::InRoutine(_), _) => ws.warp.next_entry().is_none(),
                _ => false,
            };
        match result {
            Step::Executed => {}
            _ if routine_ended => {}
            Step::Barrier(a) => {
                tb.bars.arrive(&a);
                if a.wait {
                    ws.status = WarpStatus::Waiting(a);
                }
                self.retire_due = super::RetireDue::Yes;
            }
            Step::Done => {
                ws.status = WarpStatus::Done;
                self.retire_due = super::RetireDue::Yes;
            }
        }
        // The issue hook above counted it (`Counters`): one warp instruction, and a thread
        // instruction per lane of its stack entry, as `step` counts them.
        debug_assert_eq!(
            (
                ws.warp.executed - before.0,
                ws.warp.thread_executed - before.1
            ),
            (1, u64::from(top.mask.count_ones()))
        );

        // Operand collection: reads that wait for a register bank delay the result.
        let decoded = &launch.decoded;
        let late = self
            .front
            .banks_of(sched)
            .read(decoded.sources(top.pc), now);
        let timing = match (class, &specs.pipeline.tensor) {
            // Loading checked that the tensor cores take the instruction's types.
            (OpClass::Tensor, Some(t)) => t.timing(inst).unwrap_or(specs.pipeline.timing(class)),
            _ => specs.pipeline.timing(class),
        };
        match inst.op {
            Op::CpAsync { .. } if matches!(plan, MemPlan::System { .. }) => {
                ws.cp_async.issued();
            }
            Op::CpAsyncCommit => ws.cp_async.commit(),
            Op::Nanosleep => {
                // The longest of the active lanes' requests, at most 1 ms, in core cycles.
                let ns = lanes(exec)
                    .map(|l| match inst.srcs[0] {
                        Operand::Reg(r) => ws.warp.regs[r.index() * WARP_SIZE + l],
                        Operand::Imm(v) => v,
                        _ => 0,
                    } & 0xffff_ffff)
                    .max()
                    .unwrap_or(0)
                    .min(1_000_000);
                let cycles = (ns as f64 * specs.memory.clocks.core_mhz / 1000.0).round() as u64;
                ws.sleep_until = now + cycles;
            }
            _ => {}
        }
        let (ready, busy) = match plan {
            MemPlan::None => (
                now + u64::from(timing.latency.max(1)) + late,
                timing.interval,
            ),
            MemPlan::System { pending: true } => {
                ws.outstanding += 1;
                (MEM_PENDING, timing.interval)
            }
            MemPlan::System { pending: false } => {
                ws.stores += 1;
                (now + 1, timing.interval)
            }
            MemPlan::Fixed { latency, busy } => (now + latency.max(1) + late, busy as u32),
        };
        for &r in decoded.destinations(top.pc) {
            ws.ready_at[r as usize] = ready;
            ws.mark_dirty(r);
        }
        let until = now + u64::from(busy.max(1));
        match class.unit() {
            Unit::Sp => self.issue.units.sp[sched] = until,
            Unit::Tensor => self.issue.units.tensor[sched] = until,
            Unit::Sfu => self.issue.units.sfu = until,
            Unit::LdSt => self.ldst.free_at = until,
        }
        if halts {
            ws.control = match tb.control {
                TbControl::Stopping {
                    reports: crate::timing::control::WarpReports::EachWarp,
                    ..
                } => WarpControl::HaltedReporting,
                _ => WarpControl::Halted,
            };
        }
        if routine_ended {
            self.end_routine(&mut ws);
        }
        self.res.warps[slot] = Some(ws);
        self.sync(decoded, slot);
        let h = &self.res.hot[slot];
        if h.next_pc == NO_PC && h.state != HotState::Done {
            // No `exit`, but nothing left to run either (see `finishing`).
            self.issue.finishing.push(slot);
        }
        // The buffer still holds the next instruction only if it follows the one issued.
        let next = self.res.hot[slot].next_pc;
        if next != NO_PC && !(next == top.pc + 1 && next < self.res.hot[slot].buffer_end) {
            self.front.fill_buffer(&mut self.res.hot[slot], slot, now);
        }
        Ok(Ok(()))
    }
}

/// Warp disable (papers/tanasic-thesis §6.3.1; `memsys::Pipeline::WdCommit`, `WdLastcheck`).
impl Sm {
    /// Disables warp `ws` after it issued access `tag`: until `until`, or while `until` is
    /// [`MEM_PENDING`], until the access completes or its last part is translated.
    fn disable(
        &mut self,
        ws: &mut super::warp::WarpSlot,
        tag: crate::timing::ids::PendingId,
        until: u64,
        now: u64,
    ) {
        self.disables += 1;
        ws.disabled_since = now;
        ws.disabled_until = until;
        if until == MEM_PENDING {
            ws.disabled_by = Some(tag);
        } else {
            ws.disabled_by = None;
            self.disabled_cycles += until.saturating_sub(now);
        }
    }

    /// Replay queue: holds the sources `regs` of access `tag` against overwriting until
    /// `until` (or, while that is [`MEM_PENDING`], until the access's last TLB check).
    fn hold_sources(
        &mut self,
        ws: &mut super::warp::WarpSlot,
        regs: &[u32],
        tag: crate::timing::ids::PendingId,
        until: u64,
        now: u64,
    ) {
        self.source_holds += 1;
        ws.held.retain(|&(_, u, _)| u > now);
        let by = (until == MEM_PENDING).then_some(tag);
        for &r in regs {
            ws.held.push((r, until, by));
        }
    }

    /// A further part of access `tag` was accepted: under WD-lastcheck, once its last part
    /// is in and no part waits for a fault, its warp is enabled at its last translation.
    fn part_accepted<P: SmMemory>(
        &mut self,
        launches: &[Launch],
        specs: &Specs,
        memsys: &P,
        tag: crate::timing::ids::PendingId,
        now: u64,
    ) {
        let Some(r) = memsys.last_translated() else {
            return;
        };
        let pipeline = specs.memory.translating().map(|t| t.pipeline);
        let last = self.ldst.backlog.is_none();
        let p = self.ldst.pending.get_mut(tag);
        p.translated = p.translated.max(r);
        let (translated, slot) = (p.translated, p.slot);
        if !last || translated == MEM_PENDING {
            return;
        }
        let Some(slot) = slot else {
            return;
        };
        let Some(w) = self.res.warps[slot].as_deref_mut() else {
            return;
        };
        if let Some(e) = Sm::entry_of(w, tag) {
            // Its last TLB check: the entry leaves the replay queue (or the log) then,
            // and an `exit` or barrier waiting for it may issue.
            e.release = translated;
            let launch = w.launch;
            self.sync(&launches[launch.index()].decoded, slot);
        }
        let Some(w) = self.res.warps[slot].as_deref_mut() else {
            return;
        };
        if pipeline == Some(memsys::Pipeline::ReplayQueue) {
            // Its sources are released at its last TLB check.
            for h in w.held.iter_mut().filter(|h| h.2 == Some(tag)) {
                (h.1, h.2) = (translated, None);
            }
            let launch = w.launch;
            self.sync(&launches[launch.index()].decoded, slot);
            return;
        }
        if w.disabled_by != Some(tag) || pipeline != Some(memsys::Pipeline::WdLastcheck) {
            return;
        }
        w.disabled_by = None;
        w.disabled_until = translated;
        self.disabled_cycles += translated.max(now) - w.disabled_since;
        let launch = w.launch;
        self.sync(&launches[launch.index()].decoded, slot);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timing::scheduler::Lrr;

    /// A warp's scheduler, as `touched` and `unpark` find it, is the one whose walk visits
    /// its slot (slots dealt in turn), for power-of-two counts and others.
    #[test]
    fn a_slot_belongs_to_the_scheduler_that_walks_it() {
        for n in 1..=6 {
            let scheds = (0..n).map(|_| AnyScheduler::Lrr(Lrr::default())).collect();
            let stage = IssueStage::new(scheds, 48, Shortcuts::On);
            for s in 0..n {
                for slot in (s..48).step_by(n).map(WarpSlotId::new) {
                    assert_eq!(stage.scheduler_of(slot), s, "{n} schedulers, {slot:?}");
                }
            }
        }
    }
}
