//! GPUDuet's throughput monitor (papers/lin-thesis §3.6.4): with `[sm.tlp] dynamic`, a
//! launch starts with no extra TB, and the monitor sets their number (ME) from the
//! utilisation of the scheduler, the L1, the interconnect, the L2 and DRAM, classed by
//! Table 3.3 ([`super::stats::Utilisation`]).
//!
//! As §3.6.4 states it: the monitor skips the first [`WARM_UP`] cycles, then counts for
//! [`WINDOW`] cycles and sets ME for the first time — the bound for an underutilised kernel,
//! 0 for a saturated one; a moderately utilised one starts at 0 and gains one extra TB every
//! window until it reaches the bound or a window finds a resource saturated. ME acts
//! through the ledgers' TLP totals: lowering it evicts nothing, it admits no new TB beyond.
//!
//! Ours: the counters are the whole GPU's (with one kernel running, as in the thesis's
//! runs, they are that kernel's); a kernel that grows to saturation keeps the ME it has.

use kir::Id;

use super::backend::MemoryBackend;
use super::ids::LaunchId;
use super::launch::Snapshot;
use super::machine::Machine;
use super::stats::{SchedulerStats, Utilisation, UtilisationClass};

/// Core cycles after a launch's arrival before the monitor counts.
pub const WARM_UP: u64 = 10_000;
/// Core cycles of one window of counts.
pub const WINDOW: u64 = 10_000;

/// The monitor of one launch.
pub(super) struct Monitor {
    pub launch: LaunchId,
    /// The bound on ME ([`crate::tlp::extra_tbs`]).
    bound: u32,
    /// When it looks next, and the counters when its window began.
    next: u64,
    start: Option<Snapshot>,
    state: State,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Not yet classed.
    Warming,
    /// Moderately utilised: one more extra TB each window.
    Growing,
    /// ME is final.
    Settled,
}

impl Monitor {
    pub(super) fn new(launch: LaunchId, bound: u32, now: u64) -> Monitor {
        Monitor {
            launch,
            bound,
            next: now + WARM_UP,
            start: None,
            state: State::Warming,
        }
    }
}

/// ME and the monitor's next state after a window classed `class`, in state `state` with
/// `extra` extra TBs now and at most `bound`.
fn decide(state: State, class: UtilisationClass, extra: u32, bound: u32) -> (u32, State) {
    let (extra, state) = match (state, class) {
        (State::Settled, _) => (extra, State::Settled),
        (State::Warming, UtilisationClass::Underutilised) => (bound, State::Settled),
        (State::Warming, UtilisationClass::Saturated) => (0, State::Settled),
        (State::Warming, UtilisationClass::Moderate) => (1, State::Growing),
        (State::Growing, UtilisationClass::Saturated) => (extra, State::Settled),
        (State::Growing, _) => (extra + 1, State::Growing),
    };
    let extra = extra.min(bound);
    (
        extra,
        if extra == bound {
            State::Settled
        } else {
            state
        },
    )
}

impl<B: MemoryBackend> Machine<B> {
    /// Each monitor whose time has come looks at its window (see the module documentation).
    pub(super) fn tlp_monitor(&mut self, now: u64) {
        for i in 0..self.monitors.len() {
            if self.monitors[i].next > now || self.monitors[i].state == State::Settled {
                continue;
            }
            let snapshot = self.snapshot();
            let m = &mut self.monitors[i];
            m.next = now + WINDOW;
            let Some(start) = m.start.replace(snapshot) else {
                continue;
            };
            let end = m.start.as_ref().expect("just set");
            let memory = end.memory.since(&start.memory);
            let mut schedulers = SchedulerStats::default();
            for (a, b) in end.sms.iter().zip(&start.sms) {
                for s in &a.since(b).schedulers {
                    schedulers.add(s);
                }
            }
            let class = Utilisation::of(&schedulers, &memory, &self.memcfg).class;
            let launch = m.launch;
            let extra = self.launches[launch.index()].tlp.extra;
            let (extra, state) = decide(m.state, class, extra, m.bound);
            m.state = state;
            self.set_extra(launch, extra);
        }
    }

    /// Gives `launch` `extra` TBs beyond its native ones on every SM.
    pub(super) fn set_extra(&mut self, launch: LaunchId, extra: u32) {
        let l = &mut self.launches[launch.index()];
        l.tlp.extra = extra;
        let total = (extra > 0).then_some(l.tlp.native + extra);
        for sm in &mut self.sms {
            sm.set_tlp(launch, total);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use UtilisationClass::{Moderate, Saturated, Underutilised};

    /// ME after each window's class, from a launch's start.
    fn after(classes: &[UtilisationClass], bound: u32) -> Vec<u32> {
        let (mut state, mut extra) = (State::Warming, 0);
        classes
            .iter()
            .map(|&c| {
                (extra, state) = decide(state, c, extra, bound);
                extra
            })
            .collect()
    }

    #[test]
    fn underutilised_gets_the_bound_and_saturated_none() {
        assert_eq!(after(&[Underutilised, Saturated], 4), [4, 4]);
        assert_eq!(after(&[Saturated, Underutilised], 4), [0, 0]);
    }

    #[test]
    fn moderate_grows_by_one_until_the_bound_or_saturation() {
        assert_eq!(
            after(&[Moderate, Moderate, Underutilised, Moderate, Moderate], 3),
            [1, 2, 3, 3, 3]
        );
        assert_eq!(
            after(&[Moderate, Moderate, Saturated, Moderate], 4),
            [1, 2, 2, 2]
        );
        assert_eq!(after(&[Moderate, Moderate], 1), [1, 1]);
    }
}
