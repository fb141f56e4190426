//! What a test needs from the machine, and waiting for readiness; shared by
//! the test crates of the workspace (`mod common;` here, `#[path]` from
//! crates/cli/tests/support, crates/measure/tests and crates/pipeline/tests).
//!
//! A test never passes by skipping: what scripts/setup.sh installs is there
//! in CI, so a missing tool, privilege or CPU fails the test with its name
//! and how to get it. A test never waits a fixed time for something to
//! happen either: it polls the condition with [`wait_until`] / [`wait_for`]
//! up to a generous limit and fails naming what never happened. Files go
//! into a private directory ([`TempDir`]), never at a predictable name in
//! the shared /tmp (the tests run as root).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Fail unless running as root (namespaces, veths, packet sockets and XDP
/// programs need it; CI runs scripts/test.sh as root).
pub fn require_root() {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert!(
        euid == 0,
        "this test needs root (network namespaces, veths, packet sockets, XDP), \
         but runs as uid {euid}: run it as root, as scripts/test.sh and CI do"
    );
}

/// The Debian package in scripts/setup.sh that brings `tool`.
fn package_of(tool: &str) -> &'static str {
    match tool {
        // tshark depends on wireshark-common, which has these.
        "tshark" | "editcap" | "capinfos" | "dumpcap" => "tshark",
        "tcpdump" => "tcpdump",
        "bpftool" => "bpftool",
        "dpdk-testpmd" => "dpdk",
        // openvswitch-switch depends on openvswitch-common, which has the tools.
        "ovs-vswitchd" | "ovsdb-server" | "ovsdb-tool" | "ovs-vsctl" | "ovs-ofctl"
        | "ovs-appctl" => "openvswitch-switch",
        "nft" => "nftables",
        "ethtool" => "ethtool",
        "trafgen" => "netsniff-ng",
        "chromium" => "chromium",
        "ip" => "iproute2",
        "taskset" => "util-linux",
        "sysctl" => "procps",
        "python3" => "python3",
        "clang" => "clang",
        _ => "the package that provides it",
    }
}

/// `tool` as found in $PATH (an executable file), if it is there.
pub fn find_tool(tool: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(tool))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// Fail unless `tool` is in $PATH; its path. The message names the tool and
/// the Debian package that scripts/setup.sh installs for it.
pub fn require_tool(tool: &str) -> PathBuf {
    find_tool(tool).unwrap_or_else(|| {
        panic!(
            "{tool} not found in PATH: this test needs it; scripts/setup.sh installs it \
             (apt-get install {})",
            package_of(tool)
        )
    })
}

/// Fail unless every one of `tools` is in $PATH.
pub fn require_tools(tools: &[&str]) {
    for t in tools {
        require_tool(t);
    }
}

/// Fail unless this process may run on at least `n` CPUs.
pub fn require_cpus(n: usize) {
    let have = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert!(
        have >= n,
        "this test needs {n} CPUs, this process may use {have}: the CI machines have 2; \
         run it on such a machine (and without a CPU mask narrower than that)"
    );
}

/// A python3 that imports every module of `modules`: $LINERATE_PYTHON,
/// `python3` in $PATH, or Debian's /usr/bin/python3 (when the first python3
/// in $PATH is another installation, e.g. pyenv, without the modules).
/// Fails naming the modules and the Debian packages otherwise.
pub fn require_python(modules: &[&str]) -> String {
    let mut candidates: Vec<String> = std::env::var("LINERATE_PYTHON").into_iter().collect();
    candidates.push("python3".into());
    candidates.push("/usr/bin/python3".into());
    let import = format!("import {}", modules.join(", "));
    let found = candidates.iter().find(|p| {
        Command::new(p.as_str())
            .args(["-c", &import])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    match found {
        Some(p) => p.clone(),
        None => panic!(
            "no python3 with {} ($LINERATE_PYTHON, python3 in PATH, /usr/bin/python3 tried): \
             scripts/setup.sh installs them (apt-get install python3 {})",
            modules.join(" and "),
            modules
                .iter()
                .map(|m| format!("python3-{m}"))
                .collect::<Vec<_>>()
                .join(" ")
        ),
    }
}

/// Poll `cond` (every 10 ms) until it holds; fail after `limit` naming
/// `what` (the condition that never came true).
pub fn wait_until(limit: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    wait_for(limit, what, || cond().then_some(()))
}

/// Poll `f` (every 10 ms) until it gives a value; that value. Fails after
/// `limit` naming `what`.
pub fn wait_for<T>(limit: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let t = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            t.elapsed() < limit,
            "waited {:.1} s, in vain, for: {what}",
            limit.as_secs_f64()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Make a new directory `$TMPDIR/lr-TAG-PID-RANDOM` (16 random hex digits)
/// with mode 0700; its path. It is made by this call, never one that was
/// there before (mkdir fails on anything at the path, so nothing planted
/// there, a symlink say, is ever followed).
pub fn private_dir(tag: &str) -> PathBuf {
    use std::hash::{BuildHasher, Hasher};
    use std::os::unix::fs::DirBuilderExt;
    let base = std::env::temp_dir();
    for _ in 0..16 {
        // RandomState's keys come from the OS's random source.
        let r = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish();
        let p = base.join(format!("lr-{tag}-{}-{r:016x}", std::process::id()));
        match std::fs::DirBuilder::new().mode(0o700).create(&p) {
            Ok(()) => return p,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => panic!("cannot make {}: {e}", p.display()),
        }
    }
    panic!("16 random names in {} already taken", base.display())
}

/// A fresh private temporary directory ([`private_dir`]), removed with its
/// contents on drop (also when the test fails).
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        TempDir(private_dir(tag))
    }
    pub fn join(&self, f: &str) -> PathBuf {
        self.0.join(f)
    }
    pub fn path(&self) -> &Path {
        &self.0
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

/// A tmpfs of `size` mounted on a directory, unmounted on drop.
pub struct Tmpfs(pub PathBuf);

impl Tmpfs {
    pub fn mount(dir: PathBuf, size: &str) -> Tmpfs {
        require_root();
        std::fs::create_dir_all(&dir).unwrap();
        let st = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir)
            .status()
            .expect("mount");
        assert!(st.success(), "mount -t tmpfs on {}", dir.display());
        Tmpfs(dir)
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}
