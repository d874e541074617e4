//! `reduce`: f32 sum with warp shuffles and a ballot/popc count, in two launches.

use super::util::{alloc_zeroed, blocks_for, download, f32_sum_tol, launch, upload, Checker, Rng};
use crate::{Arg, Device, DeviceError, Dim3, Kernel, Size, Stress, Target, Verification};

const BLOCK: u32 = 512;
/// Elements per thread in the first launch; the grid follows from it. The second launch is
/// one block over the partials: one per thread for Small and Large, a grid-stride loop over
/// two or three per thread for Huge.
const PER_THREAD: usize = 8;
const THRESHOLD: f32 = 0.75;

pub struct Reduce;

#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    pub data: Vec<f32>,
}

impl Problem {
    pub fn generate(size: Size, seed: u64) -> Self {
        // Small: 16 TBs of 512 threads (~1.5 M instructions); Large: 256 TBs; Huge: 1,056 TBs
        // (two waves of 4 TBs/SM on the h100).
        let n = match size {
            Size::Small => (1 << 16) - 100,
            Size::Large => (1 << 20) - 100,
            Size::Huge => 1056 * BLOCK as usize * PER_THREAD - 100,
        };
        let mut rng = Rng::for_kernel("reduce", seed);
        Problem {
            data: (0..n).map(|_| rng.f32()).collect(),
        }
    }

    /// (sum in f64, sum of absolute values, count of elements above the threshold).
    pub fn reference(&self) -> (f64, f64, u32) {
        let sum: f64 = self.data.iter().map(|&x| x as f64).sum();
        let abs: f64 = self.data.iter().map(|&x| (x as f64).abs()).sum();
        let count = self.data.iter().filter(|&&x| x > THRESHOLD).count() as u32;
        (sum, abs, count)
    }
}

impl Kernel for Reduce {
    fn name(&self) -> &'static str {
        "reduce"
    }
    fn description(&self) -> &'static str {
        "f32 sum reduction with __shfl_down/__shfl_xor, __ballot_sync+__popc count, 512-thread TBs"
    }
    fn sources(&self) -> &'static [(Target, &'static str)] {
        ptx!("reduce")
    }
    fn traits(&self) -> &'static [&'static str] {
        &[
            "warp shuffles",
            "ballot/popc",
            "global atomics",
            "grid-stride loop",
            "two launches",
        ]
    }
    fn stress(&self) -> Stress {
        Stress::WarpSlots
    }

    fn run(
        &self,
        dev: &mut dyn Device,
        size: Size,
        seed: u64,
    ) -> Result<Verification, DeviceError> {
        let p = Problem::generate(size, seed);
        let n = p.data.len();
        let grid = blocks_for(n, BLOCK as usize * PER_THREAD);
        let data = upload(dev, &p.data)?;
        let partial = alloc_zeroed::<f32>(dev, grid as usize)?;
        let total = alloc_zeroed::<f32>(dev, 1)?;
        let count = alloc_zeroed::<u32>(dev, 1)?;
        // The second launch counts too; its count goes to a scratch word.
        let scratch = alloc_zeroed::<u32>(dev, 1)?;

        let args1 = [
            Arg::Ptr(data),
            Arg::I32(n as i32),
            Arg::Ptr(partial),
            Arg::F32(THRESHOLD),
            Arg::Ptr(count),
        ];
        launch(dev, "reduce_sum", Dim3::x(grid), Dim3::x(BLOCK), &args1)?;
        let args2 = [
            Arg::Ptr(partial),
            Arg::I32(grid as i32),
            Arg::Ptr(total),
            Arg::F32(THRESHOLD),
            Arg::Ptr(scratch),
        ];
        launch(dev, "reduce_sum", Dim3::x(1), Dim3::x(BLOCK), &args2)?;
        let got_sum: Vec<f32> = download(dev, total, 1)?;
        let got_count: Vec<u32> = download(dev, count, 1)?;

        let (sum, abs, above) = p.reference();
        let mut check = Checker::new();
        // Any summation order is within γ_d·Σ|x| where d is the depth of the GPU's summation
        // tree: each thread adds ceil(n / threads) elements serially, then 5 shuffle levels
        // and 5 cross-warp levels per launch, twice (f32_sum_tol adds the margin). In the
        // second launch a thread adds ceil(grid / BLOCK) partials to zero, the first exactly.
        let serial = n.div_ceil(grid as usize * BLOCK as usize);
        let serial_partials = grid.div_ceil(BLOCK) as usize - 1;
        check.near(
            "sum",
            0,
            got_sum[0] as f64,
            sum,
            f32_sum_tol(serial + serial_partials + 20, abs),
        );
        check.exact("count", 0, got_count[0], above);
        Ok(check.finish())
    }
}
