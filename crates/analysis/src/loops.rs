//! Natural loops from back edges, their bodies, nesting depth and innermost loops.
//!
//! lin-lightweight §IV-A places one preemption point per innermost loop ("for nested loops,
//! only the innermost loop is considered"), because long thread blocks are long because of
//! loops. A *back edge* is a CFG edge `t → h` whose head `h` dominates its tail `t`; the
//! natural loop of a back edge is `h` plus every block that reaches `t` without passing
//! through `h`. Back edges sharing a header form one loop (the union of their bodies).
//! Loop `A` is nested in loop `B` when `B`'s body contains `A`'s header and `A ≠ B`; for
//! natural loops this means `A`'s body is a subset of `B`'s. Its parent is the smallest such
//! `B`, its depth is 1 plus its parent's (outermost loops have depth 1), and a loop with no
//! nested loop is *innermost*. Innermost loops are pairwise disjoint.
//!
//! Retreating edges of irreducible control flow (a cycle entered at two places, so no block
//! dominates the other) are not back edges and form no loop; NVRTC does not emit such code
//! for structured CUDA. Unreachable blocks belong to no loop.

use std::fmt;

use kir::{BlockId, Id, InstId, Kernel};

/// A loop of a [`LoopForest`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LoopId(pub u32);

impl Id for LoopId {
    fn new(index: usize) -> Self {
        LoopId(index as u32)
    }
    fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for LoopId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "loop{}", self.0)
    }
}

/// One natural loop.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Loop {
    /// The header block: it dominates every block of the body.
    pub header: BlockId,
    /// The tails of the back edges into `header`.
    pub latches: Vec<BlockId>,
    /// The body, header included, in increasing block order.
    pub blocks: Vec<BlockId>,
    /// The smallest loop containing this one.
    pub parent: Option<LoopId>,
    /// 1 for an outermost loop.
    pub depth: u32,
    /// Whether no other loop is nested in this one.
    pub innermost: bool,
}

/// All natural loops of a kernel, recomputable with [`LoopForest::compute`].
#[derive(Clone, Debug, Default)]
pub struct LoopForest {
    loops: Vec<Loop>,
    /// The innermost loop containing each block.
    loop_of_block: Vec<Option<LoopId>>,
    in_body: Vec<bool>,
    stack: Vec<BlockId>,
}

/// Whether block `a` dominates block `b` (both reachable), by walking `b`'s idom chain.
pub fn dominates(kernel: &Kernel, a: BlockId, mut b: BlockId) -> bool {
    loop {
        if a == b {
            return true;
        }
        match kernel.cfg.idom[b.index()] {
            Some(p) => b = p,
            None => return false,
        }
    }
}

/// Whether `b` is reachable from the entry block.
pub fn reachable(kernel: &Kernel, b: BlockId) -> bool {
    b.index() == 0 || kernel.cfg.idom[b.index()].is_some()
}

impl LoopForest {
    pub fn new() -> Self {
        Self::default()
    }

    /// Finds the loops of `kernel`.
    pub fn compute(&mut self, kernel: &Kernel) {
        let cfg = &kernel.cfg;
        let nb = cfg.blocks.len();
        self.loops.clear();
        self.loop_of_block.clear();
        self.loop_of_block.resize(nb, None);
        // Back edges grouped by header, headers in block order.
        let mut latches: Vec<Vec<BlockId>> = vec![Vec::new(); nb];
        for (t, block) in cfg.blocks.iter() {
            if !reachable(kernel, t) {
                continue;
            }
            for &h in &block.succs {
                if dominates(kernel, h, t) {
                    latches[h.index()].push(t);
                }
            }
        }
        for (h, ls) in latches.into_iter().enumerate() {
            if ls.is_empty() {
                continue;
            }
            let header = BlockId::new(h);
            self.in_body.clear();
            self.in_body.resize(nb, false);
            self.in_body[h] = true;
            self.stack.clear();
            for &t in &ls {
                if !self.in_body[t.index()] {
                    self.in_body[t.index()] = true;
                    self.stack.push(t);
                }
            }
            while let Some(b) = self.stack.pop() {
                for &p in &cfg.blocks[b].preds {
                    if !self.in_body[p.index()] && reachable(kernel, p) {
                        self.in_body[p.index()] = true;
                        self.stack.push(p);
                    }
                }
            }
            let blocks = (0..nb)
                .filter(|&b| self.in_body[b])
                .map(BlockId::new)
                .collect();
            self.loops.push(Loop {
                header,
                latches: ls,
                blocks,
                parent: None,
                depth: 1,
                innermost: true,
            });
        }
        // Nesting: the parent is the smallest other loop whose body holds the header.
        let n = self.loops.len();
        for i in 0..n {
            let h = self.loops[i].header;
            let parent = (0..n)
                .filter(|&j| j != i && self.loops[j].blocks.binary_search(&h).is_ok())
                .min_by_key(|&j| self.loops[j].blocks.len());
            self.loops[i].parent = parent.map(LoopId::new);
            if let Some(p) = parent {
                self.loops[p].innermost = false;
            }
        }
        // Depths, outermost first (a parent is strictly larger than its child).
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(self.loops[i].blocks.len()));
        for &i in &order {
            self.loops[i].depth = match self.loops[i].parent {
                Some(p) => self.loops[p.index()].depth + 1,
                None => 1,
            };
            // Larger loops are visited first, so the last writer is the innermost loop.
            for bi in 0..self.loops[i].blocks.len() {
                let b = self.loops[i].blocks[bi];
                self.loop_of_block[b.index()] = Some(LoopId::new(i));
            }
        }
    }

    /// Every loop, indexed by [`LoopId`].
    pub fn loops(&self) -> &[Loop] {
        &self.loops
    }

    pub fn get(&self, id: LoopId) -> &Loop {
        &self.loops[id.index()]
    }

    /// The innermost loops.
    pub fn innermost(&self) -> impl Iterator<Item = (LoopId, &Loop)> + '_ {
        self.loops
            .iter()
            .enumerate()
            .filter(|(_, l)| l.innermost)
            .map(|(i, l)| (LoopId::new(i), l))
    }

    /// The innermost loop containing block `b`.
    pub fn loop_of_block(&self, b: BlockId) -> Option<LoopId> {
        self.loop_of_block[b.index()]
    }

    /// The innermost loop containing instruction `pc`.
    pub fn loop_of(&self, kernel: &Kernel, pc: InstId) -> Option<LoopId> {
        self.loop_of_block(kernel.cfg.block_of[pc.index()])
    }

    /// Loop nesting depth of `pc` (0 outside loops).
    pub fn depth_of(&self, kernel: &Kernel, pc: InstId) -> u32 {
        self.loop_of(kernel, pc)
            .map_or(0, |l| self.loops[l.index()].depth)
    }

    /// The instructions of a loop's body, in program order.
    pub fn insts<'a>(
        &'a self,
        kernel: &'a Kernel,
        id: LoopId,
    ) -> impl Iterator<Item = InstId> + Clone + 'a {
        self.loops[id.index()].blocks.iter().flat_map(move |&b| {
            let blk = &kernel.cfg.blocks[b];
            (blk.start.index()..blk.end.index()).map(InstId::new)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::kernel;

    #[test]
    fn nested_loops_depths_and_innermost() {
        let k = kernel(
            r#"
            .reg .pred %p<4>;
            .reg .b32 %r<8>;
            mov.u32 %r1, 0;
        OUTER:
            mov.u32 %r2, 0;
        INNER:
            add.u32 %r2, %r2, 1;
            setp.lt.u32 %p1, %r2, 4;
            @%p1 bra INNER;
            add.u32 %r1, %r1, 1;
            setp.lt.u32 %p2, %r1, 4;
            @%p2 bra OUTER;
        SECOND:
            add.u32 %r3, %r3, 1;
            setp.lt.u32 %p3, %r3, 9;
            @%p3 bra SECOND;
            exit;
            "#,
        );
        let mut lf = LoopForest::new();
        lf.compute(&k);
        assert_eq!(lf.loops().len(), 3);
        let depth = |pc: u32| lf.depth_of(&k, InstId(pc));
        assert_eq!(depth(0), 0);
        assert_eq!(depth(1), 1); // OUTER
        assert_eq!(depth(2), 2); // INNER
        assert_eq!(depth(5), 1);
        assert_eq!(depth(8), 1); // SECOND
        assert_eq!(depth(11), 0);
        let inner: Vec<Vec<u32>> = lf
            .innermost()
            .map(|(id, _)| lf.insts(&k, id).map(|i| i.0).collect())
            .collect();
        assert_eq!(inner, vec![vec![2, 3, 4], vec![8, 9, 10]]);
        let outer = lf.loop_of(&k, InstId(1)).unwrap();
        assert!(!lf.get(outer).innermost);
        assert_eq!(
            lf.get(lf.loop_of(&k, InstId(2)).unwrap()).parent,
            Some(outer)
        );
    }

    #[test]
    fn forward_branches_are_not_loops() {
        let k = kernel(
            r#"
            .reg .pred %p<2>;
            .reg .b32 %r<4>;
            mov.u32 %r1, %tid.x;
            setp.eq.u32 %p1, %r1, 0;
            @%p1 bra SKIP;
            add.u32 %r1, %r1, 1;
        SKIP:
            exit;
            "#,
        );
        let mut lf = LoopForest::new();
        lf.compute(&k);
        assert!(lf.loops().is_empty());
    }
}
