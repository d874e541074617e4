//! NVIDIA's Multi-Instance GPU as a policy (issue "Multiprogrammed GPUs", item 5): the GPU is
//! cut into instances, each a fixed set of SMs that only its own processes' kernels use.
//!
//! Here `n` instances (by default one per process) each hold `⌊SMs / n⌋` consecutive SMs —
//! instance `j` the SMs `j × w` to `(j + 1) × w − 1` — and the SMs left over belong to no
//! instance and stay idle, as MIG builds instances from whole GPCs and leaves what does not
//! make one unused. Process `i` (in the scenario's order) runs in instance `i mod n`. Inside
//! an instance, an idle SM goes to the earliest kernel (first come, first served) of one of
//! its processes with TBs to issue; nothing is ever preempted, and no kernel ever runs on
//! another instance's SMs, even when they are idle.
//!
//! **The memory is partitioned too.** As real MIG gives each instance its own L2 slices and
//! DRAM channels, the run that uses this policy cuts the memory system the same way
//! (`workload`, through `gpu::timing::Machine::partition_memory`): instance `j` gets the
//! DRAM channels `j × c` to `(j + 1) × c − 1`, `c = ⌊channels / n⌋`, with their slices, and its
//! SMs send every access there, so one instance's memory traffic cannot slow another's.
//! With more instances than channels (8 processes on the 5 channels of `k20c`; no MIG GPU
//! allows it) instance `j` gets channel `⌊j × channels / n⌋` alone, shared with its
//! neighbours.
//! What stays shared: the copy engines and the host link (as on a real GPU, where MIG
//! instances share the PCIe link), and the interconnect's clock.

use gpu::timing::SmId;

use crate::policy::{pick_waiting, Policy};
use crate::tables::{ContextId, KernelSlot, Tables, Waiting};

/// The instances a run of `processes` processes gets: `instances` when given, otherwise one
/// a process.
pub fn instances_for(instances: Option<u32>, processes: usize) -> u32 {
    instances.unwrap_or(processes.max(1) as u32)
}

/// The MIG policy.
#[derive(Clone, Copy, Debug)]
pub struct Mig {
    instances: u32,
    /// SMs per instance.
    width: u32,
}

impl Mig {
    /// `instances` equal instances of `sm_count` SMs (clamped to 1..=`sm_count`).
    pub fn new(sm_count: u32, instances: u32) -> Mig {
        let instances = instances.clamp(1, sm_count.max(1));
        Mig {
            instances,
            width: sm_count / instances,
        }
    }

    /// The number of instances.
    pub fn instances(&self) -> u32 {
        self.instances
    }

    /// The instance of each of `sm_count` SMs, in SM order (`None`: left over).
    pub fn instance_of_each_sm(&self, sm_count: u32) -> Vec<Option<u32>> {
        (0..sm_count)
            .map(|s| self.instance_of_sm(SmId(s)))
            .collect()
    }

    /// The instance `sm` belongs to, `None` for an SM left over.
    pub fn instance_of_sm(&self, sm: SmId) -> Option<u32> {
        let j = sm.0 / self.width.max(1);
        (j < self.instances).then_some(j)
    }

    /// The instance a context runs in.
    pub fn instance_of(&self, context: ContextId) -> u32 {
        context.0 % self.instances
    }

    /// Gives idle `sm` to the earliest kernel with TBs to issue of its instance.
    fn give(&self, sm: SmId, tables: &mut Tables) {
        let Some(j) = self.instance_of_sm(sm) else {
            return;
        };
        let best = tables.first_come(|ksr| self.instance_of(ksr.context) == j);
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

impl Policy for Mig {
    fn name(&self) -> &'static str {
        "mig"
    }
    fn admit(&mut self, waiting: &[Waiting]) -> Option<ContextId> {
        pick_waiting(waiting, |w| w.arrived_at)
    }
    fn on_kernel_activated(&mut self, _: KernelSlot, tables: &mut Tables) {
        self.fill(tables);
    }
    fn on_sm_idle(&mut self, sm: SmId, tables: &mut Tables) {
        self.give(sm, tables);
    }
}
