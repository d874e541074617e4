//! Register liveness per instruction, plain and SIMT-aware (lin-lightweight §III-B, Fig. 5).
//!
//! # Plain liveness
//!
//! Classic backward dataflow to a fixed point: first over basic blocks (upward-exposed uses
//! and kills per block), then one backward walk per block gives every instruction's
//! live-in and live-out:
//!
//! ```text
//! live_out(i) = ∪ live_in(s) over the successors s of i   (∅ at an exit)
//! live_in(i)  = uses(i) ∪ (live_out(i) − kills(i))
//! ```
//!
//! `uses(i)` are [`kir::Inst::uses`] (sources, address bases and the guard predicate).
//! `kills(i)` are the destinations of an **unguarded** instruction only: a guarded
//! instruction (`@p op d, …`) leaves `d` untouched in the lanes where `p` is false, so the
//! old value of `d` may still be read afterwards and must stay live.
//!
//! # SIMT-aware liveness
//!
//! A whole warp is stopped when one of its threads reaches a preemption point, and the saved
//! context must hold what *every* lane of the warp still needs. Lanes parked on the SIMT
//! reconvergence stack resume at other PCs. In Fig. 5 of lin-lightweight, T1 and T2 diverge
//! at the end of block A; T2 runs path C and reaches the preemption point while T1 is either
//! still "at the divergence point" (it has not started path B: its stack entry points at B's
//! first instruction) or already waiting at the reconvergence point (the start of D). The
//! context is the union of the liveness at those three places.
//!
//! Switchyard's stack (`gpu::exec`, GPGPU-Sim's PDOM scheme) makes this exact: at a branch
//! whose lanes disagree, the top entry's PC becomes the branch's reconvergence PC `rpc` and
//! one entry per side is pushed, at the branch target and at the fall-through PC; the top
//! entry runs until it reaches `rpc`. So while a warp runs one side of a divergent branch,
//! the lanes of the other side sit either at the first PC of that other side (not started
//! yet: the paper's "divergence point, end of A") or at `rpc` (finished already), and none
//! has executed anything there. Hence, for instruction `i`:
//!
//! ```text
//! divergent_live(i) = live_in(i) ∪ ⋃ over divergent branches b enclosing i of
//!                       live_in(rpc(b))
//!                     ∪ live_in(target(b))   if i is reachable from the fall-through side
//!                     ∪ live_in(b + 1)       if i is reachable from the taken side
//! ```
//!
//! where "reachable from a side" means reachable from that side's first instruction without
//! passing through `rpc(b)`, and `live_in(len)` of the virtual exit is ∅. The pending PC of
//! "the other side" is taken for whichever side `i` may be on: which side runs first is the
//! stack's choice (taken first in Switchyard, not-taken first elsewhere), and in a loop `i`
//! may be reachable from both sides, in which case both starts are included. In Fig. 5 the
//! point is in C (reachable only from the taken side), so the union is
//! `live_in(point) ∪ live_in(start of B) ∪ live_in(start of D)`, exactly the paper's three
//! locations (`tests/fig5.rs` is that figure as a golden test). Taking the whole live-out of
//! A instead would also keep the registers that only C's start reads, which a lane already
//! in C has consumed.
//!
//! **Which branches enclose `i`.** A *divergent branch* is a `bra` with a guard predicate and
//! without `.uni` (an unguarded or `.uni` branch never splits a warp). Its *divergent region*
//! is the set of basic blocks reachable from its two successors (the target and the
//! fall-through instruction) without passing through the block of its reconvergence PC (with
//! no stop when it reconverges at the virtual exit).
//! Those are exactly the PCs the top stack entry can visit while the branch's entries are on
//! the stack. Equivalently: `rpc(b)` post-dominates `i` and `i` is (transitively)
//! control-dependent on `b`. Regions nest (a branch inside a region reconverges at or before
//! the region's `rpc`), so the enclosing branches of `i` are all the stack levels a warp at
//! `i` can have, whatever the nesting depth. The rule is static, so it over-approximates:
//! at run time only the branches that actually split the warp contribute, which is why the
//! paper keeps both versions (plain and divergent) and picks one from the SIMT stack.

use kir::inst::Op;
use kir::liveness::{step_back, BlockLiveness};
use kir::regset::reset_sets;
use kir::{BlockId, Id, InstId, Kernel, Reg};

use crate::regset::RegSet;

/// A potentially divergent branch and the PCs where its parked lanes wait.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DivergentBranch {
    /// The `bra` instruction.
    pub branch: InstId,
    /// Where the taken lanes start.
    pub target: InstId,
    /// Where the not-taken lanes start (`branch + 1`; the kernel length if it is the last
    /// instruction, i.e. the virtual exit).
    pub fallthrough: InstId,
    /// The reconvergence PC (first instruction of the immediate post-dominator, or the kernel
    /// length for the virtual exit).
    pub reconvergence: InstId,
}

/// A divergent branch whose region contains an instruction, and from which of its sides
/// the instruction can be reached (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Enclosing<'a> {
    pub branch: &'a DivergentBranch,
    /// Reachable from the taken side (so not-taken lanes may be parked at the fall-through).
    pub from_target: bool,
    /// Reachable from the fall-through side (so taken lanes may be parked at the target).
    pub from_fallthrough: bool,
}

impl Enclosing<'_> {
    /// The PCs where the warp's other lanes may be parked while one lane is at the
    /// instruction: the pending start of the other side(s), then the reconvergence PC.
    pub fn parked_pcs(&self) -> Vec<InstId> {
        let mut v = Vec::with_capacity(3);
        if self.from_fallthrough {
            v.push(self.branch.target);
        }
        if self.from_target {
            v.push(self.branch.fallthrough);
        }
        v.push(self.branch.reconvergence);
        v
    }
}

const FROM_TARGET: u8 = 1;
const FROM_FALLTHROUGH: u8 = 2;

/// Liveness of every instruction of a kernel: plain live-in / live-out and the SIMT-aware
/// (divergent) set. Compute it with [`Liveness::compute`]; computing again for another
/// kernel reuses the buffers.
#[derive(Clone, Debug, Default)]
pub struct Liveness {
    n_regs: usize,
    n_insts: usize,
    /// `n_insts + 1` entries: the last is the virtual exit (always empty).
    live_in: Vec<RegSet>,
    live_out: Vec<RegSet>,
    divergent: Vec<RegSet>,
    branches: Vec<DivergentBranch>,
    /// For every block, the branches whose region contains it: index into `branches`, and
    /// the sides it is reachable from (`FROM_TARGET | FROM_FALLTHROUGH`).
    enclosing: Vec<Vec<(u32, u8)>>,
    blocks: BlockLiveness,
    // Scratch, kept between computations.
    scratch: RegSet,
    seen: Vec<u8>,
    stack: Vec<BlockId>,
}

impl Liveness {
    /// An empty analysis; call [`Liveness::compute`].
    pub fn new() -> Self {
        Self::default()
    }

    /// Computes liveness for `kernel` (whose `cfg` must match its `insts`).
    pub fn compute(&mut self, kernel: &Kernel) {
        let n = kernel.insts.len();
        let nr = kernel.regs.len();
        self.n_insts = n;
        self.n_regs = nr;
        reset_sets(&mut self.live_in, n + 1, nr);
        reset_sets(&mut self.live_out, n + 1, nr);
        reset_sets(&mut self.divergent, n + 1, nr);
        self.branches.clear();
        if n == 0 {
            self.enclosing.clear();
            return;
        }
        self.blocks.compute_kernel(kernel);
        self.per_instruction(kernel);
        self.divergent_sets(kernel);
    }

    fn per_instruction(&mut self, kernel: &Kernel) {
        for (b, block) in kernel.cfg.blocks.iter() {
            let mut cur = std::mem::take(&mut self.scratch);
            cur.copy_from(&self.blocks.live_out[b.index()]);
            for pc in (block.start.index()..block.end.index()).rev() {
                self.live_out[pc].copy_from(&cur);
                step_back(&mut cur, &kernel.insts[InstId::new(pc)]);
                self.live_in[pc].copy_from(&cur);
            }
            self.scratch = cur;
        }
    }

    fn divergent_sets(&mut self, kernel: &Kernel) {
        let cfg = &kernel.cfg;
        let n = self.n_insts;
        let nb = cfg.blocks.len();
        self.enclosing.truncate(nb);
        for e in self.enclosing.iter_mut() {
            e.clear();
        }
        self.enclosing.resize_with(nb, Vec::new);
        for (pc, inst) in kernel.insts.iter() {
            let Op::Bra { target, uni } = inst.op else {
                continue;
            };
            if inst.guard.is_none() || uni {
                continue;
            }
            let bi = self.branches.len() as u32;
            let rpc = cfg.reconvergence[pc.index()];
            self.branches.push(DivergentBranch {
                branch: pc,
                target,
                fallthrough: InstId::new(pc.index() + 1),
                reconvergence: rpc,
            });
            // The divergent region: blocks reachable from each side without entering the
            // reconvergence block.
            let stop = (rpc.index() < n).then(|| cfg.block_of[rpc.index()]);
            self.seen.clear();
            self.seen.resize(nb, 0);
            let sides = [
                (Some(cfg.block_of[target.index()]), FROM_TARGET),
                (
                    (pc.index() + 1 < n).then(|| cfg.block_of[pc.index() + 1]),
                    FROM_FALLTHROUGH,
                ),
            ];
            for (start, side) in sides {
                let Some(start) = start else { continue };
                self.stack.clear();
                if Some(start) != stop {
                    self.seen[start.index()] |= side;
                    self.stack.push(start);
                }
                while let Some(b) = self.stack.pop() {
                    for &s in &cfg.blocks[b].succs {
                        if Some(s) != stop && self.seen[s.index()] & side == 0 {
                            self.seen[s.index()] |= side;
                            self.stack.push(s);
                        }
                    }
                }
            }
            for (b, &sides) in self.seen.iter().enumerate() {
                if sides != 0 {
                    self.enclosing[b].push((bi, sides));
                }
            }
        }
        let mut extra = std::mem::take(&mut self.scratch);
        for (b, block) in cfg.blocks.iter() {
            extra.reset(self.n_regs);
            for &(bi, sides) in &self.enclosing[b.index()] {
                let br = &self.branches[bi as usize];
                extra.union_with(&self.live_in[br.reconvergence.index()]);
                if sides & FROM_FALLTHROUGH != 0 {
                    extra.union_with(&self.live_in[br.target.index()]);
                }
                if sides & FROM_TARGET != 0 {
                    extra.union_with(&self.live_in[br.fallthrough.index()]);
                }
            }
            for pc in block.start.index()..block.end.index() {
                let d = &mut self.divergent[pc];
                d.copy_from(&self.live_in[pc]);
                d.union_with(&extra);
            }
        }
        self.scratch = extra;
    }

    /// Number of instructions of the analysed kernel.
    pub fn num_insts(&self) -> usize {
        self.n_insts
    }

    /// Number of registers of the analysed kernel (the capacity of every set).
    pub fn num_regs(&self) -> usize {
        self.n_regs
    }

    /// Registers live on entry to `pc` (before it executes). `pc == len` is the virtual exit
    /// (empty).
    pub fn live_in(&self, pc: InstId) -> &RegSet {
        &self.live_in[pc.index()]
    }

    /// Registers live after `pc` executes.
    pub fn live_out(&self, pc: InstId) -> &RegSet {
        &self.live_out[pc.index()]
    }

    /// The SIMT-aware set at `pc`: [`Liveness::live_in`] united with the live-in of every PC
    /// where lanes of a warp diverged by an enclosing branch may be parked (see the module
    /// documentation). Equal to `live_in(pc)` outside divergent regions.
    pub fn divergent_live(&self, pc: InstId) -> &RegSet {
        &self.divergent[pc.index()]
    }

    /// Keeps `r` live from just after `after` up to and including before `until` (same block,
    /// `after < until`), as if `until` read it: a value the code does not read but that must
    /// survive there (an OSRB backup, `ctxback::osrb`).
    pub fn keep_live(&mut self, r: Reg, after: InstId, until: InstId) {
        for pc in after.index()..until.index() {
            self.live_out[pc].insert(r);
            self.live_in[pc + 1].insert(r);
            self.divergent[pc + 1].insert(r);
        }
    }

    /// Every potentially divergent branch of the kernel, in program order.
    pub fn divergent_branches(&self) -> &[DivergentBranch] {
        &self.branches
    }

    /// The divergent branches whose region contains `pc`, outermost and innermost alike, in
    /// program order of the branches.
    pub fn enclosing_branches<'a>(
        &'a self,
        kernel: &'a Kernel,
        pc: InstId,
    ) -> impl Iterator<Item = Enclosing<'a>> + 'a {
        let b = kernel.cfg.block_of[pc.index()];
        self.enclosing[b.index()]
            .iter()
            .map(move |&(i, sides)| Enclosing {
                branch: &self.branches[i as usize],
                from_target: sides & FROM_TARGET != 0,
                from_fallthrough: sides & FROM_FALLTHROUGH != 0,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::{kernel, names};

    #[test]
    fn straight_line_and_guarded_defs() {
        let k = kernel(
            r#"
            .reg .pred %p<2>;
            .reg .b32 %r<6>;
            mov.u32 %r1, %tid.x;
            mov.u32 %r2, 7;
            setp.eq.u32 %p1, %r1, 0;
            @%p1 mov.u32 %r2, 9;
            add.u32 %r3, %r2, %r1;
            mov.u32 %r4, %r3;
            exit;
            "#,
        );
        let mut lv = Liveness::new();
        lv.compute(&k);
        // The guarded `mov %r2` does not kill %r2: the value from pc1 is live across it.
        assert_eq!(names(&k, lv.live_in(InstId(3))), "%p1 %r1 %r2");
        assert_eq!(names(&k, lv.live_out(InstId(3))), "%r1 %r2");
        assert_eq!(names(&k, lv.live_in(InstId(0))), "");
        assert_eq!(names(&k, lv.live_in(InstId(1))), "%r1");
        // %r4 is dead (never read).
        assert_eq!(names(&k, lv.live_out(InstId(5))), "");
    }

    #[test]
    fn loop_carries_values_around_the_back_edge() {
        let k = kernel(
            r#"
            .reg .pred %p<2>;
            .reg .b32 %r<6>;
            mov.u32 %r1, 0;
            mov.u32 %r2, 10;
            mov.u32 %r3, 0;
        LOOP:
            add.u32 %r3, %r3, %r1;
            add.u32 %r1, %r1, 1;
            setp.lt.u32 %p1, %r1, %r2;
            @%p1 bra LOOP;
            mov.u32 %r4, %r3;
            exit;
            "#,
        );
        let mut lv = Liveness::new();
        lv.compute(&k);
        // At the loop head, the counter, bound and accumulator are all live.
        assert_eq!(names(&k, lv.live_in(InstId(3))), "%r1 %r2 %r3");
        // The branch needs %p1, and the back edge keeps the loop state live.
        assert_eq!(names(&k, lv.live_in(InstId(6))), "%p1 %r1 %r2 %r3");
        assert_eq!(names(&k, lv.live_in(InstId(7))), "%r3");
        // Recomputing reuses buffers and gives the same answer.
        let before = lv.live_in(InstId(3)).clone();
        lv.compute(&k);
        assert_eq!(lv.live_in(InstId(3)), &before);
        // Nothing parks lanes outside the loop except at its exit: the loop's exit branch
        // encloses the body.
        let encl: Vec<_> = lv.enclosing_branches(&k, InstId(4)).collect();
        assert_eq!(encl.len(), 1);
        assert_eq!(encl[0].branch.reconvergence, InstId(7));
        assert!(encl[0].from_target && !encl[0].from_fallthrough);
        assert_eq!(encl[0].parked_pcs(), vec![InstId(7), InstId(7)]);
        // Lanes that left the loop wait at pc7 needing %r3, already live in the loop.
        assert_eq!(lv.divergent_live(InstId(3)), lv.live_in(InstId(3)));
        assert_eq!(names(&k, lv.divergent_live(InstId(7))), "%r3");
    }

    #[test]
    fn nested_divergence_unions_every_enclosing_level() {
        let k = kernel(
            r#"
            .reg .pred %p<3>;
            .reg .b32 %r<12>;
            mov.u32 %r1, %tid.x;
            mov.u32 %r2, 1;
            mov.u32 %r3, 2;
            mov.u32 %r4, 3;
            mov.u32 %r5, 4;
            setp.lt.u32 %p1, %r1, 16;
            @%p1 bra X_TAKEN;
            add.u32 %r6, %r2, 0;
            bra.uni X_JOIN;
        X_TAKEN:
            setp.lt.u32 %p2, %r1, 8;
            @%p2 bra Y_TAKEN;
            add.u32 %r6, %r3, 0;
            bra.uni Y_JOIN;
        Y_TAKEN:
            mov.u32 %r7, %r4;
            add.u32 %r6, %r7, 0;
        Y_JOIN:
            add.u32 %r6, %r6, %r5;
        X_JOIN:
            st.shared.u32 [%r1], %r6;
            exit;
            "#,
        );
        let mut lv = Liveness::new();
        lv.compute(&k);
        // pc13 (`mov %r7, %r4` on Y's taken side) is inside both regions.
        let point = InstId(13);
        let parked: Vec<Vec<InstId>> = lv
            .enclosing_branches(&k, point)
            .map(|e| e.parked_pcs())
            .collect();
        // X (pc6): not-taken lanes at pc7 or X_JOIN (pc16); Y (pc10): at pc11 or Y_JOIN (pc15).
        assert_eq!(
            parked,
            vec![vec![InstId(7), InstId(16)], vec![InstId(11), InstId(15)]]
        );
        assert_eq!(names(&k, lv.live_in(point)), "%r1 %r4 %r5");
        // + %r2 (X's other side), %r6 (at X_JOIN and Y_JOIN), %r3 (Y's other side).
        assert_eq!(
            names(&k, lv.divergent_live(point)),
            "%r1 %r2 %r3 %r4 %r5 %r6"
        );
        // Y_JOIN is still inside X's region, but no longer in Y's.
        let at_join: Vec<InstId> = lv
            .enclosing_branches(&k, InstId(15))
            .map(|e| e.branch.branch)
            .collect();
        assert_eq!(at_join, vec![InstId(6)]);
    }
}
