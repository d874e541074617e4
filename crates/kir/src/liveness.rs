//! Backward register liveness over basic blocks: the one dataflow that both the register
//! allocator (over its blocks while it inserts spill code) and the analyses (over a kernel's
//! CFG, then per instruction and SIMT-aware in `analysis::liveness`) build on.
//!
//! ```text
//! live_out(b) = ∪ live_in(s) over the successors s of b   (∅ at an exit)
//! live_in(b)  = gen(b) ∪ (live_out(b) − kill(b))
//! ```
//!
//! iterated to a fixed point. `gen(b)` are the registers read in `b` before any unguarded
//! write to them in `b`; `kill(b)` the registers an **unguarded** instruction of `b` writes.
//! A guarded instruction (`@p op d, …`) leaves `d` untouched in the lanes where `p` is false,
//! so it does not kill `d`: the old value stays live above it whenever `d` is live below it.
//! (For the allocator, this one rule makes "a guarded def writes the same register as the
//! value it may leave in place" fall out of ordinary interference.)

use crate::regset::reset_sets;
use crate::{BlockId, Id, Inst, Kernel, RegSet};

/// Applies one instruction backwards: `live` goes from after `inst` to before it.
#[inline]
pub fn step_back(live: &mut RegSet, inst: &Inst) {
    if inst.guard.is_none() {
        for d in inst.defs() {
            live.remove(d);
        }
    }
    for u in inst.uses() {
        live.insert(u);
    }
}

/// Registers live into and out of each block. [`BlockLiveness::compute`] again for another
/// program reuses the buffers.
#[derive(Clone, Debug, Default)]
pub struct BlockLiveness {
    /// Per block: the registers live on entry.
    pub live_in: Vec<RegSet>,
    /// Per block: the registers live on exit.
    pub live_out: Vec<RegSet>,
    gen: Vec<RegSet>,
    kill: Vec<RegSet>,
    scratch: RegSet,
}

impl BlockLiveness {
    pub fn new() -> Self {
        Self::default()
    }

    /// Liveness of a kernel's registers over its control-flow graph (which must match its
    /// instructions).
    pub fn compute_kernel(&mut self, kernel: &Kernel) {
        let cfg = &kernel.cfg;
        self.compute(
            kernel.regs.len(),
            cfg.blocks.len(),
            |b| {
                let block = &cfg.blocks[BlockId::new(b)];
                kernel.insts.as_slice()[block.start.index()..block.end.index()].iter()
            },
            |b| cfg.blocks[BlockId::new(b)].succs.iter().map(|s| s.index()),
        );
    }

    /// Liveness of registers `0..n_regs` over `n_blocks` blocks, block `b` holding the
    /// instructions `insts(b)` in program order and flowing into `succs(b)`.
    pub fn compute<'a, I, S>(
        &mut self,
        n_regs: usize,
        n_blocks: usize,
        insts: impl Fn(usize) -> I,
        succs: impl Fn(usize) -> S,
    ) where
        I: DoubleEndedIterator<Item = &'a Inst>,
        S: IntoIterator<Item = usize>,
    {
        reset_sets(&mut self.gen, n_blocks, n_regs);
        reset_sets(&mut self.kill, n_blocks, n_regs);
        reset_sets(&mut self.live_in, n_blocks, n_regs);
        reset_sets(&mut self.live_out, n_blocks, n_regs);
        for b in 0..n_blocks {
            let (gen, kill) = (&mut self.gen[b], &mut self.kill[b]);
            // gen: the block applied backwards to nothing; kill: its unguarded writes.
            for inst in insts(b).rev() {
                step_back(gen, inst);
                if inst.guard.is_none() {
                    for d in inst.defs() {
                        kill.insert(d);
                    }
                }
            }
        }
        // Reverse program order is close to postorder for this backward problem.
        let mut changed = true;
        while changed {
            changed = false;
            for b in (0..n_blocks).rev() {
                let out = &mut self.scratch;
                out.reset(n_regs);
                for s in succs(b) {
                    out.union_with(&self.live_in[s]);
                }
                self.live_out[b].copy_from(out);
                out.subtract(&self.kill[b]);
                out.union_with(&self.gen[b]);
                if self.live_in[b].union_with(out) {
                    changed = true;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inst::{ArithOp, FloatMode, Guard, Op, Operand};
    use crate::{Reg, Ty};

    /// `d = a + b`, optionally guarded by `p`.
    fn add(d: u32, a: u32, b: u32, guard: Option<u32>) -> Inst {
        let mut i = Inst::new(
            Op::Arith {
                op: ArithOp::Add,
                ty: Ty::U32,
                mode: FloatMode::default(),
            },
            ptx::Span::default(),
        );
        i.dsts[0] = Some(Reg(d));
        i.n_dsts = 1;
        i.srcs[0] = Operand::Reg(Reg(a));
        i.srcs[1] = Operand::Reg(Reg(b));
        i.n_srcs = 2;
        i.guard = guard.map(|p| Guard {
            reg: Reg(p),
            negated: false,
        });
        i
    }

    fn regs(s: &RegSet) -> Vec<usize> {
        s.iter().map(|r| r.index()).collect()
    }

    #[test]
    fn loop_carried_values_and_guarded_defs() {
        // b0: r1 = r0 + r0          -> b1
        // b1: r2 = r1 + r3; @p4 r3 = r2 + r2 -> b1, b2
        // b2: r5 = r3 + r2
        let blocks = [
            vec![add(1, 0, 0, None)],
            vec![add(2, 1, 3, None), add(3, 2, 2, Some(4))],
            vec![add(5, 3, 2, None)],
        ];
        let succs: [&[usize]; 3] = [&[1], &[1, 2], &[]];
        let mut lv = BlockLiveness::new();
        lv.compute(6, 3, |b| blocks[b].iter(), |b| succs[b].iter().copied());
        // r3 is read before the guarded write, which does not kill it; r1 is loop-carried.
        assert_eq!(regs(&lv.live_in[1]), [1, 3, 4]);
        assert_eq!(regs(&lv.live_out[1]), [1, 2, 3, 4]);
        assert_eq!(regs(&lv.live_in[0]), [0, 3, 4]);
        assert_eq!(regs(&lv.live_out[2]), Vec::<usize>::new());
        let mut at = lv.live_out[1].clone();
        for i in blocks[1].iter().rev() {
            step_back(&mut at, i);
        }
        assert_eq!(at, lv.live_in[1]);
        // Recomputing on a smaller program reuses the buffers.
        lv.compute(3, 1, |_| blocks[0].iter(), |_| []);
        assert_eq!(regs(&lv.live_in[0]), [0]);
        assert_eq!(lv.live_in.len(), 1);
    }
}
