#![no_main]
//! Arbitrary bytes as the watchdog's registration lines: everything it
//! would kill or remove is safe to.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| linerate_measure::fuzz::fuzz_guard(data));
