//! `corun`: papers/lin-thesis ch. 4 — one pair of suite programs co-running inside the SMs,
//! as Figure 4.2 does for BP + CFD: their performance at every TB combination on every SM
//! (the `fixed` scheme), and under every co-running scheme (spatial, left-over, SMK;
//! `sched::corun`), each as per-kernel slowdowns, weighted and harmonic speedup
//! (`workload::CorunMetrics`, §4.3.3). The best combination by harmonic speedup is the
//! oracle of §4.1 over the combinations tried. Warped-Slicer (§4.1, Xu16) runs twice: as
//! the online scheme (`warped-slicer`, profiling on the SMs when the kernels start,
//! `sched::corun`), and offline (`ws-offline`): each program runs alone at every TB count
//! per SM (its scalability curve), and `sched::corun::water_fill` picks the combination
//! the pair then co-runs at. Maestro-style search runs twice too: online (`maestro`, one
//! combination per epoch of one run, `sched::corun`) and offline (`maestro-offline`): a
//! hill climb over the measured combinations from SMK's DRF combination
//! (`sched::corun::hill_climb`, by harmonic speedup; no extra run, each combination a
//! whole run). CCBP (§4.5) runs twice as well: online (`ccbp`, Warped-Slicer's profile on
//! the SMs giving the bandwidth curves, `sched::corun`) and offline (`ccbp-offline`): the
//! same runs alone give each program's NoC flits, DRAM lines and requests towards the L2
//! per IRC window per SM at every TB count (its bandwidth curves), from which
//! `sched::ccbp` classifies each program and chooses the combination and the request
//! quotas (Algorithm 1); the pair co-runs under `fixed` with them.
//!
//! Method. The thesis co-runs kernels for 100 M cycles, re-executing one that finishes
//! early (§4.3.3). Here each program is replayed (`workload::Setup::replay`, one run each):
//! one that completes starts again at once, so the two co-run until the slower has
//! completed its run, where the run stops. A program's IPC is the warp instructions of all
//! its launches (sampled every cycle before the machine steps, so the instructions of a
//! launch's very last cycle are not counted) over the cycles its kernels were on the GPU
//! (active queue to finish), alone as together: its host copies are left out, since at the
//! small sizes they take most of a program's time and would make the copy engines, not the
//! SMs, what the programs share. A kernel may still run alone for a while beside the other
//! program's copies. The combinations go
//! from 1 TB of each up to each program's first kernel's occupancy alone (or `max_tbs`),
//! leaving out those that do not fit on an SM together. SMK's quotas take the two IPCs
//! alone when its policy names none.
//!
//! Runs go over a fixed number of threads and land by index, so results do not depend on
//! the thread count.

use std::sync::atomic::AtomicUsize;

use gpu::config::GpuConfig;
use gpu::occupancy::Occupancy;
use gpu::timing::{Machine, IRC_WINDOW};
use preempt::MechanismKind;
use sched::ccbp::{self, BandwidthCurve, KernelType, Share, Sustainable};
use sched::corun::{fits_together, water_fill, Corunner};
use sched::{Framework, Ipcs, PolicyKind, TbCounts};
use serde::Serialize;
use suite::Size;
use workload::scenario::Process;
use workload::system::Injector;
use workload::{CorunMetrics, RunError, RunRecord, System};

/// The experiment's setting.
#[derive(Clone)]
pub struct CorunConfig {
    pub gpu: GpuConfig,
    /// The two suite host programs.
    pub pair: [&'static dyn suite::Kernel; 2],
    pub size: Size,
    pub seed: u64,
    /// The largest TB count per SM tried for each program (`None`: its first kernel's
    /// occupancy alone).
    pub max_tbs: Option<u32>,
    /// The schemes compared beside the combinations.
    pub schemes: Vec<PolicyKind>,
    pub threads: usize,
    /// Core cycles one run may take; warp instructions one launch may execute in all
    /// (`None`: the progress rule of `gpu::limits`).
    pub max_cycles: u64,
    pub instruction_limit: Option<u64>,
    /// CCBP's priority for latency-sensitive kernels (`sched::ccbp::ccbp`'s `prior_lsk`; 1:
    /// none).
    pub prior_lsk: f64,
}

impl CorunConfig {
    /// The pair on `gpu` (the thesis: `maxwell16`) at `small`, every TB combination, the
    /// schemes of [`PolicyKind::CORUN`].
    pub fn default_on(gpu: GpuConfig, pair: [&'static dyn suite::Kernel; 2]) -> CorunConfig {
        CorunConfig {
            gpu,
            pair,
            size: Size::Small,
            seed: 1,
            max_tbs: None,
            schemes: PolicyKind::CORUN.to_vec(),
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            max_cycles: 1 << 34,
            instruction_limit: None,
            prior_lsk: 1.0,
        }
    }
}

/// A program alone.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Alone {
    pub program: String,
    /// Its first kernel, whose TB shape the combinations follow, and its occupancy alone.
    pub kernel: String,
    pub tbs_per_sm: u32,
    /// Warp instructions per cycle of its kernels' time on the GPU.
    pub ipc: f64,
    /// The same at 1, 2, … TBs per SM (the `fixed` scheme alone, up to `tbs_per_sm` or
    /// `max_tbs`): its scalability curve, Warped-Slicer's input.
    pub curve: Vec<f64>,
    /// Its NoC flits, DRAM lines and requests towards the L2 per IRC window per SM at the
    /// same TB counts (its bandwidth curves, CCBP's input).
    pub bandwidth: BandwidthCurve,
    /// Cycles of the run, and of its kernels' time on the GPU.
    pub cycles: u64,
    pub kernel_cycles: u64,
    pub warp_instructions: u64,
    pub verified: bool,
}

/// One co-run: a TB combination or a scheme.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Point {
    /// `a+b` for a combination, the scheme's `name[:key=value,...]` otherwise.
    pub label: String,
    /// TBs per SM of each program (a combination's).
    pub tbs: Option<[u32; 2]>,
    /// Each program's warp instructions per cycle of its kernels' time on the GPU.
    pub ipc: [f64; 2],
    pub warp_instructions: [u64; 2],
    pub kernel_cycles: [u64; 2],
    /// Each program's requests towards the L2, NoC flits and DRAM lines per IRC window per
    /// SM over its kernels' time on the GPU (what CCBP's quotas and grants count).
    pub requests: [f64; 2],
    pub noc_flits: [f64; 2],
    pub dram: [f64; 2],
    /// Cycles of the whole run.
    pub cycles: u64,
    /// Slowdowns, weighted and harmonic speedup against the programs alone (`None` when a
    /// program issued nothing).
    pub metrics: Option<CorunMetrics>,
    pub verified: bool,
}

/// Everything the experiment measured.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CorunResults {
    pub gpu: String,
    pub size: String,
    pub alone: [Alone; 2],
    /// Every TB combination tried, by the first program's count, then the second's.
    pub combinations: Vec<Point>,
    /// The schemes asked for, then Warped-Slicer's combination (when it gives both
    /// programs a TB).
    pub schemes: Vec<Point>,
    /// The combination of the best harmonic speedup (the oracle over those tried), and of
    /// the best weighted speedup (indices into `combinations`; ties to the first).
    pub best_harmonic: Option<usize>,
    pub best_weighted: Option<usize>,
    /// CCBP's choice from the curves (its run is among `schemes` when both programs got a
    /// TB).
    pub ccbp: CcbpChoice,
}

/// What CCBP's Algorithm 1 chose (papers/lin-thesis §4.5, `sched::ccbp`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CcbpChoice {
    /// One SM's share of the sustainable bandwidth per IRC window.
    pub sustainable: Sustainable,
    pub prior_lsk: f64,
    /// Per program: its type, TBs per SM, bandwidth granted and request quota.
    pub shares: Vec<Share>,
}

impl CorunResults {
    /// The oracle: the combination with the best harmonic speedup, if any ran.
    pub fn oracle(&self) -> Option<&Point> {
        self.best_harmonic.map(|i| &self.combinations[i])
    }

    pub fn all_verified(&self) -> bool {
        self.alone.iter().all(|a| a.verified)
            && self
                .combinations
                .iter()
                .chain(&self.schemes)
                .all(|p| p.verified)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CorunError {
    #[error("{what}: {error}")]
    Run { what: String, error: RunError },
    #[error("{0}")]
    Config(String),
}

/// Samples every launch's warp instructions each cycle.
#[derive(Default)]
struct Count {
    by_launch: Vec<u64>,
}

impl Injector for Count {
    fn before_cycle(&mut self, m: &Machine, _: &mut Framework) {
        for &id in m.active() {
            let i = id.0 as usize;
            if self.by_launch.len() <= i {
                self.by_launch.resize(i + 1, 0);
            }
            self.by_launch[i] = m.warp_instructions(id);
        }
    }
}

fn process(i: usize, k: &'static dyn suite::Kernel, c: &CorunConfig) -> Process {
    Process {
        name: format!("{i}:{}", k.name()),
        ..Process::suite(k, c.size, c.seed)
    }
}

/// What one program did in a run: its warp instructions, and the core cycles its kernels
/// were on the GPU (from entering the active queue to finishing, a launch still running at
/// the end counted to the end; launches of one program in different streams that overlap
/// count twice).
struct Measured {
    warp_instructions: u64,
    kernel_cycles: u64,
    /// Its launches' requests towards the L2, their interconnect flits and DRAM bytes
    /// (`RunRecord::bandwidth`).
    noc_requests: u64,
    noc_flits: u64,
    dram_bytes: u64,
}

impl Measured {
    fn ipc(&self) -> f64 {
        self.warp_instructions as f64 / self.kernel_cycles.max(1) as f64
    }

    /// Its requests towards the L2, NoC flits and DRAM lines per IRC window per SM of
    /// `gpu`, over its kernels' time on the GPU.
    fn per_window(&self, gpu: &GpuConfig) -> [f64; 3] {
        let per = IRC_WINDOW as f64 / (self.kernel_cycles.max(1) as f64 * f64::from(gpu.sm.count));
        [
            self.noc_requests as f64 * per,
            self.noc_flits as f64 * per,
            self.dram_bytes as f64 / gpu.memory.line_bytes as f64 * per,
        ]
    }
}

/// `schemes` with SMK's quotas and Maestro's scores taken from `ipc_alone` (the programs'
/// IPCs alone) where a scheme names no IPCs: Maestro's online search scores harmonic
/// speedup, as the offline one does. Online CCBP takes the experiment's `prior_lsk` where
/// it names none, as the offline one does.
fn with_ipcs(schemes: &[PolicyKind], ipc_alone: &[f64], prior_lsk: f64) -> Vec<PolicyKind> {
    schemes
        .iter()
        .map(|&p| match p {
            PolicyKind::Ccbp {
                warm_up,
                sample,
                prior_lsk: None,
            } if prior_lsk != 1.0 => PolicyKind::Ccbp {
                warm_up,
                sample,
                prior_lsk: Some(prior_lsk),
            },
            PolicyKind::Smk { epoch, ipc: None } => PolicyKind::Smk {
                epoch,
                ipc: Ipcs::new(ipc_alone),
            },
            PolicyKind::Maestro { epoch, ipc: None } => PolicyKind::Maestro {
                epoch,
                ipc: Ipcs::new(ipc_alone),
            },
            p => p,
        })
        .collect()
}

/// Runs `programs` (indices into the pair) under `policy`, replayed once; what each program
/// did, with the record.
fn run_one(
    c: &CorunConfig,
    programs: &[usize],
    policy: PolicyKind,
) -> Result<(Vec<Measured>, RunRecord), RunError> {
    let kernels: Vec<(usize, &'static dyn suite::Kernel)> =
        programs.iter().map(|&i| (i, c.pair[i])).collect();
    run_programs(c, &kernels, policy)
}

/// Runs `programs` (each with its index, for its process's name) under `policy`, replayed
/// once; what each program did, with the record.
fn run_programs(
    c: &CorunConfig,
    programs: &[(usize, &'static dyn suite::Kernel)],
    policy: PolicyKind,
) -> Result<(Vec<Measured>, RunRecord), RunError> {
    let mut setup = crate::suite_setup(
        &c.gpu,
        policy,
        MechanismKind::Drain,
        c.max_cycles,
        c.instruction_limit,
    );
    setup.snapshot = false;
    setup.replay = Some(1);
    let procs: Vec<Process> = programs.iter().map(|&(i, k)| process(i, k, c)).collect();
    let mut count = Count::default();
    let r = System::new(setup, &procs)?.run_with(&mut |_| {}, Some(&mut count))?;
    let period = r.core_period_fs.max(1);
    let end_fs = r.cycles * period;
    let per = procs
        .iter()
        .map(|p| {
            let mine = r.kernels.iter().filter(|k| k.process == p.name);
            let mut m = Measured {
                warp_instructions: 0,
                kernel_cycles: 0,
                noc_requests: 0,
                noc_flits: 0,
                dram_bytes: 0,
            };
            for k in mine {
                if let Some(l) = k.launch {
                    m.warp_instructions += count.by_launch.get(l as usize).copied().unwrap_or(0);
                    for b in r.bandwidth.iter().filter(|b| b.launch == l) {
                        m.noc_requests += b.noc_requests;
                        m.noc_flits += b.noc_flits;
                        m.dram_bytes += b.dram_bytes;
                    }
                }
                if let Some(from) = k.activated_fs {
                    let to = k.finished_fs.unwrap_or(end_fs);
                    m.kernel_cycles += to.saturating_sub(from) / period;
                }
            }
            m
        })
        .collect();
    Ok((per, r))
}

fn verified(r: &RunRecord) -> bool {
    r.processes
        .iter()
        .all(|p| !p.runs.is_empty() && p.verdict.as_ref().is_some_and(|v| v.verified))
}

/// Runs the experiment; `progress(done, total, what)` after each run (`total` grows once
/// the combinations are known, after the two runs alone).
pub fn run(
    c: &CorunConfig,
    progress: &(dyn Fn(usize, usize, &str) + Sync),
) -> Result<CorunResults, CorunError> {
    if c.max_tbs == Some(0) {
        return Err(CorunError::Config("max_tbs must be at least 1".into()));
    }
    let done = AtomicUsize::new(0);
    // Each program alone.
    let alone_jobs = [0usize, 1];
    let alone = crate::run_indexed(
        c.threads,
        &alone_jobs,
        &|&i| run_one(c, &[i], PolicyKind::Fcfs),
        &|&i| format!("{} alone", c.pair[i].name()),
        progress,
        &done,
        2,
    );
    let mut alone_out = Vec::new();
    let mut shapes = Vec::new();
    for (i, r) in alone.into_iter().enumerate() {
        let what = format!("{} alone", c.pair[i].name());
        let (per, r) = r
            .expect("both run unless one failed, which is returned first")
            .map_err(|error| CorunError::Run { what, error })?;
        let first = r.kernels.iter().find(|k| k.tb.is_some()).ok_or_else(|| {
            CorunError::Config(format!("{} launched no kernel", c.pair[i].name()))
        })?;
        let demand = first.tb.expect("found with one");
        let tbs_per_sm = Occupancy::of(&c.gpu.sm.resources, &demand).tbs_per_sm;
        shapes.push(Corunner {
            demand,
            alone_tbs: tbs_per_sm,
        });
        alone_out.push(Alone {
            program: c.pair[i].name().to_string(),
            kernel: first.kernel.clone(),
            tbs_per_sm,
            ipc: per[0].ipc(),
            curve: Vec::new(),
            bandwidth: BandwidthCurve::default(),
            cycles: r.cycles,
            kernel_cycles: per[0].kernel_cycles,
            warp_instructions: per[0].warp_instructions,
            verified: verified(&r),
        });
    }
    let alone: [Alone; 2] = alone_out.try_into().expect("two");
    let ipc_alone = [alone[0].ipc, alone[1].ipc];

    // Each program alone at every TB count (Warped-Slicer's scalability curves), the
    // combinations, then the schemes.
    let cap = |n: u32| c.max_tbs.map_or(n, |m| n.min(m));
    let mut combos = Vec::new();
    for a in 1..=cap(shapes[0].alone_tbs) {
        for b in 1..=cap(shapes[1].alone_tbs) {
            if fits_together(&c.gpu.sm.resources, &shapes, &[a, b]) {
                combos.push([a, b]);
            }
        }
    }
    let schemes = with_ipcs(&c.schemes, &ipc_alone, c.prior_lsk);
    let fixed = |t: &[u32]| PolicyKind::Fixed {
        tbs: TbCounts::new(t).expect("counts of at least 1"),
        noc: None,
    };
    let mut jobs: Vec<Job> = Vec::new();
    for (i, shape) in shapes.iter().enumerate() {
        jobs.extend((1..=cap(shape.alone_tbs)).map(|n| Job::Profile(i, n)));
    }
    let profiles = jobs.len();
    jobs.extend(combos.iter().map(|&t| Job::Co(Some(t), fixed(&t))));
    jobs.extend(schemes.iter().map(|&p| Job::Co(None, p)));
    let label = |j: &Job| match *j {
        Job::Profile(i, n) => format!("{} alone at {n} TBs/SM", c.pair[i].name()),
        Job::Co(Some([a, b]), _) => format!("{a}+{b}"),
        Job::Co(None, p) => p.to_string(),
    };
    // The Warped-Slicer and CCBP runs come last, once the curves are known.
    let total = 2 + jobs.len() + 2;
    let one = |j: &Job| match *j {
        Job::Profile(i, n) => run_one(c, &[i], fixed(&[n])),
        Job::Co(_, p) => run_one(c, &[0, 1], p),
    };
    let results = crate::run_indexed(c.threads, &jobs, &one, &label, progress, &done, total);
    let mut curves = vec![Vec::new(), Vec::new()];
    let mut bandwidth = vec![BandwidthCurve::default(), BandwidthCurve::default()];
    let mut points = Vec::new();
    let point = |tbs: Option<[u32; 2]>, what: String, per: &[Measured], r: &RunRecord| {
        let ipc_shared = [per[0].ipc(), per[1].ipc()];
        let bw = [per[0].per_window(&c.gpu), per[1].per_window(&c.gpu)];
        Point {
            label: what,
            tbs,
            ipc: ipc_shared,
            warp_instructions: [per[0].warp_instructions, per[1].warp_instructions],
            kernel_cycles: [per[0].kernel_cycles, per[1].kernel_cycles],
            requests: [bw[0][0], bw[1][0]],
            noc_flits: [bw[0][1], bw[1][1]],
            dram: [bw[0][2], bw[1][2]],
            cycles: r.cycles,
            metrics: CorunMetrics::of(&ipc_alone, &ipc_shared).ok(),
            verified: verified(r),
        }
    };
    let mut profiles_verified = [true, true];
    for (j, r) in jobs.iter().zip(results) {
        let what = label(j);
        // A job is left unrun only after an earlier one failed, which is returned first.
        let r = r.ok_or_else(|| CorunError::Config(format!("{what}: not run")))?;
        let (per, r) = r.map_err(|error| CorunError::Run {
            what: what.clone(),
            error,
        })?;
        match *j {
            Job::Profile(i, _) => {
                curves[i].push(per[0].ipc());
                let [requests, noc, dram] = per[0].per_window(&c.gpu);
                bandwidth[i].noc.push(noc);
                bandwidth[i].dram.push(dram);
                bandwidth[i].requests.push(requests);
                profiles_verified[i] &= verified(&r);
            }
            Job::Co(tbs, _) => points.push(point(tbs, what, &per, &r)),
        }
    }
    debug_assert_eq!(curves[0].len() + curves[1].len(), profiles);
    let mut schemes = points.split_off(combos.len());

    // Warped-Slicer: water-filling over the curves; CCBP: Algorithm 1 over the bandwidth
    // curves; then a run at each choice that gives both programs a TB.
    let ws = water_fill(&c.gpu.sm.resources, &shapes, &curves);
    let mem = &c.gpu.memory;
    let sustainable = Sustainable::from_peaks(
        mem.noc_flits_per_sm_core_cycle(),
        mem.dram_bytes_per_core_cycle() / f64::from(c.gpu.sm.count),
        mem.line_bytes,
        IRC_WINDOW,
    );
    let kinds: Vec<KernelType> = bandwidth
        .iter()
        .map(|b| ccbp::classify(b, sustainable))
        .collect();
    let shares = ccbp::ccbp(
        &c.gpu.sm.resources,
        &shapes,
        &bandwidth,
        &kinds,
        sustainable,
        c.prior_lsk,
    );
    let mut last: Vec<(String, [u32; 2], PolicyKind)> = Vec::new();
    if ws.iter().all(|&n| n > 0) {
        // Named apart from the online scheme (`warped-slicer`, a policy of its own).
        let what = format!("ws-offline ({}+{})", ws[0], ws[1]);
        last.push((what, [ws[0], ws[1]], fixed(&ws)));
    }
    if shares.iter().all(|s| s.tbs > 0) {
        let tbs = [shares[0].tbs, shares[1].tbs];
        let quota = |s: &Share| s.quota.map_or("-".to_string(), |q| q.to_string());
        let what = format!(
            "ccbp-offline ({}+{}, noc {}/{})",
            tbs[0],
            tbs[1],
            quota(&shares[0]),
            quota(&shares[1])
        );
        // A latency-sensitive kernel is not limited: a quota no access reaches.
        let noc: Vec<u32> = shares.iter().map(|s| s.quota.unwrap_or(u32::MAX)).collect();
        let policy = PolicyKind::Fixed {
            tbs: TbCounts::new(&tbs).expect("counts of at least 1"),
            noc: TbCounts::new(&noc),
        };
        last.push((what, tbs, policy));
    }
    let r = crate::run_indexed(
        c.threads,
        &last,
        &|(_, _, p)| run_one(c, &[0, 1], *p),
        &|(what, _, _)| what.clone(),
        progress,
        &done,
        total,
    );
    for ((what, tbs, _), r) in last.iter().zip(r) {
        let r = r.ok_or_else(|| CorunError::Config(format!("{what}: not run")))?;
        let (per, r) = r.map_err(|error| CorunError::Run {
            what: what.clone(),
            error,
        })?;
        schemes.push(point(Some(*tbs), what.clone(), &per, &r));
    }
    // Maestro-style: a hill climb over the combinations measured above, by harmonic
    // speedup, from SMK's DRF combination (each count within 1..=the cap).
    let drf = sched::corun::drf(&c.gpu.sm.resources, &shapes);
    let start: Vec<u32> = drf
        .iter()
        .zip(&shapes)
        .map(|(&n, s)| n.clamp(1, cap(s.alone_tbs).max(1)))
        .collect();
    let hs_at = |x: &[u32]| {
        points
            .iter()
            .find(|p| p.tbs.is_some_and(|t| t[..] == *x))
            .and_then(|p| p.metrics.as_ref())
            .map(|m| m.harmonic_speedup)
    };
    let (at, moves) = sched::corun::hill_climb(&start, &hs_at);
    if let Some(p) = points
        .iter()
        .find(|p| p.tbs.is_some_and(|t| t[..] == at[..]) && hs_at(&at).is_some())
    {
        schemes.push(Point {
            label: format!(
                "maestro-offline ({}+{} from {}+{}, {moves} moves)",
                at[0], at[1], start[0], start[1]
            ),
            ..p.clone()
        });
    }
    let best = |key: fn(&CorunMetrics) -> f64| {
        points
            .iter()
            .enumerate()
            .filter_map(|(i, p)| p.metrics.as_ref().map(|m| (i, key(m))))
            .fold(None, |best: Option<(usize, f64)>, (i, v)| match best {
                Some((_, b)) if b >= v => best,
                _ => Some((i, v)),
            })
            .map(|(i, _)| i)
    };
    let [mut a0, mut a1] = alone;
    a0.curve = std::mem::take(&mut curves[0]);
    a1.curve = std::mem::take(&mut curves[1]);
    a0.bandwidth = std::mem::take(&mut bandwidth[0]);
    a1.bandwidth = std::mem::take(&mut bandwidth[1]);
    a0.verified &= profiles_verified[0];
    a1.verified &= profiles_verified[1];
    Ok(CorunResults {
        gpu: c.gpu.name.clone(),
        size: format!("{:?}", c.size).to_lowercase(),
        best_harmonic: best(|m| m.harmonic_speedup),
        best_weighted: best(|m| m.weighted_speedup),
        alone: [a0, a1],
        combinations: points,
        schemes,
        ccbp: CcbpChoice {
            sustainable,
            prior_lsk: c.prior_lsk,
            shares,
        },
    })
}

/// A run of the second batch: a program alone at a TB count, or the pair under a policy
/// (with its combination, for a `fixed` one).
enum Job {
    Profile(usize, u32),
    Co(Option<[u32; 2]>, PolicyKind),
}

/// Weighted and harmonic speedup per combination and per scheme, as a figure.
pub fn figure(r: &CorunResults) -> crate::figures::Figure {
    let rows = r
        .combinations
        .iter()
        .chain(&r.schemes)
        .filter_map(|p| {
            let m = p.metrics.as_ref()?;
            Some(crate::figures::Row {
                category: p.label.clone(),
                values: vec![vec![m.weighted_speedup], vec![m.harmonic_speedup]],
            })
        })
        .collect();
    crate::figures::Figure {
        id: "corun".into(),
        title: format!(
            "{} + {} co-running on {}: TB combinations (a+b TBs per SM) and schemes",
            r.alone[0].program, r.alone[1].program, r.gpu
        ),
        y_label: "speedup over the programs alone".into(),
        series: vec!["weighted speedup".into(), "harmonic speedup".into()],
        parts: vec![String::new()],
        rows,
        paper: "papers/lin-thesis Figure 4.2: BP + CFD best at 7+4 TBs (weighted speedup 1.3, 1.2 at 7+2)".into(),
        clip: None,
    }
}

/// The results as CSV: one row per combination and per scheme.
pub fn to_csv(r: &CorunResults) -> String {
    let mut s = format!(
        "kind,label,tbs_{a},tbs_{b},ipc_{a},ipc_{b},slowdown_{a},slowdown_{b},weighted_speedup,harmonic_speedup,cycles,verified\n",
        a = r.alone[0].program,
        b = r.alone[1].program
    );
    let rows = r
        .combinations
        .iter()
        .map(|p| ("combination", p))
        .chain(r.schemes.iter().map(|p| ("scheme", p)));
    for (kind, p) in rows {
        let (ta, tb) = p.tbs.map_or((String::new(), String::new()), |[a, b]| {
            (a.to_string(), b.to_string())
        });
        let m = p.metrics.as_ref();
        let f = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.4}"));
        // A scheme's parameters are separated by commas: quoted.
        let label = if p.label.contains(',') {
            format!("\"{}\"", p.label)
        } else {
            p.label.clone()
        };
        s.push_str(&format!(
            "{kind},{label},{ta},{tb},{:.4},{:.4},{},{},{},{},{},{}\n",
            p.ipc[0],
            p.ipc[1],
            f(m.map(|m| m.slowdowns[0])),
            f(m.map(|m| m.slowdowns[1])),
            f(m.map(|m| m.weighted_speedup)),
            f(m.map(|m| m.harmonic_speedup)),
            p.cycles,
            p.verified
        ));
    }
    s
}

/// Every pair of several programs (papers/lin-thesis ch. 4: "all pairs", with the oracle
/// as the reference), each run as [`run`] runs one, with each scheme's speedups summed up
/// over the pairs against the oracle's.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PairsResults {
    pub gpu: String,
    pub size: String,
    pub pairs: Vec<CorunResults>,
    /// One entry per scheme, in the order the schemes first appear, then the oracle.
    pub summary: Vec<SchemeSummary>,
}

/// One scheme over the pairs it ran on.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SchemeSummary {
    /// `spatial`, `left-over`, `smk`, `warped-slicer`, `ws-offline`, `ccbp`,
    /// `ccbp-offline`, …, and `oracle`: the best TB combination of each pair by harmonic speedup (§4.1's exhaustive search).
    pub scheme: String,
    /// Pairs where it ran with metrics (and the pair has an oracle).
    pub pairs: usize,
    /// Arithmetic means over those pairs.
    pub mean_weighted: f64,
    pub mean_harmonic: f64,
    /// Its harmonic speedup over the oracle's of the same pair: the mean and the most.
    pub mean_harmonic_vs_oracle: f64,
    pub max_harmonic_vs_oracle: f64,
}

/// A mix of programs co-running under one scheme: each program's IPC together, the
/// co-running metrics against the IPCs alone, and whether every program verified.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MixPoint {
    pub label: String,
    pub ipc: Vec<f64>,
    pub metrics: Option<CorunMetrics>,
    pub verified: bool,
}

/// [`run_mix`]'s results: each program alone (its IPC, and whether it verified), then each
/// scheme.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MixResults {
    pub gpu: String,
    pub size: String,
    pub programs: Vec<String>,
    pub ipc_alone: Vec<f64>,
    pub alone_verified: Vec<bool>,
    pub schemes: Vec<MixPoint>,
}

impl MixResults {
    pub fn all_verified(&self) -> bool {
        self.alone_verified.iter().all(|&v| v) && self.schemes.iter().all(|s| s.verified)
    }

    /// One row per scheme: label, each program's IPC and slowdown, WS, HS, verified.
    pub fn to_csv(&self) -> String {
        let mut o = String::from("scheme");
        for p in &self.programs {
            o.push_str(&format!(",ipc_{p}"));
        }
        for p in &self.programs {
            o.push_str(&format!(",slowdown_{p}"));
        }
        o.push_str(",weighted_speedup,harmonic_speedup,verified\n");
        let mut row = |label: &str, ipc: &[f64], m: Option<&CorunMetrics>, verified: bool| {
            o.push_str(&format!("\"{label}\""));
            for x in ipc {
                o.push_str(&format!(",{x:.6}"));
            }
            for i in 0..self.programs.len() {
                match m {
                    Some(m) => o.push_str(&format!(",{:.6}", m.slowdowns[i])),
                    None => o.push(','),
                }
            }
            match m {
                Some(m) => o.push_str(&format!(
                    ",{:.6},{:.6}",
                    m.weighted_speedup, m.harmonic_speedup
                )),
                None => o.push_str(",,"),
            }
            o.push_str(&format!(",{verified}\n"));
        };
        row(
            "alone",
            &self.ipc_alone,
            None,
            self.alone_verified.iter().all(|&v| v),
        );
        for s in &self.schemes {
            row(&s.label, &s.ipc, s.metrics.as_ref(), s.verified);
        }
        o
    }
}

/// Two to [`MAX_CORUNNERS`](sched::corun::MAX_CORUNNERS) programs co-running under each of
/// `c.schemes` (`c.pair` and the combinations are not used: with three or four kernels the
/// combinations are too many to run each): each program alone, then all together under
/// each scheme, replayed as a pair is, SMK's and Maestro's IPCs from the runs alone.
/// `progress(done, total, what)` after each run.
pub fn run_mix(
    c: &CorunConfig,
    programs: &[&'static dyn suite::Kernel],
    progress: &(dyn Fn(usize, usize, &str) + Sync),
) -> Result<MixResults, CorunError> {
    if !(2..=sched::corun::MAX_CORUNNERS).contains(&programs.len()) {
        return Err(CorunError::Config(format!(
            "a mix has 2 to {} programs, not {}",
            sched::corun::MAX_CORUNNERS,
            programs.len()
        )));
    }
    let done = AtomicUsize::new(0);
    let total = programs.len() + c.schemes.len();
    let jobs: Vec<usize> = (0..programs.len()).collect();
    let alone = crate::run_indexed(
        c.threads,
        &jobs,
        &|&i| run_programs(c, &[(i, programs[i])], PolicyKind::Fcfs),
        &|&i| format!("{} alone", programs[i].name()),
        progress,
        &done,
        total,
    );
    let mut ipc_alone = Vec::new();
    let mut alone_verified = Vec::new();
    for (i, r) in alone.into_iter().enumerate() {
        let what = format!("{} alone", programs[i].name());
        let (per, r) = r
            .expect("every one runs unless one failed, which is returned first")
            .map_err(|error| CorunError::Run { what, error })?;
        ipc_alone.push(per[0].ipc());
        alone_verified.push(verified(&r));
    }
    let schemes = with_ipcs(&c.schemes, &ipc_alone, c.prior_lsk);
    let all: Vec<(usize, &'static dyn suite::Kernel)> =
        programs.iter().copied().enumerate().collect();
    let runs = crate::run_indexed(
        c.threads,
        &schemes,
        &|&p| run_programs(c, &all, p),
        &|p| format!("mix under {p}"),
        progress,
        &done,
        total,
    );
    let mut points = Vec::new();
    for (p, r) in schemes.iter().zip(runs) {
        let what = format!("mix under {p}");
        let (per, r) = r
            .expect("every one runs unless one failed, which is returned first")
            .map_err(|error| CorunError::Run { what, error })?;
        let ipc: Vec<f64> = per.iter().map(Measured::ipc).collect();
        points.push(MixPoint {
            label: p.to_string(),
            metrics: CorunMetrics::of(&ipc_alone, &ipc).ok(),
            ipc,
            verified: verified(&r),
        });
    }
    Ok(MixResults {
        gpu: c.gpu.name.clone(),
        size: format!("{:?}", c.size).to_lowercase(),
        programs: programs.iter().map(|k| k.name().to_string()).collect(),
        ipc_alone,
        alone_verified,
        schemes: points,
    })
}

/// A scheme point's scheme: its label up to the first space or colon.
pub fn scheme_name(label: &str) -> &str {
    label.split([' ', ':']).next().unwrap_or(label)
}

/// Runs [`run`] on every unordered pair of `programs`, in list order (the first with each
/// later one, then the second, …), at `c`'s settings (`c.pair` is ignored);
/// `progress(done, total, what)` after each pair.
pub fn run_pairs(
    c: &CorunConfig,
    programs: &[&'static dyn suite::Kernel],
    progress: &(dyn Fn(usize, usize, &str) + Sync),
) -> Result<PairsResults, CorunError> {
    let mut pairs = Vec::new();
    for (i, &a) in programs.iter().enumerate() {
        for &b in &programs[i + 1..] {
            pairs.push([a, b]);
        }
    }
    if pairs.is_empty() {
        return Err(CorunError::Config(
            "give at least two programs to pair".into(),
        ));
    }
    let total = pairs.len();
    let mut out = Vec::with_capacity(total);
    for (done, pair) in pairs.into_iter().enumerate() {
        let what = format!("{} + {}", pair[0].name(), pair[1].name());
        progress(done, total, &what);
        let one = CorunConfig { pair, ..c.clone() };
        out.push(run(&one, &|_, _, step| {
            progress(done, total, &format!("{what}: {step}"))
        })?);
    }
    progress(total, total, "");
    Ok(PairsResults {
        gpu: c.gpu.name.clone(),
        size: format!("{:?}", c.size).to_lowercase(),
        summary: summarise(&out),
        pairs: out,
    })
}

/// Each scheme's means over the pairs (see [`SchemeSummary`]).
fn summarise(pairs: &[CorunResults]) -> Vec<SchemeSummary> {
    // (scheme, [weighted, harmonic, harmonic / oracle's] per pair)
    let mut by: Vec<(String, Vec<[f64; 3]>)> = Vec::new();
    let mut add = |name: &str, m: &CorunMetrics, oracle: f64| {
        let v = [
            m.weighted_speedup,
            m.harmonic_speedup,
            m.harmonic_speedup / oracle,
        ];
        match by.iter_mut().find(|(n, _)| n == name) {
            Some((_, vs)) => vs.push(v),
            None => by.push((name.to_string(), vec![v])),
        }
    };
    let mut oracles = Vec::new();
    for r in pairs {
        let Some(best) = r.oracle().and_then(|p| p.metrics.as_ref()) else {
            continue;
        };
        let oracle = best.harmonic_speedup;
        for p in &r.schemes {
            if let Some(m) = &p.metrics {
                add(scheme_name(&p.label), m, oracle);
            }
        }
        oracles.push(best.clone());
    }
    for m in &oracles {
        add("oracle", m, m.harmonic_speedup);
    }
    by.into_iter()
        .map(|(scheme, vs)| {
            let n = vs.len() as f64;
            let mean = |k: usize| vs.iter().map(|v| v[k]).sum::<f64>() / n;
            SchemeSummary {
                scheme,
                pairs: vs.len(),
                mean_weighted: mean(0),
                mean_harmonic: mean(1),
                mean_harmonic_vs_oracle: mean(2),
                max_harmonic_vs_oracle: vs.iter().map(|v| v[2]).fold(f64::MIN, f64::max),
            }
        })
        .collect()
}

/// The summary as a figure: each scheme's mean harmonic speedup over the oracle's.
pub fn pairs_figure(r: &PairsResults) -> crate::figures::Figure {
    crate::figures::Figure {
        id: "corun-pairs".into(),
        title: format!(
            "{} pairs co-running on {} ({} inputs): each scheme against the oracle",
            r.pairs.len(),
            r.gpu,
            r.size
        ),
        y_label: "harmonic speedup over the oracle's (mean over pairs)".into(),
        series: vec!["mean".into(), "most".into()],
        parts: vec![String::new()],
        rows: r
            .summary
            .iter()
            .map(|s| crate::figures::Row {
                category: s.scheme.clone(),
                values: vec![
                    vec![s.mean_harmonic_vs_oracle],
                    vec![s.max_harmonic_vs_oracle],
                ],
            })
            .collect(),
        paper: "papers/lin-thesis ch. 4: CCBP's harmonic speedup +78% over SMK, +39% over WS, +11% over the oracle on average (up to +51%)".into(),
        clip: None,
    }
}

/// Every pair's schemes and oracle as CSV: one row per pair and scheme.
pub fn pairs_csv(r: &PairsResults) -> String {
    let mut s = String::from(
        "program_a,program_b,scheme,label,tbs_a,tbs_b,weighted_speedup,harmonic_speedup,harmonic_vs_oracle,verified\n",
    );
    for p in &r.pairs {
        let Some(oracle) = p.oracle() else {
            continue;
        };
        let best = oracle
            .metrics
            .as_ref()
            .map_or(f64::NAN, |m| m.harmonic_speedup);
        let rows = p
            .schemes
            .iter()
            .map(|x| (scheme_name(&x.label), x))
            .chain([("oracle", oracle)]);
        for (scheme, x) in rows {
            let Some(m) = &x.metrics else { continue };
            let (ta, tb) = x.tbs.map_or((String::new(), String::new()), |[a, b]| {
                (a.to_string(), b.to_string())
            });
            s.push_str(&format!(
                "{},{},{},\"{}\",{ta},{tb},{:.4},{:.4},{:.4},{}\n",
                p.alone[0].program,
                p.alone[1].program,
                scheme,
                x.label,
                m.weighted_speedup,
                m.harmonic_speedup,
                m.harmonic_speedup / best,
                x.verified
            ));
        }
    }
    s
}
