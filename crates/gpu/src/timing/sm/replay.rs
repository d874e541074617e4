//! Squash and replay of faulting accesses (papers/tanasic-thesis §6.2–6.3; every
//! `memsys::Pipeline` but stall, [`memsys::Pipeline::squashes`]), and the operand log
//! (§6.3.3, `Pipeline::OperandLog`).
//!
//! **Entries.** Every global, local or constant access a warp issues with translation on
//! gets a [`ReplayEntry`] in the warp's queue ([`super::warp::WarpSlot::replay`]): the
//! instruction's PC and sequence number, its active lanes, the source operands it read
//! at issue (per source register, every lane) and the lines it sent. The entry leaves
//! the queue at the instruction's last TLB check (its last part accepted and translated),
//! so the queue holds exactly the memory instructions that may still fault: the replay
//! queue of §6.3.2 (and, under the operand log, the log's entries).
//!
//! **Squash.** When the memory system detects that a part faults it squashes it (the part
//! leaves the front end and frees its access slot: other warps' accesses go on) and tells
//! the SM, which puts the part's lines back into the entry and holds the warp: it issues
//! nothing while any squashed part of it waits for its fault. Younger instructions that
//! issued before the detection have executed and are not replayed (sparse replay, §6.2);
//! younger memory instructions that did not fault drain as usual (§6.3.2: "we first
//! drain all the non-faulted in-flight instructions, and then squash all the faulted
//! ones").
//!
//! **Replay.** Once every fault of the warp is serviced, the warp's next issues are the
//! replays of its squashed instructions, oldest first: each takes an issue slot and the
//! LD/ST unit and re-sends the lines that had not completed, under its original tag (its
//! destinations still wait for them). The SM executes every instruction functionally at
//! issue (which keeps results bit-exact under every organisation), so a replay is made
//! *checkable* instead: it recomputes its access from the operands its entry holds, through
//! the same address path as at issue, and the lines must equal those it sent then; and
//! the instruction must still be squashed (never committed). A replay that read the
//! register file as it is now (RAW on replay, §6.2), or replayed a committed instruction,
//! fails the run with an error naming the warp, PC and instruction
//! ([`crate::timing::WrongReplay`] makes each mistake on purpose, for the tests).
//!
//! **Operand log.** Under `OperandLog` sources are not held (the log keeps a copy); an
//! entry takes log bytes — one 128-byte log entry (a 32-bit value per lane) for a load's
//! address, two for a store's or atomic's data and address (§6.3.3) — from its issue to
//! its last TLB check. A memory instruction that does not fit in the SM's log
//! (`operand_log_bytes`) does not issue (`log_full_stalls`). Unlike §6.3.3 the log is one
//! pool per SM, not partitioned per TB.
//!
//! **A TB that leaves with squashed instructions** (a stop, or TB switching on fault,
//! §6.4.1). A squashed instruction is already issued: its replay belongs to it, not to the
//! warp's next instructions. A stopping TB therefore does not wait for its faults: it has
//! quiesced once everything else it issued has completed ([`Sm::drained_but_squashed`]).
//! A TB that stays (`AfterStop::Stay`) keeps its entries and replays them once resumed;
//! one that leaves takes them in its context ([`crate::timing::SquashedAccess`], one
//! list per warp), and its warps replay them first wherever it is installed: the lines are
//! re-sent under a new tag and, should a fault still be outstanding, squashed again and
//! replayed once it is serviced. The squashed access's old tag stays on the SM it left
//! until its faults are serviced (the memory system reports them there; the SM's local
//! TB scheduler reads [`Sm::unserviced`]), and is freed then.

use kir::inst::{Inst, Op, Space};
use kir::Id;
use memsys::{AccessKind, IssueState, LineRequest, MemAccess, Pipeline, Priority, Stall};

use crate::error::ExecError;
use crate::exec::WARP_SIZE;
use crate::memory::DeviceMemory;
use crate::timing::backend::SmMemory;
use crate::timing::context::SquashedAccess;
use crate::timing::ids::{PendingId, TbRef, WarpSlotId};
use crate::timing::launch::Launch;
use crate::timing::probe::{Replay, ReplayReason, Watch};
use crate::timing::stats::StallReason;
use crate::timing::WrongReplay;

use super::ldst::{chunk_lines, Backlog, PendingAccess};
use super::memplan::Access;
use super::warp::{WarpSlot, MEM_PENDING};
use super::{Sm, Specs};

/// Bytes of one operand-log entry: a 32-bit value per lane (§6.3.3).
pub(super) const LOG_ENTRY_BYTES: u32 = 4 * WARP_SIZE as u32;

/// A memory instruction of a warp that may still fault (see the module documentation).
pub(in crate::timing) struct ReplayEntry {
    pub tag: PendingId,
    pub pc: u32,
    /// Warp instructions the warp had issued before it.
    pub seq: u64,
    pub exec: u32,
    /// Its source registers' values at issue, register by register, every lane.
    pub operands: Vec<u64>,
    /// The lines it sent at issue, and its access's kind and space.
    pub lines: Vec<LineRequest>,
    pub kind: AccessKind,
    pub space: memsys::Space,
    /// Lines of its squashed parts, to re-send; squashed parts whose faults are not yet
    /// serviced; whether it waits to be replayed.
    pub resend: Vec<LineRequest>,
    pub faults: u32,
    pub due: bool,
    /// Its last TLB check: the cycle its last page is translated ([`MEM_PENDING`] while
    /// a part is still to be sent, or faulted).
    pub release: u64,
    /// Operand-log bytes it holds until `release`.
    pub log_bytes: u32,
    /// Kept past its last TLB check by [`WrongReplay::Committed`] only.
    pub committed: bool,
}

/// A memory system that refuses everything: the replay check plans an access through it
/// to learn its lines without sending them.
struct Refuse;

impl SmMemory for Refuse {
    fn offer(&mut self, _: &MemAccess) -> Result<(), Stall> {
        Err(Stall::L1Busy)
    }
    fn pop_completed(&mut self) -> Option<memsys::Completion> {
        None
    }
    fn issue_state(&self) -> IssueState {
        IssueState::default()
    }
}

/// Operand-log bytes of memory instruction `inst` (0: it cannot reach the memory system,
/// so it cannot fault).
pub(super) fn log_bytes(inst: &Inst) -> u32 {
    match inst.op {
        Op::Ld {
            space: Space::Shared | Space::Param,
            ..
        }
        | Op::St {
            space: Space::Shared,
            ..
        } => 0,
        Op::Ld { .. }
        | Op::WmmaLoad { .. }
        | Op::Ldmatrix { .. }
        | Op::Tex { .. }
        | Op::CpAsync { .. } => LOG_ENTRY_BYTES,
        _ => 2 * LOG_ENTRY_BYTES,
    }
}

fn pipeline(specs: &Specs) -> Option<Pipeline> {
    specs.memory.translating().map(|t| t.pipeline)
}

impl Sm {
    /// Operand-log bytes held at `now` by the resident warps (and by `extra`, a warp
    /// taken out of its slot while it issues).
    fn log_used(&self, extra: &WarpSlot, now: u64) -> u32 {
        let held = |w: &WarpSlot| -> u32 {
            w.replay
                .iter()
                .filter(|e| e.release > now && !e.committed)
                .map(|e| e.log_bytes)
                .sum()
        };
        self.res
            .warps
            .values()
            .flatten()
            .map(|w| held(w))
            .sum::<u32>()
            + held(extra)
    }

    /// Under the operand log: whether memory instruction `inst` finds room in the log at
    /// `now` (counted as a stall when not).
    pub(super) fn log_has_room(
        &mut self,
        specs: &Specs,
        ws: &WarpSlot,
        inst: &Inst,
        now: u64,
    ) -> bool {
        let Some(t) = specs.memory.translating() else {
            return true;
        };
        if t.pipeline != Pipeline::OperandLog {
            return true;
        }
        let need = log_bytes(inst);
        if need == 0 || self.log_used(ws, now) + need <= t.operand_log_bytes {
            return true;
        }
        self.log_full_stalls += 1;
        // When an entry frees next (for the SM's sleep: nothing else announces it).
        self.log_full_at = now;
        self.log_frees_at = self
            .res
            .warps
            .values()
            .flatten()
            .map(|w| &**w)
            .chain([ws])
            .flat_map(|w| w.replay.iter())
            .filter(|e| e.release > now && !e.committed && e.log_bytes > 0)
            .map(|e| e.release)
            .min()
            .unwrap_or(u64::MAX);
        false
    }

    /// Access `tag` was just issued by warp `ws` (instruction `pc`, lanes `exec`, its
    /// first part accepted): its replay-queue entry, with the operands it read.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn log_entry(
        &mut self,
        specs: &Specs,
        ws: &mut WarpSlot,
        launch: &Launch,
        inst: &Inst,
        pc: u32,
        exec: u32,
        tag: PendingId,
        now: u64,
    ) {
        self.drop_checked(ws, now);
        let mut operands = Vec::new();
        for &r in launch.decoded.sources(pc) {
            let r = r as usize * WARP_SIZE;
            operands.extend_from_slice(&ws.warp.regs[r..r + WARP_SIZE]);
        }
        let p = self.ldst.pending.get(tag).expect("just issued");
        let release = if self.ldst.backlog.is_some() {
            MEM_PENDING
        } else {
            p.translated
        };
        let log_bytes = if pipeline(specs) == Some(Pipeline::OperandLog) {
            log_bytes(inst)
        } else {
            0
        };
        ws.replay.push(ReplayEntry {
            tag,
            pc,
            seq: ws.warp.executed,
            exec,
            operands,
            lines: self.ldst.lines.clone(),
            kind: self.ldst.offer.kind,
            space: self.ldst.offer.space,
            resend: Vec::new(),
            faults: 0,
            due: false,
            release,
            log_bytes,
            committed: false,
        });
        if log_bytes > 0 {
            let used = u64::from(self.log_used(ws, now));
            self.log_peak_bytes = self.log_peak_bytes.max(used);
        }
    }

    /// Drops the entries of `ws` past their last TLB check (the most recent of them kept,
    /// marked committed, under [`WrongReplay::Committed`]).
    fn drop_checked(&mut self, ws: &mut WarpSlot, now: u64) {
        if self.wrong_replay == WrongReplay::Committed {
            let last = ws
                .replay
                .iter()
                .rposition(|e| e.release <= now || e.committed);
            let mut i = 0;
            ws.replay.retain_mut(|e| {
                let keep = e.release > now && !e.committed || Some(i) == last;
                if Some(i) == last {
                    e.committed = true;
                }
                i += 1;
                keep
            });
            return;
        }
        ws.replay.retain(|e| e.release > now);
    }

    /// The entry of access `tag` in `ws`'s queue.
    pub(super) fn entry_of(ws: &mut WarpSlot, tag: PendingId) -> Option<&mut ReplayEntry> {
        ws.replay.iter_mut().find(|e| e.tag == tag && !e.committed)
    }

    /// The memory system squashed part `a` of an access (its fault was detected): its
    /// lines go back into the access's entry, and the warp holds until the fault is
    /// serviced.
    pub(super) fn squashed(&mut self, launches: &[Launch], a: &MemAccess) {
        let tag = PendingId(a.tag as u32);
        let p = self.ldst.pending.get_mut(tag);
        p.parts -= 1;
        p.squashed += 1;
        let (slot, launch) = (p.slot, p.launch);
        let Some(slot) = slot else {
            // The access of a discarded TB (only a discard takes a warp away with a part
            // in flight): counted, so that its fault's notice frees its tag
            // (`serviced_carried`).
            return;
        };
        let w = self.res.warp_mut(slot);
        let e = Sm::entry_of(w, tag).expect("a squashed access has its replay entry");
        e.resend.extend_from_slice(&a.lines);
        e.faults += 1;
        e.release = MEM_PENDING;
        w.faults += 1;
        self.sync(&launches[launch.index()].decoded, slot);
    }

    /// The fault of a squashed part of access `tag` was serviced: once all of its
    /// warp's are, the warp replays.
    pub(super) fn serviced(&mut self, launches: &[Launch], tag: PendingId) {
        let p = self.ldst.pending.get_mut(tag);
        let (slot, launch) = (p.slot, p.launch);
        let Some(slot) = slot else {
            self.serviced_carried(tag);
            return;
        };
        let w = self.res.warp_mut(slot);
        let e = Sm::entry_of(w, tag).expect("a squashed access has its replay entry");
        e.faults -= 1;
        e.due |= e.faults == 0;
        w.faults -= 1;
        if w.faults == 0 {
            self.replays += 1;
        }
        self.sync(&launches[launch.index()].decoded, slot);
    }

    /// A fault of access `tag`, whose TB left the SM, was serviced: once all of them are,
    /// its old tag is free (the TB took the access in its context).
    fn serviced_carried(&mut self, tag: PendingId) {
        let Some(i) = self.carried.iter().position(|c| c.0 == tag) else {
            // A discarded TB's access ([`Sm::abandon`]): nothing replays it, and its old
            // tag is free once every notice has come and every part has completed.
            let p = self.ldst.pending.get_mut(tag);
            p.squashed -= 1;
            if p.squashed == 0 && p.parts == 0 {
                let p = self.ldst.pending.remove(tag);
                self.in_flight[p.launch] -= 1;
            }
            return;
        };
        let p = self.ldst.pending.get_mut(tag);
        p.squashed = p.squashed.saturating_sub(1);
        if p.squashed == 0 && p.parts == 0 {
            let p = self.ldst.pending.remove(tag);
            self.in_flight[p.launch] -= 1;
            self.carried.swap_remove(i);
        }
    }

    /// Whether TB `tb`, which left this SM, still has a squashed access whose fault is not
    /// serviced (§6.4.1: a switched-out TB is switched back in once all its faults are).
    pub(in crate::timing) fn unserviced(&self, tb: TbRef) -> bool {
        self.carried.iter().any(|c| c.1 == tb)
    }

    /// Whether entry `e` is a squashed instruction still to replay (it leaves with its TB).
    fn carries(e: &ReplayEntry) -> bool {
        !e.resend.is_empty() && !e.committed
    }

    /// Whether `w` has nothing in flight but wholly squashed memory instructions (every
    /// part either complete or squashed): a stopping TB need not wait for their faults
    /// (see the module documentation).
    pub(super) fn drained_but_squashed(&self, w: &WarpSlot, now: u64) -> bool {
        if w.drained(now) {
            return true;
        }
        let (mut loads, mut stores) = (0u32, 0u32);
        for e in w.replay.iter().filter(|e| Sm::carries(e)) {
            let Some(p) = self.ldst.pending.get(e.tag) else {
                return false;
            };
            if p.parts > 0 {
                return false;
            }
            if p.waits {
                loads += 1;
            } else {
                stores += 1;
            }
        }
        if loads + stores == 0 || w.outstanding != loads || w.stores != stores {
            return false;
        }
        let waited = |r: usize| {
            w.replay.iter().filter(|e| Sm::carries(e)).any(|e| {
                self.ldst
                    .pending
                    .get(e.tag)
                    .is_some_and(|p| p.waits && p.regs.iter().flatten().any(|x| x.index() == r))
            })
        };
        w.ready_at
            .iter()
            .enumerate()
            .all(|(r, &t)| t <= now || (t == MEM_PENDING && waited(r)))
    }

    /// Takes the squashed instructions of `ws`, whose TB `tb` leaves the SM, into its
    /// context: their old tags stay here until their faults are serviced.
    pub(super) fn carry(&mut self, ws: &mut WarpSlot, tb: TbRef) -> Vec<SquashedAccess> {
        let mut out = Vec::new();
        for e in std::mem::take(&mut ws.replay) {
            if !Sm::carries(&e) {
                continue;
            }
            let p = self.ldst.pending.get_mut(e.tag);
            debug_assert_eq!(p.parts, 0, "a TB leaves once only squashed parts remain");
            // Notices still to come: one per squashed part not yet serviced.
            p.squashed = e.faults;
            let (regs, waits) = (p.regs, p.waits);
            if e.faults == 0 {
                let p = self.ldst.pending.remove(e.tag);
                self.in_flight[p.launch] -= 1;
            } else {
                p.slot = None;
                self.carried.push((e.tag, tb));
            }
            out.push(SquashedAccess {
                pc: e.pc,
                seq: e.seq,
                exec: e.exec,
                operands: e.operands,
                lines: e.lines,
                resend: e.resend,
                kind: e.kind,
                space: e.space,
                regs,
                waits,
                disabled: ws.disabled_by == Some(e.tag),
                holds_sources: ws.held.iter().any(|h| h.2 == Some(e.tag)),
                log_bytes: e.log_bytes,
                faults: e.faults,
            });
        }
        out
    }

    /// Forgets the squashed instructions of `ws`, whose TB is being discarded (flushed):
    /// nothing will replay them, but their old tags stay taken, and their launch in
    /// flight, until the notices of their outstanding faults have come and their parts
    /// still in flight have completed ([`Sm::serviced_carried`], [`Sm::completed`]).
    /// Without this a discarded TB's squashed access kept its launch in flight forever.
    pub(super) fn abandon(&mut self, ws: &mut WarpSlot) {
        for e in std::mem::take(&mut ws.replay) {
            if !Sm::carries(&e) {
                continue;
            }
            let p = self.ldst.pending.get_mut(e.tag);
            // Notices still to come: one per squashed part not yet serviced.
            p.squashed = e.faults;
            if e.faults == 0 && p.parts == 0 {
                let p = self.ldst.pending.remove(e.tag);
                self.in_flight[p.launch] -= 1;
            }
        }
    }

    /// The squashed instructions `carried` of the warp just installed in `slot` wait for
    /// it again, each under a new tag, due to replay first (see the module documentation).
    pub(super) fn reinstate(
        &mut self,
        launch: &Launch,
        slot: WarpSlotId,
        carried: Vec<SquashedAccess>,
        now: u64,
    ) {
        if carried.is_empty() {
            return;
        }
        let mut ws = self.res.warps[slot].take().expect("just placed");
        for a in carried {
            let tag = self.ldst.pending.add(PendingAccess {
                slot: Some(slot),
                launch: ws.launch,
                regs: a.regs,
                waits: a.waits,
                parts: 0,
                transfer: None,
                cp_async: None,
                translated: 0,
                squashed: 1,
            });
            self.in_flight[ws.launch] += 1;
            if a.waits {
                ws.outstanding += 1;
                for r in a.regs.iter().flatten() {
                    ws.ready_at[r.index()] = MEM_PENDING;
                }
            } else {
                ws.stores += 1;
            }
            if a.disabled {
                ws.disabled_by = Some(tag);
                ws.disabled_until = MEM_PENDING;
                ws.disabled_since = now;
            }
            if a.holds_sources {
                for &r in launch.decoded.sources(a.pc) {
                    ws.held.push((r, MEM_PENDING, Some(tag)));
                }
            }
            ws.replay.push(ReplayEntry {
                tag,
                pc: a.pc,
                seq: a.seq,
                exec: a.exec,
                operands: a.operands,
                lines: a.lines,
                kind: a.kind,
                space: a.space,
                resend: a.resend,
                faults: 0,
                due: true,
                release: MEM_PENDING,
                log_bytes: a.log_bytes,
                committed: false,
            });
        }
        self.replays += 1;
        self.res.warps[slot] = Some(ws);
        self.sync(&launch.decoded, slot);
    }

    /// Whether the warp in `slot` issues a replay next.
    pub(super) fn replays_next(&self, slot: WarpSlotId) -> bool {
        self.res.warps[slot]
            .as_deref()
            .is_some_and(|w| w.faults == 0 && w.replay.iter().any(|e| e.due))
    }

    /// Issues the replay of the oldest squashed memory instruction of the warp in `slot`
    /// (see the module documentation). The outer error is a failed replay check; the
    /// inner one a refusal (nothing happened).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn try_replay<P: SmMemory>(
        &mut self,
        launches: &[Launch],
        specs: &Specs,
        memsys: &mut P,
        mem: &DeviceMemory,
        watch: &mut Watch,
        slot: WarpSlotId,
        now: u64,
    ) -> Result<Result<(), StallReason>, ExecError> {
        if self.ldst.backlog.is_some() || self.ldst.refused_at == now || self.ldst.free_at > now {
            return Ok(Err(StallReason::Memory));
        }
        let mut ws = self.res.warps[slot].take().expect("resident");
        let r = self.replay_checked(launches, specs, memsys, mem, watch, &mut ws, slot, now);
        let launch = ws.launch;
        self.res.warps[slot] = Some(ws);
        self.sync(&launches[launch.index()].decoded, slot);
        r
    }

    #[allow(clippy::too_many_arguments)]
    fn replay_checked<P: SmMemory>(
        &mut self,
        launches: &[Launch],
        specs: &Specs,
        memsys: &mut P,
        mem: &DeviceMemory,
        watch: &mut Watch,
        ws: &mut WarpSlot,
        slot: WarpSlotId,
        now: u64,
    ) -> Result<Result<(), StallReason>, ExecError> {
        let launch = &launches[ws.launch.index()];
        self.drop_checked(ws, now);
        let wrong = self.wrong_replay == WrongReplay::Committed;
        let i = ws
            .replay
            .iter()
            .position(|e| e.due || (wrong && e.committed))
            .expect("a replay is due");
        // Check 1: only a squashed instruction replays (a committed one would repeat its
        // effect: sparse replay).
        let (tag, pc, seq) = (ws.replay[i].tag, ws.replay[i].pc, ws.replay[i].seq);
        let fail = |what: String| {
            Err(ExecError::Internal {
                kernel: launch.ctx.kernel.name.clone(),
                what,
            })
        };
        if !ws.replay[i].due || ws.replay[i].resend.is_empty() {
            return fail(format!(
                "warp {} replays pc{pc} (instruction {seq}), which passed its last TLB \
                 check and committed",
                ws.warp.index
            ));
        }
        // Check 2: recomputed from the operands its entry holds (RAW on replay: not from
        // the register file as it is now), its access is the one it sent at issue.
        let lines = self.replan(specs, launch, mem, watch, ws, i, slot, now);
        if lines != ws.replay[i].lines {
            return fail(format!(
                "the replay of pc{pc} (warp {}, instruction {seq}) addresses other lines \
                 than the instruction did at issue: it read operands overwritten since",
                ws.warp.index
            ));
        }
        // Re-send the lines that had not completed, under the original tag.
        let e = &ws.replay[i];
        let chunk = chunk_lines(specs.memory, e.space, e.kind);
        let first = e.resend.len().min(chunk);
        self.ldst.offer.kind = e.kind;
        self.ldst.offer.space = e.space;
        self.ldst.offer.priority = Priority::Normal;
        self.ldst.offer.tag = u64::from(tag.0);
        self.ldst.offer.owner = ws.launch.0;
        self.ldst.offer.lines.clear();
        self.ldst.offer.lines.extend_from_slice(&e.resend[..first]);
        if memsys.offer(&self.ldst.offer).is_err() {
            // The LD/ST unit is held for the cycle, as by any refused access.
            self.ldst.refused_at = now;
            self.ldst.refused = None;
            return Ok(Err(StallReason::Memory));
        }
        watch.memory(self.id, &self.ldst.offer, now);
        let e = &mut ws.replay[i];
        let resend = std::mem::take(&mut e.resend);
        let parts = resend.len().div_ceil(chunk) as u32;
        e.due = false;
        let translated = memsys.last_translated().unwrap_or(0);
        e.release = if parts > 1 { MEM_PENDING } else { translated };
        let p = self.ldst.pending.get_mut(tag);
        p.parts += parts;
        p.squashed = 0;
        p.translated = translated;
        if parts > 1 {
            self.ldst.backlog = Some(Backlog {
                kind: e.kind,
                space: e.space,
                tag,
                next: first,
                part: MemAccess {
                    kind: e.kind,
                    space: e.space,
                    priority: Priority::Normal,
                    lines: Vec::with_capacity(chunk),
                    tag: u64::from(tag.0),
                    owner: ws.launch.0,
                },
                lines: resend,
            });
        } else if translated != MEM_PENDING {
            self.replay_translated(ws, tag, translated, now, specs);
        }
        self.ldst.free_at = now + u64::from(specs.pipeline.ldst_interval.max(1));
        self.replayed_instructions += 1;
        watch.replay(Replay {
            cycle: now,
            sm: self.id,
            launch: ws.launch,
            warp: slot,
            pc,
            seq,
            reason: ReplayReason::Fault,
        });
        Ok(Ok(()))
    }

    /// The access entry `i` of `ws` computes from its entry's operands (from the register
    /// file as it is now under [`WrongReplay::RegisterFile`]): its lines, through the
    /// issue's own address path, sent to a memory system that refuses them.
    #[allow(clippy::too_many_arguments)]
    fn replan(
        &mut self,
        specs: &Specs,
        launch: &Launch,
        mem: &DeviceMemory,
        watch: &mut Watch,
        ws: &mut WarpSlot,
        i: usize,
        slot: WarpSlotId,
        now: u64,
    ) -> Vec<LineRequest> {
        let (pc, exec) = (ws.replay[i].pc, ws.replay[i].exec);
        let srcs = launch.decoded.sources(pc);
        let swap = |ws: &mut WarpSlot| {
            let e = &mut ws.replay[i];
            for (k, &r) in srcs.iter().enumerate() {
                let r = r as usize * WARP_SIZE;
                ws.warp.regs[r..r + WARP_SIZE]
                    .swap_with_slice(&mut e.operands[k * WARP_SIZE..(k + 1) * WARP_SIZE]);
            }
        };
        let from_log = self.wrong_replay != WrongReplay::RegisterFile;
        if from_log {
            swap(ws);
        }
        // The unit's scratch belongs to the access it may be retrying: set aside.
        let saved = (
            std::mem::take(&mut self.ldst.lines),
            self.ldst.refused.take(),
            self.ldst.addrs,
            std::mem::take(&mut self.ldst.matrix_addrs),
        );
        let inst = &launch.ctx.kernel.insts.as_slice()[pc as usize];
        let access = Access {
            launch,
            ws,
            local_base: self.res.tb(ws.tb).local_base,
            inst,
            pc,
            exec,
            slot,
            now,
            textures: mem.textures(),
        };
        // (A global, local or constant access reports nothing to `watch` when refused.)
        let _ = self.plan_memory(specs, &mut Refuse, &access, watch);
        let lines = std::mem::replace(&mut self.ldst.lines, saved.0);
        self.ldst.refused = saved.1;
        self.ldst.addrs = saved.2;
        self.ldst.matrix_addrs = saved.3;
        if from_log {
            swap(ws);
        }
        lines
    }

    /// A replayed access `tag` of `ws` passed its last TLB check at `translated`: its
    /// entry is released then, and so is what holds the warp (WD-lastcheck) or its
    /// sources (replay queue).
    pub(super) fn replay_translated(
        &mut self,
        ws: &mut WarpSlot,
        tag: PendingId,
        translated: u64,
        now: u64,
        specs: &Specs,
    ) {
        if let Some(e) = Sm::entry_of(ws, tag) {
            e.release = translated;
        }
        match pipeline(specs) {
            Some(Pipeline::ReplayQueue) => {
                for h in ws.held.iter_mut().filter(|h| h.2 == Some(tag)) {
                    (h.1, h.2) = (translated, None);
                }
            }
            Some(Pipeline::WdLastcheck) if ws.disabled_by == Some(tag) => {
                ws.disabled_by = None;
                ws.disabled_until = translated;
                self.disabled_cycles += translated.max(now) - ws.disabled_since;
            }
            _ => {}
        }
    }
}
