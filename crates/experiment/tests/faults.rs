//! papers/tanasic-thesis §6.5 (`experiment faults`): every figure's series is its baseline's
//! kernel time over its variant's, from runs that verified; the no-fault figures fault
//! nothing, and Figure 6.15's GPU handler takes exactly the faults the CPU allocated.

use experiment::faults::{self, FaultFigure, FaultsConfig};
use gpu::config::GpuConfig;

#[test]
fn each_figure_is_its_baselines_time_over_its_variants_and_local_handling_takes_the_cpus_allocations(
) {
    let mut c = FaultsConfig::default_on(GpuConfig::preset("fault-study").unwrap());
    c.kernels = ["hist", "scan"]
        .iter()
        .map(|n| suite::by_name(n).unwrap())
        .collect();
    c.threads = 2;
    let r = faults::run(&c, &|_, _, _| {}).unwrap();
    assert!(r.all_verified());
    // Stall, three organisations, three log sizes; over each link, stall and the two
    // switching modes, and the CPU's and the GPU's handler: 17 settings, each run once per
    // kernel though two figures share stall.
    assert_eq!(r.runs.len(), 2 * 17);
    assert_eq!(r.figures.len(), 4);
    for f in &r.figures {
        for s in &f.series {
            let mut product = 1.0;
            for (kernel, ratio) in &s.ratios {
                let cycles = |label: &str| r.run(kernel, label).unwrap().kernel_cycles as f64;
                let expected = cycles(&s.baseline) / cycles(&s.variant);
                assert!((ratio - expected).abs() < 1e-12, "{} {kernel}", s.label);
                product *= ratio;
            }
            assert!((s.geomean - product.sqrt()).abs() < 1e-9, "{}", s.label);
        }
    }
    for run in &r.runs {
        let managed = run.setting.contains("managed");
        assert_eq!(run.far_faults > 0, managed, "{run:?}");
    }
    let local = r
        .figures
        .iter()
        .find(|f| f.figure == FaultFigure::LocalOutputs)
        .unwrap();
    for s in &local.series {
        for k in ["hist", "scan"] {
            let run = |label: &str| r.run(k, label).unwrap();
            let (cpu, gpu) = (run(&s.baseline), run(&s.variant));
            // What the host never wrote (hist's bins, scan's outputs) is allocated
            // without a transfer: by the CPU, or all of it by the GPU instead.
            assert!(cpu.regions_allocated > 0, "{cpu:?}");
            assert_eq!(cpu.regions_allocated_locally, 0);
            assert_eq!(
                (gpu.regions_allocated, gpu.regions_allocated_locally),
                (0, cpu.regions_allocated),
                "{gpu:?}"
            );
            assert_eq!(gpu.regions_migrated, cpu.regions_migrated);
        }
    }
    // The figures as bars: one row per kernel and the geomean row.
    // Switching switches TBs out only where it is on, and never more than 4 per SM.
    for run in &r.runs {
        let on = run.setting.contains("tb switch");
        assert!(on || run.tbs_switched_out == 0, "{run:?}");
        assert!(run.switched_out_peak <= 4, "{run:?}");
    }
    let bars = r.bar_figures();
    assert_eq!(bars.len(), 4);
    assert!(bars.iter().all(|b| b.rows.len() == 3));
    assert!(r.to_csv().lines().count() > r.runs.len());
}
