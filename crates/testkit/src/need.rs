//! What a test needs from the machine: root, tools in $PATH (a missing one
//! is named with the Debian package scripts/setup.sh installs for it), CPUs,
//! a python3 with some modules.
//!
//! A test never passes by skipping: what scripts/setup.sh installs is there
//! in CI, so a missing tool, privilege or CPU fails the test with its name
//! and how to get it. The `require_*` functions are test-only conveniences:
//! they panic (that is how the test fails). [`find_tool`] and [`is_root`]
//! never panic.

use std::path::PathBuf;
use std::process::Command;

/// True when running as root (never panics). Tests that need root call
/// [`require_root`] (fail, never skip).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Test-only: panic unless running as root (namespaces, veths, packet sockets and XDP
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
pub fn package_of(tool: &str) -> &'static str {
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
        "ping" => "iputils-ping",
        "ss" => "iproute2",
        _ => "the package that provides it",
    }
}

/// `tool` as found in $PATH (an executable file), if it is there (never
/// panics).
pub fn find_tool(tool: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(tool))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// Test-only: panic unless `tool` is in $PATH; its path. The message names the tool and
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

/// Test-only: panic unless every one of `tools` is in $PATH.
pub fn require_tools(tools: &[&str]) {
    for t in tools {
        require_tool(t);
    }
}

/// Test-only: panic unless this process may run on at least `n` CPUs.
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
/// Test-only: panics naming the modules and the Debian packages otherwise.
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

/// Where scripts/setup.sh installs os-ken (PyPI), in a virtual
/// environment of its own: the controller the controller tests run.
pub const OSKEN_VENV: &str = "/opt/linerate/os-ken";

/// The python of the os-ken environment ($LINERATE_OSKEN_PYTHON, else
/// [`OSKEN_VENV`]), checked to import os_ken. Test-only: panics naming
/// what to run otherwise.
pub fn require_osken() -> String {
    let py = std::env::var("LINERATE_OSKEN_PYTHON")
        .unwrap_or_else(|_| format!("{OSKEN_VENV}/bin/python"));
    let ok = Command::new(&py)
        .args(["-c", "import os_ken.base.app_manager"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "no os-ken at {py}: scripts/setup.sh installs it (python3 -m venv {OSKEN_VENV}; \
         {OSKEN_VENV}/bin/pip install os-ken)"
    );
    py
}
