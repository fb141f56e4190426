#![no_main]
//! Arbitrary text as an experiment's observations file (CSV): parse,
//! write back, parse again.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| linerate_measure::fuzz::fuzz_data(data));
