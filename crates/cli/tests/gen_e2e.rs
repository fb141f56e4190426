//! End to end tests of `linerate gen` (with `linerate count` as the receiver):
//!
//! - every template kind (UDP/TCP/ICMP x IPv4/IPv6 x no VLAN/802.1Q/QinQ,
//!   with and without the signature, with varying fields and size mixes)
//!   written to a pcapng decodes in tshark with every checksum Good and no
//!   malformed or warning-level expert info; a self-check proves the tshark
//!   check does catch corrupted frames;
//! - exact loss through a Linux router with an nftables drop rule;
//! - latency through `linerate fwd`, with the report naming its clock;
//! - replay of a capture three times (duplicates, no loss);
//! - one-line errors for a bad rate and a bad profile field.
//!
//! Namespace tests use a [`Testbed`] (unique names, removed on drop, also
//! when a test fails); child processes are killed on drop.

use linerate_io::Pkt;
use linerate_measure::testbed::{Testbed, TestbedConfig};
use linerate_wire::build::{build_icmp_echo, build_tcp, build_udp, FrameParams, IpPair};
use linerate_wire::tcp::TcpRepr;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use std::time::Duration;

mod support;
use support::*;

const N: usize = 200;

// ------------------------------------------------------------ helpers

/// The report of stream `id` in a `linerate count` JSON report.
fn stream(report: &Value, id: u64) -> Value {
    report["streams"]
        .as_array()
        .unwrap_or_else(|| panic!("no streams in {report}"))
        .iter()
        .find(|s| s["stream"] == id)
        .unwrap_or_else(|| panic!("no stream {id} in {report}"))
        .clone()
}

// ------------------------------------------------------------- tshark

/// Checksums verified; TCP sequence analysis off (the generator's segments
/// are stateless: every one has the same sequence number, which tshark
/// would flag as retransmissions / out of order; not a framing problem).
/// The payload is linerate's signature (binary: sequence number and
/// timestamp), not an application protocol. tshark decodes TCP port 80 as
/// HTTP, and a timestamp with a 0x0d byte in it reads as a malformed header
/// line (seen once in CI: frame 59 of the tcp6 profile). So HTTP is off.
const TSHARK_PREFS: [&str; 10] = [
    "--disable-protocol",
    "http",
    "-o",
    "ip.check_checksum:TRUE",
    "-o",
    "udp.check_checksum:TRUE",
    "-o",
    "tcp.check_checksum:TRUE",
    "-o",
    "tcp.analyze_sequence_numbers:FALSE",
];

/// Frames with a decoding problem. The *.checksum.status fields are
/// 0 = Bad, 1 = Good, 2 = Unverified, 3 = Not present, 4 = Illegal (tshark
/// 4.0 `-G values`); expert severity 0x600000 = warning, 0x800000 = error.
/// Warnings of the expert group Sequence (0x02000000) are left out: tshark
/// flags every RST ("Connection reset") and a stateless generator's TCP
/// segments are not a connection; that is no framing problem.
const BAD_FILTER: &str = "_ws.malformed or ip.checksum.status == 0 or udp.checksum.status == 0 \
     or tcp.checksum.status == 0 or icmp.checksum.status == 0 or icmpv6.checksum.status == 0 \
     or udp.checksum.status == 4 \
     or (_ws.expert.severity >= 0x600000 and not _ws.expert.group == 0x02000000)";

fn tshark(file: &Path, extra: &[&str]) -> String {
    let out = Command::new(require_tool("tshark"))
        .arg("-r")
        .arg(file)
        .args(TSHARK_PREFS)
        .args(extra)
        .output()
        .expect("run tshark");
    assert!(
        out.status.success(),
        "tshark -r {}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Frame numbers matching `filter`.
fn tshark_matching(file: &Path, filter: &str) -> Vec<String> {
    tshark(file, &["-Y", filter, "-T", "fields", "-e", "frame.number"])
        .lines()
        .map(str::to_string)
        .collect()
}

/// Fields extracted per frame (all occurrences, comma-separated).
const FIELDS: [&str; 19] = [
    "frame.protocols",
    "frame.len",
    "ieee8021ad.id",
    "vlan.id",
    "ip.checksum.status",
    "udp.checksum.status",
    "tcp.checksum.status",
    "icmp.checksum.status",
    "icmpv6.checksum.status",
    "udp.srcport",
    "udp.dstport",
    "tcp.srcport",
    "ip.src",
    "ipv6.src",
    "ip.ttl",
    "ipv6.hlim",
    "ip.dsfield.dscp",
    "ipv6.tclass.dscp",
    "tcp.flags",
];

type Row = std::collections::HashMap<&'static str, String>;

fn tshark_rows(file: &Path) -> Vec<Row> {
    let mut a: Vec<&str> = vec!["-T", "fields", "-E", "separator=|", "-E", "occurrence=a"];
    for f in FIELDS {
        a.push("-e");
        a.push(f);
    }
    tshark(file, &a)
        .lines()
        .map(|l| {
            let v: Vec<&str> = l.split('|').collect();
            assert_eq!(v.len(), FIELDS.len(), "tshark line: {l}");
            FIELDS
                .iter()
                .zip(v)
                .map(|(k, x)| (*k, x.to_string()))
                .collect()
        })
        .collect()
}

fn distinct(rows: &[Row], field: &str) -> BTreeSet<String> {
    rows.iter()
        .map(|r| match field {
            "vlan.id" => vlan_ids(r),
            f => r[f].clone(),
        })
        .collect()
}

/// VLAN ids outermost first: the 802.1ad S-tag (QinQ), then 802.1Q tags.
fn vlan_ids(r: &Row) -> String {
    [r["ieee8021ad.id"].as_str(), r["vlan.id"].as_str()]
        .iter()
        .filter(|s| !s.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join(",")
}

/// What a file must decode as.
#[derive(Clone, Copy, Debug, PartialEq)]
enum L4 {
    Udp,
    Tcp,
    Icmp,
}

struct Expect {
    l4: L4,
    v6: bool,
    vlans: usize,
    signed: bool,
}

/// The checks common to every generated file: `N` frames, the expected
/// protocol stack, every checksum present and Good, nothing malformed, no
/// warning; with signatures, `linerate count` reads all `N` of them.
fn check_decodes(file: &Path, e: &Expect, what: &str) -> Vec<Row> {
    let bad = tshark_matching(file, BAD_FILTER);
    // On failure, the first bad frame in full (its expert info and bytes):
    // the temporary file is gone by the time anyone reads the message.
    let detail = bad.first().map_or(String::new(), |n| {
        tshark(file, &["-Y", &format!("frame.number == {n}"), "-V", "-x"])
    });
    assert!(
        bad.is_empty(),
        "{what}: {} bad frames in tshark (first: {:?}); {}\n{detail}",
        bad.len(),
        bad.first(),
        file.display()
    );
    let rows = tshark_rows(file);
    assert_eq!(rows.len(), N, "{what}: frames in tshark");
    let l3 = if e.v6 { "ipv6" } else { "ip" };
    let l4 = match (e.l4, e.v6) {
        (L4::Udp, _) => "udp",
        (L4::Tcp, _) => "tcp",
        (L4::Icmp, false) => "icmp",
        (L4::Icmp, true) => "icmpv6",
    };
    // QinQ: the outer tag is an 802.1ad S-tag (TPID 0x88a8).
    let mut stack = String::from("eth:ethertype");
    if e.vlans == 2 {
        stack.push_str(":ieee8021ad:ethertype");
    }
    if e.vlans >= 1 {
        stack.push_str(":vlan:ethertype");
    }
    stack.push_str(&format!(":{l3}:{l4}"));
    for (i, r) in rows.iter().enumerate() {
        let p = &r["frame.protocols"];
        assert!(
            p == &stack || p.starts_with(&format!("{stack}:")),
            "{what}: frame {}: protocols {p}, want {stack}",
            i + 1
        );
        assert_eq!(
            vlan_ids(r).split(',').filter(|s| !s.is_empty()).count(),
            e.vlans,
            "{what}: frame {}: VLAN ids {:?}",
            i + 1,
            vlan_ids(r)
        );
        // Good (1), not just "not Bad": an unverified checksum proves nothing.
        let mut want = vec![format!("{l4}.checksum.status")];
        if !e.v6 {
            want.push("ip.checksum.status".into());
        }
        for f in &want {
            assert_eq!(
                r[f.as_str()],
                "1",
                "{what}: frame {}: {f} = {:?} (1 = Good)",
                i + 1,
                r[f.as_str()]
            );
        }
    }
    if e.signed {
        let out = linerate_ok(&[
            "count",
            &format!("pcap:{}", file.display()),
            "--json",
            "--quiet",
        ]);
        let v = last_json(&out);
        let t = &v["totals"];
        assert_eq!(t["signed"], N as u64, "{what}: count totals {t}");
        assert_eq!(t["unsigned"], 0, "{what}: count totals {t}");
        assert_eq!(t["malformed"], 0, "{what}: count totals {t}");
        let s = &v["streams"][0];
        assert_eq!(s["packets"], N as u64, "{what}: {s}");
        assert_eq!(s["lost"], 0, "{what}: {s}");
        assert_eq!(s["duplicates"], 0, "{what}: {s}");
        assert_eq!(s["reordered"], 0, "{what}: {s}");
        // Record times are CLOCK_REALTIME at the write, after the TX stamp:
        // latencies from the file are small and never negative.
        let lat = &s["latency"];
        assert_eq!(lat["samples"], N as u64, "{what}: {lat}");
        assert_eq!(lat["negative"], 0, "{what}: {lat}");
        assert_eq!(lat["over_range"], 0, "{what}: {lat}");
        assert!(
            lat["max_ns"].as_u64().unwrap() < 1_000_000_000,
            "{what}: {lat}"
        );
    }
    rows
}

fn gen_to_file(dir: &TempDir, name: &str, args: &[&str]) -> PathBuf {
    let f = dir.join(&format!("{name}.pcapng"));
    let uri = format!("pcap:{}?mode=write", f.display());
    let mut a = vec!["gen", uri.as_str(), "--count", "200", "--json", "--quiet"];
    a.extend_from_slice(args);
    let v = last_json(&linerate_ok(&a));
    assert_eq!(v["streams"][0]["sent"], N as u64, "{name}: {v}");
    f
}

/// The shortcut matrix for one L4 protocol: IPv4/IPv6 x 0/1/2 VLAN tags x
/// signature off/on, with 16 flows (UDP/TCP).
fn shortcut_matrix(l4: L4) {
    let dir = TempDir::new("mx");
    let proto = match l4 {
        L4::Udp => "udp",
        L4::Tcp => "tcp",
        L4::Icmp => "icmp",
    };
    for v6 in [false, true] {
        for vlans in 0..=2usize {
            for signed in [false, true] {
                let name = format!(
                    "{proto}-v{}-vl{vlans}-sig{}",
                    if v6 { 6 } else { 4 },
                    signed
                );
                let mut a: Vec<&str> = vec!["--proto", proto];
                if v6 {
                    a.extend(["--src-ip", "fd00::1", "--dst-ip", "fd00:1::2"]);
                }
                a.extend(["--vlan", "100", "--vlan", "200"].iter().take(2 * vlans));
                if signed {
                    a.push("--signature");
                }
                if l4 != L4::Icmp {
                    a.extend(["--flows", "16"]);
                }
                let f = gen_to_file(&dir, &name, &a);
                let rows = check_decodes(
                    &f,
                    &Expect {
                        l4,
                        v6,
                        vlans,
                        signed,
                    },
                    &name,
                );
                // The default size is the smallest frame that holds it all.
                let hdr = 14
                    + 4 * vlans
                    + if v6 { 40 } else { 20 }
                    + if l4 == L4::Tcp { 20 } else { 8 }
                    + if signed { 24 } else { 0 };
                assert_eq!(
                    distinct(&rows, "frame.len"),
                    BTreeSet::from([hdr.max(60).to_string()]),
                    "{name}"
                );
                let vid = ["", "100", "100,200"][vlans];
                assert_eq!(
                    distinct(&rows, "vlan.id"),
                    BTreeSet::from([vid.to_string()]),
                    "{name}"
                );
                if l4 != L4::Icmp {
                    let sport = if l4 == L4::Udp {
                        "udp.srcport"
                    } else {
                        "tcp.srcport"
                    };
                    let want: BTreeSet<String> = (1024..1040).map(|p| p.to_string()).collect();
                    assert_eq!(distinct(&rows, sport), want, "{name}: 16 flows");
                }
            }
        }
    }
}

// ------------------------------------------------ 1. tshark decoding

#[test]
fn tshark_check_catches_corrupted_frames() {
    // Proves the checks above can fail: one good frame of each kind, then
    // the same frames with one checksum byte flipped, and a frame whose
    // IPv4 total length claims more bytes than there are.
    let dir = TempDir::new("bad");
    let v4 = IpPair::V4 {
        src: [10, 0, 0, 1],
        dst: [10, 0, 0, 2],
    };
    let mut s6 = [0u8; 16];
    s6[0] = 0xfd;
    s6[15] = 1;
    let mut d6 = s6;
    d6[15] = 2;
    let v6 = IpPair::V6 { src: s6, dst: d6 };
    let payload = [0x5au8; 32];
    let mk = |ip: IpPair, kind: u8| -> Vec<u8> {
        let mut p = FrameParams::new(ip);
        p.payload = &payload;
        let mut b = vec![0u8; 256];
        let n = match kind {
            0 => build_udp(&mut b, &p, 1000, 9).unwrap(),
            1 => build_tcp(
                &mut b,
                &p,
                &TcpRepr {
                    src_port: 1000,
                    dst_port: 9,
                    seq: 1,
                    ack: 0,
                    flags: 0x002,
                    window: 1024,
                    urgent: 0,
                },
            )
            .unwrap(),
            _ => build_icmp_echo(&mut b, &p, true, 1, 1).unwrap(),
        };
        b.truncate(n);
        b
    };
    let good = [mk(v4, 0), mk(v4, 1), mk(v4, 2), mk(v6, 0), mk(v6, 2)];
    let mut bad = Vec::new();
    let mut f = mk(v4, 0);
    f[14 + 10] ^= 0xff; // IPv4 header checksum
    bad.push(f);
    let mut f = mk(v4, 0);
    f[14 + 20 + 6] ^= 0x01; // UDP checksum
    bad.push(f);
    let mut f = mk(v4, 1);
    f[14 + 20 + 16] ^= 0x01; // TCP checksum
    bad.push(f);
    let mut f = mk(v4, 2);
    f[14 + 20 + 2] ^= 0x01; // ICMP checksum
    bad.push(f);
    let mut f = mk(v6, 0);
    f[14 + 40 + 6] ^= 0x01; // UDP over IPv6 checksum
    bad.push(f);
    let mut f = mk(v6, 2);
    f[14 + 40 + 2] ^= 0x01; // ICMPv6 checksum
    bad.push(f);
    let mut f = mk(v4, 0);
    f[14 + 3] = f[14 + 3].wrapping_add(40); // IPv4 total length beyond the frame
    bad.push(f);
    let mut frames: Vec<Vec<u8>> = good.iter().chain(&bad).cloned().collect();
    let file = dir.join("mixed.pcapng");
    let mut port = linerate_io::open(
        &format!("pcap:{}?mode=write", file.display()),
        &Default::default(),
    )
    .unwrap();
    let pkts: Vec<Pkt> = frames
        .iter_mut()
        // SAFETY: one test buffer per descriptor; it outlives the descriptor and nothing else touches it meanwhile.
        .map(|f| unsafe { Pkt::from_raw(f.as_mut_ptr(), f.len() as u32, 0, 0) })
        .collect();
    assert_eq!(port.tx.send(&pkts).unwrap(), pkts.len());
    port.tx.flush().unwrap();
    drop(port);
    let matched = tshark_matching(&file, BAD_FILTER);
    let want: Vec<String> = (good.len() + 1..=good.len() + bad.len())
        .map(|i| i.to_string())
        .collect();
    assert_eq!(matched, want, "exactly the corrupted frames are bad");
    // And the per-frame status check sees Good on the good ones only.
    let rows = tshark_rows(&file);
    for (i, r) in rows.iter().enumerate().take(good.len()) {
        let l4 = ["udp", "tcp", "icmp", "udp", "icmpv6"][i];
        assert_eq!(r[format!("{l4}.checksum.status").as_str()], "1", "{i}");
    }
    assert_eq!(rows[good.len()]["ip.checksum.status"], "0");
    assert_eq!(rows[good.len() + 1]["udp.checksum.status"], "0");
}

#[test]
fn udp_templates_decode_cleanly() {
    shortcut_matrix(L4::Udp);
}

#[test]
fn tcp_templates_decode_cleanly() {
    shortcut_matrix(L4::Tcp);
}

#[test]
fn icmp_templates_decode_cleanly() {
    shortcut_matrix(L4::Icmp);
}

#[test]
fn imix_size_mixes_decode_cleanly() {
    let dir = TempDir::new("imix");
    for (name, args, e) in [
        (
            "imix-udp4",
            vec!["--size", "imix", "--flows", "16"],
            Expect {
                l4: L4::Udp,
                v6: false,
                vlans: 0,
                signed: false,
            },
        ),
        (
            "imix-tcp4",
            vec!["--size", "imix", "--proto", "tcp"],
            Expect {
                l4: L4::Tcp,
                v6: false,
                vlans: 0,
                signed: false,
            },
        ),
        (
            "imix6-tcp6",
            vec![
                "--size",
                "ipv6-imix",
                "--proto",
                "tcp",
                "--src-ip",
                "fd00::1",
                "--dst-ip",
                "fd00::2",
            ],
            Expect {
                l4: L4::Tcp,
                v6: true,
                vlans: 0,
                signed: false,
            },
        ),
        (
            "imix6-icmp6-vlan",
            vec![
                "--size",
                "ipv6-imix",
                "--proto",
                "icmp",
                "--src-ip",
                "fd00::1",
                "--dst-ip",
                "fd00::2",
                "--vlan",
                "7",
            ],
            Expect {
                l4: L4::Icmp,
                v6: true,
                vlans: 1,
                signed: false,
            },
        ),
    ] {
        let f = gen_to_file(&dir, name, &args);
        let rows = check_decodes(&f, &e, name);
        let small = if e.v6 { "78" } else { "60" };
        let want: BTreeSet<String> = [small, "590", "1514"].map(String::from).into();
        assert_eq!(distinct(&rows, "frame.len"), want, "{name}");
        // 7:4:1 over 200 frames (a smooth interleaved cycle of 12).
        let n = |len: &str| rows.iter().filter(|r| r["frame.len"] == len).count();
        let (a, b, c) = (n(small), n("590"), n("1514"));
        assert!(
            a.abs_diff(200 * 7 / 12) <= 7
                && b.abs_diff(200 * 4 / 12) <= 4
                && c.abs_diff(200 / 12) <= 1,
            "{name}: sizes {a}/{b}/{c}"
        );
    }
}

/// Profiles with varying fields (ip_src inc, ttl list, dscp random,
/// tcp_flags list, sport range, vlan inc) and size mixes.
#[test]
fn profiles_with_varying_fields_decode_cleanly() {
    let dir = TempDir::new("prof");
    let write = |name: &str, body: &str| -> PathBuf {
        let p = dir.join(&format!("{name}.toml"));
        std::fs::write(&p, body).unwrap();
        p
    };
    let fields = r#"
[[streams.fields]]
field = "ip_src"
op = "inc"
step = 1
count = 50

[[streams.fields]]
field = "ttl"
op = "list"
values = [1, 64, 255]

[[streams.fields]]
field = "dscp"
op = "random"
min = 0
max = 63
seed = 5
"#;
    // IPv4 UDP, one VLAN whose id varies, sizes uniform 70..=1514, signed.
    let p1 = write(
        "udp4",
        &format!(
            r#"
[[streams]]
name = "udp4"
id = 4
size = {{ min = 70, max = 1514, seed = 9 }}
signature = {{ enabled = true }}
[streams.template]
vlans = [10]
l3 = {{ ipv4 = {{ src = "10.1.0.1", dst = "10.2.0.1" }} }}
l4 = {{ udp = {{ sport = 2000, dport = 3000 }} }}
payload = "c0ffee"
{fields}
[[streams.fields]]
field = "vlan"
op = "inc"
start = 10
count = 4

[[streams.fields]]
field = "sport"
op = "range"
min = 2000
max = 2009
"#
        ),
    );
    // IPv6 TCP in QinQ, flags from a list, weighted size list, signed.
    let p2 = write(
        "tcp6",
        &format!(
            r#"
[[streams]]
name = "tcp6"
id = 6
size = {{ list = [{{ size = 106, weight = 3 }}, {{ size = 1280, weight = 1 }}] }}
signature = {{ enabled = true }}
[streams.template]
vlans = [100, 200]
l3 = {{ ipv6 = {{ src = "fd00::1", dst = "fd00:1::1", dscp = 10 }} }}
l4 = {{ tcp = {{ sport = 40000, dport = 80 }} }}
{fields}
[[streams.fields]]
field = "tcp_flags"
op = "list"
values = [0x002, 0x010, 0x018, 0x011, 0x004]
"#
        ),
    );
    // IPv4 TCP, unsigned, random destination, varying flags.
    let p3 = write(
        "tcp4",
        &format!(
            r#"
[[streams]]
name = "tcp4"
size = 60
[streams.template]
l3 = {{ ipv4 = {{ src = "10.1.0.1", dst = "10.2.0.1" }} }}
l4 = {{ tcp = {{ sport = 1, dport = 2, flags = 0x012 }} }}
{fields}
[[streams.fields]]
field = "tcp_flags"
op = "list"
values = [0x002, 0x012]
"#
        ),
    );
    // ICMPv6 and ICMPv4, signed, with varying addresses / hop limits.
    let p4 = write(
        "icmp6",
        &format!(
            r#"
[[streams]]
name = "icmp6"
id = 9
size = 200
signature = {{ enabled = true }}
[streams.template]
vlans = [5]
l3 = {{ ipv6 = {{ src = "fd00::1", dst = "fd00:1::1" }} }}
l4 = {{ icmp = {{ id = 77 }} }}
{fields}
"#
        ),
    );
    let p5 = write(
        "icmp4",
        &format!(
            r#"
[[streams]]
name = "icmp4"
id = 10
size = 90
signature = {{ enabled = true }}
[streams.template]
l3 = {{ ipv4 = {{ src = "10.1.0.1", dst = "10.2.0.1" }} }}
l4 = {{ icmp = {{ id = 77 }} }}
{fields}
"#
        ),
    );
    let cases = [
        (p1, L4::Udp, false, 1, true),
        (p2, L4::Tcp, true, 2, true),
        (p3, L4::Tcp, false, 0, false),
        (p4, L4::Icmp, true, 1, true),
        (p5, L4::Icmp, false, 0, true),
    ];
    for (p, l4, v6, vlans, signed) in cases {
        let name = p.file_stem().unwrap().to_string_lossy().to_string();
        let f = gen_to_file(&dir, &name, &["--profile", p.to_str().unwrap()]);
        let rows = check_decodes(
            &f,
            &Expect {
                l4,
                v6,
                vlans,
                signed,
            },
            &name,
        );
        let (src, ttl, dscp) = if v6 {
            ("ipv6.src", "ipv6.hlim", "ipv6.tclass.dscp")
        } else {
            ("ip.src", "ip.ttl", "ip.dsfield.dscp")
        };
        assert_eq!(
            distinct(&rows, src).len(),
            50,
            "{name}: ip_src inc count 50"
        );
        assert_eq!(
            distinct(&rows, ttl),
            ["1", "255", "64"].map(String::from).into(),
            "{name}: ttl list"
        );
        let d = distinct(&rows, dscp);
        assert!(d.len() > 20, "{name}: dscp random: {d:?}");
        assert!(
            d.iter().all(|x| x.parse::<u8>().unwrap() < 64),
            "{name}: {d:?}"
        );
        match name.as_str() {
            "udp4" => {
                assert_eq!(
                    distinct(&rows, "vlan.id"),
                    ["10", "11", "12", "13"].map(String::from).into(),
                    "udp4: vlan inc"
                );
                let sp: BTreeSet<String> = (2000..=2009).map(|p| p.to_string()).collect();
                assert_eq!(distinct(&rows, "udp.srcport"), sp, "udp4: sport range");
                assert!(
                    distinct(&rows, "frame.len").len() > 50,
                    "udp4: uniform sizes"
                );
            }
            "tcp6" => {
                assert_eq!(
                    distinct(&rows, "tcp.flags"),
                    ["0x0002", "0x0004", "0x0010", "0x0011", "0x0018"]
                        .map(String::from)
                        .into(),
                    "tcp6: flags list"
                );
                assert_eq!(
                    distinct(&rows, "frame.len"),
                    ["106", "1280"].map(String::from).into()
                );
            }
            "tcp4" => assert_eq!(
                distinct(&rows, "tcp.flags"),
                ["0x0002", "0x0012"].map(String::from).into()
            ),
            _ => {}
        }
    }
}

// ------------------------------------- 2. exact loss through a router

#[test]
fn exact_loss_through_a_router_with_an_nft_drop_rule() {
    require_root();
    require_tool("nft");
    let mut bed = Testbed::up(&TestbedConfig::default()).expect("test bed");
    bed.enable_ip_forwarding().unwrap();
    let dut = bed.ns_dut().to_string();
    let (g, d0, s) = (bed.gen().clone(), bed.dut_in().clone(), bed.sink().clone());
    let sh = |cmd: &[&str]| {
        let out = bed.exec_in(&dut, cmd).unwrap();
        assert!(
            out.status.success(),
            "{cmd:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    sh(&["nft", "add table inet lrtest"]);
    sh(&[
        "nft",
        "add chain inet lrtest lrfwd { type filter hook forward priority 0 ; }",
    ]);
    sh(&[
        "nft",
        "add rule inet lrtest lrfwd udp dport 10 counter drop",
    ]);
    // A permanent neighbour: no packet waits for ARP on the way out of d1.
    let (sip, smac) = (s.ipv4.to_string(), s.mac.to_string());
    sh(&[
        "ip",
        "neigh",
        "replace",
        &sip,
        "lladdr",
        &smac,
        "dev",
        &bed.dut_out().name,
        "nud",
        "permanent",
    ]);

    // dport alternates 10, 9, 10, ...: sequence numbers 0, 2, ..., 9998 are
    // dropped, 1, 3, ..., 9999 arrive. (Starting with 9 would drop the last
    // packet, which no receiver can tell from "never sent".)
    let dir = TempDir::new("loss");
    let prof = dir.join("alt.toml");
    std::fs::write(
        &prof,
        format!(
            r#"
[[streams]]
name = "alt"
id = 3
size = 128
rate = {{ pps = 20000, count = 10000 }}
signature = {{ enabled = true }}
[streams.template]
eth_src = "{}"
eth_dst = "{}"
l3 = {{ ipv4 = {{ src = "{}", dst = "{}" }} }}
l4 = {{ udp = {{ sport = 4000, dport = 9 }} }}
[[streams.fields]]
field = "dport"
op = "list"
values = [10, 9]
"#,
            g.mac, d0.mac, g.ipv4, s.ipv4
        ),
    )
    .unwrap();

    let mut count = spawn_in(
        bed.ns_sink(),
        &["count", "afpacket:s0", "--idle", "2", "--json", "--quiet"],
    );
    wait_packet_sockets(&mut count, 1, "linerate count");
    let out = Command::new("ip")
        .args(["netns", "exec", bed.ns_gen(), EXE, "gen", "afpacket:g0"])
        .arg("--profile")
        .arg(&prof)
        .args(["--json", "--quiet"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "gen: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let gv = last_json(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(gv["streams"][0]["sent"], 10_000, "gen: {gv}");

    let out = count.wait_output(Duration::from_secs(30), "linerate count");
    assert!(
        out.status.success(),
        "count: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = last_json(&String::from_utf8_lossy(&out.stdout));
    let st = stream(&v, 3);
    assert_eq!(st["packets"], 5000, "{st}");
    assert_eq!(st["expected"], 10_000, "{st}");
    assert_eq!(st["lost"], 5000, "{st}");
    assert_eq!(st["reordered"], 0, "{st}");
    assert_eq!(st["duplicates"], 0, "{st}");
    assert_eq!(v["totals"]["malformed"], 0, "{v}");

    let rules = sh(&["nft", "list chain inet lrtest lrfwd"]);
    let dropped: u64 = rules
        .split("counter packets ")
        .nth(1)
        .and_then(|t| t.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no counter in: {rules}"));
    assert_eq!(dropped, 5000, "{rules}");
    bed.down().unwrap();
}

// ------------------------------------ 3. latency through linerate fwd

#[test]
fn latency_through_linerate_fwd_names_the_clock() {
    require_root();
    let bed = Testbed::up(&TestbedConfig::default()).expect("test bed");
    let (g, d0, s) = (bed.gen().clone(), bed.dut_in().clone(), bed.sink().clone());
    // The forwarder receives with recvmmsg: a TPACKET_V3 block ring hands
    // packets over only when a block retires (tov_ms, 2 ms rounded up to
    // a jiffy), which at 10 kpps would dominate the path (p50 2-12 ms seen
    // under load). It sleeps in poll() (woken per packet) rather than spin:
    // when tests in parallel oversubscribe the 2 CPUs, a spinning forwarder
    // waits for its time slice (p50 > 10 ms seen). One thread per
    // direction: with one thread, `--poll wait` blocks up to 500 ms in
    // each direction's poll() in turn. The receiver keeps TPACKET_V3 for
    // its kernel timestamps.
    let mut fwd = spawn_in(
        bed.ns_dut(),
        &[
            "fwd",
            "afpacket:d0?ring=mmsg",
            "afpacket:d1",
            "--poll",
            "wait",
            "--cores",
            "per-direction",
            "--json",
            "--quiet",
        ],
    );
    wait_packet_sockets(&mut fwd, 2, "linerate fwd");
    // Not --quiet: the once-a-second lines are skipped below.
    let mut count = spawn_in(
        bed.ns_sink(),
        &["count", "afpacket:s0", "--idle", "2", "--json"],
    );
    wait_packet_sockets(&mut count, 1, "linerate count");
    let (gm, dm, gi, si) = (
        g.mac.to_string(),
        d0.mac.to_string(),
        g.ipv4.to_string(),
        s.ipv4.to_string(),
    );
    let out = Command::new("ip")
        .args(["netns", "exec", bed.ns_gen(), EXE, "gen", "afpacket:g0"])
        .args([
            "--signature",
            "--rate",
            "10kpps",
            "--count",
            "5000",
            "--json",
        ])
        .args([
            "--src-mac",
            &gm,
            "--dst-mac",
            &dm,
            "--src-ip",
            &gi,
            "--dst-ip",
            &si,
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "gen: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let gv = last_json(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(gv["streams"][0]["sent"], 5000, "gen: {gv}");
    let achieved = gv["streams"][0]["achieved_pps"].as_f64().unwrap();
    assert!(
        (achieved - 10_000.0).abs() < 500.0,
        "gen: achieved {achieved} pps"
    );

    let out = count.wait_output(Duration::from_secs(30), "linerate count");
    assert!(
        out.status.success(),
        "count: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let v = last_json(&stdout);
    assert_eq!(v["clock"], "kernel-realtime", "{v}");
    assert!(
        v["clock_detail"]
            .as_str()
            .is_some_and(|d| d.contains("CLOCK_REALTIME")),
        "{v}"
    );
    let st = stream(&v, 0);
    assert_eq!(st["packets"], 5000, "{st}");
    assert_eq!(st["lost"], 0, "{st}");
    assert_eq!(st["duplicates"], 0, "{st}");
    let lat = &st["latency"];
    assert_eq!(lat["samples"], 5000, "{lat}");
    assert_eq!(lat["negative"], 0, "{lat}");
    let p50 = lat["p50_ns"].as_u64().unwrap();
    eprintln!("latency through linerate fwd: {lat}");
    assert!(p50 > 0 && p50 < 10_000_000, "p50 {p50} ns");
    let (min, max) = (
        lat["min_ns"].as_u64().unwrap(),
        lat["max_ns"].as_u64().unwrap(),
    );
    assert!(min > 0 && min <= p50 && p50 <= max, "{lat}");

    fwd.interrupt();
    let out = fwd.wait_output(Duration::from_secs(10), "linerate fwd");
    assert!(
        out.status.success(),
        "fwd: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let fv = last_json(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(fv["directions"][0]["forwarded"], 5000, "fwd: {fv}");
    bed.down().unwrap();
}

// ------------------------------------------------------- 4. replay

#[test]
fn replay_three_times_gives_duplicates_not_loss() {
    let dir = TempDir::new("replay");
    let inp = dir.join("in.pcapng");
    let out = dir.join("out.pcapng");
    let gv = last_json(&linerate_ok(&[
        "gen",
        &format!("pcap:{}?mode=write", inp.display()),
        "--signature",
        "--count",
        "1000",
        "--flows",
        "4",
        "--json",
        "--quiet",
    ]));
    assert_eq!(gv["streams"][0]["sent"], 1000, "{gv}");
    let rv = last_json(&linerate_ok(&[
        "gen",
        &format!("pcap:{}?mode=write", out.display()),
        "--replay",
        inp.to_str().unwrap(),
        "--loop",
        "3",
        "--json",
        "--quiet",
    ]));
    assert_eq!(rv["mode"], "replay", "{rv}");
    assert_eq!(rv["read"], 3000, "{rv}");
    assert_eq!(rv["sent"], 3000, "{rv}");
    assert_eq!(rv["dropped"], 0, "{rv}");

    // Byte for byte: the output is the input three times.
    let frames = |f: &Path| -> Vec<String> {
        tshark(f, &["-T", "fields", "-e", "frame.len", "-e", "data.data"])
            .lines()
            .map(str::to_string)
            .collect()
    };
    // The generator's file carries wall-clock record times.
    let t0: f64 = tshark(&inp, &["-c", "1", "-T", "fields", "-e", "frame.time_epoch"])
        .trim()
        .parse()
        .unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!((now - t0).abs() < 600.0, "record time {t0}, now {now}");
    let (a, b) = (frames(&inp), frames(&out));
    assert_eq!(a.len(), 1000);
    assert_eq!(b.len(), 3000);
    for (i, f) in b.iter().enumerate() {
        assert_eq!(f, &a[i % 1000], "replayed frame {i}");
    }

    let v = last_json(&linerate_ok(&[
        "count",
        &format!("pcap:{}", out.display()),
        "--json",
        "--quiet",
    ]));
    let st = stream(&v, 0);
    assert_eq!(st["packets"], 3000, "{st}");
    assert_eq!(st["unique"], 1000, "{st}");
    assert_eq!(st["duplicates"], 2000, "{st}");
    assert_eq!(st["lost"], 0, "{st}");
    assert_eq!(st["expected"], 1000, "{st}");
}

// ------------------------------------------------------- 5. errors

fn one_line_error(args: &[&str], want: &[&str]) {
    let out = linerate(args);
    assert_eq!(out.status.code(), Some(1), "{args:?}");
    assert!(out.stdout.is_empty(), "{args:?}: stdout {:?}", out.stdout);
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
    assert!(err.starts_with("linerate: error: "), "{err}");
    for w in want {
        assert!(err.contains(w), "{args:?}: {err} lacks {w:?}");
    }
}

#[test]
fn bad_rate_and_bad_profile_fields_are_one_line_errors() {
    one_line_error(
        &["gen", "mem:x?sink", "--rate", "10furlongs"],
        &["--rate '10furlongs'", "furlongs"],
    );
    let dir = TempDir::new("err");
    let prof = |name: &str, field: &str| -> String {
        let p = dir.join(name);
        std::fs::write(
            &p,
            format!(
                r#"
[[streams]]
name = "a"
[streams.template]
l3 = {{ ipv4 = {{ src = "10.0.0.1", dst = "10.0.0.2" }} }}
l4 = {{ udp = {{ sport = 1, dport = 2 }} }}
[[streams.fields]]
{field}
"#
            ),
        )
        .unwrap();
        p.to_str().unwrap().to_string()
    };
    let p = prof(
        "value.toml",
        "field = \"ttl\"\nop = \"list\"\nvalues = [1, 300]",
    );
    one_line_error(
        &["gen", "mem:x?sink", "--profile", &p],
        &["stream 'a'", "ttl", "300"],
    );
    let p = prof("name.toml", "field = \"tll\"\nop = \"inc\"\ncount = 3");
    one_line_error(
        &["gen", "mem:x?sink", "--profile", &p],
        &["name.toml", "tll"],
    );
    let p = prof("op.toml", "field = \"sport\"\nop = \"sideways\"");
    one_line_error(
        &["gen", "mem:x?sink", "--profile", &p],
        &["op.toml", "sideways"],
    );
    let p = prof(
        "l4.toml",
        "field = \"tcp_flags\"\nop = \"list\"\nvalues = [2]",
    );
    let out = linerate(&["gen", "mem:x?sink", "--profile", &p, "--count", "1"]);
    assert_eq!(out.status.code(), Some(1), "tcp_flags on a UDP stream");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
}
