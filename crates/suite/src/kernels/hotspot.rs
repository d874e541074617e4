//! `hotspot`: 2-D thermal stencil iterated over time steps with ping-pong buffers.

use super::util::{blocks_for, download, launch, upload, Checker, Rng};
use crate::{Arg, Device, DeviceError, Dim3, Kernel, Size, Stress, Target, Verification};

const BS: usize = 16;
// Model constants: explicit Euler step, stable because every weight of the update is
// non-negative (1 - cap·(2·rx + 2·ry + rz) > 0).
const CAP: f32 = 0.5;
const RX: f32 = 0.1;
const RY: f32 = 0.1;
const RZ: f32 = 0.01;
const AMB: f32 = 80.0;

pub struct Hotspot;

#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    pub width: usize,
    pub height: usize,
    pub steps: usize,
    pub temp: Vec<f32>,
    pub power: Vec<f32>,
}

impl Problem {
    pub fn generate(size: Size, seed: u64) -> Self {
        // Small: 4x4 TBs, 4 launches (~0.7 M instructions); Large: 16x16 TBs, 6 launches;
        // Huge: 48x48 TBs (2.9 waves of 6 TBs/SM on the h100), 6 launches.
        let (width, height, steps) = match size {
            Size::Small => (64, 64, 4),
            Size::Large => (256, 256, 6),
            Size::Huge => (768, 768, 6),
        };
        let mut rng = Rng::for_kernel("hotspot", seed);
        let temp = (0..width * height)
            .map(|_| rng.range_f32(320.0, 340.0))
            .collect();
        let power = (0..width * height)
            .map(|_| rng.range_f32(0.0, 0.5))
            .collect();
        Problem {
            width,
            height,
            steps,
            temp,
            power,
        }
    }

    /// The same update in f32, step by step, evaluated as written (no fused multiply-adds).
    pub fn reference(&self) -> Vec<f32> {
        let (w, h) = (self.width, self.height);
        let mut cur = self.temp.clone();
        let mut next = cur.clone();
        for _ in 0..self.steps {
            for y in 0..h {
                for x in 0..w {
                    let at = |xx: usize, yy: usize| cur[yy * w + xx];
                    let c = at(x, y);
                    let ns = at(x, y.saturating_sub(1)) + at(x, (y + 1).min(h - 1)) - 2.0 * c;
                    let ew = at(x.saturating_sub(1), y) + at((x + 1).min(w - 1), y) - 2.0 * c;
                    let p = self.power[y * w + x];
                    next[y * w + x] = c + CAP * (p + ns * RY + ew * RX + (AMB - c) * RZ);
                }
            }
            std::mem::swap(&mut cur, &mut next);
        }
        cur
    }
}

impl Kernel for Hotspot {
    fn name(&self) -> &'static str {
        "hotspot"
    }
    fn description(&self) -> &'static str {
        "HotSpot-like 5-point thermal stencil, 16x16 TBs, host loop over time steps"
    }
    fn sources(&self) -> &'static [(Target, &'static str)] {
        ptx!("hotspot")
    }
    fn traits(&self) -> &'static [&'static str] {
        &[
            "2-D TB",
            "stencil",
            "host loop",
            "ping-pong buffers",
            "shared memory",
            "short TBs",
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
        let mut bufs = [upload(dev, &p.temp)?, upload(dev, &p.temp)?];
        let power = upload(dev, &p.power)?;
        let grid = Dim3::xy(blocks_for(p.width, BS), blocks_for(p.height, BS));
        for _ in 0..p.steps {
            let args = [
                Arg::Ptr(bufs[0]),
                Arg::Ptr(power),
                Arg::Ptr(bufs[1]),
                Arg::I32(p.width as i32),
                Arg::I32(p.height as i32),
                Arg::F32(CAP),
                Arg::F32(RX),
                Arg::F32(RY),
                Arg::F32(RZ),
                Arg::F32(AMB),
            ];
            launch(
                dev,
                "hotspot_step",
                grid,
                Dim3::xy(BS as u32, BS as u32),
                &args,
            )?;
            bufs.swap(0, 1);
        }
        let got: Vec<f32> = download(dev, bufs[0], p.temp.len())?;

        let mut check = Checker::new();
        for (i, (&g, &want)) in got.iter().zip(&p.reference()).enumerate() {
            // The GPU fuses some multiply-adds, the reference does not: each step differs by a
            // few roundings of quantities of the size of the temperature (~8 ε·|t|), and the
            // update, a convex combination, does not amplify earlier differences. So allow
            // 16 ε·|t| per step.
            let tol = 16.0 * f32::EPSILON as f64 * want.abs() as f64 * p.steps as f64;
            check.near("temp", i, g as f64, want as f64, tol);
        }
        Ok(check.finish())
    }
}
