//! Scheduling policies: which waiting kernel becomes active, and which active kernel an SM
//! runs (papers/tanasic-thesis §5.2.4, §5.3.2).
//!
//! * [`Fcfs`]: first come, first served. Commands enter the active queue in the order they
//!   reached the GPU; a free SM goes to the earliest active kernel that still has TBs to
//!   issue. One kernel fills the GPU and the next gets SMs as they free up, as the baseline
//!   GPU of the thesis does.
//! * [`Npq`]: non-preemptive priority queues (§5.3.2): the same, ranked by priority first
//!   (larger first), arrival second. A high-priority kernel takes every SM that frees up, but
//!   waits for running TBs to finish: no preemption.
//!
//! Preemptive policies (PPQ, DSS, time slicing) reserve SMs ([`Tables::reserve`]) and need the
//! preemption mechanisms of the next layer to empty them faster than draining.

use gpu::timing::SmId;
use serde::{Deserialize, Serialize};

use crate::framework::{ContextId, KernelSlot, Ksr, Tables, Waiting};

/// A scheduling policy.
///
/// **Contract.** The framework calls the policy on the events of papers/tanasic-thesis
/// §5.2.4 — a command waits and the active queue has room ([`Policy::admit`]), a kernel
/// entered the active queue ([`Policy::on_kernel_activated`]), an SM became idle
/// ([`Policy::on_sm_idle`]), a reserved SM was emptied ([`Policy::on_preemption_done`]) —
/// and, with intra-SM sharing, when a running SM's kernel has no
/// TB left to issue ([`Policy::on_sm_room`], every cycle until the policy assigns it). A
/// policy acts only through the [`Tables`] it is given: [`Tables::assign`] an idle (or, with
/// sharing, finishing) SM to an active kernel, [`Tables::reserve`] a running SM for another
/// kernel. It never touches the machine, sees no register values, and must be
/// deterministic: the same sequence of calls gives the same decisions. Policies do not own
/// the mechanism that empties a reserved SM; without one the SM drains.
pub trait Policy {
    fn name(&self) -> &'static str;
    /// Which context's waiting command enters the active queue (there is room); `None`
    /// leaves them all waiting.
    fn admit(&mut self, waiting: &[Waiting]) -> Option<ContextId>;
    fn on_kernel_activated(&mut self, kernel: KernelSlot, tables: &mut Tables);
    fn on_sm_idle(&mut self, sm: SmId, tables: &mut Tables);
    fn on_sm_room(&mut self, sm: SmId, tables: &mut Tables) {
        self.on_sm_idle(sm, tables);
    }
    /// A reserved SM has given up its last TB (a preemption completed) and was set up for
    /// the kernel it was reserved for, or became idle if that kernel is gone.
    fn on_preemption_done(&mut self, _sm: SmId, _tables: &mut Tables) {}
}

/// The policies by name (scenario files and the command line choose one).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum PolicyKind {
    #[default]
    Fcfs,
    Npq,
}

impl PolicyKind {
    pub fn build(self) -> Box<dyn Policy> {
        match self {
            PolicyKind::Fcfs => Box::new(Fcfs),
            PolicyKind::Npq => Box::new(Npq),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            PolicyKind::Fcfs => "fcfs",
            PolicyKind::Npq => "npq",
        }
    }
}

/// First come, first served.
#[derive(Clone, Copy, Debug, Default)]
pub struct Fcfs;

/// Non-preemptive priority queues.
#[derive(Clone, Copy, Debug, Default)]
pub struct Npq;

/// The best waiting command by `key` (smallest first), ties to the lower context.
fn pick_waiting<K: Ord>(waiting: &[Waiting], key: impl Fn(&Waiting) -> K) -> Option<ContextId> {
    waiting
        .iter()
        .min_by_key(|w| (key(w), w.context))
        .map(|w| w.context)
}

/// Gives `sm` to the best active kernel with TBs to issue by `key` (smallest first; ties to
/// the earlier activated).
fn give<K: Ord>(sm: SmId, tables: &mut Tables, key: impl Fn(&Ksr) -> K) {
    let best = tables
        .active()
        .iter()
        .enumerate()
        .filter(|(_, &k)| tables.ksr(k).has_work())
        .min_by_key(|(order, &k)| (key(tables.ksr(k)), *order))
        .map(|(_, &k)| k);
    if let Some(k) = best {
        tables.assign(sm, k);
    }
}

/// Gives every idle SM, in index order, to the best kernel with work.
fn fill_idle<K: Ord>(tables: &mut Tables, key: impl Fn(&Ksr) -> K + Copy) {
    for sm in tables.idle_sms() {
        give(sm, tables, key);
    }
}

fn fcfs_key(k: &Ksr) -> (u64, u64) {
    (k.arrived_at, k.activated_at)
}

fn npq_key(k: &Ksr) -> (std::cmp::Reverse<i32>, u64, u64) {
    (std::cmp::Reverse(k.priority), k.arrived_at, k.activated_at)
}

impl Policy for Fcfs {
    fn name(&self) -> &'static str {
        "fcfs"
    }
    fn admit(&mut self, waiting: &[Waiting]) -> Option<ContextId> {
        pick_waiting(waiting, |w| w.arrived_at)
    }
    fn on_kernel_activated(&mut self, _: KernelSlot, tables: &mut Tables) {
        fill_idle(tables, fcfs_key);
    }
    fn on_sm_idle(&mut self, sm: SmId, tables: &mut Tables) {
        give(sm, tables, fcfs_key);
    }
}

impl Policy for Npq {
    fn name(&self) -> &'static str {
        "npq"
    }
    fn admit(&mut self, waiting: &[Waiting]) -> Option<ContextId> {
        pick_waiting(waiting, |w| (std::cmp::Reverse(w.priority), w.arrived_at))
    }
    fn on_kernel_activated(&mut self, _: KernelSlot, tables: &mut Tables) {
        fill_idle(tables, npq_key);
    }
    fn on_sm_idle(&mut self, sm: SmId, tables: &mut Tables) {
        give(sm, tables, npq_key);
    }
}
