//! The linear reference classifier: every rule in one list sorted by rank,
//! first match wins. Slow and obviously right; tests cross-check the fast
//! classifier and the cache against it on every lookup (the "autovalidator"
//! idea of Open vSwitch's dpif).
//!
//! Overlap semantics (shared with [`super::classifier`]): the highest
//! priority wins; OpenFlow 1.3 leaves overlapping rules of equal priority
//! undefined, and here the one inserted earlier wins. Re-adding an identical
//! match and priority keeps the original rule (and its place).

use super::classifier::{rank, RuleId};
use super::key::Key;
use super::rule::Match;

#[derive(Debug, Clone)]
struct Entry {
    rank: u64,
    m: Match,
    priority: u16,
    id: RuleId,
}

/// The linear classifier.
#[derive(Debug, Default, Clone)]
pub struct Reference {
    /// Sorted by rank, highest first.
    rules: Vec<Entry>,
    next_seq: u64,
}

impl Reference {
    pub fn new() -> Reference {
        Reference::default()
    }

    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// Every rule: id, match (normalized), priority; highest rank first.
    pub fn rules(&self) -> impl Iterator<Item = (RuleId, &Match, u16)> {
        self.rules.iter().map(|e| (e.id, &e.m, e.priority))
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Insert with a caller-chosen id. If a rule with the same match and
    /// priority exists, nothing changes and its id is returned as `Err`.
    pub fn insert(&mut self, id: RuleId, m: &Match, priority: u16) -> Result<(), RuleId> {
        let m = m.normalized();
        if let Some(e) = self
            .rules
            .iter()
            .find(|e| e.m == m && e.priority == priority)
        {
            return Err(e.id);
        }
        let r = rank(priority, self.next_seq);
        self.next_seq += 1;
        let pos = self.rules.partition_point(|e| e.rank > r);
        self.rules.insert(
            pos,
            Entry {
                rank: r,
                m,
                priority,
                id,
            },
        );
        Ok(())
    }

    /// Remove the rule with exactly this match and priority.
    pub fn remove_strict(&mut self, m: &Match, priority: u16) -> Option<RuleId> {
        let m = m.normalized();
        let i = self
            .rules
            .iter()
            .position(|e| e.m == m && e.priority == priority)?;
        Some(self.rules.remove(i).id)
    }

    /// Remove every rule whose match is covered by `m` (OVS `del-flows`).
    pub fn remove_loose(&mut self, m: &Match) -> Vec<RuleId> {
        let m = m.normalized();
        let mut gone = Vec::new();
        self.rules.retain(|e| {
            if m.covers(&e.m) {
                gone.push(e.id);
                false
            } else {
                true
            }
        });
        gone.sort_unstable();
        gone
    }

    /// The winning rule for `k`.
    pub fn lookup(&self, k: &Key) -> Option<RuleId> {
        self.rules.iter().find(|e| e.m.matches(k)).map(|e| e.id)
    }
}
