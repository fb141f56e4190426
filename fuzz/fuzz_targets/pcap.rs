#![no_main]
//! Arbitrary bytes as a pcap/pcapng file through the pcap port's reader.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    linerate_io::pcap::fuzz_read(data);
});
