//! papers/tanasic-thesis Table 5.2 for the suite: the measures add up and the classes follow
//! the times.

use experiment::benchmarks::{self, Class};
use gpu::config::GpuConfig;
use suite::Size;

#[test]
fn the_benchmark_table_measures_each_kernel_and_classes_follow_the_times() {
    let gpu = GpuConfig::preset("k20c").unwrap();
    let kernels: Vec<&'static dyn suite::Kernel> = ["gemm", "hotspot", "bfs", "srad"]
        .iter()
        .map(|n| suite::by_name(n).unwrap())
        .collect();
    let rows = benchmarks::table(&gpu, &kernels, Size::Small, &|_, _, _| {}).unwrap();
    // srad has two kernels; the others one each.
    let names: Vec<&str> = rows.iter().map(|r| r.kernel.as_str()).collect();
    assert_eq!(names.len(), 5, "{names:?}");
    let bfs = rows.iter().find(|r| r.program == "bfs").unwrap();
    assert!(bfs.launches > 1, "bfs runs a launch per level");
    let bw = gpu::timing::Machine::memory_config_of(&gpu).dram_bytes_per_core_cycle()
        / f64::from(gpu.sm.count);
    for r in &rows {
        assert!(r.tb_time_us > 0.0 && r.tb_time_us <= r.total_us, "{r:?}");
        let mean = r.total_us / f64::from(r.launches);
        assert!((r.time_us - mean).abs() < 1e-9 * mean, "{r:?}");
        assert!(r.total_us <= r.program_us, "{r:?}");
        // Every TB of every launch ran: at least one per launch.
        assert!(r.tbs >= u64::from(r.launches), "{r:?}");
        // The SM holds what the occupancy calculator says, and saving it takes its bytes
        // over the SM's share of DRAM bandwidth.
        let held = f64::from(r.tbs_per_sm)
            * (f64::from(r.registers_per_tb) * 4.0 + f64::from(r.shared_per_tb));
        let save = held / bw / gpu.sm.clock_mhz;
        assert!((r.save_us - save).abs() < 1e-9 * save.max(1.0), "{r:?}");
        assert!(r.sram_percent > 0.0 && r.sram_percent <= 100.0, "{r:?}");
    }
    // Classes by thirds: each class appears, and a longer time never has a shorter class.
    let per_launch = |r: &benchmarks::Row| r.total_us / f64::from(r.launches);
    for class in [Class::Short, Class::Medium, Class::Long] {
        assert!(rows.iter().any(|r| r.class_kernel == class), "{class:?}");
    }
    for a in &rows {
        for b in &rows {
            if per_launch(a) < per_launch(b) {
                assert!(a.class_kernel <= b.class_kernel, "{a:?} {b:?}");
            }
            if a.program_us < b.program_us {
                assert!(a.class_program <= b.class_program, "{a:?} {b:?}");
            }
        }
    }
}
