//! Drives the memory system alone: inject accesses, run until idle, assert cycles
//! (STYLE.md, "a harness that drives one timing unit alone"). Expected latencies are derived
//! from the configuration, never copied from the output.

use memsys::presets::{gtx480, maxwell16};
use memsys::{
    coalesce, AccessKind, Completion, Domain, LineRequest, MemAccess, MemConfig, MemorySystem,
    Priority, Space, Stall,
};

fn load(line_addr: u64, tag: u64) -> MemAccess {
    MemAccess {
        kind: AccessKind::Load,
        space: Space::Global,
        priority: Priority::Normal,
        lines: vec![LineRequest {
            line_addr,
            sectors: 0b1111,
        }],
        tag,
        owner: 0,
    }
}

/// Ticks until the next core edge.
fn core_step(m: &mut MemorySystem) {
    while !m.tick().contains(Domain::Core) {}
}

/// Issues (retrying on stalls) at the next possible core cycle and runs until it completes.
fn run_one(m: &mut MemorySystem, sm: usize, a: MemAccess) -> Completion {
    let id = loop {
        match m.issue(sm, a.clone()) {
            Ok(id) => break id,
            Err(_) => core_step(m),
        }
    };
    for _ in 0..10_000_000 {
        if let Some(c) = m.pop_completed(sm) {
            assert_eq!(c.id, id);
            return c;
        }
        m.tick();
    }
    panic!("access never completed");
}

/// Core cycles (rounded up) of `n` cycles of domain `d`.
fn in_core(cfg: &MemConfig, d: Domain, n: u64) -> f64 {
    (n * cfg.clocks.period_fs(d)) as f64 / cfg.clocks.period_fs(Domain::Core) as f64
}

/// Unloaded L2-hit round trip in core cycles, from the configuration.
fn l2_hit_expected(cfg: &MemConfig) -> f64 {
    in_core(cfg, Domain::Icnt, cfg.icnt_request.unloaded_latency(0))
        + in_core(cfg, Domain::L2, cfg.l2.hit_latency)
        + in_core(cfg, Domain::Icnt, cfg.icnt_reply.unloaded_latency(128))
}

fn dram_expected(cfg: &MemConfig) -> f64 {
    l2_hit_expected(cfg) + in_core(cfg, Domain::Dram, cfg.dram.row_closed_latency(128))
}

/// Each crossing between clock domains may add up to one cycle of the receiving domain.
const TOLERANCE: f64 = 6.0;

fn check_latencies(mut cfg: MemConfig) -> (u64, u64, u64) {
    // The hierarchy's own latencies: translation (on in fault-study) adds its own, which
    // `translation_adds_the_tlb_latencies_to_an_access` checks.
    cfg.translation = None;
    let mut m = MemorySystem::new(cfg.clone()).unwrap();
    let a = 0x40_0000;
    let cold = run_one(&mut m, 0, load(a, 1));
    let l1_hit = run_one(&mut m, 0, load(a, 2));
    let l2_hit = run_one(&mut m, 1, load(a, 3));
    assert_eq!(l1_hit.latency(), cfg.l1.hit_latency, "L1 hit");
    let (e2, ed) = (l2_hit_expected(&cfg), dram_expected(&cfg));
    eprintln!(
        "L1 hit {} (cfg {}), L2 hit {} (derived {:.1}), DRAM {} (derived {:.1}) core cycles",
        l1_hit.latency(),
        cfg.l1.hit_latency,
        l2_hit.latency(),
        e2,
        cold.latency(),
        ed
    );
    assert!(
        (l2_hit.latency() as f64 - e2).abs() <= TOLERANCE,
        "L2 hit {} vs {e2}",
        l2_hit.latency()
    );
    assert!(
        (cold.latency() as f64 - ed).abs() <= TOLERANCE,
        "DRAM {} vs {ed}",
        cold.latency()
    );
    let s = m.stats();
    assert_eq!(s.l2_total.accesses, 2);
    assert_eq!(s.l2_total.hits, 1);
    assert_eq!(s.dram_total.reads, 1);
    (l1_hit.latency(), l2_hit.latency(), cold.latency())
}

#[test]
fn unloaded_latencies_gtx480() {
    check_latencies(gtx480());
}

#[test]
fn unloaded_latencies_maxwell16_match_table_4_1() {
    // lin-thesis Table 4.1: L2 200 cycles, DRAM 380 cycles (taken as SM-observed round trips).
    let (_, l2, dram) = check_latencies(maxwell16());
    assert!((190..=215).contains(&l2), "L2 {l2}");
    assert!((365..=400).contains(&dram), "DRAM {dram}");
}

#[test]
fn mshr_merge_sends_one_l2_request() {
    let mut m = MemorySystem::new(gtx480()).unwrap();
    m.issue(0, load(0x1000, 1)).unwrap();
    core_step(&mut m);
    m.issue(0, load(0x1000, 2)).unwrap();
    assert!(m.run_until_idle(1_000_000));
    let s = m.stats();
    assert_eq!(s.l1_total.mshr_merges, 1);
    assert_eq!(s.icnt_request.packets, 1);
    assert_eq!(s.l2_total.accesses, 1);
    let a = m.pop_completed(0).unwrap();
    let b = m.pop_completed(0).unwrap();
    assert_eq!((a.tag, b.tag), (1, 2));
    assert_eq!(
        a.completed, b.completed,
        "merged loads return with the same fill"
    );
}

#[test]
fn mshr_full_stalls() {
    let mut cfg = gtx480();
    cfg.l1.mshr_entries = 2;
    let mut m = MemorySystem::new(cfg).unwrap();
    let three = MemAccess {
        lines: (0..3)
            .map(|i| LineRequest {
                line_addr: i * 128,
                sectors: 1,
            })
            .collect(),
        ..load(0, 0)
    };
    assert_eq!(m.issue(0, three), Err(Stall::MshrFull));
    m.issue(0, load(0, 1)).unwrap();
    assert_eq!(m.issue(0, load(128, 2)), Err(Stall::L1Busy));
    core_step(&mut m);
    m.issue(0, load(128, 2)).unwrap();
    core_step(&mut m);
    assert_eq!(m.issue(0, load(256, 3)), Err(Stall::MshrFull));
    // Merging into a pending line needs no new entry.
    m.issue(0, load(0, 4)).unwrap();
    assert!(m.run_until_idle(1_000_000));
    let s = m.stats();
    assert_eq!(s.issue_stalls, 3);
    assert!(s.l1_total.reservation_fails >= 2);
    assert_eq!(s.accesses_completed, 3);
}

#[test]
fn dirty_l2_evictions_write_dram() {
    let mut cfg = gtx480();
    cfg.l2.size_bytes = 2 * 1024; // 8 sets × 2 ways per slice
    cfg.l2.assoc = 2;
    let mut m = MemorySystem::new(cfg.clone()).unwrap();
    for i in 0..512u64 {
        let st = MemAccess {
            kind: AccessKind::Store,
            ..load(i * 128, i)
        };
        run_one(&mut m, 0, st);
    }
    assert!(m.run_until_idle(1_000_000));
    let s = m.stats();
    assert_eq!(s.l2_total.writes, 512);
    assert!(s.l2_total.writebacks > 0);
    assert_eq!(s.dram_total.writes, s.l2_total.writebacks);
    assert_eq!(
        s.dram_total.reads, 0,
        "write-allocate of whole sectors fetches nothing"
    );
    // Stores complete when acknowledged: an L2 round trip.
    assert!(s.total_latency_core_cycles / 512 >= cfg.l2.hit_latency);
}

/// Config where DRAM is the bottleneck: enough MSHRs and interconnect width to cover latency.
fn dram_bound() -> MemConfig {
    let mut cfg = gtx480();
    cfg.l1.mshr_entries = 256;
    cfg.max_outstanding_accesses = 256;
    cfg.l2.mshr_entries = 256;
    cfg.icnt_request.flits_per_cycle = 8;
    cfg.icnt_reply.flits_per_cycle = 8;
    cfg
}

/// Every SM streams through its own share of consecutive lines, one line per access, issuing
/// whenever it can. Returns (stats, DRAM bus utilisation over the run).
fn stream(cfg: MemConfig, lines: u64, line_of: impl Fn(u64) -> u64) -> (memsys::MemStats, f64) {
    let n = cfg.num_sms as u64;
    let mut m = MemorySystem::new(cfg.clone()).unwrap();
    let mut next = vec![0u64; n as usize];
    let per_sm = lines / n;
    while next.iter().any(|&k| k < per_sm) {
        core_step(&mut m);
        for (sm, k) in next.iter_mut().enumerate() {
            while m.pop_completed(sm).is_some() {}
            if *k < per_sm {
                let i = *k * n + sm as u64;
                if m.issue(sm, load(line_of(i), i)).is_ok() {
                    *k += 1;
                }
            }
        }
    }
    assert!(m.run_until_idle(100_000_000));
    let s = m.stats();
    let util =
        s.dram_total.bus_busy_cycles as f64 / (s.dram_cycles as f64 * cfg.dram_channels as f64);
    (s, util)
}

#[test]
fn stream_saturates_dram_bus() {
    let cfg = dram_bound();
    let (s, util) = stream(cfg.clone(), 30_000, |i| i * 128);
    let gbs = s.dram_total.bytes as f64 / (s.dram_cycles as f64 / cfg.clocks.dram_mhz / 1e6) / 1e9;
    eprintln!(
        "stream: bus utilisation {:.1} %, {:.1} GB/s of {:.1} GB/s peak, row hits {} misses {}",
        util * 100.0,
        gbs,
        cfg.dram_peak_bytes_per_s() / 1e9,
        s.dram_total.row_hits,
        s.dram_total.row_misses
    );
    assert_eq!(s.dram_total.reads, 30_000);
    assert!(util >= 0.80, "DRAM bus utilisation {util}");
}

#[test]
fn row_hits_are_faster_than_row_misses() {
    let cfg = gtx480();
    // Lines of channel 0, bank 0: those in its open row, and those each in a new row.
    let mut same_row = Vec::new();
    let mut new_rows = Vec::new();
    let mut rows_seen = Vec::new();
    let mut addr = 0u64;
    while same_row.len() < 12 || new_rows.len() < 12 {
        let loc = cfg.locate(addr);
        if loc.channel == 0 {
            let (bank, row) = cfg.dram.bank_row(loc.dram_addr);
            if bank == 0 && row == 0 && same_row.len() < 12 {
                same_row.push(addr);
            } else if bank == 0 && row > 0 && !rows_seen.contains(&row) && new_rows.len() < 12 {
                rows_seen.push(row);
                new_rows.push(addr);
            }
        }
        addr += 128;
    }
    let time = |lines: &[u64]| {
        let mut m = MemorySystem::new(cfg.clone()).unwrap();
        for (i, &a) in lines.iter().enumerate() {
            run_one(&mut m, i % cfg.num_sms, load(a, i as u64));
        }
        let s = m.stats();
        (
            s.total_latency_core_cycles,
            s.dram_total.row_hits,
            s.dram_total.row_misses,
        )
    };
    let (hit_t, hits, _) = time(&same_row);
    let (miss_t, _, misses) = time(&new_rows);
    eprintln!("12 dependent loads: same row {hit_t} core cycles, new rows {miss_t}");
    assert_eq!(hits, 11);
    assert_eq!(misses, 12);
    // Each row miss pays at least tRP + tRCD DRAM cycles more than a hit.
    let extra = in_core(&cfg, Domain::Dram, cfg.dram.t_rp + cfg.dram.t_rcd);
    assert!(
        (miss_t - hit_t) as f64 >= 10.0 * extra,
        "{miss_t} vs {hit_t}"
    );
}

#[test]
fn context_traffic_yields_to_normal() {
    let cfg = gtx480();
    let mut m = MemorySystem::new(cfg.clone()).unwrap();
    // Lines of one slice, so both SMs contend for one crossbar output and one channel.
    let lines: Vec<u64> = (0..4096u64)
        .map(|i| i * 128)
        .filter(|&a| cfg.locate(a).slice == 0)
        .take(32)
        .collect();
    for k in 0..16 {
        let mut ctx = load(lines[2 * k], 100 + k as u64);
        ctx.priority = Priority::Context;
        m.issue(0, ctx).unwrap();
        m.issue(1, load(lines[2 * k + 1], k as u64)).unwrap();
        core_step(&mut m);
    }
    assert!(m.run_until_idle(10_000_000));
    let mut mean = |sm| {
        let v: Vec<u64> = std::iter::from_fn(|| m.pop_completed(sm))
            .map(|c| c.latency())
            .collect();
        v.iter().sum::<u64>() as f64 / v.len() as f64
    };
    let (ctx, normal) = (mean(0), mean(1));
    eprintln!("mean latency: context {ctx:.1}, normal {normal:.1} core cycles");
    assert!(normal < ctx);
    let s = m.stats();
    assert_eq!(s.icnt_request.context_packets, 16);
    assert_eq!(s.dram_total.context_requests, 16);
}

#[test]
fn same_sequence_same_stats() {
    let run = || {
        let mut m = MemorySystem::new(gtx480()).unwrap();
        let mut x = 12345u64;
        let mut log = Vec::new();
        for step in 0..3000u64 {
            core_step(&mut m);
            for sm in 0..15 {
                while let Some(c) = m.pop_completed(sm) {
                    log.push(c);
                }
            }
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let sm = (x >> 33) as usize % 15;
            let base = ((x >> 20) % (1 << 22)) & !3;
            let stride = [4, 8, 132, 4096][(x >> 60) as usize % 4];
            let lanes: Vec<Option<u64>> = (0..32).map(|l| Some(base + l * stride)).collect();
            let kind = [
                AccessKind::Load,
                AccessKind::Load,
                AccessKind::Store,
                AccessKind::Atomic,
            ][(x >> 10) as usize % 4];
            let a = MemAccess {
                kind,
                space: Space::Global,
                priority: if step % 7 == 0 {
                    Priority::Context
                } else {
                    Priority::Normal
                },
                lines: coalesce(&lanes, 4, 128),
                tag: step,
                owner: 0,
            };
            let _ = m.issue(sm, a);
        }
        assert!(m.run_until_idle(100_000_000));
        for sm in 0..15 {
            while let Some(c) = m.pop_completed(sm) {
                log.push(c);
            }
        }
        (serde_json::to_string(&m.stats()).unwrap(), log)
    };
    let (a, la) = run();
    let (b, lb) = run();
    assert_eq!(a, b);
    assert_eq!(la, lb);
    assert!(la.len() > 1000);
}

#[test]
fn config_serde_round_trip_and_unknown_fields() {
    let mut cfg = maxwell16();
    // A translation section switched off is not written (so a configuration without
    // translation serializes as it did before translation existed); it reads back as no
    // section, which means the same. Switched on, it round-trips.
    let json = serde_json::to_string(&cfg).unwrap();
    let back: MemConfig = serde_json::from_str(&json).unwrap();
    assert!(!cfg.translation.as_ref().unwrap().enabled);
    assert!(back.translation.is_none() && !json.contains("translation"));
    assert_eq!(
        MemConfig {
            translation: cfg.translation.clone(),
            ..back
        },
        cfg
    );
    cfg.translation.as_mut().unwrap().enabled = true;
    let json = serde_json::to_string(&cfg).unwrap();
    let back: MemConfig = serde_json::from_str(&json).unwrap();
    assert_eq!(back, cfg);
    let bad = json.replacen("\"num_sms\"", "\"num_smz\"", 1);
    let err = serde_json::from_str::<MemConfig>(&bad)
        .unwrap_err()
        .to_string();
    assert!(err.contains("num_smz"), "{err}");
    let mut invalid = cfg;
    invalid.l2_slices = 15;
    assert!(invalid
        .validate()
        .unwrap_err()
        .to_string()
        .contains("l2_slices"));
}

#[test]
fn preset_stream_is_latency_bound_by_l1_mshrs() {
    // With GTX480's 32 L1 MSHRs per SM, 15 SMs keep 480 lines in flight: by Little's law the
    // stream is bound by MSHRs × line / latency rather than by the DRAM bus.
    let cfg = gtx480();
    let (s, util) = stream(cfg.clone(), 6_000, |i| i * 128);
    let secs = s.core_cycles as f64 / (cfg.clocks.core_mhz * 1e6);
    let gbs = s.dram_total.bytes as f64 / secs / 1e9;
    let mean = s.total_latency_core_cycles as f64 / s.accesses_completed as f64;
    let bound = (cfg.num_sms * cfg.l1.mshr_entries as usize * 128) as f64
        / (mean / (cfg.clocks.core_mhz * 1e6))
        / 1e9;
    eprintln!(
        "gtx480 stream: DRAM bus {:.1} %, {gbs:.1} GB/s, mean latency {mean:.0} core cycles, MSHR bound {bound:.1} GB/s, \
         reply network utilisation {:.1} %",
        util * 100.0,
        s.icnt_reply.utilisation(cfg.num_sms) * 100.0
    );
    assert!(gbs <= bound * 1.1);
    assert!(util > 0.3);
}

#[test]
fn unloaded_latencies_of_every_preset() {
    // Every preset's derived latencies hold, and the recent GPUs land near the published
    // microbenchmark figures their files cite (L2 hit, DRAM read; core cycles).
    let targets = [
        ("fault-study", None),
        ("gtx980", None),
        ("k20c", None),
        ("v100", Some((193, 400))),
        ("a100", Some((200, 480))),
        ("h100", Some((260, 550))),
    ];
    for (name, target) in targets {
        let (_, l2, dram) = check_latencies(memsys::presets::preset(name).unwrap());
        if let Some((t2, td)) = target {
            assert!(l2.abs_diff(t2) * 10 <= t2, "{name}: L2 {l2} vs about {t2}");
            assert!(
                dram.abs_diff(td) * 10 <= td,
                "{name}: DRAM {dram} vs about {td}"
            );
        }
    }
}

/// gtx480's memory with Table 6.1's translation (papers/tanasic-thesis §6.5.1) switched on.
fn translated(page_kb: u32) -> MemConfig {
    let mut cfg = gtx480();
    cfg.translation = Some(memsys::TranslationSpec {
        enabled: true,
        page_kb,
        l1_tlb: memsys::TlbSpec {
            entries: 32,
            assoc: 8,
            latency: 40,
            mshrs: 32,
        },
        l2_tlb: memsys::TlbSpec {
            entries: 1024,
            assoc: 8,
            latency: 70,
            mshrs: 128,
        },
        walkers: 64,
        walk_latency: 500,
        faults: None,
        pipeline: memsys::Pipeline::Stall,
        operand_log_bytes: memsys::OPERAND_LOG_BYTES,
        tb_switch: memsys::TbSwitch::Off,
        tb_switch_extra: memsys::TB_SWITCH_EXTRA,
    });
    cfg
}

#[test]
fn translation_adds_the_tlb_latencies_to_an_access() {
    let plain = gtx480();
    let cfg = translated(4);
    let t = cfg.translation.clone().unwrap();
    let (mut off, mut on) = (
        MemorySystem::new(plain).unwrap(),
        MemorySystem::new(cfg).unwrap(),
    );
    let a = 0x40_0000;
    // Cold: the L1 TLB misses, the L2 TLB misses, one walk; then the cold memory access.
    let cold_off = run_one(&mut off, 0, load(a, 1)).latency();
    let cold_on = run_one(&mut on, 0, load(a, 1)).latency();
    let walk = t.l1_tlb.latency + t.l2_tlb.latency + t.walk_latency;
    assert!(
        cold_on.abs_diff(cold_off + walk) <= 1,
        "cold: {cold_on} vs {cold_off} + {walk}"
    );
    // Warm, same page, another line: an L1 TLB hit costs its latency only.
    let warm_off = run_one(&mut off, 0, load(a + 128, 2)).latency();
    let warm_on = run_one(&mut on, 0, load(a + 128, 2)).latency();
    assert!(
        warm_on.abs_diff(warm_off + t.l1_tlb.latency) <= 1,
        "warm: {warm_on} vs {warm_off} + {}",
        t.l1_tlb.latency
    );
    let s = on.stats().translation.expect("translation statistics");
    assert_eq!(s.walks, 1);
    assert_eq!((s.l1_tlb.lookups, s.l1_tlb.hits), (2, 1));
    assert_eq!(s.accesses, 2);
    assert!(off.stats().translation.is_none());
}

#[test]
fn a_full_l1_tlb_refuses_and_the_refusal_is_counted() {
    let mut cfg = translated(4);
    cfg.translation.as_mut().unwrap().l1_tlb.mshrs = 1;
    let mut m = MemorySystem::new(cfg).unwrap();
    assert!(m.issue(0, load(0, 1)).is_ok());
    // Another page while the first is being walked: no MSHR.
    let before = m.issue_state(0);
    assert_eq!(m.issue(0, load(1 << 20, 2)), Err(Stall::TlbMshrFull));
    assert_eq!(m.issue_state(0), before, "a refusal changes nothing");
    // The same page merges.
    assert!(m.issue(0, load(128, 3)).is_ok());
    assert_eq!(m.stats().translation.unwrap().stall_cycles, 1);
    assert!(m.run_until_idle(1_000_000));
    assert!(m.issue(0, load(1 << 20, 2)).is_ok());
}

#[test]
fn page_size_sets_the_walks_of_a_strided_sweep() {
    // 64 loads 8 KiB apart cover 512 KiB: 64 pages of 4 KiB, 8 of 64 KiB, 1 of 2 MiB.
    for (kb, pages) in [(4, 64), (64, 8), (2048, 1)] {
        let mut m = MemorySystem::new(translated(kb)).unwrap();
        for i in 0..64u64 {
            run_one(&mut m, 0, load(0x100_0000 + i * 8192, i));
        }
        assert_eq!(m.stats().translation.unwrap().walks, pages, "{kb} KiB");
    }
}

/// `translated(4)` with demand paging: §6.5.3's PCIe costs, 64 KiB regions.
fn paging() -> (MemConfig, u64) {
    let mut cfg = translated(4);
    cfg.translation.as_mut().unwrap().faults = Some(memsys::FaultSpec {
        link: memsys::Link::Pcie,
        granularity_kb: 64,
        batch_size: 256,
        pcie: memsys::FaultCosts {
            transfer_us: 25.0,
            alloc_us: 12.0,
        },
        nvlink: memsys::FaultCosts {
            transfer_us: 12.0,
            alloc_us: 10.0,
        },
        handler: memsys::Handler::Cpu,
        gpu_handler_us: memsys::fault::GPU_HANDLER_US,
    });
    let transfer = (25.0 * cfg.clocks.core_mhz).round() as u64;
    (cfg, transfer)
}

/// A managed range faults once per 64 KiB region on its first touch, each fault adding its
/// cost to the access's latency; other pages of a migrated region and later touches walk
/// without faulting; unmanaged memory never faults.
#[test]
fn managed_memory_faults_once_per_region() {
    let (cfg, transfer) = paging();
    let base = 0x100_0000;
    let region = 64 << 10;
    let mut plain = MemorySystem::new(translated(4)).unwrap();
    let mut m = MemorySystem::new(cfg).unwrap();
    assert!(m.manage(base, 4 * region, memsys::Populate::HostData));
    assert!(!plain.manage(base, 4 * region, memsys::Populate::HostData));
    let faults = |m: &MemorySystem| m.stats().translation.unwrap().faults.unwrap();
    // The first touch of region 0: a walk, a fault serviced alone, then the cold access.
    let cold = run_one(&mut plain, 0, load(base, 1)).latency();
    let first = run_one(&mut m, 0, load(base, 1)).latency();
    assert!(
        first.abs_diff(cold + transfer) <= 1,
        "{first} vs {cold} + {transfer}"
    );
    assert_eq!((faults(&m).far_faults, faults(&m).batches), (1, 1));
    // Another 4 KiB page of the migrated region: a walk, no fault.
    let other = run_one(&mut plain, 0, load(base + 8192, 2)).latency();
    assert_eq!(run_one(&mut m, 0, load(base + 8192, 2)).latency(), other);
    assert_eq!(faults(&m).far_faults, 1);
    // Every region's first page, twice: three more faults, then none.
    for round in 0..2 {
        for r in 0..4 {
            run_one(
                &mut m,
                0,
                load(base + r * region + 4096, 10 + r + 4 * round),
            );
        }
    }
    let f = faults(&m);
    assert_eq!(
        (f.far_faults, f.regions_migrated, f.batches, f.merged),
        (4, 4, 4, 0)
    );
    assert_eq!(f.faulted_accesses, 4);
    assert!(f.fault_cycles >= 4 * transfer);
    // Unmanaged memory beside it.
    run_one(&mut m, 0, load(base + 8 * region, 99));
    assert_eq!(faults(&m).far_faults, 4);
}

/// Two SMs touching two regions in the same cycle raise their faults together: one batch
/// services both, one after the other, and both accesses complete after it.
#[test]
fn faults_raised_together_share_a_batch() {
    let (cfg, transfer) = paging();
    let base = 0x100_0000;
    let region = 64 << 10;
    let mut m = MemorySystem::new(cfg).unwrap();
    m.manage(base, 2 * region, memsys::Populate::HostData);
    assert!(m.issue(0, load(base, 1)).is_ok());
    assert!(m.issue(1, load(base + region, 2)).is_ok());
    let mut done = [None, None];
    for _ in 0..10_000_000 {
        for (sm, d) in done.iter_mut().enumerate() {
            if let Some(c) = m.pop_completed(sm) {
                *d = Some(c.latency());
            }
        }
        if done.iter().all(Option::is_some) {
            break;
        }
        m.tick();
    }
    let f = m.stats().translation.unwrap().faults.unwrap();
    assert_eq!((f.far_faults, f.batches), (2, 1));
    assert_eq!(f.busy_cycles, 2 * transfer);
    for d in done {
        assert!(d.unwrap() > 2 * transfer, "{d:?}");
    }
}

/// With 2 MiB pages, a fault migrates its whole page: two touches 1 MiB apart fault once.
#[test]
fn a_page_larger_than_the_granularity_faults_whole() {
    let (mut cfg, _) = paging();
    cfg.translation.as_mut().unwrap().page_kb = 2048;
    let mut m = MemorySystem::new(cfg).unwrap();
    let base = 0x400_0000;
    m.manage(base, 4 << 20, memsys::Populate::HostData);
    run_one(&mut m, 0, load(base, 1));
    run_one(&mut m, 0, load(base + (1 << 20), 2));
    let f = m.stats().translation.unwrap().faults.unwrap();
    assert_eq!((f.far_faults, f.regions_migrated), (1, 1));
}

#[test]
fn a_partition_maps_its_addresses_into_its_own_channels_one_to_one() {
    let cfg = gtx480();
    let spc = cfg.l2_slices / cfg.dram_channels;
    let all = memsys::Channels::all(&cfg);
    let part = memsys::Channels { first: 2, count: 2 };
    let mut seen = std::collections::HashSet::new();
    for line in 0..8192u64 {
        let addr = line * cfg.line_bytes;
        assert_eq!(cfg.locate_in(addr, all), cfg.locate(addr));
        let loc = cfg.locate_in(addr, part);
        assert!((2..4).contains(&loc.channel), "{addr:#x} went to {loc:?}");
        assert_eq!(
            loc.slice / spc,
            loc.channel,
            "a slice of the line's channel"
        );
        // No two lines share a slice's line or a channel's DRAM line.
        assert!(
            seen.insert((loc.slice, loc.slice_addr)),
            "{addr:#x}: {loc:?}"
        );
        assert!(seen.insert((usize::MAX - loc.channel, loc.dram_addr)));
    }
}

/// SM 0 loads `lines` lines one after another (the next when the last completes) while, if
/// `aggressors`, SMs 8 and up stream loads of their own; returns SM 0's completion cycles.
/// `mig`: the memory cut into two instances, SMs 0–7 and 8–14.
fn victim_beside(mig: bool, aggressors: bool, lines: u64) -> Vec<u64> {
    let cfg = dram_bound();
    let n = cfg.num_sms;
    let mut m = MemorySystem::new(cfg.clone()).unwrap();
    if mig {
        let instance: Vec<Option<u32>> = (0..n).map(|sm| Some(u32::from(sm >= 8))).collect();
        m.partition(&instance, 2).unwrap();
    }
    let mut done = Vec::new();
    let mut waiting = false;
    let mut next_aggr = vec![0u64; n];
    while (done.len() as u64) < lines {
        core_step(&mut m);
        if m.pop_completed(0).is_some() {
            done.push(m.core_cycle());
            waiting = false;
        }
        if !waiting && (done.len() as u64) < lines {
            let k = done.len() as u64;
            // Far apart, so every load misses to DRAM.
            waiting = m.issue(0, load(k * 4096 * cfg.line_bytes, k)).is_ok();
        }
        if aggressors {
            for (sm, k) in next_aggr.iter_mut().enumerate().skip(8) {
                while m.pop_completed(sm).is_some() {}
                let line = (1 << 24) + *k * n as u64 + sm as u64;
                if m.issue(sm, load(line * cfg.line_bytes, line)).is_ok() {
                    *k += 1;
                }
            }
        }
    }
    done
}

#[test]
fn mig_partitions_keep_one_instance_s_traffic_from_slowing_another() {
    // Shared memory: the streams slow SM 0's loads (the test can see interference).
    let shared_alone = victim_beside(false, false, 40);
    let shared_beside = victim_beside(false, true, 40);
    assert!(
        shared_beside.last() > shared_alone.last(),
        "shared: {shared_alone:?} against {shared_beside:?}"
    );
    // Partitioned: not a cycle of difference.
    let mig_alone = victim_beside(true, false, 40);
    let mig_beside = victim_beside(true, true, 40);
    assert_eq!(mig_alone, mig_beside);
}

#[test]
fn a_partition_needs_an_instance_and_an_unused_memory() {
    let cfg = gtx480();
    let n = cfg.num_sms;
    let mut m = MemorySystem::new(cfg.clone()).unwrap();
    let every = vec![Some(0); n];
    // Two instances of the 6 channels: 3 each, in order; an SM of no instance keeps all.
    let mut two: Vec<Option<u32>> = (0..n).map(|sm| Some(u32::from(sm >= 7))).collect();
    two[14] = None;
    m.partition(&two, 2).unwrap();
    let of = |m: &MemorySystem, sm| (m.channels_of(sm).first, m.channels_of(sm).count);
    assert_eq!((of(&m, 0), of(&m, 7), of(&m, 14)), ((0, 3), (3, 3), (0, 6)));
    // More instances than channels: one channel each, neighbours sharing (⌊j × 6 / 7⌋).
    let seven: Vec<Option<u32>> = (0..n).map(|sm| Some((sm % 7) as u32)).collect();
    m.partition(&seven, 7).unwrap();
    let firsts: Vec<usize> = (0..7).map(|sm| m.channels_of(sm).first).collect();
    assert_eq!(firsts, [0, 0, 1, 2, 3, 4, 5]);
    assert!((0..7).all(|sm| m.channels_of(sm).count == 1));
    let e = m.partition(&every[1..], 2).unwrap_err().to_string();
    assert!(e.contains("for 14 SMs"), "{e}");
    let e = m.partition(&vec![Some(2); n], 2).unwrap_err().to_string();
    assert!(e.contains("instance 2 of 2"), "{e}");
    run_one(&mut m, 0, load(0, 0));
    let e = m.partition(&every, 2).unwrap_err().to_string();
    assert!(e.contains("already been used"), "{e}");
}

/// With a pipeline that replays (papers/tanasic-thesis §6.3), a faulting access leaves the
/// SM's front end when its fault is detected (its walk's end) and frees its access slot:
/// with one slot per SM, the SM's next access is accepted and completes while the fault is
/// outstanding, where stall on fault refuses it until the fault is serviced. The squashed
/// access comes back to the SM once (`pop_squashed`), and its tag once more when the fault
/// has been serviced (`pop_serviced`); it never completes itself.
#[test]
fn a_squashed_access_frees_its_slot_until_its_fault_is_serviced() {
    let base = 0x100_0000;
    let resident = 0x800_0000;
    for pipeline in [memsys::Pipeline::Stall, memsys::Pipeline::WdCommit] {
        let (mut cfg, transfer) = paging();
        cfg.max_outstanding_accesses = 1;
        cfg.translation.as_mut().unwrap().pipeline = pipeline;
        let walk = 40 + 70 + 500;
        let mut m = MemorySystem::new(cfg).unwrap();
        m.manage(base, 64 << 10, memsys::Populate::HostData);
        assert!(m.issue(0, load(base, 1)).is_ok());
        let start = m.core_cycle();
        // The second access, offered every cycle until taken.
        let mut taken = None;
        let (mut squashed, mut serviced, mut done) = (vec![], vec![], vec![]);
        while m.core_cycle() < start + 2 * transfer {
            if taken.is_none() && m.issue(0, load(resident, 2)).is_ok() {
                taken = Some(m.core_cycle() - start);
            }
            while let Some(a) = m.pop_squashed(0) {
                squashed.push((m.core_cycle() - start, a.tag));
            }
            while let Some(t) = m.pop_serviced(0) {
                serviced.push((m.core_cycle() - start, t));
            }
            while let Some(c) = m.pop_completed(0) {
                done.push((m.core_cycle() - start, c.tag));
            }
            core_step(&mut m);
        }
        let taken = taken.expect("the second access is taken");
        if pipeline == memsys::Pipeline::Stall {
            assert!(squashed.is_empty() && serviced.is_empty());
            assert!(taken > transfer, "stall: taken at {taken}");
            assert_eq!(done.iter().map(|d| d.1).collect::<Vec<_>>(), [1, 2]);
            continue;
        }
        // Squashed at the walk's end (a cycle after, as the front end looks each cycle).
        assert_eq!(squashed.len(), 1);
        assert_eq!(squashed[0].1, 1);
        assert!(squashed[0].0.abs_diff(walk) <= 2, "{squashed:?}");
        assert!(taken.abs_diff(walk) <= 2, "taken at {taken}");
        assert_eq!(done.len(), 1, "only the second access completes: {done:?}");
        assert_eq!(done[0].1, 2);
        assert!(done[0].0 < transfer, "{done:?}");
        assert_eq!(serviced.len(), 1);
        assert_eq!(serviced[0].1, 1);
        assert!(serviced[0].0 > transfer, "{serviced:?}");
    }
}

#[test]
fn dram_traffic_is_charged_to_the_access_that_caused_it() {
    // Owner 1 misses in the L2 (a DRAM fetch of the line's 4 sectors); owner 2 reads the
    // same line from another SM afterwards and hits: it costs the DRAM nothing. Then owner
    // 3's stores into a tiny L2 evict dirty lines: their write-backs are its.
    let mut m = MemorySystem::new(gtx480()).unwrap();
    let of = |o: u32, a: MemAccess| MemAccess { owner: o, ..a };
    run_one(&mut m, 0, of(1, load(0, 0)));
    run_one(&mut m, 1, of(2, load(0, 1)));
    assert!(m.run_until_idle(1_000_000));
    assert_eq!((m.dram_bytes(1), m.dram_bytes(2)), (128, 0));
    assert_eq!(m.dram_bytes(0), 0, "owner 0 sent nothing");
    // The interconnect is charged per owner too: each read's request packet (header only)
    // and its reply (header and the 4 sectors it asked for).
    let cfg = gtx480();
    let read = u64::from(cfg.icnt_request.flits(0) + cfg.icnt_reply.flits(128));
    assert_eq!(
        (m.noc_flits(1), m.noc_flits(2), m.noc_flits(0)),
        (read, read, 0)
    );

    let mut cfg = gtx480();
    cfg.l2.size_bytes = 2 * 1024;
    cfg.l2.assoc = 2;
    let mut m = MemorySystem::new(cfg).unwrap();
    for i in 0..512u64 {
        let st = MemAccess {
            kind: AccessKind::Store,
            ..of(3, load(i * 128, i))
        };
        run_one(&mut m, 0, st);
    }
    assert!(m.run_until_idle(1_000_000));
    let s = m.stats();
    assert!(s.dram_total.writes > 0);
    // Every DRAM byte moved is charged to someone, and here all to owner 3.
    let moved = (s.dram_total.reads + s.dram_total.writes) * 128;
    assert!(
        m.dram_bytes(3) > 0 && m.dram_bytes(3) <= moved,
        "{} of {moved}",
        m.dram_bytes(3)
    );
}

#[test]
fn a_bypassed_l1_is_neither_looked_up_nor_filled() {
    // A line loaded twice: the second load hits in the L1. With the L1 bypassed
    // (GPUDuet's context store, papers/lin-thesis §3.6.4), both go to the L2, the second
    // as an L2 hit, and neither touches the L1's counters; switched back, the L1 serves
    // again what it held before.
    let mut m = MemorySystem::new(gtx480()).unwrap();
    let first = run_one(&mut m, 0, load(0x2000, 1));
    let hit = run_one(&mut m, 0, load(0x2000, 2));
    let l1_hit = hit.completed - hit.issued;
    assert!(l1_hit < first.completed - first.issued);
    let before = m.stats();
    m.set_l1_bypass(0, true);
    assert!(m.l1_bypassed(0));
    let bypassed = run_one(&mut m, 0, load(0x2000, 3));
    let after = m.stats();
    assert_eq!(
        after.l1_total.accesses, before.l1_total.accesses,
        "a bypassed load looked up the L1"
    );
    assert_eq!(after.icnt_request.packets, before.icnt_request.packets + 1);
    assert_eq!(after.l2_total.hits, before.l2_total.hits + 1);
    assert!(bypassed.completed - bypassed.issued > l1_hit);
    // Bypassed, two loads of one line are two requests: no MSHR merges them.
    m.issue(0, load(0x3000, 4)).unwrap();
    core_step(&mut m);
    m.issue(0, load(0x3000, 5)).unwrap();
    assert!(m.run_until_idle(1_000_000));
    let s = m.stats();
    assert_eq!(s.icnt_request.packets, after.icnt_request.packets + 2);
    assert_eq!(s.l1_total.mshr_merges, after.l1_total.mshr_merges);
    while m.pop_completed(0).is_some() {}
    m.set_l1_bypass(0, false);
    let again = run_one(&mut m, 0, load(0x2000, 6));
    assert_eq!(again.completed - again.issued, l1_hit);
}

/// A refused access offered again to an unchanged memory system counts what the first
/// refusal counted, whether it is looked up again (`offer`) or only counted again
/// (`repeat_refusal`, what an SM whose LD/ST unit holds a refused access uses every
/// cycle): two systems driven alike, one retrying each refusal and the other repeating
/// it, keep the same statistics throughout. Small MSHRs, merge limits, access slots and
/// network buffers make every kind of refusal happen, in both caches.
#[test]
fn repeated_refusals_count_as_offers_would() {
    let mut cfg = gtx480();
    cfg.l1.mshr_entries = 4;
    cfg.l1.mshr_max_merge = 2;
    cfg.const_cache.mshr_entries = 2;
    cfg.const_cache.mshr_max_merge = 2;
    cfg.max_outstanding_accesses = 6;
    cfg.icnt_request.input_buffer = 2;
    let mut retried = MemorySystem::new(cfg.clone()).unwrap();
    let mut repeated = MemorySystem::new(cfg).unwrap();
    // xorshift64: a fixed, dependency-free sequence of accesses.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    let mut seen = std::collections::BTreeMap::new();
    for cycle in 0..4000u64 {
        for sm in 0..2 {
            for _ in 0..next(3) {
                let (kind, space) = match next(6) {
                    0 => (AccessKind::Store, Space::Global),
                    1 => (AccessKind::Load, Space::Const),
                    _ => (AccessKind::Load, Space::Global),
                };
                // Distinct lines, as the coalescer makes them (`MemAccess::lines`).
                let mut addrs: Vec<u64> = (0..1 + next(5)).map(|_| next(24) * 128).collect();
                addrs.sort_unstable();
                addrs.dedup();
                let lines = addrs
                    .into_iter()
                    .map(|line_addr| LineRequest {
                        line_addr,
                        sectors: 1 + next(15) as u8,
                    })
                    .collect();
                let a = MemAccess {
                    kind,
                    space,
                    lines,
                    ..load(0, cycle)
                };
                let r = retried.offer(sm, &a);
                assert_eq!(repeated.offer(sm, &a).map(|_| ()), r.map(|_| ()));
                let Err(stall) = r else { continue };
                let use_const = space == Space::Const && kind == AccessKind::Load;
                *seen
                    .entry((format!("{stall:?}"), use_const))
                    .or_insert(0u32) += 1;
                assert_eq!(retried.issue_state(sm), repeated.issue_state(sm));
                assert_eq!(retried.offer(sm, &a).map(|_| ()), Err(stall));
                repeated.repeat_refusal(sm, &a, stall);
                assert_eq!(
                    retried.stats(),
                    repeated.stats(),
                    "cycle {cycle}, {stall:?}"
                );
            }
        }
        core_step(&mut retried);
        core_step(&mut repeated);
    }
    for want in [
        ("MshrFull", false),
        ("MshrFull", true),
        ("MergeLimit", false),
        ("L1Busy", false),
        ("TooManyOutstanding", false),
        ("InterconnectFull", false),
    ] {
        assert!(
            seen.contains_key(&(want.0.to_string(), want.1)),
            "no {want:?} refusal among {seen:?}"
        );
    }
}
