//! Fuzz bodies for what this crate reads from users besides switch rules
//! and frames (those are next to their parsers: `switch::rule::fuzz`,
//! `switch::key::fuzz`, `capture::analyser::fuzz_http`,
//! `capture::pcapng::fuzz_read`): switch groups and meters, generator
//! profiles and capture filters. Each takes arbitrary bytes and asserts
//! invariants that must hold for any input; a panic is a bug. The
//! cargo-fuzz targets in `fuzz/` call them.

use crate::capture::filter::Filter;
use crate::generate::profile::Profile;
use crate::generate::{Generator, MAX_FRAME, MIN_FRAME};
use crate::switch::actions::{Env, Out};
use crate::switch::actions::{Meter, MeterUnit};
use crate::switch::group::{self, Group};

/// Arbitrary text as a group (`ovs-ofctl add-group` syntax): no panic,
/// one-line errors, the printed form of a parsed group parses back to the
/// same group, and running it on a frame does not panic.
pub fn fuzz_group(data: &[u8]) {
    let Ok(s) = core::str::from_utf8(data) else {
        return;
    };
    match Group::parse(s) {
        Ok(g) => {
            let t = g.to_string();
            let g2 = Group::parse(&t)
                .unwrap_or_else(|e| panic!("printed group {t:?} does not parse: {e}"));
            assert_eq!(g, g2, "round trip of {t:?}");
            let mut groups = std::collections::HashMap::new();
            if group::check_chain(&groups, &g).is_err() {
                return;
            }
            groups.insert(g.id, std::sync::Arc::new(g));
            let cx = group::GroupCtx {
                groups: &groups,
                ports: &[1, 2, 3],
                up: &[],
                budget: std::cell::Cell::new(group::BUDGET),
            };
            let mut scratch = vec![0u8; group::MAX_DEPTH * group::slot_len(256)];
            let frame: Vec<u8> = data.iter().copied().cycle().take(200).collect();
            for id in groups.keys() {
                group::run(&cx, *id, &frame, &mut scratch, 0, &mut Sink);
            }
        }
        Err(e) => assert!(!e.contains('\n'), "multi-line error: {e:?}"),
    }
}

/// An [`Env`] that takes every output and passes every meter.
struct Sink;
impl Env for Sink {
    fn output(&mut self, _: Out, _: &[u8]) {}
    fn meter(&mut self, _: u32, _: usize) -> bool {
        true
    }
}

/// Arbitrary text as a meter (`ovs-ofctl add-meter` syntax): no panic,
/// one-line errors, the id is the number written, the canonical form
/// parses back to the same meter, and the token bucket admits packets at
/// any times (including a clock far from 0) without overflowing, counting
/// every packet as passed or dropped.
pub fn fuzz_meter(data: &[u8]) {
    let Ok(s) = core::str::from_utf8(data) else {
        return;
    };
    let mut m = match Meter::parse(s) {
        Ok(m) => m,
        Err(e) => {
            assert!(!e.contains('\n'), "multi-line error: {e:?}");
            return;
        }
    };
    assert!(m.rate > 0);
    // The last `meter=` wins (`band=` may prefix any token).
    let written = s
        .split([',', ' ', '\t'])
        .map(|t| t.strip_prefix("band=").unwrap_or(t))
        .filter_map(|t| t.strip_prefix("meter="))
        .next_back()
        .and_then(|v| v.parse::<u64>().ok());
    assert_eq!(Some(u64::from(m.id)), written, "meter id of {s:?}");
    let unit = match m.unit {
        MeterUnit::Pktps => "pktps",
        MeterUnit::Kbps => "kbps",
    };
    let t = format!(
        "meter={},{unit},band=type=drop,rate={},burst_size={}",
        m.id, m.rate, m.burst
    );
    let m2 = Meter::parse(&t).unwrap_or_else(|e| panic!("printed meter {t:?} does not parse: {e}"));
    assert_eq!(
        (m.id, m.unit, m.rate, m.burst),
        (m2.id, m2.unit, m2.rate, m2.burst),
        "round trip of {t:?}"
    );
    let times = [
        0,
        1,
        1_000,
        1_000_000_000,
        3_600_000_000_000,
        1 << 50,
        u64::MAX / 2,
        u64::MAX - 1,
        u64::MAX,
    ];
    let mut n = 0;
    for (i, &now) in times.iter().enumerate() {
        for bytes in [60, 1514, 9000, 65535] {
            m.admit(now, bytes);
            n += 1;
        }
        // And back in time (a clock that stepped): no refill, no panic.
        m.admit(times[i / 2], 60);
        n += 1;
    }
    assert_eq!(m.passed + m.dropped, n);
}

/// Arbitrary text as a generator profile (TOML): no panic, one-line
/// errors; a profile that parses writes back to TOML that parses to the
/// same profile; compiling it into a generator either fails in one line or
/// gives frames of 60..=9000 bytes that parse as Ethernet frames, at any
/// time, with every sent packet counted.
pub fn fuzz_profile(data: &[u8]) {
    let Ok(s) = core::str::from_utf8(data) else {
        return;
    };
    let p = match Profile::from_toml_str(s) {
        Ok(p) => p,
        Err(e) => {
            assert!(!e.0.contains('\n'), "multi-line error: {e:?}");
            return;
        }
    };
    // Written back (when TOML can hold it: integers are i64 there).
    if let Ok(t) = toml::to_string(&p) {
        let p2 = Profile::from_toml_str(&t)
            .unwrap_or_else(|e| panic!("written profile {t:?} does not parse: {e}"));
        // NaN never equals itself; compare the text instead.
        assert!(
            p == p2 || toml::to_string(&p2).ok().as_deref() == Some(t.as_str()),
            "round trip of {t:?}"
        );
    }
    // Compiling allocates the frame buffers and the size cycles: keep to
    // profiles that stay small.
    if p.streams.len() > 8 {
        return;
    }
    let mut g = match Generator::new(&p) {
        Ok(g) => g,
        Err(e) => {
            assert!(!e.0.contains('\n'), "multi-line error: {e:?}");
            return;
        }
    };
    assert!((MIN_FRAME..=MAX_FRAME).contains(&g.max_frame_len()));
    assert_eq!(g.stream_names().len(), p.streams.len());
    let mut sent = 0u64;
    for now in [0, 1, 1_000, 1_000_000, 1_000_000_000, 1 << 40, u64::MAX / 2] {
        let n = g.next_batch(now, 32);
        assert_eq!(n, g.batch().len());
        for pkt in g.batch().pkts() {
            let f = pkt.bytes();
            assert!(
                (MIN_FRAME..=MAX_FRAME).contains(&f.len()),
                "frame of {} bytes",
                f.len()
            );
            linerate_wire::parse_frame(f)
                .unwrap_or_else(|e| panic!("generated frame does not parse: {e:?}"));
        }
        g.stamp(0, now);
        g.sent(0, n, now);
        sent += n as u64;
        let _ = g.done_at(now);
        let _ = g.next_departure_ns();
    }
    let counted: u64 = g.stats().iter().map(|s| s.sent_pkts).sum();
    assert_eq!(counted, sent);
}

/// Arbitrary bytes as a capture filter and a frame: the text up to the
/// first 0xff byte is compiled (pcap-filter syntax, by libpcap), the rest
/// is matched. No panic, one-line errors.
pub fn fuzz_filter(data: &[u8]) {
    let cut = data.iter().position(|&b| b == 0xff).unwrap_or(data.len());
    let Ok(expr) = core::str::from_utf8(&data[..cut]) else {
        return;
    };
    let frame = data.get(cut + 1..).unwrap_or(&[]);
    match Filter::compile(expr) {
        Ok(f) => {
            let _ = f.matches(frame);
            let _ = f.matches(&frame[..frame.len().min(14)]);
            assert_eq!(f.expr(), expr);
        }
        Err(e) => assert!(!e.contains('\n'), "multi-line error: {e:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_take_examples_and_garbage() {
        fuzz_group(b"group_id=1,type=all,bucket=output:2,bucket=output:3");
        fuzz_group(b"group_id=x");
        fuzz_group(b"group_id=2,type=select,bucket=weight:2,watch_port:3,set_field:9->udp_dst,push_vlan:0x8100,output:1,bucket=group:2");
        fuzz_group(
            b"group_id=4,type=ff,bucket=watch_group:4,output:1,bucket=watch_port:1,dec_ttl,in_port",
        );
        // Found by fuzzing: a bucket action's error quoted its control
        // characters as they were (a two-line error).
        fuzz_group(b"group_id=0,type=all,bucket=ououp\x002\x00\x001\xda\x81\n@l");
        fuzz_meter(b"meter=1,pktps,band=type=drop,rate=1000,burst_size=10");
        fuzz_meter(b"meter=2 kbps band=type=drop,rate=8000");
        fuzz_meter(b"meter=1,rate=0");
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
        for f in ["udp-cbr.toml", "imix-mix.toml", "poisson-latency.toml"] {
            let t = std::fs::read(dir.join(f)).unwrap();
            fuzz_profile(&t);
            fuzz_profile(&t[..t.len() / 2]);
        }
        fuzz_filter(b"tcp port 80\xff\x00\x01");
        fuzz_filter(b"tcp prot 80");
    }
}
