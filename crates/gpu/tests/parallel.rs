//! SMs stepped on threads (ARCHITECTURE.md, "Parallel stepping"): every statistic, every
//! cycle count and the final device memory are the same for 1, 2, 3 and 8 threads, on the
//! GTX480 and on the 132-SM H100, for every suite kernel.

mod timing_common;

use gpu::config::GpuConfig;
use gpu::timing::TimedGpu;
use suite::Size;
use timing_common::{Device, Engine};

fn run(name: &str, preset: &str, threads: usize) -> (String, Vec<Vec<u8>>) {
    let k = suite::by_name(name).unwrap_or_else(|| panic!("no suite kernel {name}"));
    let target = k.default_target();
    let file = format!("{name}.{}.ptx", target.name());
    let mut t = TimedGpu::new(GpuConfig::preset(preset).expect("preset"));
    t.options.threads = threads;
    let mut d = Device::new(&file, k.ptx(target).unwrap(), Engine::Timed(Box::new(t)));
    let v = k
        .run(&mut d, Size::Small, 1)
        .unwrap_or_else(|e| panic!("{name} on {preset} with {threads} threads: {e}"));
    assert!(v.passed(), "{name} on {preset}, {threads} threads: {v:?}");
    let stats = serde_json::to_string(&d.stats).expect("statistics serialize");
    (stats, d.snapshot())
}

fn same_for_every_thread_count(preset: &str, threads: &[usize]) {
    let mut ran = 0;
    for k in suite::all() {
        if k.needs_tensor_cores() && preset == "gtx480" {
            continue;
        }
        let name = k.name();
        let (stats, memory) = run(name, preset, 1);
        for &n in threads {
            let (s, m) = run(name, preset, n);
            assert!(
                s == stats,
                "{name} on {preset}: statistics with {n} threads differ from one thread's"
            );
            assert!(
                m == memory,
                "{name} on {preset}: final memory with {n} threads differs from one thread's"
            );
        }
        ran += 1;
    }
    assert!(ran >= 20, "the suite ran ({ran} kernels)");
}

#[test]
fn the_gtx480_suite_is_identical_on_1_2_3_and_8_threads() {
    same_for_every_thread_count("gtx480", &[2, 3, 8]);
}

#[test]
fn the_h100_suite_is_identical_on_1_2_3_and_8_threads() {
    same_for_every_thread_count("h100", &[2, 3, 8]);
}
