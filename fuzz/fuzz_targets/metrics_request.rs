#![no_main]
//! Arbitrary bytes as a request to the `--metrics` HTTP server: no panic;
//! only `GET`/`HEAD /metrics` is ever served.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| linerate_pipeline::metrics::serve::fuzz(data));
