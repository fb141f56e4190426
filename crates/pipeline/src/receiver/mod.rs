//! The receiver side of linerate's traffic generator (`linerate count`):
//! per-stream packet and byte counts, rates, loss, reordering, duplicates
//! and latency, read from the measurement signature
//! ([`linerate_wire::signature`]) at the start of each packet's L4 payload.
//!
//! Feed batches to [`Receiver::on_batch`]; call [`Receiver::snapshot`] about
//! once a second for live lines and [`Receiver::final_report`] at the end.
//! Definitions of loss, reordering and duplicates: [`seq`]. Clocks: [`clock`].
//!
//! Per packet: one header parse, one signature read, one table lookup (an
//! array indexed by stream id), one bitmap update and one histogram record.
//! Nothing allocates, locks or makes a syscall per packet; a stream's state
//! (8 KiB bitmap + ~220 KiB latency histogram) is allocated when its first
//! packet arrives (or ahead of time with [`Receiver::preallocate`]), and at
//! most `max_streams` streams are tracked.

pub mod clock;
pub mod report;
pub mod run;
pub mod seq;
pub mod xdp;

#[cfg(test)]
mod tests;

use hdrhistogram::Histogram;
use linerate_io::Pkt;
use linerate_wire::frame::{parse_frame, L4};
use linerate_wire::signature::{self, FLAG_TS};

pub use clock::{monotonic_ns, Clock};
pub use report::{
    LatencySummary, Report, Snapshot, StreamLive, StreamReport, Totals, XdpCountTick,
    METRIC_STREAMS,
};
pub use run::{receive_loop, Until};
pub use seq::{SeqClass, SeqWindow, WINDOW};

/// Default cap on tracked streams.
pub const DEFAULT_MAX_STREAMS: usize = 1024;
/// Largest latency the histograms hold (60 s); larger ones are clamped and counted.
pub const LATENCY_MAX_NS: u64 = 60_000_000_000;
/// Significant digits of the latency histograms.
pub const LATENCY_SIGFIG: u8 = 3;

/// Everything known about one stream.
pub struct StreamStats {
    pub id: u16,
    pub packets: u64,
    /// Frame bytes as received (Ethernet header to end of frame, no FCS).
    pub bytes: u64,
    /// RX time (`CLOCK_MONOTONIC` ns) of the first and last packet.
    pub first_rx_ns: u64,
    pub last_rx_ns: u64,
    pub seq: SeqWindow,
    /// Latencies in ns (1 ns .. 60 s, 3 significant digits).
    pub latency: Histogram<u64>,
    /// Exact min / max / sum of recorded latencies (after clamping).
    pub lat_min_ns: u64,
    pub lat_max_ns: u64,
    pub lat_sum_ns: u128,
    /// Packets whose RX time was before their TX time (clock skew);
    /// recorded as 0 ns.
    pub lat_negative: u64,
    /// Latencies above [`LATENCY_MAX_NS`], recorded as that.
    pub lat_over_range: u64,
    snap_packets: u64,
    snap_bytes: u64,
    snap_ns: u64,
}

impl StreamStats {
    fn new(id: u16, rx_ns: u64) -> StreamStats {
        StreamStats {
            id,
            packets: 0,
            bytes: 0,
            first_rx_ns: rx_ns,
            last_rx_ns: rx_ns,
            seq: SeqWindow::new(),
            latency: Histogram::new_with_bounds(1, LATENCY_MAX_NS, LATENCY_SIGFIG)
                .expect("constant histogram bounds are valid"),
            lat_min_ns: u64::MAX,
            lat_max_ns: 0,
            lat_sum_ns: 0,
            lat_negative: 0,
            lat_over_range: 0,
            snap_packets: 0,
            snap_bytes: 0,
            snap_ns: rx_ns,
        }
    }

    #[inline(always)]
    fn record_latency(&mut self, rx_ns: u64, tx_ns: u64) {
        let mut lat = if rx_ns >= tx_ns {
            rx_ns - tx_ns
        } else {
            self.lat_negative += 1;
            0
        };
        if lat > LATENCY_MAX_NS {
            self.lat_over_range += 1;
            lat = LATENCY_MAX_NS;
        }
        // Cannot fail: 0 ..= LATENCY_MAX_NS is within the bounds.
        self.latency.saturating_record(lat);
        self.lat_min_ns = self.lat_min_ns.min(lat);
        self.lat_max_ns = self.lat_max_ns.max(lat);
        self.lat_sum_ns += lat as u128;
    }
}

/// Receiver-wide counters.
#[derive(Clone, Debug, Default)]
pub struct Counters {
    /// Every frame given to the receiver.
    pub packets: u64,
    pub bytes: u64,
    /// Frames with a signature of a tracked stream.
    pub signed: u64,
    /// Well-formed frames with no signature (or no L4 payload).
    pub unsigned: u64,
    /// Signed frames of a stream beyond `max_streams` (not tracked).
    pub too_many_streams: u64,
    /// Frames `parse_frame` rejected, by reason (`linerate_wire::Error::as_str`).
    pub malformed: Vec<(&'static str, u64)>,
    /// Packets with a latency signature but no per-packet RX timestamp on a
    /// port that should give one (they got the batch time instead).
    pub no_rx_timestamp: u64,
}

impl Counters {
    pub fn malformed_total(&self) -> u64 {
        self.malformed.iter().map(|m| m.1).sum()
    }
}

/// Per-stream measurement state fed with received batches.
pub struct Receiver {
    clock: Clock,
    /// Stream id -> index into `streams` + 1 (0: not seen).
    index: Box<[u16]>,
    streams: Vec<StreamStats>,
    max_streams: usize,
    counters: Counters,
    /// States built ahead of time by [`Receiver::preallocate`].
    spare: Vec<StreamStats>,
    snap_packets: u64,
    snap_ns: Option<u64>,
}

impl Receiver {
    /// A receiver converting RX times with `clock`, tracking at most
    /// [`DEFAULT_MAX_STREAMS`] streams.
    pub fn new(clock: Clock) -> Receiver {
        Receiver::with_max_streams(clock, DEFAULT_MAX_STREAMS)
    }

    /// As [`Receiver::new`] with a stream cap (clamped to 1..=65535).
    pub fn with_max_streams(clock: Clock, max_streams: usize) -> Receiver {
        let max_streams = max_streams.clamp(1, u16::MAX as usize);
        Receiver {
            clock,
            index: vec![0u16; 1 << 16].into_boxed_slice(),
            // Reserve so that adding a stream never reallocates the table.
            streams: Vec::with_capacity(max_streams),
            max_streams,
            counters: Counters {
                malformed: Vec::with_capacity(16),
                ..Counters::default()
            },
            spare: Vec::new(),
            snap_packets: 0,
            snap_ns: None,
        }
    }

    /// Build the state of `n` streams now (at most the stream cap), so that
    /// the first packet of a new stream does not pay for it (~0.2-0.5 ms a
    /// stream on this VM, mostly page faults of the 220 KiB histogram).
    /// Call it with the number of streams the generator sends.
    pub fn preallocate(&mut self, n: usize) {
        let n = n.min(self.max_streams - self.streams.len());
        while self.spare.len() < n {
            self.spare.push(StreamStats::new(0, 0));
        }
    }

    pub fn clock(&self) -> &Clock {
        &self.clock
    }
    /// The clock, e.g. to [`Clock::refresh`] it once a second.
    pub fn clock_mut(&mut self) -> &mut Clock {
        &mut self.clock
    }
    pub fn counters(&self) -> &Counters {
        &self.counters
    }
    /// Streams in order of first arrival.
    pub fn streams(&self) -> &[StreamStats] {
        &self.streams
    }
    pub fn stream(&self, id: u16) -> Option<&StreamStats> {
        match self.index[id as usize] {
            0 => None,
            i => Some(&self.streams[i as usize - 1]),
        }
    }

    /// Account a batch. `rx_now_ns` is `CLOCK_MONOTONIC` read once for this
    /// batch (e.g. [`monotonic_ns`]); it is the RX time of packets without a
    /// per-packet timestamp.
    #[inline]
    pub fn on_batch(&mut self, pkts: &[Pkt], rx_now_ns: u64) {
        for p in pkts {
            self.on_frame(p.bytes(), p.ts_ns(), rx_now_ns);
        }
    }

    /// Account one frame with port timestamp `ts_ns` (0: none).
    #[inline]
    pub fn on_frame(&mut self, f: &[u8], ts_ns: u64, rx_now_ns: u64) {
        self.counters.packets += 1;
        self.counters.bytes += f.len() as u64;
        let l = match parse_frame(f) {
            Ok(l) => l,
            Err(e) => {
                self.count_malformed(e.as_str());
                return;
            }
        };
        // Later fragments have no L4 header, so nothing there is a signature.
        let sig = match l.l4 {
            L4::None => None,
            _ => signature::read(l.payload(f)),
        };
        let Some(sig) = sig else {
            self.counters.unsigned += 1;
            return;
        };
        let (rx_ns, per_pkt) = self.clock.rx_mono(ts_ns, rx_now_ns);
        let i = match self.index[sig.stream as usize] {
            0 => match self.add_stream(sig.stream, rx_ns) {
                Some(i) => i,
                None => {
                    self.counters.too_many_streams += 1;
                    return;
                }
            },
            i => i as usize - 1,
        };
        self.counters.signed += 1;
        let s = &mut self.streams[i];
        s.packets += 1;
        s.bytes += f.len() as u64;
        s.first_rx_ns = s.first_rx_ns.min(rx_ns);
        s.last_rx_ns = s.last_rx_ns.max(rx_ns);
        s.seq.on_seq(sig.seq);
        if sig.flags & FLAG_TS != 0 {
            if !per_pkt && self.clock != Clock::Monotonic {
                self.counters.no_rx_timestamp += 1;
            }
            s.record_latency(rx_ns, sig.tx_ns);
        }
    }

    #[cold]
    fn count_malformed(&mut self, reason: &'static str) {
        match self.counters.malformed.iter_mut().find(|m| m.0 == reason) {
            Some(m) => m.1 += 1,
            None => self.counters.malformed.push((reason, 1)),
        }
    }

    /// Allocation here is once per stream, on its first packet.
    #[cold]
    fn add_stream(&mut self, id: u16, rx_ns: u64) -> Option<usize> {
        if self.streams.len() >= self.max_streams {
            return None;
        }
        let st = match self.spare.pop() {
            Some(mut st) => {
                st.id = id;
                (st.first_rx_ns, st.last_rx_ns, st.snap_ns) = (rx_ns, rx_ns, rx_ns);
                st
            }
            None => StreamStats::new(id, rx_ns),
        };
        self.streams.push(st);
        let i = self.streams.len() - 1;
        self.index[id as usize] = (i + 1) as u16;
        Some(i)
    }
}
