#![no_main]
//! Arbitrary bytes as a DuT spec file (`linerate bench --dut-file`):
//! parse, check placeholders, expand.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| linerate_measure::fuzz::fuzz_dut_spec(data));
