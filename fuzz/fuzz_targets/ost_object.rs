//! See `loom_fuzz::ost_object`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| loom_fuzz::ost_object(data));
