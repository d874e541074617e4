//! Load latency seen by a warp: one thread chases a chain of dependent pointers, and the
//! cycles per load (measured as the difference between a long and a short chase, so launch
//! overheads cancel) match the memory system's own unloaded latency for that access, measured
//! by driving `memsys` alone with the same configuration.

mod timing_common;

use memsys::{coalesce, AccessKind, Domain, MemAccess, MemConfig, MemorySystem, Priority, Space};
use timing_common::{u32_arg, u64_arg, Device, Engine};

const CHASE: &str = r#"
    mov.u64 %rd2, %rd1;
    mov.u32 %r5, 0;
L:
    ld.global.u64 %rd2, [%rd2];
    add.u32 %r5, %r5, 1;
    setp.lt.u32 %p1, %r5, %r0;
    @%p1 bra L;
    st.global.u64 [%rd0], %rd2;
"#;

/// The timed GTX480 without DRAM refresh: a refresh delays a load by up to tRP + tRFC,
/// depending on where it falls in the refresh schedule, and the latency composition checked
/// here leaves that out (memsys's DRAM tests check refresh).
fn gtx480_without_refresh() -> Engine {
    let mut t = gpu::timing::TimedGpu::new(gpu::config::GpuConfig::preset("gtx480").unwrap());
    t.gpu.memory.dram.t_refi = 0;
    Engine::Timed(Box::new(t))
}

/// The memory configuration the timed GTX480 runs with.
fn memcfg() -> MemConfig {
    let Engine::Timed(t) = gtx480_without_refresh() else {
        unreachable!()
    };
    let mut m = t.gpu.memory.clone();
    m.num_sms = t.gpu.sm.count as usize;
    m.clocks.core_mhz = t.gpu.sm.clock_mhz;
    m
}

/// Latency of one 8-byte load by one lane on an idle memory system: cold (DRAM), then L1 hit.
fn memsys_alone(addr: u64) -> (u64, u64) {
    let mut m = MemorySystem::new(memcfg()).unwrap();
    let mut one = || {
        let lines = coalesce(&[Some(addr)], 8, 128);
        m.issue(
            0,
            MemAccess {
                kind: AccessKind::Load,
                space: Space::Global,
                priority: Priority::Normal,
                lines,
                tag: 0,
                owner: 0,
            },
        )
        .unwrap();
        loop {
            if let Some(c) = m.pop_completed(0) {
                // Step to the next core edge so the next access starts on a fresh cycle.
                while !m.tick().contains(Domain::Core) {}
                return c.latency();
            }
            m.tick();
        }
    };
    let cold = one();
    let hit = one();
    (cold, hit)
}

/// Runs the chase over `chain` (byte offsets into a buffer of `bytes`; node i points to node
/// i + 1, the last to itself) for `loads` loads; returns (cycles, buffer base).
fn chase(bytes: u64, chain: &dyn Fn(u64) -> Vec<u64>, loads: u32) -> (u64, u64) {
    let mut d = Device::new(
        "chase.ptx",
        &timing_common::kernel("", CHASE),
        gtx480_without_refresh(),
    );
    let out = d.alloc(8);
    let buf = d.alloc(bytes);
    let nodes = chain(buf);
    for (i, &n) in nodes.iter().enumerate() {
        let next = nodes.get(i + 1).copied().unwrap_or(n);
        d.write(buf + n, &(buf + next).to_le_bytes());
    }
    let s = d
        .launch(
            "k",
            [1, 1, 1],
            [1, 1, 1],
            0,
            &[u64_arg(out), u64_arg(buf), u32_arg(loads)],
        )
        .unwrap()
        .unwrap();
    let last = u64::from_le_bytes(d.read(out, 8).try_into().unwrap());
    let k = (loads as usize).min(nodes.len() - 1);
    assert_eq!(last, buf + nodes[k], "the chase followed the real pointers");
    (s.cycles_to_last_tb, buf)
}

#[test]
fn l1_hit_chase_matches_l1_latency() {
    // Every node is the same word: after the first (cold) load, every load hits in the L1.
    let chain = |_: u64| vec![0u64];
    let (short, _) = chase(256, &chain, 20);
    let (long, base) = chase(256, &chain, 120);
    let per_load = (long - short) as f64 / 100.0;
    let (_, hit) = memsys_alone(base);
    eprintln!("L1-hit chase: {per_load:.2} cycles per load; memsys alone: {hit}");
    assert!((per_load - hit as f64).abs() <= 2.0, "{per_load} vs {hit}");
}

#[test]
fn dram_chase_matches_unloaded_dram_latency() {
    // Every node in its own line, DRAM channel and bank (so each load misses the L1 and the
    // L2 and finds its bank closed, as the cold load measured alone does).
    let cfg = memcfg();
    const BYTES: u64 = 8 << 20;
    let chain = |base: u64| {
        let mut used = Vec::new();
        let mut nodes = Vec::new();
        let mut off = 0;
        while off < BYTES && nodes.len() < 64 {
            let loc = cfg.locate(base + off);
            let key = (loc.channel, cfg.dram.bank_row(loc.dram_addr).0);
            if !used.contains(&key) {
                used.push(key);
                nodes.push(off);
            }
            off += 128 * 33;
        }
        nodes
    };
    let (short, _) = chase(BYTES, &chain, 16);
    let (long, base) = chase(BYTES, &chain, 48);
    let per_load = (long - short) as f64 / 32.0;
    let (cold, _) = memsys_alone(base + chain(base)[20]);
    eprintln!("DRAM chase: {per_load:.2} cycles per load; memsys alone (cold): {cold}");
    assert!(
        (per_load - cold as f64).abs() <= 4.0,
        "{per_load} vs {cold}"
    );
}

/// The lines a warp's load asks the L1 for follow its lanes' addresses with the
/// instruction's offset: 32 consecutive words from a 256-byte aligned allocation fill one
/// 128-byte line, and the same words 64 bytes on straddle two, whether the address is a
/// register of the global space or a generic one (resolved per lane).
#[test]
fn a_load_s_lines_include_its_offset() {
    let l1_accesses = |op: &str, offset: u32| {
        let body = format!(
            "    mul.wide.u32 %rd4, %r1, 4;
    add.s64 %rd5, %rd1, %rd4;
    {op} %f1, [%rd5+{offset}];
    st.global.f32 [%rd0], %f1;
"
        );
        let (stats, _) = timing_common::run_kernel(
            timing_common::Engine::gtx480(),
            "",
            &body,
            1,
            32,
            32,
            4,
            &[0u8; 512],
        );
        stats.expect("timed").memory.l1_total.accesses
    };
    // The store of the lanes' values to one word: one more line.
    assert_eq!(l1_accesses("ld.global.f32", 0), 2);
    assert_eq!(l1_accesses("ld.global.f32", 64), 3);
    assert_eq!(l1_accesses("ld.f32", 64), 3);
}
