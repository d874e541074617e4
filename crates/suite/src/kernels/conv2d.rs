//! `conv2d`: 5x5 convolution staging a 27,200-byte input tile in static shared memory.

use super::util::{blocks_for, download, f32_sum_tol, launch, upload, Checker, Rng};
use crate::{Arg, Device, DeviceError, Dim3, Kernel, Size, Stress, Target, Verification};

/// Output tile and TB shape of conv2d.cu.
const OUT_W: usize = 96;
const OUT_H: usize = 64;
const RADIUS: isize = 2;
const TAPS: usize = 5;

pub struct Conv2d;

#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    pub width: usize,
    pub height: usize,
    pub image: Vec<f32>,
    pub weights: Vec<f32>,
}

impl Problem {
    pub fn generate(size: Size, seed: u64) -> Self {
        // Small: 2x2 TBs of 256 threads, 24 outputs x 25 taps each (~2.4 M instructions).
        // Large: 8x8 TBs (16x). Huge: 40x36 TBs (2.2 waves of 5 TBs/SM on the h100). Widths
        // are not multiples of the tile: the edge TBs are partial.
        let (width, height) = match size {
            Size::Small => (180, 120),
            Size::Large => (760, 500),
            Size::Huge => (3800, 2300),
        };
        let mut rng = Rng::for_kernel("conv2d", seed);
        let image = (0..width * height).map(|_| rng.f32()).collect();
        let weights = (0..TAPS * TAPS).map(|_| rng.range_f32(-0.5, 0.5)).collect();
        Problem {
            width,
            height,
            image,
            weights,
        }
    }

    /// f64 reference with clamp-to-edge borders, and the absolute sum of the terms.
    pub fn reference(&self) -> Vec<(f64, f64)> {
        let (w, h) = (self.width as isize, self.height as isize);
        let mut out = Vec::with_capacity(self.image.len());
        for y in 0..h {
            for x in 0..w {
                let (mut s, mut abs) = (0.0f64, 0.0f64);
                for dy in 0..TAPS as isize {
                    for dx in 0..TAPS as isize {
                        let gy = (y + dy - RADIUS).clamp(0, h - 1);
                        let gx = (x + dx - RADIUS).clamp(0, w - 1);
                        let t = self.weights[(dy * TAPS as isize + dx) as usize] as f64
                            * self.image[(gy * w + gx) as usize] as f64;
                        s += t;
                        abs += t.abs();
                    }
                }
                out.push((s, abs));
            }
        }
        out
    }
}

impl Kernel for Conv2d {
    fn name(&self) -> &'static str {
        "conv2d"
    }
    fn description(&self) -> &'static str {
        "5x5 convolution, 32x8 TBs, 26.6 KiB static shared-memory tile"
    }
    fn sources(&self) -> &'static [(Target, &'static str)] {
        ptx!("conv2d")
    }
    fn traits(&self) -> &'static [&'static str] {
        &["2-D TB", "shared-memory-limited", "short TBs", "f32 fma"]
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
        let input = upload(dev, &p.image)?;
        let weights = upload(dev, &p.weights)?;
        let output = upload(dev, &vec![0.0f32; p.image.len()])?;
        let grid = Dim3::xy(blocks_for(p.width, OUT_W), blocks_for(p.height, OUT_H));
        let args = [
            Arg::Ptr(input),
            Arg::Ptr(weights),
            Arg::Ptr(output),
            Arg::I32(p.width as i32),
            Arg::I32(p.height as i32),
        ];
        launch(dev, "conv2d_5x5", grid, Dim3::xy(32, 8), &args)?;
        let got: Vec<f32> = download(dev, output, p.image.len())?;

        let mut check = Checker::new();
        for (i, (&g, &(want, abs))) in got.iter().zip(&p.reference()).enumerate() {
            // 25-term f32 dot product in any order: γ_25 bound of f32_sum_tol.
            check.near("out", i, g as f64, want, f32_sum_tol(TAPS * TAPS, abs));
        }
        Ok(check.finish())
    }
}
