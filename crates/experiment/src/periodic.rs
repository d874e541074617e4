//! Periodic preemption (papers/lin-lightweight §V-A): every `interval` core cycles a
//! preemption signal takes one SM from the running kernel while the other SMs keep
//! running; the SM's TBs are given up by the mechanism under test and resumed afterwards
//! (on any SM: the framework reserves the SM for the same kernel, which restores its
//! preempted TBs first). Each suite kernel runs as its own host program, once per
//! mechanism, and once uninterrupted as the reference every run's device memory is
//! compared with, byte for byte.
//!
//! **Which SM.** Signals go round robin over the SMs, starting after the last SM taken, to
//! the first that runs TBs of the kernel and is not still being emptied; a signal that
//! finds none (the GPU between launches, or every SM busy being emptied) is counted as
//! skipped.
//!
//! **The launch call ahead of it.** Each signal stands for a kernel launch that reaches the
//! GPU: the host called it the preset's launch latency earlier, and the framework is told
//! so then ([`sched::Framework::anticipate`]), naming the SM the signal would take at that
//! moment. Only a mechanism that predicts (PEP, papers/li-pep §3.3) does anything with it.
//!
//! **What a signal measures** (core cycles), from the mechanism's records of the TBs the
//! SM held ([`preempt::Record::Preempted`]):
//! * *preemption latency*: from the signal until the last TB released its resources;
//! * *spill*: the time within it during which some context was on its way to memory (the
//!   union of the TBs' transfer spans, [`preempt::Record::Preempted::moving`]), split over
//!   registers, shared memory and the rest in proportion to their bytes; *drain*: the rest
//!   of the latency, when the save path waited — for in-flight instructions, for warps to
//!   reach a preemption point, or for TBs to finish (all of it for SM draining);
//! * context bytes by part, and what the registers held ([`preempt::RegisterCensus`]).

use std::sync::atomic::AtomicUsize;

use gpu::config::GpuConfig;
use gpu::timing::{Machine, SmId};
use preempt::{ContextBytes, How, MechanismKind, Record, RegisterCensus};
use sched::{Framework, SmState};
use serde::Serialize;
use suite::{Size, Target};
use workload::system::Injector;
use workload::{RunError, RunRecord};

/// The mechanisms the experiment compares by default: SM draining, the baseline context
/// switch ("Occup"), LIVE at any instruction, the lightweight designs, and Chimera.
pub const DEFAULT_MECHANISMS: [MechanismKind; 7] = [
    MechanismKind::Drain,
    MechanismKind::Baseline,
    MechanismKind::Live,
    MechanismKind::PointsLive,
    MechanismKind::LIGHTWEIGHT,
    MechanismKind::LIGHTWEIGHT_TB,
    MechanismKind::CHIMERA,
];

/// What to run.
#[derive(Clone)]
pub struct PeriodicConfig {
    pub gpu: GpuConfig,
    pub kernels: Vec<&'static dyn suite::Kernel>,
    pub size: Size,
    /// The committed PTX to run; `None`: each kernel's oldest target (`sm_70`, or `sm_80` for
    /// tensor-core kernels).
    pub target: Option<Target>,
    pub seed: u64,
    /// Core cycles between two signals (the paper: 10,000).
    pub interval: u64,
    /// Signals each kernel must get at least (0: none asked): a kernel whose uninterrupted
    /// run is too short for that many at `interval` gets them closer together, its busy
    /// cycles over `min_signals + 1` apart (the paper kept kernels with at least 15).
    pub min_signals: u32,
    pub mechanisms: Vec<MechanismKind>,
    /// Runs at once (results do not depend on it).
    pub threads: usize,
    /// Core cycles one run may take.
    pub max_cycles: u64,
    /// Warp instructions one launch may execute in all (`None`: the progress rule of
    /// `gpu::limits`).
    pub instruction_limit: Option<u64>,
}

impl PeriodicConfig {
    /// The paper's setting on `gpu`: every suite kernel, large inputs, a signal every
    /// 10,000 cycles, the default mechanisms.
    pub fn paper(gpu: GpuConfig) -> PeriodicConfig {
        PeriodicConfig {
            kernels: crate::runnable_kernels(&gpu),
            gpu,
            size: Size::Large,
            target: None,
            seed: 1,
            interval: 10_000,
            min_signals: 0,
            mechanisms: DEFAULT_MECHANISMS.to_vec(),
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            max_cycles: 200_000_000,
            instruction_limit: None,
        }
    }
}

/// One signal that found TBs to take.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Signal {
    pub cycle: u64,
    pub sm: u32,
    pub tbs: u32,
    pub latency: u64,
    pub drain: u64,
    pub spill: u64,
    pub bytes: ContextBytes,
    pub registers: RegisterCensus,
    /// Cycles the switched TBs held their SM's resources without running (their contexts
    /// being saved), summed over TBs.
    pub held: u64,
    pub switched: u32,
    pub flushed: u32,
    pub drained: u32,
    pub refused: u32,
}

/// One kernel under one mechanism.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct MechanismRun {
    pub kernel: String,
    pub mechanism: String,
    /// Core cycles between its signals (the configured interval, or less to give the
    /// kernel its minimum number of signals).
    pub interval: u64,
    pub signals: Vec<Signal>,
    /// Signals that found no SM to take, and requests that found the SM without TBs.
    pub skipped: u32,
    pub empty: u32,
    /// Core cycles of the whole program, and relative to the uninterrupted run.
    pub cycles: u64,
    pub slowdown: f64,
    /// The program's check against its CPU reference.
    pub verified: bool,
    /// Device memory at the end equals the uninterrupted run's, byte for byte.
    pub bit_exact: bool,
    pub restores: u64,
    pub mean_resume: f64,
    pub discarded_instructions: u64,
    /// SM resources lost to the mechanism: TB-cycles of resources held by TBs not running
    /// (saves and restores), summed over the run.
    pub tb_cycles_held: u64,
    pub summary: Summary,
}

/// Means over a run's signals (core cycles, bytes per signal).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Summary {
    pub mean_latency: f64,
    pub max_latency: u64,
    pub mean_drain: f64,
    pub mean_spill: f64,
    /// The mean spill time by part: registers, shared memory, SIMT stack / barrier state
    /// and metadata.
    pub mean_spill_parts: [f64; 3],
    pub mean_bytes: [f64; 4],
    /// Summed over every switched TB.
    pub registers: RegisterCensus,
}

impl Summary {
    fn of(signals: &[Signal]) -> Summary {
        let n = signals.len().max(1) as f64;
        let mut s = Summary::default();
        for g in signals {
            s.mean_latency += g.latency as f64 / n;
            s.max_latency = s.max_latency.max(g.latency);
            s.mean_drain += g.drain as f64 / n;
            s.mean_spill += g.spill as f64 / n;
            let b = g.bytes;
            let parts = [b.registers, b.shared, b.stack_barrier + b.metadata];
            let total = b.total();
            if total > 0 {
                for (m, p) in s.mean_spill_parts.iter_mut().zip(parts) {
                    *m += g.spill as f64 * p as f64 / total as f64 / n;
                }
            }
            for (m, p) in
                s.mean_bytes
                    .iter_mut()
                    .zip([b.registers, b.shared, b.stack_barrier, b.metadata])
            {
                *m += p as f64 / n;
            }
            s.registers.add(&g.registers);
        }
        s
    }
}

/// Everything the experiment measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PeriodicResults {
    pub gpu: String,
    pub size: String,
    pub interval: u64,
    pub core_mhz: f64,
    pub mechanisms: Vec<String>,
    pub kernels: Vec<String>,
    /// By kernel, then mechanism, in the orders above.
    pub runs: Vec<MechanismRun>,
}

impl PeriodicResults {
    pub fn run(&self, kernel: &str, mechanism: &str) -> Option<&MechanismRun> {
        self.runs
            .iter()
            .find(|r| r.kernel == kernel && r.mechanism == mechanism)
    }

    /// Whether every run verified and ended bit-exact.
    pub fn all_exact(&self) -> bool {
        self.runs.iter().all(|r| r.verified && r.bit_exact)
    }
}

/// Why the experiment stopped.
#[derive(Debug, thiserror::Error)]
pub enum ExperimentError {
    #[error("{kernel} with {mechanism}: {error}")]
    Run {
        kernel: String,
        mechanism: String,
        error: RunError,
    },
}

/// The signals of a periodic run.
struct Periodic {
    interval: u64,
    next: u64,
    /// The SM after the last one taken.
    turn: u32,
    skipped: u32,
    /// Core cycles from the host's launch call to the signal.
    lead: u64,
    /// The signal whose launch call was made.
    called: u64,
}

impl Periodic {
    /// The SM a signal now would take.
    fn pick(&self, m: &Machine, fw: &Framework) -> Option<SmId> {
        let n = m.sm_count();
        (0..n).map(|k| SmId((self.turn + k) % n)).find(|&sm| {
            fw.tables().sm(sm).state == SmState::Running && m.resident(sm).next().is_some()
        })
    }
}

impl Injector for Periodic {
    fn before_cycle(&mut self, m: &Machine, fw: &mut Framework) {
        let now = m.cycle();
        if self.called < self.next && now + self.lead >= self.next {
            self.called = self.next;
            if let Some(sm) = self.pick(m, fw) {
                fw.anticipate(vec![sm]);
            }
        }
        if now < self.next {
            return;
        }
        while self.next <= now {
            self.next += self.interval;
        }
        let n = m.sm_count();
        for k in 0..n {
            let sm = SmId((self.turn + k) % n);
            if fw.tables().sm(sm).state == SmState::Running
                && m.resident(sm).next().is_some()
                && fw.preempt_sm(sm)
            {
                self.turn = sm.0 + 1;
                return;
            }
        }
        self.skipped += 1;
    }
}

/// A finished run and the signals it skipped, or why it failed.
type RunOutcome = Result<(RunRecord, u32), ExperimentError>;

fn one_run(
    config: &PeriodicConfig,
    kernel: &'static dyn suite::Kernel,
    mechanism: Option<MechanismKind>,
    interval: u64,
) -> RunOutcome {
    let process = crate::suite_process(kernel, config.size, config.seed, config.target);
    let fail = |error| ExperimentError::Run {
        kernel: kernel.name().to_string(),
        mechanism: mechanism.map_or("none".into(), |m| m.to_string()),
        error,
    };
    let run = |injector: Option<&mut dyn Injector>| {
        crate::run_alone(
            &config.gpu,
            process,
            mechanism,
            config.max_cycles,
            config.instruction_limit,
            injector,
        )
        .map_err(fail)
    };
    match mechanism {
        None => Ok((run(None)?, 0)),
        Some(_) => {
            let lead = (config.gpu.host.launch_latency_us * config.gpu.sm.clock_mhz) as u64;
            let mut periodic = Periodic {
                interval: interval.max(1),
                next: interval.max(1),
                turn: 0,
                skipped: 0,
                lead,
                called: 0,
            };
            let r = run(Some(&mut periodic))?;
            Ok((r, periodic.skipped))
        }
    }
}

/// The signals of a run, from the mechanism's records.
pub fn signals(records: &[Record]) -> (Vec<Signal>, u32) {
    let mut out: Vec<Signal> = Vec::new();
    let mut spans: Vec<Vec<(u64, u64)>> = Vec::new();
    let mut empty = 0;
    for r in records {
        match *r {
            Record::Requested { cycle, sm, tbs } => {
                if tbs == 0 {
                    empty += 1;
                    continue;
                }
                out.push(Signal {
                    cycle,
                    sm: sm.0,
                    tbs,
                    ..Signal::default()
                });
                spans.push(Vec::new());
            }
            Record::Preempted {
                sm,
                how,
                requested,
                stopped,
                ref moving,
                released,
                bytes,
                ref registers,
                ..
            } => {
                let Some(i) = out
                    .iter()
                    .rposition(|g| g.sm == sm.0 && g.cycle == requested)
                else {
                    continue;
                };
                let g = &mut out[i];
                g.latency = g.latency.max(released - requested);
                g.bytes.registers += bytes.registers;
                g.bytes.shared += bytes.shared;
                g.bytes.stack_barrier += bytes.stack_barrier;
                g.bytes.metadata += bytes.metadata;
                g.registers.add(registers);
                if how == How::Switched {
                    g.held += released - stopped;
                }
                match how {
                    How::Switched => g.switched += 1,
                    How::Flushed { .. } => g.flushed += 1,
                    How::Drained => g.drained += 1,
                }
                spans[i].extend(moving.iter().copied());
            }
            Record::Refused { cycle, sm, .. } => {
                if let Some(g) = out
                    .iter_mut()
                    .rev()
                    .find(|g| g.sm == sm.0 && g.cycle == cycle)
                {
                    g.refused += 1;
                }
            }
            Record::Restored { .. }
            | Record::Chose { .. }
            | Record::Case { .. }
            | Record::Checkpointed { .. }
            | Record::RolledBack { .. } => {}
        }
    }
    for (g, mut s) in out.iter_mut().zip(spans) {
        s.sort_unstable();
        let (mut busy, mut end) = (0, 0);
        for (a, b) in s {
            let a = a.max(end);
            if b > a {
                busy += b - a;
                end = b;
            }
        }
        g.spill = busy;
        g.drain = g.latency - busy.min(g.latency);
    }
    (out, empty)
}

/// The signal interval for a kernel whose uninterrupted run `reference` was: the
/// configured one, or shorter, so that the kernel's busy cycles (the union of its launches'
/// spans) hold at least `min_signals` signals.
pub fn interval_for(config: &PeriodicConfig, reference: &RunRecord) -> u64 {
    if config.min_signals == 0 {
        return config.interval;
    }
    let period = reference.core_period_fs.max(1);
    let busy: u64 = reference
        .kernels
        .iter()
        .filter_map(|k| Some((k.started_fs? / period, k.finished_fs? / period)))
        .map(|(a, b)| b.saturating_sub(a))
        .sum();
    config
        .interval
        .min(busy / (u64::from(config.min_signals) + 1))
        .max(1)
}

/// A run, the signals it skipped, and whether it ended with device memory identical to
/// its kernel's reference run.
type CheckedOutcome = Result<(RunRecord, u32, bool), ExperimentError>;

/// Runs `jobs` over the configured threads ([`crate::run_indexed`]). Given the kernels'
/// `references`, each run is compared with its reference's final memory as soon as it
/// ends, and what its results are not measured from is dropped ([`crate::drop_bulk`]), so
/// the experiment does not hold every run whole until its end. (A reference run is kept
/// whole, and counts as identical to itself.)
fn run_jobs(
    config: &PeriodicConfig,
    jobs: &[(usize, Option<MechanismKind>, u64)],
    references: Option<&[(RunRecord, u32, bool)]>,
    progress: &(dyn Fn(usize, usize, &str) + Sync),
    done: &AtomicUsize,
    total: usize,
) -> Vec<Option<CheckedOutcome>> {
    crate::run_indexed(
        config.threads,
        jobs,
        &|&(k, m, interval)| {
            let (mut r, skipped) = one_run(config, config.kernels[k], m, interval)?;
            let Some(references) = references else {
                return Ok((r, skipped, true));
            };
            let exact = r.memory == references[k].0.memory;
            crate::drop_bulk(&mut r);
            Ok((r, skipped, exact))
        },
        &|&(k, m, _)| {
            format!(
                "{} {}",
                config.kernels[k].name(),
                m.map_or("reference".into(), |m| m.to_string())
            )
        },
        progress,
        done,
        total,
    )
}

/// Runs the experiment; `progress(done, total, what)` after each run.
pub fn run(
    config: &PeriodicConfig,
    progress: &(dyn Fn(usize, usize, &str) + Sync),
) -> Result<PeriodicResults, ExperimentError> {
    // Per kernel: the reference, then each mechanism. The references run first: each
    // kernel's interval comes from its reference when there is a minimum number of
    // signals, and each mechanism's run is checked against it as soon as it ends.
    let per_kernel = config.mechanisms.len() + 1;
    let total = config.kernels.len() * per_kernel;
    let done = AtomicUsize::new(0);
    let mut intervals = vec![config.interval; config.kernels.len()];
    let jobs: Vec<_> = (0..config.kernels.len())
        .map(|k| (k, None, config.interval))
        .collect();
    let mut references = Vec::with_capacity(jobs.len());
    for r in run_jobs(config, &jobs, None, progress, &done, total) {
        references.push(r.expect("every reference ran or an earlier one failed")?);
    }
    if config.min_signals != 0 {
        for (k, (r, _, _)) in references.iter().enumerate() {
            intervals[k] = interval_for(config, r);
        }
    }
    let jobs: Vec<_> = (0..config.kernels.len())
        .flat_map(|k| {
            let interval = intervals[k];
            config
                .mechanisms
                .iter()
                .map(move |&m| (k, Some(m), interval))
        })
        .collect();
    let mut runs = run_jobs(config, &jobs, Some(&references), progress, &done, total).into_iter();
    let mut records: Vec<(RunRecord, u32, bool)> = Vec::with_capacity(total);
    for reference in references {
        records.push(reference);
        for _ in 0..config.mechanisms.len() {
            match runs.next().expect("one outcome per job") {
                Some(r) => records.push(r?),
                None => records.push((RunRecord::default(), 0, false)),
            }
        }
    }
    let mut out = PeriodicResults {
        gpu: config.gpu.name.clone(),
        size: config.size.name().into(),
        interval: config.interval,
        core_mhz: config.gpu.sm.clock_mhz,
        mechanisms: config.mechanisms.iter().map(|m| m.to_string()).collect(),
        kernels: config
            .kernels
            .iter()
            .map(|k| k.name().to_string())
            .collect(),
        runs: Vec::new(),
    };
    for (k, chunk) in records.chunks(per_kernel).enumerate() {
        let (reference, _, _) = &chunk[0];
        for (m, (r, skipped, exact)) in config.mechanisms.iter().zip(&chunk[1..]) {
            let (signals, empty) = signals(&r.preemptions);
            let held: u64 = signals.iter().map(|g| g.held).sum();
            let (mut restores, mut resume) = (0u64, 0u64);
            let mut discarded = 0;
            for p in &r.preemptions {
                match *p {
                    Record::Restored {
                        started, finished, ..
                    } => {
                        restores += 1;
                        resume += finished - started;
                    }
                    Record::Preempted {
                        how:
                            How::Flushed {
                                discarded_instructions,
                            },
                        ..
                    } => discarded += discarded_instructions,
                    _ => {}
                }
            }
            out.runs.push(MechanismRun {
                kernel: config.kernels[k].name().to_string(),
                mechanism: m.to_string(),
                interval: intervals[k],
                summary: Summary::of(&signals),
                signals,
                skipped: *skipped,
                empty,
                cycles: r.cycles,
                slowdown: r.cycles as f64 / reference.cycles.max(1) as f64,
                verified: r
                    .processes
                    .iter()
                    .all(|p| p.verdict.as_ref().is_some_and(|v| v.verified)),
                bit_exact: *exact,
                restores,
                mean_resume: resume as f64 / restores.max(1) as f64,
                discarded_instructions: discarded,
                tb_cycles_held: held + resume,
            });
        }
    }
    Ok(out)
}
