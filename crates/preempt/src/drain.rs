//! SM draining (papers/tanasic-thesis §5.2.2): the SM driver stops issuing TBs to the
//! reserved SM, and the SM is free when the TBs it runs finish. Nothing is saved; the
//! latency is the remaining run time of the longest TB, unbounded for persistent kernels.

use gpu::timing::{HoldId, SmId, TbContext, TbRef, TimingError};

use crate::{Cx, Mechanism, Preempted, Record, Requests, Want};

/// SM draining.
#[derive(Default)]
pub struct Drain {
    requests: Requests,
}

impl Drain {
    /// Lets TB `tb` on `sm`, asked for at `now`, finish (for mechanisms that drain some TBs).
    pub(crate) fn watch(&mut self, sm: SmId, tb: TbRef, now: u64) {
        self.requests.add(sm, tb, now);
    }

    /// Records `tb` as drained if it was being watched; whether it was.
    pub(crate) fn finished_tb(&mut self, sm: SmId, tb: TbRef, cycle: u64, cx: &mut Cx) -> bool {
        match self.requests.take(sm, tb) {
            Some(requested) => {
                cx.out
                    .records
                    .push(Record::drained(sm, tb, requested, cycle));
                true
            }
            None => false,
        }
    }
}

/// What a mechanism that never stops a TB answers if told one stopped: a broken contract,
/// reported rather than ignored.
pub(crate) fn not_mine(mechanism: &str, what: &str, tb: TbRef) -> TimingError {
    TimingError::Mechanism(format!(
        "{mechanism} was handed {what} {tb}, which it never stops"
    ))
}

impl Mechanism for Drain {
    fn name(&self) -> String {
        "drain".into()
    }

    fn preempt(&mut self, sm: SmId, want: Want, cx: &mut Cx) -> Result<(), TimingError> {
        let now = cx.machine.cycle();
        for tb in cx.take(sm, &want) {
            self.watch(sm, tb, now);
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
        Err(not_mine("drain", "the context of", context.tb))
    }

    fn finished(&mut self, sm: SmId, tb: TbRef, cycle: u64, cx: &mut Cx) {
        self.finished_tb(sm, tb, cycle, cx);
    }

    fn resume(&mut self, _: SmId, tb: Preempted, _: &mut Cx) -> Result<(), TimingError> {
        Err(not_mine("drain", "a preempted", tb.context.tb))
    }
}
