//! Errors of loading and running kernels. Each names the kernel and, where there is one, the
//! instruction (`file:line:col` and PC), the TB and thread, and the address involved.

use kir::inst::{IndirectKind, Space};
use kir::InstId;

use crate::memory::GlobalFault;

/// Why a memory access failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultReason {
    Global(GlobalFault),
    /// Outside the TB's shared memory, the thread's local memory or the parameter buffer.
    OutOfBounds,
    /// Not aligned to the access size (PTX requires natural alignment).
    Misaligned,
    /// A store to the constant or parameter space.
    ReadOnly,
    /// An atomic on a space that does not support atomics.
    AtomicSpace,
}

impl std::fmt::Display for FaultReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FaultReason::Global(GlobalFault::Unallocated) => {
                f.write_str("address is not in any allocation")
            }
            FaultReason::Global(GlobalFault::Unmapped) => {
                f.write_str("address is in no mapped page (--memory-check page)")
            }
            FaultReason::Global(GlobalFault::OutOfBounds { base, size }) => {
                write!(
                    f,
                    "access runs past the end of the {size}-byte allocation at {base:#x}"
                )
            }
            FaultReason::Global(GlobalFault::Freed { base }) => {
                write!(f, "allocation at {base:#x} was freed")
            }
            FaultReason::OutOfBounds => f.write_str("out of bounds"),
            FaultReason::Misaligned => f.write_str("misaligned address"),
            FaultReason::ReadOnly => f.write_str("the space is read-only"),
            FaultReason::AtomicSpace => f.write_str("atomics are not supported in this space"),
        }
    }
}

/// For a fault outside every allocation: the nearest allocation and where the address lies
/// from it (`; the nearest is the N-byte allocation at B, D bytes before its start`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NearestNote(pub Option<crate::memory::Nearest>);

impl std::fmt::Display for NearestNote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Some(n) = self.0 else {
            return Ok(());
        };
        write_nearest(f, &n)
    }
}

fn write_nearest(f: &mut std::fmt::Formatter<'_>, n: &crate::memory::Nearest) -> std::fmt::Result {
    write!(
        f,
        "; the nearest is the {}-byte allocation at {:#x}, ",
        n.size, n.base
    )?;
    match n.offset {
        o if o < 0 => write!(f, "{} bytes before its start", o.unsigned_abs()),
        0 => f.write_str("just after its end"),
        o => write!(f, "{o} bytes after its end"),
    }
}

/// A warp waiting at a barrier, for deadlock reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WaitingWarp {
    pub warp: u32,
    pub pc: InstId,
    pub location: String,
    pub barrier: u32,
}

/// Where a thread was when it stopped its kernel with an error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadAt {
    pub kernel: Box<str>,
    pub pc: InstId,
    /// `file:line` of the instruction.
    pub location: Box<str>,
    pub ctaid: [u32; 3],
    pub tid: [u32; 3],
}

impl std::fmt::Display for ThreadAt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (c, t) = (self.ctaid, self.tid);
        write!(
            f,
            "{}: kernel `{}` at {} in TB ({}, {}, {}) thread ({}, {}, {})",
            self.location, self.kernel, self.pc, c[0], c[1], c[2], t[0], t[1], t[2]
        )
    }
}

/// An error while executing a kernel.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ExecError {
    #[error("{location}: kernel `{kernel}` faulted at {pc} in TB ({}, {}, {}) thread ({}, {}, {}): {space:?} access of {size} bytes at {addr:#x}: {reason}{nearest}", ctaid[0], ctaid[1], ctaid[2], tid[0], tid[1], tid[2])]
    MemoryFault {
        kernel: Box<str>,
        pc: InstId,
        location: Box<str>,
        ctaid: [u32; 3],
        tid: [u32; 3],
        space: Space,
        addr: u64,
        size: u32,
        reason: FaultReason,
        /// For an address outside every allocation, the nearest one (boxed: faults are
        /// rare, and every `Result` carrying this error pays for its size).
        nearest: Box<NearestNote>,
    },
    #[error("{at}: executed `trap`")]
    Trap { at: Box<ThreadAt> },
    /// A `brx.idx` index outside its `.branchtargets` list, or an indirect call through an
    /// address that is none of its possible callees.
    #[error("{at}: {}", describe_unmatched(*kind, *value))]
    UnmatchedTarget {
        at: Box<ThreadAt>,
        kind: IndirectKind,
        value: u64,
    },
    /// A texture fetch that cannot be made: a handle that names no texture object, or a
    /// result type the texture does not return.
    #[error("{at}: {what}")]
    Texture { at: Box<ThreadAt>, what: String },
    #[error("kernel `{kernel}` deadlocked in TB ({}, {}, {}): {}", ctaid[0], ctaid[1], ctaid[2], describe_waiting(waiting, *exited_warps))]
    BarrierDeadlock {
        kernel: String,
        ctaid: [u32; 3],
        waiting: Vec<WaitingWarp>,
        exited_warps: u32,
    },
    #[error("{location}: kernel `{kernel}`: {what}")]
    BadBarrier {
        kernel: String,
        location: String,
        what: String,
    },
    /// A warp-collective instruction (`mma.sync.aligned`, `ldmatrix`, ...) executed by
    /// part of a warp.
    #[error("{location}: kernel `{kernel}`: {what}")]
    Collective {
        kernel: String,
        location: String,
        what: String,
    },
    #[error("kernel `{kernel}` exceeded the limit of {limit} warp instructions (an endless loop? raise the limit with --instruction-limit)")]
    InstructionLimit { kernel: String, limit: u64 },
    /// The default runaway rule ([`crate::limits`]): `limit` warp instructions passed without
    /// one of the launch's TBs finishing.
    #[error("kernel `{kernel}` executed {limit} warp instructions without any of its TBs finishing (an endless loop? a kernel whose TBs run longer sets a total with --instruction-limit)")]
    NoProgress { kernel: String, limit: u64 },
    #[error("internal error in kernel `{kernel}`: {what}")]
    Internal { kernel: String, what: String },
}

impl ExecError {
    /// The same error with every PC passed through `f` (to name the PTX instruction behind
    /// an instruction of a rewritten kernel).
    pub fn map_pcs(mut self, f: impl Fn(InstId) -> InstId) -> ExecError {
        match &mut self {
            ExecError::MemoryFault { pc, .. } => *pc = f(*pc),
            ExecError::Trap { at }
            | ExecError::UnmatchedTarget { at, .. }
            | ExecError::Texture { at, .. } => at.pc = f(at.pc),
            ExecError::BarrierDeadlock { waiting, .. } => {
                for w in waiting {
                    w.pc = f(w.pc);
                }
            }
            _ => {}
        }
        self
    }
}

fn describe_unmatched(kind: IndirectKind, value: u64) -> String {
    match kind {
        IndirectKind::Branch => format!(
            "`brx.idx` index {value} is outside its `.branchtargets` list (the PTX ISA leaves this undefined)"
        ),
        IndirectKind::Call => format!(
            "indirect `call` through {value:#x}, which is not the address of any function the call may reach (its `.calltargets` list, call table, or the functions matching its `.callprototype` whose address the module takes)"
        ),
    }
}

fn describe_waiting(waiting: &[WaitingWarp], exited: u32) -> String {
    let mut s = String::from("every live warp waits at a barrier that can never complete (");
    for (i, w) in waiting.iter().enumerate() {
        if i > 0 {
            s.push_str("; ");
        }
        s.push_str(&format!(
            "warp {} at barrier {} ({}, {})",
            w.warp, w.barrier, w.pc, w.location
        ));
    }
    s.push_str(&format!("); {exited} warp(s) already exited"));
    s
}
