//! PEP's evaluation end to end on gemm: every point is bit-exact (else the
//! experiment fails); a launch long enough for the base checkpoints to be written before
//! the arrival makes PEP take two checkpoints and wait less than when the arrival comes
//! with the call; the figures are the means of the points; and the results do not depend
//! on the number of threads.

use experiment::pep::{self, ExperimentConfig, Point};
use gpu::config::GpuConfig;
use suite::Size;

fn config(threads: usize) -> ExperimentConfig {
    let mut c = ExperimentConfig::default_on(GpuConfig::preset("gtx980").unwrap());
    // Large inputs: TBs long enough to still run a few µs after the launch call.
    c.kernels = vec![suite::by_name("gemm").unwrap()];
    c.size = Size::Large;
    c.launch_us = vec![0.0, 5.0];
    c.progress = vec![0.5];
    c.deadlines_us = vec![5.0];
    // Short enough that these small kernels' TBs are predicted to be preempted.
    c.predicted_launch_us = 0.5;
    c.threads = threads;
    c
}

fn point<'a>(r: &'a pep::PepResults, kernel: &str, family: &str, launch: f64) -> &'a Point {
    r.points
        .iter()
        .find(|p| p.kernel == kernel && p.family == family && p.launch_us == launch)
        .unwrap()
}

#[test]
fn pep_checkpoints_ahead_and_waits_less_when_the_launch_leaves_it_time() {
    let c = config(2);
    let r = pep::run(&c, &|_, _, _| {}).unwrap();
    // (1 Chimera + 1 Chimera+dirty + PEP + PEP+in-place) x 2 launch times.
    assert_eq!(r.points.len(), 4 * 2);
    for k in &r.kernels {
        let ahead = point(&r, k, "pep", 5.0);
        let none = point(&r, k, "pep", 0.0);
        assert!(ahead.requested && none.requested, "{k}");
        // With 5 µs between the call and the arrival, some base checkpoints are written
        // before it: those TBs take two checkpoints.
        assert!(ahead.selection.two_checkpoints > 0, "{k}: {ahead:?}");
        assert!(ahead.base_per_tb > 0.0, "{k}: {ahead:?}");
        // With none, no base is written before the request: its TBs leave after a single
        // checkpoint.
        assert_eq!(none.selection.two_checkpoints, 0, "{k}: {none:?}");
        assert!(
            ahead.latency_us < none.latency_us,
            "{k}: 5 µs ahead {} µs, none ahead {} µs",
            ahead.latency_us,
            none.latency_us
        );
        // Chimera takes no checkpoint ahead.
        let chimera = point(&r, k, "chimera", 5.0);
        assert_eq!(chimera.base_per_tb, 0.0, "{k}: {chimera:?}");
    }
    // Figure 6 is the mean of each kernel's points, then the mean over kernels.
    let figs = pep::figures(&r);
    let fig6 = figs.iter().find(|f| f.id == "fig6").unwrap();
    for (i, family) in fig6.series.iter().enumerate() {
        let per_kernel: Vec<f64> = r
            .kernels
            .iter()
            .map(|k| {
                let ps: Vec<&Point> = r
                    .points
                    .iter()
                    .filter(|p| &p.kernel == k && &p.family == family && p.requested)
                    .collect();
                ps.iter().map(|p| p.latency_us).sum::<f64>() / ps.len() as f64
            })
            .collect();
        for (row, v) in fig6.rows.iter().zip(&per_kernel) {
            assert!(
                (row.values[i][0] - v).abs() < 1e-9,
                "{family} {}",
                row.category
            );
        }
        let mean = per_kernel.iter().sum::<f64>() / per_kernel.len() as f64;
        let last = fig6.rows.last().unwrap();
        assert_eq!(last.category, "mean");
        assert!((last.values[i][0] - mean).abs() < 1e-9, "{family}");
    }
    // One CSV line per point.
    assert_eq!(pep::csv(&r).lines().count(), 1 + r.points.len());
    // The same results on one thread.
    assert_eq!(pep::run(&config(1), &|_, _, _| {}).unwrap(), r);
}
