//! A point made ready to run: its inputs read, its key computed, its run set up; and its run.
//!
//! A point's key is the SHA-256 of everything that determines its result: the Switchyard
//! version, the point's fields (less the paths of its scenario and GPU files), the GPU
//! configuration it resolves to (every field, as JSON), the scenario text after the sweep's
//! overrides and the bytes of every file that scenario reads (its PTX, its data), or a suite
//! kernel's PTX. Two points with the same key compute the same result, so a database holds one
//! row per key and a sweep never runs a key it already has.
//!
//! Invariants: preparing a point reads files but runs nothing; a point that cannot be prepared
//! still has a key (from what could be read) and is recorded as failed with its error.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::time::Instant;

use gpu::config::GpuConfig;
use gpu::timing::{TimedGpu, TimedStats};
use sha2::{Digest, Sha256};
use workload::{Files, Scenario, Setup};

use crate::spec::{self, Point, Sweep};

/// Core cycles a scenario may run by default (as `switchyard scenario`).
pub const DEFAULT_MAX_CYCLES: u64 = 1 << 32;

/// What a suite kernel's run gave: whether it verified (and how), and every timed launch.
#[derive(Clone, Debug)]
pub struct KernelOutcome {
    pub verified: bool,
    pub detail: String,
    pub launches: Vec<TimedStats>,
}

/// Runs a suite kernel's host program on a timed GPU (the `switchyard` library provides it:
/// the suite's device lives there).
pub type KernelRunner<'a> = dyn Fn(
        &'static dyn suite::Kernel,
        suite::Target,
        suite::Size,
        u64,
        &TimedGpu,
    ) -> Result<KernelOutcome, String>
    + Sync
    + 'a;

/// What a prepared point runs.
pub enum Job {
    Kernel {
        kernel: &'static dyn suite::Kernel,
        target: suite::Target,
        size: suite::Size,
        seed: u64,
        timing: Box<TimedGpu>,
    },
    Scenario {
        scenario: Box<Scenario>,
        setup: Box<Setup>,
        alone: bool,
    },
}

/// A point ready to run (or that failed to get ready).
pub struct Prepared {
    /// The point's number in its sweep.
    pub index: usize,
    pub key: String,
    pub params: serde_json::Value,
    pub job: Result<Job, String>,
}

/// A point's result: what the database's columns hold. Serializable, so that a point run in
/// another process (a Ray task) hands it back to the process that writes the database.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Outcome {
    /// `ok`, or `failed` (an error, or a result that did not verify).
    pub ok: bool,
    pub error: Option<String>,
    pub verified: Option<bool>,
    pub cycles: Option<u64>,
    pub warp_instructions: Option<u64>,
    pub simulated_us: Option<f64>,
    pub launches: Option<u64>,
    pub antt: Option<f64>,
    pub stp: Option<f64>,
    pub fairness: Option<f64>,
    /// Wall-clock seconds the point's run took (information only).
    pub wall_s: f64,
    /// The whole result as JSON: a scenario's report, or a kernel's launches.
    pub result: Option<String>,
}

impl Outcome {
    pub fn failed(error: String) -> Outcome {
        Outcome {
            ok: false,
            error: Some(error),
            ..Outcome::default()
        }
    }
}

/// Files read through the real file system, each one's bytes kept for the key.
struct Recording {
    read: RefCell<Vec<Vec<u8>>>,
}

impl Files for Recording {
    fn read(&self, path: &Path) -> Result<Vec<u8>, String> {
        self.read_at_most(path, u64::MAX)
    }

    fn read_at_most(&self, path: &Path, limit: u64) -> Result<Vec<u8>, String> {
        let b = workload::Disk.read_at_most(path, limit)?;
        self.read.borrow_mut().push(b.clone());
        Ok(b)
    }
}

fn hash_key(parts: &[&[u8]]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        // Length-prefixed, so parts cannot run into each other.
        h.update((p.len() as u64).to_le_bytes());
        h.update(p);
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// A path written in the sweep file, taken from the sweep file's folder.
fn relative(sweep: &Sweep, path: &str) -> PathBuf {
    let p = Path::new(path);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        sweep.dir.join(p)
    }
}

/// The GPU a point names (a preset, or a configuration file from the sweep's folder), with
/// its scheduler override.
fn load_gpu(sweep: &Sweep, p: &Point, name: &str) -> Result<GpuConfig, String> {
    let path = relative(sweep, name);
    let mut g = if name.ends_with(".toml") || path.is_file() {
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        GpuConfig::from_toml(&path.display().to_string(), &text).map_err(|e| e.to_string())?
    } else {
        GpuConfig::preset(name).map_err(|e| e.to_string())?
    };
    if let Some(s) = p.str("scheduler") {
        g.sm.scheduler = spec::scheduler(s)?;
    }
    Ok(g)
}

/// Sets `value` at the dotted `path` of a TOML document (a number indexes an array).
fn set_path(doc: &mut toml::Value, path: &str, value: toml::Value) -> Result<(), String> {
    let parts: Vec<&str> = path.split('.').collect();
    let mut here = doc;
    for (i, part) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        here = match here {
            toml::Value::Table(t) => {
                if last {
                    t.insert(part.to_string(), value);
                    return Ok(());
                }
                t.entry(part.to_string())
                    .or_insert_with(|| toml::Value::Table(toml::Table::new()))
            }
            toml::Value::Array(a) => {
                let n: usize = part
                    .parse()
                    .map_err(|_| format!("`{part}` indexes a list: write a number"))?;
                let len = a.len();
                let slot = a
                    .get_mut(n)
                    .ok_or_else(|| format!("index {n} is past the list's {len} entries"))?;
                if last {
                    *slot = value;
                    return Ok(());
                }
                slot
            }
            other => {
                return Err(format!(
                    "`{part}`: the scenario's value there is a {}, not a table or a list",
                    other.type_str()
                ))
            }
        };
    }
    Ok(())
}

/// Makes point `index` of `sweep` ready to run.
pub fn prepare(sweep: &Sweep, index: usize) -> Prepared {
    let p = &sweep.points[index];
    let params = p.params_json();
    // The fields that go into the key: all but the paths of files whose contents do.
    let mut keyed = p.fields.clone();
    keyed.remove("scenario");
    keyed.remove("gpu");
    let keyed = serde_json::to_string(&keyed).expect("serializable");
    let version = env!("CARGO_PKG_VERSION").as_bytes();
    let threads = sweep.threads;
    let gpu = p
        .str("gpu")
        .map(|g| load_gpu(sweep, p, g).map_err(|e| format!("{}: `gpu`: {e}", p.at["gpu"])))
        .transpose();
    let gpu_json = |g: &Option<GpuConfig>| {
        g.as_ref()
            .map(|g| serde_json::to_string(g).expect("serializable"))
            .unwrap_or_default()
    };
    let fail = |key: String, e: String| Prepared {
        index,
        key,
        params: params.clone(),
        job: Err(e),
    };
    if let Some(name) = p.str("kernel") {
        let k = suite::by_name(name).expect("checked when the sweep was read");
        let gpu = match gpu {
            Ok(g) => g,
            Err(e) => return fail(hash_key(&[version, keyed.as_bytes()]), e),
        };
        let gpu = match gpu {
            Some(g) => g,
            // `run`'s default GPU, with the point's scheduler.
            None => match load_gpu(sweep, p, "gtx480") {
                Ok(g) => g,
                Err(e) => return fail(hash_key(&[version, keyed.as_bytes()]), e),
            },
        };
        let target = p
            .str("target")
            .map(|t| spec::target(t).expect("checked"))
            .unwrap_or_else(|| k.default_target());
        let size = p
            .str("size")
            .map(|s| spec::size(s).expect("checked"))
            .unwrap_or(suite::Size::Small);
        let seed = p
            .fields
            .get("seed")
            .and_then(toml::Value::as_integer)
            .unwrap_or(1) as u64;
        let ptx = k.ptx(target).unwrap_or_default();
        let key = hash_key(&[
            version,
            keyed.as_bytes(),
            gpu_json(&Some(gpu.clone())).as_bytes(),
            ptx.as_bytes(),
        ]);
        if k.ptx(target).is_none() {
            return fail(
                key,
                format!(
                    "{}: `target`: {name} is not compiled for {}",
                    p.at.get("target").or(p.at.get("kernel")).expect("a field"),
                    target.name()
                ),
            );
        }
        let mut timing = TimedGpu::new(gpu);
        timing.options.threads = threads;
        timing.options.max_cycles = max_cycles(p);
        return Prepared {
            index,
            key,
            params,
            job: Ok(Job::Kernel {
                kernel: k,
                target,
                size,
                seed,
                timing: Box::new(timing),
            }),
        };
    }
    // A scenario point.
    let path = relative(sweep, p.str("scenario").expect("checked"));
    let file = path.display().to_string();
    let original = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) => {
            return fail(
                hash_key(&[version, keyed.as_bytes()]),
                format!("{}: `scenario`: {file}: {e}", p.at["scenario"]),
            )
        }
    };
    let overrides: Vec<(&String, &toml::Value)> = p
        .fields
        .iter()
        .filter(|(k, _)| k.starts_with("scenario.") || *k == "seed" || *k == "size")
        .collect();
    let (name, text) = if overrides.is_empty() {
        (file.clone(), original)
    } else {
        match apply_overrides(&original, &overrides) {
            Ok(t) => (format!("{file} (with the sweep's overrides)"), t),
            Err((field, e)) => {
                return fail(
                    hash_key(&[version, keyed.as_bytes(), original.as_bytes()]),
                    p.error(field, e).to_string(),
                )
            }
        }
    };
    let files = Recording {
        read: RefCell::new(Vec::new()),
    };
    let parsed = workload::parse(&name, &text, &files);
    let read = files.read.into_inner();
    let gpu_text = match &gpu {
        Ok(g) => gpu_json(g),
        Err(_) => String::new(),
    };
    let mut parts: Vec<&[u8]> = vec![
        version,
        keyed.as_bytes(),
        gpu_text.as_bytes(),
        text.as_bytes(),
    ];
    parts.extend(read.iter().map(Vec::as_slice));
    let mut s = match parsed {
        Ok(s) => s,
        Err(e) => return fail(hash_key(&parts), e.to_string()),
    };
    let gpu = match gpu {
        Ok(Some(g)) => g,
        Ok(None) => {
            let named = s.gpu.clone().unwrap_or_else(|| "gtx480".into());
            let loaded = if named.ends_with(".toml") || Path::new(&named).is_file() {
                std::fs::read_to_string(&named)
                    .map_err(|e| format!("{named}: {e}"))
                    .and_then(|t| GpuConfig::from_toml(&named, &t).map_err(|e| e.to_string()))
            } else {
                GpuConfig::preset(&named).map_err(|e| e.to_string())
            };
            match loaded.and_then(|mut g| {
                if let Some(sch) = p.str("scheduler") {
                    g.sm.scheduler = spec::scheduler(sch)?;
                }
                Ok(g)
            }) {
                Ok(g) => g,
                Err(e) => {
                    return fail(
                        hash_key(&parts),
                        format!("{}: `gpu`: {e}", s.gpu_at.as_deref().unwrap_or(&name)),
                    )
                }
            }
        }
        Err(e) => return fail(hash_key(&parts), e),
    };
    let gpu_text = gpu_json(&Some(gpu.clone()));
    parts[2] = gpu_text.as_bytes();
    let key = hash_key(&parts);
    if let Some(v) = p.fields.get("policy") {
        s.policy = workload::choice::from_value(v.clone()).expect("checked");
    }
    if let Some(v) = p.fields.get("mechanism") {
        s.mechanism = workload::choice::from_value(v.clone()).expect("checked");
    }
    if let Some(on) = p.fields.get("sharing").and_then(toml::Value::as_bool) {
        s.framework.intra_sm_sharing = on;
    }
    if let Some(v) = p.fields.get("time_slice_us") {
        s.time_slice_us = v
            .as_float()
            .or(v.as_integer().map(|i| i as f64))
            .expect("checked");
        if let sched::PolicyKind::TimeSlice { slice_us } = &mut s.policy {
            *slice_us = None;
        }
    }
    let alone = p
        .fields
        .get("alone")
        .and_then(toml::Value::as_bool)
        .unwrap_or(true);
    let cycles = max_cycles(p).or(s.max_cycles).unwrap_or(DEFAULT_MAX_CYCLES);
    let mut timing = TimedGpu::new(gpu);
    timing.options.threads = threads;
    let setup = match Setup::for_scenario(&s, timing, cycles) {
        Ok(setup) => setup,
        Err(e) => return fail(key, e.to_string()),
    };
    Prepared {
        index,
        key,
        params,
        job: Ok(Job::Scenario {
            scenario: Box::new(s),
            setup: Box::new(setup),
            alone,
        }),
    }
}

fn max_cycles(p: &Point) -> Option<u64> {
    p.fields
        .get("max_cycles")
        .and_then(toml::Value::as_integer)
        .map(|i| i as u64)
}

/// The scenario text with the point's `scenario.PATH`, `seed` and `size` fields set (`seed`
/// and `size` in every process that runs a suite kernel). On an error: the field, what.
fn apply_overrides<'a>(
    text: &str,
    overrides: &[(&'a String, &toml::Value)],
) -> Result<String, (&'a str, String)> {
    let mut doc: toml::Value = toml::from_str(text).map_err(|e| {
        (
            overrides[0].0.as_str(),
            format!("the scenario does not parse: {e}"),
        )
    })?;
    for (field, value) in overrides {
        match field.as_str() {
            "seed" | "size" => {
                let procs = doc
                    .get_mut("process")
                    .and_then(toml::Value::as_array_mut)
                    .map(|a| a.as_mut_slice())
                    .unwrap_or_default();
                for proc in procs {
                    if let Some(t) = proc.as_table_mut().filter(|t| t.contains_key("suite")) {
                        t.insert(field.to_string(), (*value).clone());
                    }
                }
            }
            path => {
                let path = &path["scenario.".len()..];
                set_path(&mut doc, path, (*value).clone()).map_err(|e| (field.as_str(), e))?;
            }
        }
    }
    toml::to_string(&doc).map_err(|e| (overrides[0].0.as_str(), e.to_string()))
}

/// Runs a prepared point (its job must be `Ok`).
pub fn run(job: &Job, kernels: &KernelRunner<'_>) -> Outcome {
    let start = Instant::now();
    let mut o = match job {
        Job::Kernel {
            kernel,
            target,
            size,
            seed,
            timing,
        } => match kernels(*kernel, *target, *size, *seed, timing) {
            Err(e) => Outcome::failed(e),
            Ok(k) => {
                let cycles: u64 = k.launches.iter().map(|l| l.cycles).sum();
                let launches: Vec<serde_json::Value> = k
                    .launches
                    .iter()
                    .map(|l| {
                        serde_json::json!({
                            "kernel": l.kernel,
                            "cycles": l.cycles,
                            "warp_instructions": l.warp_instructions,
                            "ipc": l.ipc,
                            "tbs": l.tbs,
                            "achieved_occupancy": l.achieved_occupancy,
                        })
                    })
                    .collect();
                let result = serde_json::json!({
                    "kernel": kernel.name(),
                    "target": target.name(),
                    "size": size.name(),
                    "seed": seed,
                    "gpu": timing.gpu.name,
                    "verified": k.verified,
                    "detail": k.detail,
                    "launches": launches,
                });
                Outcome {
                    ok: k.verified,
                    error: (!k.verified).then(|| format!("did not verify: {}", k.detail)),
                    verified: Some(k.verified),
                    cycles: Some(cycles),
                    warp_instructions: Some(k.launches.iter().map(|l| l.warp_instructions).sum()),
                    simulated_us: Some(cycles as f64 / timing.gpu.sm.clock_mhz),
                    launches: Some(k.launches.len() as u64),
                    result: Some(result.to_string()),
                    ..Outcome::default()
                }
            }
        },
        Job::Scenario {
            scenario,
            setup,
            alone,
        } => match workload::run(scenario, setup, *alone, 1, &mut |_| {}) {
            Err(e) => Outcome::failed(e.to_string()),
            Ok((r, _)) => {
                let failed: Vec<String> = r
                    .processes
                    .iter()
                    .filter(|p| !p.verified)
                    .map(|p| format!("{}: {}", p.name, p.detail))
                    .collect();
                Outcome {
                    ok: r.all_verified,
                    error: (!r.all_verified)
                        .then(|| format!("did not verify: {}", failed.join("; "))),
                    verified: Some(r.all_verified),
                    cycles: Some(r.cycles),
                    warp_instructions: Some(r.warp_instructions),
                    simulated_us: Some(r.simulated_us),
                    launches: Some(r.kernels.len() as u64),
                    antt: r.metrics.map(|m| m.antt),
                    stp: r.metrics.map(|m| m.stp),
                    fairness: r.metrics.map(|m| m.fairness),
                    result: Some(serde_json::to_string(&r).expect("serializable")),
                    ..Outcome::default()
                }
            }
        },
    };
    o.wall_s = start.elapsed().as_secs_f64();
    o
}
