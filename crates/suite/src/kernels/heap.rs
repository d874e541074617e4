//! `heap`: per-thread allocation from a heap the kernel manages itself (Halloc's
//! "add-strings", papers/tanasic-thesis Table 4.2 and §6.5.4): every thread allocates room
//! for the concatenation of two strings in its TB's slab, builds it there and publishes the
//! pointer; a second kernel follows the pointers and hashes the strings.
//!
//! The heap is allocated and never written by the host, so with demand paging its pages
//! are first touched by the GPU and their faults need no transfer: Figure 6.14's case.
//! Allocation is deterministic (a TB-wide prefix sum of the rounded sizes within the TB's
//! slab, see `kernels/heap/heap.cu`), so the whole heap is checked byte for byte.

use super::util::{alloc_zeroed, blocks_for, download, launch, upload, Checker, Rng};
use crate::{Arg, Device, DeviceError, Dim3, Kernel, Size, Stress, Target, Verification};

const BLOCK: u32 = 256;
/// Longest input string, bytes.
const MAX_LEN: u32 = 24;
/// Every allocation is a multiple of Halloc's smallest block.
const ALIGN: u32 = 16;
/// A TB's slab: room for every thread's largest allocation (16 KiB), the tightest layout
/// that needs no coordination between TBs. Halloc's slabs are megabytes, each serving one
/// block size; what matters here is how densely allocations fill the heap's pages, so
/// slabs are packed: four TBs share a 64 KiB fault region (§6.5.1's granularity).
const SLAB_BYTES: u32 = BLOCK * round_up(2 * MAX_LEN + 1);

const fn round_up(bytes: u32) -> u32 {
    (bytes + ALIGN - 1) & !(ALIGN - 1)
}

pub struct Heap;

#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    /// The strings, back to back.
    pub pool: Vec<u8>,
    pub offs: Vec<u32>,
    pub lens: Vec<u32>,
    /// Threads, one allocation each.
    pub n: u32,
}

/// The allocation heap.cu makes: every thread's string and its block's offset in the heap.
#[derive(Clone, Debug, PartialEq)]
pub struct Reference {
    pub heap: Vec<u8>,
    pub offsets: Vec<u64>,
    pub lens: Vec<u32>,
    pub hashes: Vec<u32>,
}

impl Problem {
    pub fn generate(size: Size, seed: u64) -> Self {
        // Small: 32 TBs (512 KiB of heap); Large: 1,024 TBs (16 MiB); Huge: 2,304 TBs
        // (2.2 waves of 8 TBs/SM on the h100, 36 MiB).
        let (tbs, n_strings) = match size {
            Size::Small => (32u32, 512u32),
            Size::Large => (1024, 4096),
            Size::Huge => (2304, 4096),
        };
        let mut rng = Rng::for_kernel("heap", seed);
        let mut pool = Vec::new();
        let mut offs = Vec::new();
        let mut lens = Vec::new();
        for _ in 0..n_strings {
            let len = 1 + rng.below(MAX_LEN);
            offs.push(pool.len() as u32);
            lens.push(len);
            pool.extend((0..len).map(|_| b'a' + rng.below(26) as u8));
        }
        Problem {
            pool,
            offs,
            lens,
            n: tbs * BLOCK,
        }
    }

    /// The two strings thread `i` concatenates (heap.cu's choice).
    fn pair(&self, i: u32) -> (usize, usize) {
        let n = self.lens.len() as u32;
        let a = i % n;
        let b = (i.wrapping_mul(2_654_435_761) >> 7) % n;
        (a as usize, b as usize)
    }

    fn string(&self, s: usize) -> &[u8] {
        let o = self.offs[s] as usize;
        &self.pool[o..o + self.lens[s] as usize]
    }

    pub fn tbs(&self) -> u32 {
        self.n.div_ceil(BLOCK)
    }

    pub fn heap_bytes(&self) -> u64 {
        u64::from(self.tbs()) * u64::from(SLAB_BYTES)
    }

    pub fn reference(&self) -> Reference {
        let mut heap = vec![0u8; self.heap_bytes() as usize];
        let mut offsets = Vec::with_capacity(self.n as usize);
        let mut lens = Vec::with_capacity(self.n as usize);
        let mut hashes = Vec::with_capacity(self.n as usize);
        let mut next = 0u64;
        for i in 0..self.n {
            if i % BLOCK == 0 {
                next = u64::from(i / BLOCK) * u64::from(SLAB_BYTES);
            }
            let (a, b) = self.pair(i);
            let s: Vec<u8> = [self.string(a), self.string(b)].concat();
            let at = next as usize;
            heap[at..at + s.len()].copy_from_slice(&s);
            offsets.push(next);
            lens.push(s.len() as u32);
            hashes.push(s.iter().fold(2_166_136_261u32, |h, &c| {
                (h ^ u32::from(c)).wrapping_mul(16_777_619)
            }));
            next += u64::from(round_up(s.len() as u32 + 1));
        }
        Reference {
            heap,
            offsets,
            lens,
            hashes,
        }
    }
}

impl Kernel for Heap {
    fn name(&self) -> &'static str {
        "heap"
    }
    fn description(&self) -> &'static str {
        "per-thread allocation from a device heap (Halloc-style add-strings), then pointer-chasing hashes"
    }
    fn sources(&self) -> &'static [(Target, &'static str)] {
        ptx!("heap")
    }
    fn traits(&self) -> &'static [&'static str] {
        &[
            "device heap",
            "warp scan (shfl.sync.up)",
            "byte loads and stores",
            "pointer chasing",
        ]
    }
    fn stress(&self) -> Stress {
        Stress::None
    }
    fn device_heap(&self) -> bool {
        true
    }

    fn run(
        &self,
        dev: &mut dyn Device,
        size: Size,
        seed: u64,
    ) -> Result<Verification, DeviceError> {
        let p = Problem::generate(size, seed);
        let pool = upload(dev, &p.pool)?;
        let offs = upload(dev, &p.offs)?;
        let lens = upload(dev, &p.lens)?;
        // Allocated, never written by the host: the GPU's own heap.
        let heap = dev.alloc_zeroed(p.heap_bytes())?;
        let n = p.n as usize;
        let ptrs = alloc_zeroed::<u64>(dev, n)?;
        let out_lens = alloc_zeroed::<u32>(dev, n)?;
        let hashes = alloc_zeroed::<u32>(dev, n)?;
        let grid = Dim3::x(blocks_for(n, BLOCK as usize));
        launch(
            dev,
            "heap_concat",
            grid,
            Dim3::x(BLOCK),
            &[
                Arg::Ptr(pool),
                Arg::Ptr(offs),
                Arg::Ptr(lens),
                Arg::U32(p.lens.len() as u32),
                Arg::U32(p.n),
                Arg::Ptr(heap),
                Arg::U32(SLAB_BYTES),
                Arg::Ptr(ptrs),
                Arg::Ptr(out_lens),
            ],
        )?;
        launch(
            dev,
            "heap_hash",
            grid,
            Dim3::x(BLOCK),
            &[
                Arg::Ptr(ptrs),
                Arg::Ptr(out_lens),
                Arg::U32(p.n),
                Arg::Ptr(hashes),
            ],
        )?;
        let got_ptrs: Vec<u64> = download(dev, ptrs, n)?;
        let got_lens: Vec<u32> = download(dev, out_lens, n)?;
        let got_hashes: Vec<u32> = download(dev, hashes, n)?;
        let got_heap: Vec<u8> = download(dev, heap, p.heap_bytes() as usize)?;

        let want = p.reference();
        let want_ptrs: Vec<u64> = want.offsets.iter().map(|o| heap.0 + o).collect();
        let mut check = Checker::new();
        check.exact_slice("pointer", &got_ptrs, &want_ptrs);
        check.exact_slice("length", &got_lens, &want.lens);
        check.exact_slice("hash", &got_hashes, &want.hashes);
        check.exact_slice("heap byte", &got_heap, &want.heap);
        Ok(check.finish())
    }
}
