#![no_main]
//! Arbitrary text as a capture filter (pcap-filter syntax, compiled by
//! libpcap) and the bytes after the first 0xff as a frame to match.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| linerate_pipeline::fuzz::fuzz_filter(data));
