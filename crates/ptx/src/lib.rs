//! PTX text → syntax tree, with spans on everything a diagnostic may point at.
//!
//! This crate knows nothing of the GPU: it reads PTX as NVRTC and nvcc emit it (ISA 6.0–9.x)
//! and keeps instructions in their written form (see [`ast`]). Errors carry a [`Span`]; the
//! [`SourceFile`] turns it into `file:line:col`.
//!
//! ```
//! let m = ptx::parse(".version 8.5\n.target sm_90\n.address_size 64\n").unwrap();
//! assert_eq!(m.version, (8, 5));
//! ```

pub mod ast;
pub mod error;
pub mod lexer;
pub mod parser;
pub mod span;

pub use error::ParseError;
pub use parser::parse;
pub use span::{SourceFile, Span};
