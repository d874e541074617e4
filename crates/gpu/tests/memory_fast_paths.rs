//! The executor's whole-warp `ld`/`st` paths (`Exec::fast_ld`, `Exec::fast_st`: one check
//! for every lane when all of them fall aligned in one allocation or in shared memory) load
//! and store what the per-lane path does, and leave to it every access that needs its
//! per-lane checks, which then names the same faulting thread.
//!
//! Values are checked against the bytes the host wrote, on whole warps and on warps whose odd
//! lanes have left; faults against the thread a lane-by-lane reading of PTX names (the first
//! active lane, in lane order, whose access is bad).

use gpu::error::{ExecError, FaultReason};
use gpu::memory::GlobalFault;
use gpu::{DevPtr, Gpu, GpuError, KernelArg};

/// 64-bit words each thread of the loads kernel stores, and the words between two
/// threads' (a multiple of two, for the 16-byte vector store).
const WORDS: usize = 13;
const STRIDE: usize = 16;

const HEADER: &str = ".version 8.0\n.target sm_70\n.address_size 64\n";

/// The value kernels' registers.
const REGS: &str = "    .reg .pred %p<4>;
    .reg .b16 %h<4>;
    .reg .b32 %r<32>;
    .reg .b64 %rd<32>;
";

/// `%r0` = the thread's index in the grid, `%r1` in its TB.
const THREAD_INDEX: &str = "    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mad.lo.s32 %r0, %r2, %r3, %r1;
";

/// A warp's odd threads jump to `DONE` when `odd_lanes_leave` (so the rest run on a
/// partial warp).
fn leave(odd_lanes_leave: bool) -> &'static str {
    if odd_lanes_leave {
        "    and.b32 %r9, %r0, 1;\n    setp.ne.u32 %p1, %r9, 0;\n    @%p1 bra DONE;\n"
    } else {
        ""
    }
}

/// Loads of every width and form (sign-extended bytes and halves, vectors, 64-bit words,
/// reversed and permuted lane orders, generic addresses to global and to shared memory,
/// lanes alternating between the two), each result stored as a 64-bit word by a mix of
/// scalar, vector and generic stores.
fn loads_kernel(odd_lanes_leave: bool) -> String {
    let leave = leave(odd_lanes_leave);
    format!(
        r#"{HEADER}
.visible .entry k(.param .u64 src, .param .u64 out, .param .u32 n)
{{
{REGS}    .shared .align 16 .b8 sm[4096];
{THREAD_INDEX}    ld.param.u32 %r4, [n];
    ld.param.u64 %rd1, [src];
    ld.param.u64 %rd2, [out];
    // Shared memory: word t = 3 * t + 1, written by every thread before any leaves.
    mul.lo.s32 %r5, %r1, 3;
    add.s32 %r5, %r5, 1;
    mul.wide.u32 %rd3, %r1, 4;
    mov.u64 %rd4, sm;
    add.s64 %rd5, %rd4, %rd3;
    st.shared.u32 [%rd5], %r5;
    bar.sync 0;
{leave}    mul.wide.u32 %rd6, %r0, {stride};
    add.s64 %rd7, %rd2, %rd6;
    // 0: ld.global.s8 at src + i.
    cvt.u64.u32 %rd8, %r0;
    add.s64 %rd9, %rd1, %rd8;
    ld.global.s8 %r10, [%rd9];
    cvt.s64.s32 %rd10, %r10;
    st.global.u64 [%rd7], %rd10;
    // 1: ld.global.s16 at src + 2i + 2 (an offset on the instruction).
    mul.wide.u32 %rd11, %r0, 2;
    add.s64 %rd12, %rd1, %rd11;
    ld.global.s16 %r11, [%rd12+2];
    cvt.s64.s32 %rd13, %r11;
    st.global.u64 [%rd7+8], %rd13;
    // 2, 3: ld.global.v2.u32 at src + 8i, stored as a v2.u64.
    mul.wide.u32 %rd14, %r0, 8;
    add.s64 %rd15, %rd1, %rd14;
    ld.global.v2.u32 {{%r12, %r13}}, [%rd15];
    cvt.u64.u32 %rd16, %r12;
    cvt.u64.u32 %rd17, %r13;
    st.global.v2.u64 [%rd7+16], {{%rd16, %rd17}};
    // 4: ld.global.v4.u32 at src + 16i, the sum of the last three less the first.
    mul.wide.u32 %rd18, %r0, 16;
    add.s64 %rd19, %rd1, %rd18;
    ld.global.v4.u32 {{%r14, %r15, %r16, %r17}}, [%rd19];
    add.s32 %r18, %r15, %r16;
    add.s32 %r18, %r18, %r17;
    sub.s32 %r18, %r18, %r14;
    cvt.u64.u32 %rd20, %r18;
    st.global.u64 [%rd7+32], %rd20;
    // 5: ld.global.u64 from the far end, reversed lane order (src + 8 (n - 1 - i)).
    sub.s32 %r19, %r4, 1;
    sub.s32 %r19, %r19, %r0;
    mul.wide.u32 %rd21, %r19, 8;
    add.s64 %rd22, %rd1, %rd21;
    ld.global.u64 %rd23, [%rd22];
    st.global.u64 [%rd7+40], %rd23;
    // 6: a generic load of global memory (the same word as 2's first).
    ld.u32 %r20, [%rd15];
    cvt.u64.u32 %rd24, %r20;
    st.u64 [%rd7+48], %rd24;
    // 7: ld.shared.u32 of the neighbour's word (tid ^ 1).
    xor.b32 %r21, %r1, 1;
    mul.wide.u32 %rd25, %r21, 4;
    add.s64 %rd26, %rd4, %rd25;
    ld.shared.u32 %r22, [%rd26];
    cvt.u64.u32 %rd27, %r22;
    st.global.u64 [%rd7+56], %rd27;
    // 8: a generic load of shared memory (own word).
    cvta.shared.u64 %rd28, %rd5;
    ld.u32 %r23, [%rd28];
    cvt.u64.u32 %rd29, %r23;
    st.global.u64 [%rd7+64], %rd29;
    // 9: generic, even lanes to shared (own word), odd lanes to global (2's first word).
    and.b32 %r24, %r1, 1;
    setp.eq.u32 %p2, %r24, 0;
    selp.b64 %rd30, %rd28, %rd15, %p2;
    ld.u32 %r25, [%rd30];
    cvt.u64.u32 %rd31, %r25;
    st.global.u64 [%rd7+72], %rd31;
    // 10: shared stores by a vector, read back as one 64-bit word: (i, 2i + 5).
    mul.wide.u32 %rd8, %r1, 8;
    add.s64 %rd9, %rd4, %rd8;
    add.s64 %rd9, %rd9, 1024;
    mad.lo.s32 %r26, %r0, 2, 5;
    st.shared.v2.u32 [%rd9], {{%r0, %r26}};
    ld.shared.u64 %rd10, [%rd9];
    st.global.u64 [%rd7+80], %rd10;
    // 11: a byte store over the word just stored, then a 16-bit load (0x5a in the low byte).
    mov.b16 %h1, 0x5a;
    st.shared.u8 [%rd9], %h1;
    ld.shared.u16 %h2, [%rd9];
    cvt.u64.u16 %rd11, %h2;
    st.global.u64 [%rd7+88], %rd11;
    // 12: every lane at one address: ld.global.v2.u32 at src + 8, (second << 32) | first.
    ld.global.v2.u32 {{%r27, %r28}}, [%rd1+8];
    mov.b64 %rd12, {{%r27, %r28}};
    st.global.u64 [%rd7+96], %rd12;
DONE:
    ret;
}}
"#,
        stride = STRIDE * 8
    )
}

fn word(bytes: &[u8], at: usize, n: usize) -> u64 {
    let mut b = [0u8; 8];
    b[..n].copy_from_slice(&bytes[at..at + n]);
    u64::from_le_bytes(b)
}

/// The words thread `i` (thread `t` of its TB) of `n` stores, from `src`.
fn expected(src: &[u8], i: usize, t: usize, n: usize) -> [u64; WORDS] {
    let s8 = src[i] as i8 as i64 as u64;
    let s16 = word(src, 2 * i + 2, 2) as u16 as i16 as i64 as u64;
    let w = |at: usize| word(src, at, 4);
    let v4 = w(16 * i + 4)
        .wrapping_add(w(16 * i + 8))
        .wrapping_add(w(16 * i + 12))
        .wrapping_sub(w(16 * i))
        & 0xffff_ffff;
    let own_shared = 3 * t as u64 + 1;
    let neighbour = 3 * (t ^ 1) as u64 + 1;
    let low = i as u64 | ((2 * i as u64 + 5) << 32);
    [
        s8,
        s16,
        w(8 * i),
        w(8 * i + 4),
        v4,
        word(src, 8 * (n - 1 - i), 8),
        w(8 * i),
        neighbour,
        own_shared,
        if t.is_multiple_of(2) {
            own_shared
        } else {
            w(8 * i)
        },
        low,
        (low & 0xff00) | 0x5a,
        word(src, 8, 8),
    ]
}

fn source_bytes(len: usize) -> Vec<u8> {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// TBs and threads per TB of the value tests.
const TBS: u32 = 3;
const THREADS: u32 = 96;

/// Runs kernel `k` of `text` on `TBS` TBs of `THREADS` threads, on the functional core or
/// `timed` on the `gtx480`, with arguments: each of `inputs` in an allocation of its own, an
/// output of `out_bytes` bytes of 0xee, then `rest`. Returns the output.
fn run_kernel(
    text: &str,
    timed: bool,
    inputs: &[&[u8]],
    out_bytes: usize,
    rest: &[KernelArg],
) -> Vec<u8> {
    let mut gpu = if timed {
        let config = gpu::config::GpuConfig::preset("gtx480").expect("preset");
        Gpu::timed(gpu::timing::TimedGpu::new(config)).expect("a timed device")
    } else {
        Gpu::new()
    };
    let m = gpu.load_ptx("k.ptx", text).expect("loads");
    let mut args = Vec::new();
    for data in inputs {
        let p = gpu.alloc(data.len() as u64);
        gpu.copy_to_device(p, data).expect("copy");
        args.push(KernelArg::Ptr(p));
    }
    let out = gpu.alloc(out_bytes as u64);
    gpu.copy_to_device(out, &vec![0xee; out_bytes])
        .expect("copy");
    args.push(KernelArg::Ptr(out));
    args.extend_from_slice(rest);
    let (grid, block) = ([TBS, 1, 1], [THREADS, 1, 1]);
    if timed {
        gpu.launch_timed(m, "k", grid, block, 0, &args, &mut |_| {})
            .map(|_| ())
    } else {
        gpu.launch(m, "k", grid, block, 0, &args).map(|_| ())
    }
    .expect("runs");
    gpu.copy_from_device(DevPtr(out.0), out_bytes as u64)
        .expect("copy back")
}

#[test]
fn whole_warp_loads_and_stores_give_each_lane_its_bytes() {
    let n = (TBS * THREADS) as usize;
    let src = source_bytes(16 * n + 16);
    for odd_lanes_leave in [false, true] {
        for timed in [false, true] {
            let got = run_kernel(
                &loads_kernel(odd_lanes_leave),
                timed,
                &[&src],
                n * STRIDE * 8,
                &[KernelArg::U32(n as u32)],
            );
            for i in 0..n {
                let t = i % THREADS as usize;
                let want = if odd_lanes_leave && t % 2 == 1 {
                    [0xeeee_eeee_eeee_eeee; WORDS]
                } else {
                    expected(&src, i, t, n)
                };
                for (j, &w) in want.iter().enumerate() {
                    assert_eq!(
                        word(&got, (i * STRIDE + j) * 8, 8),
                        w,
                        "thread {i}, word {j} (odd lanes leave: {odd_lanes_leave}, timed: {timed})"
                    );
                }
            }
        }
    }
}

/// Every integer width and signedness loaded by whole warps in a permuted lane order (thread
/// `i` reads element `(7 i + 3) mod n`) into a 64-bit register, which PTX extends as the
/// type says (sign for `.s`, zero for `.u` and `.b`); each value stored as a 64-bit word.
/// The whole-warp load decides the element's width and extension once per warp.
#[test]
fn whole_warp_loads_extend_each_width_as_its_type() {
    let n = (TBS * THREADS) as usize;
    let src = source_bytes(8 * n);
    for (ty, size, signed) in [
        ("u8", 1, false),
        ("s8", 1, true),
        ("b8", 1, false),
        ("u16", 2, false),
        ("s16", 2, true),
        ("b16", 2, false),
        ("u32", 4, false),
        ("s32", 4, true),
        ("b32", 4, false),
        ("u64", 8, false),
        ("s64", 8, true),
        ("b64", 8, false),
    ] {
        let text = format!(
            r#"{HEADER}
.visible .entry k(.param .u64 src, .param .u64 out)
{{
{REGS}{THREAD_INDEX}    ld.param.u64 %rd1, [src];
    ld.param.u64 %rd2, [out];
    mul.lo.s32 %r5, %r0, 7;
    add.s32 %r5, %r5, 3;
    rem.u32 %r5, %r5, {n};
    mul.wide.u32 %rd3, %r5, {size};
    add.s64 %rd4, %rd1, %rd3;
    ld.global.{ty} %rd5, [%rd4];
    mul.wide.u32 %rd6, %r0, 8;
    add.s64 %rd7, %rd2, %rd6;
    st.global.u64 [%rd7], %rd5;
    ret;
}}
"#
        );
        for timed in [false, true] {
            let got = run_kernel(&text, timed, &[&src], n * 8, &[]);
            for i in 0..n {
                let raw = word(&src, (7 * i + 3) % n * size, size);
                let bits = 8 * size as u32;
                let want = if signed && bits < 64 {
                    ((raw << (64 - bits)) as i64 >> (64 - bits)) as u64
                } else {
                    raw
                };
                assert_eq!(
                    word(&got, 8 * i, 8),
                    want,
                    "ld.global.{ty}, thread {i} (timed: {timed})"
                );
            }
        }
    }
}

/// One access per thread at `[base + 4 * tid + bump]` (`bump` = `extra` for thread
/// `bumped`, else 0); `op` is `ld` or `st`; the TB has `shared` bytes of shared memory.
fn fault_kernel(op: &str, space: &str, bumped: u32, extra: u32, shared: u32) -> String {
    let access = match op {
        "ld" => format!("ld{space}.u32 %r5, [%rd4];"),
        _ => format!("st{space}.u32 [%rd4], %r1;"),
    };
    let base = if space == ".shared" {
        "mov.u64 %rd1, sm;"
    } else {
        "ld.param.u64 %rd1, [p];"
    };
    format!(
        r#"{HEADER}
.visible .entry k(.param .u64 p)
{{
    .reg .pred %p<2>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;
    .shared .align 4 .b8 sm[{shared}];
    mov.u32 %r1, %tid.x;
    {base}
    mul.wide.u32 %rd2, %r1, 4;
    setp.eq.u32 %p1, %r1, {bumped};
    selp.b64 %rd3, {extra}, 0, %p1;
    add.s64 %rd4, %rd1, %rd2;
    add.s64 %rd4, %rd4, %rd3;
    {access}
    ret;
}}
"#
    )
}

/// The fault `op` meets, with one warp of 32 threads over an allocation of `bytes` (and as
/// many bytes of shared memory).
fn fault_of(op: &str, space: &str, bumped: u32, extra: u32, bytes: u64) -> ([u32; 3], FaultReason) {
    let mut gpu = Gpu::new();
    let m = gpu
        .load_ptx(
            "fault.ptx",
            &fault_kernel(op, space, bumped, extra, bytes as u32),
        )
        .expect("loads");
    let p = gpu.alloc(bytes);
    match gpu.launch(m, "k", [1, 1, 1], [32, 1, 1], 0, &[KernelArg::Ptr(p)]) {
        Err(GpuError::Exec(ExecError::MemoryFault { tid, reason, .. })) => (tid, reason),
        other => panic!("{op}{space}: expected a memory fault, got {other:?}"),
    }
}

#[test]
fn faults_name_the_first_bad_lane_as_lane_by_lane() {
    for op in ["ld", "st"] {
        for space in [".global", ""] {
            // One misaligned lane among aligned ones.
            assert_eq!(
                fault_of(op, space, 7, 2, 128),
                ([7, 0, 0], FaultReason::Misaligned),
                "{op}{space}"
            );
            // The allocation ends two words short: lane 30 is the first outside it.
            let (tid, reason) = fault_of(op, space, 99, 0, 120);
            assert_eq!(tid, [30, 0, 0], "{op}{space}");
            assert!(
                matches!(reason, FaultReason::Global(GlobalFault::Unallocated)),
                "{op}{space}: {reason:?}"
            );
            // One lane far past the end, the others in bounds.
            let (tid, _) = fault_of(op, space, 12, 1 << 20, 128);
            assert_eq!(tid, [12, 0, 0], "{op}{space}");
        }
        // Shared memory of 100 bytes: lane 25 is the first past it.
        assert_eq!(
            fault_of(op, ".shared", 99, 0, 100),
            ([25, 0, 0], FaultReason::OutOfBounds),
            "{op}.shared"
        );
        // Of 128 bytes: only the last lane, moved one word on, is past it.
        assert_eq!(
            fault_of(op, ".shared", 31, 4, 128),
            ([31, 0, 0], FaultReason::OutOfBounds),
            "{op}.shared"
        );
        assert_eq!(
            fault_of(op, ".shared", 3, 1, 128),
            ([3, 0, 0], FaultReason::Misaligned),
            "{op}.shared"
        );
    }
}

/// Local memory: every thread `i` fills the 16 words of its own array (word `k` = 16 `i` +
/// `k`), then reads them back by a per-lane index, as 64-bit and vector loads, a
/// sign-extended byte, generically, after narrower and wider stores, and lane by lane
/// (`local_expected`).
fn local_kernel(odd_lanes_leave: bool) -> String {
    let leave = leave(odd_lanes_leave);
    format!(
        r#"{HEADER}
.visible .entry k(.param .u64 out)
{{
{REGS}    .local .align 8 .b8 buf[64];
{THREAD_INDEX}{leave}    ld.param.u64 %rd2, [out];
    mul.wide.u32 %rd6, %r0, 128;
    add.s64 %rd7, %rd2, %rd6;
    mov.u64 %rd1, buf;
    // Word k of thread i: 16 i + k.
    mov.u32 %r4, 0;
FILL:
    mad.lo.s32 %r5, %r0, 16, %r4;
    mul.wide.u32 %rd3, %r4, 4;
    add.s64 %rd4, %rd1, %rd3;
    st.local.u32 [%rd4], %r5;
    add.s32 %r4, %r4, 1;
    setp.lt.u32 %p2, %r4, 16;
    @%p2 bra FILL;
    // 0: word i % 16, indexed per lane.
    and.b32 %r6, %r0, 15;
    mul.wide.u32 %rd8, %r6, 4;
    add.s64 %rd9, %rd1, %rd8;
    ld.local.u32 %r7, [%rd9];
    cvt.u64.u32 %rd10, %r7;
    st.global.u64 [%rd7], %rd10;
    // 1: words 2 and 3 as one 64-bit load.
    ld.local.u64 %rd11, [%rd1+8];
    st.global.u64 [%rd7+8], %rd11;
    // 2: words 4 and 5 as a vector, (5 << 32) | 4.
    ld.local.v2.u32 {{%r8, %r9}}, [%rd1+16];
    mov.b64 %rd12, {{%r8, %r9}};
    st.global.u64 [%rd7+16], %rd12;
    // 3: the low byte of word 7, sign-extended.
    ld.local.s8 %r10, [%rd1+28];
    cvt.s64.s32 %rd13, %r10;
    st.global.u64 [%rd7+24], %rd13;
    // 4: word 9 through a generic address.
    cvta.local.u64 %rd14, %rd1;
    ld.u32 %r11, [%rd14+36];
    cvt.u64.u32 %rd15, %r11;
    st.global.u64 [%rd7+32], %rd15;
    // 5: the high half of word 10 overwritten with 0xabcd.
    mov.b16 %h1, 0xabcd;
    st.local.u16 [%rd1+42], %h1;
    ld.local.u32 %r12, [%rd1+40];
    cvt.u64.u32 %rd16, %r12;
    st.global.u64 [%rd7+40], %rd16;
    // 6: words 12 and 13 by one 64-bit store (i, i + 1000), word 13 read back.
    add.s32 %r13, %r0, 1000;
    mov.b64 %rd17, {{%r0, %r13}};
    st.local.u64 [%rd1+48], %rd17;
    ld.local.u32 %r14, [%rd1+52];
    cvt.u64.u32 %rd18, %r14;
    st.global.u64 [%rd7+48], %rd18;
    // 7: words 14 and 15 by a generic vector store (7 i, 9 i), read back as a vector.
    mul.lo.s32 %r15, %r0, 7;
    mul.lo.s32 %r16, %r0, 9;
    st.v2.u32 [%rd14+56], {{%r15, %r16}};
    ld.local.v2.u32 {{%r17, %r18}}, [%rd1+56];
    sub.s32 %r19, %r18, %r17;
    cvt.u64.u32 %rd19, %r19;
    st.global.u64 [%rd7+56], %rd19;
    // 8: generic, even lanes to local word 11, odd lanes to the global word 0 stored above:
    // lane by lane (the per-lane path reads what the whole-warp stores wrote).
    and.b32 %r20, %r1, 1;
    setp.eq.u32 %p3, %r20, 0;
    add.s64 %rd20, %rd14, 44;
    selp.b64 %rd21, %rd20, %rd7, %p3;
    ld.u32 %r21, [%rd21];
    cvt.u64.u32 %rd22, %r21;
    st.global.u64 [%rd7+64], %rd22;
DONE:
    ret;
}}
"#
    )
}

fn local_expected(i: u64) -> [u64; WORDS_LOCAL] {
    let w = |k: u64| (16 * i + k) & 0xffff_ffff;
    [
        w(i % 16),
        w(2) | w(3) << 32,
        w(4) | w(5) << 32,
        w(7) as u8 as i8 as i64 as u64,
        w(9),
        (w(10) & 0xffff) | 0xabcd << 16,
        (i + 1000) & 0xffff_ffff,
        (2 * i) & 0xffff_ffff,
        if i.is_multiple_of(2) {
            w(11)
        } else {
            w(i % 16)
        },
    ]
}

/// 64-bit words each thread of the local kernel stores (at a stride of 16).
const WORDS_LOCAL: usize = 9;

#[test]
fn whole_warp_local_loads_and_stores_keep_each_lane_s_words() {
    let n = (TBS * THREADS) as usize;
    for odd_lanes_leave in [false, true] {
        for timed in [false, true] {
            let got = run_kernel(&local_kernel(odd_lanes_leave), timed, &[], n * 128, &[]);
            for i in 0..n {
                let want = if odd_lanes_leave && i % 2 == 1 {
                    [0xeeee_eeee_eeee_eeee; WORDS_LOCAL]
                } else {
                    local_expected(i as u64)
                };
                for (j, &w) in want.iter().enumerate() {
                    assert_eq!(
                        word(&got, i * 128 + 8 * j, 8),
                        w,
                        "thread {i}, word {j} (odd lanes leave: {odd_lanes_leave}, timed: {timed})"
                    );
                }
            }
        }
    }
}

/// The fault of one warp's local access at `[buf + 4 * (tid % wrap) + bump]` (`bump` =
/// `extra` for thread `bumped`), with 64 bytes of local memory per thread.
fn local_fault_of(op: &str, wrap: u32, bumped: u32, extra: u32) -> ([u32; 3], FaultReason) {
    let access = match op {
        "ld" => "ld.local.u32 %r5, [%rd4];",
        _ => "st.local.u32 [%rd4], %r1;",
    };
    let text = format!(
        r#"{HEADER}
.visible .entry k()
{{
    .reg .pred %p<2>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;
    .local .align 4 .b8 buf[64];
    mov.u32 %r1, %tid.x;
    rem.u32 %r2, %r1, {wrap};
    mov.u64 %rd1, buf;
    mul.wide.u32 %rd2, %r2, 4;
    setp.eq.u32 %p1, %r1, {bumped};
    selp.b64 %rd3, {extra}, 0, %p1;
    add.s64 %rd4, %rd1, %rd2;
    add.s64 %rd4, %rd4, %rd3;
    {access}
    ret;
}}
"#
    );
    let mut gpu = Gpu::new();
    let m = gpu.load_ptx("local_fault.ptx", &text).expect("loads");
    match gpu.launch(m, "k", [1, 1, 1], [32, 1, 1], 0, &[]) {
        Err(GpuError::Exec(ExecError::MemoryFault { tid, reason, .. })) => (tid, reason),
        other => panic!("{op}.local: expected a memory fault, got {other:?}"),
    }
}

#[test]
fn local_faults_name_the_first_bad_lane() {
    for op in ["ld", "st"] {
        // 16 words per thread: lane 16 is the first past them.
        assert_eq!(
            local_fault_of(op, 32, 99, 0),
            ([16, 0, 0], FaultReason::OutOfBounds),
            "{op}"
        );
        // All in bounds but lane 5, one byte off.
        assert_eq!(
            local_fault_of(op, 16, 5, 1),
            ([5, 0, 0], FaultReason::Misaligned),
            "{op}"
        );
        // Only the last lane, moved past the end.
        assert_eq!(
            local_fault_of(op, 16, 31, 4),
            ([31, 0, 0], FaultReason::OutOfBounds),
            "{op}"
        );
    }
}
