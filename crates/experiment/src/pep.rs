//! PEP's evaluation (papers/li-pep §4, Figures 5–9): Chimera, Chimera+dirty, PEP and
//! PEP+in-place preempt each suite kernel when another kernel arrives, over the actual
//! launch times, TB progress and deadlines of the paper, on the `gtx980` preset (its
//! Table 2).
//!
//! **One point.** A kernel's host program runs once uninterrupted (the reference), which
//! gives its first launch's start and its mean TB time `T` (from the residency log: every
//! TB's time on its SM). In each measured run, the host "calls" the preempting kernel's
//! launch when the first wave of TBs is `progress` × `T` into its run
//! ([`sched::Framework::anticipate`] for every SM running the kernel), and the kernel
//! "arrives" `launch_us` later: every SM running the kernel is then preempted (reserved for
//! the same kernel, which resumes its TBs once they are off). Chimera and Chimera+dirty
//! are run at each deadline; PEP predicts its fixed launch time
//! ([`ExperimentConfig::predicted_launch_us`], 20 µs) and has no deadline.
//!
//! **What a point measures** (µs; over the TBs the request took):
//! * *latency* (Figure 6): from the arrival to the last TB's resources released;
//! * *selection* (Figure 5): how each TB was given up — drained, flushed, switched, and
//!   for PEP its cases (a)–(e) ([`PepCase`]);
//! * *context* (Figures 7–8): bytes saved per switched TB, and for PEP the part in its
//!   base checkpoints ([`Record::Checkpointed`]);
//! * *saving overhead* (Figure 9): per switched TB, the cycles it stood still for its
//!   context — the base checkpoint's pause and the save at the request.
//!
//! Every run must verify and end with device memory equal, byte for byte, to the
//! reference's.

use std::sync::atomic::AtomicUsize;

use gpu::config::GpuConfig;
use gpu::timing::{Machine, Move, SmId};
use preempt::{How, MechanismKind, PepCase, Record, PEP_PREDICTED_LAUNCH_US};
use sched::{Framework, SmState};
use serde::Serialize;
use suite::{Size, Target};
use workload::system::Injector;
use workload::{RunError, RunRecord};

use crate::figures::{Figure, Row};

/// What to run.
#[derive(Clone)]
pub struct ExperimentConfig {
    pub gpu: GpuConfig,
    pub kernels: Vec<&'static dyn suite::Kernel>,
    pub size: Size,
    pub target: Option<Target>,
    pub seed: u64,
    /// Actual launch times, µs (the paper: 5, 15, 25, 35).
    pub launch_us: Vec<f64>,
    /// TB progress at the launch call (the paper: 25%, 50%, 75%).
    pub progress: Vec<f64>,
    /// Chimera's deadlines, µs (the paper: 5, 10, 15).
    pub deadlines_us: Vec<f64>,
    /// The launch time PEP predicts, µs.
    pub predicted_launch_us: f64,
    pub threads: usize,
    pub max_cycles: u64,
    pub instruction_limit: Option<u64>,
}

impl ExperimentConfig {
    /// The paper's grid on `gpu`, every suite kernel it can run, small inputs.
    pub fn default_on(gpu: GpuConfig) -> ExperimentConfig {
        ExperimentConfig {
            kernels: crate::runnable_kernels(&gpu),
            gpu,
            size: Size::Small,
            target: None,
            seed: 1,
            launch_us: vec![5.0, 15.0, 25.0, 35.0],
            progress: vec![0.25, 0.5, 0.75],
            deadlines_us: vec![5.0, 10.0, 15.0],
            predicted_launch_us: PEP_PREDICTED_LAUNCH_US,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            max_cycles: 200_000_000,
            instruction_limit: None,
        }
    }

    /// The mechanisms of the grid: Chimera and Chimera+dirty at each deadline, PEP and
    /// PEP+in-place.
    pub fn mechanisms(&self) -> Vec<MechanismKind> {
        let mut out = Vec::new();
        for &deadline_us in &self.deadlines_us {
            out.push(MechanismKind::Chimera { deadline_us });
        }
        for &deadline_us in &self.deadlines_us {
            out.push(MechanismKind::ChimeraDirty { deadline_us });
        }
        out.push(MechanismKind::Pep {
            predicted_launch_us: self.predicted_launch_us,
        });
        out.push(MechanismKind::PepInPlace {
            predicted_launch_us: self.predicted_launch_us,
        });
        out
    }
}

/// The family a mechanism belongs to, as the paper's figures group them.
pub fn family(m: MechanismKind) -> &'static str {
    match m {
        MechanismKind::Chimera { .. } => "chimera",
        MechanismKind::ChimeraDirty { .. } => "chimera+dirty",
        MechanismKind::Pep { .. } => "pep",
        MechanismKind::PepInPlace { .. } => "pep+in-place",
        other => other.name(),
    }
}

/// How the TBs of one request were given up.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Selection {
    pub drained: u32,
    pub flushed: u32,
    pub switched: u32,
    /// PEP's cases (a), (b), (c), (d)/(e).
    pub two_checkpoints: u32,
    pub single_checkpoint: u32,
    pub pep_drain: u32,
    pub checkpoint_at_request: u32,
}

/// One run: a kernel, a mechanism, a launch time and a progress.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Point {
    pub kernel: String,
    pub mechanism: String,
    pub family: String,
    pub launch_us: f64,
    pub progress: f64,
    /// Whether the request was made (the kernel still ran at the arrival).
    pub requested: bool,
    pub tbs: u32,
    /// µs from the arrival to the last TB released.
    pub latency_us: f64,
    pub selection: Selection,
    /// Mean bytes saved per switched TB, and the part of it in base checkpoints.
    pub context_per_tb: f64,
    pub base_per_tb: f64,
    /// Mean µs a switched TB stood still for its context (base pause and save).
    pub overhead_us: f64,
}

/// Means over a family's points (the paper's bars).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct FamilyMean {
    pub family: String,
    pub points: u32,
    pub latency_us: f64,
    pub context_per_tb: f64,
    pub base_per_tb: f64,
    pub overhead_us: f64,
}

/// Everything the experiment measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PepResults {
    pub gpu: String,
    pub size: String,
    pub core_mhz: f64,
    pub kernels: Vec<String>,
    pub mechanisms: Vec<String>,
    /// By kernel, then mechanism, launch time and progress.
    pub points: Vec<Point>,
    /// Per family, over every kernel and point where a request was made.
    pub means: Vec<FamilyMean>,
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
        "{kernel} with {mechanism} (launch {launch_us} µs, progress {progress}): {}",
        if *verified { "device memory differs from the uninterrupted run's" } else { "the result did not verify" }
    )]
    NotExact {
        kernel: String,
        mechanism: String,
        launch_us: f64,
        progress: f64,
        verified: bool,
    },
}

/// The launch call at `call`, the arrival at `arrive`: every SM running the kernel.
struct Launch {
    call: u64,
    arrive: u64,
    called: bool,
    /// The cycle the request was made.
    made: Option<u64>,
}

impl Launch {
    fn sms(m: &Machine, fw: &Framework) -> Vec<SmId> {
        m.sm_ids()
            .filter(|&sm| {
                fw.tables().sm(sm).state == SmState::Running && m.resident(sm).next().is_some()
            })
            .collect()
    }
}

impl Injector for Launch {
    fn before_cycle(&mut self, m: &Machine, fw: &mut Framework) {
        let now = m.cycle();
        if !self.called && now >= self.call {
            self.called = true;
            fw.anticipate(Launch::sms(m, fw));
        }
        if self.made.is_none() && now >= self.arrive {
            let sms = Launch::sms(m, fw);
            let mut any = false;
            for sm in sms {
                any |= fw.preempt_sm(sm);
            }
            if any {
                self.made = Some(now);
            }
        }
    }
}

fn one_run(
    config: &ExperimentConfig,
    kernel: &'static dyn suite::Kernel,
    mechanism: Option<MechanismKind>,
    moments: Option<(u64, u64)>,
) -> Result<(RunRecord, Option<u64>), ExperimentError> {
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
    match moments {
        None => Ok((run(None)?, None)),
        Some((call, arrive)) => {
            let mut launch = Launch {
                call,
                arrive,
                called: false,
                made: None,
            };
            let r = run(Some(&mut launch))?;
            Ok((r, launch.made))
        }
    }
}

/// The first launch's start and its mean TB time (core cycles), from the reference's
/// residency log; `None` if it ran no TB.
fn first_wave(r: &RunRecord) -> Option<(u64, f64)> {
    let period = r.core_period_fs.max(1);
    let first = r.kernels.first()?;
    let start = first.started_fs? / period;
    let launch = first.launch?;
    let mut placed = std::collections::BTreeMap::new();
    let mut times = Vec::new();
    for mv in r.residency.iter().filter(|mv| mv.tb.launch.0 == launch) {
        match mv.how {
            Move::Dispatched => {
                placed.insert(mv.tb, mv.cycle);
            }
            Move::Finished => {
                if let Some(at) = placed.remove(&mv.tb) {
                    times.push(mv.cycle - at);
                }
            }
            _ => {}
        }
    }
    if times.is_empty() {
        return None;
    }
    Some((start, times.iter().sum::<u64>() as f64 / times.len() as f64))
}

/// What one run's records say of its request at `made`.
fn measure(point: &mut Point, records: &[Record], made: u64, core_mhz: f64) {
    let us = |c: u64| c as f64 / core_mhz;
    let mut latency = 0u64;
    let mut switched = 0u32;
    let (mut bytes, mut base, mut overhead) = (0u64, 0u64, 0u64);
    // The TBs whose base checkpoint this request used (PEP's cases (a) and (b)).
    let mut based = Vec::new();
    for r in records {
        match *r {
            Record::Preempted {
                how,
                requested,
                stopped,
                released,
                bytes: b,
                ..
            } if requested >= made => {
                latency = latency.max(released - made);
                match how {
                    How::Drained => point.selection.drained += 1,
                    How::Flushed { .. } => point.selection.flushed += 1,
                    How::Switched => {
                        point.selection.switched += 1;
                        switched += 1;
                        bytes += b.total();
                        overhead += released - stopped;
                    }
                }
            }
            Record::Case {
                case, cycle, tb, ..
            } if cycle >= made => {
                let s = &mut point.selection;
                match case {
                    PepCase::TwoCheckpoints => s.two_checkpoints += 1,
                    PepCase::SingleCheckpoint => s.single_checkpoint += 1,
                    PepCase::Drain => s.pep_drain += 1,
                    PepCase::CheckpointAtRequest => s.checkpoint_at_request += 1,
                }
                if matches!(case, PepCase::TwoCheckpoints | PepCase::SingleCheckpoint) {
                    based.push(tb);
                }
            }
            _ => {}
        }
    }
    // Their base checkpoints: the bytes, and the pause each cost.
    for r in records {
        if let Record::Checkpointed {
            tb,
            paused,
            written,
            bytes: b,
            ..
        } = *r
        {
            if paused <= made && based.contains(&tb) {
                base += b.total();
                overhead += written - paused;
            }
        }
    }
    let s = point.selection;
    point.tbs = s.drained + s.flushed + s.switched;
    point.requested = true;
    point.latency_us = us(latency);
    let n = f64::from(switched.max(1));
    point.context_per_tb = bytes as f64 / n;
    point.base_per_tb = base as f64 / n;
    point.overhead_us = us(overhead) / n;
}

/// The runs of the experiment.
pub fn total_runs(config: &ExperimentConfig) -> usize {
    config.kernels.len()
        * (1 + config.mechanisms().len() * config.launch_us.len() * config.progress.len())
}

/// Runs the experiment; `progress(done, total, what)` after each run.
pub fn run(
    config: &ExperimentConfig,
    progress: &(dyn Fn(usize, usize, &str) + Sync),
) -> Result<PepResults, ExperimentError> {
    let total = total_runs(config);
    let done = AtomicUsize::new(0);
    let mechanisms = config.mechanisms();
    type Job = (usize, Option<MechanismKind>, Option<(u64, u64)>, f64, f64);
    let label = |&(k, m, _, l, p): &Job| {
        format!(
            "{} {} {l} µs {:.0}%",
            config.kernels[k].name(),
            m.map_or("reference".into(), |m| m.to_string()),
            p * 100.0
        )
    };
    let jobs: Vec<Job> = (0..config.kernels.len())
        .map(|k| (k, None, None, 0.0, 0.0))
        .collect();
    let mut references = Vec::new();
    let reference_runs = crate::run_indexed(
        config.threads,
        &jobs,
        &|&(k, m, moments, _, _)| one_run(config, config.kernels[k], m, moments),
        &label,
        progress,
        &done,
        total,
    );
    for r in reference_runs {
        references.push(r.expect("every reference ran or an earlier one failed")?.0);
    }
    let mhz = config.gpu.sm.clock_mhz;
    let mut jobs: Vec<Job> = Vec::new();
    for (k, reference) in references.iter().enumerate() {
        let (start, tb) = first_wave(reference).unwrap_or((0, 0.0));
        for &m in &mechanisms {
            for &l in &config.launch_us {
                for &p in &config.progress {
                    let call = start + (p * tb) as u64;
                    let arrive = call + (l * mhz) as u64;
                    jobs.push((k, Some(m), Some((call, arrive)), l, p));
                }
            }
        }
    }
    // Each run is checked against its reference as soon as it ends, and only what the
    // points are measured from is kept (not its memory, residency log or bandwidth
    // samples): holding every run whole took 15 GB at `large`.
    let outcomes = crate::run_indexed(
        config.threads,
        &jobs,
        &|&(k, m, moments, _, _)| {
            let (r, made) = one_run(config, config.kernels[k], m, moments)?;
            let verified = r
                .processes
                .iter()
                .all(|p| p.verdict.as_ref().is_some_and(|v| v.verified));
            let exact = r.memory == references[k].memory;
            Ok::<_, ExperimentError>((verified, exact, r.preemptions, made))
        },
        &label,
        progress,
        &done,
        total,
    );
    let mut out = PepResults {
        gpu: config.gpu.name.clone(),
        size: config.size.name().into(),
        core_mhz: mhz,
        kernels: config
            .kernels
            .iter()
            .map(|k| k.name().to_string())
            .collect(),
        mechanisms: mechanisms.iter().map(|m| m.to_string()).collect(),
        ..PepResults::default()
    };
    for (job, outcome) in jobs.iter().zip(outcomes) {
        let &(k, m, _, launch_us, progress) = job;
        let m = m.expect("measured runs have a mechanism");
        let (verified, exact, preemptions, made) =
            outcome.expect("every job ran or an earlier one failed")?;
        let kernel = config.kernels[k].name().to_string();
        if !verified || !exact {
            return Err(ExperimentError::NotExact {
                kernel,
                mechanism: m.to_string(),
                launch_us,
                progress,
                verified,
            });
        }
        let mut point = Point {
            kernel,
            mechanism: m.to_string(),
            family: family(m).into(),
            launch_us,
            progress,
            ..Point::default()
        };
        if let Some(made) = made {
            measure(&mut point, &preemptions, made, mhz);
        }
        out.points.push(point);
    }
    for f in ["chimera", "chimera+dirty", "pep", "pep+in-place"] {
        let ps: Vec<&Point> = out
            .points
            .iter()
            .filter(|p| p.family == f && p.requested)
            .collect();
        let n = ps.len().max(1) as f64;
        let switched: Vec<&&Point> = ps.iter().filter(|p| p.selection.switched > 0).collect();
        let ns = switched.len().max(1) as f64;
        out.means.push(FamilyMean {
            family: f.into(),
            points: ps.len() as u32,
            latency_us: ps.iter().map(|p| p.latency_us).sum::<f64>() / n,
            context_per_tb: switched.iter().map(|p| p.context_per_tb).sum::<f64>() / ns,
            base_per_tb: switched.iter().map(|p| p.base_per_tb).sum::<f64>() / ns,
            overhead_us: switched.iter().map(|p| p.overhead_us).sum::<f64>() / ns,
        });
    }
    Ok(out)
}

/// papers/li-pep Figures 5–9 from the results, per kernel and family (means over the
/// launch times, progress values and deadlines where a request was made; for context and
/// overhead, where a TB was switched), with the mean over the kernels that have a value
/// last.
pub fn figures(r: &PepResults) -> Vec<Figure> {
    let families = ["chimera", "chimera+dirty", "pep", "pep+in-place"];
    let mean_of = |k: &str, f: &str, pick: &dyn Fn(&Point) -> f64, switched: bool| {
        let ps: Vec<&Point> = r
            .points
            .iter()
            .filter(|p| {
                p.kernel == k
                    && p.family == f
                    && p.requested
                    && (!switched || p.selection.switched > 0)
            })
            .collect();
        (!ps.is_empty()).then(|| ps.iter().map(|p| pick(p)).sum::<f64>() / ps.len() as f64)
    };
    let per_family = |id: &str,
                      title: &str,
                      y: &str,
                      pick: &dyn Fn(&Point) -> f64,
                      switched: bool,
                      paper: &str| {
        let cells: Vec<Vec<Option<f64>>> = r
            .kernels
            .iter()
            .map(|k| {
                families
                    .iter()
                    .map(|f| mean_of(k, f, pick, switched))
                    .collect()
            })
            .collect();
        let mut rows: Vec<Row> = r
            .kernels
            .iter()
            .zip(&cells)
            .map(|(k, c)| Row {
                category: k.clone(),
                values: c.iter().map(|v| vec![v.unwrap_or(0.0)]).collect(),
            })
            .collect();
        // Over the kernels that have a value (a kernel whose points all came after it
        // finished, or that never switched, has no bar and does not pull the mean down).
        let mean: Vec<Vec<f64>> = (0..families.len())
            .map(|i| {
                let v: Vec<f64> = cells.iter().filter_map(|c| c[i]).collect();
                vec![v.iter().sum::<f64>() / v.len().max(1) as f64]
            })
            .collect();
        rows.push(Row {
            category: "mean".into(),
            values: mean,
        });
        Figure {
            id: id.into(),
            title: format!("{title} (papers/li-pep {id})"),
            y_label: y.into(),
            series: families.iter().map(|s| s.to_string()).collect(),
            parts: vec![y.into()],
            rows,
            paper: paper.into(),
            clip: None,
        }
    };
    // Figure 5: PEP's selection, as fractions of the TBs.
    let selection = {
        let parts = [
            "two checkpoints",
            "single checkpoint",
            "drain",
            "checkpoint at request",
        ];
        let rows = r
            .kernels
            .iter()
            .map(|k| {
                let mut s = [0u32; 4];
                for p in r
                    .points
                    .iter()
                    .filter(|p| &p.kernel == k && p.family == "pep")
                {
                    s[0] += p.selection.two_checkpoints;
                    s[1] += p.selection.single_checkpoint;
                    s[2] += p.selection.pep_drain;
                    s[3] += p.selection.checkpoint_at_request;
                }
                let n = f64::from(s.iter().sum::<u32>().max(1));
                Row {
                    category: k.clone(),
                    values: vec![s.iter().map(|&x| f64::from(x) / n).collect()],
                }
            })
            .collect();
        Figure {
            id: "fig5".into(),
            title: "PEP's choice per TB (papers/li-pep fig5)".into(),
            y_label: "fraction of TBs".into(),
            series: vec!["pep".into()],
            parts: parts.iter().map(|s| s.to_string()).collect(),
            rows,
            paper: "two checkpoints for the six kernels with TBs over 100 µs; drain for short TBs"
                .into(),
            clip: None,
        }
    };
    vec![
        selection,
        per_family(
            "fig6",
            "Preemption latency",
            "µs",
            &|p| p.latency_us,
            false,
            "Chimera 8.9 µs, PEP 4.5 µs, PEP+in-place 3.6 µs; Chimera+dirty -31.8%",
        ),
        per_family(
            "fig7",
            "Context saved per switched TB",
            "bytes",
            &|p| p.context_per_tb,
            true,
            "Chimera+dirty -34.4%; PEP about Chimera's; PEP+in-place -16.2%",
        ),
        per_family(
            "fig8",
            "Base-checkpoint part of the context per switched TB",
            "bytes",
            &|p| p.base_per_tb,
            true,
            "incremental 3.34 KB per TB, 29.4% of the base",
        ),
        per_family(
            "fig9",
            "Saving overhead per switched TB",
            "µs",
            &|p| p.overhead_us,
            true,
            "base checkpoint -37.9% from Chimera; PEP -6.3%; PEP+in-place a further -16.4%",
        ),
    ]
}

/// The points as CSV rows (a header first).
pub fn csv(r: &PepResults) -> String {
    let mut s = String::from(
        "kernel,mechanism,family,launch_us,progress,requested,tbs,latency_us,drained,flushed,switched,two_checkpoints,single_checkpoint,pep_drain,checkpoint_at_request,context_per_tb,base_per_tb,overhead_us\n",
    );
    for p in &r.points {
        let c = &p.selection;
        s.push_str(&format!(
            "{},{},{},{},{},{},{},{:.4},{},{},{},{},{},{},{},{:.1},{:.1},{:.4}\n",
            p.kernel,
            p.mechanism,
            p.family,
            p.launch_us,
            p.progress,
            p.requested,
            p.tbs,
            p.latency_us,
            c.drained,
            c.flushed,
            c.switched,
            c.two_checkpoints,
            c.single_checkpoint,
            c.pep_drain,
            c.checkpoint_at_request,
            p.context_per_tb,
            p.base_per_tb,
            p.overhead_us
        ));
    }
    s
}
