//! See `loom_fuzz::message`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| loom_fuzz::message(data));
