//! See `loom_fuzz::frame`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| loom_fuzz::frame(data));
