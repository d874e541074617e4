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
use super::stats::{SchedulerCycle, SmStats};

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
    /// Per SM: per launch, and the cycles it slept through without being stepped, not yet
    /// counted.
    launches: Vec<(IdVec<LaunchId, LaunchTally>, Doze)>,
}

/// A sleeping SM's cycles that the machine skips (ARCHITECTURE.md, "Speed"): each would
/// count what the SM's last counted sleeping cycle counted, so they are tallied here and
/// counted at once ([`Counters::settle`]) before anyone reads the SM's counts.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Doze {
    /// The sleep ([`Sm`'s serial] of it, 0 for none) whose last counted cycle counted
    /// these (a sleep repeats its schedulers' outcomes; residency is checked at each skip).
    ///
    /// [`Sm`'s serial]: super::sm::Sm::dozing
    serial: u64,
    active: bool,
    resident_warps: u32,
    outcomes: Vec<SchedulerCycle>,
    /// Cycles skipped since the last settle, each counting as the record.
    skipped: u64,
    /// Cycles skipped, ever.
    skipped_ever: u64,
}

/// One SM's counters ([`Counters::of_sm`]), borrowed while the SM runs its cycle.
pub(super) struct SmCounters<'a> {
    stats: &'a mut SmStats,
    launches: &'a mut IdVec<LaunchId, LaunchTally>,
    doze: &'a mut Doze,
}

impl SmCounters<'_> {
    /// The same counters, borrowed again for a shorter while.
    pub(super) fn reborrow(&mut self) -> SmCounters<'_> {
        SmCounters {
            stats: self.stats,
            launches: self.launches,
            doze: self.doze,
        }
    }

    /// Whether a skipped cycle of the SM, now sleeping with this residency, counts what
    /// its last counted cycle did (that cycle slept, with the same residency).
    #[inline]
    pub(super) fn repeats(&self, (serial, active, resident_warps): (u64, bool, u32)) -> bool {
        let d = &*self.doze;
        d.serial == serial && d.active == active && d.resident_warps == resident_warps
    }

    /// Counts a cycle the machine skipped (after [`SmCounters::repeats`] said it repeats).
    #[inline]
    pub(super) fn skipped(&mut self) {
        self.doze.skipped += 1;
        self.doze.skipped_ever += 1;
    }

    /// Notes what a cycle of sleep `serial` counts, for its skipped cycles (those skipped
    /// before, as the record was, counted first).
    #[inline]
    fn record_sleep(&mut self, c: &SmCycle, serial: u64) {
        self.settle();
        let d = &mut *self.doze;
        if d.serial != serial {
            // Within one sleep the outcomes repeat: copied at its first counted cycle.
            d.serial = serial;
            d.outcomes.clear();
            d.outcomes.extend_from_slice(c.schedulers);
        }
        d.active = c.active;
        d.resident_warps = c.resident_warps;
    }

    /// Counts the skipped cycles.
    #[inline]
    fn settle(&mut self) {
        if self.doze.skipped != 0 {
            self.settle_skipped();
        }
    }

    #[cold]
    #[inline(never)]
    fn settle_skipped(&mut self) {
        let d = &mut *self.doze;
        let (n, s) = (std::mem::take(&mut d.skipped), &mut *self.stats);
        if d.active {
            s.active_cycles += n;
            s.resident_warp_cycles += n * u64::from(d.resident_warps);
        }
        for (st, &o) in s.schedulers.iter_mut().zip(&d.outcomes) {
            st.count_n(o, n);
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
            launches: vec![(IdVec::new(), Doze::default()); sms],
        }
    }

    /// Counts every SM's skipped cycles ([`Doze`]): the machine calls it before its
    /// counts are read.
    pub(super) fn settle(&mut self) {
        for mut c in self.per_sm() {
            c.settle();
        }
    }

    /// SM `sm`'s counters.
    #[inline]
    pub(super) fn of_sm(&mut self, sm: SmId) -> SmCounters<'_> {
        let (launches, doze) = &mut self.launches[sm.index()];
        SmCounters {
            stats: &mut self.sms[sm.index()],
            launches,
            doze,
        }
    }

    /// Every SM's counters, in SM order.
    pub(super) fn per_sm(&mut self) -> impl Iterator<Item = SmCounters<'_>> {
        self.sms
            .iter_mut()
            .zip(&mut self.launches)
            .map(|(stats, (launches, doze))| SmCounters {
                stats,
                launches,
                doze,
            })
    }

    /// SM `sm`'s counts so far (its front end's own counters are not the probe's: zero),
    /// as of the machine's last settle of skipped cycles ([`crate::timing::Machine::counters`]
    /// settles them).
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
            .0
            .values()
            .map(|t| t.noc_requests)
            .sum()
    }

    /// SM cycles the machine skipped because the SM slept through them (each counted as
    /// the SM's sleep repeats, [`Doze`]): a measure of the shortcut, not of the GPU.
    pub fn skipped_cycles(&self) -> u64 {
        self.launches.iter().map(|(_, d)| d.skipped_ever).sum()
    }

    /// `launch`'s counts so far, summed over SMs.
    pub fn launch(&self, launch: LaunchId) -> LaunchTally {
        let mut t = LaunchTally::default();
        for (per, _) in &self.launches {
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

    /// Counts one cycle of the SM; `sleep` is the serial of the sleep it slept through it
    /// in (a cycle that repeats until the SM wakes, which the machine may then skip:
    /// [`Doze`]). Skipped cycles are counted whenever, so an awake cycle leaves them be.
    #[inline(always)]
    pub(super) fn on_sm_cycle(&mut self, c: &SmCycle, sleep: Option<u64>) {
        if let Some(serial) = sleep {
            self.record_sleep(c, serial);
        }
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
        self.of_sm(c.sm).on_sm_cycle(c, None);
    }

    fn on_event(&mut self, event: &Event) {
        if let Event::TbDispatched { sm, .. } = *event {
            self.sms[sm.index()].tbs += 1;
        }
    }
}
