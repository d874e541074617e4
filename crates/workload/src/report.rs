//! What a scenario run reports: per process and per kernel the moments of arrival, start
//! and end (microseconds of simulated time), and the multiprogram metrics of DESIGN.md §6
//! against each process run alone (Eyerman & Eeckhout, as papers/tanasic-thesis §5.3.1 uses
//! them).
//!
//! With `T_i^SP` the turnaround of process `i` alone and `T_i^MP` in the mix (both from its
//! arrival to its end): `NTT_i = T_i^MP / T_i^SP`; `ANTT` is the mean of the NTTs; `STP =
//! Σ T_i^SP / T_i^MP`; fairness is `min_{i,j} NP_i / NP_j` with `NP_i = T_i^SP / T_i^MP`
//! (1 when every process slows down equally, towards 0 when one starves).

use serde::Serialize;

use crate::system::{RunRecord, FS_PER_US};

fn us(fs: u64) -> f64 {
    fs as f64 / FS_PER_US as f64
}

/// One process of a run.
#[derive(Clone, Debug, Serialize)]
pub struct ProcessReport {
    pub name: String,
    pub priority: i32,
    pub arrival_us: f64,
    /// When its first copy or kernel started on the GPU side.
    pub start_us: Option<f64>,
    pub end_us: f64,
    /// `end - arrival`; under replay, the mean over its completed runs.
    pub turnaround_us: f64,
    /// Its completed runs (1 without replay).
    pub runs: usize,
    /// The same process alone on the machine, and its normalised turnaround.
    pub alone_us: Option<f64>,
    pub ntt: Option<f64>,
    pub kernels: usize,
    pub copies: usize,
    pub verified: bool,
    pub detail: String,
    /// For a process serving requests ([`crate::arrivals`]), its requests' latencies.
    pub requests: Option<Latency>,
}

/// Request latencies (µs), each from the request's arrival to the end of the program run
/// that served it (its wait behind earlier requests included). A percentile is the nearest
/// rank: the `p`-th of `n` sorted latencies is the `⌈p/100 × n⌉`-th smallest, so with
/// fewer than 1000 requests p99.9 is the largest.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Latency {
    /// Requests completed.
    pub count: usize,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p95_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
}

impl Latency {
    /// The summary of `latencies_us`, `None` when there are none.
    pub fn of(latencies_us: &[f64]) -> Option<Latency> {
        if latencies_us.is_empty() {
            return None;
        }
        let mut v = latencies_us.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let rank = |p: f64| v[((p / 100.0 * n as f64).ceil() as usize).clamp(1, n) - 1];
        Some(Latency {
            count: n,
            mean_us: v.iter().sum::<f64>() / n as f64,
            p50_us: rank(50.0),
            p95_us: rank(95.0),
            p99_us: rank(99.0),
            p999_us: rank(99.9),
            max_us: v[n - 1],
        })
    }
}

/// One request a process served (µs).
#[derive(Clone, Debug, Serialize)]
pub struct RequestReport {
    pub process: String,
    /// Its index among the process's requests, from 0.
    pub request: usize,
    pub arrived_us: f64,
    pub started_us: f64,
    pub finished_us: f64,
    pub latency_us: f64,
    pub verified: bool,
}

/// One kernel launch of a run (µs).
#[derive(Clone, Debug, Serialize)]
pub struct KernelReport {
    pub process: String,
    pub kernel: String,
    pub stream: u32,
    /// The host's launch call.
    pub called_us: f64,
    /// Arrival at the GPU (its context's command buffer; papers/li-pep's "arrival at the
    /// kernel management unit").
    pub arrived_us: f64,
    /// Entry into the active queue, first TB dispatched, end.
    pub activated_us: f64,
    pub started_us: f64,
    pub finished_us: f64,
    /// The machine's launch number (its statistics in the statistics file).
    pub launch: u32,
    /// Core cycles from its arrival at the machine to its last access completed, and the
    /// warp instructions it executed (0 if it did not finish).
    pub cycles: u64,
    pub warp_instructions: u64,
}

/// One copy (µs).
#[derive(Clone, Debug, Serialize)]
pub struct CopyReport {
    pub process: String,
    pub stream: u32,
    pub direction: &'static str,
    pub bytes: u64,
    pub engine: u32,
    pub called_us: f64,
    pub started_us: f64,
    pub finished_us: f64,
}

/// What preemption cost in a run (DESIGN.md §6), over every TB the mechanism took off an
/// SM. Latency is from the request to the release of the TB's resources, split into its
/// drain part (request to the TB stopped: halted with its in-flight work done, or finished)
/// and its spill part (stopped to released: the context save).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PreemptionSummary {
    pub mechanism: String,
    /// SMs requested.
    pub requests: u64,
    /// TBs taken off: by a context switch, by flushing, by draining (they finished).
    pub switched: u64,
    pub flushed: u64,
    pub drained: u64,
    /// TBs the mechanism could not take away (they drained).
    pub refused: u64,
    pub mean_latency_us: f64,
    pub max_latency_us: f64,
    pub mean_drain_us: f64,
    pub mean_spill_us: f64,
    /// Context bytes saved, summed.
    pub context: preempt::ContextBytes,
    /// Contexts restored, and the mean restore time.
    pub restores: u64,
    pub mean_resume_us: f64,
    /// Warp instructions thrown away by flushing, or by CKPT's rollbacks.
    pub discarded_instructions: u64,
    /// TB residency lost: time TBs held SM resources without running (their context being
    /// saved or restored), summed over TBs.
    pub held_without_running_us: f64,
    /// What the saved registers held (context switches; papers/lin-lightweight Fig. 6, 8).
    pub registers: preempt::RegisterCensus,
}

impl PreemptionSummary {
    /// One summary per kernel whose TBs the mechanism took, named `process:kernel` (by the
    /// launch each record's TB belongs to), in order of first appearance.
    pub fn by_kernel(mechanism: &str, r: &RunRecord) -> Vec<(String, PreemptionSummary)> {
        use preempt::Record as P;
        let name = |l: u32| -> String {
            match r.kernels.iter().find(|k| k.launch == Some(l)) {
                Some(k) => format!("{}:{}", k.process, k.kernel),
                None => r
                    .launch_names
                    .get(l as usize)
                    .cloned()
                    .unwrap_or_else(|| format!("launch {l}")),
            }
        };
        let mut groups: Vec<(String, Vec<P>)> = Vec::new();
        for p in &r.preemptions {
            let tb = match p {
                P::Preempted { tb, .. }
                | P::Restored { tb, .. }
                | P::Refused { tb, .. }
                | P::Chose { tb, .. }
                | P::Case { tb, .. }
                | P::Checkpointed { tb, .. }
                | P::RolledBack { tb, .. } => tb,
                P::Requested { .. } => continue,
            };
            let n = name(tb.launch.0);
            match groups.iter_mut().find(|g| g.0 == n) {
                Some(g) => g.1.push(p.clone()),
                None => groups.push((n, vec![p.clone()])),
            }
        }
        groups
            .into_iter()
            .map(|(n, recs)| (n, PreemptionSummary::of(mechanism, &recs, r.core_period_fs)))
            .collect()
    }

    pub fn of(mechanism: &str, records: &[preempt::Record], core_period_fs: u64) -> Self {
        use preempt::{How, Record};
        let us = |c: u64| us(c * core_period_fs);
        let mut s = PreemptionSummary {
            mechanism: mechanism.to_string(),
            ..Default::default()
        };
        let (mut lat, mut drain, mut spill, mut resume) = (0u64, 0u64, 0u64, 0u64);
        let mut held = 0u64;
        let mut max = 0u64;
        for r in records {
            match *r {
                Record::Requested { .. } => s.requests += 1,
                Record::Refused { .. } => s.refused += 1,
                Record::RolledBack {
                    discarded_instructions,
                    ..
                } => s.discarded_instructions += discarded_instructions,
                Record::Chose { .. } | Record::Case { .. } | Record::Checkpointed { .. } => {}
                Record::Preempted {
                    how,
                    requested,
                    stopped,
                    released,
                    bytes,
                    ref registers,
                    ..
                } => {
                    s.registers.add(registers);
                    if how == How::Switched {
                        held += released - stopped;
                    }
                    match how {
                        How::Switched => s.switched += 1,
                        How::Flushed {
                            discarded_instructions,
                        } => {
                            s.flushed += 1;
                            s.discarded_instructions += discarded_instructions;
                        }
                        How::Drained => s.drained += 1,
                    }
                    lat += released - requested;
                    max = max.max(released - requested);
                    drain += stopped - requested;
                    spill += released - stopped;
                    s.context.registers += bytes.registers;
                    s.context.shared += bytes.shared;
                    s.context.stack_barrier += bytes.stack_barrier;
                    s.context.metadata += bytes.metadata;
                }
                Record::Restored {
                    started, finished, ..
                } => {
                    s.restores += 1;
                    resume += finished - started;
                    held += finished - started;
                }
            }
        }
        let n = (s.switched + s.flushed + s.drained).max(1);
        s.mean_latency_us = us(lat) / n as f64;
        s.max_latency_us = us(max);
        s.mean_drain_us = us(drain) / n as f64;
        s.mean_spill_us = us(spill) / n as f64;
        s.mean_resume_us = us(resume) / s.restores.max(1) as f64;
        s.held_without_running_us = us(held);
        s
    }
}

/// The multiprogram metrics of a run.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Metrics {
    pub antt: f64,
    pub stp: f64,
    pub fairness: f64,
}

impl Metrics {
    /// The metrics of processes whose turnarounds were `alone[i]` and `together[i]`.
    pub fn of(alone: &[f64], together: &[f64]) -> Metrics {
        let n = alone.len().max(1) as f64;
        let np: Vec<f64> = alone.iter().zip(together).map(|(a, t)| a / t).collect();
        let antt = alone.iter().zip(together).map(|(a, t)| t / a).sum::<f64>() / n;
        let stp = np.iter().sum();
        let max = np.iter().copied().fold(f64::MIN, f64::max);
        let min = np.iter().copied().fold(f64::MAX, f64::min);
        Metrics {
            antt,
            stp,
            fairness: if max > 0.0 { min / max } else { 0.0 },
        }
    }
}

/// The co-running metrics of papers/lin-thesis §4.3.3 over kernels' IPCs alone and shared:
/// per kernel its slowdown `IPC_alone / IPC_shared`; the weighted speedup
/// `Σ IPC_shared / IPC_alone` (system throughput, Eyerman & Eeckhout) and the harmonic
/// speedup `N / Σ IPC_alone / IPC_shared` (throughput and fairness together, Luo et al.;
/// the thesis's primary metric). Alone, each is 1 per kernel: the weighted speedup is `N`
/// and the harmonic 1.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CorunMetrics {
    pub slowdowns: Vec<f64>,
    pub weighted_speedup: f64,
    pub harmonic_speedup: f64,
}

/// IPCs the co-running metrics cannot be computed from.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum CorunMetricsError {
    #[error("{alone} IPCs alone but {shared} shared: one of each per kernel")]
    Lengths { alone: usize, shared: usize },
    #[error("no kernels")]
    Empty,
    #[error("kernel {kernel}'s IPC {which} is {value}: IPCs must be finite and positive")]
    NotPositive {
        kernel: usize,
        which: &'static str,
        value: f64,
    },
}

impl CorunMetrics {
    /// The metrics of kernels whose IPCs were `alone[i]` alone and `shared[i]` co-running.
    pub fn of(alone: &[f64], shared: &[f64]) -> Result<CorunMetrics, CorunMetricsError> {
        if alone.len() != shared.len() {
            return Err(CorunMetricsError::Lengths {
                alone: alone.len(),
                shared: shared.len(),
            });
        }
        if alone.is_empty() {
            return Err(CorunMetricsError::Empty);
        }
        for (which, ipcs) in [("alone", alone), ("shared", shared)] {
            if let Some((kernel, &value)) = ipcs
                .iter()
                .enumerate()
                .find(|(_, v)| !(v.is_finite() && **v > 0.0))
            {
                return Err(CorunMetricsError::NotPositive {
                    kernel,
                    which,
                    value,
                });
            }
        }
        let slowdowns: Vec<f64> = alone.iter().zip(shared).map(|(a, s)| a / s).collect();
        let weighted_speedup = alone.iter().zip(shared).map(|(a, s)| s / a).sum();
        let harmonic_speedup = alone.len() as f64 / slowdowns.iter().sum::<f64>();
        Ok(CorunMetrics {
            slowdowns,
            weighted_speedup,
            harmonic_speedup,
        })
    }
}

/// A whole run.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub scenario: String,
    pub description: String,
    pub gpu: String,
    pub policy: String,
    pub intra_sm_sharing: bool,
    pub processes: Vec<ProcessReport>,
    pub metrics: Option<Metrics>,
    pub preemption: PreemptionSummary,
    /// The same per preempted kernel (`process:kernel`; SM requests are not per kernel and
    /// count only in the whole-run summary).
    pub preemption_by_kernel: Vec<(String, PreemptionSummary)>,
    pub kernels: Vec<KernelReport>,
    pub copies: Vec<CopyReport>,
    /// Every request served, by process then in order.
    pub requests: Vec<RequestReport>,
    /// Core cycles and simulated time of the whole run.
    pub cycles: u64,
    pub simulated_us: f64,
    pub warp_instructions: u64,
    pub all_verified: bool,
}

impl Report {
    /// The report of run `r`; `alone` gives each process's turnaround alone (µs), when
    /// measured.
    pub fn new(
        scenario: &crate::Scenario,
        gpu: &str,
        r: &RunRecord,
        alone: Option<&[f64]>,
    ) -> Report {
        let mut processes: Vec<ProcessReport> = r
            .processes
            .iter()
            .map(|p| {
                let end = p.finished_fs.unwrap_or(0);
                let starts = r
                    .kernels
                    .iter()
                    .filter(|k| k.process == p.name)
                    .filter_map(|k| k.started_fs)
                    .chain(
                        r.copies
                            .iter()
                            .filter(|c| c.process == p.name)
                            .map(|c| c.started_fs),
                    );
                let v = p.verdict.clone().unwrap_or(crate::program::Verdict {
                    verified: false,
                    detail: "did not finish".into(),
                });
                ProcessReport {
                    name: p.name.clone(),
                    priority: p.priority,
                    arrival_us: us(p.arrival_fs),
                    start_us: starts.min().map(us),
                    end_us: us(end),
                    turnaround_us: p.mean_turnaround_fs().unwrap_or(0.0) / FS_PER_US as f64,
                    runs: p.runs.len(),
                    alone_us: None,
                    ntt: None,
                    kernels: r.kernels.iter().filter(|k| k.process == p.name).count(),
                    copies: r.copies.iter().filter(|c| c.process == p.name).count(),
                    verified: v.verified,
                    detail: v.detail,
                    requests: if p.requests {
                        Latency::of(
                            &p.runs
                                .iter()
                                .map(|r| us(r.finished_fs.saturating_sub(r.requested_fs)))
                                .collect::<Vec<_>>(),
                        )
                    } else {
                        None
                    },
                }
            })
            .collect();
        let requests = r
            .processes
            .iter()
            .filter(|p| p.requests)
            .flat_map(|p| {
                p.runs.iter().enumerate().map(|(i, run)| RequestReport {
                    process: p.name.clone(),
                    request: i,
                    arrived_us: us(run.requested_fs),
                    started_us: us(run.started_fs),
                    finished_us: us(run.finished_fs),
                    latency_us: us(run.finished_fs.saturating_sub(run.requested_fs)),
                    verified: run.verdict.verified,
                })
            })
            .collect();
        let metrics = alone.map(|alone| {
            let together: Vec<f64> = processes.iter().map(|p| p.turnaround_us).collect();
            for (p, &a) in processes.iter_mut().zip(alone) {
                p.alone_us = Some(a);
                p.ntt = Some(p.turnaround_us / a);
            }
            Metrics::of(alone, &together)
        });
        let kernels = r
            .kernels
            .iter()
            .map(|k| KernelReport {
                process: k.process.clone(),
                kernel: k.kernel.clone(),
                stream: k.stream,
                called_us: us(k.called_fs),
                arrived_us: k.arrived_fs.map_or(0.0, us),
                activated_us: k.activated_fs.map_or(0.0, us),
                started_us: k.started_fs.map_or(0.0, us),
                finished_us: k.finished_fs.map_or(0.0, us),
                launch: k.launch.unwrap_or(0),
                cycles: k.stats.as_ref().map_or(0, |s| s.cycles),
                warp_instructions: k.stats.as_ref().map_or(0, |s| s.warp_instructions),
            })
            .collect();
        let copies = r
            .copies
            .iter()
            .map(|c| CopyReport {
                process: c.process.clone(),
                stream: c.stream,
                direction: if c.to_device { "to_device" } else { "to_host" },
                bytes: c.bytes,
                engine: c.engine,
                called_us: us(c.called_fs),
                started_us: us(c.started_fs),
                finished_us: us(c.finished_fs),
            })
            .collect();
        Report {
            scenario: scenario.file.clone(),
            description: scenario.description.clone(),
            gpu: gpu.to_string(),
            policy: scenario.policy.to_string(),
            intra_sm_sharing: scenario.framework.intra_sm_sharing,
            all_verified: processes.iter().all(|p| p.verified),
            processes,
            metrics,
            preemption: PreemptionSummary::of(
                &scenario.mechanism.to_string(),
                &r.preemptions,
                r.core_period_fs,
            ),
            preemption_by_kernel: PreemptionSummary::by_kernel(&scenario.mechanism.to_string(), r),
            kernels,
            copies,
            requests,
            cycles: r.cycles,
            simulated_us: us(r.cycles * r.core_period_fs),
            warp_instructions: r.warp_instructions,
        }
    }

    /// The processes as CSV.
    pub fn processes_csv(&self) -> String {
        let mut s = String::from(
            "process,priority,arrival_us,start_us,end_us,turnaround_us,alone_us,ntt,kernels,copies,verified,runs,requests,p50_us,p95_us,p99_us,p999_us,max_us\n",
        );
        let opt = |x: Option<f64>| x.map(|v| format!("{v:.3}")).unwrap_or_default();
        for p in &self.processes {
            s += &format!(
                "{},{},{:.3},{},{:.3},{:.3},{},{},{},{},{},{}\n",
                csv_field(&p.name),
                p.priority,
                p.arrival_us,
                opt(p.start_us),
                p.end_us,
                p.turnaround_us,
                opt(p.alone_us),
                p.ntt.map(|v| format!("{v:.4}")).unwrap_or_default(),
                p.kernels,
                p.copies,
                p.verified,
                p.runs
            );
            // The latency columns, empty for a process that serves no requests.
            s.pop();
            match &p.requests {
                Some(l) => {
                    s += &format!(
                        ",{},{:.3},{:.3},{:.3},{:.3},{:.3}\n",
                        l.count, l.p50_us, l.p95_us, l.p99_us, l.p999_us, l.max_us
                    )
                }
                None => s += ",,,,,,\n",
            }
        }
        s
    }

    /// The requests served, one row each, as CSV.
    pub fn requests_csv(&self) -> String {
        let mut s =
            String::from("process,request,arrived_us,started_us,finished_us,latency_us,verified\n");
        for q in &self.requests {
            s += &format!(
                "{},{},{:.3},{:.3},{:.3},{:.3},{}\n",
                csv_field(&q.process),
                q.request,
                q.arrived_us,
                q.started_us,
                q.finished_us,
                q.latency_us,
                q.verified
            );
        }
        s
    }

    /// The kernels as CSV.
    pub fn kernels_csv(&self) -> String {
        let mut s = String::from(
            "process,kernel,stream,launch,called_us,arrived_us,activated_us,started_us,finished_us,cycles,warp_instructions\n",
        );
        for k in &self.kernels {
            s += &format!(
                "{},{},{},{},{:.3},{:.3},{:.3},{:.3},{:.3},{},{}\n",
                csv_field(&k.process),
                csv_field(&k.kernel),
                k.stream,
                k.launch,
                k.called_us,
                k.arrived_us,
                k.activated_us,
                k.started_us,
                k.finished_us,
                k.cycles,
                k.warp_instructions
            );
        }
        s
    }

    /// The preemption summary per kernel as CSV (µs and bytes).
    pub fn preemption_csv(&self) -> String {
        let mut s = String::from(
            "kernel,mechanism,switched,flushed,drained,refused,mean_latency_us,max_latency_us,mean_drain_us,mean_spill_us,registers_bytes,shared_bytes,stack_barrier_bytes,metadata_bytes,restores,mean_resume_us,discarded_instructions,held_without_running_us\n",
        );
        for (k, p) in &self.preemption_by_kernel {
            s += &format!(
                "{},{},{},{},{},{},{:.3},{:.3},{:.3},{:.3},{},{},{},{},{},{:.3},{},{:.3}\n",
                csv_field(k),
                csv_field(&p.mechanism),
                p.switched,
                p.flushed,
                p.drained,
                p.refused,
                p.mean_latency_us,
                p.max_latency_us,
                p.mean_drain_us,
                p.mean_spill_us,
                p.context.registers,
                p.context.shared,
                p.context.stack_barrier,
                p.context.metadata,
                p.restores,
                p.mean_resume_us,
                p.discarded_instructions,
                p.held_without_running_us
            );
        }
        s
    }

    /// The copies as CSV.
    pub fn copies_csv(&self) -> String {
        let mut s = String::from(
            "process,stream,direction,bytes,engine,called_us,started_us,finished_us\n",
        );
        for c in &self.copies {
            s += &format!(
                "{},{},{},{},{},{:.3},{:.3},{:.3}\n",
                csv_field(&c.process),
                c.stream,
                c.direction,
                c.bytes,
                c.engine,
                c.called_us,
                c.started_us,
                c.finished_us
            );
        }
        s
    }
}

/// A CSV field, quoted when it must be.
pub(crate) fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_follow_their_definitions() {
        // Two processes: one twice as slow together, one three times.
        let m = Metrics::of(&[10.0, 20.0], &[20.0, 60.0]);
        assert_eq!(m.antt, (2.0 + 3.0) / 2.0);
        assert!((m.stp - (0.5 + 1.0 / 3.0)).abs() < 1e-12);
        assert!((m.fairness - (1.0 / 3.0) / 0.5).abs() < 1e-12);
        // Equal slowdowns are perfectly fair; alone, STP is the process count.
        let m = Metrics::of(&[5.0, 7.0, 9.0], &[10.0, 14.0, 18.0]);
        assert_eq!((m.antt, m.fairness), (2.0, 1.0));
        assert_eq!(Metrics::of(&[4.0, 4.0], &[4.0, 4.0]).stp, 2.0);
    }

    #[test]
    fn corun_metrics_follow_their_definitions() {
        // Both kernels at half their IPC alone: slowdown 2 each, WS 0.5 + 0.5, HS 2 / 4.
        let m = CorunMetrics::of(&[2.0, 1.0], &[1.0, 0.5]).unwrap();
        assert_eq!(m.slowdowns, [2.0, 2.0]);
        assert_eq!((m.weighted_speedup, m.harmonic_speedup), (1.0, 0.5));
        // Unequal: 3/4 and 1/4 of alone. Slowdowns 4/3 and 4; WS 0.75 + 0.25 = 1, the same
        // throughput, but HS 2 / (4/3 + 4) = 3/8 marks the unfairness.
        let m = CorunMetrics::of(&[4.0, 1.0], &[3.0, 0.25]).unwrap();
        assert!((m.slowdowns[0] - 4.0 / 3.0).abs() < 1e-12 && m.slowdowns[1] == 4.0);
        assert!((m.weighted_speedup - 1.0).abs() < 1e-12);
        assert!((m.harmonic_speedup - 0.375).abs() < 1e-12);
        // Three kernels each as fast as alone: WS 3, HS 1.
        let m = CorunMetrics::of(&[1.0, 2.0, 3.0], &[1.0, 2.0, 3.0]).unwrap();
        assert_eq!((m.weighted_speedup, m.harmonic_speedup), (3.0, 1.0));
    }

    #[test]
    fn corun_metrics_refuse_bad_ipcs() {
        use CorunMetricsError as E;
        assert_eq!(
            CorunMetrics::of(&[1.0], &[1.0, 2.0]),
            Err(E::Lengths {
                alone: 1,
                shared: 2
            })
        );
        assert_eq!(CorunMetrics::of(&[], &[]), Err(E::Empty));
        assert_eq!(
            CorunMetrics::of(&[1.0, 2.0], &[1.0, 0.0]),
            Err(E::NotPositive {
                kernel: 1,
                which: "shared",
                value: 0.0
            })
        );
        let e = CorunMetrics::of(&[f64::NAN], &[1.0]).unwrap_err();
        assert!(e.to_string().contains("kernel 0's IPC alone is NaN"), "{e}");
    }

    #[test]
    fn csv_fields_are_quoted_when_needed() {
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field("plain"), "plain");
    }
}
