//! Co-running schemes (papers/lin-thesis ch. 4; `sched::corun`) on real suite programs, on
//! two SMs of the `maxwell16` preset (Table 4.1): under every scheme both programs verify;
//! spatial never puts two kernels on one SM, left-over and SMK do, and no kernel's TBs on an
//! SM ever grow past its limit there; SMK's limits are the DRF combination worked out
//! from the kernels' demands; and SMK's warp-instruction quotas set the kernels' shares
//! of the issue slots.

use gpu::config::GpuConfig;
use gpu::timing::{LaunchId, Machine, SmId, TimedGpu};
use sched::corun::{drf, Corunner};
use sched::{Framework, Ipcs, PolicyKind};
use suite::Size;
use workload::scenario::Process;
use workload::system::Injector;
use workload::{RunRecord, Setup, System};

fn process(name: &str) -> Process {
    Process::suite(suite::by_name(name).unwrap(), Size::Small, 5)
}

fn run(policy: PolicyKind, pair: [&str; 2], watch: &mut Watch) -> RunRecord {
    run_under(policy, Default::default(), pair, watch)
}

/// Two `maxwell16` SMs under `policy` and `mechanism`.
fn setup(policy: PolicyKind, mechanism: preempt::MechanismKind) -> Setup {
    let mut config = GpuConfig::preset("maxwell16").unwrap();
    config.sm.count = 2;
    let timing = TimedGpu::new(config);
    Setup {
        host: timing.gpu.host.clone(),
        timing,
        framework: Default::default(),
        policy,
        time_slice_us: 50.0,
        mechanism,
        copy_policy: Default::default(),
        max_cycles: 1 << 25,
        snapshot: false,
        replay: None,
        one_context: false,
    }
}

fn run_under(
    policy: PolicyKind,
    mechanism: preempt::MechanismKind,
    pair: [&str; 2],
    watch: &mut Watch,
) -> RunRecord {
    let setup = setup(policy, mechanism);
    let r = System::new(setup, &[process(pair[0]), process(pair[1])])
        .unwrap()
        .run_with(&mut |_| {}, Some(watch))
        .unwrap_or_else(|e| panic!("{policy}: {e}"));
    for p in &r.processes {
        let v = p.verdict.as_ref().unwrap();
        assert!(v.verified, "{} under {policy}: {}", p.name, v.detail);
    }
    r
}

/// Watches every cycle: whether two launches were ever resident on one SM, and that no
/// launch's TBs on an SM grow past its limit there; and while two launches both have
/// TBs to place and are both resident on SM 0, their TB limits there and the warp
/// instructions each issued.
/// A launch and its TB limit on an SM.
type TbLimit = (LaunchId, Option<u32>);

#[derive(Default)]
struct Watch {
    shared_sm: bool,
    /// TBs each launch held on each SM at the last cycle.
    tbs: Vec<((SmId, LaunchId), u32)>,
    /// (launch, launch) with their TB limits on SM 0, when first seen together.
    limits_seen: Vec<(TbLimit, TbLimit)>,
    /// Per launch (with its kernel's name), warp instructions in cycles both were on SM 0.
    together: Vec<(LaunchId, String, u64)>,
    last: Vec<(LaunchId, u64)>,
    demands: Vec<(LaunchId, Corunner)>,
}

impl Injector for Watch {
    fn before_cycle(&mut self, m: &Machine, _: &mut Framework) {
        for sm in m.sm_ids() {
            let l = m.ledger(sm);
            let present: Vec<LaunchId> = m
                .active()
                .iter()
                .copied()
                .filter(|&id| l.usage(id).tbs > 0)
                .collect();
            for &id in &present {
                // A plan made anew lowers limits without taking TBs away: a launch over its
                // limit receives none until it is under it, so it never grows past it.
                let now = l.usage(id).tbs;
                let key = (sm, id);
                let before = match self.tbs.iter_mut().find(|x| x.0 == key) {
                    Some(x) => std::mem::replace(&mut x.1, now),
                    None => {
                        self.tbs.push((key, now));
                        0
                    }
                };
                if let Some(max) = l.limits(id).tbs {
                    assert!(
                        now <= before || now <= max,
                        "{id} grew to {now} TBs on {sm}, over its limit {max}"
                    );
                }
            }
            if present.len() < 2 {
                continue;
            }
            self.shared_sm = true;
            let (a, b) = (present[0], present[1]);
            // Steady co-running: both launches still have TBs to place (not the tail of
            // one, nor a plan made while one had not arrived).
            let steady = m.launch(a).undispatched() > 0 && m.launch(b).undispatched() > 0;
            if sm != SmId(0) || !steady {
                continue;
            }
            if !self.limits_seen.iter().any(|p| (p.0 .0, p.1 .0) == (a, b)) {
                self.limits_seen
                    .push(((a, l.limits(a).tbs), (b, l.limits(b).tbs)));
                for id in [a, b] {
                    if !self.demands.iter().any(|d| d.0 == id) {
                        let launch = m.launch(id);
                        self.demands.push((
                            id,
                            Corunner {
                                demand: *launch.demand(),
                                alone_tbs: launch.occupancy().tbs_per_sm,
                            },
                        ));
                    }
                }
            }
            for id in [a, b] {
                let now = m.warp_instructions(id);
                let before = self.last.iter().find(|x| x.0 == id).map(|x| x.1);
                if let Some(before) = before {
                    match self.together.iter_mut().find(|x| x.0 == id) {
                        Some(t) => t.2 += now - before,
                        None => {
                            let name = m.launch(id).ctx().kernel.name.clone();
                            self.together.push((id, name, now - before))
                        }
                    }
                }
            }
        }
        // The instruction counts as of this cycle, for the next cycle's deltas (only cycles
        // that both start and end with the pair on SM 0 count).
        self.last = m
            .active()
            .iter()
            .map(|&id| (id, m.warp_instructions(id)))
            .collect();
    }
}

/// Both programs' first kernels have TBs waiting at the same time for a while (kmeans 128,
/// blackscholes 64 at the small size).
const PAIR: [&str; 2] = ["blackscholes", "kmeans"];

#[test]
fn every_scheme_runs_suite_programs_and_they_verify() {
    let fixed = PolicyKind::Fixed {
        tbs: sched::TbCounts::new(&[3, 5]).unwrap(),
        noc: None,
    };
    for policy in PolicyKind::CORUN.into_iter().chain([fixed]) {
        let mut w = Watch::default();
        run(policy, PAIR, &mut w);
        match policy {
            PolicyKind::Spatial => assert!(!w.shared_sm, "spatial put two kernels on one SM"),
            _ => assert!(w.shared_sm, "{policy} never ran two kernels on one SM"),
        }
        if policy == fixed {
            // Process 0 (blackscholes, activated second) at 3, process 1 at 5.
            assert!(!w.limits_seen.is_empty());
            for &((_, la), (_, lb)) in &w.limits_seen {
                assert_eq!((la, lb), (Some(5), Some(3)));
            }
        }
    }
}

#[test]
fn smk_limits_are_the_drf_combination() {
    let mut w = Watch::default();
    run(PolicyKind::CORUN[2], PAIR, &mut w);
    let res = GpuConfig::preset("maxwell16").unwrap().sm.resources;
    assert!(
        !w.limits_seen.is_empty(),
        "the kernels never co-ran steadily"
    );
    for &((a, la), (b, lb)) in &w.limits_seen {
        let da = w.demands.iter().find(|d| d.0 == a).unwrap().1;
        let db = w.demands.iter().find(|d| d.0 == b).unwrap().1;
        // Launch ids are in activation order, the plan's order.
        let want = drf(&res, &[da, db]);
        assert_eq!([la, lb], [Some(want[0]), Some(want[1])], "{a} and {b}");
        // Both run: neither was left out.
        assert!(want[0] > 0 && want[1] > 0);
    }
}

/// The share of the warp instructions blackscholes (process 0) issued while both kernels
/// co-ran steadily on SM 0, under SMK with standalone IPCs `ipc` by process (the quotas'
/// ratio).
fn blackscholes_share(ipc: [f64; 2]) -> f64 {
    let mut w = Watch::default();
    let smk = PolicyKind::Smk {
        epoch: Some(100),
        ipc: Ipcs::new(&ipc),
    };
    run(smk, PAIR, &mut w);
    assert_eq!(w.together.len(), 2, "{:?}", w.together);
    let total = (w.together[0].2 + w.together[1].2) as f64;
    assert!(total > 10_000.0, "too short a window: {:?}", w.together);
    let bs = w
        .together
        .iter()
        .find(|t| t.1 == "black_scholes")
        .expect("blackscholes co-ran");
    bs.2 as f64 / total
}

#[test]
fn smk_quotas_set_the_issue_shares() {
    // Quotas 20:80 and 80:20 per epoch: where both kernels have warps ready, the issue
    // slots go in that ratio, so blackscholes's share must move a long way between the two
    // runs (without quotas both runs would issue alike).
    let low = blackscholes_share([1.0, 4.0]);
    let high = blackscholes_share([4.0, 1.0]);
    assert!(
        high > low + 0.3,
        "blackscholes issued {low:.3} of the instructions at quota 20% and {high:.3} at 80%"
    );
}

/// The kernel time (first TB to finish, summed over its launches, ns) of `process` in `r`.
fn kernel_ns(r: &RunRecord, process: &str) -> f64 {
    r.kernels
        .iter()
        .filter(|k| k.process == process)
        .map(|k| (k.finished_fs.unwrap() - k.started_fs.unwrap()) as f64 / 1e6)
        .sum()
}

/// The pair under `fixed` at 3 and 5 TBs per SM, with NoC quotas `noc` by process.
fn fixed_noc(noc: Option<[u32; 2]>) -> (RunRecord, Watch) {
    let mut w = Watch::default();
    let policy = PolicyKind::Fixed {
        tbs: sched::TbCounts::new(&[3, 5]).unwrap(),
        noc: noc.map(|q| sched::TbCounts::new(&q).unwrap()),
    };
    let r = run(policy, PAIR, &mut w);
    (r, w)
}

#[test]
fn noc_quotas_pace_the_kernel_they_limit() {
    // CCBP's issue rate controllers (papers/lin-thesis §4.5.1): blackscholes (process 0)
    // may send so many requests towards the L2 per 200 cycles from each SM; kmeans is
    // given a quota it never reaches. Where the quota binds, blackscholes's kernel time
    // follows it (half the quota, about twice the time), and kmeans, which no longer
    // shares the interconnect with blackscholes's full rate, is not slowed.
    let (free, _) = fixed_noc(None);
    let (four, _) = fixed_noc(Some([4, 100_000]));
    let (two, _) = fixed_noc(Some([2, 100_000]));
    let bs = [&free, &four, &two].map(|r| kernel_ns(r, "blackscholes"));
    let km = [&free, &four, &two].map(|r| kernel_ns(r, "kmeans"));
    eprintln!("blackscholes {bs:?} ns, kmeans {km:?} ns");
    assert!(bs[1] > 1.5 * bs[0], "a quota of 4 does not bind: {bs:?}");
    let ratio = bs[2] / bs[1];
    assert!((1.6..2.4).contains(&ratio), "quota 2 against 4: {ratio:.2}");
    assert!(km[2] <= km[0] * 1.02, "kmeans slowed: {km:?}");
    // The run's bandwidth timeline (`RunRecord::bandwidth`) shows the rate: in no window of
    // 1000 cycles do blackscholes's launches send more than the quota allows on 2 SMs
    // (5 time units of 2 requests, one held quota and one access of up to 32 lines
    // overdrawn, per SM; measured: 20, the quota exactly), while unlimited they send more
    // than twice that (measured: 116).
    let peak = |r: &RunRecord| {
        let mine: Vec<u32> = r
            .kernels
            .iter()
            .filter(|k| k.process == "blackscholes")
            .filter_map(|k| k.launch)
            .collect();
        let mut per: std::collections::BTreeMap<u64, u64> = Default::default();
        for s in r.bandwidth.iter().filter(|s| mine.contains(&s.launch)) {
            *per.entry(s.window).or_default() += s.noc_requests;
        }
        per.values().copied().max().unwrap_or(0)
    };
    // Its inputs come from DRAM: the timeline charges it their bytes.
    let dram: u64 = free
        .bandwidth
        .iter()
        .filter(|s| {
            free.kernels
                .iter()
                .any(|k| k.launch == Some(s.launch) && k.process == "blackscholes")
        })
        .map(|s| s.dram_bytes)
        .sum();
    assert!(dram > 0, "no DRAM bytes charged to blackscholes");
    let bound = 2 * (5 * 2 + 2 + 32);
    assert!(peak(&two) <= bound, "{} > {bound}", peak(&two));
    eprintln!(
        "peaks: free {}, quota 4 {}, quota 2 {}",
        peak(&free),
        peak(&four),
        peak(&two)
    );
    assert!(
        peak(&free) > 2 * peak(&two),
        "unlimited peak {}",
        peak(&free)
    );
}

#[test]
fn smk_reaches_its_partition_by_preemption() {
    // The SMK paper (and papers/lin-thesis §4.1) moves SMs to a new TB partition by
    // preempting: a kernel the plan adds to a running SM gets room there from the other
    // kernels' youngest TBs. Left-over waits for TBs to finish instead. With a context
    // switch, the preempted TBs come back and both programs still verify (`run` checks).
    let rooms = |r: &RunRecord| {
        r.records
            .iter()
            .filter(|x| matches!(x, sched::Record::RoomRequested { .. }))
            .count()
    };
    let smk = PolicyKind::CORUN[2];
    let left_over = PolicyKind::CORUN[1];
    assert_eq!((smk.name(), left_over.name()), ("smk", "left-over"));
    let r = run(left_over, PAIR, &mut Watch::default());
    assert_eq!(rooms(&r), 0, "left-over preempted");
    for mechanism in [
        preempt::MechanismKind::Drain,
        preempt::MechanismKind::Baseline,
    ] {
        let r = run_under(smk, mechanism, PAIR, &mut Watch::default());
        let preempted = r
            .preemptions
            .iter()
            .filter(|p| matches!(p, preempt::Record::Preempted { .. }))
            .count();
        let restored = r
            .preemptions
            .iter()
            .filter(|p| matches!(p, preempt::Record::Restored { .. }))
            .count();
        eprintln!(
            "{mechanism:?}: {} rooms, {preempted} TBs preempted, {restored} restored",
            rooms(&r)
        );
        assert!(rooms(&r) > 0, "{mechanism:?}: SMK asked for no room");
        assert!(preempted > 0, "{mechanism:?}: nothing preempted");
        if mechanism == preempt::MechanismKind::Baseline {
            assert_eq!(preempted, restored, "every switched TB comes back");
        }
    }
}

/// Takes whole SMs at planned cycles: one where two launches are resident, else (after the
/// first) any SM with TBs.
struct TakeShared {
    /// Cycles, latest first.
    plan: Vec<u64>,
    /// Requests the framework took, and those on an SM two launches shared.
    made: u32,
    shared: u32,
}

impl Injector for TakeShared {
    fn before_cycle(&mut self, m: &Machine, fw: &mut Framework) {
        let Some(&due) = self.plan.last().filter(|&&c| c <= m.cycle()) else {
            return;
        };
        let launches = |sm: SmId| {
            let mut l: Vec<LaunchId> = m.resident(sm).map(|(t, _)| t.launch).collect();
            l.sort_unstable();
            l.dedup();
            l.len()
        };
        let running = |sm: &SmId| fw.tables().sm(*sm).state == sched::SmState::Running;
        let sms: Vec<SmId> = m.sm_ids().filter(running).collect();
        // A shared SM when one comes within 20,000 cycles of the moment, else any; the
        // first request waits for a shared SM however long it takes (in some seeded runs
        // no later moment finds the two kernels on one SM).
        let shared = sms.iter().copied().find(|&sm| launches(sm) >= 2);
        let pick = match shared {
            Some(sm) => Some(sm),
            None if self.made > 0 && m.cycle() > due + 20_000 => {
                sms.iter().copied().find(|&sm| launches(sm) >= 1)
            }
            None => return,
        };
        self.plan.pop();
        if let Some(sm) = pick {
            if fw.preempt_sm(sm) {
                self.made += 1;
                self.shared += u32::from(launches(sm) >= 2);
            }
        }
    }
}

/// The pair co-running at a fixed 3+5 TBs per SM under `mechanism`, preempted at `plan`
/// (none: not preempted); the record with final memory.
fn corun_preempted(mechanism: preempt::MechanismKind, plan: Vec<u64>) -> (RunRecord, TakeShared) {
    let fixed = PolicyKind::Fixed {
        tbs: sched::TbCounts::new(&[3, 5]).unwrap(),
        noc: None,
    };
    let setup = Setup {
        snapshot: true,
        ..setup(fixed, mechanism)
    };
    let mut take = TakeShared {
        plan,
        made: 0,
        shared: 0,
    };
    let r = System::new(setup, &[process("blackscholes"), process("kmeans")])
        .unwrap()
        .run_with(&mut |_| {}, Some(&mut take))
        .unwrap_or_else(|e| panic!("{}: {e}", mechanism.name()));
    for p in &r.processes {
        let v = p.verdict.as_ref().unwrap();
        assert!(
            v.verified,
            "{} under {}: {}",
            p.name,
            mechanism.name(),
            v.detail
        );
    }
    (r, take)
}

/// The bit-exact property of `preemption.rs` for co-resident kernels: blackscholes and
/// kmeans share both SMs, whole SMs are taken at seeded cycles (one where both kernels are
/// resident when there is one) by every mechanism and given back, and device memory ends
/// bit-identical to the co-run left alone.
#[test]
fn preempting_co_resident_kernels_is_bit_exact_under_every_mechanism() {
    let (reference, _) = corun_preempted(preempt::MechanismKind::Drain, Vec::new());
    let period = reference.core_period_fs;
    let (from, to) = reference
        .kernels
        .iter()
        .filter_map(|k| Some((k.started_fs? / period, k.finished_fs? / period)))
        .fold((u64::MAX, 0), |(a, b), (s, f)| (a.min(s), b.max(f)));
    for (mi, mechanism) in preempt::MechanismKind::ALL.into_iter().enumerate() {
        // As in `preemption.rs`: PEP predicts a short launch time and CKPT checkpoints
        // often, so that both act on the suite's short TBs.
        let mechanism = match mechanism {
            preempt::MechanismKind::Pep { .. } => preempt::MechanismKind::Pep {
                predicted_launch_us: 0.2,
            },
            preempt::MechanismKind::PepInPlace { .. } => preempt::MechanismKind::PepInPlace {
                predicted_launch_us: 0.2,
            },
            preempt::MechanismKind::Ckpt { least_live, .. } => preempt::MechanismKind::Ckpt {
                every: 2,
                least_live,
            },
            m => m,
        };
        let mut rng = suite::Rng::for_kernel("corun", mi as u64);
        let span = ((to - from) * 7 / 10).max(1) as u32;
        let mut plan: Vec<u64> = (0..12).map(|_| from + u64::from(rng.below(span))).collect();
        // The first request as soon as the kernels share an SM.
        plan.push(from);
        plan.sort_unstable_by(|a, b| b.cmp(a));
        let (r, take) = corun_preempted(mechanism, plan);
        let name = mechanism.name();
        assert!(
            r.memory == reference.memory,
            "{name}: memory differs from the co-run left alone"
        );
        assert!(take.made >= 2, "{name}: only {} requests", take.made);
        assert!(
            take.shared >= 1,
            "{name}: no request found both kernels on an SM"
        );
        let requested = r
            .preemptions
            .iter()
            .filter(|p| matches!(p, preempt::Record::Requested { .. }))
            .count();
        assert_eq!(requested as u32, take.made, "{name}");
    }
}

/// Runs `PAIR` under `policy` on eight `maxwell16` SMs of four TB slots (so both kernels
/// keep TBs waiting for a while: kmeans 128, blackscholes 64, 32 at a time), watched by
/// `watch`; both programs must verify.
fn run_on_small_sms(policy: PolicyKind, watch: &mut dyn Injector) {
    run_on_small_sms_with(policy, watch, |_| {});
}

/// [`run_on_small_sms`] on a GPU `tweak` changes further.
fn run_on_small_sms_with(
    policy: PolicyKind,
    watch: &mut dyn Injector,
    tweak: impl Fn(&mut GpuConfig),
) {
    run_pair_on_small_sms(policy, PAIR, watch, tweak);
}

/// [`run_on_small_sms`] for another pair of programs, on a GPU `tweak` changes further.
fn run_pair_on_small_sms(
    policy: PolicyKind,
    pair: [&str; 2],
    watch: &mut dyn Injector,
    tweak: impl Fn(&mut GpuConfig),
) {
    let mut s = setup(policy, Default::default());
    s.timing.gpu.sm.count = 8;
    s.timing.gpu.sm.resources.max_tbs = 4;
    tweak(&mut s.timing.gpu);
    let r = System::new(s, &[process(pair[0]), process(pair[1])])
        .unwrap()
        .run_with(&mut |_| {}, Some(watch))
        .unwrap();
    for p in &r.processes {
        let v = p.verdict.as_ref().unwrap();
        assert!(v.verified, "{policy} {}: {}", p.name, v.detail);
    }
}

/// Watches Warped-Slicer's phases on every SM: a profile (every SM holding TBs of one
/// launch only, within a TB limit there, the counts per launch seen), then a combination
/// (every SM's limits for both launches the same pair, some SM running both).
#[derive(Default)]
struct WsWatch {
    /// The profile counts seen per launch, once every SM held one launch only at its
    /// profile count.
    profiled: Vec<(LaunchId, Vec<u32>)>,
    profile_at: Option<u64>,
    /// The first combination run on every SM, and when, with the two launches' request
    /// quotas (CCBP's).
    combination: Option<((LaunchId, u32), (LaunchId, u32))>,
    quotas: (Option<u32>, Option<u32>),
    combination_at: Option<u64>,
    /// When both kernels first had TBs to place.
    together_at: Option<u64>,
}

impl Injector for WsWatch {
    fn before_cycle(&mut self, m: &Machine, _: &mut Framework) {
        let active: Vec<LaunchId> = m.active().to_vec();
        if active.len() != 2 || active.iter().any(|&a| m.launch(a).undispatched() == 0) {
            return;
        }
        let (a, b) = (active[0], active[1]);
        self.together_at.get_or_insert(m.cycle());
        // One launch per SM, each within a TB limit: the profile.
        let mut points = Vec::new();
        let mut single = true;
        for sm in m.sm_ids() {
            let l = m.ledger(sm);
            let on: Vec<LaunchId> = [a, b].into_iter().filter(|&x| l.usage(x).tbs > 0).collect();
            match on[..] {
                [x] => match l.limits(x).tbs {
                    Some(n) if l.usage(x).tbs <= n => points.push((x, n)),
                    _ => single = false,
                },
                _ => single = false,
            }
        }
        if single && self.combination_at.is_none() {
            let mut per: Vec<(LaunchId, Vec<u32>)> = Vec::new();
            for (x, n) in points {
                match per.iter_mut().find(|p| p.0 == x) {
                    Some(p) => p.1.push(n),
                    None => per.push((x, vec![n])),
                }
            }
            for p in &mut per {
                p.1.sort_unstable();
            }
            // The profile once every SM has its kernel (the SMs changing hands drain
            // first): four SMs per kernel at 1, 2, 3 and 4 TBs.
            let full = per.len() == 2 && per.iter().all(|p| p.1 == [1, 2, 3, 4]);
            if full && self.profile_at.is_none() {
                self.profile_at = Some(m.cycle());
                self.profiled = per;
            }
        }
        // The same limits for both on every SM, and both resident somewhere: a combination.
        if self.profile_at.is_some() && self.combination_at.is_none() {
            let limits: Vec<(Option<u32>, Option<u32>)> = m
                .sm_ids()
                .map(|sm| (m.ledger(sm).limits(a).tbs, m.ledger(sm).limits(b).tbs))
                .collect();
            let both = m
                .sm_ids()
                .any(|sm| m.ledger(sm).usage(a).tbs > 0 && m.ledger(sm).usage(b).tbs > 0);
            if let (Some(&(Some(x), Some(y))), true) = (limits.first(), both) {
                let quotas: Vec<(Option<u32>, Option<u32>)> = m
                    .sm_ids()
                    .map(|sm| {
                        let l = m.ledger(sm);
                        (l.limits(a).noc_quota, l.limits(b).noc_quota)
                    })
                    .collect();
                if limits.iter().all(|&l| l == (Some(x), Some(y)))
                    && quotas.iter().all(|&q| q == quotas[0])
                {
                    self.combination = Some(((a, x), (b, y)));
                    self.quotas = quotas[0];
                    self.combination_at = Some(m.cycle());
                }
            }
        }
    }
}

#[test]
fn warped_slicer_profiles_on_the_sms_then_runs_one_combination_everywhere() {
    // Eight SMs of 4 TB slots: four profile each kernel, at 1, 2, 3 and 4 TBs, and both
    // kernels keep TBs waiting through the profile (kmeans 128, blackscholes 64, 32 at
    // a time).
    let policy = PolicyKind::WarpedSlicer {
        warm_up: Some(1000),
        sample: Some(3000),
    };
    let mut w = WsWatch::default();
    run_on_small_sms(policy, &mut w);
    let at = w
        .profile_at
        .expect("no profile: four SMs per kernel at 1-4 TBs, one kernel each");
    let ((_, x), (_, y)) = w.combination.expect("no combination after the profile");
    let then = w.combination_at.unwrap();
    // Chosen after the profile was seen, and after the warm-up and the sample from when
    // both kernels had TBs to place; both kernels get TBs.
    let together = w.together_at.unwrap();
    assert!(
        then > at && then >= together + 4000,
        "both from {together}, profile seen at {at}, combination at {then}"
    );
    assert!(x >= 1 && y >= 1, "{x} + {y}");
}

/// Watches the combinations every SM runs: each time every SM's limits for both launches
/// change to one same new pair while both have TBs to place.
#[derive(Default)]
struct CombinationWatch {
    seen: Vec<(u64, u32, u32)>,
}

impl Injector for CombinationWatch {
    fn before_cycle(&mut self, m: &Machine, _: &mut Framework) {
        let active: Vec<LaunchId> = m.active().to_vec();
        if active.len() != 2 || active.iter().any(|&a| m.launch(a).undispatched() == 0) {
            return;
        }
        let (a, b) = (active[0], active[1]);
        let limits: Vec<(Option<u32>, Option<u32>)> = m
            .sm_ids()
            .map(|sm| (m.ledger(sm).limits(a).tbs, m.ledger(sm).limits(b).tbs))
            .collect();
        if let Some(&(Some(x), Some(y))) = limits.first() {
            let same = limits.iter().all(|&l| l == (Some(x), Some(y)));
            if same
                && self
                    .seen
                    .last()
                    .is_none_or(|&(_, px, py)| (px, py) != (x, y))
            {
                self.seen.push((m.cycle(), x, y));
            }
        }
    }
}

#[test]
fn maestro_online_tries_neighbouring_combinations_epoch_by_epoch() {
    // The same eight SMs of four TB slots: DRF's combination first, then one neighbour
    // (a TB more, fewer or passed over) per epoch of 2,000 cycles.
    let policy = PolicyKind::Maestro {
        epoch: Some(2000),
        ipc: None,
    };
    let mut w = CombinationWatch::default();
    run_on_small_sms(policy, &mut w);
    assert!(w.seen.len() >= 3, "combinations seen: {:?}", w.seen);
    for pair in w.seen.windows(2) {
        let ((t0, x0, y0), (t1, x1, y1)) = (pair[0], pair[1]);
        // An epoch apart at least, each a neighbour of the one the search stands at (or
        // back to it): TB counts differ by one in one kernel or move one TB across.
        assert!(t1 >= t0 + 2000 - 10, "{:?}", w.seen);
        let (dx, dy) = (i64::from(x1) - i64::from(x0), i64::from(y1) - i64::from(y0));
        assert!(dx.abs() + dy.abs() <= 4, "{:?}", w.seen);
        assert!(
            (1..=4).contains(&x1) && (1..=4).contains(&y1),
            "{:?}",
            w.seen
        );
    }
}

/// CCBP online: the profile of Warped-Slicer, then Algorithm 1's combination on every SM.
fn ccbp_online(tweak: impl Fn(&mut GpuConfig)) -> WsWatch {
    let policy = PolicyKind::Ccbp {
        warm_up: Some(1000),
        sample: Some(3000),
        prior_lsk: None,
    };
    let mut w = WsWatch::default();
    run_on_small_sms_with(policy, &mut w, tweak);
    let at = w
        .profile_at
        .expect("no profile: four SMs per kernel at 1-4 TBs");
    let then = w.combination_at.expect("no combination after the profile");
    let together = w.together_at.unwrap();
    assert!(
        then > at && then >= together + 4000,
        "both from {together}, profile seen at {at}, combination at {then}"
    );
    w
}

#[test]
fn ccbp_online_profiles_bandwidth_then_limits_the_kernels_that_need_it() {
    // The preset's interconnect: how much each kernel sends decides its type, and with it
    // whether it is limited.
    // On the preset both send far less than half the sustainable bandwidth (measured:
    // 2+2, DRF's share of the four TB slots), so both are latency sensitive, and neither
    // is limited.
    let w = ccbp_online(|_| {});
    let ((_, x), (_, y)) = w.combination.unwrap();
    assert!(x >= 1 && y >= 1, "{x} + {y}");
    assert_eq!(w.quotas, (None, None), "preset: {:?}", w.combination);
    // An interconnect clocked 16 times slower: both kernels alone keep it busier than
    // half its sustainable bandwidth, so Algorithm 1 classes them NoC intensive and
    // grants each a request quota (measured: 1 and 1 at 2+2), together within the
    // sustainable flits per window (a request moves at least one flit).
    let slow_icnt = |c: &mut GpuConfig| c.memory.clocks.icnt_mhz /= 16.0;
    let slow = ccbp_online(slow_icnt);
    let ((_, x), (_, y)) = slow.combination.unwrap();
    assert!(x >= 1 && y >= 1, "{x} + {y}");
    let (Some(qa), Some(qb)) = slow.quotas else {
        panic!("slow interconnect, no quota: {:?}", slow.quotas);
    };
    let mut c = GpuConfig::preset("maxwell16").unwrap();
    slow_icnt(&mut c);
    let sustainable = c.memory.noc_flits_per_sm_core_cycle()
        * gpu::timing::IRC_WINDOW as f64
        * sched::ccbp::NOC_SUSTAINABLE;
    // Each quota rounds its grant up (at most one request more).
    assert!(
        f64::from(qa + qb) <= sustainable + 2.0,
        "quotas {qa} + {qb} against {sustainable} flits"
    );
}

/// Counts, per pair of kernel names, the times two launches both with TBs to place met
/// (became the two active launches with work), and the times the SMs entered a profile's
/// layout for them (every SM holding TBs of one of the two only, each within a TB limit,
/// both launches on some SM).
#[derive(Default)]
struct ProfileCount {
    met: Vec<((String, String), u32)>,
    profiles: Vec<((String, String), u32)>,
    pair: Option<(LaunchId, LaunchId)>,
    in_profile: bool,
}

impl ProfileCount {
    fn bump(v: &mut Vec<((String, String), u32)>, key: (String, String)) {
        match v.iter_mut().find(|x| x.0 == key) {
            Some(x) => x.1 += 1,
            None => v.push((key, 1)),
        }
    }
}

impl Injector for ProfileCount {
    fn before_cycle(&mut self, m: &Machine, _: &mut Framework) {
        let active: Vec<LaunchId> = m.active().to_vec();
        if active.len() != 2 || active.iter().any(|&a| m.launch(a).undispatched() == 0) {
            self.pair = None;
            self.in_profile = false;
            return;
        }
        let (a, b) = (active[0], active[1]);
        let name = |x: LaunchId| m.launch(x).ctx().kernel.name.clone();
        let key = (name(a), name(b));
        if self.pair != Some((a, b)) {
            self.pair = Some((a, b));
            self.in_profile = false;
            Self::bump(&mut self.met, key.clone());
        }
        let mut seen = [false, false];
        let profile = m.sm_ids().all(|sm| {
            let l = m.ledger(sm);
            let on: Vec<usize> = [a, b]
                .iter()
                .enumerate()
                .filter(|(_, &x)| l.usage(x).tbs > 0)
                .map(|(i, _)| i)
                .collect();
            match on[..] {
                [i] => {
                    seen[i] = true;
                    let x = [a, b][i];
                    l.limits(x).tbs.is_some_and(|n| l.usage(x).tbs <= n)
                }
                _ => false,
            }
        }) && seen == [true, true];
        if profile && !self.in_profile {
            Self::bump(&mut self.profiles, key);
        }
        self.in_profile = profile;
    }
}

#[test]
fn online_schemes_profile_the_same_kernels_once() {
    // hotspot's host loop launches its kernel again and again beside kmeans's one long
    // launch: the pair meets more than once (measured: twice), and Warped-Slicer and CCBP
    // profile it the first time only, then apply what they chose.
    let ws = PolicyKind::WarpedSlicer {
        warm_up: Some(500),
        sample: Some(1500),
    };
    let ccbp = PolicyKind::Ccbp {
        warm_up: Some(500),
        sample: Some(1500),
        prior_lsk: None,
    };
    for policy in [ws, ccbp] {
        let mut w = ProfileCount::default();
        run_pair_on_small_sms(policy, ["hotspot", "kmeans"], &mut w, |_| {});
        assert!(
            w.met.iter().any(|m| m.1 >= 2),
            "{policy}: the kernels met only once: {:?}",
            w.met
        );
        for (key, met) in &w.met {
            let profiled = w.profiles.iter().find(|p| p.0 == *key).map_or(0, |p| p.1);
            assert_eq!(profiled, 1, "{policy}: {key:?} met {met} times");
        }
    }
}
