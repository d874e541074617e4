//! The preemption study, Switchyard's default job: a long-running, low-priority kernel
//! holds the whole GPU when a high-priority process arrives (by default 30% into the
//! kernel's run, measured on a run of the low-priority process alone, so that the arrival
//! finds the kernel running rather than its inputs still crossing PCIe); under preemptive
//! priority
//! (papers/tanasic-thesis §5.2.4) every mechanism takes the SMs it needs, and the study
//! compares what that cost. A run with non-preemptive priority (NPQ) is the reference:
//! nobody is preempted, so it gives the low-priority process's undisturbed turnaround, and
//! every process's device memory under every mechanism must equal its memory there, byte
//! for byte.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use gpu::config::GpuConfig;
use preempt::MechanismKind;
use sched::PolicyKind;
use serde::Serialize;
use suite::Size;
use workload::report::PreemptionSummary;
use workload::scenario::{Process, Program};
use workload::{RunError, RunRecord, System};

/// The study's setting.
#[derive(Clone)]
pub struct StudyConfig {
    pub gpu: GpuConfig,
    /// The long-running kernel that holds the GPU, and its size.
    pub low: (&'static dyn suite::Kernel, Size),
    /// The high-priority kernel that arrives, its size, and when its process arrives.
    pub high: (&'static dyn suite::Kernel, Size),
    pub arrival: Arrival,
    pub mechanisms: Vec<MechanismKind>,
    pub threads: usize,
    /// Core cycles one run may take, and warp instructions one launch may execute in all
    /// (`None`: the progress rule of `gpu::limits`).
    pub max_cycles: u64,
    pub instruction_limit: Option<u64>,
}

/// When the high-priority process arrives.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Arrival {
    /// At this many µs.
    AtUs(f64),
    /// This fraction into the low-priority kernel's run (its first launch to its last
    /// finish, when it runs alone).
    IntoLowKernel(f64),
}

/// Every mechanism a study compares by default.
pub const STUDY_MECHANISMS: [MechanismKind; 15] = [
    MechanismKind::Drain,
    MechanismKind::FlushStrict,
    MechanismKind::FlushRelaxed,
    MechanismKind::Baseline,
    MechanismKind::Live,
    MechanismKind::CsDefer,
    MechanismKind::CtxBack,
    MechanismKind::CtxBackCsDefer,
    MechanismKind::LIGHTWEIGHT,
    MechanismKind::LIGHTWEIGHT_TB,
    MechanismKind::CHIMERA,
    MechanismKind::CHIMERA_DIRTY,
    MechanismKind::PEP,
    MechanismKind::PEP_IN_PLACE,
    MechanismKind::CKPT,
];

impl StudyConfig {
    /// The built-in study on `gpu`: `dgemv` (every TB of which lives as long as the
    /// kernel, so draining waits for all of it) holds the GPU; `gemm` arrives 20 µs in.
    pub fn default_on(gpu: GpuConfig) -> StudyConfig {
        StudyConfig {
            gpu,
            low: (suite::by_name("dgemv").expect("suite kernel"), Size::Large),
            high: (suite::by_name("gemm").expect("suite kernel"), Size::Small),
            arrival: Arrival::IntoLowKernel(0.3),
            mechanisms: STUDY_MECHANISMS.to_vec(),
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            max_cycles: 1 << 32,
            instruction_limit: None,
        }
    }
}

/// One mechanism's outcome.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StudyRow {
    /// The mechanism, or `npq (no preemption)` for the reference.
    pub mechanism: String,
    /// The high-priority kernel: from its arrival at the GPU to its first TB, and its
    /// process's turnaround (µs).
    pub high_wait_us: f64,
    pub high_turnaround_us: f64,
    /// The low-priority process's turnaround (µs), and over its turnaround when nobody
    /// preempts it.
    pub low_turnaround_us: f64,
    pub low_slowdown: f64,
    /// The whole run (µs).
    pub makespan_us: f64,
    pub preemption: PreemptionSummary,
    /// Both processes verified against their CPU references.
    pub verified: bool,
    /// Every process's device memory equals the reference run's.
    pub bit_exact: bool,
}

/// The study's results.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StudyResults {
    pub gpu: String,
    pub low: String,
    pub high: String,
    pub high_arrival_us: f64,
    pub rows: Vec<StudyRow>,
}

impl StudyResults {
    pub fn all_exact(&self) -> bool {
        self.rows.iter().all(|r| r.verified && r.bit_exact)
    }
}

fn processes(c: &StudyConfig, high_arrival_us: f64) -> Vec<Process> {
    let suite = |(kernel, size): (&'static dyn suite::Kernel, Size)| Program::Suite {
        kernel,
        size,
        seed: 1,
        target: kernel.default_target(),
        warm_up: false,
        managed: workload::scenario::Managed::Off,
    };
    vec![
        Process {
            stream_priorities: Vec::new(),
            requests: None,
            name: format!("{} (low)", c.low.0.name()),
            arrival_us: 0.0,
            priority: 0,
            program: suite(c.low),
        },
        Process {
            stream_priorities: Vec::new(),
            requests: None,
            name: format!("{} (high)", c.high.0.name()),
            arrival_us: high_arrival_us,
            priority: 10,
            program: suite(c.high),
        },
    ]
}

fn one(
    c: &StudyConfig,
    processes: &[Process],
    policy: PolicyKind,
    mechanism: MechanismKind,
) -> Result<RunRecord, RunError> {
    let setup = crate::suite_setup(&c.gpu, policy, mechanism, c.max_cycles, c.instruction_limit);
    System::new(setup, processes)?.run(&mut |_| {})
}

/// Why a study failed.
#[derive(Debug, thiserror::Error)]
#[error("preemption study with {mechanism}: {error}")]
pub struct StudyError {
    pub mechanism: String,
    pub error: RunError,
}

/// Runs the study; `progress(done, total, what)` after each run.
pub fn run(
    c: &StudyConfig,
    progress: &(dyn Fn(usize, usize, &str) + Sync),
) -> Result<StudyResults, StudyError> {
    let high_arrival_us = match c.arrival {
        Arrival::AtUs(us) => us,
        Arrival::IntoLowKernel(f) => {
            let low = processes(c, 0.0).swap_remove(0);
            let r = one(c, &[low], PolicyKind::Npq, MechanismKind::Drain).map_err(|error| {
                StudyError {
                    mechanism: "the low-priority process alone".into(),
                    error,
                }
            })?;
            let start = r
                .kernels
                .iter()
                .filter_map(|k| k.started_fs)
                .min()
                .unwrap_or(0);
            let end = r
                .kernels
                .iter()
                .filter_map(|k| k.finished_fs)
                .max()
                .unwrap_or(start);
            (start as f64 + f.clamp(0.0, 1.0) * (end - start) as f64) / 1e9
        }
    };
    let processes = processes(c, high_arrival_us);
    // The reference first, then every mechanism under preemptive priority.
    let jobs: Vec<(PolicyKind, MechanismKind)> =
        std::iter::once((PolicyKind::Npq, MechanismKind::Drain))
            .chain(c.mechanisms.iter().map(|&m| {
                (
                    PolicyKind::Ppq {
                        access: sched::PpqAccess::Shared,
                    },
                    m,
                )
            }))
            .collect();
    let label = |i: usize| {
        if i == 0 {
            "npq (no preemption)".to_string()
        } else {
            jobs[i].1.to_string()
        }
    };
    let results: Vec<Mutex<Option<Result<RunRecord, RunError>>>> =
        jobs.iter().map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let worker = || loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        let Some(&(policy, mechanism)) = jobs.get(i) else {
            return;
        };
        let r = one(c, &processes, policy, mechanism);
        *results[i].lock().expect("no thread panics holding it") = Some(r);
        progress(
            done.fetch_add(1, Ordering::Relaxed) + 1,
            jobs.len(),
            &label(i),
        );
    };
    crate::on_workers(
        c.threads.clamp(1, jobs.len()),
        &crate::worker_thread,
        &worker,
    );
    let mut records = Vec::new();
    for (i, r) in results.into_iter().enumerate() {
        let r = r
            .into_inner()
            .expect("no thread panics holding it")
            .expect("every job ran");
        records.push(r.map_err(|error| StudyError {
            mechanism: label(i),
            error,
        })?);
    }
    let us = |fs: u64| fs as f64 / 1e9;
    let turnaround = |r: &RunRecord, i: usize| {
        let p = &r.processes[i];
        us(p.finished_fs.unwrap_or(0).saturating_sub(p.arrival_fs))
    };
    let reference = &records[0];
    let low_alone = turnaround(reference, 0);
    let rows = records
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let high: Vec<_> = r
                .kernels
                .iter()
                .filter(|k| k.process == r.processes[1].name)
                .filter_map(|k| Some(k.started_fs?.saturating_sub(k.arrived_fs?)))
                .collect();
            StudyRow {
                mechanism: label(i),
                high_wait_us: us(high.iter().sum::<u64>()) / high.len().max(1) as f64,
                high_turnaround_us: turnaround(r, 1),
                low_turnaround_us: turnaround(r, 0),
                low_slowdown: turnaround(r, 0) / low_alone.max(1e-9),
                makespan_us: us(r.cycles * r.core_period_fs),
                preemption: PreemptionSummary::of(&label(i), &r.preemptions, r.core_period_fs),
                verified: r
                    .processes
                    .iter()
                    .all(|p| p.verdict.as_ref().is_some_and(|v| v.verified)),
                bit_exact: r.memory == reference.memory,
            }
        })
        .collect();
    Ok(StudyResults {
        gpu: c.gpu.name.clone(),
        low: format!("{} ({})", c.low.0.name(), c.low.1.name()),
        high: format!("{} ({})", c.high.0.name(), c.high.1.name()),
        high_arrival_us,
        rows,
    })
}
