#![no_main]
//! Arbitrary bytes as a pcap/pcapng file read the way one over 4 MiB is:
//! in chunks (here small ones), refilled, records passed over by seeking,
//! rewound for each pass; compared with the file read whole.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    linerate_io::pcap::fuzz_chunked(data);
});
