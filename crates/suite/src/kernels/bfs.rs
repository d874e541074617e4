//! `bfs`: level-synchronous breadth-first search over a CSR graph, one launch per level.

use std::collections::VecDeque;

use super::util::{blocks_for, download, launch, upload, Checker, Rng};
use crate::{Arg, Device, DeviceError, Dim3, Kernel, Size, Stress, Target, Verification};

const BLOCK: u32 = 256;

pub struct Bfs;

/// A directed graph in CSR form; the search starts at vertex 0.
#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    pub row_ptr: Vec<i32>,
    pub col_idx: Vec<i32>,
}

impl Problem {
    pub fn generate(size: Size, seed: u64) -> Self {
        // Small: 4096 vertices = 16 TBs per level, a few dozen levels; Large: 65,536 vertices;
        // Huge: 589,824 vertices = 2,304 TBs per level (2.2 waves of 8 TBs/SM on the h100).
        let n: usize = match size {
            Size::Small => 4096,
            Size::Large => 65_536,
            Size::Huge => 589_824,
        };
        let mut rng = Rng::for_kernel("bfs", seed);
        let mut row_ptr = Vec::with_capacity(n + 1);
        let mut col_idx = Vec::new();
        row_ptr.push(0);
        for v in 0..n {
            // Degrees 1..5; mostly short-range edges (which make the search deep, many
            // levels) and some long-range ones (which make frontiers wide).
            for _ in 0..1 + rng.below(5) {
                let u = if rng.below(4) == 0 {
                    rng.below(n as u32) as usize
                } else {
                    (v + 1 + rng.below(16) as usize) % n
                };
                col_idx.push(u as i32);
            }
            row_ptr.push(col_idx.len() as i32);
        }
        Problem { row_ptr, col_idx }
    }

    pub fn vertices(&self) -> usize {
        self.row_ptr.len() - 1
    }

    /// Level of every vertex from vertex 0; -1 when unreachable.
    pub fn reference(&self) -> Vec<i32> {
        let mut level = vec![-1; self.vertices()];
        let mut queue = VecDeque::from([0usize]);
        level[0] = 0;
        while let Some(v) = queue.pop_front() {
            for e in self.row_ptr[v] as usize..self.row_ptr[v + 1] as usize {
                let u = self.col_idx[e] as usize;
                if level[u] < 0 {
                    level[u] = level[v] + 1;
                    queue.push_back(u);
                }
            }
        }
        level
    }
}

impl Kernel for Bfs {
    fn name(&self) -> &'static str {
        "bfs"
    }
    fn description(&self) -> &'static str {
        "level-synchronous BFS on a CSR graph, host loop of launches until the frontier is empty"
    }
    fn sources(&self) -> &'static [(Target, &'static str)] {
        ptx!("bfs")
    }
    fn traits(&self) -> &'static [&'static str] {
        &[
            "host loop",
            "irregular memory",
            "divergent",
            "benign races",
            "short TBs",
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
        let n = p.vertices();
        let mut init = vec![-1i32; n];
        init[0] = 0;
        let row_ptr = upload(dev, &p.row_ptr)?;
        let col_idx = upload(dev, &p.col_idx)?;
        let level = upload(dev, &init)?;
        let changed = upload(dev, &[0i32])?;
        let grid = Dim3::x(blocks_for(n, BLOCK as usize));

        // One launch per level; the last launch finds an empty frontier. A correct search
        // needs at most n levels, so the loop bound only guards against a broken device.
        for cur in 0..n as i32 {
            dev.write(changed, &0i32.to_le_bytes())?;
            let args = [
                Arg::Ptr(row_ptr),
                Arg::Ptr(col_idx),
                Arg::Ptr(level),
                Arg::I32(cur),
                Arg::I32(n as i32),
                Arg::Ptr(changed),
            ];
            launch(dev, "bfs_level", grid, Dim3::x(BLOCK), &args)?;
            if download::<i32>(dev, changed, 1)?[0] == 0 {
                break;
            }
        }
        let got: Vec<i32> = download(dev, level, n)?;

        let mut check = Checker::new();
        check.exact_slice("level", &got, &p.reference());
        Ok(check.finish())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_levels() {
        // 0 -> 1 -> 2, 0 -> 2, 3 unreachable.
        let p = Problem {
            row_ptr: vec![0, 2, 3, 3, 3],
            col_idx: vec![1, 2, 2],
        };
        assert_eq!(p.reference(), vec![0, 1, 1, -1]);
    }

    #[test]
    fn generated_graph_is_deep() {
        let p = Problem::generate(Size::Small, 1);
        let levels = p.reference();
        let depth = *levels.iter().max().unwrap();
        let reached = levels.iter().filter(|&&l| l >= 0).count();
        assert!((5..=40).contains(&depth), "depth {depth}");
        assert!(reached > p.vertices() / 2, "reached {reached}");
    }
}
