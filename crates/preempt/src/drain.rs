//! SM draining (papers/tanasic-thesis §5.2.2): the SM driver stops issuing TBs to the
//! reserved SM, and the SM is free when the TBs it runs finish. Nothing is saved; the
//! latency is the remaining run time of the longest TB, unbounded for persistent kernels.

use gpu::timing::{HoldId, LaunchId, SmId, TbContext, TbRef, TimingError};

use crate::{Cx, Mechanism, Preempted, Record, Requests};

/// SM draining.
#[derive(Default)]
pub struct Drain {
    requests: Requests,
}

impl Mechanism for Drain {
    fn name(&self) -> String {
        "drain".into()
    }

    fn preempt(
        &mut self,
        sm: SmId,
        _next: Option<LaunchId>,
        cx: &mut Cx,
    ) -> Result<(), TimingError> {
        let now = cx.machine.cycle();
        for tb in cx.request(sm) {
            self.requests.add(sm, tb, now);
        }
        Ok(())
    }

    fn evicted(
        &mut self,
        _: SmId,
        context: Box<TbContext>,
        _: Option<HoldId>,
        _: &mut Cx,
    ) -> Result<(), TimingError> {
        unreachable!("draining stops no TB (evicted {})", context.tb)
    }

    fn finished(&mut self, sm: SmId, tb: TbRef, cycle: u64, cx: &mut Cx) {
        if let Some(requested) = self.requests.take(sm, tb) {
            cx.out
                .records
                .push(Record::drained(sm, tb, requested, cycle));
        }
    }

    fn resume(&mut self, _: SmId, tb: Preempted, _: &mut Cx) -> Result<(), TimingError> {
        unreachable!("draining preempts no TB ({})", tb.context.tb)
    }
}
