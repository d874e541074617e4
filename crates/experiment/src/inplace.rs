//! In-place context switching on kernel pairs (papers/lin-lightweight §V-E, Figure 17):
//! `kernel1` runs (large inputs) when `kernel2` (small inputs, high priority) arrives 30%
//! into its run; preemptive priority takes the SMs with lightweight context switching,
//! once spilling every preempted TB ("complete": liveness and compression) and once in
//! place (only what `kernel2` needs leaves the SM). The figure compares `kernel1`'s
//! switch-out latency, split into drain and spill. Each pair runs as a [`crate::study`],
//! so every run is also checked bit-exact against a run where nothing is preempted.

use gpu::config::GpuConfig;
use preempt::MechanismKind;
use serde::Serialize;
use suite::Size;

use crate::figures::{Figure, Row};
use crate::study::{self, Arrival, StudyConfig, StudyError};

/// The pairs: a long-running kernel and one that preempts it. The paper picks eight pairs
/// at random; these eight take as `kernel1` single-launch kernels with preemption points
/// (a kernel between launches 30% into its run, or without points, would show nothing),
/// limited by each resource (registers, TB slots, warps, shared memory).
pub const PAIRS: [(&str, &str); 8] = [
    ("kmeans", "hist"),
    ("dgemv", "reduce"),
    ("spmv", "hotspot"),
    ("branchy", "gemm"),
    ("bfs", "scan"),
    ("conv2d", "blackscholes"),
    ("bitonic", "hotspot"),
    ("dct8", "gemm"),
];

/// `kernel1`'s switch-out under one design (per preempted TB, core cycles and bytes).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SwitchOut {
    pub tbs: u64,
    pub mean_drain_us: f64,
    pub mean_spill_us: f64,
    pub context_bytes: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PairRow {
    pub pair: String,
    pub complete: SwitchOut,
    pub in_place: SwitchOut,
    /// Every run verified and bit-exact.
    pub exact: bool,
}

/// Runs every pair of `pairs` on `gpu` (`kernel1` at `kernel1_size`; the paper's setting is
/// large).
pub fn run(
    gpu: &GpuConfig,
    pairs: &[(&'static dyn suite::Kernel, &'static dyn suite::Kernel)],
    kernel1_size: Size,
    threads: usize,
    progress: &(dyn Fn(usize, usize, &str) + Sync),
) -> Result<Vec<PairRow>, StudyError> {
    let mut rows = Vec::new();
    for (i, &(k1, k2)) in pairs.iter().enumerate() {
        let mut c = StudyConfig::default_on(gpu.clone());
        c.low = (k1, kernel1_size);
        c.high = (k2, Size::Small);
        c.arrival = Arrival::IntoLowKernel(0.3);
        c.mechanisms = vec![
            MechanismKind::LIGHTWEIGHT,
            MechanismKind::LIGHTWEIGHT_IN_PLACE,
        ];
        c.threads = threads;
        let r = study::run(&c, &|_, _, _| {})?;
        let out = |m: &str| {
            let p = &r
                .rows
                .iter()
                .find(|row| row.mechanism == m)
                .expect("ran")
                .preemption;
            SwitchOut {
                tbs: p.switched + p.flushed + p.drained,
                mean_drain_us: p.mean_drain_us,
                mean_spill_us: p.mean_spill_us,
                context_bytes: p.context.total(),
            }
        };
        let name = format!("{}-{}", k1.name(), k2.name());
        progress(i + 1, pairs.len(), &name);
        rows.push(PairRow {
            pair: name,
            complete: out("lightweight"),
            in_place: out("lightweight-in-place"),
            exact: r.all_exact(),
        });
    }
    Ok(rows)
}

/// The suite kernels of [`PAIRS`].
pub fn default_pairs() -> Vec<(&'static dyn suite::Kernel, &'static dyn suite::Kernel)> {
    PAIRS
        .iter()
        .map(|&(a, b)| {
            (
                suite::by_name(a).expect("suite kernel"),
                suite::by_name(b).expect("suite kernel"),
            )
        })
        .collect()
}

/// Figure 17: `kernel1`'s switch-out latency with in-place switching, normalised to
/// "complete" (liveness and compression, every TB spilled), split into drain and spill.
pub fn figure(rows: &[PairRow]) -> Figure {
    let rows: Vec<Row> = rows
        .iter()
        .filter(|r| r.complete.tbs > 0 && r.complete.mean_drain_us + r.complete.mean_spill_us > 0.0)
        .map(|r| {
            let base = r.complete.mean_drain_us + r.complete.mean_spill_us;
            let parts = |s: &SwitchOut| vec![s.mean_drain_us / base, s.mean_spill_us / base];
            Row {
                category: r.pair.clone(),
                values: vec![parts(&r.complete), parts(&r.in_place)],
            }
        })
        .collect();
    Figure {
        id: "fig17".into(),
        title: "Normalised preemption latency with in-place context switching".into(),
        y_label: "switch-out latency / complete".into(),
        series: vec!["Complete".into(), "In-place".into()],
        parts: vec!["drain".into(), "spill".into()],
        rows,
        paper: "in-place cuts the spill of registers and shared memory by 21.5% on average; drain can grow (BT_1-HG_1)".into(),
        clip: None,
    }
    .with_geomean()
}
