//! SIMT semantics of the functional core, each on a small hand-written PTX kernel whose result
//! is derived by hand: reconvergence, divergent loops, shuffles, votes, atomics order,
//! barriers, early exit, local and generic memory, runaway detection and determinism.

use gpu::{DevPtr, DeviceLimits, ExecError, Gpu, GpuError, KernelArg};

/// Wraps a body in a kernel `k(.param .u64 out)`. The prologue leaves `%r0` = global thread
/// index (x only), `%r1` = `%tid.x`, `%rd0` = `&out[global index]` (4-byte elements).
fn kernel(body: &str) -> String {
    format!(
        r#".version 8.0
.target sm_70
.address_size 64
.visible .entry k(.param .u64 out)
{{
    .reg .pred %p<8>;
    .reg .b32 %r<32>;
    .reg .b64 %rd<16>;
    .reg .f32 %f<8>;
    .shared .align 4 .b8 smem[1024];
    .local .align 4 .b8 priv[64];
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mad.lo.s32 %r0, %r2, %r3, %r1;
    mul.wide.u32 %rd2, %r0, 4;
    add.s64 %rd0, %rd1, %rd2;
{body}
    ret;
}}
"#
    )
}

/// Runs `body` with `threads` threads per TB and `tbs` TBs; returns `out` as u32s.
fn run(body: &str, tbs: u32, threads: u32) -> Vec<u32> {
    try_run(body, tbs, threads, DeviceLimits::default()).unwrap_or_else(|e| panic!("{e}"))
}

fn try_run(body: &str, tbs: u32, threads: u32, limits: DeviceLimits) -> Result<Vec<u32>, GpuError> {
    let mut gpu = Gpu::with_limits(limits);
    let m = gpu.load_ptx("test.ptx", &kernel(body))?;
    let n = (tbs * threads) as u64;
    // Slack after the per-thread words holds the counters some tests keep there.
    let out = gpu.alloc(n * 4 + 4096);
    gpu.launch(
        m,
        "k",
        [tbs, 1, 1],
        [threads, 1, 1],
        0,
        &[KernelArg::Ptr(out)],
    )?;
    let bytes = gpu.copy_from_device(DevPtr(out.0), n * 4)?;
    Ok(bytes
        .chunks(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect())
}

#[test]
fn nested_divergence_reconverges_at_the_post_dominator() {
    // if (tid & 1) { if (tid & 2) v = 3 else v = 1 } else v = 0;
    // then, after the reconvergence point, store v + 100 * popc(activemask).
    let body = r#"
    and.b32 %r4, %r1, 1;
    setp.eq.u32 %p1, %r4, 0;
    @%p1 bra EVEN;
    and.b32 %r5, %r1, 2;
    setp.eq.u32 %p2, %r5, 0;
    @%p2 bra ONE;
    mov.u32 %r6, 3;
    bra.uni JOIN;
ONE:
    mov.u32 %r6, 1;
    bra.uni JOIN;
EVEN:
    mov.u32 %r6, 0;
JOIN:
    activemask.b32 %r7;
    popc.b32 %r8;
    popc.b32 %r8, %r7;
    mad.lo.s32 %r9, %r8, 100, %r6;
    st.global.u32 [%rd0], %r9;
"#;
    let body = body.replace("    popc.b32 %r8;\n", "");
    let out = run(&body, 1, 64);
    for (t, v) in out.iter().enumerate() {
        let want = match t & 3 {
            1 => 1,
            3 => 3,
            _ => 0,
        } + 3200;
        assert_eq!(*v, want, "thread {t}");
    }
}

#[test]
fn loops_with_divergent_trip_counts_reconverge_after_the_loop() {
    // sum = 0; for (i = 0; i < tid % 7; i++) sum += i + 1; store sum * 1000 + popc(activemask)
    let body = r#"
    rem.u32 %r4, %r1, 7;
    mov.u32 %r5, 0;
    mov.u32 %r6, 0;
LOOP:
    setp.ge.u32 %p1, %r5, %r4;
    @%p1 bra DONE;
    add.s32 %r5, %r5, 1;
    add.s32 %r6, %r6, %r5;
    bra.uni LOOP;
DONE:
    activemask.b32 %r7;
    popc.b32 %r8, %r7;
    mad.lo.s32 %r9, %r6, 1000, %r8;
    st.global.u32 [%rd0], %r9;
"#;
    let out = run(body, 1, 40);
    for (t, v) in out.iter().enumerate() {
        let n = (t % 7) as u32;
        let active = if t < 32 { 32 } else { 8 };
        assert_eq!(*v, n * (n + 1) / 2 * 1000 + active, "thread {t}");
    }
}

#[test]
fn shuffles_follow_the_ptx_lane_rules() {
    // Each mode on value = lane * 10; results packed as four bytes-worth of data in 4 TB runs.
    for (mode, b, c, want) in [
        (
            "down",
            3,
            31,
            (|l: u32| if l + 3 <= 31 { (l + 3) * 10 } else { l * 10 }) as fn(u32) -> u32,
        ),
        (
            "up",
            2,
            0,
            |l: u32| if l >= 2 { (l - 2) * 10 } else { l * 10 },
        ),
        ("bfly", 5, 31, |l: u32| (l ^ 5) * 10),
        ("idx", 7, 31, |_l: u32| 70),
        // Segmented idx: segmask 0x18 (segments of 8 lanes): source = (lane & ~7) | 2.
        ("idx", 2, 0x1807, |l: u32| ((l & !7) | 2) * 10),
    ] {
        let body = format!(
            "    mul.lo.u32 %r4, %r1, 10;\n    shfl.sync.{mode}.b32 %r5, %r4, {b}, {c}, -1;\n    st.global.u32 [%rd0], %r5;\n"
        );
        let out = run(&body, 1, 32);
        for (l, v) in out.iter().enumerate() {
            assert_eq!(*v, want(l as u32), "shfl.{mode} b={b} c={c:#x} lane {l}");
        }
    }
}

#[test]
fn votes_see_only_active_lanes() {
    // Lanes < 20 take a branch; inside it, ballot/any/all over (lane % 3 == 0).
    let body = r#"
    setp.ge.u32 %p1, %r1, 20;
    @%p1 bra SKIP;
    rem.u32 %r4, %r1, 3;
    setp.eq.u32 %p2, %r4, 0;
    vote.sync.ballot.b32 %r5, %p2, -1;
    vote.sync.all.pred %p3, %p2, -1;
    vote.sync.any.pred %p4, %p2, -1;
    selp.u32 %r6, 1, 0, %p3;
    selp.u32 %r7, 2, 0, %p4;
    add.s32 %r6, %r6, %r7;
    st.global.u32 [%rd0], %r5;
    st.global.u32 [%rd0+128], %r6;
SKIP:
"#;
    let out = run(body, 1, 64);
    let ballot: u32 = (0..20).filter(|l| l % 3 == 0).map(|l| 1u32 << l).sum();
    for l in 0..20 {
        assert_eq!(out[l], ballot, "lane {l}");
        assert_eq!(out[32 + l], 2, "any but not all, lane {l}");
    }
}

#[test]
fn atomics_run_in_a_defined_order() {
    // Every thread of 2 TBs x 64 does old = atomicAdd(&out[0] - style counter in smem, 1)
    // on a global counter at out[n]; thread order is TB, then warp, then lane.
    let body = r#"
    ld.param.u64 %rd3, [out];
    cvta.to.global.u64 %rd3, %rd3;
    atom.global.add.u32 %r4, [%rd3+512], 1;
    st.global.u32 [%rd0], %r4;
"#;
    let out = run(body, 2, 64);
    for (t, v) in out.iter().take(128).enumerate() {
        assert_eq!(*v, t as u32, "thread {t}");
    }
}

#[test]
fn barriers_order_shared_memory_between_warps() {
    // smem[tid] = tid * 3; bar.sync 0; out = smem[(tid + 33) % 96]. Without a real barrier,
    // warp 0 would read words that warps 1 and 2 had not written yet.
    let body = r#"
    mul.lo.u32 %r4, %r1, 3;
    mov.u32 %r5, smem;
    shl.b32 %r6, %r1, 2;
    add.s32 %r7, %r5, %r6;
    st.shared.u32 [%r7], %r4;
    bar.sync 0;
    add.s32 %r8, %r1, 33;
    rem.u32 %r8, %r8, 96;
    shl.b32 %r9, %r8, 2;
    add.s32 %r10, %r5, %r9;
    ld.shared.u32 %r11, [%r10];
    st.global.u32 [%rd0], %r11;
"#;
    let out = run(body, 2, 96);
    for (t, v) in out.iter().enumerate() {
        let tid = t as u32 % 96;
        assert_eq!(*v, ((tid + 33) % 96) * 3, "thread {t}");
    }
}

#[test]
fn bar_red_popc_counts_predicates_across_the_tb() {
    let body = r#"
    and.b32 %r4, %r1, 3;
    setp.eq.u32 %p1, %r4, 0;
    bar.red.popc.u32 %r5, 0, %p1;
    st.global.u32 [%rd0], %r5;
"#;
    let out = run(body, 1, 128);
    assert!(out.iter().all(|v| *v == 32), "{out:?}");
}

#[test]
fn exited_warps_do_not_block_a_barrier() {
    // Warp 1 exits early; warps 0 and 2 still meet at the barrier and finish.
    let body = r#"
    shr.u32 %r4, %r1, 5;
    setp.eq.u32 %p1, %r4, 1;
    @%p1 exit;
    bar.sync 0;
    st.global.u32 [%rd0], 7;
"#;
    let out = run(body, 1, 96);
    for (t, v) in out.iter().enumerate() {
        assert_eq!(*v, if (32..64).contains(&t) { 0 } else { 7 }, "thread {t}");
    }
}

#[test]
fn local_memory_is_private_per_thread_and_generic_pointers_reach_it() {
    // priv[i] = tid + i for i in 0..4, through a generic pointer; read back priv[tid % 4]
    // through the local space.
    let body = r#"
    mov.u64 %rd3, priv;
    cvta.local.u64 %rd4, %rd3;
    mov.u32 %r5, 0;
FILL:
    add.s32 %r6, %r1, %r5;
    mul.wide.u32 %rd5, %r5, 4;
    add.s64 %rd6, %rd4, %rd5;
    st.u32 [%rd6], %r6;
    add.s32 %r5, %r5, 1;
    setp.lt.u32 %p1, %r5, 4;
    @%p1 bra FILL;
    and.b32 %r7, %r1, 3;
    mul.wide.u32 %rd7, %r7, 4;
    add.s64 %rd8, %rd3, %rd7;
    ld.local.u32 %r8, [%rd8];
    st.global.u32 [%rd0], %r8;
"#;
    let out = run(body, 1, 64);
    for (t, v) in out.iter().enumerate() {
        assert_eq!(*v, t as u32 + (t as u32 & 3), "thread {t}");
    }
}

#[test]
fn an_endless_loop_hits_the_instruction_limit() {
    let body = "SPIN:\n    bra.uni SPIN;\n";
    let limits = DeviceLimits {
        instruction_limit: Some(10_000),
        ..DeviceLimits::default()
    };
    match try_run(body, 1, 32, limits) {
        Err(GpuError::Exec(ExecError::InstructionLimit { kernel, limit })) => {
            assert_eq!(kernel, "k");
            assert_eq!(limit, 10_000);
        }
        other => panic!("expected the instruction limit, got {other:?}"),
    }
}

#[test]
fn the_instruction_limit_reported_is_the_launchs_not_a_tbs_remainder() {
    // Each TB runs about 3,000 warp instructions: the seventh of sixteen TBs passes the
    // launch's 20,000. The message used to give what the earlier TBs had left of it.
    let body = r#"
    mov.u32 %r5, 0;
LOOP:
    add.s32 %r5, %r5, 1;
    setp.lt.u32 %p1, %r5, 1000;
    @%p1 bra LOOP;
    st.global.u32 [%rd0], %r5;
"#;
    let limits = DeviceLimits {
        instruction_limit: Some(20_000),
        ..DeviceLimits::default()
    };
    match try_run(body, 16, 32, limits) {
        Err(GpuError::Exec(e @ ExecError::InstructionLimit { .. })) => {
            let ExecError::InstructionLimit { limit, .. } = &e else {
                unreachable!()
            };
            assert_eq!(*limit, 20_000);
            assert!(
                e.to_string().contains("limit of 20000 warp instructions"),
                "{e}"
            );
        }
        other => panic!("expected the instruction limit, got {other:?}"),
    }
}

#[test]
fn a_runaway_stops_after_the_same_instructions_whatever_its_grid_size() {
    // The progress rule (`gpu::limits`): the functional core runs one TB at a time, so each
    // TB may run 10,000 + 2^14 per warp = 26,384 warp instructions; a grid of 1 or of 64
    // spinning TBs stops at the first.
    let limits = DeviceLimits {
        stall_instructions: 10_000,
        ..DeviceLimits::default()
    };
    for tbs in [1, 64] {
        match try_run("SPIN:\n    bra.uni SPIN;\n", tbs, 32, limits.clone()) {
            Err(GpuError::Exec(e @ ExecError::NoProgress { .. })) => assert!(
                e.to_string()
                    .contains("executed 26384 warp instructions without any of its TBs finishing"),
                "{e}"
            ),
            other => panic!("{tbs} TBs: expected the progress rule, got {other:?}"),
        }
    }
    // 16 TBs of about 3,000 warp instructions each, 48,000 in all: every TB finishes inside
    // the window, so the launch runs to its end.
    let body = r#"
    mov.u32 %r5, 0;
LOOP:
    add.s32 %r5, %r5, 1;
    setp.lt.u32 %p1, %r5, 1000;
    @%p1 bra LOOP;
    st.global.u32 [%rd0], %r5;
"#;
    try_run(body, 16, 32, limits).expect("finishes");
}

#[test]
fn an_integer_literal_that_does_not_fit_runs_wrapped_to_its_type() {
    // As ptxas takes it (lowering warns): 2^32 + 7 as a .u32 is 7.
    let out = run(
        "    mov.u32 %r5, 4294967303;\n    st.global.u32 [%rd0], %r5;\n",
        1,
        32,
    );
    assert!(out.iter().all(|&v| v == 7), "{out:?}");
}

#[test]
fn misaligned_accesses_fault() {
    let body = "    st.global.u32 [%rd0+2], 1;\n";
    let err = try_run(body, 1, 32, DeviceLimits::default()).unwrap_err();
    assert!(err.to_string().contains("misaligned"), "{err}");
}

#[test]
fn runs_are_deterministic() {
    let suite_like = r#"
    ld.param.u64 %rd3, [out];
    cvta.to.global.u64 %rd3, %rd3;
    rem.u32 %r4, %r1, 5;
LOOP:
    atom.global.add.u32 %r5, [%rd3+1024], %r4;
    sub.s32 %r4, %r4, 1;
    setp.gt.s32 %p1, %r4, 0;
    @%p1 bra LOOP;
    st.global.u32 [%rd0], %r5;
"#;
    let a = run(suite_like, 4, 64);
    let b = run(suite_like, 4, 64);
    assert_eq!(a, b);
}

#[test]
fn an_instruction_after_a_loc_on_the_same_line_runs() {
    // `.loc` has no `;`; the parser once skipped the rest of its line, losing the `add`.
    let body = "    .loc 1 5 3 add.s32 %r4, %r1, 7;\n    st.global.u32 [%rd0], %r4;";
    let out = run(body, 1, 32);
    assert_eq!(out, (7..39).collect::<Vec<u32>>());
}

/// Runs `body` with one warp per TB on the functional core and on the timed gtx480, which
/// must agree; returns `out`.
fn run_both(body: &str, tbs: u32, threads: u32) -> Vec<u32> {
    let functional = run(body, tbs, threads);
    let timing = gpu::timing::TimedGpu::new(gpu::config::GpuConfig::preset("gtx480").unwrap());
    let mut gpu = Gpu::timed(timing).unwrap();
    let m = gpu.load_ptx("test.ptx", &kernel(body)).unwrap();
    let n = u64::from(tbs * threads);
    let out = gpu.alloc(n * 4 + 4096);
    gpu.launch_timed(
        m,
        "k",
        [tbs, 1, 1],
        [threads, 1, 1],
        0,
        &[KernelArg::Ptr(out)],
        &mut |_| {},
    )
    .unwrap();
    let bytes = gpu.copy_from_device(DevPtr(out.0), n * 4).unwrap();
    let timed: Vec<u32> = bytes
        .chunks(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(functional, timed, "the engines disagree");
    functional
}

#[test]
fn redux_reduces_over_the_member_lanes() {
    let one = |op: &str, value: &str| {
        run_both(
            &format!("{value}\n    redux.sync.{op} %r5, %r4, -1;\n    st.global.u32 [%rd0], %r5;"),
            1,
            32,
        )
    };
    let tid = "    mov.u32 %r4, %r1;";
    // 0 + 1 + ... + 31 = 496; the XOR of 0..31 is 0 (every 4 consecutive values cancel).
    assert_eq!(one("add.u32", tid), vec![496; 32]);
    assert_eq!(one("xor.b32", tid), vec![0; 32]);
    // tid - 16 ranges over -16..15.
    let centred = "    sub.s32 %r4, %r1, 16;";
    assert_eq!(one("min.s32", centred), vec![(-16i32) as u32; 32]);
    assert_eq!(one("max.s32", centred), vec![15; 32]);
    // As unsigned, -1 (0xFFFFFFFF, lane 15) is the largest.
    assert_eq!(one("max.u32", centred), vec![u32::MAX; 32]);
    // 1 << (tid % 8): the OR sets the low 8 bits, the AND none.
    let bit = "    and.b32 %r6, %r1, 7;\n    shl.b32 %r4, 1, %r6;";
    assert_eq!(one("or.b32", bit), vec![0xFF; 32]);
    assert_eq!(one("and.b32", bit), vec![0; 32]);
    // Only the odd lanes, naming themselves in the mask: 1 + 3 + ... + 31 = 256.
    let odd = run_both(
        r#"
    and.b32 %r4, %r1, 1;
    setp.eq.u32 %p1, %r4, 0;
    mov.u32 %r5, 7;
    @%p1 bra DONE;
    redux.sync.add.u32 %r5, %r1, 0xaaaaaaaa;
DONE:
    st.global.u32 [%rd0], %r5;"#,
        1,
        32,
    );
    let want: Vec<u32> = (0..32).map(|l| if l % 2 == 1 { 256 } else { 7 }).collect();
    assert_eq!(odd, want);
}

#[test]
fn match_and_elect_name_lanes() {
    // match.any on tid / 8: each lane gets the eight lanes of its group.
    let any = run_both(
        "    shr.u32 %r4, %r1, 3;\n    match.any.sync.b32 %r5, %r4, -1;\n    st.global.u32 [%rd0], %r5;",
        1,
        32,
    );
    let want: Vec<u32> = (0..32).map(|l| 0xFFu32 << (8 * (l / 8))).collect();
    assert_eq!(any, want);
    // match.all: the mask and true when every lane agrees, 0 and false otherwise.
    let all = |value: &str, store: &str| {
        run_both(
            &format!("{value}\n    match.all.sync.b32 %r5|%p2, %r4, -1;\n    selp.u32 %r6, 1, 0, %p2;\n    st.global.u32 [%rd0], {store};"),
            1,
            32,
        )
    };
    assert_eq!(all("    mov.u32 %r4, 9;", "%r5"), vec![u32::MAX; 32]);
    assert_eq!(all("    mov.u32 %r4, 9;", "%r6"), vec![1; 32]);
    assert_eq!(all("    mov.u32 %r4, %r1;", "%r5"), vec![0; 32]);
    assert_eq!(all("    mov.u32 %r4, %r1;", "%r6"), vec![0; 32]);
    // elect: lane 0 of the whole warp; lane 1 among the odd lanes. Stored as 100 * p + d.
    let elect = run_both(
        r#"
    and.b32 %r4, %r1, 1;
    setp.eq.u32 %p1, %r4, 0;
    @%p1 bra EVEN;
    elect.sync %r5|%p2, 0xaaaaaaaa;
    bra.uni JOIN;
EVEN:
    elect.sync %r5|%p2, 0x55555555;
JOIN:
    selp.u32 %r6, 100, 0, %p2;
    add.s32 %r5, %r5, %r6;
    st.global.u32 [%rd0], %r5;"#,
        1,
        32,
    );
    let want: Vec<u32> = (0..32)
        .map(|l| match l {
            0 => 100,
            1 => 101,
            l if l % 2 == 0 => 0,
            _ => 1,
        })
        .collect();
    assert_eq!(elect, want);
}

#[test]
fn trap_stops_the_kernel_naming_the_thread() {
    let body = "    setp.eq.u32 %p1, %r1, 5;\n    @%p1 trap;\n    st.global.u32 [%rd0], %r1;";
    let e = try_run(body, 2, 32, DeviceLimits::default()).unwrap_err();
    let text = e.to_string();
    assert!(
        matches!(e, GpuError::Exec(ExecError::Trap { .. }))
            && text.contains("kernel `k` at pc")
            && text.contains("executed `trap`")
            && text.contains("TB (0, 0, 0) thread (5, 0, 0)")
            && text.contains("test.ptx:"),
        "{text}"
    );
    // A guard that holds in no lane traps nothing.
    let quiet = "    setp.eq.u32 %p1, %r1, 99;\n    @%p1 trap;\n    st.global.u32 [%rd0], %r1;";
    assert_eq!(run_both(quiet, 1, 32), (0..32).collect::<Vec<u32>>());
}

/// The packed 16-bit integer forms (PTX ISA 8.0, sm_90): each half computed on its own, as
/// its 16-bit type; expected values worked out by hand.
#[test]
fn packed_sixteen_bit_integer_arithmetic_works_per_half() {
    let one = |inst: &str, a: u32, b: u32, c: u32| -> u32 {
        let body = format!(
            "    mov.b32 %r4, {a};\n    mov.b32 %r5, {b};\n    mov.b32 %r6, {c};\n    \
             {inst};\n    st.global.u32 [%rd0], %r7;"
        );
        run_both(&body, 1, 32)[0]
    };
    let two = "%r7, %r4, %r5";
    // 0x7fff + 1 overflows its half without carrying into the other; 1 + 0xffff wraps to 0.
    assert_eq!(
        one(&format!("add.u16x2 {two}"), 0x7fff_0001, 0x0001_ffff, 0),
        0x8000_0000
    );
    assert_eq!(
        one(&format!("sub.s16x2 {two}"), 0x7fff_0001, 0x0001_ffff, 0),
        0x7ffe_0002
    );
    // Unsigned and signed minima differ on 0xffff (65535 or -1).
    assert_eq!(
        one(&format!("min.u16x2 {two}"), 0x7fff_0001, 0x0001_ffff, 0),
        0x0001_0001
    );
    assert_eq!(
        one(&format!("min.s16x2 {two}"), 0x7fff_0001, 0x0001_ffff, 0),
        0x0001_ffff
    );
    // `.relu`: max(-32768, -16) = -16 becomes 0; max(5, -2) = 5.
    assert_eq!(
        one(
            &format!("max.relu.s16x2 {two}"),
            0x8000_0005,
            0xfff0_fffe,
            0
        ),
        0x0000_0005
    );
    // Three inputs.
    assert_eq!(
        one(
            "max.u16x2 %r7, %r4, %r5, %r6",
            0x0003_0010,
            0x0005_0002,
            0x0001_0020
        ),
        0x0005_0020
    );
}

/// Half-precision `set`, 16-bit atomics and `rcp.approx.ftz.f64`, with results worked out by
/// hand from the PTX ISA (§9.7.7.1 `set` on `.f16x2`: per-half 1.0 or 0xffff; `rcp.approx.ftz.f64`:
/// the reciprocal of the upper 32 bits, in the upper 32 bits).
#[test]
fn half_precision_set_sixteen_bit_atomics_and_the_fast_f64_reciprocal() {
    let body = r#"
    {
    .reg .b16 %h<8>;
    .reg .f64 %fd<4>;
    .reg .b64 %q<4>;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra ALL;
    mov.b16 %h2, 0;
    mov.b16 %h3, 0x1234;
    atom.global.cas.b16 %h1, [%rd1+64], %h2, %h3;
    mov.b16 %h2, 0x1234;
    mov.b16 %h3, 0x5678;
    atom.global.cas.b16 %h4, [%rd1+64], %h2, %h3;
    mov.b16 %h2, 0x1111;
    atom.global.cas.b16 %h5, [%rd1+66], %h2, %h3;
    cvt.u32.u16 %r10, %h4;
    st.global.u32 [%rd1+68], %r10;
    mov.b32 %r4, 0x42003c00;
    mov.b32 %r5, 0x40004000;
    set.lt.f16x2.f16x2 %r6, %r4, %r5;
    st.global.u32 [%rd1+96], %r6;
    set.lt.u32.f16x2 %r6, %r4, %r5;
    st.global.u32 [%rd1+100], %r6;
    mov.b32 %r4, 0x40403f80;
    set.gt.bf16x2.bf16x2 %r6, %r4, %r5;
    st.global.u32 [%rd1+104], %r6;
    mov.b16 %h2, 0x3c00;
    mov.b16 %h3, 0x4000;
    set.lt.u16.f16 %h6, %h2, %h3;
    cvt.u32.u16 %r6, %h6;
    st.global.u32 [%rd1+108], %r6;
    mov.b64 %q1, 0x4008000000000000;
    mov.b64 %fd1, %q1;
    rcp.approx.ftz.f64 %fd2, %fd1;
    st.global.f64 [%rd1+80], %fd2;
    mov.b64 %q1, 0x3fb999999999999a;
    mov.b64 %fd1, %q1;
    rcp.approx.ftz.f64 %fd2, %fd1;
    st.global.f64 [%rd1+88], %fd2;
ALL:
    bar.sync 0;
    mov.b16 %h6, 0x3e00;
    atom.global.add.noftz.f16 %h7, [%rd1+72], %h6;
    }"#;
    let out = run_both(body, 1, 32);
    // The first CAS swapped 0 for 0x1234, the second 0x1234 for 0x5678; the third compared
    // 0x1111 with 0 and left the upper half 0.
    assert_eq!(out[16], 0x0000_5678);
    assert_eq!(out[17], 0x1234);
    // 32 lanes each add 1.5: 48.0 = 0x5200 in the low half; the upper half untouched.
    assert_eq!(out[18], 0x5200);
    // rcp(3.0) = 0x3fd55555_00000000; rcp(0.1) truncates to exactly 10.0.
    assert_eq!((out[20], out[21]), (0, 0x3fd5_5555));
    assert_eq!((out[22], out[23]), (0, 0x4024_0000));
    // {1.0, 3.0} < {2.0, 2.0}: low half true, high half false.
    assert_eq!(out[24], 0x0000_3c00);
    assert_eq!(out[25], 0x0000_ffff);
    // {1.0, 3.0} > {2.0, 2.0} in bf16: high half true.
    assert_eq!(out[26], 0x3f80_0000);
    assert_eq!(out[27], 0xffff);
}

#[test]
fn carry_chains_add_and_multiply_multiword_integers() {
    // Threads 0-7 each add two 128-bit numbers held in four 32-bit limbs, low limb first,
    // and store the four limbs of the sum at out[4t..4t+3].
    let add = run_both(
        r#"
    setp.ge.u32 %p1, %r1, 8;
    @%p1 bra DONE;
    mov.u32 %r4, -1;
    sub.u32 %r4, %r4, %r1;
    add.u32 %r8, %r1, 1;
    add.cc.u32 %r10, %r4, %r8;
    addc.cc.u32 %r11, -1, 0;
    addc.cc.u32 %r12, -1, 0;
    addc.u32 %r13, %r1, 1;
    mul.wide.u32 %rd3, %r1, 16;
    add.s64 %rd3, %rd1, %rd3;
    st.global.v4.u32 [%rd3], {%r10, %r11, %r12, %r13};
DONE:"#,
        1,
        32,
    );
    for t in 0..8u128 {
        // Limbs [0xFFFFFFFF - t, 0xFFFFFFFF, 0xFFFFFFFF, t].
        let a = (t << 96) | ((1u128 << 96) - 1 - t);
        let b = (1u128 << 96) | (t + 1);
        let sum = a.wrapping_add(b);
        let want: Vec<u32> = (0..4).map(|k| (sum >> (32 * k)) as u32).collect();
        assert_eq!(
            &add[4 * t as usize..4 * t as usize + 4],
            &want[..],
            "thread {t}"
        );
    }
    // 64 × 64 → 128-bit products from 32-bit limbs, schoolbook with mad.lo.cc / madc.hi.
    let mul = run_both(
        r#"
    setp.ge.u32 %p1, %r1, 8;
    @%p1 bra DONE;
    mul.lo.u32 %r20, %r1, 0x1234567;
    mov.u32 %r4, -1;
    sub.u32 %r4, %r4, %r20;
    mov.u32 %r5, -1;
    add.u32 %r6, %r1, 0x76543210;
    mov.u32 %r7, 0xFEDCBA98;
    mul.lo.u32 %r10, %r4, %r6;
    mul.hi.u32 %r21, %r4, %r6;
    mad.lo.cc.u32 %r11, %r5, %r6, %r21;
    madc.hi.u32 %r12, %r5, %r6, 0;
    mad.lo.cc.u32 %r11, %r4, %r7, %r11;
    madc.hi.cc.u32 %r12, %r4, %r7, %r12;
    addc.u32 %r13, 0, 0;
    mad.lo.cc.u32 %r12, %r5, %r7, %r12;
    madc.hi.u32 %r13, %r5, %r7, %r13;
    mul.wide.u32 %rd3, %r1, 16;
    add.s64 %rd3, %rd1, %rd3;
    st.global.v4.u32 [%rd3], {%r10, %r11, %r12, %r13};
DONE:"#,
        1,
        32,
    );
    for t in 0..8u64 {
        let a = u64::MAX - t * 0x1234567;
        let b = 0xFEDC_BA98_7654_3210u64 + t;
        let p = u128::from(a) * u128::from(b);
        let want: Vec<u32> = (0..4).map(|k| (p >> (32 * k)) as u32).collect();
        assert_eq!(
            &mul[4 * t as usize..4 * t as usize + 4],
            &want[..],
            "thread {t}"
        );
    }
}

/// Disjoint groups of lanes may run `redux`, `match` and `vote` at once, each lane naming its
/// own group in the member mask: each result covers that lane's group only.
#[test]
fn sync_instructions_use_each_lanes_own_member_mask() {
    // Group g = tid / 8, mask 0xff << 8g.
    let group = r#"
    shr.u32 %r4, %r1, 3;
    shl.b32 %r5, %r4, 3;
    shl.b32 %r6, 255, %r5;"#;
    let redux = run_both(
        &format!("{group}\n    redux.sync.add.u32 %r7, %r1, %r6;\n    st.global.u32 [%rd0], %r7;"),
        1,
        32,
    );
    // 8g + (8g + 1) + ... + (8g + 7) = 64g + 28.
    let want: Vec<u32> = (0..32).map(|t| 64 * (t / 8) + 28).collect();
    assert_eq!(redux, want);
    let ballot = run_both(
        &format!(
            "{group}\n    and.b32 %r8, %r1, 1;\n    setp.ne.u32 %p1, %r8, 0;\n    vote.sync.ballot.b32 %r7, %p1, %r6;\n    st.global.u32 [%rd0], %r7;"
        ),
        1,
        32,
    );
    let want: Vec<u32> = (0..32).map(|t| 0xaa << (8 * (t / 8))).collect();
    assert_eq!(ballot, want);
    // Lanes of a group holding the same tid % 3.
    let matched = run_both(
        &format!(
            "{group}\n    rem.u32 %r8, %r1, 3;\n    match.any.sync.b32 %r7, %r8, %r6;\n    st.global.u32 [%rd0], %r7;"
        ),
        1,
        32,
    );
    let want: Vec<u32> = (0..32u32)
        .map(|t| {
            (0..32u32)
                .filter(|&k| k / 8 == t / 8 && k % 3 == t % 3)
                .fold(0, |m, k| m | 1 << k)
        })
        .collect();
    assert_eq!(matched, want);
}

/// Predicate logic (`and/or/xor/not.pred`) and bitwise `not.b32`/`not.b64`, on whole warps
/// and on warps whose lanes diverged (half of each warp runs the body): each lane's result is
/// derived from its index by Rust's own operators.
#[test]
fn predicate_logic_and_not_on_whole_and_diverged_warps() {
    let body = r#"
    and.b32 %r4, %r0, 4;
    setp.ne.u32 %p7, %r4, 0;
    mov.u32 %r13, 77;
    @%p7 bra SKIP;
    and.b32 %r4, %r0, 1;
    and.b32 %r5, %r0, 2;
    setp.ne.u32 %p1, %r4, 0;
    setp.ne.u32 %p2, %r5, 0;
    and.pred %p3, %p1, %p2;
    or.pred %p4, %p1, %p2;
    xor.pred %p5, %p1, %p2;
    not.pred %p6, %p1;
    selp.u32 %r6, 1, 0, %p3;
    selp.u32 %r7, 2, 0, %p4;
    selp.u32 %r8, 4, 0, %p5;
    selp.u32 %r9, 8, 0, %p6;
    or.b32 %r10, %r6, %r7;
    or.b32 %r10, %r10, %r8;
    or.b32 %r10, %r10, %r9;
    not.b32 %r11, %r0;
    shl.b32 %r12, %r11, 4;
    or.b32 %r13, %r12, %r10;
    cvt.u64.u32 %rd3, %r0;
    not.b64 %rd4, %rd3;
    shr.u64 %rd5, %rd4, 32;
    cvt.u32.u64 %r14, %rd5;
    xor.b32 %r13, %r13, %r14;
SKIP:
    st.global.u32 [%rd0], %r13;
    "#;
    let whole = body.replace("@%p7 bra SKIP;", "");
    for (text, diverged) in [(whole.as_str(), false), (body, true)] {
        let out = run(text, 3, 64);
        for (gid, &v) in out.iter().enumerate() {
            let gid = gid as u32;
            let want = if diverged && gid & 4 != 0 {
                77
            } else {
                let (p, q) = (gid & 1 != 0, gid & 2 != 0);
                let bits = u32::from(p && q)
                    | u32::from(p || q) << 1
                    | u32::from(p ^ q) << 2
                    | u32::from(!p) << 3;
                // `not.b64` of the zero-extended index has all upper bits set.
                ((!gid) << 4 | bits) ^ u32::MAX
            };
            assert_eq!(v, want, "thread {gid} (diverged: {diverged})");
        }
    }
}

/// `%tid` of a three-dimensional block (5 × 3 × 4: its second warp partial) is each thread's
/// linear index decomposed x fastest (PTX ISA "Special registers: %tid"): thread `i` has
/// x = i mod 5, y = (i / 5) mod 3, z = i / 15.
#[test]
fn tid_decomposes_the_linear_thread_index_x_fastest() {
    // `%r1` is `%tid.x` (the prologue's); each thread stores x | y << 8 | z << 16 at its
    // linear index.
    let body = r#"
    mov.u32 %r4, %tid.y;
    mov.u32 %r5, %tid.z;
    mad.lo.s32 %r6, %r4, 5, %r1;
    mad.lo.s32 %r6, %r5, 15, %r6;
    shl.b32 %r7, %r4, 8;
    or.b32 %r7, %r7, %r1;
    shl.b32 %r8, %r5, 16;
    or.b32 %r7, %r7, %r8;
    mul.wide.u32 %rd3, %r6, 4;
    add.s64 %rd4, %rd1, %rd3;
    st.global.u32 [%rd4], %r7;
"#;
    let mut gpu = Gpu::new();
    let m = gpu.load_ptx("tid.ptx", &kernel(body)).expect("loads");
    let out = gpu.alloc(60 * 4);
    gpu.launch(m, "k", [1, 1, 1], [5, 3, 4], 0, &[KernelArg::Ptr(out)])
        .expect("runs");
    let bytes = gpu.copy_from_device(DevPtr(out.0), 60 * 4).expect("copy");
    for i in 0..60u32 {
        let got = u32::from_le_bytes(bytes[4 * i as usize..][..4].try_into().unwrap());
        let want = (i % 5) | ((i / 5) % 3) << 8 | (i / 15) << 16;
        assert_eq!(got, want, "thread {i}");
    }
}
