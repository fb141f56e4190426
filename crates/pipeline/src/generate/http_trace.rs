//! A synthetic trace of HTTP/1.1 downloads over TCP: the input of the DNAC
//! experiment (seed 002, Table 3).
//!
//! Model: `connections` TCP connections start as a Poisson process (mean
//! gap `mean_gap_ns`), each from one of `clients` addresses (10.1.x.y) to
//! one of `servers` (10.9.0.x, port 80), both drawn at random. A
//! connection is a three-way handshake, one `GET` from the client, the
//! server's `200 OK` with a `Content-Length` header and a body in MSS-sized
//! (1448-byte) segments, a client ACK every second segment, and FIN/ACK
//! from both sides. Body sizes are heavy-tailed: Pareto with shape
//! `pareto_shape` and minimum `min_size`, capped at `max_size`, so a few
//! large downloads carry most of the bytes while most connections are
//! short (the traffic in which DNAC's tail early dropping pays off).
//!
//! Many connections are open at once, so their packets interleave in
//! timestamp order: every open connection is a small state machine that
//! yields its next packet and the time of the one after, kept in a heap.
//! Nothing but the open connections is held in memory, so a trace can have
//! many millions of packets. Same configuration and seed, same trace.
//!
//! Sequence and acknowledgement numbers, lengths and IPv4/TCP checksums are
//! all correct; the client port is 1024 + the connection number modulo
//! 64 000, so no two connections less than 64 000 apart share a 5-tuple.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use linerate_wire::build::{build_tcp, FrameParams, IpPair};
use linerate_wire::tcp::{flags, TcpRepr};

use super::field::SplitMix64 as Rng;

/// Uniform in 0..n by multiply-shift (one draw; the bias is below 2^-40
/// for the sizes here).
fn below(r: &mut Rng, n: u64) -> u64 {
    ((r.next_u64() as u128 * n as u128) >> 64) as u64
}

/// Uniform in (0, 1].
fn unit(r: &mut Rng) -> f64 {
    ((r.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64
}

/// TCP payload per full segment (1500-byte MTU, no options).
pub const MSS: usize = 1448;

/// The shape of a trace.
#[derive(Clone, Debug, PartialEq)]
pub struct HttpTraceConfig {
    pub connections: u64,
    pub clients: u32,
    pub servers: u32,
    /// Pareto shape of the body sizes (smaller = heavier tail; > 1).
    pub pareto_shape: f64,
    /// Smallest body (bytes), the Pareto scale.
    pub min_size: u64,
    /// Largest body (bytes).
    pub max_size: u64,
    pub seed: u64,
    /// Mean gap between connection starts (ns).
    pub mean_gap_ns: u64,
    /// Round-trip time between client and server (ns).
    pub rtt_ns: u64,
    /// Gap between two data segments of one response (ns).
    pub seg_gap_ns: u64,
}

impl Default for HttpTraceConfig {
    fn default() -> Self {
        HttpTraceConfig {
            connections: 50_000,
            clients: 1000,
            servers: 25,
            pareto_shape: 1.2,
            min_size: 2000,
            max_size: 20_000_000,
            seed: 1,
            mean_gap_ns: 50_000,
            rtt_ns: 200_000,
            seg_gap_ns: 12_000,
        }
    }
}

impl HttpTraceConfig {
    /// A one-line error naming the bad field, if any.
    pub fn check(&self) -> Result<(), String> {
        if self.connections == 0 {
            return Err("connections must be at least 1".into());
        }
        if self.clients == 0 || self.clients > 65_536 {
            return Err(format!("clients {} out of range 1..=65536", self.clients));
        }
        if self.servers == 0 || self.servers > 254 {
            return Err(format!("servers {} out of range 1..=254", self.servers));
        }
        if !(self.pareto_shape > 1.0 && self.pareto_shape <= 10.0) {
            return Err(format!(
                "pareto shape {} out of range (1, 10]",
                self.pareto_shape
            ));
        }
        if self.min_size == 0 || self.max_size < self.min_size || self.max_size > 1 << 31 {
            return Err(format!(
                "body sizes {}..={} bytes: need 1 <= min <= max <= 2^31",
                self.min_size, self.max_size
            ));
        }
        Ok(())
    }
}

/// What the trace holds: the events a perfect analyser finds.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct HttpTraceTruth {
    pub connections: u64,
    pub packets: u64,
    /// Frame bytes.
    pub bytes: u64,
    pub requests: u64,
    pub responses: u64,
    pub pairs: u64,
    pub body_bytes: u64,
    pub largest_body: u64,
    pub median_body: u64,
    /// Share of the body bytes in the largest 10 % of the responses.
    pub top10_byte_share: f64,
    /// Timestamp of the last packet (ns after the first).
    pub duration_ns: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    Syn,
    SynAck,
    Ack,
    Get,
    /// Server data; the client ACKs after every second segment.
    Data,
    ClientAck,
    ServerFin,
    ClientFin,
    LastAck,
}

struct Conn {
    client: [u8; 4],
    server: [u8; 4],
    cport: u16,
    /// Initial sequence numbers.
    cisn: u32,
    sisn: u32,
    request: Vec<u8>,
    /// Response head; the body follows it in the server's stream.
    head: Vec<u8>,
    /// Response stream length (head + body).
    total: u64,
    /// Server stream bytes sent so far.
    sent: u64,
    segs: u64,
    step: Step,
}

impl Conn {
    /// Write the current step's frame into `buf` (length returned), move
    /// to the next step; `None` after the last packet. The second value is
    /// the delay to the next packet.
    fn next(&mut self, buf: &mut Vec<u8>, cfg: &HttpTraceConfig) -> Option<(usize, u64)> {
        let rq = self.request.len() as u32;
        let (c1, s1) = (self.cisn.wrapping_add(1), self.sisn.wrapping_add(1));
        let half = cfg.rtt_ns / 2;
        // (from client, flags, seq, ack, payload range in the server stream or the request, delay, next)
        let (client, fl, seq, ack, delay, next) = match self.step {
            Step::Syn => (true, flags::SYN, self.cisn, 0, half, Step::SynAck),
            Step::SynAck => (
                false,
                flags::SYN | flags::ACK,
                self.sisn,
                c1,
                half,
                Step::Ack,
            ),
            Step::Ack => (true, flags::ACK, c1, s1, 1000, Step::Get),
            Step::Get => (true, flags::ACK | flags::PSH, c1, s1, half, Step::Data),
            Step::Data => {
                let seq = s1.wrapping_add(self.sent as u32);
                let len = (self.total - self.sent).min(MSS as u64);
                let off = self.sent as usize;
                self.sent += len;
                self.segs += 1;
                let next = if self.sent == self.total {
                    Step::ServerFin
                } else if self.segs.is_multiple_of(2) {
                    Step::ClientAck
                } else {
                    Step::Data
                };
                let delay = if next == Step::ClientAck {
                    1000
                } else {
                    cfg.seg_gap_ns
                };
                let ack = c1.wrapping_add(rq);
                let n = self.frame(
                    buf,
                    false,
                    flags::ACK | flags::PSH,
                    seq,
                    ack,
                    off,
                    len as usize,
                );
                self.step = next;
                return Some((n, delay));
            }
            Step::ClientAck => {
                let a = s1.wrapping_add(self.sent as u32);
                (
                    true,
                    flags::ACK,
                    c1.wrapping_add(rq),
                    a,
                    cfg.seg_gap_ns.saturating_sub(1000),
                    Step::Data,
                )
            }
            Step::ServerFin => {
                let seq = s1.wrapping_add(self.total as u32);
                (
                    false,
                    flags::FIN | flags::ACK,
                    seq,
                    c1.wrapping_add(rq),
                    half,
                    Step::ClientFin,
                )
            }
            Step::ClientFin => {
                let a = s1.wrapping_add(self.total as u32).wrapping_add(1);
                (
                    true,
                    flags::FIN | flags::ACK,
                    c1.wrapping_add(rq),
                    a,
                    half,
                    Step::LastAck,
                )
            }
            Step::LastAck => {
                let seq = s1.wrapping_add(self.total as u32).wrapping_add(1);
                let a = c1.wrapping_add(rq).wrapping_add(1);
                let n = self.frame(buf, false, flags::ACK, seq, a, 0, 0);
                self.step = Step::Syn; // unused: the connection ends here
                return Some((n, u64::MAX));
            }
        };
        let (off, len) = if self.step == Step::Get {
            (usize::MAX, rq as usize)
        } else {
            (0, 0)
        };
        let n = self.frame(buf, client, fl, seq, ack, off, len);
        self.step = next;
        Some((n, delay))
    }

    /// One frame; `off == usize::MAX` sends the request, else bytes
    /// `off..off + len` of the server's stream.
    #[allow(clippy::too_many_arguments)]
    fn frame(
        &self,
        buf: &mut Vec<u8>,
        client: bool,
        fl: u16,
        seq: u32,
        ack: u32,
        off: usize,
        len: usize,
    ) -> usize {
        let mut payload = [0u8; MSS];
        let pl: &[u8] = if off == usize::MAX {
            &self.request
        } else {
            for (i, b) in payload[..len].iter_mut().enumerate() {
                let at = off + i;
                *b = match self.head.get(at) {
                    Some(&h) => h,
                    // Body: printable, cheap, and not an HTTP start line.
                    None => b'a' + (at % 26) as u8,
                };
            }
            &payload[..len]
        };
        let (src, dst, sp, dp) = if client {
            (self.client, self.server, self.cport, 80)
        } else {
            (self.server, self.client, 80, self.cport)
        };
        let mut p = FrameParams::new(IpPair::V4 { src, dst });
        if !client {
            std::mem::swap(&mut p.eth_src, &mut p.eth_dst);
        }
        p.payload = pl;
        let t = TcpRepr {
            src_port: sp,
            dst_port: dp,
            seq,
            ack,
            flags: fl,
            window: 65_535,
            urgent: 0,
        };
        buf.resize(pl.len() + 64, 0);
        build_tcp(buf, &p, &t).expect("buffer sized for the frame")
    }
}

/// Write the trace: `emit(ts_ns, frame)` for every packet in timestamp
/// order (ts from 0). Returns the ground truth, or the first error of `emit`.
pub fn write_trace<E>(
    cfg: &HttpTraceConfig,
    mut emit: impl FnMut(u64, &[u8]) -> Result<(), E>,
) -> Result<HttpTraceTruth, E> {
    let mut rng = Rng(cfg.seed);
    let mut heap: BinaryHeap<Reverse<(u64, u64)>> = BinaryHeap::new();
    let mut open: HashMap<u64, Conn> = HashMap::new();
    let mut truth = HttpTraceTruth::default();
    let mut sizes = Vec::with_capacity(cfg.connections.min(1 << 24) as usize);
    let mut started = 0u64;
    let mut next_start = 0u64;
    let mut buf = Vec::with_capacity(2048);
    loop {
        let due = heap.peek().map(|Reverse((t, _))| *t);
        if started < cfg.connections && due.is_none_or(|t| next_start <= t) {
            let id = started;
            started += 1;
            let c = below(&mut rng, cfg.clients as u64) as u32;
            let s = below(&mut rng, cfg.servers as u64) as u8;
            let u = unit(&mut rng);
            let size = ((cfg.min_size as f64) / u.powf(1.0 / cfg.pareto_shape))
                .min(cfg.max_size as f64) as u64;
            sizes.push(size);
            let server = [10, 9, 0, 1 + s];
            let request = format!(
                "GET /obj/{id}.bin HTTP/1.1\r\nHost: 10.9.0.{}\r\nUser-Agent: linerate-trace\r\nAccept: */*\r\n\r\n",
                1 + s
            )
            .into_bytes();
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {size}\r\nContent-Type: application/octet-stream\r\nServer: linerate-trace\r\n\r\n"
            )
            .into_bytes();
            let conn = Conn {
                client: [10, 1, (c >> 8) as u8, c as u8],
                server,
                cport: 1024 + (id % 64_000) as u16,
                cisn: rng.next_u64() as u32,
                sisn: rng.next_u64() as u32,
                total: head.len() as u64 + size,
                request,
                head,
                sent: 0,
                segs: 0,
                step: Step::Syn,
            };
            open.insert(id, conn);
            heap.push(Reverse((next_start, id)));
            // Exponential gaps: a Poisson process of starts.
            let gap = -(unit(&mut rng).ln()) * cfg.mean_gap_ns as f64;
            next_start += gap.max(1.0) as u64;
            continue;
        }
        let Some(Reverse((t, id))) = heap.pop() else {
            break;
        };
        let conn = open.get_mut(&id).expect("a scheduled connection is open");
        let (n, delay) = conn
            .next(&mut buf, cfg)
            .expect("an open connection has a next packet");
        emit(t, &buf[..n])?;
        truth.packets += 1;
        truth.bytes += n as u64;
        truth.duration_ns = t;
        if delay == u64::MAX {
            open.remove(&id);
            truth.connections += 1;
        } else {
            heap.push(Reverse((t + delay.max(1), id)));
        }
    }
    truth.requests = truth.connections;
    truth.responses = truth.connections;
    truth.pairs = truth.connections;
    sizes.sort_unstable();
    truth.body_bytes = sizes.iter().sum();
    truth.largest_body = sizes.last().copied().unwrap_or(0);
    truth.median_body = sizes.get(sizes.len() / 2).copied().unwrap_or(0);
    let top = sizes.len().div_ceil(10);
    let top_bytes: u64 = sizes.iter().rev().take(top).sum();
    truth.top10_byte_share = if truth.body_bytes > 0 {
        top_bytes as f64 / truth.body_bytes as f64
    } else {
        0.0
    };
    Ok(truth)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::analyser::{Analyser, HttpAnalyser, HttpConfig};
    use linerate_wire::frame::L4;

    fn small(connections: u64, seed: u64) -> HttpTraceConfig {
        HttpTraceConfig {
            connections,
            seed,
            max_size: 2_000_000,
            ..HttpTraceConfig::default()
        }
    }

    fn collect(cfg: &HttpTraceConfig) -> (Vec<(u64, Vec<u8>)>, HttpTraceTruth) {
        let mut v = vec![];
        let t = write_trace::<()>(cfg, |ts, f| {
            v.push((ts, f.to_vec()));
            Ok(())
        })
        .unwrap();
        (v, t)
    }

    #[test]
    fn frames_are_valid_tcp_in_time_order_and_deterministic() {
        let cfg = small(300, 7);
        let (frames, truth) = collect(&cfg);
        assert_eq!(truth.connections, 300);
        assert_eq!(truth.packets, frames.len() as u64);
        let mut last = 0;
        let mut syns = 0;
        for (ts, f) in &frames {
            assert!(*ts >= last, "timestamps go back");
            last = *ts;
            let l = linerate_wire::parse_frame(f).unwrap();
            assert_eq!(l.l4, L4::Tcp);
            let ip = &f[l.l3_offset as usize..l.l4_offset as usize];
            assert_eq!(linerate_wire::checksum::checksum(ip), 0, "IPv4 checksum");
            let (src, dst) = (
                ip[12..16].try_into().unwrap(),
                ip[16..20].try_into().unwrap(),
            );
            let seg = &f[l.l4_offset as usize..l.end as usize];
            assert_eq!(
                linerate_wire::checksum::l4_checksum_v4(&src, &dst, 6, seg),
                0,
                "TCP checksum"
            );
            let fl = l.tcp_flags;
            syns += (fl & flags::SYN != 0 && fl & flags::ACK == 0) as u64;
        }
        assert_eq!(syns, 300);
        // Interleaved: connections overlap in time.
        let first_fin = frames
            .iter()
            .position(|(_, f)| linerate_wire::parse_frame(f).unwrap().tcp_flags & flags::FIN != 0)
            .unwrap();
        let syns_before_fin = frames[..first_fin]
            .iter()
            .filter(|(_, f)| linerate_wire::parse_frame(f).unwrap().tcp_flags == flags::SYN)
            .count();
        assert!(syns_before_fin > 1, "connections do not overlap");
        assert_eq!(
            collect(&cfg),
            (frames, truth.clone()),
            "same seed, same trace"
        );
        assert_ne!(
            collect(&small(300, 8)).1,
            truth,
            "another seed, another trace"
        );
    }

    #[test]
    fn body_sizes_are_heavy_tailed() {
        let (_, t) = collect(&small(5000, 3));
        assert!(t.top10_byte_share > 0.5, "{t:?}");
        assert!(t.median_body < 4 * 2000, "{t:?}");
        assert!(t.largest_body > 100 * t.median_body, "{t:?}");
    }

    /// The built-in `http` analyser finds exactly the trace's ground truth.
    #[test]
    fn the_http_analyser_sees_every_request_response_and_pair() {
        let cfg = small(300, 11);
        let (frames, truth) = collect(&cfg);
        let mut a = HttpAnalyser::new(HttpConfig::default());
        for (ts, f) in &frames {
            a.on_packet(f, *ts);
        }
        let s = a.stats();
        assert_eq!(
            (s.http_request, s.http_response, s.http_pair),
            (truth.requests, truth.responses, truth.pairs),
            "{s:?}"
        );
        assert_eq!((s.parse_errors, s.ooo_segments), (0, 0), "{s:?}");
    }

    #[test]
    fn bad_configs_are_named() {
        let bad = [
            HttpTraceConfig {
                connections: 0,
                ..Default::default()
            },
            HttpTraceConfig {
                servers: 0,
                ..Default::default()
            },
            HttpTraceConfig {
                pareto_shape: 1.0,
                ..Default::default()
            },
            HttpTraceConfig {
                min_size: 10,
                max_size: 5,
                ..Default::default()
            },
        ];
        for b in bad {
            let e = b.check().unwrap_err();
            assert!(!e.contains('\n') && !e.is_empty());
        }
        HttpTraceConfig::default().check().unwrap();
    }
}
