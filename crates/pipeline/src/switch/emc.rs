//! The exact-match cache (EMC): a per-core table of recently seen packet
//! keys and the rule they resolved to, probed before the classifier (as
//! Open vSwitch's userspace datapath does).
//!
//! - Each key has two candidate slots (from the low and high halves of
//!   its 64-bit hash); a hit needs the full key to be equal and the entry's
//!   generation to equal the classifier's.
//! - Invalidation: every rule change bumps [`Classifier::generation`]; all
//!   entries of an older generation are misses at once, so a rule change is
//!   visible to the very next lookup (correctness first: no stale decision).
//! - Insertion policy: a miss is inserted always when one of its two slots is
//!   free or stale (older generation) or already holds this key; when both
//!   slots hold live entries the cache is "busy" and the new key replaces
//!   one of them only with probability 1/`inv_prob` (default 100, OVS's
//!   `emc-insert-inv-prob`). With many more flows than slots, entries thus
//!   live long enough to be hit instead of every miss evicting a live entry
//!   (thrashing). The random numbers come from a per-cache xorshift.
//! - "No rule matched" is cached too (a table miss is a decision).
//!
//! Per core, `&mut self`: no atomics, no lock, no allocation on lookup.

use super::classifier::{Classifier, LookupStats, RuleId};
use super::key::Key;

/// Default number of slots (a power of two), as OVS (8192).
pub const DEFAULT_SLOTS: usize = 8192;
/// Default inverse insertion probability when busy.
pub const DEFAULT_INV_PROB: u32 = 100;

const NO_RULE: u32 = u32::MAX;

#[derive(Clone, Copy)]
struct Slot {
    key: Key,
    /// Generation + 1 (0 = never used).
    gen: u64,
    rule: u32,
}

/// Cache counters (per core).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct EmcStats {
    pub hits: u64,
    pub misses: u64,
    pub inserts: u64,
    /// Misses not inserted because both slots were busy and the coin said no.
    pub skipped_inserts: u64,
}

/// The exact-match cache.
pub struct Emc {
    slots: Box<[Slot]>,
    mask: usize,
    inv_prob: u32,
    rng: u32,
    pub stats: EmcStats,
    /// Classifier counters for the packets that missed the cache.
    pub cls_stats: LookupStats,
}

impl Emc {
    /// A cache of `slots` entries (rounded up to a power of two, at least
    /// 2); `inv_prob` 0 disables the cache, 1 inserts every miss.
    pub fn new(slots: usize, inv_prob: u32) -> Emc {
        let n = slots.max(2).next_power_of_two();
        Emc {
            slots: vec![
                Slot {
                    key: Key::ZERO,
                    gen: 0,
                    rule: NO_RULE,
                };
                n
            ]
            .into_boxed_slice(),
            mask: n - 1,
            inv_prob,
            rng: 0x9e37_79b9,
            stats: EmcStats::default(),
            cls_stats: LookupStats::default(),
        }
    }

    pub fn enabled(&self) -> bool {
        self.inv_prob != 0
    }

    #[inline(always)]
    fn idx(&self, h: u64) -> (usize, usize) {
        (h as usize & self.mask, (h >> 32) as usize & self.mask)
    }

    /// Probe for `k` (hash `h`). `Some(decision)` on a hit.
    #[inline]
    pub fn probe(&self, k: &Key, h: u64, generation: u64) -> Option<Option<RuleId>> {
        let g = generation.wrapping_add(1);
        let (a, b) = self.idx(h);
        for i in [a, b] {
            let s = &self.slots[i];
            if s.gen == g && s.key == *k {
                return Some((s.rule != NO_RULE).then_some(s.rule));
            }
        }
        None
    }

    #[inline]
    fn next_rand(&mut self) -> u32 {
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.rng = x;
        x
    }

    /// Insert after a miss, following the policy in the module doc.
    #[inline]
    pub fn insert(&mut self, k: &Key, h: u64, generation: u64, rule: Option<RuleId>) {
        if self.inv_prob == 0 {
            return;
        }
        let g = generation.wrapping_add(1);
        let (a, b) = self.idx(h);
        let target = if self.slots[a].gen != g || self.slots[a].key == *k {
            a
        } else if self.slots[b].gen != g || self.slots[b].key == *k {
            b
        } else {
            let r = self.next_rand();
            if self.inv_prob > 1 && !r.is_multiple_of(self.inv_prob) {
                self.stats.skipped_inserts += 1;
                return;
            }
            if r & (1 << 31) != 0 {
                a
            } else {
                b
            }
        };
        self.stats.inserts += 1;
        self.slots[target] = Slot {
            key: *k,
            gen: g,
            rule: rule.unwrap_or(NO_RULE),
        };
    }

    /// Classify a batch through the cache, then the classifier for misses.
    /// `out` must be at least as long as `keys`.
    pub fn lookup_batch(&mut self, cls: &Classifier, keys: &[Key], out: &mut [Option<RuleId>]) {
        let n = keys.len().min(out.len());
        let generation = cls.generation();
        let mut hashes = [0u64; 64];
        let mut base = 0;
        while base < n {
            let len = (n - base).min(64);
            let ks = &keys[base..base + len];
            let os = &mut out[base..base + len];
            let mut miss = 0u64;
            for i in 0..len {
                if !self.enabled() {
                    miss |= 1 << i;
                    continue;
                }
                let h = ks[i].hash64();
                hashes[i] = h;
                match self.probe(&ks[i], h, generation) {
                    Some(d) => {
                        os[i] = d;
                        self.stats.hits += 1;
                    }
                    None => {
                        miss |= 1 << i;
                        self.stats.misses += 1;
                    }
                }
            }
            if miss != 0 {
                cls.lookup_chunk(ks, miss, os, &mut self.cls_stats);
                if self.enabled() {
                    let mut it = miss;
                    while it != 0 {
                        let i = it.trailing_zeros() as usize;
                        it &= it - 1;
                        self.insert(&ks[i], hashes[i], generation, os[i]);
                    }
                }
            }
            base += len;
        }
    }
}
