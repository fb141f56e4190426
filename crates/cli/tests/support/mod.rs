//! Helpers shared by the CLI end-to-end tests (`mod support;` in each):
//! temporary directories and child processes removed on drop, running
//! linerate (also inside a network namespace), waiting for its packet
//! sockets, reading its JSON.
#![allow(dead_code)]

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

pub const EXE: &str = env!("CARGO_BIN_EXE_linerate");

static SEQ: AtomicU32 = AtomicU32::new(0);

/// A fresh temporary directory (`lr-TAG-PID-N`), removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!(
            "lr-{tag}-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    pub fn join(&self, f: &str) -> PathBuf {
        self.0.join(f)
    }
    /// Write `text` into file `name` of the directory; its path.
    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// True when running as root (namespace tests need it).
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
    pub fn interrupt(&self) {
        self.signal(libc::SIGINT);
    }
    pub fn signal(&self, sig: i32) {
        // SAFETY: signalling our own child (`ip netns exec` execs linerate in place).
        unsafe { libc::kill(self.pid() as i32, sig) };
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
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
        "{what}: {}",
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

/// Wait until process `p` runs linerate (exec done, so it is in its
/// namespace) and has `n` packet sockets bound and running there
/// (/proc/PID/net/packet lists the sockets of the process's namespace,
/// which only this bed's processes use).
pub fn wait_packet_sockets(p: &mut Proc, n: usize, what: &str) {
    let pid = p.pid();
    let t = Instant::now();
    loop {
        panic_if_exited(p, what);
        let exe_ok = std::fs::read_link(format!("/proc/{pid}/exe"))
            .map(|e| e == Path::new(EXE).canonicalize().unwrap())
            .unwrap_or(false);
        if exe_ok {
            let running = std::fs::read_to_string(format!("/proc/{pid}/net/packet"))
                .unwrap_or_default()
                .lines()
                .skip(1)
                .filter(|l| {
                    // sk RefCnt Type Proto Iface R Rmem User Inode
                    let f: Vec<&str> = l.split_whitespace().collect();
                    f.len() > 5 && f[4] != "0" && f[5] == "1"
                })
                .count();
            if running >= n {
                // The sockets are bound (their rings catch everything from
                // now on); give the receive loop a moment to start.
                std::thread::sleep(Duration::from_millis(200));
                return;
            }
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "{what}: no {n} running packet sockets after 20 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Wait until `ifname` in namespace `ns` has an XDP program attached (by
/// process `p`, which must not exit meanwhile), then a moment more for its
/// receive loop to start.
pub fn wait_xdp(p: &mut Proc, ns: &str, ifname: &str, what: &str) {
    let t = Instant::now();
    loop {
        panic_if_exited(p, what);
        let out = Command::new("ip")
            .args(["-n", ns, "link", "show", "dev", ifname])
            .output()
            .expect("ip link");
        if String::from_utf8_lossy(&out.stdout).contains("prog/xdp") {
            std::thread::sleep(Duration::from_millis(500));
            return;
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "{what}: no XDP program on {ifname} after 20 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
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
