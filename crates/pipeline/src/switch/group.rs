//! Groups (OpenFlow 1.3, section 5.6), as Open vSwitch runs them: a rule's
//! `group:ID` hands the frame to the group, which runs the actions of
//! some of its buckets, each on its own copy of the frame.
//!
//! - `all`: every bucket (replication: flooding, multicast, mirroring).
//! - `select`: one live bucket per flow, chosen by a hash of the flow and
//!   the buckets' weights (highest random weight: each live bucket scores
//!   `(hash(flow, bucket) & 0xffff) * weight`, the best wins, so a flow
//!   stays on its bucket while the others come and go; weight 0 is never
//!   chosen). The flow hash is symmetric over the addresses and ports (both
//!   directions of a connection pick the same bucket); frames that are not
//!   IP hash their MACs. Open vSwitch hashes in its datapath with another
//!   function: which bucket a given flow gets differs, the properties do
//!   not.
//! - `indirect`: its one bucket (many rules share one action list).
//! - `ff` (fast failover): the first live bucket.
//!
//! A bucket is live when it watches nothing, or its watch port is live (a
//! port of the switch whose link is up, [`super::link`]) or its watch
//! group is live (has a live bucket), as Open vSwitch's `bucket_is_alive`.
//!
//! Buckets run the single-table actions (outputs, `set_field`, VLAN push
//! and pop, `dec_ttl`, `controller`, `group` for chaining): a bucket that
//! only outputs sends the frame as it is; one that rewrites it works on a
//! copy in a per-depth scratch slot of the datapath, so buckets never see
//! each other's changes. Chains of groups are at most [`MAX_DEPTH`] deep
//! and never loop (checked when a group is added, [`check_chain`]).
//!
//! Running a group allocates nothing, takes no lock and makes no syscall:
//! the counters are relaxed atomics shared by every published version of
//! the table (like the rules' counters).

use super::actions::{execute, Env, FrameBuf, Out};
use super::rule::{parse_bucket_actions, q, Action, Pin, PipeState};
use linerate_wire::flow::FlowKey;
use linerate_wire::frame::parse_frame;
use std::cell::Cell;
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// "Watches nothing" (`OFPP_ANY` / `OFPG_ANY`).
pub const WATCH_NONE: u32 = 0xffff_ffff;
/// Deepest chain of groups (a group's bucket naming a group counts one).
pub const MAX_DEPTH: usize = 8;
/// Buckets run plus liveness steps one packet may take through its groups
/// (a full group of [`super::table::MAX_BUCKETS`] buckets and chains
/// beside it; beyond, the rest is skipped and counted, `over_budget`).
pub const BUDGET: u32 = 4096;
/// Headroom of a bucket's copy (for `push_vlan`).
pub const COPY_HEADROOM: usize = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupKind {
    All,
    Select,
    Indirect,
    FastFailover,
}

impl GroupKind {
    /// OpenFlow's `ofp_group_type`.
    pub fn code(self) -> u8 {
        match self {
            GroupKind::All => 0,
            GroupKind::Select => 1,
            GroupKind::Indirect => 2,
            GroupKind::FastFailover => 3,
        }
    }

    pub fn from_code(c: u8) -> Option<GroupKind> {
        Some(match c {
            0 => GroupKind::All,
            1 => GroupKind::Select,
            2 => GroupKind::Indirect,
            3 => GroupKind::FastFailover,
            _ => return None,
        })
    }

    /// The name `ovs-ofctl` prints.
    pub fn name(self) -> &'static str {
        match self {
            GroupKind::All => "all",
            GroupKind::Select => "select",
            GroupKind::Indirect => "indirect",
            GroupKind::FastFailover => "ff",
        }
    }

    fn from_name(s: &str) -> Option<GroupKind> {
        Some(match s {
            "all" => GroupKind::All,
            "select" => GroupKind::Select,
            "indirect" => GroupKind::Indirect,
            "ff" | "fast_failover" => GroupKind::FastFailover,
            _ => return None,
        })
    }

    /// A bucket's weight when none is given (`ovs-ofctl`: 1 in a select
    /// group, else 0).
    fn default_weight(self) -> u16 {
        u16::from(self == GroupKind::Select)
    }
}

/// One bucket: its weight (select), what it watches (liveness) and its
/// actions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bucket {
    pub weight: u16,
    pub watch_port: u32,
    pub watch_group: u32,
    pub actions: Vec<Action>,
}

impl Bucket {
    /// A bucket of `actions` that watches nothing, of the kind's default weight.
    pub fn of(kind: GroupKind, actions: Vec<Action>) -> Bucket {
        Bucket {
            weight: kind.default_weight(),
            watch_port: WATCH_NONE,
            watch_group: WATCH_NONE,
            actions,
        }
    }

    fn watches(&self) -> bool {
        self.watch_port != WATCH_NONE || self.watch_group != WATCH_NONE
    }

    /// Only outputs: the frame goes as it is, no copy.
    fn outputs_only(&self) -> bool {
        self.actions.iter().all(|a| {
            matches!(
                a,
                Action::Output(_)
                    | Action::Flood
                    | Action::All
                    | Action::InPort
                    | Action::Controller(_)
            )
        })
    }
}

/// A group's counters: the group's and each bucket's packets and bytes.
#[derive(Debug, Default)]
pub struct GroupStats {
    pub packets: AtomicU64,
    pub bytes: AtomicU64,
    /// (packets, bytes) per bucket.
    pub buckets: Box<[(AtomicU64, AtomicU64)]>,
    /// Buckets not run because the packet's [`BUDGET`] was spent.
    pub over_budget: AtomicU64,
}

/// A group. Its counters are shared by every published version of the
/// table; a group added again (modified) starts new ones.
#[derive(Debug, Clone)]
pub struct Group {
    pub id: u32,
    pub kind: GroupKind,
    pub buckets: Vec<Bucket>,
    pub stats: Arc<GroupStats>,
    /// Which buckets run without a copy ([`Bucket::outputs_only`]), bit i for
    /// bucket i (the others always copy).
    plain: u64,
}

impl PartialEq for Group {
    fn eq(&self, o: &Group) -> bool {
        (self.id, self.kind, &self.buckets) == (o.id, o.kind, &o.buckets)
    }
}
impl Eq for Group {}

impl Group {
    /// A group, checked as OpenFlow 1.3 and Open vSwitch do: an indirect
    /// group has one bucket, only a select group's buckets have weights, a
    /// fast-failover group's buckets each watch a port or a group. The
    /// error is one line.
    pub fn new(id: u32, kind: GroupKind, buckets: Vec<Bucket>) -> Result<Group, GroupError> {
        if kind == GroupKind::Indirect && buckets.len() != 1 {
            return Err(GroupError::Bucket(format!(
                "group {id}: an indirect group has exactly one bucket, not {}",
                buckets.len()
            )));
        }
        for (i, b) in buckets.iter().enumerate() {
            if kind != GroupKind::Select && b.weight != 0 {
                return Err(GroupError::Weight(format!(
                    "group {id}: bucket {i} has weight {}: only select groups have bucket weights",
                    b.weight
                )));
            }
            if kind == GroupKind::FastFailover && !b.watches() {
                return Err(GroupError::Watch(format!(
                    "group {id}: bucket {i} of a fast-failover group watches no port or group"
                )));
            }
        }
        let plain = buckets
            .iter()
            .take(64)
            .enumerate()
            .filter(|(_, b)| b.outputs_only())
            .fold(0u64, |m, (i, _)| m | 1 << i);
        let stats = Arc::new(GroupStats {
            buckets: buckets.iter().map(|_| Default::default()).collect(),
            ..Default::default()
        });
        Ok(Group {
            id,
            kind,
            buckets,
            stats,
            plain,
        })
    }

    /// Parse `ovs-ofctl add-group` syntax:
    /// `group_id=ID,type=all|select|indirect|ff,bucket=[weight:W,][watch_port:P,][watch_group:G,][actions=]ACTIONS,...`.
    /// A bucket's actions run to the next `bucket=` (a bare port number is
    /// `output:` it).
    pub fn parse(s: &str) -> Result<Group, String> {
        let (mut id, mut kind) = (None, None);
        // Per bucket: weight, watch port, watch group, action tokens.
        type Raw<'a> = (Option<u16>, u32, u32, Vec<String>, &'a str);
        let mut raw: Vec<Raw> = Vec::new();
        for t in split_tokens(s) {
            let (k, v) = t.split_once('=').unwrap_or((t, ""));
            if k == "bucket" {
                raw.push((None, WATCH_NONE, WATCH_NONE, Vec::new(), t));
                if !v.is_empty() {
                    bucket_token(raw.last_mut().unwrap(), v)?;
                }
                continue;
            }
            if let Some(b) = raw.last_mut() {
                bucket_token(b, t)?;
                continue;
            }
            match k {
                "group_id" => {
                    id = Some(
                        v.parse::<u32>()
                            .map_err(|_| format!("group token {}: not a number", q(t)))?,
                    )
                }
                "type" => {
                    kind = Some(GroupKind::from_name(v).ok_or_else(|| {
                        format!(
                            "group token {}: the types are all, select, indirect and ff",
                            q(t)
                        )
                    })?)
                }
                _ => return Err(format!("group token {}: unknown", q(t))),
            }
        }
        let id = id.ok_or("group: no 'group_id=ID'")?;
        let kind = kind.unwrap_or(GroupKind::All);
        let mut buckets = Vec::with_capacity(raw.len());
        for (weight, watch_port, watch_group, acts, t) in raw {
            let actions = parse_bucket_actions(&acts.join(","))
                .map_err(|e| format!("group token {}: {e}", q(t)))?;
            buckets.push(Bucket {
                weight: weight.unwrap_or(kind.default_weight()),
                watch_port,
                watch_group,
                actions,
            });
        }
        Group::new(id, kind, buckets).map_err(|e| e.to_string())
    }

    /// The group's live buckets' choice for a frame: the buckets to run.
    #[inline]
    fn choose(&self, frame: &[u8], live: &GroupCtx) -> Choice {
        match self.kind {
            GroupKind::All => Choice::All,
            GroupKind::Indirect => Choice::One(0),
            GroupKind::FastFailover => self.first_live(live, 0).map_or(Choice::None, Choice::One),
            GroupKind::Select => self
                .select(flow_hash(frame), live)
                .map_or(Choice::None, Choice::One),
        }
    }

    /// The select bucket of a flow of hash `h` (highest random weight among
    /// the live buckets of weight > 0).
    pub fn select(&self, h: u32, live: &GroupCtx) -> Option<usize> {
        let mut best: Option<(u64, usize)> = None;
        for (i, b) in self.buckets.iter().enumerate() {
            if b.weight == 0 || !live.live(b, 0) {
                continue;
            }
            let score = (mix(h, i as u32) & 0xffff) as u64 * b.weight as u64;
            if best.is_none_or(|(s, _)| score >= s) {
                best = Some((score, i));
            }
        }
        best.map(|(_, i)| i)
    }

    fn first_live(&self, live: &GroupCtx, depth: usize) -> Option<usize> {
        self.buckets.iter().position(|b| live.live(b, depth))
    }

    /// The groups this one's buckets name.
    pub fn names(&self) -> impl Iterator<Item = u32> + '_ {
        self.buckets
            .iter()
            .flat_map(|b| b.actions.iter())
            .filter_map(|a| match a {
                Action::Group(g) => Some(*g),
                _ => None,
            })
            .chain(
                self.buckets
                    .iter()
                    .filter(|b| b.watch_group != WATCH_NONE)
                    .map(|b| b.watch_group),
            )
    }
}

impl std::fmt::Display for Group {
    /// As `ovs-ofctl -O OpenFlow13 dump-groups` prints it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "group_id={},type={}", self.id, self.kind.name())?;
        for b in &self.buckets {
            f.write_str(",bucket=")?;
            if b.weight != self.kind.default_weight() {
                write!(f, "weight:{},", b.weight)?;
            }
            if b.watch_port != WATCH_NONE {
                write!(f, "watch_port:{},", b.watch_port)?;
            }
            if b.watch_group != WATCH_NONE {
                write!(f, "watch_group:{},", b.watch_group)?;
            }
            f.write_str("actions=")?;
            if b.actions.is_empty() {
                f.write_str("drop")?;
            }
            for (i, a) in b.actions.iter().enumerate() {
                if i > 0 {
                    f.write_str(",")?;
                }
                write!(f, "{a}")?;
            }
        }
        Ok(())
    }
}

/// Why a group was refused (each maps to an OpenFlow error code).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupError {
    Bucket(String),
    Weight(String),
    Watch(String),
    Loop(String),
    Chaining(String),
    OutOfBuckets(String),
    OutOfGroups(String),
}

impl std::fmt::Display for GroupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GroupError::Bucket(s)
            | GroupError::Weight(s)
            | GroupError::Watch(s)
            | GroupError::Loop(s)
            | GroupError::Chaining(s)
            | GroupError::OutOfBuckets(s)
            | GroupError::OutOfGroups(s) => f.write_str(s),
        }
    }
}

/// Split on commas, spaces and tabs outside parentheses.
fn split_tokens(s: &str) -> impl Iterator<Item = &str> {
    let mut depth = 0i32;
    s.split(move |c: char| {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            _ => {}
        }
        depth == 0 && matches!(c, ',' | ' ' | '\t')
    })
    .filter(|t| !t.is_empty())
}

fn bucket_token(b: &mut (Option<u16>, u32, u32, Vec<String>, &str), t: &str) -> Result<(), String> {
    let num = |v: &str, max: u64| -> Result<u64, String> {
        v.parse::<u64>()
            .ok()
            .filter(|&n| n <= max)
            .ok_or_else(|| format!("bucket token {}: not a number up to {max}", q(t)))
    };
    // Bucket fields come before the actions (`actions=` starts them).
    if b.3.is_empty() {
        if let Some((k, v)) = t.split_once([':', '=']) {
            match k {
                "weight" => {
                    b.0 = Some(num(v, 0xffff)? as u16);
                    return Ok(());
                }
                "watch_port" => {
                    b.1 = num(v, 0xffff_fffe)? as u32;
                    return Ok(());
                }
                "watch_group" => {
                    b.2 = num(v, 0xffff_ff00)? as u32;
                    return Ok(());
                }
                "bucket_id" => {
                    return Err(format!(
                        "bucket token {}: bucket ids are OpenFlow 1.5 (linerate speaks 1.3)",
                        q(t)
                    ))
                }
                "actions" => {
                    b.3.push(v.to_string());
                    return Ok(());
                }
                _ => {}
            }
        }
    }
    if t.bytes().all(|c| c.is_ascii_digit()) {
        b.3.push(format!("output:{t}"));
    } else {
        b.3.push(t.to_string());
    }
    Ok(())
}

/// Check that adding `g` to `groups` (replacing a group of its id) leaves
/// no loop and no chain deeper than [`MAX_DEPTH`]; groups it names must
/// exist. Only a group that names groups can make a chain longer, so
/// others pass at once. Each group's depth is worked out once (a walk of
/// the groups and their names, not of every path).
pub fn check_chain(groups: &HashMap<u32, Arc<Group>>, g: &Group) -> Result<(), GroupError> {
    let named: BTreeSet<u32> = g.names().collect();
    if named.is_empty() {
        return Ok(());
    }
    for n in &named {
        if *n != g.id && !groups.contains_key(n) {
            return Err(GroupError::Chaining(format!(
                "group {}: names group {n}, which does not exist (add it first)",
                g.id
            )));
        }
    }
    let get = |id: u32| {
        if id == g.id {
            Some(g)
        } else {
            groups.get(&id).map(|x| &**x)
        }
    };
    // Depth below each group (itself counts 1; a missing one 0), memoised;
    // a group met again on the path is a loop. Past MAX_DEPTH the walk
    // stops: the answer is "too deep" anyway.
    fn below<'a>(
        id: u32,
        get: &dyn Fn(u32) -> Option<&'a Group>,
        memo: &mut HashMap<u32, usize>,
        path: &mut Vec<u32>,
    ) -> Result<usize, ()> {
        if let Some(&d) = memo.get(&id) {
            return Ok(d);
        }
        if path.contains(&id) {
            return Err(());
        }
        let Some(x) = get(id) else { return Ok(0) };
        if path.len() > MAX_DEPTH {
            return Ok(MAX_DEPTH + 1);
        }
        path.push(id);
        let mut m = 0;
        for n in x.names().collect::<BTreeSet<u32>>() {
            m = m.max(below(n, get, memo, path)?);
        }
        path.pop();
        memo.insert(id, m + 1);
        Ok(m + 1)
    }
    let down = below(g.id, &get, &mut HashMap::new(), &mut Vec::new()).map_err(|()| {
        GroupError::Loop(format!(
            "group {}: its buckets lead back to it (a loop)",
            g.id
        ))
    })?;
    // Depth above g: the longest chain of groups that lead to it (the
    // others form no loop, so this ends), memoised.
    let mut parents: HashMap<u32, BTreeSet<u32>> = HashMap::new();
    for x in groups.values().filter(|x| x.id != g.id) {
        for n in x.names() {
            parents.entry(n).or_default().insert(x.id);
        }
    }
    fn above(
        id: u32,
        parents: &HashMap<u32, BTreeSet<u32>>,
        memo: &mut HashMap<u32, usize>,
        d: usize,
    ) -> usize {
        if d > MAX_DEPTH {
            return MAX_DEPTH + 1;
        }
        if let Some(&u) = memo.get(&id) {
            return u;
        }
        let u = parents.get(&id).map_or(0, |ps| {
            ps.iter()
                .map(|&p| 1 + above(p, parents, memo, d + 1))
                .max()
                .unwrap_or(0)
        });
        memo.insert(id, u);
        u
    }
    let up = above(g.id, &parents, &mut HashMap::new(), 0);
    if down + up > MAX_DEPTH {
        return Err(GroupError::Chaining(format!(
            "group {}: makes a chain of {} groups; at most {MAX_DEPTH}",
            g.id,
            down + up
        )));
    }
    Ok(())
}

enum Choice {
    All,
    One(usize),
    None,
}

/// A flow's hash for select groups: symmetric over addresses and ports;
/// the MACs for frames that are not IP.
pub fn flow_hash(frame: &[u8]) -> u32 {
    let k = match parse_frame(frame) {
        Ok(l) if l.src_ip != [0; 16] || l.dst_ip != [0; 16] => FlowKey {
            src_ip: l.src_ip,
            dst_ip: l.dst_ip,
            src_port: l.src_port,
            dst_port: l.dst_port,
            proto: l.proto,
        },
        _ => {
            let mut k = FlowKey::default();
            if frame.len() >= 14 {
                k.dst_ip[..6].copy_from_slice(&frame[..6]);
                k.src_ip[..6].copy_from_slice(&frame[6..12]);
                k.src_port = u16::from_be_bytes([frame[12], frame[13]]);
                k.dst_port = k.src_port;
            }
            k
        }
    };
    k.symmetric_hash32()
}

/// A bucket's random weight for a flow (murmur3's 64-bit finaliser).
fn mix(h: u32, bucket: u32) -> u32 {
    let mut x = ((h as u64) << 32) | bucket as u64;
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    (x ^ (x >> 33)) as u32
}

/// What running a group needs besides an [`Env`] and its scratch: the
/// groups, the switch's ports and their links (for liveness; a port
/// without an entry in `up` is up).
pub struct GroupCtx<'a> {
    pub groups: &'a HashMap<u32, Arc<Group>>,
    pub ports: &'a [u32],
    pub up: &'a [AtomicBool],
    /// Buckets run and liveness steps left for this packet
    /// ([`BUDGET`]): chains of wide groups cannot make one packet cost
    /// millions of steps.
    pub budget: Cell<u32>,
}

impl GroupCtx<'_> {
    /// One step of this packet's [`BUDGET`]; false when none is left.
    #[inline]
    fn spend(&self) -> bool {
        let b = self.budget.get();
        self.budget.set(b.saturating_sub(1));
        b > 0
    }

    /// Is port `no` one of the switch's, with its link up?
    fn port_up(&self, no: u32) -> bool {
        self.ports
            .iter()
            .position(|&p| p == no)
            .is_some_and(|i| self.up.get(i).is_none_or(|u| u.load(Relaxed)))
    }

    /// Open vSwitch's `bucket_is_alive` (a watch group is live when it has
    /// a live bucket, looked at to [`MAX_DEPTH`]).
    pub fn live(&self, b: &Bucket, depth: usize) -> bool {
        if !b.watches() {
            return true;
        }
        if !self.spend() {
            return false;
        }
        if b.watch_port != WATCH_NONE && self.port_up(b.watch_port) {
            return true;
        }
        b.watch_group != WATCH_NONE
            && depth < MAX_DEPTH
            && self
                .groups
                .get(&b.watch_group)
                .map(|g| &**g)
                .is_some_and(|g| g.first_live(self, depth + 1).is_some())
    }
}

/// Bytes of one scratch slot: a frame of up to `max_frame` bytes, its
/// headroom and a VLAN tag.
pub const fn slot_len(max_frame: usize) -> usize {
    COPY_HEADROOM + max_frame + 4
}

/// Run group `id` on `frame`: its chosen buckets' actions, outputs through
/// `env`. `scratch` holds the copies of this depth and deeper
/// ([`slot_len`] each, [`MAX_DEPTH`] of them). A group that does not exist
/// (deleted while a chain still names it) does nothing.
pub fn run<E: Env>(
    cx: &GroupCtx,
    id: u32,
    frame: &[u8],
    scratch: &mut [u8],
    depth: usize,
    env: &mut E,
) {
    let Some(g) = cx.groups.get(&id) else { return };
    let g = &**g;
    if depth >= MAX_DEPTH {
        return;
    }
    g.stats.packets.fetch_add(1, Relaxed);
    g.stats.bytes.fetch_add(frame.len() as u64, Relaxed);
    match g.choose(frame, cx) {
        Choice::All => {
            for i in 0..g.buckets.len() {
                bucket(cx, g, i, frame, scratch, depth, env);
            }
        }
        Choice::One(i) => bucket(cx, g, i, frame, scratch, depth, env),
        Choice::None => {}
    }
}

fn bucket<E: Env>(
    cx: &GroupCtx,
    g: &Group,
    i: usize,
    frame: &[u8],
    scratch: &mut [u8],
    depth: usize,
    env: &mut E,
) {
    if !cx.spend() {
        g.stats.over_budget.fetch_add(1, Relaxed);
        return;
    }
    let b = &g.buckets[i];
    let (p, by) = &g.stats.buckets[i];
    p.fetch_add(1, Relaxed);
    by.fetch_add(frame.len() as u64, Relaxed);
    if i < 64 && g.plain & (1 << i) != 0 {
        // Outputs only: the frame as it is (no copy).
        execute_plain(&b.actions, frame, env);
        return;
    }
    // This depth's slot: the scratch holds one per depth left.
    let per = scratch.len() / (MAX_DEPTH - depth);
    if per < COPY_HEADROOM + frame.len() {
        return;
    }
    let (mine, rest) = scratch.split_at_mut(per);
    mine[COPY_HEADROOM..COPY_HEADROOM + frame.len()].copy_from_slice(frame);
    let Some(mut f) = FrameBuf::new(mine, COPY_HEADROOM, frame.len()) else {
        return;
    };
    let mut nested = Nested {
        cx,
        env,
        scratch: rest,
        depth: depth + 1,
    };
    // An action that drops (a TTL run out) drops this copy only.
    let _ = execute(&mut f, &b.actions, &mut nested);
}

fn execute_plain<E: Env>(actions: &[Action], frame: &[u8], env: &mut E) {
    for a in actions {
        let out = match a {
            Action::Output(p) => Out::Port(*p),
            Action::Flood => Out::Flood,
            Action::All => Out::All,
            Action::InPort => Out::InPort,
            Action::Controller(p) => Out::Controller(*p),
            _ => continue,
        };
        env.output(out, frame);
    }
}

/// The [`Env`] of a bucket's actions: a `group` goes one depth down, the
/// rest to the datapath.
struct Nested<'c, 'g, 'e, 's, E: Env> {
    cx: &'c GroupCtx<'g>,
    env: &'e mut E,
    scratch: &'s mut [u8],
    depth: usize,
}

impl<E: Env> Env for Nested<'_, '_, '_, '_, E> {
    fn output(&mut self, out: Out, frame: &[u8]) {
        match out {
            Out::Group(g) => run(self.cx, g, frame, self.scratch, self.depth, self.env),
            o => self.env.output(o, frame),
        }
    }

    fn meter(&mut self, id: u32, bytes: usize) -> bool {
        self.env.meter(id, bytes)
    }

    fn ttl_expired(&mut self, p: Pin, frame: &[u8], pipe: &PipeState) {
        self.env.ttl_expired(p, frame, pipe)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_wire::build::{build_udp, FrameParams, IpPair};

    #[derive(Default)]
    struct Rec {
        outs: Vec<(Out, Vec<u8>)>,
    }
    impl Env for Rec {
        fn output(&mut self, out: Out, frame: &[u8]) {
            self.outs.push((out, frame.to_vec()));
        }
        fn meter(&mut self, _id: u32, _bytes: usize) -> bool {
            true
        }
    }

    fn udp(src_port: u16) -> Vec<u8> {
        let mut buf = [0u8; 128];
        let p = FrameParams::new(IpPair::V4 {
            src: [10, 0, 0, 1],
            dst: [10, 0, 0, 2],
        });
        let n = build_udp(&mut buf, &p, src_port, 53).unwrap();
        buf[..n].to_vec()
    }

    type Groups = HashMap<u32, Arc<Group>>;

    fn groups(specs: &[&str]) -> Groups {
        let mut m = HashMap::new();
        for s in specs {
            let g = Group::parse(s).unwrap();
            check_chain(&m, &g).unwrap();
            m.insert(g.id, Arc::new(g));
        }
        m
    }

    fn run_on(m: &Groups, ports: &[u32], id: u32, frame: &[u8]) -> Vec<(Out, Vec<u8>)> {
        let cx = GroupCtx {
            groups: m,
            ports,
            up: &[],
            budget: Cell::new(BUDGET),
        };
        let mut scratch = vec![0u8; MAX_DEPTH * slot_len(2048)];
        let mut env = Rec::default();
        run(&cx, id, frame, &mut scratch, 0, &mut env);
        env.outs
    }

    #[test]
    fn parse_prints_back_as_ovs_ofctl_does() {
        for (spec, printed) in [
            (
                "group_id=5,type=all,bucket=output:1,bucket=output:2,bucket=actions=output:3",
                "group_id=5,type=all,bucket=actions=output:1,bucket=actions=output:2,bucket=actions=output:3",
            ),
            ("group_id=5,bucket=2", "group_id=5,type=all,bucket=actions=output:2"),
            (
                "group_id=1,type=select,bucket=weight:10,actions=output:1,bucket=output:2",
                "group_id=1,type=select,bucket=weight:10,actions=output:1,bucket=actions=output:2",
            ),
            (
                "group_id=2,type=indirect,bucket=actions=set_field:10.1.1.1->ip_dst,dec_ttl,output:2",
                "group_id=2,type=indirect,bucket=actions=set_field:10.1.1.1->ip_dst,dec_ttl,output:2",
            ),
            (
                "group_id=3 type=ff bucket=watch_port:9,output:9 bucket=watch_port:2,watch_group:5,actions=push_vlan:0x8100,output:2",
                "group_id=3,type=ff,bucket=watch_port:9,actions=output:9,bucket=watch_port:2,watch_group:5,actions=push_vlan:0x8100,output:2",
            ),
            ("group_id=4,type=all,bucket=actions=drop", "group_id=4,type=all,bucket=actions=drop"),
        ] {
            let g = Group::parse(spec).unwrap_or_else(|e| panic!("{spec}: {e}"));
            assert_eq!(g.to_string(), printed, "{spec}");
            assert_eq!(Group::parse(printed).unwrap(), g, "{printed}");
        }
    }

    #[test]
    fn bad_groups_get_one_line_errors() {
        for (spec, want) in [
            ("type=all", "no 'group_id=ID'"),
            ("group_id=1\nbucket=output:2", "not a number"),
            ("group_id=1,type=fancy", "the types are"),
            (
                "group_id=1,type=indirect,bucket=output:1,bucket=output:2",
                "exactly one bucket",
            ),
            ("group_id=1,type=indirect", "exactly one bucket"),
            (
                "group_id=1,type=all,bucket=weight:3,output:1",
                "only select groups",
            ),
            ("group_id=1,type=ff,bucket=output:1", "watches no port"),
            ("group_id=1,bucket=goto_table:2", "takes outputs"),
            ("group_id=1,bucket=resubmit(,2)", "takes outputs"),
            ("group_id=1,bucket=bucket_id:3,output:1", "OpenFlow 1.5"),
            (
                "group_id=1,bucket=weight:70000,output:1",
                "not a number up to 65535",
            ),
            ("group_id=1,bucket=tp_src:9", "bucket action"),
            (
                "group_id=1,bucket=set_field:5->tun_id,output:1",
                "NXM_NX_TUN_ID is pipeline state",
            ),
            (
                "group_id=1,bucket=set_field:5->reg0,output:1",
                "pipeline state",
            ),
            (
                "group_id=1,bucket=load:1->NXM_OF_ETH_DST[],output:1",
                "takes outputs",
            ),
            ("group_id=1,selection_method=hash", "unknown"),
        ] {
            let e = Group::parse(spec).unwrap_err();
            assert!(e.contains(want), "{spec}: {e}");
            assert!(!e.contains('\n'), "{e}");
        }
        // Tabs separate tokens, as in flow rules.
        assert_eq!(
            Group::parse("group_id=3\ttype=all\tbucket=output:4")
                .unwrap()
                .to_string(),
            "group_id=3,type=all,bucket=actions=output:4"
        );
    }

    #[test]
    fn all_runs_every_bucket_on_its_own_copy() {
        let m = groups(&["group_id=1,type=all,bucket=set_field:7->udp_dst,output:2,bucket=output:3,bucket=push_vlan:0x8100,set_field:5->vlan_vid,output:4"]);
        let f = udp(1000);
        let outs = run_on(&m, &[1, 2, 3, 4], 1, &f);
        assert_eq!(outs.len(), 3);
        assert_eq!(outs[0].0, Out::Port(2));
        let l = parse_frame(&outs[0].1).unwrap();
        assert_eq!(l.dst_port, 7);
        // The second bucket sees the frame as it came, not the first's change.
        assert_eq!(outs[1], (Out::Port(3), f.clone()));
        let l = parse_frame(&outs[2].1).unwrap();
        assert_eq!(l.vlans.outer().map(|t| t.vid()), Some(5));
        assert_eq!(outs[2].1.len(), f.len() + 4);
        let s = &m[&1].stats;
        assert_eq!(s.packets.load(Relaxed), 1);
        assert!(s
            .buckets
            .iter()
            .all(|(p, b)| p.load(Relaxed) == 1 && b.load(Relaxed) == f.len() as u64));
    }

    #[test]
    fn select_keeps_a_flow_on_one_bucket_and_spreads_flows_by_weight() {
        let m = groups(&["group_id=1,type=select,bucket=weight:1,output:1,bucket=weight:3,output:2,bucket=weight:0,output:3"]);
        let mut per = [0usize; 4];
        for sp in 0..4000u16 {
            let f = udp(sp);
            let a = run_on(&m, &[1, 2, 3], 1, &f);
            assert_eq!(a.len(), 1);
            // The same flow again: the same bucket.
            assert_eq!(run_on(&m, &[1, 2, 3], 1, &f)[0].0, a[0].0);
            let Out::Port(p) = a[0].0 else { panic!() };
            per[p as usize] += 1;
        }
        assert_eq!(per[3], 0, "weight 0 is never chosen");
        // Weights 1:3 (HRW's share for weights 1 and 3 is 1/6 and 5/6).
        let share = per[2] as f64 / 4000.0;
        assert!((0.78..0.89).contains(&share), "{per:?}");
        // The reverse direction of a flow hashes the same.
        let fwd = udp(1234);
        let mut rev = fwd.clone();
        let (ip, l4) = (14, 34);
        let (s, d) = (
            rev[ip + 12..ip + 16].to_vec(),
            rev[ip + 16..ip + 20].to_vec(),
        );
        rev[ip + 12..ip + 16].copy_from_slice(&d);
        rev[ip + 16..ip + 20].copy_from_slice(&s);
        let (sp, dp) = (rev[l4..l4 + 2].to_vec(), rev[l4 + 2..l4 + 4].to_vec());
        rev[l4..l4 + 2].copy_from_slice(&dp);
        rev[l4 + 2..l4 + 4].copy_from_slice(&sp);
        assert_eq!(flow_hash(&fwd), flow_hash(&rev));
    }

    #[test]
    fn select_moves_only_the_flows_of_a_bucket_that_dies() {
        let m = groups(&["group_id=1,type=select,bucket=watch_port:1,output:1,bucket=watch_port:2,output:2,bucket=watch_port:3,output:3"]);
        let mut moved_wrongly = 0;
        for sp in 0..500u16 {
            let f = udp(sp);
            let before = run_on(&m, &[1, 2, 3], 1, &f)[0].0;
            let after = run_on(&m, &[1, 2], 1, &f);
            assert_eq!(after.len(), 1);
            assert_ne!(after[0].0, Out::Port(3));
            if before != Out::Port(3) && after[0].0 != before {
                moved_wrongly += 1;
            }
        }
        assert_eq!(moved_wrongly, 0);
        assert!(
            run_on(&m, &[], 1, &udp(1)).is_empty(),
            "no live bucket: nothing"
        );
    }

    #[test]
    fn fast_failover_takes_the_first_live_bucket() {
        let m = groups(&[
            "group_id=2,type=ff,bucket=watch_port:7,output:7",
            "group_id=1,type=ff,bucket=watch_port:9,output:9,bucket=watch_group:2,output:2,bucket=watch_port:3,output:3",
        ]);
        let f = udp(1);
        assert_eq!(run_on(&m, &[9, 2, 3], 1, &f)[0].0, Out::Port(9));
        // Port 9 gone; group 2's only bucket watches port 7, absent: dead.
        assert_eq!(run_on(&m, &[2, 3], 1, &f)[0].0, Out::Port(3));
        // Port 7 back: group 2 is live, so the second bucket is.
        assert_eq!(run_on(&m, &[2, 3, 7], 1, &f)[0].0, Out::Port(2));
        assert!(run_on(&m, &[2], 1, &f).is_empty());
    }

    #[test]
    fn a_port_whose_link_is_down_is_not_live() {
        let m = groups(&[
            "group_id=1,type=ff,bucket=watch_port:2,output:2,bucket=watch_port:3,output:3",
        ]);
        let up = [AtomicBool::new(true), AtomicBool::new(true)];
        let go = || {
            let cx = GroupCtx {
                groups: &m,
                ports: &[2, 3],
                up: &up,
                budget: Cell::new(BUDGET),
            };
            let mut scratch = vec![0u8; MAX_DEPTH * slot_len(2048)];
            let mut env = Rec::default();
            run(&cx, 1, &udp(1), &mut scratch, 0, &mut env);
            env.outs.iter().map(|o| o.0).collect::<Vec<_>>()
        };
        assert_eq!(go(), vec![Out::Port(2)]);
        up[0].store(false, Relaxed);
        assert_eq!(go(), vec![Out::Port(3)]);
        up[1].store(false, Relaxed);
        assert_eq!(go(), vec![]);
        up[0].store(true, Relaxed);
        assert_eq!(go(), vec![Out::Port(2)]);
    }

    #[test]
    fn a_packet_spends_at_most_its_budget_and_wide_chains_check_fast() {
        // Four levels of ten buckets each naming the next: 10^4 buckets
        // for one packet without a budget.
        let wide = |id: u32, next: Option<u32>| {
            let b: Vec<String> = (0..10)
                .map(|_| match next {
                    Some(n) => format!("bucket=group:{n}"),
                    None => "bucket=output:2".to_string(),
                })
                .collect();
            format!("group_id={id},type=all,{}", b.join(","))
        };
        let specs = [
            wide(4, None),
            wide(3, Some(4)),
            wide(2, Some(3)),
            wide(1, Some(2)),
        ];
        let m = groups(&specs.iter().map(String::as_str).collect::<Vec<_>>());
        let outs = run_on(&m, &[1, 2], 1, &udp(1));
        assert!(outs.len() < BUDGET as usize, "{}", outs.len());
        let skipped: u64 = m.values().map(|g| g.stats.over_budget.load(Relaxed)).sum();
        assert!(skipped > 0);
        // The check of a chain of wide groups is a walk of the groups, not
        // of every path (200^6 paths here).
        let mut m: Groups = HashMap::new();
        for id in (1..=7u32).rev() {
            let b: Vec<String> = (0..200)
                .map(|_| {
                    if id == 7 {
                        "bucket=output:2".to_string()
                    } else {
                        format!("bucket=group:{}", id + 1)
                    }
                })
                .collect();
            let g = Group::parse(&format!("group_id={id},type=all,{}", b.join(","))).unwrap();
            let t = std::time::Instant::now();
            check_chain(&m, &g).unwrap();
            assert!(t.elapsed() < std::time::Duration::from_secs(1));
            m.insert(id, Arc::new(g));
        }
    }

    #[test]
    fn chains_run_and_loops_and_deep_chains_are_refused() {
        let m = groups(&[
            "group_id=2,type=indirect,bucket=set_field:9->udp_src,output:2",
            "group_id=1,type=all,bucket=set_field:8->udp_dst,group:2,bucket=output:3",
        ]);
        let outs = run_on(&m, &[1, 2, 3], 1, &udp(1));
        assert_eq!(outs.len(), 2);
        let l = parse_frame(&outs[0].1).unwrap();
        assert_eq!((outs[0].0, l.src_port, l.dst_port), (Out::Port(2), 9, 8));
        // A loop: group 2 naming 1.
        let g = Group::parse("group_id=2,type=indirect,bucket=group:1").unwrap();
        assert!(matches!(check_chain(&m, &g), Err(GroupError::Loop(_))));
        let g = Group::parse("group_id=3,type=indirect,bucket=group:3").unwrap();
        assert!(matches!(check_chain(&m, &g), Err(GroupError::Loop(_))));
        // A missing group.
        let g = Group::parse("group_id=4,type=indirect,bucket=group:40").unwrap();
        assert!(check_chain(&m, &g)
            .unwrap_err()
            .to_string()
            .contains("does not exist"));
        // A chain of MAX_DEPTH groups is fine; one more is not.
        let mut m = HashMap::new();
        for id in 1..=MAX_DEPTH as u32 {
            let s = if id == 1 {
                "group_id=1,type=indirect,bucket=output:2".to_string()
            } else {
                format!("group_id={id},type=indirect,bucket=group:{}", id - 1)
            };
            let g = Group::parse(&s).unwrap();
            check_chain(&m, &g).unwrap();
            m.insert(id, Arc::new(g));
        }
        assert_eq!(run_on(&m, &[2], MAX_DEPTH as u32, &udp(1)).len(), 1);
        let g = Group::parse(&format!(
            "group_id=99,type=indirect,bucket=group:{MAX_DEPTH}"
        ))
        .unwrap();
        assert!(matches!(check_chain(&m, &g), Err(GroupError::Chaining(_))));
        // Nor may a group at the bottom grow the chain from below.
        m.insert(
            100,
            Arc::new(Group::parse("group_id=100,type=indirect,bucket=output:2").unwrap()),
        );
        let g = Group::parse("group_id=1,type=indirect,bucket=group:100").unwrap();
        assert!(matches!(check_chain(&m, &g), Err(GroupError::Chaining(_))));
    }
}
