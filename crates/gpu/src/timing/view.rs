//! What can be seen of a resident TB and its warps from outside the SM: the counters a
//! mechanism may read (hardware would keep them), and the warps' state for inspection.

use super::control::WarpControl;

/// What per-TB counters (as hardware would keep them) say of a resident TB's progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TbProgress {
    /// The core cycle it was placed on its SM (dispatched, or restored).
    pub placed_at: u64,
    /// Warp instructions its warps have executed in all, and since it was placed.
    pub executed: u64,
    pub executed_here: u64,
    /// Whether it has a checkpoint and re-executing what it issued since its latest one
    /// would be harmless (no store or atomic to global or local memory since): whether a
    /// rollback to it would be accepted.
    pub repeatable: bool,
}

/// What can be seen of a resident warp from outside the SM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WarpView {
    /// Its index in the TB.
    pub index: u32,
    /// The PC it executes next (`None` when it has finished).
    pub pc: Option<u32>,
    /// The PCs of every SIMT stack entry that still holds lanes, the next one first (lanes
    /// parked on the other side of a divergent branch, or waiting at a reconvergence point).
    pub pcs: Vec<u32>,
    /// Whether it waits at a barrier.
    pub at_barrier: bool,
    /// Whether its lanes are split over several SIMT stack entries.
    pub diverged: bool,
    /// Its control state (running, halted by a stop, in a routine, held).
    pub control: WarpControl,
    pub done: bool,
    /// Warp instructions it has executed.
    pub executed: u64,
    /// Lanes that exist and have not exited.
    pub lanes: u32,
    /// Its dirty bits, one per register: written since the TB's last checkpoint or since
    /// it was placed ([`super::WarpContext::dirty`]).
    pub dirty: Vec<u64>,
}

impl WarpView {
    /// Whether register `r` is dirty.
    pub fn is_dirty(&self, r: u32) -> bool {
        self.dirty
            .get((r / 64) as usize)
            .is_some_and(|w| w & (1 << (r % 64)) != 0)
    }

    /// Whether a stop request halted it.
    pub fn halted(&self) -> bool {
        self.control.halted()
    }
}
