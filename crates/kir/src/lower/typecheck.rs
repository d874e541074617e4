//! Type rules of PTX operands and instructions, as the PTX ISA states them (§5.4 "Type
//! Information for Instructions and Operands" and its subsection "Operand Size Exceeding
//! Instruction-Type Size"), checked while decoding so that invalid code is an error instead
//! of a run with wrong numbers.
//!
//! * Every instruction names the types it allows (`add` has no `.b32`, `shl` no `.s32`);
//!   the tables below are the ISA's, cut to what Switchyard decodes.
//! * An operand register agrees with the type the instruction gives it when both have the
//!   same size and: either is a bit-size type (`.bN` agrees with anything of N bits), both
//!   are integers (signed and unsigned agree), or both are the same float type. `.pred`
//!   agrees only with `.pred`.
//! * `ld`, `st` and `cvt` relax the size rule for their data operands ([`Rule::Relaxed`]):
//!   the register may be wider than the instruction type (a `.u8` loaded into a `.b32`),
//!   except that a float instruction type still needs a float register of exactly its size
//!   (or a bit-size register of at least its size).
//! * Integer immediates must fit the operand's type read as signed or unsigned
//!   (`-1` and `0xffffffff` are both a `.u32`); PTX assemblers wrap them silently, which
//!   hides typos, so Switchyard is stricter (docs/ptxas-differential.md). Integer literals
//!   are not floats, and a float literal fits only a float type or a bit-size type of its
//!   own width.

use crate::inst::Ty;

/// How an operand's register type must agree with the type the instruction gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Rule {
    /// Same size; bit-size agrees with any class, signed with unsigned.
    Exact,
    /// `ld`/`st`/`cvt` data operands: the register may be wider.
    Relaxed,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    Pred,
    Bit,
    Int,
    Float,
}

fn class(t: Ty) -> Class {
    use Ty::*;
    match t {
        Pred => Class::Pred,
        B8 | B16 | B32 | B64 | B128 => Class::Bit,
        U8 | U16 | U32 | U64 | S8 | S16 | S32 | S64 | U16x2 | S16x2 => Class::Int,
        F16 | F16x2 | Bf16 | Bf16x2 | F32 | F64 => Class::Float,
    }
}

/// The type's name as PTX writes it, without the dot (`f16x2`, `b32`).
pub(super) fn name(t: Ty) -> String {
    format!("{t:?}").to_lowercase()
}

/// Whether a register of type `reg` may be an operand that the instruction types `want`.
pub(super) fn conforms(reg: Ty, want: Ty, rule: Rule) -> bool {
    let (rc, wc) = (class(reg), class(want));
    if rc == Class::Pred || wc == Class::Pred {
        return reg == want;
    }
    let size_ok = match rule {
        Rule::Exact => reg.size() == want.size(),
        Rule::Relaxed => reg.size() >= want.size(),
    };
    if !size_ok {
        return false;
    }
    match (rc, wc) {
        (Class::Bit, _) | (_, Class::Bit) => true,
        (Class::Int, Class::Int) => true,
        // A float register needs exactly the float type, whatever the rule.
        (Class::Float, Class::Float) => reg == want,
        _ => false,
    }
}

/// What a register operand for `want` must be, for messages ("a 32-bit register").
pub(super) fn expected(want: Ty, rule: Rule) -> String {
    let bits = want.bits();
    let size = match rule {
        Rule::Exact => format!("{bits}-bit"),
        Rule::Relaxed => format!("at least {bits}-bit"),
    };
    match class(want) {
        Class::Pred => "a .pred register".into(),
        Class::Bit => format!("a {size} register (not .pred)"),
        Class::Int => format!("a {size} integer or bit-size register"),
        Class::Float => format!("a .{} or {bits}-bit bit-size register", name(want)),
    }
}

/// Why `reg` does not conform to `want`, worded for the message: only the width when the
/// classes agree ("a 32-bit register"), else the full requirement.
pub(super) fn mismatch(reg: Ty, want: Ty, rule: Rule) -> String {
    let classes_agree = match (class(reg), class(want)) {
        (Class::Pred, _) | (_, Class::Pred) | (_, Class::Float) => false,
        (Class::Bit, _) | (_, Class::Bit) | (Class::Int, Class::Int) => true,
        _ => false,
    };
    match (classes_agree, rule) {
        (true, Rule::Exact) => format!("a {}-bit register", want.bits()),
        (true, Rule::Relaxed) => format!("a register of at least {} bits", want.bits()),
        (false, _) => expected(want, rule),
    }
}

/// Whether the integer literal `v` fits the type `ty`, read as signed or unsigned.
pub(super) fn int_fits(v: i128, ty: Ty) -> bool {
    let bits = ty.bits().min(64);
    let lo = -(1i128 << (bits - 1));
    let hi = (1i128 << bits) - 1;
    (lo..=hi).contains(&v)
}

/// Instruction types, by family (the ISA's `.type = { ... }` lists).
pub(super) mod types {
    use crate::inst::Ty::{self, *};

    pub const INT16_64: &[Ty] = &[U16, U32, U64, S16, S32, S64];
    /// `add`, `sub`, `min`, `max`: integers (packed 16-bit pairs too) and floats.
    pub const ADD_MIN_MAX: &[Ty] = &[
        U16, U32, U64, S16, S32, S64, U16x2, S16x2, F32, F64, F16, F16x2, Bf16, Bf16x2,
    ];
    pub const SIGNED_AND_FLOATS: &[Ty] = &[S16, S32, S64, F32, F64, F16, F16x2, Bf16, Bf16x2];
    pub const FLOATS: &[Ty] = &[F32, F64, F16, F16x2, Bf16, Bf16x2];
    pub const F32_64: &[Ty] = &[F32, F64];
    pub const HALF_AND_F32: &[Ty] = &[F32, F16, F16x2, Bf16, Bf16x2];
    pub const LOGIC: &[Ty] = &[Pred, B16, B32, B64];
    pub const BITS16_64: &[Ty] = &[B16, B32, B64];
    pub const B32_64: &[Ty] = &[B32, B64];
    pub const INT32_64: &[Ty] = &[U32, U64, S32, S64];
    pub const INT32: &[Ty] = &[U32, S32];
    pub const MUL_WIDE: &[Ty] = &[U16, U32, S16, S32];
    pub const SHR: &[Ty] = &[B16, B32, B64, U16, U32, U64, S16, S32, S64];
    pub const MOV: &[Ty] = &[
        Pred, B16, B32, B64, B128, U16, U32, U64, S16, S32, S64, F32, F64,
    ];
    pub const SETP: &[Ty] = &[
        B16, B32, B64, U16, U32, U64, S16, S32, S64, F32, F64, F16, F16x2, Bf16, Bf16x2,
    ];
    pub const SELP: &[Ty] = &[B16, B32, B64, U16, U32, U64, S16, S32, S64, F32, F64];
    pub const SET_DST: &[Ty] = &[U32, S32, F32, U16, S16, F16, Bf16, F16x2, Bf16x2];
    pub const SET_SRC: &[Ty] = &[
        B16, B32, B64, U16, U32, U64, S16, S32, S64, F32, F64, F16, Bf16, F16x2, Bf16x2,
    ];
    pub const SLCT_C: &[Ty] = &[S32, F32];
    pub const CVT: &[Ty] = &[U8, U16, U32, U64, S8, S16, S32, S64, F16, Bf16, F32, F64];
    pub const CVTA: &[Ty] = &[U32, U64];
    pub const LD_ST: &[Ty] = &[
        B8, B16, B32, B64, B128, U8, U16, U32, U64, S8, S16, S32, S64, F32, F64,
    ];
    pub const PRED: &[Ty] = &[Pred];
    pub const ONLY_B32: &[Ty] = &[Ty::B32];
    pub const ONLY_U32: &[Ty] = &[Ty::U32];
    pub const PACK: &[Ty] = &[B32, Ty::B64, Ty::B128];
    pub const ATOM_ADD: &[Ty] = &[U32, S32, U64, F32, F64, F16, F16x2, Bf16, Bf16x2];
    pub const ATOM_MIN_MAX: &[Ty] = &[U32, S32, U64, S64, F16, F16x2, Bf16, Bf16x2];
    pub const ATOM_CAS: &[Ty] = &[B16, B32, B64];
}

/// `.u32, .s32` for messages.
pub(super) fn list(types: &[Ty]) -> String {
    types
        .iter()
        .map(|t| format!(".{}", name(*t)))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_size_types_agree_with_any_class_of_their_size() {
        assert!(conforms(Ty::B32, Ty::F32, Rule::Exact));
        assert!(conforms(Ty::F32, Ty::B32, Rule::Exact));
        assert!(conforms(Ty::U32, Ty::S32, Rule::Exact));
        assert!(!conforms(Ty::U32, Ty::F32, Rule::Exact));
        assert!(!conforms(Ty::F32, Ty::F64, Rule::Exact));
        assert!(!conforms(Ty::B64, Ty::B32, Rule::Exact));
        assert!(!conforms(Ty::Pred, Ty::B32, Rule::Exact));
        assert!(!conforms(Ty::B32, Ty::Pred, Rule::Exact));
    }

    #[test]
    fn relaxed_rule_allows_wider_registers_except_for_float_types() {
        assert!(conforms(Ty::B32, Ty::U8, Rule::Relaxed));
        assert!(conforms(Ty::U64, Ty::U32, Rule::Relaxed));
        assert!(conforms(Ty::B64, Ty::F32, Rule::Relaxed));
        assert!(!conforms(Ty::F64, Ty::F32, Rule::Relaxed));
        assert!(!conforms(Ty::U32, Ty::U64, Rule::Relaxed));
        assert!(!conforms(Ty::U32, Ty::F32, Rule::Relaxed));
        assert!(conforms(Ty::F32, Ty::B16, Rule::Relaxed));
    }

    #[test]
    fn immediates_fit_as_signed_or_unsigned() {
        assert!(int_fits(-1, Ty::U32));
        assert!(int_fits(0xffff_ffff, Ty::S32));
        assert!(!int_fits(0x1_0000_0000, Ty::U32));
        assert!(!int_fits(-0x8000_0001, Ty::S32));
        assert!(int_fits(-128, Ty::S8));
        assert!(!int_fits(256, Ty::B8));
        assert!(int_fits(u64::MAX as i128, Ty::U64));
        assert!(int_fits(i64::MIN as i128, Ty::S64));
    }
}
