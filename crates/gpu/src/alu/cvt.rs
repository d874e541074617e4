//! `cvt` (PTX ISA "Data Movement and Conversion Instructions: cvt"): conversions among all
//! integer and floating-point types, with the rounding modifiers of "Rounding Modifiers" and
//! the `.ftz` / `.sat` modifiers.

use kir::inst::{Rounding, Ty};

use super::float::saturate as fsat;
use super::soft::{self, Fmt, Val, BF16, F16, F32, F64};

#[derive(Clone, Copy)]
enum Kind {
    /// An integer of `bits` bits (the `.b` types act as unsigned).
    Int {
        signed: bool,
        bits: u32,
    },
    Float(Fmt),
}

#[inline]
fn kind(ty: Ty) -> Option<Kind> {
    Some(match ty {
        Ty::U8 | Ty::U16 | Ty::U32 | Ty::U64 | Ty::B8 | Ty::B16 | Ty::B32 | Ty::B64 => Kind::Int {
            signed: false,
            bits: ty.bits(),
        },
        Ty::S8 | Ty::S16 | Ty::S32 | Ty::S64 => Kind::Int {
            signed: true,
            bits: ty.bits(),
        },
        Ty::F16 => Kind::Float(F16),
        Ty::Bf16 => Kind::Float(BF16),
        Ty::F32 => Kind::Float(F32),
        Ty::F64 => Kind::Float(F64),
        _ => return None,
    })
}

/// Whether `ty` is one of the integer kinds (see `kind`).
#[inline]
pub(super) fn is_plain_int(ty: Ty) -> bool {
    matches!(kind(ty), Some(Kind::Int { .. }))
}

/// The range of a `bits`-bit integer.
#[inline]
fn int_range(signed: bool, bits: u32) -> (i128, i128) {
    if signed {
        (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
    } else {
        (0, (1i128 << bits) - 1)
    }
}

#[inline]
fn low_mask(bits: u32) -> u64 {
    u64::MAX >> (64 - bits)
}

/// `cvt{.rnd}{.ftz}{.sat}.dty.sty`. Unsupported combinations (`.pred`, `.b128`, packed
/// pairs, which need two sources) give 0.
pub(crate) fn cvt(
    dty: Ty,
    sty: Ty,
    rounding: Option<Rounding>,
    ftz: bool,
    sat: bool,
    a: u64,
) -> u64 {
    let (Some(dk), Some(sk)) = (kind(dty), kind(sty)) else {
        return 0;
    };
    match (dk, sk) {
        (
            Kind::Int {
                signed: ds,
                bits: db,
            },
            Kind::Int { .. },
        ) => {
            // Truncate or extend according to the source's signedness; `.sat` clamps to the
            // destination's range ("For integer destination types, .sat limits the result to
            // MININT..MAXINT for the size of the operation").
            let v = if sty.is_signed() {
                sty.extend(a) as i64 as i128
            } else {
                sty.extend(a) as i128
            };
            let v = if sat {
                let (lo, hi) = int_range(ds, db);
                v.clamp(lo, hi)
            } else {
                v
            };
            v as u64 & low_mask(db)
        }
        (Kind::Float(df), Kind::Int { signed, .. })
            if matches!(rounding, None | Some(Rounding::Nearest)) && (df == F32 || df == F64) =>
        {
            // The host's integer-to-float conversions round to nearest-even.
            let x = sty.extend(a);
            let r = match (df == F32, signed) {
                (true, true) => u64::from((x as i64 as f32).to_bits()),
                (true, false) => u64::from((x as f32).to_bits()),
                (false, true) => (x as i64 as f64).to_bits(),
                (false, false) => (x as f64).to_bits(),
            };
            finish_float(df, ftz, sat, r)
        }
        (Kind::Float(df), Kind::Int { signed, .. }) => {
            let v = if signed {
                sty.extend(a) as i64 as i128
            } else {
                sty.extend(a) as i128
            };
            let r = soft::round_pack(
                df,
                v < 0,
                v.unsigned_abs(),
                0,
                rounding.unwrap_or(Rounding::Nearest),
            );
            finish_float(df, ftz, sat, r)
        }
        (Kind::Int { signed, bits }, Kind::Float(sf)) => {
            let a = if ftz && sf == F32 { sf.ftz(a) } else { a };
            let rnd = rounding.unwrap_or(Rounding::Zero);
            if sf == F32 {
                host_float_to_int(f64::from(f32::from_bits(a as u32)), signed, bits, rnd)
            } else if sf == F64 {
                host_float_to_int(f64::from_bits(a), signed, bits, rnd)
            } else {
                float_to_int(sf, a, signed, bits, rnd)
            }
        }
        (Kind::Float(df), Kind::Float(sf)) => {
            let a = a & sf.mask();
            let a = if ftz && sf == F32 { sf.ftz(a) } else { a };
            let r = if df == sf {
                // Same size: a rounding modifier means round to an integral value
                // (`cvt.rni.f32.f32`); otherwise only `.ftz`/`.sat` apply.
                match rounding {
                    Some(r) => soft::round_int(df, a, r),
                    None if df.is_nan(a) => df.nan(),
                    None => a,
                }
            } else {
                soft::convert(df, sf, a, rounding.unwrap_or(Rounding::Nearest))
            };
            finish_float(df, ftz, sat, r)
        }
    }
}

/// `.ftz` (f32 results only) then `.sat` ([0.0, 1.0], NaN → +0.0) on a float result.
#[inline]
fn finish_float(df: Fmt, ftz: bool, sat: bool, r: u64) -> u64 {
    let r = if ftz && df == F32 { df.ftz(r) } else { r };
    if sat {
        fsat(df, r)
    } else {
        r
    }
}

/// [`float_to_int`] of an f32 or f64 value (`x`, exact) on the host's operations: its
/// integral roundings are exact, and its float-to-integer `as` truncates and saturates with
/// NaN giving 0, as PTX's conversion does.
#[inline]
fn host_float_to_int(x: f64, signed: bool, bits: u32, rnd: Rounding) -> u64 {
    let r = match rnd {
        Rounding::Zero => x, // `as` truncates
        Rounding::Nearest => x.round_ties_even(),
        Rounding::Down => x.floor(),
        Rounding::Up => x.ceil(),
    };
    let (lo, hi) = int_range(signed, bits);
    let v = if signed {
        i128::from(r as i64)
    } else {
        i128::from(r as u64)
    };
    v.clamp(lo, hi) as u64 & low_mask(bits)
}

/// Float to integer: round to an integral value in mode `rnd`, then saturate to the
/// destination range, which PTX always does for float-to-integer conversions; NaN gives 0.
#[inline]
pub(super) fn float_to_int(sf: Fmt, a: u64, signed: bool, bits: u32, rnd: Rounding) -> u64 {
    let (lo, hi) = int_range(signed, bits);
    let v: i128 = match soft::unpack(sf, a) {
        Val::Nan | Val::Zero(_) => 0,
        Val::Inf(neg) => {
            if neg {
                lo
            } else {
                hi
            }
        }
        Val::Fin { neg, sig, exp } => match soft::round_to_int_mag(neg, sig, exp, rnd) {
            // ≥ 2^64 in magnitude: beyond every destination range.
            None => {
                if neg {
                    lo
                } else {
                    hi
                }
            }
            Some(m) => {
                if neg {
                    -(m as i128)
                } else {
                    m as i128
                }
            }
        },
    };
    v.clamp(lo, hi) as u64 & low_mask(bits)
}
