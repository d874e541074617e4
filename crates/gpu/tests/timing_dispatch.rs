//! The grid driver of a timed launch: a grid many times what the GPU holds at once runs in
//! waves, each SM taking a new TB as soon as one of its own leaves room. The driver
//! remembers an SM it found full and asks it again only once its ledger has changed
//! (`SmLedger::changes`); a driver that did not ask again would leave the later waves
//! undispatched, and the machine idle: a cycle limit far above the run's turns that into a
//! failure instead of a hang.

mod timing_common;

use gpu::config::GpuConfig;
use gpu::timing::{TimedGpu, TimingOptions};
use timing_common::{run_kernel, Engine};

#[test]
fn a_grid_larger_than_the_gpu_runs_in_waves() {
    // Each thread writes its TB's index; TBs do unequal work (TB i loops i % 7 times), so
    // they leave their SMs at different times and the waves interleave.
    let body = r#"
    rem.u32 %r10, %r3, 7;
    mov.u32 %r11, 0;
L:
    setp.ge.u32 %p0, %r11, %r10;
    @%p0 bra DONE;
    add.u32 %r11, %r11, 1;
    bra L;
DONE:
    mul.wide.u32 %rd2, %r2, 4;
    add.u64 %rd3, %rd0, %rd2;
    st.global.u32 [%rd3], %r3;
"#;
    let (grid, block) = (15 * 8 * 6, 64);
    let threads = grid * block;
    let engine = Engine::Timed(Box::new(TimedGpu {
        gpu: GpuConfig::preset("gtx480").unwrap(),
        options: TimingOptions {
            max_cycles: Some(2_000_000),
            ..TimingOptions::default()
        },
    }));
    let (stats, out) = run_kernel(
        engine,
        "",
        body,
        grid,
        block,
        threads,
        u64::from(threads) * 4,
        &[],
    );
    let stats = stats.expect("timed");
    for (t, v) in out.chunks_exact(4).enumerate() {
        let v = u32::from_le_bytes(v.try_into().unwrap());
        assert_eq!(v, t as u32 / block, "thread {t}");
    }
    assert_eq!(stats.tbs, u64::from(grid));
    // The GTX480 has 15 SMs; at most `tbs_per_sm` TBs fit on each at once.
    assert!(
        u64::from(stats.tbs_per_sm) * 15 * 4 <= u64::from(grid),
        "at least four waves ({} TBs per SM)",
        stats.tbs_per_sm
    );
}
