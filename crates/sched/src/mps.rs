//! NVIDIA's Multi-Process Service as a policy (issue "Multiprogrammed GPUs", item 5): the
//! clients' kernels run at once on the SMs, each client limited to a share of them set by
//! its active-thread percentage (`CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`, which Volta and later
//! GPUs enforce as a limit on the SMs a client's kernels may use), and the clients share the
//! memory system (nothing partitions caches or DRAM: MIG does that).
//!
//! Here every process is an MPS client with the same percentage `p`: it may hold at most
//! `⌈p / 100 × SMs⌉` SMs at once, even when alone (as under MPS, a client limited to half
//! the GPU never uses more). An idle SM goes to the first kernel, first come first served,
//! whose process is below its limit; nothing is preempted. At 100% this is FCFS.

use gpu::timing::SmId;

use crate::policy::{pick_waiting, Policy};
use crate::tables::{ContextId, KernelSlot, SmState, Tables, Waiting};

/// The MPS policy.
#[derive(Clone, Copy, Debug)]
pub struct Mps {
    /// SMs a process may hold at once.
    limit: u32,
}

impl Mps {
    /// Every process limited to `percentage` of `sm_count` SMs, rounded up (at least one).
    pub fn new(sm_count: u32, percentage: f64) -> Mps {
        let limit = (percentage / 100.0 * f64::from(sm_count)).ceil() as u32;
        Mps {
            limit: limit.clamp(1, sm_count.max(1)),
        }
    }

    /// SMs running a kernel of `context`.
    fn held(tables: &Tables, context: ContextId) -> u32 {
        (0..tables.sm_count())
            .map(|s| tables.sm(SmId(s)))
            .filter(|e| {
                e.state != SmState::Idle
                    && e.kernel.is_some_and(|k| tables.ksr(k).context == context)
            })
            .count() as u32
    }

    /// Gives idle `sm` to the earliest kernel with TBs to issue whose process is below its
    /// limit.
    fn give(&self, sm: SmId, tables: &mut Tables) {
        let best = tables.first_come(|ksr| Mps::held(tables, ksr.context) < self.limit);
        if let Some(k) = best {
            tables.assign(sm, k);
        }
    }

    fn fill(&self, tables: &mut Tables) {
        for sm in tables.idle_sms() {
            self.give(sm, tables);
        }
    }
}

impl Policy for Mps {
    fn name(&self) -> &'static str {
        "mps"
    }
    fn admit(&mut self, waiting: &[Waiting]) -> Option<ContextId> {
        pick_waiting(waiting, |w| w.arrived_at)
    }
    fn on_kernel_activated(&mut self, _: KernelSlot, tables: &mut Tables) {
        self.fill(tables);
    }
    fn on_sm_idle(&mut self, _: SmId, tables: &mut Tables) {
        // An SM one process gives up may be the one another was waiting for.
        self.fill(tables);
    }
    fn on_kernel_finished(&mut self, tables: &mut Tables) {
        self.fill(tables);
    }
}
