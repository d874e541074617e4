//! Register classes, value widths and context sizes.
//!
//! The papers size a context in 32-bit registers per thread (papers/ji-ctxback §V-A counts
//! vector registers, scalar registers and shared memory per warp). After register allocation
//! (see the `regalloc` crate docs) a 64-bit value lives in the aligned pair `R2k, R2k+1`
//! while instructions name only `R2k`; the odd half is never named while the pair is live.
//! So the width of a live register is a property of the *value* it holds, found here by a
//! forward dataflow over the definitions that may reach each instruction:
//!
//! ```text
//! wide_out(i) = (wide_in(i) − narrow unguarded defs(i)) ∪ wide defs(i)
//! wide_in(i)  = ∪ wide_out(p) over the predecessors p of i
//! ```
//!
//! A definition is wide when the operation writes more than 32 bits (`mul.wide`, `ld.u64`,
//! `cvt.u64.u32`, ...) or, before allocation, when its virtual register is 64 bits. A
//! register that may be wide counts as two 32-bit registers.
//!
//! A wide definition of `R2k` also overwrites `R2k+1` on real hardware: for CTXBack, which
//! must know every register an instruction overwrites, [`Widths::partner`] names that odd
//! half. Kernels over virtual registers (names starting with `%`) have no pairs.

use kir::inst::{ArithOp, Op};
use kir::{Id, Inst, InstId, Kernel, Reg, Ty};

use crate::regset::RegSet;

/// Which register file a register belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RegClass {
    /// A per-thread 32-bit general-purpose register (`R0..`, or a virtual register).
    Vector,
    /// A per-warp scalar register (`UR0..`, NVIDIA uniform registers; AMD SGPRs).
    Uniform,
    /// A per-thread predicate (`P0..`).
    Predicate,
}

/// The class of register `r` of `kernel`: predicates by type, uniform registers by their
/// allocated name (`UR…`, see `regalloc`), everything else is a vector register.
pub fn reg_class(kernel: &Kernel, r: Reg) -> RegClass {
    let info = &kernel.regs[r];
    if info.ty == Ty::Pred {
        RegClass::Predicate
    } else if info.name.starts_with("UR") {
        RegClass::Uniform
    } else {
        RegClass::Vector
    }
}

/// Bits an operation writes into destination slot `slot` (predicates report 1).
pub fn def_bits(inst: &Inst, slot: usize) -> u32 {
    match inst.op {
        Op::Mov(ty) => ty.bits(),
        Op::Pack { part, count } => part.bits() * count as u32,
        Op::Unpack { part, .. } => part.bits(),
        Op::Arith { op, ty, .. } => match op {
            ArithOp::MulWide | ArithOp::MadWide => 2 * ty.bits(),
            ArithOp::Popc | ArithOp::Clz => 32,
            _ => ty.bits(),
        },
        Op::Set { dty, .. } | Op::Slct { dty, .. } | Op::Cvt { dty, .. } => dty.bits(),
        Op::Selp(ty) | Op::Atom { ty, .. } | Op::Cvta { ty, .. } => ty.bits(),
        Op::Ld { dst_bits, .. } => dst_bits as u32,
        Op::Mma { d, .. } => d.reg_ty().bits(),
        Op::Setp { .. } | Op::Testp { .. } | Op::IsSpace { .. } => 1,
        Op::Shfl { .. } if slot == 1 => 1,
        _ => 32,
    }
}

/// Size of a register context.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ContextSize {
    /// 32-bit vector registers per thread (a 64-bit value counts 2).
    pub vector: u32,
    /// 32-bit uniform (scalar) registers per warp.
    pub uniform: u32,
    /// Predicate registers per thread.
    pub predicates: u32,
}

impl ContextSize {
    /// Bytes a warp of `warp_size` threads must move to save this context: 4 bytes per
    /// thread per vector register, 4 per uniform register, one bit per thread per predicate.
    pub fn bytes_per_warp(self, warp_size: u32) -> u64 {
        self.vector as u64 * 4 * warp_size as u64
            + self.uniform as u64 * 4
            + self.predicates as u64 * warp_size.div_ceil(8) as u64
    }

    /// 32-bit registers (vector and uniform), the unit of papers/ji-ctxback Fig. 7.
    pub fn words(self) -> u32 {
        self.vector + self.uniform
    }

    pub(crate) fn add(&mut self, class: RegClass, wide: bool) {
        let w = if wide { 2 } else { 1 };
        match class {
            RegClass::Vector => self.vector += w,
            RegClass::Uniform => self.uniform += w,
            RegClass::Predicate => self.predicates += 1,
        }
    }
}

/// Value widths at every instruction (see the module docs).
#[derive(Clone, Debug, Default)]
pub struct Widths {
    /// `n_insts + 1` entries: registers that may hold a 64-bit value before each instruction.
    wide_in: Vec<RegSet>,
    classes: Vec<RegClass>,
    /// Registers declared 64 bits wide (virtual registers only; physical ones are `.b32`).
    declared_wide: Vec<bool>,
    /// The odd half of each even register of a pair (allocated kernels).
    partners: Vec<Option<Reg>>,
}

/// `(file prefix, number)` of an allocated register name: `R12` → `("R", 12)`.
fn file_number(name: &str) -> Option<(&str, u32)> {
    let digits = name.find(|c: char| c.is_ascii_digit())?;
    let (prefix, n) = name.split_at(digits);
    Some((prefix, n.parse().ok()?))
}

impl Widths {
    /// Computes the widths of `kernel`.
    pub fn compute(kernel: &Kernel) -> Self {
        let n = kernel.insts.len();
        let nr = kernel.regs.len();
        let paired = kernel
            .regs
            .values()
            .all(|r| !r.name.contains('%') && !r.name.contains("::"));
        let classes: Vec<RegClass> = kernel.regs.ids().map(|r| reg_class(kernel, r)).collect();
        // Pairs are numbered within their file (`R2k, R2k+1`, `UR2k, UR2k+1`), whatever the
        // registers' positions in `kernel.regs`.
        let partners = kernel
            .regs
            .ids()
            .map(|r| {
                let next = Reg::new(r.index() + 1);
                let (file, n) = file_number(&kernel.regs[r].name)?;
                let (file2, n2) = file_number(&kernel.regs.get(next)?.name)?;
                (paired
                    && n.is_multiple_of(2)
                    && file == file2
                    && n2 == n + 1
                    && classes[r.index()] != RegClass::Predicate)
                    .then_some(next)
            })
            .collect();
        let wide_def = |inst: &Inst, slot: usize, d: Reg| {
            classes[d.index()] != RegClass::Predicate
                && (def_bits(inst, slot) > 32 || kernel.regs[d].ty.bits() > 32)
        };
        let cfg = &kernel.cfg;
        let nb = cfg.blocks.len();
        let mut block_in = vec![RegSet::with_capacity(nr); nb];
        let mut changed = nb > 0;
        let transfer = |set: &mut RegSet, inst: &Inst| {
            for (slot, d) in inst.dsts().iter().enumerate() {
                let Some(d) = *d else { continue };
                if wide_def(inst, slot, d) {
                    set.insert(d);
                } else if inst.guard.is_none() {
                    set.remove(d);
                }
            }
        };
        let mut cur = RegSet::with_capacity(nr);
        while changed {
            changed = false;
            for (b, block) in cfg.blocks.iter() {
                cur.copy_from(&block_in[b.index()]);
                for pc in block.start.index()..block.end.index() {
                    transfer(&mut cur, &kernel.insts[InstId::new(pc)]);
                }
                for &s in &block.succs {
                    changed |= block_in[s.index()].union_with(&cur);
                }
            }
        }
        let mut wide_in = vec![RegSet::with_capacity(nr); n + 1];
        for (b, block) in cfg.blocks.iter() {
            cur.copy_from(&block_in[b.index()]);
            let range = block.start.index()..block.end.index();
            for (pc, slot) in range.clone().zip(&mut wide_in[range]) {
                slot.copy_from(&cur);
                transfer(&mut cur, &kernel.insts[InstId::new(pc)]);
            }
        }
        Widths {
            wide_in,
            declared_wide: kernel.regs.values().map(|r| r.ty.bits() > 32).collect(),
            classes,
            partners,
        }
    }

    /// Whether `r` may hold a 64-bit value just before `pc` executes.
    pub fn wide_before(&self, pc: InstId, r: Reg) -> bool {
        self.wide_in[pc.index()].contains(r)
    }

    /// Whether destination `slot` of `inst`, register `d`, receives a 64-bit value.
    pub fn def_is_wide(&self, kernel: &Kernel, inst: &Inst, slot: usize, d: Reg) -> bool {
        self.classes[d.index()] != RegClass::Predicate
            && (def_bits(inst, slot) > 32 || kernel.regs[d].ty.bits() > 32)
    }

    /// The odd half `R2k+1` that a 64-bit write to `R2k` also overwrites (allocated kernels).
    pub fn partner(&self, r: Reg) -> Option<Reg> {
        self.partners[r.index()]
    }

    pub fn class(&self, r: Reg) -> RegClass {
        self.classes[r.index()]
    }

    /// The size of the context `set` just before `pc`.
    pub fn size_at(&self, pc: InstId, set: &RegSet) -> ContextSize {
        self.size_of(pc, set.iter())
    }

    /// The size of the context `regs` just before `pc`.
    pub fn size_of(&self, pc: InstId, regs: impl IntoIterator<Item = Reg>) -> ContextSize {
        let mut c = ContextSize::default();
        for r in regs {
            c.add(self.class(r), self.wide_before(pc, r));
        }
        c
    }

    /// The size of every register of the kernel (BASELINE, papers/ji-ctxback §V: every
    /// allocated register is saved). Each register counts once: pairs are two registers.
    pub fn all_registers(&self) -> ContextSize {
        let mut c = ContextSize::default();
        for (&class, &wide) in self.classes.iter().zip(&self.declared_wide) {
            c.add(class, wide);
        }
        c
    }
}
