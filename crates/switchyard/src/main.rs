//! `switchyard`: the command-line front of the GPU multitasking lab.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use serde_json::json;

use suite::{Size, Target};
use switchyard::diag::render_load_error;
use switchyard::input::{read_text, Utf8};

#[derive(Parser)]
#[command(
    name = "switchyard",
    version,
    about = "A GPU multitasking lab: a SIMT GPU simulator that runs real PTX",
    long_about = "A GPU multitasking lab: a SIMT GPU simulator that runs real PTX.\n\n\
                  Without a command, runs the preemption study (`switchyard study`): a \
                  high-priority process preempts a long-running kernel under every \
                  mechanism, each result verified. `switchyard run` times and verifies the \
                  kernel suite."
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// List the kernels of the built-in suite.
    Kernels {
        /// Print a JSON array instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// The preemption study (the default command): a long-running low-priority kernel holds
    /// the GPU when a high-priority process arrives; under preemptive priority each
    /// mechanism takes the SMs away. Prints the high-priority kernel's wait, preemption
    /// latency, context bytes and the low-priority process's slowdown per mechanism, every
    /// run verified and compared byte for byte with a run where nothing is preempted.
    Study(StudyArgs),
    /// Run suite kernels (all of them by default) or a PTX file, and verify the results.
    Run(RunArgs),
    /// Compiler analyses for preemption: registers, occupancy, liveness, preemption points
    /// and context sizes, for a suite kernel or a PTX file.
    Analyze(AnalyzeArgs),
    /// Run a scenario: several processes (suite host programs or command lists) sharing one
    /// timed GPU under a scheduling policy; reports arrival, start and end of every process
    /// and kernel, and NTT, ANTT, STP and fairness against each process run alone.
    Scenario(ScenarioArgs),
    /// Run a sweep: suite kernels or scenarios over a grid or a list of points (GPU,
    /// scheduler, size, seed, policy, mechanism, any scenario field), side by side on every
    /// core, each point's result in a SQLite database. A sweep run again (after a kill, or
    /// with more points) runs only the points the database does not have.
    Sweep(cmd_sweep::SweepArgs),
    /// Print a results database's rows as CSV (every point by default, or `--sql`).
    Query(cmd_sweep::QueryArgs),
    /// The papers' experiments, with tables, JSON, CSV and SVG plots.
    #[command(subcommand)]
    Experiment(ExperimentCommand),
    /// Run suite kernels on a real GPU through a device server (tools/cuda_device.py), time
    /// every launch and verify every result; with --compare, set a timed run's cycles beside
    /// the real GPU's.
    Hardware(cmd_hardware::HardwareArgs),
    /// Parse and lower PTX files; list their kernels and every unsupported construct.
    Check {
        /// PTX files to check.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

#[derive(clap::Args)]
struct RunArgs {
    /// Suite kernel names or `.ptx` files (a `.ptx` file needs `--spec`). Default: the whole suite.
    items: Vec<String>,
    /// Which committed PTX to run for suite kernels.
    #[arg(long, value_enum, default_value_t = TargetArg::All)]
    target: TargetArg,
    /// Problem size for suite kernels.
    #[arg(long, value_enum, default_value_t = SizeArg::Small)]
    size: SizeArg,
    /// Seed of the input generators.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Launch spec (TOML) for a `.ptx` file: a scenario of one process (its buffers, textures,
    /// commands and checks; scenarios/README.md), whose commands run one after another on
    /// the GPU alone, on this PTX file (examples/saxpy/saxpy.toml).
    #[arg(long)]
    spec: Option<PathBuf>,
    /// GPU to time on: a preset (gtx480, gtx980, k20c, maxwell16, fault-study, v100, a100,
    /// h100) or a configuration file (`configs/*.toml` documents every field).
    #[arg(long, default_value = "gtx480")]
    gpu: String,
    /// Run on the functional core only (no timing; faster).
    #[arg(long)]
    functional: bool,
    /// Warp scheduler policy, overriding the GPU's.
    #[arg(long, value_enum)]
    scheduler: Option<SchedulerArg>,
    /// Extra TBs beyond the scheduling limits (papers/lin-thesis ch. 3), overriding the
    /// GPU's `[sm.tlp]`: `off`, `vt` (Virtual Thread), `gpuduet` or `gpuduet-tb`, with
    /// parameters `SCHEME:max_extra_tbs=N,port_bytes=B,dynamic=BOOL,compression=BOOL`
    /// (defaults 4, 128, false, true).
    #[arg(long, value_name = "SCHEME", value_parser = tlp_arg)]
    tlp: Option<gpu::tlp::TlpConfig>,
    /// Where timed runs write their statistics (JSON; rewritten after every kernel, so a later
    /// failure keeps the earlier results).
    #[arg(long, default_value = "switchyard-stats.json")]
    stats: PathBuf,
    /// Do not write the statistics file.
    #[arg(long)]
    no_stats: bool,
    /// Print every timed launch's full summary (stall reasons, hit rates, utilisations).
    #[arg(long)]
    detail: bool,
    /// Time the PTX as written instead of the register-allocated kernel (virtual registers,
    /// no spill code; occupancy still uses the allocator's register count).
    #[arg(long, conflicts_with = "functional")]
    unallocated: bool,
    /// How global memory accesses are checked: `strict` (every access inside an
    /// allocation; a fault names the nearest one) or `page` (as a GPU: any access inside a
    /// 2 MiB page that an allocation maps succeeds).
    #[arg(long, value_enum, default_value_t = MemoryCheckArg::Strict)]
    memory_check: MemoryCheckArg,
    /// Stop a timed launch this many core cycles after its start, as a runaway (default: when
    /// 2^23 cycles pass with its TBs resident and none finishing).
    #[arg(long, value_name = "CYCLES", conflicts_with = "functional")]
    max_cycles: Option<u64>,
    /// Stop a launch after this many warp instructions in all, as a runaway (default: when
    /// 2^27 pass without any of its TBs finishing).
    #[arg(long, value_name = "WARP_INSTRUCTIONS")]
    instruction_limit: Option<u64>,
    /// Threads a timed simulation steps its SMs on (default: this machine's cores). Every
    /// result is the same for any number.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1024))]
    threads: Option<u16>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Subcommand)]
enum ExperimentCommand {
    /// Periodic preemption (papers/lin-lightweight §V-A): every suite kernel runs under
    /// each mechanism while a preemption signal takes one SM every --interval cycles and
    /// gives it back; reports spill and preemption latency, context sizes and register
    /// patterns (the paper's Figures 6, 8, 14, 15, 16), and checks every run bit-exact
    /// against the uninterrupted one.
    PeriodicPreemption(PeriodicArgs),
    /// The benchmark table of papers/tanasic-thesis Table 5.2 for the suite: every suite
    /// kernel's host program alone; per kernel its launches, time, TBs, mean TB time,
    /// shared memory and registers per TB, TBs per SM, the share of an SM's on-chip storage
    /// they fill, the projected time to save it with the SM's share of DRAM bandwidth, and
    /// SHORT/MEDIUM/LONG classes by kernel and by program time (thirds of the suite).
    Benchmarks(BenchmarksArgs),
    /// Per-instruction preemption (papers/ji-ctxback §V, Figures 7–10): every suite kernel
    /// is preempted at --samples seeded moments of its run, each its own run, once per
    /// mechanism at the same moments (default: baseline, live, ckpt, cs-defer, ctxback,
    /// ctxback-cs-defer); reports each request's context size, preemption time and resume
    /// time (CKPT's with the discarded work) normalised per kernel to BASELINE, their
    /// arithmetic and geometric means over the kernels, and each mechanism's runtime
    /// overhead with nothing preempted (Figure 10). Every run must end bit-exact
    /// against the uninterrupted one; one that does not is an error.
    PerInstruction(PerInstructionArgs),
    /// PEP's evaluation (papers/li-pep §4, Figures 5-9): each suite kernel is preempted on
    /// every SM when another kernel arrives, --launch-us after the host called it, with the
    /// first wave of TBs --progress into their run at the call; Chimera and Chimera+dirty at
    /// each --deadlines-us, PEP and PEP+in-place predicting --predicted-launch-us. Reports
    /// preemption latency, PEP's choices, context per TB and saving overhead, every run
    /// verified and bit-exact against the uninterrupted one.
    Pep(PepArgs),
    /// The multiprogram evaluation of papers/tanasic-thesis §5.3: seeded random mixes of
    /// suite programs, each program replayed until every one has completed --replay runs,
    /// under FCFS, NPQ, PPQ (exclusive and shared) and DSS, with a context switch and with
    /// draining; NTT, ANTT, STP and fairness per class, and Figures 5.4-5.8.
    Multiprogram(MultiprogramArgs),
    /// Co-running kernels inside the SMs (papers/lin-thesis ch. 4, Figure 4.2): a pair of
    /// suite programs, replayed so they co-run throughout, at every TB combination on every
    /// SM and under every co-running scheme (spatial, left-over, smk); each program's IPC,
    /// its slowdown against the program alone, weighted and harmonic speedup, and the best
    /// combination (the oracle over those tried).
    Corun(CorunArgs),
    /// Preemptible faults (papers/tanasic-thesis §6.5) on the fault-study GPU: pipeline
    /// organisations with nothing faulting (Figure 6.11), the operand log's size (Figure
    /// 6.12), TB switching on fault with managed memory over NVLink and PCIe, normal and
    /// ideal (Figure 6.13), and faults handled on the GPU instead of the CPU: to the pages
    /// of a kernel's own heap (Figure 6.14, the suite's `heap`) and to output pages (Figure
    /// 6.15, the other kernels); each suite program's kernel time normalised to the figure's
    /// baseline, per kernel and as a geometric mean beside the thesis's, every run
    /// verified against its CPU reference.
    Faults(FaultsArgs),
    /// Thread-level parallelism beyond the scheduling limits (papers/lin-thesis §3.7) on
    /// maxwell16: every suite program alone under the baseline, Virtual Thread, GPUDuet_TB
    /// and GPUDuet with a static maximum of 1-4 extra TBs and with its throughput monitor
    /// at 256-, 128- and 64-byte ports; speedup and TLP per kernel and per utilisation
    /// class (Table 3.3), Figures 3.12-3.15, every run verified.
    Tlp(TlpArgs),
    /// Every preemption experiment at its defaults, one after the other, each using every
    /// core: periodic-preemption (papers/lin-lightweight §V), per-instruction
    /// (papers/ji-ctxback §V) and pep (papers/li-pep §4). Tables go to the terminal; each
    /// experiment's CSV files and plots go to OUT/<experiment>/.
    Preemption(AllPreemptionArgs),
}

#[derive(clap::Args)]
struct AllPreemptionArgs {
    /// Where each experiment's CSV files and plots go (OUT/periodic-preemption,
    /// OUT/per-instruction, OUT/pep).
    #[arg(long, default_value = "results")]
    out: PathBuf,
    /// Simulations at once in each experiment (default: every core).
    #[arg(long)]
    threads: Option<usize>,
}

/// An experiment's own arguments, parsed from words as its subcommand would be.
#[derive(Parser)]
struct ExperimentWords<T: clap::Args> {
    #[command(flatten)]
    args: T,
}

/// The three experiments' arguments: each at its defaults, with its CSV files and plots
/// under `a.out`.
fn preemption_args(
    a: &AllPreemptionArgs,
) -> Result<(PeriodicArgs, PerInstructionArgs, PepArgs), String> {
    let words = |name: &str| -> Vec<String> {
        let dir = a.out.join(name).display().to_string();
        let mut w = vec![
            name.to_string(),
            "--csv".into(),
            dir.clone(),
            "--plots".into(),
            dir,
        ];
        if let Some(t) = a.threads {
            w.extend(["--threads".into(), t.to_string()]);
        }
        w
    };
    let e = |e: clap::Error| e.to_string();
    Ok((
        ExperimentWords::<PeriodicArgs>::try_parse_from(words("periodic-preemption"))
            .map_err(e)?
            .args,
        ExperimentWords::<PerInstructionArgs>::try_parse_from(words("per-instruction"))
            .map_err(e)?
            .args,
        ExperimentWords::<PepArgs>::try_parse_from(words("pep"))
            .map_err(e)?
            .args,
    ))
}

/// `switchyard experiment preemption`: the three experiments in turn.
fn all_preemption(a: AllPreemptionArgs) -> Outcome {
    let (periodic, per_instruction, pep) = preemption_args(&a)?;
    println!("== periodic-preemption");
    let mut all = cmd_experiment::periodic(periodic)?;
    println!("\n== per-instruction");
    all &= cmd_experiment::per_instruction(per_instruction)?;
    println!("\n== pep");
    all &= cmd_experiment::pep(pep)?;
    println!(
        "\nCSV files and plots: {}/{{periodic-preemption,per-instruction,pep}}/",
        a.out.display()
    );
    Ok(all)
}

#[derive(clap::Args)]
struct PerInstructionArgs {
    /// Suite kernels to run. Default: the whole suite (those the GPU can run).
    kernels: Vec<String>,
    /// Problem size.
    #[arg(long, value_enum, default_value_t = SizeArg::Small)]
    size: SizeArg,
    /// Request moments per kernel (each one run per mechanism).
    #[arg(long, default_value_t = 8)]
    samples: u32,
    /// Seed of the input generators and of the moments drawn.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Mechanisms to compare, as for `study --mechanisms` (baseline is added first if not
    /// named: it is the normaliser).
    #[arg(long, value_name = "LIST", value_parser = mechanisms_arg)]
    mechanisms: Vec<Mechanisms>,
    /// GPU preset or configuration file.
    #[arg(long, default_value = "gtx480")]
    gpu: String,
    /// Runs at once (default: one per core; results do not depend on it).
    #[arg(long)]
    threads: Option<usize>,
    /// Core cycles one run may take.
    #[arg(long, default_value_t = 200_000_000)]
    max_cycles: u64,
    /// Stop a launch after this many warp instructions in all, as a runaway (default: when
    /// 2^27 pass without any of its TBs finishing).
    #[arg(long, value_name = "WARP_INSTRUCTIONS")]
    instruction_limit: Option<u64>,
    /// Print the results as JSON (every request of every run).
    #[arg(long)]
    json: bool,
    /// Write kernels.csv (per kernel and mechanism), requests.csv and one CSV per figure
    /// (fig7-fig9) into this directory.
    #[arg(long)]
    csv: Option<PathBuf>,
    /// Write Figures 7-9 (context size, preemption and resume time over BASELINE's, per
    /// kernel, with the geometric and arithmetic means) as SVG bar charts into this
    /// directory.
    #[arg(long)]
    plots: Option<PathBuf>,
}

#[derive(clap::Args)]
struct PepArgs {
    /// Suite kernels to run. Default: the whole suite (those the GPU can run).
    kernels: Vec<String>,
    /// Problem size.
    #[arg(long, value_enum, default_value_t = SizeArg::Small)]
    size: SizeArg,
    /// Actual launch times, µs: from the host's call to the kernel's arrival.
    #[arg(long, value_delimiter = ',', default_values_t = [5.0, 15.0, 25.0, 35.0])]
    launch_us: Vec<f64>,
    /// TB progress at the call, as fractions of the mean TB time.
    #[arg(long, value_delimiter = ',', default_values_t = [0.25, 0.5, 0.75])]
    progress: Vec<f64>,
    /// Chimera's and Chimera+dirty's deadlines, µs.
    #[arg(long, value_delimiter = ',', default_values_t = [5.0, 10.0, 15.0])]
    deadlines_us: Vec<f64>,
    /// The launch time PEP predicts, µs.
    #[arg(long, default_value_t = 20.0)]
    predicted_launch_us: f64,
    /// Seed of the input generators.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// GPU preset or configuration file (default: the paper's GTX980, its Table 2).
    #[arg(long, default_value = "gtx980")]
    gpu: String,
    /// Runs at once (default: one per core; results do not depend on it).
    #[arg(long)]
    threads: Option<usize>,
    /// Core cycles one run may take.
    #[arg(long, default_value_t = 200_000_000)]
    max_cycles: u64,
    /// Stop a launch after this many warp instructions in all, as a runaway (default: when
    /// 2^27 pass without any of its TBs finishing).
    #[arg(long, value_name = "WARP_INSTRUCTIONS")]
    instruction_limit: Option<u64>,
    /// Print the results as JSON (every point).
    #[arg(long)]
    json: bool,
    /// Write points.csv and one CSV per figure (fig5-fig9) into this directory.
    #[arg(long)]
    csv: Option<PathBuf>,
    /// Write Figures 5-9 as SVG bar charts into this directory.
    #[arg(long)]
    plots: Option<PathBuf>,
}

#[derive(clap::Args)]
struct MultiprogramArgs {
    /// The benchmark set: suite programs. Default: ten of them (experiment::multiprogram::
    /// DEFAULT_BENCHMARKS).
    benchmarks: Vec<String>,
    /// Problem size of every program.
    #[arg(long, value_enum, default_value_t = SizeArg::Small)]
    size: SizeArg,
    /// GPU preset or configuration file (default: the thesis's K20c-like GPU).
    #[arg(long, default_value = "k20c")]
    gpu: String,
    /// Processes per mix, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [2usize, 4, 6, 8])]
    procs: Vec<usize>,
    /// Mixes per process count. The default, 2 (each count with its own seeded
    /// high-priority order), keeps the thesis's set, counts, replay and policies and fits
    /// the whole experiment in 30 minutes on a 2-core machine (BENCHMARKS.md); 5 took 38
    /// CPU minutes, and 10 makes every benchmark the high-priority process once per count,
    /// at about twice that.
    #[arg(long, default_value_t = experiment::multiprogram::DEFAULT_MIXES)]
    mixes: usize,
    /// Seed of the mix generator.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Runs every process completes (papers/tanasic-thesis §5.3.1: 3).
    #[arg(long, default_value_t = 3)]
    replay: u32,
    /// How a mix's processes are drawn: `classes` (SHORT, MEDIUM and LONG in turn) or
    /// `random`.
    #[arg(long, value_enum, default_value_t = BalanceArg::Classes)]
    balance: BalanceArg,
    /// The copy engines' order in the prioritized runs (NPQ, PPQ): `priority` as the
    /// thesis's §5.3.2, or `fcfs` to leave kernel priority alone.
    #[arg(long, value_enum, default_value_t = CopyArg::Priority)]
    copy_engine: CopyArg,
    /// The context-switch mechanism (`cs` in the figures), `name[:key=value,...]`.
    #[arg(long, default_value = "baseline")]
    switch: String,
    /// The runs of every mix, comma-separated: `default` (the thesis's eight: fcfs, npq,
    /// ppq-exclusive/{cs,drain}, ppq-shared/{cs,drain}, dss/{cs,drain}), `nvidia`
    /// (time-slice/cs, mps, mig, stream-priority), `all`, or run names; fcfs, every
    /// figure's baseline, always runs.
    #[arg(long, default_value = "default")]
    runs: String,
    /// Skip the inference-tail table (latency-critical requests beside a batch kernel).
    #[arg(long, conflicts_with = "inference_only")]
    no_inference: bool,
    /// Only the inference-tail table: no mixes, no figures.
    #[arg(long)]
    inference_only: bool,
    /// The tensor-core GPU of the inference-tail table.
    #[arg(long, default_value = "v100")]
    inference_gpu: String,
    /// Cut the inference GPU to this many SMs, so that the batch holds every SM for much
    /// longer than a request (`0`: all of them).
    #[arg(long, default_value_t = experiment::inference::DEFAULT_SMS)]
    inference_sms: u32,
    /// The runs of the inference-tail table, comma-separated (default: all of them, in the
    /// table's order: fcfs, npq, ppq-exclusive/cs, ppq-exclusive/drain, ppq-shared/cs,
    /// ppq-shared/drain, dss/cs, dss/drain, time-slice/cs, mps, mps-50, mig,
    /// stream-priority, alone).
    #[arg(long, value_name = "RUNS")]
    inference_runs: Option<String>,
    /// Requests per latency-critical process in the inference-tail table (two processes;
    /// `--requests 500` gives 1,000 a run).
    #[arg(long, default_value_t = experiment::inference::DEFAULT_REQUESTS)]
    requests: u32,
    /// The mean gap of each latency-critical process's Poisson requests, µs.
    #[arg(long, default_value_t = experiment::inference::DEFAULT_MEAN_GAP_US)]
    mean_gap: f64,
    /// A quick look: 2 and 4 processes, 2 mixes each, 4 requests a latency-critical
    /// process.
    #[arg(long)]
    quick: bool,
    /// Runs at once (default: one per core; results do not depend on it).
    #[arg(long)]
    threads: Option<usize>,
    /// Core cycles one run may take.
    #[arg(long, default_value_t = 1 << 34)]
    max_cycles: u64,
    /// Stop a launch after this many warp instructions in all, as a runaway (default: when
    /// 2^27 pass without any of its TBs finishing).
    #[arg(long, value_name = "WARP_INSTRUCTIONS")]
    instruction_limit: Option<u64>,
    /// Print the results and figures as JSON.
    #[arg(long)]
    json: bool,
    /// Write benchmarks.csv, runs.csv and one CSV per figure into this directory.
    #[arg(long)]
    csv: Option<PathBuf>,
    /// Write one SVG bar chart per figure into this directory.
    #[arg(long)]
    plots: Option<PathBuf>,
}

#[derive(clap::Args)]
struct CorunArgs {
    /// The two suite programs (default: pathfinder, latency sensitive in
    /// papers/lin-thesis Table 4.2, and kmeans, NoC intensive).
    #[arg(num_args = 0..=2)]
    pair: Vec<String>,
    /// Every pair of the suite's programs that run on the GPU (or of `--programs`), each
    /// as one pair is run, with each scheme's speedups against the oracle's (the best TB
    /// combination of the pair) summed up; `--max-tbs` defaults to 4 here
    #[arg(long, conflicts_with = "pair")]
    all_pairs: bool,
    /// With `--all-pairs`: the programs to pair, separated by commas
    #[arg(long, requires = "all_pairs")]
    programs: Option<String>,
    /// A mix of two to four programs, separated by commas (`hotspot,kmeans,softmax`),
    /// co-running under each scheme (no combination grid): IPCs alone and together,
    /// slowdowns, weighted and harmonic speedup per scheme
    #[arg(long, conflicts_with_all = ["pair", "all_pairs"])]
    mix: Option<String>,
    /// Problem size of both programs.
    #[arg(long, value_enum, default_value_t = SizeArg::Small)]
    size: SizeArg,
    /// GPU preset or configuration file (default: papers/lin-thesis Table 4.1's).
    #[arg(long, default_value = "maxwell16")]
    gpu: String,
    /// The most TBs per SM tried for each program (default: its first kernel's occupancy
    /// alone).
    #[arg(long)]
    max_tbs: Option<u32>,
    /// CCBP's priority for latency-sensitive kernels (papers/lin-thesis §4.5.2's
    /// `prior_LSK`): their dominant share is divided by it, so above 1 they grow earlier
    /// (offline, and online where the `ccbp` scheme names none)
    #[arg(long, default_value_t = 1.0)]
    prior_lsk: f64,
    /// The schemes compared, `name[:key=value,...]` separated by commas (default: spatial,
    /// left-over, smk, warped-slicer, maestro, ccbp; SMK's quotas and Maestro's scores from
    /// the programs' IPCs alone unless `ipc` is given).
    #[arg(long)]
    schemes: Option<String>,
    /// Seed of both programs' inputs.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Runs at once (default: one per core; results do not depend on it).
    #[arg(long)]
    threads: Option<usize>,
    /// Core cycles one run may take.
    #[arg(long, default_value_t = 1 << 34)]
    max_cycles: u64,
    /// Stop a launch after this many warp instructions in all, as a runaway (default: when
    /// 2^27 pass without any of its TBs finishing).
    #[arg(long, value_name = "WARP_INSTRUCTIONS")]
    instruction_limit: Option<u64>,
    /// Print the results as JSON.
    #[arg(long)]
    json: bool,
    /// Write corun.csv into this directory.
    #[arg(long)]
    csv: Option<PathBuf>,
    /// Write corun.svg (weighted and harmonic speedup per combination and scheme) into this
    /// directory.
    #[arg(long)]
    plots: Option<PathBuf>,
}

#[derive(clap::Args)]
struct FaultsArgs {
    /// Suite kernels to run. Default: the whole suite (those the GPU can run).
    kernels: Vec<String>,
    /// The figures, comma-separated, by number or name: 6.11 (organisations), 6.12
    /// (operand-log), 6.13 (tb-switching), 6.14 (local-heap), 6.15 (local-outputs).
    /// Default: all.
    #[arg(long, value_delimiter = ',')]
    figures: Vec<String>,
    /// Problem size.
    #[arg(long, value_enum, default_value_t = SizeArg::Small)]
    size: SizeArg,
    /// Seed of the input generators.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// GPU preset or configuration file; it must translate addresses and page on demand
    /// (default: papers/tanasic-thesis Table 6.1's).
    #[arg(long, default_value = "fault-study")]
    gpu: String,
    /// Runs at once (default: one per core; results do not depend on it).
    #[arg(long)]
    threads: Option<usize>,
    /// Core cycles one run may take.
    #[arg(long, default_value_t = 1 << 34)]
    max_cycles: u64,
    /// Stop a launch after this many warp instructions in all, as a runaway (default: when
    /// 2^27 pass without any of its TBs finishing).
    #[arg(long, value_name = "WARP_INSTRUCTIONS")]
    instruction_limit: Option<u64>,
    /// Print the results as JSON (every run and ratio).
    #[arg(long)]
    json: bool,
    /// Write runs.csv (every run and ratio) and one CSV per figure into this directory.
    #[arg(long)]
    csv: Option<PathBuf>,
    /// Write one SVG bar chart per figure into this directory.
    #[arg(long)]
    plots: Option<PathBuf>,
}

#[derive(clap::Args)]
struct TlpArgs {
    /// Suite kernels to run. Default: the whole suite (those the GPU can run).
    kernels: Vec<String>,
    /// Problem size.
    #[arg(long, value_enum, default_value_t = SizeArg::Large)]
    size: SizeArg,
    /// Seed of the input generators.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// GPU preset or configuration file (its own `[sm.tlp]` is replaced by each variant's).
    #[arg(long, default_value = "maxwell16")]
    gpu: String,
    /// Runs at once (default: one per core; results do not depend on it).
    #[arg(long)]
    threads: Option<usize>,
    /// Core cycles one run may take.
    #[arg(long, default_value_t = 1 << 34)]
    max_cycles: u64,
    /// Stop a launch after this many warp instructions in all, as a runaway (default: when
    /// 2^27 pass without any of its TBs finishing).
    #[arg(long, value_name = "WARP_INSTRUCTIONS")]
    instruction_limit: Option<u64>,
    /// Print the results as JSON (every run, speedup and TLP ratio).
    #[arg(long)]
    json: bool,
    /// Write runs.csv (every run and ratio) and one CSV per figure into this directory.
    #[arg(long)]
    csv: Option<PathBuf>,
    /// Write one SVG bar chart per figure into this directory.
    #[arg(long)]
    plots: Option<PathBuf>,
}

#[derive(Clone, Copy, ValueEnum)]
enum BalanceArg {
    Classes,
    Random,
}

#[derive(Clone, Copy, ValueEnum)]
enum CopyArg {
    Priority,
    Fcfs,
}

#[derive(clap::Args)]
struct BenchmarksArgs {
    /// Suite kernels to run. Default: the whole suite (those the GPU can run).
    kernels: Vec<String>,
    /// Problem size.
    #[arg(long, value_enum, default_value_t = SizeArg::Large)]
    size: SizeArg,
    /// GPU preset or configuration file (default: the thesis's K20c-like GPU).
    #[arg(long, default_value = "k20c")]
    gpu: String,
    /// Print the table as JSON.
    #[arg(long)]
    json: bool,
    /// Write the table as CSV to this file.
    #[arg(long)]
    csv: Option<PathBuf>,
}

#[derive(clap::Args)]
struct StudyArgs {
    /// The long-running, low-priority suite kernel.
    #[arg(long, default_value = "dgemv")]
    low: String,
    /// Its problem size.
    #[arg(long, value_enum, default_value_t = SizeArg::Large)]
    low_size: SizeArg,
    /// The high-priority suite kernel that arrives (small inputs).
    #[arg(long, default_value = "gemm")]
    high: String,
    /// When the high-priority process arrives, as a fraction of the way through the
    /// low-priority kernel's run (measured running it alone).
    #[arg(long, default_value_t = 0.3)]
    arrival: f64,
    /// When the high-priority process arrives, µs (instead of --arrival).
    #[arg(long, conflicts_with = "arrival")]
    arrival_us: Option<f64>,
    /// Mechanisms to compare, comma-separated, each `name[:key=value,...]` (a `key=value`
    /// after a comma continues the mechanism before it), or the flag repeated; default:
    /// drain, flush-strict, flush-relaxed, baseline, live, cs-defer, ctxback,
    /// ctxback-cs-defer, lightweight, lightweight-tb, chimera, chimera-dirty, pep, pep-in-place, ckpt.
    /// E.g. `chimera:deadline_us=5,chimera:deadline_us=10,drain`.
    #[arg(long, value_name = "LIST", value_parser = mechanisms_arg)]
    mechanisms: Vec<Mechanisms>,
    /// GPU preset or configuration file.
    #[arg(long, default_value = "gtx480")]
    gpu: String,
    /// Runs at once (default: one per core; results do not depend on it).
    #[arg(long)]
    threads: Option<usize>,
    /// Core cycles one run may take.
    #[arg(long, default_value_t = 1 << 32)]
    max_cycles: u64,
    /// Stop a launch after this many warp instructions in all, as a runaway (default: when
    /// 2^27 pass without any of its TBs finishing).
    #[arg(long, value_name = "WARP_INSTRUCTIONS")]
    instruction_limit: Option<u64>,
    /// Print the results as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
struct PeriodicArgs {
    /// Suite kernels to run. Default: the whole suite.
    kernels: Vec<String>,
    /// Problem size.
    #[arg(long, value_enum, default_value_t = SizeArg::Large)]
    size: SizeArg,
    /// Core cycles between two preemption signals.
    #[arg(long, default_value_t = 10_000)]
    interval: u64,
    /// Signals each kernel gets at least: a kernel too short for that many at --interval
    /// gets them closer together (its uninterrupted busy cycles over N + 1 apart; the paper
    /// kept kernels with at least 15). 0: every kernel at --interval.
    #[arg(long, default_value_t = 0, value_name = "N")]
    min_signals: u32,
    /// Mechanisms to compare, as for `study --mechanisms` (default: drain, baseline, live,
    /// points-live, lightweight, lightweight-tb, chimera).
    #[arg(long, value_name = "LIST", value_parser = mechanisms_arg)]
    mechanisms: Vec<Mechanisms>,
    /// GPU preset or configuration file.
    #[arg(long, default_value = "gtx480")]
    gpu: String,
    /// Seed of the input generators.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Runs at once (default: one per core; results do not depend on it).
    #[arg(long)]
    threads: Option<usize>,
    /// Core cycles one run may take.
    #[arg(long, default_value_t = 200_000_000)]
    max_cycles: u64,
    /// Stop a launch after this many warp instructions in all, as a runaway (default: when
    /// 2^27 pass without any of its TBs finishing).
    #[arg(long, value_name = "WARP_INSTRUCTIONS")]
    instruction_limit: Option<u64>,
    /// Print the results as JSON (every signal of every run).
    #[arg(long)]
    json: bool,
    /// Write runs.csv, signals.csv and one CSV per figure into this directory.
    #[arg(long)]
    csv: Option<PathBuf>,
    /// Write one SVG bar chart per figure into this directory.
    #[arg(long)]
    plots: Option<PathBuf>,
    /// Skip Figure 17's kernel pairs (in-place switching; 8 pairs × 4 runs).
    #[arg(long)]
    no_pairs: bool,
}

#[derive(clap::Args)]
struct ScenarioArgs {
    /// The scenario file (TOML; see `scenarios/` and the documentation of
    /// `workload::scenario`).
    file: PathBuf,
    /// GPU to run on, overriding the scenario's: a preset (gtx480, gtx980, k20c, maxwell16,
    /// fault-study, v100, a100, h100) or a configuration file.
    #[arg(long)]
    gpu: Option<String>,
    /// Warp scheduler policy, overriding the GPU's (as `run --scheduler`).
    #[arg(long, value_enum)]
    scheduler: Option<SchedulerArg>,
    /// Scheduling policy, overriding the scenario's: fcfs, npq, ppq (preemptive priority),
    /// time-slice (contexts take turns), dss (dynamic spatial sharing), mps (NVIDIA's
    /// Multi-Process Service: every process limited to a share of the SMs), mig (NVIDIA's
    /// Multi-Instance GPU: each process on a fixed set of SMs; memory still shared), and the
    /// co-running schemes spatial (even SM split), left-over (the second kernel takes what
    /// the first leaves on each SM), smk (DRF TB partition and warp-instruction quotas),
    /// warped-slicer (each kernel's TB scalability profiled on the SMs, then
    /// water-filling), maestro (a search over TB combinations, one per epoch), ccbp (the
    /// same profile measuring bandwidth, then CCBP's TB combination and request quotas)
    /// and fixed (a given TB combination), written `name[:key=value,...]`,
    /// e.g. `time-slice:slice_us=100`, `ppq:access=exclusive`, `dss:tokens=4`,
    /// `mps:percentage=50`, `mig:instances=3`, `smk:epoch=500,ipc=1.5/0.5` (standalone IPCs
    /// by process, joined by `/`), `warped-slicer:warm_up=2000,sample=5000` (core cycles),
    /// `maestro:epoch=10000,ipc=1.5/0.5`, `ccbp:warm_up=2000,sample=5000,prior_lsk=2` or
    /// `fixed:tbs=8/4,noc=20/10`.
    #[arg(long, value_name = "POLICY", value_parser = policy_arg)]
    policy: Option<sched::PolicyKind>,
    /// Let TBs of different kernels share an SM (overrides the scenario's setting).
    #[arg(long, value_enum)]
    sharing: Option<Switch>,
    /// How a preempted SM is emptied, overriding the scenario's: drain, flush-strict,
    /// flush-relaxed, baseline, live, points-live, lightweight, lightweight-tb,
    /// lightweight-in-place, chimera, chimera-dirty, cs-defer, ctxback, ctxback-cs-defer,
    /// pep, pep-in-place, written `name[:key=value,...]`, e.g. `chimera:deadline_us=10`,
    /// `pep:predicted_launch_us=25` or `lightweight:compressor_latency=4`.
    #[arg(long, value_name = "MECHANISM", value_parser = mechanism_arg)]
    mechanism: Option<preempt::MechanismKind>,
    /// The time slice of the time-slice policy, µs, overriding the scenario's
    /// (`--policy time-slice:slice_us=US` overrides this).
    #[arg(long)]
    time_slice_us: Option<f64>,
    /// Do not run each process alone (no NTT, ANTT, STP or fairness; faster).
    #[arg(long)]
    no_alone: bool,
    /// Stop with an error after this many core cycles (default: the scenario's, else 2^32).
    #[arg(long)]
    max_cycles: Option<u64>,
    /// Stop a launch after this many warp instructions in all, as a runaway (default: when
    /// 2^27 pass without any of its TBs finishing).
    #[arg(long, value_name = "WARP_INSTRUCTIONS")]
    instruction_limit: Option<u64>,
    /// Threads a timed simulation steps its SMs on (default: this machine's cores). Every
    /// result is the same for any number.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1024))]
    threads: Option<u16>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// Write processes.csv, kernels.csv and copies.csv into this directory.
    #[arg(long)]
    csv: Option<PathBuf>,
    /// Write the timeline as a Chrome trace-event file (opens in Perfetto and
    /// chrome://tracing): one track per SM, per copy engine and per process stream.
    #[arg(long)]
    trace: Option<PathBuf>,
    /// Write the statistics of every launch (the counters `run --stats` writes: cycles,
    /// instructions, stalls, caches, DRAM, per SM) with the GPU configuration as JSON.
    #[arg(long, value_name = "FILE")]
    stats: Option<PathBuf>,
    /// Write the `.npy` files of the scenario's `dump` commands whose `file` is relative
    /// under this directory (created if needed) instead of the scenario file's directory.
    #[arg(long, value_name = "DIR")]
    dump_dir: Option<PathBuf>,
}

/// A preemption mechanism, `name[:key=value,...]` (`workload::choice`).
fn mechanism_arg(spec: &str) -> Result<preempt::MechanismKind, String> {
    workload::choice::parse(spec).map_err(|e| e.to_string())
}

/// A scheduling policy, `name[:key=value,...]` (`workload::choice`).
/// `SCHEME[:key=value,...]` of `--tlp`: the fields of a GPU's `[sm.tlp]`.
pub(crate) fn tlp_arg(spec: &str) -> Result<gpu::tlp::TlpConfig, String> {
    let (scheme, params) = spec.split_once(':').unwrap_or((spec, ""));
    let mut text = format!("scheme = \"{}\"\n", scheme.trim());
    for item in params.split(',').filter(|i| !i.trim().is_empty()) {
        let Some((key, value)) = item.split_once('=') else {
            return Err(format!("`{item}`: parameters are written key=value"));
        };
        let value = value.trim();
        // Numbers and booleans as they are; anything else as a string, so that the error
        // names the field and the type it wants.
        if value.parse::<f64>().is_ok() || value == "true" || value == "false" {
            text.push_str(&format!("{} = {value}\n", key.trim()));
        } else {
            text.push_str(&format!("{} = {value:?}\n", key.trim()));
        }
    }
    let t: gpu::tlp::TlpConfig = toml::from_str(&text).map_err(|e| e.message().to_string())?;
    t.check()
        .map_err(|(field, what)| format!("`{field}`: {what}"))?;
    Ok(t)
}

fn policy_arg(spec: &str) -> Result<sched::PolicyKind, String> {
    workload::choice::parse(spec).map_err(|e| e.to_string())
}

/// The mechanisms of one `--mechanisms` flag.
#[derive(Clone, Debug)]
struct Mechanisms(Vec<preempt::MechanismKind>);

/// A list of mechanisms (`workload::choice::parse_list`).
fn mechanisms_arg(list: &str) -> Result<Mechanisms, String> {
    workload::choice::parse_list(list)
        .map(Mechanisms)
        .map_err(|e| e.to_string())
}

/// The mechanisms of every `--mechanisms` flag, in order.
fn all_mechanisms(flags: &[Mechanisms]) -> Vec<preempt::MechanismKind> {
    flags.iter().flat_map(|m| m.0.iter().copied()).collect()
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum MemoryCheckArg {
    Strict,
    Page,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Switch {
    On,
    Off,
}

#[derive(Clone, Copy, ValueEnum)]
enum SchedulerArg {
    Lrr,
    Gto,
    TwoLevel,
}

#[derive(clap::Args)]
struct AnalyzeArgs {
    /// Suite kernel names or `.ptx` files. Default: the whole suite.
    items: Vec<String>,
    /// Which committed PTX to analyse for suite kernels (default: each kernel's own oldest
    /// target, as `run` picks for one run: sm_70, or sm_80 for the tensor-core kernels).
    #[arg(long, value_enum)]
    target: Option<TargetArg>,
    /// GPU preset for the occupancy figure.
    #[arg(long, default_value = "gtx480")]
    gpu: String,
    /// Threads per TB for occupancy (default: the kernel's .reqntid/.maxntid, else 256).
    #[arg(long)]
    block: Option<u32>,
    /// Register limit of the allocator (spills beyond it).
    #[arg(long, default_value_t = 255)]
    max_registers: u32,
    /// NVIDIA's register count from `ptxas -v`, shown beside ours.
    #[arg(long)]
    ptxas: Option<u32>,
    /// Instructions between preemption points outside loops (K of lin-lightweight §IV-A).
    #[arg(long, default_value_t = 1000)]
    interval: usize,
    /// Uniform (scalar) registers per warp the allocator may use for warp-uniform values
    /// (NVIDIA Turing and later: 63; 0: none).
    #[arg(long, default_value_t = 0)]
    uniform_registers: u32,
    /// Also compute CTXBack with on-chip scalar register backup (ji-ctxback §III-D); free
    /// uniform registers up to --uniform-registers hold backups.
    #[arg(long)]
    osrb: bool,
    /// With --osrb: 32-bit words of shared memory per warp for backups that find no free
    /// register (the last resort of ji-ctxback §III-D).
    #[arg(long, default_value_t = 8, requires = "osrb")]
    osrb_shared_words: u32,
    /// Print, for every instruction, what each technique does on a signal before it:
    /// CTXBack's flashback point, saved registers, reverts, re-executions and costs, and
    /// CS-Defer's targets.
    #[arg(long)]
    per_instruction: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, Default, ValueEnum)]
enum TargetArg {
    #[value(name = "sm_70")]
    Sm70,
    #[value(name = "sm_80")]
    Sm80,
    #[value(name = "sm_90")]
    Sm90,
    /// Every target each kernel is compiled for.
    #[default]
    All,
}

impl TargetArg {
    fn only(self) -> Option<Target> {
        match self {
            TargetArg::Sm70 => Some(Target::Sm70),
            TargetArg::Sm80 => Some(Target::Sm80),
            TargetArg::Sm90 => Some(Target::Sm90),
            TargetArg::All => None,
        }
    }

    /// The suite kernels to run when none is named: those compiled for the target asked for.
    fn default_kernels(self) -> Vec<String> {
        suite::all()
            .iter()
            .filter(|k| self.only().is_none_or(|t| k.ptx(t).is_some()))
            .map(|k| k.name().to_string())
            .collect()
    }

    /// The targets of `k` to run: all of its own, or the one asked for (an error naming the
    /// kernel's targets where it is not compiled for that one).
    fn of(self, k: &dyn suite::Kernel) -> Result<Vec<Target>, String> {
        let own: Vec<Target> = k.sources().iter().map(|&(t, _)| t).collect();
        match self.only() {
            None => Ok(own),
            Some(t) if own.contains(&t) => Ok(vec![t]),
            Some(t) => Err(format!(
                "suite kernel `{}` has no {} PTX (it is compiled for {})",
                k.name(),
                t.name(),
                own.iter().map(|t| t.name()).collect::<Vec<_>>().join(", ")
            )),
        }
    }
}

/// A suite problem size (`suite::Size`).
#[derive(Clone, Copy, Default, ValueEnum)]
enum SizeArg {
    /// For tests: well under a second per kernel in a debug build.
    #[default]
    Small,
    /// For benchmarks, sized for the 15-SM GTX480.
    Large,
    /// For the big presets: at least two full waves of TBs on the h100.
    Huge,
}

impl SizeArg {
    fn size(self) -> Size {
        match self {
            SizeArg::Small => Size::Small,
            SizeArg::Large => Size::Large,
            SizeArg::Huge => Size::Huge,
        }
    }
}

mod cmd_experiment;
mod cmd_hardware;
mod cmd_run;
mod cmd_scenario;
mod cmd_sweep;
use cmd_run::run;

fn main() -> ExitCode {
    let cli = Cli::parse();
    switchyard::output::exit_cleanly_on_signals();
    let result = match cli.command {
        None => cmd_experiment::study(default_study_args()),
        Some(Command::Study(args)) => cmd_experiment::study(args),
        Some(Command::Kernels { json }) => kernels(json),
        Some(Command::Run(args)) => run(args),
        Some(Command::Scenario(args)) => cmd_scenario::scenario(args),
        Some(Command::Experiment(ExperimentCommand::PeriodicPreemption(args))) => {
            cmd_experiment::periodic(args)
        }
        Some(Command::Experiment(ExperimentCommand::Benchmarks(args))) => {
            cmd_experiment::benchmarks(args)
        }
        Some(Command::Experiment(ExperimentCommand::PerInstruction(args))) => {
            cmd_experiment::per_instruction(args)
        }
        Some(Command::Experiment(ExperimentCommand::Pep(args))) => cmd_experiment::pep(args),
        Some(Command::Experiment(ExperimentCommand::Preemption(args))) => all_preemption(args),
        Some(Command::Experiment(ExperimentCommand::Corun(args))) => cmd_experiment::corun(args),
        Some(Command::Experiment(ExperimentCommand::Faults(args))) => cmd_experiment::faults(args),
        Some(Command::Experiment(ExperimentCommand::Tlp(args))) => cmd_experiment::tlp(args),
        Some(Command::Experiment(ExperimentCommand::Multiprogram(args))) => {
            cmd_experiment::multiprogram(args)
        }
        Some(Command::Sweep(args)) => cmd_sweep::sweep(args),
        Some(Command::Query(args)) => cmd_sweep::query(args),
        Some(Command::Hardware(args)) => cmd_hardware::hardware(args),
        Some(Command::Check { files, json }) => check(&files, json),
        Some(Command::Analyze(args)) => analyze(args),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(msg) => {
            // Rendered diagnostics carry their own `error:` heading.
            if msg.starts_with("error") {
                eprint!("{msg}");
            } else {
                eprintln!("error: {msg}");
            }
            ExitCode::FAILURE
        }
    }
}

/// `switchyard study` with every option at its default (what `switchyard` alone runs).
fn default_study_args() -> StudyArgs {
    match Cli::parse_from(["switchyard", "study"]).command {
        Some(Command::Study(a)) => a,
        _ => unreachable!("`switchyard study` parses as the study command"),
    }
}

/// A command's outcome: `Ok(true)` success, `Ok(false)` a reported failure, `Err` a message.
type Outcome = Result<bool, String>;

fn kernels(json: bool) -> Outcome {
    let ks = suite::all();
    if json {
        let v: Vec<_> = ks
            .iter()
            .map(|k| {
                json!({
                    "name": k.name(),
                    "description": k.description(),
                    "traits": k.traits(),
                    "stress": format!("{:?}", k.stress()),
                })
            })
            .collect();
        switchyard::output::print_json(&v);
    } else {
        println!("{:<14} {:<14} description", "kernel", "stresses");
        for k in ks {
            println!(
                "{:<14} {:<14} {}",
                k.name(),
                format!("{:?}", k.stress()),
                k.description()
            );
        }
    }
    Ok(true)
}

fn check(files: &[PathBuf], json: bool) -> Outcome {
    let mut all_ok = true;
    let mut reports = Vec::new();
    for path in files {
        let name = path.display().to_string();
        let text = read_text(path, Utf8::Lenient)?;
        let mut gpu = gpu::Gpu::new();
        match gpu.load_ptx(&name, &text) {
            Ok(id) => {
                let m = gpu.module(id);
                let kernels: Vec<_> = m.kernels.values().map(kernel_summary).collect();
                let warnings = gpu::render_warnings(m, &name, &text);
                if !json {
                    for w in &warnings {
                        eprintln!("{w}");
                    }
                    println!("{name}: ok, {} kernel(s)", kernels.len());
                    for k in &kernels {
                        println!(
                            "  {}: {} instructions, {} registers ({} pred, {} b16, {} b32, {} b64), {} B static shared{}, {} B local; params: {}",
                            k["name"].as_str().unwrap_or_default(),
                            k["instructions"],
                            k["registers"]["total"],
                            k["registers"]["pred"],
                            k["registers"]["b16"],
                            k["registers"]["b32"],
                            k["registers"]["b64"],
                            k["static_smem"],
                            if k["dynamic_smem"].as_bool() == Some(true) { " + dynamic" } else { "" },
                            k["local_bytes"],
                            k["params"]
                                .as_array()
                                .map(|ps| ps
                                    .iter()
                                    .map(|p| format!("{}: {}", p["name"].as_str().unwrap_or(""), p["type"].as_str().unwrap_or("")))
                                    .collect::<Vec<_>>()
                                    .join(", "))
                                .unwrap_or_default()
                        );
                    }
                }
                reports.push(json!({"file": name, "ok": true, "kernels": kernels, "errors": [], "warnings": warnings}));
            }
            Err(e) => {
                all_ok = false;
                if !json {
                    eprint!("{}", render_load_error(&e));
                    eprintln!("{name}: {} problem(s)", e.diagnostics.len());
                }
                let errors: Vec<_> = e
                    .diagnostics
                    .iter()
                    .map(|d| json!({"location": d.location, "message": d.message}))
                    .collect();
                reports.push(json!({"file": name, "ok": false, "kernels": [], "errors": errors}));
            }
        }
    }
    if json {
        switchyard::output::print_json(&reports);
    }
    Ok(all_ok)
}

fn kernel_summary(k: &kir::Kernel) -> serde_json::Value {
    let mut by_width = [0u32; 4];
    for r in k.regs.values() {
        let i = match r.ty.bits() {
            1 => 0,
            8 | 16 => 1,
            32 => 2,
            _ => 3,
        };
        by_width[i] += 1;
    }
    json!({
        "name": k.name,
        "params": k.params.iter().map(|p| json!({"name": p.name, "type": format!("{:?}", p.ty).to_lowercase(), "size": p.size})).collect::<Vec<_>>(),
        "registers": {"total": k.regs.len(), "pred": by_width[0], "b16": by_width[1], "b32": by_width[2], "b64": by_width[3]},
        "instructions": k.insts.len(),
        "basic_blocks": k.cfg.blocks.len(),
        "static_smem": k.static_smem,
        "dynamic_smem": k.uses_dynamic_smem,
        "local_bytes": k.local_size,
    })
}

fn analyze(args: AnalyzeArgs) -> Outcome {
    use switchyard::analyze::{analyze_module, AnalyzeOptions};
    let gpu = gpu::config::GpuConfig::preset(&args.gpu).map_err(|e| e.to_string())?;
    let opts = AnalyzeOptions {
        gpu,
        block: args.block,
        alloc: regalloc::AllocConfig {
            max_registers: args.max_registers,
            uniform_registers: args.uniform_registers,
            ..regalloc::AllocConfig::default()
        },
        ctxback: analysis::ctxback::CtxBackConfig {
            osrb: args.osrb.then_some(analysis::ctxback::OsrbConfig {
                uniform_registers: args.uniform_registers,
                shared_words: args.osrb_shared_words,
                registers: true,
            }),
            ..analysis::ctxback::CtxBackConfig::default()
        },
        per_instruction: args.per_instruction,
        points: analysis::PpConfig {
            straight_line_interval: args.interval,
        },
        ptxas_registers: args.ptxas,
    };
    let items: Vec<String> = match (&args.items[..], args.target) {
        ([], Some(t)) => t.default_kernels(),
        ([], None) => suite::all().iter().map(|k| k.name().to_string()).collect(),
        (items, _) => items.to_vec(),
    };
    // (file name, PTX text) of everything to analyse: each suite kernel once per target.
    let mut sources = Vec::new();
    for item in &items {
        if item.ends_with(".ptx") {
            let text = read_text(std::path::Path::new(item), Utf8::Lenient)?;
            sources.push((item.clone(), text));
        } else {
            let k = suite::by_name(item)
                .ok_or_else(|| format!("no suite kernel `{item}` (and it is not a .ptx file)"))?;
            let targets = match args.target {
                Some(t) => t.of(k)?,
                None => vec![k.default_target()],
            };
            for target in targets {
                sources.push((
                    format!("kernels/{0}/{0}.{1}.ptx", k.name(), target.name()),
                    k.ptx(target).unwrap_or_default().to_string(),
                ));
            }
        }
    }
    let mut all = Vec::new();
    for (name, text) in sources {
        let source = ptx::SourceFile::new(name.as_str(), text.as_str());
        let ast = ptx::parse(&text).map_err(|e| format!("{}: {e}", source.location(e.span())))?;
        let module = kir::lower::lower_module(&ast, &name).map_err(|errs| {
            errs.iter()
                .map(|e| format!("{}: {e}", source.location(e.span())))
                .collect::<Vec<_>>()
                .join("\n")
        })?;
        let reports =
            analyze_module(&module, &source, &opts).map_err(|e| format!("{name}: {e}"))?;
        for r in reports {
            all.push(json!({"file": name, "kernel": r}));
            if !args.json {
                println!(
                    "{name}: kernel {} ({} instructions)",
                    r.name, r.instructions
                );
                let g = &r.registers;
                println!(
                    "  registers: {} allocated{} ({} virtual, {} predicates, {} spilled)",
                    g.allocated,
                    g.ptxas.map(|p| format!(", ptxas {p}")).unwrap_or_default(),
                    g.virtual_registers,
                    g.predicates,
                    g.spilled_values
                );
                let o = &r.occupancy;
                println!(
                    "  occupancy on {} with {} threads/TB: {} TBs/SM ({} warps), limited by {:?}",
                    o.gpu, o.threads_per_tb, o.tbs_per_sm, o.warps_per_sm, o.limited_by
                );
                let l = &r.live_registers;
                println!(
                    "  live 32-bit registers per thread: avg {:.1}, min {}, max {}",
                    l.average, l.min, l.max
                );
                let c = &r.context;
                println!(
                    "  register context per warp: BASELINE {} B, LIVE {:.0} B ({:.1}% less), LIVE divergent {:.0} B",
                    c.baseline_bytes_per_warp, c.live_bytes_per_warp, c.live_reduction_percent, c.live_divergent_bytes_per_warp
                );
                let w = &c.words_per_thread;
                let pct = |x: f64| {
                    if w.baseline > 0.0 {
                        100.0 * (1.0 - x / w.baseline)
                    } else {
                        0.0
                    }
                };
                println!(
                    "  register words per thread at a preemption (avg over instructions): BASELINE {:.1}, LIVE {:.1} (-{:.1}%), CS-Defer {:.1} (-{:.1}%), CTXBack {:.1} (-{:.1}%), CTXBack+CS-Defer {:.1} (-{:.1}%)",
                    w.baseline, w.live, pct(w.live), w.cs_defer, pct(w.cs_defer), w.ctxback, pct(w.ctxback), w.ctxback_cs_defer, pct(w.ctxback_cs_defer)
                );
                if let (Some(o), Some(x)) = (&r.osrb, w.ctxback_osrb) {
                    println!(
                        "  on-chip scalar register backup: CTXBack {:.1} (-{:.1}%); {} backups of {} sites ({} dead uniform, {} unused uniform, {} dead vector registers, {} shared words of {} B per warp; {} without a place)",
                        x, pct(x), o.backups, o.sites, o.dead_uniform, o.unused_uniform, o.dead_vector, o.shared, o.warp_smem, o.unplaced
                    );
                }
                for p in &r.preemption_points {
                    println!(
                        "  {:<6} at pc{} ({}): {} live registers, {} divergent",
                        p.kind, p.pc, p.location, p.live_registers, p.divergent_live_registers
                    );
                }
                if let Some(rows) = &r.per_instruction {
                    println!(
                        "  per instruction (words: LIVE, CTXBack, CS-Defer; pick; CTXBack plan):"
                    );
                    for row in rows {
                        println!(
                            "  {:>7} {:>3} {:>3} {:>3} {:<8} {}{}  | {}",
                            format!("pc{}", row.pc),
                            row.live_words,
                            row.ctxback.words,
                            row.cs_defer.words,
                            row.combined,
                            if row.backup_copy { "[OSRB copy] " } else { "" },
                            row.source,
                            row.ctxback.plan
                        );
                    }
                }
            }
        }
    }
    if args.json {
        switchyard::output::print_json(&all);
    }
    Ok(true)
}

/// The SM threads of one timed simulation: `--threads`, else this machine's cores.
fn sm_threads(arg: Option<u16>) -> usize {
    arg.map_or_else(
        || std::thread::available_parallelism().map_or(1, |n| n.get()),
        usize::from,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `experiment preemption` hands each experiment its own CSV and plot directory under
    /// --out, and --threads, and leaves everything else at the experiment's default.
    #[test]
    fn the_preemption_command_builds_each_experiments_arguments() {
        let a = AllPreemptionArgs {
            out: PathBuf::from("r"),
            threads: Some(3),
        };
        let (periodic, per_instruction, pep) = preemption_args(&a).unwrap();
        assert_eq!(periodic.csv, Some(PathBuf::from("r/periodic-preemption")));
        assert_eq!(periodic.plots, Some(PathBuf::from("r/periodic-preemption")));
        assert_eq!(periodic.threads, Some(3));
        assert_eq!(periodic.interval, 10_000);
        assert_eq!(
            per_instruction.csv,
            Some(PathBuf::from("r/per-instruction"))
        );
        assert_eq!(per_instruction.samples, 8);
        assert_eq!(pep.plots, Some(PathBuf::from("r/pep")));
        assert_eq!(pep.gpu, "gtx980");
        let none = AllPreemptionArgs {
            out: PathBuf::from("r"),
            threads: None,
        };
        assert_eq!(preemption_args(&none).unwrap().2.threads, None);
    }
}
