//! Per-port and per-stage counters: packets, bytes, drops by reason.
//!
//! Each counter set has one writer (the thread running the stage) and any
//! number of readers (the once-a-second reporter). Writers add per batch
//! with relaxed atomics: no lock, no fence on the data path.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Why a packet was dropped. Every drop in linerate has exactly one reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
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
    /// Tail early dropping (capture).
    Ted,
    /// Shunted flow (capture).
    Shunt,
}

impl DropReason {
    pub const ALL: [DropReason; 8] = [
        DropReason::RingFull,
        DropReason::TxError,
        DropReason::Malformed,
        DropReason::TooBig,
        DropReason::Filter,
        DropReason::NoRoute,
        DropReason::Ted,
        DropReason::Shunt,
    ];
    pub const COUNT: usize = Self::ALL.len();

    pub fn name(self) -> &'static str {
        match self {
            DropReason::RingFull => "ring_full",
            DropReason::TxError => "tx_error",
            DropReason::Malformed => "malformed",
            DropReason::TooBig => "too_big",
            DropReason::Filter => "filter",
            DropReason::NoRoute => "no_route",
            DropReason::Ted => "ted",
            DropReason::Shunt => "shunt",
        }
    }
}

/// Counters of one stage: received = passed + sum(drops) at every quiescent point.
#[derive(Default, Debug)]
pub struct StageCounters {
    pub received: AtomicU64,
    pub received_bytes: AtomicU64,
    pub passed: AtomicU64,
    pub passed_bytes: AtomicU64,
    pub drops: [AtomicU64; DropReason::COUNT],
}

/// A plain copy of [`StageCounters`] for reporting and arithmetic.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct StageSnapshot {
    pub received: u64,
    pub received_bytes: u64,
    pub passed: u64,
    pub passed_bytes: u64,
    pub drops: [u64; DropReason::COUNT],
}

impl StageCounters {
    #[inline(always)]
    fn bump(c: &AtomicU64, n: u64) {
        // Single writer: load + store is enough and avoids a locked RMW.
        c.store(c.load(Relaxed).wrapping_add(n), Relaxed);
    }
    #[inline(always)]
    pub fn add_received(&self, pkts: u64, bytes: u64) {
        Self::bump(&self.received, pkts);
        Self::bump(&self.received_bytes, bytes);
    }
    #[inline(always)]
    pub fn add_passed(&self, pkts: u64, bytes: u64) {
        Self::bump(&self.passed, pkts);
        Self::bump(&self.passed_bytes, bytes);
    }
    #[inline(always)]
    pub fn add_drop(&self, reason: DropReason, pkts: u64) {
        Self::bump(&self.drops[reason as usize], pkts);
    }
    pub fn snapshot(&self) -> StageSnapshot {
        let mut s = StageSnapshot {
            received: self.received.load(Relaxed),
            received_bytes: self.received_bytes.load(Relaxed),
            passed: self.passed.load(Relaxed),
            passed_bytes: self.passed_bytes.load(Relaxed),
            drops: [0; DropReason::COUNT],
        };
        for (d, c) in s.drops.iter_mut().zip(self.drops.iter()) {
            *d = c.load(Relaxed);
        }
        s
    }
}

impl StageSnapshot {
    pub fn dropped(&self) -> u64 {
        self.drops.iter().sum()
    }
    /// received = passed + drops.
    pub fn balanced(&self) -> bool {
        self.received == self.passed + self.dropped()
    }
    pub fn drop_of(&self, r: DropReason) -> u64 {
        self.drops[r as usize]
    }
    /// Non-zero drops as (name, count).
    pub fn drops_nonzero(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        DropReason::ALL
            .iter()
            .map(|r| (r.name(), self.drops[*r as usize]))
            .filter(|(_, n)| *n > 0)
    }
    /// Difference self - earlier (for per-interval rates).
    pub fn delta(&self, earlier: &StageSnapshot) -> StageSnapshot {
        let mut d = StageSnapshot {
            received: self.received.wrapping_sub(earlier.received),
            received_bytes: self.received_bytes.wrapping_sub(earlier.received_bytes),
            passed: self.passed.wrapping_sub(earlier.passed),
            passed_bytes: self.passed_bytes.wrapping_sub(earlier.passed_bytes),
            drops: [0; DropReason::COUNT],
        };
        for i in 0..DropReason::COUNT {
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
