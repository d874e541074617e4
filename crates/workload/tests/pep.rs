//! PEP's prediction in a running system (papers/li-pep §3.3): a high-priority process's
//! `cudaLaunch` reaches the framework when the host calls it, a launch latency before the
//! kernel does, and PEP takes base checkpoints of the low-priority TBs in between; at the
//! request only the incremental checkpoints remain to be saved.

use gpu::config::GpuConfig;
use gpu::timing::TimedGpu;
use preempt::{MechanismKind, PepCase, Record, Technique};
use sched::PolicyKind;
use suite::Size;
use workload::scenario::Process;
use workload::{RunRecord, Setup, System};

fn process(name: &str, kernel: &str, size: Size, priority: i32, arrival_us: f64) -> Process {
    let k = suite::by_name(kernel).expect("a suite kernel");
    Process {
        name: name.to_string(),
        arrival_us,
        priority,
        ..Process::suite(k, size, 1)
    }
}

/// `batch` (priority 0) runs gemm; `urgent` (priority 1) launches pathfinder while it runs,
/// `launch_latency_us` ahead of its kernel, under `policy`.
fn run(mechanism: MechanismKind, launch_latency_us: f64, policy: PolicyKind) -> RunRecord {
    let timing = TimedGpu::new(GpuConfig::preset("gtx480").unwrap());
    let mut host = timing.gpu.host.clone();
    host.launch_latency_us = launch_latency_us;
    let setup = Setup {
        host,
        timing,
        framework: Default::default(),
        policy,
        time_slice_us: 50.0,
        mechanism,
        copy_policy: Default::default(),
        max_cycles: 1 << 26,
        snapshot: false,
        replay: None,
        one_context: false,
    };
    let r = System::new(
        setup,
        &[
            process("batch", "gemm", Size::Large, 0, 0.0),
            process("urgent", "pathfinder", Size::Small, 1, 30.0),
        ],
    )
    .unwrap()
    .run_with(&mut |_| {}, None)
    .unwrap_or_else(|e| panic!("{}: {e}", mechanism.name()));
    for p in &r.processes {
        let v = p.verdict.as_ref().unwrap();
        assert!(
            v.verified,
            "{} with {}: {}",
            p.name,
            mechanism.name(),
            v.detail
        );
    }
    r
}

const PPQ: PolicyKind = PolicyKind::Ppq {
    access: sched::PpqAccess::Shared,
};

/// The urgent program's launches: when each was called and when it arrived, core cycles.
fn urgent_launches(r: &RunRecord) -> Vec<(u64, u64)> {
    r.kernels
        .iter()
        .filter(|k| k.process == "urgent")
        .map(|k| {
            (
                k.called_fs / r.core_period_fs,
                k.arrived_fs.unwrap() / r.core_period_fs,
            )
        })
        .collect()
}

/// Mean cycles from a request to the release of the TBs it switched.
fn mean_switch_latency(r: &RunRecord) -> f64 {
    let l: Vec<u64> = r
        .preemptions
        .iter()
        .filter_map(|p| match p {
            Record::Preempted {
                how: preempt::How::Switched,
                requested,
                released,
                ..
            } => Some(released - requested),
            _ => None,
        })
        .collect();
    assert!(!l.is_empty(), "nothing was switched");
    l.iter().sum::<u64>() as f64 / l.len() as f64
}

#[test]
fn pep_checkpoints_at_the_launch_call_and_saves_less_at_the_request() {
    let mechanism = MechanismKind::Pep {
        predicted_launch_us: 1.0,
    };
    let pep = run(mechanism, 10.0, PPQ);
    let launches = urgent_launches(&pep);
    // Base checkpoints were chosen when the host called a launch, before it arrived.
    let early: Vec<u64> = pep
        .preemptions
        .iter()
        .filter_map(|p| match p {
            Record::Chose {
                cycle,
                technique: Technique::Checkpoint,
                ..
            } => Some(*cycle),
            _ => None,
        })
        .collect();
    assert!(!early.is_empty(), "PEP took no base checkpoint");
    assert!(
        early.iter().all(|&c| launches
            .iter()
            .any(|&(called, arrived)| called <= c && c < arrived)),
        "base checkpoints at {early:?}, launches (called, arrived) {launches:?}"
    );
    let two = pep
        .preemptions
        .iter()
        .filter(|p| {
            matches!(
                p,
                Record::Case {
                    case: PepCase::TwoCheckpoints,
                    ..
                }
            )
        })
        .count();
    assert!(two > 0, "no TB took two checkpoints");
    // With the base written ahead, the request waits only for the incremental checkpoints.
    // With no time between the call and the arrival, the base checkpoints start with the
    // request, and each TB's whole dirty context is saved while it waits.
    let reactive = run(mechanism, 0.0, PPQ);
    let (p, r) = (mean_switch_latency(&pep), mean_switch_latency(&reactive));
    eprintln!(
        "mean switch latency: 10 µs ahead {p:.0} cycles, none ahead {r:.0} cycles; {two} TBs took two checkpoints"
    );
    assert!(p < r, "10 µs ahead {p} against none ahead {r}");
}

/// Under non-preemptive priorities no arrival takes an SM, so the launch call tells PEP of
/// no SM and it pauses no TB for a checkpoint nobody will use.
#[test]
fn pep_prepares_nothing_when_the_policy_never_preempts_on_arrival() {
    let r = run(
        MechanismKind::Pep {
            predicted_launch_us: 1.0,
        },
        10.0,
        PolicyKind::Npq,
    );
    assert!(
        !r.preemptions.iter().any(|p| matches!(
            p,
            Record::Chose {
                technique: Technique::Checkpoint,
                ..
            } | Record::Checkpointed { .. }
        )),
        "PEP checkpointed under NPQ"
    );
}
