//! The per-lane arithmetic of PTX: exact bit-level semantics of the integer, logic, bit
//! manipulation, floating-point, comparison, conversion and atomic-update operations.
//!
//! # Value convention
//! Register values are `u64` bit patterns. A source holds its value in the low `ty.bits()`
//! bits and may carry garbage above them, so every function first reduces each source to its
//! type. Results are zero-extended: only the low bits of the result type are set (a `.s32`
//! result of -1 is `0x0000_0000_FFFF_FFFF`; `mul.wide.s32` returns a full 64-bit value).
//! Floats are IEEE bit patterns (f32 in the low 32 bits, f16/bf16 in the low 16, packed
//! `.f16x2`/`.bf16x2` with the first element in the low half).
//!
//! # Floating point
//! Results are correctly rounded in all four IEEE modes (`.rn .rz .rm .rp`), including
//! subnormals; `.ftz` flushes subnormal inputs and results to sign-preserving zero, `.sat`
//! clamps to [0.0, 1.0]. A NaN result is always the canonical NaN of the format (f32
//! `0x7FFFFFFF`, f64 `0x7FFFFFFFFFFFFFFF`, f16/bf16 `0x7FFF`), as NVIDIA hardware produces for
//! f32 (the hardware may propagate an input payload for f64; that is not modelled). The
//! `.approx` operations return results at least as accurate as the bounds PTX documents.
//!
//! The submodules: `int` (integer and bit operations), `float` (float arithmetic), `cvt`
//! (conversions) and `soft` (a software IEEE implementation for directed rounding and the
//! 16-bit formats).

mod cvt;
mod float;
pub use float::f16_value;
pub(crate) use float::{canon32, canon64};
mod int;
mod soft;

/// Whether `x` is a NaN, told by its bits ([`soft::Fmt::is_nan`]). Native results are
/// classified this way rather than with `is_nan`: rustc 1.95 (LLVM 22) in a release build
/// was seen folding `is_nan` of a native `sqrt` of a negative subnormal to false after other
/// operations on the same value (`prop_tests::canon64`), which would let the host's NaN
/// payload through instead of PTX's canonical NaN.
#[inline(always)]
pub(crate) fn is_nan64(x: f64) -> bool {
    soft::F64.is_nan(x.to_bits())
}

/// [`is_nan64`] for `f32`.
#[inline(always)]
pub(crate) fn is_nan32(x: f32) -> bool {
    soft::F32.is_nan(u64::from(x.to_bits()))
}

/// `min.f32` / `max.f32` of two 32-bit patterns (the general path's rule: a NaN gives
/// the other operand, two give the canonical NaN, -0 orders below +0), for the executor's
/// fast path.
#[inline(always)]
pub(crate) fn min_max_f32(a: u64, b: u64, max: bool) -> u64 {
    float::min_max(soft::F32, a, b, max)
}

#[cfg(test)]
mod prop_tests;
#[cfg(test)]
mod tests;

use kir::inst::{ArithOp, AtomOp, Cmp, FloatMode, Rounding, TestpKind, Ty};

use soft::F32;

/// An operation the ALU cannot evaluate.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AluError {
    /// Operation not defined for this type (e.g. `Sin` on `s32`, `Popc` on `f32`).
    #[error("`{op:?}` is not defined for type `.{ty:?}`")]
    Unsupported { op: ArithOp, ty: Ty },
}

/// Evaluates a per-lane arithmetic/logic op. Unused sources are 0. `ty` is the instruction
/// type (for `MulWide`/`MadWide` the source type; the result is double width; for
/// `Popc`/`Clz` the result is a u32).
#[inline]
pub fn arith(
    op: ArithOp,
    ty: Ty,
    mode: FloatMode,
    a: u64,
    b: u64,
    c: u64,
    d: u64,
) -> Result<u64, AluError> {
    if ty.is_float() {
        float::arith(op, ty, mode, a, b, c)
    } else if matches!(ty, Ty::U16x2 | Ty::S16x2) {
        // Two 16-bit lanes, each computed as the 16-bit type (PTX ISA 8.0: `add`, `sub`,
        // `min`, `max` on `.u16x2`/`.s16x2`).
        let half = if ty == Ty::S16x2 { Ty::S16 } else { Ty::U16 };
        let part = |v: u64, k: u32| (v >> (16 * k)) & 0xffff;
        let mut out = 0;
        for k in 0..2 {
            let r = int::arith(op, half, mode, part(a, k), part(b, k), part(c, k), d)?;
            out |= (r & 0xffff) << (16 * k);
        }
        Ok(out)
    } else {
        int::arith(op, ty, mode, a, b, c, d)
    }
}

/// A carry-chain operation on `x` (its sources in order; the carry flag `cf_in` counts only
/// when the operation reads it): the result and the carry (or, for subtraction, borrow) out.
#[inline(always)]
pub fn carry(op: ArithOp, ty: Ty, x: [u64; 4], cf_in: bool) -> (u64, bool) {
    let w = ty.bits();
    let mask = ty.mask();
    let (a, b, c) = (x[0] & mask, x[1] & mask, x[2] & mask);
    let wide = |v: u128| ((v as u64) & mask, v >> w != 0);
    match op {
        ArithOp::AddC { carry_in } => {
            let cin = u128::from(carry_in && cf_in);
            wide(u128::from(a) + u128::from(b) + cin)
        }
        ArithOp::SubC { carry_in } => {
            let cin = u64::from(carry_in && cf_in);
            let sub = u128::from(b) + u128::from(cin);
            let borrow = u128::from(a) < sub;
            (((u128::from(a)).wrapping_sub(sub) as u64) & mask, borrow)
        }
        ArithOp::MadC { hi, carry_in } => {
            let signed = matches!(ty, Ty::S32 | Ty::S64);
            let product: u128 = if signed {
                let ext = |v: u64| ((v << (64 - w)) as i64 >> (64 - w)) as i128;
                (ext(a) * ext(b)) as u128
            } else {
                u128::from(a) * u128::from(b)
            };
            let half = if hi {
                (product >> w) as u64 & mask
            } else {
                product as u64 & mask
            };
            let cin = u128::from(carry_in && cf_in);
            wide(u128::from(half) + u128::from(c) + cin)
        }
        _ => (0, false),
    }
}

/// How a comparison of type `ty` reads its operands when it is a plain comparison of Rust
/// values ([`plain_compare`] of the `SetpKind::key_*` readings), the same answer as [`compare`]: 32-
/// and 64-bit integers by the operator's signedness, and `f32` (without `ftz`) and `f64`
/// as floats. `None` for the rest (narrow integers, halves, flushing subnormals).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetpKind {
    U32,
    S32,
    U64,
    S64,
    F32,
    F64,
}

impl SetpKind {
    #[inline]
    pub fn of(cmp: Cmp, ty: Ty, ftz: bool) -> Option<SetpKind> {
        let unsigned_op = matches!(cmp, Cmp::Lo | Cmp::Ls | Cmp::Hi | Cmp::Hs);
        Some(match ty {
            Ty::U32 | Ty::B32 => SetpKind::U32,
            Ty::S32 if unsigned_op => SetpKind::U32,
            Ty::S32 => SetpKind::S32,
            Ty::U64 | Ty::B64 => SetpKind::U64,
            Ty::S64 if unsigned_op => SetpKind::U64,
            Ty::S64 => SetpKind::S64,
            Ty::F32 if !ftz => SetpKind::F32,
            Ty::F64 if !ftz => SetpKind::F64,
            _ => return None,
        })
    }

    /// A register's value as this kind compares it (the `SetpKind::key_*` functions).
    pub fn key_u32(x: u64) -> u32 {
        x as u32
    }
    pub fn key_s32(x: u64) -> i32 {
        x as u32 as i32
    }
    pub fn key_u64(x: u64) -> u64 {
        x
    }
    pub fn key_s64(x: u64) -> i64 {
        x as i64
    }
    pub fn key_f32(x: u64) -> f32 {
        f32::from_bits(x as u32)
    }
    pub fn key_f64(x: u64) -> f64 {
        f64::from_bits(x)
    }
}

/// [`compare`] of two values already read by their [`SetpKind`]: with `cmp` a constant,
/// one host comparison (the `u` forms and `Ne` written so that NaN answers as PTX says:
/// ordered operators false, unordered ones true; integers are never NaN).
#[inline(always)]
// Not `a != b`: that is true for NaN, and these forms are what PTX defines.
#[allow(
    clippy::eq_op,
    clippy::neg_cmp_op_on_partial_ord,
    clippy::double_comparisons
)]
pub fn plain_compare<T: PartialOrd + Copy>(cmp: Cmp, a: T, b: T) -> bool {
    match cmp {
        Cmp::Eq => a == b,
        Cmp::Ne => a < b || a > b,
        Cmp::Lt | Cmp::Lo => a < b,
        Cmp::Le | Cmp::Ls => a <= b,
        Cmp::Gt | Cmp::Hi => a > b,
        Cmp::Ge | Cmp::Hs => a >= b,
        Cmp::Num => a == a && b == b,
        Cmp::Nan => !(a == a && b == b),
        Cmp::Equ => !(a < b || a > b),
        Cmp::Neu => !(a == b),
        Cmp::Ltu => !(a >= b),
        Cmp::Leu => !(a > b),
        Cmp::Gtu => !(a <= b),
        Cmp::Geu => !(a < b),
    }
}

/// `a cmp b` for `setp`/`set`/`slct` (PTX ISA "Comparison and Selection Instructions").
/// Integers: `Eq..Ge` use the type's signedness (`.b` types compare as unsigned),
/// `Lo Ls Hi Hs` are always unsigned; the float-only operators treat integers as ordered.
/// Floats: ordered operators are false when either operand is NaN, the `u` forms true;
/// `Num`/`Nan` test orderedness; -0.0 == +0.0. `ftz` flushes subnormal inputs. Packed pairs
/// compare their low elements (lowering splits `.f16x2` comparisons).
#[inline]
pub fn compare(cmp: Cmp, ty: Ty, ftz: bool, a: u64, b: u64) -> bool {
    use std::cmp::Ordering::{Equal, Greater, Less};
    let ord = if let Some((fmt, _)) = float::fmt_of(ty) {
        let (a, b) = if ftz {
            (fmt.ftz(a & fmt.mask()), fmt.ftz(b & fmt.mask()))
        } else {
            (a, b)
        };
        soft::to_f64(fmt, a & fmt.mask()).partial_cmp(&soft::to_f64(fmt, b & fmt.mask()))
    } else {
        let unsigned = (a & ty.mask()).cmp(&(b & ty.mask()));
        match cmp {
            Cmp::Lo | Cmp::Ls | Cmp::Hi | Cmp::Hs => Some(unsigned),
            _ if ty.is_signed() => Some((ty.extend(a) as i64).cmp(&(ty.extend(b) as i64))),
            _ => Some(unsigned),
        }
    };
    let Some(o) = ord else {
        // Unordered: at least one NaN.
        return matches!(
            cmp,
            Cmp::Nan | Cmp::Equ | Cmp::Neu | Cmp::Ltu | Cmp::Leu | Cmp::Gtu | Cmp::Geu
        );
    };
    match cmp {
        Cmp::Eq | Cmp::Equ => o == Equal,
        Cmp::Ne | Cmp::Neu => o != Equal,
        Cmp::Lt | Cmp::Lo | Cmp::Ltu => o == Less,
        Cmp::Le | Cmp::Ls | Cmp::Leu => o != Greater,
        Cmp::Gt | Cmp::Hi | Cmp::Gtu => o == Greater,
        Cmp::Ge | Cmp::Hs | Cmp::Geu => o != Less,
        Cmp::Num => true,
        Cmp::Nan => false,
    }
}

/// Whether `cvt` treats `ty` as an integer of 8 to 64 bits (`.u .s .b`), which converts
/// to another such integer by extending (as the source's signedness says) and truncating.
#[inline]
pub fn is_plain_int(ty: Ty) -> bool {
    cvt::is_plain_int(ty)
}

/// `cvt.{rounding}{.ftz}{.sat}.dty.sty`. `rounding` is `None` when not written: int→int and
/// widening float conversions are exact, and where a rounding is needed round-to-nearest-even
/// is used for float results and round-toward-zero for float→int. Float→int always
/// saturates (NaN → 0).
#[inline]
pub fn cvt(dty: Ty, sty: Ty, rounding: Option<Rounding>, ftz: bool, sat: bool, a: u64) -> u64 {
    cvt::cvt(dty, sty, rounding, ftz, sat, a)
}

/// `testp.kind.ty` (PTX ISA "testp"): finite, infinite, number, notanumber, normal (not zero,
/// subnormal, infinite or NaN) and subnormal (nonzero with a zero exponent field). Non-float
/// types give false.
#[inline]
pub fn testp(kind: TestpKind, ty: Ty, a: u64) -> bool {
    let Some((fmt, _)) = float::fmt_of(ty) else {
        return false;
    };
    let a = a & fmt.mask();
    match kind {
        TestpKind::Finite => !fmt.is_nan(a) && !fmt.is_inf(a),
        TestpKind::Infinite => fmt.is_inf(a),
        TestpKind::Number => !fmt.is_nan(a),
        TestpKind::NotANumber => fmt.is_nan(a),
        TestpKind::Normal => fmt.is_normal(a),
        TestpKind::Subnormal => fmt.is_subnormal(a),
    }
}

/// The new memory value of an atomic (PTX ISA "atom"): `old op b`, or for `Cas`
/// `old == b ? c : old`. Float `add` rounds to nearest even; `atom.add.f32` also flushes
/// subnormal inputs and results to sign-preserving zero as PTX specifies (the `.f16`/`.bf16`
/// forms are `.noftz`, `.f64` has no flush); packed pairs add per element. `min`/`max` use the
/// type's signedness, or float `min`/`max` semantics. `inc`: `old >= b ? 0 : old+1`;
/// `dec`: `old == 0 || old > b ? b : old-1` (unsigned). The result is masked to `ty`.
#[inline]
pub fn atom(op: AtomOp, ty: Ty, old: u64, b: u64, c: u64) -> u64 {
    let mask = ty.mask();
    let (o, v) = (old & mask, b & mask);
    let float = float::fmt_of(ty);
    let r = match op {
        AtomOp::Add => match float {
            Some((fmt, pair)) => {
                let f = |x: u64, y: u64, _: u64| {
                    Some(if fmt == F32 {
                        fmt.ftz(float::add(fmt, fmt.ftz(x), fmt.ftz(y), Rounding::Nearest))
                    } else {
                        float::add(fmt, x, y, Rounding::Nearest)
                    })
                };
                if pair {
                    float::packed2(o, v, 0, f)
                } else {
                    f(o, v, 0)
                }
                .unwrap_or(0)
            }
            None => o.wrapping_add(v),
        },
        AtomOp::Min | AtomOp::Max => {
            let max = op == AtomOp::Max;
            match float {
                Some((fmt, pair)) => {
                    let f = |x: u64, y: u64, _: u64| Some(float::min_max(fmt, x, y, max));
                    if pair {
                        float::packed2(o, v, 0, f)
                    } else {
                        f(o, v, 0)
                    }
                    .unwrap_or(0)
                }
                None => {
                    let o_less = if ty.is_signed() {
                        (ty.extend(o) as i64) < (ty.extend(v) as i64)
                    } else {
                        o < v
                    };
                    if o_less != max {
                        o
                    } else {
                        v
                    }
                }
            }
        }
        AtomOp::Inc => {
            if o >= v {
                0
            } else {
                o + 1
            }
        }
        AtomOp::Dec => {
            if o == 0 || o > v {
                v
            } else {
                o - 1
            }
        }
        AtomOp::Exch => v,
        AtomOp::Cas => {
            if o == v {
                c
            } else {
                o
            }
        }
        AtomOp::And => o & v,
        AtomOp::Or => o | v,
        AtomOp::Xor => o ^ v,
    };
    r & mask
}

/// The value `set` writes for true/false in type `dty`: integers all ones / 0, floats
/// 1.0 / 0.0 (`set.f32` writes `0x3F800000`).
#[inline]
pub fn set_value(dty: Ty, value: bool) -> u64 {
    if !value {
        return 0;
    }
    match float::fmt_of(dty) {
        Some((fmt, false)) => fmt.one(),
        Some((fmt, true)) => fmt.one() << 16 | fmt.one(),
        None => dty.mask(),
    }
}
