//! The transmit half: batch -> copy into UMEM -> TX ring, completions back to the free stack.

use super::ring::{ConsRing, ProdRing};
use super::*;
use crate::batch::Pkt;
use crate::counters::KernelStats;
use crate::link::LinkWatch;
use crate::pool::FreeStack;
use crate::port::{PortError, TxPort};
use std::io;
use std::sync::Arc;

/// The transmit half.
pub struct AfXdpTx {
    pub(super) tx: ProdRing,
    pub(super) comp: ConsRing,
    pub(super) free: FreeStack,
    pub(super) base: *mut u8,
    pub(super) tx_start: u64,
    pub(super) tx_end: u64,
    pub(super) frame_mask: u64,
    pub(super) tx_frames: u32,
    pub(super) max_frame: u32,
    pub(super) need_wakeup: bool,
    /// Kicks needed to push a full TX ring in copy mode (sendto budget).
    pub(super) kicks_per_ring: u32,
    pub(super) too_big: u64,
    pub(super) bad_completion: u64,
    pub(super) watch: LinkWatch,
    pub(super) shared: Arc<Shared>,
}

// SAFETY: as for AfXdpRx.
unsafe impl Send for AfXdpTx {}

impl AfXdpTx {
    /// Move completed frames back to the free stack (one index update).
    #[inline]
    pub(super) fn reap(&mut self) {
        let (idx, n) = self.comp.peek(self.tx_frames);
        if n == 0 {
            return;
        }
        for i in 0..n {
            let frame = self.comp.addr(idx.wrapping_add(i)) & self.frame_mask;
            if frame < self.tx_start
                || frame >= self.tx_end
                || self.free.len() >= self.tx_frames as usize
            {
                self.bad_completion += 1;
                continue;
            }
            self.free.push(frame);
        }
        self.comp.release();
    }

    /// Ask the kernel to transmit what is on the TX ring. In copy mode one
    /// sendto sends a bounded number of frames and answers EAGAIN when more
    /// are left, so a full ring may take a few calls (per batch, never per
    /// packet). EAGAIN/EBUSY/ENOBUFS/ENETDOWN mean "try later".
    pub(super) fn kick(&mut self) -> Result<(), PortError> {
        for _ in 0..self.kicks_per_ring {
            // SAFETY: zero-length non-blocking sendto on our socket.
            let rc = unsafe {
                libc::sendto(
                    self.shared.fd(),
                    std::ptr::null(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null(),
                    0,
                )
            };
            if rc >= 0 {
                return Ok(());
            }
            match errno() {
                libc::EAGAIN => {
                    if self.tx.pending() == 0 {
                        return Ok(());
                    }
                }
                libc::EBUSY | libc::ENOBUFS | libc::ENETDOWN | libc::EINTR => return Ok(()),
                e => {
                    // ENXIO: the socket was unbound (its interface is gone).
                    self.watch.check()?;
                    return Err(PortError::new(format!(
                        "afxdp: transmit kick (sendto) failed: {}",
                        io::Error::from_raw_os_error(e)
                    )));
                }
            }
        }
        Ok(())
    }

    #[inline]
    pub(super) fn kick_if_needed(&mut self) -> Result<(), PortError> {
        if !self.need_wakeup || self.tx.needs_wakeup() {
            self.kick()
        } else {
            Ok(())
        }
    }
}

impl TxPort for AfXdpTx {
    fn send(&mut self, pkts: &[Pkt]) -> Result<usize, PortError> {
        self.watch.tick()?;
        if pkts.is_empty() {
            return Ok(0);
        }
        if self.free.len() < pkts.len() {
            self.reap();
        }
        let want = pkts.len().min(self.free.len()) as u32;
        let (idx, n) = self.tx.reserve(want);
        let mut used = 0u32;
        let mut taken = 0usize;
        for p in pkts {
            if used == n {
                break;
            }
            taken += 1;
            if p.len() > self.max_frame || p.as_ptr().is_null() {
                // Taken and counted here (tx_too_big): the caller checks
                // max_frame() first, so this is only a safety net.
                self.too_big += 1;
                continue;
            }
            let addr = self.free.pop().expect("reserved no more than free frames");
            // SAFETY: the frame is one of our free TX frames (frame_size >=
            // max_frame >= p.len() bytes).
            unsafe {
                std::ptr::copy_nonoverlapping(
                    p.as_ptr(),
                    self.base.add(addr as usize),
                    p.len() as usize,
                )
            };
            self.tx.set_desc(idx.wrapping_add(used), addr, p.len());
            used += 1;
        }
        self.tx.cancel(n - used);
        if used > 0 {
            self.tx.submit();
            self.kick_if_needed()?;
        }
        Ok(taken)
    }

    fn flush(&mut self) -> Result<(), PortError> {
        self.watch.tick()?;
        self.reap();
        if self.tx.pending() > 0 {
            self.kick_if_needed()?;
        }
        Ok(())
    }

    fn in_flight(&self) -> usize {
        self.tx_frames as usize - self.free.len()
    }

    fn max_frame(&self) -> usize {
        self.max_frame as usize
    }

    fn kernel_stats(&self) -> KernelStats {
        let mut s = self.shared.stats();
        s.counters.push(("tx_too_big", self.too_big));
        s.counters.push(("tx_bad_completion", self.bad_completion));
        s
    }
}
