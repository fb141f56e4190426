#![no_main]
//! Arbitrary bytes as the serial console of a guest DuT (`linerate bench
//! --dut vm:NAME`): its account, boot time and end read without panicking.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| linerate_measure::fuzz::fuzz_guest_console(data));
