//! `softmax`: numerically stable row softmax (max, `expf`, sum, scale), one 256-thread TB per
//! row, with shuffle-and-shared-memory TB reductions.

use super::util::{alloc_zeroed, download, launch, upload, Checker, Rng};
use crate::{Arg, Device, DeviceError, Dim3, Kernel, Size, Stress, Target, Verification};

const BLOCK: u32 = 256;

pub struct Softmax;

/// `rows` × `cols` row-major scores.
#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    pub rows: usize,
    pub cols: usize,
    pub x: Vec<f32>,
}

/// Softmax of one row in f64, shifted by the row maximum as the kernel is (the shift cancels
/// mathematically, and keeps `exp` finite for any input).
pub fn softmax(x: &[f32]) -> Vec<f64> {
    let m = x.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
    let e: Vec<f64> = x.iter().map(|&v| (v as f64 - m).exp()).collect();
    let sum: f64 = e.iter().sum();
    e.iter().map(|v| v / sum).collect()
}

/// Per-element tolerances for the f32 kernel's row against [`softmax`].
///
/// Relative error analysis (u = 2^-24, ε = 2u = `f32::EPSILON`):
/// - `x_j - max` is rounded (relative u), an absolute error of u·|x_j - max| in the exponent,
///   so a relative u·|x_j - max| in e_j; NVRTC's accurate `expf` adds at most 2 ulp ≤ 2ε
///   relative (CUDA Programming Guide, maximum ulp errors). a_j = u·|x_j - max| + 2ε.
/// - the sum of the e_j: at most max_j a_j from its terms, plus (depth + 2)ε for an addition
///   tree at most cols/256 + 10 deep (a thread's share serially, two five-level butterflies).
/// - `1/sum` (`rcp.rn`) and the multiply: u each.
///
/// y_j is within (a_j + max_k a_k + (depth + 2)ε + ε)·y_j; doubled, as in the other modules,
/// for second-order terms and the reference's own rounding. The maximum itself is exact
/// (`max.f32`).
pub fn tolerances(x: &[f32], y: &[f64]) -> Vec<f64> {
    let e = f32::EPSILON as f64;
    let u = e / 2.0;
    let m = x.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
    let a: Vec<f64> = x
        .iter()
        .map(|&v| u * (v as f64 - m).abs() + 2.0 * e)
        .collect();
    let a_max = a.iter().fold(0.0f64, |s, &v| s.max(v));
    let depth = x.len() / BLOCK as usize + 2 * 5;
    let sum_rel = a_max + (depth as f64 + 2.0) * e;
    a.iter()
        .zip(y)
        .map(|(aj, yj)| 2.0 * (aj + sum_rel + e) * yj)
        .collect()
}

impl Problem {
    pub fn generate(size: Size, seed: u64) -> Self {
        // Rows of 1,024 scores, one 256-thread TB each. Small: 32 rows, ~340 instructions per
        // thread (~2.8 M); Large: 512 rows (~45 M); Huge: 2,304 rows (2.2 waves of 8 TBs/SM on
        // the h100).
        let (rows, cols) = match size {
            Size::Small => (32, 1024),
            Size::Large => (512, 1024),
            Size::Huge => (2304, 1024),
        };
        let mut rng = Rng::for_kernel("softmax", seed);
        let mut x = Vec::with_capacity(rows * cols);
        for _ in 0..rows {
            // Spreads of 1 to 20 make the smallest outputs ~e^-40 of the largest (still normal
            // f32, far from expf's ftz range). A quarter of the rows sit around 100, beyond
            // expf's overflow at ~88.7: only the max shift keeps them finite.
            let spread = [1.0, 8.0, 20.0][rng.below(3) as usize];
            let offset = if rng.below(4) == 0 {
                100.0
            } else {
                rng.range_f32(-5.0, 5.0)
            };
            x.extend((0..cols).map(|_| offset + rng.range_f32(-spread, spread)));
        }
        Problem { rows, cols, x }
    }

    pub fn row(&self, r: usize) -> &[f32] {
        &self.x[r * self.cols..(r + 1) * self.cols]
    }
}

impl Kernel for Softmax {
    fn name(&self) -> &'static str {
        "softmax"
    }
    fn description(&self) -> &'static str {
        "numerically stable row softmax (max, expf, sum), one 256-thread TB per row"
    }
    fn sources(&self) -> &'static [(Target, &'static str)] {
        ptx!("softmax")
    }
    fn traits(&self) -> &'static [&'static str] {
        &[
            "warp shuffles",
            "TB reductions",
            "transcendentals",
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
        let y = alloc_zeroed::<f32>(dev, rows * cols)?;
        let args = [Arg::Ptr(x), Arg::Ptr(y), Arg::I32(cols as i32)];
        launch(
            dev,
            "softmax_rows",
            Dim3::x(rows as u32),
            Dim3::x(BLOCK),
            &args,
        )?;
        let got: Vec<f32> = download(dev, y, rows * cols)?;

        let mut check = Checker::new();
        for r in 0..rows {
            let want = softmax(p.row(r));
            let tol = tolerances(p.row(r), &want);
            for c in 0..cols {
                let i = r * cols + c;
                check.near("y", i, got[i] as f64, want[c], tol[c]);
            }
        }
        Ok(check.finish())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_computed_row() {
        // exp of 0, ln 2, ln 3, ln 2 is 1, 2, 3, 2: a total of 8.
        let (l2, l3) = (2f32.ln(), 3f32.ln());
        let y = softmax(&[0.0, l2, l3, l2]);
        for (got, want) in y.iter().zip([0.125, 0.25, 0.375, 0.25]) {
            assert!((got - want).abs() < 1e-7, "{got} {want}");
        }
    }

    #[test]
    fn rows_sum_to_one_and_shifts_cancel() {
        let p = Problem::generate(Size::Small, 4);
        assert!(p.x.iter().any(|&v| v > 95.0), "no row beyond expf's range");
        for r in 0..p.rows {
            let y = softmax(p.row(r));
            assert!(y.iter().all(|v| v.is_finite() && *v > 0.0));
            assert!((y.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        }
        // A shift by 1,000 (e^1000 overflows even f64) changes nothing; the shifted values
        // are exact in f32.
        let row = [1.0f32, -2.0, 0.5, 3.0];
        let shifted = row.map(|v| v + 1000.0);
        for (a, b) in softmax(&row).iter().zip(softmax(&shifted)) {
            assert!((a - b).abs() < 1e-15, "{a} {b}");
        }
    }

    /// A plain f32 evaluation (serial sum, division per element) lies within the tolerances,
    /// and they stay small relative to the values.
    #[test]
    fn tolerances_admit_f32_and_are_tight() {
        let p = Problem::generate(Size::Small, 2);
        for r in 0..p.rows {
            let x = p.row(r);
            let want = softmax(x);
            let tol = tolerances(x, &want);
            let m = x.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
            let e: Vec<f32> = x.iter().map(|&v| (v - m).exp()).collect();
            let sum: f32 = e.iter().sum();
            for c in 0..x.len() {
                let got = (e[c] / sum) as f64;
                assert!((got - want[c]).abs() <= tol[c], "row {r} col {c}");
                assert!(tol[c] < 1e-4 * want[c]);
            }
        }
    }
}
