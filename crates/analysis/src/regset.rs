//! The register set the analyses use: [`kir::regset::RegSet`], shared with the register
//! allocator's liveness.

pub use kir::regset::RegSet;
