//! `blackscholes`: option pricing with expf/logf/sqrtf, compute-bound transcendental code.

use super::util::{blocks_for, download, launch, upload, Checker, Rng};
use crate::{Arg, Device, DeviceError, Dim3, Kernel, Size, Stress, Target, Verification};

const BLOCK: u32 = 128;
const RATE: f32 = 0.02;
const VOL: f32 = 0.30;

pub struct BlackScholes;

#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    pub spot: Vec<f32>,
    pub strike: Vec<f32>,
    pub years: Vec<f32>,
}

/// The Abramowitz-Stegun normal CDF of blackscholes.cu, in f64.
fn cnd(d: f64) -> f64 {
    const A: [f64; 5] = [
        0.31938153,
        -0.356563782,
        1.781477937,
        -1.821255978,
        1.330274429,
    ];
    let k = 1.0 / (1.0 + 0.2316419 * d.abs());
    let poly = k * (A[0] + k * (A[1] + k * (A[2] + k * (A[3] + k * A[4]))));
    let c = 0.398_942_280_401_432_7 * (-0.5 * d * d).exp() * poly;
    if d > 0.0 {
        1.0 - c
    } else {
        c
    }
}

/// (call, put) in f64 for f32 inputs and parameters.
pub fn price(s: f32, x: f32, t: f32, rate: f32, vol: f32) -> (f64, f64) {
    let (s, x, t, r, v) = (s as f64, x as f64, t as f64, rate as f64, vol as f64);
    let sqrt_t = t.sqrt();
    let d1 = ((s / x).ln() + (r + 0.5 * v * v) * t) / (v * sqrt_t);
    let d2 = d1 - v * sqrt_t;
    let (n1, n2) = (cnd(d1), cnd(d2));
    let disc = x * (-r * t).exp();
    (s * n1 - disc * n2, disc * (1.0 - n2) - s * (1.0 - n1))
}

impl Problem {
    pub fn generate(size: Size, seed: u64) -> Self {
        // Small: 64 TBs of 128 threads, ~120 instructions each (~1 M); Large: 1024 TBs; Huge:
        // 4,608 TBs (2.2 waves of 16 TBs/SM on the h100).
        let n = match size {
            Size::Small => 8192,
            Size::Large => 131_072,
            Size::Huge => 589_824,
        };
        let mut rng = Rng::for_kernel("blackscholes", seed);
        let spot = (0..n).map(|_| rng.range_f32(5.0, 30.0)).collect();
        let strike = (0..n).map(|_| rng.range_f32(1.0, 100.0)).collect();
        let years = (0..n).map(|_| rng.range_f32(0.25, 10.0)).collect();
        Problem {
            spot,
            strike,
            years,
        }
    }
}

impl Kernel for BlackScholes {
    fn name(&self) -> &'static str {
        "blackscholes"
    }
    fn description(&self) -> &'static str {
        "Black-Scholes call/put pricing: expf, logf, sqrtf, IEEE division (no fast-math)"
    }
    fn sources(&self) -> &'static [(Target, &'static str)] {
        ptx!("blackscholes")
    }
    fn traits(&self) -> &'static [&'static str] {
        &["transcendentals", "compute-bound", "short TBs", "f32"]
    }
    fn stress(&self) -> Stress {
        Stress::None
    }

    fn run(
        &self,
        dev: &mut dyn Device,
        size: Size,
        seed: u64,
    ) -> Result<Verification, DeviceError> {
        let p = Problem::generate(size, seed);
        let n = p.spot.len();
        let spot = upload(dev, &p.spot)?;
        let strike = upload(dev, &p.strike)?;
        let years = upload(dev, &p.years)?;
        let call = upload(dev, &vec![0.0f32; n])?;
        let put = upload(dev, &vec![0.0f32; n])?;
        let args = [
            Arg::Ptr(spot),
            Arg::Ptr(strike),
            Arg::Ptr(years),
            Arg::Ptr(call),
            Arg::Ptr(put),
            Arg::I32(n as i32),
            Arg::F32(RATE),
            Arg::F32(VOL),
        ];
        launch(
            dev,
            "black_scholes",
            Dim3::x(blocks_for(n, BLOCK as usize)),
            Dim3::x(BLOCK),
            &args,
        )?;
        let got_call: Vec<f32> = download(dev, call, n)?;
        let got_put: Vec<f32> = download(dev, put, n)?;

        let mut check = Checker::new();
        for i in 0..n {
            let (s, x) = (p.spot[i], p.strike[i]);
            let (c, q) = price(s, x, p.years[i], RATE, VOL);
            // The f32 kernel's logf/expf are within 2 ulp and sqrtf/division exact, but d1
            // divides by v·sqrt(t) >= 0.15 and the prices are differences of terms as large as
            // S and X: a relative error of ~10 ε in the intermediates becomes an absolute
            // error of ~10 ε·(S + X) / 0.15. Allow 128 ε·(S + X) (~1.5e-5 relative to S + X).
            let tol = 128.0 * f32::EPSILON as f64 * (s + x) as f64;
            check.near("call", i, got_call[i] as f64, c, tol);
            check.near("put", i, got_put[i] as f64, q, tol);
        }
        Ok(check.finish())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_call_parity() {
        // C - P = S - X e^{-rT} holds for the formula whatever the CDF approximation, since
        // cnd(d) + cnd(-d) = 1 by construction.
        let (c, p) = price(20.0, 25.0, 2.0, 0.02, 0.3);
        let parity = 20.0 - 25.0 * (-(0.02f32 as f64) * 2.0).exp();
        assert!((c - p - parity).abs() < 1e-9);
        assert!(c > 0.0 && p > 0.0);
    }
}
