//! The front end and the operand collector inside the whole timed SM: a loop larger than the
//! instruction cache misses on every iteration while one that fits misses once per line, a
//! warp issues no faster than its instruction buffer is refilled, and operands that share a
//! register bank delay a dependent chain by one cycle per instruction.

mod timing_common;

use gpu::config::GpuConfig;
use gpu::timing::{TimedGpu, TimedStats};
use timing_common::{dependent_chain, run_kernel, Engine};

/// `rounds` iterations of a loop of `adds` independent adds (plus three loop-control
/// instructions), one warp.
fn looped(adds: u32, rounds: u32) -> TimedStats {
    let mut b = format!("    mov.u32 %r20, 0;\n    mov.u32 %r21, {rounds};\nL:\n");
    for i in 0..adds {
        b += &format!("    add.u32 %r{0}, %r{0}, 1;\n", 30 + i % 16);
    }
    b += "    add.u32 %r20, %r20, 1;\n    setp.lt.u32 %p1, %r20, %r21;\n    @%p1 bra L;\n";
    b += "    st.global.u32 [%rd0], %r30;\n";
    let (s, out) = run_kernel(Engine::gtx480(), "", &b, 1, 32, 0, 4, &[]);
    // r30 gets one add per 16 of each iteration.
    let per_round = adds.div_ceil(16);
    assert_eq!(
        u32::from_le_bytes(out[..4].try_into().unwrap()),
        rounds * per_round
    );
    s.unwrap()
}

#[test]
fn a_loop_larger_than_the_icache_misses_every_iteration() {
    let fetch = GpuConfig::preset("gtx480").unwrap().pipeline.fetch;
    let lines = |insts: u32| (insts * fetch.inst_bytes).div_ceil(fetch.icache_line_bytes);
    let rounds = 20;
    // 100 adds: 824 bytes of loop, well inside the 2 KB cache.
    let small = looped(100, rounds);
    // 400 adds: 3,224 bytes, larger than the cache: LRU evicts every line before its reuse.
    let big = looped(400, rounds);
    eprintln!(
        "small loop: {:?}, {} cycles; big loop: {:?}, {} cycles",
        small.frontend, small.cycles, big.frontend, big.cycles
    );
    let (small_lines, big_lines) = (lines(103), lines(403));
    assert!(
        small.frontend.icache_misses <= u64::from(small_lines) + 4,
        "{:?}",
        small.frontend
    );
    assert!(
        big.frontend.icache_misses >= u64::from(rounds * (big_lines - 1)),
        "{:?}",
        big.frontend
    );
    // Every miss costs its latency on the critical path of a single warp.
    let per_inst = |s: &TimedStats| s.cycles as f64 / s.warp_instructions as f64;
    assert!(per_inst(&big) > per_inst(&small) + 1.0);
    assert!(big.schedulers.fetch > 0);
}

#[test]
fn a_single_warp_issues_no_faster_than_its_buffer_refills() {
    // Independent adds from one warp: without the front end it would issue one per cycle.
    // A fetch brings `ibuffer_entries` instructions and starts the cycle after the buffer
    // empties, so a warp issues that many per (entries + fetch latency) cycles at best.
    let fetch = GpuConfig::preset("gtx480").unwrap().pipeline.fetch;
    let s = looped(96, 200);
    let per_fetch = s.warp_instructions as f64 / s.frontend.fetches as f64;
    assert!(
        (per_fetch - f64::from(fetch.ibuffer_entries)).abs() < 0.2,
        "{per_fetch} instructions per fetch"
    );
    let ipc = s.warp_instructions as f64 / s.cycles as f64;
    let bound =
        f64::from(fetch.ibuffer_entries) / f64::from(fetch.ibuffer_entries + fetch.hit_latency);
    eprintln!(
        "one warp: IPC {ipc:.3}, front-end bound {bound:.3}, {:?}",
        s.frontend
    );
    assert!(
        ipc <= bound + 0.01,
        "IPC {ipc} above the front-end bound {bound}"
    );
    // Cold misses and the loop's own dependences cost the rest.
    assert!(
        ipc >= 0.9 * bound,
        "IPC {ipc} well below the front-end bound {bound}"
    );
}

/// A chain of dependent adds `r10 += r11`, one warp, on a GPU with `banks` register banks.
fn chain(banks: u32, rounds: u32) -> TimedStats {
    let mut config = GpuConfig::preset("gtx480").unwrap();
    config.pipeline.register_banks = banks;
    let engine = Engine::Timed(Box::new(TimedGpu::new(config)));
    let b = dependent_chain(rounds, "%r11");
    let (s, out) = run_kernel(engine, "", &b, 1, 32, 0, 4, &[]);
    assert_eq!(
        u32::from_le_bytes(out[..4].try_into().unwrap()),
        32 * rounds
    );
    s.unwrap()
}

#[test]
fn operands_in_one_bank_cost_a_cycle_each() {
    let per_add = |banks: u32| {
        let (a, b) = (chain(banks, 10), chain(banks, 30));
        (b.cycles - a.cycles) as f64 / (32.0 * 20.0)
    };
    let latency = f64::from(gpu::timing::PipelineSpec::default().alu.latency);
    // With one bank, every add reads r10 and r11 through the same port: one cycle more.
    let (many, one) = (per_add(64), per_add(1));
    eprintln!("dependent adds: {many:.3} cycles each with 64 banks, {one:.3} with 1");
    assert!((many - latency).abs() <= 0.05 * latency, "{many}");
    assert!((one - (latency + 1.0)).abs() <= 0.05 * latency, "{one}");
    let s = chain(1, 10);
    assert!(s.frontend.operand_conflict_cycles >= 32 * 10);
}
