//! Running suite kernels on the functional core or the timed GPU.

use std::time::{Duration, Instant};

use gpu::memory::MemoryCheck;
use gpu::timing::{Progress, TimedGpu, TimedStats};
use gpu::{DevPtr as GpuPtr, Gpu, KernelArg, LaunchStats, ModuleId};
use suite::{Arg, DevPtr, Device, DeviceError, Kernel, Launch, Size, Target, Verification};

/// What a run executes on: the functional core or a timed GPU, and how device memory is
/// checked.
#[derive(Clone, Copy, Debug)]
pub struct Engine<'a> {
    /// The timed GPU, with its options (and so its limits); `None`: the functional core.
    pub timed: Option<&'a TimedGpu>,
    /// Functional core: warp instructions a launch may execute in all (`None`: the progress
    /// rule of [`gpu::limits`]).
    pub instruction_limit: Option<u64>,
    pub memory_check: MemoryCheck,
}

impl<'a> Engine<'a> {
    /// The functional core with the default limit and strict memory checks.
    pub const FUNCTIONAL: Engine<'static> = Engine {
        timed: None,
        instruction_limit: None,
        memory_check: MemoryCheck::Strict,
    };

    /// The timed GPU `t`, with strict memory checks.
    pub fn on(t: &'a TimedGpu) -> Engine<'a> {
        Engine {
            timed: Some(t),
            ..Engine::FUNCTIONAL
        }
    }

    /// A fresh device running on this engine.
    pub fn device(&self) -> Result<Gpu, gpu::timing::TimingError> {
        let mut gpu = match self.timed {
            None => {
                let mut gpu = Gpu::new();
                gpu.limits.instruction_limit = self.instruction_limit;
                gpu
            }
            Some(t) => Gpu::timed(t.clone())?,
        };
        gpu.set_memory_check(self.memory_check);
        Ok(gpu)
    }
}

/// A progress callback: the kernel's name and where its current launch stands.
pub type ProgressFn<'a> = dyn FnMut(&str, Progress) + 'a;

/// A [`suite::Device`] backed by the simulator, counting what it executes. Launches run on the
/// functional core, or, when the device has a timing model ([`Gpu::timed`]), on its one
/// persistent machine (caches stay warm from launch to launch).
pub struct SimDevice<'p> {
    pub gpu: Gpu,
    pub module: ModuleId,
    pub stats: LaunchStats,
    pub launches: u64,
    /// Wall-clock time spent inside kernel launches (simulation only).
    pub launch_time: Duration,
    /// Statistics of every timed launch, in order.
    pub timed_stats: Vec<TimedStats>,
    /// Called as timed launches run.
    pub progress: Option<Box<ProgressFn<'p>>>,
}

/// The functional-only device (the name most tests use).
pub type FunctionalDevice = SimDevice<'static>;

impl<'p> SimDevice<'p> {
    /// Loads `ptx` (named `file` in diagnostics) into a fresh functional device.
    pub fn new(file: &str, ptx: &str) -> Result<Self, gpu::LoadError> {
        let mut gpu = Gpu::new();
        let module = gpu.load_ptx(file, ptx)?;
        Ok(SimDevice::with_gpu(gpu, module))
    }

    /// A device over an already loaded module.
    pub fn with_gpu(gpu: Gpu, module: ModuleId) -> Self {
        SimDevice {
            gpu,
            module,
            stats: LaunchStats::default(),
            launches: 0,
            launch_time: Duration::ZERO,
            timed_stats: Vec::new(),
            progress: None,
        }
    }
}

fn err(e: impl std::fmt::Display) -> DeviceError {
    DeviceError(e.to_string())
}

impl Device for SimDevice<'_> {
    fn alloc(&mut self, bytes: u64) -> Result<DevPtr, DeviceError> {
        Ok(DevPtr(self.gpu.alloc(bytes).0))
    }

    fn write(&mut self, dst: DevPtr, data: &[u8]) -> Result<(), DeviceError> {
        self.gpu.copy_to_device(GpuPtr(dst.0), data).map_err(err)
    }

    fn read(&mut self, src: DevPtr, len: u64) -> Result<Vec<u8>, DeviceError> {
        self.gpu.copy_from_device(GpuPtr(src.0), len).map_err(err)
    }

    fn launch(&mut self, l: &Launch<'_>) -> Result<(), DeviceError> {
        let args: Vec<KernelArg> = l
            .args
            .iter()
            .map(|a| match *a {
                Arg::Ptr(p) => KernelArg::Ptr(GpuPtr(p.0)),
                Arg::U32(v) => KernelArg::U32(v),
                Arg::I32(v) => KernelArg::I32(v),
                Arg::U64(v) => KernelArg::U64(v),
                Arg::F32(v) => KernelArg::F32(v),
                Arg::F64(v) => KernelArg::F64(v),
            })
            .collect();
        let grid = [l.grid.x, l.grid.y, l.grid.z];
        let block = [l.block.x, l.block.y, l.block.z];
        let start = Instant::now();
        let entry = l.entry;
        let mut report = |p: Progress| {
            if let Some(f) = self.progress.as_mut() {
                f(entry, p)
            }
        };
        let s = match self.gpu.machine() {
            None => self
                .gpu
                .launch_reporting(
                    self.module,
                    l.entry,
                    grid,
                    block,
                    l.dynamic_smem,
                    &args,
                    &mut report,
                )
                .map_err(err)?,
            Some(_) => {
                let s = self
                    .gpu
                    .launch_timed(
                        self.module,
                        entry,
                        grid,
                        block,
                        l.dynamic_smem,
                        &args,
                        &mut report,
                    )
                    .map_err(err)?;
                let counts = gpu::LaunchStats::from(&s);
                self.timed_stats.push(s);
                counts
            }
        };
        self.launch_time += start.elapsed();
        self.stats.add(&s);
        self.launches += 1;
        Ok(())
    }
}

/// The outcome of running one suite kernel.
#[derive(Clone, Debug)]
pub struct SuiteResult {
    pub kernel: &'static str,
    pub target: Target,
    pub size: Size,
    pub verification: Verification,
    pub stats: LaunchStats,
    pub launches: u64,
    /// Wall-clock time of the whole host program: input generation, launches, copies and
    /// the CPU reference.
    pub elapsed: Duration,
    /// Wall-clock time inside kernel launches only: what simulation speed is measured on.
    pub simulated: Duration,
    /// Statistics of every launch, when run on the timing model.
    pub timed: Vec<TimedStats>,
}

/// Errors of a suite run: the module did not load, or the device failed.
#[derive(Debug, thiserror::Error)]
pub enum SuiteError {
    #[error(transparent)]
    Load(#[from] gpu::LoadError),
    #[error("{kernel} ({target}): {error}")]
    Device {
        kernel: &'static str,
        target: &'static str,
        error: DeviceError,
    },
}

/// Loads and runs one suite kernel on a fresh functional device.
pub fn run_kernel(
    k: &dyn Kernel,
    target: Target,
    size: Size,
    seed: u64,
) -> Result<SuiteResult, SuiteError> {
    run_kernel_on(k, target, size, seed, Engine::FUNCTIONAL, None)
}

/// Loads and runs one suite kernel on a fresh device on `engine` (calling `progress` as
/// timed launches run).
pub fn run_kernel_on<'p>(
    k: &dyn Kernel,
    target: Target,
    size: Size,
    seed: u64,
    engine: Engine<'_>,
    progress: Option<Box<ProgressFn<'p>>>,
) -> Result<SuiteResult, SuiteError> {
    let file = format!("kernels/{0}/{0}.{1}.ptx", k.name(), target.name());
    let mut gpu = engine.device().map_err(|e| SuiteError::Device {
        kernel: k.name(),
        target: target.name(),
        error: err(e),
    })?;
    let Some(text) = k.ptx(target) else {
        return Err(SuiteError::Device {
            kernel: k.name(),
            target: target.name(),
            error: DeviceError(format!("the kernel is not compiled for {}", target.name())),
        });
    };
    let module = gpu.load_ptx(&file, text)?;
    let mut dev = SimDevice::with_gpu(gpu, module);
    dev.progress = progress;
    let start = Instant::now();
    let verification = k
        .run(&mut dev, size, seed)
        .map_err(|error| SuiteError::Device {
            kernel: k.name(),
            target: target.name(),
            error,
        })?;
    Ok(SuiteResult {
        kernel: k.name(),
        target,
        size,
        verification,
        stats: dev.stats,
        launches: dev.launches,
        elapsed: start.elapsed(),
        simulated: dev.launch_time,
        timed: dev.timed_stats,
    })
}

/// Runs one suite kernel on `timing` for a sweep point ([`sweep::KernelRunner`]): the same
/// call as `switchyard run`, with strict memory checks.
pub fn sweep_kernel(
    k: &'static dyn Kernel,
    target: Target,
    size: Size,
    seed: u64,
    timing: &TimedGpu,
) -> Result<sweep::KernelOutcome, String> {
    let r = run_kernel_on(k, target, size, seed, Engine::on(timing), None)
        .map_err(|e| e.to_string())?;
    let (verified, detail) = match &r.verification {
        Verification::Passed { checked } => (true, format!("{checked} values checked")),
        Verification::Failed { mismatches, first } => {
            (false, format!("{mismatches} mismatches; first: {first}"))
        }
    };
    Ok(sweep::KernelOutcome {
        verified,
        detail,
        launches: r.timed,
    })
}
