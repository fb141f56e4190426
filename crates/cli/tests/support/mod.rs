//! What the CLI end-to-end tests (`mod support;` in each) add to the
//! workspace's test kit, linerate_testkit (re-exported here whole): running
//! the `linerate` binary built for the tests (CARGO_BIN_EXE_linerate), also
//! inside a network namespace, and waiting for its packet sockets and its
//! control sockets; reading its capture statistics and pcap files; a TCP
//! port for it to listen on; raw packet sockets in a namespace that see
//! VLAN tags as linerate's afpacket port does (packet.rs); a private Open
//! vSwitch (ovs.rs) built on the kit's processes.
#![allow(dead_code)]

// Not every test crate that has `mod support;` uses these.
#[allow(unused_imports)]
pub use linerate_testkit::*;
mod packet;
#[allow(unused_imports)]
pub use packet::*;
mod ovs;
#[allow(unused_imports)]
pub use ovs::*;

use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

pub const EXE: &str = env!("CARGO_BIN_EXE_linerate");

/// True when running as root (the kit's [`is_root`]).
pub fn root() -> bool {
    is_root()
}

/// A TCP port on 127.0.0.1 nobody listens on now, in this thread's
/// network namespace (bound, let go), for a process under test to listen
/// on. Below the kernel's ephemeral range, so that no socket bound to port
/// 0 meanwhile (another test's listener, an outgoing connection) can take
/// it before that process binds it, and never the same twice in this
/// process (tests run two at a time). A CI run once lost that race: the
/// switch could not bind, and the readiness check connected to another
/// test's listener.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(32768);
    // A block of this process's own, from its pid, under `low`.
    let (base, span) = (10_000u32, low.saturating_sub(10_000).max(1000));
    let start = std::process::id() * 97 % span;
    for _ in 0..span {
        let p = base + (start + NEXT.fetch_add(1, Ordering::Relaxed)) % span;
        if std::net::TcpListener::bind(("127.0.0.1", p as u16)).is_ok() {
            return p as u16;
        }
    }
    panic!("no free TCP port from {base} to {}", base + span);
}

/// `linerate ARGS` to completion.
pub fn linerate(args: &[&str]) -> Output {
    Command::new(EXE).args(args).output().expect("run linerate")
}

/// `linerate ARGS`, which must succeed; its stdout.
pub fn linerate_ok(args: &[&str]) -> String {
    let out = linerate(args);
    assert!(
        out.status.success(),
        "linerate {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `linerate ARGS` inside network namespace `ns`, stdout/stderr piped.
pub fn spawn_in(ns: &str, args: &[&str]) -> Proc {
    let mut cmd = in_ns(ns, &[EXE]);
    Proc::spawn(cmd.args(args), "linerate").expect("spawn ip netns exec linerate")
}

/// Wait until process `p` runs linerate (exec done, so it is in its
/// namespace) and has `n` packet sockets bound and running there
/// (/proc/PID/net/packet lists the sockets of the process's namespace,
/// which only this bed's processes use). From then on the sockets' rings
/// keep every frame that arrives until the process reads it.
pub fn wait_packet_sockets(p: &mut Proc, n: usize, what: &str) {
    wait_packet_sockets_of(p, Path::new(EXE), n, what)
}

/// One request line to the control socket `sock` (`linerate capture
/// --ctl`, `linerate switch --ctl`); the first answer line, or None if the
/// socket does not answer (yet).
pub fn ctl_request(sock: &Path, line: &str) -> Option<String> {
    let mut s = std::os::unix::net::UnixStream::connect(sock).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    writeln!(s, "{line}").ok()?;
    s.shutdown(std::net::Shutdown::Write).ok()?;
    let mut answer = String::new();
    BufReader::new(s).read_line(&mut answer).ok()?;
    (!answer.is_empty()).then(|| answer.trim_end().to_string())
}

/// `linerate switch-ctl SOCK ARGS...`, which must succeed; its stdout.
pub fn switch_ctl(sock: &Path, args: &[&str]) -> String {
    let o = std::process::Command::new(EXE)
        .arg("switch-ctl")
        .arg(sock)
        .args(args)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "switch-ctl {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Wait until process `p` answers on its control socket `sock`. linerate
/// capture and switch open every port before they start the control
/// socket: from then on every port is bound.
pub fn wait_ctl(p: &mut Proc, sock: &Path, what: &str) {
    wait_until(
        Duration::from_secs(20),
        &format!("{what}: an answer on its control socket {}", sock.display()),
        || {
            p.assert_running(what);
            ctl_request(sock, "stats").is_some()
        },
    );
}

/// `linerate switch` in namespace `ns` with afpacket ports 1..=N on the
/// interfaces `ifs`, rules from `flows`, its control socket at `sock`
/// (polling: wait); returns once every port is open.
pub fn start_switch_in(ns: &str, ifs: &[String], flows: &Path, sock: &Path) -> Proc {
    start_switch_with(ns, ifs, flows, sock, &[])
}

/// [`start_switch_in`] with more arguments.
pub fn start_switch_with(
    ns: &str,
    ifs: &[String],
    flows: &Path,
    sock: &Path,
    more: &[&str],
) -> Proc {
    let mut c = std::process::Command::new("ip");
    c.args(["netns", "exec", ns, EXE, "switch"]);
    for (i, f) in ifs.iter().enumerate() {
        c.arg("--port").arg(format!("{}=afpacket:{f}", i + 1));
    }
    c.arg("--flows").arg(flows).arg("--ctl").arg(sock);
    c.args(["--poll", "wait", "--json", "--quiet"]);
    c.args(more);
    let mut p = Proc::from(
        c.stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("start linerate switch"),
    );
    wait_ctl(&mut p, sock, "linerate switch");
    p
}

/// `stats` from a capture's control socket, as JSON.
pub fn capture_stats(sock: &Path) -> Option<Value> {
    serde_json::from_str(&ctl_request(sock, "stats")?).ok()
}

/// Wait until capture `p` (with `--ctl sock`) has received `n` packets in
/// total (`totals.received`: forwarded or dropped by its workers).
pub fn wait_capture_received(p: &mut Proc, sock: &Path, n: u64, what: &str) {
    let t = Instant::now();
    let mut last = Value::Null;
    loop {
        p.assert_running(what);
        if let Some(v) = capture_stats(sock) {
            if v["totals"]["received"].as_u64().unwrap_or(0) >= n {
                return;
            }
            last = v;
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "{what}: {n} packets not received after 30 s; stats at the last look: {last}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Complete records in a classic pcap file (either byte order) that may
/// still be being written (e.g. by `tcpdump -U -w`); 0 while it has no
/// header yet.
pub fn pcap_records(path: &Path) -> usize {
    let b = std::fs::read(path).unwrap_or_default();
    if b.len() < 24 {
        return 0;
    }
    let le = match u32::from_le_bytes(b[0..4].try_into().unwrap()) {
        0xa1b2_c3d4 | 0xa1b2_3c4d => true,
        0xd4c3_b2a1 | 0x4d3c_b2a1 => false,
        m => panic!("{}: not a pcap file (magic {m:#x})", path.display()),
    };
    let (mut off, mut n) = (24, 0);
    while off + 16 <= b.len() {
        let a: [u8; 4] = b[off + 8..off + 12].try_into().unwrap();
        let cap = if le {
            u32::from_le_bytes(a)
        } else {
            u32::from_be_bytes(a)
        } as usize;
        if off + 16 + cap > b.len() {
            break;
        }
        off += 16 + cap;
        n += 1;
    }
    n
}

/// Write the frames as a pcap file through linerate's own pcap port
/// (timestamps 1 us apart).
pub fn write_pcap(path: &Path, frames: &[Vec<u8>]) {
    let uri = format!("pcap:{}?mode=write", path.display());
    let mut port = linerate_io::open(&uri, &Default::default()).unwrap();
    let mut frames: Vec<Vec<u8>> = frames.to_vec();
    let pkts: Vec<linerate_io::Pkt> = frames
        .iter_mut()
        .enumerate()
        // SAFETY: one test buffer per descriptor; it outlives the descriptor and nothing else touches it meanwhile.
        .map(|(i, f)| unsafe {
            linerate_io::Pkt::from_raw(
                f.as_mut_ptr(),
                f.len() as u32,
                0,
                1_700_000_000_000_000_000 + i as u64 * 1000,
            )
        })
        .collect();
    for chunk in pkts.chunks(64) {
        assert_eq!(port.tx.send(chunk).unwrap(), chunk.len());
    }
    port.tx.flush().unwrap();
}

/// Packets in a capture file according to tshark, which must read it
/// without any error.
pub fn tshark_count(f: &Path) -> u64 {
    require_tool("tshark");
    let out = Command::new("tshark")
        .args(["-r"])
        .arg(f)
        .args(["-T", "fields", "-e", "frame.number"])
        .output()
        .expect("tshark");
    let err = String::from_utf8_lossy(&out.stderr);
    let bad: Vec<&str> = err
        .lines()
        .filter(|l| !l.contains("Running as user") && !l.trim().is_empty())
        .collect();
    assert!(
        out.status.success() && bad.is_empty(),
        "{}: {err}",
        f.display()
    );
    String::from_utf8_lossy(&out.stdout).lines().count() as u64
}

/// Removes a test's directory and every namespace with its prefix on
/// drop, also when an assertion failed.
pub struct Cleanup {
    pub dir: std::path::PathBuf,
    pub prefix: String,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        for n in netns_with(&self.prefix) {
            let _ = Command::new("ip").args(["netns", "del", &n]).status();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

use linerate_wire::build::{build_udp, FrameParams, IpPair};

/// Frame number `i` of the end-to-end tests that check frames byte for
/// byte: deterministic size (60..=1514), VLAN tag (every third), IP version
/// (odd: IPv6) and payload; to `dst` (default: FrameParams's), UDP port `dport`.
pub fn mixed_frame(i: u64, dst: Option<[u8; 6]>, dport: u16, buf: &mut [u8; 1514]) -> usize {
    // Sizes cycle through 60..=1514 with a stride that hits both ends.
    let len = 60 + ((i * 7919) % (1514 - 60 + 1)) as usize;
    let vlan_tag = [100 + (i % 7) as u16];
    let vlans: &[u16] = if i.is_multiple_of(3) { &vlan_tag } else { &[] };
    let v6 = i % 2 == 1;
    let ip = if v6 {
        let mut s = [0u8; 16];
        s[0] = 0xfd;
        s[15] = 1;
        let mut d = s;
        d[15] = 2;
        IpPair::V6 { src: s, dst: d }
    } else {
        IpPair::V4 {
            src: [10, 9, 1, 1],
            dst: [10, 9, 2, 2],
        }
    };
    let hdr = 14 + 4 * vlans.len() + if v6 { 40 } else { 20 } + 8;
    let mut payload = [0u8; 1514];
    let plen = len.saturating_sub(hdr);
    for (k, b) in payload[..plen].iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(31).wrapping_add(k as u8);
    }
    payload[..8.min(plen)].copy_from_slice(&i.to_be_bytes()[..8.min(plen)]);
    let mut p = FrameParams::new(ip);
    if let Some(d) = dst {
        p.eth_dst = d;
    }
    p.vlans = vlans;
    p.payload = &payload[..plen];
    let n = build_udp(&mut buf[..], &p, 1000 + (i % 50) as u16, dport).expect("frame fits");
    // Short IPv6/VLAN headers may leave the frame below 60: pad with zeros.
    if n < len {
        buf[n..len].fill(0);
    }
    len.max(n)
}
