//! `bitonic`: shared-memory bitonic sort of 2048 (key, value) pairs per thread block.

use super::util::{download, launch, upload, Checker, Rng};
use crate::{Arg, Device, DeviceError, Dim3, Kernel, Size, Stress, Target, Verification};

/// `CHUNK` in bitonic.cu.
const CHUNK: usize = 2048;
const BLOCK: u32 = 256;

pub struct Bitonic;

#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    pub keys: Vec<u32>,
    pub values: Vec<u32>,
}

impl Problem {
    pub fn generate(size: Size, seed: u64) -> Self {
        // Small: 2 TBs, 66 stages x 4 compare-exchanges per thread (~2.5 M instructions).
        // Large: 32 TBs. Huge: 2,112 TBs (two waves of 8 TBs/SM on the h100).
        let chunks = match size {
            Size::Small => 2,
            Size::Large => 32,
            Size::Huge => 2112,
        };
        let n = chunks * CHUNK;
        let mut rng = Rng::for_kernel("bitonic", seed);
        // Few distinct keys, so that many ties are broken by the value.
        let keys = (0..n).map(|_| rng.below(500)).collect();
        let values = (0..n as u32).collect();
        Problem { keys, values }
    }

    /// Each chunk sorted by (key, value).
    pub fn reference(&self) -> (Vec<u32>, Vec<u32>) {
        let mut pairs: Vec<(u32, u32)> = self
            .keys
            .iter()
            .copied()
            .zip(self.values.iter().copied())
            .collect();
        for chunk in pairs.chunks_mut(CHUNK) {
            chunk.sort_unstable();
        }
        pairs.into_iter().unzip()
    }
}

impl Kernel for Bitonic {
    fn name(&self) -> &'static str {
        "bitonic"
    }
    fn description(&self) -> &'static str {
        "bitonic sort of 2048 key-value pairs per TB in 16 KiB of shared memory"
    }
    fn sources(&self) -> &'static [(Target, &'static str)] {
        ptx!("bitonic")
    }
    fn traits(&self) -> &'static [&'static str] {
        &[
            "barrier in nested loop",
            "shared memory",
            "long TBs",
            "data-dependent swaps",
        ]
    }
    fn stress(&self) -> Stress {
        Stress::SharedMemory
    }

    fn run(
        &self,
        dev: &mut dyn Device,
        size: Size,
        seed: u64,
    ) -> Result<Verification, DeviceError> {
        let p = Problem::generate(size, seed);
        let keys = upload(dev, &p.keys)?;
        let values = upload(dev, &p.values)?;
        let grid = Dim3::x((p.keys.len() / CHUNK) as u32);
        launch(
            dev,
            "bitonic_sort_chunks",
            grid,
            Dim3::x(BLOCK),
            &[Arg::Ptr(keys), Arg::Ptr(values)],
        )?;
        let got_k: Vec<u32> = download(dev, keys, p.keys.len())?;
        let got_v: Vec<u32> = download(dev, values, p.values.len())?;

        let (want_k, want_v) = p.reference();
        let mut check = Checker::new();
        check.exact_slice("keys", &got_k, &want_k);
        check.exact_slice("values", &got_v, &want_v);
        Ok(check.finish())
    }
}
