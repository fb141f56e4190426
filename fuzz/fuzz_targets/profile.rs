#![no_main]
//! Arbitrary text as a generator profile (TOML): parse, write back, compile
//! into a generator and build frames at several times.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| linerate_pipeline::fuzz::fuzz_profile(data));
