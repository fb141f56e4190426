#![no_main]
//! Arbitrary bytes as the OpenFlow 1.3 messages of one connection to a
//! switch (after the HELLOs): no panic, whatever the lengths, types,
//! matches, instructions and Nicira actions say.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| linerate_pipeline::switch::openflow::fuzz(data));
