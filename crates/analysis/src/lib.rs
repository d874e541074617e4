//! Compiler analyses for preemption, over the kernel IR ([`kir`]): pure functions from a
//! [`kir::Kernel`] to per-instruction tables, no timing.
//!
//! * [`liveness`]: per-instruction live registers, plain and SIMT-aware
//!   (papers/lin-lightweight §III-B, Fig. 5).
//! * [`loops`]: natural loops, nesting depth, innermost loops.
//! * [`preemption_points`]: selective preemption points `pp` / `bar.pp` with their liveness
//!   vectors, and the rewrite that inserts them (papers/lin-lightweight §IV-A).
//! * [`idempotence`]: where a thread block can still be flushed and restarted, under strict and
//!   relaxed idempotence (papers/lin-lightweight §II-B, papers/li-pep §2.2).
//!
//! Every analysis works on whatever register ids the kernel uses: virtual registers straight
//! from lowering, or physical ones after register allocation. Analyses are objects that are
//! computed, and recomputed for another kernel reusing their buffers.

pub mod ctxback;
pub mod idempotence;
pub mod liveness;
pub mod loops;
pub mod preemption_points;
pub mod regset;

pub use idempotence::{AliasModel, Idempotence, IdempotenceConfig};
pub use liveness::{DivergentBranch, Enclosing, Liveness};
pub use loops::{Loop, LoopForest, LoopId};
pub use preemption_points::{
    insert_markers, insert_points, least_live_per_block, select_points, InsertError, PointOrigin,
    PpConfig, PpKind, PreemptionPlan, PreemptionPoint, WithPoints,
};
pub use regset::RegSet;

#[cfg(test)]
pub(crate) mod test_util {
    use kir::Kernel;

    use crate::regset::RegSet;

    /// Lowers a kernel `k(.param .u64 k_in, .param .u64 k_out, .param .u32 k_n)` with `body`.
    pub fn kernel(body: &str) -> Kernel {
        let text = format!(
            ".version 7.0\n.target sm_70\n.address_size 64\n\
             .visible .entry k(.param .u64 k_in, .param .u64 k_out, .param .u32 k_n)\n{{\n{body}\n}}\n"
        );
        let ast = ptx::parse(&text).unwrap_or_else(|e| panic!("parse: {e}\n{text}"));
        let m = kir::lower::lower_module(&ast, "test.ptx")
            .unwrap_or_else(|e| panic!("lower: {e:?}\n{text}"));
        m.kernels.values().next().expect("one kernel").clone()
    }

    /// The PTX names of a set's registers, sorted, space-separated.
    pub fn names(k: &Kernel, s: &RegSet) -> String {
        let mut v: Vec<&str> = s.iter().map(|r| k.regs[r].name.as_str()).collect();
        v.sort();
        v.join(" ")
    }
}
