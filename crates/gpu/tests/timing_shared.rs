//! Shared-memory bank conflicts: a warp access whose 32 lanes read 32 distinct words of one
//! bank is served in 32 passes, so a kernel bound by such accesses runs about 32 times longer
//! than the same kernel reading one word per bank.

mod timing_common;

use gpu::timing::TimedStats;
use timing_common::{run_kernel, Engine};

/// 8 warps × `rounds` × 64 shared loads; lane `l` reads word `l × stride_words`.
fn body(stride_words: u32, rounds: u32) -> String {
    let mut b = format!(
        "    mul.lo.u32 %r5, %r1, {};\n    mov.u32 %r6, smem;\n    add.u32 %r5, %r5, %r6;\n    st.shared.u32 [%r5], %r1;\n    bar.sync 0;\n    mov.u32 %r20, 0;\nL:\n",
        stride_words * 4
    );
    for i in 0..64 {
        b += &format!("    ld.shared.u32 %r{}, [%r5];\n", 10 + i % 8);
        if i == 8 {
            b += "    add.u32 %r20, %r20, 1;\n";
        }
        if i == 40 {
            b += &format!("    setp.lt.u32 %p1, %r20, {rounds};\n");
        }
    }
    b += "    @%p1 bra L;\n    mul.wide.u32 %rd5, %r2, 4;\n    add.s64 %rd5, %rd0, %rd5;\n    st.global.u32 [%rd5], %r17;\n";
    b
}

fn run(stride_words: u32) -> TimedStats {
    let threads = 256;
    let (s, out) = run_kernel(
        // The loads' values are dead (only %r17's last one is stored): see the engine.
        Engine::gtx480_unallocated(),
        "    .shared .align 4 .b8 smem[32768];",
        &body(stride_words, 8),
        1,
        threads,
        0,
        u64::from(threads) * 4,
        &[],
    );
    // Every thread reads back the word it stored: its own thread index.
    for (t, c) in out.chunks(4).enumerate() {
        assert_eq!(u32::from_le_bytes(c.try_into().unwrap()), t as u32);
    }
    s.unwrap()
}

#[test]
fn thirty_two_way_conflicts_run_about_thirty_two_times_slower() {
    let free = run(1);
    let conflicted = run(32);
    assert_eq!(free.shared_passes, free.shared_accesses);
    assert_eq!(conflicted.shared_passes, 32 * conflicted.shared_accesses);
    let ratio = conflicted.cycles_to_last_tb as f64 / free.cycles_to_last_tb as f64;
    eprintln!(
        "shared loads: conflict-free {} cycles, 32-way {} cycles, ratio {ratio:.2}",
        free.cycles_to_last_tb, conflicted.cycles_to_last_tb
    );
    assert!((ratio - 32.0).abs() <= 0.25 * 32.0, "ratio {ratio:.2}");
}

/// A shared access through a constant address (every lane the same word: one pass, a
/// broadcast) is priced from its own addresses, not from the LD/ST unit's last ones: after
/// a 32-way conflicted store through a register, the load at `[smem]` still takes one pass.
#[test]
fn a_shared_access_at_a_constant_address_takes_one_pass() {
    let threads = 256;
    let body = "    mul.lo.u32 %r5, %r1, 128;\n    mov.u32 %r6, smem;\n    add.u32 %r5, %r5, %r6;\n    st.shared.u32 [%r5], %r1;\n    bar.sync 0;\n    ld.shared.u32 %r7, [smem];\n    mul.wide.u32 %rd5, %r2, 4;\n    add.s64 %rd5, %rd0, %rd5;\n    st.global.u32 [%rd5], %r7;\n";
    let (s, out) = run_kernel(
        Engine::gtx480_unallocated(),
        "    .shared .align 4 .b8 smem[32768];",
        body,
        1,
        threads,
        0,
        u64::from(threads) * 4,
        &[],
    );
    // Thread 0 stored 0 at `smem`'s first word, which every thread reads back.
    assert!(out.iter().all(|&b| b == 0));
    let s = s.unwrap();
    let warps = u64::from(threads) / 32;
    assert_eq!(s.shared_accesses, 2 * warps);
    assert_eq!(
        s.shared_passes,
        warps * (32 + 1),
        "32 for each store, 1 for each load"
    );
}
