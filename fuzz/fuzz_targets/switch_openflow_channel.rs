#![no_main]
//! Arbitrary bytes as what a peer sends through the OpenFlow channel's real
//! framing loop (in-memory stream, chunks and silences the bytes pick, a
//! clock of its own): no panic, the loop ends, every message it writes is
//! whole and as long as its header says.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| linerate_pipeline::switch::openflow::fuzz_channel(data));
