//! `gemm`: tiled SGEMM with 16x16 thread blocks and shared-memory tiles (barrier in the k-loop).

use super::util::{download, f32_sum_tol, launch, upload, Checker, Rng};
use crate::{Arg, Device, DeviceError, Dim3, Kernel, Size, Stress, Target, Verification};

/// Must match `TILE` in gemm.cu: the TB is TILE x TILE and the matrices are multiples of it.
const TILE: usize = 16;

pub struct Gemm;

/// Problem: C (m x n) = alpha * A (m x k) * B (k x n) + beta * C, row-major.
#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub alpha: f32,
    pub beta: f32,
    pub a: Vec<f32>,
    pub b: Vec<f32>,
    pub c: Vec<f32>,
}

impl Problem {
    pub fn generate(size: Size, seed: u64) -> Self {
        // Small: 4x4 blocks of 256 threads, 4 k-iterations (about 1 M thread instructions).
        // Large: 10x10 blocks, 10 k-iterations (about 16x more). Huge: 48x48 blocks, still 10
        // k-iterations (2,304 TBs: 2.2 waves of 8 TBs/SM on the h100).
        let (m, n, k) = match size {
            Size::Small => (64, 64, 64),
            Size::Large => (160, 160, 160),
            Size::Huge => (768, 768, 160),
        };
        let mut rng = Rng::for_kernel("gemm", seed);
        let mut fill = |len: usize| {
            (0..len)
                .map(|_| rng.range_f32(-1.0, 1.0))
                .collect::<Vec<_>>()
        };
        let a = fill(m * k);
        let b = fill(k * n);
        let c = fill(m * n);
        Problem {
            m,
            n,
            k,
            alpha: 1.5,
            beta: -0.5,
            a,
            b,
            c,
        }
    }

    /// Reference in f64, with the absolute sum of the terms of each element for the tolerance.
    pub fn reference(&self) -> Vec<(f64, f64)> {
        let mut out = Vec::with_capacity(self.m * self.n);
        for i in 0..self.m {
            for j in 0..self.n {
                let (mut s, mut abs) = (0.0f64, 0.0f64);
                for p in 0..self.k {
                    let t = self.a[i * self.k + p] as f64 * self.b[p * self.n + j] as f64;
                    s += t;
                    abs += t.abs();
                }
                let c = self.c[i * self.n + j] as f64;
                let alpha = self.alpha as f64;
                let beta = self.beta as f64;
                out.push((
                    alpha * s + beta * c,
                    alpha.abs() * abs + beta.abs() * c.abs(),
                ));
            }
        }
        out
    }
}

impl Kernel for Gemm {
    fn name(&self) -> &'static str {
        "gemm"
    }
    fn description(&self) -> &'static str {
        "tiled SGEMM, 16x16 TBs, shared-memory tiles, barrier in the k-loop"
    }
    fn sources(&self) -> &'static [(Target, &'static str)] {
        ptx!("gemm")
    }
    fn traits(&self) -> &'static [&'static str] {
        &[
            "2-D TB",
            "barrier in loop",
            "shared memory",
            "compute-bound",
            "f32 fma",
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
        let a = upload(dev, &p.a)?;
        let b = upload(dev, &p.b)?;
        let c = upload(dev, &p.c)?;
        let grid = Dim3::xy((p.n / TILE) as u32, (p.m / TILE) as u32);
        let args = [
            Arg::Ptr(a),
            Arg::Ptr(b),
            Arg::Ptr(c),
            Arg::I32(p.m as i32),
            Arg::I32(p.n as i32),
            Arg::I32(p.k as i32),
            Arg::F32(p.alpha),
            Arg::F32(p.beta),
        ];
        launch(
            dev,
            "gemm_tiled",
            grid,
            Dim3::xy(TILE as u32, TILE as u32),
            &args,
        )?;
        let got: Vec<f32> = download(dev, c, p.m * p.n)?;

        let mut check = Checker::new();
        for (i, (&g, &(want, abs))) in got.iter().zip(&p.reference()).enumerate() {
            // k products plus the alpha/beta update, summed in f32 in the GPU's order (with
            // fused multiply-adds): bounded by f32_sum_tol against the exact f64 reference.
            check.near("C", i, g as f64, want, f32_sum_tol(p.k + 2, abs));
        }
        Ok(check.finish())
    }
}
