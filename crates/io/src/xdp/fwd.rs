//! The in-kernel L2 forwarder (`linerate fwd --mode xdp A B`, the "kernel
//! module" approach): `src/xdp/fwd.bpf.c` is attached to both interfaces and
//! redirects every frame received on A out of B and every frame received on
//! B out of A through a DEVMAP, optionally rewriting the Ethernet addresses
//! per direction, and counts per direction and per CPU: received packets
//! and bytes, forwarded (redirected) packets and drops by reason, so that
//! `rx = fwd + drop_redirect + drop_malformed` holds exactly.
//!
//! # What the program cannot see
//! `fwd` counts frames handed to `bpf_redirect_map()`. The transmission
//! itself happens later, in the driver's `ndo_xdp_xmit`, and its failures
//! are not reported back to the program:
//! - **veth peers without XDP.** A veth transmits an XDP frame by putting
//!   it in its peer's XDP ring, which exists only while the peer runs NAPI,
//!   i.e. has an XDP program attached (or GRO enabled). Otherwise
//!   `veth_xdp_xmit` returns `-ENXIO` and the frame is freed: this shows up
//!   in no counter of `ip -s link` nor `ethtool -S` of either end (checked
//!   on 6.18: `tx_queue_0_xdp_xmit` and `..._xdp_xmit_errors` stay 0, the
//!   peer's rx stays 0), only in the tracepoint `xdp:xdp_devmap_xmit`
//!   (drops/err fields). A test bed must therefore attach
//!   [`crate::xdp::objects::XDP_PASS`] (or a counter, [`crate::xdp::count::XdpCount`])
//!   on the far ends of both veths, or turn GRO on there
//!   (`ethtool -K PEER gro on`, which also gives the veth a NAPI).
//! - **Full peer ring.** When the peer's XDP ring (256 frames) is full the
//!   frame is dropped and counted by the veth as
//!   `ethtool -S` of the transmitting veth (`tx_queue_N_xdp_xmit_errors`).
//!   See [`veth_xdp_xmit_errors`].

use crate::error::PortError;
use crate::xdp::count::{ifindex, map_err};
use crate::xdp::{AttachMode, XdpProgram};
use aya::maps::{Array, DevMap, DevMapHash, PerCpuArray};

/// New Ethernet addresses for one direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MacPair {
    pub dst: [u8; 6],
    pub src: [u8; 6],
}

/// MAC rewrite per direction (`None`: that direction is left as it is).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MacRewrite {
    pub a_to_b: Option<MacPair>,
    pub b_to_a: Option<MacPair>,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct FwdDir {
    ingress_ifindex: u32,
    rewrite: u32,
    dst: [u8; 6],
    src: [u8; 6],
}
// The kernel side's struct fwd_dir (src/xdp/fwd.bpf.c) asserts the same size.
const _: () = assert!(std::mem::size_of::<FwdDir>() == 20);
// SAFETY: plain old data, no padding (4 + 4 + 6 + 6 = 20, align 4).
unsafe impl aya::Pod for FwdDir {}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct RawFwdStats {
    rx: u64,
    rx_bytes: u64,
    fwd: u64,
    drop_redirect: u64,
    drop_malformed: u64,
    other: u64,
}
// The kernel side's struct fwd_stats (src/xdp/fwd.bpf.c) asserts the same size.
const _: () = assert!(std::mem::size_of::<RawFwdStats>() == 48);
// SAFETY: plain old data, no padding.
unsafe impl aya::Pod for RawFwdStats {}

/// Counters of one direction, summed over CPUs.
/// `rx == fwd + drop_redirect + drop_malformed`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct XdpFwdDir {
    pub rx: u64,
    pub rx_bytes: u64,
    /// Handed to `bpf_redirect_map()` (see the module docs for what can
    /// still be lost in the egress driver).
    pub fwd: u64,
    /// `bpf_redirect_map()` failed (no egress port in the map).
    pub drop_redirect: u64,
    /// Shorter than an Ethernet header (14 bytes).
    pub drop_malformed: u64,
}

impl XdpFwdDir {
    pub fn drops(&self) -> u64 {
        self.drop_redirect + self.drop_malformed
    }
}

/// The forwarder's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct XdpFwdCounters {
    pub a_to_b: XdpFwdDir,
    pub b_to_a: XdpFwdDir,
    /// Frames seen on an interface that is neither A nor B (passed to the
    /// stack untouched; 0 in normal operation).
    pub other: u64,
}

/// The running forwarder; dropping it detaches the program from both
/// interfaces.
pub struct XdpFwd {
    prog: XdpProgram,
    what: String,
    ifindex_a: u32,
    ifindex_b: u32,
}

impl XdpFwd {
    /// Forward between `ifname_a` and `ifname_b` (in the calling thread's
    /// network namespace) in the given attach mode.
    pub fn start(
        ifname_a: &str,
        ifname_b: &str,
        mode: AttachMode,
        rewrite: Option<MacRewrite>,
    ) -> Result<XdpFwd, PortError> {
        let what = format!("XDP forwarder '{ifname_a}'<->'{ifname_b}'");
        if ifname_a == ifname_b {
            return Err(PortError::new(format!(
                "{what}: the two interfaces must differ"
            )));
        }
        let ia = ifindex(ifname_a, &what)?;
        let ib = ifindex(ifname_b, &what)?;
        let mut prog = XdpProgram::load(&crate::xdp::objects::XDP_FWD.0, "xdp_fwd", &what)?;
        let rw = rewrite.unwrap_or_default();
        {
            let e = prog.ebpf_mut();
            let map = e
                .map_mut("fwd_cfg")
                .ok_or_else(|| map_err(&what, "fwd_cfg", "missing"))?;
            let mut cfg: Array<_, FwdDir> =
                Array::try_from(map).map_err(|e| map_err(&what, "fwd_cfg", e))?;
            for (i, (ingress, mac)) in [(ia, rw.a_to_b), (ib, rw.b_to_a)].into_iter().enumerate() {
                let mut d = FwdDir {
                    ingress_ifindex: ingress,
                    ..Default::default()
                };
                if let Some(m) = mac {
                    d.rewrite = 1;
                    d.dst = m.dst;
                    d.src = m.src;
                }
                cfg.set(i as u32, d, 0)
                    .map_err(|e| map_err(&what, "fwd_cfg", e))?;
            }
            let map = e
                .map_mut("tx_ports")
                .ok_or_else(|| map_err(&what, "tx_ports", "missing"))?;
            let mut ports = DevMap::try_from(map).map_err(|e| map_err(&what, "tx_ports", e))?;
            ports
                .set(0, ib, None, 0)
                .map_err(|e| map_err(&what, "tx_ports", e))?;
            ports
                .set(1, ia, None, 0)
                .map_err(|e| map_err(&what, "tx_ports", e))?;
        }
        // Both attached or neither: an error drops `prog`, which detaches A.
        prog.attach(ia, mode)?;
        prog.attach(ib, mode)?;
        Ok(XdpFwd {
            prog,
            what,
            ifindex_a: ia,
            ifindex_b: ib,
        })
    }

    /// The interface indexes of A and B.
    pub fn ifindexes(&self) -> (u32, u32) {
        (self.ifindex_a, self.ifindex_b)
    }

    /// The counters summed over CPUs (one map read).
    pub fn try_counters(&self) -> Result<XdpFwdCounters, PortError> {
        let map = self
            .prog
            .ebpf()
            .map("fwd_stats")
            .ok_or_else(|| map_err(&self.what, "fwd_stats", "missing"))?;
        let arr: PerCpuArray<_, RawFwdStats> =
            PerCpuArray::try_from(map).map_err(|e| map_err(&self.what, "fwd_stats", e))?;
        let mut c = XdpFwdCounters::default();
        for (k, dir) in [(0u32, &mut c.a_to_b), (1, &mut c.b_to_a)] {
            let per_cpu = arr
                .get(&k, 0)
                .map_err(|e| map_err(&self.what, "fwd_stats", e))?;
            for v in per_cpu.iter() {
                dir.rx += v.rx;
                dir.rx_bytes += v.rx_bytes;
                dir.fwd += v.fwd;
                dir.drop_redirect += v.drop_redirect;
                dir.drop_malformed += v.drop_malformed;
                c.other += v.other;
            }
        }
        Ok(c)
    }

    /// The counters summed over CPUs; zeros if the map cannot be read
    /// (which does not happen while the program is loaded).
    pub fn counters(&self) -> XdpFwdCounters {
        self.try_counters().unwrap_or_default()
    }
}

/// The benchmark reference "bare XDP_REDIRECT" (`src/xdp/redirect_bare.bpf.c`):
/// a DEVMAP_HASH redirect A<->B keyed by the ingress ifindex, with no
/// counters and no checks. Detached on drop.
pub struct XdpRedirectBare {
    _prog: XdpProgram,
}

impl XdpRedirectBare {
    pub fn start(ifname_a: &str, ifname_b: &str, mode: AttachMode) -> Result<Self, PortError> {
        let what = format!("bare XDP_REDIRECT '{ifname_a}'<->'{ifname_b}'");
        let ia = ifindex(ifname_a, &what)?;
        let ib = ifindex(ifname_b, &what)?;
        let mut prog = XdpProgram::load(
            &crate::xdp::objects::XDP_REDIRECT_BARE.0,
            "xdp_redirect_bare",
            &what,
        )?;
        {
            let map = prog
                .ebpf_mut()
                .map_mut("bare_ports")
                .ok_or_else(|| map_err(&what, "bare_ports", "missing"))?;
            let mut ports =
                DevMapHash::try_from(map).map_err(|e| map_err(&what, "bare_ports", e))?;
            ports
                .insert(ia, ib, None, 0)
                .map_err(|e| map_err(&what, "bare_ports", e))?;
            ports
                .insert(ib, ia, None, 0)
                .map_err(|e| map_err(&what, "bare_ports", e))?;
        }
        prog.attach(ia, mode)?;
        prog.attach(ib, mode)?;
        Ok(XdpRedirectBare { _prog: prog })
    }
}

/// Sum of the `tx_queue_N_xdp_xmit_errors` counters of `ethtool -S IFNAME` for a veth:
/// XDP frames this veth failed to put into its peer's ring (ring full).
/// Frames refused because the peer has no XDP program are *not* counted
/// there (see the module docs). Runs `ethtool` in the calling process's
/// namespace (a child process inherits the calling thread's); `None` if it cannot run or has no such counters.
pub fn veth_xdp_xmit_errors(ifname: &str) -> Option<u64> {
    let out = std::process::Command::new("ethtool")
        .args(["-S", ifname])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let mut found = false;
    let mut sum = 0u64;
    for line in text.lines() {
        let line = line.trim();
        if let Some((k, v)) = line.split_once(':') {
            if k.trim().ends_with("_xdp_xmit_errors") {
                found = true;
                sum += v.trim().parse::<u64>().unwrap_or(0);
            }
        }
    }
    found.then_some(sum)
}
