//! Receiver tests on crafted frames.

use super::*;
use linerate_wire::build::{build_tcp, build_udp, FrameParams, IpPair};
use linerate_wire::signature::{Signature, FLAG_TS};
use linerate_wire::tcp::TcpRepr;

const V4: IpPair = IpPair::V4 {
    src: [10, 0, 0, 1],
    dst: [10, 0, 0, 2],
};

/// A UDP frame carrying `sig` (or a blank signature when `None`).
fn frame(sig: Option<Signature>) -> Vec<u8> {
    let mut payload = [0u8; 40];
    match sig {
        Some(s) => signature::write(&mut payload, &s).unwrap(),
        None => signature::write_blank(&mut payload).unwrap(),
    }
    let mut buf = vec![0u8; 256];
    let mut p = FrameParams::new(V4);
    p.payload = &payload;
    let n = build_udp(&mut buf, &p, 1000, 2000).unwrap();
    buf.truncate(n);
    buf
}

fn sig(stream: u16, seq: u64) -> Signature {
    Signature {
        stream,
        flags: 0,
        seq,
        tx_ns: 0,
    }
}

fn ts_sig(stream: u16, seq: u64, tx_ns: u64) -> Signature {
    Signature {
        stream,
        flags: FLAG_TS,
        seq,
        tx_ns,
    }
}

/// Feed frames as one batch of `Pkt`s with port timestamps `ts`.
fn feed(r: &mut Receiver, frames: &mut [Vec<u8>], ts: &[u64], now: u64) {
    let pkts: Vec<Pkt> = frames
        .iter_mut()
        .enumerate()
        // SAFETY: one test buffer per descriptor; it outlives the descriptor and nothing else touches it meanwhile.
        .map(|(i, f)| unsafe {
            Pkt::from_raw(
                f.as_mut_ptr(),
                f.len() as u32,
                i as u64,
                ts.get(i).copied().unwrap_or(0),
            )
        })
        .collect();
    r.on_batch(&pkts, now);
}

fn seqs(r: &mut Receiver, stream: u16, s: &[u64]) {
    let mut f: Vec<Vec<u8>> = s.iter().map(|&q| frame(Some(sig(stream, q)))).collect();
    feed(r, &mut f, &[], 1_000);
}

#[test]
fn loss_reorder_dup_of_known_permutation() {
    let mut r = Receiver::new(Clock::Monotonic);
    seqs(&mut r, 5, &[0, 1, 3, 2, 4, 4, 6]);
    let s = r.stream(5).unwrap();
    assert_eq!(s.packets, 7);
    assert_eq!(s.bytes, 7 * frame(None).len() as u64);
    assert_eq!(s.seq.max_seq(), Some(6));
    assert_eq!(s.seq.lost(), 1);
    assert_eq!(s.seq.reordered(), 1);
    assert_eq!(s.seq.duplicates(), 1);
    let rep = r.final_report();
    assert_eq!(rep.streams.len(), 1);
    let sr = &rep.streams[0];
    assert_eq!((sr.expected, sr.unique, sr.lost), (7, 6, 1));
    assert!((sr.loss_ratio - 1.0 / 7.0).abs() < 1e-12);
    assert!(sr.latency.is_none());
    assert_eq!(rep.totals.signed, 7);
}

#[test]
fn exact_loss_with_known_gaps() {
    let mut r = Receiver::new(Clock::Monotonic);
    // 0..10_000 without the multiples of 10 above 0 (999 gaps) and with a
    // burst of 100 missing at 5_000..5_100 (90 of them not multiples of 10).
    let s: Vec<u64> = (0..10_000u64)
        .filter(|q| (*q == 0 || q % 10 != 0) && !(5_000..5_100).contains(q))
        .collect();
    for chunk in s.chunks(64) {
        seqs(&mut r, 1, chunk);
    }
    let st = r.stream(1).unwrap();
    assert_eq!(st.seq.lost(), 999 + 90);
    assert_eq!(st.seq.reordered(), 0);
    assert_eq!(st.seq.duplicates(), 0);
    assert_eq!(st.packets, 10_000 - 999 - 90);
}

#[test]
fn interleaved_streams_are_independent() {
    let mut r = Receiver::new(Clock::Monotonic);
    let mut frames = Vec::new();
    // Stream 0: in order 0..100. Stream 7: even numbers only. Stream 65535:
    // 0..50 in reverse pairs (1,0,3,2,...), with 10 sent twice.
    for i in 0..100u64 {
        frames.push(frame(Some(sig(0, i))));
        if i % 2 == 0 {
            frames.push(frame(Some(sig(7, i))));
        }
        if i < 50 {
            frames.push(frame(Some(sig(65535, i ^ 1))));
        }
        if i == 30 {
            frames.push(frame(Some(sig(65535, 10))));
        }
    }
    for chunk in frames.chunks_mut(32) {
        feed(&mut r, chunk, &[], 5);
    }
    let a = r.stream(0).unwrap();
    assert_eq!(
        (
            a.packets,
            a.seq.lost(),
            a.seq.reordered(),
            a.seq.duplicates()
        ),
        (100, 0, 0, 0)
    );
    let b = r.stream(7).unwrap();
    assert_eq!(
        (b.packets, b.seq.lost(), b.seq.max_seq()),
        (50, 49, Some(98))
    );
    let c = r.stream(65535).unwrap();
    assert_eq!(
        (
            c.packets,
            c.seq.lost(),
            c.seq.reordered(),
            c.seq.duplicates()
        ),
        (51, 0, 25, 1)
    );
    assert!(r.stream(1).is_none());
    assert_eq!(r.counters().signed, 201);
    let ids: Vec<u16> = r.streams().iter().map(|s| s.id).collect();
    assert_eq!(ids, [0, 7, 65535]);
}

fn short_payload() -> Vec<u8> {
    let mut buf = vec![0u8; 128];
    let mut p = FrameParams::new(V4);
    p.payload = b"LRSG\0\0\0\0";
    let n = build_udp(&mut buf, &p, 1, 2).unwrap();
    buf.truncate(n);
    buf
}

#[test]
fn malformed_and_unsigned_counted_by_reason() {
    let mut r = Receiver::new(Clock::Monotonic);
    let good = frame(Some(sig(2, 0)));
    let mut bad_version = good.clone();
    bad_version[14] = 0x65; // IP version 6 in an IPv4 EtherType
    let mut bad_len = good.clone();
    bad_len[16] = 0xff; // IPv4 total length beyond the frame
    let mut frames = vec![
        good[..10].to_vec(), // shorter than Ethernet
        good[..30].to_vec(), // IPv4 header cut
        bad_version,
        bad_len,
        frame(None), // blank signature
        good.clone(),
        vec![0u8; 60],   // EtherType 0: not IP, no signature
        short_payload(), // payload shorter than a signature
    ];
    feed(&mut r, &mut frames, &[], 1);
    let c = r.counters();
    assert_eq!(c.packets, 8);
    assert_eq!(c.malformed_total(), 4);
    assert_eq!(c.signed, 1);
    assert_eq!(c.unsigned, 3);
    let rep = r.final_report();
    assert_eq!(rep.totals.malformed, 4);
    assert_eq!(rep.totals.malformed_by_reason.values().sum::<u64>(), 4);
    assert!(rep.totals.malformed_by_reason.contains_key("truncated"));
    assert!(rep.to_text().contains("malformed 4 ("), "{}", rep.to_text());
    assert_eq!(r.stream(2).unwrap().packets, 1);
}

#[test]
fn signature_found_after_vlan_ipv6_and_tcp() {
    let mut r = Receiver::new(Clock::Monotonic);
    let mut payload = [0u8; 24];
    signature::write(&mut payload, &sig(9, 3)).unwrap();
    let mut p = FrameParams::new(IpPair::V6 {
        src: [1; 16],
        dst: [2; 16],
    });
    p.vlans = &[100, 200];
    p.payload = &payload;
    let mut buf = vec![0u8; 256];
    let t = TcpRepr {
        src_port: 1,
        dst_port: 2,
        seq: 0,
        ack: 0,
        flags: 0x10,
        window: 100,
        urgent: 0,
    };
    let n = build_tcp(&mut buf, &p, &t).unwrap();
    buf.truncate(n);
    feed(&mut r, &mut [buf], &[], 1);
    assert_eq!(r.stream(9).unwrap().seq.max_seq(), Some(3));
}

#[test]
fn latency_percentiles_of_known_values() {
    let mut r = Receiver::new(Clock::Monotonic);
    let tx0 = 5_000_000_000u64;
    // Latencies 1..=1000 µs, one per batch, in a shuffled order.
    for k in 0..1000u64 {
        let i = (k * 7919) % 1000 + 1;
        let mut f = [frame(Some(ts_sig(3, k, tx0 + k)))];
        feed(&mut r, &mut f, &[], tx0 + k + i * 1_000);
    }
    let rep = r.final_report();
    let l = rep.streams[0].latency.clone().unwrap();
    assert_eq!(l.samples, 1000);
    assert_eq!((l.min_ns, l.max_ns), (1_000, 1_000_000));
    assert!((l.mean_ns - 500_500.0).abs() < 1e-6);
    let near = |got: u64, want: u64| {
        let e = (got as f64 - want as f64).abs() / want as f64;
        assert!(e <= 0.001, "got {got} want {want}");
    };
    near(l.p50_ns, 500_000);
    near(l.p90_ns, 900_000);
    near(l.p99_ns, 990_000);
    near(l.p99_9_ns, 999_000);
    near(l.p99_99_ns, 1_000_000);
    // stddev of 1..=1000 µs uniform: sqrt((1000^2 - 1)/12) µs.
    let sd = ((1000.0f64 * 1000.0 - 1.0) / 12.0).sqrt() * 1e3;
    assert!((l.stddev_ns - sd).abs() / sd < 0.001, "{}", l.stddev_ns);
    assert_eq!((l.negative, l.over_range), (0, 0));
}

#[test]
fn kernel_realtime_timestamps_converted_to_monotonic() {
    let offset = 1_700_000_000_000_000_000i64; // REALTIME - MONOTONIC
    let mut r = Receiver::new(Clock::KernelRealtime {
        offset_ns: offset,
        offset_err_ns: 0,
    });
    let tx = 10_000_000u64;
    // Kernel stamps 25 µs and 40 µs after TX (in realtime); the batch time
    // (much later) must not be used for them. A third packet without a
    // kernel timestamp falls back to the batch time and is counted.
    let mut f = vec![
        frame(Some(ts_sig(1, 0, tx))),
        frame(Some(ts_sig(1, 1, tx))),
        frame(Some(ts_sig(1, 2, tx))),
    ];
    let rt = |mono: u64| (mono as i64 + offset) as u64;
    feed(
        &mut r,
        &mut f,
        &[rt(tx + 25_000), rt(tx + 40_000), 0],
        tx + 1_000_000,
    );
    let s = r.stream(1).unwrap();
    assert_eq!(s.lat_min_ns, 25_000);
    assert_eq!(s.latency.count_at(40_000), 1);
    assert_eq!(s.lat_max_ns, 1_000_000);
    assert_eq!(r.counters().no_rx_timestamp, 1);
    assert_eq!((s.first_rx_ns, s.last_rx_ns), (tx + 25_000, tx + 1_000_000));
    assert!(r.final_report().clock_detail.contains("CLOCK_REALTIME"));

    // With the live offset: a realtime stamp read now is ~0 latency from a
    // monotonic TX time read just before.
    let c = Clock::kernel_realtime();
    let mut r = Receiver::new(c);
    let tx = monotonic_ns();
    let now_rt = {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap();
        t.as_nanos() as u64
    };
    feed(&mut r, &mut [frame(Some(ts_sig(0, 0, tx)))], &[now_rt], 0);
    let s = r.stream(0).unwrap();
    assert_eq!(s.lat_negative, 0, "converted RX before TX");
    assert!(s.lat_max_ns < 50_000_000, "latency {} ns", s.lat_max_ns);
}

#[test]
fn negative_and_huge_latencies_clamped_and_counted() {
    let mut r = Receiver::new(Clock::Monotonic);
    let mut f = [frame(Some(ts_sig(0, 0, 2_000)))];
    feed(&mut r, &mut f, &[], 1_000);
    let mut f = [frame(Some(ts_sig(0, 1, 0)))];
    feed(&mut r, &mut f, &[], 100 * 1_000_000_000);
    let l = r.final_report().streams[0].latency.clone().unwrap();
    assert_eq!((l.negative, l.over_range), (1, 1));
    assert_eq!((l.min_ns, l.max_ns), (0, LATENCY_MAX_NS));
}

#[test]
fn too_many_streams_counted_not_tracked() {
    let mut r = Receiver::with_max_streams(Clock::Monotonic, 2);
    seqs(&mut r, 1, &[0]);
    seqs(&mut r, 2, &[0, 1]);
    seqs(&mut r, 3, &[0, 1, 2]);
    seqs(&mut r, 1, &[1]);
    assert_eq!(r.streams().len(), 2);
    assert_eq!(r.counters().too_many_streams, 3);
    assert_eq!(r.counters().signed, 4);
    assert!(r.stream(3).is_none());
    assert_eq!(r.final_report().totals.too_many_streams, 3);
}

#[test]
fn snapshot_rates_are_per_interval() {
    let mut r = Receiver::new(Clock::Monotonic);
    let s0 = 1_000_000_000u64;
    // 1000 packets in the first second (batch times s0 .. s0+1s), then 500.
    let mut seq = 0;
    for b in 0..10u64 {
        let mut f: Vec<Vec<u8>> = (0..100)
            .map(|_| {
                seq += 1;
                frame(Some(ts_sig(4, seq - 1, s0)))
            })
            .collect();
        feed(&mut r, &mut f, &[], s0 + b * 100_000_000);
    }
    let a = r.snapshot(s0 + 1_000_000_000);
    assert_eq!(a.streams.len(), 1);
    assert!(
        (a.streams[0].pps - 1000.0).abs() < 1e-6,
        "{}",
        a.streams[0].pps
    );
    assert!((a.pps - 1000.0).abs() < 1e-6);
    assert_eq!(a.streams[0].packets, 1000);
    assert!(a.streams[0].p50_ns.is_some());
    let mut f: Vec<Vec<u8>> = (0..500).map(|i| frame(Some(sig(4, seq + i)))).collect();
    feed(&mut r, &mut f, &[], s0 + 1_500_000_000);
    let b = r.snapshot(s0 + 2_000_000_000);
    assert!((b.streams[0].pps - 500.0).abs() < 1e-6);
    assert!((b.interval_s - 1.0).abs() < 1e-9);
    let bits = 500.0 * frame(None).len() as f64 * 8.0;
    assert!((b.streams[0].bps - bits).abs() < 1e-6);
    assert_eq!(b.streams[0].lost, 0);
    let line = b.to_text();
    assert!(line.contains("stream     4:"), "{line}");
    assert!(line.contains("lost 0 reordered 0 dup 0"), "{line}");
}

#[test]
fn outputs_text_json_csv_dir() {
    let mut r = Receiver::new(Clock::Monotonic);
    for k in 0..100u64 {
        // Latencies 10 µs (x50) and 20 µs (x50).
        let lat = if k % 2 == 0 { 10_000 } else { 20_000 };
        let mut f = [frame(Some(ts_sig(8, k, 1_000_000 + k * 1_000)))];
        feed(&mut r, &mut f, &[], 1_000_000 + k * 1_000 + lat);
    }
    seqs(&mut r, 9, &[0, 2]); // no latency
    let rep = r.final_report();
    let j = rep.to_json();
    assert_eq!(j["streams"][0]["stream"], 8);
    assert_eq!(j["streams"][0]["latency"]["samples"], 100);
    assert_eq!(j["streams"][1]["lost"], 1);
    assert!(j["streams"][1]["latency"].is_null());
    assert_eq!(j["clock"], "monotonic-per-batch");
    assert_eq!(j["seq_window"], WINDOW);
    let text = rep.to_text();
    assert!(
        text.contains("CLOCK_MONOTONIC read once per batch"),
        "{text}"
    );
    assert_eq!(text.lines().count(), 5, "{text}");

    let mut h = Vec::new();
    assert!(r.write_histogram_csv(8, &mut h).unwrap());
    assert_eq!(
        String::from_utf8(h).unwrap(),
        "value_ns,count\n10007,50\n20015,50\n"
    );
    let mut c = Vec::new();
    assert!(r.write_cdf_csv(8, &mut c).unwrap());
    assert_eq!(
        String::from_utf8(c).unwrap(),
        "value_ns,fraction\n10007,0.500000000\n20015,1.000000000\n"
    );
    assert!(!r.write_histogram_csv(9, &mut Vec::new()).unwrap());
    assert!(!r.write_cdf_csv(1234, &mut Vec::new()).unwrap());

    let dir = std::env::temp_dir().join(format!("linerate-count-{}", std::process::id()));
    let files = r.write_dir(&dir).unwrap();
    let names: Vec<String> = files
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        [
            "report.txt",
            "report.json",
            "latency-hist-stream-8.csv",
            "latency-cdf-stream-8.csv"
        ]
    );
    let back: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    assert_eq!(back["streams"][0]["latency"], j["streams"][0]["latency"]);
    assert_eq!(back["totals"], j["totals"]);
    let txt = std::fs::read_to_string(dir.join("report.txt")).unwrap();
    assert_eq!(txt, text);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn preallocated_states_are_used_and_capped() {
    let mut r = Receiver::with_max_streams(Clock::Monotonic, 3);
    r.preallocate(10);
    let mut f = [frame(Some(ts_sig(6, 0, 100)))];
    feed(&mut r, &mut f, &[], 300);
    seqs(&mut r, 7, &[0, 2]);
    seqs(&mut r, 8, &[1]);
    seqs(&mut r, 9, &[0]);
    let s6 = r.stream(6).unwrap();
    assert_eq!((s6.id, s6.first_rx_ns, s6.lat_min_ns), (6, 300, 200));
    assert_eq!(r.stream(7).unwrap().seq.lost(), 1);
    assert_eq!(r.stream(8).unwrap().seq.lost(), 1);
    assert_eq!(r.counters().too_many_streams, 1);
}
