//! `mandel`: Mandelbrot in 64-bit fixed point, persistent TBs pulling work from an atomic queue.

use super::util::{alloc_zeroed, download, launch, upload, Checker};
use crate::{Arg, Device, DeviceError, Dim3, Kernel, Size, Stress, Target, Verification};

const BLOCK: u32 = 128;
/// Work items per persistent TB on average; the grid follows from the item count.
const ITEMS_PER_TB: usize = 4;
/// `FRAC` in mandel.cu: Q36.28 fixed point.
const FRAC: u32 = 28;

pub struct Mandel;

/// The view: no random input (the seed shifts the window by a few pixels so that different
/// seeds still give different work).
#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    pub width: usize,
    pub height: usize,
    pub x_min: i64,
    pub y_min: i64,
    pub step: i64,
    pub max_iter: i32,
}

impl Problem {
    pub fn generate(size: Size, seed: u64) -> Self {
        // Small: 3072 pixels = 24 items on 6 TBs, up to 64 iterations of ~12 instructions
        // (~1.5 M); Large: 49,152 pixels = 384 items on 96 TBs; Huge: 2,408,448 pixels =
        // 18,816 items on 4,704 TBs (2.2 waves of 16 TBs/SM on the h100).
        let (width, height) = match size {
            Size::Small => (64, 48),
            Size::Large => (256, 192),
            Size::Huge => (1792, 1344),
        };
        let one = 1i64 << FRAC;
        let step = (11 * one / 4) / width as i64; // 2.75 units across
        let shift = (seed % 7) as i64 * step;
        Problem {
            width,
            height,
            x_min: -2 * one + shift,
            y_min: -(step * height as i64) / 2 + shift,
            step,
            max_iter: 64,
        }
    }

    pub fn reference(&self) -> Vec<u32> {
        let four = 4i64 << FRAC;
        let mut out = Vec::with_capacity(self.width * self.height);
        for py in 0..self.height as i64 {
            for px in 0..self.width as i64 {
                let cr = self.x_min + px * self.step;
                let ci = self.y_min + py * self.step;
                let (mut zr, mut zi, mut k) = (0i64, 0i64, 0);
                while k < self.max_iter {
                    // Same operations as the kernel; wrapping like the GPU (no overflow can
                    // occur: |z| <= 6 before the escape test, so products stay below 2^62).
                    let zr2 = zr.wrapping_mul(zr) >> FRAC;
                    let zi2 = zi.wrapping_mul(zi) >> FRAC;
                    if zr2 + zi2 > four {
                        break;
                    }
                    let zri = zr.wrapping_mul(zi) >> (FRAC - 1);
                    zr = zr2 - zi2 + cr;
                    zi = zri + ci;
                    k += 1;
                }
                out.push(k as u32);
            }
        }
        out
    }
}

impl Kernel for Mandel {
    fn name(&self) -> &'static str {
        "mandel"
    }
    fn description(&self) -> &'static str {
        "Mandelbrot in Q36.28 fixed point, persistent TBs grabbing work from an atomic counter"
    }
    fn sources(&self) -> &'static [(Target, &'static str)] {
        ptx!("mandel")
    }
    fn traits(&self) -> &'static [&'static str] {
        &[
            "persistent threads",
            "atomic work queue",
            "barrier in loop",
            "64-bit integer",
            "long TBs",
            "divergent",
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
        let pixels = p.width * p.height;
        let items = pixels.div_ceil(BLOCK as usize);
        let grid = (items / ITEMS_PER_TB).max(1) as u32;
        let iters = upload(dev, &vec![u32::MAX; pixels])?;
        let counter = alloc_zeroed::<u32>(dev, 1)?;
        let args = [
            Arg::Ptr(iters),
            Arg::Ptr(counter),
            Arg::I32(p.width as i32),
            Arg::I32(p.height as i32),
            Arg::U64(p.x_min as u64),
            Arg::U64(p.y_min as u64),
            Arg::U64(p.step as u64),
            Arg::I32(p.max_iter),
        ];
        launch(
            dev,
            "mandel_persistent",
            Dim3::x(grid),
            Dim3::x(BLOCK),
            &args,
        )?;
        let got: Vec<u32> = download(dev, iters, pixels)?;
        let got_counter: Vec<u32> = download(dev, counter, 1)?;

        let mut check = Checker::new();
        check.exact_slice("iters", &got, &p.reference());
        // Every TB takes items until one past the end: items + grid grabs in all.
        check.exact("counter", 0, got_counter[0], (items + grid as usize) as u32);
        Ok(check.finish())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_has_both_escaping_and_bounded_points() {
        let r = Problem::generate(Size::Small, 0).reference();
        assert!(r.contains(&64));
        assert!(r.iter().any(|&k| k < 4));
    }
}
