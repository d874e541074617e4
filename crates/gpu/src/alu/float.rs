//! Floating-point arithmetic: PTX ISA "Floating-Point Instructions" (`add sub mul fma mad div
//! rcp sqrt rsqrt sin cos lg2 ex2 tanh min max abs neg copysign`) and "Half Precision
//! Floating-Point Instructions" (the `.f16 .f16x2 .bf16 .bf16x2` forms).
//!
//! Round-to-nearest `.f32`/`.f64` arithmetic uses the host's IEEE operations directly (they
//! are correctly rounded), and so do f32 `add`, `mul` and `fma` in a directed mode (see
//! `sum32`); the other directed forms and the 16-bit formats go through the software
//! implementation in `soft`. NaN results are always the canonical NaN of the format
//! (`0x7FFFFFFF` for f32), which is what NVIDIA hardware produces for f32; for f64 the
//! hardware may instead propagate an input NaN's payload, which Switchyard does not model.

use kir::inst::{ArithOp, FloatMode, Rounding, Ty};

use super::soft::{self, Fmt, BF16, F16, F32, F64};
use super::AluError;

/// The scalar format of a float type, and whether it is a packed pair (`.f16x2 .bf16x2`).
#[inline]
pub(crate) fn fmt_of(ty: Ty) -> Option<(Fmt, bool)> {
    Some(match ty {
        Ty::F32 => (F32, false),
        Ty::F64 => (F64, false),
        Ty::F16 => (F16, false),
        Ty::Bf16 => (BF16, false),
        Ty::F16x2 => (F16, true),
        Ty::Bf16x2 => (BF16, true),
        _ => return None,
    })
}

/// Applies a per-element operation to a packed pair of 16-bit values (low half first).
#[inline]
pub(crate) fn packed2(
    a: u64,
    b: u64,
    c: u64,
    f: impl Fn(u64, u64, u64) -> Option<u64>,
) -> Option<u64> {
    let lo = f(a & 0xFFFF, b & 0xFFFF, c & 0xFFFF)?;
    let hi = f((a >> 16) & 0xFFFF, (b >> 16) & 0xFFFF, (c >> 16) & 0xFFFF)?;
    Some((hi & 0xFFFF) << 16 | (lo & 0xFFFF))
}

/// Evaluates a float op of type `ty`.
#[inline]
pub(crate) fn arith(
    op: ArithOp,
    ty: Ty,
    mode: FloatMode,
    a: u64,
    b: u64,
    c: u64,
) -> Result<u64, AluError> {
    let unsupported = AluError::Unsupported { op, ty };
    let (fmt, pair) = fmt_of(ty).ok_or(unsupported.clone())?;
    let r = if pair {
        packed2(a, b, c, |a, b, c| scalar(op, fmt, mode, a, b, c))
    } else {
        scalar(op, fmt, mode, a, b, c)
    };
    r.ok_or(unsupported)
}

/// A native `f32` result as PTX gives it: its bits, or the canonical NaN.
#[inline(always)]
pub(crate) fn canon32(x: f32) -> u64 {
    if super::is_nan32(x) {
        F32.nan()
    } else {
        x.to_bits() as u64
    }
}

/// [`canon32`] for `f64`.
#[inline(always)]
pub(crate) fn canon64(x: f64) -> u64 {
    if super::is_nan64(x) {
        F64.nan()
    } else {
        x.to_bits()
    }
}

#[inline]
fn f32v(a: u64) -> f32 {
    f32::from_bits(a as u32)
}

/// One scalar operation in format `fmt`. `None`: the op is not a float op.
fn scalar(op: ArithOp, fmt: Fmt, mode: FloatMode, a: u64, b: u64, c: u64) -> Option<u64> {
    let m = fmt.mask();
    let (mut a, mut b, mut c) = (a & m, b & m, c & m);
    // `.ftz`: subnormal inputs become sign-preserving zeros (PTX ISA, "Floating-Point
    // Instructions": "subnormal inputs and results are flushed to sign-preserving zero").
    if mode.ftz {
        a = fmt.ftz(a);
        b = fmt.ftz(b);
        c = fmt.ftz(c);
    }
    let rnd = mode.rounding;
    let r = match op {
        ArithOp::Add => add(fmt, a, b, rnd),
        ArithOp::Sub => add(fmt, a, b ^ fmt.sign(), rnd),
        ArithOp::Mul | ArithOp::MulLo => mul(fmt, a, b, rnd),
        ArithOp::Fma | ArithOp::MadLo => fma(fmt, a, b, c, rnd),
        ArithOp::Div if mode.approx => approx_div(fmt, a, b),
        ArithOp::Div => div(fmt, a, b, rnd),
        ArithOp::Rcp if mode.approx => approx_rcp(fmt, a),
        ArithOp::Rcp => div(fmt, fmt.one(), a, rnd),
        ArithOp::Sqrt if mode.approx => approx_sqrt(fmt, a),
        ArithOp::Sqrt => sqrt(fmt, a, rnd),
        ArithOp::Rsqrt => rsqrt(fmt, a),
        ArithOp::Sin => via_f64(fmt, a, f64::sin),
        ArithOp::Cos => via_f64(fmt, a, f64::cos),
        ArithOp::Ex2 => ex2(fmt, a),
        ArithOp::Lg2 => lg2(fmt, a),
        ArithOp::Tanh => via_f64(fmt, a, f64::tanh),
        ArithOp::Min => min_max(fmt, a, b, false),
        ArithOp::Max => min_max(fmt, a, b, true),
        ArithOp::MinMax {
            max,
            relu,
            nan,
            three,
        } => {
            let inputs = if three { &[a, b, c][..] } else { &[a, b][..] };
            if nan && inputs.iter().any(|&x| fmt.is_nan(x)) {
                fmt.nan()
            } else {
                let r = inputs[1..]
                    .iter()
                    .fold(inputs[0], |r, &x| min_max(fmt, r, x, max));
                // `.relu`: a negative result (not a NaN) becomes +0.
                if relu && !fmt.is_nan(r) && r & fmt.sign() != 0 {
                    0
                } else {
                    r
                }
            }
        }
        // `abs` and `neg` only touch the sign bit, NaNs included.
        ArithOp::Abs => a & !fmt.sign(),
        ArithOp::Neg => a ^ fmt.sign(),
        // `copysign d, a, b`: magnitude of `b`, sign of `a`.
        ArithOp::Copysign => (b & !fmt.sign()) | (a & fmt.sign()),
        _ => return None,
    };
    let r = if mode.ftz { fmt.ftz(r) } else { r };
    // `.relu` (half-precision `fma`): a negative result (not a NaN) becomes +0.
    let r = if mode.relu && !fmt.is_nan(r) && r & fmt.sign() != 0 {
        0
    } else {
        r
    };
    Some(if mode.sat { saturate(fmt, r) } else { r })
}

/// `.sat`: clamps to [+0.0, 1.0]; NaN becomes +0.0 (PTX ISA, "Floating-Point Instructions:
/// add"). A negative zero also becomes +0.0, as the lower bound is +0.0.
#[inline]
pub(crate) fn saturate(fmt: Fmt, r: u64) -> u64 {
    if fmt.is_nan(r) || fmt.is_neg(r) {
        0
    } else if r > fmt.one() {
        fmt.one()
    } else {
        r
    }
}

/// `add`, correctly rounded in any mode.
#[inline]
pub(crate) fn add(fmt: Fmt, a: u64, b: u64, rnd: Rounding) -> u64 {
    if rnd == Rounding::Nearest {
        if fmt == F32 {
            return canon32(f32v(a) + f32v(b));
        } else if fmt == F64 {
            return canon64(f64::from_bits(a) + f64::from_bits(b));
        }
    } else if fmt == F32 {
        return sum32(f64::from(f32v(a)), f64::from(f32v(b)), rnd);
    }
    soft::add(fmt, a, b, rnd)
}

#[inline]
fn mul(fmt: Fmt, a: u64, b: u64, rnd: Rounding) -> u64 {
    if rnd == Rounding::Nearest {
        if fmt == F32 {
            return canon32(f32v(a) * f32v(b));
        } else if fmt == F64 {
            return canon64(f64::from_bits(a) * f64::from_bits(b));
        }
    } else if fmt == F32 {
        return mul32(a as u32, b as u32, rnd);
    }
    soft::mul(fmt, a, b, rnd)
}

/// `fma` (and `mad.f32`/`mad.f64`, fused on sm_20+): a single rounding of `a*b+c`.
#[inline]
fn fma(fmt: Fmt, a: u64, b: u64, c: u64, rnd: Rounding) -> u64 {
    if rnd == Rounding::Nearest {
        if fmt == F32 {
            return canon32(f32v(a).mul_add(f32v(b), f32v(c)));
        } else if fmt == F64 {
            return canon64(f64::from_bits(a).mul_add(f64::from_bits(b), f64::from_bits(c)));
        }
    } else if fmt == F32 {
        return fma32(a as u32, b as u32, c as u32, rnd);
    }
    soft::fma(fmt, a, b, c, rnd)
}

// Directed rounding of f32 `add`, `mul` and `fma` on the host's f64 operations, bit for bit
// what the software path (`soft`) gives, at a tenth of its cost: `fma.rm.f32` is in the
// expansion of every `expf` NVRTC emits. The product of two f32 is exact in f64 (48
// significant bits, exponents within f64's range), so an f32 `a*b + c` or `a + b` is the
// exact sum of two f64, which Knuth's TwoSum splits into its f64 rounding and the exact
// error. Rounded to odd at f64's 53 bits, that sum then rounds to f32 (24 bits) in any mode
// exactly as the exact value would: rounding to odd at two or more extra bits keeps both
// which f32 interval the value is in and whether it is exact (Boldo and Melquiond, "When
// double rounding is odd", 2005). Subnormal f32 results only mean fewer target bits.

/// The bit pattern of an `f64` that is an infinity or a NaN (tested on its bits: LLVM has
/// folded `is_nan` of values it thought it knew; see the property tests' oracles).
#[inline(always)]
fn non_finite64(x: f64) -> bool {
    x.to_bits() & 0x7FF0_0000_0000_0000 == 0x7FF0_0000_0000_0000
}

/// `x`, a nonzero finite value that is exact or rounded to odd at f64's precision, rounded
/// to f32 in mode `rnd`: the host's conversion rounds to nearest, and a directed mode then
/// steps one f32 towards the value when that rounding went past it.
#[inline(always)]
fn round_to_f32(x: f64, rnd: Rounding) -> f32 {
    let y = x as f32;
    let yd = f64::from(y);
    match rnd {
        Rounding::Nearest => y,
        Rounding::Down if yd > x => y.next_down(),
        Rounding::Up if yd < x => y.next_up(),
        // |y| > |x| > 0: one step of the magnitude towards zero (an infinity becomes the
        // largest finite value).
        Rounding::Zero if yd.abs() > x.abs() => f32::from_bits(y.to_bits() - 1),
        _ => y,
    }
}

/// The exact sum `p + c` of two f64 (each an f32 or the exact product of two), rounded to
/// f32 in mode `rnd`; NaN gives the canonical NaN.
#[inline(always)]
fn sum32(p: f64, c: f64, rnd: Rounding) -> u64 {
    let s = p + c;
    if non_finite64(s) {
        // A NaN or an infinite operand: sums of finite f32 values cannot overflow f64.
        return canon32(s as f32);
    }
    if s == 0.0 {
        // An exact zero (a nonzero exact sum is at least 2^-298, far from f64's
        // underflow): IEEE 754 §6.3 gives -0 under roundTowardNegative unless both
        // addends are +0; in the other modes the nearest f64 sum has the right sign.
        let minus_zero = rnd == Rounding::Down && (p.to_bits() | c.to_bits()) != 0;
        return if minus_zero {
            F32.zero(true)
        } else {
            u64::from((s as f32).to_bits())
        };
    }
    // TwoSum: `err` is exactly `p + c - s`.
    let c_part = s - p;
    let err = (p - (s - c_part)) + (c - c_part);
    let x = if err == 0.0 {
        s
    } else {
        // Truncate (step `s`'s magnitude down when it was rounded away from zero), then
        // make the last bit odd.
        let bits = s.to_bits();
        let truncated = if (err < 0.0) != (s < 0.0) {
            bits - 1
        } else {
            bits
        };
        f64::from_bits(truncated | 1)
    };
    u64::from(round_to_f32(x, rnd).to_bits())
}

/// `mul.{rz,rm,rp}.f32`: the f64 product is exact.
#[inline]
fn mul32(a: u32, b: u32, rnd: Rounding) -> u64 {
    let p = f64::from(f32::from_bits(a)) * f64::from(f32::from_bits(b));
    if non_finite64(p) || p == 0.0 {
        // NaN, infinity, or a zero with the product's sign: all exact in f32.
        return canon32(p as f32);
    }
    u64::from(round_to_f32(p, rnd).to_bits())
}

/// `fma.{rz,rm,rp}.f32`: a single rounding of the exact `a*b + c` (to nearest, the host's
/// `mul_add` costs less).
#[inline]
fn fma32(a: u32, b: u32, c: u32, rnd: Rounding) -> u64 {
    let p = f64::from(f32::from_bits(a)) * f64::from(f32::from_bits(b));
    sum32(p, f64::from(f32::from_bits(c)), rnd)
}

#[inline]
fn div(fmt: Fmt, a: u64, b: u64, rnd: Rounding) -> u64 {
    if rnd == Rounding::Nearest {
        if fmt == F32 {
            return canon32(f32v(a) / f32v(b));
        } else if fmt == F64 {
            return canon64(f64::from_bits(a) / f64::from_bits(b));
        }
    }
    soft::div(fmt, a, b, rnd)
}

#[inline]
fn sqrt(fmt: Fmt, a: u64, rnd: Rounding) -> u64 {
    if rnd == Rounding::Nearest {
        if fmt == F32 {
            return canon32(f32v(a).sqrt());
        } else if fmt == F64 {
            return canon64(f64::from_bits(a).sqrt());
        }
    }
    soft::sqrt(fmt, a, rnd)
}

/// Evaluates `f` on the exact `f64` value of `a` and rounds the result to nearest in `fmt`.
#[inline]
fn via_f64(fmt: Fmt, a: u64, f: impl Fn(f64) -> f64) -> u64 {
    soft::from_f64(fmt, f(soft::to_f64(fmt, a)))
}

/// `div.approx.f32` / `div.full.f32`: PTX documents a maximum error of 2 ulp over the full
/// range for `.full`, and for `.approx` 2 ulp for |b| in [2^-126, 2^126] (with a zero result
/// for larger |b|). Switchyard returns the correctly rounded quotient (round to nearest),
/// which is always at least that accurate (and also for large |b|).
#[inline]
fn approx_div(fmt: Fmt, a: u64, b: u64) -> u64 {
    div(fmt, a, b, Rounding::Nearest)
}

/// `rcp.approx.f32`: PTX documents a maximum error of 1 ulp over the full range;
/// `rcp.approx.ftz.f64` is documented as a fast, reduced-precision approximation (hardware
/// delivers roughly 20 correct bits). Switchyard returns the correctly rounded reciprocal,
/// which is at least as accurate as either.
#[inline]
fn approx_rcp(fmt: Fmt, a: u64) -> u64 {
    if fmt == F64 {
        // `rcp.approx.ftz.f64` (PTX ISA): a reciprocal of `a`'s upper 32 bits (sign,
        // exponent and the top 20 mantissa bits), written to the upper 32 bits of the result
        // with the low 32 zero. The hardware's approximation error is unspecified;
        // Switchyard truncates the exact reciprocal of the truncated input to that format.
        const HIGH: u64 = 0xffff_ffff_0000_0000;
        return div(F64, F64.one(), a & HIGH, Rounding::Zero) & HIGH;
    }
    div(fmt, fmt.one(), a, Rounding::Nearest)
}

/// `sqrt.approx.f32`: PTX bound max relative error 2^-23. Switchyard returns the correctly
/// rounded square root.
#[inline]
fn approx_sqrt(fmt: Fmt, a: u64) -> u64 {
    sqrt(fmt, a, Rounding::Nearest)
}

/// `rsqrt.approx.f32` (PTX bound: max relative error 2^-22.9) and `rsqrt.approx.f64` /
/// `rsqrt.approx.ftz.f64` (an approximation with ~2^-51 relative error on sm_50+). Switchyard
/// computes `1/sqrt(a)` in f64 (two correctly rounded f64 steps, relative error < 2^-52)
/// and rounds to the format, so it is at least as accurate. Special values per PTX:
/// rsqrt(±0) = ±Inf, rsqrt(+Inf) = +0, rsqrt(negative) = NaN.
#[inline]
fn rsqrt(fmt: Fmt, a: u64) -> u64 {
    via_f64(fmt, a, |x| 1.0 / x.sqrt())
}

/// `ex2.approx.f32` (and `.f16`/`.bf16` forms): PTX documents a maximum relative error of
/// about 2^-22 (2 ulp) over the full range. Switchyard evaluates 2^x in f64 (error below one
/// f64 ulp) and rounds to nearest, within half an ulp plus 2^-52 relative. ex2(-Inf) = +0, ex2(+Inf) = +Inf, ex2(±0) = 1.
#[inline]
fn ex2(fmt: Fmt, a: u64) -> u64 {
    via_f64(fmt, a, f64::exp2)
}

/// `lg2.approx.f32`: PTX documents a maximum absolute error of about 2^-22 (2^-22.6 for the
/// mantissa's range). Switchyard evaluates log2 in f64 and rounds to nearest, which is
/// within that bound.
/// lg2(±0) = -Inf, lg2(negative) = NaN, lg2(+Inf) = +Inf.
#[inline]
fn lg2(fmt: Fmt, a: u64) -> u64 {
    via_f64(fmt, a, f64::log2)
}

// `sin.approx.f32` / `cos.approx.f32`: PTX bound max absolute error 2^-20.9 in [-100π, 100π]
// (and `tanh.approx.f32`: max relative error 2^-10.987). Switchyard evaluates the function on
// the exact f64 value of the input and rounds to nearest, far more accurate than those bounds.
// sin/cos(±Inf) = NaN; tanh(±Inf) = ±1.

/// An ordering key on non-NaN values in which -0 < +0 (sign-magnitude to two's complement).
#[inline]
fn order_key(fmt: Fmt, x: u64) -> i64 {
    let mag = (x & !fmt.sign()) as i64;
    if fmt.is_neg(x) {
        -mag - 1
    } else {
        mag
    }
}

/// `min`/`max` (PTX ISA "min", "max"): if exactly one input is NaN the other is returned; if
/// both are NaN the result is the canonical NaN; -0.0 is treated as less than +0.0.
#[inline]
pub(crate) fn min_max(fmt: Fmt, a: u64, b: u64, max: bool) -> u64 {
    match (fmt.is_nan(a), fmt.is_nan(b)) {
        (true, true) => fmt.nan(),
        (true, false) => b,
        (false, true) => a,
        (false, false) => {
            let a_less = order_key(fmt, a) < order_key(fmt, b);
            if a_less != max {
                a
            } else {
                b
            }
        }
    }
}

/// An IEEE binary16 value, exactly (every f16 is an f64).
pub fn f16_value(h: u16) -> f64 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = i32::from((h >> 10) & 0x1f);
    let frac = f64::from(h & 0x3ff);
    sign * match exp {
        0 => frac * 2f64.powi(-24),
        31 if frac == 0.0 => f64::INFINITY,
        31 => f64::NAN,
        e => (1024.0 + frac) * 2f64.powi(e - 25),
    }
}
