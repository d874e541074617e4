//! A small software implementation of IEEE 754 binary floating point, parameterised by format
//! (binary16, bfloat16, binary32, binary64), used wherever the host's round-to-nearest
//! arithmetic cannot give the PTX result directly: the directed rounding modes `.rz .rm .rp`
//! of `add sub mul fma div sqrt rcp` (PTX ISA, "Floating-Point Instructions"), half-precision
//! arithmetic, and every `cvt` that rounds (PTX ISA, "cvt", "Rounding modifiers").
//!
//! Every operation computes the exact result as `sig * 2^exp` with `sig` a `u128`, or, when
//! the exact result has more bits than fit, a truncation of it whose least significant bit is
//! ORed with a *sticky* bit ("jamming"). The sticky bit always lies at least two bits below the
//! rounding position of any target format, so [`round_pack`] sees exactly the information IEEE
//! rounding needs (is the discarded part zero, below, at or above one half ulp).

use kir::inst::Rounding;

/// A binary interchange format: `frac` explicit fraction bits and `exp` exponent bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Fmt {
    pub frac: u32,
    pub exp: u32,
}

pub(crate) const F16: Fmt = Fmt { frac: 10, exp: 5 };
pub(crate) const BF16: Fmt = Fmt { frac: 7, exp: 8 };
pub(crate) const F32: Fmt = Fmt { frac: 23, exp: 8 };
pub(crate) const F64: Fmt = Fmt { frac: 52, exp: 11 };

impl Fmt {
    #[inline]
    pub fn width(self) -> u32 {
        1 + self.exp + self.frac
    }
    #[inline]
    pub fn mask(self) -> u64 {
        u64::MAX >> (64 - self.width())
    }
    #[inline]
    pub fn bias(self) -> i32 {
        (1 << (self.exp - 1)) - 1
    }
    #[inline]
    pub fn sign(self) -> u64 {
        1 << (self.width() - 1)
    }
    /// The all-ones biased exponent (infinities and NaNs).
    #[inline]
    fn exp_all(self) -> u64 {
        (1 << self.exp) - 1
    }
    #[inline]
    fn frac_mask(self) -> u64 {
        (1 << self.frac) - 1
    }
    #[inline]
    fn sign_of(self, neg: bool) -> u64 {
        if neg {
            self.sign()
        } else {
            0
        }
    }
    #[inline]
    pub fn zero(self, neg: bool) -> u64 {
        self.sign_of(neg)
    }
    #[inline]
    pub fn inf(self, neg: bool) -> u64 {
        self.sign_of(neg) | self.exp_all() << self.frac
    }
    #[inline]
    pub fn max_finite(self, neg: bool) -> u64 {
        self.sign_of(neg) | (self.exp_all() - 1) << self.frac | self.frac_mask()
    }
    /// 1.0
    #[inline]
    pub fn one(self) -> u64 {
        (self.bias() as u64) << self.frac
    }
    /// The canonical NaN NVIDIA hardware produces: sign clear, all other bits set
    /// (f32 `0x7FFFFFFF`, f64 `0x7FFFFFFFFFFFFFFF`, f16/bf16 `0x7FFF`).
    #[inline]
    pub fn nan(self) -> u64 {
        self.mask() >> 1
    }
    #[inline]
    pub fn is_nan(self, bits: u64) -> bool {
        bits & (self.mask() >> 1) > self.inf(false)
    }
    #[inline]
    pub fn is_inf(self, bits: u64) -> bool {
        bits & (self.mask() >> 1) == self.inf(false)
    }
    #[inline]
    pub fn is_neg(self, bits: u64) -> bool {
        bits & self.sign() != 0
    }
    #[inline]
    fn exp_field(self, bits: u64) -> u64 {
        (bits >> self.frac) & self.exp_all()
    }
    #[inline]
    pub fn is_subnormal(self, bits: u64) -> bool {
        self.exp_field(bits) == 0 && bits & self.frac_mask() != 0
    }
    #[inline]
    pub fn is_normal(self, bits: u64) -> bool {
        let e = self.exp_field(bits);
        e != 0 && e != self.exp_all()
    }
    /// `.ftz`: a subnormal becomes a zero of the same sign; anything else is unchanged.
    #[inline]
    pub fn ftz(self, bits: u64) -> u64 {
        if self.is_subnormal(bits) {
            bits & self.sign()
        } else {
            bits
        }
    }
}

/// A decoded value. Finite nonzero values are `sig * 2^exp` with `sig != 0`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Val {
    Nan,
    Inf(bool),
    Zero(bool),
    Fin { neg: bool, sig: u64, exp: i32 },
}

#[inline]
pub(crate) fn unpack(fmt: Fmt, bits: u64) -> Val {
    let bits = bits & fmt.mask();
    let neg = fmt.is_neg(bits);
    let e = fmt.exp_field(bits);
    let f = bits & fmt.frac_mask();
    let min_exp = 1 - fmt.bias() - fmt.frac as i32;
    if e == fmt.exp_all() {
        if f == 0 {
            Val::Inf(neg)
        } else {
            Val::Nan
        }
    } else if e == 0 {
        if f == 0 {
            Val::Zero(neg)
        } else {
            Val::Fin {
                neg,
                sig: f,
                exp: min_exp,
            }
        }
    } else {
        Val::Fin {
            neg,
            sig: f | 1 << fmt.frac,
            exp: e as i32 - 1 + min_exp,
        }
    }
}

/// An extended-precision intermediate: `sig * 2^exp` (`sig` may carry a sticky bit in bit 0).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ext {
    pub neg: bool,
    pub sig: u128,
    pub exp: i32,
}

/// Rounds `(-1)^neg * sig * 2^exp` to `fmt` in mode `rnd` (IEEE 754 §4.3), producing
/// subnormals, and on overflow infinity or the largest finite value as the mode dictates.
/// `sig == 0` gives a zero of sign `neg`.
pub(crate) fn round_pack(fmt: Fmt, neg: bool, sig: u128, exp: i32, rnd: Rounding) -> u64 {
    if sig == 0 {
        return fmt.zero(neg);
    }
    let p = fmt.frac as i32 + 1;
    let emin = 1 - fmt.bias();
    let emax = fmt.bias();
    let top = exp + (127 - sig.leading_zeros() as i32);
    // Exponent of the target's least significant bit: fixed in the subnormal range.
    let mut lsb = top.max(emin) - (p - 1);
    let shift = lsb - exp;
    let mut m: u128;
    if shift <= 0 {
        // Exact: the value has at most p significant bits at this exponent.
        m = sig << (-shift) as u32;
    } else {
        let (q, cmp_half, inexact) = if shift > 128 {
            (0, std::cmp::Ordering::Less, true)
        } else if shift == 128 {
            (0, sig.cmp(&(1u128 << 127)), true)
        } else {
            let rem = sig & ((1u128 << shift) - 1);
            (sig >> shift, rem.cmp(&(1u128 << (shift - 1))), rem != 0)
        };
        let up = match rnd {
            Rounding::Nearest => {
                cmp_half == std::cmp::Ordering::Greater
                    || (cmp_half == std::cmp::Ordering::Equal && q & 1 == 1)
            }
            Rounding::Zero => false,
            Rounding::Down => neg && inexact,
            Rounding::Up => !neg && inexact,
        };
        m = q + up as u128;
        if m == 1u128 << p {
            m >>= 1;
            lsb += 1;
        }
    }
    let hidden = 1u128 << (p - 1);
    if m >= hidden {
        // Normal: the leading bit is at exponent lsb + p - 1.
        let e = lsb + p - 1;
        if e > emax {
            return overflow(fmt, neg, rnd);
        }
        let biased = (e + fmt.bias()) as u64;
        fmt.sign_of(neg) | biased << fmt.frac | (m - hidden) as u64
    } else {
        fmt.sign_of(neg) | m as u64
    }
}

/// The result of an overflow in each rounding mode (IEEE 754 §7.4).
#[inline]
fn overflow(fmt: Fmt, neg: bool, rnd: Rounding) -> u64 {
    let to_inf = match rnd {
        Rounding::Nearest => true,
        Rounding::Zero => false,
        Rounding::Down => neg,
        Rounding::Up => !neg,
    };
    if to_inf {
        fmt.inf(neg)
    } else {
        fmt.max_finite(neg)
    }
}

/// Packs an exact-or-jammed intermediate; an exact zero sum is +0, or -0 when rounding down
/// (IEEE 754 §6.3).
#[inline]
fn pack_ext(fmt: Fmt, e: Ext, rnd: Rounding) -> u64 {
    if e.sig == 0 {
        fmt.zero(rnd == Rounding::Down)
    } else {
        round_pack(fmt, e.neg, e.sig, e.exp, rnd)
    }
}

/// Shifts right, ORing everything shifted out into bit 0.
#[inline]
fn shr_jam(x: u128, s: u32) -> u128 {
    if s == 0 {
        x
    } else if s >= 128 {
        (x != 0) as u128
    } else {
        (x >> s) | ((x & ((1u128 << s) - 1)) != 0) as u128
    }
}

/// Normalises a nonzero intermediate so its leading bit is bit 125 (two bits of headroom
/// for the carry of an addition). Inputs never have more than 106 significant bits.
#[inline]
fn norm125(e: Ext) -> Ext {
    let lead = 127 - e.sig.leading_zeros() as i32;
    let s = 125 - lead;
    if s >= 0 {
        Ext {
            sig: e.sig << s,
            exp: e.exp - s,
            ..e
        }
    } else {
        Ext {
            sig: shr_jam(e.sig, (-s) as u32),
            exp: e.exp - s,
            ..e
        }
    }
}

/// The sum of two nonzero intermediates. When the exponents are far apart the smaller one
/// only contributes a sticky bit, which lies more than 100 bits below the leading bit of the
/// (at most one bit cancelled) result, so rounding to any format of ≤ 53 bits is exact.
pub(crate) fn add_ext(a: Ext, b: Ext) -> Ext {
    let (a, b) = (norm125(a), norm125(b));
    let (hi, lo) = if a.exp >= b.exp { (a, b) } else { (b, a) };
    let d = (hi.exp - lo.exp) as u32;
    let lo_sig = shr_jam(lo.sig, d);
    if hi.neg == lo.neg {
        Ext {
            neg: hi.neg,
            sig: hi.sig + lo_sig,
            exp: hi.exp,
        }
    } else if hi.sig >= lo_sig {
        Ext {
            neg: hi.neg,
            sig: hi.sig - lo_sig,
            exp: hi.exp,
        }
    } else {
        Ext {
            neg: lo.neg,
            sig: lo_sig - hi.sig,
            exp: hi.exp,
        }
    }
}

#[inline]
fn fin_ext(neg: bool, sig: u64, exp: i32) -> Ext {
    Ext {
        neg,
        sig: sig as u128,
        exp,
    }
}

/// IEEE addition `a + b` in `fmt` with rounding `rnd`; any NaN result is canonical.
pub(crate) fn add(fmt: Fmt, a: u64, b: u64, rnd: Rounding) -> u64 {
    match (unpack(fmt, a), unpack(fmt, b)) {
        (Val::Nan, _) | (_, Val::Nan) => fmt.nan(),
        (Val::Inf(x), Val::Inf(y)) => {
            if x == y {
                fmt.inf(x)
            } else {
                fmt.nan()
            }
        }
        (Val::Inf(x), _) | (_, Val::Inf(x)) => fmt.inf(x),
        (Val::Zero(x), Val::Zero(y)) => {
            if x == y {
                fmt.zero(x)
            } else {
                fmt.zero(rnd == Rounding::Down)
            }
        }
        (Val::Zero(_), _) => b & fmt.mask(),
        (_, Val::Zero(_)) => a & fmt.mask(),
        (
            Val::Fin {
                neg: an,
                sig: asig,
                exp: ae,
            },
            Val::Fin {
                neg: bn,
                sig: bsig,
                exp: be,
            },
        ) => pack_ext(
            fmt,
            add_ext(fin_ext(an, asig, ae), fin_ext(bn, bsig, be)),
            rnd,
        ),
    }
}

/// IEEE multiplication; the product of two significands (≤ 106 bits) is exact in a `u128`.
pub(crate) fn mul(fmt: Fmt, a: u64, b: u64, rnd: Rounding) -> u64 {
    match (unpack(fmt, a), unpack(fmt, b)) {
        (Val::Nan, _) | (_, Val::Nan) => fmt.nan(),
        (Val::Inf(_), Val::Zero(_)) | (Val::Zero(_), Val::Inf(_)) => fmt.nan(),
        (Val::Inf(x), Val::Inf(y))
        | (Val::Inf(x), Val::Fin { neg: y, .. })
        | (Val::Fin { neg: x, .. }, Val::Inf(y)) => fmt.inf(x != y),
        (Val::Zero(x), Val::Zero(y))
        | (Val::Zero(x), Val::Fin { neg: y, .. })
        | (Val::Fin { neg: x, .. }, Val::Zero(y)) => fmt.zero(x != y),
        (
            Val::Fin {
                neg: an,
                sig: asig,
                exp: ae,
            },
            Val::Fin {
                neg: bn,
                sig: bsig,
                exp: be,
            },
        ) => round_pack(fmt, an != bn, asig as u128 * bsig as u128, ae + be, rnd),
    }
}

/// IEEE fused multiply-add `a * b + c` with a single rounding.
pub(crate) fn fma(fmt: Fmt, a: u64, b: u64, c: u64, rnd: Rounding) -> u64 {
    let (va, vb, vc) = (unpack(fmt, a), unpack(fmt, b), unpack(fmt, c));
    if matches!(va, Val::Nan) || matches!(vb, Val::Nan) || matches!(vc, Val::Nan) {
        return fmt.nan();
    }
    let sign = |v: Val| match v {
        Val::Inf(n) | Val::Zero(n) | Val::Fin { neg: n, .. } => n,
        Val::Nan => false,
    };
    let psign = sign(va) != sign(vb);
    let p_inf = matches!(va, Val::Inf(_)) || matches!(vb, Val::Inf(_));
    let p_zero = matches!(va, Val::Zero(_)) || matches!(vb, Val::Zero(_));
    if p_inf && p_zero {
        return fmt.nan();
    }
    if p_inf {
        return match vc {
            Val::Inf(cn) if cn != psign => fmt.nan(),
            _ => fmt.inf(psign),
        };
    }
    if let Val::Inf(cn) = vc {
        return fmt.inf(cn);
    }
    if p_zero {
        return match vc {
            Val::Zero(cn) => {
                if cn == psign {
                    fmt.zero(cn)
                } else {
                    fmt.zero(rnd == Rounding::Down)
                }
            }
            _ => c & fmt.mask(),
        };
    }
    let (
        Val::Fin {
            sig: asig, exp: ae, ..
        },
        Val::Fin {
            sig: bsig, exp: be, ..
        },
    ) = (va, vb)
    else {
        return fmt.nan(); // unreachable: both factors are finite nonzero here
    };
    let prod = Ext {
        neg: psign,
        sig: asig as u128 * bsig as u128,
        exp: ae + be,
    };
    match vc {
        Val::Fin { neg, sig, exp } => pack_ext(fmt, add_ext(prod, fin_ext(neg, sig, exp)), rnd),
        _ => round_pack(fmt, prod.neg, prod.sig, prod.exp, rnd),
    }
}

/// Normalises a nonzero significand so that its leading bit is bit `lead`.
#[inline]
fn norm_to(sig: u64, exp: i32, lead: i32) -> (u128, i32) {
    let cur = 63 - sig.leading_zeros() as i32;
    let s = lead - cur;
    ((sig as u128) << s, exp - s)
}

/// IEEE division: a 127-bit dividend over a 53-bit divisor gives a quotient of at least
/// 74 bits, and a nonzero remainder becomes the sticky bit.
pub(crate) fn div(fmt: Fmt, a: u64, b: u64, rnd: Rounding) -> u64 {
    match (unpack(fmt, a), unpack(fmt, b)) {
        (Val::Nan, _) | (_, Val::Nan) => fmt.nan(),
        (Val::Inf(_), Val::Inf(_)) | (Val::Zero(_), Val::Zero(_)) => fmt.nan(),
        (Val::Inf(x), Val::Zero(y))
        | (Val::Inf(x), Val::Fin { neg: y, .. })
        | (Val::Fin { neg: x, .. }, Val::Zero(y)) => fmt.inf(x != y),
        (Val::Zero(x), Val::Inf(y))
        | (Val::Zero(x), Val::Fin { neg: y, .. })
        | (Val::Fin { neg: x, .. }, Val::Inf(y)) => fmt.zero(x != y),
        (
            Val::Fin {
                neg: an,
                sig: asig,
                exp: ae,
            },
            Val::Fin {
                neg: bn,
                sig: bsig,
                exp: be,
            },
        ) => {
            let (na, ea) = norm_to(asig, ae, 126);
            let (nb, eb) = norm_to(bsig, be, 52);
            let q = na / nb;
            let sticky = (na % nb != 0) as u128;
            round_pack(fmt, an != bn, q | sticky, ea - eb, rnd)
        }
    }
}

/// `floor(sqrt(s))` for `s < 2^127`, by a floating-point estimate refined with Newton steps
/// and a final exact correction.
fn isqrt(s: u128) -> u128 {
    if s == 0 {
        return 0;
    }
    let mut r = (s as f64).sqrt() as u128;
    if r == 0 {
        r = 1;
    }
    for _ in 0..2 {
        r = (r + s / r) / 2;
    }
    while r.checked_mul(r).is_none_or(|sq| sq > s) {
        r -= 1;
    }
    while (r + 1).checked_mul(r + 1).is_some_and(|sq| sq <= s) {
        r += 1;
    }
    r
}

/// IEEE square root: the radicand is scaled to 126–127 bits with an even exponent, so the
/// integer root has at least 63 bits; an inexact root becomes sticky.
pub(crate) fn sqrt(fmt: Fmt, a: u64, rnd: Rounding) -> u64 {
    match unpack(fmt, a) {
        Val::Nan | Val::Inf(true) | Val::Fin { neg: true, .. } => fmt.nan(),
        Val::Inf(false) => fmt.inf(false),
        Val::Zero(n) => fmt.zero(n),
        Val::Fin {
            neg: false,
            sig,
            exp,
        } => {
            let (mut s, mut e) = norm_to(sig, exp, 126);
            if e & 1 != 0 {
                s >>= 1; // the bit shifted out is zero: norm_to shifted left by ≥ 73
                e += 1;
            }
            let r = isqrt(s);
            let sticky = (r * r != s) as u128;
            round_pack(fmt, false, r | sticky, e / 2, rnd)
        }
    }
}

/// Rounds `sig * 2^exp` (a magnitude) to an integer in mode `rnd` (for a value of sign `neg`).
/// Returns `None` when the magnitude is at least 2^64 (callers saturate).
pub(crate) fn round_to_int_mag(neg: bool, sig: u64, exp: i32, rnd: Rounding) -> Option<u128> {
    if exp >= 0 {
        return if exp >= 64 || (sig as u128) << exp >= 1u128 << 64 {
            None
        } else {
            Some((sig as u128) << exp)
        };
    }
    let shift = (-exp) as u32;
    let sig = sig as u128;
    let (q, cmp_half, inexact) = if shift >= 120 {
        (0u128, std::cmp::Ordering::Less, true)
    } else {
        let rem = sig & ((1u128 << shift) - 1);
        (sig >> shift, rem.cmp(&(1u128 << (shift - 1))), rem != 0)
    };
    let up = match rnd {
        Rounding::Nearest => {
            cmp_half == std::cmp::Ordering::Greater
                || (cmp_half == std::cmp::Ordering::Equal && q & 1 == 1)
        }
        Rounding::Zero => false,
        Rounding::Down => neg && inexact,
        Rounding::Up => !neg && inexact,
    };
    Some(q + up as u128)
}

/// Rounds a value to an integral value of the same format (`cvt.rni.f32.f32` etc.); the sign
/// of a zero result is the sign of the input.
pub(crate) fn round_int(fmt: Fmt, a: u64, rnd: Rounding) -> u64 {
    match unpack(fmt, a) {
        Val::Nan => fmt.nan(),
        Val::Inf(_) | Val::Zero(_) => a & fmt.mask(),
        Val::Fin { neg, sig, exp } => {
            if exp >= 0 {
                return a & fmt.mask(); // already an integer
            }
            // |value| < 2^(frac+1) here, so the rounded magnitude fits comfortably.
            let m = round_to_int_mag(neg, sig, exp, rnd).unwrap_or(0);
            round_pack(fmt, neg, m, 0, Rounding::Nearest)
        }
    }
}

/// Converts between formats (exact when widening), rounding in mode `rnd`.
pub(crate) fn convert(to: Fmt, from: Fmt, a: u64, rnd: Rounding) -> u64 {
    match unpack(from, a) {
        Val::Nan => to.nan(),
        Val::Inf(n) => to.inf(n),
        Val::Zero(n) => to.zero(n),
        Val::Fin { neg, sig, exp } => round_pack(to, neg, sig as u128, exp, rnd),
    }
}

/// The value as an `f64` (exact for all supported formats).
#[inline]
pub(crate) fn to_f64(fmt: Fmt, a: u64) -> f64 {
    if fmt == F64 {
        f64::from_bits(a)
    } else if fmt == F32 {
        f32::from_bits(a as u32) as f64
    } else {
        f64::from_bits(convert(F64, fmt, a, Rounding::Nearest))
    }
}

/// An `f64` rounded to nearest-even in `fmt`; NaN becomes the canonical NaN.
#[inline]
pub(crate) fn from_f64(fmt: Fmt, x: f64) -> u64 {
    if super::is_nan64(x) {
        fmt.nan()
    } else if fmt == F64 {
        x.to_bits()
    } else if fmt == F32 {
        // The host's conversion rounds to nearest-even, subnormals and overflow included.
        u64::from((x as f32).to_bits())
    } else {
        convert(fmt, F64, x.to_bits(), Rounding::Nearest)
    }
}
