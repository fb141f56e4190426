//! The RFC 2544 test bed: three network namespaces joined by two veth pairs.
//!
//! ```text
//!   NAME-gen            NAME-dut                 NAME-sink
//!  [ g0 ] <--veth--> [ d0   (DuT)   d1 ] <--veth--> [ s0 ]
//! 10.X.1.1/24      10.X.1.2/24  10.X.2.1/24       10.X.2.2/24
//! fd00:6c72:H:1::1 fd00:6c72:H:1::2 fd00:6c72:H:2::1 fd00:6c72:H:2::2
//! ```
//!
//! Interface names are fixed (each lives in its own namespace); namespace
//! names carry the bed name, so beds never collide. MACs are locally
//! administered, `02:6c:HH:HH:00:0N` (N = 1 g0, 2 d0, 3 d1, 4 s0, HHHH from
//! a hash of the name), and X is derived from the same hash.
//!
//! Quiet by construction, so that interface counters only show test traffic:
//! no IPv6 link-local addresses (`addr_gen_mode=1`), no DAD, no router
//! solicitations, ARP off on the veths (`IFF_NOARP`, which also stops the
//! MLD reports for solicited-node groups), multicast off (no MLD report
//! when IPv6 forwarding joins all-routers; turn it on with `ip link set dev
//! IF multicast on` to test multicast through the kernel) and permanent
//! neighbour entries for every address of the bed, so no ARP/ND is ever
//! needed. An idle bed, in every DuT mode, sends no packet at all.
//!
//! # The kernel as device under test
//!
//! * [`Testbed::enable_ip_forwarding`]: the generator sends frames with
//!   destination MAC = d0's MAC ([`Testbed::dut_in`]) and destination IP =
//!   the sink's IP ([`Testbed::sink`]); the DuT rewrites the source MAC to
//!   d1's and the destination MAC to s0's. [`FrameAddrs::for_mode`] gives
//!   the tuple.
//! * [`Testbed::enable_bridge`]: d0 and d1 are put into bridge `br0` in the
//!   DuT namespace; the generator sends frames with destination MAC = s0's
//!   MAC (the IP addresses are not looked at; use the sink's IP).
//!
//! # Cleanup
//!
//! Everything `up` creates is removed: when `up` fails half way (roll back),
//! by [`Testbed::down`], and by `Drop` (so also on panic). A record
//! `/run/linerate/testbeds/NAME.json` is written *before* anything is
//! created, so [`down_by_name`] / [`down_all`] (`linerate testbed down`) can
//! remove a bed left behind by a process that was killed with SIGKILL.
//! A process that installed a watchdog ([`crate::guard::Guard::install`])
//! has its beds registered there by `up` and removed by the watchdog when
//! it dies, however it dies (`linerate bench`, `linerate testbed up --hold`).
//! Signals: the library installs no handler; the `linerate testbed` CLI
//! catches SIGINT/SIGTERM/SIGHUP (ctrlc crate, "termination" feature) and
//! drops the bed. A program embedding the library should do the same
//! (handle the signal, then let the `Testbed` drop), or call [`down_all`].

mod napi;
pub mod text;

pub use napi::NapiEntry;

use serde::{Deserialize, Serialize};
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::str::FromStr;
use std::sync::atomic::{AtomicU32, Ordering};

/// Where the records of live test beds are kept.
pub const STATE_DIR: &str = "/run/linerate/testbeds";
/// Name of the bridge made by [`Testbed::enable_bridge`] in the DuT namespace.
pub const BRIDGE: &str = "br0";
/// Interface names (fixed: each lives in its own namespace).
pub const IF_GEN: &str = "g0";
pub const IF_DUT_IN: &str = "d0";
pub const IF_DUT_OUT: &str = "d1";
pub const IF_SINK: &str = "s0";

/// An error of the test bed: one line naming the problem.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct TestbedError(pub String);

pub type Result<T> = std::result::Result<T, TestbedError>;

fn err<T>(m: impl Into<String>) -> Result<T> {
    Err(TestbedError(m.into()))
}

/// An Ethernet address; serialised as "02:6c:..".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct MacAddr(pub [u8; 6]);

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            m[0], m[1], m[2], m[3], m[4], m[5]
        )
    }
}

impl FromStr for MacAddr {
    type Err = TestbedError;
    fn from_str(s: &str) -> Result<MacAddr> {
        let mut m = [0u8; 6];
        let parts: Vec<&str> = s.split(':').collect();
        if parts.len() != 6 {
            return err(format!(
                "'{s}' is not a MAC address (want aa:bb:cc:dd:ee:ff)"
            ));
        }
        for (i, p) in parts.iter().enumerate() {
            m[i] = u8::from_str_radix(p, 16)
                .map_err(|_| TestbedError(format!("'{s}' is not a MAC address")))?;
        }
        Ok(MacAddr(m))
    }
}

impl Serialize for MacAddr {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for MacAddr {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// How the bed is built.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TestbedConfig {
    /// Bed name (namespace prefix): letters, digits, '-', '_', at most 24
    /// characters. None: "lr" + pid + counter.
    pub name: Option<String>,
    /// TX and RX queues of every veth (for multi-queue AF_XDP), 1..=64.
    pub queues: u32,
    /// MTU of the veths (None: kernel default 1500).
    pub mtu: Option<u32>,
    /// GRO on/off on the veths via `ethtool -K` (None: leave the kernel
    /// default, or on when `threaded_napi`: veth only has NAPI when GRO is
    /// requested or an XDP program is attached).
    pub gro: Option<bool>,
    /// Switch NAPI of all four veths to kernel threads (`napi/IF-ID`).
    pub threaded_napi: bool,
    /// Pin those NAPI threads to this CPU.
    pub napi_cpu: Option<usize>,
    /// With `threaded_napi`: only the DuT's veths (d0, d1) get NAPI
    /// threads; g0 and s0 keep softirq NAPI (run on the CPU that sent to
    /// them: the sink's receive then runs where the DuT transmits).
    #[serde(default)]
    pub threaded_dut_only: bool,
    /// Give the veths IPv6 addresses (else IPv6 is disabled on them).
    pub ipv6: bool,
    /// Receive packet steering (RPS) of d0 (and d1, which receives in
    /// traffic both ways) to this CPU: the kernel's work
    /// on the frames d0 receives after its XDP hook (the bridge, routing,
    /// packet sockets: the kernel DuTs' forwarding) runs on this CPU, not
    /// on the CPU that runs d0's NAPI (the generator's, which sends to d0).
    /// Work done by an XDP program on d0 (redirects into AF_XDP sockets or
    /// devmaps) stays where NAPI runs, as it would in a NIC driver.
    #[serde(default)]
    pub rps_cpu: Option<usize>,
}

impl Default for TestbedConfig {
    fn default() -> Self {
        TestbedConfig {
            name: None,
            queues: 1,
            mtu: None,
            gro: None,
            threaded_napi: false,
            napi_cpu: None,
            threaded_dut_only: false,
            ipv6: true,
            rps_cpu: None,
        }
    }
}

/// One veth end of the bed.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Iface {
    /// Namespace it lives in.
    pub ns: String,
    pub name: String,
    pub mac: MacAddr,
    pub ipv4: Ipv4Addr,
    pub prefix4: u8,
    pub ipv6: Ipv6Addr,
    pub prefix6: u8,
}

/// What the DuT namespace does with frames from d0.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum DutMode {
    /// Nothing configured: frames to the sink are dropped by the DuT kernel
    /// (or taken by a user-space DuT such as `linerate fwd` on d0/d1).
    #[default]
    None,
    /// Linux IPv4/IPv6 forwarding between d0 and d1.
    IpForward,
    /// Linux bridge br0 with ports d0 and d1.
    Bridge,
}

/// A NAPI kthread of the bed.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct NapiThread {
    pub ns: String,
    pub ifname: String,
    pub napi_id: u32,
    pub pid: u32,
    pub cpu: Option<usize>,
}

/// The serialisable description of a bed (the record in [`STATE_DIR`]).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct TestbedInfo {
    pub name: String,
    pub ns_gen: String,
    pub ns_dut: String,
    pub ns_sink: String,
    pub gen: Iface,
    pub dut_in: Iface,
    pub dut_out: Iface,
    pub sink: Iface,
    pub queues: u32,
    pub mtu: Option<u32>,
    pub threaded_napi: bool,
    pub napi_threads: Vec<NapiThread>,
    /// RPS of d0 and d1 to this CPU ([`TestbedConfig::rps_cpu`]).
    #[serde(default)]
    pub rps_cpu: Option<usize>,
    pub dut_mode: DutMode,
    /// Pid of the process that made the bed.
    pub owner_pid: u32,
    /// False while `up` is still building it.
    pub complete: bool,
}

impl TestbedInfo {
    pub fn namespaces(&self) -> [&str; 3] {
        [&self.ns_gen, &self.ns_dut, &self.ns_sink]
    }

    pub fn ifaces(&self) -> [&Iface; 4] {
        [&self.gen, &self.dut_in, &self.dut_out, &self.sink]
    }
}

/// The addresses a generator in the gen namespace puts in its frames so
/// that the DuT in `mode` delivers them to the sink.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct FrameAddrs {
    pub src_mac: MacAddr,
    pub dst_mac: MacAddr,
    pub src_ip: Ipv4Addr,
    pub dst_ip: Ipv4Addr,
    pub src_ip6: Ipv6Addr,
    pub dst_ip6: Ipv6Addr,
}

impl FrameAddrs {
    /// IpForward and None (a user-space forwarder on d0): dst MAC = d0,
    /// dst IP = sink. Bridge: dst MAC = s0, dst IP = sink.
    pub fn for_mode(info: &TestbedInfo, mode: DutMode) -> FrameAddrs {
        let dst_mac = match mode {
            DutMode::Bridge => info.sink.mac,
            DutMode::IpForward | DutMode::None => info.dut_in.mac,
        };
        FrameAddrs {
            src_mac: info.gen.mac,
            dst_mac,
            src_ip: info.gen.ipv4,
            dst_ip: info.sink.ipv4,
            src_ip6: info.gen.ipv6,
            dst_ip6: info.sink.ipv6,
        }
    }
}

impl FrameAddrs {
    /// The reverse direction: a generator in the sink's namespace sends
    /// from s0 to the generator's address (dst MAC d1's, or g0's for the
    /// bridge), for traffic both ways.
    pub fn reverse(info: &TestbedInfo, mode: DutMode) -> FrameAddrs {
        let dst_mac = match mode {
            DutMode::Bridge => info.gen.mac,
            DutMode::IpForward | DutMode::None => info.dut_out.mac,
        };
        FrameAddrs {
            src_mac: info.sink.mac,
            dst_mac,
            src_ip: info.sink.ipv4,
            dst_ip: info.gen.ipv4,
            src_ip6: info.sink.ipv6,
            dst_ip6: info.gen.ipv6,
        }
    }
}

/// Interface counters (from /proc/net/dev of the namespace).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IfaceStats {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub rx_errors: u64,
    pub rx_dropped: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    pub tx_errors: u64,
    pub tx_dropped: u64,
}

/// A live test bed; removed on [`Testbed::down`] or drop.
#[derive(Debug)]
pub struct Testbed {
    info: TestbedInfo,
    /// Namespaces this process created (only these are removed on rollback).
    created: Vec<String>,
    keep: bool,
    removed: bool,
}

// ---------------------------------------------------------------- helpers

/// Run `f` on a new thread that has joined network namespace `ns` (a name
/// under /var/run/netns, or an absolute path to a netns file). setns(2)
/// changes only the calling thread, so the caller's namespace is untouched.
/// A panic in `f` is propagated.
pub fn in_netns<T: Send>(ns: &str, f: impl FnOnce() -> T + Send) -> Result<T> {
    let path = netns_path(ns);
    let file = File::open(&path).map_err(|e| {
        TestbedError(format!(
            "network namespace '{ns}': cannot open {}: {e}",
            path.display()
        ))
    })?;
    let r = std::thread::scope(|s| {
        s.spawn(move || {
            // SAFETY: file is an open netns descriptor; only this thread moves.
            if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                return Err(TestbedError(format!(
                    "network namespace '{ns}': setns: {}",
                    std::io::Error::last_os_error()
                )));
            }
            Ok(f())
        })
        .join()
    });
    match r {
        Ok(v) => v,
        Err(p) => std::panic::resume_unwind(p),
    }
}

fn netns_path(ns: &str) -> PathBuf {
    if ns.starts_with('/') {
        PathBuf::from(ns)
    } else {
        Path::new("/run/netns").join(ns)
    }
}

/// True if network namespace `ns` exists (is mounted under /run/netns).
pub fn netns_exists(ns: &str) -> bool {
    netns_path(ns).exists()
}

fn run(args: &[&str]) -> Result<Output> {
    let mut cmd = Command::new(args[0]);
    // Synchronous helpers (`ip ...`): killed with this process, so an
    // orphaned `ip netns add` cannot create a namespace after the watchdog
    // (crate::guard) cleaned up.
    crate::guard::die_with_parent(&mut cmd);
    let out = cmd
        .args(&args[1..])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| TestbedError(format!("cannot run '{}': {e}", args[0])))?;
    Ok(out)
}

/// Run a command (a short helper such as `ip`), Err with its stderr on one line.
pub(crate) fn run_checked(args: &[&str]) -> std::result::Result<(), String> {
    run_ok(args).map_err(|e| e.to_string())
}

/// Run a command, failing with its stderr.
fn run_ok(args: &[&str]) -> Result<()> {
    succeeded(&run(args)?, || format!("'{}' failed", args.join(" ")))
}

/// Ok if the command exited 0, otherwise an error: `what` and its stderr on
/// one line.
fn succeeded(out: &std::process::Output, what: impl FnOnce() -> String) -> Result<()> {
    if out.status.success() {
        return Ok(());
    }
    err(format!(
        "{}: {}",
        what(),
        String::from_utf8_lossy(&out.stderr)
            .trim()
            .replace('\n', "; ")
    ))
}

/// Write sysctl-like files (`/proc/sys/...`) inside namespace `ns`.
fn write_proc(ns: &str, kv: &[(&str, &str)]) -> Result<()> {
    in_netns(ns, || {
        for (k, v) in kv {
            fs::write(k, v).map_err(|e| TestbedError(format!("namespace '{ns}': {k}: {e}")))?;
        }
        Ok(())
    })?
}

/// Counters of interface `ifname` in namespace `ns`.
pub fn iface_stats(ns: &str, ifname: &str) -> Result<IfaceStats> {
    // /proc/thread-self/net is the network namespace of this thread.
    let text = in_netns(ns, || fs::read_to_string("/proc/thread-self/net/dev"))?
        .map_err(|e| TestbedError(format!("namespace '{ns}': /proc/net/dev: {e}")))?;
    parse_net_dev(&text, ifname).ok_or_else(|| {
        TestbedError(format!(
            "no interface named '{ifname}' in network namespace '{ns}'"
        ))
    })
}

fn parse_net_dev(text: &str, ifname: &str) -> Option<IfaceStats> {
    for line in text.lines().skip(2) {
        let (name, rest) = line.split_once(':')?;
        if name.trim() != ifname {
            continue;
        }
        let v: Vec<u64> = rest
            .split_whitespace()
            .map(|x| x.parse().unwrap_or(0))
            .collect();
        if v.len() < 12 {
            return None;
        }
        return Some(IfaceStats {
            rx_bytes: v[0],
            rx_packets: v[1],
            rx_errors: v[2],
            rx_dropped: v[3],
            tx_bytes: v[8],
            tx_packets: v[9],
            tx_errors: v[10],
            tx_dropped: v[11],
        });
    }
    None
}

/// The XDP drop counters of a veth that the interface counters of both
/// ends hold. The kernel's veth (drivers/net/veth.c, `veth_get_stats64`)
/// counts a frame that one end could not put into its peer's ring in the
/// sender's tx_dropped and again in the receiver's rx_dropped: an
/// XDP_REDIRECT into the veth (`peer_tq_xdp_xmit_err` of the peer's
/// queue, shown by `ethtool -S` of the sender as `tx_queue_N_xdp_xmit_errors`)
/// and an XDP_TX out of it (`xdp_tx_err`, `rx_queue_N_xdp_tx_errors`).
/// A sum of both ends' drops counts these once only after subtracting them.
/// (A full ring under the skb path, `veth_xmit`, is counted at the sender
/// only, as tx_dropped.)
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VethXdpErrors {
    /// `tx_queue_N_xdp_xmit_errors`, summed over queues.
    pub xmit_errors: u64,
    /// `rx_queue_N_xdp_tx_errors`, summed over queues.
    pub tx_errors: u64,
}

impl VethXdpErrors {
    /// Both kinds: the frames in the sender's tx_dropped that the peer's
    /// rx_dropped holds too.
    pub fn counted_twice(&self) -> u64 {
        self.xmit_errors + self.tx_errors
    }

    /// The change since `before` (0 where a counter went back: a veth
    /// made again).
    pub fn since(&self, before: &VethXdpErrors) -> VethXdpErrors {
        VethXdpErrors {
            xmit_errors: self.xmit_errors.saturating_sub(before.xmit_errors),
            tx_errors: self.tx_errors.saturating_sub(before.tx_errors),
        }
    }
}

/// [`VethXdpErrors`] of `ifname` in namespace `ns` (`ethtool -S`, run from
/// a thread in that namespace). None: ethtool cannot run, or the interface
/// has no such counters (not a veth).
pub fn veth_xdp_errors(ns: &str, ifname: &str) -> Option<VethXdpErrors> {
    use crate::pgroup::{run_bounded, scratch_file, Ended};
    use std::io::{Read, Seek};
    // Bounded like every command the bench runs: ethtool is not expected
    // to hang, but the bench never waits forever on another process.
    let mut out = scratch_file().ok()?;
    let ended = in_netns(ns, || {
        run_bounded(
            Command::new("ethtool").args(["-S", ifname]),
            &out,
            std::time::Duration::from_secs(5),
        )
    })
    .ok()?
    .ok()?;
    if !matches!(ended, Ended::Exited(st) if st.success()) {
        return None;
    }
    let mut text = String::new();
    out.rewind().ok()?;
    out.read_to_string(&mut text).ok()?;
    parse_veth_xdp_errors(&text)
}

fn parse_veth_xdp_errors(text: &str) -> Option<VethXdpErrors> {
    let mut e = VethXdpErrors::default();
    let mut found = false;
    for (k, v) in text.lines().filter_map(|l| l.split_once(':')) {
        let (k, v) = (k.trim(), v.trim().parse::<u64>().unwrap_or(0));
        if k.starts_with("tx_queue_") && k.ends_with("_xdp_xmit_errors") {
            e.xmit_errors += v;
            found = true;
        } else if k.starts_with("rx_queue_") && k.ends_with("_xdp_tx_errors") {
            e.tx_errors += v;
            found = true;
        }
    }
    found.then_some(e)
}

/// Run `cmd` in namespace `ns` (`ip netns exec`, which also mounts that
/// namespace's /sys) and return its output.
pub fn exec_in(ns: &str, cmd: &[&str]) -> Result<Output> {
    if cmd.is_empty() {
        return err("exec: no command given");
    }
    let mut a = vec!["ip", "netns", "exec", ns];
    a.extend_from_slice(cmd);
    run(&a)
}

/// Run a shell script that writes /sys files of namespace `ns`: /sys shows
/// the namespace it was mounted in, and `ip netns exec` mounts the target
/// namespace's sysfs (a thread that only enters the namespace, as
/// [`write_proc`] does, would write the host's).
fn sysfs_script(ns: &str, script: &str, what: impl FnOnce() -> String) -> Result<()> {
    succeeded(&exec_in(ns, &["sh", "-c", script])?, what)
}

fn hash(s: &str) -> u32 {
    // FNV-1a.
    let mut h: u32 = 0x811c_9dc5;
    for b in s.bytes() {
        h ^= b as u32;
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

fn validate_name(n: &str) -> Result<()> {
    if n.is_empty()
        || n.len() > 24
        || !n
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return err(format!(
            "test bed name '{n}': use 1 to 24 letters, digits, '-' or '_'"
        ));
    }
    Ok(())
}

fn record_path(name: &str) -> PathBuf {
    Path::new(STATE_DIR).join(format!("{name}.json"))
}

fn write_record(info: &TestbedInfo) -> Result<()> {
    let p = record_path(&info.name);
    let tmp = p.with_extension(format!("json.tmp{}", std::process::id()));
    let text = serde_json::to_string_pretty(info)
        .map_err(|e| TestbedError(format!("test bed '{}': {e}", info.name)))?;
    fs::write(&tmp, text + "\n")
        .and_then(|_| fs::rename(&tmp, &p))
        .map_err(|e| {
            let _ = fs::remove_file(&tmp);
            TestbedError(format!("{}: {e}", p.display()))
        })
}

/// Claim the name: create the record exclusively.
fn claim_record(info: &TestbedInfo) -> Result<()> {
    fs::create_dir_all(STATE_DIR).map_err(|e| TestbedError(format!("{STATE_DIR}: {e}")))?;
    let p = record_path(&info.name);
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&p)
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                TestbedError(format!(
                    "test bed '{}' already exists ({}); remove it with 'linerate testbed down --name {}'",
                    info.name,
                    p.display(),
                    info.name
                ))
            } else {
                TestbedError(format!("{}: {e}", p.display()))
            }
        })?;
    let text = serde_json::to_string_pretty(info).unwrap_or_default();
    f.write_all(text.as_bytes())
        .map_err(|e| TestbedError(format!("{}: {e}", p.display())))
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

fn default_name() -> String {
    loop {
        let c = COUNTER.fetch_add(1, Ordering::Relaxed);
        let n = format!("lr{}{}", std::process::id(), to_base26(c));
        let taken = record_path(&n).exists()
            || ["gen", "dut", "sink"]
                .iter()
                .any(|r| netns_exists(&format!("{n}-{r}")));
        if !taken {
            return n;
        }
    }
}

fn to_base26(mut c: u32) -> String {
    let mut s = Vec::new();
    loop {
        s.push(b'a' + (c % 26) as u8);
        c /= 26;
        if c == 0 {
            break;
        }
    }
    s.reverse();
    String::from_utf8(s).unwrap_or_default()
}

fn plan(name: &str, cfg: &TestbedConfig) -> TestbedInfo {
    let h = hash(name);
    let x = (h % 254 + 1) as u8;
    let h16 = (h >> 8) as u16;
    let mac = |n: u8| MacAddr([0x02, 0x6c, (h16 >> 8) as u8, h16 as u8, 0, n]);
    let v6 = |net: u16, host: u16| Ipv6Addr::new(0xfd00, 0x6c72, h16, net, 0, 0, 0, host);
    let ns_gen = format!("{name}-gen");
    let ns_dut = format!("{name}-dut");
    let ns_sink = format!("{name}-sink");
    let iface = |ns: &str, ifn: &str, n: u8, net: u8, host: u8| Iface {
        ns: ns.to_string(),
        name: ifn.to_string(),
        mac: mac(n),
        ipv4: Ipv4Addr::new(10, x, net, host),
        prefix4: 24,
        ipv6: v6(net as u16, host as u16),
        prefix6: 64,
    };
    TestbedInfo {
        name: name.to_string(),
        gen: iface(&ns_gen, IF_GEN, 1, 1, 1),
        dut_in: iface(&ns_dut, IF_DUT_IN, 2, 1, 2),
        dut_out: iface(&ns_dut, IF_DUT_OUT, 3, 2, 1),
        sink: iface(&ns_sink, IF_SINK, 4, 2, 2),
        ns_gen,
        ns_dut,
        ns_sink,
        queues: cfg.queues,
        mtu: cfg.mtu,
        threaded_napi: cfg.threaded_napi,
        napi_threads: Vec::new(),
        rps_cpu: None,
        dut_mode: DutMode::None,
        owner_pid: std::process::id(),
        complete: false,
    }
}

/// Pin thread `pid` to `cpu` (`linerate_io::host::pin_thread`).
pub fn pin_thread(pid: u32, cpu: usize) -> Result<()> {
    linerate_io::host::pin_thread(pid, cpu).or_else(err)
}

/// NAPI instances (with kthread pids when threaded) of interface `ifname`
/// in namespace `ns`.
pub fn napi_of(ns: &str, ifname: &str) -> Result<Vec<NapiEntry>> {
    let ifname_c = std::ffi::CString::new(ifname)
        .map_err(|_| TestbedError(format!("bad interface name '{ifname}'")))?;
    in_netns(ns, || {
        // SAFETY: valid C string.
        let idx = unsafe { libc::if_nametoindex(ifname_c.as_ptr()) };
        if idx == 0 {
            return err(format!(
                "no interface named '{ifname}' in network namespace '{ns}'"
            ));
        }
        let all = napi::napi_list()
            .map_err(|e| TestbedError(format!("namespace '{ns}': NAPI list: {e}")))?;
        Ok(all.into_iter().filter(|n| n.ifindex == idx).collect())
    })?
}

// ------------------------------------------------------------- the bed

impl Testbed {
    /// Build a bed. On error everything made so far is removed.
    pub fn up(cfg: &TestbedConfig) -> Result<Testbed> {
        if cfg.queues == 0 || cfg.queues > 64 {
            return err(format!("queues {}: use 1 to 64", cfg.queues));
        }
        if cfg.napi_cpu.is_some() && !cfg.threaded_napi {
            return err("napi_cpu needs threaded_napi");
        }
        let name = match &cfg.name {
            Some(n) => {
                validate_name(n)?;
                n.clone()
            }
            None => default_name(),
        };
        let info = plan(&name, cfg);
        for ns in info.namespaces() {
            if netns_exists(ns) {
                return err(format!(
                    "test bed '{name}': network namespace '{ns}' already exists"
                ));
            }
        }
        claim_record(&info)?;
        // The watchdog of this process (if any) removes the bed if we die.
        crate::guard::register_bed(&name);
        let mut bed = Testbed {
            info,
            created: Vec::new(),
            keep: false,
            removed: false,
        };
        // On error `bed` drops here and removes what was created.
        bed.build(cfg)?;
        bed.info.complete = true;
        write_record(&bed.info)?;
        Ok(bed)
    }

    fn build(&mut self, cfg: &TestbedConfig) -> Result<()> {
        let i = self.info.clone();
        for ns in i.namespaces() {
            run_ok(&["ip", "netns", "add", ns])?;
            self.created.push(ns.to_string());
            let d6 = if cfg.ipv6 { "0" } else { "1" };
            // Defaults apply to devices created later in this namespace.
            write_proc(
                ns,
                &[
                    ("/proc/sys/net/ipv6/conf/default/disable_ipv6", d6),
                    ("/proc/sys/net/ipv6/conf/default/addr_gen_mode", "1"),
                    ("/proc/sys/net/ipv6/conf/default/accept_dad", "0"),
                    ("/proc/sys/net/ipv6/conf/default/dad_transmits", "0"),
                    ("/proc/sys/net/ipv6/conf/default/router_solicitations", "0"),
                    ("/proc/sys/net/ipv6/conf/default/accept_ra", "0"),
                    ("/proc/sys/net/ipv6/conf/all/accept_ra", "0"),
                ],
            )?;
            run_ok(&["ip", "-n", ns, "link", "set", "lo", "up"])?;
        }
        let q = cfg.queues.to_string();
        for (a, b) in [(&i.gen, &i.dut_in), (&i.dut_out, &i.sink)] {
            let (ma, mb) = (a.mac.to_string(), b.mac.to_string());
            run_ok(&[
                "ip",
                "link",
                "add",
                &a.name,
                "netns",
                &a.ns,
                "address",
                &ma,
                "numtxqueues",
                &q,
                "numrxqueues",
                &q,
                "type",
                "veth",
                "peer",
                "name",
                &b.name,
                "netns",
                &b.ns,
                "address",
                &mb,
                "numtxqueues",
                &q,
                "numrxqueues",
                &q,
            ])?;
        }
        for f in i.ifaces() {
            let ns = f.ns.as_str();
            let dev = f.name.as_str();
            if let Some(m) = cfg.mtu {
                run_ok(&[
                    "ip",
                    "-n",
                    ns,
                    "link",
                    "set",
                    "dev",
                    dev,
                    "mtu",
                    &m.to_string(),
                ])?;
            }
            // NOARP: no ARP/ND and no solicited-node MLD; multicast off: no
            // MLD reports when IPv6 forwarding joins all-routers.
            run_ok(&[
                "ip",
                "-n",
                ns,
                "link",
                "set",
                "dev",
                dev,
                "arp",
                "off",
                "multicast",
                "off",
            ])?;
            let a4 = format!("{}/{}", f.ipv4, f.prefix4);
            run_ok(&["ip", "-n", ns, "addr", "add", &a4, "dev", dev])?;
            if cfg.ipv6 {
                let a6 = format!("{}/{}", f.ipv6, f.prefix6);
                run_ok(&[
                    "ip", "-n", ns, "-6", "addr", "add", &a6, "dev", dev, "nodad",
                ])?;
            }
        }
        // Static neighbours: each end knows its peer.
        for (me, peer) in [
            (&i.gen, &i.dut_in),
            (&i.dut_in, &i.gen),
            (&i.dut_out, &i.sink),
            (&i.sink, &i.dut_out),
        ] {
            self.neigh(me, peer, cfg.ipv6)?;
        }
        // veth has NAPI (needed for threaded NAPI) only when GRO is
        // *requested* (ethtool -K gro on) or an XDP program is attached.
        let gro = match cfg.gro {
            Some(false) if cfg.threaded_napi => {
                return err("threaded NAPI on veth needs GRO on (drop gro off)")
            }
            None if cfg.threaded_napi => Some(true),
            g => g,
        };
        for f in i.ifaces() {
            run_ok(&["ip", "-n", &f.ns, "link", "set", "dev", &f.name, "up"])?;
        }
        // GRO after link up: veth (6.18) enables NAPI for a GRO request
        // made while the device is up; a request made before is not enough
        // for frames arriving by ndo_xdp_xmit from the peer.
        for f in i.ifaces() {
            if let Some(g) = gro {
                let out = exec_in(
                    &f.ns,
                    &[
                        "ethtool",
                        "-K",
                        &f.name,
                        "gro",
                        if g { "on" } else { "off" },
                    ],
                )?;
                succeeded(&out, || format!("ethtool -K {} gro in '{}'", f.name, f.ns))?;
            }
        }
        // Routes (after link up, which adds the connected routes): gen and sink reach the far subnet through the DuT.
        for (me, gw) in [(&i.gen, &i.dut_in), (&i.sink, &i.dut_out)] {
            let g4 = gw.ipv4.to_string();
            run_ok(&[
                "ip", "-n", &me.ns, "route", "add", "default", "via", &g4, "dev", &me.name,
            ])?;
            if cfg.ipv6 {
                let g6 = gw.ipv6.to_string();
                run_ok(&[
                    "ip", "-n", &me.ns, "-6", "route", "add", "default", "via", &g6, "dev",
                    &me.name,
                ])?;
            }
        }
        if cfg.threaded_napi {
            self.threaded_napi(cfg.napi_cpu, cfg.threaded_dut_only)?;
        }
        if let Some(cpu) = cfg.rps_cpu {
            self.steer_rx(cpu)?;
        }
        Ok(())
    }

    /// RPS: every RX queue of d0, and of d1 (which receives only in
    /// traffic both ways), steers to `cpu` (a hex CPU mask in
    /// `queues/rx-N/rps_cpus`; the stack then queues each received skb to
    /// that CPU's backlog, `net.core.netdev_max_backlog` deep).
    fn steer_rx(&mut self, cpu: usize) -> Result<()> {
        if cpu >= 64 {
            return err(format!("RPS CPU {cpu}: at most 63"));
        }
        let mask = format!("{:x}", 1u64 << cpu);
        for f in [self.info.dut_in.clone(), self.info.dut_out.clone()] {
            let script = format!(
                "for q in /sys/class/net/{}/queues/rx-*; do echo {mask} > $q/rps_cpus || exit 1; done",
                f.name
            );
            sysfs_script(&f.ns, &script, || {
                format!("RPS of {} in '{}' to CPU {cpu}", f.name, f.ns)
            })?;
        }
        self.info.rps_cpu = Some(cpu);
        Ok(())
    }

    fn neigh(&self, me: &Iface, peer: &Iface, v6: bool) -> Result<()> {
        let m = peer.mac.to_string();
        let a4 = peer.ipv4.to_string();
        run_ok(&[
            "ip",
            "-n",
            &me.ns,
            "neigh",
            "replace",
            &a4,
            "lladdr",
            &m,
            "dev",
            &me.name,
            "nud",
            "permanent",
        ])?;
        if v6 {
            let a6 = peer.ipv6.to_string();
            run_ok(&[
                "ip",
                "-n",
                &me.ns,
                "-6",
                "neigh",
                "replace",
                &a6,
                "lladdr",
                &m,
                "dev",
                &me.name,
                "nud",
                "permanent",
            ])?;
        }
        Ok(())
    }

    fn threaded_napi(&mut self, cpu: Option<usize>, dut_only: bool) -> Result<()> {
        let mut threads = Vec::new();
        let dut_ns = self.info.ns_dut.clone();
        for f in self.info.ifaces() {
            if dut_only && f.ns != dut_ns {
                continue;
            }
            let path = format!("/sys/class/net/{}/threaded", f.name);
            sysfs_script(&f.ns, &format!("echo 1 > {path}"), || {
                format!("threaded NAPI on {} in '{}'", f.name, f.ns)
            })?;
            for n in napi_of(&f.ns, &f.name)? {
                let Some(pid) = n.pid else { continue };
                if let Some(c) = cpu {
                    pin_thread(pid, c)?;
                }
                threads.push(NapiThread {
                    ns: f.ns.clone(),
                    ifname: f.name.clone(),
                    napi_id: n.napi_id,
                    pid,
                    cpu,
                });
            }
        }
        self.info.napi_threads = threads;
        Ok(())
    }

    /// Run s0's NAPI (the sink's receive work) in a kernel thread pinned
    /// to `cpu` (veth otherwise runs it in the softirq of the CPU that
    /// transmits to s0). Needs NAPI on s0 (GRO on, or an XDP program).
    pub fn sink_napi_thread(&mut self, cpu: usize) -> Result<()> {
        let (ns, ifname) = (self.info.ns_sink.clone(), self.info.sink.name.clone());
        let path = format!("/sys/class/net/{ifname}/threaded");
        sysfs_script(&ns, &format!("echo 1 > {path}"), || {
            format!("threaded NAPI on {ifname} in '{ns}'")
        })?;
        let napis = napi_of(&ns, &ifname)?;
        if napis.iter().all(|n| n.pid.is_none()) {
            return err(format!(
                "threaded NAPI on {ifname} in '{ns}': no NAPI thread appeared (GRO off and no XDP program?)"
            ));
        }
        for n in napis {
            let Some(pid) = n.pid else { continue };
            pin_thread(pid, cpu)?;
            self.info.napi_threads.push(NapiThread {
                ns: ns.clone(),
                ifname: ifname.clone(),
                napi_id: n.napi_id,
                pid,
                cpu: Some(cpu),
            });
        }
        Ok(())
    }

    pub fn info(&self) -> &TestbedInfo {
        &self.info
    }
    pub fn name(&self) -> &str {
        &self.info.name
    }
    pub fn ns_gen(&self) -> &str {
        &self.info.ns_gen
    }
    pub fn ns_dut(&self) -> &str {
        &self.info.ns_dut
    }
    pub fn ns_sink(&self) -> &str {
        &self.info.ns_sink
    }
    /// g0 in the gen namespace.
    pub fn gen(&self) -> &Iface {
        &self.info.gen
    }
    /// d0 in the DuT namespace (faces gen).
    pub fn dut_in(&self) -> &Iface {
        &self.info.dut_in
    }
    /// d1 in the DuT namespace (faces sink).
    pub fn dut_out(&self) -> &Iface {
        &self.info.dut_out
    }
    /// s0 in the sink namespace.
    pub fn sink(&self) -> &Iface {
        &self.info.sink
    }

    /// Addresses a generator on g0 uses for the current DuT mode.
    pub fn frame_addrs(&self) -> FrameAddrs {
        FrameAddrs::for_mode(&self.info, self.info.dut_mode)
    }

    /// Run a command in one of the bed's namespaces.
    pub fn exec_in(&self, ns: &str, cmd: &[&str]) -> Result<Output> {
        exec_in(ns, cmd)
    }

    /// Counters of an interface of the bed.
    pub fn iface_stats(&self, ns: &str, ifname: &str) -> Result<IfaceStats> {
        iface_stats(ns, ifname)
    }

    /// Run `f` inside one of the bed's namespaces (see [`in_netns`]).
    pub fn in_netns<T: Send>(&self, ns: &str, f: impl FnOnce() -> T + Send) -> Result<T> {
        in_netns(ns, f)
    }

    /// Make the DuT namespace a router: IPv4 and IPv6 forwarding on.
    /// The generator sends to dst MAC = d0's MAC, dst IP = sink's IP.
    pub fn enable_ip_forwarding(&mut self) -> Result<()> {
        if self.info.dut_mode == DutMode::Bridge {
            return err(format!(
                "test bed '{}': the DuT is a bridge already",
                self.info.name
            ));
        }
        let mut kv = vec![("/proc/sys/net/ipv4/ip_forward", "1")];
        if netns_has_ipv6(&self.info.ns_dut) {
            kv.push(("/proc/sys/net/ipv6/conf/all/forwarding", "1"));
        }
        write_proc(&self.info.ns_dut, &kv)?;
        self.info.dut_mode = DutMode::IpForward;
        self.save()
    }

    /// Make the DuT namespace a switch: bridge br0 with ports d0 and d1,
    /// static FDB entries for g0 and s0. The generator sends to dst MAC =
    /// s0's MAC. gen and sink also get host routes and neighbours for each
    /// other's address on their veth, so kernel traffic crosses the bridge.
    pub fn enable_bridge(&mut self) -> Result<()> {
        if self.info.dut_mode == DutMode::IpForward {
            return err(format!(
                "test bed '{}': the DuT does IP forwarding already",
                self.info.name
            ));
        }
        let i = self.info.clone();
        let ns = i.ns_dut.as_str();
        run_ok(&[
            "ip",
            "-n",
            ns,
            "link",
            "add",
            BRIDGE,
            "type",
            "bridge",
            "stp_state",
            "0",
            "mcast_snooping",
            "0",
        ])?;
        // No addresses and no IPv6 on the bridge itself: it sends nothing.
        let _ = write_proc(ns, &[("/proc/sys/net/ipv6/conf/br0/disable_ipv6", "1")]);
        run_ok(&[
            "ip",
            "-n",
            ns,
            "link",
            "set",
            "dev",
            BRIDGE,
            "arp",
            "off",
            "multicast",
            "off",
        ])?;
        for d in [&i.dut_in, &i.dut_out] {
            run_ok(&["ip", "-n", ns, "addr", "flush", "dev", &d.name])?;
            run_ok(&[
                "ip", "-n", ns, "link", "set", "dev", &d.name, "master", BRIDGE,
            ])?;
        }
        for (mac, port) in [(&i.gen.mac, &i.dut_in), (&i.sink.mac, &i.dut_out)] {
            let m = mac.to_string();
            run_ok(&[
                "bridge", "-n", ns, "fdb", "replace", &m, "dev", &port.name, "master", "static",
            ])?;
        }
        run_ok(&["ip", "-n", ns, "link", "set", "dev", BRIDGE, "up"])?;
        let v6 = iface_has_ipv6(&i.ns_gen, &i.gen.name);
        for (me, peer) in [(&i.gen, &i.sink), (&i.sink, &i.gen)] {
            let h4 = format!("{}/32", peer.ipv4);
            run_ok(&["ip", "-n", &me.ns, "route", "replace", &h4, "dev", &me.name])?;
            if v6 {
                let h6 = format!("{}/128", peer.ipv6);
                run_ok(&[
                    "ip", "-n", &me.ns, "-6", "route", "replace", &h6, "dev", &me.name,
                ])?;
            }
            self.neigh(me, peer, v6)?;
        }
        self.info.dut_mode = DutMode::Bridge;
        self.save()
    }

    fn save(&self) -> Result<()> {
        write_record(&self.info)
    }

    /// Leave the bed up when this value is dropped (for `linerate testbed
    /// up` without --hold); remove it later with [`down_by_name`].
    pub fn detach(mut self) -> TestbedInfo {
        self.keep = true;
        crate::guard::keep_bed(&self.info.name);
        self.info.clone()
    }

    /// Remove the bed now, reporting the first error.
    pub fn down(mut self) -> Result<()> {
        self.removed = true;
        teardown(&self.info, Some(&self.created))
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        if self.keep || self.removed {
            return;
        }
        self.removed = true;
        if let Err(e) = teardown(&self.info, Some(&self.created)) {
            eprintln!("linerate: test bed '{}': cleanup: {e}", self.info.name);
        }
    }
}

fn netns_has_ipv6(ns: &str) -> bool {
    in_netns(ns, || Path::new("/proc/sys/net/ipv6").exists()).unwrap_or(false)
}

/// IPv6 is on for interface `ifname` of `ns` (the kernel has IPv6 and the
/// bed did not disable it there: `TestbedConfig::ipv6 = false`).
fn iface_has_ipv6(ns: &str, ifname: &str) -> bool {
    let p = format!("/proc/sys/net/ipv6/conf/{ifname}/disable_ipv6");
    in_netns(ns, move || {
        std::fs::read_to_string(&p)
            .map(|v| v.trim() == "0")
            .unwrap_or(false)
    })
    .unwrap_or(false)
}

/// Remove the bed's veths, namespaces and record. `only`: the namespaces
/// this process created (None: all three, for a recorded bed). Idempotent.
fn teardown(info: &TestbedInfo, only: Option<&[String]>) -> Result<()> {
    let mine = |ns: &str| only.is_none_or(|o| o.iter().any(|x| x == ns));
    let mut first: Option<TestbedError> = None;
    // Delete the veths explicitly: synchronous, unlike namespace teardown.
    for f in [&info.gen, &info.dut_out] {
        if mine(&f.ns) && netns_exists(&f.ns) {
            let _ = run(&["ip", "-n", &f.ns, "link", "del", "dev", &f.name]);
        }
    }
    for ns in info.namespaces() {
        if mine(ns) && netns_exists(ns) {
            if let Err(e) = run_ok(&["ip", "netns", "del", ns]) {
                first.get_or_insert(e);
            }
        }
    }
    let p = record_path(&info.name);
    if let Err(e) = fs::remove_file(&p) {
        if e.kind() != std::io::ErrorKind::NotFound {
            first.get_or_insert(TestbedError(format!("{}: {e}", p.display())));
        }
    }
    match first {
        Some(e) => Err(e),
        None => {
            crate::guard::unregister_bed(&info.name);
            Ok(())
        }
    }
}

// ------------------------------------------------- beds of other processes

/// Records of all beds in [`STATE_DIR`] (unreadable records are skipped).
pub fn list() -> Vec<TestbedInfo> {
    let mut v = Vec::new();
    let Ok(rd) = fs::read_dir(STATE_DIR) else {
        return v;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.extension().and_then(|x| x.to_str()) != Some("json") {
            continue;
        }
        if let Ok(t) = fs::read_to_string(&p) {
            if let Ok(i) = serde_json::from_str::<TestbedInfo>(&t) {
                v.push(i);
            }
        }
    }
    v.sort_by(|a, b| a.name.cmp(&b.name));
    v
}

/// The record of bed `name`.
pub fn load(name: &str) -> Result<TestbedInfo> {
    validate_name(name)?;
    let p = record_path(name);
    let t = fs::read_to_string(&p).map_err(|e| {
        TestbedError(format!(
            "test bed '{name}': {e} ({}); see 'linerate testbed status'",
            p.display()
        ))
    })?;
    serde_json::from_str(&t).map_err(|e| TestbedError(format!("{}: {e}", p.display())))
}

/// True when the bed's three namespaces exist.
pub fn is_alive(info: &TestbedInfo) -> bool {
    info.namespaces().iter().all(|n| netns_exists(n))
}

/// True when the process that made the bed still runs.
pub fn owner_alive(info: &TestbedInfo) -> bool {
    Path::new(&format!("/proc/{}", info.owner_pid)).exists()
}

/// Remove the bed recorded under `name` (from any process).
pub fn down_by_name(name: &str) -> Result<()> {
    let info = load(name)?;
    teardown(&info, None)
}

/// Remove every recorded bed; returns the names removed.
pub fn down_all() -> Result<Vec<String>> {
    let mut names = Vec::new();
    let mut first = None;
    for info in list() {
        match teardown(&info, None) {
            Ok(()) => names.push(info.name),
            Err(e) => {
                first.get_or_insert(e);
            }
        }
    }
    match first {
        Some(e) => Err(e),
        None => Ok(names),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mac_roundtrip() {
        let m: MacAddr = "02:6c:0a:ff:00:01".parse().unwrap();
        assert_eq!(m.0, [2, 0x6c, 10, 255, 0, 1]);
        assert_eq!(m.to_string(), "02:6c:0a:ff:00:01");
        assert!("02:6c".parse::<MacAddr>().is_err());
        assert!("zz:6c:0a:ff:00:01".parse::<MacAddr>().is_err());
    }

    #[test]
    fn plan_is_deterministic_and_distinct() {
        let c = TestbedConfig::default();
        let a = plan("lrx", &c);
        assert_eq!(a, plan("lrx", &c));
        let macs: Vec<_> = a.ifaces().iter().map(|f| f.mac).collect();
        for (k, m) in macs.iter().enumerate() {
            assert_eq!(m.0[0] & 0x03, 0x02, "locally administered unicast");
            assert!(!macs[..k].contains(m));
        }
        assert_eq!(a.gen.ipv4.octets()[2], 1);
        assert_eq!(a.sink.ipv4.octets()[2], 2);
        assert_eq!(a.ns_sink, "lrx-sink");
        let f = FrameAddrs::for_mode(&a, DutMode::Bridge);
        assert_eq!(f.dst_mac, a.sink.mac);
        let f = FrameAddrs::for_mode(&a, DutMode::IpForward);
        assert_eq!((f.dst_mac, f.dst_ip), (a.dut_in.mac, a.sink.ipv4));
    }

    #[test]
    fn names() {
        assert!(validate_name("lr-1_a").is_ok());
        assert!(validate_name("").is_err());
        assert!(validate_name("a/b").is_err());
        assert!(validate_name(&"x".repeat(25)).is_err());
        assert_eq!(to_base26(0), "a");
        assert_eq!(to_base26(27), "bb");
    }

    #[test]
    fn net_dev_parse() {
        let t = "Inter-|   Receive |  Transmit\n face |bytes packets\n    lo: 1 2 0 0 0 0 0 0 3 4 0 0 0 0 0 0\n  g0: 100 5 1 2 0 0 0 0 200 7 3 4 0 0 0 0\n";
        let s = parse_net_dev(t, "g0").unwrap();
        assert_eq!((s.rx_bytes, s.rx_packets, s.rx_dropped), (100, 5, 2));
        assert_eq!((s.tx_bytes, s.tx_packets, s.tx_dropped), (200, 7, 4));
        assert!(parse_net_dev(t, "d0").is_none());
    }

    #[test]
    fn veth_xdp_errors_parse() {
        // `ethtool -S` of a 2-queue veth (kernel 6.18's names).
        let t = "NIC statistics:\n     peer_ifindex: 2\n     rx_queue_0_xdp_packets: 9\n     rx_queue_0_drops: 4\n     rx_queue_0_xdp_tx_errors: 3\n     rx_queue_1_xdp_tx_errors: 1\n     tx_queue_0_xdp_xmit: 50\n     tx_queue_0_xdp_xmit_errors: 7\n     tx_queue_1_xdp_xmit_errors: 5\n";
        let e = parse_veth_xdp_errors(t).unwrap();
        assert_eq!(
            e,
            VethXdpErrors {
                xmit_errors: 12,
                tx_errors: 4
            }
        );
        assert_eq!(e.counted_twice(), 16);
        let later = VethXdpErrors {
            xmit_errors: 20,
            tx_errors: 4,
        };
        assert_eq!(later.since(&e).counted_twice(), 8);
        // Not a veth (no such counters).
        assert!(parse_veth_xdp_errors("NIC statistics:\n     rx_packets: 5\n").is_none());
    }
}
