#![no_main]
//! Arbitrary bytes as a frame size of the bench's --sizes.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| linerate_measure::fuzz::fuzz_frame_size(data));
