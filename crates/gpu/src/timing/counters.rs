//! The machine's statistics as a probe (the issue "Machine II": statistics become
//! probes). [`Counters`] is an ordinary [`Probe`]: everything a launch's [`TimedStats`]
//! reports of the SMs — active and resident-warp cycles, every scheduler's issues and
//! stalls, TBs dispatched, warp and thread instructions, loads and their latency,
//! shared-memory accesses and their bank-conflict passes, interconnect requests — is counted from the hooks any
//! probe hears, and from nothing else. The machine always holds one and calls it
//! statically through the same hooks as an attached probe, so the statistics need no probe
//! attached and cost a run what plain counters cost; attaching a second `Counters`
//! counts the same figures (`gpu/tests/probes.rs` checks it).
//!
//! Not here: the counters components keep of themselves, as hardware performance
//! counters do — the instruction caches and register banks of the front end
//! ([`super::FrontendStats`]) and the memory system's caches, crossbars and DRAM
//! (`memsys::MemStats`) — and the occupancy samples the machine takes at the end of a
//! cycle, after the control has placed TBs.
//!
//! [`TimedStats`]: super::TimedStats

use kir::{Id, IdVec};

use super::ids::{LaunchId, SmId};
use super::machine::Event;
use super::probe::{Interests, Issue, Probe, SmCycle};
use super::stats::SmStats;

/// A launch's own counts, summed over SMs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LaunchTally {
    pub warp_instructions: u64,
    pub thread_instructions: u64,
    /// Completed parts of loads and atomics the warps waited for, and their latency summed.
    pub global_loads: u64,
    pub load_latency: u64,
    /// Shared-memory warp accesses, and their bank-conflict passes summed.
    pub shared_accesses: u64,
    pub shared_passes: u64,
    /// Request packets its accesses sent towards the L2 (L1 misses, stores, atomics; its
    /// context transfers included): its interconnect traffic.
    pub noc_requests: u64,
}

impl LaunchTally {
    fn add(&mut self, o: &LaunchTally) {
        self.warp_instructions += o.warp_instructions;
        self.thread_instructions += o.thread_instructions;
        self.global_loads += o.global_loads;
        self.load_latency += o.load_latency;
        self.shared_accesses += o.shared_accesses;
        self.shared_passes += o.shared_passes;
        self.noc_requests += o.noc_requests;
    }
}

/// Per-SM and per-launch counters, counted from the probe hooks. Each SM's counts,
/// per-launch tallies included, are kept apart (`SmCounters`), so SMs stepped on
/// different threads each count into their own; a launch's tally is their sum.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Counters {
    sms: Vec<SmStats>,
    /// Per SM, per launch.
    launches: Vec<IdVec<LaunchId, LaunchTally>>,
}

/// One SM's counters ([`Counters::of_sm`]), borrowed while the SM runs its cycle.
pub(super) struct SmCounters<'a> {
    stats: &'a mut SmStats,
    launches: &'a mut IdVec<LaunchId, LaunchTally>,
}

impl SmCounters<'_> {
    /// The same counters, borrowed again for a shorter while.
    pub(super) fn reborrow(&mut self) -> SmCounters<'_> {
        SmCounters {
            stats: self.stats,
            launches: self.launches,
        }
    }
}

impl Counters {
    /// Counters for `sms` SMs of `schedulers` warp schedulers each, all zero.
    pub fn new(sms: usize, schedulers: usize) -> Counters {
        Counters {
            sms: vec![
                SmStats {
                    schedulers: vec![Default::default(); schedulers],
                    ..Default::default()
                };
                sms
            ],
            launches: vec![IdVec::new(); sms],
        }
    }

    /// SM `sm`'s counters.
    #[inline]
    pub(super) fn of_sm(&mut self, sm: SmId) -> SmCounters<'_> {
        SmCounters {
            stats: &mut self.sms[sm.index()],
            launches: &mut self.launches[sm.index()],
        }
    }

    /// Every SM's counters, in SM order.
    pub(super) fn per_sm(&mut self) -> impl Iterator<Item = SmCounters<'_>> {
        self.sms
            .iter_mut()
            .zip(&mut self.launches)
            .map(|(stats, launches)| SmCounters { stats, launches })
    }

    /// SM `sm`'s counts so far (its front end's own counters are not the probe's: zero).
    pub fn sm(&self, sm: SmId) -> &SmStats {
        &self.sms[sm.index()]
    }

    /// Every SM's counts so far, in SM order.
    pub fn sms(&self) -> &[SmStats] {
        &self.sms
    }

    /// Request packets the accesses of every launch on SM `sm` have sent towards the L2
    /// so far (their [`LaunchTally::noc_requests`] there): what an issue rate controller
    /// counts, read per SM as CCBP's online profile reads it (papers/lin-thesis §4.5).
    pub fn sm_noc_requests(&self, sm: SmId) -> u64 {
        self.launches[sm.index()]
            .values()
            .map(|t| t.noc_requests)
            .sum()
    }

    /// `launch`'s counts so far, summed over SMs.
    pub fn launch(&self, launch: LaunchId) -> LaunchTally {
        let mut t = LaunchTally::default();
        for per in &self.launches {
            if let Some(k) = per.get(launch) {
                t.add(k);
            }
        }
        t
    }
}

impl SmCounters<'_> {
    #[inline]
    fn launch_mut(&mut self, launch: LaunchId) -> &mut LaunchTally {
        while self.launches.len() <= launch.index() {
            self.launches.push(LaunchTally::default());
        }
        &mut self.launches[launch]
    }

    #[inline]
    pub(super) fn on_issue(&mut self, i: &Issue) {
        self.stats.warp_instructions += 1;
        let k = self.launch_mut(i.launch);
        k.warp_instructions += 1;
        k.thread_instructions += u64::from(i.lanes.count_ones());
    }

    #[inline]
    pub(super) fn on_load_done(&mut self, launch: LaunchId, latency: u64) {
        let k = self.launch_mut(launch);
        k.global_loads += 1;
        k.load_latency += latency;
    }

    #[inline]
    pub(super) fn on_shared_access(&mut self, launch: LaunchId, passes: u32) {
        let k = self.launch_mut(launch);
        k.shared_accesses += 1;
        k.shared_passes += u64::from(passes);
    }

    #[inline]
    pub(super) fn on_noc_requests(&mut self, launch: LaunchId, n: u64) {
        if n > 0 {
            self.launch_mut(launch).noc_requests += n;
        }
    }

    #[inline]
    pub(super) fn on_sm_cycle(&mut self, c: &SmCycle) {
        let s = &mut *self.stats;
        if c.active {
            s.active_cycles += 1;
            s.resident_warp_cycles += u64::from(c.resident_warps);
        }
        for (st, &o) in s.schedulers.iter_mut().zip(c.schedulers) {
            st.count(o);
        }
    }
}

impl Probe for Counters {
    fn interests(&self) -> Interests {
        Interests::ISSUES
            .and(Interests::MEMORY)
            .and(Interests::CYCLES)
    }

    #[inline]
    fn on_issue(&mut self, i: &Issue) {
        self.of_sm(i.sm).on_issue(i);
    }

    #[inline]
    fn on_load_done(&mut self, sm: SmId, launch: LaunchId, latency: u64, _cycle: u64) {
        self.of_sm(sm).on_load_done(launch, latency);
    }

    #[inline]
    fn on_shared_access(&mut self, sm: SmId, launch: LaunchId, passes: u32, _cycle: u64) {
        self.of_sm(sm).on_shared_access(launch, passes);
    }

    #[inline]
    fn on_noc_requests(&mut self, sm: SmId, launch: LaunchId, n: u64, _cycle: u64) {
        self.of_sm(sm).on_noc_requests(launch, n);
    }

    #[inline]
    fn on_sm_cycle(&mut self, c: &SmCycle) {
        self.of_sm(c.sm).on_sm_cycle(c);
    }

    fn on_event(&mut self, event: &Event) {
        if let Event::TbDispatched { sm, .. } = *event {
            self.sms[sm.index()].tbs += 1;
        }
    }
}
