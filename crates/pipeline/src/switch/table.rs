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
use super::rule::{Action, Match, MatchSpec, Rule};
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

/// A rule with its data. `repr(C)`: the counters' pointer, the flag and
/// the rule's action list (first in [`Rule`]) share the first cache line,
/// which is all a packet reads of a rule (not the 256-byte match).
#[derive(Debug, Clone)]
#[repr(C)]
pub struct FlowEntry {
    pub stats: Arc<RuleStats>,
    /// The actions push a VLAN tag (the datapath then runs them in a
    /// buffer with headroom).
    pub needs_room: bool,
    pub rule: Rule,
    pub created_ns: u64,
}

/// Lookups and matches of one table (one writer: the datapath, once per
/// batch; shared by every published version, like [`RuleStats`]).
#[derive(Debug, Default)]
pub struct TableStats {
    pub lookups: AtomicU64,
    pub matches: AtomicU64,
}

/// One table of the pipeline: its classifier and the rules' data.
#[derive(Debug, Clone, Default)]
pub struct Table {
    cls: Classifier,
    /// Shared between the published versions: a new version copies
    /// pointers, not rules (a copy is O(rules) but small and allocation-free).
    entries: Vec<Option<Arc<FlowEntry>>>,
    /// The pipeline's epoch at this table's last change (what the
    /// pipeline cache checks its entries against).
    changed: u64,
    pub stats: Arc<TableStats>,
}

impl Table {
    pub fn classifier(&self) -> &Classifier {
        &self.cls
    }

    /// The entry of a rule the classifier returned.
    #[inline(always)]
    pub fn entry(&self, id: RuleId) -> Option<&FlowEntry> {
        self.entries.get(id as usize)?.as_deref()
    }

    /// The epoch of the table's last change.
    #[inline(always)]
    pub fn changed(&self) -> u64 {
        self.changed
    }

    fn ids(&self) -> impl Iterator<Item = RuleId> + '_ {
        self.entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.is_some())
            .map(|(i, _)| i as RuleId)
    }
}

/// Does a rule need the multi-table path: outside table 0, with a
/// pipeline action, or matching registers or metadata?
fn pipeline_rule(r: &Rule) -> bool {
    r.table != 0
        || r.actions.iter().any(Action::pipeline)
        || r.m.mask.w[super::key::PKT_WORDS..].iter().any(|&w| w != 0)
}

/// Does a rule's action list make the frame longer (a VLAN tag)?
fn pushes_tag(r: &Rule) -> bool {
    use super::field::Field;
    r.actions.iter().any(|a| match a {
        Action::PushVlan(_) | Action::ModVlanVid(_) => true,
        Action::Load { dst, .. } | Action::Move { dst, .. } => {
            matches!(dst.field, Field::VlanTci | Field::VlanVid)
        }
        _ => false,
    })
}

/// The pipeline: tables 0..254 (a rule's `table=`), groups and meters.
/// With rules in table 0 only and none of the pipeline's own actions it is
/// the single-table switch of issue 5, and the datapath runs its fast
/// path ([`Self::multi`]).
#[derive(Debug, Clone)]
pub struct FlowTable {
    /// Index = table id; table 0 always exists, the others once a rule
    /// names them.
    tables: Vec<Table>,
    groups: HashMap<u32, Group>,
    meters: HashMap<u32, Meter>,
    /// Bumped by every change of any table.
    epoch: u64,
    /// Rules for which [`pipeline_rule`] holds.
    pipeline_rules: usize,
    /// Rules for which [`pushes_tag`] holds.
    tag_rules: usize,
}

impl Default for FlowTable {
    fn default() -> FlowTable {
        FlowTable {
            tables: vec![Table::default()],
            groups: HashMap::new(),
            meters: HashMap::new(),
            epoch: 0,
            pipeline_rules: 0,
            tag_rules: 0,
        }
    }
}

impl FlowTable {
    pub fn new() -> FlowTable {
        FlowTable::default()
    }

    /// Table 0's classifier (the single-table fast path's).
    pub fn classifier(&self) -> &Classifier {
        &self.tables[0].cls
    }

    /// Rules in every table.
    pub fn len(&self) -> usize {
        self.tables.iter().map(|t| t.cls.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The entry of a rule of table 0 the classifier returned.
    #[inline(always)]
    pub fn entry(&self, id: RuleId) -> Option<&FlowEntry> {
        self.tables[0].entry(id)
    }

    /// Table `t`, if a rule ever named it.
    #[inline(always)]
    pub fn table(&self, t: u8) -> Option<&Table> {
        self.tables.get(t as usize)
    }

    /// Every table that exists: (id, table).
    pub fn tables(&self) -> impl Iterator<Item = (u8, &Table)> {
        self.tables.iter().enumerate().map(|(i, t)| (i as u8, t))
    }

    /// True when the rules form a multi-table pipeline (any rule outside
    /// table 0, with a pipeline action, or matching registers/metadata).
    #[inline(always)]
    pub fn multi(&self) -> bool {
        self.pipeline_rules > 0
    }

    /// True when some rule's actions add a VLAN tag (the datapath then
    /// runs the pipeline in a buffer with headroom).
    #[inline(always)]
    pub fn pushes_tags(&self) -> bool {
        self.tag_rules > 0
    }

    /// Bumped by every change of any table.
    #[inline(always)]
    pub fn epoch(&self) -> u64 {
        self.epoch
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

    /// Table `t`, created when missing; marks it changed.
    fn touch(&mut self, t: u8) -> &mut Table {
        let i = t as usize;
        if self.tables.len() <= i {
            self.tables.resize_with(i + 1, Table::default);
        }
        self.epoch += 1;
        let tb = &mut self.tables[i];
        tb.changed = self.epoch;
        tb
    }

    /// Count a rule in or out of the pipeline and tag tallies.
    fn tally(&mut self, r: &Rule, add: bool) {
        let d = |x: bool| x as usize;
        if add {
            self.pipeline_rules += d(pipeline_rule(r));
            self.tag_rules += d(pushes_tag(r));
        } else {
            self.pipeline_rules -= d(pipeline_rule(r));
            self.tag_rules -= d(pushes_tag(r));
        }
    }

    /// OpenFlow add: a rule with the same table, match and priority gets
    /// the new actions, cookie and timeouts and keeps its counters. Rules
    /// that name a group or meter that does not exist are refused (as OVS
    /// does). Returns the rule's id in its table.
    pub fn add_flow(&mut self, rule: Rule, now_ns: u64) -> Result<RuleId, String> {
        self.check(&rule)?;
        let t = rule.table;
        let needs_room = pushes_tag(&rule);
        self.tally(&rule, true);
        let (id, new) = self.touch(t).cls.insert(&rule.m, rule.priority);
        let i = id as usize;
        let tb = &mut self.tables[t as usize];
        if tb.entries.len() <= i {
            tb.entries.resize(i + 1, None);
        }
        let old = match (&mut tb.entries[i], new) {
            (Some(e), false) => {
                // The published version keeps its own copy of the entry.
                let e = Arc::make_mut(e);
                e.needs_room = needs_room;
                Some(std::mem::replace(&mut e.rule, rule))
            }
            (slot, _) => {
                *slot = Some(Arc::new(FlowEntry {
                    rule,
                    stats: Arc::new(RuleStats::default()),
                    created_ns: now_ns,
                    needs_room,
                }));
                None
            }
        };
        if let Some(o) = old {
            self.tally(&o, false);
        }
        Ok(id)
    }

    /// Make room for a batch of rules (per table and mask; see
    /// [`Classifier::reserve`]). Only capacity: the rules are added by
    /// [`Self::add_flow`].
    pub fn reserve_for<'a>(&mut self, rules: impl IntoIterator<Item = &'a Rule>) {
        let mut per_mask: HashMap<(u8, crate::switch::key::Key), usize> = HashMap::new();
        for r in rules {
            *per_mask
                .entry((r.table, super::reference::normalize(&r.m).mask))
                .or_insert(0) += 1;
        }
        for ((t, mask), n) in per_mask {
            if let Some(tb) = self.tables.get_mut(t as usize) {
                tb.entries.reserve(n);
                tb.cls.reserve(&mask, n);
            }
        }
    }

    /// Would [`Self::add_flow`] accept this rule? (It fails for nothing else.)
    pub fn check(&self, rule: &Rule) -> Result<(), String> {
        if rule.table == 255 {
            return Err("table=255: tables are 0..254".into());
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
                Action::GotoTable(n) if *n <= rule.table => {
                    return Err(format!(
                        "goto_table:{n} in table {}: goto_table only goes to a later table",
                        rule.table
                    ))
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Remove rule `id` of table `t`.
    fn remove(&mut self, t: u8, id: RuleId) {
        let tb = self.touch(t);
        tb.cls.remove(id);
        let gone = tb.entries.get_mut(id as usize).and_then(Option::take);
        if let Some(e) = gone {
            self.tally(&e.rule, false);
        }
    }

    /// OVS `del-flows [MATCH]` (loose: every rule the match covers, in its
    /// table or in every table; none = all rules). Returns how many were
    /// removed.
    pub fn del_flows(&mut self, spec: Option<&MatchSpec>) -> usize {
        let mut n = 0;
        for t in 0..self.tables.len() as u8 {
            if matches!(spec, Some(MatchSpec { table: Some(x), .. }) if *x != t) {
                continue;
            }
            let ids: Vec<RuleId> = match spec {
                Some(s) => self.tables[t as usize].cls.find_loose(&s.m),
                None => self.tables[t as usize].ids().collect(),
            };
            for &id in &ids {
                self.remove(t, id);
            }
            n += ids.len();
        }
        n
    }

    /// The rules of `table` (every table when `None`) whose match `m`
    /// covers (OpenFlow's non-strict selection), or, with `strict`, whose
    /// match is `m` with that priority; and for which `keep` holds (the
    /// cookie and out_port filters of an OpenFlow request).
    pub fn select(
        &self,
        m: &Match,
        strict: Option<u16>,
        table: Option<u8>,
        keep: impl Fn(&Rule) -> bool,
    ) -> Vec<(u8, RuleId)> {
        let mut v = Vec::new();
        for (t, tb) in self.tables() {
            if table.is_some_and(|x| x != t) {
                continue;
            }
            let ids = match strict {
                Some(p) => tb.cls.find_strict(m, p).into_iter().collect(),
                None => tb.cls.find_loose(m),
            };
            v.extend(
                ids.into_iter()
                    .filter(|&id| tb.entry(id).is_some_and(|e| keep(&e.rule)))
                    .map(|id| (t, id)),
            );
        }
        v
    }

    /// Remove the rules [`Self::select`] returned. Returns how many.
    pub fn remove_rules(&mut self, ids: &[(u8, RuleId)]) -> usize {
        for &(t, id) in ids {
            self.remove(t, id);
        }
        ids.len()
    }

    /// Give the rules [`Self::select`] returned the actions `actions`
    /// (OpenFlow modify: match, priority, cookie, timeouts and counters
    /// stay). All or nothing: every rule is checked first.
    pub fn modify_rules(
        &mut self,
        ids: &[(u8, RuleId)],
        actions: &[Action],
        now_ns: u64,
    ) -> Result<usize, String> {
        let mut new = Vec::with_capacity(ids.len());
        for &(t, id) in ids {
            if let Some(e) = self.tables[t as usize].entry(id) {
                let mut r = e.rule.clone();
                r.actions = actions.to_vec();
                self.check(&r)?;
                new.push(r);
            }
        }
        let n = new.len();
        for r in new {
            self.add_flow(r, now_ns)?;
        }
        Ok(n)
    }

    /// The rules (every table) with an action for which `f` holds.
    fn rules_using(&self, f: impl Fn(&Action) -> bool) -> Vec<(u8, RuleId)> {
        let mut v = Vec::new();
        for (t, tb) in self.tables() {
            for id in tb.ids() {
                if tb.entry(id).is_some_and(|e| e.rule.actions.iter().any(&f)) {
                    v.push((t, id));
                }
            }
        }
        v
    }

    /// Remove group `id` (every group when `None`) and the rules that
    /// name it (as OpenFlow's group delete). Returns the groups removed.
    pub fn del_groups(&mut self, id: Option<u32>) -> usize {
        self.del_named(
            id,
            |t| &mut t.groups,
            |a| match a {
                Action::Group(g) => Some(*g),
                _ => None,
            },
        )
    }

    /// Remove meter `id` (every meter when `None`) and the rules that
    /// name it (as OpenFlow's meter delete). Returns the meters removed.
    pub fn del_meters(&mut self, id: Option<u32>) -> usize {
        self.del_named(
            id,
            |t| &mut t.meters,
            |a| match a {
                Action::Meter(m) => Some(*m),
                _ => None,
            },
        )
    }

    /// Remove entry `id` (every entry when `None`) of the map `map` picks
    /// (groups, meters) and the rules with an action that `names` one of
    /// them.
    fn del_named<T>(
        &mut self,
        id: Option<u32>,
        map: fn(&mut FlowTable) -> &mut HashMap<u32, T>,
        names: fn(&Action) -> Option<u32>,
    ) -> usize {
        let gone: Vec<u32> = map(self)
            .keys()
            .copied()
            .filter(|k| id.is_none_or(|x| x == *k))
            .collect();
        let rules = self.rules_using(|a| names(a).is_some_and(|k| gone.contains(&k)));
        self.remove_rules(&rules);
        let m = map(self);
        for k in &gone {
            m.remove(k);
        }
        gone.len()
    }

    /// Meter `id`.
    pub fn meter(&self, id: u32) -> Option<&Meter> {
        self.meters.get(&id)
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
        for (t, tb) in self.tables() {
            for (i, e) in tb.entries.iter().enumerate() {
                let Some(e) = e else { continue };
                let r = &e.rule;
                let hard = r.hard_timeout != 0
                    && now_ns.saturating_sub(e.created_ns) >= r.hard_timeout as u64 * 1_000_000_000;
                let last = e.stats.last_hit_ns.load(Relaxed).max(e.created_ns);
                let idle = r.idle_timeout != 0
                    && now_ns.saturating_sub(last) >= r.idle_timeout as u64 * 1_000_000_000;
                if hard || idle {
                    dead.push((t, i as RuleId));
                }
            }
        }
        for &(t, id) in &dead {
            self.remove(t, id);
        }
        dead.len()
    }

    /// A rule learned by the pipeline (`learn(...)`): added when no rule of
    /// its table has its match and priority or when that rule's actions
    /// differ (true: the table changed); else that rule's idle time starts
    /// again (false: nothing to publish).
    pub fn learn(&mut self, rule: Rule, now_ns: u64) -> Result<bool, String> {
        if let Some(tb) = self.tables.get(rule.table as usize) {
            if let Some(e) = tb
                .cls
                .find_strict(&rule.m, rule.priority)
                .and_then(|id| tb.entry(id))
            {
                if e.rule == rule {
                    e.stats.last_hit_ns.fetch_max(now_ns, Relaxed);
                    return Ok(false);
                }
            }
        }
        self.add_flow(rule, now_ns).map(|_| true)
    }

    /// Rules of every table: by table, then highest priority first (ties:
    /// insertion order).
    pub fn flows(&self) -> Vec<&FlowEntry> {
        self.flows_matching(None)
    }

    /// Rules whose match is `spec` or more specific, in its table or every
    /// table (all without a spec), by table then highest priority first:
    /// what `ovs-ofctl dump-flows BR MATCH` shows.
    pub fn flows_matching(&self, spec: Option<&MatchSpec>) -> Vec<&FlowEntry> {
        let mut v: Vec<&FlowEntry> = Vec::new();
        for (t, tb) in self.tables() {
            match spec {
                Some(MatchSpec { table: Some(x), .. }) if *x != t => {}
                Some(s) => v.extend(
                    tb.cls
                        .find_loose(&s.m)
                        .into_iter()
                        .filter_map(|id| tb.entry(id)),
                ),
                None => v.extend(tb.entries.iter().flatten().map(|e| &**e)),
            }
        }
        v.sort_by_key(|e| (e.rule.table, std::cmp::Reverse(e.rule.priority)));
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

    /// Rules the pipeline learned (`learn(...)`): each added, or refreshed
    /// when its table has it already ([`FlowTable::learn`]); one new
    /// version is published when any table changed. Returns how many rules
    /// were added or changed.
    pub fn learn(&self, rules: impl IntoIterator<Item = Rule>, now_ns: u64) -> usize {
        let mut g = self.edit.lock().unwrap_or_else(|p| p.into_inner());
        let mut changed = 0;
        for r in rules {
            if let Ok(true) = g.learn(r, now_ns) {
                changed += 1;
            }
        }
        if changed > 0 {
            self.published.store(Arc::new(g.clone()));
        }
        changed
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
        for (t, tb) in g.tables.iter_mut().enumerate() {
            let Some(pub_t) = cur.tables.get(t) else {
                continue;
            };
            if tb.cls.subtables() > 1 {
                let before = tb.cls.probe_order().to_vec();
                tb.cls.copy_hits_from(&pub_t.cls);
                tb.cls.rerank();
                reordered |= tb.cls.probe_order() != before.as_slice();
            }
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
