#![no_main]
//! Arbitrary bytes as frames into the switch's key extraction: no panic,
//! and the fixed-offset fast path agrees with the general parser.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| linerate_pipeline::switch::key::fuzz(data));
