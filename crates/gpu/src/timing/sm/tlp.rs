//! The SM's context switching logic for extra TBs (papers/lin-thesis §3.6; the schemes and
//! their bounds are [`crate::tlp`]'s).
//!
//! With `[sm.tlp]` on, a launch alone on the SM may keep up to its
//! [`crate::tlp::ExtraTbs`] total resident (the ledger admits them, [`SmLedger::set_tlp`]),
//! but only as many are *active* — their warps schedulable — as the SM's own slots,
//! registers and shared memory hold. The others are *inactive*: their warps are absent
//! ([`WarpSlot::absent`]), so the schedulers pass over them, while their loads complete and
//! their barriers count as usual.
//!
//! The rules, TB-level as Virtual Thread and GPUDuet_TB (Figure 3.13) have them:
//! * a TB placed when the active TBs leave no room for it starts inactive (§3.6.5: a warp
//!   whose contexts are not all present starts *ready*);
//! * an active TB is *stalled* when every warp not finished waits at a barrier or for a
//!   register a memory access fills (a long-latency operation, §3.6.1), at least one of
//!   them for memory; an inactive TB is *ready* when none of its warps waits for memory
//!   (§3.6.6: "all warps, except the ones that are stalled by a barrier ... are ready");
//! * one switch at a time per SM: a stalled TB and the oldest ready one swap, or, where
//!   the active TBs leave room (one finished), the oldest ready TB is switched in;
//! * a switch moves each warp's slot state, and under GPUDuet the kernel's limiting context
//!   (the live registers of each warp at its stack's PCs, 128 bytes each, Equation 3.2, or
//!   the TB's shared memory, Equation 3.3), through the on-chip port at `port_bytes` per
//!   cycle (Equation 3.1); the TB coming in issues when its move ends; the one going out
//!   stops at once (it was stalled).
//!
//! A TB under a control request (a preemption's stop, a routine) is left alone: it is
//! neither switched in nor out, and an inactive TB that leaves the SM is forgotten.
//!
//! [`SmLedger::set_tlp`]: crate::timing::ledger::SmLedger::set_tlp
//! [`WarpSlot::absent`]: super::warp::WarpSlot::absent

use crate::barrier::WarpStatus;
use crate::occupancy::TbDemand;
use crate::timing::control::{TbControl, WarpControl};
use crate::timing::ids::{TbRef, TbSlotId};
use crate::timing::launch::Launch;
use crate::tlp::{Moved, TlpConfig, TlpCounters};

use kir::Id;

use super::warp::MEM_PENDING;
use super::Sm;

/// Bytes of a warp slot's state besides its reconvergence stack (its scoreboard).
const SCOREBOARD_BYTES: u64 = 8;
/// Bytes per reconvergence-stack entry (PC, reconvergence PC, mask: as
/// [`crate::timing::TbContext::sizes`] counts them).
const STACK_ENTRY_BYTES: u64 = 12;
/// Bytes of one warp register (32 lanes of 4 bytes, Equation 3.2).
const WARP_REGISTER_BYTES: u64 = 128;

/// One SM's context switching logic.
#[derive(Default)]
pub(in crate::timing) struct Csl {
    cfg: TlpConfig,
    /// Resident TBs whose warps are absent, oldest first.
    inactive: Vec<TbRef>,
    /// The switch in progress: the TB coming in (if any) and the cycle it ends.
    moving: Option<(Option<TbRef>, u64)>,
    pub counters: TlpCounters,
}

impl Csl {
    pub(super) fn new(cfg: TlpConfig) -> Csl {
        Csl {
            cfg,
            ..Csl::default()
        }
    }

    #[inline]
    pub(super) fn on(&self) -> bool {
        !self.cfg.is_off()
    }
}

impl Sm {
    /// What the active TBs hold: the ledger's count less the inactive TBs' demands (less
    /// `except`'s too, when given).
    fn active_usage(&self, except: Option<TbSlotId>) -> (u32, TbDemand) {
        let l = &self.res.ledger;
        let (mut tbs, mut d) = (
            l.used_tbs,
            TbDemand {
                warps: l.used_warps,
                threads: l.used_threads,
                registers: l.used_registers,
                shared_memory: l.used_shared_memory,
            },
        );
        let inactive = self.csl.inactive.iter().filter_map(|&tb| self.res.find(tb));
        for k in inactive.chain(except) {
            let t = &self.res.tb(k).demand;
            tbs -= 1;
            d.warps -= t.warps;
            d.threads -= t.threads;
            d.registers -= t.registers;
            d.shared_memory -= t.shared_memory;
        }
        (tbs, d)
    }

    /// Whether the active TBs, less `out`, leave room for `d` in the SM's own resources.
    fn native_room(&self, d: &TbDemand, out: Option<TbSlotId>) -> bool {
        let (tbs, a) = self.active_usage(out);
        let l = &self.res.ledger;
        tbs < l.max_tbs
            && a.warps + d.warps <= l.max_warps
            && a.threads + d.threads <= l.max_threads
            && u64::from(a.registers) + u64::from(d.registers) <= u64::from(l.registers)
            && u64::from(a.shared_memory) + u64::from(d.shared_memory) <= u64::from(l.shared_memory)
    }

    /// TB slot `k` was just placed: it starts inactive unless the active TBs leave room.
    pub(super) fn tlp_placed(&mut self, launch: &Launch, k: TbSlotId) {
        let tb = self.res.tb(k).tb;
        if !self.native_room(&launch.demand, Some(k)) {
            self.set_absent(launch, k, true);
            self.csl.inactive.push(tb);
        }
        self.note_tlp_peaks();
    }

    fn set_absent(&mut self, launch: &Launch, k: TbSlotId, absent: bool) {
        for i in 0..self.res.slots_of(k).len() {
            let s = self.res.slots_of(k)[i];
            self.res.warp_mut(s).absent = absent;
            self.sync(&launch.decoded, s);
        }
        self.issue.views_changed();
    }

    fn note_tlp_peaks(&mut self) {
        let (_, active) = self.active_usage(None);
        let c = &mut self.csl.counters;
        c.peak_tbs = c.peak_tbs.max(u64::from(self.res.ledger.used_tbs));
        c.peak_active_warps = c.peak_active_warps.max(u64::from(active.warps));
    }

    /// Whether resident TB `k` is running with every unfinished warp waiting at a barrier
    /// or for memory, at least one for memory.
    fn stalled(&self, k: TbSlotId) -> bool {
        let t = self.res.tb(k);
        if t.control != TbControl::Running {
            return false;
        }
        let mut memory = false;
        let all = t.slots.iter().all(|&s| {
            let w = self.res.warp(s);
            if w.status == WarpStatus::Done {
                return true;
            }
            if w.control != WarpControl::Running {
                return false;
            }
            if matches!(w.status, WarpStatus::Waiting(_)) {
                return true;
            }
            let waits = self.res.hot[s].ready == MEM_PENDING;
            memory |= waits;
            waits
        });
        all && memory
    }

    /// Whether inactive TB `k` is running and none of its warps waits for memory.
    fn ready(&self, k: TbSlotId) -> bool {
        let t = self.res.tb(k);
        t.control == TbControl::Running
            && t.slots.iter().all(|&s| {
                let w = self.res.warp(s);
                w.control == WarpControl::Running
                    && (w.status != WarpStatus::Ready || self.res.hot[s].ready != MEM_PENDING)
            })
    }

    /// Bytes a switch of TB slot `k` moves (see the module documentation).
    fn switch_bytes(&self, launch: &Launch, k: TbSlotId) -> u64 {
        let t = self.res.tb(k);
        let mut bytes = 0;
        for &s in &t.slots {
            let w = &self.res.warp(s).warp;
            bytes += SCOREBOARD_BYTES + STACK_ENTRY_BYTES * w.stack.len() as u64;
            if launch.tlp.moved == Moved::Registers {
                let mut live = kir::RegSet::with_capacity(launch.ctx.kernel.regs.len());
                let n = launch.ctx.kernel.insts.len() as u32;
                for e in w.stack.iter().filter(|e| e.pc < n) {
                    live.union_with(&launch.live_in(e.pc));
                }
                let words = launch.register_words(&live).min(launch.regs_per_thread);
                bytes += u64::from(words) * WARP_REGISTER_BYTES;
            }
        }
        if launch.tlp.moved == Moved::SharedMemory {
            bytes += u64::from(t.demand.shared_memory);
        }
        bytes
    }

    /// One cycle of the context switching logic (see the module documentation).
    pub(in crate::timing) fn tlp_step(&mut self, launches: &[Launch], now: u64) {
        if !self.csl.on() {
            return;
        }
        // TBs that left (finished, or taken by a mechanism) are forgotten.
        if !self.csl.inactive.is_empty() {
            let res = &self.res;
            self.csl.inactive.retain(|&tb| res.find(tb).is_some());
        }
        if let Some((coming, until)) = self.csl.moving {
            if now < until {
                return;
            }
            self.csl.moving = None;
            if let Some(k) = coming.and_then(|tb| self.res.find(tb)) {
                let launch = &launches[self.res.tb(k).tb.launch.index()];
                self.set_absent(launch, k, false);
                self.csl.counters.switched_in += 1;
                self.note_tlp_peaks();
            }
        }
        if self.csl.inactive.is_empty() {
            return;
        }
        let Some((i, k_in)) = self
            .csl
            .inactive
            .iter()
            .enumerate()
            .filter_map(|(i, &tb)| self.res.find(tb).map(|k| (i, k)))
            .find(|&(_, k)| self.ready(k))
        else {
            return;
        };
        let launch = &launches[self.res.tb(k_in).tb.launch.index()];
        let demand = self.res.tb(k_in).demand;
        let out = if self.native_room(&demand, None) {
            None
        } else {
            let stalled = self
                .res
                .tbs
                .iter()
                .filter_map(|(k, t)| t.as_ref().map(|t| (k, t.tb)))
                .filter(|(_, tb)| !self.csl.inactive.contains(tb))
                .find(|&(k, _)| self.stalled(k) && self.native_room(&demand, Some(k)));
            match stalled {
                Some(o) => Some(o),
                None => return,
            }
        };
        let mut bytes = self.switch_bytes(launch, k_in);
        let coming = self.csl.inactive.remove(i);
        if let Some((k_out, tb_out)) = out {
            let l_out = &launches[tb_out.launch.index()];
            bytes += self.switch_bytes(l_out, k_out);
            self.set_absent(l_out, k_out, true);
            self.csl.inactive.push(tb_out);
            self.csl.counters.switched_out += 1;
        }
        let cycles = self.csl.cfg.switch_cycles(bytes);
        self.csl.counters.bytes += bytes;
        self.csl.counters.cycles += cycles;
        self.csl.moving = Some((Some(coming), now + cycles));
    }
}

#[cfg(test)]
impl Sm {
    /// The TBs whose warps are absent now: the inactive ones and the one moving in.
    pub(in crate::timing) fn tlp_absent(&self) -> Vec<TbRef> {
        let mut v = self.csl.inactive.clone();
        v.extend(self.csl.moving.and_then(|(tb, _)| tb));
        v
    }

    pub(in crate::timing) fn tlp_counters(&self) -> TlpCounters {
        self.csl.counters
    }
}
