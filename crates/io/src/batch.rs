//! Packets and batches: the unit every stage takes and gives.
//!
//! A [`Pkt`] is a descriptor (pointer, length, backend handle, timestamp)
//! for a frame lent by the port that received it (or by the stage that
//! staged it for transmit). A [`Batch`] is a fixed-capacity array of
//! descriptors that lives on the stack or in a stage: filling, draining and
//! clearing it never allocates.
//!
//! # The ownership contract, and what enforces it
//! Frame memory is shared with the kernel and recycled by the port, so the
//! borrow checker cannot see it. The types keep safe code from breaking the
//! contract:
//! - a `Pkt` is made only by the `unsafe` [`Pkt::from_raw`], whose caller
//!   (a port's `recv`, or a stage staging frames in its own buffer) promises
//!   that the bytes are valid and lent to this descriptor alone;
//! - a `Pkt` is neither `Copy` nor `Clone` and has no public `Default`: safe
//!   code cannot make a second descriptor of a frame, so it cannot make two
//!   `&mut` to one frame through [`PktMut::bytes_mut`];
//! - a [`Batch`] hands out `&Pkt` ([`Batch::pkts`]) and [`PktMut`]
//!   ([`Batch::iter_mut`]), never `&mut Pkt`: a descriptor cannot be moved
//!   out of its batch or swapped into another port's batch, so it is gone
//!   when the batch is handed back with [`crate::RxPort::release`] (which
//!   clears it) and cannot be used after its frame was recycled;
//! - a batch belongs to the port that filled it: every RX half has a
//!   [`PortId`], its `recv` stamps the batch ([`Batch::claim`], which
//!   refuses a batch still holding another port's frames) and its
//!   `release` takes back only its own batches ([`Batch::check_owner`]);
//!   a batch handed to the wrong port is an error that touches nothing
//!   (the frames stay in the batch, for the right port), never a frame
//!   address of one port written into another port's ring;
//! - the batch holds a reference to the memory its frames live in
//!   ([`Batch::hold`], called by the port's `recv`), so dropping the port
//!   before the batch leaves the batch pointing at memory that is still
//!   mapped.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::error::PortError;

/// Largest batch any stage uses.
pub const MAX_BATCH: usize = 256;
/// Default batch size (DPDK's l2fwd uses 32; AF_XDP is happier with 64).
pub const DEFAULT_BATCH: usize = 64;
/// Smallest batch size a user may ask for.
pub const MIN_BATCH: usize = 1;

/// One packet descriptor: `len` bytes at `data`, lent by the port (or
/// stage) that made it. See the module docs for the contract.
#[derive(Debug)]
pub struct Pkt {
    data: *mut u8,
    len: u32,
    /// Backend-specific handle (UMEM address, frame index, block index...).
    handle: u64,
    /// Receive timestamp in nanoseconds (clock named by the port), 0 if none.
    ts_ns: u64,
}

// SAFETY: a Pkt is a descriptor of memory lent to it alone (the `from_raw`
// contract); moving it to another thread moves that loan with it.
unsafe impl Send for Pkt {}

impl Pkt {
    /// An empty descriptor (no bytes): what unused batch slots hold.
    const EMPTY: Pkt = Pkt {
        data: std::ptr::null_mut(),
        len: 0,
        handle: 0,
        ts_ns: 0,
    };

    /// A descriptor of the `len` bytes at `data`.
    ///
    /// # Safety
    /// Until the descriptor is dropped, or handed back with the batch that
    /// holds it ([`crate::RxPort::release`]), the caller guarantees that
    /// - `data..data+len` is valid for reads and writes (or `data` is null
    ///   and `len` 0), and lies in memory that the batch the descriptor is
    ///   pushed to keeps alive ([`Batch::hold`]) or that outlives that batch
    ///   (a stage's own staging buffer, sent and cleared before the buffer
    ///   goes);
    /// - nothing else reads or writes those bytes: no other live `Pkt`
    ///   describes them and neither the kernel nor the port touches them;
    /// - `handle` is what the port's `release` expects back for this frame.
    #[inline(always)]
    pub const unsafe fn from_raw(data: *mut u8, len: u32, handle: u64, ts_ns: u64) -> Pkt {
        Pkt {
            data,
            len,
            handle,
            ts_ns,
        }
    }

    /// Length in bytes.
    #[inline(always)]
    pub fn len(&self) -> u32 {
        self.len
    }
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The backend's handle of the frame (given back to `release`).
    #[inline(always)]
    pub fn handle(&self) -> u64 {
        self.handle
    }
    /// Timestamp in nanoseconds (receive time, or the TX time a stage set), 0 if none.
    #[inline(always)]
    pub fn ts_ns(&self) -> u64 {
        self.ts_ns
    }
    /// Set the timestamp (metadata only; the bytes are untouched).
    #[inline(always)]
    pub fn set_ts_ns(&mut self, ts_ns: u64) {
        self.ts_ns = ts_ns;
    }
    /// Address of the first byte (for backends that copy frames out).
    #[inline(always)]
    pub fn as_ptr(&self) -> *const u8 {
        self.data
    }

    /// The packet bytes.
    #[inline(always)]
    pub fn bytes(&self) -> &[u8] {
        if self.data.is_null() {
            return &[];
        }
        // SAFETY: `from_raw`'s contract: the bytes are valid and lent to this
        // descriptor alone while it lives; `&self` keeps `bytes_mut` out.
        unsafe { std::slice::from_raw_parts(self.data, self.len as usize) }
    }

    #[inline(always)]
    fn bytes_mut(&mut self) -> &mut [u8] {
        if self.data.is_null() {
            return &mut [];
        }
        // SAFETY: as in `bytes`; `&mut self` is the only access to the one
        // descriptor of these bytes (it is neither Copy nor Clone).
        unsafe { std::slice::from_raw_parts_mut(self.data, self.len as usize) }
    }
}

/// Write access to one descriptor of a batch: its bytes and its timestamp.
/// Not a `&mut Pkt`, so the descriptor itself cannot be moved or swapped.
pub struct PktMut<'a>(&'a mut Pkt);

impl PktMut<'_> {
    /// The packet bytes, writable (in-place header rewrite).
    #[inline(always)]
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        self.0.bytes_mut()
    }
    #[inline(always)]
    pub fn set_ts_ns(&mut self, ts_ns: u64) {
        self.0.set_ts_ns(ts_ns);
    }
}

impl std::ops::Deref for PktMut<'_> {
    type Target = Pkt;
    #[inline(always)]
    fn deref(&self) -> &Pkt {
        self.0
    }
}

/// The identity of a port's RX half, stamped on the batches it fills (see
/// the module docs). Unique in the process: drawn from a counter, never
/// reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PortId(u64);

impl PortId {
    /// A new identity (one per RX half, made when it is opened).
    pub fn fresh() -> PortId {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        PortId(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

impl std::fmt::Display for PortId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// What keeps the memory of a batch's frames mapped (see [`Batch::hold`]).
type Keep = Arc<dyn Send + Sync>;

/// A batch of up to `capacity` packets (at most [`MAX_BATCH`]).
pub struct Batch {
    pkts: [Pkt; MAX_BATCH],
    len: usize,
    cap: usize,
    /// The memory the frames of this batch live in, and its address (to
    /// skip the reference count when the same port fills the batch again).
    keep: Option<Keep>,
    keep_ptr: *const (),
    /// Owners before `keep` whose frames may still be in the batch; dropped
    /// once it is empty. Empty, and never allocated, when one port fills
    /// the batch (which [`Batch::claim`] makes the only case for ports).
    earlier: Vec<Keep>,
    /// The [`PortId`] (its number) of the port whose frames the batch
    /// holds, or last held; 0 before any port filled it.
    owner: u64,
}

// SAFETY: the descriptors are Send (above) and `keep` is Send + Sync;
// `keep_ptr` is only compared, never dereferenced.
unsafe impl Send for Batch {}

impl Batch {
    /// A batch of the given capacity, clamped to `1..=MAX_BATCH`.
    pub fn new(capacity: usize) -> Self {
        Batch {
            pkts: [const { Pkt::EMPTY }; MAX_BATCH],
            len: 0,
            cap: capacity.clamp(MIN_BATCH, MAX_BATCH),
            keep: None,
            keep_ptr: std::ptr::null(),
            earlier: Vec::new(),
            owner: 0,
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
    /// A port's `recv` calls this before it appends frames: the batch
    /// becomes port `id`'s. Refused, the batch unchanged, while it holds
    /// frames of another port or of a stage (pushed by hand): appended to,
    /// all of them would go back to this port. Costs one compare per batch
    /// (no work per packet) when the same port fills it again.
    #[inline(always)]
    pub fn claim(&mut self, id: PortId) -> Result<(), PortError> {
        if self.owner != id.0 {
            if self.len > 0 {
                return Err(self.not_ours("received into by", id));
            }
            self.owner = id.0;
        }
        Ok(())
    }
    /// A port's `release` calls this before it takes frames back: Ok if
    /// the batch is port `id`'s or empty (an empty batch releases
    /// anywhere); an error, the batch unchanged, if it holds another port's
    /// (or a stage's) frames, which the caller can still give back to the
    /// right port. One compare per batch, no work per packet.
    #[inline(always)]
    pub fn check_owner(&self, id: PortId) -> Result<(), PortError> {
        if self.owner == id.0 || self.len == 0 {
            Ok(())
        } else {
            Err(self.not_ours("released into", id))
        }
    }
    #[cold]
    fn not_ours(&self, what: &str, id: PortId) -> PortError {
        let whose = match self.owner {
            0 => "frames no port received".to_string(),
            o => format!("frames of port #{o}"),
        };
        PortError::new(format!(
            "a batch holding {} {whose} {what} port {id}: refused, nothing changed (a bug: frames go back only to the port that lent them)",
            self.len
        ))
    }
    /// Keep `owner` (the memory a port's frames live in) alive as long as
    /// this batch may hold descriptors into it. A port's `recv` calls it
    /// before pushing frames; one pointer compare when the same port fills
    /// the batch again, a reference count when another one does.
    #[inline(always)]
    pub fn hold<T: Send + Sync + 'static>(&mut self, owner: &Arc<T>) {
        let p = Arc::as_ptr(owner) as *const ();
        if p != self.keep_ptr {
            self.hold_another(owner.clone(), p);
        }
    }
    #[cold]
    fn hold_another(&mut self, owner: Keep, p: *const ()) {
        if let Some(k) = self.keep.take() {
            // Frames of the previous owner are still in: keep it too (once).
            let kp = Arc::as_ptr(&k) as *const ();
            if self.len > 0
                && !self
                    .earlier
                    .iter()
                    .any(|e| Arc::as_ptr(e) as *const () == kp)
            {
                self.earlier.push(k);
            }
        }
        self.keep = Some(owner);
        self.keep_ptr = p;
    }
    /// The batch is empty: only the last owner is still needed.
    #[inline(always)]
    fn emptied(&mut self) {
        if !self.earlier.is_empty() {
            self.earlier.clear();
        }
    }
    /// Append a descriptor; returns false (and drops the descriptor) when full.
    #[inline(always)]
    pub fn push(&mut self, p: Pkt) -> bool {
        if self.len >= self.cap {
            return false;
        }
        self.pkts[self.len] = p;
        self.len += 1;
        true
    }
    /// Forget every descriptor (their frames go back with `release`, which calls this).
    #[inline(always)]
    pub fn clear(&mut self) {
        self.len = 0;
        self.emptied();
    }
    /// Keep only the first `n` descriptors.
    #[inline(always)]
    pub fn truncate(&mut self, n: usize) {
        if n < self.len {
            self.len = n;
        }
        if self.len == 0 {
            self.emptied();
        }
    }
    /// Exchange descriptors `i` and `j` of this batch (both stay in it).
    #[inline(always)]
    pub fn swap(&mut self, i: usize, j: usize) {
        self.pkts[..self.len].swap(i, j);
    }
    #[inline(always)]
    pub fn pkts(&self) -> &[Pkt] {
        &self.pkts[..self.len]
    }
    /// Write access to every descriptor, in order.
    #[inline(always)]
    pub fn iter_mut(&mut self) -> impl Iterator<Item = PktMut<'_>> {
        self.pkts[..self.len].iter_mut().map(PktMut)
    }
    /// Write access to the descriptors `from..`, in order.
    #[inline(always)]
    pub fn iter_mut_from(&mut self, from: usize) -> impl Iterator<Item = PktMut<'_>> {
        let from = from.min(self.len);
        self.pkts[from..self.len].iter_mut().map(PktMut)
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

    fn frame(buf: &mut [u8], handle: u64) -> Pkt {
        // SAFETY: each test frame is its own buffer, alive for the whole test.
        unsafe { Pkt::from_raw(buf.as_mut_ptr(), buf.len() as u32, handle, 0) }
    }

    #[test]
    fn push_respects_capacity() {
        let mut bufs = [[0u8; 4]; 3];
        let [a, b, c] = &mut bufs;
        let mut batch = Batch::new(2);
        assert!(batch.push(frame(a, 0)));
        assert!(batch.push(frame(b, 1)));
        assert!(!batch.push(frame(c, 2)));
        assert_eq!(batch.len(), 2);
        assert_eq!(Batch::new(10_000).capacity(), MAX_BATCH);
        assert_eq!(Batch::new(0).capacity(), 1);
    }

    #[test]
    fn writes_through_iter_mut_reach_the_frame() {
        let mut bufs = [[0u8; 4]; 2];
        let [a, b] = &mut bufs;
        let mut batch = Batch::new(4);
        batch.push(frame(a, 7));
        batch.push(frame(b, 8));
        for (i, mut p) in batch.iter_mut().enumerate() {
            p.bytes_mut()[0] = 10 + i as u8;
            p.set_ts_ns(99);
        }
        batch.swap(0, 1);
        assert_eq!(batch.pkts()[0].handle(), 8);
        assert_eq!(batch.pkts()[1].ts_ns(), 99);
        assert_eq!(batch.iter_mut_from(1).count(), 1);
        assert_eq!(batch.iter_mut_from(9).count(), 0);
        batch.clear();
        assert!(batch.pkts().is_empty());
        assert_eq!((bufs[0][0], bufs[1][0]), (10, 11));
    }

    #[test]
    fn a_batch_is_its_filling_ports_until_empty() {
        let (a, b) = (PortId::fresh(), PortId::fresh());
        assert_ne!(a, b);
        let mut buf = [0u8; 4];
        let mut batch = Batch::new(4);
        // Empty: anyone's to fill or to release.
        batch.check_owner(b).unwrap();
        batch.claim(a).unwrap();
        batch.push(frame(&mut buf, 1));
        batch.claim(a).unwrap();
        let e = batch.check_owner(b).unwrap_err().to_string();
        assert!(
            e.contains(&format!("port {a}")) && e.contains(&format!("port {b}")),
            "{e}"
        );
        assert!(batch.claim(b).is_err());
        assert_eq!(batch.len(), 1);
        batch.check_owner(a).unwrap();
        batch.clear();
        batch.check_owner(b).unwrap();
        batch.claim(b).unwrap();
        // Frames pushed by a stage (no port filled the batch) go back to no port.
        let mut staged = Batch::new(4);
        staged.push(frame(&mut buf, 2));
        let e = staged.check_owner(a).unwrap_err().to_string();
        assert!(e.contains("frames no port received"), "{e}");
        assert!(staged.claim(a).is_err());
    }

    #[test]
    fn a_held_owner_outlives_its_port() {
        let owner = Arc::new(vec![1u8, 2, 3]);
        let mut batch = Batch::new(4);
        batch.hold(&owner);
        batch.hold(&owner); // same owner again: no second reference
        assert_eq!(Arc::strong_count(&owner), 2);
        {
            // Frames of a second owner join those of the first: both kept
            // until the batch is empty.
            let mut b = Batch::new(4);
            let (x, y) = (Arc::new(1u8), Arc::new(2u8));
            b.hold(&x);
            // SAFETY: a descriptor of a live byte, never read.
            assert!(b.push(unsafe { Pkt::from_raw(Arc::as_ptr(&x) as *mut u8, 1, 0, 0) }));
            b.hold(&y);
            assert_eq!((Arc::strong_count(&x), Arc::strong_count(&y)), (2, 2));
            b.clear();
            assert_eq!((Arc::strong_count(&x), Arc::strong_count(&y)), (1, 2));
            // An empty batch changing owner keeps only the new one.
            b.hold(&x);
            assert_eq!((Arc::strong_count(&x), Arc::strong_count(&y)), (2, 1));
        }
        let other = Arc::new(0u32);
        batch.hold(&other);
        assert_eq!(Arc::strong_count(&owner), 1);
        drop(batch);
        assert_eq!(Arc::strong_count(&other), 1);
    }
}
