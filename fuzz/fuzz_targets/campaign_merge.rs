#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tollgate_fuzz::campaign_merge(data));
