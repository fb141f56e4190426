//! The in-process analyser API of a capture worker, and the built-in
//! `http` analyser (seed 002's `http` / `http_track` events).
//!
//! A worker hands every packet it takes from its ring to its
//! [`Analyser`]; the analyser may answer [`AnalyserAction::Shunt`] to tell
//! the forwarder that a connection is no longer interesting (DNAC's
//! shunting: the forwarder then drops its later packets before they cost
//! anything).
//!
//! # The `http` analyser
//!
//! Per TCP connection (both directions, keyed by the canonical 5-tuple) and
//! per direction, it follows the byte stream in order by tracking the next
//! expected sequence number: retransmitted bytes are trimmed, and a gap
//! (data beyond the next expected byte: a loss, a TED cut, reordering) is
//! counted (`ooo_segments`) and the direction resynchronises at the next
//! segment that starts with an HTTP start line. On the stream it parses
//! HTTP/1.x request lines (`METHOD TARGET HTTP/1.x`) and status lines
//! (`HTTP/1.x NNN ...`), headers (`Content-Length`, `Transfer-Encoding:
//! chunked`), and skips bodies by length or by chunk sizes (a response
//! with neither runs until the connection ends). Events:
//!
//! * `http_request`: a request line and its headers were seen;
//! * `http_response`: a status line (final: 1xx are not counted) and its headers;
//! * `http_pair`: a response matched with the oldest unanswered request of
//!   its connection (HTTP/1.x answers in order).
//!
//! With [`HttpConfig::shunt_after_response`], once the headers of a
//! response have been seen the analyser asks to shunt the connection: its
//! body is not interesting (the DNAC experiment), at the price of missing
//! later requests on a persistent connection.
//!
//! Memory: a connection table of at most `max_conns` entries, reserved at
//! construction; no allocation per packet. Lines longer than 256 bytes are
//! kept truncated (only their beginning is parsed). Untrusted input never
//! panics: everything unparseable is counted (`parse_errors`) and skipped.
//! Connections end on RST, on FIN from both sides, or after `idle_ns`
//! without packets (aged when the table is full).

use std::collections::HashMap;

use linerate_wire::frame::L4;
use linerate_wire::tcp::flags as tcpf;
use linerate_wire::{parse_frame, FlowKey};

/// What an analyser asks of the forwarder after a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AnalyserAction {
    Continue,
    /// Drop the later packets of this connection (either direction).
    Shunt(FlowKey),
}

/// An in-process analyser, run by one capture worker on the packets it
/// forwarded (in ring order).
pub trait Analyser: Send {
    /// One Ethernet frame, its capture timestamp in ns.
    fn on_packet(&mut self, pkt: &[u8], ts_ns: u64) -> AnalyserAction;
    /// Event and error counters by name, for the stats (called about once
    /// a second, may allocate).
    fn events(&self) -> Vec<(&'static str, u64)>;
}

impl Analyser for Box<dyn Analyser> {
    fn on_packet(&mut self, pkt: &[u8], ts_ns: u64) -> AnalyserAction {
        (**self).on_packet(pkt, ts_ns)
    }
    fn events(&self) -> Vec<(&'static str, u64)> {
        (**self).events()
    }
}

/// Busy-wait `ns` nanoseconds (emulates an expensive analyser: `--cost-ns`).
#[inline]
pub fn spin_ns(ns: u64) {
    if ns == 0 {
        return;
    }
    let t = std::time::Instant::now();
    while (t.elapsed().as_nanos() as u64) < ns {
        std::hint::spin_loop();
    }
}

/// Wraps an analyser and adds a fixed cost per packet.
pub struct Costly<A> {
    pub inner: A,
    pub cost_ns: u64,
}

impl<A: Analyser> Analyser for Costly<A> {
    fn on_packet(&mut self, pkt: &[u8], ts_ns: u64) -> AnalyserAction {
        spin_ns(self.cost_ns);
        self.inner.on_packet(pkt, ts_ns)
    }
    fn events(&self) -> Vec<(&'static str, u64)> {
        self.inner.events()
    }
}

/// Does nothing but cost (`--cost-ns` without `--analyser`).
pub struct NullAnalyser;

impl Analyser for NullAnalyser {
    fn on_packet(&mut self, _: &[u8], _: u64) -> AnalyserAction {
        AnalyserAction::Continue
    }
    fn events(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
}

/// Settings of the `http` analyser.
#[derive(Clone, Copy, Debug)]
pub struct HttpConfig {
    pub max_conns: usize,
    pub idle_ns: u64,
    /// Ask to shunt a connection once a response's headers were seen.
    pub shunt_after_response: bool,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            max_conns: 1 << 16,
            idle_ns: 60_000_000_000,
            shunt_after_response: false,
        }
    }
}

/// Counters of the `http` analyser.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct HttpStats {
    pub http_request: u64,
    pub http_response: u64,
    pub http_pair: u64,
    pub tcp_packets: u64,
    pub payload_bytes: u64,
    /// Segments beyond the next expected byte (a gap in the stream).
    pub ooo_segments: u64,
    pub parse_errors: u64,
    pub connections: u64,
    /// Connections not tracked because the table was full.
    pub table_full: u64,
    pub shunt_requests: u64,
}

const LINE: usize = 256;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum St {
    /// Waiting for a start line.
    Start,
    Headers,
    /// `n` body bytes left.
    Body(u64),
    /// A chunk-size line.
    ChunkSize,
    /// `n` chunk bytes (and their CRLF) left.
    ChunkData(u64),
    /// Trailer lines after the last chunk.
    Trailers,
    /// Body until the connection ends.
    UntilClose,
    /// Lost: wait for a segment that begins with a start line.
    Resync,
}

#[derive(Clone, Copy)]
struct Msg {
    is_response: bool,
    status: u16,
    content_length: Option<u64>,
    chunked: bool,
}

#[derive(Clone)]
struct Dir {
    next_seq: Option<u32>,
    st: St,
    line: [u8; LINE],
    line_len: usize,
    msg: Msg,
    fin: bool,
}

impl Dir {
    fn new() -> Dir {
        Dir {
            next_seq: None,
            st: St::Resync,
            line: [0; LINE],
            line_len: 0,
            msg: Msg {
                is_response: false,
                status: 0,
                content_length: None,
                chunked: false,
            },
            fin: false,
        }
    }
}

struct Conn {
    /// Direction 0 is the canonical key's src -> dst.
    dirs: [Dir; 2],
    /// Requests without a response yet (bit i set: the i-th oldest is a HEAD).
    pending: u32,
    head_bits: u64,
    last_ns: u64,
    shunted: bool,
}

/// The built-in HTTP/1.x analyser (see the module docs).
pub struct HttpAnalyser {
    cfg: HttpConfig,
    conns: HashMap<FlowKey, Conn>,
    stats: HttpStats,
}

/// What a parsed message head means for the connection.
enum Ev {
    Request { head: bool },
    Response,
    Error,
}

impl HttpAnalyser {
    pub fn new(cfg: HttpConfig) -> HttpAnalyser {
        let cfg = HttpConfig {
            max_conns: cfg.max_conns.max(1),
            ..cfg
        };
        HttpAnalyser {
            conns: HashMap::with_capacity(cfg.max_conns),
            cfg,
            stats: HttpStats::default(),
        }
    }

    pub fn stats(&self) -> HttpStats {
        self.stats
    }

    pub fn open_connections(&self) -> usize {
        self.conns.len()
    }

    fn age(&mut self, now: u64) {
        let idle = self.cfg.idle_ns;
        self.conns
            .retain(|_, c| now.saturating_sub(c.last_ns) < idle);
    }
}

fn is_method(m: &[u8]) -> bool {
    matches!(
        m,
        b"GET"
            | b"HEAD"
            | b"POST"
            | b"PUT"
            | b"DELETE"
            | b"OPTIONS"
            | b"TRACE"
            | b"CONNECT"
            | b"PATCH"
    )
}

/// Does `p` begin like an HTTP/1.x start line? (resynchronisation)
fn looks_like_start(p: &[u8]) -> bool {
    if p.starts_with(b"HTTP/1.") {
        return true;
    }
    match p.iter().position(|&b| b == b' ') {
        Some(i) => is_method(&p[..i]),
        None => false,
    }
}

fn trim(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t' | b'\r', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t' | b'\r'] = s {
        s = rest;
    }
    s
}

fn parse_u64(s: &[u8], radix: u32) -> Option<u64> {
    if s.is_empty() || s.len() > 16 {
        return None;
    }
    let mut v: u64 = 0;
    for &c in s {
        let d = (c as char).to_digit(radix)? as u64;
        v = v.checked_mul(radix as u64)?.checked_add(d)?;
    }
    Some(v)
}

/// Parse a start line into the message state.
fn start_line(line: &[u8], msg: &mut Msg) -> Option<Ev> {
    let line = trim(line);
    if line.is_empty() {
        return None; // blank lines between messages are tolerated
    }
    *msg = Msg {
        is_response: false,
        status: 0,
        content_length: None,
        chunked: false,
    };
    let mut parts = line.splitn(3, |&b| b == b' ');
    let a = parts.next().unwrap_or(b"");
    let b = parts.next().unwrap_or(b"");
    let c = parts.next().unwrap_or(b"");
    if a.starts_with(b"HTTP/1.") && a.len() == 8 {
        match parse_u64(b, 10) {
            Some(s) if b.len() == 3 && (100..=999).contains(&s) => {
                msg.is_response = true;
                msg.status = s as u16;
                Some(Ev::Response)
            }
            _ => Some(Ev::Error),
        }
    } else if is_method(a) && !b.is_empty() && c.starts_with(b"HTTP/1.") {
        Some(Ev::Request { head: a == b"HEAD" })
    } else {
        Some(Ev::Error)
    }
}

fn header_line(line: &[u8], msg: &mut Msg) {
    let Some(colon) = line.iter().position(|&b| b == b':') else {
        return;
    };
    let name = trim(&line[..colon]);
    let value = trim(&line[colon + 1..]);
    if name.eq_ignore_ascii_case(b"content-length") {
        msg.content_length = parse_u64(value, 10);
    } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
        msg.chunked = value.len() >= 7 && value[value.len() - 7..].eq_ignore_ascii_case(b"chunked");
    }
}

/// Result of feeding stream bytes to one direction.
#[derive(Default)]
struct Fed {
    requests: u32,
    heads: u64,
    responses: u32,
    errors: u32,
    response_headers_done: bool,
}

/// Feed in-order stream bytes to a direction's parser. `is_head_answer`
/// tells whether the next response answers a HEAD (no body).
fn feed(d: &mut Dir, mut data: &[u8], mut next_is_head: impl FnMut(u32) -> bool, fed: &mut Fed) {
    if d.st == St::Resync {
        if looks_like_start(data) {
            d.st = St::Start;
            d.line_len = 0;
        } else {
            return;
        }
    }
    while !data.is_empty() {
        match d.st {
            St::Resync | St::UntilClose => return,
            St::Body(n) => {
                let k = (n.min(data.len() as u64)) as usize;
                data = &data[k..];
                d.st = if n - k as u64 == 0 {
                    St::Start
                } else {
                    St::Body(n - k as u64)
                };
            }
            St::ChunkData(n) => {
                let k = (n.min(data.len() as u64)) as usize;
                data = &data[k..];
                d.st = if n - k as u64 == 0 {
                    St::ChunkSize
                } else {
                    St::ChunkData(n - k as u64)
                };
            }
            St::Start | St::Headers | St::ChunkSize | St::Trailers => {
                // Take one line (or what there is of it).
                let (part, rest, done) = match data.iter().position(|&b| b == b'\n') {
                    Some(i) => (&data[..i], &data[i + 1..], true),
                    None => (data, &data[data.len()..], false),
                };
                let room = LINE - d.line_len;
                let k = part.len().min(room);
                d.line[d.line_len..d.line_len + k].copy_from_slice(&part[..k]);
                d.line_len += k;
                data = rest;
                if !done {
                    return;
                }
                let line_buf = d.line;
                let line = &line_buf[..d.line_len];
                d.line_len = 0;
                match d.st {
                    St::Start => match start_line(line, &mut d.msg) {
                        None => {}
                        Some(Ev::Error) => {
                            fed.errors += 1;
                            d.st = St::Resync;
                            return;
                        }
                        Some(Ev::Request { head }) => {
                            if head && fed.requests < 64 {
                                fed.heads |= 1 << fed.requests;
                            }
                            fed.requests += 1;
                            d.st = St::Headers;
                        }
                        Some(Ev::Response) => d.st = St::Headers,
                    },
                    St::Headers => {
                        if trim(line).is_empty() {
                            let m = d.msg;
                            let mut body_none = false;
                            if m.is_response {
                                if m.status >= 200 {
                                    let head = next_is_head(fed.responses);
                                    fed.responses += 1;
                                    fed.response_headers_done = true;
                                    body_none = head || m.status == 204 || m.status == 304;
                                } else {
                                    body_none = true; // 1xx: no body, a final response follows
                                }
                            }
                            d.st = if body_none {
                                St::Start
                            } else if m.chunked {
                                St::ChunkSize
                            } else if let Some(n) = m.content_length {
                                if n == 0 {
                                    St::Start
                                } else {
                                    St::Body(n)
                                }
                            } else if m.is_response {
                                St::UntilClose
                            } else {
                                St::Start
                            };
                        } else {
                            header_line(line, &mut d.msg);
                        }
                    }
                    St::ChunkSize => {
                        let l = trim(line);
                        let hex = match l.iter().position(|&b| b == b';') {
                            Some(i) => trim(&l[..i]),
                            None => l,
                        };
                        match parse_u64(hex, 16) {
                            Some(0) => d.st = St::Trailers,
                            // data, then its CRLF (taken as part of the chunk)
                            Some(n) => d.st = St::ChunkData(n.saturating_add(2)),
                            None if l.is_empty() => {}
                            None => {
                                fed.errors += 1;
                                d.st = St::Resync;
                                return;
                            }
                        }
                    }
                    St::Trailers if trim(line).is_empty() => d.st = St::Start,
                    _ => {}
                }
            }
        }
    }
}

impl Analyser for HttpAnalyser {
    fn on_packet(&mut self, pkt: &[u8], ts_ns: u64) -> AnalyserAction {
        let Ok(l) = parse_frame(pkt) else {
            return AnalyserAction::Continue;
        };
        if l.l4 != L4::Tcp || l.is_fragment() {
            return AnalyserAction::Continue;
        }
        let l4 = l.l4_bytes(pkt);
        if l4.len() < 8 {
            return AnalyserAction::Continue;
        }
        self.stats.tcp_packets += 1;
        let seq = u32::from_be_bytes([l4[4], l4[5], l4[6], l4[7]]);
        let payload = l.payload(pkt);
        let flags = l.tcp_flags;
        let key = l.flow_key();
        let ck = key.canonical();
        let dir = (ck != key) as usize;
        if !self.conns.contains_key(&ck) {
            if flags & tcpf::RST != 0 {
                return AnalyserAction::Continue;
            }
            if self.conns.len() >= self.cfg.max_conns {
                self.age(ts_ns);
                if self.conns.len() >= self.cfg.max_conns {
                    self.stats.table_full += 1;
                    return AnalyserAction::Continue;
                }
            }
            self.stats.connections += 1;
            self.conns.insert(
                ck,
                Conn {
                    dirs: [Dir::new(), Dir::new()],
                    pending: 0,
                    head_bits: 0,
                    last_ns: ts_ns,
                    shunted: false,
                },
            );
        }
        let Some(c) = self.conns.get_mut(&ck) else {
            return AnalyserAction::Continue;
        };
        c.last_ns = ts_ns;
        if flags & tcpf::RST != 0 {
            self.conns.remove(&ck);
            return AnalyserAction::Continue;
        }
        let d = &mut c.dirs[dir];
        if flags & tcpf::SYN != 0 {
            d.next_seq = Some(seq.wrapping_add(1));
            d.st = St::Start;
            d.line_len = 0;
        }
        let mut data = payload;
        if !data.is_empty() {
            self.stats.payload_bytes += data.len() as u64;
            match d.next_seq {
                None => {
                    // Picked up mid-stream: resynchronise here.
                    d.next_seq = Some(seq);
                    d.st = St::Resync;
                }
                Some(next) => {
                    let off = seq.wrapping_sub(next) as i32;
                    if off < 0 {
                        // Retransmitted bytes: keep only what is new.
                        let dup = (-(off as i64)) as usize;
                        data = if dup >= data.len() { &[] } else { &data[dup..] };
                    } else if off > 0 {
                        self.stats.ooo_segments += 1;
                        d.st = St::Resync;
                        d.line_len = 0;
                        d.next_seq = Some(seq);
                    }
                }
            }
        }
        let mut action = AnalyserAction::Continue;
        if !data.is_empty() {
            if let Some(n) = d.next_seq {
                d.next_seq = Some(n.wrapping_add(data.len() as u32));
            }
            let mut fed = Fed::default();
            let (pending, head_bits) = (c.pending, c.head_bits);
            let d = &mut c.dirs[dir];
            feed(
                d,
                data,
                |i| i < pending && i < 64 && head_bits & (1 << i) != 0,
                &mut fed,
            );
            self.stats.parse_errors += fed.errors as u64;
            if fed.requests > 0 {
                self.stats.http_request += fed.requests as u64;
                let shift = c.pending.min(63);
                c.head_bits |= fed.heads.checked_shl(shift).unwrap_or(0);
                c.pending = c.pending.saturating_add(fed.requests);
            }
            if fed.responses > 0 {
                self.stats.http_response += fed.responses as u64;
                let paired = fed.responses.min(c.pending);
                self.stats.http_pair += paired as u64;
                c.pending -= paired;
                c.head_bits = c.head_bits.checked_shr(paired).unwrap_or(0);
            }
            if fed.response_headers_done && self.cfg.shunt_after_response && !c.shunted {
                c.shunted = true;
                self.stats.shunt_requests += 1;
                action = AnalyserAction::Shunt(key);
            }
        }
        let d = &mut c.dirs[dir];
        if flags & tcpf::FIN != 0 {
            d.fin = true;
            if c.dirs[0].fin && c.dirs[1].fin {
                self.conns.remove(&ck);
            }
        }
        action
    }

    fn events(&self) -> Vec<(&'static str, u64)> {
        let s = &self.stats;
        vec![
            ("http_request", s.http_request),
            ("http_response", s.http_response),
            ("http_pair", s.http_pair),
            ("tcp_packets", s.tcp_packets),
            ("ooo_segments", s.ooo_segments),
            ("parse_errors", s.parse_errors),
            ("connections", s.connections),
            ("table_full", s.table_full),
            ("shunt_requests", s.shunt_requests),
        ]
    }
}

/// Fuzz body: arbitrary frames never panic the analyser.
pub fn fuzz_http(data: &[u8]) -> HttpStats {
    let mut a = HttpAnalyser::new(HttpConfig {
        max_conns: 4,
        shunt_after_response: true,
        ..HttpConfig::default()
    });
    for (i, chunk) in data.chunks(97).enumerate() {
        a.on_packet(chunk, i as u64);
    }
    // Also as raw stream bytes to one direction, cut at every split.
    let mut d = Dir::new();
    d.st = St::Start;
    let mut fed = Fed::default();
    for part in data.chunks(7) {
        feed(&mut d, part, |_| false, &mut fed);
    }
    a.stats()
}

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_wire::build::{build_tcp, FrameParams, IpPair};
    use linerate_wire::tcp::TcpRepr;

    /// A TCP connection as frames, client port `cport`.
    pub(crate) struct TcpConv {
        cport: u16,
        cseq: u32,
        sseq: u32,
        pub frames: Vec<Vec<u8>>,
    }

    impl TcpConv {
        pub fn new(cport: u16) -> TcpConv {
            let mut c = TcpConv {
                cport,
                cseq: 1000,
                sseq: 5000,
                frames: vec![],
            };
            c.seg(true, tcpf::SYN, b"");
            c.seg(false, tcpf::SYN | tcpf::ACK, b"");
            c
        }
        pub fn seg(&mut self, client: bool, flags: u16, pl: &[u8]) {
            let (src, dst, sp, dp, seq) = if client {
                ([10, 0, 0, 1], [10, 0, 0, 2], self.cport, 80, &mut self.cseq)
            } else {
                ([10, 0, 0, 2], [10, 0, 0, 1], 80, self.cport, &mut self.sseq)
            };
            let mut p = FrameParams::new(IpPair::V4 { src, dst });
            p.payload = pl;
            let t = TcpRepr {
                src_port: sp,
                dst_port: dp,
                seq: *seq,
                ack: 0,
                flags,
                window: 1000,
                urgent: 0,
            };
            let mut buf = vec![0u8; pl.len() + 100];
            let n = build_tcp(&mut buf, &p, &t).unwrap();
            buf.truncate(n);
            *seq = seq
                .wrapping_add(pl.len() as u32)
                .wrapping_add((flags & (tcpf::SYN | tcpf::FIN) != 0) as u32);
            self.frames.push(buf);
        }
        pub fn fin(&mut self) {
            self.seg(true, tcpf::FIN | tcpf::ACK, b"");
            self.seg(false, tcpf::FIN | tcpf::ACK, b"");
        }
    }

    fn run(frames: &[Vec<u8>], cfg: HttpConfig) -> (HttpStats, Vec<AnalyserAction>) {
        let mut a = HttpAnalyser::new(cfg);
        let acts = frames
            .iter()
            .enumerate()
            .map(|(i, f)| a.on_packet(f, i as u64))
            .collect();
        (a.stats(), acts)
    }

    #[test]
    fn request_response_pairs_with_bodies_split_anywhere() {
        let req = b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n";
        let body = vec![b'H'; 3000]; // body that looks like nothing
        let mut resp = b"HTTP/1.1 200 OK\r\nContent-Length: 3000\r\n\r\n".to_vec();
        resp.extend_from_slice(&body);
        let chunked =
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nHTTP/\r\n0\r\n\r\n";
        for split in [1usize, 3, 7, 50, 1460] {
            let mut c = TcpConv::new(4000);
            for _ in 0..2 {
                for p in req.chunks(split) {
                    c.seg(true, tcpf::ACK | tcpf::PSH, p);
                }
                for p in resp.chunks(split) {
                    c.seg(false, tcpf::ACK, p);
                }
            }
            for p in req.chunks(split) {
                c.seg(true, tcpf::ACK | tcpf::PSH, p);
            }
            for p in chunked.chunks(split) {
                c.seg(false, tcpf::ACK, p);
            }
            c.fin();
            let (s, _) = run(&c.frames, HttpConfig::default());
            assert_eq!(
                (s.http_request, s.http_response, s.http_pair, s.parse_errors),
                (3, 3, 3, 0),
                "split {split}: {s:?}"
            );
        }
    }

    #[test]
    fn pipelined_head_retransmission_gap_and_shunt() {
        let mut c = TcpConv::new(4001);
        // Two pipelined requests, the first a HEAD (its response has a
        // Content-Length but no body).
        c.seg(
            true,
            tcpf::ACK,
            b"HEAD / HTTP/1.1\r\n\r\nGET /b HTTP/1.0\r\n\r\n",
        );
        c.seg(
            false,
            tcpf::ACK,
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\nHTTP/1.1 404 NF\r\ncontent-length: 2\r\n\r\nxx",
        );
        // a retransmission of the last segment: no double count
        let dup = c.frames.last().unwrap().clone();
        c.frames.push(dup);
        let (s, _) = run(&c.frames, HttpConfig::default());
        assert_eq!(
            (s.http_request, s.http_response, s.http_pair),
            (2, 2, 2),
            "{s:?}"
        );

        // A gap: the next response is missed, the one after is found again.
        let mut c = TcpConv::new(4002);
        c.seg(
            true,
            tcpf::ACK,
            b"GET / HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\n\r\n",
        );
        c.seg(
            false,
            tcpf::ACK,
            b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n",
        );
        let lost = c.frames.len();
        c.seg(false, tcpf::ACK, b"0123456789");
        c.seg(
            false,
            tcpf::ACK,
            b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
        );
        c.frames.remove(lost);
        let (s, acts) = run(
            &c.frames,
            HttpConfig {
                shunt_after_response: true,
                ..HttpConfig::default()
            },
        );
        assert_eq!(s.ooo_segments, 1, "{s:?}");
        assert_eq!(
            (s.http_request, s.http_response, s.http_pair),
            (2, 2, 2),
            "{s:?}"
        );
        let shunts: Vec<_> = acts
            .iter()
            .filter(|a| matches!(a, AnalyserAction::Shunt(_)))
            .collect();
        assert_eq!(shunts.len(), 1, "one shunt per connection");
        assert_eq!(s.shunt_requests, 1);
    }

    #[test]
    fn garbage_is_counted_not_parsed() {
        let mut c = TcpConv::new(4003);
        c.seg(true, tcpf::ACK, b"GET / HTTP/1.1\r\n\r\n");
        c.seg(false, tcpf::ACK, b"HTTP/1.1 2x0 OK\r\n\r\n");
        c.seg(false, tcpf::ACK, &[0xffu8; 600]);
        let (s, _) = run(&c.frames, HttpConfig::default());
        assert_eq!((s.http_request, s.http_response, s.http_pair), (1, 0, 0));
        assert_eq!(s.parse_errors, 1);
        // a connection picked up mid-stream resynchronises on a start line
        let mut c = TcpConv::new(4004);
        c.frames.clear();
        c.seg(true, tcpf::ACK, b"tail of something\r\n");
        c.seg(
            true,
            tcpf::ACK,
            b"POST /x HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc",
        );
        let (s, _) = run(&c.frames, HttpConfig::default());
        assert_eq!(s.http_request, 1, "{s:?}");
    }

    #[test]
    fn table_is_bounded() {
        let mut frames = vec![];
        for p in 0..10u16 {
            let mut c = TcpConv::new(5000 + p);
            c.seg(true, tcpf::ACK, b"GET / HTTP/1.1\r\n\r\n");
            frames.extend(c.frames);
        }
        let (s, _) = run(
            &frames,
            HttpConfig {
                max_conns: 4,
                ..HttpConfig::default()
            },
        );
        assert_eq!(s.connections, 4);
        assert!(s.table_full > 0);
        assert_eq!(s.http_request, 4);
    }

    #[test]
    fn fuzz_never_panics() {
        let mut x: u64 = 0x9e3779b97f4a7c15;
        let seeds: [&[u8]; 3] = [
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\n",
            b"GET / HTTP/1.1\r\nContent-Length: 18446744073709551615\r\n\r\n",
            b"HTTP/1.1 999 \r\n\r\n\n\n\nHEAD  HTTP/1.",
        ];
        for s in seeds {
            fuzz_http(s);
        }
        for len in 0..2000usize {
            let mut buf = vec![0u8; len % 700];
            for b in buf.iter_mut() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *b = if x & 3 == 0 {
                    b"HTTP/1. \r\n:0"[(x >> 8) as usize % 12]
                } else {
                    x as u8
                };
            }
            fuzz_http(&buf);
        }
        // real frames with random payloads at random sequence numbers
        let mut a = HttpAnalyser::new(HttpConfig::default());
        for i in 0..3000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let mut c = TcpConv::new((x % 4) as u16);
            c.cseq = (x >> 16) as u32;
            let pl: Vec<u8> = (0..(x % 200) as usize)
                .map(|k| b"GET HTTP/1.1 \r\n0123:"[(k + i as usize) % 20])
                .collect();
            c.seg(x & 1 == 0, (x >> 40) as u16 & 0x1ff, &pl);
            for f in &c.frames {
                a.on_packet(f, i as u64);
            }
        }
    }
}
