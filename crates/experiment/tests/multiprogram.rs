//! `switchyard experiment multiprogram` end to end at its smallest: one mix of two suite
//! programs under every policy and mechanism, replayed; every run verifies, every process
//! completes its runs, the figures come out, and the thread count changes nothing.

use experiment::multiprogram::{self, MultiprogramConfig, RUNS};
use gpu::config::GpuConfig;

fn tiny(threads: usize) -> MultiprogramConfig {
    let mut c = MultiprogramConfig::default_on(GpuConfig::preset("k20c").unwrap());
    c.benchmarks = ["gemm", "hotspot", "dct8"]
        .iter()
        .map(|n| suite::by_name(n).unwrap())
        .collect();
    c.procs = vec![2];
    c.mixes = 1;
    c.threads = threads;
    c
}

#[test]
fn one_small_mix_runs_under_every_policy_replayed_and_verified() {
    let c = tiny(2);
    let total = c.total_runs();
    let seen = std::sync::atomic::AtomicUsize::new(0);
    let r = multiprogram::run(&c, &|done, all, _| {
        assert_eq!(all, total);
        seen.fetch_max(done, std::sync::atomic::Ordering::Relaxed);
    })
    .unwrap();
    assert_eq!(seen.into_inner(), total);
    assert_eq!(r.benchmarks.len(), 3);
    assert!(r.benchmarks.iter().all(|b| b.alone_us > 0.0));
    assert_eq!(r.mixes.len(), 1);
    assert_eq!(r.runs.len(), RUNS.len());
    for (run, name) in r.runs.iter().zip(RUNS) {
        assert_eq!(run.run, name);
        assert!(run.verified, "{name}");
        // Replay: every process completed at least three runs, and the metrics come
        // from them.
        assert!(
            run.completed.iter().all(|&n| n >= 3),
            "{name}: {:?}",
            run.completed
        );
        for (i, &b) in r.mixes[0].members.iter().enumerate() {
            let ntt = run.turnaround_us[i] / r.benchmarks[b].alone_us;
            assert!((run.ntt[i] - ntt).abs() < 1e-12);
        }
        assert!(run.fairness > 0.0 && run.fairness <= 1.0);
    }
    // FCFS and NPQ never preempt.
    for name in ["fcfs", "npq"] {
        assert_eq!(r.run(0, name).unwrap().preempted_tbs, 0, "{name}");
    }
    let figs = multiprogram::figures(&r);
    let ids: Vec<&str> = figs.iter().map(|f| f.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "fig5_4",
            "fig5_5",
            "fig5_6",
            "fig5_7_2p",
            "fig5_8a",
            "fig5_8b"
        ]
    );
    for f in &figs {
        assert!(!f.rows.is_empty(), "{}", f.id);
        for row in &f.rows {
            assert!(row
                .values
                .iter()
                .flatten()
                .all(|v| v.is_finite() && *v > 0.0));
        }
    }
    // One thread gives the same results.
    assert_eq!(multiprogram::run(&tiny(1), &|_, _, _| {}).unwrap(), r);
}
