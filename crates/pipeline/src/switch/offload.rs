//! `linerate switch --offload xdp`: flows forwarded in XDP.
//!
//! Every `afxdp:` port runs `xdp_switch` (crates/io/src/xdp/switch_offload.bpf.c)
//! instead of `xsk_redirect`. It builds a frame's eight packet key words as
//! [`Key::extract_fast_into`] does and looks them up in the port's exact
//! entries; a hit is forwarded (or dropped) in XDP, anything else goes up the
//! AF_XDP socket to the datapath as before.
//!
//! # Where entries come from
//! The datapath offers the key of each new flow it sees (a filter of recent
//! keys keeps it to one offer per flow, through a bounded channel: a full
//! channel drops the offer, counted) to the offloader thread
//! ([`Offload::serve`]), which compiles the pipeline's outcome for that key
//! from the current tables ([`compile`]) and, if XDP can do it, installs it.
//! The outcome of the pipeline is a function of the key and the tables (what
//! the pipeline cache relies on too), so an exact entry is right for every
//! frame of that key. XDP does: one `output:N`, or none (a rule that
//! drops), after `mod_dl_dst`/`mod_dl_src`, `dec_ttl` (IPv4; TTL <= 1 goes
//! up), IPv4 addresses and TCP/UDP ports set (checksums patched by deltas
//! computed here for that key), across `goto_table`s whose earlier rules
//! rewrote nothing; a table miss is dropped in XDP too (counted as
//! `drop_miss`). Anything else (groups, meters, `normal`, `learn`,
//! `controller`, registers, VLAN and MPLS actions, `resubmit`, two outputs)
//! stays in user space.
//!
//! # Semantics kept
//! - **Counters.** Each entry has per-CPU counters in XDP; [`Offload::fold`]
//!   adds what they gained to every rule the entry's walk hit
//!   ([`super::table::RuleStats`]' `xdp_*` counters, written only under this
//!   module's lock) and stamps their last hit. It runs every
//!   [`FOLD_EVERY`] in the offloader, before each table tick (idle
//!   timeouts) and before every read of the rules' counters
//!   ([`super::table::TableHandle::sync_counters`]).
//! - **Barrier.** A published table version calls [`Offload::published`]
//!   (under the tables' edit lock, before the edit returns and so before
//!   any reply): it removes every entry whose walk looked up a table that
//!   changed (all of them when fail-open changes), folding its counters
//!   first. An install compiles from the current version under the same
//!   lock as the removal, so no entry of an older version survives a change.
//!   (A frame XDP already looked up when its entry was removed still goes
//!   the old way: it arrived before the change was acknowledged. Its count
//!   is caught because a removed entry's counter slot is folded once more
//!   before it is reused.)
//! - **Bounds.** At most [`MAX_ENTRIES`] entries (or fewer, as the user
//!   asks: `--offload-entries`); beyond, offers are
//!   refused and counted (`refused_full`). An entry without traffic for
//!   [`IDLE_NS`] is removed (`removed_idle`).

use super::key::{self, Key};
use super::rule::{Action, SetField};
use super::table::{FlowTable, RuleStats};
use linerate_io::xdp::switch_offload::{self as xo, OffloadMaps, OffloadStats, SwAct};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Most offloaded entries, over all ports (the XDP maps' size).
pub const MAX_ENTRIES: usize = xo::MAX_FLOWS as usize;
/// Offers waiting for the offloader at most (a full queue drops them).
pub const OFFER_QUEUE: usize = 4096;
/// How often the offloader folds the XDP counters into the rules'.
pub const FOLD_EVERY: Duration = Duration::from_millis(100);
/// An entry without a packet for this long is removed.
pub const IDLE_NS: u64 = 10_000_000_000;
/// Most lookups one compiled walk follows.
const MAX_STEPS: usize = 16;

/// The offload's own counters.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct OffloadCounters {
    /// Keys the datapath offered.
    pub offered: u64,
    /// Offers dropped because the offloader's queue was full.
    pub offer_queue_full: u64,
    /// Entries installed.
    pub installed: u64,
    /// Offers whose outcome XDP cannot do (they stay in user space).
    pub not_offloadable: u64,
    /// Offers refused: the bound's entries installed already.
    pub refused_full: u64,
    /// Offers whose map update failed.
    pub install_errors: u64,
    /// Entries removed because a table they depend on changed.
    pub removed_changed: u64,
    /// Entries removed after [`IDLE_NS`] without traffic.
    pub removed_idle: u64,
    /// Entries installed now.
    pub entries: u64,
}

/// What XDP does for one key, and what it depends on.
#[derive(Debug, Clone)]
pub struct Compiled {
    pub act: SwAct,
    /// The rules the walk hit, in order (their counters take the entry's).
    pub rules: Vec<Arc<RuleStats>>,
    /// The tables looked up, as bits `table % 64`.
    pub deps: u64,
}

/// Why a key's outcome stays in user space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotOffloadable {
    /// Not an untagged IPv4 TCP/UDP key (XDP builds no other).
    Shape,
    /// Fail-open, or a walk too long.
    Walk,
    /// An action XDP does not do here.
    Action,
    /// The output port is the input port or no port of the switch.
    Port,
}

fn fold16(mut a: u32) -> u32 {
    while a > 0xffff {
        a = (a & 0xffff) + (a >> 16);
    }
    a
}

/// `!old + new` for each 16-bit half of a 32-bit field.
fn delta32(old: u32, new: u32) -> u32 {
    (!(old >> 16) & 0xffff) + (!old & 0xffff) + (new >> 16) + (new & 0xffff)
}

/// The outcome of the pipeline in `ft` for `k` (packet words as a frame
/// enters table 0), if XDP can carry it out; `ports`: the switch's
/// OpenFlow port numbers.
pub fn compile(ft: &FlowTable, k: &Key, ports: &[u32]) -> Result<Compiled, NotOffloadable> {
    use NotOffloadable as N;
    let w = &k.w;
    let proto = ((w[1] >> 8) & 0xff) as u8;
    if w[0] & 0xffff_ffff != 0x0800 << 16 || !(proto == 6 || proto == 17) {
        return Err(N::Shape);
    }
    if ft.fail_open() {
        return Err(N::Walk);
    }
    let in_port = (w[0] >> 32) as u32;
    let ttl = ((w[2] >> 8) & 0xff) as u32;
    let (src, dst) = (w[5] as u32, w[7] as u32);
    let (sport, dport) = (
        ((w[3] >> key::TP_SRC.shift) & 0xffff) as u32,
        ((w[3] >> key::TP_DST.shift) & 0xffff) as u32,
    );
    let mut act = SwAct::default();
    let (mut nsrc, mut ndst, mut nsport, mut ndport) = (src, dst, sport, dport);
    let mut out: Option<u32> = None;
    let mut rules = Vec::new();
    let mut deps = 0u64;
    let mut t = 0u8;
    let mut stats = super::classifier::LookupStats::default();
    let mut miss = false;
    // Any rewrite (before or after the output): a later table would look
    // the rewritten headers up, which this does not model.
    let mut rewrote = false;
    for _ in 0..MAX_STEPS {
        deps |= 1 << (t % 64);
        // A miss ends the walk: dropped ("no match") unless output already.
        let Some(e) = ft.table(t).and_then(|tb| {
            let id = tb.classifier().lookup_one(k, &mut stats, None)?;
            tb.entry(id)
        }) else {
            miss = true;
            break;
        };
        rules.push(e.stats.clone());
        let mut next = None;
        for a in &e.rule.actions {
            // After the one output, rewrites change nothing that is sent.
            let live = out.is_none();
            match a {
                Action::Output(p) => {
                    if out.is_some() {
                        return Err(N::Action);
                    }
                    if *p == in_port || !ports.contains(p) {
                        return Err(N::Port);
                    }
                    out = Some(*p);
                }
                Action::DecTtl(_) if live => {
                    if ttl <= 1 || act.flags & xo::ACT_DEC_TTL != 0 {
                        return Err(N::Action);
                    }
                    act.flags |= xo::ACT_DEC_TTL;
                }
                // After the output it still ends the walk on TTL <= 1 (a
                // packet-in, maybe): the datapath decides.
                Action::DecTtl(_) if ttl <= 1 => return Err(N::Action),
                Action::Set(s) if live => match *s {
                    SetField::EthDst(m) => {
                        act.flags |= xo::ACT_DL_DST;
                        act.dl_dst = m;
                    }
                    SetField::EthSrc(m) => {
                        act.flags |= xo::ACT_DL_SRC;
                        act.dl_src = m;
                    }
                    SetField::Ipv4Src(a) => {
                        act.flags |= xo::ACT_NW_SRC;
                        nsrc = u32::from_be_bytes(a);
                    }
                    SetField::Ipv4Dst(a) => {
                        act.flags |= xo::ACT_NW_DST;
                        ndst = u32::from_be_bytes(a);
                    }
                    // A TCP field on UDP (or back) changes nothing, as in the datapath.
                    SetField::TcpSrc(p) | SetField::UdpSrc(p) => {
                        if (proto == 6) == matches!(s, SetField::TcpSrc(_)) {
                            act.flags |= xo::ACT_TP_SRC;
                            nsport = p as u32;
                        }
                    }
                    SetField::TcpDst(p) | SetField::UdpDst(p) => {
                        if (proto == 6) == matches!(s, SetField::TcpDst(_)) {
                            act.flags |= xo::ACT_TP_DST;
                            ndport = p as u32;
                        }
                    }
                    _ => return Err(N::Action),
                },
                Action::GotoTable(n) => next = Some(*n),
                // Rewrites after the output: nothing sent sees them.
                Action::Set(_) | Action::DecTtl(_) if !live => {}
                _ => return Err(N::Action),
            }
            rewrote |= matches!(a, Action::Set(_) | Action::DecTtl(_));
        }
        if next.is_some() && rewrote {
            return Err(N::Action);
        }
        match next {
            Some(n) => t = n,
            None => break,
        }
        if rules.len() == MAX_STEPS {
            return Err(N::Walk);
        }
    }
    match out {
        None => {
            act.flags = xo::ACT_DROP | if miss { xo::ACT_MISS } else { 0 };
        }
        Some(p) => act.out_port = p,
    }
    let mut ip = 0u32;
    let mut l4 = 0u32;
    if act.flags & xo::ACT_DEC_TTL != 0 {
        // The 16-bit word TTL | protocol.
        let old = (ttl << 8) | proto as u32;
        ip += (!old & 0xffff) + (old - 0x100);
    }
    if nsrc != src {
        ip += delta32(src, nsrc);
        l4 += delta32(src, nsrc);
    }
    if ndst != dst {
        ip += delta32(dst, ndst);
        l4 += delta32(dst, ndst);
    }
    if nsport != sport {
        l4 += (!sport & 0xffff) + nsport;
    }
    if ndport != dport {
        l4 += (!dport & 0xffff) + ndport;
    }
    act.nw_src = nsrc.to_be_bytes();
    act.nw_dst = ndst.to_be_bytes();
    act.tp_src = (nsport as u16).to_be_bytes();
    act.tp_dst = (ndport as u16).to_be_bytes();
    act.ip_delta = fold16(ip);
    act.l4_delta = fold16(l4);
    Ok(Compiled { act, rules, deps })
}

struct Entry {
    /// Index of the ingress port in [`Inner::ports`].
    port: usize,
    slot: u32,
    rules: Vec<Arc<RuleStats>>,
    deps: u64,
    /// The slot's counters when last folded.
    folded: (u64, u64),
    last_ns: u64,
}

/// A removed entry's slot, folded again before reuse, which waits
/// [`QUARANTINE_NS`]: a frame that found the entry just before its
/// removal (with a forwarding CPU, one still in that CPU's queue) may
/// still count there and read its action by slot.
struct Retired {
    port: usize,
    slot: u32,
    rules: Vec<Arc<RuleStats>>,
    folded: (u64, u64),
    at_ns: u64,
}

/// How long a removed entry's slot waits before reuse.
const QUARANTINE_NS: u64 = 200_000_000;

struct Inner {
    /// (OpenFlow number, maps) per port.
    ports: Vec<(u32, Arc<Mutex<OffloadMaps>>)>,
    entries: HashMap<[u64; 8], Entry>,
    free: Vec<u32>,
    next_slot: u32,
    retired: Vec<Retired>,
}

/// The switch's offload: its ports' XDP maps and what is installed.
pub struct Offload {
    inner: Mutex<Inner>,
    pub counters: Counters,
    /// Bumped when entries go (idle, a change) or an offer was lost: the
    /// datapath's filter of offered flows starts again ([`Offerer::sync`]).
    generation: AtomicU64,
    /// At most this many entries (1..=[`MAX_ENTRIES`]).
    max_entries: usize,
}

/// [`OffloadCounters`] as they are kept (atomics).
#[derive(Default)]
pub struct Counters {
    pub offered: AtomicU64,
    pub offer_queue_full: AtomicU64,
    installed: AtomicU64,
    not_offloadable: AtomicU64,
    refused_full: AtomicU64,
    install_errors: AtomicU64,
    removed_changed: AtomicU64,
    removed_idle: AtomicU64,
    entries: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Add what a slot counted since `folded` (its counts `c`) to `rules`, and
/// mark `c` folded.
fn fold_slot(rules: &[Arc<RuleStats>], folded: &mut (u64, u64), c: (u64, u64), now_ns: u64) {
    let (dp, db) = (c.0.wrapping_sub(folded.0), c.1.wrapping_sub(folded.1));
    *folded = c;
    if dp == 0 {
        return;
    }
    for r in rules {
        r.xdp_packets.fetch_add(dp, Relaxed);
        r.xdp_bytes.fetch_add(db, Relaxed);
        if r.first_hit_ns.load(Relaxed) == 0 {
            r.first_hit_ns.store(now_ns, Relaxed);
        }
        r.last_hit_ns.fetch_max(now_ns, Relaxed);
    }
}

impl Offload {
    /// Over `ports`: (OpenFlow number, ifindex, that port's maps). Writes
    /// each port's number and every port's ifindex into every port's maps;
    /// with `cpu`, XDP forwards the entries' frames on that CPU (the lookup
    /// stays on the receiving one); at most `max_entries` entries
    /// (1..=[`MAX_ENTRIES`]).
    pub fn new(
        ports: Vec<(u32, u32, Arc<Mutex<OffloadMaps>>)>,
        cpu: Option<u32>,
        max_entries: usize,
    ) -> Result<Offload, String> {
        if !(1..=MAX_ENTRIES).contains(&max_entries) {
            return Err(format!(
                "offload: {max_entries} entries asked for, 1 to {MAX_ENTRIES} possible"
            ));
        }
        for (no, _, m) in &ports {
            let mut m = lock(m);
            m.set_in_port(*no).map_err(|e| e.0)?;
            if let Some(c) = cpu {
                m.set_cpu(c).map_err(|e| e.0)?;
            }
            for (eno, eif, _) in &ports {
                m.set_port(*eno, *eif).map_err(|e| e.0)?;
            }
        }
        Ok(Offload {
            inner: Mutex::new(Inner {
                ports: ports.into_iter().map(|(no, _, m)| (no, m)).collect(),
                entries: HashMap::new(),
                free: Vec::new(),
                next_slot: 0,
                retired: Vec::new(),
            }),
            counters: Counters::default(),
            generation: AtomicU64::new(0),
            max_entries,
        })
    }

    /// The counters now.
    pub fn counters(&self) -> OffloadCounters {
        let c = &self.counters;
        OffloadCounters {
            offered: c.offered.load(Relaxed),
            offer_queue_full: c.offer_queue_full.load(Relaxed),
            installed: c.installed.load(Relaxed),
            not_offloadable: c.not_offloadable.load(Relaxed),
            refused_full: c.refused_full.load(Relaxed),
            install_errors: c.install_errors.load(Relaxed),
            removed_changed: c.removed_changed.load(Relaxed),
            removed_idle: c.removed_idle.load(Relaxed),
            entries: c.entries.load(Relaxed),
        }
    }

    /// The XDP programs' counters summed over the ports.
    pub fn xdp_stats(&self) -> OffloadStats {
        let g = lock(&self.inner);
        let mut s = OffloadStats::default();
        for (_, m) in &g.ports {
            if let Ok(x) = lock(m).stats() {
                s += x;
            }
        }
        s
    }

    /// Compile and install the outcome for `k` under the current version
    /// of `ctl`'s tables (the lock orders it against [`Self::published`]).
    pub fn offer(&self, ctl: &super::table::TableHandle, k: &Key) {
        let mut g = lock(&self.inner);
        if g.entries.contains_key(&pkt_words(k)) {
            return;
        }
        let in_port = (k.w[0] >> 32) as u32;
        let Some(pi) = g.ports.iter().position(|(no, _)| *no == in_port) else {
            return;
        };
        let nos: Vec<u32> = g.ports.iter().map(|(n, _)| *n).collect();
        let table = ctl.current();
        let c = match compile(&table, k, &nos) {
            Ok(c) => c,
            Err(_) => {
                self.counters.not_offloadable.fetch_add(1, Relaxed);
                return;
            }
        };
        let lost = |o: &Offload| {
            o.counters.install_errors.fetch_add(1, Relaxed);
            o.generation.fetch_add(1, Relaxed);
        };
        let slot = match g.free.pop() {
            Some(s) => s,
            None if (g.next_slot as usize) < self.max_entries => {
                g.next_slot += 1;
                g.next_slot - 1
            }
            None => {
                self.counters.refused_full.fetch_add(1, Relaxed);
                return;
            }
        };
        let maps = g.ports[pi].1.clone();
        let mut m = lock(&maps);
        // The slot's counters so far (a reused slot starts from them).
        let base = match m.slot(slot) {
            Ok(b) => b,
            Err(_) => {
                g.free.push(slot);
                lost(self);
                return;
            }
        };
        let mut act = c.act;
        act.slot = slot;
        if m.insert(&pkt_words(k), &act).is_err() {
            g.free.push(slot);
            lost(self);
            return;
        }
        drop(m);
        g.entries.insert(
            pkt_words(k),
            Entry {
                port: pi,
                slot,
                rules: c.rules,
                deps: c.deps,
                folded: base,
                last_ns: super::table::mono_ns(),
            },
        );
        self.counters.installed.fetch_add(1, Relaxed);
        self.counters.entries.store(g.entries.len() as u64, Relaxed);
    }

    /// A new table version was published (`old` -> `new`; under the tables'
    /// edit lock): remove the entries that depend on a table that changed.
    pub fn published(&self, old: &FlowTable, new: &FlowTable) {
        let all = old.fail_open() != new.fail_open();
        let (a, b) = (
            super::xlate::stale_epochs(old),
            super::xlate::stale_epochs(new),
        );
        let mut changed = 0u64;
        for i in 0..64 {
            if a[i] != b[i] {
                changed |= 1 << i;
            }
        }
        if changed == 0 && !all {
            return;
        }
        let mut g = lock(&self.inner);
        let now = super::table::mono_ns();
        let doomed: Vec<[u64; 8]> = g
            .entries
            .iter()
            .filter(|(_, e)| all || e.deps & changed != 0)
            .map(|(k, _)| *k)
            .collect();
        for k in doomed {
            if let Some(e) = g.entries.remove(&k) {
                g.remove(&k, e, now);
                self.counters.removed_changed.fetch_add(1, Relaxed);
            }
        }
        self.generation.fetch_add(1, Relaxed);
        self.counters.entries.store(g.entries.len() as u64, Relaxed);
    }

    /// Add what the entries counted in XDP to their rules; free the slots
    /// of entries removed before the last fold; remove idle entries.
    pub fn fold(&self) {
        let mut g = lock(&self.inner);
        let now = super::table::mono_ns();
        let g = &mut *g;
        for mut r in std::mem::take(&mut g.retired) {
            if let Ok(c) = lock(&g.ports[r.port].1).slot(r.slot) {
                fold_slot(&r.rules, &mut r.folded, c, now);
            }
            if now.saturating_sub(r.at_ns) >= QUARANTINE_NS {
                g.free.push(r.slot);
            } else {
                g.retired.push(r);
            }
        }
        let mut idle = Vec::new();
        for (k, e) in g.entries.iter_mut() {
            let Ok(c) = lock(&g.ports[e.port].1).slot(e.slot) else {
                continue;
            };
            if c.0 != e.folded.0 {
                fold_slot(&e.rules, &mut e.folded, c, now);
                e.last_ns = now;
            } else if now.saturating_sub(e.last_ns) >= IDLE_NS {
                idle.push(*k);
            }
        }
        if !idle.is_empty() {
            self.generation.fetch_add(1, Relaxed);
        }
        for k in idle {
            if let Some(e) = g.entries.remove(&k) {
                g.remove(&k, e, now);
                self.counters.removed_idle.fetch_add(1, Relaxed);
            }
        }
        self.counters.entries.store(g.entries.len() as u64, Relaxed);
    }

    /// The offloader: install what the datapath offers, fold every
    /// [`FOLD_EVERY`]; returns when the datapath's sender is gone.
    pub fn serve(&self, ctl: &super::table::TableHandle, offers: Receiver<Key>) {
        let mut last = std::time::Instant::now();
        loop {
            match offers.recv_timeout(FOLD_EVERY) {
                Ok(k) => self.offer(ctl, &k),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            if last.elapsed() >= FOLD_EVERY {
                self.fold();
                last = std::time::Instant::now();
            }
        }
        self.fold();
    }
}

impl super::table::Offloaded for Offload {
    fn published(&self, old: &FlowTable, new: &FlowTable) {
        Offload::published(self, old, new)
    }
    fn fold(&self) {
        Offload::fold(self)
    }
    fn xdp_stats(&self) -> OffloadStats {
        Offload::xdp_stats(self)
    }
    fn counters_json(&self) -> serde_json::Value {
        serde_json::to_value(self.counters()).unwrap_or_default()
    }
}

impl Inner {
    /// Take `e` (of key `k`) out of XDP: its final counts folded, its slot
    /// retired until the next fold (a frame that found it just before may
    /// still count).
    fn remove(&mut self, k: &[u64; 8], e: Entry, now: u64) {
        let mut m = lock(&self.ports[e.port].1);
        m.remove(k);
        let mut folded = e.folded;
        if let Ok(c) = m.slot(e.slot) {
            fold_slot(&e.rules, &mut folded, c, now);
        }
        drop(m);
        self.retired.push(Retired {
            port: e.port,
            slot: e.slot,
            rules: e.rules,
            folded,
            at_ns: now,
        });
    }
}

fn pkt_words(k: &Key) -> [u64; 8] {
    let mut w = [0u64; 8];
    w.copy_from_slice(&k.w[..key::PKT_WORDS]);
    w
}

/// The datapath's side: offers a key once per flow (a filter of the keys
/// offered since the tables last changed), never blocking.
pub struct Offerer {
    tx: std::sync::mpsc::SyncSender<Key>,
    seen: Box<[u64]>,
    offload: Arc<Offload>,
    generation: u64,
}

/// Slots of the offer filter (a power of two).
const SEEN: usize = 4096;

impl Offerer {
    pub fn new(tx: std::sync::mpsc::SyncSender<Key>, offload: Arc<Offload>) -> Offerer {
        Offerer {
            tx,
            seen: vec![0; SEEN].into_boxed_slice(),
            offload,
            generation: 0,
        }
    }

    /// Once per batch: if entries went (or an offer was lost) since the
    /// last call, every flow may be offered again (one atomic load).
    #[inline]
    pub fn sync(&mut self) {
        let g = self.offload.generation.load(Relaxed);
        if g != self.generation {
            self.generation = g;
            self.reset();
        }
    }

    /// The tables changed: every flow may be offered again.
    #[cold]
    pub fn reset(&mut self) {
        self.seen.fill(0);
    }

    /// Offer `k` unless it was offered lately or is not of a shape XDP
    /// keys. No allocation: a filter probe and, for a new flow only, a
    /// bounded channel's `try_send` (which may take the channel's lock and
    /// wake the offloader: once per flow, not per packet).
    #[inline]
    pub fn offer(&mut self, k: &Key) {
        let w = &k.w;
        let proto = (w[1] >> 8) & 0xff;
        if w[0] & 0xffff_ffff != 0x0800 << 16 || !(proto == 6 || proto == 17) {
            return;
        }
        let h = k.hash64() | 1;
        let s = &mut self.seen[(h as usize) & (SEEN - 1)];
        if *s == h {
            return;
        }
        *s = h;
        self.offload.counters.offered.fetch_add(1, Relaxed);
        if self.tx.try_send(*k).is_err() {
            // Offered again when it comes next.
            *s = 0;
            self.offload.counters.offer_queue_full.fetch_add(1, Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::switch::Rule;
    use linerate_wire::checksum;

    fn table(rules: &[&str]) -> FlowTable {
        let mut t = FlowTable::new();
        for r in rules {
            t.add_flow(Rule::parse(r).unwrap(), 1).unwrap();
        }
        t
    }

    fn udp_frame(ttl: u8, csum: bool) -> Vec<u8> {
        let mut f = vec![0u8; 64];
        f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        f[12] = 8;
        let ip = &mut f[14..34];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&50u16.to_be_bytes());
        ip[8] = ttl;
        ip[9] = 17;
        ip[12..16].copy_from_slice(&[10, 0, 0, 1]);
        ip[16..20].copy_from_slice(&[10, 0, 0, 2]);
        let c = checksum::checksum(ip);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        f[34..36].copy_from_slice(&1000u16.to_be_bytes());
        f[36..38].copy_from_slice(&53u16.to_be_bytes());
        f[38..40].copy_from_slice(&30u16.to_be_bytes());
        if csum {
            let c = checksum::l4_checksum_v4(&[10, 0, 0, 1], &[10, 0, 0, 2], 17, &f[34..64]);
            f[40..42].copy_from_slice(&c.to_be_bytes());
        }
        f
    }

    /// What `xdp_switch` does with an entry, in Rust (the C's steps).
    fn apply(f: &mut [u8], a: &SwAct) {
        let csum = |hc: u16, d: u32| -> u16 {
            let mut acc = (!hc) as u32 + d;
            acc = (acc & 0xffff) + (acc >> 16);
            acc = (acc & 0xffff) + (acc >> 16);
            !(acc as u16)
        };
        if a.flags & xo::ACT_DL_DST != 0 {
            f[0..6].copy_from_slice(&a.dl_dst);
        }
        if a.flags & xo::ACT_DL_SRC != 0 {
            f[6..12].copy_from_slice(&a.dl_src);
        }
        if a.flags & (xo::ACT_DEC_TTL | xo::ACT_NW_SRC | xo::ACT_NW_DST) != 0 {
            if a.flags & xo::ACT_DEC_TTL != 0 {
                f[22] -= 1;
            }
            if a.flags & xo::ACT_NW_SRC != 0 {
                f[26..30].copy_from_slice(&a.nw_src);
            }
            if a.flags & xo::ACT_NW_DST != 0 {
                f[30..34].copy_from_slice(&a.nw_dst);
            }
            let hc = u16::from_be_bytes([f[24], f[25]]);
            f[24..26].copy_from_slice(&csum(hc, a.ip_delta).to_be_bytes());
        }
        if a.flags & (xo::ACT_NW_SRC | xo::ACT_NW_DST | xo::ACT_TP_SRC | xo::ACT_TP_DST) != 0 {
            if a.flags & xo::ACT_TP_SRC != 0 {
                f[34..36].copy_from_slice(&a.tp_src);
            }
            if a.flags & xo::ACT_TP_DST != 0 {
                f[36..38].copy_from_slice(&a.tp_dst);
            }
            let lc = u16::from_be_bytes([f[40], f[41]]);
            if lc != 0 {
                let mut n = csum(lc, a.l4_delta);
                if n == 0 {
                    n = 0xffff;
                }
                f[40..42].copy_from_slice(&n.to_be_bytes());
            }
        }
    }

    #[test]
    fn rewrites_give_the_frame_the_datapath_gives() {
        use crate::switch::actions::{execute, FrameBuf};
        let rule = "udp,actions=set_field:02:00:00:00:00:09->eth_dst,mod_dl_src:02:00:00:00:00:08,set_field:192.168.7.7->ip_src,mod_nw_dst:1.2.3.4,set_field:4242->udp_dst,mod_tp_src:7,dec_ttl,output:2";
        for csum in [true, false] {
            for ttl in [2u8, 64, 255] {
                let t = table(&[rule]);
                let f = udp_frame(ttl, csum);
                let k = Key::extract_fast(&f, 1).unwrap();
                let c = compile(&t, &k, &[1, 2]).unwrap();
                assert_eq!(c.act.out_port, 2);
                assert_eq!(c.rules.len(), 1);
                let mut x = f.clone();
                apply(&mut x, &c.act);
                // The datapath's own execution of the same rule.
                let mut buf = vec![0u8; 256];
                buf[64..128].copy_from_slice(&f);
                let mut fb = FrameBuf::new(&mut buf, 64, 64).unwrap();
                let mut env = Sink::default();
                execute(&mut fb, &t.flows()[0].rule.actions, &mut env).unwrap();
                assert_eq!(env.out, vec![(2, x.clone())], "ttl {ttl} csum {csum}");
                // And the checksums are right, not merely equal.
                assert_eq!(checksum::checksum(&x[14..34]), 0);
                if csum {
                    let s = checksum::sum(
                        &x[34..64],
                        checksum::pseudo_v4(
                            &x[26..30].try_into().unwrap(),
                            &x[30..34].try_into().unwrap(),
                            17,
                            30,
                        ),
                    );
                    assert_eq!(checksum::fold(s), 0xffff);
                } else {
                    assert_eq!(&x[40..42], &[0, 0]);
                }
            }
        }
    }

    #[derive(Default)]
    struct Sink {
        out: Vec<(u32, Vec<u8>)>,
    }
    impl crate::switch::actions::Env for Sink {
        fn output(&mut self, out: crate::switch::actions::Out, frame: &[u8]) {
            if let crate::switch::actions::Out::Port(p) = out {
                self.out.push((p, frame.to_vec()));
            }
        }
        fn meter(&mut self, _id: u32, _bytes: usize) -> bool {
            true
        }
    }

    #[test]
    fn what_xdp_cannot_do_stays_up() {
        let f = udp_frame(64, true);
        let k = Key::extract_fast(&f, 1).unwrap();
        let no = |rules: &[&str]| compile(&table(rules), &k, &[1, 2, 3]).unwrap_err();
        assert_eq!(no(&["actions=output:2,output:3"]), NotOffloadable::Action);
        assert_eq!(no(&["actions=normal"]), NotOffloadable::Action);
        assert_eq!(no(&["actions=controller"]), NotOffloadable::Action);
        assert_eq!(no(&["actions=output:1"]), NotOffloadable::Port);
        assert_eq!(no(&["actions=output:9"]), NotOffloadable::Port);
        assert_eq!(
            no(&[
                "actions=mod_dl_dst:02:00:00:00:00:01,goto_table:1",
                "table=1,actions=output:2"
            ]),
            NotOffloadable::Action
        );
        // A later table after any rewrite, before or after the output, looks
        // the rewritten headers up.
        assert_eq!(
            no(&[
                "udp,actions=mod_nw_dst:10.0.3.7,output:2,goto_table:1",
                "table=1,actions=output:3"
            ]),
            NotOffloadable::Action
        );
        assert_eq!(
            no(&[
                "actions=output:2,mod_dl_dst:02:00:00:00:00:01,goto_table:1",
                "table=1,actions=drop"
            ]),
            NotOffloadable::Action
        );
        // TTL 1 with dec_ttl, also after the output: the datapath decides
        // (the walk ends there, a packet-in maybe).
        let f1 = udp_frame(1, true);
        let k1 = Key::extract_fast(&f1, 1).unwrap();
        for r in ["actions=dec_ttl,output:2", "actions=output:2,dec_ttl"] {
            assert_eq!(
                compile(&table(&[r]), &k1, &[1, 2]).unwrap_err(),
                NotOffloadable::Action,
                "{r}"
            );
        }
        // With TTL 64 a dec_ttl after the output changes nothing sent.
        let c = compile(&table(&["actions=output:2,dec_ttl"]), &k, &[1, 2]).unwrap();
        assert_eq!((c.act.flags, c.act.out_port), (0, 2));
        // An ARP key is not of XDP's shape.
        let mut arp = k;
        arp.w[0] = (1u64 << 32) | (0x0806 << 16);
        assert_eq!(
            compile(&table(&["actions=output:2"]), &arp, &[1, 2]).unwrap_err(),
            NotOffloadable::Shape
        );
    }

    #[test]
    fn a_goto_chain_and_a_drop_compile_with_their_rules_and_tables() {
        let f = udp_frame(64, true);
        let k = Key::extract_fast(&f, 1).unwrap();
        let t = table(&[
            "priority=5,udp,actions=goto_table:3",
            "table=3,udp,tp_dst=53,actions=output:2,mod_dl_dst:02:00:00:00:00:05",
        ]);
        let c = compile(&t, &k, &[1, 2]).unwrap();
        assert_eq!((c.act.out_port, c.act.flags), (2, 0));
        assert_eq!(c.rules.len(), 2);
        assert_eq!(c.deps, 1 | 1 << 3);
        let d = compile(&table(&["udp,actions=drop"]), &k, &[1, 2]).unwrap();
        assert_eq!((d.act.flags, d.rules.len()), (xo::ACT_DROP, 1));
        // A miss: dropped as such, no rule to count.
        let m = compile(&table(&["tcp,actions=output:2"]), &k, &[1, 2]).unwrap();
        assert_eq!(
            (m.act.flags, m.rules.len()),
            (xo::ACT_DROP | xo::ACT_MISS, 0)
        );
        // A miss after a goto: the first rule counts; after an output, no drop.
        let g = compile(
            &table(&["actions=goto_table:2", "table=2,tcp,actions=drop"]),
            &k,
            &[1, 2],
        )
        .unwrap();
        assert_eq!(
            (g.act.flags, g.rules.len()),
            (xo::ACT_DROP | xo::ACT_MISS, 1)
        );
        let o = compile(
            &table(&["actions=output:2,goto_table:2", "table=2,tcp,actions=drop"]),
            &k,
            &[1, 2],
        )
        .unwrap();
        assert_eq!((o.act.flags, o.act.out_port), (0, 2));
    }
}
