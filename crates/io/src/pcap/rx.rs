//! The replaying RX port over a [`super::read::Reader`] and a [`super::pace::Pacer`] (TX takes nothing).

use std::sync::Arc;
use std::time::Instant;

use crate::batch::{Batch, Pkt, PortId};
use crate::counters::KernelStats;
use crate::pool::{FreeStack, Region};
use crate::port::{OpenOptions, PortError, RxPort, TxPort};

use super::pace::Pacer;
use super::*;

pub(super) struct PcapRx {
    /// Stamped on the batches this half fills (see [`Batch::claim`]).
    pub(super) id: PortId,
    pub(super) reader: Reader,
    /// The frames; also held by every batch this port fills.
    pub(super) region: Arc<Region>,
    pub(super) free: FreeStack,
    pub(super) pacer: Pacer,
    /// A packet copied into a frame whose time has not come yet, with its due time.
    pub(super) pending: Option<(Pkt, u64)>,
    pub(super) loops: u64,
    /// Packets read before the current pass began.
    pub(super) pass_start: u64,
    pub(super) done: bool,
    /// The URI (for messages) and the file name.
    pub(super) name: String,
    pub(super) file: String,
}

impl PcapRx {
    pub(super) fn new(
        reader: Reader,
        opts: &OpenOptions,
        pace: Pace,
        loops: u64,
        name: String,
        file: String,
    ) -> Result<PcapRx, String> {
        let frames = opts.ring_size.max(crate::batch::MAX_BATCH as u32 * 2);
        let fs = opts.frame_size.max(64);
        let region = Region::new(frames, fs).map_err(|e| format!("cannot map frames: {e}"))?;
        Ok(PcapRx {
            id: PortId::fresh(),
            reader,
            region: Arc::new(region),
            free: FreeStack::new(0, frames, fs),
            pacer: Pacer {
                pace,
                start: None,
                base_ts: None,
                base_due: 0,
                last_due: 0,
                count: 0,
            },
            pending: None,
            loops,
            pass_start: 0,
            done: false,
            name,
            file,
        })
    }

    /// The next packet copied into a free frame, or None (no frame, or end).
    pub(super) fn fetch(&mut self) -> Result<Option<Pkt>, String> {
        if self.free.is_empty() {
            return Ok(None);
        }
        loop {
            match self.reader.next()? {
                Some((off, len, ts)) => {
                    let Some(addr) = self.free.pop() else {
                        return Ok(None); // checked above
                    };
                    // SAFETY: addr is a free frame of our region; len <= max_pkt <= frame size.
                    let dst = unsafe { self.region.at(addr) };
                    // SAFETY: off+len lies in the reader's buffer (checked by the parser).
                    unsafe {
                        std::ptr::copy_nonoverlapping(self.reader.buf.as_ptr().add(off), dst, len)
                    };
                    // SAFETY: the frame was on the free stack (lent to no one)
                    // and goes back to it only in `release`; the region is
                    // held by the batch the packet is pushed to.
                    return Ok(Some(unsafe { Pkt::from_raw(dst, len as u32, addr, ts) }));
                }
                None => {
                    self.reader.stats.passes += 1;
                    let more = self.loops == 0 || self.reader.stats.passes < self.loops;
                    // A pass that gave no packet would loop forever for nothing.
                    let empty_pass = self.reader.stats.packets == self.pass_start;
                    if !more || empty_pass {
                        self.done = true;
                        return Ok(None);
                    }
                    self.reader.rewind()?;
                    self.pass_start = self.reader.stats.packets;
                    self.pacer.new_pass();
                }
            }
        }
    }
}

impl RxPort for PcapRx {
    fn recv(&mut self, batch: &mut Batch) -> Result<usize, PortError> {
        batch.claim(self.id)?;
        let n0 = batch.len();
        if self.done && self.pending.is_none() {
            return Ok(0);
        }
        batch.hold(&self.region);
        // One clock read per call, not per packet.
        let now = match self.pacer.pace {
            Pace::Top => u64::MAX,
            _ => {
                let s = *self.pacer.start.get_or_insert_with(Instant::now);
                s.elapsed().as_nanos() as u64
            }
        };
        while !batch.is_full() {
            let (p, due) = match self.pending.take() {
                Some(pd) => pd,
                None => {
                    if self.done {
                        break;
                    }
                    match self.fetch() {
                        Ok(Some(p)) => {
                            let d = self.pacer.due(p.ts_ns());
                            (p, d)
                        }
                        Ok(None) => break,
                        Err(e) => {
                            self.done = true;
                            return Err(PortError::new(format!(
                                "port '{}': {}: {e}",
                                self.name, self.file
                            )));
                        }
                    }
                }
            };
            if due > now {
                self.pending = Some((p, due));
                break;
            }
            batch.push(p);
        }
        Ok(batch.len() - n0)
    }
    fn release(&mut self, batch: &mut Batch) -> Result<(), PortError> {
        // Another port's handles would go on this free stack.
        batch.check_owner(self.id)?;
        for p in batch.pkts() {
            self.free.push(p.handle());
        }
        batch.clear();
        Ok(())
    }
    fn wait(&mut self, timeout_ms: i32) -> Result<(), PortError> {
        // Sleep until the pending packet is due (bounded by the timeout).
        if let (Some((_, due)), Some(s)) = (&self.pending, self.pacer.start) {
            let now = s.elapsed().as_nanos() as u64;
            let ms = due.saturating_sub(now) / 1_000_000;
            let ms = ms.min(timeout_ms.max(0) as u64);
            if ms > 0 {
                std::thread::sleep(std::time::Duration::from_millis(ms));
            }
        }
        Ok(())
    }
    fn at_end(&self) -> bool {
        self.done && self.pending.is_none()
    }
    fn kernel_stats(&self) -> KernelStats {
        let s = &self.reader.stats;
        KernelStats {
            counters: vec![
                ("packets", s.packets),
                ("bytes", s.bytes),
                ("malformed_records", s.malformed_records),
                ("too_big", s.too_big),
                ("truncated", s.truncated),
                ("passes", s.passes),
            ],
        }
    }
}

/// TX of a read-mode port: takes nothing.
pub(super) struct RefuseTx {
    pub(super) not_taken: u64,
}

impl TxPort for RefuseTx {
    fn send(&mut self, pkts: &[Pkt]) -> Result<usize, PortError> {
        self.not_taken += pkts.len() as u64;
        Ok(0)
    }
    fn kernel_stats(&self) -> KernelStats {
        KernelStats {
            counters: vec![("tx_not_taken_read_mode", self.not_taken)],
        }
    }
}
