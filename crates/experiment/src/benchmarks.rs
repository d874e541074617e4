//! The benchmark table of papers/tanasic-thesis §5.3.1 (Table 5.2) for the project's suite:
//! every suite kernel's host program run alone, and per kernel its launches, the mean time
//! of a launch, TBs,
//! the mean time a TB spends on its SM, shared memory and registers per TB, TBs per SM,
//! the share of an SM's on-chip storage (register file and shared memory) its resident
//! TBs fill, and the projected time to save that storage when an SM is preempted with only
//! the SM's share of the DRAM bandwidth, as the thesis projects it.
//!
//! **Classes.** The thesis groups its benchmarks twice: Class 1 by the mean time of a
//! kernel's launches (SHORT < 350 µs, MEDIUM 1,000–3,500 µs, LONG > 10,000 µs on its
//! GPU), Class 2 by the whole application's time (SHORT < 5 ms, MEDIUM 30–115 ms, LONG >
//! 400 ms). Those bounds fit its inputs, not ours (our `large` kernels run for tens of µs),
//! so the same three classes are drawn from the suite's own spread: sorted by the measure,
//! the shortest third is SHORT, the longest third LONG, the rest MEDIUM.

use std::collections::BTreeMap;

use gpu::config::GpuConfig;
use gpu::timing::{LaunchId, Move, SmLedger};
use preempt::MechanismKind;
use sched::PolicyKind;
use serde::Serialize;
use suite::Size;
use workload::scenario::Process;
use workload::{RunError, RunRecord, System};

/// A class of Table 5.2.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Class {
    Short,
    Medium,
    Long,
}

/// One kernel's row.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    /// The suite program and its kernel.
    pub program: String,
    pub kernel: String,
    pub launches: u32,
    /// The mean time of a launch, first TB placed to finished, µs (the thesis's "Avg.
    /// Time"), and the sum over its launches.
    pub time_us: f64,
    pub total_us: f64,
    pub tbs: u64,
    /// Mean time from a TB's placement to its end, µs.
    pub tb_time_us: f64,
    pub shared_per_tb: u32,
    pub registers_per_tb: u32,
    pub tbs_per_sm: u32,
    /// Share of the SM's register file and shared memory its resident TBs take, percent.
    pub sram_percent: f64,
    /// That storage over the SM's share of DRAM bandwidth, µs.
    pub save_us: f64,
    /// By the mean time of a launch, and by the program's time.
    pub class_kernel: Class,
    pub class_program: Class,
    /// The program's time, first arrival to its end, µs.
    pub program_us: f64,
}

/// Table 5.2 for `kernels` at `size` on `gpu`; `progress(done, total, name)` after each
/// program.
pub fn table(
    gpu: &GpuConfig,
    kernels: &[&'static dyn suite::Kernel],
    size: Size,
    progress: &dyn Fn(usize, usize, &str),
) -> Result<Vec<Row>, (String, RunError)> {
    let mut rows = Vec::new();
    for (i, &k) in kernels.iter().enumerate() {
        let process = Process::suite(k, size, 1);
        let setup = crate::suite_setup(
            gpu,
            PolicyKind::Fcfs,
            MechanismKind::Drain,
            200_000_000,
            None,
        );
        let r = System::new(setup, &[process])
            .and_then(|s| s.run(&mut |_| {}))
            .map_err(|e| (k.name().to_string(), e))?;
        rows.extend(rows_of(gpu, k.name(), &r));
        progress(i + 1, kernels.len(), k.name());
    }
    classify(&mut rows);
    Ok(rows)
}

/// The rows of one program's run alone, one per kernel in the order of first launch.
pub fn rows_of(gpu: &GpuConfig, program: &str, r: &RunRecord) -> Vec<Row> {
    let period = r.core_period_fs.max(1);
    let us = |cycles: f64| cycles / gpu.sm.clock_mhz;
    // Per launch: when each of its TBs was placed, and the cycles its TBs spent on SMs.
    let mut placed: BTreeMap<(u32, u64), u64> = BTreeMap::new();
    let mut tb_cycles: BTreeMap<u32, (u64, u64)> = BTreeMap::new();
    for m in &r.residency {
        let key = (m.tb.launch.0, m.tb.index);
        match m.how {
            Move::Dispatched => {
                placed.insert(key, m.cycle);
            }
            Move::Finished => {
                if let Some(at) = placed.remove(&key) {
                    let e = tb_cycles.entry(key.0).or_default();
                    e.0 += m.cycle - at;
                    e.1 += 1;
                }
            }
            // Alone, nothing is preempted; a move of another kind has no time of its own.
            _ => {}
        }
    }
    let program_us = r
        .processes
        .iter()
        .find(|p| p.name == program)
        .and_then(|p| Some((p.finished_fs? - p.arrival_fs) as f64 / period as f64))
        .map_or(0.0, us);
    let res = &gpu.sm.resources;
    let sram =
        u64::from(res.registers) * 4 + u64::from(res.shared_memory.last().copied().unwrap_or(0));
    // The SM's share of the DRAM bandwidth, bytes per core cycle.
    let bandwidth = gpu::timing::Machine::memory_config_of(gpu).dram_bytes_per_core_cycle()
        / f64::from(gpu.sm.count.max(1));
    // Rows in the order of each kernel's first launch, with the TBs that finished.
    let mut rows: Vec<(Row, u64)> = Vec::new();
    for k in r.kernels.iter().filter(|k| k.process == program) {
        let (Some(l), Some(tb), Some(a), Some(b)) = (k.launch, k.tb, k.started_fs, k.finished_fs)
        else {
            continue;
        };
        let tbs_per_sm = SmLedger::new(res).room_for(LaunchId(l), &tb);
        let held =
            u64::from(tbs_per_sm) * (u64::from(tb.registers) * 4 + u64::from(tb.shared_memory));
        let (cycles, finished) = tb_cycles.get(&l).copied().unwrap_or_default();
        let i = match rows.iter().position(|(row, _)| row.kernel == k.kernel) {
            Some(i) => i,
            None => {
                rows.push((
                    Row {
                        program: program.to_string(),
                        kernel: k.kernel.clone(),
                        launches: 0,
                        time_us: 0.0,
                        total_us: 0.0,
                        tbs: 0,
                        tb_time_us: 0.0,
                        shared_per_tb: tb.shared_memory,
                        registers_per_tb: tb.registers,
                        tbs_per_sm,
                        sram_percent: 100.0 * held as f64 / sram.max(1) as f64,
                        save_us: us(held as f64 / bandwidth.max(1e-9)),
                        class_kernel: Class::Short,
                        class_program: Class::Short,
                        program_us,
                    },
                    0,
                ));
                rows.len() - 1
            }
        };
        let (row, tbs_finished) = &mut rows[i];
        row.launches += 1;
        row.total_us += us((b - a) as f64 / period as f64);
        row.tbs += k.tbs;
        // Accumulated as a sum of TB cycles, turned into a mean below.
        row.tb_time_us += us(cycles as f64);
        *tbs_finished += finished;
    }
    rows.into_iter()
        .map(|(mut row, finished)| {
            row.tb_time_us /= finished.max(1) as f64;
            row.time_us = row.total_us / f64::from(row.launches.max(1));
            row
        })
        .collect()
}

/// Sets both classes of every row from the rows' own spread (see the module's header).
pub fn classify(rows: &mut [Row]) {
    let terciles = |values: Vec<f64>| -> Vec<Class> {
        let mut sorted: Vec<(f64, usize)> = values.iter().copied().zip(0..).collect();
        sorted.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let n = sorted.len();
        let mut out = vec![Class::Short; n];
        for (rank, &(_, i)) in sorted.iter().enumerate() {
            out[i] = match rank * 3 / n.max(1) {
                0 => Class::Short,
                1 => Class::Medium,
                _ => Class::Long,
            };
        }
        out
    };
    let per_launch = terciles(rows.iter().map(|r| r.time_us).collect());
    let program = terciles(rows.iter().map(|r| r.program_us).collect());
    for ((row, k), p) in rows.iter_mut().zip(per_launch).zip(program) {
        row.class_kernel = k;
        row.class_program = p;
    }
}
