//! The flow table: the classifier plus what each rule carries (actions,
//! cookie, counters, timeouts), groups and meters by id, and the
//! control-side publication of new versions to the datapath.
//!
//! # Updates while traffic flows ([`TableHandle`])
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
//! one request (`add-flows`) is one copy, an edit that changes nothing
//! (a delete that finds no rule) none, and rules the pipeline learns are
//! published at a pace the learning thread sets ([`TableHandle::learn`]), not
//! once per batch of them.
//!
//! # Bounds ([`Limits`])
//!
//! Every rule a peer can make the switch hold is bounded: rules in all
//! tables ([`DEFAULT_MAX_FLOWS`] unless `--max-flows`), rules per table
//! (Open vSwitch's Flow_Table `flow_limit`, `--flow-table`), groups
//! ([`MAX_GROUPS`], each at most [`MAX_BUCKETS`] buckets) and meters
//! ([`MAX_METERS`]). A full table follows its [`Overflow`] policy: by
//! default a learned rule takes the place of the table's oldest learned
//! rule (wire traffic that learns without end, random source MACs, cycles
//! through the table instead of growing it), and any other rule is refused
//! ("table N is full", `OFPFMFC_TABLE_FULL` over OpenFlow). Evictions and
//! refusals are counted per table ([`TableStats`]).

use super::actions::Meter;
use super::classifier::{Classifier, RuleId};
use super::group::{self, Group, GroupError};
use super::rule::{Action, Match, MatchSpec, Rule};
use arc_swap::{ArcSwap, Guard};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed, Ordering::SeqCst};
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
    /// Packets and bytes forwarded (or dropped) for this rule in XDP
    /// (`--offload xdp`), added by [`super::offload`] under its lock.
    pub xdp_packets: AtomicU64,
    pub xdp_bytes: AtomicU64,
}

impl RuleStats {
    /// Every packet the rule took, in user space and in XDP.
    pub fn packets(&self) -> u64 {
        self.packets
            .load(Relaxed)
            .wrapping_add(self.xdp_packets.load(Relaxed))
    }

    /// Their bytes.
    pub fn bytes(&self) -> u64 {
        self.bytes
            .load(Relaxed)
            .wrapping_add(self.xdp_bytes.load(Relaxed))
    }

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
    /// The rule was added by `learn(...)` (it may be evicted to make room
    /// for newer learned rules, [`Overflow`]).
    pub learned: bool,
    pub rule: Rule,
    pub created_ns: u64,
}

/// Lookups and matches of one table (one writer: the datapath, once per
/// batch; shared by every published version, like [`RuleStats`]).
#[derive(Debug, Default)]
pub struct TableStats {
    pub lookups: AtomicU64,
    pub matches: AtomicU64,
    /// Rules evicted to make room ([`Overflow`]; written by the control
    /// side under its edit lock).
    pub evicted: AtomicU64,
    /// Rules refused because the table (or the switch) was full.
    pub refused_full: AtomicU64,
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
    /// Rules that may be evicted, oldest first (shared by every version:
    /// only the control side, under its edit lock, uses it).
    evict: Arc<Mutex<EvictQueue>>,
    /// Learned rules, and rules with a timeout that were not learned.
    n_learned: usize,
    n_timed: usize,
}

/// A rule waiting in an [`EvictQueue`]: which rule (its id and creation
/// time: an id is reused once its rule is gone, so both must agree), and
/// when it was queued (a rule hit since then gets a second chance).
#[derive(Debug, Clone, Copy)]
struct Queued {
    id: RuleId,
    created_ns: u64,
    queued_ns: u64,
}

/// A table's candidates for eviction in the order they came: learned
/// rules, and (for [`Overflow::Evict`]) rules with a timeout. Entries of
/// rules removed since are dropped when they come to the front, and the
/// queues are rebuilt from the table when such entries outnumber the live
/// ones (so a queue never holds more than twice its table's rules plus
/// [`QUEUE_SLACK`]).
#[derive(Debug, Default)]
struct EvictQueue {
    learned: VecDeque<Queued>,
    timed: VecDeque<Queued>,
}

/// Stale entries an eviction queue may hold beyond twice its live ones.
const QUEUE_SLACK: usize = 1024;
/// Rules hit since they were queued that one eviction passes over (each
/// goes to the back) before it takes the next one regardless.
const SECOND_CHANCES: usize = 16;

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
/// pipeline action, or matching registers, metadata, the tunnel id or
/// neighbour discovery's fields? (The single-table path's exact-match
/// cache keys on the packet words only; the multi-table path keeps walks
/// that read the ND words out of its caches.)
fn pipeline_rule(r: &Rule) -> bool {
    r.table != 0
        || r.actions.iter().any(Action::pipeline)
        || r.m.mask.w[super::key::PKT_WORDS..].iter().any(|&w| w != 0)
}

/// Does a rule's action list make the frame longer (a VLAN tag)?
fn pushes_tag(r: &Rule) -> bool {
    use super::field::Field;
    r.actions.iter().any(|a| match a {
        Action::PushVlan(_) | Action::ModVlanVid(_) | Action::PushMpls(_) => true,
        Action::Load { dst, .. } | Action::Move { dst, .. } => {
            matches!(dst.field, Field::VlanTci | Field::VlanVid)
        }
        _ => false,
    })
}

/// Does the rule have an idle or hard timeout?
fn timed(r: &Rule) -> bool {
    r.idle_timeout != 0 || r.hard_timeout != 0
}

/// Is the rule in its table's queue of timed rules (those with a timeout
/// that were not learned: learned ones have a queue of their own)?
fn timed_only(learned: bool, r: &Rule) -> bool {
    !learned && timed(r)
}

/// Rules in all tables unless `--max-flows` says otherwise: the
/// benchmarks' million-rule tables twice over. A version of the table at
/// this size is about 400 MB, and publishing one holds two for a moment.
pub const DEFAULT_MAX_FLOWS: usize = 2_000_000;
/// Groups a switch holds.
pub const MAX_GROUPS: usize = 65_536;
/// Buckets of one group: what fits in one OpenFlow group description (a
/// multipart reply is at most 64 KiB: 16 bytes of headers, 8 of the
/// group's own, 32 per bucket), so that every group can be dumped.
pub const MAX_BUCKETS: usize = 2047;
/// The groups' descriptions (OpenFlow encoding, about the memory they
/// take) together: a controller cannot fill the switch's memory with
/// groups.
pub const MAX_GROUP_BYTES: usize = 64 << 20;
/// Meters a switch holds.
pub const MAX_METERS: usize = 65_536;

/// A group's OpenFlow description's length (what [`MAX_GROUP_BYTES`] counts).
fn desc_len(g: &Group) -> usize {
    super::openflow::instr::group_desc(g).len()
}

/// What a full table does with one more rule (Open vSwitch's Flow_Table
/// `overflow_policy`, with a default of linerate's own for learned rules).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Overflow {
    /// Nothing is evicted: a rule is refused (a learned one too, counted).
    Refuse,
    /// A learned rule takes the place of the table's oldest learned rule
    /// (one hit since it was learned gets a second chance); other rules
    /// are refused. The default: traffic that learns without end cycles
    /// through the table instead of growing it.
    #[default]
    EvictLearned,
    /// Open vSwitch's `evict`: learned rules and rules with an idle or hard
    /// timeout make room for any rule, oldest first (learned ones before
    /// the others); permanent rules are never evicted.
    Evict,
}

impl Overflow {
    pub fn parse(s: &str) -> Result<Overflow, String> {
        match s {
            "refuse" => Ok(Overflow::Refuse),
            "evict-learned" => Ok(Overflow::EvictLearned),
            "evict" => Ok(Overflow::Evict),
            _ => Err(format!(
                "overflow_policy '{}': one of refuse, evict-learned, evict",
                s.escape_default()
            )),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Overflow::Refuse => "refuse",
            Overflow::EvictLearned => "evict-learned",
            Overflow::Evict => "evict",
        }
    }

    /// May a rule (learned or not) make room by evicting another?
    fn evicts(self, learned: bool) -> bool {
        match self {
            Overflow::Refuse => false,
            Overflow::EvictLearned => learned,
            Overflow::Evict => true,
        }
    }
}

/// One table's bound: its most rules and what it does when full.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableLimit {
    /// Rules in the table (`usize::MAX`: only the switch's `max_flows`).
    pub flow_limit: usize,
    pub overflow: Overflow,
}

impl Default for TableLimit {
    fn default() -> TableLimit {
        TableLimit {
            flow_limit: usize::MAX,
            overflow: Overflow::default(),
        }
    }
}

/// The bounds on a switch's rules (see the module doc).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Rules in all tables.
    pub max_flows: usize,
    /// Per table (index = table id).
    tables: Vec<TableLimit>,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_flows: DEFAULT_MAX_FLOWS,
            tables: vec![TableLimit::default(); 255],
        }
    }
}

impl Limits {
    /// `--max-flows N` and every `--flow-table SPEC` ([`Self::parse_table`]).
    pub fn from_flags(max_flows: usize, tables: &[String]) -> Result<Limits, String> {
        let mut l = Limits {
            max_flows,
            ..Limits::default()
        };
        for t in tables {
            l.parse_table(t)?;
        }
        Ok(l)
    }

    /// Table `t`'s bound.
    pub fn table(&self, t: u8) -> TableLimit {
        self.tables.get(t as usize).copied().unwrap_or_default()
    }

    /// Take `--flow-table table=N[,flow_limit=M][,overflow_policy=P]` (the
    /// names of Open vSwitch's Flow_Table columns) into these bounds;
    /// errors are one line.
    pub fn parse_table(&mut self, spec: &str) -> Result<(), String> {
        let bad = |why: String| format!("--flow-table '{}': {why}", spec.escape_default());
        let (mut table, mut lim) = (None, None::<TableLimit>);
        for kv in spec.split(',').map(str::trim).filter(|x| !x.is_empty()) {
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| bad(format!("'{kv}' is not KEY=VALUE")))?;
            match k {
                "table" => {
                    let t: u8 = v
                        .parse()
                        .ok()
                        .filter(|&t| t < 255)
                        .ok_or_else(|| bad(format!("table '{v}': tables are 0..254")))?;
                    table = Some(t);
                    lim = Some(self.table(t));
                }
                "flow_limit" | "overflow_policy" => {
                    let l = lim
                        .as_mut()
                        .ok_or_else(|| bad("table=N comes first".into()))?;
                    if k == "flow_limit" {
                        l.flow_limit = v
                            .parse()
                            .map_err(|_| bad(format!("flow_limit '{v}' is not a number")))?;
                    } else {
                        l.overflow = Overflow::parse(v).map_err(bad)?;
                    }
                }
                _ => {
                    return Err(bad(format!(
                        "unknown key '{k}' (table, flow_limit, overflow_policy)"
                    )))
                }
            }
        }
        let (Some(t), Some(l)) = (table, lim) else {
            return Err(bad("no table=N".into()));
        };
        self.tables[t as usize] = l;
        Ok(())
    }
}

/// The pipeline: tables 0..254 (a rule's `table=`), groups and meters.
/// With rules in table 0 only, none of the pipeline's own actions and no
/// match beyond the packet words (registers, metadata, the tunnel id,
/// neighbour discovery) it is the single-table switch of issue 5, and the
/// datapath runs its fast path ([`Self::multi`]).
#[derive(Debug, Clone)]
pub struct FlowTable {
    /// Index = table id; table 0 always exists, the others once a rule
    /// names them.
    tables: Vec<Table>,
    /// Shared by the published versions (an edit copies the map, not the
    /// groups' buckets).
    groups: HashMap<u32, Arc<Group>>,
    /// The groups' OpenFlow descriptions' bytes, together (at most
    /// [`MAX_GROUP_BYTES`]).
    group_bytes: usize,
    meters: HashMap<u32, Meter>,
    /// Bumped by every change of any table.
    epoch: u64,
    /// Rules for which [`pipeline_rule`] holds.
    pipeline_rules: usize,
    /// Rules for which [`pushes_tag`] holds.
    tag_rules: usize,
    /// Rules in all tables.
    n_rules: usize,
    /// Bumped by every change of the groups or meters (with `epoch`: has
    /// an edit changed anything?).
    gen: u64,
    limits: Arc<Limits>,
    /// Removed rules that asked for a `FLOW_REMOVED` (shared by every
    /// version: only the control side, under its edit lock, fills it).
    removed: Arc<Mutex<RemovedQueue>>,
    /// Fail-open (`--fail-mode standalone` with no controller connected
    /// for a while): the datapath switches every frame as `NORMAL` and
    /// leaves the rules alone (Open vSwitch's hidden fail-open flow).
    fail_open: bool,
}

/// Why a rule left its table (OpenFlow's `ofp_flow_removed_reason`).
pub const RR_IDLE_TIMEOUT: u8 = 0;
pub const RR_HARD_TIMEOUT: u8 = 1;
pub const RR_DELETE: u8 = 2;
pub const RR_GROUP_DELETE: u8 = 3;
/// OpenFlow 1.4's; sent as [`RR_DELETE`] to an OpenFlow 1.3 controller,
/// as Open vSwitch does.
pub const RR_METER_DELETE: u8 = 4;
/// OpenFlow 1.4's: a full table made room ([`Overflow`]). An OpenFlow 1.3
/// controller's default asynchronous configuration leaves it out.
pub const RR_EVICTION: u8 = 5;

/// Removed rules that wait for the controllers: at most this many; more
/// are dropped and counted ([`RemovedQueue::dropped`]).
pub const REMOVED_QUEUE: usize = 1024;

/// A rule with `send_flow_rem` that left its table: what a `FLOW_REMOVED`
/// reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Removed {
    pub rule: Rule,
    pub reason: u8,
    pub duration_ns: u64,
    /// The rule's counters when it is reported ([`FlowTable::take_removed`]),
    /// not when it left: with `--offload xdp` they then hold what XDP
    /// forwarded for it until its entries went (folded after the removal).
    pub packets: u64,
    pub bytes: u64,
}

/// The removed rules waiting to be reported, once someone reports them
/// ([`FlowTable::report_removed`]; without a controller channel nothing
/// is kept).
#[derive(Debug, Default)]
pub struct RemovedQueue {
    on: bool,
    /// Each with the rule's counters, read again when it is reported.
    q: VecDeque<(Removed, Arc<RuleStats>)>,
    /// Removals not kept because [`REMOVED_QUEUE`] were waiting.
    pub dropped: u64,
}

impl Default for FlowTable {
    fn default() -> FlowTable {
        FlowTable {
            tables: vec![Table::default()],
            groups: HashMap::new(),
            group_bytes: 0,
            meters: HashMap::new(),
            epoch: 0,
            pipeline_rules: 0,
            tag_rules: 0,
            n_rules: 0,
            gen: 0,
            limits: Arc::new(Limits::default()),
            removed: Arc::default(),
            fail_open: false,
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
        self.n_rules
    }

    /// The bounds on the rules (see the module doc).
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    pub fn set_limits(&mut self, l: Limits) {
        self.limits = Arc::new(l);
        self.gen += 1;
    }

    /// What changes with every edit that changes anything (rules, groups,
    /// meters): an edit that leaves it alone publishes nothing.
    pub fn version(&self) -> (u64, u64) {
        (self.epoch, self.gen)
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
    /// table 0, with a pipeline action, or matching beyond the packet
    /// words: registers, metadata, the tunnel id, neighbour discovery).
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
        self.groups.get(&id).map(|g| &**g)
    }

    /// The groups' ids, sorted (at most [`MAX_GROUPS`]).
    pub fn group_ids(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self.groups.keys().copied().collect();
        v.sort_unstable();
        v
    }

    /// The meters' ids, sorted (at most [`MAX_METERS`]).
    pub fn meter_ids(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self.meters.keys().copied().collect();
        v.sort_unstable();
        v
    }

    pub fn groups(&self) -> impl Iterator<Item = &Group> {
        self.groups.values().map(|g| &**g)
    }

    /// The groups by id (what the datapath runs them from).
    #[inline]
    pub fn group_map(&self) -> &HashMap<u32, Arc<Group>> {
        &self.groups
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
    /// does), and so is a new rule for a full table that its [`Overflow`]
    /// policy cannot make room in. Returns the rule's id in its table.
    pub fn add_flow(&mut self, rule: Rule, now_ns: u64) -> Result<RuleId, String> {
        self.add_rule(rule, now_ns, false)
    }

    /// [`Self::add_flow`], for a rule the pipeline learned or not.
    fn add_rule(&mut self, mut rule: Rule, now_ns: u64, learned: bool) -> Result<RuleId, String> {
        rule.bind_controller();
        self.check(&rule)?;
        let t = rule.table;
        if self.full(t) && !self.has(&rule) {
            self.make_room(t, learned, now_ns)?;
        }
        let needs_room = pushes_tag(&rule);
        let timed = timed(&rule);
        self.tally(&rule, true);
        let (id, new) = self.touch(t).cls.insert(&rule.m, rule.priority);
        let i = id as usize;
        let tb = &mut self.tables[t as usize];
        if tb.entries.len() <= i {
            tb.entries.resize(i + 1, None);
        }
        // (the rule it replaces and whether that one was queued, its
        // creation time)
        let (old, created_ns) = match (&mut tb.entries[i], new) {
            (Some(e), false) => {
                // The published version keeps its own copy of the entry.
                let e = Arc::make_mut(e);
                e.needs_room = needs_room;
                let was = e.learned;
                e.learned = learned;
                let old = std::mem::replace(&mut e.rule, rule);
                (Some((was, old)), e.created_ns)
            }
            (slot, _) => {
                *slot = Some(Arc::new(FlowEntry {
                    rule,
                    stats: Arc::new(RuleStats::default()),
                    created_ns: now_ns,
                    needs_room,
                    learned,
                }));
                (None, now_ns)
            }
        };
        let queued_before = match old {
            Some((was_learned, o)) => {
                self.tally(&o, false);
                let was_timed = timed_only(was_learned, &o);
                self.kind(t, was_learned, was_timed, false);
                (was_learned, was_timed)
            }
            None => {
                self.n_rules += 1;
                (false, false)
            }
        };
        let timed = timed && !learned;
        self.kind(t, learned, timed, true);
        // Queued once per rule and kind: a replacement of a queued rule
        // keeps its place (same id, same creation time).
        if (learned && !queued_before.0) || (timed && !queued_before.1) {
            self.queue(t, id, created_ns, now_ns, learned);
        }
        Ok(id)
    }

    /// Is table `t` (or the switch) at its bound?
    fn full(&self, t: u8) -> bool {
        let in_t = self.tables.get(t as usize).map_or(0, |tb| tb.cls.len());
        self.n_rules >= self.limits.max_flows || in_t >= self.limits.table(t).flow_limit
    }

    /// Is the switch, or any table, at its bound?
    pub fn any_full(&self) -> bool {
        self.n_rules >= self.limits.max_flows
            || self
                .tables
                .iter()
                .enumerate()
                .any(|(t, tb)| tb.cls.len() >= self.limits.table(t as u8).flow_limit)
    }

    /// Does the table have a rule with this match and priority (an add of
    /// it replaces that rule and needs no room)?
    pub fn has(&self, r: &Rule) -> bool {
        self.tables
            .get(r.table as usize)
            .is_some_and(|tb| tb.cls.find_strict(&r.m, r.priority).is_some())
    }

    /// Would a new rule for table `t` be refused as the table (or the
    /// switch) is full, whatever else happens before it, for a rule that
    /// is not learned? (The OpenFlow channel answers such `FLOW_MOD`s at
    /// once instead of holding them for a batch.)
    pub fn refuses_new(&self, r: &Rule) -> bool {
        self.full(r.table) && !self.limits.table(r.table).overflow.evicts(false) && !self.has(r)
    }

    /// Table `t` exists (created without marking it changed).
    fn ensure(&mut self, t: u8) -> &mut Table {
        let i = t as usize;
        if self.tables.len() <= i {
            self.tables.resize_with(i + 1, Table::default);
        }
        &mut self.tables[i]
    }

    /// Make room for one new rule in a full table `t` by its policy, or
    /// say why not (one line; "is full" is how callers tell this refusal).
    fn make_room(&mut self, t: u8, learned: bool, now_ns: u64) -> Result<(), String> {
        let lim = self.limits.table(t);
        if lim.overflow.evicts(learned) {
            if let Some(id) = self.victim(t, lim.overflow, now_ns) {
                self.remove(t, id, RR_EVICTION);
                self.tables[t as usize].stats.evicted.fetch_add(1, Relaxed);
                return Ok(());
            }
        }
        self.ensure(t);
        Err(self.refuse_full(t))
    }

    /// Count a rule refused because table `t` (which exists) or the switch
    /// is full, and say why in one line ("is full" is how callers tell
    /// this refusal from others).
    pub fn refuse_full(&self, t: u8) -> String {
        let lim = self.limits.table(t);
        let n = self.tables.get(t as usize).map_or(0, |tb| {
            tb.stats.refused_full.fetch_add(1, Relaxed);
            tb.cls.len()
        });
        if n >= lim.flow_limit {
            format!(
                "table {t} is full: {n} rules, its flow_limit (overflow_policy {})",
                lim.overflow.as_str()
            )
        } else {
            format!(
                "the switch is full: {} rules in all tables, its max-flows (table {t}: overflow_policy {})",
                self.n_rules,
                lim.overflow.as_str()
            )
        }
    }

    /// The rule of table `t` to evict: the oldest learned one (then, with
    /// [`Overflow::Evict`], the oldest with a timeout) that was not hit
    /// since it was queued; those that were go to the back, up to
    /// [`SECOND_CHANCES`] of them. None: nothing may be evicted.
    fn victim(&self, t: u8, policy: Overflow, now_ns: u64) -> Option<RuleId> {
        let tb = self.tables.get(t as usize)?;
        let mut q = tb.evict.lock().unwrap_or_else(|p| p.into_inner());
        let mut chances = 0;
        for learned in [true, false] {
            if !learned && policy != Overflow::Evict {
                break;
            }
            loop {
                let qu = if learned {
                    &mut q.learned
                } else {
                    &mut q.timed
                };
                let Some(s) = qu.pop_front() else { break };
                let Some(e) = tb.entry(s.id) else { continue };
                let live = e.created_ns == s.created_ns
                    && if learned {
                        e.learned
                    } else {
                        timed_only(e.learned, &e.rule)
                    };
                if !live {
                    continue;
                }
                if chances < SECOND_CHANCES && e.stats.last_hit_ns.load(Relaxed) > s.queued_ns {
                    chances += 1;
                    qu.push_back(Queued {
                        queued_ns: now_ns,
                        ..s
                    });
                    continue;
                }
                return Some(s.id);
            }
        }
        None
    }

    /// Count a rule of table `t` in or out of the learned and timed tallies.
    fn kind(&mut self, t: u8, learned: bool, timed: bool, add: bool) {
        let tb = &mut self.tables[t as usize];
        let d = |n: &mut usize, x: bool| {
            if x {
                *n = if add { *n + 1 } else { *n - 1 };
            }
        };
        d(&mut tb.n_learned, learned);
        d(&mut tb.n_timed, timed);
    }

    /// Queue rule `id` of table `t` for eviction; rebuild the queue from
    /// the table when stale entries outnumber the live ones.
    fn queue(&mut self, t: u8, id: RuleId, created_ns: u64, now_ns: u64, learned: bool) {
        let tb = &self.tables[t as usize];
        let mut q = tb.evict.lock().unwrap_or_else(|p| p.into_inner());
        let (qu, live) = if learned {
            (&mut q.learned, tb.n_learned)
        } else {
            (&mut q.timed, tb.n_timed)
        };
        qu.push_back(Queued {
            id,
            created_ns,
            queued_ns: now_ns,
        });
        if qu.len() > 2 * live + QUEUE_SLACK {
            let mut v: Vec<Queued> = tb
                .entries
                .iter()
                .enumerate()
                .filter_map(|(i, e)| {
                    let e = e.as_ref()?;
                    let mine = if learned {
                        e.learned
                    } else {
                        timed_only(e.learned, &e.rule)
                    };
                    mine.then_some(Queued {
                        id: i as RuleId,
                        created_ns: e.created_ns,
                        queued_ns: e.created_ns,
                    })
                })
                .collect();
            v.sort_by_key(|x| x.created_ns);
            *qu = v.into();
        }
    }

    /// Make room for a batch of rules (per table and mask; see
    /// [`Classifier::reserve`]). Only capacity: the rules are added by
    /// [`Self::add_flow`].
    pub fn reserve_for<'a>(&mut self, rules: impl IntoIterator<Item = &'a Rule>) {
        let mut per_mask: HashMap<(u8, crate::switch::key::Key), usize> = HashMap::new();
        for r in rules {
            *per_mask
                .entry((r.table, r.m.normalized().mask))
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
        // Every rule can be dumped: its OpenFlow flow-stats entry fits in
        // one reply (a longer one has no valid encoding).
        super::openflow::instr::fits_in_reply(rule)?;
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

    /// Is the switch in fail-open (every frame `NORMAL`)?
    #[inline(always)]
    pub fn fail_open(&self) -> bool {
        self.fail_open
    }

    /// Keep the rules with `send_flow_rem` that leave from now on, for
    /// [`Self::take_removed`] (a controller channel turns them into
    /// `FLOW_REMOVED`s).
    pub fn report_removed(&self) {
        self.removed_queue().on = true;
    }

    fn removed_queue(&self) -> std::sync::MutexGuard<'_, RemovedQueue> {
        self.removed.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Are removed rules waiting to be reported?
    pub fn removed_waiting(&self) -> bool {
        !self.removed_queue().q.is_empty()
    }

    /// The removed rules waiting, oldest first, and how many were dropped
    /// so far because the queue was full.
    pub fn take_removed(&self) -> (Vec<Removed>, u64) {
        let mut g = self.removed_queue();
        let dropped = g.dropped;
        let gone = g.q.drain(..).map(|(mut r, s)| {
            r.packets = s.packets();
            r.bytes = s.bytes();
            r
        });
        (gone.collect(), dropped)
    }

    /// Remove rule `id` of table `t`, for `reason` (`RR_*`).
    fn remove(&mut self, t: u8, id: RuleId, reason: u8) {
        let tb = self.touch(t);
        tb.cls.remove(id);
        let gone = tb.entries.get_mut(id as usize).and_then(Option::take);
        if let Some(e) = gone {
            if e.rule.send_flow_rem {
                let mut g = self.removed_queue();
                if g.on && g.q.len() >= REMOVED_QUEUE {
                    g.dropped += 1;
                } else if g.on {
                    g.q.push_back((
                        Removed {
                            rule: e.rule.clone(),
                            reason,
                            duration_ns: mono_ns().saturating_sub(e.created_ns),
                            // Read from the counters when it is reported.
                            packets: 0,
                            bytes: 0,
                        },
                        e.stats.clone(),
                    ));
                }
            }
            self.tally(&e.rule, false);
            self.kind(t, e.learned, timed_only(e.learned, &e.rule), false);
            self.n_rules -= 1;
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
                self.remove(t, id, RR_DELETE);
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

    /// Remove the rules [`Self::select`] returned, for `reason` (`RR_*`).
    /// Returns how many.
    pub fn remove_rules(&mut self, ids: &[(u8, RuleId)], reason: u8) -> usize {
        for &(t, id) in ids {
            self.remove(t, id, reason);
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
        lens: &[u16],
        now_ns: u64,
    ) -> Result<usize, String> {
        let mut new = Vec::with_capacity(ids.len());
        for &(t, id) in ids {
            if let Some(e) = self.tables[t as usize].entry(id) {
                let mut r = e.rule.clone();
                r.actions = actions.to_vec();
                r.out_max_len = lens.to_vec();
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
        match id {
            Some(id) => {
                if let Some(g) = self.groups.get(&id) {
                    self.group_bytes -= desc_len(g);
                }
            }
            None => self.group_bytes = 0,
        }
        self.del_named(
            id,
            |t| &mut t.groups,
            |a| match a {
                Action::Group(g) => Some(*g),
                _ => None,
            },
            RR_GROUP_DELETE,
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
            RR_METER_DELETE,
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
        reason: u8,
    ) -> usize {
        let gone: Vec<u32> = map(self)
            .keys()
            .copied()
            .filter(|k| id.is_none_or(|x| x == *k))
            .collect();
        if gone.is_empty() {
            // Nothing to delete: nothing changes (and nothing is published).
            return 0;
        }
        let rules = self.rules_using(|a| names(a).is_some_and(|k| gone.contains(&k)));
        self.remove_rules(&rules, reason);
        let m = map(self);
        for k in &gone {
            m.remove(k);
        }
        self.gen += 1;
        gone.len()
    }

    /// Meter `id`.
    pub fn meter(&self, id: u32) -> Option<&Meter> {
        self.meters.get(&id)
    }

    /// Add or replace a group; refused (one line) past [`MAX_GROUPS`]
    /// groups, [`MAX_BUCKETS`] buckets, a description longer than one
    /// OpenFlow reply or [`MAX_GROUP_BYTES`] in all, or when its chain of
    /// groups would loop or go deeper than [`group::MAX_DEPTH`].
    pub fn add_group(&mut self, g: Group) -> Result<(), String> {
        self.try_add_group(g).map_err(|e| e.to_string())
    }

    /// [`Self::add_group`] with the reason (for OpenFlow's error codes).
    pub fn try_add_group(&mut self, g: Group) -> Result<(), GroupError> {
        if g.buckets.len() > MAX_BUCKETS {
            return Err(GroupError::OutOfBuckets(format!(
                "group {}: {} buckets; at most {MAX_BUCKETS} (what one OpenFlow group description holds)",
                g.id,
                g.buckets.len()
            )));
        }
        let len = desc_len(&g);
        if len + 16 > super::openflow::wire::MAX_LEN {
            return Err(GroupError::OutOfBuckets(format!(
                "group {}: its description takes {len} bytes in OpenFlow; at most {} fit in one reply",
                g.id,
                super::openflow::wire::MAX_LEN - 16
            )));
        }
        let old = self.groups.get(&g.id).map_or(0, |o| desc_len(o));
        if self.groups.len() >= MAX_GROUPS && !self.groups.contains_key(&g.id) {
            return Err(GroupError::OutOfGroups(format!(
                "group {}: the switch holds {MAX_GROUPS} groups, its most",
                g.id
            )));
        }
        if self.group_bytes - old + len > MAX_GROUP_BYTES {
            return Err(GroupError::OutOfGroups(format!(
                "group {}: the groups would take more than {} MiB (OpenFlow descriptions), the most the switch holds",
                g.id,
                MAX_GROUP_BYTES >> 20
            )));
        }
        group::check_chain(&self.groups, &g)?;
        self.group_bytes = self.group_bytes - old + len;
        self.groups.insert(g.id, Arc::new(g));
        self.gen += 1;
        Ok(())
    }

    /// Add or replace a meter; refused (one line) past [`MAX_METERS`].
    pub fn add_meter(&mut self, m: Meter) -> Result<(), String> {
        if self.meters.len() >= MAX_METERS && !self.meters.contains_key(&m.id) {
            return Err(format!(
                "meter {}: the switch holds {MAX_METERS} meters, its most",
                m.id
            ));
        }
        self.meters.insert(m.id, m);
        self.gen += 1;
        Ok(())
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
                    let why = if hard {
                        RR_HARD_TIMEOUT
                    } else {
                        RR_IDLE_TIMEOUT
                    };
                    dead.push((t, i as RuleId, why));
                }
            }
        }
        for &(t, id, why) in &dead {
            self.remove(t, id, why);
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
        self.add_rule(rule, now_ns, true).map(|_| true)
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
            e.stats.packets(),
            e.stats.bytes()
        );
        if r.idle_timeout != 0 {
            s.push_str(&format!("idle_timeout={}, ", r.idle_timeout));
        }
        if r.hard_timeout != 0 {
            s.push_str(&format!("hard_timeout={}, ", r.hard_timeout));
        }
        if r.send_flow_rem {
            s.push_str("send_flow_rem, ");
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

/// A walk over the rules of every table (or of one), table by table and
/// in id order within a table, that holds no version of the table: each
/// step takes the rule after the last one from the version it is given
/// (the current one, when the caller loads it per step). So a dump to a
/// client that reads slowly holds one rule at a time, not a copy of the
/// table, and neither a dump's size nor its pace bounds what the switch
/// keeps in memory. A rule added or removed during the walk may or may not
/// be seen (as in Open vSwitch's dumps: OpenFlow promises no snapshot).
#[derive(Debug, Clone)]
pub struct FlowCursor {
    table: usize,
    id: usize,
    only: Option<u8>,
    /// Rules this match covers (`dump-flows MATCH`), normalised.
    m: Option<Match>,
}

impl FlowCursor {
    /// Every rule `spec` selects (loosely: at least as specific, in its
    /// table or every table); every rule without a spec.
    pub fn new(spec: Option<&MatchSpec>) -> FlowCursor {
        FlowCursor {
            table: spec.and_then(|s| s.table).map_or(0, usize::from),
            id: 0,
            only: spec.and_then(|s| s.table),
            m: spec.map(|s| s.m.normalized()),
        }
    }

    /// The next rule of `t` after the last one returned, or None at the end.
    pub fn next(&mut self, t: &FlowTable) -> Option<Arc<FlowEntry>> {
        while let Some(tb) = t.tables.get(self.table) {
            while let Some(slot) = tb.entries.get(self.id) {
                self.id += 1;
                if let Some(e) = slot {
                    if self
                        .m
                        .as_ref()
                        .is_none_or(|m| m.covers(&e.rule.m.normalized()))
                    {
                        return Some(e.clone());
                    }
                }
            }
            if self.only.is_some() {
                break;
            }
            self.table += 1;
            self.id = 0;
        }
        self.table = usize::MAX;
        None
    }
}

/// The control side's handle on the table (see the module doc).
pub struct TableHandle {
    edit: Mutex<FlowTable>,
    published: ArcSwap<FlowTable>,
    /// The control copy holds changes not published yet (learned rules,
    /// [`TableHandle::apply`] without publishing; set and cleared under the
    /// edit lock).
    dirty: AtomicBool,
    /// `--offload xdp`: told of every published version, asked to fold
    /// its counters before they are read.
    offload: std::sync::OnceLock<Arc<dyn Offloaded>>,
}

/// What the tables ask of the XDP offload (`--offload xdp`,
/// [`super::offload::Offload`]), and what its reports read.
pub trait Offloaded: Send + Sync {
    /// A version was published (`old` -> `new`), under the edit lock:
    /// what depended on a changed table must go before this returns.
    fn published(&self, old: &FlowTable, new: &FlowTable);
    /// Add what XDP counted to the rules' counters.
    fn fold(&self);
    /// The XDP programs' counters, summed over the ports.
    fn xdp_stats(&self) -> linerate_io::xdp::switch_offload::OffloadStats;
    /// The offload's own counters (entries, offers, removals), as JSON.
    fn counters_json(&self) -> serde_json::Value;
}

/// What [`TableHandle::learn`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Learned {
    /// Rules added or changed.
    pub changed: usize,
    /// Rules refused (their table full and nothing to evict).
    pub refused: usize,
    /// A new version was published.
    pub published: bool,
}

impl TableHandle {
    pub fn new(t: FlowTable) -> Arc<TableHandle> {
        Arc::new(TableHandle {
            published: ArcSwap::from_pointee(t.clone()),
            edit: Mutex::new(t),
            dirty: AtomicBool::new(false),
            offload: std::sync::OnceLock::new(),
        })
    }

    /// Tell `o` of every version published from now on (its entries that
    /// depend on a changed table go before the change returns).
    pub fn set_offload(&self, o: Arc<dyn Offloaded>) {
        let _ = self.offload.set(o);
    }

    /// The offload, with `--offload xdp`.
    pub fn offload(&self) -> Option<&dyn Offloaded> {
        self.offload.get().map(|o| &**o)
    }

    /// Bring the rules' counters up to date with what XDP forwarded for
    /// them (`--offload xdp`; nothing otherwise). Call before reading them.
    pub fn sync_counters(&self) {
        if let Some(o) = self.offload.get() {
            o.fold();
        }
    }

    /// Enter (true) or leave fail-open, as a new version; the rules and
    /// the caches built on them stay as they are.
    pub fn set_fail_open(&self, on: bool) {
        let mut g = self.lock();
        if g.fail_open != on {
            g.fail_open = on;
            self.publish(&g);
        }
    }

    /// The rules removed since the last call that asked for a
    /// `FLOW_REMOVED` ([`FlowTable::take_removed`]; the queue is shared by
    /// every version, so this takes no edit lock).
    pub fn take_removed(&self) -> (Vec<Removed>, u64) {
        let cur = self.current();
        // What XDP forwarded for them until their entries went (a fold is
        // a map read per entry: only when there is something to report).
        if cur.removed_waiting() {
            self.sync_counters();
        }
        cur.take_removed()
    }

    /// The version the datapath should use for its next batch (lock-free).
    #[inline]
    pub fn current(&self) -> Guard<Arc<FlowTable>> {
        self.published.load()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, FlowTable> {
        self.edit.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Publish the control copy (under the edit lock).
    fn publish(&self, g: &FlowTable) {
        let old = self.published.swap(Arc::new(g.clone()));
        self.dirty.store(false, SeqCst);
        if let Some(o) = self.offload.get() {
            // Still under the edit lock: the change returns after this.
            o.published(&old, g);
        }
    }

    /// Edit the table and publish the result (control threads only); an
    /// edit that changes nothing (a delete that finds nothing) publishes
    /// nothing.
    pub fn edit<R>(&self, f: impl FnOnce(&mut FlowTable) -> R) -> R {
        self.apply(true, f).0
    }

    /// Edit the table; with `publish` publish the result (and whatever
    /// waits), without leave it waiting in the control copy for the next
    /// publication (any edit that publishes, [`Self::publish_waiting`], the
    /// once-a-second tick). (the result, whether a version was published)
    pub fn apply<R>(&self, publish: bool, f: impl FnOnce(&mut FlowTable) -> R) -> (R, bool) {
        let mut g = self.lock();
        let before = g.version();
        let r = f(&mut g);
        if g.version() != before {
            self.dirty.store(true, SeqCst);
        }
        // A table that has just filled is published at once, unpublished
        // changes or not: what a full table refuses is then refused as it
        // comes (the OpenFlow channel looks at the published version).
        let published = self.dirty.load(SeqCst)
            && (publish || (g.any_full() && !self.published.load().any_full()));
        if published {
            self.publish(&g);
        }
        (r, published)
    }

    /// Edit the table all or nothing: on `Ok` the result is published; on
    /// `Err` the control copy is put back to the published version (what
    /// it was before, up to subtable hit counts, which are only a ranking
    /// hint, and learned rules not published yet, which are learned again)
    /// and nothing is published. For edits that fail part way, such as a
    /// stream of rules with a bad line in it.
    pub fn try_edit<R, E>(&self, f: impl FnOnce(&mut FlowTable) -> Result<R, E>) -> Result<R, E> {
        let mut g = self.lock();
        let r = f(&mut g);
        if r.is_ok() {
            self.publish(&g);
        } else {
            *g = FlowTable::clone(&self.published.load());
            self.dirty.store(false, SeqCst);
        }
        r
    }

    /// Rules the pipeline learned (`learn(...)`): each added, or refreshed
    /// when its table has it already ([`FlowTable::learn`]). With `publish`
    /// a new version is published if anything changed since the last one;
    /// without, the changes wait in the control copy for the next
    /// publication (the learning thread paces them: each copies the whole
    /// table, so one per batch of learned rules would make learning
    /// quadratic in the table's size).
    pub fn learn(
        &self,
        rules: impl IntoIterator<Item = Rule>,
        now_ns: u64,
        publish: bool,
    ) -> Learned {
        let mut g = self.lock();
        let mut out = Learned::default();
        for r in rules {
            match g.learn(r, now_ns) {
                Ok(true) => out.changed += 1,
                Ok(false) => {}
                Err(_) => out.refused += 1,
            }
        }
        if out.changed > 0 {
            self.dirty.store(true, SeqCst);
        }
        if publish && self.dirty.load(SeqCst) {
            self.publish(&g);
            out.published = true;
        }
        out
    }

    /// Publish the changes that wait in the control copy (learned rules,
    /// edits applied without publishing); true if there were any.
    pub fn publish_waiting(&self) -> bool {
        if !self.dirty.load(SeqCst) {
            return false;
        }
        let g = self.lock();
        if !self.dirty.load(SeqCst) {
            return false;
        }
        self.publish(&g);
        true
    }

    /// Read the control copy (counters are shared, so they are current).
    pub fn read<R>(&self, f: impl FnOnce(&FlowTable) -> R) -> R {
        let g = self.lock();
        f(&g)
    }

    /// [`TableHandle::tick`] unless an edit holds the lock right now (then it
    /// waits for the next second; the caller never blocks on an editor).
    pub fn try_tick(&self, now_ns: u64) -> Option<usize> {
        // Idle timeouts see what XDP forwarded.
        self.sync_counters();
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
        self.sync_counters();
        let g = self.lock();
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
        if expired > 0 || reordered || self.dirty.load(SeqCst) {
            self.publish(&g);
        }
        expired
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::switch::group::{Bucket, GroupKind};
    use crate::switch::key::Key;
    use crate::switch::Match;

    #[test]
    fn removed_rules_with_send_flow_rem_are_kept_with_their_reason_and_bounded() {
        let ctl = TableHandle::new(FlowTable::new());
        let add = |s: &str| {
            ctl.edit(|t| t.add_flow(Rule::parse(s).unwrap(), 0))
                .unwrap()
        };
        // Nothing is kept until someone reports removals.
        add("send_flow_rem,priority=1,udp,actions=drop");
        ctl.edit(|t| t.del_flows(None));
        assert_eq!(ctl.take_removed(), (vec![], 0));
        ctl.read(|t| t.report_removed());
        let hard = add("send_flow_rem,hard_timeout=2,priority=5,cookie=0x7,udp,actions=drop");
        add("send_flow_rem,idle_timeout=1,priority=6,tcp,actions=drop");
        add("hard_timeout=1,priority=7,icmp,actions=drop");
        add("send_flow_rem,priority=8,arp,actions=drop");
        ctl.current().entry(hard).unwrap().stats.hit(60, 5);
        ctl.tick(1_500_000_000);
        ctl.tick(2_500_000_000);
        ctl.edit(|t| {
            let ids = t.select(&MatchSpec::parse("arp").unwrap().m, None, None, |_| true);
            t.remove_rules(&ids, RR_DELETE)
        });
        let (gone, dropped) = ctl.take_removed();
        let got: Vec<(u16, u8)> = gone.iter().map(|r| (r.rule.priority, r.reason)).collect();
        // The rule without send_flow_rem is not reported.
        assert_eq!(
            got,
            [(6, RR_IDLE_TIMEOUT), (5, RR_HARD_TIMEOUT), (8, RR_DELETE)]
        );
        let h = &gone[1];
        assert_eq!((h.rule.cookie, h.packets, h.bytes), (0x7, 1, 60));
        assert_eq!(dropped, 0);
        // The counters are read when the removal is reported: what was
        // added after the rule left (XDP's last frames, folded after its
        // entries went) is in.
        let late = add("send_flow_rem,priority=10,udp,tp_dst=7,actions=drop");
        let stats = ctl.current().entry(late).unwrap().stats.clone();
        stats.hit(60, 1);
        ctl.edit(|t| t.del_flows(Some(&MatchSpec::parse("udp,tp_dst=7").unwrap())));
        stats.xdp_packets.fetch_add(2, Relaxed);
        stats.xdp_bytes.fetch_add(120, Relaxed);
        let (gone, _) = ctl.take_removed();
        let got: Vec<_> = gone
            .iter()
            .map(|r| (r.rule.priority, r.packets, r.bytes))
            .collect();
        assert_eq!(got, [(10, 3, 180)]);
        // A group delete removes its rules for GROUP_DELETE.
        ctl.edit(|t| {
            t.add_group(Group::parse("group_id=7,type=all,bucket=output:1").unwrap())
                .unwrap();
            t.add_flow(
                Rule::parse("send_flow_rem,priority=9,actions=group:7").unwrap(),
                0,
            )
            .unwrap();
            t.del_groups(Some(7))
        });
        let (gone, _) = ctl.take_removed();
        assert_eq!(gone.len(), 1);
        assert_eq!(gone[0].reason, RR_GROUP_DELETE);
        // Bounded: what does not fit is counted, never kept.
        ctl.edit(|t| {
            for i in 0..REMOVED_QUEUE + 3 {
                let r = Rule::parse(&format!(
                    "send_flow_rem,priority=2,udp,tp_dst={i},actions=drop"
                ));
                t.add_flow(r.unwrap(), 0).unwrap();
            }
            t.del_flows(None)
        });
        let (gone, dropped) = ctl.take_removed();
        assert_eq!((gone.len(), dropped), (REMOVED_QUEUE, 3));
    }

    #[test]
    fn counters_survive_publication_and_timeouts_expire() {
        let ctl = TableHandle::new(FlowTable::new());
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
        let ctl = TableHandle::new(FlowTable::new());
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
        t.add_group(Group::parse("group_id=7,type=all,bucket=output:1").unwrap())
            .unwrap();
        t.add_flow(r, 0).unwrap();
        let r = Rule::parse("actions=meter:1,output:2").unwrap();
        assert!(t.add_flow(r, 0).is_err());
        assert_eq!(t.del_flows(None), 1);
        assert!(t.is_empty());
    }

    /// `table=1,dl_dst=00:00:00:00:00:NN` learned (as `learn(...)` makes
    /// them), actions output:1.
    fn learned(n: u64) -> Rule {
        Rule::parse(&format!(
            "table=1,dl_dst=00:00:00:00:{:02x}:{:02x},actions=output:1",
            n >> 8,
            n & 0xff
        ))
        .unwrap()
    }

    fn limits(max_flows: usize, tables: &[&str]) -> Limits {
        let t: Vec<String> = tables.iter().map(|s| s.to_string()).collect();
        Limits::from_flags(max_flows, &t).unwrap()
    }

    fn has(t: &FlowTable, r: &Rule) -> bool {
        t.table(r.table)
            .is_some_and(|tb| tb.classifier().find_strict(&r.m, r.priority).is_some())
    }

    #[test]
    fn learned_rules_evict_the_oldest_learned_ones_at_the_limit() {
        let mut t = FlowTable::new();
        t.set_limits(limits(1000, &["table=1,flow_limit=3"]));
        // A static rule in the same table is never evicted.
        let fixed = Rule::parse("table=1,priority=1,actions=drop").unwrap();
        t.add_flow(fixed.clone(), 0).unwrap();
        for n in 0..6 {
            assert_eq!(t.learn(learned(n), 10 + n), Ok(true));
        }
        let tb = t.table(1).unwrap();
        assert_eq!(tb.classifier().len(), 3);
        assert_eq!(tb.stats.evicted.load(Relaxed), 4);
        assert!(has(&t, &fixed));
        assert!(has(&t, &learned(4)) && has(&t, &learned(5)));
        assert!(!has(&t, &learned(3)));
        // A learned rule hit since it was learned gets a second chance.
        let id4 = t
            .table(1)
            .unwrap()
            .classifier()
            .find_strict(&learned(4).m, learned(4).priority)
            .unwrap();
        t.table(1).unwrap().entry(id4).unwrap().stats.hit(60, 100);
        t.learn(learned(6), 200).unwrap();
        assert!(has(&t, &learned(4)), "hit: kept");
        assert!(!has(&t, &learned(5)), "not hit: the next oldest goes");
        // Other rules are refused at the limit, with one line that says so.
        let e = t
            .add_flow(
                Rule::parse("table=1,priority=9,in_port=3,actions=drop").unwrap(),
                300,
            )
            .unwrap_err();
        assert!(
            e.contains("table 1 is full") && e.contains("flow_limit") && !e.contains('\n'),
            "{e}"
        );
        assert_eq!(t.table(1).unwrap().stats.refused_full.load(Relaxed), 1);
        // Replacing a rule needs no room.
        let mut r = learned(6);
        r.actions = vec![Action::Output(2)];
        t.add_flow(r, 300).unwrap();
        assert_eq!(t.len(), 3);
    }

    #[test]
    fn overflow_policies_refuse_or_evict_timed_rules_too() {
        // refuse: learned rules are refused too.
        let mut t = FlowTable::new();
        t.set_limits(limits(
            1000,
            &["table=1,flow_limit=2,overflow_policy=refuse"],
        ));
        assert_eq!(t.learn(learned(0), 1), Ok(true));
        assert_eq!(t.learn(learned(1), 2), Ok(true));
        assert!(t.learn(learned(2), 3).unwrap_err().contains("is full"));
        assert!(has(&t, &learned(0)));
        // evict: a rule with a timeout makes room for a FLOW_MOD; a
        // permanent one never does.
        let mut t = FlowTable::new();
        t.set_limits(limits(
            1000,
            &["table=0,flow_limit=2,overflow_policy=evict"],
        ));
        let timed = Rule::parse("priority=5,idle_timeout=60,in_port=1,actions=drop").unwrap();
        let fixed = Rule::parse("priority=5,in_port=2,actions=drop").unwrap();
        t.add_flow(timed.clone(), 1).unwrap();
        t.add_flow(fixed.clone(), 2).unwrap();
        let new = Rule::parse("priority=5,in_port=3,actions=drop").unwrap();
        t.add_flow(new.clone(), 3).unwrap();
        assert!(!has(&t, &timed) && has(&t, &fixed) && has(&t, &new));
        let more = Rule::parse("priority=5,in_port=4,actions=drop").unwrap();
        assert!(t.add_flow(more, 4).unwrap_err().contains("table 0 is full"));
        // The switch's own bound covers every table.
        let mut t = FlowTable::new();
        t.set_limits(limits(2, &[]));
        t.add_flow(Rule::parse("table=3,actions=drop").unwrap(), 0)
            .unwrap();
        t.learn(learned(0), 1).unwrap();
        let e = t
            .add_flow(Rule::parse("table=7,actions=drop").unwrap(), 2)
            .unwrap_err();
        assert!(
            e.contains("the switch is full") && e.contains("max-flows"),
            "{e}"
        );
        // ... and a learned rule then evicts a learned one of its own table.
        assert_eq!(t.learn(learned(1), 3), Ok(true));
        assert!(!has(&t, &learned(0)) && has(&t, &learned(1)));
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn eviction_queues_stay_bounded_under_churn() {
        let mut t = FlowTable::new();
        t.set_limits(limits(1_000_000, &["table=1,flow_limit=100"]));
        for n in 0..20_000u64 {
            t.learn(learned(n % 5000), n).unwrap();
            if n % 7 == 0 {
                // Deletes leave stale entries behind in the queue.
                t.del_flows(Some(&MatchSpec::parse("table=1").unwrap()));
            }
        }
        let tb = t.table(1).unwrap();
        let q = tb.evict.lock().unwrap();
        assert!(tb.classifier().len() <= 100);
        assert!(
            q.learned.len() <= 2 * tb.n_learned + QUEUE_SLACK,
            "{} queued for {} rules",
            q.learned.len(),
            tb.n_learned
        );
        assert_eq!(tb.n_learned, tb.classifier().len());
    }

    #[test]
    fn edits_that_change_nothing_publish_nothing() {
        let ctl = TableHandle::new(FlowTable::new());
        ctl.edit(|t| t.add_flow(Rule::parse("in_port=1,actions=drop").unwrap(), 0))
            .unwrap();
        let v = ctl.current().clone();
        assert_eq!(
            ctl.edit(|t| t.del_flows(Some(&MatchSpec::parse("in_port=9").unwrap()))),
            0
        );
        assert_eq!(ctl.edit(|t| t.del_groups(Some(5))), 0);
        assert_eq!(ctl.edit(|t| t.del_meters(None)), 0);
        assert!(
            Arc::ptr_eq(&v, &ctl.current()),
            "nothing changed: no new version"
        );
        assert_eq!(ctl.edit(|t| t.del_flows(None)), 1);
        assert!(!Arc::ptr_eq(&v, &ctl.current()));
    }

    #[test]
    fn learned_rules_are_published_when_the_learner_says() {
        let ctl = TableHandle::new(FlowTable::new());
        let l = ctl.learn([learned(1), learned(2)], 5, false);
        assert_eq!((l.changed, l.published), (2, false));
        assert!(ctl.current().is_empty());
        assert!(ctl.publish_waiting());
        assert_eq!(ctl.current().len(), 2);
        assert!(!ctl.publish_waiting(), "nothing waits");
        // Any other publication takes waiting learned rules along.
        ctl.learn([learned(3)], 6, false);
        ctl.edit(|t| t.add_flow(Rule::parse("actions=drop").unwrap(), 7))
            .unwrap();
        assert_eq!(ctl.current().len(), 4);
        assert!(!ctl.publish_waiting());
    }

    #[test]
    fn groups_meters_and_rules_that_cannot_be_dumped_are_refused() {
        let mut t = FlowTable::new();
        let outs = |id: u32, n: usize| {
            let b: Vec<Bucket> = (1..=n as u32)
                .map(|p| Bucket::of(GroupKind::All, vec![Action::Output(p)]))
                .collect();
            Group::new(id, GroupKind::All, b).unwrap()
        };
        let e = t.add_group(outs(1, MAX_BUCKETS + 1)).unwrap_err();
        assert!(
            e.contains("2048 buckets") && e.contains("at most 2047"),
            "{e}"
        );
        t.add_group(outs(1, MAX_BUCKETS)).unwrap();
        // Fewer buckets, but too many bytes for one description.
        let long = (0..200).map(|_| Action::Output(1)).collect::<Vec<_>>();
        let b = vec![Bucket::of(GroupKind::All, long); 40];
        let e = t
            .add_group(Group::new(2, GroupKind::All, b).unwrap())
            .unwrap_err();
        assert!(e.contains("fit in one reply"), "{e}");
        for id in 2..=MAX_GROUPS as u32 {
            t.add_group(outs(id, 1)).unwrap();
        }
        let e = t.add_group(outs(0, 1)).unwrap_err();
        assert!(e.contains("65536 groups"), "{e}");
        // Replacing one is not one more.
        t.add_group(outs(7, 2)).unwrap();
        // The bytes of all groups are bounded, and deleting gives them back.
        t.del_groups(None);
        assert_eq!(t.group_bytes, 0);
        let big = |id| {
            let long = (0..1000).map(|_| Action::Output(1)).collect::<Vec<_>>();
            Group::new(id, GroupKind::All, vec![Bucket::of(GroupKind::All, long)]).unwrap()
        };
        let mut added = 0;
        let e = loop {
            match t.add_group(big(added)) {
                Ok(()) => added += 1,
                Err(e) => break e,
            }
        };
        assert!(e.contains("64 MiB"), "{e}");
        assert!((4000..4300).contains(&added), "{added}");
        t.del_groups(Some(0));
        t.add_group(big(added)).unwrap();
        // 1000 actions fit in a flow-stats entry, 5000 do not.
        let outs = |n: usize| {
            let a: Vec<String> = (0..n).map(|i| format!("output:{}", i % 60 + 1)).collect();
            Rule::parse(&format!("in_port=1,actions={}", a.join(","))).unwrap()
        };
        t.add_flow(outs(1000), 0).unwrap();
        let e = t.add_flow(outs(5000), 0).unwrap_err();
        assert!(e.contains("5000 actions") && e.contains("65519"), "{e}");
    }

    #[test]
    fn a_cursor_walks_every_table_or_the_covered_rules() {
        let mut t = FlowTable::new();
        for r in [
            "table=0,priority=1,in_port=1,actions=drop",
            "table=0,priority=2,in_port=2,ip,actions=drop",
            "table=4,priority=3,in_port=2,actions=drop",
            "table=9,priority=4,actions=drop",
        ] {
            t.add_flow(Rule::parse(r).unwrap(), 0).unwrap();
        }
        let walk = |spec: Option<&str>| {
            let s = spec.map(|s| MatchSpec::parse(s).unwrap());
            let mut c = FlowCursor::new(s.as_ref());
            let mut v = Vec::new();
            while let Some(e) = c.next(&t) {
                v.push(e.rule.priority);
            }
            assert!(c.next(&t).is_none(), "the end stays the end");
            v
        };
        assert_eq!(walk(None), vec![1, 2, 3, 4]);
        assert_eq!(walk(Some("in_port=2")), vec![2, 3]);
        assert_eq!(walk(Some("table=4,in_port=2")), vec![3]);
        assert_eq!(walk(Some("table=5")), Vec::<u16>::new());
    }
}
