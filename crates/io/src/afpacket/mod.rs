//! The `afpacket` port backend: Linux packet sockets.
//!
//! `afpacket:IFACE?ring=v2|v3|mmsg&fanout=none|hash|cpu|lb&fanout_group=N&qdisc_bypass=0|1
//! &blocks=N&block_size=BYTES&frame_size=BYTES&tov_ms=MS&promisc=0|1`
//!
//! - `ring=v3`: a TPACKET_V3 block ring for RX (zero copy: the descriptors
//!   point into the mapped ring, a block goes back to the kernel once all
//!   its packets were released) and a TPACKET_V3 fixed-frame TX ring (one
//!   `sendto` per batch). The kernel hands a block over when it is full or
//!   its retire timeout (`tov_ms`, 2 ms) expires, and wakes a sleeping
//!   reader once per block: the ring for readers that sleep in poll()
//!   (capture, count), whose latency at low rates is that timeout.
//! - `ring=v2`: a TPACKET_V2 frame ring for RX (zero copy), each frame
//!   handed over as soon as it is written; TX as for v3. The ring for
//!   busy-polling forwarders (fwd, switch): no block timeout, so a packet
//!   waits microseconds, not milliseconds, at any rate. By default 32768
//!   frames just large enough for the interface's MTU (1600 bytes at MTU
//!   1500: 50 MiB; at most 64 MiB, fewer frames for jumbo MTUs), as many
//!   packets of any size as the V3 ring holds of ~400-byte ones; with
//!   `blocks`, `block_size` or `frame_size` given, that memory cut into
//!   `frame_size` frames instead.
//! - Default: `v2` when the pipeline busy-polls (`OpenOptions::busy_poll`:
//!   fwd and switch with `--poll busy`), else `v3`.
//! - `ring=mmsg`: the plain AF_PACKET baseline, `recvmmsg`/`sendmmsg` with
//!   buffers allocated at open (one syscall per batch).
//!
//! RX and TX use two sockets bound to the same interface: the RX socket is
//! bound with `ETH_P_ALL` and ignores outgoing frames; the TX socket is bound
//! with protocol 0 so the kernel never queues received frames on it. Each
//! half owns its socket, so the halves can run on two threads.

mod mmsg;
pub use mmsg::{cmsg_data, vlan_of};
mod ring;

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::counters::KernelStats;
use crate::link::LinkWatch;
use crate::port::{OpenOptions, Port, PortError, PortInfo};
use crate::uri::Uri;

/// Parameters the `afpacket` scheme knows.
pub const PARAMS: [&str; 9] = [
    "ring",
    "fanout",
    "fanout_group",
    "qdisc_bypass",
    "blocks",
    "block_size",
    "frame_size",
    "tov_ms",
    "promisc",
];

/// Default number of RX blocks (ring=v3).
pub const DEFAULT_BLOCKS: u32 = 64;
/// Default RX block size in bytes (ring=v3).
pub const DEFAULT_BLOCK_SIZE: u32 = 256 * 1024;
/// Default number of RX frames (ring=v2).
pub const DEFAULT_V2_FRAMES: u32 = 32768;
/// Default block retire timeout: a partly filled block is handed to user
/// space after this many milliseconds, so sparse traffic is not held back.
pub const DEFAULT_TOV_MS: u32 = 2;

/// The RX ring (and TX path) of a port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ring {
    V2,
    V3,
    Mmsg,
}

/// Fanout modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fanout {
    None,
    Hash,
    Cpu,
    Lb,
}

/// Parsed `afpacket` configuration.
#[derive(Clone, Debug)]
pub(crate) struct Config {
    pub ifname: String,
    pub ifindex: u32,
    pub ring: Ring,
    pub fanout: Fanout,
    pub fanout_group: u16,
    pub qdisc_bypass: bool,
    pub promisc: bool,
    pub blocks: u32,
    pub block_size: u32,
    pub frame_size: u32,
    /// The V2 RX ring's layout (ring=v2 only).
    pub rx2: Rx2Layout,
    pub tov_ms: u32,
    /// TX ring frames / mmsg buffers.
    pub ring_size: u32,
    /// Largest frame the interface takes (MTU + Ethernet header).
    pub mtu_frame: usize,
}

/// Frames of a TPACKET_V2 RX ring: `blocks` blocks of `block_size` bytes,
/// each cut into `block_size / frame_size` frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Rx2Layout {
    pub frame_size: u32,
    pub block_size: u32,
    pub blocks: u32,
}

impl Rx2Layout {
    /// The default: [`DEFAULT_V2_FRAMES`] frames, each the smallest multiple
    /// of 16 that holds the headers the kernel writes in front of a frame
    /// (80 bytes up to the network header, `tpacket_rcv`) and an MTU-sized
    /// packet with two VLAN tags left in it; blocks a whole number of pages
    /// *and* of frames, so frame `i` is at `i * frame_size` (no division on
    /// the per-packet path). At most 64 MiB: fewer frames for jumbo MTUs
    /// (9000: 7360 frames; loopback's 65536: 1024).
    fn for_mtu(mtu: u32, page: u32) -> Rx2Layout {
        let frame = (80 + mtu.min(65536 - 96) + 8).div_ceil(16) * 16;
        let mut block = lcm(frame, page);
        if block > 4 << 20 {
            block = frame.next_multiple_of(page);
        }
        let per_block = block / frame;
        let frames = DEFAULT_V2_FRAMES.min((64 << 20) / frame).max(per_block);
        Rx2Layout {
            frame_size: frame,
            block_size: block,
            blocks: (frames / per_block).max(1),
        }
    }

    pub fn frames(&self) -> u32 {
        (self.block_size / self.frame_size) * self.blocks
    }
}

fn lcm(a: u32, b: u32) -> u32 {
    let (mut x, mut y) = (a, b);
    while y != 0 {
        (x, y) = (y, x % y);
    }
    a / x * b
}

fn page_size() -> u32 {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p <= 0 {
        4096
    } else {
        p as u32
    }
}

fn parse_config(uri: &Uri, opts: &OpenOptions) -> Result<Config, PortError> {
    uri.check_known(&PARAMS)?;
    let ifname = uri.target.clone();
    let default = if opts.busy_poll { "v2" } else { "v3" };
    let ring = match uri.get_choice("ring", &["v2", "v3", "mmsg"], default)? {
        "v2" => Ring::V2,
        "v3" => Ring::V3,
        _ => Ring::Mmsg,
    };
    let fanout = match uri.get_choice("fanout", &["none", "hash", "cpu", "lb"], "none")? {
        "hash" => Fanout::Hash,
        "cpu" => Fanout::Cpu,
        "lb" => Fanout::Lb,
        _ => Fanout::None,
    };
    let qdisc_bypass = uri.get_bool("qdisc_bypass", true)?;
    let promisc = uri.get_bool("promisc", true)?;
    let blocks: u32 = uri.get_or("blocks", DEFAULT_BLOCKS)?;
    let block_size: u32 = uri.get_or("block_size", DEFAULT_BLOCK_SIZE)?;
    let frame_size: u32 = uri.get_or("frame_size", opts.frame_size)?;
    let tov_ms: u32 = uri.get_or("tov_ms", DEFAULT_TOV_MS)?;
    let fanout_group: Option<u16> = match uri.get("fanout_group") {
        None => None,
        Some(_) => Some(uri.get_or("fanout_group", 0u16)?),
    };
    let page = page_size();
    if blocks == 0 || blocks > 65536 {
        return Err(uri.err(format!("blocks must be 1..=65536 (got {blocks})")));
    }
    if block_size < page || !block_size.is_multiple_of(page) || block_size > (1 << 30) {
        return Err(uri.err(format!(
            "block_size must be a multiple of the page size ({page}) up to 1 GiB (got {block_size})"
        )));
    }
    if !(256..=65536).contains(&frame_size) || !frame_size.is_multiple_of(16) {
        return Err(uri.err(format!(
            "frame_size must be a multiple of 16 in 256..=65536 (got {frame_size})"
        )));
    }
    if ring != Ring::Mmsg && frame_size > block_size {
        return Err(uri.err(format!(
            "frame_size ({frame_size}) must not exceed block_size ({block_size})"
        )));
    }
    if opts.ring_size == 0 || opts.ring_size > (1 << 20) {
        return Err(uri.err(format!(
            "ring size must be 1..=1048576 (got {})",
            opts.ring_size
        )));
    }
    if u64::from(blocks) * u64::from(block_size) > (1 << 34) {
        return Err(uri.err("blocks * block_size is larger than 16 GiB"));
    }
    if tov_ms == 0 || tov_ms > 60_000 {
        return Err(uri.err(format!("tov_ms must be 1..=60000 (got {tov_ms})")));
    }
    if fanout == Fanout::None && fanout_group.is_some() {
        return Err(uri.err("fanout_group needs fanout=hash|cpu|lb"));
    }
    let ifindex = crate::link::ifindex(uri, &ifname)?;
    let fanout_group = fanout_group.unwrap_or((ifindex & 0xffff) as u16);
    let mtu = if_mtu(&ifname).unwrap_or(1500);
    let rx2 = if ["blocks", "block_size", "frame_size"]
        .iter()
        .any(|k| uri.get(k).is_some())
    {
        Rx2Layout {
            frame_size,
            block_size,
            blocks,
        }
    } else {
        Rx2Layout::for_mtu(mtu, page)
    };
    Ok(Config {
        ifname,
        ifindex,
        ring,
        fanout,
        fanout_group,
        qdisc_bypass,
        promisc,
        blocks,
        block_size,
        frame_size,
        rx2,
        tov_ms,
        ring_size: opts.ring_size,
        mtu_frame: mtu as usize + 14,
    })
}

/// MTU of an interface (SIOCGIFMTU), None if it cannot be read.
fn if_mtu(name: &str) -> Option<u32> {
    // SAFETY: plain socket call, checked.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return None;
    }
    // SAFETY: fd was just created and is owned here.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: ifreq is plain data; zero is a valid value.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    let b = name.as_bytes();
    if b.len() >= ifr.ifr_name.len() {
        return None;
    }
    for (d, s) in ifr.ifr_name.iter_mut().zip(b) {
        *d = *s as libc::c_char;
    }
    // SAFETY: ifr is a valid ifreq with a NUL-terminated name.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCGIFMTU, &mut ifr) };
    if r < 0 {
        return None;
    }
    // SAFETY: SIOCGIFMTU filled the mtu member of the union.
    let mtu = unsafe { ifr.ifr_ifru.ifru_mtu };
    (mtu > 0).then_some(mtu as u32)
}

/// Open an `afpacket:` port.
pub fn open(uri: &Uri, opts: &OpenOptions) -> Result<Port, PortError> {
    let cfg = parse_config(uri, opts)?;
    let mut detail;
    let (rx, tx): (Box<dyn crate::RxPort>, Box<dyn crate::TxPort>);
    if cfg.ring == Ring::V2 {
        let r = ring::RxV2::open(uri, &cfg)?;
        let t = ring::TxRing::open(uri, &cfg)?;
        detail = format!(
            "TPACKET_V2 rx ring {}x{}, tx ring {}x{}",
            r.frames(),
            cfg.rx2.frame_size,
            t.frames(),
            cfg.frame_size
        );
        rx = Box::new(r);
        tx = Box::new(t);
    } else if cfg.ring == Ring::V3 {
        let r = ring::RxV3::open(uri, &cfg)?;
        let t = ring::TxRing::open(uri, &cfg)?;
        detail = format!(
            "TPACKET_V3 rx ring {}x{}, tx ring {}x{}",
            cfg.blocks,
            human_size(cfg.block_size),
            t.frames(),
            cfg.frame_size
        );
        rx = Box::new(r);
        tx = Box::new(t);
    } else {
        let r = mmsg::RxMmsg::open(uri, &cfg)?;
        let t = mmsg::TxMmsg::open(uri, &cfg)?;
        detail = format!(
            "recvmmsg/sendmmsg, {} rx buffers of {} bytes",
            cfg.ring_size, cfg.frame_size
        );
        rx = Box::new(r);
        tx = Box::new(t);
    }
    if cfg.qdisc_bypass {
        detail.push_str(", qdisc bypass");
    }
    if cfg.promisc {
        detail.push_str(", promisc");
    }
    if cfg.fanout != Fanout::None {
        let name = match cfg.fanout {
            Fanout::Hash => "hash",
            Fanout::Cpu => "cpu",
            Fanout::Lb => "lb",
            Fanout::None => "none",
        };
        detail.push_str(&format!(", fanout {name} group {}", cfg.fanout_group));
    }
    Ok(Port {
        info: PortInfo {
            uri: uri.text.clone(),
            kind: "afpacket",
            detail,
            clock: if cfg.ring == Ring::Mmsg {
                "none"
            } else {
                "kernel-realtime"
            },
            ifindex: Some(cfg.ifindex),
            ifname: Some(cfg.ifname.clone()),
        },
        rx,
        tx,
    })
}

fn human_size(b: u32) -> String {
    if b.is_multiple_of(1 << 20) {
        format!("{}MiB", b >> 20)
    } else if b.is_multiple_of(1024) {
        format!("{}KiB", b >> 10)
    } else {
        format!("{b}B")
    }
}

// ---------------------------------------------------------------------------
// Socket helpers shared by both ring kinds.

fn last_err() -> std::io::Error {
    std::io::Error::last_os_error()
}

/// Create an AF_PACKET raw socket (protocol 0: not yet receiving anything).
pub(crate) fn packet_socket(uri: &Uri) -> Result<OwnedFd, PortError> {
    // SAFETY: plain socket call, result checked.
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        let e = last_err();
        if matches!(e.raw_os_error(), Some(libc::EPERM) | Some(libc::EACCES)) {
            return Err(uri.err(format!(
                "opening an AF_PACKET socket needs root or CAP_NET_RAW ({e})"
            )));
        }
        return Err(uri.err(format!("cannot open an AF_PACKET socket: {e}")));
    }
    // SAFETY: fd is a fresh descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

pub(crate) fn setsockopt<T>(
    uri: &Uri,
    fd: &OwnedFd,
    level: libc::c_int,
    opt: libc::c_int,
    what: &str,
    val: &T,
) -> Result<(), PortError> {
    // SAFETY: val points to a live T of the given size.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            opt,
            val as *const T as *const libc::c_void,
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(uri.err(format!("{what}: {}", last_err())));
    }
    Ok(())
}

/// Bind to the interface with `proto` (host order; 0 = send only).
pub(crate) fn bind(uri: &Uri, fd: &OwnedFd, cfg: &Config, proto: u16) -> Result<(), PortError> {
    // SAFETY: sockaddr_ll is plain data; zero is valid.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = proto.to_be();
    sll.sll_ifindex = cfg.ifindex as i32;
    // SAFETY: sll is a valid sockaddr_ll.
    let r = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if r < 0 {
        let e = last_err();
        if e.raw_os_error() == Some(libc::ENODEV) || e.raw_os_error() == Some(libc::ENXIO) {
            return Err(uri.err(format!(
                "no interface named '{}' in this network namespace",
                cfg.ifname
            )));
        }
        return Err(uri.err(format!("bind to '{}': {e}", cfg.ifname)));
    }
    Ok(())
}

/// Options common to RX sockets, set after bind: promisc, ignore outgoing, fanout.
pub(crate) fn setup_rx(uri: &Uri, fd: &OwnedFd, cfg: &Config) -> Result<(), PortError> {
    let one: libc::c_int = 1;
    // Do not see the frames this host sends (our own TX half included).
    setsockopt(
        uri,
        fd,
        libc::SOL_PACKET,
        libc::PACKET_IGNORE_OUTGOING,
        "PACKET_IGNORE_OUTGOING",
        &one,
    )?;
    if cfg.promisc {
        let mr = libc::packet_mreq {
            mr_ifindex: cfg.ifindex as i32,
            mr_type: libc::PACKET_MR_PROMISC as u16,
            mr_alen: 0,
            mr_address: [0; 8],
        };
        setsockopt(
            uri,
            fd,
            libc::SOL_PACKET,
            libc::PACKET_ADD_MEMBERSHIP,
            "PACKET_ADD_MEMBERSHIP (promisc)",
            &mr,
        )?;
    }
    let kind = match cfg.fanout {
        Fanout::None => return Ok(()),
        Fanout::Hash => libc::PACKET_FANOUT_HASH | libc::PACKET_FANOUT_FLAG_DEFRAG,
        Fanout::Cpu => libc::PACKET_FANOUT_CPU,
        Fanout::Lb => libc::PACKET_FANOUT_LB,
    };
    let arg: libc::c_int = (u32::from(cfg.fanout_group) | (kind << 16)) as libc::c_int;
    setsockopt(
        uri,
        fd,
        libc::SOL_PACKET,
        libc::PACKET_FANOUT,
        "PACKET_FANOUT",
        &arg,
    )
    .map_err(|e| {
        PortError::new(format!(
            "{e} (group {} may already be used with another fanout mode; pick fanout_group=N)",
            cfg.fanout_group
        ))
    })
}

/// Options common to TX sockets.
pub(crate) fn setup_tx(uri: &Uri, fd: &OwnedFd, cfg: &Config) -> Result<(), PortError> {
    if cfg.qdisc_bypass {
        let one: libc::c_int = 1;
        setsockopt(
            uri,
            fd,
            libc::SOL_PACKET,
            libc::PACKET_QDISC_BYPASS,
            "PACKET_QDISC_BYPASS",
            &one,
        )?;
    }
    Ok(())
}

/// The watch on the interface under one half of a port (socket `fd`).
pub(crate) fn watch(uri: &Uri, cfg: &Config, fd: &OwnedFd) -> Result<LinkWatch, PortError> {
    LinkWatch::new(&uri.text, &cfg.ifname, cfg.ifindex, fd.as_raw_fd())
}

/// poll() one descriptor for input.
pub(crate) fn poll_in(fd: &OwnedFd, timeout_ms: i32) -> Result<(), PortError> {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: p is a valid pollfd array of length 1.
    let r = unsafe { libc::poll(&mut p, 1, timeout_ms) };
    if r < 0 {
        let e = last_err();
        if e.raw_os_error() == Some(libc::EINTR) {
            return Ok(());
        }
        return Err(PortError::os("afpacket: poll", e));
    }
    Ok(())
}

/// Kernel packet counters, accumulated: `PACKET_STATISTICS` resets them on every read.
#[derive(Default)]
pub(crate) struct SockStats {
    packets: AtomicU64,
    drops: AtomicU64,
    freeze: AtomicU64,
}

impl SockStats {
    /// Read (and thereby reset) the kernel counters, add them to the totals.
    pub fn read(&self, fd: &OwnedFd, v3: bool) -> KernelStats {
        let mut st = libc::tpacket_stats_v3 {
            tp_packets: 0,
            tp_drops: 0,
            tp_freeze_q_cnt: 0,
        };
        let mut len = std::mem::size_of::<libc::tpacket_stats_v3>() as libc::socklen_t;
        // SAFETY: st is writable for len bytes; the kernel writes at most len.
        let r = unsafe {
            libc::getsockopt(
                fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                &mut st as *mut _ as *mut libc::c_void,
                &mut len,
            )
        };
        if r == 0 {
            self.packets.fetch_add(u64::from(st.tp_packets), Relaxed);
            self.drops.fetch_add(u64::from(st.tp_drops), Relaxed);
            if v3 && len as usize >= std::mem::size_of::<libc::tpacket_stats_v3>() {
                self.freeze
                    .fetch_add(u64::from(st.tp_freeze_q_cnt), Relaxed);
            }
        }
        let mut counters = vec![
            ("tp_packets", self.packets.load(Relaxed)),
            ("tp_drops", self.drops.load(Relaxed)),
        ];
        if v3 {
            counters.push(("tp_freeze_q_cnt", self.freeze.load(Relaxed)));
        }
        KernelStats { counters }
    }
}

/// Drops a TX half makes itself (packets it took but could not send).
#[derive(Default)]
pub(crate) struct TxDrops {
    pub too_big: AtomicU64,
    pub too_short: AtomicU64,
    pub error: AtomicU64,
}

impl TxDrops {
    #[inline]
    pub fn add(c: &AtomicU64, n: u64) {
        if n > 0 {
            // Single writer (the TX thread).
            c.store(c.load(Relaxed) + n, Relaxed);
        }
    }
    pub fn stats(&self) -> KernelStats {
        KernelStats {
            counters: vec![
                ("tx_drop_too_big", self.too_big.load(Relaxed)),
                ("tx_drop_too_short", self.too_short.load(Relaxed)),
                ("tx_drop_error", self.error.load(Relaxed)),
            ],
        }
    }
}

/// Shortest frame the TX halves pass to the kernel (an Ethernet header).
pub(crate) const MIN_FRAME: usize = 14;

/// Is this errno a transient "try again later" for transmit?
pub(crate) fn tx_transient(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EAGAIN) | Some(libc::ENOBUFS) | Some(libc::EINTR)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v2_default_layout_fits_the_mtu_in_whole_pages() {
        let l = Rx2Layout::for_mtu(1500, 4096);
        assert_eq!(l.frame_size, 1600);
        assert_eq!(l.block_size % 4096, 0);
        assert_eq!(l.block_size % l.frame_size, 0);
        assert_eq!(l.frames(), DEFAULT_V2_FRAMES);
        // 66 bytes of headers before the MAC header, then an untagged
        // MTU-sized frame with two VLAN tags left in it.
        assert!(66 + 1514 + 8 <= l.frame_size);

        let j = Rx2Layout::for_mtu(9000, 4096);
        assert_eq!(j.frame_size, 9088);
        assert!(u64::from(j.blocks) * u64::from(j.block_size) <= 64 << 20);
        assert!(j.frames() >= 7000);

        let lo = Rx2Layout::for_mtu(65536, 4096);
        assert!(lo.frame_size <= 65536 && lo.frame_size.is_multiple_of(16));
        assert!(lo.block_size.is_multiple_of(4096) && lo.block_size >= lo.frame_size);
        assert!(u64::from(lo.blocks) * u64::from(lo.block_size) <= 64 << 20);
        assert!(lo.frames() >= 1000);
    }

    #[test]
    fn lcm_of_frame_and_page() {
        assert_eq!(lcm(1600, 4096), 102_400);
        assert_eq!(lcm(2048, 4096), 4096);
        assert_eq!(lcm(4096, 4096), 4096);
    }
}
