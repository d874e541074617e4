//! `switchyard hardware`: the suite on a real GPU, and its times beside a timed run's.
//!
//! With a device server (`tools/cuda_device.py` on a machine with a GPU), each suite host
//! program runs on the GPU as it runs on the simulator: the same PTX, the same seeded inputs,
//! verified against the same CPU reference. Every launch is timed, and the report is written
//! as JSON after every kernel. `--compare` sets a `switchyard run --stats` file beside the
//! report (the one just made, or an earlier one given by `--report`): simulated against real
//! cycles per kernel, their correlation and mean error.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use suite::{Size, Target};
use switchyard::hardware::{compare, HardwareInfo, HardwareLaunch, KernelTimes, ServerDevice};

use super::{Outcome, SizeArg};

#[derive(clap::Args)]
pub(crate) struct HardwareArgs {
    /// Suite kernel names. Default: the whole suite.
    items: Vec<String>,
    /// Which committed PTX to load (every suite kernel has sm_90).
    #[arg(long, value_parser = ["sm_70", "sm_80", "sm_90"], default_value = "sm_90")]
    target: String,
    /// Problem size for suite kernels.
    #[arg(long, value_enum, default_value_t = SizeArg::Small)]
    size: SizeArg,
    /// Seed of the input generators.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The device server, run by `sh -c` (it speaks the protocol described in
    /// tools/cuda_device.py; `--reps N` there sets the timed repetitions per launch).
    #[arg(long, default_value = "python3 tools/cuda_device.py")]
    server: String,
    /// Where the report goes (JSON; rewritten after every kernel).
    #[arg(long, default_value = "switchyard-hardware.json")]
    out: PathBuf,
    /// Do not run anything: read this earlier report instead (for `--compare`).
    #[arg(long, conflicts_with_all = ["items", "server"])]
    report: Option<PathBuf>,
    /// A `switchyard run --stats` file to set beside the real times.
    #[arg(long)]
    compare: Option<PathBuf>,
    /// The real GPU's SM clock for converting its times to cycles (MHz). Default: the
    /// highest clock read during the runs, else the GPU's maximum.
    #[arg(long)]
    hw_clock_mhz: Option<f64>,
    /// Print JSON instead of tables.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize, Deserialize)]
struct Report {
    switchyard: String,
    hardware: HardwareInfo,
    target: String,
    size: String,
    seed: u64,
    runs: Vec<KernelRun>,
}

#[derive(Serialize, Deserialize)]
struct KernelRun {
    kernel: String,
    verified: bool,
    detail: String,
    launches: Vec<HardwareLaunch>,
}

fn target_named(name: &str) -> Target {
    Target::ALL
        .into_iter()
        .find(|t| t.name() == name)
        .expect("clap checked the target")
}

fn write_report(path: &Path, report: &Report) -> Result<(), String> {
    let text = serde_json::to_string_pretty(report).map_err(|e| e.to_string())?;
    // An interrupted run never leaves half a report.
    switchyard::output::write_atomic(path, text.as_bytes())
}

fn run_on_hardware(args: &HardwareArgs) -> Result<(Report, bool), String> {
    let size: Size = args.size.size();
    let target = target_named(&args.target);
    let kernels: Vec<&'static dyn suite::Kernel> = if args.items.is_empty() {
        suite::all().to_vec()
    } else {
        args.items
            .iter()
            .map(|n| {
                suite::by_name(n).ok_or_else(|| {
                    format!("no suite kernel `{n}` (`switchyard kernels` lists them)")
                })
            })
            .collect::<Result<_, _>>()?
    };
    let mut dev = ServerDevice::spawn(&args.server).map_err(|e| e.0)?;
    eprintln!(
        "{}: {} SMs, {} MB L2, SM clock up to {} MHz",
        dev.info.device,
        dev.info.sms,
        dev.info.l2_bytes >> 20,
        dev.info.max_sm_clock_mhz
    );
    let mut report = Report {
        switchyard: env!("CARGO_PKG_VERSION").to_string(),
        hardware: dev.info.clone(),
        target: args.target.clone(),
        size: size.name().to_string(),
        seed: args.seed,
        runs: Vec::new(),
    };
    let mut all_passed = true;
    for k in kernels {
        let Some(ptx) = k.ptx(target) else {
            eprintln!("{}: no {} PTX, skipped", k.name(), target.name());
            continue;
        };
        dev.reset().map_err(|e| format!("{}: {e}", k.name()))?;
        dev.load(k.name(), ptx)
            .map_err(|e| format!("{}: {e}", k.name()))?;
        let outcome = k.run(&mut dev, size, args.seed);
        let launches = dev.take_launches();
        let (verified, detail) = match outcome {
            Ok(suite::Verification::Passed { checked }) => {
                (true, format!("{checked} values match"))
            }
            Ok(suite::Verification::Failed { mismatches, first }) => {
                (false, format!("{mismatches} mismatches: {first}"))
            }
            Err(e) => (false, format!("error: {e}")),
        };
        all_passed &= verified;
        let us: f64 = launches.iter().map(|l| l.ms_median * 1e3).sum();
        eprintln!(
            "{:<12} {:>4} launches {:>12.1} µs  {}",
            k.name(),
            launches.len(),
            us,
            if verified {
                format!("PASS ({detail})")
            } else {
                format!("FAIL: {detail}")
            }
        );
        report.runs.push(KernelRun {
            kernel: k.name().to_string(),
            verified,
            detail,
            launches,
        });
        write_report(&args.out, &report)?;
    }
    Ok((report, all_passed))
}

/// Each kernel's per-launch simulated cycles, in the order the stats file lists them.
type SimulatedRuns = Vec<(String, Vec<f64>)>;

/// The per-launch cycles of every run in a `switchyard run --stats` file, and its clock.
fn read_stats(path: &Path) -> Result<(SimulatedRuns, f64), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let clock = v
        .pointer("/gpu/sm/clock_mhz")
        .and_then(|c| c.as_f64())
        .ok_or_else(|| {
            format!(
                "{}: no gpu.sm.clock_mhz (not a `run --stats` file?)",
                path.display()
            )
        })?;
    let runs = v
        .get("runs")
        .and_then(|r| r.as_array())
        .ok_or_else(|| format!("{}: no `runs` array", path.display()))?;
    let mut out = Vec::new();
    for r in runs {
        let kernel = r.get("kernel").and_then(|k| k.as_str()).unwrap_or("?");
        let cycles = r
            .get("launches")
            .and_then(|l| l.as_array())
            .map(|ls| {
                ls.iter()
                    .filter_map(|l| l.get("cycles").and_then(|c| c.as_f64()))
                    .collect()
            })
            .unwrap_or_default();
        out.push((kernel.to_string(), cycles));
    }
    Ok((out, clock))
}

pub(crate) fn hardware(args: HardwareArgs) -> Outcome {
    let (report, passed) = match &args.report {
        Some(path) => {
            let text =
                std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
            let r: Report =
                serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
            let passed = r.runs.iter().all(|k| k.verified);
            (r, passed)
        }
        None => run_on_hardware(&args)?,
    };
    let Some(stats) = &args.compare else {
        if args.json {
            println!(
                "{}",
                serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?
            );
        }
        return Ok(passed);
    };
    let (sim, sim_clock) = read_stats(stats)?;
    let measured = report
        .runs
        .iter()
        .flat_map(|r| &r.launches)
        .map(|l| l.sm_clock_mhz)
        .fold(0.0, f64::max);
    let hw_clock = args.hw_clock_mhz.unwrap_or(if measured > 0.0 {
        measured
    } else {
        report.hardware.max_sm_clock_mhz
    });
    if !(hw_clock.is_finite() && hw_clock > 0.0) {
        return Err("no SM clock for the real GPU: give --hw-clock-mhz".into());
    }
    let sim_times: Vec<KernelTimes> = sim
        .iter()
        .map(|(k, v)| KernelTimes {
            kernel: k,
            values: v.clone(),
        })
        .collect();
    let hw_times: Vec<KernelTimes> = report
        .runs
        .iter()
        .filter(|r| r.verified)
        .map(|r| KernelTimes {
            kernel: &r.kernel,
            values: r.launches.iter().map(|l| l.ms_median * 1e3).collect(),
        })
        .collect();
    let (rows, agreement, skipped) = compare(&sim_times, &hw_times, sim_clock, hw_clock);
    if args.json {
        let v = serde_json::json!({
            "hardware": report.hardware, "size": report.size, "sim_clock_mhz": sim_clock,
            "hw_clock_mhz": hw_clock, "kernels": rows, "agreement": agreement, "skipped": skipped,
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?
        );
        return Ok(passed);
    }
    println!(
        "simulated at {sim_clock} MHz ({}) against {} at {hw_clock} MHz, size {}",
        stats.display(),
        report.hardware.device,
        report.size
    );
    println!(
        "{:<12} {:>8} {:>14} {:>14} {:>12} {:>12} {:>7}",
        "kernel", "launches", "sim cycles", "real cycles", "sim µs", "real µs", "sim/real"
    );
    for r in &rows {
        println!(
            "{:<12} {:>8} {:>14} {:>14.0} {:>12.1} {:>12.1} {:>7.2}",
            r.kernel, r.launches, r.sim_cycles, r.hw_cycles, r.sim_us, r.hw_us, r.ratio
        );
    }
    println!(
        "{} kernels: correlation {:.3}, mean |error| {:.1}%, geometric mean sim/real {:.2}",
        agreement.kernels,
        agreement.correlation,
        agreement.mean_abs_error * 100.0,
        agreement.geomean_ratio
    );
    for s in &skipped {
        println!("left out: {s}");
    }
    Ok(passed)
}
