#![no_main]
//! Arbitrary bytes as frames and as an HTTP byte stream through the
//! capture `http` analyser.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    linerate_pipeline::capture::analyser::fuzz_http(data);
});
