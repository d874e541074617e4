//! CKPT's checkpoint places (papers/ji-ctxback §V: "CKPT can always save the context of the
//! instructions with the least live registers"): with `least_live` (the default) each warp
//! is captured at its block's least-live instruction, so its checkpoints hold fewer
//! register bytes than checkpoints taken wherever the warps stand when one is due; both
//! end bit-exact and verify. The pass itself is checked against an independent choice.

use analysis::Liveness;
use gpu::config::GpuConfig;
use gpu::timing::{KernelPass, TimedGpu};
use kir::inst::Op;
use kir::{Id, InstId};
use preempt::ckpt::CkptPass;
use preempt::{MechanismKind, Record};
use suite::Size;
use workload::scenario::Process;
use workload::{RunRecord, Setup, System};

fn run(k: &'static dyn suite::Kernel, least_live: bool) -> RunRecord {
    let timing = TimedGpu::new(GpuConfig::preset("gtx480").unwrap());
    let setup = Setup {
        host: timing.gpu.host.clone(),
        timing,
        framework: Default::default(),
        policy: Default::default(),
        time_slice_us: 50.0,
        mechanism: MechanismKind::Ckpt {
            every: 2,
            least_live,
        },
        copy_policy: Default::default(),
        max_cycles: 1 << 26,
        snapshot: true,
        replay: None,
        one_context: false,
    };
    let process = Process::suite(k, Size::Small, 1);
    let r = System::new(setup, &[process])
        .unwrap()
        .run(&mut |_| {})
        .unwrap_or_else(|e| panic!("{}: {e}", k.name()));
    assert!(r.processes[0].verdict.as_ref().unwrap().verified);
    r
}

/// (checkpoints, register bytes) of a run.
fn checkpoints(r: &RunRecord) -> (u64, u64) {
    r.preemptions.iter().fold((0, 0), |(n, b), rec| match rec {
        Record::Checkpointed { bytes, .. } => (n + 1, b + bytes.registers),
        _ => (n, b),
    })
}

#[test]
fn checkpoints_at_the_least_live_places_hold_fewer_registers() {
    // kmeans's blocks are entered through their marks: there the checkpoint falls due with
    // the warp already at its place (StopAt::AtPoint); running on to the next place instead
    // made its checkpoints larger than those taken anywhere (2,074 bytes against 1,869).
    for name in ["spmv", "dgemv", "kmeans"] {
        let k = suite::by_name(name).unwrap();
        let (least, anywhere) = (run(k, true), run(k, false));
        assert_eq!(least.memory, anywhere.memory, "{name}");
        let ((n1, b1), (n2, b2)) = (checkpoints(&least), checkpoints(&anywhere));
        assert!(n1 > 0 && n2 > 0, "{name}: {n1} and {n2} checkpoints");
        let (m1, m2) = (b1 as f64 / n1 as f64, b2 as f64 / n2 as f64);
        eprintln!("{name}: {n1} checkpoints of {m1:.0} register bytes at the least-live places, {n2} of {m2:.0} anywhere");
        assert!(m1 < m2, "{name}: {m1} against {m2}");
    }
}

/// The hand-written loop of `ckpt_places.ptx`: a checkpoint falls due as a warp enters the
/// body, where every loop-carried value is live; the body's least-live instruction is in
/// its middle. At the least-live places every checkpoint holds the same few registers
/// (each warp halts there); taken where the warps stand, the checkpoints hold the body's
/// entry set, more than twice as many.
#[test]
fn a_checkpoint_due_at_a_block_s_entry_is_taken_at_its_least_live_instruction() {
    let (least, anywhere) = (run_places("places", true), run_places("places", false));
    let (l, a) = (
        checkpoint_registers(&least),
        checkpoint_registers(&anywhere),
    );
    assert!(!l.is_empty() && !a.is_empty());
    let most = *l.iter().max().unwrap();
    let mean = a.iter().sum::<u64>() as f64 / a.len() as f64;
    assert!(
        (most as f64) * 2.0 < mean,
        "least-live at most {most}, anywhere {mean} on average"
    );
}

/// Register bytes of each checkpoint of a run.
fn checkpoint_registers(r: &RunRecord) -> Vec<u64> {
    r.preemptions
        .iter()
        .filter_map(|rec| match rec {
            Record::Checkpointed { bytes, .. } => Some(bytes.registers),
            _ => None,
        })
        .collect()
}

/// `entry` of `ckpt_places.ptx`, 16 TBs of two warps and 40 iterations, under CKPT at every
/// second entry of a block; both placements end with the same memory.
fn run_places(entry: &str, least_live: bool) -> RunRecord {
    let ptx = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ckpt_places.ptx");
    let text = |least_live: bool| {
        format!(
            r#"
[limits]
max_cycles = 50_000_000
[scheduler]
mechanism = {{ kind = "ckpt", every = 2, least_live = {least_live} }}
[[process]]
name = "p"
ptx = "{ptx}"
[[process.buffer]]
name = "out"
type = "u32"
len = 1024
init = "zero"
[[process.command]]
launch = "{entry}"
grid = [16]
block = [64]
args = [{{ buffer = "out" }}, {{ u32 = 40 }}]
[[process.command]]
sync = true
"#,
            ptx = ptx.display()
        )
    };
    let run = |least_live: bool| {
        let s = workload::parse("ckpt.toml", &text(least_live), &workload::Disk).unwrap();
        let mut setup = Setup::for_scenario(
            &s,
            TimedGpu::new(GpuConfig::preset("gtx480").unwrap()),
            1 << 26,
        )
        .unwrap();
        setup.snapshot = true;
        System::new(setup, &s.processes)
            .unwrap()
            .run(&mut |_| {})
            .unwrap()
    };
    let r = run(least_live);
    let other = run(!least_live);
    assert_eq!(r.memory, other.memory, "{entry}");
    r
}

/// Every reachable block of every suite kernel gets one `pp`, just before the instruction
/// with the fewest live-in registers (ties: the smaller divergent set, then the first),
/// chosen here from the liveness of
/// the kernel the pass was given; the pass inserts nothing else.
#[test]
fn the_pass_marks_each_block_s_least_live_instruction() {
    let sm = GpuConfig::preset("gtx480").unwrap().sm.resources;
    for k in suite::all() {
        let text = k.ptx(k.default_target()).unwrap();
        let m = kir::lower::lower_module(&ptx::parse(text).unwrap(), k.name()).unwrap();
        for kernel in m.kernels.values() {
            let mut lv = Liveness::default();
            lv.compute(kernel);
            let (out, served) = CkptPass.run(kernel, &sm).expect("the pass applies");
            let pps: Vec<usize> = out
                .insts
                .ids()
                .filter(|&pc| matches!(out.insts[pc].op, Op::Pp { .. }))
                .map(|pc| pc.index())
                .collect();
            let mut want = Vec::new();
            for (b, block) in kernel.cfg.blocks.iter() {
                if b.index() != 0 && kernel.cfg.idom[b.index()].is_none() {
                    continue;
                }
                let pcs = (block.start.index()..block.end.index()).filter(|&pc| {
                    let i = &kernel.insts[InstId::new(pc)];
                    !(matches!(i.op, Op::Exit) && i.guard.is_none())
                });
                let size = |pc: usize| {
                    let pc = InstId::new(pc);
                    (lv.live_in(pc).len(), lv.divergent_live(pc).len())
                };
                if let Some(fewest) = pcs.clone().map(size).min() {
                    want.push(pcs.into_iter().find(|&pc| size(pc) == fewest).unwrap());
                }
            }
            want.sort_unstable();
            assert_eq!(
                out.insts.len(),
                kernel.insts.len() + want.len(),
                "{}",
                kernel.name
            );
            // Each pp serves (sits just before) the instruction chosen for its block.
            let got: Vec<usize> = pps.iter().map(|&pc| served[pc].index()).collect();
            assert_eq!(got, want, "{}", kernel.name);
            for &pc in &pps {
                assert_eq!(served[pc + 1], served[pc], "{}: pp{pc}", kernel.name);
            }
        }
    }
}
