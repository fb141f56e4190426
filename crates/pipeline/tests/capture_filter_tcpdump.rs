//! The capture filters keep exactly the packets tcpdump keeps for the same
//! expression on the same pcap (tcpdump -r IN -w OUT 'EXPR').
//!
//! Needs tcpdump in PATH (scripts/setup.sh installs it); without it the
//! test fails, naming it.

use std::path::Path;
use std::process::Command;

use linerate_pipeline::capture::Filter;
use linerate_wire::arp::ArpRepr;
use linerate_wire::build::{build_arp, build_icmp_echo, build_tcp, build_udp, FrameParams, IpPair};
use linerate_wire::tcp::{flags, TcpRepr};

use linerate_testkit::{require_tool, TempDir};

/// Mixed frames, each unique (an index in the payload or IP id).
fn frames() -> Vec<Vec<u8>> {
    let mut out = vec![];
    let mut buf = [0u8; 2048];
    let v4 = [
        ([10, 0, 0, 1], [10, 0, 0, 2]),
        ([10, 0, 0, 2], [10, 0, 0, 1]),
        ([192, 168, 1, 7], [8, 8, 8, 8]),
        ([172, 16, 5, 5], [192, 168, 200, 1]),
    ];
    let mut v6a = [0u8; 16];
    v6a[0] = 0x20;
    v6a[1] = 0x01;
    v6a[15] = 1;
    let mut v6b = v6a;
    v6b[15] = 2;
    let ports = [
        (40000u16, 80u16),
        (53, 5353),
        (1234, 53),
        (80, 40001),
        (443, 50000),
    ];
    let vlan_sets: [&[u16]; 3] = [&[], &[100], &[200, 100]];
    let mut idx = 0u32;
    for (vi, vlans) in vlan_sets.iter().enumerate() {
        for (ai, &(s, d)) in v4.iter().enumerate() {
            for (pi, &(sp, dp)) in ports.iter().enumerate() {
                idx += 1;
                let payload = vec![idx as u8; (idx as usize * 37) % 300];
                let mut p = FrameParams::new(IpPair::V4 { src: s, dst: d });
                p.vlans = vlans;
                p.ip_id = idx as u16;
                p.ttl = [64, 128, 1][(ai + pi) % 3];
                p.payload = &payload;
                let n = if (pi + vi) % 2 == 0 {
                    build_udp(&mut buf, &p, sp, dp).unwrap()
                } else {
                    let fl = [
                        flags::SYN,
                        flags::SYN | flags::ACK,
                        flags::ACK,
                        flags::FIN | flags::ACK,
                        flags::RST,
                        flags::PSH | flags::ACK,
                    ][(idx as usize) % 6];
                    let t = TcpRepr {
                        src_port: sp,
                        dst_port: dp,
                        seq: idx,
                        ack: 0,
                        flags: fl,
                        window: 1000,
                        urgent: 0,
                    };
                    build_tcp(&mut buf, &p, &t).unwrap()
                };
                out.push(buf[..n].to_vec());
            }
            idx += 1;
            let mut p = FrameParams::new(IpPair::V4 { src: s, dst: d });
            p.vlans = vlans;
            p.ip_id = idx as u16;
            let n = build_icmp_echo(&mut buf, &p, true, 7, idx as u16).unwrap();
            out.push(buf[..n].to_vec());
        }
        for (sp, dp) in ports {
            idx += 1;
            let payload = idx.to_be_bytes();
            let mut p = FrameParams::new(IpPair::V6 { src: v6a, dst: v6b });
            p.vlans = vlans;
            p.payload = &payload;
            let t = TcpRepr {
                src_port: sp,
                dst_port: dp,
                seq: idx,
                ack: 0,
                flags: if sp == 53 { flags::SYN } else { flags::ACK },
                window: 1,
                urgent: 0,
            };
            let n = build_tcp(&mut buf, &p, &t).unwrap();
            out.push(buf[..n].to_vec());
            idx += 1;
            let payload = idx.to_be_bytes();
            p.payload = &payload;
            let n = build_udp(&mut buf, &p, sp, dp).unwrap();
            out.push(buf[..n].to_vec());
        }
        let arp = ArpRepr {
            operation: 1,
            sender_mac: [2, 0, 0, 0, 0, vi as u8],
            sender_ip: [10, 0, 0, 1],
            target_mac: [0; 6],
            target_ip: [10, 0, 0, 2],
        };
        let n = build_arp(&mut buf, [0xff; 6], [2, 0, 0, 0, 0, 1], vlans, &arp).unwrap();
        out.push(buf[..n].to_vec());
    }
    // A truncated frame (malformed for linerate's parser; BPF still runs).
    let mut t = out[1].clone();
    t.truncate(30);
    out.push(t);
    out
}

fn write_pcap(path: &Path, frames: &[Vec<u8>]) {
    let mut f = Vec::new();
    f.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    f.extend_from_slice(&2u16.to_le_bytes());
    f.extend_from_slice(&4u16.to_le_bytes());
    f.extend_from_slice(&[0u8; 8]);
    f.extend_from_slice(&65535u32.to_le_bytes());
    f.extend_from_slice(&1u32.to_le_bytes());
    for (i, fr) in frames.iter().enumerate() {
        f.extend_from_slice(&(i as u32).to_le_bytes());
        f.extend_from_slice(&0u32.to_le_bytes());
        f.extend_from_slice(&(fr.len() as u32).to_le_bytes());
        f.extend_from_slice(&(fr.len() as u32).to_le_bytes());
        f.extend_from_slice(fr);
    }
    std::fs::write(path, f).unwrap();
}

/// Records of a classic pcap as written by tcpdump (either byte order).
fn read_pcap(path: &Path) -> Vec<Vec<u8>> {
    let b = std::fs::read(path).unwrap();
    assert!(b.len() >= 24, "{}: short file", path.display());
    let magic = u32::from_le_bytes(b[0..4].try_into().unwrap());
    let le = match magic {
        0xa1b2_c3d4 | 0xa1b2_3c4d => true,
        0xd4c3_b2a1 | 0x4d3c_b2a1 => false,
        m => panic!("{}: not a pcap (magic {m:#x})", path.display()),
    };
    let u32_at = |o: usize| {
        let a: [u8; 4] = b[o..o + 4].try_into().unwrap();
        if le {
            u32::from_le_bytes(a)
        } else {
            u32::from_be_bytes(a)
        }
    };
    let mut out = vec![];
    let mut off = 24;
    while off + 16 <= b.len() {
        let cap = u32_at(off + 8) as usize;
        off += 16;
        out.push(b[off..off + cap].to_vec());
        off += cap;
    }
    out
}

#[test]
fn filters_agree_with_tcpdump() {
    // The reference: scripts/setup.sh installs tcpdump; without it the test fails.
    let tcpdump = require_tool("tcpdump");
    let tmp = TempDir::new("filt");
    let dir = tmp.0.clone();
    let frames = frames();
    assert!(frames.len() > 100);
    let input = dir.join("in.pcap");
    write_pcap(&input, &frames);
    let exprs = [
        "tcp",
        "udp port 53",
        "host 10.0.0.1",
        "src net 192.168.0.0/16",
        "tcp[tcpflags] & (tcp-syn|tcp-fin|tcp-rst) != 0",
        "ip6 and tcp",
        "vlan 100",
        "vlan and udp",
        "icmp or arp",
        "greater 200",
        "ip[8] = 128 and not port 80",
        "ether src 02:00:00:00:00:01 and (port 443 or portrange 5000-5400)",
    ];
    for (i, expr) in exprs.iter().enumerate() {
        let out = dir.join(format!("out{i}.pcap"));
        // -Z root: when run as root, keep root so the output file can be
        // created in our private directory (ignored when not root).
        let r = Command::new(&tcpdump)
            .args(["-Z", "root", "-r"])
            .arg(&input)
            .arg("-w")
            .arg(&out)
            .arg(expr)
            .output()
            .unwrap();
        assert!(
            r.status.success(),
            "tcpdump '{expr}': {}",
            String::from_utf8_lossy(&r.stderr)
        );
        let theirs = read_pcap(&out);
        let f = Filter::compile(expr).unwrap();
        let ours: Vec<Vec<u8>> = frames.iter().filter(|fr| f.matches(fr)).cloned().collect();
        assert!(
            !theirs.is_empty() && theirs.len() < frames.len(),
            "'{expr}' should split the set: {}",
            theirs.len()
        );
        assert_eq!(ours.len(), theirs.len(), "'{expr}': count");
        assert!(ours == theirs, "'{expr}': different packets kept");
        eprintln!("'{expr}': {} of {} kept by both", ours.len(), frames.len());
    }
}
