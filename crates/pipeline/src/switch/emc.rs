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
//! - Bypass: with far more flows than slots nearly every probe misses, and a
//!   miss costs more than no cache at all (two slot reads that miss the CPU
//!   caches, then the classifier anyway: at 1 M random flows the lookup
//!   stage took 110 cycles/packet with the cache and 80 without). So the
//!   cache watches its own hit rate over windows of [`WINDOW`] probes;
//!   below [`BYPASS_BELOW_PCT`] % it goes to the classifier directly and
//!   probes (and inserts) only one chunk of packets in [`SAMPLE_EVERY`],
//!   enough to see the hit rate come back when the traffic changes (a
//!   window of samples is 8192 chunks, ~35 ms at 15 Mpps). At one chunk in
//!   16 the samples still cost ~6 cycles/packet at 1 M flows; at 1 in 64,
//!   ~1.5. The lookups that skipped it are counted (`bypassed`).
//!
//! Per core, `&mut self`: no atomics, no lock, no allocation on lookup.
//!
//! The slots, the policy and the bypass are [`Cache`], generic over what a
//! slot remembers: [`Emc`] is the single-table cache (a rule id, checked
//! against the classifier's generation), and a multi-table pipeline keeps
//! the lookups of its whole walk per packet in one (see [`super::xlate`]).

use super::classifier::{Classifier, LookupStats, RuleId};
use super::key::{Key, PKT_WORDS};

/// Default number of slots (a power of two), as OVS (8192).
pub const DEFAULT_SLOTS: usize = 8192;
/// Default inverse insertion probability when busy.
pub const DEFAULT_INV_PROB: u32 = 100;
/// Probes per hit-rate window (see Bypass in the module doc).
pub const WINDOW: u32 = 8192;
/// Below this hit rate (percent) over a window the cache is bypassed.
pub const BYPASS_BELOW_PCT: u32 = 50;
/// While bypassed, one chunk (up to 64 packets) in this many is probed.
pub const SAMPLE_EVERY: u32 = 64;

/// One slot: the packet words of a key, the stamp it was valid at, and
/// what it decided (one cache line for the key; a probe reads the stamp
/// and value after it).
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Slot<V> {
    key: [u64; PKT_WORDS],
    /// Stamp + 1 (0 = never used).
    gen: u64,
    val: V,
}

/// Cache counters (per core).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct EmcStats {
    pub hits: u64,
    pub misses: u64,
    pub inserts: u64,
    /// Misses not inserted because both slots were busy and the coin said no.
    pub skipped_inserts: u64,
    /// Lookups that went to the classifier without a probe (bypass).
    pub bypassed: u64,
}

impl core::ops::Add for EmcStats {
    type Output = EmcStats;
    fn add(self, o: EmcStats) -> EmcStats {
        EmcStats {
            hits: self.hits + o.hits,
            misses: self.misses + o.misses,
            inserts: self.inserts + o.inserts,
            skipped_inserts: self.skipped_inserts + o.skipped_inserts,
            bypassed: self.bypassed + o.bypassed,
        }
    }
}

/// The hit-rate bypass of a cache (module doc): watch the hit rate over
/// windows of [`WINDOW`] probes; below [`BYPASS_BELOW_PCT`] % probe only
/// one chunk in [`SAMPLE_EVERY`]. The megaflow cache uses it too.
#[derive(Debug, Clone)]
pub struct Bypass {
    auto: bool,
    on: bool,
    win_probes: u32,
    win_hits: u32,
    chunks: u32,
}

impl Default for Bypass {
    fn default() -> Bypass {
        Bypass {
            auto: true,
            on: false,
            win_probes: 0,
            win_hits: 0,
            chunks: 0,
        }
    }
}

impl Bypass {
    /// Turn the bypass on (the default) or off.
    pub fn set_auto(&mut self, on: bool) {
        self.auto = on;
        self.on &= on;
    }

    /// Whether lookups currently bypass the cache (but for samples).
    pub fn active(&self) -> bool {
        self.on
    }

    /// Whether this chunk is probed; counts the chunk while bypassed.
    #[inline]
    pub fn probe_this_chunk(&mut self) -> bool {
        if !self.on {
            return true;
        }
        self.chunks = self.chunks.wrapping_add(1);
        self.chunks.is_multiple_of(SAMPLE_EVERY)
    }

    /// Account a probed chunk; at the end of a window decide the bypass.
    #[inline]
    pub fn window(&mut self, probes: u32, hits: u32) {
        self.win_probes += probes;
        self.win_hits += hits;
        if self.win_probes >= WINDOW {
            self.on = self.auto
                && (self.win_hits as u64) * 100
                    < (self.win_probes as u64) * BYPASS_BELOW_PCT as u64;
            self.win_probes = 0;
            self.win_hits = 0;
        }
    }
}

/// The slots, insertion policy and bypass of an exact-match cache whose
/// slots remember a `V` (module doc). Keys are the packet words of a
/// [`Key`]; a slot is valid for the stamp (a generation) it was stored at.
pub struct Cache<V: Copy> {
    slots: Box<[Slot<V>]>,
    mask: usize,
    inv_prob: u32,
    rng: u32,
    bypass: Bypass,
    pub stats: EmcStats,
}

impl<V: Copy> Cache<V> {
    /// A cache of `slots` entries (rounded up to a power of two, at least
    /// 2), each starting as `empty`; `inv_prob` 0 disables the cache, 1
    /// inserts every miss.
    pub fn new(slots: usize, inv_prob: u32, empty: V) -> Cache<V> {
        let n = slots.max(2).next_power_of_two();
        Cache {
            slots: vec![
                Slot {
                    key: [0; PKT_WORDS],
                    gen: 0,
                    val: empty,
                };
                n
            ]
            .into_boxed_slice(),
            mask: n - 1,
            inv_prob,
            rng: 0x9e37_79b9,
            bypass: Bypass::default(),
            stats: EmcStats::default(),
        }
    }

    pub fn enabled(&self) -> bool {
        self.inv_prob != 0
    }

    /// Turn the hit-rate bypass (module doc) on (the default) or off.
    pub fn set_auto_bypass(&mut self, on: bool) {
        self.bypass.set_auto(on);
    }

    /// Whether lookups currently bypass the cache (but for samples).
    pub fn bypassed(&self) -> bool {
        self.bypass.active()
    }

    /// Whether this chunk is probed; counts the chunk while bypassed.
    #[inline]
    pub fn probe_this_chunk(&mut self) -> bool {
        self.bypass.probe_this_chunk()
    }

    /// Account a probed chunk; at the end of a window decide the bypass.
    #[inline]
    pub fn window(&mut self, probes: u32, hits: u32) {
        self.bypass.window(probes, hits)
    }

    #[inline(always)]
    fn idx(&self, h: u64) -> (usize, usize) {
        (h as usize & self.mask, (h >> 32) as usize & self.mask)
    }

    /// Probe for `k` (hash `h`, [`Key::hash_pkt`]) stored at stamp `gen`.
    #[inline]
    pub fn probe(&self, k: &Key, h: u64, gen: u64) -> Option<V> {
        let g = gen.wrapping_add(1);
        let (a, b) = self.idx(h);
        for i in [a, b] {
            let s = &self.slots[i];
            if s.gen == g && k.pkt_eq(&s.key) {
                return Some(s.val);
            }
        }
        None
    }

    /// Probe for `k` at any stamp: the slot that holds it, whose stamp
    /// ([`Self::stamp`]) the caller may renew once it has checked the value
    /// still holds, and whose value it reads in place ([`Self::val`]).
    #[inline]
    pub fn probe_any(&self, k: &Key, h: u64) -> Option<usize> {
        let (a, b) = self.idx(h);
        if self.slots[a].gen != 0 && k.pkt_eq(&self.slots[a].key) {
            Some(a)
        } else if self.slots[b].gen != 0 && k.pkt_eq(&self.slots[b].key) {
            Some(b)
        } else {
            None
        }
    }

    /// The stamp + 1 of slot `i` (0 = never used).
    #[inline(always)]
    pub fn stamp(&mut self, i: usize) -> &mut u64 {
        &mut self.slots[i].gen
    }

    /// The value of slot `i`.
    #[inline(always)]
    pub fn val(&self, i: usize) -> &V {
        &self.slots[i].val
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
    pub fn insert(&mut self, k: &Key, h: u64, gen: u64, val: V) {
        if self.inv_prob == 0 {
            return;
        }
        let g = gen.wrapping_add(1);
        let (a, b) = self.idx(h);
        let target = if self.slots[a].gen != g || k.pkt_eq(&self.slots[a].key) {
            a
        } else if self.slots[b].gen != g || k.pkt_eq(&self.slots[b].key) {
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
            key: k.pkt(),
            gen: g,
            val,
        };
    }
}

/// The single-table exact-match cache: a rule id (or "no rule") per key,
/// valid while the classifier's generation is the one it was stored at.
pub struct Emc {
    cache: Cache<Option<RuleId>>,
    /// Classifier counters for the packets that missed the cache.
    pub cls_stats: LookupStats,
}

impl core::ops::Deref for Emc {
    type Target = Cache<Option<RuleId>>;
    fn deref(&self) -> &Cache<Option<RuleId>> {
        &self.cache
    }
}

impl core::ops::DerefMut for Emc {
    fn deref_mut(&mut self) -> &mut Cache<Option<RuleId>> {
        &mut self.cache
    }
}

impl Emc {
    /// A cache of `slots` entries (rounded up to a power of two, at least
    /// 2); `inv_prob` 0 disables the cache, 1 inserts every miss.
    pub fn new(slots: usize, inv_prob: u32) -> Emc {
        Emc {
            cache: Cache::new(slots, inv_prob, None),
            cls_stats: LookupStats::default(),
        }
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
            if !self.enabled() || !self.probe_this_chunk() {
                if self.enabled() {
                    self.cache.stats.bypassed += len as u64;
                }
                let all = if len == 64 {
                    u64::MAX
                } else {
                    (1u64 << len) - 1
                };
                cls.lookup_chunk(ks, all, os, &mut self.cls_stats);
                base += len;
                continue;
            }
            let mut miss = 0u64;
            let mut hits = 0u32;
            for i in 0..len {
                let h = ks[i].hash_pkt();
                hashes[i] = h;
                match self.cache.probe(&ks[i], h, generation) {
                    Some(r) => {
                        os[i] = r;
                        hits += 1;
                    }
                    None => {
                        miss |= 1 << i;
                        self.cache.stats.misses += 1;
                    }
                }
            }
            self.cache.stats.hits += hits as u64;
            self.cache.window(len as u32, hits);
            if miss != 0 {
                cls.lookup_chunk(ks, miss, os, &mut self.cls_stats);
                let mut it = miss;
                while it != 0 {
                    let i = it.trailing_zeros() as usize;
                    it &= it - 1;
                    self.cache.insert(&ks[i], hashes[i], generation, os[i]);
                }
            }
            base += len;
        }
    }
}
