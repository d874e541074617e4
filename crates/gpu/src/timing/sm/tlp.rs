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
//!   (the live registers of each warp at its stack's PCs, Equation 3.2, compressed as
//!   `regalloc::patterns` proves them unless `compression = false`,
//!   [`Launch::context_bytes`]; or the TB's shared memory, Equation 3.3), through the on-chip port at `port_bytes` per
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
use crate::tlp::{Moved, TlpConfig, TlpCounters, TlpScheme};

use kir::Id;

use super::residency::TbSlot;
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
    /// Resident TBs and warps that are not active, oldest first.
    inactive: Vec<Unit>,
    /// The switch in progress: what comes in (if anything) and the cycle it ends.
    moving: Option<(Option<Unit>, u64)>,
    pub counters: TlpCounters,
}

/// What one switch moves: a whole TB, or one warp of it (`warp`: its index in the TB).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Unit {
    tb: TbRef,
    warp: Option<u32>,
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

    /// Whether `launch`'s TBs switch warp by warp: GPUDuet's, where registers or warp slots
    /// limit it (§3.6.6: "If the limiting context resource is registers and / or warp
    /// slots, warp-level context switching is used").
    fn warp_level(&self, launch: &Launch) -> bool {
        self.cfg.scheme == TlpScheme::Gpuduet && launch.tlp.moved != Moved::SharedMemory
    }
}

/// One warp's share of a TB's demand `d` (no TB slot, no shared memory).
fn warp_share(d: &TbDemand) -> TbDemand {
    let warps = d.warps.max(1);
    TbDemand {
        warps: 1,
        threads: d.threads.div_ceil(warps),
        registers: d.registers / warps,
        shared_memory: 0,
    }
}

impl Sm {
    /// What the active TBs and warps hold: the ledger's count less the inactive units'
    /// demands (less `except`'s too, when given). The TB count leaves out inactive whole
    /// TBs only: a TB with some warps inactive holds its slot.
    fn active_usage(&self, except: Option<Unit>) -> (u32, TbDemand) {
        let l = &self.res.ledger;
        let (mut tbs, mut a) = (
            l.used_tbs,
            TbDemand {
                warps: l.used_warps,
                threads: l.used_threads,
                registers: l.used_registers,
                shared_memory: l.used_shared_memory,
            },
        );
        for u in self.csl.inactive.iter().chain(&except) {
            let Some(k) = self.res.find(u.tb) else {
                continue;
            };
            let d = self.res.tb(k).demand;
            let d = match u.warp {
                None => {
                    tbs -= 1;
                    d
                }
                Some(_) => warp_share(&d),
            };
            a.warps -= d.warps;
            a.threads -= d.threads;
            a.registers -= d.registers;
            a.shared_memory -= d.shared_memory;
        }
        (tbs, a)
    }

    /// What unit `u` needs among the active ones.
    fn unit_demand(&self, u: Unit) -> Option<TbDemand> {
        let d = self.res.tb(self.res.find(u.tb)?).demand;
        Some(match u.warp {
            None => d,
            Some(_) => warp_share(&d),
        })
    }

    /// Whether the active units, less `out`, leave room for `u` in the SM's own resources.
    fn native_room(&self, u: Unit, out: Option<Unit>) -> bool {
        let Some(d) = self.unit_demand(u) else {
            return false;
        };
        let (tbs, a) = self.active_usage(out);
        self.room_beside(tbs, &a, u.warp.is_none(), &d)
    }

    /// Whether `tbs` active TBs holding `a` leave room for `d` (a whole TB when `tb`).
    fn room_beside(&self, tbs: u32, a: &TbDemand, tb: bool, d: &TbDemand) -> bool {
        let l = &self.res.ledger;
        (!tb || tbs < l.max_tbs)
            && a.warps + d.warps <= l.max_warps
            && a.threads + d.threads <= l.max_threads
            && u64::from(a.registers) + u64::from(d.registers) <= u64::from(l.registers)
            && u64::from(a.shared_memory) + u64::from(d.shared_memory) <= u64::from(l.shared_memory)
    }

    /// TB slot `k` was just placed: it (or each of its warps, warp by warp) starts inactive
    /// unless the active ones leave room.
    pub(super) fn tlp_placed(&mut self, launch: &Launch, k: TbSlotId) {
        let tb = self.res.tb(k).tb;
        if self.csl.warp_level(launch) {
            let all: Vec<Unit> = (0..self.res.slots_of(k).len() as u32)
                .map(|w| Unit { tb, warp: Some(w) })
                .collect();
            // The ledger counts the TB already: each warp, inactive while it is looked at,
            // becomes active if the active ones leave it room.
            self.csl.inactive.extend(&all);
            for u in all {
                if self.native_room(u, None) {
                    let i = self.csl.inactive.iter().position(|&x| x == u);
                    self.csl.inactive.remove(i.expect("just added"));
                } else {
                    self.set_absent(launch, u, true);
                }
            }
        } else {
            let u = Unit { tb, warp: None };
            // The ledger counts it already: it fits if the others active leave it room.
            self.csl.inactive.push(u);
            let fits = self.native_room(u, None);
            self.csl.inactive.pop();
            if !fits {
                self.set_absent(launch, u, true);
                self.csl.inactive.push(u);
            }
        }
        self.note_tlp_peaks();
    }

    /// Sets the warps of unit `u` absent or present.
    fn set_absent(&mut self, launch: &Launch, u: Unit, absent: bool) {
        let Some(k) = self.res.find(u.tb) else {
            return;
        };
        for i in 0..self.res.slots_of(k).len() {
            if u.warp.is_some_and(|w| w as usize != i) {
                continue;
            }
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

    /// Whether the warp in `slot` is running and waits at a barrier (`Some(false)`) or for
    /// memory (`Some(true)`); `None` when it could issue, or is under control.
    fn waits(&self, slot: crate::timing::ids::WarpSlotId) -> Option<bool> {
        let w = self.res.warp(slot);
        if w.control != WarpControl::Running {
            return None;
        }
        match w.status {
            WarpStatus::Done => Some(false),
            WarpStatus::Waiting(_) => Some(false),
            WarpStatus::Ready => (self.res.hot[slot].ready == MEM_PENDING).then_some(true),
        }
    }

    /// Whether the active unit of TB `t` (its warp `warp`, or the whole TB) is stalled: the
    /// TB running, every unfinished warp of the unit waiting at a barrier or for memory, at
    /// least one for memory (a warp at a barrier alone may switch out too, §3.6.3's
    /// deadlock avoidance).
    fn stalled(&self, t: &TbSlot, warp: Option<u32>) -> bool {
        if t.control != TbControl::Running {
            return false;
        }
        match warp {
            Some(w) => {
                let s = t.slots[w as usize];
                self.res.warp(s).status != WarpStatus::Done && self.waits(s).is_some()
            }
            None => {
                let mut memory = false;
                let all = t.slots.iter().all(|&s| match self.waits(s) {
                    Some(m) => {
                        memory |= m;
                        true
                    }
                    None => false,
                });
                all && memory
            }
        }
    }

    /// Whether inactive unit `u` is ready: its TB running and none of its warps waiting
    /// for memory (a warp is ready when it could issue once present).
    fn ready(&self, u: Unit) -> bool {
        let Some(k) = self.res.find(u.tb) else {
            return false;
        };
        let t = self.res.tb(k);
        let ready = |s| {
            let w = self.res.warp(s);
            w.control == WarpControl::Running
                && (w.status != WarpStatus::Ready || self.res.hot[s].ready != MEM_PENDING)
        };
        t.control == TbControl::Running
            && match u.warp {
                Some(w) => {
                    let s = t.slots[w as usize];
                    ready(s) && self.res.warp(s).status == WarpStatus::Ready
                }
                None => t.slots.iter().all(|&s| ready(s)),
            }
    }

    /// Bytes a switch of unit `u` moves (see the module documentation).
    fn switch_bytes(&self, launch: &Launch, u: Unit) -> u64 {
        let Some(k) = self.res.find(u.tb) else {
            return 0;
        };
        let t = self.res.tb(k);
        let mut bytes = 0;
        for (i, &s) in t.slots.iter().enumerate() {
            if u.warp.is_some_and(|w| w as usize != i) {
                continue;
            }
            let w = &self.res.warp(s).warp;
            bytes += SCOREBOARD_BYTES + STACK_ENTRY_BYTES * w.stack.len() as u64;
            if launch.tlp.moved == Moved::Registers {
                let mut live = kir::RegSet::with_capacity(launch.ctx.kernel.regs.len());
                let n = launch.ctx.kernel.insts.len() as u32;
                let pcs: Vec<u32> = w.stack.iter().map(|e| e.pc).filter(|&pc| pc < n).collect();
                for &pc in &pcs {
                    live.union_with(&launch.live_in(pc));
                }
                let cap = u64::from(launch.regs_per_thread) * WARP_REGISTER_BYTES;
                bytes += launch
                    .context_bytes(&live, &pcs, self.csl.cfg.compression)
                    .min(cap);
            }
        }
        if launch.tlp.moved == Moved::SharedMemory && u.warp.is_none() {
            bytes += u64::from(t.demand.shared_memory);
        }
        bytes
    }

    /// Under warp-level switching, a finished warp of a TB still running gives up its place
    /// among the active ones (its slot and registers hold nothing the TB needs): it joins
    /// the inactive units, never ready, until its TB leaves. Whether one did.
    fn retire_finished_warps(&mut self, launches: &[Launch]) -> bool {
        let mut done = Vec::new();
        for t in self.res.resident() {
            if !self.csl.warp_level(&launches[t.tb.launch.index()]) {
                continue;
            }
            for (w, &s) in t.slots.iter().enumerate() {
                let ws = self.res.warp(s);
                if ws.status == WarpStatus::Done && !ws.absent {
                    done.push((
                        Unit {
                            tb: t.tb,
                            warp: Some(w as u32),
                        },
                        s,
                    ));
                }
            }
        }
        for &(u, s) in &done {
            self.res.warp_mut(s).absent = true;
            self.csl.inactive.push(u);
        }
        !done.is_empty()
    }

    /// The first stalled active unit (in TB slot order) whose place would give `coming`
    /// room among the active ones (`base`: what they hold now). A unit is active when its
    /// warps are present: an inactive one, or one moving in, has its warps absent.
    fn stalled_for(
        &self,
        launches: &[Launch],
        base: (u32, TbDemand),
        coming: Unit,
        d_in: &TbDemand,
    ) -> Option<Unit> {
        let (tbs, a) = base;
        let fits_without = |d: &TbDemand, tb: bool| {
            let rest = TbDemand {
                warps: a.warps - d.warps,
                threads: a.threads - d.threads,
                registers: a.registers - d.registers,
                shared_memory: a.shared_memory - d.shared_memory,
            };
            self.room_beside(tbs - u32::from(tb), &rest, coming.warp.is_none(), d_in)
        };
        for t in self.res.resident() {
            if t.control != TbControl::Running {
                continue;
            }
            if self.csl.warp_level(&launches[t.tb.launch.index()]) {
                let share = warp_share(&t.demand);
                for (w, &s) in t.slots.iter().enumerate() {
                    let u = Unit {
                        tb: t.tb,
                        warp: Some(w as u32),
                    };
                    if !self.res.warp(s).absent
                        && self.stalled(t, u.warp)
                        && fits_without(&share, false)
                    {
                        return Some(u);
                    }
                }
            } else {
                let u = Unit {
                    tb: t.tb,
                    warp: None,
                };
                let present = t.slots.first().is_some_and(|&s| !self.res.warp(s).absent);
                if present && self.stalled(t, None) && fits_without(&t.demand, true) {
                    return Some(u);
                }
            }
        }
        None
    }

    /// One cycle of the context switching logic (see the module documentation).
    pub(in crate::timing) fn tlp_step(&mut self, launches: &[Launch], now: u64) {
        if !self.csl.on() {
            return;
        }
        // Units whose TBs left (finished, or taken by a mechanism) are forgotten.
        if !self.csl.inactive.is_empty() {
            let res = &self.res;
            self.csl.inactive.retain(|u| res.find(u.tb).is_some());
        }
        if let Some((coming, until)) = self.csl.moving {
            if now < until {
                return;
            }
            self.csl.moving = None;
            if let Some(u) = coming.filter(|u| self.res.find(u.tb).is_some()) {
                self.set_absent(&launches[u.tb.launch.index()], u, false);
                self.csl.counters.switched_in += 1;
                self.note_tlp_peaks();
            }
        }
        if self.csl.inactive.is_empty() {
            return;
        }
        let Some(i) = (0..self.csl.inactive.len()).find(|&i| self.ready(self.csl.inactive[i]))
        else {
            return;
        };
        let coming = self.csl.inactive[i];
        let Some(d_in) = self.unit_demand(coming) else {
            return;
        };
        let mut base = self.active_usage(None);
        if !self.room_beside(base.0, &base.1, coming.warp.is_none(), &d_in)
            && self.retire_finished_warps(launches)
        {
            base = self.active_usage(None);
        }
        let out = if self.room_beside(base.0, &base.1, coming.warp.is_none(), &d_in) {
            None
        } else {
            match self.stalled_for(launches, base, coming, &d_in) {
                Some(o) => Some(o),
                None => return,
            }
        };
        let launch = &launches[coming.tb.launch.index()];
        let mut bytes = self.switch_bytes(launch, coming);
        self.csl.inactive.remove(i);
        if let Some(o) = out {
            let l_out = &launches[o.tb.launch.index()];
            bytes += self.switch_bytes(l_out, o);
            self.set_absent(l_out, o, true);
            self.csl.inactive.push(o);
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
    /// The TBs and warps (index in the TB) absent now: the inactive ones and the one
    /// moving in.
    pub(in crate::timing) fn tlp_absent(&self) -> Vec<(TbRef, Option<u32>)> {
        let mut v = self.csl.inactive.clone();
        v.extend(self.csl.moving.and_then(|(u, _)| u));
        v.into_iter().map(|u| (u.tb, u.warp)).collect()
    }

    pub(in crate::timing) fn tlp_counters(&self) -> TlpCounters {
        self.csl.counters
    }
}
