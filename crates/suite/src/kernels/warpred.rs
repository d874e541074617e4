//! `warpred`: warp-aggregated group-by (count, sum, min, max per key) with `__match_any_sync`,
//! `__match_all_sync`, `__reduce_{add,min,max}_sync` (`redux.sync`, sm_80) and
//! `__ballot_sync`/`__popc`.

use super::util::{alloc_zeroed, blocks_for, download, launch, upload, Checker, Rng};
use crate::{Arg, Device, DeviceError, Dim3, Kernel, Size, Stress, Target, Verification};

const BLOCK: u32 = 256;
const WARP: usize = 32;
/// Elements per thread; the grid follows from it.
const PER_THREAD: usize = 8;
const BINS: usize = 64;

pub struct Warpred;

#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    pub keys: Vec<u32>,
    pub vals: Vec<i32>,
}

/// Everything the kernel writes.
#[derive(Clone, Debug, PartialEq)]
pub struct Expected {
    pub count: Vec<u32>,
    pub sum: Vec<i32>,
    /// `i32::MAX` for an empty bin (its initial value).
    pub min: Vec<i32>,
    /// `i32::MIN` for an empty bin.
    pub max: Vec<i32>,
    /// Per element: how many earlier lanes of its warp hold the same key.
    pub rank: Vec<u32>,
    /// Warps (32-element chunks, the last one possibly partial) whose keys are all equal.
    pub uniform: u32,
}

impl Problem {
    pub fn generate(size: Size, seed: u64) -> Self {
        // n is not a multiple of 32, so the last warp runs with a partial mask.
        // Small: 16 TBs of 256 threads, 8 elements each, ~115 instructions per element
        // (~3.8 M); Large: 256 TBs (~60 M); Huge: 2,304 TBs (2.9 waves of 6 TBs/SM on the
        // h100).
        let n = match size {
            Size::Small => (1 << 15) - 13,
            Size::Large => (1 << 19) - 13,
            Size::Huge => (9 << 19) - 13,
        };
        let mut rng = Rng::for_kernel("warpred", seed);
        // Runs of one key, 1-96 long, half of them sprinkled with random keys: warps see from
        // one group (uniform) to a dozen.
        let mut keys = Vec::with_capacity(n + 96);
        while keys.len() < n {
            let key = rng.below(BINS as u32);
            let len = 1 + rng.below(96);
            let noisy = rng.below(2) == 0;
            for _ in 0..len {
                let k = if noisy && rng.below(4) == 0 {
                    rng.below(BINS as u32)
                } else {
                    key
                };
                keys.push(k);
            }
        }
        keys.truncate(n);
        // Full-range values: the sums wrap and min/max see both signs.
        let vals = (0..n).map(|_| rng.next_u32() as i32).collect();
        Problem { keys, vals }
    }

    pub fn reference(&self) -> Expected {
        let mut e = Expected {
            count: vec![0; BINS],
            sum: vec![0; BINS],
            min: vec![i32::MAX; BINS],
            max: vec![i32::MIN; BINS],
            rank: Vec::with_capacity(self.keys.len()),
            uniform: 0,
        };
        // The group-by does not depend on how the warps split the elements.
        for (&k, &v) in self.keys.iter().zip(&self.vals) {
            let k = k as usize;
            e.count[k] += 1;
            e.sum[k] = e.sum[k].wrapping_add(v);
            e.min[k] = e.min[k].min(v);
            e.max[k] = e.max[k].max(v);
        }
        // Ranks and uniformity do: warp w holds elements 32w .. 32w + 31 (the TBs and the
        // grid stride are multiples of 32).
        for chunk in self.keys.chunks(WARP) {
            for (lane, k) in chunk.iter().enumerate() {
                e.rank
                    .push(chunk[..lane].iter().filter(|&x| x == k).count() as u32);
            }
            e.uniform += chunk.iter().all(|k| *k == chunk[0]) as u32;
        }
        e
    }
}

impl Kernel for Warpred {
    fn name(&self) -> &'static str {
        "warpred"
    }
    fn description(&self) -> &'static str {
        "warp-aggregated group-by: match.any/match.all, redux.sync add/min/max, ballot (sm_80)"
    }
    fn sources(&self) -> &'static [(Target, &'static str)] {
        ptx!("warpred", [Sm80 "sm_80", Sm90 "sm_90"])
    }
    fn traits(&self) -> &'static [&'static str] {
        &[
            "warp match",
            "redux.sync",
            "ballot/popc",
            "global atomics",
            "grid-stride loop",
            "divergent warp loop",
        ]
    }
    fn stress(&self) -> Stress {
        Stress::None
    }

    fn run(
        &self,
        dev: &mut dyn Device,
        size: Size,
        seed: u64,
    ) -> Result<Verification, DeviceError> {
        let p = Problem::generate(size, seed);
        let n = p.keys.len();
        let keys = upload(dev, &p.keys)?;
        let vals = upload(dev, &p.vals)?;
        let count = alloc_zeroed::<u32>(dev, BINS)?;
        let sum = alloc_zeroed::<i32>(dev, BINS)?;
        let min = upload(dev, &[i32::MAX; BINS])?;
        let max = upload(dev, &[i32::MIN; BINS])?;
        let rank = alloc_zeroed::<u32>(dev, n)?;
        let uniform = alloc_zeroed::<u32>(dev, 1)?;
        let args = [
            Arg::Ptr(keys),
            Arg::Ptr(vals),
            Arg::I32(n as i32),
            Arg::Ptr(count),
            Arg::Ptr(sum),
            Arg::Ptr(min),
            Arg::Ptr(max),
            Arg::Ptr(rank),
            Arg::Ptr(uniform),
        ];
        launch(
            dev,
            "warp_groupby",
            Dim3::x(blocks_for(n, BLOCK as usize * PER_THREAD)),
            Dim3::x(BLOCK),
            &args,
        )?;
        let want = p.reference();
        let mut check = Checker::new();
        check.exact_slice("count", &download::<u32>(dev, count, BINS)?, &want.count);
        check.exact_slice("sum", &download::<i32>(dev, sum, BINS)?, &want.sum);
        check.exact_slice("min", &download::<i32>(dev, min, BINS)?, &want.min);
        check.exact_slice("max", &download::<i32>(dev, max, BINS)?, &want.max);
        check.exact_slice("rank", &download::<u32>(dev, rank, n)?, &want.rank);
        check.exact(
            "uniform",
            0,
            download::<u32>(dev, uniform, 1)?[0],
            want.uniform,
        );
        Ok(check.finish())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_computed_partial_warp() {
        let p = Problem {
            keys: vec![5, 5, 7, 5, 7, 9],
            vals: vec![10, -3, i32::MAX, 4, 1, -8],
        };
        let e = p.reference();
        assert_eq!(e.rank, [0, 1, 0, 2, 1, 0]);
        assert_eq!((e.count[5], e.count[7], e.count[9]), (3, 2, 1));
        assert_eq!((e.sum[5], e.sum[7], e.sum[9]), (11, i32::MIN, -8));
        assert_eq!((e.min[5], e.max[5]), (-3, 10));
        assert_eq!((e.min[7], e.max[7]), (1, i32::MAX));
        assert_eq!((e.count[0], e.min[0], e.max[0]), (0, i32::MAX, i32::MIN));
        assert_eq!(e.uniform, 0);
        // 40 equal keys: a full uniform warp and a partial one.
        let p = Problem {
            keys: vec![3; 40],
            vals: vec![1; 40],
        };
        let e = p.reference();
        assert_eq!(e.uniform, 2);
        assert_eq!(e.rank[31..34], [31, 0, 1]);
        assert_eq!(e.count[3], 40);
    }

    /// The generated keys give warps of every kind: uniform ones and ones of many groups.
    #[test]
    fn keys_mix_uniform_and_crowded_warps() {
        let p = Problem::generate(Size::Small, 1);
        assert_ne!(p.keys.len() % WARP, 0);
        let groups = |c: &[u32]| {
            let mut k = c.to_vec();
            k.sort_unstable();
            k.dedup();
            k.len()
        };
        let per_warp: Vec<usize> = p.keys.chunks(WARP).map(groups).collect();
        assert!(per_warp.iter().filter(|&&g| g == 1).count() > 20);
        assert!(per_warp.iter().any(|&g| g >= 8));
        assert!(p.reference().uniform > 20);
    }
}
