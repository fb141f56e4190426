//! Cost of the per-packet fast path: parse_frame + flow key (+ hashes) on
//! minimum-size frames. Run: cargo run --release -p linerate-wire --example bench_parse
use linerate_wire::build::{build_udp, FrameParams, IpPair};
use linerate_wire::{parse_frame, rss};
use std::hint::black_box;
use std::time::Instant;

/// CPU time of this process (user + system) in ns, from /proc/self/stat
/// (USER_HZ = 100 on Linux). Used next to wall time because the machine
/// may be shared: wall time then includes time the thread was not running.
fn cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/stat").ok()?;
    let rest = &s[s.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some(ticks * 10_000_000)
}

fn time(name: &str, iters: u64, mut f: impl FnMut() -> u64) {
    let mut acc = 0u64;
    for _ in 0..iters / 10 {
        acc = acc.wrapping_add(f());
    }
    // Best of 3 runs of `iters`.
    let (mut best_wall, mut best_cpu) = (f64::MAX, f64::MAX);
    for _ in 0..3 {
        let (t, c) = (Instant::now(), cpu_ns());
        for _ in 0..iters {
            acc = acc.wrapping_add(f());
        }
        let wall = t.elapsed().as_nanos() as f64 / iters as f64;
        best_wall = best_wall.min(wall);
        if let (Some(c0), Some(c1)) = (c, cpu_ns()) {
            best_cpu = best_cpu.min((c1 - c0) as f64 / iters as f64);
        }
    }
    println!(
        "{name:<42} wall {best_wall:6.2} ns/pkt  cpu {best_cpu:6.2} ns/pkt  ({:x})",
        acc & 0xff
    );
}

fn main() {
    let iters: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(50_000_000);
    let payload = [0u8; 18];
    let mut p = FrameParams::new(IpPair::V4 {
        src: [10, 0, 0, 1],
        dst: [10, 0, 0, 2],
    });
    p.payload = &payload;
    let mut v4 = [0u8; 60];
    let n = build_udp(&mut v4, &p, 1234, 5678).unwrap();
    assert_eq!(n, 60, "64-byte frame on the wire = 60 bytes + FCS");
    let mut q = p;
    q.vlans = &[100, 200];
    let mut qinq = [0u8; 68];
    let nq = build_udp(&mut qinq, &q, 1234, 5678).unwrap();
    let mut r = FrameParams::new(IpPair::V6 {
        src: [1; 16],
        dst: [2; 16],
    });
    r.payload = &payload[..10];
    let mut v6 = [0u8; 78];
    let n6 = build_udp(&mut v6, &r, 1234, 5678).unwrap();

    time("parse_frame + flow_key (64B UDP/IPv4)", iters, || {
        let l = parse_frame(black_box(&v4[..n])).unwrap();
        let k = l.flow_key();
        k.src_port as u64 ^ k.dst_ip[15] as u64
    });
    time("parse_frame + flow_key + symmetric_hash", iters, || {
        let l = parse_frame(black_box(&v4[..n])).unwrap();
        l.flow_key().symmetric_hash()
    });
    time("parse_frame + flow_key (QinQ UDP/IPv4)", iters, || {
        let l = parse_frame(black_box(&qinq[..nq])).unwrap();
        l.flow_key().src_port as u64
    });
    time("parse_frame + flow_key (UDP/IPv6)", iters, || {
        let l = parse_frame(black_box(&v6[..n6])).unwrap();
        l.flow_key().src_port as u64
    });
    time("Toeplitz RSS hash (IPv4 4-tuple)", iters / 5, || {
        let l = parse_frame(black_box(&v4[..n])).unwrap();
        rss::hash_flow(&rss::MICROSOFT_KEY, &l.flow_key()) as u64
    });
}
