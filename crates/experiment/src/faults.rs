//! Preemptible faults (papers/tanasic-thesis §6.5, Figures 6.11–6.15): suite programs run
//! alone on the `fault-study` GPU (Table 6.1) under the pipeline organisations of §6.3 and
//! the use cases of §6.4, each figure a ratio of kernel times against its baseline.
//! Figure 6.14 runs the kernels with a device heap, Figure 6.15 the others, and the rest
//! every kernel.
//!
//! * **Figure 6.11** — WD-commit, WD-lastcheck and the replay queue with nothing faulting,
//!   normalised to stall on fault.
//! * **Figure 6.12** — the operand log at 8, 16 and 32 KiB per SM, nothing faulting,
//!   normalised to stall on fault.
//! * **Figure 6.13** — TB switching on fault (§6.4.1): every allocation of the program
//!   managed (below), over NVLink and over PCIe; the local TB scheduler (`tb_switch`,
//!   normal context switching through memory and the ideal 1-cycle switch, at most 4 extra
//!   TBs per SM) under the operand log at 16 KiB (the design §6.5.2 settles on; switching
//!   needs preemptible faults), normalised to stall on fault with the same faults.
//! * **Figure 6.14** — local handling of faults to the pages backing a kernel's own heap
//!   (§6.4.2, §6.5.4): the suite's kernels with a device heap ([`suite::Kernel::device_heap`],
//!   the Halloc-style `heap`), only their unwritten allocations managed
//!   ([`workload::scenario::Managed::Unwritten`]: "There is no page migrations in this
//!   experiment"), the GPU's handler against the CPU's over NVLink and over PCIe, under the
//!   operand log at 16 KiB.
//! * **Figure 6.15** — local handling of faults to output pages (§6.4.2): every allocation of
//!   the program is managed ([`workload::scenario::Program::Suite`]'s `managed`), so what
//!   the host wrote migrates on the GPU's first touch and the pages it never wrote (the
//!   kernel's outputs) are only allocated. The GPU's own handler (`handler = "gpu"`, 20 µs
//!   a fault, side by side) against the CPU's (in batches, one by one), over NVLink and
//!   over PCIe. Both sides use the operand log at 16 KiB (the design §6.5.2 settles on;
//!   a handler on the GPU needs preemptible faults).
//!
//! **The measure.** A program's kernel time is the sum over its launches of first TB
//! dispatched to last TB finished (the thesis: "the execution time of the kernel as the
//! cycle when the last thread block finishes"); a ratio is the baseline's time over the
//! variant's (higher is better), and each figure gives the geometric mean over kernels.
//! Every run is checked against the program's CPU reference.
//!
//! **Runs.** A run is a (kernel, [`Setting`]) pair; settings shared by figures (stall with
//! nothing managed is the baseline of both 6.11 and 6.12) run once. Runs are spread over
//! `threads` threads; results do not depend on how many.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicUsize;

use gpu::config::GpuConfig;
use memsys::{Handler, Link, Pipeline, TbSwitch};
use serde::Serialize;
use suite::Size;
use workload::scenario::Managed;

use crate::figures::{Figure, Row};

/// A figure of §6.5.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum FaultFigure {
    /// Figure 6.11: pipeline organisations, nothing faulting.
    Organisations,
    /// Figure 6.12: operand-log sizes, nothing faulting.
    OperandLog,
    /// Figure 6.13: TB switching on fault.
    TbSwitching,
    /// Figure 6.14: local handling of faults to a kernel's own heap.
    LocalHeap,
    /// Figure 6.15: local handling of faults to output pages.
    LocalOutputs,
}

impl FaultFigure {
    pub const ALL: [FaultFigure; 5] = [
        FaultFigure::Organisations,
        FaultFigure::OperandLog,
        FaultFigure::TbSwitching,
        FaultFigure::LocalHeap,
        FaultFigure::LocalOutputs,
    ];

    /// Its number in the thesis ("6.11").
    pub fn number(self) -> &'static str {
        match self {
            FaultFigure::Organisations => "6.11",
            FaultFigure::OperandLog => "6.12",
            FaultFigure::TbSwitching => "6.13",
            FaultFigure::LocalHeap => "6.14",
            FaultFigure::LocalOutputs => "6.15",
        }
    }

    /// The figure named by its number (`6.11`) or name (`organisations`).
    pub fn parse(s: &str) -> Option<FaultFigure> {
        FaultFigure::ALL
            .into_iter()
            .find(|f| f.number() == s || f.name() == s)
    }

    /// Its short name, for files.
    pub fn name(self) -> &'static str {
        match self {
            FaultFigure::Organisations => "organisations",
            FaultFigure::OperandLog => "operand-log",
            FaultFigure::TbSwitching => "tb-switching",
            FaultFigure::LocalHeap => "local-heap",
            FaultFigure::LocalOutputs => "local-outputs",
        }
    }

    fn title(self) -> &'static str {
        match self {
            FaultFigure::Organisations => {
                "Figure 6.11: pipeline organisations, nothing faulting, normalised to stall on fault"
            }
            FaultFigure::OperandLog => {
                "Figure 6.12: operand-log sizes, nothing faulting, normalised to stall on fault"
            }
            FaultFigure::TbSwitching => {
                "Figure 6.13: TB switching on fault, normalised to stall on fault with the same faults"
            }
            FaultFigure::LocalHeap => {
                "Figure 6.14: faults to a kernel's own heap handled on the GPU, normalised to the CPU's handling"
            }
            FaultFigure::LocalOutputs => {
                "Figure 6.15: faults to output pages handled on the GPU, normalised to the CPU's handling"
            }
        }
    }

    /// Whether the figure runs `kernel`: Figure 6.14 the kernels with a device heap,
    /// Figure 6.15 the others (the thesis's Parboil kernels have none), the rest all.
    pub fn runs(self, kernel: &dyn suite::Kernel) -> bool {
        match self {
            FaultFigure::LocalHeap => kernel.device_heap(),
            FaultFigure::LocalOutputs => !kernel.device_heap(),
            _ => true,
        }
    }

    /// Its (baseline, compared settings) pairs, one per series, with the series' label
    /// and the thesis's geometric mean where it gives one.
    fn series(self) -> Vec<Series> {
        let stall = Setting::default();
        let org = |p: Pipeline| Setting {
            pipeline: p,
            ..Setting::default()
        };
        let log = |kib: u32| Setting {
            pipeline: Pipeline::OperandLog,
            operand_log_bytes: kib * 1024,
            ..Setting::default()
        };
        // Local handling (§6.4.2): the GPU's handler against the CPU's, over each link, with
        // `managed` memory under the 16 KiB operand log.
        let local = |managed, thesis: [f64; 2]| -> Vec<Series> {
            [Link::Nvlink, Link::Pcie]
                .into_iter()
                .zip(thesis)
                .map(|(link, thesis)| {
                    let cpu = Setting {
                        managed,
                        link,
                        ..log(16)
                    };
                    let gpu = Setting {
                        handler: Handler::Gpu,
                        ..cpu
                    };
                    Series::new(link_name(link), cpu, gpu, Some(thesis))
                })
                .collect()
        };
        match self {
            FaultFigure::Organisations => vec![
                Series::new("WD-commit", stall, org(Pipeline::WdCommit), Some(0.85)),
                Series::new(
                    "WD-lastcheck",
                    stall,
                    org(Pipeline::WdLastcheck),
                    Some(0.91),
                ),
                Series::new(
                    "replay queue",
                    stall,
                    org(Pipeline::ReplayQueue),
                    Some(0.94),
                ),
            ],
            FaultFigure::OperandLog => vec![
                Series::new("8 KiB", stall, log(8), Some(0.969)),
                Series::new("16 KiB", stall, log(16), Some(0.998)),
                Series::new("32 KiB", stall, log(32), None),
            ],
            FaultFigure::TbSwitching => [Link::Nvlink, Link::Pcie]
                .into_iter()
                .flat_map(|link| {
                    let stall = Setting {
                        managed: Managed::All,
                        link,
                        ..Setting::default()
                    };
                    let switching = |tb_switch| Setting {
                        tb_switch,
                        ..Setting {
                            managed: Managed::All,
                            link,
                            ..log(16)
                        }
                    };
                    let name = link_name(link);
                    [
                        Series::new(name, stall, switching(TbSwitch::Save), None),
                        Series::new(
                            &format!("{name} ideal"),
                            stall,
                            switching(TbSwitch::Ideal),
                            None,
                        ),
                    ]
                })
                .collect(),
            // The thesis's geomeans over NVLink and PCIe: Halloc's benchmarks (6.14),
            // Parboil's output pages (6.15).
            FaultFigure::LocalHeap => local(Managed::Unwritten, [1.80, 1.98]),
            FaultFigure::LocalOutputs => local(Managed::All, [1.04, 1.08]),
        }
    }
}

fn link_name(link: Link) -> &'static str {
    match link {
        Link::Nvlink => "NVLink",
        Link::Pcie => "PCIe",
    }
}

/// What one run changes on the GPU and the program.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Setting {
    pub pipeline: Pipeline,
    pub operand_log_bytes: u32,
    /// Which allocations of the program are managed (demand paging).
    pub managed: Managed,
    pub link: Link,
    pub handler: Handler,
    pub tb_switch: TbSwitch,
}

impl Default for Setting {
    /// Stall on fault, the default log, nothing managed, PCIe, the CPU's handler.
    fn default() -> Self {
        Setting {
            pipeline: Pipeline::Stall,
            operand_log_bytes: memsys::OPERAND_LOG_BYTES,
            managed: Managed::Off,
            link: Link::Pcie,
            handler: Handler::Cpu,
            tb_switch: TbSwitch::Off,
        }
    }
}

impl Setting {
    /// A short label ("operand-log 16 KiB, managed over nvlink, gpu handler").
    pub fn label(&self) -> String {
        let mut s = self.pipeline.name().to_string();
        if self.pipeline == Pipeline::OperandLog {
            s.push_str(&format!(" {} KiB", self.operand_log_bytes / 1024));
        }
        if !self.managed.is_off() {
            let link = match self.link {
                Link::Nvlink => "nvlink",
                Link::Pcie => "pcie",
            };
            let what = match self.managed {
                Managed::Unwritten => "unwritten managed",
                _ => "managed",
            };
            s.push_str(&format!(", {what} over {link}"));
            if self.handler == Handler::Gpu {
                s.push_str(", gpu handler");
            }
            if !self.tb_switch.is_off() {
                s.push_str(&format!(", tb switch {}", self.tb_switch.name()));
            }
        }
        s
    }

    /// `gpu` with this setting (its translation and demand paging must be on).
    fn apply(&self, gpu: &GpuConfig) -> Result<GpuConfig, String> {
        let mut g = gpu.clone();
        let t = g
            .memory
            .translation
            .as_mut()
            .filter(|t| t.enabled)
            .ok_or_else(|| format!("{} does not translate addresses", gpu.name))?;
        t.pipeline = self.pipeline;
        t.operand_log_bytes = self.operand_log_bytes;
        t.tb_switch = self.tb_switch;
        if !self.managed.is_off() {
            let f = t
                .faults
                .as_mut()
                .ok_or_else(|| format!("{} has no demand paging", gpu.name))?;
            f.link = self.link;
            f.handler = self.handler;
        }
        Ok(g)
    }
}

/// A series of a figure: `variant` against `baseline`, per kernel.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Series {
    pub label: String,
    pub baseline: Setting,
    pub variant: Setting,
    /// The thesis's geometric mean (a ratio), where it gives one.
    pub thesis: Option<f64>,
}

impl Series {
    fn new(label: &str, baseline: Setting, variant: Setting, thesis: Option<f64>) -> Series {
        Series {
            label: label.to_string(),
            baseline,
            variant,
            thesis,
        }
    }
}

/// The experiment's parameters.
#[derive(Clone)]
pub struct FaultsConfig {
    /// A GPU that translates addresses and pages on demand (default: `fault-study`).
    pub gpu: GpuConfig,
    pub kernels: Vec<&'static dyn suite::Kernel>,
    pub size: Size,
    pub seed: u64,
    pub figures: Vec<FaultFigure>,
    /// Runs at once.
    pub threads: usize,
    pub max_cycles: u64,
    pub instruction_limit: Option<u64>,
}

impl FaultsConfig {
    /// Every figure, every kernel the GPU runs, `small` inputs, on `gpu`.
    pub fn default_on(gpu: GpuConfig) -> FaultsConfig {
        FaultsConfig {
            kernels: crate::runnable_kernels(&gpu),
            gpu,
            size: Size::Small,
            seed: 1,
            figures: FaultFigure::ALL.to_vec(),
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            max_cycles: 1 << 34,
            instruction_limit: None,
        }
    }
}

/// One program's run under one setting.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Run {
    pub kernel: String,
    pub setting: String,
    /// Sum over its launches of first TB dispatched to last TB finished, core cycles.
    pub kernel_cycles: u64,
    pub verified: bool,
    /// Demand paging, summed over launches: far faults, regions migrated, allocated by the
    /// CPU and by the GPU's handler; warps that replayed after a fault.
    pub far_faults: u64,
    pub regions_migrated: u64,
    pub regions_allocated: u64,
    pub regions_allocated_locally: u64,
    pub replays: u64,
    /// TB switching on fault: TBs switched out, and the most off-chip on one SM at once.
    pub tbs_switched_out: u64,
    pub switched_out_peak: u64,
}

/// One figure's results: per series, each kernel's ratio and their geometric mean.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FigureResult {
    pub figure: FaultFigure,
    pub number: String,
    pub title: String,
    pub series: Vec<SeriesResult>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SeriesResult {
    pub label: String,
    pub baseline: String,
    pub variant: String,
    /// (kernel, baseline cycles ÷ variant cycles), in the kernels' order.
    pub ratios: Vec<(String, f64)>,
    pub geomean: f64,
    pub thesis: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FaultsResults {
    pub gpu: String,
    pub size: String,
    pub runs: Vec<Run>,
    pub figures: Vec<FigureResult>,
}

impl FaultsResults {
    /// Whether every run verified against its CPU reference.
    pub fn all_verified(&self) -> bool {
        self.runs.iter().all(|r| r.verified)
    }

    /// The run of `kernel` under the setting labelled `setting` ([`Setting::label`], as a
    /// series names its baseline and variant).
    pub fn run(&self, kernel: &str, setting: &str) -> Option<&Run> {
        self.runs
            .iter()
            .find(|r| r.kernel == kernel && r.setting == setting)
    }

    /// Each figure as bars: one row per kernel and a geomean row, one value per series.
    pub fn bar_figures(&self) -> Vec<Figure> {
        self.figures
            .iter()
            .map(|f| {
                let mut rows: Vec<Row> = Vec::new();
                let kernels: Vec<&str> = f
                    .series
                    .first()
                    .map(|s| s.ratios.iter().map(|(k, _)| k.as_str()).collect())
                    .unwrap_or_default();
                for (i, k) in kernels.iter().enumerate() {
                    rows.push(Row {
                        category: k.to_string(),
                        values: f.series.iter().map(|s| vec![s.ratios[i].1]).collect(),
                    });
                }
                rows.push(Row {
                    category: "geomean".into(),
                    values: f.series.iter().map(|s| vec![s.geomean]).collect(),
                });
                let paper: Vec<String> = f
                    .series
                    .iter()
                    .filter_map(|s| s.thesis.map(|t| format!("{} {:.1}%", s.label, 100.0 * t)))
                    .collect();
                Figure {
                    id: format!("figure-{}", f.number.replace('.', "-")),
                    title: f.title.clone(),
                    y_label: "performance normalised to the baseline".into(),
                    series: f.series.iter().map(|s| s.label.clone()).collect(),
                    parts: vec!["ratio".into()],
                    rows,
                    paper: if paper.is_empty() {
                        String::new()
                    } else {
                        format!("thesis geomean: {}", paper.join(", "))
                    },
                    clip: None,
                }
            })
            .collect()
    }

    /// The runs and every figure's ratios as CSV (`kind` = run or ratio).
    pub fn to_csv(&self) -> String {
        let mut o = String::from(
            "kind,figure,series,kernel,setting,kernel_cycles,ratio,verified,far_faults,regions_migrated,regions_allocated,regions_allocated_locally,replays,tbs_switched_out,switched_out_peak\n",
        );
        for r in &self.runs {
            o.push_str(&format!(
                "run,,,{},\"{}\",{},,{},{},{},{},{},{},{},{}\n",
                r.kernel,
                r.setting,
                r.kernel_cycles,
                r.verified,
                r.far_faults,
                r.regions_migrated,
                r.regions_allocated,
                r.regions_allocated_locally,
                r.replays,
                r.tbs_switched_out,
                r.switched_out_peak
            ));
        }
        for f in &self.figures {
            for s in &f.series {
                for (k, v) in s.ratios.iter().chain([&("geomean".to_string(), s.geomean)]) {
                    o.push_str(&format!(
                        "ratio,{},{},{},\"{}\",,{v:.6},,,,,,,,\n",
                        f.number, s.label, k, s.variant
                    ));
                }
            }
        }
        o
    }
}

/// Why the experiment could not run.
#[derive(Debug, thiserror::Error)]
pub enum FaultsError {
    #[error("{0}")]
    Gpu(String),
    #[error("{kernel} under {setting}: {error}")]
    Run {
        kernel: String,
        setting: String,
        #[source]
        error: workload::RunError,
    },
}

/// Runs the experiment; `progress(done, total, what)` after each run.
pub fn run(
    c: &FaultsConfig,
    progress: &(dyn Fn(usize, usize, &str) + Sync),
) -> Result<FaultsResults, FaultsError> {
    let series: Vec<(FaultFigure, Vec<Series>)> =
        c.figures.iter().map(|&f| (f, f.series())).collect();
    // Every setting once, in a fixed order, and every (setting, kernel) a figure needs once.
    let mut settings: Vec<Setting> = Vec::new();
    let mut pairs: Vec<(usize, usize)> = Vec::new();
    for (f, series) in &series {
        for s in series.iter().flat_map(|s| [s.baseline, s.variant]) {
            let at = match settings.iter().position(|&x| x == s) {
                Some(at) => at,
                None => {
                    settings.push(s);
                    settings.len() - 1
                }
            };
            for (k, kernel) in c.kernels.iter().enumerate() {
                if f.runs(*kernel) && !pairs.contains(&(at, k)) {
                    pairs.push((at, k));
                }
            }
        }
    }
    pairs.sort_unstable();
    let gpus: Vec<GpuConfig> = settings
        .iter()
        .map(|s| s.apply(&c.gpu))
        .collect::<Result<_, _>>()
        .map_err(FaultsError::Gpu)?;
    let jobs: Vec<(usize, &'static dyn suite::Kernel)> =
        pairs.iter().map(|&(s, k)| (s, c.kernels[k])).collect();
    let done = AtomicUsize::new(0);
    let results = crate::run_indexed(
        c.threads,
        &jobs,
        &|&(s, k)| run_one(c, &gpus[s], &settings[s], k),
        &|&(s, k)| format!("{} under {}", k.name(), settings[s].label()),
        progress,
        &done,
        jobs.len(),
    );
    let mut runs = Vec::new();
    for r in results {
        match r {
            Some(Ok(run)) => runs.push(run),
            Some(Err(e)) => return Err(e),
            None => {}
        }
    }
    let cycles: BTreeMap<(String, String), u64> = runs
        .iter()
        .map(|r| ((r.kernel.clone(), r.setting.clone()), r.kernel_cycles))
        .collect();
    let figures = series
        .into_iter()
        .map(|(f, series)| FigureResult {
            figure: f,
            number: f.number().into(),
            title: f.title().into(),
            series: series
                .into_iter()
                .map(|s| {
                    let (b, v) = (s.baseline.label(), s.variant.label());
                    let ratios: Vec<(String, f64)> = c
                        .kernels
                        .iter()
                        .filter(|k| f.runs(**k))
                        .map(|k| {
                            let of = |l: &String| cycles[&(k.name().to_string(), l.clone())];
                            (k.name().to_string(), of(&b) as f64 / of(&v).max(1) as f64)
                        })
                        .collect();
                    SeriesResult {
                        label: s.label,
                        baseline: b,
                        variant: v,
                        geomean: geomean(ratios.iter().map(|r| r.1)),
                        ratios,
                        thesis: s.thesis,
                    }
                })
                .collect(),
        })
        .collect();
    Ok(FaultsResults {
        gpu: c.gpu.name.clone(),
        size: format!("{:?}", c.size).to_lowercase(),
        runs,
        figures,
    })
}

fn geomean(v: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = v.fold((0.0, 0u32), |(s, n), x| (s + x.max(1e-300).ln(), n + 1));
    if n == 0 {
        return 1.0;
    }
    (sum / f64::from(n)).exp()
}

fn run_one(
    c: &FaultsConfig,
    gpu: &GpuConfig,
    setting: &Setting,
    kernel: &'static dyn suite::Kernel,
) -> Result<Run, FaultsError> {
    let mut process = crate::suite_process(kernel, c.size, c.seed, None);
    if let workload::scenario::Program::Suite { managed, .. } = &mut process.program {
        *managed = setting.managed;
    }
    let r = crate::run_alone(gpu, process, None, c.max_cycles, c.instruction_limit, None).map_err(
        |error| FaultsError::Run {
            kernel: kernel.name().into(),
            setting: setting.label(),
            error,
        },
    )?;
    let period = r.core_period_fs.max(1);
    let mut run = Run {
        kernel: kernel.name().into(),
        setting: setting.label(),
        kernel_cycles: 0,
        verified: r
            .processes
            .iter()
            .all(|p| p.verdict.as_ref().is_some_and(|v| v.verified)),
        far_faults: 0,
        regions_migrated: 0,
        regions_allocated: 0,
        regions_allocated_locally: 0,
        replays: 0,
        tbs_switched_out: 0,
        switched_out_peak: 0,
    };
    for k in &r.kernels {
        if let (Some(s), Some(f)) = (k.started_fs, k.finished_fs) {
            run.kernel_cycles += (f - s).div_ceil(period);
        }
        if let Some(st) = &k.stats {
            run.replays += st.frontend.replays;
            run.tbs_switched_out += st.frontend.tbs_switched_out;
            run.switched_out_peak = run.switched_out_peak.max(st.frontend.switched_out_peak);
            if let Some(f) = st.memory.translation.as_ref().and_then(|t| t.faults) {
                run.far_faults += f.far_faults;
                run.regions_migrated += f.regions_migrated;
                run.regions_allocated += f.regions_allocated;
                run.regions_allocated_locally += f.regions_allocated_locally;
            }
        }
    }
    Ok(run)
}
