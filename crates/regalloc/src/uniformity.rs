//! Uniformity (divergence) analysis: which virtual registers provably hold the same value in
//! every active lane of a warp, so that they can live in one uniform (scalar) register per
//! warp instead of 32 lanes' worth (NVIDIA Turing+ uniform registers, AMD SGPRs; CTXBack's
//! scalar backup, papers/ji-ctxback §III-D, depends on this distinction).
//!
//! Sources of uniformity: immediates, kernel parameters and `ld.param`/`ld.const` from
//! uniform addresses, `%ctaid`, `%ntid`, `%nctaid`, `%warpid`, `%nwarpid`, `%smid`,
//! `%nsmid`, `%gridid`, the shared-memory sizes, `vote` and `activemask` (one result for the
//! whole warp), and operations whose operands are all uniform.
//!
//! Sources of divergence: `%tid`, `%laneid`, the lane masks, the clocks (conservatively),
//! loads from global/shared/local/generic memory (conservatively: another warp may write
//! between two lanes' views in a real memory system), atomics, `shfl`, barrier reductions;
//! a guard that is not uniform (lanes whose guard is false keep the old value); and sync
//! dependence: every definition inside the region of a divergent branch — the blocks
//! reachable from the branch before its reconvergence point (immediate post-dominator) — is
//! non-uniform. That region contains the whole loop when a loop's exit is divergent, which
//! covers values that leave a loop on different iterations in different lanes, and it
//! makes a register non-uniform whenever the two sides of a divergent branch can leave
//! different reaching definitions at the join.
//!
//! Uniformity is a property of the virtual register (all its definitions), computed as a
//! fixed point that only ever turns registers non-uniform.

use kir::cfg::PostDom;
use kir::inst::{Op, Operand, Space, Special};
use kir::{BlockId, Id, InstId, Kernel, Reg};

/// The result of the analysis for one kernel.
#[derive(Clone, Debug)]
pub struct Uniformity {
    divergent: Vec<bool>,
    divergent_branch: Vec<bool>,
    in_divergent_region: Vec<bool>,
}

impl Uniformity {
    /// Runs the analysis to its fixed point.
    pub fn compute(kernel: &Kernel) -> Uniformity {
        let cfg = &kernel.cfg;
        let nb = cfg.blocks.len();
        let mut divergent = vec![false; kernel.regs.len()];
        let mut divergent_branch = vec![false; kernel.insts.len()];
        let mut region = vec![false; nb];
        loop {
            let mut changed = false;
            // Sync dependence: mark the region of every divergent branch.
            for (b, block) in cfg.blocks.iter() {
                if block.end.0 == block.start.0 {
                    continue;
                }
                let last = InstId(block.end.0 - 1);
                let inst = &kernel.insts[last];
                let is_div = matches!(inst.op, Op::Bra { .. })
                    && inst.guard.is_some_and(|g| divergent[g.reg.index()]);
                if !is_div || divergent_branch[last.index()] {
                    continue;
                }
                divergent_branch[last.index()] = true;
                let stop = match cfg.ipdom[b.index()] {
                    Some(PostDom::Block(p)) => Some(p),
                    _ => None,
                };
                let mut seen = vec![false; nb];
                let mut stack: Vec<BlockId> = block.succs.clone();
                while let Some(x) = stack.pop() {
                    if Some(x) == stop || seen[x.index()] {
                        continue;
                    }
                    seen[x.index()] = true;
                    region[x.index()] = true;
                    stack.extend(cfg.blocks[x].succs.iter().copied());
                }
                changed = true;
            }
            for (b, block) in cfg.blocks.iter() {
                for i in block.start.0..block.end.0 {
                    let inst = &kernel.insts[InstId(i)];
                    if inst.defs().next().is_none() {
                        continue;
                    }
                    let nu = region[b.index()]
                        || produces_divergence(&inst.op, inst.srcs())
                        || inst.uses().any(|r| divergent[r.index()]);
                    if nu {
                        for d in inst.defs() {
                            if !divergent[d.index()] {
                                divergent[d.index()] = true;
                                changed = true;
                            }
                        }
                    }
                }
            }
            if !changed {
                break;
            }
        }
        Uniformity {
            divergent,
            divergent_branch,
            in_divergent_region: region,
        }
    }

    /// Whether `r` holds the same value in every active lane wherever it is read.
    pub fn is_uniform(&self, r: Reg) -> bool {
        !self.divergent[r.index()]
    }

    /// Whether the branch at `pc` may send the lanes of a warp different ways.
    pub fn is_divergent_branch(&self, pc: InstId) -> bool {
        self.divergent_branch[pc.index()]
    }

    /// Whether block `b` may run with only part of the warp after a divergent branch.
    pub fn in_divergent_region(&self, b: BlockId) -> bool {
        self.in_divergent_region[b.index()]
    }
}

/// Whether an operation yields lane-varying results whatever its register operands hold.
fn produces_divergence(op: &Op, srcs: &[Operand]) -> bool {
    srcs.iter().any(|s| match *s {
        Operand::Special(s) => divergent_special(s),
        _ => false,
    }) || divergent_op(op)
}

/// Whether special register `s` may differ between the lanes of a warp.
pub(crate) fn divergent_special(s: Special) -> bool {
    matches!(
        s,
        Special::Tid(_)
            | Special::LaneId
            | Special::LanemaskEq
            | Special::LanemaskLe
            | Special::LanemaskLt
            | Special::LanemaskGe
            | Special::LanemaskGt
            | Special::Clock
            | Special::Clock64
            | Special::GlobalTimer
    )
}

/// Whether `op` yields lane-varying results whatever its operands: a load other than from
/// the parameter or constant space, an atomic, a shuffle, a barrier reduction, and the
/// matrix operations (each lane receives other lanes' elements).
pub(crate) fn divergent_op(op: &Op) -> bool {
    match op {
        Op::Ld { space, .. } => !matches!(space, Space::Param | Space::Const),
        Op::Atom { .. }
        | Op::Shfl { .. }
        | Op::Bar { .. }
        | Op::Mma { .. }
        | Op::WmmaLoad { .. }
        | Op::Ldmatrix { .. }
        | Op::Mbarrier { .. } => true,
        _ => false,
    }
}
