//! End to end tests of `linerate capture`:
//!
//! - capture from a veth in a namespace into pcapng with 2 workers: tshark
//!   reads every file without error and counts exactly the forwarded packets;
//! - SIGTERM in the middle of a capture: every record the stats called
//!   acknowledged is in the files, and the files are valid;
//! - the `http` analyser on a replayed capture of HTTP connections built
//!   with linerate_wire: the right numbers of requests, responses, pairs;
//! - the control socket: `stats` and `shunt`;
//! - `--out`: the kept packets go out of a veth into a namespace where
//!   tcpdump listens, and tshark reads every one of them there;
//! - `--steer queues`: two AF_XDP sockets on a 2-queue veth share the
//!   traffic and together receive every packet.
//!
//! Namespace tests use a [`Testbed`] (unique names, removed on drop, also
//! when a test fails); child processes are killed on drop. They need root
//! and tshark/tcpdump (scripts/setup.sh installs them) and fail without.
//! Every capture has a control socket (`--ctl`): it answers once every
//! port is open, and its `stats` say when the capture has taken in every
//! packet sent, so no test waits a fixed time.

use linerate_measure::testbed::{Testbed, TestbedConfig};
use linerate_wire::build::{build_tcp, FrameParams, IpPair};
use linerate_wire::tcp::{flags as tcpf, TcpRepr};
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use std::time::Duration;

mod support;
use support::*;

fn files_of(v: &Value) -> Vec<PathBuf> {
    v["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| PathBuf::from(f.as_str().unwrap()))
        .collect()
}

fn gen_args(bed: &Testbed, extra: &[&str]) -> Vec<String> {
    let (g, d) = (bed.gen().clone(), bed.dut_in().clone());
    let mut v: Vec<String> = [
        "gen",
        "afpacket:g0",
        "--flows",
        "64",
        "--src-mac",
        &g.mac.to_string(),
        "--dst-mac",
        &d.mac.to_string(),
        "--src-ip",
        &g.ipv4.to_string(),
        "--dst-ip",
        &d.ipv4.to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

/// `linerate capture ARGS --ctl SOCK` in the bed's DuT namespace, once it
/// answers on its control socket (every port open).
fn start_capture(bed: &Testbed, ctl: &Path, args: &[&str]) -> Proc {
    let mut a = args.to_vec();
    a.extend(["--ctl", ctl.to_str().unwrap()]);
    let mut cap = spawn_in(bed.ns_dut(), &a);
    wait_ctl(&mut cap, ctl, "linerate capture");
    cap
}

/// Run `linerate gen` (with `extra`, sending `n` packets) in the bed's
/// generator namespace to the end, wait until the capture `cap` (control
/// socket `ctl`) has received all `n`, then stop it with SIGINT; its final
/// JSON report.
fn generate_then_stop(bed: &Testbed, mut cap: Proc, ctl: &Path, n: u64, extra: &[&str]) -> Value {
    let args = gen_args(bed, extra);
    let out = Command::new("ip")
        .args(["netns", "exec", bed.ns_gen(), EXE])
        .args(&args)
        .output()
        .unwrap();
    assert_ok(&out, "linerate gen");
    wait_capture_received(&mut cap, ctl, n, "linerate capture");
    cap.signal(libc::SIGINT);
    let out = cap.wait_output(Duration::from_secs(20), "capture");
    assert_ok(&out, "linerate capture");
    last_json(&String::from_utf8_lossy(&out.stdout))
}

#[test]
fn two_workers_into_pcapng_match_forwarded_count() {
    two_workers_into_pcapng("dispatcher", 1);
}

#[test]
fn two_workers_by_kernel_fanout_into_pcapng() {
    two_workers_into_pcapng("fanout", 2);
}

fn two_workers_into_pcapng(steer: &str, sockets: usize) {
    require_root();
    let bed = Testbed::up(&TestbedConfig::default()).expect("test bed");
    let dir = TempDir::new("veth");
    let d = dir.0.display().to_string();
    let ctl = dir.join("ctl.sock");
    let mut cap = start_capture(
        &bed,
        &ctl,
        &[
            "capture",
            "afpacket:d0",
            "--workers",
            "2",
            "--steer",
            steer,
            "--write",
            &d,
            "--rotate-mb",
            "0.2",
            "--json",
            "--quiet",
        ],
    );
    wait_packet_sockets(&mut cap, sockets, "linerate capture");
    let v = generate_then_stop(
        &bed,
        cap,
        &ctl,
        10_000,
        &["--rate", "20kpps", "--count", "10000"],
    );
    assert_eq!(v["steering"], steer);
    let t = &v["totals"];
    let fwd = t["forwarded"].as_u64().unwrap();
    assert!(fwd >= 10_000, "{v}");
    assert_eq!(t["acknowledged"].as_u64().unwrap(), fwd, "{v}");
    let files = files_of(&v);
    assert!(files.len() > 2, "rotated: {files:?}");
    let mut in_files = 0;
    for f in &files {
        in_files += tshark_count(f);
    }
    assert_eq!(in_files, fwd, "{v}");
    let ws = v["workers"].as_array().unwrap();
    assert_eq!(ws.len(), 2);
    for w in ws {
        // 64 flows: both workers get some.
        assert!(w["forwarded"].as_u64().unwrap() > 1000, "{v}");
        let drops: u64 = w["dropped"]
            .as_object()
            .unwrap()
            .values()
            .map(|x| x.as_u64().unwrap())
            .sum();
        assert_eq!(
            w["received"].as_u64().unwrap(),
            w["forwarded"].as_u64().unwrap() + drops
        );
    }
    bed.down().unwrap();
}

/// `--merge`: two fanout workers, one file at the end; tshark reads it
/// without error, it holds every forwarded packet, and its timestamps never
/// go back (the merge is in timestamp order across the workers' files).
#[test]
fn two_workers_merged_into_one_pcapng() {
    require_root();
    let bed = Testbed::up(&TestbedConfig::default()).expect("test bed");
    let dir = TempDir::new("merge");
    // The control socket lives outside the capture directory, which must
    // hold only the merged file at the end.
    let ctl_dir = TempDir::new("merge-ctl");
    let ctl = ctl_dir.join("ctl.sock");
    let d = dir.0.display().to_string();
    let mut cap = start_capture(
        &bed,
        &ctl,
        &[
            "capture",
            "afpacket:d0",
            "--workers",
            "2",
            "--steer",
            "fanout",
            "--write",
            &d,
            "--merge",
            "--json",
            "--quiet",
        ],
    );
    wait_packet_sockets(&mut cap, 2, "linerate capture");
    let v = generate_then_stop(
        &bed,
        cap,
        &ctl,
        5000,
        &["--rate", "20kpps", "--count", "5000"],
    );
    let files = files_of(&v);
    assert_eq!(files, vec![dir.join("capture.pcapng")], "{v}");
    let fwd = v["totals"]["forwarded"].as_u64().unwrap();
    assert!(fwd >= 5000, "{v}");
    assert_eq!(v["merged_records"].as_u64().unwrap(), fwd, "{v}");
    for w in v["workers"].as_array().unwrap() {
        assert!(w["forwarded"].as_u64().unwrap() > 500, "both workers: {v}");
    }
    assert_eq!(tshark_count(&files[0]), fwd);
    let out = Command::new(require_tool("tshark"))
        .arg("-r")
        .arg(&files[0])
        .args(["-T", "fields", "-e", "frame.time_epoch"])
        .output()
        .expect("tshark");
    let ts: Vec<f64> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect();
    assert_eq!(ts.len() as u64, fwd);
    assert!(ts.windows(2).all(|w| w[0] <= w[1]), "timestamps in order");
    let left: Vec<_> = std::fs::read_dir(&dir.0).unwrap().collect();
    assert_eq!(left.len(), 1, "only the merged file is left");
    bed.down().unwrap();
}

/// `--steer queues`: one AF_XDP socket per queue of a 2-queue veth. An
/// AF_PACKET sender's frames take the TX queue of the CPU it runs on (the
/// kernel records cpu % queues), and veth delivers TX queue N to RX queue
/// N: 5000 frames sent from CPU 0 and 5000 from CPU 1 land on worker 0 and
/// worker 1, exactly.
#[test]
fn two_workers_on_af_xdp_queues() {
    require_root();
    require_tool("taskset");
    let bed = Testbed::up(&TestbedConfig {
        queues: 2,
        ..TestbedConfig::default()
    })
    .expect("test bed");
    let dir = TempDir::new("queues");
    let ctl = dir.join("ctl.sock");
    // Both AF_XDP sockets are bound (and in the XDP program's map) before
    // the control socket answers.
    let mut cap = start_capture(
        &bed,
        &ctl,
        &[
            "capture",
            "afxdp:d0",
            "--workers",
            "2",
            "--steer",
            "queues",
            "--json",
            "--quiet",
        ],
    );
    wait_xdp(&mut cap, bed.ns_dut(), "d0", "linerate capture");
    for cpu in ["0", "1"] {
        let out = Command::new("ip")
            .args(["netns", "exec", bed.ns_gen(), "taskset", "-c", cpu, EXE])
            .args(gen_args(&bed, &["--rate", "20kpps", "--count", "5000"]))
            .output()
            .unwrap();
        assert_ok(&out, "linerate gen");
    }
    wait_capture_received(&mut cap, &ctl, 10_000, "linerate capture");
    cap.signal(libc::SIGINT);
    let out = cap.wait_output(Duration::from_secs(20), "capture");
    assert_ok(&out, "linerate capture");
    let v = last_json(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(v["steering"], "queues", "{v}");
    let t = &v["totals"];
    assert_eq!(t["received"].as_u64().unwrap(), 10_000, "{v}");
    assert_eq!(t["forwarded"].as_u64().unwrap(), 10_000, "{v}");
    let ws = v["workers"].as_array().unwrap();
    assert_eq!(ws.len(), 2);
    for w in ws {
        assert_eq!(w["received"].as_u64().unwrap(), 5000, "queue per CPU: {v}");
    }
    bed.down().unwrap();
}

/// `--out afpacket:d1`, 2 workers, `--drop` of one UDP port: tcpdump in
/// the sink namespace (the external analyser) receives exactly the
/// packets the capture kept, and none of the dropped ones.
#[test]
fn kept_packets_go_out_to_an_external_analyser() {
    require_root();
    let tcpdump_bin = require_tool("tcpdump");
    let bed = Testbed::up(&TestbedConfig::default()).expect("test bed");
    let dir = TempDir::new("out");
    let file = dir.0.join("sink.pcap");
    let ctl = dir.join("ctl.sock");
    let gen_ip = bed.gen().ipv4.to_string();
    let sink_if = bed.sink().name.clone();
    let filter = format!("udp and src host {gen_ip}");
    // -Z root: tcpdump keeps root, so it can write into our private directory.
    let mut tcpdump = Proc::from(
        Command::new("ip")
            .args(["netns", "exec", bed.ns_sink(), "tcpdump", "-Z", "root"])
            .args(["-i", &sink_if, "-Q", "in", "-U", "-n", "-w"])
            .arg(&file)
            .arg(&filter)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn ip netns exec tcpdump"),
    );
    // tcpdump is listening once its packet socket is bound in the namespace.
    wait_packet_sockets_of(&mut tcpdump, &tcpdump_bin, 1, "tcpdump");
    let out_if = format!("afpacket:{}", bed.dut_out().name);
    let in_if = format!("afpacket:{}", bed.dut_in().name);
    let mut cap = start_capture(
        &bed,
        &ctl,
        &[
            "capture",
            &in_if,
            "--workers",
            "2",
            "--out",
            &out_if,
            "--drop",
            "udp src port 1000",
            "--json",
            "--quiet",
        ],
    );
    // The input's socket (the output ports are opened before it and do
    // not receive, so they do not count as running).
    wait_packet_sockets(&mut cap, 1, "linerate capture");
    // 64 flows with source ports 1000..1063: 1 in 64 is dropped.
    let v = generate_then_stop(
        &bed,
        cap,
        &ctl,
        6400,
        &["--rate", "20kpps", "--count", "6400", "--sport", "1000"],
    );
    // Every packet the capture kept has left d1 by the time it exits;
    // tcpdump (-U: a record written per packet) has them all once its
    // file holds as many records as the capture sent out of the matching
    // ones (6300: 1 in 64 dropped by the filter).
    wait_until(
        Duration::from_secs(20),
        "tcpdump in the sink namespace to write 6300 records",
        || {
            tcpdump.assert_running("tcpdump");
            pcap_records(&file) >= 6300
        },
    );
    tcpdump.signal(libc::SIGINT);
    let td = tcpdump.wait_output(Duration::from_secs(20), "tcpdump");
    assert_ok(&td, "tcpdump");
    let t = &v["totals"];
    assert_eq!(t["dropped"]["filter"].as_u64(), Some(100), "{v}");
    // Everything kept went out (other frames, e.g. IPv6 neighbour
    // discovery, may be kept and sent too; tcpdump's filter leaves them out).
    assert_eq!(t["out_sent"], t["forwarded"], "{v}");
    assert_eq!(t["out_dropped"].as_u64(), Some(0), "{v}");
    for w in v["workers"].as_array().unwrap() {
        assert!(
            w["out_sent"].as_u64().unwrap() > 1000,
            "both workers send: {v}"
        );
    }
    let got = tshark_count(&file);
    assert_eq!(got, 6300, "tcpdump in the sink namespace: {v}");
    let dropped_port = Command::new(require_tool("tshark"))
        .arg("-r")
        .arg(&file)
        .args(["-Y", "udp.srcport == 1000"])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&dropped_port.stdout)
            .trim()
            .is_empty(),
        "a dropped packet reached the analyser"
    );
    bed.down().unwrap();
}

#[test]
fn sigterm_loses_no_acknowledged_record() {
    require_root();
    let bed = Testbed::up(&TestbedConfig::default()).expect("test bed");
    let dir = TempDir::new("term");
    let d = dir.0.display().to_string();
    let ctl = dir.join("ctl.sock");
    let mut cap = spawn_in(
        bed.ns_dut(),
        &[
            "capture",
            "afpacket:d0",
            "--workers",
            "2",
            "--write",
            &d,
            "--rotate-s",
            "1",
            "--json",
            "--ctl",
            ctl.to_str().unwrap(),
        ],
    );
    wait_ctl(&mut cap, &ctl, "linerate capture");
    let args = gen_args(&bed, &["--rate", "20kpps", "--duration", "30"]);
    let args: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    let gen = Proc::from(
        Command::new("ip")
            .args(["netns", "exec", bed.ns_gen(), EXE])
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // Read the once-a-second lines until acknowledged records show up.
    let lines = cap.stdout_lines();
    let acked = wait_line(
        &lines,
        Duration::from_secs(25),
        "20 000 acknowledged records in a once-a-second line",
        |l| {
            let v: Value = serde_json::from_str(l).unwrap();
            let acked = v["totals"]["acknowledged"].as_u64().unwrap();
            (acked >= 20_000).then_some(acked)
        },
    );
    // The control socket answers with the same stats; mode 0600.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&ctl).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let mut s = std::os::unix::net::UnixStream::connect(&ctl).unwrap();
    writeln!(s, "stats").unwrap();
    writeln!(s, "shunt 10.0.0.1:1 10.0.0.2:2 tcp").unwrap();
    writeln!(s, "bogus").unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let mut r = BufReader::new(s).lines();
    let st: Value = serde_json::from_str(&r.next().unwrap().unwrap()).unwrap();
    let acked_ctl = st["totals"]["acknowledged"].as_u64().unwrap();
    assert!(acked_ctl >= acked);
    assert_eq!(r.next().unwrap().unwrap(), "ok");
    assert!(r
        .next()
        .unwrap()
        .unwrap()
        .starts_with("error: unknown command"));
    // SIGTERM in the middle of the traffic.
    cap.signal(libc::SIGTERM);
    let rest = drain_lines(&lines, Duration::from_secs(20), "capture after SIGTERM");
    let out = cap.wait_output(Duration::from_secs(20), "capture");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    drop(gen);
    let v = last_json(&rest.join("\n"));
    assert_eq!(v["final"], true);
    let files = files_of(&v);
    assert!(files.len() >= 2, "{files:?}");
    let mut in_files = 0;
    for f in &files {
        in_files += tshark_count(f);
    }
    assert!(in_files >= acked_ctl, "{in_files} < {acked_ctl}");
    assert_eq!(in_files, v["totals"]["acknowledged"].as_u64().unwrap());
    assert_eq!(in_files, v["totals"]["forwarded"].as_u64().unwrap());
    assert!(!ctl.exists(), "control socket removed at the end");
    bed.down().unwrap();
}

// ------------------------------------------------ http analyser on a pcap

struct Conv {
    cport: u16,
    client: [u8; 4],
    cseq: u32,
    sseq: u32,
    frames: Vec<Vec<u8>>,
}

impl Conv {
    fn new(client: [u8; 4], cport: u16) -> Conv {
        let mut c = Conv {
            cport,
            client,
            cseq: 7,
            sseq: 0xffff_fff0, // wraps during the response
            frames: vec![],
        };
        c.seg(true, tcpf::SYN, b"");
        c.seg(false, tcpf::SYN | tcpf::ACK, b"");
        c
    }
    fn seg(&mut self, client: bool, flags: u16, pl: &[u8]) {
        let server = [192, 168, 7, (self.cport % 25) as u8];
        let (src, dst, sp, dp, seq) = if client {
            (self.client, server, self.cport, 80, &mut self.cseq)
        } else {
            (server, self.client, 80, self.cport, &mut self.sseq)
        };
        let mut p = FrameParams::new(IpPair::V4 { src, dst });
        p.payload = pl;
        let t = TcpRepr {
            src_port: sp,
            dst_port: dp,
            seq: *seq,
            ack: 0,
            flags,
            window: 1000,
            urgent: 0,
        };
        let mut buf = vec![0u8; pl.len() + 100];
        let n = build_tcp(&mut buf, &p, &t).unwrap();
        buf.truncate(n);
        *seq = seq
            .wrapping_add(pl.len() as u32)
            .wrapping_add((flags & (tcpf::SYN | tcpf::FIN) != 0) as u32);
        self.frames.push(buf);
    }
}

/// `linerate ARGS...` (the arrays joined), which must succeed; its last
/// JSON line.
fn capture_json(args: &[&[&str]]) -> Value {
    last_json(&linerate_ok(&args.concat()))
}

#[test]
fn http_analyser_counts_requests_responses_pairs() {
    let dir = TempDir::new("http");
    // 40 connections, connection i carries 1 + i % 3 request/response
    // exchanges with bodies of varied size in 1400-byte segments, the
    // connections interleaved packet by packet.
    let mut convs = vec![];
    let mut exchanges = 0u64;
    for i in 0..40u16 {
        let mut c = Conv::new([10, 9, (i >> 8) as u8, i as u8], 30000 + i);
        for k in 0..(1 + i % 3) {
            let req = format!("GET /obj/{i}/{k} HTTP/1.1\r\nHost: s\r\n\r\n");
            c.seg(true, tcpf::ACK | tcpf::PSH, req.as_bytes());
            let len = 100 + (i as usize * 997 + k as usize * 4001) % 9000;
            let mut resp = format!("HTTP/1.1 200 OK\r\nContent-Length: {len}\r\n\r\n").into_bytes();
            resp.extend((0..len).map(|x| b"HTTP/1.1 200 "[x % 13]));
            for p in resp.chunks(1400) {
                c.seg(false, tcpf::ACK, p);
            }
            exchanges += 1;
        }
        c.seg(true, tcpf::FIN | tcpf::ACK, b"");
        c.seg(false, tcpf::FIN | tcpf::ACK, b"");
        convs.push(c.frames);
    }
    let conv_len: Vec<u64> = convs.iter().map(|c| c.len() as u64).collect();
    let mut frames = vec![];
    let mut idx = vec![0usize; convs.len()];
    loop {
        let mut any = false;
        for (c, i) in convs.iter().zip(idx.iter_mut()) {
            if *i < c.len() {
                frames.push(c[*i].clone());
                *i += 1;
                any = true;
            }
        }
        if !any {
            break;
        }
    }
    let f = dir.join("http.pcapng");
    write_pcap(&f, &frames);
    if std::env::var("KEEP").is_ok() {
        std::fs::copy(&f, "/tmp/http.pcapng").unwrap();
    }
    for workers in ["1", "2"] {
        let v = capture_json(&[
            &["capture", &format!("pcap:{}", f.display())],
            &[
                "--workers",
                workers,
                "--analyser",
                "http",
                "--json",
                "--quiet",
            ],
            &["--ted", "off", "--ring-slots", "65536"],
        ]);
        let ev = &v["totals"]["events"];
        assert_eq!(ev["http_request"], exchanges, "{v}");
        assert_eq!(ev["http_response"], exchanges, "{v}");
        assert_eq!(ev["http_pair"], exchanges, "{v}");
        assert_eq!(ev["parse_errors"], 0, "{v}");
        assert_eq!(ev["ooo_segments"], 0, "{v}");
        assert_eq!(v["totals"]["forwarded"], frames.len() as u64, "{v}");
    }
    // Filters (libpcap syntax): --drop removes connection 1, --filter keeps
    // only connection 2; priority packets of connection 3 are counted.
    let v = capture_json(&[
        &["capture", &format!("pcap:{}", f.display())],
        &["--drop", "tcp port 30001", "--json", "--quiet"],
        &[
            "--priority",
            "tcp port 30003 and tcp[tcpflags] & tcp-push != 0",
        ],
        &["--ted", "off", "--ring-slots", "65536"],
    ]);
    assert_eq!(v["totals"]["dropped"]["filter"], conv_len[1], "{v}");
    // SYN, SYN-ACK, 2 FINs of 40 connections (39 after the filter) + 1 PSH request of connection 3
    assert_eq!(v["workers"][0]["priority"], 39 * 4 + 1, "{v}");
    let v = capture_json(&[
        &["capture", &format!("pcap:{}", f.display())],
        &["--filter", "tcp port 30002", "--json", "--quiet"],
        &["--ted", "off", "--ring-slots", "65536"],
    ]);
    assert_eq!(v["totals"]["forwarded"], conv_len[2], "{v}");
    assert_eq!(
        v["totals"]["dropped"]["filter"],
        frames.len() as u64 - conv_len[2],
        "{v}"
    );

    // Shunting after the response headers (replayed at 1 kpps in batches
    // of 1, so that the worker's shunt requests come back before the
    // bodies: a shunt takes effect from the next input batch on): every
    // connection's first exchange is seen, later packets are dropped and
    // counted as shunt. At 5 kpps (0.11 s for the trace) a worker kept off
    // the CPU by other tests running beside this one saw its requests
    // arrive after the whole trace had passed (CI, 6 of >100 shunted);
    // 1 ms between packets leaves it 0.55 s.
    let v = capture_json(&[
        &["capture", &format!("pcap:{}?rate=1000", f.display())],
        &[
            "--analyser",
            "http",
            "--shunt-after-response",
            "--json",
            "--quiet",
        ],
        &["--ted", "off", "--batch", "1"],
    ]);
    let ev = &v["totals"]["events"];
    assert!(ev["http_pair"].as_u64().unwrap() >= 40, "{v}");
    assert_eq!(ev["shunt_requests"], 40, "{v}");
    // Every request applied by the forwarders, each a connection shunted.
    let shunted: u64 = v["workers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["shunted_flows"].as_u64().unwrap())
        .sum();
    assert_eq!(shunted, 40, "{v}");
    assert_eq!(v["totals"]["dropped"]["ring_full"], 0, "{v}");
    assert!(
        v["totals"]["dropped"]["shunt"].as_u64().unwrap() > 100,
        "{v}"
    );
}

#[test]
fn bad_arguments_are_one_line_errors() {
    let run = |args: &[&str]| {
        let out = Command::new(EXE).args(args).output().unwrap();
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).trim().to_string()
    };
    let e = run(&["capture", "mem:x", "--filter", "tcp prot 80"]);
    assert!(
        e.starts_with("linerate: error: --filter: filter 'tcp prot 80'"),
        "{e}"
    );
    assert_eq!(e.lines().count(), 1, "{e}");
    let e = run(&["capture", "pcap:/nonexistent.pcap", "--steer", "fanout"]);
    assert!(e.contains("needs an afpacket: port"), "{e}");
    let e = run(&["capture", "afpacket:x", "--steer", "queues"]);
    assert!(e.contains("needs an afxdp: port"), "{e}");
    let e = run(&["capture", "mem:x", "--shunt-after-response"]);
    assert!(e.contains("needs --analyser http"), "{e}");
}

/// A file read at top speed is read no faster than the workers take it:
/// a slow worker (20 µs per packet) with a 64-slot ring still gets every
/// packet, none is dropped for a full ring; the same file paced faster than
/// the worker (`rate=`) is a live feed and does drop.
#[test]
fn a_file_at_top_speed_is_not_dropped() {
    let dir = TempDir::new("offline");
    let f = dir.join("t.pcapng");
    let truth = last_json(&linerate_ok(&[
        "trace",
        "http",
        f.to_str().unwrap(),
        "--connections",
        "4",
        "--min-size",
        "20000",
        "--json",
    ]));
    let packets = truth["packets"].as_u64().unwrap();
    let slow = ["--cost-ns", "20000", "--ring-slots", "64", "--ted", "off"];
    let src = format!("pcap:{}", f.display());
    let v = capture_json(&[&["capture", &src, "--json", "--quiet"], &slow]);
    assert_eq!(v["totals"]["received"].as_u64().unwrap(), packets, "{v}");
    assert_eq!(v["totals"]["forwarded"].as_u64().unwrap(), packets, "{v}");
    assert_eq!(v["totals"]["dropped"]["ring_full"], 0, "{v}");
    let paced = format!("{src}?rate=500000");
    let v = capture_json(&[&["capture", &paced, "--json", "--quiet"], &slow]);
    assert!(
        v["totals"]["dropped"]["ring_full"].as_u64().unwrap() > 0,
        "{v}"
    );
}

// ------------------------------------------- earlier captures stay whole

/// `linerate trace http OUT` with a small trace (seed `seed`).
fn small_trace(out: &Path, seed: &str) {
    linerate_ok(&[
        "trace",
        "http",
        out.to_str().unwrap(),
        "--connections",
        "20",
        "--min-size",
        "3000",
        "--seed",
        seed,
    ]);
}

/// Every file of `dir` with its bytes and inode, by name.
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>, u64)> {
    use std::os::unix::fs::MetadataExt;
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let m = std::fs::symlink_metadata(e.path()).unwrap();
            let bytes = if m.file_type().is_symlink() {
                std::fs::read_link(e.path())
                    .unwrap()
                    .into_os_string()
                    .into_encoded_bytes()
            } else {
                std::fs::read(e.path()).unwrap()
            };
            (e.file_name().to_string_lossy().into_owned(), bytes, m.ino())
        })
        .collect();
    v.sort();
    v
}

/// `linerate ARGS` fails with exactly one line on stderr containing every
/// one of `want`; that line.
fn refused(args: &[&str], want: &[&str]) -> String {
    let out = linerate(args);
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(!out.status.success(), "{args:?} succeeded: {err}");
    assert_eq!(lines.len(), 1, "{args:?}: want one line: {err}");
    for w in want {
        assert!(lines[0].contains(w), "{args:?}: '{w}' not in: {err}");
    }
    lines[0].to_string()
}

/// Two captures into one directory: the second is refused before it
/// starts (one line naming a file of the first and --overwrite), whatever
/// its worker count or --merge, and every file of the first run is byte
/// for byte the same file (same inode) afterwards; --overwrite then
/// replaces them with the second run's capture.
#[test]
fn a_second_capture_into_one_directory_leaves_the_first_intact() {
    let tmp = TempDir::new("again");
    let (t1, t2) = (tmp.join("t1.pcapng"), tmp.join("t2.pcapng"));
    small_trace(&t1, "1");
    small_trace(&t2, "2");
    let dir = tmp.join("out");
    let d = dir.to_str().unwrap();
    let (s1, s2) = (
        format!("pcap:{}", t1.display()),
        format!("pcap:{}", t2.display()),
    );
    let v = capture_json(&[&[
        "capture",
        &s1,
        "--workers",
        "2",
        "--write",
        d,
        "--json",
        "-q",
    ]]);
    let first = snapshot(&dir);
    assert_eq!(first.len(), 2, "{first:?}");
    assert_eq!(files_of(&v).len(), 2, "{v}");
    for extra in [&["--workers", "2"][..], &["--workers", "1"], &["--merge"]] {
        let e = refused(
            &[&["capture", &s2, "--write", d, "--json", "-q"], extra].concat(),
            &["capture-w", "exists", "--overwrite"],
        );
        assert!(e.starts_with("linerate: error: capture: "), "{e}");
        assert_eq!(
            snapshot(&dir),
            first,
            "{extra:?}: the first run's files changed"
        );
    }
    // Asked for: replaced by the second run's capture.
    let v = capture_json(&[&[
        "capture",
        &s2,
        "--workers",
        "2",
        "--write",
        d,
        "--overwrite",
        "--json",
        "-q",
    ]]);
    let second = snapshot(&dir);
    assert_eq!(second.len(), 2);
    assert_ne!(second, first);
    let t2_records = pcap_ng_records(&t2);
    let written: u64 = files_of(&v).iter().map(|f| pcap_ng_records(f)).sum();
    assert_eq!(written, t2_records);
}

/// EPB records in a pcapng file linerate wrote (little endian).
fn pcap_ng_records(path: &Path) -> u64 {
    let b = std::fs::read(path).unwrap();
    let (mut off, mut n) = (0usize, 0u64);
    while off + 8 <= b.len() {
        let t = u32::from_le_bytes(b[off..off + 4].try_into().unwrap());
        let len = u32::from_le_bytes(b[off + 4..off + 8].try_into().unwrap()) as usize;
        assert!(
            len >= 12 && off + len <= b.len(),
            "{}: bad block",
            path.display()
        );
        n += u64::from(t == 6);
        off += len;
    }
    n
}

/// A symbolic link planted at an output name (a worker's file, the merged
/// file) is not followed, also with --overwrite: the run is refused and
/// the file it points to is unchanged.
#[test]
fn a_symlink_at_an_output_name_is_not_followed() {
    let tmp = TempDir::new("link");
    let t = tmp.join("t.pcapng");
    small_trace(&t, "3");
    let src = format!("pcap:{}", t.display());
    let victim = tmp.join("victim");
    std::fs::write(&victim, b"precious").unwrap();
    for (name, extra) in [
        ("capture-w0-0000.pcapng", &[][..]),
        ("capture-w1-0007.pcapng", &["--overwrite"][..]),
        ("capture.pcapng", &["--merge", "--overwrite"][..]),
    ] {
        let dir = tmp.join(&format!("out-{name}"));
        std::fs::create_dir(&dir).unwrap();
        std::os::unix::fs::symlink(&victim, dir.join(name)).unwrap();
        let before = snapshot(&dir);
        let d = dir.to_str().unwrap();
        refused(
            &[
                &["capture", &src, "--workers", "2", "--write", d, "-q"],
                extra,
            ]
            .concat(),
            &[name, "symbolic link; not followed"],
        );
        assert_eq!(snapshot(&dir), before, "{name}");
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious", "{name}");
    }
}

/// A pcap: input that does not exist (a typo) is one line, exit status 1,
/// and no file is made: not the input, not the capture's files.
#[test]
fn a_missing_pcap_input_is_a_one_line_error() {
    let tmp = TempDir::new("typo");
    let typo = tmp.join("typo.pcap");
    let src = format!("pcap:{}", typo.display());
    let dir = tmp.join("out");
    let d = dir.to_str().unwrap();
    for args in [
        &["capture", &src][..],
        &["capture", &src, "--write", d],
        &["count", &src],
    ] {
        let e = refused(args, &[&format!("{}: no such file", typo.display())]);
        assert_eq!(
            e,
            format!(
                "linerate: error: port '{src}': {}: no such file",
                typo.display()
            )
        );
        assert_eq!(linerate(args).status.code(), Some(1));
    }
    assert!(!typo.exists());
    assert!(!dir.exists() || std::fs::read_dir(&dir).unwrap().next().is_none());
}
