#![no_main]
//! Arbitrary strings as switch meters (ovs-ofctl add-meter syntax): no
//! panic, one-line errors, print -> parse round trip, the token bucket at
//! any clock.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| linerate_pipeline::fuzz::fuzz_meter(data));
