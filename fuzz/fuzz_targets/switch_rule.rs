#![no_main]
//! Arbitrary strings as switch rules (ovs-ofctl flow syntax) and matches:
//! no panic, one-line errors, print -> parse round trip.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| linerate_pipeline::switch::rule::fuzz(data));
