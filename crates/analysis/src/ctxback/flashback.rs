//! Flashback points (papers/ji-ctxback §III-A–C, §III-E, Algorithms 1 and 2).
//!
//! A warp that receives the preemption signal before instruction `i` saves the context of a
//! preceding instruction `f` (its *flashback point*) instead of its own, and resumes by
//! restoring that context and re-executing part of `[f, i)`. Candidates are `f ≤ i` in the
//! same basic block (so the path from `f` to `i` is known statically), after the last
//! side-effecting instruction before `i` (`st`, `atom`, `red`, `bar`: the idempotent region,
//! §III-E). `f = i` is always a candidate: it is LIVE (save `live_in(i)`).
//!
//! # Values and how each is restored
//!
//! Inside the window `[f, i)` every register `r` has *versions*: its value at `f`
//! (`Initial`) and the value written by each definition of `r` in the window (`Def(pc)`). A
//! 64-bit write to `R2k` also writes `R2k+1` (see `widths.rs`). When the signal arrives the
//! registers hold their *last* versions. The goal is to rebuild, at resume, the last version
//! of every register of `live_in(i)` (`R_cur`). A needed version `(r, v)` can be:
//!
//! 1. **re-executed** (`v = Def(j)`): `j` is re-executable (no memory side effect, not a
//!    volatile or unstable load, no `%clock`/`%smid`/`%warpid` read) and every register `j`
//!    reads (sources, guard, and for a guarded `j` the old destination, which the lanes with
//!    a false guard keep) is itself restorable at its version current at `j`;
//! 2. **saved** by the preemption routine and reloaded: possible when `(r, v)` is the last
//!    version (the relaxed condition, §III-B, Fig. 2), or when reverting the later
//!    definitions of `r` *at preemption* gives it back (§III-C, Fig. 3); a register is saved
//!    in one version only;
//! 3. **reverted at resume** (Algorithm 2, lines 10–13, Fig. 4): the next definition `d` of
//!    `r` is reversible (`revert.rs`), and `(r, Def(d))` and the other operands of `d` at `d`
//!    are restorable.
//!
//! The choice follows the paper's preferences: re-execution first (an ALU instruction is far
//! cheaper than two memory accesses, §III-B), then saving, then reverting at resume. A
//! preemption-time revert is used whenever its operands are still in the registers at `i`
//! (their last versions): it costs one ALU instruction and never adds a register to the
//! context, while reverting at resume needs its operands restored first (Alg. 2, line 19's
//! `MIN_COST` resolved this way; it reproduces Figs. 3, 4 and 6).
//!
//! **The search** is the paper's hash-map procedure (§III-E) written as a demand-driven,
//! memoised resolution from the targets `R_cur`: a version is resolved once, a version that
//! is being resolved counts as unavailable (no circular justification, so reverting `d` to
//! re-execute `d` is impossible), and a failed alternative is rolled back. Only versions that
//! are actually needed are restored — a result that nothing needed reads is not (the paper's
//! condition asks every live-out result of `[f, i)` to be restorable; ours is the demand-driven
//! refinement, which admits every flashback point the paper admits with the same context).
//!
//! # The resume schedule, and its check
//!
//! 1. *loads*: predicates and every saved register needed before its own definition point;
//! 2. *recovery*: each revert-at-resume, latest first, after producing its operands (this is
//!    where Fig. 6 re-executes `I1` early and places `I0` after `I2⁻¹`);
//! 3. *replay* in program order: re-execute the needed instructions; where a saved register
//!    received its saved value (a reload, Fig. 2), re-execute instead if its inputs happen to
//!    be present (cheaper), else load it;
//! 4. the longest suffix that re-executes `[p, i)` verbatim becomes `jump p` into the kernel
//!    (`JUMP I3` in Fig. 2c), otherwise the routine ends with `jump i`.
//!
//! The schedule is simulated symbolically — every step checks that its input registers hold
//! the versions it needs, and at the end every register of `R_cur` must hold its last version.
//! A candidate whose schedule fails the check is dropped, so an imperfect plan can only cost
//! context, never correctness.
//!
//! # Repeated preemption
//!
//! The paper's conditions (§III-A–C) read the register file at `i` as if it held the last
//! value of *every* register: the context of `f` "is still in the registers", and a
//! preemption-time revert reads its operands there. That holds on a warp's first preemption,
//! but a warp that has been preempted and resumed before holds only what that resume routine
//! rebuilt — the live registers of where it resumed, plus whatever the routine happened to
//! recompute — and the rest is garbage (or an older version: a resume routine that loads
//! `Initial` and never re-executes the later definition leaves that older value). A second
//! preemption that saved such a register, or reverted with it, restored a wrong context
//! (found by executing the routines: `crates/switchyard/tests/ctxback_routines_execute.rs`,
//! and since checked symbolically by `tests/ctxback_suite.rs`). So:
//!
//! * the preemption routine of `i` reads (saves, reverts, uses as a revert operand) only
//!   registers that hold their last version at `i` whatever happened before (`Reliable`:
//!   `N(i)`). At a block's first instruction that is `live_in(i)`; past an instruction `j`,
//!   it is `G(j) = N(j) ∩ restored(j)` — a warp reaches `j` by running or by `j`'s resume
//!   routine, which rebuilds [`Flashback::restored`] only — updated by `j`'s own results
//!   (all of them if `j` is unguarded, else only those already held: skipped lanes keep the
//!   old value);
//! * the resume routine of `i` rebuilds the last version of every register its preemption
//!   routine reads, not only `live_in(i)` (`Planner::plan` adds them to the targets), so a
//!   warp resumed at `i` and preempted again at once saves the same values.
//!
//! `live_in(i)` is always in both sets, so plain LIVE switching (`f = i`) is always
//! possible. On the suite the cost is a few resume-time re-executions and 14 fewer flashed
//! back instructions out of 8166; the average contexts do not change. `N(i)` assumes every
//! earlier resume in the block used these routines; a mechanism that resumes some
//! instructions otherwise (CS-Defer's LIVE switch at a later instruction, for one) rebuilds
//! only `live_in` there, and must recompute `N` accordingly.
//!
//! # What the mechanism must provide
//!
//! The preemption routine runs the reverts under the warp's active mask at `i`, then stores
//! with every lane enabled. The resume routine's loads run with every lane enabled, its
//! reverts and re-executions under the active mask the warp had at `i` (the same for the whole
//! window: it is one basic block). Registers that lanes parked elsewhere on the SIMT stack
//! need (`Liveness::divergent_live`) are outside this analysis and must be saved in full.
//! Global loads are re-executed only when the kernel is relaxed-idempotent under the
//! configured alias model (no store may alias a location the kernel reads); shared, local,
//! constant and parameter loads always are (no store of the warp lies in the window, and a
//! store by another warp between the load and a barrier would be a data race).
//!
//! With on-chip scalar register backup (§III-D, [`super::osrb`]) a fourth way is allowed,
//! after the other three: 4. **copied back** (`v` is the value a backup copy `c` in the window
//! read): for a whole-register copy `c: mov x, r`, `mov r, x` at resume once `(x, Def(c))` is
//! restorable; for a copy into the warp's own shared memory
//! (`c: st.shared [%warp_smem + o], r`, [`Backing::Shared`]), `ld.shared r, [%warp_smem + o]`
//! at resume, if no later copy in the window reused the word.

use std::collections::{HashMap as StdHashMap, HashSet as StdHashSet};
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};

use kir::inst::{Op, Operand, Space, Special};
use kir::{Id, Inst, InstId, Kernel, Reg};

use super::revert::{revert_of, Revert};
use super::widths::{ContextSize, RegClass, Widths};
use super::{Condition, CostModel};
use crate::liveness::Liveness;
use crate::regset::RegSet;

/// The planner's maps are keyed by small integers (registers, versions) and looked up
/// millions of times per kernel: an Fx-style multiplicative hash instead of SipHash (there is
/// no untrusted input to defend against). Nothing depends on the iteration order.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u32(&mut self, v: u32) {
        self.write_u64(u64::from(v));
    }

    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
}

type HashMap<K, V> = StdHashMap<K, V, BuildHasherDefault<IdHasher>>;
type HashSet<K> = StdHashSet<K, BuildHasherDefault<IdHasher>>;

/// A version of a register inside a flashback window.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Version {
    /// The value the register had at the flashback point.
    Initial,
    /// The value written by this instruction.
    Def(InstId),
}

impl Version {
    fn from_code(c: u32) -> Self {
        if c == 0 {
            Version::Initial
        } else {
            Version::Def(InstId(c - 1))
        }
    }
}

/// A register the preemption routine saves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SavedReg {
    pub reg: Reg,
    /// Which value is saved: `Initial` is the flashback point's value (possibly recovered by
    /// reverting at preemption), `Def(j)` the result of `j` (a save/reload, Fig. 2).
    pub version: Version,
    /// A 64-bit value (two 32-bit registers).
    pub wide: bool,
    pub class: RegClass,
}

/// One step of a resume routine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResumeStep {
    /// Load a saved register from the context buffer.
    Load(Reg),
    /// Re-execute the kernel's instruction.
    Reexecute(InstId),
    /// Execute the reverting instruction of the kernel's instruction.
    Revert(InstId),
    /// Copy back from a register copy `mov x, y` of the kernel: `mov y, x` (on-chip scalar
    /// register backup, §III-D; see [`super::osrb`]).
    CopyBack(InstId),
    /// Jump into the kernel: the instructions from here up to the preempted one run again in
    /// place, then execution goes on.
    Jump(InstId),
}

/// Estimated costs of a flashback (units of [`CostModel`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct FlashbackCost {
    /// Preemption latency: reverts at preemption plus saving the context.
    pub preempt: u32,
    /// Resuming time: loading the context plus reverting and re-executing.
    pub resume: u32,
}

/// How a warp preempted before `pc` saves and restores its context (one candidate).
#[derive(Clone, Debug, PartialEq)]
pub struct Flashback {
    /// The instruction before which the signal is taken (`I_cur`).
    pub pc: InstId,
    /// The flashback point (`I_prec`); `point == pc` is plain LIVE context switching.
    pub point: InstId,
    /// The saved registers, in register order.
    pub saved: Vec<SavedReg>,
    /// Instructions reverted by the preemption routine before saving, in execution order
    /// (latest first).
    pub preempt_reverts: Vec<InstId>,
    /// The resume routine.
    pub resume: Vec<ResumeStep>,
    pub context: ContextSize,
    pub cost: FlashbackCost,
    /// Registers holding their value at `pc` once the resume routine (and its jump) has run,
    /// sorted: `live_in(pc)`, every register the preemption routine reads, and whatever else
    /// the routine happens to rebuild (see "Repeated preemption" in the module docs).
    pub restored: Vec<Reg>,
}

impl Flashback {
    /// Every instruction re-executed on resume (in the routine or after its jump), in
    /// execution order.
    pub fn reexecuted(&self) -> Vec<InstId> {
        let mut v = Vec::new();
        for s in &self.resume {
            match *s {
                ResumeStep::Reexecute(j) => v.push(j),
                ResumeStep::Jump(p) => v.extend((p.0..self.pc.0).map(InstId)),
                _ => {}
            }
        }
        v
    }

    /// Instructions reverted by the resume routine.
    pub fn resume_reverts(&self) -> Vec<InstId> {
        self.resume
            .iter()
            .filter_map(|s| match *s {
                ResumeStep::Revert(j) => Some(j),
                _ => None,
            })
            .collect()
    }

    /// A one-line description with the kernel's register names, for tests and reports:
    /// `pc4 <- pc0 save[%r0@pc2 %r4] pre[] resume[ld %r4; pc0; pc1; ld %r0; jump pc3]`.
    pub fn describe(&self, kernel: &Kernel) -> String {
        struct D<'a>(&'a Flashback, &'a Kernel);
        impl fmt::Display for D<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                let (fb, k) = (self.0, self.1);
                write!(f, "{} <- {} save[", fb.pc, fb.point)?;
                for (n, s) in fb.saved.iter().enumerate() {
                    let sep = if n == 0 { "" } else { " " };
                    write!(f, "{sep}{}", k.regs[s.reg].name)?;
                    if let Version::Def(pc) = s.version {
                        write!(f, "@{pc}")?;
                    }
                }
                f.write_str("] pre[")?;
                for (n, pc) in fb.preempt_reverts.iter().enumerate() {
                    let sep = if n == 0 { "" } else { "; " };
                    write!(f, "{sep}{pc}^-1")?;
                }
                f.write_str("] resume[")?;
                for (n, s) in fb.resume.iter().enumerate() {
                    f.write_str(if n == 0 { "" } else { "; " })?;
                    match *s {
                        ResumeStep::Load(r) => write!(f, "ld {}", k.regs[r].name)?,
                        ResumeStep::Reexecute(j) => write!(f, "{j}")?,
                        ResumeStep::Revert(j) => write!(f, "{j}^-1")?,
                        ResumeStep::CopyBack(j) => write!(f, "cp {j}")?,
                        ResumeStep::Jump(j) => write!(f, "jump {j}")?,
                    }
                }
                f.write_str("]")
            }
        }
        D(self, kernel).to_string()
    }
}

/// Per-kernel facts the planner needs, computed once.
pub(crate) struct KernelFacts<'k> {
    pub kernel: &'k Kernel,
    pub live: &'k Liveness,
    pub widths: &'k Widths,
    /// Registers each instruction overwrites (destinations and the odd halves of pairs).
    res: Vec<Vec<Reg>>,
    /// Registers re-executing the instruction reads (uses; destinations too when guarded).
    ins: Vec<Vec<Reg>>,
    reexec: Vec<bool>,
    /// Side effects that end a flashback window.
    pub breaker: Vec<bool>,
    revert: Vec<Option<Revert>>,
    is_load: Vec<bool>,
    /// `(backing, y)` for a backup copy of `y` that can be copied back (OSRB).
    copy: Vec<Option<(Backing, Reg)>>,
}

/// Where an OSRB backup copy (§III-D) keeps the value of the register it copies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backing {
    /// Another register: the copy is `mov x, y`, and `mov y, x` gives `y` back.
    Reg(Reg),
    /// The warp's own shared memory at this byte offset: the copy is
    /// `st.shared [%warp_smem + offset], y`, and the matching `ld.shared` gives `y` back.
    /// The TB's shared memory survives a switch (the mechanism saves it with the TB), so
    /// nothing needs restoring first.
    Shared(i32),
}

/// `(backing, y)` if `inst` copies one whole 32-bit register `y` where copying back gives
/// `y`'s value: `mov x, y` (OSRB's copy back, §III-D), unguarded, not a predicate and not
/// half of a 64-bit value, or a store of `y` into the warp's own shared memory
/// ([`Inst::as_warp_smem_store`]).
pub fn backup_copy(kernel: &Kernel, widths: &Widths, pc: InstId) -> Option<(Backing, Reg)> {
    let inst = &kernel.insts[pc];
    // A 32-bit write makes `x` narrow whatever it held before; `y` must hold a 32-bit value.
    let word = |r: Reg| widths.class(r) != RegClass::Predicate && kernel.regs[r].ty.bits() <= 32;
    if let Some((offset, y)) = inst.as_warp_smem_store() {
        return (word(y) && !widths.wide_before(pc, y)).then_some((Backing::Shared(offset), y));
    }
    let Op::Mov(ty) = inst.op else { return None };
    let (Some(x), Operand::Reg(y)) = (inst.dsts[0], inst.srcs[0]) else {
        return None;
    };
    (inst.guard.is_none()
        && ty.bits() == 32
        && x != y
        && word(x)
        && word(y)
        && !widths.wide_before(pc, y))
    .then_some((Backing::Reg(x), y))
}

/// Whether an instruction ends the idempotent region a flashback window may span.
///
/// A store into the warp's own shared memory (an OSRB backup) does not: no other warp sees
/// it, and the kernel never reads it back.
pub fn is_side_effect(inst: &Inst) -> bool {
    (matches!(
        inst.op,
        Op::St { .. }
            | Op::Atom { .. }
            | Op::Red { .. }
            | Op::Bar { .. }
            | Op::WmmaStore { .. }
            | Op::Stmatrix { .. }
            | Op::CpAsync { .. }
    ) || matches!(inst.op, Op::Mbarrier { op, .. } if op.writes()))
        && inst.as_warp_smem_store().is_none()
}

fn unstable_special(s: Special) -> bool {
    // Values that change over time or with the SM / warp slot the TB resumes on.
    matches!(
        s,
        Special::Clock
            | Special::Clock64
            | Special::GlobalTimer
            | Special::SmId
            | Special::WarpId
            | Special::NWarpId
    )
}

/// Whether re-executing `inst` is guaranteed to produce the values it produced before, given
/// the same register inputs (see the module docs).
pub fn is_reexecutable(inst: &Inst, global_loads_stable: bool) -> bool {
    if inst
        .srcs()
        .iter()
        .any(|o| matches!(*o, Operand::Special(s) if unstable_special(s)))
    {
        return false;
    }
    match inst.op {
        Op::Ld {
            space, volatile, ..
        } => {
            !volatile
                && match space {
                    Space::Param | Space::Const | Space::Shared | Space::Local => true,
                    Space::Global | Space::Generic => global_loads_stable,
                }
        }
        Op::WmmaLoad { space, .. } | Op::Ldmatrix { space, .. } => match space {
            Space::Param | Space::Const | Space::Shared | Space::Local => true,
            Space::Global | Space::Generic => global_loads_stable,
        },
        // Texels live in global memory.
        Op::Tex { .. } => global_loads_stable,
        Op::St { .. } | Op::Atom { .. } | Op::Red { .. } | Op::Bar { .. } => false,
        Op::WmmaStore { .. } | Op::Stmatrix { .. } | Op::CpAsync { .. } => false,
        Op::Mbarrier { op, .. } => !op.writes(),
        Op::Bra { .. } | Op::Exit => false,
        _ => true,
    }
}

impl<'k> KernelFacts<'k> {
    /// Registers `pc` overwrites (destinations and the odd halves of pairs).
    pub fn overwrites(&self, pc: InstId) -> &[Reg] {
        &self.res[pc.index()]
    }

    pub fn new(
        kernel: &'k Kernel,
        live: &'k Liveness,
        widths: &'k Widths,
        global_loads_stable: bool,
    ) -> Self {
        let n = kernel.insts.len();
        let mut res = Vec::with_capacity(n);
        let mut ins = Vec::with_capacity(n);
        let mut reexec = Vec::with_capacity(n);
        let mut breaker = Vec::with_capacity(n);
        let mut revert = Vec::with_capacity(n);
        let mut is_load = Vec::with_capacity(n);
        let mut copy = Vec::with_capacity(n);
        for (pc, inst) in kernel.insts.iter() {
            copy.push(backup_copy(kernel, widths, pc));
            let mut r: Vec<Reg> = Vec::new();
            for (slot, d) in inst.dsts().iter().enumerate() {
                let Some(d) = *d else { continue };
                r.push(d);
                if widths.def_is_wide(kernel, inst, slot, d) {
                    r.extend(widths.partner(d));
                }
            }
            r.sort();
            r.dedup();
            let mut u: Vec<Reg> = inst.uses().collect();
            if inst.guard.is_some() {
                u.extend(inst.defs());
            }
            u.sort();
            u.dedup();
            res.push(r);
            ins.push(u);
            reexec.push(is_reexecutable(inst, global_loads_stable));
            breaker.push(is_side_effect(inst));
            is_load.push(matches!(inst.op, Op::Ld { .. }));
            // A 32-bit operation cannot give back a 64-bit value (revert.rs).
            revert.push(
                revert_of(inst)
                    .filter(|rv| rv.bits >= 64 || !widths.wide_before(pc, rv.shared))
                    .filter(|rv| {
                        rv.inst.guard.is_none() || rv.shared != rv.inst.guard.unwrap().reg
                    }),
            );
        }
        KernelFacts {
            kernel,
            live,
            widths,
            res,
            ins,
            reexec,
            breaker,
            revert,
            is_load,
            copy,
        }
    }
}

/// The registers that hold their last version before each instruction whatever earlier
/// preemptions of the warp did (`N(i)` of "Repeated preemption" in the module docs). Walk the
/// instructions in program order: [`Reliable::enter`] before planning `pc`,
/// [`Reliable::leave`] with the flashback chosen for it.
pub(crate) struct Reliable<'a> {
    facts: &'a KernelFacts<'a>,
    set: RegSet,
}

impl<'a> Reliable<'a> {
    pub fn new(facts: &'a KernelFacts<'a>) -> Self {
        Reliable {
            facts,
            set: RegSet::with_capacity(facts.kernel.regs.len()),
        }
    }

    /// The set before `pc`. A block is entered from anywhere, so at its first instruction only
    /// the live registers are known to hold their values.
    pub fn enter(&mut self, pc: InstId) -> &RegSet {
        let cfg = &self.facts.kernel.cfg;
        if cfg.blocks[cfg.block_of[pc.index()]].start == pc {
            self.set.copy_from(self.facts.live.live_in(pc));
        }
        &self.set
    }

    /// Moves past `pc`, whose preemption uses `fb`. A warp is at `pc` either having run the
    /// code before it, or resumed by `fb`'s routine, which rebuilds `fb.restored` only; then
    /// `pc` executes from registers that hold their values (its uses are live) and its
    /// results hold theirs — a guarded one only if the lanes it skips kept theirs.
    pub fn leave(&mut self, pc: InstId, fb: &Flashback) {
        let lost: Vec<Reg> = self
            .set
            .iter()
            .filter(|r| fb.restored.binary_search(r).is_err())
            .collect();
        for r in lost {
            self.set.remove(r);
        }
        let guarded = self.facts.kernel.insts[pc].guard.is_some();
        for &r in &self.facts.res[pc.index()] {
            if !guarded || self.set.contains(r) {
                self.set.insert(r);
            } else {
                self.set.remove(r);
            }
        }
    }
}

/// The cheapest flashback of every instruction of the kernel, in program order, with the
/// registers a plain switch before it must save for the flashbacks after it to hold
/// (`live_in(pc) ∪ (N(pc) ∩ restored(pc))`: what the flashback's resume leaves reliable, see
/// [`CtxBack::kept`](super::CtxBack::kept)).
pub(crate) fn best_of_all(
    facts: &KernelFacts<'_>,
    planner: &mut Planner<'_>,
    window: u32,
) -> (Vec<Flashback>, Vec<Vec<SavedReg>>) {
    let mut reliable = Reliable::new(facts);
    facts
        .kernel
        .insts
        .ids()
        .map(|pc| {
            let n = reliable.enter(pc);
            planner.set_reliable(n);
            let fb = planner.best(pc, window);
            let mut kept = facts.live.live_in(pc).clone();
            for &r in &fb.restored {
                if n.contains(r) {
                    kept.insert(r);
                }
            }
            let kept = kept
                .iter()
                .map(|reg| SavedReg {
                    reg,
                    version: Version::Initial,
                    wide: facts.widths.wide_before(pc, reg),
                    class: facts.widths.class(reg),
                })
                .collect();
            reliable.leave(pc, &fb);
            (fb, kept)
        })
        .unzip()
}

/// Every flashback point of `pc` with its plan, nearest first, given the cheapest flashbacks
/// of the instructions before it in its block.
pub(crate) fn candidates_of(
    facts: &KernelFacts<'_>,
    planner: &mut Planner<'_>,
    pc: InstId,
    window: u32,
) -> Vec<Flashback> {
    let cfg = &facts.kernel.cfg;
    let start = cfg.blocks[cfg.block_of[pc.index()]].start;
    let mut reliable = Reliable::new(facts);
    for j in start.0..pc.0 {
        planner.set_reliable(reliable.enter(InstId(j)));
        let fb = planner.best(InstId(j), window);
        reliable.leave(InstId(j), &fb);
    }
    planner.set_reliable(reliable.enter(pc));
    planner.candidates(pc, window)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Method {
    Reexec(u32),
    Saved,
    Revert(u32),
    CopyBack(u32),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    InProgress,
    Done(Method),
    Failed,
}

/// Resolution steps allowed per candidate before it is given up (a guard against blow-up;
/// never reached on the suite).
const STEP_BUDGET: u32 = 20_000;
/// Recursion depth of the schedule's on-demand production of a value.
const DEPTH_LIMIT: u32 = 256;
/// Rounds of [`Planner::plan`] that add the preemption routine's reads to the targets.
const TARGET_ROUNDS: u32 = 16;

/// The flashback planner: reusable buffers for one kernel.
pub(crate) struct Planner<'a> {
    facts: &'a KernelFacts<'a>,
    condition: Condition,
    cost: CostModel,
    /// Whether values may be copied back from register copies (OSRB, §III-D).
    copy_back: bool,
    f: u32,
    i: u32,
    defs: HashMap<Reg, Vec<u32>>,
    /// The register copies of the window, by source register.
    copies: HashMap<Reg, Vec<u32>>,
    memo: HashMap<(Reg, u32), State>,
    trail: Vec<(Reg, u32)>,
    saved: HashMap<Reg, u32>,
    saved_trail: Vec<Reg>,
    steps: u32,
    /// Registers that hold their last version at `i` whatever earlier preemptions did.
    reliable: RegSet,
    // Schedule state.
    cur: HashMap<Reg, u32>,
    out: Vec<ResumeStep>,
    pred_phase_over: bool,
}

impl<'a> Planner<'a> {
    pub fn new(
        facts: &'a KernelFacts<'a>,
        condition: Condition,
        cost: CostModel,
        copy_back: bool,
    ) -> Self {
        Planner {
            facts,
            condition,
            cost,
            copy_back,
            f: 0,
            i: 0,
            defs: HashMap::default(),
            copies: HashMap::default(),
            memo: HashMap::default(),
            trail: Vec::new(),
            saved: HashMap::default(),
            saved_trail: Vec::new(),
            steps: 0,
            reliable: RegSet::with_capacity(facts.kernel.regs.len()),
            cur: HashMap::default(),
            out: Vec::new(),
            pred_phase_over: false,
        }
    }

    /// Sets the registers the preemption routine may read at `i`: those that hold their last
    /// version there whatever earlier preemptions did ([`Reliable`] computes them).
    pub fn set_reliable(&mut self, set: &RegSet) {
        self.reliable.copy_from(set);
    }

    /// The earliest flashback point the window of `i` allows (`window` instructions back at
    /// most, same block, after the last side effect).
    pub fn head(&self, i: InstId, window: u32) -> u32 {
        let k = self.facts.kernel;
        let start = k.cfg.blocks[k.cfg.block_of[i.index()]].start.0;
        let mut f = i.0;
        while f > start && i.0 - f < window && !self.facts.breaker[f as usize - 1] {
            f -= 1;
        }
        f
    }

    /// Every flashback point of `i` with its plan, nearest first.
    pub fn candidates(&mut self, i: InstId, window: u32) -> Vec<Flashback> {
        let head = self.head(i, window);
        (head..=i.0)
            .rev()
            .filter_map(|f| self.plan(InstId(f), i))
            .collect()
    }

    /// The cheapest flashback point of `i`: least preemption latency, then least resuming
    /// time, then the nearest.
    pub fn best(&mut self, i: InstId, window: u32) -> Flashback {
        let mut best: Option<Flashback> = None;
        for fb in self.candidates(i, window) {
            if best.as_ref().is_none_or(|b| fb.cost < b.cost) {
                best = Some(fb);
            }
        }
        best.expect("f = i is always a flashback point")
    }

    // ----- versions -----

    fn ver_at(&self, r: Reg, p: u32) -> u32 {
        match self.defs.get(&r) {
            Some(v) => match v.partition_point(|&d| d < p) {
                0 => 0,
                n => v[n - 1] + 1,
            },
            None => 0,
        }
    }

    fn last(&self, r: Reg) -> u32 {
        self.ver_at(r, self.i)
    }

    /// The first definition of `r` after version `k`.
    fn next_def(&self, r: Reg, k: u32) -> Option<u32> {
        let v = self.defs.get(&r)?;
        v.iter().copied().find(|&d| d + 1 > k)
    }

    fn version_wide(&self, r: Reg, k: u32) -> bool {
        let facts = self.facts;
        if k == 0 {
            return facts.widths.wide_before(InstId(self.f), r);
        }
        let pc = InstId(k - 1);
        let inst = &facts.kernel.insts[pc];
        inst.dsts()
            .iter()
            .enumerate()
            .any(|(slot, d)| *d == Some(r) && facts.widths.def_is_wide(facts.kernel, inst, slot, r))
    }

    /// The preemption-time reverts that turn the last version of `r` into version `k`, if
    /// each is reversible with operands still holding their values at `i` (and reliably so,
    /// see [`Planner::set_reliable`]).
    fn preempt_chain(&self, r: Reg, k: u32) -> Option<Vec<u32>> {
        let chain: Vec<u32> = self
            .defs
            .get(&r)?
            .iter()
            .copied()
            .filter(|&d| d + 1 > k)
            .collect();
        for &d in &chain {
            let rv = self.facts.revert[d as usize].as_ref()?;
            if rv.shared != r {
                return None;
            }
            for &u in &rv.operands {
                if u == r || self.ver_at(u, d) != self.last(u) || !self.reliable.contains(u) {
                    return None;
                }
            }
        }
        Some(chain)
    }

    fn can_save(&self, r: Reg, k: u32) -> bool {
        let ok = match self.condition {
            Condition::Basic => k == 0 && self.last(r) == 0,
            Condition::Relaxed => k == self.last(r),
            Condition::Reverting => k == self.last(r) || self.preempt_chain(r, k).is_some(),
        };
        ok && self.reliable.contains(r) && self.saved.get(&r).is_none_or(|&s| s == k)
    }

    // ----- resolution -----

    fn checkpoint(&self) -> (usize, usize) {
        (self.trail.len(), self.saved_trail.len())
    }

    fn rollback(&mut self, (t, s): (usize, usize)) {
        for key in self.trail.drain(t..) {
            self.memo.remove(&key);
        }
        for r in self.saved_trail.drain(s..) {
            self.saved.remove(&r);
        }
    }

    fn set(&mut self, key: (Reg, u32), st: State) {
        self.memo.insert(key, st);
        self.trail.push(key);
    }

    /// Makes `(r, k)` restorable; `Err(true)` when the failure involved a version still being
    /// resolved (then it is not memoised: it may succeed from elsewhere).
    fn resolve(&mut self, r: Reg, k: u32) -> Result<(), bool> {
        match self.memo.get(&(r, k)) {
            Some(State::InProgress) => return Err(true),
            Some(State::Done(_)) => return Ok(()),
            Some(State::Failed) => return Err(false),
            None => {}
        }
        self.steps += 1;
        if self.steps > STEP_BUDGET {
            return Err(false);
        }
        self.set((r, k), State::InProgress);
        let mut cycle = false;
        // 1. Re-execution.
        if k > 0 && self.facts.reexec[k as usize - 1] {
            let j = k - 1;
            let cp = self.checkpoint();
            let mut ok = true;
            for idx in 0..self.facts.ins[j as usize].len() {
                let u = self.facts.ins[j as usize][idx];
                if let Err(c) = self.resolve(u, self.ver_at(u, j)) {
                    cycle |= c;
                    ok = false;
                    break;
                }
            }
            if ok {
                self.set((r, k), State::Done(Method::Reexec(j)));
                return Ok(());
            }
            self.rollback(cp);
        }
        // 2. Save (and reload).
        if self.can_save(r, k) {
            if self.saved.insert(r, k).is_none() {
                self.saved_trail.push(r);
            }
            self.set((r, k), State::Done(Method::Saved));
            return Ok(());
        }
        // 3. Revert the next definition at resume.
        if self.condition == Condition::Reverting && k != self.last(r) {
            if let Some(d) = self.next_def(r, k) {
                if let Some(rv) = self.facts.revert[d as usize]
                    .as_ref()
                    .filter(|rv| rv.shared == r)
                {
                    let cp = self.checkpoint();
                    let mut ok = true;
                    let mut need = vec![(r, d + 1)];
                    need.extend(rv.operands.iter().map(|&u| (u, self.ver_at(u, d))));
                    for (u, v) in need {
                        if let Err(c) = self.resolve(u, v) {
                            cycle |= c;
                            ok = false;
                            break;
                        }
                    }
                    if ok {
                        self.set((r, k), State::Done(Method::Revert(d)));
                        return Ok(());
                    }
                    self.rollback(cp);
                }
            }
        }
        // 4. Copy back from a backup copy of this version (OSRB).
        if let Some(cs) = self.copies.get(&r) {
            for c in cs.clone() {
                if self.ver_at(r, c) != k {
                    continue;
                }
                let Backing::Reg(x) = self.facts.copy[c as usize].expect("a copy").0 else {
                    // In the warp's shared memory, which the switch keeps.
                    self.set((r, k), State::Done(Method::CopyBack(c)));
                    return Ok(());
                };
                let cp = self.checkpoint();
                match self.resolve(x, c + 1) {
                    Ok(()) => {
                        self.set((r, k), State::Done(Method::CopyBack(c)));
                        return Ok(());
                    }
                    Err(again) => cycle |= again,
                }
                self.rollback(cp);
            }
        }
        if cycle {
            self.memo.remove(&(r, k));
        } else {
            self.set((r, k), State::Failed);
        }
        Err(cycle)
    }

    fn method(&self, r: Reg, k: u32) -> Option<Method> {
        match self.memo.get(&(r, k)) {
            Some(State::Done(m)) => Some(*m),
            _ => None,
        }
    }

    /// Collects the methods reachable from `(r, k)`.
    fn mark(
        &self,
        r: Reg,
        k: u32,
        seen: &mut HashSet<(Reg, u32)>,
        reexec: &mut Vec<bool>,
        reverts: &mut Vec<u32>,
        saved: &mut Vec<(Reg, u32)>,
    ) {
        if !seen.insert((r, k)) {
            return;
        }
        match self.method(r, k) {
            Some(Method::Reexec(j)) => {
                reexec[(j - self.f) as usize] = true;
                for &u in &self.facts.ins[j as usize] {
                    self.mark(u, self.ver_at(u, j), seen, reexec, reverts, saved);
                }
            }
            Some(Method::Saved) => saved.push((r, k)),
            Some(Method::CopyBack(c)) => {
                if let Backing::Reg(x) = self.facts.copy[c as usize].expect("a copy").0 {
                    self.mark(x, c + 1, seen, reexec, reverts, saved);
                }
            }
            Some(Method::Revert(d)) => {
                reverts.push(d);
                self.mark(r, d + 1, seen, reexec, reverts, saved);
                let rv = self.facts.revert[d as usize].as_ref().expect("reversible");
                for &u in &rv.operands {
                    self.mark(u, self.ver_at(u, d), seen, reexec, reverts, saved);
                }
            }
            None => {}
        }
    }

    // ----- schedule -----

    fn emit_load(&mut self, r: Reg) -> bool {
        let Some(&k) = self.saved.get(&r) else {
            return false;
        };
        // Predicates are loaded through a scratch register before anything else.
        if self.facts.widths.class(r) == RegClass::Predicate && self.pred_phase_over {
            return false;
        }
        self.out.push(ResumeStep::Load(r));
        self.cur.insert(r, k);
        true
    }

    fn present(&self, r: Reg, k: u32) -> bool {
        self.cur.get(&r).copied() == Some(k)
    }

    fn inputs_present(&self, j: u32) -> bool {
        self.facts.ins[j as usize]
            .iter()
            .all(|&u| self.present(u, self.ver_at(u, j)))
    }

    fn exec(&mut self, j: u32) {
        self.out.push(ResumeStep::Reexecute(InstId(j)));
        for idx in 0..self.facts.res[j as usize].len() {
            let x = self.facts.res[j as usize][idx];
            self.cur.insert(x, j + 1);
        }
    }

    /// Puts version `k` into `r`, producing it by its method.
    fn ensure(&mut self, r: Reg, k: u32, depth: u32) -> bool {
        if self.present(r, k) {
            return true;
        }
        if depth > DEPTH_LIMIT {
            return false;
        }
        match self.method(r, k) {
            Some(Method::Saved) => self.saved.get(&r) == Some(&k) && self.emit_load(r),
            Some(Method::Reexec(j)) => {
                for idx in 0..self.facts.ins[j as usize].len() {
                    let u = self.facts.ins[j as usize][idx];
                    if !self.ensure(u, self.ver_at(u, j), depth + 1) {
                        return false;
                    }
                }
                if !self.inputs_present(j) {
                    return false;
                }
                self.exec(j);
                true
            }
            Some(Method::Revert(d)) => {
                let rv = self.facts.revert[d as usize].as_ref().expect("reversible");
                let mut need = vec![(r, d + 1)];
                need.extend(rv.operands.iter().map(|&u| (u, self.ver_at(u, d))));
                for &(u, v) in &need {
                    if !self.ensure(u, v, depth + 1) {
                        return false;
                    }
                }
                if !need.iter().all(|&(u, v)| self.present(u, v)) {
                    return false;
                }
                self.out.push(ResumeStep::Revert(InstId(d)));
                self.cur.insert(r, k);
                true
            }
            Some(Method::CopyBack(c)) => {
                if let Backing::Reg(x) = self.facts.copy[c as usize].expect("a copy").0 {
                    if !self.ensure(x, c + 1, depth + 1) || !self.present(x, c + 1) {
                        return false;
                    }
                }
                self.out.push(ResumeStep::CopyBack(InstId(c)));
                self.cur.insert(r, k);
                true
            }
            None => false,
        }
    }

    /// Plans the flashback from `f` for a signal before `i`; `None` if `f` is not a flashback
    /// point under the configured condition. The preemption routine reads only registers of
    /// [`Planner::set_reliable`]'s set, and the resume routine rebuilds the last version of
    /// every register the preemption routine reads, not only of `live_in(i)` (see "Repeated
    /// preemption" in the module docs): those registers are added to the targets until the
    /// plan restores all of them.
    pub fn plan(&mut self, f: InstId, i: InstId) -> Option<Flashback> {
        let facts = self.facts;
        let mut targets: Vec<Reg> = facts.live.live_in(i).iter().collect();
        // Each round adds at least one register, so this only bounds pathological cases.
        for _ in 0..TARGET_ROUNDS {
            let mut fb = self.plan_for(f, i, &targets)?;
            let mut missing: Vec<Reg> = fb
                .saved
                .iter()
                .map(|s| s.reg)
                .chain(fb.preempt_reverts.iter().flat_map(|&d| {
                    let rv = facts.revert[d.index()].as_ref().expect("reversible");
                    rv.operands.iter().copied()
                }))
                .filter(|&r| !self.present(r, self.last(r)))
                .collect();
            if missing.is_empty() {
                let mut restored: Vec<Reg> = self
                    .cur
                    .iter()
                    .filter(|&(&r, &k)| k == self.last(r))
                    .map(|(&r, _)| r)
                    .collect();
                restored.sort();
                fb.restored = restored;
                return Some(fb);
            }
            missing.sort();
            missing.dedup();
            targets.extend(missing);
        }
        None
    }

    /// One round of [`Planner::plan`]: rebuild the last versions of `targets`.
    fn plan_for(&mut self, f: InstId, i: InstId, targets: &[Reg]) -> Option<Flashback> {
        let facts = self.facts;
        self.f = f.0;
        self.i = i.0;
        self.defs.clear();
        self.copies.clear();
        for j in f.0..i.0 {
            for &r in &facts.res[j as usize] {
                self.defs.entry(r).or_default().push(j);
            }
            if let Some((backing, y)) = facts.copy[j as usize].filter(|_| self.copy_back) {
                if let Backing::Shared(_) = backing {
                    // A later backup into the same word overwrites this one's. (A register
                    // backup's later overwrite is a new version of the register instead.)
                    for cs in self.copies.values_mut() {
                        cs.retain(|&c| facts.copy[c as usize].map(|(b, _)| b) != Some(backing));
                    }
                }
                self.copies.entry(y).or_default().push(j);
            }
        }
        self.memo.clear();
        self.trail.clear();
        self.saved.clear();
        self.saved_trail.clear();
        self.steps = 0;
        for &r in targets {
            let k = self.last(r);
            if self.resolve(r, k).is_err() {
                return None;
            }
        }
        // What the chosen methods actually use.
        let window = (i.0 - f.0) as usize;
        let mut seen = HashSet::default();
        let mut reexec = vec![false; window];
        let mut reverts = Vec::new();
        let mut saved = Vec::new();
        for &r in targets {
            self.mark(
                r,
                self.last(r),
                &mut seen,
                &mut reexec,
                &mut reverts,
                &mut saved,
            );
        }
        self.saved = saved.iter().copied().collect();
        reverts.sort_unstable_by(|a, b| b.cmp(a));
        reverts.dedup();
        // Saved registers the recovery phase reads.
        let mut early = HashSet::default();
        let (mut rx, mut rr, mut rs) = (vec![false; window], Vec::new(), Vec::new());
        for &d in &reverts {
            let rv = facts.revert[d as usize].as_ref().expect("reversible");
            self.mark(rv.shared, d + 1, &mut early, &mut rx, &mut rr, &mut rs);
            for &u in &rv.operands {
                self.mark(u, self.ver_at(u, d), &mut early, &mut rx, &mut rr, &mut rs);
            }
        }
        // 1. Loads.
        self.cur.clear();
        self.out.clear();
        self.pred_phase_over = false;
        let mut start: Vec<Reg> = saved
            .iter()
            .filter(|&&(r, k)| {
                k == 0 || facts.widths.class(r) == RegClass::Predicate || rs.contains(&(r, k))
            })
            .map(|&(r, _)| r)
            .collect();
        start.sort_by_key(|&r| (facts.widths.class(r) != RegClass::Predicate, r));
        for r in start {
            if facts.widths.class(r) != RegClass::Predicate {
                self.pred_phase_over = true;
            }
            self.emit_load(r);
        }
        self.pred_phase_over = true;
        // 2. Recovery.
        for &d in &reverts {
            let rv = facts.revert[d as usize].as_ref().expect("reversible");
            let before = self.ver_at(rv.shared, d);
            if !self.ensure(rv.shared, before, 0) {
                return None;
            }
        }
        // 3. Replay.
        for j in f.0..i.0 {
            let res = &facts.res[j as usize];
            if reexec[(j - f.0) as usize] {
                if res.iter().all(|&x| self.present(x, j + 1)) {
                    continue;
                }
                if !self.force_exec(j) {
                    return None;
                }
                continue;
            }
            let reload: Vec<Reg> = res
                .iter()
                .copied()
                .filter(|r| self.saved.get(r) == Some(&(j + 1)) && !self.present(*r, j + 1))
                .collect();
            if reload.is_empty() {
                continue;
            }
            let clobbers_later = res
                .iter()
                .any(|x| self.cur.get(x).is_some_and(|&v| v > j + 1));
            if facts.reexec[j as usize] && self.inputs_present(j) && !clobbers_later {
                self.exec(j);
            } else {
                for r in reload {
                    if !self.emit_load(r) {
                        return None;
                    }
                }
            }
        }
        // The check: every target (the registers live at `i`, and those the preemption
        // routine reads) holds its value at `i`.
        if !targets.iter().all(|&r| self.present(r, self.last(r))) {
            return None;
        }
        // 4. Tail jump.
        let mut resume = std::mem::take(&mut self.out);
        let mut p = i.0;
        while p > f.0 && resume.last() == Some(&ResumeStep::Reexecute(InstId(p - 1))) {
            resume.pop();
            p -= 1;
        }
        resume.push(ResumeStep::Jump(InstId(p)));
        Some(self.finish(f, i, resume))
    }

    /// Re-executes `j` after producing its inputs.
    fn force_exec(&mut self, j: u32) -> bool {
        for idx in 0..self.facts.ins[j as usize].len() {
            let u = self.facts.ins[j as usize][idx];
            if !self.ensure(u, self.ver_at(u, j), 1) {
                return false;
            }
        }
        if !self.inputs_present(j) {
            return false;
        }
        self.exec(j);
        true
    }

    fn finish(&mut self, f: InstId, i: InstId, resume: Vec<ResumeStep>) -> Flashback {
        let facts = self.facts;
        let c = self.cost;
        let loaded: Vec<Reg> = {
            let mut v: Vec<Reg> = resume
                .iter()
                .filter_map(|s| match *s {
                    ResumeStep::Load(r) => Some(r),
                    _ => None,
                })
                .collect();
            v.sort();
            v.dedup();
            v
        };
        let mut saved = Vec::new();
        let mut context = ContextSize::default();
        let mut preempt_reverts = Vec::new();
        for &r in &loaded {
            let k = self.saved[&r];
            let wide = self.version_wide(r, k);
            let class = facts.widths.class(r);
            context.add(class, wide);
            saved.push(SavedReg {
                reg: r,
                version: Version::from_code(k),
                wide,
                class,
            });
            if k != self.last(r) {
                preempt_reverts.extend(self.preempt_chain(r, k).expect("checked by can_save"));
            }
        }
        preempt_reverts.sort_unstable_by(|a, b| b.cmp(a));
        let word_cost = |s: &SavedReg, per_word: u32| match s.class {
            RegClass::Vector => per_word * if s.wide { 2 } else { 1 },
            RegClass::Uniform | RegClass::Predicate => c.scalar,
        };
        let preempt = saved.iter().map(|s| word_cost(s, c.save_word)).sum::<u32>()
            + preempt_reverts.len() as u32 * c.alu;
        let exec_cost = |j: InstId| {
            if facts.is_load[j.index()] {
                c.memory
            } else {
                c.alu
            }
        };
        let mut resume_cost = 0;
        for s in &resume {
            resume_cost += match *s {
                ResumeStep::Load(r) => {
                    let sr = saved.iter().find(|x| x.reg == r).expect("loaded is saved");
                    word_cost(sr, c.restore_word)
                }
                ResumeStep::Reexecute(j) => exec_cost(j),
                ResumeStep::Revert(_) | ResumeStep::CopyBack(_) => c.alu,
                ResumeStep::Jump(p) => (p.0..i.0).map(|j| exec_cost(InstId(j))).sum::<u32>(),
            };
        }
        Flashback {
            pc: i,
            point: f,
            saved,
            preempt_reverts: preempt_reverts.into_iter().map(InstId).collect(),
            resume,
            context,
            cost: FlashbackCost {
                preempt,
                resume: resume_cost,
            },
            restored: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ctxback::{CtxBack, CtxBackConfig};
    use crate::test_util::kernel;

    /// The shape of srad_update (suite) where the executed routines first failed: `%r2` is
    /// incremented by a reversible `add` (pc7) and last read by the `min` (pc8). The planner
    /// used to flash pc9 back to pc0, saving `%r2`'s pc2 value by reverting pc7 at preemption;
    /// its resume routine then left `%r2` at that value (dead at pc9, so not a target), and a
    /// warp preempted again before pc9 reverted it once more and saved a wrong `%r2`. Likewise
    /// a register an earlier instruction's resume routine did not rebuild must not be read.
    const REPEATED: &str = "
    .reg .b32 %r<6>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd0, [k_in];
    ld.global.u32 %r1, [%rd0];
    ld.global.u32 %r2, [%rd0+4];
    ld.global.u32 %r3, [%rd0+8];
    add.u32 %r4, %r1, %r2;          // pc4
    mul.wide.u32 %rd1, %r4, 4;
    add.s64 %rd2, %rd0, %rd1;
    add.u32 %r2, %r2, 1;            // pc7: reversible
    min.u32 %r3, %r2, %r3;          // pc8: last read of %r2
    add.u32 %r1, %r3, %r1;          // pc9: reversible
    mul.wide.u32 %rd3, %r1, 4;      // pc10
    ld.param.u64 %rd1, [k_out];
    st.global.u64 [%rd1], %rd2;
    st.global.u64 [%rd1+8], %rd3;
    st.global.u32 [%rd1+16], %r3;
    st.global.u32 [%rd1+20], %r1;
    exit;
";

    /// What the preemption routine of `fb` reads from the registers at `fb.pc`.
    fn reads_at_preemption(k: &Kernel, fb: &Flashback) -> Vec<Reg> {
        let mut v: Vec<Reg> = fb.saved.iter().map(|s| s.reg).collect();
        for &d in &fb.preempt_reverts {
            v.extend(revert_of(&k.insts[d]).expect("reversible").operands);
        }
        v.sort();
        v.dedup();
        v
    }

    #[test]
    fn preemption_reads_only_what_every_resume_rebuilds() {
        let k = kernel(REPEATED);
        let ctx = CtxBack::compute(&k, &CtxBackConfig::default());
        let mut live = Liveness::new();
        live.compute(&k);
        let widths = Widths::compute(&k);
        let facts = KernelFacts::new(&k, &live, &widths, false);
        let mut reliable = Reliable::new(&facts);
        let mut flashed = 0;
        for pc in k.insts.ids() {
            let fb = ctx.flashback(pc);
            let n = reliable.enter(pc).clone();
            for r in reads_at_preemption(&k, fb) {
                let name = &k.regs[r].name;
                // Held at `pc` whatever was preempted before (N(i))...
                assert!(n.contains(r), "{}: reads {name}", fb.describe(&k));
                // ... and again after this very routine resumed the warp.
                assert!(
                    fb.restored.binary_search(&r).is_ok(),
                    "{}: does not rebuild {name}",
                    fb.describe(&k)
                );
            }
            for r in live.live_in(pc).iter() {
                assert!(fb.restored.binary_search(&r).is_ok());
            }
            flashed += usize::from(fb.point != pc);
            reliable.leave(pc, fb);
        }
        assert!(flashed > 0, "the kernel still flashes back");
    }
}
