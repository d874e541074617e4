//! `hist`: 256-bin histogram with shared-memory atomics merged by global atomics.

use super::util::{alloc_zeroed, blocks_for, download, launch, upload, Checker, Rng};
use crate::{Arg, Device, DeviceError, Dim3, Kernel, Size, Stress, Target, Verification};

const BINS: usize = 256;
const BLOCK: u32 = 256;
/// Input elements per thread: sets the grid size from the problem size.
const PER_THREAD: usize = 16;

pub struct Hist;

#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    pub data: Vec<u32>,
}

/// The bin of hist.cu: the low byte of the value folded with its next two bytes.
pub fn bin(v: u32) -> usize {
    ((v ^ (v >> 8) ^ (v >> 16)) as usize) & (BINS - 1)
}

impl Problem {
    pub fn generate(size: Size, seed: u64) -> Self {
        // Small: 16 TBs x 256 threads x 16 elements (~0.8 M instructions); Large: 256 TBs;
        // Huge: 2,304 TBs (2.2 waves of 8 TBs/SM on the h100).
        let n = match size {
            Size::Small => 1 << 16,
            Size::Large => 1 << 20,
            Size::Huge => 9 << 20,
        };
        let mut rng = Rng::for_kernel("hist", seed);
        // A quarter of the values are one of four hot values: heavy contention on a few bins.
        let hot = [
            rng.next_u32(),
            rng.next_u32(),
            rng.next_u32(),
            rng.next_u32(),
        ];
        let data = (0..n)
            .map(|_| {
                if rng.below(4) == 0 {
                    hot[rng.below(4) as usize]
                } else {
                    rng.next_u32()
                }
            })
            .collect();
        Problem { data }
    }

    pub fn reference(&self) -> Vec<u32> {
        let mut h = vec![0u32; BINS];
        for &v in &self.data {
            h[bin(v)] += 1;
        }
        h
    }
}

impl Kernel for Hist {
    fn name(&self) -> &'static str {
        "hist"
    }
    fn description(&self) -> &'static str {
        "256-bin histogram, shared-memory atomics then global atomics"
    }
    fn sources(&self) -> &'static [(Target, &'static str)] {
        ptx!("hist")
    }
    fn traits(&self) -> &'static [&'static str] {
        &[
            "shared atomics",
            "global atomics",
            "grid-stride loop",
            "memory-bound",
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
        let data = upload(dev, &p.data)?;
        let hist = alloc_zeroed::<u32>(dev, BINS)?;
        let grid = Dim3::x(blocks_for(p.data.len(), BLOCK as usize * PER_THREAD));
        let args = [
            Arg::Ptr(data),
            Arg::I32(p.data.len() as i32),
            Arg::Ptr(hist),
        ];
        launch(dev, "histogram256", grid, Dim3::x(BLOCK), &args)?;
        let got: Vec<u32> = download(dev, hist, BINS)?;

        let mut check = Checker::new();
        check.exact_slice("hist", &got, &p.reference());
        Ok(check.finish())
    }
}
