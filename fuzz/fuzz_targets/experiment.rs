#![no_main]
//! Arbitrary text as an experiment file (TOML): parse, check the design,
//! analyse made-up observations.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| linerate_measure::fuzz::fuzz_experiment(data));
