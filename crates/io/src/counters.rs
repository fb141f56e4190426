//! Per-port and per-stage counters: packets, bytes, drops by reason.
//!
//! Each counter set has one writer (the thread running the stage) and any
//! number of readers (the once-a-second reporter). Writers add per batch
//! with relaxed atomics: no lock, no fence on the data path.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// A pipeline's reasons to drop a packet: each pipeline has its own
/// (forwarder: [`DropReason`], switch: `SwDrop`, capture: `CaptureDrop`),
/// and every drop has exactly one. [`Counters`] and [`Snapshot`] count by
/// any of them; `received = passed + drops` is kept in one place.
pub trait Reason: Copy + Eq + std::fmt::Debug + 'static {
    /// Every reason, in index order.
    const ALL: &'static [Self];
    fn name(self) -> &'static str;
    /// Below [`MAX_REASONS`].
    fn index(self) -> usize;
}

/// Room for this many reasons per pipeline (the counter arrays are fixed
/// size: no allocation, two cache lines).
pub const MAX_REASONS: usize = 16;

/// Whether `R::ALL` lists every reason at its own index and fits the
/// counter arrays (each reason type's unit test asserts it).
pub fn reasons_fit<R: Reason>() -> bool {
    R::ALL.len() <= MAX_REASONS && R::ALL.iter().enumerate().all(|(i, r)| r.index() == i)
}

/// Why the forwarder (and the I/O under any pipeline) dropped a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// The next ring (TX ring, inter-stage ring) had no room.
    RingFull,
    /// The kernel refused the transmit (sendto/sendmmsg error).
    TxError,
    /// Truncated or malformed frame.
    Malformed,
    /// Larger than the frame size of the output port.
    TooBig,
    /// Dropped by a filter or rule.
    Filter,
    /// No output for this packet.
    NoRoute,
}

impl Reason for DropReason {
    const ALL: &'static [DropReason] = &[
        DropReason::RingFull,
        DropReason::TxError,
        DropReason::Malformed,
        DropReason::TooBig,
        DropReason::Filter,
        DropReason::NoRoute,
    ];
    fn name(self) -> &'static str {
        match self {
            DropReason::RingFull => "ring_full",
            DropReason::TxError => "tx_error",
            DropReason::Malformed => "malformed",
            DropReason::TooBig => "too_big",
            DropReason::Filter => "filter",
            DropReason::NoRoute => "no_route",
        }
    }
    #[inline(always)]
    fn index(self) -> usize {
        self as usize
    }
}

/// Add `n` to a counter with one writer: load + store is enough and avoids
/// a locked read-modify-write on the data path.
#[inline(always)]
pub fn bump(c: &AtomicU64, n: u64) {
    c.store(c.load(Relaxed).wrapping_add(n), Relaxed);
}

/// Counters of one stage, drops by `R`: received = passed + sum(drops) at
/// every quiescent point. One writer (the stage's thread), any readers.
#[derive(Debug)]
pub struct Counters<R: Reason> {
    pub received: AtomicU64,
    pub received_bytes: AtomicU64,
    pub passed: AtomicU64,
    pub passed_bytes: AtomicU64,
    /// By [`Reason::index`].
    pub drops: [AtomicU64; MAX_REASONS],
    _r: PhantomData<R>,
}

/// A plain copy of [`Counters`] for reporting and arithmetic; also the
/// counts a single thread keeps for itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Snapshot<R: Reason> {
    pub received: u64,
    pub received_bytes: u64,
    pub passed: u64,
    pub passed_bytes: u64,
    /// By [`Reason::index`].
    pub drops: [u64; MAX_REASONS],
    _r: PhantomData<R>,
}

/// The forwarder's counters (and the default of any stage).
pub type StageCounters = Counters<DropReason>;
/// A plain copy of [`StageCounters`].
pub type StageSnapshot = Snapshot<DropReason>;

impl<R: Reason> Default for Counters<R> {
    fn default() -> Self {
        Counters {
            received: AtomicU64::new(0),
            received_bytes: AtomicU64::new(0),
            passed: AtomicU64::new(0),
            passed_bytes: AtomicU64::new(0),
            drops: Default::default(),
            _r: PhantomData,
        }
    }
}

impl<R: Reason> Default for Snapshot<R> {
    fn default() -> Self {
        Snapshot {
            received: 0,
            received_bytes: 0,
            passed: 0,
            passed_bytes: 0,
            drops: [0; MAX_REASONS],
            _r: PhantomData,
        }
    }
}

impl<R: Reason> Counters<R> {
    #[inline(always)]
    pub fn add_received(&self, pkts: u64, bytes: u64) {
        bump(&self.received, pkts);
        bump(&self.received_bytes, bytes);
    }
    #[inline(always)]
    pub fn add_passed(&self, pkts: u64, bytes: u64) {
        bump(&self.passed, pkts);
        bump(&self.passed_bytes, bytes);
    }
    #[inline(always)]
    pub fn add_drop(&self, reason: R, pkts: u64) {
        bump(&self.drops[reason.index()], pkts);
    }
    pub fn snapshot(&self) -> Snapshot<R> {
        let mut s = Snapshot {
            received: self.received.load(Relaxed),
            received_bytes: self.received_bytes.load(Relaxed),
            passed: self.passed.load(Relaxed),
            passed_bytes: self.passed_bytes.load(Relaxed),
            ..Snapshot::default()
        };
        for (d, c) in s.drops.iter_mut().zip(self.drops.iter()) {
            *d = c.load(Relaxed);
        }
        s
    }
    /// Make these counters read as `s` (a single-threaded stage that keeps
    /// its own [`Snapshot`] publishes it with a few relaxed stores).
    pub fn publish(&self, s: &Snapshot<R>) {
        self.received.store(s.received, Relaxed);
        self.received_bytes.store(s.received_bytes, Relaxed);
        self.passed.store(s.passed, Relaxed);
        self.passed_bytes.store(s.passed_bytes, Relaxed);
        for r in R::ALL {
            self.drops[r.index()].store(s.drops[r.index()], Relaxed);
        }
    }
}

impl<R: Reason> Snapshot<R> {
    pub fn dropped(&self) -> u64 {
        self.drops.iter().sum()
    }
    /// received = passed + drops.
    pub fn balanced(&self) -> bool {
        self.received == self.passed + self.dropped()
    }
    pub fn drop_of(&self, r: R) -> u64 {
        self.drops[r.index()]
    }
    /// Count one more drop for `r` (a stage keeping its own counts).
    #[inline(always)]
    pub fn count_drop(&mut self, r: R, pkts: u64) {
        self.drops[r.index()] += pkts;
    }
    /// Non-zero drops as (name, count).
    pub fn drops_nonzero(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        R::ALL
            .iter()
            .map(|r| (r.name(), self.drops[r.index()]))
            .filter(|(_, n)| *n > 0)
    }
    /// Difference self - earlier (for per-interval rates).
    pub fn delta(&self, earlier: &Snapshot<R>) -> Snapshot<R> {
        let mut d = Snapshot {
            received: self.received.wrapping_sub(earlier.received),
            received_bytes: self.received_bytes.wrapping_sub(earlier.received_bytes),
            passed: self.passed.wrapping_sub(earlier.passed),
            passed_bytes: self.passed_bytes.wrapping_sub(earlier.passed_bytes),
            ..Snapshot::default()
        };
        for i in 0..MAX_REASONS {
            d.drops[i] = self.drops[i].wrapping_sub(earlier.drops[i]);
        }
        d
    }
}

/// Counters a port's kernel side keeps (read with a syscall, once a second at most).
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct KernelStats {
    /// (name, value) pairs, e.g. ("rx_ring_full", 3) for AF_XDP or ("tp_drops", 5) for TPACKET.
    pub counters: Vec<(&'static str, u64)>,
}

impl KernelStats {
    pub fn get(&self, name: &str) -> Option<u64> {
        self.counters
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| *v)
    }
    /// Sum of all counters whose name says they are drops.
    pub fn drops(&self) -> u64 {
        self.counters
            .iter()
            .filter(|(n, _)| n.contains("drop") || n.contains("full") || n.contains("invalid"))
            .map(|(_, v)| *v)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drop_reasons_fit() {
        assert!(reasons_fit::<DropReason>());
    }

    #[test]
    fn balance_and_delta() {
        let c = StageCounters::default();
        c.add_received(10, 640);
        c.add_passed(7, 448);
        c.add_drop(DropReason::RingFull, 3);
        let s = c.snapshot();
        assert!(s.balanced());
        assert_eq!(s.drop_of(DropReason::RingFull), 3);
        c.add_received(1, 64);
        let s2 = c.snapshot();
        assert!(!s2.balanced());
        let d = s2.delta(&s);
        assert_eq!(d.received, 1);
        assert_eq!(d.received_bytes, 64);
        let nz: Vec<_> = s.drops_nonzero().collect();
        assert_eq!(nz, vec![("ring_full", 3)]);
    }
}
