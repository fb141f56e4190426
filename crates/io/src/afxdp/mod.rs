//! The `afxdp` port backend: an AF_XDP socket on one RX queue of an
//! interface, over `libc` (no libbpf/libxdp).
//!
//! `afxdp:IFACE?queue=N&mode=native|generic&zerocopy=0|1&need_wakeup=0|1`
//!
//! - The UMEM is a [`Region`] of `4 * ring_size` frames of `frame_size`
//!   bytes. Frames `0..2*ring_size` are the RX set: they cycle fill ring ->
//!   kernel -> RX ring -> application -> [`RxPort::release`] -> fill ring.
//!   The rest is the TX set: free stack -> copy -> TX ring -> kernel ->
//!   completion ring -> free stack. The two sets never mix, so the RX half
//!   and the TX half run on different threads without sharing anything
//!   mutable; they share only the socket and the UMEM (an `Arc`).
//! - The fill ring holds twice the RX set (see `open`) and the completion ring the
//!   whole TX set, so `release` and completion reaping never find them full.
//! - The XDP program `xsk_redirect` (crates/io/src/xdp/xsk_redirect.bpf.c) sends
//!   the frames of queue N to the socket through `xsks_map[N]`; frames of
//!   other queues go to the stack. Ports of one process on different queues
//!   of an interface share one program (the interface holds only one).
//! - Everything is released on drop (also on error paths and unwinding):
//!   ring mappings, then the XDP program (detached), the socket and the UMEM.

mod device;
mod ring;
mod rx;
mod tx;

use device::*;
pub use rx::AfXdpRx;
pub use tx::AfXdpTx;

use crate::counters::KernelStats;
use crate::link::LinkWatch;
use crate::pool::{FreeStack, Region};
use crate::port::{OpenOptions, Port, PortError, PortInfo};
use crate::uri::Uri;
use crate::xdp::switch_offload::OffloadMaps;
use crate::xdp::{AttachMode, XdpProgram};
use ring::{ConsRing, ProdRing, RingMap};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

/// `XDP_MAX_TX_SKB_BUDGET` (kernel 6.17+): descriptors one copy-mode
/// `sendto` may transmit (default 32). Not in libc yet.
const XDP_MAX_TX_SKB_BUDGET: libc::c_int = 9;
/// One copy-mode `sendto` transmits at most this many frames by default.
const COPY_TX_BATCH: u32 = 32;
/// How long `open` retries a bind that fails with EBUSY: the kernel frees
/// the queue of a closed socket in a work item, a moment after close().
const BIND_BUSY_RETRY: Duration = Duration::from_millis(500);

/// The socket, its XDP program and the UMEM, shared by both halves.
/// Field order is drop order: detach XDP, close the socket, unmap the UMEM.
struct Shared {
    _xdp: Arc<IfProgram>,
    fd: OwnedFd,
    /// Also held by every batch this port fills ([`Batch::hold`]).
    umem: Arc<Region>,
}

/// The XDP program of one interface, shared by every AF_XDP socket this
/// process opens on it (one per queue): an interface holds one XDP program,
/// so the socket of queue N joins the first socket's program through
/// `xsks_map[N]`. Detached when the last of those ports is dropped. Used at
/// open and drop only, never per packet.
struct IfProgram {
    /// The switch's offload maps, when the program is `xdp_switch`
    /// (taken out of the program, so declared first: dropped before it).
    offload: Option<Arc<Mutex<OffloadMaps>>>,
    prog: Mutex<XdpProgram>,
    mode: AttachMode,
    note: String,
}

/// The offload maps of the `xdp_switch` program an `afxdp:` port opened
/// with [`OpenOptions::switch_offload`] attached to `ifindex` (in the
/// calling thread's network namespace), while a port of this process holds
/// it; `None` for `xsk_redirect` or no port.
pub fn offload_maps(ifindex: u32) -> Option<Arc<Mutex<OffloadMaps>>> {
    let key = (netns_ino(), ifindex);
    let reg = PROGRAMS.lock().unwrap_or_else(|e| e.into_inner());
    reg.iter()
        .find(|(k, _)| *k == key)
        .and_then(|(_, w)| w.upgrade())
        .and_then(|p| p.offload.clone())
}

fn netns_ino() -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/thread-self/ns/net")
        .map(|m| m.ino())
        .unwrap_or(0)
}

/// (network namespace inode, ifindex) -> the program attached there.
type ProgramKey = (u64, u32);
static PROGRAMS: Mutex<Vec<(ProgramKey, Weak<IfProgram>)>> = Mutex::new(Vec::new());

/// The program on `ifindex` with socket `sfd` in `xsks_map[queue]`: the
/// one an earlier port of this process attached, or a new one.
fn if_program(
    uri: &Uri,
    ifindex: u32,
    mode: Option<AttachMode>,
    queue: u32,
    sfd: RawFd,
    switch_offload: bool,
) -> Result<Arc<IfProgram>, PortError> {
    let key = (netns_ino(), ifindex);
    let insert = |prog: &mut XdpProgram| -> Result<(), PortError> {
        let m = prog
            .ebpf_mut()
            .map_mut("xsks_map")
            .ok_or_else(|| uri.err("XDP object has no map 'xsks_map'"))?;
        let mut xsks = aya::maps::XskMap::try_from(m)
            .map_err(|e| uri.err(format!("'xsks_map' is not an XSKMAP: {e}")))?;
        xsks.set(queue, sfd, 0).map_err(|e| {
            uri.err(format!(
                "inserting the socket into xsks_map[{queue}] failed: {e}"
            ))
        })
    };
    let mut reg = PROGRAMS.lock().unwrap_or_else(|e| e.into_inner());
    reg.retain(|(_, w)| w.strong_count() > 0);
    if let Some(shared) = reg
        .iter()
        .find(|(k, _)| *k == key)
        .and_then(|(_, w)| w.upgrade())
    {
        if mode.is_some_and(|m| m != shared.mode) {
            return Err(uri.err(format!(
                "another socket of this process attached XDP in {} mode on this interface",
                shared.mode.name()
            )));
        }
        if switch_offload != shared.offload.is_some() {
            return Err(uri.err(
                "another socket of this process attached the other XDP program (switch offload or not) on this interface",
            ));
        }
        insert(&mut shared.prog.lock().unwrap_or_else(|e| e.into_inner()))?;
        return Ok(shared);
    }
    let what = format!("port '{}'", uri.text);
    let (object, name) = if switch_offload {
        (&crate::xdp::objects::XDP_SWITCH.0, "xdp_switch")
    } else {
        (&crate::xdp::objects::XSK_REDIRECT.0, "xsk_redirect")
    };
    let mut prog = XdpProgram::load(object, name, &what).map_err(|e| {
        if e.0.contains("EPERM") || e.0.contains("not permitted") || e.0.contains("ermission") {
            uri.err(PERM_HINT)
        } else {
            e
        }
    })?;
    insert(&mut prog)?;
    let offload = if switch_offload {
        Some(Arc::new(Mutex::new(OffloadMaps::take(&mut prog, &what)?)))
    } else {
        None
    };
    let mut note = String::new();
    let mode = match mode {
        Some(m) => {
            prog.attach(ifindex, m)?;
            m
        }
        None => match prog.attach(ifindex, AttachMode::Native) {
            Ok(()) => AttachMode::Native,
            Err(e) => {
                prog.attach(ifindex, AttachMode::Generic)?;
                note = format!(" (native attach failed: {e})");
                AttachMode::Generic
            }
        },
    };
    let shared = Arc::new(IfProgram {
        offload,
        prog: Mutex::new(prog),
        mode,
        note,
    });
    reg.push((key, Arc::downgrade(&shared)));
    Ok(shared)
}

impl Shared {
    fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    fn stats(&self) -> KernelStats {
        // SAFETY: zeroed plain struct.
        let mut s: libc::xdp_statistics = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::xdp_statistics>() as libc::socklen_t;
        // SAFETY: s/len describe a writable buffer of the right size.
        let rc = unsafe {
            libc::getsockopt(
                self.fd(),
                libc::SOL_XDP,
                libc::XDP_STATISTICS,
                &mut s as *mut _ as *mut libc::c_void,
                &mut len,
            )
        };
        if rc != 0 {
            return KernelStats::default();
        }
        KernelStats {
            counters: vec![
                ("rx_dropped", s.rx_dropped),
                ("rx_invalid_descs", s.rx_invalid_descs),
                ("tx_invalid_descs", s.tx_invalid_descs),
                ("rx_ring_full", s.rx_ring_full),
                ("rx_fill_ring_empty_descs", s.rx_fill_ring_empty_descs),
                ("tx_ring_empty_descs", s.tx_ring_empty_descs),
            ],
        }
    }
}

pub(crate) fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Open an `afxdp:` port.
pub fn open(uri: &Uri, opts: &OpenOptions) -> Result<Port, PortError> {
    let p = parse(uri)?;
    let ring = opts.ring_size;
    if !ring.is_power_of_two() || !(64..=1 << 15).contains(&ring) {
        return Err(uri.err(format!(
            "ring size {ring} must be a power of two between 64 and 32768"
        )));
    }
    let fsz = opts.frame_size;
    if !fsz.is_power_of_two() || !(2048..=4096).contains(&fsz) {
        return Err(uri.err(format!("frame size {fsz} must be 2048 or 4096 for AF_XDP")));
    }
    let ifindex = crate::link::ifindex(uri, &p.ifname)?;
    if let Some(nq) = rx_queues(&p.ifname, ifindex) {
        if p.queue >= nq {
            return Err(uri.err(format!(
                "queue {} does not exist: '{}' has {nq} RX queue{} (0..{})",
                p.queue,
                p.ifname,
                if nq == 1 { "" } else { "s" },
                nq - 1
            )));
        }
    }
    if p.queue >= 64 {
        return Err(uri.err(format!(
            "queue {} is above the 64 queues xsks_map holds",
            p.queue
        )));
    }

    let rx_frames = 2 * ring;
    let tx_frames = 2 * ring;
    let frames = rx_frames + tx_frames;
    // The kernel publishes its fill-ring consumer index lazily (when it
    // refreshes its view of our producer), so frames it has already taken
    // may still look like occupied slots. Twice the RX set covers that lag:
    // `release` never finds the fill ring full.
    let fill_size = 2 * rx_frames;
    let umem = Region::new(frames, fsz).map_err(|e| {
        uri.err(format!(
            "cannot allocate the UMEM ({frames} x {fsz} B): {e}"
        ))
    })?;

    // SAFETY: plain socket call.
    let raw = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        let e = io::Error::last_os_error();
        return Err(if is_perm(&e) {
            uri.err(PERM_HINT)
        } else if e.raw_os_error() == Some(libc::EAFNOSUPPORT) {
            uri.err("this kernel has no AF_XDP sockets (CONFIG_XDP_SOCKETS)")
        } else {
            uri.err(format!("cannot create an AF_XDP socket: {e}"))
        });
    }
    // SAFETY: raw is a fresh descriptor we own.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let sfd = fd.as_raw_fd();

    let reg = libc::xdp_umem_reg {
        addr: umem.base() as u64,
        len: frames as u64 * fsz as u64,
        chunk_size: fsz,
        headroom: 0,
        flags: 0,
        tx_metadata_len: 0,
    };
    setsockopt(sfd, libc::XDP_UMEM_REG, &reg).map_err(|e| {
        if is_perm(&e) {
            uri.err(PERM_HINT)
        } else {
            uri.err(format!(
                "registering the UMEM failed: {e} (locked-memory limit? try `ulimit -l unlimited`)"
            ))
        }
    })?;
    for (opt, n, what) in [
        (libc::XDP_UMEM_FILL_RING, fill_size, "fill"),
        (libc::XDP_UMEM_COMPLETION_RING, tx_frames, "completion"),
        (libc::XDP_RX_RING, ring, "RX"),
        (libc::XDP_TX_RING, ring, "TX"),
    ] {
        setsockopt(sfd, opt, &n)
            .map_err(|e| uri.err(format!("setting the {what} ring size to {n} failed: {e}")))?;
    }

    // SAFETY: zeroed plain struct, filled by getsockopt.
    let mut off: libc::xdp_mmap_offsets = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::xdp_mmap_offsets>() as libc::socklen_t;
    // SAFETY: off/len describe a writable buffer.
    let rc = unsafe {
        libc::getsockopt(
            sfd,
            libc::SOL_XDP,
            libc::XDP_MMAP_OFFSETS,
            &mut off as *mut _ as *mut libc::c_void,
            &mut len,
        )
    };
    if rc != 0 || len as usize != std::mem::size_of::<libc::xdp_mmap_offsets>() {
        return Err(uri.err(format!(
            "reading the ring offsets failed: {}",
            if rc != 0 {
                io::Error::last_os_error().to_string()
            } else {
                "kernel too old (no ring flags; need 5.4+)".to_string()
            }
        )));
    }
    let map = |o: &libc::xdp_ring_offset, n: u32, dsz: usize, pgoff: u64, what: &str| {
        RingMap::map(sfd, o, n, dsz, pgoff)
            .map_err(|e| uri.err(format!("mapping the {what} ring failed: {e}")))
    };
    let addr_sz = std::mem::size_of::<u64>();
    let desc_sz = std::mem::size_of::<libc::xdp_desc>();
    let mut fill = ProdRing::new(map(
        &off.fr,
        fill_size,
        addr_sz,
        libc::XDP_UMEM_PGOFF_FILL_RING,
        "fill",
    )?);
    let comp = ConsRing::new(map(
        &off.cr,
        tx_frames,
        addr_sz,
        libc::XDP_UMEM_PGOFF_COMPLETION_RING,
        "completion",
    )?);
    let rx = ConsRing::new(map(
        &off.rx,
        ring,
        desc_sz,
        libc::XDP_PGOFF_RX_RING as u64,
        "RX",
    )?);
    let tx = ProdRing::new(map(
        &off.tx,
        ring,
        desc_sz,
        libc::XDP_PGOFF_TX_RING as u64,
        "TX",
    )?);

    // The whole RX set goes on the fill ring.
    let (idx, n) = fill.reserve(rx_frames);
    debug_assert_eq!(n, rx_frames);
    for i in 0..n {
        fill.set_addr(idx.wrapping_add(i), i as u64 * fsz as u64);
    }
    fill.submit();

    // Bind: copy or zero-copy, with need_wakeup by default.
    let wake = if p.need_wakeup {
        libc::XDP_USE_NEED_WAKEUP
    } else {
        0
    };
    let mut zc_note = "";
    let bind_err = |e: io::Error| {
        if is_perm(&e) {
            return uri.err(PERM_HINT);
        }
        match e.raw_os_error() {
            Some(libc::EBUSY) => uri.err(format!(
                "queue {} of '{}' is in use by another AF_XDP socket ({e})",
                p.queue, p.ifname
            )),
            Some(libc::EINVAL) => uri.err(format!(
                "binding to queue {} of '{}' failed: {e} (does the queue exist?)",
                p.queue, p.ifname
            )),
            _ => uri.err(format!(
                "binding to queue {} of '{}' failed: {e}",
                p.queue, p.ifname
            )),
        }
    };
    if p.zerocopy {
        match bind(sfd, ifindex, p.queue, libc::XDP_ZEROCOPY | wake) {
            Ok(()) => {}
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EOPNOTSUPP) | Some(libc::EINVAL)
                ) =>
            {
                eprintln!(
                    "afxdp:{}: zero-copy not supported by this driver, using copy mode",
                    p.ifname
                );
                zc_note = " (zero-copy not supported by this driver)";
                bind(sfd, ifindex, p.queue, libc::XDP_COPY | wake).map_err(bind_err)?;
            }
            Err(e) => return Err(bind_err(e)),
        }
    } else {
        bind(sfd, ifindex, p.queue, libc::XDP_COPY | wake).map_err(bind_err)?;
    }
    // What the kernel actually did.
    let zerocopy = {
        let mut o = libc::xdp_options { flags: 0 };
        let mut l = std::mem::size_of::<libc::xdp_options>() as libc::socklen_t;
        // SAFETY: o/l describe a writable buffer.
        let rc = unsafe {
            libc::getsockopt(
                sfd,
                libc::SOL_XDP,
                libc::XDP_OPTIONS,
                &mut o as *mut _ as *mut libc::c_void,
                &mut l,
            )
        };
        rc == 0 && o.flags & libc::XDP_OPTIONS_ZEROCOPY != 0
    };
    // Copy mode: let one sendto push a whole ring (kernel 6.17+); otherwise
    // a kick sends 32 frames and we may need several per batch.
    let kicks_per_ring = if zerocopy {
        1
    } else if setsockopt(sfd, XDP_MAX_TX_SKB_BUDGET, &ring).is_ok() {
        2
    } else {
        ring / COPY_TX_BATCH + 1
    };

    // The XDP program (shared by this process's sockets on the interface):
    // socket into xsks_map[queue], attached if it is new.
    let xdp = if_program(uri, ifindex, p.mode, p.queue, sfd, opts.switch_offload)?;
    let (attach, attach_note) = (xdp.mode, xdp.note.clone());

    let max_frame = match mtu(&p.ifname) {
        Some(m) => fsz.min(m + 14),
        None => fsz,
    };
    let shared = Arc::new(Shared {
        _xdp: xdp,
        fd,
        umem: Arc::new(umem),
    });
    let base = shared.umem.base();
    let frame_mask = !(fsz as u64 - 1);
    let detail =
        format!(
        "{} XDP{attach_note}, {}{zc_note}, queue {}, {}{}-frame rings, {} UMEM frames of {fsz} B{}",
        attach.name(),
        if zerocopy { "zero-copy" } else { "copy mode" },
        p.queue,
        if p.need_wakeup { "need_wakeup, " } else { "" },
        ring,
        frames,
        if shared.umem.hugepages() { " (hugepages)" } else { "" },
    );
    let rxh = AfXdpRx {
        id: crate::batch::PortId::fresh(),
        rx,
        fill,
        base,
        rx_end: rx_frames as u64 * fsz as u64,
        frame_mask,
        need_wakeup: p.need_wakeup,
        held: 0,
        bad_desc: 0,
        bad_release: 0,
        watch: LinkWatch::new(&uri.text, &p.ifname, ifindex, shared.fd())?,
        shared: shared.clone(),
    };
    let txh = AfXdpTx {
        tx,
        comp,
        free: FreeStack::new(rx_frames, tx_frames, fsz),
        base,
        tx_start: rx_frames as u64 * fsz as u64,
        tx_end: frames as u64 * fsz as u64,
        frame_mask,
        tx_frames,
        max_frame,
        need_wakeup: p.need_wakeup,
        kicks_per_ring,
        too_big: 0,
        bad_completion: 0,
        watch: LinkWatch::new(&uri.text, &p.ifname, ifindex, shared.fd())?,
        shared,
    };
    Ok(Port {
        info: PortInfo {
            uri: uri.text.clone(),
            kind: "afxdp",
            detail,
            clock: "none",
            ifindex: Some(ifindex),
            ifname: Some(p.ifname),
        },
        rx: Box::new(rxh),
        tx: Box::new(txh),
    })
}
