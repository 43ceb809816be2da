#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tollgate_fuzz::bulk_request(data));
