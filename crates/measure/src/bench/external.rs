//! External ports: the DuT is a black box between two interfaces of this
//! machine (another machine, a VM, a namespace the user built). No bed is
//! built: the in-kernel generator sends out of port A, the verifying sink
//! counts on port B. What the DuT needs to forward to the tester is done
//! the way RFC 2544 and TRex do it:
//! - `l2` (a switch): learning frames from port B, then from port A,
//!   before the trials (RFC 2544 section 23), and again every few seconds
//!   from port B while the run lasts, so a learning switch never floods;
//! - `l3` (a router): the tester has an address on each port and the DuT a
//!   gateway address; the gateway's MAC behind port A is resolved by ARP
//!   (RFC 2544 section 25), and the DuT's ARP requests for the tester's
//!   address on port B are answered while it runs (the sink's XDP program
//!   passes them, uncounted, to a packet socket that replies).
//!
//! Nothing on the interfaces is changed: no address, no sysctl; the XDP
//! program (the sink on B) hangs off a BPF link, which the kernel removes
//! when the process ends, however it ends.
//!
//! Guards, since a port named by mistake is one of the machine's own
//! links: a port that holds a default route, has a global address or is
//! enslaved to a bridge or bond is refused before anything is sent unless
//! it is in `force_ports` ([`super::own_link`]); `--max-rate` caps every
//! trial ([`super::rfc2544::Rfc2544Config::max_rate`]); a port whose link
//! goes down stops the run at the next trial, the sink's program detached
//! on the way out.

use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the tester must do for the DuT to forward to it.
#[derive(Clone, Debug, PartialEq)]
pub enum ExtMode {
    /// A switch: learning frames.
    L2,
    /// A router: the tester's address and the DuT's gateway on each port.
    L3 { a: L3Port, b: L3Port },
}

/// The tester's address on a port and the DuT's address there (the
/// gateway the tester sends to).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct L3Port {
    pub ip: Ipv4Addr,
    pub gateway: Ipv4Addr,
}

/// Two interfaces of this machine with a DuT between them.
#[derive(Clone, Debug, PartialEq)]
pub struct External {
    /// The generator's interface (traffic leaves here towards the DuT).
    pub port_a: String,
    /// The sink's interface (traffic from the DuT arrives here).
    pub port_b: String,
    pub mode: ExtMode,
    /// Ports measured even though they look like the machine's own links
    /// (`--force-port`).
    pub force_ports: Vec<String>,
}

impl External {
    /// The ports may be used: two different ones, neither one of the
    /// machine's own links unless forced, and every forced one a port. An
    /// error is one line naming the option and the check that failed.
    pub fn check(&self) -> Result<(), String> {
        if self.port_a == self.port_b {
            return Err(format!("--port-a and --port-b are both {}", self.port_a));
        }
        if let Some(f) = self
            .force_ports
            .iter()
            .find(|f| **f != self.port_a && **f != self.port_b)
        {
            return Err(format!(
                "--force-port {f}: not --port-a ({}) or --port-b ({})",
                self.port_a, self.port_b
            ));
        }
        for (opt, p) in self.ports() {
            if !self.force_ports.contains(p) {
                super::own_link::refuse_own(opt, p)?;
            }
        }
        Ok(())
    }

    /// (option, interface) of both ports.
    fn ports(&self) -> [(&'static str, &String); 2] {
        [("--port-a", &self.port_a), ("--port-b", &self.port_b)]
    }
}

/// Between the learning frames of port B, of port A and the first trial.
pub const LEARNING_GAP: Duration = Duration::from_millis(100);

/// RFC 2544 section 12's addresses for a switch (198.18.0.0/15, the
/// benchmarking range): the generator's and the sink's.
pub const L2_IPS: (Ipv4Addr, Ipv4Addr) =
    (Ipv4Addr::new(198, 18, 0, 1), Ipv4Addr::new(198, 19, 0, 1));

/// The MAC address of `ifname` in this namespace; an error names it.
pub fn iface_mac(ifname: &str) -> Result<[u8; 6], String> {
    if ifname.is_empty() || ifname.contains('/') || ifname.len() > 15 {
        return Err(format!("{ifname:?}: not an interface name"));
    }
    let p = format!("/sys/class/net/{ifname}/address");
    let text = std::fs::read_to_string(&p).map_err(|_| format!("no interface {ifname:?} here"))?;
    let mac: crate::testbed::MacAddr = text
        .trim()
        .parse()
        .map_err(|_| format!("{ifname}: no Ethernet address ({})", text.trim()))?;
    Ok(mac.0)
}

/// Whether `ifname` is up (its operational state is "up" or "unknown",
/// which some virtual drivers report).
pub fn iface_up(ifname: &str) -> bool {
    operstate(ifname).is_some_and(|s| matches!(s.as_str(), "up" | "unknown"))
}

/// The operational state of `ifname` ("up", "down", "lowerlayerdown", ...).
fn operstate(ifname: &str) -> Option<String> {
    if ifname.is_empty() || ifname.contains('/') || ifname.starts_with('.') {
        return None;
    }
    std::fs::read_to_string(format!("/sys/class/net/{ifname}/operstate"))
        .ok()
        .map(|s| s.trim().to_string())
}

/// Both ports up, or an error naming the first that is not.
fn links_up(ext: &External) -> Result<(), String> {
    for (opt, p) in ext.ports() {
        if !iface_up(p) {
            return Err(format!(
                "{opt} {p}: link down (operstate {}): run stopped",
                operstate(p).unwrap_or_else(|| "gone".into())
            ));
        }
    }
    Ok(())
}

/// Trials that stop the run when a port's link goes down: both links are
/// looked at before and after every trial (a trial on a dead link measures
/// nothing, and the run's error says which link it was).
struct Watched<'t, T> {
    inner: &'t mut T,
    ext: &'t External,
}

impl<T: super::rfc2544::Trials> super::rfc2544::Trials for Watched<'_, T> {
    fn trial(
        &mut self,
        spec: &super::rfc2544::TrialSpec,
    ) -> Result<super::rfc2544::TrialRecord, String> {
        links_up(self.ext)?;
        let rec = self.inner.trial(spec)?;
        links_up(self.ext)?;
        Ok(rec)
    }

    fn stopped(&self) -> bool {
        self.inner.stopped()
    }
}

/// A raw packet socket on one interface of this namespace, for ARP and
/// learning frames and the switch study's probe trickle (a few frames or a
/// few ten thousand a second, not the measured traffic of a throughput
/// test). `proto` 0: it sends only. Receives wait at most 100 ms.
pub(crate) struct Raw(i32);

impl Raw {
    pub(crate) fn open(ifname: &str, proto: u16) -> Result<Raw, String> {
        let c = std::ffi::CString::new(ifname).map_err(|e| e.to_string())?;
        // SAFETY: plain socket calls on a fresh fd with valid arguments.
        unsafe {
            let idx = libc::if_nametoindex(c.as_ptr()) as i32;
            if idx == 0 {
                return Err(format!("no interface {ifname:?} here"));
            }
            let fd = libc::socket(libc::AF_PACKET, libc::SOCK_RAW, proto.to_be() as i32);
            if fd < 0 {
                return Err(format!(
                    "{ifname}: packet socket: {}",
                    std::io::Error::last_os_error()
                ));
            }
            let mut sll: libc::sockaddr_ll = std::mem::zeroed();
            sll.sll_family = libc::AF_PACKET as u16;
            sll.sll_protocol = proto.to_be();
            sll.sll_ifindex = idx;
            if libc::bind(
                fd,
                &sll as *const _ as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            ) != 0
            {
                let e = std::io::Error::last_os_error();
                libc::close(fd);
                return Err(format!("{ifname}: bind: {e}"));
            }
            let tv = libc::timeval {
                tv_sec: 0,
                tv_usec: 100_000,
            };
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                &tv as *const _ as *const libc::c_void,
                std::mem::size_of::<libc::timeval>() as u32,
            );
            Ok(Raw(fd))
        }
    }

    pub(crate) fn send(&self, frame: &[u8]) -> Result<(), String> {
        // SAFETY: frame is valid for its length; fd is ours.
        let n = unsafe { libc::send(self.0, frame.as_ptr().cast(), frame.len(), 0) };
        if n < 0 {
            return Err(format!("send: {}", std::io::Error::last_os_error()));
        }
        Ok(())
    }

    /// One frame, or None after the 100 ms timeout.
    pub(crate) fn recv(&self, buf: &mut [u8]) -> Option<usize> {
        // SAFETY: buf is valid for its length; fd is ours.
        let n = unsafe { libc::recv(self.0, buf.as_mut_ptr().cast(), buf.len(), 0) };
        (n > 0).then_some(n as usize)
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        // SAFETY: our fd.
        unsafe { libc::close(self.0) };
    }
}

const ETH_P_ARP: u16 = 0x0806;

/// An ARP frame (Ethernet header + ARP, padded to 60 bytes).
fn arp_frame(
    op: u16,
    dst: [u8; 6],
    src: [u8; 6],
    src_ip: Ipv4Addr,
    tmac: [u8; 6],
    tip: Ipv4Addr,
) -> Vec<u8> {
    use linerate_wire::arp::{emit, ArpRepr};
    let mut f = vec![0u8; 60];
    f[..6].copy_from_slice(&dst);
    f[6..12].copy_from_slice(&src);
    f[12..14].copy_from_slice(&ETH_P_ARP.to_be_bytes());
    let r = ArpRepr {
        operation: op,
        sender_mac: src,
        sender_ip: src_ip.octets(),
        target_mac: tmac,
        target_ip: tip.octets(),
    };
    // 14 + 28 bytes fit in 60.
    let _ = emit(&mut f[14..], &r);
    f
}

/// The MAC of `target` on `ifname`, by ARP (RFC 2544 section 25): a
/// request from `my_mac`/`my_ip` every 200 ms until a reply comes, at most
/// `limit`. An error names the interface and the address.
pub fn arp_resolve(
    ifname: &str,
    my_mac: [u8; 6],
    my_ip: Ipv4Addr,
    target: Ipv4Addr,
    limit: Duration,
) -> Result<[u8; 6], String> {
    use linerate_wire::arp::{ArpPacket, OP_REPLY, OP_REQUEST};
    let s = Raw::open(ifname, ETH_P_ARP)?;
    let req = arp_frame(OP_REQUEST, [0xff; 6], my_mac, my_ip, [0; 6], target);
    let t = Instant::now();
    let mut buf = [0u8; 2048];
    let mut last_sent: Option<Instant> = None;
    while t.elapsed() < limit {
        if last_sent.is_none_or(|l| l.elapsed() >= Duration::from_millis(200)) {
            s.send(&req)
                .map_err(|e| format!("{ifname}: ARP request: {e}"))?;
            last_sent = Some(Instant::now());
        }
        let Some(n) = s.recv(&mut buf) else { continue };
        if n < 42 || buf[12..14] != ETH_P_ARP.to_be_bytes() {
            continue;
        }
        let Ok(p) = ArpPacket::new_checked(&buf[14..n]) else {
            continue;
        };
        if p.operation() == OP_REPLY && p.sender_ip() == target.octets() {
            return Ok(p.sender_mac());
        }
    }
    Err(format!(
        "{ifname}: no ARP reply from {target} in {:.0} s (is the DuT's address there {target}, and the tester's {my_ip} in its subnet?)",
        limit.as_secs_f64()
    ))
}

/// Learning frames (RFC 2544 section 23): `n` small frames from `src`
/// out of `ifname`, so that a learning switch knows where `src` is. Sent
/// to `dst`, as the traffic of the trials is; ethertype 0x88b5 (local
/// experimental) so no stack takes them for its own.
pub fn send_learning(ifname: &str, src: [u8; 6], dst: [u8; 6], n: usize) -> Result<(), String> {
    let s = Raw::open(ifname, 0x88b5)?;
    let mut f = vec![0u8; 60];
    f[..6].copy_from_slice(&dst);
    f[6..12].copy_from_slice(&src);
    f[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
    f[14..30].copy_from_slice(b"linerate: learn ");
    for _ in 0..n {
        s.send(&f)
            .map_err(|e| format!("{ifname}: learning frame: {e}"))?;
    }
    Ok(())
}

/// A thread that runs until its value is dropped (the ARP responder, the
/// relearning): the flag it polls, set and joined on drop.
pub struct Background {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Background {
    fn spawn(f: impl FnOnce(&AtomicBool) + Send + 'static) -> Background {
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let thread = std::thread::spawn(move || f(&s2));
        Background {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Answer ARP requests for the tester's address `ip` on `ifname` with
/// `mac` (the sink's XDP program passes them up to this packet socket),
/// until the value is dropped.
pub fn arp_responder(ifname: &str, mac: [u8; 6], ip: Ipv4Addr) -> Result<Background, String> {
    use linerate_wire::arp::{ArpPacket, OP_REPLY, OP_REQUEST};
    let s = Raw::open(ifname, ETH_P_ARP)?;
    Ok(Background::spawn(move |stop| {
        let mut buf = [0u8; 2048];
        while !stop.load(Ordering::SeqCst) {
            let Some(n) = s.recv(&mut buf) else { continue };
            if n < 42 || buf[12..14] != ETH_P_ARP.to_be_bytes() {
                continue;
            }
            let Ok(p) = ArpPacket::new_checked(&buf[14..n]) else {
                continue;
            };
            if p.operation() != OP_REQUEST || p.target_ip() != ip.octets() {
                continue;
            }
            let (asker, asker_ip) = (p.sender_mac(), Ipv4Addr::from(p.sender_ip()));
            let _ = s.send(&arp_frame(OP_REPLY, asker, mac, ip, asker, asker_ip));
        }
    }))
}

/// A learning frame from port B every `every` until the value is dropped
/// (a switch ages its entries out, 300 s in Linux, and port B never sends
/// otherwise).
pub fn relearn(ifname: String, src: [u8; 6], dst: [u8; 6], every: Duration) -> Background {
    Background::spawn(move |stop| {
        let mut t = Instant::now();
        while !stop.load(Ordering::SeqCst) {
            if t.elapsed() >= every {
                let _ = send_learning(&ifname, src, dst, 1);
                t = Instant::now();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    })
}

/// Run the RFC 2544 procedures against the DuT between `ext`'s ports, in
/// one session (nothing to rebuild between searches); the result is named
/// "external". A result with a "failed: ..." status on errors.
pub fn run(
    cfg: &super::Rfc2544Bench,
    ext: &External,
    stop: &Arc<AtomicBool>,
    progress: super::Progress3,
) -> super::Rfc2544Result {
    let name = "external";
    let what = match &ext.mode {
        ExtMode::L2 => "l2 (a switch: learning frames)".to_string(),
        ExtMode::L3 { a, b } => format!(
            "l3 (a router: tester {} via gateway {} on {}, tester {} on {})",
            a.ip, a.gateway, ext.port_a, b.ip, ext.port_b
        ),
    };
    let mut r = super::Rfc2544Result::new(
        name,
        format!("the DuT between {} and {}, {what}", ext.port_a, ext.port_b),
        "unknown (external)".into(),
    );
    r.origin = format!("--port-a {} --port-b {}", ext.port_a, ext.port_b);
    let t0 = Instant::now();
    if let Err(e) = session(cfg, ext, stop, &mut r, progress) {
        r.status = if stop.load(Ordering::SeqCst) {
            "interrupted".into()
        } else {
            e.to_string()
        };
    }
    if stop.load(Ordering::SeqCst) && r.status == "ok" {
        r.status = "interrupted".into();
    }
    r.throughput_spread_own = super::rfc2544::repeat_spread(&r.sizes);
    r.throughput_spread = r.throughput_spread_own;
    r.seconds = t0.elapsed().as_secs_f64();
    progress(name, 0, &r.status);
    r
}

fn session(
    cfg: &super::Rfc2544Bench,
    ext: &External,
    stop: &Arc<AtomicBool>,
    r: &mut super::Rfc2544Result,
    progress: super::Progress3,
) -> Result<(), super::dut::DutError> {
    use super::dut::DutError;
    use super::rfc2544;
    use linerate_io::xdp::count::XdpCount;
    use linerate_io::xdp::AttachMode;
    let fail = |m: String| DutError::Failed(m);
    let name = "external";
    // Checked by the command line before the run too (a refusal is then
    // its one line); here for every other caller.
    ext.check().map_err(fail)?;
    let mac_a = iface_mac(&ext.port_a).map_err(|e| fail(format!("--port-a: {e}")))?;
    let mac_b = iface_mac(&ext.port_b).map_err(|e| fail(format!("--port-b: {e}")))?;
    for (opt, p) in ext.ports() {
        if !iface_up(p) {
            return Err(fail(format!("{opt} {p}: the interface is not up")));
        }
    }
    // The sink: native XDP where the driver has it, else generic (the
    // report says which).
    progress(name, 0, "attaching the sink");
    let (mut sink, sink_mode) = match XdpCount::attach_verified(
        &ext.port_b,
        AttachMode::Native,
        false,
        super::trial::TAG_OFFSET,
    ) {
        Ok(s) => (s, "native XDP"),
        Err(_) => (
            XdpCount::attach_verified(
                &ext.port_b,
                AttachMode::Generic,
                false,
                super::trial::TAG_OFFSET,
            )
            .map_err(|e| fail(format!("sink on {}: {e}", ext.port_b)))?,
            "generic XDP (the driver has no native XDP)",
        ),
    };
    r.description = format!("{}; sink: {sink_mode}", r.description);
    let mut _relearn = None;
    let mut _responder = None;
    let addrs = match &ext.mode {
        ExtMode::L3 { a, b } => {
            sink.pass_arp(Some(b.ip))
                .map_err(|e| fail(format!("ARP on {}: {e}", ext.port_b)))?;
            _responder = Some(arp_responder(&ext.port_b, mac_b, b.ip).map_err(fail)?);
            progress(
                name,
                0,
                &format!("resolving {} by ARP on {}", a.gateway, ext.port_a),
            );
            let gw = arp_resolve(&ext.port_a, mac_a, a.ip, a.gateway, Duration::from_secs(5))
                .map_err(fail)?;
            progress(
                name,
                0,
                &format!("{} is at {}", a.gateway, crate::testbed::MacAddr(gw)),
            );
            crate::testbed::FrameAddrs {
                src_mac: crate::testbed::MacAddr(mac_a),
                dst_mac: crate::testbed::MacAddr(gw),
                src_ip: a.ip,
                dst_ip: b.ip,
                src_ip6: std::net::Ipv6Addr::UNSPECIFIED,
                dst_ip6: std::net::Ipv6Addr::UNSPECIFIED,
            }
        }
        ExtMode::L2 => {
            // Port B first (its MAC is where the traffic goes), then A.
            progress(name, 0, "learning frames");
            send_learning(&ext.port_b, mac_b, mac_a, 4).map_err(fail)?;
            // A protocol gap (not a wait for readiness: a black box says
            // nothing of what it learnt): the switch takes in port B's
            // frames before port A's come (RFC 2544 section 23 leaves the
            // timing to the tester).
            std::thread::sleep(LEARNING_GAP);
            send_learning(&ext.port_a, mac_a, mac_b, 4).map_err(fail)?;
            std::thread::sleep(LEARNING_GAP);
            _relearn = Some(relearn(
                ext.port_b.clone(),
                mac_b,
                mac_a,
                Duration::from_secs(10),
            ));
            crate::testbed::FrameAddrs {
                src_mac: crate::testbed::MacAddr(mac_a),
                dst_mac: crate::testbed::MacAddr(mac_b),
                src_ip: L2_IPS.0,
                dst_ip: L2_IPS.1,
                src_ip6: std::net::Ipv6Addr::UNSPECIFIED,
                dst_ip6: std::net::Ipv6Addr::UNSPECIFIED,
            }
        }
    };
    let here = "/proc/self/ns/net".to_string();
    let ends = super::trial::Ends {
        gen_ns: here.clone(),
        gen_if: ext.port_a.clone(),
        sink_ns: here,
        sink_if: ext.port_b.clone(),
        dut: None,
    };
    let mut bed_trials = super::bed_trials(ends, &mut sink, addrs, cfg, stop);
    let mut trials = Watched {
        inner: &mut bed_trials,
        ext,
    };
    let size0 = cfg.procedures.sizes.first().copied().unwrap_or(64);
    let (ready_s, check) = super::ready_and_check(
        &mut trials,
        size0,
        super::dut::READY_TIMEOUT,
        &mut || Ok(()),
        stop,
        &mut |w| progress(name, 0, w),
    )?;
    r.ready_s = Some(ready_s);
    r.check = Some(check);
    let mut p = |size: u32, what: &str| progress(name, size, what);
    let reps = cfg.procedures.repetitions.max(1);
    r.sizes =
        rfc2544::first_pass(&cfg.procedures, &mut trials, reps == 1, &mut p).map_err(&fail)?;
    for rep in 1..reps {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let last = rep + 1 == reps;
        rfc2544::further_pass(
            &cfg.procedures,
            &mut trials,
            &mut r.sizes,
            rep,
            last,
            &mut p,
        )
        .map_err(&fail)?;
    }
    // Every way out of here (a link down included) drops the trials'
    // generator, the ARP responder, the relearning and the sink, whose XDP
    // program is detached then, before the run's result is reported.
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arp_frames_parse_back() {
        use linerate_wire::arp::{ArpPacket, OP_REQUEST};
        let f = arp_frame(
            OP_REQUEST,
            [0xff; 6],
            [2, 0, 0, 0, 0, 1],
            Ipv4Addr::new(10, 1, 0, 2),
            [0; 6],
            Ipv4Addr::new(10, 1, 0, 1),
        );
        assert_eq!(f.len(), 60);
        let p = ArpPacket::new_checked(&f[14..]).unwrap();
        assert_eq!(p.operation(), OP_REQUEST);
        assert_eq!(p.sender_ip(), [10, 1, 0, 2]);
        assert_eq!(p.target_ip(), [10, 1, 0, 1]);
        assert_eq!(p.sender_mac(), [2, 0, 0, 0, 0, 1]);
    }

    #[test]
    fn bad_interface_names_are_errors() {
        assert!(iface_mac("no-such-if-x").is_err());
        assert!(iface_mac("../x").is_err());
        assert!(iface_mac("").is_err());
    }
}
