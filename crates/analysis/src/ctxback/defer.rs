//! CS-Defer (papers/ji-ctxback §II-B, §IV-C; papers/lin-lightweight): ignore the preemption
//! signal for a while and switch at a following instruction whose live context is smaller.
//!
//! From instruction `i` the warp's path is followed while it is statically known: through
//! its basic block, then into the block's single successor when the block falls through or
//! ends in an unguarded branch. It stops at a guarded branch or `exit` (the path depends on
//! data), at a barrier (deferring past a `bar` could wait for warps that are themselves
//! being preempted), at the reconvergence PC of a divergent branch enclosing `i` (a diverged
//! warp's top SIMT stack entry pops there and the parked lanes run next, so the path is no
//! longer the warp's), or after `window` instructions. The instruction it stops at is still a
//! candidate: the switch happens before it.
//!
//! **The deferral estimate** is the number of instructions the warp executes before it
//! switches (`j − i` along the path), each costing [`CostModel::alu`]. Like the paper (§V-B)
//! it ignores the latency of the deferred instructions' memory accesses and the stalls on
//! their results, which the compiler cannot know without timestamps; CS-Defer's latency is
//! therefore underestimated.
//!
//! Two answers per instruction: the nearest following instruction whose live context is
//! smaller than `i`'s (what a "defer until the context shrinks" rule does), and the
//! candidate with the least estimated preemption latency — deferral plus saving `live_in(j)`
//! — which is how the paper ranks CS-Defer's candidates (§V).

use kir::inst::Op;
use kir::{InstId, Kernel};

use super::widths::ContextSize;
use super::CostModel;
use crate::liveness::Liveness;

/// Where a warp that receives the signal before `pc` switches under CS-Defer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deferral {
    /// The instruction the signal arrives before.
    pub pc: InstId,
    /// The instruction before which the context is saved (`pc` itself: no deferral).
    pub target: InstId,
    /// Instructions executed between the signal and the switch.
    pub deferred: u32,
    /// The context saved at `target` (its live-in registers).
    pub context: ContextSize,
    /// Estimated preemption latency: deferral plus saving the context.
    pub latency: u32,
}

/// The cost of saving a context (the preemption routine's stores).
pub fn save_cost(c: ContextSize, cost: &CostModel) -> u32 {
    c.vector * cost.save_word + (c.uniform + c.predicates) * cost.scalar
}

/// The next instruction on the statically known path after `j`: the fall-through, or an
/// unguarded branch's target; `None` where the path ends (a barrier, `exit`, a guarded
/// branch, or the end of the code).
pub(crate) fn next_on_path(kernel: &Kernel, j: InstId) -> Option<InstId> {
    let inst = &kernel.insts[j];
    match inst.op {
        Op::Bar { .. } | Op::Exit => None,
        Op::Bra { target, .. } if inst.guard.is_none() => Some(target),
        Op::Bra { .. } => None,
        _ => Some(InstId(j.0 + 1)).filter(|x| (x.0 as usize) < kernel.insts.len()),
    }
}

/// The statically known path from `pc`, `window` instructions at most beyond it: `(j, steps)`.
fn path(kernel: &Kernel, live: &Liveness, pc: InstId, window: u32) -> Vec<(InstId, u32)> {
    let stops: Vec<InstId> = live
        .enclosing_branches(kernel, pc)
        .map(|e| e.branch.reconvergence)
        .collect();
    let mut out = Vec::new();
    let mut j = pc;
    let mut steps = 0;
    loop {
        out.push((j, steps));
        if steps == window || (steps > 0 && stops.contains(&j)) {
            break;
        }
        match next_on_path(kernel, j) {
            Some(x) => j = x,
            None => break,
        }
        steps += 1;
    }
    out
}

/// CS-Defer for every instruction, saving `size(j)` at a switch before `j`.
pub(crate) fn compute(
    kernel: &Kernel,
    live: &Liveness,
    size: impl Fn(InstId) -> ContextSize,
    window: u32,
    cost: &CostModel,
) -> (Vec<Deferral>, Vec<Option<Deferral>>) {
    let mut best = Vec::with_capacity(kernel.insts.len());
    let mut nearest = Vec::with_capacity(kernel.insts.len());
    for pc in kernel.insts.ids() {
        let here = size(pc);
        let mut b: Option<Deferral> = None;
        let mut near: Option<Deferral> = None;
        for (j, steps) in path(kernel, live, pc, window) {
            let context = size(j);
            let d = Deferral {
                pc,
                target: j,
                deferred: steps,
                context,
                latency: steps * cost.alu + save_cost(context, cost),
            };
            if near.is_none() && context.words() < here.words() {
                near = Some(d);
            }
            if b.is_none_or(|b| d.latency < b.latency) {
                b = Some(d);
            }
        }
        best.push(b.expect("the path holds pc itself"));
        nearest.push(near);
    }
    (best, nearest)
}
