//! `cargo fuzz run functional`: see `switchyard::fuzz::functional`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| switchyard::fuzz::functional(data));
