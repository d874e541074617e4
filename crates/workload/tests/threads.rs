//! A suite process's host program runs on a thread of its own: started when the process
//! first runs, not when the scenario is loaded, so a scenario of many processes does not
//! hold (or fail to spawn) a thread per process up front. Alone in its test binary: it
//! counts the process's threads.

use gpu::config::GpuConfig;
use gpu::timing::TimedGpu;
use workload::{parse, Disk, Setup, System};

fn threads() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .map(|n| n.trim().parse().unwrap())
        .unwrap()
}

#[test]
fn suite_processes_start_their_threads_when_they_run() {
    // 200 processes, arriving one every millisecond of simulated time: nothing has run yet.
    let text: String = (0..200)
        .map(|i| {
            format!(
                "[[process]]\nname = \"p{i}\"\nsuite = \"reduce\"\narrival_us = {}\n\n",
                1000.0 * f64::from(i)
            )
        })
        .collect();
    let s = parse("s.toml", &text, &Disk).unwrap_or_else(|e| panic!("{e}"));
    let gpu = GpuConfig::preset("gtx480").unwrap();
    let before = threads();
    let system = System::new(
        Setup::for_scenario(&s, TimedGpu::new(gpu), 1 << 20).unwrap(),
        &s.processes,
    )
    .unwrap();
    let after = threads();
    assert!(
        after < before + 10,
        "{} threads before loading 200 processes, {after} after",
        before
    );
    drop(system);
}
