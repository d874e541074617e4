//! The papers' experiments, run on the simulator and reduced to the papers' figures
//! (DESIGN.md §7). Each experiment is a library function returning plain data; the
//! command line renders it (table, JSON, CSV, SVG).
//!
//! * [`periodic`]: periodic preemption on one SM while the others run
//!   (papers/lin-lightweight §V-A), every suite kernel under every mechanism, each resume
//!   checked bit-exact against the uninterrupted run.
//! * [`figures`]: Figures 6, 8, 14, 15 and 16 of papers/lin-lightweight from its results.
//! * [`inplace`]: in-place context switching on kernel pairs (Figure 17).
//! * [`per_instruction`]: papers/ji-ctxback §V — every suite kernel preempted at a seeded
//!   sample of moments under BASELINE, LIVE, CS-Defer, CTXBack and CTXBack+CS-Defer;
//!   context size, preemption and resume time normalised to BASELINE (Figures 7–9).
//! * [`pep`]: papers/li-pep §4 — Chimera, Chimera+dirty, PEP and PEP+in-place preempting
//!   every SM running each suite kernel over launch times, TB progress and deadlines;
//!   latency, PEP's choices, context and saving overhead (Figures 5–9).
//! * [`svg`]: a figure as an SVG bar chart.
//! * [`benchmarks`]: papers/tanasic-thesis Table 5.2 for the suite (launches, times, TB
//!   shapes, on-chip storage, projected save time, SHORT/MEDIUM/LONG classes).
//! * [`multiprogram`]: papers/tanasic-thesis §5.3 — seeded mixes of suite programs,
//!   replayed, under FCFS, NPQ, PPQ (exclusive and shared) and DSS with a context switch and
//!   with draining; NTT, ANTT, STP and fairness per class, and Figures 5.4–5.8.
//! * [`corun`]: papers/lin-thesis ch. 4 — a pair of suite programs co-running inside the
//!   SMs at every TB combination (Figure 4.2) and under every co-running scheme (spatial,
//!   left-over, SMK); slowdowns, weighted and harmonic speedup.
//! * [`faults`]: papers/tanasic-thesis §6.5 — pipeline organisations (Figure 6.11), the
//!   operand log's size (Figure 6.12), TB switching on fault (Figure 6.13) and local
//!   handling of faults to output pages (Figure 6.15) on the `fault-study` GPU, each
//!   normalised to its baseline.
//! * [`study`]: the default job — a high-priority process preempts a long-running kernel
//!   under every mechanism.

pub mod benchmarks;
pub mod corun;
pub mod faults;
pub mod figures;
pub mod inference;
pub mod inplace;
pub mod multiprogram;
pub mod pep;
pub mod per_instruction;
pub mod periodic;
pub mod study;
pub mod svg;
pub mod tlp;

pub use multiprogram::{MultiprogramConfig, MultiprogramResults};
pub use periodic::{PeriodicConfig, PeriodicResults};
pub use study::{StudyConfig, StudyResults};

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use gpu::config::GpuConfig;
use gpu::timing::TimedGpu;
use preempt::MechanismKind;
use sched::PolicyKind;
use workload::Setup;

/// Every suite kernel `gpu` can run (the tensor-core kernels need tensor cores).
pub fn runnable_kernels(gpu: &GpuConfig) -> Vec<&'static dyn suite::Kernel> {
    let tensor_cores = gpu.pipeline.tensor.is_some();
    suite::all()
        .iter()
        .copied()
        .filter(|k| !k.needs_tensor_cores() || tensor_cores)
        .collect()
}

/// A suite kernel's own host program as one process, arriving at 0 with priority 0, on
/// `target`'s PTX (`None`: the kernel's default target).
pub(crate) fn suite_process(
    kernel: &'static dyn suite::Kernel,
    size: suite::Size,
    seed: u64,
    target: Option<suite::Target>,
) -> workload::scenario::Process {
    let mut process = workload::scenario::Process::suite(kernel, size, seed);
    if let (Some(t), workload::scenario::Program::Suite { target, .. }) =
        (target, &mut process.program)
    {
        *target = t;
    }
    process
}

/// Runs one suite host program (`process`, [`suite_process`]) alone on `gpu` under FCFS,
/// its SMs emptied by `mechanism` (draining when none), `injector` making the experiment's
/// requests, with the limits of [`suite_setup`].
pub(crate) fn run_alone(
    gpu: &GpuConfig,
    process: workload::scenario::Process,
    mechanism: Option<MechanismKind>,
    max_cycles: u64,
    instruction_limit: Option<u64>,
    injector: Option<&mut dyn workload::system::Injector>,
) -> Result<workload::RunRecord, workload::RunError> {
    let setup = suite_setup(
        gpu,
        PolicyKind::Fcfs,
        mechanism.unwrap_or(MechanismKind::Drain),
        max_cycles,
        instruction_limit,
    );
    workload::System::new(setup, &[process])?.run_with(&mut |_| {}, injector)
}

/// The setup of a run of suite host programs on `gpu` (default host, framework and copy
/// engines), keeping every process's final memory for comparisons; the run may take
/// `max_cycles`, each launch `instruction_limit` warp instructions (`None`: the progress rule
/// of `gpu::limits`).
pub fn suite_setup(
    gpu: &GpuConfig,
    policy: PolicyKind,
    mechanism: MechanismKind,
    max_cycles: u64,
    instruction_limit: Option<u64>,
) -> Setup {
    let mut timing = TimedGpu::new(gpu.clone());
    timing.options.instruction_limit = instruction_limit;
    Setup {
        host: timing.gpu.host.clone(),
        timing,
        framework: Default::default(),
        policy,
        time_slice_us: workload::scenario::DEFAULT_TIME_SLICE_US,
        mechanism,
        copy_policy: Default::default(),
        max_cycles,
        snapshot: true,
        replay: None,
        one_context: false,
    }
}

/// Drops what a finished run's results are not measured from (its final memory, once
/// compared with its reference; its residency log, framework records, bandwidth samples
/// and dumps), so that an experiment holding many runs does not hold them whole.
pub(crate) fn drop_bulk(r: &mut workload::RunRecord) {
    r.memory = Vec::new();
    r.residency = Vec::new();
    r.records = Vec::new();
    r.bandwidth = Vec::new();
    r.dumps = Vec::new();
}

/// Runs `run` on every job over `threads` threads, each result at its job's index (so the
/// results do not depend on the threads); after each, `progress(done, total, label(job))`,
/// `done` counting across calls. After the first error no more jobs are handed out: those
/// not run are `None`.
pub(crate) fn run_indexed<J: Sync, T: Send, E: Send>(
    threads: usize,
    jobs: &[J],
    run: &(dyn Fn(&J) -> Result<T, E> + Sync),
    label: &(dyn Fn(&J) -> String + Sync),
    progress: &(dyn Fn(usize, usize, &str) + Sync),
    done: &AtomicUsize,
    total: usize,
) -> Vec<Option<Result<T, E>>> {
    let results: Vec<Mutex<Option<Result<T, E>>>> =
        (0..jobs.len()).map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    on_workers(
        threads.clamp(1, jobs.len().max(1)),
        &worker_thread,
        &|| loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(job) = jobs.get(i) else {
                return;
            };
            let r = run(job);
            let failed = r.is_err();
            *results[i].lock().expect("no thread panics holding it") = Some(r);
            let d = done.fetch_add(1, Ordering::Relaxed) + 1;
            progress(d, total, &label(job));
            if failed {
                // The first error is reported; stop handing out work.
                next.store(jobs.len(), Ordering::Relaxed);
            }
        },
    );
    results
        .into_iter()
        .map(|r| r.into_inner().expect("no thread panics holding it"))
        .collect()
}

/// A worker thread of [`on_workers`].
pub(crate) fn worker_thread() -> std::thread::Builder {
    std::thread::Builder::new().name("experiment".into())
}

/// Runs `worker` (a loop that takes jobs from a shared queue until it is empty) on
/// `threads` scoped threads made by `builder`. A thread the system refuses (too many
/// threads, no address space left) is not a panic: the threads that started take its share
/// of the queue, and when none starts the calling thread runs `worker` itself.
pub(crate) fn on_workers(
    threads: usize,
    builder: &dyn Fn() -> std::thread::Builder,
    worker: &(dyn Fn() + Sync),
) {
    std::thread::scope(|s| {
        let started = (0..threads)
            .filter(|_| builder().spawn_scoped(s, worker).is_ok())
            .count();
        if started == 0 {
            worker();
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workers_the_system_refuses_leave_the_jobs_to_the_caller() {
        let done = AtomicUsize::new(0);
        let next = AtomicUsize::new(0);
        let worker = || {
            while next.fetch_add(1, Ordering::Relaxed) < 10 {
                done.fetch_add(1, Ordering::Relaxed);
            }
        };
        // A stack larger than the address space: every spawn fails (`Scope::spawn`
        // panicked on it).
        let refused = || std::thread::Builder::new().stack_size(1 << 60);
        on_workers(4, &refused, &worker);
        assert_eq!(done.load(Ordering::Relaxed), 10);
        next.store(0, Ordering::Relaxed);
        on_workers(4, &worker_thread, &worker);
        assert_eq!(done.load(Ordering::Relaxed), 20);
    }
}
