//! Running a PTX file from a launch spec: a scenario of one process
//! ([`workload::scenario::parse_spec`]) whose commands run one after another on the GPU
//! alone. Its buffers start in device memory holding their initial contents; copies,
//! sets, loops and dumps do what they do in a scenario; each launch runs to its end on the
//! functional core or the timed GPU before the next command; streams add no overlap (the
//! order written is one the streams allow). Host time is not modelled: the cycles are the
//! launches' own.

use std::time::{Duration, Instant};

use gpu::timing::TimedStats;
use gpu::{DevPtr, GpuError, LaunchStats};
use workload::program::{CheckOutcome, Commands, HostProgram, Reply, Request};
use workload::scenario::{Disk, Program, ScenarioError};

use crate::suite_run::Engine;

/// The outcome of a spec run.
#[derive(Clone, Debug)]
pub struct FileRun {
    /// The kernels launched (PTX names), in the order of their first launch.
    pub kernels: Vec<String>,
    /// Lowering's warnings and the spec's (`file:line:col: warning: what`).
    pub warnings: Vec<String>,
    pub launches: u64,
    /// Every launch's counts, added up.
    pub stats: LaunchStats,
    /// The timing model's statistics of each launch, when the launches were timed.
    pub timed: Vec<TimedStats>,
    /// Wall-clock time inside the launches.
    pub elapsed: Duration,
    pub checks: Vec<CheckOutcome>,
    /// The buffers its `dump` commands read (at 0 µs: host time is not modelled), for
    /// their `.npy` files.
    pub dumps: Vec<workload::Dumped>,
}

impl FileRun {
    /// Whether the spec had checks (`[[process.check]]`); without them nothing is verified.
    pub fn checked(&self) -> bool {
        !self.checks.is_empty()
    }

    /// Whether every check passed (false without checks).
    pub fn verified(&self) -> bool {
        self.checked() && self.checks.iter().all(|c| c.first.is_none())
    }

    /// The kernels, as a label: `saxpy`, or `a,b` for several.
    pub fn kernel_label(&self) -> String {
        self.kernels.join(",")
    }
}

#[derive(Debug, thiserror::Error)]
pub enum FileRunError {
    #[error("{0}")]
    Load(#[from] gpu::LoadError),
    #[error("{0}")]
    Spec(#[from] ScenarioError),
    /// A launch the GPU refuses: where the spec writes it, and why.
    #[error("{at}: the launch: {error}")]
    Launch { at: String, error: Box<GpuError> },
    /// A value that went wrong as the commands ran (an offset past a buffer's end, say).
    #[error("{0}")]
    Program(String),
    #[error("{0}")]
    Gpu(#[from] GpuError),
}

/// Loads PTX file `file` (text `ptx`), reads the launch spec `spec_file` (text `spec`:
/// files it names are relative to it), runs its commands on a fresh device of `engine`
/// and makes its checks.
pub fn run_file(
    file: &str,
    ptx: &str,
    spec_file: &str,
    spec: &str,
    engine: Engine<'_>,
    progress: &mut dyn FnMut(&str, gpu::timing::Progress),
) -> Result<FileRun, FileRunError> {
    let timed = engine.timed.is_some();
    let mut gpu = engine.device().map_err(GpuError::from)?;
    // The PTX first: its errors are rendered with their source line.
    let module = gpu.load_ptx(file, ptx)?;
    let scenario = workload::scenario::parse_spec(spec_file, spec, &Disk, (file, ptx))?;
    let Program::Commands(program) = &scenario.processes[0].program else {
        unreachable!("a launch spec's process runs commands");
    };
    let mut host = Commands::new(program.clone());
    let mut run = FileRun {
        kernels: Vec::new(),
        warnings: scenario.warnings.clone(),
        launches: 0,
        stats: LaunchStats::default(),
        timed: Vec::new(),
        elapsed: Duration::ZERO,
        checks: Vec::new(),
        dumps: Vec::new(),
    };
    let mut reply = Reply::Start;
    loop {
        let request = host.next(reply).map_err(FileRunError::Program)?;
        reply = Reply::Done;
        match request {
            Request::Alloc {
                bytes,
                init,
                managed,
            } => {
                if managed.is_some() {
                    return Err(FileRunError::Program(format!(
                        "{spec_file}: a managed buffer (`managed = true`) pages on demand under a scenario's host model: run it with `switchyard scenario`"
                    )));
                }
                let p = gpu.alloc(bytes);
                if let Some(data) = init {
                    gpu.copy_to_device(p, &data)?;
                }
                reply = Reply::Ptr(p.0);
            }
            Request::Texture(desc) => reply = Reply::Ptr(gpu.create_texture(desc)?),
            Request::Copy {
                to_device,
                dev,
                data,
                len,
                token,
                ..
            } => {
                if to_device {
                    gpu.copy_to_device(DevPtr(dev), &data)?;
                } else {
                    let data = gpu.copy_from_device(DevPtr(dev), len)?;
                    host.copied(token, &data);
                }
            }
            Request::Launch {
                kernel,
                grid,
                block,
                dynamic_smem,
                args,
                at,
                ..
            } => {
                let start = Instant::now();
                let mut report = |p| progress(&kernel, p);
                let r = if timed {
                    gpu.launch_timed(
                        module,
                        &kernel,
                        grid,
                        block,
                        dynamic_smem,
                        &args,
                        &mut report,
                    )
                    .map(|s| {
                        let counts = LaunchStats::from(&s);
                        run.timed.push(s);
                        counts
                    })
                } else {
                    gpu.launch_reporting(
                        module,
                        &kernel,
                        grid,
                        block,
                        dynamic_smem,
                        &args,
                        &mut report,
                    )
                };
                run.elapsed += start.elapsed();
                let stats = match r {
                    Ok(s) => s,
                    Err(error @ GpuError::BadLaunch { .. }) => {
                        return Err(FileRunError::Launch {
                            at,
                            error: Box::new(error),
                        })
                    }
                    Err(e) => return Err(e.into()),
                };
                run.stats.add(&stats);
                run.launches += 1;
                if !run.kernels.contains(&kernel) {
                    run.kernels.push(kernel);
                }
            }
            Request::Sync { .. } => {}
            Request::Dump { dev, len, file, .. } => {
                let bytes = gpu.copy_from_device(DevPtr(dev), len)?;
                let d = workload::Dumped {
                    process: scenario.processes[0].name.clone(),
                    file,
                    at_fs: 0,
                    bytes,
                };
                // A file dumped again (in a loop) keeps its latest contents.
                match run.dumps.iter_mut().find(|x| x.file.path == d.file.path) {
                    Some(x) => *x = d,
                    None => run.dumps.push(d),
                }
            }
            Request::Done => break,
        }
    }
    run.checks = host.check_all(gpu.memory());
    Ok(run)
}
