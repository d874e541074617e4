//! CTXBack's generated routines (papers/ji-ctxback §IV-A) executed on the functional core.
//!
//! **The property.** For a warp about to execute kernel instruction `i`, running the
//! preemption routine of `i` and then, from a register file full of garbage, the resume
//! routine of `i` brings the warp back to `i` with every register of `live_in(i)` (the
//! liveness the CTXBack analysis uses) holding exactly the value it had, in every active lane.
//! That is the whole promise of context flashback (§III): saving a preceding instruction's
//! context, reverting (§III-C) and re-executing (§III-A, §III-B) rebuild the context of `i`.
//!
//! **How.** `Routines::install` appends the routines to the kernel. A driver like
//! `gpu::func` runs every TB of every launch, and before each warp instruction a probe may
//! preempt the warp: it snapshots the warp, points a copy of it at the preemption routine
//! (one stack entry, the active mask of the warp at `i`) and steps it to its `exit`; then it
//! fills another copy's registers with random garbage, keeps the local memory the preemption
//! routine left, points it at the resume routine and steps it until it is back at `i`
//! (through the routine's final `bra` and the kernel instructions between the jump target and
//! `i`: §III-B's `JUMP`). The live-in registers are compared with the snapshot, and then
//! **the restored warp replaces the real one** — garbage in its dead registers included — so
//! the kernel goes on from the resumed state and its own verification (the suite's CPU
//! reference, or the output of a plain run for the random programs) checks the rest end to
//! end. Along the way the probe checks that the routines stay in their own code, that the
//! preemption routine changes no local memory outside the context area (and no routine
//! instruction can write global or shared memory: checked statically), and that the resume
//! routine gives back the warp's stack as it was.
//!
//! Because the restored warp goes on, a warp is routinely preempted again after a resume —
//! at the next instruction, or later in the same flashback window — which is how the
//! analysis bug of "Repeated preemption" (`analysis::ctxback::flashback`) was found.
//!
//! **Where.** Every instruction a warp reaches, at its 1st, 2nd and 16th arrival (counted
//! over all warps and TBs, separately for converged and diverged arrivals, so loops are also
//! preempted in later iterations): over every suite kernel on both targets through its own
//! host program, register-allocated (the analysis' intended input), and over 100 seeded
//! random structured programs (nested ifs and loops with lane-dependent conditions and trip
//! counts, 32/64-bit integer, float and predicate arithmetic with the reversible forms of
//! `revert.rs`, the Fig. 4 shape, the Fig. 5 shape on a warp-uniform register, guarded
//! instructions, global and local loads, stores, barriers, `%clock`), each on virtual
//! registers and once allocated — plainly, under register pressure (spills, heavy reuse of
//! physical registers) or with uniform registers and OSRB (its backups in registers, or all
//! in shared memory) — under rotating conditions (§III-A–C), cost models and alias models.
//!
//! **Divergent warps: every lane group by its own routines.** The lanes of a diverged warp
//! wait at different PCs: the top SIMT stack entry's lanes at `i`, the others parked on the
//! stack (the pending side of a divergent branch, or waiting at a reconvergence point). Each
//! group is in the state of a thread about to execute its own PC, so the probe runs, under
//! each group's mask, the preemption routine of that group's PC, and at resume the group's
//! resume routine (as a mechanism would, by pushing a one-entry stack whose reconvergence PC
//! is the group's PC, and restoring the warp's saved SIMT stack afterwards). Parked PCs are
//! always block starts (branch targets, fall-throughs of branches, reconvergence points), so
//! their routines are plain saves of the live-in. Every group's live-in is checked in its
//! lanes. Exited lanes get garbage like active ones: their registers are gone after a switch.
//!
//! **Not covered.** Memory the routines re-read is unchanged between preemption and resume
//! here (nothing runs in between), so the alias/idempotence side of re-executing global loads
//! is taken on trust from `analysis::idempotence`. CS-Defer alone has no routine set of its
//! own; its switches are executed within CTXBack+CS-Defer.
//!
//! **CTXBack+CS-Defer.** The sm_70 suite once more and half of the random programs run with
//! `generate_combined_routines`: where the combination defers, the top group's preemption
//! routine runs the deferred instructions itself, saves the target's context and exits; its
//! resume routine lands at the target, where the registers of `CtxBack::kept(target)` must
//! hold what the preemption routine had computed, and the warp goes on from there (its top
//! stack entry at the target, the deferred instructions counted as executed).
//!
//! Run with `--nocapture` for the counts. A failure names the kernel (or the random program's
//! seed: `Gen::program(seed)` regenerates it), the instruction, the warp and the flashback.

use std::fmt::Write as _;
use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

use analysis::ctxback::{
    backup_scalars, generate_combined_routines, generate_routines, BackupSlot, Condition,
    CostModel, CtxBack, CtxBackConfig, InstalledRoutines, OsrbConfig, ResumeStep,
};
use analysis::{AliasModel, Liveness};
use gpu::exec::{step, LaunchCtx, StackEntry, Step, TbView, Warp, WARP_SIZE};
use gpu::func::StepHook;
use gpu::memory::DeviceMemory;
use kir::inst::{Op, Operand, Space};
use kir::{Id, InstId, Kernel, Module, Reg};
use ptx::SourceFile;
use regalloc::{allocate, AllocConfig};
use suite::{Arg, DevPtr, Device, DeviceError, Launch, Size, Target};

// ------------------------------------------------------------------------------------------
// Preparing a kernel
// ------------------------------------------------------------------------------------------

/// A kernel with its analysis and its routines installed.
struct Prepared {
    /// The analysed kernel (register-allocated, or on virtual registers).
    kernel: Kernel,
    ctx: CtxBack,
    installed: InstalledRoutines,
    live: Liveness,
    /// Bytes of each thread's local memory holding the context.
    context: Range<usize>,
}

/// With `config.osrb` set, the kernel is first rewritten with its scalar backups, and the
/// backup registers count as live over their periods (what the analysis assumes).
fn prepare(kernel: Kernel, config: &CtxBackConfig, combined: bool) -> Prepared {
    let (osrb, ctx) = backup_scalars(&kernel, config);
    let kernel = osrb.kernel;
    let routines = if combined {
        generate_combined_routines(&kernel, &ctx)
    } else {
        generate_routines(&kernel, &ctx)
    }
    .unwrap_or_else(|e| panic!("{}: routines: {e}", kernel.name));
    let installed = routines.install(&kernel);
    let mut live = Liveness::new();
    live.compute(&kernel);
    for b in &osrb.backups {
        if let Some(r) = b.slot.reg() {
            live.keep_live(r, b.copy, b.until);
        }
    }
    let base = routines.context_base as usize;
    let context = base..base + routines.context_bytes as usize;
    let warp = routines.warp_smem_base as usize;
    let warp = warp..warp + routines.warp_smem_bytes as usize;
    if let Err(e) = check_routine_code(&installed, &context, &warp) {
        panic!("{}: {e}", kernel.name);
    }
    Prepared {
        kernel,
        ctx,
        installed,
        live,
        context,
    }
}

/// What the routines may contain: apart from a CS-Defer switch's copies of the deferred
/// kernel instructions (no control flow or barrier among them), no instruction writes global
/// or shared memory, every store is a `st.local` into the context area addressed without a
/// base register, a preemption routine ends with its only `exit` and a resume routine with
/// its only branch, an unguarded one into the kernel.
fn check_routine_code(
    inst: &InstalledRoutines,
    context: &Range<usize>,
    warp: &Range<usize>,
) -> Result<(), String> {
    let k = &inst.kernel;
    let code = |r: &Range<InstId>| (r.start.0..r.end.0).map(|j| (InstId(j), &k.insts[InstId(j)]));
    let mut copied = vec![false; k.insts.len()];
    for pc in 0..inst.kernel_len {
        if let Some(d) = inst.deferral(InstId(pc)) {
            let copies = d.preempt.start.0..d.preempt.start.0 + d.deferred;
            copied[copies.start as usize..copies.end as usize].fill(true);
        }
    }
    for (n, r) in inst.preempt.iter().enumerate() {
        for (pc, i) in code(r) {
            let last = pc.0 + 1 == r.end.0;
            if copied[pc.index()] {
                if matches!(i.op, Op::Bra { .. } | Op::Exit | Op::Bar { .. }) || last {
                    return Err(format!("preemption routine {n}: {pc} defers {:?}", i.op));
                }
                continue;
            }
            match i.op {
                Op::St {
                    space: Space::Local,
                    ty,
                    vec: 1,
                    offset,
                } => {
                    let at = offset as usize;
                    if i.srcs[0] != Operand::Imm(0)
                        || at < context.start
                        || at + ty.size() as usize > context.end
                    {
                        return Err(format!(
                            "preemption routine {n}: {pc} stores outside the context"
                        ));
                    }
                }
                // A uniform register, once per warp in the routines' part of the warp's
                // own shared memory.
                Op::St {
                    space: Space::Shared,
                    ty,
                    vec: 1,
                    offset,
                } => {
                    let at = offset as usize;
                    if i.srcs[0] != Operand::Special(kir::inst::Special::WarpSmem)
                        || at < warp.start
                        || at + ty.size() as usize > warp.end
                    {
                        return Err(format!(
                            "preemption routine {n}: {pc} stores outside the warp's area"
                        ));
                    }
                }
                Op::Exit if last && i.guard.is_none() => {}
                Op::Arith { .. } | Op::Selp(_) if !last => {}
                ref op => return Err(format!("preemption routine {n}: {pc} is {op:?}")),
            }
        }
    }
    for (n, r) in inst.resume.iter().enumerate() {
        for (pc, i) in code(r) {
            let last = pc.0 + 1 == r.end.0;
            match i.op {
                Op::Bra { target, .. }
                    if last && i.guard.is_none() && target.0 < inst.kernel_len => {}
                Op::St { .. } | Op::Atom { .. } | Op::Red { .. } | Op::Bar { .. } => {
                    return Err(format!("resume routine {n}: {pc} has a side effect"))
                }
                Op::Bra { .. } | Op::Exit => {
                    return Err(format!(
                    "resume routine {n}: {pc} leaves it other than by a final jump into the kernel"
                ))
                }
                _ if last => return Err(format!("resume routine {n} does not end in a jump")),
                _ => {}
            }
        }
    }
    Ok(())
}

// ------------------------------------------------------------------------------------------
// The probe: preempt, resume, compare
// ------------------------------------------------------------------------------------------

/// Arrivals at an instruction that are preempted: 1-based, counted over every warp and TB of
/// the kernel's launches, separately for converged and diverged arrivals.
const PROBED_ARRIVALS: [u32; 3] = [1, 2, 16];

/// The suite's splitmix64 generator, with the draws the program generator needs.
struct Rng(suite::Rng);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize]
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct Stats {
    kernels: usize,
    instructions: usize,
    /// Distinct instructions preempted at least once.
    pcs: usize,
    converged: u64,
    diverged: u64,
    /// Parked lane groups saved and restored by the routines of their own PCs.
    parked_groups: u64,
    /// Diverged probes whose parked lanes need a register the active lanes' routine does not
    /// save (so the parked groups' own routines are what restores them).
    parked_needing: u64,
    /// Probes whose flashback point precedes the instruction.
    flashed_back: u64,
    /// Probes whose preemption routine reverts an instruction (§III-C, Fig. 3).
    preempt_reverting: u64,
    /// Probes whose resume routine reverts an instruction (Algorithm 2, Fig. 4).
    resume_reverting: u64,
    /// Probes whose resume routine re-executes kernel instructions before its jump.
    reexecuting: u64,
    /// Probes whose resume routine copies a scalar back from its OSRB backup (§III-D).
    copying_back: u64,
    /// ... of which from a backup in the warp's shared memory.
    copying_back_shared: u64,
    /// Probes switched by a CS-Defer routine of CTXBack+CS-Defer (§IV-C).
    deferred: u64,
}

impl Stats {
    fn add(&mut self, o: &Stats) {
        self.kernels += o.kernels;
        self.instructions += o.instructions;
        self.pcs += o.pcs;
        self.converged += o.converged;
        self.diverged += o.diverged;
        self.parked_groups += o.parked_groups;
        self.parked_needing += o.parked_needing;
        self.flashed_back += o.flashed_back;
        self.preempt_reverting += o.preempt_reverting;
        self.resume_reverting += o.resume_reverting;
        self.reexecuting += o.reexecuting;
        self.copying_back += o.copying_back;
        self.copying_back_shared += o.copying_back_shared;
        self.deferred += o.deferred;
    }
}

/// The probe of one kernel: which arrivals were seen, what was checked, what failed.
struct Probe<'p> {
    prep: &'p Prepared,
    /// Per kernel instruction: arrivals seen, converged and diverged.
    arrivals: Vec<[u32; 2]>,
    stats: Stats,
    failures: Vec<String>,
    rng: Rng,
}

impl<'p> Probe<'p> {
    fn new(prep: &'p Prepared, seed: u64) -> Self {
        Probe {
            prep,
            arrivals: vec![[0; 2]; prep.kernel.insts.len()],
            stats: Stats {
                kernels: 1,
                instructions: prep.kernel.insts.len(),
                ..Stats::default()
            },
            failures: Vec::new(),
            rng: Rng(suite::Rng::new(seed)),
        }
    }

    fn finish(mut self) -> (Stats, Vec<String>) {
        self.stats.pcs = self
            .arrivals
            .iter()
            .filter(|a| a.iter().any(|&n| n > 0))
            .count();
        (self.stats, self.failures)
    }

    /// Runs, for every lane group of `warp` (see [`lane_groups`]; the first is the active
    /// lanes at `pc`), the preemption routine of the group's PC under the group's mask, then
    /// from a register file full of garbage the groups' resume routines; the restored warp.
    fn preempt_and_resume(
        &mut self,
        ctx: &LaunchCtx,
        tb: &mut TbView<'_>,
        warp: &Warp,
        mem: &mut DeviceMemory,
        groups: &[LaneGroup],
    ) -> Result<Warp, String> {
        let prep = self.prep;
        for g in &groups[1..] {
            let k = &prep.kernel;
            if k.cfg.blocks[k.cfg.block_of[g.pc.index()]].start != g.pc
                || prep.ctx.flashback(g.pc).point != g.pc
            {
                return Err(format!(
                    "lanes parked at {}, which is not a block start",
                    g.pc
                ));
            }
        }
        let only = |entry: InstId, mask: u32| {
            vec![StackEntry {
                pc: entry.0,
                rpc: u32::MAX,
                mask,
            }]
        };
        let run = |w: &mut Warp, tb: &mut TbView<'_>, mem: &mut DeviceMemory| {
            step(ctx, tb, w, mem).map_err(|e| e.to_string())
        };

        // What each group runs: its PC's CTXBack routines, or for the top group the CS-Defer
        // switch of CTXBack+CS-Defer where the combination defers (it runs the deferred
        // instructions first and resumes at its target).
        struct Plan {
            preempt: Range<InstId>,
            resume: Range<InstId>,
            /// Where the group resumes.
            land: InstId,
            /// Routine instructions before the saving part.
            deferred: u32,
            /// The registers that must come back, and their values.
            check: Vec<Reg>,
            expected: Vec<u64>,
        }
        let mut plans: Vec<Plan> = groups
            .iter()
            .enumerate()
            .map(
                |(n, g)| match prep.installed.deferral(g.pc).filter(|_| n == 0) {
                    Some(d) => Plan {
                        preempt: d.preempt,
                        resume: d.resume,
                        land: d.target,
                        deferred: d.deferred,
                        check: prep.ctx.kept(d.target).iter().map(|s| s.reg).collect(),
                        expected: Vec::new(),
                    },
                    None => Plan {
                        preempt: prep.installed.preempt_code(g.pc),
                        resume: prep.installed.resume_code(g.pc),
                        land: g.pc,
                        deferred: 0,
                        check: prep.live.live_in(g.pc).iter().collect(),
                        expected: warp.regs.clone(),
                    },
                },
            )
            .collect();
        let frame = ctx.kernel.local_size as usize;
        let outside_context = |a: &[u8], b: &[u8]| {
            (0..WARP_SIZE).all(|l| {
                let (x, y) = (&a[l * frame..], &b[l * frame..]);
                x[..prep.context.start] == y[..prep.context.start]
                    && x[prep.context.end..frame] == y[prep.context.end..frame]
            })
        };

        // Preemption: each group's routine (deferred instructions or reverts, stores, then
        // `exit`) in turn, each storing into its own lanes' context areas.
        let mut local = warp_local(ctx, tb, warp.index, mem);
        for (g, plan) in groups.iter().zip(&mut plans) {
            let code = plan.preempt.clone();
            let mut pw = warp.clone();
            set_warp_local(ctx, tb, warp.index, mem, &local);
            pw.stack = only(code.start, g.mask);
            let mut before_save = None;
            for n in 0..=code.end.0 - code.start.0 {
                if n == plan.deferred {
                    // The context the saving part must preserve.
                    before_save = Some(warp_local(ctx, tb, warp.index, mem));
                    if plan.expected.is_empty() {
                        plan.expected = pw.regs.clone();
                    }
                }
                match pw.pc() {
                    Some(at) if code.contains(&at) => {}
                    Some(at) => return Err(format!("preemption routine of {} went to {at}", g.pc)),
                    None => break,
                }
                match run(&mut pw, tb, mem)? {
                    Step::Executed => {}
                    Step::Done => break,
                    Step::Barrier(_) => return Err("barrier in the preemption routine".into()),
                }
            }
            if !pw.is_done() || pw.exited != warp.exited | g.mask {
                return Err(format!(
                    "the preemption routine of {} did not end with its lanes' exit",
                    g.pc
                ));
            }
            let Some(before_save) = before_save else {
                return Err(format!("the preemption routine of {} is too short", g.pc));
            };
            if !outside_context(&warp_local(ctx, tb, warp.index, mem), &before_save) {
                return Err("a preemption routine wrote local memory outside the context".into());
            }
            local = warp_local(ctx, tb, warp.index, mem);
        }
        let preempted_local = local.clone();

        // Resume: garbage in every register of every lane, then each group's routine and
        // its jump back to where the group resumes.
        let mut rw = warp.clone();
        set_warp_local(ctx, tb, warp.index, mem, &local);
        for r in rw.regs.iter_mut() {
            *r = self.rng.next();
        }
        for (g, plan) in groups.iter().zip(&plans) {
            let land = plan.land;
            let code = plan.resume.clone();
            rw.stack = only(code.start, g.mask);
            let Op::Bra { target: jump, .. } =
                prep.installed.kernel.insts[InstId(code.end.0 - 1)].op
            else {
                unreachable!("checked by check_routine_code");
            };
            if jump > land
                || prep.kernel.cfg.block_of[jump.index()] != prep.kernel.cfg.block_of[land.index()]
            {
                return Err(format!(
                    "the resume routine jumps to {jump}, outside {land}'s block"
                ));
            }
            let budget = (code.end.0 - code.start.0) + (land.0 - jump.0) + 1;
            let mut jumped = false;
            for n in 0..=budget {
                let Some(at) = rw.pc() else {
                    return Err("the warp finished while resuming".into());
                };
                if jumped && at == land {
                    break;
                }
                if n == budget {
                    return Err(format!("resuming did not reach {land} (at {at})"));
                }
                if code.contains(&at) {
                    jumped |= at.0 + 1 == code.end.0;
                } else if !(jumped && (jump..land).contains(&at)) {
                    return Err(format!("resuming {land} went to {at}"));
                }
                match run(&mut rw, tb, mem)? {
                    Step::Executed => {}
                    Step::Done => return Err("the warp exited while resuming".into()),
                    Step::Barrier(_) => return Err(format!("barrier at {at} while resuming")),
                }
            }
            let resumed = rw.next_entry().expect("checked above");
            if resumed.mask != g.mask || rw.stack.len() != 1 || rw.exited != warp.exited {
                return Err(format!("resumed {land} with stack {:?}", rw.stack));
            }
        }
        if !outside_context(&warp_local(ctx, tb, warp.index, mem), &preempted_local) {
            return Err("resuming wrote local memory outside the context".into());
        }

        // The check: every register that must come back, in every lane of each group.
        let mut bad = String::new();
        for (g, plan) in groups.iter().zip(&plans) {
            for &r in &plan.check {
                for l in (0..WARP_SIZE).filter(|l| g.mask & (1 << l) != 0) {
                    let at = r.index() * WARP_SIZE + l;
                    if rw.regs[at] != plan.expected[at] {
                        let _ = write!(
                            bad,
                            "\n    {} lane {l} (at {}): {:#x}, expected {:#x}",
                            prep.kernel.regs[r].name, plan.land, rw.regs[at], plan.expected[at]
                        );
                        break;
                    }
                }
            }
        }
        if !bad.is_empty() {
            return Err(format!("live registers not restored:{bad}"));
        }

        // The warp goes on from the restored state (its stack and counters as if nothing
        // happened), its top entry at the deferral's target if it deferred.
        let mut restored = warp.clone();
        restored.regs = rw.regs;
        // Its local memory is the resumed warp's, already in device memory.
        if plans[0].land != groups[0].pc {
            let top = restored
                .stack
                .iter()
                .rposition(|e| e.mask != 0 && e.pc != e.rpc)
                .expect("a top entry");
            restored.stack[top].pc = plans[0].land.0;
            // The deferred instructions count as executed (the functional `%clock`), unguarded
            // branches included.
            restored.executed += u64::from(prep.ctx.combined_deferral(groups[0].pc).deferred);
            self.stats.deferred += 1;
        }
        Ok(restored)
    }
}

/// The local memory of warp `w` of the TB, as `[lane][byte]` (it lives in device memory,
/// interleaved by lane: `gpu::memory::local_word_address`).
fn warp_local(ctx: &LaunchCtx, tb: &TbView<'_>, w: u32, mem: &DeviceMemory) -> Vec<u8> {
    let frame = ctx.kernel.local_size as u64;
    let words = frame.div_ceil(4);
    let mut out = Vec::with_capacity(frame as usize * WARP_SIZE);
    for l in 0..WARP_SIZE as u32 {
        for b in 0..frame {
            let at = gpu::memory::local_word_address(tb.local_base, words, w, l, b / 4) + b % 4;
            out.push(mem.read_bytes(at, 1).expect("local memory is mapped")[0]);
        }
    }
    out
}

/// Writes back what [`warp_local`] read.
fn set_warp_local(ctx: &LaunchCtx, tb: &TbView<'_>, w: u32, mem: &mut DeviceMemory, bytes: &[u8]) {
    let frame = ctx.kernel.local_size as u64;
    let words = frame.div_ceil(4);
    for l in 0..WARP_SIZE as u32 {
        for b in 0..frame {
            let at = gpu::memory::local_word_address(tb.local_base, words, w, l, b / 4) + b % 4;
            let v = bytes[(u64::from(l) * frame + b) as usize];
            mem.write_bytes(at, &[v]).expect("local memory is mapped");
        }
    }
}

/// Lanes of a warp that wait at the same PC: a SIMT stack entry's live lanes that no entry
/// above it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct LaneGroup {
    pc: InstId,
    mask: u32,
}

/// Where every live lane of `warp` is, top entry first: the top group runs, the others are
/// parked on the stack (the pending side of a divergent branch, or waiting at a
/// reconvergence point). Entries about to be popped (empty, or at their reconvergence PC)
/// hold no lanes of their own: theirs are at the PC of the entry below. Lanes at the virtual
/// exit (`pc >= kernel_len`) need nothing and form no group.
fn lane_groups(warp: &Warp, kernel_len: u32) -> Vec<LaneGroup> {
    let mut claimed = warp.exited | !warp.valid;
    let mut out = Vec::new();
    for e in warp.stack.iter().rev() {
        if e.mask == 0 || e.pc == e.rpc {
            continue;
        }
        let mask = e.mask & !claimed;
        claimed |= e.mask;
        if mask != 0 && e.pc < kernel_len {
            out.push(LaneGroup {
                pc: InstId(e.pc),
                mask,
            });
        }
    }
    out
}

// ------------------------------------------------------------------------------------------
// The functional driver with the probe as its step hook
// ------------------------------------------------------------------------------------------

const INSTRUCTION_LIMIT: u64 = 1 << 32;

impl StepHook for Probe<'_> {
    /// Called before each warp instruction: maybe preempt and resume the warp.
    fn before_step(
        &mut self,
        ctx: &LaunchCtx,
        tb: &mut TbView<'_>,
        warp: &mut Warp,
        mem: &mut DeviceMemory,
    ) {
        let Some(top) = warp.next_entry() else {
            return;
        };
        let pc = InstId(top.pc);
        if pc.0 >= self.prep.installed.kernel_len {
            self.failures
                .push(format!("warp {} ran into routine code at {pc}", warp.index));
            return;
        }
        let live_entries = warp
            .stack
            .iter()
            .filter(|e| e.mask != 0 && e.pc != e.rpc)
            .count();
        let converged = live_entries == 1;
        let seen = &mut self.arrivals[pc.index()][usize::from(!converged)];
        *seen += 1;
        if !PROBED_ARRIVALS.contains(seen) || self.failures.len() >= 10 {
            return;
        }
        let fb = self.prep.ctx.flashback(pc);
        let groups = lane_groups(warp, self.prep.installed.kernel_len);
        assert_eq!(
            groups.first().map(|g| (g.pc, g.mask)),
            Some((pc, top.mask & !warp.exited)),
            "the top entry's lanes come first"
        );
        if converged {
            assert_eq!(
                top.mask,
                warp.valid & !warp.exited,
                "a converged warp runs every live lane"
            );
            self.stats.converged += 1;
        } else {
            self.stats.diverged += 1;
            // Lanes parked below the top entry are saved by the routines of their own PCs.
            let parked = &groups[1..];
            self.stats.parked_groups += parked.len() as u64;
            self.stats.parked_needing += u64::from(parked.iter().any(|g| {
                self.prep
                    .live
                    .live_in(g.pc)
                    .iter()
                    .any(|r| !fb.saved.iter().any(|s| s.reg == r))
            }));
        }
        // Where a CS-Defer routine runs instead, `preempt_and_resume` counts it.
        if self.prep.installed.deferral(pc).is_none() {
            self.count_flashback(pc);
        }
        match self.preempt_and_resume(ctx, tb, warp, mem, &groups) {
            Ok(restored) => *warp = restored,
            Err(e) => self.failures.push(format!(
                "{} {pc} ({}, warp {} of TB {:?}, mask {:#010x}): {e}\n    {}",
                self.prep.kernel.name,
                if converged { "converged" } else { "diverged" },
                warp.index,
                tb.ctaid,
                top.mask,
                match self.prep.installed.deferral(pc) {
                    Some(d) => format!("CS-Defer to {} ({} deferred)", d.target, d.deferred),
                    None => fb.describe(&self.prep.kernel),
                },
            )),
        }
    }
}

impl Probe<'_> {
    /// Counts what the flashback of `pc` does.
    fn count_flashback(&mut self, pc: InstId) {
        let fb = self.prep.ctx.flashback(pc);
        self.stats.flashed_back += u64::from(fb.point != pc);
        self.stats.preempt_reverting += u64::from(!fb.preempt_reverts.is_empty());
        self.stats.resume_reverting += u64::from(!fb.resume_reverts().is_empty());
        let copies: Vec<InstId> = fb
            .resume
            .iter()
            .filter_map(|s| match *s {
                ResumeStep::CopyBack(c) => Some(c),
                _ => None,
            })
            .collect();
        self.stats.copying_back += u64::from(!copies.is_empty());
        self.stats.copying_back_shared += u64::from(
            copies
                .iter()
                .any(|&c| self.prep.kernel.insts[c].as_warp_smem_store().is_some()),
        );
        self.stats.reexecuting += u64::from(
            fb.resume
                .iter()
                .any(|s| matches!(s, ResumeStep::Reexecute(_))),
        );
    }
}

fn run_launch(
    ctx: &LaunchCtx,
    mem: &mut DeviceMemory,
    probe: &mut Probe<'_>,
) -> Result<(), String> {
    gpu::func::run_with_hook(ctx, mem, INSTRUCTION_LIMIT, probe)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

// ------------------------------------------------------------------------------------------
// A device for the suite's host programs
// ------------------------------------------------------------------------------------------

/// Device memory with a module's globals placed (what `gpu::Gpu::load_ptx` does).
fn load_globals(module: &Module) -> (DeviceMemory, Vec<u64>) {
    let mut mem = DeviceMemory::new();
    let addrs: Vec<u64> = module
        .globals
        .values()
        .map(|g| mem.alloc(g.size.max(1)))
        .collect();
    for (id, g) in module.globals.iter() {
        let mut bytes = g.init.clone();
        for r in &g.relocations {
            let addr = addrs[r.target.index()].wrapping_add(r.addend as u64);
            let (at, w) = (r.offset as usize, r.width as usize);
            bytes[at..at + w].copy_from_slice(&addr.to_le_bytes()[..w]);
        }
        if !bytes.is_empty() {
            mem.write_bytes(addrs[id.index()], &bytes)
                .expect("global fits");
        }
    }
    (mem, addrs)
}

/// The `LaunchCtx` of a launch of `kernel` (as `gpu::Gpu::launch` builds it).
fn launch_ctx(
    kernel: &Kernel,
    source: &SourceFile,
    global_addrs: &[u64],
    grid: [u32; 3],
    block: [u32; 3],
    dynamic_smem: u32,
    args: &[Vec<u8>],
) -> LaunchCtx {
    assert_eq!(
        args.len(),
        kernel.params.len(),
        "arguments of {}",
        kernel.name
    );
    let mut params = vec![0u8; kernel.param_size as usize];
    for (p, a) in kernel.params.iter().zip(args) {
        params[p.offset as usize..p.offset as usize + a.len()].copy_from_slice(a);
    }
    LaunchCtx::new(
        Arc::new(kernel.clone()),
        Arc::new(source.clone()),
        global_addrs.into(),
        grid,
        block,
        dynamic_smem,
        params,
        15,
        1,
    )
}

/// A `suite::Device` that runs every launch with the probe, over installed routines.
struct ProbingDevice<'p> {
    mem: DeviceMemory,
    source: SourceFile,
    global_addrs: Vec<u64>,
    probes: Vec<Probe<'p>>,
}

impl Device for ProbingDevice<'_> {
    fn alloc(&mut self, bytes: u64) -> Result<DevPtr, DeviceError> {
        Ok(DevPtr(self.mem.alloc(bytes)))
    }

    fn write(&mut self, dst: DevPtr, data: &[u8]) -> Result<(), DeviceError> {
        self.mem
            .write_bytes(dst.0, data)
            .map_err(|e| DeviceError(format!("{e:?}")))
    }

    fn read(&mut self, src: DevPtr, len: u64) -> Result<Vec<u8>, DeviceError> {
        self.mem
            .read_bytes(src.0, len)
            .map(<[u8]>::to_vec)
            .map_err(|e| DeviceError(format!("{e:?}")))
    }

    fn launch(&mut self, l: &Launch<'_>) -> Result<(), DeviceError> {
        let probe = self
            .probes
            .iter_mut()
            .find(|p| p.prep.kernel.name == l.entry)
            .ok_or_else(|| DeviceError(format!("no kernel {}", l.entry)))?;
        let args: Vec<Vec<u8>> = l
            .args
            .iter()
            .map(|a| match *a {
                Arg::Ptr(p) => p.0.to_le_bytes().to_vec(),
                Arg::U32(v) => v.to_le_bytes().to_vec(),
                Arg::I32(v) => v.to_le_bytes().to_vec(),
                Arg::U64(v) => v.to_le_bytes().to_vec(),
                Arg::F32(v) => v.to_le_bytes().to_vec(),
                Arg::F64(v) => v.to_le_bytes().to_vec(),
            })
            .collect();
        let prep = probe.prep;
        let ctx = launch_ctx(
            &prep.installed.kernel,
            &self.source,
            &self.global_addrs,
            [l.grid.x, l.grid.y, l.grid.z],
            [l.block.x, l.block.y, l.block.z],
            l.dynamic_smem,
            &args,
        );
        run_launch(&ctx, &mut self.mem, probe).map_err(DeviceError)
    }
}

fn lower(file: &str, text: &str) -> Module {
    let ast = ptx::parse(text).unwrap_or_else(|e| panic!("{file}: {e}"));
    let module =
        kir::lower::lower_module(&ast, file).unwrap_or_else(|e| panic!("{file}: {}", e[0]));
    let problems = gpu::validate::check_module(&module);
    assert!(problems.is_empty(), "{file}: {problems:?}");
    module
}

fn report(what: &str, s: &Stats, started: Instant) {
    println!(
        "{what}: {} kernels, {} instructions, {} reached and preempted ({} converged + {} \
         diverged probes; {} parked lane groups restored by their own routines, {} diverged \
         probes whose parked lanes need registers the active lanes' routine does not save; {} \
         flash back, {} revert at preemption, {} revert at resume, {} \
         re-execute inside the resume routine, {} copy back an OSRB backup ({} from shared \
         memory); {} switched by a CS-Defer routine instead) in {:.2?}",
        s.kernels,
        s.instructions,
        s.pcs,
        s.converged,
        s.diverged,
        s.parked_groups,
        s.parked_needing,
        s.flashed_back,
        s.preempt_reverting,
        s.resume_reverting,
        s.reexecuting,
        s.copying_back,
        s.copying_back_shared,
        s.deferred,
        started.elapsed()
    );
}

/// Every suite kernel of one target, register-allocated, through its own host program: the
/// probes, then the suite's verification of the output computed from the resumed warps.
fn check_suite(target: Target, alloc: &AllocConfig, config: &CtxBackConfig, combined: bool) {
    let started = Instant::now();
    let mut total = Stats::default();
    let mut failures = Vec::new();
    for k in suite::all() {
        // A kernel not compiled for `target` (tensor-core kernels have no sm_70 PTX) is
        // checked on its oldest target.
        let target = if k.ptx(target).is_some() {
            target
        } else {
            k.default_target()
        };
        let file = format!("kernels/{0}/{0}.{1}.ptx", k.name(), target.name());
        let text = k.ptx(target).unwrap();
        let module = lower(&file, text);
        let prepared: Vec<Prepared> = module
            .kernels
            .values()
            .map(|kern| {
                let a = allocate(kern, alloc).expect("allocates");
                prepare(a.kernel, config, combined)
            })
            .collect();
        let (mem, global_addrs) = load_globals(&module);
        let mut dev = ProbingDevice {
            mem,
            source: SourceFile::new(&file, text),
            global_addrs,
            probes: prepared.iter().map(|p| Probe::new(p, 0x5eed)).collect(),
        };
        let verdict = k.run(&mut dev, Size::Small, 1);
        for probe in dev.probes {
            let (s, f) = probe.finish();
            total.add(&s);
            failures.extend(f.into_iter().map(|f| format!("{file}: {f}")));
        }
        match verdict {
            Ok(v) if v.passed() => {}
            Ok(v) => failures.push(format!("{file}: after the resumes: {v:?}")),
            Err(e) => failures.push(format!("{file}: {e}")),
        }
    }
    report(&format!("suite {}", target.name()), &total, started);
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(total.kernels >= 18, "{} kernels", total.kernels);
    assert!(
        total.pcs * 10 > total.instructions * 8,
        "most instructions are reached"
    );
    assert!(total.diverged > 0 && total.flashed_back > 0 && total.preempt_reverting > 0);
    assert!(total.parked_groups > 0 && total.parked_needing > 0);
    assert_eq!(total.deferred > 0, combined);
}

#[test]
fn suite_sm70_routines_restore_the_live_registers() {
    check_suite(
        Target::Sm70,
        &AllocConfig::default(),
        &CtxBackConfig::default(),
        false,
    );
}

/// CTXBack+CS-Defer: CS-Defer routines where the combination defers, CTXBack's elsewhere.
#[test]
fn suite_sm70_combined_routines_restore_the_live_registers() {
    check_suite(
        Target::Sm70,
        &AllocConfig::default(),
        &CtxBackConfig::default(),
        true,
    );
}

/// sm_90 with uniform registers and on-chip scalar register backup.
#[test]
fn suite_sm90_routines_restore_the_live_registers() {
    let alloc = AllocConfig {
        uniform_registers: 63,
        ..AllocConfig::default()
    };
    let config = CtxBackConfig {
        osrb: Some(OsrbConfig::default()),
        ..CtxBackConfig::default()
    };
    check_suite(Target::Sm90, &alloc, &config, false);
}

// ------------------------------------------------------------------------------------------
// Random structured programs
// ------------------------------------------------------------------------------------------

/// General 32-bit registers `%r1..=%r13` (`%r0` is `%tid.x`).
const GEN_R: u32 = 13;
/// Loop counter and bound of nesting level `d`: `%r{14 + 2d}`, `%r{15 + 2d}`.
const LOOP_R: u32 = 14;
const MAX_DEPTH: u32 = 3;
/// General 64-bit registers `%rd3..=%rd8` (`%rd0` the input, `%rd1` the output, `%rd2` this
/// thread's output slots).
const GEN_RD: Range<u32> = 3..9;
const GEN_F: u32 = 6;
const GEN_P: u32 = 5;
/// 32-bit words of the input buffer.
const IN_WORDS: u32 = 256;
/// Output words per thread: 8 written in the body, then every register at the end.
const MID_SLOTS: u32 = 8;
const R_SLOTS: u32 = MID_SLOTS;
const RD_SLOTS: u32 = R_SLOTS + GEN_R + 1;
const F_SLOTS: u32 = RD_SLOTS + 2 * (GEN_RD.end - GEN_RD.start);
const P_SLOTS: u32 = F_SLOTS + GEN_F;
const SLOTS: u32 = (P_SLOTS + GEN_P).next_multiple_of(2);

/// A seeded generator of structured PTX kernels `rnd(.param .u64 p_in, .param .u64 p_out)`.
struct Gen {
    rng: Rng,
    out: String,
    labels: u32,
    depth: u32,
    /// Statements left to emit.
    budget: u32,
}

impl Gen {
    fn line(&mut self, s: &str) {
        self.out.push_str("    ");
        self.out.push_str(s);
        self.out.push('\n');
    }

    fn label(&mut self) -> String {
        self.labels += 1;
        format!("L{}", self.labels)
    }

    /// A general 32-bit register to write.
    fn rd32(&mut self) -> String {
        format!("%r{}", 1 + self.rng.below(u64::from(GEN_R)))
    }

    /// A 32-bit register to read: general, `%tid.x`, or an enclosing loop's counter.
    fn rs32(&mut self) -> String {
        let loops = 2 * self.depth;
        let n = self.rng.below(u64::from(GEN_R + 1 + loops)) as u32;
        if n <= GEN_R {
            format!("%r{n}")
        } else {
            format!("%r{}", LOOP_R + n - GEN_R - 1)
        }
    }

    fn imm32(&mut self) -> String {
        match self.rng.below(4) {
            0 => format!("{}", self.rng.below(16)),
            1 => format!("-{}", 1 + self.rng.below(100)),
            _ => format!("0x{:x}", self.rng.next() as u32),
        }
    }

    /// A 32-bit source: register (mostly) or immediate.
    fn src32(&mut self) -> String {
        if self.rng.chance(75) {
            self.rs32()
        } else {
            self.imm32()
        }
    }

    fn r64(&mut self) -> String {
        format!(
            "%rd{}",
            GEN_RD.start + self.rng.below(u64::from(GEN_RD.end - GEN_RD.start)) as u32
        )
    }

    fn src64(&mut self) -> String {
        if self.rng.chance(75) {
            self.r64()
        } else {
            format!("0x{:x}", self.rng.next())
        }
    }

    fn f(&mut self) -> String {
        format!("%f{}", self.rng.below(u64::from(GEN_F)))
    }

    fn fsrc(&mut self) -> String {
        if self.rng.chance(80) {
            self.f()
        } else {
            format!(
                "0f{:08X}",
                self.rng
                    .pick(&[0x3f80_0000u32, 0x4000_0000, 0xbf00_0000, 0x4120_0000])
            )
        }
    }

    fn p(&mut self) -> String {
        format!("%p{}", self.rng.below(u64::from(GEN_P)))
    }

    fn guard(&mut self) -> String {
        if self.rng.chance(20) {
            let neg = if self.rng.chance(50) { "!" } else { "" };
            format!("@{neg}{} ", self.p())
        } else {
            String::new()
        }
    }

    fn odd32(&mut self) -> String {
        format!("0x{:x}", self.rng.next() as u32 | 1)
    }

    /// 32-bit integer arithmetic, half of it in the reversible forms of `revert.rs`.
    fn int32(&mut self) {
        let g = self.guard();
        let d = self.rd32();
        let mut x = self.src32();
        while x == d {
            x = self.src32();
        }
        let (a, b, c) = (self.src32(), self.src32(), self.src32());
        let s = match self.rng.below(28) {
            0 => format!("add.u32 {d}, {d}, {x};"),
            1 => format!("add.s32 {d}, {x}, {d};"),
            2 => format!("sub.u32 {d}, {d}, {x};"),
            3 => format!("sub.s32 {d}, {x}, {d};"),
            4 => format!("xor.b32 {d}, {d}, {x};"),
            5 => format!("mul.lo.u32 {d}, {d}, {};", self.odd32()),
            6 => format!("mul.lo.s32 {d}, {}, {d};", self.odd32()),
            7 => format!("not.b32 {d}, {d};"),
            8 => format!("neg.s32 {d}, {d};"),
            9 => format!("add.u32 {d}, {a}, {b};"),
            10 => format!("sub.s32 {d}, {a}, {b};"),
            11 => format!("mul.lo.u32 {d}, {a}, {b};"),
            12 => format!("mad.lo.u32 {d}, {a}, {b}, {c};"),
            13 => format!("and.b32 {d}, {a}, {b};"),
            14 => format!("or.b32 {d}, {a}, {b};"),
            15 => format!("shl.b32 {d}, {a}, {};", self.rng.below(32)),
            16 => format!("shr.u32 {d}, {a}, {};", self.rng.below(32)),
            17 => format!("shr.s32 {d}, {a}, {};", self.rng.below(32)),
            18 => format!("min.s32 {d}, {a}, {b};"),
            19 => format!("max.u32 {d}, {a}, {b};"),
            20 => format!("selp.b32 {d}, {a}, {b}, {};", self.p()),
            21 => format!("mov.u32 {d}, {a};"),
            22 => format!("cvt.u32.u64 {d}, {};", self.r64()),
            23 => format!("mul.hi.u32 {d}, {a}, {b};"),
            24 => format!("popc.b32 {d}, {a};"),
            25 => format!("mov.b32 {d}, {};", self.f()),
            26 => format!("cvt.rzi.s32.f32 {d}, {};", self.f()),
            _ => format!("xor.b32 {d}, {a}, {b};"),
        };
        self.line(&format!("{g}{s}"));
    }

    /// 64-bit arithmetic, with its reversible forms, pairs and wide products.
    fn int64(&mut self) {
        let g = self.guard();
        let d = self.r64();
        let mut x = self.src64();
        while x == d {
            x = self.src64();
        }
        let (a, b) = (self.src64(), self.src64());
        let (r1, r2) = (self.rs32(), self.src32());
        let s = match self.rng.below(18) {
            0 => format!("add.s64 {d}, {d}, {x};"),
            1 => format!("sub.u64 {d}, {x}, {d};"),
            2 => format!("xor.b64 {d}, {d}, {x};"),
            3 => format!("mul.lo.u64 {d}, {d}, 0x{:x};", self.rng.next() | 1),
            4 => format!("not.b64 {d}, {d};"),
            5 => format!("neg.s64 {d}, {d};"),
            6 => format!("mul.wide.u32 {d}, {r1}, {r2};"),
            7 => format!("mul.wide.s32 {d}, {r1}, {r2};"),
            8 => format!("mad.wide.u32 {d}, {r1}, {r2}, {};", self.r64()),
            9 => format!("cvt.u64.u32 {d}, {r1};"),
            10 => format!("cvt.s64.s32 {d}, {r1};"),
            11 => format!("add.s64 {d}, {a}, {b};"),
            12 => format!("shl.b64 {d}, {a}, {};", self.rng.below(64)),
            13 => format!("shr.u64 {d}, {a}, {};", self.rng.below(64)),
            14 => format!("and.b64 {d}, {a}, {b};"),
            15 => format!("mov.b64 {d}, {{{r1}, {}}};", self.rs32()),
            16 if g.is_empty() => {
                let (lo, mut hi) = (self.rd32(), self.rd32());
                while hi == lo {
                    hi = self.rd32();
                }
                format!("mov.b64 {{{lo}, {hi}}}, {};", self.r64())
            }
            _ => format!("selp.b64 {d}, {a}, {b}, {};", self.p()),
        };
        self.line(&format!("{g}{s}"));
    }

    fn float(&mut self) {
        let g = self.guard();
        let d = self.f();
        let (a, b, c) = (self.fsrc(), self.fsrc(), self.fsrc());
        let s = match self.rng.below(12) {
            0 => format!("add.f32 {d}, {a}, {b};"),
            1 => format!("sub.rn.f32 {d}, {a}, {b};"),
            2 => format!("mul.f32 {d}, {a}, {b};"),
            3 => format!("fma.rn.f32 {d}, {a}, {b}, {c};"),
            4 => format!("neg.f32 {d}, {a};"),
            5 => format!("abs.f32 {d}, {a};"),
            6 => format!("min.f32 {d}, {a}, {b};"),
            7 => format!("max.f32 {d}, {a}, {b};"),
            8 => format!("cvt.rn.f32.u32 {d}, {};", self.rs32()),
            9 => format!("cvt.rn.f32.s32 {d}, {};", self.rs32()),
            10 => format!("mov.b32 {d}, {};", self.rs32()),
            _ => format!("add.f32 {d}, {d}, {a};"),
        };
        self.line(&format!("{g}{s}"));
    }

    fn pred(&mut self) {
        let d = self.p();
        let (a, b) = (self.rs32(), self.src32());
        let cmp = self.rng.pick(&["lt", "le", "gt", "ge", "eq", "ne"]);
        let s = match self.rng.below(9) {
            0 | 1 => format!("setp.{cmp}.u32 {d}, {a}, {b};"),
            2 => format!("setp.{cmp}.s32 {d}, {a}, {b};"),
            3 => format!("setp.{cmp}.f32 {d}, {}, {};", self.f(), self.fsrc()),
            4 => format!("setp.ne.u64 {d}, {}, {};", self.r64(), self.src64()),
            5 => format!("and.pred {d}, {}, {};", self.p(), self.p()),
            6 => format!("or.pred {d}, {}, {};", self.p(), self.p()),
            7 => {
                let mut x = self.p();
                while x == d {
                    x = self.p();
                }
                format!("xor.pred {d}, {d}, {x};")
            }
            _ => format!("not.pred {d}, {d};"),
        };
        self.line(&s);
    }

    /// Four different general 32-bit registers to write.
    fn distinct32(&mut self) -> [String; 4] {
        let mut regs: Vec<String> = Vec::new();
        while regs.len() < 4 {
            let r = self.rd32();
            if !regs.contains(&r) {
                regs.push(r);
            }
        }
        regs.try_into().expect("four")
    }

    /// The shape of papers/ji-ctxback Fig. 4 on random registers: `x`'s old value is wanted
    /// back by reverting the `add`, whose operand `a` the `mov` overwrote — a revert at resume,
    /// after re-executing the `mul`.
    fn fig4(&mut self) {
        let [a, b, c, x] = &self.distinct32();
        let (m, k) = (self.odd32(), self.imm32());
        self.line(&format!("mul.lo.u32 {a}, {b}, {m};"));
        self.line(&format!("xor.b32 {c}, {x}, {a};"));
        self.line(&format!("add.u32 {x}, {x}, {a};"));
        self.line(&format!("mov.u32 {a}, {k};"));
    }

    /// The shape of papers/ji-ctxback Fig. 5 on random registers: the warp-uniform `%s0` is
    /// read, then overwritten by an irreversible `or`, so re-executing the read needs OSRB's
    /// backup of `%s0` (§III-D) when it sits in a uniform register.
    fn fig5(&mut self) {
        let [v2, v7, v11, v12] = &self.distinct32();
        let k = self.imm32();
        self.line(&format!("add.u32 {v7}, {v2}, %s0;"));
        self.line(&format!("or.b32 %s0, %s0, {k};"));
        self.line(&format!("mul.lo.u32 {v11}, {v11}, {v2};"));
        self.line(&format!("sub.u32 {v12}, {v11}, {v7};"));
    }

    /// `%rdT = p_in + 4 * (a & (words - 1))` for an element of `bytes` bytes.
    fn address(&mut self, bytes: u32) -> String {
        let (t, a, rd) = (self.rd32(), self.rs32(), self.r64());
        let words = IN_WORDS * 4 / bytes;
        self.line(&format!("and.b32 {t}, {a}, {};", words - 1));
        self.line(&format!("mul.wide.u32 {rd}, {t}, {bytes};"));
        self.line(&format!("add.s64 {rd}, %rd0, {rd};"));
        rd
    }

    fn load(&mut self) {
        match self.rng.below(4) {
            0 => {
                let at = self.address(4);
                let d = self.rd32();
                self.line(&format!("ld.global.u32 {d}, [{at}];"));
            }
            1 => {
                let at = self.address(4);
                let d = self.f();
                self.line(&format!("ld.global.f32 {d}, [{at}];"));
            }
            2 => {
                let at = self.address(8);
                let d = self.r64();
                self.line(&format!("ld.global.u64 {d}, [{at}];"));
            }
            _ => {
                let at = self.address(8);
                let (a, mut b) = (self.rd32(), self.rd32());
                while b == a {
                    b = self.rd32();
                }
                self.line(&format!("ld.global.v2.u32 {{{a}, {b}}}, [{at}];"));
            }
        }
    }

    fn stmt(&mut self) {
        self.budget = self.budget.saturating_sub(1);
        let nest = self.depth < MAX_DEPTH && self.budget > 4;
        match self.rng.below(100) {
            0..=7 if nest => self.if_else(),
            8..=13 if nest => self.if_then(),
            14..=21 if nest => self.counted_loop(),
            22..=27 => self.load(),
            28..=30 => {
                let (s, a) = (self.rng.below(u64::from(MID_SLOTS)), self.rs32());
                self.line(&format!("st.global.u32 [%rd2+{}], {a};", 4 * s));
            }
            31..=32 => {
                let s = 4 * self.rng.below(8);
                if self.rng.chance(50) {
                    let a = self.rs32();
                    self.line(&format!("st.local.u32 [lbuf+{s}], {a};"));
                } else {
                    let d = self.rd32();
                    self.line(&format!("ld.local.u32 {d}, [lbuf+{s}];"));
                }
            }
            33 if self.depth == 0 => self.line("bar.sync 0;"),
            34 => self.fig4(),
            35 => {
                let d = self.rd32();
                let s = self.rng.pick(&["%laneid", "%ntid.x", "%clock", "%tid.x"]);
                self.line(&format!("mov.u32 {d}, {s};"));
            }
            // Outside branches and loops `%s0` stays warp-uniform.
            36..=39 if self.depth == 0 => self.fig5(),
            36..=65 => self.int32(),
            66..=79 => self.int64(),
            80..=89 => self.float(),
            _ => self.pred(),
        }
    }

    fn block(&mut self) {
        let n = 1 + self.rng.below(5);
        for _ in 0..n {
            if self.budget == 0 {
                break;
            }
            self.stmt();
        }
    }

    /// A lane-dependent (mostly) condition into a predicate; returns the guard to branch on.
    fn condition(&mut self) -> String {
        let p = self.p();
        let a = self.rs32();
        let b = self.src32();
        let cmp = self.rng.pick(&["lt", "gt", "ne", "eq"]);
        self.line(&format!("setp.{cmp}.u32 {p}, {a}, {b};"));
        if self.rng.chance(50) {
            format!("@{p}")
        } else {
            format!("@!{p}")
        }
    }

    fn if_else(&mut self) {
        let (els, end) = (self.label(), self.label());
        let c = self.condition();
        self.line(&format!("{c} bra {els};"));
        self.depth += 1;
        self.block();
        self.line(&format!("bra {end};"));
        self.out.push_str(&format!("{els}:\n"));
        self.block();
        self.depth -= 1;
        self.out.push_str(&format!("{end}:\n"));
    }

    fn if_then(&mut self) {
        let end = self.label();
        let c = self.condition();
        self.line(&format!("{c} bra {end};"));
        self.depth += 1;
        self.block();
        self.depth -= 1;
        self.out.push_str(&format!("{end}:\n"));
    }

    /// A loop running 1 to 4 times, the count lane-dependent half the time.
    fn counted_loop(&mut self) {
        let (ctr, bound) = (
            format!("%r{}", LOOP_R + 2 * self.depth),
            format!("%r{}", LOOP_R + 2 * self.depth + 1),
        );
        if self.rng.chance(50) {
            let a = self.rs32();
            self.line(&format!("and.b32 {bound}, {a}, 3;"));
            self.line(&format!("add.u32 {bound}, {bound}, 1;"));
        } else {
            let n = 1 + self.rng.below(3);
            self.line(&format!("mov.u32 {bound}, {n};"));
        }
        self.line(&format!("mov.u32 {ctr}, 0;"));
        let top = self.label();
        self.out.push_str(&format!("{top}:\n"));
        self.depth += 1;
        self.block();
        self.depth -= 1;
        let p = self.p();
        self.line(&format!("add.u32 {ctr}, {ctr}, 1;"));
        self.line(&format!("setp.lt.u32 {p}, {ctr}, {bound};"));
        self.line(&format!("@{p} bra {top};"));
    }

    /// The whole kernel.
    fn program(seed: u64) -> String {
        let mut g = Gen {
            rng: Rng(suite::Rng::new(seed)),
            out: String::new(),
            labels: 0,
            depth: 0,
            budget: 20 + (seed % 30) as u32,
        };
        g.out.push_str(&format!(
            ".version 7.0\n.target sm_70\n.address_size 64\n\
             .visible .entry rnd(.param .u64 p_in, .param .u64 p_out)\n{{\n\
             .reg .b32 %r<{}>;\n.reg .b64 %rd<{}>;\n.reg .f32 %f<{GEN_F}>;\n\
             .reg .pred %p<{GEN_P}>;\n.reg .b32 %s0;\n.local .align 8 .b32 lbuf[8];\n",
            LOOP_R + 2 * MAX_DEPTH,
            GEN_RD.end
        ));
        g.line("mov.u32 %r0, %tid.x;");
        g.line("ld.param.u64 %rd0, [p_in];");
        g.line("ld.param.u64 %rd1, [p_out];");
        g.line(&format!("mul.wide.u32 %rd2, %r0, {};", 4 * SLOTS));
        g.line("add.s64 %rd2, %rd1, %rd2;");
        g.line("cvt.u32.u64 %s0, %rd0;");
        for k in 1..=GEN_R {
            let (m, a) = (g.odd32(), g.imm32());
            g.line(&format!("mad.lo.u32 %r{k}, %r0, {m}, {a};"));
        }
        for k in GEN_RD {
            let m = g.odd32();
            g.line(&format!("mul.wide.u32 %rd{k}, %r{}, {m};", k - 2));
        }
        for k in 0..GEN_F {
            g.line(&format!("cvt.rn.f32.u32 %f{k}, %r{};", k + 1));
        }
        for k in 0..GEN_P {
            let t = g.rng.below(64);
            g.line(&format!("setp.lt.u32 %p{k}, %r{}, {t};", k + 5));
        }
        for k in 0..8 {
            g.line(&format!("st.local.u32 [lbuf+{}], %r{};", 4 * k, k + 1));
        }
        while g.budget > 0 {
            g.stmt();
        }
        for k in 1..=GEN_R {
            g.line(&format!(
                "st.global.u32 [%rd2+{}], %r{k};",
                4 * (R_SLOTS + k - 1)
            ));
        }
        for (n, k) in GEN_RD.enumerate() {
            g.line(&format!(
                "st.global.u64 [%rd2+{}], %rd{k};",
                4 * (RD_SLOTS + 2 * n as u32)
            ));
        }
        for k in 0..GEN_F {
            g.line(&format!(
                "st.global.f32 [%rd2+{}], %f{k};",
                4 * (F_SLOTS + k)
            ));
        }
        for k in 0..GEN_P {
            g.line(&format!("selp.u32 %r1, 1, 0, %p{k};"));
            g.line(&format!("st.global.u32 [%rd2+{}], %r1;", 4 * (P_SLOTS + k)));
        }
        g.line("exit;");
        g.out.push_str("}\n");
        g.out
    }
}

/// Runs `kernel` once over fresh inputs; the output buffer.
fn run_random(
    kernel: &Kernel,
    module: &Module,
    source: &SourceFile,
    input: &[u8],
    threads: u32,
    probe: Option<&mut Probe<'_>>,
) -> Result<Vec<u8>, String> {
    let (mut mem, addrs) = load_globals(module);
    let inp = mem.alloc(input.len() as u64);
    mem.write_bytes(inp, input).expect("input fits");
    let out_len = u64::from(threads * SLOTS * 4);
    let out = mem.alloc(out_len);
    let args = [inp.to_le_bytes().to_vec(), out.to_le_bytes().to_vec()];
    let ctx = launch_ctx(kernel, source, &addrs, [1, 1, 1], [threads, 1, 1], 0, &args);
    match probe {
        Some(p) => run_launch(&ctx, &mut mem, p)?,
        None => {
            gpu::func::run(&ctx, &mut mem, INSTRUCTION_LIMIT).map_err(|e| e.to_string())?;
        }
    }
    Ok(mem.read_bytes(out, out_len).expect("output").to_vec())
}

/// The analysis settings the random programs rotate through, so that other flashback points
/// than the default costs pick are executed too.
fn ctxback_config(seed: u64) -> CtxBackConfig {
    let condition = match (seed / 6) % 8 {
        0 => Condition::Basic,
        1 => Condition::Relaxed,
        _ => Condition::Reverting,
    };
    let cost = if (seed / 5).is_multiple_of(2) {
        CostModel::default()
    } else {
        // Saving dear, re-executing cheap: long windows, many re-executions and reverts.
        CostModel {
            save_word: 32,
            restore_word: 32,
            scalar: 4,
            alu: 1,
            memory: 4,
        }
    };
    CtxBackConfig {
        condition,
        cost,
        alias: if seed.is_multiple_of(2) {
            AliasModel::Conservative
        } else {
            // The program's pointers never overlap: global loads may be re-executed.
            AliasModel::RestrictParams
        },
        // With the uniform-register allocation (`alloc_config`): scalar backups, and copies
        // back from the kernel's own register copies on both variants. Every other time, the
        // backups go to the warp's shared memory, two words that the sites take turns in.
        osrb: (seed % 3 == 2).then(|| {
            if (seed / 3) % 2 == 1 {
                OsrbConfig {
                    uniform_registers: 0,
                    shared_words: 2,
                    registers: false,
                }
            } else {
                OsrbConfig::default()
            }
        }),
        ..CtxBackConfig::default()
    }
}

/// The register-allocation variants the random programs rotate through.
fn alloc_config(seed: u64) -> (&'static str, AllocConfig) {
    match seed % 3 {
        0 => ("allocated", AllocConfig::default()),
        1 => (
            "allocated under pressure",
            AllocConfig {
                max_registers: 16,
                predicate_registers: 4,
                ..AllocConfig::default()
            },
        ),
        _ => (
            "allocated with uniform registers",
            AllocConfig {
                uniform_registers: 63,
                ..AllocConfig::default()
            },
        ),
    }
}

const RANDOM_PROGRAMS: u64 = 100;

#[test]
fn random_program_routines_restore_the_live_registers() {
    let started = Instant::now();
    let mut total = Stats::default();
    let mut failures = Vec::new();
    for seed in 0..RANDOM_PROGRAMS {
        let text = Gen::program(seed);
        let file = format!("random{seed}.ptx");
        let module = lower(&file, &text);
        let source = SourceFile::new(&file, &text);
        let original = module.kernels.values().next().expect("one kernel");
        let mut rng = Rng(suite::Rng::new(seed ^ 0xfeed));
        let input: Vec<u8> = (0..IN_WORDS)
            .flat_map(|_| (rng.next() as u32).to_le_bytes())
            .collect();
        let threads = rng.pick(&[32, 48, 64, 96]);
        let config = ctxback_config(seed);
        let combined = (seed / 2) % 2 == 1;
        let (alloc_name, alloc) = alloc_config(seed);
        let allocated = allocate(original, &alloc).unwrap_or_else(|e| panic!("{file}: {e}"));
        for (variant, kernel) in [
            ("virtual registers", original.clone()),
            (alloc_name, allocated.kernel),
        ] {
            let prep = prepare(kernel, &config, combined);
            // %clock makes the output depend on the instruction count, which allocation
            // changes: the reference is a plain run of the same kernel.
            let reference = run_random(&prep.kernel, &module, &source, &input, threads, None)
                .unwrap_or_else(|e| panic!("{file}: {e}\n{text}"));
            let mut probe = Probe::new(&prep, seed);
            let result = run_random(
                &prep.installed.kernel,
                &module,
                &source,
                &input,
                threads,
                Some(&mut probe),
            );
            let (s, f) = probe.finish();
            total.add(&s);
            let name = format!(
                "{file} ({variant}, {threads} threads, {config:?}{})",
                if combined { ", CTXBack+CS-Defer" } else { "" }
            );
            failures.extend(f.into_iter().map(|f| format!("{name}: {f}")));
            match result {
                Ok(out) if out == reference => {}
                Ok(_) => failures.push(format!("{name}: the output differs after the resumes")),
                Err(e) => failures.push(format!("{name}: {e}")),
            }
        }
    }
    report("random programs", &total, started);
    assert!(
        failures.is_empty(),
        "{} failures (regenerate a program with `Gen::program(seed)`):\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(total.diverged > 0 && total.flashed_back > 0 && total.reexecuting > 0);
    assert!(total.preempt_reverting > 0 && total.resume_reverting > 0);
    assert!(total.parked_groups > 0 && total.parked_needing > 0 && total.deferred > 0);
    assert!(total.copying_back_shared > 0 && total.copying_back > total.copying_back_shared);
}

/// papers/ji-ctxback Fig. 5 as a kernel: a warp-uniform `%s4` (from a parameter) is read by
/// I0 and then overwritten by the irreversible `or` of I1. Allocated with uniform registers,
/// `%s4` lives in a uniform register, and OSRB backs it up before I1: the routines copy it
/// back. The rewritten kernel must compute what the original does, and every preemption must
/// restore the live registers (the backup included).
const FIG5_KERNEL: &str = include_str!("data/fig5_osrb.ptx");

/// The same with no register to spare at I1, and a different `%s4` in every warp: the backup
/// goes to the warp's own shared memory.
const FIG5_SHARED_KERNEL: &str = include_str!("data/fig5_osrb_shared.ptx");

/// Runs a Fig. 5 kernel allocated with uniform registers, rewritten by OSRB (`osrb` gives
/// the warp's uniform registers for backups; `None`: every one the allocator left), over
/// `threads` threads, preempting it everywhere. Returns the backups' slots and the counts.
fn fig5_with_backups(
    file: &str,
    text: &str,
    osrb: impl FnOnce(&regalloc::Allocation) -> OsrbConfig,
    threads: u32,
) -> (Vec<BackupSlot>, Stats) {
    let module = lower(file, text);
    let source = SourceFile::new(file, text);
    let original = module.kernels.values().next().expect("one kernel");
    let alloc = AllocConfig {
        uniform_registers: 63,
        ..AllocConfig::default()
    };
    let allocation = allocate(original, &alloc).expect("allocates");
    let config = CtxBackConfig {
        osrb: Some(osrb(&allocation)),
        ..CtxBackConfig::default()
    };
    let allocated = allocation.kernel;
    let mut rng = Rng(suite::Rng::new(5));
    let input: Vec<u8> = (0..IN_WORDS)
        .flat_map(|_| (rng.next() as u32).to_le_bytes())
        .collect();
    let reference = run_random(&allocated, &module, &source, &input, threads, None).expect("runs");
    let slots = backup_scalars(&allocated, &config)
        .0
        .backups
        .iter()
        .map(|b| b.slot)
        .collect();
    let prep = prepare(allocated, &config, false);
    let plain = run_random(&prep.kernel, &module, &source, &input, threads, None).expect("runs");
    assert_eq!(
        plain, reference,
        "{file}: the backups change what the kernel computes"
    );
    let mut probe = Probe::new(&prep, 5);
    let result = run_random(
        &prep.installed.kernel,
        &module,
        &source,
        &input,
        threads,
        Some(&mut probe),
    );
    let (s, failures) = probe.finish();
    report(file, &s, Instant::now());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(result.expect("runs"), reference, "{file}");
    assert!(
        s.copying_back > 0,
        "{file}: no resume routine copied a backup back"
    );
    (slots, s)
}

#[test]
fn fig5_scalar_backup_routines_restore_the_live_registers() {
    let (slots, _) = fig5_with_backups("fig5.ptx", FIG5_KERNEL, |_| OsrbConfig::default(), 32);
    assert!(
        matches!(
            slots[..],
            [BackupSlot::UnusedUniform(_) | BackupSlot::DeadUniform(_)]
        ),
        "{slots:?}"
    );
}

/// §III-D's last resort, executed: the warp's uniform registers are all taken and no vector
/// register is free, so `%s4` is backed up into the warp's own shared memory. (Two warps run
/// it, each with its own `%s4`; that warps' words do not overlap is checked where the
/// functional core can interleave them: `crates/gpu/tests/warp_smem.rs`.)
#[test]
fn fig5_shared_memory_backup_routines_restore_the_live_registers() {
    let (slots, _) = fig5_with_backups(
        "fig5_shared.ptx",
        FIG5_SHARED_KERNEL,
        |a| OsrbConfig {
            uniform_registers: a.uniform_count,
            shared_words: 8,
            registers: true,
        },
        64,
    );
    assert_eq!(slots, [BackupSlot::Shared(0)]);
}
