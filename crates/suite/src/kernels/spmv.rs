//! `spmv`: scalar CSR sparse matrix-vector product, one thread per row.

use super::util::{blocks_for, download, f32_sum_tol, launch, upload, Checker, Rng};
use crate::{Arg, Device, DeviceError, Dim3, Kernel, Size, Stress, Target, Verification};

const BLOCK: u32 = 64;

pub struct Spmv;

#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    pub row_ptr: Vec<i32>,
    pub col_idx: Vec<i32>,
    pub vals: Vec<f32>,
    pub x: Vec<f32>,
}

impl Problem {
    pub fn generate(size: Size, seed: u64) -> Self {
        // Small: 4096 rows = 64 TBs, ~16 nonzeros per row (~0.6 M instructions);
        // Large: 65,536 rows; Huge: 589,824 rows = 9,216 TBs (2.2 waves of 32 TBs/SM on the
        // h100).
        let rows = match size {
            Size::Small => 4096,
            Size::Large => 65_536,
            Size::Huge => 589_824,
        };
        let mut rng = Rng::for_kernel("spmv", seed);
        let mut row_ptr = vec![0i32];
        let (mut col_idx, mut vals) = (Vec::new(), Vec::new());
        for r in 0..rows {
            // Mostly 1..16 nonzeros, every 16th row 64: load imbalance inside warps.
            let nnz = if r % 16 == 5 { 64 } else { 1 + rng.below(16) };
            for _ in 0..nnz {
                col_idx.push(rng.below(rows as u32) as i32);
                vals.push(rng.range_f32(-1.0, 1.0));
            }
            row_ptr.push(col_idx.len() as i32);
        }
        let x = (0..rows).map(|_| rng.range_f32(-1.0, 1.0)).collect();
        Problem {
            row_ptr,
            col_idx,
            vals,
            x,
        }
    }

    /// Per row: (sum in f64, sum of |terms|, number of terms).
    pub fn reference(&self) -> Vec<(f64, f64, usize)> {
        self.row_ptr
            .windows(2)
            .map(|w| {
                let (mut s, mut abs) = (0.0f64, 0.0f64);
                for e in w[0] as usize..w[1] as usize {
                    let t = self.vals[e] as f64 * self.x[self.col_idx[e] as usize] as f64;
                    s += t;
                    abs += t.abs();
                }
                (s, abs, (w[1] - w[0]) as usize)
            })
            .collect()
    }
}

impl Kernel for Spmv {
    fn name(&self) -> &'static str {
        "spmv"
    }
    fn description(&self) -> &'static str {
        "scalar CSR SpMV, one thread per row, irregular row lengths"
    }
    fn sources(&self) -> &'static [(Target, &'static str)] {
        ptx!("spmv")
    }
    fn traits(&self) -> &'static [&'static str] {
        &[
            "irregular memory",
            "divergent loop trip counts",
            "memory-bound",
            "f32 fma",
        ]
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
        let rows = p.x.len();
        let row_ptr = upload(dev, &p.row_ptr)?;
        let col_idx = upload(dev, &p.col_idx)?;
        let vals = upload(dev, &p.vals)?;
        let x = upload(dev, &p.x)?;
        let y = upload(dev, &vec![0.0f32; rows])?;
        let args = [
            Arg::Ptr(row_ptr),
            Arg::Ptr(col_idx),
            Arg::Ptr(vals),
            Arg::Ptr(x),
            Arg::Ptr(y),
            Arg::I32(rows as i32),
        ];
        launch(
            dev,
            "spmv_csr",
            Dim3::x(blocks_for(rows, BLOCK as usize)),
            Dim3::x(BLOCK),
            &args,
        )?;
        let got: Vec<f32> = download(dev, y, rows)?;

        let mut check = Checker::new();
        for (i, (&g, &(want, abs, terms))) in got.iter().zip(&p.reference()).enumerate() {
            // A sum of `terms` f32 products: the γ_n bound of f32_sum_tol.
            check.near("y", i, g as f64, want, f32_sum_tol(terms, abs));
        }
        Ok(check.finish())
    }
}
