//! Checkpoints without stopping, and rollback, on the timed machine: every suite kernel runs
//! through its own host program while, at seeded cycles, running TBs are checkpointed
//! (`Request::Checkpoint`: a full checkpoint first, then only what changed since, papers/
//! li-pep §3.1), their bytes written as context traffic while they keep running; at other
//! seeded cycles a checkpointed TB is stopped and rolled back to its chain of checkpoints
//! (`Request::Rollback`), the chain's bytes loaded back (`Request::Transfer`), and resumed:
//! it re-executes what it did since its latest checkpoint.
//!
//! Re-execution is harmless only if the TB issued no store or atomic to global or local
//! memory since that checkpoint (strict idempotence, papers/lin-lightweight §II-B, as the
//! machine tracks it); every other rollback must be refused (`ControlError::NoRollback`),
//! and the TB then goes on where it stopped. Device memory at the end equals, byte for
//! byte, a run without checkpoints, and the CPU reference passes. Across the suite both
//! happen: rollbacks through chains of several checkpoints, and refusals (a TB past a
//! global store or atomic).

mod common;

use std::cell::Cell;
use std::collections::BTreeMap;
use std::rc::Rc;

use common::TimedDevice;
use gpu::timing::{
    AfterStop, Control, ControlError, Direction, Event, LaunchId, Machine, Refused, Request, Scope,
    SmId, StopAt, TbCheckpoint, TbRef, TimingError, WarpReports,
};
use suite::{Rng, Size};

/// Bytes of device memory each checkpoint may write into (more than any TB's context).
const AREA: u64 = 1 << 20;

#[derive(Clone, Copy, Debug, Default)]
struct Stats {
    checkpoints: u64,
    dirty: u64,
    rollbacks: u64,
    /// Rollbacks through a chain of more than one checkpoint.
    chained: u64,
    refused: u64,
}

/// What the control knows of a TB.
#[derive(Default)]
struct Tb {
    /// Its checkpoints since the last full one, oldest first.
    chain: Vec<TbCheckpoint>,
    /// A checkpoint requested and not yet written.
    writing: bool,
    /// Stopped to be rolled back, then reloading (the transfer's bytes), then resumed.
    rolling: bool,
}

struct Checkpointer {
    launch: LaunchId,
    rng: Rng,
    interval: u64,
    next: u64,
    area: u64,
    tbs: BTreeMap<TbRef, Tb>,
    /// The SM and TB of each restore transfer in flight.
    reloads: Vec<(SmId, gpu::timing::TransferId, TbRef)>,
    stats: Stats,
    out: Rc<Cell<Stats>>,
}

impl Checkpointer {
    fn handle(&mut self, m: &mut Machine, e: Event) -> Result<(), TimingError> {
        match e {
            Event::CheckpointDone { checkpoint, .. } => {
                let tb = self.tbs.entry(checkpoint.tb).or_default();
                tb.writing = false;
                if checkpoint.scope == Scope::Full {
                    tb.chain.clear();
                } else {
                    self.stats.dirty += 1;
                }
                tb.chain.push(*checkpoint);
                self.stats.checkpoints += 1;
            }
            Event::TbStopped { sm, tb, .. } => {
                let chain = self.tbs[&tb].chain.clone();
                let bytes: u64 = chain.iter().map(|c| c.bytes).sum();
                match m.request(Request::Rollback { sm, tb, chain }) {
                    Ok(_) => {
                        self.stats.rollbacks += 1;
                        self.stats.chained += u64::from(self.tbs[&tb].chain.len() > 1);
                        // The chain's bytes come back before the TB runs again.
                        let now = m.cycle();
                        let id = m
                            .request(Request::Transfer {
                                sm,
                                direction: Direction::Restore,
                                base: self.area,
                                bytes,
                                launch: tb.launch,
                                not_before: now,
                            })?
                            .transfer()
                            .expect("a transfer");
                        self.reloads.push((sm, id, tb));
                    }
                    Err(Refused {
                        error: ControlError::NoRollback { why, .. },
                        ..
                    }) => {
                        assert!(
                            why.contains("store or atomic"),
                            "refused for another reason: {why}"
                        );
                        self.stats.refused += 1;
                        self.tbs.get_mut(&tb).expect("known").rolling = false;
                        m.request(Request::Resume { sm, tb })?;
                    }
                    Err(r) => return Err(r.into()),
                }
            }
            Event::TransferDone { sm, id, .. } => {
                if let Some(i) = self
                    .reloads
                    .iter()
                    .position(|&(s, t, _)| (s, t) == (sm, id))
                {
                    let (_, _, tb) = self.reloads.remove(i);
                    self.tbs.get_mut(&tb).expect("known").rolling = false;
                    m.request(Request::Resume { sm, tb })?;
                }
            }
            Event::TbFinished { tb, .. } => {
                self.tbs.remove(&tb);
            }
            _ => {}
        }
        Ok(())
    }
}

impl Control for Checkpointer {
    fn on_cycle(&mut self, m: &mut Machine) -> Result<(), TimingError> {
        for e in m.take_events() {
            self.handle(m, e)?;
        }
        common::dispatch_new(m, self.launch)?;
        let now = m.cycle();
        if now < self.next {
            return Ok(());
        }
        self.next = now + self.interval / 2 + u64::from(self.rng.below(self.interval as u32));
        let running = common::running_tbs(m, None);
        if running.is_empty() {
            return Ok(());
        }
        let (sm, tb) = running[self.rng.below(running.len() as u32) as usize];
        let t = self.tbs.entry(tb).or_default();
        if t.writing || t.rolling {
            return Ok(());
        }
        // Two checkpoints for every rollback; every fourth checkpoint starts a new chain.
        if !t.chain.is_empty() && self.rng.below(3) == 0 {
            t.rolling = true;
            m.request(Request::Stop {
                sm,
                tb,
                at: StopAt::Boundary,
                then: AfterStop::Stay,
                reports: WarpReports::None,
            })?;
        } else {
            let scope = if t.chain.is_empty() || self.rng.below(4) == 0 {
                Scope::Full
            } else {
                Scope::Dirty
            };
            t.writing = true;
            m.request(Request::Checkpoint {
                sm,
                tb,
                scope,
                base: self.area,
            })?;
        }
        Ok(())
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        let (mut t, s) = (self.out.get(), self.stats);
        t.checkpoints += s.checkpoints;
        t.dirty += s.dirty;
        t.rollbacks += s.rollbacks;
        t.chained += s.chained;
        t.refused += s.refused;
        self.out.set(t);
    }
}

/// Runs `k` with a checkpoint or rollback about every `interval` cycles (`u64::MAX`:
/// none): every allocation's bytes and the counters.
fn run(k: &'static dyn suite::Kernel, interval: u64) -> (Vec<Vec<u8>>, Stats) {
    let stats = Rc::new(Cell::new(Stats::default()));
    let out = stats.clone();
    let mut seed = 11;
    // The checkpoints' area, allocated once the device exists, outside the host program's
    // allocations.
    let area = Rc::new(Cell::new(0));
    let base = area.clone();
    let mut d = TimedDevice::new(k, None, |launch, _: &str, start: u64| {
        seed += 1;
        Checkpointer {
            launch,
            rng: Rng::new(seed),
            interval,
            next: start.saturating_add(interval / 2),
            area: base.get(),
            tbs: BTreeMap::new(),
            reloads: Vec::new(),
            stats: Stats::default(),
            out: out.clone(),
        }
    });
    area.set(d.gpu.alloc(AREA).0);
    let v = k
        .run(&mut d, Size::Small, 1)
        .unwrap_or_else(|e| panic!("{} ({interval}): {e}", k.name()));
    assert!(v.passed(), "{} (every {interval}): {v:?}", k.name());
    (d.snapshot(), stats.get())
}

#[test]
fn rollbacks_to_checkpoints_end_bit_exact_and_unrepeatable_ones_are_refused() {
    let mut total = Stats::default();
    for &k in suite::all() {
        let (reference, none) = run(k, u64::MAX);
        assert_eq!(none.checkpoints, 0);
        let (memory, s) = run(k, 400);
        for (i, (a, b)) in reference.iter().zip(&memory).enumerate() {
            assert!(
                a == b,
                "{}: allocation {i} differs from the run without checkpoints ({s:?})",
                k.name()
            );
        }
        total.checkpoints += s.checkpoints;
        total.dirty += s.dirty;
        total.rollbacks += s.rollbacks;
        total.chained += s.chained;
        total.refused += s.refused;
    }
    eprintln!("{total:?}");
    assert!(total.rollbacks > 0 && total.chained > 0, "{total:?}");
    assert!(total.dirty > 0, "{total:?}");
    assert!(total.refused > 0, "{total:?}");
}
