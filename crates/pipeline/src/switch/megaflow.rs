//! The megaflow cache of a multi-table pipeline (Open vSwitch's datapath
//! flows): a classifier of wildcarded packet keys, each standing for every
//! packet that agrees with a walked packet on the bits its walk depended on
//! ([`super::xlate::Wildcards`]), and the walk's trace of lookups.
//!
//! In the datapath it sits behind the exact-match cache of traces and in
//! front of the walk: a packet the exact-match cache misses is looked up
//! here (a batch at a time, one hash probe per megaflow mask); a hit
//! replays the trace (and is copied into the exact-match cache); a miss
//! walks the tables live and adds a megaflow. With many flows and few masks
//! (a million 5-tuples through a pipeline whose lookups read the same
//! fields) the pipeline then costs one lookup per packet however many
//! tables it has.
//!
//! Like the exact-match cache it watches its hit rate and is bypassed (but
//! for one chunk in 64) below 50 % ([`super::emc::Bypass`]), and it holds at
//! most [`DEFAULT_LIMIT`] megaflows: a megaflow table far larger than the
//! rule tables costs more per hit (cache misses) than walking the tables,
//! so with more distinct megaflows than that, packets walk the tables.
//!
//! Validity is the exact-match cache's: a megaflow's trace holds while none
//! of the tables it looked up changed since it was stored (checked per hit
//! against the tables' change epochs); a stale one is removed when hit.
//! At [`Megaflows::limit`] megaflows the table is emptied and refills from
//! the traffic, unless it is bypassed (then it keeps what it has and adds
//! nothing): bounded memory (Open vSwitch's revalidators evict by idle
//! time instead).
//!
//! Adding a megaflow is the slow path of the packet that missed (Open
//! vSwitch's upcall): the classifier may grow its tables then (an
//! allocation); a packet that hits allocates nothing.

use super::classifier::{Classifier, LookupStats, RuleId};
use super::emc::Bypass;
use super::key::Key;
use super::rule::Match;
use super::xlate::Trace;

/// Default most megaflows.
pub const DEFAULT_LIMIT: usize = 1 << 16;

/// Megaflow counters (per core).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct MegaStats {
    pub hits: u64,
    pub misses: u64,
    pub inserts: u64,
    /// Hits on a megaflow whose tables changed (removed, walked again).
    pub stale: u64,
    /// Times the table was emptied at its limit.
    pub flushes: u64,
}

/// The megaflow table of one datapath.
pub struct Megaflows {
    cls: Classifier,
    /// Per megaflow (its classifier rule id): its trace and the epoch its
    /// trace was last known valid at.
    flows: Vec<(Trace, u64)>,
    limit: usize,
    pub bypass: Bypass,
    pub stats: MegaStats,
    lookup: LookupStats,
}

impl Megaflows {
    /// At most `limit` megaflows (0: none, the cache is off).
    pub fn new(limit: usize) -> Megaflows {
        Megaflows {
            cls: Classifier::new(),
            flows: Vec::new(),
            limit,
            bypass: Bypass::default(),
            stats: MegaStats::default(),
            lookup: LookupStats::default(),
        }
    }

    pub fn enabled(&self) -> bool {
        self.limit > 0
    }

    pub fn len(&self) -> usize {
        self.cls.len()
    }

    pub fn is_empty(&self) -> bool {
        self.cls.is_empty()
    }

    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Distinct masks (each a hash probe per lookup).
    pub fn masks(&self) -> usize {
        self.cls.subtables()
    }

    /// Look up the packets of `keys` (at most 64) whose bit is set in
    /// `need`; `out[i]` is their megaflow, if any.
    #[inline]
    pub fn lookup_chunk(&mut self, keys: &[Key], need: u64, out: &mut [Option<RuleId>]) {
        self.cls.lookup_chunk(keys, need, out, &mut self.lookup);
    }

    /// The trace of megaflow `id` if still valid at `epoch` (`stale`: the
    /// tables' change epochs, [`super::xlate::stale_epochs`]); a stale one
    /// is removed.
    #[inline]
    pub fn get(&mut self, id: RuleId, epoch: u64, stale: &[u64; 64]) -> Option<Trace> {
        let (tr, at) = self.flows.get_mut(id as usize)?;
        if *at == epoch || tr.valid(stale, *at) {
            *at = epoch;
            self.stats.hits += 1;
            return Some(*tr);
        }
        self.stats.stale += 1;
        self.cls.remove(id);
        None
    }

    /// Add the megaflow `key & mask` with its trace, valid at `epoch`.
    pub fn insert(&mut self, mask: &Key, key: &Key, tr: Trace, epoch: u64) {
        if self.limit == 0 {
            return;
        }
        if self.cls.len() >= self.limit {
            // Bypassed (hit rate low) and full: the flows outnumber the
            // megaflows it may hold; keep them, add none (emptying it for
            // the samples only churns memory).
            if self.bypass.active() {
                return;
            }
            self.cls = Classifier::new();
            self.flows.clear();
            self.stats.flushes += 1;
        }
        let m = Match {
            value: key.and(mask),
            mask: *mask,
        };
        let (id, _) = self.cls.insert(&m, 0);
        let i = id as usize;
        if self.flows.len() <= i {
            self.flows.resize(i + 1, (Trace::EMPTY, 0));
        }
        self.flows[i] = (tr, epoch);
        self.stats.inserts += 1;
    }

    /// Re-sort the masks by hits (not per packet: every few thousand
    /// batches, as Open vSwitch's dpcls does about once a second).
    pub fn rerank(&mut self) {
        if self.cls.subtables() > 1 {
            self.cls.rerank();
        }
    }
}
