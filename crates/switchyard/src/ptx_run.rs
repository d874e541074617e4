//! Running a PTX file from a launch spec ([`crate::spec`]).

use std::time::{Duration, Instant};

use gpu::timing::TimedStats;
use gpu::{DevPtr, GpuError, KernelArg, LaunchStats};
use serde::Serialize;

use crate::spec::{Spec, SpecError};
use crate::suite_run::Engine;

/// The result of checking one output buffer.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct CheckResult {
    pub buffer: String,
    pub checked: usize,
    pub mismatches: usize,
    /// The first mismatch, described.
    pub first: Option<String>,
}

/// The outcome of a spec run.
#[derive(Clone, Debug)]
pub struct FileRun {
    pub kernel: String,
    /// Lowering's warnings (`file:line:col: warning: what`).
    pub warnings: Vec<String>,
    pub stats: LaunchStats,
    /// The timing model's statistics, when the launch was timed.
    pub timed: Option<TimedStats>,
    pub elapsed: Duration,
    pub checks: Vec<CheckResult>,
}

impl FileRun {
    /// Whether the spec had checks (`[[check]]`); without them nothing is verified.
    pub fn checked(&self) -> bool {
        !self.checks.is_empty()
    }

    /// Whether every check passed (false without checks).
    pub fn verified(&self) -> bool {
        self.checked() && self.checks.iter().all(|c| c.mismatches == 0)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum FileRunError {
    #[error("{0}")]
    Load(#[from] gpu::LoadError),
    #[error("spec: {0}")]
    Spec(#[from] SpecError),
    #[error("{0}")]
    Gpu(#[from] GpuError),
}

/// Loads `ptx`, sets up the spec's buffers, launches once (timed on `timed` if given, else on
/// the functional core) and runs the checks.
pub fn run_file(
    file: &str,
    ptx: &str,
    spec: &Spec,
    engine: Engine<'_>,
    progress: &mut dyn FnMut(gpu::timing::Progress),
) -> Result<FileRun, FileRunError> {
    let timed = engine.timed;
    let mut gpu = engine.device().map_err(GpuError::from)?;
    let module = gpu.load_ptx(file, ptx)?;
    let warnings = gpu::render_warnings(gpu.module(module), file, ptx);
    let kernel = match &spec.kernel {
        Some(k) => k.clone(),
        None => {
            let m = gpu.module(module);
            if m.kernels.len() != 1 {
                return Err(SpecError::Invalid {
                    field: "kernel".into(),
                    what: format!(
                        "the module has {} kernels ({}); name one",
                        m.kernels.len(),
                        crate::diag::name_list(m.kernels.values().map(|k| k.name.as_str()))
                    ),
                }
                .into());
            }
            m.kernels.values().next().expect("one kernel").name.clone()
        }
    };
    let mut ptrs = Vec::new();
    for b in &spec.buffers {
        let bytes = b.initial_bytes();
        let p = gpu.alloc(bytes.len() as u64);
        gpu.copy_to_device(p, &bytes)?;
        ptrs.push(p);
    }
    let ptr_of = |name: &str| -> DevPtr {
        let i = spec
            .buffers
            .iter()
            .position(|b| b.name == name)
            .expect("validated");
        ptrs[i]
    };
    let mut handles = Vec::new();
    for t in &spec.textures {
        handles.push(gpu.create_texture(t.desc(ptr_of(&t.buffer).0))?);
    }
    let handle_of = |name: &str| -> u64 {
        let i = spec
            .textures
            .iter()
            .position(|t| t.name == name)
            .expect("validated");
        handles[i]
    };
    let args: Vec<KernelArg> = spec
        .args
        .iter()
        .map(|a| {
            if let Some(b) = &a.buffer {
                KernelArg::Ptr(ptr_of(b))
            } else if let Some(t) = &a.texture {
                KernelArg::U64(handle_of(t))
            } else if let Some(v) = a.u32 {
                KernelArg::U32(v)
            } else if let Some(v) = a.s32 {
                KernelArg::I32(v)
            } else if let Some(v) = a.u64 {
                KernelArg::U64(v)
            } else if let Some(v) = a.s64 {
                KernelArg::I64(v)
            } else if let Some(v) = a.f32 {
                KernelArg::F32(v)
            } else {
                KernelArg::F64(a.f64.expect("validated: exactly one field"))
            }
        })
        .collect();
    let start = Instant::now();
    let (grid, block) = (Spec::dims(&spec.grid), Spec::dims(&spec.block));
    let (stats, timed) = match timed {
        None => (
            gpu.launch_reporting(
                module,
                &kernel,
                grid,
                block,
                spec.dynamic_smem,
                &args,
                progress,
            )?,
            None,
        ),
        Some(_) => {
            let s = gpu.launch_timed(
                module,
                &kernel,
                grid,
                block,
                spec.dynamic_smem,
                &args,
                progress,
            )?;
            (gpu::LaunchStats::from(&s), Some(s))
        }
    };
    let elapsed = start.elapsed();
    let mut checks = Vec::new();
    for c in &spec.checks {
        let b = spec
            .buffers
            .iter()
            .find(|b| b.name == c.buffer)
            .expect("validated");
        let bytes = gpu.copy_from_device(ptr_of(&c.buffer), (b.len * b.ty.size()) as u64)?;
        let n = if c.fill.is_some() {
            b.len
        } else {
            c.values.len()
        };
        let mut result = CheckResult {
            buffer: c.buffer.clone(),
            checked: n,
            mismatches: 0,
            first: None,
        };
        for i in 0..n {
            let want = c.fill.unwrap_or_else(|| c.values[i]);
            let got = b.ty.decode(&bytes, i);
            let ok = if b.ty.is_float() {
                (got - want).abs() <= c.tolerance * want.abs().max(f64::MIN_POSITIVE) || got == want
            } else {
                got == want
            };
            if !ok {
                result.mismatches += 1;
                if result.first.is_none() {
                    result.first = Some(format!("{}[{i}]: got {got}, want {want}", c.buffer));
                }
            }
        }
        checks.push(result);
    }
    Ok(FileRun {
        kernel,
        warnings,
        stats,
        timed,
        elapsed,
        checks,
    })
}
