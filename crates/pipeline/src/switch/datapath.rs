//! The switch datapath: run to completion over N ports on one core.
//!
//! Per batch received on a port: extract the keys, classify the batch
//! (exact-match cache, then the tuple-space classifier for the misses),
//! run each packet's actions in place, copy every output into the output
//! port's TX staging area (replication for flood/all/groups is one copy
//! per port, into buffers allocated once at start), send the staged
//! frames of every port once, flush, release the RX batch.
//!
//! Accounting, per received packet (exact after every batch):
//! `received = passed + drops`, where a packet is passed (forwarded) when at
//! least one of its copies was taken by a TX ring, and is otherwise
//! dropped with exactly one reason ([`SwDrop`]). Copies are counted apart
//! per port (`tx_packets`, `tx_dropped`).
//!
//! The table version is loaded once per batch from [`TableHandle`] (lock-free);
//! see [`super::table`] for how changes are published.

use super::actions::{execute, Env, FrameBuf, Meter, Out, Verdict};
use super::classifier::RuleId;
use super::controller::{PacketOut, PinTx, PoutRx};
use super::counters::{CacheCounters, PortCounters, SwDrop, SwStage, SwitchCounters, SwitchCycles};
use super::emc::{Cache, Emc, DEFAULT_INV_PROB, DEFAULT_SLOTS};
use super::group::{self, GroupCtx};
use super::key::Key;
use super::learn::Learn;
use super::learner::{LearnReq, Learner};
use super::link::Links;
use super::megaflow::{self, Megaflows};
use super::normal::{Decision, MacTable};
use super::rule::{Pin, PipeState};
use super::table::{mono_ns, FlowTable, TableHandle};
use super::xlate::{self, End, Mode, PipeEnv, TableCounts, Trace, Walk};

use crate::poll::Poll;
use linerate_io::counters::bump;
use linerate_io::time::rdtsc;
use linerate_io::{Batch, Pkt, PortError, RxPort, TxPort, MAX_BATCH};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;

/// Bytes per staged frame (frames and their VLAN pushes up to this size).
pub const STRIDE: usize = 2048;
// A packet-in carries any frame the datapath handles.
const _: () = assert!(super::controller::PIN_DATA == STRIDE);
/// Headroom of the scratch buffer used by rules that push a VLAN tag.
const HEADROOM: usize = 64;

/// One switch port.
pub struct SwitchPort {
    /// OpenFlow port number (`in_port`, `output:N`).
    pub no: u32,
    pub uri: String,
    pub rx: Box<dyn RxPort>,
    pub tx: Box<dyn TxPort>,
    pub counters: Arc<PortCounters>,
}

impl SwitchPort {
    pub fn new(no: u32, uri: &str, rx: Box<dyn RxPort>, tx: Box<dyn TxPort>) -> SwitchPort {
        SwitchPort {
            no,
            uri: uri.to_string(),
            rx,
            tx,
            counters: Arc::new(PortCounters::default()),
        }
    }
}

/// TX staging of one port: fixed buffers, filled per batch.
struct Stage {
    buf: Box<[u8]>,
    pkts: Vec<Pkt>,
    /// Index of the received packet each staged copy came from.
    src: Vec<u16>,
    cap: usize,
    max_frame: usize,
}

impl Stage {
    fn new(cap: usize, max_frame: usize) -> Stage {
        Stage {
            buf: vec![0u8; cap * STRIDE].into_boxed_slice(),
            pkts: Vec::with_capacity(cap),
            src: Vec::with_capacity(cap),
            cap,
            max_frame: max_frame.min(STRIDE),
        }
    }
}

/// Copy a frame into a staging slot of the same length. Frames of 16 to
/// 128 bytes are copied inline as two overlapping pieces of a fixed size
/// (16, 32 or 64 bytes), which the compiler emits as vector moves: a
/// `memcpy` call cost ~9 cycles of a 64-byte frame's budget, and a loop of
/// pieces is turned back into a `memcpy` call by LLVM.
#[inline(always)]
fn copy_small(dst: &mut [u8], src: &[u8]) {
    let n = src.len();
    if !(16..=128).contains(&n) || dst.len() != n {
        dst.copy_from_slice(src);
        return;
    }
    let (s, d) = (src.as_ptr(), dst.as_mut_ptr());
    // SAFETY: both pieces, [0, k) and [n - k, n), lie within both slices
    // (k <= n), and the slices do not overlap (one is borrowed mutably).
    unsafe {
        if n >= 64 {
            std::ptr::copy_nonoverlapping(s, d, 64);
            std::ptr::copy_nonoverlapping(s.add(n - 64), d.add(n - 64), 64);
        } else if n >= 32 {
            std::ptr::copy_nonoverlapping(s, d, 32);
            std::ptr::copy_nonoverlapping(s.add(n - 32), d.add(n - 32), 32);
        } else {
            std::ptr::copy_nonoverlapping(s, d, 16);
            std::ptr::copy_nonoverlapping(s.add(n - 16), d.add(n - 16), 16);
        }
    }
}

/// The keys of a batch. A [`Key`] is 144 bytes and only 8-aligned, so
/// that stored rules are not padded: the array starts a cache line, and
/// the packet words (the first 64 bytes of each key, all the single-table
/// path reads) of three keys in four straddle two lines. The keys were
/// just written by the extraction, so those lines are in L1; the before
/// and after figures of the growth from 128 bytes show no change
/// (docs/BENCHMARKS.md, neighbour discovery).
#[repr(C, align(64))]
struct BatchKeys([Key; MAX_BATCH]);

/// Per-batch bookkeeping of what happened to each received packet.
struct Fate {
    /// Copies staged.
    staged: [u16; MAX_BATCH],
    /// Copies taken by a TX ring.
    sent: [u16; MAX_BATCH],
    /// Reason of the last copy that could not be staged (TooBig/TxFull).
    copy_fail: [Option<SwDrop>; MAX_BATCH],
}

/// What `execute` calls back into for one packet.
struct Ctx<'a> {
    stages: &'a mut [Stage],
    port_nos: &'a [u32],
    table: &'a FlowTable,
    meters: &'a mut HashMap<u32, Meter>,
    fate: &'a mut Fate,
    copy_drops: &'a mut [u64],
    macs: &'a mut MacTable,
    learner: &'a mut Learner,
    pins: &'a mut Option<PinTx>,
    /// The groups' copies ([`group::MAX_DEPTH`] slots).
    gscratch: &'a mut [u8],
    /// The ports' links (by index), for the groups' liveness.
    links: &'a [AtomicBool],
    /// The input port's index (`usize::MAX` for a packet-out from no
    /// port) and number.
    in_idx: usize,
    in_no: u32,
    pkt: usize,
    now_ns: u64,
}

impl Ctx<'_> {
    #[inline(always)]
    fn stage(&mut self, port_idx: usize, frame: &[u8]) {
        let st = &mut self.stages[port_idx];
        let n = st.pkts.len();
        if frame.len() > st.max_frame {
            self.fate.copy_fail[self.pkt] = Some(SwDrop::TooBig);
            self.copy_drops[port_idx] += 1;
            return;
        }
        if n == st.cap {
            self.fate.copy_fail[self.pkt] = Some(SwDrop::TxFull);
            self.copy_drops[port_idx] += 1;
            return;
        }
        let off = n * STRIDE;
        copy_small(&mut st.buf[off..off + frame.len()], frame);
        // The descriptor points into `st.buf`, which outlives the send below.
        // SAFETY: the bytes are this stage's own slot in `st.buf`, staged for
        // one send: the descriptors are cleared after it, before the slot is
        // reused, and `st.buf` is never resized.
        st.pkts
            .push(unsafe { Pkt::from_raw(st.buf[off..].as_mut_ptr(), frame.len() as u32, 0, 0) });
        st.src.push(self.pkt as u16);
        self.fate.staged[self.pkt] += 1;
    }

    /// A packet-in: counted like a copy taken by a port when the channel
    /// takes it.
    #[cold]
    fn pin(&mut self, p: Pin, frame: &[u8], pipe: &PipeState) {
        let r = match self.pins {
            Some(t) => t.post(&p, self.in_no, pipe, frame, self.now_ns),
            None => Err(SwDrop::NoController),
        };
        match r {
            Ok(()) => {
                self.fate.staged[self.pkt] += 1;
                self.fate.sent[self.pkt] += 1;
            }
            Err(d) => self.fate.copy_fail[self.pkt] = Some(d),
        }
    }

    /// Run group `id` (see [`group`]): its buckets' copies go through
    /// `self`; the scratch slots are lent to it for the call.
    #[inline(never)]
    fn group(&mut self, id: u32, frame: &[u8]) {
        let (table, ports, up) = (self.table, self.port_nos, self.links);
        let cx = GroupCtx {
            groups: table.group_map(),
            ports,
            up,
            budget: std::cell::Cell::new(group::BUDGET),
        };
        let scratch = std::mem::take(&mut self.gscratch);
        group::run(&cx, id, frame, scratch, 0, self);
        self.gscratch = scratch;
    }

    #[inline(always)]
    fn port(&mut self, no: u32, frame: &[u8]) {
        // OpenFlow: output to the input port is skipped (use in_port).
        if let Some(i) = self.port_nos.iter().position(|&p| p == no) {
            if i != self.in_idx {
                self.stage(i, frame);
            }
        }
    }
}

impl Env for Ctx<'_> {
    #[inline(always)]
    fn output(&mut self, out: Out, frame: &[u8]) {
        match out {
            Out::Port(p) => self.port(p, frame),
            // A packet-out from no port has no input port to send to.
            Out::InPort if self.in_idx < self.port_nos.len() => self.stage(self.in_idx, frame),
            Out::InPort => {}
            Out::Flood | Out::All => {
                for i in 0..self.port_nos.len() {
                    if i != self.in_idx {
                        self.stage(i, frame);
                    }
                }
            }
            Out::Group(g) => self.group(g, frame),
            // A single table: no pipeline state.
            Out::Controller(p) => self.pin(p, frame, &PipeState::default()),
        }
    }

    fn meter(&mut self, id: u32, bytes: usize) -> bool {
        match self.meters.get_mut(&id) {
            Some(m) => m.admit(self.now_ns, bytes),
            None => false,
        }
    }

    /// The `INVALID_TTL` packet-in, when a controller asks for it (else
    /// nothing: the drop stays `ttl_expired` and takes no packet-in token).
    #[cold]
    fn ttl_expired(&mut self, p: Pin, frame: &[u8], pipe: &PipeState) {
        if self.pins.as_ref().is_some_and(|t| t.ttl_wanted()) {
            self.pin(p, frame, pipe);
        }
    }
}

impl PipeEnv for Ctx<'_> {
    fn normal(&mut self, k: &Key) -> Decision {
        self.macs.switch(k, self.now_ns)
    }

    fn learn(&mut self, spec: &Arc<Learn>, k: &Key) {
        self.learner.post(spec, k, self.now_ns);
    }

    fn controller(&mut self, p: Pin, frame: &[u8], k: &Key) {
        self.pin(p, frame, &PipeState::of(k));
    }
}

/// Multi-table batches between two re-rankings of the megaflow masks.
const MEGA_RERANK_BATCHES: u64 = 4096;

/// The drop reason of an action's verdict.
#[inline]
fn verdict_drop(v: Verdict) -> SwDrop {
    match v {
        Verdict::TtlExpired => SwDrop::TtlExpired,
        Verdict::Metered => SwDrop::Metered,
        Verdict::NoRoom | Verdict::Malformed => SwDrop::Malformed,
        Verdict::TooDeep => SwDrop::ResubmitLimit,
    }
}

pub use crate::poll::Polling;

/// The datapath of one core.
pub struct Datapath {
    pub ports: Vec<SwitchPort>,
    port_nos: Vec<u32>,
    stages: Vec<Stage>,
    batch: Batch,
    keys: Box<BatchKeys>,
    out: Vec<Option<RuleId>>,
    emc: Emc,
    ctl: Arc<TableHandle>,
    meters: HashMap<u32, Meter>,
    last_table: usize,
    last_epoch: u64,
    fate: Box<Fate>,
    copy_drops: Vec<u64>,
    scratch: Box<[u8]>,
    /// Groups' copies of frames, one slot per depth of a chain of groups.
    gscratch: Box<[u8]>,
    /// The multi-table pipeline's cache, its tables' change epochs, per-table
    /// counts, `normal`'s MAC table and `learn`'s channel.
    pcache: Cache<Trace>,
    traces: Box<([Trace; 64], [Trace; 64])>,
    mega: Megaflows,
    batches: u64,
    stale: Box<[u64; 64]>,
    tcounts: Box<TableCounts>,
    macs: MacTable,
    learner: Learner,
    /// Packet-ins out, packet-outs in (with an OpenFlow channel).
    pins: Option<PinTx>,
    pouts: Option<PoutRx>,
    pub counters: Arc<SwitchCounters>,
    pub cache: Arc<CacheCounters>,
    pub cycles: Arc<SwitchCycles>,
    /// The ports' links (the switch's watcher keeps them current).
    pub links: Arc<Links>,
    /// `--offload xdp`: new flows' keys to the offloader.
    offerer: Option<super::offload::Offerer>,
}

impl Datapath {
    /// `emc`: use the exact-match cache (else every packet goes to the classifier).
    pub fn new(ports: Vec<SwitchPort>, ctl: Arc<TableHandle>, batch: usize, emc: bool) -> Datapath {
        let batch = batch.clamp(1, MAX_BATCH);
        let stages = ports
            .iter()
            .map(|p| Stage::new(2 * batch, p.tx.max_frame()))
            .collect();
        let n = ports.len();
        let uris: Vec<String> = ports.iter().map(|p| p.uri.clone()).collect();
        let links = Arc::new(Links::new(&uris));
        Datapath {
            port_nos: ports.iter().map(|p| p.no).collect(),
            ports,
            stages,
            batch: Batch::new(batch),
            keys: Box::new(BatchKeys([Key::ZERO; MAX_BATCH])),
            out: vec![None; MAX_BATCH],
            emc: Emc::new(DEFAULT_SLOTS, if emc { DEFAULT_INV_PROB } else { 0 }),
            ctl,
            meters: HashMap::new(),
            last_table: 0,
            last_epoch: u64::MAX,
            fate: Box::new(Fate {
                staged: [0; MAX_BATCH],
                sent: [0; MAX_BATCH],
                copy_fail: [None; MAX_BATCH],
            }),
            copy_drops: vec![0; n],
            scratch: vec![0u8; STRIDE + HEADROOM].into_boxed_slice(),
            gscratch: vec![0u8; group::MAX_DEPTH * group::slot_len(STRIDE)].into_boxed_slice(),
            links,
            pcache: Cache::new(
                DEFAULT_SLOTS,
                if emc { DEFAULT_INV_PROB } else { 0 },
                Trace::EMPTY,
            ),
            traces: Box::new(([Trace::EMPTY; 64], [Trace::EMPTY; 64])),
            mega: Megaflows::new(if emc { megaflow::DEFAULT_LIMIT } else { 0 }),
            batches: 0,
            stale: Box::new([0; 64]),
            tcounts: Box::default(),
            macs: MacTable::default(),
            learner: Learner::new(None),
            pins: None,
            pouts: None,
            counters: Arc::new(SwitchCounters::default()),
            cache: Arc::new(CacheCounters::default()),
            cycles: Arc::new(SwitchCycles::default()),
            offerer: None,
        }
    }

    /// Offer new flows to XDP (`--offload xdp`).
    pub fn set_offerer(&mut self, o: super::offload::Offerer) {
        self.offerer = Some(o);
    }

    /// Send `learn(...)` requests to `tx` (without, `learn` does nothing).
    pub fn set_learner(&mut self, tx: std::sync::mpsc::SyncSender<LearnReq>) {
        self.learner = Learner::new(Some(tx));
    }

    /// Hand packet-ins to the OpenFlow channel and take its packet-outs
    /// (without, a `controller` action drops as `no_controller`).
    pub fn set_controller(&mut self, pins: PinTx, pouts: PoutRx) {
        self.pins = Some(pins);
        self.pouts = Some(pouts);
    }

    /// A new table version: keep the bucket state of unchanged meters,
    /// start new or changed ones full; the tables' change epochs. Once per
    /// rule change, not per packet.
    #[cold]
    fn sync_meters(&mut self, t: &FlowTable) {
        *self.stale = xlate::stale_epochs(t);
        if let Some(o) = &mut self.offerer {
            o.reset();
        }
        self.meters.retain(|id, _| t.meters().any(|m| m.id == *id));
        for m in t.meters() {
            let keep = matches!(self.meters.get(&m.id),
                Some(o) if o.unit == m.unit && o.rate == m.rate && o.burst == m.burst);
            if !keep {
                self.meters.insert(m.id, m.clone());
            }
        }
    }

    /// Receive and switch at most one batch from port `pi`. Returns the
    /// number of packets received.
    pub fn poll_port(&mut self, pi: usize, profile: bool) -> Result<usize, PortError> {
        let t0 = if profile { rdtsc() } else { 0 };
        let n = self.ports[pi].rx.recv(&mut self.batch)?;
        if n == 0 {
            self.ports[pi].tx.flush()?;
            if profile {
                self.cycles.empty_poll(rdtsc().wrapping_sub(t0));
            }
            return Ok(0);
        }
        let t1 = if profile { rdtsc() } else { 0 };
        // One lock-free load per batch; this version serves the whole batch.
        let table = self.ctl.current();
        // The batch's time after the load: a rule's first hit is then never
        // stamped before the rule was created (a thread preempted between a
        // clock read and the load had stamped hits 2 ms before creation).
        let now_ns = mono_ns();
        let tp = Arc::as_ptr(&table) as usize;
        // The epoch too: a new version may be allocated where a freed one
        // was, and the caches' validity needs this version's epochs.
        if tp != self.last_table || table.epoch() != self.last_epoch {
            self.last_table = tp;
            self.last_epoch = table.epoch();
            self.sync_meters(&table);
        }
        let in_no = self.port_nos[pi];
        let mut bytes = 0u64;
        for (k, p) in self.keys.0.iter_mut().zip(self.batch.pkts()) {
            k.extract_into(p.bytes(), in_no);
            bytes += p.len() as u64;
        }
        if let Some(o) = &mut self.offerer {
            // Frames of flows XDP does not forward yet (or cannot).
            o.sync();
            for k in &self.keys.0[..n] {
                o.offer(k);
            }
        }
        let t2 = if profile { rdtsc() } else { 0 };
        let mut fate_drop: [Option<SwDrop>; MAX_BATCH] = [None; MAX_BATCH];
        {
            let fate = &mut *self.fate;
            fate.staged[..n].fill(0);
            fate.sent[..n].fill(0);
            fate.copy_fail[..n].fill(None);
        }
        let t3 = if table.fail_open() {
            self.fail_open_batch(pi, n, &table, now_ns, &mut fate_drop, profile)
        } else if table.multi() {
            self.pipeline_batch(pi, n, &table, now_ns, &mut fate_drop, profile)
        } else {
            self.table0_batch(pi, n, &table, now_ns, &mut fate_drop, profile)
        };
        let t4 = if profile { rdtsc() } else { 0 };

        // TX: one send + flush per port that has copies. A port that fails
        // takes none of its copies (counted as tx_error); the batch is still
        // accounted for and released, then the error ends the run.
        let tx_err = self.send_stages();
        let t5 = if profile { rdtsc() } else { 0 };

        let mut drops = [0u64; SwDrop::COUNT];
        let mut fwd = 0u64;
        for (j, fd) in fate_drop[..n].iter().enumerate() {
            match *fd {
                Some(d) => drops[d as usize] += 1,
                None if self.fate.sent[j] > 0 => fwd += 1,
                None => {
                    let d = self.fate.copy_fail[j].unwrap_or(SwDrop::TxFull);
                    drops[d as usize] += 1;
                }
            }
        }
        let multi = table.multi();
        if !multi {
            // Table 0's counters, once per batch: its matches are the
            // packets not dropped for no match (counted here, not in the
            // actions loop, where every live value costs a register).
            if let Some(t0) = table.table(0) {
                bump(&t0.stats.lookups, n as u64);
                bump(
                    &t0.stats.matches,
                    n as u64 - drops[SwDrop::NoMatch as usize],
                );
            }
        }
        let c = &self.counters;
        bump(&c.received, n as u64);
        bump(&c.received_bytes, bytes);
        bump(&c.passed, fwd);
        for (k, &d) in drops.iter().enumerate() {
            if d > 0 {
                bump(&c.drops[k], d);
            }
        }
        let pc = &self.ports[pi].counters;
        bump(&pc.rx_packets, n as u64);
        bump(&pc.rx_bytes, bytes);
        // The two caches' counters together (a run uses one or the other,
        // or both around a change from one table to many).
        let ps = self.pcache.stats;
        let es = if ps.hits | ps.misses == 0 {
            self.emc.stats
        } else {
            self.emc.stats + ps
        };
        let cs = self.emc.cls_stats;
        let cc = &self.cache;
        if multi {
            // Only the multi-table path moves these.
            cc.learn_requests.store(self.learner.requests, Relaxed);
            cc.learn_queue_full.store(self.learner.queue_full, Relaxed);
            cc.mega_hits.store(self.mega.stats.hits, Relaxed);
            cc.mega_misses.store(self.mega.stats.misses, Relaxed);
            cc.megaflows.store(self.mega.len() as u64, Relaxed);
            cc.mega_masks.store(self.mega.masks() as u64, Relaxed);
        }
        cc.emc_hits.store(es.hits, Relaxed);
        cc.emc_misses.store(es.misses, Relaxed);
        cc.emc_inserts.store(es.inserts, Relaxed);
        cc.emc_skipped_inserts.store(es.skipped_inserts, Relaxed);
        cc.emc_bypassed.store(es.bypassed, Relaxed);
        cc.cls_lookups.store(cs.packets, Relaxed);
        cc.cls_matched.store(cs.matched, Relaxed);
        cc.subtables_searched.store(cs.subtables_searched, Relaxed);
        drop(table);
        // Refused only for a batch of another port (a bug): an error of the run.
        let released = self.ports[pi].rx.release(&mut self.batch);
        if profile {
            let t6 = rdtsc();
            let cy = &self.cycles;
            cy.add(SwStage::Rx, t1.wrapping_sub(t0));
            cy.add(SwStage::Extract, t2.wrapping_sub(t1));
            cy.add(SwStage::Lookup, t3.wrapping_sub(t2));
            cy.add(SwStage::Actions, t4.wrapping_sub(t3));
            cy.add(SwStage::Tx, t5.wrapping_sub(t4));
            cy.add(SwStage::Buffers, t6.wrapping_sub(t5));
            cy.batch();
        }
        match tx_err {
            Some(e) => Err(e),
            None => released.map(|()| n),
        }
    }

    /// Send every port's staged copies (one send + flush per port that has
    /// some) and note in the fates which were taken; the first port error.
    #[inline(always)]
    fn send_stages(&mut self) -> Option<PortError> {
        let mut tx_err: Option<PortError> = None;
        for (i, st) in self.stages.iter_mut().enumerate() {
            let port = &mut self.ports[i];
            if st.pkts.is_empty() {
                if self.copy_drops[i] > 0 {
                    bump(&port.counters.tx_dropped, self.copy_drops[i]);
                    self.copy_drops[i] = 0;
                }
                continue;
            }
            let r = port.tx.send(&st.pkts);
            let (sent, why) = match r.and_then(|k| port.tx.flush().map(|()| k)) {
                Ok(k) => (k, SwDrop::TxFull),
                Err(e) => {
                    tx_err.get_or_insert(e);
                    (0, SwDrop::TxError)
                }
            };
            let mut sb = 0u64;
            for (k, p) in st.pkts[..sent].iter().enumerate() {
                sb += p.len() as u64;
                self.fate.sent[st.src[k] as usize] += 1;
            }
            let unsent = st.pkts.len() - sent;
            for &s in &st.src[sent..] {
                self.fate.copy_fail[s as usize] = Some(why);
            }
            let c = &port.counters;
            bump(&c.tx_packets, sent as u64);
            bump(&c.tx_bytes, sb);
            bump(&c.tx_dropped, unsent as u64 + self.copy_drops[i]);
            self.copy_drops[i] = 0;
            st.pkts.clear();
            st.src.clear();
        }
        tx_err
    }

    /// Run the packet-outs waiting (at most [`super::controller::POUT_QUEUE`]
    /// per call): each frame's actions as a rule's, its copies sent at
    /// once. Between batches, never inside one (they use the first fate).
    #[inline(never)]
    pub fn packet_outs(&mut self) -> Result<usize, PortError> {
        let mut done = 0;
        while done < super::controller::POUT_QUEUE {
            let Some(po) = self.pouts.as_ref().and_then(|q| q.next()) else {
                break;
            };
            done += 1;
            // The first fate is this packet-out's (the last batch left
            // its own packet's there).
            let f = &mut *self.fate;
            f.staged[0] = 0;
            f.sent[0] = 0;
            f.copy_fail[0] = None;
            self.packet_out(&po);
            if let Some(e) = self.send_stages() {
                return Err(e);
            }
            let sent = self.fate.sent[0] > 0;
            let c = &self.cache;
            bump(
                if sent {
                    &c.packet_outs
                } else {
                    &c.packet_outs_dropped
                },
                1,
            );
        }
        Ok(done)
    }

    /// One packet-out's actions on its frame (copied, with headroom), as
    /// the pipeline runs a rule's: `table` walks it from table 0.
    fn packet_out(&mut self, po: &PacketOut) {
        let len = po.frame.len();
        if len + HEADROOM > self.scratch.len() {
            return;
        }
        self.scratch[HEADROOM..HEADROOM + len].copy_from_slice(&po.frame);
        let Some(mut f) = FrameBuf::new(&mut self.scratch, HEADROOM, len) else {
            return;
        };
        let table = self.ctl.current();
        let now_ns = mono_ns();
        let mut key = Key::ZERO;
        key.extract_into(&po.frame, po.in_port);
        let in_idx = self
            .port_nos
            .iter()
            .position(|&p| p == po.in_port)
            .unwrap_or(usize::MAX);
        let mut ctx = Ctx {
            stages: &mut self.stages,
            port_nos: &self.port_nos,
            table: &table,
            meters: &mut self.meters,
            fate: &mut self.fate,
            copy_drops: &mut self.copy_drops,
            macs: &mut self.macs,
            learner: &mut self.learner,
            pins: &mut self.pins,
            gscratch: &mut self.gscratch,
            links: self.links.states(),
            in_idx,
            in_no: po.in_port,
            pkt: 0,
            now_ns,
        };
        let mut mode = Mode::live(None);
        let mut walk = Walk::new(
            &table,
            key,
            &mut ctx,
            &mut mode,
            now_ns,
            &mut self.tcounts,
            &mut self.emc.cls_stats,
        );
        let _ = walk.apply(&mut f, &po.actions);
    }

    /// Fail-open (`--fail-mode standalone`, no controller): every frame
    /// `NORMAL`, no rule looked at (Open vSwitch's fail-open flow, above
    /// every rule). Returns the time stamp before the actions (`--profile`:
    /// no lookup).
    #[cold]
    fn fail_open_batch(
        &mut self,
        pi: usize,
        n: usize,
        table: &FlowTable,
        now_ns: u64,
        fate_drop: &mut [Option<SwDrop>; MAX_BATCH],
        profile: bool,
    ) -> u64 {
        let t3 = if profile { rdtsc() } else { 0 };
        let mut ctx = Ctx {
            stages: &mut self.stages,
            port_nos: &self.port_nos,
            table,
            meters: &mut self.meters,
            fate: &mut self.fate,
            copy_drops: &mut self.copy_drops,
            macs: &mut self.macs,
            learner: &mut self.learner,
            pins: &mut self.pins,
            gscratch: &mut self.gscratch,
            links: self.links.states(),
            in_idx: pi,
            in_no: self.port_nos[pi],
            pkt: 0,
            now_ns,
        };
        for (j, p) in self.batch.iter_mut().enumerate().take(n) {
            ctx.pkt = j;
            match ctx.normal(&self.keys.0[j]) {
                Decision::Flood => ctx.output(Out::Flood, p.bytes()),
                Decision::Port(q) => ctx.output(Out::Port(q), p.bytes()),
                Decision::Drop => {}
            }
            if ctx.fate.staged[j] == 0 {
                fate_drop[j] = Some(ctx.fate.copy_fail[j].unwrap_or(SwDrop::NoOutput));
            }
        }
        t3
    }

    /// The single-table fast path for the `n` packets of the batch (keys
    /// extracted): the exact-match cache and table 0's classifier, then
    /// each packet's rule's actions. Returns the time stamp between the
    /// lookup and the actions (`--profile`).
    #[inline(always)]
    fn table0_batch(
        &mut self,
        pi: usize,
        n: usize,
        table: &FlowTable,
        now_ns: u64,
        fate_drop: &mut [Option<SwDrop>; MAX_BATCH],
        profile: bool,
    ) -> u64 {
        self.emc
            .lookup_batch(table.classifier(), &self.keys.0[..n], &mut self.out[..n]);
        let t3 = if profile { rdtsc() } else { 0 };
        // Table 0, once per batch (not through the table list per packet).
        let Some(t0) = table.table(0) else {
            return t3;
        };
        let mut ctx = Ctx {
            stages: &mut self.stages,
            port_nos: &self.port_nos,
            table,
            meters: &mut self.meters,
            fate: &mut self.fate,
            copy_drops: &mut self.copy_drops,
            macs: &mut self.macs,
            learner: &mut self.learner,
            pins: &mut self.pins,
            gscratch: &mut self.gscratch,
            links: self.links.states(),
            in_idx: pi,
            in_no: self.port_nos[pi],
            pkt: 0,
            now_ns,
        };
        // Nothing but the packet's own values lives across this loop (each
        // costs a register: a miss counter here cost ~1 cycle per packet).
        for (j, mut p) in self.batch.iter_mut().enumerate() {
            let Some(e) = self.out[j].and_then(|id| t0.entry(id)) else {
                fate_drop[j] = Some(SwDrop::NoMatch);
                continue;
            };
            e.stats.hit(p.len() as u64, now_ns);
            if e.rule.actions.is_empty() {
                fate_drop[j] = Some(SwDrop::ActionDrop);
                continue;
            }
            ctx.pkt = j;
            let len = p.len() as usize;
            let r = if e.needs_room {
                // Rare: copy into a buffer with headroom for push_vlan.
                let b = p.bytes();
                if len + HEADROOM > self.scratch.len() {
                    Err(Verdict::NoRoom)
                } else {
                    self.scratch[HEADROOM..HEADROOM + len].copy_from_slice(b);
                    match FrameBuf::new(&mut self.scratch, HEADROOM, len) {
                        Some(mut f) => execute(&mut f, &e.rule.actions, &mut ctx),
                        None => Err(Verdict::Malformed),
                    }
                }
            } else {
                let b = p.bytes_mut();
                match FrameBuf::new(b, 0, len) {
                    Some(mut f) => execute(&mut f, &e.rule.actions, &mut ctx),
                    None => Err(Verdict::Malformed),
                }
            };
            if ctx.fate.staged[j] == 0 {
                fate_drop[j] = Some(match r {
                    Err(v) => verdict_drop(v),
                    Ok(()) => ctx.fate.copy_fail[j].unwrap_or(SwDrop::NoOutput),
                });
            }
        }
        t3
    }

    /// The multi-table path for the `n` packets of the batch, 64 at a time:
    /// the exact-match cache of traces, then the megaflows for its misses
    /// (a batch lookup), then each packet's walk through the tables:
    /// replaying a cached trace, or live (then cached as a megaflow and an
    /// exact entry). See [`xlate`] and [`super::megaflow`]. Returns the time
    /// stamp between the lookups and the walks (`--profile`). Never
    /// inlined: the single-table path's loop stays as compact as it was.
    #[inline(never)]
    fn pipeline_batch(
        &mut self,
        pi: usize,
        n: usize,
        table: &FlowTable,
        now_ns: u64,
        fate_drop: &mut [Option<SwDrop>; MAX_BATCH],
        profile: bool,
    ) -> u64 {
        let epoch = table.epoch();
        let mut hashes = [0u64; 64];
        // Traces of megaflow hits, and of live walks (for the exact-match
        // cache, stored after the chunk's walks): kept in the datapath, not
        // set up per batch (20 KB).
        let (traces, fresh) = (&mut self.traces.0, &mut self.traces.1);
        let mut slot = [0usize; 64];
        let mut mega_out = [None; 64];
        // Cycles of the walks (`--profile`: the rest is the lookup stage).
        let mut walk_cycles = 0u64;
        let mut ctx = Ctx {
            stages: &mut self.stages,
            port_nos: &self.port_nos,
            table,
            meters: &mut self.meters,
            fate: &mut self.fate,
            copy_drops: &mut self.copy_drops,
            macs: &mut self.macs,
            learner: &mut self.learner,
            pins: &mut self.pins,
            gscratch: &mut self.gscratch,
            links: self.links.states(),
            in_idx: pi,
            in_no: self.port_nos[pi],
            pkt: 0,
            now_ns,
        };
        let keys = &self.keys.0;
        let (pc, mega, stale) = (&mut self.pcache, &mut self.mega, &*self.stale);
        let mut pkts = self.batch.iter_mut();
        let mut base = 0;
        while base < n {
            let len = (n - base).min(64);
            let ks = &keys[base..base + len];
            let all = if len == 64 {
                u64::MAX
            } else {
                (1u64 << len) - 1
            };
            // Packets without a trace yet; those replayed from an exact
            // entry (`slot`), and those whose trace goes into the
            // exact-match cache after the walks.
            let mut miss = all;
            let mut emc_hit = 0u64;
            let mut store = 0u64;
            let probe = pc.enabled() && pc.probe_this_chunk();
            if probe {
                let mut hits = 0u32;
                for i in 0..len {
                    let h = ks[i].hash_pkt();
                    hashes[i] = h;
                    let found = pc.probe_any(&ks[i], h).filter(|&x| {
                        let at = pc.stamp(x).wrapping_sub(1);
                        let ok = at == epoch || pc.val(x).valid(stale, at);
                        if ok {
                            *pc.stamp(x) = epoch.wrapping_add(1);
                        }
                        ok
                    });
                    if let Some(x) = found {
                        // Replayed from the slot itself: the chunk's own
                        // entries are stored after its walks.
                        slot[i] = x;
                        miss &= !(1 << i);
                        emc_hit |= 1 << i;
                        hits += 1;
                    }
                }
                pc.stats.hits += hits as u64;
                pc.stats.misses += (len as u32 - hits) as u64;
                pc.window(len as u32, hits);
            } else if pc.enabled() {
                pc.stats.bypassed += len as u64;
            }
            // The megaflows for the misses (unless bypassed): else table 0
            // for them in one batch, and their walks start from that.
            let mega_probe = miss != 0 && mega.enabled() && mega.bypass.probe_this_chunk();
            if mega_probe {
                mega.lookup_chunk(ks, miss, &mut mega_out[..len]);
                let (mut probes, mut hits) = (0u32, 0u32);
                let mut it = miss;
                while it != 0 {
                    let i = it.trailing_zeros() as usize;
                    it &= it - 1;
                    probes += 1;
                    let tr = mega_out[i].and_then(|id| mega.get(id, epoch, stale));
                    match tr {
                        Some(tr) => {
                            traces[i] = tr;
                            miss &= !(1 << i);
                            hits += 1;
                            store |= (probe as u64) << i;
                        }
                        None => mega.stats.misses += 1,
                    }
                }
                mega.bypass.window(probes, hits);
            } else if miss != 0 {
                table.classifier().lookup_chunk(
                    ks,
                    miss,
                    &mut self.out[base..base + len],
                    &mut self.emc.cls_stats,
                );
            }
            let tw = if profile { rdtsc() } else { 0 };
            // One live mode for the chunk, reset per packet.
            let mut live_mode = Mode::live(None);
            for i in 0..len {
                let j = base + i;
                let Some(mut p) = pkts.next() else { break };
                ctx.pkt = j;
                let live = miss & (1 << i) != 0;
                let mut replay;
                let mode = if live {
                    // A trace is kept when a cache probed this chunk.
                    live_mode.reset_live((!mega_probe).then_some(self.out[j]), probe || mega_probe);
                    &mut live_mode
                } else {
                    let trace = if emc_hit & (1 << i) != 0 {
                        pc.val(slot[i])
                    } else {
                        &traces[i]
                    };
                    replay = Mode::Replay { trace, pos: 0 };
                    &mut replay
                };
                let len_p = p.len() as usize;
                let mut walk = Walk::new(
                    table,
                    ks[i],
                    &mut ctx,
                    mode,
                    now_ns,
                    &mut self.tcounts,
                    &mut self.emc.cls_stats,
                );
                let r = if table.pushes_tags() {
                    // Room for the tags the pipeline may push.
                    if len_p + HEADROOM > self.scratch.len() {
                        Err(Verdict::NoRoom)
                    } else {
                        self.scratch[HEADROOM..HEADROOM + len_p].copy_from_slice(p.bytes());
                        match FrameBuf::new(&mut self.scratch, HEADROOM, len_p) {
                            Some(mut f) => walk.walk(&mut f),
                            None => Err(Verdict::Malformed),
                        }
                    }
                } else {
                    match FrameBuf::new(p.bytes_mut(), 0, len_p) {
                        Some(mut f) => walk.walk(&mut f),
                        None => Err(Verdict::Malformed),
                    }
                };
                // Only a walk that ran to its end is kept (one cut short by
                // a meter or a missing headroom recorded part of its lookups).
                if live && (probe || mega_probe) && r.is_ok() {
                    if let Some((tr, wc)) = walk.trace().filter(|(t, _)| t.cacheable()) {
                        // Neither cache keys on the neighbour discovery
                        // words (key::ND_WORDS): a walk that read them is
                        // no megaflow, an ND frame no exact entry.
                        if !wc.exact && !wc.reads_nd() {
                            mega.insert(&wc.packet_mask(), &ks[i], *tr, epoch);
                        }
                        if probe && !ks[i].is_nd() {
                            fresh[i] = *tr;
                            store |= 1 << i;
                        }
                    }
                }
                if ctx.fate.staged[j] == 0 {
                    fate_drop[j] = Some(match r {
                        Err(v) => verdict_drop(v),
                        Ok(End::Miss) => SwDrop::NoMatch,
                        Ok(End::Drop) => SwDrop::ActionDrop,
                        Ok(End::Done) => ctx.fate.copy_fail[j].unwrap_or(SwDrop::NoOutput),
                    });
                }
            }
            if profile {
                walk_cycles += rdtsc().wrapping_sub(tw);
            }
            let mut it = store;
            while it != 0 {
                let i = it.trailing_zeros() as usize;
                it &= it - 1;
                let tr = if miss & (1 << i) != 0 {
                    &fresh[i]
                } else {
                    &traces[i]
                };
                pc.insert(&ks[i], hashes[i], epoch, *tr);
            }
            base += len;
        }
        self.tcounts.publish(table);
        self.batches = self.batches.wrapping_add(1);
        if self.batches.is_multiple_of(MEGA_RERANK_BATCHES) {
            self.mega.rerank();
        }
        // The walks count as the actions stage: the caller's next time
        // stamp minus this one is their cycles.
        if profile {
            rdtsc().wrapping_sub(walk_cycles)
        } else {
            0
        }
    }

    /// Run until `stop` is set or every RX port is at its end (finite
    /// sources), on the polling core ([`crate::poll::run`]). Accounting is
    /// exact at return.
    pub fn run(
        &mut self,
        stop: &AtomicBool,
        polling: Polling,
        profile: bool,
    ) -> Result<(), PortError> {
        crate::poll::run(&mut Turns { dp: self, profile }, stop, polling)
    }
}

/// The datapath as the polling core drives it.
struct Turns<'a> {
    dp: &'a mut Datapath,
    profile: bool,
}

impl Poll for Turns<'_> {
    type Error = PortError;
    #[inline]
    fn turn(&mut self) -> Result<usize, PortError> {
        let mut got = 0;
        for i in 0..self.dp.ports.len() {
            got += self.dp.poll_port(i, self.profile)?;
        }
        if self.dp.pouts.is_some() {
            got += self.dp.packet_outs()?;
        }
        Ok(got)
    }
    fn at_end(&self) -> bool {
        self.dp.ports.iter().all(|p| p.rx.at_end())
    }
    fn wait(&mut self, timeout_ms: i32) -> Result<(), PortError> {
        for p in &mut self.dp.ports {
            p.rx.wait(timeout_ms)?;
        }
        Ok(())
    }
    fn flush(&mut self) -> Result<usize, PortError> {
        let mut busy = 0;
        for p in &mut self.dp.ports {
            p.tx.flush()?;
            busy += p.tx.in_flight();
        }
        Ok(busy)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::switch::counters::SwitchSnapshot;
    use crate::switch::group::Group;
    use crate::switch::rule::Rule;
    use linerate_wire::build::{build_udp, FrameParams, IpPair};
    use std::sync::Mutex;

    struct Sink(Arc<Mutex<Vec<Vec<u8>>>>, usize);
    impl TxPort for Sink {
        fn send(&mut self, pkts: &[Pkt]) -> Result<usize, PortError> {
            let n = pkts.len().min(self.1);
            let mut g = self.0.lock().unwrap();
            g.extend(pkts[..n].iter().map(|p| p.bytes().to_vec()));
            Ok(n)
        }
    }

    fn udp() -> Vec<u8> {
        let mut p = FrameParams::new(IpPair::V4 {
            src: [10, 0, 0, 1],
            dst: [10, 0, 0, 2],
        });
        p.payload = &[0u8; 18];
        let mut b = vec![0u8; 2048];
        let n = build_udp(&mut b, &p, 1000, 2000).unwrap();
        b.truncate(n);
        b
    }

    type Got = Arc<Mutex<Vec<Vec<u8>>>>;

    fn bed(n_src: usize, per_call: usize) -> (Vec<SwitchPort>, Vec<Got>) {
        let mut ports = Vec::new();
        let mut sinks = Vec::new();
        for no in 1..=3u32 {
            let got = Arc::new(Mutex::new(Vec::new()));
            let left = if no == 1 { n_src } else { 0 };
            ports.push(SwitchPort::new(
                no,
                "mem",
                Box::new(Cycle {
                    frames: vec![udp()],
                    bufs: (0..MAX_BATCH).map(|_| Vec::with_capacity(2048)).collect(),
                    left,
                    at: 0,
                }),
                Box::new(Sink(got.clone(), per_call)),
            ));
            sinks.push(got);
        }
        (ports, sinks)
    }

    fn run(ctl: Arc<TableHandle>, n: usize, per_call: usize) -> (SwitchSnapshot, Vec<usize>) {
        let (ports, sinks) = bed(n, per_call);
        let mut dp = Datapath::new(ports, ctl, 32, true);
        dp.run(&AtomicBool::new(false), Polling::Busy, true)
            .unwrap();
        let s = dp.counters.snapshot();
        assert!(s.balanced(), "{s:?}");
        (s, sinks.iter().map(|g| g.lock().unwrap().len()).collect())
    }

    fn table(rules: &[&str]) -> Arc<TableHandle> {
        let mut t = FlowTable::new();
        t.add_group(Group::parse("group_id=1,type=all,bucket=output:2,bucket=output:3").unwrap())
            .unwrap();
        t.add_meter(Meter::parse("meter=1,pktps,band=type=drop,rate=1,burst_size=10").unwrap())
            .unwrap();
        for r in rules {
            t.add_flow(Rule::parse(r).unwrap(), 0).unwrap();
        }
        TableHandle::new(t)
    }

    /// `dec_ttl` on a TTL of 1 drops the frame (`ttl_expired`) and, only
    /// when a controller asks for `INVALID_TTL`, sends it whole as that
    /// packet-in (with its rule's table and cookie and the pipeline's
    /// state), counted as passed to the controller port.
    #[test]
    fn dec_ttl_on_ttl_1_is_an_invalid_ttl_packet_in_only_when_asked() {
        use super::super::controller::{pin_queue, pout_queue, PinLimit};
        let single: &[&str] = &["cookie=0x9,priority=0,ip,actions=mod_nw_ttl:1,dec_ttl,output:2"];
        let multi: &[&str] = &[
            "priority=0,actions=load:0x3->NXM_NX_REG1[],goto_table:1",
            "table=1,cookie=0x9,priority=0,ip,actions=mod_nw_ttl:1,dec_ttl,output:2",
        ];
        for (rules, t_no, reg1) in [(single, 0u8, 0u32), (multi, 1, 3)] {
            for wanted in [false, true] {
                let (ports, sinks) = bed(5, usize::MAX);
                let mut dp = Datapath::new(ports, table(rules), 32, true);
                let (pin_tx, pin_rx) =
                    pin_queue(PinLimit::new(100, 100).unwrap(), Default::default());
                pin_tx.ttl_flag().store(wanted, Relaxed);
                let (_pout_tx, pout_rx) = pout_queue();
                dp.set_controller(pin_tx, pout_rx);
                dp.run(&AtomicBool::new(false), Polling::Busy, false)
                    .unwrap();
                let s = dp.counters.snapshot();
                let got: Vec<_> = pin_rx.full.try_iter().collect();
                assert_eq!(counts(&sinks), vec![0, 0, 0], "{rules:?}");
                assert!(s.balanced(), "{s:?}");
                if !wanted {
                    assert!(got.is_empty(), "{rules:?}: not asked for");
                    assert_eq!(s.drop_of(SwDrop::TtlExpired), 5, "{rules:?}");
                    continue;
                }
                assert_eq!((got.len(), s.passed), (5, 5), "{rules:?}");
                let b = &got[0];
                assert_eq!(b.pin.reason, crate::switch::rule::PIN_INVALID_TTL);
                assert_eq!((b.pin.table, b.pin.cookie), (t_no, 9), "{rules:?}");
                assert_eq!(b.len, b.total_len, "the whole frame");
                assert_eq!(b.bytes()[22], 1, "the TTL as it was");
                assert_eq!(b.pipe.regs[1], reg1, "{rules:?}");
            }
        }
    }

    /// Fail-open: every frame NORMAL (an unknown destination floods), the
    /// rules neither applied nor hit; left, the rules apply again.
    #[test]
    fn fail_open_switches_every_frame_normal_and_leaves_the_rules_alone() {
        let ctl = table(&["priority=10,actions=output:2"]);
        ctl.set_fail_open(true);
        let (ports, sinks) = bed(4, usize::MAX);
        let mut dp = Datapath::new(ports, ctl.clone(), 32, true);
        dp.run(&AtomicBool::new(false), Polling::Busy, false)
            .unwrap();
        let s = dp.counters.snapshot();
        assert_eq!(counts(&sinks), vec![0, 4, 4], "flooded to ports 2 and 3");
        assert_eq!((s.passed, s.balanced()), (4, true), "{s:?}");
        assert_eq!(ctl.current().flows()[0].stats.packets.load(Relaxed), 0);
        ctl.set_fail_open(false);
        let (ports, sinks) = bed(4, usize::MAX);
        let mut dp = Datapath::new(ports, ctl.clone(), 32, true);
        dp.run(&AtomicBool::new(false), Polling::Busy, false)
            .unwrap();
        assert_eq!(counts(&sinks), vec![0, 4, 0], "the rule again");
        assert_eq!(ctl.current().flows()[0].stats.packets.load(Relaxed), 4);
    }

    /// A packet-in from a later table carries the pipeline's state there
    /// (what `load` and `write_metadata` wrote), and its message's match
    /// says so as Open vSwitch's does: in_port, metadata, the registers
    /// that are not zero.
    #[test]
    fn a_packet_in_carries_the_metadata_and_registers_of_its_table() {
        use super::super::controller::{pin_queue, pout_queue, PinLimit};
        let ctl = table(&[
            "priority=0,actions=load:0x7->NXM_NX_REG2[],write_metadata:0x5/0xff,goto_table:1",
            "table=1,priority=0,actions=controller:64",
        ]);
        let (ports, _sinks) = bed(3, usize::MAX);
        let mut dp = Datapath::new(ports, ctl.clone(), 32, true);
        let (pin_tx, pin_rx) = pin_queue(PinLimit::new(100, 100).unwrap(), Default::default());
        let (_pout_tx, pout_rx) = pout_queue();
        dp.set_controller(pin_tx, pout_rx);
        dp.run(&AtomicBool::new(false), Polling::Busy, false)
            .unwrap();
        let got: Vec<_> = pin_rx.full.try_iter().collect();
        assert_eq!(got.len(), 3);
        for b in &got {
            assert_eq!(b.pin.table, 1);
            assert_eq!(b.pipe.metadata, 5);
            assert_eq!(b.pipe.regs, [0, 0, 7, 0, 0, 0, 0, 0]);
        }
        let msg = crate::switch::openflow::controllers::packet_in_msg(&got[0]);
        let mut r = crate::switch::openflow::wire::Reader::new(&msg[24..], "packet-in match");
        let mut text = String::new();
        crate::switch::openflow::oxm::decode_match(&mut r, &mut text).unwrap();
        let m = crate::switch::MatchSpec::parse(&text).unwrap().m;
        assert_eq!(
            m.to_string(),
            "in_port=1,reg2=0x7,metadata=0x5",
            "the packet-in's match (decoded: {text})"
        );
    }

    /// `controller`: packet-ins reach the channel's end up to the rate's
    /// burst, the rest is counted by reason, and the account balances;
    /// without a channel they are `no_controller`. Packet-outs run their
    /// actions (`resubmit(,0)`: through the rules) between batches.
    #[test]
    fn packet_ins_leave_through_the_queue_and_packet_outs_come_in() {
        use super::super::controller::{pin_queue, pout_queue, PacketOut, PinLimit};
        // The table miss to the controller; a rule for the packet-outs
        // below (no frame of the run matches it).
        let ctl = table(&[
            "priority=0,actions=controller:40",
            "priority=5,udp,tp_dst=9,actions=output:3",
        ]);
        let (ports, sinks) = bed(300, usize::MAX);
        let mut dp = Datapath::new(ports, ctl.clone(), 32, true);
        let (pin_tx, pin_rx) = pin_queue(PinLimit::new(100, 100).unwrap(), Default::default());
        let (pout_tx, pout_rx) = pout_queue();
        dp.set_controller(pin_tx, pout_rx);
        dp.run(&AtomicBool::new(false), Polling::Busy, false)
            .unwrap();
        let s = dp.counters.snapshot();
        let got: Vec<_> = pin_rx.full.try_iter().collect();
        // The burst, and a token per 10 ms that the run took.
        let n = got.len() as u64;
        assert!(
            (100..110).contains(&n),
            "the burst: 100 packet-ins, got {n}"
        );
        let b = &got[0];
        assert_eq!(
            (b.in_port, b.len, b.total_len as usize),
            (1, 40, udp().len())
        );
        assert_eq!(b.bytes(), &udp()[..40]);
        assert_eq!(
            b.pin.reason,
            crate::switch::rule::PIN_NO_MATCH,
            "a table-miss rule"
        );
        assert_eq!(s.passed, n);
        assert_eq!(s.drop_of(SwDrop::ControllerRate), 300 - n);
        assert!(s.balanced(), "{s:?}");
        assert_eq!(counts(&sinks), vec![0, 0, 0]);
        // Packet-outs: straight out, and through the rules from table 0.
        let frame = |dport: u16| {
            let mut f = udp();
            f[36..38].copy_from_slice(&dport.to_be_bytes());
            f
        };
        let send = |actions: &str, f: Vec<u8>| {
            let r = Rule::parse(&format!("actions={actions}")).unwrap();
            assert!(pout_tx.send(PacketOut {
                in_port: 1,
                actions: r.actions,
                frame: f,
            }));
        };
        send("output:2", frame(7));
        send("resubmit(,0)", frame(9));
        send("in_port", frame(7));
        assert_eq!(dp.packet_outs().unwrap(), 3);
        assert_eq!(
            counts(&sinks),
            vec![1, 1, 1],
            "port 2 directly, port 3 by the rule, port 1 as in_port"
        );
        assert_eq!(dp.cache.packet_outs.load(Relaxed), 3);
        // A packet-out right after a batch whose first packet was sent:
        // its own fate, not that packet's (it drops).
        let (ports, _) = bed(10, usize::MAX);
        let mut dp = Datapath::new(ports, table(&["actions=output:2"]), 32, true);
        let (pin_tx, _pin_rx) = pin_queue(PinLimit::default(), Default::default());
        let (pout_tx, pout_rx) = pout_queue();
        dp.set_controller(pin_tx, pout_rx);
        dp.run(&AtomicBool::new(false), Polling::Busy, false)
            .unwrap();
        assert_eq!(dp.counters.snapshot().passed, 10);
        assert!(pout_tx.send(PacketOut {
            in_port: 1,
            actions: Vec::new(),
            frame: udp(),
        }));
        assert_eq!(dp.packet_outs().unwrap(), 1);
        assert_eq!(dp.cache.packet_outs_dropped.load(Relaxed), 1);
        assert_eq!(dp.cache.packet_outs.load(Relaxed), 0);
        // No channel: no_controller.
        let (ports, _) = bed(10, usize::MAX);
        let mut dp = Datapath::new(ports, table(&["actions=controller"]), 32, true);
        dp.run(&AtomicBool::new(false), Polling::Busy, false)
            .unwrap();
        let s = dp.counters.snapshot();
        assert_eq!(s.drop_of(SwDrop::NoController), 10);
        assert!(s.balanced());
    }

    #[test]
    fn switch_drops_and_stages_fit() {
        assert!(linerate_io::counters::reasons_fit::<SwDrop>());
        assert!(crate::perf::stages_fit::<SwStage>());
    }

    /// Table 0's lookups and matches on the single-table path (counted
    /// once per batch from the batch's no-match drops).
    #[test]
    fn single_table_counts_lookups_and_matches() {
        for (rules, matched) in [
            (&["in_port=1,udp,actions=output:2"][..], 300u64),
            (&["tcp,actions=output:2"][..], 0),
            (&["udp,actions=drop"][..], 300),
        ] {
            let ctl = table(rules);
            let (s, _) = run(ctl.clone(), 300, usize::MAX);
            assert_eq!(s.received, 300);
            let t = ctl.current();
            let t0 = t.table(0).unwrap();
            assert_eq!(t0.stats.lookups.load(Relaxed), 300, "{rules:?}");
            assert_eq!(t0.stats.matches.load(Relaxed), matched, "{rules:?}");
            assert_eq!(s.drop_of(SwDrop::NoMatch), 300 - matched, "{rules:?}");
        }
    }

    #[test]
    fn forward_drop_group_flood_meter_accounting() {
        let (s, got) = run(table(&["in_port=1,udp,actions=output:2"]), 100, usize::MAX);
        assert_eq!((s.passed, got[1], got[2]), (100, 100, 0));
        let (s, _) = run(table(&[]), 100, usize::MAX);
        assert_eq!(s.drop_of(SwDrop::NoMatch), 100);
        let (s, _) = run(table(&["actions=drop"]), 100, usize::MAX);
        assert_eq!(s.drop_of(SwDrop::ActionDrop), 100);
        let (s, got) = run(table(&["actions=group:1"]), 100, usize::MAX);
        assert_eq!((s.passed, got[1], got[2]), (100, 100, 100));
        let (s, got) = run(table(&["actions=flood"]), 100, usize::MAX);
        assert_eq!((s.passed, got[0], got[1], got[2]), (100, 0, 100, 100));
        let (s, _) = run(table(&["actions=output:1"]), 100, usize::MAX);
        assert_eq!(s.drop_of(SwDrop::NoOutput), 100);
        // The bucket holds 10 packets; the rest of the quick burst is metered.
        let (s, got) = run(table(&["actions=meter:1,output:2"]), 100, usize::MAX);
        assert_eq!(got[1], 10);
        assert_eq!(s.drop_of(SwDrop::Metered), 90);
        // TX rings that take only 5 per send.
        let (s, got) = run(table(&["actions=output:2"]), 100, 5);
        assert_eq!(got[1] as u64, s.passed);
        assert_eq!(s.drop_of(SwDrop::TxFull), 100 - s.passed);
    }

    #[test]
    fn copy_small_copies_every_length() {
        let src: Vec<u8> = (0..200u32).map(|i| (i * 7 + 3) as u8).collect();
        for n in 0..200 {
            let mut dst = vec![0u8; n];
            copy_small(&mut dst, &src[..n]);
            assert_eq!(dst, &src[..n], "length {n}");
        }
    }

    #[test]
    fn rewrite_and_push_vlan() {
        let (s, _) = run(
            table(&["ip,actions=set_field:10.9.9.9->ip_dst,dec_ttl,push_vlan:0x8100,output:2"]),
            10,
            usize::MAX,
        );
        assert_eq!(s.passed, 10);
        let ctl = table(&["ip,actions=set_field:10.9.9.9->ip_dst,push_vlan:0x8100,output:2"]);
        let (ports, sinks) = bed(1, usize::MAX);
        let mut dp = Datapath::new(ports, ctl.clone(), 32, true);
        dp.run(&AtomicBool::new(false), Polling::Busy, false)
            .unwrap();
        let g = sinks[1].lock().unwrap();
        assert_eq!(g[0].len(), udp().len() + 4);
        assert_eq!(&g[0][12..14], &[0x81, 0x00]);
        assert_eq!(&g[0][18 + 16..18 + 20], &[10, 9, 9, 9]);
        let t = ctl.current();
        let e = t.flows()[0].stats.clone();
        assert_eq!(e.packets.load(Relaxed), 1);
    }

    /// A source of copies of `frame` that can be refilled between runs.
    struct Refill {
        frame: Vec<u8>,
        bufs: Vec<Vec<u8>>,
        left: Arc<std::sync::atomic::AtomicUsize>,
    }
    impl RxPort for Refill {
        fn recv(&mut self, b: &mut Batch) -> Result<usize, PortError> {
            let mut n = 0;
            while !b.is_full() && self.left.load(Relaxed) > 0 {
                let i = b.len();
                self.bufs[i].clear();
                self.bufs[i].extend_from_slice(&self.frame);
                // SAFETY: one test buffer per descriptor; it outlives the descriptor and nothing else touches it meanwhile.
                b.push(unsafe {
                    Pkt::from_raw(self.bufs[i].as_mut_ptr(), self.frame.len() as u32, 0, 0)
                });
                self.left.fetch_sub(1, Relaxed);
                n += 1;
            }
            Ok(n)
        }
        fn release(&mut self, b: &mut Batch) -> Result<(), PortError> {
            b.clear();
            Ok(())
        }
        fn at_end(&self) -> bool {
            self.left.load(Relaxed) == 0
        }
    }

    /// Ports 1..=3; port 1 sends `frame` as often as the counter says.
    fn refill_bed(
        frame: Vec<u8>,
    ) -> (
        Vec<SwitchPort>,
        Vec<Got>,
        Arc<std::sync::atomic::AtomicUsize>,
    ) {
        let left = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let mut ports = Vec::new();
        let mut sinks = Vec::new();
        for no in 1..=3u32 {
            let got = Arc::new(Mutex::new(Vec::new()));
            let l = if no == 1 {
                left.clone()
            } else {
                Arc::new(std::sync::atomic::AtomicUsize::new(0))
            };
            ports.push(SwitchPort::new(
                no,
                "mem",
                Box::new(Refill {
                    frame: frame.clone(),
                    bufs: (0..MAX_BATCH).map(|_| Vec::with_capacity(2048)).collect(),
                    left: l,
                }),
                Box::new(Sink(got.clone(), usize::MAX)),
            ));
            sinks.push(got);
        }
        (ports, sinks, left)
    }

    fn counts(sinks: &[Got]) -> Vec<usize> {
        sinks.iter().map(|g| g.lock().unwrap().len()).collect()
    }

    #[test]
    fn pipeline_walks_tables_and_its_cache_follows_table_changes() {
        let ctl = table(&[
            "table=0,in_port=1,actions=load:3->NXM_NX_REG0[0..15],goto_table:1",
            "table=1,actions=resubmit(,2),output:NXM_NX_REG0[0..15]",
            "table=2,actions=output:2",
        ]);
        assert!(ctl.current().multi());
        let (ports, sinks, left) = refill_bed(udp());
        let mut dp = Datapath::new(ports, ctl.clone(), 32, true);
        let go = |dp: &mut Datapath, n: usize| {
            left.store(n, Relaxed);
            dp.run(&AtomicBool::new(false), Polling::Busy, false)
                .unwrap();
            let s = dp.counters.snapshot();
            assert!(s.balanced(), "{s:?}");
            s
        };
        let s = go(&mut dp, 100);
        assert_eq!((s.passed, counts(&sinks)), (100, vec![0, 100, 100]));
        let hits = |dp: &Datapath| dp.cache.emc_hits.load(Relaxed);
        // The first batch (32) walks live (its chunk is probed before any
        // of it is stored), the rest replay.
        assert_eq!(hits(&dp), 68, "first batch live, the rest replayed");
        // A change in a table the flow never looked up keeps the entry.
        ctl.edit(|t| t.add_flow(Rule::parse("table=7,actions=drop").unwrap(), 0))
            .unwrap();
        go(&mut dp, 100);
        assert_eq!(hits(&dp), 168);
        // A change in table 2 takes effect at once.
        ctl.edit(|t| {
            t.add_flow(
                Rule::parse("table=2,priority=40000,actions=drop").unwrap(),
                0,
            )
        })
        .unwrap();
        let s = go(&mut dp, 100);
        assert_eq!((s.passed, counts(&sinks)), (300, vec![0, 200, 300]));
        assert_eq!(hits(&dp), 236);
        // Per-table counters.
        let t = ctl.current();
        let st = |i: u8| {
            let s = &t.table(i).unwrap().stats;
            (s.lookups.load(Relaxed), s.matches.load(Relaxed))
        };
        assert_eq!((st(0), st(1), st(2)), ((300, 300), (300, 300), (300, 300)));
    }

    /// A finite source that sends `frames` in turn (copies of one frame
    /// when it is one).
    struct Cycle {
        frames: Vec<Vec<u8>>,
        bufs: Vec<Vec<u8>>,
        left: usize,
        at: usize,
    }
    impl RxPort for Cycle {
        fn recv(&mut self, b: &mut Batch) -> Result<usize, PortError> {
            let mut n = 0;
            while !b.is_full() && self.left > 0 {
                let (i, f) = (b.len(), &self.frames[self.at % self.frames.len()]);
                self.bufs[i].clear();
                self.bufs[i].extend_from_slice(f);
                // SAFETY: one test buffer per descriptor; it outlives the descriptor and nothing else touches it meanwhile.
                b.push(unsafe { Pkt::from_raw(self.bufs[i].as_mut_ptr(), f.len() as u32, 0, 0) });
                (self.left, self.at, n) = (self.left - 1, self.at + 1, n + 1);
            }
            Ok(n)
        }
        fn release(&mut self, b: &mut Batch) -> Result<(), PortError> {
            b.clear();
            Ok(())
        }
        fn at_end(&self) -> bool {
            self.left == 0
        }
    }

    /// Neighbour discovery frames that differ only in their ND fields
    /// (which the caches' keys do not hold) each get their own rule: a
    /// rule on them runs the multi-table path even in table 0 alone, whose
    /// exact entries and megaflows keep such walks out; and the caches
    /// still serve other frames.
    #[test]
    fn nd_frames_that_differ_only_in_nd_fields_are_not_confused_by_the_caches() {
        use linerate_wire::build::{build_nd, nd_lla_option};
        let nd = |last: u8, code: u8, sll: u8| {
            let mut p = FrameParams::new(IpPair::V6 {
                src: [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
                dst: [0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0, 0, 0xa],
            });
            let opt = nd_lla_option(1, [2, 0, 0, 0, 0, sll]);
            p.payload = &opt;
            let mut t = [0u8; 16];
            (t[0], t[1], t[15]) = (0xfe, 0x80, last);
            let mut b = vec![0u8; 128];
            let n = build_nd(&mut b, &p, false, &t).unwrap();
            b[14 + 40 + 1] = code;
            b.truncate(n);
            b
        };
        // (rules, frames sent in turn, copies out of ports 2 and 3 per
        // round of frames)
        let single = [
            "icmp6,icmp_type=135,nd_target=fe80::a,actions=output:2",
            "priority=1,actions=output:3",
        ];
        let multi = [
            "icmp6,icmp_type=135,nd_target=fe80::a,actions=goto_table:1",
            "priority=1,actions=goto_table:2",
            "table=1,actions=output:2",
            "table=2,actions=output:3",
        ];
        let by_sll = [
            "icmp6,icmp_type=135,nd_sll=02:00:00:00:00:0a,actions=goto_table:1",
            "priority=1,actions=goto_table:2",
            "table=1,actions=output:2",
            "table=2,actions=output:3",
        ];
        // As in Open vSwitch, the ND fields are the flow's from its
        // arrival: a code rewritten to 0 does not make them parsed (both
        // frames miss table 1's rule), and set_field writes them.
        let recode = [
            "icmp6,icmp_type=135,icmp_code=1,actions=set_field:0->icmpv6_code,goto_table:1",
            "icmp6,icmp_type=135,actions=set_field:fe80::a->nd_target,goto_table:1",
            "table=1,icmp6,icmp_type=135,nd_target=fe80::a,actions=output:2",
            "table=1,priority=0,actions=output:3",
        ];
        type NdCase<'a> = (&'a [&'a str], Vec<Vec<u8>>, (usize, usize));
        let cases: [NdCase; 6] = [
            (&single, vec![nd(0xa, 0, 1), nd(0xb, 0, 1)], (1, 1)),
            (&multi, vec![nd(0xa, 0, 1), nd(0xb, 0, 1)], (1, 1)),
            // Code 1 is no ND frame (its ND fields are 0), but its walk
            // reads them: no megaflow may keep its "no match" for the
            // ND frame with the same packet words but code.
            (
                &multi,
                vec![nd(0xa, 1, 1), nd(0xa, 0, 1), nd(0xa, 0, 1)],
                (2, 1),
            ),
            (&by_sll, vec![nd(0xa, 0, 0xa), nd(0xa, 0, 0xb)], (1, 1)),
            (&recode, vec![nd(0xa, 1, 1), nd(0xb, 1, 1)], (0, 2)),
            (&recode, vec![nd(0xb, 0, 1), nd(0xc, 0, 1)], (2, 0)),
        ];
        for (rules, frames, (to2, to3)) in cases {
            let rounds = 100;
            let n = rounds * frames.len();
            let mut ports = Vec::new();
            let mut sinks = Vec::new();
            for no in 1..=3u32 {
                let got = Arc::new(Mutex::new(Vec::new()));
                let rx = Cycle {
                    frames: frames.clone(),
                    bufs: (0..MAX_BATCH).map(|_| Vec::with_capacity(2048)).collect(),
                    left: if no == 1 { n } else { 0 },
                    at: 0,
                };
                ports.push(SwitchPort::new(
                    no,
                    "mem",
                    Box::new(rx),
                    Box::new(Sink(got.clone(), usize::MAX)),
                ));
                sinks.push(got);
            }
            let ctl = table(rules);
            assert!(ctl.current().multi(), "{rules:?}");
            let mut dp = Datapath::new(ports, ctl, 32, true);
            dp.run(&AtomicBool::new(false), Polling::Busy, false)
                .unwrap();
            let s = dp.counters.snapshot();
            assert!(s.balanced(), "{s:?}");
            assert_eq!(
                counts(&sinks),
                vec![0, to2 * rounds, to3 * rounds],
                "{rules:?}"
            );
        }
        // The caches still serve other frames next to ND rules.
        let ctl = table(&single);
        let (ports, sinks) = bed(200, usize::MAX);
        let mut dp = Datapath::new(ports, ctl, 32, true);
        dp.run(&AtomicBool::new(false), Polling::Busy, false)
            .unwrap();
        assert_eq!(counts(&sinks), vec![0, 0, 200]);
        assert!(dp.cache.emc_hits.load(Relaxed) >= 100);
    }

    #[test]
    fn pipeline_drops_are_counted_by_reason() {
        for (rules, why) in [
            (&["table=0,actions=goto_table:1"][..], SwDrop::NoMatch),
            (
                &["actions=goto_table:1", "table=1,actions=drop"][..],
                SwDrop::ActionDrop,
            ),
            (&["actions=resubmit(,0)"][..], SwDrop::ResubmitLimit),
            (
                &["actions=load:1->NXM_NX_REG0[],output:NXM_NX_REG0[]"][..],
                SwDrop::NoOutput,
            ),
        ] {
            let (s, _) = run(table(rules), 50, usize::MAX);
            assert_eq!(s.drop_of(why), 50, "{rules:?}: {s:?}");
        }
    }

    #[test]
    fn mod_vlan_vid_pushes_a_tag_and_later_tables_see_it() {
        let ctl = table(&[
            "table=0,vlan_tci=0,actions=mod_vlan_vid:10,goto_table:1",
            "table=1,dl_vlan=10,actions=output:2,strip_vlan,output:3",
        ]);
        let (ports, sinks) = bed(5, usize::MAX);
        let mut dp = Datapath::new(ports, ctl, 32, true);
        dp.run(&AtomicBool::new(false), Polling::Busy, false)
            .unwrap();
        let (a, b) = (sinks[1].lock().unwrap(), sinks[2].lock().unwrap());
        assert_eq!((a.len(), b.len()), (5, 5));
        assert_eq!(&a[0][12..16], &[0x81, 0x00, 0x00, 10]);
        assert_eq!(a[0].len(), udp().len() + 4);
        assert_eq!(b[0], udp());
    }

    #[test]
    fn learn_requests_reach_the_table_and_normal_floods_unknown() {
        let ctl = table(&[
            "table=0,actions=learn(table=1,NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],output:NXM_OF_IN_PORT[]),resubmit(,1),NORMAL",
        ]);
        let (ports, sinks) = bed(40, usize::MAX);
        let mut dp = Datapath::new(ports, ctl.clone(), 32, true);
        let (tx, rx) = std::sync::mpsc::sync_channel(16);
        dp.set_learner(tx);
        dp.run(&AtomicBool::new(false), Polling::Busy, false)
            .unwrap();
        // One request: the same rule is not asked for again within a second.
        let reqs: Vec<LearnReq> = rx.try_iter().collect();
        assert_eq!(reqs.len(), 1);
        assert_eq!(dp.cache.learn_requests.load(Relaxed), 1);
        let rule = reqs[0].spec.rule(&reqs[0].key);
        assert_eq!(rule.to_string(), {
            let src = &udp()[6..12];
            format!(
                "table=1,priority=32768,dl_dst={},actions=output:1",
                src.iter()
                    .map(|b| format!("{b:02x}"))
                    .collect::<Vec<_>>()
                    .join(":")
            )
        });
        assert_eq!(ctl.learn([rule.clone()], 1, true).changed, 1);
        assert_eq!(
            ctl.learn([rule], 2, true).changed,
            0,
            "the same rule again only refreshes it"
        );
        assert_eq!(ctl.current().table(1).unwrap().classifier().len(), 1);
        // NORMAL flooded every frame (its destination was never a source).
        assert_eq!(counts(&sinks), vec![0, 40, 40]);
    }
}
