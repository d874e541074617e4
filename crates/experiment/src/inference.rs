//! Inference beside batch work: the question REEF, XSched and LithOS ask of real GPUs —
//! how long do latency-critical requests take while a long batch kernel holds the GPU,
//! and what does protecting them cost the batch — asked here of every policy ×
//! mechanism of the framework and of today's NVIDIA sharing modes, on one machine.
//!
//! **Workload.** One batch process (by default `spmv` at `large`: 1,024 TBs, eight waves
//! of TBs that each hold an SM's TB slots for tens of µs) on a GPU cut to a few SMs
//! ([`InferenceConfig::sms`]: 4 of the v100's 80 by default), so that the batch holds every
//! SM for much longer than a request (a replay alone takes about 670 µs, a request about
//! 20 µs) at a size the simulator runs in seconds. The batch runs its host program once (its
//! setup: inputs copied, launches run, results checked) and then replays its launches back
//! to back on its resident buffers, each replay checked like a request, enough times to
//! outlast the request stream ([`Schedule::replays`]): a batch job that keeps the GPU busy
//! for the whole run. Beside it, one latency-critical process per request kernel (by
//! default `layernorm` and `softmax` at `small`, the suite's transformer-layer kernels)
//! runs its suite host program once as a warm-up ([`workload::program::ServedSuite`]) and
//! then serves `count` seeded Poisson requests at a fixed mean gap
//! ([`InferenceConfig::mean_gap_us`], several times a request's time alone, so requests
//! seldom queue behind their own process's), each running the program's launches again on
//! its resident buffers and checked to leave them as the verified warm-up did. So a
//! request's latency is its kernels' wait and run, not PCIe copies (an inference server
//! keeps its weights and activations on the GPU). The requests start at the batch's first
//! replay (alone). `attention` is not among the defaults: a request of it alone takes
//! longer than the gap, so its tail is its own queue, not the batch's (docs/results.md).
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
//! requests p99.9 is the maximum), how many requests arrived while the batch was replaying
//! (the setting's premise: all of them, unless a mode slows the batch's setup past the
//! stream), and the batch's throughput: its replays' time alone over their time in the
//! run, from the first's start to the last's end (1: unharmed).

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
    /// Cut the GPU to this many SMs (`None`: all of them), so that the batch holds every SM
    /// for much longer than a request at a size the simulator runs in seconds.
    pub sms: Option<u32>,
    pub batch: &'static dyn suite::Kernel,
    pub batch_size: Size,
    /// One latency-critical process per kernel.
    pub requests: Vec<&'static dyn suite::Kernel>,
    pub request_size: Size,
    /// Requests per latency-critical process.
    pub count: u32,
    /// The mean gap of each latency-critical process's Poisson stream, µs.
    pub mean_gap_us: f64,
    /// Which runs of [`RUNS`], in its order (the default: all of them).
    pub runs: Vec<&'static str>,
    pub seed: u64,
    /// The context-switch mechanism (`cs`).
    pub switch: MechanismKind,
    pub threads: usize,
    pub max_cycles: u64,
    pub instruction_limit: Option<u64>,
}

/// Default requests per latency-critical process: 25, 50 a run, so that the default run
/// stays within its time (the batch's replays cost about 12 CPU minutes for the 16 runs,
/// BENCHMARKS.md); p99 and p99.9 are then the largest latency (nearest rank).
/// `--requests 500` gives 1,000 a run, where p99.9 is its own number, at about 12 times
/// the time (59 replays of the batch instead of 5).
pub const DEFAULT_REQUESTS: u32 = 25;

/// Default SMs of the inference GPU: 4 of the v100's 80 (see [`InferenceConfig::sms`]): the
/// simulator's time goes with the batch's warp instructions, so a batch that fills 80 SMs
/// for milliseconds would cost 20 times as much.
pub const DEFAULT_SMS: u32 = 4;

/// Default mean gap between a latency-critical process's requests, µs: several times a
/// request's time alone (about 10 µs, launch included), so that requests seldom queue
/// behind their own process's, and well under the batch kernel's time.
pub const DEFAULT_MEAN_GAP_US: f64 = 50.0;

impl InferenceConfig {
    /// The default: `spmv` (large), replayed for the whole run, beside `layernorm` and
    /// `softmax` (small), on `gpu` cut to [`DEFAULT_SMS`] SMs.
    pub fn default_on(gpu: GpuConfig) -> InferenceConfig {
        let k = |n| suite::by_name(n).expect("a suite kernel");
        InferenceConfig {
            gpu,
            sms: Some(DEFAULT_SMS),
            batch: k("spmv"),
            batch_size: Size::Large,
            requests: vec![k("layernorm"), k("softmax")],
            request_size: Size::Small,
            count: DEFAULT_REQUESTS,
            mean_gap_us: DEFAULT_MEAN_GAP_US,
            runs: RUNS.to_vec(),
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
        2 + self.runs.len()
    }

    /// The GPU the runs use: [`InferenceConfig::gpu`] cut to [`InferenceConfig::sms`].
    pub fn machine(&self) -> Result<GpuConfig, MultiprogramError> {
        let mut g = self.gpu.clone();
        if let Some(n) = self.sms {
            if n == 0 || n > g.sm.count {
                return Err(MultiprogramError::Config(format!(
                    "the inference GPU's SMs: {n} is out of 1..={} ({} has {})",
                    g.sm.count, g.name, g.sm.count
                )));
            }
            if n < g.sm.count {
                g.name = format!("{} cut to {n} SMs", g.name);
                g.sm.count = n;
            }
        }
        Ok(g)
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
    /// The batch's replays, from the first's start to the last's end (µs; `None` in
    /// `alone`), and its throughput: its time for them alone over this.
    pub batch_us: Option<f64>,
    pub batch_throughput: Option<f64>,
    /// Requests that arrived while the batch was replaying (`None` in `alone`).
    pub beside_batch: Option<usize>,
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
    /// When the batch and the requests come, and the batch's replays.
    pub schedule: Schedule,
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
            managed: workload::scenario::Managed::Off,
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
    /// From the batch's arrival to its first replay's start, alone (its setup: input
    /// copies, the program run once and checked).
    pub kernels_from_us: f64,
    /// The batch's time a replay, alone: its launches once more on its resident buffers.
    pub replay_us: f64,
    /// Replays of the batch in every run: enough to outlast the requests' stream alone
    /// (half again its mean length, plus two replays), so that requests find the batch
    /// running.
    pub replays: u32,
    /// The mean gap of each latency-critical process's Poisson stream.
    pub mean_gap_us: f64,
}

impl Schedule {
    /// Each process's request times (from 0): a seeded Poisson stream from the batch's
    /// first replay on.
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

    /// Replays that outlast `count` requests at `mean_gap_us` when each takes `replay_us`.
    fn replays_for(count: u32, mean_gap_us: f64, replay_us: f64) -> u32 {
        let stream = 1.5 * f64::from(count) * mean_gap_us;
        let n = (stream / replay_us.max(1e-3)).ceil() + 2.0;
        n.min(f64::from(workload::arrivals::MAX_REQUESTS)) as u32
    }
}

/// The batch as a process that runs its host program once (its setup) and then replays its
/// launches `replays` times back to back (all asked for at its arrival), each replay
/// checked like a request.
fn batch_process(c: &InferenceConfig, replays: u32, arrival_us: f64) -> Process {
    let again = Arrivals::Trace {
        at_us: vec![0.0; replays as usize],
    };
    let mut p = suite_process(c.batch, c.batch_size, 0, Some(again), arrival_us);
    p.name = format!("{} (batch)", c.batch.name());
    p
}

/// The batch's span in a run: from its first replay's start to its last's end (fs).
fn replay_span_fs(p: &workload::system::ProcessRecord) -> Option<u64> {
    let first = p.runs.first()?;
    let last = p.runs.last()?;
    Some(last.finished_fs.saturating_sub(first.started_fs))
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
    if let Some(bad) = c.runs.iter().find(|r| !RUNS.contains(r)) {
        return Err(MultiprogramError::Config(format!(
            "no inference run `{bad}`; runs: {}",
            RUNS.join(", ")
        )));
    }
    if !(c.mean_gap_us.is_finite() && c.mean_gap_us > 0.0) {
        return Err(MultiprogramError::Config(format!(
            "the requests' mean gap {} µs must be a positive number",
            c.mean_gap_us
        )));
    }
    let gpu = c.machine()?;
    if let Some(k) = c
        .requests
        .iter()
        .chain([&c.batch])
        .find(|k| k.needs_tensor_cores())
        .filter(|_| gpu.pipeline.tensor.is_none())
    {
        return Err(MultiprogramError::Config(format!(
            "{} needs tensor cores, which {} has not (the inference runs need a tensor-core preset: v100, a100, h100)",
            k.name(),
            gpu.name
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
            &gpu,
            PolicyKind::Fcfs,
            MechanismKind::Drain,
            c.max_cycles,
            c.instruction_limit,
        )
    };
    // The batch alone, replayed a few times: its setup's length sets when the requests
    // come, and its time a replay is its throughput's unit and sets the replays.
    const PROBE: u32 = 3;
    let alone = System::new(setup(), &[batch_process(c, PROBE, 0.0)])
        .and_then(|s| s.run(&mut |_| {}))
        .map_err(fail(format!("{} alone", c.batch.name())))?;
    let batch = &alone.processes[0];
    if !verified(&alone) || batch.runs.len() != PROBE as usize {
        let why = batch
            .runs
            .iter()
            .map(|x| &x.verdict)
            .chain(&batch.verdict)
            .find(|v| !v.verified)
            .map_or("not every replay completed".to_string(), |v| {
                v.detail.clone()
            });
        return Err(MultiprogramError::Config(format!(
            "{} alone did not verify: {why}",
            c.batch.name()
        )));
    }
    let kernels_from_us = us(batch.runs[0].started_fs);
    let replay_us = us(replay_span_fs(batch).unwrap_or(0)) / f64::from(PROBE);
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
    let schedule = Schedule {
        batch_arrival_us: us(warm_end),
        kernels_from_us,
        replay_us,
        replays: Schedule::replays_for(c.count, c.mean_gap_us, replay_us),
        mean_gap_us: c.mean_gap_us,
    };
    let n = done.fetch_add(2, std::sync::atomic::Ordering::Relaxed) + 2;
    progress(n, total, "the batch and the warm-ups alone");
    let runs = crate::run_indexed(
        c.threads,
        &c.runs,
        &|&name| one_run(c, &gpu, name, &schedule),
        &|name| format!("inference, {name}"),
        progress,
        &done,
        total,
    );
    let mut out = Vec::with_capacity(runs.len());
    for r in runs.into_iter().flatten() {
        out.push(r?);
    }
    if out.len() < c.runs.len() {
        return Err(MultiprogramError::Config("an inference run failed".into()));
    }
    Ok(InferenceResults {
        gpu: gpu.name.clone(),
        batch: format!("{} ({})", c.batch.name(), c.batch_size.name()),
        requests: c
            .requests
            .iter()
            .map(|k| format!("{} ({})", k.name(), c.request_size.name()))
            .collect(),
        count: c.count,
        schedule,
        switch: c.switch.to_string(),
        runs: out,
    })
}

fn one_run(
    c: &InferenceConfig,
    gpu: &GpuConfig,
    name: &str,
    schedule: &Schedule,
) -> Result<InferenceRun, MultiprogramError> {
    let (policy, mechanism, one_context) = run_kind(name, c.switch);
    let mut setup = crate::suite_setup(gpu, policy, mechanism, c.max_cycles, c.instruction_limit);
    setup.snapshot = false;
    setup.one_context = one_context;
    let with_batch = name != "alone";
    let mut processes = Vec::new();
    if with_batch {
        processes.push(batch_process(
            c,
            schedule.replays,
            schedule.batch_arrival_us,
        ));
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
    let batch = with_batch.then(|| &r.processes[0]);
    let batch_us = batch.and_then(replay_span_fs).map(us);
    // Requests that arrived while the batch was replaying: the setting's premise.
    let beside_batch = batch.map(|b| {
        let (from, to) = (
            b.runs.first().map_or(0, |x| x.started_fs),
            b.runs.last().map_or(0, |x| x.finished_fs),
        );
        served
            .iter()
            .flat_map(|p| &p.runs)
            .filter(|x| (from..to).contains(&x.requested_fs))
            .count()
    });
    let summary = workload::report::PreemptionSummary::of(name, &r.preemptions, r.core_period_fs);
    let verified = r.processes.iter().all(|p| {
        p.verdict.as_ref().is_some_and(|v| v.verified) && p.runs.iter().all(|x| x.verdict.verified)
    }) && served.iter().all(|p| p.runs.len() == c.count as usize)
        && batch.is_none_or(|b| b.runs.len() == schedule.replays as usize);
    Ok(InferenceRun {
        run: name.to_string(),
        latency,
        per_process,
        batch_us,
        batch_throughput: batch_us
            .map(|t| f64::from(schedule.replays) * schedule.replay_us / t.max(1e-9)),
        beside_batch,
        verified,
        cycles: r.cycles,
        preempted_tbs: summary.switched + summary.flushed + summary.drained,
    })
}

/// The inference-tail table: one row a run, request latency p50 / p99 / p99.9 (µs) and the
/// batch's throughput.
pub fn table(r: &InferenceResults) -> String {
    let mut s = format!(
        "Inference beside batch work on {}: {} requests each of {} (Poisson from {:.1} µs, mean gap {:.1} µs) beside {} (arrives at {:.1} µs, then {} replays of {:.1} µs each alone); cs = {}\n\n",
        r.gpu,
        r.count,
        r.requests.join(", "),
        r.schedule.batch_arrival_us + r.schedule.kernels_from_us,
        r.schedule.mean_gap_us,
        r.batch,
        r.schedule.batch_arrival_us,
        r.schedule.replays,
        r.schedule.replay_us,
        r.switch
    );
    s.push_str(&format!(
        "{:<20} {:>10} {:>10} {:>10} {:>11} {:>10} {:>8}\n",
        "run", "p50 µs", "p99 µs", "p99.9 µs", "batch thr.", "preempted", "beside"
    ));
    for x in &r.runs {
        let thr = x
            .batch_throughput
            .map_or("-".to_string(), |t| format!("{t:.3}"));
        s.push_str(&format!(
            "{:<20} {:>10.1} {:>10.1} {:>10.1} {:>11} {:>10} {:>8}{}\n",
            x.run,
            x.latency.p50_us,
            x.latency.p99_us,
            x.latency.p999_us,
            thr,
            x.preempted_tbs,
            x.beside_batch.map_or("-".to_string(), |n| n.to_string()),
            if x.verified { "" } else { "  NOT VERIFIED" }
        ));
    }
    s
}

/// The table as CSV: one row a run and latency-critical group (`all`, then each process).
pub fn to_csv(r: &InferenceResults) -> String {
    let mut s = String::from(
        "run,requests_of,count,mean_us,p50_us,p99_us,p999_us,max_us,batch_us,batch_throughput,beside_batch,verified,cycles,preempted_tbs\n",
    );
    for x in &r.runs {
        let groups = std::iter::once(("all", &x.latency))
            .chain(x.per_process.iter().map(|(n, l)| (n.as_str(), l)));
        for (who, l) in groups {
            s.push_str(&format!(
                "{},{},{},{:.3},{:.3},{:.3},{:.3},{:.3},{},{},{},{},{},{}\n",
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
                x.beside_batch.map_or(String::new(), |n| n.to_string()),
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
            replay_us: 80.0,
            replays: 5,
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
    fn the_batch_replays_outlast_the_request_stream() {
        // 25 requests at 50 µs: a stream of 1,250 µs on average, 1,875 with the margin;
        // 667.7 µs a replay gives 3 replays for it, and 2 more.
        assert_eq!(Schedule::replays_for(25, 50.0, 667.7), 5);
        assert_eq!(Schedule::replays_for(500, 50.0, 667.7), 59);
        // A replay longer than the stream: still 3.
        assert_eq!(Schedule::replays_for(1, 10.0, 1e6), 3);
        // Never more than a trace may hold.
        assert_eq!(
            Schedule::replays_for(100_000, 1e6, 1e-9),
            workload::arrivals::MAX_REQUESTS
        );
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
