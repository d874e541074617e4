//! Who lives on an SM: its warp and TB slots, the resource ledger they are admitted by, and
//! the holds that keep resources for TBs that are not resident (their context moving, or
//! parked parts of it).
//!
//! A TB of any launch is placed while the ledger has room, in the lowest free TB slot and
//! the lowest free warp slots (warp slot `s` belongs to scheduler `s mod n`). Every slot
//! names its launch.

use kir::IdVec;

use crate::barrier::Barriers;
use crate::occupancy::{SmResources, TbDemand};
use crate::timing::control::{HoldState, Keep, TbControl};
use crate::timing::ids::{CheckpointId, HoldId, LaunchId, TbRef, TbSlotId, WarpSlotId};
use crate::timing::ledger::SmLedger;

use super::warp::{WarpHot, WarpSlot};

/// A resident TB.
pub(super) struct TbSlot {
    pub tb: TbRef,
    pub ctaid: [u32; 3],
    pub shared: Vec<u8>,
    /// Its warps' slots, warp `i` of the TB in `slots[i]`.
    pub slots: Vec<WarpSlotId>,
    pub bars: Barriers,
    /// Device address of the TB's local memory.
    pub local_base: u64,
    pub control: TbControl,
    /// What the TB holds in the ledger.
    pub demand: TbDemand,
    /// The core cycle it was placed on this SM (dispatched or restored), and the warp
    /// instructions its warps had executed by then.
    pub placed_at: u64,
    pub executed_at_placement: u64,
    /// Its checkpoints on this SM ([`super::checkpoint`]).
    pub checkpoints: Checkpoints,
    /// Its basic-block entries since its last checkpoint, when its launch counts them.
    pub blocks: BlockCount,
    /// Whether it is stopping to be switched out on fault by the SM's local scheduler
    /// (papers/tanasic-thesis §6.4.1).
    pub switch_out: bool,
}

/// How often each warp of a TB entered each basic block since the TB's last checkpoint (or
/// placement), for CKPT's checkpoint interval (papers/ji-ctxback §V: a checkpoint every N
/// executions of the same basic block), and whether a checkpoint is due.
#[derive(Clone, Debug, Default)]
pub(super) struct BlockCount {
    /// Warp-major: warp `w`'s count of block `b` at `w * blocks + b`; empty until the first
    /// entry counted.
    pub counts: Vec<u32>,
    /// Whether [`super::super::Event::CheckpointDue`] was raised and no checkpoint taken since.
    pub due: bool,
}

/// What a TB's checkpoints need to know about it: its latest checkpoint, the first
/// instruction since then that re-execution could not repeat harmlessly, and whether it has
/// stored to shared memory since.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Checkpoints {
    pub latest: Option<CheckpointId>,
    pub hazard: Option<u32>,
    pub shared_dirty: SharedDirty,
}

/// Whether shared memory changed since the last checkpoint.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum SharedDirty {
    #[default]
    Clean,
    Written,
}

/// Resources kept for a TB that is not resident.
pub(super) struct Hold {
    pub id: HoldId,
    /// The launch of the TB they are kept for.
    pub launch: LaunchId,
    /// The whole TB's demand.
    pub full: TbDemand,
    pub state: HoldState,
}

impl Hold {
    /// What a parked hold keeps on the SM.
    fn kept(&self) -> Option<TbDemand> {
        match self.state {
            HoldState::Parked { keep } => Some(TbDemand {
                warps: 0,
                threads: 0,
                registers: if keep.registers() {
                    self.full.registers
                } else {
                    0
                },
                shared_memory: if keep.shared_memory() {
                    self.full.shared_memory
                } else {
                    0
                },
            }),
            _ => None,
        }
    }
}

/// The slots of an SM and what they hold.
pub(super) struct Residency {
    /// Warp slots (boxed: a warp leaves its slot while it issues, and moving a pointer is
    /// cheaper than moving the warp).
    pub warps: IdVec<WarpSlotId, Option<Box<WarpSlot>>>,
    pub hot: IdVec<WarpSlotId, WarpHot>,
    pub tbs: IdVec<TbSlotId, Option<TbSlot>>,
    pub ledger: SmLedger,
    holds: Vec<Hold>,
    next_hold: u32,
    /// Dispatch order of the next warp placed.
    pub next_age: u64,
    /// TBs with a stop request that have not stopped yet.
    pub stopping: u32,
}

impl Residency {
    /// An empty SM with `resources` and `n_warps` warp slots (more than the resources'
    /// with extra TBs, `tlp`).
    pub fn new(resources: &SmResources, n_warps: usize) -> Residency {
        Residency {
            warps: IdVec::from_vec((0..n_warps).map(|_| None).collect()),
            hot: IdVec::from_vec(vec![WarpHot::EMPTY; n_warps]),
            tbs: IdVec::from_vec((0..resources.max_tbs).map(|_| None).collect()),
            ledger: SmLedger::new(resources),
            holds: Vec::new(),
            next_hold: 0,
            next_age: 0,
            stopping: 0,
        }
    }

    #[inline]
    pub fn warp(&self, slot: WarpSlotId) -> &WarpSlot {
        self.warps[slot].as_ref().expect("resident warp")
    }

    #[inline]
    pub fn warp_mut(&mut self, slot: WarpSlotId) -> &mut WarpSlot {
        self.warps[slot].as_mut().expect("resident warp")
    }

    #[inline]
    pub fn tb(&self, k: TbSlotId) -> &TbSlot {
        self.tbs[k].as_ref().expect("resident TB")
    }

    #[inline]
    pub fn tb_mut(&mut self, k: TbSlotId) -> &mut TbSlot {
        self.tbs[k].as_mut().expect("resident TB")
    }

    /// The slot of resident TB `tb`.
    pub fn find(&self, tb: TbRef) -> Option<TbSlotId> {
        self.tbs
            .iter()
            .find(|(_, t)| t.as_ref().is_some_and(|t| t.tb == tb))
            .map(|(k, _)| k)
    }

    /// The resident TBs, lowest slot first.
    pub fn resident(&self) -> impl Iterator<Item = &TbSlot> + '_ {
        self.tbs.values().flatten()
    }

    /// The lowest free TB slot and the `n` lowest free warp slots.
    pub fn free_slots(&self, n: usize) -> (TbSlotId, Vec<WarpSlotId>) {
        let k = self
            .tbs
            .iter()
            .find(|(_, t)| t.is_none())
            .map(|(k, _)| k)
            .expect("the ledger has a TB slot free");
        let slots: Vec<WarpSlotId> = self
            .warps
            .iter()
            .filter(|(_, w)| w.is_none())
            .map(|(s, _)| s)
            .take(n)
            .collect();
        debug_assert_eq!(slots.len(), n, "the ledger has the warp slots free");
        (k, slots)
    }

    pub fn holds(&self) -> impl Iterator<Item = &Hold> + '_ {
        self.holds.iter()
    }

    fn hold_index(&self, id: HoldId) -> Option<usize> {
        self.holds.iter().position(|h| h.id == id)
    }

    pub fn hold(&self, id: HoldId) -> Option<&Hold> {
        self.hold_index(id).map(|i| &self.holds[i])
    }

    /// Records a hold of `demand` for a TB of `launch`, whose resources the ledger already
    /// counts.
    pub fn new_hold(&mut self, launch: LaunchId, demand: TbDemand, state: HoldState) -> HoldId {
        let id = HoldId(self.next_hold);
        self.next_hold += 1;
        self.holds.push(Hold {
            id,
            launch,
            full: demand,
            state,
        });
        id
    }

    /// Takes a TB's resources for a context of `launch` about to be restored.
    pub fn take_hold(&mut self, launch: LaunchId, demand: &TbDemand) -> HoldId {
        debug_assert!(self.ledger.fits_for(launch, demand));
        self.ledger.take_for(launch, demand);
        self.new_hold(launch, *demand, HoldState::Restoring)
    }

    /// Gives a hold's resources back.
    pub fn release(&mut self, id: HoldId) -> Option<HoldState> {
        let i = self.hold_index(id)?;
        let h = self.holds.remove(i);
        match h.kept() {
            Some(kept) => self.ledger.give_part_for(h.launch, &kept),
            None => self.ledger.give_for(h.launch, &h.full),
        }
        Some(h.state)
    }

    /// Parks a hold: keeps `keep` and gives back the rest (its TB slot, warp slots and what
    /// is not kept).
    pub fn park(&mut self, id: HoldId, keep: Keep) -> Option<()> {
        let i = self.hold_index(id)?;
        let (full, launch) = (self.holds[i].full, self.holds[i].launch);
        self.holds[i].state = HoldState::Parked { keep };
        let kept = self.holds[i].kept().expect("parked");
        self.ledger.give_for(launch, &full);
        self.ledger.take_part_for(launch, &kept);
        Some(())
    }

    /// What a parked hold lacks to hold its whole TB again.
    fn missing(&self, i: usize) -> Option<TbDemand> {
        let h = &self.holds[i];
        let kept = h.kept()?;
        Some(TbDemand {
            warps: h.full.warps,
            threads: h.full.threads,
            registers: h.full.registers - kept.registers,
            shared_memory: h.full.shared_memory - kept.shared_memory,
        })
    }

    /// Whether parked hold `id` can take back what it gave up (a TB slot included).
    pub fn fits_unpark(&self, id: HoldId) -> bool {
        self.hold_index(id)
            .and_then(|i| self.missing(i))
            .is_some_and(|m| {
                self.ledger.used_tbs < self.ledger.max_tbs && self.ledger.fits_part(&m)
            })
    }

    /// Takes back what parked hold `id` gave up; it is restoring then.
    pub fn unpark(&mut self, id: HoldId) -> Option<()> {
        if !self.fits_unpark(id) {
            return None;
        }
        let i = self.hold_index(id).expect("checked");
        let kept = self.holds[i].kept().expect("parked");
        let (full, launch) = (self.holds[i].full, self.holds[i].launch);
        self.holds[i].state = HoldState::Restoring;
        self.ledger.give_part_for(launch, &kept);
        self.ledger.take_for(launch, &full);
        Some(())
    }

    /// Whether nothing runs here: no TB resident and every hold parked.
    pub fn vacated(&self) -> bool {
        self.tbs.values().all(Option::is_none)
            && self
                .holds
                .iter()
                .all(|h| matches!(h.state, HoldState::Parked { .. }))
    }

    /// Every resident TB running and every hold parked.
    pub fn settled(&self) -> bool {
        self.resident().all(|t| t.control == TbControl::Running)
            && self
                .holds
                .iter()
                .all(|h| matches!(h.state, HoldState::Parked { .. }))
    }

    /// The warp slots of TB slot `k`.
    #[inline]
    pub fn slots_of(&self, k: TbSlotId) -> &[WarpSlotId] {
        &self.tb(k).slots
    }
}
