//! Clock domains and the deterministic global scheduler.
//!
//! A GPU runs its SM cores, its interconnect, its L2 slices and its DRAM at different clocks
//! (GPGPU-Sim's four domains; papers/lin-lightweight Table I gives the core at 700 MHz and GDDR5
//! at 924 MHz; papers/lin-thesis Table 4.1 the core at 1800 MHz and NoC/DRAM at 1200 MHz).
//!
//! Time is kept in integer femtoseconds. A domain of frequency `f` MHz has period
//! `round(1e9 / f)` fs and its `k`-th rising edge (k = 1, 2, …) at `k * period`. The scheduler
//! jumps from edge to edge; when several domains share an instant they tick in the fixed order
//! [`Domain::ALL`] (core, interconnect, L2, DRAM). The cycle count of a domain at global time `t`
//! is `t / period` — a pure function of `t`, which is what lets a producer in one domain stamp a
//! message with a consumer-visible time independently of the tick order.

use serde::{Deserialize, Serialize};

/// One of the four clock domains.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Domain {
    /// SM cores, their L1 data caches, constant caches and shared memory.
    Core,
    /// Both crossbar networks (SM→L2 and L2→SM).
    Icnt,
    /// L2 cache slices.
    L2,
    /// DRAM channels (command clock).
    Dram,
}

impl Domain {
    /// All domains, in the order they tick when their edges coincide.
    pub const ALL: [Domain; 4] = [Domain::Core, Domain::Icnt, Domain::L2, Domain::Dram];

    fn index(self) -> usize {
        self as usize
    }
}

/// The clock frequencies of the four domains.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClockSpec {
    /// SM core clock, MHz. A GPU configuration file leaves it out: it is the GPU's
    /// `sm.clock_mhz`.
    #[serde(default)]
    pub core_mhz: f64,
    /// Interconnect clock, MHz.
    pub icnt_mhz: f64,
    /// L2 clock, MHz.
    pub l2_mhz: f64,
    /// DRAM command clock, MHz (GDDR5 "924 MHz QDR" is 924 here; the data rate is expressed by
    /// the channel's bytes per cycle).
    pub dram_mhz: f64,
}

impl ClockSpec {
    /// Frequency of `d` in MHz.
    pub fn mhz(&self, d: Domain) -> f64 {
        match d {
            Domain::Core => self.core_mhz,
            Domain::Icnt => self.icnt_mhz,
            Domain::L2 => self.l2_mhz,
            Domain::Dram => self.dram_mhz,
        }
    }

    /// Period of `d` in femtoseconds (rounded to the nearest femtosecond, at least 1).
    pub fn period_fs(&self, d: Domain) -> u64 {
        ((1.0e9 / self.mhz(d)).round() as u64).max(1)
    }

    /// Number of edges of `d` at or before global time `t_fs`: the domain's current cycle.
    pub fn cycle_at(&self, d: Domain, t_fs: u64) -> u64 {
        t_fs / self.period_fs(d)
    }
}

/// A set of domains (bit `i` = `Domain::ALL[i]`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DomainSet(u8);

impl DomainSet {
    /// True when `d` is in the set.
    pub fn contains(self, d: Domain) -> bool {
        self.0 & (1 << d.index()) != 0
    }

    fn insert(&mut self, d: Domain) {
        self.0 |= 1 << d.index();
    }

    /// True when no domain is in the set.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
}

/// Advances global time from edge to edge.
#[derive(Debug, Clone)]
pub struct ClockScheduler {
    period: [u64; 4],
    cycle: [u64; 4],
    now_fs: u64,
}

impl ClockScheduler {
    /// A scheduler at time 0 with every domain at cycle 0.
    pub fn new(spec: &ClockSpec) -> Self {
        let period = Domain::ALL.map(|d| spec.period_fs(d));
        Self {
            period,
            cycle: [0; 4],
            now_fs: 0,
        }
    }

    /// Moves to the next instant at which at least one domain has an edge, increments the
    /// cycle counters of those domains and returns them.
    pub fn advance(&mut self) -> DomainSet {
        let next = (0..4)
            .map(|i| (self.cycle[i] + 1) * self.period[i])
            .min()
            .unwrap_or(0);
        self.now_fs = next;
        let mut set = DomainSet::default();
        for d in Domain::ALL {
            let i = d.index();
            if (self.cycle[i] + 1) * self.period[i] == next {
                self.cycle[i] += 1;
                set.insert(d);
            }
        }
        set
    }

    /// Jumps to the first core edge at or after `t_fs` (nothing earlier), as if every edge
    /// in between had passed: each domain's cycle becomes the edges it has had by then.
    pub fn jump_to_core_edge(&mut self, t_fs: u64) {
        let core = self.period[Domain::Core.index()];
        let target = t_fs.div_ceil(core) * core;
        if target <= self.now_fs {
            return;
        }
        self.now_fs = target;
        for i in 0..4 {
            self.cycle[i] = target / self.period[i];
        }
    }

    /// Current global time in femtoseconds.
    pub fn now_fs(&self) -> u64 {
        self.now_fs
    }

    /// Current cycle of `d` (edges so far).
    pub fn cycle(&self, d: Domain) -> u64 {
        self.cycle[d.index()]
    }

    /// Period of `d` in femtoseconds.
    pub fn period_fs(&self, d: Domain) -> u64 {
        self.period[d.index()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domains_tick_at_their_rates() {
        let spec = ClockSpec {
            core_mhz: 1000.0,
            icnt_mhz: 500.0,
            l2_mhz: 1000.0,
            dram_mhz: 250.0,
        };
        let mut s = ClockScheduler::new(&spec);
        let mut n = 0;
        while s.now_fs() < 4_000_000_000 {
            let set = s.advance();
            assert!(set.contains(Domain::Core));
            n += 1;
        }
        assert_eq!(n, 4000);
        assert_eq!(s.cycle(Domain::Core), 4000);
        assert_eq!(s.cycle(Domain::Icnt), 2000);
        assert_eq!(s.cycle(Domain::Dram), 1000);
        for d in Domain::ALL {
            assert_eq!(s.cycle(d), spec.cycle_at(d, s.now_fs()));
        }
    }
}
