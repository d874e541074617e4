//! PEP, proactive checkpointing (papers/li-pep §3): the host's `cudaLaunch` comes tens of
//! microseconds before the kernel reaches the GPU, so a preemption can be anticipated.
//!
//! **Prediction** (§3.2). When the host calls a launch that may preempt the kernels on some
//! SMs ([`Mechanism::launch_called`]), each of their running TBs is judged: its remaining
//! time is the kernel's profiled mean TB time ([`gpu::timing::Launch::mean_tb_cycles`])
//! less the time it has run, or, before any TB has finished, Chimera's estimate (the mean
//! instructions of a finished TB less its own, times its CPI); the switch time is the worst
//! case, every TB of the SM saving its dirty context one after another over the SM's share
//! of DRAM bandwidth. If the predicted launch time ([`PepConfig::predicted_launch_us`],
//! 20 µs) is shorter than the remaining time — the preemption will come while the TB still
//! runs — and the remaining time is longer than the switch time — the kernel is *long* —
//! the TB takes a **base checkpoint** now; otherwise it is left to drain. A TB nothing can
//! be estimated for is checkpointed.
//!
//! **Base checkpoint** (§3.3). The TB stops fetching and its pipeline drains (a stop that
//! keeps it resident), its dirty registers — those written since it was placed, which is
//! its active context (§3.1) — with its shared memory, SIMT stacks and barrier state are
//! written to memory ([`gpu::timing::Request::Checkpoint`], which clears the dirty bits),
//! and it runs on. Its idle time is PEP's overhead (Figure 9).
//!
//! **At the request** (the kernel reaches the GPU and the policy takes the SM), per TB, the
//! cases of Figures 3–4:
//! * (a) *two checkpoints*: its base is written; it stops and saves an **incremental
//!   checkpoint**, only the registers written since the base, as a context switch
//!   ([`crate::Switch`] saving [`Registers::Dirty`]; in place for PEP+in-place, where what
//!   the incoming kernel does not need stays on the SM, papers/lin-lightweight §III-A);
//! * (b) *single checkpoint*: its base is still being written; once it is, the TB leaves at
//!   once, as its state is saved;
//! * (c) *drain*: it was left to drain, and still is estimated to finish sooner than its
//!   SM's switch time;
//! * (d)/(e) *drain, then checkpoint*: a TB placed after the launch call (its predecessor
//!   drained), or one left to drain that now is estimated to run longer than the switch
//!   time, saves its dirty context at the request: a single checkpoint, as Chimera+dirty
//!   would. (The paper lets such a TB run a fixed number of instructions and then take a
//!   base checkpoint if the launch is still pending; here it waits for the request.)
//!
//! **Restore** (§3.3) loads the base checkpoint, then the incremental one, in order; a
//! register neither holds was never written, and is garbage.

use std::collections::BTreeMap;

use gpu::exec::WARP_SIZE;
use gpu::timing::{
    AfterStop, Direction, Event, HoldId, LaunchId, Machine, Request, Scope, SmId, StopAt,
    TbCheckpoint, TbContext, TbRef, TimingError, TransferId, WarpReports,
};
use serde::Serialize;

use crate::chimera::{Estimates, Technique};
use crate::drain::Drain;
use crate::switch::{Registers, Switch, SwitchConfig};
use crate::{ContextBytes, Cx, How, Mechanism, Preempted, Record, RegisterCensus, Want};

/// The launch time PEP predicts unless told otherwise, µs (papers/li-pep §3.2: "such as
/// 20 µs"; §4 studies 20–30 µs).
pub const PEP_PREDICTED_LAUNCH_US: f64 = 20.0;

/// PEP's parameters.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct PepConfig {
    /// The time from `cudaLaunch` to the kernel's arrival PEP assumes, µs.
    pub predicted_launch_us: f64,
    /// Keep on the SM the part of the incremental checkpoint the incoming kernel leaves
    /// room for (PEP+in-place).
    pub in_place: bool,
}

/// What PEP did with a TB it gave up (Figure 5's categories).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PepCase {
    /// (a) A base checkpoint before the request, an incremental one at it.
    TwoCheckpoints,
    /// (b) The base checkpoint was still being written when the request came; the TB left
    /// once it was.
    SingleCheckpoint,
    /// (c) It drained.
    Drain,
    /// (d)/(e) No base checkpoint: its dirty context saved at the request.
    CheckpointAtRequest,
}

/// A TB with a base checkpoint taken or under way.
struct Base {
    sm: SmId,
    state: BaseState,
    /// When the TB was asked to pause for it, and when it had.
    asked_at: u64,
    paused_at: u64,
    /// The request that came while it was paused, if one did.
    requested: Option<u64>,
    /// Where the base checkpoint is written, and (once written) what it holds.
    area: u64,
    checkpoint: Option<Box<TbCheckpoint>>,
    /// When its bytes started and finished moving.
    moving: Option<(u64, u64)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BaseState {
    /// Stopping to take it.
    Pausing,
    /// Stopped; its bytes are being written.
    Writing,
    /// Written: the TB runs on (or, requested meanwhile, leaves).
    Written,
}

/// The PEP mechanism.
pub struct Pep {
    config: PepConfig,
    /// The incremental checkpoint, and single checkpoints at the request.
    switch: Switch,
    draining: Drain,
    bases: BTreeMap<TbRef, Base>,
    /// TBs of case (a) between their request and their restore: their base checkpoint.
    carried: BTreeMap<TbRef, (u64, Box<TbCheckpoint>)>,
}

impl Pep {
    pub fn new(config: PepConfig) -> Pep {
        Pep {
            config,
            switch: Switch::new(
                "pep-switch",
                SwitchConfig {
                    registers: Registers::Dirty,
                    in_place: config.in_place,
                    ..SwitchConfig::BASELINE
                },
            ),
            draining: Drain::default(),
            bases: BTreeMap::new(),
            carried: BTreeMap::new(),
        }
    }

    /// Per TB, the estimated remaining time (`None`: nothing to estimate from), and the
    /// SM's switch time, every TB of `tbs` saving its dirty context (core cycles).
    fn estimate(&mut self, m: &Machine, sm: SmId, tbs: &[TbRef]) -> (Vec<Option<f64>>, f64) {
        let now = m.cycle();
        let bandwidth = m.memory_config().dram_bytes_per_core_cycle() / f64::from(m.sm_count());
        let bytes: u64 = tbs
            .iter()
            .map(|&tb| self.switch.dirty_context_bytes(m, sm, tb))
            .sum();
        let switch = bytes as f64 / bandwidth.max(1e-9);
        let remaining = tbs
            .iter()
            .map(|&tb| {
                let p = m.tb_progress(sm, tb)?;
                let launch = m.launch(tb.launch);
                if let Some(mean) = launch.mean_tb_cycles() {
                    return Some((mean - (now - p.placed_at) as f64).max(0.0));
                }
                let mean = launch.mean_tb_instructions()?;
                (p.executed_here > 0).then(|| {
                    let cpi = (now - p.placed_at) as f64 / p.executed_here as f64;
                    (mean - p.executed as f64).max(0.0) * cpi
                })
            })
            .collect();
        (remaining, switch)
    }

    /// Forgets bases of TBs that finished without a request, freeing their areas.
    fn forget_finished(&mut self, cx: &mut Cx) {
        let gone: Vec<TbRef> = self
            .bases
            .iter()
            .filter(|(tb, b)| b.requested.is_none() && cx.machine.tb_progress(b.sm, **tb).is_none())
            .map(|(tb, _)| *tb)
            .collect();
        for tb in gone {
            let b = self.bases.remove(&tb).expect("listed");
            // A checkpoint still being written keeps its area until it is.
            if b.state == BaseState::Written {
                cx.machine.memory_mut().free(b.area);
            }
        }
    }

    fn case(cx: &mut Cx, sm: SmId, tb: TbRef, case: PepCase) {
        cx.out.records.push(Record::Case {
            cycle: cx.machine.cycle(),
            sm,
            tb,
            case,
        });
    }
}

/// What a checkpoint holds, by part.
fn checkpoint_bytes(c: &TbCheckpoint) -> ContextBytes {
    crate::ckpt::chain_bytes(std::slice::from_ref(c))
}

fn add(a: &mut ContextBytes, b: ContextBytes) {
    a.registers += b.registers;
    a.shared += b.shared;
    a.stack_barrier += b.stack_barrier;
    a.metadata += b.metadata;
}

/// Puts back into `context` the registers `base` holds that the incremental save did not
/// (those not written since the base): restoring the base, then the incremental
/// checkpoint. Exited lanes stay as they are.
fn apply_base(context: &mut TbContext, base: &TbCheckpoint) {
    for (wc, bw) in context.warps.iter_mut().zip(&base.warps) {
        let live = wc.warp.valid & !wc.warp.exited;
        for (n, &r) in bw.registers.iter().enumerate() {
            if wc.is_dirty(r) {
                continue;
            }
            for l in 0..WARP_SIZE {
                if live & (1 << l) != 0 {
                    wc.warp.regs[r as usize * WARP_SIZE + l] = bw.values[n * WARP_SIZE + l];
                }
            }
        }
    }
}

impl Mechanism for Pep {
    fn name(&self) -> String {
        if self.config.in_place {
            "pep-in-place".into()
        } else {
            "pep".into()
        }
    }

    fn launch_called(&mut self, sms: &[SmId], cx: &mut Cx) -> Result<(), TimingError> {
        self.forget_finished(cx);
        let now = cx.machine.cycle();
        let predicted = self.config.predicted_launch_us * cx.machine.config().sm.clock_mhz;
        for &sm in sms {
            let tbs = crate::want::victims(cx.machine, sm, &Want::Sm { next: None });
            let (remaining, switch) = self.estimate(cx.machine, sm, &tbs);
            for (&tb, remaining) in tbs.iter().zip(remaining) {
                if self.bases.contains_key(&tb) {
                    continue;
                }
                let checkpoint = remaining.is_none_or(|r| predicted < r && r > switch);
                cx.out.records.push(Record::Chose {
                    cycle: now,
                    sm,
                    tb,
                    technique: if checkpoint {
                        Technique::Checkpoint
                    } else {
                        Technique::Drain
                    },
                    estimates: Estimates {
                        drain: remaining,
                        switch,
                        flush_cost: None,
                        deadline: predicted,
                    },
                });
                if !checkpoint {
                    continue;
                }
                cx.ask(Request::Stop {
                    sm,
                    tb,
                    at: StopAt::Boundary,
                    then: AfterStop::Stay,
                    reports: WarpReports::None,
                })?;
                self.bases.insert(
                    tb,
                    Base {
                        sm,
                        state: BaseState::Pausing,
                        asked_at: now,
                        paused_at: now,
                        requested: None,
                        area: 0,
                        checkpoint: None,
                        moving: None,
                    },
                );
            }
        }
        Ok(())
    }

    fn preempt(&mut self, sm: SmId, want: Want, cx: &mut Cx) -> Result<(), TimingError> {
        self.forget_finished(cx);
        let now = cx.machine.cycle();
        // TBs paused for their base checkpoint are a whole-SM request's too (room for a
        // kernel takes running TBs only; they run on once their base is written).
        let paused: Vec<TbRef> = self
            .bases
            .iter()
            .filter(|(_, b)| {
                matches!(want, Want::Sm { .. })
                    && b.sm == sm
                    && b.state != BaseState::Written
                    && b.requested.is_none()
            })
            .map(|(tb, _)| *tb)
            .collect();
        let tbs = cx.take(sm, &want);
        for tb in paused {
            self.bases.get_mut(&tb).expect("listed").requested = Some(now);
            cx.out.taken.push((sm, tb));
        }
        let fresh: Vec<TbRef> = tbs
            .iter()
            .copied()
            .filter(|tb| !self.bases.contains_key(tb))
            .collect();
        let (remaining, switch) = self.estimate(cx.machine, sm, &fresh);
        let mut switched = Vec::new();
        for tb in tbs {
            if let Some(base) = self.bases.remove(&tb) {
                // (a): the base is written and the TB ran on; the incremental checkpoint.
                let checkpoint = base.checkpoint.expect("a running TB's base is written");
                self.carried.insert(tb, (base.area, checkpoint));
                Pep::case(cx, sm, tb, PepCase::TwoCheckpoints);
                switched.push(tb);
                continue;
            }
            let i = fresh.iter().position(|&t| t == tb).expect("fresh");
            let drain = remaining[i].is_some_and(|r| r <= switch);
            cx.out.records.push(Record::Chose {
                cycle: now,
                sm,
                tb,
                technique: if drain {
                    Technique::Drain
                } else {
                    Technique::Switch
                },
                estimates: Estimates {
                    drain: remaining[i],
                    switch,
                    flush_cost: None,
                    deadline: 0.0,
                },
            });
            if drain {
                Pep::case(cx, sm, tb, PepCase::Drain);
                self.draining.watch(sm, tb, now);
            } else {
                Pep::case(cx, sm, tb, PepCase::CheckpointAtRequest);
                switched.push(tb);
            }
        }
        // The incremental (or only) checkpoints, in place where the design keeps them.
        self.switch.switch_taken(sm, switched, &want, cx)
    }

    fn acknowledged(&mut self, event: Event, cx: &mut Cx) -> Result<(), TimingError> {
        match event {
            Event::TbStopped { sm, tb, .. } => {
                let area_size = self.switch.area_bound(cx, tb);
                let Some(b) = self.bases.get_mut(&tb) else {
                    return Err(TimingError::Mechanism(format!(
                        "pep: {tb} on {sm} stopped, but no base checkpoint waited for it"
                    )));
                };
                b.area = cx.machine.memory_mut().alloc(area_size);
                b.paused_at = cx.machine.cycle();
                b.state = BaseState::Writing;
                b.moving = Some((cx.machine.cycle(), 0));
                cx.ask(Request::Checkpoint {
                    sm,
                    tb,
                    scope: Scope::Dirty,
                    base: b.area,
                })?;
                Ok(())
            }
            Event::CheckpointDone {
                sm,
                checkpoint,
                cycle,
            } => {
                let tb = checkpoint.tb;
                let Some(b) = self.bases.get_mut(&tb) else {
                    return Err(TimingError::Mechanism(format!(
                        "pep: a checkpoint of {tb} it did not take"
                    )));
                };
                b.state = BaseState::Written;
                if let Some(m) = &mut b.moving {
                    m.1 = cycle;
                }
                cx.out.records.push(Record::Checkpointed {
                    sm,
                    tb,
                    paused: b.asked_at,
                    written: cycle,
                    bytes: checkpoint_bytes(&checkpoint),
                });
                b.checkpoint = Some(checkpoint);
                if b.requested.is_some() {
                    // (b): its state is saved; it leaves at once.
                    Pep::case(cx, sm, tb, PepCase::SingleCheckpoint);
                    cx.ask(Request::Evict {
                        sm,
                        tb,
                        then: AfterStop::Leave,
                    })?;
                } else {
                    cx.ask(Request::Resume { sm, tb })?;
                }
                Ok(())
            }
            Event::TbResumed { .. } => Ok(()),
            e => Err(TimingError::Mechanism(format!(
                "pep was told of {e:?}, which it never asks for"
            ))),
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
        if hold.is_some() {
            return self.switch.evicted(sm, context, hold, cx);
        }
        // (b): the base checkpoint is the whole context.
        let Some(b) = self.bases.remove(&tb) else {
            return Err(TimingError::Mechanism(format!(
                "pep: {tb} left {sm} without a checkpoint or a hold"
            )));
        };
        let checkpoint = b.checkpoint.expect("written before the eviction");
        // A register the base does not hold was never written: garbage after the TB left.
        crate::ckpt::scramble_unheld(&mut context, std::slice::from_ref(&*checkpoint));
        let bytes = checkpoint_bytes(&checkpoint);
        let now = cx.machine.cycle();
        let requested = b.requested.expect("requested");
        cx.out.records.push(Record::Preempted {
            sm,
            tb,
            how: How::Switched,
            requested,
            // It had stopped for its base checkpoint; the request found it stopped.
            stopped: b.paused_at.max(requested),
            // What was still moving once the request came.
            moving: b
                .moving
                .into_iter()
                .map(|(from, to)| (from.max(requested), to.max(requested)))
                .collect(),
            released: now,
            bytes,
            registers: RegisterCensus::default(),
        });
        cx.out.preempted.push(Preempted {
            context,
            area: b.area,
            bytes,
        });
        Ok(())
    }

    fn finished(&mut self, sm: SmId, tb: TbRef, cycle: u64, cx: &mut Cx) {
        if !self.draining.finished_tb(sm, tb, cycle, cx) {
            self.switch.finished(sm, tb, cycle, cx);
        }
        if let Some(b) = self.bases.remove(&tb) {
            if b.state == BaseState::Written {
                cx.machine.memory_mut().free(b.area);
            }
            if let Some(requested) = b.requested {
                cx.out
                    .records
                    .push(Record::drained(sm, tb, requested, cycle));
            }
        }
    }

    fn transfer_done(&mut self, sm: SmId, id: TransferId, cx: &mut Cx) -> Result<(), TimingError> {
        // A base restore ahead of an incremental one is not the switch's: it ignores it
        // (nothing waits for it, the SM's transfers go in order).
        let from = cx.out.records.len();
        self.switch.transfer_done(sm, id, cx)?;
        // Case (a)'s records count both checkpoints.
        for r in &mut cx.out.records[from..] {
            match r {
                Record::Preempted { tb, bytes, .. } | Record::Restored { tb, bytes, .. } => {
                    if let Some((_, base)) = self.carried.get(tb) {
                        add(bytes, checkpoint_bytes(base));
                    }
                }
                _ => {}
            }
        }
        let restored: Vec<TbRef> = cx.out.records[from..]
            .iter()
            .filter_map(|r| match r {
                Record::Restored { tb, .. } => Some(*tb),
                _ => None,
            })
            .collect();
        for tb in restored {
            if let Some((area, _)) = self.carried.remove(&tb) {
                cx.machine.memory_mut().free(area);
            }
        }
        Ok(())
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
        self.switch.assigned(sm, launch, cx)
    }

    fn resume(&mut self, sm: SmId, mut p: Preempted, cx: &mut Cx) -> Result<(), TimingError> {
        let tb = p.context.tb;
        let now = cx.machine.cycle();
        if let Some((area, base)) = self.carried.get(&tb) {
            // The base first, then the incremental checkpoint (the SM's transfers go in
            // order).
            apply_base(&mut p.context, base);
            let bytes = base.bytes;
            let area = *area;
            cx.transfer(sm, Direction::Restore, area, bytes, tb.launch, now)?;
        }
        // The incremental checkpoint, or for case (b) the base checkpoint alone (its area
        // and bytes are the preempted TB's): restored as a switched context is.
        self.switch.resume(sm, p, cx)
    }
}
