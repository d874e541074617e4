//! Control-flow graph of a kernel: basic blocks, dominators, post-dominators and the SIMT
//! reconvergence point of every branch.
//!
//! Reconvergence follows the immediate post-dominator rule (GPGPU-Sim's PDOM stack): a warp
//! that diverges at a branch runs each side until it reaches the branch's immediate
//! post-dominator, where the sides merge. Post-dominators are computed over the CFG plus a
//! virtual exit node that every `exit` edges into; blocks that cannot reach an exit (endless
//! loops) get an edge to the virtual exit so that every block has a post-dominator.

use crate::dom::{dominators, reverse_postorder, AdjGraph, Graph, Reversed};
use crate::ids::{BlockId, Id, IdVec, InstId};
use crate::inst::{Inst, Op};

/// A basic block: the instructions `start..end`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Block {
    pub start: InstId,
    pub end: InstId,
    pub succs: Vec<BlockId>,
    pub preds: Vec<BlockId>,
    /// Whether control may leave the kernel from this block (it ends in a reachable `exit`).
    pub exits: bool,
}

/// The post-dominator of a block: another block, or the virtual exit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PostDom {
    Block(BlockId),
    Exit,
}

/// The control-flow graph and its dominance information.
#[derive(Clone, Debug, Default)]
pub struct Cfg {
    pub blocks: IdVec<BlockId, Block>,
    /// The block of each instruction.
    pub block_of: Vec<BlockId>,
    /// Immediate dominator of each block (`None` for the entry and unreachable blocks).
    pub idom: Vec<Option<BlockId>>,
    /// Immediate post-dominator of each block (`None` for unreachable blocks).
    pub ipdom: Vec<Option<PostDom>>,
    /// For every instruction: where a warp diverging at it reconverges — the first
    /// instruction of its block's immediate post-dominator, or one past the last instruction
    /// (`InstId(len)`) when that is the virtual exit. Only meaningful for branches.
    pub reconvergence: Vec<InstId>,
}

impl Cfg {
    /// Builds the CFG of a kernel body. Branch targets must be valid instruction indices.
    pub fn build(insts: &IdVec<InstId, Inst>) -> Cfg {
        let n = insts.len();
        if n == 0 {
            return Cfg::default();
        }
        // Leaders: the first instruction, every branch target, and every instruction after
        // a branch or exit.
        let mut leader = vec![false; n];
        leader[0] = true;
        for (id, inst) in insts.iter() {
            if let Op::Bra { target, .. } = inst.op {
                leader[target.index()] = true;
            }
            if inst.is_terminator() && id.index() + 1 < n {
                leader[id.index() + 1] = true;
            }
        }
        let mut blocks: IdVec<BlockId, Block> = IdVec::new();
        let mut block_of = vec![BlockId(0); n];
        let mut start = 0;
        for i in 1..=n {
            if i == n || leader[i] {
                let b = blocks.push(Block {
                    start: InstId(start as u32),
                    end: InstId(i as u32),
                    succs: Vec::new(),
                    preds: Vec::new(),
                    exits: false,
                });
                block_of[start..i].fill(b);
                start = i;
            }
        }
        // Edges. The node `blocks.len()` is the virtual exit.
        let nb = blocks.len();
        let exit = nb;
        let mut g = AdjGraph::new(nb + 1);
        for b in blocks.ids() {
            let last = &insts[InstId(blocks[b].end.0 - 1)];
            let next = blocks[b].end.index();
            let falls_through = match last.op {
                Op::Bra { target, .. } => {
                    g.add_edge(b.index(), block_of[target.index()].index());
                    last.guard.is_some()
                }
                Op::Exit => {
                    g.add_edge(b.index(), exit);
                    last.guard.is_some()
                }
                _ => true,
            };
            if falls_through {
                if next < n {
                    g.add_edge(b.index(), block_of[next].index());
                } else {
                    // Running off the end of the body returns from the kernel.
                    g.add_edge(b.index(), exit);
                }
            }
        }
        // Blocks that cannot reach the exit (endless loops) get an edge to it, so every
        // reachable block has a post-dominator.
        let reaches_exit = {
            let mut seen = vec![false; nb + 1];
            for node in reverse_postorder(&Reversed(&g), exit) {
                seen[node] = true;
            }
            seen
        };
        let reachable = {
            let mut seen = vec![false; nb + 1];
            for node in reverse_postorder(&g, 0) {
                seen[node] = true;
            }
            seen
        };
        for b in 0..nb {
            if reachable[b] && !reaches_exit[b] {
                g.add_edge(b, exit);
            }
        }
        for b in blocks.ids() {
            let bi = b.index();
            let mut succs = Vec::new();
            for &s in g.succs(bi) {
                if s == exit {
                    blocks[b].exits = true;
                } else {
                    succs.push(BlockId(s as u32));
                }
            }
            blocks[b].preds = g.preds(bi).iter().map(|&p| BlockId(p as u32)).collect();
            blocks[b].succs = succs;
        }
        let idom = dominators(&g, 0);
        let pdom = dominators(&Reversed(&g), exit);
        let idom: Vec<Option<BlockId>> = (0..nb)
            .map(|b| match idom[b] {
                Some(d) if d != b => Some(BlockId(d as u32)),
                _ => None,
            })
            .collect();
        let ipdom: Vec<Option<PostDom>> = (0..nb)
            .map(|b| {
                if !reachable[b] {
                    return None;
                }
                pdom[b].map(|d| {
                    if d == exit {
                        PostDom::Exit
                    } else {
                        PostDom::Block(BlockId(d as u32))
                    }
                })
            })
            .collect();
        let reconvergence = (0..n)
            .map(|i| match ipdom[block_of[i].index()] {
                Some(PostDom::Block(d)) => blocks[d].start,
                _ => InstId(n as u32),
            })
            .collect();
        Cfg {
            blocks,
            block_of,
            idom,
            ipdom,
            reconvergence,
        }
    }
}
