//! `wgemm`: tensor-core GEMM through the WMMA API, C = αAB + βC with f16 A (row-major) and B
//! (column-major), f32 accumulators and C. Only the m16n16k16 shape: each warp loads 16x16
//! fragments from shared-memory tiles (`wmma.load.a/b ... .shared`), multiplies with
//! `wmma.mma`, and reads and writes C with `wmma.load.c`/`wmma.store.d` on global memory.

use super::util::{download, f16_to_f32, f32_sum_tol, launch, upload, Checker, Rng};
use crate::{Arg, Device, DeviceError, Dim3, Kernel, Size, Stress, Target, Verification};

/// Must match wgemm.cu: a TB computes a BM x BN tile of C with 128 threads, stepping K by BK.
const BM: usize = 64;
const BN: usize = 64;
const BK: usize = 32;
const THREADS: u32 = 128;

pub struct Wgemm;

/// C (m x n, row-major f32) = alpha · A (m x k, row-major f16) · B (k x n, column-major f16,
/// i.e. stored as n rows of k) + beta · C. The f16 matrices are bit patterns.
#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub alpha: f32,
    pub beta: f32,
    pub a: Vec<u16>,
    pub b: Vec<u16>,
    pub c: Vec<f32>,
}

impl Problem {
    pub fn generate(size: Size, seed: u64) -> Self {
        // Small: 2x2 TBs of 128 threads, 8 k-tiles: 0.39 M thread instructions on the
        // functional core (~760 per thread; per k-tile the staging, two barriers, 8 wmma.load
        // and 8 wmma.mma, then the wmma.load.c/store.d epilogue). Large: 6x6 TBs, 24 k-tiles:
        // 27x the flops, 8.7 M thread instructions (22x). Huge: 40x40 TBs (2.4 waves of 5
        // TBs/SM on the h100), still 24 k-tiles.
        let (m, n, k) = match size {
            Size::Small => (128, 128, 256),
            Size::Large => (384, 384, 768),
            Size::Huge => (2560, 2560, 768),
        };
        let mut rng = Rng::for_kernel("wgemm", seed);
        let a = rng.f16s(m * k, -1.0, 1.0);
        let b = rng.f16s(n * k, -1.0, 1.0);
        let c = (0..m * n).map(|_| rng.range_f32(-1.0, 1.0)).collect();
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

    /// Reference in f64 from the exact f16 values, with the absolute sum of the terms of each
    /// element for the tolerance.
    pub fn reference(&self) -> Vec<(f64, f64)> {
        let a: Vec<f64> = self.a.iter().map(|&h| f16_to_f32(h) as f64).collect();
        let b: Vec<f64> = self.b.iter().map(|&h| f16_to_f32(h) as f64).collect();
        let (alpha, beta) = (self.alpha as f64, self.beta as f64);
        let mut out = Vec::with_capacity(self.m * self.n);
        for i in 0..self.m {
            let row = &a[i * self.k..(i + 1) * self.k];
            for j in 0..self.n {
                let col = &b[j * self.k..(j + 1) * self.k];
                let (mut s, mut abs) = (0.0f64, 0.0f64);
                for (x, y) in row.iter().zip(col) {
                    s += x * y;
                    abs += (x * y).abs();
                }
                let c = self.c[i * self.n + j] as f64;
                out.push((
                    alpha * s + beta * c,
                    alpha.abs() * abs + beta.abs() * c.abs(),
                ));
            }
        }
        out
    }
}

impl Kernel for Wgemm {
    fn name(&self) -> &'static str {
        "wgemm"
    }
    fn description(&self) -> &'static str {
        "tensor-core GEMM through WMMA (m16n16k16 f16 -> f32), shared-memory tiles"
    }
    fn sources(&self) -> &'static [(Target, &'static str)] {
        ptx!("wgemm", [Sm80 "sm_80", Sm90 "sm_90"])
    }
    fn needs_tensor_cores(&self) -> bool {
        true
    }
    fn traits(&self) -> &'static [&'static str] {
        &[
            "tensor cores",
            "wmma",
            "f16",
            "barrier in loop",
            "shared memory",
            "compute-bound",
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
        assert!(p.m.is_multiple_of(BM) && p.n.is_multiple_of(BN) && p.k.is_multiple_of(BK));
        let a = upload(dev, &p.a)?;
        let b = upload(dev, &p.b)?;
        let c = upload(dev, &p.c)?;
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
        let grid = Dim3::xy((p.n / BN) as u32, (p.m / BM) as u32);
        launch(dev, "wgemm_f16", grid, Dim3::x(THREADS), &args)?;
        let got: Vec<f32> = download(dev, c, p.m * p.n)?;

        let mut check = Checker::new();
        for (i, (&g, &(want, abs))) in got.iter().zip(&p.reference()).enumerate() {
            // The f16 products are exact in f32 (11-bit significands), so only the k-term f32
            // accumulation (in whatever order and grouping the tensor cores use) and the
            // alpha/beta update round: f32_sum_tol of k + 2 terms against the exact reference.
            check.near("C", i, g as f64, want, f32_sum_tol(p.k + 2, abs));
        }
        Ok(check.finish())
    }
}

#[cfg(test)]
mod tests {
    use super::super::util::f16_from_f32;
    use super::*;

    #[test]
    fn reference_of_a_tiny_product() {
        // A = [[1, 2], [3, -0.5]] (row-major), B = [[0.25, 1], [2, -1]] stored by columns.
        let h = |v: &[f32]| v.iter().map(|&x| f16_from_f32(x)).collect::<Vec<_>>();
        let p = Problem {
            m: 2,
            n: 2,
            k: 2,
            alpha: 2.0,
            beta: -1.0,
            a: h(&[1.0, 2.0, 3.0, -0.5]),
            b: h(&[0.25, 2.0, 1.0, -1.0]),
            c: vec![1.0, 0.0, 0.0, 10.0],
        };
        // AB = [[4.25, -1], [-0.25, 3.5]].
        let want = [
            (2.0 * 4.25 - 1.0, 2.0 * 4.25 + 1.0),
            (-2.0, 2.0 * 3.0),
            (-0.5, 2.0 * 1.75),
            (2.0 * 3.5 - 10.0, 2.0 * 3.5 + 10.0),
        ];
        assert_eq!(p.reference(), want);
    }

    #[test]
    fn inputs_are_f16_in_range() {
        let p = Problem::generate(Size::Small, 1);
        assert_eq!((p.a.len(), p.b.len()), (128 * 256, 128 * 256));
        assert!(p.a.iter().chain(&p.b).all(|&h| f16_to_f32(h).abs() <= 1.0));
        assert!(p.a.iter().any(|&h| h & 0x8000 != 0));
    }
}
