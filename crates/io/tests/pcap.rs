//! Tests of the `pcap:` backend: write/read round trips, files from other
//! tools (tshark, editcap, tcpdump: scripts/setup.sh installs them, the
//! tests fail without), all header variants, damaged files, pacing, loops
//! and the fuzz entry point.

use linerate_io::{open, Batch, OpenOptions, Pkt, Port, PortRole};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

mod common;
use common::release_elsewhere_is_refused;
use linerate_testkit::{require_tool, TempDir};

/// A temporary file path (in a private directory of its own), removed on
/// drop.
struct Tmp(PathBuf, #[allow(dead_code)] TempDir);
impl Tmp {
    fn new(ext: &str) -> Tmp {
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = TempDir::new("pcap");
        let p = dir.join(&format!("{}.{ext}", N.fetch_add(1, Ordering::Relaxed)));
        Tmp(p, dir)
    }
    fn s(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Ethernet frames with an experimental ethertype and pseudo-random payload.
fn frames(n: usize, seed: u64) -> Vec<Vec<u8>> {
    let mut r = Rng(seed | 1);
    (0..n)
        .map(|i| {
            let len = 60 + (r.next() % 1455) as usize;
            let mut f = vec![0u8; len];
            f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
            f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
            f[12..14].copy_from_slice(&[0x88, 0xb5]);
            f[14..22].copy_from_slice(&(i as u64).to_be_bytes());
            for b in &mut f[22..] {
                *b = r.next() as u8;
            }
            f
        })
        .collect()
}

fn write_with_port(uri: &str, fr: &[Vec<u8>], ts: &[u64]) {
    let mut p = open(uri, &OpenOptions::default()).unwrap();
    assert!(p.rx.at_end(), "RX of a write port is at its end");
    let mut bufs: Vec<Vec<u8>> = fr.to_vec();
    let pkts: Vec<Pkt> = bufs
        .iter_mut()
        .zip(ts)
        // SAFETY: one test buffer per descriptor; it outlives the descriptor and nothing else touches it meanwhile.
        .map(|(b, &t)| unsafe { Pkt::from_raw(b.as_mut_ptr(), b.len() as u32, 0, t) })
        .collect();
    for chunk in pkts.chunks(64) {
        assert_eq!(p.tx.send(chunk).unwrap(), chunk.len());
        p.tx.flush().unwrap();
    }
    assert_eq!(
        p.tx.kernel_stats().get("written_packets"),
        Some(fr.len() as u64)
    );
}

/// Read everything a port gives: (bytes, ts) per packet.
fn read_all(p: &mut Port) -> Vec<(Vec<u8>, u64)> {
    let mut out = Vec::new();
    let mut b = Batch::new(64);
    let t0 = Instant::now();
    while !p.rx.at_end() {
        p.rx.recv(&mut b).unwrap();
        for k in b.pkts() {
            out.push((k.bytes().to_vec(), k.ts_ns()));
        }
        p.rx.release(&mut b).unwrap();
        assert!(t0.elapsed() < Duration::from_secs(60), "read never ends");
    }
    out
}

fn read_file(path: &str) -> Vec<(Vec<u8>, u64)> {
    let mut p = open(&format!("pcap:{path}"), &OpenOptions::default()).unwrap();
    assert_eq!(p.info.clock, "file");
    read_all(&mut p)
}

#[test]
fn round_trip_pcapng_and_pcap() {
    let fr = frames(1000, 7);
    let ts: Vec<u64> = (0..1000u64)
        .map(|i| 1_700_000_000_123_456_789 + i * 1_234_567)
        .collect();
    for fmt in ["", "?format=pcap"] {
        let t = Tmp::new("cap");
        write_with_port(&format!("pcap:{}{fmt}", t.s()), &fr, &ts);
        let got = read_file(t.s());
        assert_eq!(got.len(), fr.len(), "format '{fmt}'");
        for (i, (b, tsn)) in got.iter().enumerate() {
            assert_eq!(b, &fr[i], "bytes of packet {i} ({fmt})");
            assert_eq!(*tsn, ts[i], "timestamp of packet {i} ({fmt})");
        }
        // The file header says what was asked for.
        let head = std::fs::read(&t.0).unwrap();
        if fmt.is_empty() {
            assert_eq!(&head[0..4], &[0x0a, 0x0d, 0x0d, 0x0a]);
        } else {
            assert_eq!(&head[0..4], &0xa1b2_3c4du32.to_le_bytes());
        }
        check_tshark(t.s(), &fr);
    }
}

#[test]
fn zero_timestamp_becomes_realtime() {
    let fr = frames(3, 1);
    let t = Tmp::new("pcapng");
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    write_with_port(&format!("pcap:{}", t.s()), &fr, &[0, 0, 5]);
    let got = read_file(t.s());
    assert!(got[0].1 >= before && got[0].1 < before + 10_000_000_000);
    assert_eq!(got[0].1, got[1].1, "one clock read per batch");
    assert_eq!(got[2].1, 5);
}

/// tshark reads the file with no error, the same number of frames, same bytes.
fn check_tshark(path: &str, fr: &[Vec<u8>]) {
    let o = Command::new(require_tool("tshark"))
        .args(["-r", path, "-T", "fields", "-e", "frame.len"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "tshark failed: {err}");
    assert!(
        !err.to_lowercase().contains("error") && !err.contains("appears to"),
        "tshark: {err}"
    );
    let lens: Vec<usize> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect();
    assert_eq!(lens.len(), fr.len());
    for (i, l) in lens.iter().enumerate() {
        assert_eq!(*l, fr[i].len(), "tshark frame {i} length");
    }
    // Bytes: parse `tshark -x` hex dumps.
    let o = Command::new("tshark")
        .args(["-r", path, "-x"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    let mut dumps: Vec<Vec<u8>> = vec![Vec::new()];
    for line in text.lines() {
        if line.trim().is_empty() {
            if !dumps.last().unwrap().is_empty() {
                dumps.push(Vec::new());
            }
            continue;
        }
        if line.len() < 6 || !line[..4].chars().all(|c| c.is_ascii_hexdigit()) {
            continue;
        }
        let hex = &line[6..line.len().min(6 + 48)];
        for tok in hex.split_whitespace() {
            if tok.len() == 2 {
                if let Ok(v) = u8::from_str_radix(tok, 16) {
                    dumps.last_mut().unwrap().push(v);
                }
            }
        }
    }
    if dumps.last().unwrap().is_empty() {
        dumps.pop();
    }
    assert_eq!(dumps.len(), fr.len(), "tshark -x frame count");
    for (i, d) in dumps.iter().enumerate() {
        assert_eq!(d, &fr[i], "tshark bytes of frame {i}");
    }
}

// ---------------------------------------------------------------------------
// Hand-made files.

fn pcap_file(magic: u32, be: bool, linktype: u32, recs: &[(u32, u32, &[u8])]) -> Vec<u8> {
    let w32 = |v: &mut Vec<u8>, x: u32| {
        if be {
            v.extend_from_slice(&x.to_be_bytes())
        } else {
            v.extend_from_slice(&x.to_le_bytes())
        }
    };
    let w16 = |v: &mut Vec<u8>, x: u16| {
        if be {
            v.extend_from_slice(&x.to_be_bytes())
        } else {
            v.extend_from_slice(&x.to_le_bytes())
        }
    };
    let mut v = Vec::new();
    w32(&mut v, magic);
    w16(&mut v, 2);
    w16(&mut v, 4);
    w32(&mut v, 0);
    w32(&mut v, 0);
    w32(&mut v, 65535);
    w32(&mut v, linktype);
    for (s, f, d) in recs {
        w32(&mut v, *s);
        w32(&mut v, *f);
        w32(&mut v, d.len() as u32);
        w32(&mut v, d.len() as u32);
        v.extend_from_slice(d);
    }
    v
}

struct Ng {
    v: Vec<u8>,
    be: bool,
}
impl Ng {
    fn new(be: bool) -> Ng {
        let mut n = Ng { v: Vec::new(), be };
        n.block(0x0A0D0D0A, &{
            let mut b = Vec::new();
            b.extend_from_slice(&n.u32b(0x1A2B3C4D));
            b.extend_from_slice(&n.u16b(1));
            b.extend_from_slice(&n.u16b(0));
            b.extend_from_slice(&[0xff; 8]);
            b
        });
        n
    }
    fn u32b(&self, x: u32) -> [u8; 4] {
        if self.be {
            x.to_be_bytes()
        } else {
            x.to_le_bytes()
        }
    }
    fn u16b(&self, x: u16) -> [u8; 2] {
        if self.be {
            x.to_be_bytes()
        } else {
            x.to_le_bytes()
        }
    }
    fn block(&mut self, t: u32, body: &[u8]) {
        let mut body = body.to_vec();
        while !body.len().is_multiple_of(4) {
            body.push(0);
        }
        let len = 12 + body.len() as u32;
        let (a, b) = (self.u32b(t), self.u32b(len));
        self.v.extend_from_slice(&a);
        self.v.extend_from_slice(&b);
        self.v.extend_from_slice(&body);
        self.v.extend_from_slice(&b);
    }
    fn idb(&mut self, linktype: u16, tsresol: Option<u8>) {
        let mut b = Vec::new();
        b.extend_from_slice(&self.u16b(linktype));
        b.extend_from_slice(&self.u16b(0));
        b.extend_from_slice(&self.u32b(0));
        if let Some(r) = tsresol {
            b.extend_from_slice(&self.u16b(9));
            b.extend_from_slice(&self.u16b(1));
            b.extend_from_slice(&[r, 0, 0, 0]);
            b.extend_from_slice(&[0, 0, 0, 0]);
        }
        self.block(1, &b);
    }
    fn epb(&mut self, ifid: u32, ts: u64, data: &[u8]) {
        let mut b = Vec::new();
        b.extend_from_slice(&self.u32b(ifid));
        b.extend_from_slice(&self.u32b((ts >> 32) as u32));
        b.extend_from_slice(&self.u32b(ts as u32));
        b.extend_from_slice(&self.u32b(data.len() as u32));
        b.extend_from_slice(&self.u32b(data.len() as u32));
        b.extend_from_slice(data);
        self.block(6, &b);
    }
    fn spb(&mut self, data: &[u8]) {
        let mut b = Vec::new();
        b.extend_from_slice(&self.u32b(data.len() as u32));
        b.extend_from_slice(data);
        self.block(3, &b);
    }
}

fn put(bytes: &[u8]) -> Tmp {
    let t = Tmp::new("cap");
    std::fs::write(&t.0, bytes).unwrap();
    t
}

fn ts_of(path: &str) -> Vec<u64> {
    read_file(path).into_iter().map(|(_, t)| t).collect()
}

#[test]
fn all_header_variants() {
    let fr = frames(3, 3);
    let recs: Vec<(u32, u32, &[u8])> = vec![
        (100, 1, &fr[0][..]),
        (100, 999_999, &fr[1][..]),
        (101, 0, &fr[2][..]),
    ];
    // Microsecond, little- and big-endian.
    for be in [false, true] {
        let t = put(&pcap_file(0xa1b2c3d4, be, 1, &recs));
        let got = read_file(t.s());
        assert_eq!(got.len(), 3);
        assert_eq!(got[1].0, fr[1]);
        assert_eq!(
            got.iter().map(|x| x.1).collect::<Vec<_>>(),
            vec![100_000_001_000, 100_999_999_000, 101_000_000_000],
            "us pcap be={be}"
        );
    }
    // Nanosecond, both byte orders.
    for be in [false, true] {
        let t = put(&pcap_file(0xa1b23c4d, be, 1, &recs));
        assert_eq!(
            ts_of(t.s()),
            vec![100_000_000_001, 100_000_999_999, 101_000_000_000]
        );
    }
    // pcapng, tsresol 6 (the default when absent) and 9, both byte orders,
    // two interfaces with different resolutions, and an SPB.
    for be in [false, true] {
        let mut n = Ng::new(be);
        n.idb(1, None); // if 0: microseconds
        n.idb(1, Some(9)); // if 1: nanoseconds
        n.idb(1, Some(0x80 | 10)); // if 2: 2^-10 s
        n.epb(0, 1_500_000, &fr[0]);
        n.epb(1, 2_000_000_007, &fr[1]);
        n.epb(2, 3 * 1024 + 512, &fr[2]);
        n.spb(&fr[0]);
        let t = put(&n.v);
        let got = read_file(t.s());
        assert_eq!(got.len(), 4, "be={be}");
        assert_eq!(got[0], (fr[0].clone(), 1_500_000_000));
        assert_eq!(got[1], (fr[1].clone(), 2_000_000_007));
        assert_eq!(got[2], (fr[2].clone(), 3_500_000_000));
        assert_eq!(got[3].0, fr[0], "SPB bytes");
        assert_eq!(got[3].1, 3_500_000_000, "SPB takes the previous time");
    }
    // Explicit if_tsresol=6.
    let mut n = Ng::new(false);
    n.idb(1, Some(6));
    n.epb(0, 42, &fr[0]);
    let t = put(&n.v);
    assert_eq!(ts_of(t.s()), vec![42_000]);
}

#[test]
fn files_from_other_tools() {
    let fr = frames(50, 11);
    let recs: Vec<(u32, u32, &[u8])> = fr
        .iter()
        .enumerate()
        .map(|(i, f)| (1000 + i as u32, 123_456, &f[..]))
        .collect();
    let src = put(&pcap_file(0xa1b2c3d4, false, 1, &recs));
    let expect: Vec<(Vec<u8>, u64)> = fr
        .iter()
        .enumerate()
        .map(|(i, f)| (f.clone(), (1000 + i as u64) * 1_000_000_000 + 123_456_000))
        .collect();
    // editcap's pcapng (if_tsresol 6 by default) and nanosecond pcap.
    let editcap = require_tool("editcap");
    for (fmt, ext) in [("pcapng", "pcapng"), ("nsecpcap", "pcap"), ("pcap", "pcap")] {
        let out = Tmp::new(ext);
        let st = Command::new(&editcap)
            .args(["-F", fmt, src.s(), out.s()])
            .status()
            .unwrap();
        assert!(st.success());
        assert_eq!(read_file(out.s()), expect, "editcap -F {fmt}");
    }
    // -Z root: tcpdump keeps root, so it can write into our private directory.
    let out = Tmp::new("pcap");
    let o = Command::new(require_tool("tcpdump"))
        .args(["-Z", "root", "-r", src.s(), "-w", out.s()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(read_file(out.s()), expect, "tcpdump -w");
}

fn open_err(path: &str) -> String {
    let e = open(&format!("pcap:{path}"), &OpenOptions::default())
        .err()
        .expect("must fail")
        .to_string();
    assert!(!e.contains('\n'), "one line: {e}");
    assert!(e.contains(path), "names the file: {e}");
    e
}

#[test]
fn damaged_files() {
    let fr = frames(3, 5);
    // Random bytes.
    let mut r = Rng(99);
    let junk: Vec<u8> = (0..5000).map(|_| r.next() as u8).collect();
    let t = put(&junk);
    assert!(open_err(t.s()).contains("not a pcap or pcapng"));
    // Empty.
    let t = put(&[]);
    assert!(open_err(t.s()).contains("empty"));
    // Truncated headers.
    let full = pcap_file(0xa1b2c3d4, false, 1, &[(1, 2, &fr[0][..])]);
    let t = put(&full[..10]);
    assert!(open_err(t.s()).contains("truncated file header"));
    let ng = {
        let mut n = Ng::new(false);
        n.idb(1, None);
        n.epb(0, 1, &fr[0]);
        n.v
    };
    let t = put(&ng[..20]);
    assert!(open_err(t.s()).contains("truncated"));
    // Wrong link type, pcap and pcapng.
    let t = put(&pcap_file(0xa1b2c3d4, false, 113, &[]));
    let e = open_err(t.s());
    assert!(e.contains("link type") && e.contains("113"), "{e}");
    let mut n = Ng::new(false);
    n.idb(101, None);
    let t = put(&n.v);
    let e = open_err(t.s());
    assert!(e.contains("link type") && e.contains("101"), "{e}");
    // Truncated last record: counted, the rest is read.
    let two = pcap_file(
        0xa1b2c3d4,
        false,
        1,
        &[(1, 2, &fr[0][..]), (3, 4, &fr[1][..])],
    );
    let t = put(&two[..two.len() - 10]);
    let mut p = open(&format!("pcap:{}", t.s()), &OpenOptions::default()).unwrap();
    let got = read_all(&mut p);
    assert_eq!(got.len(), 1);
    assert_eq!(p.rx.kernel_stats().get("truncated"), Some(1));
    let t = put(&ng[..ng.len() - 3]);
    let mut p = open(&format!("pcap:{}", t.s()), &OpenOptions::default()).unwrap();
    assert_eq!(read_all(&mut p).len(), 0);
    assert_eq!(p.rx.kernel_stats().get("truncated"), Some(1));
    // Packet larger than the frame: counted and skipped.
    let big = vec![0x55u8; 3000];
    let t = put(&pcap_file(
        0xa1b2c3d4,
        false,
        1,
        &[(1, 0, &fr[0][..]), (2, 0, &big[..]), (3, 0, &fr[1][..])],
    ));
    let mut p = open(&format!("pcap:{}", t.s()), &OpenOptions::default()).unwrap();
    let got = read_all(&mut p);
    assert_eq!(got.len(), 2);
    assert_eq!(got[1].0, fr[1]);
    assert_eq!(p.rx.kernel_stats().get("too_big"), Some(1));
    // EPB naming an interface that does not exist: malformed, skipped.
    let mut n = Ng::new(false);
    n.idb(1, None);
    n.epb(5, 1, &fr[0]);
    n.epb(0, 1, &fr[1]);
    let t = put(&n.v);
    let mut p = open(&format!("pcap:{}", t.s()), &OpenOptions::default()).unwrap();
    assert_eq!(read_all(&mut p).len(), 1);
    assert_eq!(p.rx.kernel_stats().get("malformed_records"), Some(1));
    // Garbage in the middle of a pcapng: one-line error from recv.
    let mut v = ng.clone();
    v.extend_from_slice(&[6, 0, 0, 0, 7, 0, 0, 0, 1, 2, 3, 4]);
    let t = put(&v);
    let mut p = open(&format!("pcap:{}", t.s()), &OpenOptions::default()).unwrap();
    let mut b = Batch::new(64);
    let e = p.rx.recv(&mut b).err().unwrap().to_string();
    assert!(e.contains("corrupt pcapng block") && e.contains(t.s()) && !e.contains('\n'));
    // A directory, a missing file in read mode.
    let e = open(
        &format!("pcap:{}?mode=read", std::env::temp_dir().display()),
        &OpenOptions::default(),
    )
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("directory"), "{e}");
    let e = open(
        "pcap:/nonexistent/x.pcap?mode=read",
        &OpenOptions::default(),
    )
    .err()
    .unwrap()
    .to_string();
    assert_eq!(
        e,
        "port 'pcap:/nonexistent/x.pcap?mode=read': /nonexistent/x.pcap: no such file"
    );
}

#[test]
fn modes_and_parameters() {
    let fr = frames(5, 9);
    let t = Tmp::new("pcapng");
    write_with_port(&format!("pcap:{}", t.s()), &fr, &[1, 2, 3, 4, 5]);
    // Exists: read mode; TX takes nothing.
    let mut p = open(&format!("pcap:{}", t.s()), &OpenOptions::default()).unwrap();
    let mut b = fr[0].clone();
    // SAFETY: one test buffer per descriptor; it outlives the descriptor and nothing else touches it meanwhile.
    let pk = unsafe { Pkt::from_raw(b.as_mut_ptr(), b.len() as u32, 0, 0) };
    assert_eq!(p.tx.send(&[pk]).unwrap(), 0);
    assert_eq!(read_all(&mut p).len(), 5);
    // mode=write replaces the file (the explicit opt-in).
    {
        let _w = open(
            &format!("pcap:{}?mode=write", t.s()),
            &OpenOptions::default(),
        )
        .unwrap();
    }
    assert_eq!(read_file(t.s()).len(), 0, "replaced by an empty capture");
    // Bad parameters.
    for bad in [
        "?speed=0",
        "?speed=fast",
        "?rate=-1",
        "?speed=2&rate=5",
        "?loop=x",
        "?format=pcap",
        "?mode=sideways",
        "?bogus=1",
    ] {
        let u = format!("pcap:{}{bad}", t.s());
        let e = open(&u, &OpenOptions::default()).err().unwrap().to_string();
        assert!(
            e.starts_with(&format!("port '{u}'")) && !e.contains('\n'),
            "{e}"
        );
    }
    let t2 = Tmp::new("pcap");
    let e = open(&format!("pcap:{}?loop=2", t2.s()), &OpenOptions::default())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("replaying"), "{e}");
}

fn timed_replay(uri: &str) -> (usize, f64) {
    let mut p = open(uri, &OpenOptions::default()).unwrap();
    let t0 = Instant::now();
    let mut n = 0;
    let mut b = Batch::new(64);
    while !p.rx.at_end() {
        n += p.rx.recv(&mut b).unwrap();
        p.rx.release(&mut b).unwrap();
        if b.is_empty() {
            p.rx.wait(1).unwrap();
        }
        assert!(t0.elapsed().as_secs() < 30);
    }
    (n, t0.elapsed().as_secs_f64())
}

#[test]
fn pacing_and_loops() {
    let fr = frames(1000, 13);
    let ts: Vec<u64> = (0..1000u64)
        .map(|i| 5_000_000_000 + i * 1_000_000)
        .collect();
    let t = Tmp::new("pcapng");
    write_with_port(&format!("pcap:{}", t.s()), &fr, &ts);
    let (n, dt) = timed_replay(&format!("pcap:{}?speed=original", t.s()));
    assert_eq!(n, 1000);
    assert!(
        (0.9..3.0).contains(&dt),
        "1000 packets 1 ms apart took {dt} s"
    );
    let (n, dt) = timed_replay(&format!("pcap:{}?speed=10", t.s()));
    assert_eq!(n, 1000);
    assert!((0.09..1.0).contains(&dt), "speed=10 took {dt} s");
    let (n, dt) = timed_replay(&format!("pcap:{}?rate=5000", t.s()));
    assert_eq!(n, 1000);
    assert!((0.18..1.5).contains(&dt), "rate=5000 took {dt} s");
    let (n, dt) = timed_replay(&format!("pcap:{}", t.s()));
    assert_eq!(n, 1000);
    assert!(dt < 0.5, "top speed took {dt} s");
    // Loops: 3 passes give 3x the packets in order; speed applies across passes.
    let mut p = open(&format!("pcap:{}?loop=3", t.s()), &OpenOptions::default()).unwrap();
    let got = read_all(&mut p);
    assert_eq!(got.len(), 3000);
    for (i, (b, tsn)) in got.iter().enumerate() {
        assert_eq!(b, &fr[i % 1000]);
        assert_eq!(*tsn, ts[i % 1000]);
    }
    assert_eq!(p.rx.kernel_stats().get("passes"), Some(3));
    let (n, dt) = timed_replay(&format!("pcap:{}?loop=2&speed=10", t.s()));
    assert_eq!(n, 2000);
    assert!(
        (0.18..2.0).contains(&dt),
        "2 passes at speed=10 took {dt} s"
    );
    // loop=0 keeps going.
    let mut p = open(&format!("pcap:{}?loop=0", t.s()), &OpenOptions::default()).unwrap();
    let mut b = Batch::new(256);
    let mut n = 0;
    for _ in 0..100 {
        n += p.rx.recv(&mut b).unwrap();
        p.rx.release(&mut b).unwrap();
    }
    assert_eq!(n, 25_600);
    assert!(!p.rx.at_end());
    // An empty capture with loop=0 ends instead of spinning.
    let e = Tmp::new("pcapng");
    write_with_port(&format!("pcap:{}", e.s()), &[], &[]);
    let mut p = open(&format!("pcap:{}?loop=0", e.s()), &OpenOptions::default()).unwrap();
    assert_eq!(read_all(&mut p).len(), 0);
}

#[test]
fn large_file_streams_in_chunks() {
    // ~15 MiB: bigger than the 4 MiB read buffer, so the file is streamed.
    let fr = frames(256, 17);
    let n = 20_000usize;
    let t = Tmp::new("pcapng");
    {
        let mut p = open(&format!("pcap:{}", t.s()), &OpenOptions::default()).unwrap();
        let mut bufs: Vec<Vec<u8>> = fr.clone();
        let mut pkts: Vec<Pkt> = bufs
            .iter_mut()
            // SAFETY: one test buffer per descriptor; it outlives the descriptor and nothing else touches it meanwhile.
            .map(|b| unsafe { Pkt::from_raw(b.as_mut_ptr(), b.len() as u32, 0, 0) })
            .collect();
        let mut sent = 0;
        while sent < n {
            for (j, p) in pkts.iter_mut().enumerate() {
                p.set_ts_ns((sent + j + 1) as u64);
            }
            let k = (n - sent).min(256);
            p.tx.send(&pkts[..k]).unwrap();
            sent += k;
        }
    }
    let len = std::fs::metadata(&t.0).unwrap().len();
    assert!(len > 3 * (4 << 20), "file is {len} bytes");
    for loops in [1usize, 2] {
        let mut p = open(
            &format!("pcap:{}?loop={loops}", t.s()),
            &OpenOptions::default(),
        )
        .unwrap();
        let got = read_all(&mut p);
        assert_eq!(got.len(), n * loops);
        for (i, (b, tsn)) in got.iter().enumerate() {
            assert_eq!(b, &fr[(i % n) % 256], "packet {i}");
            assert_eq!(*tsn, (i % n) as u64 + 1);
        }
    }
    // A small frame size makes big packets too big, counted while streaming.
    let opts = OpenOptions {
        frame_size: 1024,
        ..OpenOptions::default()
    };
    let mut p = open(&format!("pcap:{}", t.s()), &opts).unwrap();
    let got = read_all(&mut p);
    let ks = p.rx.kernel_stats();
    let small = fr.iter().filter(|f| f.len() <= 1024).count();
    assert_eq!(
        got.len(),
        n / 256 * small + fr[..n % 256].iter().filter(|f| f.len() <= 1024).count()
    );
    assert_eq!(ks.get("too_big").unwrap() as usize + got.len(), n);
}

#[test]
fn frames_stay_valid_until_release() {
    // Hold several batches before releasing: each keeps its bytes.
    let fr = frames(600, 21);
    let ts: Vec<u64> = (1..=600).collect();
    let t = Tmp::new("pcapng");
    write_with_port(&format!("pcap:{}", t.s()), &fr, &ts);
    let mut p = open(&format!("pcap:{}?loop=2", t.s()), &OpenOptions::default()).unwrap();
    let mut held = Vec::new();
    let mut i = 0;
    for _ in 0..8 {
        let mut b = Batch::new(64);
        p.rx.recv(&mut b).unwrap();
        for mut k in b.iter_mut() {
            k.bytes_mut()[0] ^= 0xff; // in-place edits stay in our frames
        }
        held.push(b);
    }
    for b in &held {
        for k in b.pkts() {
            let mut e = fr[i % 600].clone();
            e[0] ^= 0xff;
            assert_eq!(k.bytes(), &e[..]);
            i += 1;
        }
    }
    for mut b in held {
        p.rx.release(&mut b).unwrap();
    }
    let rest = read_all(&mut p);
    assert_eq!(rest.len(), 1200 - i);
    assert_eq!(
        rest[0].0,
        fr[i % 600],
        "edits did not leak into the file data"
    );
}

/// Valid files of every kind the reader takes (pcap both byte orders,
/// pcapng with two interfaces, EPBs and an SPB, both byte orders) and the
/// packets each holds.
fn fuzz_seeds() -> Vec<(Vec<u8>, usize)> {
    let fr = frames(8, 23);
    let recs: Vec<(u32, u32, &[u8])> = fr.iter().map(|f| (1, 2, &f[..])).collect();
    let mut seeds = vec![
        (pcap_file(0xa1b2c3d4, false, 1, &recs), 8),
        (pcap_file(0xa1b23c4d, true, 1, &recs), 8),
    ];
    for be in [false, true] {
        let mut n = Ng::new(be);
        n.idb(1, Some(9));
        n.idb(1, None);
        for (i, f) in fr.iter().enumerate() {
            n.epb((i % 2) as u32, i as u64, f);
        }
        n.spb(&fr[0]);
        seeds.push((n.v, 9));
    }
    seeds
}

/// A seed damaged one of five ways (bytes flipped, cut short, a length
/// word overwritten, random bytes, bytes inserted).
fn mutate(r: &mut Rng, seed: &[u8]) -> Vec<u8> {
    let mut d = seed.to_vec();
    match r.next() % 5 {
        0 => {
            // Flip a few bytes.
            for _ in 0..(1 + r.next() % 8) {
                let i = (r.next() as usize) % d.len();
                d[i] = r.next() as u8;
            }
        }
        1 => d.truncate((r.next() as usize) % d.len()),
        2 => {
            // Corrupt a length field: 32-bit word at a random aligned offset.
            let i = ((r.next() as usize) % (d.len() / 4)) * 4;
            let v = r.next() as u32;
            d[i..i + 4].copy_from_slice(&v.to_le_bytes());
        }
        3 => {
            let n = (r.next() % 4096) as usize;
            d = (0..n).map(|_| r.next() as u8).collect();
        }
        _ => {
            let i = (r.next() as usize) % d.len();
            let extra: Vec<u8> = (0..(r.next() % 64)).map(|_| r.next() as u8).collect();
            d.splice(i..i, extra);
        }
    }
    d
}

#[test]
fn fuzz_read_never_panics() {
    use linerate_io::pcap::fuzz_read;
    let seeds = fuzz_seeds();
    for (s, e) in &seeds {
        assert_eq!(fuzz_read(s), *e, "seeds read whole");
    }
    let mut r = Rng(0xfeed);
    for it in 0..4000 {
        fuzz_read(&mutate(&mut r, &seeds[it % seeds.len()].0));
    }
}

/// The chunked path's fuzz body (its invariants are asserted inside):
/// the seeds with a buffer that holds the whole file give every packet
/// on every pass; with small buffers and damaged files, no panic and no
/// broken invariant.
#[test]
fn fuzz_chunked_holds_its_invariants() {
    use linerate_io::pcap::fuzz_chunked;
    let seeds = fuzz_seeds();
    for (s, e) in &seeds {
        // Buffer 32 + 8191 bytes (> every seed), packets up to 2104, 4
        // passes, batches of 16.
        let mut d = vec![0xff, 0x1f, 0xff, 0xff];
        d.extend_from_slice(s);
        assert!(s.len() <= 8223, "{}", s.len());
        assert_eq!(fuzz_chunked(&d), e * 4, "seeds read whole, 4 passes");
    }
    let mut r = Rng(0xbeef);
    for it in 0..4000 {
        let mut d = (r.next() as u32).to_le_bytes().to_vec();
        d.extend(mutate(&mut r, &seeds[it % seeds.len()].0));
        fuzz_chunked(&d);
    }
    // The committed corpus, inputs the fuzzer found included.
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/pcap_chunked");
    for e in std::fs::read_dir(corpus).unwrap() {
        fuzz_chunked(&std::fs::read(e.unwrap().path()).unwrap());
    }
}

#[test]
fn throughput_print() {
    // Information only: write and replay rates at top speed.
    let fr = frames(256, 31);
    let n = if cfg!(debug_assertions) {
        19_968 // a multiple of the 64-packet batches
    } else {
        1_000_000
    };
    let t = Tmp::new("pcapng");
    let t0 = Instant::now();
    {
        let mut p = open(&format!("pcap:{}", t.s()), &OpenOptions::default()).unwrap();
        let mut bufs: Vec<Vec<u8>> = fr.iter().map(|f| f[..64].to_vec()).collect();
        let pkts: Vec<Pkt> = bufs
            .iter_mut()
            // SAFETY: one test buffer per descriptor; it outlives the descriptor and nothing else touches it meanwhile.
            .map(|b| unsafe { Pkt::from_raw(b.as_mut_ptr(), 64, 0, 0) })
            .collect();
        let mut sent = 0;
        while sent < n {
            sent += p.tx.send(&pkts[..64]).unwrap();
            p.tx.flush().unwrap();
        }
    }
    let dt = t0.elapsed().as_secs_f64();
    println!(
        "pcap write, 64 B: {n} packets in {dt:.3} s = {:.2} Mpps",
        n as f64 / dt / 1e6
    );
    let (got, dt) = timed_replay(&format!("pcap:{}", t.s()));
    assert_eq!(got, n);
    println!(
        "pcap replay, 64 B, top speed: {got} packets in {dt:.3} s = {:.2} Mpps",
        got as f64 / dt / 1e6
    );
}

/// What the caller does with a port decides what `mode=auto` may do: an
/// input never creates its file, an output never reads or replaces an
/// existing one; no mode writes through a symbolic link.
#[test]
fn an_input_is_never_created_and_an_output_never_replaces() {
    let role = |role| OpenOptions {
        role,
        ..OpenOptions::default()
    };
    // The one-line error of opening `uri` in `r`.
    let err = |uri: &str, r| {
        let e = open(uri, &role(r)).err().unwrap().to_string();
        assert!(!e.contains('\n'), "{e}");
        e
    };
    let dir = TempDir::new("pcap-role");
    // An input with a typo: one line, and no file made.
    let missing = dir.join("typo.pcapng");
    let uri = format!("pcap:{}", missing.display());
    let e = err(&uri, PortRole::RxOnly);
    assert_eq!(
        e,
        format!("port '{uri}': {}: no such file", missing.display())
    );
    assert!(!missing.exists());
    let e = err(&format!("{uri}?mode=write"), PortRole::RxOnly);
    assert!(e.contains("only received from"), "{e}");
    assert!(!missing.exists());
    // An output in mode=auto creates a missing file...
    let out = dir.join("out.pcapng");
    let fr = frames(3, 5);
    {
        let mut p = open(&format!("pcap:{}", out.display()), &role(PortRole::TxOnly)).unwrap();
        let mut bufs = fr.clone();
        let pkts: Vec<Pkt> = bufs
            .iter_mut()
            // SAFETY: one test buffer per descriptor; it outlives the descriptor.
            .map(|b| unsafe { Pkt::from_raw(b.as_mut_ptr(), b.len() as u32, 0, 1) })
            .collect();
        assert_eq!(p.tx.send(&pkts).unwrap(), 3);
    }
    let before = std::fs::read(&out).unwrap();
    // ...and refuses it the next time, unless mode=write.
    let e = err(&format!("pcap:{}", out.display()), PortRole::TxOnly);
    assert!(e.contains("exists; not overwritten (mode=write"), "{e}");
    let e = err(
        &format!("pcap:{}?mode=read", out.display()),
        PortRole::TxOnly,
    );
    assert!(e.contains("only sent to"), "{e}");
    assert_eq!(std::fs::read(&out).unwrap(), before);
    // An existing file is an input for every role but TxOnly.
    for r in [PortRole::Both, PortRole::RxOnly] {
        let mut p = open(&format!("pcap:{}", out.display()), &role(r)).unwrap();
        assert_eq!(read_all(&mut p).len(), 3);
    }
    // A symlink planted at an output name is not followed, even by mode=write.
    let victim = dir.join("victim");
    std::fs::write(&victim, b"precious").unwrap();
    let link = dir.join("link.pcapng");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    for q in ["", "?mode=write"] {
        for r in [PortRole::Both, PortRole::TxOnly] {
            let u = format!("pcap:{}{q}", link.display());
            // mode=auto reads through the link (reading destroys nothing);
            // the victim is no capture file, so that fails too: one line.
            err(&u, r);
        }
    }
    let e = err(
        &format!("pcap:{}?mode=write", link.display()),
        PortRole::Both,
    );
    assert!(e.contains("symbolic link; not followed"), "{e}");
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    // A dangling link: mode=auto would write, and refuses to.
    let dangling = dir.join("dangling.pcapng");
    std::os::unix::fs::symlink(dir.join("through"), &dangling).unwrap();
    let e = err(&format!("pcap:{}", dangling.display()), PortRole::Both);
    assert!(e.contains("symbolic link; not followed"), "{e}");
    assert!(!dir.join("through").exists());
}

/// A batch of one pcap port released into another (or into a port being
/// written, whose RX lends nothing) is refused and changes nothing; its
/// own port takes it back, and hands the frames out again.
#[test]
fn a_batch_goes_back_only_to_its_own_port() {
    let fr = frames(4, 3);
    let t = Tmp::new("pcapng");
    write_with_port(&format!("pcap:{}", t.s()), &fr, &[1, 2, 3, 4]);
    let uri = format!("pcap:{}?loop=0", t.s());
    let opts = OpenOptions::default();
    let (mut a, mut b) = (open(&uri, &opts).unwrap(), open(&uri, &opts).unwrap());
    let t2 = Tmp::new("pcapng");
    let mut w = open(&format!("pcap:{}", t2.s()), &opts).unwrap();
    let mut batch = Batch::new(4);
    // More rounds than the port has frames (512): each time every frame
    // came back to a's own free stack.
    for round in 0..300 {
        assert_eq!(a.rx.recv(&mut batch).unwrap(), 4, "round {round}");
        let bytes: Vec<&[u8]> = batch.pkts().iter().map(|p| p.bytes()).collect();
        assert_eq!(bytes, fr.iter().map(|f| &f[..]).collect::<Vec<_>>());
        let other = if round % 2 == 0 { &mut b } else { &mut w };
        release_elsewhere_is_refused(a.rx.as_mut(), other.rx.as_mut(), &mut batch);
    }
}
