//! SM flushing (papers/lin-lightweight §II-B; Chimera's flush, papers/li-pep §2.2): a TB
//! whose partial execution can be thrown away and redone harmlessly is discarded at once,
//! releasing its resources, and runs again from its first instruction later. Whether a TB
//! can be flushed comes from the idempotence analysis (`analysis::idempotence`): every PC
//! its warps have reached — the next instruction of each SIMT stack entry that holds lanes,
//! since lanes waiting at a reconvergence point have run their side of the branch — must be
//! flushable, strictly (no global store or atomic behind it) or relaxed (no atomic, and no
//! global store that may alias what the kernel reads; pointer arguments are assumed not to
//! overlap, as every suite kernel's are). A TB that is not flushable is never flushed: the
//! mechanism records why and lets it drain.

use std::collections::HashMap;
use std::sync::Arc;

use analysis::{AliasModel, Idempotence, IdempotenceConfig};
use gpu::timing::{HoldId, Machine, Request, SmId, TbContext, TbRef, TimingError};
use kir::{InstId, Kernel};

use crate::drain::{not_mine, Drain};
use crate::{ContextBytes, Cx, How, Mechanism, Preempted, Record, Want};

/// SM flushing.
pub struct Flush {
    relaxed: bool,
    /// The analysis of each kernel, by its address (kernels live as long as their launches).
    analyses: HashMap<usize, (Arc<Kernel>, Idempotence)>,
    /// TBs that could not be flushed and drain.
    draining: Drain,
}

impl Flush {
    /// Flushing under relaxed (`true`) or strict idempotence.
    pub fn new(relaxed: bool) -> Flush {
        Flush {
            relaxed,
            analyses: HashMap::new(),
            draining: Drain::default(),
        }
    }

    /// Whether TB `tb` on `sm` may be flushed now: the warp instructions flushing it would
    /// throw away, or `None`.
    pub fn flushable(&mut self, m: &Machine, sm: SmId, tb: TbRef) -> Option<u64> {
        let relaxed = self.relaxed;
        let kernel = m.launch(tb.launch).ctx().kernel.clone();
        let warps = m.warps_of(sm, tb)?;
        let idem = self.analysis(&kernel);
        let ok = |pc: u32| {
            (pc as usize) < kernel.len()
                && if relaxed {
                    idem.relaxed(InstId(pc))
                } else {
                    idem.strict(InstId(pc))
                }
        };
        let whole = if relaxed {
            idem.kernel_relaxed()
        } else {
            idem.kernel_strict()
        };
        let flushable = warps.iter().all(|w| {
            if w.done || w.pcs.is_empty() {
                whole
            } else {
                w.pcs.iter().all(|&pc| ok(pc))
            }
        });
        flushable.then(|| warps.iter().map(|w| w.executed).sum())
    }

    /// Throws TB `tb` away (it was found flushable), recording it.
    pub fn flush_tb(
        &mut self,
        sm: SmId,
        tb: TbRef,
        discarded: u64,
        cx: &mut Cx,
    ) -> Result<(), TimingError> {
        let now = cx.machine.cycle();
        cx.ask(Request::Discard { sm, tb })?;
        cx.out.records.push(Record::Preempted {
            sm,
            tb,
            how: How::Flushed {
                discarded_instructions: discarded,
            },
            requested: now,
            stopped: now,
            moving: Vec::new(),
            released: now,
            bytes: ContextBytes::default(),
            registers: Default::default(),
        });
        Ok(())
    }

    /// Records that TB `tb` cannot be flushed.
    fn refuse(&self, sm: SmId, tb: TbRef, now: u64, cx: &mut Cx) {
        let relaxed = self.relaxed;
        cx.out.records.push(Record::Refused {
            cycle: now,
            sm,
            tb,
            why: format!(
                "not {} idempotent: it has passed a {}; it drains",
                if relaxed { "relaxed" } else { "strictly" },
                if relaxed {
                    "global atomic or a global store to memory the kernel reads"
                } else {
                    "global store or atomic"
                }
            ),
        });
    }

    fn analysis(&mut self, kernel: &Arc<Kernel>) -> &Idempotence {
        let config = IdempotenceConfig {
            alias: if self.relaxed {
                AliasModel::RestrictParams
            } else {
                AliasModel::Conservative
            },
        };
        let key = Arc::as_ptr(kernel) as usize;
        &self
            .analyses
            .entry(key)
            .or_insert_with(|| (kernel.clone(), Idempotence::compute(kernel, &config)))
            .1
    }
}

impl Mechanism for Flush {
    fn name(&self) -> String {
        if self.relaxed {
            "flush-relaxed".into()
        } else {
            "flush-strict".into()
        }
    }

    fn preempt(&mut self, sm: SmId, want: Want, cx: &mut Cx) -> Result<(), TimingError> {
        let now = cx.machine.cycle();
        let tbs = cx.take(sm, &want);
        for tb in tbs {
            match self.flushable(cx.machine, sm, tb) {
                Some(discarded) => self.flush_tb(sm, tb, discarded, cx)?,
                None => {
                    self.refuse(sm, tb, now, cx);
                    self.draining.watch(sm, tb, now);
                }
            }
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
        Err(not_mine(&self.name(), "the context of", context.tb))
    }

    fn finished(&mut self, sm: SmId, tb: TbRef, cycle: u64, cx: &mut Cx) {
        self.draining.finished_tb(sm, tb, cycle, cx);
    }

    fn resume(&mut self, _: SmId, tb: Preempted, _: &mut Cx) -> Result<(), TimingError> {
        Err(not_mine(&self.name(), "a preempted", tb.context.tb))
    }
}
