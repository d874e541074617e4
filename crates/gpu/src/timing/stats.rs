//! Counters of a timed launch (serializable to JSON; DESIGN.md §1.6).

use memsys::MemStats;
use serde::Serialize;

/// Why a warp scheduler issued nothing in a cycle. When several warps are blocked for
/// different reasons the cycle is charged to the warp closest to issuing, in the order
/// `PipelineBusy` > `Scoreboard` > `Memory` > `Barrier` > `NoWarp`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum StallReason {
    /// The scheduler has no resident, unfinished warp.
    NoWarp,
    /// Every warp waits at a barrier.
    Barrier,
    /// Waiting for a load's data, or the memory system refused the access (L1 port, MSHRs,
    /// outstanding accesses, interconnect queue).
    Memory,
    /// Waiting for an arithmetic result (RAW/WAW on a register written by a non-memory op).
    Scoreboard,
    /// The functional unit the next instruction needs is busy (initiation interval).
    PipelineBusy,
}

/// One warp scheduler's cycles: every cycle is either an issue or exactly one stall.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SchedulerStats {
    pub issued: u64,
    pub no_warp: u64,
    pub barrier: u64,
    pub memory: u64,
    pub scoreboard: u64,
    pub pipeline_busy: u64,
}

impl SchedulerStats {
    pub fn stall(&mut self, r: StallReason) {
        match r {
            StallReason::NoWarp => self.no_warp += 1,
            StallReason::Barrier => self.barrier += 1,
            StallReason::Memory => self.memory += 1,
            StallReason::Scoreboard => self.scoreboard += 1,
            StallReason::PipelineBusy => self.pipeline_busy += 1,
        }
    }

    pub fn add(&mut self, o: &SchedulerStats) {
        self.issued += o.issued;
        self.no_warp += o.no_warp;
        self.barrier += o.barrier;
        self.memory += o.memory;
        self.scoreboard += o.scoreboard;
        self.pipeline_busy += o.pipeline_busy;
    }

    /// Cycles accounted for (issues plus stalls).
    pub fn cycles(&self) -> u64 {
        self.issued
            + self.no_warp
            + self.barrier
            + self.memory
            + self.scoreboard
            + self.pipeline_busy
    }
}

/// One SM's counters.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SmStats {
    /// Cycles with at least one resident TB.
    pub active_cycles: u64,
    pub tbs: u64,
    pub warp_instructions: u64,
    /// Per warp scheduler.
    pub schedulers: Vec<SchedulerStats>,
}

/// Counters of a timed launch.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TimedStats {
    pub kernel: String,
    /// Core cycles from the first dispatch until the last TB finished and every store was
    /// acknowledged.
    pub cycles: u64,
    /// Core cycles until the last TB finished (before draining stores).
    pub cycles_to_last_tb: u64,
    pub tbs: u64,
    pub warps: u64,
    pub warp_instructions: u64,
    pub thread_instructions: u64,
    /// Warp instructions per core cycle, whole GPU.
    pub ipc: f64,
    /// TBs resident per SM at full occupancy, and the registers per thread assumed.
    pub tbs_per_sm: u32,
    pub regs_per_thread: u32,
    /// Load and atomic accesses that went through the memory system (the parts of a split
    /// warp access counted separately), and their mean latency in core cycles (issue to data).
    pub global_loads: u64,
    pub mean_load_latency: f64,
    /// Shared-memory warp accesses and their bank-conflict passes, summed.
    pub shared_accesses: u64,
    pub shared_passes: u64,
    /// All schedulers summed.
    pub schedulers: SchedulerStats,
    pub sms: Vec<SmStats>,
    pub memory: MemStats,
}
