//! Value patterns: what a register's lanes hold at each instruction, as the register
//! compressor of papers/lin-lightweight §III-C would find it, proved by the compiler instead
//! of measured on the values. GPUDuet sizes its spilled register contexts this way
//! (papers/lin-thesis §3.6.6, "Register Context Reduction": the compiler analyses the
//! reduced register size at the switch points "with liveness and compression").
//!
//! The compressor looks at a register in *pattern analysing groups* of `PAG = min(32,
//! ntid.x)` consecutive lanes. In every group the lanes hold one value (**uniform**), an
//! arithmetic progression over the lanes (**strided**), or anything (**random**). This
//! analysis is a forward data flow over the control-flow graph with that lattice (uniform <
//! strided < random), joined at block entries, to a fixed point:
//!
//! * Uniform: immediates, addresses of globals, the special registers that are the same in
//!   a whole warp (`%ctaid`, `%ntid`, `%warpid`, …), `vote`, `activemask`, `redux`, loads
//!   from the parameter and constant spaces at a uniform address; and `%tid.y`, `%tid.z`
//!   where every group lies in one row of the TB (`ntid.x` a multiple of 32 or a divisor
//!   of it).
//! * Strided: `%laneid`; `%tid.x` where every group lies in one row; integer additions,
//!   subtractions, negations and complements of strided and uniform values; integer
//!   products, multiply-adds and left shifts of a strided value by a uniform one.
//! * Random: everything else — other loads, atomics, shuffles, floating-point arithmetic on
//!   a value that is not uniform, divisions, bitwise operations, narrowing conversions of a
//!   value that is not uniform.
//!
//! A definition under a guard that is not uniform, or inside the region of a divergent
//! branch ([`Uniformity::in_divergent_region`]), is random: lanes that skip it keep their
//! old value. Under a uniform guard it joins its old pattern.
//!
//! An assumption, not a proof: a strided value widened to 64 bits (`cvt`, `mul.wide`,
//! `mad.wide`) is taken to have a uniform high half, i.e. no carry or sign change between
//! the lanes of a group — the usual case for addresses and indices, which is where wide
//! strided values occur.
//!
//! Allocated kernels ([`crate::allocate`]) keep a 64-bit value in an aligned pair of `.b32`
//! registers, the whole value named by the even one. A definition of a 64-bit result into a
//! 32-bit register therefore also sets the odd one, to the high half's pattern (uniform for
//! a strided value, by the assumption above), so that the compressor's view of each 32-bit
//! half is what each register reports.

use kir::inst::{ArithOp, Op, Operand, Space, Special};
use kir::{Id, InstId, Kernel, Reg};

use crate::Uniformity;

/// What a register's lanes hold in every pattern analysing group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ValuePattern {
    Uniform,
    Strided,
    Random,
}

use ValuePattern::{Random, Strided, Uniform};

/// The patterns of every register before every instruction of a kernel.
#[derive(Clone, Debug)]
pub struct ValuePatterns {
    regs: usize,
    /// `before[pc * regs + r]`.
    before: Vec<ValuePattern>,
}

impl ValuePatterns {
    /// Runs the analysis on `kernel` for TBs `ntid_x` threads wide.
    pub fn compute(kernel: &Kernel, ntid_x: u32) -> ValuePatterns {
        let uniformity = Uniformity::compute(kernel);
        let regs = kernel.regs.len();
        let cfg = &kernel.cfg;
        let rows = ntid_x > 0 && (ntid_x.is_multiple_of(32) || 32u32.is_multiple_of(ntid_x));
        let types: Vec<kir::Ty> = kernel.regs.values().map(|r| r.ty).collect();
        let mut entry: Vec<Option<Vec<ValuePattern>>> = vec![None; cfg.blocks.len()];
        if let Some((first, _)) = cfg.blocks.iter().next() {
            entry[first.index()] = Some(vec![Uniform; regs]);
        }
        let mut before = vec![Uniform; kernel.insts.len() * regs];
        loop {
            let mut changed = false;
            for (b, block) in cfg.blocks.iter() {
                let Some(mut state) = entry[b.index()].clone() else {
                    continue;
                };
                let divergent = uniformity.in_divergent_region(b);
                for i in block.start.0..block.end.0 {
                    let at = i as usize * regs;
                    before[at..at + regs].copy_from_slice(&state);
                    step(
                        &kernel.insts[InstId(i)],
                        &types,
                        &mut state,
                        divergent,
                        rows,
                    );
                }
                for &s in &block.succs {
                    match &mut entry[s.index()] {
                        Some(e) => {
                            for (x, &y) in e.iter_mut().zip(&state) {
                                if y > *x {
                                    *x = y;
                                    changed = true;
                                }
                            }
                        }
                        e @ None => {
                            *e = Some(state.clone());
                            changed = true;
                        }
                    }
                }
            }
            if !changed {
                break;
            }
        }
        ValuePatterns { regs, before }
    }

    /// The pattern of `r` before instruction `pc` (uniform for a register not yet defined,
    /// or past the kernel's end).
    pub fn before(&self, pc: InstId, r: Reg) -> ValuePattern {
        self.before
            .get(pc.index() * self.regs + r.index())
            .copied()
            .unwrap_or(Uniform)
    }
}

/// Applies one instruction to `state`.
fn step(
    inst: &kir::Inst,
    types: &[kir::Ty],
    state: &mut [ValuePattern],
    divergent: bool,
    rows: bool,
) {
    if inst.defs().next().is_none() {
        return;
    }
    let guard = inst.guard.map(|g| state[g.reg.index()]);
    let new = if divergent || guard.is_some_and(|g| g != Uniform) {
        Random
    } else {
        result(inst, state, rows)
    };
    let high = if new == Strided { Uniform } else { new };
    let wide = result_bits(&inst.op) == Some(64);
    for d in inst.defs() {
        let mut set = |r: usize, v: ValuePattern| {
            if let Some(p) = state.get_mut(r) {
                // Under a uniform guard the whole warp either writes or keeps the old value.
                *p = if guard.is_some() { v.max(*p) } else { v };
            }
        };
        set(d.index(), new);
        if wide && types[d.index()].bits() == 32 {
            // The odd register of an allocated pair holds the high half.
            set(d.index() + 1, high);
        }
    }
}

/// Bits of each value `op` writes, where the operation says (`None`: not known here).
fn result_bits(op: &Op) -> Option<u32> {
    match *op {
        Op::Mov(t) | Op::Selp(t) => Some(t.bits()),
        Op::Arith {
            op: ArithOp::MulWide | ArithOp::MadWide,
            ty,
            ..
        } => Some(2 * ty.bits()),
        Op::Arith { ty, .. } | Op::Atom { ty, .. } | Op::Cvta { ty, .. } => Some(ty.bits()),
        Op::Cvt { dty, .. } => Some(dty.bits()),
        Op::Ld { ty, dst_bits, .. } => Some(ty.bits().max(u32::from(dst_bits))),
        Op::Pack { part, count } => Some(part.bits() * u32::from(count)),
        _ => None,
    }
}

/// The pattern of what `inst` writes, from its operands'.
fn result(inst: &kir::Inst, state: &[ValuePattern], rows: bool) -> ValuePattern {
    let src = |o: &Operand| match *o {
        Operand::Reg(r) | Operand::NotReg(r) => state[r.index()],
        Operand::Special(s) => special(s, rows),
        Operand::None | Operand::Imm(_) | Operand::GlobalAddr(..) => Uniform,
    };
    let srcs = inst.srcs();
    let p = |i: usize| srcs.get(i).map_or(Uniform, src);
    let all = srcs.iter().map(src).max().unwrap_or(Uniform);
    // Uniform only if every operand is.
    let only_uniform = if all == Uniform { Uniform } else { Random };
    // A product: strided only where one factor is uniform.
    let product = |a: ValuePattern, b: ValuePattern| {
        if a != Uniform && b != Uniform {
            Random
        } else {
            a.max(b)
        }
    };
    match inst.op {
        // An address-space conversion adds a uniform window base (or nothing).
        Op::Mov(_) | Op::Cvta { .. } => p(0),
        Op::Cvt { dty, sty, .. } => {
            if dty.is_float() || sty.is_float() || dty.bits() < sty.bits() {
                only_uniform
            } else {
                p(0)
            }
        }
        Op::Arith { op, ty, .. } if !ty.is_float() && ty.bits() <= 64 && is_scalar_int(ty) => {
            match op {
                ArithOp::Add | ArithOp::Sub => p(0).max(p(1)),
                ArithOp::Neg | ArithOp::Not => p(0),
                ArithOp::MulLo | ArithOp::MulWide | ArithOp::Mul24Lo | ArithOp::Mul => {
                    product(p(0), p(1))
                }
                ArithOp::MadLo | ArithOp::MadWide | ArithOp::Mad24Lo => {
                    product(p(0), p(1)).max(p(2))
                }
                ArithOp::Shl => {
                    if p(1) == Uniform {
                        p(0)
                    } else {
                        Random
                    }
                }
                _ => only_uniform,
            }
        }
        Op::Selp(_) => {
            if p(2) == Uniform {
                p(0).max(p(1))
            } else {
                Random
            }
        }
        Op::Ld { space, .. } => match space {
            Space::Param | Space::Const => only_uniform,
            _ => Random,
        },
        // One result for the whole warp.
        Op::Vote { .. } | Op::Activemask | Op::Redux { .. } => Uniform,
        Op::Match { .. } | Op::Elect => Random,
        ref op if crate::uniformity::divergent_op(op) => Random,
        _ => only_uniform,
    }
}

/// Whether `ty` is a plain integer (or untyped bits) type, not a packed pair or predicate.
fn is_scalar_int(ty: kir::Ty) -> bool {
    use kir::Ty::*;
    matches!(
        ty,
        B8 | B16 | B32 | B64 | U8 | U16 | U32 | U64 | S8 | S16 | S32 | S64
    )
}

/// The pattern of a special register: those the uniformity analysis calls divergent are
/// random, but for the lane and thread indices where groups follow rows.
fn special(s: Special, rows: bool) -> ValuePattern {
    match s {
        Special::LaneId => Strided,
        Special::Tid(0) if rows => Strided,
        Special::Tid(_) if rows => Uniform,
        s if crate::uniformity::divergent_special(s) => Random,
        _ => Uniform,
    }
}
