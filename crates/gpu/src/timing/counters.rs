//! The machine's statistics as a probe (the issue "Machine II": statistics become
//! probes). [`Counters`] is an ordinary [`Probe`]: everything a launch's [`TimedStats`]
//! reports of the SMs — active and resident-warp cycles, every scheduler's issues and
//! stalls, TBs dispatched, warp and thread instructions, loads and their latency,
//! shared-memory accesses and their bank-conflict passes — is counted from the hooks any
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
}

/// Per-SM and per-launch counters, counted from the probe hooks.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Counters {
    sms: Vec<SmStats>,
    launches: IdVec<LaunchId, LaunchTally>,
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
            launches: IdVec::new(),
        }
    }

    /// SM `sm`'s counts so far (its front end's own counters are not the probe's: zero).
    pub fn sm(&self, sm: SmId) -> &SmStats {
        &self.sms[sm.index()]
    }

    /// Every SM's counts so far, in SM order.
    pub fn sms(&self) -> &[SmStats] {
        &self.sms
    }

    /// `launch`'s counts so far.
    pub fn launch(&self, launch: LaunchId) -> LaunchTally {
        self.launches.get(launch).copied().unwrap_or_default()
    }

    #[inline]
    fn launch_mut(&mut self, launch: LaunchId) -> &mut LaunchTally {
        while self.launches.len() <= launch.index() {
            self.launches.push(LaunchTally::default());
        }
        &mut self.launches[launch]
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
        self.sms[i.sm.index()].warp_instructions += 1;
        let k = self.launch_mut(i.launch);
        k.warp_instructions += 1;
        k.thread_instructions += u64::from(i.lanes.count_ones());
    }

    #[inline]
    fn on_load_done(&mut self, _sm: SmId, launch: LaunchId, latency: u64, _cycle: u64) {
        let k = self.launch_mut(launch);
        k.global_loads += 1;
        k.load_latency += latency;
    }

    #[inline]
    fn on_shared_access(&mut self, _sm: SmId, launch: LaunchId, passes: u32, _cycle: u64) {
        let k = self.launch_mut(launch);
        k.shared_accesses += 1;
        k.shared_passes += u64::from(passes);
    }

    #[inline]
    fn on_sm_cycle(&mut self, c: &SmCycle) {
        let s = &mut self.sms[c.sm.index()];
        if c.active {
            s.active_cycles += 1;
            s.resident_warp_cycles += u64::from(c.resident_warps);
        }
        for (st, &o) in s.schedulers.iter_mut().zip(c.schedulers) {
            st.count(o);
        }
    }

    fn on_event(&mut self, event: &Event) {
        if let Event::TbDispatched { sm, .. } = *event {
            self.sms[sm.index()].tbs += 1;
        }
    }
}
