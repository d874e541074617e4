//! `switchyard experiment …`: the papers' experiments, as tables, JSON, CSV and SVG.

use std::path::Path;

use experiment::pep::{self, PepResults};
use experiment::per_instruction::{self, PerInstructionConfig, PerInstructionResults};
use experiment::periodic::{self, PeriodicConfig, PeriodicResults};
use experiment::study::{self, StudyConfig};
use experiment::{figures, inplace, svg};
use indicatif::{ProgressBar, ProgressStyle};
use switchyard::output::{create_dir, print_json, write_atomic, write_into};

use super::{
    BalanceArg, BenchmarksArgs, CopyArg, CorunArgs, FaultsArgs, MultiprogramArgs, Outcome, PepArgs,
    PerInstructionArgs, PeriodicArgs, StudyArgs, TlpArgs,
};
use crate::cmd_run::load_gpu;

/// The suite kernels `names`, each one `gpu` can run (the tensor-core kernels need tensor
/// cores), or an error naming the first that is not.
fn kernels_on(
    names: &[String],
    gpu: &gpu::config::GpuConfig,
) -> Result<Vec<&'static dyn suite::Kernel>, String> {
    let kernels: Vec<_> = names.iter().map(|n| kernel(n)).collect::<Result<_, _>>()?;
    runnable_on(&kernels, gpu)?;
    Ok(kernels)
}

/// An error naming the first of `kernels` that `gpu` cannot run (it needs tensor cores).
fn runnable_on(
    kernels: &[&'static dyn suite::Kernel],
    gpu: &gpu::config::GpuConfig,
) -> Result<(), String> {
    match kernels
        .iter()
        .find(|k| k.needs_tensor_cores() && gpu.pipeline.tensor.is_none())
    {
        Some(k) => Err(format!(
            "{} needs tensor cores, which {} has not",
            k.name(),
            gpu.name
        )),
        None => Ok(()),
    }
}

/// A suite kernel by name, or an error listing the suite.
fn kernel(name: &str) -> Result<&'static dyn suite::Kernel, String> {
    suite::by_name(name).ok_or_else(|| {
        let names: Vec<&str> = suite::all().iter().map(|k| k.name()).collect();
        format!(
            "unknown kernel `{name}`; the suite has: {}",
            names.join(", ")
        )
    })
}

/// A progress bar over `total` runs.
fn runs_bar(what: &str, total: usize) -> ProgressBar {
    let bar = ProgressBar::new(total as u64);
    bar.set_style(
        ProgressStyle::with_template(&format!(
            "{what} [{{bar:30}}] {{pos}}/{{len}} runs, {{msg}} ({{elapsed}})"
        ))
        .expect("valid template")
        .progress_chars("=> "),
    );
    bar
}

pub(crate) fn study(args: StudyArgs) -> Outcome {
    let gpu = load_gpu(&args.gpu, None)?;
    let mut c = StudyConfig::default_on(gpu);
    c.max_cycles = args.max_cycles;
    c.instruction_limit = args.instruction_limit;
    c.low = (kernel(&args.low)?, args.low_size.size());
    c.high.0 = kernel(&args.high)?;
    c.arrival = match args.arrival_us {
        Some(us) if us.is_finite() && (0.0..=1.0e7).contains(&us) => study::Arrival::AtUs(us),
        Some(us) => return Err(format!("--arrival-us {us} is out of 0..=10^7")),
        None if (0.0..=1.0).contains(&args.arrival) => study::Arrival::IntoLowKernel(args.arrival),
        None => return Err(format!("--arrival {} is out of 0..=1", args.arrival)),
    };
    if !args.mechanisms.is_empty() {
        c.mechanisms = super::all_mechanisms(&args.mechanisms);
    }
    if let Some(t) = args.threads {
        c.threads = t.max(1);
    }
    let bar = runs_bar("preemption study", c.mechanisms.len() + 1);
    let r = study::run(&c, &|done, _, what| {
        bar.set_position(done as u64);
        bar.set_message(what.to_string());
    });
    bar.finish_and_clear();
    let r = r.map_err(|e| e.to_string())?;
    if args.json {
        print_json(&r);
    } else {
        print_study(&r);
    }
    let ok = r.all_exact();
    if !ok {
        eprintln!("error: some runs did not verify or did not end bit-exact");
    }
    Ok(ok)
}

fn print_study(r: &study::StudyResults) {
    println!(
        "Preemption study on {}: {} holds the GPU; {}, of high priority, arrives at {:.1} µs.",
        r.gpu, r.low, r.high, r.high_arrival_us
    );
    println!("Preemptive priority takes SMs from the low-priority kernel with each mechanism;");
    println!("npq is the reference where nothing is preempted.\n");
    // Mechanisms with parameters (`chimera:deadline_us=5`) widen the first column.
    let w = r
        .rows
        .iter()
        .map(|row| row.mechanism.len())
        .fold(20, usize::max);
    println!(
        "{:<w$} {:>9} {:>10} {:>8} {:>5} {:>10} {:>8} {:>8} {:>8} {:>9} {:>8}  verified",
        "mechanism",
        "high wait",
        "preempt µs",
        "max µs",
        "TBs",
        "context KB",
        "flushed",
        "switched",
        "drained",
        "high turn",
        "low slow"
    );
    for row in &r.rows {
        let p = &row.preemption;
        println!(
            "{:<w$} {:>9.2} {:>10.2} {:>8.2} {:>5} {:>10.1} {:>8} {:>8} {:>8} {:>9.2} {:>8.3}  {}",
            row.mechanism,
            row.high_wait_us,
            p.mean_latency_us,
            p.max_latency_us,
            p.switched + p.flushed + p.drained,
            p.context.total() as f64 / 1024.0,
            p.flushed,
            p.switched,
            p.drained,
            row.high_turnaround_us,
            row.low_slowdown,
            match (row.verified, row.bit_exact) {
                (true, true) => "yes, bit-exact",
                (true, false) => "yes, NOT bit-exact",
                _ => "FAILED",
            }
        );
    }
    println!();
    println!("high wait: µs from the high-priority kernel's arrival at the GPU to its first TB;");
    println!("preempt: mean and max µs from a request to the TB's resources released;");
    println!("high turn: the high-priority process's turnaround, µs; low slow: the low-priority");
    println!("process's turnaround over npq's. More: `switchyard study --help`,");
    println!("`switchyard experiment periodic-preemption`, `switchyard run` (the kernel suite).");
}

pub(crate) fn periodic(args: PeriodicArgs) -> Outcome {
    let gpu = load_gpu(&args.gpu, None)?;
    let mut config = PeriodicConfig::paper(gpu);
    if !args.kernels.is_empty() {
        config.kernels = args
            .kernels
            .iter()
            .map(|n| kernel(n))
            .collect::<Result<_, _>>()?;
    }

    config.size = args.size.size();
    if args.interval == 0 {
        return Err("--interval must be at least 1 cycle".into());
    }
    config.interval = args.interval;
    config.min_signals = args.min_signals;
    if !args.mechanisms.is_empty() {
        config.mechanisms = super::all_mechanisms(&args.mechanisms);
    }
    config.seed = args.seed;
    if let Some(t) = args.threads {
        config.threads = t.max(1);
    }
    config.max_cycles = args.max_cycles;
    config.instruction_limit = args.instruction_limit;
    let runs = config.kernels.len() * (config.mechanisms.len() + 1);
    let bar = runs_bar("periodic preemption", runs);
    let results = periodic::run(&config, &|done, _, what| {
        bar.set_position(done as u64);
        bar.set_message(what.to_string());
    });
    bar.finish_and_clear();
    let results = results.map_err(|e| e.to_string())?;
    let mut figs = figures::all(&results);
    let pairs = if args.no_pairs {
        Vec::new()
    } else {
        let pairs = inplace::default_pairs();
        let bar = runs_bar("in-place pairs (Figure 17)", pairs.len());
        let rows = inplace::run(
            &config.gpu,
            &pairs,
            config.size,
            config.threads,
            &|done, _, what| {
                bar.set_position(done as u64);
                bar.set_message(what.to_string());
            },
        );
        bar.finish_and_clear();
        let rows = rows.map_err(|e| e.to_string())?;
        figs.push(inplace::figure(&rows));
        rows
    };
    if let Some(dir) = &args.csv {
        write_csv(dir, &results, &figs)?;
        let mut csv =
            String::from("pair,design,tbs,mean_drain_us,mean_spill_us,context_bytes,exact\n");
        for p in &pairs {
            for (design, o) in [("complete", &p.complete), ("in-place", &p.in_place)] {
                csv.push_str(&format!(
                    "{},{design},{},{:.4},{:.4},{},{}\n",
                    p.pair, o.tbs, o.mean_drain_us, o.mean_spill_us, o.context_bytes, p.exact
                ));
            }
        }
        write_atomic(&dir.join("pairs.csv"), csv.as_bytes())?;
    }
    if let Some(dir) = &args.plots {
        create_dir(dir)?;
        for f in &figs {
            let path = dir.join(format!("{}.svg", f.id));
            write_atomic(&path, svg::bar_chart(f).as_bytes())?;
        }
    }
    if args.json {
        let v = serde_json::json!({ "results": results, "pairs": pairs, "figures": figs });
        print_json(&v);
    } else {
        print_runs(&results);
        if !pairs.is_empty() {
            println!(
                "\nIn-place switching on kernel pairs: kernel1's switch-out per TB (µs), bytes"
            );
            println!(
                "{:<26} {:>14} {:>12} {:>14} {:>12}  exact",
                "kernel1-kernel2", "complete µs", "KB", "in-place µs", "KB"
            );
            for p in &pairs {
                println!(
                    "{:<26} {:>6.2}+{:<7.2} {:>12.1} {:>6.2}+{:<7.2} {:>12.1}  {}",
                    p.pair,
                    p.complete.mean_drain_us,
                    p.complete.mean_spill_us,
                    p.complete.context_bytes as f64 / 1024.0,
                    p.in_place.mean_drain_us,
                    p.in_place.mean_spill_us,
                    p.in_place.context_bytes as f64 / 1024.0,
                    if p.exact { "yes" } else { "NO" }
                );
            }
        }
        for f in &figs {
            println!();
            print!("{}", figures::to_table(f));
        }
        if let Some(dir) = &args.csv {
            println!("\nCSV: {}/{{runs,signals,fig*}}.csv", dir.display());
        }
        if let Some(dir) = &args.plots {
            println!("plots: {}/fig*.svg", dir.display());
        }
    }
    let exact = results.all_exact() && pairs.iter().all(|p| p.exact);
    if !exact {
        eprintln!("error: some runs did not verify or did not end bit-exact (see `exact`)");
    }
    Ok(exact)
}

fn print_runs(r: &PeriodicResults) {
    let us = |c: f64| c / r.core_mhz;
    println!(
        "periodic preemption on {}, {} inputs, a signal every {} cycles ({:.1} µs)",
        r.gpu,
        r.size,
        r.interval,
        us(r.interval as f64)
    );
    for k in &r.kernels {
        let first = r.runs.iter().find(|m| &m.kernel == k);
        if let Some(m) = first.filter(|m| m.interval != r.interval) {
            println!(
                "  {k}: a signal every {} cycles, for its minimum number of signals",
                m.interval
            );
        }
    }
    let w = r
        .runs
        .iter()
        .map(|m| m.mechanism.len())
        .fold(15, usize::max);
    println!(
        "{:<13} {:<w$} {:>7} {:>10} {:>9} {:>9} {:>9} {:>10} {:>8} {:>8}  exact",
        "kernel",
        "mechanism",
        "signals",
        "latency µs",
        "drain µs",
        "spill µs",
        "max µs",
        "KB/signal",
        "resume",
        "slowdown"
    );
    for m in &r.runs {
        let s = &m.summary;
        println!(
            "{:<13} {:<w$} {:>7} {:>10.2} {:>9.2} {:>9.2} {:>9.2} {:>10.1} {:>8.2} {:>8.3}  {}",
            m.kernel,
            m.mechanism,
            m.signals.len(),
            us(s.mean_latency),
            us(s.mean_drain),
            us(s.mean_spill),
            us(s.max_latency as f64),
            s.mean_bytes.iter().sum::<f64>() / 1024.0,
            us(m.mean_resume),
            m.slowdown,
            if m.verified && m.bit_exact {
                "yes"
            } else if m.verified {
                "VERIFIED, NOT BIT-EXACT"
            } else {
                "FAILED"
            }
        );
    }
}

fn write_csv(dir: &Path, r: &PeriodicResults, figs: &[figures::Figure]) -> Result<(), String> {
    create_dir(dir)?;
    let mut runs = String::from(
        "kernel,mechanism,signals,skipped,empty,mean_latency_cycles,max_latency_cycles,mean_drain_cycles,mean_spill_cycles,spill_registers_cycles,spill_shared_cycles,spill_stack_cycles,registers_bytes,shared_bytes,stack_barrier_bytes,metadata_bytes,occupied_register_bytes,live_register_bytes,moved_register_bytes,uniform,strided,random,restores,mean_resume_cycles,discarded_instructions,tb_cycles_held,cycles,slowdown,verified,bit_exact,interval_cycles\n",
    );
    let mut signals = String::from(
        "kernel,mechanism,cycle,sm,tbs,latency,drain,spill,registers_bytes,shared_bytes,stack_barrier_bytes,metadata_bytes,switched,flushed,drained,refused\n",
    );
    for m in &r.runs {
        let s = &m.summary;
        let c = &s.registers;
        runs.push_str(&format!(
            "{},{},{},{},{},{:.1},{},{:.1},{:.1},{:.1},{:.1},{:.1},{:.1},{:.1},{:.1},{:.1},{},{},{},{},{},{},{},{:.1},{},{},{},{:.4},{},{},{}\n",
            m.kernel,
            m.mechanism,
            m.signals.len(),
            m.skipped,
            m.empty,
            s.mean_latency,
            s.max_latency,
            s.mean_drain,
            s.mean_spill,
            s.mean_spill_parts[0],
            s.mean_spill_parts[1],
            s.mean_spill_parts[2],
            s.mean_bytes[0],
            s.mean_bytes[1],
            s.mean_bytes[2],
            s.mean_bytes[3],
            c.occupied,
            c.live,
            c.moved,
            c.uniform,
            c.strided,
            c.random,
            m.restores,
            m.mean_resume,
            m.discarded_instructions,
            m.tb_cycles_held,
            m.cycles,
            m.slowdown,
            m.verified,
            m.bit_exact,
            m.interval
        ));
        for g in &m.signals {
            signals.push_str(&format!(
                "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
                m.kernel,
                m.mechanism,
                g.cycle,
                g.sm,
                g.tbs,
                g.latency,
                g.drain,
                g.spill,
                g.bytes.registers,
                g.bytes.shared,
                g.bytes.stack_barrier,
                g.bytes.metadata,
                g.switched,
                g.flushed,
                g.drained,
                g.refused
            ));
        }
    }
    write_atomic(&dir.join("runs.csv"), runs.as_bytes())?;
    write_atomic(&dir.join("signals.csv"), signals.as_bytes())?;
    for f in figs {
        write_atomic(
            &dir.join(format!("{}.csv", f.id)),
            figures::to_csv(f).as_bytes(),
        )?;
    }
    Ok(())
}

/// `switchyard experiment benchmarks`: papers/tanasic-thesis Table 5.2 for the suite.
pub(crate) fn benchmarks(args: BenchmarksArgs) -> Outcome {
    let gpu = load_gpu(&args.gpu, None)?;
    let kernels: Vec<&'static dyn suite::Kernel> = if args.kernels.is_empty() {
        experiment::runnable_kernels(&gpu)
    } else {
        args.kernels
            .iter()
            .map(|n| kernel(n))
            .collect::<Result<_, _>>()?
    };
    let bar = runs_bar("benchmarks", kernels.len());
    let rows = experiment::benchmarks::table(&gpu, &kernels, args.size.size(), &|d, _, name| {
        bar.set_position(d as u64);
        bar.set_message(name.to_string());
    })
    .map_err(|(kernel, e)| format!("{kernel}: {e}"))?;
    bar.finish_and_clear();
    if let Some(path) = &args.csv {
        let mut csv = String::from(
            "program,kernel,launches,time_us,total_us,tbs,tb_time_us,shared_per_tb,registers_per_tb,tbs_per_sm,sram_percent,save_us,class_kernel,class_program,program_us\n",
        );
        for r in &rows {
            csv.push_str(&format!(
                "{},{},{},{:.2},{:.2},{},{:.3},{},{},{},{:.2},{:.3},{:?},{:?},{:.2}\n",
                r.program,
                r.kernel,
                r.launches,
                r.time_us,
                r.total_us,
                r.tbs,
                r.tb_time_us,
                r.shared_per_tb,
                r.registers_per_tb,
                r.tbs_per_sm,
                r.sram_percent,
                r.save_us,
                r.class_kernel,
                r.class_program,
                r.program_us
            ));
        }
        write_atomic(path, csv.as_bytes())?;
    }
    if args.json {
        print_json(&rows);
        return Ok(true);
    }
    println!(
        "{:<13} {:<22} {:>4} {:>10} {:>7} {:>9} {:>7} {:>7} {:>5} {:>6} {:>8}  class (kernel, program)",
        "program", "kernel", "runs", "µs/run", "TBs", "TB µs", "smem/TB", "regs/TB", "TB/SM", "SRAM%", "save µs"
    );
    for r in &rows {
        println!(
            "{:<13} {:<22} {:>4} {:>10.1} {:>7} {:>9.2} {:>7} {:>7} {:>5} {:>6.1} {:>8.2}  {:?}, {:?}",
            r.program,
            r.kernel,
            r.launches,
            r.time_us,
            r.tbs,
            r.tb_time_us,
            r.shared_per_tb,
            r.registers_per_tb,
            r.tbs_per_sm,
            r.sram_percent,
            r.save_us,
            r.class_kernel,
            r.class_program
        );
    }
    Ok(true)
}

/// `switchyard experiment corun --all-pairs`: every pair, each scheme against the oracle.
/// `experiment corun --mix`: two to four programs under each scheme.
fn corun_mix(args: &CorunArgs, c: &experiment::corun::CorunConfig, list: &str) -> Outcome {
    use experiment::corun;
    let names: Vec<String> = list.split(',').map(|s| s.trim().to_string()).collect();
    let programs = kernels_on(&names, &c.gpu)?;
    let bar = runs_bar("corun mix", 1);
    let r = corun::run_mix(c, &programs, &|done, total, what| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
        bar.set_message(what.to_string());
    });
    bar.finish_and_clear();
    let r = r.map_err(|e| format!("--mix: {e}"))?;
    if let Some(dir) = &args.csv {
        write_into(dir, "corun-mix.csv", r.to_csv().as_bytes())?;
    }
    if args.json {
        print_json(&r);
    } else {
        println!(
            "Co-running mix (papers/lin-thesis ch. 4) on {}, {} inputs: {}",
            r.gpu,
            r.size,
            r.programs.join(" + ")
        );
        let ipcs = |v: &[f64]| {
            v.iter()
                .map(|x| format!("{x:.2}"))
                .collect::<Vec<_>>()
                .join("/")
        };
        println!("IPC alone: {}", ipcs(&r.ipc_alone));
        // The label column as wide as the widest label (SMK's and Maestro's carry IPCs).
        let w = r
            .schemes
            .iter()
            .map(|s| s.label.len())
            .max()
            .unwrap_or(0)
            .max(20);
        println!(
            "{:<w$} {:>20} {:>20} {:>7} {:>7}",
            "scheme", "IPC together", "slowdowns", "WS", "HS"
        );
        for s in &r.schemes {
            let (slow, ws, hs) = match &s.metrics {
                Some(m) => (
                    ipcs(&m.slowdowns),
                    format!("{:.3}", m.weighted_speedup),
                    format!("{:.3}", m.harmonic_speedup),
                ),
                None => ("-".into(), "-".into(), "-".into()),
            };
            let label = if s.verified {
                s.label.clone()
            } else {
                format!("{} NOT VERIFIED", s.label)
            };
            println!(
                "{label:<w$} {:>20} {slow:>20} {ws:>7} {hs:>7}",
                ipcs(&s.ipc)
            );
        }
        if let Some(dir) = &args.csv {
            println!("CSV: {}/corun-mix.csv", dir.display());
        }
    }
    let ok = r.all_verified();
    if !ok {
        eprintln!("error: some runs did not verify (NOT VERIFIED above)");
    }
    Ok(ok)
}

fn corun_pairs(args: &CorunArgs, c: &experiment::corun::CorunConfig) -> Outcome {
    use experiment::corun;
    let programs: Vec<&'static dyn suite::Kernel> = match &args.programs {
        Some(list) => {
            let names: Vec<String> = list.split(',').map(|s| s.trim().to_string()).collect();
            kernels_on(&names, &c.gpu)?
        }
        None => suite::all()
            .iter()
            .copied()
            .filter(|k| !k.needs_tensor_cores() || c.gpu.pipeline.tensor.is_some())
            .collect(),
    };
    let bar = runs_bar("corun pairs", 1);
    let r = corun::run_pairs(c, &programs, &|done, total, what| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
        bar.set_message(what.to_string());
    });
    bar.finish_and_clear();
    let r = r.map_err(|e| e.to_string())?;
    let fig = corun::pairs_figure(&r);
    if let Some(dir) = &args.csv {
        write_into(dir, "corun-pairs.csv", corun::pairs_csv(&r).as_bytes())?;
    }
    if let Some(dir) = &args.plots {
        write_into(dir, "corun-pairs.svg", svg::bar_chart(&fig).as_bytes())?;
    }
    if args.json {
        print_json(&r);
        return Ok(true);
    }
    println!(
        "Co-running every pair (papers/lin-thesis ch. 4) on {}, {} inputs: {} pairs",
        r.gpu,
        r.size,
        r.pairs.len()
    );
    println!(
        "
{:<28} {:<22} {:>7} {:>7} {:>9}",
        "pair", "scheme", "WS", "HS", "HS/oracle"
    );
    for p in &r.pairs {
        let name = format!("{} + {}", p.alone[0].program, p.alone[1].program);
        let Some(best) = p.oracle() else {
            println!("{name:<28} (no TB combination fits on an SM)");
            continue;
        };
        let oracle = best
            .metrics
            .as_ref()
            .map_or(f64::NAN, |m| m.harmonic_speedup);
        let rows = p
            .schemes
            .iter()
            .map(|x| (x.label.chars().take(22).collect::<String>(), x))
            .chain([(format!("oracle ({})", best.label), best)]);
        for (scheme, x) in rows {
            let Some(m) = &x.metrics else { continue };
            println!(
                "{name:<28} {scheme:<22} {:>7.3} {:>7.3} {:>9.3}{}",
                m.weighted_speedup,
                m.harmonic_speedup,
                m.harmonic_speedup / oracle,
                if x.verified { "" } else { " NOT VERIFIED" }
            );
        }
    }
    println!(
        "
{:<14} {:>6} {:>8} {:>8} {:>15} {:>14}",
        "scheme", "pairs", "mean WS", "mean HS", "HS/oracle mean", "HS/oracle most"
    );
    for s in &r.summary {
        println!(
            "{:<14} {:>6} {:>8.3} {:>8.3} {:>15.3} {:>14.3}",
            s.scheme,
            s.pairs,
            s.mean_weighted,
            s.mean_harmonic,
            s.mean_harmonic_vs_oracle,
            s.max_harmonic_vs_oracle
        );
    }
    println!(
        "
{}",
        fig.paper
    );
    if let Some(dir) = &args.csv {
        println!("CSV: {}/corun-pairs.csv", dir.display());
    }
    if let Some(dir) = &args.plots {
        println!("plot: {}/corun-pairs.svg", dir.display());
    }
    let verified = r.pairs.iter().all(|p| p.all_verified());
    if !verified {
        eprintln!("error: some runs did not verify (NOT VERIFIED above)");
    }
    Ok(verified)
}

/// `switchyard experiment corun`: papers/lin-thesis ch. 4, Figure 4.2.
pub(crate) fn corun(args: CorunArgs) -> Outcome {
    use experiment::corun::{self, CorunConfig};
    let gpu = load_gpu(&args.gpu, None)?;
    let names: [&str; 2] = match args.pair.as_slice() {
        [] => ["pathfinder", "kmeans"],
        [a, b] => [a.as_str(), b.as_str()],
        _ => return Err("give two suite programs, or none for the default pair".into()),
    };
    let pair = [kernel(names[0])?, kernel(names[1])?];
    if let Some(k) = pair
        .iter()
        .find(|k| k.needs_tensor_cores())
        .filter(|_| gpu.pipeline.tensor.is_none())
    {
        return Err(format!(
            "{} needs tensor cores, which {} has not",
            k.name(),
            gpu.name
        ));
    }
    let mut c = CorunConfig::default_on(gpu, pair);
    if args.all_pairs {
        c.max_tbs = Some(4);
    }
    c.size = args.size.size();
    c.seed = args.seed;
    if args.max_tbs == Some(0) {
        return Err("--max-tbs must be at least 1".into());
    }
    if args.max_tbs.is_some() {
        c.max_tbs = args.max_tbs;
    }
    if !(args.prior_lsk.is_finite() && args.prior_lsk > 0.0) {
        return Err(format!(
            "--prior-lsk must be a positive number, not {}",
            args.prior_lsk
        ));
    }
    c.prior_lsk = args.prior_lsk;
    if let Some(list) = &args.schemes {
        c.schemes = workload::choice::parse_list(list).map_err(|e| format!("--schemes: {e}"))?;
    }
    if let Some(t) = args.threads {
        c.threads = t.max(1);
    }
    c.max_cycles = args.max_cycles;
    c.instruction_limit = args.instruction_limit;
    if args.all_pairs {
        return corun_pairs(&args, &c);
    }
    if let Some(list) = &args.mix {
        return corun_mix(&args, &c, list);
    }
    let bar = runs_bar("corun", 2);
    let r = corun::run(&c, &|done, total, what| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
        bar.set_message(what.to_string());
    });
    bar.finish_and_clear();
    let r = r.map_err(|e| e.to_string())?;
    let fig = corun::figure(&r);
    if let Some(dir) = &args.csv {
        write_into(dir, "corun.csv", corun::to_csv(&r).as_bytes())?;
    }
    if let Some(dir) = &args.plots {
        write_into(dir, "corun.svg", svg::bar_chart(&fig).as_bytes())?;
    }
    if args.json {
        print_json(&r);
    } else {
        println!(
            "Co-running (papers/lin-thesis ch. 4, Figure 4.2) on {}, {} inputs: {} + {}",
            r.gpu, r.size, r.alone[0].program, r.alone[1].program
        );
        for a in &r.alone {
            println!(
                "  {} alone: IPC {:.2} over {} cycles; {} at {} TBs/SM",
                a.program, a.ipc, a.cycles, a.kernel, a.tbs_per_sm
            );
            let curve: Vec<String> = a.curve.iter().map(|v| format!("{v:.2}")).collect();
            println!("    IPC at 1, 2, ... TBs/SM: {}", curve.join(" "));
            let list = |v: &[f64]| v.iter().map(|v| format!("{v:.1}")).collect::<Vec<_>>();
            println!(
                "    per {}-cycle window per SM: requests {}; NoC flits {}; DRAM lines {}",
                gpu::timing::IRC_WINDOW,
                list(&a.bandwidth.requests).join(" "),
                list(&a.bandwidth.noc).join(" "),
                list(&a.bandwidth.dram).join(" ")
            );
        }
        let s = &r.ccbp;
        println!(
            "  CCBP (§4.5, Algorithm 1): sustainable {:.1} NoC flits / {:.1} DRAM lines per window per SM; {}",
            s.sustainable.noc,
            s.sustainable.dram,
            s.shares
                .iter()
                .zip(&r.alone)
                .map(|(x, a)| format!(
                    "{} {:?}: {} TBs, quota {}",
                    a.program,
                    x.kind,
                    x.tbs,
                    x.quota.map_or("none".to_string(), |q| q.to_string())
                ))
                .collect::<Vec<_>>()
                .join("; ")
        );
        let w = r
            .combinations
            .iter()
            .chain(&r.schemes)
            .map(|p| p.label.len())
            .max()
            .unwrap_or(0)
            .max(20);
        println!(
            "\n{:<w$} {:>8} {:>8} {:>9} {:>9} {:>8} {:>8}",
            "combination / scheme", "IPC a", "IPC b", "slow a", "slow b", "WS", "HS"
        );
        let best = |i: usize| {
            let mut tag = String::new();
            if r.best_harmonic == Some(i) {
                tag.push_str(" best HS");
            }
            if r.best_weighted == Some(i) {
                tag.push_str(" best WS");
            }
            tag
        };
        let tagged = r
            .combinations
            .iter()
            .enumerate()
            .map(|(i, p)| (p, best(i)))
            .chain(r.schemes.iter().map(|p| (p, String::new())));
        for (p, tag) in tagged {
            let m = p.metrics.as_ref();
            let f = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.3}"));
            println!(
                "{:<w$} {:>8.2} {:>8.2} {:>9} {:>9} {:>8} {:>8}{}{}",
                p.label,
                p.ipc[0],
                p.ipc[1],
                f(m.map(|m| m.slowdowns[0])),
                f(m.map(|m| m.slowdowns[1])),
                f(m.map(|m| m.weighted_speedup)),
                f(m.map(|m| m.harmonic_speedup)),
                tag,
                if p.verified { "" } else { " NOT VERIFIED" }
            );
        }
        if let Some(dir) = &args.csv {
            println!("\nCSV: {}/corun.csv", dir.display());
        }
        if let Some(dir) = &args.plots {
            println!("plot: {}/corun.svg", dir.display());
        }
    }
    let ok = r.all_verified();
    if !ok {
        eprintln!("error: some runs did not verify against their CPU references");
    }
    Ok(ok)
}

/// `switchyard experiment multiprogram`: papers/tanasic-thesis §5.3, Figures 5.4-5.8.
pub(crate) fn multiprogram(args: MultiprogramArgs) -> Outcome {
    use experiment::multiprogram::{self, Balance, MultiprogramConfig};
    let gpu = load_gpu(&args.gpu, None)?;
    let mut inf =
        experiment::inference::InferenceConfig::default_on(load_gpu(&args.inference_gpu, None)?);
    let mut c = MultiprogramConfig::default_on(gpu);
    if !args.benchmarks.is_empty() {
        c.benchmarks = kernels_on(&args.benchmarks, &c.gpu)?;
    }
    runnable_on(&c.benchmarks, &c.gpu)?;
    c.size = args.size.size();
    c.procs = args.procs.clone();
    c.mixes = args.mixes;
    inf.count = args.requests;
    inf.sms = (args.inference_sms > 0).then_some(args.inference_sms);
    if let Some(list) = &args.inference_runs {
        inf.runs = list
            .split(',')
            .map(|name| {
                let name = name.trim();
                experiment::inference::RUNS
                    .iter()
                    .find(|r| **r == name)
                    .copied()
                    .ok_or_else(|| {
                        format!(
                            "--inference-runs: unknown run `{name}` (one of {})",
                            experiment::inference::RUNS.join(", ")
                        )
                    })
            })
            .collect::<Result<_, _>>()?;
    }
    inf.machine().map_err(|e| format!("--inference-sms: {e}"))?;
    if !(args.mean_gap.is_finite() && args.mean_gap > 0.0) {
        return Err(format!(
            "--mean-gap {} must be a positive number of µs",
            args.mean_gap
        ));
    }
    inf.mean_gap_us = args.mean_gap;
    if args.quick {
        c.procs = vec![2, 4];
        c.mixes = 2;
        inf.count = 4;
    }
    if !(1..=workload::arrivals::MAX_REQUESTS).contains(&inf.count) {
        return Err(format!(
            "--requests {} is out of 1..={}",
            inf.count,
            workload::arrivals::MAX_REQUESTS
        ));
    }
    c.runs = multiprogram::parse_runs(&args.runs).map_err(|e| format!("--runs: {e}"))?;
    if c.mixes == 0 || c.procs.is_empty() {
        return Err("--mixes and --procs must give at least one mix".into());
    }
    c.seed = args.seed;
    if !(1..=workload::scenario::MAX_REPLAY).contains(&args.replay) {
        return Err(format!(
            "--replay {} is out of 1..={}",
            args.replay,
            workload::scenario::MAX_REPLAY
        ));
    }
    c.replay = args.replay;
    c.balance = match args.balance {
        BalanceArg::Classes => Balance::Classes,
        BalanceArg::Random => Balance::Random,
    };
    c.priority_copies = match args.copy_engine {
        CopyArg::Priority => workload::scenario::CopyPolicy::Priority,
        CopyArg::Fcfs => workload::scenario::CopyPolicy::Fcfs,
    };
    c.switch = workload::choice::parse(&args.switch).map_err(|e| format!("--switch: {e}"))?;
    if let Some(t) = args.threads {
        c.threads = t.max(1);
    }
    c.max_cycles = args.max_cycles;
    c.instruction_limit = args.instruction_limit;
    inf.switch = c.switch;
    inf.threads = c.threads;
    inf.max_cycles = c.max_cycles;
    inf.instruction_limit = c.instruction_limit;
    let inference = if args.no_inference {
        None
    } else {
        let bar = runs_bar("inference", inf.total_runs());
        let r = experiment::inference::run(&inf, &|done, _, what| {
            bar.set_position(done as u64);
            bar.set_message(what.to_string());
        });
        bar.finish_and_clear();
        Some(r.map_err(|e| e.to_string())?)
    };
    if let Some(dir) = &args.csv {
        if let Some(i) = &inference {
            write_into(
                dir,
                "inference.csv",
                experiment::inference::to_csv(i).as_bytes(),
            )?;
        }
    }
    let inference_ok = inference.as_ref().is_none_or(|i| i.all_verified());
    if args.inference_only {
        let i = inference.expect("not skipped");
        if args.json {
            let v = serde_json::json!({ "inference": i });
            print_json(&v);
        } else {
            print!("{}", experiment::inference::table(&i));
            if let Some(dir) = &args.csv {
                println!("\nCSV: {}/inference.csv", dir.display());
            }
        }
        if !inference_ok {
            eprintln!("error: some inference runs did not verify");
        }
        return Ok(inference_ok);
    }
    let bar = runs_bar("multiprogram", c.total_runs());
    let r = multiprogram::run(&c, &|done, _, what| {
        bar.set_position(done as u64);
        bar.set_message(what.to_string());
    });
    bar.finish_and_clear();
    let r = r.map_err(|e| e.to_string())?;
    let figs = multiprogram::figures(&r);
    if let Some(dir) = &args.csv {
        create_dir(dir)?;
        let mut b = String::from("benchmark,alone_us,class_kernel,class_program\n");
        for x in &r.benchmarks {
            b.push_str(&format!(
                "{},{:.3},{:?},{:?}\n",
                x.name, x.alone_us, x.class_kernel, x.class_program
            ));
        }
        let mut runs = String::from(
            "procs,mix,run,process,benchmark,priority,completed,turnaround_us,alone_us,ntt,antt,stp,fairness,verified,cycles,preempted_tbs,sm_requests\n",
        );
        for x in &r.runs {
            let mix = &r.mixes[x.mix];
            let prioritized = multiprogram::prioritized(&x.run);
            for (i, &b) in mix.members.iter().enumerate() {
                runs.push_str(&format!(
                    "{},{},{},{},{},{},{},{:.3},{:.3},{:.4},{:.4},{:.4},{:.4},{},{},{},{}\n",
                    mix.procs,
                    mix.index,
                    x.run,
                    i,
                    r.benchmarks[b].name,
                    i32::from(prioritized && i == 0),
                    x.completed[i],
                    x.turnaround_us[i],
                    r.benchmarks[b].alone_us,
                    x.ntt[i],
                    x.antt,
                    x.stp,
                    x.fairness,
                    x.verified,
                    x.cycles,
                    x.preempted_tbs,
                    x.sm_requests
                ));
            }
        }
        write_atomic(&dir.join("benchmarks.csv"), b.as_bytes())?;
        write_atomic(&dir.join("runs.csv"), runs.as_bytes())?;
        for f in &figs {
            write_atomic(
                &dir.join(format!("{}.csv", f.id)),
                figures::to_csv(f).as_bytes(),
            )?;
        }
    }
    if let Some(dir) = &args.plots {
        create_dir(dir)?;
        for f in &figs {
            let path = dir.join(format!("{}.svg", f.id));
            write_atomic(&path, svg::bar_chart(f).as_bytes())?;
        }
    }
    if args.json {
        let v = serde_json::json!({ "results": r, "figures": figs, "inference": inference });
        print_json(&v);
    } else {
        println!(
            "Multiprogram evaluation (papers/tanasic-thesis §5.3) on {}, {} inputs, replay {}, seed {}; cs = {}, copy engines in prioritized runs: {:?}",
            r.gpu, r.size, r.replay, r.seed, r.switch, r.priority_copies
        );
        println!("\n{:<13} {:>10}  class 1, class 2", "benchmark", "alone µs");
        for b in &r.benchmarks {
            println!(
                "{:<13} {:>10.1}  {:?}, {:?}",
                b.name, b.alone_us, b.class_kernel, b.class_program
            );
        }
        for f in &figs {
            println!();
            print!("{}", figures::to_table(f));
        }
        if let Some(i) = &inference {
            println!();
            print!("{}", experiment::inference::table(i));
        }
        if let Some(dir) = &args.csv {
            println!(
                "\nCSV: {}/{{benchmarks,runs,fig*,nvidia*,inference}}.csv",
                dir.display()
            );
        }
        if let Some(dir) = &args.plots {
            println!("plots: {}/fig*.svg", dir.display());
        }
    }
    let ok = r.all_verified() && inference_ok;
    if !ok {
        eprintln!("error: some runs did not verify against their CPU references");
    }
    Ok(ok)
}

/// A mechanism and the paper's normalised context, preemption time and resume time.
type PaperRow = (
    &'static str,
    Option<f64>,
    Option<f64>,
    Option<f64>,
    Option<f64>,
);

/// papers/ji-ctxback §V's averages, normalised to BASELINE: (mechanism, context,
/// preemption time, resume time); `None` where the paper gives no number.
const JI_CTXBACK: [PaperRow; 6] = [
    ("baseline", Some(1.0), Some(1.0), Some(1.0), Some(0.0)),
    // "LIVE reduces the context size by 37.8% on average".
    ("live", Some(0.622), None, None, None),
    // CTXBack's context is "only 9.2% more than CKPT's" (0.3897 / 1.092); resume 318% of
    // BASELINE; runtime overhead 130%.
    ("ckpt", Some(0.357), None, Some(3.18), Some(1.30)),
    // Context -62.07%; latency 34.8% above CTXBack's (0.369 x 1.348); resume -65.6%.
    ("cs-defer", Some(0.3793), Some(0.497), Some(0.344), None),
    // Context -61.03%, preemption time -63.1%, resume time -50.0%; overhead 0.41%.
    (
        "ctxback",
        Some(0.3897),
        Some(0.369),
        Some(0.500),
        Some(0.0041),
    ),
    // Context -62.09%, preemption time -65.2%, resume time -54.8%.
    (
        "ctxback-cs-defer",
        Some(0.3791),
        Some(0.348),
        Some(0.452),
        None,
    ),
];

/// `switchyard experiment per-instruction`: papers/ji-ctxback Figures 7–9.
pub(crate) fn per_instruction(args: PerInstructionArgs) -> Outcome {
    let gpu = load_gpu(&args.gpu, None)?;
    let mut config = PerInstructionConfig::default_on(gpu);
    if !args.kernels.is_empty() {
        config.kernels = args
            .kernels
            .iter()
            .map(|n| kernel(n))
            .collect::<Result<_, _>>()?;
    }
    config.size = args.size.size();
    if args.samples == 0 {
        return Err("--samples must be at least 1".into());
    }
    config.samples = args.samples;
    config.seed = args.seed;
    if !args.mechanisms.is_empty() {
        let mut m = super::all_mechanisms(&args.mechanisms);
        if !m.contains(&preempt::MechanismKind::Baseline) {
            m.insert(0, preempt::MechanismKind::Baseline);
        }
        config.mechanisms = m;
    }
    if let Some(t) = args.threads {
        config.threads = t.max(1);
    }
    config.max_cycles = args.max_cycles;
    config.instruction_limit = args.instruction_limit;
    let bar = runs_bar(
        "per-instruction preemption",
        per_instruction::total_runs(&config),
    );
    let r = per_instruction::run(&config, &|done, _, what| {
        bar.set_position(done as u64);
        bar.set_message(what.to_string());
    });
    bar.finish_and_clear();
    let r = r.map_err(|e| e.to_string())?;
    if let Some(dir) = &args.csv {
        write_per_instruction_csv(dir, &r)?;
    }
    write_figures(
        &per_instruction::figures(&r),
        args.csv.as_deref(),
        args.plots.as_deref(),
    )?;
    if args.json {
        print_json(&r);
    } else {
        print_per_instruction(&r);
        if let Some(dir) = &args.csv {
            println!(
                "\nCSV: {}/{{kernels,requests,fig7,fig8,fig9,fig10}}.csv",
                dir.display()
            );
        }
        if let Some(dir) = &args.plots {
            println!("plots: {}/fig{{7,8,9,10}}.svg", dir.display());
        }
    }
    Ok(true)
}

fn print_per_instruction(r: &PerInstructionResults) {
    let us = |c: f64| c / r.core_mhz;
    println!(
        "per-instruction preemption on {}, {} inputs, {} seeded moments per kernel (seed {})",
        r.gpu, r.size, r.samples, r.seed
    );
    println!("one SM preempted per run, every run bit-exact against the uninterrupted one;");
    println!("x: normalised to baseline at the same moments (ratio of the means over the samples)");
    for (k, n) in &r.unrequested {
        println!("  {k}: {n} drawn moments found no SM to take (left out)");
    }
    let w = r.mechanisms.iter().map(|m| m.len()).fold(16, usize::max);
    println!(
        "{:<13} {:<w$} {:>4} {:>10} {:>6} {:>11} {:>6} {:>10} {:>6}",
        "kernel", "mechanism", "req", "context KB", "x", "preempt µs", "x", "resume µs", "x"
    );
    for m in &r.runs {
        println!(
            "{:<13} {:<w$} {:>4} {:>10.1} {:>6.3} {:>11.2} {:>6.3} {:>10.2} {:>6.3}",
            m.kernel,
            m.mechanism,
            m.requests.len(),
            m.mean.context / 1024.0,
            m.normalised.context,
            us(m.mean.preemption),
            m.normalised.preemption,
            us(m.mean.resume),
            m.normalised.resume
        );
    }
    for m in r.runs.iter().filter(|m| m.moments_differ > 0) {
        println!(
            "  {} with {}: {} drawn moments without the request baseline made there ({} requests made; the mechanism changed the kernel's timing before the request: its kernel pass, or CKPT's checkpoints; warp instructions at the request up to {:.2}% apart)",
            m.kernel,
            m.mechanism,
            m.moments_differ,
            m.requests.len(),
            100.0 * m.instruction_drift
        );
    }
    println!(
        "\nOver the {} kernels, normalised to baseline: arithmetic mean (the paper's \"on average\"),",
        r.kernels
            .iter()
            .filter(|k| r.runs.iter().any(|m| &m.kernel == *k && !m.requests.is_empty()))
            .count()
    );
    println!(
        "geometric mean, and papers/ji-ctxback §V (AMD Radeon VII); overhead: kernel time with"
    );
    println!("the mechanism in place and nothing preempted over without, less one (Figure 10)");
    println!(
        "{:<w$} {:>8} {:>6} {:>6} {:>8} {:>6} {:>6} {:>8} {:>6} {:>6} {:>9} {:>7}",
        "mechanism",
        "context",
        "geo",
        "paper",
        "preempt",
        "geo",
        "paper",
        "resume",
        "geo",
        "paper",
        "overhead",
        "paper"
    );
    let paper = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.3}"));
    for a in &r.averages {
        let p = JI_CTXBACK
            .iter()
            .find(|p| p.0 == a.mechanism)
            .copied()
            .unwrap_or(("", None, None, None, None));
        let pct = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{:.2}%", v * 100.0));
        println!(
            "{:<w$} {:>8.3} {:>6.3} {:>6} {:>8.3} {:>6.3} {:>6} {:>8.3} {:>6.3} {:>6} {:>9} {:>7}",
            a.mechanism,
            a.arithmetic.context,
            a.geometric.context,
            paper(p.1),
            a.arithmetic.preemption,
            a.geometric.preemption,
            paper(p.2),
            a.arithmetic.resume,
            a.geometric.resume,
            paper(p.3),
            pct(Some(a.runtime_overhead)),
            pct(p.4)
        );
    }
}

fn write_per_instruction_csv(dir: &Path, r: &PerInstructionResults) -> Result<(), String> {
    create_dir(dir)?;
    let mut kernels = String::from(
        "kernel,mechanism,requests,mean_context_bytes,mean_preemption_cycles,mean_resume_cycles,norm_context,norm_preemption,norm_resume,moments_differ,instruction_drift,runtime_overhead\n",
    );
    let mut requests = String::from(
        "kernel,mechanism,drawn,cycle,sm,tbs,warp_instructions,registers_bytes,shared_bytes,stack_barrier_bytes,metadata_bytes,context_bytes,preemption_cycles,resume_cycles,restored,switched,drained,flushed,refused\n",
    );
    for m in &r.runs {
        kernels.push_str(&format!(
            "{},{},{},{:.1},{:.1},{:.1},{:.4},{:.4},{:.4},{},{:.6},{:.6}\n",
            m.kernel,
            m.mechanism,
            m.requests.len(),
            m.mean.context,
            m.mean.preemption,
            m.mean.resume,
            m.normalised.context,
            m.normalised.preemption,
            m.normalised.resume,
            m.moments_differ,
            m.instruction_drift,
            m.runtime_overhead
        ));
        for q in &m.requests {
            let b = q.context;
            requests.push_str(&format!(
                "{},{},{},{},{},{},{},{},{},{},{},{},{},{:.1},{},{},{},{},{}\n",
                m.kernel,
                m.mechanism,
                q.drawn,
                q.cycle,
                q.sm,
                q.tbs,
                q.warp_instructions,
                b.registers,
                b.shared,
                b.stack_barrier,
                b.metadata,
                b.total(),
                q.preemption,
                q.resume,
                q.restored,
                q.switched,
                q.drained,
                q.flushed,
                q.refused
            ));
        }
    }
    for a in &r.averages {
        for (mean, v) in [("arithmetic", &a.arithmetic), ("geometric", &a.geometric)] {
            kernels.push_str(&format!(
                "{mean} mean,{},,,,,{:.4},{:.4},{:.4},,\n",
                a.mechanism, v.context, v.preemption, v.resume
            ));
        }
    }
    write_atomic(&dir.join("kernels.csv"), kernels.as_bytes())?;
    write_atomic(&dir.join("requests.csv"), requests.as_bytes())?;
    Ok(())
}

/// `switchyard experiment pep`: papers/li-pep Figures 5–9.
pub(crate) fn pep(args: PepArgs) -> Outcome {
    let gpu = load_gpu(&args.gpu, None)?;
    let mut config = pep::ExperimentConfig::default_on(gpu);
    if !args.kernels.is_empty() {
        config.kernels = args
            .kernels
            .iter()
            .map(|n| kernel(n))
            .collect::<Result<_, _>>()?;
    }
    let finite = |name: &str, v: &[f64], lo: f64, hi: f64| -> Result<(), String> {
        match v
            .iter()
            .find(|x| !(x.is_finite() && lo <= **x && **x <= hi))
        {
            Some(x) => Err(format!("--{name}: {x} is out of range ({lo} to {hi})")),
            None if v.is_empty() => Err(format!("--{name}: give at least one value")),
            None => Ok(()),
        }
    };
    finite("launch-us", &args.launch_us, 0.0, 1.0e6)?;
    finite("progress", &args.progress, 0.0, 1.0)?;
    finite("deadlines-us", &args.deadlines_us, 1.0e-3, 1.0e6)?;
    finite(
        "predicted-launch-us",
        &[args.predicted_launch_us],
        0.0,
        1.0e6,
    )?;
    config.size = args.size.size();
    config.launch_us = args.launch_us;
    config.progress = args.progress;
    config.deadlines_us = args.deadlines_us;
    config.predicted_launch_us = args.predicted_launch_us;
    config.seed = args.seed;
    if let Some(t) = args.threads {
        config.threads = t.max(1);
    }
    config.max_cycles = args.max_cycles;
    config.instruction_limit = args.instruction_limit;
    let bar = runs_bar("PEP's evaluation", pep::total_runs(&config));
    let r = pep::run(&config, &|done, _, what| {
        bar.set_position(done as u64);
        bar.set_message(what.to_string());
    });
    bar.finish_and_clear();
    let r = r.map_err(|e| e.to_string())?;
    if let Some(dir) = &args.csv {
        write_into(dir, "points.csv", pep::csv(&r).as_bytes())?;
    }
    write_figures(
        &pep::figures(&r),
        args.csv.as_deref(),
        args.plots.as_deref(),
    )?;
    if args.json {
        print_json(&r);
    } else {
        print_pep(&r);
        if let Some(dir) = &args.csv {
            println!(
                "\nCSV: {}/{{points,fig5,fig6,fig7,fig8,fig9}}.csv",
                dir.display()
            );
        }
        if let Some(dir) = &args.plots {
            println!("plots: {}/fig{{5,6,7,8,9}}.svg", dir.display());
        }
    }
    Ok(true)
}

fn print_pep(r: &PepResults) {
    println!(
        "PEP's evaluation on {}, {} inputs: {} kernels, every SM preempted once per run,",
        r.gpu,
        r.size,
        r.kernels.len()
    );
    println!(
        "every run bit-exact against the uninterrupted one; means over launch times, progress"
    );
    println!("and (Chimera) deadlines; context and overhead per switched TB");
    println!(
        "{:<14} {:>6} {:>11} {:>13} {:>10} {:>12}",
        "family", "points", "latency µs", "context B/TB", "base B/TB", "overhead µs"
    );
    for m in &r.means {
        println!(
            "{:<14} {:>6} {:>11.2} {:>13.0} {:>10.0} {:>12.2}",
            m.family, m.points, m.latency_us, m.context_per_tb, m.base_per_tb, m.overhead_us
        );
    }
    println!("\npapers/li-pep §4 (GPGPU-Sim GTX980): latency Chimera 8.9 µs, PEP 4.5 µs,");
    println!("PEP+in-place 3.6 µs, Chimera+dirty -31.8%; context Chimera+dirty -34.4%, PEP about");
    println!("Chimera's; saving overhead PEP -6.3% from Chimera.");
}

/// `switchyard experiment faults`: papers/tanasic-thesis §6.5, Figures 6.11-6.15.
pub(crate) fn faults(args: FaultsArgs) -> Outcome {
    use experiment::faults::{self, FaultFigure, FaultsConfig};
    let gpu = load_gpu(&args.gpu, None)?;
    let mut c = FaultsConfig::default_on(gpu);
    if !args.kernels.is_empty() {
        c.kernels = kernels_on(&args.kernels, &c.gpu)?;
    }
    if !args.figures.is_empty() {
        c.figures = args
            .figures
            .iter()
            .map(|f| {
                FaultFigure::parse(f.trim()).ok_or_else(|| {
                    let known: Vec<String> = FaultFigure::ALL
                        .iter()
                        .map(|f| format!("{} ({})", f.number(), f.name()))
                        .collect();
                    format!(
                        "--figures: no figure `{f}` (there are: {})",
                        known.join(", ")
                    )
                })
            })
            .collect::<Result<_, _>>()?;
        c.figures.sort();
        c.figures.dedup();
    }
    c.size = args.size.size();
    c.seed = args.seed;
    if let Some(t) = args.threads {
        c.threads = t.max(1);
    }
    c.max_cycles = args.max_cycles;
    c.instruction_limit = args.instruction_limit;
    let bar = runs_bar("preemptible faults", 1);
    let r = faults::run(&c, &|done, total, what| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
        bar.set_message(what.to_string());
    });
    bar.finish_and_clear();
    let r = r.map_err(|e| e.to_string())?;
    let figs = r.bar_figures();
    if let Some(dir) = &args.csv {
        write_into(dir, "runs.csv", r.to_csv().as_bytes())?;
    }
    write_figures(&figs, args.csv.as_deref(), args.plots.as_deref())?;
    if args.json {
        print_json(&r);
    } else {
        println!(
            "Preemptible faults (papers/tanasic-thesis §6.5) on {}, {} inputs, {} programs",
            r.gpu,
            r.size,
            c.kernels.len()
        );
        for f in &r.figures {
            println!("\n{}", f.title);
            let mut head = format!("{:<14}", "kernel");
            for s in &f.series {
                head.push_str(&format!(" {:>13}", s.label));
            }
            println!("{head}");
            let kernels = f.series.first().map_or(0, |s| s.ratios.len());
            for i in 0..kernels {
                let mut line = format!("{:<14}", f.series[0].ratios[i].0);
                for s in &f.series {
                    line.push_str(&format!(" {:>12.1}%", 100.0 * s.ratios[i].1));
                }
                println!("{line}");
            }
            let mut line = format!("{:<14}", "geomean");
            for s in &f.series {
                line.push_str(&format!(" {:>12.1}%", 100.0 * s.geomean));
            }
            println!("{line}");
            let mut line = format!("{:<14}", "thesis");
            for s in &f.series {
                match s.thesis {
                    Some(t) => line.push_str(&format!(" {:>12.1}%", 100.0 * t)),
                    None => line.push_str(&format!(" {:>13}", "-")),
                }
            }
            println!("{line}");
        }
        let faulted: Vec<&faults::Run> = r.runs.iter().filter(|r| r.far_faults > 0).collect();
        if !faulted.is_empty() {
            println!("\nDemand paging (runs with managed memory):");
            let w = faulted.iter().map(|r| r.setting.len()).max().unwrap_or(0);
            println!(
                "{:<14} {:<w$} {:>7} {:>9} {:>9} {:>9} {:>8} {:>9}",
                "kernel",
                "setting",
                "faults",
                "migrated",
                "alloc cpu",
                "alloc gpu",
                "replays",
                "switched"
            );
            for run in faulted {
                println!(
                    "{:<14} {:<w$} {:>7} {:>9} {:>9} {:>9} {:>8} {:>9}",
                    run.kernel,
                    run.setting,
                    run.far_faults,
                    run.regions_migrated,
                    run.regions_allocated,
                    run.regions_allocated_locally,
                    run.replays,
                    run.tbs_switched_out
                );
            }
        }
        if let Some(dir) = &args.csv {
            println!("\nCSV: {}/runs.csv and one per figure", dir.display());
        }
        if let Some(dir) = &args.plots {
            println!("plots: {}/figure-6-*.svg", dir.display());
        }
    }
    let ok = r.all_verified();
    if !ok {
        eprintln!("error: some runs did not verify against their CPU references");
    }
    Ok(ok)
}

/// `switchyard experiment tlp`: papers/lin-thesis §3.7, Figures 3.12-3.15.
pub(crate) fn tlp(args: TlpArgs) -> Outcome {
    use experiment::tlp::{self, TlpExperiment};
    let gpu = load_gpu(&args.gpu, None)?;
    let mut c = TlpExperiment::default_on(gpu);
    if !args.kernels.is_empty() {
        c.kernels = kernels_on(&args.kernels, &c.gpu)?;
    }
    c.size = args.size.size();
    c.seed = args.seed;
    if let Some(t) = args.threads {
        c.threads = t.max(1);
    }
    c.max_cycles = args.max_cycles;
    c.instruction_limit = args.instruction_limit;
    let bar = runs_bar("TLP", 1);
    let r = tlp::run(&c, &|done, total, what| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
        bar.set_message(what.to_string());
    });
    bar.finish_and_clear();
    let r = r.map_err(|e| e.to_string())?;
    if let Some(dir) = &args.csv {
        write_into(dir, "runs.csv", r.to_csv().as_bytes())?;
    }
    write_figures(&r.figures(), args.csv.as_deref(), args.plots.as_deref())?;
    if args.json {
        print_json(&r);
    } else {
        println!(
            "TLP beyond the scheduling limits (papers/lin-thesis §3.7) on {}, {} inputs, {} programs",
            r.gpu,
            r.size,
            r.kernels.len()
        );
        println!("speedup over the baseline");
        let shown = &r.variants[1..];
        let mut head = format!("{:<14} {:<13}", "kernel", "class");
        for v in shown {
            head.push_str(&format!(" {:>9}", v.trim_start_matches("gpuduet-")));
        }
        println!("{head}");
        let row = |name: &str, class: &str, values: &[(String, f64)]| {
            let mut line = format!("{name:<14} {class:<13}");
            for v in shown {
                match values.iter().find(|(l, _)| l == v) {
                    Some((_, x)) => line.push_str(&format!(" {x:>9.3}")),
                    None => line.push_str(&format!(" {:>9}", "-")),
                }
            }
            println!("{line}");
        };
        for k in &r.kernels {
            row(&k.kernel, tlp::class_name(k.class), &k.speedup);
        }
        for cl in &r.classes {
            row("geomean", &cl.class, &cl.speedup);
        }
        println!(
            "
TLP: most TBs resident per SM over the baseline's"
        );
        println!("{head}");
        for k in &r.kernels {
            row(&k.kernel, tlp::class_name(k.class), &k.tlp);
        }
        for cl in &r.classes {
            row("geomean", &cl.class, &cl.tlp);
        }
        let mut l1: Vec<String> = r
            .runs
            .iter()
            .filter(|x| x.l1_store)
            .map(|x| format!("{} ({})", x.kernel, x.variant))
            .collect();
        l1.dedup();
        if !l1.is_empty() {
            println!(
                "
the bypassed L1 as a third context store (§3.6.4): {}",
                l1.join(", ")
            );
        }
        if let Some(s) = r.context_share {
            println!(
                "
GPUDuet's spilled register context (live and compressed at the switch points): {:.0}% of the registers allocated, mean over the kernels (thesis §3.6.6: 44%)",
                s * 100.0
            );
        }
        println!(
            "
thesis: {}",
            tlp::THESIS
        );
        if let Some(dir) = &args.csv {
            println!("CSV: {}/runs.csv and one per figure", dir.display());
        }
        if let Some(dir) = &args.plots {
            println!("plots: {}/figure-3-*.svg", dir.display());
        }
    }
    let ok = r.all_verified();
    if !ok {
        eprintln!("error: some runs did not verify against their CPU references");
    }
    Ok(ok)
}

/// Writes each figure as `ID.csv` into `csv` and as `ID.svg` into `plots`, when given.
fn write_figures(
    figs: &[figures::Figure],
    csv: Option<&Path>,
    plots: Option<&Path>,
) -> Result<(), String> {
    for (dir, ext) in [(csv, "csv"), (plots, "svg")] {
        let Some(dir) = dir else { continue };
        create_dir(dir)?;
        for f in figs {
            let text = if ext == "csv" {
                figures::to_csv(f)
            } else {
                svg::bar_chart(f)
            };
            write_atomic(&dir.join(format!("{}.{ext}", f.id)), text.as_bytes())?;
        }
    }
    Ok(())
}
