//! Multiprogrammed workloads: processes (GPU contexts) whose host programs issue copies and
//! kernel launches through a host model in simulated time, onto one timing machine scheduled
//! by the framework of `sched`; scenarios that describe them in TOML; and what a run
//! reports.
//!
//! * [`choice`]: how a mechanism or a policy with its parameters is written, in scenario
//!   files and on the command line.
//! * [`data`]: buffer element types, initial contents, `.npy` files.
//! * [`demangle`]: kernels named by their C++ names.
//! * [`expr`]: integer expressions over constants and loop indices in scenario fields.
//! * [`scenario`]: the scenario format, checked and resolved with file, line and field.
//! * [`program`]: host programs (a scenario's commands; a suite kernel's own host program).
//! * [`system`]: the host model (streams, copy engines over PCIe, launch latency) around the
//!   machine and the framework, on one time line.

pub mod arrivals;
pub mod choice;
pub mod data;
pub mod demangle;
pub mod expr;
pub mod program;
pub mod scenario;
pub mod system;
pub mod translation;

pub use scenario::{parse, Disk, Files, Scenario, ScenarioError};
pub use system::{CompletedRun, Dumped, KernelRecord, RunError, RunRecord, Setup, System};
pub mod report;
pub mod trace;

pub use report::{CorunMetrics, CorunMetricsError, Metrics, Report};

/// Runs `scenario` on `setup`, and — when `alone` is set and it has several processes — each
/// process alone on a fresh machine (arriving at time 0), for the multiprogram metrics. The
/// alone runs use up to `threads` threads (their results do not depend on it).
pub fn run(
    scenario: &Scenario,
    setup: &Setup,
    alone: bool,
    threads: usize,
    progress: &mut dyn FnMut(system::RunProgress),
) -> Result<(Report, RunRecord), RunError> {
    let mixed = System::new(setup.clone(), &scenario.processes)?.run(progress)?;
    let gpu = setup.timing.gpu.name.clone();
    let alone_times = if !alone {
        None
    } else if scenario.processes.len() == 1 {
        let p = &mixed.processes[0];
        Some(vec![
            p.mean_turnaround_fs().unwrap_or(0.0) / system::FS_PER_US as f64,
        ])
    } else {
        Some(alone_turnarounds(scenario, setup, threads.max(1))?)
    };
    Ok((
        Report::new(scenario, &gpu, &mixed, alone_times.as_deref()),
        mixed,
    ))
}

/// Each process's turnaround (µs) when it runs alone (once: alone, every replayed run
/// would take the same time).
fn alone_turnarounds(
    scenario: &Scenario,
    setup: &Setup,
    threads: usize,
) -> Result<Vec<f64>, RunError> {
    let setup = Setup {
        replay: None,
        one_context: false,
        ..setup.clone()
    };
    let one = |i: usize| -> Result<f64, RunError> {
        let mut p = scenario.processes[i].clone();
        p.arrival_us = 0.0;
        let r = System::new(setup.clone(), std::slice::from_ref(&p))?.run(&mut |_| {})?;
        // Its one run's turnaround (the mean latency of its requests, if it serves some).
        let rec = &r.processes[0];
        Ok(rec.mean_turnaround_fs().unwrap_or(0.0) / system::FS_PER_US as f64)
    };
    let n = scenario.processes.len();
    let out = on_threads(n, threads, alone_thread, one);
    out.into_iter()
        .enumerate()
        .map(|(i, r)| {
            r.unwrap_or_else(|| {
                Err(RunError::Process {
                    process: scenario.processes[i].name.clone(),
                    what: "its run alone panicked".into(),
                })
            })
        })
        .collect()
}

/// The thread a process's run alone takes.
fn alone_thread(i: usize) -> std::thread::Builder {
    std::thread::Builder::new().name(format!("alone:{i}"))
}

/// `f(i)` for every `i` in `0..n`, up to `threads` at a time, each on a thread `builder(i)`
/// makes; `None` where `f` panicked. A thread the system refuses (too many threads, no
/// address space left) is not a panic: that `f(i)` runs on the calling thread instead.
fn on_threads<T: Send>(
    n: usize,
    threads: usize,
    builder: impl Fn(usize) -> std::thread::Builder,
    f: impl Fn(usize) -> T + Sync,
) -> Vec<Option<T>> {
    let f = &f;
    let mut out: Vec<Option<T>> = (0..n).map(|_| None).collect();
    for chunk in (0..n).collect::<Vec<_>>().chunks(threads.max(1)) {
        std::thread::scope(|s| {
            let handles: Vec<_> = chunk
                .iter()
                .map(|&i| (i, builder(i).spawn_scoped(s, move || f(i))))
                .collect();
            for (i, h) in handles {
                out[i] = match h {
                    Ok(h) => h.join().ok(),
                    Err(_) => std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(i))).ok(),
                };
            }
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_the_system_refuses_runs_its_work_on_the_caller() {
        // A stack larger than the address space: every spawn fails (`thread::scope`'s
        // `spawn` panicked on it, and with it the whole run).
        let refused = |_| std::thread::Builder::new().stack_size(1 << 60);
        let out = on_threads(5, 2, refused, |i| i * 10);
        assert_eq!(out, [Some(0), Some(10), Some(20), Some(30), Some(40)]);
        // Ordinary threads, and one whose work panics.
        let out = on_threads(3, 8, alone_thread, |i| {
            assert!(i != 1, "a deliberate panic");
            i
        });
        assert_eq!(out, [Some(0), None, Some(2)]);
    }
}
