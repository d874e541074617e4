//! `dct8`: 8x8 2-D DCT with one thread per block and the whole block in registers.

use super::util::{blocks_for, download, f32_sum_tol, launch, upload, Checker, Rng};
use crate::{Arg, Device, DeviceError, Dim3, Kernel, Size, Stress, Target, Verification};

const BLOCK: u32 = 64;

/// The coefficient table of dct8.cu, with the same decimal literals, so that both sides round
/// them to the same f32 values (hence more digits than an f32 holds, and the lint allowance).
#[rustfmt::skip]
#[allow(clippy::excessive_precision)]
pub const COEF: [[f32; 8]; 8] = [
    [3.535533906e-01, 3.535533906e-01, 3.535533906e-01, 3.535533906e-01, 3.535533906e-01, 3.535533906e-01, 3.535533906e-01, 3.535533906e-01],
    [4.903926402e-01, 4.157348062e-01, 2.777851165e-01, 9.754516101e-02, -9.754516101e-02, -2.777851165e-01, -4.157348062e-01, -4.903926402e-01],
    [4.619397663e-01, 1.913417162e-01, -1.913417162e-01, -4.619397663e-01, -4.619397663e-01, -1.913417162e-01, 1.913417162e-01, 4.619397663e-01],
    [4.157348062e-01, -9.754516101e-02, -4.903926402e-01, -2.777851165e-01, 2.777851165e-01, 4.903926402e-01, 9.754516101e-02, -4.157348062e-01],
    [3.535533906e-01, -3.535533906e-01, -3.535533906e-01, 3.535533906e-01, 3.535533906e-01, -3.535533906e-01, -3.535533906e-01, 3.535533906e-01],
    [2.777851165e-01, -4.903926402e-01, 9.754516101e-02, 4.157348062e-01, -4.157348062e-01, -9.754516101e-02, 4.903926402e-01, -2.777851165e-01],
    [1.913417162e-01, -4.619397663e-01, 4.619397663e-01, -1.913417162e-01, -1.913417162e-01, 4.619397663e-01, -4.619397663e-01, 1.913417162e-01],
    [9.754516101e-02, -2.777851165e-01, 4.157348062e-01, -4.903926402e-01, 4.903926402e-01, -4.157348062e-01, 2.777851165e-01, -9.754516101e-02],
];

pub struct Dct8;

#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    pub width: usize,
    pub height: usize,
    pub image: Vec<f32>,
}

impl Problem {
    pub fn generate(size: Size, seed: u64) -> Self {
        // Small: 512 8x8 blocks = 8 TBs of 64 threads, ~1,200 instructions each (0.6 M).
        // Large: 8192 blocks = 128 TBs (16x). Huge: 229,376 blocks = 3,584 TBs (2.3 waves of 12
        // TBs/SM on the h100).
        let (width, height) = match size {
            Size::Small => (256, 128),
            Size::Large => (1024, 512),
            Size::Huge => (4096, 3584),
        };
        let mut rng = Rng::for_kernel("dct8", seed);
        // Pixel-like values: a gradient plus noise, in [0, 255].
        let image = (0..width * height)
            .map(|i| {
                let (x, y) = ((i % width) as f32, (i / width) as f32);
                (0.4 * x + 0.3 * y) % 200.0 + rng.range_f32(0.0, 55.0)
            })
            .collect();
        Problem {
            width,
            height,
            image,
        }
    }

    /// Reference Y = C X C^T per block in f64 over the f32 coefficients, with the absolute sum
    /// of the 64 terms of each output. Indexed loops on purpose: they read like the formula.
    #[allow(clippy::needless_range_loop)]
    pub fn reference(&self) -> Vec<(f64, f64)> {
        let w = self.width;
        let mut out = vec![(0.0, 0.0); self.image.len()];
        for by in (0..self.height).step_by(8) {
            for bx in (0..w).step_by(8) {
                for v in 0..8 {
                    for u in 0..8 {
                        let (mut s, mut abs) = (0.0f64, 0.0f64);
                        for r in 0..8 {
                            for x in 0..8 {
                                let t = COEF[v][r] as f64
                                    * COEF[u][x] as f64
                                    * self.image[(by + r) * w + bx + x] as f64;
                                s += t;
                                abs += t.abs();
                            }
                        }
                        out[(by + v) * w + bx + u] = (s, abs);
                    }
                }
            }
        }
        out
    }
}

impl Kernel for Dct8 {
    fn name(&self) -> &'static str {
        "dct8"
    }
    fn description(&self) -> &'static str {
        "8x8 DCT-II, one thread per block, 64 values live in registers"
    }
    fn sources(&self) -> &'static [(Target, &'static str)] {
        ptx!("dct8")
    }
    fn traits(&self) -> &'static [&'static str] {
        &[
            "register-limited",
            "fully unrolled",
            "compute-bound",
            "short TBs",
            "f32 fma",
        ]
    }
    fn stress(&self) -> Stress {
        Stress::Registers
    }

    fn run(
        &self,
        dev: &mut dyn Device,
        size: Size,
        seed: u64,
    ) -> Result<Verification, DeviceError> {
        let p = Problem::generate(size, seed);
        let input = upload(dev, &p.image)?;
        let output = upload(dev, &vec![0.0f32; p.image.len()])?;
        let nblocks = (p.width / 8) * (p.height / 8);
        let args = [
            Arg::Ptr(input),
            Arg::Ptr(output),
            Arg::I32(p.width as i32),
            Arg::I32(p.height as i32),
        ];
        let grid = Dim3::x(blocks_for(nblocks, BLOCK as usize));
        launch(dev, "dct8x8", grid, Dim3::x(BLOCK), &args)?;
        let got: Vec<f32> = download(dev, output, p.image.len())?;

        let mut check = Checker::new();
        for (i, (&g, &(want, abs))) in got.iter().zip(&p.reference()).enumerate() {
            // Two passes of 8-term f32 sums: error below 2·γ_8·Σ|terms|, inside the
            // 16-term bound (the GPU and the f64 reference use identical f32 coefficients).
            check.near("Y", i, g as f64, want, f32_sum_tol(16, abs));
        }
        Ok(check.finish())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coefficients_are_the_orthonormal_dct() {
        for (u, row) in COEF.iter().enumerate() {
            let a = if u == 0 { (1.0f64 / 8.0).sqrt() } else { 0.5 };
            for (x, &c) in row.iter().enumerate() {
                let exact = a * (((2 * x + 1) * u) as f64 * std::f64::consts::PI / 16.0).cos();
                assert_eq!(c, exact as f32, "C[{u}][{x}]");
            }
        }
    }

    #[test]
    fn constant_block_has_only_dc() {
        let p = Problem {
            width: 8,
            height: 8,
            image: vec![2.0; 64],
        };
        let r = p.reference();
        assert!((r[0].0 - 16.0).abs() < 1e-5);
        assert!(r[1..].iter().all(|&(v, _)| v.abs() < 1e-5));
    }
}
