//! Kernel IR: PTX lowered to typed, decoded instructions over registers, in program order,
//! with its control-flow graph, dominator and post-dominator trees and the reconvergence
//! point (immediate post-dominator) of every branch.
//!
//! Lowering ([`lower::lower_module`]) resolves every name (registers, labels, variables,
//! parameters), decodes each instruction's modifiers into an [`inst::Op`], inlines calls to
//! `.func`s, and reports anything Switchyard cannot execute as a [`lower::LowerError`] with
//! the span of the offending text — before anything runs.

pub mod cfg;
pub mod dom;
pub mod ids;
pub mod inst;
pub mod liveness;
pub mod lower;
pub mod matrix;
pub mod module;
pub mod regset;

pub use ids::{BlockId, GlobalId, Id, IdVec, InstId, KernelId, Reg};
pub use inst::{Inst, Op, Operand, Ty};
pub use module::{GlobalVar, Inserted, Kernel, Module};
pub use regset::RegSet;
