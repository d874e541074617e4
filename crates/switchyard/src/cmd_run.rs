//! `switchyard run`: suite kernels or PTX files, timed on a GPU preset (or functional only),
//! verified against their CPU references, with a table, JSON rows and a statistics file.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use gpu::config::{GpuConfig, SchedulerPolicy};
use gpu::timing::{Progress, TimedGpu, TimedStats};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

use gpu::memory::MemoryCheck;
use suite::Size;
use switchyard::diag::render_load_error;
use switchyard::input::{read_text, Utf8};
use switchyard::ptx_run::{run_file, FileRunError};
use switchyard::suite_run::{run_kernel_on, Engine, ProgressFn, SuiteError, SuiteResult};

use super::{MemoryCheckArg, Outcome, RunArgs, SchedulerArg};

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
    /// Whether any result was compared (a launch spec without `[[process.check]]` compares none),
    /// and whether every compared value matched: `verified` is true only when both hold.
    checked: bool,
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
            checked: true,
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
        } else if !r.checked {
            format!("RAN ({})", r.detail)
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
        let text = read_text(Path::new(arg), Utf8::Strict)?;
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

/// The statistics file: the GPU configuration and every timed launch so far. While the run
/// goes on it is written after every kernel to the partial file ([`partial_stats_path`]),
/// with `complete: false`; the file the user named is replaced only by the complete
/// results, so an interrupted or failed rerun never loses the previous complete file.
#[derive(Serialize)]
struct StatsFile<'a> {
    switchyard: &'static str,
    complete: bool,
    gpu: &'a GpuConfig,
    runs: Vec<StatsRun>,
}

/// Where a run's statistics go until it completes: `stats.json` → `stats.partial.json`.
fn partial_stats_path(path: &Path) -> PathBuf {
    match path.extension() {
        Some(e) if e == "json" => path.with_extension("partial.json"),
        _ => {
            let mut name = path.as_os_str().to_owned();
            name.push(".partial");
            PathBuf::from(name)
        }
    }
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
            bar.set_message(if p.cycle > 0 {
                format!("{} Mcycles", p.cycle / 1_000_000)
            } else {
                format!("{} M warp instructions", p.warp_instructions / 1_000_000)
            });
        }
    }

    fn finish(self) {
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
    }
}

pub(crate) fn run(args: RunArgs) -> Outcome {
    let size = args.size.size();
    let timed = if args.functional {
        None
    } else {
        let mut g = load_gpu(&args.gpu, args.scheduler)?;
        if let Some(tlp) = args.tlp {
            g.set_tlp(tlp).map_err(|e| e.to_string())?;
        }
        let mut t = TimedGpu::new(g);
        t.options.allocate = !args.unallocated;
        t.options.max_cycles = args.max_cycles;
        t.options.instruction_limit = args.instruction_limit;
        t.options.threads = super::sm_threads(args.threads);
        Some(t)
    };
    let engine = Engine {
        timed: timed.as_ref(),
        instruction_limit: args.instruction_limit,
        memory_check: match args.memory_check {
            MemoryCheckArg::Strict => MemoryCheck::Strict,
            MemoryCheckArg::Page => MemoryCheck::Page,
        },
    };
    let mut stats = timed.as_ref().map(|t| StatsFile {
        switchyard: env!("CARGO_PKG_VERSION"),
        complete: false,
        gpu: &t.gpu,
        runs: Vec::new(),
    });
    let stats_path = (!args.no_stats).then_some(args.stats.as_path());
    let partial_path = stats_path.map(partial_stats_path);
    let mut rows = Vec::new();
    let mut ok = true;
    let items: Vec<String> = if args.items.is_empty() {
        let mut all = args.target.default_kernels();
        // A timed GPU without tensor cores cannot run the tensor-core kernels: the whole
        // suite means every kernel it can run (one named explicitly is an error instead).
        if let Some(t) = timed.as_ref().filter(|t| t.gpu.pipeline.tensor.is_none()) {
            let (skip, keep): (Vec<String>, Vec<String>) = all
                .into_iter()
                .partition(|n| suite::by_name(n).is_some_and(|k| k.needs_tensor_cores()));
            if !skip.is_empty() {
                eprintln!(
                    "note: skipping {} ({} has no tensor cores; try --gpu a100)",
                    skip.join(", "),
                    t.gpu.name
                );
            }
            all = keep;
        }
        all
    } else {
        args.items.clone()
    };
    // The first failure stops the run; what finished before it is still printed and kept.
    let mut failure = None;
    'items: for item in &items {
        let results = match run_item(item, &args, size, engine) {
            Ok(r) => r,
            Err(e) => {
                failure = Some(e);
                break;
            }
        };
        for (row, launches) in results {
            // A run with nothing to check is not verified, and not a failure either.
            ok &= row.verified || !row.checked;
            if let (Some(file), Some(path)) = (stats.as_mut(), partial_path.as_deref()) {
                file.runs.push(StatsRun {
                    kernel: row.kernel.clone(),
                    target: row.target.clone(),
                    size: row.size.clone(),
                    verified: row.verified,
                    launches: launches.clone(),
                });
                if let Err(e) = file.write(path) {
                    failure = Some(e);
                    break 'items;
                }
            }
            if args.detail && !args.json {
                for l in &launches {
                    print!("{}", l.summary());
                }
            }
            rows.push(row);
        }
    }
    if let Some(e) = failure {
        if !rows.is_empty() && !args.json {
            print_table(&rows, timed.is_some());
        }
        let kept = match (&stats, partial_path) {
            (Some(file), Some(partial)) if !file.runs.is_empty() => format!(
                "\nthe statistics of the {} run(s) that finished are in {} (\"complete\": false); {} is unchanged",
                file.runs.len(),
                partial.display(),
                args.stats.display()
            ),
            _ => String::new(),
        };
        return Err(format!("{e}{kept}"));
    }
    // Complete and verified: the named file is replaced whole, and the partial one goes. A
    // run whose checks fail leaves the previous complete file as it was (the new statistics
    // stay in the partial file, "complete": false).
    let mut write_error = None;
    let mut kept = None;
    if let (Some(file), Some(path), Some(partial)) = (stats.as_mut(), stats_path, &partial_path) {
        if ok {
            file.complete = true;
            write_error = file
                .write(path)
                .and_then(|()| switchyard::output::remove(partial))
                .err();
        } else {
            kept = Some(format!(
                "verification failed: {} is unchanged; this run's statistics are in {} (\"complete\": false)",
                path.display(),
                partial.display()
            ));
        }
    }
    if args.json {
        switchyard::output::print_json(&rows);
    } else {
        print_table(&rows, timed.is_some());
        let passed = rows.iter().filter(|r| r.verified).count();
        let unchecked = rows.iter().filter(|r| !r.checked).count();
        print!(
            "{passed} passed, {} failed",
            rows.len() - passed - unchecked
        );
        if unchecked > 0 {
            print!(", {unchecked} not verified");
        }
        match (&timed, stats_path) {
            (Some(t), Some(_)) if kept.is_some() => println!("; timed on {}", t.gpu.name),
            (Some(t), Some(p)) => {
                println!("; timed on {}; statistics in {}", t.gpu.name, p.display())
            }
            (Some(t), None) => println!("; timed on {}", t.gpu.name),
            (None, _) => println!("; functional only"),
        }
    }
    if let Some(k) = kept {
        eprintln!("{k}");
    }
    match write_error {
        Some(e) => Err(format!("the statistics could not be written: {e}")),
        None => Ok(ok),
    }
}

/// Runs one item of `switchyard run`: a PTX file with its spec, or a suite kernel on every
/// target; a row and the timed launches per run.
fn run_item(
    item: &str,
    args: &RunArgs,
    size: Size,
    engine: Engine<'_>,
) -> Result<Vec<(RunRow, Vec<TimedStats>)>, String> {
    if item.ends_with(".ptx") {
        return Ok(vec![run_ptx_file(
            Path::new(item),
            args.spec.as_deref(),
            engine,
        )?]);
    }
    let Some(k) = suite::by_name(item) else {
        let names = switchyard::diag::name_list(suite::all().iter().map(|k| k.name()));
        return Err(format!(
            "no suite kernel `{item}` (and it is not a .ptx file); kernels: {names}"
        ));
    };
    let mut out = Vec::new();
    for t in args.target.of(k)? {
        let label = format!("{} {}", k.name(), t.name());
        let mut bar = LazyBar::new();
        let progress: Box<ProgressFn<'_>> =
            Box::new(|entry: &str, p: Progress| bar.update(&label, entry, p));
        let r = run_kernel_on(k, t, size, args.seed, engine, Some(progress));
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
    Ok(out)
}

fn run_ptx_file(
    path: &Path,
    spec: Option<&Path>,
    engine: Engine<'_>,
) -> Result<(RunRow, Vec<TimedStats>), String> {
    let Some(spec_path) = spec else {
        return Err(format!(
            "running `{}` needs a launch spec: --spec FILE.toml (see `switchyard run --help`)",
            path.display()
        ));
    };
    let text = read_text(path, Utf8::Lenient)?;
    let spec_text = read_text(spec_path, Utf8::Strict)?;
    let name = path.display().to_string();
    let spec_name = spec_path.display().to_string();
    let mut bar = LazyBar::new();
    let r = run_file(&name, &text, &spec_name, &spec_text, engine, &mut |k, p| {
        bar.update(&name, k, p)
    });
    bar.finish();
    let r = match r {
        Ok(r) => r,
        Err(FileRunError::Load(e)) => return Err(render_load_error(&e)),
        Err(e) => return Err(e.to_string()),
    };
    for w in &r.warnings {
        eprintln!("{w}");
    }
    for line in switchyard::output::write_dumps(&r.dumps)? {
        eprintln!("{line}");
    }
    let (checked, verified) = (r.checked(), r.verified());
    let detail = if r.checks.is_empty() {
        "ran; not verified (the spec has no [[process.check]])".to_string()
    } else if verified {
        format!(
            "{} values match",
            r.checks.iter().map(|c| c.checked).sum::<usize>()
        )
    } else {
        r.checks
            .iter()
            .filter_map(|c| c.failure())
            .collect::<Vec<_>>()
            .join("; ")
    };
    let mut row = RunRow::new(
        format!("{}:{}", name, r.kernel_label()),
        "file",
        "spec",
        r.stats,
        r.launches,
        r.elapsed,
        r.elapsed,
        &r.timed,
    );
    row.checked = checked;
    row.verified = verified;
    row.detail = detail;
    Ok((row, r.timed))
}
