//! Thread-block save and restore, mechanism-neutral: the architectural state of a TB taken
//! off an SM ([`TbContext`]); how it is stopped is the control protocol's
//! ([`super::control::StopAt`]).
//!
//! This is the primitive every preemption mechanism drives (papers/tanasic-thesis §5.2.2:
//! "the execution contexts of all the thread blocks running in the preempted SM are saved
//! ... and these thread blocks are issued again, later on"). A stop request halts the TB's
//! warps at an instruction boundary (or, for [`super::control::StopAt::PreemptionPoint`], each warp at its
//! next `pp` / `bar.pp` or barrier, papers/lin-lightweight §IV-A), lets every instruction already issued
//! finish — results written, loads returned, stores acknowledged — and then captures:
//!
//! * per warp, its registers (after register allocation: the physical GPRs, predicates and
//!   uniform registers of the timed kernel), its SIMT reconvergence stack (which holds its
//!   PC and active masks), its valid and exited lanes and its instruction counters, and
//!   whether it waits at a barrier;
//! * for the TB, its shared memory and the state of its 16 named barriers;
//! * where its local memory lives: local memory is in device memory ([`crate::memory::
//!   local_word_address`]) and stays there, owned by the context, until the TB finishes.
//!
//! Capturing and installing move no bytes through the memory system: the traffic that
//! saves and restores a context, and its timing, belong to the mechanisms (the next layer).
//! Installing a context on any SM with room continues the TB exactly where it stopped, so
//! device memory ends bit-identical to an uninterrupted run.

use serde::Serialize;

use super::ids::{SmId, TbRef};
use crate::barrier::{Barriers, WarpStatus};
use crate::exec::Warp;

/// One warp of a stopped TB.
#[derive(Clone, Debug)]
pub struct WarpContext {
    /// Registers, SIMT stack (PC and masks), lanes and counters.
    pub warp: Warp,
    /// Ready, waiting at a barrier (with its arrival), or finished.
    pub status: WarpStatus,
    /// Its dirty bits when it stopped, one per register (`dirty[r / 64] >> (r % 64)`): the
    /// registers written since the TB's last checkpoint, or since it was placed on the SM
    /// (papers/li-pep §3.1). A mechanism that saves only these must have saved the others
    /// before (a checkpoint), or they were never written.
    pub dirty: Vec<u64>,
    /// Its memory instructions squashed for a fault and not yet replayed, oldest first
    /// (pipelines that replay, papers/tanasic-thesis §6.2–6.3): they travel with the
    /// context, and the warp replays them first once installed (ARCHITECTURE.md, "Squash
    /// and replay").
    pub replays: Vec<SquashedAccess>,
}

/// A memory instruction squashed for a fault that leaves its SM with its TB's context: its
/// replay-queue (or operand-log) entry and what its warp waits for.
#[derive(Clone, Debug)]
pub struct SquashedAccess {
    pub pc: u32,
    /// Warp instructions the warp had issued before it.
    pub seq: u64,
    /// Its active lanes.
    pub exec: u32,
    /// Its source registers' values at issue, register by register, every lane.
    pub operands: Vec<u64>,
    /// The lines it sent at issue, and those still to send (its squashed parts).
    pub lines: Vec<memsys::LineRequest>,
    pub resend: Vec<memsys::LineRequest>,
    pub kind: memsys::AccessKind,
    pub space: memsys::Space,
    /// Its destination registers (a load's or atomic's, which wait for it), whether the
    /// warp waits for it at all, and whether it disabled its warp (warp disable).
    pub regs: [Option<kir::Reg>; kir::inst::MAX_DSTS],
    pub waits: bool,
    pub disabled: bool,
    /// Whether the replay queue held its source registers against overwriting.
    pub holds_sources: bool,
    /// Operand-log bytes it holds (operand log).
    pub log_bytes: u32,
    /// Its squashed parts whose faults were not serviced when it left.
    pub faults: u32,
}

impl WarpContext {
    /// Whether register `r` was written since the TB's last checkpoint (or placement).
    pub fn is_dirty(&self, r: u32) -> bool {
        self.dirty
            .get((r / 64) as usize)
            .is_some_and(|w| w & (1 << (r % 64)) != 0)
    }
}

/// The whole architectural state of a TB taken off an SM.
#[derive(Clone, Debug)]
pub struct TbContext {
    pub tb: TbRef,
    pub ctaid: [u32; 3],
    /// In warp order (warp `i` of the TB at index `i`).
    pub warps: Vec<WarpContext>,
    /// The TB's shared memory (`LaunchCtx::smem_size` bytes).
    pub shared: Vec<u8>,
    pub barriers: Barriers,
    /// Device address of the TB's local memory (see the module documentation).
    pub local_base: u64,
    /// The SM it left, and the core cycle its state was captured.
    pub from: SmId,
    pub evicted_at: u64,
}

impl TbContext {
    /// Bytes of architectural state this context holds, by part, counting every register
    /// slot of every valid lane at 4 bytes (a mechanism that saves only part of it — live
    /// registers, compressed values — reports its own sizes).
    pub fn sizes(&self) -> ContextSizes {
        let mut s = ContextSizes {
            shared: self.shared.len() as u64,
            ..ContextSizes::default()
        };
        for w in &self.warps {
            let lanes = u64::from(w.warp.valid.count_ones());
            let regs = (w.warp.regs.len() / crate::exec::WARP_SIZE) as u64;
            s.registers += regs * lanes * 4;
            // One entry per stack level: PC, reconvergence PC and mask.
            s.simt_stack += w.warp.stack.len() as u64 * 12;
        }
        s
    }
}

/// The parts of a context, in bytes ([`TbContext::sizes`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ContextSizes {
    pub registers: u64,
    pub shared: u64,
    pub simt_stack: u64,
}
