//! `scan`: Blelloch exclusive scan of u32 in dynamic shared memory, three launches.

use super::util::{alloc_zeroed, blocks_for, download, launch, launch_smem, upload, Checker, Rng};
use crate::{Arg, Device, DeviceError, Dim3, Kernel, Size, Stress, Target, Verification};

const BLOCK: u32 = 256;
/// Each block scans two elements per thread.
const PER_BLOCK: usize = 2 * BLOCK as usize;

pub struct Scan;

#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    pub data: Vec<u32>,
}

impl Problem {
    pub fn generate(size: Size, seed: u64) -> Self {
        // Small: 17 TBs (the last one partial); Large: 259 TBs. The block sums are scanned by a
        // single block, so n may not exceed PER_BLOCK^2.
        let n = match size {
            Size::Small => 8192 + 37,
            Size::Large => 131_072 + 1000,
        };
        let mut rng = Rng::for_kernel("scan", seed);
        // Large values, so that the running sum wraps modulo 2^32 several times.
        Problem {
            data: (0..n).map(|_| rng.next_u32() >> 4).collect(),
        }
    }

    pub fn reference(&self) -> Vec<u32> {
        let mut acc = 0u32;
        self.data
            .iter()
            .map(|&x| {
                let before = acc;
                acc = acc.wrapping_add(x);
                before
            })
            .collect()
    }
}

impl Kernel for Scan {
    fn name(&self) -> &'static str {
        "scan"
    }
    fn description(&self) -> &'static str {
        "Blelloch exclusive scan of u32 in dynamic shared memory, scan of block sums, add-back"
    }
    fn sources(&self) -> &'static [(Target, &'static str)] {
        ptx!("scan")
    }
    fn traits(&self) -> &'static [&'static str] {
        &[
            "dynamic shared memory",
            "barrier in loop",
            "three launches",
            "integer",
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
        let n = p.data.len();
        let nb = blocks_for(n, PER_BLOCK);
        assert!(nb as usize <= PER_BLOCK, "block sums must fit one block");
        let smem = (PER_BLOCK * 4) as u32;

        let input = upload(dev, &p.data)?;
        let out = alloc_zeroed::<u32>(dev, n)?;
        let sums = alloc_zeroed::<u32>(dev, nb as usize)?;
        let scanned = alloc_zeroed::<u32>(dev, nb as usize)?;
        let total = alloc_zeroed::<u32>(dev, 1)?;

        let block = Dim3::x(BLOCK);
        let a1 = [
            Arg::Ptr(input),
            Arg::Ptr(out),
            Arg::Ptr(sums),
            Arg::I32(n as i32),
        ];
        launch_smem(dev, "scan_blocks", Dim3::x(nb), block, smem, &a1)?;
        let a2 = [
            Arg::Ptr(sums),
            Arg::Ptr(scanned),
            Arg::Ptr(total),
            Arg::I32(nb as i32),
        ];
        launch_smem(dev, "scan_blocks", Dim3::x(1), block, smem, &a2)?;
        let a3 = [Arg::Ptr(out), Arg::Ptr(scanned), Arg::I32(n as i32)];
        launch(dev, "scan_add", Dim3::x(nb), block, &a3)?;
        let got: Vec<u32> = download(dev, out, n)?;
        let got_total: Vec<u32> = download(dev, total, 1)?;

        let want = p.reference();
        let want_total = p.data.iter().fold(0u32, |a, &x| a.wrapping_add(x));
        let mut check = Checker::new();
        check.exact_slice("out", &got, &want);
        check.exact("total", 0, got_total[0], want_total);
        Ok(check.finish())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exclusive_scan_wraps() {
        let p = Problem {
            data: vec![3, 1, u32::MAX, 2],
        };
        assert_eq!(p.reference(), vec![0, 3, 4, 3]);
    }
}
