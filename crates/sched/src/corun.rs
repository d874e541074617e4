//! Co-running schemes: how two to four kernels that run at the same time share the SMs
//! (papers/lin-thesis ch. 4, §4.1–4.2), as a [`Policy`] over the framework's co-resident
//! kernels ([`Corun`]) and the pure plans it follows.
//!
//! * **spatial** ([`spatial`]): the SMs split evenly between the kernels, each SM running
//!   one kernel (Spatial Multitasking, the thesis's baseline, its Adr12a); the first kernels
//!   (activation order) get the remainder SMs.
//! * **left-over** ([`left_over`]): on every SM, the first kernel takes as many TBs as it
//!   could alone (its occupancy) and the next takes as many as fit in what it leaves, and so
//!   on.
//! * **SMK** ([`drf`], [`quotas`]; Wang et al., HPCA'16, "Simultaneous Multikernel GPU",
//!   the thesis's Wan16): every SM gets the same TB combination, chosen by *dominant
//!   resource fairness* over the SM's static resources (TB slots, threads, warps, registers,
//!   shared memory): TBs are handed out one at a time to the kernel whose dominant share
//!   (the largest fraction of any resource it holds) is smallest, and a kernel that no
//!   longer fits (or already has its occupancy alone) gets no more. Then each kernel gets a
//!   warp-instruction quota per epoch on every warp scheduler (SMK-W): the thesis says only
//!   that it is "based on profiling of the standalone execution" and serves "to further
//!   ensure fair performance". The original paper's text was not at hand when this was
//!   written, so the rule is ours, chosen for that goal: quotas in the ratio of the
//!   kernels' standalone IPCs (a kernel given a share of issue slots in proportion to its
//!   IPC alone slows down by the same factor as the others, where issue slots bind),
//!   `epoch` warp instructions per scheduler in all.
//!   Without the IPCs (a scenario that gives none) the quotas are equal. An epoch ends when
//!   every kernel present on the scheduler has used its quota
//!   ([`gpu::timing::Quota`]).
//!
//! * **Warped-Slicer** ([`Scheme::WarpedSlicer`]; Xu et al., ISCA'16): whenever the kernels
//!   with TBs to issue change, the SMs profile them online — split between the kernels as
//!   spatial splits them, the SMs of a kernel running 1, 2, … of its TBs
//!   ([`profile_points`]; an SM another kernel holds is emptied for it, as spatial does) —
//!   for `warm_up` cycles from when every SM has its kernel, and then a `sample` whose
//!   warp instructions per SM
//!   ([`Tables::sm_counts`]) give each kernel's scalability curve
//!   ([`profile_curves`]); [`water_fill`] chooses the combination every SM then runs (no
//!   preemption: a kernel over its limit on an SM gets no TB there until under it). The
//!   paper's text was not at hand: the split, the counts and the default 2,000 + 5,000
//!   cycles are ours. `experiment::corun` also measures the curves offline (each kernel
//!   alone at each count over a whole run) for the same [`water_fill`].
//! * **Maestro-style search** ([`Scheme::Maestro`]): from SMK's DRF combination, one
//!   combination per `epoch` on every SM, moving to a neighbour ([`neighbours`]) that
//!   scores higher, never back to one it stood at.
//! * **CCBP online** ([`Scheme::Ccbp`]; papers/lin-thesis §4.5): Warped-Slicer's profile,
//!   its sample reading each SM's requests towards the L2 and each kernel's NoC flits and
//!   DRAM bytes ([`Tables::kernel_counts`]), which give each kernel's bandwidth curves
//!   ([`crate::ccbp::curves_from_profile`]); Algorithm 1 ([`crate::ccbp::ccbp`]) then
//!   chooses the TB combination and each bandwidth-intensive kernel's request quota
//!   ([`ccbp_combination`]). §4.5.4 (how the thesis profiles online) is not in the copy at
//!   hand: the profile is Warped-Slicer's, ours.
//!
//!   The online schemes remember their choice per set of kernels (process and kernel name,
//!   in activation order): when the same kernels have TBs to issue again (a host loop's
//!   next launches), the choice is applied at once instead of profiling or searching
//!   again (ours: profiling every launch anew costs each launch the profile's draining and
//!   its few-TB SMs).
//! * **fixed** ([`Scheme::Fixed`]): a given TB combination, so many TBs of each process's
//!   kernels on every SM (the points of papers/lin-thesis Figure 4.2, and what an oracle
//!   searches over); a process beyond the list is not limited. With `noc`, each process's
//!   kernels may also send at most so many requests towards the L2 per 200 core cycles
//!   from each SM: CCBP's bandwidth partitioning (papers/lin-thesis §4.5.1), by an issue
//!   rate controller per kernel at the SM's L1 miss path ([`gpu::timing::KernelLimits`]'s
//!   `noc_quota`). CCBP's choice of the combination and the quotas (its Algorithm 1) is
//!   [`crate::ccbp`], over curves the caller measures (`experiment::corun` offline) or
//!   the profile online.
//!
//! Kernels are planned over the active kernels that still have TBs to issue, in activation
//! order; when that set changes (a kernel arrives or issues its last TB) the plan is made
//! again. Under the schemes but SMK nothing is preempted for an intra-SM plan: a kernel
//! over its new limits on an SM just receives no more TBs there until it is under them.
//! SMK reaches its partition by preemption, as its paper does: a kernel the plan adds to a
//! running SM gets room there from the others' youngest TBs ([`Tables::make_room`]).
//! Spatial reserves an SM whose kernel the new plan moves (the framework's mechanism
//! empties it, draining by default), and never mixes kernels on an SM. Limits go to the
//! machine as `Request::Limit` ([`Tables::limit`]).
//!
//! Shared memory: SMs with several carve-outs are planned with the largest, which is the
//! one the ledger offers an empty SM unless its carve-out rule picks a smaller one for the
//! first TB placed (the presets of ch. 4 have one size).

use gpu::occupancy::{SmResources, TbDemand};
use gpu::timing::{KernelLimits, SmId};

use crate::ccbp;
use crate::policy::{pick_waiting, Policy};
use crate::tables::{
    ContextId, KernelCounts, KernelSlot, SmCounts, SmState, Tables, Waiting, MAX_GUESTS,
};

/// The most kernels a co-running scheme shares an SM between (the SM's own kernel and its
/// guests).
pub const MAX_CORUNNERS: usize = 1 + MAX_GUESTS;

/// SMK's warp instructions per epoch per scheduler when none is given.
pub const SMK_EPOCH: u32 = 1000;

/// Warped-Slicer's online profiling (ours: the paper's text was not at hand): core cycles
/// the profiling SMs run before their sample (their TBs dispatched and past their start),
/// and cycles of the sample.
pub const WS_WARM_UP: u32 = 2_000;
pub const WS_SAMPLE: u32 = 5_000;

/// Core cycles each combination of a Maestro-style online search runs for (ours).
pub const MAESTRO_EPOCH: u32 = 10_000;

/// What a plan needs to know of a kernel.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Corunner {
    /// What one TB takes.
    pub demand: TbDemand,
    /// TBs per SM when it runs alone (its occupancy).
    pub alone_tbs: u32,
}

/// Which scheme, with SMK's parameters ([`crate::PolicyKind`] names them).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scheme {
    Spatial,
    LeftOver,
    Smk {
        /// Warp instructions per epoch per scheduler, over all kernels.
        epoch: u32,
        /// Standalone IPC per GPU context (process), in context order; `None`: equal
        /// quotas.
        ipc: Option<Ipcs>,
    },
    /// Warped-Slicer online: profiling for `warm_up` + `sample` core cycles whenever the
    /// kernels change, then water-filling ([`profile_points`], [`water_fill`]).
    WarpedSlicer {
        warm_up: u32,
        sample: u32,
    },
    /// Maestro-style search online: from SMK's DRF combination, one combination per
    /// `epoch` core cycles, climbing to the best-scoring neighbour ([`neighbours`]);
    /// scored by harmonic speedup over the processes' standalone IPCs when given, else
    /// by the kernels' summed IPC.
    Maestro {
        epoch: u32,
        ipc: Option<Ipcs>,
    },
    /// CCBP online (papers/lin-thesis §4.5): Warped-Slicer's profile on the SMs, for
    /// `warm_up` + `sample` core cycles whenever the kernels change, measuring each SM's
    /// requests towards the L2 and each kernel's flits and DRAM lines per request
    /// ([`crate::ccbp::curves_from_profile`]); then Algorithm 1 ([`crate::ccbp::ccbp`],
    /// latency-sensitive kernels weighed by `prior_lsk`) chooses the combination every
    /// SM runs and each bandwidth-intensive kernel's request quota.
    Ccbp {
        warm_up: u32,
        sample: u32,
        prior_lsk: f64,
    },
    /// TBs per SM of each GPU context's (process's) kernels, in context order, and, when
    /// given, the requests each may send towards the L2 per 200 core cycles from each SM.
    Fixed(TbCounts, Option<TbCounts>),
}

/// TBs per SM of up to [`MAX_CORUNNERS`] processes, in process order, each at least 1: a
/// `Copy` list, as policies are. Serialized as a list of numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TbCounts {
    len: u8,
    values: [u32; MAX_CORUNNERS],
}

impl TbCounts {
    /// The list, or `None` when it is empty, longer than [`MAX_CORUNNERS`] or holds a 0.
    pub fn new(values: &[u32]) -> Option<TbCounts> {
        if values.is_empty() || values.len() > MAX_CORUNNERS || values.contains(&0) {
            return None;
        }
        let mut out = [0; MAX_CORUNNERS];
        out[..values.len()].copy_from_slice(values);
        Some(TbCounts {
            len: values.len() as u8,
            values: out,
        })
    }

    pub fn as_slice(&self) -> &[u32] {
        &self.values[..usize::from(self.len)]
    }
}

impl serde::Serialize for TbCounts {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.as_slice())
    }
}

/// Standalone IPCs of up to [`MAX_CORUNNERS`] processes, in process order (SMK's quota
/// weights): a `Copy` list, as policies are. Serialized as a list of numbers.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ipcs {
    len: u8,
    values: [f64; MAX_CORUNNERS],
}

impl Ipcs {
    /// The list, or `None` when it is empty, longer than [`MAX_CORUNNERS`] or holds a value
    /// that is not finite and positive.
    pub fn new(values: &[f64]) -> Option<Ipcs> {
        if values.is_empty()
            || values.len() > MAX_CORUNNERS
            || !values.iter().all(|v| v.is_finite() && *v > 0.0)
        {
            return None;
        }
        let mut out = [0.0; MAX_CORUNNERS];
        out[..values.len()].copy_from_slice(values);
        Some(Ipcs {
            len: values.len() as u8,
            values: out,
        })
    }

    pub fn as_slice(&self) -> &[f64] {
        &self.values[..usize::from(self.len)]
    }
}

impl serde::Serialize for Ipcs {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.as_slice())
    }
}

/// The SMs `[start, end)` each of `kernels` kernels gets from `sm_count`: consecutive,
/// `⌊sm_count / kernels⌋` each, the first `sm_count mod kernels` kernels one more.
pub fn spatial(kernels: usize, sm_count: u32) -> Vec<std::ops::Range<u32>> {
    if kernels == 0 {
        return Vec::new();
    }
    let n = kernels as u32;
    let (each, extra) = (sm_count / n, sm_count % n);
    let mut start = 0;
    (0..n)
        .map(|i| {
            let len = each + u32::from(i < extra);
            let r = start..start + len;
            start += len;
            r
        })
        .collect()
}

/// An SM's static resources as the planner counts them: TB slots, threads, warps,
/// registers, shared memory (the largest carve-out).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Capacity([u64; 5]);

impl Capacity {
    pub(crate) fn of(r: &SmResources) -> Capacity {
        Capacity([
            u64::from(r.max_tbs),
            u64::from(r.max_threads),
            u64::from(r.max_warps),
            u64::from(r.registers),
            u64::from(r.shared_memory.last().copied().unwrap_or(0)),
        ])
    }
}

/// What `tbs` TBs of demand `d` take, resource by resource (as [`Capacity`]).
fn need(d: &TbDemand, tbs: u32) -> [u64; 5] {
    let t = u64::from(tbs);
    [
        t,
        t * u64::from(d.threads),
        t * u64::from(d.warps),
        t * u64::from(d.registers),
        t * u64::from(d.shared_memory),
    ]
}

/// Whether TB counts `tbs` of `kernels` fit together on an SM of capacity `cap`.
pub(crate) fn fits(cap: &Capacity, kernels: &[Corunner], tbs: &[u32]) -> bool {
    (0..5).all(|r| {
        let used: u64 = kernels
            .iter()
            .zip(tbs)
            .map(|(k, &n)| need(&k.demand, n)[r])
            .sum();
        used <= cap.0[r]
    })
}

/// Whether `tbs[i]` TBs of each of `kernels` fit on one empty SM of `resources` together
/// (its largest carve-out).
pub fn fits_together(resources: &SmResources, kernels: &[Corunner], tbs: &[u32]) -> bool {
    fits(&Capacity::of(resources), kernels, tbs)
}

/// TBs per SM under left-over: each kernel in order takes as many as fit beside those
/// before it, up to its occupancy alone.
pub fn left_over(resources: &SmResources, kernels: &[Corunner]) -> Vec<u32> {
    let cap = Capacity::of(resources);
    let mut tbs = vec![0; kernels.len()];
    for i in 0..kernels.len() {
        while tbs[i] < kernels[i].alone_tbs {
            tbs[i] += 1;
            if !fits(&cap, kernels, &tbs) {
                tbs[i] -= 1;
                break;
            }
        }
    }
    tbs
}

/// A kernel's dominant share holding `tbs` TBs: the largest `need / capacity` over the
/// resources, as an exact fraction (numerator, denominator).
pub(crate) fn dominant(cap: &Capacity, d: &TbDemand, tbs: u32) -> (u64, u64) {
    let n = need(d, tbs);
    (0..5)
        .filter(|&r| cap.0[r] > 0)
        .map(|r| (n[r], cap.0[r]))
        .max_by(|a, b| {
            (u128::from(a.0) * u128::from(b.1)).cmp(&(u128::from(b.0) * u128::from(a.1)))
        })
        .unwrap_or((0, 1))
}

/// TBs per SM under SMK's dominant resource fairness (progressive filling): while some
/// kernel can grow, the one with the smallest dominant share (ties: the earlier) gets one
/// more TB if it fits beside the others and it has fewer than its occupancy alone; else it
/// is done.
pub fn drf(resources: &SmResources, kernels: &[Corunner]) -> Vec<u32> {
    let cap = Capacity::of(resources);
    let mut tbs = vec![0; kernels.len()];
    let mut open: Vec<usize> = (0..kernels.len()).collect();
    while !open.is_empty() {
        let share = |i: usize| dominant(&cap, &kernels[i].demand, tbs[i]);
        let (pos, &k) = open
            .iter()
            .enumerate()
            .min_by(|(_, &a), (_, &b)| {
                let (sa, sb) = (share(a), share(b));
                (u128::from(sa.0) * u128::from(sb.1))
                    .cmp(&(u128::from(sb.0) * u128::from(sa.1)))
                    .then(a.cmp(&b))
            })
            .expect("not empty");
        tbs[k] += 1;
        if tbs[k] > kernels[k].alone_tbs || !fits(&cap, kernels, &tbs) {
            tbs[k] -= 1;
            open.remove(pos);
        }
    }
    tbs
}

/// Warped-Slicer's TB combination (Xu et al., ISCA'16, the thesis's Xu16) from each
/// kernel's scalability curve — `curves[k][n - 1]`, its performance alone at `n` TBs per SM
/// — by water-filling: while some kernel can grow, the one whose performance at its
/// current count, relative to the best of its curve, is lowest (none yet counts 0; ties:
/// the earlier) gets one more TB if its curve goes that far and it fits beside the others;
/// else, or once it reaches the best of its curve (more TBs would not make it faster), it
/// is done. The result maximises the smallest relative performance the curves predict.
/// The thesis describes WS as choosing, from the curves, "the CTA combination that
/// generates the minimum combined performance slowdown"; the curves are measured as the
/// caller can (the paper profiles them online, on the SMs, at the kernels' start).
pub fn water_fill(resources: &SmResources, kernels: &[Corunner], curves: &[Vec<f64>]) -> Vec<u32> {
    let cap = Capacity::of(resources);
    let n = kernels.len().min(curves.len());
    let kernels = &kernels[..n];
    let best: Vec<f64> = curves[..n]
        .iter()
        .map(|c| {
            c.iter()
                .copied()
                .filter(|v| v.is_finite())
                .fold(0.0, f64::max)
        })
        .collect();
    let relative = |k: usize, tbs: u32| -> f64 {
        match tbs.checked_sub(1).and_then(|i| curves[k].get(i as usize)) {
            Some(&v) if best[k] > 0.0 && v.is_finite() => v / best[k],
            _ => 0.0,
        }
    };
    let mut tbs = vec![0; n];
    let mut open: Vec<usize> = (0..n).filter(|&k| best[k] > 0.0).collect();
    while !open.is_empty() {
        let (pos, &k) = open
            .iter()
            .enumerate()
            .min_by(|(_, &a), (_, &b)| {
                relative(a, tbs[a])
                    .total_cmp(&relative(b, tbs[b]))
                    .then(a.cmp(&b))
            })
            .expect("not empty");
        tbs[k] += 1;
        if tbs[k] as usize > curves[k].len() || !fits(&cap, kernels, &tbs) {
            tbs[k] -= 1;
            open.remove(pos);
        } else if relative(k, tbs[k]) >= 1.0 {
            open.remove(pos);
        }
    }
    tbs
}

/// Warped-Slicer's profiling plan: what each of `sm_count` SMs runs while the kernels'
/// scalability curves are measured online — the SMs split between the kernels as
/// [`spatial`] splits them, and the SMs of a kernel at 1, 2, … TBs of it, up to its
/// occupancy alone (then 1 again, so a count may be sampled on several SMs). `None` for an
/// SM left out (more kernels than SMs leave some kernel none: then there is no profile).
pub fn profile_points(kernels: &[Corunner], sm_count: u32) -> Option<Vec<Option<(usize, u32)>>> {
    let ranges = spatial(kernels.len(), sm_count);
    if ranges.iter().any(|r| r.is_empty()) {
        return None;
    }
    let mut out = vec![None; sm_count as usize];
    for (i, r) in ranges.into_iter().enumerate() {
        let most = kernels[i].alone_tbs.max(1);
        for (j, sm) in r.enumerate() {
            out[sm as usize] = Some((i, j as u32 % most + 1));
        }
    }
    Some(out)
}

/// The scalability curves (performance at 1, 2, … TBs, as [`water_fill`] takes them) of
/// `kernels` kernels from a profile: per SM, what it ran ([`profile_points`]) and the warp
/// instructions it issued in the sample; a count sampled on several SMs gets their mean.
pub fn profile_curves(
    kernels: usize,
    points: &[Option<(usize, u32)>],
    issued: &[u64],
) -> Vec<Vec<f64>> {
    let mut sums: Vec<Vec<(f64, u32)>> = vec![Vec::new(); kernels];
    for (p, &n) in points.iter().zip(issued) {
        let Some((k, tbs)) = *p else { continue };
        let c = &mut sums[k];
        if c.len() < tbs as usize {
            c.resize(tbs as usize, (0.0, 0));
        }
        c[tbs as usize - 1].0 += n as f64;
        c[tbs as usize - 1].1 += 1;
    }
    sums.into_iter()
        .map(|c| {
            c.into_iter()
                .map(|(sum, n)| if n == 0 { 0.0 } else { sum / f64::from(n) })
                .collect()
        })
        .collect()
}

/// The neighbours of combination `at` a Maestro-style search tries, in order: for each
/// kernel, one TB more, one fewer, then one passed to each other kernel (never below 1).
pub fn neighbours(at: &[u32]) -> Vec<Vec<u32>> {
    let n = at.len();
    let mut out: Vec<Vec<u32>> = Vec::new();
    for i in 0..n {
        for d in [1i64, -1] {
            let mut x = at.to_vec();
            let v = i64::from(x[i]) + d;
            if v >= 1 {
                x[i] = v as u32;
                out.push(x);
            }
        }
        for j in (0..n).filter(|&j| j != i) {
            if at[i] > 1 {
                let mut x = at.to_vec();
                x[i] -= 1;
                x[j] += 1;
                out.push(x);
            }
        }
    }
    out
}

/// Maestro-style dynamic search over TB combinations (Park et al., ASPLOS'17, the
/// thesis's Maestro: "dynamic search over TB combinations"): from `start`, move to the
/// best-scoring neighbour — one kernel with one TB more or fewer, or one TB passed from a
/// kernel to another, never below 1 — while it scores higher than where the search stands
/// (ties: the first neighbour in that order); `score` is `None` for a combination that
/// cannot run. Returns where the search stopped and the moves it made. A hill climb: it
/// can stop at a local best that the oracle's exhaustive search would pass.
pub fn hill_climb(start: &[u32], score: &dyn Fn(&[u32]) -> Option<f64>) -> (Vec<u32>, u32) {
    let mut at = start.to_vec();
    let Some(mut best) = score(&at) else {
        return (at, 0);
    };
    let mut moves = 0;
    loop {
        let step = neighbours(&at)
            .into_iter()
            .filter_map(|x| score(&x).map(|s| (x, s)))
            .fold(None, |b: Option<(Vec<u32>, f64)>, (x, s)| match b {
                Some((_, bs)) if bs >= s => b,
                _ => Some((x, s)),
            });
        match step {
            Some((x, s)) if s > best => {
                (at, best) = (x, s);
                moves += 1;
            }
            _ => return (at, moves),
        }
    }
}

/// SMK's warp-instruction quotas per epoch per scheduler: `epoch` split in the ratio of
/// `weights` (standalone IPCs; equal when `None`), each rounded to the nearest and at
/// least 1.
pub fn quotas(epoch: u32, weights: Option<&[f64]>, kernels: usize) -> Vec<u32> {
    let w: Vec<f64> = match weights {
        Some(w) if w.len() == kernels => w.to_vec(),
        _ => vec![1.0; kernels],
    };
    let sum: f64 = w.iter().sum();
    w.iter()
        .map(|x| ((f64::from(epoch) * x / sum).round() as u32).max(1))
        .collect()
}

/// What one SM runs under a plan: each kernel (an index into the planned kernels) with its
/// limits there.
pub type SmPlan = Vec<(usize, KernelLimits)>;

/// What an SM runs at TB combination `tbs` (a kernel planned 0 left off), each kernel
/// with its issue quota when `quota` gives them.
fn combination(tbs: &[u32], quota: Option<&[u32]>) -> SmPlan {
    tbs.iter()
        .enumerate()
        .filter(|(_, &n)| n > 0)
        .map(|(i, &n)| {
            let limits = KernelLimits {
                tbs: Some(n),
                issue_quota: quota.map(|q| q[i]),
                ..KernelLimits::default()
            };
            (i, limits)
        })
        .collect()
}

/// What every SM runs under CCBP's `shares` ([`crate::ccbp::ccbp`]): each kernel's TBs and
/// request quota. Where Algorithm 1 leaves a kernel without a TB (its first TB's bandwidth
/// alone would pass the sustainable bandwidth beside the others'), the kernels share by
/// dominant resource fairness instead, without quotas, as SMK's TBs do (ours: no kernel
/// waits for the others to finish).
pub fn ccbp_combination(
    shares: &[ccbp::Share],
    resources: &SmResources,
    kernels: &[Corunner],
) -> SmPlan {
    if shares.iter().any(|s| s.tbs == 0) {
        return combination(&drf(resources, kernels), None);
    }
    shares
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let limits = KernelLimits {
                tbs: Some(s.tbs),
                noc_quota: s.quota,
                ..KernelLimits::default()
            };
            (i, limits)
        })
        .collect()
}

/// The plan of `scheme` for `kernels` (in activation order, their GPU contexts in
/// `contexts`) on `sm_count` SMs of `resources`: per SM, what it runs. A kernel planned
/// no TB is left off.
pub fn plan(
    scheme: &Scheme,
    resources: &SmResources,
    sm_count: u32,
    kernels: &[Corunner],
    contexts: &[ContextId],
) -> Vec<SmPlan> {
    let kernels = &kernels[..kernels.len().min(MAX_CORUNNERS)];
    let intra = |tbs: Vec<u32>, quota: Option<Vec<u32>>| -> Vec<SmPlan> {
        vec![combination(&tbs, quota.as_deref()); sm_count as usize]
    };
    match scheme {
        Scheme::Spatial => {
            let mut out = vec![SmPlan::new(); sm_count as usize];
            for (i, r) in spatial(kernels.len(), sm_count).into_iter().enumerate() {
                for sm in r {
                    out[sm as usize].push((i, KernelLimits::default()));
                }
            }
            out
        }
        // Warped-Slicer and CCBP before (or without) a profile: what left-over gives.
        Scheme::LeftOver | Scheme::WarpedSlicer { .. } | Scheme::Ccbp { .. } => {
            intra(left_over(resources, kernels), None)
        }
        // Maestro's search starts from SMK's DRF combination.
        Scheme::Maestro { .. } => intra(drf(resources, kernels), None),
        Scheme::Smk { epoch, ipc } => {
            let weights: Option<Vec<f64>> = ipc.and_then(|ipc| {
                contexts
                    .iter()
                    .map(|c| ipc.as_slice().get(c.0 as usize).copied())
                    .collect()
            });
            let q = quotas(*epoch, weights.as_deref(), kernels.len());
            // A kernel alone on the SM needs no quota.
            let q = (kernels.len() > 1).then_some(q);
            intra(drf(resources, kernels), q)
        }
        Scheme::Fixed(counts, noc) => {
            let one: SmPlan = contexts
                .iter()
                .enumerate()
                .take(kernels.len())
                .map(|(i, c)| {
                    let tbs = counts.as_slice().get(c.0 as usize).copied();
                    let noc_quota = noc.and_then(|q| q.as_slice().get(c.0 as usize).copied());
                    let limits = KernelLimits {
                        tbs,
                        noc_quota,
                        ..KernelLimits::default()
                    };
                    (i, limits)
                })
                .collect();
            vec![one; sm_count as usize]
        }
    }
}

/// A co-running scheme as a policy: commands enter the active queue first come, first
/// served, and the SMs follow [`plan`] over the active kernels that have TBs to issue.
pub struct Corun {
    scheme: Scheme,
    name: &'static str,
    /// The kernels the plan was made for, and the plan.
    planned: Vec<KernelSlot>,
    plan: Vec<Vec<(KernelSlot, KernelLimits)>>,
    /// Whether the plan runs one kernel per SM (spatial, and Warped-Slicer's profiling):
    /// an SM another kernel holds is reserved and emptied for the planned one.
    one_per_sm: bool,
    /// Warped-Slicer's or CCBP's profile in progress.
    profile: Option<Profile>,
    /// Maestro's search in progress.
    search: Option<Search>,
    /// What the online schemes chose (a profile's or a search's end) for each set of
    /// kernels, by process and kernel name in activation order: when the same kernels come
    /// back (a host loop's next launches), the choice is applied again at once.
    learned: Vec<(Vec<KernelKey>, SmPlan)>,
}

/// A kernel as the online schemes remember it: its process and its name.
type KernelKey = (ContextId, std::sync::Arc<str>);

/// Maestro's online search: the combination it stands at and its score, the neighbour
/// being tried (if any) and those left to try (last first), and the current epoch: when
/// it began, and each planned kernel's warp instructions when its measured half began.
struct Search {
    at: Vec<u32>,
    score: Option<f64>,
    trying: Option<Vec<u32>>,
    left: Vec<Vec<u32>>,
    epoch_start: u64,
    base: Option<Vec<u64>>,
    /// Every combination it has stood at: never tried again, so that noise in the scores
    /// cannot send it back and forth between two for ever.
    visited: Vec<Vec<u32>>,
}

/// A Warped-Slicer or CCBP profile in progress: when every SM had its kernel (the warm-up
/// counts from then), what each SM runs, and when the sample began, each SM's counts and
/// (CCBP) each planned kernel's.
struct Profile {
    start: Option<u64>,
    points: Vec<Option<(usize, u32)>>,
    base: Option<(Vec<SmCounts>, Vec<KernelCounts>)>,
}

impl Corun {
    pub fn new(scheme: Scheme) -> Corun {
        let name = match scheme {
            Scheme::Spatial => "spatial",
            Scheme::LeftOver => "left-over",
            Scheme::Smk { .. } => "smk",
            Scheme::WarpedSlicer { .. } => "warped-slicer",
            Scheme::Maestro { .. } => "maestro",
            Scheme::Ccbp { .. } => "ccbp",
            Scheme::Fixed(..) => "fixed",
        };
        Corun {
            scheme,
            name,
            planned: Vec::new(),
            plan: Vec::new(),
            one_per_sm: scheme == Scheme::Spatial,
            profile: None,
            search: None,
            learned: Vec::new(),
        }
    }

    /// The planned kernels as [`Corun::learned`] keys them.
    fn key(&self, tables: &Tables) -> Vec<KernelKey> {
        self.planned
            .iter()
            .map(|&k| {
                let ksr = tables.ksr(k);
                (ksr.context, ksr.kernel.clone())
            })
            .collect()
    }

    /// Remembers `one` as the choice for the planned kernels.
    fn learn(&mut self, one: &SmPlan, tables: &Tables) {
        let key = self.key(tables);
        self.learned.retain(|(k, _)| *k != key);
        self.learned.push((key, one.clone()));
    }

    /// Maestro: starts searching from `start` for the planned kernels (several, else no
    /// search).
    fn start_search(&mut self, start: Vec<u32>, tables: &mut Tables) {
        if self.planned.len() < 2 {
            return;
        }
        tables.watch_kernel_counters(true);
        self.search = Some(Search {
            at: start,
            score: None,
            trying: None,
            left: Vec::new(),
            epoch_start: tables.now(),
            base: None,
            visited: Vec::new(),
        });
    }

    /// Maestro: at each epoch's end, scores what ran and moves on (see [`Scheme::Maestro`]);
    /// the second half of an epoch is measured, the first lets the SMs settle to it.
    fn search_step(&mut self, tables: &mut Tables) {
        let Scheme::Maestro { epoch, ipc } = self.scheme else {
            return;
        };
        let planned = self.planned.clone();
        let Some(s) = &mut self.search else {
            return;
        };
        let now = tables.now();
        let counts = || -> Option<Vec<u64>> {
            planned
                .iter()
                .map(|&k| tables.kernel_counts(k).map(|c| c.warp_instructions))
                .collect()
        };
        let half = u64::from(epoch / 2).max(1);
        if s.base.is_none() {
            if now >= s.epoch_start + half {
                s.base = counts();
            }
            return;
        }
        if now < s.epoch_start + u64::from(epoch) {
            return;
        }
        let (Some(base), Some(end)) = (s.base.take(), counts()) else {
            return;
        };
        let cycles = (now - s.epoch_start - half).max(1) as f64;
        let ipcs: Vec<f64> = end
            .iter()
            .zip(&base)
            .map(|(e, b)| (e - b) as f64 / cycles)
            .collect();
        let alone: Option<Vec<f64>> = ipc.and_then(|ipc| {
            planned
                .iter()
                .map(|&k| {
                    ipc.as_slice()
                        .get(tables.ksr(k).context.0 as usize)
                        .copied()
                })
                .collect()
        });
        let score = match alone {
            // Harmonic speedup, N / Σ IPC_alone / IPC_shared; 0 when a kernel issued nothing.
            Some(alone) if ipcs.iter().all(|&x| x > 0.0) => {
                ipcs.len() as f64 / alone.iter().zip(&ipcs).map(|(a, s)| a / s).sum::<f64>()
            }
            Some(_) => 0.0,
            None => ipcs.iter().sum(),
        };
        // A new place to stand (the start, or a better neighbour): its neighbours next.
        let moved = match s.trying.take() {
            None => {
                s.score = Some(score);
                true
            }
            Some(x) if s.score.is_none_or(|best| score > best) => {
                s.at = x;
                s.score = Some(score);
                true
            }
            Some(_) => false,
        };
        if moved {
            s.visited.push(s.at.clone());
            let visited = &s.visited;
            s.left = neighbours(&s.at)
                .into_iter()
                .filter(|x| !visited.contains(x))
                .collect();
            s.left.reverse();
        }
        let Some(resources) = tables.sm_resources().cloned() else {
            return;
        };
        let kernels = self.corunners(tables);
        let cap = Capacity::of(&resources);
        let s = self.search.as_mut().expect("searching");
        let runs = |x: &[u32]| {
            fits(&cap, &kernels, x) && x.iter().zip(&kernels).all(|(&n, k)| n <= k.alone_tbs)
        };
        let next = std::iter::from_fn(|| s.left.pop()).find(|x| runs(x));
        s.epoch_start = now;
        let tbs = match next {
            Some(x) => {
                s.trying = Some(x.clone());
                x
            }
            None => {
                // Every neighbour tried and none better: it stays where it stands.
                let at = s.at.clone();
                self.search = None;
                tables.watch_kernel_counters(false);
                self.learn(&combination(&at, None), tables);
                at
            }
        };
        let one = combination(&tbs, None);
        self.follow(vec![one; tables.sm_count() as usize], tables);
    }

    /// The planned kernels as a plan sees them.
    fn corunners(&self, tables: &Tables) -> Vec<Corunner> {
        self.planned
            .iter()
            .map(|&k| {
                let ksr = tables.ksr(k);
                Corunner {
                    demand: ksr.demand,
                    alone_tbs: ksr.alone_tbs,
                }
            })
            .collect()
    }

    /// Follows `per_sm` (kernels as indices into the planned ones) on every SM.
    fn follow(&mut self, per_sm: Vec<SmPlan>, tables: &mut Tables) {
        self.plan = per_sm
            .into_iter()
            .map(|p| p.into_iter().map(|(i, l)| (self.planned[i], l)).collect())
            .collect();
        for sm in (0..tables.sm_count()).map(SmId) {
            self.apply(sm, tables);
        }
    }

    /// Warped-Slicer and CCBP: start profiling the planned kernels, if there are several
    /// and every one gets an SM; whether it did.
    fn start_profile(&mut self, tables: &mut Tables) -> bool {
        if self.planned.len() < 2 {
            return false;
        }
        let kernels = self.corunners(tables);
        let Some(points) = profile_points(&kernels, tables.sm_count()) else {
            return false;
        };
        let per_sm: Vec<SmPlan> = points
            .iter()
            .map(|p| {
                p.iter()
                    .map(|&(i, tbs)| {
                        let limits = KernelLimits {
                            tbs: Some(tbs),
                            ..KernelLimits::default()
                        };
                        (i, limits)
                    })
                    .collect()
            })
            .collect();
        self.profile = Some(Profile {
            start: None,
            points,
            base: None,
        });
        tables.watch_sm_counters(true);
        tables.watch_kernel_counters(matches!(self.scheme, Scheme::Ccbp { .. }));
        self.one_per_sm = true;
        self.follow(per_sm, tables);
        true
    }

    /// Warped-Slicer and CCBP: take the sample when its time has come, and once it is
    /// over choose the combination (water-filling; Algorithm 1 with its quotas) and apply
    /// it on every SM.
    fn profile_step(&mut self, tables: &mut Tables) {
        let (warm_up, sample) = match self.scheme {
            Scheme::WarpedSlicer { warm_up, sample }
            | Scheme::Ccbp {
                warm_up, sample, ..
            } => (warm_up, sample),
            _ => return,
        };
        let planned = self.planned.clone();
        let Some(p) = &mut self.profile else {
            return;
        };
        let now = tables.now();
        // The warm-up starts once every SM runs its profile kernel alone (the SMs that
        // changed hands have been emptied).
        let Some(start) = p.start.or_else(|| {
            let ready = p.points.iter().enumerate().all(|(sm, point)| {
                let e = tables.sm(SmId(sm as u32));
                match point {
                    Some((i, _)) => {
                        e.state == SmState::Running
                            && e.kernel == Some(planned[*i])
                            && e.guests.iter().all(Option::is_none)
                    }
                    None => true,
                }
            });
            ready.then_some(now)
        }) else {
            return;
        };
        p.start = Some(start);
        let ccbp = matches!(self.scheme, Scheme::Ccbp { .. });
        let counts = || -> Option<(Vec<SmCounts>, Vec<KernelCounts>)> {
            let sms = (0..tables.sm_count())
                .map(|i| tables.sm_counts(SmId(i)))
                .collect::<Option<Vec<_>>>()?;
            let kernels = if ccbp {
                planned
                    .iter()
                    .map(|&k| tables.kernel_counts(k))
                    .collect::<Option<Vec<_>>>()?
            } else {
                Vec::new()
            };
            Some((sms, kernels))
        };
        if p.base.is_none() {
            if now >= start + u64::from(warm_up) {
                p.base = counts();
            }
            return;
        }
        if now < start + u64::from(warm_up) + u64::from(sample) {
            return;
        }
        let (Some((sms0, kernels0)), Some((sms1, kernels1))) = (p.base.take(), counts()) else {
            return;
        };
        let points = std::mem::take(&mut p.points);
        self.profile = None;
        tables.watch_sm_counters(false);
        tables.watch_kernel_counters(false);
        self.one_per_sm = false;
        let kernels = self.corunners(tables);
        let Some(resources) = tables.sm_resources().cloned() else {
            return;
        };
        let one = match self.scheme {
            Scheme::Ccbp { prior_lsk, .. } => {
                let requests: Vec<u64> = sms1
                    .iter()
                    .zip(&sms0)
                    .map(|(e, b)| e.noc_requests - b.noc_requests)
                    .collect();
                let traffic: Vec<KernelCounts> = kernels1
                    .iter()
                    .zip(&kernels0)
                    .map(|(e, b)| KernelCounts {
                        warp_instructions: e.warp_instructions - b.warp_instructions,
                        noc_requests: e.noc_requests - b.noc_requests,
                        noc_flits: e.noc_flits - b.noc_flits,
                        dram_bytes: e.dram_bytes - b.dram_bytes,
                    })
                    .collect();
                let per_sm = profile_curves(kernels.len(), &points, &requests);
                let curves = ccbp::curves_from_profile(
                    &per_sm,
                    &traffic,
                    u64::from(sample),
                    tables.line_bytes(),
                );
                let Some(sustainable) = tables.sustainable() else {
                    return;
                };
                let kinds: Vec<ccbp::KernelType> = curves
                    .iter()
                    .map(|c| ccbp::classify(c, sustainable))
                    .collect();
                let shares = ccbp::ccbp(
                    &resources,
                    &kernels,
                    &curves,
                    &kinds,
                    sustainable,
                    prior_lsk,
                );
                ccbp_combination(&shares, &resources, &kernels)
            }
            _ => {
                let issued: Vec<u64> = sms1
                    .iter()
                    .zip(&sms0)
                    .map(|(e, b)| e.warp_instructions - b.warp_instructions)
                    .collect();
                let curves = profile_curves(kernels.len(), &points, &issued);
                combination(&water_fill(&resources, &kernels, &curves), None)
            }
        };
        self.learn(&one, tables);
        self.follow(vec![one; tables.sm_count() as usize], tables);
    }

    /// Plans anew for the kernels with TBs to issue, if they changed, and applies the plan
    /// to every SM.
    fn replan(&mut self, tables: &mut Tables) {
        let with_work: Vec<KernelSlot> = tables
            .active()
            .iter()
            .copied()
            .filter(|&k| tables.ksr(k).has_work())
            .take(MAX_CORUNNERS)
            .collect();
        if with_work == self.planned {
            return;
        }
        self.planned = with_work;
        let Some(resources) = tables.sm_resources().cloned() else {
            return;
        };
        let online = matches!(
            self.scheme,
            Scheme::WarpedSlicer { .. } | Scheme::Ccbp { .. } | Scheme::Maestro { .. }
        );
        if online {
            // The kernels changed: any profile or search in progress is for others.
            self.profile = None;
            self.search = None;
            tables.watch_sm_counters(false);
            tables.watch_kernel_counters(false);
            self.one_per_sm = false;
            let key = self.key(tables);
            if let Some((_, one)) = self.learned.iter().find(|(k, _)| *k == key) {
                // These kernels were seen before: what was chosen for them then.
                let one = one.clone();
                self.follow(vec![one; tables.sm_count() as usize], tables);
                return;
            }
        }
        if matches!(
            self.scheme,
            Scheme::WarpedSlicer { .. } | Scheme::Ccbp { .. }
        ) && self.start_profile(tables)
        {
            return;
        }
        let kernels = self.corunners(tables);
        let contexts: Vec<ContextId> = self
            .planned
            .iter()
            .map(|&k| tables.ksr(k).context)
            .collect();
        let per_sm = plan(
            &self.scheme,
            &resources,
            tables.sm_count(),
            &kernels,
            &contexts,
        );
        self.follow(per_sm, tables);
        if matches!(self.scheme, Scheme::Maestro { .. }) {
            // New kernels: a new search, from DRF's combination.
            self.start_search(drf(&resources, &kernels), tables);
        }
    }

    /// Puts `sm` in the state the plan gives it, as far as it can be now.
    fn apply(&self, sm: SmId, tables: &mut Tables) {
        let Some(want) = self.plan.get(sm.0 as usize) else {
            return;
        };
        let e = *tables.sm(sm);
        if want.is_empty() || e.state == SmState::Reserved {
            return;
        }
        let kernels: Vec<KernelSlot> = want.iter().map(|w| w.0).collect();
        if self.one_per_sm && e.state == SmState::Running {
            let (k, limits) = want[0];
            if e.kernel == Some(k) {
                // Its kernel alone from now on (guests' TBs finish there), within its
                // limits (Warped-Slicer's profiling).
                if e.guests.iter().any(Option::is_some) {
                    tables.host(sm, &[k]);
                }
                if limits != KernelLimits::default() {
                    tables.limit(sm, k, limits);
                }
                return;
            }
            // Another kernel's SM: once its kernel has nothing left it becomes idle and is
            // given then; while it has, it is taken back (emptied by the mechanism).
            if e.kernels().any(|x| tables.ksr(x).has_work()) {
                tables.reserve(sm, k);
            }
            return;
        }
        // SMK reaches its partition by preemption (Wang et al., HPCA'16; papers/lin-thesis
        // §4.1): a kernel the plan adds to a running SM gets its TBs there by partial
        // preemption of the others' youngest TBs ([`Tables::make_room`]), one newcomer at a
        // time; the others' new limits keep their preempted TBs away. The other schemes
        // wait for TBs to finish.
        if matches!(self.scheme, Scheme::Smk { .. }) && e.state == SmState::Running {
            let newcomer = want
                .iter()
                .find(|(k, l)| !e.runs(*k) && tables.ksr(*k).has_work() && l.tbs.is_some());
            let staying: Vec<(KernelSlot, KernelLimits)> =
                want.iter().copied().filter(|(k, _)| e.runs(*k)).collect();
            if let (Some(&(k, limits)), false) = (newcomer, staying.is_empty()) {
                let on: Vec<KernelSlot> = staying.iter().map(|s| s.0).collect();
                if tables.host(sm, &on) {
                    for &(x, l) in &staying {
                        tables.limit(sm, x, l);
                    }
                    let tbs = limits.tbs.expect("found with a TB limit");
                    if tables.make_room(sm, k, tbs) {
                        // Joins limited to `tbs`; its whole limits once the room is made
                        // (`on_room_made`).
                        return;
                    }
                }
            }
        }
        if !tables.host(sm, &kernels) {
            return;
        }
        for &(k, limits) in want {
            tables.limit(sm, k, limits);
        }
    }
}

impl Policy for Corun {
    fn name(&self) -> &'static str {
        self.name
    }
    fn admit(&mut self, waiting: &[Waiting]) -> Option<ContextId> {
        pick_waiting(waiting, |w| w.arrived_at)
    }
    fn on_kernel_activated(&mut self, _: KernelSlot, _: &mut Tables) {
        // Planned in `on_cycle`, once every kernel activated in this cycle is in.
    }
    fn on_sm_idle(&mut self, sm: SmId, tables: &mut Tables) {
        self.apply(sm, tables);
    }
    fn on_sm_room(&mut self, _: SmId, _: &mut Tables) {
        // The plan already says what each SM runs; it changes on `on_cycle`.
    }
    fn on_room_made(&mut self, sm: SmId, _: KernelSlot, tables: &mut Tables) {
        // The newcomer joined (SMK): the SM takes the whole plan, its limits and quotas,
        // and room for the next newcomer, if any.
        self.apply(sm, tables);
    }
    fn on_preemption_done(&mut self, sm: SmId, tables: &mut Tables) {
        self.apply(sm, tables);
    }
    fn on_cycle(&mut self, tables: &mut Tables) {
        self.replan(tables);
        if self.profile.is_some() {
            self.profile_step(tables);
        }
        if self.search.is_some() {
            self.search_step(tables);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpu::occupancy::RegisterAllocation;

    /// papers/lin-thesis Table 4.1's SM: 32 TBs, 2048 threads (64 warps), 64 Ki registers
    /// (256 KB), 96 KB shared memory.
    fn maxwell() -> SmResources {
        SmResources {
            max_threads: 2048,
            max_warps: 64,
            max_tbs: 32,
            registers: 65536,
            max_registers_per_thread: 255,
            register_allocation: RegisterAllocation::Warp { unit: 256 },
            shared_memory: vec![98304],
            carve_out: Default::default(),
            shared_allocation_unit: 256,
            uniform_registers: 0,
        }
    }

    fn k(warps: u32, registers: u32, shared_memory: u32, alone_tbs: u32) -> Corunner {
        Corunner {
            demand: TbDemand {
                warps,
                threads: warps * 32,
                registers,
                shared_memory,
            },
            alone_tbs,
        }
    }

    #[test]
    fn spatial_splits_evenly_with_the_remainder_first() {
        assert_eq!(spatial(2, 16), vec![0..8, 8..16]);
        assert_eq!(spatial(3, 16), vec![0..6, 6..11, 11..16]);
        assert_eq!(spatial(3, 2), vec![0..1, 1..2, 2..2]);
        assert!(spatial(0, 16).is_empty());
    }

    #[test]
    fn left_over_gives_the_second_what_the_first_leaves() {
        // A: 8 warps and 24 KB of shared memory a TB: 4 TBs alone (shared memory bound,
        // 96 KB), holding 32 warps. B: 4 warps, no shared memory, 16 alone: it gets the 32
        // warps A leaves, 8 TBs.
        let a = k(8, 8 * 32 * 32, 24 * 1024, 4);
        let b = k(4, 4 * 32 * 16, 0, 16);
        assert_eq!(left_over(&maxwell(), &[a, b]), vec![4, 8]);
        // The other way round B takes 64 warps (16 TBs) and leaves A nothing.
        assert_eq!(left_over(&maxwell(), &[b, a]), vec![16, 0]);
    }

    #[test]
    fn drf_equalises_dominant_shares() {
        // A: dominant share 1/4 a TB (24 KB of 96 KB shared memory; warps 8/64). B: 1/16
        // (4 of 64 warps). By hand, ties to A: A 1 (1/4); B to 4 (4/16); A 2 (1/2); B to 8
        // (1/2); A 3 (3/4, 24 + 32 warps); B to 10 (64 warps); B's 11th needs 68 warps, B
        // done; A's 4th needs 72, A done: (3, 10).
        let a = k(8, 8 * 32 * 8, 24 * 1024, 4);
        let b = k(4, 4 * 32 * 16, 0, 16);
        assert_eq!(drf(&maxwell(), &[a, b]), vec![3, 10]);
        // Two copies of one kernel share evenly.
        assert_eq!(drf(&maxwell(), &[b, b]), vec![8, 8]);
        // A kernel never gets more than its occupancy alone.
        let small = k(1, 32 * 16, 0, 2);
        assert_eq!(drf(&maxwell(), &[small, b]), vec![2, 15]);
    }

    #[test]
    fn the_hill_climb_reaches_a_single_peak_and_stops_at_a_local_one() {
        // One peak at (3, 5): reached from (1, 1), one move at a time.
        let peak = |x: &[u32]| -> Option<f64> {
            (x[0] <= 8 && x[1] <= 8)
                .then(|| -((f64::from(x[0]) - 3.0).powi(2) + (f64::from(x[1]) - 5.0).powi(2)))
        };
        let (at, moves) = hill_climb(&[1, 1], &peak);
        assert_eq!(at, [3, 5]);
        assert!((2..=6).contains(&moves), "{moves}");
        // Combinations that cannot run are never chosen.
        let (at, _) = hill_climb(&[1, 1], &|x| if x[1] > 2 { None } else { peak(x) });
        assert_eq!(at, [3, 2]);
        // Two peaks: (1, 1) is a local best the climb from (1, 2) stops at, below (6, 6).
        let two = |x: &[u32]| -> Option<f64> {
            Some(match (x[0], x[1]) {
                (1, 1) => 2.0,
                (6, 6) => 9.0,
                _ => 0.0,
            })
        };
        assert_eq!(hill_climb(&[1, 2], &two), (vec![1, 1], 1));
        // A start that cannot run stays where it is.
        assert_eq!(hill_climb(&[9, 9], &peak), (vec![9, 9], 0));
    }

    #[test]
    fn water_filling_raises_the_lowest_relative_performance_first() {
        let a = k(1, 32 * 16, 0, 32);
        let b = k(1, 32 * 16, 0, 32);
        let curves = vec![vec![0.5, 0.8, 1.0, 1.0], vec![0.3, 0.6, 0.9, 1.0]];
        // Ample room. By hand: A 1 (0.5); B 1 (0.3), 2 (0.6); A 2 (0.8); B 3 (0.9); A 3
        // (1.0, its best: done); B 4 (1.0, done): (3, 4).
        assert_eq!(water_fill(&maxwell(), &[a, b], &curves), vec![3, 4]);
        // Five TB slots: A 1, B 1, B 2, A 2, B 3 fill them; A's 3rd and B's 4th do not fit.
        let mut five = maxwell();
        five.max_tbs = 5;
        assert_eq!(water_fill(&five, &[a, b], &curves), vec![2, 3]);
        // A curve that peaks early stops there, leaving the room to the other.
        let curves = vec![vec![1.0, 0.9], vec![0.2, 0.4, 0.6]];
        assert_eq!(water_fill(&maxwell(), &[a, b], &curves), vec![1, 3]);
        // No curve: nothing.
        assert_eq!(
            water_fill(&maxwell(), &[a, b], &[vec![], vec![]]),
            vec![0, 0]
        );
    }

    #[test]
    fn quotas_follow_standalone_ipc() {
        assert_eq!(quotas(1000, Some(&[1.0, 3.0]), 2), vec![250, 750]);
        assert_eq!(quotas(100, Some(&[2.0, 1.0, 1.0]), 3), vec![50, 25, 25]);
        // Equal without weights, and never zero.
        assert_eq!(quotas(10, None, 3), vec![3, 3, 3]);
        assert_eq!(quotas(10, Some(&[1000.0, 1.0]), 2), vec![10, 1]);
    }

    #[test]
    fn smk_plan_puts_the_drf_combination_and_quotas_on_every_sm() {
        let a = k(8, 8 * 32 * 8, 24 * 1024, 4);
        let b = k(4, 4 * 32 * 16, 0, 16);
        let ipc = Ipcs::new(&[1.0, 3.0]);
        let smk = Scheme::Smk { epoch: 100, ipc };
        // Contexts in the other order: the weights follow the contexts, not the slots.
        let p = plan(&smk, &maxwell(), 2, &[a, b], &[ContextId(1), ContextId(0)]);
        assert_eq!(p.len(), 2);
        for sm in &p {
            assert_eq!(sm.len(), 2);
            assert_eq!((sm[0].1.tbs, sm[0].1.issue_quota), (Some(3), Some(75)));
            assert_eq!((sm[1].1.tbs, sm[1].1.issue_quota), (Some(10), Some(25)));
        }
        // Alone, no quota.
        let p = plan(&smk, &maxwell(), 1, &[a], &[ContextId(0)]);
        assert_eq!(p[0][0].1.issue_quota, None);
    }

    #[test]
    fn fixed_plan_limits_each_process_to_its_count() {
        let a = k(8, 8 * 32 * 8, 24 * 1024, 4);
        let b = k(4, 4 * 32 * 16, 0, 16);
        let fixed = Scheme::Fixed(TbCounts::new(&[2, 5]).unwrap(), None);
        // Kernels of contexts 1 and 0 (in activation order), and one of context 2, which
        // the list does not name.
        let p = plan(
            &fixed,
            &maxwell(),
            3,
            &[a, b, b],
            &[ContextId(1), ContextId(0), ContextId(2)],
        );
        assert_eq!(p.len(), 3);
        for sm in &p {
            let tbs: Vec<_> = sm.iter().map(|(i, l)| (*i, l.tbs, l.issue_quota)).collect();
            assert_eq!(
                tbs,
                [(0, Some(5), None), (1, Some(2), None), (2, None, None)]
            );
        }
        assert!(TbCounts::new(&[1, 0]).is_none());
        assert!(TbCounts::new(&[]).is_none());
    }

    #[test]
    fn ipcs_refuse_bad_lists() {
        assert!(Ipcs::new(&[]).is_none());
        assert!(Ipcs::new(&[1.0, 0.0]).is_none());
        assert!(Ipcs::new(&[1.0, f64::NAN]).is_none());
        assert!(Ipcs::new(&[1.0; MAX_CORUNNERS + 1]).is_none());
        assert_eq!(Ipcs::new(&[1.0, 2.0]).unwrap().as_slice(), &[1.0, 2.0]);
    }

    #[test]
    fn warped_slicer_profiles_each_kernel_at_every_count_on_its_sms() {
        let a = k(8, 8 * 32 * 32, 0, 3);
        let b = k(4, 4 * 32 * 16, 0, 16);
        // 8 SMs: 4 each; a holds 3 alone, so its fourth SM samples 1 again.
        let p = profile_points(&[a, b], 8).unwrap();
        let want: Vec<Option<(usize, u32)>> = [
            (0, 1),
            (0, 2),
            (0, 3),
            (0, 1),
            (1, 1),
            (1, 2),
            (1, 3),
            (1, 4),
        ]
        .into_iter()
        .map(Some)
        .collect();
        assert_eq!(p, want);
        // More kernels than SMs: some kernel would get none, so no profile.
        assert!(profile_points(&[a, b, a], 2).is_none());
        // Curves: the instructions each SM issued, a count sampled twice averaged.
        let issued = [100, 180, 240, 140, 50, 90, 120, 130];
        let c = profile_curves(2, &p, &issued);
        assert_eq!(c[0], vec![120.0, 180.0, 240.0]);
        assert_eq!(c[1], vec![50.0, 90.0, 120.0, 130.0]);
        // Water-filling over them: a is at its best with 3, b nearly at 3 (120 of 130).
        let tbs = water_fill(&maxwell(), &[a, b], &c);
        assert_eq!(tbs, vec![3, 4]);
    }

    #[test]
    fn ccbp_runs_its_shares_or_drf_when_a_kernel_got_none() {
        use crate::ccbp::{KernelType, Share};
        let a = k(8, 8 * 32 * 32, 0, 3);
        let b = k(4, 4 * 32 * 16, 0, 16);
        let share = |tbs, quota| Share {
            kind: KernelType::NocIntensive,
            tbs,
            noc: 0.0,
            dram: 0.0,
            quota,
        };
        // Both got TBs: their counts, with the quota of the limited one.
        let plan = ccbp_combination(&[share(2, None), share(5, Some(7))], &maxwell(), &[a, b]);
        assert_eq!(plan.len(), 2);
        assert_eq!((plan[0].1.tbs, plan[0].1.noc_quota), (Some(2), None));
        assert_eq!((plan[1].1.tbs, plan[1].1.noc_quota), (Some(5), Some(7)));
        // One got none: DRF's combination, unlimited, rather than a kernel left waiting.
        let plan = ccbp_combination(&[share(3, Some(4)), share(0, None)], &maxwell(), &[a, b]);
        let drf = drf(&maxwell(), &[a, b]);
        let tbs: Vec<u32> = plan.iter().map(|p| p.1.tbs.unwrap()).collect();
        assert_eq!(tbs, drf);
        assert!(plan.iter().all(|p| p.1.noc_quota.is_none()));
    }

    #[test]
    fn a_search_tries_one_tb_more_fewer_or_passed_over() {
        assert_eq!(
            neighbours(&[1, 2]),
            vec![vec![2, 2], vec![1, 3], vec![1, 1], vec![2, 1]]
        );
        assert_eq!(
            neighbours(&[2, 1]),
            vec![vec![3, 1], vec![1, 1], vec![1, 2], vec![2, 2]]
        );
    }
}
