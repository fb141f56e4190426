//! The forwarder in front of a capture worker (seed 002, Fig. 5): a
//! per-packet forward/drop decision from three sources of information:
//!
//! * rules, open loop: keep/drop filters in libpcap syntax and priority
//!   classes (TCP SYN/FIN/RST, a user priority filter);
//! * shunting, closed loop on relevance: the consumer says a connection is
//!   no longer interesting and its later packets are dropped at once;
//! * TED, closed loop on congestion ([`super::ted`]): connection tails are
//!   dropped when the worker's queue fills.
//!
//! [`Forwarder::decide`] applies, in order:
//!
//! 1. malformed frame (the parser rejects it) -> drop `malformed`;
//! 2. the drop filter matches, or a keep filter is set and does not
//!    match -> drop `filter`;
//! 3. the connection is shunted -> drop `shunt`;
//! 4. priority class -> forward (counted in `priority`), TED never cuts it;
//! 5. the connection has carried at least the TED threshold -> drop `ted`;
//! 6. forward.
//!
//! Packets that pass the filters are accounted in the flow table (bytes of
//! both directions, dropped ones included: the TED threshold is a position
//! in the connection). Filtered packets are not, so traffic the user
//! excluded does not fill the table.
//!
//! Counters are plain fields of the forwarder (one writer, no atomics per
//! packet); [`Forwarder::publish`] copies them into a shared
//! [`ForwarderShared`] once per batch for the stats reporter. At every
//! point `received == forwarded + sum(drops)`.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use linerate_io::counters::{Counters, Reason, Snapshot};
use linerate_wire::frame::L4;
use linerate_wire::tcp::flags as tcpf;
use linerate_wire::{parse_frame, FlowKey, Layers};

use super::filter::Filter;
use super::flowtable::{FlowTable, FlowTableStats};
use super::spsc::{self, Consumer, Gauge, Producer};
use super::ted::{Ted, TedConfig, TedStats, UNLIMITED};

/// The decision for one packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Forward,
    /// Forwarded as a priority packet (TED does not cut these).
    ForwardPriority,
    Drop(CaptureDrop),
}

impl Verdict {
    #[inline(always)]
    pub fn is_forward(self) -> bool {
        !matches!(self, Verdict::Drop(_))
    }
}

/// Forwarder settings.
#[derive(Clone, Debug)]
pub struct ForwarderConfig {
    /// Flow table entries (rounded up, see [`FlowTable::new`]).
    pub flow_capacity: usize,
    /// A connection without packets for this long is forgotten.
    pub idle_timeout_ns: u64,
    pub ted: TedConfig,
    /// If set, only packets matching it are kept.
    pub keep: Option<Arc<Filter>>,
    /// Packets matching it are dropped.
    pub drop: Option<Arc<Filter>>,
    /// Packets matching it are priority packets.
    pub priority: Option<Arc<Filter>>,
    /// TCP SYN, FIN and RST are priority packets.
    pub tcp_control_priority: bool,
}

impl Default for ForwarderConfig {
    fn default() -> Self {
        ForwarderConfig {
            flow_capacity: 1 << 16,
            idle_timeout_ns: 60_000_000_000,
            ted: TedConfig::default(),
            keep: None,
            drop: None,
            priority: None,
            tcp_control_priority: true,
        }
    }
}

/// Why a capture forwarder dropped a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CaptureDrop {
    /// Tail early dropping: the flow is past TED's threshold under load.
    Ted,
    /// The flow was shunted (its analyser wants no more of it).
    Shunt,
    /// A keep/drop filter said no.
    Filter,
    /// The worker's ring had no room.
    RingFull,
    /// Truncated or malformed frame.
    Malformed,
}

impl Reason for CaptureDrop {
    const ALL: &'static [CaptureDrop] = &[
        CaptureDrop::Ted,
        CaptureDrop::Shunt,
        CaptureDrop::Filter,
        CaptureDrop::RingFull,
        CaptureDrop::Malformed,
    ];
    fn name(self) -> &'static str {
        match self {
            CaptureDrop::Ted => "ted",
            CaptureDrop::Shunt => "shunt",
            CaptureDrop::Filter => "filter",
            CaptureDrop::RingFull => "ring_full",
            CaptureDrop::Malformed => "malformed",
        }
    }
    #[inline(always)]
    fn index(self) -> usize {
        self as usize
    }
}

/// Counts of one forwarder (`passed`: forwarded to its worker).
pub type ForwarderCounts = Snapshot<CaptureDrop>;

/// What a forwarder publishes for other threads (stats once a second).
#[derive(Default, Debug)]
pub struct ForwarderShared {
    pub stage: Counters<CaptureDrop>,
    pub priority: AtomicU64,
    /// TED threshold in bytes, `u64::MAX` when unlimited.
    pub ted_threshold: AtomicU64,
    pub flow_evictions: AtomicU64,
    pub flows_occupied: AtomicU64,
    /// Connections shunted (requests applied).
    pub shunts: AtomicU64,
}

/// A plain copy of [`ForwarderShared`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ForwarderReport {
    pub stage: Snapshot<CaptureDrop>,
    pub priority: u64,
    /// `None` when unlimited.
    pub ted_threshold: Option<u64>,
    pub flow_evictions: u64,
    pub flows_occupied: u64,
    pub shunts: u64,
}

impl ForwarderShared {
    pub fn snapshot(&self) -> ForwarderReport {
        let t = self.ted_threshold.load(Relaxed);
        ForwarderReport {
            stage: self.stage.snapshot(),
            priority: self.priority.load(Relaxed),
            ted_threshold: (t != UNLIMITED).then_some(t),
            flow_evictions: self.flow_evictions.load(Relaxed),
            flows_occupied: self.flows_occupied.load(Relaxed),
            shunts: self.shunts.load(Relaxed),
        }
    }
}

/// Sends shunt requests to a forwarder running on another thread (a
/// lock-free SPSC ring; the forwarder applies them at its next
/// [`Forwarder::poll_shunts`]).
pub struct ShuntSender {
    tx: Producer<FlowKey>,
}

impl ShuntSender {
    /// Ask for `key`'s connection (either direction) to be shunted. False
    /// when the request queue is full (retry later).
    pub fn shunt(&mut self, key: &FlowKey) -> bool {
        let ok = self.tx.push(*key).is_ok();
        // Shunts are rare: publish each at once.
        self.tx.flush();
        ok
    }
}

pub struct Forwarder {
    table: FlowTable,
    ted: Ted,
    keep: Option<Arc<Filter>>,
    drop: Option<Arc<Filter>>,
    priority: Option<Arc<Filter>>,
    tcp_control_priority: bool,
    counts: ForwarderCounts,
    /// Priority packets forwarded (included in `counts.passed`).
    priority_fwd: u64,
    gauge: Option<Gauge>,
    /// Queue occupancy set by the caller when there is no gauge.
    manual_q: f64,
    shunt_rx: Option<Consumer<FlowKey>>,
    now_ns: u64,
    shared: Arc<ForwarderShared>,
}

impl Forwarder {
    pub fn new(cfg: ForwarderConfig) -> Result<Forwarder, String> {
        cfg.ted.validate()?;
        if cfg.flow_capacity == 0 {
            return Err("forwarder: flow_capacity must be > 0".into());
        }
        let shared = Arc::new(ForwarderShared::default());
        shared.ted_threshold.store(UNLIMITED, Relaxed);
        Ok(Forwarder {
            table: FlowTable::new(cfg.flow_capacity, cfg.idle_timeout_ns),
            ted: Ted::new(cfg.ted),
            keep: cfg.keep,
            drop: cfg.drop,
            priority: cfg.priority,
            tcp_control_priority: cfg.tcp_control_priority,
            counts: ForwarderCounts::default(),
            priority_fwd: 0,
            gauge: None,
            manual_q: 0.0,
            shunt_rx: None,
            now_ns: 0,
            shared,
        })
    }

    /// Read TED's queue occupancy from `g` (the worker's input ring).
    pub fn set_gauge(&mut self, g: Gauge) {
        self.gauge = Some(g);
    }

    /// Set the queue occupancy (fraction 0..1) used by TED when no gauge
    /// is set (e.g. a kernel ring whose fill is read once per batch).
    pub fn set_queue_fraction(&mut self, q: f64) {
        self.manual_q = q.clamp(0.0, 1.0);
    }

    /// A sender of shunt requests for another thread (replaces any earlier one).
    pub fn shunt_sender(&mut self, capacity: usize) -> ShuntSender {
        let (tx, rx) = spsc::channel(capacity, FlowKey::default);
        self.shunt_rx = Some(rx);
        ShuntSender { tx }
    }

    /// Shunt `key`'s connection (both directions): its later packets are
    /// dropped (`shunt`) until it has been idle for the idle timeout.
    pub fn shunt(&mut self, key: &FlowKey) {
        self.table.shunt(key, self.now_ns);
    }

    /// Apply shunt requests from the [`ShuntSender`]. Call once per batch.
    pub fn poll_shunts(&mut self) -> usize {
        let Some(rx) = self.shunt_rx.as_mut() else {
            return 0;
        };
        let now = self.now_ns;
        let table = &mut self.table;
        rx.pop_with(usize::MAX, |k| table.shunt(k, now))
    }

    pub fn counts(&self) -> ForwarderCounts {
        self.counts
    }
    /// Priority packets forwarded (included in `counts().passed`).
    pub fn priority_forwarded(&self) -> u64 {
        self.priority_fwd
    }
    pub fn ted(&self) -> &Ted {
        &self.ted
    }
    pub fn ted_stats(&self) -> TedStats {
        self.ted.stats()
    }
    pub fn flow_stats(&self) -> FlowTableStats {
        self.table.stats()
    }
    pub fn flows(&self) -> &FlowTable {
        &self.table
    }
    /// The shared counters, published by [`Forwarder::publish`].
    pub fn shared(&self) -> Arc<ForwarderShared> {
        self.shared.clone()
    }

    /// Copy the counters into [`ForwarderShared`] (once per batch: a
    /// handful of relaxed stores).
    pub fn publish(&self) {
        let s = &self.shared;
        let c = &self.counts;
        s.stage.publish(c);
        s.priority.store(self.priority_fwd, Relaxed);
        s.ted_threshold.store(self.ted.threshold_raw(), Relaxed);
        let fs = self.table.stats();
        s.flow_evictions.store(fs.evictions, Relaxed);
        s.flows_occupied.store(fs.occupied, Relaxed);
        s.shunts.store(fs.shunts, Relaxed);
    }

    #[inline(always)]
    fn drop_pkt(&mut self, r: CaptureDrop) -> Verdict {
        self.counts.count_drop(r, 1);
        Verdict::Drop(r)
    }

    /// Decide for one Ethernet frame seen at `now_ns`.
    #[inline]
    pub fn decide(&mut self, pkt: &[u8], now_ns: u64) -> Verdict {
        match parse_frame(pkt) {
            Ok(l) => {
                let key = l.flow_key();
                self.decide_parsed(pkt, Some(&l), &key, key.symmetric_hash(), now_ns)
            }
            Err(_) => self.decide_parsed(pkt, None, &FlowKey::default(), 0, now_ns),
        }
    }

    /// [`Forwarder::decide`] for a frame already parsed by the caller
    /// (`layers` None = malformed; `hash` = `key.symmetric_hash()`).
    #[inline]
    pub fn decide_parsed(
        &mut self,
        pkt: &[u8],
        layers: Option<&Layers>,
        key: &FlowKey,
        hash: u64,
        now_ns: u64,
    ) -> Verdict {
        let len = pkt.len().min(u32::MAX as usize) as u32;
        self.counts.received += 1;
        self.counts.received_bytes += len as u64;
        self.now_ns = now_ns;
        if self.ted.tick(now_ns) {
            let q = match &self.gauge {
                Some(g) => g.fraction(),
                None => self.manual_q,
            };
            self.ted.update(q, now_ns);
            // Age a couple of buckets per update: bounded work.
            self.table.sweep(now_ns, 2);
        }
        let Some(l) = layers else {
            return self.drop_pkt(CaptureDrop::Malformed);
        };
        if let Some(f) = &self.drop {
            if f.matches(pkt) {
                return self.drop_pkt(CaptureDrop::Filter);
            }
        }
        if let Some(f) = &self.keep {
            if !f.matches(pkt) {
                return self.drop_pkt(CaptureDrop::Filter);
            }
        }
        let e = self.table.account(key, hash, len, now_ns);
        if e.shunted {
            return self.drop_pkt(CaptureDrop::Shunt);
        }
        let before = e.bytes - len as u64;
        let prio = (self.tcp_control_priority
            && l.l4 == L4::Tcp
            && l.tcp_flags & (tcpf::SYN | tcpf::FIN | tcpf::RST) != 0)
            || self.priority.as_ref().is_some_and(|f| f.matches(pkt));
        if prio {
            self.priority_fwd += 1;
            self.counts.passed += 1;
            self.counts.passed_bytes += len as u64;
            return Verdict::ForwardPriority;
        }
        if self.ted.cuts(before) {
            return self.drop_pkt(CaptureDrop::Ted);
        }
        self.counts.passed += 1;
        self.counts.passed_bytes += len as u64;
        Verdict::Forward
    }

    /// A packet this forwarder forwarded could not be delivered after all
    /// (e.g. its ring was full): count it as a drop for `reason` instead.
    pub fn undo_forward(&mut self, v: Verdict, bytes: usize, reason: CaptureDrop) {
        if !v.is_forward() {
            return;
        }
        self.counts.passed -= 1;
        self.counts.passed_bytes -= bytes as u64;
        if v == Verdict::ForwardPriority {
            self.priority_fwd -= 1;
        }
        self.counts.count_drop(reason, 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_wire::build::{build_tcp, build_udp, FrameParams, IpPair};
    use linerate_wire::tcp::TcpRepr;

    fn tcp(buf: &mut [u8], client: bool, flags: u16, payload: usize, cport: u16) -> usize {
        let pl = vec![0x55u8; payload];
        let (src, dst, sp, dp) = if client {
            ([10, 0, 0, 1], [10, 0, 0, 2], cport, 80)
        } else {
            ([10, 0, 0, 2], [10, 0, 0, 1], 80, cport)
        };
        let mut p = FrameParams::new(IpPair::V4 { src, dst });
        p.payload = &pl;
        let t = TcpRepr {
            src_port: sp,
            dst_port: dp,
            seq: 1,
            ack: 1,
            flags,
            window: 1000,
            urgent: 0,
        };
        build_tcp(buf, &p, &t).unwrap()
    }

    fn key(cport: u16) -> FlowKey {
        FlowKey::v4([10, 0, 0, 1], [10, 0, 0, 2], cport, 80, 6)
    }

    #[test]
    fn capture_drops_fit() {
        assert!(linerate_io::counters::reasons_fit::<CaptureDrop>());
    }

    #[test]
    fn shunting_drops_both_directions() {
        let mut f = Forwarder::new(ForwarderConfig::default()).unwrap();
        let mut b = [0u8; 2048];
        let n = tcp(&mut b, true, tcpf::ACK, 100, 1000);
        assert_eq!(f.decide(&b[..n], 1), Verdict::Forward);
        f.shunt(&key(1000).reversed());
        assert_eq!(f.decide(&b[..n], 2), Verdict::Drop(CaptureDrop::Shunt));
        let n = tcp(&mut b, false, tcpf::ACK, 100, 1000);
        assert_eq!(f.decide(&b[..n], 3), Verdict::Drop(CaptureDrop::Shunt));
        // shunt wins over priority
        let n = tcp(&mut b, false, tcpf::FIN | tcpf::ACK, 0, 1000);
        assert_eq!(f.decide(&b[..n], 4), Verdict::Drop(CaptureDrop::Shunt));
        // another connection is unaffected
        let n = tcp(&mut b, true, tcpf::ACK, 100, 1001);
        assert_eq!(f.decide(&b[..n], 5), Verdict::Forward);
        // through the cross-thread sender
        let mut s = f.shunt_sender(8);
        let h = std::thread::spawn(move || assert!(s.shunt(&key(1001))));
        h.join().unwrap();
        assert_eq!(f.poll_shunts(), 1);
        assert_eq!(f.decide(&b[..n], 6), Verdict::Drop(CaptureDrop::Shunt));
        let c = f.counts();
        assert!(c.balanced());
        assert_eq!(c.drop_of(CaptureDrop::Shunt), 4);
        // after the idle timeout the 5-tuple is a new connection
        let idle = ForwarderConfig::default().idle_timeout_ns;
        assert_eq!(f.decide(&b[..n], 7 + idle), Verdict::Forward);
    }

    #[test]
    fn ted_cuts_tails_never_priority() {
        let cfg = ForwarderConfig {
            ted: TedConfig {
                max_bytes: 64 << 10,
                min_bytes: 4096,
                update_packets: 1,
                ..TedConfig::default()
            },
            ..ForwarderConfig::default()
        };
        let mut f = Forwarder::new(cfg).unwrap();
        let prio_filter = Arc::new(Filter::compile("tcp port 8080").unwrap());
        let mut b = [0u8; 2048];
        // Saturated queue: threshold goes to the floor.
        f.set_queue_fraction(1.0);
        let n = tcp(&mut b, true, tcpf::ACK, 0, 9);
        for i in 0..20 {
            f.decide(&b[..n], i);
        }
        assert_eq!(f.ted().threshold(), Some(4096));
        let mut fwd = 0;
        let mut cut = 0;
        for i in 0..100u64 {
            let n = tcp(&mut b, i % 2 == 0, tcpf::ACK, 1000, 2000);
            match f.decide(&b[..n], 100 + i) {
                Verdict::Forward => fwd += 1,
                Verdict::Drop(CaptureDrop::Ted) => cut += 1,
                v => panic!("{v:?}"),
            }
        }
        // 1054-byte frames: the first 4 fit under 4096 bytes (0, 1054, 2108, 3162).
        assert_eq!((fwd, cut), (4, 96));
        // SYN, FIN, RST deep in the tail: always forwarded.
        for fl in [tcpf::SYN, tcpf::FIN | tcpf::ACK, tcpf::RST] {
            let n = tcp(&mut b, true, fl, 1000, 2000);
            assert_eq!(f.decide(&b[..n], 300), Verdict::ForwardPriority);
        }
        // A user priority filter.
        let mut f2 = Forwarder::new(ForwarderConfig {
            priority: Some(prio_filter),
            ..ForwarderConfig {
                ted: TedConfig {
                    update_packets: 1,
                    ..TedConfig::default()
                },
                ..ForwarderConfig::default()
            }
        })
        .unwrap();
        f2.set_queue_fraction(1.0);
        let pl = [0u8; 1400];
        let mut p = FrameParams::new(IpPair::V4 {
            src: [1, 1, 1, 1],
            dst: [2, 2, 2, 2],
        });
        p.payload = &pl[..];
        let t = TcpRepr {
            src_port: 5555,
            dst_port: 8080,
            seq: 0,
            ack: 0,
            flags: tcpf::ACK,
            window: 0,
            urgent: 0,
        };
        let n = build_tcp(&mut b, &p, &t).unwrap();
        for i in 0..5000 {
            assert_eq!(f2.decide(&b[..n], i), Verdict::ForwardPriority);
        }
        assert!(f2.ted().threshold().is_some());
        let c = f2.counts();
        assert_eq!((f2.priority_forwarded(), c.passed), (5000, 5000));
        assert!(c.balanced());
    }

    #[test]
    fn order_and_counter_invariant() {
        let cfg = ForwarderConfig {
            drop: Some(Arc::new(Filter::compile("udp port 53").unwrap())),
            keep: Some(Arc::new(Filter::compile("ip").unwrap())),
            ted: TedConfig {
                update_packets: 1,
                max_bytes: 8192,
                ..TedConfig::default()
            },
            ..ForwarderConfig::default()
        };
        let mut f = Forwarder::new(cfg).unwrap();
        let mut b = [0u8; 2048];
        let mut rng = 12345u64;
        let mut q = 0.0f64;
        for i in 0..20_000u64 {
            rng = rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let r = (rng >> 33) as u32;
            let n = match r % 6 {
                0 => {
                    // malformed: truncated IPv4
                    let n = tcp(&mut b, true, tcpf::ACK, 10, 1);
                    n - 30
                }
                1 => {
                    let p = FrameParams::new(IpPair::V4 {
                        src: [9, 9, 9, 9],
                        dst: [8, 8, 8, 8],
                    });
                    build_udp(&mut b, &p, 1000, 53).unwrap()
                }
                2 => {
                    let p = FrameParams::new(IpPair::V6 {
                        src: [1; 16],
                        dst: [2; 16],
                    });
                    build_udp(&mut b, &p, 1000, 54).unwrap() // not "ip": keep filter drops
                }
                3 => tcp(&mut b, r & 8 == 0, tcpf::SYN, 0, (r % 50) as u16),
                _ => tcp(&mut b, r & 8 == 0, tcpf::ACK, 500, (r % 50) as u16),
            };
            if i % 1000 == 0 {
                q = if q > 0.5 { 0.0 } else { 0.95 };
                f.set_queue_fraction(q);
            }
            if i == 10_000 {
                f.shunt(&key(7));
            }
            let v = f.decide(&b[..n], i * 1000);
            if i % 97 == 0 {
                f.undo_forward(v, n, CaptureDrop::RingFull);
            }
            assert!(f.counts().balanced(), "at packet {i}");
        }
        let c = f.counts();
        for r in [
            CaptureDrop::Malformed,
            CaptureDrop::Filter,
            CaptureDrop::Shunt,
            CaptureDrop::Ted,
            CaptureDrop::RingFull,
        ] {
            assert!(c.drop_of(r) > 0, "{r:?}");
        }
        assert!(f.priority_forwarded() > 0);
        f.publish();
        let rep = f.shared().snapshot();
        assert!(rep.stage.balanced());
        assert_eq!(rep.stage.received, 20_000);
        assert_eq!(rep.priority, f.priority_forwarded());
    }
}
