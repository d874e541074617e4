//! Helpers shared by the kernel modules: a deterministic PRNG, byte <-> typed-vector
//! conversion, device upload/download, float tolerances and a mismatch collector.
//!
//! Nothing here depends on a particular engine; everything goes through [`Device`].

use std::fmt::{Debug, Write as _};

use crate::{Arg, DevPtr, Device, DeviceError, Dim3, Launch, Verification};

/// splitmix64 (Steele, Lea & Flood 2014): tiny, fast, and every seed (0 included) gives a
/// well-mixed stream. Inputs must be identical on every platform and forever, so the suite
/// carries its own generator instead of depending on `rand`'s unstable value streams.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// A generator for one kernel: the kernel name is folded into the seed so that kernels run
    /// with the same seed still get unrelated inputs.
    pub fn for_kernel(name: &str, seed: u64) -> Self {
        // FNV-1a of the name.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in name.bytes() {
            h ^= b as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        Rng::new(seed ^ h)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    /// Uniform in `0..n` (Lemire's multiply-shift; the bias is below 2^-32 · n, irrelevant
    /// for test data). `n` must be non-zero.
    pub fn below(&mut self, n: u32) -> u32 {
        debug_assert!(n > 0);
        ((self.next_u32() as u64 * n as u64) >> 32) as u32
    }

    /// Uniform in `[0, 1)` with 24 random bits: every value is exactly representable in f32.
    pub fn f32(&mut self) -> f32 {
        (self.next_u32() >> 8) as f32 * (1.0 / (1u32 << 24) as f32)
    }

    /// Uniform in `[lo, hi)` (up to rounding).
    pub fn range_f32(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * self.f32()
    }

    /// `len` values uniform in `[lo, hi)`, rounded to f16 bit patterns.
    pub fn f16s(&mut self, len: usize, lo: f32, hi: f32) -> Vec<u16> {
        (0..len)
            .map(|_| f16_from_f32(self.range_f32(lo, hi)))
            .collect()
    }

    /// Uniform in `[0, 1)` with 53 random bits.
    pub fn f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// A plain element type that travels to and from the device as little-endian bytes.
pub trait Elem: Copy + Debug + PartialEq {
    const SIZE: usize;
    fn put(self, out: &mut Vec<u8>);
    fn get(bytes: &[u8]) -> Self;
}

macro_rules! impl_elem {
    ($($t:ty),*) => {$(
        impl Elem for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            fn put(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
            fn get(bytes: &[u8]) -> Self {
                <$t>::from_le_bytes(bytes.try_into().expect("element-sized chunk"))
            }
        }
    )*};
}

impl_elem!(u8, u16, u32, i32, u64, i64, f32, f64);

pub fn to_bytes<T: Elem>(data: &[T]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() * T::SIZE);
    for &x in data {
        x.put(&mut out);
    }
    out
}

/// Converts bytes to elements; a trailing partial element is dropped.
pub fn from_bytes<T: Elem>(bytes: &[u8]) -> Vec<T> {
    bytes.chunks_exact(T::SIZE).map(T::get).collect()
}

/// Allocates a buffer holding `data` (at least one element's worth, so that an empty input
/// still yields a valid pointer).
pub fn upload<T: Elem>(dev: &mut dyn Device, data: &[T]) -> Result<DevPtr, DeviceError> {
    let bytes = to_bytes(data);
    let ptr = dev.alloc(bytes.len().max(T::SIZE) as u64)?;
    if !bytes.is_empty() {
        dev.write(ptr, &bytes)?;
    }
    Ok(ptr)
}

/// Allocates `count` zeroed elements ([`Device::alloc_zeroed`]: the zeros are written
/// explicitly unless the engine's memory is managed).
pub fn alloc_zeroed<T: Elem>(dev: &mut dyn Device, count: usize) -> Result<DevPtr, DeviceError> {
    dev.alloc_zeroed((count.max(1) * T::SIZE) as u64)
}

/// Reads `count` elements back; a short read is a device error.
pub fn download<T: Elem>(
    dev: &mut dyn Device,
    src: DevPtr,
    count: usize,
) -> Result<Vec<T>, DeviceError> {
    let want = (count * T::SIZE) as u64;
    let bytes = dev.read(src, want)?;
    if bytes.len() as u64 != want {
        return Err(DeviceError(format!(
            "read of {want} bytes at {:#x} returned {} bytes",
            src.0,
            bytes.len()
        )));
    }
    Ok(from_bytes(&bytes))
}

/// Launches `entry` with no dynamic shared memory.
pub fn launch(
    dev: &mut dyn Device,
    entry: &str,
    grid: Dim3,
    block: Dim3,
    args: &[Arg],
) -> Result<(), DeviceError> {
    launch_smem(dev, entry, grid, block, 0, args)
}

pub fn launch_smem(
    dev: &mut dyn Device,
    entry: &str,
    grid: Dim3,
    block: Dim3,
    dynamic_smem: u32,
    args: &[Arg],
) -> Result<(), DeviceError> {
    dev.launch(&Launch {
        entry,
        grid,
        block,
        dynamic_smem,
        args,
    })
}

/// Number of blocks of `per_block` items needed to cover `n` items.
pub fn blocks_for(n: usize, per_block: usize) -> u32 {
    u32::try_from(n.div_ceil(per_block)).expect("grid fits in u32")
}

/// Error bound for an f32 sum of `terms` values (products included) whose absolute values sum
/// to `abs_sum`, evaluated in *any* order, with or without fused multiply-adds, compared with
/// an exact (f64) reference. The classical bound is γ_n·Σ|x| with γ_n ≈ n·u and u = 2^-24 the
/// unit roundoff; we use (n + 2)·ε (ε = 2u = f32::EPSILON), twice the bound, to cover the
/// final scaling and the reference's own rounding.
pub fn f32_sum_tol(terms: usize, abs_sum: f64) -> f64 {
    (terms as f64 + 2.0) * f32::EPSILON as f64 * abs_sum
}

/// The same bound for f64 sums.
pub fn f64_sum_tol(terms: usize, abs_sum: f64) -> f64 {
    (terms as f64 + 2.0) * f64::EPSILON * abs_sum
}

/// The IEEE binary16 value nearest to `x` (round to nearest, ties to even), as its bit
/// pattern: what `__float2half_rn` / `cvt.rn.f16.f32` produce. Overflow gives infinity, NaN a
/// quiet NaN, and magnitudes below the normal range round to subnormals or zero. The tensor-core
/// kernels keep their f16 inputs as these bit patterns, so the references start from exactly
/// the values the device sees.
pub fn f16_from_f32(x: f32) -> u16 {
    let bits = x.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let exp = ((bits >> 23) & 0xff) as i32;
    let man = bits & 0x7f_ffff;
    if exp == 0xff {
        return sign | if man == 0 { 0x7c00 } else { 0x7e00 };
    }
    let e = exp - 127;
    // f32 subnormals (and zero) are far below half the smallest f16 subnormal (2^-25).
    if exp == 0 || e < -25 {
        return sign;
    }
    if e > 15 {
        return sign | 0x7c00;
    }
    // |x| = sig * 2^(e - 23). The f16 quantum is 2^(e - 10) for normals and 2^-24 for
    // subnormals, so that many low bits of sig go; 13 <= shift <= 24.
    let sig = man | 0x80_0000;
    let shift = if e >= -14 { 13 } else { (-1 - e) as u32 };
    let q = sig >> shift;
    let rem = sig & ((1 << shift) - 1);
    let half = 1 << (shift - 1);
    let rounded = q + u32::from(rem > half || (rem == half && q & 1 == 1));
    // For normals `rounded` still carries the implicit bit (0x400); adding it onto the
    // exponent field one below the true one encodes it, and a carry to 0x800 moves to the
    // next binade (or to infinity) by itself. Subnormals are just the quantum count, and
    // rounding up to 0x400 yields the smallest normal's encoding.
    let field = if e >= -14 {
        (((e + 14) as u32) << 10) + rounded
    } else {
        rounded
    };
    sign | field as u16
}

/// The f32 value of an IEEE binary16 bit pattern (exact: every f16 is an f32).
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = u32::from(h & 0x8000) << 16;
    let exp = u32::from((h >> 10) & 0x1f);
    let man = u32::from(h & 0x3ff);
    match exp {
        // man * 2^-24: a product of small integers and a power of two, exact in f32.
        0 => {
            let v = man as f32 / 16_777_216.0;
            if sign == 0 {
                v
            } else {
                -v
            }
        }
        0x1f => f32::from_bits(sign | 0x7f80_0000 | man << 13),
        _ => f32::from_bits(sign | (exp + 112) << 23 | man << 13),
    }
}

/// `true` when `got` is within `tol` of `want`; NaN never is.
pub fn close(got: f64, want: f64, tol: f64) -> bool {
    (got - want).abs() <= tol
}

/// Collects the comparison of device outputs with the reference and renders the first
/// mismatches for a person.
#[derive(Debug, Default)]
pub struct Checker {
    checked: u64,
    mismatches: u64,
    first: String,
}

/// How many mismatches are described in [`Verification::Failed`].
const SHOWN: u64 = 8;

impl Checker {
    pub fn new() -> Self {
        Self::default()
    }

    fn note(&mut self, ok: bool, describe: impl FnOnce() -> String) {
        self.checked += 1;
        if !ok {
            if self.mismatches < SHOWN {
                if !self.first.is_empty() {
                    self.first.push_str("; ");
                }
                self.first.push_str(&describe());
            }
            self.mismatches += 1;
        }
    }

    /// Bit-exact comparison (integers, or floats that must be exact by construction).
    pub fn exact<T: PartialEq + Debug>(&mut self, what: &str, index: usize, got: T, want: T) {
        let ok = got == want;
        self.note(ok, || {
            format!("{what}[{index}]: got {got:?}, want {want:?}")
        });
    }

    /// Compares whole slices exactly; a length difference is one mismatch.
    pub fn exact_slice<T: PartialEq + Debug + Copy>(&mut self, what: &str, got: &[T], want: &[T]) {
        if got.len() != want.len() {
            let (g, w) = (got.len(), want.len());
            self.note(false, || format!("{what}: {g} elements, want {w}"));
            return;
        }
        for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
            self.exact(what, i, g, w);
        }
    }

    /// Tolerance comparison; the caller documents why `tol` is what it is.
    pub fn near(&mut self, what: &str, index: usize, got: f64, want: f64, tol: f64) {
        let ok = close(got, want, tol);
        self.note(ok, || {
            let mut s = String::new();
            let _ = write!(
                s,
                "{what}[{index}]: got {got:e}, want {want:e} (tolerance {tol:e})"
            );
            s
        });
    }

    pub fn finish(self) -> Verification {
        if self.mismatches == 0 {
            Verification::Passed {
                checked: self.checked,
            }
        } else {
            let mut first = self.first;
            if self.mismatches > SHOWN {
                let _ = write!(
                    first,
                    "; ... of {} mismatches in {} checked",
                    self.mismatches, self.checked
                );
            }
            Verification::Failed {
                mismatches: self.mismatches,
                first,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rng_is_deterministic_and_seed_dependent() {
        let a: Vec<u64> = (0..16)
            .scan(Rng::new(7), |r, _| Some(r.next_u64()))
            .collect();
        let b: Vec<u64> = (0..16)
            .scan(Rng::new(7), |r, _| Some(r.next_u64()))
            .collect();
        let c: Vec<u64> = (0..16)
            .scan(Rng::new(8), |r, _| Some(r.next_u64()))
            .collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
        // Pin the stream: splitmix64 from seed 0 starts with this value (reference output).
        assert_eq!(Rng::new(0).next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_ne!(Rng::for_kernel("gemm", 1), Rng::for_kernel("bfs", 1));
    }

    #[test]
    fn rng_ranges() {
        let mut r = Rng::new(3);
        for _ in 0..10_000 {
            let x = r.f32();
            assert!((0.0..1.0).contains(&x));
            let y = r.f64();
            assert!((0.0..1.0).contains(&y));
            assert!(r.below(10) < 10);
            let z = r.range_f32(-2.0, 3.0);
            assert!((-2.0..3.0).contains(&z));
        }
    }

    #[test]
    fn bytes_round_trip() {
        let v = [1.5f32, -0.0, f32::MAX, 3.25];
        assert_eq!(from_bytes::<f32>(&to_bytes(&v)), v);
        let w = [u32::MAX, 0, 17];
        assert_eq!(from_bytes::<u32>(&to_bytes(&w)), w);
        let d = [1e300f64, -2.5];
        assert_eq!(from_bytes::<f64>(&to_bytes(&d)), d);
        assert_eq!(to_bytes(&[0x0403_0201u32]), vec![1, 2, 3, 4]);
    }

    #[test]
    fn f16_conversion_matches_hand_computed_patterns() {
        let p = |e: i32| 2f32.powi(e);
        for (x, h) in [
            (0.0f32, 0x0000u16),
            (-0.0, 0x8000),
            (1.0, 0x3c00),
            (-2.0, 0xc000),
            (0.1, 0x2e66),       // 1.6 * 2^-4: mantissa 614.4 -> 614
            (1.0 / 3.0, 0x3555), // 1.333 * 2^-2: mantissa 341.3 -> 341
            (65504.0, 0x7bff),   // largest finite
            (65519.0, 0x7bff),   // just below the midpoint to "65536"
            (65520.0, 0x7c00),   // the midpoint: ties to even (0x7c00) is infinity
            (-1e6, 0xfc00),
            (f32::INFINITY, 0x7c00),
            (p(-14), 0x0400),          // smallest normal
            (p(-14) - p(-25), 0x0400), // tie between 0x03ff and 0x0400: even
            (1023.0 * p(-24), 0x03ff), // largest subnormal
            (p(-24), 0x0001),          // smallest subnormal
            (1.5 * p(-24), 0x0002),    // tie between 1 and 2 quanta: even
            (3.0 * p(-26), 0x0001),    // 0.75 quantum rounds up
            (p(-25), 0x0000),          // half a quantum: tie, even is zero
            (p(-25) + p(-40), 0x0001), // just above it
            (-p(-24), 0x8001),
            (1e-40, 0x0000),                 // an f32 subnormal
            (1.0 + p(-11), 0x3c00),          // tie: even mantissa 0
            (1.0 + 3.0 * p(-11), 0x3c02),    // tie between 0x3c01 and 0x3c02
            (1.0 + p(-11) + p(-20), 0x3c01), // just above the tie
            (2049.0, 0x6800),                // quantum 2 above 2048: tie to 2048
            (2051.0, 0x6802),                // tie to 2052
        ] {
            assert_eq!(f16_from_f32(x), h, "{x:e}");
        }
        assert_eq!(f16_from_f32(f32::NAN), 0x7e00);
        for (h, x) in [
            (0x0001u16, p(-24)),
            (0x03ff, 1023.0 * p(-24)),
            (0x0400, p(-14)),
            (0x3555, 0.333_251_95),
            (0x7bff, 65504.0),
            (0xc000, -2.0),
            (0x8001, -p(-24)),
            (0xfc00, f32::NEG_INFINITY),
        ] {
            assert_eq!(f16_to_f32(h), x, "{h:#06x}");
        }
        assert!(f16_to_f32(0x7e00).is_nan());
        assert_eq!(f16_to_f32(0x8000).to_bits(), (-0.0f32).to_bits());
    }

    /// Every finite f16 survives the round trip, and every midpoint between neighbours rounds
    /// to the even one (its f32 neighbours to the nearer one).
    #[test]
    fn f16_conversion_is_exhaustively_round_to_nearest_even() {
        for h in 0..0x7c00u16 {
            for sign in [0, 0x8000] {
                assert_eq!(f16_from_f32(f16_to_f32(h | sign)), h | sign, "{h:#06x}");
            }
            let (lo, hi) = (f16_to_f32(h), f16_to_f32(h + 1));
            let mid = if h == 0x7bff {
                65520.0
            } else {
                (lo + hi) / 2.0
            };
            let even = if h & 1 == 0 { h } else { h + 1 };
            assert_eq!(f16_from_f32(mid), even, "midpoint above {h:#06x}");
            assert_eq!(f16_from_f32(mid.next_down()), h, "below midpoint {h:#06x}");
            assert_eq!(
                f16_from_f32(mid.next_up()),
                h + 1,
                "above midpoint {h:#06x}"
            );
        }
    }

    #[test]
    fn checker_reports_first_mismatches() {
        let mut c = Checker::new();
        c.exact_slice("x", &[1, 2, 3], &[1, 2, 3]);
        assert_eq!(c.finish(), Verification::Passed { checked: 3 });

        let mut c = Checker::new();
        for i in 0..20 {
            c.exact("y", i, i, 0);
        }
        c.near("z", 0, 1.0, 1.0 + 1e-9, 1e-6);
        c.near("z", 1, f64::NAN, 1.0, 1.0);
        match c.finish() {
            Verification::Failed { mismatches, first } => {
                assert_eq!(mismatches, 20);
                assert!(first.starts_with("y[1]: got 1, want 0"), "{first}");
                assert!(first.contains("of 20 mismatches in 22 checked"), "{first}");
            }
            v => panic!("{v:?}"),
        }
    }
}
