//! Several kernels co-resident on one SM under limits and issue quotas (papers/lin-thesis
//! ch. 4), on the single-SM harness: each launch stays within its TB, warp, register and
//! shared-memory limits beside the SM's own capacities, launches without limits take what
//! is left, every launch's results are right, and issue quotas share the schedulers'
//! issue slots in their ratio.

use super::control::Request;
use super::ids::LaunchId;
use super::ledger::KernelLimits;
use crate::config::GpuConfig;
use crate::harness::{HarnessSpec, SmHarness, SM};
use crate::host::{DevPtr, KernelArg};
use crate::memory::DeviceMemory;

/// `out[gid] = gid * n + v` (mod 2^32), summed in a loop of `n` iterations.
const FILL: &str = r#"
.version 7.0
.target sm_70
.address_size 64
.visible .entry fill(.param .u64 out, .param .u32 n, .param .u32 v)
{
    .reg .pred %p<2>;
    .reg .b32 %r<10>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r1, [n];
    ld.param.u32 %r4, [v];
    mov.u32 %r5, %ctaid.x;
    mov.u32 %r6, %ntid.x;
    mov.u32 %r7, %tid.x;
    mad.lo.u32 %r2, %r5, %r6, %r7;
    mov.u32 %r3, 0;
L:
    add.u32 %r3, %r3, %r2;
    add.u32 %r1, %r1, -1;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra L;
    add.u32 %r3, %r3, %r4;
    mul.wide.u32 %rd2, %r2, 4;
    add.u64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r3;
    exit;
}
"#;

const BLOCK: u32 = 64;

struct Launch {
    id: LaunchId,
    out: u64,
    tbs: u32,
    n: u32,
    v: u32,
}

/// A harness with the launches `(tbs, n, v)` of `fill`, each with its own output.
fn launches(specs: &[(u32, u32, u32)]) -> (SmHarness, Vec<Launch>) {
    let mut memory = DeviceMemory::default();
    let outs: Vec<u64> = specs
        .iter()
        .map(|&(tbs, _, _)| memory.alloc(u64::from(tbs * BLOCK) * 4))
        .collect();
    let args = |out: u64, n: u32, v: u32| {
        vec![
            KernelArg::Ptr(DevPtr(out)),
            KernelArg::U32(n),
            KernelArg::U32(v),
        ]
    };
    let (tbs, n, v) = specs[0];
    let mut h = SmHarness::new(HarnessSpec {
        gpu: GpuConfig::preset("gtx480").expect("preset"),
        ptx: FILL,
        kernel: "fill",
        grid: [tbs, 1, 1],
        block: [BLOCK, 1, 1],
        args: args(outs[0], n, v),
        latency: 50,
        memory,
    })
    .expect("harness");
    let mut out = vec![Launch {
        id: h.launch(),
        out: outs[0],
        tbs,
        n,
        v,
    }];
    for (&(tbs, n, v), &o) in specs.iter().zip(&outs).skip(1) {
        let id = h
            .submit("fill", [tbs, 1, 1], [BLOCK, 1, 1], &args(o, n, v))
            .expect("submit");
        out.push(Launch {
            id,
            out: o,
            tbs,
            n,
            v,
        });
    }
    (h, out)
}

/// Every launch wrote `gid * n + v`.
fn check_results(h: &SmHarness, launches: &[Launch]) {
    for l in launches {
        let bytes = h
            .machine()
            .memory()
            .read_bytes(l.out, u64::from(l.tbs * BLOCK) * 4)
            .expect("mapped");
        for gid in 0..l.tbs * BLOCK {
            let got = u32::from_le_bytes(bytes[gid as usize * 4..][..4].try_into().unwrap());
            assert_eq!(
                got,
                gid.wrapping_mul(l.n).wrapping_add(l.v),
                "{} thread {gid}",
                l.id
            );
        }
    }
}

/// Dispatches, launch by launch, every TB that fits (within the launch's limits).
fn dispatch_all(h: &mut SmHarness, launches: &[Launch]) {
    for l in launches {
        while h.machine().launch(l.id).undispatched() > 0 && h.machine().fits(SM, l.id) {
            h.dispatch_of(l.id).expect("fits");
        }
    }
}

fn run_with_limits(three: bool) {
    let specs: &[(u32, u32, u32)] = if three {
        &[(6, 300, 7), (6, 200, 11), (6, 100, 13)]
    } else {
        &[(6, 300, 7), (6, 200, 11)]
    };
    let (mut h, ls) = launches(specs);
    let limits = [
        KernelLimits {
            tbs: Some(2),
            ..KernelLimits::default()
        },
        KernelLimits {
            warps: Some(6),
            ..KernelLimits::default()
        },
    ];
    for (l, limits) in ls.iter().zip(limits) {
        h.request(Request::Limit {
            sm: SM,
            launch: l.id,
            limits,
        })
        .expect("limits");
    }
    let mut together = 0;
    for _ in 0..200_000 {
        dispatch_all(&mut h, &ls);
        let ledger = h.machine().ledger(SM);
        let usage: Vec<_> = ls.iter().map(|l| ledger.usage(l.id)).collect();
        assert!(usage[0].tbs <= 2, "launch 0 over its TB limit: {usage:?}");
        assert!(
            usage[1].warps <= 6,
            "launch 1 over its warp limit: {usage:?}"
        );
        together = together.max(usage.iter().filter(|u| u.tbs > 0).count());
        if h.machine().is_idle() && ls.iter().all(|l| h.machine().launch(l.id).done() == 6) {
            break;
        }
        h.step().unwrap();
    }
    assert_eq!(together, ls.len(), "every launch was resident at once");
    for l in &ls {
        assert_eq!(h.machine().launch(l.id).done(), 6, "{} finished", l.id);
    }
    check_results(&h, &ls);
}

#[test]
fn two_kernels_share_an_sm_within_their_limits() {
    run_with_limits(false);
}

#[test]
fn three_kernels_share_an_sm_within_their_limits() {
    run_with_limits(true);
}

/// Warp instructions two co-resident launches issue over a window, with issue quotas `qa`
/// and `qb` per epoch (`None`: no quota).
fn issued_with_quotas(qa: Option<u32>, qb: Option<u32>) -> (u64, u64) {
    // One TB of each, long loops: both stay resident through the window.
    let (mut h, ls) = launches(&[(1, 100_000, 1), (1, 100_000, 2)]);
    for (l, q) in ls.iter().zip([qa, qb]) {
        h.request(Request::Limit {
            sm: SM,
            launch: l.id,
            limits: KernelLimits {
                issue_quota: q,
                ..KernelLimits::default()
            },
        })
        .expect("quota");
    }
    dispatch_all(&mut h, &ls);
    for _ in 0..500 {
        h.step().unwrap();
    }
    let start: Vec<u64> = ls
        .iter()
        .map(|l| h.machine().warp_instructions(l.id))
        .collect();
    for _ in 0..4000 {
        h.step().unwrap();
    }
    let n = |i: usize| h.machine().warp_instructions(ls[i].id) - start[i];
    (n(0), n(1))
}

#[test]
fn issue_quotas_share_the_schedulers_in_their_ratio() {
    let (a, b) = issued_with_quotas(None, None);
    let even = a as f64 / b as f64;
    assert!((0.8..1.25).contains(&even), "no quotas: {a} vs {b}");
    let (a, b) = issued_with_quotas(Some(3), Some(1));
    let ratio = a as f64 / b as f64;
    assert!((2.5..3.5).contains(&ratio), "quotas 3:1: {a} vs {b}");
    // A launch without a quota is not held back by one that has.
    let (a, b) = issued_with_quotas(None, Some(1));
    assert!(a > b, "unlimited {a} vs quota'd {b}");
}
