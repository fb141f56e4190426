//! Packets and batches: the unit every stage takes and gives.
//!
//! A [`Pkt`] is a descriptor (pointer, length, backend handle, timestamp)
//! for a frame that belongs to the port that received it. It stays valid
//! until the batch is handed back with [`crate::RxPort::release`]. A
//! [`Batch`] is a fixed-capacity array of descriptors that lives on the
//! stack or in a stage: filling, draining and clearing it never allocates.

/// Largest batch any stage uses.
pub const MAX_BATCH: usize = 256;
/// Default batch size (DPDK's l2fwd uses 32; AF_XDP is happier with 64).
pub const DEFAULT_BATCH: usize = 64;
/// Smallest batch size a user may ask for.
pub const MIN_BATCH: usize = 1;

/// One packet descriptor. `data` points at `len` bytes of frame memory
/// owned by the receiving port (UMEM frame, ring slot, pool frame, file buffer).
#[derive(Clone, Copy, Debug)]
pub struct Pkt {
    pub data: *mut u8,
    pub len: u32,
    /// Backend-specific handle (UMEM address, frame index, block index...).
    pub handle: u64,
    /// Receive timestamp in nanoseconds (clock named by the port), 0 if none.
    pub ts_ns: u64,
}

// SAFETY: a Pkt is only a descriptor; the frame memory it points to is owned
// by the port that produced it and that port is moved together with it.
unsafe impl Send for Pkt {}

impl Default for Pkt {
    fn default() -> Self {
        Pkt {
            data: std::ptr::null_mut(),
            len: 0,
            handle: 0,
            ts_ns: 0,
        }
    }
}

impl Pkt {
    /// The packet bytes.
    #[inline(always)]
    pub fn bytes(&self) -> &[u8] {
        if self.data.is_null() {
            return &[];
        }
        // SAFETY: ports only hand out descriptors whose `data..data+len`
        // lies inside frame memory that outlives the batch (see module docs).
        unsafe { std::slice::from_raw_parts(self.data, self.len as usize) }
    }

    /// The packet bytes, writable (in-place header rewrite).
    #[inline(always)]
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        if self.data.is_null() {
            return &mut [];
        }
        // SAFETY: as in `bytes`; the batch holds the only descriptor of this frame.
        unsafe { std::slice::from_raw_parts_mut(self.data, self.len as usize) }
    }
}

/// A batch of up to `capacity` packets (at most [`MAX_BATCH`]).
pub struct Batch {
    pkts: [Pkt; MAX_BATCH],
    len: usize,
    cap: usize,
}

impl Batch {
    /// A batch of the given capacity, clamped to `1..=MAX_BATCH`.
    pub fn new(capacity: usize) -> Self {
        Batch {
            pkts: [Pkt::default(); MAX_BATCH],
            len: 0,
            cap: capacity.clamp(MIN_BATCH, MAX_BATCH),
        }
    }
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    #[inline(always)]
    pub fn capacity(&self) -> usize {
        self.cap
    }
    /// Free slots left.
    #[inline(always)]
    pub fn room(&self) -> usize {
        self.cap - self.len
    }
    #[inline(always)]
    pub fn is_full(&self) -> bool {
        self.len >= self.cap
    }
    /// Append a descriptor; returns false (and drops nothing) when full.
    #[inline(always)]
    pub fn push(&mut self, p: Pkt) -> bool {
        if self.len >= self.cap {
            return false;
        }
        self.pkts[self.len] = p;
        self.len += 1;
        true
    }
    #[inline(always)]
    pub fn clear(&mut self) {
        self.len = 0;
    }
    /// Keep only the first `n` descriptors.
    #[inline(always)]
    pub fn truncate(&mut self, n: usize) {
        if n < self.len {
            self.len = n;
        }
    }
    #[inline(always)]
    pub fn pkts(&self) -> &[Pkt] {
        &self.pkts[..self.len]
    }
    #[inline(always)]
    pub fn pkts_mut(&mut self) -> &mut [Pkt] {
        &mut self.pkts[..self.len]
    }
    /// Total bytes in the batch.
    #[inline]
    pub fn bytes(&self) -> u64 {
        self.pkts().iter().map(|p| p.len as u64).sum()
    }
}

impl Default for Batch {
    fn default() -> Self {
        Batch::new(DEFAULT_BATCH)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_respects_capacity() {
        let mut b = Batch::new(2);
        assert!(b.push(Pkt::default()));
        assert!(b.push(Pkt::default()));
        assert!(!b.push(Pkt::default()));
        assert_eq!(b.len(), 2);
        assert_eq!(Batch::new(10_000).capacity(), MAX_BATCH);
        assert_eq!(Batch::new(0).capacity(), 1);
    }
}
