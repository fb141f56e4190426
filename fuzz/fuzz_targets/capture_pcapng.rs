#![no_main]
//! Arbitrary bytes as a capture worker's pcapng file, read back as
//! `linerate capture --merge` does.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    linerate_pipeline::capture::pcapng::fuzz_read(data);
});
