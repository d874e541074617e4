//! Selective preemption points (papers/lin-lightweight §IV-A).
//!
//! Instead of a liveness table for every PC, the compiler picks a few program points, and
//! only there may a warp be stopped for a context switch. Each point carries its liveness
//! vector in the instruction itself.
//!
//! # Which points
//!
//! * **One per innermost loop** ("as long execution time of a TB mainly results from loops
//!   …, we insert one preemption point for each loop. For nested loops, only the innermost
//!   loop is considered"). If the loop body contains barriers (`bar.sync`, `bar.red`; not
//!   `bar.arrive`, which does not wait), the barrier with the fewest live registers becomes
//!   the point, a `bar.pp`: any other point could deadlock, with some warps waiting at the
//!   barrier and others waiting for preemption at the point. Otherwise the instruction with
//!   the fewest live-in registers becomes the point, a `pp` inserted just before it.
//! * **Outside loops, one every K instructions** ([`PpConfig::straight_line_interval`],
//!   default 1000): the reachable instructions that belong to no loop, in program order, are
//!   cut into windows `[K, 2K)`, `[2K, 3K)`, … (the last one may be shorter), and each window
//!   gets one point, chosen as in a loop (a barrier if the window has one, else the
//!   minimum-liveness instruction). So `n` such instructions get `⌊n / K⌋` points. The first
//!   K instructions get none: within them the minimum-liveness choice would always be the
//!   kernel's first instruction (nothing is live yet), a point that saves no work; a TB that
//!   has run fewer than K instructions is cheap to drain. A kernel shorter than K with no
//!   loops gets no point, and preempting it is SM draining, as the paper notes.
//!
//! Ties are broken by the smaller divergent (SIMT-aware) set, then by the lower PC. An
//! unguarded `exit` is never chosen for a `pp` (the warp is finishing: nothing to save).
//!
//! # What a point records
//!
//! `live` is the live-in of the chosen instruction (for a `bar.pp`, of the barrier: a warp
//! stopped there has not passed it yet), and `divergent_live` the SIMT-aware set of
//! [`crate::liveness`] at the same PC. Both are encoded into a [`kir::inst::LiveVector`] by register
//! index ([`RegSet::to_live_vector`]): bit `i` is register `i` for `i < 54`, and one overflow
//! bit stands for all registers from 54 up. After register allocation the index is the
//! physical register number, which is what the paper's 54-bit field names.
//!
//! # The rewrite
//!
//! [`insert_points`] returns a new kernel where, before each `pp` point's instruction, come
//! `Op::Pp { live }` and the dummy `Op::PpDivergent { live: divergent }` that carries the
//! divergent version ("a dummy instruction is introduced and it follows the pp
//! instruction"). A `bar.pp` point sets the barrier's `pp` field and gets no dummy ("the
//! bar.pp instruction doesn't need to be followed by the dummy instruction because the
//! barrier ensures that there should be no divergence"). Branches that targeted the chosen
//! instruction now target its `pp`, so every path into the instruction passes the point;
//! all other targets are shifted, and the CFG is rebuilt.

use std::fmt::Write as _;

use kir::inst::{BarKind, Inst, Op};
use kir::{Id, InstId, Kernel};

use crate::liveness::Liveness;
use crate::loops::{reachable, LoopForest, LoopId};
use crate::regset::RegSet;

/// Parameters of the point selection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PpConfig {
    /// K: one point per K reachable instructions outside loops (lin-lightweight §IV-A: the
    /// value "does not have a great impact … when it varies from 100 to 1000").
    pub straight_line_interval: usize,
}

impl Default for PpConfig {
    fn default() -> Self {
        PpConfig {
            straight_line_interval: 1000,
        }
    }
}

/// The two preemption instructions of lin-lightweight §IV-A.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PpKind {
    /// A `pp` (plus its divergent dummy) inserted before the instruction.
    Pp,
    /// The barrier itself becomes a `bar.pp`.
    BarPp,
}

/// Why a point was placed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PointOrigin {
    /// The point of an innermost loop.
    InnermostLoop(LoopId),
    /// The point of the window `[index·K, (index+1)·K)` of the instructions outside loops
    /// (`index ≥ 1`).
    StraightLine { index: usize },
    /// The least-live instruction of a basic block ([`least_live_per_block`]: CKPT's
    /// checkpoint places, papers/ji-ctxback §V).
    Block(kir::BlockId),
}

/// One selected preemption point.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PreemptionPoint {
    /// The instruction (PC in the kernel that was analysed) before which the `pp` goes, or
    /// the barrier that becomes `bar.pp`.
    pub pc: InstId,
    pub kind: PpKind,
    pub origin: PointOrigin,
    /// Registers to save when the warp is not diverged: the live-in at `pc`.
    pub live: RegSet,
    /// Registers to save when the warp is diverged (SIMT-aware liveness at `pc`).
    pub divergent_live: RegSet,
}

/// Whether an instruction is a barrier that waits (a candidate `bar.pp`).
pub fn is_waiting_barrier(inst: &Inst) -> bool {
    matches!(
        inst.op,
        Op::Bar {
            kind: BarKind::Sync | BarKind::RedPopc | BarKind::RedAnd | BarKind::RedOr,
            pp: None,
        }
    )
}

/// Whether `inst` is an unguarded `exit`: a warp there is finishing, with nothing to save.
fn is_final_exit(inst: &Inst) -> bool {
    matches!(inst.op, Op::Exit) && inst.guard.is_none()
}

/// Chooses the point among `candidates`: a barrier if there is one, else any instruction,
/// minimising (live-in, divergent set, PC).
fn choose(
    kernel: &Kernel,
    lv: &Liveness,
    candidates: impl Iterator<Item = InstId> + Clone,
) -> Option<(InstId, PpKind)> {
    let key = |pc: &InstId| (lv.live_in(*pc).len(), lv.divergent_live(*pc).len(), *pc);
    let barrier = candidates
        .clone()
        .filter(|&pc| is_waiting_barrier(&kernel.insts[pc]))
        .min_by_key(key);
    match barrier {
        Some(pc) => Some((pc, PpKind::BarPp)),
        // A point just before an unguarded `exit` would save nothing over draining.
        None => candidates
            .filter(|&pc| !is_final_exit(&kernel.insts[pc]))
            .min_by_key(key)
            .map(|pc| (pc, PpKind::Pp)),
    }
}

/// Selects the preemption points of `kernel`, given its liveness and loops (computed on
/// the same kernel). Points are returned in increasing PC order.
pub fn select_points(
    kernel: &Kernel,
    liveness: &Liveness,
    loops: &LoopForest,
    config: &PpConfig,
) -> Vec<PreemptionPoint> {
    let point = |pc: InstId, kind, origin| PreemptionPoint {
        pc,
        kind,
        origin,
        live: liveness.live_in(pc).clone(),
        divergent_live: liveness.divergent_live(pc).clone(),
    };
    let mut points = Vec::new();
    // lin-lightweight §IV-A: one point per innermost loop.
    for (id, _) in loops.innermost() {
        if let Some((pc, kind)) = choose(kernel, liveness, loops.insts(kernel, id)) {
            points.push(point(pc, kind, PointOrigin::InnermostLoop(id)));
        }
    }
    // Outside loops: one point per window of K instructions, from the K-th on.
    let k = config.straight_line_interval.max(1);
    let outside: Vec<InstId> = kernel
        .insts
        .ids()
        .filter(|&pc| {
            let b = kernel.cfg.block_of[pc.index()];
            reachable(kernel, b) && loops.loop_of_block(b).is_none()
        })
        .collect();
    for (index, window) in outside.chunks(k).enumerate().skip(1) {
        if let Some((pc, kind)) = choose(kernel, liveness, window.iter().copied()) {
            points.push(point(pc, kind, PointOrigin::StraightLine { index }));
        }
    }
    points.sort_by_key(|p| p.pc);
    points
}

/// One point per reachable basic block, before its instruction with the fewest live-in
/// registers (ties: the smaller divergent set, then the lower PC; an unguarded `exit` is
/// never chosen): where CKPT takes its checkpoints, since "CKPT can always save the context
/// of the instructions with the least live registers" (papers/ji-ctxback §V). All are
/// `pp` points, barriers included: a warp stopping for a checkpoint also stops at any
/// barrier it waits at, so no `bar.pp` is needed to avoid a deadlock. Points are returned
/// in increasing PC order.
pub fn least_live_per_block(kernel: &Kernel, liveness: &Liveness) -> Vec<PreemptionPoint> {
    let key = |pc: &InstId| {
        (
            liveness.live_in(*pc).len(),
            liveness.divergent_live(*pc).len(),
            *pc,
        )
    };
    let mut points = Vec::new();
    for (b, block) in kernel.cfg.blocks.iter() {
        if !reachable(kernel, b) {
            continue;
        }
        let best = (block.start.index()..block.end.index())
            .map(InstId::new)
            .filter(|&pc| !is_final_exit(&kernel.insts[pc]))
            .min_by_key(key);
        if let Some(pc) = best {
            points.push(PreemptionPoint {
                pc,
                kind: PpKind::Pp,
                origin: PointOrigin::Block(b),
                live: liveness.live_in(pc).clone(),
                divergent_live: liveness.divergent_live(pc).clone(),
            });
        }
    }
    points.sort_by_key(|p| p.pc);
    points
}

/// Liveness, loops and points of one kernel.
#[derive(Clone, Debug, Default)]
pub struct PreemptionPlan {
    pub liveness: Liveness,
    pub loops: LoopForest,
    pub points: Vec<PreemptionPoint>,
}

impl PreemptionPlan {
    /// Runs liveness, loop finding and point selection on `kernel`.
    pub fn compute(kernel: &Kernel, config: &PpConfig) -> Self {
        let mut plan = PreemptionPlan::default();
        plan.recompute(kernel, config);
        plan
    }

    /// Like [`PreemptionPlan::compute`], reusing this plan's buffers.
    pub fn recompute(&mut self, kernel: &Kernel, config: &PpConfig) {
        self.liveness.compute(kernel);
        self.loops.compute(kernel);
        self.points = select_points(kernel, &self.liveness, &self.loops, config);
    }

    /// The table of points for a person: one line per point with its PC, kind, origin, and
    /// the PTX names of its live and divergent-live registers.
    pub fn table(&self, kernel: &Kernel) -> String {
        let names = |s: &RegSet| {
            s.iter()
                .map(|r| kernel.regs[r].name.as_str())
                .collect::<Vec<_>>()
                .join(" ")
        };
        let mut out = String::new();
        for p in &self.points {
            let kind = match p.kind {
                PpKind::Pp => "pp",
                PpKind::BarPp => "bar.pp",
            };
            let origin = match p.origin {
                PointOrigin::InnermostLoop(l) => format!("{l}"),
                PointOrigin::StraightLine { index } => format!("line{index}"),
                PointOrigin::Block(b) => format!("{b}"),
            };
            let _ = writeln!(
                out,
                "{} {kind} {origin} live({})=[{}] divergent({})=[{}]",
                p.pc,
                p.live.len(),
                names(&p.live),
                p.divergent_live.len(),
                names(&p.divergent_live),
            );
        }
        out
    }
}

/// Errors of [`insert_points`]: the points do not fit the kernel.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InsertError {
    #[error("preemption point at {pc} is outside the kernel ({len} instructions)")]
    OutOfRange { pc: InstId, len: usize },
    #[error("two preemption points at {pc}")]
    Duplicate { pc: InstId },
    #[error("bar.pp point at {pc}, which is not a waiting barrier")]
    NotABarrier { pc: InstId },
}

/// A kernel with preemption points inserted.
#[derive(Clone, Debug)]
pub struct WithPoints {
    pub kernel: Kernel,
    /// For every old PC (and the old length), the new PC of the first instruction of its
    /// group: the inserted `pp` if the old instruction got one, else the instruction itself.
    pub group_start: Vec<InstId>,
    /// For every old PC (and the old length), the new PC of the old instruction itself.
    pub new_pc: Vec<InstId>,
    /// For every point, in the order given: the new PC of its `pp`, or of its `bar.pp`.
    pub point_pcs: Vec<InstId>,
}

impl WithPoints {
    /// For each instruction of the new kernel, the old instruction it serves: an inserted
    /// one serves the instruction it was inserted before (what a
    /// `gpu::timing::KernelPass` returns beside the kernel).
    pub fn served(&self) -> Vec<InstId> {
        let old_len = self.new_pc.len() - 1;
        let mut from = vec![InstId::new(0); self.kernel.len()];
        for old in 0..old_len {
            let (start, end) = (self.group_start[old].index(), self.new_pc[old].index());
            for f in &mut from[start..=end] {
                *f = InstId::new(old);
            }
        }
        from
    }
}

/// Rewrites `kernel` with `points` (selected on this kernel) inserted, as described in the
/// module documentation, and rebuilds its CFG.
pub fn insert_points(
    kernel: &Kernel,
    points: &[PreemptionPoint],
) -> Result<WithPoints, InsertError> {
    insert(kernel, points, true)
}

/// Like [`insert_points`], but a `pp` point gets no divergent dummy: one instruction per
/// point, for a pass whose stops save no divergent set (CKPT's checkpoint places: a
/// checkpoint captures the registers live at each warp's PC).
pub fn insert_markers(
    kernel: &Kernel,
    points: &[PreemptionPoint],
) -> Result<WithPoints, InsertError> {
    insert(kernel, points, false)
}

fn insert(
    kernel: &Kernel,
    points: &[PreemptionPoint],
    divergent_dummies: bool,
) -> Result<WithPoints, InsertError> {
    let n = kernel.insts.len();
    let mut at: Vec<Option<usize>> = vec![None; n];
    for (i, p) in points.iter().enumerate() {
        if p.pc.index() >= n {
            return Err(InsertError::OutOfRange { pc: p.pc, len: n });
        }
        if at[p.pc.index()].replace(i).is_some() {
            return Err(InsertError::Duplicate { pc: p.pc });
        }
        if p.kind == PpKind::BarPp && !is_waiting_barrier(&kernel.insts[p.pc]) {
            return Err(InsertError::NotABarrier { pc: p.pc });
        }
    }
    // Each `pp` (and its divergent-liveness dummy) goes before its instruction; a `bar.pp`
    // is the barrier itself, carrying the vector.
    let mut marked = kernel.clone();
    let mut inserts = Vec::new();
    for p in points {
        let inst = &mut marked.insts[p.pc];
        match p.kind {
            PpKind::Pp => {
                inserts.push((
                    p.pc,
                    Inst::new(
                        Op::Pp {
                            live: p.live.to_live_vector(),
                        },
                        inst.span,
                    ),
                ));
                if divergent_dummies {
                    inserts.push((
                        p.pc,
                        Inst::new(
                            Op::PpDivergent {
                                live: p.divergent_live.to_live_vector(),
                            },
                            inst.span,
                        ),
                    ));
                }
            }
            PpKind::BarPp => {
                if let Op::Bar { ref mut pp, .. } = inst.op {
                    *pp = Some(p.live.to_live_vector());
                }
            }
        }
    }
    let kir::Inserted {
        kernel: out,
        group_start,
        new_pc,
    } = marked.insert_before(&inserts);
    let point_pcs = points
        .iter()
        .map(|p| match p.kind {
            PpKind::Pp => group_start[p.pc.index()],
            PpKind::BarPp => new_pc[p.pc.index()],
        })
        .collect();
    Ok(WithPoints {
        kernel: out,
        group_start,
        new_pc,
        point_pcs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::{kernel, names};

    #[test]
    fn barrier_in_loop_becomes_bar_pp() {
        let k = kernel(
            r#"
            .reg .pred %p<2>;
            .reg .b32 %r<8>;
            .shared .align 4 .b8 buf[128];
            mov.u32 %r1, 0;
            mov.u32 %r2, %tid.x;
            mov.u32 %r5, buf;
        LOOP:
            add.u32 %r3, %r2, %r1;
            st.shared.u32 [%r5], %r3;
            bar.sync 0;
            ld.shared.u32 %r4, [%r5];
            bar.sync 0;
            add.u32 %r1, %r1, %r4;
            setp.lt.u32 %p1, %r1, 100;
            @%p1 bra LOOP;
            exit;
            "#,
        );
        let plan = PreemptionPlan::compute(&k, &PpConfig::default());
        assert_eq!(plan.points.len(), 1);
        let p = &plan.points[0];
        assert_eq!(p.kind, PpKind::BarPp);
        // The second barrier has %r1 %r2 %r4 %r5 live, the first %r1 %r2 %r5: fewer.
        assert_eq!(p.pc, InstId(5));
        assert_eq!(names(&k, &p.live), "%r1 %r2 %r5");
        assert_eq!(
            plan.table(&k),
            "pc5 bar.pp loop0 live(3)=[%r1 %r2 %r5] divergent(3)=[%r1 %r2 %r5]\n"
        );
        let w = insert_points(&k, &plan.points).unwrap();
        assert_eq!(w.kernel.insts.len(), k.insts.len());
        assert_eq!(
            w.kernel.insts[InstId(5)].op,
            Op::Bar {
                kind: BarKind::Sync,
                pp: Some(p.live.to_live_vector())
            }
        );
    }

    #[test]
    fn loop_without_barrier_gets_min_liveness_pp() {
        let k = kernel(
            r#"
            .reg .pred %p<2>;
            .reg .b32 %r<8>;
            mov.u32 %r1, 0;
            mov.u32 %r2, %tid.x;
        LOOP:
            add.u32 %r3, %r2, 1;
            add.u32 %r4, %r3, %r2;
            add.u32 %r5, %r4, %r3;
            add.u32 %r1, %r1, %r5;
            setp.lt.u32 %p1, %r1, 100;
            @%p1 bra LOOP;
            st.shared.u32 [%r2], %r1;
            exit;
            "#,
        );
        let plan = PreemptionPlan::compute(&k, &PpConfig::default());
        assert_eq!(plan.points.len(), 1);
        let p = &plan.points[0];
        assert_eq!(p.kind, PpKind::Pp);
        // The loop head (pc2) and the `setp` (pc6) tie with {%r1 %r2}, the fewest in the
        // body; the lower PC wins.
        assert_eq!(p.pc, InstId(2));
        assert_eq!(names(&k, &p.live), "%r1 %r2");
        let w = insert_points(&k, &plan.points).unwrap();
        let ops: Vec<_> = w.kernel.insts.values().map(|i| i.op).collect();
        assert_eq!(ops.len(), k.insts.len() + 2);
        assert_eq!(
            ops[2],
            Op::Pp {
                live: p.live.to_live_vector()
            }
        );
        assert!(matches!(ops[3], Op::PpDivergent { .. }));
        // The back edge now enters the loop through the pp.
        assert_eq!(
            ops[9],
            Op::Bra {
                target: InstId(2),
                uni: false
            }
        );
        assert_eq!(w.new_pc[2], InstId(4));
        assert_eq!(w.point_pcs, vec![InstId(2)]);
    }

    #[test]
    fn insert_rejects_points_that_do_not_fit() {
        let k = kernel(".reg .b32 %r<2>;\nmov.u32 %r1, 1;\nexit;");
        let p = PreemptionPoint {
            pc: InstId(0),
            kind: PpKind::BarPp,
            origin: PointOrigin::StraightLine { index: 1 },
            live: RegSet::with_capacity(k.regs.len()),
            divergent_live: RegSet::with_capacity(k.regs.len()),
        };
        assert_eq!(
            insert_points(&k, std::slice::from_ref(&p)).unwrap_err(),
            InsertError::NotABarrier { pc: InstId(0) }
        );
        let pp = PreemptionPoint {
            kind: PpKind::Pp,
            ..p.clone()
        };
        assert_eq!(
            insert_points(&k, &[pp.clone(), pp.clone()]).unwrap_err(),
            InsertError::Duplicate { pc: InstId(0) }
        );
        let far = PreemptionPoint {
            pc: InstId(9),
            ..pp
        };
        assert!(matches!(
            insert_points(&k, &[far]).unwrap_err(),
            InsertError::OutOfRange { .. }
        ));
    }

    #[test]
    fn straight_line_code_gets_a_point_every_k() {
        let mut body = String::from(".reg .b32 %r<4>;\nmov.u32 %r1, %tid.x;\n");
        for _ in 0..249 {
            body.push_str("add.u32 %r1, %r1, 3;\n");
        }
        body.push_str("st.shared.u32 [%r1], %r1;\nexit;\n");
        let k = kernel(&body);
        assert_eq!(k.insts.len(), 252);
        let config = PpConfig {
            straight_line_interval: 100,
        };
        let plan = PreemptionPlan::compute(&k, &config);
        let origins: Vec<_> = plan.points.iter().map(|p| p.origin).collect();
        assert_eq!(
            origins,
            vec![
                PointOrigin::StraightLine { index: 1 },
                PointOrigin::StraightLine { index: 2 }
            ]
        );
        // Every instruction after pc0 but the `exit` has %r1 live: the first of each window
        // wins the tie, and the `exit` (nothing live) is not a candidate.
        assert_eq!(plan.points[0].pc, InstId(100));
        assert_eq!(plan.points[1].pc, InstId(200));
        assert_eq!(names(&k, &plan.points[0].live), "%r1");
        // Shorter than K: no point (SM draining).
        let plan = PreemptionPlan::compute(&k, &PpConfig::default());
        assert!(plan.points.is_empty());
    }
}
