//! GPU scheduling: the framework of papers/tanasic-thesis §5.2 — command buffers, the active
//! queue, the KSRT, the SMST, one PTBQ per kernel and the SM driver — over the timing
//! [`gpu::timing::Machine`], and the policies that plug into it.
//!
//! * [`tables`]: the command buffers, active queue, KSRT, PTBQs and SMST; what a policy may
//!   read and do ([`Tables`]); the records reports and traces are built from.
//! * [`framework`]: the SM driver over the tables, a [`gpu::timing::Control`].
//! * [`policy`]: the [`Policy`] trait with its contract, [`Fcfs`], [`Npq`], [`Ppq`] and
//!   [`TimeSlice`]; [`dss`]: Dynamic Spatial Sharing ([`Dss`]); [`mps`]: NVIDIA's
//!   Multi-Process Service ([`Mps`]); [`mig`]: NVIDIA's Multi-Instance GPU, SMs only
//!   ([`Mig`]); [`corun`]: co-running schemes (spatial, left-over, SMK) over co-resident
//!   kernels ([`Corun`]); [`ccbp`]: CCBP's choice of TB combination and bandwidth quotas.
//!
//! Mechanism is separate from policy (DESIGN.md §1.1): a policy decides which kernel runs
//! where; how an SM is emptied for another kernel (draining now; context switching and the
//! other preemption mechanisms in the layer above the machine) is not its business.

pub mod ccbp;
pub mod corun;
pub mod dss;
pub mod framework;
pub mod mig;
pub mod mps;
pub mod policy;
pub mod tables;

pub use corun::{Corun, Ipcs, Scheme, TbCounts};
pub use dss::Dss;
pub use framework::Framework;
pub use mig::Mig;
pub use mps::Mps;
pub use policy::{
    Fcfs, Npq, Policy, PolicyEnv, PolicyKind, Ppq, PpqAccess, TimeSlice, MAX_DSS_TOKENS,
    MAX_MIG_INSTANCES, MAX_SMK_EPOCH, SLICE_US_RANGE,
};
pub use tables::{
    Command, ContextId, FrameworkConfig, KernelSlot, Ksr, Record, RoomRequest, SmEntry, SmState,
    Tables, Waiting, MAX_ACTIVE_KERNELS, MAX_GUESTS,
};
