//! Runaway limits of a launch: when a launch is stopped as a runaway (an endless loop, a spin
//! wait that nothing releases).
//!
//! **The default rule is progress, not size.** A launch is stopped when too many warp
//! instructions, or (timed) [`STALL_CYCLES`] core cycles with some of its TBs resident, pass
//! without any of its TBs finishing. A limit that grew with the grid let a runaway of 2,000
//! TBs run 7.5 times longer than one of 1 TB (104 s against 13.8 s); a runaway's TBs never
//! finish, so the progress rule stops both within the same window, while real work of any
//! size keeps finishing TBs. The instruction window is [`STALL_WARP_INSTRUCTIONS`] plus
//! [`STALL_INSTRUCTIONS_PER_WARP`] per warp the launch can have resident at once
//! ([`stall_window`]): the warps resident together all run between two TBs finishing, so a
//! larger GPU, not a larger grid, widens it (the functional core runs one TB at a time).
//! Both windows are counted in simulated work, never wall time, so a run stops at the same
//! point on every machine and with any number of threads. They are chosen so that a runaway
//! stops within about a minute on a slow machine (2 cores: the functional core executes
//! about 5.7 M warp instructions per second, the timed one about 3.3 M at full occupancy and
//! 1.7 M cycles per second on a nearly idle GPU; see BENCHMARKS.md), while a TB of every
//! suite kernel at its largest size finishes orders of magnitude sooner.
//!
//! A kernel whose TBs legitimately run longer (a persistent kernel) sets a total instead:
//! `--instruction-limit N` and `--max-cycles N` ([`Limit::Total`]) bound the whole launch
//! and turn the progress rule off.

/// Warp instructions a launch may execute without one of its TBs finishing, beside
/// [`STALL_INSTRUCTIONS_PER_WARP`] (2^27).
pub const STALL_WARP_INSTRUCTIONS: u64 = 1 << 27;
/// Further warp instructions per warp the launch can have resident at once (2^14).
pub const STALL_INSTRUCTIONS_PER_WARP: u64 = 1 << 14;
/// Core cycles a timed launch may spend with TBs resident but none finishing (2^23).
pub const STALL_CYCLES: u64 = 1 << 23;

/// The instruction window of the progress rule: `base` plus `per_warp` for each of the
/// `resident_warps` the launch can have resident at once.
pub fn stall_window(base: u64, per_warp: u64, resident_warps: u64) -> u64 {
    per_warp.saturating_mul(resident_warps).saturating_add(base)
}

/// When a launch counts as a runaway, in warp instructions or in core cycles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    /// At most this many in all (what `--instruction-limit` and `--max-cycles` set).
    Total(u64),
    /// At most this many without one of the launch's TBs finishing (the default; timed
    /// cycles count only while some of its TBs are resident).
    WithoutProgress(u64),
}

impl Limit {
    /// The user's total if one was given, else `default`.
    pub fn total_or(total: Option<u64>, default: Limit) -> Limit {
        total.map_or(default, Limit::Total)
    }

    /// The number the rule allows.
    pub fn value(self) -> u64 {
        match self {
            Limit::Total(n) | Limit::WithoutProgress(n) => n,
        }
    }

    /// Whether `spent` in all, of which `since_progress` since a TB last finished, breaks
    /// the rule.
    pub fn exceeded(self, spent: u64, since_progress: u64) -> bool {
        match self {
            Limit::Total(n) => spent > n,
            Limit::WithoutProgress(n) => since_progress > n,
        }
    }
}

/// An explicit number is a total (`--instruction-limit N`).
impl From<u64> for Limit {
    fn from(n: u64) -> Limit {
        Limit::Total(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_total_counts_everything_and_progress_counts_since_a_tb_finished() {
        assert!(!Limit::Total(10).exceeded(10, 10));
        assert!(Limit::Total(10).exceeded(11, 0));
        assert!(!Limit::WithoutProgress(10).exceeded(1_000_000, 10));
        assert!(Limit::WithoutProgress(10).exceeded(11, 11));
        let cycles = Limit::WithoutProgress(STALL_CYCLES);
        assert_eq!(Limit::total_or(None, cycles), cycles);
        assert_eq!(Limit::total_or(Some(7), cycles), Limit::Total(7));
        assert_eq!(stall_window(100, 10, 3), 130);
        assert_eq!(stall_window(1 << 27, 1 << 14, u64::MAX), u64::MAX);
    }
}
