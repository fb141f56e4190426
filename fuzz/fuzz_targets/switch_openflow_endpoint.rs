#![no_main]
//! Arbitrary bytes as an `--openflow` value: no panic, one-line errors, an
//! endpoint prints in Open vSwitch's syntax and reads back to itself.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| linerate_pipeline::switch::openflow::fuzz_endpoint(data));
