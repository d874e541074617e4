//! `cargo fuzz run ptx`: see `switchyard::fuzz::ptx`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| switchyard::fuzz::ptx(data));
