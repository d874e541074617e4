//! `switchyard scenario`: several processes sharing one timed GPU, from a scenario file:
//! per process and kernel the moments of arrival, start and end, the multiprogram metrics
//! against each process run alone, verification, and optional JSON, CSV and a timeline.

use std::path::Path;
use std::time::{Duration, Instant};

use gpu::timing::TimedGpu;
use indicatif::{ProgressBar, ProgressStyle};
use sched::PolicyKind;
use switchyard::output::write_all_atomic;
use workload::system::RunProgress;
use workload::{Disk, Report, Setup};

use super::{Outcome, ScenarioArgs, Switch};
use crate::cmd_run::load_gpu;

/// The statistics file of a scenario: every finished launch's counters.
#[derive(serde::Serialize)]
struct ScenarioStats<'a> {
    switchyard: &'static str,
    scenario: &'a str,
    gpu: &'a gpu::config::GpuConfig,
    launches: Vec<LaunchStats<'a>>,
}

#[derive(serde::Serialize)]
struct LaunchStats<'a> {
    process: &'a str,
    kernel: &'a str,
    /// The machine's launch number (as the report and kernels.csv give it).
    launch: u32,
    stats: &'a gpu::timing::TimedStats,
}

/// Core cycles a scenario may run by default (about 6 s of simulated time at 700 MHz).
pub(crate) const DEFAULT_MAX_CYCLES: u64 = 1 << 32;

pub(crate) fn scenario(args: ScenarioArgs) -> Outcome {
    let file = args.file.display().to_string();
    let text = switchyard::input::read_text(&args.file, switchyard::input::Utf8::Strict)?;
    let mut s = workload::parse(&file, &text, &Disk).map_err(|e| e.to_string())?;
    for w in &s.warnings {
        eprintln!("{w}");
    }
    // `--time-slice-us` replaces the scenario's slice, `--policy`'s own `slice_us` both.
    if let Some(us) = args.time_slice_us {
        if !(us.is_finite() && sched::SLICE_US_RANGE.contains(&us)) {
            return Err(format!("--time-slice-us {us} is out of 0.01..=10^7"));
        }
        s.time_slice_us = us;
        if let PolicyKind::TimeSlice { slice_us } = &mut s.policy {
            *slice_us = None;
        }
    }
    if let Some(p) = args.policy {
        s.policy = p;
    }
    if let Some(m) = args.mechanism {
        s.mechanism = m;
    }
    if let Some(on) = args.sharing {
        s.framework.intra_sm_sharing = on == Switch::On;
    }
    if let Some(dir) = &args.dump_dir {
        s.set_dump_dir(dir);
    }
    let gpu = match (&args.gpu, &s.gpu) {
        (Some(g), _) => load_gpu(g, args.scheduler)?,
        // Checked when the scenario was read; if it fails now, say where it is named.
        (None, Some(g)) => load_gpu(g, args.scheduler)
            .map_err(|e| format!("{}: `gpu`: {e}", s.gpu_at.as_deref().unwrap_or(&file)))?,
        (None, None) => load_gpu("gtx480", args.scheduler)?,
    };
    let max_cycles = args
        .max_cycles
        .or(s.max_cycles)
        .unwrap_or(DEFAULT_MAX_CYCLES);
    let mut timing = TimedGpu::new(gpu);
    timing.options.instruction_limit = args.instruction_limit;
    // The shared run and each process's run alone go side by side on the threads; alone,
    // the shared run steps its SMs on all of them.
    let threads = super::sm_threads(args.threads);
    timing.options.threads = if args.no_alone { threads } else { 1 };
    let setup = Setup::for_scenario(&s, timing, max_cycles).map_err(|e| e.to_string())?;
    let start = Instant::now();
    let mut bar = Bar::new();
    let result = workload::run(&s, &setup, !args.no_alone, threads, &mut |p| bar.update(p));
    bar.finish();
    let (report, record) = result.map_err(|e| e.to_string())?;
    let elapsed = start.elapsed();
    // Dumps are written whether or not the checks passed: they are how a wrong result is
    // looked at. Each is whole or absent (a temporary file, then a rename).
    let dumps = switchyard::output::write_dumps(&record.dumps)?;

    // Every output is written only now, and only for a run that verified: all of them to
    // temporaries, then all renamed, so a failure above (or a failed check) leaves the
    // previous run's outputs as they were and a reader never sees a mixture.
    let mut outputs: Vec<(std::path::PathBuf, Vec<u8>)> = Vec::new();
    if let Some(path) = &args.trace {
        let trace = workload::trace::chrome_trace(&record);
        let text = serde_json::to_string(&trace).expect("serializable");
        outputs.push((path.clone(), text.into_bytes()));
    }
    if let Some(path) = &args.stats {
        let stats = ScenarioStats {
            switchyard: env!("CARGO_PKG_VERSION"),
            scenario: &report.scenario,
            gpu: &setup.timing.gpu,
            launches: record
                .kernels
                .iter()
                .filter_map(|k| {
                    Some(LaunchStats {
                        process: &k.process,
                        kernel: &k.kernel,
                        launch: k.launch?,
                        stats: k.stats.as_deref()?,
                    })
                })
                .collect(),
        };
        let text = serde_json::to_string_pretty(&stats).expect("serializable");
        outputs.push((path.clone(), text.into_bytes()));
    }
    if let Some(dir) = &args.csv {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for (name, text) in [
            ("processes.csv", report.processes_csv()),
            ("kernels.csv", report.kernels_csv()),
            ("copies.csv", report.copies_csv()),
            ("requests.csv", report.requests_csv()),
            ("preemption.csv", report.preemption_csv()),
            ("bandwidth.csv", workload::trace::bandwidth_csv(&record)),
        ] {
            outputs.push((dir.join(name), text.into_bytes()));
        }
    }
    if report.all_verified {
        write_all_atomic(&outputs)?;
    } else if !outputs.is_empty() {
        eprintln!(
            "verification failed: the outputs of the previous run (trace, CSVs) are unchanged"
        );
    }
    if args.json {
        switchyard::output::print_json(&report);
        // The report alone on standard output; where the dumps went on standard error.
        for d in &dumps {
            eprintln!("{d}");
        }
    } else {
        // Name the outputs only where they were written.
        let written = |p: &Option<std::path::PathBuf>| {
            p.as_deref()
                .filter(|_| report.all_verified)
                .map(Path::to_path_buf)
        };
        let (trace, csv, stats) = (
            written(&args.trace),
            written(&args.csv),
            written(&args.stats),
        );
        print_report(
            &report,
            elapsed,
            trace.as_deref(),
            csv.as_deref(),
            stats.as_deref(),
        );
        for d in &dumps {
            println!("{d}");
        }
    }
    Ok(report.all_verified)
}

fn print_report(
    r: &Report,
    elapsed: Duration,
    trace: Option<&Path>,
    csv: Option<&Path>,
    stats: Option<&Path>,
) {
    println!("scenario {}", r.scenario);
    if !r.description.is_empty() {
        println!("  {}", r.description);
    }
    println!(
        "gpu {}, policy {}, mechanism {}, intra-SM sharing {}; {} cycles ({:.1} µs simulated), {} warp instructions, {:.2} s",
        r.gpu,
        r.policy,
        r.preemption.mechanism,
        if r.intra_sm_sharing { "on" } else { "off" },
        r.cycles,
        r.simulated_us,
        r.warp_instructions,
        elapsed.as_secs_f64()
    );
    println!(
        "{:<16} {:>4} {:>10} {:>10} {:>10} {:>12} {:>10} {:>6} {:>7} {:>6}  result",
        "process",
        "prio",
        "arrival µs",
        "start µs",
        "end µs",
        "turnaround",
        "alone µs",
        "NTT",
        "kernels",
        "copies"
    );
    let opt = |x: Option<f64>, p: usize| x.map_or("-".to_string(), |v| format!("{v:.p$}"));
    for p in &r.processes {
        println!(
            "{:<16} {:>4} {:>10.1} {:>10} {:>10.1} {:>12.1} {:>10} {:>6} {:>7} {:>6}  {} ({})",
            p.name,
            p.priority,
            p.arrival_us,
            opt(p.start_us, 1),
            p.end_us,
            p.turnaround_us,
            opt(p.alone_us, 1),
            opt(p.ntt, 2),
            p.kernels,
            p.copies,
            if p.verified { "PASS" } else { "FAIL" },
            p.detail
        );
    }
    for p in &r.processes {
        if let Some(l) = &p.requests {
            println!(
                "{}: {} requests, latency µs: mean {:.1}, p50 {:.1}, p95 {:.1}, p99 {:.1}, p99.9 {:.1}, max {:.1}",
                p.name, l.count, l.mean_us, l.p50_us, l.p95_us, l.p99_us, l.p999_us, l.max_us
            );
        }
    }
    println!(
        "{:<16} {:<24} {:>6} {:>10} {:>10} {:>12} {:>14}",
        "process", "kernel", "launch", "start µs", "end µs", "cycles", "warp insts"
    );
    for k in &r.kernels {
        println!(
            "{:<16} {:<24} {:>6} {:>10.1} {:>10.1} {:>12} {:>14}",
            k.process,
            k.kernel,
            k.launch,
            k.started_us,
            k.finished_us,
            k.cycles,
            k.warp_instructions
        );
    }
    if let Some(m) = r.metrics {
        println!(
            "ANTT {:.3}  STP {:.3}  fairness {:.3}  (against each process alone)",
            m.antt, m.stp, m.fairness
        );
    }
    let p = &r.preemption;
    if p.requests > 0 {
        println!(
            "preemption ({}): {} SM requests; TBs switched {}, flushed {}, drained {}, refused {}; latency mean {:.2} µs (drain {:.2} + spill {:.2}), max {:.2} µs; context {} B (registers {}, shared {}, stack/barrier {}, metadata {}); {} restores, mean {:.2} µs; {} warp instructions discarded",
            p.mechanism,
            p.requests,
            p.switched,
            p.flushed,
            p.drained,
            p.refused,
            p.mean_latency_us,
            p.mean_drain_us,
            p.mean_spill_us,
            p.max_latency_us,
            p.context.total(),
            p.context.registers,
            p.context.shared,
            p.context.stack_barrier,
            p.context.metadata,
            p.restores,
            p.mean_resume_us,
            p.discarded_instructions
        );
    }
    if p.requests > 0 {
        for (k, q) in &r.preemption_by_kernel {
            println!(
                "  {k}: TBs switched {}, flushed {}, drained {}, refused {}; latency mean {:.2} µs, max {:.2} µs; context {} B; {} restores",
                q.switched,
                q.flushed,
                q.drained,
                q.refused,
                q.mean_latency_us,
                q.max_latency_us,
                q.context.total(),
                q.restores
            );
        }
    }
    if let Some(t) = trace {
        println!("timeline: {} (Perfetto, chrome://tracing)", t.display());
    }
    if let Some(d) = csv {
        println!(
            "CSV: {}/{{processes,kernels,copies,preemption}}.csv",
            d.display()
        );
    }
    if let Some(s) = stats {
        println!("statistics: {}", s.display());
    }
}

/// A progress bar that appears once a run has taken a second.
struct Bar {
    start: Instant,
    bar: Option<ProgressBar>,
}

impl Bar {
    fn new() -> Bar {
        Bar {
            start: Instant::now(),
            bar: None,
        }
    }

    fn update(&mut self, p: RunProgress) {
        if self.bar.is_none() && self.start.elapsed() >= Duration::from_secs(1) {
            let bar = ProgressBar::new(p.processes as u64);
            bar.set_style(
                ProgressStyle::with_template(
                    "scenario [{bar:30}] {pos}/{len} processes done, {msg} ({elapsed})",
                )
                .expect("valid template")
                .progress_chars("=> "),
            );
            self.bar = Some(bar);
        }
        if let Some(bar) = &self.bar {
            bar.set_position(p.processes_done as u64);
            bar.set_message(format!(
                "{} kernels, {:.2} Mcycles",
                p.kernels_done,
                p.cycle as f64 / 1e6
            ));
        }
    }

    fn finish(self) {
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
    }
}
