//! `switchyard analyze`: the compiler side of preemption for one module — registers after
//! allocation, occupancy on a GPU preset, liveness, selective preemption points, and the
//! average per-warp register context of BASELINE (every allocated register) and LIVE (the
//! registers live at the instruction), as papers/ji-ctxback §V-A and papers/lin-lightweight
//! §III-B measure them, and the CS-Defer and CTXBack contexts of papers/ji-ctxback §II-B, §III.

use analysis::ctxback::widths::reg_class;
use analysis::ctxback::{
    backup_scalars, BackupSlot, CtxBack, CtxBackConfig, RegClass, ResumeStep, Technique,
};
use analysis::{Liveness, PpConfig, PpKind, PreemptionPlan, RegSet};
use gpu::config::GpuConfig;
use gpu::occupancy::{Limit, Occupancy, TbDemand};
use kir::{Id, InstId, Kernel, Module, Ty};
use regalloc::{allocate, AllocConfig};
use serde::Serialize;

/// Bytes one 32-bit vector register occupies per warp (32 lanes).
const VECTOR_REG_BYTES: u64 = 128;
/// Bytes one predicate register occupies per warp (one bit per lane).
const PRED_REG_BYTES: u64 = 4;
/// Bytes one uniform (scalar) register occupies per warp.
const UNIFORM_REG_BYTES: u64 = 4;

/// Options of an analysis.
#[derive(Clone, Debug)]
pub struct AnalyzeOptions {
    pub gpu: GpuConfig,
    /// Threads per TB for the occupancy figure; `None`: `.reqntid`/`.maxntid` if the kernel
    /// declares one, else 256.
    pub block: Option<u32>,
    pub alloc: AllocConfig,
    pub points: PpConfig,
    /// NVIDIA's register count (`ptxas -v`), to print beside ours.
    pub ptxas_registers: Option<u32>,
    /// CTXBack settings; with `osrb` set, CTXBack is also computed with on-chip scalar
    /// register backup ([`TechniqueWords::ctxback_osrb`]).
    pub ctxback: CtxBackConfig,
    /// Include the per-instruction table ([`KernelReport::per_instruction`]).
    pub per_instruction: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct Registers {
    /// PTX virtual registers declared.
    pub virtual_registers: usize,
    /// 32-bit general-purpose registers per thread after allocation.
    pub allocated: u32,
    pub predicates: u32,
    pub uniform: u32,
    pub spilled_values: u32,
    pub ptxas: Option<u32>,
}

#[derive(Clone, Debug, Serialize)]
pub struct OccupancyReport {
    pub gpu: String,
    pub threads_per_tb: u32,
    pub tbs_per_sm: u32,
    pub warps_per_sm: u32,
    pub limited_by: Vec<Limit>,
}

#[derive(Clone, Debug, Serialize)]
pub struct LiveStats {
    /// 32-bit registers live per thread (a 64-bit value counts 2), over all instructions.
    pub average: f64,
    pub min: u32,
    pub max: u32,
}

#[derive(Clone, Debug, Serialize)]
pub struct ContextReport {
    /// Bytes per warp if every allocated register is saved (BASELINE).
    pub baseline_bytes_per_warp: u64,
    /// Average over instructions of the bytes per warp of the registers live there (LIVE).
    pub live_bytes_per_warp: f64,
    /// The same with the SIMT-aware (divergent) liveness of papers/lin-lightweight §III-B.
    pub live_divergent_bytes_per_warp: f64,
    /// `1 - live / baseline`, in percent.
    pub live_reduction_percent: f64,
    /// Average register context per thread in 32-bit words (predicates excluded) of each
    /// technique of papers/ji-ctxback §V-A, computed on the allocated kernel.
    pub words_per_thread: TechniqueWords,
}

/// Average 32-bit register words per thread saved at a preemption, per technique.
#[derive(Clone, Debug, Serialize)]
pub struct TechniqueWords {
    pub baseline: f64,
    pub live: f64,
    pub cs_defer: f64,
    pub ctxback: f64,
    pub ctxback_cs_defer: f64,
    /// Instructions whose CTXBack flashback point precedes them.
    pub flashed_back_instructions: usize,
    /// CTXBack with on-chip scalar register backup (papers/ji-ctxback §III-D), averaged over
    /// the kernel's own instructions and against the same baseline; `None` unless asked for.
    pub ctxback_osrb: Option<f64>,
}

/// What on-chip scalar register backup did to a kernel.
#[derive(Clone, Debug, Serialize)]
pub struct OsrbReport {
    /// Overwritten scalars whose old value a flashback could need.
    pub sites: usize,
    /// Backup copies kept in the kernel.
    pub backups: usize,
    /// ... of which in a dead uniform register, an unused uniform register, a dead vector
    /// register, the warp's shared memory.
    pub dead_uniform: usize,
    pub unused_uniform: usize,
    pub dead_vector: usize,
    pub shared: usize,
    /// Bytes of shared memory each warp of the rewritten kernel owns for its backups.
    pub warp_smem: u32,
    /// Sites with no free register and no free shared word.
    pub unplaced: usize,
}

/// One row of `--per-instruction`: what each technique does for a signal before `pc`.
#[derive(Clone, Debug, Serialize)]
pub struct InstructionRow {
    /// Program counter in the analysed (allocated, possibly OSRB-rewritten) kernel.
    pub pc: u32,
    pub location: String,
    /// The source line (spill code and OSRB copies show the line they serve).
    pub source: String,
    /// An OSRB backup copy rather than an instruction of the kernel.
    pub backup_copy: bool,
    /// 32-bit registers live before `pc` (LIVE).
    pub live_words: u32,
    pub ctxback: FlashbackRow,
    pub cs_defer: DeferRow,
    /// The nearest following instruction with a smaller live context, if CS-Defer's path
    /// reaches one.
    pub next_smaller: Option<DeferRow>,
    /// CTXBack+CS-Defer's pick: `ctxback` or `cs-defer`.
    pub combined: &'static str,
}

#[derive(Clone, Debug, Serialize)]
pub struct FlashbackRow {
    /// The flashback point (`pc` itself: plain LIVE switching).
    pub point: u32,
    /// Saved registers: `R3` (its value at the point) or `R3@pc7` (the value pc7 wrote).
    pub saved: Vec<String>,
    pub words: u32,
    pub reverted_at_preemption: Vec<u32>,
    pub reverted_at_resume: Vec<u32>,
    pub reexecuted: Vec<u32>,
    /// OSRB copies the resume routine copies back from.
    pub copied_back: Vec<u32>,
    pub preempt_cost: u32,
    pub resume_cost: u32,
    /// The whole plan in one line (see `Flashback::describe`).
    pub plan: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct DeferRow {
    /// Where the context is saved.
    pub target: u32,
    /// Instructions executed before switching.
    pub deferred: u32,
    pub words: u32,
    /// Estimated preemption latency (deferral plus saving).
    pub latency: u32,
}

#[derive(Clone, Debug, Serialize)]
pub struct PointReport {
    pub pc: u32,
    /// `file:line:col` of the instruction the point precedes.
    pub location: String,
    /// `pp` or `bar.pp`.
    pub kind: &'static str,
    pub live_registers: u32,
    pub divergent_live_registers: u32,
}

#[derive(Clone, Debug, Serialize)]
pub struct KernelReport {
    pub name: String,
    pub instructions: usize,
    pub registers: Registers,
    pub occupancy: OccupancyReport,
    pub live_registers: LiveStats,
    pub context: ContextReport,
    pub preemption_points: Vec<PointReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub osrb: Option<OsrbReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_instruction: Option<Vec<InstructionRow>>,
}

/// Why a kernel could not be analysed.
#[derive(Debug, thiserror::Error)]
#[error("kernel `{kernel}`: {what}")]
pub struct AnalyzeError {
    pub kernel: String,
    pub what: String,
}

/// 32-bit registers a value of type `ty` occupies (0 for predicates).
fn words(ty: Ty) -> u32 {
    match ty {
        Ty::Pred => 0,
        t if t.bits() > 32 => t.bits().div_ceil(32),
        _ => 1,
    }
}

/// 32-bit registers and bytes per warp of a live set of *virtual* registers; `uniform[v]`:
/// the allocator placed `v` in uniform registers (4 bytes per warp per word).
fn live_size(k: &Kernel, uniform: &[bool], set: &RegSet) -> (u32, u64) {
    let (mut words_live, mut bytes) = (0u32, 0u64);
    for r in set.iter() {
        let ty = k.regs[r].ty;
        if ty == Ty::Pred {
            bytes += PRED_REG_BYTES;
        } else {
            words_live += words(ty);
            let per_word = if uniform[r.index()] {
                UNIFORM_REG_BYTES
            } else {
                VECTOR_REG_BYTES
            };
            bytes += u64::from(words(ty)) * per_word;
        }
    }
    (words_live, bytes)
}

/// Analyses every kernel of a module (`source` names the file for locations).
pub fn analyze_module(
    module: &Module,
    source: &ptx::SourceFile,
    opts: &AnalyzeOptions,
) -> Result<Vec<KernelReport>, AnalyzeError> {
    module
        .kernels
        .values()
        .map(|k| analyze_kernel(k, source, opts))
        .collect()
}

fn analyze_kernel(
    k: &Kernel,
    source: &ptx::SourceFile,
    opts: &AnalyzeOptions,
) -> Result<KernelReport, AnalyzeError> {
    let alloc = allocate(k, &opts.alloc).map_err(|e| AnalyzeError {
        kernel: k.name.clone(),
        what: e.to_string(),
    })?;
    // Liveness on the virtual registers, whose types say how many 32-bit registers each
    // value needs; allocation preserves which values are live where.
    let mut live = Liveness::new();
    live.compute(k);
    let uniform: Vec<bool> = alloc
        .assignment
        .iter()
        .map(|p| p.is_some_and(|p| reg_class(&alloc.kernel, p) == RegClass::Uniform))
        .collect();
    let n = k.insts.len().max(1);
    let (mut sum_words, mut sum_bytes, mut sum_div_bytes) = (0u64, 0u64, 0u64);
    let (mut min, mut max) = (u32::MAX, 0u32);
    for pc in 0..k.insts.len() {
        let (w, b) = live_size(k, &uniform, live.live_in(InstId(pc as u32)));
        let (_, db) = live_size(k, &uniform, live.divergent_live(InstId(pc as u32)));
        sum_words += w as u64;
        sum_bytes += b;
        sum_div_bytes += db;
        min = min.min(w);
        max = max.max(w);
    }
    let baseline = alloc.gpr_count as u64 * VECTOR_REG_BYTES
        + alloc.pred_count as u64 * PRED_REG_BYTES
        + alloc.uniform_count as u64 * UNIFORM_REG_BYTES;
    let live_bytes = sum_bytes as f64 / n as f64;

    let threads = opts.block.unwrap_or_else(|| {
        k.launch_bounds
            .req_ntid
            .or(k.launch_bounds.max_ntid)
            .map(|d| d.iter().product())
            .unwrap_or(256)
    });
    let sm = &opts.gpu.sm.resources;
    let occ = Occupancy::of(
        sm,
        &TbDemand::for_kernel(sm, threads, alloc.gpr_count, k.static_smem),
    );

    let plain_config = CtxBackConfig {
        osrb: None,
        ..opts.ctxback
    };
    let plain = CtxBack::compute(&alloc.kernel, &plain_config);
    let ctx = plain.summary();
    let osrb = opts
        .ctxback
        .osrb
        .map(|_| backup_scalars(&alloc.kernel, &opts.ctxback));
    let ctxback_osrb = osrb
        .as_ref()
        .map(|(o, c)| c.summary_over(o.original_pcs(), plain.baseline()).ctxback);
    let osrb_report = osrb.as_ref().map(|(o, _)| {
        let count = |f: fn(&BackupSlot) -> bool| o.backups.iter().filter(|b| f(&b.slot)).count();
        OsrbReport {
            sites: o.sites,
            backups: o.backups.len(),
            dead_uniform: count(|s| matches!(s, BackupSlot::DeadUniform(_))),
            unused_uniform: count(|s| matches!(s, BackupSlot::UnusedUniform(_))),
            dead_vector: count(|s| matches!(s, BackupSlot::DeadVector(_))),
            shared: count(|s| matches!(s, BackupSlot::Shared(_))),
            warp_smem: o.kernel.warp_smem,
            unplaced: o.unplaced,
        }
    });
    let per_instruction = opts.per_instruction.then(|| match &osrb {
        Some((o, c)) => rows(&o.kernel, c, source, &|pc| o.origin[pc.index()].is_none()),
        None => rows(&alloc.kernel, &plain, source, &|_| false),
    });
    let plan = PreemptionPlan::compute(k, &opts.points);
    let preemption_points = plan
        .points
        .iter()
        .map(|p| PointReport {
            pc: p.pc.0,
            location: source.location(k.insts[p.pc].span),
            kind: match p.kind {
                PpKind::Pp => "pp",
                PpKind::BarPp => "bar.pp",
            },
            live_registers: live_size(k, &uniform, &p.live).0,
            divergent_live_registers: live_size(k, &uniform, &p.divergent_live).0,
        })
        .collect();
    Ok(KernelReport {
        name: k.name.clone(),
        instructions: k.insts.len(),
        registers: Registers {
            virtual_registers: k.regs.len(),
            allocated: alloc.gpr_count,
            predicates: alloc.pred_count,
            uniform: alloc.uniform_count,
            spilled_values: alloc.spilled_values,
            ptxas: opts.ptxas_registers,
        },
        occupancy: OccupancyReport {
            gpu: opts.gpu.name.clone(),
            threads_per_tb: threads,
            tbs_per_sm: occ.tbs_per_sm,
            warps_per_sm: occ.warps_per_sm,
            limited_by: occ.limited_by,
        },
        live_registers: LiveStats {
            average: sum_words as f64 / n as f64,
            min: if min == u32::MAX { 0 } else { min },
            max,
        },
        context: ContextReport {
            baseline_bytes_per_warp: baseline,
            live_bytes_per_warp: live_bytes,
            live_divergent_bytes_per_warp: sum_div_bytes as f64 / n as f64,
            live_reduction_percent: if baseline == 0 {
                0.0
            } else {
                100.0 * (1.0 - live_bytes / baseline as f64)
            },
            words_per_thread: TechniqueWords {
                baseline: ctx.baseline,
                live: ctx.live,
                cs_defer: ctx.cs_defer,
                ctxback: ctx.ctxback,
                ctxback_cs_defer: ctx.combined,
                flashed_back_instructions: ctx.flashed_back,
                ctxback_osrb,
            },
        },
        preemption_points,
        osrb: osrb_report,
        per_instruction,
    })
}

/// The per-instruction table of an analysed kernel.
fn rows(
    k: &Kernel,
    ctx: &CtxBack,
    source: &ptx::SourceFile,
    is_copy: &dyn Fn(InstId) -> bool,
) -> Vec<InstructionRow> {
    let defer_row = |d: &analysis::ctxback::Deferral| DeferRow {
        target: d.target.0,
        deferred: d.deferred,
        words: d.context.words(),
        latency: d.latency,
    };
    k.insts
        .ids()
        .map(|pc| {
            let span = k.insts[pc].span;
            let fb = ctx.flashback(pc);
            let saved = fb
                .saved
                .iter()
                .map(|s| match s.version {
                    analysis::ctxback::Version::Initial => k.regs[s.reg].name.clone(),
                    analysis::ctxback::Version::Def(d) => format!("{}@{d}", k.regs[s.reg].name),
                })
                .collect();
            let pcs = |v: Vec<InstId>| v.into_iter().map(|p| p.0).collect::<Vec<u32>>();
            InstructionRow {
                pc: pc.0,
                location: source.location(span),
                source: source
                    .line_text(source.line_col(span.start).0)
                    .trim()
                    .to_string(),
                backup_copy: is_copy(pc),
                live_words: ctx.live(pc).words(),
                ctxback: FlashbackRow {
                    point: fb.point.0,
                    saved,
                    words: fb.context.words(),
                    reverted_at_preemption: pcs(fb.preempt_reverts.clone()),
                    reverted_at_resume: pcs(fb.resume_reverts()),
                    reexecuted: pcs(fb.reexecuted()),
                    copied_back: fb
                        .resume
                        .iter()
                        .filter_map(|s| match *s {
                            ResumeStep::CopyBack(c) => Some(c.0),
                            _ => None,
                        })
                        .collect(),
                    preempt_cost: fb.cost.preempt,
                    resume_cost: fb.cost.resume,
                    plan: fb.describe(k),
                },
                cs_defer: defer_row(ctx.cs_defer(pc)),
                next_smaller: ctx.next_smaller(pc).map(defer_row),
                combined: match ctx.combined(pc) {
                    Technique::CtxBack => "ctxback",
                    Technique::CsDefer => "cs-defer",
                },
            }
        })
        .collect()
}
