//! `linerate count` on a capture with known reordering, duplicates and
//! losses injected: the report gives exactly those numbers; `count --xdp`
//! counts exactly the frames a generator sent through a veth.

use linerate_wire::build::{build_udp, FrameParams, IpPair};
use linerate_wire::signature::{self, Signature, FLAG_TS};
use std::process::Command;

mod support;
use linerate_measure::testbed::{Testbed, TestbedConfig};
use std::time::Duration;
use support::*;

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
    let tmp = TempDir::new("count");
    let dir = tmp.0.clone();
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
}

/// `count --xdp`: the in-kernel counter on d0 counts exactly the 3000
/// frames `linerate gen` sent from g0, and says so in its final JSON.
#[test]
fn xdp_counter_counts_what_was_sent() {
    require_root();
    let bed = Testbed::up(&TestbedConfig::default()).expect("test bed");
    // Not --quiet: the once-a-second lines say when all 3000 are counted.
    let mut c = spawn_in(bed.ns_dut(), &["count", "d0", "--xdp", "--json"]);
    let lines = c.stdout_lines();
    wait_xdp(&mut c, bed.ns_dut(), "d0", "linerate count --xdp");
    let out = Command::new("ip")
        .args(["netns", "exec", bed.ns_gen(), EXE, "gen", "afpacket:g0"])
        .args(["--rate", "20kpps", "--count", "3000", "--size", "100"])
        .output()
        .unwrap();
    assert_ok(&out, "linerate gen");
    wait_line(
        &lines,
        Duration::from_secs(20),
        "a once-a-second line of count --xdp with 3000 packets",
        |l| {
            let v: serde_json::Value = serde_json::from_str(l).ok()?;
            (v["packets"].as_u64()? >= 3000).then_some(())
        },
    );
    c.signal(libc::SIGINT);
    let rest = drain_lines(&lines, Duration::from_secs(10), "count --xdp after SIGINT");
    let out = c.wait_output(Duration::from_secs(10), "count --xdp");
    assert_ok(&out, "linerate count --xdp");
    let v = last_json(&rest.join("\n"));
    assert_eq!(v["mode"], "xdp", "{v}");
    assert_eq!(v["packets"].as_u64().unwrap(), 3000, "{v}");
    assert_eq!(v["bytes"].as_u64().unwrap(), 3000 * 100, "{v}");
    bed.down().unwrap();
}
