//! Test helpers: private network namespaces with veth pairs.
//!
//! `let ns = NetnsGuard::new("ap");` makes a network namespace with a unique
//! name (prefix, process id, counter), IPv6 off (no router solicitations or
//! MLD reports on the test links); dropping the guard deletes it, also when
//! the test panics. `ns.veth("va", "vb")` adds a veth pair inside it (names
//! are private to the namespace, so tests can run in parallel with the same
//! names). `ns.run(|| ...)` runs a closure on a thread that entered the
//! namespace (setns affects only that thread); sockets opened there stay in
//! the namespace and may be returned and used from any thread.
#![allow(dead_code)]

mod need;
pub use need::*;

use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// True when running as root. Tests that need root call [`require_root`]
/// (fail, never skip).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Run a command, panic with its stderr if it fails (naming the tool and
/// its package when it is not installed).
pub fn run_cmd(args: &[&str]) {
    require_tool(args[0]);
    let o = Command::new(args[0])
        .args(&args[1..])
        .output()
        .unwrap_or_else(|e| panic!("cannot run {args:?}: {e}"));
    assert!(
        o.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&o.stderr).trim()
    );
}

/// A network namespace deleted on drop.
pub struct NetnsGuard {
    pub name: String,
}

impl NetnsGuard {
    /// A new namespace named `lr<tag><pid>n<counter>`, loopback up, IPv6 off
    /// (fails unless root).
    pub fn new(tag: &str) -> NetnsGuard {
        require_root();
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let name = format!("lr{tag}{}n{n}", std::process::id());
        run_cmd(&["ip", "netns", "add", &name]);
        let g = NetnsGuard { name };
        g.exec(&[
            "sysctl",
            "-qw",
            "net.ipv6.conf.all.disable_ipv6=1",
            "net.ipv6.conf.default.disable_ipv6=1",
        ]);
        g.ip(&["link", "set", "lo", "up"]);
        g
    }

    /// `ip -n NS ARGS...`
    pub fn ip(&self, args: &[&str]) {
        let mut v = vec!["ip", "-n", self.name.as_str()];
        v.extend_from_slice(args);
        run_cmd(&v);
    }

    /// `ip netns exec NS ARGS...`
    pub fn exec(&self, args: &[&str]) {
        let mut v = vec!["ip", "netns", "exec", self.name.as_str()];
        v.extend_from_slice(args);
        run_cmd(&v);
    }

    /// Add a veth pair `a` <-> `b` in the namespace and bring both ends up.
    pub fn veth(&self, a: &str, b: &str) {
        self.ip(&["link", "add", a, "type", "veth", "peer", "name", b]);
        self.ip(&["link", "set", a, "up"]);
        self.ip(&["link", "set", b, "up"]);
    }

    /// Run `f` on a thread inside the namespace and return its result
    /// (a panic in `f` is re-raised here).
    pub fn run<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        let path = format!("/run/netns/{}", self.name);
        let h = std::thread::spawn(move || {
            let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("open {path}: {e}"));
            // SAFETY: setns on a valid namespace fd; affects only this thread.
            let r = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(r, 0, "setns {path}: {}", std::io::Error::last_os_error());
            f()
        });
        match h.join() {
            Ok(v) => v,
            Err(p) => std::panic::resume_unwind(p),
        }
    }
}

impl Drop for NetnsGuard {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

/// A batch belongs to the port that filled it: `batch` holds frames that
/// `a` received; `b` refuses to take them back and to receive more into
/// the batch, and changes nothing (the same descriptors, the same bytes);
/// `a` then takes them back, and the empty batch is released anywhere.
pub fn release_elsewhere_is_refused(
    a: &mut dyn linerate_io::RxPort,
    b: &mut dyn linerate_io::RxPort,
    batch: &mut linerate_io::Batch,
) {
    let seen = |bt: &linerate_io::Batch| -> Vec<(usize, u64, Vec<u8>)> {
        bt.pkts()
            .iter()
            .map(|p| (p.as_ptr() as usize, p.handle(), p.bytes().to_vec()))
            .collect()
    };
    let before = seen(batch);
    assert!(
        !before.is_empty(),
        "the batch holds no frame of the first port"
    );
    let e = b.release(batch).unwrap_err().to_string();
    assert!(e.contains("released into") && !e.contains('\n'), "{e}");
    assert_eq!(seen(batch), before, "a refused release changed the batch");
    let e = b.recv(batch).unwrap_err().to_string();
    assert!(e.contains("received into by"), "{e}");
    assert_eq!(seen(batch), before, "a refused recv changed the batch");
    a.release(batch).unwrap();
    assert!(batch.is_empty());
    b.release(batch).unwrap();
}
