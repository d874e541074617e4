//! Thread-level parallelism beyond the scheduling limits, papers/lin-thesis §3.7: every suite
//! program alone on `maxwell16` (Table 4.1) under the baseline, Virtual Thread and GPUDuet
//! (`gpu::tlp`), the kernels grouped by the baseline's utilisation class (Table 3.3).
//!
//! The variants, each a whole run of the program:
//! * `baseline`: no extra TB;
//! * `vt`: Virtual Thread, as many extra TBs as the spare registers, shared memory and
//!   context tables hold (`max_extra_tbs` 64: the capacity bounds it);
//! * `gpuduet-tb`: GPUDuet switching whole TBs only, with its throughput monitor (Figure
//!   3.13's GPUDuet_TB);
//! * `gpuduet-me1` … `gpuduet-me4`: GPUDuet with a static ME of at most 1 to 4 (Figure 3.12);
//! * `gpuduet`: GPUDuet with the throughput monitor setting ME up to the capacity bound, at
//!   the thesis's 128-byte port (Figures 3.12–3.14); `gpuduet-port256` and
//!   `gpuduet-port64` the same at 256 and 64 bytes (Figure 3.15).
//!
//! GPUDuet switches warp by warp where registers or warp slots limit a kernel and whole TBs
//! where shared memory does (§3.6.6). A kernel's class, native TBs and TLP are those of its
//! longest launch; performance is the sum over its launches of first TB dispatched to last
//! TB finished.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicUsize;

use gpu::config::GpuConfig;
use gpu::timing::UtilisationClass;
use gpu::tlp::{TlpConfig, TlpScheme, MAX_EXTRA_TBS};
use serde::Serialize;
use suite::Size;

use crate::figures::{Figure, Row};

/// One configuration of the SMs' TLP.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Variant {
    pub scheme: TlpScheme,
    /// The most extra TBs per SM (`MAX_EXTRA_TBS`: only the capacity bounds them).
    pub max_extra_tbs: u32,
    pub dynamic: bool,
    pub port_bytes: u32,
}

impl Variant {
    const fn new(scheme: TlpScheme, max_extra_tbs: u32, dynamic: bool, port_bytes: u32) -> Self {
        Variant {
            scheme,
            max_extra_tbs,
            dynamic,
            port_bytes,
        }
    }

    /// Every variant the experiment runs, the baseline first.
    pub const ALL: [Variant; 10] = [
        Variant::new(TlpScheme::Off, 1, false, 128),
        Variant::new(TlpScheme::Vt, MAX_EXTRA_TBS, false, 128),
        Variant::new(TlpScheme::GpuduetTb, MAX_EXTRA_TBS, true, 128),
        Variant::new(TlpScheme::Gpuduet, 1, false, 128),
        Variant::new(TlpScheme::Gpuduet, 2, false, 128),
        Variant::new(TlpScheme::Gpuduet, 3, false, 128),
        Variant::new(TlpScheme::Gpuduet, 4, false, 128),
        Variant::new(TlpScheme::Gpuduet, MAX_EXTRA_TBS, true, 128),
        Variant::new(TlpScheme::Gpuduet, MAX_EXTRA_TBS, true, 256),
        Variant::new(TlpScheme::Gpuduet, MAX_EXTRA_TBS, true, 64),
    ];

    pub fn label(&self) -> String {
        match (self.scheme, self.dynamic, self.port_bytes) {
            (TlpScheme::Off, ..) => "baseline".into(),
            (TlpScheme::Vt, ..) => "vt".into(),
            (TlpScheme::GpuduetTb, ..) => "gpuduet-tb".into(),
            (_, false, _) => format!("gpuduet-me{}", self.max_extra_tbs),
            (_, true, 128) => "gpuduet".into(),
            (_, true, p) => format!("gpuduet-port{p}"),
        }
    }

    fn config(&self) -> TlpConfig {
        TlpConfig {
            scheme: self.scheme,
            max_extra_tbs: self.max_extra_tbs,
            port_bytes: self.port_bytes,
            dynamic: self.dynamic,
            compression: true,
        }
    }
}

/// The experiment's parameters.
#[derive(Clone)]
pub struct TlpExperiment {
    /// The GPU (default `maxwell16`); its own `[sm.tlp]` is replaced by each variant's.
    pub gpu: GpuConfig,
    pub kernels: Vec<&'static dyn suite::Kernel>,
    pub size: Size,
    pub seed: u64,
    /// Runs at once.
    pub threads: usize,
    pub max_cycles: u64,
    pub instruction_limit: Option<u64>,
}

impl TlpExperiment {
    /// Every kernel the GPU runs at `large`, on `gpu`, one run per core at once.
    pub fn default_on(gpu: GpuConfig) -> TlpExperiment {
        TlpExperiment {
            kernels: crate::runnable_kernels(&gpu),
            gpu,
            size: Size::Large,
            seed: 1,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            max_cycles: 1 << 34,
            instruction_limit: None,
        }
    }
}

/// One program's run under one variant.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Run {
    pub kernel: String,
    pub variant: String,
    /// Sum over its launches of first TB dispatched to last TB finished, core cycles.
    pub kernel_cycles: u64,
    pub verified: bool,
    /// Of its longest launch: Table 3.3's class, TBs per SM natively, the most resident on
    /// one SM at once, and the extra TBs at its end (ME).
    pub class: UtilisationClass,
    pub native_tbs: u32,
    pub peak_tbs: u64,
    pub extra_tbs: u32,
    /// Of its longest launch: registers per thread allocated, and those a spilled register
    /// context reserves (live at its switch points, compressed; 0 without TLP).
    pub regs_per_thread: u32,
    pub context_registers: u32,
    /// Whether the monitor made the bypassed L1 a context store during any of its launches
    /// (papers/lin-thesis §3.6.4).
    pub l1_store: bool,
    /// Over its launches: TBs switched in, and the bytes the switches moved.
    pub switched_in: u64,
    pub switch_bytes: u64,
}

/// One kernel's results: its baseline class, and per variant its speedup over the baseline
/// and its TLP (the most TBs resident on an SM over the baseline's).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KernelResult {
    pub kernel: String,
    pub class: UtilisationClass,
    pub speedup: Vec<(String, f64)>,
    pub tlp: Vec<(String, f64)>,
}

/// Per class (and `unsaturated`: underutilised and moderate together), per variant, the
/// geometric means of the speedups and of the TLP gains.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ClassResult {
    pub class: String,
    pub kernels: usize,
    pub speedup: Vec<(String, f64)>,
    pub tlp: Vec<(String, f64)>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TlpResults {
    pub gpu: String,
    pub size: String,
    pub variants: Vec<String>,
    pub runs: Vec<Run>,
    pub kernels: Vec<KernelResult>,
    pub classes: Vec<ClassResult>,
    /// GPUDuet's spilled register context (`gpuduet-me4`'s runs) as a share of the
    /// registers allocated, the mean over the kernels that have one (papers/lin-thesis
    /// §3.6.6: 44% with liveness and compression).
    pub context_share: Option<f64>,
}

/// Why the experiment could not run.
#[derive(Debug, thiserror::Error)]
pub enum TlpError {
    #[error("{kernel} under {variant}: {error}")]
    Run {
        kernel: String,
        variant: String,
        #[source]
        error: workload::RunError,
    },
}

/// The thesis's numbers this experiment compares with (§3.7).
pub const THESIS: &str = "GPUDuet +22% average, up to +47%, on unsaturated benchmarks; +12% and +16% over VT; TLP +18% (VT) and +70% (GPUDuet) on unsaturated ones; 256/128/64-byte ports +24%/+22%/+18%";

/// Runs the experiment; `progress(done, total, what)` after each run.
pub fn run(
    c: &TlpExperiment,
    progress: &(dyn Fn(usize, usize, &str) + Sync),
) -> Result<TlpResults, TlpError> {
    let variants = Variant::ALL;
    let jobs: Vec<(Variant, &'static dyn suite::Kernel)> = c
        .kernels
        .iter()
        .flat_map(|&k| variants.iter().map(move |&v| (v, k)))
        .collect();
    let done = AtomicUsize::new(0);
    let results = crate::run_indexed(
        c.threads,
        &jobs,
        &|&(v, k)| run_one(c, v, k),
        &|&(v, k)| format!("{} under {}", k.name(), v.label()),
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
    Ok(summarise(c, &variants, runs))
}

/// The per-kernel and per-class results of `runs`.
fn summarise(c: &TlpExperiment, variants: &[Variant], runs: Vec<Run>) -> TlpResults {
    let by: BTreeMap<(String, String), &Run> = runs
        .iter()
        .map(|r| ((r.kernel.clone(), r.variant.clone()), r))
        .collect();
    let labels: Vec<String> = variants.iter().map(Variant::label).collect();
    let mut kernels = Vec::new();
    for k in &c.kernels {
        let name = k.name().to_string();
        let Some(base) = by.get(&(name.clone(), "baseline".into())) else {
            continue;
        };
        let mut speedup = Vec::new();
        let mut tlp = Vec::new();
        for l in &labels[1..] {
            if let Some(r) = by.get(&(name.clone(), l.clone())) {
                speedup.push((
                    l.clone(),
                    base.kernel_cycles as f64 / r.kernel_cycles.max(1) as f64,
                ));
                let peak = r.peak_tbs.max(u64::from(r.native_tbs));
                tlp.push((l.clone(), peak as f64 / f64::from(base.native_tbs.max(1))));
            }
        }
        kernels.push(KernelResult {
            kernel: name,
            class: base.class,
            speedup,
            tlp,
        });
    }
    let mut classes = Vec::new();
    let groups: [(&str, &[UtilisationClass]); 4] = [
        ("underutilised", &[UtilisationClass::Underutilised]),
        ("moderate", &[UtilisationClass::Moderate]),
        ("saturated", &[UtilisationClass::Saturated]),
        (
            "unsaturated",
            &[UtilisationClass::Underutilised, UtilisationClass::Moderate],
        ),
    ];
    for (name, members) in groups {
        let in_class: Vec<&KernelResult> = kernels
            .iter()
            .filter(|k| members.contains(&k.class))
            .collect();
        if in_class.is_empty() {
            continue;
        }
        let mean = |pick: &dyn Fn(&KernelResult) -> &Vec<(String, f64)>| -> Vec<(String, f64)> {
            labels[1..]
                .iter()
                .map(|l| {
                    let v: Vec<f64> = in_class
                        .iter()
                        .filter_map(|k| pick(k).iter().find(|(x, _)| x == l).map(|&(_, s)| s))
                        .collect();
                    (l.clone(), crate::figures::geomean(&v))
                })
                .collect()
        };
        classes.push(ClassResult {
            class: name.into(),
            kernels: in_class.len(),
            speedup: mean(&|k| &k.speedup),
            tlp: mean(&|k| &k.tlp),
        });
    }
    let shares: Vec<f64> = runs
        .iter()
        .filter(|r| r.variant == "gpuduet-me4" && r.regs_per_thread > 0 && r.context_registers > 0)
        .map(|r| f64::from(r.context_registers) / f64::from(r.regs_per_thread))
        .collect();
    let context_share =
        (!shares.is_empty()).then(|| shares.iter().sum::<f64>() / shares.len() as f64);
    TlpResults {
        gpu: c.gpu.name.clone(),
        size: format!("{:?}", c.size).to_lowercase(),
        variants: labels,
        runs,
        kernels,
        classes,
        context_share,
    }
}

fn run_one(
    c: &TlpExperiment,
    variant: Variant,
    kernel: &'static dyn suite::Kernel,
) -> Result<Run, TlpError> {
    let mut gpu = c.gpu.clone();
    gpu.sm.tlp = variant.config();
    let process = crate::suite_process(kernel, c.size, c.seed, None);
    let r = crate::run_alone(&gpu, process, None, c.max_cycles, c.instruction_limit, None)
        .map_err(|error| TlpError::Run {
            kernel: kernel.name().into(),
            variant: variant.label(),
            error,
        })?;
    let period = r.core_period_fs.max(1);
    let mut run = Run {
        kernel: kernel.name().into(),
        variant: variant.label(),
        kernel_cycles: 0,
        verified: r
            .processes
            .iter()
            .all(|p| p.verdict.as_ref().is_some_and(|v| v.verified)),
        class: UtilisationClass::Underutilised,
        native_tbs: 0,
        peak_tbs: 0,
        extra_tbs: 0,
        regs_per_thread: 0,
        context_registers: 0,
        l1_store: false,
        switched_in: 0,
        switch_bytes: 0,
    };
    let mut longest = 0;
    for k in &r.kernels {
        let cycles = match (k.started_fs, k.finished_fs) {
            (Some(s), Some(f)) => (f - s).div_ceil(period),
            _ => 0,
        };
        run.kernel_cycles += cycles;
        if let Some(st) = &k.stats {
            run.switched_in += st.frontend.tlp.switched_in;
            run.l1_store |= st.l1_store;
            run.switch_bytes += st.frontend.tlp.bytes;
            if cycles > longest {
                longest = cycles;
                run.class = st.utilisation.class;
                run.native_tbs = st.tbs_per_sm;
                run.peak_tbs = st.frontend.tlp.peak_tbs;
                run.extra_tbs = st.extra_tbs;
                run.regs_per_thread = st.regs_per_thread;
                run.context_registers = st.context_registers;
            }
        }
    }
    Ok(run)
}

impl TlpResults {
    /// Whether every run verified against its CPU reference.
    pub fn all_verified(&self) -> bool {
        self.runs.iter().all(|r| r.verified)
    }

    /// Figures 3.12 (speedup by ME), 3.13 (VT against GPUDuet), 3.14 (TLP) and 3.15
    /// (port width), one row per kernel (class in its name) and a geomean row.
    pub fn figures(&self) -> Vec<Figure> {
        let fig = |id: &str, title: &str, y: &str, series: &[&str], tlp: bool| {
            let mut rows: Vec<Row> = self
                .kernels
                .iter()
                .map(|k| {
                    let values = if tlp { &k.tlp } else { &k.speedup };
                    Row {
                        category: format!("{} ({})", k.kernel, class_name(k.class)),
                        values: series
                            .iter()
                            .map(|s| vec![values.iter().find(|(l, _)| l == s).map_or(0.0, |v| v.1)])
                            .collect(),
                    }
                })
                .collect();
            if let Some(c) = self.classes.iter().find(|c| c.class == "unsaturated") {
                let values = if tlp { &c.tlp } else { &c.speedup };
                rows.push(Row {
                    category: "geomean (unsaturated)".into(),
                    values: series
                        .iter()
                        .map(|s| vec![values.iter().find(|(l, _)| l == s).map_or(0.0, |v| v.1)])
                        .collect(),
                });
            }
            Figure {
                id: id.into(),
                title: title.into(),
                y_label: y.into(),
                series: series.iter().map(|s| s.to_string()).collect(),
                parts: vec!["value".into()],
                rows,
                paper: THESIS.into(),
                clip: None,
            }
        };
        vec![
            fig(
                "figure-3-12",
                "Speedup of GPUDuet by maximum extra TBs (static 1-4, dynamic)",
                "performance normalised to the baseline",
                &[
                    "gpuduet-me1",
                    "gpuduet-me2",
                    "gpuduet-me3",
                    "gpuduet-me4",
                    "gpuduet",
                ],
                false,
            ),
            fig(
                "figure-3-13",
                "Virtual Thread against GPUDuet_TB and GPUDuet",
                "performance normalised to the baseline",
                &["vt", "gpuduet-tb", "gpuduet"],
                false,
            ),
            fig(
                "figure-3-14",
                "TLP: most TBs resident per SM over the baseline's",
                "TBs per SM normalised to the baseline",
                &["vt", "gpuduet-tb", "gpuduet"],
                true,
            ),
            fig(
                "figure-3-15",
                "GPUDuet by on-chip port width (256, 128, 64 bytes)",
                "performance normalised to the baseline",
                &["gpuduet-port256", "gpuduet", "gpuduet-port64"],
                false,
            ),
        ]
    }

    /// Every run, then every speedup and TLP ratio, as CSV (`kind` = run, speedup or tlp).
    pub fn to_csv(&self) -> String {
        let mut o = String::from(
            "kind,kernel,variant,class,kernel_cycles,verified,native_tbs,peak_tbs,extra_tbs,switched_in,switch_bytes,value\n",
        );
        for r in &self.runs {
            o.push_str(&format!(
                "run,{},{},{},{},{},{},{},{},{},{},\n",
                r.kernel,
                r.variant,
                class_name(r.class),
                r.kernel_cycles,
                r.verified,
                r.native_tbs,
                r.peak_tbs,
                r.extra_tbs,
                r.switched_in,
                r.switch_bytes
            ));
        }
        for k in &self.kernels {
            for (kind, values) in [("speedup", &k.speedup), ("tlp", &k.tlp)] {
                for (v, x) in values {
                    o.push_str(&format!(
                        "{kind},{},{v},{},,,,,,,,{x:.6}\n",
                        k.kernel,
                        class_name(k.class)
                    ));
                }
            }
        }
        for c in &self.classes {
            for (kind, values) in [("speedup", &c.speedup), ("tlp", &c.tlp)] {
                for (v, x) in values {
                    o.push_str(&format!("{kind},geomean,{v},{},,,,,,,,{x:.6}\n", c.class));
                }
            }
        }
        o
    }
}

/// Table 3.3's class as the experiment writes it.
pub fn class_name(c: UtilisationClass) -> &'static str {
    match c {
        UtilisationClass::Underutilised => "underutilised",
        UtilisationClass::Moderate => "moderate",
        UtilisationClass::Saturated => "saturated",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variant_has_its_own_label_and_a_valid_setting() {
        let labels: Vec<String> = Variant::ALL.iter().map(Variant::label).collect();
        let mut unique = labels.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), labels.len(), "{labels:?}");
        assert_eq!(labels[0], "baseline");
        for v in &Variant::ALL {
            assert!(v.config().check().is_ok(), "{}", v.label());
        }
    }

    #[test]
    fn a_small_run_verifies_and_gpuduet_keeps_more_tbs_resident() {
        let mut gpu = GpuConfig::preset("maxwell16").unwrap();
        // One SM, so that the small grids give it more TBs than it holds.
        gpu.sm.count = 1;
        let mut c = TlpExperiment::default_on(gpu);
        c.kernels = vec![suite::by_name("conv2d").unwrap()];
        c.size = Size::Small;
        c.threads = 1;
        let r = run(&c, &|_, _, _| {}).unwrap();
        assert!(r.all_verified());
        assert_eq!(r.runs.len(), Variant::ALL.len());
        let k = &r.kernels[0];
        // conv2d is limited by shared memory: VT adds nothing, GPUDuet spills it.
        let tlp = |l: &str| k.tlp.iter().find(|(x, _)| x == l).unwrap().1;
        assert_eq!(tlp("vt"), 1.0, "{k:?}");
        assert!(tlp("gpuduet-me1") > 1.0, "{k:?}");
        assert_eq!(r.figures().len(), 4);
        assert!(r.to_csv().lines().count() > r.runs.len());
    }
}
