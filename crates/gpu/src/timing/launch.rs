//! A launch held by the machine: the kernel as it is timed, what one of its TBs takes, where
//! its grid stands, and the counters its statistics are built from.

use std::sync::Arc;

use kir::{InstId, Kernel};
use memsys::MemStats;

use super::decoded::Decoded;
use super::ids::TbRef;
use super::stats::{FrontendStats, SmStats, TimedStats};
use crate::exec::LaunchCtx;
use crate::limits::Limit;
use crate::memory::DeviceMemory;
use crate::occupancy::{Occupancy, TbDemand};

/// A kernel as the timing model runs it: after register allocation by default, so registers
/// per thread, register banks and context sizes are those of physical registers and spill
/// code is timed (DESIGN.md §2, "Kernel IR").
#[derive(Clone, Debug)]
pub struct TimedKernel {
    pub kernel: Arc<Kernel>,
    /// Registers per thread for occupancy (what `ptxas -v` would report, within the margin
    /// `regalloc/REGISTERS.md` measures).
    pub regs_per_thread: u32,
    /// For a rewritten kernel, the PC of the PTX instruction each instruction serves, so
    /// that errors name PTX instructions.
    pub origins: Option<Arc<[InstId]>>,
}

impl TimedKernel {
    /// `kernel` allocated to at most `max_registers` registers per thread. Should allocation
    /// fail (it does not on any kernel the project has met), the kernel is timed as it is,
    /// with its virtual register count, capped, standing in.
    pub fn allocated(
        kernel: &Arc<Kernel>,
        max_registers: u32,
        uniform_registers: u32,
    ) -> TimedKernel {
        let config = regalloc::AllocConfig {
            max_registers: max_registers.max(1),
            uniform_registers,
            ..Default::default()
        };
        match regalloc::allocate(kernel, &config) {
            Ok(a) => TimedKernel {
                regs_per_thread: a.gpr_count.max(1),
                origins: Some(a.origins.iter().map(|o| o.inst).collect()),
                kernel: Arc::new(a.kernel),
            },
            Err(_) => TimedKernel::unallocated(kernel, max_registers),
        }
    }

    /// This kernel rewritten by `pass` (the same kernel if the pass declines), its
    /// instructions still traced back to the PTX.
    pub fn rewritten(
        self,
        pass: &dyn super::KernelPass,
        sm: &crate::occupancy::SmResources,
    ) -> TimedKernel {
        let Some((kernel, from)) = pass.run(&self.kernel, sm) else {
            return self;
        };
        let origins = from
            .iter()
            .map(|&f| match &self.origins {
                Some(o) => o.get(kir::Id::index(f)).copied().unwrap_or(f),
                None => f,
            })
            .collect();
        TimedKernel {
            kernel: Arc::new(kernel),
            regs_per_thread: self.regs_per_thread,
            origins: Some(origins),
        }
    }

    /// `kernel` timed as written (virtual registers), with the allocator's register count
    /// for occupancy.
    pub fn unallocated(kernel: &Arc<Kernel>, max_registers: u32) -> TimedKernel {
        TimedKernel {
            kernel: kernel.clone(),
            regs_per_thread: super::physical_registers(kernel, max_registers),
            origins: None,
        }
    }
}

/// Counters of the machine at a moment (for the statistics of an interval).
pub(super) struct Snapshot {
    pub memory: MemStats,
    pub sms: Vec<SmStats>,
}

/// A launch on the machine.
pub struct Launch {
    pub(super) ctx: LaunchCtx,
    pub(super) decoded: Decoded,
    pub(super) demand: TbDemand,
    pub(super) occupancy: Occupancy,
    pub(super) regs_per_thread: u32,
    pub(super) origins: Option<Arc<[InstId]>>,
    /// Local memory per thread in 4-byte words, and per TB in bytes.
    pub(super) frame_words: u64,
    frame_bytes: u64,
    /// Local-memory frames of finished TBs, ready for new ones; every frame it allocated.
    free_frames: Vec<u64>,
    frames: Vec<u64>,
    pub(super) total: u64,
    /// The next new TB of the grid.
    pub(super) next_tb: u64,
    /// Discarded TBs to run again from their start, before new ones.
    requeued: std::collections::VecDeque<u64>,
    /// TBs on SMs, TBs stopped and held outside the machine, TBs finished.
    pub(super) resident: u64,
    pub(super) held: u64,
    pub(super) done: u64,
    /// Warp instructions the finished TBs executed.
    pub(super) done_instructions: u64,
    /// Cycles finished TBs spent on their SMs (since their last placement).
    pub(super) done_cycles: u64,
    pub(super) submitted_at: u64,
    /// Runaway limits ([`crate::limits`]): in warp instructions and in core cycles.
    pub(super) instruction_limit: Limit,
    pub(super) max_cycles: Limit,
    /// What the progress rule counts: the TBs finished and the launch's warp instructions
    /// at the last instruction check that saw a TB finish, and the cycles with TBs resident
    /// since a TB last finished.
    pub(super) progress: LaunchProgress,
    pub(super) started_at: Option<u64>,
    pub(super) last_tb_at: Option<u64>,
    pub(super) finished_at: Option<u64>,
    pub(super) start: Option<Box<Snapshot>>,
    /// SM counters when the last TB finished.
    pub(super) at_last_tb: Option<Vec<SmStats>>,
    pub(super) stats: Option<Box<TimedStats>>,
    /// Register liveness of the kernel's blocks, computed at its first live-register
    /// checkpoint ([`crate::timing::Scope::Live`]).
    liveness: std::sync::OnceLock<kir::liveness::BlockLiveness>,
    /// What each register's lanes hold before each instruction, computed at the first
    /// compressed context size GPUDuet asks for ([`Launch::context_bytes`]).
    patterns: std::sync::OnceLock<regalloc::patterns::ValuePatterns>,
    /// Its TBs per SM beyond the scheduling limits ([`crate::tlp`]; none unless the GPU's
    /// `[sm.tlp]` is on).
    pub(super) tlp: crate::tlp::ExtraTbs,
    /// Registers per thread a spilled register context of its warps reserves
    /// ([`Launch::live_registers_at_switch_points`]; 0 unless `[sm.tlp]` is on).
    pub(super) context_registers: u32,
    /// ME's bound were the bypassed L1 a third context store (0 without TLP), and whether
    /// the L1 was one while the launch ran ([`super::tlp_monitor`]).
    pub(super) extra_with_l1: u32,
    pub(super) l1_store: bool,
}

impl Launch {
    pub(super) fn new(
        ctx: LaunchCtx,
        demand: TbDemand,
        occupancy: Occupancy,
        regs_per_thread: u32,
        origins: Option<Arc<[InstId]>>,
        now: u64,
    ) -> Launch {
        let native = occupancy.tbs_per_sm;
        Launch {
            decoded: Decoded::of(&ctx.kernel),
            frame_words: u64::from(ctx.kernel.local_size.div_ceil(4)),
            frame_bytes: ctx.local_frame_bytes(),
            total: ctx.num_tbs(),
            ctx,
            demand,
            occupancy,
            regs_per_thread,
            origins,
            free_frames: Vec::new(),
            frames: Vec::new(),
            next_tb: 0,
            requeued: std::collections::VecDeque::new(),
            resident: 0,
            held: 0,
            done: 0,
            done_instructions: 0,
            done_cycles: 0,
            submitted_at: now,
            instruction_limit: Limit::WithoutProgress(crate::limits::STALL_WARP_INSTRUCTIONS),
            max_cycles: Limit::WithoutProgress(crate::limits::STALL_CYCLES),
            progress: LaunchProgress::default(),
            started_at: None,
            last_tb_at: None,
            finished_at: None,
            start: None,
            at_last_tb: None,
            stats: None,
            liveness: std::sync::OnceLock::new(),
            patterns: std::sync::OnceLock::new(),
            tlp: crate::tlp::ExtraTbs {
                native,
                extra: 0,
                moved: crate::tlp::Moved::Slots,
            },
            context_registers: 0,
            extra_with_l1: 0,
            l1_store: false,
        }
    }

    /// 32-bit words of registers in `live` (a predicate takes none: predicates have their
    /// own file; a 64-bit register takes two).
    pub(super) fn register_words(&self, live: &kir::RegSet) -> u32 {
        let regs = &self.ctx.kernel.regs;
        live.iter()
            .map(|r| {
                let ty = regs[r].ty;
                if ty == kir::inst::Ty::Pred {
                    0
                } else {
                    ty.size().div_ceil(4)
                }
            })
            .sum()
    }

    /// Bytes one warp's registers in `live` take spilled, live at the instructions `pcs`
    /// (a warp's stack entries): with `compressed`, each 32-bit register at the size
    /// papers/lin-lightweight §III-C's compressor gives its pattern there (the weakest
    /// over `pcs`, proved by `regalloc::patterns`: 4 bytes per pattern analysing group
    /// uniform, 8 strided, 4 per lane random) plus the pattern vector (two bits per
    /// register of the kernel), or the plain size where that is no smaller (a context of
    /// random registers is stored as it is); else 128 bytes per 32-bit register
    /// (Equation 3.2). Predicates are left out, as [`Launch::register_words`] leaves them.
    pub(super) fn context_bytes(&self, live: &kir::RegSet, pcs: &[u32], compressed: bool) -> u64 {
        use regalloc::patterns::ValuePattern;
        let plain = u64::from(self.register_words(live)) * 128;
        if !compressed {
            return plain;
        }
        let block_x = self.ctx.block[0].max(1);
        let patterns = self
            .patterns
            .get_or_init(|| regalloc::patterns::ValuePatterns::compute(&self.ctx.kernel, block_x));
        let groups = u64::from(32u32.div_ceil(block_x.min(32)));
        let regs = &self.ctx.kernel.regs;
        let word = |p: ValuePattern| match p {
            ValuePattern::Uniform => 4 * groups,
            ValuePattern::Strided => 8 * groups,
            ValuePattern::Random => 128,
        };
        let mut bytes = (2 * regs.len() as u64).div_ceil(8);
        for r in live.iter() {
            let ty = regs[r].ty;
            if ty == kir::inst::Ty::Pred {
                continue;
            }
            let p = pcs
                .iter()
                .map(|&pc| patterns.before(kir::InstId(pc), r))
                .max()
                .unwrap_or(ValuePattern::Random);
            bytes += word(p);
            if ty.size() > 4 {
                // A 64-bit virtual register: its high half uniform where the value is
                // strided (`regalloc::patterns`' assumption), else as the value.
                let high = if p == ValuePattern::Strided {
                    ValuePattern::Uniform
                } else {
                    p
                };
                bytes += word(high) * (u64::from(ty.size().div_ceil(4)) - 1);
            }
        }
        bytes.min(plain)
    }

    /// Registers per thread a spilled register context takes at the kernel's switch
    /// points (papers/lin-thesis §3.6.6: the first uses of registers loaded from memory,
    /// and barriers) — the live ones, compressed when `compressed` ([`Self::context_bytes`],
    /// in 128-byte warp registers) — at most its allocation: the size GPUDuet reserves
    /// for a spilled register context.
    pub(super) fn live_registers_at_switch_points(&self, compressed: bool) -> u32 {
        use crate::pipeline::OpClass;
        let insts = self.ctx.kernel.insts.as_slice();
        let d = &self.decoded;
        let loaded: std::collections::HashSet<u32> = (0..insts.len() as u32)
            .filter(|&pc| d.class(pc) == OpClass::Mem)
            .flat_map(|pc| d.destinations(pc).iter().copied())
            .collect();
        (0..insts.len() as u32)
            .filter(|&pc| {
                matches!(insts[pc as usize].op, kir::inst::Op::Bar { .. })
                    || d.sources(pc).iter().any(|r| loaded.contains(r))
            })
            .map(|pc| {
                let bytes = self.context_bytes(&self.live_in(pc), &[pc], compressed);
                u32::try_from(bytes.div_ceil(128)).unwrap_or(u32::MAX)
            })
            .max()
            .unwrap_or(0)
            .min(self.regs_per_thread)
    }

    /// The registers live before instruction `pc` of the timed kernel (plain backward
    /// liveness: a SIMT warp's live registers are the union over its stack entries' PCs).
    pub(super) fn live_in(&self, pc: u32) -> kir::RegSet {
        use kir::Id;
        let kernel = &self.ctx.kernel;
        let blocks = self.liveness.get_or_init(|| {
            let mut l = kir::liveness::BlockLiveness::new();
            l.compute_kernel(kernel);
            l
        });
        let cfg = &kernel.cfg;
        let b = cfg.block_of[pc as usize];
        let block = &cfg.blocks[b];
        let mut live = blocks.live_out[b.index()].clone();
        for i in (pc as usize..block.end.index()).rev() {
            kir::liveness::step_back(&mut live, &kernel.insts.as_slice()[i]);
        }
        live
    }

    /// The launch as it runs (its kernel is the timed one).
    pub fn ctx(&self) -> &LaunchCtx {
        &self.ctx
    }

    /// What one TB takes on an SM.
    pub fn demand(&self) -> &TbDemand {
        &self.demand
    }

    /// TBs of one kernel alone per SM, and what limits them.
    pub fn occupancy(&self) -> &Occupancy {
        &self.occupancy
    }

    pub fn regs_per_thread(&self) -> u32 {
        self.regs_per_thread
    }

    /// TBs in the grid.
    pub fn tbs(&self) -> u64 {
        self.total
    }

    /// TBs to dispatch: new ones and discarded ones to run again.
    pub fn undispatched(&self) -> u64 {
        self.total - self.next_tb + self.requeued.len() as u64
    }

    /// TBs on SMs now.
    pub fn resident(&self) -> u64 {
        self.resident
    }

    /// TBs stopped and not installed again.
    pub fn held(&self) -> u64 {
        self.held
    }

    /// TBs finished.
    pub fn done(&self) -> u64 {
        self.done
    }

    /// The mean warp instructions of a finished TB (a per-kernel counter pair hardware can
    /// keep); `None` before any TB has finished.
    pub fn mean_tb_instructions(&self) -> Option<f64> {
        (self.done > 0).then(|| self.done_instructions as f64 / self.done as f64)
    }

    /// The mean core cycles a finished TB spent on its SM since it was last placed (the
    /// profiled TB execution time of papers/li-pep §3.2); `None` before any TB has
    /// finished.
    pub fn mean_tb_cycles(&self) -> Option<f64> {
        (self.done > 0).then(|| self.done_cycles as f64 / self.done as f64)
    }

    /// Core cycles at which it arrived, started and finished.
    pub fn submitted_at(&self) -> u64 {
        self.submitted_at
    }
    pub fn started_at(&self) -> Option<u64> {
        self.started_at
    }
    pub fn finished_at(&self) -> Option<u64> {
        self.finished_at
    }

    /// Its statistics, once it has finished.
    pub fn stats(&self) -> Option<&TimedStats> {
        self.stats.as_deref()
    }

    /// The TB the next dispatch places: a discarded one first, else the next new one.
    pub(super) fn next(&self, id: super::ids::LaunchId) -> TbRef {
        TbRef {
            launch: id,
            index: self.requeued.front().copied().unwrap_or(self.next_tb),
        }
    }

    /// Takes the TB [`Launch::next`] names.
    pub(super) fn take_next(&mut self) {
        if self.requeued.pop_front().is_none() {
            self.next_tb += 1;
        }
    }

    /// A discarded TB runs again from its start.
    pub(super) fn requeue(&mut self, index: u64) {
        self.requeued.push_back(index);
    }

    /// A zeroed local-memory frame for a new TB (0 when the kernel has no local memory): a
    /// finished TB's, or a new allocation. A fresh TB's local memory reads zero in every
    /// engine of this simulator (real hardware leaves it undefined).
    pub(super) fn take_frame(&mut self, mem: &mut DeviceMemory) -> u64 {
        if self.frame_bytes == 0 {
            return 0;
        }
        match self.free_frames.pop() {
            Some(b) => {
                mem.write_bytes(b, &vec![0; self.frame_bytes as usize])
                    .expect("a frame of this launch is mapped");
                b
            }
            None => {
                let b = mem.alloc(self.frame_bytes);
                self.frames.push(b);
                b
            }
        }
    }

    /// A finished TB's frame, free for the next.
    pub(super) fn give_frame(&mut self, base: u64) {
        if self.frame_bytes != 0 {
            self.free_frames.push(base);
        }
    }

    /// Frees every frame (the launch has finished).
    pub(super) fn free_frames(&mut self, mem: &mut DeviceMemory) {
        for b in self.frames.drain(..) {
            mem.free(b);
        }
        self.free_frames.clear();
    }

    /// An error of the timed kernel, naming the PTX instructions behind its PCs.
    pub(super) fn ptx_error(&self, e: crate::error::ExecError) -> crate::error::ExecError {
        match &self.origins {
            Some(o) => e.map_pcs(|pc| o.get(pc.0 as usize).copied().unwrap_or(pc)),
            None => e,
        }
    }

    pub(super) fn warps_per_tb(&self) -> u32 {
        self.ctx.warps_per_tb()
    }
}

/// Sums per-SM front-end counters.
pub(super) fn frontend_total(sms: &[SmStats]) -> FrontendStats {
    let mut f = FrontendStats::default();
    for s in sms {
        f.add(&s.frontend);
    }
    f
}

/// Where a launch stood when it last made progress (one of its TBs finished), for the
/// runaway rule of [`crate::limits`].
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct LaunchProgress {
    /// TBs finished when the instruction check last looked.
    pub done: u64,
    /// The launch's warp instructions when the instruction check last saw a TB finish.
    pub instructions: u64,
    /// Cycles with some of its TBs resident since one last finished.
    pub stalled_cycles: u64,
}
