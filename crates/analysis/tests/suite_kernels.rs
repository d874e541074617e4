//! Every analysis on every suite kernel, both PTX targets, with sanity properties that fail
//! when an analysis is wrong. Run with `--nocapture` for the per-kernel numbers.

use analysis::idempotence::{AliasModel, Idempotence, IdempotenceConfig};
use analysis::preemption_points::{insert_points, PointOrigin, PpConfig, PpKind, PreemptionPlan};
use analysis::{Liveness, LoopForest, RegSet};
use kir::inst::Op;
use kir::{Id, InstId, Kernel};

fn kernels() -> Vec<(String, Kernel)> {
    let mut out = Vec::new();
    for k in suite::all() {
        for &(t, text) in k.sources() {
            let ast = ptx::parse(text).expect("suite PTX parses");
            let m = kir::lower::lower_module(&ast, k.name()).expect("suite PTX lowers");
            for kern in m.kernels.values() {
                out.push((
                    format!("{}/{}/{}", k.name(), t.name(), kern.name),
                    kern.clone(),
                ));
            }
        }
    }
    assert!(out.len() >= 34, "{} kernels", out.len());
    out
}

/// Instruction successors straight from the instructions (independent of `Cfg`).
fn succs(k: &Kernel, pc: usize) -> Vec<usize> {
    let inst = &k.insts[InstId::new(pc)];
    let n = k.insts.len();
    let mut v = Vec::new();
    match inst.op {
        Op::Bra { target, .. } => {
            v.push(target.index());
            if inst.guard.is_some() && pc + 1 < n {
                v.push(pc + 1);
            }
        }
        Op::Exit => {
            if inst.guard.is_some() && pc + 1 < n {
                v.push(pc + 1);
            }
        }
        _ => {
            if pc + 1 < n {
                v.push(pc + 1);
            }
        }
    }
    v
}

/// Reference liveness: round-robin fixed point over single instructions.
fn reference_live_in(k: &Kernel) -> Vec<RegSet> {
    let n = k.insts.len();
    let nr = k.regs.len();
    let mut live_in = vec![RegSet::with_capacity(nr); n];
    let mut changed = true;
    while changed {
        changed = false;
        for pc in (0..n).rev() {
            let mut s = RegSet::with_capacity(nr);
            for q in succs(k, pc) {
                s.union_with(&live_in[q]);
            }
            let inst = &k.insts[InstId::new(pc)];
            if inst.guard.is_none() {
                for d in inst.defs() {
                    s.remove(d);
                }
            }
            for u in inst.uses() {
                s.insert(u);
            }
            if live_in[pc] != s {
                live_in[pc] = s;
                changed = true;
            }
        }
    }
    live_in
}

#[test]
fn liveness_matches_reference_and_divergent_sets_are_supersets() {
    let mut lv = Liveness::new();
    for (name, k) in kernels() {
        lv.compute(&k);
        let reference = reference_live_in(&k);
        for pc in k.insts.ids() {
            assert_eq!(lv.live_in(pc), &reference[pc.index()], "{name} {pc}");
            assert!(
                lv.live_in(pc).is_subset(lv.divergent_live(pc)),
                "{name} {pc}"
            );
            if lv.enclosing_branches(&k, pc).next().is_none() {
                assert_eq!(lv.live_in(pc), lv.divergent_live(pc), "{name} {pc}");
            }
        }
        // NVRTC defines every register before reading it: nothing is live on entry.
        assert!(
            lv.live_in(InstId(0)).is_empty(),
            "{name}: {:?}",
            lv.live_in(InstId(0))
        );
        // At a reconvergence point the warp is whole again for that branch.
        for b in lv.divergent_branches() {
            assert!(
                lv.enclosing_branches(&k, b.reconvergence.min(InstId::new(k.len() - 1)))
                    .all(|e| e.branch.branch != b.branch || b.reconvergence.index() >= k.len()),
                "{name}: {} encloses its own reconvergence point",
                b.branch
            );
        }
    }
}

#[test]
fn loops_are_well_formed() {
    let mut lf = LoopForest::new();
    for (name, k) in kernels() {
        lf.compute(&k);
        let mut owner = vec![None; k.cfg.blocks.len()];
        for (i, l) in lf.loops().iter().enumerate() {
            for &b in &l.blocks {
                assert!(analysis::loops::dominates(&k, l.header, b), "{name}");
            }
            for &t in &l.latches {
                assert!(k.cfg.blocks[t].succs.contains(&l.header), "{name}");
            }
            match l.parent {
                Some(p) => assert_eq!(l.depth, lf.get(p).depth + 1, "{name}"),
                None => assert_eq!(l.depth, 1, "{name}"),
            }
            if l.innermost {
                for &b in &l.blocks {
                    assert!(
                        owner[b.index()].replace(i).is_none(),
                        "{name}: innermost overlap"
                    );
                }
            }
        }
    }
}

#[test]
fn preemption_points_and_rewrite_are_consistent() {
    let mut total_insts = 0usize;
    let mut report = String::new();
    for (name, k) in kernels() {
        for config in [
            PpConfig::default(),
            PpConfig {
                straight_line_interval: 20,
            },
        ] {
            let plan = PreemptionPlan::compute(&k, &config);
            // Exactly one point per innermost loop, inside it.
            for (id, _) in plan.loops.innermost() {
                let mine: Vec<_> = plan
                    .points
                    .iter()
                    .filter(|p| p.origin == PointOrigin::InnermostLoop(id))
                    .collect();
                assert_eq!(mine.len(), 1, "{name} {id}");
                assert_eq!(plan.loops.loop_of(&k, mine[0].pc), Some(id), "{name} {id}");
            }
            for p in &plan.points {
                assert!(p.live.is_subset(&p.divergent_live), "{name}");
                if p.kind == PpKind::BarPp {
                    assert!(matches!(k.insts[p.pc].op, Op::Bar { .. }), "{name}");
                }
            }
            let w = insert_points(&k, &plan.points).expect("points fit");
            let nk = &w.kernel;
            let n_pp = plan.points.iter().filter(|p| p.kind == PpKind::Pp).count();
            assert_eq!(nk.insts.len(), k.insts.len() + 2 * n_pp, "{name}");
            assert_eq!(nk.cfg.block_of.len(), nk.insts.len(), "{name}");
            for (pc, inst) in nk.insts.iter() {
                if let Op::Bra { target, .. } = inst.op {
                    assert!(target.index() < nk.insts.len(), "{name} {pc}");
                }
                if let Op::Pp { .. } = inst.op {
                    assert!(
                        matches!(nk.insts[InstId(pc.0 + 1)].op, Op::PpDivergent { .. }),
                        "{name} {pc}"
                    );
                }
            }
            // Old instructions are unchanged (but for bar.pp and retargeted branches), and
            // reconvergence maps onto the group of the old reconvergence point.
            for (pc, inst) in k.insts.iter() {
                let new = &nk.insts[w.new_pc[pc.index()]];
                if let Op::Bra { target, uni } = inst.op {
                    assert_eq!(
                        new.op,
                        Op::Bra {
                            target: w.group_start[target.index()],
                            uni
                        },
                        "{name}"
                    );
                    let old_r = k.cfg.reconvergence[pc.index()];
                    let new_r = nk.cfg.reconvergence[w.new_pc[pc.index()].index()];
                    assert_eq!(new_r, w.group_start[old_r.index()], "{name} {pc}");
                }
            }
            // Liveness recomputed on the new kernel agrees with the recorded vectors.
            let mut lv = Liveness::new();
            lv.compute(nk);
            for (p, &at) in plan.points.iter().zip(&w.point_pcs) {
                assert_eq!(lv.live_in(at), &p.live, "{name} {at}");
                assert_eq!(lv.divergent_live(at), &p.divergent_live, "{name} {at}");
                match nk.insts[at].op {
                    Op::Pp { live } => {
                        assert_eq!(live, p.live.to_live_vector());
                        assert_eq!(
                            nk.insts[InstId(at.0 + 1)].op,
                            Op::PpDivergent {
                                live: p.divergent_live.to_live_vector()
                            }
                        );
                    }
                    Op::Bar { pp, .. } => assert_eq!(pp, Some(p.live.to_live_vector())),
                    ref op => panic!("{name} {at}: {op:?}"),
                }
            }
            let mut lf = LoopForest::new();
            lf.compute(nk);
            assert_eq!(lf.loops().len(), plan.loops.loops().len(), "{name}");
            if config == PpConfig::default() {
                total_insts += k.insts.len();
                let n = k.insts.len().max(1) as f64;
                let avg: f64 = k
                    .insts
                    .ids()
                    .map(|pc| plan.liveness.live_in(pc).len())
                    .sum::<usize>() as f64
                    / n;
                let avg_div: f64 = k
                    .insts
                    .ids()
                    .map(|pc| plan.liveness.divergent_live(pc).len())
                    .sum::<usize>() as f64
                    / n;
                let max = k
                    .insts
                    .ids()
                    .map(|pc| plan.liveness.live_in(pc).len())
                    .max()
                    .unwrap_or(0);
                let pts: Vec<String> = plan
                    .points
                    .iter()
                    .map(|p| {
                        format!(
                            "{}{}:{}/{}",
                            if p.kind == PpKind::BarPp { "bar." } else { "" },
                            p.pc,
                            p.live.len(),
                            p.divergent_live.len()
                        )
                    })
                    .collect();
                report.push_str(&format!(
                    "{name:<40} insts {:>4} regs {:>4} live avg {avg:>5.1} max {max:>3} divergent avg {avg_div:>5.1} loops {} points [{}]\n",
                    k.insts.len(),
                    k.regs.len(),
                    plan.loops.loops().len(),
                    pts.join(" ")
                ));
            }
        }
    }
    println!("{report}total instructions {total_insts}");
}

#[test]
fn idempotence_orders_strict_relaxed_and_restrict() {
    let mut report = String::new();
    for (name, k) in kernels() {
        let cons = Idempotence::compute(&k, &IdempotenceConfig::default());
        let restrict = Idempotence::compute(
            &k,
            &IdempotenceConfig {
                alias: AliasModel::RestrictParams,
            },
        );
        assert!(cons.strict(InstId(0)) && cons.relaxed(InstId(0)), "{name}");
        for pc in k.insts.ids() {
            // strict ⇒ relaxed, and assuming more (restrict) never loses idempotence.
            assert!(!cons.strict(pc) || cons.relaxed(pc), "{name} {pc}");
            assert!(!cons.relaxed(pc) || restrict.relaxed(pc), "{name} {pc}");
            assert_eq!(cons.strict(pc), restrict.strict(pc), "{name} {pc}");
        }
        for &b in cons.strict_breakers() {
            assert!(
                matches!(
                    k.insts[b].op,
                    Op::St { .. }
                        | Op::Atom { .. }
                        | Op::Red { .. }
                        | Op::WmmaStore { .. }
                        | Op::Stmatrix { .. }
                ),
                "{name} {b}"
            );
        }
        let frac = |f: &dyn Fn(InstId) -> bool| {
            k.insts.ids().filter(|&pc| f(pc)).count() as f64 / k.insts.len().max(1) as f64
        };
        report.push_str(&format!(
            "{name:<40} strict {:>5.1}% relaxed {:>5.1}% relaxed+restrict {:>5.1}%\n",
            100.0 * frac(&|pc| cons.strict(pc)),
            100.0 * frac(&|pc| cons.relaxed(pc)),
            100.0 * frac(&|pc| restrict.relaxed(pc)),
        ));
    }
    println!("{report}");
}
