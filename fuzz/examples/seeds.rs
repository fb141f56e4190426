//! Writes the seed corpus, `fuzz/corpus/<target>/`: a few small valid and
//! near-valid inputs per target, made with linerate's own builders and
//! writers (frames, pcap, pcapng, history lines) or taken from
//! `examples/` and the unit tests (rules, profiles, experiment files).
//!
//!     cd fuzz && cargo +nightly run --example seeds
//!
//! Replaces every target's directory; run it again after changing a
//! format, then commit `fuzz/corpus`.

use linerate_io::pcap::{PcapWriter, WriteFormat};
use linerate_measure::bench::history::{Point, Run};
use linerate_pipeline::capture::pcapng::{CaptureWriter, RotateConfig};
use linerate_wire::arp::{self, ArpRepr};
use linerate_wire::build::{build_arp, build_icmp_echo, build_tcp, build_udp, FrameParams, IpPair};
use linerate_wire::frame::{L3, L4};
use linerate_wire::tcp::{flags, TcpRepr};
use linerate_wire::{parse_frame, Layers};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

type Corpus = BTreeMap<&'static str, Vec<(String, Vec<u8>)>>;

fn add(c: &mut Corpus, target: &'static str, name: impl Into<String>, data: impl Into<Vec<u8>>) {
    c.entry(target)
        .or_default()
        .push((name.into(), data.into()));
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

fn example(name: &str) -> Vec<u8> {
    let p = root().join("../examples").join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Frames of every protocol the wire parsers know, with their layers.
fn frames() -> Vec<(String, Vec<u8>, Layers)> {
    let mut out: Vec<(String, Vec<u8>)> = Vec::new();
    let v6a = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    let v6b = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
    let payload = *b"GET / HTTP/1.1\r\n";
    for (ipn, ip) in [
        (
            "v4",
            IpPair::V4 {
                src: [10, 0, 0, 1],
                dst: [192, 168, 1, 2],
            },
        ),
        ("v6", IpPair::V6 { src: v6a, dst: v6b }),
    ] {
        for (vn, vlans) in [("", &[][..]), ("-qinq", &[20, 30][..])] {
            let mut p = FrameParams::new(ip);
            p.vlans = vlans;
            p.payload = &payload;
            let mut b = [0u8; 256];
            let n = build_udp(&mut b, &p, 1234, 53).unwrap();
            out.push((format!("udp{ipn}{vn}"), b[..n].to_vec()));
            let t = TcpRepr {
                src_port: 40000,
                dst_port: 80,
                seq: 1,
                ack: 0,
                flags: flags::SYN,
                window: 65535,
                urgent: 0,
            };
            let n = build_tcp(&mut b, &p, &t).unwrap();
            out.push((format!("tcp{ipn}{vn}"), b[..n].to_vec()));
            let n = build_icmp_echo(&mut b, &p, true, 1, 2).unwrap();
            out.push((format!("icmp{ipn}{vn}"), b[..n].to_vec()));
        }
    }
    let mut p = FrameParams::new(IpPair::V4 {
        src: [10, 0, 0, 1],
        dst: [10, 0, 0, 2],
    });
    p.vlans = &[10];
    let mut b = [0u8; 256];
    let n = build_udp(&mut b, &p, 5000, 5001).unwrap();
    out.push(("udpv4-vlan".into(), b[..n].to_vec()));
    let r = ArpRepr {
        operation: arp::OP_REPLY,
        sender_mac: [2, 0, 0, 0, 0, 1],
        sender_ip: [10, 0, 0, 1],
        target_mac: [2, 0, 0, 0, 0, 2],
        target_ip: [10, 0, 0, 2],
    };
    let n = build_arp(&mut b, [0xff; 6], [2, 0, 0, 0, 0, 1], &[], &r).unwrap();
    out.push(("arp".into(), b[..n].to_vec()));
    // IPv6 with hop-by-hop, fragment, destination options and AH before UDP.
    let mut f = vec![0u8; 14 + 40 + 8 + 8 + 8 + 16 + 8];
    f[12..14].copy_from_slice(&[0x86, 0xdd]);
    f[14] = 0x60;
    f[18..20].copy_from_slice(&48u16.to_be_bytes());
    f[21] = 64;
    f[54] = 44;
    f[62] = 60;
    f[70] = 51;
    f[78] = 17;
    f[79] = 2;
    f[98..100].copy_from_slice(&8u16.to_be_bytes());
    out.push(("v6-ext-udp".into(), f));
    out.into_iter()
        .map(|(n, f)| {
            let l = parse_frame(&f).unwrap_or_else(|e| panic!("seed {n}: {e:?}"));
            (n, f, l)
        })
        .collect()
}

fn wire(c: &mut Corpus) {
    for (name, f, l) in frames() {
        let (l3, l4) = (l.l3_offset as usize, l.l4_offset as usize);
        let mut put = |t: &'static str, d: &[u8]| {
            add(c, t, name.clone(), d);
            // Near-valid: one byte short.
            if name.starts_with("udpv4") || name == "arp" || name.starts_with("tcpv6") {
                add(c, t, format!("{name}-short"), &d[..d.len() - 1]);
            }
        };
        for t in ["ethernet", "frame", "flowkey", "switch_key"] {
            put(t, &f);
        }
        put("vlan", &f[12..]);
        match l.l3 {
            L3::Arp => put("arp", &f[l3..]),
            L3::Ipv4 => put("ipv4", &f[l3..]),
            L3::Ipv6 => put("ipv6", &f[l3..]),
            _ => {}
        }
        match l.l4 {
            L4::Udp => put("udp", &f[l4..]),
            L4::Tcp => put("tcp", &f[l4..]),
            L4::Icmpv4 | L4::Icmpv6 => put("icmp", &f[l4..]),
            _ => {}
        }
    }
    // IPv4 with options (IHL 6) and a bad total length.
    let (_, f, l) = frames().into_iter().next().unwrap();
    let ip = &f[l.l3_offset as usize..];
    let mut o = ip[..20].to_vec();
    o[0] = 0x46;
    o.extend_from_slice(&[1, 1, 1, 0]);
    o.extend_from_slice(&ip[20..]);
    let tl = o.len() as u16;
    o[2..4].copy_from_slice(&tl.to_be_bytes());
    add(c, "ipv4", "udpv4-options", o.clone());
    o[2..4].copy_from_slice(&(tl + 1).to_be_bytes());
    add(c, "ipv4", "udpv4-options-badlen", o);
}

fn write_pcap(format: WriteFormat, frames: &[(String, Vec<u8>, Layers)]) -> Vec<u8> {
    let p = std::env::temp_dir().join(format!("linerate-seed-{}.pcap", std::process::id()));
    let ps = p.to_string_lossy().into_owned();
    let mut w = PcapWriter::create(&ps, format, false).unwrap();
    for (i, (_, f, _)) in frames.iter().enumerate() {
        // The third record truncated (orig_len > caplen).
        let cap = if i == 2 { 30 } else { f.len() };
        w.write_record(
            &f[..cap],
            f.len(),
            1_700_000_000_000_000_000 + i as u64 * 1000,
        )
        .unwrap();
    }
    w.write_out().unwrap();
    drop(w);
    let b = std::fs::read(&p).unwrap();
    std::fs::remove_file(&p).unwrap();
    b
}

fn pcap(c: &mut Corpus) {
    let fr: Vec<_> = frames().into_iter().take(4).collect();
    let pcap = write_pcap(WriteFormat::Pcap, &fr);
    let ng = write_pcap(WriteFormat::PcapNg, &fr);
    add(c, "pcap", "four.pcap", pcap.clone());
    add(c, "pcap", "four.pcapng", ng.clone());
    add(c, "pcap", "four-cut.pcap", &pcap[..pcap.len() - 7]);
    add(c, "pcap", "four-cut.pcapng", &ng[..ng.len() - 7]);
    add(c, "pcap", "header-only.pcap", &pcap[..24]);
    // The chunked path: the same files behind the set-up bytes of
    // linerate_io::pcap::fuzz_chunked (buffer, largest packet, passes,
    // batch): a 32-byte buffer (refills, passes cut short), a 96-byte one
    // with 192-byte packets (longer records passed over by seeking), and
    // one that holds the whole file (four passes compared with it).
    for (n, f) in c["pcap"].clone() {
        for (h, hdr) in [
            ("tiny", [0x00, 0x00, 0xff, 0x07]),
            ("skip", [0x40, 0x00, 0x10, 0x02]),
            ("whole", [0xff, 0x1f, 0xff, 0xff]),
        ] {
            let mut d = hdr.to_vec();
            d.extend_from_slice(&f);
            add(c, "pcap_chunked", format!("{h}-{n}"), d);
        }
    }
    // An SPB before the first EPB, two passes: the SPB takes timestamp 0
    // on every pass (the second took the first pass's last one: found
    // by this target's comparison).
    let block = |t: u32, body: &[u8]| {
        let mut b = body.to_vec();
        b.resize(body.len().div_ceil(4) * 4, 0);
        let l = (12 + b.len()) as u32;
        let mut v = [t.to_le_bytes(), l.to_le_bytes()].concat();
        v.extend_from_slice(&b);
        v.extend_from_slice(&l.to_le_bytes());
        v
    };
    let f: Vec<u8> = (0..60).collect();
    let mut d = vec![0xff, 0x1f, 0xff, 0x01];
    d.extend(block(
        0x0A0D_0D0A,
        &[&0x1A2B_3C4Du32.to_le_bytes()[..], &[1, 0, 0, 0], &[0xff; 8]].concat(),
    ));
    d.extend(block(1, &[1, 0, 0, 0, 0, 0, 0, 0]));
    d.extend(block(3, &[&60u32.to_le_bytes()[..], &f].concat()));
    let epb_hdr: Vec<u8> = [0u32, 0, 5000, 60, 60]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    d.extend(block(6, &[&epb_hdr[..], &f].concat()));
    add(c, "pcap_chunked", "spb-first-2-passes", d);
    // An interface of an unsupported link type, in a block longer than a
    // 96-byte buffer: refused read whole, a pass cut short in chunks (the
    // fuzzer's first find: the body had taken that for a discrepancy).
    let mut d = vec![0x40, 0x00, 0x10, 0x02];
    d.extend(block(
        0x0A0D_0D0A,
        &[&0x1A2B_3C4Du32.to_le_bytes()[..], &[1, 0, 0, 0], &[0xff; 8]].concat(),
    ));
    let mut idb = vec![101, 0, 0, 0, 0, 0, 0, 0];
    idb.resize(116, 0);
    d.extend(block(1, &idb));
    add(c, "pcap_chunked", "long-idb-raw-link", d);

    // What a capture worker writes (and --merge reads back).
    let dir = std::env::temp_dir().join(format!("linerate-seed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut w = CaptureWriter::new(RotateConfig::new(&dir, "seed", 0)).unwrap();
    for (i, (_, f, _)) in fr.iter().enumerate() {
        w.write(f, f.len() + (i == 1) as usize * 100, 1_000 * (4 - i as u64))
            .unwrap();
    }
    let files = w.files().to_vec();
    let report = w.finish();
    assert!(report.error.is_none(), "{:?}", report.error);
    let b = std::fs::read(&files[0]).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    add(c, "capture_pcapng", "worker.pcapng", b.clone());
    add(c, "capture_pcapng", "worker-cut.pcapng", &b[..b.len() - 5]);
    let mut bad = b.clone();
    let at = bad.len() - 4 - 60; // inside the last EPB
    bad[at] ^= 0x80;
    add(c, "capture_pcapng", "worker-flip.pcapng", bad);
}

fn frame_sizes(c: &mut Corpus) {
    lines(
        c,
        "frame_size",
        &[
            ("64", "64"),
            ("imix", "imix"),
            ("1518", " 1518 "),
            ("bad-small", "63"),
            ("bad-word", "jumbo"),
        ],
    );
}

fn http(c: &mut Corpus) {
    // fuzz_http reads 97-byte chunks as frames, and the whole input as one
    // direction of a stream.
    let req = b"GET /index.html HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello";
    let resp =
        b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\nConnection: keep-alive\r\n\r\nhello world!";
    let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n";
    add(c, "http", "request", &req[..]);
    add(c, "http", "response", &resp[..]);
    add(c, "http", "chunked", &chunked[..]);
    let mut frames = Vec::new();
    for (src, dst, sport, dport, data) in [
        ([10, 0, 0, 1], [10, 0, 0, 2], 40000u16, 80u16, &req[..]),
        ([10, 0, 0, 2], [10, 0, 0, 1], 80, 40000, &resp[..]),
    ] {
        let mut p = FrameParams::new(IpPair::V4 { src, dst });
        let body = &data[..data.len().min(97 - 54)];
        p.payload = body;
        let t = TcpRepr {
            src_port: sport,
            dst_port: dport,
            seq: 1,
            ack: 1,
            flags: flags::ACK | flags::PSH,
            window: 65535,
            urgent: 0,
        };
        let mut b = [0u8; 256];
        let n = build_tcp(&mut b, &p, &t).unwrap();
        assert_eq!(n, 97);
        frames.extend_from_slice(&b[..n]);
    }
    add(c, "http", "two-frames", frames);
}

fn lines(c: &mut Corpus, target: &'static str, items: &[(&str, &str)]) {
    for (n, s) in items {
        add(c, target, *n, s.as_bytes());
    }
}

fn switch(c: &mut Corpus) {
    let flows = example("switch-mem.flows");
    add(c, "switch_rule", "switch-mem.flows", flows.clone());
    for (i, l) in String::from_utf8(flows).unwrap().lines().enumerate() {
        add(c, "switch_rule", format!("mem-{i}"), l.as_bytes());
    }
    lines(
        c,
        "switch_rule",
        &[
            ("vlan", "dl_vlan=10,dl_vlan_pcp=3,actions=pop_vlan,output:4"),
            (
                "mask",
                "in_port=3 dl_src=00:11:22:33:44:55/ff:ff:ff:00:00:00 actions=flood",
            ),
            (
                "v6",
                "ipv6,ipv6_src=2001:db8::/32,actions=set_field:2001:db8::9->ipv6_dst,output:2",
            ),
            (
                "tcpflags",
                "tcp,tp_src=1024/0xfc00,tp_dst=80,tcp_flags=+syn-ack,actions=group:1",
            ),
            (
                "meter",
                "udp,udp_src=53,actions=mod_tp_dst:5353,meter:1,output:3",
            ),
            ("icmp6", "icmp6,icmpv6_type=135,actions=output:1"),
            ("arp", "arp,nw_dst=10.0.0.1,nw_proto=1,actions=flood"),
            (
                "max",
                "priority=65535,in_port=4294967295,actions=output:4294967295",
            ),
            ("bad-ecn", "ip,nw_tos=3,actions=drop"),
            ("bad-noactions", "in_port=1"),
            ("match-only", "priority=7,ip,nw_dst=10.0.0.0/8"),
        ],
    );
    lines(
        c,
        "switch_group",
        &[
            ("all", "group_id=1,type=all,bucket=output:2,bucket=output:3"),
            (
                "spaces",
                "group_id=7 type=all bucket=actions=output:1 bucket=4",
            ),
            ("empty", "group_id=2,type=all"),
            ("bad-type", "group_id=1,type=select,bucket=output:2"),
            ("bad-bucket", "group_id=1,type=all,bucket=output:x"),
        ],
    );
    lines(
        c,
        "switch_meter",
        &[
            (
                "pktps",
                "meter=1,pktps,band=type=drop,rate=1000,burst_size=10",
            ),
            ("kbps", "meter=2 kbps band=type=drop,rate=8000"),
            (
                "stats",
                "meter=3,kbps,burst,stats,band=type=drop,rate=100000,burst_size=2000",
            ),
            ("bad-rate", "meter=1,rate=0"),
            ("bad-band", "meter=1,pktps,band=type=dscp_remark,rate=1"),
        ],
    );
}

fn uri(c: &mut Corpus) {
    lines(
        c,
        "uri",
        &[
            ("afxdp", "afxdp:veth0?queue=1&mode=native&zerocopy"),
            ("afpacket", "afpacket:eth0?ring=tpacket_v3&fanout=hash"),
            ("pcap", "pcap:/tmp/a.pcap?loop=3&speed=top"),
            ("mem", "mem:a?frames=1024"),
            ("xdp", "xdp:veth1?mode=generic"),
            ("bad-dup", "mem:a?x=1&x=2"),
            ("bad-scheme", "foo:bar"),
        ],
    );
}

fn profiles(c: &mut Corpus) {
    for f in ["udp-cbr.toml", "imix-mix.toml", "poisson-latency.toml"] {
        add(c, "profile", f, example(f));
    }
    lines(
        c,
        "profile",
        &[
            (
                "tcp6-fields",
                r#"count = 100
[[streams]]
name = "t"
size = { min = 78, max = 200, seed = 3 }
rate = { bps = 1e9, accounting = "l2", mode = "burst", burst = 8 }
[streams.template]
vlans = [100, 200]
l3 = { ipv6 = { src = "2001:db8::1", dst = "2001:db8::2" } }
l4 = { tcp = { sport = 1, dport = 2, flags = 18 } }
payload = "deadbeef"
[[streams.fields]]
field = "ip_src"
op = "range"
min = "2001:db8::1"
max = "2001:db8::ff"
step = 3
[[streams.fields]]
field = "eth_dst"
op = "list"
values = ["02:00:00:00:00:09", "0x020000000008"]
[[streams.fields]]
field = "dport"
op = "dec"
start = 100
step = 7
count = 9
"#,
            ),
            (
                "icmp-random",
                r#"duration_s = 0.5
[[streams]]
name = "i"
size = "simple"
signature = { enabled = false }
[streams.template]
l3 = { ipv4 = { src = "10.0.0.1", dst = "10.0.0.2", ttl = 1, dscp = 46 } }
l4 = { icmp = { type = 0, code = 0, id = 7 } }
[[streams.fields]]
field = "ttl"
op = "random"
min = 1
max = 255
seed = 9
"#,
            ),
            (
                "bad-signature-too-big",
                r#"[[streams]]
name = "s"
size = 60
signature = { enabled = true }
[streams.template]
l3 = { ipv4 = { src = "10.0.0.1", dst = "10.0.0.2" } }
l4 = { udp = { sport = 1, dport = 2 } }
"#,
            ),
            ("bad-streams", "streams = 3"),
        ],
    );
}

fn experiments(c: &mut Corpus) {
    for f in [
        "experiment-data.toml",
        "experiment-dut-size.toml",
        "experiment-napi-flows.toml",
        "experiment-rfc2544.toml",
    ] {
        add(c, "experiment", f, example(f));
    }
    lines(
        c,
        "experiment",
        &[
            (
                "three-factors-log",
                "replications = 2\ntransform = \"log\"\nseed = 9\n[[factor]]\nname = \"a\"\nlevels = [1, 2]\n[[factor]]\nname = \"b\"\nlevels = [\"x\", \"y\", \"z\"]\n[[factor]]\nname = \"c\"\nlevels = [true, false]\n",
            ),
            (
                "one-replication",
                "replications = 1\nresponse = \"y\"\n[[factor]]\nname = \"a\"\nlevels = [1.5, 2.5]\n[[factor]]\nname = \"b\"\nlevels = [1, 2]\n",
            ),
            ("bad-level", "replications = 1\n[[factor]]\nname = \"a\"\nlevels = [1, [2]]\n"),
            (
                "quoted-levels",
                "replications = 2\n[[factor]]\nname = \"dut, kind\"\nlevels = [\" a\", \"b \\\"q\\\"\"]\n[[factor]]\nname = \"n\"\nlevels = [\"#1\", \"2\"]\n",
            ),
            ("bad-dup-level", "replications = 3\n[[factor]]\nname = \"a\"\nlevels = [\"64\", 64]\n"),
        ],
    );
}

fn experiment_data(c: &mut Corpus) {
    // For the design of examples/experiment-data.toml.
    let csv = example("experiment-dut-size.csv");
    add(c, "experiment_data", "experiment-dut-size.csv", csv.clone());
    let text = String::from_utf8(csv).unwrap();
    let rows: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
    // Without the run column, quoted, with a comment and CRLF.
    let mut norun = String::from("# no run column\r\n\"dut\", frame_size ,forwarding_mpps\r\n");
    for r in &rows[1..] {
        let f: Vec<&str> = r.split(',').collect();
        norun.push_str(&format!("\"{}\",{}, {}\r\n", f[1], f[2], f[3]));
    }
    add(c, "experiment_data", "no-run-quoted-crlf.csv", norun);
    // Near-valid: one cell short, one extra.
    add(
        c,
        "experiment_data",
        "missing.csv",
        rows[..rows.len() - 1].join("\n"),
    );
    let mut extra = rows.join("\n");
    extra.push_str(&format!(
        "\n{}",
        rows[1].replacen(rows[1].split(',').next().unwrap(), "13", 1)
    ));
    add(c, "experiment_data", "extra.csv", extra);
}

fn history(c: &mut Corpus) {
    let run = |date: &str, tp: f64, limited: bool| Run {
        date: date.into(),
        machine: "Intel(R) Xeon(R) Processor @ 2.10GHz; 2 CPUs; Linux 6.1.0-28-amd64".into(),
        settings: "trial 2 s; loss tolerance 0; small-loss repeat; resolution 0.01; 3 searches; \
                   generator CPU 0, DuT CPU 1; 64 flows; threaded NAPI false; RPS true"
            .into(),
        results: vec![
            Point {
                dut: "linux-bridge".into(),
                frame_size: 64,
                throughput_pps: tp,
                pdr_pps: None,
                generator_limited: false,
            },
            Point {
                dut: "linerate-afxdp".into(),
                frame_size: 64,
                throughput_pps: tp * 2.5,
                pdr_pps: None,
                generator_limited: limited,
            },
        ],
    };
    let l = |r: &Run| serde_json::to_string(r).unwrap() + "\n";
    let a = l(&run("2026-11-24T10:00:00Z", 1.46e6, false));
    let b = l(&run("2026-11-25T10:00:00Z", 2.2e6, true));
    let cc = l(&run("2026-11-25T12:00:00Z", 1.51e6, false));
    add(c, "history", "one", a.clone());
    add(c, "history", "three", format!("{a}{b}{cc}"));
    add(
        c,
        "history",
        "with-bad-line",
        format!("{a}{{\"date\":\n{}", &b[..b.len() / 2]),
    );
    add(
        c,
        "history",
        "empty-results",
        "{\"date\":\"d\",\"machine\":\"m\",\"settings\":\"s\",\"results\":[]}\n",
    );
}

fn guard(c: &mut Corpus) {
    lines(
        c,
        "guard",
        &[
            (
                "bench",
                "bed lr12345\npid 23456 987654\ngroup 23456\npeer lr12345-dut /work/scripts/peers/ovs.sh\nunpid 23456\nungroup 23456\n",
            ),
            ("keep", "bed lrtest\nkeep lrtest\ndone\n"),
            ("unpeer", "peer ns1 /x.sh\nunpeer ns1 /x.sh\nunbed lrtest\n"),
            ("bad", "pid 1 5\ngroup 0\nbed ../etc\npeer onlyns\n"),
        ],
    );
}

fn filters(c: &mut Corpus) {
    let (_, f, _) = frames().into_iter().nth(1).unwrap(); // tcp v4
    for (n, e) in [
        ("tcp80", "tcp port 80 and host 10.0.0.1"),
        ("vlan", "vlan 10 and udp"),
        ("v6syn", "ip6 and tcp[tcpflags] & tcp-syn != 0"),
        ("len", "greater 100 or ether[12:2] = 0x88cc"),
        ("bad", "tcp prot 80"),
    ] {
        let mut d = e.as_bytes().to_vec();
        d.push(0xff);
        d.extend_from_slice(&f);
        add(c, "capture_filter", n, d);
    }
}

/// The conversations `ovs-ofctl` had with Open vSwitch
/// (`crates/pipeline/tests/data/openflow/NAME.txt`): (name, the messages,
/// each (sent by ovs-ofctl?, bytes)); messages whose hex was left out are
/// skipped.
fn conversations() -> Vec<(String, Vec<(bool, Vec<u8>)>)> {
    let dir = root().join("../crates/pipeline/tests/data/openflow");
    let mut names: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    names.sort();
    names
        .iter()
        .map(|p| {
            let mut msgs: Vec<(bool, Vec<u8>)> = Vec::new();
            for l in std::fs::read_to_string(p).unwrap().lines() {
                if l.starts_with("# c->s ") || l.starts_with("# s->c ") {
                    msgs.push((l.starts_with("# c->s"), Vec::new()));
                } else if !l.starts_with('#') && !l.is_empty() {
                    let m = &mut msgs.last_mut().unwrap().1;
                    m.extend(l.split_whitespace().map(|h| u8::from_str_radix(h, 16).unwrap()));
                }
            }
            msgs.retain(|(_, b)| b.len() >= 8);
            let name = p.file_stem().unwrap().to_string_lossy().into_owned();
            (name, msgs)
        })
        .collect()
}

/// The OpenFlow channel's framing loop (what ovs-ofctl sent, after a byte
/// that picks the probe and the write sizes), the client (what Open
/// vSwitch answered, after a byte that picks the requests, with the
/// replies' xids those of the client's requests) and `--openflow` values.
fn openflow(c: &mut Corpus) {
    for (i, (name, msgs)) in conversations().into_iter().enumerate() {
        let mut sent = vec![(i % 256) as u8];
        for (_, m) in msgs.iter().filter(|(to_switch, _)| *to_switch) {
            sent.extend(m);
        }
        add(c, "switch_openflow_channel", name.as_str(), sent);
        let answers: Vec<&Vec<u8>> = msgs.iter().filter(|(s, _)| !*s).map(|(_, m)| m).collect();
        // Four reads of whatever came.
        let mut all = vec![0u8];
        answers.iter().for_each(|m| all.extend(*m));
        add(c, "switch_openflow_client", format!("{name}-reads"), all);
        // A read (the HELLO), then the request whose replies are here
        // (barrier 1, flow dump 2, aggregate 3), as the reply to xid 2.
        let mp = |m: &[u8]| (m[0] == 4 && m[1] == 19 && m.len() >= 16).then(|| u16::from_be_bytes([m[8], m[9]]));
        for (op, keep) in [
            (1u8, &(|m: &[u8]| m[1] == 1 || m[1] == 21) as &dyn Fn(&[u8]) -> bool),
            (2, &|m: &[u8]| mp(m) == Some(1)),
            (3, &|m: &[u8]| mp(m) == Some(2)),
        ] {
            let replies: Vec<&Vec<u8>> = answers.iter().copied().filter(|m| keep(m)).collect();
            if replies.is_empty() {
                continue;
            }
            let mut d = vec![op << 2];
            d.extend(answers.iter().find(|m| m[1] == 0).map_or(&[][..], |m| &m[..]));
            for r in replies {
                let mut r = r.clone();
                if r[1] != 1 {
                    r[4..8].copy_from_slice(&2u32.to_be_bytes());
                }
                d.extend(r);
            }
            add(c, "switch_openflow_client", format!("{name}-op{op}"), d);
        }
    }
    lines(
        c,
        "switch_openflow_endpoint",
        &[
            ("punix", "punix:/run/linerate-sw.of"),
            ("unix", "unix:/var/run/openvswitch/br0.mgmt"),
            ("pssl", "pssl:6653:[::1]"),
            ("ptcp", "ptcp:"),
            ("ptcp-any", "ptcp:6633:0.0.0.0"),
            ("ptcp-v6-bare", "ptcp:6653:::1"),
            ("tcp-v6-bare", "tcp:::1"),
            ("tcp-v6", "tcp:[fe80::1]:6653"),
            ("ssl", "ssl:192.0.2.10"),
            ("tcp", "tcp:10.0.0.1:6633"),
            ("bad-port", "tcp:10.0.0.1:65536"),
            ("bad-kind", "udp:1.2.3.4"),
            ("bad-bracket", "ssl:[::1"),
        ],
    );
}

fn main() {
    let mut c = Corpus::new();
    wire(&mut c);
    pcap(&mut c);
    frame_sizes(&mut c);
    http(&mut c);
    switch(&mut c);
    uri(&mut c);
    profiles(&mut c);
    experiments(&mut c);
    experiment_data(&mut c);
    history(&mut c);
    guard(&mut c);
    filters(&mut c);
    openflow(&mut c);
    let dir = root().join("corpus");
    let (mut files, mut bytes) = (0, 0);
    for (t, seeds) in &c {
        let d = dir.join(t);
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        for (n, data) in seeds {
            std::fs::write(d.join(n), data).unwrap();
            files += 1;
            bytes += data.len();
        }
    }
    println!(
        "seeds: {} targets, {files} files, {bytes} bytes in {}",
        c.len(),
        dir.display()
    );
}
