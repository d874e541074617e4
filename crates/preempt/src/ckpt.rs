//! CKPT, checkpoint-based context switching (papers/ji-ctxback §V, after the GPU
//! fault-tolerance checkpoints it cites): every TB checkpoints its live registers during
//! normal execution, and a preemption throws away the work done since the last checkpoint
//! instead of saving a context.
//!
//! **Interval.** Each TB counts how often each of its warps enters each basic block; when
//! one warp has entered the same block `every` times since the TB's last checkpoint (16 in
//! the paper's evaluation), the machine says a checkpoint is due
//! ([`gpu::timing::Request::CountBlocks`]).
//!
//! **Placement.** "CKPT can always save the context of the instructions with the least
//! live registers" (§V): the mechanism's kernel pass ([`CkptPass`]) marks, in every basic
//! block, the instruction with the fewest live registers
//! ([`analysis::least_live_per_block`]) with a `pp` just before it, one instruction that
//! does nothing in normal execution (the checkpoint code's place). When a checkpoint is
//! due the TB stops at those marks ([`StopAt::AtPoint`]): each warp runs on to its next
//! mark (or a barrier it waits at, or its end) and halts there — at once if it has just
//! passed one, as a warp entering a block through its mark has — so each warp is captured
//! where its block has the least to save. Then — what the warps issued having
//! completed — its live registers, SIMT stacks and barrier state, and its shared memory if
//! it changed since the last checkpoint, are written to memory ([`Scope::Live`]), and it
//! runs on. The marks' issue slots, the pauses and the checkpoints' traffic are CKPT's
//! runtime overhead (Figure 10).
//!
//! **Preemption.** A TB with a checkpoint whose code since then can be re-executed
//! harmlessly stops at once and is rolled back to it ([`gpu::timing::Request::Rollback`]):
//! nothing is saved at the request, so the preemption is fast, and the work since is lost.
//! Re-execution is harmless only if the TB has not stored to global or local memory (or
//! performed an atomic there) since its checkpoint; the fault-tolerance schemes CKPT comes
//! from place their checkpoints at idempotent-region boundaries for that reason. Here the
//! checkpoints keep the paper's interval, so a TB that stored since its checkpoint (or has
//! none yet) is context-switched instead, saving its live registers (the [`crate::Switch`]
//! of LIVE); each TB's choice is recorded ([`Record::Chose`]).
//!
//! **Resume** loads the checkpoint (the one holding the shared memory, then the latest) and
//! re-executes from there: the lost work ([`Record::RolledBack`]: its warp instructions, and
//! the cycles it took the first time) is part of CKPT's resume cost.

use std::collections::BTreeMap;
use std::sync::Arc;

use analysis::{insert_markers, least_live_per_block, Liveness};
use gpu::exec::WARP_SIZE;
use gpu::occupancy::SmResources;
use gpu::timing::{
    AfterStop, Event, HoldId, KernelPass, LaunchId, Machine, Pass, Request, Scope, SmId, StopAt,
    TbCheckpoint, TbContext, TbRef, TimingError, TransferId, WarpReports,
};
use kir::{InstId, Kernel};

use crate::chimera::{Estimates, Technique};
use crate::switch::{stack_barrier_bytes, Switch, SwitchConfig};
use crate::{ContextBytes, Cx, How, Mechanism, Preempted, Record, RegisterCensus, Want};

/// The checkpoint interval unless told otherwise: executions of the same basic block
/// (papers/ji-ctxback §V, "every 16 times executing the same basic block").
pub const CKPT_EVERY: u32 = 16;

/// CKPT's kernel pass: a `pp` before the least-live instruction of every basic block, where
/// a TB pausing for a checkpoint stops each warp (papers/ji-ctxback §V). Run after register
/// allocation, like every timed kernel pass.
pub struct CkptPass;

impl KernelPass for CkptPass {
    fn name(&self) -> &str {
        "ckpt-places"
    }

    fn run(&self, kernel: &Kernel, _sm: &SmResources) -> Option<(Kernel, Vec<InstId>)> {
        let mut liveness = Liveness::default();
        liveness.compute(kernel);
        let points = least_live_per_block(kernel, &liveness);
        let with = insert_markers(kernel, &points).ok()?;
        let served = with.served();
        Some((with.kernel, served))
    }
}

/// Where a TB with checkpoints stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// It runs; its chain (if any) is in memory.
    Running,
    /// Asked to pause for a checkpoint.
    Pausing,
    /// Paused; the checkpoint's bytes are on their way.
    Writing,
    /// Taken by a request: stopping to be rolled back.
    Stopping,
    /// Rolled back (or checkpointed while taken): leaving its SM.
    Leaving,
}

struct TbCkpt {
    sm: SmId,
    state: State,
    /// Where its checkpoints are written (0 before the first).
    area: u64,
    /// The checkpoints a rollback applies, oldest first: the latest that holds the shared
    /// memory, then the latest if it is another.
    chain: Vec<TbCheckpoint>,
    /// When it was asked to pause for the checkpoint under way.
    asked_at: u64,
    /// When a request took it.
    requested: Option<u64>,
    /// When the stop for the request completed.
    stopped: u64,
    /// When it ran again after its latest checkpoint was written.
    ran_from: u64,
}

/// The CKPT mechanism.
pub struct Ckpt {
    every: u32,
    /// Checkpoints at each block's least-live instruction ([`CkptPass`]), or at once.
    least_live: bool,
    /// TBs that could not be rolled back: saved as LIVE saves them.
    switch: Switch,
    tbs: BTreeMap<TbRef, TbCkpt>,
}

impl Ckpt {
    pub fn new(every: u32, least_live: bool) -> Ckpt {
        Ckpt {
            every,
            least_live,
            switch: Switch::new("ckpt-switch", SwitchConfig::LIVE),
            tbs: BTreeMap::new(),
        }
    }
}

/// What a checkpoint chain holds (and a rollback restores), by part.
pub(crate) fn chain_bytes(chain: &[TbCheckpoint]) -> ContextBytes {
    let mut b = ContextBytes::default();
    for c in chain {
        let shared = c.shared.as_ref().map_or(0, |s| s.len() as u64);
        let stack_barrier = stack_barrier_bytes(c.warps.iter().map(|w| w.stack.len()));
        b.registers += c.bytes.saturating_sub(shared + stack_barrier);
        b.shared += shared;
        b.stack_barrier += stack_barrier;
    }
    b
}

/// Overwrites every register no checkpoint of `chain` holds with garbage, as the register
/// file would after the TB left: a register dead (CKPT) or never written (PEP) at the
/// checkpoint must not matter.
pub(crate) fn scramble_unheld(context: &mut TbContext, chain: &[TbCheckpoint]) {
    for (i, wc) in context.warps.iter_mut().enumerate() {
        let regs = wc.warp.regs.len() / WARP_SIZE;
        for r in 0..regs {
            let held = chain
                .iter()
                .any(|c| c.warps[i].registers.binary_search(&(r as u32)).is_ok());
            if held {
                continue;
            }
            for l in 0..WARP_SIZE {
                wc.warp.regs[r * WARP_SIZE + l] =
                    0xc4c4_0000_0000_0000 | (r as u64) << 8 | l as u64;
            }
        }
    }
}

impl Mechanism for Ckpt {
    fn name(&self) -> String {
        "ckpt".into()
    }

    /// The checkpoint places ([`CkptPass`]); the LIVE switch it falls back on needs none.
    fn kernel_pass(&self) -> Option<Pass> {
        self.least_live.then(|| Pass(Arc::new(CkptPass)))
    }

    fn preempt(&mut self, sm: SmId, want: Want, cx: &mut Cx) -> Result<(), TimingError> {
        let now = cx.machine.cycle();
        // TBs paused for a checkpoint are a whole-SM request's too: they leave once it is
        // written (their state then is the checkpoint).
        if matches!(want, Want::Sm { .. }) {
            for (&tb, t) in self.tbs.iter_mut() {
                if t.sm == sm
                    && matches!(t.state, State::Pausing | State::Writing)
                    && t.requested.is_none()
                {
                    t.requested = Some(now);
                    cx.out.taken.push((sm, tb));
                }
            }
        }
        let tbs = cx.take(sm, &want);
        let mut switched = Vec::new();
        for tb in tbs {
            let repeatable = cx.machine.tb_progress(sm, tb).is_some_and(|p| p.repeatable);
            let roll = repeatable
                && self
                    .tbs
                    .get(&tb)
                    .is_some_and(|t| t.state == State::Running && !t.chain.is_empty());
            cx.out.records.push(Record::Chose {
                cycle: now,
                sm,
                tb,
                technique: if roll {
                    Technique::Checkpoint
                } else {
                    Technique::Switch
                },
                estimates: Estimates {
                    drain: None,
                    switch: 0.0,
                    flush_cost: None,
                    deadline: 0.0,
                },
            });
            if !roll {
                // Its checkpoints (if any) are of no use now.
                if let Some(t) = self.tbs.remove(&tb) {
                    if t.area != 0 {
                        cx.machine.memory_mut().free(t.area);
                    }
                }
                switched.push(tb);
                continue;
            }
            let t = self.tbs.get_mut(&tb).expect("checked");
            t.state = State::Stopping;
            t.requested = Some(now);
            cx.ask(Request::Stop {
                sm,
                tb,
                at: StopAt::Boundary,
                then: AfterStop::Stay,
                reports: WarpReports::None,
            })?;
        }
        self.switch.switch_taken(sm, switched, &want, cx)
    }

    fn acknowledged(&mut self, event: Event, cx: &mut Cx) -> Result<(), TimingError> {
        let now = cx.machine.cycle();
        match event {
            Event::CheckpointDue { sm, tb, .. } => {
                let t = self.tbs.entry(tb).or_insert(TbCkpt {
                    sm,
                    state: State::Running,
                    area: 0,
                    chain: Vec::new(),
                    asked_at: now,
                    requested: None,
                    stopped: now,
                    ran_from: now,
                });
                // A TB the switch took, or one already pausing or leaving, goes on as it is.
                if t.state != State::Running || cx.machine.tb_progress(sm, tb).is_none() {
                    return Ok(());
                }
                t.state = State::Pausing;
                t.asked_at = now;
                // Each warp halts at its next checkpoint place (CkptPass), or at once.
                cx.ask(Request::Stop {
                    sm,
                    tb,
                    at: if self.least_live {
                        StopAt::AtPoint
                    } else {
                        StopAt::Boundary
                    },
                    then: AfterStop::Stay,
                    reports: WarpReports::None,
                })?;
                Ok(())
            }
            Event::TbStopped { sm, tb, .. } => {
                let bound = self.switch.area_bound(cx, tb);
                let Some(t) = self.tbs.get_mut(&tb) else {
                    return Err(TimingError::Mechanism(format!(
                        "ckpt: {tb} on {sm} stopped, but nothing waited for it"
                    )));
                };
                match t.state {
                    State::Pausing => {
                        if t.area == 0 {
                            t.area = cx.machine.memory_mut().alloc(bound);
                        }
                        t.state = State::Writing;
                        cx.ask(Request::Checkpoint {
                            sm,
                            tb,
                            scope: Scope::Live,
                            base: t.area,
                        })?;
                    }
                    State::Stopping => {
                        t.stopped = now;
                        let at_checkpoint: u64 = t
                            .chain
                            .last()
                            .map_or(0, |c| c.warps.iter().map(|w| w.executed).sum());
                        let executed = cx.machine.tb_progress(sm, tb).map_or(0, |p| p.executed);
                        cx.out.records.push(Record::RolledBack {
                            cycle: now,
                            sm,
                            tb,
                            discarded_instructions: executed.saturating_sub(at_checkpoint),
                            discarded_cycles: t.requested.unwrap_or(now).saturating_sub(t.ran_from),
                        });
                        cx.ask(Request::Rollback {
                            sm,
                            tb,
                            chain: t.chain.clone(),
                        })?;
                    }
                    s => {
                        return Err(TimingError::Mechanism(format!(
                            "ckpt: {tb} on {sm} stopped while {s:?}"
                        )))
                    }
                }
                Ok(())
            }
            Event::CheckpointDone {
                sm,
                checkpoint,
                cycle,
            } => {
                let tb = checkpoint.tb;
                let Some(t) = self.tbs.get_mut(&tb) else {
                    return Err(TimingError::Mechanism(format!(
                        "ckpt: a checkpoint of {tb} it did not take"
                    )));
                };
                cx.out.records.push(Record::Checkpointed {
                    sm,
                    tb,
                    paused: t.asked_at,
                    written: cycle,
                    bytes: chain_bytes(std::slice::from_ref(&checkpoint)),
                });
                if checkpoint.shared.is_some() {
                    t.chain.clear();
                } else {
                    t.chain.truncate(1);
                }
                t.chain.push(*checkpoint);
                if t.requested.is_some() {
                    // Taken while paused: its state is the checkpoint; it leaves at once.
                    t.state = State::Leaving;
                    t.stopped = t.asked_at.max(t.requested.unwrap_or(0));
                    cx.ask(Request::Evict {
                        sm,
                        tb,
                        then: AfterStop::Leave,
                    })?;
                } else {
                    t.state = State::Running;
                    t.ran_from = cycle;
                    cx.ask(Request::Resume { sm, tb })?;
                }
                Ok(())
            }
            Event::TbRolledBack { sm, tb, .. } => {
                let Some(t) = self.tbs.get_mut(&tb) else {
                    return Err(TimingError::Mechanism(format!(
                        "ckpt: {tb} on {sm} rolled back, but it did not ask"
                    )));
                };
                t.state = State::Leaving;
                cx.ask(Request::Evict {
                    sm,
                    tb,
                    then: AfterStop::Leave,
                })?;
                Ok(())
            }
            Event::TbResumed { .. } => Ok(()),
            e => self.switch.acknowledged(e, cx),
        }
    }

    fn evicted(
        &mut self,
        sm: SmId,
        mut context: Box<TbContext>,
        hold: Option<HoldId>,
        cx: &mut Cx,
    ) -> Result<(), TimingError> {
        let tb = context.tb;
        if hold.is_some() || !self.tbs.contains_key(&tb) {
            return self.switch.evicted(sm, context, hold, cx);
        }
        let t = self.tbs.remove(&tb).expect("checked");
        scramble_unheld(&mut context, &t.chain);
        let bytes = chain_bytes(&t.chain);
        let requested = t.requested.unwrap_or(t.stopped);
        cx.out.records.push(Record::Preempted {
            sm,
            tb,
            how: How::Switched,
            requested,
            stopped: t.stopped.max(requested),
            // The checkpoint was written before the request, or (taken while paused) by
            // the time it stopped; nothing moves at the request.
            moving: Vec::new(),
            released: cx.machine.cycle(),
            bytes,
            registers: RegisterCensus::default(),
        });
        cx.out.preempted.push(Preempted {
            context,
            area: t.area,
            bytes,
        });
        Ok(())
    }

    fn warp_drained(
        &mut self,
        sm: SmId,
        tb: TbRef,
        warp: u32,
        cx: &mut Cx,
    ) -> Result<(), TimingError> {
        self.switch.warp_drained(sm, tb, warp, cx)
    }

    fn finished(&mut self, sm: SmId, tb: TbRef, cycle: u64, cx: &mut Cx) {
        self.switch.finished(sm, tb, cycle, cx);
        if let Some(t) = self.tbs.remove(&tb) {
            if t.area != 0 {
                cx.machine.memory_mut().free(t.area);
            }
            // Taken while stopping, it finished first.
            if let Some(requested) = t.requested {
                cx.out
                    .records
                    .push(Record::drained(sm, tb, requested, cycle));
            }
        }
    }

    fn transfer_done(&mut self, sm: SmId, id: TransferId, cx: &mut Cx) -> Result<(), TimingError> {
        self.switch.transfer_done(sm, id, cx)
    }

    fn can_resume(&self, sm: SmId, p: &Preempted, m: &Machine) -> bool {
        self.switch.can_resume(sm, p, m)
    }

    fn assigned(
        &mut self,
        sm: SmId,
        launch: Option<LaunchId>,
        cx: &mut Cx,
    ) -> Result<(), TimingError> {
        if let Some(launch) = launch {
            cx.ask(Request::CountBlocks {
                sm,
                launch,
                every: self.every,
            })?;
        }
        self.switch.assigned(sm, launch, cx)
    }

    fn resume(&mut self, sm: SmId, p: Preempted, cx: &mut Cx) -> Result<(), TimingError> {
        // The checkpoint chain (or the LIVE context) comes back as a switched context does.
        self.switch.resume(sm, p, cx)
    }
}
