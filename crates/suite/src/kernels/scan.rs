//! `scan`: Blelloch exclusive scan of u32 in dynamic shared memory, three launches (five for
//! `Size::Huge`, whose block sums take two levels).

use super::util::{alloc_zeroed, blocks_for, download, launch, launch_smem, upload, Checker, Rng};
use crate::{Arg, Device, DeviceError, Dim3, Kernel, Size, Stress, Target, Verification};

const BLOCK: u32 = 256;
/// Each block scans two elements per thread.
const PER_BLOCK: usize = 2 * BLOCK as usize;

pub struct Scan;

#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    pub data: Vec<u32>,
}

impl Problem {
    pub fn generate(size: Size, seed: u64) -> Self {
        // Small: 17 TBs (the last one partial); Large: 258 TBs: up to PER_BLOCK^2 elements, one
        // block scans the block sums. Huge: 2,114 TBs (2.0 waves of 8 TBs/SM on the h100),
        // whose block sums are scanned by 5 blocks and their sums by one.
        let n = match size {
            Size::Small => 8192 + 37,
            Size::Large => 131_072 + 1000,
            Size::Huge => 2112 * PER_BLOCK + 1000,
        };
        let mut rng = Rng::for_kernel("scan", seed);
        // Large values, so that the running sum wraps modulo 2^32 several times.
        Problem {
            data: (0..n).map(|_| rng.next_u32() >> 4).collect(),
        }
    }

    pub fn reference(&self) -> Vec<u32> {
        let mut acc = 0u32;
        self.data
            .iter()
            .map(|&x| {
                let before = acc;
                acc = acc.wrapping_add(x);
                before
            })
            .collect()
    }
}

impl Kernel for Scan {
    fn name(&self) -> &'static str {
        "scan"
    }
    fn description(&self) -> &'static str {
        "Blelloch exclusive scan of u32 in dynamic shared memory, scan of block sums, add-back"
    }
    fn sources(&self) -> &'static [(Target, &'static str)] {
        ptx!("scan")
    }
    fn traits(&self) -> &'static [&'static str] {
        &[
            "dynamic shared memory",
            "barrier in loop",
            "three launches",
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
        let n = p.data.len();
        let smem = (PER_BLOCK * 4) as u32;
        // Level 0 scans the input in blocks; level l + 1 scans level l's block sums, until one
        // block holds them all (two levels up to PER_BLOCK^2 elements, three for Huge).
        let mut lens = vec![n];
        while let Some(&last) = lens.last().filter(|&&len| len > PER_BLOCK) {
            lens.push(blocks_for(last, PER_BLOCK) as usize);
        }

        // Per level: its input and its output (the scanned input, block by block).
        let input = upload(dev, &p.data)?;
        let mut bufs = vec![(input, alloc_zeroed::<u32>(dev, n)?)];
        for &len in &lens[1..] {
            bufs.push((
                alloc_zeroed::<u32>(dev, len)?,
                alloc_zeroed::<u32>(dev, len)?,
            ));
        }
        let total = alloc_zeroed::<u32>(dev, 1)?;

        let block = Dim3::x(BLOCK);
        for (l, (&len, &(src, dst))) in lens.iter().zip(&bufs).enumerate() {
            let sums = bufs.get(l + 1).map_or(total, |b| b.0);
            let args = [
                Arg::Ptr(src),
                Arg::Ptr(dst),
                Arg::Ptr(sums),
                Arg::I32(len as i32),
            ];
            let grid = Dim3::x(blocks_for(len, PER_BLOCK));
            launch_smem(dev, "scan_blocks", grid, block, smem, &args)?;
        }
        // Back down: each level's blocks add the scanned sums of the blocks before them.
        for l in (0..lens.len() - 1).rev() {
            let args = [
                Arg::Ptr(bufs[l].1),
                Arg::Ptr(bufs[l + 1].1),
                Arg::I32(lens[l] as i32),
            ];
            let grid = Dim3::x(blocks_for(lens[l], PER_BLOCK));
            launch(dev, "scan_add", grid, block, &args)?;
        }
        let out = bufs[0].1;
        let got: Vec<u32> = download(dev, out, n)?;
        let got_total: Vec<u32> = download(dev, total, 1)?;

        let want = p.reference();
        let want_total = p.data.iter().fold(0u32, |a, &x| a.wrapping_add(x));
        let mut check = Checker::new();
        check.exact_slice("out", &got, &want);
        check.exact("total", 0, got_total[0], want_total);
        Ok(check.finish())
    }
}

#[cfg(test)]
mod tests {
    use super::super::util::{from_bytes, to_bytes};
    use super::*;
    use crate::{DevPtr, Launch};

    /// Runs scan.cu's two kernels in Rust over buffers of u32, each launch recorded as (entry,
    /// grid, n): enough to check the host program's levels without a simulator.
    #[derive(Default)]
    struct Emulator {
        buffers: Vec<Vec<u32>>,
        launches: Vec<(String, u32, i32)>,
    }

    impl Emulator {
        /// Buffers live at 1 << 32 times their index plus one: arguments are their bases.
        fn buffer(&mut self, p: &Arg) -> &mut Vec<u32> {
            match *p {
                Arg::Ptr(DevPtr(a)) => &mut self.buffers[(a >> 32) as usize - 1],
                _ => panic!("{p:?} is not a pointer"),
            }
        }
    }

    impl Device for Emulator {
        fn alloc(&mut self, bytes: u64) -> Result<DevPtr, DeviceError> {
            self.buffers.push(vec![0; bytes.div_ceil(4) as usize]);
            Ok(DevPtr((self.buffers.len() as u64) << 32))
        }
        fn write(&mut self, dst: DevPtr, data: &[u8]) -> Result<(), DeviceError> {
            let buf = self.buffer(&Arg::Ptr(dst));
            buf[..data.len() / 4].copy_from_slice(&from_bytes(data));
            Ok(())
        }
        fn read(&mut self, src: DevPtr, len: u64) -> Result<Vec<u8>, DeviceError> {
            Ok(to_bytes(&self.buffer(&Arg::Ptr(src))[..len as usize / 4]))
        }
        fn launch(&mut self, l: &Launch<'_>) -> Result<(), DeviceError> {
            let per_block = 2 * l.block.x as usize;
            let (grid, args) = (l.grid.x as usize, l.args);
            let Arg::I32(n) = *args.last().unwrap() else {
                panic!("n")
            };
            self.launches.push((l.entry.to_string(), l.grid.x, n));
            let n = n as usize;
            match l.entry {
                "scan_blocks" => {
                    let input = self.buffer(&args[0]).clone();
                    let mut sums = vec![0u32; grid];
                    let out = self.buffer(&args[1]);
                    for (b, sum) in sums.iter_mut().enumerate() {
                        for i in b * per_block..((b + 1) * per_block).min(n) {
                            out[i] = *sum;
                            *sum = sum.wrapping_add(input[i]);
                        }
                    }
                    self.buffer(&args[2])[..grid].copy_from_slice(&sums);
                }
                "scan_add" => {
                    let add = self.buffer(&args[1])[..grid].to_vec();
                    let out = self.buffer(&args[0]);
                    for (i, x) in out[..n].iter_mut().enumerate() {
                        *x = x.wrapping_add(add[i / per_block]);
                    }
                }
                e => panic!("{e}"),
            }
            Ok(())
        }
    }

    /// Huge's block sums need a second level of blocks; Small and Large keep their three
    /// launches.
    #[test]
    fn host_program_scans_block_sums_in_levels() {
        for (size, grids) in [
            (Size::Small, &[17, 1, 17][..]),
            (Size::Large, &[258, 1, 258]),
            (Size::Huge, &[2114, 5, 1, 5, 2114]),
        ] {
            let mut dev = Emulator::default();
            let v = Scan.run(&mut dev, size, 5).unwrap();
            assert!(v.passed(), "{size:?}: {v:?}");
            let got: Vec<u32> = dev.launches.iter().map(|l| l.1).collect();
            assert_eq!(got, grids, "{size:?}: {:?}", dev.launches);
        }
    }

    #[test]
    fn exclusive_scan_wraps() {
        let p = Problem {
            data: vec![3, 1, u32::MAX, 2],
        };
        assert_eq!(p.reference(), vec![0, 3, 4, 3]);
    }
}
