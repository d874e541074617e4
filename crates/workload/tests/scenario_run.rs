//! Scenarios end to end: processes running suite host programs and command lists share the
//! timed GTX480, and every one of them verifies.

use std::path::Path;

use gpu::config::GpuConfig;
use gpu::timing::TimedGpu;
use workload::{parse, Files, Setup, System};

const SAXPY: &str = include_str!("../../../examples/saxpy/saxpy.ptx");

struct Mem;

impl Files for Mem {
    fn read(&self, path: &Path) -> Result<Vec<u8>, String> {
        match path.file_name().and_then(|f| f.to_str()) {
            Some("saxpy.ptx") => Ok(SAXPY.as_bytes().to_vec()),
            _ => Err("no such file".into()),
        }
    }
}

fn setup(s: &workload::Scenario) -> Setup {
    let gpu = GpuConfig::preset("gtx480").unwrap();
    Setup::for_scenario(s, TimedGpu::new(gpu), s.max_cycles.unwrap_or(1 << 30)).unwrap()
}

const MIX: &str = r#"
[scheduler]
policy = "fcfs"

[[process]]
name = "bfs"
suite = "bfs"

[[process]]
name = "saxpy"
ptx = "saxpy.ptx"
arrival_us = 3.0

[[process.buffer]]
name = "x"
type = "f32"
len = 500
init = "iota"

[[process.buffer]]
name = "y"
type = "f32"
len = 500
init = "fill"
value = 1.0

[[process.command]]
copy = "x"

[[process.command]]
repeat = 3
[[process.command.body]]
launch = "saxpy"
grid = [4]
block = [128]
args = [{ buffer = "x" }, { buffer = "y" }, { f32 = 2.0 }, { u32 = 500 }]

[[process.command]]
copy = "y"
direction = "to_host"

[[process.check]]
buffer = "y"
values = [1.0, 7.0, 13.0]

[[process]]
name = "hotspot"
suite = "hotspot"
arrival_us = 10.0
"#;

#[test]
fn suite_and_command_processes_share_the_gpu_and_verify() {
    let s = parse("mix.toml", MIX, &Mem).unwrap();
    let r = System::new(setup(&s), &s.processes)
        .unwrap()
        .run(&mut |_| {})
        .unwrap();
    for p in &r.processes {
        let v = p.verdict.as_ref().unwrap();
        assert!(v.verified, "{}: {}", p.name, v.detail);
        assert!(p.finished_fs.unwrap() > p.arrival_fs);
    }
    let saxpy: Vec<_> = r.kernels.iter().filter(|k| k.process == "saxpy").collect();
    assert_eq!(saxpy.len(), 3);
    // Stream order: each launch of the loop starts after the previous one finished, and
    // reaches the GPU no earlier than the launch latency after its call.
    for w in saxpy.windows(2) {
        assert!(w[1].arrived_fs.unwrap() >= w[0].finished_fs.unwrap());
    }
    for k in &r.kernels {
        assert!(k.arrived_fs.unwrap() >= k.called_fs + 5 * workload::system::FS_PER_US);
        assert!(k.started_fs.unwrap() >= k.arrived_fs.unwrap());
        assert!(k.finished_fs.unwrap() > k.started_fs.unwrap());
    }
    assert!(r
        .copies
        .iter()
        .any(|c| c.process == "saxpy" && !c.to_device));
    eprintln!(
        "{} kernels, {} copies, {} cycles",
        r.kernels.len(),
        r.copies.len(),
        r.cycles
    );
}

fn run(text: &str) -> workload::RunRecord {
    let s = parse("t.toml", text, &Mem).unwrap_or_else(|e| panic!("{e}"));
    System::new(setup(&s), &s.processes)
        .unwrap()
        .run(&mut |_| {})
        .unwrap_or_else(|e| panic!("{e}"))
}

fn turnaround(r: &workload::RunRecord, name: &str) -> u64 {
    let p = r.processes.iter().find(|p| p.name == name).unwrap();
    p.finished_fs.unwrap() - p.arrival_fs
}

/// Four suite programs arriving 10 µs apart, under `policy`, sharing SMs or not, the last
/// one (`bfs`) with priority `prio`.
fn four(policy: &str, sharing: bool, prio: i32, copy_engine: &str) -> String {
    format!(
        r#"
[scheduler]
policy = "{policy}"
intra_sm_sharing = {sharing}
copy_engine = "{copy_engine}"

[[process]]
name = "srad"
suite = "srad"

[[process]]
name = "pathfinder"
suite = "pathfinder"
arrival_us = 10.0

[[process]]
name = "hotspot"
suite = "hotspot"
arrival_us = 20.0

[[process]]
name = "bfs"
suite = "bfs"
arrival_us = 30.0
priority = {prio}
"#
    )
}

/// Per SM, the most kernels it held TBs of at once.
fn most_kernels_on_an_sm(r: &workload::RunRecord) -> usize {
    use std::collections::BTreeMap;
    let mut resident: BTreeMap<u32, BTreeMap<u32, i64>> = BTreeMap::new();
    let mut most = 0;
    for rec in &r.residency {
        let (sm, l) = (rec.sm.0, rec.tb.launch.0);
        let d = if rec.how.arrives() { 1 } else { -1 };
        let m = resident.entry(sm).or_default();
        *m.entry(l).or_default() += d;
        m.retain(|_, n| *n > 0);
        most = most.max(m.len());
    }
    most
}

#[test]
fn two_and_four_processes_verify_under_fcfs_and_npq_on_disjoint_and_shared_sms() {
    let two = r#"
[[process]]
name = "scan"
suite = "scan"
[[process]]
name = "reduce"
suite = "reduce"
arrival_us = 1.0
"#;
    let r = run(two);
    assert!(r
        .processes
        .iter()
        .all(|p| p.verdict.as_ref().unwrap().verified));
    for policy in ["fcfs", "npq"] {
        for sharing in [false, true] {
            let r = run(&four(policy, sharing, 1, "fcfs"));
            for p in &r.processes {
                let v = p.verdict.as_ref().unwrap();
                assert!(
                    v.verified,
                    "{policy} sharing={sharing} {}: {}",
                    p.name, v.detail
                );
            }
            let most = most_kernels_on_an_sm(&r);
            if sharing {
                assert!(most >= 2, "{policy}: no SM held two kernels at once");
            } else {
                assert_eq!(most, 1, "{policy}: an SM held two kernels at once");
            }
        }
    }
}

/// `scenarios/priority.toml` under `policy`, its kernels shortened for a debug build.
fn priority_scenario(policy: &str) -> workload::RunRecord {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/priority.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let short = text.replace("{ u32 = 16 }", "{ u32 = 8 }");
    assert_ne!(
        short, text,
        "the kernels' iteration count is where the test expects it"
    );
    let text = short.replace(r#"policy = "npq""#, &format!(r#"policy = "{policy}""#));
    let s = parse(&path.display().to_string(), &text, &workload::Disk)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.policy.name(), policy);
    run_verified(&s, policy)
}

/// Runs scenario `s` and checks that every process verified.
fn run_verified(s: &workload::Scenario, label: &str) -> workload::RunRecord {
    let r = System::new(setup(s), &s.processes)
        .unwrap()
        .run(&mut |_| {})
        .unwrap_or_else(|e| panic!("{label}: {e}"));
    for p in &r.processes {
        let v = p.verdict.as_ref().unwrap();
        assert!(v.verified, "{label} {}: {}", p.name, v.detail);
    }
    r
}

#[test]
fn npq_favours_the_high_priority_process() {
    // Kernel priority alone (papers/tanasic-thesis §5.3.2): three programs launch the same
    // kernel of two waves, the last with the highest priority; no input copies, and the copy
    // engine first come, first served under both policies. FCFS gives the SMs `first` frees
    // to `second`, which arrived earlier; NPQ gives them to `urgent`, so `urgent` finishes
    // before `second`, the order FCFS gives reversed.
    let fcfs = priority_scenario("fcfs");
    let npq = priority_scenario("npq");
    let t = |r: &workload::RunRecord, p: &str| turnaround(r, p);
    eprintln!(
        "urgent: fcfs {} fs, npq {} fs; second: fcfs {} fs, npq {} fs",
        t(&fcfs, "urgent"),
        t(&npq, "urgent"),
        t(&fcfs, "second"),
        t(&npq, "second")
    );
    let done = |r: &workload::RunRecord, p: &str| {
        let p = r.processes.iter().find(|x| x.name == p).unwrap();
        p.finished_fs.unwrap()
    };
    assert!(done(&fcfs, "second") < done(&fcfs, "urgent"));
    assert!(done(&npq, "urgent") < done(&npq, "second"));
    assert!(t(&npq, "urgent") * 100 < t(&fcfs, "urgent") * 80);
    // The first program is not touched (nothing is preempted), and the others pay for it.
    assert_eq!(t(&npq, "first"), t(&fcfs, "first"));
    assert!(t(&npq, "second") > t(&fcfs, "second"));
}

#[test]
fn the_timeline_of_four_processes_is_a_valid_trace() {
    let r = run(&four("fcfs", true, 0, "fcfs"));
    let t = workload::trace::chrome_trace(&r);
    workload::trace::validate(&t).unwrap();
    let events = t["traceEvents"].as_array().unwrap();
    let slices = |pid: u64| {
        events
            .iter()
            .filter(|e| e["ph"] == "X" && e["pid"].as_u64() == Some(pid))
            .count()
    };
    assert!(slices(0) >= 15, "SM tracks");
    assert!(slices(1) > 0, "copy engine track");
    // Every process's interconnect requests and DRAM bytes over time, as counter tracks.
    for name in ["NoC requests per cycle", "DRAM bytes per cycle"] {
        let counters: std::collections::BTreeSet<u64> = events
            .iter()
            .filter(|e| e["ph"] == "C" && e["name"] == name)
            .map(|e| e["pid"].as_u64().unwrap())
            .collect();
        assert_eq!(counters, (2..6).collect(), "a `{name}` track per process");
    }
    for p in 0..4 {
        assert!(slices(2 + p) > 0, "process {p}'s streams");
    }
    // The validator has teeth: an overlap on one track, a missing field.
    let mut bad = t.clone();
    let evs = bad["traceEvents"].as_array_mut().unwrap();
    let i = evs
        .iter()
        .position(|e| e["ph"] == "X" && e["pid"] == 0)
        .unwrap();
    let mut twin = evs[i].clone();
    twin["ts"] = serde_json::json!(evs[i]["ts"].as_f64().unwrap() + 1e-3);
    evs.insert(i + 1, twin);
    assert!(workload::trace::validate(&bad)
        .unwrap_err()
        .contains("before the previous"));
    let mut bad = t.clone();
    bad["traceEvents"][0].as_object_mut().unwrap().remove("pid");
    assert!(workload::trace::validate(&bad).unwrap_err().contains("pid"));
}

/// Per SM, how many times the kernel it ran TBs of changed.
fn kernel_changes(r: &workload::RunRecord) -> Vec<u32> {
    let mut last: Vec<Option<u32>> = vec![None; r.sm_count as usize];
    let mut changes = vec![0u32; r.sm_count as usize];
    for rec in &r.residency {
        if rec.how.arrives() {
            let (sm, tb) = (rec.sm, rec.tb);
            let l = &mut last[sm.0 as usize];
            if l.is_some_and(|k| k != tb.launch.0) {
                changes[sm.0 as usize] += 1;
            }
            *l = Some(tb.launch.0);
        }
    }
    changes
}

#[test]
fn time_slices_interleave_two_contexts() {
    // Two kernels with more TBs than the GPU holds, so both always have TBs waiting: first
    // come, first served runs them one after the other on each SM; time slices of 10 µs
    // take turns, switching each context's TBs out at the end of its turn.
    let two = |policy: &str| {
        format!(
            r#"
[scheduler]
policy = "{policy}"
time_slice_us = 10.0
mechanism = "baseline"

[[process]]
name = "kmeans"
suite = "kmeans"
size = "large"

[[process]]
name = "blackscholes"
suite = "blackscholes"
size = "large"
arrival_us = 5.0
"#
        )
    };
    let fcfs = run(&two("fcfs"));
    let sliced = run(&two("time_slice"));
    for r in [&fcfs, &sliced] {
        for p in &r.processes {
            let v = p.verdict.as_ref().unwrap();
            assert!(v.verified, "{}: {}", p.name, v.detail);
        }
    }
    let (f, s) = (kernel_changes(&fcfs), kernel_changes(&sliced));
    eprintln!("kernel changes per SM: fcfs {f:?}, time slices {s:?}");
    assert!(f.iter().all(|&c| c <= 1), "fcfs switched kernels: {f:?}");
    assert!(
        s.iter().filter(|&&c| c >= 3).count() > s.len() / 2,
        "time slices did not take turns on most SMs: {s:?}"
    );
    // Turns cost context switches, and the timeline shows every save and restore.
    let saves = sliced
        .preemptions
        .iter()
        .filter(|p| {
            matches!(
                p,
                preempt::Record::Preempted {
                    how: preempt::How::Switched,
                    ..
                }
            )
        })
        .count();
    let restores = sliced
        .preemptions
        .iter()
        .filter(|p| matches!(p, preempt::Record::Restored { .. }))
        .count();
    assert!(saves > 0 && restores > 0);
    // Per kernel, the summaries add up to the whole run's.
    let whole = workload::report::PreemptionSummary::of("baseline", &sliced.preemptions, 1);
    let parts = workload::report::PreemptionSummary::by_kernel("baseline", &sliced);
    assert_eq!(
        parts.len(),
        2,
        "{:?}",
        parts.iter().map(|p| &p.0).collect::<Vec<_>>()
    );
    assert_eq!(
        parts.iter().map(|p| p.1.switched).sum::<u64>(),
        whole.switched
    );
    assert_eq!(
        parts.iter().map(|p| p.1.restores).sum::<u64>(),
        whole.restores
    );
    assert_eq!(
        parts.iter().map(|p| p.1.context.total()).sum::<u64>(),
        whole.context.total()
    );
    let t = workload::trace::chrome_trace(&sliced);
    workload::trace::validate(&t).unwrap();
    let named = |prefix: &str| {
        t["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["ph"] == "X" && e["name"].as_str().unwrap().starts_with(prefix))
            .count()
    };
    assert_eq!(named("save "), saves);
    assert_eq!(named("restore "), restores);
}

/// Two programs launching the same two-wave kernel, the second 2 µs after the first.
fn two_programs(policy: &str, mechanism: &str) -> workload::RunRecord {
    fma_programs(
        policy,
        mechanism,
        &[("a", 0.0, 0, 180, 8), ("b", 2.0, 0, 180, 8)],
    )
}

/// Programs launching `fma_f32` once each: (name, arrival µs, priority, TBs, iterations).
fn fma_programs(
    policy: &str,
    mechanism: &str,
    programs: &[(&str, f64, i32, u32, u32)],
) -> workload::RunRecord {
    let ptx = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/throughput/fma.ptx");
    let program = |&(name, arrival, priority, tbs, iters): &(&str, f64, i32, u32, u32)| {
        format!(
            r#"
[[process]]
name = "{name}"
ptx = "{ptx}"
arrival_us = {arrival}
priority = {priority}
[[process.buffer]]
name = "out"
type = "f32"
len = {len}
init = "fill"
value = 1.0
[[process.command]]
launch = "fma_f32"
grid = [{tbs}]
block = [256]
args = [{{ buffer = "out" }}, {{ u32 = {iters} }}]
[[process.command]]
copy = "out"
direction = "to_host"
[[process.check]]
buffer = "out"
values = [0.0, 0.0, 0.0, 0.0]
"#,
            ptx = ptx.display(),
            len = tbs * 256
        )
    };
    // A policy with parameters is a table; a name is a string.
    let policy_value = if policy.starts_with('{') {
        policy.to_string()
    } else {
        format!("\"{policy}\"")
    };
    let mut text = format!(
        "[limits]\nmax_cycles = 20_000_000\n[scheduler]\npolicy = {policy_value}\nmechanism = \"{mechanism}\"\ncopy_engine = \"fcfs\"\n"
    );
    for p in programs {
        text += &program(p);
    }
    let s = parse("fma.toml", &text, &workload::Disk).unwrap_or_else(|e| panic!("{e}"));
    run_verified(&s, &format!("{policy}/{mechanism}"))
}

#[test]
fn dss_splits_the_sms_between_two_programs_with_every_mechanism() {
    // papers/tanasic-thesis §5.2.4, equal sharing (§5.3.4): 15 SMs and two processes give
    // `b` ⌊15/2⌋ = 7 tokens and `a`, the first to reach the active queue, 8. `a` holds
    // every SM when `b` arrives, so DSS reserves exactly 7 of `a`'s SMs for `b`, each once;
    // FCFS reserves none and `b` waits for `a`'s last TB to be placed.
    let fcfs = two_programs("fcfs", "drain");
    // The cycle `b`'s first TB was placed, and the cycle `a`'s last new TB was.
    let b_first = |r: &workload::RunRecord| {
        let m = r.residency.iter().find(|m| m.tb.launch.0 == 1).unwrap();
        m.cycle
    };
    let a_last = |r: &workload::RunRecord| {
        let m = r.residency.iter().rev();
        m.filter(|m| m.tb.launch.0 == 0 && m.how == gpu::timing::Move::Dispatched)
            .map(|m| m.cycle)
            .next()
            .unwrap()
    };
    for mechanism in ["drain", "baseline", "flush-relaxed"] {
        let dss = two_programs("dss", mechanism);
        let mut reserved: Vec<u32> = dss
            .records
            .iter()
            .filter_map(|r| match *r {
                sched::Record::SmReserved { sm, next, .. } => {
                    assert_eq!(next.0, 1, "{mechanism}: reserved for `b`");
                    Some(sm.0)
                }
                _ => None,
            })
            .collect();
        assert_eq!(reserved.len(), 7, "{mechanism}: SMs reserved for `b`");
        reserved.sort_unstable();
        reserved.dedup();
        assert_eq!(reserved.len(), 7, "{mechanism}: an SM reserved twice");
        // `b` runs while `a` still has TBs to place; under FCFS only after.
        assert!(
            b_first(&dss) < a_last(&dss),
            "{mechanism}: `b` waited for `a`'s last TB"
        );
    }
    assert!(b_first(&fcfs) > a_last(&fcfs));
    assert!(!fcfs
        .records
        .iter()
        .any(|r| matches!(r, sched::Record::SmReserved { .. })));
}

#[test]
fn ppq_with_exclusive_access_keeps_idle_sms_from_lower_priorities() {
    // papers/tanasic-thesis §5.3.3: a high-priority kernel of 4 long TBs leaves 11 of the
    // 15 SMs idle. With shared access a low-priority kernel arriving after it runs there at
    // once; with exclusive access it gets no SM until the high-priority kernel is done.
    let programs = [("urgent", 0.0, 10, 4, 64), ("batch", 1.0, 0, 180, 4)];
    let first_batch_tb = |r: &workload::RunRecord| {
        r.residency
            .iter()
            .find(|m| m.tb.launch.0 == 1)
            .expect("batch ran")
            .cycle
    };
    let urgent_done = |r: &workload::RunRecord| {
        let k = r.kernels.iter().find(|k| k.process == "urgent").unwrap();
        k.finished_fs.unwrap() / r.core_period_fs
    };
    let shared = fma_programs("ppq", "drain", &programs);
    assert!(first_batch_tb(&shared) < urgent_done(&shared));
    let text = r#"{ kind = "ppq", access = "exclusive" }"#;
    let exclusive = fma_programs(text, "drain", &programs);
    assert!(first_batch_tb(&exclusive) >= urgent_done(&exclusive));
}

/// Per launch, the most SMs holding its TBs at once.
fn most_sms_per_launch(r: &workload::RunRecord) -> std::collections::BTreeMap<u32, usize> {
    use std::collections::BTreeMap;
    // (launch, sm) -> resident TBs.
    let mut on: BTreeMap<(u32, u32), i64> = BTreeMap::new();
    let mut most = BTreeMap::new();
    for m in &r.residency {
        let key = (m.tb.launch.0, m.sm.0);
        *on.entry(key).or_default() += if m.how.arrives() { 1 } else { -1 };
        on.retain(|_, n| *n > 0);
        let sms = on.keys().filter(|(l, _)| *l == key.0).count();
        let e = most.entry(key.0).or_insert(0);
        *e = sms.max(*e);
    }
    most
}

#[test]
fn mps_limits_every_client_to_its_share_of_the_sms() {
    // 50% of 15 SMs: each client holds at most ⌈7.5⌉ = 8, even while alone, and the second
    // runs beside the first at once; at 100% (FCFS) the first takes all 15.
    let half = fma_programs(
        r#"{ kind = "mps", percentage = 50.0 }"#,
        "drain",
        &[("a", 0.0, 0, 180, 4), ("b", 2.0, 0, 180, 4)],
    );
    let most = most_sms_per_launch(&half);
    assert_eq!(most[&0], 8, "{most:?}");
    assert!(most[&1] <= 8 && most[&1] >= 7, "{most:?}");
    let a_last = half
        .residency
        .iter()
        .rev()
        .find(|m| m.tb.launch.0 == 0 && m.how == gpu::timing::Move::Dispatched)
        .unwrap()
        .cycle;
    let b_first = half
        .residency
        .iter()
        .find(|m| m.tb.launch.0 == 1)
        .unwrap()
        .cycle;
    assert!(b_first < a_last, "the clients run side by side");
    let full = fma_programs(
        "mps",
        "drain",
        &[("a", 0.0, 0, 180, 4), ("b", 2.0, 0, 180, 4)],
    );
    assert_eq!(most_sms_per_launch(&full)[&0], 15);
}

#[test]
fn dss_gives_priorities_as_tokens() {
    // Priority 2 weighs 3 against priority 0's 1: of 15 SMs, ⌊15 × 3/4⌋ = 11 tokens for
    // `b` and ⌊15/4⌋ = 3 for `a`, plus the SM left over for `a`, the first to become
    // active. `a` holds all 15 when `b` arrives, so DSS reserves 11 for `b` (7 with equal
    // priorities).
    let r = fma_programs(
        "dss",
        "drain",
        &[("a", 0.0, 0, 180, 8), ("b", 2.0, 2, 180, 8)],
    );
    let reserved = r
        .records
        .iter()
        .filter(|r| matches!(r, sched::Record::SmReserved { next, .. } if next.0 == 1))
        .count();
    assert_eq!(reserved, 11);
}

#[test]
fn the_routine_switches_preempt_under_ppq_and_time_slices() {
    // CS-Defer, CTXBack and CTXBack+CS-Defer (papers/ji-ctxback) take TBs away by running
    // routines on the SM: for a high-priority process that arrives while a low-priority one
    // holds every SM (PPQ), and for two contexts taking turns (time slices of 5 µs). Every
    // TB switched out comes back, and both programs verify.
    let ppq = [("batch", 0.0, 0, 180, 8), ("urgent", 2.0, 10, 30, 4)];
    let sliced = [("a", 0.0, 0, 180, 8), ("b", 2.0, 0, 180, 8)];
    for mechanism in ["cs-defer", "ctxback", "ctxback-cs-defer"] {
        for (policy, programs) in [
            ("ppq", &ppq),
            (r#"{ kind = "time-slice", slice_us = 5.0 }"#, &sliced),
        ] {
            let r = fma_programs(policy, mechanism, programs);
            let switched = r
                .preemptions
                .iter()
                .filter(|p| {
                    matches!(
                        p,
                        preempt::Record::Preempted {
                            how: preempt::How::Switched,
                            ..
                        }
                    )
                })
                .count();
            let restored = r
                .preemptions
                .iter()
                .filter(|p| matches!(p, preempt::Record::Restored { .. }))
                .count();
            eprintln!("{policy}/{mechanism}: {switched} TBs switched");
            assert!(switched > 0, "{policy}/{mechanism}: nothing switched");
            assert_eq!(switched, restored, "{policy}/{mechanism}");
        }
    }
}

#[test]
fn mig_keeps_every_process_on_its_own_sms() {
    // One instance per process by default: two of ⌊15/2⌋ = 7 SMs, `a` on SMs 0-6 and `b`
    // on 7-13, SM 14 in neither. `a` is alone for 2 µs and still never leaves its seven,
    // and `b` starts at once on its own while `a` still has TBs to place.
    let programs = [("a", 0.0, 0, 180, 4), ("b", 2.0, 0, 180, 4)];
    let sms_of = |r: &workload::RunRecord, launch: u32| -> std::collections::BTreeSet<u32> {
        r.residency
            .iter()
            .filter(|m| m.tb.launch.0 == launch)
            .map(|m| m.sm.0)
            .collect()
    };
    let two = fma_programs("mig", "drain", &programs);
    assert_eq!(sms_of(&two, 0), (0..7).collect());
    assert_eq!(sms_of(&two, 1), (7..14).collect());
    let a_last = two
        .residency
        .iter()
        .rev()
        .find(|m| m.tb.launch.0 == 0 && m.how == gpu::timing::Move::Dispatched)
        .unwrap()
        .cycle;
    let b_first = two
        .residency
        .iter()
        .find(|m| m.tb.launch.0 == 1)
        .unwrap()
        .cycle;
    assert!(b_first < a_last, "the instances run side by side");
    // Three instances of 5 SMs for two processes: the third instance's SMs stay idle.
    let three = fma_programs(r#"{ kind = "mig", instances = 3 }"#, "drain", &programs);
    assert_eq!(sms_of(&three, 0), (0..5).collect());
    assert_eq!(sms_of(&three, 1), (5..10).collect());
    // One instance is the whole GPU, first come first served: `a` takes all 15 SMs.
    let one = fma_programs(r#"{ kind = "mig", instances = 1 }"#, "drain", &programs);
    assert_eq!(most_sms_per_launch(&one)[&0], 15);
    // Nothing is ever preempted.
    for r in [&two, &three, &one] {
        assert!(r.preemptions.is_empty());
    }
}

/// spmv alone or beside STREAM's vector add (arriving once spmv's kernel runs) under `policy`; returns
/// spmv's kernel's first dispatch and finish (fs).
fn victim_kernel(policy: &str, aggressor: bool) -> (u64, u64) {
    let mut text = format!(
        "[limits]\nmax_cycles = 20_000_000\n[scheduler]\npolicy = {policy}\nmechanism = \"drain\"\ncopy_engine = \"fcfs\"\n[[process]]\nname = \"victim\"\nsuite = \"spmv\"\n"
    );
    if aggressor {
        // STREAM's vector add over 6 MiB, from buffers filled on the device (no copies).
        let ptx = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/stream/stream.ptx");
        let buffer = |name: &str| {
            format!("[[process.buffer]]\nname = \"{name}\"\ntype = \"f32\"\nlen = 524288\ninit = \"fill\"\nvalue = 1.0\n")
        };
        text += &format!(
            "[[process]]\nname = \"aggressor\"\nptx = \"{}\"\narrival_us = 90.0\n{}{}{}",
            ptx.display(),
            buffer("a"),
            buffer("b"),
            buffer("c")
        );
        text += r#"[[process.command]]
launch = "stream_add"
grid = [2048]
block = [256]
args = [{ buffer = "a" }, { buffer = "b" }, { buffer = "c" }, { u32 = 524288 }]
[[process.command]]
copy = "c"
direction = "to_host"
[[process.check]]
buffer = "c"
values = [2.0, 2.0, 2.0, 2.0]
"#;
    }
    let s = parse("mig.toml", &text, &workload::Disk).unwrap_or_else(|e| panic!("{e}"));
    let r = run_verified(&s, policy);
    let k = r.kernels.iter().find(|k| k.process == "victim").unwrap();
    let other = r.kernels.iter().find(|k| k.process == "aggressor");
    if let Some(o) = other {
        // The aggressor's kernels run while the victim's does.
        assert!(
            o.started_fs.unwrap() < k.finished_fs.unwrap(),
            "{policy}: no overlap"
        );
    }
    (k.started_fs.unwrap(), k.finished_fs.unwrap())
}

#[test]
fn mig_instances_own_their_memory_so_a_neighbour_cannot_slow_them() {
    // Real MIG gives each instance its own L2 slices and DRAM channels. Two instances of 7
    // SMs and 3 of the 6 channels each: spmv's kernel takes the same cycles to the
    // femtosecond whether STREAM, memory-bound, runs in the other instance or not.
    let mig = r#"{ kind = "mig", instances = 2 }"#;
    assert_eq!(victim_kernel(mig, false), victim_kernel(mig, true));
    // MPS shares the memory system: the same pair, each process on at most half the SMs,
    // and spmv's kernel is slowed by STREAM's traffic (the test can see interference).
    let mps = r#"{ kind = "mps", percentage = 50.0 }"#;
    let (alone, beside) = (victim_kernel(mps, false), victim_kernel(mps, true));
    assert_eq!(alone.0, beside.0, "the same start");
    assert!(beside.1 > alone.1, "mps: {alone:?} against {beside:?}");
}
