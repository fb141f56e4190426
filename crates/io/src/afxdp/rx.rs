//! The receive half: RX ring -> batch, frames back through the fill ring.

use super::ring::{ConsRing, ProdRing};
use super::*;
use crate::batch::{Batch, Pkt, PortId};
use crate::counters::KernelStats;
use crate::link::LinkWatch;
use crate::port::{PortError, RxPort};
use std::io;
use std::sync::Arc;

/// The receive half.
pub struct AfXdpRx {
    /// Stamped on the batches this half fills (see [`Batch::claim`]).
    pub(super) id: PortId,
    pub(super) rx: ConsRing,
    pub(super) fill: ProdRing,
    pub(super) base: *mut u8,
    /// End (exclusive) of the RX frame set, in UMEM bytes.
    pub(super) rx_end: u64,
    /// `!(frame_size - 1)`: from a descriptor address to its frame.
    pub(super) frame_mask: u64,
    pub(super) need_wakeup: bool,
    /// Frames lent to the application (recv'd, not yet released).
    pub(super) held: u32,
    /// Descriptors with an address outside the RX set (never expected).
    pub(super) bad_desc: u64,
    /// Handles given to `release` that are not RX frames of this port.
    pub(super) bad_release: u64,
    pub(super) watch: LinkWatch,
    pub(super) shared: Arc<Shared>,
}

// SAFETY: the raw pointers point into the UMEM and ring mappings, which live
// as long as `shared`/the rings; this half is used by one thread at a time.
unsafe impl Send for AfXdpRx {}

impl AfXdpRx {
    /// Wake the driver's RX side (needed when the fill ring asks for it).
    /// Once per call at most: never per packet.
    #[inline]
    pub(super) fn kick(&self) {
        // SAFETY: zero-length non-blocking recvfrom on our socket.
        unsafe {
            libc::recvfrom(
                self.shared.fd(),
                std::ptr::null_mut(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            );
        }
    }
}

impl RxPort for AfXdpRx {
    fn recv(&mut self, batch: &mut Batch) -> Result<usize, PortError> {
        batch.claim(self.id)?;
        let want = batch.room() as u32;
        if want == 0 {
            return Ok(0);
        }
        let (idx, n) = self.rx.peek(want);
        if n == 0 {
            if self.need_wakeup && self.fill.needs_wakeup() {
                self.kick();
            }
            // A socket whose interface is gone polls as "nothing to read"
            // forever: the watch is what notices.
            self.watch.tick()?;
            return Ok(0);
        }
        batch.hold(&self.shared.umem);
        let mut got = 0;
        for i in 0..n {
            let (addr, len) = self.rx.desc(idx.wrapping_add(i));
            if addr.wrapping_add(len as u64) > self.rx_end || len == 0 {
                // Not one of our frames: skip (cannot be given back safely).
                self.bad_desc += 1;
                continue;
            }
            // SAFETY: addr + len lies inside the RX set of the UMEM (checked
            // above), which the batch holds; the kernel gave the frame to us
            // through the RX ring and gets it back only through `release`.
            batch.push(unsafe { Pkt::from_raw(self.base.add(addr as usize), len, addr, 0) });
            got += 1;
        }
        self.rx.release();
        self.held += got;
        Ok(got as usize)
    }

    fn release(&mut self, batch: &mut Batch) -> Result<(), PortError> {
        // Another socket's frames would go into this fill ring while still
        // in use there (or be addresses of another UMEM).
        batch.check_owner(self.id)?;
        let want = batch.len() as u32;
        if want > 0 {
            // The fill ring holds the whole RX set, so this gets `want` slots
            // unless handles were released twice.
            let (idx, n) = self.fill.reserve(want);
            let mut used = 0u32;
            for p in batch.pkts().iter().take(n as usize) {
                let frame = p.handle() & self.frame_mask;
                if frame >= self.rx_end {
                    self.bad_release += 1;
                    continue;
                }
                self.fill.set_addr(idx.wrapping_add(used), frame);
                used += 1;
            }
            self.bad_release += (want - n) as u64;
            self.fill.cancel(n - used);
            self.fill.submit();
            self.held = self.held.saturating_sub(want);
            if self.need_wakeup && self.fill.needs_wakeup() {
                self.kick();
            }
        }
        batch.clear();
        Ok(())
    }

    fn wait(&mut self, timeout_ms: i32) -> Result<(), PortError> {
        if self.rx.has_entries() {
            return Ok(());
        }
        self.watch.tick()?;
        let mut pfd = libc::pollfd {
            fd: self.shared.fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let rc = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
        if rc < 0 && errno() != libc::EINTR {
            return Err(PortError::os("afxdp: poll", io::Error::last_os_error()));
        }
        Ok(())
    }

    fn kernel_stats(&self) -> KernelStats {
        let mut s = self.shared.stats();
        s.counters.push(("rx_bad_desc", self.bad_desc));
        s.counters.push(("rx_bad_release", self.bad_release));
        s
    }
}
