//! CTXBack's on-chip scalar register backup (papers/ji-ctxback §III-D) on the timed
//! machine: on an SM with uniform registers the routine pass inserts the backups the
//! analysis keeps, they run as ordinary instructions, and preempted TBs resume bit-exactly
//! through resume routines that copy the backed-up scalar back.

use std::path::Path;

use gpu::config::GpuConfig;
use gpu::timing::{Machine, SmId, TimedGpu};
use kir::inst::{ArithOp, Op};
use preempt::{MechanismKind, Record};
use sched::Framework;
use suite::Rng;
use workload::system::Injector;
use workload::{parse, RunRecord, System};

/// One process: 120 TBs of the Fig. 5 loop (200 iterations) over 30,720 words.
fn scenario(mechanism: &str) -> String {
    let ptx = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/osrb_fig5.ptx");
    format!(
        r#"
[limits]
max_cycles = 50_000_000
[scheduler]
policy = "fcfs"
mechanism = "{mechanism}"

[[process]]
name = "p"
ptx = "{ptx}"
[[process.buffer]]
name = "data"
type = "u32"
len = 30720
init = "random"
[[process.command]]
copy = "data"
[[process.command]]
launch = "fig5"
grid = [120]
block = [256]
args = [{{ buffer = "data" }}, {{ u32 = 200 }}, {{ u32 = 5 }}]
[[process.command]]
sync = true
"#,
        ptx = ptx.display()
    )
}

/// The GTX480 with 63 uniform registers per warp (as NVIDIA Turing and later have).
fn gpu(uniform_registers: u32) -> TimedGpu {
    let mut g = GpuConfig::preset("gtx480").unwrap();
    g.sm.resources.uniform_registers = uniform_registers;
    TimedGpu::new(g)
}

/// Requests at seeded cycles, each for a random SM with TBs.
struct Requests {
    plan: Vec<u64>,
    rng: Rng,
    made: u32,
}

impl Injector for Requests {
    fn before_cycle(&mut self, m: &Machine, fw: &mut Framework) {
        if self.plan.last().is_some_and(|&c| c <= m.cycle()) {
            let busy: Vec<SmId> = m
                .sm_ids()
                .filter(|&sm| m.resident(sm).next().is_some())
                .filter(|&sm| fw.tables().sm(sm).state == sched::SmState::Running)
                .collect();
            if busy.is_empty() {
                return;
            }
            self.plan.pop();
            let sm = busy[self.rng.below(busy.len() as u32) as usize];
            self.made += u32::from(fw.preempt_sm(sm));
        }
    }
}

fn run(mechanism: &str, uniform_registers: u32, requests: Option<&mut Requests>) -> RunRecord {
    let text = scenario(mechanism);
    let s = parse("osrb.toml", &text, &workload::Disk).unwrap_or_else(|e| panic!("{e}"));
    let mut setup = workload::Setup::for_scenario(&s, gpu(uniform_registers), 50_000_000).unwrap();
    setup.snapshot = true;
    System::new(setup, &s.processes)
        .unwrap()
        .run_with(&mut |_| {}, requests.map(|r| r as &mut dyn Injector))
        .unwrap_or_else(|e| panic!("{mechanism}: {e}"))
}

/// Instructions of the fig5 kernel, as the machine times it under `mechanism`, that serve
/// its `or` (the backup copy inserted before an instruction serves it; routine code serves
/// the kernel's last instruction).
fn serving_the_or(mechanism: Option<MechanismKind>, uniform_registers: u32) -> usize {
    let mut mem = gpu::memory::DeviceMemory::new();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/osrb_fig5.ptx");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut module = gpu::LoadedModule::load(&mut mem, "osrb_fig5.ptx", &text).unwrap();
    let mut timing = gpu(uniform_registers);
    timing.options.pass = mechanism.and_then(|m| m.build().kernel_pass());
    let k = module.kernel("fig5").unwrap();
    let timed = module.timed_kernel(k, &timing);
    let origins = timed.origins.expect("allocated");
    let or = timed
        .kernel
        .insts
        .as_slice()
        .iter()
        .position(|i| {
            matches!(
                i.op,
                Op::Arith {
                    op: ArithOp::Or,
                    ..
                }
            )
        })
        .expect("the kernel's `or`");
    origins.iter().filter(|&&o| o == origins[or]).count()
}

#[test]
fn ctxback_backs_up_the_scalar_and_resumes_bit_exactly() {
    // The pass inserts one backup copy (a `mov` into a dead uniform register) before the
    // `or` where the SM has uniform registers, and none where it has none.
    assert_eq!(serving_the_or(None, 63), 1);
    assert_eq!(serving_the_or(Some(MechanismKind::CtxBack), 63), 2);
    assert_eq!(serving_the_or(Some(MechanismKind::CtxBack), 0), 1);
    let reference = run("drain", 63, None);
    assert!(reference.processes[0].verdict.is_some());
    let period = reference.core_period_fs;
    let k = &reference.kernels[0];
    let (a, b) = (
        k.started_fs.unwrap() / period,
        k.finished_fs.unwrap() / period,
    );
    let mut rng = Rng::new(7);
    let mut plan: Vec<u64> = (0..30)
        .map(|_| a + u64::from(rng.below(((b - a) * 7 / 10) as u32)))
        .collect();
    plan.sort_unstable_by(|x, y| y.cmp(x));
    let mut requests = Requests { plan, rng, made: 0 };
    let r = run("ctxback", 63, Some(&mut requests));
    assert!(
        r.memory == reference.memory,
        "memory differs from the uninterrupted run"
    );
    let restored = r
        .preemptions
        .iter()
        .filter(|p| matches!(p, Record::Restored { .. }))
        .count();
    assert!(
        requests.made >= 10 && restored >= 20,
        "{} requests, {restored} TBs resumed",
        requests.made
    );
}
