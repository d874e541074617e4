//! Context switching (papers/tanasic-thesis §5.2.2; "BASELINE" and "LIVE" in
//! papers/ji-ctxback §V). Each TB on the reserved SM stops at an instruction boundary; the
//! pipeline drains its in-flight instructions (loads return, stores are acknowledged); then
//! a trap routine saves the TB's context to a context area in device memory and the TB's
//! resources are released. Restoring is symmetric: the resources are taken, the context is
//! loaded back, and the TB continues where it stopped.
//!
//! What a context holds, in bytes:
//! * registers — BASELINE: every allocated register of every warp that has not exited
//!   (4 bytes per thread per 32-bit register, one bit per thread per predicate, 4 bytes per
//!   uniform register; `analysis::ctxback::widths`); LIVE: only the registers live where
//!   the warp stands, the union over its SIMT stack entries' PCs (lanes parked elsewhere
//!   need theirs), each counted at its width there;
//! * the TB's shared memory;
//! * per warp, its SIMT stack (12 bytes an entry: PC, reconvergence PC, mask) and barrier
//!   status (4 bytes), and the TB's 16 named-barrier counters (64 bytes).
//!
//! The bytes move as line-sized accesses at context priority through the SM's LD/ST unit
//! (papers/lin-lightweight §V-A), competing with every other request for the interconnect,
//! the L2 and DRAM. The values themselves travel in the captured context; LIVE overwrites
//! every register it did not save with garbage before the TB resumes, so a register wrongly
//! judged dead corrupts the result (and the bit-exact tests would see it).

use std::collections::HashMap;
use std::sync::Arc;

use analysis::ctxback::widths::{ContextSize, Widths};
use analysis::{Liveness, RegSet};
use gpu::barrier::WarpStatus;
use gpu::exec::WARP_SIZE;
use gpu::timing::{HoldId, SmId, StopAt, TbContext, TbRef, TimingError, TransferId};
use kir::{Id, InstId, Kernel};

use crate::{ContextBytes, Cx, How, Mechanism, Preempted, Record, Requests};

/// Which registers a switch saves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Which {
    /// Every allocated register.
    Baseline,
    /// The registers live at each warp's instruction.
    Live,
}

/// What a kernel's contexts are measured with.
struct Facts {
    _kernel: Arc<Kernel>,
    liveness: Liveness,
    widths: Widths,
}

/// A save or restore in flight.
struct Moving {
    sm: SmId,
    tb: TbRef,
    context: Box<TbContext>,
    hold: HoldId,
    area: u64,
    bytes: ContextBytes,
    requested: u64,
    stopped: u64,
    save: bool,
}

/// Context switching.
pub struct Switch {
    which: Which,
    facts: HashMap<usize, Facts>,
    requests: Requests,
    /// By SM and transfer (transfer ids are numbered per SM).
    moving: HashMap<(SmId, TransferId), Moving>,
}

impl Switch {
    pub fn new(which: Which) -> Switch {
        Switch {
            which,
            facts: HashMap::new(),
            requests: Requests::default(),
            moving: HashMap::new(),
        }
    }

    fn facts(&mut self, kernel: &Arc<Kernel>) -> &Facts {
        self.facts
            .entry(Arc::as_ptr(kernel) as usize)
            .or_insert_with(|| {
                let mut liveness = Liveness::new();
                liveness.compute(kernel);
                Facts {
                    _kernel: kernel.clone(),
                    liveness,
                    widths: Widths::compute(kernel),
                }
            })
    }

    /// The registers a warp's context keeps, and their size (LIVE); `None` for every
    /// register (BASELINE).
    fn saved_registers(
        facts: &Facts,
        kernel: &Kernel,
        warp: &gpu::exec::Warp,
    ) -> (RegSet, ContextSize) {
        let mut set = RegSet::with_capacity(kernel.regs.len());
        let mut top = None;
        for e in warp.stack.iter().rev() {
            if e.mask == 0 || e.pc == e.rpc || e.pc as usize >= kernel.len() {
                continue;
            }
            top.get_or_insert(e.pc);
            set.union_with(facts.liveness.live_in(InstId(e.pc)));
        }
        let size = match top {
            Some(pc) => facts.widths.size_at(InstId(pc), &set),
            None => ContextSize::default(),
        };
        (set, size)
    }

    /// The bytes of `context`, and (LIVE) with every register it does not keep overwritten.
    fn measure(&mut self, context: &mut TbContext, kernel: &Arc<Kernel>) -> ContextBytes {
        let which = self.which;
        let facts = self.facts(kernel);
        let mut bytes = ContextBytes {
            shared: context.shared.len() as u64,
            stack_barrier: 16 * 4,
            ..ContextBytes::default()
        };
        for w in &mut context.warps {
            bytes.stack_barrier += 12 * w.warp.stack.len() as u64 + 4;
            if w.status == WarpStatus::Done || w.warp.is_done() {
                continue;
            }
            let lanes = w.warp.valid.count_ones();
            let size = match which {
                Which::Baseline => facts.widths.all_registers(),
                Which::Live => {
                    let (keep, size) = Switch::saved_registers(facts, kernel, &w.warp);
                    // Everything not kept is lost with the SM's register file.
                    for r in kernel.regs.ids() {
                        if !keep.contains(r) {
                            for l in 0..WARP_SIZE {
                                w.warp.regs[r.index() * WARP_SIZE + l] =
                                    0xdead_0000_0000_0000 | (r.index() as u64) << 8 | l as u64;
                            }
                        }
                    }
                    size
                }
            };
            bytes.registers += size.bytes_per_warp(lanes);
        }
        bytes
    }
}

impl Mechanism for Switch {
    fn name(&self) -> String {
        match self.which {
            Which::Baseline => "baseline".into(),
            Which::Live => "live".into(),
        }
    }

    fn preempt(&mut self, sm: SmId, cx: &mut Cx) -> Result<(), TimingError> {
        let now = cx.machine.cycle();
        let tbs: Vec<TbRef> = cx
            .machine
            .resident(sm)
            .filter(|(_, stopping)| !stopping)
            .map(|(tb, _)| tb)
            .collect();
        cx.out.records.push(Record::Requested {
            cycle: now,
            sm,
            tbs: tbs.len() as u32,
        });
        for tb in tbs {
            cx.machine.stop_holding(sm, tb, StopAt::Boundary)?;
            self.requests.add(sm, tb, now);
        }
        Ok(())
    }

    fn evicted(
        &mut self,
        sm: SmId,
        mut context: Box<TbContext>,
        hold: Option<HoldId>,
        cx: &mut Cx,
    ) -> Result<(), TimingError> {
        let tb = context.tb;
        let now = cx.machine.cycle();
        let requested = self.requests.take(sm, tb).unwrap_or(now);
        let hold = hold.expect("a switched TB keeps its resources while it is saved");
        let kernel = cx.machine.launch(tb.launch).ctx().kernel.clone();
        let bytes = self.measure(&mut context, &kernel);
        let area = cx.machine.memory_mut().alloc(bytes.total());
        let id = cx
            .machine
            .transfer(sm, true, area, bytes.total(), tb.launch)?;
        self.moving.insert(
            (sm, id),
            Moving {
                sm,
                tb,
                context,
                hold,
                area,
                bytes,
                requested,
                stopped: now,
                save: true,
            },
        );
        Ok(())
    }

    fn finished(&mut self, sm: SmId, tb: TbRef, cycle: u64, cx: &mut Cx) {
        // A TB that finished before it could stop drained.
        if let Some(requested) = self.requests.take(sm, tb) {
            cx.out.records.push(Record::Preempted {
                sm,
                tb,
                how: How::Drained,
                requested,
                stopped: cycle,
                released: cycle,
                bytes: ContextBytes::default(),
            });
        }
    }

    fn transfer_done(&mut self, sm: SmId, id: TransferId, cx: &mut Cx) -> Result<(), TimingError> {
        let Some(m) = self.moving.remove(&(sm, id)) else {
            return Ok(());
        };
        debug_assert_eq!(m.sm, sm);
        let now = cx.machine.cycle();
        if m.save {
            cx.machine.release(sm, m.hold)?;
            cx.out.records.push(Record::Preempted {
                sm,
                tb: m.tb,
                how: How::Switched,
                requested: m.requested,
                stopped: m.stopped,
                released: now,
                bytes: m.bytes,
            });
            cx.out.preempted.push(Preempted {
                context: m.context,
                area: m.area,
                bytes: m.bytes,
            });
        } else {
            cx.machine
                .install_held(sm, m.hold, m.context)
                .map_err(|(e, _)| e)?;
            cx.machine.memory_mut().free(m.area);
            cx.out.records.push(Record::Restored {
                sm,
                tb: m.tb,
                started: m.stopped,
                finished: now,
                bytes: m.bytes,
            });
        }
        Ok(())
    }

    fn resume(&mut self, sm: SmId, p: Preempted, cx: &mut Cx) -> Result<(), TimingError> {
        let tb = p.context.tb;
        let hold = cx.machine.hold(sm, tb.launch)?;
        let id = cx
            .machine
            .transfer(sm, false, p.area, p.bytes.total(), tb.launch)?;
        let now = cx.machine.cycle();
        self.moving.insert(
            (sm, id),
            Moving {
                sm,
                tb,
                context: p.context,
                hold,
                area: p.area,
                bytes: p.bytes,
                requested: now,
                stopped: now,
                save: false,
            },
        );
        Ok(())
    }
}
