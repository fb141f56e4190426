//! A bounded per-worker connection table for the capture forwarder.
//!
//! Keyed by the *canonical* flow key ([`FlowKey::canonical`]) and indexed by
//! the symmetric hash ([`FlowKey::symmetric_hash`]), so both directions of a
//! connection update one entry. The table is set-associative: `buckets` of
//! [`WAYS`] entries each; a key can live only in the bucket its hash selects.
//! Each bucket keeps a small array of 32-bit hash tags first, so a lookup
//! compares tags in one or two cache lines before touching any key.
//!
//! * Fixed capacity, allocated once: no allocation per packet.
//! * Aging: an entry idle for longer than `idle_timeout_ns` is dead. Aging is
//!   lazy: a lookup that finds its key idle restarts the entry (a new
//!   connection reusing the 5-tuple: counters and the shunt flag reset), and
//!   an insert reuses idle entries before evicting live ones. [`FlowTable::sweep`]
//!   clears idle entries in a few buckets at a time, for stats.
//! * When the bucket is full of live entries, the least recently seen one is
//!   evicted and counted (`evictions`). An evicted connection that comes back
//!   starts from zero bytes: under TED it gets a new head, which is the safe
//!   direction to err (keep too much rather than cut a head).

use linerate_wire::FlowKey;

/// Entries per bucket.
pub const WAYS: usize = 8;

/// One connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowEntry {
    /// Canonical key (both directions map to it).
    pub key: FlowKey,
    /// Packets seen in both directions, including dropped ones.
    pub packets: u64,
    /// Bytes (frame lengths) seen in both directions, including dropped ones.
    pub bytes: u64,
    pub first_seen_ns: u64,
    pub last_seen_ns: u64,
    /// Later packets of this connection are dropped (shunting).
    pub shunted: bool,
}

#[derive(Clone, Copy)]
struct Bucket {
    /// 0 = empty; else the high half of the hash with bit 0 forced to 1.
    tags: [u32; WAYS],
    entries: [FlowEntry; WAYS],
}

/// Table statistics (monotonic counters except `live`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct FlowTableStats {
    /// Entries created (new connections, including restarts after idling).
    pub inserts: u64,
    /// Live entries evicted because their bucket was full.
    pub evictions: u64,
    /// Entries found idle and reused or swept.
    pub expired: u64,
    /// Entries currently occupied (idle ones not yet reused count until swept).
    pub occupied: u64,
    /// Connections marked shunted (requests applied, repeats included).
    pub shunts: u64,
}

pub struct FlowTable {
    buckets: Box<[Bucket]>,
    mask: usize,
    idle_timeout_ns: u64,
    stats: FlowTableStats,
    sweep_pos: usize,
}

#[inline(always)]
fn tag_of(hash: u64) -> u32 {
    ((hash >> 32) as u32) | 1
}

impl FlowTable {
    /// A table of at least `capacity` entries (rounded up to a power of two
    /// number of buckets of [`WAYS`]), with entries dying after
    /// `idle_timeout_ns` without packets.
    pub fn new(capacity: usize, idle_timeout_ns: u64) -> FlowTable {
        let nb = capacity.div_ceil(WAYS).max(1).next_power_of_two();
        let empty = Bucket {
            tags: [0; WAYS],
            entries: [FlowEntry::default(); WAYS],
        };
        FlowTable {
            buckets: vec![empty; nb].into_boxed_slice(),
            mask: nb - 1,
            idle_timeout_ns,
            stats: FlowTableStats::default(),
            sweep_pos: 0,
        }
    }

    pub fn capacity(&self) -> usize {
        self.buckets.len() * WAYS
    }

    pub fn stats(&self) -> FlowTableStats {
        self.stats
    }

    pub fn idle_timeout_ns(&self) -> u64 {
        self.idle_timeout_ns
    }

    #[inline(always)]
    fn idle(&self, e: &FlowEntry, now_ns: u64) -> bool {
        now_ns.saturating_sub(e.last_seen_ns) > self.idle_timeout_ns
    }

    /// The live entry of `key` (either direction), if any. Read only.
    pub fn get(&self, key: &FlowKey, now_ns: u64) -> Option<&FlowEntry> {
        let hash = key.symmetric_hash();
        let ck = key.canonical();
        let b = &self.buckets[(hash as usize) & self.mask];
        let tag = tag_of(hash);
        (0..WAYS)
            .find(|&w| b.tags[w] == tag && b.entries[w].key == ck)
            .map(|w| &b.entries[w])
            .filter(|e| !self.idle(e, now_ns))
    }

    /// Find or create the entry of `key` (`hash` must be
    /// `key.symmetric_hash()`), restarting it if it was idle. Does not count
    /// a packet: see [`FlowTable::account`].
    #[inline]
    pub fn entry(&mut self, key: &FlowKey, hash: u64, now_ns: u64) -> &mut FlowEntry {
        let bi = (hash as usize) & self.mask;
        let tag = tag_of(hash);
        let ck = key.canonical();
        let timeout = self.idle_timeout_ns;
        let b = &mut self.buckets[bi];
        let mut hit = None;
        let mut empty = None;
        let mut oldest = 0usize;
        for w in 0..WAYS {
            let t = b.tags[w];
            if t == tag && b.entries[w].key == ck {
                hit = Some(w);
                break;
            }
            if t == 0 {
                if empty.is_none() {
                    empty = Some(w);
                }
            } else if b.entries[w].last_seen_ns < b.entries[oldest].last_seen_ns
                || b.tags[oldest] == 0
            {
                oldest = w;
            }
        }
        let fresh = FlowEntry {
            key: ck,
            packets: 0,
            bytes: 0,
            first_seen_ns: now_ns,
            last_seen_ns: now_ns,
            shunted: false,
        };
        let w = match hit {
            Some(w) => {
                if now_ns.saturating_sub(b.entries[w].last_seen_ns) > timeout {
                    self.stats.expired += 1;
                    self.stats.inserts += 1;
                    b.entries[w] = fresh;
                }
                return &mut self.buckets[bi].entries[w];
            }
            None => match empty {
                Some(w) => {
                    self.stats.occupied += 1;
                    w
                }
                None => {
                    // Full bucket: the least recently seen goes. If it is
                    // idle that is aging, otherwise an eviction.
                    if now_ns.saturating_sub(b.entries[oldest].last_seen_ns) > timeout {
                        self.stats.expired += 1;
                    } else {
                        self.stats.evictions += 1;
                    }
                    oldest
                }
            },
        };
        self.stats.inserts += 1;
        let b = &mut self.buckets[bi];
        b.tags[w] = tag;
        b.entries[w] = fresh;
        &mut b.entries[w]
    }

    /// Count one packet of `bytes` for `key` (`hash` = `key.symmetric_hash()`)
    /// and return its entry, this packet included.
    #[inline]
    pub fn account(&mut self, key: &FlowKey, hash: u64, bytes: u32, now_ns: u64) -> &mut FlowEntry {
        let e = self.entry(key, hash, now_ns);
        e.packets += 1;
        e.bytes += bytes as u64;
        e.last_seen_ns = now_ns;
        e
    }

    /// Mark `key`'s connection shunted (creating the entry if needed).
    pub fn shunt(&mut self, key: &FlowKey, now_ns: u64) {
        let h = key.symmetric_hash();
        self.stats.shunts += 1;
        let e = self.entry(key, h, now_ns);
        e.shunted = true;
        // A shunt request counts as activity, so the entry does not age out
        // before the connection's next packet.
        e.last_seen_ns = e.last_seen_ns.max(now_ns);
    }

    /// Clear idle entries in the next `buckets` buckets (round robin).
    /// Returns how many were cleared.
    pub fn sweep(&mut self, now_ns: u64, buckets: usize) -> usize {
        let mut n = 0;
        for _ in 0..buckets.min(self.buckets.len()) {
            let i = self.sweep_pos & self.mask;
            self.sweep_pos = self.sweep_pos.wrapping_add(1);
            for w in 0..WAYS {
                let b = &self.buckets[i];
                if b.tags[w] != 0 && self.idle(&b.entries[w], now_ns) {
                    self.buckets[i].tags[w] = 0;
                    n += 1;
                }
            }
        }
        self.stats.expired += n as u64;
        self.stats.occupied -= n as u64;
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(i: u32) -> FlowKey {
        let b = i.to_be_bytes();
        FlowKey::v4(
            [10, b[1], b[2], b[3]],
            [192, 168, 0, 1],
            1000 + (i % 50000) as u16,
            80,
            6,
        )
    }

    #[test]
    fn both_directions_one_entry() {
        let mut t = FlowTable::new(64, 1_000_000);
        let a = k(7);
        let r = a.reversed();
        t.account(&a, a.symmetric_hash(), 100, 10);
        let e = t.account(&r, r.symmetric_hash(), 60, 20);
        assert_eq!((e.packets, e.bytes), (2, 160));
        assert_eq!(e.first_seen_ns, 10);
        assert_eq!(e.last_seen_ns, 20);
        assert_eq!(t.stats().inserts, 1);
        assert_eq!(t.stats().occupied, 1);
        assert_eq!(t.get(&r, 20).unwrap().bytes, 160);
        assert_eq!(t.get(&a, 20).unwrap().key, a.canonical());
    }

    #[test]
    fn aging_restarts_idle_entry() {
        let mut t = FlowTable::new(64, 1000);
        let a = k(1);
        let h = a.symmetric_hash();
        t.account(&a, h, 500, 0);
        t.shunt(&a, 0);
        t.account(&a, h, 500, 1000); // exactly at the timeout: still alive
        assert_eq!(t.get(&a, 1000).unwrap().bytes, 1000);
        assert!(t.get(&a, 1000).unwrap().shunted);
        assert!(t.get(&a, 2001).is_none(), "idle past the timeout");
        let e = t.account(&a, h, 40, 2001);
        assert_eq!((e.packets, e.bytes, e.shunted), (1, 40, false));
        assert_eq!(t.stats().expired, 1);
        assert_eq!(t.stats().inserts, 2);
        // sweep clears idle entries
        assert_eq!(t.sweep(10_000, 1 << 20), 1);
        assert_eq!(t.stats().occupied, 0);
        assert!(t.get(&a, 10_000).is_none());
    }

    #[test]
    fn eviction_of_oldest_when_bucket_full() {
        // One bucket only: capacity WAYS.
        let mut t = FlowTable::new(WAYS, u64::MAX);
        assert_eq!(t.capacity(), WAYS);
        for i in 0..WAYS as u32 {
            let key = k(i);
            t.account(&key, key.symmetric_hash(), 1, 100 + i as u64);
        }
        // Touch flow 0 so flow 1 becomes the oldest.
        let k0 = k(0);
        t.account(&k0, k0.symmetric_hash(), 1, 200);
        assert_eq!(t.stats().evictions, 0);
        let n = k(99);
        t.account(&n, n.symmetric_hash(), 1, 300);
        assert_eq!(t.stats().evictions, 1);
        assert!(t.get(&k(1), 300).is_none(), "oldest evicted");
        assert!(t.get(&k0, 300).is_some());
        assert!(t.get(&n, 300).is_some());
        for i in 2..WAYS as u32 {
            assert!(t.get(&k(i), 300).is_some());
        }
        assert_eq!(t.stats().occupied, WAYS as u64);
    }

    #[test]
    fn many_flows_bounded() {
        let mut t = FlowTable::new(1024, u64::MAX);
        for i in 0..100_000u32 {
            let key = k(i);
            t.account(&key, key.symmetric_hash(), 64, i as u64);
        }
        let s = t.stats();
        assert_eq!(s.occupied, 1024);
        assert_eq!(s.inserts, 100_000);
        assert_eq!(s.evictions, 100_000 - 1024);
        // The most recent flows are all present (LRU per bucket).
        let present = (99_000..100_000u32)
            .filter(|&i| t.get(&k(i), 100_000).is_some())
            .count();
        assert!(present > 700, "{present}");
    }
}
