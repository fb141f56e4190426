//! The flow table: the classifier plus what each rule carries (actions,
//! cookie, counters, timeouts), groups and meters by id, and the
//! control-side publication of new versions to the datapath.
//!
//! # Updates while traffic flows ([`Control`])
//!
//! The control side (socket server, timeout expiry) edits a private
//! [`FlowTable`] under a mutex that only control threads take, then
//! publishes a copy through an [`ArcSwap`]. The datapath loads the current
//! pointer once per batch (`ArcSwap::load`: a lock-free pointer load plus a
//! thread-local debt slot, no lock, no allocation, never blocked by a
//! writer) and keeps that version for the whole batch. A rule change is
//! therefore atomic per batch: every packet sees either the old or the new
//! table, none is dropped or held while the change is made (RCU-style; the
//! old version is freed when the last reader drops it).
//!
//! Per-rule counters survive the copies: each rule's [`RuleStats`] is an
//! `Arc` shared by every version of the table that holds the rule, so the
//! datapath adds to the same slot whichever version it reads.
//!
//! Publishing copies the whole table (O(rules)); a burst of changes sent in
//! one request (`add-flows`) is one copy.

use super::actions::{Group, Meter};
use super::classifier::{Classifier, RuleId};
use super::rule::{Action, MatchSpec, Rule};
use arc_swap::{ArcSwap, Guard};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

/// Monotonic clock in nanoseconds (`CLOCK_MONOTONIC`, read through the
/// vDSO: no syscall). The datapath reads it once per batch.
#[inline(always)]
pub fn mono_ns() -> u64 {
    linerate_io::time::clock_ns(libc::CLOCK_MONOTONIC)
}

/// Counters of one rule: one writer (the datapath), read by the control side.
#[derive(Debug, Default)]
pub struct RuleStats {
    pub packets: AtomicU64,
    pub bytes: AtomicU64,
    /// [`mono_ns`] of the last batch that hit the rule (0 = never).
    pub last_hit_ns: AtomicU64,
    /// [`mono_ns`] of the first batch that hit the rule (0 = never): with
    /// [`FlowEntry::created_ns`], how long a new rule took to take effect.
    pub first_hit_ns: AtomicU64,
}

impl RuleStats {
    /// Add one packet (single writer: load + store, no locked RMW).
    #[inline(always)]
    pub fn hit(&self, bytes: u64, now_ns: u64) {
        let n = self.packets.load(Relaxed);
        if n == 0 {
            self.first_hit_ns.store(now_ns, Relaxed);
        }
        self.packets.store(n.wrapping_add(1), Relaxed);
        self.bytes
            .store(self.bytes.load(Relaxed).wrapping_add(bytes), Relaxed);
        self.last_hit_ns.store(now_ns, Relaxed);
    }
}

/// A rule with its data.
#[derive(Debug, Clone)]
pub struct FlowEntry {
    pub rule: Rule,
    pub stats: Arc<RuleStats>,
    pub created_ns: u64,
    /// The actions push a VLAN tag (the datapath then runs them in a
    /// buffer with headroom).
    pub needs_room: bool,
}

/// Classifier + per-rule data + groups + meters.
#[derive(Debug, Clone, Default)]
pub struct FlowTable {
    cls: Classifier,
    /// Shared between the published versions: a new version copies
    /// pointers, not rules (a copy is O(rules) but small and allocation-free).
    entries: Vec<Option<Arc<FlowEntry>>>,
    groups: HashMap<u32, Group>,
    meters: HashMap<u32, Meter>,
}

impl FlowTable {
    pub fn new() -> FlowTable {
        FlowTable::default()
    }

    pub fn classifier(&self) -> &Classifier {
        &self.cls
    }

    pub fn len(&self) -> usize {
        self.cls.len()
    }

    pub fn is_empty(&self) -> bool {
        self.cls.is_empty()
    }

    /// The entry of a rule the classifier returned.
    #[inline(always)]
    pub fn entry(&self, id: RuleId) -> Option<&FlowEntry> {
        self.entries.get(id as usize)?.as_deref()
    }

    #[inline]
    pub fn group(&self, id: u32) -> Option<&Group> {
        self.groups.get(&id)
    }

    pub fn groups(&self) -> impl Iterator<Item = &Group> {
        self.groups.values()
    }

    pub fn meters(&self) -> impl Iterator<Item = &Meter> {
        self.meters.values()
    }

    /// OpenFlow add: a rule with the same match and priority gets the new
    /// actions, cookie and timeouts and keeps its counters. Rules that
    /// name a group or meter that does not exist are refused (as OVS does).
    pub fn add_flow(&mut self, rule: Rule, now_ns: u64) -> Result<RuleId, String> {
        self.check(&rule)?;
        let (id, new) = self.cls.insert(&rule.m, rule.priority);
        let needs_room = rule
            .actions
            .iter()
            .any(|a| matches!(a, Action::PushVlan(_)));
        let i = id as usize;
        if self.entries.len() <= i {
            self.entries.resize(i + 1, None);
        }
        match (&mut self.entries[i], new) {
            (Some(e), false) => {
                // The published version keeps its own copy of the entry.
                let e = Arc::make_mut(e);
                e.rule = rule;
                e.needs_room = needs_room;
            }
            (slot, _) => {
                *slot = Some(Arc::new(FlowEntry {
                    rule,
                    stats: Arc::new(RuleStats::default()),
                    created_ns: now_ns,
                    needs_room,
                }))
            }
        }
        Ok(id)
    }

    /// Make room for a batch of rules (per mask; see
    /// [`Classifier::reserve`]). Only capacity: the rules are added by
    /// [`Self::add_flow`].
    pub fn reserve_for(&mut self, rules: &[Rule]) {
        self.entries.reserve(rules.len());
        let mut per_mask: HashMap<crate::switch::key::Key, usize> = HashMap::new();
        for r in rules {
            *per_mask
                .entry(super::reference::normalize(&r.m).mask)
                .or_insert(0) += 1;
        }
        for (mask, n) in per_mask {
            self.cls.reserve(&mask, n);
        }
    }

    /// Would [`Self::add_flow`] accept this rule? (It fails for nothing else.)
    pub fn check(&self, rule: &Rule) -> Result<(), String> {
        if rule.table != 0 {
            return Err(format!(
                "table={}: only table 0 is supported (one table, no goto_table)",
                rule.table
            ));
        }
        for a in &rule.actions {
            match a {
                Action::Group(g) if !self.groups.contains_key(g) => {
                    return Err(format!(
                        "rule names group {g}, which does not exist (add-group first)"
                    ))
                }
                Action::Meter(m) if !self.meters.contains_key(m) => {
                    return Err(format!(
                        "rule names meter {m}, which does not exist (add-meter first)"
                    ))
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// OVS `del-flows [MATCH]` (loose: every rule the match covers; none =
    /// all rules). Returns how many were removed.
    pub fn del_flows(&mut self, spec: Option<&MatchSpec>) -> usize {
        let ids = match spec {
            Some(s) => self.cls.remove_loose(&s.m),
            None => {
                let all: Vec<RuleId> = self.ids().collect();
                for &id in &all {
                    self.cls.remove(id);
                }
                all
            }
        };
        for &id in &ids {
            if let Some(e) = self.entries.get_mut(id as usize) {
                *e = None;
            }
        }
        ids.len()
    }

    fn ids(&self) -> impl Iterator<Item = RuleId> + '_ {
        self.entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.is_some())
            .map(|(i, _)| i as RuleId)
    }

    /// Add or replace a group.
    pub fn add_group(&mut self, g: Group) {
        self.groups.insert(g.id, g);
    }

    /// Add or replace a meter.
    pub fn add_meter(&mut self, m: Meter) {
        self.meters.insert(m.id, m);
    }

    /// Remove rules whose hard timeout passed or that were idle for their
    /// idle timeout. Returns how many were removed. Called about once a
    /// second by the control side, never per packet.
    pub fn expire(&mut self, now_ns: u64) -> usize {
        let mut dead = Vec::new();
        for (i, e) in self.entries.iter().enumerate() {
            let Some(e) = e else { continue };
            let r = &e.rule;
            let hard = r.hard_timeout != 0
                && now_ns.saturating_sub(e.created_ns) >= r.hard_timeout as u64 * 1_000_000_000;
            let last = e.stats.last_hit_ns.load(Relaxed).max(e.created_ns);
            let idle = r.idle_timeout != 0
                && now_ns.saturating_sub(last) >= r.idle_timeout as u64 * 1_000_000_000;
            if hard || idle {
                dead.push(i as RuleId);
            }
        }
        for &id in &dead {
            self.cls.remove(id);
            self.entries[id as usize] = None;
        }
        dead.len()
    }

    /// Rules, highest priority first (ties: insertion order).
    pub fn flows(&self) -> Vec<&FlowEntry> {
        let mut v: Vec<&FlowEntry> = self.entries.iter().flatten().map(|e| &**e).collect();
        v.sort_by_key(|e| std::cmp::Reverse(e.rule.priority));
        v
    }

    /// Rules whose match is `spec` or more specific (all without a spec),
    /// highest priority first: what `ovs-ofctl dump-flows BR MATCH` shows.
    pub fn flows_matching(&self, spec: Option<&MatchSpec>) -> Vec<&FlowEntry> {
        let Some(s) = spec else {
            return self.flows();
        };
        let mut v: Vec<&FlowEntry> = self
            .cls
            .find_loose(&s.m)
            .into_iter()
            .filter_map(|id| self.entry(id))
            .collect();
        v.sort_by_key(|e| std::cmp::Reverse(e.rule.priority));
        v
    }

    /// One `ovs-ofctl dump-flows` line.
    pub fn dump_line(e: &FlowEntry, now_ns: u64) -> String {
        let r = &e.rule;
        let dur = now_ns.saturating_sub(e.created_ns) as f64 / 1e9;
        let mut s = format!(
            "cookie={:#x}, duration={dur:.3}s, table={}, n_packets={}, n_bytes={}, ",
            r.cookie,
            r.table,
            e.stats.packets.load(Relaxed),
            e.stats.bytes.load(Relaxed)
        );
        if r.idle_timeout != 0 {
            s.push_str(&format!("idle_timeout={}, ", r.idle_timeout));
        }
        if r.hard_timeout != 0 {
            s.push_str(&format!("hard_timeout={}, ", r.hard_timeout));
        }
        let last = e.stats.last_hit_ns.load(Relaxed);
        let age = if last == 0 { e.created_ns } else { last };
        s.push_str(&format!(
            "idle_age={}, priority={}",
            now_ns.saturating_sub(age) / 1_000_000_000,
            r.priority
        ));
        let m = r.m.to_string();
        if !m.is_empty() {
            s.push(',');
            s.push_str(&m);
        }
        s.push_str(" actions=");
        if r.actions.is_empty() {
            s.push_str("drop");
        } else {
            let a: Vec<String> = r.actions.iter().map(|a| a.to_string()).collect();
            s.push_str(&a.join(","));
        }
        s
    }
}

/// The control side's handle on the table (see the module doc).
pub struct Control {
    edit: Mutex<FlowTable>,
    published: ArcSwap<FlowTable>,
}

impl Control {
    pub fn new(t: FlowTable) -> Arc<Control> {
        Arc::new(Control {
            published: ArcSwap::from_pointee(t.clone()),
            edit: Mutex::new(t),
        })
    }

    /// The version the datapath should use for its next batch (lock-free).
    #[inline]
    pub fn current(&self) -> Guard<Arc<FlowTable>> {
        self.published.load()
    }

    /// Edit the table and publish the result (control threads only).
    pub fn edit<R>(&self, f: impl FnOnce(&mut FlowTable) -> R) -> R {
        let mut g = self.edit.lock().unwrap_or_else(|p| p.into_inner());
        let r = f(&mut g);
        self.published.store(Arc::new(g.clone()));
        r
    }

    /// Edit the table all or nothing: on `Ok` the result is published; on
    /// `Err` the control copy is put back to the published version (what
    /// it was before, up to subtable hit counts, which are only a ranking
    /// hint) and nothing is published. For edits that fail part way, such
    /// as a stream of rules with a bad line in it.
    pub fn try_edit<R, E>(&self, f: impl FnOnce(&mut FlowTable) -> Result<R, E>) -> Result<R, E> {
        let mut g = self.edit.lock().unwrap_or_else(|p| p.into_inner());
        let r = f(&mut g);
        if r.is_ok() {
            self.published.store(Arc::new(g.clone()));
        } else {
            *g = FlowTable::clone(&self.published.load());
        }
        r
    }

    /// Read the control copy (counters are shared, so they are current).
    pub fn read<R>(&self, f: impl FnOnce(&FlowTable) -> R) -> R {
        let g = self.edit.lock().unwrap_or_else(|p| p.into_inner());
        f(&g)
    }

    /// [`Control::tick`] unless an edit holds the lock right now (then it
    /// waits for the next second; the caller never blocks on an editor).
    pub fn try_tick(&self, now_ns: u64) -> Option<usize> {
        let g = match self.edit.try_lock() {
            Ok(g) => g,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return None,
        };
        Some(self.tick_locked(g, now_ns))
    }

    /// Once a second: expire timed-out rules and re-rank the subtables by
    /// the hits the datapath counted. Publishes only when something changed.
    pub fn tick(&self, now_ns: u64) -> usize {
        let g = self.edit.lock().unwrap_or_else(|p| p.into_inner());
        self.tick_locked(g, now_ns)
    }

    fn tick_locked(&self, mut g: std::sync::MutexGuard<'_, FlowTable>, now_ns: u64) -> usize {
        let expired = g.expire(now_ns);
        let cur = self.published.load();
        let mut reordered = false;
        if g.cls.subtables() > 1 {
            let before = g.cls.probe_order().to_vec();
            g.cls.copy_hits_from(&cur.cls);
            g.cls.rerank();
            reordered = g.cls.probe_order() != before.as_slice();
        }
        // Publishing copies the table: only when something changed.
        if expired > 0 || reordered {
            self.published.store(Arc::new(g.clone()));
        }
        expired
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::switch::key::Key;
    use crate::switch::Match;

    #[test]
    fn counters_survive_publication_and_timeouts_expire() {
        let ctl = Control::new(FlowTable::new());
        let r = Rule::parse("priority=10,in_port=1,actions=output:2").unwrap();
        let id = ctl.edit(|t| t.add_flow(r, 0)).unwrap();
        let t1 = ctl.current().clone();
        t1.entry(id).unwrap().stats.hit(100, 5);
        // A change publishes a new version; the counter slot is shared.
        let r2 = Rule::parse("priority=5,hard_timeout=2,actions=drop").unwrap();
        ctl.edit(|t| t.add_flow(r2, 0)).unwrap();
        let t2 = ctl.current().clone();
        assert!(!Arc::ptr_eq(&t1, &t2));
        assert_eq!(t2.len(), 2);
        assert_eq!(t2.entry(id).unwrap().stats.packets.load(Relaxed), 1);
        let mut k = Key::ZERO;
        k.set(crate::switch::key::IN_PORT, 1);
        let mut out = [None];
        t2.classifier().lookup_batch(&[k], &mut out);
        assert_eq!(out[0], Some(id));
        // The hard timeout (2 s) removes the second rule, not the first.
        assert_eq!(ctl.tick(1_000_000_000), 0);
        assert_eq!(ctl.tick(2_000_000_000), 1);
        assert_eq!(ctl.current().len(), 1);
        let line = FlowTable::dump_line(ctl.current().entry(id).unwrap(), 1_500_000_000);
        assert!(
            line.starts_with("cookie=0x0, duration=1.500s, table=0, n_packets=1, n_bytes=100,"),
            "{line}"
        );
        assert!(
            line.ends_with("priority=10,in_port=1 actions=output:2"),
            "{line}"
        );
        let _ = Match::ANY;
    }

    #[test]
    fn idle_timeout_counts_from_the_last_hit() {
        let ctl = Control::new(FlowTable::new());
        let r = Rule::parse("idle_timeout=1,priority=3,actions=output:1").unwrap();
        let id = ctl.edit(|t| t.add_flow(r, 0)).unwrap();
        ctl.current().entry(id).unwrap().stats.hit(60, 500_000_000);
        assert_eq!(ctl.tick(1_200_000_000), 0);
        assert_eq!(ctl.current().len(), 1);
        assert_eq!(ctl.tick(1_600_000_000), 1);
        assert!(ctl.current().is_empty());
    }

    #[test]
    fn refuses_unknown_group_and_meter() {
        let mut t = FlowTable::new();
        let r = Rule::parse("actions=group:7").unwrap();
        assert!(t.add_flow(r.clone(), 0).unwrap_err().contains("group 7"));
        t.add_group(Group::parse("group_id=7,type=all,bucket=output:1").unwrap());
        t.add_flow(r, 0).unwrap();
        let r = Rule::parse("actions=meter:1,output:2").unwrap();
        assert!(t.add_flow(r, 0).is_err());
        assert_eq!(t.del_flows(None), 1);
        assert!(t.is_empty());
    }
}
