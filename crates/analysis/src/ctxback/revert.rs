//! Instruction reverting (papers/ji-ctxback §III-C, Algorithm 2, lines 1–2 and 20): the table
//! of reversible operations and the construction of their reverting instructions.
//!
//! An instruction `r' = op(r, R)` that overwrites one of its own operands `r` (the *shared*
//! register) is reversible when an operator `op⁻¹` gives back `r = op⁻¹(r', R)` **exactly**,
//! for every value of `r` and `R`, under Switchyard's per-lane semantics (`gpu::alu`): results
//! are the low `ty.bits()` of the exact result, zero-extended. Only bijections of `r` for a
//! fixed `R` qualify:
//!
//! | instruction (types)                                   | reverting instruction        |
//! |-------------------------------------------------------|------------------------------|
//! | `add d, d, x` / `add d, x, d` (integer, no `.sat`)    | `sub d, d, x`                |
//! | `sub d, d, x` (integer, no `.sat`)                    | `add d, d, x`                |
//! | `sub d, x, d` (integer, no `.sat`)                    | `sub d, x, d` (self-inverse) |
//! | `xor d, d, x` / `xor d, x, d` (bit types, `.pred`)    | `xor d, d, x`                |
//! | `not d, d` (bit types, `.pred`), `neg d, d` (integer) | the same instruction         |
//! | `mul.lo d, d, c` / `mul.lo d, c, d`, `c` an odd immediate | `mul.lo d, d, c⁻¹ mod 2ⁿ` |
//!
//! Deliberately **not** reversible: any float operation (rounding loses bits, and NaNs are
//! canonicalised), `.sat` adds (clamping), shifts (bits shifted out are lost), `mul` by an
//! even or non-constant factor, `and`/`or`, `mov` and everything that does not read its own
//! destination. An instruction whose two operands are both the shared register (`add d, d,
//! d`) is not reversible either: the other operand is gone too.
//!
//! Integer types narrower than 32 bits are excluded: such an instruction reads the low bits of
//! its register and zero-extends its result, so the bits above the type would be lost. For
//! the same reason a 32-bit instruction cannot revert a register that held a 64-bit value
//! before it; the caller checks that with [`Revert::bits`] (see `flashback.rs`).
//!
//! A guarded instruction `@p op d, d, x` is reversible by the guarded reverting instruction
//! `@p op⁻¹ d, d, x`: lanes where `p` is false were left untouched by both.

use kir::inst::{ArithOp, Guard, Op, Operand};
use kir::{Inst, Reg, Ty};

/// How to revert one instruction.
#[derive(Clone, Debug, PartialEq)]
pub struct Revert {
    /// The register the instruction overwrote and the reverting instruction recovers.
    pub shared: Reg,
    /// The other registers the reverting instruction reads (the other operand and the guard),
    /// which must hold the values they had when the original instruction executed.
    pub operands: Vec<Reg>,
    /// The reverting instruction: writes `shared`, reads `shared` and `operands`.
    pub inst: Inst,
    /// Width in bits of the operation (the reverted value must fit: see the module docs).
    pub bits: u32,
}

/// The multiplicative inverse of an odd `a` modulo 2⁶⁴ (Newton's iteration: each step doubles
/// the number of correct low bits, starting from 3 correct bits since `a·a ≡ 1 mod 8`).
pub fn odd_inverse(a: u64) -> u64 {
    debug_assert!(a & 1 == 1);
    let mut x = a;
    for _ in 0..5 {
        x = x.wrapping_mul(2u64.wrapping_sub(a.wrapping_mul(x)));
    }
    x
}

fn is_int(ty: Ty) -> bool {
    !ty.is_float() && ty != Ty::Pred && ty != Ty::B128 && ty.bits() >= 32
}

fn is_bits(ty: Ty) -> bool {
    ty == Ty::Pred || (!ty.is_float() && ty != Ty::B128 && ty.bits() >= 32)
}

fn regs_of(ops: &[Operand], guard: Option<Guard>) -> Vec<Reg> {
    let mut v: Vec<Reg> = ops
        .iter()
        .filter_map(|o| match *o {
            Operand::Reg(r) | Operand::NotReg(r) => Some(r),
            _ => None,
        })
        .chain(guard.map(|g| g.reg))
        .collect();
    v.sort();
    v.dedup();
    v
}

fn arith(op: ArithOp, ty: Ty, mode: kir::inst::FloatMode, like: &Inst, srcs: &[Operand]) -> Inst {
    let mut i = Inst::new(Op::Arith { op, ty, mode }, like.span);
    i.guard = like.guard;
    i.dsts[0] = like.dsts[0];
    i.n_dsts = 1;
    i.srcs[..srcs.len()].copy_from_slice(srcs);
    i.n_srcs = srcs.len() as u8;
    i
}

/// The reverting instruction of `inst`, if it is in the table above.
pub fn revert_of(inst: &Inst) -> Option<Revert> {
    let Op::Arith { op, ty, mode } = inst.op else {
        return None;
    };
    if inst.n_dsts != 1 {
        return None;
    }
    let d = inst.dsts[0]?;
    let s = inst.srcs();
    let is_d = |o: &Operand| *o == Operand::Reg(d);
    // The operand that is not the shared register, when exactly one of the two is.
    let other = |s: &[Operand]| -> Option<(Operand, bool)> {
        match (is_d(&s[0]), is_d(&s[1])) {
            (true, false) if s[1] != Operand::NotReg(d) => Some((s[1], true)),
            (false, true) if s[0] != Operand::NotReg(d) => Some((s[0], false)),
            _ => None,
        }
    };
    let shared = Operand::Reg(d);
    let (inverse, others) = match op {
        ArithOp::Add if is_int(ty) && !mode.sat => {
            let (x, _) = other(s)?;
            (arith(ArithOp::Sub, ty, mode, inst, &[shared, x]), vec![x])
        }
        ArithOp::Sub if is_int(ty) && !mode.sat => {
            let (x, d_first) = other(s)?;
            if d_first {
                (arith(ArithOp::Add, ty, mode, inst, &[shared, x]), vec![x])
            } else {
                (arith(ArithOp::Sub, ty, mode, inst, &[x, shared]), vec![x])
            }
        }
        ArithOp::Xor if is_bits(ty) => {
            let (x, _) = other(s)?;
            (arith(ArithOp::Xor, ty, mode, inst, &[shared, x]), vec![x])
        }
        ArithOp::Not if is_bits(ty) && is_d(&s[0]) => {
            (arith(ArithOp::Not, ty, mode, inst, &[shared]), vec![])
        }
        ArithOp::Neg if is_int(ty) && is_d(&s[0]) => {
            (arith(ArithOp::Neg, ty, mode, inst, &[shared]), vec![])
        }
        ArithOp::MulLo if is_int(ty) => {
            let (x, _) = other(s)?;
            let Operand::Imm(c) = x else {
                return None;
            };
            if c & 1 == 0 {
                return None;
            }
            let inv = Operand::Imm(odd_inverse(c) & ty.mask());
            (
                arith(ArithOp::MulLo, ty, mode, inst, &[shared, inv]),
                vec![],
            )
        }
        _ => return None,
    };
    Some(Revert {
        shared: d,
        operands: regs_of(&others, inst.guard),
        inst: inverse,
        bits: ty.bits(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odd_inverse_is_exact() {
        for a in [1u64, 3, 5, 7, 0xdead_beef, u64::MAX, 0x8000_0000_0000_0001] {
            assert_eq!(a.wrapping_mul(odd_inverse(a)), 1, "{a:#x}");
            let a32 = a & 0xffff_ffff | 1;
            assert_eq!(
                (a32.wrapping_mul(odd_inverse(a32) & 0xffff_ffff)) & 0xffff_ffff,
                1
            );
        }
    }
}
