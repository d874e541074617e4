//! `dgemv`: double-precision matrix-vector product, one thread per row, long column loop.

use super::util::{blocks_for, download, f64_sum_tol, launch, upload, Checker, Rng};
use crate::{Arg, Device, DeviceError, Dim3, Kernel, Size, Stress, Target, Verification};

const BLOCK: u32 = 256;
const ALPHA: f64 = 1.25;
const BETA: f64 = -0.5;

pub struct Dgemv;

/// y = alpha * A x + beta * y with A column-major (m x n).
#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    pub m: usize,
    pub n: usize,
    pub a: Vec<f64>,
    pub x: Vec<f64>,
    pub y: Vec<f64>,
}

impl Problem {
    pub fn generate(size: Size, seed: u64) -> Self {
        // Small: 8 TBs of 256 threads, 128 columns (~1.6 M instructions);
        // Large: 32 TBs, 512 columns (16x). Huge: 2,112 TBs (two waves of 8 TBs/SM on the
        // h100) of 64 columns: A is 277 MB (Large's 512 columns would make it 2.2 GB).
        let (m, n) = match size {
            Size::Small => (2048, 128),
            Size::Large => (8192, 512),
            Size::Huge => (540_672, 64),
        };
        let mut rng = Rng::for_kernel("dgemv", seed);
        let mut fill = |len: usize| (0..len).map(|_| 2.0 * rng.f64() - 1.0).collect::<Vec<_>>();
        let a = fill(m * n);
        let x = fill(n);
        let y = fill(m);
        Problem { m, n, a, x, y }
    }

    /// Per row: (value, sum of |terms|), accumulated in f64 in the kernel's order.
    pub fn reference(&self) -> Vec<(f64, f64)> {
        (0..self.m)
            .map(|r| {
                let (mut s, mut abs) = (0.0f64, 0.0f64);
                for j in 0..self.n {
                    let t = self.a[j * self.m + r] * self.x[j];
                    s += t;
                    abs += t.abs();
                }
                (
                    ALPHA * s + BETA * self.y[r],
                    ALPHA.abs() * abs + BETA.abs() * self.y[r].abs(),
                )
            })
            .collect()
    }
}

impl Kernel for Dgemv {
    fn name(&self) -> &'static str {
        "dgemv"
    }
    fn description(&self) -> &'static str {
        "f64 matrix-vector product (column-major, coalesced), one thread per row"
    }
    fn sources(&self) -> &'static [(Target, &'static str)] {
        ptx!("dgemv")
    }
    fn traits(&self) -> &'static [&'static str] {
        &["f64", "long TBs", "memory-bound", "coalesced"]
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
        let a = upload(dev, &p.a)?;
        let x = upload(dev, &p.x)?;
        let y = upload(dev, &p.y)?;
        let args = [
            Arg::Ptr(a),
            Arg::Ptr(x),
            Arg::Ptr(y),
            Arg::I32(p.m as i32),
            Arg::I32(p.n as i32),
            Arg::F64(ALPHA),
            Arg::F64(BETA),
        ];
        launch(
            dev,
            "dgemv_n",
            Dim3::x(blocks_for(p.m, BLOCK as usize)),
            Dim3::x(BLOCK),
            &args,
        )?;
        let got: Vec<f64> = download(dev, y, p.m)?;

        let mut check = Checker::new();
        for (i, (&g, &(want, abs))) in got.iter().zip(&p.reference()).enumerate() {
            // Same summation order as the reference; only fused multiply-adds differ, which is
            // well inside the γ_n bound for an n-term f64 sum plus the final update.
            check.near("y", i, g, want, f64_sum_tol(p.n + 2, abs));
        }
        Ok(check.finish())
    }
}
