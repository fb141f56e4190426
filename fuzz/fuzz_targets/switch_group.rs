#![no_main]
//! Arbitrary strings as switch groups (ovs-ofctl add-group syntax): no
//! panic, one-line errors, print -> parse round trip.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| linerate_pipeline::fuzz::fuzz_group(data));
