#![no_main]
//! Arbitrary strings as port URIs: parse and query every accessor.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(u) = linerate_io::Uri::parse(s) {
        let _ = u.get_or("queue", 0u32);
        let _ = u.get_bool("zerocopy", false);
        let _ = u.get_choice("mode", &["native", "generic"], "native");
        let _ = u.check_known(&["queue", "mode"]);
        assert!(!u.err("x").to_string().contains('\n') || s.contains('\n'));
    }
});
