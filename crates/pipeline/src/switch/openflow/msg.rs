//! One OpenFlow connection's session: each whole message in, its replies
//! out, the table's changes applied.
//!
//! `FLOW_MOD`s are decoded as they come and applied in batches: those
//! that arrive back to back go into the control copy of the table
//! together, and are published as one new version when the peer pauses
//! ([`super::channel::IDLE_FLUSH_MS`]) or before any other message (a
//! barrier, a dump) is answered; a stream that never pauses is published
//! by the switch's once-a-second tick, and a table that fills is published
//! at once. OpenFlow allows this (only a barrier orders messages), and it
//! is what makes N rules then a barrier cost one table copy instead of N,
//! however many connections send them. Each one still gets its own error
//! reply.
//!
//! Memory: what a peer makes the switch hold is bounded. Decoded
//! `FLOW_MOD`s waiting for their batch and replies waiting to be sent are
//! charged to one budget for all connections ([`PENDING_BUDGET`], counted
//! in decoded size) until they are applied or sent: a connection whose
//! charge takes the total past it applies what it holds once it holds more
//! than [`CONN_RESERVE`], so all connections together hold at most the
//! budget plus a reserve each (64 connections: 16 + 8 MiB). A `FLOW_MOD`
//! that a full table would refuse whatever comes before it is answered at
//! once (`OFPFMFC_TABLE_FULL`) instead of waiting for its batch. Multipart replies (flows, groups, meters) are made one message
//! at a time as the channel sends them ([`Session::next_out`]), from the
//! current version of the table at each step: a dump of a million rules
//! to a peer that reads slowly holds one message, not the dump. Every rule
//! and group fits in one reply (checked when it is added), so no length is
//! ever written wrapped.
//!
//! Errors: a request linerate does not support, or whose rule the table
//! refuses, gets an `OFPT_ERROR` and the connection goes on (`ovs-ofctl`
//! waits for the barrier after it). A message that is malformed (lengths
//! that do not add up, a version other than 1.3, no `HELLO` first) gets an
//! `OFPT_ERROR` and ends the connection ([`Session::message`] returns
//! `Err`). Neither ever touches the datapath.

use super::controllers::{Controllers, Ctrl, RoleError};
use super::instr;
use super::oxm;
use super::wire::*;
use crate::switch::actions::{Meter, MeterUnit};
use crate::switch::controller::{PacketOut, PoutTx, PIN_DATA};
use crate::switch::ctl::Shared;
use crate::switch::group::{Bucket, Group, GroupError, GroupKind};
use crate::switch::table::{mono_ns, FlowCursor, FlowEntry, FlowTable, MAX_GROUPS};
use crate::switch::{Action, MatchSpec, Rule};
use core::fmt::Write as _;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

/// Most bytes of a pending `FLOW_MOD` kept for its error reply.
const ERROR_DATA: usize = 256;
/// What all connections of a channel may hold together in decoded
/// `FLOW_MOD`s waiting for their batch and replies waiting to be sent,
/// beyond [`CONN_RESERVE`] each. Applying a batch is cheap (publishing
/// is what copies the table, and that waits for a pause), so the budget
/// can be small: 16 MiB is ~30 000 decoded rules.
pub const PENDING_BUDGET: usize = 16 << 20;
/// What one connection may hold however full the budget is (so a batch is
/// never cut to a single rule by others' charges).
pub const CONN_RESERVE: usize = 128 << 10;
/// What a queued reply costs beyond its bytes (its vector and queue slot).
const OUT_OVERHEAD: usize = 48;
/// The tables a switch has (0..254).
const N_TABLES: u8 = 255;

// FLOW_MOD commands.
const FC_ADD: u8 = 0;
const FC_MODIFY: u8 = 1;
const FC_MODIFY_STRICT: u8 = 2;
const FC_DELETE: u8 = 3;
const FC_DELETE_STRICT: u8 = 4;

/// A decoded `FLOW_MOD`.
enum FlowOp {
    Add(Rule),
    /// Modify (strict: `priority`) the selected rules' actions.
    Modify {
        sel: Select,
        actions: Vec<Action>,
        /// Their outputs' `max_len`s ([`Rule::out_max_len`]).
        lens: Vec<u16>,
    },
    Delete(Select),
}

/// Which rules a modify, delete or flow-stats request means.
struct Select {
    spec: MatchSpec,
    strict: bool,
    cookie: u64,
    cookie_mask: u64,
    out_port: u32,
    out_group: u32,
}

impl Select {
    fn keep(&self, r: &Rule) -> bool {
        (r.cookie ^ self.cookie) & self.cookie_mask == 0
            && (self.out_port == OFPP_ANY
                || r.actions.iter().any(|a| match a {
                    Action::Output(p) => *p == self.out_port,
                    Action::Flood => self.out_port == OFPP_FLOOD,
                    Action::All => self.out_port == OFPP_ALL,
                    Action::InPort => self.out_port == OFPP_IN_PORT,
                    Action::Normal => self.out_port == OFPP_NORMAL,
                    _ => false,
                }))
            && (self.out_group == OFPG_ANY
                || r.actions
                    .iter()
                    .any(|a| matches!(a, Action::Group(g) if *g == self.out_group)))
    }

    fn ids(&self, t: &FlowTable) -> Vec<(u8, crate::switch::RuleId)> {
        let strict = self.strict.then(|| {
            self.spec
                .priority
                .unwrap_or(crate::switch::rule::DEFAULT_PRIORITY)
        });
        t.select(&self.spec.m, strict, self.spec.table, |r| self.keep(r))
    }
}

/// Counters of the channel (all connections), and the memory budget they
/// share.
#[derive(Debug)]
pub struct ChannelStats {
    pub connections: std::sync::atomic::AtomicU64,
    pub messages: std::sync::atomic::AtomicU64,
    pub flow_mods: std::sync::atomic::AtomicU64,
    /// Table versions published for `FLOW_MOD`s (each batch is one).
    pub versions: std::sync::atomic::AtomicU64,
    pub errors: std::sync::atomic::AtomicU64,
    /// `FLOW_MOD`s refused at once because their table was full.
    pub refused_full: std::sync::atomic::AtomicU64,
    /// Bytes charged to the budget now (decoded `FLOW_MOD`s waiting,
    /// replies waiting), and the most it ever was.
    pub held: AtomicUsize,
    pub held_max: AtomicUsize,
    /// The budget ([`PENDING_BUDGET`] unless a test sets it).
    pub budget: AtomicUsize,
    /// Replies that could not be framed (longer than 64 KiB) and were not
    /// sent; what is added is checked so that none can be, so this stays 0.
    pub unsendable: std::sync::atomic::AtomicU64,
}

impl Default for ChannelStats {
    fn default() -> ChannelStats {
        ChannelStats {
            connections: Default::default(),
            messages: Default::default(),
            flow_mods: Default::default(),
            versions: Default::default(),
            errors: Default::default(),
            refused_full: Default::default(),
            held: Default::default(),
            held_max: Default::default(),
            budget: AtomicUsize::new(PENDING_BUDGET),
            unsendable: Default::default(),
        }
    }
}

impl ChannelStats {
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "connections": self.connections.load(Relaxed),
            "messages": self.messages.load(Relaxed),
            "flow_mods": self.flow_mods.load(Relaxed),
            "versions": self.versions.load(Relaxed),
            "errors": self.errors.load(Relaxed),
            "refused_full": self.refused_full.load(Relaxed),
            "held_max_bytes": self.held_max.load(Relaxed),
            "unsendable": self.unsendable.load(Relaxed),
        })
    }
}

/// `push_vlan:0x8100` then `set_field:V->vlan_vid` in a rule that matches
/// untagged frames only is `mod_vlan_vid:V` (what `ovs-ofctl` sends for
/// it): the rule as linerate's own syntax has it.
pub fn canonical(mut r: Rule) -> Rule {
    use crate::switch::key::{VLAN_CFI, VLAN_TCI};
    let untagged = r.m.mask.get(VLAN_TCI) & VLAN_CFI as u64 != 0
        && r.m.value.get(VLAN_TCI) & VLAN_CFI as u64 == 0;
    if !untagged {
        return r;
    }
    let mut out = Vec::with_capacity(r.actions.len());
    let mut i = 0;
    while i < r.actions.len() {
        match (&r.actions[i], r.actions.get(i + 1)) {
            (Action::PushVlan(0x8100), Some(Action::Set(crate::switch::SetField::VlanVid(v)))) => {
                out.push(Action::ModVlanVid(*v));
                i += 2;
            }
            (a, _) => {
                out.push(a.clone());
                i += 1;
            }
        }
    }
    r.actions = out;
    r
}

/// One connection's state.
pub struct Session {
    sh: Arc<Shared>,
    stats: Arc<ChannelStats>,
    dpid: u64,
    hello: bool,
    /// Decoded `FLOW_MOD`s not applied yet: (xid, the request for an
    /// error reply, the change).
    pending: Vec<(u32, Vec<u8>, FlowOp)>,
    /// What they cost decoded (charged to the channel's budget).
    pending_cost: usize,
    /// A delete is among them (then a full table may have room after
    /// them: no `FLOW_MOD` is refused early).
    pending_delete: bool,
    /// Replies to send, in order ([`Session::next_out`]), and what they
    /// cost (charged to the budget until taken).
    out: VecDeque<Vec<u8>>,
    out_cost: usize,
    /// A multipart reply being made as it is sent.
    dump: Option<Dump>,
    /// FLOW_MODs of this connection were applied without publishing.
    unpublished: bool,
    /// The last error's reason (for the switch's log).
    pub last_error: Option<String>,
    /// The channel's controllers, this connection's place among them once
    /// its `HELLO` came, and the datapath's packet-out queue (a session of
    /// a running switch; tests and the fuzz target have none).
    ctrls: Option<Arc<Controllers>>,
    ctrl: Option<Arc<Ctrl>>,
    pouts: Option<PoutTx>,
}

/// Our `HELLO`: version 1.3, with a version bitmap saying only 1.3.
pub fn hello() -> Vec<u8> {
    let mut w = Writer::new(HELLO, 0);
    w.u16(1);
    w.u16(8);
    w.u32(1 << VERSION);
    w.finish()
}

impl Session {
    pub fn new(sh: Arc<Shared>, stats: Arc<ChannelStats>, dpid: u64) -> Session {
        Session {
            sh,
            stats,
            dpid,
            hello: false,
            pending: Vec::new(),
            pending_cost: 0,
            pending_delete: false,
            out: VecDeque::new(),
            out_cost: 0,
            dump: None,
            unpublished: false,
            last_error: None,
            ctrls: None,
            ctrl: None,
            pouts: None,
        }
    }

    /// A session of a running switch's channel: it joins `ctrls` at its
    /// `HELLO` and sends its packet-outs to `pouts`.
    pub fn for_switch(
        sh: Arc<Shared>,
        stats: Arc<ChannelStats>,
        dpid: u64,
        ctrls: Arc<Controllers>,
        pouts: Option<PoutTx>,
    ) -> Session {
        let mut s = Session::new(sh, stats, dpid);
        s.ctrls = Some(ctrls);
        s.pouts = pouts;
        s
    }

    /// The descriptor readable while asynchronous messages wait.
    pub fn wake_fd(&self) -> Option<std::os::fd::RawFd> {
        self.ctrl.as_ref().map(|c| c.wake_fd())
    }

    /// Queue the asynchronous messages waiting (packet-ins) as replies.
    pub fn pull_async(&mut self) {
        let Some(c) = self.ctrl.clone() else { return };
        for m in c.take() {
            self.push_out(m);
        }
    }

    fn is_slave(&self) -> bool {
        self.ctrl.as_ref().is_some_and(|c| c.is_slave())
    }

    fn error(&mut self, xid: u32, e: &OfError, req: &[u8]) {
        self.stats.errors.fetch_add(1, Relaxed);
        self.push_out(error_msg(xid, e, req));
        self.last_error = Some(e.to_string());
    }

    /// The next message to send, in order, or None when every reply so far
    /// has been taken. The channel writes each before it takes the next
    /// (and before it reads more requests): a peer that does not read its
    /// replies holds up only its own connection, and what waits to be sent
    /// stays small.
    pub fn next_out(&mut self) -> Option<Vec<u8>> {
        loop {
            let m = match self.out.pop_front() {
                Some(m) => {
                    let c = m.len() + OUT_OVERHEAD;
                    self.out_cost -= c;
                    self.uncharge(c);
                    m
                }
                None => match self.dump.as_mut()?.next_msg(&self.sh, &self.stats) {
                    Some(m) => m,
                    None => {
                        self.dump = None;
                        return None;
                    }
                },
            };
            if sendable(&m) {
                return Some(m);
            }
            // Never written with a wrong length (see `Writer::finish`).
            self.stats.unsendable.fetch_add(1, Relaxed);
            self.last_error = Some(format!(
                "a reply of {} bytes does not fit in an OpenFlow message: not sent",
                m.len()
            ));
        }
    }

    /// The channel's counters and budget.
    pub fn stats(&self) -> &ChannelStats {
        &self.stats
    }

    /// What the replies waiting (not a dump's messages yet to be made) are
    /// charged.
    pub fn out_cost(&self) -> usize {
        self.out_cost
    }

    /// Is a reply waiting to be sent?
    pub fn has_out(&self) -> bool {
        !self.out.is_empty() || self.dump.is_some()
    }

    /// Queue a reply (charged to the budget until it is taken).
    fn push_out(&mut self, m: Vec<u8>) {
        let c = m.len() + OUT_OVERHEAD;
        self.out_cost += c;
        self.charge(c);
        self.out.push_back(m);
    }

    /// Add `n` bytes to the channel's charge; true if the total is past
    /// the budget.
    fn charge(&self, n: usize) -> bool {
        let now = self.stats.held.fetch_add(n, Relaxed) + n;
        self.stats.held_max.fetch_max(now, Relaxed);
        now > self.stats.budget.load(Relaxed)
    }

    fn uncharge(&self, n: usize) {
        self.stats.held.fetch_sub(n, Relaxed);
    }

    /// Every reply waiting, in order (tests and the fuzz target).
    pub fn take_out(&mut self) -> Vec<Vec<u8>> {
        std::iter::from_fn(|| self.next_out()).collect()
    }

    /// Are decoded `FLOW_MOD`s waiting to be applied?
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// One whole message (`m.len()` is its header's length). Replies go to
    /// [`Self::out`]; `Err` = the connection must end (after sending them).
    pub fn message(&mut self, m: &[u8]) -> core::result::Result<(), String> {
        self.stats.messages.fetch_add(1, Relaxed);
        let Some(h) = Header::parse(m).filter(|h| h.len as usize == m.len()) else {
            let e = OfError::bad_len("message shorter than its header says");
            self.error(0, &e, m);
            return Err(e.why);
        };
        if !self.hello {
            if h.kind != HELLO {
                let e = OfError::new(
                    err::HELLO_FAILED,
                    err::HF_INCOMPATIBLE,
                    format!("expected HELLO first, got message type {}", h.kind),
                );
                self.error(h.xid, &e, m);
                return Err(e.why);
            }
            return self.peer_hello(&h, m);
        }
        if h.version != VERSION {
            let e = OfError::new(
                err::BAD_REQUEST,
                err::BR_BAD_VERSION,
                format!(
                    "version {:#04x}: only OpenFlow 1.3 (0x04) is spoken",
                    h.version
                ),
            );
            self.error(h.xid, &e, m);
            return Err(e.why);
        }
        let body = Reader::new(&m[HEADER..], "message");
        if self.is_slave()
            && matches!(
                h.kind,
                FLOW_MOD | GROUP_MOD | METER_MOD | PACKET_OUT | PORT_MOD | TABLE_MOD
            )
        {
            if let Some(cs) = &self.ctrls {
                cs.stats.is_slave.fetch_add(1, Relaxed);
            }
            let e = OfError::new(
                err::BAD_REQUEST,
                err::BR_IS_SLAVE,
                format!("message type {}: this connection is a slave", h.kind),
            );
            self.error(h.xid, &e, m);
            return Ok(());
        }
        if h.kind == FLOW_MOD {
            self.stats.flow_mods.fetch_add(1, Relaxed);
            match decode_flow_mod(body) {
                Ok(FlowOp::Add(r))
                    if !self.pending_delete && self.sh.ctl.current().refuses_new(&r) =>
                {
                    // Nothing before it in this connection can make room
                    // (no delete waits): refused now, not held for a batch.
                    self.stats.refused_full.fetch_add(1, Relaxed);
                    let e = self.sh.ctl.current().refuse_full(r.table);
                    self.error(h.xid, &table_error(&e), m);
                }
                Ok(op) => {
                    // The request for an error reply: whole up to 256 bytes
                    // (a rule's usual size), else its head (OpenFlow asks
                    // for at least 64 bytes).
                    let req = m[..m.len().min(ERROR_DATA)].to_vec();
                    let cost = op_cost(&req, &op);
                    self.pending_delete |= matches!(op, FlowOp::Delete(_));
                    self.pending.push((h.xid, req, op));
                    self.pending_cost += cost;
                    let over = self.charge(cost);
                    if over && self.pending_cost + self.out_cost > CONN_RESERVE {
                        self.apply(false);
                    }
                }
                Err(e) => {
                    self.error(h.xid, &e, m);
                    if fatal(&e) {
                        return Err(e.why);
                    }
                }
            }
            return Ok(());
        }
        self.flush();
        match self.request(&h, body) {
            Ok(()) => Ok(()),
            Err(e) => {
                self.error(h.xid, &e, m);
                if fatal(&e) {
                    Err(e.why)
                } else {
                    Ok(())
                }
            }
        }
    }

    fn peer_hello(&mut self, h: &Header, m: &[u8]) -> core::result::Result<(), String> {
        // Version negotiation (sect. 6.3.1): the bitmap if there is one,
        // else the header's version (the highest the peer speaks).
        let mut ok = h.version >= VERSION;
        let mut r = Reader::new(&m[HEADER..], "hello");
        while r.len() >= 4 {
            let Ok((t, mut e)) = r.tlv(4, 8) else { break };
            if t == 1 {
                let _ = e.skip(4);
                let mut any = false;
                let mut has = false;
                for i in 0.. {
                    let Ok(word) = e.u32() else { break };
                    any = true;
                    if i == 0 && word & (1 << VERSION) != 0 {
                        has = true;
                    }
                }
                if any {
                    ok = has;
                }
            }
        }
        if !ok {
            let e = OfError::new(
                err::HELLO_FAILED,
                err::HF_INCOMPATIBLE,
                format!(
                    "the peer does not speak OpenFlow 1.3 (its version {:#04x}); use -O OpenFlow13",
                    h.version
                ),
            );
            self.error(h.xid, &e, m);
            return Err(e.why);
        }
        self.hello = true;
        if let Some(cs) = &self.ctrls {
            // Without an eventfd the connection is served without
            // asynchronous messages.
            self.ctrl = cs.join().ok();
        }
        Ok(())
    }

    /// Apply the decoded `FLOW_MOD`s as one table version.
    pub fn flush(&mut self) {
        if self.pending.is_empty() {
            // What this connection applied without publishing (below) is
            // in effect before anything after it is answered.
            if self.unpublished {
                self.unpublished = false;
                if self.sh.ctl.publish_waiting() {
                    self.stats.versions.fetch_add(1, Relaxed);
                }
            }
            return;
        }
        self.apply(true);
    }

    /// Apply the decoded `FLOW_MOD`s to the table as one edit; with
    /// `publish` as a new version, without (a batch cut by the memory
    /// budget or the batch limits while the peer keeps sending) waiting
    /// for the connection's next flush (a barrier, another request, a
    /// pause) or the switch's once-a-second tick: a storm of `FLOW_MOD`s
    /// from many connections costs a table copy per publication, not one
    /// per budget's worth of them (OpenFlow orders nothing before a
    /// barrier).
    fn apply(&mut self, publish: bool) {
        let ops = std::mem::take(&mut self.pending);
        self.pending_delete = false;
        // Given back once applied, not before: a connection waiting for
        // the edit lock still holds its batch (64 of them holding
        // uncharged batches made the budget meaningless).
        let cost = std::mem::take(&mut self.pending_cost);
        let now = mono_ns();
        let (errors, published) = self.sh.ctl.apply(publish, |t| {
            if ops.len() > 1 {
                t.reserve_for(ops.iter().filter_map(|(_, _, o)| match o {
                    FlowOp::Add(r) => Some(r),
                    _ => None,
                }));
            }
            let mut errors = Vec::new();
            for (xid, req, op) in ops {
                let r = match op {
                    FlowOp::Add(rule) => t.add_flow(rule, now).map(|_| ()),
                    FlowOp::Modify { sel, actions, lens } => {
                        let ids = sel.ids(t);
                        t.modify_rules(&ids, &actions, &lens, now).map(|_| ())
                    }
                    FlowOp::Delete(sel) => {
                        let ids = sel.ids(t);
                        t.remove_rules(&ids, crate::switch::table::RR_DELETE);
                        Ok(())
                    }
                };
                if let Err(e) = r {
                    errors.push((xid, req, table_error(&e)));
                }
            }
            errors
        });
        self.uncharge(cost);
        self.unpublished = !publish;
        if published {
            self.stats.versions.fetch_add(1, Relaxed);
        }
        let errors: Vec<(u32, Vec<u8>, OfError)> = errors;
        for (xid, req, e) in errors {
            self.error(xid, &e, &req);
        }
        self.report_removed();
    }

    /// The rules an edit of this connection removed, as `FLOW_REMOVED`s
    /// to the controllers (this connection's before anything it sends
    /// after the edit, a barrier reply included).
    fn report_removed(&mut self) {
        if let Some(cs) = &self.ctrls {
            cs.flow_removed(&self.sh.ctl);
            self.pull_async();
        }
    }

    /// Every request but `HELLO` and `FLOW_MOD`.
    fn request(&mut self, h: &Header, mut b: Reader) -> Result<()> {
        let xid = h.xid;
        match h.kind {
            HELLO => {}
            ECHO_REQUEST => {
                let mut w = Writer::new(ECHO_REPLY, xid);
                w.bytes(b.rest());
                self.push_out(w.finish());
            }
            ECHO_REPLY => {}
            SET_CONFIG => {
                let flags = b.u16()?;
                let miss = b.u16()?;
                if let Some(c) = &self.ctrl {
                    c.config_flags.store(flags, Relaxed);
                    c.miss_send_len.store(miss, Relaxed);
                }
            }
            SET_ASYNC => {
                let mut m = [[0u32; 3]; 2];
                for j in 0..3 {
                    for row in m.iter_mut() {
                        row[j] = b.u32()?;
                    }
                }
                if let Some(c) = &self.ctrl {
                    c.set_masks(m);
                }
            }
            PACKET_OUT => self.packet_out(b)?,
            FEATURES_REQUEST => {
                let mut w = Writer::new(FEATURES_REPLY, xid);
                w.u64(self.dpid);
                w.u32(0); // n_buffers
                w.u8(N_TABLES);
                w.u8(0); // auxiliary_id
                w.zeros(2);
                w.u32(0x1 | 0x2 | 0x4 | 0x8); // flow, table, port, group stats
                w.u32(0);
                self.push_out(w.finish());
            }
            GET_CONFIG_REQUEST => {
                let mut w = Writer::new(GET_CONFIG_REPLY, xid);
                match &self.ctrl {
                    Some(c) => {
                        w.u16(c.config_flags.load(Relaxed));
                        w.u16(c.miss_send_len.load(Relaxed));
                    }
                    None => {
                        w.u16(0);
                        w.u16(super::controllers::DEFAULT_MISS_SEND_LEN);
                    }
                }
                self.push_out(w.finish());
            }
            BARRIER_REQUEST => {
                // Everything before it is applied (flush above).
                self.push_out(Writer::new(BARRIER_REPLY, xid).finish());
            }
            ROLE_REQUEST => {
                let role = b.u32()?;
                b.skip(4)?;
                let gen = b.u64()?;
                let (role, gen) = match (&self.ctrls, &self.ctrl) {
                    (Some(cs), Some(c)) => cs.request_role(c, role, gen).map_err(|e| match e {
                        RoleError::Stale => OfError::new(
                            err::ROLE_REQUEST_FAILED,
                            err::RR_STALE,
                            format!("generation id {gen} is older than one seen before"),
                        ),
                        RoleError::BadRole => OfError::new(
                            err::ROLE_REQUEST_FAILED,
                            err::RR_BAD_ROLE,
                            format!("role {role} is not one of OpenFlow 1.3's"),
                        ),
                    })?,
                    // A session without a switch: every role is granted.
                    _ => (if role == 0 { 1 } else { role }, gen),
                };
                let mut w = Writer::new(ROLE_REPLY, xid);
                w.u32(role);
                w.zeros(4);
                w.u64(gen);
                self.push_out(w.finish());
            }
            GET_ASYNC_REQUEST => {
                let m = match &self.ctrl {
                    Some(c) => c.masks(),
                    None => super::controllers::DEFAULT_ASYNC,
                };
                let mut w = Writer::new(GET_ASYNC_REPLY, xid);
                for j in 0..3 {
                    for row in &m {
                        w.u32(row[j]);
                    }
                }
                self.push_out(w.finish());
            }
            GROUP_MOD => self.group_mod(b)?,
            METER_MOD => self.meter_mod(b)?,
            MULTIPART_REQUEST => self.multipart(xid, b)?,
            PORT_MOD | TABLE_MOD => {
                return Err(OfError::new(
                    err::BAD_REQUEST,
                    err::BR_BAD_TYPE,
                    format!(
                        "message type {} (port-mod, table-mod) is not supported",
                        h.kind
                    ),
                ))
            }
            EXPERIMENTER => {
                return Err(OfError::new(
                    err::BAD_REQUEST,
                    err::BR_BAD_EXPERIMENTER,
                    "experimenter messages are not supported",
                ))
            }
            t => {
                return Err(OfError::new(
                    err::BAD_REQUEST,
                    err::BR_BAD_TYPE,
                    format!("message type {t} is not supported"),
                ))
            }
        }
        Ok(())
    }

    /// `PACKET_OUT` (no buffers: the frame is in the message): its
    /// actions decoded as a rule's (`output:TABLE` is `resubmit(,0)`: the
    /// pipeline from table 0, with the packet-out's `in_port`), then
    /// queued for the datapath.
    fn packet_out(&mut self, mut b: Reader) -> Result<()> {
        let buffer_id = b.u32()?;
        let in_port = b.u32()?;
        let alen = b.u16()? as usize;
        b.skip(6)?;
        let acts = Reader::new(b.bytes(alen)?, "packet-out actions");
        let data = b.rest();
        if buffer_id != NO_BUFFER {
            return Err(OfError::new(
                err::BAD_REQUEST,
                err::BR_BUFFER_UNKNOWN,
                format!("buffer {buffer_id}: this switch buffers no packets (n_buffers 0)"),
            ));
        }
        if in_port > OFPP_MAX && in_port != OFPP_CONTROLLER && in_port != OFPP_LOCAL {
            return Err(OfError::new(
                err::BAD_REQUEST,
                err::BR_BAD_PORT,
                format!("packet-out in_port {in_port:#x}"),
            ));
        }
        if data.len() < 14 || data.len() > PIN_DATA {
            return Err(OfError::new(
                err::BAD_REQUEST,
                err::BR_BAD_PACKET,
                format!(
                    "packet-out frame of {} bytes (14 to {PIN_DATA})",
                    data.len()
                ),
            ));
        }
        let mut text = String::new();
        instr::decode_actions_out(acts, &mut text)?;
        // The actions' prerequisites (a set_field of an IP address needs
        // IP) are checked against the packet, as Open vSwitch does.
        let rule = Rule::parse(&format!(
            "{}actions={}",
            packet_match(data),
            if text.is_empty() { "drop" } else { &text }
        ))
        .map_err(|e| OfError::new(err::BAD_ACTION, err::BA_BAD_ARGUMENT, e.to_string()))?;
        let Some(q) = &self.pouts else {
            return Err(OfError::new(
                err::BAD_REQUEST,
                err::BR_BAD_TYPE,
                "packet-out: no datapath behind this session",
            ));
        };
        let po = PacketOut {
            in_port,
            actions: rule.actions,
            frame: data.to_vec(),
        };
        if !q.send(po) {
            if let Some(cs) = &self.ctrls {
                cs.stats.packet_outs_queue_full.fetch_add(1, Relaxed);
            }
        }
        Ok(())
    }

    fn group_mod(&mut self, mut b: Reader) -> Result<()> {
        let cmd = b.u16()?;
        let kind = b.u8()?;
        b.skip(1)?;
        let id = b.u32()?;
        let bad = |m: String| OfError::new(err::GROUP_MOD_FAILED, err::GM_BAD_BUCKET, m);
        let mut buckets = Vec::new();
        while !b.is_empty() {
            // A bucket: its length (at least its 16-byte head), weight,
            // watch port and group, then its actions.
            let len = b.u16()? as usize;
            if len < 16 {
                return Err(bad(format!("bucket length {len}")));
            }
            let mut k = Reader::new(b.bytes(len - 2)?, "bucket");
            let weight = k.u16()?;
            let watch_port = k.u32()?;
            let watch_group = k.u32()?;
            k.skip(4)?;
            let mut acts = String::new();
            instr::decode_actions(k, &mut acts)?;
            let actions = crate::switch::rule::parse_bucket_actions(&acts).map_err(bad)?;
            buckets.push(Bucket {
                weight,
                watch_port,
                watch_group,
                actions,
            });
        }
        let ctl = &self.sh.ctl;
        match cmd {
            0 | 1 => {
                let kind = GroupKind::from_code(kind).ok_or_else(|| {
                    OfError::new(
                        err::GROUP_MOD_FAILED,
                        err::GM_BAD_TYPE,
                        format!("group type {kind}: the types are all, select, indirect and ff (0 to 3)"),
                    )
                })?;
                if id > 0xffff_ff00 {
                    return Err(OfError::new(
                        err::GROUP_MOD_FAILED,
                        err::GM_INVALID_GROUP,
                        format!("group id {id:#x} is reserved"),
                    ));
                }
                let exists = ctl.read(|t| t.group(id).is_some());
                add_or_modify(
                    cmd,
                    exists,
                    "group",
                    id,
                    err::GROUP_MOD_FAILED,
                    err::GM_GROUP_EXISTS,
                    err::GM_UNKNOWN_GROUP,
                )?;
                let g = Group::new(id, kind, buckets).map_err(group_error)?;
                ctl.try_edit(|t| t.try_add_group(g)).map_err(group_error)?;
            }
            2 => {
                let which = (id != OFPG_ALL).then_some(id);
                ctl.edit(|t| t.del_groups(which));
                self.report_removed();
            }
            c => {
                return Err(OfError::new(
                    err::GROUP_MOD_FAILED,
                    err::GM_BAD_COMMAND,
                    format!("group command {c}"),
                ))
            }
        }
        Ok(())
    }

    fn meter_mod(&mut self, mut b: Reader) -> Result<()> {
        let cmd = b.u16()?;
        let flags = b.u16()?;
        let id = b.u32()?;
        let ctl = &self.sh.ctl;
        let failed = |code: u16, why: String| OfError::new(err::METER_MOD_FAILED, code, why);
        if cmd == 2 {
            let which = (id != OFPM_ALL).then_some(id);
            ctl.edit(|t| t.del_meters(which));
            self.report_removed();
            return Ok(());
        }
        if cmd > 2 {
            return Err(failed(err::MM_BAD_COMMAND, format!("meter command {cmd}")));
        }
        let unit = match flags & 3 {
            1 => MeterUnit::Kbps,
            2 => MeterUnit::Pktps,
            _ => {
                return Err(failed(
                    err::MM_BAD_FLAGS,
                    format!("meter flags {flags:#x}: one of kbps and pktps"),
                ))
            }
        };
        let (t, mut band) = b.tlv(16, 1)?;
        if t != 1 || !b.is_empty() {
            return Err(failed(
                err::MM_BAD_BAND,
                "exactly one band, of type drop, is supported".into(),
            ));
        }
        band.skip(4)?;
        let rate = band.u32()? as u64;
        let burst = band.u32()? as u64;
        if rate == 0 {
            return Err(failed(err::MM_BAD_RATE, "meter rate 0".into()));
        }
        let exists = ctl.read(|t| t.meter(id).is_some());
        add_or_modify(
            cmd,
            exists,
            "meter",
            id,
            err::METER_MOD_FAILED,
            err::MM_METER_EXISTS,
            err::MM_UNKNOWN_METER,
        )?;
        let m = Meter::new(id, unit, rate, 0).with_flags(flags & 4 != 0, burst, flags & 8 != 0);
        ctl.try_edit(|t| t.add_meter(m))
            .map_err(|e| failed(err::MM_OUT_OF_METERS, e))?;
        Ok(())
    }

    fn multipart(&mut self, xid: u32, mut b: Reader) -> Result<()> {
        let mp = b.u16()?;
        let _flags = b.u16()?;
        b.skip(4)?;
        let sh = self.sh.clone();
        let mut parts = Parts::new(mp, xid);
        match mp {
            MP_DESC => {
                let mut e = Vec::with_capacity(1056);
                let s = |e: &mut Vec<u8>, s: &str, n: usize| {
                    let b = s.as_bytes();
                    let k = b.len().min(n - 1);
                    e.extend_from_slice(&b[..k]);
                    e.resize(e.len() + n - k, 0);
                };
                s(&mut e, "linerate", 256);
                s(&mut e, "linerate switch (user-space datapath)", 256);
                s(&mut e, env!("CARGO_PKG_VERSION"), 256);
                s(&mut e, "None", 32);
                s(&mut e, "linerate switch", 256);
                parts.push(&e);
            }
            MP_FLOW => {
                let sel = decode_select(&mut b, false)?;
                let cur = FlowCursor::new(Some(&sel.spec));
                self.sh.ctl.sync_counters();
                self.start_dump(
                    mp,
                    xid,
                    DumpSrc::Flows {
                        sel: Box::new(sel),
                        cur: Box::new(cur),
                        now: mono_ns(),
                    },
                );
                return Ok(());
            }
            MP_AGGREGATE => {
                let sel = decode_select(&mut b, false)?;
                sh.ctl.sync_counters();
                let mut cur = FlowCursor::new(Some(&sel.spec));
                let t: Arc<FlowTable> = Arc::clone(&sh.ctl.current());
                let (mut p, mut by, mut n) = (0u64, 0u64, 0u32);
                while let Some(e) = cur.next(&t) {
                    if sel.keep(&e.rule) {
                        p += e.stats.packets();
                        by += e.stats.bytes();
                        n += 1;
                    }
                }
                let mut w = Writer { b: Vec::new() };
                w.u64(p);
                w.u64(by);
                w.u32(n);
                w.zeros(4);
                parts.push(&w.b);
            }
            MP_TABLE => {
                let t = sh.ctl.current();
                for i in 0..N_TABLES {
                    let mut w = Writer { b: Vec::new() };
                    w.u8(i);
                    w.zeros(3);
                    match t.table(i) {
                        Some(tb) => {
                            w.u32(tb.classifier().len() as u32);
                            w.u64(tb.stats.lookups.load(Relaxed));
                            w.u64(tb.stats.matches.load(Relaxed));
                        }
                        None => w.zeros(20),
                    }
                    parts.push(&w.b);
                }
            }
            MP_PORT_STATS => {
                let want = b.u32()?;
                // The ports, then the controller port (packet-ins: tx).
                let ctrl = (OFPP_CONTROLLER, String::new(), sh.controller.clone());
                for (n, _, c) in sh.ports.iter().chain(std::iter::once(&ctrl)) {
                    if want != OFPP_ANY && want != *n {
                        continue;
                    }
                    let mut w = Writer { b: Vec::new() };
                    w.u32(*n);
                    w.zeros(4);
                    for v in [
                        c.rx_packets.load(Relaxed),
                        c.tx_packets.load(Relaxed),
                        c.rx_bytes.load(Relaxed),
                        c.tx_bytes.load(Relaxed),
                        0,
                        c.tx_dropped.load(Relaxed),
                    ] {
                        w.u64(v);
                    }
                    // Errors, frame/overrun/CRC errors, collisions: not
                    // counted (all ones = "not available", sect. 7.3.5.6).
                    for _ in 0..6 {
                        w.u64(u64::MAX);
                    }
                    w.u32(0);
                    w.u32(0);
                    parts.push(&w.b);
                }
            }
            MP_PORT_DESC => {
                for (i, (n, uri, _)) in sh.ports.iter().enumerate() {
                    parts.push(&port_desc(*n, uri, sh.links.is_up(i)));
                }
            }
            MP_GROUP_DESC | MP_GROUP => {
                let want = if mp == MP_GROUP { b.u32()? } else { OFPG_ALL };
                let t = sh.ctl.current();
                let ids: Vec<u32> = t
                    .group_ids()
                    .into_iter()
                    .filter(|&g| want == OFPG_ALL || want == g)
                    .collect();
                // Group statistics from one pass over the rules.
                let refs = (mp == MP_GROUP).then(|| group_refs(&t, &ids));
                drop(t);
                self.start_dump(
                    mp,
                    xid,
                    DumpSrc::Groups {
                        ids: ids.into_iter(),
                        refs,
                    },
                );
                return Ok(());
            }
            MP_GROUP_FEATURES => {
                let mut w = Writer { b: Vec::new() };
                w.u32(0xf); // types: all, select, indirect, ff
                            // Capabilities: select weight and liveness, chaining (not
                            // its checks: deleting a group that others name is allowed,
                            // their buckets then do nothing).
                w.u32(0x7);
                for _ in 0..4 {
                    w.u32(MAX_GROUPS as u32); // max groups of each type
                }
                // Actions of each type: output, set/dec_mpls_ttl,
                // push/pop_vlan, push/pop_mpls, group, set_nw_ttl,
                // dec_nw_ttl, set_field.
                let acts = [0, 15, 16, 17, 18, 19, 20, 22, 23, 24, 25]
                    .iter()
                    .fold(0u32, |m, b| m | 1 << b);
                for _ in 0..4 {
                    w.u32(acts);
                }
                parts.push(&w.b);
            }
            MP_METER_CONFIG => {
                let want = b.u32()?;
                let ids: Vec<u32> = sh
                    .ctl
                    .current()
                    .meter_ids()
                    .into_iter()
                    .filter(|&m| want == OFPM_ALL || want == m)
                    .collect();
                self.start_dump(
                    mp,
                    xid,
                    DumpSrc::Meters {
                        ids: ids.into_iter(),
                    },
                );
                return Ok(());
            }
            MP_METER_FEATURES => {
                let mut w = Writer { b: Vec::new() };
                w.u32(u32::MAX); // max meters
                w.u32(1 << 1); // band types: drop
                w.u32(1 | 2 | 4); // kbps, pktps, burst
                w.u8(1); // max bands
                w.u8(0);
                w.zeros(2);
                parts.push(&w.b);
            }
            MP_TABLE_FEATURES => {
                if !b.is_empty() {
                    return Err(OfError::new(
                        13,
                        5,
                        "setting table features is not supported",
                    ));
                }
                let t = sh.ctl.current();
                for i in 0..N_TABLES {
                    let max = t.limits().table(i).flow_limit.min(t.limits().max_flows);
                    parts.push(&table_features(i, max));
                }
            }
            m => {
                return Err(OfError::new(
                    err::BAD_REQUEST,
                    err::BR_BAD_MULTIPART,
                    format!("multipart type {m} is not supported"),
                ))
            }
        }
        for m in parts.finish() {
            self.push_out(m);
        }
        Ok(())
    }

    /// Begin a multipart reply made one message at a time
    /// ([`Self::next_out`]); the replies queued before it go first.
    fn start_dump(&mut self, mp: u16, xid: u32, src: DumpSrc) {
        self.dump = Some(Dump {
            mp,
            xid,
            src,
            carry: None,
            done: false,
        });
    }
}

impl Drop for Session {
    /// What the connection held is given back to the channel's budget.
    fn drop(&mut self) {
        self.uncharge(self.pending_cost + self.out_cost);
        if let (Some(cs), Some(c)) = (&self.ctrls, &self.ctrl) {
            cs.leave(c);
        }
    }
}

/// What a streamed multipart reply is made of.
enum DumpSrc {
    /// Flow statistics: the rules the selection keeps, walked by a cursor.
    Flows {
        sel: Box<Select>,
        cur: Box<FlowCursor>,
        now: u64,
    },
    /// Group descriptions, or statistics (with the number of rules naming
    /// each).
    Groups {
        ids: std::vec::IntoIter<u32>,
        refs: Option<HashMap<u32, u32>>,
    },
    /// Meter configurations.
    Meters { ids: std::vec::IntoIter<u32> },
}

/// A multipart reply being sent: its entries made one at a time, each
/// from the table's current version (see the module doc).
struct Dump {
    mp: u16,
    xid: u32,
    src: DumpSrc,
    /// The entry that did not fit in the last message.
    carry: Option<Vec<u8>>,
    /// The last message (without `MORE`) was made.
    done: bool,
}

impl Dump {
    fn next_entry(&mut self, sh: &Shared) -> Option<Vec<u8>> {
        match &mut self.src {
            DumpSrc::Flows { sel, cur, now } => loop {
                let e = cur.next(&sh.ctl.current())?;
                if sel.keep(&e.rule) {
                    return Some(flow_stats(&e, *now));
                }
            },
            DumpSrc::Groups { ids, refs } => loop {
                let id = ids.next()?;
                let t = sh.ctl.current();
                let Some(g) = t.group(id) else { continue };
                return Some(match refs {
                    Some(r) => group_stats(g, r.get(&id).copied().unwrap_or_default()),
                    None => instr::group_desc(g),
                });
            },
            DumpSrc::Meters { ids } => loop {
                let id = ids.next()?;
                if let Some(m) = sh.ctl.current().meter(id) {
                    return Some(meter_config(m));
                }
            },
        }
    }

    /// The next message of the reply, None after the last.
    fn next_msg(&mut self, sh: &Shared, stats: &ChannelStats) -> Option<Vec<u8>> {
        if self.done {
            return None;
        }
        let mut w = Writer::multipart(self.mp, 0, self.xid);
        let empty = w.len();
        let mut next = self.carry.take();
        loop {
            let Some(e) = next.take().or_else(|| self.next_entry(sh)) else {
                self.done = true;
                return Some(w.finish());
            };
            if w.len() + e.len() <= MAX_LEN {
                w.bytes(&e);
            } else if w.len() == empty {
                // One entry too long for any message: the checks when rules
                // and groups are added keep this from happening.
                stats.unsendable.fetch_add(1, Relaxed);
            } else {
                self.carry = Some(e);
                w.put_u16(10, MPF_MORE);
                return Some(w.finish());
            }
        }
    }
}

/// A refused group's OpenFlow error.
fn group_error(e: GroupError) -> OfError {
    let code = match &e {
        GroupError::Bucket(_) => err::GM_BAD_BUCKET,
        GroupError::Weight(_) => err::GM_WEIGHT_UNSUPPORTED,
        GroupError::Watch(_) => err::GM_BAD_WATCH,
        GroupError::Loop(_) => err::GM_LOOP,
        GroupError::Chaining(_) => err::GM_CHAINING_UNSUPPORTED,
        GroupError::OutOfBuckets(_) => err::GM_OUT_OF_BUCKETS,
        GroupError::OutOfGroups(_) => err::GM_OUT_OF_GROUPS,
    };
    OfError::new(err::GROUP_MOD_FAILED, code, e.to_string())
}

/// The references of each group in `ids` (the rules that name it): one
/// pass over the rules.
fn group_refs(t: &FlowTable, ids: &[u32]) -> HashMap<u32, u32> {
    let mut m: HashMap<u32, u32> = ids.iter().map(|&g| (g, 0)).collect();
    let mut cur = FlowCursor::new(None);
    while let Some(e) = cur.next(t) {
        for a in &e.rule.actions {
            if let Action::Group(g) = a {
                if let Some(x) = m.get_mut(g) {
                    *x += 1;
                }
            }
        }
    }
    m
}

/// One meter's configuration entry.
fn meter_config(m: &Meter) -> Vec<u8> {
    let mut w = Writer { b: Vec::new() };
    w.u16(24);
    // The flags and burst size as the controller set them (OFPMF_BURST 4,
    // OFPMF_STATS 8), not the bucket in use.
    let unit = match m.unit {
        MeterUnit::Kbps => 1,
        MeterUnit::Pktps => 2,
    };
    w.u16(unit | if m.asked.burst { 4 } else { 0 } | if m.asked.stats { 8 } else { 0 });
    w.u32(m.id);
    w.u16(1);
    w.u16(16);
    w.u32(m.rate.min(u32::MAX as u64) as u32);
    w.u32(m.asked.burst_size.min(u32::MAX as u64) as u32);
    w.zeros(4);
    w.b
}

/// What a decoded `FLOW_MOD` costs while it waits for its batch: the
/// entry, the request kept for an error reply, and the rule's heap.
fn op_cost(req: &[u8], op: &FlowOp) -> usize {
    let heap = match op {
        FlowOp::Add(r) => r.heap_bytes(),
        FlowOp::Modify { actions, .. } => Rule::actions_heap_bytes(actions),
        FlowOp::Delete(_) => 0,
    };
    std::mem::size_of::<(u32, Vec<u8>, FlowOp)>() + req.len() + heap
}

/// An add (command 0) of something that exists, or a modify (1) of
/// something that does not, as the OpenFlow error of its kind.
fn add_or_modify(
    cmd: u16,
    exists: bool,
    what: &str,
    id: u32,
    kind: u16,
    exists_code: u16,
    unknown_code: u16,
) -> Result<()> {
    match (cmd, exists) {
        (0, true) => Err(OfError::new(
            kind,
            exists_code,
            format!("{what} {id} exists"),
        )),
        (1, false) => Err(OfError::new(
            kind,
            unknown_code,
            format!("{what} {id} does not exist"),
        )),
        _ => Ok(()),
    }
}

/// A multipart reply cut into messages of at most 64 KiB.
struct Parts {
    mp: u16,
    xid: u32,
    done: Vec<Vec<u8>>,
    cur: Writer,
}

impl Parts {
    fn new(mp: u16, xid: u32) -> Parts {
        Parts {
            mp,
            xid,
            done: Vec::new(),
            cur: Writer::multipart(mp, 0, xid),
        }
    }
    fn push(&mut self, entry: &[u8]) {
        if self.cur.len() + entry.len() > MAX_LEN && self.cur.len() > 16 {
            let mut w = std::mem::replace(&mut self.cur, Writer::multipart(self.mp, 0, self.xid));
            w.put_u16(10, MPF_MORE);
            self.done.push(w.finish());
        }
        self.cur.bytes(entry);
    }
    fn finish(mut self) -> Vec<Vec<u8>> {
        self.done.push(self.cur.finish());
        self.done
    }
}

/// An error from the table (a rule it refuses) as an OpenFlow error.
fn table_error(e: &str) -> OfError {
    let (kind, code) = if e.contains(" is full") {
        (err::FLOW_MOD_FAILED, err::FM_TABLE_FULL)
    } else if e.contains("group") {
        (err::BAD_ACTION, err::BA_BAD_OUT_GROUP)
    } else if e.contains("meter") {
        (err::METER_MOD_FAILED, err::MM_UNKNOWN_METER)
    } else if e.contains("goto_table") {
        (err::BAD_INSTRUCTION, err::BI_BAD_TABLE_ID)
    } else if e.contains("table") {
        (err::FLOW_MOD_FAILED, err::FM_BAD_TABLE_ID)
    } else {
        (err::FLOW_MOD_FAILED, err::FM_UNKNOWN)
    };
    OfError::new(kind, code, e)
}

/// Does this error end the connection (the message's structure is
/// broken, so what follows it cannot be trusted either)?
fn fatal(e: &OfError) -> bool {
    matches!(
        (e.kind, e.code),
        (err::BAD_REQUEST, err::BR_BAD_LEN | err::BR_BAD_VERSION)
            | (err::BAD_MATCH, err::BM_BAD_LEN)
            | (err::BAD_ACTION, err::BA_BAD_LEN)
            | (err::BAD_INSTRUCTION, err::BI_BAD_LEN)
    )
}

/// The selection of a flow-stats request or a modify/delete `FLOW_MOD`
/// (after the fields each has of its own): table, out_port, out_group,
/// cookie, cookie mask, match. `priority` comes from the `FLOW_MOD`.
fn decode_select(b: &mut Reader, strict: bool) -> Result<Select> {
    let table = b.u8()?;
    b.skip(3)?;
    let out_port = b.u32()?;
    let out_group = b.u32()?;
    b.skip(4)?;
    let cookie = b.u64()?;
    let cookie_mask = b.u64()?;
    let spec = decode_spec(b, table, None)?;
    Ok(Select {
        spec,
        strict,
        cookie,
        cookie_mask,
        out_port,
        out_group,
    })
}

/// A match (and table, priority) as a [`MatchSpec`].
fn decode_spec(b: &mut Reader, table: u8, priority: Option<u16>) -> Result<MatchSpec> {
    let mut s = String::new();
    if table != OFPTT_ALL {
        let _ = write!(s, "table={table}");
    }
    if let Some(p) = priority {
        if !s.is_empty() {
            s.push(',');
        }
        let _ = write!(s, "priority={p}");
    }
    oxm::decode_match(b, &mut s)?;
    MatchSpec::parse(&s).map_err(|e| OfError::new(err::BAD_MATCH, err::BM_BAD_PREREQ, e.0))
}

/// A `FLOW_MOD`'s body (after the header).
fn decode_flow_mod(mut b: Reader) -> Result<FlowOp> {
    let cookie = b.u64()?;
    let cookie_mask = b.u64()?;
    let table = b.u8()?;
    let cmd = b.u8()?;
    let idle = b.u16()?;
    let hard = b.u16()?;
    let priority = b.u16()?;
    let buffer = b.u32()?;
    let out_port = b.u32()?;
    let out_group = b.u32()?;
    let flags = b.u16()?;
    b.skip(2)?;
    if buffer != NO_BUFFER && cmd <= FC_MODIFY_STRICT {
        return Err(OfError::new(
            err::BAD_REQUEST,
            err::BR_BUFFER_UNKNOWN,
            format!("buffer {buffer}: linerate buffers no packets"),
        ));
    }
    match cmd {
        FC_ADD => {
            if table == OFPTT_ALL {
                return Err(OfError::new(
                    err::FLOW_MOD_FAILED,
                    err::FM_BAD_TABLE_ID,
                    "add to table 255 (all tables)",
                ));
            }
            // OFPFF_SEND_FLOW_REM is kept; check_overlap, reset_counts
            // and the no-counts flags are refused rather than ignored.
            if flags & !OFPFF_SEND_FLOW_REM != 0 {
                return Err(OfError::new(
                    err::FLOW_MOD_FAILED,
                    err::FM_BAD_FLAGS,
                    format!(
                        "flow_mod flags {flags:#x}: linerate supports send_flow_rem (0x1) only"
                    ),
                ));
            }
            let mut s = rule_head(table, priority, cookie, idle, hard, flags);
            oxm::decode_match(&mut b, &mut s)?;
            s.push(',');
            let lens = instr::decode_instructions(b, &mut s)?;
            Rule::parse(&s)
                .map(|r| FlowOp::Add(decoded(r, lens)))
                .map_err(|e| {
                    // The match alone decides which kind of error it is.
                    let match_ok = s
                        .split_once(",actions=")
                        .is_some_and(|(m, _)| MatchSpec::parse(m).is_ok());
                    if match_ok {
                        OfError::new(err::BAD_ACTION, err::BA_BAD_ARGUMENT, e.0)
                    } else {
                        OfError::new(err::BAD_MATCH, err::BM_BAD_PREREQ, e.0)
                    }
                })
        }
        FC_MODIFY | FC_MODIFY_STRICT | FC_DELETE | FC_DELETE_STRICT => {
            let strict = cmd == FC_MODIFY_STRICT || cmd == FC_DELETE_STRICT;
            let t = table;
            let mut spec = decode_spec(&mut b, t, strict.then_some(priority))?;
            if !strict {
                spec.priority = None;
            }
            if cmd >= FC_DELETE {
                return Ok(FlowOp::Delete(Select {
                    spec,
                    strict,
                    cookie,
                    cookie_mask,
                    out_port,
                    out_group,
                }));
            }
            // Actions are parsed against the request's match (their
            // prerequisites).
            let mut s = format!("table={},{}", if t == OFPTT_ALL { 0 } else { t }, spec.m);
            if s.ends_with(',') {
                s.pop();
            }
            s.push(',');
            let lens = instr::decode_instructions(b, &mut s)?;
            let r = Rule::parse(&s)
                .map_err(|e| OfError::new(err::BAD_ACTION, err::BA_BAD_ARGUMENT, e.0))?;
            let r = decoded(r, lens);
            Ok(FlowOp::Modify {
                sel: Select {
                    spec,
                    strict,
                    cookie,
                    cookie_mask,
                    out_port: OFPP_ANY,
                    out_group: OFPG_ANY,
                },
                actions: r.actions,
                lens: r.out_max_len,
            })
        }
        c => Err(OfError::new(
            err::FLOW_MOD_FAILED,
            err::FM_BAD_COMMAND,
            format!("flow_mod command {c}"),
        )),
    }
}

/// What a packet is, as a match for its actions' prerequisites: its
/// EtherType, IP protocol and whether it is tagged ("" for none of them),
/// followed by a comma.
fn packet_match(frame: &[u8]) -> String {
    use crate::switch::key::{self, Key};
    let k = Key::extract(frame, 0);
    let mut s = String::new();
    let dl = k.get(key::DL_TYPE);
    if dl != 0 {
        let _ = write!(s, "dl_type={dl:#06x},");
    }
    if dl == 0x0800 || dl == 0x86dd {
        let _ = write!(s, "nw_proto={},", k.get(key::NW_PROTO));
    }
    if k.get(key::VLAN_TCI) & key::VLAN_CFI as u64 != 0 {
        s.push_str("vlan_tci=0x1000/0x1000,");
    }
    s
}

/// `OFPFF_SEND_FLOW_REM`: the one `FLOW_MOD` flag a rule keeps.
const OFPFF_SEND_FLOW_REM: u16 = 1;

/// The rule syntax of a `FLOW_MOD`'s or a flow-stats entry's head (its
/// match and instructions follow).
fn rule_head(table: u8, priority: u16, cookie: u64, idle: u16, hard: u16, flags: u16) -> String {
    format!(
        "table={table},priority={priority},cookie={cookie:#x},idle_timeout={idle},hard_timeout={hard}{}",
        if flags & OFPFF_SEND_FLOW_REM != 0 { ",send_flow_rem" } else { "" }
    )
}

/// A rule decoded from the wire, as linerate keeps it: canonical, with
/// its outputs' `max_len`s (what the text syntax cannot say).
fn decoded(r: Rule, lens: Vec<u16>) -> Rule {
    let mut r = canonical(r);
    r.set_out_max_len(lens);
    r
}

/// A rule's `ofp_flow_mod_flags`.
fn flow_flags(r: &Rule) -> u16 {
    if r.send_flow_rem {
        OFPFF_SEND_FLOW_REM
    } else {
        0
    }
}

/// One `ofp_flow_stats` entry.
fn flow_stats(e: &FlowEntry, now: u64) -> Vec<u8> {
    let r = &e.rule;
    let mut w = Writer {
        b: Vec::with_capacity(128),
    };
    let d = now.saturating_sub(e.created_ns);
    w.u16(0);
    w.u8(r.table);
    w.u8(0);
    w.u32((d / 1_000_000_000) as u32);
    w.u32((d % 1_000_000_000) as u32);
    w.u16(r.priority);
    w.u16(r.idle_timeout);
    w.u16(r.hard_timeout);
    w.u16(flow_flags(r));
    w.zeros(4);
    w.u64(r.cookie);
    w.u64(e.stats.packets());
    w.u64(e.stats.bytes());
    oxm::encode_match(&r.m, &mut w);
    instr::encode_instructions(r, &mut w);
    let n = w.len() as u16;
    w.put_u16(0, n);
    w.b
}

/// The rules of a flow-stats reply's body (its parts joined): (rule,
/// packets, bytes) per entry, decoded as a `FLOW_MOD` is.
pub fn decode_flow_stats(body: &[u8]) -> Result<Vec<(Rule, u64, u64)>> {
    let mut r = Reader::new(body, "flow stats");
    let mut v = Vec::new();
    while !r.is_empty() {
        let mut peek = r;
        let len = peek.u16()? as usize;
        if len < 56 {
            return Err(OfError::bad_len(format!("flow stats entry of {len} bytes")));
        }
        let mut e = Reader::new(r.bytes(len)?, "flow stats entry");
        e.skip(2)?;
        let table = e.u8()?;
        e.skip(9)?;
        let (priority, idle, hard, flags) = (e.u16()?, e.u16()?, e.u16()?, e.u16()?);
        e.skip(4)?;
        let (cookie, packets, bytes) = (e.u64()?, e.u64()?, e.u64()?);
        let mut s = rule_head(table, priority, cookie, idle, hard, flags);
        oxm::decode_match(&mut e, &mut s)?;
        s.push(',');
        let lens = instr::decode_instructions(e, &mut s)?;
        let rule = Rule::parse(&s)
            .map_err(|x| OfError::new(err::BAD_ACTION, err::BA_BAD_ARGUMENT, x.0))?;
        v.push((decoded(rule, lens), packets, bytes));
    }
    Ok(v)
}

/// A `FLOW_MOD` adding `r` (what a controller sends; the insertion
/// benchmark's client and the tests use it).
pub fn flow_mod_add(r: &Rule, xid: u32) -> Vec<u8> {
    let mut w = Writer::new(FLOW_MOD, xid);
    w.u64(r.cookie);
    w.u64(0);
    w.u8(r.table);
    w.u8(FC_ADD);
    w.u16(r.idle_timeout);
    w.u16(r.hard_timeout);
    w.u16(r.priority);
    w.u32(NO_BUFFER);
    w.u32(OFPP_ANY);
    w.u32(OFPG_ANY);
    w.u16(flow_flags(r));
    w.zeros(2);
    oxm::encode_match(&r.m, &mut w);
    instr::encode_instructions(r, &mut w);
    w.finish()
}

/// Group statistics: the rules naming the group are its references; its
/// packets and bytes, and each bucket's, are what the datapath counted.
fn group_stats(g: &Group, refs: u32) -> Vec<u8> {
    let mut w = Writer { b: Vec::new() };
    w.u16(0);
    w.zeros(2);
    w.u32(g.id);
    w.u32(refs);
    w.zeros(4);
    w.u64(g.stats.packets.load(Relaxed));
    w.u64(g.stats.bytes.load(Relaxed));
    w.u32(0);
    w.u32(0);
    for (p, b) in g.stats.buckets.iter() {
        w.u64(p.load(Relaxed));
        w.u64(b.load(Relaxed));
    }
    let n = w.len() as u16;
    w.put_u16(0, n);
    w.b
}

/// One table's features: name, metadata bits, and the properties
/// OpenFlow 1.3 requires (what `ovs-ofctl` checks for).
fn table_features(id: u8, max_entries: usize) -> Vec<u8> {
    let mut w = Writer { b: Vec::new() };
    w.u16(0);
    w.u8(id);
    w.zeros(5);
    let name = format!("table{id}");
    w.bytes(name.as_bytes());
    w.zeros(32 - name.len());
    w.u64(u64::MAX); // metadata_match
    w.u64(u64::MAX); // metadata_write
    w.u32(0); // config
    w.u32(max_entries.min(u32::MAX as usize) as u32); // max_entries
    let prop = |w: &mut Writer, t: u16, body: &dyn Fn(&mut Writer)| {
        let at = w.len();
        w.u16(t);
        w.u16(0);
        body(w);
        let n = (w.len() - at) as u16;
        w.put_u16(at + 2, n);
        w.pad8();
    };
    let insts = |w: &mut Writer| {
        for i in [1u16, 2, 4, 6] {
            w.u16(i);
            w.u16(4);
        }
    };
    let next = |w: &mut Writer| {
        for t in id.saturating_add(1)..N_TABLES {
            w.u8(t);
        }
    };
    let acts = |w: &mut Writer| {
        for a in [0u16, 17, 18, 22, 24, 25] {
            w.u16(a);
            w.u16(4);
        }
    };
    let fields = |w: &mut Writer| {
        for (c, f, l) in [
            (oxm::CLASS_OXM, 0u8, 4u8),
            (oxm::CLASS_OXM, 2, 8),
            (oxm::CLASS_OXM, 3, 6),
            (oxm::CLASS_OXM, 4, 6),
            (oxm::CLASS_OXM, 5, 2),
            (oxm::CLASS_OXM, 6, 2),
            (oxm::CLASS_OXM, 10, 1),
            (oxm::CLASS_OXM, 11, 4),
            (oxm::CLASS_OXM, 12, 4),
            (oxm::CLASS_OXM, 13, 2),
            (oxm::CLASS_OXM, 14, 2),
            (oxm::CLASS_OXM, 15, 2),
            (oxm::CLASS_OXM, 16, 2),
        ] {
            w.u32(oxm::header(c, f, false, l));
        }
        for r in 0..8u8 {
            w.u32(oxm::header(oxm::CLASS_NXM1, r, false, 4));
        }
    };
    let sets = |w: &mut Writer| {
        for (f, l) in [
            (3u8, 6u8),
            (4, 6),
            (6, 2),
            (8, 1),
            (11, 4),
            (12, 4),
            (13, 2),
            (14, 2),
            (15, 2),
            (16, 2),
        ] {
            w.u32(oxm::header(oxm::CLASS_OXM, f, false, l));
        }
    };
    prop(&mut w, 0, &insts); // instructions
    prop(&mut w, 2, &next); // next tables
    prop(&mut w, 4, &|_| {}); // write actions: none (no action set)
    prop(&mut w, 6, &acts); // apply actions
    prop(&mut w, 8, &fields); // match
    prop(&mut w, 10, &fields); // wildcards
    prop(&mut w, 12, &|_| {}); // write set-field: none
    prop(&mut w, 14, &sets); // apply set-field
    let n = w.len() as u16;
    w.put_u16(0, n);
    w.b
}

/// Arbitrary bytes as the messages of one connection (after our HELLO):
/// cut on the headers' lengths, each handled by a session over a small
/// table; no panic whatever the bytes.
pub fn fuzz(data: &[u8]) {
    use crate::switch::counters::{CacheCounters, SwitchCounters};
    use crate::switch::table::TableHandle;
    let sh = Arc::new(Shared {
        ctl: TableHandle::new(FlowTable::new()),
        ports: vec![(1, "mem:a".into(), Default::default())],
        cache: Arc::new(CacheCounters::default()),
        counters: Arc::new(SwitchCounters::default()),
        controller: Default::default(),
        links: Default::default(),
    });
    let mut s = Session::new(sh, Arc::new(ChannelStats::default()), 1);
    let _ = s.message(&hello());
    let mut rest = data;
    while rest.len() >= HEADER {
        let n = (Header::parse(rest).map_or(0, |h| h.len as usize)).max(HEADER);
        let n = n.min(rest.len());
        let (m, r) = rest.split_at(n);
        rest = r;
        let _ = s.message(m);
        s.take_out();
    }
    s.flush();
}
