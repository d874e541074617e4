//! `cargo fuzz run gpu_config`: see `switchyard::fuzz::gpu_config`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| switchyard::fuzz::gpu_config(data));
