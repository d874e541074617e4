//! Runaway limits of a launch: how many warp instructions it may execute and how many core
//! cycles it may take before it is stopped as a runaway (an endless loop, a spin wait that
//! nothing releases).
//!
//! By default both are derived from the launch's size, never from wall time, so a run stops
//! at the same point on every machine and with any number of threads. The constants are
//! chosen so that a runaway launch stops within about a minute on a slow machine (2 cores:
//! the functional core executes about 5.7 M warp instructions per second, the timed one about
//! 3.3 M at full occupancy and 1.7 M cycles per second on a nearly idle GPU; see
//! BENCHMARKS.md), while every suite kernel at its large size stays two orders of magnitude
//! below them. A longer legitimate kernel raises them with `--instruction-limit` and
//! `--max-cycles`.

/// Warp instructions every launch may execute, whatever its size (2^27).
pub const BASE_WARP_INSTRUCTIONS: u64 = 1 << 27;
/// Further warp instructions per warp of the grid (2^14).
pub const WARP_INSTRUCTIONS_PER_WARP: u64 = 1 << 14;
/// Core cycles every launch may take, whatever its size (2^23).
pub const BASE_CYCLES: u64 = 1 << 23;
/// Further core cycles per TB of the grid (2^12).
pub const CYCLES_PER_TB: u64 = 1 << 12;

/// The default warp-instruction limit of a launch of `tbs` TBs of `warps_per_tb` warps.
pub fn default_instruction_limit(tbs: u64, warps_per_tb: u64) -> u64 {
    tbs.saturating_mul(warps_per_tb)
        .saturating_mul(WARP_INSTRUCTIONS_PER_WARP)
        .saturating_add(BASE_WARP_INSTRUCTIONS)
}

/// The default warp-instruction limit of the launch `ctx`.
pub fn instruction_limit_of(ctx: &crate::exec::LaunchCtx) -> u64 {
    default_instruction_limit(ctx.num_tbs(), u64::from(ctx.warps_per_tb()))
}

/// The default cycle limit of a launch of `tbs` TBs.
pub fn default_max_cycles(tbs: u64) -> u64 {
    tbs.saturating_mul(CYCLES_PER_TB)
        .saturating_add(BASE_CYCLES)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_grow_with_the_launch_and_saturate() {
        assert_eq!(default_instruction_limit(1, 1), (1 << 27) + (1 << 14));
        assert!(default_instruction_limit(100, 8) > default_instruction_limit(10, 8));
        assert_eq!(default_instruction_limit(u64::MAX, 32), u64::MAX);
        assert_eq!(default_max_cycles(0), 1 << 23);
        assert_eq!(default_max_cycles(u64::MAX), u64::MAX);
    }
}
