//! Context switching: the TBs on the reserved SM stop, the pipeline drains their in-flight
//! instructions (loads return, stores are acknowledged), their context is saved to a
//! context area in device memory, and their resources are released; restoring is
//! symmetric, and the TB continues where it stopped. One engine, configured
//! ([`SwitchConfig`]), gives the papers' designs:
//!
//! * **BASELINE** (papers/tanasic-thesis §5.2.2; papers/ji-ctxback §V): stop at the next
//!   instruction boundary; once the TB has stopped, a trap routine saves every allocated
//!   register of every warp that has not exited.
//! * **LIVE** (papers/ji-ctxback §V): the same, saving only the registers live where each
//!   warp stands — the union of the SIMT-aware liveness over its SIMT stack entries' PCs
//!   (lanes parked elsewhere need theirs), each at its width there.
//! * **Lightweight** (papers/lin-lightweight §III–IV): stop at the selective preemption
//!   points the compiler inserted (`pp`/`bar.pp`, [`PointPass`]); save the registers the
//!   point's liveness vector names (the divergent version, from the `pp`'s dummy, when the
//!   SIMT stack shows the warp diverged; a warp that stops at a barrier that is not a
//!   point carries no vector and saves every register), compressed ([`crate::compress`])
//!   with its pattern vector. The save pipeline (Figure 13) takes each warp as soon as it
//!   has drained — it is compressed (one PAG group a cycle through a compressor of
//!   [`SwitchConfig::compressor_latency`] cycles, one compressor per SM) and its segments
//!   go out while other warps still run to their points — and the TB's shared memory, SIMT
//!   stacks and barrier state follow once every warp has stopped. Compressed data is packed
//!   contiguously in the TB's context area (128-byte segments, the memory system's line),
//!   and the kernel's context control block (Figure 12) gets the TB's entry. Restoring
//!   loads the CCB entry and pattern vectors first, then the data.
//!
//! * **In place** ([`SwitchConfig::in_place`], papers/lin-lightweight §III-A, Figure 4):
//!   when a kernel is preempted for another, only as many TBs give up their registers —
//!   and, separately, their shared memory — as the incoming kernel needs (its demand times
//!   the TBs of it an empty SM would hold, or fewer if fewer are left); the other TBs'
//!   registers or shared memory stay on the SM, parked ([`gpu::timing::Request::Park`]),
//!   and are neither saved nor restored. A TB with parked parts resumes on its own SM;
//!   should that SM be set up for a third kernel, the parked parts are saved after all.
//!
//! What a context holds, in bytes:
//! * registers — 4 bytes per thread per 32-bit register (a 64-bit value counts two), one
//!   bit per thread per predicate, 4 bytes per uniform register; compressed as described;
//! * the TB's shared memory;
//! * per warp, its SIMT stack (12 bytes an entry: PC, reconvergence PC, mask) and barrier
//!   status (4 bytes), and the TB's 16 named-barrier counters (64 bytes);
//! * metadata: pattern vectors (two bits per register per warp) and the CCB entry (three
//!   8-byte pointers: registers, shared memory, SIMT stack), when compressing.
//!
//! The bytes move as line-sized accesses at context priority through the SM's LD/ST unit
//! (papers/lin-lightweight §V-A), competing with every other request for the interconnect,
//! the L2 and DRAM; the TB's resources stay taken while its context moves. The values
//! themselves travel in the captured context; every register a mechanism does not save is
//! overwritten with garbage before the TB resumes (and so is every register of a lane that
//! has exited), so a register wrongly judged dead corrupts the
//! result and the bit-exact tests see it.

use std::collections::HashMap;
use std::sync::Arc;

use analysis::ctxback::widths::{RegClass, Widths};
use analysis::preemption_points::{insert_points, PpConfig, PreemptionPlan};
use analysis::{Liveness, RegSet};
use gpu::barrier::WarpStatus;
use gpu::exec::{Warp, WARP_SIZE};
use gpu::occupancy::SmResources;
use gpu::timing::{
    AfterStop, Direction, HoldId, Keep, KernelPass, LaunchId, Request, SmId, Start, StopAt,
    TbContext, TbRef, TimingError, TransferId, WarpReports,
};
use kir::inst::{LiveVector, Op};
use kir::{Id, InstId, Kernel, Reg};
use serde::Serialize;

use crate::compress::{self, Pattern, TbPattern};
use crate::{ContextBytes, Cx, How, Mechanism, Preempted, Record, Requests, Want};

/// Which registers a switch saves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Registers {
    /// Every allocated register.
    All,
    /// The registers live at each warp's SIMT stack PCs (compiler tables for every PC).
    Live,
    /// The registers the preemption point's liveness vector names.
    Vector,
    /// The registers written since the TB's last checkpoint, or since it was placed: their
    /// dirty bits, set at writeback (papers/li-pep §3.1; Chimera+dirty, and PEP's
    /// incremental checkpoint).
    Dirty,
}

/// How register values are compressed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    None,
    /// Warp-level patterns.
    Warp,
    /// TB-level patterns where every warp waits at the same `bar.pp`, warp-level elsewhere.
    Tb,
}

/// A context-switch design.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SwitchConfig {
    /// Where warps stop.
    pub stop: StopAt,
    pub registers: Registers,
    pub compression: Compression,
    /// Save each warp as soon as it drains (the lightweight pipeline) rather than the whole
    /// TB once it has stopped.
    pub pipelined: bool,
    /// Cycles from a register entering the compressor to its compressed form (the paper
    /// assumes 2, after Warped-Compression).
    pub compressor_latency: u64,
    /// Keep on the SM the registers and shared memory the incoming kernel does not need.
    pub in_place: bool,
}

impl SwitchConfig {
    pub const BASELINE: SwitchConfig = SwitchConfig {
        stop: StopAt::Boundary,
        registers: Registers::All,
        compression: Compression::None,
        pipelined: false,
        compressor_latency: 2,
        in_place: false,
    };
    pub const LIVE: SwitchConfig = SwitchConfig {
        registers: Registers::Live,
        ..SwitchConfig::BASELINE
    };
    /// Preemption points with their liveness vectors, uncompressed ("Live" in
    /// papers/lin-lightweight Figure 14).
    pub const POINTS_LIVE: SwitchConfig = SwitchConfig {
        stop: StopAt::PreemptionPoint,
        registers: Registers::Vector,
        compression: Compression::None,
        pipelined: true,
        compressor_latency: 2,
        in_place: false,
    };
    /// The lightweight design: points, liveness vectors and warp-level compression
    /// ("Live+cp" in Figure 14, "Select" in Figure 15).
    pub const LIGHTWEIGHT: SwitchConfig = SwitchConfig {
        compression: Compression::Warp,
        ..SwitchConfig::POINTS_LIVE
    };

    /// Whether the kernel must carry preemption points.
    pub fn needs_points(&self) -> bool {
        self.stop == StopAt::PreemptionPoint || self.registers == Registers::Vector
    }
}

/// What the registers of the TBs a switch saved held, summed (papers/lin-lightweight
/// Figures 6 and 8): bytes of every allocated register, of the saved ones, and of what was
/// written after compression; how the saved 32-bit vector registers compressed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RegisterCensus {
    pub occupied: u64,
    pub live: u64,
    pub moved: u64,
    pub uniform: u32,
    pub strided: u32,
    pub random: u32,
    /// Registers stored once for a whole TB (TB-level compression).
    pub global_uniform: u32,
    pub global_strided: u32,
    /// Warps that stopped where no liveness vector was available (a barrier that is not a
    /// point) and saved every register.
    pub unvectored_warps: u32,
    /// TBs compressed at TB level (their warps stopped together at a `bar.pp`,
    /// papers/lin-lightweight §III-C): the register bytes they moved, and the bytes the same
    /// registers take compressed warp by warp — TB-level compression's gain where it applies.
    pub tb_level_tbs: u32,
    pub tb_level_moved: u64,
    pub tb_level_warp_moved: u64,
}

impl RegisterCensus {
    pub fn add(&mut self, o: &RegisterCensus) {
        self.occupied += o.occupied;
        self.live += o.live;
        self.moved += o.moved;
        self.uniform += o.uniform;
        self.strided += o.strided;
        self.random += o.random;
        self.global_uniform += o.global_uniform;
        self.global_strided += o.global_strided;
        self.unvectored_warps += o.unvectored_warps;
        self.tb_level_tbs += o.tb_level_tbs;
        self.tb_level_moved += o.tb_level_moved;
        self.tb_level_warp_moved += o.tb_level_warp_moved;
    }
}

/// The compiler pass of the lightweight design: preemption points (papers/lin-lightweight
/// §IV-A) inserted after register allocation, so their liveness vectors name physical
/// registers.
pub struct PointPass {
    pub config: PpConfig,
}

impl KernelPass for PointPass {
    fn name(&self) -> &str {
        "preemption-points"
    }

    fn run(&self, kernel: &Kernel, _sm: &SmResources) -> Option<(Kernel, Vec<InstId>)> {
        let plan = PreemptionPlan::compute(kernel, &self.config);
        let with = insert_points(kernel, &plan.points).ok()?;
        // Each new instruction serves the old one whose group it starts or belongs to.
        let served = with.served();
        Some((with.kernel, served))
    }
}

/// What a kernel's contexts are measured with.
struct Facts {
    _kernel: Arc<Kernel>,
    liveness: Option<Liveness>,
    widths: Widths,
    /// Registers that are not predicates or uniform registers.
    all: RegSet,
}

/// The registers one warp saves, and their size.
struct WarpSave {
    keep: RegSet,
    /// 32-bit registers saved per thread (vector and uniform; a 64-bit value counts two).
    words: u32,
    /// Bytes after compression.
    moved: u64,
    census: RegisterCensus,
    /// Compressor cycles it needs (PAG groups through the compressor).
    work: u64,
    /// Warp-level compression of each 32-bit vector register half, for TB-level analysis:
    /// (register, high half).
    compressed: Vec<((Reg, bool), compress::Compressed)>,
}

/// A TB whose context is being saved.
struct Saving {
    requested: u64,
    area: u64,
    /// Bytes written to the area so far (packed).
    written: u64,
    /// Per warp (index in the TB), what it saved once drained.
    warps: Vec<Option<WarpSave>>,
    bytes: ContextBytes,
    census: RegisterCensus,
    stopped: u64,
    /// Its transfers: when each could start, and when it finished.
    moving: Vec<(TransferId, u64, Option<u64>)>,
    hold: Option<HoldId>,
    context: Option<Box<TbContext>>,
    /// The transfer whose completion ends the save.
    last: Option<TransferId>,
    /// In place: its registers / shared memory stay on the SM.
    keep_registers: bool,
    keep_shared: bool,
    /// The kernel the SM was taken for.
    next: Option<LaunchId>,
}

/// A stopped TB whose registers and/or shared memory are parked on its SM.
struct Parked {
    sm: SmId,
    hold: HoldId,
    /// The kernel it made room for (parked parts may stay while it runs).
    for_kernel: Option<LaunchId>,
    /// Bytes of what is parked, were it saved after all.
    bytes: u64,
}

/// A restore in flight.
struct Restoring {
    hold: HoldId,
    started: u64,
    preempted: Preempted,
    /// The data still to load once the metadata is back.
    then: Option<u64>,
}

enum Moving {
    Save(TbRef),
    Restore(Box<Restoring>),
    /// The parked parts of a TB, saved because its SM went to a third kernel.
    Unpark(TbRef),
}

/// Context switching.
pub struct Switch {
    name: String,
    config: SwitchConfig,
    facts: HashMap<usize, Facts>,
    requests: Requests,
    saving: HashMap<(SmId, TbRef), Saving>,
    /// By SM and transfer (transfer ids are numbered per SM).
    moving: HashMap<(SmId, TransferId), Moving>,
    /// Per SM, the cycle its compressor is free.
    compressor_free: HashMap<SmId, u64>,
    parked: HashMap<TbRef, Parked>,
    /// TBs whose parked parts were saved after all: bytes a restore loads besides its own.
    unparked_bytes: HashMap<TbRef, u64>,
}

/// Bytes of the SIMT stacks and barrier state of a TB's warps.
pub(crate) fn stack_barrier_bytes(stack_entries: impl Iterator<Item = usize>) -> u64 {
    16 * 4 + stack_entries.map(|n| 12 * n as u64 + 4).sum::<u64>()
}

/// Lanes whose registers matter: they exist and have not exited.
fn lanes(w: &Warp) -> u32 {
    w.valid & !w.exited
}

/// Whether the warp's lanes are split over several SIMT stack entries.
fn diverged(w: &Warp) -> bool {
    w.stack
        .iter()
        .filter(|e| e.mask != 0 && e.pc != e.rpc)
        .count()
        > 1
}

/// The liveness vector of the point a warp stands at: right after a `pp` (the dummy
/// holding the divergent version follows it), or waiting past a `bar.pp`.
fn point_vector(kernel: &Kernel, w: &Warp) -> Option<LiveVector> {
    let pc = w.next_entry()?.pc as usize;
    let prev = kernel.insts.get(InstId::new(pc.checked_sub(1)?))?;
    match prev.op {
        Op::Pp { live } => {
            if diverged(w) {
                match kernel.insts.get(InstId::new(pc)).map(|i| &i.op) {
                    Some(Op::PpDivergent { live }) => Some(*live),
                    _ => Some(live),
                }
            } else {
                Some(live)
            }
        }
        Op::Bar { pp: Some(live), .. } => Some(live),
        _ => None,
    }
}

impl Switch {
    pub fn new(name: impl Into<String>, config: SwitchConfig) -> Switch {
        Switch {
            name: name.into(),
            config,
            facts: HashMap::new(),
            requests: Requests::default(),
            saving: HashMap::new(),
            moving: HashMap::new(),
            compressor_free: HashMap::new(),
            parked: HashMap::new(),
            unparked_bytes: HashMap::new(),
        }
    }

    pub fn config(&self) -> &SwitchConfig {
        &self.config
    }

    fn facts(&mut self, kernel: &Arc<Kernel>) -> &Facts {
        let live = self.config.registers == Registers::Live;
        self.facts
            .entry(Arc::as_ptr(kernel) as usize)
            .or_insert_with(|| {
                let liveness = live.then(|| {
                    let mut l = Liveness::new();
                    l.compute(kernel);
                    l
                });
                let widths = Widths::compute(kernel);
                let mut all = RegSet::with_capacity(kernel.regs.len());
                for r in kernel.regs.ids() {
                    all.insert(r);
                }
                Facts {
                    _kernel: kernel.clone(),
                    liveness,
                    widths,
                    all,
                }
            })
    }

    /// What warp `w` saves under this design, measured on its values.
    fn warp_save(
        &mut self,
        kernel: &Arc<Kernel>,
        w: &Warp,
        dirty: Option<&[u64]>,
        block_x: u32,
    ) -> WarpSave {
        let config = self.config;
        let facts = self.facts(kernel);
        let lanes = lanes(w);
        let n_lanes = lanes.count_ones();
        let mut census = RegisterCensus {
            occupied: facts.widths.all_registers().bytes_per_warp(n_lanes),
            ..RegisterCensus::default()
        };
        let Some(top) = w.next_entry().map(|e| e.pc) else {
            return WarpSave {
                keep: RegSet::with_capacity(kernel.regs.len()),
                words: 0,
                moved: 0,
                census: RegisterCensus::default(),
                work: 0,
                compressed: Vec::new(),
            };
        };
        let keep = match config.registers {
            Registers::All => facts.all.clone(),
            Registers::Dirty => match dirty {
                Some(bits) => {
                    let mut set = RegSet::with_capacity(kernel.regs.len());
                    for r in kernel.regs.ids() {
                        let i = r.index();
                        if bits.get(i / 64).is_some_and(|b| b & (1 << (i % 64)) != 0) {
                            set.insert(r);
                        }
                    }
                    set
                }
                // Without the warp's dirty bits, every register.
                None => facts.all.clone(),
            },
            Registers::Live => {
                let liveness = facts.liveness.as_ref().expect("computed for LIVE");
                let mut set = RegSet::with_capacity(kernel.regs.len());
                for e in w.stack.iter() {
                    if e.mask == 0 || e.pc == e.rpc || e.pc as usize >= kernel.len() {
                        continue;
                    }
                    set.union_with(liveness.live_in(InstId(e.pc)));
                }
                set
            }
            Registers::Vector => match point_vector(kernel, w) {
                Some(v) => {
                    let mut set = RegSet::with_capacity(kernel.regs.len());
                    for r in kernel.regs.ids() {
                        if v.is_live(r.index() as u32) {
                            set.insert(r);
                        }
                    }
                    set
                }
                None => {
                    census.unvectored_warps += 1;
                    facts.all.clone()
                }
            },
        };
        let pc = InstId(top);
        // Each register once: a 64-bit value in `R2k` counts two 32-bit registers, and its
        // odd half `R2k+1`, if also named, is the same storage.
        let wide = |r: Reg| {
            facts.widths.class(r) != RegClass::Predicate && facts.widths.wide_before(pc, r)
        };
        let regs: Vec<(Reg, bool)> = keep
            .iter()
            .filter(|&r| {
                !(r.index() > 0 && {
                    let even = Reg::new(r.index() - 1);
                    facts.widths.partner(even) == Some(r) && keep.contains(even) && wide(even)
                })
            })
            .map(|r| (r, wide(r)))
            .collect();
        let bytes_of = |r: Reg, wide: bool| -> u64 {
            let halves = if wide { 2 } else { 1 };
            match facts.widths.class(r) {
                RegClass::Predicate => u64::from(n_lanes.div_ceil(8)),
                RegClass::Uniform => 4 * halves,
                RegClass::Vector => 4 * halves * u64::from(n_lanes),
            }
        };
        let live: u64 = regs.iter().map(|&(r, w)| bytes_of(r, w)).sum();
        let words = regs
            .iter()
            .filter(|&&(r, _)| facts.widths.class(r) != RegClass::Predicate)
            .map(|&(_, w)| if w { 2 } else { 1 })
            .sum();
        census.live = live;
        let mut moved = live;
        let mut work = 0;
        let mut compressed = Vec::new();
        if config.compression != Compression::None {
            let pag = compress::pag(block_x);
            let groups = u64::from((WARP_SIZE as u32).div_ceil(pag));
            moved = 0;
            for &(r, wide) in &regs {
                if facts.widths.class(r) != RegClass::Vector {
                    moved += bytes_of(r, wide);
                    continue;
                }
                let halves: &[bool] = if wide { &[false, true] } else { &[false] };
                for &high in halves {
                    let base = r.index() * WARP_SIZE;
                    let shift = if high { 32 } else { 0 };
                    let c = compress::compress_register(
                        |l| (w.regs[base + l] >> shift) as u32,
                        lanes,
                        pag,
                    );
                    match c.pattern {
                        Pattern::Uniform => census.uniform += 1,
                        Pattern::Strided => census.strided += 1,
                        Pattern::Random => census.random += 1,
                    }
                    moved += c.bytes;
                    work += groups;
                    compressed.push(((r, high), c));
                }
            }
        }
        census.moved = moved;
        WarpSave {
            keep,
            words,
            moved,
            census,
            work,
            compressed,
        }
    }

    /// What this design saves of warp `w` of a TB of `kernel` (whose x dimension is
    /// `block_x`): 32-bit registers per thread (vector and uniform; predicates aside), bytes
    /// before compression, and bytes after.
    pub fn measure_warp(
        &mut self,
        kernel: &Arc<Kernel>,
        w: &Warp,
        block_x: u32,
    ) -> (u32, u64, u64) {
        let s = self.warp_save(kernel, w, None, block_x);
        (s.words, s.census.live, s.moved)
    }

    /// Metadata a compressed context carries: a pattern vector per warp and the TB's CCB
    /// entry (and, with TB-level compression, a global/local bit per register).
    fn metadata_bytes(&self, kernel: &Kernel, warps: usize) -> u64 {
        match self.config.compression {
            Compression::None => 0,
            Compression::Warp => {
                warps as u64 * compress::pattern_vector_bytes(kernel.regs.len()) + 24
            }
            Compression::Tb => {
                warps as u64 * compress::pattern_vector_bytes(kernel.regs.len())
                    + (kernel.regs.len() as u64).div_ceil(8)
                    + 24
            }
        }
    }

    /// Sends one warp's compressed registers through the SM's compressor, then to memory.
    fn send_warp(
        &mut self,
        sm: SmId,
        tb: TbRef,
        index: usize,
        save: WarpSave,
        cx: &mut Cx,
    ) -> Result<(), TimingError> {
        let now = cx.machine.cycle();
        let ready = if self.config.compression == Compression::None {
            now
        } else {
            let free = self.compressor_free.entry(sm).or_insert(0);
            let start = now.max(*free);
            *free = start + save.work;
            start + save.work + self.config.compressor_latency
        };
        let s = self.saving.get_mut(&(sm, tb)).expect("saving");
        // Registers kept in place move nowhere.
        let bytes = if s.keep_registers { 0 } else { save.moved };
        s.bytes.registers += bytes;
        s.census.add(&RegisterCensus {
            moved: bytes,
            ..save.census
        });
        if bytes > 0 {
            let id = cx.transfer(
                sm,
                Direction::Save,
                s.area + s.written,
                bytes,
                tb.launch,
                ready,
            )?;
            s.written += bytes;
            s.moving.push((id, ready, None));
            self.moving.insert((sm, id), Moving::Save(tb));
        }
        s.warps[index] = Some(save);
        Ok(())
    }

    /// Stops TB `tb` on `sm` and saves its context once it has stopped (the per-TB part of
    /// [`Mechanism::preempt`], for mechanisms that choose per TB).
    pub fn switch_tb(&mut self, sm: SmId, tb: TbRef, cx: &mut Cx) -> Result<(), TimingError> {
        let now = cx.machine.cycle();
        cx.ask(Request::Stop {
            sm,
            tb,
            at: self.config.stop,
            then: AfterStop::LeaveHolding,
            reports: if self.config.pipelined {
                WarpReports::EachWarp
            } else {
                WarpReports::None
            },
        })?;
        let warps = cx.machine.warps_of(sm, tb).map_or(0, |w| w.len());
        let area_size = self.area_bound(cx, tb);
        let area = cx.machine.memory_mut().alloc(area_size);
        self.requests.add(sm, tb, now);
        self.saving.insert(
            (sm, tb),
            Saving {
                requested: now,
                area,
                written: 0,
                warps: (0..warps).map(|_| None).collect(),
                bytes: ContextBytes::default(),
                census: RegisterCensus::default(),
                stopped: now,
                moving: Vec::new(),
                hold: None,
                context: None,
                last: None,
                keep_registers: false,
                keep_shared: false,
                next: None,
            },
        );
        Ok(())
    }

    /// Stops and saves `tbs`, taken from `sm` for `want`, keeping in place what the design
    /// keeps (the part of [`Mechanism::preempt`] after the TBs are taken).
    pub fn switch_taken(
        &mut self,
        sm: SmId,
        tbs: Vec<TbRef>,
        want: &Want,
        cx: &mut Cx,
    ) -> Result<(), TimingError> {
        let plan = if self.config.in_place {
            crate::want::room_plan(cx.machine, sm, &tbs, want)
        } else {
            vec![None; tbs.len()]
        };
        for (tb, keep) in tbs.into_iter().zip(plan) {
            self.switch_tb(sm, tb, cx)?;
            let s = self.saving.get_mut(&(sm, tb)).expect("just added");
            s.keep_registers = keep.is_some_and(Keep::registers);
            s.keep_shared = keep.is_some_and(Keep::shared_memory);
            s.next = want.next();
        }
        Ok(())
    }

    /// The bytes a BASELINE save of TB `tb` on `sm` would move (every allocated register
    /// of its live lanes, its shared memory, SIMT stacks and barrier state): what a
    /// mechanism can know before it decides.
    pub fn full_context_bytes(&mut self, m: &gpu::timing::Machine, sm: SmId, tb: TbRef) -> u64 {
        let launch = m.launch(tb.launch);
        let kernel = launch.ctx().kernel.clone();
        let shared = u64::from(launch.ctx().smem_size);
        let all = self.facts(&kernel).widths.all_registers();
        let warps = m.warps_of(sm, tb).unwrap_or_default();
        let live = warps.iter().filter(|w| !w.done);
        let registers: u64 = live.map(|w| all.bytes_per_warp(w.lanes)).sum();
        registers + shared + stack_barrier_bytes(warps.iter().map(|w| w.pcs.len().max(1)))
    }

    /// The bytes a save of TB `tb` on `sm` that keeps only its dirty registers would move
    /// (the registers written since its last checkpoint or placement, at their widths, of
    /// its live lanes, with its shared memory, SIMT stacks and barrier state), from the
    /// dirty bits the SM keeps (papers/li-pep §3.1).
    pub fn dirty_context_bytes(&mut self, m: &gpu::timing::Machine, sm: SmId, tb: TbRef) -> u64 {
        let launch = m.launch(tb.launch);
        let kernel = launch.ctx().kernel.clone();
        let shared = u64::from(launch.ctx().smem_size);
        let widths = &self.facts(&kernel).widths;
        let warps = m.warps_of(sm, tb).unwrap_or_default();
        let registers: u64 = warps
            .iter()
            .filter(|w| !w.done)
            .map(|w| {
                let pc = InstId(w.pc.unwrap_or(0).min(kernel.len().saturating_sub(1) as u32));
                let dirty = kernel.regs.ids().filter(|r| w.is_dirty(r.index() as u32));
                widths.size_of(pc, dirty).bytes_per_warp(w.lanes)
            })
            .sum();
        registers + shared + stack_barrier_bytes(warps.iter().map(|w| w.pcs.len().max(1)))
    }

    /// The context area a TB of `launch` needs at most.
    pub(crate) fn area_bound(&mut self, cx: &mut Cx, tb: TbRef) -> u64 {
        let launch = cx.machine.launch(tb.launch);
        let kernel = launch.ctx().kernel.clone();
        let block = launch.ctx().block;
        let smem = u64::from(launch.ctx().smem_size);
        let threads = u64::from(block[0] * block[1] * block[2]);
        let warps = threads.div_ceil(WARP_SIZE as u64) as usize;
        let regs = self
            .facts(&kernel)
            .widths
            .all_registers()
            .bytes_per_warp(WARP_SIZE as u32)
            + 8 * kernel.regs.len() as u64; // 64-bit halves counted twice at worst
        warps as u64 * regs
            + smem
            + stack_barrier_bytes((0..warps).map(|_| 64))
            + self.metadata_bytes(&kernel, warps)
    }
}

impl Mechanism for Switch {
    fn name(&self) -> String {
        self.name.clone()
    }

    /// Warps that stop at preemption points, or save what their liveness vectors name, need
    /// the points in every kernel ([`crate::points_pass`]).
    fn kernel_pass(&self) -> Option<gpu::timing::Pass> {
        self.config.needs_points().then(crate::points_pass)
    }

    fn preempt(&mut self, sm: SmId, want: Want, cx: &mut Cx) -> Result<(), TimingError> {
        let tbs = cx.take(sm, &want);
        self.switch_taken(sm, tbs, &want, cx)
    }

    fn warp_drained(
        &mut self,
        sm: SmId,
        tb: TbRef,
        warp: u32,
        cx: &mut Cx,
    ) -> Result<(), TimingError> {
        // TB-level compression needs every warp; it waits for the TB to stop.
        if self.config.compression == Compression::Tb || !self.saving.contains_key(&(sm, tb)) {
            return Ok(());
        }
        let launch = cx.machine.launch(tb.launch);
        let kernel = launch.ctx().kernel.clone();
        let block_x = launch.ctx().block[0];
        let Some(w) = cx.machine.idle_warp(sm, tb, warp) else {
            return Ok(());
        };
        let w = w.clone();
        let dirty = cx
            .machine
            .warps_of(sm, tb)
            .and_then(|v| v.into_iter().find(|v| v.index == warp))
            .map(|v| v.dirty);
        let save = self.warp_save(&kernel, &w, dirty.as_deref(), block_x);
        self.send_warp(sm, tb, warp as usize, save, cx)
    }

    fn evicted(
        &mut self,
        sm: SmId,
        mut context: Box<TbContext>,
        hold: Option<HoldId>,
        cx: &mut Cx,
    ) -> Result<(), TimingError> {
        let tb = context.tb;
        let now = cx.machine.cycle();
        self.requests.take(sm, tb);
        let Some(hold) = hold else {
            return Err(TimingError::Mechanism(format!(
                "{}: TB {tb:?} left SM {sm:?} without its resources held",
                self.name
            )));
        };
        let launch = cx.machine.launch(tb.launch);
        let kernel = launch.ctx().kernel.clone();
        let block_x = launch.ctx().block[0];
        // Warps not yet saved (every warp, unless pipelined) are measured now.
        let mut pending = Vec::new();
        for (i, wc) in context.warps.iter().enumerate() {
            let done = wc.status == WarpStatus::Done || wc.warp.is_done();
            let saved = self
                .saving
                .get(&(sm, tb))
                .is_some_and(|s| s.warps.get(i).is_some_and(Option::is_some));
            if !done && !saved {
                pending.push((
                    i,
                    self.warp_save(&kernel, &wc.warp, Some(&wc.dirty), block_x),
                ));
            }
        }
        let tb_level = self.config.compression == Compression::Tb && {
            let pcs: Vec<Option<u32>> = context
                .warps
                .iter()
                .filter(|w| !w.warp.is_done())
                .map(|w| w.warp.next_entry().map(|e| e.pc))
                .collect();
            let at_bar_pp = pcs.first().copied().flatten().is_some_and(|pc| {
                pc > 0 && matches!(kernel.insts[InstId(pc - 1)].op, Op::Bar { pp: Some(_), .. })
            });
            at_bar_pp && pcs.windows(2).all(|p| p[0] == p[1])
        };
        let mut registers = 0;
        let mut census = RegisterCensus::default();
        if tb_level {
            // Per register half, the warps' compressions (Figure 11).
            let pag = compress::pag(block_x);
            let mut by_reg: HashMap<(Reg, bool), Vec<compress::Compressed>> = HashMap::new();
            for (_, s) in &pending {
                for (k, c) in &s.compressed {
                    by_reg.entry(*k).or_default().push(c.clone());
                }
                // Predicates and uniform registers stay as the warp level counts them.
                let vector: u64 = s.compressed.iter().map(|(_, c)| c.bytes).sum();
                registers += s.moved - vector;
                census.add(&RegisterCensus {
                    moved: 0,
                    ..s.census
                });
            }
            let mut keys: Vec<_> = by_reg.keys().copied().collect();
            keys.sort_by_key(|&(r, h)| (r.index(), h));
            for k in keys {
                let (p, b) = compress::compress_tb_register(&by_reg[&k], pag);
                registers += b;
                match p {
                    TbPattern::GlobalUniform => census.global_uniform += 1,
                    TbPattern::GlobalStrided => census.global_strided += 1,
                    TbPattern::Local | TbPattern::Random => {}
                }
            }
            census.moved = registers;
            census.tb_level_tbs = 1;
            census.tb_level_moved = registers;
            census.tb_level_warp_moved = pending.iter().map(|(_, s)| s.moved).sum();
        } else {
            for (_, s) in &pending {
                registers += s.moved;
                census.add(&s.census);
            }
        }
        let work: u64 = pending.iter().map(|(_, s)| s.work).sum();
        let warps = context.warps.len();
        let metadata = self.metadata_bytes(&kernel, warps);
        let Some(s) = self.saving.get_mut(&(sm, tb)) else {
            return Err(TimingError::Mechanism(format!(
                "{}: TB {tb:?} on SM {sm:?} stopped without a request",
                self.name
            )));
        };
        for (i, save) in pending {
            s.warps[i] = Some(save);
        }
        // Everything not kept is lost with the SM's register file (registers kept in place
        // are not lost at all).
        for (i, wc) in context.warps.iter_mut().enumerate() {
            let Some(save) = &s.warps[i] else { continue };
            if s.keep_registers {
                continue;
            }
            // Lanes that exited run no save routine and have nothing saved.
            let gone = !lanes(&wc.warp);
            for r in kernel.regs.ids() {
                let keep = save.keep.contains(r);
                for l in 0..WARP_SIZE {
                    if !keep || gone & (1 << l) != 0 {
                        wc.warp.regs[r.index() * WARP_SIZE + l] =
                            0xdead_0000_0000_0000 | (r.index() as u64) << 8 | l as u64;
                    }
                }
            }
        }
        let registers = if s.keep_registers { 0 } else { registers };
        s.bytes.registers += registers;
        s.census.add(&RegisterCensus {
            moved: registers,
            ..census
        });
        s.bytes.shared = if s.keep_shared {
            0
        } else {
            context.shared.len() as u64
        };
        s.bytes.stack_barrier =
            stack_barrier_bytes(context.warps.iter().map(|w| w.warp.stack.len()));
        s.bytes.metadata = metadata;
        s.stopped = now;
        s.hold = Some(hold);
        let rest = registers + s.bytes.shared + s.bytes.stack_barrier + metadata;
        let ready = if self.config.compression == Compression::None || work == 0 {
            now
        } else {
            let free = self.compressor_free.entry(sm).or_insert(0);
            let start = now.max(*free);
            *free = start + work;
            start + work + self.config.compressor_latency
        };
        let id = cx.transfer(
            sm,
            Direction::Save,
            s.area + s.written,
            rest,
            tb.launch,
            ready,
        )?;
        s.written += rest;
        s.moving.push((id, ready, None));
        s.last = Some(id);
        s.context = Some(context);
        self.moving.insert((sm, id), Moving::Save(tb));
        Ok(())
    }

    fn finished(&mut self, sm: SmId, tb: TbRef, cycle: u64, cx: &mut Cx) {
        // A TB that finished before it could stop drained.
        if let Some(requested) = self.requests.take(sm, tb) {
            if let Some(s) = self.saving.remove(&(sm, tb)) {
                cx.machine.memory_mut().free(s.area);
            }
            cx.out
                .records
                .push(Record::drained(sm, tb, requested, cycle));
        }
    }

    fn transfer_done(&mut self, sm: SmId, id: TransferId, cx: &mut Cx) -> Result<(), TimingError> {
        let Some(m) = self.moving.remove(&(sm, id)) else {
            return Ok(());
        };
        let now = cx.machine.cycle();
        match m {
            Moving::Save(tb) => {
                let Some(s) = self.saving.get_mut(&(sm, tb)) else {
                    return Ok(());
                };
                if let Some(m) = s.moving.iter_mut().find(|m| m.0 == id) {
                    m.2 = Some(now);
                }
                if s.last != Some(id) {
                    // A warp's registers: the save goes on.
                    return Ok(());
                }
                let s = self.saving.remove(&(sm, tb)).expect("saving");
                let hold = s.hold.expect("stopped");
                if s.keep_registers || s.keep_shared {
                    let keep = Keep::of(s.keep_registers, s.keep_shared).expect("one part kept");
                    cx.ask(Request::Park { sm, hold, keep })?;
                    let demand = *cx.machine.launch(tb.launch).demand();
                    let context = s.context.as_ref().expect("stopped");
                    // Saved after all, parked registers would go whole (4 bytes each).
                    let registers = u64::from(demand.registers) * 4;
                    self.parked.insert(
                        tb,
                        Parked {
                            sm,
                            hold,
                            for_kernel: s.next,
                            bytes: if s.keep_registers { registers } else { 0 }
                                + if s.keep_shared {
                                    context.shared.len() as u64
                                } else {
                                    0
                                },
                        },
                    );
                } else {
                    cx.ask(Request::Release { sm, hold })?;
                }
                cx.out.records.push(Record::Preempted {
                    sm,
                    tb,
                    how: How::Switched,
                    requested: s.requested,
                    stopped: s.stopped,
                    moving: s
                        .moving
                        .iter()
                        .map(|&(_, from, to)| (from, to.unwrap_or(now)))
                        .collect(),
                    released: now,
                    bytes: s.bytes,
                    registers: s.census,
                });
                cx.out.preempted.push(Preempted {
                    context: s.context.expect("stopped"),
                    area: s.area,
                    bytes: s.bytes,
                });
            }
            Moving::Unpark(tb) => {
                // The parked parts are in memory now: the TB may resume anywhere.
                if let Some(p) = self.parked.remove(&tb) {
                    cx.ask(Request::Release { sm, hold: p.hold })?;
                    *self.unparked_bytes.entry(tb).or_default() += p.bytes;
                }
            }
            Moving::Restore(mut r) => {
                if let Some(rest) = r.then.take() {
                    let launch = r.preempted.context.tb.launch;
                    let now = cx.machine.cycle();
                    let id =
                        cx.transfer(sm, Direction::Restore, r.preempted.area, rest, launch, now)?;
                    self.moving.insert((sm, id), Moving::Restore(r));
                    return Ok(());
                }
                let p = r.preempted;
                let tb = p.context.tb;
                cx.ask(Request::Install {
                    sm,
                    context: p.context,
                    into: Some(r.hold),
                    start: Start::Running,
                })?;
                cx.machine.memory_mut().free(p.area);
                cx.out.records.push(Record::Restored {
                    sm,
                    tb,
                    started: r.started,
                    finished: now,
                    bytes: p.bytes,
                });
            }
        }
        Ok(())
    }

    fn can_resume(&self, sm: SmId, p: &Preempted, m: &gpu::timing::Machine) -> bool {
        match self.parked.get(&p.context.tb) {
            Some(k) => k.sm == sm && m.fits_unpark(sm, k.hold),
            None => m.fits(sm, p.context.tb.launch),
        }
    }

    fn assigned(
        &mut self,
        sm: SmId,
        launch: Option<LaunchId>,
        cx: &mut Cx,
    ) -> Result<(), TimingError> {
        let Some(launch) = launch else {
            return Ok(());
        };
        // Parked parts stay for the kernel they made room for and for their own; a third
        // kernel gets the room: they are saved after all.
        let mut evict: Vec<TbRef> = self
            .parked
            .iter()
            .filter(|(tb, p)| {
                p.sm == sm
                    && tb.launch != launch
                    && p.for_kernel != Some(launch)
                    && !self
                        .moving
                        .values()
                        .any(|m| matches!(m, Moving::Unpark(t) if t == *tb))
            })
            .map(|(tb, _)| *tb)
            .collect();
        evict.sort_by_key(|t| (t.launch, t.index));
        for tb in evict {
            let p = &self.parked[&tb];
            let area = cx.machine.memory_mut().alloc(p.bytes.max(1));
            let now = cx.machine.cycle();
            let id = cx.transfer(sm, Direction::Save, area, p.bytes, tb.launch, now)?;
            cx.machine.memory_mut().free(area);
            self.moving.insert((sm, id), Moving::Unpark(tb));
        }
        Ok(())
    }

    fn resume(&mut self, sm: SmId, mut p: Preempted, cx: &mut Cx) -> Result<(), TimingError> {
        let tb = p.context.tb;
        let hold = match self.parked.remove(&tb) {
            Some(k) => {
                cx.ask(Request::Unpark { sm, hold: k.hold })?;
                k.hold
            }
            None => cx
                .ask(Request::Hold {
                    sm,
                    launch: tb.launch,
                })?
                .hold()
                .expect("a hold's ticket names it"),
        };
        // Parked parts saved after all come back with the rest.
        if let Some(extra) = self.unparked_bytes.remove(&tb) {
            p.bytes.registers += extra;
        }
        let now = cx.machine.cycle();
        // The CCB entry and pattern vectors come first: they say where and how the rest is.
        // (The metadata was written last, after the data.)
        let data = p.bytes.total() - p.bytes.metadata;
        let (from, first, then) = if p.bytes.metadata > 0 {
            (p.area + data, p.bytes.metadata, Some(data))
        } else {
            (p.area, data, None)
        };
        let id = cx.transfer(sm, Direction::Restore, from, first, tb.launch, now)?;
        self.moving.insert(
            (sm, id),
            Moving::Restore(Box::new(Restoring {
                hold,
                started: now,
                preempted: p,
                then,
            })),
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpu::exec::StackEntry;
    use kir::Id;

    /// A loop with a preemption point, run through the point pass.
    fn looped() -> Kernel {
        let text = r#"
.version 7.0
.target sm_70
.address_size 64
.visible .entry k(.param .u64 p)
{
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    .reg .b64 %rd<2>;
    ld.param.u64 %rd1, [p];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, 0;
L1:
    add.s32 %r2, %r2, %r1;
    setp.lt.s32 %p1, %r2, 100;
    @%p1 bra L1;
    st.global.u32 [%rd1], %r2;
    ret;
}
"#;
        let module = gpu::lower_ptx("k.ptx", text).expect("lowers");
        let kernel = module.kernels.values().next().expect("one kernel");
        let pass = PointPass {
            config: Default::default(),
        };
        let sm = gpu::config::GpuConfig::preset("gtx480")
            .expect("preset")
            .sm
            .resources;
        pass.run(kernel, &sm).expect("points fit").0
    }

    fn warp_at(kernel: &Kernel, stack: Vec<StackEntry>) -> Warp {
        Warp {
            index: 0,
            regs: vec![0; kernel.regs.len() * WARP_SIZE],
            stack,
            valid: u32::MAX,
            exited: 0,
            executed: 0,
            thread_executed: 0,
        }
    }

    #[test]
    fn a_diverged_warp_at_a_point_takes_the_divergent_vector() {
        let mut kernel = looped();
        let pp = kernel
            .insts
            .ids()
            .find(|&i| matches!(kernel.insts[i].op, Op::Pp { .. }))
            .expect("the loop got a point");
        // Make the two versions tell apart.
        let (plain, divergent) = (LiveVector(0b0101), LiveVector(0b1111));
        kernel.insts[pp].op = Op::Pp { live: plain };
        let dummy = InstId::new(pp.index() + 1);
        kernel.insts[dummy].op = Op::PpDivergent { live: divergent };
        let at = dummy.0;
        let one = warp_at(
            &kernel,
            vec![StackEntry {
                pc: at,
                rpc: u32::MAX,
                mask: u32::MAX,
            }],
        );
        assert_eq!(point_vector(&kernel, &one), Some(plain));
        // Lanes parked elsewhere (the other side of a branch) make the warp diverged.
        let two = warp_at(
            &kernel,
            vec![
                StackEntry {
                    pc: at + 3,
                    rpc: u32::MAX,
                    mask: 0xffff_0000,
                },
                StackEntry {
                    pc: at,
                    rpc: at + 3,
                    mask: 0x0000_ffff,
                },
            ],
        );
        assert_eq!(point_vector(&kernel, &two), Some(divergent));
        // Not at a point: no vector.
        let elsewhere = warp_at(
            &kernel,
            vec![StackEntry {
                pc: 1,
                rpc: u32::MAX,
                mask: u32::MAX,
            }],
        );
        assert_eq!(point_vector(&kernel, &elsewhere), None);
    }
}
