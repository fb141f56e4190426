//! A packet's walk through a multi-table pipeline (Open vSwitch calls this
//! "translation"): look the packet up in table 0, run the rule's actions,
//! follow `goto_table` to later tables and `resubmit` into any table (a
//! call: the rest of the list runs after it), with registers and metadata
//! in the key's pipeline words ([`super::key`]).
//!
//! # Semantics (as Open vSwitch)
//! - A miss ends the walk: in the walk's own chain of `goto_table`s the
//!   packet is then dropped ("no match") unless something was output
//!   already; a miss in a `resubmit` does nothing and the caller goes on.
//! - Actions run in order on the frame as it is (apply-actions); a later
//!   lookup sees the headers as the actions before it left them.
//! - `resubmit(PORT,TABLE)` looks up with `in_port` = PORT and puts the
//!   input port back right after that lookup (the rule's actions, and the
//!   tables they go to, see the original port). Nesting is limited to [`MAX_DEPTH`] and a
//!   walk to [`MAX_LOOKUPS`] lookups; beyond, the packet is dropped
//!   ([`Verdict::TooDeep`], counted as `resubmit_limit`).
//! - `normal` and `learn` act through the datapath ([`PipeEnv`]).
//!
//! # The pipeline cache
//! The outcome of a walk depends only on the packet's key at table 0 and
//! on the tables it looked up. A walk in [`Mode::Live`] records its lookups
//! (table, rule) in a [`Trace`]; the datapath keeps the trace per packet
//! key in a [`super::emc::Cache`] and later packets of the flow walk in
//! [`Mode::Replay`]: the same actions run (so outputs, meters, `normal`,
//! `learn` and header rewrites happen per packet) but every lookup is read
//! from the trace. An entry is valid while none of the tables it looked up
//! changed since it was stored ([`Trace::deps`], checked against each
//! table's change epoch): a rule added, modified, deleted, learned or
//! expired in one of them invalidates it, a change elsewhere does not.
//!
//! The walk allocates nothing, takes no lock and makes no syscall
//! (`learn` hands its request over through a bounded channel, see
//! [`PipeEnv::learn`]).

use super::actions::{self, Env, FrameBuf, Out, Verdict};
use super::classifier::{LookupStats, RuleId};
use super::field::{Field, SubField};
use super::key::{self, mac_u64, Key};
use super::learn::{Learn, LearnItem, LearnSrc};
use super::normal::Decision;
use super::rule::{Action, Pin, PipeState, SetField};
use super::table::{FlowEntry, FlowTable};
use linerate_wire::frame::Layers;
use linerate_wire::vlan;
use std::sync::Arc;

const ETH_HDR: usize = linerate_wire::ethernet::HEADER_LEN;

/// Most nested `resubmit`s (Open vSwitch's limit too).
pub const MAX_DEPTH: u32 = 64;
/// Most lookups of one walk.
pub const MAX_LOOKUPS: u32 = 4096;
/// Lookups a cached [`Trace`] holds (walks with more are not cached).
pub const TRACE_STEPS: usize = 16;

/// The lookups of one walk, in order: what the pipeline cache keeps.
///
/// Each step holds the table and the rule's entry as a pointer (null for a
/// miss): replaying then reads the entries directly instead of walking
/// table -> entries -> entry for every step, a chain of dependent loads
/// that cost most of a replayed step. The pointers are only followed while
/// the trace is valid ([`Trace::valid`]: none of its tables changed since
/// it was recorded): an unchanged table holds the very same entries
/// (`Arc<FlowEntry>`, shared by every published version of the table), and
/// the datapath holds the current version for the whole batch, so they
/// are alive.
#[derive(Clone, Copy, Debug)]
pub struct Trace {
    entries: [*const FlowEntry; TRACE_STEPS],
    tables: [u8; TRACE_STEPS],
    n: u8,
    /// More lookups than fit: not cached.
    overflow: bool,
    /// The tables looked up, as bits `table % 64`.
    pub deps: u64,
}

// SAFETY: a trace is plain data (pointers never followed unless the trace
// is valid for the table version the following thread holds, see above);
// the caches that keep traces belong to one datapath thread.
unsafe impl Send for Trace {}

impl Trace {
    pub const EMPTY: Trace = Trace {
        entries: [std::ptr::null(); TRACE_STEPS],
        tables: [0; TRACE_STEPS],
        n: 0,
        overflow: false,
        deps: 0,
    };

    fn push(&mut self, t: u8, e: Option<&FlowEntry>) {
        self.deps |= 1 << (t % 64);
        let i = self.n as usize;
        if i == TRACE_STEPS {
            self.overflow = true;
            return;
        }
        self.entries[i] = e.map_or(std::ptr::null(), |e| e as *const FlowEntry);
        self.tables[i] = t;
        self.n += 1;
    }

    /// Step `i`: its table and entry (`None`: a miss).
    ///
    /// # Safety
    /// The trace must be valid for the table version `'a` borrows
    /// ([`Trace::valid`] at that version's epochs, or recorded on it).
    #[inline(always)]
    unsafe fn get<'a>(&self, i: usize) -> Option<(u8, Option<&'a FlowEntry>)> {
        if i >= self.n as usize {
            return None;
        }
        // SAFETY: by the caller's promise the entry is held by the
        // borrowed version (see the type's doc).
        Some((self.tables[i], unsafe { self.entries[i].as_ref() }))
    }

    /// Can it be cached?
    pub fn cacheable(&self) -> bool {
        !self.overflow
    }

    /// Is it still valid for `ft`, whose tables changed at the epochs
    /// `stale` (per bit, the latest change of the tables with that
    /// `table % 64`) when it was stored at `epoch`?
    #[inline]
    pub fn valid(&self, stale: &[u64; 64], epoch: u64) -> bool {
        let mut d = self.deps;
        while d != 0 {
            let b = d.trailing_zeros() as usize;
            d &= d - 1;
            if stale[b] > epoch {
                return false;
            }
        }
        true
    }
}

/// The latest change epoch per `table % 64` of `ft` (for [`Trace::valid`];
/// computed once per table version, not per packet).
pub fn stale_epochs(ft: &FlowTable) -> [u64; 64] {
    let mut s = [0u64; 64];
    for (t, tb) in ft.tables() {
        let b = &mut s[t as usize % 64];
        *b = (*b).max(tb.changed());
    }
    s
}

/// What a walk needs from the datapath besides outputs and meters.
pub trait PipeEnv: Env {
    /// `normal`: learn from the packet (key `k`) and decide where it goes.
    fn normal(&mut self, k: &Key) -> Decision;
    /// `learn(...)`: hand the spec and the packet's key (the learned rule
    /// is built and added off the datapath).
    fn learn(&mut self, spec: &Arc<Learn>, k: &Key);
    /// `controller`: a packet-in of `frame` with the pipeline's state in
    /// `k` (its metadata and registers go in the packet-in's match).
    fn controller(&mut self, p: Pin, frame: &[u8], _k: &Key) {
        self.output(Out::Controller(p), frame);
    }
}

/// Lookups and matches per table during a batch (added to the tables'
/// [`super::table::TableStats`] once per batch).
pub struct TableCounts {
    pub lookups: [u32; 256],
    pub matches: [u32; 256],
    /// The highest table counted since the last publish.
    hi: u8,
}

impl Default for TableCounts {
    fn default() -> TableCounts {
        TableCounts {
            lookups: [0; 256],
            matches: [0; 256],
            hi: 0,
        }
    }
}

impl TableCounts {
    #[inline(always)]
    fn add(&mut self, t: u8, matched: bool) {
        let i = t as usize;
        self.hi = self.hi.max(t);
        self.lookups[i] += 1;
        self.matches[i] += matched as u32;
    }

    /// Add the batch's counts to `ft`'s tables and start again (one
    /// writer: the datapath).
    pub fn publish(&mut self, ft: &FlowTable) {
        use std::sync::atomic::Ordering::Relaxed;
        for (t, tb) in ft.tables() {
            let i = t as usize;
            if self.lookups[i] == 0 {
                continue;
            }
            let s = &tb.stats;
            s.lookups
                .store(s.lookups.load(Relaxed) + self.lookups[i] as u64, Relaxed);
            s.matches
                .store(s.matches.load(Relaxed) + self.matches[i] as u64, Relaxed);
            self.lookups[i] = 0;
            self.matches[i] = 0;
        }
        // Lookups in tables that do not exist (a goto to an empty table)
        // belong to none: start again.
        for i in ft.tables().count()..=self.hi as usize {
            self.lookups[i] = 0;
            self.matches[i] = 0;
        }
        self.hi = 0;
    }
}

/// Where a walk's lookups come from.
// The live variant is large (a trace and a mask): the datapath keeps one
// per chunk and resets it per packet rather than moving it around.
#[allow(clippy::large_enum_variant)]
pub enum Mode<'t> {
    /// The classifiers; recorded into the trace, with the bits of the
    /// packet's key the walk depended on ([`Wildcards`]). `first`: table
    /// 0's result when the datapath looked the batch up already (its
    /// subtables are not known then: the walk is exact only).
    Live {
        trace: Trace,
        wc: Wildcards,
        first: Option<Option<RuleId>>,
        /// Record the trace (false when no cache will keep it).
        record: bool,
    },
    /// A cached trace, read in order.
    Replay { trace: &'t Trace, pos: usize },
}

/// The bits of a packet's key (its packet words, as it entered table 0)
/// that a live walk depended on: every packet that agrees with it on them
/// walks the same way, so its trace serves them all (a megaflow, as Open
/// vSwitch's). Collected as the walk goes: the masks of the classifier
/// subtables it probed, and the fields its actions read (`move`, `learn`,
/// `normal`, `output:FIELD`, `dec_ttl`, the VLAN actions). A walk that
/// reads what the key does not hold (`pop_vlan` exposing an inner tag)
/// is exact only.
#[derive(Clone, Copy, Debug)]
pub struct Wildcards {
    pub mask: Key,
    /// Only the exact key is known to walk this way.
    pub exact: bool,
}

impl Wildcards {
    pub const NONE: Wildcards = Wildcards {
        mask: Key::ZERO,
        exact: false,
    };

    #[inline(always)]
    fn field(&mut self, f: key::FieldLoc) {
        self.mask.w[f.word] |= f.full() << f.shift;
    }

    /// Did the walk's lookups read the neighbour discovery words (which
    /// the megaflows do not key on)?
    pub fn reads_nd(&self) -> bool {
        self.mask.w[key::ND_WORDS].iter().any(|&w| w != 0)
    }

    /// The mask over the packet words (the pipeline words are zero when a
    /// packet enters table 0, so they never need matching; a walk that
    /// read the ND words is no megaflow: [`Self::reads_nd`]).
    pub fn packet_mask(&self) -> Key {
        let mut m = self.mask;
        m.w[key::PKT_WORDS..].fill(0);
        m
    }
}

impl<'t> Mode<'t> {
    /// A live walk from scratch (`first`: table 0's result, if known).
    #[inline(always)]
    pub fn live(first: Option<Option<RuleId>>) -> Mode<'t> {
        Mode::Live {
            trace: Trace::EMPTY,
            wc: Wildcards::NONE,
            first,
            record: true,
        }
    }

    /// Make `self` a live walk from scratch again, writing only what a
    /// walk reads (a whole new trace and mask per packet cost ~300 bytes
    /// of stores): the mask only when the walk tracks wildcards (`first`
    /// unknown), the trace only when `record`.
    #[inline(always)]
    pub fn reset_live(&mut self, first: Option<Option<RuleId>>, record: bool) {
        match self {
            Mode::Live {
                trace,
                wc,
                first: f,
                record: r,
            } => {
                trace.n = 0;
                trace.deps = 0;
                trace.overflow = false;
                wc.exact = first.is_some();
                if first.is_none() {
                    wc.mask = Key::ZERO;
                }
                *f = first;
                *r = record;
            }
            _ => {
                *self = Mode::live(first);
                self.reset_live(first, record);
            }
        }
    }
}

/// How a walk ended when nothing stopped it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// Its chain of tables ended in a miss.
    Miss,
    /// Its last rule's actions were `drop`.
    Drop,
    /// Its last rule's actions ran.
    Done,
}

/// Bring `key`'s packet words up to date with the frame if it changed
/// (`dirty`) since they were extracted. Neighbour discovery's words stay
/// as they are: as in Open vSwitch, they are the flow's, parsed when the
/// frame arrived and then written only by `set_field` on them (a rewrite
/// of the ICMPv6 type or code that makes a frame ND, or not, leaves them).
#[inline(always)]
fn sync_key(key: &mut Key, dirty: &mut bool, f: &FrameBuf) {
    if *dirty {
        let port = key.get(key::IN_PORT) as u32;
        let mut nd = [0u64; 4];
        nd.copy_from_slice(&key.w[key::ND_WORDS]);
        key.extract_into(f.bytes(), port);
        key.w[key::ND_WORDS].copy_from_slice(&nd);
        *dirty = false;
    }
}

/// Look `key` up in table `t` (its packet words brought up to date with
/// the frame first): the winning rule's entry. `wc` as in
/// [`super::classifier::Classifier::lookup_one`].
#[inline(always)]
fn classify<'a>(
    ft: &'a FlowTable,
    t: u8,
    key: &mut Key,
    dirty: &mut bool,
    f: &FrameBuf,
    stats: &mut LookupStats,
    wc: Option<&mut Key>,
) -> Option<&'a FlowEntry> {
    let tb = ft.table(t)?;
    sync_key(key, dirty, f);
    let id = tb.classifier().lookup_one(key, stats, wc)?;
    tb.entry(id)
}

/// One packet's walk.
pub struct Walk<'a, 't, E: PipeEnv> {
    pub ft: &'a FlowTable,
    /// The packet's key with its pipeline words.
    pub key: Key,
    /// The frame changed since `key` was extracted from it.
    dirty: bool,
    layers: Option<Layers>,
    pub env: &'a mut E,
    pub mode: &'a mut Mode<'t>,
    lookups: u32,
    now_ns: u64,
    pub counts: &'a mut TableCounts,
    pub cls_stats: &'a mut LookupStats,
}

impl<'a, 't, E: PipeEnv> Walk<'a, 't, E> {
    pub fn new(
        ft: &'a FlowTable,
        key: Key,
        env: &'a mut E,
        mode: &'a mut Mode<'t>,
        now_ns: u64,
        counts: &'a mut TableCounts,
        cls_stats: &'a mut LookupStats,
    ) -> Walk<'a, 't, E> {
        Walk {
            ft,
            key,
            dirty: false,
            layers: None,
            env,
            mode,
            lookups: 0,
            now_ns,
            counts,
            cls_stats,
        }
    }

    /// Walk the packet in `f` from table 0.
    #[inline]
    pub fn walk(&mut self, f: &mut FrameBuf) -> Result<End, Verdict> {
        self.run(f, 0, 0, None)
    }

    /// Run `list` as if it were a table-0 rule's actions (a packet-out's),
    /// then the tables a `goto_table` at its end leads to.
    pub fn apply(&mut self, f: &mut FrameBuf, list: &'a [Action]) -> Result<End, Verdict> {
        match self.actions(f, list, 0, 0)? {
            Some(t) => self.run(f, t, 0, None),
            None => Ok(End::Done),
        }
    }

    /// The recorded trace and wildcards of a live walk.
    pub fn trace(&self) -> Option<(&Trace, &Wildcards)> {
        match &*self.mode {
            Mode::Live { trace, wc, .. } => Some((trace, wc)),
            Mode::Replay { .. } => None,
        }
    }

    /// The walk depends on field `f` of the packet (live walks only).
    #[inline(always)]
    fn reads(&mut self, f: key::FieldLoc) {
        if let Mode::Live { wc, .. } = &mut *self.mode {
            wc.field(f);
        }
    }

    /// The walk depends on a subfield (a header; registers and metadata
    /// derive from the packet only through actions that are tracked).
    #[inline(always)]
    fn reads_sub(&mut self, s: &SubField) {
        if s.field.header() || matches!(s.field, Field::InPort | Field::InPortOxm) {
            self.reads(s.field.loc());
        }
    }

    /// Bring the key's packet words up to date with the frame.
    #[inline(always)]
    fn sync(&mut self, f: &FrameBuf) {
        sync_key(&mut self.key, &mut self.dirty, f);
    }

    /// One lookup, replayed or live. Inlined into [`Self::run`]: called
    /// once per table per packet, its call cost a replayed 5-table walk a
    /// quarter of its cycles. One dispatch on the mode per lookup (each
    /// `match` on it reloads it through the reference).
    #[inline(always)]
    fn lookup(&mut self, f: &FrameBuf, t: u8) -> Result<Option<&'a FlowEntry>, Verdict> {
        self.lookups += 1;
        if self.lookups > MAX_LOOKUPS {
            return Err(Verdict::TooDeep);
        }
        let ft = self.ft;
        let e = match &mut *self.mode {
            // SAFETY: a replayed trace is valid for `ft` (the datapath and
            // the tests replay only traces that are, see `Trace`).
            Mode::Replay { trace, pos } => match unsafe { trace.get(*pos) } {
                Some((tt, e)) if tt == t => {
                    *pos += 1;
                    e
                }
                // Cannot happen for a valid trace; go on live (unrecorded).
                _ => {
                    let (key, dirty) = (&mut self.key, &mut self.dirty);
                    classify(ft, t, key, dirty, f, self.cls_stats, None)
                }
            },
            Mode::Live {
                trace,
                wc,
                first,
                record,
            } => {
                let e = match first.take() {
                    // Table 0's result, from the datapath's batch lookup
                    // (its subtables are not known: the walk is exact).
                    Some(id) if t == 0 && self.lookups == 1 => {
                        wc.exact = true;
                        id.and_then(|id| ft.table(t)?.entry(id))
                    }
                    _ => {
                        // Exact walks need no wildcards.
                        let m = (!wc.exact).then_some(&mut wc.mask);
                        let (key, dirty) = (&mut self.key, &mut self.dirty);
                        classify(ft, t, key, dirty, f, self.cls_stats, m)
                    }
                };
                if *record {
                    trace.push(t, e);
                }
                e
            }
        };
        self.counts.add(t, e.is_some());
        Ok(e)
    }

    /// Walk from table `t`; `port`: the input port for the first lookup
    /// only (`resubmit(PORT,T)`: as Open vSwitch, the original in_port is
    /// put back before the rule's actions run).
    fn run(
        &mut self,
        f: &mut FrameBuf,
        mut t: u8,
        depth: u32,
        mut port: Option<u32>,
    ) -> Result<End, Verdict> {
        loop {
            let found = match port.take() {
                Some(p) => {
                    let saved = self.key.get(key::IN_PORT);
                    self.key.set(key::IN_PORT, p as u64);
                    let r = self.lookup(f, t);
                    self.key.set(key::IN_PORT, saved);
                    r?
                }
                None => self.lookup(f, t)?,
            };
            let Some(e) = found else {
                return Ok(End::Miss);
            };
            e.stats.hit(f.len as u64, self.now_ns);
            if e.rule.actions.is_empty() {
                return Ok(End::Drop);
            }
            match self.actions(f, &e.rule.actions, t, depth)? {
                Some(next) => t = next,
                None => return Ok(End::Done),
            }
        }
    }

    /// Run a rule's actions; `Some(table)` for its `goto_table`. Inlined
    /// into [`Self::run`] (once per table per packet: the call's entry and
    /// exit cost a 5-table walk ~100 instructions).
    #[inline(always)]
    fn actions(
        &mut self,
        f: &mut FrameBuf,
        list: &'a [Action],
        t: u8,
        depth: u32,
    ) -> Result<Option<u8>, Verdict> {
        for a in list {
            // One dispatch per action: the pipeline's own here, the others
            // in `actions::step` (the last arm).
            match a {
                Action::GotoTable(n) => return Ok(Some(*n)),
                Action::Resubmit { port, table } => {
                    if depth + 1 > MAX_DEPTH {
                        return Err(Verdict::TooDeep);
                    }
                    self.run(f, table.unwrap_or(t), depth + 1, *port)?;
                }
                Action::Load { dst, value } => self.write(f, dst, *value)?,
                Action::Move { src, dst } => {
                    self.reads_sub(src);
                    if src.field.header() {
                        self.sync(f);
                    }
                    let v = src.read(&self.key);
                    self.write(f, dst, v)?;
                }
                Action::WriteMetadata { value, mask } => {
                    let old = self.key.get(key::METADATA);
                    self.key.set(key::METADATA, (old & !mask) | value);
                }
                Action::OutputField(s) => {
                    self.reads_sub(s);
                    if s.field.header() {
                        self.sync(f);
                    }
                    let p = s.read(&self.key) as u32;
                    self.env.output(Out::Port(p), f.bytes());
                }
                Action::ModVlanVid(v) => {
                    self.reads(key::VLAN_TCI);
                    let b = f.bytes();
                    if b.len() >= 16 && vlan::is_tpid(u16::from_be_bytes([b[12], b[13]])) {
                        let tci = (u16::from_be_bytes([b[14], b[15]]) & 0xf000) | v;
                        f.bytes_mut()[14..16].copy_from_slice(&tci.to_be_bytes());
                    } else {
                        f.push_vlan(0x8100, *v)?;
                    }
                    self.layers = None;
                    self.dirty = true;
                }
                // Its metadata, registers and tunnel id go with the packet-in (the
                // pipeline words of the key are always current).
                Action::Controller(p) => self.env.controller(*p, f.bytes(), &self.key),
                Action::Normal => {
                    for fl in [key::IN_PORT, key::VLAN_TCI, key::DL_SRC, key::DL_DST] {
                        self.reads(fl);
                    }
                    self.sync(f);
                    match self.env.normal(&self.key) {
                        Decision::Flood => self.env.output(Out::Flood, f.bytes()),
                        Decision::Port(p) => self.env.output(Out::Port(p), f.bytes()),
                        Decision::Drop => {}
                    }
                }
                Action::Learn(spec) => {
                    for it in &spec.items {
                        if let LearnItem::Match {
                            src: LearnSrc::Field(x),
                            ..
                        }
                        | LearnItem::Load {
                            src: LearnSrc::Field(x),
                            ..
                        }
                        | LearnItem::Output(x) = it
                        {
                            self.reads_sub(x);
                        }
                    }
                    self.sync(f);
                    self.env.learn(spec, &self.key);
                }
                _ => {
                    match a {
                        // The TTL decides a drop; a pushed tag copies the
                        // outer one; a popped tag exposes one the key
                        // does not hold.
                        Action::DecTtl(_) => self.reads(key::NW_TTL),
                        Action::PushVlan(_) => self.reads(key::VLAN_TCI),
                        // What `vlan_vid` rewrites depends on the tag.
                        Action::Set(SetField::VlanVid(_) | SetField::VlanPcp(_)) => {
                            self.reads(key::VLAN_TCI)
                        }
                        Action::PopVlan | Action::PopMpls(_) => self.popped(),
                        // A new MPLS entry copies the top one or the IP
                        // header's TTL and DSCP; the MPLS TTL decides a drop.
                        Action::PushMpls(_) => {
                            for fl in [
                                key::DL_TYPE,
                                key::NW_TTL,
                                key::NW_TOS,
                                key::MPLS_LABEL,
                                key::MPLS_TC,
                                key::MPLS_BOS,
                                key::MPLS_TTL,
                            ] {
                                self.reads(fl);
                            }
                        }
                        Action::DecMplsTtl => self.reads(key::MPLS_TTL),
                        _ => {}
                    }
                    if let Err(v) = actions::step(f, &mut self.layers, a, self.env) {
                        actions::expired(a, v, f, self.env, &PipeState::of(&self.key));
                        return Err(v);
                    }
                    match a {
                        // Neighbour discovery's fields: the key's, when the
                        // frame is of the kind the field needs (Open
                        // vSwitch's prerequisite check as the action runs;
                        // the frame's own bytes were written by `step`).
                        Action::Set(
                            s @ (SetField::NdTarget(_) | SetField::NdSll(_) | SetField::NdTll(_)),
                        ) => {
                            self.sync(f);
                            self.set_nd(s);
                        }
                        // A MAC rewrite moves nothing else: the key's field
                        // is set as the frame's (no re-extraction).
                        Action::Set(SetField::EthDst(m)) if f.len >= ETH_HDR && !self.dirty => {
                            self.key.set(key::DL_DST, mac_u64(m))
                        }
                        Action::Set(SetField::EthSrc(m)) if f.len >= ETH_HDR && !self.dirty => {
                            self.key.set(key::DL_SRC, mac_u64(m))
                        }
                        Action::Set(_)
                        | Action::DecTtl(_)
                        | Action::PushVlan(_)
                        | Action::PopVlan
                        | Action::PushMpls(_)
                        | Action::PopMpls(_)
                        | Action::SetMplsTtl(_)
                        | Action::DecMplsTtl => self.dirty = true,
                        _ => {}
                    }
                }
            }
        }
        Ok(None)
    }

    /// `set_field` on a neighbour discovery field, into the key (which is
    /// up to date): only when the packet is a solicitation (`nd_sll`), an
    /// advertisement (`nd_tll`), or either (`nd_target`).
    fn set_nd(&mut self, s: &SetField) {
        let k = &mut self.key;
        let ty = k.get(key::TP_SRC) as u8;
        match *s {
            SetField::NdTarget(a) if k.is_nd() => {
                k.set128(key::ND_TARGET_WORD, u128::from_be_bytes(a))
            }
            SetField::NdSll(m) if k.is_nd() && ty == key::ND_SOLICIT => {
                k.set(key::ND_SLL, mac_u64(&m))
            }
            SetField::NdTll(m) if k.is_nd() && ty == key::ND_ADVERT => {
                k.set(key::ND_TLL, mac_u64(&m))
            }
            _ => {}
        }
    }

    /// A tag is popped: what is under it (another tag, or none) is not in
    /// the packet's key (it holds the outer tag only), and frames with the
    /// same key may differ there, so no cache keeps this walk (neither an
    /// exact entry nor a megaflow).
    fn popped(&mut self) {
        if let Mode::Live { wc, trace, .. } = &mut *self.mode {
            wc.exact = true;
            trace.overflow = true;
        }
    }

    /// Write `v` into subfield `dst`: the key, and the frame for a header.
    /// A register or metadata write is inlined (a few instructions; the
    /// call cost more), a header's goes out of line.
    #[inline(always)]
    fn write(&mut self, f: &mut FrameBuf, dst: &SubField, v: u64) -> Result<(), Verdict> {
        if !dst.field.header() {
            dst.write(&mut self.key, v);
            return Ok(());
        }
        self.write_header(f, dst, v)
    }

    /// [`Self::write`] into a header field (the frame too).
    #[inline(never)]
    fn write_header(&mut self, f: &mut FrameBuf, dst: &SubField, v: u64) -> Result<(), Verdict> {
        // A partial write keeps the other bits; a VLAN write depends on
        // whether the frame is tagged.
        self.reads(dst.field.loc());
        self.sync(f);
        dst.write(&mut self.key, v);
        match dst.field {
            Field::EthDst | Field::EthSrc => {
                if f.len < 12 {
                    return Err(Verdict::Malformed);
                }
                let m = self.key.get(dst.field.loc()).to_be_bytes();
                let o = if dst.field == Field::EthDst { 0 } else { 6 };
                f.bytes_mut()[o..o + 6].copy_from_slice(&m[2..8]);
            }
            Field::VlanTci | Field::VlanVid => {
                let tci = self.key.get(key::VLAN_TCI) as u16;
                let b = f.bytes();
                let tagged = b.len() >= 16 && vlan::is_tpid(u16::from_be_bytes([b[12], b[13]]));
                let wire = tci & !key::VLAN_CFI;
                match (tci & key::VLAN_CFI != 0, tagged) {
                    (true, true) => f.bytes_mut()[14..16].copy_from_slice(&wire.to_be_bytes()),
                    (true, false) => f.push_vlan(0x8100, wire)?,
                    (false, true) => {
                        self.popped();
                        f.pop_vlan();
                    }
                    (false, false) => {}
                }
            }
            // The parser refuses load/move into other headers.
            _ => {}
        }
        self.layers = None;
        self.dirty = true;
        Ok(())
    }
}
