//! GPUDuet's throughput monitor (papers/lin-thesis §3.6.4): with `[sm.tlp] dynamic`, a
//! kernel starts with no extra TB, and the monitor sets their number (ME) from the
//! utilisation of the scheduler, the L1, the interconnect, the L2 and DRAM, classed by
//! Table 3.3 ([`super::stats::Utilisation`]).
//!
//! As §3.6.4 states it: the monitor skips the first [`WARM_UP`] cycles, then counts for
//! [`WINDOW`] cycles and sets ME for the first time — the bound for an underutilised kernel,
//! 0 for a saturated one; a moderately utilised one starts at 0 and gains one extra TB every
//! window until it reaches the bound or a window finds a resource saturated. ME acts
//! through the ledgers' TLP totals: lowering it evicts nothing, it admits no new TB beyond.
//!
//! Ours: there is one monitor per kernel (by name), and its cycles are those during which a
//! launch of the kernel runs. The thesis's benchmarks run one kernel for millions of
//! cycles; a host loop that relaunches a short kernel (hotspot, srad) instead goes on
//! with the warm-up and the window where its previous launch left them, and every launch
//! of the kernel gets the ME found so far, so no launch pays the warm-up again. The
//! counters are the whole GPU's over those cycles (with one kernel running, as in the
//! thesis's runs, they are that kernel's). A kernel that grows to saturation keeps the ME
//! it has.
//!
//! **The L1 as a third store** (§3.6.4: "for unsaturated benchmarks, if there is no extra
//! space in the register file or shared memory and the L1-D cache bandwidth utilization is
//! low (less than 3%), the L1-D cache is entirely bypassed and used to store the spilled
//! context"): where the register file and shared memory hold no extra TB's context (the
//! bound without the L1 is 0) and the bypassed L1 would hold one, the first window that
//! finds the kernel unsaturated with the L1's use under [`L1_STORE_BELOW`] makes the L1 a
//! store for good: every SM's L1 is bypassed while a launch of the kernel runs, and its
//! bound is the one with the L1. Ours: the L1s of every SM, since the counts are the
//! GPU's. A first reading — the L1 wherever it would raise the bound — bypassed the L1 of
//! kernels with room elsewhere already (hotspot, softmax, mulword) and cost them up to 6%
//! (docs/results.md).

use kir::Id;

use super::backend::MemoryBackend;
use super::ids::LaunchId;
use super::launch::Snapshot;
use super::machine::Machine;
use super::stats::{SchedulerStats, Utilisation, UtilisationClass, UtilisationCounts};

/// Core cycles of a kernel's running before the monitor counts.
pub const WARM_UP: u64 = 10_000;
/// Core cycles of one window of counts.
pub const WINDOW: u64 = 10_000;
/// The L1 use below which an unsaturated kernel's L1 becomes a context store (§3.6.4).
pub const L1_STORE_BELOW: f64 = 0.03;

/// The monitor of one kernel.
pub(super) struct Monitor {
    kernel: String,
    /// Its launches running now.
    launches: Vec<LaunchId>,
    /// The bound on ME ([`crate::tlp::extra_tbs`]), the bound with the L1 as a third store,
    /// whether the L1 is one, and ME now.
    bound: u32,
    l1_bound: u32,
    l1: bool,
    extra: u32,
    state: State,
    /// Cycles of the kernel's running in the current phase (warm-up or window).
    counted: u64,
    /// The window's counts of earlier stretches, and the counters when the current stretch
    /// began (none while no launch of the kernel runs, or during the warm-up).
    counts: UtilisationCounts,
    since: Option<Snapshot>,
}

impl Monitor {
    /// The bound ME may reach now: with the L1 as a store once it is one.
    fn limit(&self) -> u32 {
        if self.l1 {
            self.l1_bound
        } else {
            self.bound
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// In the warm-up.
    Warming,
    /// Counting the first window.
    Classing,
    /// Moderately utilised: one more extra TB each window.
    Growing,
    /// ME is final.
    Settled,
}

/// ME and the monitor's next state after a window classed `class`, in state `state` with
/// `extra` extra TBs now and at most `bound`.
fn decide(state: State, class: UtilisationClass, extra: u32, bound: u32) -> (u32, State) {
    let (extra, state) = match (state, class) {
        (State::Settled | State::Warming, _) => (extra, state),
        (State::Classing, UtilisationClass::Underutilised) => (bound, State::Settled),
        (State::Classing, UtilisationClass::Saturated) => (0, State::Settled),
        (State::Classing, UtilisationClass::Moderate) => (1, State::Growing),
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
    /// `launch` arrived, with at most `bound` extra TBs (`l1_bound` with the L1 as a store):
    /// it joins its kernel's monitor (made now for the kernel's first launch) and gets the
    /// ME found so far.
    pub(super) fn start_monitor(&mut self, launch: LaunchId, bound: u32, l1_bound: u32) {
        let kernel = self.launches[launch.index()].ctx.kernel.name.clone();
        let i = match self.monitors.iter().position(|m| m.kernel == kernel) {
            Some(i) => i,
            None => {
                self.monitors.push(Monitor {
                    kernel,
                    launches: Vec::new(),
                    bound,
                    l1_bound,
                    l1: false,
                    extra: 0,
                    state: State::Warming,
                    counted: 0,
                    counts: UtilisationCounts::default(),
                    since: None,
                });
                self.monitors.len() - 1
            }
        };
        if self.monitors[i].launches.is_empty() && self.monitors[i].state != State::Warming {
            self.monitors[i].since = Some(self.snapshot());
        }
        let m = &mut self.monitors[i];
        m.launches.push(launch);
        m.bound = m.bound.min(bound);
        m.l1_bound = m.l1_bound.min(l1_bound);
        let extra = m.extra.min(m.limit());
        self.set_extra(launch, extra);
        self.update_l1_store();
    }

    /// Bypasses every SM's L1 while a kernel whose monitor made it a store runs, and uses
    /// it again once none does.
    fn update_l1_store(&mut self) {
        let on = self.monitors.iter().any(|m| m.l1 && !m.launches.is_empty());
        if on {
            for m in self.monitors.iter().filter(|m| m.l1) {
                for &l in &m.launches {
                    self.launches[l.index()].l1_store = true;
                }
            }
        }
        if on != self.l1_store {
            self.l1_store = on;
            for sm in 0..self.sms.len() {
                self.memsys.set_l1_bypass(super::ids::SmId(sm as u32), on);
            }
        }
    }

    /// `launch` finished: its monitor counts the stretch that ends.
    pub(super) fn stop_monitor(&mut self, launch: LaunchId) {
        let Some(i) = self
            .monitors
            .iter()
            .position(|m| m.launches.contains(&launch))
        else {
            return;
        };
        self.monitors[i].launches.retain(|&l| l != launch);
        if self.monitors[i].launches.is_empty() {
            if let Some(since) = self.monitors[i].since.take() {
                let counts = self.counts_since(&since);
                self.monitors[i].counts.add(&counts);
            }
            self.update_l1_store();
        }
    }

    /// The utilisation counts from `since` to now.
    fn counts_since(&mut self, since: &Snapshot) -> UtilisationCounts {
        let now = self.snapshot();
        let mut schedulers = SchedulerStats::default();
        for (a, b) in now.sms.iter().zip(&since.sms) {
            for s in &a.since(b).schedulers {
                schedulers.add(s);
            }
        }
        UtilisationCounts::of(&schedulers, &now.memory.since(&since.memory))
    }

    /// Each monitor whose kernel runs counts this cycle; one whose warm-up or window ends
    /// acts (see the module documentation).
    pub(super) fn tlp_monitor(&mut self) {
        for i in 0..self.monitors.len() {
            let m = &mut self.monitors[i];
            if m.launches.is_empty() || m.state == State::Settled {
                continue;
            }
            m.counted += 1;
            let limit = if m.state == State::Warming {
                WARM_UP
            } else {
                WINDOW
            };
            if m.counted < limit {
                continue;
            }
            m.counted = 0;
            if m.state == State::Warming {
                m.state = State::Classing;
                self.monitors[i].since = Some(self.snapshot());
                continue;
            }
            let since = self.monitors[i].since.take().expect("counting");
            let mut counts = self.counts_since(&since);
            let m = &mut self.monitors[i];
            counts.add(&m.counts);
            m.counts = UtilisationCounts::default();
            let u = Utilisation::of_counts(&counts, &self.memcfg);
            let class = u.class;
            let l1_now = !m.l1
                && m.bound == 0
                && m.l1_bound > 0
                && class != UtilisationClass::Saturated
                && u.l1 < L1_STORE_BELOW;
            if l1_now {
                m.l1 = true;
            }
            let (extra, state) = decide(m.state, class, m.extra, m.limit());
            (m.extra, m.state) = (extra, state);
            let launches = m.launches.clone();
            if state != State::Settled {
                self.monitors[i].since = Some(self.snapshot());
            }
            for l in launches {
                self.set_extra(l, extra);
            }
            if l1_now {
                self.update_l1_store();
            }
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

    /// ME after each window's class, from a kernel's first window.
    fn after(classes: &[UtilisationClass], bound: u32) -> Vec<u32> {
        let (mut state, mut extra) = (State::Classing, 0);
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
