//! Integer, bit-manipulation and logic operations: PTX ISA "Integer Arithmetic Instructions"
//! (`add sub mul mad mul24 mad24 sad div rem abs neg min max popc clz bfe bfi brev`),
//! "Logic and Shift Instructions" (`and or xor not cnot shl shr`) and "Data Movement and
//! Conversion Instructions: prmt".
//!
//! Every source is first reduced to its type (sign- or zero-extended from the type's width);
//! results are returned masked to the width of the result type.

use kir::inst::{ArithOp, FloatMode, PrmtMode, Ty};

use super::AluError;

/// All-ones in the low `n` bits (`n` ≤ 64).
#[inline]
fn low_mask(n: u32) -> u64 {
    if n >= 64 {
        u64::MAX
    } else {
        (1u64 << n) - 1
    }
}

/// Clamps to the range of a `w`-bit integer of the given signedness, then masks to `w` bits.
#[inline]
fn saturate(v: i128, w: u32, signed: bool) -> u64 {
    let (lo, hi) = if signed {
        (-(1i128 << (w - 1)), (1i128 << (w - 1)) - 1)
    } else {
        (0, (1i128 << w) - 1)
    };
    (v.clamp(lo, hi) as u64) & low_mask(w)
}

/// The full `2w`-bit product of two `w`-bit values (`w` ≤ 64), as an `i128` bit pattern.
#[inline]
fn wide_product(ty: Ty, a: u64, b: u64) -> i128 {
    if ty.is_signed() {
        ty.extend(a) as i64 as i128 * ty.extend(b) as i64 as i128
    } else {
        (ty.extend(a) as u128 * ty.extend(b) as u128) as i128
    }
}

/// A 24-bit `mul24`/`mad24` source: the low 24 bits, sign-extended from bit 23 when signed.
#[inline]
fn src24(signed: bool, v: u64) -> i64 {
    if signed {
        ((v << 40) as i64) >> 40
    } else {
        (v & 0xFF_FFFF) as i64
    }
}

/// Evaluates an integer/bitwise op. `d` is only used by `bfi`.
pub(crate) fn arith(
    op: ArithOp,
    ty: Ty,
    mode: FloatMode,
    a: u64,
    b: u64,
    c: u64,
    d: u64,
) -> Result<u64, AluError> {
    let unsupported = Err(AluError::Unsupported { op, ty });
    let w = ty.bits();
    if w > 64 {
        return unsupported; // .b128 carries no per-lane arithmetic
    }
    let mask = ty.mask();
    let signed = ty.is_signed();
    // Values reduced to the type: `sa`/`sb` sign-extended when signed, `ua`/`ub` zero-extended.
    let (sa, sb, sc) = (
        ty.extend(a) as i64,
        ty.extend(b) as i64,
        ty.extend(c) as i64,
    );
    let (ua, ub, uc) = (a & mask, b & mask, c & mask);
    let r = match op {
        // `.sat` (s32 only in PTX): the exact result clamped to the type's range.
        ArithOp::Add if mode.sat && signed => saturate(sa as i128 + sb as i128, w, true),
        ArithOp::Sub if mode.sat && signed => saturate(sa as i128 - sb as i128, w, true),
        ArithOp::Add => ua.wrapping_add(ub),
        ArithOp::Sub => ua.wrapping_sub(ub),
        ArithOp::MulLo | ArithOp::Mul => ua.wrapping_mul(ub),
        ArithOp::MulHi => (wide_product(ty, a, b) >> w) as u64,
        ArithOp::MulWide => {
            if w > 32 {
                return unsupported;
            }
            return Ok(wide_product(ty, a, b) as u64 & low_mask(2 * w));
        }
        ArithOp::MadLo | ArithOp::Fma => ua.wrapping_mul(ub).wrapping_add(uc),
        ArithOp::MadHi => {
            let hi = (wide_product(ty, a, b) >> w) as u64;
            if mode.sat && signed {
                // `mad.hi.sat.s32`: the high half plus c, saturated.
                saturate(ty.extend(hi) as i64 as i128 + sc as i128, w, true)
            } else {
                hi.wrapping_add(uc)
            }
        }
        ArithOp::MadWide => {
            if w > 32 {
                return unsupported;
            }
            // `c` and the result are 2w bits wide.
            return Ok((wide_product(ty, a, b) as u64).wrapping_add(c) & low_mask(2 * w));
        }
        ArithOp::Mul24Lo | ArithOp::Mul24Hi | ArithOp::Mad24Lo | ArithOp::Mad24Hi => {
            if w != 32 {
                return unsupported;
            }
            // PTX "mul24": the 48-bit product of the 24-bit sources; `.lo` keeps bits 31..0,
            // `.hi` bits 47..16.
            let p = src24(signed, a) * src24(signed, b);
            let part = match op {
                ArithOp::Mul24Lo | ArithOp::Mad24Lo => p as u64,
                _ => (p >> 16) as u64,
            } & 0xFFFF_FFFF;
            match op {
                ArithOp::Mul24Lo | ArithOp::Mul24Hi => part,
                _ if mode.sat && signed => {
                    saturate(part as u32 as i32 as i128 + sc as i128, 32, true)
                }
                _ => part.wrapping_add(uc),
            }
        }
        ArithOp::Div => div(signed, sa, sb, ua, ub, mask),
        ArithOp::Rem => rem(signed, sa, sb, ua, ub),
        ArithOp::Min | ArithOp::Max => {
            let a_less = if signed { sa < sb } else { ua < ub };
            if a_less == (op == ArithOp::Min) {
                ua
            } else {
                ub
            }
        }
        ArithOp::Abs => {
            if signed {
                sa.wrapping_abs() as u64
            } else {
                ua
            }
        }
        ArithOp::Neg => ua.wrapping_neg(),
        // On `.pred` the mask is 1, so these are the logical operations.
        ArithOp::And => ua & ub,
        ArithOp::Or => ua | ub,
        ArithOp::Xor => ua ^ ub,
        ArithOp::Not => !ua,
        ArithOp::CNot => (ua == 0) as u64,
        // PTX "shl"/"shr": the amount is an unsigned 32-bit value; amounts at or beyond the
        // width give 0, or for signed `shr` the sign in every bit.
        ArithOp::Shl => {
            let n = b as u32;
            if n >= w {
                0
            } else {
                ua << n
            }
        }
        ArithOp::Shr => {
            let n = b as u32;
            if signed {
                (sa >> n.min(63)) as u64
            } else if n >= w {
                0
            } else {
                ua >> n
            }
        }
        ArithOp::Popc => return Ok(ua.count_ones() as u64),
        ArithOp::Clz => return Ok((ua.leading_zeros() - (64 - w)) as u64),
        ArithOp::Brev => ua.reverse_bits() >> (64 - w),
        ArithOp::Bfe => bfe(w, signed, ua, b, c),
        ArithOp::Bfi => bfi(w, a, ub, c, d),
        ArithOp::Prmt(m) => prmt(m, a as u32, b as u32, c as u32) as u64,
        ArithOp::Lop3 => lop3(a as u32, b as u32, c as u32, d as u8) as u64,
        ArithOp::MinMax {
            max, relu, three, ..
        } => {
            let pick = |x: u64, y: u64| {
                let x_less = if signed {
                    ((x << (64 - w)) as i64) < ((y << (64 - w)) as i64)
                } else {
                    x < y
                };
                if x_less != max {
                    x
                } else {
                    y
                }
            };
            let r = pick(ua, ub);
            let r = if three { pick(r, uc) } else { r };
            // `.relu`: a negative result becomes 0.
            if relu && signed && (r >> (w - 1)) & 1 == 1 {
                0
            } else {
                r
            }
        }
        // The warp executes carry chains through `alu::carry`, which also gives the carry
        // out; here (validation, callers without a carry flag) the carry in is clear.
        ArithOp::AddC { .. } | ArithOp::SubC { .. } | ArithOp::MadC { .. } => {
            return Ok(super::carry(op, ty, [a, b, c, d], false).0)
        }
        ArithOp::Shf { left, clamp } => shf(left, clamp, a as u32, b as u32, c as u32) as u64,
        ArithOp::Bmsk { clamp } => bmsk(clamp, a as u32, b as u32) as u64,
        ArithOp::Fns => fns(a as u32, b as u32, c as u32 as i32) as u64,
        ArithOp::Szext { clamp } => szext(clamp, signed, a as u32, b as u32) as u64,
        ArithOp::Bfind { shiftamt } => return Ok(bfind(shiftamt, signed, w, ua) as u64),
        ArithOp::Dp4a { a_signed, b_signed } => {
            dp(a as u32, b as u32, c as u32, 4, 0, a_signed, b_signed) as u64
        }
        ArithOp::Dp2a {
            hi,
            a_signed,
            b_signed,
        } => dp(
            a as u32,
            b as u32,
            c as u32,
            2,
            if hi { 2 } else { 0 },
            a_signed,
            b_signed,
        ) as u64,
        ArithOp::Sad => {
            let diff = if signed {
                (sa as i128 - sb as i128).unsigned_abs() as u64
            } else {
                ua.abs_diff(ub)
            };
            diff.wrapping_add(uc)
        }
        _ => return unsupported,
    };
    Ok(r & mask)
}

/// `lop3`: each bit of the result looks up `lut` at `4a + 2b + c` of the same bit of the
/// sources (the table of `F(0xF0, 0xCC, 0xAA)` for the function `F` it encodes).
fn lop3(a: u32, b: u32, c: u32, lut: u8) -> u32 {
    (0..8).filter(|k| lut >> k & 1 == 1).fold(0, |r, k| {
        let pick = |bit: u32, x: u32| if k & bit != 0 { x } else { !x };
        r | (pick(4, a) & pick(2, b) & pick(1, c))
    })
}

/// `shf`: the 64-bit value `{hi, lo}` shifted by `n` (capped at 32, or taken modulo 32);
/// left keeps the upper 32 bits, right the lower.
fn shf(left: bool, clamp: bool, lo: u32, hi: u32, n: u32) -> u32 {
    let n = if clamp { n.min(32) } else { n & 31 };
    let v = u64::from(hi) << 32 | u64::from(lo);
    if left {
        ((v << n) >> 32) as u32
    } else {
        (v >> n) as u32
    }
}

/// `bmsk`: `width` ones from bit `pos`; bits past 31 are dropped.
/// `fns`: the bit position of the `|offset|`-th set bit of `mask` counted from `base` (which
/// counts itself) upward or downward; `base` itself for `offset == 0` if set; else all ones
/// (PTX ISA, "fns").
fn fns(mask: u32, base: u32, offset: i32) -> u32 {
    let set = |pos: u32| mask >> pos & 1 != 0;
    if offset == 0 {
        return if base < 32 && set(base) {
            base
        } else {
            u32::MAX
        };
    }
    let mut count = offset.unsigned_abs() - 1;
    let mut pos = i64::from(base);
    while (0..32).contains(&pos) {
        if set(pos as u32) {
            if count == 0 {
                return pos as u32;
            }
            count -= 1;
        }
        pos += if offset > 0 { 1 } else { -1 };
    }
    u32::MAX
}

fn bmsk(clamp: bool, pos: u32, width: u32) -> u32 {
    let (pos, width) = if clamp {
        (pos.min(32), width.min(32))
    } else {
        (pos & 31, width & 31)
    };
    let ones = if width == 0 {
        0
    } else {
        u64::MAX >> (64 - width)
    };
    (ones << pos) as u32
}

/// `szext`: the low `n` bits of `a`, sign- or zero-extended (0 when `n` is 0).
fn szext(clamp: bool, signed: bool, a: u32, n: u32) -> u32 {
    let n = if clamp { n.min(32) } else { n & 31 };
    match n {
        0 => 0,
        32 => a,
        _ if signed => ((a << (32 - n)) as i32 >> (32 - n)) as u32,
        _ => a & ((1 << n) - 1),
    }
}

/// `bfind`: the position of the most significant bit that differs from the sign (for signed
/// types) or is set (unsigned), as a distance from the top with `shiftamt`; all ones when
/// there is none.
fn bfind(shiftamt: bool, signed: bool, w: u32, a: u64) -> u32 {
    let mask = if w == 64 { u64::MAX } else { (1 << w) - 1 };
    let negative = signed && a >> (w - 1) & 1 == 1;
    let v = if negative { !a & mask } else { a & mask };
    if v == 0 {
        return u32::MAX;
    }
    let pos = 63 - v.leading_zeros();
    if shiftamt {
        w - 1 - pos
    } else {
        pos
    }
}

/// `dp4a` (`n` = 4) and `dp2a` (`n` = 2): `acc` plus the products of the `n` lanes of `a`
/// (bytes, or 16-bit halves for `dp2a`) with bytes `first..first + n` of `b`, wrapping.
fn dp(a: u32, b: u32, acc: u32, n: u32, first: u32, a_signed: bool, b_signed: bool) -> u32 {
    let lane_bits = 32 / n;
    let ext = |x: u32, bits: u32, signed: bool| -> i64 {
        let x = x & ((1u64 << bits) - 1) as u32;
        if signed {
            i64::from(((x << (32 - bits)) as i32) >> (32 - bits))
        } else {
            i64::from(x)
        }
    };
    (0..n).fold(acc, |sum, i| {
        let ai = ext(a >> (i * lane_bits), lane_bits, a_signed);
        let bi = ext(b >> ((first + i) * 8), 8, b_signed);
        sum.wrapping_add((ai * bi) as u32)
    })
}

/// Integer division truncating toward zero. PTX says division by zero yields an unspecified,
/// machine-specific value; Switchyard gives all ones for signed and unsigned types alike, which
/// is what the compiler's division sequence produces (its final fix-up writes `~divisor` when
/// the divisor is zero). `MIN / -1` wraps to `MIN`.
#[inline]
fn div(signed: bool, sa: i64, sb: i64, ua: u64, ub: u64, mask: u64) -> u64 {
    if ub == 0 {
        mask
    } else if signed {
        // The operands are sign-extended from the type width, so only the 64-bit case can
        // overflow; a narrower `MIN / -1` gives `-MIN`, which the final mask wraps to `MIN`.
        sa.wrapping_div(sb) as u64
    } else {
        ua / ub
    }
}

/// Integer remainder with the sign of the dividend. By zero it yields the dividend (as the
/// hardware sequence does: `a - q*0`); `MIN % -1` is 0.
#[inline]
fn rem(signed: bool, sa: i64, sb: i64, ua: u64, ub: u64) -> u64 {
    if signed {
        if sb == 0 {
            sa as u64
        } else {
            sa.wrapping_rem(sb) as u64
        }
    } else if ub == 0 {
        ua
    } else {
        ua % ub
    }
}

/// PTX "bfe": `pos = b[7:0]`, `len = c[7:0]`; result bit `i` is `a[pos+i]` for
/// `i < len && pos+i <= msb`, and otherwise `sbit`, which is 0 for unsigned types or `len == 0`
/// and else `a[min(pos+len-1, msb)]` (the top bit of the extracted field).
#[inline]
fn bfe(w: u32, signed: bool, a: u64, b: u64, c: u64) -> u64 {
    let pos = (b & 0xFF) as u32;
    let len = (c & 0xFF) as u32;
    let msb = w - 1;
    let sbit = signed && len != 0 && (a >> (pos + len - 1).min(msb)) & 1 == 1;
    // Number of bits actually taken from `a`.
    let n = if pos > msb { 0 } else { len.min(w - pos) };
    let field = if n == 0 { 0 } else { (a >> pos) & low_mask(n) };
    if sbit {
        field | !low_mask(n)
    } else {
        field
    }
}

/// PTX "bfi": `bfi f, a, b, pos, len` copies `b` and replaces bits `pos..pos+len` (clipped to
/// the width) with the low bits of `a`; `pos = c[7:0]`, `len = d[7:0]`.
#[inline]
fn bfi(w: u32, a: u64, b: u64, c: u64, d: u64) -> u64 {
    let pos = (c & 0xFF) as u32;
    let len = (d & 0xFF) as u32;
    if pos >= w {
        return b;
    }
    let n = len.min(w - pos);
    let field = low_mask(n) << pos;
    (b & !field) | ((a << pos) & field)
}

/// The byte selectors (for result bytes 0..3) of the special `prmt` modes, indexed by
/// `c[1:0]` (PTX ISA "prmt", table of the `.f4e .b4e .rc8 .ecl .ecr .rc16` modes).
const PRMT_TABLE: [[[u8; 4]; 4]; 6] = [
    // f4e: forward 4 extract
    [[0, 1, 2, 3], [1, 2, 3, 4], [2, 3, 4, 5], [3, 4, 5, 6]],
    // b4e: backward 4 extract
    [[0, 7, 6, 5], [1, 0, 7, 6], [2, 1, 0, 7], [3, 2, 1, 0]],
    // rc8: replicate byte
    [[0, 0, 0, 0], [1, 1, 1, 1], [2, 2, 2, 2], [3, 3, 3, 3]],
    // ecl: edge clamp left
    [[0, 1, 2, 3], [1, 1, 2, 3], [2, 2, 2, 3], [3, 3, 3, 3]],
    // ecr: edge clamp right
    [[0, 0, 0, 0], [0, 1, 1, 1], [0, 1, 2, 2], [0, 1, 2, 3]],
    // rc16: replicate half-word
    [[0, 1, 0, 1], [2, 3, 2, 3], [0, 1, 0, 1], [2, 3, 2, 3]],
];

/// PTX "prmt.b32{.mode} d, a, b, c": picks bytes from the 8-byte value `{b, a}` (a is bytes
/// 0..3). In the default mode each result byte `i` is chosen by the nibble `c[4i+3:4i]`: the
/// low three bits select a byte, and bit 3 replaces the byte with its sign bit replicated.
#[inline]
pub(crate) fn prmt(mode: PrmtMode, a: u32, b: u32, c: u32) -> u32 {
    let src = (b as u64) << 32 | a as u64;
    let byte = |i: u32| ((src >> (8 * i)) & 0xFF) as u32;
    let mut r = 0u32;
    if mode == PrmtMode::Generic {
        for i in 0..4 {
            let sel = (c >> (4 * i)) & 0xF;
            let mut v = byte(sel & 7);
            if sel & 8 != 0 {
                v = if v & 0x80 != 0 { 0xFF } else { 0 };
            }
            r |= v << (8 * i);
        }
    } else {
        let table = match mode {
            PrmtMode::F4e => 0,
            PrmtMode::B4e => 1,
            PrmtMode::Rc8 => 2,
            PrmtMode::Ecl => 3,
            PrmtMode::Ecr => 4,
            _ => 5,
        };
        let sels = PRMT_TABLE[table][(c & 3) as usize];
        for (i, &s) in sels.iter().enumerate() {
            r |= byte(s as u32) << (8 * i);
        }
    }
    r
}
