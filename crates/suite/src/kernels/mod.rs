//! The suite's kernels, one module each.
//!
//! Every module holds a unit struct implementing [`Kernel`], a `Problem` with a deterministic
//! generator (`Problem::generate(size, seed)`) and a CPU reference. The CUDA C sources and the
//! committed PTX live in `kernels/<name>/` at the repository root (see `kernels/README.md`);
//! `tools/gen_ptx.py` regenerates the PTX.

use crate::Kernel;

/// The committed PTX of kernel `$name` for each of its targets ([`Kernel::sources`]),
/// embedded at compile time: `sm_70` and `sm_90` by default, or the targets listed (the
/// source's `// targets:` line for `tools/gen_ptx.py` says the same).
macro_rules! ptx {
    ($name:literal) => {
        ptx!($name, [Sm70 "sm_70", Sm90 "sm_90"])
    };
    ($name:literal, [$($target:ident $suffix:literal),+]) => {
        &[$((
            $crate::Target::$target,
            include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../kernels/",
                $name,
                "/",
                $name,
                ".",
                $suffix,
                ".ptx"
            )),
        )),+]
    };
}

pub mod util;

mod attention;
mod bfs;
mod bitonic;
mod blackscholes;
mod branchy;
mod conv2d;
mod dct8;
mod dgemv;
mod gemm;
mod heap;
mod hist;
mod hotspot;
mod igemv;
mod kmeans;
mod layernorm;
mod mandel;
mod mgemm;
mod mulword;
mod pathfinder;
mod reduce;
mod scan;
mod softmax;
mod spmv;
mod srad;
mod warpred;
mod wgemm;

/// Every kernel of the suite, in a stable order.
pub fn all() -> &'static [&'static dyn Kernel] {
    &[
        &gemm::Gemm,
        &dct8::Dct8,
        &conv2d::Conv2d,
        &bitonic::Bitonic,
        &hist::Hist,
        &reduce::Reduce,
        &scan::Scan,
        &bfs::Bfs,
        &hotspot::Hotspot,
        &pathfinder::Pathfinder,
        &mandel::Mandel,
        &branchy::Branchy,
        &kmeans::Kmeans,
        &spmv::Spmv,
        &blackscholes::BlackScholes,
        &dgemv::Dgemv,
        &igemv::Igemv,
        &srad::Srad,
        &layernorm::Layernorm,
        &softmax::Softmax,
        &mulword::Mulword,
        &warpred::Warpred,
        &wgemm::Wgemm,
        &mgemm::Mgemm,
        &attention::Attention,
        &heap::Heap,
    ]
}

#[cfg(test)]
mod tests;
