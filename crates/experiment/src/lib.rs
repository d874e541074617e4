//! The papers' experiments, run on the simulator and reduced to the papers' figures
//! (DESIGN.md §7). Each experiment is a library function returning plain data; the
//! command line renders it (table, JSON, CSV, SVG).
//!
//! * [`periodic`]: periodic preemption on one SM while the others run
//!   (papers/lin-lightweight §V-A), every suite kernel under every mechanism, each resume
//!   checked bit-exact against the uninterrupted run.
//! * [`figures`]: Figures 6, 8, 14, 15 and 16 of papers/lin-lightweight from its results.
//! * [`svg`]: a figure as an SVG bar chart.

pub mod figures;
pub mod periodic;
pub mod svg;

pub use periodic::{PeriodicConfig, PeriodicResults};
