//! SMs stepped on threads (ARCHITECTURE.md, "Parallel stepping"): a four-process scenario,
//! and the same under preemptive priority with context-switching mechanisms, give the same
//! records, statistics and final memory on 1, 2, 3 and 8 threads.

use gpu::config::GpuConfig;
use gpu::timing::TimedGpu;
use preempt::MechanismKind;
use sched::{PolicyKind, PpqAccess};
use workload::{parse, Disk, Setup};

fn run(policy: Option<(PolicyKind, MechanismKind)>, threads: usize) -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios/mix4-npq.toml");
    let text = std::fs::read_to_string(path).expect("the scenario");
    let s = parse(path, &text, &Disk).unwrap_or_else(|e| panic!("{e}"));
    let mut timing = TimedGpu::new(GpuConfig::preset("gtx480").expect("preset"));
    timing.options.threads = threads;
    let mut setup = Setup::for_scenario(&s, timing, s.max_cycles.unwrap_or(1 << 32)).unwrap();
    setup.snapshot = true;
    let preempts = policy.is_some();
    if let Some((p, m)) = policy {
        setup.policy = p;
        setup.mechanism = m;
    }
    let (report, record) = workload::run(&s, &setup, false, 1, &mut |_| {})
        .unwrap_or_else(|e| panic!("{threads} threads: {e}"));
    assert!(
        report.all_verified,
        "{threads} threads: every process verifies"
    );
    assert_eq!(
        !record.preemptions.is_empty(),
        preempts,
        "{threads} threads: preempted under PPQ only"
    );
    format!(
        "{}\n{:?}\n{:?}\n{:?}",
        serde_json::to_string(&record).expect("serializes"),
        record.records,
        record.residency,
        record.memory
    )
}

fn same_on_every_thread_count(policy: Option<(PolicyKind, MechanismKind)>) {
    let one = run(policy, 1);
    for n in [2, 3, 8] {
        assert!(
            run(policy, n) == one,
            "{policy:?}: the run on {n} threads differs from the run on one"
        );
    }
}

#[test]
fn four_processes_run_the_same_on_any_number_of_threads() {
    same_on_every_thread_count(None);
}

#[test]
fn preemption_by_context_switch_is_the_same_on_any_number_of_threads() {
    let ppq = PolicyKind::Ppq {
        access: PpqAccess::default(),
    };
    same_on_every_thread_count(Some((ppq, MechanismKind::Baseline)));
    same_on_every_thread_count(Some((ppq, MechanismKind::CtxBack)));
}
