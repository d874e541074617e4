//! The multiprogram evaluation of papers/tanasic-thesis §5.3: random mixes of the suite's
//! host programs share the GPU under each policy and mechanism, and the multiprogram
//! metrics (Eyerman & Eeckhout, as §5.3.1 uses them) compare the policies.
//!
//! **Method (§5.3.1).** A mix of `n` processes is drawn from the benchmark set with a
//! seeded generator ([`mixes`]). Every process runs its program again when it completes
//! (replay, [`workload::Setup::replay`]), until each has completed at least `replay` runs
//! (the thesis: 3); only completed runs count, and a process's turnaround is the mean
//! over them. Each benchmark's isolated turnaround comes from one run alone, measured
//! once and reused by every mix; that run also gives its Table 5.2 rows and its classes
//! ([`crate::benchmarks::classify`]: thirds of the suite, by the mean time of a launch
//! (Class 1, a program taking its longest kernel's class, as the thesis groups
//! "benchmarks with at least one very long kernel") and by the program's time (Class 2)).
//!
//! **Runs of a mix.** Process 0 is the mix's high-priority process (§5.3.2: "one process has
//! higher priority than the rest"; the generator makes every benchmark the high-priority
//! one equally often). Each mix runs under:
//! * `fcfs`: the non-prioritized baseline (copy engines FCFS);
//! * `npq`, `ppq-exclusive/{cs,drain}` and `ppq-shared/{cs,drain}`: process 0 has priority
//!   1, the others 0, and the copy engines use the configured policy (the thesis: priority,
//!   "the scheduling policy in the data transfer engine is always NPQ");
//! * `dss/{cs,drain}`: equal priorities, equal sharing (§5.3.4), copy engines FCFS.
//!
//! `cs` is the context switch (the thesis's save of the whole context, BASELINE); `drain`
//! waits for the running TBs.
//!
//! **Figures.** 5.4: the high-priority process's NTT under FCFS over its NTT under NPQ and
//! exclusive PPQ, by its Class 1; 5.5: STP under NPQ over STP under PPQ (exclusive and
//! shared); 5.6: each process's NTT under FCFS over under DSS, by Class 2; 5.7: every
//! mix's ANTT under FCFS and DSS, each line sorted; 5.8: fairness under DSS over under
//! FCFS, and STP under FCFS over under DSS. Averages are arithmetic means over mixes (and
//! processes), as the thesis reports them.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use gpu::config::GpuConfig;
use preempt::MechanismKind;
use sched::{PolicyKind, PpqAccess};
use serde::Serialize;
use suite::Size;
use workload::report::Metrics;
use workload::scenario::{CopyPolicy, Process};
use workload::{RunError, RunRecord, System};

use crate::benchmarks::{self, Class};
use crate::figures::{Figure, Row};

/// How a mix's processes are drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Balance {
    /// Uniformly, without repeating a benchmark in a mix.
    Random,
    /// The classes (Class 2) in turn, starting from the high-priority process's class, so
    /// a mix holds as many of each class as its size allows.
    Classes,
}

/// The experiment's setting.
#[derive(Clone)]
pub struct MultiprogramConfig {
    pub gpu: GpuConfig,
    /// The benchmark set: suite host programs.
    pub benchmarks: Vec<&'static dyn suite::Kernel>,
    pub size: Size,
    /// Processes per mix (the thesis: 2, 4, 6, 8); each at most the benchmark count.
    pub procs: Vec<usize>,
    /// Mixes per process count.
    pub mixes: usize,
    pub seed: u64,
    pub balance: Balance,
    /// Runs every process completes (the thesis: 3).
    pub replay: u32,
    /// The context-switch mechanism (`cs`).
    pub switch: MechanismKind,
    /// The copy engines' policy in the prioritized runs.
    pub priority_copies: CopyPolicy,
    /// The runs of every mix ([`RUNS`] by default; [`parse_runs`]).
    pub runs: Vec<&'static str>,
    pub threads: usize,
    /// Core cycles one run may take; warp instructions one launch may execute in all
    /// (`None`: the progress rule of `gpu::limits`).
    pub max_cycles: u64,
    pub instruction_limit: Option<u64>,
}

/// The default benchmark set: ten suite programs, as the thesis uses ten Parboil
/// benchmarks, whose kernels take a good share of their run at `small` (the suite's small
/// programs spend most of their time on PCIe copies) and spread over the three classes:
/// by program time gemm, hotspot and kmeans are the shortest, branchy, warpred and bfs
/// (20 launches) the longest; by time per TB, from under 2 µs (hotspot, bfs) to over 130
/// µs (branchy), so draining and switching differ. `mandel` is left out: a persistent
/// kernel, which the thesis's benchmarks do not have.
pub const DEFAULT_BENCHMARKS: [&str; 10] = [
    "gemm",
    "hotspot",
    "kmeans",
    "dct8",
    "conv2d",
    "bitonic",
    "pathfinder",
    "branchy",
    "warpred",
    "bfs",
];

/// Mixes per process count by default: 2, so each count makes two benchmarks the
/// high-priority process (each count draws its own seeded permutation). The thesis does not
/// give its number of workloads. 10 per count (every benchmark high-priority once per count)
/// was stopped after 57 minutes on the 2-core machine, and 5 took 37.6 CPU minutes (41 wall)
/// with 8 runs a mix, because a run's cost grows with its process count twice over (more
/// processes, and a longer run until the slowest has completed `replay` runs): one
/// 8-process mix's eight runs took about 110 s of CPU. 2 keeps the thesis's benchmark set
/// size, process counts, replay and policies, and fits the experiment, the inference-tail
/// table included, in the 30 minutes (BENCHMARKS.md); `--mixes 5` or `--mixes 10`
/// give more of the round robin.
pub const DEFAULT_MIXES: usize = 2;

impl MultiprogramConfig {
    /// The default experiment on `gpu`: [`DEFAULT_BENCHMARKS`] at `small`, 2 to 8
    /// processes, [`DEFAULT_MIXES`] mixes each, replay 3.
    pub fn default_on(gpu: GpuConfig) -> MultiprogramConfig {
        MultiprogramConfig {
            gpu,
            benchmarks: DEFAULT_BENCHMARKS
                .iter()
                .map(|n| suite::by_name(n).expect("a suite kernel"))
                .collect(),
            size: Size::Small,
            procs: vec![2, 4, 6, 8],
            mixes: DEFAULT_MIXES,
            seed: 1,
            balance: Balance::Classes,
            replay: 3,
            switch: MechanismKind::Baseline,
            priority_copies: CopyPolicy::Priority,
            runs: RUNS.to_vec(),
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            max_cycles: 1 << 34,
            instruction_limit: None,
        }
    }

    /// Runs in all: one alone per benchmark, and [`MultiprogramConfig::runs`] per mix.
    pub fn total_runs(&self) -> usize {
        self.benchmarks.len() + self.procs.len() * self.mixes * self.runs.len()
    }
}

/// The runs of every mix by default, by name (see the module's header): the thesis's.
pub const RUNS: [&str; 8] = [
    "fcfs",
    "npq",
    "ppq-exclusive/cs",
    "ppq-exclusive/drain",
    "ppq-shared/cs",
    "ppq-shared/drain",
    "dss/cs",
    "dss/drain",
];

/// Today's NVIDIA sharing modes, runs a mix may add ([`MultiprogramConfig::runs`]):
/// `time-slice/cs` (the driver's round robin between contexts, 1 ms slices
/// ([`crate::inference::DRIVER_SLICE_US`]), context switch), `mps` (every client may use
/// every SM), `mig` (one instance per process, SMs only) and `stream-priority` (the
/// processes as host threads of one application in one context, process 0 on a stream of
/// higher priority; [`workload::Setup::one_context`]). Only `stream-priority` prioritizes
/// process 0: the others have no notion of priority.
pub const NVIDIA_RUNS: [&str; 4] = ["time-slice/cs", "mps", "mig", "stream-priority"];

/// Every run a mix may have.
pub fn known_runs() -> impl Iterator<Item = &'static str> {
    RUNS.iter().chain(&NVIDIA_RUNS).copied()
}

/// How a run is set up: policy, whether process 0 is prioritized, whether it preempts by
/// context switch (else draining), and whether the processes share one context.
fn run_kind(name: &str) -> (PolicyKind, bool, bool, bool) {
    let ppq = |access| PolicyKind::Ppq { access };
    match name {
        "fcfs" => (PolicyKind::Fcfs, false, false, false),
        "npq" => (PolicyKind::Npq, true, false, false),
        "ppq-exclusive/cs" => (ppq(PpqAccess::Exclusive), true, true, false),
        "ppq-exclusive/drain" => (ppq(PpqAccess::Exclusive), true, false, false),
        "ppq-shared/cs" => (ppq(PpqAccess::Shared), true, true, false),
        "ppq-shared/drain" => (ppq(PpqAccess::Shared), true, false, false),
        "dss/cs" => (PolicyKind::Dss { tokens: None }, false, true, false),
        "dss/drain" => (PolicyKind::Dss { tokens: None }, false, false, false),
        "time-slice/cs" => (
            PolicyKind::TimeSlice {
                slice_us: Some(crate::inference::DRIVER_SLICE_US),
            },
            false,
            true,
            false,
        ),
        "mps" => (PolicyKind::Mps { percentage: None }, false, false, false),
        "mig" => (PolicyKind::Mig { instances: None }, false, false, false),
        "stream-priority" => (PolicyKind::Fcfs, true, false, true),
        _ => unreachable!("a run of known_runs"),
    }
}

/// Whether run `name` gives process 0 a higher priority than the others.
pub fn prioritized(name: &str) -> bool {
    known_runs().any(|r| r == name) && run_kind(name).1
}

/// The mix runs named by a comma-separated list (`default`: [`RUNS`]; `nvidia`:
/// [`NVIDIA_RUNS`]; `all`: both), each once, in the order of [`known_runs`]. FCFS is always
/// among them: every figure compares a run with it (without it they would read 0).
pub fn parse_runs(list: &str) -> Result<Vec<&'static str>, String> {
    let mut want = Vec::new();
    for w in list.split(',').map(str::trim).filter(|w| !w.is_empty()) {
        match w {
            "default" => want.extend(RUNS),
            "nvidia" => want.extend(NVIDIA_RUNS),
            "all" => want.extend(known_runs()),
            _ => match known_runs().find(|&r| r == w) {
                Some(r) => want.push(r),
                None => {
                    return Err(format!(
                        "no run `{w}` (runs: {}; or default, nvidia, all)",
                        known_runs().collect::<Vec<_>>().join(", ")
                    ))
                }
            },
        }
    }
    if want.is_empty() {
        return Err("no run named".into());
    }
    want.push("fcfs");
    Ok(known_runs().filter(|r| want.contains(r)).collect())
}

/// A benchmark alone: its isolated turnaround and its classes.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Benchmark {
    pub name: String,
    /// Its program's turnaround alone, µs.
    pub alone_us: f64,
    /// Class 1 (its longest kernel's class by the mean time of a launch) and Class 2 (by
    /// the program's time).
    pub class_kernel: Class,
    pub class_program: Class,
}

/// One mix: its process count, its number among the mixes of that count, and its
/// benchmarks (indices into [`MultiprogramResults::benchmarks`]; the first is the
/// high-priority process of the prioritized runs).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Mix {
    pub procs: usize,
    pub index: usize,
    pub members: Vec<usize>,
}

/// One run of a mix.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MixRun {
    /// Index into [`MultiprogramResults::mixes`], and the run's name ([`RUNS`]).
    pub mix: usize,
    pub run: String,
    /// Per process: completed runs, their mean turnaround (µs) and its NTT.
    pub completed: Vec<usize>,
    pub turnaround_us: Vec<f64>,
    pub ntt: Vec<f64>,
    pub antt: f64,
    pub stp: f64,
    pub fairness: f64,
    /// Every completed run verified against its CPU reference.
    pub verified: bool,
    pub cycles: u64,
    /// TBs the mechanism took off SMs, and SMs requested.
    pub preempted_tbs: u64,
    pub sm_requests: u64,
}

/// The experiment's results.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MultiprogramResults {
    pub gpu: String,
    pub size: String,
    pub seed: u64,
    pub replay: u32,
    pub switch: String,
    pub priority_copies: CopyPolicy,
    pub benchmarks: Vec<Benchmark>,
    pub mixes: Vec<Mix>,
    /// Every run of every mix, mix by mix in the order of [`MultiprogramConfig::runs`].
    pub runs: Vec<MixRun>,
}

impl MultiprogramResults {
    pub fn all_verified(&self) -> bool {
        self.runs.iter().all(|r| r.verified)
    }

    /// The run `name` of mix `mix`.
    pub fn run(&self, mix: usize, name: &str) -> Option<&MixRun> {
        self.runs.iter().find(|r| r.mix == mix && r.run == name)
    }
}

/// How the experiment went wrong.
#[derive(Debug, thiserror::Error)]
pub enum MultiprogramError {
    #[error("{what}: {error}")]
    Run { what: String, error: RunError },
    #[error("{0}")]
    Config(String),
}

/// Mixes of `n` processes drawn from benchmarks of classes `classes` (Class 2 of each),
/// `count` of them, from `seed`: deterministic for a seed. Mix `i`'s first member (its
/// high-priority process) is the `i`-th of a seeded permutation of the benchmarks, taken
/// round robin, so every benchmark is the high-priority one equally often when `count` is
/// a multiple of their number; the other members are drawn without repeating one.
pub fn mixes(
    classes: &[Class],
    n: usize,
    count: usize,
    seed: u64,
    balance: Balance,
) -> Result<Vec<Vec<usize>>, String> {
    let b = classes.len();
    if n == 0 || n > b {
        return Err(format!(
            "a mix of {n} processes needs 1..={b} benchmarks to draw from"
        ));
    }
    // One stream per process count: adding a count leaves the others' mixes alone.
    let mut rng = suite::Rng::for_kernel("multiprogram", seed ^ (n as u64).rotate_left(32));
    let mut below = |k: usize| rng.below(k as u32) as usize;
    let mut first: Vec<usize> = (0..b).collect();
    for i in (1..b).rev() {
        first.swap(i, below(i + 1));
    }
    let order = [Class::Short, Class::Medium, Class::Long];
    let mut out = Vec::with_capacity(count);
    for i in 0..count {
        let hp = first[i % b];
        let mut members = vec![hp];
        let mut left: Vec<usize> = (0..b).filter(|&x| x != hp).collect();
        let start = order.iter().position(|&c| c == classes[hp]).unwrap_or(0);
        for j in 1..n {
            let pool: Vec<usize> = match balance {
                Balance::Random => (0..left.len()).collect(),
                Balance::Classes => {
                    // The class whose turn it is, or the next one with members left.
                    (0..3)
                        .map(|k| order[(start + j + k) % 3])
                        .map(|c| {
                            (0..left.len())
                                .filter(|&x| classes[left[x]] == c)
                                .collect::<Vec<_>>()
                        })
                        .find(|p| !p.is_empty())
                        .expect("n ≤ benchmarks, so some are left")
                }
            };
            let pick = pool[below(pool.len())];
            members.push(left.remove(pick));
        }
        out.push(members);
    }
    Ok(out)
}

/// The metrics of one run: per process its mean turnaround over its completed runs (µs)
/// against `alone_us` (the same order as the record's processes).
pub fn metrics_of(r: &RunRecord, alone_us: &[f64]) -> (Vec<f64>, Vec<f64>, Metrics) {
    let together: Vec<f64> = r
        .processes
        .iter()
        .map(|p| {
            p.mean_turnaround_fs().unwrap_or(f64::INFINITY) / workload::system::FS_PER_US as f64
        })
        .collect();
    let ntt = together.iter().zip(alone_us).map(|(t, a)| t / a).collect();
    let m = Metrics::of(alone_us, &together);
    (together, ntt, m)
}

/// The arithmetic mean of `values` (`None` for none).
fn mean(values: impl IntoIterator<Item = f64>) -> Option<f64> {
    let (n, s) = values
        .into_iter()
        .fold((0usize, 0.0), |(n, s), v| (n + 1, s + v));
    (n > 0).then(|| s / n as f64)
}

/// Runs `jobs` over `threads` threads, each result at its job's index (so the results do not
/// depend on the thread count); stops handing out work after the first error.
fn run_jobs<J: Sync, R: Send>(
    threads: usize,
    jobs: &[J],
    one: &(dyn Fn(&J) -> Result<R, MultiprogramError> + Sync),
    done: &(dyn Fn(&J) + Sync),
) -> Result<Vec<R>, MultiprogramError> {
    run_jobs_on(threads, &crate::worker_thread, jobs, one, done)
}

/// [`run_jobs`] on threads made by `builder`, through [`crate::on_workers`]: a thread the
/// system refuses leaves its share of the jobs to the others (or to the caller when none
/// starts), never a panic.
fn run_jobs_on<J: Sync, R: Send>(
    threads: usize,
    builder: &dyn Fn() -> std::thread::Builder,
    jobs: &[J],
    one: &(dyn Fn(&J) -> Result<R, MultiprogramError> + Sync),
    done: &(dyn Fn(&J) + Sync),
) -> Result<Vec<R>, MultiprogramError> {
    let results: Vec<Mutex<Option<Result<R, MultiprogramError>>>> =
        jobs.iter().map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    crate::on_workers(threads.clamp(1, jobs.len().max(1)), builder, &|| loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        let Some(job) = jobs.get(i) else {
            return;
        };
        let r = one(job);
        let failed = r.is_err();
        *results[i].lock().expect("no thread panics holding it") = Some(r);
        done(job);
        if failed {
            next.store(jobs.len(), Ordering::Relaxed);
        }
    });
    let mut out = Vec::with_capacity(jobs.len());
    for r in results {
        // A job not run (after another failed) is skipped: the failure is reported.
        if let Some(r) = r.into_inner().expect("no thread panics holding it") {
            out.push(r?);
        }
    }
    if out.len() < jobs.len() {
        return Err(MultiprogramError::Config("a run failed".into()));
    }
    Ok(out)
}

fn suite_process(
    name: String,
    kernel: &'static dyn suite::Kernel,
    size: Size,
    priority: i32,
) -> Process {
    Process {
        name,
        priority,
        ..Process::suite(kernel, size, 1)
    }
}

/// Runs the experiment; `progress(done, total, what)` after each run.
pub fn run(
    c: &MultiprogramConfig,
    progress: &(dyn Fn(usize, usize, &str) + Sync),
) -> Result<MultiprogramResults, MultiprogramError> {
    for &n in &c.procs {
        if n == 0 || n > c.benchmarks.len() {
            return Err(MultiprogramError::Config(format!(
                "{n} processes per mix: each mix draws distinct benchmarks from the {} of the set",
                c.benchmarks.len()
            )));
        }
    }
    if c.replay == 0 {
        return Err(MultiprogramError::Config(
            "replay must be at least 1".into(),
        ));
    }
    let total = c.total_runs();
    let count = AtomicUsize::new(0);
    let tick = |what: &str| progress(count.fetch_add(1, Ordering::Relaxed) + 1, total, what);

    // Every benchmark alone, once: its isolated time and its Table 5.2 rows.
    let alone = run_jobs(
        c.threads,
        &c.benchmarks,
        &|&k| {
            let setup = crate::suite_setup(
                &c.gpu,
                PolicyKind::Fcfs,
                MechanismKind::Drain,
                c.max_cycles,
                c.instruction_limit,
            );
            let p = suite_process(k.name().to_string(), k, c.size, 0);
            let r = System::new(setup, &[p])
                .and_then(|s| s.run(&mut |_| {}))
                .map_err(|error| MultiprogramError::Run {
                    what: format!("{} alone", k.name()),
                    error,
                })?;
            let us = r.processes[0].mean_turnaround_fs().unwrap_or(0.0)
                / workload::system::FS_PER_US as f64;
            let verified = r.processes[0].verdict.as_ref().is_some_and(|v| v.verified);
            if !verified {
                return Err(MultiprogramError::Config(format!(
                    "{} alone did not verify",
                    k.name()
                )));
            }
            Ok((us, benchmarks::rows_of(&c.gpu, k.name(), &r)))
        },
        &|k| tick(&format!("{} alone", k.name())),
    )?;
    let mut rows: Vec<benchmarks::Row> = alone.iter().flat_map(|(_, r)| r.clone()).collect();
    benchmarks::classify(&mut rows);
    let bench: Vec<Benchmark> = c
        .benchmarks
        .iter()
        .zip(&alone)
        .map(|(k, (us, _))| {
            let mine = rows.iter().filter(|r| r.program == k.name());
            Benchmark {
                name: k.name().to_string(),
                alone_us: *us,
                class_kernel: mine
                    .clone()
                    .map(|r| r.class_kernel)
                    .max()
                    .unwrap_or(Class::Short),
                class_program: mine.map(|r| r.class_program).max().unwrap_or(Class::Short),
            }
        })
        .collect();

    // The mixes, then every run of every mix; the biggest mixes first, as they take longest.
    let classes: Vec<Class> = bench.iter().map(|b| b.class_program).collect();
    let mut all_mixes = Vec::new();
    for &n in &c.procs {
        let drawn =
            mixes(&classes, n, c.mixes, c.seed, c.balance).map_err(MultiprogramError::Config)?;
        all_mixes.extend(drawn.into_iter().enumerate().map(|(index, members)| Mix {
            procs: n,
            index,
            members,
        }));
    }
    if let Some(r) = c.runs.iter().find(|r| !known_runs().any(|k| k == **r)) {
        return Err(MultiprogramError::Config(format!("no run `{r}`")));
    }
    let mut jobs: Vec<(usize, &str)> = (0..all_mixes.len())
        .flat_map(|m| c.runs.iter().map(move |&r| (m, r)))
        .collect();
    jobs.sort_by_key(|&(m, _)| std::cmp::Reverse(all_mixes[m].procs));
    let runs = run_jobs(
        c.threads,
        &jobs,
        &|&(m, name)| one_mix_run(c, &bench, &all_mixes[m], m, name),
        &|&(m, name)| {
            let mix = &all_mixes[m];
            tick(&format!(
                "{} processes, mix {}: {name}",
                mix.procs, mix.index
            ))
        },
    )?;
    // Mix by mix, in the order of the configured runs.
    let mut runs: Vec<MixRun> = runs;
    runs.sort_by_key(|r| (r.mix, c.runs.iter().position(|&x| x == r.run)));
    Ok(MultiprogramResults {
        gpu: c.gpu.name.clone(),
        size: format!("{:?}", c.size).to_lowercase(),
        seed: c.seed,
        replay: c.replay,
        switch: c.switch.to_string(),
        priority_copies: c.priority_copies,
        benchmarks: bench,
        mixes: all_mixes,
        runs,
    })
}

fn one_mix_run(
    c: &MultiprogramConfig,
    bench: &[Benchmark],
    mix: &Mix,
    m: usize,
    name: &str,
) -> Result<MixRun, MultiprogramError> {
    let (policy, prioritized, cs, one_context) = run_kind(name);
    let mechanism = if cs { c.switch } else { MechanismKind::Drain };
    let mut setup =
        crate::suite_setup(&c.gpu, policy, mechanism, c.max_cycles, c.instruction_limit);
    setup.snapshot = false;
    setup.replay = Some(c.replay);
    setup.one_context = one_context;
    if prioritized {
        setup.copy_policy = c.priority_copies;
    }
    let processes: Vec<Process> = mix
        .members
        .iter()
        .enumerate()
        .map(|(i, &b)| {
            let prio = i32::from(prioritized && i == 0);
            suite_process(bench[b].name.clone(), c.benchmarks[b], c.size, prio)
        })
        .collect();
    let r = System::new(setup, &processes)
        .and_then(|s| s.run(&mut |_| {}))
        .map_err(|error| MultiprogramError::Run {
            what: format!("{} processes, mix {}, {name}", mix.procs, mix.index),
            error,
        })?;
    let alone: Vec<f64> = mix.members.iter().map(|&b| bench[b].alone_us).collect();
    let (turnaround_us, ntt, metrics) = metrics_of(&r, &alone);
    let summary = workload::report::PreemptionSummary::of(name, &r.preemptions, r.core_period_fs);
    Ok(MixRun {
        mix: m,
        run: name.to_string(),
        completed: r.processes.iter().map(|p| p.runs.len()).collect(),
        turnaround_us,
        ntt,
        antt: metrics.antt,
        stp: metrics.stp,
        fairness: metrics.fairness,
        verified: r
            .processes
            .iter()
            .all(|p| !p.runs.is_empty() && p.runs.iter().all(|x| x.verdict.verified)),
        cycles: r.cycles,
        preempted_tbs: summary.switched + summary.flushed + summary.drained,
        sm_requests: summary.requests,
    })
}

/// The process counts of the results, in order.
fn counts(r: &MultiprogramResults) -> Vec<usize> {
    let mut n: Vec<usize> = r.mixes.iter().map(|m| m.procs).collect();
    n.dedup();
    n
}

const CLASSES: [Class; 3] = [Class::Short, Class::Medium, Class::Long];

fn class_name(c: Class) -> &'static str {
    match c {
        Class::Short => "SHORT",
        Class::Medium => "MEDIUM",
        Class::Long => "LONG",
    }
}

/// Rows per process count and class, and `all`: `value(mix, series)` gives the samples
/// of a mix for a series, each with the class it counts for.
fn class_rows(
    r: &MultiprogramResults,
    series: usize,
    value: &dyn Fn(usize, usize) -> Vec<(Class, f64)>,
) -> Vec<Row> {
    let mut rows = Vec::new();
    for n in counts(r) {
        let mixes: Vec<usize> = (0..r.mixes.len())
            .filter(|&m| r.mixes[m].procs == n)
            .collect();
        let samples: Vec<Vec<(Class, f64)>> = (0..series)
            .map(|s| mixes.iter().flat_map(|&m| value(m, s)).collect())
            .collect();
        let groups = CLASSES
            .iter()
            .map(|&c| (class_name(c), Some(c)))
            .chain([("all", None)]);
        for (label, class) in groups {
            let means: Vec<Option<f64>> = samples
                .iter()
                .map(|v| {
                    mean(
                        v.iter()
                            .filter(|x| class.is_none_or(|c| x.0 == c))
                            .map(|x| x.1),
                    )
                })
                .collect();
            if means.iter().all(Option::is_some) {
                rows.push(Row {
                    category: format!("{n}p {label}"),
                    values: means.into_iter().map(|v| vec![v.unwrap_or(0.0)]).collect(),
                });
            }
        }
    }
    rows
}

/// Rows per process count: the mean over its mixes of `value(mix, series)`.
fn count_rows(
    r: &MultiprogramResults,
    series: usize,
    value: &dyn Fn(usize, usize) -> Option<f64>,
) -> Vec<Row> {
    counts(r)
        .into_iter()
        .map(|n| Row {
            category: format!("{n}p"),
            values: (0..series)
                .map(|s| {
                    let v = (0..r.mixes.len())
                        .filter(|&m| r.mixes[m].procs == n)
                        .filter_map(|m| value(m, s));
                    vec![mean(v).unwrap_or(0.0)]
                })
                .collect(),
        })
        .collect()
}

fn figure(id: &str, title: &str, y: &str, series: &[&str], rows: Vec<Row>, paper: &str) -> Figure {
    Figure {
        id: id.into(),
        title: title.into(),
        y_label: y.into(),
        series: series.iter().map(|s| s.to_string()).collect(),
        parts: vec![String::new()],
        rows,
        paper: paper.into(),
        clip: None,
    }
}

/// Figures 5.4–5.8 from the results.
pub fn figures(r: &MultiprogramResults) -> Vec<Figure> {
    let get = |m: usize, name: &str| r.run(m, name);
    // 5.4: the high-priority process's NTT without priority over with it.
    let prio = ["npq", "ppq-exclusive/cs", "ppq-exclusive/drain"];
    let f54 = class_rows(r, prio.len(), &|m, s| {
        let (Some(base), Some(run)) = (get(m, "fcfs"), get(m, prio[s])) else {
            return Vec::new();
        };
        let hp = r.mixes[m].members[0];
        vec![(r.benchmarks[hp].class_kernel, base.ntt[0] / run.ntt[0])]
    });
    // 5.5: STP under NPQ over STP under each PPQ.
    let ppq = [
        "ppq-exclusive/cs",
        "ppq-exclusive/drain",
        "ppq-shared/cs",
        "ppq-shared/drain",
    ];
    let f55 = count_rows(r, ppq.len(), &|m, s| {
        Some(get(m, "npq")?.stp / get(m, ppq[s])?.stp)
    });
    // 5.6: every process's NTT under FCFS over under DSS, by Class 2.
    let dss = ["dss/cs", "dss/drain"];
    let f56 = class_rows(r, dss.len(), &|m, s| {
        let (Some(base), Some(run)) = (get(m, "fcfs"), get(m, dss[s])) else {
            return Vec::new();
        };
        r.mixes[m]
            .members
            .iter()
            .enumerate()
            .map(|(i, &b)| (r.benchmarks[b].class_program, base.ntt[i] / run.ntt[i]))
            .collect()
    });
    let f58a = count_rows(r, dss.len(), &|m, s| {
        Some(get(m, dss[s])?.fairness / get(m, "fcfs")?.fairness)
    });
    let f58b = count_rows(r, dss.len(), &|m, s| {
        Some(get(m, "fcfs")?.stp / get(m, dss[s])?.stp)
    });
    let mut out = vec![
        figure(
            "fig5_4",
            "Figure 5.4: high-priority NTT improvement over FCFS, by Class 1",
            "NTT(fcfs) / NTT(policy)",
            &["npq", "ppq cs", "ppq drain"],
            f54,
            "PPQ-CS 2x-15.6x, PPQ-drain 1.6x-6x; NPQ 1.1x-1.6x (4+ processes)",
        ),
        figure(
            "fig5_5",
            "Figure 5.5: STP degradation of PPQ over NPQ",
            "STP(npq) / STP(ppq)",
            &[
                "exclusive cs",
                "exclusive drain",
                "shared cs",
                "shared drain",
            ],
            f55,
            "exclusive: CS 1.08x-1.12x, drain 1.09x-1.38x; shared higher",
        ),
        figure(
            "fig5_6",
            "Figure 5.6: NTT improvement of DSS over FCFS, by Class 2",
            "NTT(fcfs) / NTT(dss)",
            &["dss cs", "dss drain"],
            f56,
            "average CS 1.5x-2x, drain 1.4x-1.65x",
        ),
    ];
    // 5.7: each line sorted by increasing ANTT, one figure per process count.
    for n in counts(r) {
        let mixes: Vec<usize> = (0..r.mixes.len())
            .filter(|&m| r.mixes[m].procs == n)
            .collect();
        let lines: Vec<Vec<f64>> = ["fcfs", "dss/cs", "dss/drain"]
            .iter()
            .map(|name| {
                let mut v: Vec<f64> = mixes
                    .iter()
                    .filter_map(|&m| Some(get(m, name)?.antt))
                    .collect();
                v.sort_by(f64::total_cmp);
                v
            })
            .collect();
        let rows = (0..mixes.len())
            .map(|i| Row {
                category: format!("#{}", i + 1),
                values: lines
                    .iter()
                    .map(|l| vec![l.get(i).copied().unwrap_or(0.0)])
                    .collect(),
            })
            .collect();
        out.push(figure(
            &format!("fig5_7_{n}p"),
            &format!("Figure 5.7: ANTT of every {n}-process mix, each line sorted"),
            "ANTT",
            &["fcfs", "dss cs", "dss drain"],
            rows,
            "DSS below FCFS for ~20% of 2-process mixes, ~70% at 4, almost all at 6 and 8",
        ));
    }
    out.push(figure(
        "fig5_8a",
        "Figure 5.8a: fairness improvement of DSS over FCFS",
        "fairness(dss) / fairness(fcfs)",
        &["dss cs", "dss drain"],
        f58a,
        "CS 1.1x-3.35x, drain 1.05x-2.7x",
    ));
    out.push(figure(
        "fig5_8b",
        "Figure 5.8b: STP degradation of DSS over FCFS",
        "STP(fcfs) / STP(dss)",
        &["dss cs", "dss drain"],
        f58b,
        "CS 1.06x-1.34x, drain 1.08x-1.5x",
    ));
    // Today's NVIDIA modes, where the runs have them: against FCFS, per process count.
    let modes: Vec<&str> = NVIDIA_RUNS
        .iter()
        .copied()
        .filter(|n| r.runs.iter().any(|x| x.run == *n))
        .collect();
    if !modes.is_empty() {
        let ratio = |f: &'static dyn Fn(&MixRun, &MixRun) -> f64| {
            count_rows(r, modes.len(), &|m, s| {
                Some(f(get(m, "fcfs")?, get(m, modes[s])?))
            })
        };
        let hp = ratio(&|base, run| base.ntt[0] / run.ntt[0]);
        let antt = ratio(&|base, run| base.antt / run.antt);
        let stp = ratio(&|base, run| run.stp / base.stp);
        let nothing = "not in the thesis (NVIDIA's modes postdate it)";
        out.push(figure(
            "nvidia_hp",
            "NVIDIA modes: process 0's NTT improvement over FCFS (prioritized only under stream-priority)",
            "NTT0(fcfs) / NTT0(mode)",
            &modes,
            hp,
            nothing,
        ));
        out.push(figure(
            "nvidia_antt",
            "NVIDIA modes: ANTT improvement over FCFS",
            "ANTT(fcfs) / ANTT(mode)",
            &modes,
            antt,
            nothing,
        ));
        out.push(figure(
            "nvidia_stp",
            "NVIDIA modes: STP against FCFS",
            "STP(mode) / STP(fcfs)",
            &modes,
            stp,
            nothing,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use workload::system::{ProcessRecord, FS_PER_US};
    use workload::CompletedRun;

    const C: [Class; 9] = [
        Class::Short,
        Class::Short,
        Class::Short,
        Class::Medium,
        Class::Medium,
        Class::Medium,
        Class::Long,
        Class::Long,
        Class::Long,
    ];

    #[test]
    fn jobs_run_on_the_caller_when_every_spawn_is_refused() {
        let jobs: Vec<u32> = (0..12).collect();
        let ran = AtomicUsize::new(0);
        let one = |&j: &u32| -> Result<u32, MultiprogramError> { Ok(j * j) };
        let done = |_: &u32| {
            ran.fetch_add(1, Ordering::Relaxed);
        };
        // A stack larger than the address space: every spawn fails (`Scope::spawn`
        // panicked on it).
        let refused = || std::thread::Builder::new().stack_size(1 << 60);
        let out = run_jobs_on(4, &refused, &jobs, &one, &done).expect("no job fails");
        assert_eq!(out, jobs.iter().map(|j| j * j).collect::<Vec<_>>());
        assert_eq!(ran.load(Ordering::Relaxed), 12);
        // The same on threads that start, and a failure still stops the queue.
        assert_eq!(run_jobs(4, &jobs, &one, &done).expect("no job fails"), out);
        let fail = |&j: &u32| -> Result<u32, MultiprogramError> {
            if j == 0 {
                Err(MultiprogramError::Config("job 0".into()))
            } else {
                Ok(j)
            }
        };
        assert!(run_jobs_on(4, &refused, &jobs, &fail, &done).is_err());
    }

    #[test]
    fn mixes_are_deterministic_per_seed_and_vary_with_it() {
        for balance in [Balance::Random, Balance::Classes] {
            let a = mixes(&C, 4, 18, 7, balance).unwrap();
            assert_eq!(a, mixes(&C, 4, 18, 7, balance).unwrap());
            assert_ne!(a, mixes(&C, 4, 18, 8, balance).unwrap());
            // Another process count draws from a stream of its own.
            assert_ne!(a[0], mixes(&C, 5, 1, 7, balance).unwrap()[0][..4]);
            for m in &a {
                assert_eq!(m.len(), 4);
                let mut d = m.clone();
                d.sort();
                d.dedup();
                assert_eq!(d.len(), 4, "a benchmark twice in {m:?}");
            }
            // Every benchmark is the high-priority process equally often.
            let mut hp = [0; 9];
            for m in &a {
                hp[m[0]] += 1;
            }
            assert_eq!(hp, [2; 9], "{balance:?}");
        }
        assert!(mixes(&C, 10, 1, 1, Balance::Random).is_err());
        assert!(mixes(&C, 0, 1, 1, Balance::Random).is_err());
    }

    #[test]
    fn runs_are_named_on_the_command_line() {
        assert_eq!(parse_runs("default").unwrap(), RUNS.to_vec());
        // FCFS, the figures' baseline, comes with every list.
        let nvidia: Vec<&str> = std::iter::once("fcfs").chain(NVIDIA_RUNS).collect();
        assert_eq!(parse_runs("nvidia").unwrap(), nvidia);
        assert_eq!(parse_runs("mig").unwrap(), vec!["fcfs", "mig"]);
        assert_eq!(
            parse_runs("all").unwrap().len(),
            RUNS.len() + NVIDIA_RUNS.len()
        );
        // Each once, in the order of known_runs, whatever the order written.
        assert_eq!(parse_runs("mig, fcfs,mig").unwrap(), vec!["fcfs", "mig"]);
        let e = parse_runs("fcfs,nope").unwrap_err();
        assert!(
            e.contains("no run `nope`") && e.contains("stream-priority"),
            "{e}"
        );
        assert!(parse_runs(" , ").is_err());
        // Only the prioritized runs give process 0 its priority; of NVIDIA's modes only
        // stream priorities know of one.
        let prio: Vec<&str> = known_runs().filter(|r| prioritized(r)).collect();
        assert_eq!(
            prio,
            vec![
                "npq",
                "ppq-exclusive/cs",
                "ppq-exclusive/drain",
                "ppq-shared/cs",
                "ppq-shared/drain",
                "stream-priority"
            ]
        );
        assert!(!prioritized("nope"));
        // Only stream-priority shares one context.
        assert!(known_runs().all(|r| run_kind(r).3 == (r == "stream-priority")));
    }

    #[test]
    fn balanced_mixes_hold_the_classes_in_turn() {
        for m in mixes(&C, 6, 30, 3, Balance::Classes).unwrap() {
            let mut n = [0; 3];
            for &b in &m {
                n[C[b] as usize] += 1;
            }
            assert_eq!(n, [2, 2, 2], "{m:?}");
        }
        // Five of a class that has three: the others fill in.
        for m in mixes(&C, 7, 9, 3, Balance::Classes).unwrap() {
            let mut n = [0; 3];
            for &b in &m {
                n[C[b] as usize] += 1;
            }
            assert!(n.iter().all(|&k| (2..=3).contains(&k)), "{m:?} {n:?}");
        }
    }

    fn process(name: &str, runs: &[(f64, f64)]) -> ProcessRecord {
        let fs = |us: f64| (us * FS_PER_US as f64) as u64;
        ProcessRecord {
            name: name.into(),
            priority: 0,
            arrival_fs: 0,
            finished_fs: runs.last().map(|r| fs(r.1)),
            verdict: None,
            runs: runs
                .iter()
                .map(|&(a, b)| CompletedRun {
                    requested_fs: fs(a),
                    started_fs: fs(a),
                    finished_fs: fs(b),
                    verdict: workload::program::Verdict {
                        verified: true,
                        detail: String::new(),
                    },
                })
                .collect(),
            requests: false,
        }
    }

    #[test]
    fn metrics_average_the_completed_runs() {
        // A: runs of 20, 30 and 40 µs (mean 30) alone 10: NTT 3. B: 50 and 70 (mean 60),
        // alone 40: NTT 1.5.
        let r = RunRecord {
            processes: vec![
                process("a", &[(0.0, 20.0), (20.0, 50.0), (50.0, 90.0)]),
                process("b", &[(0.0, 50.0), (50.0, 120.0)]),
            ],
            ..RunRecord::default()
        };
        let (t, ntt, m) = metrics_of(&r, &[10.0, 40.0]);
        assert_eq!(t, vec![30.0, 60.0]);
        assert_eq!(ntt, vec![3.0, 1.5]);
        assert_eq!(m.antt, 2.25);
        // STP = 1/3 + 1/1.5 = 1; fairness = (1/3) / (1/1.5) = 0.5.
        assert!((m.stp - 1.0).abs() < 1e-12, "{}", m.stp);
        assert!((m.fairness - 0.5).abs() < 1e-12, "{}", m.fairness);
    }

    /// Results of two 2-process mixes with the metrics given per run.
    fn synthetic() -> MultiprogramResults {
        let bench = |name: &str, k, p| Benchmark {
            name: name.into(),
            alone_us: 10.0,
            class_kernel: k,
            class_program: p,
        };
        let run = |mix, name: &str, ntt: [f64; 2], stp, fairness| MixRun {
            mix,
            run: name.into(),
            completed: vec![3, 3],
            turnaround_us: ntt.iter().map(|x| x * 10.0).collect(),
            ntt: ntt.to_vec(),
            antt: (ntt[0] + ntt[1]) / 2.0,
            stp,
            fairness,
            verified: true,
            cycles: 0,
            preempted_tbs: 0,
            sm_requests: 0,
        };
        let mut runs = Vec::new();
        for (m, k) in [(0, 1.0), (1, 2.0)] {
            runs.push(run(m, "fcfs", [4.0 * k, 2.0], 1.0, 0.5));
            runs.push(run(m, "npq", [2.0 * k, 3.0], 1.0, 0.5));
            runs.push(run(m, "ppq-exclusive/cs", [1.0 * k, 4.0], 0.8, 0.5));
            runs.push(run(m, "ppq-exclusive/drain", [2.0, 4.0], 0.5, 0.5));
            runs.push(run(m, "ppq-shared/cs", [1.0, 4.0], 0.5, 0.5));
            runs.push(run(m, "ppq-shared/drain", [1.0, 4.0], 0.25, 0.5));
            runs.push(run(m, "dss/cs", [2.0, 1.0], 0.5, 1.0));
            runs.push(run(m, "dss/drain", [4.0 * k, 2.0], 2.0, 0.25 * k));
        }
        MultiprogramResults {
            gpu: "t".into(),
            size: "small".into(),
            seed: 0,
            replay: 3,
            switch: "baseline".into(),
            priority_copies: CopyPolicy::Priority,
            benchmarks: vec![
                bench("s", Class::Short, Class::Long),
                bench("l", Class::Long, Class::Short),
            ],
            mixes: vec![
                Mix {
                    procs: 2,
                    index: 0,
                    members: vec![0, 1],
                },
                Mix {
                    procs: 2,
                    index: 1,
                    members: vec![1, 0],
                },
            ],
            runs,
        }
    }

    fn values(f: &Figure, category: &str) -> Vec<f64> {
        let row = f.rows.iter().find(|r| r.category == category).unwrap();
        (0..f.series.len()).map(|s| row.total(s)).collect()
    }

    #[test]
    fn figures_follow_their_definitions_by_hand() {
        let r = synthetic();
        let figs = figures(&r);
        let f = |id: &str| figs.iter().find(|f| f.id == id).unwrap();
        // 5.4: the high-priority process (member 0): mix 0's is SHORT by Class 1, mix 1's
        // LONG. NTT(fcfs)/NTT(run): mix 0: npq 4/2, cs 4/1, drain 4/2; mix 1: 8/4, 8/2, 8/2.
        assert_eq!(values(f("fig5_4"), "2p SHORT"), vec![2.0, 4.0, 2.0]);
        assert_eq!(values(f("fig5_4"), "2p LONG"), vec![2.0, 4.0, 4.0]);
        assert_eq!(values(f("fig5_4"), "2p all"), vec![2.0, 4.0, 3.0]);
        assert!(f("fig5_4").rows.iter().all(|r| r.category != "2p MEDIUM"));
        // 5.5: STP(npq)/STP(ppq) = 1/0.8, 1/0.5, 1/0.5, 1/0.25 in both mixes.
        assert_eq!(values(f("fig5_5"), "2p"), vec![1.25, 2.0, 2.0, 4.0]);
        // 5.6 by Class 2, every process: "s" is LONG, "l" SHORT. dss/cs: mix 0: s 4/2,
        // l 2/1; mix 1 (l first): l 8/2, s 2/1. dss/drain: all 1.
        assert_eq!(values(f("fig5_6"), "2p LONG"), vec![2.0, 1.0]);
        assert_eq!(values(f("fig5_6"), "2p SHORT"), vec![3.0, 1.0]);
        assert_eq!(values(f("fig5_6"), "2p all"), vec![2.5, 1.0]);
        // 5.7: each line sorted: fcfs ANTTs 3 and 5, dss/cs 1.5 and 1.5, drain 3 and 5.
        assert_eq!(values(f("fig5_7_2p"), "#1"), vec![3.0, 1.5, 3.0]);
        assert_eq!(values(f("fig5_7_2p"), "#2"), vec![5.0, 1.5, 5.0]);
        // 5.8: fairness(dss)/fairness(fcfs): cs 2, drain (0.5 + 1)/2; STP(fcfs)/STP(dss):
        // cs 2, drain 0.5.
        assert_eq!(values(f("fig5_8a"), "2p"), vec![2.0, 0.75]);
        assert_eq!(values(f("fig5_8b"), "2p"), vec![2.0, 0.5]);
    }
}
