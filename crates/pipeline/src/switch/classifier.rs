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

use super::key::{hash_finish, Key, WordHash, HASH_SEED, WORDS};
use super::rule::Match;
use std::collections::{BTreeMap, HashMap};
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
/// The rules of one masked key, `(rank, rule)` highest rank first (never
/// empty; inline for the usual single rule, so neither an insert nor a
/// copy of the table allocates per rule).
type Bucket = smallvec::SmallVec<[(u64, RuleId); 1]>;

/// Where a rule lives: its subtable and its entry there (both kept up to
/// date when subtables or entries move), so a rule costs 24 bytes here
/// and its match is read back from the subtable.
#[derive(Debug, Clone, Copy)]
struct Entry {
    sub: u32,
    ix: u32,
    priority: u16,
    rank: u64,
}

/// One subtable: the rules whose match has this mask, in a hash table
/// keyed by the masked key. Only the key words the mask uses are hashed,
/// compared and stored (`sel`): an entry is those words and a bucket (~40
/// bytes for a 5-tuple rule instead of a 64-byte aligned key), so a
/// million rules take a fraction of the memory to build and to copy, and
/// a probe does 2 to 5 words of work instead of 8.
#[derive(Debug)]
struct Subtable {
    mask: Key,
    sel: [u8; WORDS],
    nsel: u8,
    /// Entry index by hash of its used words.
    index: hashbrown::HashTable<u32>,
    /// The used words of each entry's value, `nsel` per entry.
    vals: Vec<u64>,
    buckets: Vec<Bucket>,
    /// Rule count per priority (for `max_rank` after a removal).
    prios: BTreeMap<u16, u32>,
    /// An upper bound of the rules' ranks (exact until a removal of the
    /// best rule; then the bound of the best remaining priority), used
    /// only to skip the subtable.
    max_rank: u64,
    hits: AtomicU64,
}

impl Clone for Subtable {
    fn clone(&self) -> Subtable {
        Subtable {
            mask: self.mask,
            sel: self.sel,
            nsel: self.nsel,
            index: self.index.clone(),
            vals: self.vals.clone(),
            buckets: self.buckets.clone(),
            prios: self.prios.clone(),
            max_rank: self.max_rank,
            hits: AtomicU64::new(self.hits.load(Ordering::Relaxed)),
        }
    }
}

impl Subtable {
    fn new(mask: Key) -> Subtable {
        let mut sel = [0u8; WORDS];
        let mut nsel = 0;
        for (w, &m) in mask.w.iter().enumerate() {
            if m != 0 {
                sel[nsel] = w as u8;
                nsel += 1;
            }
        }
        Subtable {
            mask,
            sel,
            nsel: nsel as u8,
            index: hashbrown::HashTable::new(),
            vals: Vec::new(),
            buckets: Vec::new(),
            prios: BTreeMap::new(),
            max_rank: 0,
            hits: AtomicU64::new(0),
        }
    }

    #[inline(always)]
    fn sel(&self) -> &[u8] {
        &self.sel[..self.nsel as usize]
    }

    #[inline(always)]
    fn vals_of(&self, ix: u32) -> &[u64] {
        let n = self.nsel as usize;
        &self.vals[ix as usize * n..(ix as usize + 1) * n]
    }

    /// The entry whose used words are `packed` (hash `h`).
    #[inline(always)]
    fn find(&self, packed: &[u64], h: u64) -> Option<u32> {
        let n = self.nsel as usize;
        self.index
            .find(h, |&ix| same_words(&self.vals[ix as usize * n..], packed))
            .copied()
    }

    /// Room for `n` more entries (no re-hash by doubling while they go in).
    fn reserve(&mut self, n: usize) {
        let k = self.nsel as usize;
        self.buckets.reserve(n);
        self.vals.reserve(n * k);
        let (vals, sel) = (&self.vals, &self.sel[..k]);
        self.index.reserve(n, |&x| entry_hash(vals, sel, x));
    }

    /// Pack a masked value (the used words, in `sel` order).
    fn pack(&self, v: &Key) -> ([u64; WORDS], u64) {
        let mut out = [0u64; WORDS];
        let h = v.hash_masked(&self.mask, self.sel(), &mut out);
        (out, h)
    }

    /// The entry of a (masked) value.
    fn find_value(&self, v: &Key) -> Option<u32> {
        let (p, h) = self.pack(v);
        self.find(&p[..self.nsel as usize], h)
    }

    /// The value of entry `ix`, unpacked.
    fn value(&self, ix: u32) -> Key {
        let mut k = Key::ZERO;
        for (&w, &v) in self.sel().iter().zip(self.vals_of(ix)) {
            k.w[w as usize] = v;
        }
        k
    }

    /// The entry of a value, created empty if missing.
    fn entry(&mut self, v: &Key) -> u32 {
        let (p, h) = self.pack(v);
        let n = self.nsel as usize;
        if let Some(ix) = self.find(&p[..n], h) {
            return ix;
        }
        let ix = self.buckets.len() as u32;
        self.vals.extend_from_slice(&p[..n]);
        self.buckets.push(Bucket::new());
        let (vals, sel) = (&self.vals, &self.sel[..n]);
        self.index
            .insert_unique(h, ix, |&x| entry_hash(vals, sel, x));
        ix
    }

    /// Remove the (empty) entry `ix`; the last entry moves into its place.
    /// Returns the rules of the moved entry (their `ix` is now `ix`).
    fn remove_entry(&mut self, ix: u32) -> Option<&Bucket> {
        let n = self.nsel as usize;
        let h = entry_hash(&self.vals, self.sel(), ix);
        if let Ok(e) = self.index.find_entry(h, |&x| x == ix) {
            e.remove();
        }
        let last = self.buckets.len() as u32 - 1;
        self.buckets.swap_remove(ix as usize);
        if ix == last {
            self.vals.truncate(ix as usize * n);
            return None;
        }
        let hl = entry_hash(&self.vals, self.sel(), last);
        if let Some(x) = self.index.find_mut(hl, |&x| x == last) {
            *x = ix;
        }
        let (a, b) = (ix as usize * n, last as usize * n);
        self.vals.copy_within(b..b + n, a);
        self.vals.truncate(b);
        Some(&self.buckets[ix as usize])
    }

    fn len(&self) -> usize {
        self.buckets.len()
    }
}

/// The hash of entry `x` of a subtable's packed values (its index needs
/// it back when it grows).
fn entry_hash(vals: &[u64], sel: &[u8], x: u32) -> u64 {
    let k = sel.len();
    Key::hash_packed(&vals[x as usize * k..(x as usize + 1) * k], sel)
}

/// Are the first `b.len()` words of `a` equal to `b`? (Branch-free; with
/// `b` of constant length, as in [`probe`], the loop unrolls.)
#[inline(always)]
fn same_words(a: &[u64], b: &[u64]) -> bool {
    let mut d = 0;
    for (x, y) in a[..b.len()].iter().zip(b) {
        d |= x ^ y;
    }
    d == 0
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
    /// A [`Self::reserve`] for a mask that has no subtable yet: applied
    /// when the subtable is created.
    pending_reserve: Option<(Key, usize)>,
    /// With at most [`SMALL_RULES`] rules: every rule, best rank first,
    /// for [`Self::lookup_one`]'s linear scan (a pipeline's small tables).
    small: Vec<SmallRule>,
}

/// Tables of at most this many rules are scanned by [`Classifier::lookup_one`]
/// instead of hashed: a masked compare per rule (a few vector operations)
/// costs less than hashing and probing even one subtable.
pub const SMALL_RULES: usize = 8;

#[derive(Debug, Clone)]
struct SmallRule {
    mask: Key,
    value: Key,
    /// The words the mask uses (`nsel` of them): the only ones compared.
    sel: [u8; WORDS],
    nsel: u8,
    rank: u64,
    id: RuleId,
}

impl SmallRule {
    #[inline(always)]
    fn matches(&self, k: &Key) -> bool {
        let mut d = 0;
        for &w in &self.sel[..self.nsel as usize] {
            let w = w as usize;
            d |= (k.w[w] & self.mask.w[w]) ^ self.value.w[w];
        }
        d == 0
    }
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
    pub fn get(&self, id: RuleId) -> Option<(Match, u16)> {
        let e = self.rules.get(id as usize)?.as_ref()?;
        let st = &self.subtables[e.sub as usize];
        let m = Match {
            value: st.value(e.ix),
            mask: st.mask,
        };
        Some((m, e.priority))
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
        let m = m.normalized();
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
        self.n_rules += 1;
        let si = match self.by_mask.get(&m.mask) {
            Some(&i) => i,
            None => {
                let mut st = Subtable::new(m.mask);
                if let Some((mask, n)) = self.pending_reserve.take() {
                    if mask == m.mask {
                        st.reserve(n);
                    }
                }
                self.subtables.push(st);
                let i = self.subtables.len() - 1;
                self.by_mask.insert(m.mask, i);
                // New subtables go last until the next rerank.
                self.order.push(i as u32);
                i
            }
        };
        let st = &mut self.subtables[si];
        let ix = st.entry(&m.value);
        let b = &mut st.buckets[ix as usize];
        let pos = b.partition_point(|&(x, _)| x > r);
        b.insert(pos, (r, id));
        *st.prios.entry(priority).or_insert(0) += 1;
        if r > st.max_rank {
            st.max_rank = r;
        }
        self.rules[id as usize] = Some(Entry {
            sub: si as u32,
            ix,
            priority,
            rank: r,
        });
        self.generation += 1;
        self.rebuild_suffix();
        self.rebuild_small();
        (id, true)
    }

    /// Keep [`Self::small`] in step with the rules (O(rules) only while
    /// there are at most [`SMALL_RULES`]).
    fn rebuild_small(&mut self) {
        self.small.clear();
        if self.n_rules > SMALL_RULES {
            return;
        }
        for (id, e) in self.rules.iter().enumerate() {
            let Some(e) = e else { continue };
            let st = &self.subtables[e.sub as usize];
            self.small.push(SmallRule {
                mask: st.mask,
                value: st.value(e.ix),
                sel: st.sel,
                nsel: st.nsel,
                rank: e.rank,
                id: id as RuleId,
            });
        }
        self.small.sort_by_key(|r| std::cmp::Reverse(r.rank));
    }

    /// Make room for `n` more rules with mask `mask` (a batch insert calls
    /// this per mask first: growing a million-entry table by doubling
    /// re-hashes every entry about twice). Creates nothing.
    pub fn reserve(&mut self, mask: &Key, n: usize) {
        self.rules.reserve(n.saturating_sub(self.free.len()));
        if let Some(&si) = self.by_mask.get(mask) {
            self.subtables[si].reserve(n);
        } else {
            self.pending_reserve = Some((*mask, n));
        }
    }

    /// The rule with exactly this match and priority.
    pub fn find_strict(&self, m: &Match, priority: u16) -> Option<RuleId> {
        let m = m.normalized();
        let &si = self.by_mask.get(&m.mask)?;
        let st = &self.subtables[si];
        let ix = st.find_value(&m.value)?;
        st.buckets[ix as usize]
            .iter()
            .map(|&(_, id)| id)
            .find(|&id| matches!(&self.rules[id as usize], Some(e) if e.priority == priority))
    }

    /// Remove a rule by id; returns its match and priority.
    pub fn remove(&mut self, id: RuleId) -> Option<(Match, u16)> {
        let (m, priority) = self.get(id)?;
        let e = self.rules[id as usize].take()?;
        self.free.push(id);
        self.n_rules -= 1;
        let si = e.sub as usize;
        let st = &mut self.subtables[si];
        let b = &mut st.buckets[e.ix as usize];
        b.retain(|x| x.1 != id);
        if b.is_empty() {
            if let Some(moved) = st.remove_entry(e.ix) {
                for &(_, rid) in moved.iter() {
                    if let Some(r) = self.rules[rid as usize].as_mut() {
                        r.ix = e.ix;
                    }
                }
            }
        }
        if let Some(c) = st.prios.get_mut(&priority) {
            *c -= 1;
            if *c == 0 {
                st.prios.remove(&priority);
            }
        }
        if e.rank >= st.max_rank {
            // A bound: the best remaining priority with the best sequence.
            st.max_rank = st.prios.last_key_value().map_or(0, |(&p, _)| rank(p, 0));
        }
        if st.len() == 0 {
            self.drop_subtable(si);
        }
        self.generation += 1;
        self.rebuild_suffix();
        self.rebuild_small();
        Some((m, priority))
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
        let m = m.normalized();
        let mut out = Vec::new();
        for st in &self.subtables {
            // A covered rule's mask contains m's mask.
            if (0..WORDS).any(|i| m.mask.w[i] & !st.mask.w[i] != 0) {
                continue;
            }
            for ix in 0..st.len() as u32 {
                let rm = Match {
                    value: st.value(ix),
                    mask: st.mask,
                };
                if m.covers(&rm) {
                    out.extend(st.buckets[ix as usize].iter().map(|&(_, id)| id));
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
            // Rare (a mask's last rule went): repoint the moved subtable's rules.
            for b in &self.subtables[si].buckets {
                for &(_, id) in b.iter() {
                    if let Some(r) = self.rules[id as usize].as_mut() {
                        r.sub = si as u32;
                    }
                }
            }
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

    /// The winning rule for one key (a pipeline's lookups after table 0,
    /// one packet at a time): the subtables in probe order, stopping when
    /// none left can beat the best so far. Hit counts are added with a
    /// plain load and store (one writer; only a ranking hint).
    ///
    /// `wc`: when given, the masks of the subtables searched are or-ed
    /// into it (the bits of `k` the result depends on).
    ///
    /// A small table's scan is inlined into the walk (a pipeline's tables
    /// after the first are mostly a few rules, and the call's entry and
    /// exit cost more than the scan); larger tables go out of line.
    #[inline(always)]
    pub fn lookup_one(
        &self,
        k: &Key,
        stats: &mut LookupStats,
        mut wc: Option<&mut Key>,
    ) -> Option<RuleId> {
        stats.packets += 1;
        if self.small.is_empty() {
            return self.lookup_hashed(k, stats, wc);
        }
        // The first match in rank order wins; the rules before it and it
        // are what the result depends on.
        for r in &self.small {
            if let Some(wc) = wc.as_deref_mut() {
                for &w in &r.sel[..r.nsel as usize] {
                    wc.w[w as usize] |= r.mask.w[w as usize];
                }
            }
            if r.matches(k) {
                stats.matched += 1;
                return Some(r.id);
            }
        }
        None
    }

    /// [`Self::lookup_one`] through the subtables' hash tables.
    #[inline(never)]
    fn lookup_hashed(
        &self,
        k: &Key,
        stats: &mut LookupStats,
        mut wc: Option<&mut Key>,
    ) -> Option<RuleId> {
        let (mut best_rank, mut best) = (0u64, None);
        for (pos, &si) in self.order.iter().enumerate() {
            if best_rank >= self.suffix_max[pos] {
                break;
            }
            let st = &self.subtables[si as usize];
            if st.max_rank <= best_rank {
                continue;
            }
            stats.subtables_searched += 1;
            if let Some(wc) = wc.as_deref_mut() {
                for &w in st.sel() {
                    wc.w[w as usize] |= st.mask.w[w as usize];
                }
            }
            // The word count as a constant (as `probe`): the hash and
            // compare unroll.
            let found = match st.nsel {
                1 => find_one::<1>(st, k),
                2 => find_one::<2>(st, k),
                3 => find_one::<3>(st, k),
                4 => find_one::<4>(st, k),
                5 => find_one::<5>(st, k),
                _ => {
                    let mut v = [0u64; WORDS];
                    let n = st.nsel as usize;
                    let h = k.hash_masked(&st.mask, st.sel(), &mut v);
                    st.find(&v[..n], h)
                }
            };
            let Some(ix) = found else {
                continue;
            };
            if let Some(&(r, id)) = st.buckets[ix as usize].first() {
                if r > best_rank {
                    best_rank = r;
                    best = Some(id);
                    st.hits
                        .store(st.hits.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
                }
            }
        }
        stats.matched += best.is_some() as u64;
        best
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
            let (b, o, n) = (&mut best, &mut *out, &mut stats.subtables_searched);
            // The word count as a constant: the hash and compare unroll.
            let hits = match st.nsel {
                0 => probe::<0>(st, keys, need, b, o, n),
                1 => probe::<1>(st, keys, need, b, o, n),
                2 => probe::<2>(st, keys, need, b, o, n),
                3 => probe::<3>(st, keys, need, b, o, n),
                4 => probe::<4>(st, keys, need, b, o, n),
                5 => probe::<5>(st, keys, need, b, o, n),
                6 => probe::<6>(st, keys, need, b, o, n),
                7 => probe::<7>(st, keys, need, b, o, n),
                8 => probe::<8>(st, keys, need, b, o, n),
                // Masks over the pipeline words too (registers, metadata).
                9 => probe::<9>(st, keys, need, b, o, n),
                10 => probe::<10>(st, keys, need, b, o, n),
                11 => probe::<11>(st, keys, need, b, o, n),
                12 => probe::<12>(st, keys, need, b, o, n),
                13 => probe::<13>(st, keys, need, b, o, n),
                14 => probe::<14>(st, keys, need, b, o, n),
                15 => probe::<15>(st, keys, need, b, o, n),
                16 => probe::<16>(st, keys, need, b, o, n),
                // And neighbour discovery's words.
                17 => probe::<17>(st, keys, need, b, o, n),
                _ => probe::<18>(st, keys, need, b, o, n),
            };
            // The last arm is the key's whole width.
            const _: () = assert!(WORDS == 18);
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

/// The entry of `k` in a subtable of `N` words (`lookup_one`).
#[inline(always)]
#[allow(clippy::needless_range_loop)] // j indexes sel, v and the hash steps alike
fn find_one<const N: usize>(st: &Subtable, k: &Key) -> Option<u32> {
    let mut v = [0u64; N];
    let mut h = HASH_SEED;
    for j in 0..N {
        let w = st.sel[j] as usize;
        v[j] = k.w[w] & st.mask.w[w];
        h = WordHash::of(w).step(h, v[j]);
    }
    let h = hash_finish(h);
    let vals = &st.vals[..];
    st.index
        .find(h, |&ix| same_words(&vals[ix as usize * N..], &v))
        .copied()
}

/// Probe subtable `st` (whose mask uses `N` words) for the packets of
/// `need` it could improve; returns its hits. The mask words and hash
/// constants are loaded once per chunk, not per packet.
#[inline(always)]
fn probe<const N: usize>(
    st: &Subtable,
    keys: &[Key],
    need: u64,
    best: &mut [u64; 64],
    out: &mut [Option<RuleId>],
    searched: &mut u64,
) -> u64 {
    let mut sel = [0usize; N];
    let mut mask = [0u64; N];
    let mut wh = [WordHash::default(); N];
    for j in 0..N {
        sel[j] = st.sel[j] as usize;
        mask[j] = st.mask.w[sel[j]];
        wh[j] = WordHash::of(sel[j]);
    }
    let vals = &st.vals[..];
    let mut hits = 0u64;
    let mut it = need;
    while it != 0 {
        let i = it.trailing_zeros() as usize;
        it &= it - 1;
        if st.max_rank <= best[i] {
            continue;
        }
        *searched += 1;
        let k = &keys[i];
        let mut v = [0u64; N];
        let mut h = HASH_SEED;
        for j in 0..N {
            v[j] = k.w[sel[j]] & mask[j];
            h = wh[j].step(h, v[j]);
        }
        let h = hash_finish(h);
        let found = st
            .index
            .find(h, |&ix| same_words(&vals[ix as usize * N..], &v));
        let Some(&ix) = found else {
            continue;
        };
        if let Some(&(r, id)) = st.buckets[ix as usize].first() {
            if r > best[i] {
                best[i] = r;
                out[i] = Some(id);
                hits += 1;
            }
        }
    }
    hits
}
