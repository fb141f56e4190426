#![no_main]
//! Arbitrary bytes as a switch's replies to linerate's OpenFlow client
//! (read, barrier, flow dump, aggregate, multipart): no panic, no hang,
//! one-line errors.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| linerate_pipeline::switch::openflow::fuzz_client(data));
