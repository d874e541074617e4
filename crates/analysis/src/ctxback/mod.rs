//! CTXBack: low-latency context switching by context flashback (papers/ji-ctxback), with the
//! context sizes it is compared against.
//!
//! For every instruction `i` of a kernel — the instruction before which a warp receives the
//! preemption signal — this module computes the register context each technique saves:
//!
//! * **BASELINE** (§V): every register the kernel was allocated;
//! * **LIVE** (§II-B, papers/lin-lightweight): the registers live at `i`;
//! * **CS-Defer** (§II-B, [`defer`]): keep running to a following instruction with a smaller
//!   context and save that one;
//! * **CTXBack** (§III, [`flashback`]): save the context of a *preceding* instruction (the
//!   flashback point), reverting ([`revert`]) and re-executing on resume what lies between;
//! * **CTXBack+CS-Defer** (§IV-C): per instruction, whichever has the lower estimated
//!   preemption latency.
//!
//! [`routine`] turns the flashback plans into the dedicated preemption and resume routines
//! of §IV-A, as kernel IR instructions, and installs them after the kernel's code
//! ([`Routines::install`]) so that the functional core executes them. The plans hold when a
//! warp is preempted again after a resume, at the same or a later instruction ("Repeated
//! preemption" in [`flashback`]).
//!
//! The analysis reasons about *physical* registers — that one register is overwritten by a
//! later value is the whole problem CTXBack solves — so run it on a register-allocated kernel
//! (`regalloc::allocate`). It also runs on virtual registers (the figure tests do, to name the
//! paper's registers), where PTX code that reassigns a register plays the same role.
//!
//! On-chip scalar register backup (§III-D) is [`osrb`]: a rewrite of the kernel that the
//! analysis then runs on ([`backup_scalars`]).
//!
//! A diverged warp is saved lane group by lane group, each group (the top SIMT stack entry's
//! lanes, and each parked entry's own) with the routines of the PC where it waits (see
//! "Divergent warps" in [`routine`]). [`generate_combined_routines`] adds CTXBack+CS-Defer's
//! CS-Defer switches (§IV-C); [`generate_cs_defer_routines`] gives CS-Defer alone as routines
//! (plain live-in switches, and CS-Defer switches where it defers).

pub mod defer;
pub mod flashback;
pub mod osrb;
pub mod revert;
pub mod routine;
pub mod widths;

use kir::{Id, InstId, Kernel};

use crate::idempotence::{AliasModel, Idempotence, IdempotenceConfig};
use crate::liveness::Liveness;

pub use defer::Deferral;
pub use flashback::{Backing, Flashback, FlashbackCost, ResumeStep, SavedReg, Version};
pub use osrb::{backup_scalars, Backup, BackupSlot, OsrbConfig, OsrbKernel};
pub use revert::{revert_of, Revert};
pub use routine::{
    generate_combined_routines, generate_cs_defer_routines, generate_routines, preempt_routine,
    resume_routine, DeferEntry, InstalledDefer, InstalledRoutines, RoutineEntry, RoutineError,
    Routines,
};
pub use widths::{ContextSize, RegClass, Widths};

/// Which flashback points are admitted (the progression of papers/ji-ctxback §III).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Condition {
    /// §III-A: the whole context of `f` must still be in the registers at `i`; everything
    /// needed is re-executed.
    Basic,
    /// §III-B, Algorithm 1: results of `[f, i)` may also be saved and reloaded.
    Relaxed,
    /// §III-C, Algorithm 2: overwritten registers may also be recovered by reverting.
    #[default]
    Reverting,
}

/// Relative costs used to estimate preemption latency and resuming time.
///
/// Units are issue slots of one warp. Saving a 32-bit vector register moves 128 bytes per
/// warp through the memory system, which bandwidth-bound context switching pays for every
/// warp of the SM (papers/ji-ctxback §V-B: "the ratios of the preemption time of different
/// approaches are about the same as the ratios of their context size"), so it is weighted
/// as several ALU instructions; uniform registers and predicates are 4 bytes per warp.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CostModel {
    /// Storing one 32-bit vector register of a warp.
    pub save_word: u32,
    /// Loading one 32-bit vector register of a warp.
    pub restore_word: u32,
    /// Storing or loading one uniform register or one predicate.
    pub scalar: u32,
    /// Executing an ALU instruction (a re-execution, a revert, a deferred instruction).
    pub alu: u32,
    /// Re-executing a load.
    pub memory: u32,
}

impl Default for CostModel {
    fn default() -> Self {
        CostModel {
            save_word: 8,
            restore_word: 8,
            scalar: 1,
            alu: 1,
            memory: 8,
        }
    }
}

/// Parameters of the analysis.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CtxBackConfig {
    pub condition: Condition,
    /// Flashback points are searched at most this many instructions back.
    pub window: u32,
    /// CS-Defer follows the path at most this many instructions forward.
    pub defer_window: u32,
    pub cost: CostModel,
    /// Decides whether global loads may be re-executed: only if no store of the kernel may
    /// alias a location it reads (relaxed idempotence, [`crate::idempotence`]).
    pub alias: AliasModel,
    /// On-chip scalar register backup (§III-D, [`osrb`]): off by default, because unlike the
    /// other techniques it changes the kernel's code. When set, [`backup_scalars`] inserts the
    /// backups, and every analysis may copy values back from register copies
    /// ([`ResumeStep::CopyBack`]).
    pub osrb: Option<OsrbConfig>,
}

impl Default for CtxBackConfig {
    fn default() -> Self {
        CtxBackConfig {
            condition: Condition::Reverting,
            window: 32,
            defer_window: 32,
            cost: CostModel::default(),
            alias: AliasModel::Conservative,
            osrb: None,
        }
    }
}

/// Which technique CTXBack+CS-Defer uses at an instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Technique {
    CtxBack,
    CsDefer,
}

/// Averages over the instructions of a kernel, in 32-bit registers per thread (vector and
/// uniform registers; predicates are left out, as in papers/ji-ctxback Fig. 7).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Summary {
    pub instructions: usize,
    pub baseline: f64,
    pub live: f64,
    pub cs_defer: f64,
    pub ctxback: f64,
    pub combined: f64,
    /// Instructions whose CTXBack flashback point precedes them (the others switch at `i`).
    pub flashed_back: usize,
}

impl Summary {
    /// `1 − x / baseline` (0 when the baseline is empty).
    pub fn reduction(&self, x: f64) -> f64 {
        if self.baseline == 0.0 {
            0.0
        } else {
            1.0 - x / self.baseline
        }
    }
}

/// Contexts of every technique at every instruction of one kernel.
#[derive(Clone, Debug, Default)]
pub struct CtxBack {
    baseline: ContextSize,
    live: Vec<ContextSize>,
    defer: Vec<Deferral>,
    next_smaller: Vec<Option<Deferral>>,
    flashback: Vec<Flashback>,
    /// Per instruction: what a plain switch before it saves within CTXBack+CS-Defer.
    kept: Vec<Vec<SavedReg>>,
    /// CS-Defer's choice within CTXBack+CS-Defer: switching saves [`CtxBack::kept`].
    combined_defer: Vec<Deferral>,
}

struct Prepared {
    live: Liveness,
    widths: Widths,
    global_loads_stable: bool,
}

/// `backups`: OSRB copies of `kernel`, whose registers stay live over their backup period.
fn prepare(kernel: &Kernel, config: &CtxBackConfig, backups: &[Backup]) -> Prepared {
    let mut live = Liveness::new();
    live.compute(kernel);
    for b in backups {
        if let Some(r) = b.slot.reg() {
            live.keep_live(r, b.copy, b.until);
        }
    }
    let idem = Idempotence::compute(
        kernel,
        &IdempotenceConfig {
            alias: config.alias,
        },
    );
    Prepared {
        live,
        widths: Widths::compute(kernel),
        global_loads_stable: idem.kernel_relaxed(),
    }
}

impl CtxBack {
    /// Analyses `kernel` (register-allocated, see the module docs).
    pub fn compute(kernel: &Kernel, config: &CtxBackConfig) -> Self {
        Self::compute_with(kernel, config, &[])
    }

    /// Analyses a kernel rewritten by OSRB ([`backup_scalars`] returns this analysis). A
    /// backup register counts as live over its backup period: a preemption there must keep
    /// it, since a later one in the period may copy back from it.
    pub fn compute_osrb(osrb: &OsrbKernel, config: &CtxBackConfig) -> Self {
        Self::compute_with(&osrb.kernel, config, &osrb.backups)
    }

    fn compute_with(kernel: &Kernel, config: &CtxBackConfig, backups: &[Backup]) -> Self {
        let p = prepare(kernel, config, backups);
        let facts = flashback::KernelFacts::new(kernel, &p.live, &p.widths, p.global_loads_stable);
        let mut planner =
            flashback::Planner::new(&facts, config.condition, config.cost, config.osrb.is_some());
        let (flashback, kept) = flashback::best_of_all(&facts, &mut planner, config.window);
        let (defer, next_smaller) = defer::compute(
            kernel,
            &p.live,
            |j| p.widths.size_at(j, p.live.live_in(j)),
            config.defer_window,
            &config.cost,
        );
        let (combined_defer, _) = defer::compute(
            kernel,
            &p.live,
            |j| p.widths.size_of(j, kept[j.index()].iter().map(|s| s.reg)),
            config.defer_window,
            &config.cost,
        );
        let live = kernel
            .insts
            .ids()
            .map(|pc| p.widths.size_at(pc, p.live.live_in(pc)))
            .collect();
        CtxBack {
            baseline: p.widths.all_registers(),
            live,
            defer,
            next_smaller,
            flashback,
            kept,
            combined_defer,
        }
    }

    /// Every flashback point of `pc` with its plan, nearest first (for inspection and tests;
    /// [`CtxBack::compute`] keeps only the cheapest). What a plan may read at preemption
    /// depends on the flashbacks chosen before `pc` in its block (see "Repeated preemption"
    /// in [`flashback`]), so those are computed first.
    pub fn candidates(kernel: &Kernel, config: &CtxBackConfig, pc: InstId) -> Vec<Flashback> {
        let p = prepare(kernel, config, &[]);
        let facts = flashback::KernelFacts::new(kernel, &p.live, &p.widths, p.global_loads_stable);
        let mut planner =
            flashback::Planner::new(&facts, config.condition, config.cost, config.osrb.is_some());
        flashback::candidates_of(&facts, &mut planner, pc, config.window)
    }

    /// Instructions analysed.
    pub fn len(&self) -> usize {
        self.flashback.len()
    }

    pub fn is_empty(&self) -> bool {
        self.flashback.is_empty()
    }

    /// BASELINE: every register of the kernel.
    pub fn baseline(&self) -> ContextSize {
        self.baseline
    }

    /// LIVE: the registers live before `pc`.
    pub fn live(&self, pc: InstId) -> ContextSize {
        self.live[pc.index()]
    }

    /// CS-Defer's choice for a signal before `pc` (least estimated latency).
    pub fn cs_defer(&self, pc: InstId) -> &Deferral {
        &self.defer[pc.index()]
    }

    /// The nearest following instruction with a smaller live context, if the path reaches
    /// one within the window.
    pub fn next_smaller(&self, pc: InstId) -> Option<&Deferral> {
        self.next_smaller[pc.index()].as_ref()
    }

    /// CTXBack's choice for a signal before `pc`.
    pub fn flashback(&self, pc: InstId) -> &Flashback {
        &self.flashback[pc.index()]
    }

    /// Every instruction's flashback, in program order.
    pub fn flashbacks(&self) -> &[Flashback] {
        &self.flashback
    }

    /// The registers a plain switch before `pc` saves within CTXBack+CS-Defer, sorted:
    /// `live_in(pc)`, and every register that CTXBack's resume of `pc` leaves holding its
    /// last version (`N(pc) ∩ restored(pc)`, see "Repeated preemption" in [`flashback`]).
    /// The flashbacks of the instructions after `pc` in its block may read those, whichever
    /// way the warp was resumed at `pc`.
    pub fn kept(&self, pc: InstId) -> &[SavedReg] {
        &self.kept[pc.index()]
    }

    /// CS-Defer's choice within CTXBack+CS-Defer for a signal before `pc`: like
    /// [`CtxBack::cs_defer`], but the switch saves [`CtxBack::kept`] instead of the live-in.
    pub fn combined_deferral(&self, pc: InstId) -> &Deferral {
        &self.combined_defer[pc.index()]
    }

    /// CTXBack+CS-Defer: the technique with the lower estimated preemption latency at `pc`
    /// (CTXBack on ties: it does not run the deferred instructions).
    pub fn combined(&self, pc: InstId) -> Technique {
        if self.combined_defer[pc.index()].latency < self.flashback[pc.index()].cost.preempt {
            Technique::CsDefer
        } else {
            Technique::CtxBack
        }
    }

    /// The context saved by CTXBack+CS-Defer at `pc`.
    pub fn combined_context(&self, pc: InstId) -> ContextSize {
        match self.combined(pc) {
            Technique::CtxBack => self.flashback[pc.index()].context,
            Technique::CsDefer => self.combined_defer[pc.index()].context,
        }
    }

    /// Average contexts over the instructions.
    pub fn summary(&self) -> Summary {
        self.summary_over((0..self.len() as u32).map(InstId), self.baseline)
    }

    /// Average contexts over the instructions `pcs`, against `baseline` (for a kernel
    /// rewritten by OSRB: its original instructions, and the original kernel's registers).
    pub fn summary_over(
        &self,
        pcs: impl Iterator<Item = InstId> + Clone,
        baseline: ContextSize,
    ) -> Summary {
        let n = pcs.clone().count();
        if n == 0 {
            return Summary::default();
        }
        let avg =
            |f: &dyn Fn(InstId) -> u32| pcs.clone().map(f).map(f64::from).sum::<f64>() / n as f64;
        Summary {
            instructions: n,
            baseline: f64::from(baseline.words()),
            live: avg(&|pc| self.live[pc.index()].words()),
            cs_defer: avg(&|pc| self.defer[pc.index()].context.words()),
            ctxback: avg(&|pc| self.flashback[pc.index()].context.words()),
            combined: avg(&|pc| self.combined_context(pc).words()),
            flashed_back: pcs
                .filter(|pc| self.flashback[pc.index()].point != *pc)
                .count(),
        }
    }
}
