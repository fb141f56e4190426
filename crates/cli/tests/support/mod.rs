//! Helpers shared by the CLI end-to-end tests (`mod support;` in each):
//! what a test needs (root, tools: fail, never skip) and waiting for
//! readiness, private temporary directories removed on drop
//! (crates/io/tests/common/need.rs, re-exported here), child processes
//! killed on drop, running linerate (also
//! inside a network namespace), waiting for its packet sockets, XDP
//! programs and control sockets, reading its JSON; a star of network
//! namespaces with raw packet sockets in them (netns.rs) and a private
//! Open vSwitch (ovs.rs).
#![allow(dead_code)]

#[path = "../../../io/tests/common/need.rs"]
mod need;
pub use need::*;
mod netns;
// Not every test crate that has `mod support;` uses these.
#[allow(unused_imports)]
pub use netns::*;
mod ovs;
#[allow(unused_imports)]
pub use ovs::*;

use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

pub const EXE: &str = env!("CARGO_BIN_EXE_linerate");

/// True when running as root. Tests that need root call [`require_root`]
/// (fail, never skip).
pub fn root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A child process, killed and reaped on drop (test failure included).
pub struct Proc(pub Option<Child>);

impl Proc {
    pub fn pid(&self) -> u32 {
        self.0.as_ref().unwrap().id()
    }
    /// Wait up to `t` for the exit; kill it after that (and fail).
    pub fn wait_output(mut self, t: Duration, what: &str) -> Output {
        let mut c = self.0.take().unwrap();
        let start = Instant::now();
        while c.try_wait().unwrap().is_none() {
            if start.elapsed() > t {
                let _ = c.kill();
                let out = c.wait_with_output().unwrap();
                panic!(
                    "{what} did not end within {t:?}; stderr: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        c.wait_with_output().unwrap()
    }
    /// Wait up to `t` for the exit, which must be a success; the last JSON
    /// line of its stdout.
    pub fn wait_json(self, t: Duration, what: &str) -> Value {
        let out = self.wait_output(t, what);
        assert_ok(&out, what);
        last_json(&String::from_utf8_lossy(&out.stdout))
    }
    /// SIGINT, then [`Proc::wait_json`].
    pub fn finish_json(self, t: Duration, what: &str) -> Value {
        self.interrupt();
        self.wait_json(t, what)
    }
    /// Fail the test with its stderr if the process has exited.
    pub fn assert_running(&mut self, what: &str) {
        panic_if_exited(self, what);
    }
    /// Its stdout, line by line, from a thread of its own (so the test can
    /// wait for a line with a deadline); the receiver ends with the stream.
    pub fn stdout_lines(&mut self) -> Receiver<String> {
        let out = self.0.as_mut().unwrap().stdout.take();
        lines_of(out.expect("stdout piped"))
    }
    /// [`Proc::stdout_lines`] for its stderr.
    pub fn stderr_lines(&mut self) -> Receiver<String> {
        let err = self.0.as_mut().unwrap().stderr.take();
        lines_of(err.expect("stderr piped"))
    }
    pub fn interrupt(&self) {
        self.signal(libc::SIGINT);
    }
    pub fn signal(&self, sig: i32) {
        // SAFETY: signalling our own child (`ip netns exec` execs linerate in place).
        unsafe { libc::kill(self.pid() as i32, sig) };
    }
}

/// The lines of `r`, read by a thread of their own; the receiver ends with
/// the stream.
fn lines_of(r: impl std::io::Read + Send + 'static) -> Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(r).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    rx
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
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

/// A finished process, which must have succeeded (else its stderr).
pub fn assert_ok(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what}: {}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The last JSON object line of a command's stdout.
pub fn last_json(stdout: &str) -> Value {
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .unwrap_or_else(|| panic!("no JSON line in: {stdout}"));
    serde_json::from_str(line).unwrap()
}

/// `linerate ARGS` inside network namespace `ns`, stdout/stderr piped.
pub fn spawn_in(ns: &str, args: &[&str]) -> Proc {
    let c = Command::new("ip")
        .args(["netns", "exec", ns, EXE])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ip netns exec linerate");
    Proc(Some(c))
}

/// Fail the test with `p`'s stderr if it has exited.
fn panic_if_exited(p: &mut Proc, what: &str) {
    if let Some(st) = p.0.as_mut().unwrap().try_wait().unwrap() {
        let c = p.0.take().unwrap();
        let out = c.wait_with_output().unwrap();
        panic!(
            "{what} exited early ({st}): {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Running packet sockets (bound to an interface, running) in the network
/// namespace of process `pid` (/proc/PID/net/packet).
fn running_packet_sockets(pid: u32) -> usize {
    std::fs::read_to_string(format!("/proc/{pid}/net/packet"))
        .unwrap_or_default()
        .lines()
        .skip(1)
        .filter(|l| {
            // sk RefCnt Type Proto Iface R Rmem User Inode
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() > 5 && f[4] != "0" && f[5] == "1"
        })
        .count()
}

/// Wait until process `p` runs linerate (exec done, so it is in its
/// namespace) and has `n` packet sockets bound and running there
/// (/proc/PID/net/packet lists the sockets of the process's namespace,
/// which only this bed's processes use). From then on the sockets' rings
/// keep every frame that arrives until the process reads it.
pub fn wait_packet_sockets(p: &mut Proc, n: usize, what: &str) {
    wait_packet_sockets_of(p, Path::new(EXE), n, what)
}

/// [`wait_packet_sockets`] for a process that runs program `exe` (e.g.
/// tcpdump started through `ip netns exec`).
pub fn wait_packet_sockets_of(p: &mut Proc, exe: &Path, n: usize, what: &str) {
    let pid = p.pid();
    let exe = exe.canonicalize().unwrap_or_else(|_| exe.to_path_buf());
    wait_until(
        Duration::from_secs(20),
        &format!("{what}: {n} running packet sockets"),
        || {
            panic_if_exited(p, what);
            let exe_ok = std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|e| e == exe);
            exe_ok && running_packet_sockets(pid) >= n
        },
    );
}

/// Wait until `ifname` in namespace `ns` has an XDP program attached (by
/// process `p`, which must not exit meanwhile). An in-kernel counter
/// (`count --xdp`) counts from then on.
pub fn wait_xdp(p: &mut Proc, ns: &str, ifname: &str, what: &str) {
    wait_until(
        Duration::from_secs(20),
        &format!("{what}: an XDP program on {ifname}"),
        || {
            panic_if_exited(p, what);
            let out = Command::new("ip")
                .args(["-n", ns, "link", "show", "dev", ifname])
                .output()
                .expect("ip link");
            String::from_utf8_lossy(&out.stdout).contains("prog/xdp")
        },
    );
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

/// Wait until process `p` answers on its control socket `sock`. linerate
/// capture and switch open every port before they start the control
/// socket: from then on every port is bound.
pub fn wait_ctl(p: &mut Proc, sock: &Path, what: &str) {
    wait_until(
        Duration::from_secs(20),
        &format!("{what}: an answer on its control socket {}", sock.display()),
        || {
            panic_if_exited(p, what);
            ctl_request(sock, "stats").is_some()
        },
    );
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
        panic_if_exited(p, what);
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

/// The first line from `lines` (see [`Proc::stdout_lines`]) for which `f`
/// gives a value; fails after `limit` (or when the stream ends) naming
/// `what` and the last line seen.
pub fn wait_line<T>(
    lines: &Receiver<String>,
    limit: Duration,
    what: &str,
    mut f: impl FnMut(&str) -> Option<T>,
) -> T {
    let t = Instant::now();
    let mut last = String::new();
    loop {
        let left = limit.saturating_sub(t.elapsed());
        match lines.recv_timeout(left) {
            Ok(l) => {
                if let Some(v) = f(&l) {
                    return v;
                }
                last = l;
            }
            Err(RecvTimeoutError::Timeout) => panic!(
                "waited {:.1} s, in vain, for: {what} (last line: {last})",
                limit.as_secs_f64()
            ),
            Err(RecvTimeoutError::Disconnected) => {
                panic!("output ended before: {what} (last line: {last})")
            }
        }
    }
}

/// Every further line of `lines` until the stream ends (the process
/// closed its stdout, e.g. exited); fails if it has not ended after `limit`.
pub fn drain_lines(lines: &Receiver<String>, limit: Duration, what: &str) -> Vec<String> {
    let t = Instant::now();
    let mut v = Vec::new();
    loop {
        match lines.recv_timeout(limit.saturating_sub(t.elapsed())) {
            Ok(l) => v.push(l),
            Err(RecvTimeoutError::Disconnected) => return v,
            Err(RecvTimeoutError::Timeout) => panic!(
                "{what}: output still open after {:.1} s",
                limit.as_secs_f64()
            ),
        }
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

/// The network namespaces whose names start with `prefix`.
pub fn netns_with(prefix: &str) -> Vec<String> {
    std::fs::read_dir("/run/netns")
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| n.starts_with(prefix))
                .collect()
        })
        .unwrap_or_default()
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
