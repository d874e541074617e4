//! CTXBack on every suite kernel, both PTX targets, after register allocation.
//!
//! Structural properties of every flashback, and an independent symbolic check that each
//! preemption + resume routine pair rebuilds the context of the preempted instruction:
//! registers hold *terms* (an instruction applied to the terms it read), the window
//! `[f, i)` is run from symbolic initial values, the preemption routine's reverts and saves
//! are applied to that state, and the resume routine is run from garbage registers; every
//! register live at `i` must end with the same term. A revert gives back the shared operand's
//! term only if the register holds the term the reverted instruction wrote and its other
//! operands hold the terms they had then — the algebraic content of an exact inverse. The
//! same check runs with a warp preempted and resumed before every instruction of a block in
//! turn (repeated preemption, where only what each resume rebuilt is in the registers).
//!
//! Run with `--nocapture` for the per-kernel context sizes.

use std::collections::HashMap;

use analysis::ctxback::{
    generate_routines, preempt_routine, resume_routine, revert_of, CtxBack, CtxBackConfig,
    Flashback, ResumeStep,
};
use analysis::{Liveness, RegSet};
use kir::inst::Op;
use kir::{Id, InstId, Kernel, Reg};
use regalloc::{allocate, AllocConfig};

fn kernels() -> Vec<(String, Kernel)> {
    let mut out = Vec::new();
    for k in suite::all() {
        for &(t, text) in k.sources() {
            let ast = ptx::parse(text).expect("suite PTX parses");
            let m = kir::lower::lower_module(&ast, k.name()).expect("suite PTX lowers");
            for kern in m.kernels.values() {
                let a = allocate(kern, &AllocConfig::default()).expect("allocates");
                out.push((format!("{}/{}/{}", k.name(), t.name(), kern.name), a.kernel));
            }
        }
    }
    out
}

#[derive(Default)]
struct Terms {
    ids: HashMap<(u32, u32, Vec<u64>), u64>,
    apps: HashMap<u64, (u32, Vec<u64>)>,
    next: u64,
}

impl Terms {
    fn fresh(&mut self) -> u64 {
        self.next += 1;
        self.next
    }

    fn app(&mut self, pc: u32, slot: u32, args: Vec<u64>) -> u64 {
        if let Some(&t) = self.ids.get(&(pc, slot, args.clone())) {
            return t;
        }
        let t = self.fresh();
        self.ids.insert((pc, slot, args.clone()), t);
        self.apps.insert(t, (pc, args));
        t
    }
}

/// What re-executing `pc` reads, in a fixed order: uses, and destinations when guarded.
fn reads(k: &Kernel, pc: InstId) -> Vec<Reg> {
    let inst = &k.insts[pc];
    let mut v: Vec<Reg> = inst.uses().collect();
    if inst.guard.is_some() {
        v.extend(inst.defs());
    }
    v.sort();
    v.dedup();
    v
}

/// Registers `pc` writes, with the odd half of a 64-bit destination (conservatively: any
/// even destination's partner is clobbered when the op writes 64 bits).
fn writes(k: &Kernel, pc: InstId) -> Vec<(Reg, u32)> {
    let inst = &k.insts[pc];
    let mut v = Vec::new();
    for (slot, d) in inst.dsts().iter().enumerate() {
        let Some(d) = *d else { continue };
        v.push((d, slot as u32));
        let wide = analysis::ctxback::widths::def_bits(inst, slot) > 32;
        let p = d.index() + 1;
        if wide
            && d.index() % 2 == 0
            && p < k.regs.len()
            && k.regs[Reg::new(p)].name.starts_with(&k.regs[d].name[..1])
        {
            v.push((Reg::new(p), 100 + slot as u32));
        }
    }
    v
}

fn run(k: &Kernel, terms: &mut Terms, st: &mut [u64], pc: InstId) {
    let args: Vec<u64> = reads(k, pc).iter().map(|r| st[r.index()]).collect();
    for (r, slot) in writes(k, pc) {
        st[r.index()] = terms.app(pc.0, slot, args.clone());
    }
}

fn revert(k: &Kernel, terms: &mut Terms, st: &mut [u64], pc: InstId) {
    let rv = revert_of(&k.insts[pc]).expect("planned reverts are reversible");
    let inputs = reads(k, pc);
    let ok = match terms.apps.get(&st[rv.shared.index()]) {
        Some((p, args)) if *p == pc.0 => rv.operands.iter().all(|u| {
            let at = inputs.iter().position(|x| x == u).expect("operand is read");
            args[at] == st[u.index()]
        }),
        _ => false,
    };
    st[rv.shared.index()] = if ok {
        let (_, args) = &terms.apps[&st[rv.shared.index()]];
        args[inputs
            .iter()
            .position(|&x| x == rv.shared)
            .expect("shared is read")]
    } else {
        terms.fresh()
    };
}

/// `mov y, x` undoing the copy `c: mov x, y` (OSRB): `y` gets back what `c` copied, if `x`
/// still holds `c`'s result.
fn copy_back(k: &Kernel, terms: &mut Terms, st: &mut [u64], c: InstId) {
    let inst = &k.insts[c];
    let (Some(x), kir::inst::Operand::Reg(y)) = (inst.dsts[0], inst.srcs[0]) else {
        panic!("{c} is not a register copy");
    };
    st[y.index()] = match terms.apps.get(&st[x.index()]) {
        Some((p, args)) if *p == c.0 => args[0],
        _ => terms.fresh(),
    };
}

/// Whether the routines of `fb` rebuild every register live at `fb.pc`.
fn check(k: &Kernel, live: &RegSet, fb: &Flashback) -> Result<(), String> {
    let n = k.regs.len();
    let mut terms = Terms::default();
    let mut st: Vec<u64> = (0..n).map(|_| terms.fresh()).collect();
    for j in fb.point.0..fb.pc.0 {
        run(k, &mut terms, &mut st, InstId(j));
    }
    let at_i = st.clone();
    for &d in &fb.preempt_reverts {
        revert(k, &mut terms, &mut st, d);
    }
    let saved: HashMap<Reg, u64> = fb
        .saved
        .iter()
        .map(|s| (s.reg, st[s.reg.index()]))
        .collect();
    let mut rs: Vec<u64> = (0..n).map(|_| terms.fresh()).collect();
    for s in &fb.resume {
        match *s {
            ResumeStep::Load(r) => rs[r.index()] = saved[&r],
            ResumeStep::Reexecute(j) => run(k, &mut terms, &mut rs, j),
            ResumeStep::Revert(j) => revert(k, &mut terms, &mut rs, j),
            ResumeStep::CopyBack(c) => copy_back(k, &mut terms, &mut rs, c),
            ResumeStep::Jump(p) => {
                for j in p.0..fb.pc.0 {
                    run(k, &mut terms, &mut rs, InstId(j));
                }
            }
        }
    }
    for r in live.iter() {
        if rs[r.index()] != at_i[r.index()] {
            return Err(format!("{} not restored", k.regs[r].name));
        }
    }
    Ok(())
}

/// The state after preempting a warp whose registers hold `st` with `fb`'s preemption
/// routine and resuming it with the resume routine from garbage.
fn preempt_and_resume(k: &Kernel, terms: &mut Terms, st: &[u64], fb: &Flashback) -> Vec<u64> {
    let mut pre = st.to_vec();
    for &d in &fb.preempt_reverts {
        revert(k, terms, &mut pre, d);
    }
    let mut rs: Vec<u64> = (0..st.len()).map(|_| terms.fresh()).collect();
    for s in &fb.resume {
        match *s {
            ResumeStep::Load(r) => rs[r.index()] = pre[r.index()],
            ResumeStep::Reexecute(j) => run(k, terms, &mut rs, j),
            ResumeStep::Revert(j) => revert(k, terms, &mut rs, j),
            ResumeStep::CopyBack(c) => copy_back(k, terms, &mut rs, c),
            ResumeStep::Jump(p) => {
                for j in p.0..fb.pc.0 {
                    run(k, terms, &mut rs, InstId(j));
                }
            }
        }
    }
    rs
}

/// Repeated preemption: a warp preempted before *every* instruction of a block in turn, each
/// time resumed (twice) and then running that instruction, must find every live register holding the
/// value an undisturbed run gives it. A routine that reads, at preemption, a register an
/// earlier resume did not rebuild fails this (a single preemption never does: `check`).
fn check_chain(
    k: &Kernel,
    live: &Liveness,
    ctx: &CtxBack,
    start: InstId,
    end: InstId,
) -> Result<(), String> {
    let n = k.regs.len();
    let mut terms = Terms::default();
    let mut reference: Vec<u64> = (0..n).map(|_| terms.fresh()).collect();
    // Only the registers live at the block's start hold known values when it is entered.
    let mut st: Vec<u64> = (0..n).map(|_| terms.fresh()).collect();
    for r in live.live_in(start).iter() {
        st[r.index()] = reference[r.index()];
    }
    for pc in start.0..end.0 {
        let pc = InstId(pc);
        let fb = ctx.flashback(pc);
        // Twice: a resumed warp may be preempted again before it executes anything.
        st = preempt_and_resume(k, &mut terms, &st, fb);
        st = preempt_and_resume(k, &mut terms, &st, fb);
        for r in live.live_in(pc).iter() {
            if st[r.index()] != reference[r.index()] {
                return Err(format!(
                    "{}: {} not restored after preemptions before {start}..={pc}",
                    fb.describe(k),
                    k.regs[r].name
                ));
            }
        }
        run(k, &mut terms, &mut st, pc);
        run(k, &mut terms, &mut reference, pc);
    }
    Ok(())
}

fn side_effect(op: &Op) -> bool {
    matches!(
        op,
        Op::St { .. } | Op::Atom { .. } | Op::Red { .. } | Op::Bar { .. }
    )
}

#[test]
fn every_flashback_is_sound_and_the_contexts_shrink() {
    let config = CtxBackConfig::default();
    let mut reductions = [0.0f64; 4];
    let mut count = 0;
    let (mut flashed, mut total, mut routines) = (0usize, 0usize, 0usize);
    let (mut resumes, mut offset_entries) = (0usize, 0usize);
    for (name, k) in kernels() {
        let ctx = CtxBack::compute(&k, &config);
        let mut live = Liveness::new();
        live.compute(&k);
        for pc in k.insts.ids() {
            let fb = ctx.flashback(pc);
            let (f, i) = (fb.point, fb.pc);
            assert_eq!(i, pc);
            assert!(f <= i, "{name}: {pc} <- {f}");
            assert_eq!(
                k.cfg.block_of[f.index()],
                k.cfg.block_of[i.index()],
                "{name} {pc}"
            );
            for j in f.0..i.0 {
                assert!(
                    !side_effect(&k.insts[InstId(j)].op),
                    "{name}: {pc} <- {f} over pc{j}"
                );
            }
            for s in &fb.saved {
                assert!(s.reg.index() < k.regs.len(), "{name}: {pc}");
            }
            assert!(
                ctx.live(pc).words() <= ctx.baseline().words(),
                "{name}: {pc}"
            );
            assert!(
                fb.context.words() <= ctx.live(pc).words(),
                "{name}: {pc}: {}",
                fb.describe(&k)
            );
            if let Err(e) = check(&k, live.live_in(pc), fb) {
                panic!("{name}: {}: {e}", fb.describe(&k));
            }
            let d = ctx.cs_defer(pc);
            assert!(d.target.0 >= pc.0 || d.deferred > 0);
            assert!(d.context.words() <= ctx.live(pc).words());
            if let Some(n) = ctx.next_smaller(pc) {
                assert!(n.context.words() < ctx.live(pc).words());
            }
        }
        for block in k.cfg.blocks.values() {
            if let Err(e) = check_chain(&k, &live, &ctx, block.start, block.end) {
                panic!("{name}: {e}");
            }
        }
        let r = generate_routines(&k, &ctx).expect("routines");
        assert_eq!(r.preempt_of.len(), k.insts.len());
        // Shared routines: every instruction's entry runs exactly its own routine's code.
        for fb in ctx.flashbacks() {
            let own = preempt_routine(&k, fb, r.context_base).expect("routine");
            assert_eq!(r.preempt_code(fb.pc), own, "{name} {}", fb.pc);
            let own = resume_routine(&k, fb, r.context_base).expect("routine");
            assert_eq!(r.resume_code(fb.pc), own, "{name} {}", fb.pc);
        }
        routines += r.preempt.len();
        resumes += r.resume.len();
        offset_entries += r.preempt_of.iter().filter(|e| e.offset > 0).count();
        let s = ctx.summary();
        flashed += s.flashed_back;
        total += s.instructions;
        if s.baseline > 0.0 {
            count += 1;
            for (acc, x) in reductions
                .iter_mut()
                .zip([s.live, s.cs_defer, s.ctxback, s.combined])
            {
                *acc += s.reduction(x);
            }
            println!(
                "{name:40} base {:5.1} live {:5.1} cs-defer {:5.1} ctxback {:5.1} combined {:5.1}",
                s.baseline, s.live, s.cs_defer, s.ctxback, s.combined
            );
        }
    }
    let [live, defer, ctxback, combined] = reductions.map(|x| 100.0 * x / count as f64);
    println!(
        "average reduction vs BASELINE over {count} kernels: LIVE {live:.1}% CS-Defer \
         {defer:.1}% CTXBack {ctxback:.1}% CTXBack+CS-Defer {combined:.1}%; {flashed} of \
         {total} instructions flash back; {routines} stored preemption routines \
         ({offset_entries} instructions enter one at an offset), {resumes} resume routines"
    );
    assert!(
        offset_entries > 0,
        "no preemption routine is shared at an offset"
    );
    assert!(ctxback >= live, "CTXBack never saves more than LIVE");
    assert!(combined >= ctxback.min(defer) - 1e-9);
    assert!(flashed > 0);
}
