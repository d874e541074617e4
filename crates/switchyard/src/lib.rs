//! Library entry points shared by the `switchyard` command and its tests.

pub mod suite_run;
