//! Extra TBs beyond the scheduling limits (papers/lin-thesis ch. 3, `sm::tlp`) on the
//! single-SM harness: an inactive TB issues nothing while its loads complete, a stalled TB
//! swaps with a ready one, the SM holds more TBs than its slots while its active warps stay
//! within them, and every result is right.

use super::control::Request;
use super::ids::TbRef;
use crate::config::GpuConfig;
use crate::harness::{HarnessSpec, SmHarness, SM};
use crate::host::{DevPtr, KernelArg};
use crate::memory::DeviceMemory;
use crate::tlp::{TlpConfig, TlpScheme};

/// `out[gid] = sum over i < n of in[(gid + 64 i) mod 4096] + gid`: a chain of dependent
/// loads (each waits for memory), then a store.
const CHASE: &str = r#"
.version 7.0
.target sm_70
.address_size 64
.visible .entry chase(.param .u64 out, .param .u64 in, .param .u32 n)
{
    .reg .pred %p<2>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [out];
    ld.param.u64 %rd4, [in];
    ld.param.u32 %r1, [n];
    mov.u32 %r5, %ctaid.x;
    mov.u32 %r6, %ntid.x;
    mov.u32 %r7, %tid.x;
    mad.lo.u32 %r2, %r5, %r6, %r7;
    mov.u32 %r3, %r2;
    mov.u32 %r8, %r2;
L:
    and.b32 %r9, %r8, 4095;
    mul.wide.u32 %rd5, %r9, 4;
    add.u64 %rd6, %rd4, %rd5;
    ld.global.u32 %r10, [%rd6];
    add.u32 %r3, %r3, %r10;
    add.u32 %r8, %r8, 64;
    add.u32 %r1, %r1, -1;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra L;
    mul.wide.u32 %rd2, %r2, 4;
    add.u64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r3;
    exit;
}
"#;

const BLOCK: u32 = 256;
const TBS: u32 = 24;
const N: u32 = 8;

fn input(i: u32) -> u32 {
    i.wrapping_mul(2_654_435_761) >> 7
}

/// One launch of `chase` ([`run_launches`]): the SM's counters, the TB-cycles checked
/// absent, the cycles taken, and the cycles with a TB partly absent.
fn run(scheme: TlpScheme) -> (crate::tlp::TlpCounters, u64, u64, u64) {
    let r = run_launches(scheme, N, false, 1);
    (r.counters, r.checked, r.cycles[0], r.partial)
}

/// [`run`] with `n` loads per thread, ME set by the throughput monitor when `dynamic`;
/// also the extra TBs at the end.
fn run_with(scheme: TlpScheme, n: u32, dynamic: bool) -> (crate::tlp::TlpCounters, u64, u64, u32) {
    let r = run_launches(scheme, n, dynamic, 1);
    (r.counters, r.checked, r.cycles[0], r.extra)
}

/// What [`run_launches`] saw.
struct Seen {
    counters: crate::tlp::TlpCounters,
    /// TB-cycles checked absent.
    checked: u64,
    /// Per launch: its cycles, and the most TBs resident in its first
    /// [`super::tlp_monitor::WARM_UP`] cycles.
    cycles: Vec<u64>,
    early_peak: Vec<u32>,
    /// The last launch's extra TBs at its end.
    extra: u32,
    /// Cycles that began with a TB partly absent (some of its warps, not all).
    partial: u64,
}

/// Runs `launches` launches of `chase` one after another on one `maxwell16` SM (64 warp
/// slots: 8 TBs of 8 warps) under `scheme`, dispatching whenever the SM admits a TB;
/// checks every cycle that the TBs absent as it began issue nothing in it, and every
/// result.
fn run_launches(scheme: TlpScheme, n: u32, dynamic: bool, launches: u32) -> Seen {
    let mut memory = DeviceMemory::default();
    let inp = memory.alloc(4096 * 4);
    let bytes: Vec<u8> = (0..4096).flat_map(|i| input(i).to_le_bytes()).collect();
    memory.write_bytes(inp, &bytes).expect("mapped");
    let out = memory.alloc(u64::from(TBS * BLOCK) * 4);
    let mut gpu = GpuConfig::preset("maxwell16").expect("preset");
    gpu.sm.tlp = TlpConfig {
        scheme,
        max_extra_tbs: 4,
        dynamic,
        ..TlpConfig::default()
    };
    let args = vec![
        KernelArg::Ptr(DevPtr(out)),
        KernelArg::Ptr(DevPtr(inp)),
        KernelArg::U32(n),
    ];
    let mut h = SmHarness::new(HarnessSpec {
        gpu,
        ptx: CHASE,
        kernel: "chase",
        grid: [TBS, 1, 1],
        block: [BLOCK, 1, 1],
        args: args.clone(),
        latency: 400,
        memory,
    })
    .expect("harness");
    let mut seen = Seen {
        counters: Default::default(),
        checked: 0,
        cycles: Vec::new(),
        early_peak: Vec::new(),
        extra: 0,
        partial: 0,
    };
    for i in 0..launches {
        let launch = if i == 0 {
            h.launch()
        } else {
            h.submit("chase", [TBS, 1, 1], [BLOCK, 1, 1], &args)
                .expect("submit")
        };
        let start = h.cycle();
        let mut early = 0;
        for _ in 0..1_000_000 {
            while h.machine().launch(launch).undispatched() > 0 && h.machine().fits(SM, launch) {
                h.request(Request::Dispatch { sm: SM, launch })
                    .expect("dispatch");
            }
            if h.machine().is_idle() && h.machine().launch(launch).undispatched() == 0 {
                break;
            }
            if h.cycle() - start < super::tlp_monitor::WARM_UP {
                early = early.max(h.machine().ledger(SM).used_tbs);
            }
            let absent: Vec<(TbRef, Option<u32>, Option<u64>)> = h.machine().sms[0]
                .tlp_absent()
                .into_iter()
                .map(|(tb, w)| (tb, w, executed(&h, tb, w)))
                .collect();
            let warps = (BLOCK / 32) as usize;
            let partly = absent.iter().any(|&(tb, w, _)| {
                w.is_some() && absent.iter().filter(|a| a.0 == tb).count() < warps
            });
            seen.partial += u64::from(partly);
            h.step().expect("step");
            for (tb, w, before) in absent {
                // A TB that finished in the cycle has left (its retired warps with it).
                let Some(after) = executed(&h, tb, w) else {
                    continue;
                };
                assert_eq!(
                    Some(after),
                    before,
                    "{tb:?} warp {w:?}, absent, issued at cycle {}",
                    h.cycle() - 1
                );
                seen.checked += 1;
            }
        }
        assert!(h.machine().is_idle(), "did not finish");
        seen.cycles.push(h.cycle() - start);
        seen.early_peak.push(early);
        seen.extra = h.machine().launch(launch).tlp.extra;
        let got = h
            .machine()
            .memory()
            .read_bytes(out, u64::from(TBS * BLOCK) * 4)
            .expect("mapped");
        for gid in 0..TBS * BLOCK {
            let want = (0..n).fold(gid, |s, i| s.wrapping_add(input((gid + 64 * i) & 4095)));
            let v = u32::from_le_bytes(got[gid as usize * 4..][..4].try_into().unwrap());
            assert_eq!(v, want, "thread {gid}");
        }
    }
    seen.counters = h.machine().sms[0].tlp_counters();
    seen
}

/// Warp instructions TB `tb` (its warp `warp` alone, when given) has executed (`None` once
/// it has left).
fn executed(h: &SmHarness, tb: TbRef, warp: Option<u32>) -> Option<u64> {
    h.machine().warps_of(SM, tb).map(|ws| {
        ws.iter()
            .filter(|w| warp.is_none_or(|i| i == w.index))
            .map(|w| w.executed)
            .sum()
    })
}

#[test]
fn inactive_tbs_issue_nothing_and_stalled_ones_swap_out() {
    let (off, _, base, _) = run(TlpScheme::Off);
    assert_eq!(off, Default::default());
    for scheme in [TlpScheme::Vt, TlpScheme::GpuduetTb, TlpScheme::Gpuduet] {
        let (c, checked, cycles, partial) = run(scheme);
        // Warp slots limit `chase`: GPUDuet switches warp by warp (§3.6.2), leaving TBs
        // partly present; the others switch whole TBs.
        assert_eq!(
            partial > 0,
            scheme == TlpScheme::Gpuduet,
            "{scheme:?}: {partial} cycles with a TB partly absent"
        );
        // 8 TBs by warp slots, 4 more resident and inactive.
        assert_eq!(c.peak_tbs, 12, "{scheme:?}: {c:?}");
        assert!(c.peak_active_warps <= 64, "{scheme:?}: {c:?}");
        assert!(
            c.switched_out > 0 && c.switched_in > c.switched_out,
            "{c:?}"
        );
        assert!(
            checked > 1000,
            "{scheme:?}: only {checked} absent TB-cycles"
        );
        // Registers and shared memory fit in place: a switch moves warp slots only.
        assert!(c.bytes < (c.switched_in + c.switched_out) * 8 * 64, "{c:?}");
        // Latency hidden by 4 more TBs of loads.
        assert!(
            cycles < base,
            "{scheme:?}: {cycles} cycles, baseline {base}"
        );
    }
}

#[test]
fn the_throughput_monitor_gives_an_underutilised_launch_its_bound_after_a_window() {
    // Dependent loads of 400 cycles: the schedulers idle (underutilised), so after the
    // warm-up and one window the launch gets the bound, 4 (the other classes:
    // `tlp_monitor::tests`).
    let (c, _, cycles, extra) = run_with(TlpScheme::Gpuduet, 64, true);
    assert!(cycles > 2 * super::tlp_monitor::WINDOW, "{cycles}");
    assert_eq!((extra, c.peak_tbs), (4, 12), "{c:?}");
    // Statically, the same from the start: fewer cycles.
    let (_, _, fixed, _) = run_with(TlpScheme::Gpuduet, 64, false);
    assert!(fixed < cycles, "static {fixed}, dynamic {cycles}");
}

#[test]
fn a_kernel_launched_again_starts_with_the_extra_tbs_its_monitor_found() {
    let r = run_launches(TlpScheme::Gpuduet, 64, true, 2);
    // The first launch warms up with its native 8 TBs; the second starts with 4 more.
    assert_eq!(r.early_peak, [8, 12], "{:?}", r.cycles);
    assert_eq!(r.extra, 4);
    assert!(r.cycles[1] < r.cycles[0], "{:?}", r.cycles);
}

#[test]
fn the_monitor_counts_a_short_kernel_over_its_launches() {
    // Launches shorter than the warm-up and a window together: the monitor goes on from
    // one to the next, and a later launch starts with the bound.
    let r = run_launches(TlpScheme::Gpuduet, 8, true, 4);
    let first = r.cycles[0];
    assert!(
        first < super::tlp_monitor::WARM_UP + super::tlp_monitor::WINDOW,
        "{:?}",
        r.cycles
    );
    assert_eq!(r.early_peak[0], 8, "{:?}", r.early_peak);
    assert_eq!(*r.early_peak.last().unwrap(), 12, "{:?}", r.early_peak);
    assert_eq!(r.extra, 4);
}
