//! One SM: resident TBs and warps of any launches, warp schedulers, the scoreboard,
//! functional units, and the issue of one instruction per scheduler per cycle.
//!
//! **Residency.** The SM keeps a ledger of its resources ([`SmLedger`]); a TB of any launch
//! is placed while they have room, in the lowest free TB slot and the lowest free warp slots
//! (warp slot `s` belongs to scheduler `s mod n`). Every slot names its launch, and each
//! launch's counters are kept here, per SM, and summed by the machine. A TB can be stopped
//! ([`Sm::stop`]): its warps halt (at once, or each after its next preemption point), the
//! instructions already issued finish (loads return, stores are acknowledged, results are
//! written), and then its state leaves the SM as a [`TbContext`] that [`Sm::install`] puts
//! back on any SM.
//!
//! **Issue.** Each cycle every scheduler ranks its warps ([`super::scheduler`]) and issues the
//! first that can: not finished, not waiting at a barrier, none of its next instruction's
//! source or destination registers pending (RAW and WAW through a per-register ready cycle),
//! and its unit free (initiation interval). Issuing executes the instruction functionally
//! ([`crate::exec::step`]) at once, so every value is real; timing only decides *when*.
//!
//! **Memory.** The per-lane addresses of a memory instruction are computed from the warp's
//! registers *before* it executes (they are the addresses `step` will use). Global, local and
//! constant accesses are coalesced and offered to the memory system, which accepts or refuses
//! the whole access; a refused access does not issue (a memory stall) and is retried. A load
//! or atomic keeps its destination registers pending until the memory system reports the
//! access complete; stores and reductions are fire-and-forget (they still occupy the L1 port,
//! MSHRs, the interconnect and DRAM). Shared-memory accesses take the shared latency plus one
//! cycle per extra bank-conflict pass and hold the LD/ST unit one cycle per pass. Parameter
//! loads take the constant cache's hit latency.
//!
//! **Local memory** lives in device memory, one frame per TB, interleaved by lane as CUDA lays
//! it out ([`crate::memory::local_word_address`]), so a warp reading one local variable
//! touches one line and a spill is real memory traffic.
//!
//! **Speed without changing results.** The scheduler reads a compact per-slot [`WarpHot`]
//! (the decoded next instruction's class and the cycle its registers are ready) that is
//! recomputed only when it can change; LRR and GTO, whose order ignores long waits, check
//! warps only along their order until one issues; and an SM whose cycle would repeat exactly
//! (every warp waits on a load, a barrier, a known hazard cycle, or an access the memory system
//! refused and would refuse again: same [`IssueState`]) sleeps, charging each cycle the same
//! stall reasons and repeating the refused offer for its counters. Each of these was checked
//! to leave every statistic of the large suite byte-identical.
//!
//! **Front end and operands** ([`super::spec`]): a warp issues only from its instruction
//! buffer, which a fetch through the SM's i-cache fills when it empties or after its PC leaves
//! the sequence (a `Fetch` stall meanwhile); an issued instruction reads its sources through
//! single-ported register banks and a read that waits for its bank delays the result. Operands
//! are read at issue, so no WAR hazard can arise and the scoreboard tracks RAW and WAW only.
//!
//! Simplifications (documented, not hidden): one issue per scheduler per cycle (no dual
//! issue), i-cache misses cost a fixed latency instead of travelling to the L2, writebacks do
//! not compete for register-bank ports, a generic access is classified by its first active
//! lane's window, shared-memory atomics cost their bank-conflict passes only, fences do not
//! wait for outstanding stores.

use kir::inst::{Inst, Op, Operand, Space, Special, MAX_DSTS};
use kir::{Id, IdVec, Reg};
use memsys::{
    coalesce::shared_bank_conflicts_with, coalesce_into, AccessKind, IssueState, LineRequest,
    MemAccess, MemConfig, MemorySystem, Priority,
};

use super::context::{StopAt, TbContext, WarpContext};
use super::frontend::{FetchUnit, RegisterBanks};
use super::ids::{LaunchId, SmId, TbRef};
use super::launch::Launch;
use super::ledger::SmLedger;
use super::scheduler::{AnyScheduler, WarpInfo, WarpScheduler};
use super::spec::{OpClass, PipelineSpec, Unit};
use super::stats::{FrontendStats, SmStats, StallReason};
use crate::barrier::{deadlock, Barriers, TbWarps, WarpStatus};
use crate::error::ExecError;
use crate::exec::{guard_mask, lanes, step, Step, TbView, Warp, WARP_SIZE};
use crate::memory::{self, DeviceMemory, Window};
use crate::occupancy::{SmResources, TbDemand};

/// A register waiting for a memory access (released by its completion).
const MEM_PENDING: u64 = u64::MAX;

/// A resident warp.
pub(super) struct WarpSlot {
    pub warp: Warp,
    /// The launch it belongs to.
    pub launch: LaunchId,
    /// The TB slot it belongs to.
    pub tb: u32,
    pub status: WarpStatus,
    /// Stopped by a stop request of its TB: it issues nothing more.
    pub halted: bool,
    /// Per register: the first cycle at which it may be read or written again
    /// ([`MEM_PENDING`] while a load fills it).
    ready_at: Vec<u64>,
    /// Loads and atomics in flight (their destinations wait for them).
    outstanding: u32,
    /// Stores, reductions and loads without a destination in flight (nothing waits for them
    /// but a stopping TB, which must see them acknowledged), `cp.async` copies included.
    stores: u32,
    /// `cp.async` copies in flight by group.
    cp_async: CpAsyncGroups,
    /// The cycle a `nanosleep` suspends the warp until.
    sleep_until: u64,
}

/// A warp's `cp.async` copies in flight, by group (PTX ISA §9.7.9.25.3): the copies issued
/// since the last `cp.async.commit_group` form the open group; committing closes it.
#[derive(Clone, Debug, Default)]
pub(super) struct CpAsyncGroups {
    /// The open group's id (ids grow by one per commit).
    open: u64,
    /// Copies in flight per group, oldest first (groups with none left are dropped).
    in_flight: std::collections::VecDeque<(u64, u32)>,
}

impl CpAsyncGroups {
    fn issued(&mut self) -> u64 {
        match self.in_flight.back_mut() {
            Some((g, n)) if *g == self.open => *n += 1,
            _ => self.in_flight.push_back((self.open, 1)),
        }
        self.open
    }

    fn commit(&mut self) {
        self.open += 1;
    }

    fn completed(&mut self, group: u64) {
        if let Some(k) = self.in_flight.iter().position(|&(g, _)| g == group) {
            self.in_flight[k].1 -= 1;
            if self.in_flight[k].1 == 0 {
                self.in_flight.remove(k);
            }
        }
    }

    /// Whether `cp.async.wait_group groups` (or `wait_all`) may complete: at most `groups`
    /// committed groups still have copies in flight (and, for `wait_all`, none at all).
    fn satisfied(&self, groups: u8, all: bool) -> bool {
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

/// What the issue stage reads of a warp slot every cycle, kept apart from the warp's
/// registers and stack so that scanning an SM's warps touches one small array (the hardware
/// keeps the same facts beside the scheduler: the decoded next instruction in the instruction
/// buffer and its scoreboard state). It is derived from the [`WarpSlot`] and refreshed
/// whenever something it depends on changes: the warp's own issue (next instruction, ready
/// cycles of its destinations), a completion (ready cycles), a barrier release, a halt,
/// dispatch, installation and retirement.
#[derive(Clone, Copy, Debug)]
struct WarpHot {
    state: HotState,
    /// The next instruction's PC ([`NO_PC`] when the warp has none left).
    next_pc: u32,
    /// The next instruction's operation class.
    class: OpClass,
    /// The first cycle at which every register the next instruction reads or writes is
    /// ready, or [`MEM_PENDING`] while a load fills one of them.
    ready: u64,
    /// Dispatch order on this SM (smaller = older).
    age: u64,
    /// The cycle from which the instruction buffer holds the next instruction.
    fetch_ready: u64,
    /// One past the last PC the instruction buffer holds.
    buffer_end: u32,
    /// The warp's launch (what a scheduler may see of it).
    launch: LaunchId,
    /// With sub-cores: the register banks the next instruction reads.
    src_banks: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum HotState {
    Empty,
    Ready,
    Waiting,
    Done,
    /// Halted by a stop request (neither scheduled nor finished).
    Halted,
}

/// [`WarpHot::next_pc`] of a warp without a next instruction.
const NO_PC: u32 = u32::MAX;

impl WarpHot {
    const EMPTY: WarpHot = WarpHot {
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

    /// Whether the slot holds a warp the schedulers may issue from (not finished, not halted).
    fn live(&self) -> bool {
        matches!(self.state, HotState::Ready | HotState::Waiting)
    }
}

/// A resident TB.
pub(super) struct TbSlot {
    tb: TbRef,
    ctaid: [u32; 3],
    shared: Vec<u8>,
    slots: Vec<u32>,
    bars: Barriers,
    /// Device address of the TB's local memory.
    local_base: u64,
    /// Set by a stop request.
    stop: Option<StopAt>,
    /// Keep the TB's resources when it leaves (as a hold): its context is yet to be saved.
    hold: bool,
    /// Report each warp once it has drained (halted, nothing in flight, every result
    /// written), by its index in the TB: a save pipeline may start on it before the whole
    /// TB stops. Entries turn false once reported.
    report_warps: Vec<bool>,
    /// What the TB holds in the ledger.
    demand: TbDemand,
    /// The core cycle it was placed on this SM (dispatched or restored), and the warp
    /// instructions its warps had executed by then.
    placed_at: u64,
    executed_at_placement: u64,
}

/// A memory access in flight, by tag (its index in [`Sm::pending`]).
struct PendingAccess {
    /// The warp slot that issued it, or `None` once that warp's TB has left the SM (its
    /// stores may still be in flight when it finishes).
    slot: Option<u32>,
    launch: LaunchId,
    /// Destination registers that wait for it (loads and atomics).
    regs: [Option<Reg>; MAX_DSTS],
    /// Whether the warp waits for it (a load or atomic with a destination).
    waits: bool,
    /// Parts of the access still in flight (see [`Backlog`]).
    parts: u32,
    /// The context transfer it belongs to ([`Transfer`]), if any.
    transfer: Option<u32>,
    /// The warp's `cp.async` group it belongs to, if it is a `cp.async`.
    cp_async: Option<u64>,
}

/// A context save or restore in flight on this SM: line-sized accesses at context priority
/// issued through the LD/ST unit in cycles no warp uses it (papers/lin-lightweight §V-A:
/// "context switching requests have lower priority than regular requests"), as a trap
/// routine's coalesced stores and loads would be.
struct Transfer {
    id: u32,
    kind: AccessKind,
    lines: Vec<LineRequest>,
    /// Lines offered so far, and accesses not yet complete.
    next: usize,
    outstanding: u32,
    launch: LaunchId,
    /// No line is offered before this cycle (data still being prepared, e.g. compressed).
    not_before: u64,
    /// The access being offered (reused).
    offer: MemAccess,
}

/// Resources kept for a TB that is not resident: its whole demand while its context moves,
/// or, parked (in-place switching), only the registers and/or shared memory it keeps here.
struct Hold {
    id: u32,
    full: TbDemand,
    parked: Option<TbDemand>,
}

/// The rest of a warp access too large for the memory system to accept at once. The memory
/// system takes an access whole or not at all, and an access needs an interconnect input-queue
/// slot (and possibly an MSHR) per line, so a scattered warp access (up to 32 lines) is split
/// into parts of at most `chunk` lines. The instruction executes when its first part is
/// accepted; the LD/ST unit then offers one further part per cycle until none is left, and
/// accepts no other instruction meanwhile (GPGPU-Sim's LD/ST unit likewise serves one
/// instruction's requests over several cycles).
struct Backlog {
    kind: AccessKind,
    space: memsys::Space,
    tag: u64,
    lines: Vec<LineRequest>,
    next: usize,
    /// The part being offered (reused).
    part: MemAccess,
}

/// One launch's counters on one SM (the machine sums them over SMs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct LaunchCounters {
    pub warp_instructions: u64,
    pub thread_instructions: u64,
    /// Completed parts of loads and atomics the warps waited for, and their latency.
    pub global_loads: u64,
    pub load_latency: u64,
    pub shared_accesses: u64,
    pub shared_passes: u64,
    /// Accesses issued to the memory system and not yet complete.
    pub in_flight: u64,
}

/// What the issue stage needs of each instruction, decoded once per launch (as the hardware
/// decodes into its instruction buffer): the operation class, and the registers the
/// scoreboard looks up (sources, then destinations).
pub(super) struct Decoded {
    class: Vec<OpClass>,
    /// Per instruction: the `(groups, all)` of a `cp.async.wait_group`/`wait_all` (empty
    /// when the kernel has none).
    cp_async_waits: Vec<Option<(u8, bool)>>,
    /// Per instruction: where its registers start in `regs`, how many there are, and how
    /// many of them are sources (they come first).
    spans: Vec<(u32, u32, u32)>,
    regs: Vec<u32>,
}

impl Decoded {
    pub(super) fn of(kernel: &kir::Kernel) -> Decoded {
        let insts = kernel.insts.as_slice();
        let waits = |i: &Inst| match i.op {
            Op::CpAsyncWait { groups, all } => Some((groups, all)),
            _ => None,
        };
        let mut d = Decoded {
            cp_async_waits: if insts.iter().any(|i| waits(i).is_some()) {
                insts.iter().map(waits).collect()
            } else {
                Vec::new()
            },
            class: Vec::with_capacity(insts.len()),
            spans: Vec::with_capacity(insts.len()),
            regs: Vec::new(),
        };
        for inst in insts {
            d.class.push(OpClass::of(inst));
            let start = d.regs.len() as u32;
            d.regs.extend(inst.uses().map(|r| r.index() as u32));
            let uses = d.regs.len() as u32 - start;
            d.regs.extend(inst.defs().map(|r| r.index() as u32));
            d.spans.push((start, d.regs.len() as u32 - start, uses));
        }
        d
    }

    /// The `(groups, all)` of instruction `pc` if it is a `cp.async` wait.
    fn cp_async_wait(&self, pc: u32) -> Option<(u8, bool)> {
        self.cp_async_waits.get(pc as usize).copied().flatten()
    }

    /// The registers instruction `pc` reads or writes.
    fn regs(&self, pc: u32) -> &[u32] {
        let (start, len, _) = self.spans[pc as usize];
        &self.regs[start as usize..(start + len) as usize]
    }

    /// The registers instruction `pc` reads.
    fn sources(&self, pc: u32) -> &[u32] {
        let (start, _, uses) = self.spans[pc as usize];
        &self.regs[start as usize..(start + uses) as usize]
    }
}

/// The fixed descriptions an SM reads while it issues.
pub(super) struct Specs<'a> {
    pub pipeline: &'a PipelineSpec,
    pub memory: &'a MemConfig,
}

/// What left the SM in one retire step.
#[derive(Default)]
pub(super) struct Retired {
    /// TBs that finished: the TB, its local-memory frame and the warp instructions it
    /// executed.
    pub finished: Vec<(TbRef, u64, u64)>,
    /// TBs that were stopped and whose state was captured, each with the hold that keeps
    /// its resources when it was asked to.
    pub evicted: Vec<(TbContext, Option<u32>)>,
    /// Context transfers that completed.
    pub transfers: Vec<u32>,
    /// Warps of stopping TBs that drained ([`Sm::report_warps`]): the TB and the warp's
    /// index in it.
    pub drained: Vec<(TbRef, u32)>,
}

/// What the checks of one cycle found about sleeping (see [`Sm::sleep`]).
struct SleepCheck {
    /// Every warp checked so far waits on something only a completion, a new TB or `wake`
    /// or a change in the memory system's answer to the refused access can change, and
    /// nothing issued.
    possible: bool,
    wake: u64,
    /// Ready warps checked, and issues attempted (every ready warp must have been tried and
    /// refused for the cycle to repeat).
    ready: u32,
    attempted: u32,
}

/// Whether a warp can issue this cycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Check {
    Ready,
    Blocked(StallReason),
    /// The warp has no more instructions (its stack emptied without an `exit` reporting it).
    Finished,
}

/// What a memory instruction does beyond the functional step.
enum MemPlan {
    /// Not a memory access (or no active lane): fixed class latency.
    None,
    /// Issued to the memory system; `pending` when the destinations wait for completion.
    System { pending: bool },
    /// Fixed latency and LD/ST-unit occupancy.
    Fixed { latency: u64, busy: u64 },
}

pub(super) struct Sm {
    id: SmId,
    /// Warp slots (boxed: a warp leaves its slot while it issues, and moving a pointer is
    /// cheaper than moving the warp).
    warps: Vec<Option<Box<WarpSlot>>>,
    hot: Vec<WarpHot>,
    tbs: Vec<Option<TbSlot>>,
    ledger: SmLedger,
    /// TBs with a stop request that have not left yet.
    stopping: u32,
    scheds: Vec<AnyScheduler>,
    sp_free: Vec<u64>,
    /// Per scheduler: the cycle its tensor core accepts the next `mma`.
    tensor_free: Vec<u64>,
    sfu_free: u64,
    fetch: Vec<FetchUnit>,
    /// Register banks: one set for the SM, or one per scheduler with `sub_cores`.
    banks: Vec<RegisterBanks>,
    /// Each scheduler has its own fetch unit and register banks (`PipelineSpec::sub_cores`).
    sub_cores: bool,
    /// Instructions one fetch brings into a warp's buffer.
    ibuffer_entries: u32,
    ldst_free: u64,
    /// The cycle the memory system last refused an access of this SM. The refused
    /// instruction holds the LD/ST unit for the rest of that cycle: the unit accepts one
    /// instruction per cycle, and a refused one sits in it as a stalled instruction would.
    ldst_refused_at: u64,
    /// The warp slot and PC of the last refused access, whose lines `lines` (and `offer`)
    /// still hold: the warp has not run since, so its retry reuses them instead of coalescing
    /// again, and while the memory system's state is the one after the refusal, the retry is
    /// known to be refused again.
    refused_access: Option<(usize, u32, IssueState)>,
    /// Set when a cycle issued nothing and every warp waits on something only a memory
    /// completion, a new TB or the given cycle can change: until then each cycle would repeat
    /// that one exactly, so it is only counted (each scheduler charged the same stall reason).
    sleep: Option<u64>,
    /// Whether the exact speed shortcuts are on ([`super::TimingOptions::shortcuts`]).
    shortcuts: bool,
    /// The SM sleeps on a refused access (`refused_access`): the cycle repeats, the same
    /// offer refused again, until the memory system's [`IssueState`] changes.
    sleeps_on_refusal: bool,
    /// The memory system refused an access this cycle (the one in `offer`).
    refused_now: bool,
    /// The last access offered to the memory system (reused to avoid an allocation).
    offer: MemAccess,
    /// Warps whose last issue left them without a next instruction: they are finished from
    /// the next cycle on (what a check of them would find then).
    finishing: Vec<u32>,
    /// Something `retire` looks at changed (a warp arrived at a barrier, finished, or had a
    /// load complete; a TB is stopping); until then `retire` would find nothing to do.
    retire_due: bool,
    /// Each scheduler's stall reason in the last fully evaluated cycle (what `sleep` charges).
    stall_reasons: Vec<StallReason>,
    pending: Vec<Option<PendingAccess>>,
    free_pending: Vec<u32>,
    backlog: Option<Backlog>,
    next_age: u64,
    /// Per launch (by id): its counters on this SM.
    counters: IdVec<LaunchId, LaunchCounters>,
    /// Context transfers, oldest first (served in order), and the next transfer id.
    transfers: std::collections::VecDeque<Transfer>,
    next_transfer: u32,
    /// Resources kept for TBs that are not resident (saving or being restored), by hold id.
    holds: Vec<Hold>,
    next_hold: u32,
    // Scratch, reused every cycle.
    /// Per scheduler: what its policy sees of its warps (see [`WarpInfo`]).
    infos: Vec<Vec<WarpInfo>>,
    /// Per scheduler: warps came or went since `infos` was built.
    infos_stale: Vec<bool>,
    checks: Vec<Check>,
    /// Per scheduler: its last order, and whether it still holds (see `issue`).
    orders: Vec<Vec<u32>>,
    order_valid: Vec<bool>,
    addrs: [Option<u64>; WARP_SIZE],
    /// Element addresses of a matrix load or store or a `cp.async` (see `plan_matrix_memory`).
    matrix_addrs: Vec<Option<u64>>,
    lines: Vec<LineRequest>,
    pub stats: SmStats,
}

/// The most lines one part of a warp access may have: what the memory system can accept from
/// an otherwise idle SM (one request-network input slot per line; one MSHR per missing line).
fn chunk_lines(cfg: &MemConfig, space: memsys::Space, kind: AccessKind) -> usize {
    let mut c = cfg.icnt_request.input_buffer;
    if kind == AccessKind::Load {
        let mshrs = if space == memsys::Space::Const {
            cfg.const_cache.mshr_entries
        } else {
            cfg.l1.mshr_entries
        };
        c = c.min(mshrs as usize);
    }
    c.max(1)
}

impl Sm {
    pub(super) fn new(
        id: SmId,
        resources: &SmResources,
        schedulers: Vec<AnyScheduler>,
        spec: &PipelineSpec,
        shortcuts: bool,
    ) -> Sm {
        let n_warps = resources.max_warps as usize;
        let n_sched = schedulers.len();
        Sm {
            id,
            warps: (0..n_warps).map(|_| None).collect(),
            hot: vec![WarpHot::EMPTY; n_warps],
            tbs: (0..resources.max_tbs).map(|_| None).collect(),
            ledger: SmLedger::new(resources),
            stopping: 0,
            scheds: schedulers,
            sp_free: vec![0; n_sched],
            tensor_free: vec![0; n_sched],
            sfu_free: 0,
            fetch: (0..if spec.sub_cores { n_sched } else { 1 })
                .map(|_| FetchUnit::new(&spec.fetch))
                .collect(),
            banks: (0..if spec.sub_cores { n_sched } else { 1 })
                .map(|_| RegisterBanks::new(spec.register_banks))
                .collect(),
            sub_cores: spec.sub_cores,
            ibuffer_entries: spec.fetch.ibuffer_entries.max(1),
            ldst_free: 0,
            ldst_refused_at: u64::MAX,
            refused_access: None,
            shortcuts,
            sleep: None,
            sleeps_on_refusal: false,
            refused_now: false,
            offer: MemAccess {
                kind: AccessKind::Load,
                space: memsys::Space::Global,
                priority: Priority::Normal,
                lines: Vec::with_capacity(64),
                tag: 0,
            },
            finishing: Vec::new(),
            retire_due: false,
            stall_reasons: Vec::with_capacity(n_sched),
            pending: Vec::new(),
            free_pending: Vec::new(),
            backlog: None,
            next_age: 0,
            counters: IdVec::new(),
            transfers: std::collections::VecDeque::new(),
            next_transfer: 0,
            holds: Vec::new(),
            next_hold: 0,
            infos: vec![Vec::with_capacity(n_warps); n_sched],
            infos_stale: vec![true; n_sched],
            checks: vec![Check::Ready; n_warps],
            orders: vec![Vec::with_capacity(n_warps); n_sched],
            order_valid: vec![false; n_sched],
            addrs: [None; WARP_SIZE],
            matrix_addrs: Vec::new(),
            lines: Vec::with_capacity(64),
            stats: SmStats {
                schedulers: vec![Default::default(); n_sched],
                ..Default::default()
            },
        }
    }

    pub(super) fn ledger(&self) -> &SmLedger {
        &self.ledger
    }

    pub(super) fn is_empty(&self) -> bool {
        self.ledger.is_empty()
    }

    /// Warp slots held by resident TBs.
    pub(super) fn resident_warps(&self) -> u32 {
        self.ledger.used_warps
    }

    /// The resident TBs and whether each has a stop request.
    pub(super) fn resident(&self) -> impl Iterator<Item = (TbRef, bool)> + '_ {
        self.tbs.iter().flatten().map(|t| (t.tb, t.stop.is_some()))
    }

    /// The warps of resident TB `tb`.
    pub(super) fn warps_of(&self, tb: TbRef) -> Option<Vec<super::machine::WarpView>> {
        let t = self.tbs.iter().flatten().find(|t| t.tb == tb)?;
        Some(
            t.slots
                .iter()
                .map(|&s| {
                    let w = self.warps[s as usize].as_ref().expect("resident warp");
                    let pcs: Vec<u32> = w
                        .warp
                        .stack
                        .iter()
                        .rev()
                        .filter(|e| e.mask != 0 && e.pc != e.rpc)
                        .map(|e| e.pc)
                        .collect();
                    let live_entries = pcs.len();
                    super::machine::WarpView {
                        index: w.warp.index,
                        pc: w.warp.next_entry().map(|e| e.pc),
                        pcs,
                        at_barrier: matches!(w.status, WarpStatus::Waiting(_)),
                        diverged: live_entries > 1,
                        halted: w.halted,
                        done: w.status == WarpStatus::Done,
                        executed: w.warp.executed,
                        lanes: (w.warp.valid & !w.warp.exited).count_ones(),
                    }
                })
                .collect(),
        )
    }

    /// Whether the SM still has memory work of its own (a split access, a context
    /// transfer) to send or finish.
    pub(super) fn has_backlog(&self) -> bool {
        self.backlog.is_some() || !self.transfers.is_empty()
    }

    /// This SM's counters of `launch`.
    pub(super) fn counters(&self, launch: LaunchId) -> LaunchCounters {
        self.counters.get(launch).copied().unwrap_or_default()
    }

    fn counters_mut(&mut self, launch: LaunchId) -> &mut LaunchCounters {
        while self.counters.len() <= launch.index() {
            self.counters.push(LaunchCounters::default());
        }
        &mut self.counters[launch]
    }

    /// Takes the TB's resources and the lowest free TB slot and warp slots; the new slots'
    /// warps are built by `warp(i)` for the TB's warp `i`.
    fn place(
        &mut self,
        launch: &Launch,
        tb: TbRef,
        ctaid: [u32; 3],
        shared: Vec<u8>,
        bars: Barriers,
        local_base: u64,
        now: u64,
        mut warp: impl FnMut(u32) -> (Warp, WarpStatus),
    ) {
        debug_assert!(self.ledger.fits(&launch.demand));
        self.ledger.take(&launch.demand);
        let k = self
            .tbs
            .iter()
            .position(Option::is_none)
            .expect("the ledger has a TB slot free");
        let n = launch.demand.warps as usize;
        let slots: Vec<u32> = (0..self.warps.len() as u32)
            .filter(|&s| self.warps[s as usize].is_none())
            .take(n)
            .collect();
        debug_assert_eq!(slots.len(), n, "the ledger has the warp slots free");
        let regs = launch.ctx.kernel.regs.len();
        for (i, &s) in slots.iter().enumerate() {
            let (w, status) = warp(i as u32);
            self.warps[s as usize] = Some(Box::new(WarpSlot {
                warp: w,
                launch: tb.launch,
                tb: k as u32,
                status,
                halted: false,
                ready_at: vec![0; regs],
                outstanding: 0,
                stores: 0,
                cp_async: CpAsyncGroups::default(),
                sleep_until: 0,
            }));
            self.hot[s as usize].age = self.next_age;
            self.next_age += 1;
            self.refresh(&launch.decoded, s as usize);
            self.fill_buffer(s as usize, now);
        }
        let executed_at_placement = slots
            .iter()
            .map(|&s| {
                self.warps[s as usize]
                    .as_ref()
                    .map_or(0, |w| w.warp.executed)
            })
            .sum();
        self.tbs[k] = Some(TbSlot {
            tb,
            ctaid,
            shared,
            slots,
            bars,
            local_base,
            stop: None,
            hold: false,
            report_warps: Vec::new(),
            demand: launch.demand,
            placed_at: now,
            executed_at_placement,
        });
        self.counters_mut(tb.launch);
        self.infos_stale.fill(true);
        self.sleep = None;
        // A TB restored at a barrier may find it already complete.
        self.retire_due = true;
    }

    /// Places a new TB `tb` of `launch` (the caller checked that it fits), its local memory
    /// at `local_base`.
    pub(super) fn dispatch(&mut self, launch: &Launch, tb: TbRef, local_base: u64, now: u64) {
        let ctx = &launch.ctx;
        self.place(
            launch,
            tb,
            ctx.ctaid(tb.index),
            vec![0; ctx.smem_size as usize],
            Barriers::default(),
            local_base,
            now,
            |i| (Warp::new(ctx, i), WarpStatus::Ready),
        );
        self.stats.tbs += 1;
    }

    /// Installs a stopped TB's state (the caller checked that it fits); it continues where
    /// it stopped.
    pub(super) fn install(&mut self, launch: &Launch, context: Box<TbContext>, now: u64) {
        let TbContext {
            tb,
            ctaid,
            warps,
            shared,
            barriers,
            local_base,
            ..
        } = *context;
        let mut warps = warps.into_iter();
        self.place(launch, tb, ctaid, shared, barriers, local_base, now, |_| {
            let w = warps.next().expect("one context per warp");
            (w.warp, w.status)
        });
    }

    /// Asks the TB `tb` to stop (see [`StopAt`]); false if it is not resident or already
    /// stopping.
    pub(super) fn stop(&mut self, tb: TbRef, at: StopAt) -> bool {
        let Some(k) = self
            .tbs
            .iter()
            .position(|t| t.as_ref().is_some_and(|t| t.tb == tb && t.stop.is_none()))
        else {
            return false;
        };
        let t = self.tbs[k].as_mut().expect("found above");
        t.stop = Some(at);
        self.stopping += 1;
        self.retire_due = true;
        let slots = t.slots.clone();
        for s in slots {
            let waiting = matches!(
                self.warps[s as usize]
                    .as_ref()
                    .expect("resident warp")
                    .status,
                WarpStatus::Waiting(_)
            );
            if at == StopAt::Boundary || waiting {
                self.halt(s as usize);
            }
        }
        true
    }

    /// Queues a context transfer of `lines` (stores for a save, loads for a restore) for
    /// `launch`; returns its id.
    pub(super) fn transfer(
        &mut self,
        kind: AccessKind,
        lines: Vec<LineRequest>,
        launch: LaunchId,
        not_before: u64,
    ) -> u32 {
        let id = self.next_transfer;
        self.next_transfer += 1;
        self.transfers.push_back(Transfer {
            id,
            kind,
            lines,
            next: 0,
            outstanding: 0,
            launch,
            not_before,
            offer: MemAccess {
                kind,
                space: memsys::Space::Global,
                priority: Priority::Context,
                lines: Vec::new(),
                tag: 0,
            },
        });
        self.sleep = None;
        self.retire_due = true;
        id
    }

    /// Offers the next part of the oldest context transfer with lines left to send, if no
    /// warp used the LD/ST unit
    /// this cycle.
    fn offer_transfer(&mut self, memcfg: &MemConfig, memsys: &mut MemorySystem, now: u64) {
        if self.backlog.is_some() || self.ldst_free > now || self.ldst_refused_at == now {
            return;
        }
        let tag = self
            .free_pending
            .last()
            .map_or(self.pending.len() as u64, |&t| u64::from(t));
        // The oldest transfer with lines still to send; its successors wait behind it (a
        // save pipeline sends in order), but it need not wait for earlier transfers'
        // acknowledgements.
        let Some(t) = self.transfers.iter_mut().find(|t| t.next < t.lines.len()) else {
            return;
        };
        if t.not_before > now {
            return;
        }
        let chunk = chunk_lines(memcfg, memsys::Space::Global, t.kind);
        let end = (t.next + chunk).min(t.lines.len());
        t.offer.lines.clear();
        t.offer.lines.extend_from_slice(&t.lines[t.next..end]);
        t.offer.tag = tag;
        if memsys.offer(self.id.index(), &t.offer).is_err() {
            return;
        }
        t.next = end;
        t.outstanding += 1;
        let p = PendingAccess {
            slot: None,
            launch: t.launch,
            regs: [None; MAX_DSTS],
            waits: false,
            parts: 1,
            transfer: Some(t.id),
            cp_async: None,
        };
        match self.free_pending.pop() {
            Some(i) => self.pending[i as usize] = Some(p),
            None => self.pending.push(Some(p)),
        }
        self.ldst_free = now + 1;
    }

    /// Takes a TB's resources for a context about to be restored; the hold's id.
    pub(super) fn hold(&mut self, demand: &TbDemand) -> u32 {
        debug_assert!(self.ledger.fits(demand));
        self.ledger.take(demand);
        self.new_hold(*demand)
    }

    fn new_hold(&mut self, demand: TbDemand) -> u32 {
        let id = self.next_hold;
        self.next_hold += 1;
        self.holds.push(Hold {
            id,
            full: demand,
            parked: None,
        });
        self.sleep = None;
        id
    }

    /// Gives a hold's resources back; false if there is no such hold.
    pub(super) fn release(&mut self, hold: u32) -> bool {
        let Some(i) = self.holds.iter().position(|h| h.id == hold) else {
            return false;
        };
        let h = self.holds.remove(i);
        match h.parked {
            Some(kept) => self.ledger.give_part(&kept),
            None => self.ledger.give(&h.full),
        }
        self.infos_stale.fill(true);
        self.sleep = None;
        true
    }

    /// Parks a hold: keeps its registers and/or its shared memory and gives back the rest
    /// (its TB slot, warp slots and what is not kept). False if there is no such unparked
    /// hold.
    pub(super) fn park(&mut self, hold: u32, registers: bool, shared: bool) -> bool {
        let Some(h) = self
            .holds
            .iter_mut()
            .find(|h| h.id == hold && h.parked.is_none())
        else {
            return false;
        };
        let kept = TbDemand {
            warps: 0,
            threads: 0,
            registers: if registers { h.full.registers } else { 0 },
            shared_memory: if shared { h.full.shared_memory } else { 0 },
        };
        self.ledger.give(&h.full);
        self.ledger.take_part(&kept);
        h.parked = Some(kept);
        self.infos_stale.fill(true);
        self.sleep = None;
        true
    }

    /// What a parked hold lacks to hold its whole TB again, if there is such a hold.
    fn missing(&self, hold: u32) -> Option<(usize, TbDemand)> {
        let i = self.holds.iter().position(|h| h.id == hold)?;
        let h = &self.holds[i];
        let kept = h.parked?;
        Some((
            i,
            TbDemand {
                warps: h.full.warps,
                threads: h.full.threads,
                registers: h.full.registers - kept.registers,
                shared_memory: h.full.shared_memory - kept.shared_memory,
            },
        ))
    }

    /// Whether parked hold `hold` can take back what it gave up (a TB slot included).
    pub(super) fn fits_unpark(&self, hold: u32) -> bool {
        self.missing(hold).is_some_and(|(_, m)| {
            self.ledger.used_tbs < self.ledger.max_tbs && self.ledger.fits_part(&m)
        })
    }

    /// Takes back what parked hold `hold` gave up; false if it cannot.
    pub(super) fn unpark(&mut self, hold: u32) -> bool {
        if !self.fits_unpark(hold) {
            return false;
        }
        let (i, _) = self.missing(hold).expect("checked");
        let h = &mut self.holds[i];
        let kept = h.parked.take().expect("parked");
        self.ledger.give_part(&kept);
        self.ledger.take(&h.full);
        self.infos_stale.fill(true);
        true
    }

    /// Whether nothing runs or is being moved here: no TB resident, no transfer, and every
    /// hold parked.
    pub(super) fn vacated(&self) -> bool {
        self.tbs.iter().all(Option::is_none)
            && self.transfers.is_empty()
            && self.holds.iter().all(|h| h.parked.is_some())
    }

    /// Asks the TB `tb` to keep its resources, as a hold, when it leaves after a stop.
    pub(super) fn keep_resources(&mut self, tb: TbRef) -> bool {
        match self.tbs.iter_mut().flatten().find(|t| t.tb == tb) {
            Some(t) => {
                t.hold = true;
                true
            }
            None => false,
        }
    }

    /// Reports each warp of `tb` that still runs once it has drained (see
    /// [`TbSlot::report_warps`]).
    pub(super) fn report_warps(&mut self, tb: TbRef) {
        if let Some(t) = self.tbs.iter_mut().flatten().find(|t| t.tb == tb) {
            t.report_warps = t
                .slots
                .iter()
                .map(|&s| {
                    self.warps[s as usize]
                        .as_ref()
                        .is_some_and(|w| w.status != WarpStatus::Done)
                })
                .collect();
        }
    }

    /// What the SM's counters know of resident TB `tb`'s progress.
    pub(super) fn progress(&self, tb: TbRef) -> Option<super::machine::TbProgress> {
        let t = self.tbs.iter().flatten().find(|t| t.tb == tb)?;
        let executed = t
            .slots
            .iter()
            .map(|&s| {
                self.warps[s as usize]
                    .as_ref()
                    .map_or(0, |w| w.warp.executed)
            })
            .sum();
        Some(super::machine::TbProgress {
            placed_at: t.placed_at,
            executed,
            executed_here: executed - t.executed_at_placement,
        })
    }

    /// Warp `index` of resident TB `tb`, if it is halted (its registers no longer change).
    pub(super) fn halted_warp(&self, tb: TbRef, index: u32) -> Option<&crate::exec::Warp> {
        let t = self.tbs.iter().flatten().find(|t| t.tb == tb)?;
        let w = self.warps[*t.slots.get(index as usize)? as usize].as_ref()?;
        w.halted.then_some(&w.warp)
    }

    /// Throws TB `tb` away at once (its warps stop mid-flight; accesses in flight complete
    /// unobserved); returns its local-memory frame.
    pub(super) fn discard(&mut self, tb: TbRef) -> Option<u64> {
        let k = self
            .tbs
            .iter()
            .position(|t| t.as_ref().is_some_and(|t| t.tb == tb))?;
        self.sleep = None;
        if let Some(t) = self.tbs[k].as_mut() {
            t.hold = false;
        }
        let t = self.vacate(k);
        Some(t.local_base)
    }

    /// The warp in `slot` issues nothing more (its TB is stopping).
    fn halt(&mut self, slot: usize) {
        let w = self.warps[slot].as_mut().expect("resident warp");
        if w.halted || w.status == WarpStatus::Done {
            return;
        }
        w.halted = true;
        self.hot[slot].state = HotState::Halted;
        self.infos_stale.fill(true);
        self.sleep = None;
    }

    /// Releases the registers of completed accesses.
    pub(super) fn complete(&mut self, memsys: &mut MemorySystem, launches: &[Launch], now: u64) {
        while let Some(c) = memsys.pop_completed(self.id.index()) {
            let p = self.pending[c.tag as usize]
                .as_mut()
                .expect("completion of a pending access");
            let (launch, waits) = (p.launch, p.waits);
            if waits {
                let k = &mut self.counters[launch];
                k.global_loads += 1;
                k.load_latency += c.latency();
            }
            p.parts -= 1;
            if p.parts > 0 {
                continue;
            }
            let p = self.pending[c.tag as usize].take().expect("checked above");
            self.free_pending.push(c.tag as u32);
            if let Some(id) = p.transfer {
                let t = self
                    .transfers
                    .iter_mut()
                    .find(|t| t.id == id)
                    .expect("a transfer with accesses in flight is queued");
                t.outstanding -= 1;
                self.retire_due = true;
                continue;
            }
            self.counters[launch].in_flight -= 1;
            let Some(slot) = p.slot else {
                continue;
            };
            let w = self.warps[slot as usize]
                .as_mut()
                .expect("a warp with accesses in flight stays resident");
            if !waits {
                w.stores -= 1;
                if let Some(group) = p.cp_async {
                    // A warp may be waiting for the group.
                    w.cp_async.completed(group);
                    self.refresh(&launches[launch.index()].decoded, slot as usize);
                    self.sleep = None;
                }
                if self.stopping > 0 {
                    self.retire_due = true;
                }
                continue;
            }
            for r in p.regs.iter().flatten() {
                w.ready_at[r.index()] = now;
            }
            w.outstanding -= 1;
            self.refresh(&launches[launch.index()].decoded, slot as usize);
            self.sleep = None;
            self.retire_due = true;
        }
    }

    /// One cycle of every warp scheduler.
    pub(super) fn issue(
        &mut self,
        launches: &[Launch],
        specs: &Specs,
        memsys: &mut MemorySystem,
        mem: &mut DeviceMemory,
        now: u64,
    ) -> Result<(), ExecError> {
        if !self.is_empty() {
            self.stats.active_cycles += 1;
            self.stats.resident_warp_cycles += u64::from(self.resident_warps());
        }
        if let Some(until) = self.sleep {
            let holds = !self.sleeps_on_refusal || self.refusal_holds(memsys);
            if now < until && holds {
                if self.sleeps_on_refusal {
                    // The cycle repeats, and so does its refused offer (and its counters).
                    self.repeat_refusal(memsys, now);
                }
                for (st, &r) in self.stats.schedulers.iter_mut().zip(&self.stall_reasons) {
                    st.stall(r);
                }
                return Ok(());
            }
            self.sleep = None;
        }
        self.refused_now = false;
        for i in 0..self.finishing.len() {
            let slot = self.finishing[i] as usize;
            if self.warps[slot].is_some() {
                self.mark_done(slot);
            }
        }
        self.finishing.clear();
        self.drain_backlog(specs.memory, memsys);
        let n = self.scheds.len();
        // Whether this cycle can repeat unchanged (see `sleep`), and until when.
        let mut sleep = SleepCheck {
            possible: self.backlog.is_none() && self.transfers.is_empty(),
            wake: u64::MAX,
            ready: 0,
            attempted: 0,
        };
        self.stall_reasons.clear();
        for s in 0..n {
            // A policy that ignores long waits gets its order first and the warps are checked
            // lazily along it; otherwise every warp is checked first.
            let lazy = self.shortcuts && !self.scheds[s].reads_long_wait();
            let mut best: Option<StallReason> = None;
            // A lazy policy's view (live warps and ages) changes only when warps come and go.
            if !lazy || self.infos_stale[s] {
                self.infos_stale[s] = false;
                self.order_valid[s] = false;
                self.infos[s].clear();
                for slot in (s..self.warps.len()).step_by(n) {
                    let h = &self.hot[slot];
                    if !h.live() {
                        continue;
                    }
                    let (age, launch) = (h.age, h.launch);
                    let long_wait = if lazy {
                        false
                    } else {
                        let c = self.check_noting(slot, s, now, &mut sleep);
                        self.checks[slot] = c;
                        match c {
                            Check::Finished => continue,
                            Check::Blocked(r) => best = best.max(Some(r)),
                            Check::Ready => {}
                        }
                        matches!(
                            c,
                            Check::Blocked(StallReason::Memory | StallReason::Barrier)
                        )
                    };
                    self.infos[s].push(WarpInfo {
                        slot: slot as u32,
                        age,
                        long_wait,
                        launch,
                    });
                }
            }
            // A lazy policy's order is a pure function of its view and of its state, which only
            // `issued` changes (the `reads_long_wait` contract): reuse it until either changes.
            if !lazy || !self.order_valid[s] {
                self.scheds[s].order(&self.infos[s], &mut self.orders[s]);
                self.order_valid[s] = lazy;
            }
            let mut issued = false;
            for i in 0..self.orders[s].len() {
                let slot = self.orders[s][i] as usize;
                let c = if lazy {
                    self.check_noting(slot, s, now, &mut sleep)
                } else {
                    self.checks[slot]
                };
                match c {
                    Check::Finished => {}
                    Check::Blocked(r) => {
                        if lazy {
                            best = best.max(Some(r));
                        }
                    }
                    Check::Ready => {
                        sleep.attempted += 1;
                        match self.try_issue(launches, specs, memsys, mem, slot, s, now)? {
                            Ok(()) => {
                                self.scheds[s].issued(slot as u32);
                                self.order_valid[s] = false;
                                issued = true;
                                break;
                            }
                            Err(r) => best = best.max(Some(r)),
                        }
                    }
                }
            }
            let st = &mut self.stats.schedulers[s];
            if issued {
                st.issued += 1;
                sleep.possible = false;
            } else {
                let r = best.unwrap_or(StallReason::NoWarp);
                st.stall(r);
                self.stall_reasons.push(r);
            }
        }
        self.offer_transfer(specs.memory, memsys, now);
        if self.shortcuts
            && sleep.possible
            && sleep.ready == sleep.attempted
            && sleep.wake > now + 1
        {
            self.sleep = Some(sleep.wake);
            self.sleeps_on_refusal = self.refused_now;
        }
        Ok(())
    }

    /// [`Sm::check`], marking a finished warp done and noting whether the answer lets the SM
    /// sleep (see [`Sm::sleep`]).
    fn check_noting(
        &mut self,
        slot: usize,
        sched: usize,
        now: u64,
        sleep: &mut SleepCheck,
    ) -> Check {
        let c = self.check(slot, sched, now);
        if sleep.possible {
            let h = &self.hot[slot];
            match c {
                Check::Blocked(StallReason::Barrier) | Check::Finished => {}
                // Waiting for a load, or for the LD/ST unit another warp's refused access
                // holds this cycle.
                Check::Blocked(StallReason::Memory)
                    if h.ready == MEM_PENDING || self.ldst_refused_at == now => {}
                Check::Blocked(StallReason::Scoreboard) => sleep.wake = sleep.wake.min(h.ready),
                Check::Blocked(StallReason::Fetch) => sleep.wake = sleep.wake.min(h.fetch_ready),
                // A ready warp keeps the cycle repeatable only if its issue is attempted and
                // refused (counted against `attempted`).
                Check::Ready => sleep.ready += 1,
                _ => sleep.possible = false,
            }
        }
        if c == Check::Finished {
            self.mark_done(slot);
        }
        c
    }

    /// Whether the warp in `slot` can issue at `now`, from its [`WarpHot`] (the same answer
    /// as looking at the warp itself, which the hot copy mirrors).
    fn check(&self, slot: usize, sched: usize, now: u64) -> Check {
        let h = &self.hot[slot];
        if h.state == HotState::Waiting {
            return Check::Blocked(StallReason::Barrier);
        }
        if h.next_pc == NO_PC {
            return Check::Finished;
        }
        if now < h.fetch_ready {
            return Check::Blocked(StallReason::Fetch);
        }
        if h.ready == MEM_PENDING {
            return Check::Blocked(StallReason::Memory);
        }
        if h.ready > now {
            return Check::Blocked(StallReason::Scoreboard);
        }
        let free = match h.class.unit() {
            Unit::Sp => self.sp_free[sched],
            Unit::Tensor => self.tensor_free[sched],
            Unit::Sfu => self.sfu_free,
            Unit::LdSt if self.backlog.is_some() => MEM_PENDING,
            Unit::LdSt if self.ldst_refused_at == now => {
                return Check::Blocked(StallReason::Memory)
            }
            Unit::LdSt => self.ldst_free,
        };
        if free > now {
            return Check::Blocked(StallReason::PipelineBusy);
        }
        // Sub-cores: the operand collector cannot read a bank still busy this cycle.
        if self.sub_cores && !self.banks[sched].free(h.src_banks, now) {
            return Check::Blocked(StallReason::PipelineBusy);
        }
        Check::Ready
    }

    /// Whether the memory system is still in the state in which it refused `refused_access`
    /// (so that it would refuse the same offer again).
    fn refusal_holds(&self, memsys: &MemorySystem) -> bool {
        self.refused_access
            .is_some_and(|(_, _, state)| memsys.issue_state(self.id.index()) == state)
    }

    /// Offers the refused access again to a memory system known to refuse it, for the
    /// counters the refusal updates.
    fn repeat_refusal(&mut self, memsys: &mut MemorySystem, now: u64) {
        let r = memsys.offer(self.id.index(), &self.offer);
        debug_assert!(r.is_err(), "an unchanged memory system refuses again");
        self.ldst_refused_at = now;
        self.refused_now = true;
    }

    /// Recomputes the [`WarpHot`] of `slot` from the warp in it.
    fn refresh(&mut self, decoded: &Decoded, slot: usize) {
        let h = &mut self.hot[slot];
        let Some(w) = self.warps[slot].as_ref() else {
            *h = WarpHot::EMPTY;
            return;
        };
        h.launch = w.launch;
        h.state = match w.status {
            WarpStatus::Done => HotState::Done,
            _ if w.halted => HotState::Halted,
            WarpStatus::Ready => HotState::Ready,
            WarpStatus::Waiting(_) => HotState::Waiting,
        };
        let Some(top) = w.warp.next_entry() else {
            h.next_pc = NO_PC;
            return;
        };
        h.next_pc = top.pc;
        h.class = decoded.class[top.pc as usize];
        h.src_banks = if self.sub_cores {
            self.banks[0].mask(decoded.sources(top.pc))
        } else {
            0
        };
        h.ready = 0;
        for &r in decoded.regs(top.pc) {
            let t = w.ready_at[r as usize];
            h.ready = h.ready.max(t);
            if t == MEM_PENDING {
                break;
            }
        }
        // A sleeping warp is ready again when its `nanosleep` ends.
        h.ready = h.ready.max(w.sleep_until);
        // `cp.async.wait_group` waits like a load for its groups' copies.
        if let Some((groups, all)) = decoded.cp_async_wait(top.pc) {
            if !w.cp_async.satisfied(groups, all) {
                h.ready = MEM_PENDING;
            }
        }
    }

    /// Starts the fetch that fills the instruction buffer of `slot` from its next PC.
    fn fill_buffer(&mut self, slot: usize, now: u64) {
        let h = &mut self.hot[slot];
        if h.next_pc == NO_PC {
            return;
        }
        let unit = if self.sub_cores {
            slot % self.fetch.len()
        } else {
            0
        };
        h.fetch_ready = self.fetch[unit].fetch(h.next_pc, now);
        h.buffer_end = h.next_pc.saturating_add(self.ibuffer_entries);
    }

    /// Front-end counters so far.
    pub(super) fn frontend_stats(&self) -> FrontendStats {
        FrontendStats {
            fetches: self.fetch.iter().map(|f| f.fetches).sum(),
            icache_misses: self.fetch.iter().map(|f| f.misses).sum(),
            operand_conflict_cycles: self.banks.iter().map(|b| b.conflict_cycles).sum(),
        }
    }

    /// The warp in `slot` has finished.
    fn mark_done(&mut self, slot: usize) {
        self.warps[slot].as_mut().expect("resident").status = WarpStatus::Done;
        self.hot[slot].state = HotState::Done;
        self.retire_due = true;
        self.infos_stale.fill(true);
    }

    /// Issues the next instruction of the warp in `slot` (its check said ready). The outer
    /// error is a functional fault; the inner one a memory-system refusal (nothing happened).
    #[allow(clippy::too_many_arguments)]
    fn try_issue(
        &mut self,
        launches: &[Launch],
        specs: &Specs,
        memsys: &mut MemorySystem,
        mem: &mut DeviceMemory,
        slot: usize,
        sched: usize,
        now: u64,
    ) -> Result<Result<(), StallReason>, ExecError> {
        let same_offer = self
            .refused_access
            .is_some_and(|(s, pc, _)| s == slot && pc == self.hot[slot].next_pc);
        if self.shortcuts && same_offer && self.ldst_refused_at != now && self.refusal_holds(memsys)
        {
            // The same offer, to a memory system in the same state: refused again (made,
            // for its counters).
            self.repeat_refusal(memsys, now);
            return Ok(Err(StallReason::Memory));
        }
        let mut ws = self.warps[slot].take().expect("resident");
        let launch = &launches[ws.launch.index()];
        let ctx = &launch.ctx;
        let top = ws.warp.next_entry().expect("checked ready");
        let inst = &ctx.kernel.insts.as_slice()[top.pc as usize];
        let exec = guard_mask(inst, &ws.warp, top.mask);
        let class = self.hot[slot].class;
        if class.unit() == Unit::LdSt && self.ldst_refused_at == now {
            // Checked ready earlier this cycle, before another warp's access was refused.
            self.warps[slot] = Some(ws);
            return Ok(Err(StallReason::Memory));
        }
        let plan = if class == OpClass::Mem && exec != 0 {
            let local_base = self.tbs[ws.tb as usize]
                .as_ref()
                .expect("resident TB")
                .local_base;
            let access = Access {
                launch,
                ws: &ws,
                local_base,
                inst,
                pc: top.pc,
                exec,
                slot,
                textures: mem.textures(),
            };
            match self.plan_memory(specs, memsys, &access) {
                Ok(p) => p,
                Err(r) => {
                    self.ldst_refused_at = now;
                    self.warps[slot] = Some(ws);
                    return Ok(Err(r));
                }
            }
        } else {
            MemPlan::None
        };

        let before = (ws.warp.executed, ws.warp.thread_executed);
        let tb = self.tbs[ws.tb as usize].as_mut().expect("resident TB");
        let mut view = TbView {
            ctaid: tb.ctaid,
            shared: &mut tb.shared,
            sm: self.id.0,
            clock: Some(now),
            local_base: tb.local_base,
        };
        let result = step(ctx, &mut view, &mut ws.warp, mem);
        let result = match result {
            Ok(r) => r,
            Err(e) => {
                self.warps[slot] = Some(ws);
                return Err(launch.ptx_error(e));
            }
        };
        // A TB stopping at preemption points halts each warp right after its `pp` (or at
        // the `bar.pp` it now waits at), papers/lin-lightweight §IV-A; a warp that comes to
        // wait at any other barrier stops there too, or the TB could never stop.
        let halts = tb.stop == Some(StopAt::PreemptionPoint)
            && (matches!(inst.op, Op::Pp { .. } | Op::Bar { pp: Some(_), .. })
                || matches!(result, Step::Barrier(a) if a.wait));
        match result {
            Step::Executed => {}
            Step::Barrier(a) => {
                tb.bars.arrive(&a);
                if a.wait {
                    ws.status = WarpStatus::Waiting(a);
                }
                self.retire_due = true;
            }
            Step::Done => {
                ws.status = WarpStatus::Done;
                self.retire_due = true;
            }
        }
        let (warp_insts, thread_insts) = (
            ws.warp.executed - before.0,
            ws.warp.thread_executed - before.1,
        );
        let k = &mut self.counters[ws.launch];
        k.warp_instructions += warp_insts;
        k.thread_instructions += thread_insts;
        self.stats.warp_instructions += warp_insts;

        // Operand collection: reads that wait for a register bank delay the result.
        let decoded = &launch.decoded;
        let set = if self.sub_cores { sched } else { 0 };
        let late = self.banks[set].read(decoded.sources(top.pc), now);
        let timing = match (class, &specs.pipeline.tensor) {
            // Loading checked that the tensor cores take the instruction's types.
            (OpClass::Tensor, Some(t)) => t.timing(inst).unwrap_or(specs.pipeline.timing(class)),
            _ => specs.pipeline.timing(class),
        };
        match inst.op {
            Op::CpAsync { .. } if matches!(plan, MemPlan::System { .. }) => {
                ws.cp_async.issued();
            }
            Op::CpAsyncCommit => ws.cp_async.commit(),
            Op::Nanosleep => {
                // The longest of the active lanes' requests, at most 1 ms, in core cycles.
                let ns = lanes(exec)
                    .map(|l| match inst.srcs[0] {
                        Operand::Reg(r) => ws.warp.regs[r.index() * WARP_SIZE + l],
                        Operand::Imm(v) => v,
                        _ => 0,
                    } & 0xffff_ffff)
                    .max()
                    .unwrap_or(0)
                    .min(1_000_000);
                let cycles = (ns as f64 * specs.memory.clocks.core_mhz / 1000.0).round() as u64;
                ws.sleep_until = now + cycles;
            }
            _ => {}
        }
        let (ready, busy) = match plan {
            MemPlan::None => (
                now + u64::from(timing.latency.max(1)) + late,
                timing.interval,
            ),
            MemPlan::System { pending: true } => {
                ws.outstanding += 1;
                (MEM_PENDING, timing.interval)
            }
            MemPlan::System { pending: false } => {
                ws.stores += 1;
                (now + 1, timing.interval)
            }
            MemPlan::Fixed { latency, busy } => (now + latency.max(1) + late, busy as u32),
        };
        for r in inst.defs() {
            ws.ready_at[r.index()] = ready;
        }
        let until = now + u64::from(busy.max(1));
        match class.unit() {
            Unit::Sp => self.sp_free[sched] = until,
            Unit::Tensor => self.tensor_free[sched] = until,
            Unit::Sfu => self.sfu_free = until,
            Unit::LdSt => self.ldst_free = until,
        }
        if halts {
            ws.halted = true;
            self.infos_stale.fill(true);
        }
        self.warps[slot] = Some(ws);
        self.refresh(decoded, slot);
        let h = &self.hot[slot];
        if h.next_pc == NO_PC && h.state != HotState::Done {
            // No `exit`, but nothing left to run either (see `finishing`).
            self.finishing.push(slot as u32);
        }
        // The buffer still holds the next instruction only if it follows the one issued.
        let next = self.hot[slot].next_pc;
        if next != NO_PC && !(next == top.pc + 1 && next < self.hot[slot].buffer_end) {
            self.fill_buffer(slot, now);
        }
        Ok(Ok(()))
    }

    /// Computes the lane addresses of a memory instruction and offers it to the memory
    /// system (global/local/const) or prices it (shared, param).
    fn plan_memory(
        &mut self,
        specs: &Specs,
        memsys: &mut MemorySystem,
        a: &Access,
    ) -> Result<MemPlan, StallReason> {
        let (ctx, inst) = (&a.launch.ctx, a.inst);
        let (space, ty, vec, offset, kind) = match inst.op {
            Op::Ld {
                space,
                ty,
                vec,
                offset,
                ..
            } => (space, ty, vec, offset, AccessKind::Load),
            Op::St {
                space,
                ty,
                vec,
                offset,
            } => (space, ty, vec, offset, AccessKind::Store),
            Op::Atom {
                space, ty, offset, ..
            }
            | Op::Red {
                space, ty, offset, ..
            } => (space, ty, 1, offset, AccessKind::Atomic),
            // A read-modify-write of the 8-byte barrier object.
            Op::Mbarrier { space, offset, .. } => {
                (space, kir::Ty::B64, 1, offset, AccessKind::Atomic)
            }
            _ => return self.plan_matrix_memory(specs, memsys, a),
        };
        let bytes = ty.size() * u32::from(vec.max(1));
        let regs = &a.ws.warp.regs;
        let base = inst.srcs[0];
        let read = |l: usize| -> u64 {
            let b = match base {
                Operand::Reg(r) => regs[r.index() * WARP_SIZE + l],
                Operand::Imm(v) => v,
                Operand::GlobalAddr(g, off) => ctx.global_addrs[g.index()].wrapping_add(off as u64),
                Operand::Special(Special::WarpSmem) => ctx.warp_smem(a.ws.warp.index),
                _ => 0,
            };
            b.wrapping_add(offset as i64 as u64)
        };
        let first = a.exec.trailing_zeros() as usize;
        let retry = self
            .refused_access
            .is_some_and(|(s, p, _)| (s, p) == (a.slot, a.pc));
        // The space the access goes to, and how a lane's address maps into it.
        let resolved = match space {
            Space::Generic => match memory::window(read(first)) {
                Window::Global(_) => Space::Global,
                Window::Shared(_) => Space::Shared,
                Window::Local(_) => Space::Local,
                Window::Param(_) => Space::Param,
            },
            s => s,
        };
        let strip = |x: u64| -> u64 {
            if space == Space::Generic {
                match memory::window(x) {
                    Window::Global(x) | Window::Shared(x) | Window::Local(x) | Window::Param(x) => {
                        x
                    }
                }
            } else {
                x
            }
        };
        for l in 0..WARP_SIZE {
            if retry {
                break;
            }
            self.addrs[l] = if a.exec & (1 << l) != 0 {
                let x = strip(read(l));
                Some(match resolved {
                    Space::Local => {
                        memory::local_word_address(
                            a.local_base,
                            a.launch.frame_words,
                            a.ws.warp.index,
                            l as u32,
                            x / 4,
                        ) + x % 4
                    }
                    _ => x,
                })
            } else {
                None
            };
        }
        self.offer_planned(specs, memsys, a, resolved, bytes, kind, retry, false)
    }

    /// The memory plan of an access whose addresses are in `self.addrs` (one per lane) or,
    /// with `matrix`, in `self.matrix_addrs` (one per element): priced (shared, param) or
    /// offered to the memory system.
    #[allow(clippy::too_many_arguments)]
    fn offer_planned(
        &mut self,
        specs: &Specs,
        memsys: &mut MemorySystem,
        a: &Access,
        resolved: Space,
        bytes: u32,
        kind: AccessKind,
        retry: bool,
        matrix: bool,
    ) -> Result<MemPlan, StallReason> {
        let inst = a.inst;
        let addrs: &[Option<u64>] = if matrix {
            &self.matrix_addrs
        } else {
            &self.addrs
        };
        match resolved {
            Space::Shared => {
                let sh = &specs.memory.shared;
                let passes = shared_bank_conflicts_with(addrs, bytes, sh.banks, sh.bank_bytes);
                let k = &mut self.counters[a.ws.launch];
                k.shared_accesses += 1;
                k.shared_passes += u64::from(passes);
                Ok(MemPlan::Fixed {
                    latency: sh.access_cycles(passes),
                    busy: u64::from(passes.max(1)) * u64::from(specs.pipeline.ldst_interval.max(1)),
                })
            }
            Space::Param => Ok(MemPlan::Fixed {
                latency: specs.memory.const_cache.hit_latency,
                busy: u64::from(specs.pipeline.ldst_interval.max(1)),
            }),
            Space::Global | Space::Const | Space::Local => {
                let msp = match resolved {
                    Space::Const => memsys::Space::Const,
                    Space::Local => memsys::Space::Local,
                    _ => memsys::Space::Global,
                };
                if !retry {
                    coalesce_into(addrs, bytes, specs.memory.line_bytes, &mut self.lines);
                }
                if self.lines.is_empty() {
                    // Nothing to read (a `cp.async` whose lanes all read zero bytes).
                    return Ok(MemPlan::None);
                }
                let waits = kind != AccessKind::Store
                    && matches!(
                        inst.op,
                        Op::Ld { .. } | Op::Atom { .. } | Op::WmmaLoad { .. } | Op::Tex { .. }
                    )
                    && inst.defs().next().is_some();
                let tag = self
                    .free_pending
                    .last()
                    .map_or(self.pending.len() as u64, |&t| u64::from(t));
                let chunk = chunk_lines(specs.memory, msp, kind);
                let first = self.lines.len().min(chunk);
                self.offer.kind = kind;
                self.offer.space = msp;
                self.offer.priority = Priority::Normal;
                self.offer.tag = tag;
                self.offer.lines.clear();
                self.offer.lines.extend_from_slice(&self.lines[..first]);
                if memsys.offer(self.id.index(), &self.offer).is_err() {
                    let state = memsys.issue_state(self.id.index());
                    self.refused_access = Some((a.slot, a.pc, state));
                    self.refused_now = true;
                    return Err(StallReason::Memory);
                }
                self.refused_access = None;
                let parts = self.lines.len().div_ceil(chunk).max(1) as u32;
                if parts > 1 {
                    self.backlog = Some(Backlog {
                        kind,
                        space: msp,
                        tag,
                        lines: self.lines.clone(),
                        next: first,
                        part: MemAccess {
                            kind,
                            space: msp,
                            priority: Priority::Normal,
                            lines: Vec::with_capacity(chunk),
                            tag,
                        },
                    });
                }
                let mut regs = [None; MAX_DSTS];
                if waits {
                    regs[..inst.dsts().len()].copy_from_slice(inst.dsts());
                }
                let p = PendingAccess {
                    slot: Some(a.slot as u32),
                    launch: a.ws.launch,
                    regs,
                    waits,
                    parts,
                    transfer: None,
                    cp_async: matches!(inst.op, Op::CpAsync { .. }).then_some(a.ws.cp_async.open),
                };
                match self.free_pending.pop() {
                    Some(t) => self.pending[t as usize] = Some(p),
                    None => self.pending.push(Some(p)),
                }
                self.counters[a.ws.launch].in_flight += 1;
                Ok(MemPlan::System { pending: waits })
            }
            Space::Generic => unreachable!("resolved above"),
        }
    }

    /// [`Sm::plan_memory`] for the matrix loads and stores and `cp.async`: every element's
    /// address (the `wmma` element layout, `ldmatrix` rows of 16 bytes from lanes `8j..8j+8`,
    /// each lane's `cp.async` source) into `matrix_addrs`, then priced or offered like any
    /// access. A `cp.async` reads global memory; its write into shared memory is not priced.
    fn plan_matrix_memory(
        &mut self,
        specs: &Specs,
        memsys: &mut MemorySystem,
        a: &Access,
    ) -> Result<MemPlan, StallReason> {
        use crate::exec::matrix::wmma_element_addr;
        use kir::matrix::{wmma_layout, Frag, WMMA_PART_REGS};
        let (ctx, inst) = (&a.launch.ctx, a.inst);
        let regs = &a.ws.warp.regs;
        let value = |o: Operand, l: usize| -> u64 {
            match o {
                Operand::Reg(r) => regs[r.index() * WARP_SIZE + l],
                Operand::Imm(v) => v,
                Operand::GlobalAddr(g, off) => ctx.global_addrs[g.index()].wrapping_add(off as u64),
                _ => 0,
            }
        };
        let retry = self
            .refused_access
            .is_some_and(|(s, p, _)| (s, p) == (a.slot, a.pc));
        let s = inst.srcs;
        let (space, bytes, kind) = match inst.op {
            Op::WmmaLoad { space, elem, .. } => (space, elem.bits() / 8, AccessKind::Load),
            Op::WmmaStore { space, elem, .. } => (space, elem.bits() / 8, AccessKind::Store),
            Op::Ldmatrix { space, .. } => (space, 16, AccessKind::Load),
            Op::Stmatrix { space, .. } => (space, 16, AccessKind::Store),
            Op::CpAsync { bytes, .. } => (Space::Global, u32::from(bytes), AccessKind::Load),
            // Texels, read through the L1 as global loads (the model has no separate
            // texture pipeline); the first active lane's texture gives the texel size.
            Op::Tex { .. } => {
                let handle = value(s[0], lanes(a.exec).next().unwrap_or(0));
                match crate::texture::by_handle(a.textures, handle) {
                    Some(t) => (Space::Global, t.texel_bytes() as u32, AccessKind::Load),
                    // Not a texture object: the fetch fails when it executes.
                    None => return Ok(MemPlan::None),
                }
            }
            _ => return Ok(MemPlan::None),
        };
        if !retry {
            let mut out = std::mem::take(&mut self.matrix_addrs);
            out.clear();
            let wmma = match inst.op {
                Op::WmmaLoad {
                    shape,
                    frag,
                    elem,
                    row_major,
                    offset,
                    part,
                    ..
                } => Some((
                    shape,
                    frag,
                    elem,
                    row_major,
                    offset,
                    part,
                    u32::from(inst.n_dsts),
                )),
                Op::WmmaStore {
                    shape,
                    elem,
                    row_major,
                    offset,
                    part,
                    ..
                } => Some((
                    shape,
                    Frag::C,
                    elem,
                    row_major,
                    offset,
                    part,
                    u32::from(inst.n_srcs) - 2,
                )),
                _ => None,
            };
            match inst.op {
                _ if wmma.is_some() => {
                    let (shape, frag, elem, row_major, offset, part, n) = wmma.expect("checked");
                    let first = u32::from(part) * WMMA_PART_REGS;
                    // Checked when the instruction was lowered; without a plan it fails when
                    // it executes.
                    let Some(plan) = kir::matrix::wmma_frag_plan(shape, frag, elem) else {
                        return Ok(MemPlan::None);
                    };
                    for l in lanes(a.exec) {
                        let base = value(s[0], l).wrapping_add(offset as i64 as u64);
                        let stride = value(s[1], l) & 0xffff_ffff;
                        for k in 0..n {
                            for i in 0..elem.per_reg() {
                                let at = wmma_layout(plan, frag, elem, l as u32, first + k, i);
                                out.push(Some(wmma_element_addr(
                                    base, stride, row_major, elem, at,
                                )));
                            }
                        }
                    }
                }
                Op::Ldmatrix { count, offset, .. } | Op::Stmatrix { count, offset, .. } => {
                    // Each matrix row once: the rows' addresses come from lanes 8j..8j+8.
                    for l in 0..8 * usize::from(count) {
                        out.push(Some(value(s[0], l).wrapping_add(offset as i64 as u64)));
                    }
                }
                Op::CpAsync {
                    bytes,
                    src_offset,
                    src_size,
                    ignore_src,
                    ..
                } => {
                    for l in lanes(a.exec) {
                        let read = if src_size {
                            value(s[2], l).min(u64::from(bytes))
                        } else if ignore_src && value(s[2], l) != 0 {
                            0
                        } else {
                            u64::from(bytes)
                        };
                        if read > 0 {
                            out.push(Some(value(s[1], l).wrapping_add(src_offset as i64 as u64)));
                        }
                    }
                }
                Op::Tex {
                    geom, cty, gather, ..
                } => {
                    for l in lanes(a.exec) {
                        let Some(t) = crate::texture::by_handle(a.textures, value(s[0], l)) else {
                            continue;
                        };
                        let fp = crate::texture::fetch_footprint(t, geom, cty, gather, |k| {
                            value(s[k], l)
                        });
                        out.extend(fp.taps[..fp.n].iter().filter_map(|tap| tap.0.map(Some)));
                    }
                }
                _ => {}
            }
            // Generic addresses: the window of the first, the offset within it for each.
            if space == Space::Generic {
                for x in out.iter_mut().flatten() {
                    *x = match memory::window(*x) {
                        Window::Global(y)
                        | Window::Shared(y)
                        | Window::Local(y)
                        | Window::Param(y) => y,
                    };
                }
            }
            self.matrix_addrs = out;
        }
        let resolved = match space {
            Space::Generic => {
                let first = lanes(a.exec).next().unwrap_or(0);
                let addr = match inst.op {
                    Op::Ldmatrix { offset, .. }
                    | Op::Stmatrix { offset, .. }
                    | Op::WmmaLoad { offset, .. }
                    | Op::WmmaStore { offset, .. } => {
                        value(s[0], first).wrapping_add(offset as i64 as u64)
                    }
                    _ => 0,
                };
                match memory::window(addr) {
                    Window::Global(_) => Space::Global,
                    Window::Shared(_) => Space::Shared,
                    Window::Local(_) => Space::Local,
                    Window::Param(_) => Space::Param,
                }
            }
            sp => sp,
        };
        if resolved == Space::Local {
            // The local window holds per-thread frames that matrix instructions do not
            // address; such an access faults when it executes.
            return Ok(MemPlan::None);
        }
        self.offer_planned(specs, memsys, a, resolved, bytes, kind, retry, true)
    }

    /// Offers the next part of a split access to the memory system.
    fn drain_backlog(&mut self, memcfg: &MemConfig, memsys: &mut MemorySystem) {
        let Some(b) = &mut self.backlog else {
            return;
        };
        let chunk = chunk_lines(memcfg, b.space, b.kind);
        let end = (b.next + chunk).min(b.lines.len());
        b.part.lines.clear();
        b.part.lines.extend_from_slice(&b.lines[b.next..end]);
        if memsys.offer(self.id.index(), &b.part).is_ok() {
            b.next = end;
            if end == b.lines.len() {
                self.backlog = None;
            }
        }
    }

    /// Completes barriers, retires finished TBs and captures stopped ones into `out`. A TB
    /// whose live warps all wait at barriers that cannot complete is a deadlock.
    pub(super) fn retire(
        &mut self,
        launches: &[Launch],
        now: u64,
        out: &mut Retired,
    ) -> Result<(), ExecError> {
        if !self.retire_due {
            return Ok(());
        }
        // A stopping TB is looked at every cycle: its in-flight work finishes with time.
        self.retire_due = self.stopping > 0;
        while self
            .transfers
            .front()
            .is_some_and(|t| t.next == t.lines.len() && t.outstanding == 0)
        {
            let t = self.transfers.pop_front().expect("checked");
            out.transfers.push(t.id);
        }
        for k in 0..self.tbs.len() {
            let Some(tb) = self.tbs[k].as_mut() else {
                continue;
            };
            let released = tb.bars.release(&mut SlotWarps {
                slots: &tb.slots,
                warps: &mut self.warps,
            });
            if released {
                self.sleep = None;
                for &s in &tb.slots {
                    let w = self.warps[s as usize].as_ref().expect("resident warp");
                    if w.status == WarpStatus::Ready && !w.halted {
                        self.hot[s as usize].state = HotState::Ready;
                    }
                }
            }
            let ws = |s: &u32| self.warps[*s as usize].as_ref().expect("resident warp");
            let done = tb.slots.iter().all(|s| {
                let w = ws(s);
                w.status == WarpStatus::Done && w.outstanding == 0
            });
            if done {
                // A TB that finished before it could stop needs no context saved: its
                // resources go back even if a stop asked to keep them.
                tb.hold = false;
                let executed = tb.slots.iter().map(|s| ws(s).warp.executed).sum::<u64>();
                let tb = self.vacate(k);
                out.finished.push((tb.tb, tb.local_base, executed));
                continue;
            }
            if tb.stop.is_some() {
                for (i, report) in tb.report_warps.iter_mut().enumerate() {
                    let w = self.warps[tb.slots[i] as usize]
                        .as_ref()
                        .expect("resident warp");
                    if *report
                        && w.halted
                        && w.outstanding == 0
                        && w.ready_at.iter().all(|&t| t <= now)
                    {
                        *report = false;
                        out.drained.push((tb.tb, i as u32));
                    }
                }
                if self.quiesced(k, now) {
                    let held = self.tbs[k].as_ref().is_some_and(|t| t.hold);
                    let demand = self.tbs[k].as_ref().expect("resident TB").demand;
                    let context = self.capture(k, now);
                    let hold = held.then(|| self.new_hold(demand));
                    out.evicted.push((context, hold));
                }
                continue;
            }
            let live = tb.slots.iter().filter(|s| ws(s).status != WarpStatus::Done);
            let all_waiting = live
                .clone()
                .all(|s| matches!(ws(s).status, WarpStatus::Waiting(_)));
            if !released && all_waiting && live.count() > 0 {
                let view = SlotWarps {
                    slots: &tb.slots,
                    warps: &mut self.warps,
                };
                let launch = &launches[tb.tb.launch.index()];
                return Err(launch.ptx_error(deadlock(&launch.ctx, tb.ctaid, &view)));
            }
        }
        Ok(())
    }

    /// Whether the stopping TB in slot `k` has nothing left in flight: every warp halted or
    /// finished, every access it issued complete (stores acknowledged), no part of one still
    /// waiting to be offered, and every result written.
    fn quiesced(&self, k: usize, now: u64) -> bool {
        let tb = self.tbs[k].as_ref().expect("resident TB");
        let backlog_is_ours = self.backlog.as_ref().is_some_and(|b| {
            self.pending[b.tag as usize]
                .as_ref()
                .and_then(|p| p.slot)
                .is_some_and(|s| tb.slots.contains(&s))
        });
        !backlog_is_ours
            && tb.slots.iter().all(|&s| {
                let w = self.warps[s as usize].as_ref().expect("resident warp");
                (w.halted || w.status == WarpStatus::Done)
                    && w.outstanding == 0
                    && w.stores == 0
                    && w.ready_at.iter().all(|&t| t <= now)
            })
    }

    /// Takes the TB in slot `k` off the SM, giving its resources back; its warps' accesses
    /// still in flight (stores of finished warps) stay counted for its launch.
    fn vacate(&mut self, k: usize) -> TbSlot {
        let tb = self.tbs[k].take().expect("resident TB");
        for &s in &tb.slots {
            for p in self.pending.iter_mut().flatten() {
                if p.slot == Some(s) {
                    p.slot = None;
                }
            }
            if self.refused_access.is_some_and(|(r, _, _)| r == s as usize) {
                self.refused_access = None;
            }
            self.finishing.retain(|&f| f != s);
            self.warps[s as usize] = None;
            self.hot[s as usize] = WarpHot::EMPTY;
        }
        if tb.stop.is_some() {
            self.stopping -= 1;
        }
        if !tb.hold {
            self.ledger.give(&tb.demand);
        }
        self.infos_stale.fill(true);
        tb
    }

    /// Captures the quiesced TB in slot `k` and takes it off the SM.
    fn capture(&mut self, k: usize, now: u64) -> TbContext {
        let slots = self.tbs[k].as_ref().expect("resident TB").slots.clone();
        let warps = slots
            .iter()
            .map(|&s| {
                let w = self.warps[s as usize].take().expect("resident warp");
                WarpContext {
                    warp: w.warp,
                    status: w.status,
                }
            })
            .collect();
        let tb = self.vacate(k);
        TbContext {
            tb: tb.tb,
            ctaid: tb.ctaid,
            warps,
            shared: tb.shared,
            barriers: tb.bars,
            local_base: tb.local_base,
            from: self.id,
            evicted_at: now,
        }
    }
}

/// A memory instruction being planned: its warp, TB and launch.
struct Access<'a> {
    launch: &'a Launch,
    ws: &'a WarpSlot,
    local_base: u64,
    inst: &'a Inst,
    pc: u32,
    exec: u32,
    slot: usize,
    /// The device's texture objects (handle `k + 1` is `textures[k]`).
    textures: &'a [crate::texture::TextureDesc],
}

/// A resident TB's warps: slots into the SM's warp table.
struct SlotWarps<'a> {
    slots: &'a [u32],
    warps: &'a mut [Option<Box<WarpSlot>>],
}

impl TbWarps for SlotWarps<'_> {
    fn warp_count(&self) -> usize {
        self.slots.len()
    }
    fn get(&self, i: usize) -> (WarpStatus, &Warp) {
        let w = self.warps[self.slots[i] as usize]
            .as_ref()
            .expect("resident warp");
        (w.status, &w.warp)
    }
    fn get_mut(&mut self, i: usize) -> (&mut WarpStatus, &mut Warp) {
        let w = self.warps[self.slots[i] as usize]
            .as_mut()
            .expect("resident warp");
        (&mut w.status, &mut w.warp)
    }
}
