//! Per-instruction preemption (papers/ji-ctxback §V, Figures 7–9): each suite kernel is
//! preempted at a seeded sample of dynamic moments of its run, once per mechanism at the
//! same moments, and each request's context size, preemption time and resume time is
//! normalised per kernel to BASELINE's.
//!
//! **The moments.** The kernel's program runs once uninterrupted (the reference). Its busy
//! cycles (the union of its launches' spans, first TB to finish) are the population: `samples`
//! cycles are drawn from them uniformly with the suite's [`suite::Rng`]
//! ([`suite::Rng::for_kernel`] of the kernel's name and `seed`), each with a first SM to
//! try. Each sample is **its own run** per mechanism: the program runs from the start, and
//! at the first cycle at or after the drawn one where some SM (tried round robin from the
//! drawn one) runs TBs of the kernel, that SM is preempted (as the periodic experiment's
//! signal: the other SMs keep running, and the SM is set up for the same kernel again, which
//! resumes the preempted TBs first). Runs are deterministic, so two mechanisms whose
//! kernels time alike before the request are asked at the same cycle, on the same SM, with
//! the same TBs at the same dynamic instruction. A mechanism's kernel pass may change that
//! timing (the routine mechanisms append their routines and grow each thread's local
//! memory by its context area): each request records the warp instructions the active
//! launches had executed, and each run counts the requests not made at BASELINE's moment
//! and how far their instruction counts drifted ([`KernelRun::moments_differ`]).
//!
//! **What a request measures** (from the mechanism's [`Record`]s; core cycles):
//! * *context*: the bytes its TBs saved ([`ContextBytes::total`]: registers, shared memory,
//!   SIMT stacks and barrier state, metadata);
//! * *preemption time*: from the request until the last of its TBs released its resources;
//! * *resume time*: per restored TB, from the start of its restore until it runs again
//!   (for the routine mechanisms, the resume routines' reloads and re-execution included),
//!   averaged over the TBs.
//!
//! Every run must verify and end with device memory equal, byte for byte, to the
//! reference's; a run that does not is an error ([`ExperimentError::NotExact`]).
//!
//! **Normalisation.** Per kernel and mechanism, each measure's mean over the samples is
//! divided by BASELINE's mean at the same samples (a ratio of means, so that one short
//! request does not dominate); across kernels the normalised values are averaged
//! arithmetically (the paper's "on average"), and the geometric mean is given too.
//!
//! **CKPT** ([`MechanismKind::Ckpt`]): a TB rolled back to its checkpoint saves nothing at the
//! request; its context is the checkpoint chain it restores, and its resume time adds the
//! cycles the discarded work took the first time ([`Record::RolledBack`]), which re-executing
//! it costs again (the paper's "wasted execution progress").
//!
//! **Runtime overhead** (Figure 10): per kernel and mechanism, one more run with nothing
//! preempted; its kernel time (the busy spans) over the reference's, less one. CKPT's
//! checkpoints pause the TBs and move their bytes; a routine mechanism's kernel pass may add
//! code (on-chip backups) to the kernel body.

use std::sync::atomic::AtomicUsize;

use gpu::config::GpuConfig;
use gpu::timing::{Machine, SmId};
use preempt::{ContextBytes, How, MechanismKind, Record};
use sched::{Framework, SmState};
use serde::Serialize;
use suite::{Size, Target};
use workload::system::Injector;
use workload::{RunError, RunRecord};

use crate::figures::{Figure, Row};

/// The mechanisms of papers/ji-ctxback Figures 7–10, BASELINE first.
pub const MECHANISMS: [MechanismKind; 6] = [
    MechanismKind::Baseline,
    MechanismKind::Live,
    MechanismKind::CKPT,
    MechanismKind::CsDefer,
    MechanismKind::CtxBack,
    MechanismKind::CtxBackCsDefer,
];

/// What to run.
#[derive(Clone)]
pub struct PerInstructionConfig {
    pub gpu: GpuConfig,
    pub kernels: Vec<&'static dyn suite::Kernel>,
    pub size: Size,
    /// The committed PTX to run; `None`: each kernel's default target.
    pub target: Option<Target>,
    /// Seed of the input generators and of the sample.
    pub seed: u64,
    /// Request moments per kernel.
    pub samples: u32,
    /// The mechanisms; [`MechanismKind::Baseline`] must be one of them (the normaliser).
    pub mechanisms: Vec<MechanismKind>,
    /// Runs at once (results do not depend on it).
    pub threads: usize,
    /// Core cycles one run may take.
    pub max_cycles: u64,
    /// Warp instructions one launch may execute in all (`None`: the progress rule of
    /// `gpu::limits`).
    pub instruction_limit: Option<u64>,
}

impl PerInstructionConfig {
    /// The default on `gpu`: every suite kernel the GPU can run, small inputs, 8 samples
    /// per kernel, seed 1, [`MECHANISMS`].
    pub fn default_on(gpu: GpuConfig) -> PerInstructionConfig {
        PerInstructionConfig {
            kernels: crate::runnable_kernels(&gpu),
            gpu,
            size: Size::Small,
            target: None,
            seed: 1,
            samples: 8,
            mechanisms: MECHANISMS.to_vec(),
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            max_cycles: 200_000_000,
            instruction_limit: None,
        }
    }
}

/// One request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Request {
    /// The drawn cycle, and the cycle the request was made (the first at or after it with
    /// an SM to take), the SM and the TBs it held.
    pub drawn: u64,
    pub cycle: u64,
    pub sm: u32,
    pub tbs: u32,
    /// Warp instructions the active launches had executed when the request was made: with
    /// the cycle, what identifies the moment across mechanisms.
    pub warp_instructions: u64,
    pub context: ContextBytes,
    /// Core cycles from the request to the last TB's resources released.
    pub preemption: u64,
    /// Mean core cycles from a TB's restore start to its running again, over `restored`,
    /// plus (CKPT) the cycles its discarded work took.
    pub resume: f64,
    /// CKPT: warp instructions and cycles discarded by rollbacks, over the request's TBs.
    pub discarded_instructions: u64,
    pub discarded_cycles: u64,
    pub restored: u32,
    pub switched: u32,
    pub drained: u32,
    pub flushed: u32,
    pub refused: u32,
}

/// Context bytes, preemption cycles and resume cycles (means, or ratios to BASELINE).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Measures {
    pub context: f64,
    pub preemption: f64,
    pub resume: f64,
}

impl Measures {
    fn of(requests: &[Request]) -> Measures {
        let n = requests.len().max(1) as f64;
        let mut m = Measures::default();
        for r in requests {
            m.context += r.context.total() as f64 / n;
            m.preemption += r.preemption as f64 / n;
            m.resume += r.resume / n;
        }
        m
    }

    fn over(self, base: Measures) -> Measures {
        let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { f64::NAN };
        Measures {
            context: ratio(self.context, base.context),
            preemption: ratio(self.preemption, base.preemption),
            resume: ratio(self.resume, base.resume),
        }
    }
}

/// One kernel under one mechanism: a request per sample.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct KernelRun {
    pub kernel: String,
    pub mechanism: String,
    pub requests: Vec<Request>,
    /// Means over the requests (bytes, core cycles).
    pub mean: Measures,
    /// `mean` over BASELINE's for the same kernel.
    pub normalised: Measures,
    /// Kernel time with the mechanism in place and nothing preempted, over the reference's,
    /// less one (Figure 10).
    pub runtime_overhead: f64,
    /// Drawn moments at which this mechanism's request differs from BASELINE's (cycle, SM,
    /// TBs and the active launches' warp instructions) or one of the two made none, and
    /// the largest relative difference of the warp instructions at the same drawn moment:
    /// non-zero where the mechanism's kernel pass changed the kernel's timing before the
    /// request.
    pub moments_differ: u32,
    pub instruction_drift: f64,
}

/// A request's moment: the drawn cycle, the cycle and SM it was made at, its TBs and the
/// active launches' warp instructions.
type RequestMoment = (u64, u64, u32, u32, u64);

/// How many of the drawn moments (those of `mine` and of `reference`, matched by the drawn
/// cycle) did not get the same request in both — one side made none, or made it at another
/// cycle, SM, TB count or instruction count — and the largest relative difference in warp
/// instructions between two requests of the same drawn moment.
fn compare_moments(mine: &[RequestMoment], reference: &[RequestMoment]) -> (u32, f64) {
    let same_drawn =
        |a: &RequestMoment, list: &[RequestMoment]| list.iter().find(|b| b.0 == a.0).copied();
    let differ = mine
        .iter()
        .filter(|a| same_drawn(a, reference) != Some(**a))
        .count()
        + reference
            .iter()
            .filter(|b| same_drawn(b, mine).is_none())
            .count();
    let drift = mine
        .iter()
        .filter_map(|a| same_drawn(a, reference).map(|b| (a.4, b.4)))
        .map(|(a, b)| a.abs_diff(b) as f64 / b.max(1) as f64)
        .fold(0.0, f64::max);
    (differ as u32, drift)
}

/// One mechanism's normalised measures averaged over the kernels.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Average {
    pub mechanism: String,
    /// The arithmetic mean of the kernels' normalised measures (the paper's "on average").
    pub arithmetic: Measures,
    pub geometric: Measures,
    /// The arithmetic mean of the kernels' runtime overheads.
    pub runtime_overhead: f64,
}

/// Everything the experiment measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PerInstructionResults {
    pub gpu: String,
    pub size: String,
    pub seed: u64,
    pub samples: u32,
    pub core_mhz: f64,
    pub mechanisms: Vec<String>,
    pub kernels: Vec<String>,
    /// Kernels some of whose drawn moments found no SM to take at any cycle up to the end of
    /// the run (drawn in the last launch's tail), with how many under the last mechanism (a
    /// mechanism that disagrees counts them in [`KernelRun::moments_differ`]); those moments
    /// are left out.
    pub unrequested: Vec<(String, u32)>,
    /// By kernel, then mechanism, in the orders above.
    pub runs: Vec<KernelRun>,
    /// By mechanism.
    pub averages: Vec<Average>,
}

impl PerInstructionResults {
    pub fn run(&self, kernel: &str, mechanism: &str) -> Option<&KernelRun> {
        self.runs
            .iter()
            .find(|r| r.kernel == kernel && r.mechanism == mechanism)
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
    #[error(
        "{kernel} with {mechanism}, preempted at cycle {cycle}: {}",
        if *verified { "device memory differs from the uninterrupted run's" } else { "the result did not verify" }
    )]
    NotExact {
        kernel: String,
        mechanism: String,
        cycle: u64,
        verified: bool,
    },
    #[error("the mechanisms must include baseline, the normaliser")]
    NoBaseline,
}

/// The drawn moment of a run: preempts the first SM running TBs, tried from `first_sm`,
/// at or after cycle `at`.
struct OneRequest {
    at: u64,
    first_sm: u32,
    /// Warp instructions of the active launches when it was made.
    made: Option<u64>,
}

impl Injector for OneRequest {
    fn before_cycle(&mut self, m: &Machine, fw: &mut Framework) {
        if self.made.is_some() || m.cycle() < self.at {
            return;
        }
        let n = m.sm_count();
        for k in 0..n {
            let sm = SmId((self.first_sm + k) % n);
            if fw.tables().sm(sm).state == SmState::Running
                && m.resident(sm).next().is_some()
                && fw.preempt_sm(sm)
            {
                self.made = Some(m.active().iter().map(|&l| m.warp_instructions(l)).sum());
                return;
            }
        }
    }
}

/// A drawn moment: a cycle and the SM to try first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Moment {
    cycle: u64,
    first_sm: u32,
}

/// A finished run and the warp instructions at its request (`None`: no reference, or no
/// request made).
type RunOutcome = Result<(RunRecord, Option<u64>), ExperimentError>;

fn one_run(
    config: &PerInstructionConfig,
    kernel: &'static dyn suite::Kernel,
    mechanism: Option<MechanismKind>,
    moment: Option<Moment>,
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
    match moment {
        None => Ok((run(None)?, None)),
        Some(m) => {
            let mut request = OneRequest {
                at: m.cycle,
                first_sm: m.first_sm,
                made: None,
            };
            let r = run(Some(&mut request))?;
            Ok((r, request.made))
        }
    }
}

/// The busy spans of the reference run (core cycles), first TB to finish per launch,
/// merged.
fn busy_spans(reference: &RunRecord) -> Vec<(u64, u64)> {
    let period = reference.core_period_fs.max(1);
    let mut spans: Vec<(u64, u64)> = reference
        .kernels
        .iter()
        .filter_map(|k| Some((k.started_fs? / period, k.finished_fs? / period)))
        .filter(|(a, b)| b > a)
        .collect();
    spans.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::new();
    for (a, b) in spans {
        match merged.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => merged.push((a, b)),
        }
    }
    merged
}

/// `samples` moments drawn uniformly from the busy cycles of `reference`, in time order.
fn draw(
    config: &PerInstructionConfig,
    kernel: &dyn suite::Kernel,
    reference: &RunRecord,
) -> Vec<Moment> {
    let spans = busy_spans(reference);
    let total: u64 = spans.iter().map(|(a, b)| b - a).sum();
    if total == 0 {
        return Vec::new();
    }
    let mut rng = suite::Rng::for_kernel(kernel.name(), config.seed);
    let mut out: Vec<Moment> = (0..config.samples)
        .map(|_| {
            let mut offset = rng.next_u64() % total;
            let first_sm = rng.below(reference.sm_count.max(1));
            let mut cycle = 0;
            for &(a, b) in &spans {
                if offset < b - a {
                    cycle = a + offset;
                    break;
                }
                offset -= b - a;
            }
            Moment { cycle, first_sm }
        })
        .collect();
    out.sort_unstable_by_key(|m| (m.cycle, m.first_sm));
    out
}

/// What a run's records say of its one request (`None`: no request was made).
fn request_of(records: &[Record], drawn: u64, warp_instructions: u64) -> Option<Request> {
    let mut q: Option<Request> = None;
    let mut resume = 0u64;
    for r in records {
        match *r {
            Record::Requested { cycle, sm, tbs } if q.is_none() => {
                q = Some(Request {
                    drawn,
                    cycle,
                    sm: sm.0,
                    tbs,
                    warp_instructions,
                    ..Request::default()
                });
            }
            Record::Preempted {
                how,
                requested,
                released,
                bytes,
                ..
            } => {
                let q = q.as_mut()?;
                q.preemption = q.preemption.max(released - requested);
                q.context.registers += bytes.registers;
                q.context.shared += bytes.shared;
                q.context.stack_barrier += bytes.stack_barrier;
                q.context.metadata += bytes.metadata;
                match how {
                    How::Switched => q.switched += 1,
                    How::Flushed { .. } => q.flushed += 1,
                    How::Drained => q.drained += 1,
                }
            }
            Record::Restored {
                started, finished, ..
            } => {
                let q = q.as_mut()?;
                q.restored += 1;
                resume += finished - started;
            }
            Record::Refused { .. } => q.as_mut()?.refused += 1,
            Record::RolledBack {
                discarded_instructions,
                discarded_cycles,
                ..
            } => {
                let q = q.as_mut()?;
                q.discarded_instructions += discarded_instructions;
                q.discarded_cycles += discarded_cycles;
                resume += discarded_cycles;
            }
            Record::Requested { .. }
            | Record::Chose { .. }
            | Record::Case { .. }
            | Record::Checkpointed { .. } => {}
        }
    }
    let mut q = q?;
    q.resume = resume as f64 / f64::from(q.restored.max(1));
    Some(q)
}

/// A run, the warp instructions at its request (if one was made), and whether it ended
/// with device memory identical to its kernel's reference run.
type CheckedOutcome = Result<(RunRecord, Option<u64>, bool), ExperimentError>;

/// Runs `jobs` over the configured threads ([`crate::run_indexed`]). Given the kernels'
/// `references`, each run is compared with its reference's final memory as soon as it
/// ends, and what its results are not measured from is dropped ([`crate::drop_bulk`]):
/// holding every run whole took 8.6 GB at `large`. (A reference run is kept whole, and
/// counts as identical to itself.)
fn run_jobs(
    config: &PerInstructionConfig,
    jobs: &[(usize, Option<MechanismKind>, Option<Moment>)],
    references: Option<&[RunRecord]>,
    progress: &(dyn Fn(usize, usize, &str) + Sync),
    done: &AtomicUsize,
    total: usize,
) -> Vec<Option<CheckedOutcome>> {
    crate::run_indexed(
        config.threads,
        jobs,
        &|&(k, m, moment)| {
            let (mut r, made) = one_run(config, config.kernels[k], m, moment)?;
            let Some(references) = references else {
                return Ok((r, made, true));
            };
            let exact = r.memory == references[k].memory;
            crate::drop_bulk(&mut r);
            Ok((r, made, exact))
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

fn geometric(values: &[f64]) -> f64 {
    let v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    if v.iter().any(|&x| x <= 0.0) {
        return 0.0;
    }
    (v.iter().map(|x| x.ln()).sum::<f64>() / v.len() as f64).exp()
}

fn arithmetic(values: &[f64]) -> f64 {
    let v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.iter().sum::<f64>() / v.len() as f64
}

/// The runs of the experiment: one reference per kernel, then one per kernel, mechanism
/// and sample, then one per kernel and mechanism with nothing preempted (the overhead).
pub fn total_runs(config: &PerInstructionConfig) -> usize {
    config.kernels.len() * (1 + config.mechanisms.len() * (config.samples as usize + 1))
}

/// A run's kernel time: the length of its busy spans, core cycles.
fn busy_cycles(r: &RunRecord) -> u64 {
    busy_spans(r).iter().map(|(a, b)| b - a).sum()
}

/// Runs the experiment; `progress(done, total, what)` after each run. The sample count is
/// per kernel; a kernel's runs may be fewer when its run is shorter than the samples (never
/// in the suite).
pub fn run(
    config: &PerInstructionConfig,
    progress: &(dyn Fn(usize, usize, &str) + Sync),
) -> Result<PerInstructionResults, ExperimentError> {
    let Some(base) = config
        .mechanisms
        .iter()
        .position(|&m| m == MechanismKind::Baseline)
    else {
        return Err(ExperimentError::NoBaseline);
    };
    let total = total_runs(config);
    let done = AtomicUsize::new(0);
    // The references first: each kernel's moments come from its uninterrupted run.
    let jobs: Vec<_> = (0..config.kernels.len()).map(|k| (k, None, None)).collect();
    let mut references = Vec::with_capacity(jobs.len());
    for r in run_jobs(config, &jobs, None, progress, &done, total) {
        references.push(r.expect("every reference ran or an earlier one failed")?.0);
    }
    let moments: Vec<Vec<Moment>> = config
        .kernels
        .iter()
        .zip(&references)
        .map(|(&k, r)| draw(config, k, r))
        .collect();
    let mut jobs = Vec::new();
    for (k, ms) in moments.iter().enumerate() {
        for &m in &config.mechanisms {
            for &moment in ms {
                jobs.push((k, Some(m), Some(moment)));
            }
        }
    }
    let outcomes = run_jobs(config, &jobs, Some(&references), progress, &done, total);
    // The overhead runs: each mechanism in place, nothing preempted.
    let quiet_jobs: Vec<_> = (0..config.kernels.len())
        .flat_map(|k| config.mechanisms.iter().map(move |&m| (k, Some(m), None)))
        .collect();
    let mut quiet = run_jobs(
        config,
        &quiet_jobs,
        Some(&references),
        progress,
        &done,
        total,
    )
    .into_iter();
    let mut out = PerInstructionResults {
        gpu: config.gpu.name.clone(),
        size: config.size.name().into(),
        seed: config.seed,
        samples: config.samples,
        core_mhz: config.gpu.sm.clock_mhz,
        mechanisms: config.mechanisms.iter().map(|m| m.to_string()).collect(),
        kernels: config
            .kernels
            .iter()
            .map(|k| k.name().to_string())
            .collect(),
        ..PerInstructionResults::default()
    };
    let mut outcomes = outcomes.into_iter();
    for (k, reference) in references.iter().enumerate() {
        let kernel = config.kernels[k].name().to_string();
        let mut runs: Vec<KernelRun> = Vec::new();
        let mut unrequested = 0;
        for &m in &config.mechanisms {
            let mut run = KernelRun {
                kernel: kernel.clone(),
                mechanism: m.to_string(),
                ..KernelRun::default()
            };
            unrequested = 0;
            for moment in &moments[k] {
                let (r, made, exact) = outcomes
                    .next()
                    .expect("one outcome per job")
                    .expect("every job ran or an earlier one failed")?;
                let verified = r
                    .processes
                    .iter()
                    .all(|p| p.verdict.as_ref().is_some_and(|v| v.verified));
                let request = made.and_then(|w| request_of(&r.preemptions, moment.cycle, w));
                if !verified || !exact {
                    return Err(ExperimentError::NotExact {
                        kernel,
                        mechanism: m.to_string(),
                        cycle: request.map_or(moment.cycle, |q| q.cycle),
                        verified,
                    });
                }
                match request {
                    Some(q) => run.requests.push(q),
                    None => unrequested += 1,
                }
            }
            run.mean = Measures::of(&run.requests);
            let (q, _, exact) = quiet
                .next()
                .expect("one overhead run per kernel and mechanism")
                .expect("every job ran or an earlier one failed")?;
            if !exact {
                return Err(ExperimentError::NotExact {
                    kernel,
                    mechanism: m.to_string(),
                    cycle: 0,
                    verified: true,
                });
            }
            run.runtime_overhead =
                busy_cycles(&q) as f64 / busy_cycles(reference).max(1) as f64 - 1.0;
            runs.push(run);
        }
        // Whether each mechanism was asked at BASELINE's moments.
        let moments_of = |r: &KernelRun| -> Vec<(u64, u64, u32, u32, u64)> {
            r.requests
                .iter()
                .map(|q| (q.drawn, q.cycle, q.sm, q.tbs, q.warp_instructions))
                .collect()
        };
        let reference_moments = moments_of(&runs[base]);
        for run in &mut runs {
            (run.moments_differ, run.instruction_drift) =
                compare_moments(&moments_of(run), &reference_moments);
        }
        let base_mean = runs[base].mean;
        for run in &mut runs {
            run.normalised = run.mean.over(base_mean);
        }
        if unrequested > 0 {
            out.unrequested.push((kernel, unrequested));
        }
        out.runs.extend(runs);
    }
    for m in &out.mechanisms {
        let of = |f: fn(&Measures) -> f64| -> Vec<f64> {
            out.runs
                .iter()
                .filter(|r| &r.mechanism == m && !r.requests.is_empty())
                .map(|r| f(&r.normalised))
                .collect()
        };
        let (c, p, r) = (of(|x| x.context), of(|x| x.preemption), of(|x| x.resume));
        let overheads: Vec<f64> = out
            .runs
            .iter()
            .filter(|r| &r.mechanism == m)
            .map(|r| r.runtime_overhead)
            .collect();
        out.averages.push(Average {
            mechanism: m.clone(),
            arithmetic: Measures {
                context: arithmetic(&c),
                preemption: arithmetic(&p),
                resume: arithmetic(&r),
            },
            geometric: Measures {
                context: geometric(&c),
                preemption: geometric(&p),
                resume: geometric(&r),
            },
            runtime_overhead: arithmetic(&overheads),
        });
    }
    Ok(out)
}

/// papers/ji-ctxback Figures 7–9 from the results: per kernel, each mechanism's context
/// size, preemption time and resume time over BASELINE's, then the geometric mean and the
/// arithmetic mean (the paper's "on average") over the kernels. A kernel a mechanism made
/// no request for has no bar.
pub fn figures(r: &PerInstructionResults) -> Vec<Figure> {
    let figure = |id: &str, what: &str, pick: fn(&Measures) -> f64, paper: &str| {
        let rows = r
            .kernels
            .iter()
            .map(|k| Row {
                category: k.clone(),
                values: r
                    .mechanisms
                    .iter()
                    .map(|m| {
                        let v = r
                            .run(k, m)
                            .filter(|run| !run.requests.is_empty())
                            .map_or(0.0, |run| pick(&run.normalised));
                        vec![if v.is_finite() { v } else { 0.0 }]
                    })
                    .collect(),
            })
            .collect();
        let mut f = Figure {
            id: id.into(),
            title: format!("{what} over BASELINE's (papers/ji-ctxback {id})"),
            y_label: format!("{what} / BASELINE"),
            series: r.mechanisms.clone(),
            parts: vec![what.into()],
            rows,
            paper: paper.into(),
            clip: None,
        }
        .with_geomean();
        f.rows.push(Row {
            category: "mean".into(),
            values: r
                .mechanisms
                .iter()
                .map(|m| {
                    let v = r
                        .averages
                        .iter()
                        .find(|a| &a.mechanism == m)
                        .map_or(0.0, |a| pick(&a.arithmetic));
                    vec![v]
                })
                .collect(),
        });
        f
    };
    vec![
        figure(
            "fig7",
            "context size",
            |m| m.context,
            "CTXBack -61.0%, CS-Defer -62.1%, CTXBack+CS-Defer -62.1%, LIVE -37.8%",
        ),
        figure(
            "fig8",
            "preemption time",
            |m| m.preemption,
            "CTXBack -63.1%, CTXBack+CS-Defer -65.2%, CS-Defer 34.8% above CTXBack",
        ),
        figure(
            "fig9",
            "resume time",
            |m| m.resume,
            "CTXBack -50.0%, CTXBack+CS-Defer -54.8%, CS-Defer -65.6%, CKPT 318%",
        ),
        overhead_figure(r),
    ]
}

/// papers/ji-ctxback Figure 10: each mechanism's runtime overhead per kernel (kernel time
/// with it in place and nothing preempted, over the reference's, less one), then the mean.
fn overhead_figure(r: &PerInstructionResults) -> Figure {
    let mut rows: Vec<Row> = r
        .kernels
        .iter()
        .map(|k| Row {
            category: k.clone(),
            values: r
                .mechanisms
                .iter()
                .map(|m| vec![r.run(k, m).map_or(0.0, |run| run.runtime_overhead)])
                .collect(),
        })
        .collect();
    rows.push(Row {
        category: "mean".into(),
        values: r
            .mechanisms
            .iter()
            .map(|m| {
                vec![r
                    .averages
                    .iter()
                    .find(|a| &a.mechanism == m)
                    .map_or(0.0, |a| a.runtime_overhead)]
            })
            .collect(),
    });
    Figure {
        id: "fig10".into(),
        title: "runtime overhead with nothing preempted (papers/ji-ctxback fig10)".into(),
        y_label: "kernel time / without the mechanism - 1".into(),
        series: r.mechanisms.clone(),
        parts: vec!["runtime overhead".into()],
        rows,
        paper: "CKPT 130%, CTXBack 0.41%".into(),
        clip: None,
    }
}

#[cfg(test)]
mod tests {
    use super::compare_moments;

    /// Moments are matched by the drawn cycle, not by position: a moment one side has no
    /// request for counts once, and the requests after it are still compared with their
    /// own moments.
    #[test]
    fn moments_are_compared_by_the_drawn_cycle() {
        let reference = [
            (10, 10, 0, 4, 100),
            (20, 21, 1, 4, 200),
            (30, 30, 2, 4, 300),
        ];
        assert_eq!(compare_moments(&reference, &reference), (0, 0.0));
        // The second moment found no SM for this mechanism: one differs, not two.
        let mine = [reference[0], reference[2]];
        assert_eq!(compare_moments(&mine, &reference), (1, 0.0));
        // The third was asked 30 instructions later: it differs and drifts 10%.
        let mine = [reference[0], reference[1], (30, 30, 2, 4, 330)];
        let (n, drift) = compare_moments(&mine, &reference);
        assert_eq!(n, 1);
        assert!((drift - 0.1).abs() < 1e-12, "{drift}");
        // A moment only this mechanism made a request at counts too.
        let mine = [
            reference[0],
            reference[1],
            reference[2],
            (40, 40, 0, 4, 400),
        ];
        assert_eq!(compare_moments(&mine, &reference).0, 1);
    }
}
