//! `switchyard._native`: the Python package's native half. It calls the library crates the
//! way the `switchyard` command does (`crates/switchyard/src/cmd_*.rs`) and hands results
//! back as JSON text and CSV text, which the pure-Python half (`python/switchyard/`) turns
//! into dictionaries and pandas DataFrames; the CSVs are the very text `scenario --csv`
//! writes. Errors are raised as the classes of `switchyard.errors`, with the message the
//! command prints (file, line and field included).
//!
//! Invariants: nothing here changes what a run computes (the same `workload::run`,
//! `experiment::study::run` and `switchyard::suite_run::run_kernel_on` calls as the CLI);
//! the GIL is released while the simulator runs; a stepped run ([`Run`]) runs on its own
//! thread, paused inside `workload::Injector::before_cycle`, so the core crates need no
//! stepping API of their own.

use std::path::Path;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Mutex;
use std::thread::JoinHandle;

use gpu::config::{GpuConfig, SchedulerPolicy};
use gpu::timing::{Machine, TimedGpu};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use sched::{Framework, PolicyKind};
use serde_json::{json, Value};
use workload::{Disk, Report, RunRecord, Scenario, Setup, System};

/// Core cycles a scenario may run by default (as `switchyard scenario`).
const DEFAULT_MAX_CYCLES: u64 = 1 << 32;

/// Raises `switchyard.errors.<class>(message, **fields)`.
fn error(
    py: Python<'_>,
    class: &str,
    message: String,
    fields: Option<(&str, &str, &str)>,
) -> PyErr {
    let made = (|| -> PyResult<PyErr> {
        let cls = py.import("switchyard.errors")?.getattr(class)?;
        let obj = match fields {
            Some((location, field, what)) => cls.call1((message.clone(), location, field, what))?,
            None => cls.call1((message.clone(),))?,
        };
        Ok(PyErr::from_value(obj))
    })();
    made.unwrap_or_else(|e| e)
}

/// An error without a Python context yet: raised as `class` by [`Fail::raise`].
struct Fail {
    class: &'static str,
    message: String,
    fields: Option<(String, String, String)>,
}

impl Fail {
    fn new(class: &'static str, message: impl Into<String>) -> Fail {
        Fail {
            class,
            message: message.into(),
            fields: None,
        }
    }

    fn raise(self, py: Python<'_>) -> PyErr {
        let f = self
            .fields
            .as_ref()
            .map(|(l, f, w)| (l.as_str(), f.as_str(), w.as_str()));
        error(py, self.class, self.message, f)
    }
}

fn value_error(m: impl Into<String>) -> Fail {
    Fail::new("SwitchyardValueError", m)
}

fn run_error(m: impl Into<String>) -> Fail {
    Fail::new("RunError", m)
}

fn scenario_error(e: workload::ScenarioError) -> Fail {
    Fail {
        class: "ScenarioError",
        message: e.to_string(),
        fields: Some((e.location, e.field, e.what)),
    }
}

fn to_json(v: &impl serde::Serialize) -> String {
    serde_json::to_string(v).expect("serializable")
}

/// A GPU preset name or a GPU configuration file, with an optional warp-scheduler override
/// (as `switchyard run --gpu ... --scheduler ...`).
fn load_gpu(arg: &str, scheduler: Option<&str>) -> Result<GpuConfig, Fail> {
    let mut g = if arg.ends_with(".toml") || Path::new(arg).is_file() {
        let text = switchyard::input::read_text(Path::new(arg), switchyard::input::Utf8::Strict)
            .map_err(value_error)?;
        GpuConfig::from_toml(arg, &text).map_err(|e| value_error(e.to_string()))?
    } else {
        GpuConfig::preset(arg).map_err(|e| value_error(e.to_string()))?
    };
    if let Some(s) = scheduler {
        g.sm.scheduler = match s {
            "lrr" => SchedulerPolicy::Lrr,
            "gto" => SchedulerPolicy::Gto,
            "two-level" => SchedulerPolicy::TwoLevel,
            other => {
                return Err(value_error(format!(
                    "scheduler `{other}`: expected one of lrr, gto, two-level"
                )))
            }
        };
    }
    Ok(g)
}

fn size(name: &str) -> Result<suite::Size, Fail> {
    match name {
        "small" => Ok(suite::Size::Small),
        "large" => Ok(suite::Size::Large),
        "huge" => Ok(suite::Size::Huge),
        other => Err(value_error(format!(
            "size `{other}`: expected one of small, large, huge"
        ))),
    }
}

fn kernel(name: &str) -> Result<&'static dyn suite::Kernel, Fail> {
    suite::by_name(name).ok_or_else(|| {
        value_error(format!(
            "no suite kernel `{name}`; the suite has: {}",
            switchyard::diag::name_list(suite::all().iter().map(|k| k.name()))
        ))
    })
}

/// The names of the GPU presets.
#[pyfunction]
fn presets() -> Vec<String> {
    gpu::config::PRESETS
        .iter()
        .map(|(n, _)| n.to_string())
        .collect()
}

/// The suite's kernels as JSON: name, default (oldest) target, whether it needs tensor cores.
#[pyfunction]
fn suite_kernels() -> String {
    let rows: Vec<Value> = suite::all()
        .iter()
        .map(|k| {
            json!({
                "name": k.name(),
                "default_target": k.default_target().name(),
                "targets": suite::Target::ALL.iter().filter(|t| k.ptx(**t).is_some()).map(|t| t.name()).collect::<Vec<_>>(),
                "needs_tensor_cores": k.needs_tensor_cores(),
            })
        })
        .collect();
    to_json(&rows)
}

/// Loads PTX (`text`, or the file `file` when `text` is None) and describes its kernels.
#[pyfunction]
#[pyo3(signature = (file, text=None))]
fn load_ptx(py: Python<'_>, file: &str, text: Option<String>) -> PyResult<String> {
    let text = match text {
        Some(t) => t,
        None => switchyard::input::read_text(Path::new(file), switchyard::input::Utf8::Strict)
            .map_err(|e| Fail::new("PtxError", e).raise(py))?,
    };
    let mut g = gpu::Gpu::new();
    let id = g
        .load_ptx(file, &text)
        .map_err(|e| Fail::new("PtxError", switchyard::diag::render_load_error(&e)).raise(py))?;
    let m = g.module(id);
    let kernels: Vec<Value> = m
        .kernels
        .values()
        .map(|k| {
            json!({
                "name": k.name,
                "demangled": workload::demangle::cxx_name(&k.name),
                "params": k.params.iter().map(|p| json!({
                    "name": p.name,
                    "type": format!("{:?}", p.ty).to_lowercase(),
                    "offset": p.offset,
                    "size": p.size,
                })).collect::<Vec<_>>(),
                "instructions": k.insts.len(),
                "static_shared_bytes": k.static_smem,
                "local_bytes_per_thread": k.local_size,
            })
        })
        .collect();
    Ok(to_json(&json!({
        "file": file,
        "kernels": kernels,
        "warnings": gpu::render_warnings(m, file, &text),
    })))
}

/// The timed GPU `run` and `run_ptx` run on, with their limits.
fn timed_gpu(
    gpu: &str,
    scheduler: Option<&str>,
    max_cycles: Option<u64>,
    instruction_limit: Option<u64>,
) -> Result<TimedGpu, Fail> {
    let mut t = TimedGpu::new(load_gpu(gpu, scheduler)?);
    t.options.max_cycles = max_cycles;
    t.options.instruction_limit = instruction_limit;
    Ok(t)
}

/// `t`, or the functional core when `timed` is false, with the instruction limit.
fn engine(
    t: &TimedGpu,
    timed: bool,
    instruction_limit: Option<u64>,
) -> switchyard::suite_run::Engine<'_> {
    let mut engine = if timed {
        switchyard::suite_run::Engine::on(t)
    } else {
        switchyard::suite_run::Engine::FUNCTIONAL
    };
    engine.instruction_limit = instruction_limit;
    engine
}

/// Runs suite kernel `name`'s host program, timed on `gpu` (or on the functional core when
/// `timed` is false), verified against its CPU reference; JSON.
#[pyfunction]
#[pyo3(signature = (name, gpu="gtx480", size="small", seed=1, target=None, timed=true, scheduler=None, max_cycles=None, instruction_limit=None))]
fn run_kernel(
    py: Python<'_>,
    name: &str,
    gpu: &str,
    size: &str,
    seed: u64,
    target: Option<&str>,
    timed: bool,
    scheduler: Option<&str>,
    max_cycles: Option<u64>,
    instruction_limit: Option<u64>,
) -> PyResult<String> {
    let go = || -> Result<String, Fail> {
        let k = kernel(name)?;
        let size = self::size(size)?;
        let target = match target {
            None => k.default_target(),
            Some(t) => *suite::Target::ALL
                .iter()
                .find(|x| x.name() == t)
                .ok_or_else(|| {
                    value_error(format!("target `{t}`: expected one of sm_70, sm_80, sm_90"))
                })?,
        };
        let t = timed_gpu(gpu, scheduler, max_cycles, instruction_limit)?;
        let engine = engine(&t, timed, instruction_limit);
        let r = py
            .allow_threads(|| {
                switchyard::suite_run::run_kernel_on(k, target, size, seed, engine, None)
            })
            .map_err(|e| run_error(e.to_string()))?;
        let (passed, detail) = match &r.verification {
            suite::Verification::Passed { checked } => (true, format!("{checked} values checked")),
            suite::Verification::Failed { mismatches, first } => {
                (false, format!("{mismatches} mismatches; first: {first}"))
            }
        };
        Ok(to_json(&json!({
            "kernel": r.kernel,
            "target": r.target.name(),
            "size": r.size.name(),
            "gpu": if timed { Some(gpu) } else { None },
            "verified": passed,
            "detail": detail,
            "launches": r.launches,
            "tbs": r.stats.tbs,
            "warps": r.stats.warps,
            "warp_instructions": r.stats.warp_instructions,
            "thread_instructions": r.stats.thread_instructions,
            "cycles": timed.then(|| r.timed.iter().map(|s| s.cycles).sum::<u64>()),
            "stats": r.timed,
        })))
    };
    go().map_err(|f| f.raise(py))
}

/// Runs PTX file `path` from the launch spec `spec` (as `switchyard run FILE.ptx --spec
/// SPEC.toml`), timed on `gpu` (or on the functional core when `timed` is false); JSON.
#[pyfunction]
#[pyo3(signature = (path, spec, gpu="gtx480", timed=true, scheduler=None, max_cycles=None, instruction_limit=None))]
fn run_ptx(
    py: Python<'_>,
    path: &str,
    spec: &str,
    gpu: &str,
    timed: bool,
    scheduler: Option<&str>,
    max_cycles: Option<u64>,
    instruction_limit: Option<u64>,
) -> PyResult<String> {
    use switchyard::input::{read_text, Utf8};
    use switchyard::ptx_run::FileRunError;
    let go = || -> Result<String, Fail> {
        let text =
            read_text(Path::new(path), Utf8::Lenient).map_err(|e| Fail::new("PtxError", e))?;
        let spec_text = read_text(Path::new(spec), Utf8::Strict).map_err(value_error)?;
        let t = timed_gpu(gpu, scheduler, max_cycles, instruction_limit)?;
        let engine = engine(&t, timed, instruction_limit);
        let r = py.allow_threads(|| {
            switchyard::ptx_run::run_file(path, &text, spec, &spec_text, engine, &mut |_, _| {})
        });
        let r = match r {
            Ok(r) => r,
            Err(FileRunError::Load(e)) => {
                return Err(Fail::new(
                    "PtxError",
                    switchyard::diag::render_load_error(&e),
                ))
            }
            // A spec that does not load, or a launch it writes that the GPU refuses.
            Err(e @ (FileRunError::Spec(_) | FileRunError::Launch { .. })) => {
                return Err(Fail::new("ScenarioError", e.to_string()))
            }
            Err(e) => return Err(run_error(e.to_string())),
        };
        let dumps = switchyard::output::write_dumps(&r.dumps).map_err(run_error)?;
        Ok(to_json(&json!({
            "file": path,
            "kernel": r.kernel_label(),
            "kernels": r.kernels,
            "launches": r.launches,
            "gpu": if timed { Some(gpu) } else { None },
            "checked": r.checked(),
            "verified": r.verified(),
            "checks": r.checks,
            "warnings": r.warnings,
            "dumps": dumps,
            "tbs": r.stats.tbs,
            "warps": r.stats.warps,
            "warp_instructions": r.stats.warp_instructions,
            "thread_instructions": r.stats.thread_instructions,
            "cycles": timed.then(|| r.timed.iter().map(|s| s.cycles).sum::<u64>()),
            "stats": r.timed,
        })))
    };
    go().map_err(|f| f.raise(py))
}

/// How a scenario is run: the overrides `switchyard scenario` takes.
#[derive(Clone, Default)]
struct Overrides {
    gpu: Option<String>,
    scheduler: Option<String>,
    policy: Option<String>,
    mechanism: Option<String>,
    time_slice_us: Option<f64>,
    sharing: Option<bool>,
    max_cycles: Option<u64>,
    instruction_limit: Option<u64>,
}

/// The scenario with the overrides applied, and its setup (as `cmd_scenario::scenario`).
fn prepare(base: &Scenario, o: &Overrides) -> Result<(Scenario, Setup), Fail> {
    let mut s = base.clone();
    if let Some(us) = o.time_slice_us {
        if !(us.is_finite() && sched::SLICE_US_RANGE.contains(&us)) {
            return Err(value_error(format!(
                "time_slice_us {us} is out of 0.01..=10^7"
            )));
        }
        s.time_slice_us = us;
        if let PolicyKind::TimeSlice { slice_us } = &mut s.policy {
            *slice_us = None;
        }
    }
    if let Some(p) = &o.policy {
        s.policy = workload::choice::parse(p).map_err(|e| value_error(format!("policy: {e}")))?;
    }
    if let Some(m) = &o.mechanism {
        s.mechanism =
            workload::choice::parse(m).map_err(|e| value_error(format!("mechanism: {e}")))?;
    }
    if let Some(on) = o.sharing {
        s.framework.intra_sm_sharing = on;
    }
    let scheduler = o.scheduler.as_deref();
    let gpu = match (&o.gpu, &s.gpu) {
        (Some(g), _) => load_gpu(g, scheduler)?,
        (None, Some(g)) => load_gpu(g, scheduler).map_err(|e| {
            value_error(format!(
                "{}: `gpu`: {}",
                s.gpu_at.as_deref().unwrap_or(&s.file),
                e.message
            ))
        })?,
        (None, None) => load_gpu("gtx480", scheduler)?,
    };
    let max_cycles = o.max_cycles.or(s.max_cycles).unwrap_or(DEFAULT_MAX_CYCLES);
    let mut timing = TimedGpu::new(gpu);
    timing.options.instruction_limit = o.instruction_limit;
    let setup = Setup::for_scenario(&s, timing, max_cycles).map_err(scenario_error)?;
    Ok((s, setup))
}

/// Every TB arriving on or leaving an SM, as rows.
fn residency(r: &RunRecord) -> Vec<Value> {
    r.residency
        .iter()
        .map(|m| {
            let launch = m.tb.launch.0 as usize;
            json!({
                "cycle": m.cycle,
                "sm": m.sm.0,
                "launch": launch,
                "kernel": r.launch_names.get(launch),
                "tb": m.tb.index,
                "how": m.how,
            })
        })
        .collect()
}

/// Everything a finished run gives Python: the report, its CSVs, the per-launch statistics,
/// the preemption records and the TB residency log.
fn result_json(report: &Report, record: &RunRecord, samples: &[Value]) -> String {
    let launch_stats: Vec<Value> = record
        .kernels
        .iter()
        .filter_map(|k| {
            Some(json!({
                "process": k.process,
                "kernel": k.kernel,
                "launch": k.launch?,
                "stats": k.stats.as_deref()?,
            }))
        })
        .collect();
    to_json(&json!({
        "report": report,
        "csv": {
            "processes": report.processes_csv(),
            "kernels": report.kernels_csv(),
            "copies": report.copies_csv(),
            "requests": report.requests_csv(),
            "preemption": report.preemption_csv(),
            "bandwidth": workload::trace::bandwidth_csv(record),
        },
        "launch_stats": launch_stats,
        "preemptions": record.preemptions,
        "residency": residency(record),
        "sm_samples": samples,
        "core_period_fs": record.core_period_fs,
    }))
}

/// Every dump of a run: process, buffer, the file the command would write, `.npy` bytes.
type Dumps = Vec<(String, String, String, Vec<u8>)>;

/// A finished run as Python gets it: the JSON of [`result_json`] and the dumps.
type Finished = (String, Dumps);

fn dumps(record: &RunRecord) -> Dumps {
    record
        .dumps
        .iter()
        .map(|d| {
            (
                d.process.clone(),
                d.file.buffer.clone(),
                d.file.path.display().to_string(),
                d.npy(),
            )
        })
        .collect()
}

/// Python's `(json, [(process, buffer, file, npy bytes)])`.
type PyFinished = (String, Vec<(String, String, String, Py<PyBytes>)>);

fn to_py(py: Python<'_>, (json, dumps): Finished) -> PyFinished {
    let dumps = dumps
        .into_iter()
        .map(|(p, b, f, bytes)| (p, b, f, PyBytes::new(py, &bytes).unbind()))
        .collect();
    (json, dumps)
}

/// A scenario, loaded and checked (every name found, every input read).
#[pyclass(module = "switchyard._native", frozen)]
struct ScenarioHandle {
    scenario: Scenario,
}

#[pymethods]
impl ScenarioHandle {
    /// Loads the scenario file `path`.
    #[staticmethod]
    fn load(py: Python<'_>, path: &str) -> PyResult<ScenarioHandle> {
        let text = switchyard::input::read_text(Path::new(path), switchyard::input::Utf8::Strict)
            .map_err(|e| Fail::new("ScenarioError", e).raise(py))?;
        ScenarioHandle::from_toml(py, &text, path)
    }

    /// Parses scenario TOML `text`; `file` names it in messages, and its directory is where
    /// relative paths (PTX files, GPU files, dumps) are found.
    #[staticmethod]
    fn from_toml(py: Python<'_>, text: &str, file: &str) -> PyResult<ScenarioHandle> {
        let scenario = py
            .allow_threads(|| workload::parse(file, text, &Disk))
            .map_err(|e| scenario_error(e).raise(py))?;
        Ok(ScenarioHandle { scenario })
    }

    #[getter]
    fn file(&self) -> String {
        self.scenario.file.clone()
    }

    #[getter]
    fn description(&self) -> String {
        self.scenario.description.clone()
    }

    #[getter]
    fn warnings(&self) -> Vec<String> {
        self.scenario.warnings.clone()
    }

    #[getter]
    fn processes(&self) -> Vec<String> {
        self.scenario
            .processes
            .iter()
            .map(|p| p.name.clone())
            .collect()
    }

    /// Runs the scenario (and, with `alone`, each process alone for the metrics); JSON.
    #[pyo3(signature = (gpu=None, scheduler=None, policy=None, mechanism=None, time_slice_us=None, sharing=None, max_cycles=None, instruction_limit=None, alone=true, threads=None))]
    fn run(
        &self,
        py: Python<'_>,
        gpu: Option<String>,
        scheduler: Option<String>,
        policy: Option<String>,
        mechanism: Option<String>,
        time_slice_us: Option<f64>,
        sharing: Option<bool>,
        max_cycles: Option<u64>,
        instruction_limit: Option<u64>,
        alone: bool,
        threads: Option<usize>,
    ) -> PyResult<PyFinished> {
        let o = Overrides {
            gpu,
            scheduler,
            policy,
            mechanism,
            time_slice_us,
            sharing,
            max_cycles,
            instruction_limit,
        };
        let (s, setup) = prepare(&self.scenario, &o).map_err(|f| f.raise(py))?;
        let threads =
            threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        let out = py.allow_threads(|| {
            workload::run(&s, &setup, alone, threads, &mut |_| {})
                .map(|(report, record)| (result_json(&report, &record, &[]), dumps(&record)))
        });
        out.map(|f| to_py(py, f))
            .map_err(|e| run_error(e.to_string()).raise(py))
    }

    /// Starts a stepped run (no alone runs, so no multiprogram metrics); see [`Run`].
    #[pyo3(signature = (gpu=None, scheduler=None, policy=None, mechanism=None, time_slice_us=None, sharing=None, max_cycles=None, instruction_limit=None, sample_every=None))]
    fn start(
        &self,
        py: Python<'_>,
        gpu: Option<String>,
        scheduler: Option<String>,
        policy: Option<String>,
        mechanism: Option<String>,
        time_slice_us: Option<f64>,
        sharing: Option<bool>,
        max_cycles: Option<u64>,
        instruction_limit: Option<u64>,
        sample_every: Option<u64>,
    ) -> PyResult<Run> {
        let o = Overrides {
            gpu,
            scheduler,
            policy,
            mechanism,
            time_slice_us,
            sharing,
            max_cycles,
            instruction_limit,
        };
        if sample_every == Some(0) {
            return Err(value_error("sample_every must be at least 1 cycle").raise(py));
        }
        let (s, setup) = prepare(&self.scenario, &o).map_err(|f| f.raise(py))?;
        Ok(Run::spawn(s, setup, sample_every))
    }
}

/// What the stepped run's thread says.
enum Said {
    /// Paused before stepping `cycle`: a snapshot.
    Paused(String),
    /// Finished (a result as JSON, or the error).
    Done(Result<Finished, String>),
}

/// The per-SM counters and the launches as the machine stands now.
fn snapshot(machine: &Machine) -> Value {
    let counters = machine.counters_now();
    let sms: Vec<Value> = machine
        .sm_ids()
        .map(|sm| {
            let s = counters.sm(sm);
            let ledger = machine.ledger(sm);
            json!({
                "sm": sm.0,
                "resident_tbs": machine.resident(sm).count(),
                "used_warps": ledger.used_warps,
                "active_cycles": s.active_cycles,
                "tbs": s.tbs,
                "warp_instructions": s.warp_instructions,
                "resident_warp_cycles": s.resident_warp_cycles,
            })
        })
        .collect();
    let active: Vec<Value> = machine
        .active()
        .iter()
        .map(|&l| {
            json!({
                "launch": l.0,
                "kernel": machine.launch(l).ctx().kernel.name,
                "tbs": machine.launch(l).tbs(),
                "tbs_done": machine.launch(l).done(),
                "tbs_resident": machine.launch(l).resident(),
                "warp_instructions": machine.warp_instructions(l),
            })
        })
        .collect();
    json!({
        "cycle": machine.cycle(),
        "time_us": machine.now_fs() as f64 / workload::system::FS_PER_US as f64,
        "sms": sms,
        "active_launches": active,
    })
}

/// The stepped run's injector: pauses at the requested cycle, samples every `every` cycles.
struct Stepper {
    until: u64,
    to_python: Sender<Said>,
    from_python: Receiver<u64>,
    every: Option<u64>,
    next_sample: u64,
    samples: Vec<Value>,
}

impl workload::system::Injector for Stepper {
    fn before_cycle(&mut self, machine: &Machine, _framework: &mut Framework) {
        let cycle = machine.cycle();
        if let Some(every) = self.every {
            if cycle >= self.next_sample {
                // Cycles skipped while the GPU idles are not sampled: a sample is taken at
                // the first stepped cycle at or after each multiple of `every`.
                let mut row = snapshot(machine);
                row["sample_of"] = json!(self.next_sample);
                self.samples.push(row);
                self.next_sample = (cycle / every + 1) * every;
            }
        }
        if cycle < self.until {
            return;
        }
        let paused = self
            .to_python
            .send(Said::Paused(snapshot(machine).to_string()));
        match paused.ok().and_then(|()| self.from_python.recv().ok()) {
            Some(until) => self.until = until,
            // The Python object was closed or dropped: stop the run here. The injector
            // cannot end `System::run_with`, so it unwinds (without the panic hook) to the
            // thread's `catch_unwind`, which drops the machine.
            None => std::panic::resume_unwind(Box::new(Cancelled)),
        }
    }
}

/// The payload that unwinds a stepped run whose Python object went away.
struct Cancelled;

/// A scenario run that can be paused: `run_until(cycle)` steps the machine until the first
/// cycle at or after `cycle` that it steps (idle stretches between host events are jumped)
/// and returns a snapshot of its counters; `finish()` runs it to its end and returns the
/// result. The run lives on a thread of its own.
#[pyclass(module = "switchyard._native")]
struct Run {
    to_run: Option<Sender<u64>>,
    /// Behind a mutex only because a Python class must be `Sync`; one caller at a time.
    from_run: Mutex<Receiver<Said>>,
    thread: Option<JoinHandle<()>>,
    result: Option<Result<Finished, String>>,
    last_cycle: Option<u64>,
}

impl Run {
    fn spawn(s: Scenario, setup: Setup, every: Option<u64>) -> Run {
        let (to_python, from_run) = channel();
        let (to_run, from_python) = channel::<u64>();
        let thread = std::thread::spawn(move || {
            // Wait for the first target before stepping at all.
            let Ok(until) = from_python.recv() else {
                return;
            };
            let mut stepper = Stepper {
                until,
                to_python: to_python.clone(),
                from_python,
                every,
                next_sample: 0,
                samples: Vec::new(),
            };
            let gpu = setup.timing.gpu.name.clone();
            let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                System::new(setup, &s.processes)
                    .and_then(|sys| sys.run_with(&mut |_| {}, Some(&mut stepper)))
            }));
            let outcome = match run {
                Ok(r) => r
                    .map(|record| {
                        let report = Report::new(&s, &gpu, &record, None);
                        (
                            result_json(&report, &record, &stepper.samples),
                            dumps(&record),
                        )
                    })
                    .map_err(|e| e.to_string()),
                Err(payload) if payload.is::<Cancelled>() => return,
                Err(_) => Err("the stepped run panicked (internal)".to_string()),
            };
            let _ = to_python.send(Said::Done(outcome));
        });
        Run {
            to_run: Some(to_run),
            from_run: Mutex::new(from_run),
            thread: Some(thread),
            result: None,
            last_cycle: None,
        }
    }

    /// Asks the run to go on until `until` and waits for what it says.
    fn advance(&mut self, py: Python<'_>, until: u64) -> PyResult<Option<String>> {
        if self.result.is_some() {
            return Ok(None);
        }
        let Some(tx) = &self.to_run else {
            return Ok(None);
        };
        let sent = tx.send(until).is_ok();
        let said = py.allow_threads(|| {
            let rx = self.from_run.lock().unwrap_or_else(|e| e.into_inner());
            if sent {
                rx.recv().ok()
            } else {
                None
            }
        });
        match said {
            Some(Said::Paused(snap)) => {
                let v: Value = serde_json::from_str(&snap).expect("our own JSON");
                self.last_cycle = v["cycle"].as_u64();
                Ok(Some(snap))
            }
            Some(Said::Done(r)) => {
                self.result = Some(r);
                self.to_run = None;
                if let Some(t) = self.thread.take() {
                    let _ = py.allow_threads(|| t.join());
                }
                Ok(None)
            }
            None => {
                self.result = Some(Err(
                    "the stepped run's thread ended without a result (internal)".into(),
                ));
                Ok(None)
            }
        }
    }
}

#[pymethods]
impl Run {
    /// Steps until `cycle`; the snapshot as JSON, or None when the run ended first.
    fn run_until(&mut self, py: Python<'_>, cycle: u64) -> PyResult<Option<String>> {
        if let Some(c) = self.last_cycle {
            if cycle <= c {
                return Err(value_error(format!(
                    "run_until({cycle}): the run is already at cycle {c}; a stepped run only goes forward"
                ))
                .raise(py));
            }
        }
        self.advance(py, cycle)
    }

    /// Runs to the end; the result as JSON (raises the run's error).
    fn finish(&mut self, py: Python<'_>) -> PyResult<PyFinished> {
        self.advance(py, u64::MAX)?;
        match self.result.as_ref().expect("finished") {
            Ok(f) => Ok(to_py(py, f.clone())),
            Err(e) => Err(run_error(e.clone()).raise(py)),
        }
    }

    /// Stops the run where it is and waits for its thread to end (a dropped run stops the
    /// same way, without waiting). Afterwards `run_until` returns None and `finish` raises.
    fn close(&mut self, py: Python<'_>) {
        self.to_run = None;
        if let Some(t) = self.thread.take() {
            let _ = py.allow_threads(|| t.join());
        }
        if self.result.is_none() {
            self.result = Some(Err("the stepped run was closed before it finished".into()));
        }
    }

    /// Whether the run has ended.
    #[getter]
    fn done(&self) -> bool {
        self.result.is_some()
    }

    /// The cycle of the latest pause (None before the first).
    #[getter]
    fn cycle(&self) -> Option<u64> {
        self.last_cycle
    }
}

/// The preemption study (`switchyard study`); JSON.
#[pyfunction]
#[pyo3(signature = (gpu="gtx480", low="dgemv", low_size="large", high="gemm", arrival=0.3, arrival_us=None, mechanisms=None, threads=None, max_cycles=None, instruction_limit=None))]
fn study(
    py: Python<'_>,
    gpu: &str,
    low: &str,
    low_size: &str,
    high: &str,
    arrival: f64,
    arrival_us: Option<f64>,
    mechanisms: Option<String>,
    threads: Option<usize>,
    max_cycles: Option<u64>,
    instruction_limit: Option<u64>,
) -> PyResult<String> {
    use experiment::study::{self, StudyConfig};
    let go = || -> Result<String, Fail> {
        let mut c = StudyConfig::default_on(load_gpu(gpu, None)?);
        if let Some(m) = max_cycles {
            c.max_cycles = m;
        }
        c.instruction_limit = instruction_limit;
        c.low = (kernel(low)?, size(low_size)?);
        c.high.0 = kernel(high)?;
        c.arrival = match arrival_us {
            Some(us) if us.is_finite() && (0.0..=1.0e7).contains(&us) => study::Arrival::AtUs(us),
            Some(us) => return Err(value_error(format!("arrival_us {us} is out of 0..=10^7"))),
            None if (0.0..=1.0).contains(&arrival) => study::Arrival::IntoLowKernel(arrival),
            None => return Err(value_error(format!("arrival {arrival} is out of 0..=1"))),
        };
        if let Some(list) = &mechanisms {
            c.mechanisms = workload::choice::parse_list(list)
                .map_err(|e| value_error(format!("mechanisms: {e}")))?;
        }
        if let Some(t) = threads {
            c.threads = t.max(1);
        }
        let r = py
            .allow_threads(|| study::run(&c, &|_, _, _| {}))
            .map_err(|e| run_error(e.to_string()))?;
        Ok(to_json(&r))
    };
    go().map_err(|f| f.raise(py))
}

/// The Switchyard version these bindings were built from.
#[pyfunction]
fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

/// Reads the sweep file `file` (or parses `text` named `file`); a bad one is a `SweepError`
/// with its file, line and field.
fn read_sweep(file: &str, text: Option<String>) -> Result<(String, ::sweep::Sweep), Fail> {
    let text = match text {
        Some(t) => t,
        None => switchyard::input::read_text(Path::new(file), switchyard::input::Utf8::Strict)
            .map_err(value_error)?,
    };
    let spec = ::sweep::parse(file, &text).map_err(|e| Fail {
        class: "SweepError",
        message: e.to_string(),
        fields: Some((e.location, e.field, e.what)),
    })?;
    Ok((text, spec))
}

/// A sweep summary as the Python side reads it.
fn summary_json(summary: &::sweep::Summary) -> String {
    to_json(&json!({
        "run": summary.run,
        "points": summary.points,
        "reused": summary.reused,
        "computed": summary.computed,
        "failed": summary.failed,
        "duplicates": summary.duplicates,
        "database_s": summary.database.as_secs_f64(),
        "keys": summary.keys,
    }))
}

/// Runs a sweep (the sweep file `file`, or `text` named `file`) into the database `db`, as
/// `switchyard sweep` does; JSON of the summary. A bad sweep file raises `SweepError` with
/// its file, line and field.
#[pyfunction]
#[pyo3(name = "sweep", signature = (file, db, text=None, jobs=None, retry_failed=false))]
fn run_sweep(
    py: Python<'_>,
    file: &str,
    db: &str,
    text: Option<String>,
    jobs: Option<usize>,
    retry_failed: bool,
) -> PyResult<String> {
    let (_, spec) = read_sweep(file, text).map_err(|f| f.raise(py))?;
    let jobs = jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let options = ::sweep::Options {
        jobs: jobs.max(1),
        retry_failed,
    };
    let summary = py
        .allow_threads(|| {
            ::sweep::run(
                &spec,
                Path::new(db),
                options,
                &switchyard::suite_run::sweep_kernel,
                &mut |_| {},
            )
        })
        .map_err(|e| run_error(e.to_string()).raise(py))?;
    Ok(summary_json(&summary))
}

/// A sweep started on its database for a foreign executor (the Ray backend,
/// `switchyard/_ray.py`): the points to run, and the database that records each result as it
/// comes back (`sweep::start` and `sweep::Recorder`, the same pieces as `sweep`).
#[pyclass(module = "switchyard._native", frozen)]
struct SweepDriver {
    /// The sweep file's text, sent to the workers (they need not see the file).
    #[pyo3(get)]
    text: String,
    /// The folder the sweep's relative paths are taken from, made absolute here (a worker's
    /// current folder is not the driver's).
    #[pyo3(get)]
    dir: String,
    /// The points to run: JSON list of `{"index", "key"}`.
    pending: String,
    /// Behind a mutex only because a Python class must be `Sync`; one caller at a time.
    recorder: Mutex<::sweep::Recorder>,
}

#[pymethods]
impl SweepDriver {
    /// The points to run, JSON: `[{"index": N, "key": "..."}, ...]` in the sweep's order.
    fn pending(&self) -> String {
        self.pending.clone()
    }

    /// Records the result `result` (the JSON `sweep_point` returned) of point `index`;
    /// returns whether a row was written (`False`: the key already had its row, a result
    /// delivered twice). A result whose key differs from the driver's is recorded as failed,
    /// naming both keys.
    fn record(&self, py: Python<'_>, index: usize, result: &str) -> PyResult<bool> {
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Point {
            key: String,
            outcome: ::sweep::Outcome,
        }
        let p: Point = serde_json::from_str(result).map_err(|e| {
            value_error(format!("point {index}: not a point's result: {e}")).raise(py)
        })?;
        let recorded = py
            .allow_threads(|| {
                let mut r = self.recorder.lock().unwrap_or_else(|e| e.into_inner());
                r.record_from(index, &p.key, &p.outcome)
            })
            .map_err(|e| run_error(e.to_string()).raise(py))?;
        Ok(recorded == ::sweep::Recorded::Written)
    }

    /// JSON of the summary so far (as `sweep` returns at its end).
    fn summary(&self) -> String {
        summary_json(
            &self
                .recorder
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .summary(),
        )
    }
}

/// Starts a sweep (the sweep file `file`, or `text` named `file`) on the database `db` for a
/// foreign executor: a new run, every point's key, the points that cannot be prepared
/// recorded as failed. A bad sweep file raises `SweepError`.
#[pyfunction]
#[pyo3(signature = (file, db, text=None, retry_failed=false))]
fn sweep_start(
    py: Python<'_>,
    file: &str,
    db: &str,
    text: Option<String>,
    retry_failed: bool,
) -> PyResult<SweepDriver> {
    let (text, spec) = read_sweep(file, text).map_err(|f| f.raise(py))?;
    let started = py
        .allow_threads(|| ::sweep::start(&spec, Path::new(db), retry_failed))
        .map_err(|e| run_error(e.to_string()).raise(py))?;
    let pending: Vec<Value> = started
        .pending
        .iter()
        .map(|&i| json!({"index": i, "key": started.prepared[i].key}))
        .collect();
    let dir = std::path::absolute(if spec.dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        spec.dir.as_path()
    })
    .map_err(|e| value_error(format!("{}: {e}", spec.dir.display())).raise(py))?;
    Ok(SweepDriver {
        text,
        dir: dir.display().to_string(),
        pending: to_json(&pending),
        recorder: Mutex::new(started.recorder),
    })
}

/// Runs point `index` of the sweep `text` (named `file`, its relative paths taken from
/// `dir`), as a worker of a foreign executor: JSON `{"key", "outcome"}` for
/// `SweepDriver.record`. A point that fails is an outcome, not an exception.
#[pyfunction]
fn sweep_point(
    py: Python<'_>,
    file: &str,
    text: &str,
    dir: &str,
    index: usize,
) -> PyResult<String> {
    let (_, mut spec) = read_sweep(file, Some(text.to_string())).map_err(|f| f.raise(py))?;
    spec.dir = std::path::PathBuf::from(dir);
    let (key, outcome) = py
        .allow_threads(|| ::sweep::run_point(&spec, index, &switchyard::suite_run::sweep_kernel))
        .map_err(|e| value_error(e.to_string()).raise(py))?;
    Ok(to_json(&json!({"key": key, "outcome": outcome})))
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(presets, m)?)?;
    m.add_function(wrap_pyfunction!(suite_kernels, m)?)?;
    m.add_function(wrap_pyfunction!(load_ptx, m)?)?;
    m.add_function(wrap_pyfunction!(run_kernel, m)?)?;
    m.add_function(wrap_pyfunction!(run_ptx, m)?)?;
    m.add_function(wrap_pyfunction!(study, m)?)?;
    m.add_function(wrap_pyfunction!(version, m)?)?;
    m.add_function(wrap_pyfunction!(run_sweep, m)?)?;
    m.add_function(wrap_pyfunction!(sweep_start, m)?)?;
    m.add_function(wrap_pyfunction!(sweep_point, m)?)?;
    m.add_class::<SweepDriver>()?;
    m.add_class::<ScenarioHandle>()?;
    m.add_class::<Run>()?;
    Ok(())
}
