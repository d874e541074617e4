//! papers/tanasic-thesis §6.5 (`experiment faults`): every figure's series is its baseline's
//! kernel time over its variant's, from runs that verified; the no-fault figures fault
//! nothing, Figure 6.14 runs only the kernel with a device heap and migrates nothing, and
//! Figures 6.14–6.15's GPU handler takes exactly the faults the CPU allocated.

use experiment::faults::{self, FaultFigure, FaultsConfig};
use gpu::config::GpuConfig;

#[test]
fn each_figure_is_its_baselines_time_over_its_variants_and_local_handling_takes_the_cpus_allocations(
) {
    let mut c = FaultsConfig::default_on(GpuConfig::preset("fault-study").unwrap());
    c.kernels = ["hist", "scan", "heap"]
        .iter()
        .map(|n| suite::by_name(n).unwrap())
        .collect();
    c.threads = 2;
    let r = faults::run(&c, &|_, _, _| {}).unwrap();
    assert!(r.all_verified());
    // Stall, three organisations, three log sizes; over each link, stall and the two
    // switching modes, and the CPU's and the GPU's handler: 17 settings per kernel, each
    // run once though two figures share stall. The handler's pair is Figure 6.14's (only
    // the unwritten allocations managed) for heap, and Figure 6.15's for the others.
    assert_eq!(r.runs.len(), 3 * 17);
    assert_eq!(r.figures.len(), 5);
    for f in &r.figures {
        let want: &[&str] = match f.figure {
            FaultFigure::LocalHeap => &["heap"],
            FaultFigure::LocalOutputs => &["hist", "scan"],
            _ => &["hist", "scan", "heap"],
        };
        for s in &f.series {
            let kernels: Vec<&str> = s.ratios.iter().map(|(k, _)| k.as_str()).collect();
            assert_eq!(kernels, want, "{}", f.number);
            let mut product = 1.0;
            for (kernel, ratio) in &s.ratios {
                let cycles = |label: &str| r.run(kernel, label).unwrap().kernel_cycles as f64;
                let expected = cycles(&s.baseline) / cycles(&s.variant);
                assert!((ratio - expected).abs() < 1e-12, "{} {kernel}", s.label);
                product *= ratio;
            }
            let n = s.ratios.len() as f64;
            assert!(
                (s.geomean - product.powf(1.0 / n)).abs() < 1e-9,
                "{}",
                s.label
            );
        }
    }
    for run in &r.runs {
        let managed = run.setting.contains("managed");
        assert_eq!(run.far_faults > 0, managed, "{run:?}");
    }
    let figure = |n: FaultFigure| r.figures.iter().find(|f| f.figure == n).unwrap();
    for s in &figure(FaultFigure::LocalHeap).series {
        let run = |label: &str| r.run("heap", label).unwrap();
        let (cpu, gpu) = (run(&s.baseline), run(&s.variant));
        // Only what the host never wrote is managed: every slab of the heap (and the
        // outputs) is allocated, nothing migrates; the GPU's handler takes all of it.
        assert_eq!(cpu.regions_migrated + gpu.regions_migrated, 0, "{cpu:?}");
        // 32 TBs' 16 KiB slabs fill eight 64 KiB regions; the outputs take more.
        assert!(cpu.regions_allocated > 8, "{cpu:?}");
        assert_eq!(
            (gpu.regions_allocated, gpu.regions_allocated_locally),
            (0, cpu.regions_allocated),
            "{gpu:?}"
        );
        // §6.5.4: handlers side by side on the GPU beat the CPU's one by one when the
        // faults come together, as the TBs' first allocations do.
        assert!(s.ratios[0].1 > 1.0, "{}: {:?}", s.label, s.ratios);
    }
    for s in &figure(FaultFigure::LocalOutputs).series {
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
    assert_eq!(bars.len(), 5);
    for (b, f) in bars.iter().zip(&r.figures) {
        assert_eq!(b.rows.len(), f.series[0].ratios.len() + 1, "{}", f.number);
    }
    assert!(r.to_csv().lines().count() > r.runs.len());
}
