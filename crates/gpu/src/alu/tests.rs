//! Unit tests with expectations derived by hand from the PTX ISA and IEEE 754 rules (the
//! derivation is in the comment next to each non-obvious value).

use super::*;
use kir::inst::PrmtMode;

const RN: Rounding = Rounding::Nearest;
const RZ: Rounding = Rounding::Zero;
const RM: Rounding = Rounding::Down;
const RP: Rounding = Rounding::Up;
const ALL: [Rounding; 4] = [RN, RZ, RM, RP];

fn m(r: Rounding) -> FloatMode {
    FloatMode {
        rounding: r,
        ..FloatMode::default()
    }
}
fn ftz() -> FloatMode {
    FloatMode {
        ftz: true,
        ..FloatMode::default()
    }
}
fn sat() -> FloatMode {
    FloatMode {
        sat: true,
        ..FloatMode::default()
    }
}
fn approx() -> FloatMode {
    FloatMode {
        approx: true,
        ..FloatMode::default()
    }
}

fn i(op: ArithOp, ty: Ty, a: u64, b: u64) -> u64 {
    arith(op, ty, FloatMode::default(), a, b, 0, 0).unwrap()
}
fn i3(op: ArithOp, ty: Ty, a: u64, b: u64, c: u64) -> u64 {
    arith(op, ty, FloatMode::default(), a, b, c, 0).unwrap()
}
fn s32(v: i32) -> u64 {
    v as u32 as u64
}
fn f(x: f32) -> u64 {
    x.to_bits() as u64
}
fn d(x: f64) -> u64 {
    x.to_bits()
}
fn f32r(op: ArithOp, r: Rounding, a: u64, b: u64, c: u64) -> u64 {
    arith(op, Ty::F32, m(r), a, b, c, 0).unwrap()
}
fn f64r(op: ArithOp, r: Rounding, a: u64, b: u64, c: u64) -> u64 {
    arith(op, Ty::F64, m(r), a, b, c, 0).unwrap()
}
/// 2^e as an f32 bit pattern (normal range).
fn p2(e: i32) -> u64 {
    (((e + 127) as u64) << 23) & 0x7F80_0000
}

// ---------------------------------------------------------------- integers

#[test]
fn add_sub_wrap_and_garbage_high_bits() {
    assert_eq!(i(ArithOp::Add, Ty::U32, 0xFFFF_FFFF, 1), 0);
    // Bits above the type are ignored, and the result is zero-extended.
    assert_eq!(
        i(
            ArithOp::Add,
            Ty::S32,
            0xDEAD_BEEF_0000_0001,
            0xFFFF_FFFF_FFFF_FFFE
        ),
        0xFFFF_FFFF
    );
    assert_eq!(i(ArithOp::Sub, Ty::S32, 0, 1), 0xFFFF_FFFF);
    assert_eq!(i(ArithOp::Add, Ty::U16, 0xFFFF, 2), 1);
    assert_eq!(i(ArithOp::Add, Ty::U64, u64::MAX, 1), 0);
}

#[test]
fn add_sub_sat_s32() {
    let sat = FloatMode {
        sat: true,
        ..FloatMode::default()
    };
    let add = |a, b| arith(ArithOp::Add, Ty::S32, sat, s32(a), s32(b), 0, 0).unwrap();
    let sub = |a, b| arith(ArithOp::Sub, Ty::S32, sat, s32(a), s32(b), 0, 0).unwrap();
    assert_eq!(add(i32::MAX, 1), s32(i32::MAX));
    assert_eq!(add(i32::MIN, -1), s32(i32::MIN));
    assert_eq!(add(-5, 3), s32(-2));
    assert_eq!(sub(i32::MIN, 1), s32(i32::MIN));
    assert_eq!(sub(i32::MAX, -1), s32(i32::MAX));
}

#[test]
fn mul_hi_and_wide() {
    // -2 * 3 = -6: the 64-bit product is 0xFFFF_FFFF_FFFF_FFFA, high half all ones.
    assert_eq!(i(ArithOp::MulHi, Ty::S32, s32(-2), 3), 0xFFFF_FFFF);
    assert_eq!(i(ArithOp::MulLo, Ty::S32, s32(-2), 3), s32(-6));
    // 0xFFFFFFFF^2 = 0xFFFFFFFE_00000001.
    assert_eq!(
        i(ArithOp::MulHi, Ty::U32, 0xFFFF_FFFF, 0xFFFF_FFFF),
        0xFFFF_FFFE
    );
    // Signed view of the same bits: (-1)*(-1) = 1, high half 0.
    assert_eq!(i(ArithOp::MulHi, Ty::S32, 0xFFFF_FFFF, 0xFFFF_FFFF), 0);
    assert_eq!(i(ArithOp::MulHi, Ty::S64, u64::MAX, 1), u64::MAX);
    assert_eq!(i(ArithOp::MulHi, Ty::U64, u64::MAX, 2), 1);
    assert_eq!(
        i(ArithOp::MulHi, Ty::S64, i64::MIN as u64, i64::MIN as u64),
        1 << 62
    );
    assert_eq!(i(ArithOp::MulWide, Ty::S32, s32(-2), 3), (-6i64) as u64);
    assert_eq!(
        i(
            ArithOp::MulWide,
            Ty::S32,
            0x1234_5678_FFFF_FFFF,
            0xFFFF_FFFF
        ),
        1
    );
    assert_eq!(
        i(ArithOp::MulWide, Ty::U32, 0xFFFF_FFFF, 0xFFFF_FFFF),
        0xFFFF_FFFE_0000_0001
    );
    assert_eq!(i(ArithOp::MulWide, Ty::U16, 0xFFFF, 0xFFFF), 0xFFFE_0001);
    assert_eq!(i(ArithOp::MulWide, Ty::S16, 0xFFFF, 2), 0xFFFF_FFFE);
    assert_eq!(i3(ArithOp::MadWide, Ty::S32, s32(-2), 3, 10), 4);
    assert_eq!(i3(ArithOp::MadHi, Ty::U32, 0xFFFF_FFFF, 0xFFFF_FFFF, 2), 0);
    assert_eq!(i3(ArithOp::MadLo, Ty::U32, 0x10000, 0x10000, 5), 5);
    assert!(matches!(
        arith(ArithOp::MulWide, Ty::U64, FloatMode::default(), 1, 1, 0, 0),
        Err(AluError::Unsupported {
            op: ArithOp::MulWide,
            ty: Ty::U64
        })
    ));
}

#[test]
fn mad_hi_sat_s32() {
    let sat = FloatMode {
        sat: true,
        ..FloatMode::default()
    };
    // hi(0x40000000 * 4) = 1; 1 + MAX saturates.
    let r = arith(
        ArithOp::MadHi,
        Ty::S32,
        sat,
        0x4000_0000,
        4,
        s32(i32::MAX),
        0,
    )
    .unwrap();
    assert_eq!(r, s32(i32::MAX));
}

#[test]
fn mul24() {
    // The upper byte of each source is ignored: 2 * 3.
    assert_eq!(i(ArithOp::Mul24Lo, Ty::U32, 0xFF00_0002, 3), 6);
    // 0xFFFFFF^2 = 0xFFFF_FE00_0001; bits 47..16 = 0xFFFF_FE00.
    assert_eq!(
        i(ArithOp::Mul24Hi, Ty::U32, 0xFF_FFFF, 0xFF_FFFF),
        0xFFFF_FE00
    );
    assert_eq!(
        i(ArithOp::Mul24Lo, Ty::U32, 0xFF_FFFF, 0xFF_FFFF),
        0xFE00_0001
    );
    // Signed: 0xFFFFFF is -1 in 24 bits.
    assert_eq!(i(ArithOp::Mul24Lo, Ty::S32, 0x00FF_FFFF, 2), s32(-2));
    assert_eq!(i(ArithOp::Mul24Hi, Ty::S32, 0x00FF_FFFF, 2), 0xFFFF_FFFF);
    // (-2^23)^2 = 2^46; >> 16 = 2^30.
    assert_eq!(
        i(ArithOp::Mul24Hi, Ty::S32, 0x80_0000, 0x80_0000),
        0x4000_0000
    );
    assert_eq!(i3(ArithOp::Mad24Lo, Ty::U32, 4, 5, 6), 26);
    assert_eq!(
        i3(ArithOp::Mad24Hi, Ty::U32, 0xFF_FFFF, 0xFF_FFFF, 0x100),
        0xFFFF_FF00
    );
}

#[test]
fn div_rem_edge_cases() {
    assert_eq!(i(ArithOp::Div, Ty::U32, 7, 0), 0xFFFF_FFFF);
    assert_eq!(i(ArithOp::Rem, Ty::U32, 7, 0), 7);
    assert_eq!(i(ArithOp::Div, Ty::S32, 7, 0), 0xFFFF_FFFF);
    assert_eq!(i(ArithOp::Rem, Ty::S32, s32(-7), 0), s32(-7));
    assert_eq!(i(ArithOp::Div, Ty::U64, 7, 0), u64::MAX);
    assert_eq!(
        i(ArithOp::Div, Ty::S32, s32(i32::MIN), s32(-1)),
        0x8000_0000
    );
    assert_eq!(i(ArithOp::Rem, Ty::S32, s32(i32::MIN), s32(-1)), 0);
    assert_eq!(
        i(ArithOp::Div, Ty::S64, i64::MIN as u64, u64::MAX),
        i64::MIN as u64
    );
    assert_eq!(i(ArithOp::Rem, Ty::S64, i64::MIN as u64, u64::MAX), 0);
    // Truncation toward zero; remainder takes the dividend's sign.
    assert_eq!(i(ArithOp::Div, Ty::S32, s32(-7), 2), s32(-3));
    assert_eq!(i(ArithOp::Rem, Ty::S32, s32(-7), 2), s32(-1));
    assert_eq!(i(ArithOp::Rem, Ty::S32, 7, s32(-2)), 1);
    assert_eq!(i(ArithOp::Div, Ty::S16, 0x8000, 0xFFFF), 0x8000);
    assert_eq!(i(ArithOp::Div, Ty::U32, 0xFFFF_FFFF, 2), 0x7FFF_FFFF);
}

#[test]
fn min_max_abs_neg() {
    assert_eq!(i(ArithOp::Min, Ty::S32, s32(-1), 1), s32(-1));
    assert_eq!(i(ArithOp::Min, Ty::U32, s32(-1), 1), 1);
    assert_eq!(i(ArithOp::Max, Ty::S64, (-5i64) as u64, 3), 3);
    assert_eq!(i(ArithOp::Max, Ty::U16, 0xFFFF, 3), 0xFFFF);
    assert_eq!(i(ArithOp::Abs, Ty::S32, s32(i32::MIN), 0), 0x8000_0000);
    assert_eq!(i(ArithOp::Abs, Ty::S32, s32(-5), 0), 5);
    assert_eq!(i(ArithOp::Abs, Ty::S16, 0xFFFB, 0), 5);
    assert_eq!(i(ArithOp::Neg, Ty::S32, 5, 0), 0xFFFF_FFFB);
    assert_eq!(i(ArithOp::Neg, Ty::S32, s32(i32::MIN), 0), 0x8000_0000);
}

#[test]
fn logic_and_pred() {
    assert_eq!(i(ArithOp::And, Ty::Pred, 1, 1), 1);
    assert_eq!(i(ArithOp::And, Ty::Pred, 1, 0), 0);
    assert_eq!(i(ArithOp::Or, Ty::Pred, 0, 1), 1);
    assert_eq!(i(ArithOp::Xor, Ty::Pred, 1, 1), 0);
    assert_eq!(i(ArithOp::Not, Ty::Pred, 1, 0), 0);
    assert_eq!(i(ArithOp::Not, Ty::Pred, 0, 0), 1);
    assert_eq!(i(ArithOp::Not, Ty::B32, 0, 0), 0xFFFF_FFFF);
    assert_eq!(i(ArithOp::Not, Ty::B16, 0x00FF, 0), 0xFF00);
    assert_eq!(i(ArithOp::Xor, Ty::B64, u64::MAX, 1), u64::MAX - 1);
    assert_eq!(i(ArithOp::CNot, Ty::B32, 0, 0), 1);
    assert_eq!(i(ArithOp::CNot, Ty::B32, 5, 0), 0);
    // Only the low 32 bits count: 0x1_0000_0000 is zero as a b32.
    assert_eq!(i(ArithOp::CNot, Ty::B32, 0x1_0000_0000, 0), 1);
}

#[test]
fn shifts() {
    assert_eq!(i(ArithOp::Shl, Ty::B32, 1, 31), 0x8000_0000);
    assert_eq!(i(ArithOp::Shl, Ty::B32, 1, 32), 0);
    assert_eq!(i(ArithOp::Shl, Ty::B32, 1, 0xFFFF_FFFF), 0);
    // The amount is the low 32 bits of b: 0x1_0000_0001 shifts by 1.
    assert_eq!(i(ArithOp::Shl, Ty::B32, 1, 0x1_0000_0001), 2);
    assert_eq!(i(ArithOp::Shl, Ty::B64, 1, 63), 1 << 63);
    assert_eq!(i(ArithOp::Shl, Ty::B64, 1, 64), 0);
    assert_eq!(i(ArithOp::Shr, Ty::S32, 0x8000_0000, 4), 0xF800_0000);
    assert_eq!(i(ArithOp::Shr, Ty::S32, 0x8000_0000, 100), 0xFFFF_FFFF);
    assert_eq!(i(ArithOp::Shr, Ty::S32, 0x7000_0000, 100), 0);
    assert_eq!(i(ArithOp::Shr, Ty::U32, 0x8000_0000, 31), 1);
    assert_eq!(i(ArithOp::Shr, Ty::U32, 0x8000_0000, 32), 0);
    assert_eq!(i(ArithOp::Shr, Ty::B32, 0x8000_0000, 4), 0x0800_0000);
    assert_eq!(i(ArithOp::Shr, Ty::S16, 0x8000, 1), 0xC000);
    assert_eq!(i(ArithOp::Shr, Ty::S64, 1 << 63, 64), u64::MAX);
    assert_eq!(i(ArithOp::Shr, Ty::U64, 1 << 63, 64), 0);
}

#[test]
fn popc_clz_brev() {
    assert_eq!(i(ArithOp::Clz, Ty::B32, 0, 0), 32);
    assert_eq!(i(ArithOp::Clz, Ty::B32, 1, 0), 31);
    assert_eq!(i(ArithOp::Clz, Ty::B32, 0xFFFF_FFFF_0000_0000, 0), 32);
    assert_eq!(i(ArithOp::Clz, Ty::B64, 0, 0), 64);
    assert_eq!(i(ArithOp::Clz, Ty::B64, 1 << 40, 0), 23);
    assert_eq!(i(ArithOp::Popc, Ty::B32, 0xFFFF_FFFF, 0), 32);
    assert_eq!(i(ArithOp::Popc, Ty::B32, 0xF0F0_0000_0000_0001, 0), 1);
    assert_eq!(i(ArithOp::Popc, Ty::B64, u64::MAX, 0), 64);
    assert_eq!(i(ArithOp::Brev, Ty::B32, 1, 0), 0x8000_0000);
    assert_eq!(i(ArithOp::Brev, Ty::B32, 0x0000_00F1, 0), 0x8F00_0000);
    assert_eq!(i(ArithOp::Brev, Ty::B64, 1, 0), 1 << 63);
    assert!(matches!(
        arith(ArithOp::Popc, Ty::F32, FloatMode::default(), 0, 0, 0, 0),
        Err(AluError::Unsupported { .. })
    ));
}

#[test]
fn bfe_cases() {
    let bfe = |ty, a, pos, len| i3(ArithOp::Bfe, ty, a, pos, len);
    assert_eq!(bfe(Ty::U32, 0x1234_5678, 4, 8), 0x67);
    // Field 0xF: its top bit is set, so the signed form sign-extends.
    assert_eq!(bfe(Ty::S32, 0x0000_00F0, 4, 4), 0xFFFF_FFFF);
    assert_eq!(bfe(Ty::S32, 0x0000_0070, 4, 4), 7);
    assert_eq!(bfe(Ty::U32, 0x0000_00F0, 4, 4), 0xF);
    // len = 0: zero for both.
    assert_eq!(bfe(Ty::S32, 0xFFFF_FFFF, 4, 0), 0);
    // pos beyond the msb: every bit is sbit = a[min(pos+len-1, 31)] = a[31].
    assert_eq!(bfe(Ty::S32, 0x8000_0000, 40, 4), 0xFFFF_FFFF);
    assert_eq!(bfe(Ty::S32, 0x7FFF_FFFF, 40, 4), 0);
    assert_eq!(bfe(Ty::U32, 0x8000_0000, 40, 4), 0);
    // Field clipped at the msb: bits 28..31 taken, the rest are sbit.
    assert_eq!(bfe(Ty::U32, 0xF000_0000, 28, 8), 0xF);
    assert_eq!(bfe(Ty::S32, 0xF000_0000, 28, 8), 0xFFFF_FFFF);
    // pos and len use only their low 8 bits: 0x104 is 4.
    assert_eq!(bfe(Ty::U32, 0x1234_5678, 0x104, 0x104), 0x7);
    assert_eq!(bfe(Ty::U64, 0xABCD_0000_0000_0000, 48, 16), 0xABCD);
    assert_eq!(
        bfe(Ty::S64, 0xABCD_0000_0000_0000, 48, 16),
        0xFFFF_FFFF_FFFF_ABCD
    );
    assert_eq!(bfe(Ty::S64, 0x8000_0000, 31, 1), u64::MAX);
    assert_eq!(bfe(Ty::U64, u64::MAX, 0, 64), u64::MAX);
}

#[test]
fn bfi_cases() {
    let bfi =
        |ty, a, b, pos, len| arith(ArithOp::Bfi, ty, FloatMode::default(), a, b, pos, len).unwrap();
    assert_eq!(bfi(Ty::B32, 0xF, 0, 4, 4), 0xF0);
    assert_eq!(bfi(Ty::B32, 0xA, 0xFFFF_FFFF, 8, 4), 0xFFFF_FAFF);
    // Only bits that fit below the msb are inserted.
    assert_eq!(bfi(Ty::B32, 0xFF, 0, 30, 8), 0xC000_0000);
    // pos beyond the width or len = 0: b unchanged.
    assert_eq!(bfi(Ty::B32, 0xFF, 0x1234, 32, 8), 0x1234);
    assert_eq!(bfi(Ty::B32, 0xFF, 0x1234, 0, 0), 0x1234);
    assert_eq!(bfi(Ty::B64, 0xFFFF, 0, 56, 16), 0xFF00_0000_0000_0000);
    assert_eq!(bfi(Ty::B64, u64::MAX, 0, 0, 64), u64::MAX);
}

#[test]
fn prmt_generic_and_modes() {
    let p = |mode, a, b, c| i3(ArithOp::Prmt(mode), Ty::B32, a, b, c);
    // Byte k of {b, a} holds k.
    let (a, b) = (0x0302_0100, 0x0706_0504);
    assert_eq!(p(PrmtMode::Generic, a, b, 0x3210), 0x0302_0100);
    assert_eq!(p(PrmtMode::Generic, a, b, 0x7654), 0x0706_0504);
    assert_eq!(p(PrmtMode::Generic, a, b, 0x0123), 0x0001_0203);
    assert_eq!(p(PrmtMode::Generic, a, b, 0x4444), 0x0404_0404);
    // Sign replication: byte0=0x7F, byte1=0x80; selectors (byte3..0) 9,8,1,0.
    assert_eq!(p(PrmtMode::Generic, 0x0000_807F, 0, 0x9810), 0xFF00_807F);
    // Modes, from the PTX table (c[1:0] picks the row).
    assert_eq!(p(PrmtMode::F4e, a, b, 1), 0x0403_0201);
    assert_eq!(p(PrmtMode::F4e, a, b, 3), 0x0605_0403);
    assert_eq!(p(PrmtMode::B4e, a, b, 0), 0x0506_0700);
    assert_eq!(p(PrmtMode::B4e, a, b, 3), 0x0001_0203);
    assert_eq!(p(PrmtMode::Rc8, a, b, 2), 0x0202_0202);
    assert_eq!(p(PrmtMode::Ecl, a, b, 1), 0x0302_0101);
    assert_eq!(p(PrmtMode::Ecr, a, b, 2), 0x0202_0100);
    assert_eq!(p(PrmtMode::Rc16, a, b, 1), 0x0302_0302);
    assert_eq!(p(PrmtMode::Rc16, a, b, 0x6), 0x0100_0100);
}

#[test]
fn sad() {
    assert_eq!(i3(ArithOp::Sad, Ty::U32, 3, 10, 1), 8);
    assert_eq!(i3(ArithOp::Sad, Ty::S32, s32(-3), 4, 0), 7);
    // Unsigned view of -3 is huge: |0xFFFFFFFD - 4| = 0xFFFFFFF9.
    assert_eq!(i3(ArithOp::Sad, Ty::U32, s32(-3), 4, 0), 0xFFFF_FFF9);
}

#[test]
fn float_ops_on_int_types_are_unsupported() {
    assert!(matches!(
        arith(ArithOp::Sin, Ty::S32, FloatMode::default(), 0, 0, 0, 0),
        Err(AluError::Unsupported {
            op: ArithOp::Sin,
            ty: Ty::S32
        })
    ));
    assert!(arith(ArithOp::Sqrt, Ty::U64, FloatMode::default(), 0, 0, 0, 0).is_err());
    assert!(arith(ArithOp::Add, Ty::B128, FloatMode::default(), 0, 0, 0, 0).is_err());
    assert!(arith(ArithOp::Bfe, Ty::F64, FloatMode::default(), 0, 0, 0, 0).is_err());
}

// ---------------------------------------------------------------- float rounding

#[test]
fn f32_add_directed() {
    // 1 + 2^-30: the f32 ulp at 1 is 2^-23, so the exact sum lies strictly between 1 and
    // 1 + 2^-23, much closer to 1.
    let (one, tiny) = (f(1.0), p2(-30));
    assert_eq!(f32r(ArithOp::Add, RN, one, tiny, 0), 0x3F80_0000);
    assert_eq!(f32r(ArithOp::Add, RZ, one, tiny, 0), 0x3F80_0000);
    assert_eq!(f32r(ArithOp::Add, RM, one, tiny, 0), 0x3F80_0000);
    assert_eq!(f32r(ArithOp::Add, RP, one, tiny, 0), 0x3F80_0001);
    // Negated: -1 - 2^-30.
    let (mone, mtiny) = (f(-1.0), p2(-30) | 0x8000_0000);
    assert_eq!(f32r(ArithOp::Add, RN, mone, mtiny, 0), 0xBF80_0000);
    assert_eq!(f32r(ArithOp::Add, RZ, mone, mtiny, 0), 0xBF80_0000);
    assert_eq!(f32r(ArithOp::Add, RM, mone, mtiny, 0), 0xBF80_0001);
    assert_eq!(f32r(ArithOp::Add, RP, mone, mtiny, 0), 0xBF80_0000);
    // Sub: 1 - 2^-30 lies between 1 - 2^-24 (0x3F7FFFFF) and 1.
    assert_eq!(f32r(ArithOp::Sub, RZ, one, tiny, 0), 0x3F7F_FFFF);
    assert_eq!(f32r(ArithOp::Sub, RM, one, tiny, 0), 0x3F7F_FFFF);
    assert_eq!(f32r(ArithOp::Sub, RP, one, tiny, 0), 0x3F80_0000);
    assert_eq!(f32r(ArithOp::Sub, RN, one, tiny, 0), 0x3F80_0000);
    // Ties: 1 + 2^-24 is halfway between 1 (even) and 1 + 2^-23 → 1.
    assert_eq!(f32r(ArithOp::Add, RN, one, p2(-24), 0), 0x3F80_0000);
    // 1 + 2^-23 + 2^-24 is halfway between 0x3F800001 (odd) and 0x3F800002 → 0x3F800002.
    assert_eq!(f32r(ArithOp::Add, RN, 0x3F80_0001, p2(-24), 0), 0x3F80_0002);
    // Exact results are unaffected by the mode.
    for r in ALL {
        assert_eq!(f32r(ArithOp::Add, r, f(1.5), f(2.25), 0), f(3.75));
    }
}

#[test]
fn exact_zero_sign_depends_on_mode() {
    // IEEE 754 §6.3: x - x is +0 except when rounding toward -inf.
    for r in [RN, RZ, RP] {
        assert_eq!(f32r(ArithOp::Sub, r, f(1.0), f(1.0), 0), 0);
        assert_eq!(f64r(ArithOp::Add, r, d(2.0), d(-2.0), 0), 0);
    }
    assert_eq!(f32r(ArithOp::Sub, RM, f(1.0), f(1.0), 0), 0x8000_0000);
    assert_eq!(f64r(ArithOp::Add, RM, d(2.0), d(-2.0), 0), 1 << 63);
    // -0 + -0 = -0 in every mode; +0 + -0 = +0 except rm.
    for r in ALL {
        assert_eq!(
            f32r(ArithOp::Add, r, 0x8000_0000, 0x8000_0000, 0),
            0x8000_0000
        );
    }
    assert_eq!(f32r(ArithOp::Add, RM, 0, 0x8000_0000, 0), 0x8000_0000);
    assert_eq!(f32r(ArithOp::Add, RP, 0, 0x8000_0000, 0), 0);
}

#[test]
fn f32_mul_directed() {
    // (1 + 2^-23)^2 = 1 + 2^-22 + 2^-46: between 0x3F800002 and 0x3F800003, very close to
    // the former.
    let a = 0x3F80_0001;
    assert_eq!(f32r(ArithOp::Mul, RN, a, a, 0), 0x3F80_0002);
    assert_eq!(f32r(ArithOp::Mul, RZ, a, a, 0), 0x3F80_0002);
    assert_eq!(f32r(ArithOp::Mul, RM, a, a, 0), 0x3F80_0002);
    assert_eq!(f32r(ArithOp::Mul, RP, a, a, 0), 0x3F80_0003);
    // Negative product: rm moves away from zero.
    assert_eq!(f32r(ArithOp::Mul, RM, a, a | 0x8000_0000, 0), 0xBF80_0003);
    assert_eq!(f32r(ArithOp::Mul, RP, a, a | 0x8000_0000, 0), 0xBF80_0002);
    assert_eq!(f32r(ArithOp::Mul, RZ, a, a | 0x8000_0000, 0), 0xBF80_0002);
}

#[test]
fn f32_fma_is_fused_and_directed() {
    // (1 + 2^-12)^2 - 1 = 2^-11 + 2^-24 exactly (13 significant bits, representable:
    // exponent -11 → biased 116, fraction 2^-13 · 2^23 = 0x400). A separate multiply would
    // round the product's tie 1 + 2^-11 + 2^-24 to 1 + 2^-11 and give 2^-11 = 0x3A000000.
    let a = 0x3F80_0800;
    assert_eq!(f32r(ArithOp::Fma, RN, a, a, f(-1.0)), 0x3A00_0400);
    // (1 + 2^-23)^2 - 1 = 2^-22 + 2^-46: 25 significant bits, the ulp at 2^-22 is 2^-45, so
    // 2^-46 is exactly half an ulp: rn ties to even (0x34800000), rp goes up.
    let b = 0x3F80_0001;
    assert_eq!(f32r(ArithOp::Fma, RN, b, b, f(-1.0)), 0x3480_0000);
    assert_eq!(f32r(ArithOp::Fma, RZ, b, b, f(-1.0)), 0x3480_0000);
    assert_eq!(f32r(ArithOp::Fma, RM, b, b, f(-1.0)), 0x3480_0000);
    assert_eq!(f32r(ArithOp::Fma, RP, b, b, f(-1.0)), 0x3480_0001);
    // Massive cancellation to an exact zero: sign by mode.
    assert_eq!(f32r(ArithOp::Fma, RN, f(2.0), f(3.0), f(-6.0)), 0);
    assert_eq!(f32r(ArithOp::Fma, RM, f(2.0), f(3.0), f(-6.0)), 0x8000_0000);
    // Inf * 0 + x is NaN; inf - inf is NaN.
    assert_eq!(
        f32r(ArithOp::Fma, RZ, f(f32::INFINITY), 0, f(1.0)),
        0x7FFF_FFFF
    );
    assert_eq!(
        f32r(
            ArithOp::Fma,
            RP,
            f(f32::INFINITY),
            f(1.0),
            f(f32::NEG_INFINITY)
        ),
        0x7FFF_FFFF
    );
}

#[test]
fn f32_div_sqrt_rcp_directed() {
    // 1/3 = 1.0101...b × 2^-2: fraction 0x2AAAAA, then 1010... (> half) → rn rounds up.
    assert_eq!(f32r(ArithOp::Div, RN, f(1.0), f(3.0), 0), 0x3EAA_AAAB);
    assert_eq!(f32r(ArithOp::Div, RZ, f(1.0), f(3.0), 0), 0x3EAA_AAAA);
    assert_eq!(f32r(ArithOp::Div, RM, f(1.0), f(3.0), 0), 0x3EAA_AAAA);
    assert_eq!(f32r(ArithOp::Div, RP, f(1.0), f(3.0), 0), 0x3EAA_AAAB);
    assert_eq!(f32r(ArithOp::Div, RM, f(-1.0), f(3.0), 0), 0xBEAA_AAAB);
    assert_eq!(f32r(ArithOp::Div, RP, f(-1.0), f(3.0), 0), 0xBEAA_AAAA);
    assert_eq!(f32r(ArithOp::Rcp, RZ, f(3.0), 0, 0), 0x3EAA_AAAA);
    assert_eq!(f32r(ArithOp::Rcp, RP, f(3.0), 0, 0), 0x3EAA_AAAB);
    // Exact quotients.
    for r in ALL {
        assert_eq!(f32r(ArithOp::Div, r, f(1.0), f(4.0), 0), f(0.25));
        assert_eq!(f32r(ArithOp::Sqrt, r, f(2.25), 0, 0), f(1.5));
    }
    // sqrt(2) = 1.41421356237...; 0x3FB504F3 = 1.41421353816... is below it and
    // 0x3FB504F4 = 1.41421365738... above; the former is nearer.
    assert_eq!(f32r(ArithOp::Sqrt, RN, f(2.0), 0, 0), 0x3FB5_04F3);
    assert_eq!(f32r(ArithOp::Sqrt, RZ, f(2.0), 0, 0), 0x3FB5_04F3);
    assert_eq!(f32r(ArithOp::Sqrt, RM, f(2.0), 0, 0), 0x3FB5_04F3);
    assert_eq!(f32r(ArithOp::Sqrt, RP, f(2.0), 0, 0), 0x3FB5_04F4);
    // Special values.
    assert_eq!(f32r(ArithOp::Sqrt, RP, f(-1.0), 0, 0), 0x7FFF_FFFF);
    assert_eq!(f32r(ArithOp::Sqrt, RM, 0x8000_0000, 0, 0), 0x8000_0000);
    assert_eq!(f32r(ArithOp::Div, RZ, f(1.0), 0, 0), f(f32::INFINITY));
    assert_eq!(f32r(ArithOp::Div, RZ, f(-1.0), 0, 0), f(f32::NEG_INFINITY));
    assert_eq!(f32r(ArithOp::Div, RZ, 0, 0, 0), 0x7FFF_FFFF);
}

#[test]
fn f64_directed() {
    // 1 + 2^-60: the f64 ulp at 1 is 2^-52.
    let (one, tiny) = (d(1.0), d(2f64.powi(-60)));
    assert_eq!(f64r(ArithOp::Add, RN, one, tiny, 0), d(1.0));
    assert_eq!(f64r(ArithOp::Add, RZ, one, tiny, 0), d(1.0));
    assert_eq!(f64r(ArithOp::Add, RM, one, tiny, 0), d(1.0));
    assert_eq!(f64r(ArithOp::Add, RP, one, tiny, 0), 0x3FF0_0000_0000_0001);
    assert_eq!(f64r(ArithOp::Sub, RZ, one, tiny, 0), 0x3FEF_FFFF_FFFF_FFFF);
    // (1 + 2^-52)^2 = 1 + 2^-51 + 2^-104.
    let a = 0x3FF0_0000_0000_0001;
    assert_eq!(f64r(ArithOp::Mul, RN, a, a, 0), 0x3FF0_0000_0000_0002);
    assert_eq!(f64r(ArithOp::Mul, RZ, a, a, 0), 0x3FF0_0000_0000_0002);
    assert_eq!(f64r(ArithOp::Mul, RP, a, a, 0), 0x3FF0_0000_0000_0003);
    // fma: (1 + 2^-52)^2 - 1 = 2^-51·(1 + 2^-53) needs 54 bits: a tie between 2^-51 (even)
    // and 2^-51 + 2^-103.
    assert_eq!(f64r(ArithOp::Fma, RN, a, a, d(-1.0)), d(2f64.powi(-51)));
    assert_eq!(f64r(ArithOp::Fma, RP, a, a, d(-1.0)), d(2f64.powi(-51)) + 1);
    // 1/3 = 1.0101...b × 2^-2: fraction 0x5555555555555, then 0101... (< half).
    assert_eq!(
        f64r(ArithOp::Div, RN, d(1.0), d(3.0), 0),
        0x3FD5_5555_5555_5555
    );
    assert_eq!(
        f64r(ArithOp::Div, RZ, d(1.0), d(3.0), 0),
        0x3FD5_5555_5555_5555
    );
    assert_eq!(
        f64r(ArithOp::Div, RP, d(1.0), d(3.0), 0),
        0x3FD5_5555_5555_5556
    );
    // 1/(1 + 2^-52) = 1 - 2^-52 + 2^-104 - ...: 52 ones, then 52 zeros before the next one
    // bit, so only a correctly kept sticky bit shows that the quotient exceeds 1 - 2^-52
    // (0x3FEFFFFFFFFFFFFE).
    let b = 0x3FF0_0000_0000_0001;
    assert_eq!(f64r(ArithOp::Div, RN, d(1.0), b, 0), 0x3FEF_FFFF_FFFF_FFFE);
    assert_eq!(f64r(ArithOp::Div, RZ, d(1.0), b, 0), 0x3FEF_FFFF_FFFF_FFFE);
    assert_eq!(f64r(ArithOp::Div, RP, d(1.0), b, 0), 0x3FEF_FFFF_FFFF_FFFF);
    assert_eq!(f64r(ArithOp::Rcp, RP, b, 0, 0), 0x3FEF_FFFF_FFFF_FFFF);
    assert_eq!(f64r(ArithOp::Div, RM, d(-1.0), b, 0), 0xBFEF_FFFF_FFFF_FFFF);
    // sqrt(2) = 1.41421356237309504880...; the nearest f64 (…BCD = 1.41421356237309514547)
    // is above it.
    assert_eq!(f64r(ArithOp::Sqrt, RN, d(2.0), 0, 0), 0x3FF6_A09E_667F_3BCD);
    assert_eq!(f64r(ArithOp::Sqrt, RP, d(2.0), 0, 0), 0x3FF6_A09E_667F_3BCD);
    assert_eq!(f64r(ArithOp::Sqrt, RZ, d(2.0), 0, 0), 0x3FF6_A09E_667F_3BCC);
    assert_eq!(f64r(ArithOp::Sqrt, RM, d(2.0), 0, 0), 0x3FF6_A09E_667F_3BCC);
    // Subnormal f64: 2^-1074 · 0.5 ties to 0 (even); rp gives the smallest subnormal.
    assert_eq!(f64r(ArithOp::Mul, RN, 1, d(0.5), 0), 0);
    assert_eq!(f64r(ArithOp::Mul, RP, 1, d(0.5), 0), 1);
    assert_eq!(f64r(ArithOp::Mul, RM, 1 | 1 << 63, d(0.5), 0), 1 | 1 << 63);
    // Overflow.
    let max = d(f64::MAX);
    assert_eq!(f64r(ArithOp::Add, RN, max, max, 0), d(f64::INFINITY));
    assert_eq!(f64r(ArithOp::Add, RZ, max, max, 0), max);
    assert_eq!(
        f64r(ArithOp::Mul, RM, max, d(-2.0), 0),
        d(f64::NEG_INFINITY)
    );
    assert_eq!(f64r(ArithOp::Mul, RP, max, d(-2.0), 0), d(-f64::MAX));
}

#[test]
fn f32_overflow_and_subnormal_rounding() {
    let max = f(f32::MAX);
    let nmax = f(-f32::MAX);
    assert_eq!(f32r(ArithOp::Add, RN, max, max, 0), f(f32::INFINITY));
    assert_eq!(f32r(ArithOp::Add, RZ, max, max, 0), max);
    assert_eq!(f32r(ArithOp::Add, RM, max, max, 0), max);
    assert_eq!(f32r(ArithOp::Add, RP, max, max, 0), f(f32::INFINITY));
    assert_eq!(f32r(ArithOp::Add, RM, nmax, nmax, 0), f(f32::NEG_INFINITY));
    assert_eq!(f32r(ArithOp::Add, RP, nmax, nmax, 0), nmax);
    // Smallest subnormal × 0.5 = 2^-150: halfway between 0 and 2^-149.
    assert_eq!(f32r(ArithOp::Mul, RN, 1, f(0.5), 0), 0);
    assert_eq!(f32r(ArithOp::Mul, RZ, 1, f(0.5), 0), 0);
    assert_eq!(f32r(ArithOp::Mul, RP, 1, f(0.5), 0), 1);
    assert_eq!(f32r(ArithOp::Mul, RM, 0x8000_0001, f(0.5), 0), 0x8000_0001);
    assert_eq!(f32r(ArithOp::Mul, RN, 0x8000_0001, f(0.5), 0), 0x8000_0000);
    // × 1.5 = 1.5 units: tie between 1 and 2 → 2 (even).
    assert_eq!(f32r(ArithOp::Mul, RN, 1, f(1.5), 0), 2);
    assert_eq!(f32r(ArithOp::Mul, RZ, 1, f(1.5), 0), 1);
    // The largest subnormal + smallest subnormal = the smallest normal 2^-126.
    assert_eq!(f32r(ArithOp::Add, RZ, 0x007F_FFFF, 1, 0), 0x0080_0000);
}

#[test]
fn ftz_and_sat() {
    // Subnormal inputs flush to sign-preserving zero.
    let r = arith(ArithOp::Add, Ty::F32, ftz(), 1, 0, 0, 0).unwrap();
    assert_eq!(r, 0);
    let r = arith(ArithOp::Add, Ty::F32, ftz(), 0x8000_0001, 0x8000_0000, 0, 0).unwrap();
    assert_eq!(r, 0x8000_0000);
    let r = arith(ArithOp::Mul, Ty::F32, ftz(), 0x0040_0000, f(4.0), 0, 0).unwrap();
    assert_eq!(
        r, 0,
        "2^-127 × 4 would be 2^-125, but the input is flushed first"
    );
    // Subnormal results flush: 2^-126 × 0.5 = 2^-127.
    let r = arith(ArithOp::Mul, Ty::F32, ftz(), p2(-126), f(0.5), 0, 0).unwrap();
    assert_eq!(r, 0);
    let r = arith(
        ArithOp::Mul,
        Ty::F32,
        ftz(),
        p2(-126) | 1 << 31,
        f(0.5),
        0,
        0,
    )
    .unwrap();
    assert_eq!(r, 0x8000_0000);
    assert_eq!(f32r(ArithOp::Mul, RN, p2(-126), f(0.5), 0), 0x0040_0000);
    // .sat
    let s = |op, a, b| arith(op, Ty::F32, sat(), a, b, 0, 0).unwrap();
    assert_eq!(s(ArithOp::Add, f(0.75), f(0.5)), f(1.0));
    assert_eq!(s(ArithOp::Add, f(-3.0), f(1.0)), 0);
    assert_eq!(s(ArithOp::Add, f(0.25), f(0.25)), f(0.5));
    assert_eq!(s(ArithOp::Sub, f(f32::INFINITY), f(f32::INFINITY)), 0);
    assert_eq!(s(ArithOp::Mul, f(-0.0), f(1.0)), 0);
    assert_eq!(s(ArithOp::Mul, f(1e30), f(1e30)), f(1.0));
}

#[test]
fn nan_is_canonical() {
    let qnan_payload = 0x7FC0_0001;
    for r in ALL {
        assert_eq!(f32r(ArithOp::Add, r, qnan_payload, f(1.0), 0), 0x7FFF_FFFF);
        assert_eq!(
            f32r(ArithOp::Sub, r, f(f32::INFINITY), f(f32::INFINITY), 0),
            0x7FFF_FFFF
        );
        assert_eq!(f32r(ArithOp::Mul, r, 0, f(f32::INFINITY), 0), 0x7FFF_FFFF);
        assert_eq!(f32r(ArithOp::Sqrt, r, f(-4.0), 0, 0), 0x7FFF_FFFF);
        assert_eq!(
            f64r(ArithOp::Add, r, d(f64::INFINITY), d(f64::NEG_INFINITY), 0),
            0x7FFF_FFFF_FFFF_FFFF
        );
        assert_eq!(f64r(ArithOp::Div, r, 0, 0, 0), 0x7FFF_FFFF_FFFF_FFFF);
    }
    assert_eq!(
        f32r(ArithOp::Fma, RN, f(1.0), f(1.0), 0xFFC0_0000),
        0x7FFF_FFFF
    );
}

#[test]
fn float_min_max() {
    let mn = |a, b| i(ArithOp::Min, Ty::F32, a, b);
    let mx = |a, b| i(ArithOp::Max, Ty::F32, a, b);
    let nan = 0x7FC0_0000;
    assert_eq!(mn(nan, f(1.0)), f(1.0));
    assert_eq!(mn(f(1.0), nan), f(1.0));
    assert_eq!(mx(f(2.0), nan), f(2.0));
    assert_eq!(mn(nan, 0xFFC0_0001), 0x7FFF_FFFF);
    assert_eq!(mx(nan, nan), 0x7FFF_FFFF);
    assert_eq!(mn(f(-0.0), f(0.0)), f(-0.0));
    assert_eq!(mn(f(0.0), f(-0.0)), f(-0.0));
    assert_eq!(mx(f(-0.0), f(0.0)), f(0.0));
    assert_eq!(mx(f(0.0), f(-0.0)), f(0.0));
    assert_eq!(mn(f(-3.0), f(2.0)), f(-3.0));
    assert_eq!(mx(f(-3.0), f(-2.0)), f(-2.0));
    assert_eq!(mn(f(f32::NEG_INFINITY), f(-1e38)), f(f32::NEG_INFINITY));
    let mn64 = |a, b| i(ArithOp::Min, Ty::F64, a, b);
    assert_eq!(mn64(d(f64::NAN), d(-7.0)), d(-7.0));
    assert_eq!(mn64(d(f64::NAN), d(f64::NAN)), 0x7FFF_FFFF_FFFF_FFFF);
    // .ftz: a subnormal compares as zero and is returned flushed.
    let r = arith(ArithOp::Max, Ty::F32, ftz(), 1, 0x8000_0000, 0, 0).unwrap();
    assert_eq!(r, 0);
}

#[test]
fn abs_neg_copysign_bits() {
    assert_eq!(i(ArithOp::Neg, Ty::F32, 0x7FC0_0000, 0), 0xFFC0_0000);
    assert_eq!(i(ArithOp::Abs, Ty::F32, 0xFFC0_0001, 0), 0x7FC0_0001);
    assert_eq!(i(ArithOp::Neg, Ty::F32, 0, 0), 0x8000_0000);
    assert_eq!(i(ArithOp::Abs, Ty::F64, d(-2.0), 0), d(2.0));
    assert_eq!(i(ArithOp::Neg, Ty::F32, 0xDEAD_BEEF_3F80_0000, 0), f(-1.0));
    // copysign d, a, b: magnitude of b, sign of a.
    assert_eq!(i(ArithOp::Copysign, Ty::F32, f(-1.0), f(2.0)), f(-2.0));
    assert_eq!(i(ArithOp::Copysign, Ty::F32, f(1.0), f(-3.0)), f(3.0));
    assert_eq!(i(ArithOp::Copysign, Ty::F64, d(-0.0), d(5.0)), d(-5.0));
    let r = arith(ArithOp::Abs, Ty::F32, ftz(), 0x8000_0001, 0, 0, 0).unwrap();
    assert_eq!(r, 0);
}

#[test]
fn approx_functions() {
    let ap = |op, ty, a| arith(op, ty, approx(), a, 0, 0, 0).unwrap();
    assert_eq!(ap(ArithOp::Sin, Ty::F32, 0), 0);
    assert_eq!(ap(ArithOp::Cos, Ty::F32, 0), f(1.0));
    assert_eq!(ap(ArithOp::Sin, Ty::F32, f(f32::INFINITY)), 0x7FFF_FFFF);
    assert_eq!(ap(ArithOp::Ex2, Ty::F32, f(3.0)), f(8.0));
    assert_eq!(ap(ArithOp::Ex2, Ty::F32, f(-1.0)), f(0.5));
    assert_eq!(ap(ArithOp::Ex2, Ty::F32, f(f32::NEG_INFINITY)), 0);
    assert_eq!(
        ap(ArithOp::Ex2, Ty::F32, f(f32::INFINITY)),
        f(f32::INFINITY)
    );
    // 2^-130 is subnormal: 2^(-130+149) = 2^19 units of 2^-149.
    assert_eq!(ap(ArithOp::Ex2, Ty::F32, f(-130.0)), 1 << 19);
    let r = arith(
        ArithOp::Ex2,
        Ty::F32,
        FloatMode {
            ftz: true,
            ..approx()
        },
        f(-130.0),
        0,
        0,
        0,
    );
    assert_eq!(r.unwrap(), 0);
    assert_eq!(ap(ArithOp::Lg2, Ty::F32, f(8.0)), f(3.0));
    assert_eq!(ap(ArithOp::Lg2, Ty::F32, 0), f(f32::NEG_INFINITY));
    assert_eq!(ap(ArithOp::Lg2, Ty::F32, f(-1.0)), 0x7FFF_FFFF);
    assert_eq!(ap(ArithOp::Lg2, Ty::F32, 1), f(-149.0));
    assert_eq!(ap(ArithOp::Rsqrt, Ty::F32, f(4.0)), f(0.5));
    assert_eq!(ap(ArithOp::Rsqrt, Ty::F32, f(-0.0)), f(f32::NEG_INFINITY));
    assert_eq!(ap(ArithOp::Rsqrt, Ty::F32, f(-4.0)), 0x7FFF_FFFF);
    assert_eq!(ap(ArithOp::Rsqrt, Ty::F32, f(f32::INFINITY)), 0);
    assert_eq!(ap(ArithOp::Rcp, Ty::F32, f(4.0)), f(0.25));
    assert_eq!(ap(ArithOp::Rcp, Ty::F64, d(-8.0)), d(-0.125));
    assert_eq!(ap(ArithOp::Rsqrt, Ty::F64, d(16.0)), d(0.25));
    assert_eq!(ap(ArithOp::Sqrt, Ty::F32, f(9.0)), f(3.0));
    assert_eq!(i(ArithOp::Div, Ty::F32, f(1.0), f(3.0)), 0x3EAA_AAAB);
    let r = arith(ArithOp::Div, Ty::F32, approx(), f(1.0), f(3.0), 0, 0).unwrap();
    assert_eq!(r, 0x3EAA_AAAB);
    assert_eq!(ap(ArithOp::Tanh, Ty::F32, f(f32::INFINITY)), f(1.0));
    assert_eq!(ap(ArithOp::Tanh, Ty::F32, f(-0.0)), f(-0.0));
    // Accuracy: within the PTX bounds of the true value.
    let s = f32::from_bits(ap(ArithOp::Sin, Ty::F32, f(1.0)) as u32) as f64;
    assert!((s - 1f64.sin()).abs() < 2f64.powi(-24));
    let t = f32::from_bits(ap(ArithOp::Tanh, Ty::F32, f(0.5)) as u32) as f64;
    assert!(((t - 0.5f64.tanh()) / 0.5f64.tanh()).abs() < 2f64.powi(-23));
    let e = f32::from_bits(ap(ArithOp::Ex2, Ty::F32, f(0.3)) as u32) as f64;
    assert!(((e - (0.3f32 as f64).exp2()) / e).abs() < 2f64.powi(-23));
}

#[test]
fn half_precision_arith() {
    // f16: 1.0 = 0x3C00, 2.0 = 0x4000, 3.0 = 0x4200, 65504 = 0x7BFF, +inf = 0x7C00.
    assert_eq!(i(ArithOp::Add, Ty::F16, 0x3C00, 0x3C00), 0x4000);
    assert_eq!(i(ArithOp::Add, Ty::F16, 0x7BFF, 0x7BFF), 0x7C00);
    assert_eq!(
        arith(ArithOp::Add, Ty::F16, m(RZ), 0x7BFF, 0x7BFF, 0, 0).unwrap(),
        0x7BFF
    );
    assert_eq!(i3(ArithOp::Fma, Ty::F16, 0x4000, 0x4200, 0x3C00), 0x4700); // 2*3+1 = 7
    assert_eq!(i(ArithOp::Add, Ty::F16, 0x7E00, 0x3C00), 0x7FFF);
    // Packed pairs: (1.0, 2.0) + (1.0, 1.0) = (2.0, 3.0), low element first.
    assert_eq!(
        i(ArithOp::Add, Ty::F16x2, 0x4000_3C00, 0x3C00_3C00),
        0x4200_4000
    );
    assert_eq!(i(ArithOp::Neg, Ty::F16x2, 0x4000_3C00, 0), 0xC000_BC00);
    // bf16: 1.0 = 0x3F80, 1.5 = 0x3FC0.
    assert_eq!(i(ArithOp::Mul, Ty::Bf16, 0x3FC0, 0x3FC0), 0x4010); // 2.25
    assert_eq!(
        i(ArithOp::Max, Ty::Bf16x2, 0x3F80_BF80, 0x4000_0000),
        0x4000_0000
    );
    // Subnormal f16 product: 2^-14 × 2^-5 = 2^-19 = 32 units of 2^-24.
    assert_eq!(i(ArithOp::Mul, Ty::F16, 0x0400, 0x2800), 0x0020);
    let r = arith(ArithOp::Mul, Ty::F16, ftz(), 0x0400, 0x2800, 0, 0).unwrap();
    assert_eq!(r, 0);
}

// ---------------------------------------------------------------- compare / testp / set

#[test]
fn compare_ints() {
    assert!(compare(Cmp::Lt, Ty::S32, false, s32(-1), 1));
    assert!(!compare(Cmp::Lt, Ty::U32, false, s32(-1), 1));
    assert!(!compare(Cmp::Lo, Ty::S32, false, s32(-1), 1));
    assert!(compare(Cmp::Hi, Ty::S32, false, s32(-1), 1));
    assert!(compare(Cmp::Hs, Ty::U32, false, 5, 5));
    assert!(compare(Cmp::Ls, Ty::U32, false, 4, 5));
    assert!(compare(Cmp::Eq, Ty::B32, false, 0xFFFF_FFFF_0000_0007, 7));
    assert!(compare(Cmp::Gt, Ty::B32, false, 0x8000_0000, 1));
    // s16 with garbage above: 0xFFFF is -1.
    assert!(compare(Cmp::Lt, Ty::S16, false, 0x1234_FFFF, 0));
    assert!(compare(Cmp::Ge, Ty::S64, false, 0, i64::MIN as u64));
    assert!(compare(Cmp::Ne, Ty::U64, false, 1, 2));
    assert!(compare(Cmp::Le, Ty::S8, false, 0x80, 0x7F));
}

#[test]
fn compare_floats() {
    let nan = 0x7FC0_0000;
    let one = f(1.0);
    for (c, expect) in [
        (Cmp::Eq, false),
        (Cmp::Ne, false),
        (Cmp::Lt, false),
        (Cmp::Le, false),
        (Cmp::Gt, false),
        (Cmp::Ge, false),
        (Cmp::Num, false),
        (Cmp::Nan, true),
        (Cmp::Equ, true),
        (Cmp::Neu, true),
        (Cmp::Ltu, true),
        (Cmp::Leu, true),
        (Cmp::Gtu, true),
        (Cmp::Geu, true),
    ] {
        assert_eq!(compare(c, Ty::F32, false, nan, one), expect, "{c:?} NaN");
        assert_eq!(
            compare(c, Ty::F64, false, d(1.0), d(f64::NAN)),
            expect,
            "{c:?} NaN f64"
        );
    }
    assert!(compare(Cmp::Eq, Ty::F32, false, f(-0.0), f(0.0)));
    assert!(compare(Cmp::Lt, Ty::F32, false, f(-2.0), f(1.0)));
    assert!(compare(Cmp::Ltu, Ty::F32, false, f(-2.0), f(1.0)));
    assert!(!compare(Cmp::Gtu, Ty::F32, false, f(-2.0), f(1.0)));
    assert!(compare(Cmp::Num, Ty::F32, false, f(-2.0), f(1.0)));
    assert!(compare(Cmp::Ne, Ty::F64, false, d(1.0), d(2.0)));
    // ftz: the smallest subnormal equals zero only when flushed.
    assert!(compare(Cmp::Eq, Ty::F32, true, 1, 0));
    assert!(!compare(Cmp::Eq, Ty::F32, false, 1, 0));
    assert!(compare(Cmp::Gt, Ty::F32, false, 1, 0));
    assert!(compare(Cmp::Lt, Ty::F16, false, 0xBC00, 0x3C00));
    assert!(compare(
        Cmp::Gt,
        Ty::F32,
        false,
        f(f32::INFINITY),
        f(f32::MAX)
    ));
}

#[test]
fn testp_kinds() {
    let cases: [(u64, [bool; 6]); 6] = [
        // value: [finite, infinite, number, notanumber, normal, subnormal]
        (f(1.0), [true, false, true, false, true, false]),
        (0, [true, false, true, false, false, false]),
        (1, [true, false, true, false, false, true]),
        (0x8000_0001, [true, false, true, false, false, true]),
        (
            f(f32::NEG_INFINITY),
            [false, true, true, false, false, false],
        ),
        (0x7FC0_0000, [false, false, false, true, false, false]),
    ];
    let kinds = [
        TestpKind::Finite,
        TestpKind::Infinite,
        TestpKind::Number,
        TestpKind::NotANumber,
        TestpKind::Normal,
        TestpKind::Subnormal,
    ];
    for (v, expect) in cases {
        for (k, e) in kinds.iter().zip(expect) {
            assert_eq!(testp(*k, Ty::F32, v), e, "{k:?} {v:#x}");
        }
    }
    assert!(testp(TestpKind::Subnormal, Ty::F64, 1));
    assert!(testp(TestpKind::Normal, Ty::F64, d(1e-300)));
    assert!(testp(TestpKind::NotANumber, Ty::F64, d(f64::NAN)));
    assert!(!testp(TestpKind::Finite, Ty::F64, d(f64::INFINITY)));
    assert!(!testp(TestpKind::Normal, Ty::S32, 1));
}

#[test]
fn set_values() {
    assert_eq!(set_value(Ty::U32, true), 0xFFFF_FFFF);
    assert_eq!(set_value(Ty::S32, true), 0xFFFF_FFFF);
    assert_eq!(set_value(Ty::U32, false), 0);
    assert_eq!(set_value(Ty::F32, true), 0x3F80_0000);
    assert_eq!(set_value(Ty::F32, false), 0);
    assert_eq!(set_value(Ty::F16x2, true), 0x3C00_3C00);
    assert_eq!(set_value(Ty::Pred, true), 1);
}

// ---------------------------------------------------------------- cvt

#[test]
fn cvt_float_to_int_saturates() {
    assert_eq!(
        cvt(Ty::S32, Ty::F32, Some(RZ), false, false, f(1e10)),
        0x7FFF_FFFF
    );
    assert_eq!(
        cvt(Ty::S32, Ty::F32, Some(RZ), false, false, f(-1e10)),
        0x8000_0000
    );
    assert_eq!(
        cvt(Ty::S32, Ty::F32, Some(RN), false, false, f(f32::NAN)),
        0
    );
    assert_eq!(cvt(Ty::U32, Ty::F32, Some(RZ), false, false, f(-1.5)), 0);
    assert_eq!(cvt(Ty::U32, Ty::F32, None, false, false, f(-1.5)), 0);
    assert_eq!(cvt(Ty::S32, Ty::F32, None, false, false, f(-1.9)), s32(-1));
    assert_eq!(
        cvt(Ty::S32, Ty::F32, None, false, false, f(f32::NEG_INFINITY)),
        0x8000_0000
    );
    assert_eq!(cvt(Ty::U8, Ty::F32, Some(RN), false, false, f(300.0)), 0xFF);
    assert_eq!(
        cvt(Ty::S8, Ty::F32, Some(RN), false, false, f(-300.0)),
        0x80
    );
    assert_eq!(
        cvt(Ty::S16, Ty::F32, Some(RN), false, false, f(-2.0)),
        0xFFFE
    );
    assert_eq!(
        cvt(Ty::U64, Ty::F32, Some(RZ), false, false, f(1.8446744e19)),
        u64::MAX
    );
    assert_eq!(
        cvt(Ty::S64, Ty::F64, Some(RZ), false, false, d(9.3e18)),
        i64::MAX as u64
    );
    assert_eq!(
        cvt(Ty::S64, Ty::F64, Some(RZ), false, false, d(-9.3e18)),
        i64::MIN as u64
    );
    assert_eq!(
        cvt(Ty::U64, Ty::F64, Some(RZ), false, false, d(f64::INFINITY)),
        u64::MAX
    );
    // -2^31 - 0.5 truncates to exactly i32::MIN.
    assert_eq!(
        cvt(Ty::S32, Ty::F64, Some(RZ), false, false, d(-2147483648.5)),
        0x8000_0000
    );
    assert_eq!(
        cvt(Ty::S32, Ty::F64, Some(RM), false, false, d(-2147483648.5)),
        0x8000_0000
    );
    assert_eq!(
        cvt(Ty::S32, Ty::F16, Some(RZ), false, false, 0xC500),
        s32(-5)
    );
}

#[test]
fn cvt_integer_rounding_modes() {
    let rni = |x: f32| cvt(Ty::S32, Ty::F32, Some(RN), false, false, f(x));
    assert_eq!(rni(2.5), 2);
    assert_eq!(rni(3.5), 4);
    assert_eq!(rni(-2.5), s32(-2));
    assert_eq!(rni(0.5), 0);
    assert_eq!(rni(1.5), 2);
    assert_eq!(rni(2.5000002), 3);
    assert_eq!(
        cvt(Ty::S32, Ty::F32, Some(RM), false, false, f(-0.5)),
        s32(-1)
    );
    assert_eq!(cvt(Ty::S32, Ty::F32, Some(RP), false, false, f(0.5)), 1);
    assert_eq!(cvt(Ty::S32, Ty::F32, Some(RP), false, false, f(-0.5)), 0);
    assert_eq!(
        cvt(Ty::S32, Ty::F32, Some(RZ), false, false, f(-1.9)),
        s32(-1)
    );
    // .ftz on an f32 source: -tiny rounds down to -1 unless flushed.
    assert_eq!(
        cvt(Ty::S32, Ty::F32, Some(RM), false, false, 0x8000_0001),
        s32(-1)
    );
    assert_eq!(cvt(Ty::S32, Ty::F32, Some(RM), true, false, 0x8000_0001), 0);
    // Round to integral in the same float type.
    assert_eq!(
        cvt(Ty::F32, Ty::F32, Some(RN), false, false, f(2.5)),
        f(2.0)
    );
    assert_eq!(
        cvt(Ty::F32, Ty::F32, Some(RN), false, false, f(3.5)),
        f(4.0)
    );
    assert_eq!(
        cvt(Ty::F32, Ty::F32, Some(RN), false, false, f(-0.4)),
        f(-0.0)
    );
    assert_eq!(
        cvt(Ty::F32, Ty::F32, Some(RP), false, false, f(1.1)),
        f(2.0)
    );
    assert_eq!(
        cvt(Ty::F32, Ty::F32, Some(RM), false, false, f(-1.1)),
        f(-2.0)
    );
    assert_eq!(
        cvt(Ty::F32, Ty::F32, Some(RZ), false, false, f(-1.9)),
        f(-1.0)
    );
    assert_eq!(
        cvt(Ty::F32, Ty::F32, Some(RZ), false, false, f(1e20)),
        f(1e20)
    );
    assert_eq!(
        cvt(Ty::F64, Ty::F64, Some(RP), false, false, d(0.1)),
        d(1.0)
    );
    assert_eq!(
        cvt(
            Ty::F64,
            Ty::F64,
            Some(RN),
            false,
            false,
            d(4503599627370495.5)
        ),
        d(4503599627370496.0)
    );
    assert_eq!(
        cvt(Ty::F32, Ty::F32, Some(RN), false, false, 0x7FC0_0001),
        0x7FFF_FFFF
    );
}

#[test]
fn cvt_int_to_float() {
    let two24 = 1u64 << 24;
    // 2^24 + 1 is halfway between 2^24 (fraction 0, even) and 2^24 + 2.
    assert_eq!(
        cvt(Ty::F32, Ty::U64, Some(RN), false, false, two24 + 1),
        0x4B80_0000
    );
    assert_eq!(
        cvt(Ty::F32, Ty::U64, Some(RZ), false, false, two24 + 1),
        0x4B80_0000
    );
    assert_eq!(
        cvt(Ty::F32, Ty::U64, Some(RP), false, false, two24 + 1),
        0x4B80_0001
    );
    // 2^24 + 3: halfway between 2^24 + 2 (odd fraction) and 2^24 + 4 → 2^24 + 4.
    assert_eq!(
        cvt(Ty::F32, Ty::U64, Some(RN), false, false, two24 + 3),
        0x4B80_0002
    );
    assert_eq!(
        cvt(Ty::F32, Ty::U32, None, false, false, two24 + 3),
        0x4B80_0002
    );
    assert_eq!(
        cvt(
            Ty::F32,
            Ty::S32,
            Some(RM),
            false,
            false,
            s32(-(1 << 24) - 1)
        ),
        0xCB80_0001
    );
    assert_eq!(
        cvt(
            Ty::F32,
            Ty::S32,
            Some(RZ),
            false,
            false,
            s32(-(1 << 24) - 1)
        ),
        0xCB80_0000
    );
    // u64::MAX = 2^64 - 1 → rn 2^64 (0x5F800000); rz the largest f32 below, 0x5F7FFFFF.
    assert_eq!(
        cvt(Ty::F32, Ty::U64, Some(RN), false, false, u64::MAX),
        0x5F80_0000
    );
    assert_eq!(
        cvt(Ty::F32, Ty::U64, Some(RZ), false, false, u64::MAX),
        0x5F7F_FFFF
    );
    assert_eq!(
        cvt(Ty::F32, Ty::S64, Some(RN), false, false, i64::MIN as u64),
        0xDF00_0000
    );
    // s8 -1 with garbage above.
    assert_eq!(
        cvt(Ty::F32, Ty::S8, Some(RN), false, false, 0xABFF),
        f(-1.0)
    );
    // u64 → f64: 2^53 + 1 ties to 2^53; rp goes to 2^53 + 2.
    let two53 = 1u64 << 53;
    assert_eq!(
        cvt(Ty::F64, Ty::U64, Some(RN), false, false, two53 + 1),
        d(two53 as f64)
    );
    assert_eq!(
        cvt(Ty::F64, Ty::U64, Some(RP), false, false, two53 + 1),
        d(two53 as f64) + 1
    );
    assert_eq!(
        cvt(
            Ty::F64,
            Ty::S64,
            Some(RM),
            false,
            false,
            (-(two53 as i64) - 1) as u64
        ),
        d(-(two53 as f64)) + 1
    );
    // int → f16 overflow: 70000 > 65504.
    assert_eq!(cvt(Ty::F16, Ty::U32, Some(RN), false, false, 70000), 0x7C00);
    assert_eq!(cvt(Ty::F16, Ty::U32, Some(RZ), false, false, 70000), 0x7BFF);
    assert_eq!(cvt(Ty::F32, Ty::S32, None, false, true, s32(-5)), 0);
    assert_eq!(cvt(Ty::F32, Ty::S32, None, false, true, 5), f(1.0));
}

#[test]
fn cvt_int_to_int() {
    assert_eq!(cvt(Ty::S32, Ty::S8, None, false, false, 0xFF), 0xFFFF_FFFF);
    assert_eq!(cvt(Ty::U32, Ty::U8, None, false, false, 0x1FF), 0xFF);
    assert_eq!(cvt(Ty::U32, Ty::S8, None, false, false, 0x80), 0xFFFF_FF80);
    assert_eq!(cvt(Ty::S64, Ty::S32, None, false, false, s32(-1)), u64::MAX);
    assert_eq!(
        cvt(Ty::U64, Ty::U32, None, false, false, 0xDEAD_0000_FFFF_FFFF),
        0xFFFF_FFFF
    );
    assert_eq!(cvt(Ty::U16, Ty::S32, None, false, false, s32(-1)), 0xFFFF);
    assert_eq!(cvt(Ty::S8, Ty::S32, None, false, false, 0x1234), 0x34);
    assert_eq!(cvt(Ty::S8, Ty::S32, None, false, true, 300), 0x7F);
    assert_eq!(cvt(Ty::S8, Ty::S32, None, false, true, s32(-300)), 0x80);
    assert_eq!(cvt(Ty::U8, Ty::S32, None, false, true, s32(-5)), 0);
    assert_eq!(cvt(Ty::U32, Ty::S32, None, false, true, s32(-1)), 0);
    assert_eq!(
        cvt(Ty::S32, Ty::U32, None, false, true, 0xFFFF_FFFF),
        0x7FFF_FFFF
    );
    assert_eq!(
        cvt(Ty::S64, Ty::U64, None, false, true, u64::MAX),
        i64::MAX as u64
    );
    assert_eq!(cvt(Ty::U64, Ty::S64, None, false, true, i64::MIN as u64), 0);
    assert_eq!(cvt(Ty::B16, Ty::B32, None, false, false, 0x12345), 0x2345);
    assert_eq!(cvt(Ty::Pred, Ty::U32, None, false, false, 1), 0);
}

#[test]
fn cvt_float_to_float() {
    // f32 → f64 is exact.
    assert_eq!(
        cvt(Ty::F64, Ty::F32, None, false, false, f(0.1)),
        d(0.1f32 as f64)
    );
    assert_eq!(
        cvt(Ty::F64, Ty::F32, None, false, false, 1),
        d(2f64.powi(-149))
    );
    assert_eq!(cvt(Ty::F64, Ty::F32, None, true, false, 1), 0);
    // f64 1/3 → f32: the f64 value is just below 1/3, still above 0x3EAAAAAA.
    let third = d(1.0 / 3.0);
    assert_eq!(
        cvt(Ty::F32, Ty::F64, Some(RN), false, false, third),
        0x3EAA_AAAB
    );
    assert_eq!(
        cvt(Ty::F32, Ty::F64, Some(RZ), false, false, third),
        0x3EAA_AAAA
    );
    assert_eq!(
        cvt(Ty::F32, Ty::F64, Some(RP), false, false, third),
        0x3EAA_AAAB
    );
    assert_eq!(
        cvt(Ty::F32, Ty::F64, Some(RN), false, false, d(1e300)),
        f(f32::INFINITY)
    );
    assert_eq!(
        cvt(Ty::F32, Ty::F64, Some(RZ), false, false, d(1e300)),
        f(f32::MAX)
    );
    assert_eq!(cvt(Ty::F32, Ty::F64, Some(RM), false, false, d(1e-300)), 0);
    assert_eq!(cvt(Ty::F32, Ty::F64, Some(RP), false, false, d(1e-300)), 1);
    assert_eq!(
        cvt(Ty::F32, Ty::F64, None, false, false, d(f64::NAN)),
        0x7FFF_FFFF
    );
    // 2^-130 as f32 is subnormal; .ftz flushes the result.
    assert_eq!(
        cvt(Ty::F32, Ty::F64, Some(RN), false, false, d(2f64.powi(-130))),
        1 << 19
    );
    assert_eq!(
        cvt(Ty::F32, Ty::F64, Some(RN), true, false, d(2f64.powi(-130))),
        0
    );
    assert_eq!(
        cvt(Ty::F32, Ty::F32, None, true, false, 0x8000_0005),
        0x8000_0000
    );
    assert_eq!(cvt(Ty::F32, Ty::F32, None, false, true, f(2.0)), f(1.0));
    assert_eq!(cvt(Ty::F32, Ty::F32, None, false, true, f(f32::NAN)), 0);
}

#[test]
fn cvt_f16() {
    let to16 = |x: f32, r| cvt(Ty::F16, Ty::F32, Some(r), false, false, f(x));
    assert_eq!(to16(1.0, RN), 0x3C00);
    assert_eq!(to16(-2.0, RN), 0xC000);
    assert_eq!(to16(65504.0, RN), 0x7BFF);
    // 65520 is halfway between 65504 (odd fraction 0x3FF) and 65536 (overflow) → inf.
    assert_eq!(to16(65520.0, RN), 0x7C00);
    assert_eq!(to16(65519.0, RN), 0x7BFF);
    assert_eq!(to16(1e6, RZ), 0x7BFF);
    assert_eq!(to16(-1e6, RZ), 0xFBFF);
    assert_eq!(to16(-1e6, RN), 0xFC00);
    // Subnormals: 2^-24 is the smallest; 2^-25 ties to 0; 1.5 · 2^-25 rounds up to 2^-24.
    assert_eq!(to16(2f32.powi(-24), RN), 0x0001);
    assert_eq!(to16(2f32.powi(-25), RN), 0x0000);
    assert_eq!(to16(2f32.powi(-25), RP), 0x0001);
    assert_eq!(to16(1.5 * 2f32.powi(-25), RN), 0x0001);
    assert_eq!(to16(-(2f32.powi(-14)) * 0.5, RN), 0x8200);
    // 1 + 2^-11 is halfway between 1.0 and 1 + 2^-10 → 1.0; 1 + 3·2^-11 → 1 + 2^-9.
    assert_eq!(to16(1.0 + 2f32.powi(-11), RN), 0x3C00);
    assert_eq!(to16(1.0 + 3.0 * 2f32.powi(-11), RN), 0x3C02);
    assert_eq!(to16(1.0 + 2f32.powi(-11), RP), 0x3C01);
    assert_eq!(to16(f32::NAN, RN), 0x7FFF);
    assert_eq!(to16(f32::NEG_INFINITY, RN), 0xFC00);
    // f16 → f32 is exact.
    let from16 = |h: u64| cvt(Ty::F32, Ty::F16, None, false, false, h);
    assert_eq!(from16(0x0001), f(2f32.powi(-24)));
    assert_eq!(from16(0x3555), f(1365.0 / 4096.0));
    assert_eq!(from16(0x7C00), f(f32::INFINITY));
    assert_eq!(from16(0x7E01), 0x7FFF_FFFF);
    // Round trip: every non-NaN f16 survives f16 → f32 → f16 and f16 → f64 → f16.
    for h in 0..=0xFFFFu64 {
        if h & 0x7C00 == 0x7C00 && h & 0x3FF != 0 {
            continue;
        }
        let x = cvt(Ty::F32, Ty::F16, None, false, false, h);
        assert_eq!(
            cvt(Ty::F16, Ty::F32, Some(RN), false, false, x),
            h,
            "{h:#x}"
        );
        let y = cvt(Ty::F64, Ty::F16, None, false, false, h);
        assert_eq!(
            cvt(Ty::F16, Ty::F64, Some(RZ), false, false, y),
            h,
            "{h:#x}"
        );
        assert_eq!(f64::from_bits(y) as f32, f32::from_bits(x as u32));
    }
    // bf16: the top half of an f32, rounded.
    let tobf = |x: u64| cvt(Ty::Bf16, Ty::F32, Some(RN), false, false, x);
    assert_eq!(tobf(f(1.0)), 0x3F80);
    assert_eq!(tobf(0x3F80_8000), 0x3F80); // tie → even
    assert_eq!(tobf(0x3F81_8000), 0x3F82); // tie → even (up)
    assert_eq!(tobf(0x3F80_8001), 0x3F81);
    assert_eq!(tobf(f(f32::MAX)), 0x7F80);
    assert_eq!(tobf(0x7FC0_0000), 0x7FFF);
    assert_eq!(
        cvt(Ty::F32, Ty::Bf16, None, false, false, 0xC049),
        0xC049_0000
    );
    // f16 ⇄ bf16.
    assert_eq!(
        cvt(Ty::Bf16, Ty::F16, Some(RN), false, false, 0x3C00),
        0x3F80
    );
}

// ---------------------------------------------------------------- atom

#[test]
fn atomics() {
    assert_eq!(atom(AtomOp::Add, Ty::U32, 0xFFFF_FFFF, 2, 0), 1);
    assert_eq!(atom(AtomOp::Add, Ty::U64, u64::MAX, 1, 0), 0);
    assert_eq!(atom(AtomOp::Add, Ty::F32, f(1.5), f(2.25), 0), f(3.75));
    // atom.add.f32 flushes subnormals.
    assert_eq!(atom(AtomOp::Add, Ty::F32, 1, 1, 0), 0);
    assert_eq!(atom(AtomOp::Add, Ty::F64, 1, 1, 0), 2);
    assert_eq!(atom(AtomOp::Add, Ty::F64, d(0.1), d(0.2), 0), d(0.1 + 0.2));
    assert_eq!(
        atom(AtomOp::Add, Ty::F16x2, 0x4000_3C00, 0x3C00_3C00, 0),
        0x4200_4000
    );
    assert_eq!(atom(AtomOp::Min, Ty::S32, s32(-1), 1, 0), s32(-1));
    assert_eq!(atom(AtomOp::Min, Ty::U32, s32(-1), 1, 0), 1);
    assert_eq!(atom(AtomOp::Max, Ty::S64, (-5i64) as u64, 3, 0), 3);
    assert_eq!(atom(AtomOp::Max, Ty::F32, f(-1.0), f(0.5), 0), f(0.5));
    assert_eq!(atom(AtomOp::Min, Ty::F32, 0x7FC0_0000, f(0.5), 0), f(0.5));
    // inc: old >= b ? 0 : old + 1.
    assert_eq!(atom(AtomOp::Inc, Ty::U32, 5, 5, 0), 0);
    assert_eq!(atom(AtomOp::Inc, Ty::U32, 6, 5, 0), 0);
    assert_eq!(atom(AtomOp::Inc, Ty::U32, 3, 5, 0), 4);
    // dec: old == 0 || old > b ? b : old - 1.
    assert_eq!(atom(AtomOp::Dec, Ty::U32, 0, 5, 0), 5);
    assert_eq!(atom(AtomOp::Dec, Ty::U32, 7, 5, 0), 5);
    assert_eq!(atom(AtomOp::Dec, Ty::U32, 3, 5, 0), 2);
    assert_eq!(atom(AtomOp::Exch, Ty::B32, 3, 0xFFFF_FFFF_0000_0009, 0), 9);
    assert_eq!(atom(AtomOp::Cas, Ty::B32, 3, 3, 42), 42);
    assert_eq!(atom(AtomOp::Cas, Ty::B32, 3, 4, 42), 3);
    assert_eq!(atom(AtomOp::Cas, Ty::B64, 1 << 40, 1 << 40, 7), 7);
    assert_eq!(atom(AtomOp::And, Ty::B32, 0b1100, 0b1010, 0), 0b1000);
    assert_eq!(atom(AtomOp::Or, Ty::B32, 0b1100, 0b1010, 0), 0b1110);
    assert_eq!(atom(AtomOp::Xor, Ty::B32, 0b1100, 0b1010, 0), 0b0110);
}

// ---- lop3, shf, bmsk, szext, bfind, dp4a, dp2a (PTX ISA "Logic and Shift", "Integer
// Arithmetic"): expectations worked out by hand from the definitions.

#[test]
fn lop3_looks_up_each_bit_in_its_table() {
    let lop3 = |a: u32, b: u32, c: u32, lut: u8| {
        arith(
            ArithOp::Lop3,
            Ty::B32,
            FloatMode::default(),
            a as u64,
            b as u64,
            c as u64,
            lut as u64,
        )
        .unwrap() as u32
    };
    let (a, b, c) = (0xF0F0_1234u32, 0xCCCC_5678u32, 0xAAAA_9ABCu32);
    // The table of F is F(0xF0, 0xCC, 0xAA): a & b & c is 0x80, a | b | c is 0xFE,
    // (a & b) | c is 0xEA, a ^ b ^ c is 0x96, ~a is 0x0F; 0x00 and 0xFF are constants.
    assert_eq!(lop3(a, b, c, 0x80), a & b & c);
    assert_eq!(lop3(a, b, c, 0xFE), a | b | c);
    assert_eq!(lop3(a, b, c, 0xEA), (a & b) | c);
    assert_eq!(lop3(a, b, c, 0x96), a ^ b ^ c);
    assert_eq!(lop3(a, b, c, 0x0F), !a);
    assert_eq!(lop3(a, b, c, 0x00), 0);
    assert_eq!(lop3(a, b, c, 0xFF), u32::MAX);
}

#[test]
fn shf_funnels_the_64_bit_pair() {
    let shf = |left, clamp, lo: u32, hi: u32, n: u32| {
        i3(
            ArithOp::Shf { left, clamp },
            Ty::B32,
            lo as u64,
            hi as u64,
            n as u64,
        ) as u32
    };
    // {hi, lo} = 0x89ABCDEF_01234567.
    let (lo, hi) = (0x0123_4567, 0x89AB_CDEF);
    // Left by 8: 0xABCDEF01_234567.. → the upper word 0xABCDEF01.
    assert_eq!(shf(true, false, lo, hi, 8), 0xABCD_EF01);
    // Right by 8: lower word of 0x0089ABCD_EF012345 → 0xEF012345.
    assert_eq!(shf(false, false, lo, hi, 8), 0xEF01_2345);
    // wrap takes n mod 32 (40 → 8); clamp caps at 32: left gives lo, right gives hi.
    assert_eq!(shf(true, false, lo, hi, 40), 0xABCD_EF01);
    assert_eq!(shf(true, true, lo, hi, 40), lo);
    assert_eq!(shf(false, true, lo, hi, 40), hi);
    // A rotate: shf.l with a == b.
    assert_eq!(shf(true, false, 0x8000_0001, 0x8000_0001, 1), 0x0000_0003);
}

#[test]
fn bmsk_and_szext_take_widths_by_clamp_or_wrap() {
    let bmsk =
        |clamp, pos: u32, w: u32| i(ArithOp::Bmsk { clamp }, Ty::B32, pos as u64, w as u64) as u32;
    assert_eq!(bmsk(false, 4, 8), 0x0000_0FF0);
    assert_eq!(bmsk(true, 28, 8), 0xF000_0000); // bits past 31 dropped
    assert_eq!(bmsk(true, 0, 40), u32::MAX); // width capped at 32
    assert_eq!(bmsk(false, 0, 40), 0xFF); // width 40 mod 32 = 8
    assert_eq!(bmsk(true, 40, 4), 0); // position capped at 32: nothing left
    let szext =
        |clamp, ty, a: u32, n: u32| i(ArithOp::Szext { clamp }, ty, a as u64, n as u64) as u32;
    assert_eq!(szext(true, Ty::S32, 0x0000_00F0, 8), 0xFFFF_FFF0); // bit 7 set: negative
    assert_eq!(szext(true, Ty::U32, 0x0000_01F0, 8), 0x0000_00F0);
    assert_eq!(szext(true, Ty::S32, 0x1234_5678, 0), 0);
    assert_eq!(szext(true, Ty::S32, 0x8234_5678, 40), 0x8234_5678); // n capped at 32
    assert_eq!(szext(false, Ty::U32, 0x1234_5678, 36), 0x8); // n = 36 mod 32 = 4
}

#[test]
fn bfind_finds_the_top_non_sign_bit() {
    let bfind = |shiftamt, ty, a: u64| i(ArithOp::Bfind { shiftamt }, ty, a, 0) as u32;
    assert_eq!(bfind(false, Ty::U32, 0x0001_0000), 16);
    assert_eq!(bfind(true, Ty::U32, 0x0001_0000), 15); // 31 - 16
    assert_eq!(bfind(false, Ty::U32, 0), u32::MAX);
    assert_eq!(bfind(false, Ty::S32, s32(-1)), u32::MAX); // no bit differs from the sign
    assert_eq!(bfind(false, Ty::S32, s32(-5)), 2); // !(-5) = 4 → bit 2
    assert_eq!(bfind(false, Ty::S64, 1 << 40), 40);
    assert_eq!(bfind(true, Ty::U64, 1 << 40), 23); // 63 - 40
}

#[test]
fn dp4a_and_dp2a_accumulate_byte_products() {
    let dp4a = |a_signed, b_signed, ty, a: u32, b: u32, c: u32| {
        i3(
            ArithOp::Dp4a { a_signed, b_signed },
            ty,
            a as u64,
            b as u64,
            c as u64,
        ) as u32
    };
    // Bytes a = [1, 2, 3, 4], b = [5, 6, 7, 8] (low byte first): 5 + 12 + 21 + 32 = 70.
    assert_eq!(
        dp4a(false, false, Ty::U32, 0x0403_0201, 0x0807_0605, 10),
        80
    );
    // a's bytes signed: 0xFF is -1, so [-1, 2, 3, 4] · [5, 6, 7, 8] = -5 + 12 + 21 + 32 = 60;
    // unsigned, 0xFF is 255: 1275 + 65 = 1340.
    assert_eq!(dp4a(true, false, Ty::S32, 0x0403_02FF, 0x0807_0605, 0), 60);
    assert_eq!(
        dp4a(false, false, Ty::U32, 0x0403_02FF, 0x0807_0605, 0),
        1340
    );
    // Both signed, all -128: 4 × 16384 = 65536, plus an accumulator of -1.
    assert_eq!(
        dp4a(true, true, Ty::S32, 0x8080_8080, 0x8080_8080, u32::MAX),
        65535
    );
    let dp2a = |hi, a_signed, b_signed, a: u32, b: u32, c: u32| {
        let ty = if a_signed || b_signed {
            Ty::S32
        } else {
            Ty::U32
        };
        i3(
            ArithOp::Dp2a {
                hi,
                a_signed,
                b_signed,
            },
            ty,
            a as u64,
            b as u64,
            c as u64,
        ) as u32
    };
    // Halves a = [3, -2] (0xFFFE as signed), bytes b = [5, 6, 7, 8].
    let (a, b) = (0xFFFE_0003, 0x0807_0605);
    assert_eq!(dp2a(false, true, false, a, b, 1), (1 + 15 - 12) as u32); // lo: bytes 5, 6
    assert_eq!(dp2a(true, true, false, a, b, 0), (21 - 16) as u32); // hi: bytes 7, 8
    assert_eq!(dp2a(false, false, false, a, b, 0), 15 + 65534 * 6);
}

#[test]
fn carry_chains_carry_and_borrow() {
    let add =
        |carry_in, ty, a: u64, b: u64, cf| carry(ArithOp::AddC { carry_in }, ty, [a, b, 0, 0], cf);
    assert_eq!(add(false, Ty::U32, 0xFFFF_FFFF, 1, true), (0, true)); // carry in ignored
    assert_eq!(add(true, Ty::U32, 0xFFFF_FFFF, 0, true), (0, true));
    assert_eq!(add(true, Ty::U32, 5, 6, true), (12, false));
    assert_eq!(
        add(true, Ty::U64, u64::MAX, u64::MAX, true),
        (u64::MAX, true)
    );
    let sub =
        |carry_in, a: u64, b: u64, cf| carry(ArithOp::SubC { carry_in }, Ty::U32, [a, b, 0, 0], cf);
    // 0 - 1 borrows; 5 - (4 + 1) does not; 5 - (5 + 1) does.
    assert_eq!(sub(false, 0, 1, false), (0xFFFF_FFFF, true));
    assert_eq!(sub(true, 5, 4, true), (0, false));
    assert_eq!(sub(true, 5, 5, true), (0xFFFF_FFFF, true));
    let mad = |hi, carry_in, ty, a: u64, b: u64, c: u64, cf| {
        carry(ArithOp::MadC { hi, carry_in }, ty, [a, b, c, 0], cf)
    };
    // 0xFFFFFFFF² = 0xFFFFFFFE_00000001: low word 1, high word 0xFFFFFFFE.
    assert_eq!(
        mad(
            false,
            false,
            Ty::U32,
            0xFFFF_FFFF,
            0xFFFF_FFFF,
            0xFFFF_FFFF,
            false
        ),
        (0, true)
    );
    assert_eq!(
        mad(true, true, Ty::U32, 0xFFFF_FFFF, 0xFFFF_FFFF, 1, true),
        (0, true)
    );
    assert_eq!(
        mad(true, true, Ty::U32, 0xFFFF_FFFF, 0xFFFF_FFFF, 0, true),
        (0xFFFF_FFFF, false)
    );
    // Signed: -1 × 1 = -1, high word all ones.
    assert_eq!(
        mad(true, false, Ty::S32, s32(-1), 1, 0, false),
        (0xFFFF_FFFF, false)
    );
}

#[test]
fn min_max_with_relu_nan_and_three_inputs() {
    let mm = |max, relu, nan, ty, a: u64, b: u64, c: Option<u64>| {
        let op = ArithOp::MinMax {
            max,
            relu,
            nan,
            three: c.is_some(),
        };
        arith(op, ty, FloatMode::default(), a, b, c.unwrap_or(0), 0).unwrap()
    };
    // Integers: three inputs, signed and unsigned; .relu clamps a negative result to 0.
    assert_eq!(
        mm(false, false, false, Ty::S32, s32(3), s32(-7), Some(s32(5))),
        s32(-7)
    );
    assert_eq!(
        mm(true, false, false, Ty::S32, s32(3), s32(-7), Some(s32(5))),
        s32(5)
    );
    assert_eq!(
        mm(true, false, false, Ty::U32, s32(3), s32(-7), Some(s32(5))),
        s32(-7)
    ); // 0xFFFFFFF9
    assert_eq!(mm(true, true, false, Ty::S32, s32(-3), s32(-7), None), 0);
    assert_eq!(
        mm(false, true, false, Ty::S32, s32(4), s32(9), None),
        s32(4)
    );
    // Floats: without .NaN a NaN input loses to the other; with it, the result is NaN.
    let nan = f32::NAN.to_bits() as u64;
    assert_eq!(mm(true, false, false, Ty::F32, nan, f(2.0), None), f(2.0));
    let r = mm(true, false, true, Ty::F32, nan, f(2.0), None);
    assert!(f32::from_bits(r as u32).is_nan());
    assert_eq!(
        mm(false, false, false, Ty::F32, f(1.5), f(-2.0), Some(f(0.5))),
        f(-2.0)
    );
}

#[test]
fn fns_finds_the_nth_set_bit_from_base() {
    let fns = |mask: u32, base: u32, offset: i32| {
        arith(
            ArithOp::Fns,
            Ty::B32,
            FloatMode::default(),
            u64::from(mask),
            u64::from(base),
            u64::from(offset as u32),
            0,
        )
        .unwrap() as u32
    };
    // The ISA's examples: 0xaaaaaaaa has the odd bits set; base counts itself.
    assert_eq!(fns(0xaaaa_aaaa, 3, 1), 3);
    assert_eq!(fns(0xaaaa_aaaa, 3, -1), 3);
    assert_eq!(fns(0xaaaa_aaaa, 2, 1), 3);
    assert_eq!(fns(0xaaaa_aaaa, 2, -1), 1);
    // The third set bit upward from 2 (3, 5, 7); offset 0 tests base alone; none found.
    assert_eq!(fns(0xaaaa_aaaa, 2, 3), 7);
    assert_eq!(fns(0xaaaa_aaaa, 2, 0), u32::MAX);
    assert_eq!(fns(0xaaaa_aaaa, 5, 0), 5);
    assert_eq!(fns(0x0000_0100, 9, 1), u32::MAX);
    assert_eq!(fns(0x0000_0100, 31, -1), 8);
}

/// `.relu` on half-precision `fma` and packed `min`/`max` with `.relu` / `.NaN`, per half.
#[test]
fn half_precision_relu_and_nan_forms_work_per_half() {
    let relu = FloatMode {
        relu: true,
        ..FloatMode::default()
    };
    // f16x2: halves {low, high}. 1.0 = 0x3c00, -2.0 = 0xc000, 3.0 = 0x4200.
    // fma(a, b, c) per half: low 1*1 + 2 = 3; high 1*(-2) + 0 = -2 -> relu 0.
    let a = 0x3c00_3c00;
    let b = 0xc000_3c00;
    let c = 0x0000_4000;
    assert_eq!(
        arith(ArithOp::Fma, Ty::F16x2, relu, a, b, c, 0).unwrap(),
        0x0000_4200
    );
    assert_eq!(
        arith(ArithOp::Fma, Ty::F16x2, FloatMode::default(), a, b, c, 0).unwrap(),
        0xc000_4200
    );
    // max.NaN.bf16x2: the low half has a NaN (0x7fc1) and gives the canonical NaN; the high
    // half is max(1.0, 2.0). max.relu.bf16x2: max(-1, -2) = -1 -> 0, and max(1, 2) = 2.
    let op = |relu, nan| ArithOp::MinMax {
        max: true,
        relu,
        nan,
        three: false,
    };
    let r = arith(
        op(false, true),
        Ty::Bf16x2,
        FloatMode::default(),
        0x3f80_7fc1,
        0x4000_3f80,
        0,
        0,
    )
    .unwrap();
    assert_eq!(r >> 16, 0x4000);
    assert_eq!(r & 0x7f80, 0x7f80, "low half NaN: {r:#x}");
    assert_ne!(r & 0x7f, 0, "low half NaN: {r:#x}");
    let r = arith(
        op(true, false),
        Ty::Bf16x2,
        FloatMode::default(),
        0x3f80_bf80,
        0x4000_c000,
        0,
        0,
    )
    .unwrap();
    assert_eq!(r, 0x4000_0000);
}

/// NaNs are told by their bits: exponent all ones and a nonzero fraction, either sign, quiet
/// or signalling; infinities and the largest finite values are not NaNs.
#[test]
fn nan_classification_by_bits() {
    for (bits, nan) in [
        (0x7FF0_0000_0000_0000u64, false),
        (0xFFF0_0000_0000_0000, false),
        (0x7FEF_FFFF_FFFF_FFFF, false),
        (0x8000_0000_0000_0001, false),
        (0x7FF0_0000_0000_0001, true),
        (0xFFF8_0000_0000_0000, true),
        (0x7FFF_FFFF_FFFF_FFFF, true),
    ] {
        assert_eq!(is_nan64(f64::from_bits(bits)), nan, "{bits:#x}");
    }
    for (bits, nan) in [
        (0x7F80_0000u32, false),
        (0xFF80_0000, false),
        (0x7F7F_FFFF, false),
        (0x7F80_0001, true),
        (0xFFC0_0000, true),
        (0x7FFF_FFFF, true),
    ] {
        assert_eq!(is_nan32(f32::from_bits(bits)), nan, "{bits:#x}");
    }
    // `sqrt.rn.f64` of a negative subnormal: the canonical NaN, not the host's.
    let r = arith(
        ArithOp::Sqrt,
        Ty::F64,
        m(RN),
        0x8000_0000_0000_0001,
        0,
        0,
        0,
    )
    .unwrap();
    assert_eq!(r, 0x7FFF_FFFF_FFFF_FFFF);
}
