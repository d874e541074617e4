//! Dedicated preemption and resume routines (papers/ji-ctxback §IV-A), as kernel IR.
//!
//! **Where the context goes.** Each thread saves its registers to its own *local* memory, in
//! a context area placed after everything the kernel already keeps there (its `.local`
//! variables and register-allocator spill slots): byte offset
//! [`Routines::context_base`] = `kernel.local_size` rounded up to 8, size
//! [`Routines::context_bytes`]. Local memory is per-thread device memory that survives the
//! switch, and it is addressed without a base register (`st.local [0 + offset]`, the
//! allocator's spill convention), so the routines need no register to hold a pointer — the
//! paper's `ctx[offset]`. The mechanism that installs the routines grows each thread's local
//! size by `context_bytes`.
//!
//! **Layout.** Per routine: 64-bit registers first (8-byte aligned), then 32-bit registers,
//! then predicates (4 bytes each, as 0/1).
//!
//! **Preemption routine.** The preemption-time reverting instructions (latest first), one
//! `st.local` per saved register, then each predicate through a scratch register
//! (`selp.u32 scratch, 1, 0, p; st.local.b32`) — the scratch is the first vector register,
//! free to clobber once every vector register has been stored — then `exit`.
//!
//! **Resume routine.** Predicates first (`ld.local.b32 scratch; setp.ne.u32 p, scratch, 0`),
//! then the flashback's [`ResumeStep`]s: `ld.local` for a load, a copy of the kernel's
//! instruction for a re-execution, the reverting instruction for a revert, and an unguarded
//! `bra` into the kernel for the final jump. Branch targets are kernel program counters; the
//! routines live in a code region of their own.
//!
//! **Sharing.** Instructions with the same flashback point usually save the same registers;
//! identical routines are stored once and every instruction keeps the index of its routine
//! ([`Routines::preempt_of`], [`Routines::resume_of`]).

use std::collections::HashMap;

use kir::inst::{Cmp, Op, Operand, Space};
use kir::{Inst, InstId, Kernel, Reg, Ty};
use thiserror::Error;

use super::flashback::{Flashback, ResumeStep};
use super::revert::revert_of;
use super::widths::RegClass;
use super::CtxBack;

/// Why routines could not be generated.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum RoutineError {
    /// A predicate must be saved but the kernel has no vector register to move it through.
    #[error("kernel `{kernel}`: {pc} saves predicates but the kernel has no vector register")]
    NoScratchRegister { kernel: String, pc: InstId },
    /// A planned revert is not in the reversible table (an analysis bug).
    #[error("kernel `{kernel}`: {pc} is not reversible")]
    NotReversible { kernel: String, pc: InstId },
}

/// The routines of one kernel.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Routines {
    /// Byte offset of the context area in each thread's local memory.
    pub context_base: u32,
    /// Bytes of the context area (the largest routine's).
    pub context_bytes: u32,
    /// Distinct preemption routines.
    pub preempt: Vec<Vec<Inst>>,
    /// Distinct resume routines.
    pub resume: Vec<Vec<Inst>>,
    /// For every instruction of the kernel, the index of its preemption routine.
    pub preempt_of: Vec<u32>,
    /// For every instruction of the kernel, the index of its resume routine.
    pub resume_of: Vec<u32>,
}

fn local(op_is_store: bool, r: Reg, offset: u32, wide: bool, span: ptx::Span) -> Inst {
    let ty = if wide { Ty::B64 } else { Ty::B32 };
    let mut i = if op_is_store {
        let mut i = Inst::new(
            Op::St {
                space: Space::Local,
                ty,
                vec: 1,
                offset: offset as i32,
            },
            span,
        );
        i.srcs[1] = Operand::Reg(r);
        i.n_srcs = 2;
        i
    } else {
        let mut i = Inst::new(
            Op::Ld {
                space: Space::Local,
                ty,
                vec: 1,
                offset: offset as i32,
                dst_bits: ty.bits() as u8,
                volatile: false,
            },
            span,
        );
        i.dsts[0] = Some(r);
        i.n_dsts = 1;
        i.n_srcs = 1;
        i
    };
    i.srcs[0] = Operand::Imm(0);
    i
}

/// Context offsets of a flashback's saved registers, and the bytes they take.
fn layout(fb: &Flashback, base: u32) -> (HashMap<Reg, (u32, bool)>, u32) {
    let mut off = base;
    let mut slots = HashMap::new();
    let order = |wide: bool, class: RegClass| match (class, wide) {
        (RegClass::Predicate, _) => 2,
        (_, true) => 0,
        (_, false) => 1,
    };
    for rank in 0..3 {
        for s in fb.saved.iter().filter(|s| order(s.wide, s.class) == rank) {
            slots.insert(s.reg, (off, s.wide));
            off += if s.wide { 8 } else { 4 };
        }
    }
    (slots, off - base)
}

fn scratch_of(kernel: &Kernel) -> Option<Reg> {
    kernel
        .regs
        .ids()
        .find(|&r| super::widths::reg_class(kernel, r) == RegClass::Vector)
}

/// The preemption routine of one flashback.
pub fn preempt_routine(
    kernel: &Kernel,
    fb: &Flashback,
    base: u32,
) -> Result<Vec<Inst>, RoutineError> {
    let span = kernel.insts[fb.point].span;
    let (slots, _) = layout(fb, base);
    let mut out = Vec::new();
    for &pc in &fb.preempt_reverts {
        let rv = revert_of(&kernel.insts[pc]).ok_or_else(|| RoutineError::NotReversible {
            kernel: kernel.name.clone(),
            pc,
        })?;
        out.push(rv.inst);
    }
    let mut preds = Vec::new();
    for s in &fb.saved {
        let (off, wide) = slots[&s.reg];
        if s.class == RegClass::Predicate {
            preds.push((s.reg, off));
        } else {
            out.push(local(true, s.reg, off, wide, span));
        }
    }
    if !preds.is_empty() {
        let scratch = scratch_of(kernel).ok_or_else(|| RoutineError::NoScratchRegister {
            kernel: kernel.name.clone(),
            pc: fb.pc,
        })?;
        for (p, off) in preds {
            let mut sel = Inst::new(Op::Selp(Ty::U32), span);
            sel.dsts[0] = Some(scratch);
            sel.n_dsts = 1;
            sel.srcs[..3].copy_from_slice(&[Operand::Imm(1), Operand::Imm(0), Operand::Reg(p)]);
            sel.n_srcs = 3;
            out.push(sel);
            out.push(local(true, scratch, off, false, span));
        }
    }
    out.push(Inst::new(Op::Exit, span));
    Ok(out)
}

/// The resume routine of one flashback.
pub fn resume_routine(
    kernel: &Kernel,
    fb: &Flashback,
    base: u32,
) -> Result<Vec<Inst>, RoutineError> {
    let span = kernel.insts[fb.point].span;
    let (slots, _) = layout(fb, base);
    let class = |r: Reg| fb.saved.iter().find(|s| s.reg == r).map(|s| s.class);
    let mut out = Vec::new();
    for step in &fb.resume {
        match *step {
            ResumeStep::Load(r) => {
                let (off, wide) = slots[&r];
                if class(r) == Some(RegClass::Predicate) {
                    let scratch =
                        scratch_of(kernel).ok_or_else(|| RoutineError::NoScratchRegister {
                            kernel: kernel.name.clone(),
                            pc: fb.pc,
                        })?;
                    out.push(local(false, scratch, off, false, span));
                    let mut set = Inst::new(
                        Op::Setp {
                            cmp: Cmp::Ne,
                            combine: None,
                            ty: Ty::U32,
                            ftz: false,
                        },
                        span,
                    );
                    set.dsts[0] = Some(r);
                    set.n_dsts = 1;
                    set.srcs[..2].copy_from_slice(&[Operand::Reg(scratch), Operand::Imm(0)]);
                    set.n_srcs = 2;
                    out.push(set);
                } else {
                    out.push(local(false, r, off, wide, span));
                }
            }
            ResumeStep::Reexecute(j) => out.push(kernel.insts[j].clone()),
            ResumeStep::Revert(j) => {
                let rv =
                    revert_of(&kernel.insts[j]).ok_or_else(|| RoutineError::NotReversible {
                        kernel: kernel.name.clone(),
                        pc: j,
                    })?;
                out.push(rv.inst);
            }
            ResumeStep::Jump(p) => {
                out.push(Inst::new(
                    Op::Bra {
                        target: p,
                        uni: true,
                    },
                    span,
                ));
            }
        }
    }
    Ok(out)
}

fn intern(
    table: &mut Vec<Vec<Inst>>,
    index: &mut HashMap<InstId, Vec<u32>>,
    key: InstId,
    r: Vec<Inst>,
) -> u32 {
    let ids = index.entry(key).or_default();
    if let Some(&id) = ids.iter().find(|&&id| table[id as usize] == r) {
        return id;
    }
    let id = table.len() as u32;
    table.push(r);
    ids.push(id);
    id
}

/// Generates the routines of every instruction of `kernel` from its analysis.
pub fn generate_routines(kernel: &Kernel, ctx: &CtxBack) -> Result<Routines, RoutineError> {
    let base = kernel.local_size.div_ceil(8) * 8;
    let mut out = Routines {
        context_base: base,
        ..Routines::default()
    };
    let (mut pi, mut ri) = (HashMap::new(), HashMap::new());
    for fb in ctx.flashbacks() {
        let (_, bytes) = layout(fb, base);
        out.context_bytes = out.context_bytes.max(bytes);
        let p = preempt_routine(kernel, fb, base)?;
        let r = resume_routine(kernel, fb, base)?;
        let pid = intern(&mut out.preempt, &mut pi, fb.point, p);
        let rid = intern(&mut out.resume, &mut ri, fb.point, r);
        out.preempt_of.push(pid);
        out.resume_of.push(rid);
    }
    Ok(out)
}
