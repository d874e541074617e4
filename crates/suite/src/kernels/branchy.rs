//! `branchy`: divergent nested loops with data-dependent trip counts and a `.local` array.

use super::util::{blocks_for, download, launch, upload, Checker, Rng};
use crate::{Arg, Device, DeviceError, Dim3, Kernel, Size, Stress, Target, Verification};

const BLOCK: u32 = 128;

pub struct Branchy;

#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    pub data: Vec<u32>,
}

/// One thread of branchy.cu, in wrapping u32 arithmetic like the GPU.
pub fn thread(data: &[u32], i: usize) -> u32 {
    let n = data.len() as u32;
    let mut tally = [0u32; 16];
    let mut acc = data[i];
    let outer = (acc & 7) + 1;
    for j in 0..outer {
        let y = data[((i as u32)
            .wrapping_add(7u32.wrapping_mul(j))
            .wrapping_add(1)
            % n) as usize];
        let inner = (y >> 4) & 15;
        for k in 0..inner {
            if acc & 1 != 0 {
                if acc & 2 != 0 {
                    acc = acc.wrapping_mul(3).wrapping_add(k);
                } else {
                    acc ^= y << (k & 7);
                }
            } else {
                acc = (acc >> 1).wrapping_add(j);
                if acc & 12 == 12 {
                    acc = acc.wrapping_add(y);
                }
            }
            tally[(acc & 15) as usize] += 1;
        }
    }
    tally
        .iter()
        .fold(acc, |h, &t| h.wrapping_mul(31).wrapping_add(t))
}

impl Problem {
    pub fn generate(size: Size, seed: u64) -> Self {
        // Small: 32 TBs of 128 threads, ~35 inner iterations each (~2 M instructions);
        // Large: 512 TBs; Huge: 4,608 TBs (2.2 waves of 16 TBs/SM on the h100).
        let n = match size {
            Size::Small => 4096,
            Size::Large => 65_536,
            Size::Huge => 589_824,
        };
        let mut rng = Rng::for_kernel("branchy", seed);
        Problem {
            data: (0..n).map(|_| rng.next_u32()).collect(),
        }
    }

    pub fn reference(&self) -> Vec<u32> {
        (0..self.data.len())
            .map(|i| thread(&self.data, i))
            .collect()
    }
}

impl Kernel for Branchy {
    fn name(&self) -> &'static str {
        "branchy"
    }
    fn description(&self) -> &'static str {
        "divergent nested loops with data-dependent trip counts, nested ifs, .local tally array"
    }
    fn sources(&self) -> &'static [(Target, &'static str)] {
        ptx!("branchy")
    }
    fn traits(&self) -> &'static [&'static str] {
        &[
            "divergent nested loops",
            "nested if/else",
            ".local memory",
            "integer",
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
        let n = p.data.len();
        let data = upload(dev, &p.data)?;
        let out = upload(dev, &vec![0u32; n])?;
        let args = [Arg::Ptr(data), Arg::Ptr(out), Arg::I32(n as i32)];
        launch(
            dev,
            "branchy",
            Dim3::x(blocks_for(n, BLOCK as usize)),
            Dim3::x(BLOCK),
            &args,
        )?;
        let got: Vec<u32> = download(dev, out, n)?;

        let mut check = Checker::new();
        check.exact_slice("out", &got, &p.reference());
        Ok(check.finish())
    }
}
