//! `kmeans`: k-means assignment with one-warp TBs and a `__noinline__` distance function.

use super::util::{alloc_zeroed, blocks_for, download, launch, upload, Checker, Rng};
use crate::{Arg, Device, DeviceError, Dim3, Kernel, Size, Stress, Target, Verification};

/// One warp per TB: 32 TB slots fill long before the warp slots do.
const BLOCK: u32 = 32;
const K: usize = 16;
const D: usize = 4;

pub struct Kmeans;

#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    pub points: Vec<f32>,
    pub centroids: Vec<f32>,
}

/// A coordinate: a multiple of 1/8 in [-8, 8). Differences, squares and sums of D = 4 of them
/// are then exact in f32 (at most 17 significant bits), fused or not, so labels are exact.
fn coord(rng: &mut Rng) -> f32 {
    (rng.below(128) as i32 - 64) as f32 / 8.0
}

impl Problem {
    pub fn generate(size: Size, seed: u64) -> Self {
        // Small: 128 TBs of 32 threads, 16 calls each (~1.6 M instructions); Large: 2048 TBs;
        // Huge: 9,216 TBs (2.2 waves of 32 TBs/SM on the h100).
        let n = match size {
            Size::Small => 4096,
            Size::Large => 65_536,
            Size::Huge => 294_912,
        };
        let mut rng = Rng::for_kernel("kmeans", seed);
        let centroids = (0..K * D).map(|_| coord(&mut rng)).collect();
        let points = (0..n * D).map(|_| coord(&mut rng)).collect();
        Problem { points, centroids }
    }

    pub fn len(&self) -> usize {
        self.points.len() / D
    }

    /// Labels (first nearest centroid) and cluster populations.
    pub fn reference(&self) -> (Vec<i32>, Vec<u32>) {
        let dist =
            |p: &[f32], c: &[f32]| p.iter().zip(c).map(|(a, b)| (a - b) * (a - b)).sum::<f32>();
        let mut counts = vec![0u32; K];
        let labels = self
            .points
            .chunks_exact(D)
            .map(|p| {
                let mut best = 0;
                let mut best_d = dist(p, &self.centroids[..D]);
                for c in 1..K {
                    let d = dist(p, &self.centroids[c * D..(c + 1) * D]);
                    if d < best_d {
                        best_d = d;
                        best = c;
                    }
                }
                counts[best] += 1;
                best as i32
            })
            .collect();
        (labels, counts)
    }
}

impl Kernel for Kmeans {
    fn name(&self) -> &'static str {
        "kmeans"
    }
    fn description(&self) -> &'static str {
        "k-means assignment, 32-thread TBs, __noinline__ distance (.func/call), integer atomics"
    }
    fn sources(&self) -> &'static [(Target, &'static str)] {
        ptx!("kmeans")
    }
    fn traits(&self) -> &'static [&'static str] {
        &[
            "tiny TBs",
            ".func call",
            "generic pointers",
            "shared memory",
            "global atomics",
        ]
    }
    fn stress(&self) -> Stress {
        Stress::TbSlots
    }

    fn run(
        &self,
        dev: &mut dyn Device,
        size: Size,
        seed: u64,
    ) -> Result<Verification, DeviceError> {
        let p = Problem::generate(size, seed);
        let n = p.len();
        let points = upload(dev, &p.points)?;
        let centroids = upload(dev, &p.centroids)?;
        let labels = upload(dev, &vec![-1i32; n])?;
        let counts = alloc_zeroed::<u32>(dev, K)?;
        let args = [
            Arg::Ptr(points),
            Arg::Ptr(centroids),
            Arg::Ptr(labels),
            Arg::Ptr(counts),
            Arg::I32(n as i32),
            Arg::I32(K as i32),
            Arg::I32(D as i32),
        ];
        launch(
            dev,
            "kmeans_assign",
            Dim3::x(blocks_for(n, BLOCK as usize)),
            Dim3::x(BLOCK),
            &args,
        )?;
        let got_labels: Vec<i32> = download(dev, labels, n)?;
        let got_counts: Vec<u32> = download(dev, counts, K)?;

        let (want_labels, want_counts) = p.reference();
        let mut check = Checker::new();
        check.exact_slice("label", &got_labels, &want_labels);
        check.exact_slice("count", &got_counts, &want_counts);
        Ok(check.finish())
    }
}
