//! `mgemm`: the multi-stage pipelined tensor-core GEMM of today's libraries, C = AB with f16
//! A and B (row-major) and f32 C: `cp.async.cg` global→shared copies in a ring of three
//! stages (`commit_group`/`wait_group`, zero-fill through the src-size operand at the K
//! edge), `ldmatrix.x4` (and `.trans` for B) shared→registers, `mma.sync.m16n8k16` f16→f32.

use super::util::{alloc_zeroed, download, f16_to_f32, f32_sum_tol, launch, upload, Checker, Rng};
use crate::{Arg, Device, DeviceError, Dim3, Kernel, Size, Stress, Target, Verification};

/// Must match mgemm.cu: a TB computes a BM x BN tile of C with 128 threads; K needs only be a
/// multiple of one 16-byte chunk (8 halves).
const BM: usize = 64;
const BN: usize = 64;
const K_ALIGN: usize = 8;
const THREADS: u32 = 128;

pub struct Mgemm;

/// C (m x n) = A (m x k) · B (k x n), all row-major; A and B are f16 bit patterns.
#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub a: Vec<u16>,
    pub b: Vec<u16>,
}

impl Problem {
    pub fn generate(size: Size, seed: u64) -> Self {
        // K is deliberately not a multiple of the 32-wide k-tile, so the last tile is partly
        // zero-filled by cp.async. Small: 2x2 TBs of 128 threads, 7 k-tiles (the last one
        // 8 wide): 0.56 M thread instructions on the functional core (~1,090 per thread; per
        // k-tile 4 cp.async, 8 ldmatrix, 16 mma and their addressing). Large: 6x6 TBs, 17
        // k-tiles: 22x the flops, 10.4 M thread instructions (19x). Huge: 40x40 TBs (2.4
        // waves of 5 TBs/SM on the h100), still 17 k-tiles.
        let (m, n, k) = match size {
            Size::Small => (128, 128, 200),
            Size::Large => (384, 384, 520),
            Size::Huge => (2560, 2560, 520),
        };
        let mut rng = Rng::for_kernel("mgemm", seed);
        let a = rng.f16s(m * k, -1.0, 1.0);
        let b = rng.f16s(k * n, -1.0, 1.0);
        Problem { m, n, k, a, b }
    }

    /// Reference in f64 from the exact f16 values: (value, absolute sum of the terms).
    pub fn reference(&self) -> Vec<(f64, f64)> {
        let a: Vec<f64> = self.a.iter().map(|&h| f16_to_f32(h) as f64).collect();
        let b: Vec<f64> = self.b.iter().map(|&h| f16_to_f32(h) as f64).collect();
        let mut out = vec![(0.0, 0.0); self.m * self.n];
        for i in 0..self.m {
            let c = &mut out[i * self.n..(i + 1) * self.n];
            for p in 0..self.k {
                let x = a[i * self.k + p];
                for (cj, &y) in c.iter_mut().zip(&b[p * self.n..(p + 1) * self.n]) {
                    cj.0 += x * y;
                    cj.1 += (x * y).abs();
                }
            }
        }
        out
    }
}

impl Kernel for Mgemm {
    fn name(&self) -> &'static str {
        "mgemm"
    }
    fn description(&self) -> &'static str {
        "pipelined tensor-core GEMM: 3-stage cp.async ring, ldmatrix, mma.sync m16n8k16"
    }
    fn sources(&self) -> &'static [(Target, &'static str)] {
        ptx!("mgemm", [Sm80 "sm_80", Sm90 "sm_90"])
    }
    fn needs_tensor_cores(&self) -> bool {
        true
    }
    fn traits(&self) -> &'static [&'static str] {
        &[
            "tensor cores",
            "mma.sync",
            "cp.async",
            "ldmatrix",
            "f16",
            "software pipeline",
            "shared memory",
        ]
    }
    fn stress(&self) -> Stress {
        // 29,184 B of static shared memory for the three stages: three TBs per 96 KiB SM.
        Stress::SharedMemory
    }

    fn run(
        &self,
        dev: &mut dyn Device,
        size: Size,
        seed: u64,
    ) -> Result<Verification, DeviceError> {
        let p = Problem::generate(size, seed);
        assert!(p.m.is_multiple_of(BM) && p.n.is_multiple_of(BN) && p.k.is_multiple_of(K_ALIGN));
        let a = upload(dev, &p.a)?;
        let b = upload(dev, &p.b)?;
        let c = alloc_zeroed::<f32>(dev, p.m * p.n)?;
        let args = [
            Arg::Ptr(a),
            Arg::Ptr(b),
            Arg::Ptr(c),
            Arg::I32(p.m as i32),
            Arg::I32(p.n as i32),
            Arg::I32(p.k as i32),
        ];
        let grid = Dim3::xy((p.n / BN) as u32, (p.m / BM) as u32);
        launch(dev, "mgemm_f16", grid, Dim3::x(THREADS), &args)?;
        let got: Vec<f32> = download(dev, c, p.m * p.n)?;

        let mut check = Checker::new();
        for (i, (&g, &(want, abs))) in got.iter().zip(&p.reference()).enumerate() {
            // Exact f16 products (11-bit significands fit f32), summed over k in f32 in the
            // tensor cores' order: f32_sum_tol. The zero-filled tail adds exact zeros.
            check.near("C", i, g as f64, want, f32_sum_tol(p.k, abs));
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
        // A = [[1, -2, 0.5]] (1x3), B = [[2, 1], [0.5, -1], [4, 8]] (3x2).
        let h = |v: &[f32]| v.iter().map(|&x| f16_from_f32(x)).collect::<Vec<_>>();
        let p = Problem {
            m: 1,
            n: 2,
            k: 3,
            a: h(&[1.0, -2.0, 0.5]),
            b: h(&[2.0, 1.0, 0.5, -1.0, 4.0, 8.0]),
        };
        assert_eq!(
            p.reference(),
            [(2.0 - 1.0 + 2.0, 5.0), (1.0 + 2.0 + 4.0, 7.0)]
        );
    }

    #[test]
    fn k_is_not_a_whole_number_of_tiles() {
        for size in [Size::Small, Size::Large, Size::Huge] {
            let p = Problem::generate(size, 1);
            assert!(
                !p.k.is_multiple_of(32) && p.k.is_multiple_of(K_ALIGN),
                "{size:?}"
            );
        }
    }
}
