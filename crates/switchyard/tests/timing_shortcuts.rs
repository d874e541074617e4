//! The timing engine's speed shortcuts (an SM sleeping through cycles that would repeat, a
//! refused access known to be refused again, lazy warp checks along the scheduler's order,
//! parked warps passed over) are exact: with them off, every statistic of every launch is the same.
//!
//! The kernels are chosen for what exercises the shortcuts: memory-bound ones whose SMs
//! sleep on loads, on refused accesses and on a busy LD/ST unit (spmv, bfs, dgemv, dct8,
//! and mulword, whose refusals are mostly the request network's), barrier-heavy ones
//! (reduce, scan, gemm) and divergent ones (branchy); each under all three warp schedulers.

use gpu::config::{GpuConfig, SchedulerPolicy};
use gpu::timing::{TimedGpu, TimedStats};
use suite::{Size, Target};
use switchyard::suite_run::{run_kernel_on, Engine};

fn timed_stats(kernel: &str, gpu: &TimedGpu) -> Vec<TimedStats> {
    let k = suite::all()
        .iter()
        .find(|k| k.name() == kernel)
        .unwrap_or_else(|| panic!("suite kernel {kernel}"));
    let r = run_kernel_on(*k, Target::Sm70, Size::Small, 1, Engine::on(gpu), None)
        .unwrap_or_else(|e| panic!("{kernel}: {e}"));
    assert!(r.verification.passed(), "{kernel}: {:?}", r.verification);
    assert!(!r.timed.is_empty());
    r.timed
}

#[test]
fn shortcuts_change_no_statistic() {
    for policy in [
        SchedulerPolicy::Lrr,
        SchedulerPolicy::Gto,
        SchedulerPolicy::TwoLevel,
    ] {
        let mut config = GpuConfig::preset("gtx480").expect("preset");
        config.sm.scheduler = policy;
        let fast = TimedGpu::new(config);
        let mut exact = fast.clone();
        exact.options.shortcuts = false;
        for kernel in [
            "spmv", "bfs", "dgemv", "dct8", "mulword", "reduce", "scan", "gemm", "branchy",
        ] {
            let a = timed_stats(kernel, &fast);
            let b = timed_stats(kernel, &exact);
            for (x, y) in a.iter().zip(&b) {
                assert_eq!(
                    serde_json::to_string(x).expect("json"),
                    serde_json::to_string(y).expect("json"),
                    "{kernel} under {policy:?}: statistics differ with shortcuts off"
                );
            }
            assert_eq!(a.len(), b.len());
        }
    }
}
