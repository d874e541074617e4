//! Library entry points shared by the `switchyard` command and its tests.

pub mod analyze;
pub mod diag;
pub mod fuzz;
pub mod hardware;
pub mod input;
pub mod output;
pub mod ptx_run;
pub mod suite_run;
