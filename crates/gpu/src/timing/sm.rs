//! One SM: resident TBs and warps, warp schedulers, the scoreboard, functional units, and
//! the issue of one instruction per scheduler per cycle.
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
//! **Local memory** has no address in device memory; for the memory system a thread's local
//! word `w` of warp `g` (global warp index) lane `l` is placed at
//! `LOCAL_WINDOW + ((g × frame_words + w) × 32 + l) × 4`, interleaved by lane as CUDA lays out
//! local memory, so a warp reading one local variable touches one line.
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
use kir::{Id, Reg};
use memsys::{
    coalesce::shared_bank_conflicts_with, coalesce_into, AccessKind, IssueState, LineRequest,
    MemAccess, MemConfig, MemorySystem, Priority,
};

use super::frontend::{FetchUnit, RegisterBanks};
use super::scheduler::{AnyScheduler, WarpInfo, WarpScheduler};
use super::spec::{OpClass, PipelineSpec, Unit};
use super::stats::{FrontendStats, SmStats, StallReason};
use crate::barrier::{deadlock, Barriers, TbWarps, WarpStatus};
use crate::error::ExecError;
use crate::exec::{guard_mask, step, LaunchCtx, Step, TbView, Warp, WARP_SIZE};
use crate::memory::{self, DeviceMemory, Window};

/// A register waiting for a memory access (released by its completion).
const MEM_PENDING: u64 = u64::MAX;
/// Tag of accesses whose completion nobody waits for.
const NO_TAG: u64 = u64::MAX;

/// A resident warp.
pub(super) struct WarpSlot {
    pub warp: Warp,
    /// The TB slot it belongs to.
    pub tb: u32,
    pub status: WarpStatus,
    /// Per register: the first cycle at which it may be read or written again
    /// ([`MEM_PENDING`] while a load fills it).
    ready_at: Vec<u64>,
    /// Loads and atomics in flight.
    outstanding: u32,
}

/// What the issue stage reads of a warp slot every cycle, kept apart from the warp's
/// registers and stack so that scanning an SM's warps touches one small array (the hardware
/// keeps the same facts beside the scheduler: the decoded next instruction in the instruction
/// buffer and its scoreboard state). It is derived from the [`WarpSlot`] and refreshed
/// whenever something it depends on changes: the warp's own issue (next instruction, ready
/// cycles of its destinations), a completion (ready cycles), a barrier release, dispatch and
/// retirement.
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
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum HotState {
    Empty,
    Ready,
    Waiting,
    Done,
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
    };

    /// Whether the slot holds a warp that has not finished.
    fn live(&self) -> bool {
        matches!(self.state, HotState::Ready | HotState::Waiting)
    }
}

/// A resident TB.
pub(super) struct TbSlot {
    /// Device address of the TB's local memory.
    local_base: u64,
    ctaid: [u32; 3],
    shared: Vec<u8>,
    slots: Vec<u32>,
    bars: Barriers,
}

struct PendingLoad {
    slot: u32,
    regs: [Option<Reg>; MAX_DSTS],
    /// Parts of the access still in flight (see [`Backlog`]).
    parts: u32,
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
}

/// Launch-wide facts and counters the SMs share.
pub(super) struct Env<'a> {
    pub ctx: &'a LaunchCtx,
    pub spec: &'a PipelineSpec,
    pub memcfg: &'a MemConfig,
    /// Local memory per thread in 4-byte words.
    pub frame_words: u64,
    /// Bytes of a TB's local memory, and where each (SM, TB slot)'s lies.
    pub frame_bytes: u64,
    pub frames: Vec<u64>,
    pub global_loads: u64,
    pub load_latency: u64,
    pub shared_accesses: u64,
    pub shared_passes: u64,
    pub warp_instructions: u64,
    pub thread_instructions: u64,
    pub decoded: Decoded,
}

/// What the issue stage needs of each instruction, decoded once per launch (as the hardware
/// decodes into its instruction buffer): the operation class, and the registers the
/// scoreboard looks up (sources, then destinations).
pub(super) struct Decoded {
    class: Vec<OpClass>,
    /// Per instruction: where its registers start in `regs`, how many there are, and how
    /// many of them are sources (they come first).
    spans: Vec<(u32, u32, u32)>,
    regs: Vec<u32>,
}

impl Decoded {
    pub(super) fn of(kernel: &kir::Kernel) -> Decoded {
        let insts = kernel.insts.as_slice();
        let mut d = Decoded {
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

/// What the checks of one cycle found about sleeping (see [`Sm::sleep`]).
struct SleepCheck {
    /// Every warp checked so far waits on something only a completion, a new TB, `wake` or
    /// a change in the memory system's answer to the refused access can change, and nothing
    /// issued.
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
    id: u32,
    /// Warp slots (boxed: a warp leaves its slot while it issues, and moving a pointer is
    /// cheaper than moving the warp).
    warps: Vec<Option<Box<WarpSlot>>>,
    hot: Vec<WarpHot>,
    tbs: Vec<Option<TbSlot>>,
    warps_per_tb: u32,
    scheds: Vec<AnyScheduler>,
    sp_free: Vec<u64>,
    sfu_free: u64,
    fetch: FetchUnit,
    banks: RegisterBanks,
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
    /// load complete); until then `retire` would find nothing to do.
    retire_due: bool,
    /// Each scheduler's stall reason in the last fully evaluated cycle (what `sleep` charges).
    stall_reasons: Vec<StallReason>,
    pending: Vec<Option<PendingLoad>>,
    free_pending: Vec<u32>,
    backlog: Option<Backlog>,
    next_age: u64,
    resident_tbs: u32,
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
        id: u32,
        tbs_per_sm: u32,
        warps_per_tb: u32,
        schedulers: Vec<AnyScheduler>,
        spec: &PipelineSpec,
        shortcuts: bool,
    ) -> Sm {
        let n_warps = (tbs_per_sm * warps_per_tb) as usize;
        let n_sched = schedulers.len();
        Sm {
            id,
            warps: (0..n_warps).map(|_| None).collect(),
            hot: vec![WarpHot::EMPTY; n_warps],
            tbs: (0..tbs_per_sm).map(|_| None).collect(),
            warps_per_tb,
            scheds: schedulers,
            sp_free: vec![0; n_sched],
            sfu_free: 0,
            fetch: FetchUnit::new(&spec.fetch),
            banks: RegisterBanks::new(spec.register_banks),
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
                tag: NO_TAG,
            },
            finishing: Vec::new(),
            retire_due: false,
            stall_reasons: Vec::with_capacity(n_sched),
            pending: Vec::new(),
            free_pending: Vec::new(),
            backlog: None,
            next_age: 0,
            resident_tbs: 0,
            infos: vec![Vec::with_capacity(n_warps); n_sched],
            infos_stale: vec![true; n_sched],
            checks: vec![Check::Ready; n_warps],
            orders: vec![Vec::with_capacity(n_warps); n_sched],
            order_valid: vec![false; n_sched],
            addrs: [None; WARP_SIZE],
            lines: Vec::with_capacity(64),
            stats: SmStats {
                schedulers: vec![Default::default(); n_sched],
                ..Default::default()
            },
        }
    }

    pub(super) fn has_free_tb_slot(&self) -> bool {
        self.tbs.iter().any(Option::is_none)
    }

    pub(super) fn is_empty(&self) -> bool {
        self.resident_tbs == 0
    }

    /// Warp slots held by resident TBs.
    pub(super) fn resident_warps(&self) -> u32 {
        self.resident_tbs * self.warps_per_tb
    }

    /// Places TB `linear` in a free TB slot (the caller checked there is one). TB slot `k`
    /// owns warp slots `k × warps_per_tb ..`; warp slot `s` belongs to scheduler `s mod n`.
    pub(super) fn dispatch(&mut self, env: &Env, mem: &mut DeviceMemory, linear: u64, now: u64) {
        let (ctx, decoded) = (env.ctx, &env.decoded);
        let k = self
            .tbs
            .iter()
            .position(Option::is_none)
            .expect("caller checked for a free TB slot");
        let local_base = if env.frame_bytes == 0 {
            0
        } else {
            let base = env.frames[self.id as usize * self.tbs.len() + k];
            mem.write_bytes(base, &vec![0; env.frame_bytes as usize])
                .expect("frames are allocated for every TB slot");
            base
        };
        let first = k as u32 * self.warps_per_tb;
        let slots: Vec<u32> = (first..first + self.warps_per_tb).collect();
        for (i, &s) in slots.iter().enumerate() {
            self.warps[s as usize] = Some(Box::new(WarpSlot {
                warp: Warp::new(ctx, i as u32),
                tb: k as u32,
                status: WarpStatus::Ready,
                ready_at: vec![0; ctx.kernel.regs.len()],
                outstanding: 0,
            }));
            self.hot[s as usize].age = self.next_age;
            self.next_age += 1;
            self.refresh(decoded, s as usize);
            self.fill_buffer(s as usize, now);
        }
        self.tbs[k] = Some(TbSlot {
            local_base,
            ctaid: ctx.ctaid(linear),
            shared: vec![0; ctx.smem_size as usize],
            slots,
            bars: Barriers::default(),
        });
        self.stats.tbs += 1;
        self.resident_tbs += 1;
        self.infos_stale.fill(true);
        self.sleep = None;
    }

    /// Releases the registers of completed accesses.
    pub(super) fn complete(&mut self, memsys: &mut MemorySystem, env: &mut Env, now: u64) {
        while let Some(c) = memsys.pop_completed(self.id as usize) {
            if c.tag == NO_TAG {
                continue;
            }
            env.global_loads += 1;
            env.load_latency += c.latency();
            let p = self.pending[c.tag as usize]
                .as_mut()
                .expect("completion of a pending load");
            p.parts -= 1;
            if p.parts > 0 {
                continue;
            }
            let p = self.pending[c.tag as usize].take().expect("checked above");
            self.free_pending.push(c.tag as u32);
            let w = self.warps[p.slot as usize]
                .as_mut()
                .expect("a warp with loads in flight stays resident");
            for r in p.regs.iter().flatten() {
                w.ready_at[r.index()] = now;
            }
            w.outstanding -= 1;
            self.refresh(&env.decoded, p.slot as usize);
            self.sleep = None;
            self.retire_due = true;
        }
    }

    /// One cycle of every warp scheduler.
    pub(super) fn issue(
        &mut self,
        env: &mut Env,
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
        self.drain_backlog(env, memsys);
        let n = self.scheds.len();
        // Whether this cycle can repeat unchanged (see `sleep`), and until when.
        let mut sleep = SleepCheck {
            possible: self.backlog.is_none(),
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
                    let age = h.age;
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
                        match self.try_issue(env, memsys, mem, slot, s, now)? {
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
        Check::Ready
    }

    /// Whether the memory system is still in the state in which it refused `refused_access`
    /// (so that it would refuse the same offer again).
    fn refusal_holds(&self, memsys: &MemorySystem) -> bool {
        self.refused_access
            .is_some_and(|(_, _, state)| memsys.issue_state(self.id as usize) == state)
    }

    /// Offers the refused access again to a memory system known to refuse it, for the
    /// counters the refusal updates.
    fn repeat_refusal(&mut self, memsys: &mut MemorySystem, now: u64) {
        let r = memsys.offer(self.id as usize, &self.offer);
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
        h.state = match w.status {
            WarpStatus::Ready => HotState::Ready,
            WarpStatus::Waiting(_) => HotState::Waiting,
            WarpStatus::Done => HotState::Done,
        };
        let Some(top) = w.warp.next_entry() else {
            h.next_pc = NO_PC;
            return;
        };
        h.next_pc = top.pc;
        h.class = decoded.class[top.pc as usize];
        h.ready = 0;
        for &r in decoded.regs(top.pc) {
            let t = w.ready_at[r as usize];
            h.ready = h.ready.max(t);
            if t == MEM_PENDING {
                break;
            }
        }
    }

    /// Starts the fetch that fills the instruction buffer of `slot` from its next PC.
    fn fill_buffer(&mut self, slot: usize, now: u64) {
        let h = &mut self.hot[slot];
        if h.next_pc == NO_PC {
            return;
        }
        h.fetch_ready = self.fetch.fetch(h.next_pc, now);
        h.buffer_end = h.next_pc.saturating_add(self.ibuffer_entries);
    }

    /// Front-end counters so far.
    pub(super) fn frontend_stats(&self) -> FrontendStats {
        FrontendStats {
            fetches: self.fetch.fetches,
            icache_misses: self.fetch.misses,
            operand_conflict_cycles: self.banks.conflict_cycles,
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
    fn try_issue(
        &mut self,
        env: &mut Env,
        memsys: &mut MemorySystem,
        mem: &mut DeviceMemory,
        slot: usize,
        sched: usize,
        now: u64,
    ) -> Result<Result<(), StallReason>, ExecError> {
        let ctx = env.ctx;
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
            match self.plan_memory(env, memsys, &ws, local_base, inst, top.pc, exec, slot) {
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
            sm: self.id,
            clock: Some(now),
            local_base: tb.local_base,
        };
        let result = step(ctx, &mut view, &mut ws.warp, mem);
        let result = match result {
            Ok(r) => r,
            Err(e) => {
                self.warps[slot] = Some(ws);
                return Err(e);
            }
        };
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
        env.warp_instructions += ws.warp.executed - before.0;
        env.thread_instructions += ws.warp.thread_executed - before.1;
        self.stats.warp_instructions += ws.warp.executed - before.0;

        // Operand collection: reads that wait for a register bank delay the result.
        let late = self.banks.read(env.decoded.sources(top.pc), now);
        let timing = env.spec.timing(class);
        let (ready, busy) = match plan {
            MemPlan::None => (
                now + u64::from(timing.latency.max(1)) + late,
                timing.interval,
            ),
            MemPlan::System { pending: true } => {
                ws.outstanding += 1;
                (MEM_PENDING, timing.interval)
            }
            MemPlan::System { pending: false } => (now + 1, timing.interval),
            MemPlan::Fixed { latency, busy } => (now + latency.max(1) + late, busy as u32),
        };
        for r in inst.defs() {
            ws.ready_at[r.index()] = ready;
        }
        let until = now + u64::from(busy.max(1));
        match class.unit() {
            Unit::Sp => self.sp_free[sched] = until,
            Unit::Sfu => self.sfu_free = until,
            Unit::LdSt => self.ldst_free = until,
        }
        self.warps[slot] = Some(ws);
        self.refresh(&env.decoded, slot);
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
        env: &mut Env,
        memsys: &mut MemorySystem,
        ws: &WarpSlot,
        local_base: u64,
        inst: &Inst,
        pc: u32,
        exec: u32,
        slot: usize,
    ) -> Result<MemPlan, StallReason> {
        let ctx = env.ctx;
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
            _ => return Ok(MemPlan::None),
        };
        let bytes = ty.size() * u32::from(vec.max(1));
        let regs = &ws.warp.regs;
        let base = inst.srcs[0];
        let read = |l: usize| -> u64 {
            let b = match base {
                Operand::Reg(r) => regs[r.index() * WARP_SIZE + l],
                Operand::Imm(v) => v,
                Operand::GlobalAddr(g, off) => ctx.global_addrs[g.index()].wrapping_add(off as u64),
                Operand::Special(Special::WarpSmem) => ctx.warp_smem(ws.warp.index),
                _ => 0,
            };
            b.wrapping_add(offset as i64 as u64)
        };
        let first = exec.trailing_zeros() as usize;
        let retry = self
            .refused_access
            .is_some_and(|(s, p, _)| (s, p) == (slot, pc));
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
        let strip = |a: u64| -> u64 {
            if space == Space::Generic {
                match memory::window(a) {
                    Window::Global(x) | Window::Shared(x) | Window::Local(x) | Window::Param(x) => {
                        x
                    }
                }
            } else {
                a
            }
        };
        for l in 0..WARP_SIZE {
            if retry {
                break;
            }
            self.addrs[l] = if exec & (1 << l) != 0 {
                let a = strip(read(l));
                Some(match resolved {
                    Space::Local => {
                        memory::local_word_address(
                            local_base,
                            env.frame_words,
                            ws.warp.index,
                            l as u32,
                            a / 4,
                        ) + a % 4
                    }
                    _ => a,
                })
            } else {
                None
            };
        }
        match resolved {
            Space::Shared => {
                let sh = &env.memcfg.shared;
                let passes =
                    shared_bank_conflicts_with(&self.addrs, bytes, sh.banks, sh.bank_bytes);
                env.shared_accesses += 1;
                env.shared_passes += u64::from(passes);
                Ok(MemPlan::Fixed {
                    latency: sh.access_cycles(passes),
                    busy: u64::from(passes.max(1)) * u64::from(env.spec.ldst_interval.max(1)),
                })
            }
            Space::Param => Ok(MemPlan::Fixed {
                latency: env.memcfg.const_cache.hit_latency,
                busy: u64::from(env.spec.ldst_interval.max(1)),
            }),
            Space::Global | Space::Const | Space::Local => {
                let msp = match resolved {
                    Space::Const => memsys::Space::Const,
                    Space::Local => memsys::Space::Local,
                    _ => memsys::Space::Global,
                };
                if !retry {
                    coalesce_into(&self.addrs, bytes, env.memcfg.line_bytes, &mut self.lines);
                }
                let waits = kind != AccessKind::Store
                    && matches!(inst.op, Op::Ld { .. } | Op::Atom { .. })
                    && inst.defs().next().is_some();
                let tag = if waits {
                    self.free_pending
                        .last()
                        .map_or(self.pending.len() as u64, |&t| u64::from(t))
                } else {
                    NO_TAG
                };
                let chunk = chunk_lines(env.memcfg, msp, kind);
                let first = self.lines.len().min(chunk);
                self.offer.kind = kind;
                self.offer.space = msp;
                self.offer.priority = Priority::Normal;
                self.offer.tag = tag;
                self.offer.lines.clear();
                self.offer.lines.extend_from_slice(&self.lines[..first]);
                if memsys.offer(self.id as usize, &self.offer).is_err() {
                    let state = memsys.issue_state(self.id as usize);
                    self.refused_access = Some((slot, pc, state));
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
                    });
                }
                if waits {
                    let mut regs = [None; MAX_DSTS];
                    regs[..inst.dsts().len()].copy_from_slice(inst.dsts());
                    let p = PendingLoad {
                        slot: slot as u32,
                        regs,
                        parts,
                    };
                    match self.free_pending.pop() {
                        Some(t) => self.pending[t as usize] = Some(p),
                        None => self.pending.push(Some(p)),
                    }
                }
                Ok(MemPlan::System { pending: waits })
            }
            Space::Generic => unreachable!("resolved above"),
        }
    }

    /// Offers the next part of a split access to the memory system.
    fn drain_backlog(&mut self, env: &Env, memsys: &mut MemorySystem) {
        let Some(b) = &mut self.backlog else {
            return;
        };
        let chunk = chunk_lines(env.memcfg, b.space, b.kind);
        let end = (b.next + chunk).min(b.lines.len());
        let access = MemAccess {
            kind: b.kind,
            space: b.space,
            priority: Priority::Normal,
            lines: b.lines[b.next..end].to_vec(),
            tag: b.tag,
        };
        if memsys.issue(self.id as usize, access).is_ok() {
            b.next = end;
            if end == b.lines.len() {
                self.backlog = None;
            }
        }
    }

    /// Whether the SM still has memory work of its own (a split access) to send.
    pub(super) fn has_backlog(&self) -> bool {
        self.backlog.is_some()
    }

    /// Completes barriers and retires finished TBs; returns the number retired. A TB whose
    /// live warps all wait at barriers that cannot complete is a deadlock.
    pub(super) fn retire(&mut self, ctx: &LaunchCtx) -> Result<u32, ExecError> {
        if !self.retire_due {
            return Ok(0);
        }
        self.retire_due = false;
        let mut retired = 0;
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
                    if w.status == WarpStatus::Ready {
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
                for s in &tb.slots {
                    self.warps[*s as usize] = None;
                    self.hot[*s as usize] = WarpHot::EMPTY;
                }
                self.tbs[k] = None;
                self.resident_tbs -= 1;
                self.infos_stale.fill(true);
                retired += 1;
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
                return Err(deadlock(ctx, tb.ctaid, &view));
            }
        }
        Ok(retired)
    }
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
