//! The four AF_XDP rings, mapped from the socket.
//!
//! Each ring has one user-space side and one kernel side. The shared
//! producer/consumer indices are touched once per batch: the side that
//! writes keeps a cached copy of the other side's index and refreshes it
//! only when the cache says the ring looks full/empty (as libxdp's xsk.h).
//! Index loads of the other side are `Acquire` (descriptors written before
//! the index are visible), our own index stores are `Release` (our
//! descriptor writes/reads happen before the kernel sees the new index).

use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU32, Ordering};

/// One `mmap` of a ring (unmapped on drop: a ring mapping keeps the socket
/// file alive, so a forgotten mapping would keep the queue bound).
pub(super) struct Mapping {
    ptr: *mut libc::c_void,
    len: usize,
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: ptr/len come from our own successful mmap.
        unsafe {
            libc::munmap(self.ptr, self.len);
        }
    }
}

/// Pointers into a mapped ring.
pub(super) struct RingMap {
    producer: *const AtomicU32,
    consumer: *const AtomicU32,
    flags: *const AtomicU32,
    descs: *mut u8,
    mask: u32,
    size: u32,
    _map: Mapping,
}

// SAFETY: a ring is used by exactly one thread at a time (the owning half);
// the memory stays mapped while the RingMap lives.
unsafe impl Send for RingMap {}

impl RingMap {
    /// Map ring `size` (power of two) with descriptors of `desc_size` bytes at page offset `pgoff`.
    pub(super) fn map(
        fd: RawFd,
        off: &libc::xdp_ring_offset,
        size: u32,
        desc_size: usize,
        pgoff: u64,
    ) -> io::Result<RingMap> {
        let len = off.desc as usize + size as usize * desc_size;
        // SAFETY: mapping a region the kernel allocated for this socket; checked for MAP_FAILED.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd,
                pgoff as libc::off_t,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let b = ptr as *mut u8;
        // SAFETY: offsets come from XDP_MMAP_OFFSETS and lie inside the mapping.
        unsafe {
            Ok(RingMap {
                producer: b.add(off.producer as usize) as *const AtomicU32,
                consumer: b.add(off.consumer as usize) as *const AtomicU32,
                flags: b.add(off.flags as usize) as *const AtomicU32,
                descs: b.add(off.desc as usize),
                mask: size - 1,
                size,
                _map: Mapping { ptr, len },
            })
        }
    }
    #[inline(always)]
    fn producer(&self) -> &AtomicU32 {
        // SAFETY: points into the live mapping, 4-byte aligned by the kernel.
        unsafe { &*self.producer }
    }
    #[inline(always)]
    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as above.
        unsafe { &*self.consumer }
    }
    /// True when the kernel asks for a wakeup (XDP_USE_NEED_WAKEUP).
    #[inline(always)]
    pub(super) fn needs_wakeup(&self) -> bool {
        // SAFETY: as above.
        unsafe { &*self.flags }.load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0
    }
}

/// A ring we produce into (fill ring, TX ring).
pub(super) struct ProdRing {
    r: RingMap,
    cached_prod: u32,
    /// Consumer index + size: `cached_cons - cached_prod` is the free room.
    cached_cons: u32,
}

impl ProdRing {
    pub(super) fn new(r: RingMap) -> ProdRing {
        let cached_prod = r.producer().load(Ordering::Relaxed);
        let cached_cons = r.consumer().load(Ordering::Acquire).wrapping_add(r.size);
        ProdRing {
            r,
            cached_prod,
            cached_cons,
        }
    }
    /// Reserve up to `want` slots; returns (first index, count). Reads the
    /// kernel's consumer index only when the cache shows too little room.
    #[inline]
    pub(super) fn reserve(&mut self, want: u32) -> (u32, u32) {
        let mut free = self.cached_cons.wrapping_sub(self.cached_prod);
        if free < want {
            self.cached_cons = self
                .r
                .consumer()
                .load(Ordering::Acquire)
                .wrapping_add(self.r.size);
            free = self.cached_cons.wrapping_sub(self.cached_prod);
        }
        let n = want.min(free);
        let idx = self.cached_prod;
        self.cached_prod = self.cached_prod.wrapping_add(n);
        (idx, n)
    }
    /// Give back the last `n` reserved, unwritten slots.
    #[inline]
    pub(super) fn cancel(&mut self, n: u32) {
        self.cached_prod = self.cached_prod.wrapping_sub(n);
    }
    /// Publish every reserved slot (one release store).
    #[inline]
    pub(super) fn submit(&mut self) {
        self.r.producer().store(self.cached_prod, Ordering::Release);
    }
    /// Slots published but not yet consumed by the kernel.
    #[inline]
    pub(super) fn pending(&self) -> u32 {
        self.cached_prod
            .wrapping_sub(self.r.consumer().load(Ordering::Acquire))
    }
    #[inline(always)]
    pub(super) fn needs_wakeup(&self) -> bool {
        self.r.needs_wakeup()
    }
    /// Fill/completion descriptor (a UMEM address) at `idx`.
    #[inline(always)]
    pub(super) fn set_addr(&mut self, idx: u32, addr: u64) {
        // SAFETY: idx & mask is inside the ring of u64 descriptors.
        unsafe { *(self.r.descs as *mut u64).add((idx & self.r.mask) as usize) = addr }
    }
    /// RX/TX descriptor at `idx`.
    #[inline(always)]
    pub(super) fn set_desc(&mut self, idx: u32, addr: u64, len: u32) {
        // SAFETY: idx & mask is inside the ring of xdp_desc descriptors.
        unsafe {
            let d = (self.r.descs as *mut libc::xdp_desc).add((idx & self.r.mask) as usize);
            (*d).addr = addr;
            (*d).len = len;
            (*d).options = 0;
        }
    }
}

/// A ring the kernel produces into (RX ring, completion ring).
pub(super) struct ConsRing {
    r: RingMap,
    cached_prod: u32,
    cached_cons: u32,
}

impl ConsRing {
    pub(super) fn new(r: RingMap) -> ConsRing {
        let cached_cons = r.consumer().load(Ordering::Relaxed);
        let cached_prod = r.producer().load(Ordering::Acquire);
        ConsRing {
            r,
            cached_prod,
            cached_cons,
        }
    }
    /// Take up to `want` entries; returns (first index, count). Reads the
    /// kernel's producer index only when the cache holds fewer than `want`.
    #[inline]
    pub(super) fn peek(&mut self, want: u32) -> (u32, u32) {
        let mut avail = self.cached_prod.wrapping_sub(self.cached_cons);
        if avail < want {
            self.cached_prod = self.r.producer().load(Ordering::Acquire);
            avail = self.cached_prod.wrapping_sub(self.cached_cons);
        }
        let n = want.min(avail);
        let idx = self.cached_cons;
        self.cached_cons = self.cached_cons.wrapping_add(n);
        (idx, n)
    }
    /// Hand every peeked entry back to the kernel (one release store).
    #[inline]
    pub(super) fn release(&mut self) {
        self.r.consumer().store(self.cached_cons, Ordering::Release);
    }
    /// True if the kernel has produced entries we have not taken yet.
    #[inline]
    pub(super) fn has_entries(&self) -> bool {
        self.r.producer().load(Ordering::Acquire) != self.cached_cons
    }
    #[inline(always)]
    pub(super) fn addr(&self, idx: u32) -> u64 {
        // SAFETY: idx & mask is inside the ring of u64 descriptors.
        unsafe { *(self.r.descs as *const u64).add((idx & self.r.mask) as usize) }
    }
    #[inline(always)]
    pub(super) fn desc(&self, idx: u32) -> (u64, u32) {
        // SAFETY: idx & mask is inside the ring of xdp_desc descriptors.
        unsafe {
            let d = (self.r.descs as *const libc::xdp_desc).add((idx & self.r.mask) as usize);
            ((*d).addr, (*d).len)
        }
    }
}
