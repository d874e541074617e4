//! The timing model of the GPU memory hierarchy, alone: per-warp coalescing, L1 data and
//! constant caches, shared-memory bank conflicts, the two crossbar networks (SM→L2, L2→SM),
//! L2 slices and DRAM channels, each in its own clock domain.
//!
//! The crate knows nothing of instructions or warps beyond what a memory request carries; an SM
//! pipeline drives it through [`MemorySystem`]: `issue` a coalesced warp access, `tick` the
//! global clock, collect completions. Components follow the Akita discipline (STYLE.md): a
//! `Spec` (plain serde data), mutable state, a `Stats` struct, and bounded queues with latency
//! between them, stepped in a fixed order so that results are deterministic (DESIGN.md §1.5).
//!
//! Module map:
//! * [`coalesce`] — warp addresses → 128 B line requests with 32 B sector masks; shared-memory
//!   bank conflicts.
//! * [`port`] — the bounded delay queue every component talks through.
//! * [`cache`] — sectored set-associative cache with LRU, MSHRs and write policies.
//! * [`icnt`] — crossbar with input queueing, flits, serialisation and output contention.
//! * [`dram`] — channels with banks, row buffers and FR-FCFS.
//! * [`clock`] — clock domains and the global scheduler.
//! * [`tlb`] — address translation: per-SM L1 TLBs, the shared L2 TLB, page-table walkers.
//! * [`fault`] — demand paging of managed memory: far faults and the driver's batches.
//! * [`system`] — the facade: configuration, presets, address mapping, statistics.

pub mod cache;
pub mod clock;
pub mod coalesce;
pub mod dram;
pub mod fault;
pub mod icnt;
pub mod port;
pub mod presets;
pub mod system;
pub mod tlb;

use serde::{Deserialize, Serialize};

pub use cache::{CacheSpec, CacheStats, WritePolicy};
pub use clock::{ClockSpec, Domain, DomainSet};
pub use coalesce::{coalesce, coalesce_into, shared_bank_conflicts, LineRequest};
pub use dram::{DramSpec, DramStats};
pub use fault::{FaultCosts, FaultSpec, FaultStats, Handler, Link, Populate};
pub use icnt::{IcntSpec, IcntStats};
pub use system::{
    AccessKind, AddressHash, AddressMapping, Channels, Completion, IssueState, Location, MemAccess,
    MemConfig, MemStats, MemorySystem, RequestId, SharedMemSpec, SmPort, SmPorts, Space, Stall,
};
pub use tlb::{
    Pipeline, TbSwitch, TlbSpec, TlbStats, TranslationSpec, TranslationStats, OPERAND_LOG_BYTES,
    OPERAND_LOG_RANGE, TB_SWITCH_EXTRA, TB_SWITCH_EXTRA_RANGE,
};

/// Scheduling class of a request. Context-save/restore traffic is `Context`: it competes for
/// the same interconnect and DRAM bandwidth but loses every tie against `Normal` traffic
/// (papers/lin-lightweight §V-A: "context switching requests have lower priority than regular
/// requests").
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize,
)]
pub enum Priority {
    /// Ordinary loads and stores.
    #[default]
    Normal,
    /// Context save/restore traffic.
    Context,
}

impl Priority {
    /// 0 for `Normal`, 1 for `Context` (lower is served first).
    pub fn class(self) -> usize {
        self as usize
    }
}

/// An invalid memory-system configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A parameter (named in `what`) has an unusable value.
    #[error("invalid memory configuration: {what}: {reason}")]
    Invalid {
        /// The parameter or component.
        what: &'static str,
        /// Why it is unusable.
        reason: String,
    },
}
