//! Checkpoints without stopping (papers/li-pep §3; CKPT, papers/ji-ctxback §V): a TB is
//! captured as it stands while it keeps running, its bytes written to device memory as
//! context traffic, and a stopped TB can be put back in the state of its checkpoints,
//! discarding what it did since.
//!
//! **Consistency.** Every instruction executes functionally when it issues, so a TB's
//! registers, SIMT stacks, shared memory and barrier state at any cycle are those after
//! every instruction it has issued: a capture needs no drain. Loads in flight have already
//! written their registers; stores have already reached device memory.
//!
//! **Dirty bits** (papers/li-pep §3.1): every register written at issue is marked (a TB
//! installed from a context starts with every mark set); a [`Scope::Dirty`] checkpoint
//! captures only the marked registers — those written since the TB's last checkpoint, or,
//! for its first, since it was placed: PEP's base checkpoint of the active context — and
//! the shared memory if the TB stored to it since its last checkpoint (always at the
//! first), and clears the marks. A [`Scope::Live`] checkpoint captures the registers live
//! at each warp's PCs (CKPT's checkpoints, papers/ji-ctxback §V), with the shared memory
//! under the same rule. A rollback chain starts with a full or live one.
//!
//! **Rollback** re-executes the instructions issued since the latest checkpoint, which is
//! harmless only if none of them stored to global or local memory or performed an atomic
//! there (local memory is per-thread device memory the checkpoint does not hold; global
//! stores and atomics may feed reads of the re-executed code). The SM notes the first such
//! instruction after each checkpoint — the strict idempotence of papers/lin-lightweight
//! §II-B, dynamically — and refuses a rollback past one.

use kir::inst::{Inst, Op, Space};
use kir::Id;

use crate::exec::WARP_SIZE;
use crate::timing::control::{ControlError, Scope, TbCheckpoint, WarpCheckpoint};
use crate::timing::ids::{CheckpointId, TbRef, TransferId};
use crate::timing::launch::Launch;

use super::residency::{Checkpoints, SharedDirty};
use super::Sm;

/// Checkpoints whose bytes are still on their way to memory, and the next checkpoint id.
#[derive(Default)]
pub(super) struct Checkpointing {
    in_flight: Vec<(TransferId, TbCheckpoint)>,
    next: u32,
}

impl Checkpointing {
    /// The checkpoint whose transfer `id` completed, if it was one.
    pub fn completed(&mut self, id: TransferId) -> Option<TbCheckpoint> {
        let i = self.in_flight.iter().position(|(t, _)| *t == id)?;
        Some(self.in_flight.remove(i).1)
    }
}

impl Checkpoints {
    /// Notes an issued instruction of the TB (with active lanes) after a checkpoint.
    pub fn note(&mut self, inst: &Inst, pc: u32) {
        let space = match inst.op {
            Op::St { space, .. }
            | Op::Atom { space, .. }
            | Op::Red { space, .. }
            | Op::WmmaStore { space, .. }
            | Op::Stmatrix { space, .. }
            | Op::Mbarrier { space, .. } => space,
            // Copies into shared memory.
            Op::CpAsync { .. } => Space::Shared,
            _ => return,
        };
        match space {
            Space::Shared => self.shared_dirty = SharedDirty::Written,
            // A generic address may be either.
            Space::Generic => {
                self.shared_dirty = SharedDirty::Written;
                self.hazard.get_or_insert(pc);
            }
            _ => {
                self.hazard.get_or_insert(pc);
            }
        }
    }
}

impl Sm {
    /// Captures resident TB `tb` now: the checkpoint, its size in bytes, and it becomes the
    /// TB's latest.
    pub(in crate::timing) fn capture_checkpoint(
        &mut self,
        launch: &Launch,
        tb: TbRef,
        scope: Scope,
        now: u64,
    ) -> Result<TbCheckpoint, ControlError> {
        let k = self
            .res
            .find(tb)
            .ok_or(ControlError::NotResident { sm: self.id, tb })?;
        let id = CheckpointId(self.ckpt.next);
        self.ckpt.next += 1;
        let n_regs = launch.ctx.kernel.regs.len();
        let t = self.res.tbs[k].as_mut().expect("resident TB");
        // Stores to shared memory are followed only after a TB's first checkpoint.
        let shared = (scope == Scope::Full
            || t.checkpoints.latest.is_none()
            || t.checkpoints.shared_dirty == SharedDirty::Written)
            .then(|| t.shared.clone());
        let mut bytes = shared.as_ref().map_or(0, |s| s.len() as u64);
        let mut warps = Vec::with_capacity(t.slots.len());
        for &s in &t.slots {
            let w = self.res.warps[s].as_mut().expect("resident warp");
            let lanes = u64::from((w.warp.valid & !w.warp.exited).count_ones());
            let registers: Vec<u32> = match scope {
                Scope::Full => (0..n_regs as u32).collect(),
                Scope::Dirty => (0..n_regs as u32).filter(|&r| w.is_dirty(r)).collect(),
                Scope::Live => {
                    // Live before any PC the warp still has lanes at, as a context switch
                    // saving live registers keeps them (papers/lin-lightweight §III-A).
                    let mut live = kir::RegSet::with_capacity(n_regs);
                    for e in w.warp.stack.iter() {
                        if e.mask != 0 && e.pc != e.rpc && (e.pc as usize) < launch.ctx.kernel.len()
                        {
                            live.union_with(&launch.live_in(e.pc));
                        }
                    }
                    live.iter().map(|r| r.index() as u32).collect()
                }
            };
            let mut values = Vec::with_capacity(registers.len() * WARP_SIZE);
            for &r in &registers {
                let base = r as usize * WARP_SIZE;
                values.extend_from_slice(&w.warp.regs[base..base + WARP_SIZE]);
            }
            // Registers of the lanes that have not exited, the SIMT stack (12 bytes an
            // entry) and the barrier status.
            bytes += registers.len() as u64 * lanes * 4 + w.warp.stack.len() as u64 * 12 + 4;
            w.dirty.fill(0);
            warps.push(WarpCheckpoint {
                stack: w.warp.stack.clone(),
                exited: w.warp.exited,
                status: w.status,
                executed: w.warp.executed,
                thread_executed: w.warp.thread_executed,
                registers,
                values,
            });
        }
        // The TB's 16 named-barrier counters.
        bytes += 64;
        t.checkpoints = Checkpoints {
            latest: Some(id),
            hazard: None,
            shared_dirty: SharedDirty::Clean,
        };
        t.blocks.counts.fill(0);
        t.blocks.due = false;
        Ok(TbCheckpoint {
            id,
            tb,
            scope,
            taken_at: now,
            warps,
            shared,
            barriers: t.bars.clone(),
            bytes,
        })
    }

    /// Keeps `checkpoint` until its transfer `id` completes.
    pub(in crate::timing) fn checkpoint_in_flight(
        &mut self,
        id: TransferId,
        checkpoint: TbCheckpoint,
    ) {
        self.ckpt.in_flight.push((id, checkpoint));
    }

    /// Puts stopped TB `tb` back in the state of `chain` (a full checkpoint, then dirty ones
    /// in order, the last the TB's latest); registers no checkpoint holds get `garbage`.
    pub(in crate::timing) fn rollback(
        &mut self,
        launches: &[Launch],
        tb: TbRef,
        chain: &[TbCheckpoint],
        garbage: u64,
    ) -> Result<(), ControlError> {
        let k = self
            .res
            .find(tb)
            .ok_or(ControlError::NotResident { sm: self.id, tb })?;
        let refuse = |why: String| Err(ControlError::NoRollback { tb, why });
        let t = self.res.tb(k);
        if t.control != crate::timing::control::TbControl::Stopped {
            return Err(ControlError::Illegal {
                request: "rollback",
                what: format!("{tb} on {}", self.id),
                state: t.control.name().to_string(),
            });
        }
        let (Some(first), Some(last)) = (chain.first(), chain.last()) else {
            return refuse("no checkpoint given".into());
        };
        if first.scope == Scope::Dirty {
            return refuse(format!(
                "the chain starts with {}, which holds only what changed",
                first.id
            ));
        }
        if chain
            .iter()
            .any(|c| c.tb != tb || c.warps.len() != t.slots.len())
        {
            return refuse("a checkpoint of another TB".into());
        }
        if chain.windows(2).any(|w| w[0].id >= w[1].id) {
            return refuse("the checkpoints are not in the order they were taken".into());
        }
        if t.checkpoints.latest != Some(last.id) {
            return refuse(format!(
                "{} is not its latest checkpoint{}",
                last.id,
                t.checkpoints
                    .latest
                    .map_or(String::new(), |l| format!(" ({l} is)"))
            ));
        }
        // A stop does not wait for a squashed access (`replay`): its replay is still to
        // come, and re-executing from a checkpoint would issue the instruction again.
        let squashed = t.slots.iter().any(|&s| {
            self.res
                .warp(s)
                .replay
                .iter()
                .any(|e| !e.resend.is_empty() && !e.committed)
        });
        if squashed {
            return refuse("a memory instruction of it waits to be replayed after a fault".into());
        }
        if let Some(pc) = t.checkpoints.hazard {
            let origin = launches[tb.launch.index()]
                .origins
                .as_ref()
                .and_then(|o| o.get(pc as usize).copied())
                .unwrap_or(kir::InstId(pc));
            return refuse(format!(
                "since {} it executed a store or atomic to global or local memory ({} of the \
                 PTX), which re-executing would repeat",
                last.id, origin
            ));
        }
        let decoded = &launches[tb.launch.index()].decoded;
        for i in 0..self.res.slots_of(k).len() {
            let s = self.res.slots_of(k)[i];
            let w = self.res.warp_mut(s);
            for (r, v) in w.warp.regs.iter_mut().enumerate() {
                *v = garbage ^ (r as u64).rotate_left(17);
            }
            for c in chain {
                let wc = &c.warps[i];
                for (n, &r) in wc.registers.iter().enumerate() {
                    let base = r as usize * WARP_SIZE;
                    w.warp.regs[base..base + WARP_SIZE]
                        .copy_from_slice(&wc.values[n * WARP_SIZE..(n + 1) * WARP_SIZE]);
                }
            }
            let wc = &last.warps[i];
            w.warp.stack = wc.stack.clone();
            w.warp.exited = wc.exited;
            w.warp.executed = wc.executed;
            w.warp.thread_executed = wc.thread_executed;
            w.status = wc.status;
            w.dirty.fill(0);
            self.sync(decoded, s);
        }
        let t = self.res.tb_mut(k);
        if let Some(shared) = chain.iter().rev().find_map(|c| c.shared.as_ref()) {
            t.shared.copy_from_slice(shared);
        }
        t.bars = last.barriers.clone();
        t.checkpoints.shared_dirty = SharedDirty::Clean;
        self.retire_soon();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kir::inst::Ty;

    fn store(space: Space) -> Inst {
        Inst::new(
            Op::St {
                space,
                ty: Ty::B32,
                vec: 1,
                offset: 0,
            },
            Default::default(),
        )
    }

    #[test]
    fn global_and_local_stores_are_hazards_shared_stores_dirty_shared_memory() {
        let mut c = Checkpoints::default();
        c.note(&store(Space::Shared), 3);
        assert_eq!((c.hazard, c.shared_dirty), (None, SharedDirty::Written));
        c.note(&store(Space::Local), 5);
        c.note(&store(Space::Global), 7);
        // The first hazard is the one named.
        assert_eq!(c.hazard, Some(5));
        let mut g = Checkpoints::default();
        g.note(&store(Space::Generic), 9);
        assert_eq!((g.hazard, g.shared_dirty), (Some(9), SharedDirty::Written));
        let mut n = Checkpoints::default();
        n.note(&Inst::new(Op::Nop, Default::default()), 1);
        assert_eq!((n.hazard, n.shared_dirty), (None, SharedDirty::Clean));
    }
}
