//! Traffic generator library (`linerate gen` is built on it).
//!
//! A [`Profile`] (TOML, see [`profile`]) is compiled by [`Generator::new`]
//! into per-stream templates (one pre-built frame per size of the stream's
//! mix), field engines ([`field`]) and pacers ([`pacer`]). Per batch,
//! [`Generator::next_batch`] copies the template into one of its own
//! pre-allocated frame buffers, patches the varying fields and the
//! signature, and fixes the IPv4 header checksum and the L4 checksum
//! incrementally (RFC 1624, over the changed words only). Right before
//! sending, [`Generator::stamp`] writes the TX time into sampled packets
//! (again fixing the L4 checksum incrementally) and [`Generator::sent`]
//! records measured departures. [`run::run_loop`] is the loop doing all that
//! against a [`linerate_io::TxPort`] (`linerate gen`'s, and the only one).
//!
//! Checksums: every generated packet has a valid IPv4 header checksum and a
//! valid, non-zero L4 checksum (UDP over IPv4 included: the "no checksum" 0
//! is never used; a computed 0 is sent as 0xffff).
//!
//! Signature: when enabled, the first [`signature::LEN`] bytes of the L4
//! payload hold it. The sequence number counts EVERY packet of the stream
//! (0, 1, 2, ...); packets with `seq % sample_every == 0` carry the magic,
//! stream id, seq, `FLAG_TS` and the TX time; the others carry 24 zero
//! bytes ([`signature::write_blank`]), so sizes and headers are identical.

pub mod field;
pub mod http_trace;
pub mod pacer;
pub mod profile;
pub mod replay;
pub mod run;
pub mod session;
pub mod xdp;

use std::net::{Ipv4Addr, Ipv6Addr};

use linerate_io::{Batch, Pkt, PortError};
use linerate_wire::build::{self, FrameParams, IpPair};
use linerate_wire::checksum::{self, add, fold, sum};
use linerate_wire::signature::{self, Signature, FLAG_TS};
use linerate_wire::tcp::TcpRepr;

use field::{FieldEngine, Seq, SplitMix64};
use pacer::Pacer;
pub use profile::*;

/// A one-line configuration error naming the stream and field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenError(pub String);

impl std::fmt::Display for GenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for GenError {}
impl From<PortError> for GenError {
    fn from(e: PortError) -> GenError {
        GenError(e.0)
    }
}

/// Smallest and largest frame (without FCS).
pub const MIN_FRAME: usize = 60;
pub const MAX_FRAME: usize = 9000;
/// Most distinct sizes a stream may use (uniform sizes build one template each).
pub const MAX_SIZES: usize = 4096;

/// The "simple" IMIX: 7:4:1 of 60/590/1514-byte frames (64/594/1518 with FCS).
pub const IMIX_SIMPLE: [(u16, u32); 3] = [(60, 7), (590, 4), (1514, 1)];
/// "ipv6-simple": 7:4:1 of 78/590/1514 (82/594/1518 with FCS).
pub const IMIX_IPV6_SIMPLE: [(u16, u32); 3] = [(78, 7), (590, 4), (1514, 1)];

/// Per-stream counters.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct StreamStats {
    pub name: String,
    pub id: u16,
    /// Packets / bytes (frames without FCS) built by `next_batch`.
    pub generated_pkts: u64,
    pub generated_bytes: u64,
    /// Packets / bytes the port took (recorded by `sent`).
    pub sent_pkts: u64,
    pub sent_bytes: u64,
    /// Packets that carried the signature magic.
    pub sampled_pkts: u64,
    pub departures: DepartureStats,
}

/// Measured departures of one stream (times taken at stamp/send time).
#[derive(Clone, Debug, serde::Serialize)]
pub struct DepartureStats {
    pub first_ns: Option<u64>,
    pub last_ns: Option<u64>,
    /// 65 log2 buckets (allocated once). Inter-departure gaps: `buckets[0]` counts 0 ns, `buckets[b]` counts gaps in `[2^(b-1), 2^b)` ns.
    pub buckets: Vec<u64>,
    pub gaps: u64,
    pub gap_sum_ns: u128,
    pub gap_min_ns: u64,
    pub gap_max_ns: u64,
    /// Sum of squared gaps (for the jitter: standard deviation of the gaps).
    pub gap_sq_sum: f64,
}

impl Default for DepartureStats {
    fn default() -> Self {
        DepartureStats {
            first_ns: None,
            last_ns: None,
            buckets: vec![0; 65],
            gaps: 0,
            gap_sum_ns: 0,
            gap_min_ns: u64::MAX,
            gap_max_ns: 0,
            gap_sq_sum: 0.0,
        }
    }
}

impl DepartureStats {
    #[inline(always)]
    fn record(&mut self, now: u64) {
        if let Some(last) = self.last_ns {
            let g = now.saturating_sub(last);
            self.buckets[(64 - g.leading_zeros()) as usize] += 1;
            self.gaps += 1;
            self.gap_sum_ns += g as u128;
            self.gap_min_ns = self.gap_min_ns.min(g);
            self.gap_max_ns = self.gap_max_ns.max(g);
            self.gap_sq_sum += (g as f64) * (g as f64);
        } else {
            self.first_ns = Some(now);
        }
        self.last_ns = Some(now);
    }
    /// Achieved packet rate between the first and last departure.
    pub fn achieved_pps(&self) -> Option<f64> {
        let (f, l) = (self.first_ns?, self.last_ns?);
        (l > f).then(|| self.gaps as f64 * 1e9 / (l - f) as f64)
    }
    /// Mean inter-departure gap.
    pub fn mean_gap_ns(&self) -> Option<f64> {
        (self.gaps > 0).then(|| self.gap_sum_ns as f64 / self.gaps as f64)
    }
    /// Jitter: the standard deviation of the inter-departure gaps.
    pub fn gap_stddev_ns(&self) -> Option<f64> {
        let m = self.mean_gap_ns()?;
        Some((self.gap_sq_sum / self.gaps as f64 - m * m).max(0.0).sqrt())
    }
}

/// One pre-built frame.
struct Tmpl {
    bytes: Vec<u8>,
    /// IPv4 header checksum offset.
    ip_csum: Option<usize>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum L4Kind {
    Udp,
    Tcp,
    Icmp4,
    Icmp6,
}

struct Stream {
    name: String,
    id: u16,
    tmpls: Vec<Tmpl>,
    /// Cycle of template indices (fixed / list / preset).
    size_cycle: Vec<u16>,
    size_pos: usize,
    /// Uniform sizes: PRNG over template indices.
    size_rng: Option<SplitMix64>,
    fields: Vec<FieldEngine>,
    l4_csum: usize,
    kind: L4Kind,
    payload_off: usize,
    sig_every: u32,
    seq: u64,
    pacer: Pacer,
    paused: bool,
    stats: StreamStats,
}

/// What `stamp` needs about a slot.
#[derive(Clone, Copy, Default)]
struct SlotMeta {
    stream: u16,
    /// Offset of the signature's TX time, 0 = unsampled.
    ts_off: u32,
    l4_csum: u32,
    udp: bool,
}

/// Owns templates, field engines, pacers, the frame buffers and the batch
/// of descriptors into them. The descriptors never leave this batch (callers
/// see it through [`Generator::batch`]), so no descriptor outlives the next
/// [`Generator::next_batch`], which rewrites the buffers.
pub struct Generator {
    streams: Vec<Stream>,
    out: Batch,
    bufs: Vec<u8>,
    slot_size: usize,
    meta: Vec<SlotMeta>,
    rr: usize,
    last_now: u64,
}

fn err(stream: &str, what: impl std::fmt::Display) -> GenError {
    GenError(format!("stream '{stream}': {what}"))
}

use linerate_wire::ethernet::parse_mac;

fn parse_hex(s: &str) -> Option<Vec<u8>> {
    let s = s.trim_start_matches("0x");
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Parse a field value: integer, "0x..", IPv4/IPv6 address or MAC by field.
fn parse_val(v: &Val, f: FieldName, v6: bool) -> Result<u128, String> {
    let s = match v {
        Val::Int(i) => return Ok(*i as u128),
        Val::Str(s) => s.trim(),
    };
    let r = match f {
        FieldName::IpSrc | FieldName::IpDst if v6 => s
            .parse::<Ipv6Addr>()
            .ok()
            .map(|a| u128::from_be_bytes(a.octets())),
        FieldName::IpSrc | FieldName::IpDst => {
            s.parse::<Ipv4Addr>().ok().map(|a| u32::from(a) as u128)
        }
        FieldName::EthSrc | FieldName::EthDst => parse_mac(s).map(|m| {
            let mut b = [0u8; 16];
            b[10..].copy_from_slice(&m);
            u128::from_be_bytes(b)
        }),
        _ => None,
    };
    if let Some(r) = r {
        return Ok(r);
    }
    if let Some(h) = s.strip_prefix("0x") {
        return u128::from_str_radix(h, 16).map_err(|_| format!("bad value '{s}'"));
    }
    s.parse::<u128>().map_err(|_| format!("bad value '{s}'"))
}

/// Size mix -> (distinct sizes, cycle of indices, uniform?).
/// (distinct sizes, cycle of indices into them, uniform-size seed).
type SizePlan = (Vec<u16>, Vec<u16>, Option<u64>);

fn size_plan(name: &str, s: &SizeSpec) -> Result<SizePlan, GenError> {
    let weighted: Vec<(u16, u32)> = match s {
        SizeSpec::Fixed(n) => vec![(*n, 1)],
        SizeSpec::Preset(p) => match p.as_str() {
            "simple" | "imix" => IMIX_SIMPLE.to_vec(),
            "ipv6-simple" => IMIX_IPV6_SIMPLE.to_vec(),
            o => {
                return Err(err(
                    name,
                    format!("size: unknown preset '{o}' (simple, ipv6-simple)"),
                ))
            }
        },
        SizeSpec::List { list } => list.iter().map(|w| (w.size, w.weight)).collect(),
        SizeSpec::Uniform { min, max, seed } => {
            if min > max {
                return Err(err(name, "size: uniform min > max"));
            }
            if (max - min) as usize + 1 > MAX_SIZES {
                return Err(err(
                    name,
                    format!("size: more than {MAX_SIZES} distinct sizes"),
                ));
            }
            return Ok(((*min..=*max).collect(), vec![], Some(seed.unwrap_or(1))));
        }
    };
    if weighted.is_empty() {
        return Err(err(name, "size: empty list"));
    }
    let total: u64 = weighted.iter().map(|w| w.1 as u64).sum();
    if weighted.iter().any(|w| w.1 == 0) || total > 65_536 {
        return Err(err(
            name,
            "size: weights must be 1.. and sum to at most 65536",
        ));
    }
    // Smooth weighted round robin: an interleaved cycle of `total` entries.
    let mut cur = vec![0i64; weighted.len()];
    let mut cycle = Vec::with_capacity(total as usize);
    for _ in 0..total {
        for (c, w) in cur.iter_mut().zip(&weighted) {
            *c += w.1 as i64;
        }
        let (best, _) = cur
            .iter()
            .enumerate()
            .max_by_key(|(i, c)| (**c, -(*i as i64)))
            .expect("non-empty");
        cur[best] -= total as i64;
        cycle.push(best as u16);
    }
    Ok((weighted.iter().map(|w| w.0).collect(), cycle, None))
}

impl Generator {
    /// Compile a profile. All configuration errors surface here.
    pub fn new(p: &Profile) -> Result<Generator, GenError> {
        if p.streams.is_empty() {
            return Err(GenError("profile: no streams".into()));
        }
        let duration_ns = match p.duration_s {
            Some(d) if !(d.is_finite() && d > 0.0) => {
                return Err(GenError(format!("profile: duration_s {d} must be > 0")))
            }
            Some(d) => Some((d * 1e9) as u64),
            None => None,
        };
        let mut streams = Vec::with_capacity(p.streams.len());
        let mut max_len = MIN_FRAME;
        for (si, s) in p.streams.iter().enumerate() {
            if p.streams[..si].iter().any(|o| o.name == s.name) {
                return Err(err(&s.name, "duplicate stream name"));
            }
            let st = compile_stream(s, p.count, duration_ns)?;
            max_len = max_len.max(st.tmpls.iter().map(|t| t.bytes.len()).max().unwrap_or(0));
            streams.push(st);
        }
        let slot_size = max_len.next_multiple_of(64);
        Ok(Generator {
            streams,
            out: Batch::new(linerate_io::batch::MAX_BATCH),
            bufs: vec![0u8; slot_size * linerate_io::batch::MAX_BATCH],
            slot_size,
            meta: vec![SlotMeta::default(); linerate_io::batch::MAX_BATCH],
            rr: 0,
            last_now: 0,
        })
    }

    /// Largest frame any stream sends (without FCS), to check against the port.
    pub fn max_frame_len(&self) -> usize {
        self.streams
            .iter()
            .flat_map(|s| s.tmpls.iter().map(|t| t.bytes.len()))
            .max()
            .unwrap_or(0)
    }

    /// Fill this generator's batch ([`Generator::batch`], cleared first) with
    /// up to `max` packets whose departure time has come at `now_ns`.
    /// Returns how many. Streams are served round robin,
    /// starting one further each call. No allocation, no syscall.
    pub fn next_batch(&mut self, now_ns: u64, max: usize) -> usize {
        let out = &mut self.out;
        out.clear();
        self.last_now = now_ns;
        let n = self.streams.len();
        let cap = max.min(out.capacity());
        let mut slot = 0usize;
        for k in 0..n {
            let si = (self.rr + k) % n;
            let s = &mut self.streams[si];
            while slot < cap && !s.paused && s.pacer.ready(now_ns) {
                let buf = &mut self.bufs[slot * self.slot_size..(slot + 1) * self.slot_size];
                let (len, meta) = s.build(buf, si as u16);
                s.pacer.take(len as u32);
                self.meta[slot] = meta;
                // SAFETY: slot `slot` of `bufs` (never resized) is lent to
                // this one descriptor until the next call, which clears the
                // batch before writing a slot again; the batch is ours and
                // hands out only borrows.
                out.push(unsafe { Pkt::from_raw(buf.as_mut_ptr(), len as u32, slot as u64, 0) });
                slot += 1;
            }
        }
        self.rr = (self.rr + 1) % n;
        slot
    }

    /// The packets of the last [`Generator::next_batch`].
    #[inline(always)]
    pub fn batch(&self) -> &Batch {
        &self.out
    }

    /// Write `now_ns` as TX time into the sampled packets of the batch from
    /// packet `from` on, fixing the L4 checksum incrementally; sets
    /// `Pkt::ts_ns`. Call right before `send`; calling it again (a retry)
    /// overwrites the previous time correctly.
    #[inline]
    pub fn stamp(&mut self, from: usize, now_ns: u64) {
        for mut p in self.out.iter_mut_from(from) {
            p.set_ts_ns(now_ns);
            let Some(m) = self.meta.get(p.handle() as usize).copied() else {
                continue;
            };
            if m.ts_off == 0 {
                continue;
            }
            let f = p.bytes_mut();
            let (o, c) = (m.ts_off as usize, m.l4_csum as usize);
            if f.len() < o + 8 || f.len() < c + 2 {
                continue;
            }
            let mut old = [0u8; 8];
            old.copy_from_slice(&f[o..o + 8]);
            let new = now_ns.to_be_bytes();
            f[o..o + 8].copy_from_slice(&new);
            let hc = u16::from_be_bytes([f[c], f[c + 1]]);
            let mut nc = checksum::update_bytes(hc, &old, &new);
            if m.udp {
                nc = linerate_wire::udp::wire_checksum(nc);
            }
            f[c..c + 2].copy_from_slice(&nc.to_be_bytes());
        }
    }

    /// Set the timestamp of the batch's packets from `from` on to 0 (a
    /// capture file then stamps its own clock).
    pub fn clear_times(&mut self, from: usize) {
        for mut p in self.out.iter_mut_from(from) {
            p.set_ts_ns(0);
        }
    }

    /// Record that the port took the `k` packets of the batch from `from`
    /// on at `now_ns` (departure statistics).
    #[inline]
    pub fn sent(&mut self, from: usize, k: usize, now_ns: u64) {
        let end = (from + k).min(self.out.len());
        for p in &self.out.pkts()[from.min(end)..end] {
            let Some(m) = self.meta.get(p.handle() as usize) else {
                continue;
            };
            if let Some(s) = self.streams.get_mut(m.stream as usize) {
                s.stats.sent_pkts += 1;
                s.stats.sent_bytes += p.len() as u64;
                s.stats.departures.record(now_ns);
            }
        }
    }

    /// All streams finished (count reached or duration over, as of the last
    /// `next_batch` / `done_at` time).
    pub fn done(&self) -> bool {
        self.done_at(self.last_now)
    }

    /// All streams finished at `now_ns`.
    pub fn done_at(&self, now_ns: u64) -> bool {
        self.streams.iter().all(|s| s.pacer.done(now_ns))
    }

    /// Earliest next departure over all streams (None when all are done).
    pub fn next_departure_ns(&self) -> Option<u64> {
        self.streams
            .iter()
            .filter_map(|s| s.pacer.next_departure_ns())
            .min()
    }

    /// Per-stream counters and departure statistics.
    pub fn stats(&self) -> Vec<StreamStats> {
        self.streams.iter().map(|s| s.stats.clone()).collect()
    }

    /// Set stream `i`'s rate in packets/s (None: unlimited) from `now_ns` on.
    pub fn set_rate_pps(
        &mut self,
        i: usize,
        pps: Option<f64>,
        now_ns: u64,
    ) -> Result<(), GenError> {
        let s = self
            .streams
            .get_mut(i)
            .ok_or_else(|| GenError(format!("no stream number {i}")))?;
        s.pacer.set_pps(pps, now_ns).map_err(|e| err(&s.name, e))
    }

    /// Pause or resume stream `i` (a paused stream sends nothing; on resume
    /// its schedule restarts at `now_ns`).
    pub fn set_paused(&mut self, i: usize, paused: bool, now_ns: u64) -> Result<(), GenError> {
        let s = self
            .streams
            .get_mut(i)
            .ok_or_else(|| GenError(format!("no stream number {i}")))?;
        if s.paused && !paused {
            s.pacer.rebase(now_ns);
        }
        s.paused = paused;
        Ok(())
    }

    /// Names of the streams, in profile order.
    pub fn stream_names(&self) -> Vec<&str> {
        self.streams.iter().map(|s| s.name.as_str()).collect()
    }
}

impl Stream {
    /// Build the next packet into `buf`. Per packet: one memcpy, one write
    /// per field, two folds. No allocation.
    #[inline(always)]
    fn build(&mut self, buf: &mut [u8], si: u16) -> (usize, SlotMeta) {
        let ti = match &mut self.size_rng {
            Some(r) => r.below(self.tmpls.len() as u64) as usize,
            None => {
                let t = self.size_cycle[self.size_pos] as usize;
                self.size_pos += 1;
                if self.size_pos == self.size_cycle.len() {
                    self.size_pos = 0;
                }
                t
            }
        };
        let t = &self.tmpls[ti];
        let len = t.bytes.len();
        let f = &mut buf[..len];
        f.copy_from_slice(&t.bytes);
        let (mut ip_acc, mut l4_acc) = (0u64, 0u64);
        for fe in &mut self.fields {
            let d = fe.apply(f);
            if fe.slot.in_ip_csum {
                ip_acc = add(ip_acc, d);
            }
            if fe.slot.in_l4_csum {
                l4_acc = add(l4_acc, d);
            }
        }
        let seq = self.seq;
        self.seq += 1;
        let mut meta = SlotMeta {
            stream: si,
            ts_off: 0,
            l4_csum: self.l4_csum as u32,
            udp: self.kind == L4Kind::Udp,
        };
        if self.sig_every > 0 && seq.is_multiple_of(self.sig_every as u64) {
            let p = &mut f[self.payload_off..];
            // template holds 24 zero bytes here: the checksum delta is the new bytes' sum
            let _ = signature::write(
                p,
                &Signature {
                    stream: self.id,
                    flags: FLAG_TS,
                    seq,
                    tx_ns: 0,
                },
            );
            l4_acc = add(l4_acc, sum(&p[..signature::LEN], 0));
            meta.ts_off = (self.payload_off + signature::TS_OFFSET) as u32;
            self.stats.sampled_pkts += 1;
        }
        if let Some(c) = t.ip_csum {
            if ip_acc != 0 {
                let hc = u16::from_be_bytes([f[c], f[c + 1]]);
                let nc = !fold(add((!hc) as u64, ip_acc));
                f[c..c + 2].copy_from_slice(&nc.to_be_bytes());
            }
        }
        if l4_acc != 0 {
            let c = self.l4_csum;
            let hc = u16::from_be_bytes([f[c], f[c + 1]]);
            let mut nc = !fold(add((!hc) as u64, l4_acc));
            if meta.udp {
                nc = linerate_wire::udp::wire_checksum(nc);
            }
            f[c..c + 2].copy_from_slice(&nc.to_be_bytes());
        }
        self.stats.generated_pkts += 1;
        self.stats.generated_bytes += len as u64;
        (len, meta)
    }
}

fn compile_stream(
    s: &StreamSpec,
    count: Option<u64>,
    duration_ns: Option<u64>,
) -> Result<Stream, GenError> {
    let name = s.name.as_str();
    let t = &s.template;
    let eth_src = parse_mac(&t.eth_src)
        .ok_or_else(|| err(name, format!("eth_src: bad MAC '{}'", t.eth_src)))?;
    let eth_dst = parse_mac(&t.eth_dst)
        .ok_or_else(|| err(name, format!("eth_dst: bad MAC '{}'", t.eth_dst)))?;
    if t.vlans.len() > 2 {
        return Err(err(name, "vlans: at most 2 tags"));
    }
    let (ip, ipspec, v6) = match &t.l3 {
        L3Spec::Ipv4(i) => {
            let a = |x: &str, w: &str| {
                x.parse::<Ipv4Addr>()
                    .map_err(|_| err(name, format!("l3 {w}: bad IPv4 address '{x}'")))
            };
            (
                IpPair::V4 {
                    src: a(&i.src, "src")?.octets(),
                    dst: a(&i.dst, "dst")?.octets(),
                },
                i,
                false,
            )
        }
        L3Spec::Ipv6(i) => {
            let a = |x: &str, w: &str| {
                x.parse::<Ipv6Addr>()
                    .map_err(|_| err(name, format!("l3 {w}: bad IPv6 address '{x}'")))
            };
            (
                IpPair::V6 {
                    src: a(&i.src, "src")?.octets(),
                    dst: a(&i.dst, "dst")?.octets(),
                },
                i,
                true,
            )
        }
    };
    if ipspec.dscp > 63 {
        return Err(err(name, "l3 dscp: must be 0..=63"));
    }
    let pattern = parse_hex(&t.payload)
        .ok_or_else(|| err(name, format!("payload: bad hex pattern '{}'", t.payload)))?;
    let sig = s.signature.enabled;
    if sig && s.signature.sample_every == 0 {
        return Err(err(name, "signature: sample_every must be at least 1"));
    }
    let (sizes, cycle, useed) = size_plan(name, &s.size)?;
    let l2 = 14 + 4 * t.vlans.len();
    let l3_len = if v6 { 40 } else { 20 };
    let l4 = l2 + l3_len;
    let (kind, l4_hdr, csum_at) = match (&t.l4, v6) {
        (L4Spec::Udp { .. }, _) => (L4Kind::Udp, 8, 6),
        (L4Spec::Tcp { .. }, _) => (L4Kind::Tcp, 20, 16),
        (L4Spec::Icmp { .. }, false) => (L4Kind::Icmp4, 8, 2),
        (L4Spec::Icmp { .. }, true) => (L4Kind::Icmp6, 8, 2),
    };
    let hdrs = l4 + l4_hdr;
    let need = hdrs + if sig { signature::LEN } else { 0 };
    let mut tmpls = Vec::with_capacity(sizes.len());
    let mut payload = vec![0u8; MAX_FRAME];
    for &size in &sizes {
        let size = size as usize;
        if !(MIN_FRAME..=MAX_FRAME).contains(&size) {
            return Err(err(
                name,
                format!("size {size}: frames are {MIN_FRAME}..={MAX_FRAME} bytes without FCS"),
            ));
        }
        if size < need {
            return Err(err(
                name,
                format!(
                    "size {size}: too small for the headers{} ({need} bytes)",
                    if sig { " and the signature" } else { "" }
                ),
            ));
        }
        let plen = size - hdrs;
        let pl = &mut payload[..plen];
        for (i, b) in pl.iter_mut().enumerate() {
            *b = if pattern.is_empty() {
                0
            } else {
                pattern[i % pattern.len()]
            };
        }
        if sig {
            let _ = signature::write_blank(pl);
        }
        let mut fp = FrameParams::new(ip);
        fp.eth_src = eth_src;
        fp.eth_dst = eth_dst;
        fp.vlans = &t.vlans;
        fp.ttl = ipspec.ttl;
        fp.tos = ipspec.dscp << 2;
        fp.payload = pl;
        let mut bytes = vec![0u8; size];
        let r = match &t.l4 {
            L4Spec::Udp { sport, dport } => build::build_udp(&mut bytes, &fp, *sport, *dport),
            L4Spec::Tcp {
                sport,
                dport,
                flags,
            } => build::build_tcp(
                &mut bytes,
                &fp,
                &TcpRepr {
                    src_port: *sport,
                    dst_port: *dport,
                    seq: 1,
                    ack: 0,
                    flags: *flags & 0x1ff,
                    window: 65535,
                    urgent: 0,
                },
            ),
            L4Spec::Icmp { ty, code, id } => {
                build::build_icmp_echo(&mut bytes, &fp, true, *id, 0).inspect(|&n| {
                    // arbitrary type/code: patch and recompute the checksum once
                    let seg = &mut bytes[l4..n];
                    if let Some(ty) = ty {
                        seg[0] = *ty;
                    }
                    seg[1] = *code;
                    seg[2] = 0;
                    seg[3] = 0;
                    let c = match ip {
                        IpPair::V4 { .. } => checksum::checksum(seg),
                        IpPair::V6 { src, dst } => checksum::l4_checksum_v6(&src, &dst, 58, seg),
                    };
                    seg[2..4].copy_from_slice(&c.to_be_bytes());
                })
            }
        };
        let n = r.map_err(|e| err(name, format!("size {size}: cannot build template: {e}")))?;
        debug_assert_eq!(n, size);
        tmpls.push(Tmpl {
            bytes,
            ip_csum: (!v6).then_some(l2 + 10),
        });
    }
    // Fields: offsets are the same in every template (same headers).
    let t0 = &tmpls[0].bytes;
    let pseudo = matches!(kind, L4Kind::Udp | L4Kind::Tcp | L4Kind::Icmp6);
    let mut fields = Vec::with_capacity(s.fields.len());
    for (fi, fs) in s.fields.iter().enumerate() {
        let fname = fs.field.as_str();
        let ferr = |m: &str| err(name, format!("field '{fname}': {m}"));
        // (off, len, shift, width, in_ip, in_l4)
        let (off, len, shift, width, in_ip, in_l4) = match fs.field {
            FieldName::EthDst => (0, 6, 0, 48, false, false),
            FieldName::EthSrc => (6, 6, 0, 48, false, false),
            FieldName::Vlan => {
                if t.vlans.is_empty() {
                    return Err(ferr("the template has no VLAN tag"));
                }
                (14, 2, 0, 12, false, false)
            }
            FieldName::IpSrc | FieldName::IpDst => {
                let src = fs.field == FieldName::IpSrc;
                if v6 {
                    (l2 + if src { 8 } else { 24 }, 16, 0, 128, false, pseudo)
                } else {
                    (l2 + if src { 12 } else { 16 }, 4, 0, 32, true, pseudo)
                }
            }
            FieldName::Sport | FieldName::Dport => {
                if !matches!(kind, L4Kind::Udp | L4Kind::Tcp) {
                    return Err(ferr("needs a UDP or TCP template"));
                }
                (
                    l4 + if fs.field == FieldName::Sport { 0 } else { 2 },
                    2,
                    0,
                    16,
                    false,
                    true,
                )
            }
            FieldName::Ttl => {
                if v6 {
                    (l2 + 6, 2, 0, 8, false, false)
                } else {
                    (l2 + 8, 2, 8, 8, true, false)
                }
            }
            FieldName::Dscp => {
                if v6 {
                    (l2, 2, 6, 6, false, false)
                } else {
                    (l2, 2, 2, 6, true, false)
                }
            }
            FieldName::TcpFlags => {
                if kind != L4Kind::Tcp {
                    return Err(ferr("needs a TCP template"));
                }
                (l4 + 12, 2, 0, 9, false, true)
            }
        };
        let (slot, tmpl) = field::slot_for(t0, off, len, shift, width, in_ip, in_l4);
        let seed = ((s.id as u64) << 16) + fi as u64 + 1;
        let seq = Seq::compile(&fs.op, width, tmpl, seed, &|v| parse_val(v, fs.field, v6))
            .map_err(|m| ferr(&m))?;
        fields.push(FieldEngine { slot, seq });
    }
    let pacer =
        Pacer::new(&s.rate, s.rate.count.or(count), duration_ns).map_err(|m| err(name, m))?;
    Ok(Stream {
        name: s.name.clone(),
        id: s.id,
        tmpls,
        size_cycle: cycle,
        size_pos: 0,
        size_rng: useed.map(SplitMix64),
        fields,
        l4_csum: l4 + csum_at,
        kind,
        payload_off: hdrs,
        sig_every: if sig { s.signature.sample_every } else { 0 },
        seq: 0,
        pacer,
        paused: false,
        stats: StreamStats {
            name: s.name.clone(),
            id: s.id,
            ..Default::default()
        },
    })
}

#[cfg(test)]
mod tests;
