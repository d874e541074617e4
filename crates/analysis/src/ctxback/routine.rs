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
//! Uniform registers hold one value per warp, so the routines keep them once per warp, in
//! the warp's own shared memory (`st.shared [%warp_smem + slot]`, as OSRB's backups are
//! kept), which the TB's saved shared memory carries: 8 bytes per uniform register of the
//! kernel per warp ([`Routines::warp_smem_base`], after the kernel's own
//! [`Kernel::warp_smem`] bytes), instead of 4 bytes per lane. Every routine uses the same
//! slot for a register: the lane groups of a diverged warp run different routines one
//! after another, and all store the same value there (a uniform register is only written
//! while the whole warp runs). The exception is a uniform register the preemption routine
//! reverts: a group then saves the flashback point's version, which another group may not,
//! so it goes to local memory per lane as the others do.
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
//! **Sharing** (§IV-A). Instructions with the same flashback point usually save the same
//! registers, and their preemption routines differ only in the reverting part, which for an
//! earlier instruction is a suffix of a later one's (reverts run latest first). So routines
//! are stored once per distinct code, and a routine that is a *suffix* of a stored one is not
//! stored at all: the instruction enters the longer routine at an offset ([`RoutineEntry`]).
//! The same holds for resume routines. Sharing is by identical code only, so an entry at an
//! offset runs exactly the instructions its own routine would.
//!
//! **CTXBack+CS-Defer** ([`generate_combined_routines`], §IV-C). Where the combination
//! defers, the preemption routine runs copies of the deferred kernel instructions, then the
//! saves of a plain switch at the deferral's target ([`CtxBack::kept`]), then `exit`; the
//! resume routine reloads them and jumps to the target ([`DeferEntry`]). Only the warp's
//! top lane group may defer: parked lanes use the CTXBack routines of their PC.
//!
//! **CS-Defer alone** ([`generate_cs_defer_routines`]) is generated the same way, with a
//! plain switch of the live-in registers in place of every flashback and CS-Defer's own
//! choice ([`CtxBack::cs_defer`]) as the deferral.
//!
//! **Installing.** [`Routines::install`] appends the routines after the kernel's last
//! instruction (the routines' own code region, §IV-A: "transferred to the device memory with
//! the kernel code"), rebuilds the control-flow graph over the whole code and grows the local
//! size by the context area, giving a kernel the functional core runs as is: a mechanism
//! redirects a warp to [`InstalledRoutines::preempt_entry`] and, on resume, starts it at
//! [`InstalledRoutines::resume_entry`]. `crates/switchyard/tests/ctxback_routines_execute.rs`
//! executes every routine that way.
//!
//! **Divergent warps: one routine per lane group.** A routine rebuilds the context of the
//! lanes that run it. A diverged warp's lanes wait at several PCs: the top SIMT stack entry's
//! at the preempted instruction, the others parked on the stack (the pending side of a
//! divergent branch, or waiting at its reconvergence point), each lane at the PC of the
//! topmost entry that holds it. Every such group is in the state of a thread about to execute
//! its own PC, so the mechanism saves it by running *the routines of that PC* under the
//! group's mask: the preemption routines one group after another (each lane stores only into
//! its own context area), and at resume each group's resume routine under a one-entry stack
//! whose reconvergence PC is the group's PC (the routine's jump brings the lanes there,
//! and the entry pops), before restoring the warp's SIMT stack, which the mechanism saves
//! as it saves the PC. Parked PCs are block starts (branch targets, branch fall-throughs,
//! reconvergence points), where the flashback point is the PC itself: their routines are
//! plain saves of the live-in. The union of [`crate::Liveness::divergent_live`] is what these
//! routines save in total. `crates/switchyard/tests/ctxback_routines_execute.rs` preempts
//! diverged warps this way and checks every group's live registers.

use std::collections::HashMap;
use std::ops::Range;

use kir::cfg::Cfg;
use kir::inst::{Op, Operand, Space};
use kir::{Id, IdVec, Inst, InstId, Kernel, Reg, Ty};
use thiserror::Error;

use super::defer::next_on_path;
use super::flashback::{Flashback, ResumeStep, SavedReg, Version};
use super::revert::revert_of;
use super::widths::{ContextSize, RegClass, Widths};
use super::CtxBack;
use crate::liveness::Liveness;

/// Why routines could not be generated.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum RoutineError {
    /// A predicate must be saved but the kernel has no vector register to move it through.
    #[error("kernel `{kernel}`: {pc} saves predicates but the kernel has no vector register")]
    NoScratchRegister { kernel: String, pc: InstId },
    /// A planned revert is not in the reversible table (an analysis bug).
    #[error("kernel `{kernel}`: {pc} is not reversible")]
    NotReversible { kernel: String, pc: InstId },
    /// A planned copy back names an instruction that is not a backup copy (an analysis bug).
    #[error("kernel `{kernel}`: {pc} is not a backup copy")]
    NotACopy { kernel: String, pc: InstId },
}

/// The routines of one kernel.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Routines {
    /// Byte offset of the context area in each thread's local memory.
    pub context_base: u32,
    /// Bytes of the context area (the largest routine's).
    pub context_bytes: u32,
    /// Byte offset, in each warp's own shared memory ([`Kernel::warp_smem`]), where the
    /// routines keep uniform registers once per warp (8 bytes each, every routine the same
    /// slot), and the bytes they take there (0 when no routine keeps one there).
    pub warp_smem_base: u32,
    pub warp_smem_bytes: u32,
    /// Stored preemption routines: none is a suffix of another.
    pub preempt: Vec<Vec<Inst>>,
    /// Stored resume routines: none is a suffix of another.
    pub resume: Vec<Vec<Inst>>,
    /// For every instruction of the kernel, where its preemption routine starts.
    pub preempt_of: Vec<RoutineEntry>,
    /// For every instruction of the kernel, where its resume routine starts.
    pub resume_of: Vec<RoutineEntry>,
    /// CTXBack+CS-Defer ([`generate_combined_routines`]) and CS-Defer
    /// ([`generate_cs_defer_routines`]): for every instruction, its CS-Defer routines where
    /// the technique defers there. Empty for CTXBack alone.
    pub deferred: Vec<Option<DeferEntry>>,
}

/// A CS-Defer switch (ji-ctxback §IV-C): the preemption routine first runs the deferred
/// instructions (copies of the kernel's, along the statically known path), then saves the
/// context of `target`; the resume routine reloads it and jumps to `target`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeferEntry {
    /// Where the context is saved and the warp resumes.
    pub target: InstId,
    /// Copies of kernel instructions the preemption routine runs before it saves (the
    /// deferred instructions, unguarded branches left out).
    pub deferred: u32,
    pub preempt: RoutineEntry,
    pub resume: RoutineEntry,
}

/// Where an instruction's routine starts: a stored routine, entered `offset` instructions in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RoutineEntry {
    pub routine: u32,
    pub offset: u32,
}

impl Routines {
    /// The preemption routine of a warp preempted before `pc`, from its entry.
    pub fn preempt_code(&self, pc: InstId) -> &[Inst] {
        let e = self.preempt_of[pc.index()];
        &self.preempt[e.routine as usize][e.offset as usize..]
    }

    /// The resume routine of a warp preempted before `pc`, from its entry.
    pub fn resume_code(&self, pc: InstId) -> &[Inst] {
        let e = self.resume_of[pc.index()];
        &self.resume[e.routine as usize][e.offset as usize..]
    }
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

/// Where a saved register goes: a byte offset in the thread's local memory, or in the
/// warp's own shared memory (`warp`), and whether it is 64 bits wide.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Slot {
    offset: u32,
    wide: bool,
    warp: bool,
}

/// Each uniform register's slot in the warp's own shared memory, the same for every
/// routine of the kernel (8 bytes each, from [`warp_base`]), and the bytes they take.
fn warp_slots(kernel: &Kernel) -> (HashMap<Reg, u32>, u32) {
    let base = warp_base(kernel);
    let mut slots = HashMap::new();
    for r in kernel.regs.ids() {
        if super::widths::reg_class(kernel, r) == RegClass::Uniform {
            slots.insert(r, base + 8 * slots.len() as u32);
        }
    }
    let bytes = 8 * slots.len() as u32;
    (slots, bytes)
}

/// Where the routines' uniform registers start in each warp's own shared memory: after
/// what the kernel keeps there already (OSRB's backups), 8-byte aligned.
fn warp_base(kernel: &Kernel) -> u32 {
    kernel.warp_smem.div_ceil(8) * 8
}

/// Slots of a flashback's saved registers — local ones from `base` — and the local bytes
/// they take. A uniform register goes to its slot in `warp` (once per warp) unless the
/// preemption routine reverts it: then, as every other register, to local memory (each
/// lane group of a diverged warp may save a different version of it).
fn layout(
    kernel: &Kernel,
    fb: &Flashback,
    base: u32,
    warp: &HashMap<Reg, u32>,
) -> (HashMap<Reg, Slot>, u32) {
    let reverted: Vec<Reg> = fb
        .preempt_reverts
        .iter()
        .flat_map(|&pc| kernel.insts[pc].defs().collect::<Vec<_>>())
        .collect();
    let mut off = base;
    let mut slots = HashMap::new();
    let order = |wide: bool, class: RegClass| match (class, wide) {
        (RegClass::Predicate, _) => 2,
        (_, true) => 0,
        (_, false) => 1,
    };
    for rank in 0..3 {
        for s in fb.saved.iter().filter(|s| order(s.wide, s.class) == rank) {
            if s.class == RegClass::Uniform && !reverted.contains(&s.reg) {
                if let Some(&at) = warp.get(&s.reg) {
                    let slot = Slot {
                        offset: at,
                        wide: s.wide,
                        warp: true,
                    };
                    slots.insert(s.reg, slot);
                    continue;
                }
            }
            let slot = Slot {
                offset: off,
                wide: s.wide,
                warp: false,
            };
            slots.insert(s.reg, slot);
            off += if s.wide { 8 } else { 4 };
        }
    }
    (slots, off - base)
}

/// `st.shared` (`store`) or `ld.shared` of `r` at `[%warp_smem + offset]`.
fn warp_shared(store: bool, r: Reg, offset: u32, wide: bool, span: ptx::Span) -> Inst {
    let mut i = if store {
        Inst::warp_smem_store(offset as i32, r, span)
    } else {
        Inst::warp_smem_load(r, offset as i32, span)
    };
    if wide {
        match &mut i.op {
            Op::St { ty, .. } => *ty = Ty::B64,
            Op::Ld { ty, dst_bits, .. } => {
                *ty = Ty::B64;
                *dst_bits = 64;
            }
            _ => unreachable!("a shared store or load"),
        }
    }
    i
}

/// A save (`store`) or reload of `r` at its slot.
fn move_slot(store: bool, r: Reg, slot: Slot, span: ptx::Span) -> Inst {
    if slot.warp {
        warp_shared(store, r, slot.offset, slot.wide, span)
    } else {
        local(store, r, slot.offset, slot.wide, span)
    }
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
    let (slots, _) = layout(kernel, fb, base, &warp_slots(kernel).0);
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
        let slot = slots[&s.reg];
        if s.class == RegClass::Predicate {
            preds.push((s.reg, slot.offset));
        } else {
            out.push(move_slot(true, s.reg, slot, span));
        }
    }
    if !preds.is_empty() {
        let scratch = scratch_of(kernel).ok_or_else(|| RoutineError::NoScratchRegister {
            kernel: kernel.name.clone(),
            pc: fb.pc,
        })?;
        for (p, off) in preds {
            out.push(Inst::pred_to_word(scratch, p, span));
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
    let (slots, _) = layout(kernel, fb, base, &warp_slots(kernel).0);
    let class = |r: Reg| fb.saved.iter().find(|s| s.reg == r).map(|s| s.class);
    let mut out = Vec::new();
    for step in &fb.resume {
        match *step {
            ResumeStep::Load(r) => {
                let slot = slots[&r];
                if class(r) == Some(RegClass::Predicate) {
                    let scratch =
                        scratch_of(kernel).ok_or_else(|| RoutineError::NoScratchRegister {
                            kernel: kernel.name.clone(),
                            pc: fb.pc,
                        })?;
                    out.push(local(false, scratch, slot.offset, false, span));
                    out.push(Inst::word_to_pred(r, scratch, span));
                } else {
                    out.push(move_slot(false, r, slot, span));
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
            ResumeStep::CopyBack(c) => {
                // The planner checked the copy (`flashback::backup_copy`): swap its registers,
                // or load the word it stored into the warp's shared memory.
                let copy = &kernel.insts[c];
                let back = match (
                    copy.as_warp_smem_store(),
                    copy.op,
                    copy.dsts[0],
                    copy.srcs[0],
                ) {
                    (Some((offset, y)), ..) => Inst::warp_smem_load(y, offset, copy.span),
                    (None, Op::Mov(_), Some(x), Operand::Reg(y)) => {
                        let mut mov = copy.clone();
                        mov.dsts[0] = Some(y);
                        mov.srcs[0] = Operand::Reg(x);
                        mov
                    }
                    _ => {
                        return Err(RoutineError::NotACopy {
                            kernel: kernel.name.clone(),
                            pc: c,
                        })
                    }
                };
                out.push(back);
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

/// Stores `routines` (one per instruction) so that none is stored twice or as a suffix of
/// another; each instruction's entry.
fn share(routines: Vec<Vec<Inst>>) -> (Vec<Vec<Inst>>, Vec<RoutineEntry>) {
    let mut order: Vec<usize> = (0..routines.len()).collect();
    // Longest first, so that a host is stored before the routines it contains.
    order.sort_by_key(|&i| (std::cmp::Reverse(routines[i].len()), i));
    let mut stored: Vec<Vec<Inst>> = Vec::new();
    let mut entries = vec![
        RoutineEntry {
            routine: 0,
            offset: 0
        };
        routines.len()
    ];
    for i in order {
        let r = &routines[i];
        entries[i] = match stored.iter().position(|h| h.ends_with(r)) {
            Some(h) => RoutineEntry {
                routine: h as u32,
                offset: (stored[h].len() - r.len()) as u32,
            },
            None => {
                stored.push(r.clone());
                RoutineEntry {
                    routine: stored.len() as u32 - 1,
                    offset: 0,
                }
            }
        };
    }
    (stored, entries)
}

/// Which routines [`generate`] makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// CTXBack's flashbacks.
    CtxBack,
    /// CTXBack's flashbacks, and CS-Defer switches where the combination defers.
    Combined,
    /// Plain switches of the live-in, and CS-Defer switches where CS-Defer defers.
    CsDefer,
}

/// Generates the CTXBack routines of every instruction of `kernel` from its analysis.
pub fn generate_routines(kernel: &Kernel, ctx: &CtxBack) -> Result<Routines, RoutineError> {
    generate(kernel, ctx, Mode::CtxBack)
}

/// Generates the routines of CS-Defer alone (ji-ctxback §II-B and §V, where CS-Defer "needs
/// to execute the in-between instructions in the preemption routine"): for every instruction
/// a plain switch (save the live-in registers, reload them, jump back) in
/// [`Routines::preempt_of`] / [`Routines::resume_of`] — what parked lane groups and warps
/// waiting at a barrier take, since they must not run ahead — and, where
/// [`CtxBack::cs_defer`] defers (its target is not the instruction itself), a
/// [`DeferEntry`] whose preemption routine runs copies of the deferred instructions and then
/// saves the live-in of the target, and whose resume routine reloads it and jumps there.
/// Every save is of a live-in, so any mix of them resumes correctly.
pub fn generate_cs_defer_routines(
    kernel: &Kernel,
    ctx: &CtxBack,
) -> Result<Routines, RoutineError> {
    generate(kernel, ctx, Mode::CsDefer)
}

/// Generates the routines of CTXBack+CS-Defer (ji-ctxback §IV-C: "if CS-Defer provides
/// shorter preemption latency for an instruction, its dedicated routines are generated by
/// CS-Defer"): the CTXBack routines of every instruction, and [`Routines::deferred`] where
/// [`CtxBack::combined`] picks CS-Defer. A CS-Defer switch saves [`CtxBack::kept`] of its
/// target, so that the flashbacks after it hold however the warp was resumed.
///
/// The CTXBack routines stay available everywhere: a mechanism uses them for lanes parked on
/// the SIMT stack, which must not run ahead (see "Divergent warps" in the module docs).
pub fn generate_combined_routines(
    kernel: &Kernel,
    ctx: &CtxBack,
) -> Result<Routines, RoutineError> {
    generate(kernel, ctx, Mode::Combined)
}

/// The kernel instructions a warp runs from `pc` through `steps` steps of the statically
/// known path ([`next_on_path`]), unguarded branches left out (the copies run in a row); and
/// where the path arrives.
fn deferred_code(kernel: &Kernel, pc: InstId, steps: u32) -> (Vec<Inst>, InstId) {
    let mut out = Vec::new();
    let mut j = pc;
    for _ in 0..steps {
        let inst = &kernel.insts[j];
        if !matches!(inst.op, Op::Bra { .. }) {
            out.push(inst.clone());
        }
        j = next_on_path(kernel, j).expect("a deferral's path goes on for its steps");
    }
    (out, j)
}

/// A plain switch before `target` saving `saved`: reload them (predicates first, through
/// the scratch register), jump back.
fn plain_switch(target: InstId, saved: Vec<SavedReg>, context: ContextSize) -> Flashback {
    let mut resume: Vec<ResumeStep> = saved
        .iter()
        .filter(|s| s.class == RegClass::Predicate)
        .chain(saved.iter().filter(|s| s.class != RegClass::Predicate))
        .map(|s| ResumeStep::Load(s.reg))
        .collect();
    resume.push(ResumeStep::Jump(target));
    Flashback {
        pc: target,
        point: target,
        saved,
        preempt_reverts: Vec::new(),
        resume,
        context,
        cost: Default::default(),
        restored: Vec::new(),
    }
}

fn generate(kernel: &Kernel, ctx: &CtxBack, mode: Mode) -> Result<Routines, RoutineError> {
    let base = kernel.local_size.div_ceil(8) * 8;
    let mut out = Routines {
        context_base: base,
        ..Routines::default()
    };
    // CS-Defer alone saves live-ins: a plain switch at every instruction.
    let live_switch = (mode == Mode::CsDefer).then(|| {
        let mut live = Liveness::new();
        live.compute(kernel);
        let widths = Widths::compute(kernel);
        move |at: InstId| {
            let set = live.live_in(at);
            let saved = set
                .iter()
                .map(|reg| SavedReg {
                    reg,
                    version: Version::Initial,
                    wide: widths.wide_before(at, reg),
                    class: widths.class(reg),
                })
                .collect();
            plain_switch(at, saved, widths.size_at(at, set))
        }
    });
    let plains: Vec<Flashback>;
    let switches = match &live_switch {
        Some(f) => {
            plains = kernel.insts.ids().map(f).collect();
            &plains[..]
        }
        None => ctx.flashbacks(),
    };
    let (mut pre, mut res) = (Vec::new(), Vec::new());
    let warp = warp_slots(kernel);
    out.warp_smem_base = warp_base(kernel);
    for fb in switches {
        let (slots, bytes) = layout(kernel, fb, base, &warp.0);
        out.context_bytes = out.context_bytes.max(bytes);
        if slots.values().any(|s| s.warp) {
            out.warp_smem_bytes = warp.1;
        }
        pre.push(preempt_routine(kernel, fb, base)?);
        res.push(resume_routine(kernel, fb, base)?);
    }
    let n = pre.len();
    let mut defers = Vec::new();
    if mode != Mode::CtxBack {
        for pc in kernel.insts.ids() {
            let (d, plain) = match &live_switch {
                Some(f) => {
                    let d = ctx.cs_defer(pc);
                    if d.target == pc {
                        continue;
                    }
                    (d, f(d.target))
                }
                None => {
                    if ctx.combined(pc) != super::Technique::CsDefer {
                        continue;
                    }
                    // A plain switch at the target saving the kept registers.
                    let d = ctx.combined_deferral(pc);
                    (
                        d,
                        plain_switch(d.target, ctx.kept(d.target).to_vec(), d.context),
                    )
                }
            };
            let (mut code, at) = deferred_code(kernel, pc, d.deferred);
            debug_assert_eq!(at, d.target, "the deferral's path");
            let (slots, bytes) = layout(kernel, &plain, base, &warp.0);
            out.context_bytes = out.context_bytes.max(bytes);
            if slots.values().any(|s| s.warp) {
                out.warp_smem_bytes = warp.1;
            }
            let ran = code.len() as u32;
            code.extend(preempt_routine(kernel, &plain, base)?);
            pre.push(code);
            res.push(resume_routine(kernel, &plain, base)?);
            defers.push((pc, d.target, ran));
        }
    }
    let (preempt, mut pre_of) = share(pre);
    let (resume, mut res_of) = share(res);
    out.preempt = preempt;
    out.resume = resume;
    if mode != Mode::CtxBack {
        out.deferred = vec![None; n];
        for (k, (pc, target, deferred)) in defers.into_iter().enumerate() {
            out.deferred[pc.index()] = Some(DeferEntry {
                target,
                deferred,
                preempt: pre_of[n + k],
                resume: res_of[n + k],
            });
        }
    }
    pre_of.truncate(n);
    res_of.truncate(n);
    out.preempt_of = pre_of;
    out.resume_of = res_of;
    Ok(out)
}

/// A kernel with its routines appended (see [`Routines::install`]).
#[derive(Clone, Debug)]
pub struct InstalledRoutines {
    /// The kernel's instructions, then every preemption routine, then every resume routine;
    /// its `cfg` covers all of them and its `local_size` includes the context area.
    pub kernel: Kernel,
    /// Instructions of the original kernel: program counters below it are the kernel's own.
    pub kernel_len: u32,
    /// The code of each distinct preemption routine (indexed like [`Routines::preempt`]).
    pub preempt: Vec<Range<InstId>>,
    /// The code of each distinct resume routine (indexed like [`Routines::resume`]).
    pub resume: Vec<Range<InstId>>,
    preempt_of: Vec<RoutineEntry>,
    resume_of: Vec<RoutineEntry>,
    deferred: Vec<Option<DeferEntry>>,
}

/// An installed CS-Defer switch ([`DeferEntry`] with its code placed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstalledDefer {
    pub target: InstId,
    pub deferred: u32,
    pub preempt: Range<InstId>,
    pub resume: Range<InstId>,
}

fn entered(code: &[Range<InstId>], e: RoutineEntry) -> Range<InstId> {
    let r = &code[e.routine as usize];
    InstId(r.start.0 + e.offset)..r.end
}

impl InstalledRoutines {
    /// The code of the preemption routine of a warp preempted before kernel instruction `pc`,
    /// from its entry (the first instruction) to the end of the stored routine it shares.
    pub fn preempt_code(&self, pc: InstId) -> Range<InstId> {
        entered(&self.preempt, self.preempt_of[pc.index()])
    }

    /// The code of the resume routine of a warp preempted before `pc`, from its entry.
    pub fn resume_code(&self, pc: InstId) -> Range<InstId> {
        entered(&self.resume, self.resume_of[pc.index()])
    }

    /// The CS-Defer switch for a warp preempted before `pc`, if the routines defer there
    /// ([`generate_combined_routines`], [`generate_cs_defer_routines`]).
    pub fn deferral(&self, pc: InstId) -> Option<InstalledDefer> {
        let d = self.deferred.get(pc.index()).copied().flatten()?;
        Some(InstalledDefer {
            target: d.target,
            deferred: d.deferred,
            preempt: entered(&self.preempt, d.preempt),
            resume: entered(&self.resume, d.resume),
        })
    }

    /// Where a warp preempted before `pc` jumps to save its context.
    pub fn preempt_entry(&self, pc: InstId) -> InstId {
        self.preempt_code(pc).start
    }

    /// Where a warp preempted before `pc` starts when it resumes.
    pub fn resume_entry(&self, pc: InstId) -> InstId {
        self.resume_code(pc).start
    }
}

impl Routines {
    /// `kernel` (the one the routines were generated for) with the routines appended as a
    /// code region of their own.
    ///
    /// The routines' branch targets are kernel program counters already, so their code is
    /// copied unchanged. The CFG is rebuilt over the whole code: the routines are unreachable
    /// from the kernel's entry, so they change no post-dominator of the kernel's blocks, and
    /// every kernel branch reconverges where it did — except that "the virtual exit" is now
    /// one past the *last routine* instruction (`Cfg::reconvergence` encodes it as the code
    /// length, which must not name the first routine instruction, or a warp diverged at such a
    /// branch would pop its stack entry on entering that routine). A resume routine's jump
    /// into the middle of a kernel block splits that block in the new CFG; the split moves
    /// no branch's reconvergence point either (the new edge comes from unreachable code, and
    /// a block's first half post-dominates whatever the whole block did).
    ///
    /// Each thread's local memory grows to hold the context area
    /// (`context_base + context_bytes`).
    ///
    /// # Panics
    ///
    /// If `kernel` is not the one the routines were generated for (a different length).
    pub fn install(&self, kernel: &Kernel) -> InstalledRoutines {
        let n = kernel.insts.len();
        assert_eq!(
            self.preempt_of.len(),
            n,
            "routines of another kernel installed into `{}`",
            kernel.name
        );
        let mut insts: Vec<Inst> = kernel.insts.values().cloned().collect();
        let place = |routines: &[Vec<Inst>], insts: &mut Vec<Inst>| -> Vec<Range<InstId>> {
            routines
                .iter()
                .map(|r| {
                    let start = InstId(insts.len() as u32);
                    insts.extend(r.iter().cloned());
                    start..InstId(insts.len() as u32)
                })
                .collect()
        };
        let preempt = place(&self.preempt, &mut insts);
        let resume = place(&self.resume, &mut insts);
        debug_assert!(insts[n..].iter().all(|i| match i.op {
            Op::Bra { target, .. } => target.index() < n,
            _ => true,
        }));
        let insts = IdVec::from_vec(insts);
        let cfg = Cfg::build(&insts);
        debug_assert!(kernel.insts.iter().all(|(pc, i)| {
            let (old, new) = (
                kernel.cfg.reconvergence[pc.index()],
                cfg.reconvergence[pc.index()],
            );
            !matches!(i.op, Op::Bra { .. })
                || old == new
                || (old.index() == n && new.index() == insts.len())
        }));
        let mut out = kernel.clone();
        out.insts = insts;
        out.cfg = cfg;
        out.local_size = out.local_size.max(self.context_base + self.context_bytes);
        if self.warp_smem_bytes > 0 {
            out.warp_smem = out
                .warp_smem
                .max(self.warp_smem_base + self.warp_smem_bytes);
        }
        InstalledRoutines {
            kernel: out,
            kernel_len: n as u32,
            preempt,
            resume,
            preempt_of: self.preempt_of.clone(),
            resume_of: self.resume_of.clone(),
            deferred: self.deferred.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ctxback::{CtxBack, CtxBackConfig};
    use crate::test_util::kernel;

    /// A divergent branch reconverging at the virtual exit, and a flashback whose resume
    /// routine jumps into the middle of a block.
    const BODY: &str = "
    .reg .b32 %r<6>;
    .reg .b64 %rd<2>;
    .reg .pred %p<2>;
    mov.u32 %r0, %tid.x;
    ld.param.u64 %rd0, [k_out];
    setp.lt.u32 %p0, %r0, 5;
    @%p0 bra DONE;
    add.u32 %r1, %r0, 7;
    xor.b32 %r2, %r1, %r0;
    mul.lo.u32 %r3, %r2, %r1;
    add.u32 %r1, %r1, %r3;
    st.global.u32 [%rd0], %r1;
    exit;
DONE:
    exit;
";

    #[test]
    fn install_appends_the_routines_and_keeps_reconvergence() {
        let k = kernel(BODY);
        let ctx = CtxBack::compute(&k, &CtxBackConfig::default());
        let r = generate_routines(&k, &ctx).expect("routines");
        let inst = r.install(&k);
        let n = k.insts.len();
        assert_eq!(inst.kernel_len as usize, n);
        let total: usize = r.preempt.iter().chain(&r.resume).map(Vec::len).sum();
        assert_eq!(inst.kernel.insts.len(), n + total);
        // The kernel's own code is untouched.
        for pc in k.insts.ids() {
            assert_eq!(inst.kernel.insts[pc], k.insts[pc]);
        }
        // Every routine lies after the kernel, where the kernel's routine index says.
        for pc in k.insts.ids() {
            let p = inst.preempt_code(pc);
            let code: Vec<&Inst> = (p.start.0..p.end.0)
                .map(|j| &inst.kernel.insts[InstId(j)])
                .collect();
            assert!(p.start.index() >= n);
            assert_eq!(code, r.preempt_code(pc).iter().collect::<Vec<_>>());
            assert!(matches!(code.last().unwrap().op, Op::Exit));
            let q = inst.resume_code(pc);
            assert!(q.start.index() >= n && q.start < q.end);
            assert_eq!(inst.resume_entry(pc), q.start);
            assert!(matches!(
                inst.kernel.insts[InstId(q.end.0 - 1)].op,
                Op::Bra { target, .. } if target <= pc
            ));
        }
        // Some resume routine jumps into the middle of a block, which the new CFG splits.
        let mid_block = |t: InstId| k.cfg.blocks[k.cfg.block_of[t.index()]].start != t;
        assert!(r.resume.iter().any(|q| matches!(
            q.last().unwrap().op,
            Op::Bra { target, .. } if mid_block(target)
        )));
        assert!(inst.kernel.cfg.blocks.len() > k.cfg.blocks.len() + r.preempt.len());
        // The branch at pc3 reconverges at the virtual exit: one past the new code, not the
        // first routine instruction.
        assert_eq!(k.cfg.reconvergence[3], InstId(n as u32));
        assert_eq!(
            inst.kernel.cfg.reconvergence[3],
            InstId(inst.kernel.insts.len() as u32)
        );
        assert_eq!(inst.kernel.cfg.block_of.len(), inst.kernel.insts.len());
        assert_eq!(inst.kernel.cfg.reconvergence.len(), inst.kernel.insts.len());
        assert_eq!(inst.kernel.local_size, r.context_base + r.context_bytes);
        assert!(r.context_bytes > 0);
    }

    #[test]
    fn cs_defer_routines_save_live_ins_and_defer_where_the_analysis_does() {
        let k = kernel(BODY);
        let ctx = CtxBack::compute(&k, &CtxBackConfig::default());
        let r = generate_cs_defer_routines(&k, &ctx).expect("routines");
        let inst = r.install(&k);
        let mut live = Liveness::new();
        live.compute(&k);
        let mut deferred = 0;
        for pc in k.insts.ids() {
            // The plain switch: one store per live-in register, then `exit`; its resume
            // jumps back to `pc`.
            let stores = |code: Range<InstId>| {
                (code.start.0..code.end.0)
                    .filter(|&j| {
                        matches!(
                            inst.kernel.insts[InstId(j)].op,
                            Op::St {
                                space: Space::Local,
                                ..
                            }
                        )
                    })
                    .count()
            };
            assert_eq!(
                stores(inst.preempt_code(pc)),
                live.live_in(pc).len(),
                "{pc}"
            );
            let q = inst.resume_code(pc);
            assert!(matches!(
                inst.kernel.insts[InstId(q.end.0 - 1)].op,
                Op::Bra { target, .. } if target == pc
            ));
            let d = ctx.cs_defer(pc);
            match inst.deferral(pc) {
                Some(e) => {
                    deferred += 1;
                    assert!(d.target != pc && e.target == d.target, "{pc}");
                    // The copies of the deferred instructions, then the target's saves.
                    let copies = e.preempt.start.0 + e.deferred;
                    assert_eq!(
                        stores(InstId(copies)..e.preempt.end),
                        live.live_in(d.target).len(),
                        "{pc}"
                    );
                    assert!(matches!(
                        inst.kernel.insts[InstId(e.resume.end.0 - 1)].op,
                        Op::Bra { target, .. } if target == d.target
                    ));
                }
                None => assert_eq!(d.target, pc, "{pc}"),
            }
        }
        assert!(deferred > 0, "CS-Defer defers somewhere in the kernel");
    }

    #[test]
    fn a_routine_that_is_a_suffix_of_another_enters_it_at_an_offset() {
        let span = ptx::Span::default();
        let st = |off: u32| local(true, Reg(0), off, false, span);
        let exit = Inst::new(Op::Exit, span);
        let long = vec![st(0), st(4), exit.clone()];
        let short = vec![st(4), exit.clone()];
        let other = vec![st(8), exit.clone()];
        let (stored, entries) = share(vec![
            short.clone(),
            long.clone(),
            other.clone(),
            long.clone(),
            vec![exit.clone()],
        ]);
        assert_eq!(stored, vec![long, other]);
        let at = |routine, offset| RoutineEntry { routine, offset };
        assert_eq!(
            entries,
            vec![at(0, 1), at(0, 0), at(1, 0), at(0, 0), at(0, 2)]
        );
    }
}
