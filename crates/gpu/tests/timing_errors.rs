//! Errors on the timed GPU: barrier deadlocks, faults and runaway kernels are reported as on
//! the functional core, never as a hang.

mod timing_common;

use timing_common::{kernel, u32_arg, u64_arg, Device, Engine};

fn launch(engine: Engine, body: &str, threads: u32) -> Result<(), String> {
    let mut d = Device::new("e.ptx", &kernel("", body), engine);
    let out = d.alloc(4096);
    d.launch(
        "k",
        [2, 1, 1],
        [threads, 1, 1],
        0,
        &[u64_arg(out), u64_arg(out), u32_arg(0)],
    )
    .map(|_| ())
}

fn both(body: &str, threads: u32) -> (String, String) {
    let f = launch(Engine::Functional, body, threads).unwrap_err();
    let t = launch(Engine::gtx480(), body, threads).unwrap_err();
    (f, t)
}

#[test]
fn barrier_deadlock_is_reported_like_the_functional_core() {
    // Warp 1 exits; warp 0 waits for 64 threads that can never arrive.
    let body = "    setp.ge.u32 %p1, %r1, 32;\n    @%p1 bra DONE;\n    bar.sync 0, 64;\nDONE:\n";
    let (f, t) = both(body, 64);
    assert!(t.contains("deadlocked"), "{t}");
    assert_eq!(f, t);
}

#[test]
fn barriers_complete_as_on_the_functional_core() {
    // Early-exiting warps do not count: warps 0 and 1 meet at a barrier that expects every
    // live warp, after warp 2 exited; bar.red.popc counts the threads with tid < 40.
    let body = "    setp.ge.u32 %p1, %r1, 64;\n    @%p1 bra DONE;\n    setp.lt.u32 %p2, %r1, 40;\n    bar.red.popc.u32 %r10, 0, %p2;\n    mul.wide.u32 %rd5, %r2, 4;\n    add.s64 %rd5, %rd0, %rd5;\n    st.global.u32 [%rd5], %r10;\nDONE:\n";
    let mut outs = Vec::new();
    for e in [Engine::Functional, Engine::gtx480()] {
        let mut d = Device::new("b.ptx", &kernel("", body), e);
        let out = d.alloc(2 * 96 * 4);
        d.launch(
            "k",
            [2, 1, 1],
            [96, 1, 1],
            0,
            &[u64_arg(out), u64_arg(out), u32_arg(0)],
        )
        .unwrap();
        outs.push(d.read(out, 2 * 96 * 4));
    }
    assert_eq!(outs[0], outs[1]);
    assert_eq!(u32::from_le_bytes(outs[1][..4].try_into().unwrap()), 40);
}

#[test]
fn faults_are_reported_like_the_functional_core() {
    let body = "    ld.global.u32 %r10, [%rd0+8192];\n";
    let (f, t) = both(body, 32);
    assert!(t.contains("faulted"), "{t}");
    assert_eq!(f, t);
}

#[test]
fn endless_kernels_stop_at_the_cycle_limit() {
    let body = "L:\n    add.u32 %r10, %r10, 1;\n    bra L;\n";
    let mut e = Engine::gtx480();
    if let Engine::Timed(t) = &mut e {
        t.options.max_cycles = Some(20_000);
    }
    let err = launch(e, body, 32).unwrap_err();
    assert!(err.contains("did not finish within 20000 cycles"), "{err}");
    let mut e = Engine::gtx480();
    if let Engine::Timed(t) = &mut e {
        t.options.instruction_limit = Some(5_000);
    }
    let err = launch(e, body, 32).unwrap_err();
    assert!(err.contains("limit of 5000 warp instructions"), "{err}");
}

#[test]
fn kernels_that_cannot_fit_are_refused() {
    let mut e = Engine::gtx480();
    if let Engine::Timed(t) = &mut e {
        t.options.regs_per_thread = Some(63);
    }
    // 1024 threads × 64 registers exceed the GTX480's 32768.
    let err = launch(e, "", 1024).unwrap_err();
    assert!(err.contains("does not fit"), "{err}");
}

/// Runs the wrapped `body` on a timed gtx480 over `grid` TBs of one warp, with the progress
/// rule of `gpu::limits` set by `stall` (instructions, per resident warp, cycles).
fn launch_grid(body: &str, grid: u32, stall: (u64, u64, u64)) -> Result<(), String> {
    let mut e = Engine::gtx480();
    if let Engine::Timed(t) = &mut e {
        t.options.stall_instructions = stall.0;
        t.options.stall_instructions_per_warp = stall.1;
        t.options.stall_cycles = stall.2;
    }
    let mut d = Device::new("e.ptx", &kernel("", body), e);
    let out = d.alloc(4096);
    d.launch(
        "k",
        [grid, 1, 1],
        [32, 1, 1],
        0,
        &[u64_arg(out), u64_arg(out), u32_arg(0)],
    )
    .map(|_| ())
}

const SPIN: &str = "L:\n    add.u32 %r10, %r10, 1;\n    bra L;\n";
/// About 300 warp instructions and a few thousand cycles per TB.
const FINITE: &str = "    mov.u32 %r5, 0;\nLOOP:\n    add.s32 %r5, %r5, 1;\n    setp.lt.u32 %p1, %r5, 100;\n    @%p1 bra LOOP;\n";

#[test]
fn a_runaway_stops_after_the_same_instructions_whatever_its_grid_size() {
    // 20,000 + 1,024 per resident warp: a gtx480 holds 120 of these one-warp TBs (8 per
    // SM), so grids of 200 and 2,000 TBs both get 20,000 + 1,024 × 120 = 142,880.
    let stall = (20_000, 1_024, u64::MAX);
    for grid in [200, 2_000] {
        let err = launch_grid(SPIN, grid, stall).unwrap_err();
        assert!(
            err.contains("executed 142880 warp instructions without any of its TBs finishing"),
            "{grid} TBs: {err}"
        );
    }
    // Real work keeps finishing TBs: 1,000 TBs execute about 300,000 warp instructions,
    // twice the window, in waves of 120 TBs (36,000) that each finish inside it.
    launch_grid(FINITE, 1_000, stall).unwrap();
}

#[test]
fn a_runaway_stops_after_the_same_cycles_whatever_its_grid_size() {
    let stall = (u64::MAX, 0, 5_000);
    for grid in [200, 2_000] {
        let err = launch_grid(SPIN, grid, stall).unwrap_err();
        assert!(
            err.contains("ran 5000 cycles with TBs resident and none finishing"),
            "{grid} TBs: {err}"
        );
    }
    // 1,000 finite TBs take several times 5,000 cycles in all (about 14,500), but finish
    // TBs throughout (a wave of 120 takes about 1,800).
    let mut d = Device::new("e.ptx", &kernel("", FINITE), {
        let mut e = Engine::gtx480();
        if let Engine::Timed(t) = &mut e {
            t.options.stall_cycles = stall.2;
        }
        e
    });
    let out = d.alloc(4096);
    let stats = d
        .launch(
            "k",
            [1_000, 1, 1],
            [32, 1, 1],
            0,
            &[u64_arg(out), u64_arg(out), u32_arg(0)],
        )
        .unwrap()
        .expect("timed");
    assert!(stats.cycles > 2 * 5_000, "{} cycles", stats.cycles);
}
