//! Dynamic Spatial Sharing (papers/tanasic-thesis §5.2.4, Algorithm 1): disjoint sets of SMs
//! for the active kernels, repartitioned as kernels come and SMs free up.
//!
//! Each process holds tokens, its SM budget; a kernel holds its process's tokens. A kernel's
//! *count* is its tokens less the SMs it holds (running it, or reserved for it). Kernels may
//! go into debt (a negative count) so that no SM idles while a kernel has TBs to issue.
//! The partitioning runs when a kernel enters the active queue and when an SM becomes idle:
//! an idle SM goes to the kernel with TBs to issue whose count is highest; then, while that
//! kernel's count exceeds the lowest count of a kernel running on some SM by more than one,
//! one SM of the lowest is reserved for the highest (the framework's mechanism empties it,
//! draining or switching), which moves one token each way. The thesis's equal sharing gives
//! every process `⌊N_sm / N_p⌋` tokens, and one more to each of the first `N_sm mod N_p`
//! processes whose kernels reach the active queue (§5.3.4). Priorities are given as tokens
//! (the OS's SM budget, §5.2.4): a process of priority `p` weighs `1 + max(p, 0)`, gets
//! `⌊N_sm × w / W⌋` tokens with `W` the run's total weight, and the SMs this leaves over go
//! one each to the first processes to become active, as in equal sharing (which is the case
//! of equal priorities).
//!
//! Ties go to the kernel activated first for the highest count and to the one activated last
//! for the lowest, and a reserved SM is the highest-numbered SM the kernel runs on, so the
//! decisions are deterministic. Algorithm 1 as printed stops when the two counts are equal,
//! which would leave idle SMs idle when one kernel is alone; here an idle SM always goes to a
//! kernel with work (the debt the text allows), and only preemption waits for an imbalance.

use std::collections::BTreeMap;

use gpu::timing::SmId;

use crate::policy::{pick_waiting, Policy};
use crate::tables::{ContextId, KernelSlot, SmState, Tables, Waiting};

/// The DSS policy.
#[derive(Clone, Debug)]
pub struct Dss {
    /// Tokens of each process, set when its first kernel becomes active.
    tokens: BTreeMap<ContextId, i64>,
    /// How tokens are dealt.
    share: Share,
    /// Processes still to get one token more than their share.
    extra: u32,
}

#[derive(Clone, Debug)]
enum Share {
    /// The same tokens for every process.
    Fixed(i64),
    /// `⌊SMs × w / W⌋` for a process of weight `w = 1 + max(priority, 0)`, `W` the
    /// weights' sum over the run's processes.
    Weighted { sm_count: u32, total: u64 },
}

impl Dss {
    /// Shares of `sm_count` SMs for processes of `priorities` (equal when the priorities
    /// are), or `tokens` each when given.
    pub fn new(sm_count: u32, priorities: &[i32], tokens: Option<u32>) -> Dss {
        if let Some(t) = tokens {
            return Dss {
                tokens: BTreeMap::new(),
                share: Share::Fixed(i64::from(t)),
                extra: 0,
            };
        }
        let total: u64 = priorities.iter().map(|&p| weight(p)).sum::<u64>().max(1);
        let dealt: u64 = priorities
            .iter()
            .map(|&p| u64::from(sm_count) * weight(p) / total)
            .sum();
        Dss {
            tokens: BTreeMap::new(),
            share: Share::Weighted { sm_count, total },
            extra: u64::from(sm_count).saturating_sub(dealt) as u32,
        }
    }

    /// The tokens of the process of kernel `k`, given on its first kernel.
    fn tokens(&mut self, tables: &Tables, k: KernelSlot) -> i64 {
        let ksr = tables.ksr(k);
        let share = match self.share {
            Share::Fixed(t) => t,
            Share::Weighted { sm_count, total } => {
                (u64::from(sm_count) * weight(ksr.priority) / total) as i64
            }
        };
        let extra = &mut self.extra;
        *self.tokens.entry(ksr.context).or_insert_with(|| {
            let bonus = i64::from(*extra > 0);
            *extra = extra.saturating_sub(1);
            share + bonus
        })
    }

    /// The SMs kernel `k` holds: running it (not reserved away), or reserved for it.
    fn held(tables: &Tables, k: KernelSlot) -> i64 {
        (0..tables.sm_count())
            .map(|s| tables.sm(SmId(s)))
            .filter(|e| match e.state {
                SmState::Running => e.kernel == Some(k),
                SmState::Reserved => e.next == Some(k),
                SmState::Idle => false,
            })
            .count() as i64
    }

    /// The count of every active kernel, in activation order.
    fn counts(&mut self, tables: &Tables) -> Vec<(KernelSlot, i64)> {
        let active: Vec<KernelSlot> = tables.active().to_vec();
        active
            .into_iter()
            .map(|k| (k, self.tokens(tables, k) - Dss::held(tables, k)))
            .collect()
    }

    /// Algorithm 1.
    fn partition(&mut self, tables: &mut Tables) {
        // Each round moves one SM, so this many rounds always reach the steady state.
        for _ in 0..=tables.sm_count() {
            let counts = self.counts(tables);
            // The kernel with work whose count is highest (first activated on ties).
            let Some(&(max, max_count)) = counts
                .iter()
                .filter(|(k, _)| tables.ksr(*k).has_work())
                .fold(None, |best: Option<&(KernelSlot, i64)>, c| match best {
                    Some(b) if b.1 >= c.1 => Some(b),
                    _ => Some(c),
                })
            else {
                return;
            };
            if let Some(&sm) = tables.idle_sms().first() {
                tables.assign(sm, max);
                continue;
            }
            // The kernel running on some SM whose count is lowest (last activated on ties),
            // and the highest-numbered SM it runs on.
            let running_on = |k: KernelSlot| {
                (0..tables.sm_count()).rev().map(SmId).find(|&s| {
                    let e = tables.sm(s);
                    e.state == SmState::Running && e.kernel == Some(k)
                })
            };
            let min = counts
                .iter()
                .filter(|(k, _)| *k != max && running_on(*k).is_some())
                .fold(None, |low: Option<&(KernelSlot, i64)>, c| match low {
                    Some(l) if l.1 < c.1 => Some(l),
                    _ => Some(c),
                });
            let Some(&(min, min_count)) = min else {
                return;
            };
            if max_count <= min_count + 1 {
                return;
            }
            let sm = running_on(min).expect("found above");
            tables.reserve(sm, max);
        }
    }
}

/// A process's weight in the shares: one, plus its priority if positive.
fn weight(priority: i32) -> u64 {
    1 + u64::try_from(priority).unwrap_or(0)
}

impl Policy for Dss {
    fn name(&self) -> &'static str {
        "dss"
    }
    /// A kernel's activation repartitions the SMs, taking them from any other kernel with
    /// more than its share.
    fn may_preempt_on_arrival(&self, _arriving: i32, _running: i32) -> bool {
        true
    }
    fn admit(&mut self, waiting: &[Waiting]) -> Option<ContextId> {
        pick_waiting(waiting, |w| w.arrived_at)
    }
    fn on_kernel_activated(&mut self, _: KernelSlot, tables: &mut Tables) {
        self.partition(tables);
    }
    fn on_sm_idle(&mut self, _: SmId, tables: &mut Tables) {
        self.partition(tables);
    }
}
