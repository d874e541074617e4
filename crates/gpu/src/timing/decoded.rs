//! What the issue stage needs of each instruction, decoded once per launch (as the hardware
//! decodes into its instruction buffer).

use kir::inst::{Inst, Op};
use kir::Id;

use crate::pipeline::OpClass;

/// Per instruction: the operation class, and the registers the scoreboard looks up (sources,
/// then destinations).
pub(crate) struct Decoded {
    class: Vec<OpClass>,
    /// Per instruction: the `(groups, all)` of a `cp.async.wait_group`/`wait_all` (empty
    /// when the kernel has none).
    cp_async_waits: Vec<Option<(u8, bool)>>,
    /// Per instruction: where its registers start in `regs`, how many there are, and how
    /// many of them are sources (they come first).
    spans: Vec<(u32, u32, u32)>,
    regs: Vec<u32>,
    /// Per instruction: whether it may end the warp or make it wait at a barrier (`exit`,
    /// `bar`): a warp with memory instructions it may still replay issues none.
    leaves: Vec<bool>,
}

impl Decoded {
    pub(crate) fn of(kernel: &kir::Kernel) -> Decoded {
        let insts = kernel.insts.as_slice();
        let waits = |i: &Inst| match i.op {
            Op::CpAsyncWait { groups, all } => Some((groups, all)),
            _ => None,
        };
        let mut d = Decoded {
            cp_async_waits: if insts.iter().any(|i| waits(i).is_some()) {
                insts.iter().map(waits).collect()
            } else {
                Vec::new()
            },
            class: Vec::with_capacity(insts.len()),
            spans: Vec::with_capacity(insts.len()),
            regs: Vec::new(),
            leaves: insts
                .iter()
                .map(|i| matches!(i.op, Op::Exit | Op::Bar { .. }))
                .collect(),
        };
        for inst in insts {
            d.class.push(OpClass::of(inst));
            let start = d.regs.len() as u32;
            d.regs.extend(inst.uses().map(|r| r.index() as u32));
            let uses = d.regs.len() as u32 - start;
            d.regs.extend(inst.defs().map(|r| r.index() as u32));
            d.spans.push((start, d.regs.len() as u32 - start, uses));
        }
        d
    }

    /// The operation class of instruction `pc`.
    #[inline]
    pub(crate) fn class(&self, pc: u32) -> OpClass {
        self.class[pc as usize]
    }

    /// Whether instruction `pc` may end its warp or make it wait at a barrier.
    #[inline]
    pub(crate) fn leaves(&self, pc: u32) -> bool {
        self.leaves[pc as usize]
    }

    /// The `(groups, all)` of instruction `pc` if it is a `cp.async` wait.
    #[inline]
    pub(crate) fn cp_async_wait(&self, pc: u32) -> Option<(u8, bool)> {
        self.cp_async_waits.get(pc as usize).copied().flatten()
    }

    /// The registers instruction `pc` reads or writes.
    #[inline]
    pub(crate) fn regs(&self, pc: u32) -> &[u32] {
        let (start, len, _) = self.spans[pc as usize];
        &self.regs[start as usize..(start + len) as usize]
    }

    /// The registers instruction `pc` reads.
    #[inline]
    pub(crate) fn sources(&self, pc: u32) -> &[u32] {
        let (start, _, uses) = self.spans[pc as usize];
        &self.regs[start as usize..(start + uses) as usize]
    }

    /// The registers instruction `pc` writes.
    #[inline]
    pub(crate) fn destinations(&self, pc: u32) -> &[u32] {
        let (start, len, uses) = self.spans[pc as usize];
        &self.regs[(start + uses) as usize..(start + len) as usize]
    }
}
