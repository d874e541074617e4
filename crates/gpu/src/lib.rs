//! The machine: a functional SIMT core that executes kernel IR on real values, device memory,
//! and a CUDA-runtime-like host API.
//!
//! * [`alu`]: per-lane semantics of every arithmetic, comparison and conversion instruction.
//! * [`exec`]: one warp instruction at a time, with the SIMT reconvergence stack.
//! * [`func`]: the functional-only driver (whole grids, barriers, deadlock detection).
//! * [`memory`]: global allocations with bounds, and the generic address windows.
//! * [`host`]: allocate, copy, load PTX, launch.
//! * [`config`], [`occupancy`], [`pipeline`]: GPU presets, the TB occupancy calculator and
//!   the SM pipeline's description.
//! * [`harness`]: one timed SM over a fixed-latency memory, for tests of the control
//!   protocol and of cycle gaps.
//! * [`timing`]: the cycle-level engine: TB dispatch by occupancy, warp schedulers,
//!   scoreboard, functional units, and the `memsys` memory hierarchy; values stay real
//!   because every issued instruction executes through [`exec::step`].

pub mod alu;
pub mod barrier;
pub mod bytes;
pub mod config;
pub mod error;
pub mod exec;
pub mod func;
pub mod harness;
pub mod host;
pub mod limits;
pub mod memory;
pub mod occupancy;
pub mod pipeline;
pub mod texture;
pub mod timing;
pub mod tlp;
pub mod validate;

pub use error::ExecError;
pub use func::LaunchStats;
pub use host::{
    lower_ptx, render_warnings, DevPtr, DeviceLimits, Gpu, GpuError, KernelArg, LoadError,
    LoadedModule, ModuleId,
};
