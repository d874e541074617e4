//! `switchyard run`: suite kernels or PTX files, timed on a GPU preset (or functional only),
//! verified against their CPU references, with a table, JSON rows and a statistics file.

use std::path::Path;
use std::time::{Duration, Instant};

use gpu::config::{GpuConfig, SchedulerPolicy};
use gpu::timing::{Progress, TimedGpu, TimedStats};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

use suite::{Size, Target};
use switchyard::diag::render_load_error;
use switchyard::ptx_run::{run_file, FileRunError};
use switchyard::spec::Spec;
use switchyard::suite_run::{run_kernel_on, ProgressFn, SuiteError, SuiteResult};

use super::{Outcome, RunArgs, SchedulerArg, SizeArg, TargetArg};

/// One row of the table: a kernel on one target (all its launches).
#[derive(Serialize)]
struct RunRow {
    kernel: String,
    target: String,
    size: String,
    launches: u64,
    tbs: u64,
    warps: u64,
    warp_instructions: u64,
    thread_instructions: u64,
    /// Timed runs: simulated core cycles over all launches, and warp instructions per cycle.
    cycles: Option<u64>,
    ipc: Option<f64>,
    /// Timed runs, the launch with the most cycles: TBs per SM, the limiting factors, and the
    /// lin-thesis Table 3.3 class.
    tbs_per_sm: Option<u32>,
    limited_by: Option<String>,
    class: Option<String>,
    /// Seconds spent simulating (inside launches).
    seconds: f64,
    /// Seconds of the whole host program, including input generation and verification.
    total_seconds: f64,
    thread_instructions_per_second: f64,
    warp_instructions_per_second: f64,
    /// Timed runs: simulated cycles per second of simulation.
    cycles_per_second: Option<f64>,
    verified: bool,
    detail: String,
}

impl RunRow {
    fn new(
        kernel: String,
        target: &str,
        size: &str,
        stats: gpu::LaunchStats,
        launches: u64,
        simulated: Duration,
        elapsed: Duration,
        timed: &[TimedStats],
    ) -> RunRow {
        let secs = simulated.as_secs_f64().max(1e-9);
        let cycles: u64 = timed.iter().map(|t| t.cycles).sum();
        let main = timed.iter().max_by_key(|t| t.cycles);
        let is_timed = !timed.is_empty();
        RunRow {
            kernel,
            target: target.to_string(),
            size: size.to_string(),
            launches,
            tbs: stats.tbs,
            warps: stats.warps,
            warp_instructions: stats.warp_instructions,
            thread_instructions: stats.thread_instructions,
            cycles: is_timed.then_some(cycles),
            ipc: is_timed.then(|| stats.warp_instructions as f64 / cycles.max(1) as f64),
            tbs_per_sm: main.map(|t| t.tbs_per_sm),
            limited_by: main.map(|t| {
                t.occupancy_limit
                    .limited_by
                    .iter()
                    .map(|l| format!("{l:?}").to_lowercase())
                    .collect::<Vec<_>>()
                    .join("+")
            }),
            class: main.map(|t| format!("{:?}", t.utilisation.class).to_lowercase()),
            seconds: simulated.as_secs_f64(),
            total_seconds: elapsed.as_secs_f64(),
            thread_instructions_per_second: stats.thread_instructions as f64 / secs,
            warp_instructions_per_second: stats.warp_instructions as f64 / secs,
            cycles_per_second: is_timed.then(|| cycles as f64 / secs),
            verified: false,
            detail: String::new(),
        }
    }

    fn from_suite(r: &SuiteResult) -> RunRow {
        let mut row = RunRow::new(
            r.kernel.to_string(),
            r.target.name(),
            &format!("{:?}", r.size).to_lowercase(),
            r.stats,
            r.launches,
            r.simulated,
            r.elapsed,
            &r.timed,
        );
        row.verified = r.verification.passed();
        row.detail = match &r.verification {
            suite::Verification::Passed { checked } => format!("{checked} values match"),
            suite::Verification::Failed { mismatches, first } => {
                format!("{mismatches} mismatches: {first}")
            }
        };
        row
    }
}

fn print_table(rows: &[RunRow], timed: bool) {
    if timed {
        println!(
            "{:<14} {:<6} {:>4} {:>6} {:>11} {:>10} {:>5} {:>6} {:<22} {:>8} {:>8}  result",
            "kernel",
            "target",
            "runs",
            "TBs",
            "warp insts",
            "cycles",
            "IPC",
            "TBs/SM",
            "limited by / class",
            "sim ms",
            "Kwi/s"
        );
    } else {
        println!(
            "{:<14} {:<6} {:>4} {:>7} {:>12} {:>14} {:>9} {:>10}  result",
            "kernel", "target", "runs", "TBs", "warp insts", "thread insts", "sim ms", "Mthr-i/s"
        );
    }
    for r in rows {
        let result = if r.verified {
            format!("PASS ({})", r.detail)
        } else {
            format!("FAIL: {}", r.detail)
        };
        if timed {
            println!(
                "{:<14} {:<6} {:>4} {:>6} {:>11} {:>10} {:>5.2} {:>6} {:<22} {:>8.1} {:>8.0}  {}",
                r.kernel,
                r.target,
                r.launches,
                r.tbs,
                r.warp_instructions,
                r.cycles.unwrap_or(0),
                r.ipc.unwrap_or(0.0),
                r.tbs_per_sm.unwrap_or(0),
                format!(
                    "{} / {}",
                    r.limited_by.as_deref().unwrap_or("-"),
                    r.class.as_deref().unwrap_or("-")
                ),
                r.seconds * 1e3,
                r.warp_instructions_per_second / 1e3,
                result
            );
        } else {
            println!(
                "{:<14} {:<6} {:>4} {:>7} {:>12} {:>14} {:>9.1} {:>10.1}  {}",
                r.kernel,
                r.target,
                r.launches,
                r.tbs,
                r.warp_instructions,
                r.thread_instructions,
                r.seconds * 1e3,
                r.thread_instructions_per_second / 1e6,
                result
            );
        }
    }
}

/// The GPU of `--gpu`: a preset name or a TOML file.
pub(crate) fn load_gpu(arg: &str, scheduler: Option<SchedulerArg>) -> Result<GpuConfig, String> {
    let mut g = if arg.ends_with(".toml") || Path::new(arg).is_file() {
        let text = std::fs::read_to_string(arg).map_err(|e| format!("{arg}: {e}"))?;
        GpuConfig::from_toml(arg, &text).map_err(|e| e.to_string())?
    } else {
        GpuConfig::preset(arg).map_err(|e| e.to_string())?
    };
    if let Some(s) = scheduler {
        g.sm.scheduler = match s {
            SchedulerArg::Lrr => SchedulerPolicy::Lrr,
            SchedulerArg::Gto => SchedulerPolicy::Gto,
            SchedulerArg::TwoLevel => SchedulerPolicy::TwoLevel,
        };
    }
    Ok(g)
}

/// The statistics file: the GPU configuration and every timed launch so far.
#[derive(Serialize)]
struct StatsFile<'a> {
    switchyard: &'static str,
    gpu: &'a GpuConfig,
    runs: Vec<StatsRun>,
}

#[derive(Serialize)]
struct StatsRun {
    kernel: String,
    target: String,
    size: String,
    verified: bool,
    launches: Vec<TimedStats>,
}

impl StatsFile<'_> {
    /// Writes the file whole, through a temporary file and a rename, so that an interrupted or
    /// failed run never leaves it truncated.
    fn write(&self, path: &Path) -> Result<(), String> {
        let text = serde_json::to_string_pretty(self).expect("serializable");
        switchyard::output::write_atomic(path, text.as_bytes())
    }
}

/// A progress bar that appears only once a kernel has run for a second.
struct LazyBar {
    start: Instant,
    bar: Option<ProgressBar>,
}

impl LazyBar {
    fn new() -> LazyBar {
        LazyBar {
            start: Instant::now(),
            bar: None,
        }
    }

    fn update(&mut self, label: &str, entry: &str, p: Progress) {
        if self.bar.is_none() && self.start.elapsed() >= Duration::from_secs(1) {
            let bar = ProgressBar::new(p.tbs_total);
            bar.set_style(
                ProgressStyle::with_template(
                    "{prefix} [{bar:30}] {pos}/{len} TBs, {msg} ({elapsed})",
                )
                .expect("valid template")
                .progress_chars("=> "),
            );
            self.bar = Some(bar);
        }
        if let Some(bar) = &self.bar {
            bar.set_prefix(format!("{label} {entry}"));
            bar.set_length(p.tbs_total);
            bar.set_position(p.tbs_done);
            bar.set_message(format!("{} Mcycles", p.cycle / 1_000_000));
        }
    }

    fn finish(self) {
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
    }
}

pub(crate) fn run(args: RunArgs) -> Outcome {
    let targets: Vec<Target> = match args.target {
        TargetArg::Sm70 => vec![Target::Sm70],
        TargetArg::Sm90 => vec![Target::Sm90],
        TargetArg::All => Target::ALL.to_vec(),
    };
    let size = match args.size {
        SizeArg::Small => Size::Small,
        SizeArg::Large => Size::Large,
    };
    let timed = if args.functional {
        None
    } else {
        let mut t = TimedGpu::new(load_gpu(&args.gpu, args.scheduler)?);
        t.options.allocate = !args.unallocated;
        Some(t)
    };
    let mut stats = timed.as_ref().map(|t| StatsFile {
        switchyard: env!("CARGO_PKG_VERSION"),
        gpu: &t.gpu,
        runs: Vec::new(),
    });
    let stats_path = (!args.no_stats).then_some(args.stats.as_path());
    let mut rows = Vec::new();
    let mut ok = true;
    let items: Vec<String> = if args.items.is_empty() {
        suite::all().iter().map(|k| k.name().to_string()).collect()
    } else {
        args.items.clone()
    };
    for item in &items {
        let results: Vec<(RunRow, Vec<TimedStats>)> = if item.ends_with(".ptx") {
            vec![run_ptx_file(
                Path::new(item),
                args.spec.as_deref(),
                timed.as_ref(),
            )?]
        } else {
            let Some(k) = suite::by_name(item) else {
                let names: Vec<_> = suite::all().iter().map(|k| k.name()).collect();
                return Err(format!(
                    "no suite kernel `{item}` (and it is not a .ptx file); kernels: {}",
                    names.join(", ")
                ));
            };
            let mut out = Vec::new();
            for &t in &targets {
                let label = format!("{} {}", k.name(), t.name());
                let mut bar = LazyBar::new();
                let progress: Box<ProgressFn<'_>> =
                    Box::new(|entry: &str, p: Progress| bar.update(&label, entry, p));
                let r = run_kernel_on(k, t, size, args.seed, timed.as_ref(), Some(progress));
                bar.finish();
                match r {
                    Ok(r) => {
                        let row = RunRow::from_suite(&r);
                        out.push((row, r.timed));
                    }
                    Err(SuiteError::Load(e)) => return Err(render_load_error(&e)),
                    Err(e) => return Err(e.to_string()),
                }
            }
            out
        };
        for (row, launches) in results {
            ok &= row.verified;
            if let (Some(file), Some(path)) = (stats.as_mut(), stats_path) {
                file.runs.push(StatsRun {
                    kernel: row.kernel.clone(),
                    target: row.target.clone(),
                    size: row.size.clone(),
                    verified: row.verified,
                    launches: launches.clone(),
                });
                file.write(path)?;
            }
            if args.detail && !args.json {
                for l in &launches {
                    print!("{}", l.summary());
                }
            }
            rows.push(row);
        }
    }
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&rows).expect("serializable")
        );
    } else {
        print_table(&rows, timed.is_some());
        let passed = rows.iter().filter(|r| r.verified).count();
        print!("{passed} passed, {} failed", rows.len() - passed);
        match (&timed, stats_path) {
            (Some(t), Some(p)) => {
                println!("; timed on {}; statistics in {}", t.gpu.name, p.display())
            }
            (Some(t), None) => println!("; timed on {}", t.gpu.name),
            (None, _) => println!("; functional only"),
        }
    }
    Ok(ok)
}

fn run_ptx_file(
    path: &Path,
    spec: Option<&Path>,
    timed: Option<&TimedGpu>,
) -> Result<(RunRow, Vec<TimedStats>), String> {
    let Some(spec_path) = spec else {
        return Err(format!(
            "running `{}` needs a launch spec: --spec FILE.toml (see `switchyard run --help`)",
            path.display()
        ));
    };
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let spec_text =
        std::fs::read_to_string(spec_path).map_err(|e| format!("{}: {e}", spec_path.display()))?;
    let spec = Spec::parse(&spec_text).map_err(|e| format!("{}: {e}", spec_path.display()))?;
    let name = path.display().to_string();
    let r = match run_file(&name, &text, &spec, timed) {
        Ok(r) => r,
        Err(FileRunError::Load(e)) => return Err(render_load_error(&e)),
        Err(e) => return Err(e.to_string()),
    };
    let verified = r.checks.iter().all(|c| c.mismatches == 0);
    let detail = if r.checks.is_empty() {
        "ran; not verified (the spec has no [[check]])".to_string()
    } else if verified {
        format!(
            "{} values match",
            r.checks.iter().map(|c| c.checked).sum::<usize>()
        )
    } else {
        r.checks
            .iter()
            .filter_map(|c| {
                c.first
                    .clone()
                    .map(|f| format!("{} mismatches, first {f}", c.mismatches))
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    let timed: Vec<TimedStats> = r.timed.into_iter().collect();
    let mut row = RunRow::new(
        format!("{}:{}", name, r.kernel),
        "file",
        "spec",
        r.stats,
        1,
        r.elapsed,
        r.elapsed,
        &timed,
    );
    row.verified = verified;
    row.detail = detail;
    Ok((row, timed))
}
