//! `layernorm`: transformer layer normalisation of f32 rows, one warp per row, with the row
//! statistics reduced by `__shfl_xor_sync` butterflies and float4 (`.v4`) loads and stores.

use super::util::{alloc_zeroed, blocks_for, download, f32_sum_tol, launch, upload, Checker, Rng};
use crate::{Arg, Device, DeviceError, Dim3, Kernel, Size, Stress, Target, Verification};

const BLOCK: u32 = 128;
const WARP: usize = 32;
/// PyTorch's default.
const EPS: f32 = 1e-5;

pub struct Layernorm;

/// `rows` × `cols` row-major input; `gamma` and `beta` per column.
#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    pub rows: usize,
    pub cols: usize,
    pub x: Vec<f32>,
    pub gamma: Vec<f32>,
    pub beta: Vec<f32>,
}

/// One row normalised in f64: its mean, 1/sqrt(var + eps) and outputs.
#[derive(Clone, Debug, PartialEq)]
pub struct Normalized {
    pub mean: f64,
    pub rstd: f64,
    pub y: Vec<f64>,
}

/// Layer normalisation of one row (biased variance, as every framework uses).
pub fn normalize(x: &[f32], gamma: &[f32], beta: &[f32], eps: f32) -> Normalized {
    let n = x.len() as f64;
    let mean = x.iter().map(|&v| v as f64).sum::<f64>() / n;
    let var = x.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n;
    let rstd = 1.0 / (var + eps as f64).sqrt();
    let y = x
        .iter()
        .zip(gamma.iter().zip(beta))
        .map(|(&v, (&g, &b))| (v as f64 - mean) * rstd * g as f64 + b as f64)
        .collect();
    Normalized { mean, rstd, y }
}

/// Tolerances for the f32 kernel's results on one row against [`normalize`]: (mean, rstd,
/// per-element y).
///
/// Forward error analysis of the kernel's steps, each bound valid for any summation order and
/// with or without contraction to fma (u = 2^-24, ε = 2u = `f32::EPSILON`):
/// - mean: a sum of n terms whose tree is at most n/32 + 5 deep (a lane's share serially, then
///   the five butterfly levels), `f32_sum_tol`, then a division: δμ.
/// - deviations d = x - μ̂: off by δμ plus the subtraction's rounding, δ_j = δμ + ε|d_j|.
/// - variance: each square off by 2|d_j|δ_j + δ_j², plus the sum's own rounding, the division
///   and adding eps.
/// - rstd = (var + eps)^-1/2 halves the relative error of its argument; `rsqrt.approx.f32` adds
///   at most 2^-22.9 < 2ε relative: ρ.
/// - y_j = d̂_j·r̂·γ_j + β_j: |γ_j|·r·(δ_j + |d_j|(ρ + 2ε)) for the product chain, ε|y_j| for
///   the last rounding.
///
/// Each bound is doubled for the second-order terms left out and the reference's own rounding.
pub fn tolerances(x: &[f32], gamma: &[f32], eps: f32, r: &Normalized) -> (f64, f64, Vec<f64>) {
    let e = f32::EPSILON as f64;
    let n = x.len();
    let depth = n / WARP + 5;
    let d: Vec<f64> = x.iter().map(|&v| v as f64 - r.mean).collect();
    let abs_sum: f64 = x.iter().map(|&v| (v as f64).abs()).sum();
    let dmu = f32_sum_tol(depth, abs_sum) / n as f64 + e * r.mean.abs();
    let delta: Vec<f64> = d.iter().map(|dj| dmu + e * dj.abs()).collect();
    let sq: f64 = d.iter().map(|dj| dj * dj).sum();
    let var = sq / n as f64;
    let square_err: f64 = d
        .iter()
        .zip(&delta)
        .map(|(dj, dl)| 2.0 * dj.abs() * dl + dl * dl)
        .sum();
    let denom = var + eps as f64;
    let dvar = (square_err + f32_sum_tol(depth, sq)) / n as f64 + e * denom;
    let rho = 0.5 * dvar / denom + 2.0 * e;
    let y_tol = d
        .iter()
        .zip(&delta)
        .zip(gamma.iter().zip(&r.y))
        .map(|((dj, dl), (&g, yj))| {
            2.0 * ((g as f64).abs() * r.rstd * (dl + dj.abs() * (rho + 2.0 * e)) + e * yj.abs())
        })
        .collect();
    (2.0 * dmu, 2.0 * rho * r.rstd, y_tol)
}

impl Problem {
    pub fn generate(size: Size, seed: u64) -> Self {
        // Rows of 1,024 (a transformer's hidden size); four rows per 128-thread TB.
        // Small: 128 rows, 32 TBs, ~430 instructions per thread (~1.8 M); Large: 2,048 rows,
        // 512 TBs (~28 M); Huge: 12,288 rows, 3,072 TBs (2.3 waves of 10 TBs/SM on the h100).
        let (rows, cols) = match size {
            Size::Small => (128, 1024),
            Size::Large => (2048, 1024),
            Size::Huge => (12_288, 1024),
        };
        let mut rng = Rng::for_kernel("layernorm", seed);
        let mut x = Vec::with_capacity(rows * cols);
        for _ in 0..rows {
            // Per-row offset and spread: some rows have a mean several times their standard
            // deviation, where a one-pass E[x²] - mean² formula would lose digits.
            let offset = rng.range_f32(-4.0, 4.0);
            let spread = rng.range_f32(0.1, 2.0);
            x.extend((0..cols).map(|_| offset + spread * rng.range_f32(-1.0, 1.0)));
        }
        let gamma = (0..cols).map(|_| rng.range_f32(0.5, 1.5)).collect();
        let beta = (0..cols).map(|_| rng.range_f32(-0.5, 0.5)).collect();
        Problem {
            rows,
            cols,
            x,
            gamma,
            beta,
        }
    }

    pub fn row(&self, r: usize) -> &[f32] {
        &self.x[r * self.cols..(r + 1) * self.cols]
    }
}

impl Kernel for Layernorm {
    fn name(&self) -> &'static str {
        "layernorm"
    }
    fn description(&self) -> &'static str {
        "transformer layer normalisation of f32 rows, one warp per row, shuffle reductions"
    }
    fn sources(&self) -> &'static [(Target, &'static str)] {
        ptx!("layernorm")
    }
    fn traits(&self) -> &'static [&'static str] {
        &[
            "warp shuffles",
            "vector loads",
            "memory-bound",
            "three passes per row",
            "f32",
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
        let (rows, cols) = (p.rows, p.cols);
        let x = upload(dev, &p.x)?;
        let gamma = upload(dev, &p.gamma)?;
        let beta = upload(dev, &p.beta)?;
        let y = alloc_zeroed::<f32>(dev, rows * cols)?;
        let mean = alloc_zeroed::<f32>(dev, rows)?;
        let rstd = alloc_zeroed::<f32>(dev, rows)?;
        let args = [
            Arg::Ptr(x),
            Arg::Ptr(gamma),
            Arg::Ptr(beta),
            Arg::Ptr(y),
            Arg::Ptr(mean),
            Arg::Ptr(rstd),
            Arg::I32(rows as i32),
            Arg::I32(cols as i32),
            Arg::F32(EPS),
        ];
        let rows_per_tb = BLOCK as usize / WARP;
        launch(
            dev,
            "layernorm_rows",
            Dim3::x(blocks_for(rows, rows_per_tb)),
            Dim3::x(BLOCK),
            &args,
        )?;
        let got_y: Vec<f32> = download(dev, y, rows * cols)?;
        let got_mean: Vec<f32> = download(dev, mean, rows)?;
        let got_rstd: Vec<f32> = download(dev, rstd, rows)?;

        let mut check = Checker::new();
        for r in 0..rows {
            let want = normalize(p.row(r), &p.gamma, &p.beta, EPS);
            let (tol_mean, tol_rstd, tol_y) = tolerances(p.row(r), &p.gamma, EPS, &want);
            check.near("mean", r, got_mean[r] as f64, want.mean, tol_mean);
            check.near("rstd", r, got_rstd[r] as f64, want.rstd, tol_rstd);
            let got_row = &got_y[r * cols..(r + 1) * cols];
            for (c, (&got, (&w, &tol))) in got_row.iter().zip(want.y.iter().zip(&tol_y)).enumerate()
            {
                check.near("y", r * cols + c, got as f64, w, tol);
            }
        }
        Ok(check.finish())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_computed_rows() {
        // Mean 2, variance 1: the normalised row is ±1, then ×2 + 0.5.
        let r = normalize(&[1.0, 3.0, 1.0, 3.0], &[2.0; 4], &[0.5; 4], 0.0);
        assert_eq!((r.mean, r.rstd), (2.0, 1.0));
        assert_eq!(r.y, [-1.5, 2.5, -1.5, 2.5]);
        // Mean 1, variance 1, eps 3: rstd = 1/sqrt(4).
        let r = normalize(&[0.0, 0.0, 2.0, 2.0], &[1.0; 4], &[0.0; 4], 3.0);
        assert_eq!((r.mean, r.rstd), (1.0, 0.5));
        assert_eq!(r.y, [-0.5, -0.5, 0.5, 0.5]);
    }

    /// With γ = 1 and β = 0 every output row has mean 0 and mean square var / (var + eps).
    #[test]
    fn outputs_are_standardized() {
        let p = Problem::generate(Size::Small, 5);
        for r in 0..4 {
            let n = normalize(p.row(r), &[1.0; 1024], &[0.0; 1024], EPS);
            let mean_y = n.y.iter().sum::<f64>() / 1024.0;
            let ms_y = n.y.iter().map(|v| v * v).sum::<f64>() / 1024.0;
            let var = 1.0 / (n.rstd * n.rstd) - EPS as f64;
            assert!(mean_y.abs() < 1e-12, "{mean_y}");
            assert!((ms_y - var / (var + EPS as f64)).abs() < 1e-12, "{ms_y}");
        }
    }

    /// A plain f32 evaluation (serial sums, a different order from the kernel's) lies within
    /// the tolerances, and they stay far below the values themselves.
    #[test]
    fn tolerances_admit_f32_and_are_tight() {
        let p = Problem::generate(Size::Small, 9);
        for r in 0..p.rows {
            let x = p.row(r);
            let want = normalize(x, &p.gamma, &p.beta, EPS);
            let (tm, tr, ty) = tolerances(x, &p.gamma, EPS, &want);
            let mean = x.iter().sum::<f32>() / x.len() as f32;
            let var = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / x.len() as f32;
            let rstd = 1.0 / (var + EPS).sqrt();
            assert!(close(mean, want.mean, tm));
            assert!(close(rstd, want.rstd, tr));
            assert!(tr < 2e-3 * want.rstd);
            for c in 0..x.len() {
                let y = (x[c] - mean) * rstd * p.gamma[c] + p.beta[c];
                assert!(close(y, want.y[c], ty[c]), "row {r} col {c}");
                // Outputs are O(1); the worst rows (mean ~70 standard deviations) amplify
                // the mean's rounding by rstd ~17, so the bound reaches ~2e-3 there.
                assert!(ty[c] < 4e-3, "{}", ty[c]);
            }
        }
    }

    fn close(got: f32, want: f64, tol: f64) -> bool {
        (got as f64 - want).abs() <= tol
    }
}
