//! Probes see what the machine counts: a [`StallTimeline`] hears every warp scheduler's
//! cycle, the cycles a sleeping SM repeats included, so its counts over a launch equal the
//! launch's own scheduler statistics exactly.

use gpu::config::GpuConfig;
use gpu::memory::DeviceMemory;
use gpu::timing::{run_launch, Machine, SchedulerStats, StallTimeline, TimedGpu};
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
