//! `attention`: fused attention forward pass with online softmax (flash-attention style),
//! O = softmax(QKᵀ/√d)·V per head, f16 Q/K/V and f32 O, head dimension 64. One TB per
//! (64-query tile, head); S = QKᵀ and O += PV with `mma.sync.m16n8k16` (K through `ldmatrix`,
//! V through `ldmatrix.trans`), a running max and sum per row with `expf`, P packed to f16 in
//! registers (`cvt.rn.f16x2.f32`), K/V tiles double-buffered with `cp.async`.

use super::util::{alloc_zeroed, download, f16_to_f32, f32_sum_tol, launch, upload, Checker, Rng};
use crate::{Arg, Device, DeviceError, Dim3, Kernel, Size, Stress, Target, Verification};

/// Must match attention.cu: head dimension, queries per TB, keys per tile, threads per TB.
const D: usize = 64;
const BQ: usize = 64;
const BKV: usize = 64;
const THREADS: u32 = 128;

pub struct Attention;

/// Q, K, V laid out `[head][seq][D]` as f16 bit patterns; the output has the same layout in
/// f32.
#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    pub heads: usize,
    pub seq: usize,
    pub q: Vec<u16>,
    pub k: Vec<u16>,
    pub v: Vec<u16>,
}

/// One output row of the reference: the values and, per element, the tolerance.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub o: Vec<f64>,
    pub tol: Vec<f64>,
}

/// The softmax scale 1/√D: 1/8, a power of two, so scaling is exact on the device too.
pub fn scale() -> f32 {
    1.0 / (D as f32).sqrt()
}

/// Attention of one query row `q` over keys `k` and values `v` (rows of `d`), in f64, with a
/// per-element tolerance for the device's f32/f16 computation.
///
/// Error analysis (ε = `f32::EPSILON`, u16 = 2^-11 the unit roundoff of f16), relative to
/// Σ_j w_j|v_j| / Σ_j w_j, the weighted mean of |v| with the softmax weights w:
/// - each score is an f32 sum of d exact f16 products (tensor cores, any order), off by at
///   most δ_j = scale · f32_sum_tol(d, Σ|q k_j|); exp turns that into a relative error δ_j of
///   w_j, and normalising (numerator and denominator) at most doubles it: 2·max δ;
/// - P is rounded to f16 before the PV product while the running sum uses the f32 values:
///   u16 relative per weight, plus, for weights below f16's normal range, an absolute 2^-25
///   each (at most seq of them, times max|v|, over a sum that is at least 1);
/// - `expf` (a few ulp), the rescale products (one rounding per tile, the same factor on O
///   and on the sum), the f32 accumulation of seq terms in O and in the sum, and the final
///   division: below 2·(seq + tiles + 8)·ε together.
///
/// The sum is doubled for the reference's own rounding and second-order terms.
pub fn attend(q: &[f64], k: &[f64], v: &[f64], d: usize, scale: f64) -> Row {
    let seq = k.len() / d;
    let eps = f32::EPSILON as f64;
    let mut s = Vec::with_capacity(seq);
    let mut ds_max = 0.0f64;
    for kj in k.chunks_exact(d) {
        let (mut dot, mut abs) = (0.0, 0.0);
        for (x, y) in q.iter().zip(kj) {
            dot += x * y;
            abs += (x * y).abs();
        }
        s.push(dot * scale);
        ds_max = ds_max.max(scale * f32_sum_tol(d, abs));
    }
    let max = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let w: Vec<f64> = s.iter().map(|&x| (x - max).exp()).collect();
    let l: f64 = w.iter().sum();
    let tiles = seq.div_ceil(BKV) as f64;
    let rel = 2.0 * ds_max + 2.0f64.powi(-11) + 2.0 * (seq as f64 + tiles + 8.0) * eps;
    let mut o = vec![0.0; d];
    let mut tol = vec![0.0; d];
    for c in 0..d {
        let (mut acc, mut abs, mut vmax) = (0.0, 0.0, 0.0f64);
        for (j, &wj) in w.iter().enumerate() {
            let vj = v[j * d + c];
            acc += wj * vj;
            abs += wj * vj.abs();
            vmax = vmax.max(vj.abs());
        }
        o[c] = acc / l;
        let subnormal = seq as f64 * 2.0f64.powi(-25) * vmax;
        tol[c] = 2.0 * (rel * abs / l + subnormal);
    }
    Row { o, tol }
}

impl Problem {
    pub fn generate(size: Size, seed: u64) -> Self {
        // Small: 2 heads x 128 keys: 2x2 TBs of 128 threads, 2 key tiles each: 1.08 M thread
        // instructions on the functional core (~2,100 per thread; per key tile 64 mma, 32
        // ldmatrix, 8 cp.async, 34 expf sequences and the rescaling). Large: 4 heads x 384
        // keys: 6x4 TBs, 6 tiles each: 18x the flops, 17.7 M thread instructions (16x). Huge:
        // 96 heads x 384 keys: 6x96 TBs (2.2 waves of 2 TBs/SM on the h100), 6 tiles each.
        let (heads, seq) = match size {
            Size::Small => (2, 128),
            Size::Large => (4, 384),
            Size::Huge => (96, 384),
        };
        let mut rng = Rng::for_kernel("attention", seed);
        let len = heads * seq * D;
        // Q and K in [-2, 2): scores with a standard deviation of about 1.3 after scaling,
        // so rows have clear maxima (and the running max moves between tiles); V in [-1, 1).
        let q = rng.f16s(len, -2.0, 2.0);
        let k = rng.f16s(len, -2.0, 2.0);
        let v = rng.f16s(len, -1.0, 1.0);
        Problem {
            heads,
            seq,
            q,
            k,
            v,
        }
    }

    /// Every output row, head-major, from the exact f16 inputs.
    pub fn reference(&self) -> Vec<Row> {
        let f = |h: &[u16]| h.iter().map(|&x| f16_to_f32(x) as f64).collect::<Vec<_>>();
        let (q, k, v) = (f(&self.q), f(&self.k), f(&self.v));
        let per_head = self.seq * D;
        let mut rows = Vec::with_capacity(self.heads * self.seq);
        for h in 0..self.heads {
            let head = h * per_head..(h + 1) * per_head;
            let (kh, vh) = (&k[head.clone()], &v[head.clone()]);
            for qi in q[head].chunks_exact(D) {
                rows.push(attend(qi, kh, vh, D, scale() as f64));
            }
        }
        rows
    }
}

impl Kernel for Attention {
    fn name(&self) -> &'static str {
        "attention"
    }
    fn description(&self) -> &'static str {
        "fused attention forward (online softmax), mma.sync m16n8k16, cp.async K/V double buffer"
    }
    fn sources(&self) -> &'static [(Target, &'static str)] {
        ptx!("attention", [Sm80 "sm_80", Sm90 "sm_90"])
    }
    fn needs_tensor_cores(&self) -> bool {
        true
    }
    fn traits(&self) -> &'static [&'static str] {
        &[
            "tensor cores",
            "mma.sync",
            "ldmatrix",
            "cp.async",
            "f16",
            "online softmax",
            "shuffles",
            "long TBs",
        ]
    }
    fn stress(&self) -> Stress {
        // Each thread keeps 32 f32 of O, 32 of S and 16 words of Q fragments live.
        Stress::Registers
    }

    fn run(
        &self,
        dev: &mut dyn Device,
        size: Size,
        seed: u64,
    ) -> Result<Verification, DeviceError> {
        let p = Problem::generate(size, seed);
        assert!(p.seq.is_multiple_of(BQ) && p.seq.is_multiple_of(BKV));
        let q = upload(dev, &p.q)?;
        let k = upload(dev, &p.k)?;
        let v = upload(dev, &p.v)?;
        let len = p.heads * p.seq * D;
        let o = alloc_zeroed::<f32>(dev, len)?;
        let args = [
            Arg::Ptr(q),
            Arg::Ptr(k),
            Arg::Ptr(v),
            Arg::Ptr(o),
            Arg::I32(p.seq as i32),
            Arg::F32(scale()),
        ];
        let grid = Dim3::xy((p.seq / BQ) as u32, p.heads as u32);
        launch(dev, "attention_fwd", grid, Dim3::x(THREADS), &args)?;
        let got: Vec<f32> = download(dev, o, len)?;

        let mut check = Checker::new();
        let want = p.reference();
        for (i, &g) in got.iter().enumerate() {
            let row = &want[i / D];
            // Tolerance: see `attend`.
            check.near("O", i, g as f64, row.o[i % D], row.tol[i % D]);
        }
        Ok(check.finish())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_is_an_exact_power_of_two() {
        assert_eq!(scale(), 0.125);
    }

    #[test]
    fn attention_of_hand_computed_rows() {
        // Two keys with equal scores: the output is the plain mean of the values.
        let r = attend(
            &[1.0, 0.0],
            &[2.0, 5.0, 2.0, -3.0],
            &[1.0, 4.0, 3.0, -2.0],
            2,
            1.0,
        );
        assert_eq!(r.o, [2.0, 1.0]);
        // Scores 0 and ln 3 (q·k = 2 ln 3, scale 1/2): weights 1/4 and 3/4.
        let ln3 = 3.0f64.ln();
        let r = attend(&[1.0], &[0.0, 2.0 * ln3], &[8.0, -4.0], 1, 0.5);
        assert!(
            (r.o[0] - (0.25 * 8.0 - 0.75 * 4.0)).abs() < 1e-12,
            "{:?}",
            r.o
        );
        // The tolerance grows with the weighted |v| and is dominated by f16 rounding of P.
        assert!(r.tol[0] > 2.0 * 2.0f64.powi(-11) * 5.0 && r.tol[0] < 1e-2);
        // One dominant key (the other weighs e^-100): the output is its value.
        let r = attend(&[1.0], &[100.0, 0.0], &[0.5, 7.0], 1, 1.0);
        assert_eq!(r.o, [0.5]);
    }

    #[test]
    fn reference_rows_cover_every_head_and_query() {
        let p = Problem::generate(Size::Small, 3);
        let rows = p.reference();
        assert_eq!(rows.len(), p.heads * p.seq);
        // A convex combination of values in [-1, 1].
        assert!(rows.iter().flat_map(|r| &r.o).all(|o| o.abs() <= 1.0));
    }
}
