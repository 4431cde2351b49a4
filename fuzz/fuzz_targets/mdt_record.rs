//! See `loom_fuzz::mdt_record`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| loom_fuzz::mdt_record(data));
