//! Live snapshots, the final report, and their outputs: a text table,
//! JSON, and per-stream latency histogram / CDF CSV files.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use linerate_io::file::write_whole;
use serde::Serialize;

use super::{Receiver, StreamStats, WINDOW};

/// Latency statistics of one stream (ns). Percentiles are HDR-histogram
/// values (within 0.1 %); min, max and mean are exact.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct LatencySummary {
    pub samples: u64,
    pub min_ns: u64,
    pub mean_ns: f64,
    pub max_ns: u64,
    pub stddev_ns: f64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub p99_9_ns: u64,
    pub p99_99_ns: u64,
    /// RX before TX (clock skew), recorded as 0.
    pub negative: u64,
    /// Above 60 s, recorded as 60 s.
    pub over_range: u64,
}

/// Final figures of one stream.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct StreamReport {
    pub stream: u16,
    pub packets: u64,
    pub bytes: u64,
    pub first_rx_ns: u64,
    pub last_rx_ns: u64,
    /// First to last packet, seconds.
    pub duration_s: f64,
    /// Packets (bits of frame bytes) per second between first and last packet.
    pub pps: f64,
    pub bps: f64,
    pub max_seq: Option<u64>,
    /// `max_seq + 1`.
    pub expected: u64,
    /// Distinct sequence numbers received.
    pub unique: u64,
    /// `expected - unique`.
    pub lost: u64,
    /// `lost / expected`.
    pub loss_ratio: f64,
    pub reordered: u64,
    pub duplicates: u64,
    pub out_of_window: u64,
    pub latency: Option<LatencySummary>,
}

/// Receiver-wide totals.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Totals {
    pub packets: u64,
    pub bytes: u64,
    pub signed: u64,
    pub unsigned: u64,
    pub malformed: u64,
    pub malformed_by_reason: BTreeMap<String, u64>,
    pub too_many_streams: u64,
    pub no_rx_timestamp: u64,
    pub streams: usize,
}

/// The final report.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Report {
    /// [`super::Clock::name`].
    pub clock: String,
    /// [`super::Clock::describe`].
    pub clock_detail: String,
    /// Sequence window (see [`super::seq`]).
    pub seq_window: u64,
    pub totals: Totals,
    pub streams: Vec<StreamReport>,
}

/// One stream in a live snapshot.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct StreamLive {
    pub stream: u16,
    pub packets: u64,
    /// Since the previous snapshot.
    pub pps: f64,
    pub bps: f64,
    pub lost: u64,
    pub reordered: u64,
    pub duplicates: u64,
    /// Over the whole run so far.
    pub p50_ns: Option<u64>,
    pub p99_ns: Option<u64>,
}

/// A live snapshot (cost: a few µs per stream, see [`Receiver::snapshot`]).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Snapshot {
    pub now_ns: u64,
    /// Seconds since the previous snapshot (or the first packet).
    pub interval_s: f64,
    pub packets: u64,
    pub pps: f64,
    pub unsigned: u64,
    pub malformed: u64,
    pub too_many_streams: u64,
    pub streams: Vec<StreamLive>,
}

fn rate(n: u64, ns: u64) -> f64 {
    if ns == 0 {
        0.0
    } else {
        n as f64 * 1e9 / ns as f64
    }
}

fn latency_summary(s: &StreamStats) -> Option<LatencySummary> {
    let h = &s.latency;
    let n = h.len();
    if n == 0 {
        return None;
    }
    Some(LatencySummary {
        samples: n,
        min_ns: s.lat_min_ns,
        mean_ns: s.lat_sum_ns as f64 / n as f64,
        max_ns: s.lat_max_ns,
        stddev_ns: h.stdev(),
        p50_ns: h.value_at_quantile(0.5),
        p90_ns: h.value_at_quantile(0.9),
        p99_ns: h.value_at_quantile(0.99),
        p99_9_ns: h.value_at_quantile(0.999),
        p99_99_ns: h.value_at_quantile(0.9999),
        negative: s.lat_negative,
        over_range: s.lat_over_range,
    })
}

fn stream_report(s: &StreamStats) -> StreamReport {
    let dur = s.last_rx_ns - s.first_rx_ns;
    let expected = s.seq.expected();
    let lost = s.seq.lost();
    StreamReport {
        stream: s.id,
        packets: s.packets,
        bytes: s.bytes,
        first_rx_ns: s.first_rx_ns,
        last_rx_ns: s.last_rx_ns,
        duration_s: dur as f64 / 1e9,
        // n packets span n-1 inter-arrival gaps.
        pps: rate(s.packets.saturating_sub(1), dur),
        bps: if s.packets > 1 {
            rate(s.bytes * 8, dur) * (s.packets - 1) as f64 / s.packets as f64
        } else {
            0.0
        },
        max_seq: s.seq.max_seq(),
        expected,
        unique: s.seq.unique(),
        lost,
        loss_ratio: if expected == 0 {
            0.0
        } else {
            lost as f64 / expected as f64
        },
        reordered: s.seq.reordered(),
        duplicates: s.seq.duplicates(),
        out_of_window: s.seq.out_of_window(),
        latency: latency_summary(s),
    }
}

fn us(ns: u64) -> String {
    format!("{:.3}", ns as f64 / 1e3)
}

fn si(v: f64) -> String {
    if v >= 1e9 {
        format!("{:.3}G", v / 1e9)
    } else if v >= 1e6 {
        format!("{:.3}M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.3}k", v / 1e3)
    } else {
        format!("{v:.1}")
    }
}

impl Receiver {
    /// Live figures at `now_ns` (`CLOCK_MONOTONIC`). Rates are since the
    /// previous call. Cost per stream: two percentile scans of the
    /// histogram (at most ~28 K counters, vectorised; a few µs), so once a
    /// second is cheap even with hundreds of streams. Allocates (not the
    /// per-packet path).
    pub fn snapshot(&mut self, now_ns: u64) -> Snapshot {
        let first = self.streams.iter().map(|s| s.first_rx_ns).min();
        let since = self.snap_ns.or(first).unwrap_or(now_ns);
        let interval = now_ns.saturating_sub(since);
        let c = &self.counters;
        let snap = Snapshot {
            now_ns,
            interval_s: interval as f64 / 1e9,
            packets: c.packets,
            pps: rate(c.packets - self.snap_packets, interval),
            unsigned: c.unsigned,
            malformed: c.malformed_total(),
            too_many_streams: c.too_many_streams,
            streams: self
                .streams
                .iter_mut()
                .map(|s| {
                    let d = now_ns.saturating_sub(s.snap_ns);
                    let lat = !s.latency.is_empty();
                    let live = StreamLive {
                        stream: s.id,
                        packets: s.packets,
                        pps: rate(s.packets - s.snap_packets, d),
                        bps: rate((s.bytes - s.snap_bytes) * 8, d),
                        lost: s.seq.lost(),
                        reordered: s.seq.reordered(),
                        duplicates: s.seq.duplicates(),
                        p50_ns: lat.then(|| s.latency.value_at_quantile(0.5)),
                        p99_ns: lat.then(|| s.latency.value_at_quantile(0.99)),
                    };
                    s.snap_packets = s.packets;
                    s.snap_bytes = s.bytes;
                    s.snap_ns = now_ns;
                    live
                })
                .collect(),
        };
        self.snap_packets = self.counters.packets;
        self.snap_ns = Some(now_ns);
        snap
    }

    /// The final report (does not change the state; may be called any time).
    pub fn final_report(&self) -> Report {
        let c = &self.counters;
        Report {
            clock: self.clock.name().to_string(),
            clock_detail: self.clock.describe(),
            seq_window: WINDOW,
            totals: Totals {
                packets: c.packets,
                bytes: c.bytes,
                signed: c.signed,
                unsigned: c.unsigned,
                malformed: c.malformed_total(),
                malformed_by_reason: c
                    .malformed
                    .iter()
                    .map(|(r, n)| (r.to_string(), *n))
                    .collect(),
                too_many_streams: c.too_many_streams,
                no_rx_timestamp: c.no_rx_timestamp,
                streams: self.streams.len(),
            },
            streams: self.streams.iter().map(stream_report).collect(),
        }
    }

    /// Latency histogram of `stream` as CSV `value_ns,count`, one line per
    /// non-empty HDR bucket (`value_ns` is the bucket's highest equivalent
    /// value). `Ok(false)` when the stream has no latency samples.
    pub fn write_histogram_csv(&self, stream: u16, w: &mut dyn Write) -> io::Result<bool> {
        let Some(s) = self.stream(stream).filter(|s| !s.latency.is_empty()) else {
            return Ok(false);
        };
        writeln!(w, "value_ns,count")?;
        for v in s.latency.iter_recorded() {
            writeln!(
                w,
                "{},{}",
                v.value_iterated_to(),
                v.count_since_last_iteration()
            )?;
        }
        Ok(true)
    }

    /// Latency CDF of `stream` as CSV `value_ns,fraction`: the fraction of
    /// samples at or below `value_ns`, at every non-empty bucket.
    pub fn write_cdf_csv(&self, stream: u16, w: &mut dyn Write) -> io::Result<bool> {
        let Some(s) = self.stream(stream).filter(|s| !s.latency.is_empty()) else {
            return Ok(false);
        };
        let total = s.latency.len() as f64;
        let mut cum = 0u64;
        writeln!(w, "value_ns,fraction")?;
        for v in s.latency.iter_recorded() {
            cum += v.count_since_last_iteration();
            writeln!(w, "{},{:.9}", v.value_iterated_to(), cum as f64 / total)?;
        }
        Ok(true)
    }

    /// Write `report.txt`, `report.json` and, per stream with latency
    /// samples, `latency-hist-stream-ID.csv` and `latency-cdf-stream-ID.csv`
    /// into `dir` (created if missing). Returns the files written.
    pub fn write_dir(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        let err =
            |p: &Path, e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", p.display()));
        std::fs::create_dir_all(dir).map_err(|e| err(dir, e))?;
        let report = self.final_report();
        let mut out = Vec::new();
        // Each file is written whole or not at all (a full disk leaves the
        // old file, if any, and a one-line error).
        let whole = |p: &Path, b: &[u8]| write_whole(p, b).map_err(io::Error::other);
        let txt = dir.join("report.txt");
        whole(&txt, report.to_text().as_bytes())?;
        out.push(txt);
        let json = dir.join("report.json");
        let body = serde_json::to_string_pretty(&report).map_err(io::Error::other)?;
        whole(&json, (body + "\n").as_bytes())?;
        out.push(json);
        for s in &self.streams {
            for (kind, hist) in [("hist", true), ("cdf", false)] {
                let p = dir.join(format!("latency-{kind}-stream-{}.csv", s.id));
                let mut buf = Vec::new();
                let some = if hist {
                    self.write_histogram_csv(s.id, &mut buf)?
                } else {
                    self.write_cdf_csv(s.id, &mut buf)?
                };
                if some {
                    whole(&p, &buf)?;
                    out.push(p);
                }
            }
        }
        Ok(out)
    }
}

impl Report {
    /// As a JSON value.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }

    /// Human text: totals, then one table row per stream (latencies in µs).
    pub fn to_text(&self) -> String {
        let t = &self.totals;
        let mut s = String::new();
        let _ = writeln!(s, "clock: {}", self.clock_detail);
        let _ = write!(
            s,
            "total: {} packets, {} bytes; signed {}, unsigned {}, malformed {}",
            t.packets, t.bytes, t.signed, t.unsigned, t.malformed
        );
        if !t.malformed_by_reason.is_empty() {
            let r: Vec<String> = t
                .malformed_by_reason
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            let _ = write!(s, " ({})", r.join(", "));
        }
        let _ = writeln!(
            s,
            ", too_many_streams {}, no_rx_timestamp {}",
            t.too_many_streams, t.no_rx_timestamp
        );
        let _ = writeln!(
            s,
            "{:>6} {:>12} {:>10} {:>10} {:>9} {:>8} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
            "stream", "packets", "pps", "bit/s", "lost", "loss%", "reordered", "dup",
            "min_us", "mean_us", "p50_us", "p90_us", "p99_us", "p99.9_us", "p99.99_us", "max_us", "stddev_us"
        );
        for r in &self.streams {
            let _ = write!(
                s,
                "{:>6} {:>12} {:>10} {:>10} {:>9} {:>8.4} {:>10} {:>10}",
                r.stream,
                r.packets,
                si(r.pps),
                si(r.bps),
                r.lost,
                r.loss_ratio * 100.0,
                r.reordered,
                r.duplicates
            );
            match &r.latency {
                Some(l) => {
                    let _ = writeln!(
                        s,
                        " {:>10} {:>10.3} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10.3}",
                        us(l.min_ns),
                        l.mean_ns / 1e3,
                        us(l.p50_ns),
                        us(l.p90_ns),
                        us(l.p99_ns),
                        us(l.p99_9_ns),
                        us(l.p99_99_ns),
                        us(l.max_ns),
                        l.stddev_ns / 1e3
                    );
                }
                None => {
                    let _ = writeln!(s, " {:>10}", "-");
                }
            }
        }
        s
    }
}

impl Snapshot {
    /// One line per stream, prefixed by a totals line.
    pub fn to_text(&self) -> String {
        let mut s = format!(
            "total {} pkts {} pps, unsigned {}, malformed {}, too_many_streams {}\n",
            self.packets,
            si(self.pps),
            self.unsigned,
            self.malformed,
            self.too_many_streams
        );
        for l in &self.streams {
            let lat = |v: Option<u64>| v.map_or_else(|| "-".to_string(), |n| us(n) + "us");
            let _ = writeln!(
                s,
                "stream {:>5}: {:>12} pkts {:>9} pps {:>9} bit/s lost {} reordered {} dup {} p50 {} p99 {}",
                l.stream,
                l.packets,
                si(l.pps),
                si(l.bps),
                l.lost,
                l.reordered,
                l.duplicates,
                lat(l.p50_ns),
                lat(l.p99_ns)
            );
        }
        s
    }
}

/// Streams given series of their own in the metrics (the lowest ids first
/// seen): a peer sending 65,535 stream ids must not make every scrape
/// hundreds of megabytes. The totals count every stream.
pub const METRIC_STREAMS: usize = 64;

/// Latency buckets' upper bounds, ns (1 µs to 10 s, 1-2-5 steps).
const LATENCY_BUCKETS_NS: [u64; 22] = [
    1_000,
    2_000,
    5_000,
    10_000,
    20_000,
    50_000,
    100_000,
    200_000,
    500_000,
    1_000_000,
    2_000_000,
    5_000_000,
    10_000_000,
    20_000_000,
    50_000_000,
    100_000_000,
    200_000_000,
    500_000_000,
    1_000_000_000,
    2_000_000_000,
    5_000_000_000,
    10_000_000_000,
];

impl crate::metrics::Publish for Receiver {
    fn metrics(&self, m: &mut crate::metrics::Exposition) {
        let c = &self.counters;
        m.counter(
            "linerate_receiver_packets_total",
            "Frames the receiver counted.",
            &[],
            c.packets,
        );
        m.counter(
            "linerate_receiver_bytes_total",
            "Bytes of the frames the receiver counted.",
            &[],
            c.bytes,
        );
        for (kind, v) in [("signed", c.signed), ("unsigned", c.unsigned)] {
            m.counter(
                "linerate_receiver_frames_total",
                "Frames with a linerate signature (signed) and without.",
                &[("kind", kind)],
                v,
            );
        }
        for (r, n) in &c.malformed {
            m.counter(
                "linerate_receiver_malformed_total",
                "Frames whose signature was malformed, by reason.",
                &[("reason", r)],
                *n,
            );
        }
        m.counter(
            "linerate_receiver_too_many_streams_total",
            "Signed frames of streams beyond the receiver's stream cap.",
            &[],
            c.too_many_streams,
        );
        m.counter(
            "linerate_receiver_no_rx_timestamp_total",
            "Frames without an RX timestamp (no latency sample).",
            &[],
            c.no_rx_timestamp,
        );
        m.gauge(
            "linerate_receiver_streams",
            "Streams seen.",
            &[],
            self.streams.len() as f64,
        );
        // Runs on the receiving thread once a second (with --metrics only):
        // the sequence counters as they are, and one pass over each
        // histogram's recorded buckets, no quantiles.
        for s in self.streams.iter().take(METRIC_STREAMS) {
            let id = s.id.to_string();
            let l = [("stream", id.as_str())];
            for (name, help, v) in [
                (
                    "linerate_receiver_stream_packets_total",
                    "Frames of a stream.",
                    s.packets,
                ),
                (
                    "linerate_receiver_stream_bytes_total",
                    "Bytes of a stream's frames.",
                    s.bytes,
                ),
                (
                    "linerate_receiver_stream_lost_total",
                    "Sequence numbers of a stream not (yet) received.",
                    s.seq.lost(),
                ),
                (
                    "linerate_receiver_stream_reordered_total",
                    "Frames of a stream that came after a later one.",
                    s.seq.reordered(),
                ),
                (
                    "linerate_receiver_stream_duplicates_total",
                    "Frames of a stream received twice.",
                    s.seq.duplicates(),
                ),
                (
                    "linerate_receiver_stream_out_of_window_total",
                    "Frames too far behind the sequence window.",
                    s.seq.out_of_window(),
                ),
            ] {
                m.counter(name, help, &l, v);
            }
            if !s.latency.is_empty() {
                let mut counts = [0u64; LATENCY_BUCKETS_NS.len()];
                for v in s.latency.iter_recorded() {
                    let i = LATENCY_BUCKETS_NS.partition_point(|&b| b < v.value_iterated_to());
                    if let Some(c) = counts.get_mut(i) {
                        *c += v.count_since_last_iteration();
                    }
                }
                let mut below = 0;
                let buckets: Vec<(f64, u64)> = LATENCY_BUCKETS_NS
                    .iter()
                    .zip(counts)
                    .map(|(&b, c)| {
                        below += c;
                        (b as f64 / 1e9, below)
                    })
                    .collect();
                m.histogram(
                    "linerate_receiver_latency_seconds",
                    "One-way latency of a stream's timestamped frames.",
                    &l,
                    &buckets,
                    s.lat_sum_ns as f64 / 1e9,
                    s.latency.len(),
                );
            }
        }
    }
}

/// The in-kernel counter's totals (`count --xdp`, read from its per-CPU
/// map once a second), for the metrics view.
pub struct XdpCountTick<'a> {
    pub port: &'a str,
    pub stats: &'a linerate_io::xdp::count::CountStats,
}

impl crate::metrics::Publish for XdpCountTick<'_> {
    fn metrics(&self, m: &mut crate::metrics::Exposition) {
        m.port(self.port, "rx", self.stats.packets, Some(self.stats.bytes));
        m.counter(
            "linerate_receiver_packets_total",
            "Frames the receiver counted.",
            &[],
            self.stats.packets,
        );
        m.counter(
            "linerate_receiver_bytes_total",
            "Bytes of the frames the receiver counted.",
            &[],
            self.stats.bytes,
        );
    }
}
