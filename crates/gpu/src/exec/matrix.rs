//! Execution of the warp-level matrix instructions and asynchronous copies (PTX ISA
//! §9.7.14, §9.7.9.25): the warp's lanes exchange their fragments, so every one of these
//! needs the whole warp (`.sync.aligned`).
//!
//! **Arithmetic of `mma`.** The ISA leaves the order and precision of a tensor core's
//! internal accumulation unspecified. Floating-point products of f16, bf16 and tf32 values
//! are exact in f64, so each result element is the sum of its K products and C computed in
//! f64 and rounded once to the destination type; f64 `mma` is a chain of fused
//! multiply-adds in K order, and integer `mma` sums exactly and wraps (or saturates with
//! `.satfinite`). A tf32 operand keeps the sign, exponent and top 10 mantissa bits of its
//! f32 register, as the tensor core reads it.

use crate::memory::GlobalAccess;
use kir::inst::{Fp8, MbarrierOp, Rounding, Space, Ty};
use kir::matrix::{self, Frag, MmaElem, MmaShape, WMMA_PART_REGS};

use super::{lanes, Exec, WARP_SIZE};
use crate::alu;
use crate::alu::f16_value;
use crate::error::ExecError;

/// Every lane of a warp.
const FULL: u32 = u32::MAX;

/// The value of one element's bits as an f64 (floats) or an integer.
fn float_of(e: MmaElem, bits: u64) -> f64 {
    match e {
        MmaElem::F16 => f16_value(bits as u16),
        MmaElem::Bf16 => f64::from(f32::from_bits((bits as u32) << 16)),
        MmaElem::Tf32 => f64::from(f32::from_bits(bits as u32 & 0xffff_e000)),
        MmaElem::F32 => f64::from(f32::from_bits(bits as u32)),
        MmaElem::F64 => f64::from_bits(bits),
        MmaElem::S8 | MmaElem::U8 | MmaElem::S32 => int_of(e, bits) as f64,
    }
}

fn int_of(e: MmaElem, bits: u64) -> i64 {
    match e {
        MmaElem::S8 => i64::from(bits as u8 as i8),
        MmaElem::U8 => i64::from(bits as u8),
        _ => i64::from(bits as u32 as i32),
    }
}

/// The bits of a result element of type `e`.
fn result_bits(e: MmaElem, v: f64) -> u64 {
    match e {
        MmaElem::F16 => alu::cvt(
            Ty::F16,
            Ty::F64,
            Some(Rounding::Nearest),
            false,
            false,
            v.to_bits(),
        ),
        MmaElem::F64 => v.to_bits(),
        _ => u64::from((v as f32).to_bits()),
    }
}

/// The address of element (row, col) of a `wmma` tile at `base` with leading dimension
/// `stride` (elements).
pub(crate) fn wmma_element_addr(
    base: u64,
    stride: u64,
    row_major: bool,
    e: MmaElem,
    (r, c): (u32, u32),
) -> u64 {
    let index = if row_major {
        u64::from(r) * stride + u64::from(c)
    } else {
        u64::from(c) * stride + u64::from(r)
    };
    base.wrapping_add(index * u64::from(e.bits() / 8))
}

/// An f32 rounded to TensorFloat-32: 13 low mantissa bits dropped, rounding to nearest
/// (ties to even, or away from zero for `.rna`) or toward zero; NaN stays NaN, a finite
/// value that rounds past the largest becomes infinity (or, `satfinite`, the largest).
pub(crate) fn tf32_bits(
    a: u32,
    rounding: Rounding,
    away: bool,
    relu: bool,
    satfinite: bool,
) -> u32 {
    const DROP: u32 = 0x1fff;
    let exp_all = a & 0x7f80_0000 == 0x7f80_0000;
    if exp_all && a & 0x007f_ffff != 0 {
        // NaN: keep a mantissa bit set so it stays a NaN once the low bits are cleared.
        return (a & !DROP) | 0x0040_0000;
    }
    let mut r = if exp_all {
        a
    } else {
        // Rounding the magnitude: the sign bit is untouched by the carries below.
        let increment = match (rounding, away) {
            (Rounding::Nearest, true) => 0x1000,
            (Rounding::Nearest, false) => 0x0fff + ((a >> 13) & 1),
            _ => 0,
        };
        a.wrapping_add(increment) & !DROP
    };
    if satfinite && r & 0x7fff_ffff == 0x7f80_0000 {
        r = (r & 0x8000_0000) | 0x7f7f_e000;
    }
    if relu && r & 0x8000_0000 != 0 {
        r = 0;
    }
    r
}

/// A matrix gathered from the fragments of the 32 lanes, row-major.
struct Gathered {
    cols: u32,
    values: Vec<u64>,
}

impl Gathered {
    fn at(&self, r: u32, c: u32) -> u64 {
        self.values[(r * self.cols + c) as usize]
    }

    /// Every element as an f64, row-major.
    fn floats(&self, e: MmaElem) -> Vec<f64> {
        self.values.iter().map(|&b| float_of(e, b)).collect()
    }

    /// Every element as an integer, row-major.
    fn ints(&self, e: MmaElem) -> Vec<i64> {
        self.values.iter().map(|&b| int_of(e, b)).collect()
    }
}

impl<M: GlobalAccess + ?Sized> Exec<'_, '_, '_, M> {
    /// The error for a warp-collective instruction that not every lane executes.
    fn needs_full_warp(&self, exec: u32) -> Result<(), ExecError> {
        if exec == FULL {
            return Ok(());
        }
        Err(ExecError::Collective {
            kernel: self.ctx.kernel.name.clone(),
            location: self.ctx.location(kir::InstId(self.pc)),
            what: format!(
                "warp {} executed a `.sync.aligned` matrix instruction with lanes {exec:#010x} \
                 active; it needs all 32 lanes",
                self.warp.index
            ),
        })
    }

    /// Element `i` of the fragment whose registers are the sources `first..` of lane `l`.
    fn frag_bits(&self, first: usize, e: MmaElem, lane: usize, i: u32) -> u64 {
        let per = e.per_reg();
        let reg = self.read(self.inst.srcs[first + (i / per) as usize], lane);
        if per == 1 {
            reg
        } else {
            (reg >> ((i % per) * e.bits())) & ((1 << e.bits()) - 1)
        }
    }

    fn gather(&self, first: usize, shape: MmaShape, frag: Frag, e: MmaElem) -> Gathered {
        let (rows, cols) = match frag {
            Frag::A => (shape.m, shape.k),
            Frag::B => (shape.k, shape.n),
            Frag::C => (shape.m, shape.n),
        };
        let cols = u32::from(cols);
        let mut values = vec![0; usize::from(rows) * cols as usize];
        for lane in 0..WARP_SIZE {
            for i in 0..matrix::frag_elems(shape, frag) {
                let (r, c) = matrix::mma_element(shape, frag, e, lane as u32, i);
                values[(r * cols + c) as usize] = self.frag_bits(first, e, lane, i);
            }
        }
        Gathered { cols, values }
    }

    /// `mma.sync`: D = A·B + C over the warp's fragments.
    pub(super) fn mma(
        &mut self,
        exec: u32,
        shape: MmaShape,
        (a, b, c, d): (MmaElem, MmaElem, MmaElem, MmaElem),
        satfinite: bool,
    ) -> Result<(), ExecError> {
        self.needs_full_warp(exec)?;
        let na = matrix::frag_regs(shape, Frag::A, a) as usize;
        let nb = matrix::frag_regs(shape, Frag::B, b) as usize;
        let ma = self.gather(0, shape, Frag::A, a);
        let mb = self.gather(na, shape, Frag::B, b);
        let mc = self.gather(na + nb, shape, Frag::C, c);
        let (m, n, k) = (u32::from(shape.m), u32::from(shape.n), u32::from(shape.k));
        let mut out = vec![0u64; (m * n) as usize];
        if d == MmaElem::S32 {
            // Exact: |products| < 2^16, at most 32 of them, so an i64 never overflows.
            let (ia, ib) = (ma.ints(a), mb.ints(b));
            for r in 0..m {
                for col in 0..n {
                    let dot: i64 = (0..k)
                        .map(|kk| ia[(r * k + kk) as usize] * ib[(kk * n + col) as usize])
                        .sum();
                    let sum = int_of(c, mc.at(r, col)) + dot;
                    let v = if satfinite {
                        sum.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32
                    } else {
                        sum as i32
                    };
                    out[(r * n + col) as usize] = u64::from(v as u32);
                }
            }
        } else {
            // Each element decoded once (a product's inputs are read K or M times).
            let (fa, fb) = (ma.floats(a), mb.floats(b));
            for r in 0..m {
                for col in 0..n {
                    let row = &fa[(r * k) as usize..((r + 1) * k) as usize];
                    let at = |kk: u32| fb[(kk * n + col) as usize];
                    let acc = float_of(c, mc.at(r, col));
                    out[(r * n + col) as usize] = if d == MmaElem::F64 {
                        (0..k)
                            .fold(acc, |s, kk| row[kk as usize].mul_add(at(kk), s))
                            .to_bits()
                    } else {
                        let sum = (0..k).fold(acc, |s, kk| s + row[kk as usize] * at(kk));
                        result_bits(d, sum)
                    };
                }
            }
        }
        // Scatter D (after every source was read: D may be C's registers).
        let per = d.per_reg();
        for lane in 0..WARP_SIZE {
            let mut regs = [0u64; 4];
            for i in 0..matrix::frag_elems(shape, Frag::C) {
                let (r, col) = matrix::mma_element(shape, Frag::C, d, lane as u32, i);
                let v = out[(r * n + col) as usize];
                regs[(i / per) as usize] |= if per == 1 {
                    v
                } else {
                    v << ((i % per) * d.bits())
                };
            }
            for (slot, &v) in regs.iter().enumerate().take(self.inst.n_dsts as usize) {
                self.write(slot, lane, v);
            }
        }
        Ok(())
    }

    /// Writes every lane's destinations once all sources are read: after register
    /// allocation a destination may share a register with a source another lane (or a later
    /// element) still reads.
    fn write_all(&mut self, exec: u32, out: &[[u64; 4]; WARP_SIZE]) {
        let n = self.inst.n_dsts as usize;
        for lane in lanes(exec) {
            for (k, &v) in out[lane].iter().enumerate().take(n) {
                self.write(k, lane, v);
            }
        }
    }

    /// The address of element (row, col) of a `wmma` tile.
    fn wmma_addr(
        &self,
        lane: usize,
        offset: i32,
        row_major: bool,
        e: MmaElem,
        (r, c): (u32, u32),
    ) -> u64 {
        let base = self
            .read(self.inst.srcs[0], lane)
            .wrapping_add(offset as i64 as u64);
        let stride = self.read(self.inst.srcs[1], lane) & 0xffff_ffff;
        wmma_element_addr(base, stride, row_major, e, (r, c))
    }

    /// The plan of a `wmma` fragment (checked when the instruction was lowered).
    fn wmma_plan(
        &self,
        shape: MmaShape,
        frag: Frag,
        e: MmaElem,
    ) -> Result<matrix::WmmaPlan, ExecError> {
        matrix::wmma_frag_plan(shape, frag, e).ok_or_else(|| ExecError::Internal {
            kernel: self.ctx.kernel.name.clone(),
            what: format!(
                "wmma {:?} fragment of .{} in {}",
                frag,
                e.name(),
                shape.name()
            ),
        })
    }

    /// One part of `wmma.load`: registers `4 part ..` of each lane's fragment.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn wmma_load(
        &mut self,
        exec: u32,
        shape: MmaShape,
        frag: Frag,
        e: MmaElem,
        row_major: bool,
        space: Space,
        offset: i32,
        part: u8,
    ) -> Result<(), ExecError> {
        self.needs_full_warp(exec)?;
        let plan = self.wmma_plan(shape, frag, e)?;
        let size = e.bits() / 8;
        let mut hint = 0;
        let first = u32::from(part) * WMMA_PART_REGS;
        let mut out = [[0u64; WMMA_PART_REGS as usize]; WARP_SIZE];
        for lane in lanes(exec) {
            for k in 0..self.inst.n_dsts as u32 {
                for i in 0..e.per_reg() {
                    let at = matrix::wmma_layout(plan, frag, e, lane as u32, first + k, i);
                    let addr = self.wmma_addr(lane, offset, row_major, e, at);
                    out[lane][k as usize] |=
                        self.load(space, addr, size, lane, &mut hint)? << (i * e.bits());
                }
            }
        }
        self.write_all(exec, &out);
        Ok(())
    }

    /// One part of `wmma.store.d`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn wmma_store(
        &mut self,
        exec: u32,
        shape: MmaShape,
        e: MmaElem,
        row_major: bool,
        space: Space,
        offset: i32,
        part: u8,
    ) -> Result<(), ExecError> {
        self.needs_full_warp(exec)?;
        let plan = self.wmma_plan(shape, Frag::C, e)?;
        let size = e.bits() / 8;
        let mask = if size == 8 {
            u64::MAX
        } else {
            (1u64 << e.bits()) - 1
        };
        let mut hint = 0;
        let first = u32::from(part) * WMMA_PART_REGS;
        for lane in lanes(exec) {
            for k in 0..u32::from(self.inst.n_srcs) - 2 {
                let v = self.read(self.inst.srcs[2 + k as usize], lane);
                for i in 0..e.per_reg() {
                    let at = matrix::wmma_layout(plan, Frag::C, e, lane as u32, first + k, i);
                    let addr = self.wmma_addr(lane, offset, row_major, e, at);
                    self.store(
                        space,
                        addr,
                        size,
                        (v >> (i * e.bits())) & mask,
                        lane,
                        &mut hint,
                    )?;
                }
            }
        }
        Ok(())
    }

    /// The address of 16-bit element (row, col) of matrix `j` of an `ldmatrix`/`stmatrix`:
    /// lane `8 j + row` holds the row's address.
    fn ldmatrix_addr(&self, offset: i32, j: u32, (r, c): (u32, u32)) -> u64 {
        let row = self.read(self.inst.srcs[0], (8 * j + r) as usize);
        row.wrapping_add(offset as i64 as u64)
            .wrapping_add(u64::from(2 * c))
    }

    pub(super) fn ldmatrix(
        &mut self,
        exec: u32,
        count: u8,
        trans: bool,
        space: Space,
        offset: i32,
    ) -> Result<(), ExecError> {
        self.needs_full_warp(exec)?;
        let mut hint = 0;
        let mut out = [[0u64; 4]; WARP_SIZE];
        for lane in lanes(exec) {
            for j in 0..u32::from(count) {
                for i in 0..2 {
                    let at = matrix::ldmatrix_element(lane as u32, i, trans);
                    let addr = self.ldmatrix_addr(offset, j, at);
                    // A fault names the lane whose address it was.
                    let owner = (8 * j + at.0) as usize;
                    out[lane][j as usize] |=
                        self.load(space, addr, 2, owner, &mut hint)? << (16 * i);
                }
            }
        }
        self.write_all(exec, &out);
        Ok(())
    }

    pub(super) fn stmatrix(
        &mut self,
        exec: u32,
        count: u8,
        trans: bool,
        space: Space,
        offset: i32,
    ) -> Result<(), ExecError> {
        self.needs_full_warp(exec)?;
        let mut hint = 0;
        for lane in lanes(exec) {
            for j in 0..u32::from(count) {
                let v = self.read(self.inst.srcs[1 + j as usize], lane);
                for i in 0..2 {
                    let at = matrix::ldmatrix_element(lane as u32, i, trans);
                    let addr = self.ldmatrix_addr(offset, j, at);
                    let owner = (8 * j + at.0) as usize;
                    self.store(space, addr, 2, (v >> (16 * i)) & 0xffff, owner, &mut hint)?;
                }
            }
        }
        Ok(())
    }

    /// `cp.async`: copies at once (a program may read the data only after waiting for its
    /// group, so copying early is indistinguishable); the timing model decides when the
    /// group completes.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn cp_async(
        &mut self,
        exec: u32,
        bytes: u8,
        dst_offset: i32,
        src_offset: i32,
        src_size: bool,
        ignore_src: bool,
    ) -> Result<(), ExecError> {
        let s = self.inst.srcs;
        let mut hint = 0;
        for lane in lanes(exec) {
            let dst = self.read(s[0], lane).wrapping_add(dst_offset as i64 as u64);
            let src = self.read(s[1], lane).wrapping_add(src_offset as i64 as u64);
            let read = if src_size {
                self.read(s[2], lane).min(u64::from(bytes))
            } else if ignore_src && self.read(s[2], lane) != 0 {
                0
            } else {
                u64::from(bytes)
            };
            for word in (0..u64::from(bytes)).step_by(4) {
                let v = if word + 4 <= read {
                    self.load(Space::Global, src + word, 4, lane, &mut hint)?
                } else {
                    // The tail: bytes below `read` come from memory, the rest are zero.
                    let mut v = 0;
                    for b in word..read.max(word) {
                        v |= self.load(Space::Global, src + b, 1, lane, &mut hint)?
                            << (8 * (b - word));
                    }
                    v
                };
                self.store(Space::Shared, dst + word, 4, v, lane, &mut hint)?;
            }
        }
        Ok(())
    }

    /// `cvt.*.tf32.f32`: the f32 rounded to 10 mantissa bits.
    pub(super) fn cvt_tf32(
        &mut self,
        exec: u32,
        rounding: Rounding,
        away: bool,
        relu: bool,
        satfinite: bool,
    ) {
        for lane in lanes(exec) {
            let a = self.read(self.inst.srcs[0], lane) as u32;
            self.write(
                0,
                lane,
                u64::from(tf32_bits(a, rounding, away, relu, satfinite)),
            );
        }
    }

    /// `cvt.{f16x2,bf16x2}.f32 d, a, b`: `a` into the upper half, `b` into the lower.
    pub(super) fn cvt_pack(
        &mut self,
        exec: u32,
        dty: Ty,
        rounding: Rounding,
        relu: bool,
        satfinite: bool,
    ) {
        let half = if dty == Ty::F16x2 { Ty::F16 } else { Ty::Bf16 };
        // Exponent field, and the largest finite magnitude (f16 0x7bff, bf16 0x7f7f).
        let (exp_mask, max_finite) = if half == Ty::F16 {
            (0x7c00, 0x7bff)
        } else {
            (0x7f80, 0x7f7f)
        };
        let convert = |bits: u64| -> u64 {
            let mut h = alu::cvt(half, Ty::F32, Some(rounding), false, false, bits);
            let special = h & exp_mask == exp_mask;
            let nan = special && h & !(exp_mask | 0x8000) != 0;
            if satfinite && special && !nan {
                h = (h & 0x8000) | max_finite;
            }
            // `.relu` clamps negative results (not NaNs) to +0.
            if relu && !nan && h & 0x8000 != 0 {
                h = 0;
            }
            h
        };
        for lane in lanes(exec) {
            let a = convert(self.read(self.inst.srcs[0], lane));
            let b = convert(self.read(self.inst.srcs[1], lane));
            self.write(0, lane, (a << 16) | b);
        }
    }
}

impl<M: GlobalAccess + ?Sized> Exec<'_, '_, '_, M> {
    /// [`kir::inst::Op::CvtFp8`].
    pub(super) fn cvt_fp8(
        &mut self,
        exec: u32,
        format: Fp8,
        to_f16x2: bool,
        from_f16x2: bool,
        relu: bool,
    ) {
        let s = self.inst.srcs;
        for lane in lanes(exec) {
            let a = self.read(s[0], lane);
            let v = if to_f16x2 {
                let half = |b: u64| u64::from(fp8_to_f16(b as u8, format, relu));
                (half(a >> 8) << 16) | half(a)
            } else {
                let (hi, lo) = if from_f16x2 {
                    (f16_value((a >> 16) as u16), f16_value(a as u16))
                } else {
                    let b = self.read(s[1], lane);
                    (
                        f64::from(f32::from_bits(a as u32)),
                        f64::from(f32::from_bits(b as u32)),
                    )
                };
                (u64::from(fp8_of(hi, format, relu)) << 8) | u64::from(fp8_of(lo, format, relu))
            };
            self.write(0, lane, v);
        }
    }
}

/// (exponent bits, mantissa bits, bias, largest finite value) of an FP8 format.
fn fp8_params(f: Fp8) -> (u32, u32, i32, f64) {
    match f {
        Fp8::E4m3 => (4, 3, 7, 448.0),
        Fp8::E5m2 => (5, 2, 15, 57344.0),
    }
}

/// The canonical NaN of both FP8 formats (PTX's `cvt` returns it for a NaN input).
const FP8_NAN: u8 = 0x7f;

/// `v` rounded to nearest even in `f`, saturating to the largest finite value (`.satfinite`,
/// which the ISA requires converting to FP8); `.relu` makes negatives +0.
pub(crate) fn fp8_of(v: f64, f: Fp8, relu: bool) -> u8 {
    if crate::alu::is_nan64(v) {
        return FP8_NAN;
    }
    let (_, man, bias, max) = fp8_params(f);
    let sign = if v.is_sign_negative() { 0x80u8 } else { 0 };
    if relu && sign != 0 {
        return 0;
    }
    let a = v.abs();
    if a > max {
        return sign | fp8_bits(max, f);
    }
    // The exponent of `a`'s binade, no lower than the smallest normal's (subnormals share
    // its quantum).
    let e = if a == 0.0 {
        1 - bias
    } else {
        (a.log2().floor() as i32).max(1 - bias)
    };
    let quantum = 2f64.powi(e - man as i32);
    let q = a / quantum;
    // Round half to even (q is exact: `a` scaled by a power of two).
    let mut n = q.floor();
    let frac = q - n;
    if frac > 0.5 || (frac == 0.5 && n % 2.0 == 1.0) {
        n += 1.0;
    }
    let r = n * quantum;
    if r > max {
        return sign | fp8_bits(max, f);
    }
    sign | fp8_bits(r, f)
}

/// The bits of a non-negative value exactly representable in `f`.
fn fp8_bits(r: f64, f: Fp8) -> u8 {
    let (_, man, bias, _) = fp8_params(f);
    if r == 0.0 {
        return 0;
    }
    let e = (r.log2().floor() as i32).max(1 - bias);
    let normal = r >= 2f64.powi(1 - bias);
    let field = if normal { e + bias } else { 0 };
    let m = (r / 2f64.powi(e - man as i32)) as u32 - if normal { 1 << man } else { 0 };
    ((field as u32) << man | m) as u8
}

/// An FP8 value as f16 bits (exact: every FP8 value is an f16); NaN is f16's canonical
/// NaN, and `.relu` makes negatives +0.
pub(crate) fn fp8_to_f16(b: u8, f: Fp8, relu: bool) -> u16 {
    let (exp, man, bias, _) = fp8_params(f);
    let field = u32::from(b >> man) & ((1 << exp) - 1);
    let m = u32::from(b) & ((1 << man) - 1);
    let negative = b & 0x80 != 0;
    let nan = match f {
        Fp8::E4m3 => field == 15 && m == 7,
        Fp8::E5m2 => field == 31 && m != 0,
    };
    if nan {
        return 0x7fff;
    }
    if relu && negative {
        return 0;
    }
    if f == Fp8::E5m2 && field == 31 {
        return if negative { 0xfc00 } else { 0x7c00 };
    }
    let magnitude = if field == 0 {
        f64::from(m) * 2f64.powi(1 - bias - man as i32)
    } else {
        f64::from((1 << man) | m) * 2f64.powi(field as i32 - bias - man as i32)
    };
    let v = if negative { -magnitude } else { magnitude };
    alu::cvt(
        Ty::F16,
        Ty::F64,
        Some(Rounding::Nearest),
        false,
        false,
        v.to_bits(),
    ) as u16
}

/// The fields of an `mbarrier` object, packed in its 64 bits: pending arrivals (bits
/// 0–20), expected arrivals (21–41), pending transaction bytes as a signed 20-bit count
/// (42–61) and the current phase's parity (63). The layout is the model's own: PTX leaves the
/// object opaque, and programs reach it only through `mbarrier` instructions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Mbarrier {
    pub pending: u32,
    pub expected: u32,
    pub tx: i32,
    pub parity: bool,
}

const COUNT_MASK: u64 = (1 << 21) - 1;

impl Mbarrier {
    pub(crate) fn decode(w: u64) -> Mbarrier {
        let tx = ((w >> 42) & 0xf_ffff) as i32;
        Mbarrier {
            pending: (w & COUNT_MASK) as u32,
            expected: ((w >> 21) & COUNT_MASK) as u32,
            // Sign-extend the 20-bit count.
            tx: (tx << 12) >> 12,
            parity: w >> 63 != 0,
        }
    }

    pub(crate) fn encode(self) -> u64 {
        u64::from(self.pending) & COUNT_MASK
            | (u64::from(self.expected) & COUNT_MASK) << 21
            | (u64::from(self.tx as u32) & 0xf_ffff) << 42
            | u64::from(self.parity) << 63
    }

    /// Completes the phase if nothing is pending: the next phase expects the same count.
    fn settle(&mut self) {
        if self.pending == 0 && self.tx == 0 {
            self.parity = !self.parity;
            self.pending = self.expected;
        }
    }

    /// The state token an arrival returns: the phase's parity and the pending count after it.
    fn state(self, parity: bool, pending: u32) -> u64 {
        u64::from(parity) << 63 | u64::from(pending)
    }
}

impl<M: GlobalAccess + ?Sized> Exec<'_, '_, '_, M> {
    /// The `mbarrier` family, lane by lane in lane order (each lane's update is atomic: the
    /// functional core runs one lane at a time).
    pub(super) fn mbarrier(
        &mut self,
        exec: u32,
        op: MbarrierOp,
        space: Space,
        offset: i32,
    ) -> Result<(), ExecError> {
        let s = self.inst.srcs;
        let mut hint = 0;
        for lane in lanes(exec) {
            if op == MbarrierOp::PendingCount {
                let state = self.read(s[0], lane);
                self.write(0, lane, state & COUNT_MASK);
                continue;
            }
            let addr = self.read(s[0], lane).wrapping_add(offset as i64 as u64);
            let n = self.read(s[1], lane) & 0xffff_ffff;
            let word = self.load(space, addr, 8, lane, &mut hint)?;
            let mut b = Mbarrier::decode(word);
            let result = match op {
                MbarrierOp::Init => {
                    b = Mbarrier {
                        pending: n as u32,
                        expected: n as u32,
                        tx: 0,
                        parity: false,
                    };
                    None
                }
                MbarrierOp::Inval => {
                    b = Mbarrier::decode(0);
                    None
                }
                MbarrierOp::ExpectTx => {
                    b.tx = b.tx.wrapping_add(n as i32);
                    None
                }
                MbarrierOp::CompleteTx => {
                    b.tx = b.tx.wrapping_sub(n as i32);
                    b.settle();
                    None
                }
                MbarrierOp::Arrive {
                    drop,
                    expect_tx,
                    no_complete,
                } => {
                    let count = match (expect_tx, self.inst.n_srcs) {
                        (true, _) => {
                            b.tx = b.tx.wrapping_add(n as i32);
                            1
                        }
                        (false, 2) => n as u32,
                        (false, _) => 1,
                    };
                    let parity = b.parity;
                    b.pending = b.pending.saturating_sub(count);
                    if drop {
                        b.expected = b.expected.saturating_sub(count);
                    }
                    let state = b.state(parity, b.pending);
                    if !no_complete {
                        b.settle();
                    }
                    Some(state)
                }
                MbarrierOp::Wait { parity } => {
                    let waited = if parity {
                        n & 1 != 0
                    } else {
                        self.read(s[1], lane) >> 63 != 0
                    };
                    // The phase waited on has completed once the current parity differs.
                    self.write(0, lane, u64::from(b.parity != waited));
                    continue;
                }
                MbarrierOp::CpAsyncArrive { noinc } => {
                    // The copies are done when issued (see `cp_async`), so the arrival is
                    // now; without `.noinc` the count was raised by one first.
                    if noinc {
                        b.pending = b.pending.saturating_sub(1);
                        b.settle();
                    }
                    None
                }
                MbarrierOp::PendingCount => unreachable!("handled above"),
            };
            self.store(space, addr, 8, b.encode(), lane, &mut hint)?;
            if let Some(state) = result {
                self.write(0, lane, state);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// TensorFloat-32 rounding, by hand: 1 + 2^-11 (0x3f801000) is a tie between 1 and
    /// 1 + 2^-10; 1 + 3 * 2^-12 is above it.
    #[test]
    fn tf32_rounding_modes() {
        let (rn, rz) = (Rounding::Nearest, Rounding::Zero);
        assert_eq!(tf32_bits(0x3f80_1000, rn, true, false, false), 0x3f80_2000);
        assert_eq!(tf32_bits(0x3f80_1000, rn, false, false, false), 0x3f80_0000);
        assert_eq!(tf32_bits(0x3f80_3000, rn, false, false, false), 0x3f80_4000);
        assert_eq!(tf32_bits(0x3f80_1800, rn, false, false, false), 0x3f80_2000);
        assert_eq!(tf32_bits(0x3f80_1fff, rz, false, false, false), 0x3f80_0000);
        assert_eq!(tf32_bits(0xbf80_1000, rn, true, false, false), 0xbf80_2000);
        // The largest f32 rounds to infinity, or with .satfinite to the largest tf32.
        assert_eq!(tf32_bits(0x7f7f_ffff, rn, false, false, false), 0x7f80_0000);
        assert_eq!(tf32_bits(0x7f7f_ffff, rn, false, false, true), 0x7f7f_e000);
        // NaN stays NaN; .relu zeroes negatives.
        let nan = tf32_bits(0x7f80_0001, rn, false, false, false);
        assert!(f32::from_bits(nan).is_nan());
        assert_eq!(tf32_bits(0xc000_0000, rn, false, true, false), 0);
    }

    #[test]
    fn fp8_codes_survive_a_round_trip_through_f16() {
        // Every non-NaN code decodes to an f16 that encodes back to the same code (the
        // encoder and decoder agree on every value of both formats, subnormals included).
        for f in [Fp8::E4m3, Fp8::E5m2] {
            for b in 0..=255u8 {
                let h = fp8_to_f16(b, f, false);
                if h == 0x7fff {
                    continue;
                }
                let back = fp8_of(f16_value(h), f, false);
                let inf = f == Fp8::E5m2 && b & 0x7f == 0x7c;
                // Infinity saturates to the largest finite value.
                let want = if inf { (b & 0x80) | 0x7b } else { b };
                assert_eq!(back, want, "{f:?} {b:#04x} via f16 {h:#06x}");
            }
        }
    }

    /// The fast f16 decoder agrees with the ALU's conversion on every bit pattern.
    #[test]
    fn f16_values_match_the_alu_conversion() {
        for h in 0..=u16::MAX {
            let fast = f16_value(h);
            let alu = f64::from_bits(alu::cvt(Ty::F64, Ty::F16, None, false, false, u64::from(h)));
            assert!(
                fast.to_bits() == alu.to_bits() || (fast.is_nan() && alu.is_nan()),
                "{h:#06x}: {fast} vs {alu}"
            );
        }
    }
}
