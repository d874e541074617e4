//! Multiprogrammed workloads: processes (GPU contexts) whose host programs issue copies and
//! kernel launches through a host model in simulated time, onto one timing machine scheduled
//! by the framework of `sched`; scenarios that describe them in TOML; and what a run
//! reports.
//!
//! * [`data`]: buffer element types, initial contents, `.npy` files.
//! * [`scenario`]: the scenario format, checked and resolved with file, line and field.
//! * [`program`]: host programs (a scenario's commands; a suite kernel's own host program).
//! * [`system`]: the host model (streams, copy engines over PCIe, launch latency) around the
//!   machine and the framework, on one time line.

pub mod data;
pub mod program;
pub mod scenario;
pub mod system;

pub use scenario::{parse, Disk, Files, Scenario, ScenarioError};
pub use system::{RunError, RunRecord, Setup, System};
