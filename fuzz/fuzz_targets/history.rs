#![no_main]
//! Arbitrary bytes as the RFC 2544 bench's history file (one JSON run per
//! line): parse, write back, the between-run spread.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| linerate_measure::fuzz::fuzz_history(data));
