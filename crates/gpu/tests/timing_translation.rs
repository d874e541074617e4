//! Address translation in the timed machine (`[memory.translation]`, memsys::tlb,
//! papers/tanasic-thesis §6.5.1 Table 6.1): a kernel that strides over many pages walks each
//! page exactly once and runs slower than without translation; a kernel with a tiny
//! footprint hits its L1 TLBs; results stay bit-exact. Expected counts are computed here from
//! the addresses the kernels touch, not read from the simulator.

mod timing_common;

use std::collections::BTreeSet;

use gpu::config::GpuConfig;
use gpu::timing::{TimedGpu, TimedStats};
use timing_common::{Device, Engine};

/// `dst[gid] = src[gid * stride] + 1` over `u32` words: each thread reads its own word,
/// `stride` words apart.
const STRIDE: &str = r#".version 8.0
.target sm_70
.address_size 64
.visible .entry stride(.param .u64 src, .param .u64 dst, .param .u32 stride)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd0, [src];
    cvta.to.global.u64 %rd0, %rd0;
    ld.param.u64 %rd1, [dst];
    cvta.to.global.u64 %rd1, %rd1;
    ld.param.u32 %r0, [stride];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mad.lo.s32 %r4, %r2, %r3, %r1;
    mul.wide.u32 %rd2, %r4, %r0;
    shl.b64 %rd2, %rd2, 2;
    add.s64 %rd3, %rd0, %rd2;
    ld.global.u32 %r5, [%rd3];
    add.u32 %r5, %r5, 1;
    mul.wide.u32 %rd4, %r4, 4;
    add.s64 %rd5, %rd1, %rd4;
    st.global.u32 [%rd5], %r5;
    ret;
}
"#;

/// `dst[gid] = sum over 64 rounds of src[tid % 32]`: every warp reads the same 128 bytes
/// again and again.
const TINY: &str = r#".version 8.0
.target sm_70
.address_size 64
.visible .entry tiny(.param .u64 src, .param .u64 dst, .param .u32 rounds)
{
    .reg .pred %p<2>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd0, [src];
    cvta.to.global.u64 %rd0, %rd0;
    ld.param.u64 %rd1, [dst];
    cvta.to.global.u64 %rd1, %rd1;
    ld.param.u32 %r0, [rounds];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mad.lo.s32 %r4, %r2, %r3, %r1;
    and.b32 %r5, %r1, 31;
    mul.wide.u32 %rd2, %r5, 4;
    add.s64 %rd3, %rd0, %rd2;
    mov.u32 %r6, 0;
    mov.u32 %r7, 0;
LOOP:
    ld.volatile.global.u32 %r8, [%rd3];
    add.u32 %r6, %r6, %r8;
    add.u32 %r7, %r7, 1;
    setp.lt.u32 %p1, %r7, %r0;
    @%p1 bra LOOP;
    mul.wide.u32 %rd4, %r4, 4;
    add.s64 %rd5, %rd1, %rd4;
    st.global.u32 [%rd5], %r6;
    ret;
}
"#;

/// `preset` with translation switched on or off, at `page_kb` KiB pages.
fn gpu(preset: &str, on: bool, page_kb: u32) -> Engine {
    let mut cfg = GpuConfig::preset(preset).unwrap();
    let t = cfg
        .memory
        .translation
        .as_mut()
        .expect("every preset describes its translation");
    t.enabled = on;
    t.page_kb = page_kb;
    Engine::Timed(Box::new(TimedGpu::new(cfg)))
}

const THREADS: u32 = 512;
const BLOCK: u32 = 64;
/// 4 KiB between the words two threads read.
const STRIDE_WORDS: u32 = 1024;

/// Runs the strided kernel; returns its statistics and the distinct `page_kb` pages its
/// threads touch (every source word and every destination word), from the addresses.
fn strided(engine: Engine, page_kb: u32) -> (TimedStats, usize) {
    let mut d = Device::new("stride.ptx", STRIDE, engine);
    let src_bytes = u64::from(THREADS) * u64::from(STRIDE_WORDS) * 4;
    let src = d.alloc(src_bytes);
    let dst = d.alloc(u64::from(THREADS) * 4);
    let words: Vec<u8> = (0..src_bytes / 4)
        .flat_map(|i| (i as u32 ^ 0x5a5a).to_le_bytes())
        .collect();
    d.write(src, &words);
    let s = d
        .launch(
            "stride",
            [THREADS / BLOCK, 1, 1],
            [BLOCK, 1, 1],
            0,
            &[
                src.to_le_bytes().to_vec(),
                dst.to_le_bytes().to_vec(),
                STRIDE_WORDS.to_le_bytes().to_vec(),
            ],
        )
        .unwrap()
        .expect("timed");
    let out = d.read(dst, u64::from(THREADS) * 4);
    for g in 0..u64::from(THREADS) {
        let want = ((g * u64::from(STRIDE_WORDS)) as u32 ^ 0x5a5a).wrapping_add(1);
        let got = u32::from_le_bytes(out[4 * g as usize..4 * g as usize + 4].try_into().unwrap());
        assert_eq!(got, want, "thread {g}");
    }
    let page = u64::from(page_kb) * 1024;
    let mut pages = BTreeSet::new();
    for g in 0..u64::from(THREADS) {
        pages.insert((src + 4 * g * u64::from(STRIDE_WORDS)) / page);
        pages.insert((dst + 4 * g) / page);
    }
    (s, pages.len())
}

#[test]
fn a_strided_kernel_walks_each_page_once_and_is_slower_translated() {
    for preset in ["fault-study", "gtx480"] {
        let (off, _) = strided(gpu(preset, false, 4), 4);
        assert!(off.memory.translation.is_none(), "{preset}: off means off");
        for page_kb in [4, 64, 2048] {
            let (on, pages) = strided(gpu(preset, true, page_kb), page_kb);
            let t = on
                .memory
                .translation
                .as_ref()
                .expect("translation statistics");
            eprintln!(
                "{preset} {page_kb} KiB: {} cycles translated, {} without; {} pages, {} walks, L1 TLB {:?}, L2 TLB {:?}",
                on.cycles, off.cycles, pages, t.walks, t.l1_tlb, t.l2_tlb
            );
            // The L2 TLB holds every page (512 + 1 at most, consecutive, so at most
            // 5 per set of 8 ways): no page is evicted and walked again, and misses to a
            // page being walked merge into its MSHR.
            assert_eq!(t.walks, pages as u64, "{preset} {page_kb} KiB: walks");
            assert_eq!(t.l2_tlb.evictions, 0);
            if page_kb == 4 {
                // Every warp's load waits for a walk of its own pages (the lookups and the
                // walk, 500 cycles on fault-study, 100 on gtx480) before it reaches the L1.
                let walk = GpuConfig::preset(preset)
                    .unwrap()
                    .memory
                    .translation
                    .unwrap()
                    .walk_latency;
                assert!(
                    on.cycles > off.cycles + walk,
                    "{preset}: {} cycles translated vs {} without",
                    on.cycles,
                    off.cycles
                );
            }
        }
    }
}

#[test]
fn a_tiny_footprint_hits_the_l1_tlb() {
    let rounds = 64u32;
    let (threads, block) = (1024u32, 128u32);
    let mut d = Device::new("tiny.ptx", TINY, gpu("fault-study", true, 4));
    let src = d.alloc(128);
    let dst = d.alloc(u64::from(threads) * 4);
    let words: Vec<u8> = (0..32u32).flat_map(|i| (i + 1).to_le_bytes()).collect();
    d.write(src, &words);
    let s = d
        .launch(
            "tiny",
            [threads / block, 1, 1],
            [block, 1, 1],
            0,
            &[
                src.to_le_bytes().to_vec(),
                dst.to_le_bytes().to_vec(),
                rounds.to_le_bytes().to_vec(),
            ],
        )
        .unwrap()
        .expect("timed");
    let out = d.read(dst, u64::from(threads) * 4);
    for g in 0..threads as usize {
        let got = u32::from_le_bytes(out[4 * g..4 * g + 4].try_into().unwrap());
        assert_eq!(got, rounds * (g as u32 % 32 + 1), "thread {g}");
    }
    let t = s
        .memory
        .translation
        .as_ref()
        .expect("translation statistics");
    let rate = s.rates.l1_tlb_hit_rate.expect("an L1 TLB hit rate");
    eprintln!(
        "tiny: L1 TLB {:?}, hit rate {rate:.4}, {} walks",
        t.l1_tlb, t.walks
    );
    // Each SM misses the source page and each destination page once; everything else
    // hits (or merges while the first walk is under way).
    assert!(rate > 0.95, "L1 TLB hit rate {rate}");
    let page = 4096;
    let pages: BTreeSet<u64> = std::iter::once(src / page)
        .chain((0..u64::from(threads)).map(|g| (dst + 4 * g) / page))
        .collect();
    assert_eq!(t.walks, pages.len() as u64);
}

#[test]
fn few_l1_tlb_mshrs_stall_the_sms_and_lose_no_walk() {
    // Four L1 TLB MSHRs: a warp access of the strided kernel touches 32 pages, so the SM
    // sends it in parts of at most four lines and waits for MSHRs between them.
    let with = |mshrs: u32| {
        let mut cfg = GpuConfig::preset("fault-study").unwrap();
        cfg.memory.translation.as_mut().unwrap().l1_tlb.mshrs = mshrs;
        strided(Engine::Timed(Box::new(TimedGpu::new(cfg))), 4)
    };
    let (many, pages) = with(32);
    let (few, _) = with(4);
    let (tm, tf) = (
        many.memory.translation.clone().unwrap(),
        few.memory.translation.clone().unwrap(),
    );
    eprintln!(
        "32 MSHRs: {} cycles, {} stall cycles; 4 MSHRs: {} cycles, {} stall cycles",
        many.cycles, tm.stall_cycles, few.cycles, tf.stall_cycles
    );
    assert!(tf.stall_cycles > tm.stall_cycles);
    assert!(few.cycles > many.cycles);
    assert_eq!(tf.walks, pages as u64);
    assert_eq!(tm.walks, pages as u64);
}
