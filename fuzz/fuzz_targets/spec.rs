//! `cargo fuzz run spec`: see `switchyard::fuzz::spec`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| switchyard::fuzz::spec(data));
