//! Suite kernels on the timed GTX480 (the A100 for the tensor-core kernels, which the
//! GTX480 cannot run): every output verifies against the CPU reference and
//! the final device memory is bit-identical to the functional run's; two timed runs give the
//! same statistics, byte for byte.

mod timing_common;

use gpu::config::{GpuConfig, SchedulerPolicy};
use gpu::timing::TimedGpu;
use suite::Size;
use timing_common::{Device, Engine};

fn run(name: &str, engine: Engine) -> Device {
    let k = suite::by_name(name).unwrap_or_else(|| panic!("no suite kernel {name}"));
    let target = k.default_target();
    let file = format!("{name}.{}.ptx", target.name());
    let mut d = Device::new(&file, k.ptx(target).unwrap(), engine);
    let v = k
        .run(&mut d, Size::Small, 1)
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    assert!(v.passed(), "{name}: {v:?}");
    d
}

fn with_policy(policy: SchedulerPolicy) -> Engine {
    let mut e = Engine::gtx480();
    if let Engine::Timed(t) = &mut e {
        t.gpu.sm.scheduler = policy;
    }
    e
}

/// Runs `name` functionally and timed; checks the outputs and the final memory.
fn check(name: &str, engine: Engine) {
    let f = run(name, Engine::Functional);
    let t = run(name, engine);
    assert!(
        f.snapshot() == t.snapshot(),
        "{name}: timed memory differs from functional"
    );
    let cycles: u64 = t.stats.iter().map(|s| s.cycles).sum();
    let insts: u64 = t.stats.iter().map(|s| s.warp_instructions).sum();
    let s = &t.stats[0];
    eprintln!(
        "{name}: {} launch(es), {cycles} cycles, {insts} warp insts, IPC {:.2}; first launch: {} TBs/SM, mean load latency {:.0}, stalls {:?}",
        t.stats.len(),
        insts as f64 / cycles as f64,
        s.tbs_per_sm,
        s.mean_load_latency,
        s.schedulers
    );
    for s in &t.stats {
        for (i, sm) in s.sms.iter().enumerate() {
            for sc in &sm.schedulers {
                assert_eq!(
                    sc.cycles(),
                    s.cycles_to_last_tb,
                    "{name} sm{i}: every cycle after the launch's arrival is an issue or one stall"
                );
            }
        }
    }
}

/// Every suite kernel (none of them has a result that depends on the order of atomics, so
/// the timed order must reproduce the functional bytes).
#[test]
fn timed_runs_verify_and_match_functional_memory() {
    let mut bad = Vec::new();
    for k in suite::all() {
        let name = k.name();
        let engine = Engine::for_kernel(*k);
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(name, engine))).is_err() {
            bad.push(name);
        }
    }
    assert!(bad.is_empty(), "failed: {bad:?}");
}

#[test]
fn gto_and_two_level_schedulers_run_the_suite_correctly() {
    for policy in [SchedulerPolicy::Gto, SchedulerPolicy::TwoLevel] {
        for name in ["reduce", "scan", "bfs", "hist", "mandel", "gemm"] {
            check(name, with_policy(policy));
        }
    }
}

#[test]
fn timed_runs_are_deterministic() {
    for name in ["hist", "bfs"] {
        let a = run(name, Engine::gtx480());
        let b = run(name, Engine::gtx480());
        let ja = serde_json::to_string(&a.stats).unwrap();
        let jb = serde_json::to_string(&b.stats).unwrap();
        assert_eq!(ja, jb, "{name}: statistics differ between identical runs");
    }
}

/// `fault-study` (papers/tanasic-thesis Table 6.1's TLBs), or for the tensor-core kernels the
/// A100 with its translation switched on.
fn translated(k: &dyn suite::Kernel) -> Engine {
    let preset = if k.needs_tensor_cores() {
        "a100"
    } else {
        "fault-study"
    };
    let mut cfg = GpuConfig::preset(preset).unwrap();
    cfg.memory.translation.as_mut().unwrap().enabled = true;
    Engine::Timed(Box::new(TimedGpu::new(cfg)))
}

/// With address translation on, every suite kernel still verifies, matches the functional
/// memory and accounts for every cycle; every launch that touched memory was translated;
/// and two runs give the same statistics.
#[test]
fn translated_runs_verify_and_match_functional_memory() {
    let mut bad = Vec::new();
    for k in suite::all() {
        let name = k.name();
        let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            check(name, translated(*k));
            let t = run(name, translated(*k));
            let walks: u64 = t
                .stats
                .iter()
                .map(|s| s.memory.translation.as_ref().expect("translation on").walks)
                .sum();
            assert!(walks > 0, "{name}: no page was walked");
        }));
        if ok.is_err() {
            bad.push(name);
        }
    }
    assert!(bad.is_empty(), "failed: {bad:?}");
    for name in ["hist", "bfs"] {
        let k = suite::by_name(name).unwrap();
        let a = run(name, translated(k));
        let b = run(name, translated(k));
        assert_eq!(
            serde_json::to_string(&a.stats).unwrap(),
            serde_json::to_string(&b.stats).unwrap(),
            "{name}: translated statistics differ between identical runs"
        );
    }
}
