//! A resident warp as the SM holds it — its architectural state, scoreboard, what it has in
//! flight and its control state ([`WarpSlot`]) — and the compact mirror the issue stage
//! scans every cycle ([`WarpHot`]), which one function ([`WarpHot::derive`]) recomputes
//! from the slot after any change.

use crate::barrier::WarpStatus;
use crate::exec::Warp;
use crate::pipeline::OpClass;
use crate::timing::control::WarpControl;
use crate::timing::ids::{LaunchId, TbSlotId};

use super::frontend::RegisterBanks;
use crate::timing::decoded::Decoded;

/// A register waiting for a memory access (released by its completion).
pub(super) const MEM_PENDING: u64 = u64::MAX;

/// [`WarpHot::next_pc`] of a warp without a next instruction.
pub(super) const NO_PC: u32 = u32::MAX;

/// A resident warp.
pub(super) struct WarpSlot {
    pub warp: Warp,
    /// The launch it belongs to.
    pub launch: LaunchId,
    /// The TB slot it belongs to.
    pub tb: TbSlotId,
    pub status: WarpStatus,
    pub control: WarpControl,
    /// Per register: the first cycle at which it may be read or written again
    /// ([`MEM_PENDING`] while a load fills it).
    pub ready_at: Vec<u64>,
    /// Loads and atomics in flight (their destinations wait for them).
    pub outstanding: u32,
    /// Stores, reductions and loads without a destination in flight (nothing waits for them
    /// but a stopping TB, which must see them acknowledged), `cp.async` copies included.
    pub stores: u32,
    /// `cp.async` copies in flight by group.
    pub cp_async: CpAsyncGroups,
    /// The cycle a `nanosleep` suspends the warp until.
    pub sleep_until: u64,
    /// Registers written since the TB's last checkpoint, or since it was placed (dirty bits
    /// set at writeback, papers/li-pep §3.1), one bit per register; a TB installed from a
    /// context starts with every bit set, since where its registers were saved before is
    /// not known here.
    pub dirty: Vec<u64>,
    /// Warp disable (`memsys::Pipeline::WdCommit`, `WdLastcheck`; papers/tanasic-thesis
    /// §6.3.1): the first cycle the warp may issue again ([`MEM_PENDING`] until the access
    /// that disabled it completes or its last page is translated; 0: not disabled), the
    /// access that disabled it, and the cycle it did.
    pub disabled_until: u64,
    pub disabled_by: Option<crate::timing::ids::PendingId>,
    pub disabled_since: u64,
    /// Replay queue (`memsys::Pipeline::ReplayQueue`, §6.3.2): source registers of memory
    /// instructions not yet past their last TLB check, each with the first cycle it may be
    /// overwritten ([`MEM_PENDING`] while that is unknown, with the access that holds it).
    pub held: Vec<(u32, u64, Option<crate::timing::ids::PendingId>)>,
    /// Pipelines that replay (`memsys::Pipeline::squashes`; papers/tanasic-thesis §6.3):
    /// the warp's memory instructions not yet past their last TLB check, oldest first
    /// (the replay queue; under the operand log, its entries), and the squashed parts of
    /// them whose faults are not yet serviced (while any is, the warp issues nothing).
    pub replay: Vec<super::replay::ReplayEntry>,
    pub faults: u32,
    /// Its TB is resident but inactive (`tlp`: an extra TB beyond the SM's scheduling
    /// limits, papers/lin-thesis ch. 3): a running warp issues nothing until it is active.
    pub absent: bool,
}

impl WarpSlot {
    pub fn new(
        warp: Warp,
        status: WarpStatus,
        launch: LaunchId,
        tb: TbSlotId,
        regs: usize,
    ) -> Self {
        WarpSlot {
            warp,
            launch,
            tb,
            status,
            control: WarpControl::Running,
            ready_at: vec![0; regs],
            outstanding: 0,
            stores: 0,
            cp_async: CpAsyncGroups::default(),
            sleep_until: 0,
            dirty: vec![0; regs.div_ceil(64)],
            disabled_until: 0,
            disabled_by: None,
            disabled_since: 0,
            held: Vec::new(),
            replay: Vec::new(),
            faults: 0,
            absent: false,
        }
    }

    /// Nothing it issued is still in flight and every result is written by `now`.
    #[inline]
    pub fn drained(&self, now: u64) -> bool {
        self.outstanding == 0 && self.stores == 0 && self.ready_at.iter().all(|&t| t <= now)
    }

    /// Halted by its TB, held, or finished: it issues nothing more on its own.
    #[inline]
    pub fn idle(&self) -> bool {
        self.status == WarpStatus::Done
            || matches!(
                self.control,
                WarpControl::Halted | WarpControl::HaltedReporting | WarpControl::Held
            )
    }

    /// Marks register `r` written.
    #[inline]
    pub fn mark_dirty(&mut self, r: u32) {
        self.dirty[(r / 64) as usize] |= 1 << (r % 64);
    }

    #[inline]
    pub fn is_dirty(&self, r: u32) -> bool {
        self.dirty[(r / 64) as usize] & (1 << (r % 64)) != 0
    }
}

/// A warp's `cp.async` copies in flight, by group (PTX ISA §9.7.9.25.3): the copies issued
/// since the last `cp.async.commit_group` form the open group; committing closes it.
#[derive(Clone, Debug, Default)]
pub(super) struct CpAsyncGroups {
    /// The open group's id (ids grow by one per commit).
    pub open: u64,
    /// Copies in flight per group, oldest first (groups with none left are dropped).
    in_flight: std::collections::VecDeque<(u64, u32)>,
}

impl CpAsyncGroups {
    pub fn issued(&mut self) -> u64 {
        match self.in_flight.back_mut() {
            Some((g, n)) if *g == self.open => *n += 1,
            _ => self.in_flight.push_back((self.open, 1)),
        }
        self.open
    }

    pub fn commit(&mut self) {
        self.open += 1;
    }

    pub fn completed(&mut self, group: u64) {
        if let Some(k) = self.in_flight.iter().position(|&(g, _)| g == group) {
            self.in_flight[k].1 -= 1;
            if self.in_flight[k].1 == 0 {
                self.in_flight.remove(k);
            }
        }
    }

    /// Whether `cp.async.wait_group groups` (or `wait_all`) may complete: at most `groups`
    /// committed groups still have copies in flight (and, for `wait_all`, none at all).
    pub fn satisfied(&self, groups: u8, all: bool) -> bool {
        if all {
            return self.in_flight.is_empty();
        }
        let committed = self
            .in_flight
            .iter()
            .filter(|&&(g, _)| g < self.open)
            .count();
        committed <= usize::from(groups)
    }
}

/// Whether a slot's warp may be scheduled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum HotState {
    Empty,
    Ready,
    Waiting,
    Done,
    /// Halted or held (neither scheduled nor finished).
    Halted,
}

/// What the issue stage reads of a warp slot every cycle, kept apart from the warp's
/// registers and stack so that scanning an SM's warps touches one small array (the hardware
/// keeps the same facts beside the scheduler: the decoded next instruction in the instruction
/// buffer and its scoreboard state). Everything but the front-end fields (`age`,
/// `fetch_ready`, `buffer_end`) is derived from the [`WarpSlot`] by [`WarpHot::derive`].
#[derive(Clone, Copy, Debug)]
pub(super) struct WarpHot {
    pub state: HotState,
    /// The next instruction's PC ([`NO_PC`] when the warp has none left).
    pub next_pc: u32,
    /// The next instruction's operation class.
    pub class: OpClass,
    /// The first cycle at which every register the next instruction reads or writes is
    /// ready, or [`MEM_PENDING`] while a load fills one of them.
    pub ready: u64,
    /// Dispatch order on this SM (smaller = older).
    pub age: u64,
    /// The cycle from which the instruction buffer holds the next instruction.
    pub fetch_ready: u64,
    /// One past the last PC the instruction buffer holds.
    pub buffer_end: u32,
    /// The warp's launch (what a scheduler may see of it).
    pub launch: LaunchId,
    /// With sub-cores: the register banks the next instruction reads.
    pub src_banks: u64,
}

impl WarpHot {
    /// [`WarpHot::derive`] of a warp with memory instructions it may replay: while a
    /// squashed part of one waits for its fault it issues nothing; once every fault is
    /// serviced its next instruction is the replay of the oldest squashed one (a memory
    /// instruction, ready at once, whatever holds its next instruction); an instruction
    /// that may end the warp or make it wait at a barrier waits until no memory
    /// instruction of it can fault any more.
    #[cold]
    fn derive_replay(&mut self, w: &WarpSlot, leaves: bool) {
        if w.faults > 0 {
            self.ready = MEM_PENDING;
        } else if w.replay.iter().any(|e| e.due) {
            self.ready = 0;
            self.class = OpClass::Mem;
            self.src_banks = 0;
        } else if leaves {
            for e in &w.replay {
                self.ready = self.ready.max(e.release);
            }
        }
    }

    pub const EMPTY: WarpHot = WarpHot {
        state: HotState::Empty,
        next_pc: NO_PC,
        class: OpClass::Alu,
        ready: 0,
        age: 0,
        fetch_ready: 0,
        buffer_end: 0,
        launch: LaunchId(0),
        src_banks: 0,
    };

    /// Whether the slot holds a warp the schedulers may issue from.
    #[inline]
    pub fn live(&self) -> bool {
        matches!(self.state, HotState::Ready | HotState::Waiting)
    }

    /// Recomputes everything derived from the warp in the slot (`None`: an empty slot);
    /// `banks` are the register banks of a sub-core, whose conflicts stall issue.
    pub fn derive(
        &mut self,
        w: Option<&WarpSlot>,
        decoded: &Decoded,
        banks: Option<&RegisterBanks>,
    ) {
        let Some(w) = w else {
            *self = WarpHot::EMPTY;
            return;
        };
        self.launch = w.launch;
        self.state = match (&w.control, w.status) {
            (_, WarpStatus::Done) => HotState::Done,
            (WarpControl::Running, _) if w.absent => HotState::Halted,
            (
                WarpControl::Halted
                | WarpControl::HaltedReporting
                | WarpControl::Held
                | WarpControl::RoutineDraining,
                _,
            ) => HotState::Halted,
            (_, WarpStatus::Ready) => HotState::Ready,
            (_, WarpStatus::Waiting(_)) => HotState::Waiting,
        };
        let Some(top) = w.warp.next_entry() else {
            self.next_pc = NO_PC;
            return;
        };
        self.next_pc = top.pc;
        self.class = decoded.class(top.pc);
        self.src_banks = banks.map_or(0, |b| b.mask(decoded.sources(top.pc)));
        self.ready = 0;
        for &r in decoded.regs(top.pc) {
            let t = w.ready_at[r as usize];
            self.ready = self.ready.max(t);
            if t == MEM_PENDING {
                break;
            }
        }
        // A sleeping warp is ready again when its `nanosleep` ends, a disabled one when it
        // is enabled again.
        self.ready = self.ready.max(w.sleep_until).max(w.disabled_until);
        // Under the replay queue, an instruction that overwrites a held source waits for
        // its release.
        if !w.held.is_empty() {
            for &r in decoded.destinations(top.pc) {
                for &(h, until, _) in &w.held {
                    if h == r {
                        self.ready = self.ready.max(until);
                    }
                }
            }
        }
        // `cp.async.wait_group` waits like a load for its groups' copies.
        if let Some((groups, all)) = decoded.cp_async_wait(top.pc) {
            if !w.cp_async.satisfied(groups, all) {
                self.ready = MEM_PENDING;
            }
        }
        if !w.replay.is_empty() {
            self.derive_replay(w, decoded.leaves(top.pc));
        }
    }
}
