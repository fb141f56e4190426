//! The buffer pool: one memory region made at start-up, cut into fixed-size
//! frames, recycled through a free stack that never allocates after creation.
//!
//! The region is backed by 2 MiB hugepages when the system has them reserved
//! (`/proc/sys/vm/nr_hugepages`), plain anonymous memory otherwise. AF_XDP
//! registers the same region as its UMEM, so the pool *is* the UMEM.

use std::io;

/// Default frame size (AF_XDP's default chunk size; holds a 1518-byte frame plus headroom).
pub const DEFAULT_FRAME_SIZE: u32 = 2048;

/// A region of `frames * frame_size` bytes. Frames are named by their byte
/// offset in the region ("address", as in AF_XDP).
pub struct Region {
    base: *mut u8,
    len: usize,
    frame_size: u32,
    frames: u32,
    hugepages: bool,
}

// SAFETY: the region is plain memory; access discipline is the owner's.
unsafe impl Send for Region {}
unsafe impl Sync for Region {}

impl Region {
    /// Map `frames` frames of `frame_size` bytes (a power of two, 2048 or 4096 for AF_XDP).
    pub fn new(frames: u32, frame_size: u32) -> io::Result<Region> {
        if frames == 0 || frame_size < 64 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "pool: need at least one frame of 64 bytes or more",
            ));
        }
        let len = frames as usize * frame_size as usize;
        let huge_len = len.div_ceil(2 << 20) * (2 << 20);
        // Try hugepages first; fall back silently to normal pages.
        // SAFETY: anonymous private mapping, checked for MAP_FAILED.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                huge_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_HUGETLB | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if p != libc::MAP_FAILED {
            return Ok(Region {
                base: p as *mut u8,
                len: huge_len,
                frame_size,
                frames,
                hugepages: true,
            });
        }
        // SAFETY: as above.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Region {
            base: p as *mut u8,
            len,
            frame_size,
            frames,
            hugepages: false,
        })
    }
    pub fn base(&self) -> *mut u8 {
        self.base
    }
    /// Mapped length in bytes (rounded up to the page size used).
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn frame_size(&self) -> u32 {
        self.frame_size
    }
    pub fn frames(&self) -> u32 {
        self.frames
    }
    pub fn hugepages(&self) -> bool {
        self.hugepages
    }
    /// Pointer to byte `addr` of the region.
    ///
    /// # Safety
    /// `addr` must be below `frames * frame_size`.
    #[inline(always)]
    pub unsafe fn at(&self, addr: u64) -> *mut u8 {
        self.base.add(addr as usize)
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: base/len come from our own successful mmap.
        unsafe {
            libc::munmap(self.base as *mut libc::c_void, self.len);
        }
    }
}

/// A LIFO stack of free frame addresses with fixed capacity (no allocation
/// after `new`). LIFO keeps recently used, cache-warm frames in use.
pub struct FreeStack {
    addrs: Vec<u64>,
}

impl FreeStack {
    /// A stack holding the frames `first..first+count` of `frame_size` bytes.
    pub fn new(first: u32, count: u32, frame_size: u32) -> FreeStack {
        let mut addrs = Vec::with_capacity(count as usize);
        for i in (first..first + count).rev() {
            addrs.push(i as u64 * frame_size as u64);
        }
        FreeStack { addrs }
    }
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.addrs.len()
    }
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.addrs.is_empty()
    }
    #[inline(always)]
    pub fn pop(&mut self) -> Option<u64> {
        self.addrs.pop()
    }
    /// Return a frame. Capacity was reserved for every frame, so this never
    /// reallocates as long as each frame is returned once.
    #[inline(always)]
    pub fn push(&mut self, addr: u64) {
        debug_assert!(self.addrs.len() < self.addrs.capacity());
        self.addrs.push(addr);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn region_and_stack() {
        let r = Region::new(16, 2048).unwrap();
        assert!(r.len() >= 16 * 2048);
        let mut s = FreeStack::new(0, 16, 2048);
        let cap = s.addrs.capacity();
        let a = s.pop().unwrap();
        assert_eq!(a, 0);
        // SAFETY: addr 0 is inside the region.
        unsafe { *r.at(a) = 7 };
        let mut taken = vec![a];
        while let Some(x) = s.pop() {
            taken.push(x);
        }
        assert_eq!(taken.len(), 16);
        for x in taken {
            s.push(x);
        }
        assert_eq!(s.addrs.capacity(), cap, "recycling must not reallocate");
        assert!(Region::new(0, 2048).is_err());
    }
}
