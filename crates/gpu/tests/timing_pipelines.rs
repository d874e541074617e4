//! The pipeline organisations of papers/tanasic-thesis §6.3 (`[memory.translation]`'s
//! `pipeline`, `memsys::Pipeline`; issue 26 item 3) without faults: warp disable until
//! commit holds a warp from each memory instruction to its completion, warp disable until
//! the last TLB check to its last page's translation; stall on fault (the baseline) holds
//! nothing. Expected counts come from the kernel's own instructions and the memory system's
//! own statistics, not from the mechanism's counters alone.

mod timing_common;

use gpu::config::GpuConfig;
use gpu::timing::{TimedGpu, TimedStats};
use memsys::Pipeline;
use suite::Size;
use timing_common::{Device, Engine};

const ORGANISATIONS: [Pipeline; 4] = [
    Pipeline::Stall,
    Pipeline::WdCommit,
    Pipeline::WdLastcheck,
    Pipeline::ReplayQueue,
];

/// fault-study (translation on, Table 6.1) with `pipeline`.
fn gpu(pipeline: Pipeline, shortcuts: bool) -> TimedGpu {
    let mut cfg = GpuConfig::preset("fault-study").unwrap();
    cfg.memory.translation.as_mut().unwrap().pipeline = pipeline;
    let mut t = TimedGpu::new(cfg);
    t.options.shortcuts = shortcuts;
    t
}

/// One warp: four independent loads, each from its own 4 KiB page (four walks), summed and
/// stored: `out[tid] = a[tid] + a[tid + 1024] + a[tid + 2048] + a[tid + 3072]`. Five
/// accesses reach the memory system, each one line (one part).
const ILP: &str = r#"
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    ld.global.u32 %r10, [%rd3];
    ld.global.u32 %r11, [%rd3+4096];
    ld.global.u32 %r12, [%rd3+8192];
    ld.global.u32 %r13, [%rd3+12288];
    add.u32 %r10, %r10, %r11;
    add.u32 %r12, %r12, %r13;
    add.u32 %r10, %r10, %r12;
    add.s64 %rd4, %rd0, %rd2;
    st.global.u32 [%rd4], %r10;
"#;
const ACCESSES: u64 = 5;

/// [`ILP`] with the address register overwritten after each load (`%rd3 += 4096`): a WAR
/// hazard on the previous load's source, which the replay queue holds until that load's
/// last TLB check.
const WAR: &str = r#"
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    ld.global.u32 %r10, [%rd3];
    add.s64 %rd3, %rd3, 4096;
    ld.global.u32 %r11, [%rd3];
    add.s64 %rd3, %rd3, 4096;
    ld.global.u32 %r12, [%rd3];
    add.s64 %rd3, %rd3, 4096;
    ld.global.u32 %r13, [%rd3];
    add.u32 %r10, %r10, %r11;
    add.u32 %r12, %r12, %r13;
    add.u32 %r10, %r10, %r12;
    add.s64 %rd4, %rd0, %rd2;
    st.global.u32 [%rd4], %r10;
"#;

fn ilp(pipeline: Pipeline, shortcuts: bool) -> TimedStats {
    run_body(ILP, pipeline, shortcuts)
}

fn run_body(body: &str, pipeline: Pipeline, shortcuts: bool) -> TimedStats {
    let aux: Vec<u8> = (0..4096u32)
        .flat_map(|i| (i * 3 + 1).to_le_bytes())
        .collect();
    // Registers as written (no allocation), so the only WAR hazards are the body's own (an
    // allocator may give a later value a dead source's register).
    let mut timed = gpu(pipeline, shortcuts);
    timed.options.allocate = false;
    let engine = Engine::Timed(Box::new(timed));
    let (s, out) = timing_common::run_kernel(engine, "", body, 1, 32, 32, 128, &aux);
    for t in 0..32u32 {
        let want: u32 = (0..4).map(|k| (t + 1024 * k) * 3 + 1).sum();
        let got = u32::from_le_bytes(out[4 * t as usize..4 * t as usize + 4].try_into().unwrap());
        assert_eq!(got, want, "{pipeline:?}: thread {t}");
    }
    s.expect("timed")
}

#[test]
fn warp_disable_holds_a_warp_until_commit_or_its_last_tlb_check() {
    let [stall, commit, lastcheck, _] = ORGANISATIONS.map(|p| ilp(p, true));
    for (p, s) in ORGANISATIONS.iter().zip([&stall, &commit, &lastcheck]) {
        eprintln!(
            "{p:?}: {} cycles, {} disables, {} disabled cycles, {} loads of mean latency {}, translation {} cycles",
            s.cycles,
            s.frontend.warp_disables,
            s.frontend.disabled_cycles,
            s.global_loads,
            s.mean_load_latency,
            s.memory.translation.as_ref().unwrap().translation_cycles
        );
    }
    assert_eq!(stall.frontend.warp_disables, 0);
    assert_eq!(stall.frontend.disabled_cycles, 0);
    // Every access disables its warp under both warp-disable variants.
    assert_eq!(commit.frontend.warp_disables, ACCESSES);
    assert_eq!(lastcheck.frontend.warp_disables, ACCESSES);
    let load_cycles = |s: &TimedStats| (s.mean_load_latency * s.global_loads as f64).round() as u64;
    assert_eq!(commit.global_loads, 4);
    // WD-commit: the warp waits out every load (and the store's acknowledgement), one
    // after another, so the kernel lasts at least the sum of its load latencies; stall on
    // fault overlaps the four loads (and their four walks).
    assert!(commit.frontend.disabled_cycles > load_cycles(&commit));
    assert!(commit.cycles > load_cycles(&commit));
    assert!(stall.cycles < load_cycles(&stall));
    // WD-lastcheck: each access holds its warp exactly for its translation, which is what
    // the memory system counts as translation cycles (nothing faults).
    let t = lastcheck.memory.translation.as_ref().unwrap();
    assert_eq!(t.accesses, ACCESSES);
    assert_eq!(lastcheck.frontend.disabled_cycles, t.translation_cycles);
    assert!(stall.cycles < lastcheck.cycles, "lastcheck costs time");
    assert!(
        lastcheck.cycles < commit.cycles,
        "lastcheck re-enables earlier"
    );
}

#[test]
fn the_replay_queue_holds_only_overwrites_of_a_memory_instructions_sources() {
    // Without a WAR hazard on a memory instruction's sources nothing waits: stall's cycles.
    let stall = ilp(Pipeline::Stall, true);
    let rq = ilp(Pipeline::ReplayQueue, true);
    assert_eq!(rq.frontend.source_holds, ACCESSES);
    assert_eq!(rq.frontend.warp_disables, 0);
    assert_eq!(rq.cycles, stall.cycles, "no WAR, no cost");
    // Overwriting the address after each load waits for that load's translation (as the
    // warp-disable variants would), but not for its data.
    let [stall, commit, lastcheck, rq] = ORGANISATIONS.map(|p| run_body(WAR, p, true));
    eprintln!(
        "WAR: stall {}, WD-commit {}, WD-lastcheck {}, replay queue {} cycles",
        stall.cycles, commit.cycles, lastcheck.cycles, rq.cycles
    );
    assert_eq!(rq.frontend.source_holds, ACCESSES);
    assert!(rq.cycles > stall.cycles, "the WAR holds cost time");
    assert!(rq.cycles <= lastcheck.cycles);
    assert!(rq.cycles < commit.cycles);
}

#[test]
fn warp_disable_is_exact_under_the_engine_shortcuts() {
    // A disabled warp waits on a completion or a known cycle, which the SM's sleep and the
    // schedulers' memos must honour: every statistic is the same with the shortcuts off.
    for p in ORGANISATIONS.into_iter().chain([Pipeline::OperandLog]) {
        let on = serde_json::to_string(&ilp(p, true)).unwrap();
        let off = serde_json::to_string(&ilp(p, false)).unwrap();
        assert!(on == off, "{p:?}: statistics differ without the shortcuts");
    }
}

/// A suite kernel at `small` on fault-study under `pipeline`: its statistics and final
/// memory (verified).
fn suite_run(name: &str, pipeline: Pipeline) -> (TimedStats, Vec<Vec<u8>>) {
    let k = suite::by_name(name).unwrap_or_else(|| panic!("no suite kernel {name}"));
    let target = k.default_target();
    let file = format!("{name}.{}.ptx", target.name());
    let engine = Engine::Timed(Box::new(gpu(pipeline, true)));
    let mut d = Device::new(&file, k.ptx(target).unwrap(), engine);
    let v = k
        .run(&mut d, Size::Small, 1)
        .unwrap_or_else(|e| panic!("{name} under {pipeline:?}: {e}"));
    assert!(v.passed(), "{name} under {pipeline:?}: {v:?}");
    let last = d.stats.last().expect("a timed launch").clone();
    (last, d.snapshot())
}

#[test]
fn suite_kernels_verify_with_the_same_memory_under_every_organisation() {
    for name in ["hist", "spmv"] {
        let (base, memory) = suite_run(name, Pipeline::Stall);
        for p in [
            Pipeline::WdCommit,
            Pipeline::WdLastcheck,
            Pipeline::ReplayQueue,
            Pipeline::OperandLog,
        ] {
            let (s, m) = suite_run(name, p);
            assert!(
                m == memory,
                "{name} under {p:?}: final memory differs from stall's"
            );
            // (Fewer cycles than stall's can happen: holding warps back changes the order
            // of their accesses, and with it contention, so cycles are not asserted.)
            let (disables, holds) = (s.frontend.warp_disables, s.frontend.source_holds);
            if p == Pipeline::ReplayQueue {
                assert!(disables == 0 && holds > 0, "{name}: {:?}", s.frontend);
            } else if p == Pipeline::OperandLog {
                assert!(disables == 0 && holds == 0, "{name}: {:?}", s.frontend);
                assert!(s.frontend.log_peak_bytes > 0, "{name}: {:?}", s.frontend);
            } else {
                assert!(disables > 0 && holds == 0, "{name} {p:?}: {:?}", s.frontend);
            }
            assert_eq!(base.frontend.warp_disables, 0);
        }
    }
}

/// [`ILP`] for a whole TB of 1024 threads (32 warps, 4 loads each), under the operand log
/// of `log` bytes: its statistics (every result checked).
fn ilp_tb(pipeline: Pipeline, log: u32) -> TimedStats {
    let aux: Vec<u8> = (0..4096u32)
        .flat_map(|i| (i * 3 + 1).to_le_bytes())
        .collect();
    let mut cfg = GpuConfig::preset("fault-study").unwrap();
    let t = cfg.memory.translation.as_mut().unwrap();
    (t.pipeline, t.operand_log_bytes) = (pipeline, log);
    let mut timed = TimedGpu::new(cfg);
    timed.options.allocate = false;
    let engine = Engine::Timed(Box::new(timed));
    let (s, out) = timing_common::run_kernel(engine, "", ILP, 1, 1024, 1024, 4096, &aux);
    for t in 0..1024u32 {
        let want: u32 = (0..4).map(|k| (t + 1024 * k) * 3 + 1).sum();
        let got = u32::from_le_bytes(out[4 * t as usize..4 * t as usize + 4].try_into().unwrap());
        assert_eq!(got, want, "{pipeline:?}: thread {t}");
    }
    s.expect("timed")
}

#[test]
fn the_operand_log_holds_nothing_and_stalls_only_when_full() {
    // Each load takes one 128-byte entry (its address, a 32-bit value per lane) and the
    // store two, from issue to its last TLB check (a 610-cycle miss path for the first
    // touch of a page): 32 warps issuing their loads back to back hold up to 8 KiB.
    let stall = ilp_tb(Pipeline::Stall, 16 * 1024);
    let big = ilp_tb(Pipeline::OperandLog, 32 * 1024);
    let small = ilp_tb(Pipeline::OperandLog, 8 * 1024);
    eprintln!(
        "stall {} cycles; log 32 KiB {} cycles {:?}; 8 KiB {} cycles {:?}",
        stall.cycles, big.cycles, big.frontend, small.cycles, small.frontend
    );
    // Large enough, the log costs nothing: no hold, no disable, stall's cycles.
    assert_eq!(big.frontend.log_full_stalls, 0);
    assert_eq!(big.frontend.source_holds + big.frontend.warp_disables, 0);
    assert_eq!(big.cycles, stall.cycles);
    assert!(
        big.frontend.log_peak_bytes >= 4 * 1024,
        "{:?}",
        big.frontend
    );
    assert!(big.frontend.log_peak_bytes <= 32 * 1024);
    // At 8 KiB it fills: memory instructions wait for entries, and it never overflows.
    // (Here the wait is hidden: the warps wait for their loads' data anyway.)
    assert!(small.frontend.log_full_stalls > 0, "{:?}", small.frontend);
    assert!(small.frontend.log_peak_bytes <= 8 * 1024);
    assert!(small.cycles >= stall.cycles);
    // Nothing faults, so nothing replays.
    assert_eq!(small.frontend.replays + big.frontend.replays, 0);
}
