//! Probes see what the machine counts: a [`StallTimeline`] hears every warp scheduler's
//! cycle, the cycles a sleeping SM repeats included, so its counts over a launch equal the
//! launch's own scheduler statistics exactly.

use gpu::config::GpuConfig;
use gpu::memory::DeviceMemory;
use gpu::timing::{
    run_launch, Counters, GridDriver, LaunchId, Machine, SchedulerStats, StallTimeline, TimedGpu,
};
use gpu::{DeviceLimits, KernelArg, LoadedModule};

/// Each thread loads a word, runs a dependent loop on it, and stores the result: memory,
/// scoreboard, pipeline and no-warp stalls, and sleeping SMs while loads are out.
const KERNEL: &str = r#".version 8.0
.target sm_70
.address_size 64
.visible .entry k(.param .u64 data, .param .u32 n)
{
    .reg .pred %p<2>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [data];
    cvta.to.global.u64 %rd1, %rd1;
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %tid.x;
    mov.u32 %r3, %ctaid.x;
    mov.u32 %r4, %ntid.x;
    mad.lo.s32 %r5, %r3, %r4, %r2;
    mul.wide.u32 %rd2, %r5, 4;
    add.s64 %rd3, %rd1, %rd2;
    ld.global.u32 %r6, [%rd3];
    mov.u32 %r7, 0;
L:
    setp.ge.u32 %p1, %r7, %r1;
    @%p1 bra DONE;
    mad.lo.s32 %r6, %r6, %r7, %r5;
    add.u32 %r7, %r7, 1;
    bra L;
DONE:
    st.global.u32 [%rd3], %r6;
    ret;
}
"#;

#[test]
fn a_stall_timeline_counts_exactly_what_the_launch_counts() {
    let timing = TimedGpu::new(GpuConfig::preset("gtx480").expect("preset"));
    let mut mem = DeviceMemory::new();
    let mut module = LoadedModule::load(&mut mem, "k.ptx", KERNEL).expect("loads");
    let (tbs, threads) = (200u32, 128u32);
    let data = mem.alloc(u64::from(tbs * threads) * 4);
    let mut m = Machine::new(timing.gpu.clone(), timing.options.clone(), mem).expect("machine");
    m.attach(Box::new(StallTimeline::new(1)));
    let limits = DeviceLimits {
        num_sms: m.sm_count(),
        ..DeviceLimits::default()
    };
    let k = module.kernel("k").expect("kernel");
    let ctx = module
        .launch_ctx(
            &limits,
            k,
            [tbs, 1, 1],
            [threads, 1, 1],
            0,
            &[KernelArg::U64(data), KernelArg::U32(40)],
            0,
        )
        .expect("launch");
    let timed = module.timed_kernel(k, &timing);
    let stats = run_launch(&mut m, ctx, &timed, &mut |_| {}).expect("runs");
    let timeline = m
        .detach()
        .and_then(|p| p.downcast::<StallTimeline>())
        .expect("the timeline");
    // The launch was submitted after the issue stage of cycle `submitted_at` (its starting
    // snapshot holds that cycle) and its counts end with the cycle its last TB finished.
    let from = stats.submitted_at + 1;
    let to = stats.submitted_at + stats.cycles_to_last_tb;
    let seen = timeline.between(from, to);
    assert_eq!(seen, stats.schedulers);
    // Issues and stalls both occurred. Most of the no-warp and memory stalls are cycles a
    // sleeping SM repeats: with the timeline deaf to them, it counts 722 no-warp and 2,300
    // memory stalls of the launch's 24,386 and 6,798.
    let SchedulerStats {
        issued,
        memory,
        no_warp,
        ..
    } = seen;
    assert!(issued > 0 && memory > 0 && no_warp > 0, "{seen:?}");
    assert_eq!(
        seen.cycles(),
        (to - from + 1) * u64::from(m.sm_count()) * 2,
        "2 schedulers per SM on every cycle"
    );
}

/// Each thread writes its word to shared memory, waits at a barrier, and reads its
/// neighbour's back with a strided (bank-conflicting) index before storing it.
const SHARED_KERNEL: &str = r#".version 8.0
.target sm_70
.address_size 64
.visible .entry s(.param .u64 data)
{
    .reg .b32 %r<10>;
    .reg .b64 %rd<4>;
    .shared .align 4 .b8 buf[2048];
    ld.param.u64 %rd1, [data];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mad.lo.s32 %r4, %r2, %r3, %r1;
    mul.wide.u32 %rd2, %r4, 4;
    add.s64 %rd3, %rd1, %rd2;
    ld.global.u32 %r5, [%rd3];
    mov.u32 %r9, buf;
    shl.b32 %r6, %r1, 2;
    add.u32 %r6, %r9, %r6;
    st.shared.u32 [%r6], %r5;
    bar.sync 0;
    mul.lo.u32 %r7, %r1, 8;
    and.b32 %r7, %r7, 508;
    add.u32 %r7, %r9, %r7;
    ld.shared.u32 %r8, [%r7];
    st.global.u32 [%rd3], %r8;
    ret;
}
"#;

/// The machine's statistics are a probe ([`Counters`]): a second one, attached like any
/// probe, hears everything the statistics are counted from and counts the same figures. A
/// statistic counted anywhere but through the probe hooks would make the two differ.
#[test]
fn the_statistics_are_a_probe_any_probe_can_be() {
    let timing = TimedGpu::new(GpuConfig::preset("gtx480").expect("preset"));
    let mut mem = DeviceMemory::new();
    let mut module = LoadedModule::load(&mut mem, "k.ptx", KERNEL).expect("loads");
    let mut shared = LoadedModule::load(&mut mem, "s.ptx", SHARED_KERNEL).expect("loads");
    let (tbs, threads) = (60u32, 128u32);
    let data = mem.alloc(u64::from(tbs * threads) * 4);
    let mut m = Machine::new(timing.gpu.clone(), timing.options.clone(), mem).expect("machine");
    m.attach(Box::new(Counters::new(
        m.sm_count() as usize,
        timing.gpu.sm.warp_schedulers as usize,
    )));
    let limits = DeviceLimits {
        num_sms: m.sm_count(),
        ..DeviceLimits::default()
    };
    let mut all = Vec::new();
    for (module, name, args) in [
        (
            &mut module,
            "k",
            vec![KernelArg::U64(data), KernelArg::U32(12)],
        ),
        (&mut shared, "s", vec![KernelArg::U64(data)]),
    ] {
        let k = module.kernel(name).expect("kernel");
        let ctx = module
            .launch_ctx(&limits, k, [tbs, 1, 1], [threads, 1, 1], 0, &args, 0)
            .expect("launch");
        let timed = module.timed_kernel(k, &timing);
        all.push(run_launch(&mut m, ctx, &timed, &mut |_| {}).expect("runs"));
    }
    let heard = m
        .detach()
        .and_then(|p| p.downcast::<Counters>())
        .expect("the counters");
    assert_eq!(heard.sms(), m.counters().sms());
    for (i, stats) in all.iter().enumerate() {
        let t = heard.launch(LaunchId(i as u32));
        assert_eq!(t, m.counters().launch(LaunchId(i as u32)));
        assert_eq!(t.warp_instructions, stats.warp_instructions);
        assert_eq!(t.thread_instructions, stats.thread_instructions);
        assert_eq!(t.global_loads, stats.global_loads);
        assert_eq!(t.shared_accesses, stats.shared_accesses);
        assert_eq!(t.shared_passes, stats.shared_passes);
        assert!(t.global_loads > 0 && t.warp_instructions > 0);
    }
    // Every kind of count was exercised: the second kernel's shared accesses conflict.
    assert_eq!(all[0].shared_accesses, 0);
    assert_eq!(all[1].shared_accesses, u64::from(tbs) * 4 * 2);
    assert!(all[1].shared_passes > all[1].shared_accesses);
    let tbs_counted: u64 = heard.sms().iter().map(|s| s.tbs).sum();
    assert_eq!(tbs_counted, 2 * u64::from(tbs));
    let per_launch: u64 = all.iter().map(|s| s.warp_instructions).sum();
    let per_sm: u64 = heard.sms().iter().map(|s| s.warp_instructions).sum();
    assert_eq!(per_sm, per_launch);
    assert!(heard.sms().iter().all(|s| s.active_cycles > 0));
}

/// The machine skips a sleeping SM's cycles (nothing to do, no completion waiting) and its
/// counters tally them: on the 132-SM `h100`, where a small launch leaves most SMs empty
/// and the rest sleeping on loads, every statistic and the final memory are what the
/// machine without shortcuts counts by stepping every SM every cycle.
#[test]
fn skipped_sleeping_cycles_are_counted_as_stepped_ones() {
    let run = |shortcuts: bool| {
        let mut timing = TimedGpu::new(GpuConfig::preset("h100").expect("preset"));
        timing.options.shortcuts = shortcuts;
        let mut mem = DeviceMemory::new();
        let mut module = LoadedModule::load(&mut mem, "k.ptx", KERNEL).expect("loads");
        let (tbs, threads) = (40u32, 128u32);
        let data = mem.alloc(u64::from(tbs * threads) * 4);
        let words: Vec<u8> = (0..tbs * threads).flat_map(u32::to_le_bytes).collect();
        mem.write_bytes(data, &words).expect("in bounds");
        let mut m = Machine::new(timing.gpu.clone(), timing.options.clone(), mem).expect("m");
        let limits = DeviceLimits {
            num_sms: m.sm_count(),
            ..DeviceLimits::default()
        };
        let k = module.kernel("k").expect("kernel");
        let args = [KernelArg::U64(data), KernelArg::U32(30)];
        let ctx = module
            .launch_ctx(&limits, k, [tbs, 1, 1], [threads, 1, 1], 0, &args, 0)
            .expect("launch");
        let timed = module.timed_kernel(k, &timing);
        // Stepped by hand to read the counters mid-run as a sampling injector does
        // (`Machine::counters_now`, which counts the skipped cycles into its copy).
        let mut driver = GridDriver::new(ctx, timed);
        let mut samples = Vec::new();
        let stats = loop {
            m.step(&mut driver).expect("steps");
            if m.cycle().is_multiple_of(97) {
                let c = m.counters_now();
                samples.push((c.sms().to_vec(), c.launch(LaunchId(0))));
            }
            let l = m.launch(driver.launch().expect("submitted"));
            if let Some(s) = l.stats() {
                break s.clone();
            }
        };
        let counters = m.counters().clone();
        let out = m
            .memory()
            .read_bytes(data, u64::from(tbs * threads) * 4)
            .expect("in bounds")
            .to_vec();
        (
            serde_json::to_string(&stats).expect("json"),
            counters,
            out,
            samples,
        )
    };
    let (fast, fast_counters, fast_out, fast_samples) = run(true);
    let (exact, exact_counters, exact_out, exact_samples) = run(false);
    assert!(fast_samples.len() > 10);
    assert!(
        fast_samples == exact_samples,
        "counters read between cycles differ from the exact run's"
    );
    assert!(
        fast_counters.skipped_cycles() > 0,
        "no SM cycle was skipped: the test exercises nothing"
    );
    assert_eq!(exact_counters.skipped_cycles(), 0);
    // (Compared whole, reported briefly: the statistics run to thousands of lines.)
    assert!(fast == exact, "the launch's statistics differ");
    assert!(
        fast_counters.sms() == exact_counters.sms(),
        "the SMs' counts differ"
    );
    assert!(fast_out == exact_out, "the final memory differs");
}
