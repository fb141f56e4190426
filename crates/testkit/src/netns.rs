//! Network-namespace beds for the tests.
//!
//! [`Netns`] is the one bed type: a set of network namespaces made for one
//! test, named from the caller's prefix, this process's id and a counter
//! (unique per bed, so tests run in parallel), each with loopback up and
//! IPv6 off (no router solicitations, MLD reports or neighbour discovery
//! among a test's frames), joined by veth pairs within one namespace
//! ([`Netns::veth`]) or between two ([`Netns::veth_between`]). Dropping it
//! deletes every namespace it made (and with them their veths and whatever
//! else lived there), also when the test panics; a namespace that the test
//! or the program under test makes by a known name is handed to it with
//! [`Netns::adopt`] for the same clean-up. [`NetnsStar`] is the one
//! topology built on it: host namespaces around a switch namespace.
//!
//! Code runs inside a namespace on a thread of its own ([`run_in`],
//! [`Netns::run`]; setns affects only the calling thread, and sockets
//! opened there stay in the namespace and may be used from any thread) or
//! on the calling thread for good ([`enter`]).
//!
//! Everything here is a test-only convenience: it panics (naming the
//! command and its error) when a namespace cannot be made or entered.

use crate::need::{require_root, require_tools};
use crate::proc::run_cmd;
use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

static SEQ: AtomicU32 = AtomicU32::new(0);

/// Network namespaces deleted on drop (also when the test panics).
pub struct Netns {
    tag: String,
    made: Vec<String>,
}

impl Netns {
    /// Namespaces `{tag}{role}`, one per role, where the tag is `prefix`,
    /// this process's id (mod 100 000), `n` and a counter of this process:
    /// unique per bed. Loopback up, IPv6 off in each. `prefix` starts with
    /// "lr" (scripts/test.sh looks for namespaces left behind by that).
    /// Panics unless root and `ip` and `sysctl` are there.
    pub fn new(prefix: &str, roles: &[&str]) -> Netns {
        require_root();
        require_tools(&["ip", "sysctl"]);
        assert!(prefix.starts_with("lr"), "namespace prefix {prefix}");
        let tag = format!(
            "{prefix}{}n{}",
            std::process::id() % 100_000,
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let mut bed = Netns {
            tag,
            made: Vec::new(),
        };
        for r in roles {
            let name = format!("{}{r}", bed.tag);
            bed.add(&name);
        }
        bed
    }

    /// One namespace named by its tag ([`Netns::new`] with one empty role).
    pub fn one(prefix: &str) -> Netns {
        Netns::new(prefix, &[""])
    }

    /// A namespace named exactly `name` (which must not exist yet), set up
    /// as [`Netns::new`]'s.
    pub fn named(name: &str) -> Netns {
        require_root();
        require_tools(&["ip", "sysctl"]);
        let mut bed = Netns {
            tag: name.to_string(),
            made: Vec::new(),
        };
        bed.add(name);
        bed
    }

    /// Take charge of namespaces that someone else makes (the program under
    /// test, by names the test knows): those of `names` that exist at the
    /// drop are deleted then. Makes nothing.
    pub fn adopt(names: Vec<String>) -> Netns {
        Netns {
            tag: String::new(),
            made: names,
        }
    }

    fn add(&mut self, name: &str) {
        run_cmd(&["ip", "netns", "add", name]);
        self.made.push(name.to_string());
        run_cmd(&[
            "ip",
            "netns",
            "exec",
            name,
            "sysctl",
            "-qw",
            "net.ipv6.conf.all.disable_ipv6=1",
            "net.ipv6.conf.default.disable_ipv6=1",
        ]);
        run_cmd(&["ip", "-n", name, "link", "set", "lo", "up"]);
    }

    /// The tag the names start with (also a unique prefix for interface
    /// names: at most 15 characters in all).
    pub fn tag(&self) -> &str {
        &self.tag
    }

    /// The first (for [`Netns::one`], the only) namespace.
    pub fn name(&self) -> &str {
        &self.made[0]
    }

    /// Namespace `i`, in the order of the roles.
    pub fn ns(&self, i: usize) -> &str {
        &self.made[i]
    }

    /// Every namespace, in the order of the roles.
    pub fn names(&self) -> &[String] {
        &self.made
    }

    /// `ip -n NAME ARGS...` in the first namespace (must succeed); stdout.
    pub fn ip(&self, args: &[&str]) -> String {
        let mut v = vec!["ip", "-n", self.name()];
        v.extend_from_slice(args);
        run_cmd(&v)
    }

    /// `ip netns exec NAME ARGS...` in the first namespace (must succeed);
    /// stdout.
    pub fn exec(&self, args: &[&str]) -> String {
        let mut v = vec!["ip", "netns", "exec", self.name()];
        v.extend_from_slice(args);
        run_cmd(&v)
    }

    /// A veth pair `a` <-> `b` in the first namespace, both ends up.
    pub fn veth(&self, a: &str, b: &str) {
        self.veth_between(0, a, 0, b);
    }

    /// A veth pair `a` (in namespace `na`) <-> `b` (in namespace `nb`, which
    /// may be the same), both ends up.
    pub fn veth_between(&self, na: usize, a: &str, nb: usize, b: &str) {
        let (x, y) = (self.ns(na), self.ns(nb));
        run_cmd(&[
            "ip", "-n", x, "link", "add", a, "type", "veth", "peer", "name", b, "netns", y,
        ]);
        run_cmd(&["ip", "-n", x, "link", "set", "dev", a, "up"]);
        run_cmd(&["ip", "-n", y, "link", "set", "dev", b, "up"]);
    }

    /// Run `f` on a thread inside the first namespace ([`run_in`]).
    pub fn run<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        run_in(self.name(), f)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        for n in self.made.iter().rev() {
            let _ = Command::new("ip").args(["netns", "del", n]).output();
        }
    }
}

/// Move the calling thread into network namespace `ns` for good (setns
/// affects only this thread).
pub fn enter(ns: &str) {
    let path = format!("/run/netns/{ns}");
    let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("open {path}: {e}"));
    // SAFETY: setns on a valid namespace fd; affects only this thread.
    let r = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
    assert_eq!(r, 0, "setns {path}: {}", std::io::Error::last_os_error());
}

/// Run `f` on a thread that entered namespace `ns` and return its result (a
/// panic in `f` is raised again here). Sockets opened there stay in the
/// namespace.
pub fn run_in<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let ns = ns.to_string();
    let h = std::thread::spawn(move || {
        enter(&ns);
        f()
    });
    match h.join() {
        Ok(v) => v,
        Err(p) => std::panic::resume_unwind(p),
    }
}

/// The network namespaces whose names start with `prefix` (none when
/// /run/netns cannot be read).
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

/// A star of namespaces: `{tag}sw` (the switch's) and `{tag}h1..hN` (the
/// hosts'), veth `{tag}pI` (in sw, the switch's port I) <-> `{tag}hI` (in
/// hI), all up; a [`Netns`] underneath (so all deleted on drop). Interface
/// names have 15 characters at most: tag, 'p' or 'h', port.
pub struct NetnsStar {
    pub bed: Netns,
    pub hosts: u32,
}

impl NetnsStar {
    /// The star with `hosts` host namespaces ([`Netns::new`]'s prefix).
    pub fn up(prefix: &str, hosts: u32) -> NetnsStar {
        let roles: Vec<String> = std::iter::once("sw".to_string())
            .chain((1..=hosts).map(|i| format!("h{i}")))
            .collect();
        let roles: Vec<&str> = roles.iter().map(String::as_str).collect();
        let bed = Netns::new(prefix, &roles);
        assert!(
            bed.tag().len() + 1 + hosts.to_string().len() <= 15,
            "tag {} too long",
            bed.tag()
        );
        let s = NetnsStar { bed, hosts };
        for i in 1..=hosts {
            s.bed
                .veth_between(0, &s.sw_if(i), i as usize, &s.host_if(i));
        }
        s
    }
    /// The tag every name starts with.
    pub fn tag(&self) -> &str {
        self.bed.tag()
    }
    /// The switch's namespace.
    pub fn sw_ns(&self) -> String {
        format!("{}sw", self.tag())
    }
    /// Host `i`'s namespace (1-based).
    pub fn host_ns(&self, i: u32) -> String {
        format!("{}h{i}", self.tag())
    }
    /// The switch's end of host `i`'s veth (in [`NetnsStar::sw_ns`]).
    pub fn sw_if(&self, i: u32) -> String {
        format!("{}p{i}", self.tag())
    }
    /// Host `i`'s end of its veth (in [`NetnsStar::host_ns`]).
    pub fn host_if(&self, i: u32) -> String {
        format!("{}h{i}", self.tag())
    }
}
