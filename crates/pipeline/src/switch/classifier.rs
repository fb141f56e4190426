//! Tuple-space search (Srinivasan et al.; Open vSwitch's classifier and
//! dpcls): one hash table per distinct mask ("subtable"), mapping the masked
//! key to the rules with that exact match, best first.
//!
//! A lookup probes subtables in rank order (by hit count, re-sorted by
//! [`Classifier::rerank`], which the datapath calls periodically, not per
//! packet, as OVS's dpcls does about once a second) and keeps the best rule
//! found so far per packet. A subtable whose best rule cannot beat a
//! packet's best so far is skipped for that packet, and the walk stops once
//! no packet can improve on its best (the remaining subtables' maximum is
//! kept as a suffix maximum over the rank order): OVS's priority-ordered
//! early exit, adapted to an order by hits.
//!
//! Rules are compared by *rank*: priority first, then insertion order
//! (earlier wins among equal priorities; OpenFlow 1.3 leaves that case
//! undefined). Ranks are unique, so the result never depends on the order
//! in which subtables are probed.
//!
//! Lookups are done per batch, subtable by subtable over up to 64 packets
//! at a time (a bitmap of packets still searching), and allocate nothing.
//! Every rule change bumps [`Classifier::generation`], which invalidates
//! the exact-match cache ([`super::emc`]).

use super::key::Key;
use super::reference::normalize;
use super::rule::Match;
use std::collections::{BTreeSet, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

/// Identifies a rule in a [`Classifier`] (a slot index, reused after removal).
pub type RuleId = u32;

/// Insertion sequence numbers use the low 48 bits of a rank.
const SEQ_BITS: u32 = 48;
const SEQ_MAX: u64 = (1 << SEQ_BITS) - 1;

/// Rank of a rule: higher wins. Priority, then earlier insertion.
/// Never 0 for a real rule (so 0 means "nothing found").
#[inline]
pub fn rank(priority: u16, seq: u64) -> u64 {
    ((priority as u64) << SEQ_BITS) | (SEQ_MAX - (seq & SEQ_MAX)).max(1)
}

/// A hasher for keys that already carry their hash ([`Key`]'s `Hash`
/// writes one `u64`).
#[derive(Default)]
pub struct PassHasher(u64);

impl Hasher for PassHasher {
    #[inline(always)]
    fn finish(&self) -> u64 {
        self.0
    }
    #[inline(always)]
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
    fn write(&mut self, bytes: &[u8]) {
        // Not used by Key; FNV-1a for anything else.
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x100_0000_01b3);
        }
    }
}

type Map<K, V> = HashMap<K, V, BuildHasherDefault<PassHasher>>;
type Bucket = smallvec::SmallVec<[(u64, RuleId); 1]>;

#[derive(Debug, Clone)]
struct Entry {
    m: Match,
    priority: u16,
    rank: u64,
}

#[derive(Debug)]
struct Subtable {
    mask: Key,
    /// Masked key -> (rank, rule) with that match, highest rank first
    /// (never empty; inline for the usual single rule, so neither an
    /// insert nor a copy of the table allocates per rule).
    map: Map<Key, Bucket>,
    ranks: BTreeSet<u64>,
    max_rank: u64,
    hits: AtomicU64,
}

impl Clone for Subtable {
    fn clone(&self) -> Subtable {
        Subtable {
            mask: self.mask,
            map: self.map.clone(),
            ranks: self.ranks.clone(),
            max_rank: self.max_rank,
            hits: AtomicU64::new(self.hits.load(Ordering::Relaxed)),
        }
    }
}

/// Lookup counters a datapath can add up (no atomics: per core).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct LookupStats {
    pub packets: u64,
    pub matched: u64,
    /// Subtable probes (hash lookups) over all packets.
    pub subtables_searched: u64,
}

/// The tuple-space-search classifier. `Clone` keeps rule ids, ranks and
/// the generation (the switch's control side edits a copy and publishes it).
#[derive(Debug, Default, Clone)]
pub struct Classifier {
    rules: Vec<Option<Entry>>,
    free: Vec<RuleId>,
    n_rules: usize,
    subtables: Vec<Subtable>,
    by_mask: Map<Key, usize>,
    /// Subtable indices in probe order.
    order: Vec<u32>,
    /// suffix_max[i] = max rank over subtables order[i..].
    suffix_max: Vec<u64>,
    next_seq: u64,
    generation: u64,
}

impl Classifier {
    pub fn new() -> Classifier {
        Classifier::default()
    }

    pub fn len(&self) -> usize {
        self.n_rules
    }

    pub fn is_empty(&self) -> bool {
        self.n_rules == 0
    }

    /// Number of subtables (distinct masks).
    pub fn subtables(&self) -> usize {
        self.subtables.len()
    }

    /// Bumped on every rule change.
    #[inline]
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Match and priority of a rule.
    pub fn get(&self, id: RuleId) -> Option<(&Match, u16)> {
        self.rules
            .get(id as usize)?
            .as_ref()
            .map(|e| (&e.m, e.priority))
    }

    /// Masks in probe order with their hit counts (for `cache-stats` and tests).
    pub fn subtable_ranking(&self) -> Vec<(Key, u64)> {
        self.order
            .iter()
            .map(|&i| {
                let s = &self.subtables[i as usize];
                (s.mask, s.hits.load(Ordering::Relaxed))
            })
            .collect()
    }

    /// Insert a rule. Returns `(id, true)` for a new rule, or the id of the
    /// existing rule with the same match and priority and `false` (the
    /// caller replaces its actions, as OpenFlow's add does; it keeps its
    /// place among equal priorities).
    pub fn insert(&mut self, m: &Match, priority: u16) -> (RuleId, bool) {
        let m = normalize(m);
        if let Some(id) = self.find_strict(&m, priority) {
            return (id, false);
        }
        let r = rank(priority, self.next_seq);
        self.next_seq += 1;
        let id = match self.free.pop() {
            Some(id) => id,
            None => {
                self.rules.push(None);
                (self.rules.len() - 1) as RuleId
            }
        };
        self.rules[id as usize] = Some(Entry {
            m,
            priority,
            rank: r,
        });
        self.n_rules += 1;
        let si = match self.by_mask.get(&m.mask) {
            Some(&i) => i,
            None => {
                self.subtables.push(Subtable {
                    mask: m.mask,
                    map: Map::default(),
                    ranks: BTreeSet::new(),
                    max_rank: 0,
                    hits: AtomicU64::new(0),
                });
                let i = self.subtables.len() - 1;
                self.by_mask.insert(m.mask, i);
                // New subtables go last until the next rerank.
                self.order.push(i as u32);
                i
            }
        };
        let st = &mut self.subtables[si];
        let b = st.map.entry(m.value).or_default();
        let pos = b.partition_point(|&(x, _)| x > r);
        b.insert(pos, (r, id));
        st.ranks.insert(r);
        if r > st.max_rank {
            st.max_rank = r;
        }
        self.generation += 1;
        self.rebuild_suffix();
        (id, true)
    }

    /// The rule with exactly this match and priority.
    pub fn find_strict(&self, m: &Match, priority: u16) -> Option<RuleId> {
        let m = normalize(m);
        let &si = self.by_mask.get(&m.mask)?;
        self.subtables[si]
            .map
            .get(&m.value)?
            .iter()
            .map(|&(_, id)| id)
            .find(|&id| matches!(&self.rules[id as usize], Some(e) if e.priority == priority))
    }

    /// Remove a rule by id; returns its match and priority.
    pub fn remove(&mut self, id: RuleId) -> Option<(Match, u16)> {
        let e = self.rules.get_mut(id as usize)?.take()?;
        self.free.push(id);
        self.n_rules -= 1;
        let si = self.by_mask[&e.m.mask];
        let st = &mut self.subtables[si];
        if let Some(b) = st.map.get_mut(&e.m.value) {
            b.retain(|e| e.1 != id);
            if b.is_empty() {
                st.map.remove(&e.m.value);
            }
        }
        st.ranks.remove(&e.rank);
        st.max_rank = st.ranks.last().copied().unwrap_or(0);
        if st.map.is_empty() {
            self.drop_subtable(si);
        }
        self.generation += 1;
        self.rebuild_suffix();
        Some((e.m, e.priority))
    }

    /// Remove the rule with exactly this match and priority (`del-flows --strict`).
    pub fn remove_strict(&mut self, m: &Match, priority: u16) -> Option<RuleId> {
        let id = self.find_strict(m, priority)?;
        self.remove(id);
        Some(id)
    }

    /// Every rule whose match is covered by `m` (its fields are a superset
    /// of `m`'s and agree with them), ids sorted.
    pub fn find_loose(&self, m: &Match) -> Vec<RuleId> {
        let m = normalize(m);
        let mut out = Vec::new();
        for st in &self.subtables {
            // A covered rule's mask contains m's mask.
            if (0..super::key::WORDS).any(|i| m.mask.w[i] & !st.mask.w[i] != 0) {
                continue;
            }
            for (v, b) in &st.map {
                let rm = Match {
                    value: *v,
                    mask: st.mask,
                };
                if m.covers(&rm) {
                    out.extend(b.iter().map(|&(_, id)| id));
                }
            }
        }
        out.sort_unstable();
        out
    }

    /// OVS `del-flows MATCH`: remove every rule covered by `m`; returns their ids.
    pub fn remove_loose(&mut self, m: &Match) -> Vec<RuleId> {
        let ids = self.find_loose(m);
        for &id in &ids {
            self.remove(id);
        }
        ids
    }

    fn drop_subtable(&mut self, si: usize) {
        let mask = self.subtables[si].mask;
        self.by_mask.remove(&mask);
        self.subtables.swap_remove(si);
        let moved = self.subtables.len();
        if si < moved {
            let m = self.subtables[si].mask;
            self.by_mask.insert(m, si);
        }
        self.order.retain(|&i| i as usize != si);
        for i in &mut self.order {
            if *i as usize == moved {
                *i = si as u32;
            }
        }
    }

    fn rebuild_suffix(&mut self) {
        self.suffix_max.clear();
        self.suffix_max.resize(self.order.len(), 0);
        let mut m = 0;
        for p in (0..self.order.len()).rev() {
            m = m.max(self.subtables[self.order[p] as usize].max_rank);
            self.suffix_max[p] = m;
        }
    }

    /// Take the subtable hit counts from `other` (a copy of this
    /// classifier the datapath has been counting in), matched by mask, so
    /// that [`Self::rerank`] on this copy follows the traffic.
    pub fn copy_hits_from(&mut self, other: &Classifier) {
        for st in &mut self.subtables {
            if let Some(&i) = other.by_mask.get(&st.mask) {
                let h = other.subtables[i].hits.load(Ordering::Relaxed);
                st.hits.store(h, Ordering::Relaxed);
            }
        }
    }

    /// Subtable indices in the order lookups probe them.
    pub fn probe_order(&self) -> &[u32] {
        &self.order
    }

    /// Re-sort the subtables by hits since the last call (most first) and
    /// halve the counts so the ranking follows the traffic. Not per packet:
    /// the datapath calls this every ~1 s.
    pub fn rerank(&mut self) {
        let subs = &self.subtables;
        self.order
            .sort_by_key(|&i| std::cmp::Reverse(subs[i as usize].hits.load(Ordering::Relaxed)));
        for s in &self.subtables {
            let h = s.hits.load(Ordering::Relaxed);
            s.hits.store(h / 2, Ordering::Relaxed);
        }
        self.rebuild_suffix();
    }

    /// Classify a batch: `out[i]` = the winning rule for `keys[i]`.
    /// `out` must be at least as long as `keys` (extra keys are ignored).
    pub fn lookup_batch(&self, keys: &[Key], out: &mut [Option<RuleId>]) {
        let mut st = LookupStats::default();
        self.lookup_batch_stats(keys, out, &mut st);
    }

    /// [`Self::lookup_batch`] adding to `stats`.
    pub fn lookup_batch_stats(
        &self,
        keys: &[Key],
        out: &mut [Option<RuleId>],
        stats: &mut LookupStats,
    ) {
        let n = keys.len().min(out.len());
        let mut base = 0;
        while base < n {
            let len = (n - base).min(64);
            let need = if len == 64 {
                u64::MAX
            } else {
                (1u64 << len) - 1
            };
            self.lookup_chunk(
                &keys[base..base + len],
                need,
                &mut out[base..base + len],
                stats,
            );
            base += len;
        }
    }

    /// Look up the packets of `keys` (at most 64) whose bit is set in
    /// `need`, writing `out` for those only.
    pub(crate) fn lookup_chunk(
        &self,
        keys: &[Key],
        mut need: u64,
        out: &mut [Option<RuleId>],
        stats: &mut LookupStats,
    ) {
        debug_assert!(keys.len() <= 64 && out.len() >= keys.len());
        if keys.len() < 64 {
            need &= (1u64 << keys.len()) - 1;
        }
        // Best rank so far per packet (0 = none); on the stack, no allocation.
        let mut best = [0u64; 64];
        let mut it = need;
        while it != 0 {
            let i = it.trailing_zeros() as usize;
            it &= it - 1;
            out[i] = None;
            stats.packets += 1;
        }
        let asked = need;
        for (pos, &si) in self.order.iter().enumerate() {
            // Drop packets that no remaining subtable can improve.
            let rest = self.suffix_max[pos];
            let mut it = need;
            while it != 0 {
                let i = it.trailing_zeros() as usize;
                it &= it - 1;
                if best[i] >= rest {
                    need &= !(1u64 << i);
                }
            }
            if need == 0 {
                break;
            }
            let st = &self.subtables[si as usize];
            let mut hits = 0u64;
            let mut it = need;
            while it != 0 {
                let i = it.trailing_zeros() as usize;
                it &= it - 1;
                if st.max_rank <= best[i] {
                    continue;
                }
                stats.subtables_searched += 1;
                let mk = keys[i].and(&st.mask);
                if let Some(&(r, id)) = st.map.get(&mk).and_then(|b| b.first()) {
                    if r > best[i] {
                        best[i] = r;
                        out[i] = Some(id);
                        hits += 1;
                    }
                }
            }
            if hits != 0 {
                // Once per subtable per chunk; relaxed: only a ranking hint.
                st.hits.fetch_add(hits, Ordering::Relaxed);
            }
        }
        let mut it = asked;
        while it != 0 {
            let i = it.trailing_zeros() as usize;
            it &= it - 1;
            stats.matched += out[i].is_some() as u64;
        }
    }
}
