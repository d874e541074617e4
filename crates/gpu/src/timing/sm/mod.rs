//! One SM: resident TBs and warps of any launches, warp schedulers, the scoreboard,
//! functional units, the load-store unit, and the issue of one instruction per scheduler per
//! cycle. It is built from sub-components that own their state:
//!
//! * [`residency`]: warp and TB slots, the resource ledger, holds;
//! * [`frontend`]: fetch units and the i-cache, register banks;
//! * [`issue`]: the warp schedulers, their views, the functional units' free cycles, the
//!   sleep shortcut, and issuing an instruction;
//! * [`ldst`] and [`memplan`]: accesses in flight, split accesses, context transfers, the
//!   memory system's refusals, and turning a memory instruction into an access;
//! * [`retire`]: barriers, finished TBs, stops that completed;
//! * [`control`]: the SM's side of the control protocol ([`crate::timing::control`]);
//! * [`checkpoint`]: capturing a TB while it runs, and rolling it back.
//!
//! **Residency.** Every slot names its launch, and each launch's accesses in flight are kept
//! here, per SM, and summed by the machine; what the SM does is counted by the machine's
//! statistics probe ([`crate::timing::Counters`]), which hears it through the `Watch` the
//! SM reports to. A TB can be stopped: its warps halt (at once, or each
//! after its next preemption point), the instructions already issued finish (loads return,
//! stores are acknowledged, results are written), and then its state leaves the SM as a
//! [`TbContext`] that [`Sm::install`] puts back on any SM — or it stays, stopped, for
//! routines, checkpoints and rollbacks.
//!
//! **Issue.** Each cycle every scheduler ranks its warps ([`crate::timing::scheduler`]) and
//! issues the first that can: not finished, not waiting at a barrier, none of its next
//! instruction's source or destination registers pending (RAW and WAW through a per-register
//! ready cycle), and its unit free (initiation interval). Issuing executes the instruction
//! functionally ([`crate::exec::step`]) at once, so every value is real; timing only decides
//! *when*.
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
//! **Speed without changing results.** The scheduler reads a compact per-slot `WarpHot`
//! (the decoded next instruction's class and the cycle its registers are ready) that one
//! function derives from the warp after any change ([`Sm::sync`]); LRR and GTO, whose order
//! ignores long waits, check warps only along their order until one issues; and an SM whose
//! cycle would repeat exactly (every warp waits on a load, a barrier, a known hazard cycle,
//! or an access the memory system refused and would refuse again: same `IssueState`)
//! sleeps, charging each cycle the same stall reasons and repeating the refused offer for
//! its counters. Each of these was checked to leave every statistic of the large suite
//! byte-identical.
//!
//! **Front end and operands** ([`crate::pipeline`]): a warp issues only from its
//! instruction buffer, which a fetch through the SM's i-cache fills when it empties or after
//! its PC leaves the sequence (a `Fetch` stall meanwhile); an issued instruction reads its
//! sources through single-ported register banks and a read that waits for its bank delays
//! the result. Operands are read at issue, so no WAR hazard can arise and the scoreboard
//! tracks RAW and WAW only.
//!
//! Simplifications (documented, not hidden): one issue per scheduler per cycle (no dual
//! issue), i-cache misses cost a fixed latency instead of travelling to the L2, writebacks do
//! not compete for register-bank ports, a generic access is classified by its first active
//! lane's window, shared-memory atomics cost their bank-conflict passes only, fences do not
//! wait for outstanding stores.

mod checkpoint;
mod control;
mod frontend;
mod irc;
mod issue;
mod ldst;
mod memplan;
mod replay;
mod residency;
mod retire;
mod switch;
mod tlp;
mod warp;
mod writes;

use kir::{Id, IdVec};
use memsys::{Completion, MemConfig};

use crate::barrier::{Barriers, WarpStatus};
use crate::error::ExecError;
use crate::exec::Warp;
use crate::memory::DeviceMemory;
use crate::occupancy::SmResources;
use crate::pipeline::PipelineSpec;
use crate::timing::backend::SmMemory;
use crate::timing::context::TbContext;
use crate::timing::control::{TbCheckpoint, TbControl, WarpControl};
use crate::timing::decoded::Decoded;
use crate::timing::ids::{HoldId, LaunchId, PendingId, SmId, TbRef, TransferId, WarpSlotId};
use crate::timing::launch::Launch;
use crate::timing::ledger::SmLedger;
use crate::timing::probe::Watch;
use crate::timing::scheduler::AnyScheduler;
use crate::timing::stats::FrontendStats;
use crate::timing::view::{TbProgress, WarpView};

use frontend::FrontEnd;
use issue::IssueStage;
pub(super) use issue::Shortcuts;
use ldst::LdSt;
use residency::{BlockCount, Checkpoints, Residency, TbSlot};
use warp::WarpSlot;

/// The fixed descriptions an SM reads while it issues.
pub(super) struct Specs<'a> {
    pub pipeline: &'a PipelineSpec,
    pub memory: &'a MemConfig,
}

/// What left the SM or completed in one retire step, by kind (the machine turns each into
/// its event, kinds in this order).
#[derive(Default)]
pub(super) struct Retired {
    /// TBs that finished: the TB, its local-memory frame, the warp instructions it
    /// executed and the cycles it spent on the SM since it was (last) placed.
    pub finished: Vec<(TbRef, u64, u64, u64)>,
    /// Warps of stopping TBs that drained: the TB and the warp's index in it.
    pub drained: Vec<(TbRef, u32)>,
    /// TBs that were stopped and whose state was captured, each with the hold that keeps
    /// its resources when it was asked to.
    pub evicted: Vec<(TbContext, Option<HoldId>)>,
    /// Context transfers that completed.
    pub transfers: Vec<TransferId>,
    /// TBs whose stop completed with them staying resident.
    pub stopped: Vec<TbRef>,
    /// Routines whose code ended and whose accesses completed: the TB and warp index.
    pub routines: Vec<(TbRef, u32)>,
    /// Checkpoints whose bytes are in memory.
    pub checkpoints: Vec<TbCheckpoint>,
    /// TBs whose block counts call for a checkpoint.
    pub due: Vec<TbRef>,
    /// TBs switched out on fault by the SM's local scheduler (`switch`), each with the
    /// hold that keeps its resources while its context is saved.
    pub switched: Vec<(TbContext, HoldId)>,
}

impl Retired {
    /// Whether nothing left or completed.
    pub(super) fn is_empty(&self) -> bool {
        self.finished.is_empty()
            && self.drained.is_empty()
            && self.evicted.is_empty()
            && self.transfers.is_empty()
            && self.stopped.is_empty()
            && self.routines.is_empty()
            && self.checkpoints.is_empty()
            && self.due.is_empty()
            && self.switched.is_empty()
    }
}

/// Whether [`Sm::retire`] has anything to look at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RetireDue {
    /// Nothing it looks at has changed since it last ran.
    No,
    Yes,
}

pub(super) struct Sm {
    id: SmId,
    res: Residency,
    front: FrontEnd,
    issue: IssueStage,
    ldst: LdSt,
    ckpt: checkpoint::Checkpointing,
    /// Launches whose TBs count basic-block entries here, each with its interval
    /// ([`crate::timing::Request::CountBlocks`]); usually empty.
    counting: Vec<(LaunchId, u32)>,
    /// TBs whose counts reached the interval this cycle, for [`Sm::retire`] to report.
    due: Vec<TbRef>,
    /// Per launch (by id): its accesses issued to the memory system here and not yet
    /// complete (a launch finishes when none is left on any SM).
    in_flight: IdVec<LaunchId, u64>,
    retire_due: RetireDue,
    /// This cycle's global writes, applied by [`Sm::commit`].
    writes: writes::WriteLog,
    /// Warp disable (`memsys::Pipeline`): instructions that disabled their warp, and
    /// cycles warps spent disabled.
    disables: u64,
    disabled_cycles: u64,
    /// Replay queue: memory instructions whose sources were held.
    source_holds: u64,
    /// Pipelines that replay (`replay`): warps that replayed, instructions replayed,
    /// memory instructions refused for want of operand-log space, the log's peak bytes,
    /// and the deliberate mistake a test asks for.
    replays: u64,
    replayed_instructions: u64,
    log_full_stalls: u64,
    /// The last cycle an instruction found the operand log full, and the earliest cycle
    /// an entry of it frees then (`u64::MAX` when none has a known one: those wait for a
    /// completion, which wakes the SM).
    log_full_at: u64,
    log_frees_at: u64,
    log_peak_bytes: u64,
    wrong_replay: crate::timing::WrongReplay,
    /// Old tags of squashed accesses whose TBs left the SM with them, each with its TB,
    /// until their faults are serviced (`replay`).
    carried: Vec<(PendingId, TbRef)>,
    /// TB switching on fault (`switch`; papers/tanasic-thesis §6.4.1).
    pub(super) switching: switch::SwitchCounters,
    /// Extra TBs beyond the scheduling limits (`tlp`; papers/lin-thesis ch. 3).
    csl: tlp::Csl,
}

impl Sm {
    pub(super) fn new(
        id: SmId,
        resources: &SmResources,
        schedulers: Vec<AnyScheduler>,
        spec: &PipelineSpec,
        shortcuts: Shortcuts,
        tlp: crate::tlp::TlpConfig,
    ) -> Sm {
        let n_sched = schedulers.len();
        // With extra TBs, the warp context table has twice the warp slots
        // (papers/lin-thesis §3.6.4).
        let warp_entries = resources.max_warps as usize * if tlp.is_off() { 1 } else { 2 };
        Sm {
            id,
            res: Residency::new(resources, warp_entries),
            front: FrontEnd::new(spec, n_sched),
            issue: IssueStage::new(schedulers, warp_entries, shortcuts),
            ldst: LdSt::new(),
            ckpt: checkpoint::Checkpointing::default(),
            counting: Vec::new(),
            due: Vec::new(),
            in_flight: IdVec::new(),
            retire_due: RetireDue::No,
            writes: writes::WriteLog::default(),
            disables: 0,
            disabled_cycles: 0,
            source_holds: 0,
            replays: 0,
            replayed_instructions: 0,
            log_full_stalls: 0,
            log_full_at: u64::MAX,
            log_frees_at: u64::MAX,
            log_peak_bytes: 0,
            wrong_replay: crate::timing::WrongReplay::None,
            carried: Vec::new(),
            switching: switch::SwitchCounters::default(),
            csl: tlp::Csl::new(tlp),
        }
    }

    /// Lets `launch` keep up to `total` TBs here while alone (`crate::tlp`).
    pub(super) fn set_tlp(&mut self, launch: LaunchId, total: Option<u32>) {
        self.res.ledger.set_tlp(launch, total);
    }

    /// The same SM, making the deliberate replay mistake `w` (tests only).
    pub(super) fn with_wrong_replay(mut self, w: crate::timing::WrongReplay) -> Sm {
        self.wrong_replay = w;
        self
    }

    /// Applies the cycle's global writes to `mem`, in the order they issued (see
    /// [`writes`]); the machine calls it for every SM in index order after all have issued.
    #[inline]
    pub(super) fn commit(
        &mut self,
        launches: &[Launch],
        mem: &mut DeviceMemory,
    ) -> Result<(), ExecError> {
        if self.writes.is_empty() {
            return Ok(());
        }
        let warps = &mut self.res.warps;
        let r = self.writes.apply(mem, |slot, dest, old| {
            // The warp is still resident: nothing leaves an SM between issue and commit.
            if let Some(ws) = warps[slot].as_mut() {
                ws.warp.regs[dest as usize] = old;
            }
        });
        r.map_err(|(slot, f)| {
            let launch = self.res.warps[slot].as_ref().map(|w| w.launch);
            let name = launch.map_or("?", |l| launches[l.index()].ctx.kernel.name.as_str());
            writes::refused(name, f)
        })
    }

    pub(super) fn ledger(&self) -> &SmLedger {
        &self.res.ledger
    }

    pub(super) fn is_empty(&self) -> bool {
        self.res.ledger.is_empty()
    }

    /// Warp slots held by resident TBs. Under `[sm.tlp]` the ledger also holds the extra
    /// TBs, whose warps are absent while inactive: only the present ones hold the SM's
    /// warp slots, so achieved occupancy stays a share of them (at most 1).
    pub(super) fn resident_warps(&self) -> u32 {
        let used = self.res.ledger.used_warps;
        if !self.csl.on() {
            return used;
        }
        let absent = self
            .res
            .warps
            .iter()
            .filter(|(_, w)| w.as_ref().is_some_and(|w| w.absent))
            .count() as u32;
        debug_assert!(absent <= used, "absent warps belong to resident TBs");
        used.saturating_sub(absent)
    }

    /// The resident TBs and their control states.
    pub(super) fn resident(&self) -> impl Iterator<Item = (TbRef, TbControl)> + '_ {
        self.res.resident().map(|t| (t.tb, t.control))
    }

    /// The warps of resident TB `tb`.
    pub(super) fn warps_of(&self, tb: TbRef) -> Option<Vec<WarpView>> {
        let k = self.res.find(tb)?;
        Some(
            self.res
                .slots_of(k)
                .iter()
                .map(|&s| {
                    let w = self.res.warp(s);
                    let pcs: Vec<u32> = w
                        .warp
                        .stack
                        .iter()
                        .rev()
                        .filter(|e| e.mask != 0 && e.pc != e.rpc)
                        .map(|e| e.pc)
                        .collect();
                    let live_entries = pcs.len();
                    WarpView {
                        index: w.warp.index,
                        pc: w.warp.next_entry().map(|e| e.pc),
                        pcs,
                        at_barrier: matches!(w.status, WarpStatus::Waiting(_)),
                        diverged: live_entries > 1,
                        control: w.control.clone(),
                        done: w.status == WarpStatus::Done,
                        executed: w.warp.executed,
                        lanes: (w.warp.valid & !w.warp.exited).count_ones(),
                        dirty: w.dirty.clone(),
                    }
                })
                .collect(),
        )
    }

    /// Whether the SM still has memory work of its own (a split access, a context
    /// transfer) to send or finish.
    pub(super) fn has_backlog(&self) -> bool {
        self.ldst.has_backlog()
    }

    /// `launch`'s accesses issued here and not yet complete.
    pub(super) fn in_flight(&self, launch: LaunchId) -> u64 {
        self.in_flight.get(launch).copied().unwrap_or_default()
    }

    /// Front-end counters so far.
    pub(super) fn frontend_stats(&self) -> FrontendStats {
        FrontendStats {
            warp_disables: self.disables,
            disabled_cycles: self.disabled_cycles,
            source_holds: self.source_holds,
            replays: self.replays,
            replayed_instructions: self.replayed_instructions,
            log_full_stalls: self.log_full_stalls,
            log_peak_bytes: self.log_peak_bytes,
            tbs_switched_out: self.switching.out,
            tbs_switched_in: self.switching.resumed,
            switch_cycles: self.switching.cycles,
            switched_out_peak: self.switching.peak,
            tlp: self.csl.counters,
            ..self.front.stats()
        }
    }

    /// What the SM's counters know of resident TB `tb`'s progress.
    pub(super) fn progress(&self, tb: TbRef) -> Option<TbProgress> {
        let t = self.res.tb(self.res.find(tb)?);
        let executed = t
            .slots
            .iter()
            .map(|&s| self.res.warp(s).warp.executed)
            .sum();
        Some(TbProgress {
            placed_at: t.placed_at,
            executed,
            executed_here: executed - t.executed_at_placement,
            repeatable: t.checkpoints.latest.is_some() && t.checkpoints.hazard.is_none(),
        })
    }

    /// From now on, TBs of `launch` here count their warps' basic-block entries and call
    /// for a checkpoint when a warp has entered one block `every` times since the TB's last
    /// checkpoint (0: they stop counting).
    pub(super) fn count_blocks(&mut self, launch: LaunchId, every: u32) {
        self.counting.retain(|(l, _)| *l != launch);
        if every > 0 {
            self.counting.push((launch, every));
        }
        for k in self.res.tbs.ids() {
            if let Some(t) = self.res.tbs[k].as_mut() {
                if t.tb.launch == launch {
                    t.blocks = BlockCount::default();
                }
            }
        }
    }

    /// Warp `index` of resident TB `tb`, if it is halted by its TB, held or finished (its
    /// registers no longer change).
    pub(super) fn idle_warp(&self, tb: TbRef, index: u32) -> Option<&Warp> {
        let k = self.res.find(tb)?;
        let w = self.res.warps[*self.res.slots_of(k).get(index as usize)?].as_ref()?;
        w.idle().then_some(&w.warp)
    }

    /// Whether nothing runs or is being moved here: no TB resident, no transfer, and every
    /// hold parked.
    pub(super) fn vacated(&self) -> bool {
        self.res.vacated() && self.ldst.transfers.is_empty()
    }

    pub(super) fn settled(&self) -> bool {
        self.res.settled() && self.ldst.transfers.is_empty()
    }

    /// Recomputes what the issue stage reads of `slot` from its warp — the one place that
    /// does, after any change to the warp's progress, scoreboard or control state — and
    /// lets the SM notice: a warp that comes, goes, halts or resumes changes the
    /// schedulers' views; any change may end a sleep.
    #[inline]
    fn sync(&mut self, decoded: &Decoded, slot: WarpSlotId) {
        let was_live = self.res.hot[slot].live();
        self.res.hot[slot].derive(
            self.res.warps[slot].as_deref(),
            decoded,
            self.front.stalling_banks(),
        );
        if self.res.hot[slot].live() != was_live {
            self.issue.views_changed();
        }
        self.issue.touched(slot);
    }

    /// Whether [`Sm::retire`] has something to look at.
    #[inline]
    fn retire_due(&self) -> bool {
        self.retire_due != RetireDue::No
    }

    /// Something [`Sm::retire`] looks at changed.
    #[inline]
    fn retire_soon(&mut self) {
        self.retire_due = RetireDue::Yes;
    }

    /// Takes the TB's resources and the lowest free TB slot and warp slots; the new slots'
    /// warps are built by `warp(i)` for the TB's warp `i` (with their control state).
    fn place(
        &mut self,
        launch: &Launch,
        tb: TbRef,
        ctaid: [u32; 3],
        shared: Vec<u8>,
        bars: Barriers,
        local_base: u64,
        now: u64,
        control: TbControl,
        mut warp: impl FnMut(u32) -> (Warp, WarpStatus, WarpControl),
    ) -> crate::timing::ids::TbSlotId {
        debug_assert!(self.res.ledger.fits_for(tb.launch, &launch.demand));
        self.res.ledger.take_for(tb.launch, &launch.demand);
        let (k, slots) = self.res.free_slots(launch.demand.warps as usize);
        let regs = launch.ctx.kernel.regs.len();
        for (i, &s) in slots.iter().enumerate() {
            let (w, status, control) = warp(i as u32);
            let mut ws = WarpSlot::new(w, status, tb.launch, k, regs);
            ws.control = control;
            self.res.warps[s] = Some(Box::new(ws));
            self.res.hot[s].age = self.res.next_age;
            self.res.next_age += 1;
            self.sync(&launch.decoded, s);
            self.front.fill_buffer(&mut self.res.hot[s], s, now);
        }
        let executed_at_placement = slots.iter().map(|&s| self.res.warp(s).warp.executed).sum();
        self.res.tbs[k] = Some(TbSlot {
            tb,
            ctaid,
            shared,
            slots,
            bars,
            local_base,
            control,
            demand: launch.demand,
            placed_at: now,
            executed_at_placement,
            checkpoints: Checkpoints::default(),
            blocks: BlockCount::default(),
            switch_out: false,
        });
        while self.in_flight.len() <= tb.launch.index() {
            self.in_flight.push(0);
        }
        self.issue.views_changed();
        // A TB restored at a barrier may find it already complete.
        self.retire_soon();
        if self.csl.on() {
            self.tlp_placed(launch, k);
        }
        k
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
            TbControl::Running,
            |i| (Warp::new(ctx, i), WarpStatus::Ready, WarpControl::Running),
        );
    }

    /// Installs a stopped TB's state (the caller checked that it fits); it continues where
    /// it stopped, at once or (`stopped`) once resumed.
    pub(super) fn install(
        &mut self,
        launch: &Launch,
        context: Box<TbContext>,
        control: TbControl,
        now: u64,
    ) {
        let TbContext {
            tb,
            ctaid,
            warps,
            shared,
            barriers,
            local_base,
            ..
        } = *context;
        let warp_control = match control {
            TbControl::Stopped => WarpControl::Halted,
            _ => WarpControl::Running,
        };
        let mut warps = warps.into_iter();
        let mut carried = Vec::new();
        let k = self.place(
            launch,
            tb,
            ctaid,
            shared,
            barriers,
            local_base,
            now,
            control,
            |_| {
                let w = warps.next().expect("one context per warp");
                carried.push(w.replays);
                (w.warp, w.status, warp_control.clone())
            },
        );
        // Its squashed instructions wait for it again (`replay`).
        for (i, c) in carried.into_iter().enumerate() {
            let s = self.res.slots_of(k)[i];
            self.reinstate(launch, s, c, now);
        }
        // Where its registers were saved before is the mechanism's business: to the next
        // checkpoint or save, every one of them is dirty.
        for i in 0..self.res.slots_of(k).len() {
            let s = self.res.slots_of(k)[i];
            let w = self.res.warps[s].as_mut().expect("resident warp");
            w.dirty.fill(u64::MAX);
        }
    }

    /// Sets what `launch` may hold and issue here.
    pub(super) fn set_limits(&mut self, launch: LaunchId, limits: crate::timing::KernelLimits) {
        self.res.ledger.set_limits(launch, limits);
        self.issue.set_quota(launch, limits.issue_quota);
        self.ldst.rate.set(launch, limits.noc_quota);
    }

    /// Queues a context transfer of `lines` (stores for a save, loads for a restore) for
    /// `launch`, none offered before `not_before`.
    pub(super) fn transfer(
        &mut self,
        kind: memsys::AccessKind,
        lines: Vec<memsys::LineRequest>,
        launch: LaunchId,
        not_before: u64,
    ) -> TransferId {
        let id = self.ldst.transfer(kind, lines, launch, not_before);
        self.issue.wake();
        self.retire_soon();
        id
    }

    /// Releases the registers of completed accesses (the loop inlined into the machine's
    /// cycle; the work per completion out of line, as most SM cycles complete nothing).
    #[inline]
    pub(super) fn complete<P: SmMemory>(
        &mut self,
        memsys: &mut P,
        launches: &[Launch],
        watch: &mut Watch,
        now: u64,
    ) {
        while let Some(c) = memsys.pop_completed() {
            self.completed(&c, launches, watch, now);
        }
        while let Some(a) = memsys.pop_squashed() {
            self.squashed(launches, &a);
        }
        while let Some(tag) = memsys.pop_serviced() {
            self.serviced(launches, PendingId(tag as u32));
        }
    }

    #[inline(never)]
    fn completed(&mut self, c: &Completion, launches: &[Launch], watch: &mut Watch, now: u64) {
        let tag = PendingId(c.tag as u32);
        let p = self.ldst.pending.get_mut(tag);
        let (launch, waits) = (p.launch, p.waits);
        if waits {
            watch.load_done(self.id, launch, c.latency(), now);
        }
        p.parts -= 1;
        if p.parts > 0 || p.squashed > 0 {
            return;
        }
        let p = self.ldst.pending.remove(tag);
        if let Some(id) = p.transfer {
            self.ldst.transfer_part_done(id);
            self.retire_soon();
            return;
        }
        self.in_flight[launch] -= 1;
        let Some(slot) = p.slot else {
            return;
        };
        let decoded = &launches[launch.index()].decoded;
        let w = self.res.warp_mut(slot);
        if w.disabled_by == Some(tag) {
            // Warp disable: the access committed (or, under WD-lastcheck, was translated
            // after a fault), so the warp may issue again.
            w.disabled_by = None;
            w.disabled_until = 0;
            self.disabled_cycles += now - w.disabled_since;
            self.sync(decoded, slot);
        }
        let w = self.res.warp_mut(slot);
        if w.held.iter().any(|h| h.2 == Some(tag)) {
            // Replay queue: an access translated after a fault releases its sources (at
            // its completion, the first the SM hears of it).
            for h in w.held.iter_mut().filter(|h| h.2 == Some(tag)) {
                (h.1, h.2) = (now, None);
            }
            self.sync(decoded, slot);
        }
        let w = self.res.warp_mut(slot);
        if !waits {
            w.stores -= 1;
            let draining = w.control == WarpControl::RoutineDraining;
            if let Some(group) = p.cp_async {
                // A warp may be waiting for the group.
                w.cp_async.completed(group);
                self.sync(decoded, slot);
            }
            if self.res.stopping > 0 || draining {
                self.retire_soon();
            }
            return;
        }
        for r in p.regs.iter().flatten() {
            w.ready_at[r.index()] = now;
        }
        w.outstanding -= 1;
        // Retirement can change only for a finished warp (its TB leaves once no load is
        // outstanding): barriers release on arrivals, the deadlock check reads statuses,
        // and a stopping TB or a draining routine has the retire stage look every cycle.
        let finished = w.status == WarpStatus::Done;
        self.sync(decoded, slot);
        if finished {
            self.retire_soon();
        }
    }
}
