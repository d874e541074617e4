//! Register allocation from PTX virtual registers to physical registers, and uniformity.
//!
//! The papers size contexts over *physical* 32-bit registers (papers/lin-lightweight §V-A,
//! papers/lin-thesis §3.3.1), so a kernel is allocated before its context is measured.
//! [`allocate`] turns a [`kir::Kernel`] over virtual registers into a new `Kernel` over
//! physical ones, inserting real `st.local`/`ld.local` spill code when the register budget is
//! exceeded; [`verify`] checks an allocation against the original by abstract interpretation.
//!
//! # Representation of the allocated kernel
//! `kernel.regs` lists the physical registers in this order, so that `Reg(i)` names one
//! register of one file:
//!
//! | indices                                  | names            | `RegInfo.ty` |
//! |------------------------------------------|------------------|--------------|
//! | `0 .. gpr_count`                         | `R0 ..`          | `.b32`       |
//! | `gpr_count .. gpr_count + pred_count`    | `P0 ..`          | `.pred`      |
//! | `.. + uniform_count`                     | `UR0 ..`         | `.b32`       |
//!
//! A 64-bit value occupies the aligned pair `R2k, R2k+1` (or `UR2k, UR2k+1`); the functional
//! core, which keeps one `u64` slot per register, stores the whole value in the even slot and
//! leaves the odd slot unused while the pair is live. Execution is therefore unchanged, and
//! context-size analyses, which count physical registers, count both halves. Every GPR is
//! typed `.b32` because one register holds different values (and types) over time.
//!
//! # Invariants
//! * Instructions keep their program order; spill code is inserted next to the instruction it
//!   serves, never on edges, so every original basic block maps to one allocated block with
//!   the same successors. Identity `mov`s produced by coalescing are removed.
//! * SIMT divergence needs no special case: both sides of a divergent branch are CFG paths,
//!   so a value live across a divergent region is live on each side, and interferes with
//!   everything either side defines.
//! * A guarded definition does not kill the old value (the lanes whose guard is false keep
//!   it), so the old and new value share the virtual register's physical register.
//! * Liveness vectors already inside `pp` / `bar.pp` instructions are carried unchanged:
//!   preemption points are inserted after allocation, over physical registers.

mod alloc;
mod check;
mod color;
pub mod patterns;
pub mod uniformity;

use kir::{InstId, Kernel, Module, Reg};
use thiserror::Error;

pub use alloc::MIN_GPRS;
pub use check::{verify, VerifyError};
pub use uniformity::Uniformity;

/// Parameters of the allocator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AllocConfig {
    /// General-purpose 32-bit registers a thread may use (`R0 .. R(max-1)`). NVIDIA allows
    /// 255 (R255 is the zero register). Values that do not fit are spilled to local memory.
    pub max_registers: u32,
    /// Uniform (scalar, one per warp) registers for values proven warp-uniform; 0 disables
    /// them. NVIDIA Turing and later have 63 (`UR0 .. UR62`).
    pub uniform_registers: u32,
    /// Predicate registers per thread (NVIDIA: 7, `P0 .. P6`). Further predicates are kept
    /// in GPRs (`selp` to spill, `setp.ne` to reload).
    pub predicate_registers: u32,
}

impl Default for AllocConfig {
    fn default() -> Self {
        AllocConfig {
            max_registers: 255,
            uniform_registers: 0,
            predicate_registers: 7,
        }
    }
}

/// Where an instruction of the allocated kernel comes from: the original instruction it
/// serves, and whether it is that instruction or spill code placed before or after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Origin {
    /// The instruction of the original kernel.
    pub inst: InstId,
    pub phase: Phase,
}

/// See [`Origin`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    /// Spill code (a reload, or a predicate moved back from a GPR) before the instruction.
    Before,
    /// The original instruction itself, over physical registers.
    At,
    /// Spill code (a store, or a predicate moved into a GPR) after the instruction.
    After,
}

/// A register-allocated kernel and what allocation cost.
#[derive(Clone, Debug)]
pub struct Allocation {
    /// The kernel over physical registers (see the crate docs for the layout of `regs`).
    pub kernel: Kernel,
    /// GPRs used: the highest used register plus one, counting both halves of a pair — the
    /// number `ptxas -v` reports as "Used N registers".
    pub gpr_count: u32,
    /// Predicate registers used.
    pub pred_count: u32,
    /// Uniform registers used (0 unless [`AllocConfig::uniform_registers`] is positive).
    pub uniform_count: u32,
    /// Virtual registers kept in local memory (predicates moved to GPRs are not counted).
    pub spilled_values: u32,
    /// Bytes of local memory added for spill slots, after the kernel's own `local_size`.
    pub spill_bytes: u32,
    /// One entry per instruction of `kernel`.
    pub origins: Vec<Origin>,
    /// The physical register each original virtual register was given (`None` when it was
    /// spilled, or never appears in an instruction).
    pub assignment: Vec<Option<Reg>>,
}

/// Why a kernel could not be allocated.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum AllocError {
    /// The budget is too small for even one instruction's operands plus spill temporaries.
    #[error(
        "kernel `{kernel}`: max_registers = {max_registers} is too small (at least {min} needed)"
    )]
    TooFewRegisters {
        kernel: String,
        max_registers: u32,
        min: u32,
    },
    /// `predicate_registers` must leave room for the predicates of one instruction.
    #[error("kernel `{kernel}`: predicate_registers = {predicate_registers} is too small (at least {min} needed)")]
    TooFewPredicates {
        kernel: String,
        predicate_registers: u32,
        min: u32,
    },
    /// Spilling did not converge (a bug, or a pathological budget).
    #[error("kernel `{kernel}`: register allocation did not converge after {rounds} spill rounds")]
    NoConvergence { kernel: String, rounds: u32 },
}

/// Allocates physical registers for `kernel`.
pub fn allocate(kernel: &Kernel, config: &AllocConfig) -> Result<Allocation, AllocError> {
    alloc::allocate(kernel, config)
}

/// Allocates every kernel of a module; module-scope data is kept as it is.
pub fn allocate_module(module: &Module, config: &AllocConfig) -> Result<Module, AllocError> {
    let mut out = module.clone();
    for (id, k) in module.kernels.iter() {
        out.kernels[id] = allocate(k, config)?.kernel;
    }
    Ok(out)
}
