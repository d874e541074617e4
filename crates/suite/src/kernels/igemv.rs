//! `igemv`: int8 matrix-vector product with `dp4a` (an int8-quantized linear layer), one
//! thread per row, plus a per-row hash through `dp2a` and funnel shifts (`shf`).

use super::util::{alloc_zeroed, blocks_for, download, launch, upload, Checker, Rng};
use crate::{Arg, Device, DeviceError, Dim3, Kernel, Size, Stress, Target, Verification};

const BLOCK: u32 = 256;

pub struct Igemv;

/// y = A x over int8 values packed four to a word; A column-major over words (`k4` words
/// per row, leading dimension `m`).
#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    pub m: usize,
    pub k4: usize,
    pub a: Vec<i32>,
    pub x: Vec<i32>,
}

/// The four int8 lanes of a packed word, low byte first.
fn bytes(w: i32) -> [i32; 4] {
    w.to_le_bytes().map(|b| i32::from(b as i8))
}

/// The two 16-bit signed halves of a word, low half first.
fn halves(w: i32) -> [i32; 2] {
    [i32::from(w as i16), i32::from((w >> 16) as i16)]
}

impl Problem {
    pub fn generate(size: Size, seed: u64) -> Self {
        // Small: 8 TBs of 256 threads, 256 int8 columns; large: 32 TBs, 2,048 columns; huge:
        // 2,112 TBs (two waves of 8 TBs/SM on the h100) of Small's 256 columns, so that A
        // stays at 138 MB.
        let (m, k4) = match size {
            Size::Small => (2048, 64),
            Size::Large => (8192, 512),
            Size::Huge => (540_672, 64),
        };
        let mut rng = Rng::for_kernel("igemv", seed);
        let mut fill = |len: usize| (0..len).map(|_| rng.next_u32() as i32).collect::<Vec<_>>();
        let a = fill(m * k4);
        let x = fill(k4);
        Problem { m, k4, a, x }
    }

    /// Per row: the dot product (wrapping int32, as the kernel's int32 sum) and the hash.
    pub fn reference(&self) -> Vec<(i32, u32)> {
        (0..self.m)
            .map(|r| {
                let mut sum = 0i32;
                for j in 0..self.k4 {
                    let (a, x) = (bytes(self.a[j * self.m + r]), bytes(self.x[j]));
                    for l in 0..4 {
                        sum = sum.wrapping_add(a[l] * x[l]);
                    }
                }
                // __dp2a_lo/__dp2a_hi: the two signed halves of the row's first word times
                // bytes 0-1, then 2-3, of x[0].
                let (h, x0) = (halves(self.a[r]), bytes(self.x[0]));
                let lo = h[0] * x0[0] + h[1] * x0[1];
                let hi = h[0] * x0[2] + h[1] * x0[3];
                let mixed = lo.wrapping_sub(hi) as u32;
                // __funnelshift_l(h, h, 13) is a rotate left by 13; __funnelshift_rc(lo, hi,
                // 7) is the low word of {hi, lo} >> 7.
                let s = sum as u32;
                let right = ((u64::from(mixed) << 32 | u64::from(s)) >> 7) as u32;
                (sum, s.rotate_left(13) ^ right)
            })
            .collect()
    }
}

impl Kernel for Igemv {
    fn name(&self) -> &'static str {
        "igemv"
    }
    fn description(&self) -> &'static str {
        "int8 matrix-vector product with dp4a (quantized inference), one thread per row"
    }
    fn sources(&self) -> &'static [(Target, &'static str)] {
        ptx!("igemv")
    }
    fn traits(&self) -> &'static [&'static str] {
        &["int8", "dp4a", "memory-bound", "coalesced"]
    }
    fn stress(&self) -> Stress {
        Stress::WarpSlots
    }

    fn run(
        &self,
        dev: &mut dyn Device,
        size: Size,
        seed: u64,
    ) -> Result<Verification, DeviceError> {
        let p = Problem::generate(size, seed);
        let a = upload(dev, &p.a)?;
        let x = upload(dev, &p.x)?;
        let y = alloc_zeroed::<i32>(dev, p.m)?;
        let mix = alloc_zeroed::<u32>(dev, p.m)?;
        let args = [
            Arg::Ptr(a),
            Arg::Ptr(x),
            Arg::Ptr(y),
            Arg::Ptr(mix),
            Arg::I32(p.m as i32),
            Arg::I32(p.k4 as i32),
        ];
        launch(
            dev,
            "igemv_dp4a",
            Dim3::x(blocks_for(p.m, BLOCK as usize)),
            Dim3::x(BLOCK),
            &args,
        )?;
        let got_y: Vec<i32> = download(dev, y, p.m)?;
        let got_mix: Vec<u32> = download(dev, mix, p.m)?;
        let want = p.reference();
        let mut check = Checker::new();
        let want_y: Vec<i32> = want.iter().map(|w| w.0).collect();
        let want_mix: Vec<u32> = want.iter().map(|w| w.1).collect();
        check.exact_slice("y", &got_y, &want_y);
        check.exact_slice("mix", &got_mix, &want_mix);
        Ok(check.finish())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lanes_are_signed_bytes_and_halves() {
        assert_eq!(bytes(0x80FF_7F01u32 as i32), [1, 127, -1, -128]);
        assert_eq!(halves(0x8000_7FFFu32 as i32), [32767, -32768]);
    }
}
