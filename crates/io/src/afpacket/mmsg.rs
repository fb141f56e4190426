//! The plain AF_PACKET baseline: `recvmmsg`/`sendmmsg`, one syscall per batch,
//! receive buffers allocated once at open.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;

use super::{
    bind, packet_socket, poll_in, setsockopt, setup_rx, setup_tx, tx_transient, watch, Config,
    SockStats, TxDrops, MIN_FRAME,
};
use crate::batch::{Batch, Pkt, PortId, MAX_BATCH};
use crate::counters::KernelStats;
use crate::link::LinkWatch;
use crate::pool::Region;
use crate::port::{PortError, RxPort, TxPort};
use crate::uri::Uri;

/// Socket receive buffer asked for (the default ~200 KiB holds only ~100 full frames).
const RCVBUF: libc::c_int = 16 << 20;
const SNDBUF: libc::c_int = 4 << 20;

/// Fixed arrays of message headers and iovecs for one batch.
struct Msgs {
    hdrs: Box<[libc::mmsghdr; MAX_BATCH]>,
    iovs: Box<[libc::iovec; MAX_BATCH]>,
}

/// Room for one PACKET_AUXDATA control message (8-byte aligned).
const CTRL_WORDS: usize = 8;

impl Msgs {
    fn new() -> Msgs {
        // SAFETY: mmsghdr and iovec are plain data; all-zero is valid.
        let hdrs: Box<[libc::mmsghdr; MAX_BATCH]> = Box::new(unsafe { std::mem::zeroed() });
        let iovs: Box<[libc::iovec; MAX_BATCH]> = Box::new(unsafe { std::mem::zeroed() });
        Msgs { hdrs, iovs }
    }

    /// Point message `i` at `len` bytes at `p` (one iovec, no address).
    #[inline(always)]
    fn set(&mut self, i: usize, p: *mut u8, len: usize) {
        self.iovs[i] = libc::iovec {
            iov_base: p as *mut libc::c_void,
            iov_len: len,
        };
        let h = &mut self.hdrs[i];
        h.msg_hdr.msg_iov = &mut self.iovs[i];
        h.msg_hdr.msg_iovlen = 1;
        h.msg_hdr.msg_name = std::ptr::null_mut();
        h.msg_hdr.msg_namelen = 0;
        h.msg_hdr.msg_control = std::ptr::null_mut();
        h.msg_hdr.msg_controllen = 0;
        h.msg_hdr.msg_flags = 0;
        h.msg_len = 0;
    }
}

/// RX half: recvmmsg into pre-allocated buffers.
pub(crate) struct RxMmsg {
    /// Stamped on the batches this half fills (see [`Batch::claim`]).
    id: PortId,
    fd: OwnedFd,
    /// The receive buffers; also held by every batch this half fills.
    bufs: Arc<Region>,
    buf_size: usize,
    nbufs: usize,
    /// Free buffer indices (LIFO; capacity reserved for all).
    free: Vec<u32>,
    msgs: Msgs,
    /// Control buffers (PACKET_AUXDATA: the VLAN tag the kernel took out).
    ctrl: Box<[[u64; CTRL_WORDS]; MAX_BATCH]>,
    stats: SockStats,
    watch: LinkWatch,
}

// SAFETY: the iovec pointers only point into `bufs`, which this half
// writes only through recvmmsg into free buffers.
unsafe impl Send for RxMmsg {}

impl RxMmsg {
    pub fn open(uri: &Uri, cfg: &Config) -> Result<RxMmsg, PortError> {
        let fd = packet_socket(uri)?;
        // Larger receive queue; RCVBUFFORCE (root) ignores rmem_max.
        if setsockopt(
            uri,
            &fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            "SO_RCVBUFFORCE",
            &RCVBUF,
        )
        .is_err()
        {
            let _ = setsockopt(
                uri,
                &fd,
                libc::SOL_SOCKET,
                libc::SO_RCVBUF,
                "SO_RCVBUF",
                &RCVBUF,
            );
        }
        let one: libc::c_int = 1;
        setsockopt(
            uri,
            &fd,
            libc::SOL_PACKET,
            libc::PACKET_AUXDATA,
            "PACKET_AUXDATA",
            &one,
        )?;
        bind(uri, &fd, cfg, libc::ETH_P_ALL as u16)?;
        setup_rx(uri, &fd, cfg)?;
        let nbufs = (cfg.ring_size as usize).max(MAX_BATCH);
        let buf_size = cfg.frame_size as usize;
        let free: Vec<u32> = (0..nbufs as u32).rev().collect();
        Ok(RxMmsg {
            id: PortId::fresh(),
            watch: watch(uri, cfg, &fd)?,
            fd,
            bufs: Arc::new(
                Region::new(nbufs as u32, buf_size as u32)
                    .map_err(|e| uri.err(format!("cannot map receive buffers: {e}")))?,
            ),
            buf_size,
            nbufs,
            free,
            msgs: Msgs::new(),
            ctrl: Box::new([[0u64; CTRL_WORDS]; MAX_BATCH]),
            stats: SockStats::default(),
        })
    }
}

/// Bytes kept free in front of each receive buffer for a VLAN tag.
const VLAN_ROOM: usize = 4;

/// The VLAN tag (TPID, TCI) the kernel took out of a received frame, from PACKET_AUXDATA.
/// (Also what a test's raw packet socket uses to put stripped tags back.)
#[inline(always)]
pub fn vlan_of(h: &libc::msghdr) -> Option<(u16, u16)> {
    // SAFETY: tpacket_auxdata is plain integers: any bytes are a value.
    let a: libc::tpacket_auxdata = unsafe { cmsg_data(h, libc::SOL_PACKET, libc::PACKET_AUXDATA) }?;
    if a.tp_status & libc::TP_STATUS_VLAN_VALID == 0 {
        return None;
    }
    let tpid = if a.tp_status & libc::TP_STATUS_VLAN_TPID_VALID != 0 {
        a.tp_vlan_tpid
    } else {
        0x8100
    };
    Some((tpid, a.tp_vlan_tci))
}

/// The data of the first control message of `level` and `ty` in `h`
/// that holds a whole `T` (read unaligned), if any.
///
/// # Safety
/// `T` must be valid for any bytes (plain integers, as the kernel's
/// control message structs are), and `h`'s control buffer as the
/// kernel filled it.
#[inline(always)]
pub unsafe fn cmsg_data<T>(h: &libc::msghdr, level: i32, ty: i32) -> Option<T> {
    if h.msg_controllen == 0 {
        return None;
    }
    // SAFETY: msg_control/msg_controllen describe the control buffer as
    // filled by the kernel; the CMSG macros stay within it, and the length
    // check keeps the read of a T within the message.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(h);
        while !c.is_null() {
            if (*c).cmsg_level == level
                && (*c).cmsg_type == ty
                && (*c).cmsg_len as usize
                    >= libc::CMSG_LEN(std::mem::size_of::<T>() as u32) as usize
            {
                return Some(std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const T));
            }
            c = libc::CMSG_NXTHDR(h, c);
        }
    }
    None
}

impl RxPort for RxMmsg {
    fn recv(&mut self, batch: &mut Batch) -> Result<usize, PortError> {
        batch.claim(self.id)?;
        let want = batch.room().min(self.free.len()).min(MAX_BATCH);
        if want == 0 {
            return Ok(0);
        }
        let top = self.free.len();
        let base = self.bufs.base();
        for i in 0..want {
            let idx = self.free[top - 1 - i] as usize;
            // SAFETY: idx < nbufs, so the buffer lies inside `bufs`. The
            // first VLAN_ROOM bytes stay free to put a VLAN tag back.
            let p = unsafe { base.add(idx * self.buf_size + VLAN_ROOM) };
            self.msgs.set(i, p, self.buf_size - VLAN_ROOM);
            let h = &mut self.msgs.hdrs[i].msg_hdr;
            h.msg_control = self.ctrl[i].as_mut_ptr() as *mut libc::c_void;
            h.msg_controllen = std::mem::size_of::<[u64; CTRL_WORDS]>() as _;
        }
        // SAFETY: hdrs[..want] are valid and point at `want` free buffers.
        let r = unsafe {
            libc::recvmmsg(
                self.fd.as_raw_fd(),
                self.msgs.hdrs.as_mut_ptr(),
                want as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EINTR)) {
                self.watch.tick()?;
                return Ok(0);
            }
            // An interface gone or down says so in its own words.
            self.watch.check()?;
            return Err(PortError::os("afpacket: recvmmsg", e));
        }
        let got = r as usize;
        batch.hold(&self.bufs);
        for i in 0..got {
            let idx = self.free[top - 1 - i];
            let mut len = (self.msgs.hdrs[i].msg_len as usize).min(self.buf_size - VLAN_ROOM);
            let mut data = self.msgs.iovs[i].iov_base as *mut u8;
            if let Some((tpid, tci)) = vlan_of(&self.msgs.hdrs[i].msg_hdr) {
                if len >= 12 {
                    // SAFETY: data - VLAN_ROOM is the start of this packet's
                    // buffer; 12 + 4 bytes fit in front of the received frame.
                    unsafe {
                        std::ptr::copy(data, data.sub(VLAN_ROOM), 12);
                        data = data.sub(VLAN_ROOM);
                        std::ptr::copy_nonoverlapping(tpid.to_be_bytes().as_ptr(), data.add(12), 2);
                        std::ptr::copy_nonoverlapping(tci.to_be_bytes().as_ptr(), data.add(14), 2);
                    }
                    len += VLAN_ROOM;
                }
            }
            // SAFETY: the buffer was free and the kernel has written it; it
            // is lent to this descriptor until `release` puts `idx` back on
            // the free list, and `bufs` is held by the batch.
            batch.push(unsafe { Pkt::from_raw(data, len as u32, u64::from(idx), 0) });
        }
        self.free.truncate(top - got);
        Ok(got)
    }

    fn release(&mut self, batch: &mut Batch) -> Result<(), PortError> {
        // Another port's buffer indices would put buffers still in use on
        // this free list.
        batch.check_owner(self.id)?;
        for p in batch.pkts() {
            // Capacity is reserved for every buffer: never reallocates.
            if (p.handle() as usize) < self.nbufs && self.free.len() < self.nbufs {
                self.free.push(p.handle() as u32);
            }
        }
        batch.clear();
        Ok(())
    }

    fn wait(&mut self, timeout_ms: i32) -> Result<(), PortError> {
        self.watch.tick()?;
        poll_in(&self.fd, timeout_ms)
    }

    fn kernel_stats(&self) -> KernelStats {
        self.stats.read(&self.fd, false)
    }
}

/// TX half: sendmmsg straight from the caller's packets (the kernel copies them).
pub(crate) struct TxMmsg {
    fd: OwnedFd,
    msgs: Msgs,
    max_frame: usize,
    drops: TxDrops,
    watch: LinkWatch,
}

// SAFETY: the iovec arrays are only used during `send`, pointing at its arguments.
unsafe impl Send for TxMmsg {}

impl TxMmsg {
    pub fn open(uri: &Uri, cfg: &Config) -> Result<TxMmsg, PortError> {
        let fd = packet_socket(uri)?;
        setup_tx(uri, &fd, cfg)?;
        if setsockopt(
            uri,
            &fd,
            libc::SOL_SOCKET,
            libc::SO_SNDBUFFORCE,
            "SO_SNDBUFFORCE",
            &SNDBUF,
        )
        .is_err()
        {
            let _ = setsockopt(
                uri,
                &fd,
                libc::SOL_SOCKET,
                libc::SO_SNDBUF,
                "SO_SNDBUF",
                &SNDBUF,
            );
        }
        bind(uri, &fd, cfg, 0)?;
        Ok(TxMmsg {
            watch: watch(uri, cfg, &fd)?,
            fd,
            msgs: Msgs::new(),
            max_frame: cfg.mtu_frame,
            drops: TxDrops::default(),
        })
    }
}

impl TxMmsg {
    /// Undo the drop counts of skipped packets that are handed back untaken.
    fn uncount_skipped(&self, back: &[Pkt]) {
        use std::sync::atomic::Ordering::Relaxed;
        for p in back {
            let len = p.len() as usize;
            let c = if len > self.max_frame {
                &self.drops.too_big
            } else if len < MIN_FRAME {
                &self.drops.too_short
            } else {
                continue;
            };
            c.store(c.load(Relaxed).saturating_sub(1), Relaxed);
        }
    }
}

impl TxPort for TxMmsg {
    fn send(&mut self, pkts: &[Pkt]) -> Result<usize, PortError> {
        self.watch.tick()?;
        let mut done = 0;
        while done < pkts.len() {
            // Gather up to MAX_BATCH sendable packets; skip (and count) unsendable ones.
            let mut n = 0;
            let mut map = [0u16; MAX_BATCH];
            let mut scanned = done;
            let (mut big, mut short) = (0u64, 0u64);
            while scanned < pkts.len() && n < MAX_BATCH {
                let p = &pkts[scanned];
                let len = p.len() as usize;
                if len > self.max_frame {
                    big += 1;
                } else if len < MIN_FRAME {
                    short += 1;
                } else {
                    // sendmmsg only reads the caller's bytes.
                    self.msgs.set(n, p.as_ptr() as *mut u8, len);
                    map[n] = (scanned - done) as u16;
                    n += 1;
                }
                scanned += 1;
            }
            TxDrops::add(&self.drops.too_big, big);
            TxDrops::add(&self.drops.too_short, short);
            if n == 0 {
                done = scanned;
                continue;
            }
            // SAFETY: hdrs[..n] point at n live packets of the caller.
            let r = unsafe {
                libc::sendmmsg(
                    self.fd.as_raw_fd(),
                    self.msgs.hdrs.as_mut_ptr(),
                    n as libc::c_uint,
                    libc::MSG_DONTWAIT,
                )
            };
            if r < 0 {
                let e = std::io::Error::last_os_error();
                if tx_transient(&e) {
                    // Nothing sent: packets up to the first sendable one were skipped.
                    let stop = done + map[0] as usize;
                    self.uncount_skipped(&pkts[stop..scanned]);
                    return Ok(stop);
                }
                self.watch.check()?;
                return Err(PortError::os("afpacket: transmit (sendmmsg)", e));
            }
            let sent = r as usize;
            if sent < n {
                let stop = done + map[sent] as usize;
                self.uncount_skipped(&pkts[stop..scanned]);
                return Ok(stop);
            }
            done = scanned;
        }
        Ok(done)
    }

    fn flush(&mut self) -> Result<(), PortError> {
        self.watch.tick()
    }

    fn max_frame(&self) -> usize {
        self.max_frame
    }

    fn kernel_stats(&self) -> KernelStats {
        self.drops.stats()
    }
}
