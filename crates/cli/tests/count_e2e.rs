//! `linerate count` on a capture with known reordering, duplicates and
//! losses injected: the report gives exactly those numbers.

use linerate_wire::build::{build_udp, FrameParams, IpPair};
use linerate_wire::signature::{self, Signature, FLAG_TS};
use std::process::Command;

mod support;
use support::write_pcap;

fn frame(stream: u16, seq: u64) -> Vec<u8> {
    let mut payload = [0u8; 40];
    signature::write(
        &mut payload,
        &Signature {
            stream,
            flags: FLAG_TS,
            seq,
            tx_ns: 1_000 + seq,
        },
    )
    .unwrap();
    let p = FrameParams {
        payload: &payload,
        ..FrameParams::new(IpPair::V4 {
            src: [10, 0, 0, 1],
            dst: [10, 0, 0, 2],
        })
    };
    let mut buf = vec![0u8; 128];
    let n = build_udp(&mut buf, &p, 1000 + stream, 9).unwrap();
    buf.truncate(n);
    buf
}

#[test]
fn reordering_duplicates_and_loss_from_a_capture_are_exact() {
    let dir = std::env::temp_dir().join(format!("lr-count-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // Stream 1: 0..1000 with 10 pairs swapped (10 reordered), 7 duplicates,
    // and seqs 500..505 missing (5 lost). Stream 2: 0..300 clean, interleaved.
    let mut s1: Vec<u64> = (0..1000).filter(|s| !(500..505).contains(s)).collect();
    for k in 0..10 {
        let i = 20 + k * 40;
        s1.swap(i, i + 1);
    }
    let mut order: Vec<u64> = Vec::new();
    for (i, s) in s1.iter().enumerate() {
        order.push(*s);
        if i % 100 == 50 && order.len() > 3 {
            order.push(*s); // duplicate right away
        }
    }
    let dups = order.len() - s1.len();
    let mut frames = Vec::new();
    let mut s2 = 0u64;
    for (i, s) in order.iter().enumerate() {
        frames.push(frame(1, *s));
        if i % 3 == 0 && s2 < 300 {
            frames.push(frame(2, s2));
            s2 += 1;
        }
    }
    while s2 < 300 {
        frames.push(frame(2, s2));
        s2 += 1;
    }
    let f = dir.join("injected.pcapng");
    write_pcap(&f, &frames);

    let out = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args([
            "count",
            &format!("pcap:{}", f.display()),
            "--json",
            "--quiet",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let v: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    let st = |id: u64| {
        v["streams"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["stream"] == id)
            .unwrap()
            .clone()
    };
    let a = st(1);
    assert_eq!(a["packets"], order.len() as u64, "{a}");
    assert_eq!(a["lost"], 5, "{a}");
    assert_eq!(a["reordered"], 10, "{a}");
    assert_eq!(a["duplicates"], dups as u64, "{a}");
    assert_eq!(a["expected"], 1000);
    let b = st(2);
    assert_eq!(b["packets"], 300);
    assert_eq!(b["lost"], 0);
    assert_eq!(b["reordered"], 0);
    assert_eq!(b["duplicates"], 0);
    assert_eq!(v["totals"]["malformed"], 0);
    std::fs::remove_dir_all(&dir).unwrap();
}
