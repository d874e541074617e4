//! CCBP's Algorithm 1 (papers/lin-thesis §4.5.2): the TB combination per SM and each
//! kernel's share of the interconnect (NoC) and DRAM bandwidth, chosen together by dominant
//! resource fairness over static *and* bandwidth resources.
//!
//! Each kernel has a type (§4.3.2): *latency sensitive* (its dominant resource is the
//! static resources that bound its TB count), *NoC intensive* or *DRAM intensive* (its
//! dominant resource is that bandwidth). Repeatedly, the kernel with the lowest dominant
//! share asks for one more unit of its dominant resource: a latency-sensitive kernel one
//! more TB (with the bandwidth it uses alone at that count); a bandwidth-intensive kernel
//! one more unit of its bandwidth, and one more TB only when the TBs it has could not use
//! that much alone (Algorithm 1, lines 8–21; its other bandwidth scales with the first).
//! The request is granted if the TBs fit on the SM beside the others' and the bandwidth
//! granted to all stays within the sustainable bandwidth; otherwise the kernel is done.
//! A bandwidth-intensive kernel's grant becomes its quota of requests towards the L2 per
//! [`gpu::timing::IRC_WINDOW`] core cycles per SM (its issue rate controller, §4.5.1); a
//! latency-sensitive kernel is not limited.
//!
//! Units. NoC bandwidth is counted in interconnect flits per IRC window per SM (a kernel's
//! request packets and their replies, over both networks); DRAM bandwidth in cache lines
//! of DRAM traffic per window per SM. One unit of either is what Algorithm 1 adds at a
//! time. The issue rate controller counts requests (misses, stores, atomics), so a grant
//! becomes a quota at the kernel's own flits (or DRAM lines) per request alone at its TB
//! count: the "factors of a kernel" from which §4.5.1 derives "the average NoC and DRAM
//! consumption of a memory request". The curves (each kernel alone at 1, 2, … TBs per
//! SM) are measured by the caller (`experiment::corun`, offline).
//!
//! What is ours. The thesis's copy at hand ends after Algorithm 1: §4.5.3–4.5.5 (how a
//! request's bandwidth is derived, how kernels are classified, `DomShareCal` and the
//! priority of latency-sensitive kernels) are missing. So:
//! - the sustainable bandwidths are §4.3.2's observations, 60% of the crossbar's peak
//!   ([`NOC_SUSTAINABLE`]) and 60–70% of DRAM's ([`DRAM_SUSTAINABLE`], the middle);
//! - a kernel is bandwidth intensive when alone it uses at least [`BANDWIDTH_INTENSIVE`] of
//!   a sustainable bandwidth (Table 4.2's NoC- and DRAM-intensive kernels run near it, its
//!   latency-sensitive ones far below), of the one it uses the larger share of;
//! - a dominant share is the largest fraction of a static resource the kernel's TBs hold,
//!   divided by `prior_lsk` for a latency-sensitive kernel (a priority above 1 lets it
//!   grow earlier), or the fraction of the sustainable bandwidth granted to a
//!   bandwidth-intensive one;
//! - the NoC peak is what an SM's ports on the two networks move
//!   (`memsys::MemConfig::noc_flits_per_sm_core_cycle`).

use gpu::occupancy::SmResources;
use gpu::timing::IRC_WINDOW;
use serde::Serialize;

use crate::corun::{dominant, fits, Capacity, Corunner};
use crate::tables::KernelCounts;

/// The share of the crossbar's peak bandwidth a GPU sustains (papers/lin-thesis §4.3.2:
/// "the sustainable bandwidth of the crossbar NoC is 60%").
pub const NOC_SUSTAINABLE: f64 = 0.6;

/// The share of DRAM's peak bandwidth a GPU sustains (§4.3.2: "saturates around 60% – 70%
/// of the peak bandwidth"; the middle).
pub const DRAM_SUSTAINABLE: f64 = 0.65;

/// The share of a sustainable bandwidth from which a kernel alone is bandwidth intensive
/// (ours; see the module documentation).
pub const BANDWIDTH_INTENSIVE: f64 = 0.5;

/// What limits a kernel (papers/lin-thesis §4.3.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum KernelType {
    LatencySensitive,
    NocIntensive,
    DramIntensive,
}

/// A kernel alone at 1, 2, … TBs per SM (index `n - 1`), per IRC window per SM: its NoC
/// flits, DRAM lines, and requests towards the L2.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct BandwidthCurve {
    pub noc: Vec<f64>,
    pub dram: Vec<f64>,
    pub requests: Vec<f64>,
}

impl BandwidthCurve {
    /// The TB counts the curve covers.
    fn len(&self) -> u32 {
        self.noc.len().min(self.dram.len()).min(self.requests.len()) as u32
    }

    /// Requests per unit of `per` (its NoC or DRAM curve) at `tbs` TBs.
    fn requests_per(&self, per: &[f64], tbs: u32) -> Option<f64> {
        let (r, u) = (at(&self.requests, tbs), at(per, tbs));
        (u > 0.0).then(|| r / u)
    }
}

/// A curve's value at `tbs` TBs (0 at none).
fn at(curve: &[f64], tbs: u32) -> f64 {
    tbs.checked_sub(1)
        .and_then(|i| curve.get(i as usize))
        .copied()
        .filter(|v| v.is_finite() && *v > 0.0)
        .unwrap_or(0.0)
}

/// One SM's share of the sustainable bandwidth per IRC window: NoC flits and DRAM lines.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Sustainable {
    pub noc: f64,
    pub dram: f64,
}

impl Sustainable {
    /// From one SM's peak NoC flits and DRAM bytes per core cycle, the line size and the
    /// window.
    pub fn from_peaks(
        noc_per_cycle: f64,
        dram_bytes_per_cycle: f64,
        line: u64,
        window: u64,
    ) -> Self {
        let w = window as f64;
        Sustainable {
            noc: noc_per_cycle * w * NOC_SUSTAINABLE,
            dram: dram_bytes_per_cycle / line.max(1) as f64 * w * DRAM_SUSTAINABLE,
        }
    }
}

/// A kernel's type from its curve: bandwidth intensive when, at some TB count, it uses at
/// least [`BANDWIDTH_INTENSIVE`] of a sustainable bandwidth — of the one it uses the larger
/// share of (ties: NoC) — latency sensitive otherwise.
pub fn classify(curve: &BandwidthCurve, sustainable: Sustainable) -> KernelType {
    let peak = |c: &[f64]| {
        c.iter()
            .copied()
            .filter(|v| v.is_finite())
            .fold(0.0, f64::max)
    };
    let noc = peak(&curve.noc) / sustainable.noc;
    let dram = peak(&curve.dram) / sustainable.dram;
    if noc.max(dram) < BANDWIDTH_INTENSIVE {
        KernelType::LatencySensitive
    } else if noc >= dram {
        KernelType::NocIntensive
    } else {
        KernelType::DramIntensive
    }
}

/// Bandwidth curves from CCBP's online profile ([`crate::corun::Scheme::Ccbp`]): per
/// kernel, the mean requests towards the L2 one of its SMs sent over the sample at 1, 2,
/// … TBs (`requests`, as [`crate::corun::profile_curves`] averages them), and what the
/// kernel moved over the sample on every SM (`traffic`, only its difference counts); the
/// sample lasted `sample` core cycles. Requests scale to IRC windows. A kernel's NoC
/// flits and DRAM lines at each count are its requests there times its flits and lines
/// per request over the sample: the "factors of a kernel" from which §4.5.1 derives "the
/// average NoC and DRAM consumption of a memory request" (ours: one factor per kernel,
/// whatever its TB count; the offline curves measure each count apart).
pub fn curves_from_profile(
    requests: &[Vec<f64>],
    traffic: &[KernelCounts],
    sample: u64,
    line_bytes: u64,
) -> Vec<BandwidthCurve> {
    let per_window = IRC_WINDOW as f64 / sample.max(1) as f64;
    requests
        .iter()
        .zip(traffic)
        .map(|(r, t)| {
            let sent = t.noc_requests as f64;
            let (flits, lines) = if sent > 0.0 {
                (
                    t.noc_flits as f64 / sent,
                    t.dram_bytes as f64 / line_bytes.max(1) as f64 / sent,
                )
            } else {
                (0.0, 0.0)
            };
            let requests: Vec<f64> = r.iter().map(|&x| x * per_window).collect();
            BandwidthCurve {
                noc: requests.iter().map(|&x| x * flits).collect(),
                dram: requests.iter().map(|&x| x * lines).collect(),
                requests,
            }
        })
        .collect()
}

/// What Algorithm 1 gives one kernel.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Share {
    pub kind: KernelType,
    /// TBs per SM (0: it got none, and cannot co-run).
    pub tbs: u32,
    /// NoC flits and DRAM lines per IRC window per SM granted (a latency-sensitive
    /// kernel's: what it uses alone at `tbs`).
    pub noc: f64,
    pub dram: f64,
    /// Its requests towards the L2 per IRC window per SM (`None`: not limited).
    pub quota: Option<u32>,
}

/// Algorithm 1, lines 8–21 (and their mirror 15–21): one more unit of a
/// bandwidth-intensive kernel's dominant bandwidth `own` beyond its `granted`, with one TB
/// more only when its `tbs` could not use that much alone; its `other` bandwidth scales
/// with the grant. The tentative TBs, dominant and other bandwidth.
fn grow(tbs: u32, granted: f64, own: &[f64], other: &[f64]) -> (u32, f64, f64) {
    let t_own = granted + 1.0;
    let t = if at(own, tbs) < t_own { tbs + 1 } else { tbs };
    let scale = if at(own, t) > 0.0 {
        t_own / at(own, t)
    } else {
        1.0
    };
    (t, t_own, at(other, t) * scale)
}

/// Algorithm 1 over `kernels`, their curves and types, on an SM of `resources` with the
/// `sustainable` bandwidth; `prior_lsk` weighs latency-sensitive kernels (1: none).
pub fn ccbp(
    resources: &SmResources,
    kernels: &[Corunner],
    curves: &[BandwidthCurve],
    kinds: &[KernelType],
    sustainable: Sustainable,
    prior_lsk: f64,
) -> Vec<Share> {
    let cap = Capacity::of(resources);
    let n = kernels.len().min(curves.len()).min(kinds.len());
    let kernels = &kernels[..n];
    let mut tbs = vec![0u32; n];
    let mut nbw = vec![0.0f64; n];
    let mut dbw = vec![0.0f64; n];
    let mut dom = vec![0.0f64; n];
    let mut unfinished: Vec<usize> = (0..n).collect();
    let prior = if prior_lsk.is_finite() && prior_lsk > 0.0 {
        prior_lsk
    } else {
        1.0
    };
    // Line 3: the unfinished kernel with the lowest dominant share (ties: the earlier).
    while let Some((pos, &k)) = unfinished
        .iter()
        .enumerate()
        .min_by(|(_, &a), (_, &b)| dom[a].total_cmp(&dom[b]).then(a.cmp(&b)))
    {
        let c = &curves[k];
        // Lines 4–21: the tentative allocation.
        let (t_tbs, t_noc, t_dram) = match kinds[k] {
            KernelType::LatencySensitive => {
                let t = tbs[k] + 1;
                (t, at(&c.noc, t), at(&c.dram, t))
            }
            KernelType::NocIntensive => grow(tbs[k], nbw[k], &c.noc, &c.dram),
            KernelType::DramIntensive => {
                let (t, t_dram, t_noc) = grow(tbs[k], dbw[k], &c.dram, &c.noc);
                (t, t_noc, t_dram)
            }
        };
        // Line 22: CanAlloc — the TBs fit beside the others' (and within its curve, its
        // occupancy alone), and the bandwidth granted to all stays sustainable.
        let mut trial = tbs.clone();
        trial[k] = t_tbs;
        let others = |v: &[f64]| -> f64 { (0..n).filter(|&i| i != k).map(|i| v[i]).sum() };
        let can = t_tbs <= c.len().min(kernels[k].alone_tbs)
            && fits(&cap, kernels, &trial)
            && others(&nbw) + t_noc <= sustainable.noc
            && others(&dbw) + t_dram <= sustainable.dram;
        if can {
            // Lines 23–26.
            tbs[k] = t_tbs;
            nbw[k] = t_noc;
            dbw[k] = t_dram;
            dom[k] = match kinds[k] {
                KernelType::LatencySensitive => {
                    let (num, den) = dominant(&cap, &kernels[k].demand, tbs[k]);
                    num as f64 / den.max(1) as f64 / prior
                }
                KernelType::NocIntensive => nbw[k] / sustainable.noc,
                KernelType::DramIntensive => dbw[k] / sustainable.dram,
            };
        } else {
            // Line 28.
            unfinished.remove(pos);
        }
    }
    (0..n)
        .map(|k| {
            let c = &curves[k];
            // Its grant in requests, at its requests per flit (or line) alone at its count.
            let quota = match kinds[k] {
                KernelType::LatencySensitive => None,
                KernelType::NocIntensive => c.requests_per(&c.noc, tbs[k]).map(|r| nbw[k] * r),
                KernelType::DramIntensive => c.requests_per(&c.dram, tbs[k]).map(|r| dbw[k] * r),
            };
            Share {
                kind: kinds[k],
                tbs: tbs[k],
                noc: nbw[k],
                dram: dbw[k],
                quota: quota.map(|q| (q.ceil().max(1.0)).min(f64::from(u32::MAX)) as u32),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpu::occupancy::TbDemand;

    /// An SM of 16 TB slots, 2048 threads, 64 warps, 64 Ki registers, 96 KiB shared.
    fn sm() -> SmResources {
        SmResources {
            max_threads: 2048,
            max_warps: 64,
            max_tbs: 16,
            registers: 65536,
            max_registers_per_thread: 255,
            register_allocation: gpu::occupancy::RegisterAllocation::Warp { unit: 256 },
            shared_memory: vec![98304],
            carve_out: Default::default(),
            shared_allocation_unit: 256,
            uniform_registers: 0,
        }
    }

    /// TBs of 256 threads and 32 registers a thread: 8 fit alone.
    fn kernel() -> Corunner {
        Corunner {
            demand: TbDemand {
                threads: 256,
                warps: 8,
                registers: 256 * 32,
                shared_memory: 0,
            },
            alone_tbs: 8,
        }
    }

    /// Bandwidth growing linearly with TBs: `noc` flits and `dram` lines per TB, at 2
    /// flits a request.
    fn linear(noc: f64, dram: f64) -> BandwidthCurve {
        BandwidthCurve {
            noc: (1..=8).map(|n| noc * f64::from(n)).collect(),
            dram: (1..=8).map(|n| dram * f64::from(n)).collect(),
            requests: (1..=8).map(|n| noc / 2.0 * f64::from(n)).collect(),
        }
    }

    const SUSTAINABLE: Sustainable = Sustainable {
        noc: 30.0,
        dram: 20.0,
    };

    #[test]
    fn kernels_are_classified_by_the_bandwidth_they_use_alone() {
        use KernelType::*;
        assert_eq!(classify(&linear(1.0, 0.5), SUSTAINABLE), LatencySensitive);
        assert_eq!(classify(&linear(4.0, 0.5), SUSTAINABLE), NocIntensive);
        assert_eq!(classify(&linear(1.0, 2.0), SUSTAINABLE), DramIntensive);
        // Just under half of the sustainable NoC at its peak, just at half.
        assert_eq!(
            classify(&linear(14.9 / 8.0, 0.0), SUSTAINABLE),
            LatencySensitive
        );
        assert_eq!(
            classify(&linear(15.0 / 8.0, 0.0), SUSTAINABLE),
            NocIntensive
        );
    }

    #[test]
    fn a_noc_intensive_kernel_is_held_to_what_the_latency_sensitive_one_leaves() {
        use KernelType::*;
        // The latency-sensitive kernel moves 1 flit per TB per window; the NoC-intensive
        // one 20 per TB, so that two of its TBs alone would exceed the sustainable 30.
        let curves = [linear(1.0, 0.1), linear(20.0, 0.5)];
        let kinds = [LatencySensitive, NocIntensive];
        let s = two(&curves, &kinds, 1.0);
        let total: f64 = s.iter().map(|s| s.noc).sum();
        assert!(total <= SUSTAINABLE.noc, "{s:?}");
        assert_eq!(s[0].quota, None, "latency sensitive: not limited");
        let q = s[1].quota.expect("NoC intensive: limited");
        assert_eq!(
            f64::from(q),
            (s[1].noc / 2.0).ceil(),
            "its grant at 2 flits a request"
        );
        // It holds only the TBs its grant needs (20 flits a TB alone), and the
        // latency-sensitive kernel what it uses at its count.
        assert_eq!(s[1].tbs, (s[1].noc / 20.0).ceil() as u32, "{s:?}");
        assert_eq!(s[0].noc, f64::from(s[0].tbs), "{s:?}");
        // Both get TBs, within an SM together.
        assert!(s[0].tbs >= 1 && s[1].tbs >= 1, "{s:?}");
        assert!(fits_together(&[s[0].tbs, s[1].tbs]));
    }

    /// Algorithm 1 for two kernels of [`kernel`]'s shape on [`sm`].
    fn two(curves: &[BandwidthCurve], kinds: &[KernelType], prior_lsk: f64) -> Vec<Share> {
        ccbp(
            &sm(),
            &[kernel(), kernel()],
            curves,
            kinds,
            SUSTAINABLE,
            prior_lsk,
        )
    }

    fn fits_together(tbs: &[u32]) -> bool {
        crate::corun::fits_together(&sm(), &[kernel(), kernel()], tbs)
    }

    #[test]
    fn a_priority_for_latency_sensitive_kernels_gives_them_more_tbs() {
        use KernelType::*;
        // A NoC-intensive kernel of 4 flits per TB: the SM's TB slots bind first, and
        // the priority decides who holds them.
        let curves = [linear(1.0, 0.1), linear(4.0, 0.5)];
        let kinds = [LatencySensitive, NocIntensive];
        let even = two(&curves, &kinds, 1.0);
        let favoured = two(&curves, &kinds, 2.0);
        assert!(favoured[0].tbs > even[0].tbs, "{even:?} {favoured:?}");
        assert!(favoured[1].noc <= even[1].noc, "{even:?} {favoured:?}");
    }

    #[test]
    fn complementary_kernels_each_get_their_own_bandwidth() {
        use KernelType::*;
        // A NoC-intensive kernel (little DRAM) beside a DRAM-intensive one (few requests
        // per line): each is held by its own bandwidth, neither by the other's.
        let curves = [linear(6.0, 0.2), linear(2.0, 4.0)];
        let kinds = [NocIntensive, DramIntensive];
        let s = two(&curves, &kinds, 1.0);
        assert!(
            s.iter().map(|s| s.noc).sum::<f64>() <= SUSTAINABLE.noc,
            "{s:?}"
        );
        assert!(
            s.iter().map(|s| s.dram).sum::<f64>() <= SUSTAINABLE.dram,
            "{s:?}"
        );
        // The DRAM kernel's quota is its DRAM grant at 0.25 requests per line (1 request
        // and 4 lines per TB).
        let q = s[1].quota.expect("limited");
        assert_eq!(q, (s[1].dram * 0.25).ceil() as u32, "{s:?}");
        // Together they use more of the NoC than the NoC kernel alone could be given
        // beside a second NoC-intensive kernel.
        let same = two(
            &[linear(6.0, 0.2), linear(6.0, 0.2)],
            &[NocIntensive, NocIntensive],
            1.0,
        );
        assert!(s[0].noc > same[0].noc, "{s:?} {same:?}");
    }

    #[test]
    fn static_resources_still_bound_the_combination() {
        use KernelType::*;
        // Two latency-sensitive kernels using no bandwidth: plain DRF over static
        // resources, 8 TB slots' worth of threads each way (4 + 4).
        let curves = [linear(0.0, 0.0), linear(0.0, 0.0)];
        let s = two(&curves, &[LatencySensitive, LatencySensitive], 1.0);
        assert_eq!((s[0].tbs, s[1].tbs), (4, 4), "{s:?}");
    }

    #[test]
    fn an_online_profile_becomes_curves_per_irc_window() {
        // Two kernels' SMs over a 1,000-cycle sample: kernel 0 sent 10 and 25 requests per
        // SM at 1 and 2 TBs, kernel 1 none. Kernel 0 moved 3 flits and 64 DRAM bytes (half
        // a 128-byte line) per request over the sample.
        let requests = vec![vec![10.0, 25.0], vec![0.0]];
        let traffic = [
            KernelCounts {
                warp_instructions: 500,
                noc_requests: 40,
                noc_flits: 120,
                dram_bytes: 40 * 64,
            },
            KernelCounts::default(),
        ];
        let c = curves_from_profile(&requests, &traffic, 1000, 128);
        // A window is 200 cycles: a fifth of the sample.
        assert_eq!(c[0].requests, vec![2.0, 5.0]);
        assert_eq!(c[0].noc, vec![6.0, 15.0]);
        assert_eq!(c[0].dram, vec![1.0, 2.5]);
        // No request: no bandwidth (not a division by zero).
        assert_eq!(c[1].noc, vec![0.0]);
        assert_eq!(c[1].dram, vec![0.0]);
        assert_eq!(classify(&c[1], SUSTAINABLE), KernelType::LatencySensitive);
    }
}
