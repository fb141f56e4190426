#![no_main]
//! Arbitrary bytes as control-socket requests (`linerate switch --ctl`,
//! `linerate capture --ctl`): no panic, errors are one line.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| linerate_pipeline::capture::ctl::fuzz(data));
