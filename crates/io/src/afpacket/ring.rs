//! Packet rings: the TPACKET_V3 block RX ring (zero copy, for sleeping
//! readers), the TPACKET_V2 frame RX ring (zero copy, per-frame hand-over,
//! for busy-polling forwarders) and a TPACKET_V3 fixed-frame TX ring.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use super::{
    bind, packet_socket, poll_in, setsockopt, setup_rx, setup_tx, tx_transient, watch, Config,
    SockStats, TxDrops, MIN_FRAME,
};
use crate::batch::{Batch, Pkt, PortId};
use crate::counters::KernelStats;
use crate::link::LinkWatch;
use crate::port::{PortError, RxPort, TxPort};
use crate::uri::Uri;

/// Where packet data starts in a V3 TX frame: TPACKET_ALIGN(sizeof(tpacket3_hdr))
/// (the kernel's `tp_hdrlen - sizeof(sockaddr_ll)` without PACKET_TX_HAS_OFF).
const TX_DATA_OFF: usize = libc::TPACKET3_HDRLEN - std::mem::size_of::<libc::sockaddr_ll>();
/// End of the per-packet headers in an RX slot (tpacket3_hdr + sockaddr_ll).
const RX_HDR_END: usize = libc::TPACKET3_HDRLEN;

/// A shared mapping of a packet ring.
struct Mapping {
    ptr: *mut u8,
    len: usize,
}

impl Mapping {
    fn new(uri: &Uri, fd: &OwnedFd, len: usize, what: &str) -> Result<Mapping, PortError> {
        // SAFETY: mapping the ring the kernel set up on fd; result checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(uri.err(format!(
                "mmap of the {what} ring ({len} bytes): {}",
                std::io::Error::last_os_error()
            )));
        }
        Ok(Mapping {
            ptr: p as *mut u8,
            len,
        })
    }
}

// SAFETY: the mapping is plain shared memory; who may touch which part of
// it is the ring protocol's business (status words), not the mapping's.
unsafe impl Send for Mapping {}
unsafe impl Sync for Mapping {}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: ptr/len come from our own successful mmap.
        unsafe {
            libc::munmap(self.ptr as *mut libc::c_void, self.len);
        }
    }
}

fn set_version(
    uri: &Uri,
    fd: &OwnedFd,
    v: libc::tpacket_versions,
    name: &str,
) -> Result<(), PortError> {
    let v: libc::c_int = v as libc::c_int;
    setsockopt(
        uri,
        fd,
        libc::SOL_PACKET,
        libc::PACKET_VERSION,
        &format!("PACKET_VERSION {name}"),
        &v,
    )
}

/// The status word at the start of a block descriptor / frame header, as an atomic.
///
/// # Safety
/// `p` must point to a 4-byte aligned u32 inside the mapped ring.
#[inline(always)]
unsafe fn status_at<'a>(p: *mut u8) -> &'a AtomicU32 {
    &*(p as *const AtomicU32)
}

// Block states as user space sees them.
const BLK_KERNEL: u8 = 0; // owned by the kernel (or not yet looked at)
const BLK_WALKING: u8 = 1; // ours, packets being handed out
const BLK_WALKED: u8 = 2; // ours, all packets handed out

/// Offset of `block_status` in `tpacket_block_desc` (version, offset_to_priv, then hdr.bh1).
const BLOCK_STATUS_OFF: usize = 8;

/// RX half: a TPACKET_V3 block ring.
pub(crate) struct RxV3 {
    /// Stamped on the batches this half fills (see [`Batch::claim`]).
    id: PortId,
    fd: OwnedFd,
    /// The ring; also held by every batch this half fills.
    map: Arc<Mapping>,
    block_size: usize,
    nblocks: usize,
    /// Block being walked (or the next one to open).
    cur: usize,
    /// Packets of `cur` not yet handed out.
    left: u32,
    /// Offset in `cur` of the next packet.
    next_off: usize,
    /// Oldest block not yet returned to the kernel.
    rel: usize,
    state: Vec<u8>,
    /// Packets handed out and not yet released, per block.
    outstanding: Vec<u32>,
    stats: SockStats,
    /// Packets whose header the ring walk found inconsistent (skipped).
    bad: u64,
    /// Released packets that were not outstanding in their block (never
    /// expected: batches are checked to be this half's); not subtracted,
    /// so a block's count never goes below zero and the block is not
    /// handed back while packets of it may still be in use.
    bad_release: u64,
    watch: LinkWatch,
}

// SAFETY: the mapping is owned by this half only; nothing else touches it in
// this process. The kernel side is synchronised through the status words.
unsafe impl Send for RxV3 {}

impl RxV3 {
    pub fn open(uri: &Uri, cfg: &Config) -> Result<RxV3, PortError> {
        let fd = packet_socket(uri)?;
        set_version(uri, &fd, libc::tpacket_versions::TPACKET_V3, "V3")?;
        let req = libc::tpacket_req3 {
            tp_block_size: cfg.block_size,
            tp_block_nr: cfg.blocks,
            tp_frame_size: cfg.frame_size,
            tp_frame_nr: (cfg.block_size / cfg.frame_size) * cfg.blocks,
            tp_retire_blk_tov: cfg.tov_ms,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        setsockopt(
            uri,
            &fd,
            libc::SOL_PACKET,
            libc::PACKET_RX_RING,
            &format!(
                "PACKET_RX_RING ({} blocks of {} bytes)",
                cfg.blocks, cfg.block_size
            ),
            &req,
        )?;
        let len = cfg.blocks as usize * cfg.block_size as usize;
        let map = Arc::new(Mapping::new(uri, &fd, len, "RX")?);
        // Bind only now: the ring exists before the first packet arrives.
        bind(uri, &fd, cfg, libc::ETH_P_ALL as u16)?;
        setup_rx(uri, &fd, cfg)?;
        let n = cfg.blocks as usize;
        Ok(RxV3 {
            id: PortId::fresh(),
            watch: watch(uri, cfg, &fd)?,
            fd,
            map,
            block_size: cfg.block_size as usize,
            nblocks: n,
            cur: 0,
            left: 0,
            next_off: 0,
            rel: 0,
            state: vec![BLK_KERNEL; n],
            outstanding: vec![0; n],
            stats: SockStats::default(),
            bad: 0,
            bad_release: 0,
        })
    }

    #[inline(always)]
    fn block(&self, i: usize) -> *mut u8 {
        // SAFETY: i < nblocks, so the offset is inside the mapping.
        unsafe { self.map.ptr.add(i * self.block_size) }
    }

    #[inline(always)]
    fn block_status(&self, i: usize) -> &AtomicU32 {
        // SAFETY: the status word is 4-byte aligned at a fixed offset of the block.
        unsafe { status_at(self.block(i).add(BLOCK_STATUS_OFF)) }
    }

    /// Is the next block ready for user space?
    #[inline(always)]
    fn next_ready(&self) -> bool {
        self.state[self.cur] == BLK_KERNEL
            && self.block_status(self.cur).load(Ordering::Acquire) & libc::TP_STATUS_USER != 0
    }

    /// Mark `cur` fully handed out and move to the next block.
    #[inline(always)]
    fn finish_block(&mut self) {
        self.state[self.cur] = BLK_WALKED;
        self.left = 0;
        self.cur = if self.cur + 1 == self.nblocks {
            0
        } else {
            self.cur + 1
        };
    }

    /// `run` packets of block `blk` came back (once per run of packets of
    /// one block, not per packet). More than the block has out is counted
    /// and clamped at zero: the count cannot go negative.
    #[inline(always)]
    fn put_back(&mut self, blk: usize, run: u32) {
        match self.outstanding.get_mut(blk) {
            Some(o) if *o >= run => *o -= run,
            Some(o) => {
                debug_assert!(false, "block {blk}: {run} released, {o} outstanding");
                self.bad_release += u64::from(run - *o);
                *o = 0;
            }
            None => self.bad_release += u64::from(run),
        }
    }

    /// Return to the kernel, in ring order, every block that was fully
    /// handed out and whose packets were all released.
    #[inline]
    fn return_blocks(&mut self) {
        while self.state[self.rel] == BLK_WALKED && self.outstanding[self.rel] == 0 {
            // Release store: our reads of the block happen before the kernel refills it.
            self.block_status(self.rel)
                .store(libc::TP_STATUS_KERNEL, Ordering::Release);
            self.state[self.rel] = BLK_KERNEL;
            self.rel = if self.rel + 1 == self.nblocks {
                0
            } else {
                self.rel + 1
            };
        }
    }
}

impl RxPort for RxV3 {
    fn recv(&mut self, batch: &mut Batch) -> Result<usize, PortError> {
        batch.claim(self.id)?;
        let mut n = 0;
        let bs = self.block_size;
        batch.hold(&self.map);
        while !batch.is_full() {
            if self.left == 0 {
                if !self.next_ready() {
                    break;
                }
                let b = self.block(self.cur);
                // SAFETY: the block is ours (TP_STATUS_USER seen with acquire);
                // the descriptor fields lie at fixed offsets within it.
                let (num, first) = unsafe {
                    let d = &*(b as *const libc::tpacket_block_desc);
                    (d.hdr.bh1.num_pkts, d.hdr.bh1.offset_to_first_pkt as usize)
                };
                self.state[self.cur] = BLK_WALKING;
                if num == 0 || first >= bs {
                    self.finish_block();
                    self.return_blocks();
                    continue;
                }
                self.left = num;
                self.next_off = first;
            }
            let cur = self.cur;
            let b = self.block(cur);
            let off = self.next_off;
            if off + RX_HDR_END > bs {
                // Inconsistent walk: give up on the rest of this block.
                self.bad += u64::from(self.left);
                self.finish_block();
                self.return_blocks();
                continue;
            }
            // SAFETY: off + header size is inside the block (checked above).
            let h = unsafe { &*(b.add(off) as *const libc::tpacket3_hdr) };
            let mac = h.tp_mac as usize;
            let snap = h.tp_snaplen as usize;
            let next = h.tp_next_offset as usize;
            if mac >= RX_HDR_END && off + mac + snap <= bs {
                // SAFETY: data lies inside the block (checked above).
                let mut data = unsafe { b.add(off + mac) };
                let mut len = snap as u32;
                if h.tp_status & libc::TP_STATUS_VLAN_VALID != 0
                    && mac >= RX_HDR_END + 4
                    && snap >= 12
                {
                    // The kernel took the VLAN tag out of the frame (offload):
                    // put it back in front of the EtherType, in place, using
                    // the padding between the slot header and the frame.
                    let tpid = if h.tp_status & libc::TP_STATUS_VLAN_TPID_VALID != 0 {
                        h.hv1.tp_vlan_tpid
                    } else {
                        0x8100
                    };
                    let tci = h.hv1.tp_vlan_tci as u16;
                    // SAFETY: data-4 >= slot start + RX_HDR_END (checked), the
                    // 12 MAC bytes and the 4 tag bytes are inside the block.
                    unsafe {
                        std::ptr::copy(data, data.sub(4), 12);
                        data = data.sub(4);
                        std::ptr::copy_nonoverlapping(tpid.to_be_bytes().as_ptr(), data.add(12), 2);
                        std::ptr::copy_nonoverlapping(tci.to_be_bytes().as_ptr(), data.add(14), 2);
                    }
                    len += 4;
                }
                let ts = u64::from(h.tp_sec) * 1_000_000_000 + u64::from(h.tp_nsec);
                // SAFETY: the frame lies inside block `cur` (checked above),
                // which is ours until every packet of it was released
                // (`outstanding`); the ring mapping is held by the batch.
                batch.push(unsafe { Pkt::from_raw(data, len, cur as u64, ts) });
                self.outstanding[cur] += 1;
                n += 1;
            } else {
                self.bad += 1;
            }
            self.left -= 1;
            if self.left == 0 || next == 0 {
                if self.left != 0 {
                    self.bad += u64::from(self.left);
                }
                self.finish_block();
                if self.outstanding[cur] == 0 {
                    self.return_blocks();
                }
            } else {
                self.next_off = off + next;
            }
        }
        if n == 0 {
            self.watch.tick()?;
        }
        Ok(n)
    }

    fn release(&mut self, batch: &mut Batch) -> Result<(), PortError> {
        // Another port's batch would count its packets off this ring's
        // blocks and hand blocks back to the kernel while still in use.
        batch.check_owner(self.id)?;
        // Per packet only a compare; consecutive packets share a block.
        let mut run_blk = usize::MAX;
        let mut run = 0u32;
        for p in batch.pkts() {
            let b = p.handle() as usize;
            if b != run_blk {
                if run > 0 {
                    self.put_back(run_blk, run);
                }
                run_blk = b;
                run = 0;
            }
            run += 1;
        }
        if run > 0 {
            self.put_back(run_blk, run);
        }
        batch.clear();
        self.return_blocks();
        Ok(())
    }

    fn wait(&mut self, timeout_ms: i32) -> Result<(), PortError> {
        if self.left > 0 || self.next_ready() {
            return Ok(());
        }
        self.watch.tick()?;
        poll_in(&self.fd, timeout_ms)
    }

    fn kernel_stats(&self) -> KernelStats {
        let mut k = self.stats.read(&self.fd, true);
        k.counters.push(("rx_bad_slot_drops", self.bad));
        k.counters.push(("rx_bad_release", self.bad_release));
        k
    }
}

/// A ring of fixed-size frames in blocks (the V2 RX ring, the TX ring):
/// frame `i`'s address and status word.
struct Frames {
    map: Arc<Mapping>,
    frame_size: usize,
    block_size: usize,
    per_block: usize,
    frames: usize,
    /// Offset of the status word in a frame header (V2: tp_status first;
    /// V3: after tp_next_offset, tp_sec, tp_nsec, tp_snaplen, tp_len).
    status_off: usize,
}

impl Frames {
    #[inline(always)]
    fn frame(&self, i: usize) -> *mut u8 {
        // Blocks without a gap at their end (the default layouts): frame i
        // is at i * frame_size, no division on the per-packet path.
        let off = if self.per_block * self.frame_size == self.block_size {
            i * self.frame_size
        } else {
            (i / self.per_block) * self.block_size + (i % self.per_block) * self.frame_size
        };
        // SAFETY: i < frames, so the frame lies inside the mapping.
        unsafe { self.map.ptr.add(off) }
    }

    #[inline(always)]
    fn status(&self, i: usize) -> &AtomicU32 {
        // SAFETY: the status word is a 4-byte aligned field of the frame header.
        unsafe { status_at(self.frame(i).add(self.status_off)) }
    }

    #[inline(always)]
    fn step(&self, i: usize) -> usize {
        if i + 1 == self.frames {
            0
        } else {
            i + 1
        }
    }
}

/// A hint to load the cache line at `p` (no fault if it is not mapped).
#[inline(always)]
fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetch is a hint; it never faults or reads into Rust's view.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// End of the per-packet headers in a V2 RX frame (tpacket2_hdr + sockaddr_ll).
const RX2_HDR_END: usize = libc::TPACKET2_HDRLEN;

/// RX half: a TPACKET_V2 frame ring. Every frame has its own status word,
/// so a packet is user space's as soon as the kernel has written it: no
/// block to fill or to time out (TPACKET_V3 hands over a partly filled
/// block only after its retire timeout, 1-2 ms, which at low rates is the
/// latency of every packet). The ring of a busy-polling forwarder.
pub(crate) struct RxV2 {
    /// Stamped on the batches this half fills (see [`Batch::claim`]).
    id: PortId,
    fd: OwnedFd,
    /// The ring; its mapping is also held by every batch this half fills.
    ring: Frames,
    /// Next frame to look at.
    cur: usize,
    /// Frames handed out and not yet released (their status still says
    /// USER: without this a lapped ring would hand them out twice).
    lent: Vec<bool>,
    stats: SockStats,
    /// Frames whose header was inconsistent (skipped, given back).
    bad: u64,
    /// Frames longer than a ring frame holds (jumbo MTU, GRO): the kernel
    /// cut them; dropped here rather than passed on cut.
    truncated: u64,
    watch: LinkWatch,
}

// SAFETY: as for RxV3: the mapping belongs to this half only, the kernel
// side is synchronised through the status words.
unsafe impl Send for RxV2 {}

impl RxV2 {
    pub fn open(uri: &Uri, cfg: &Config) -> Result<RxV2, PortError> {
        let fd = packet_socket(uri)?;
        set_version(uri, &fd, libc::tpacket_versions::TPACKET_V2, "V2")?;
        let frame = cfg.rx2.frame_size as usize;
        let block = cfg.rx2.block_size as usize;
        let per_block = block / frame;
        let frames = cfg.rx2.frames() as usize;
        let req = libc::tpacket_req {
            tp_block_size: block as u32,
            tp_block_nr: cfg.rx2.blocks,
            tp_frame_size: frame as u32,
            tp_frame_nr: frames as u32,
        };
        setsockopt(
            uri,
            &fd,
            libc::SOL_PACKET,
            libc::PACKET_RX_RING,
            &format!("PACKET_RX_RING ({frames} frames of {frame} bytes)"),
            &req,
        )?;
        let map = Arc::new(Mapping::new(
            uri,
            &fd,
            block * cfg.rx2.blocks as usize,
            "RX",
        )?);
        // Bind only now: the ring exists before the first packet arrives.
        bind(uri, &fd, cfg, libc::ETH_P_ALL as u16)?;
        setup_rx(uri, &fd, cfg)?;
        Ok(RxV2 {
            id: PortId::fresh(),
            watch: watch(uri, cfg, &fd)?,
            fd,
            ring: Frames {
                map,
                frame_size: frame,
                block_size: block,
                per_block,
                frames,
                status_off: std::mem::offset_of!(libc::tpacket2_hdr, tp_status),
            },
            cur: 0,
            lent: vec![false; frames],
            stats: SockStats::default(),
            bad: 0,
            truncated: 0,
        })
    }

    pub fn frames(&self) -> usize {
        self.ring.frames
    }

    #[inline(always)]
    fn ready(&self, i: usize) -> bool {
        !self.lent[i] && self.ring.status(i).load(Ordering::Acquire) & libc::TP_STATUS_USER != 0
    }
}

impl RxPort for RxV2 {
    fn recv(&mut self, batch: &mut Batch) -> Result<usize, PortError> {
        batch.claim(self.id)?;
        batch.hold(&self.ring.map);
        let mut n = 0;
        while !batch.is_full() && self.ready(self.cur) {
            let i = self.cur;
            self.cur = self.ring.step(i);
            // Ask for the header after next now: frames lie a page or
            // more apart, so each is a TLB and cache miss that the loop
            // would otherwise wait for in turn.
            prefetch(self.ring.frame(self.ring.step(self.cur)));
            let f = self.ring.frame(i);
            // SAFETY: the frame is ours (TP_STATUS_USER seen with acquire);
            // the header is at its start.
            let h = unsafe { &*(f as *const libc::tpacket2_hdr) };
            let mac = h.tp_mac as usize;
            let snap = h.tp_snaplen as usize;
            if mac < RX2_HDR_END || mac + snap > self.ring.frame_size || snap < h.tp_len as usize {
                if snap < h.tp_len as usize {
                    self.truncated += 1;
                } else {
                    self.bad += 1;
                }
                self.ring
                    .status(i)
                    .store(libc::TP_STATUS_KERNEL, Ordering::Release);
                continue;
            }
            // SAFETY: data lies inside the frame (checked above).
            let mut data = unsafe { f.add(mac) };
            let mut len = snap as u32;
            if h.tp_status & libc::TP_STATUS_VLAN_VALID != 0 && mac >= RX2_HDR_END + 4 && snap >= 12
            {
                // The kernel took the VLAN tag out (offload): put it back in
                // front of the EtherType, in place, in the padding before
                // the frame.
                let tpid = if h.tp_status & libc::TP_STATUS_VLAN_TPID_VALID != 0 {
                    h.tp_vlan_tpid
                } else {
                    0x8100
                };
                let tci = h.tp_vlan_tci;
                // SAFETY: data-4 >= frame start + RX2_HDR_END (checked); the
                // 12 MAC bytes and the 4 tag bytes are inside the frame.
                unsafe {
                    std::ptr::copy(data, data.sub(4), 12);
                    data = data.sub(4);
                    std::ptr::copy_nonoverlapping(tpid.to_be_bytes().as_ptr(), data.add(12), 2);
                    std::ptr::copy_nonoverlapping(tci.to_be_bytes().as_ptr(), data.add(14), 2);
                }
                len += 4;
            }
            let ts = u64::from(h.tp_sec) * 1_000_000_000 + u64::from(h.tp_nsec);
            self.lent[i] = true;
            // SAFETY: the frame is ours until `release` gives it back
            // (`lent` keeps recv from handing it out again); the ring
            // mapping is held by the batch.
            batch.push(unsafe { Pkt::from_raw(data, len, i as u64, ts) });
            n += 1;
        }
        if n == 0 {
            self.watch.tick()?;
        }
        Ok(n)
    }

    fn release(&mut self, batch: &mut Batch) -> Result<(), PortError> {
        // Another port's frame indices would hand this ring's frames back
        // to the kernel while still in use.
        batch.check_owner(self.id)?;
        for p in batch.pkts() {
            let i = p.handle() as usize;
            if i < self.ring.frames && self.lent[i] {
                self.lent[i] = false;
                // Release store: our reads of the frame happen before the
                // kernel refills it.
                self.ring
                    .status(i)
                    .store(libc::TP_STATUS_KERNEL, Ordering::Release);
            }
        }
        batch.clear();
        Ok(())
    }

    fn wait(&mut self, timeout_ms: i32) -> Result<(), PortError> {
        if self.ready(self.cur) {
            return Ok(());
        }
        self.watch.tick()?;
        poll_in(&self.fd, timeout_ms)
    }

    fn kernel_stats(&self) -> KernelStats {
        let mut k = self.stats.read(&self.fd, false);
        k.counters.push(("rx_bad_slot_drops", self.bad));
        k.counters.push(("rx_truncated_drops", self.truncated));
        k
    }
}

/// TX half: a TPACKET_V3 TX ring of fixed-size frames.
pub(crate) struct TxRing {
    fd: OwnedFd,
    ring: Frames,
    /// Next frame to fill.
    head: usize,
    /// Oldest frame handed to the kernel and not yet seen back.
    tail: usize,
    /// Frames between tail and head.
    pending: usize,
    /// A kick failed transiently: frames wait for the next flush.
    need_kick: bool,
    max_frame: usize,
    drops: TxDrops,
    watch: LinkWatch,
}

// SAFETY: as for RxV3: the mapping belongs to this half only.
unsafe impl Send for TxRing {}

impl TxRing {
    pub fn open(uri: &Uri, cfg: &Config) -> Result<TxRing, PortError> {
        let fd = packet_socket(uri)?;
        set_version(uri, &fd, libc::tpacket_versions::TPACKET_V3, "V3")?;
        let one: libc::c_int = 1;
        // Malformed frames are skipped by the kernel instead of stopping the ring.
        setsockopt(
            uri,
            &fd,
            libc::SOL_PACKET,
            libc::PACKET_LOSS,
            "PACKET_LOSS",
            &one,
        )?;
        setup_tx(uri, &fd, cfg)?;
        let frame = cfg.frame_size as usize;
        let block = frame.max(64 * 1024).next_power_of_two();
        let per_block = block / frame;
        let nblocks = (cfg.ring_size as usize).div_ceil(per_block);
        let frames = nblocks * per_block;
        let req = libc::tpacket_req3 {
            tp_block_size: block as u32,
            tp_block_nr: nblocks as u32,
            tp_frame_size: frame as u32,
            tp_frame_nr: frames as u32,
            tp_retire_blk_tov: 0,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        setsockopt(
            uri,
            &fd,
            libc::SOL_PACKET,
            libc::PACKET_TX_RING,
            &format!("PACKET_TX_RING ({frames} frames of {frame} bytes)"),
            &req,
        )?;
        let map = Arc::new(Mapping::new(uri, &fd, nblocks * block, "TX")?);
        // Protocol 0: this socket only sends, the kernel queues nothing on it.
        bind(uri, &fd, cfg, 0)?;
        Ok(TxRing {
            watch: watch(uri, cfg, &fd)?,
            fd,
            ring: Frames {
                map,
                frame_size: frame,
                block_size: block,
                per_block,
                frames,
                status_off: std::mem::offset_of!(libc::tpacket3_hdr, tp_status),
            },
            head: 0,
            tail: 0,
            pending: 0,
            need_kick: false,
            max_frame: (frame - TX_DATA_OFF).min(cfg.mtu_frame),
            drops: TxDrops::default(),
        })
    }

    pub fn frames(&self) -> usize {
        self.ring.frames
    }

    /// Take back frames the kernel has finished with (in ring order).
    #[inline]
    fn reclaim(&mut self) {
        while self.pending > 0 {
            let st = self.ring.status(self.tail).load(Ordering::Acquire);
            if st == libc::TP_STATUS_AVAILABLE {
            } else if st & libc::TP_STATUS_WRONG_FORMAT != 0 {
                TxDrops::add(&self.drops.error, 1);
                self.ring
                    .status(self.tail)
                    .store(libc::TP_STATUS_AVAILABLE, Ordering::Relaxed);
            } else {
                break;
            }
            self.tail = self.ring.step(self.tail);
            self.pending -= 1;
        }
    }

    /// One sendto per batch: the kernel sends every SEND_REQUEST frame.
    fn kick(&mut self) -> Result<(), PortError> {
        // SAFETY: sendto with no buffer on a TX-ring socket only triggers transmission.
        let r = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                std::ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null(),
                0,
            )
        };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if tx_transient(&e) {
                self.need_kick = true;
                return Ok(());
            }
            self.need_kick = true;
            self.watch.check()?;
            return Err(PortError::os("afpacket: transmit (TX ring sendto)", e));
        }
        self.need_kick = false;
        Ok(())
    }
}

impl TxPort for TxRing {
    fn send(&mut self, pkts: &[Pkt]) -> Result<usize, PortError> {
        self.watch.tick()?;
        self.reclaim();
        let mut taken = 0;
        let mut queued = 0;
        let (mut big, mut short) = (0u64, 0u64);
        for p in pkts {
            let len = p.len() as usize;
            if len > self.max_frame {
                big += 1;
                taken += 1;
                continue;
            }
            if len < MIN_FRAME {
                short += 1;
                taken += 1;
                continue;
            }
            if self.pending == self.ring.frames {
                break;
            }
            let i = self.head;
            let st = self.ring.status(i);
            if st.load(Ordering::Acquire) != libc::TP_STATUS_AVAILABLE {
                break;
            }
            let f = self.ring.frame(i);
            // SAFETY: the frame is ours (AVAILABLE, not pending); len fits in
            // frame_size - TX_DATA_OFF (max_frame); the source holds len bytes.
            unsafe {
                let h = &mut *(f as *mut libc::tpacket3_hdr);
                h.tp_next_offset = 0;
                h.tp_len = len as u32;
                h.tp_snaplen = len as u32;
                std::ptr::copy_nonoverlapping(p.bytes().as_ptr(), f.add(TX_DATA_OFF), len);
            }
            // Release store: the frame contents are visible before the kernel sees the status.
            self.ring
                .status(i)
                .store(libc::TP_STATUS_SEND_REQUEST, Ordering::Release);
            self.head = self.ring.step(i);
            self.pending += 1;
            queued += 1;
            taken += 1;
        }
        TxDrops::add(&self.drops.too_big, big);
        TxDrops::add(&self.drops.too_short, short);
        if queued > 0 || self.need_kick {
            self.kick()?;
        }
        Ok(taken)
    }

    fn flush(&mut self) -> Result<(), PortError> {
        self.watch.tick()?;
        if self.need_kick {
            self.kick()?;
        }
        self.reclaim();
        Ok(())
    }

    fn in_flight(&self) -> usize {
        self.pending
    }

    fn max_frame(&self) -> usize {
        self.max_frame
    }

    fn kernel_stats(&self) -> KernelStats {
        self.drops.stats()
    }
}
