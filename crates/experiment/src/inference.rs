//! Inference beside batch work: the question REEF, XSched and LithOS ask of real GPUs —
//! how long do latency-critical requests take while a long batch kernel holds the GPU,
//! and what does protecting them cost the batch — asked here of every policy ×
//! mechanism of the framework and of today's NVIDIA sharing modes, on one machine.
//!
//! **Workload.** One batch process (by default `wgemm` at `large`: tensor-core GEMM whose
//! TBs fill every SM of the tensor-core preset for hundreds of µs) and one latency-critical
//! process per request kernel (by default `layernorm`, `softmax` and `attention` at `small`,
//! the suite's transformer-layer kernels), all arriving at 0. Each latency-critical process
//! runs its suite host program once as a warm-up (its setup: inputs copied, launches run,
//! results checked against the CPU reference, [`workload::program::ServedSuite`]) and then
//! serves `requests` seeded Poisson requests, each running the program's launches again on
//! its resident buffers and checked to leave them as the verified warm-up did. So a
//! request's latency is its kernels' wait and run, not PCIe copies (an inference server
//! keeps its weights and activations on the GPU). The requests' mean gap is set from the
//! batch's time alone, so that on average they arrive within the first half of it.
//!
//! **Runs** ([`RUNS`]). The latency-critical processes have priority 1, the batch 0, in
//! every run (a policy that ignores priorities ignores them); the copy engines are first
//! come, first served throughout, so only kernel scheduling differs:
//! * the framework's policies: `fcfs`, `npq`, `ppq-exclusive`, `ppq-shared` and `dss`
//!   (tokens by priority), the preemptive ones with the context switch (`cs`) and with
//!   draining;
//! * NVIDIA's modes: `time-slice` (the driver's round robin between contexts, 1 ms slices,
//!   context switch), `mps` (every client may use every SM: CUDA's default active-thread
//!   percentage, 100) and `mps-50` (50%), `mig` (one instance per process, SMs only) and
//!   `stream-priority` (the processes as host threads of one application in one context,
//!   each on a stream of its priority: TB dispatch ordered, nothing preempted,
//!   [`workload::Setup::one_context`]).
//!
//! Reported per run: the requests' latency (all latency-critical processes' requests
//! together, and per process) as p50, p99 and p99.9 (nearest rank: with fewer than 1000
//! requests p99.9 is the maximum), and the batch's throughput, its time alone over its
//! time in the run (1: unharmed). The batch runs once; requests that arrive after it
//! ends run beside nothing, as they would on a server whose batch job finished.

use gpu::config::GpuConfig;
use preempt::MechanismKind;
use sched::{PolicyKind, PpqAccess};
use serde::Serialize;
use suite::Size;
use workload::arrivals::Arrivals;
use workload::report::Latency;
use workload::scenario::{Process, Program};
use workload::system::FS_PER_US;
use workload::System;

use crate::multiprogram::MultiprogramError;

/// The runs, by name (see the module's header).
pub const RUNS: [&str; 14] = [
    "fcfs",
    "npq",
    "ppq-exclusive/cs",
    "ppq-exclusive/drain",
    "ppq-shared/cs",
    "ppq-shared/drain",
    "dss/cs",
    "dss/drain",
    "time-slice/cs",
    "mps",
    "mps-50",
    "mig",
    "stream-priority",
    "alone",
];

/// The time slice of the `time-slice` run, µs: NVIDIA's driver switches time-sliced
/// contexts about every millisecond.
pub const DRIVER_SLICE_US: f64 = 1000.0;

/// The experiment's setting.
#[derive(Clone)]
pub struct InferenceConfig {
    /// A GPU with tensor cores (the default request kernels need them).
    pub gpu: GpuConfig,
    pub batch: &'static dyn suite::Kernel,
    pub batch_size: Size,
    /// One latency-critical process per kernel.
    pub requests: Vec<&'static dyn suite::Kernel>,
    pub request_size: Size,
    /// Requests per latency-critical process.
    pub count: u32,
    pub seed: u64,
    /// The context-switch mechanism (`cs`).
    pub switch: MechanismKind,
    pub threads: usize,
    pub max_cycles: u64,
    pub instruction_limit: Option<u64>,
}

/// Default requests per latency-critical process: 8, 24 a run. The requests come over the
/// batch's kernels alone (about 90 µs on the v100), and a request runs about 8 µs alone, so
/// 8 keeps each process's own queue under full load; p99 and p99.9 are then the largest
/// latency (nearest rank), which is what the table can honestly give at this size. Each
/// run costs seconds, dominated by the batch: `--requests` raises it.
pub const DEFAULT_REQUESTS: u32 = 8;

impl InferenceConfig {
    /// The default: `wgemm` (large) beside `layernorm`, `softmax` and `attention` (small).
    pub fn default_on(gpu: GpuConfig) -> InferenceConfig {
        let k = |n| suite::by_name(n).expect("a suite kernel");
        InferenceConfig {
            gpu,
            batch: k("wgemm"),
            batch_size: Size::Large,
            requests: vec![k("layernorm"), k("softmax"), k("attention")],
            request_size: Size::Small,
            count: DEFAULT_REQUESTS,
            seed: 1,
            switch: MechanismKind::Baseline,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            max_cycles: 1 << 34,
            instruction_limit: None,
        }
    }

    /// Runs in all: the batch alone, the warm-ups alone, then every run of [`RUNS`]
    /// (`alone`: the latency-critical processes without the batch).
    pub fn total_runs(&self) -> usize {
        2 + RUNS.len()
    }
}

/// One run's results.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct InferenceRun {
    pub run: String,
    /// Every latency-critical request together, and per process (in the order of
    /// [`InferenceConfig::requests`]).
    pub latency: Latency,
    pub per_process: Vec<(String, Latency)>,
    /// The batch's turnaround (µs; `None` in `alone`), and its throughput: its time alone
    /// over this.
    pub batch_us: Option<f64>,
    pub batch_throughput: Option<f64>,
    /// Every request and the warm-ups and the batch verified.
    pub verified: bool,
    pub cycles: u64,
    /// TBs the mechanism took off SMs.
    pub preempted_tbs: u64,
}

/// The experiment's results.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct InferenceResults {
    pub gpu: String,
    pub batch: String,
    pub requests: Vec<String>,
    pub count: u32,
    /// When the batch and the requests come.
    pub schedule: Schedule,
    /// The batch's turnaround alone, µs.
    pub batch_alone_us: f64,
    pub switch: String,
    pub runs: Vec<InferenceRun>,
}

impl InferenceResults {
    pub fn all_verified(&self) -> bool {
        self.runs.iter().all(|r| r.verified)
    }
}

/// How a run of [`RUNS`] is set up: policy, mechanism, one context, and the slice.
fn run_kind(name: &str, switch: MechanismKind) -> (PolicyKind, MechanismKind, bool) {
    let ppq = |access| PolicyKind::Ppq { access };
    let (drain, cs) = (MechanismKind::Drain, switch);
    match name {
        "fcfs" | "alone" => (PolicyKind::Fcfs, drain, false),
        "npq" => (PolicyKind::Npq, drain, false),
        "ppq-exclusive/cs" => (ppq(PpqAccess::Exclusive), cs, false),
        "ppq-exclusive/drain" => (ppq(PpqAccess::Exclusive), drain, false),
        "ppq-shared/cs" => (ppq(PpqAccess::Shared), cs, false),
        "ppq-shared/drain" => (ppq(PpqAccess::Shared), drain, false),
        "dss/cs" => (PolicyKind::Dss { tokens: None }, cs, false),
        "dss/drain" => (PolicyKind::Dss { tokens: None }, drain, false),
        "time-slice/cs" => (
            PolicyKind::TimeSlice {
                slice_us: Some(DRIVER_SLICE_US),
            },
            cs,
            false,
        ),
        "mps" => (PolicyKind::Mps { percentage: None }, drain, false),
        "mps-50" => (
            PolicyKind::Mps {
                percentage: Some(50.0),
            },
            drain,
            false,
        ),
        "mig" => (PolicyKind::Mig { instances: None }, drain, false),
        "stream-priority" => (PolicyKind::Fcfs, drain, true),
        _ => unreachable!("a run of RUNS"),
    }
}

fn suite_process(
    kernel: &'static dyn suite::Kernel,
    size: Size,
    priority: i32,
    requests: Option<Arrivals>,
    arrival_us: f64,
) -> Process {
    Process {
        name: kernel.name().to_string(),
        arrival_us,
        priority,
        stream_priorities: Vec::new(),
        program: Program::Suite {
            kernel,
            size,
            seed: 1,
            target: kernel.default_target(),
            warm_up: requests.is_some(),
        },
        requests,
    }
}

/// When things happen in every run (µs from 0), from the runs alone.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Schedule {
    /// The warm-ups' end: the batch arrives then, so that a server is up before batch work
    /// comes, and warm-up copies never queue behind the batch's.
    pub batch_arrival_us: f64,
    /// The batch's kernels, alone: from its first kernel's start to its end (its input
    /// copies come before).
    pub kernels_from_us: f64,
    pub kernels_us: f64,
    /// The Poisson gap's mean: the kernels' time over the requests a process, so the
    /// expected last request comes as the batch, alone, would end.
    pub mean_gap_us: f64,
}

impl Schedule {
    /// Each process's request times (from 0): a seeded Poisson stream from the batch's
    /// first kernel start on.
    fn requests(&self, count: u32, seed: u64) -> Arrivals {
        let start = self.batch_arrival_us + self.kernels_from_us;
        let gaps = Arrivals::Poisson {
            mean_us: self.mean_gap_us,
            count,
            seed,
        };
        Arrivals::Trace {
            at_us: gaps.times_us().into_iter().map(|t| start + t).collect(),
        }
    }
}

/// Runs the experiment; `progress(done, total, what)` after each run.
pub fn run(
    c: &InferenceConfig,
    progress: &(dyn Fn(usize, usize, &str) + Sync),
) -> Result<InferenceResults, MultiprogramError> {
    if c.requests.is_empty() || c.count == 0 {
        return Err(MultiprogramError::Config(
            "the inference runs need at least one request kernel and one request".into(),
        ));
    }
    if let Some(k) = c
        .requests
        .iter()
        .chain([&c.batch])
        .find(|k| k.needs_tensor_cores())
        .filter(|_| c.gpu.pipeline.tensor.is_none())
    {
        return Err(MultiprogramError::Config(format!(
            "{} needs tensor cores, which {} has not (the inference runs need a tensor-core preset: v100, a100, h100)",
            k.name(),
            c.gpu.name
        )));
    }
    let total = c.total_runs();
    let done = std::sync::atomic::AtomicUsize::new(0);
    let fail = |what: String| move |error| MultiprogramError::Run { what, error };
    let us = |fs: u64| fs as f64 / FS_PER_US as f64;
    let verified = |r: &workload::RunRecord| {
        r.processes.iter().all(|p| {
            p.verdict.as_ref().is_some_and(|v| v.verified)
                && p.runs.iter().all(|x| x.verdict.verified)
        })
    };
    let setup = || {
        crate::suite_setup(
            &c.gpu,
            PolicyKind::Fcfs,
            MechanismKind::Drain,
            c.max_cycles,
            c.instruction_limit,
        )
    };
    // The batch alone: its time is its throughput's unit, and its kernels' span sets when
    // the requests come.
    let alone = System::new(
        setup(),
        &[suite_process(c.batch, c.batch_size, 0, None, 0.0)],
    )
    .and_then(|s| s.run(&mut |_| {}))
    .map_err(fail(format!("{} alone", c.batch.name())))?;
    if !verified(&alone) {
        return Err(MultiprogramError::Config(format!(
            "{} alone did not verify",
            c.batch.name()
        )));
    }
    let batch_alone_us = alone.processes[0].mean_turnaround_fs().unwrap_or(0.0) / FS_PER_US as f64;
    let first_kernel = alone
        .kernels
        .iter()
        .filter_map(|k| k.started_fs)
        .min()
        .unwrap_or(0);
    // The warm-ups alone, each serving one request at once: it runs when its setup ends.
    let warm: Vec<Process> = c
        .requests
        .iter()
        .map(|&k| {
            let one = Arrivals::Trace { at_us: vec![0.0] };
            suite_process(k, c.request_size, 1, Some(one), 0.0)
        })
        .collect();
    let warmed = System::new(setup(), &warm)
        .and_then(|s| s.run(&mut |_| {}))
        .map_err(fail("the warm-ups alone".into()))?;
    if !verified(&warmed) {
        return Err(MultiprogramError::Config(
            "the warm-ups alone did not verify".into(),
        ));
    }
    let warm_end = warmed
        .processes
        .iter()
        .filter_map(|p| p.runs.first().map(|r| r.started_fs))
        .max()
        .unwrap_or(0);
    let kernels_from_us = us(first_kernel);
    let kernels_us = batch_alone_us - kernels_from_us;
    let schedule = Schedule {
        batch_arrival_us: us(warm_end),
        kernels_from_us,
        kernels_us,
        mean_gap_us: kernels_us / f64::from(c.count),
    };
    let n = done.fetch_add(2, std::sync::atomic::Ordering::Relaxed) + 2;
    progress(n, total, "the batch and the warm-ups alone");
    let runs = crate::run_indexed(
        c.threads,
        &RUNS,
        &|&name| one_run(c, name, &schedule, batch_alone_us),
        &|name| format!("inference, {name}"),
        progress,
        &done,
        total,
    );
    let mut out = Vec::with_capacity(runs.len());
    for r in runs.into_iter().flatten() {
        out.push(r?);
    }
    if out.len() < RUNS.len() {
        return Err(MultiprogramError::Config("an inference run failed".into()));
    }
    Ok(InferenceResults {
        gpu: c.gpu.name.clone(),
        batch: format!("{} ({})", c.batch.name(), c.batch_size.name()),
        requests: c
            .requests
            .iter()
            .map(|k| format!("{} ({})", k.name(), c.request_size.name()))
            .collect(),
        count: c.count,
        schedule,
        batch_alone_us,
        switch: c.switch.to_string(),
        runs: out,
    })
}

fn one_run(
    c: &InferenceConfig,
    name: &str,
    schedule: &Schedule,
    batch_alone_us: f64,
) -> Result<InferenceRun, MultiprogramError> {
    let (policy, mechanism, one_context) = run_kind(name, c.switch);
    let mut setup =
        crate::suite_setup(&c.gpu, policy, mechanism, c.max_cycles, c.instruction_limit);
    setup.snapshot = false;
    setup.one_context = one_context;
    let with_batch = name != "alone";
    let mut processes = Vec::new();
    if with_batch {
        let at = schedule.batch_arrival_us;
        processes.push(suite_process(c.batch, c.batch_size, 0, None, at));
    }
    for (i, &k) in c.requests.iter().enumerate() {
        // Each process its own stream of arrivals, from the one seed.
        let arrivals = schedule.requests(c.count, c.seed.wrapping_add(i as u64));
        processes.push(suite_process(k, c.request_size, 1, Some(arrivals), 0.0));
    }
    let r = System::new(setup, &processes)
        .and_then(|s| s.run(&mut |_| {}))
        .map_err(|error| MultiprogramError::Run {
            what: format!("inference, {name}"),
            error,
        })?;
    let us = |fs: u64| fs as f64 / FS_PER_US as f64;
    let served = &r.processes[usize::from(with_batch)..];
    let latencies = |p: &workload::system::ProcessRecord| -> Vec<f64> {
        p.runs
            .iter()
            .map(|x| us(x.finished_fs.saturating_sub(x.requested_fs)))
            .collect()
    };
    let all: Vec<f64> = served.iter().flat_map(latencies).collect();
    let none = || MultiprogramError::Config(format!("inference, {name}: no request completed"));
    let latency = Latency::of(&all).ok_or_else(none)?;
    let per_process = served
        .iter()
        .map(|p| Ok((p.name.clone(), Latency::of(&latencies(p)).ok_or_else(none)?)))
        .collect::<Result<Vec<_>, MultiprogramError>>()?;
    let batch_us = with_batch
        .then(|| r.processes[0].mean_turnaround_fs())
        .flatten()
        .map(|fs| fs / FS_PER_US as f64);
    let summary = workload::report::PreemptionSummary::of(name, &r.preemptions, r.core_period_fs);
    let verified = r.processes.iter().all(|p| {
        p.verdict.as_ref().is_some_and(|v| v.verified) && p.runs.iter().all(|x| x.verdict.verified)
    }) && served.iter().all(|p| p.runs.len() == c.count as usize);
    Ok(InferenceRun {
        run: name.to_string(),
        latency,
        per_process,
        batch_us,
        batch_throughput: batch_us.map(|t| batch_alone_us / t),
        verified,
        cycles: r.cycles,
        preempted_tbs: summary.switched + summary.flushed + summary.drained,
    })
}

/// The inference-tail table: one row a run, request latency p50 / p99 / p99.9 (µs) and the
/// batch's throughput.
pub fn table(r: &InferenceResults) -> String {
    let mut s = format!(
        "Inference beside batch work on {}: {} requests each of {} (Poisson from {:.1} µs, mean gap {:.1} µs) beside {} (arrives at {:.1} µs, {:.1} µs alone); cs = {}\n\n",
        r.gpu,
        r.count,
        r.requests.join(", "),
        r.schedule.batch_arrival_us + r.schedule.kernels_from_us,
        r.schedule.mean_gap_us,
        r.batch,
        r.schedule.batch_arrival_us,
        r.batch_alone_us,
        r.switch
    );
    s.push_str(&format!(
        "{:<20} {:>10} {:>10} {:>10} {:>11} {:>10}\n",
        "run", "p50 µs", "p99 µs", "p99.9 µs", "batch thr.", "preempted"
    ));
    for x in &r.runs {
        let thr = x
            .batch_throughput
            .map_or("-".to_string(), |t| format!("{t:.3}"));
        s.push_str(&format!(
            "{:<20} {:>10.1} {:>10.1} {:>10.1} {:>11} {:>10}{}\n",
            x.run,
            x.latency.p50_us,
            x.latency.p99_us,
            x.latency.p999_us,
            thr,
            x.preempted_tbs,
            if x.verified { "" } else { "  NOT VERIFIED" }
        ));
    }
    s
}

/// The table as CSV: one row a run and latency-critical group (`all`, then each process).
pub fn to_csv(r: &InferenceResults) -> String {
    let mut s = String::from(
        "run,requests_of,count,mean_us,p50_us,p99_us,p999_us,max_us,batch_us,batch_throughput,verified,cycles,preempted_tbs\n",
    );
    for x in &r.runs {
        let groups = std::iter::once(("all", &x.latency))
            .chain(x.per_process.iter().map(|(n, l)| (n.as_str(), l)));
        for (who, l) in groups {
            s.push_str(&format!(
                "{},{},{},{:.3},{:.3},{:.3},{:.3},{:.3},{},{},{},{},{}\n",
                x.run,
                who,
                l.count,
                l.mean_us,
                l.p50_us,
                l.p99_us,
                l.p999_us,
                l.max_us,
                x.batch_us.map_or(String::new(), |t| format!("{t:.3}")),
                x.batch_throughput
                    .map_or(String::new(), |t| format!("{t:.4}")),
                x.verified,
                x.cycles,
                x.preempted_tbs
            ));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_a_poisson_stream_from_the_batchs_first_kernel() {
        let s = Schedule {
            batch_arrival_us: 200.0,
            kernels_from_us: 100.0,
            kernels_us: 80.0,
            mean_gap_us: 10.0,
        };
        let Arrivals::Trace { at_us } = s.requests(8, 3) else {
            panic!("a trace");
        };
        let gaps = Arrivals::Poisson {
            mean_us: 10.0,
            count: 8,
            seed: 3,
        }
        .times_us();
        // The same seeded gaps, shifted to the batch's first kernel start (200 + 100 µs).
        assert_eq!(at_us.len(), 8);
        for (t, g) in at_us.iter().zip(&gaps) {
            assert_eq!(*t, 300.0 + g);
        }
        assert!(at_us.windows(2).all(|w| w[0] <= w[1]));
        // Another seed, another stream.
        assert_ne!(s.requests(8, 4), s.requests(8, 3));
    }

    #[test]
    fn cs_runs_switch_and_only_stream_priority_shares_a_context() {
        for name in RUNS {
            let (_, mechanism, one) = run_kind(name, MechanismKind::Baseline);
            assert_eq!(one, name == "stream-priority", "{name}");
            // A run named `/cs` switches, every other drains.
            let cs = mechanism == MechanismKind::Baseline;
            assert_eq!(cs, name.ends_with("/cs"), "{name}");
        }
    }
}
