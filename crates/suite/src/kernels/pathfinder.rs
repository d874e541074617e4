//! `pathfinder`: row-by-row dynamic programming with a barrier per row, several rows per launch.

use super::util::{blocks_for, download, launch, upload, Checker, Rng};
use crate::{Arg, Device, DeviceError, Dim3, Kernel, Size, Stress, Target, Verification};

const BLOCK: u32 = 256;
/// Rows advanced per launch (the halo width); the TB owns BLOCK - 2*steps output columns.
const ROWS_PER_LAUNCH: usize = 16;

pub struct Pathfinder;

#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    pub rows: usize,
    pub cols: usize,
    pub wall: Vec<i32>,
}

impl Problem {
    pub fn generate(size: Size, seed: u64) -> Self {
        // Small: 4 launches of 5 TBs, 16 rows each (~1.5 M instructions).
        // Large: 8 launches of 37 TBs. Huge: 4 launches of 2,143 TBs (2.0 waves of 8 TBs/SM
        // on the h100), half of Large's launches so that the wall stays at 125 MB.
        let (rows, cols) = match size {
            Size::Small => (65, 1000),
            Size::Large => (129, 8000),
            Size::Huge => (65, 480_000),
        };
        let mut rng = Rng::for_kernel("pathfinder", seed);
        Problem {
            rows,
            cols,
            wall: (0..rows * cols).map(|_| rng.below(10) as i32).collect(),
        }
    }

    /// The last row of the DP table.
    pub fn reference(&self) -> Vec<i32> {
        let c = self.cols;
        let mut prev: Vec<i32> = self.wall[..c].to_vec();
        for r in 1..self.rows {
            prev = (0..c)
                .map(|j| {
                    let mut best = prev[j];
                    if j > 0 {
                        best = best.min(prev[j - 1]);
                    }
                    if j + 1 < c {
                        best = best.min(prev[j + 1]);
                    }
                    best + self.wall[r * c + j]
                })
                .collect();
        }
        prev
    }
}

impl Kernel for Pathfinder {
    fn name(&self) -> &'static str {
        "pathfinder"
    }
    fn description(&self) -> &'static str {
        "PathFinder-style DP, 16 rows per launch with halo columns, barrier per row"
    }
    fn sources(&self) -> &'static [(Target, &'static str)] {
        ptx!("pathfinder")
    }
    fn traits(&self) -> &'static [&'static str] {
        &[
            "barrier in loop",
            "shared memory",
            "host loop",
            "ping-pong buffers",
            "integer",
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
        let wall = upload(dev, &p.wall)?;
        // Row 0 of the DP is the first row of costs.
        let mut bufs = [
            upload(dev, &p.wall[..p.cols])?,
            upload(dev, &p.wall[..p.cols])?,
        ];
        let mut start = 1;
        while start < p.rows {
            let steps = ROWS_PER_LAUNCH.min(p.rows - start);
            let out_w = BLOCK as usize - 2 * steps;
            let args = [
                Arg::Ptr(wall),
                Arg::Ptr(bufs[0]),
                Arg::Ptr(bufs[1]),
                Arg::I32(p.cols as i32),
                Arg::I32(start as i32),
                Arg::I32(steps as i32),
            ];
            let grid = Dim3::x(blocks_for(p.cols, out_w));
            launch(dev, "pathfinder_rows", grid, Dim3::x(BLOCK), &args)?;
            bufs.swap(0, 1);
            start += steps;
        }
        let got: Vec<i32> = download(dev, bufs[0], p.cols)?;

        let mut check = Checker::new();
        check.exact_slice("cost", &got, &p.reference());
        Ok(check.finish())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_dp() {
        let p = Problem {
            rows: 3,
            cols: 3,
            wall: vec![1, 5, 1, 9, 9, 0, 2, 7, 3],
        };
        // Row 1: [9+1, 9+1, 0+1] = [10, 10, 1]; row 2: [2+10, 7+1, 3+1].
        assert_eq!(p.reference(), vec![12, 8, 4]);
    }
}
