//! A small CUDA-runtime-like host API over the functional core: allocate and free device
//! memory, copy to and from it, load PTX modules, and launch kernels by name.
//!
//! Loading a module parses it, lowers it to the kernel IR and checks every instruction the
//! machine will execute, so a kernel that cannot run is rejected with its location before
//! anything executes. Launching checks the launch shape and the arguments against the kernel.

use std::sync::Arc;

use kir::{Id, Kernel, KernelId, Module};
use ptx::{SourceFile, Span};

use crate::error::ExecError;
use crate::exec::LaunchCtx;
use crate::func::{self, LaunchStats};
use crate::limits::{stall_window, Limit, STALL_INSTRUCTIONS_PER_WARP};
use crate::memory::{DeviceMemory, GlobalFault};
use crate::timing::{
    run_launch, Control, LaunchId, Machine, Progress, TimedGpu, TimedKernel, TimedStats,
    TimingError,
};

/// A device pointer returned by [`Gpu::alloc`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DevPtr(pub u64);

/// A loaded module.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ModuleId(pub usize);

/// Limits of the functional device.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceLimits {
    /// Reported by `%nsmid`; TBs are assigned to SMs round-robin for `%smid`.
    pub num_sms: u32,
    pub max_threads_per_block: u32,
    pub max_block_dim: [u32; 3],
    pub max_grid_dim: [u32; 3],
    /// Static plus dynamic shared memory per TB.
    pub max_smem_per_block: u32,
    /// Warp instructions one launch may execute in all before it is stopped as a runaway;
    /// `None`: the progress rule ([`crate::limits`]).
    pub instruction_limit: Option<u64>,
    /// The progress rule ([`crate::limits`]): warp instructions a TB may execute, beside
    /// [`crate::limits::STALL_INSTRUCTIONS_PER_WARP`] per warp (the functional core runs
    /// one TB at a time, so each TB that finishes is the launch's progress).
    pub stall_instructions: u64,
}

impl DeviceLimits {
    /// How a runaway launch of `ctx` is recognised on the functional core, in warp
    /// instructions.
    pub fn instruction_rule(&self, ctx: &LaunchCtx) -> Limit {
        Limit::total_or(
            self.instruction_limit,
            Limit::WithoutProgress(stall_window(
                self.stall_instructions,
                STALL_INSTRUCTIONS_PER_WARP,
                u64::from(ctx.warps_per_tb()),
            )),
        )
    }
}

impl Default for DeviceLimits {
    fn default() -> Self {
        DeviceLimits {
            num_sms: 16,
            max_threads_per_block: 1024,
            max_block_dim: [1024, 1024, 64],
            max_grid_dim: [i32::MAX as u32, 65535, 65535],
            max_smem_per_block: 227 * 1024,
            instruction_limit: None,
            stall_instructions: crate::limits::STALL_WARP_INSTRUCTIONS,
        }
    }
}

impl DeviceLimits {
    /// The limits of a launch on `gpu`: its SM count, and per block CUDA's limits (1,024
    /// threads, 227 KiB of shared memory) where the SM holds that much, else what one SM
    /// holds (its threads, its largest shared-memory carve-out): a launch is checked
    /// against the GPU that runs it.
    pub fn for_gpu(gpu: &crate::config::GpuConfig) -> DeviceLimits {
        let d = DeviceLimits::default();
        let r = &gpu.sm.resources;
        let largest = r.shared_memory.last().copied().unwrap_or(0);
        DeviceLimits {
            num_sms: gpu.sm.count,
            max_threads_per_block: d.max_threads_per_block.min(r.max_threads),
            max_smem_per_block: d.max_smem_per_block.min(largest),
            ..d
        }
    }
}

/// A kernel argument.
#[derive(Clone, Debug, PartialEq)]
pub enum KernelArg {
    Ptr(DevPtr),
    U32(u32),
    I32(i32),
    U64(u64),
    I64(i64),
    F32(f32),
    F64(f64),
    /// Raw bytes for a `.param .align N .b8 name[size]` struct parameter.
    Bytes(Vec<u8>),
}

impl KernelArg {
    fn bytes(&self) -> Vec<u8> {
        match self {
            KernelArg::Ptr(p) => p.0.to_le_bytes().to_vec(),
            KernelArg::U32(v) => v.to_le_bytes().to_vec(),
            KernelArg::I32(v) => v.to_le_bytes().to_vec(),
            KernelArg::U64(v) => v.to_le_bytes().to_vec(),
            KernelArg::I64(v) => v.to_le_bytes().to_vec(),
            KernelArg::F32(v) => v.to_le_bytes().to_vec(),
            KernelArg::F64(v) => v.to_le_bytes().to_vec(),
            KernelArg::Bytes(b) => b.clone(),
        }
    }
}

/// For messages: the argument as a user wrote it (`f32 1.5`, `pointer 0x1000`).
impl std::fmt::Display for KernelArg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KernelArg::Ptr(p) => write!(f, "pointer {:#x}", p.0),
            KernelArg::U32(v) => write!(f, "u32 {v}"),
            KernelArg::I32(v) => write!(f, "s32 {v}"),
            KernelArg::U64(v) => write!(f, "u64 {v}"),
            KernelArg::I64(v) => write!(f, "s64 {v}"),
            KernelArg::F32(v) => write!(f, "f32 {v}"),
            KernelArg::F64(v) => write!(f, "f64 {v}"),
            KernelArg::Bytes(b) => write!(f, "{} bytes", b.len()),
        }
    }
}

/// Device memory up to which a faulting timed launch is replayed on the functional core to
/// name its fault as the functional core would (`Gpu::launch_timed`): 256 MiB.
pub const REPLAY_MEMORY_LIMIT: u64 = 256 << 20;

/// A diagnostic about a source location.
#[derive(Clone, Debug, PartialEq)]
pub struct Diagnostic {
    pub message: String,
    pub span: Span,
    /// `file:line:col`.
    pub location: String,
}

impl std::fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.location, self.message)
    }
}

/// Why a module could not be loaded. `diagnostics` lists every problem found.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("cannot load `{file}`: {}", render(diagnostics))]
pub struct LoadError {
    pub file: String,
    pub diagnostics: Vec<Diagnostic>,
    /// The source, for rendering the diagnostics with context.
    pub source_text: String,
}

fn render(d: &[Diagnostic]) -> String {
    let mut s = d
        .iter()
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join("; ");
    if d.len() > 1 {
        s = format!("{} problems: {s}", d.len());
    }
    s
}

/// An error of the host API.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum GpuError {
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error("no kernel `{name}` in module `{module}` (it has: {available})")]
    UnknownKernel {
        name: String,
        module: String,
        available: String,
    },
    #[error("bad launch of `{kernel}`: {what}")]
    BadLaunch { kernel: String, what: String },
    #[error("bad memory operation: {what}")]
    BadCopy { what: String },
    #[error("bad texture object: {0}")]
    BadTexture(crate::texture::TextureError),
    #[error(transparent)]
    Exec(#[from] ExecError),
    /// A timed launch failed for a reason of the timing model (boxed: it is large).
    #[error(transparent)]
    Timing(Box<TimingError>),
    #[error("this device has no timing model (build it with `Gpu::timed`)")]
    NotTimed,
}

impl From<TimingError> for GpuError {
    fn from(e: TimingError) -> Self {
        match e {
            TimingError::Exec(e) => GpuError::Exec(e),
            e => GpuError::Timing(Box::new(e)),
        }
    }
}

/// A PTX module placed in a device memory: its IR, its kernels (shared with the launches
/// that run them) and the addresses of its variables.
pub struct LoadedModule {
    source: Arc<SourceFile>,
    ir: Module,
    kernels: Vec<Arc<Kernel>>,
    /// Each kernel as the timed machine runs it, made at its first timed launch.
    timed: Vec<Option<TimedKernel>>,
    global_addrs: Arc<[u64]>,
}

impl LoadedModule {
    /// Checks the lowered module `ir` (from the PTX `text` of `file_name`) and places its
    /// variables in `mem`.
    pub fn place(
        mem: &mut DeviceMemory,
        file_name: &str,
        text: &str,
        ir: Module,
    ) -> Result<LoadedModule, LoadError> {
        let source = SourceFile::new(file_name, text);
        let problems = crate::validate::check_module(&ir);
        if !problems.is_empty() {
            return Err(LoadError {
                file: file_name.to_string(),
                diagnostics: problems
                    .into_iter()
                    .map(|(span, message)| Diagnostic {
                        message,
                        span,
                        location: source.location(span),
                    })
                    .collect(),
                source_text: text.to_string(),
            });
        }
        // Place module variables, then write their initial values (with the addresses of
        // other variables patched in).
        let global_addrs: Vec<u64> = ir
            .globals
            .values()
            .map(|g| mem.alloc(g.size.max(1)))
            .collect();
        for (id, g) in ir.globals.iter() {
            let mut bytes = g.init.clone();
            for r in &g.relocations {
                let addr = global_addrs[r.target.index()].wrapping_add(r.addend as u64);
                let at = r.offset as usize;
                let w = r.width as usize;
                bytes[at..at + w].copy_from_slice(&addr.to_le_bytes()[..w]);
            }
            if !bytes.is_empty() {
                mem.write_bytes(global_addrs[id.index()], &bytes)
                    .expect("freshly allocated");
            }
        }
        Ok(LoadedModule {
            source: Arc::new(source),
            kernels: ir.kernels.values().cloned().map(Arc::new).collect(),
            timed: vec![None; ir.kernels.len()],
            ir,
            global_addrs: global_addrs.into(),
        })
    }

    /// Parses, lowers and checks PTX `text` (named `file_name` in diagnostics) and places
    /// its variables in `mem`.
    pub fn load(
        mem: &mut DeviceMemory,
        file_name: &str,
        text: &str,
    ) -> Result<LoadedModule, LoadError> {
        let ir = lower_ptx(file_name, text)?;
        LoadedModule::place(mem, file_name, text, ir)
    }

    /// The file the module came from.
    pub fn name(&self) -> &str {
        &self.source.name
    }

    /// The lowered IR.
    pub fn ir(&self) -> &Module {
        &self.ir
    }

    /// The kernel named `name`.
    pub fn kernel(&self, name: &str) -> Result<KernelId, GpuError> {
        match self.ir.kernel(name) {
            Some((kid, _)) => Ok(kid),
            None => Err(GpuError::UnknownKernel {
                name: name.to_string(),
                module: self.source.name.clone(),
                available: self
                    .ir
                    .kernels
                    .values()
                    .map(|k| k.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            }),
        }
    }

    /// Checks a launch of `kernel` against `limits` and its signature, and builds it.
    #[allow(clippy::too_many_arguments)]
    pub fn launch_ctx(
        &self,
        limits: &DeviceLimits,
        kernel: KernelId,
        grid: [u32; 3],
        block: [u32; 3],
        dynamic_smem: u32,
        args: &[KernelArg],
        grid_id: u64,
    ) -> Result<LaunchCtx, GpuError> {
        let k = &self.kernels[kernel.index()];
        let params = check_launch(limits, k, grid, block, dynamic_smem, args)?;
        Ok(LaunchCtx::new(
            k.clone(),
            self.source.clone(),
            self.global_addrs.clone(),
            grid,
            block,
            dynamic_smem,
            params,
            limits.num_sms,
            grid_id,
        ))
    }

    /// Kernel `kernel` as `timing` times it, made once and kept.
    pub fn timed_kernel(&mut self, kernel: KernelId, timing: &TimedGpu) -> TimedKernel {
        let k = &self.kernels[kernel.index()];
        self.timed[kernel.index()]
            .get_or_insert_with(|| timing.timed_kernel(k))
            .clone()
    }
}

/// The warnings lowering gave `module` (loaded from `text` of `file_name`), each as
/// `file:line:col: warning: what`.
pub fn render_warnings(module: &Module, file_name: &str, text: &str) -> Vec<String> {
    let source = SourceFile::new(file_name, text);
    module
        .warnings
        .iter()
        .map(|w| format!("{}: warning: {w}", source.location(w.span)))
        .collect()
}

/// Parses and lowers PTX `text` (named `file_name` in diagnostics).
pub fn lower_ptx(file_name: &str, text: &str) -> Result<Module, LoadError> {
    let source = SourceFile::new(file_name, text);
    let fail = |diagnostics: Vec<Diagnostic>| LoadError {
        file: file_name.to_string(),
        diagnostics,
        source_text: text.to_string(),
    };
    let ast = ptx::parse(text).map_err(|e| {
        fail(vec![Diagnostic {
            message: e.to_string(),
            span: e.span(),
            location: source.location(e.span()),
        }])
    })?;
    kir::lower::lower_module(&ast, file_name).map_err(|errs| {
        fail(
            errs.iter()
                .map(|e| Diagnostic {
                    message: e.to_string(),
                    span: e.span(),
                    location: source.location(e.span()),
                })
                .collect(),
        )
    })
}

/// The device: memory, loaded modules and limits; with a timing model, a persistent
/// [`Machine`] that owns the memory and keeps its caches warm from one launch to the next.
pub struct Gpu {
    /// Device memory when there is no machine (the machine owns it otherwise).
    mem: DeviceMemory,
    machine: Option<Box<Machine>>,
    timing: Option<TimedGpu>,
    modules: Vec<LoadedModule>,
    pub limits: DeviceLimits,
    launches: u64,
}

impl Default for Gpu {
    fn default() -> Self {
        Self::new()
    }
}

impl Gpu {
    pub fn new() -> Self {
        Self::with_limits(DeviceLimits::default())
    }

    pub fn with_limits(limits: DeviceLimits) -> Self {
        Gpu {
            mem: DeviceMemory::new(),
            machine: None,
            timing: None,
            modules: Vec::new(),
            limits,
            launches: 0,
        }
    }

    /// A device with the timing model `timing`: [`Gpu::launch_timed`] runs launches on one
    /// persistent machine (functional launches use its memory too). `%nsmid` is its SM count.
    pub fn timed(timing: TimedGpu) -> Result<Self, TimingError> {
        let machine = Machine::new(
            timing.gpu.clone(),
            timing.options.clone(),
            DeviceMemory::new(),
        )?;
        let mut gpu = Gpu::with_limits(DeviceLimits::for_gpu(&timing.gpu));
        gpu.machine = Some(Box::new(machine));
        gpu.timing = Some(timing);
        Ok(gpu)
    }

    /// The timed machine, if the device has one.
    pub fn machine(&self) -> Option<&Machine> {
        self.machine.as_deref()
    }

    pub fn memory(&self) -> &DeviceMemory {
        match &self.machine {
            Some(m) => m.memory(),
            None => &self.mem,
        }
    }

    fn memory_mut(&mut self) -> &mut DeviceMemory {
        match &mut self.machine {
            Some(m) => m.memory_mut(),
            None => &mut self.mem,
        }
    }

    /// How global accesses are checked from now on ([`crate::memory::MemoryCheck`]).
    pub fn set_memory_check(&mut self, check: crate::memory::MemoryCheck) {
        self.memory_mut().set_check(check);
    }

    pub fn alloc(&mut self, bytes: u64) -> DevPtr {
        DevPtr(self.memory_mut().alloc(bytes))
    }

    pub fn free(&mut self, ptr: DevPtr) -> Result<(), GpuError> {
        if self.memory_mut().free(ptr.0) {
            Ok(())
        } else {
            Err(GpuError::BadCopy {
                what: format!(
                    "free of {:#x}, which is not the start of a live allocation",
                    ptr.0
                ),
            })
        }
    }

    /// Makes a texture object over texels already in device memory and returns the handle
    /// a kernel takes as its `cudaTextureObject_t` argument (`cudaCreateTextureObject`).
    pub fn create_texture(&mut self, desc: crate::texture::TextureDesc) -> Result<u64, GpuError> {
        self.memory_mut()
            .create_texture(desc)
            .map_err(GpuError::BadTexture)
    }

    pub fn copy_to_device(&mut self, dst: DevPtr, data: &[u8]) -> Result<(), GpuError> {
        self.memory_mut()
            .write_bytes(dst.0, data)
            .map_err(|f| copy_error("copy to", dst.0, data.len() as u64, f))
    }

    pub fn copy_from_device(&self, src: DevPtr, len: u64) -> Result<Vec<u8>, GpuError> {
        self.memory()
            .read_bytes(src.0, len)
            .map(|b| b.to_vec())
            .map_err(|f| copy_error("copy from", src.0, len, f))
    }

    /// Parses, lowers and checks a PTX module, and places its global variables.
    pub fn load_ptx(&mut self, file_name: &str, text: &str) -> Result<ModuleId, LoadError> {
        let ir = lower_ptx(file_name, text)?;
        self.load_module(file_name, text, ir)
    }

    /// Loads an already-lowered (possibly transformed: register-allocated, with preemption
    /// points) module. `text` is the PTX it came from, for diagnostics.
    pub fn load_module(
        &mut self,
        file_name: &str,
        text: &str,
        ir: Module,
    ) -> Result<ModuleId, LoadError> {
        let m = LoadedModule::place(self.memory_mut(), file_name, text, ir)?;
        self.modules.push(m);
        Ok(ModuleId(self.modules.len() - 1))
    }

    /// The lowered IR of a loaded module.
    pub fn module(&self, id: ModuleId) -> &Module {
        &self.modules[id.0].ir
    }

    /// The device address of a module variable (`cudaGetSymbolAddress`).
    pub fn symbol_address(&self, id: ModuleId, name: &str) -> Option<DevPtr> {
        let m = &self.modules[id.0];
        m.ir.globals
            .iter()
            .find(|(_, g)| g.name == name)
            .map(|(g, _)| DevPtr(m.global_addrs[g.index()]))
    }

    /// Launches `kernel` on the functional core (no timing).
    pub fn launch(
        &mut self,
        module: ModuleId,
        kernel: &str,
        grid: [u32; 3],
        block: [u32; 3],
        dynamic_smem: u32,
        args: &[KernelArg],
    ) -> Result<LaunchStats, GpuError> {
        self.launch_reporting(module, kernel, grid, block, dynamic_smem, args, &mut |_| {})
    }

    /// [`Gpu::launch`], calling `progress` after every TB.
    #[allow(clippy::too_many_arguments)]
    pub fn launch_reporting(
        &mut self,
        module: ModuleId,
        kernel: &str,
        grid: [u32; 3],
        block: [u32; 3],
        dynamic_smem: u32,
        args: &[KernelArg],
        progress: &mut dyn FnMut(Progress),
    ) -> Result<LaunchStats, GpuError> {
        let (ctx, _) = self.prepare(module, kernel, (grid, block, dynamic_smem), args)?;
        let limit = self.limits.instruction_rule(&ctx);
        Ok(func::run_reporting(
            &ctx,
            self.memory_mut(),
            limit,
            progress,
        )?)
    }

    /// Launches `kernel` on the device's timed machine and runs it to completion, calling
    /// `progress` as it runs (see [`crate::timing::run_launch`]). Device memory ends exactly
    /// as after [`Gpu::launch`] (up to the order of atomics); caches stay warm for the next
    /// launch.
    #[allow(clippy::too_many_arguments)]
    pub fn launch_timed(
        &mut self,
        module: ModuleId,
        kernel: &str,
        grid: [u32; 3],
        block: [u32; 3],
        dynamic_smem: u32,
        args: &[KernelArg],
        progress: &mut dyn FnMut(Progress),
    ) -> Result<TimedStats, GpuError> {
        let (ctx, timed) = self.prepare_timed(module, kernel, (grid, block, dynamic_smem), args)?;
        // Faults are named the way the functional core meets them (TBs in order, then warps,
        // then lanes), so that both engines name the same thread: the timed machine meets
        // the faults of concurrent TBs in time order, and on a fault the launch is replayed
        // on the functional core from the memory it started with. That copy costs what the
        // device memory holds, on every launch, so beyond `REPLAY_MEMORY_LIMIT` the timed
        // engine's own first fault is reported instead.
        let replay = (self.memory().bytes_allocated() <= REPLAY_MEMORY_LIMIT)
            .then(|| (ctx.clone(), self.memory().clone()));
        let machine = self.machine.as_mut().expect("a timed device");
        match run_launch(machine, ctx, &timed, progress) {
            Err(TimingError::Exec(fault @ ExecError::MemoryFault { .. })) => {
                let Some((ctx, mut memory)) = replay else {
                    return Err(fault.into());
                };
                let limit = self.limits.instruction_rule(&ctx);
                Err(match func::run(&ctx, &mut memory, limit) {
                    Err(first @ ExecError::MemoryFault { .. }) => first,
                    _ => fault,
                }
                .into())
            }
            result => Ok(result?),
        }
    }

    /// [`Gpu::launch_timed`] with the TBs placed by the control `make` builds for the
    /// launch (a scheduling framework, a preemption experiment, a test that moves TBs
    /// around) instead of [`crate::timing::GridDriver`]; runs until the launch finishes.
    #[allow(clippy::too_many_arguments)]
    pub fn launch_timed_with<C: Control>(
        &mut self,
        module: ModuleId,
        kernel: &str,
        grid: [u32; 3],
        block: [u32; 3],
        dynamic_smem: u32,
        args: &[KernelArg],
        make: impl FnOnce(LaunchId) -> C,
    ) -> Result<TimedStats, GpuError> {
        let (ctx, timed) = self.prepare_timed(module, kernel, (grid, block, dynamic_smem), args)?;
        let machine = self.machine.as_mut().expect("a timed device");
        let mut control = SubmitThen {
            pending: Some((ctx, timed)),
            make: Some(make),
            inner: None,
        };
        machine.step(&mut control)?;
        let id = control.launch().expect("submitted in the first cycle");
        Ok(machine.run_until_finished(id, &mut control)?.clone())
    }

    /// Checks a timed launch and builds its context and its kernel as the machine times it
    /// (made once per kernel).
    fn prepare_timed(
        &mut self,
        module: ModuleId,
        kernel: &str,
        shape: ([u32; 3], [u32; 3], u32),
        args: &[KernelArg],
    ) -> Result<(LaunchCtx, TimedKernel), GpuError> {
        let Some(timing) = self.timing.clone() else {
            return Err(GpuError::NotTimed);
        };
        let (ctx, kid) = self.prepare(module, kernel, shape, args)?;
        Ok((ctx, self.modules[module.0].timed_kernel(kid, &timing)))
    }

    /// Checks a launch and builds its context.
    fn prepare(
        &mut self,
        module: ModuleId,
        kernel: &str,
        (grid, block, dynamic_smem): ([u32; 3], [u32; 3], u32),
        args: &[KernelArg],
    ) -> Result<(LaunchCtx, KernelId), GpuError> {
        let m = &self.modules[module.0];
        let kid = m.kernel(kernel)?;
        let ctx = m.launch_ctx(
            &self.limits,
            kid,
            grid,
            block,
            dynamic_smem,
            args,
            self.launches + 1,
        )?;
        self.launches += 1;
        Ok((ctx, kid))
    }
}

/// Submits a launch in its first cycle (as [`crate::timing::GridDriver`] does), then hands
/// every cycle to the control `make` builds for it.
struct SubmitThen<C, F> {
    pending: Option<(LaunchCtx, TimedKernel)>,
    make: Option<F>,
    inner: Option<(LaunchId, C)>,
}

impl<C, F> SubmitThen<C, F> {
    fn launch(&self) -> Option<LaunchId> {
        self.inner.as_ref().map(|(id, _)| *id)
    }
}

impl<C: Control, F: FnOnce(LaunchId) -> C> Control for SubmitThen<C, F> {
    fn on_cycle(&mut self, m: &mut Machine) -> Result<(), TimingError> {
        if let (Some((ctx, timed)), Some(make)) = (self.pending.take(), self.make.take()) {
            let id = m.submit(ctx, &timed)?;
            self.inner = Some((id, make(id)));
        }
        match &mut self.inner {
            Some((_, c)) => c.on_cycle(m),
            None => Ok(()),
        }
    }
}

fn copy_error(what: &str, addr: u64, len: u64, f: GlobalFault) -> GpuError {
    GpuError::BadCopy {
        what: format!(
            "{what} {len} bytes at {addr:#x}: {}",
            crate::error::FaultReason::Global(f)
        ),
    }
}

/// Checks a launch against the device limits and the kernel's signature; returns the
/// parameter buffer.
fn check_launch(
    limits: &DeviceLimits,
    k: &Kernel,
    grid: [u32; 3],
    block: [u32; 3],
    dynamic_smem: u32,
    args: &[KernelArg],
) -> Result<Vec<u8>, GpuError> {
    let bad = |what: String| GpuError::BadLaunch {
        kernel: k.name.clone(),
        what,
    };
    for (d, name) in ["x", "y", "z"].iter().enumerate() {
        if block[d] == 0 || block[d] > limits.max_block_dim[d] {
            return Err(bad(format!(
                "block.{name} = {} must be in 1..={}",
                block[d], limits.max_block_dim[d]
            )));
        }
        if grid[d] == 0 || grid[d] > limits.max_grid_dim[d] {
            return Err(bad(format!(
                "grid.{name} = {} must be in 1..={}",
                grid[d], limits.max_grid_dim[d]
            )));
        }
    }
    let threads = block[0] as u64 * block[1] as u64 * block[2] as u64;
    if threads > limits.max_threads_per_block as u64 {
        return Err(bad(format!(
            "{threads} threads per block exceed the limit of {}",
            limits.max_threads_per_block
        )));
    }
    if let Some(req) = k.launch_bounds.req_ntid {
        if req != block {
            return Err(bad(format!(
                "the kernel requires a block of {req:?} (.reqntid), got {block:?}"
            )));
        }
    }
    if let Some(max) = k.launch_bounds.max_ntid {
        let max_threads = max.iter().map(|&d| d as u64).product::<u64>();
        if threads > max_threads {
            return Err(bad(format!(
                "{threads} threads per block exceed the kernel's .maxntid {max:?}"
            )));
        }
    }
    if dynamic_smem > 0 && !k.uses_dynamic_smem {
        return Err(bad(format!(
            "{dynamic_smem} bytes of dynamic shared memory requested, but the kernel declares no `.extern .shared` array"
        )));
    }
    let smem = k.static_smem as u64
        + dynamic_smem as u64
        + threads.div_ceil(crate::exec::WARP_SIZE as u64) * k.warp_smem as u64;
    if smem > limits.max_smem_per_block as u64 {
        return Err(bad(format!(
            "{smem} bytes of shared memory per block exceed the limit of {}",
            limits.max_smem_per_block
        )));
    }
    if args.len() != k.params.len() {
        return Err(bad(format!(
            "the kernel takes {} parameters, {} given",
            k.params.len(),
            args.len()
        )));
    }
    let mut buf = vec![0u8; k.param_size as usize];
    for (i, (p, a)) in k.params.iter().zip(args).enumerate() {
        let bytes = a.bytes();
        if bytes.len() != p.size as usize {
            return Err(bad(format!(
                "parameter {i} (`{}`) is {} bytes, the argument `{a}` is {}",
                p.name,
                p.size,
                bytes.len()
            )));
        }
        buf[p.offset as usize..p.offset as usize + bytes.len()].copy_from_slice(&bytes);
    }
    Ok(buf)
}
