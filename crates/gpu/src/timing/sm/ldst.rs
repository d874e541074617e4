//! The SM's load-store unit: the accesses it has in flight (by tag), the rest of a warp
//! access too large to send at once, context transfers, and the memory system's last
//! refusal.
//!
//! **Split accesses.** The memory system takes an access whole or not at all, and an access
//! needs an interconnect input-queue slot (and possibly an MSHR) per line, so a scattered
//! warp access (up to 32 lines) is split into parts of at most `chunk` lines. The
//! instruction executes when its first part is accepted; the unit then offers one further
//! part per cycle until none is left, and accepts no other instruction meanwhile
//! (GPGPU-Sim's LD/ST unit likewise serves one instruction's requests over several cycles).
//!
//! **Context transfers** (papers/lin-lightweight §V-A: "context switching requests have lower
//! priority than regular requests"): line-sized accesses at context priority, offered in
//! cycles no warp uses the unit, as a trap routine's coalesced stores and loads would be.

use std::collections::VecDeque;

use kir::inst::MAX_DSTS;
use kir::{Id, Reg};
use memsys::{AccessKind, IssueState, LineRequest, MemAccess, MemConfig, Priority};

use crate::exec::WARP_SIZE;
use crate::timing::backend::SmMemory;
use crate::timing::ids::{LaunchId, PendingId, SmId, TransferId, WarpSlotId};
use crate::timing::probe::Watch;

/// A memory access in flight, by tag.
pub(super) struct PendingAccess {
    /// The warp slot that issued it, or `None` once that warp's TB has left the SM (its
    /// stores may still be in flight when it finishes).
    pub slot: Option<WarpSlotId>,
    pub launch: LaunchId,
    /// Destination registers that wait for it (loads and atomics).
    pub regs: [Option<Reg>; MAX_DSTS],
    /// Whether the warp waits for it (a load or atomic with a destination).
    pub waits: bool,
    /// Parts of the access still in flight.
    pub parts: u32,
    /// The context transfer it belongs to, if any.
    pub transfer: Option<TransferId>,
    /// The warp's `cp.async` group it belongs to, if it is a `cp.async`.
    pub cp_async: Option<u64>,
    /// With translation on: the latest cycle a part offered so far has its last page
    /// translated (`memsys::fault::PENDING` once a part waits for a fault).
    pub translated: u64,
    /// Parts squashed for a fault and not yet replayed (pipelines that replay): the
    /// access is not complete while any is.
    pub squashed: u32,
}

/// Accesses in flight, by tag; freed tags are reused (lowest last freed first).
#[derive(Default)]
pub(super) struct PendingTable {
    entries: Vec<Option<PendingAccess>>,
    free: Vec<u32>,
}

impl PendingTable {
    /// The tag the next access will get.
    #[inline]
    pub fn next_tag(&self) -> PendingId {
        PendingId(
            self.free
                .last()
                .copied()
                .unwrap_or(self.entries.len() as u32),
        )
    }

    /// Adds an access under [`PendingTable::next_tag`].
    #[inline]
    pub fn add(&mut self, p: PendingAccess) -> PendingId {
        match self.free.pop() {
            Some(t) => {
                self.entries[t as usize] = Some(p);
                PendingId(t)
            }
            None => {
                self.entries.push(Some(p));
                PendingId(self.entries.len() as u32 - 1)
            }
        }
    }

    #[inline]
    pub fn get(&self, tag: PendingId) -> Option<&PendingAccess> {
        self.entries.get(tag.index())?.as_ref()
    }

    #[inline]
    pub fn get_mut(&mut self, tag: PendingId) -> &mut PendingAccess {
        self.entries[tag.index()]
            .as_mut()
            .expect("completion of a pending access")
    }

    /// Removes a completed access.
    #[inline]
    pub fn remove(&mut self, tag: PendingId) -> PendingAccess {
        let p = self.entries[tag.index()].take().expect("pending");
        self.free.push(tag.0);
        p
    }

    /// Forgets the warp of every access `slot` issued (its TB left the SM).
    pub fn orphan(&mut self, slot: WarpSlotId) {
        for p in self.entries.iter_mut().flatten() {
            if p.slot == Some(slot) {
                p.slot = None;
            }
        }
    }
}

/// The rest of a split access.
pub(super) struct Backlog {
    pub kind: AccessKind,
    pub space: memsys::Space,
    pub tag: PendingId,
    pub lines: Vec<LineRequest>,
    pub next: usize,
    /// The part being offered (reused).
    pub part: MemAccess,
}

/// A context save or restore in flight on this SM.
pub(super) struct Transfer {
    pub id: TransferId,
    pub kind: AccessKind,
    pub lines: Vec<LineRequest>,
    /// Lines offered so far, and accesses not yet complete.
    pub next: usize,
    pub outstanding: u32,
    pub launch: LaunchId,
    /// No line is offered before this cycle (data still being prepared, e.g. compressed).
    pub not_before: u64,
    /// The access being offered (reused).
    offer: MemAccess,
}

impl Transfer {
    /// Every line sent and acknowledged.
    pub fn complete(&self) -> bool {
        self.next == self.lines.len() && self.outstanding == 0
    }
}

/// The last access the memory system refused: the warp slot and PC that made it, whose
/// lines the unit still holds (the warp has not run since, so its retry reuses them instead
/// of coalescing again), and the memory system's state after the refusal (while it holds,
/// the retry is known to be refused again).
#[derive(Clone, Copy, Debug)]
pub(super) struct Refusal {
    pub slot: WarpSlotId,
    pub pc: u32,
    pub state: IssueState,
    /// Why it was refused (what a repeat counts again).
    pub stall: memsys::Stall,
}

/// The load-store unit of one SM.
pub(super) struct LdSt {
    /// The first cycle it accepts another instruction.
    pub free_at: u64,
    /// The cycle the memory system last refused an access of this SM. The refused
    /// instruction holds the unit for the rest of that cycle: it accepts one instruction per
    /// cycle, and a refused one sits in it as a stalled instruction would.
    pub refused_at: u64,
    pub refused: Option<Refusal>,
    /// The last access offered to the memory system (reused to avoid an allocation).
    pub offer: MemAccess,
    /// The launches' issue rate controllers (CCBP's bandwidth quotas).
    pub rate: super::irc::IssueRate,
    /// The cycle an access was last held back by its launch's issue rate controller. It
    /// does not hold the unit (another warp's access may go that cycle), and the SM wakes
    /// for the controller's next window.
    pub throttled_at: u64,
    pub pending: PendingTable,
    pub backlog: Option<Backlog>,
    /// The warp disable the instruction just offered asks for (warp-disable pipelines,
    /// `memsys::Pipeline`): its access and the first cycle its warp may issue again
    /// (`MEM_PENDING` until the access completes or its last part is translated).
    pub disable: Option<(PendingId, u64)>,
    /// Context transfers, oldest first (served in order), and the next transfer id.
    pub transfers: VecDeque<Transfer>,
    next_transfer: u32,
    // Scratch, reused every access.
    pub addrs: [Option<u64>; WARP_SIZE],
    /// Element addresses of a matrix load or store or a `cp.async`.
    pub matrix_addrs: Vec<Option<u64>>,
    pub lines: Vec<LineRequest>,
}

/// The most lines one part of a warp access may have: what the memory system can accept
/// from an otherwise idle SM (one request-network input slot per line; one MSHR per missing
/// line; with address translation, one L1 TLB MSHR per missing page, which a line is at
/// most).
pub(super) fn chunk_lines(cfg: &MemConfig, space: memsys::Space, kind: AccessKind) -> usize {
    let mut c = cfg.icnt_request.input_buffer;
    if let Some(t) = cfg.translating() {
        c = c.min(t.l1_tlb.mshrs as usize);
    }
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

impl LdSt {
    pub fn new() -> LdSt {
        LdSt {
            free_at: 0,
            refused_at: u64::MAX,
            refused: None,
            rate: super::irc::IssueRate::default(),
            throttled_at: u64::MAX,
            offer: MemAccess {
                kind: AccessKind::Load,
                space: memsys::Space::Global,
                priority: Priority::Normal,
                lines: Vec::with_capacity(64),
                tag: 0,
                owner: 0,
            },
            pending: PendingTable::default(),
            backlog: None,
            disable: None,
            transfers: VecDeque::new(),
            next_transfer: 0,
            addrs: [None; WARP_SIZE],
            matrix_addrs: Vec::new(),
            lines: Vec::with_capacity(64),
        }
    }

    /// Whether it has memory work of its own (a split access, a context transfer) to send
    /// or finish.
    #[inline]
    pub fn has_backlog(&self) -> bool {
        self.backlog.is_some() || !self.transfers.is_empty()
    }

    /// Whether the memory system refused an access of this SM at `now`.
    #[inline]
    pub fn refused_now(&self, now: u64) -> bool {
        self.refused_at == now
    }

    /// Queues a context transfer of `lines` for `launch`; returns its id.
    pub fn transfer(
        &mut self,
        kind: AccessKind,
        lines: Vec<LineRequest>,
        launch: LaunchId,
        not_before: u64,
    ) -> TransferId {
        let id = TransferId(self.next_transfer);
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
                owner: launch.0,
            },
        });
        id
    }

    /// Offers the next part of the oldest context transfer with lines left to send, if no
    /// warp used the unit this cycle.
    pub fn offer_transfer<P: SmMemory>(
        &mut self,
        sm: SmId,
        memcfg: &MemConfig,
        memsys: &mut P,
        watch: &mut Watch,
        now: u64,
    ) {
        if self.backlog.is_some() || self.free_at > now || self.refused_at == now {
            return;
        }
        let tag = self.pending.next_tag();
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
        t.offer.tag = u64::from(tag.0);
        let sent = memsys.noc_requests();
        if memsys.offer(&t.offer).is_err() {
            return;
        }
        // Counted as the launch's traffic; its issue rate controller charges only its
        // warps' own accesses.
        watch.noc_requests(sm, t.launch, memsys.noc_requests() - sent, now);
        watch.memory(sm, &t.offer, now);
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
            translated: 0,
            squashed: 0,
        };
        self.pending.add(p);
        self.free_at = now + 1;
    }

    /// A part of transfer `id` completed.
    pub fn transfer_part_done(&mut self, id: TransferId) {
        let t = self
            .transfers
            .iter_mut()
            .find(|t| t.id == id)
            .expect("a transfer with accesses in flight is queued");
        t.outstanding -= 1;
    }

    /// Removes the completed transfers at the front of the queue, in order.
    pub fn take_completed_transfers(&mut self, out: &mut Vec<TransferId>) {
        while self.transfers.front().is_some_and(Transfer::complete) {
            out.push(self.transfers.pop_front().expect("checked").id);
        }
    }

    /// Offers the next part of a split access to the memory system; returns its access
    /// when the part was accepted.
    pub fn drain_backlog<P: SmMemory>(
        &mut self,
        sm: SmId,
        memcfg: &MemConfig,
        memsys: &mut P,
        watch: &mut Watch,
        now: u64,
    ) -> Option<PendingId> {
        let Some(b) = &mut self.backlog else {
            return None;
        };
        let chunk = chunk_lines(memcfg, b.space, b.kind);
        let end = (b.next + chunk).min(b.lines.len());
        let launch = self.pending.get(b.tag).map(|p| p.launch);
        if let Some(l) = launch {
            if !self.rate.admits(l, now) {
                return None;
            }
        }
        b.part.lines.clear();
        b.part.lines.extend_from_slice(&b.lines[b.next..end]);
        let sent = memsys.noc_requests();
        if memsys.offer(&b.part).is_ok() {
            if let Some(l) = launch {
                let sent = memsys.noc_requests() - sent;
                self.rate.charge(l, sent);
                watch.noc_requests(sm, l, sent, now);
            }
            watch.memory(sm, &b.part, now);
            b.next = end;
            let tag = b.tag;
            if end == b.lines.len() {
                self.backlog = None;
            }
            return Some(tag);
        }
        None
    }

    /// Whether the memory system would refuse the last refused access again, the same way
    /// ([`memsys::IssueState::refuses_again`]).
    #[inline]
    pub fn refusal_holds<P: SmMemory>(&self, memsys: &P) -> bool {
        self.refused
            .is_some_and(|r| memsys.refuses_again(&r.state, r.stall))
    }

    /// Offers the refused access again to a memory system known to refuse it, for the
    /// counters the refusal updates.
    pub fn repeat_refusal<P: SmMemory>(&mut self, memsys: &mut P, now: u64) {
        let stall = self.refused.expect("a refused access").stall;
        memsys.repeat_refusal(&self.offer, stall);
        self.refused_at = now;
    }

    /// Whether the split access in the backlog was issued by the warp in `slot`.
    pub fn backlog_of(&self, slots: &[WarpSlotId]) -> bool {
        self.backlog.as_ref().is_some_and(|b| {
            self.pending
                .get(b.tag)
                .and_then(|p| p.slot)
                .is_some_and(|s| slots.contains(&s))
        })
    }
}
