//! Squash and replay of faulting accesses (papers/tanasic-thesis §6.2–6.3; issue 26 item
//! 3): under every pipeline organisation but stall on fault, a part of an access that
//! faults leaves the SM's front end, its warp waits for the fault, and the instruction is
//! replayed — exactly the faulted memory instructions, in order, never a committed one —
//! from the operands it read at issue. The expected replay sets come from the thesis's
//! definitions applied to the kernels below by hand, not from the simulator.

mod timing_common;

use gpu::config::GpuConfig;
use gpu::memory::DeviceMemory;
use gpu::timing::{
    run_launch, Interests, Machine, Probe, Replay, ReplayReason, TimedGpu, TimedStats, TimingError,
    WrongReplay,
};
use gpu::{DeviceLimits, KernelArg, LoadedModule};
use kir::inst::{Op, Space};
use memsys::{Pipeline, Populate};

const SQUASHING: [Pipeline; 4] = [
    Pipeline::WdCommit,
    Pipeline::WdLastcheck,
    Pipeline::ReplayQueue,
    Pipeline::OperandLog,
];

/// Records every replay, and the cycles loads came back.
#[derive(Default)]
struct Log {
    replays: Vec<Replay>,
    loads_done: Vec<u64>,
}

impl Probe for Log {
    fn interests(&self) -> Interests {
        Interests::ISSUES.and(Interests::MEMORY)
    }
    fn on_replay(&mut self, r: &Replay) {
        self.replays.push(*r);
    }
    fn on_load_done(&mut self, _: gpu::timing::SmId, _: gpu::timing::LaunchId, _: u64, c: u64) {
        self.loads_done.push(c);
    }
}

/// What a run gave: its statistics (or the error that stopped it), the final bytes of
/// its buffers, its replays, the cycles loads came back, and the PCs of its global loads.
struct Run {
    stats: Result<TimedStats, TimingError>,
    memory: Vec<Vec<u8>>,
    log: Log,
    global_loads: Vec<u32>,
}

const REGION: u64 = 64 * 1024;

/// Runs `body` as kernel `k(out, aux, man)` (registers as written) on fault-study with
/// `pipeline`, one TB of `threads`; `aux` resident on the GPU, `man` (`man_regions`
/// 64 KiB regions) managed with host data except its regions in `resident`; `setup`
/// adjusts the GPU and the options.
fn run(
    body: &str,
    threads: u32,
    pipeline: Pipeline,
    wrong: WrongReplay,
    man_regions: u64,
    resident: &[u64],
    setup: impl Fn(&mut TimedGpu),
) -> Run {
    let mut gpu = GpuConfig::preset("fault-study").unwrap();
    gpu.memory.translation.as_mut().unwrap().pipeline = pipeline;
    let mut timing = TimedGpu::new(gpu);
    timing.options.allocate = false;
    timing.options.wrong_replay = wrong;
    setup(&mut timing);
    let text = format!(
        r#".version 8.0
.target sm_70
.address_size 64
.visible .entry k(.param .u64 out, .param .u64 aux, .param .u64 man)
{{
    .reg .pred %p<4>;
    .reg .b32 %r<32>;
    .reg .b64 %rd<16>;
    ld.param.u64 %rd0, [out];
    ld.param.u64 %rd1, [aux];
    ld.param.u64 %rd5, [man];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 4;
{body}
    ret;
}}
"#
    );
    let mut mem = DeviceMemory::new();
    let mut module = LoadedModule::load(&mut mem, "k.ptx", &text).unwrap();
    let out = mem.alloc(4 * 1024);
    let aux = mem.alloc(64 * 1024);
    let aux_data: Vec<u8> = (0..16 * 1024u32)
        .flat_map(|i| (i * 3 + 1).to_le_bytes())
        .collect();
    mem.write_bytes(aux, &aux_data).unwrap();
    let man_bytes = man_regions * REGION;
    // Aligned to a region, so that its regions are the ones counted here.
    let man = mem.alloc_aligned(man_bytes, REGION);
    let man_data: Vec<u8> = (0..(man_bytes / 4) as u32)
        .flat_map(|i| (i ^ 0x5a5a).to_le_bytes())
        .collect();
    mem.write_bytes(man, &man_data).unwrap();
    let k = module.kernel("k").unwrap();
    let timed = module.timed_kernel(k, &timing);
    let global_loads = timed
        .kernel
        .insts
        .as_slice()
        .iter()
        .enumerate()
        .filter(|(_, i)| {
            matches!(
                i.op,
                Op::Ld {
                    space: Space::Global,
                    ..
                }
            )
        })
        .map(|(pc, _)| pc as u32)
        .collect();
    let mut m = Machine::new(timing.gpu.clone(), timing.options.clone(), mem).unwrap();
    for r in 0..man_regions {
        if !resident.contains(&r) {
            assert!(m
                .hierarchy_mut()
                .manage(man + r * REGION, REGION, Populate::HostData));
        }
    }
    m.attach(Box::new(Log::default()));
    let limits = DeviceLimits {
        num_sms: m.sm_count(),
        ..DeviceLimits::default()
    };
    let ctx = module
        .launch_ctx(
            &limits,
            k,
            [1, 1, 1],
            [threads, 1, 1],
            0,
            &[
                KernelArg::U64(out),
                KernelArg::U64(aux),
                KernelArg::U64(man),
            ],
            0,
        )
        .unwrap();
    let stats = run_launch(&mut m, ctx, &timed, &mut |_| {});
    let log = *m.detach().and_then(|p| p.downcast::<Log>()).unwrap();
    let memory = [(out, 4 * 1024), (aux, 64 * 1024), (man, man_bytes)]
        .iter()
        .map(|&(p, n)| m.memory().read_bytes(p, n).unwrap().to_vec())
        .collect();
    Run {
        stats,
        memory,
        log,
        global_loads,
    }
}

/// §6.2's example on one warp: A, a load from resident memory (it does not fault and
/// passes its last TLB check long before the fault is serviced); B, a load from a managed
/// page (it faults); C, an independent add; D, an add that overwrites B's address
/// register (RAW on replay if B re-read it); E, a load from the next page of B's region
/// through the overwritten register (it faults too if it issues before the fault is
/// serviced); then the sum is stored.
const EXAMPLE: &str = r#"
    add.s64 %rd3, %rd1, %rd2;
    add.s64 %rd6, %rd5, %rd2;
    ld.global.u32 %r10, [%rd3];
    ld.global.u32 %r11, [%rd6];
    add.u32 %r12, %r1, 7;
    add.s64 %rd6, %rd6, 4096;
    ld.global.u32 %r13, [%rd6];
    add.u32 %r10, %r10, %r11;
    add.u32 %r10, %r10, %r12;
    add.u32 %r10, %r10, %r13;
    add.s64 %rd4, %rd0, %rd2;
    st.global.u32 [%rd4], %r10;
"#;

fn example(pipeline: Pipeline, wrong: WrongReplay) -> Run {
    run(EXAMPLE, 32, pipeline, wrong, 1, &[], |_| {})
}

#[test]
fn each_organisation_replays_exactly_the_faulted_instructions_in_order() {
    let stall = example(Pipeline::Stall, WrongReplay::None);
    let base = stall.stats.as_ref().expect("stall runs");
    assert!(stall.log.replays.is_empty());
    assert_eq!(base.frontend.replays, 0);
    let [a, b, e] = stall.global_loads[..] else {
        panic!("three global loads: {:?}", stall.global_loads)
    };
    // Straight-line code: an instruction's sequence number in its warp is its PC.
    for p in SQUASHING {
        let r = example(p, WrongReplay::None);
        let s = r.stats.as_ref().unwrap_or_else(|e| panic!("{p:?}: {e}"));
        assert!(r.memory == stall.memory, "{p:?}: final memory differs");
        let got: Vec<(u32, u64)> = r.log.replays.iter().map(|x| (x.pc, x.seq)).collect();
        // Warp disable: B disabled its warp, so only B was in flight when it faulted.
        // Replay queue: D waits for B's sources until B's last TLB check (after its
        // replay), so E issues once the fault is serviced and does not fault. Operand
        // log: D and E issue before B's fault is detected; E faults too and replays after
        // B. Never A (committed) nor C and D (not memory instructions, committed).
        let want: Vec<(u32, u64)> = match p {
            Pipeline::OperandLog => vec![(b, b.into()), (e, e.into())],
            _ => vec![(b, b.into())],
        };
        assert_eq!(got, want, "{p:?}: replays (A = pc{a})");
        assert!(r
            .log
            .replays
            .iter()
            .all(|x| x.reason == ReplayReason::Fault));
        assert_eq!(s.frontend.replays, 1, "{p:?}: one warp replayed once");
        assert_eq!(s.frontend.replayed_instructions, want.len() as u64);
        let f = s.memory.translation.as_ref().unwrap().faults.unwrap();
        assert_eq!(f.far_faults, 1, "{p:?}: one region");
        // A held or replaying warp waits on events the SM's sleep and the schedulers'
        // memos honour: every statistic is the same without the engine's shortcuts.
        let off = run(EXAMPLE, 32, p, WrongReplay::None, 1, &[], |t| {
            t.options.shortcuts = false
        });
        let off = off.stats.as_ref().unwrap();
        assert!(
            serde_json::to_string(s).unwrap() == serde_json::to_string(off).unwrap(),
            "{p:?}: statistics differ without the shortcuts"
        );
    }
}

/// The error a run must have stopped with.
fn fails(r: Result<TimedStats, TimingError>, what: &str) -> String {
    match r {
        Ok(s) => panic!("{what} must fail the run; it ran {} cycles", s.cycles),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_wrong_replay_fails_the_run() {
    // Reading B's address from the register file at replay reads D's value: caught under
    // the operand log (D ran); the replay queue held D back, so there it reads the same.
    let raw = example(Pipeline::OperandLog, WrongReplay::RegisterFile);
    let e = fails(raw.stats, "a RAW on replay");
    assert!(e.contains("overwritten"), "{e}");
    let held = example(Pipeline::ReplayQueue, WrongReplay::RegisterFile);
    assert!(
        held.stats.is_ok(),
        "the replay queue's hold makes it harmless"
    );
    // Replaying A, committed long before B's fault is serviced, is caught everywhere.
    for p in SQUASHING {
        let r = example(p, WrongReplay::Committed);
        let e = fails(r.stats, "replaying a committed instruction");
        assert!(e.contains("committed"), "{p:?}: {e}");
    }
}

/// Warp 0 loads from a managed page (a fault); warp 1 runs a chain of 16 dependent loads
/// from resident memory.
const TWO_WARPS: &str = r#"
    setp.lt.u32 %p1, %r1, 32;
    @%p1 bra FAULT;
    add.s64 %rd3, %rd1, %rd2;
    mov.u32 %r20, 0;
    mov.u32 %r10, 0;
L:
    ld.global.u32 %r11, [%rd3];
    add.u32 %r10, %r10, %r11;
    and.b32 %r11, %r11, 0;
    cvt.u64.u32 %rd7, %r11;
    add.s64 %rd3, %rd3, %rd7;
    add.s64 %rd3, %rd3, 128;
    add.u32 %r20, %r20, 1;
    setp.lt.u32 %p2, %r20, 16;
    @%p2 bra L;
    bra.uni STORE;
FAULT:
    add.s64 %rd6, %rd5, %rd2;
    ld.global.u32 %r10, [%rd6];
STORE:
    add.s64 %rd4, %rd0, %rd2;
    st.global.u32 [%rd4], %r10;
"#;

#[test]
fn a_faulting_warp_does_not_block_the_other_warps_of_its_sm() {
    // One access slot per SM: stall on fault holds it for the fault's whole service.
    let one_slot = |t: &mut TimedGpu| t.gpu.memory.max_outstanding_accesses = 1;
    let stall = run(
        TWO_WARPS,
        64,
        Pipeline::Stall,
        WrongReplay::None,
        1,
        &[],
        one_slot,
    );
    stall.stats.as_ref().expect("stall runs");
    let clock = GpuConfig::preset("fault-study").unwrap().sm.clock_mhz;
    let transfer = (25.0 * clock) as u64;
    let during = |r: &Run, from: u64, to: u64| {
        r.log
            .loads_done
            .iter()
            .filter(|&&c| c > from && c < to)
            .count()
    };
    // Stall on fault: the faulting access holds the slot until its fault is serviced, so
    // at most one of warp 1's loads (one that took the slot first) comes back before.
    assert!(
        during(&stall, 0, transfer) <= 1,
        "stall: {:?}",
        stall.log.loads_done
    );
    for p in SQUASHING {
        let r = run(TWO_WARPS, 64, p, WrongReplay::None, 1, &[], one_slot);
        r.stats.as_ref().unwrap_or_else(|e| panic!("{p:?}: {e}"));
        assert!(r.memory == stall.memory, "{p:?}: final memory differs");
        let replay = r.log.replays[0].cycle;
        // All 16 of warp 1's loads come back while warp 0's fault is outstanding.
        assert_eq!(
            during(&r, 0, replay),
            16,
            "{p:?}: loads back before the replay at {replay}: {:?}",
            r.log.loads_done
        );
        assert!(replay > transfer, "{p:?}: the replay waits for the fault");
    }
}

/// Eight warps, each thread loading three words 4 KiB apart from the managed buffer (1 KiB
/// apart from its neighbours') and one from resident memory, and storing their sum.
const SPREAD: &str = r#"
    mul.wide.u32 %rd8, %r1, 1024;
    add.s64 %rd6, %rd5, %rd8;
    add.s64 %rd3, %rd1, %rd2;
    ld.global.u32 %r10, [%rd6];
    ld.global.u32 %r11, [%rd6+4096];
    ld.global.u32 %r12, [%rd3];
    add.s64 %rd6, %rd6, 8192;
    ld.global.u32 %r13, [%rd6];
    add.u32 %r10, %r10, %r11;
    add.u32 %r10, %r10, %r12;
    add.u32 %r10, %r10, %r13;
    add.s64 %rd4, %rd0, %rd2;
    st.global.u32 [%rd4], %r10;
"#;

#[test]
fn final_memory_is_bit_exact_with_faults_at_seeded_points() {
    // 256 threads x 1 KiB strides (+ 8 KiB) span five 64 KiB regions. Each seed leaves two
    // of them resident, so the faults fall on different loads, warps and parts.
    let mut sets = Vec::new();
    for seed in 1..=3u64 {
        let mut resident = timing_common::seeded(seed, 5, 2);
        resident.sort_unstable();
        let go = |p| run(SPREAD, 256, p, WrongReplay::None, 5, &resident, |_| {});
        let stall = go(Pipeline::Stall);
        let t = &stall.stats.as_ref().expect("stall runs").memory.translation;
        let f = t.as_ref().unwrap().faults.unwrap();
        assert_eq!(
            f.far_faults, 3,
            "seed {seed}: three managed regions touched"
        );
        for p in SQUASHING {
            let r = go(p);
            let s = r.stats.as_ref().unwrap_or_else(|e| panic!("{p:?}: {e}"));
            assert!(
                r.memory == stall.memory,
                "seed {seed} {p:?}: final memory differs"
            );
            assert!(s.frontend.replayed_instructions > 0, "seed {seed} {p:?}");
            // Every replay is of a load of the managed buffer (never of the resident one).
            let resident_load = r.global_loads[2];
            assert!(
                r.log.replays.iter().all(|x| x.pc != resident_load),
                "seed {seed} {p:?}"
            );
        }
        sets.push(resident);
    }
    sets.dedup();
    assert!(sets.len() > 1, "the seeds pick different points: {sets:?}");
}
