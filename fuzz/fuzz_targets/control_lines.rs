#![no_main]
//! Arbitrary bytes cut into lines the way the control sockets read them
//! (bounded length, arbitrary read sizes): no panic, lines in order.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| linerate_pipeline::ctl::fuzz_lines(data));
