//! `mulword`: 256-bit bignum arithmetic, one operation per thread, through inline-PTX carry
//! chains (`mad.lo.cc`, `madc.hi.cc`, `addc`, `add.cc`, `subc` ...) on 32- and 64-bit limbs.

use super::util::{alloc_zeroed, blocks_for, download, launch, upload, Checker, Rng};
use crate::{Arg, Device, DeviceError, Dim3, Kernel, Size, Stress, Target, Verification};

const BLOCK: u32 = 128;
/// 32-bit limbs per operand.
const LIMBS: usize = 8;

pub struct Mulword;

/// `n` pairs of 256-bit operands, `LIMBS` u32 limbs each, least significant first.
#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    pub n: usize,
    pub a: Vec<u32>,
    pub b: Vec<u32>,
}

/// Schoolbook product on 32-bit limbs: every partial product and carry fits a u64, since
/// (2^32 - 1)^2 + 2 (2^32 - 1) = 2^64 - 1.
pub fn mul_u32(a: &[u32; LIMBS], b: &[u32; LIMBS]) -> [u32; 2 * LIMBS] {
    let mut r = [0u32; 2 * LIMBS];
    for (i, &bi) in b.iter().enumerate() {
        let mut carry = 0u64;
        for (j, &aj) in a.iter().enumerate() {
            let t = aj as u64 * bi as u64 + r[i + j] as u64 + carry;
            r[i + j] = t as u32;
            carry = t >> 32;
        }
        r[i + LIMBS] = carry as u32;
    }
    r
}

/// The same product on 64-bit limbs with u128 intermediates: an independent reference for
/// `mul_u64x4`, and a cross-check of [`mul_u32`].
pub fn mul_u64(a: &[u64; 4], b: &[u64; 4]) -> [u64; 8] {
    let mut r = [0u64; 8];
    for (i, &bi) in b.iter().enumerate() {
        let mut carry = 0u128;
        for (j, &aj) in a.iter().enumerate() {
            let t = aj as u128 * bi as u128 + r[i + j] as u128 + carry;
            r[i + j] = t as u64;
            carry = t >> 64;
        }
        r[i + 4] = carry as u64;
    }
    r
}

/// (a + b mod 2^256, carry out, a - b mod 2^256, borrow as 0 or 0xffff_ffff like `subc`).
pub fn add_sub(a: &[u32; LIMBS], b: &[u32; LIMBS]) -> ([u32; LIMBS], u32, [u32; LIMBS], u32) {
    let (mut s, mut d) = ([0u32; LIMBS], [0u32; LIMBS]);
    let (mut carry, mut borrow) = (0u64, 0u64);
    for k in 0..LIMBS {
        let t = a[k] as u64 + b[k] as u64 + carry;
        (s[k], carry) = (t as u32, t >> 32);
        // In two's complement the high word of the difference is 0 or all ones.
        let t = (a[k] as u64).wrapping_sub(b[k] as u64 + borrow);
        (d[k], borrow) = (t as u32, t >> 63);
    }
    (s, carry as u32, d, (borrow as u32).wrapping_neg())
}

/// Four 64-bit limbs from eight 32-bit ones (the device's little-endian view of the buffer).
pub fn to_u64(x: &[u32; LIMBS]) -> [u64; 4] {
    std::array::from_fn(|k| x[2 * k] as u64 | (x[2 * k + 1] as u64) << 32)
}

impl Problem {
    pub fn generate(size: Size, seed: u64) -> Self {
        // Small: 4,096 threads in 32 TBs, ~350 instructions each over the three launches
        // (~1.4 M); Large: 65,536 threads (~23 M); Huge: 589,824 threads, 4,608 TBs per launch
        // (2.2 waves of 16 TBs/SM on the h100 for the first launch, 2.9 of 12 for mul_u64x4).
        let n = match size {
            Size::Small => 4096,
            Size::Large => 65_536,
            Size::Huge => 589_824,
        };
        let mut rng = Rng::for_kernel("mulword", seed);
        let number = |rng: &mut Rng| -> [u32; LIMBS] {
            // Random limbs carry about half the time; all-ones operands and limbs drawn from
            // the extremes make every carry of a chain propagate.
            match rng.below(4) {
                0 | 1 => std::array::from_fn(|_| rng.next_u32()),
                2 => [u32::MAX; LIMBS],
                _ => std::array::from_fn(|_| match rng.below(5) {
                    0 => 0,
                    1 => 1,
                    2 => u32::MAX,
                    3 => 1 << 31,
                    _ => rng.next_u32(),
                }),
            }
        };
        let (mut a, mut b) = (Vec::with_capacity(n * LIMBS), Vec::with_capacity(n * LIMBS));
        for _ in 0..n {
            a.extend(number(&mut rng));
            b.extend(number(&mut rng));
        }
        Problem { n, a, b }
    }

    /// Operand `t` of `v`.
    fn operand(v: &[u32], t: usize) -> &[u32; LIMBS] {
        v[t * LIMBS..(t + 1) * LIMBS]
            .try_into()
            .expect("LIMBS limbs")
    }
}

impl Kernel for Mulword {
    fn name(&self) -> &'static str {
        "mulword"
    }
    fn description(&self) -> &'static str {
        "256-bit bignum multiply/add/subtract per thread with inline-PTX carry chains"
    }
    fn sources(&self) -> &'static [(Target, &'static str)] {
        ptx!("mulword")
    }
    fn traits(&self) -> &'static [&'static str] {
        &[
            "carry chains",
            "inline PTX",
            "integer",
            "compute-bound",
            "64-bit integer",
            "three launches",
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
        let n = p.n;
        let a = upload(dev, &p.a)?;
        let b = upload(dev, &p.b)?;
        let prod32 = alloc_zeroed::<u32>(dev, n * 2 * LIMBS)?;
        let prod64 = alloc_zeroed::<u64>(dev, n * LIMBS)?;
        let sum = alloc_zeroed::<u32>(dev, n * LIMBS)?;
        let diff = alloc_zeroed::<u32>(dev, n * LIMBS)?;
        let flags = alloc_zeroed::<u32>(dev, n * 2)?;
        let (grid, block) = (Dim3::x(blocks_for(n, BLOCK as usize)), Dim3::x(BLOCK));
        let count = Arg::I32(n as i32);
        let mul_args = |out| [Arg::Ptr(a), Arg::Ptr(b), Arg::Ptr(out), count];
        launch(dev, "mul_u32x8", grid, block, &mul_args(prod32))?;
        launch(dev, "mul_u64x4", grid, block, &mul_args(prod64))?;
        let args = [
            Arg::Ptr(a),
            Arg::Ptr(b),
            Arg::Ptr(sum),
            Arg::Ptr(diff),
            Arg::Ptr(flags),
            count,
        ];
        launch(dev, "addsub_u32x8", grid, block, &args)?;
        let got32: Vec<u32> = download(dev, prod32, n * 2 * LIMBS)?;
        let got64: Vec<u64> = download(dev, prod64, n * LIMBS)?;
        let got_sum: Vec<u32> = download(dev, sum, n * LIMBS)?;
        let got_diff: Vec<u32> = download(dev, diff, n * LIMBS)?;
        let got_flags: Vec<u32> = download(dev, flags, n * 2)?;

        let mut check = Checker::new();
        for t in 0..n {
            let (x, y) = (Problem::operand(&p.a, t), Problem::operand(&p.b, t));
            let p32 = mul_u32(x, y);
            let p64 = mul_u64(&to_u64(x), &to_u64(y));
            let (s, carry, d, borrow) = add_sub(x, y);
            for k in 0..2 * LIMBS {
                check.exact(
                    "prod32",
                    t * 2 * LIMBS + k,
                    got32[t * 2 * LIMBS + k],
                    p32[k],
                );
            }
            for k in 0..LIMBS {
                check.exact("prod64", t * LIMBS + k, got64[t * LIMBS + k], p64[k]);
                check.exact("sum", t * LIMBS + k, got_sum[t * LIMBS + k], s[k]);
                check.exact("diff", t * LIMBS + k, got_diff[t * LIMBS + k], d[k]);
            }
            check.exact("carry", t, got_flags[2 * t], carry);
            check.exact("borrow", t, got_flags[2 * t + 1], borrow);
        }
        Ok(check.finish())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The 32-bit limbs of the 512-bit `mul_u64` result.
    fn split(r: &[u64; 8]) -> [u32; 16] {
        std::array::from_fn(|k| (r[k / 2] >> (32 * (k % 2))) as u32)
    }

    #[test]
    fn all_ones_squared() {
        // (2^256 - 1)^2 = 2^512 - 2^257 + 1: limb 0 is 1, limbs 1-7 zero, limb 8 has bits
        // 257-287 set (0xffff_fffe), limbs 9-15 all ones.
        let m = [u32::MAX; LIMBS];
        let mut want = [u32::MAX; 16];
        want[0] = 1;
        want[1..8].fill(0);
        want[8] = 0xffff_fffe;
        assert_eq!(mul_u32(&m, &m), want);
        assert_eq!(split(&mul_u64(&to_u64(&m), &to_u64(&m))), want);
    }

    #[test]
    fn small_products_match_u128() {
        // Operands below 2^64 have products that u128 holds.
        let mut rng = Rng::new(11);
        for _ in 0..1000 {
            let (x, y) = (rng.next_u64(), rng.next_u64());
            let mut a = [0u32; LIMBS];
            let mut b = [0u32; LIMBS];
            a[..2].copy_from_slice(&[x as u32, (x >> 32) as u32]);
            b[..2].copy_from_slice(&[y as u32, (y >> 32) as u32]);
            let p = x as u128 * y as u128;
            let r = mul_u32(&a, &b);
            assert_eq!(r[..4], [0, 1, 2, 3].map(|k| (p >> (32 * k)) as u32));
            assert!(r[4..].iter().all(|&l| l == 0));
        }
    }

    #[test]
    fn references_agree_on_generated_operands() {
        let p = Problem::generate(Size::Small, 3);
        for t in 0..p.n {
            let (x, y) = (Problem::operand(&p.a, t), Problem::operand(&p.b, t));
            assert_eq!(mul_u32(x, y), split(&mul_u64(&to_u64(x), &to_u64(y))));
            // (a - b) + b = a and (a + b) - b = a, with the carry and borrow cancelling.
            let (s, carry, d, borrow) = add_sub(x, y);
            let (back, c2, _, _) = add_sub(&d, y);
            assert_eq!((&back, c2), (x, borrow & 1));
            let (_, _, back, b2) = add_sub(&s, y);
            assert_eq!((&back, b2 & 1), (x, carry));
        }
    }

    #[test]
    fn add_sub_edges() {
        let mut one = [0u32; LIMBS];
        one[0] = 1;
        let max = [u32::MAX; LIMBS];
        let zero = [0u32; LIMBS];
        assert_eq!(
            add_sub(&max, &one),
            (
                zero,
                1,
                [
                    u32::MAX - 1,
                    u32::MAX,
                    u32::MAX,
                    u32::MAX,
                    u32::MAX,
                    u32::MAX,
                    u32::MAX,
                    u32::MAX
                ],
                0
            )
        );
        assert_eq!(add_sub(&zero, &one), (one, 0, max, u32::MAX));
    }
}
