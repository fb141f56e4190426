//! The RFC 2544 procedures (section 26): throughput, latency, frame loss
//! rate and back-to-back frames, over any [`Trials`] (the real test bed in
//! [`super::trial`], a simulated DuT in the tests).
//!
//! Method (after FD.io CSIT and RFC 2544):
//! - every trial sends an exact number of frames at a fixed rate (the
//!   in-kernel generator paces them one by one), then stops, lets the
//!   DuT's queues drain, and only then reads the counters: loss is
//!   frames sent minus frames counted at the sink, not a rate difference;
//! - **throughput** (26.1): a probe at the generator's top speed gives the
//!   highest offered rate G and the DuT's forwarding rate at overload F;
//!   the search starts just under F (the best guess of where loss starts),
//!   then bisects between the highest rate that passed and the lowest that
//!   failed until they are within `resolution` of each other; a trial
//!   passes when its loss ratio is at most `loss_tolerance` (0: RFC 2544's
//!   zero loss). After a failed trial with nothing passed yet, the next
//!   rate is the rate that trial forwarded (CSIT's MLRsearch idea): the
//!   search needs a handful of trials, not log2(G / resolution). Unless
//!   `strict`, a trial that lost a little (under [`SMALL_LOSS`] of its
//!   frames) is run once more and the rate passes if the repeat passes:
//!   MLRsearch's goal exceed ratio of 50 % (draft-ietf-bmwg-mlrsearch),
//!   which keeps a rare stall of the machine (a few ms in which a ring
//!   overflows) from ending a search far below the DuT's capacity. Further
//!   searches (repetitions) start from scratch: their own probe, no
//!   knowledge of the earlier results, so their spread is the method's;
//! - **latency** (26.2): a trial at the throughput found, every n-th frame
//!   timestamped in the generator and its one-way latency histogrammed at
//!   the sink;
//! - **frame loss rate** (26.3): trials at 100 %, 90 %, ... of G until two
//!   successive trials lose nothing;
//! - **back-to-back** (26.4): bursts at G of a binary-searched length, the
//!   longest burst forwarded without loss.
//!
//! Every trial is kept ([`TrialRecord`]), with the kernel's own interface
//! counters for the same trial ([`KernelCheck`]).
//!
//! A trial counts only when it is valid ([`TrialRecord::validate`]): the
//! frames received are the generator's own of this trial, each once
//! (verified at the sink; duplicates fail the trial, foreign and late
//! frames are not counted); a paced trial offered at least
//! (1 - [`OFFERED_TOLERANCE`]) of the requested rate, and its generator
//! never fell further behind its schedule than the DuT's rings can absorb
//! ([`LATE_BUDGET_FRAMES`] frames: the catch-up leaves as one burst;
//! latency trials do not catch up: past [`LATENCY_MAX_LAG`] the schedule
//! slips, and the gaps may take at most [`SLIP_TOLERANCE`] of the trial); the
//! kernel's counters of g0, d0, d1 and s0 agree with ours within
//! [`KERNEL_TOLERANCE_PCT`]; a trial that lost frames had none dropped on
//! the sink side, between the DuT and the sink's count (the bed's loss,
//! not the DuT's: [`KernelCheck::sink_side_dropped`]). An invalid trial
//! is kept, marked `repeated`, and run again, up to [`INVALID_REPEATS`]
//! times; one still invalid then counts as a fail (a rate that cannot be
//! offered cleanly is not credited).
//!
//! A rate cap ([`Rfc2544Config::max_rate`], `--max-rate`) bounds every
//! trial: the probe and the back-to-back bursts run paced at the cap
//! instead of the generator's top speed, and no procedure asks for more;
//! a size whose probe at the cap passed is marked as a bound
//! ([`SizeResult::rate_capped`], with `generator_limited`: ">=").

use serde::Serialize;
use std::time::Duration;

/// What one trial should do.
#[derive(Clone, Debug, PartialEq)]
pub struct TrialSpec {
    /// Frame size on the wire, FCS included (64 .. 1518).
    pub frame_size: u32,
    /// Offered rate in frames/s; None: as fast as the generator can.
    pub rate_pps: Option<f64>,
    /// Frames to send (exact). None: send for `duration`.
    pub frames: Option<u64>,
    /// How long to send when `frames` is None.
    pub duration: Duration,
    /// Keep the latency histogram of this trial.
    pub latency: bool,
    /// Which procedure asked for it (kept in the record).
    pub procedure: Procedure,
}

/// The RFC 2544 section a trial belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Procedure {
    /// Generator top speed: the highest offered rate and the DuT's forwarding rate at overload.
    Probe,
    Throughput,
    Latency,
    FrameLoss,
    BackToBack,
    /// A short low-rate trial checking that the DuT forwards at all.
    Check,
}

/// The test bed's own counters for one trial, as an independent check of
/// the generator's and the sink's counts, and the frames the bed itself
/// lost on the sink side.
///
/// What can disagree on the namespace bed: a veth end's tx counters and
/// its peer's rx counters are one count (the kernel's `veth_get_stats64`
/// reads the peer's receive queue for its own tx), so d0 received is g0
/// transmitted by construction (`dut_in_diff_pct` is 0 there) and d1
/// transmitted is s0 received (`dut_out_diff_pct` equals
/// `forwarded_diff_pct`). The checks that can fail on veth: `offered_diff_pct`
/// (the kernel's count of what left g0 against the generator program's)
/// and `forwarded_diff_pct` (what s0's queue took in against what the sink
/// program counted). On other links (an external DuT's real ports) every
/// one of the four is a count of its own.
///
/// Loss is frames sent minus frames the sink counted; frames dropped
/// after the DuT sent them, before the sink's program could count them
/// (s0's ring full: the sink's receive work fell behind), are in it, but
/// they are the bed's loss, not the DuT's. The veth counts them, and
/// they are read here per trial (deltas): d1's tx_dropped (a frame d1
/// could not put into s0's ring: `veth_xmit` under the skb path, every
/// kernel and user-space DuT; an XDP_REDIRECT or XDP_TX into d1, counted
/// again as s0's rx_dropped) and tx_errors, and s0's rx_dropped (its
/// receive queue's own drops, and the stack's). The sink program drops
/// nothing of its own: every frame it runs on is counted (`packets` =
/// verified + foreign + stale + duplicates + unchecked). A trial with
/// such drops that lost frames is invalid ([`TrialRecord::validate`]):
/// repeated, never a loss of the DuT's.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct KernelCheck {
    /// An external DuT: its ports' counters are not read (`dut_in_rx` and
    /// `dut_out_tx` then repeat the generator's and the sink's counts).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub dut_unseen: bool,
    /// Frames the generator's interface transmitted (tx_packets) plus the
    /// ones the veth refused (XDP xmit errors): what the generator offered.
    pub gen_iface_tx: u64,
    pub gen_iface_xmit_errors: u64,
    /// Frames the DuT's ingress counted (rx_packets of d0).
    pub dut_in_rx: u64,
    /// Frames the DuT's egress transmitted (tx_packets of d1).
    pub dut_out_tx: u64,
    /// Frames the sink interface received (rx_packets of s0).
    pub sink_iface_rx: u64,
    /// Disagreements in % ((kernel - ours) / ours): g0's transmitted plus
    /// refused against the generator's count (offered); d0's received
    /// against g0's transmitted (into the DuT; on veth one count, always
    /// 0); d1's transmitted against every frame the sink saw (out of the
    /// DuT; on veth s0's received, so the same as the next); s0's
    /// received against every frame the sink saw (forwarded).
    pub offered_diff_pct: f64,
    pub dut_in_diff_pct: f64,
    pub dut_out_diff_pct: f64,
    pub forwarded_diff_pct: f64,
    /// All four within [`KERNEL_TOLERANCE_PCT`] (the sink side's drops
    /// are judged apart: [`KernelCheck::sink_side_dropped`]).
    pub agrees: bool,
    /// Frames lost between the DuT's egress and the sink's count (the
    /// bed's loss, see above): the sum of `dut_out_tx_dropped`,
    /// `dut_out_tx_errors` and `sink_iface_rx_dropped`, less
    /// `sink_side_counted_twice`. Set by [`KernelCheck::judge`].
    pub sink_side_dropped: u64,
    /// tx_dropped and tx_errors of the DuT's port facing the sink (d1;
    /// d0 in the reverse direction; 0 with an external DuT, whose ports
    /// are not read: its sink side is the sink's port alone).
    pub dut_out_tx_dropped: u64,
    pub dut_out_tx_errors: u64,
    /// rx_dropped of the sink's port (s0; g0 in the reverse direction).
    pub sink_iface_rx_dropped: u64,
    /// The XDP frames the DuT's port could not put into the sink port's
    /// ring, which the veth counts at both ends (its `ethtool -S`
    /// `tx_queue_N_xdp_xmit_errors` and `rx_queue_N_xdp_tx_errors`:
    /// [`crate::testbed::VethXdpErrors`]): subtracted once. 0 when ethtool
    /// cannot read them (the sum then counts them twice; still not 0).
    pub sink_side_counted_twice: u64,
    /// The names of the DuT's port facing the sink and of the sink's port
    /// for the reasons in words (empty: "the DuT's egress", "the sink's
    /// port").
    #[serde(skip)]
    pub sink_side_ports: (String, String),
}

/// What the sink found besides this trial's frames (verified frames).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Verification {
    /// Frames without the generator's tag (the network's own, a DuT's).
    pub foreign: u64,
    /// The generator's frames of an earlier trial that arrived after it was
    /// counted (late beyond its drain), up to the end of this one.
    pub stale: u64,
    /// This trial's frames seen a second time (or more): a failed trial.
    pub duplicates: u64,
    /// This trial's frames that arrived after a later one.
    pub reordered: u64,
    /// Frames past the duplicate bitmap (counted as received, not checked).
    pub unchecked: u64,
}

/// A failed throughput trial that lost less than this fraction of its
/// frames is repeated once unless `strict` (a stall of a few ms on this
/// 2-core machine loses 0.1-0.5 %; a rate 1 % above the capacity of a DuT
/// also lands here and fails twice).
pub const SMALL_LOSS: f64 = 0.01;

/// A small loss is repeated in a bisection only while the rate tried is
/// more than this many resolutions above the highest pass.
pub const SMALL_LOSS_SPAN: f64 = 4.0;

/// Largest disagreement between our counts and the kernel's that passes (%).
pub const KERNEL_TOLERANCE_PCT: f64 = 0.5;

/// A paced trial whose offered rate (frames over the time they took to
/// leave) is more than this fraction under the requested rate is invalid.
pub const OFFERED_TOLERANCE: f64 = 0.01;

/// A paced trial whose generator fell further behind its schedule than
/// this many frames' worth (lateness x rate: the catch-up leaves as one
/// burst at the generator's top speed) is invalid: the smallest receive
/// ring of the bed's DuTs (an AF_XDP ring of linerate's, 2048 frames)
/// may not absorb it, so a loss may be the generator's doing.
pub const LATE_BUDGET_FRAMES: f64 = 2048.0;

/// Latency trials: how late a frame may leave before the generator's
/// schedule slips instead of catching up. A catch-up burst queues in the
/// DuT: on the 2-CPU bed the generator falls ~1 or ~2 ms behind in about
/// half of the 0.2 s trials (its two lanes hand over), and each such
/// trial's p99 at the common load was 0.1-1.3 ms against ~10 us in the
/// others, for every DuT alike. 20 us: a burst of at most 20 us of frames.
pub const LATENCY_MAX_LAG: Duration = Duration::from_micros(20);

/// A trial whose generator's schedule slipped (the gaps it left, see
/// [`TrialRecord::gen_slipped_us`]) for more than this fraction of the
/// time its frames took to leave is invalid: too little of it was at the
/// asked load.
pub const SLIP_TOLERANCE: f64 = 0.1;

/// Most steps down of a final trial that failed at a search's result.
pub const FINAL_STEPS: usize = 5;

/// Most repeats of an invalid trial; one still invalid counts as a fail.
pub const INVALID_REPEATS: usize = 2;

impl KernelCheck {
    /// Fill in the differences and the verdict from our counts: `sent` by
    /// the generator, `seen` by the sink (every frame, verified or not).
    pub fn judge(&mut self, sent: u64, seen: u64) {
        let pct = |k: u64, ours: u64| {
            if ours == 0 {
                if k == 0 {
                    0.0
                } else {
                    100.0
                }
            } else {
                (k as f64 - ours as f64) / ours as f64 * 100.0
            }
        };
        self.offered_diff_pct = pct(self.gen_iface_tx + self.gen_iface_xmit_errors, sent);
        self.dut_in_diff_pct = pct(self.dut_in_rx, self.gen_iface_tx);
        self.dut_out_diff_pct = pct(self.dut_out_tx, seen);
        self.forwarded_diff_pct = pct(self.sink_iface_rx, seen);
        self.agrees = [
            self.offered_diff_pct,
            self.dut_in_diff_pct,
            self.dut_out_diff_pct,
            self.forwarded_diff_pct,
        ]
        .iter()
        .all(|d| d.abs() <= KERNEL_TOLERANCE_PCT);
        self.sink_side_dropped =
            (self.dut_out_tx_dropped + self.dut_out_tx_errors + self.sink_iface_rx_dropped)
                .saturating_sub(self.sink_side_counted_twice);
    }

    /// The sink side's drops by counter, in words (non-zero ones; both
    /// ports' drop counters always).
    fn sink_side_parts(&self) -> String {
        let name = |n: &str, or: &'static str| {
            if n.is_empty() {
                or.to_string()
            } else {
                n.to_string()
            }
        };
        let out = name(&self.sink_side_ports.0, "the DuT's egress");
        let sink = name(&self.sink_side_ports.1, "the sink's port");
        let mut w = Vec::new();
        if !self.dut_unseen {
            w.push(format!("{out} tx_dropped {}", self.dut_out_tx_dropped));
        }
        if self.dut_out_tx_errors > 0 {
            w.push(format!("{out} tx_errors {}", self.dut_out_tx_errors));
        }
        w.push(format!("{sink} rx_dropped {}", self.sink_iface_rx_dropped));
        if self.sink_side_counted_twice > 0 {
            w.push(format!(
                "{} counted at both ends, once here",
                self.sink_side_counted_twice
            ));
        }
        w.join(", ")
    }

    /// The disagreements beyond the tolerance, in words.
    fn disagreements(&self) -> String {
        [
            ("g0 sent", self.offered_diff_pct),
            ("d0 received", self.dut_in_diff_pct),
            ("d1 sent", self.dut_out_diff_pct),
            ("s0 received", self.forwarded_diff_pct),
        ]
        .iter()
        .filter(|(_, d)| d.abs() > KERNEL_TOLERANCE_PCT)
        .map(|(w, d)| format!("{w} {d:+.2} %"))
        .collect::<Vec<_>>()
        .join(", ")
    }
}

/// Latency of one trial.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Latency {
    /// Timestamped frames that arrived.
    pub samples: u64,
    /// Stamps rejected (in the future or over 60 s old): not in the figures.
    pub bad_stamps: u64,
    /// Exact (this trial's frames); the quantiles are bucket middles,
    /// within 1/32 of the value.
    pub min_ns: f64,
    pub mean_ns: f64,
    pub p50_ns: f64,
    pub p90_ns: f64,
    pub p99_ns: f64,
    pub p999_ns: f64,
    pub max_ns: f64,
    /// (bucket middle ns, count), the histogram.
    pub histogram: Vec<(f64, u64)>,
}

/// One trial, every counter kept.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct TrialRecord {
    pub procedure: Procedure,
    /// Bytes on the wire with FCS, or [`crate::frame_size::IMIX`] ("imix" in JSON).
    #[serde(with = "crate::frame_size::serde_size")]
    pub frame_size: u32,
    /// Rate asked of the generator (None: top speed).
    pub requested_pps: Option<f64>,
    /// Frames the generator sent (exact, its own count).
    pub sent: u64,
    /// Frames counted at the sink after the queues drained.
    pub received: u64,
    /// sent - received (0 when more arrived than were sent).
    pub lost: u64,
    pub loss_ratio: f64,
    /// Time the frames took to leave (the generator's own stamps, without
    /// the set-up and teardown of its calls).
    pub tx_seconds: f64,
    /// When the frames left: CLOCK_MONOTONIC ns of the generator's first
    /// and last stamped frame, the last at least `tx_seconds` after the
    /// first (see [`linerate_io::xdp::generator::GenStats::first_ns`]).
    /// Both ways, the span the directions share
    /// ([`TrialRecord::both_ways`]). None: not known (too few frames, or
    /// no generator's stamps). Not in the JSON (a clock reading).
    #[serde(skip)]
    pub send_span_ns: Option<(u64, u64)>,
    /// sent / tx_seconds: the rate actually offered.
    pub offered_pps: f64,
    /// received / tx_seconds.
    pub forwarded_pps: f64,
    /// Wait after the generator stopped until the sink count settled.
    pub drain_ms: f64,
    /// Frames per kernel batch of the generator (a stamped frame leaves
    /// when its batch is flushed: latency trials use small ones).
    pub gen_batch: u32,
    /// How far the generator's schedule slipped at worst (µs): a frame
    /// that could not leave on time (the generator was preempted) leaves
    /// as soon as it can, so a late schedule means a burst of that many
    /// µs of frames at the generator's top speed.
    pub gen_late_max_us: f64,
    /// Latency trials: the generator does not catch up after falling more
    /// than [`LATENCY_MAX_LAG`] behind, its schedule slips (a gap in the
    /// stream instead of a burst that would queue in the DuT): the gaps in
    /// all (µs, not part of `tx_seconds`) and how many.
    pub gen_slipped_us: f64,
    pub gen_slips: u64,
    /// Not counted: the trial was run again (invalid, or a failed trial
    /// repeated under the search's rules).
    pub repeated: bool,
    /// Why the trial is not valid ([`TrialRecord::validate`]); empty: valid.
    pub invalid: Vec<String>,
    /// What the sink found besides this trial's frames.
    pub verify: Verification,
    pub kernel: KernelCheck,
    pub latency: Option<Latency>,
    /// Both directions at once: each direction's own record (forward g0
    /// -> s0, then reverse s0 -> g0; the reverse's kernel counters are of
    /// s0 sending, d1 receiving, d0 sending, g0 receiving). The counts
    /// above are their sums, the loss ratio the larger of the two (the
    /// trial passes only when neither direction loses), the latency both
    /// merged.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub directions: Vec<TrialRecord>,
}

/// The span (ns, CLOCK_MONOTONIC) the directions of a trial sent in
/// together: from the earliest start to the latest end of the known
/// sending spans ([`TrialRecord::send_span_ns`]), None if none is known.
fn common_span_ns(dirs: &[TrialRecord]) -> Option<(u64, u64)> {
    dirs.iter()
        .filter_map(|d| d.send_span_ns)
        .reduce(|a, b| (a.0.min(b.0), a.1.max(b.1)))
}

impl TrialRecord {
    /// The record of a trial in both directions from each direction's
    /// (see [`TrialRecord::directions`]).
    ///
    /// The aggregate rates are the total frames over the span the
    /// directions sent in together: from the earliest start to the latest
    /// end of sending ([`TrialRecord::send_span_ns`]; at least the longest
    /// direction's `tx_seconds`, also when no span is known). The sum of
    /// the directions' own rates, each over its own span, is not a rate
    /// of the machine: two generators sharing one core, each sending
    /// while the other's call sets up or tears down, measured 4.9 Mpps
    /// both ways against 3.9 one way (issue 35). Over the common span the
    /// aggregate is at most that sum, and equal to it only when the
    /// spans coincide.
    pub fn both_ways(spec: &TrialSpec, dirs: Vec<TrialRecord>) -> TrialRecord {
        let sum = |f: fn(&TrialRecord) -> u64| dirs.iter().map(f).sum::<u64>();
        let max = |f: fn(&TrialRecord) -> f64| dirs.iter().map(f).fold(0.0, f64::max);
        let (sent, received) = (sum(|d| d.sent), sum(|d| d.received));
        let span = common_span_ns(&dirs);
        let common = span.map_or(0.0, |(a, b)| b.saturating_sub(a) as f64 / 1e9);
        let mut r = TrialRecord::new(spec, sent, received, common.max(max(|d| d.tx_seconds)));
        r.send_span_ns = span;
        r.lost = sum(|d| d.lost);
        r.loss_ratio = max(|d| d.loss_ratio);
        r.drain_ms = max(|d| d.drain_ms);
        r.gen_late_max_us = max(|d| d.gen_late_max_us);
        r.gen_slipped_us = max(|d| d.gen_slipped_us);
        r.gen_slips = sum(|d| d.gen_slips);
        r.gen_batch = dirs.first().map_or(0, |d| d.gen_batch);
        r.verify = Verification {
            foreign: sum(|d| d.verify.foreign),
            stale: sum(|d| d.verify.stale),
            duplicates: sum(|d| d.verify.duplicates),
            reordered: sum(|d| d.verify.reordered),
            unchecked: sum(|d| d.verify.unchecked),
        };
        r.kernel = KernelCheck {
            gen_iface_tx: sum(|d| d.kernel.gen_iface_tx),
            gen_iface_xmit_errors: sum(|d| d.kernel.gen_iface_xmit_errors),
            dut_in_rx: sum(|d| d.kernel.dut_in_rx),
            dut_out_tx: sum(|d| d.kernel.dut_out_tx),
            sink_iface_rx: sum(|d| d.kernel.sink_iface_rx),
            sink_side_dropped: sum(|d| d.kernel.sink_side_dropped),
            dut_out_tx_dropped: sum(|d| d.kernel.dut_out_tx_dropped),
            dut_out_tx_errors: sum(|d| d.kernel.dut_out_tx_errors),
            sink_iface_rx_dropped: sum(|d| d.kernel.sink_iface_rx_dropped),
            sink_side_counted_twice: sum(|d| d.kernel.sink_side_counted_twice),
            ..Default::default()
        };
        let worst = |f: fn(&KernelCheck) -> f64| {
            dirs.iter()
                .map(|d| f(&d.kernel))
                .max_by(|a, b| a.abs().total_cmp(&b.abs()))
                .unwrap_or(0.0)
        };
        r.kernel.offered_diff_pct = worst(|k| k.offered_diff_pct);
        r.kernel.dut_in_diff_pct = worst(|k| k.dut_in_diff_pct);
        r.kernel.dut_out_diff_pct = worst(|k| k.dut_out_diff_pct);
        r.kernel.forwarded_diff_pct = worst(|k| k.forwarded_diff_pct);
        r.kernel.agrees = dirs.iter().all(|d| d.kernel.agrees);
        r.latency = if dirs.iter().any(|d| d.latency.is_some()) {
            Latency::merge(dirs.iter().filter_map(|d| d.latency.as_ref()))
        } else {
            None
        };
        let names = ["forward", "reverse"];
        r.invalid = dirs
            .iter()
            .enumerate()
            .flat_map(|(i, d)| {
                let name = names.get(i).copied().unwrap_or("path");
                d.invalid.iter().map(move |w| format!("{name}: {w}"))
            })
            .collect();
        r.directions = dirs;
        r
    }

    /// A record from the counts (kernel check judged here).
    pub fn new(spec: &TrialSpec, sent: u64, received: u64, tx_seconds: f64) -> TrialRecord {
        let lost = sent.saturating_sub(received);
        TrialRecord {
            procedure: spec.procedure,
            frame_size: spec.frame_size,
            requested_pps: spec.rate_pps,
            sent,
            received,
            lost,
            loss_ratio: if sent == 0 {
                0.0
            } else {
                lost as f64 / sent as f64
            },
            tx_seconds,
            send_span_ns: None,
            offered_pps: if tx_seconds > 0.0 {
                sent as f64 / tx_seconds
            } else {
                0.0
            },
            forwarded_pps: if tx_seconds > 0.0 {
                received as f64 / tx_seconds
            } else {
                0.0
            },
            drain_ms: 0.0,
            gen_batch: 0,
            gen_late_max_us: 0.0,
            gen_slipped_us: 0.0,
            gen_slips: 0,
            repeated: false,
            invalid: Vec::new(),
            verify: Verification::default(),
            kernel: KernelCheck::default(),
            latency: None,
            directions: Vec::new(),
        }
    }

    /// Judge the trial's validity (see the module documentation): fills
    /// `invalid` with the reasons, in words.
    pub fn validate(&mut self, spec: &TrialSpec) {
        let mut why = Vec::new();
        if self.received > self.sent {
            why.push(format!(
                "{} frames received of {} sent",
                self.received, self.sent
            ));
        }
        if let Some(n) = spec.frames {
            if self.sent < n {
                why.push(format!("the generator sent {} of {n} frames", self.sent));
            }
        }
        // A probe asks for the most that may be offered (the cap, or the
        // top speed): falling short of it is what it measures, not a fault.
        let paced = spec.procedure != Procedure::Probe;
        if let (Some(r), true, true) = (spec.rate_pps, self.sent > 0, paced) {
            if self.offered_pps < r * (1.0 - OFFERED_TOLERANCE) {
                why.push(format!(
                    "offered {} ({:.1} % under the rate asked)",
                    mpps(self.offered_pps),
                    (1.0 - self.offered_pps / r) * 100.0
                ));
            }
            let budget_us = LATE_BUDGET_FRAMES / r * 1e6;
            if self.gen_late_max_us > budget_us {
                why.push(format!(
                    "the generator fell {:.1} ms behind (a catch-up burst of ~{:.0} frames; {:.1} ms allowed at this rate)",
                    self.gen_late_max_us / 1e3,
                    self.gen_late_max_us * r / 1e6,
                    budget_us / 1e3
                ));
            }
        }
        if self.gen_slipped_us > SLIP_TOLERANCE * self.tx_seconds * 1e6 {
            why.push(format!(
                "the generator's schedule slipped {:.1} ms in {} gaps ({:.0} % of {:.1} ms allowed)",
                self.gen_slipped_us / 1e3,
                self.gen_slips,
                SLIP_TOLERANCE * 100.0,
                self.tx_seconds * 1e3
            ));
        }
        if !self.kernel.agrees {
            why.push(format!(
                "the kernel's counters disagree: {}",
                self.kernel.disagreements()
            ));
        }
        // Frames the sink side dropped are in `lost` but were not the
        // DuT's to lose: the trial says nothing about the DuT and is run
        // again. One that lost nothing stands (every frame was counted,
        // whatever else the sink side dropped: frames of no trial).
        if self.kernel.sink_side_dropped > 0 && self.lost > 0 {
            why.push(format!(
                "the sink side dropped {} frames ({}), {} lost in all: the bed's loss, not the DuT's",
                self.kernel.sink_side_dropped,
                self.kernel.sink_side_parts(),
                self.lost
            ));
        }
        self.invalid = why;
    }
}

/// Something that runs trials (the test bed, or a model in tests).
pub trait Trials {
    fn trial(&mut self, spec: &TrialSpec) -> Result<TrialRecord, String>;
    /// True when the user asked to stop: procedures return what they have.
    fn stopped(&self) -> bool {
        false
    }
}

/// Parameters of the procedures.
#[derive(Clone, Debug, Serialize)]
pub struct Rfc2544Config {
    /// Frame sizes on the wire (FCS included).
    pub sizes: Vec<u32>,
    /// Sending time of a throughput / frame-loss / latency trial.
    pub trial: Duration,
    /// Largest loss ratio a throughput trial may have and pass (0: none):
    /// the non-drop rate (NDR) with 0.
    pub loss_tolerance: f64,
    /// Largest loss ratio of the partial-drop rate (PDR), found by the
    /// same search (FD.io CSIT's MLRsearch: 0.5 %); at least `loss_tolerance`.
    pub pdr_loss: f64,
    /// Every failed throughput trial fails its rate (RFC 2544 to the
    /// letter). Otherwise a trial that lost under [`SMALL_LOSS`] of its
    /// frames is repeated once and the rate passes if the repeat does.
    pub strict: bool,
    /// The search ends when (fail - pass) <= resolution * fail.
    pub resolution: f64,
    /// Independent throughput searches per size (the result is their
    /// median; min and max are the spread).
    pub repetitions: usize,
    /// Most trials one search may use.
    pub max_search_trials: usize,
    /// Run the latency trial after each throughput search.
    pub latency: bool,
    /// Latency trials per size (RFC 2544 26.2 asks for 20; merged).
    pub latency_trials: usize,
    /// Idle time before every trial after the first, for the DuT to
    /// restabilise (RFC 2544 section 23: at least 5 s). The drain after a
    /// trial already waits for the DuT's queues to empty.
    pub settle: Duration,
    /// A confirmation trial of this length at the reported NDR and PDR
    /// (FD.io CSIT's final trial duration; [`finish_size`]); if it fails,
    /// the rate steps down ([`FINAL_STEPS`] at most) until a final-length
    /// trial passes. None: the figures rest on the search's trials.
    pub final_trial: Option<Duration>,
    /// Sizes that get the frame-loss-rate procedure.
    pub frame_loss_sizes: Vec<u32>,
    /// Step of offered load for frame loss (fraction, RFC 2544: 0.1).
    pub frame_loss_step: f64,
    /// Sizes that get the back-to-back procedure.
    pub back_to_back_sizes: Vec<u32>,
    /// Longest burst tried, as time at the generator's top speed.
    pub back_to_back_max: Duration,
    /// Back-to-back searches per size (RFC 2544 asks for 50; the mean is reported).
    pub back_to_back_trials: usize,
    /// The most the bench offers (`--max-rate`; None: the generator's top
    /// speed): the probe and the back-to-back bursts are paced at it and
    /// no trial asks for more.
    pub max_rate: Option<MaxRate>,
    /// The empty bed's p50 latency (ns), when measured: a DuT's p50 at its
    /// NDR far above it flags a standing queue ([`STANDING_QUEUE_P50_NS`]).
    pub empty_bed_p50_ns: Option<f64>,
}

/// A rate cap: frames/s, or a bit rate on the wire, which is a frame rate
/// at each size (L1: frame, FCS, preamble and inter-frame gap, as a link's
/// speed counts; L2: frame and FCS).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MaxRate {
    Pps(f64),
    Bps { bps: f64, l1: bool },
}

/// The least rate cap, frames/s: the readiness and check trials send 2000
/// frames (2 s here) and a search needs some frames per trial.
pub const MIN_CAP_PPS: f64 = 1000.0;

/// Bytes of preamble, start delimiter and inter-frame gap per frame.
const L1_OVERHEAD: f64 = 20.0;

impl MaxRate {
    /// Frames/s at `size` (bytes on the wire with FCS; the IMIX's mean).
    pub fn pps(&self, size: u32) -> f64 {
        match *self {
            MaxRate::Pps(p) => p,
            MaxRate::Bps { bps, l1 } => {
                let extra = if l1 { L1_OVERHEAD } else { 0.0 };
                bps / 8.0 / (crate::frame_size::wire_bytes(size) + extra)
            }
        }
    }
}

impl Rfc2544Config {
    /// The cap at `size` (frames/s), if there is one.
    pub fn cap(&self, size: u32) -> Option<f64> {
        self.max_rate.map(|m| m.pps(size))
    }

    /// `rate` under the cap (None, the generator's top speed: the cap).
    pub fn capped(&self, size: u32, rate: Option<f64>) -> Option<f64> {
        match (rate, self.cap(size)) {
            (Some(r), Some(c)) => Some(r.min(c)),
            (r, c) => r.or(c),
        }
    }
}

impl Default for Rfc2544Config {
    fn default() -> Self {
        Rfc2544Config {
            sizes: STANDARD_SIZES.to_vec(),
            trial: Duration::from_secs(1),
            loss_tolerance: 0.0,
            pdr_loss: PDR_LOSS,
            strict: false,
            resolution: 0.01,
            repetitions: 1,
            max_search_trials: 16,
            latency: true,
            latency_trials: 1,
            settle: Duration::ZERO,
            final_trial: Some(DEFAULT_FINAL_TRIAL),
            frame_loss_sizes: vec![64],
            frame_loss_step: 0.1,
            back_to_back_sizes: vec![64],
            back_to_back_max: Duration::from_millis(500),
            back_to_back_trials: 2,
            max_rate: None,
            empty_bed_p50_ns: None,
        }
    }
}

/// The final trial's length by default: long enough that a DuT's rings
/// (thousands of frames: milliseconds at these rates) cannot hide a
/// backlog, short enough that the README's main command stays near 15
/// minutes (FD.io CSIT uses 30 s, RFC 2544 suggests 60 for a formal
/// result: `--final-trial 60`).
pub const DEFAULT_FINAL_TRIAL: Duration = Duration::from_secs(10);

/// The partial-drop rate's loss ratio by default (FD.io CSIT's PDR).
pub const PDR_LOSS: f64 = 0.005;

/// RFC 2544 section 9.1's frame sizes for Ethernet, plus 1280 (IPv6's minimum MTU).
pub const STANDARD_SIZES: [u32; 7] = [64, 128, 256, 512, 1024, 1280, 1518];

/// `linerate bench`'s sizes by default: the smallest, a middle one and the
/// largest of [`STANDARD_SIZES`] (a final trial per figure costs 10 s or
/// more: seven sizes would take the main command past 25 minutes).
pub const DEFAULT_SIZES: [u32; 3] = [64, 512, 1518];

/// One throughput search.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Search {
    /// Highest rate that passed (0 when none did).
    pub throughput_pps: f64,
    /// Lowest rate that failed (None: the generator's top speed passed,
    /// the throughput is at least `throughput_pps`).
    pub lowest_fail_pps: Option<f64>,
    /// Trials used (indexes into [`SizeResult::trials`]).
    pub trials: Vec<usize>,
    /// The passing and failing rates ended within the resolution (or the
    /// generator's top speed passed); false: the search ran out of trials.
    pub converged: bool,
    /// The partial-drop rate: the highest rate whose valid trial lost at
    /// most `pdr_loss` (the search's own trials first, then bisected to
    /// the resolution); >= `throughput_pps`.
    pub pdr_pps: f64,
    /// The lowest rate that lost more than `pdr_loss` (None: the
    /// generator's top speed lost no more).
    pub pdr_lowest_fail_pps: Option<f64>,
    /// The NDR is a lower bound: the search's upper bound is not a rate
    /// the DuT failed but one the bed could not offer or measure (the
    /// probe at the generator's top speed passed; or the trials above the
    /// result stayed invalid: the generator offered short or fell behind,
    /// the sink side dropped). ">=" wherever it is shown.
    #[serde(default)]
    pub generator_limited: bool,
    /// The same for the PDR: no rate above it lost more than `pdr_loss` in
    /// a valid trial.
    #[serde(default)]
    pub pdr_generator_limited: bool,
}

impl Search {
    /// A search that ended at its probe: the generator's top speed passed
    /// (both rates are the top speed, lower bounds).
    fn top_speed(pps: f64, probe: usize) -> Search {
        Search {
            throughput_pps: pps,
            lowest_fail_pps: None,
            trials: vec![probe],
            converged: true,
            pdr_pps: pps,
            pdr_lowest_fail_pps: None,
            generator_limited: true,
            pdr_generator_limited: true,
        }
    }
}

/// Back-to-back result of one search.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Burst {
    /// Longest burst forwarded without loss (frames).
    pub frames: u64,
    /// True when even the longest burst tried passed (a lower bound).
    pub at_least: bool,
}

/// Everything measured at one frame size.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct SizeResult {
    /// Bytes on the wire with FCS, or [`crate::frame_size::IMIX`] ("imix" in JSON).
    #[serde(with = "crate::frame_size::serde_size")]
    pub frame_size: u32,
    /// The generator's top speed (offered at overload).
    pub max_offered_pps: f64,
    /// What the DuT forwarded at overload.
    pub overload_forwarded_pps: f64,
    pub searches: Vec<Search>,
    /// Median of the searches' throughput (the mean of the middle two for
    /// an even number); min and max across them.
    pub throughput_pps: Option<f64>,
    pub throughput_min_pps: Option<f64>,
    pub throughput_max_pps: Option<f64>,
    /// The search's own uncertainty: the gap to the lowest failed rate (pps).
    pub resolution_pps: Option<f64>,
    /// Median, min and max of the searches' partial-drop rates (PDR;
    /// `throughput_pps` is the non-drop rate, NDR).
    pub pdr_pps: Option<f64>,
    pub pdr_min_pps: Option<f64>,
    pub pdr_max_pps: Option<f64>,
    /// The NDR shown is a lower bound (">="): a search behind it
    /// ([`Search::generator_limited`]) ended at what the generator could
    /// offer or the bed could measure, not at a rate the DuT failed.
    pub generator_limited: bool,
    /// The same for the PDR.
    #[serde(default)]
    pub pdr_generator_limited: bool,
    /// Searches that found no rate that passed (the DuT lost frames at
    /// every rate tried): a result of their own, said as such, and not in
    /// the median (which is of the other searches; 0 when all are empty).
    #[serde(default)]
    pub empty_searches: usize,
    /// The median of the searches before the final trials (short trials):
    /// what `throughput_pps` and `pdr_pps` were before confirming.
    #[serde(default)]
    pub search_throughput_pps: Option<f64>,
    #[serde(default)]
    pub search_pdr_pps: Option<f64>,
    /// Seconds of traffic of the trials the NDR and the PDR rest on: the
    /// final trial's length when one confirmed it, else the search's.
    #[serde(default)]
    pub ndr_trial_s: f64,
    #[serde(default)]
    pub pdr_trial_s: f64,
    /// With final trials: whether one passed at (or stepped down to) the
    /// NDR, the PDR (None: no final trial, or nothing to confirm).
    #[serde(default)]
    pub ndr_confirmed: Option<bool>,
    #[serde(default)]
    pub pdr_confirmed: Option<bool>,
    /// The final trials (indexes into `trials`), NDR's then PDR's.
    #[serde(default)]
    pub final_trials: Vec<usize>,
    /// A passing trial at the NDR held a standing queue: frames still
    /// arrived long after the generator stopped, or the latency at the NDR
    /// is far above the empty bed's. In words; None: no sign of one.
    #[serde(default)]
    pub standing_queue: Option<String>,
    /// The probe at the rate cap ([`Rfc2544Config::max_rate`]) passed: the
    /// throughput is at least the cap (`generator_limited` is set too: the
    /// offer, not the DuT, was the limit).
    pub rate_capped: bool,
    /// Index of the latency trial.
    pub latency_trial: Option<usize>,
    /// Every latency trial (`latency_trials` of the configuration; the
    /// first is `latency_trial`).
    pub latency_trials: Vec<usize>,
    /// With more than one latency trial: all of them merged (histograms
    /// summed, min and max over all, mean over every sample).
    pub latency_merged: Option<Latency>,
    /// Latency at the common load (a rate every DuT of the run sustains,
    /// [`common_latency`]): the rate and the trials, merged when several.
    pub common_latency_pps: Option<f64>,
    pub common_latency_trials: Vec<usize>,
    pub common_latency_merged: Option<Latency>,
    /// The empty bed's latency at the rate of this size's latency trials
    /// (at the NDR) and of the common load: what each row subtracts,
    /// measured at its own rate, size and generator batch (None: not
    /// measured: external ports, no latency, the empty bed failed).
    #[serde(default)]
    pub latency_baseline: Option<Baseline>,
    #[serde(default)]
    pub common_latency_baseline: Option<Baseline>,
    /// (requested load as a fraction of max_offered_pps, offered pps (what
    /// the generator sent over its sending time: plot at this), loss
    /// ratio, the trial stayed invalid (flagged, not a DuT figure)).
    pub frame_loss: Vec<(f64, f64, f64, bool)>,
    pub back_to_back: Vec<Burst>,
    /// Trials whose counts disagree with the kernel's by more than the tolerance.
    pub kernel_disagreements: usize,
    /// Every trial at this size, in order.
    pub trials: Vec<TrialRecord>,
}

/// The empty bed's latency at one rate: the generator's frames straight
/// into the sink (no DuT), the part of a latency row that is the
/// measurement's own.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Baseline {
    /// The rate of the baseline's trial (one way; for a both-ways row,
    /// each direction's share of it: the empty bed has one direction).
    pub rate_pps: f64,
    pub p50_ns: f64,
    pub p99_ns: f64,
    /// The generator's kernel batch in the baseline's trial.
    pub gen_batch: u32,
    /// The baseline's trial was invalid (its reasons): flagged.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub invalid: Vec<String>,
}

impl Baseline {
    /// From an empty-bed trial with its latency.
    pub fn of(t: &TrialRecord) -> Option<Baseline> {
        let l = t.latency.as_ref()?;
        Some(Baseline {
            rate_pps: rate_of(t),
            p50_ns: l.p50_ns,
            p99_ns: l.p99_ns,
            gen_batch: t.gen_batch,
            invalid: t.invalid.clone(),
        })
    }
}

/// Median (the mean of the middle two for an even number), min and max.
fn median_min_max(v: impl Iterator<Item = f64>) -> Option<(f64, f64, f64)> {
    let mut found: Vec<f64> = v.collect();
    found.sort_by(|a, b| a.total_cmp(b));
    let m = found.len() / 2;
    let med = if found.is_empty() {
        return None;
    } else if found.len().is_multiple_of(2) {
        (found[m - 1] + found[m]) / 2.0
    } else {
        found[m]
    };
    Some((med, found[0], found[found.len() - 1]))
}

impl SizeResult {
    /// Median, min and max of the searches so far. An empty search (no
    /// rate passed) is counted apart, not averaged in: a median of 0 and x
    /// would read as x / 2, a rate nobody measured. The NDR (PDR) is a
    /// lower bound when a search behind it is one: the median of lower
    /// bounds and exact values is a lower bound of the true median.
    fn summarise(&mut self, cfg: &Rfc2544Config) {
        let found: Vec<&Search> = self
            .searches
            .iter()
            .filter(|s| s.throughput_pps > 0.0)
            .collect();
        self.empty_searches = self.searches.len() - found.len();
        self.ndr_trial_s = cfg.trial.as_secs_f64();
        self.pdr_trial_s = cfg.trial.as_secs_f64();
        let Some((med, min, max)) = median_min_max(found.iter().map(|s| s.throughput_pps)) else {
            if !self.searches.is_empty() {
                // Every search empty: the DuT passed nothing; no bound.
                self.throughput_pps = Some(0.0);
                self.throughput_min_pps = Some(0.0);
                self.throughput_max_pps = Some(0.0);
                let pdr = self.searches.iter().map(|s| s.pdr_pps).fold(0.0, f64::max);
                self.pdr_pps = Some(pdr);
                self.pdr_min_pps = Some(pdr);
                self.pdr_max_pps = Some(pdr);
                self.generator_limited = false;
                self.pdr_generator_limited = false;
            }
            return;
        };
        self.throughput_pps = Some(med);
        self.throughput_min_pps = Some(min);
        self.throughput_max_pps = Some(max);
        if let Some((med, min, max)) = median_min_max(found.iter().map(|s| s.pdr_pps)) {
            self.pdr_pps = Some(med);
            self.pdr_min_pps = Some(min);
            self.pdr_max_pps = Some(max);
        }
        self.generator_limited = found.iter().any(|s| s.generator_limited);
        self.pdr_generator_limited = found.iter().any(|s| s.pdr_generator_limited);
        self.resolution_pps = found
            .iter()
            .filter_map(|s| s.lowest_fail_pps.map(|f| f - s.throughput_pps))
            .reduce(f64::max);
    }

    fn new(frame_size: u32) -> Self {
        SizeResult {
            frame_size,
            max_offered_pps: 0.0,
            overload_forwarded_pps: 0.0,
            searches: Vec::new(),
            throughput_pps: None,
            throughput_min_pps: None,
            throughput_max_pps: None,
            resolution_pps: None,
            pdr_pps: None,
            pdr_min_pps: None,
            pdr_max_pps: None,
            generator_limited: false,
            pdr_generator_limited: false,
            empty_searches: 0,
            search_throughput_pps: None,
            search_pdr_pps: None,
            ndr_trial_s: 0.0,
            pdr_trial_s: 0.0,
            ndr_confirmed: None,
            pdr_confirmed: None,
            final_trials: Vec::new(),
            standing_queue: None,
            rate_capped: false,
            latency_trial: None,
            latency_trials: Vec::new(),
            latency_merged: None,
            common_latency_pps: None,
            common_latency_trials: Vec::new(),
            common_latency_merged: None,
            latency_baseline: None,
            common_latency_baseline: None,
            frame_loss: Vec::new(),
            back_to_back: Vec::new(),
            kernel_disagreements: 0,
            trials: Vec::new(),
        }
    }

    fn push(&mut self, t: TrialRecord) -> usize {
        if !t.kernel.agrees {
            self.kernel_disagreements += 1;
        }
        self.trials.push(t);
        self.trials.len() - 1
    }

    /// The latency: of the latency trial, or all of them merged.
    pub fn latency(&self) -> Option<&Latency> {
        self.latency_merged.as_ref().or_else(|| {
            self.latency_trial
                .and_then(|i| self.trials.get(i))
                .and_then(|t| t.latency.as_ref())
        })
    }
}

impl Latency {
    /// Several trials' latencies as one: histograms summed (quantiles from
    /// the sum, clamped to min..max), min and max over all, mean over every
    /// sample. None without samples.
    pub fn merge<'a>(all: impl IntoIterator<Item = &'a Latency>) -> Option<Latency> {
        let mut m = Latency::default();
        let mut buckets: std::collections::BTreeMap<u64, (f64, u64)> = Default::default();
        let (mut min, mut max, mut sum) = (f64::INFINITY, 0.0f64, 0.0f64);
        for l in all {
            if l.samples == 0 {
                continue;
            }
            m.samples += l.samples;
            m.bad_stamps += l.bad_stamps;
            sum += l.mean_ns * l.samples as f64;
            min = min.min(l.min_ns);
            max = max.max(l.max_ns);
            for &(x, c) in &l.histogram {
                buckets.entry(x.to_bits()).or_insert((x, 0)).1 += c;
            }
        }
        if m.samples == 0 {
            return None;
        }
        let mut pts: Vec<(f64, u64)> = buckets.into_values().collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let n: u64 = pts.iter().map(|p| p.1).sum();
        let q = |p: f64| {
            let rank = ((p * n as f64).ceil() as u64).clamp(1, n.max(1));
            let mut seen = 0;
            for &(x, c) in &pts {
                seen += c;
                if seen >= rank {
                    return x.clamp(min, max);
                }
            }
            max
        };
        m.min_ns = min;
        m.max_ns = max;
        m.mean_ns = sum / m.samples as f64;
        m.p50_ns = q(0.5);
        m.p90_ns = q(0.9);
        m.p99_ns = q(0.99);
        m.p999_ns = q(0.999);
        m.histogram = pts;
        Some(m)
    }
}

/// What the summary should say about a size beyond its numbers: trials
/// that were invalid, a latency trial that lost frames or stayed invalid,
/// frames the sink did not count (foreign, late, duplicated).
pub fn size_notes(s: &SizeResult) -> Vec<String> {
    let mut n = Vec::new();
    if s.rate_capped {
        n.push("the probe at the rate cap (--max-rate) passed: a lower bound".into());
    }
    let invalid = s.trials.iter().filter(|t| !t.invalid.is_empty()).count();
    let counted_invalid = s
        .trials
        .iter()
        .filter(|t| {
            !t.invalid.is_empty()
                && !t.repeated
                && matches!(t.procedure, Procedure::Throughput | Procedure::Probe)
        })
        .count();
    if invalid > 0 {
        n.push(format!(
            "{invalid} invalid trial(s) repeated{}",
            if counted_invalid > 0 {
                format!(", {counted_invalid} throughput trial(s) still invalid (counted as fails)")
            } else {
                String::new()
            }
        ));
    }
    // Every latency trial (at the NDR and at the common load) is checked.
    let lat: Vec<(usize, &TrialRecord)> = s
        .latency_trials
        .iter()
        .chain(&s.common_latency_trials)
        .filter_map(|&i| s.trials.get(i).map(|t| (i, t)))
        .collect();
    let lossy: Vec<String> = lat
        .iter()
        .filter(|(_, t)| t.lost > 0)
        .map(|(_, t)| format!("{} of {} at {}", t.lost, t.sent, mpps(rate_of(t))))
        .collect();
    if !lossy.is_empty() {
        n.push(format!(
            "{} of {} latency trial(s) lost frames ({}): a backlog, their latency is not the DuT's at an even load",
            lossy.len(),
            lat.len(),
            lossy.join(", ")
        ));
    }
    let invalid_lat: Vec<String> = lat
        .iter()
        .filter(|(_, t)| !t.invalid.is_empty())
        .map(|(_, t)| t.invalid.join("; "))
        .collect();
    if !invalid_lat.is_empty() {
        n.push(format!(
            "{} latency trial(s) invalid: {}",
            invalid_lat.len(),
            invalid_lat.join(" | ")
        ));
    }
    let bad: u64 = lat
        .iter()
        .filter_map(|(_, t)| t.latency.as_ref())
        .map(|l| l.bad_stamps)
        .sum();
    if bad > 0 {
        n.push(format!("{bad} bad TX stamps left out"));
    }
    let sum = |f: fn(&Verification) -> u64| s.trials.iter().map(|t| f(&t.verify)).sum::<u64>();
    let (foreign, stale, dup) = (sum(|v| v.foreign), sum(|v| v.stale), sum(|v| v.duplicates));
    if foreign + stale + dup > 0 {
        n.push(format!(
            "not counted: {foreign} foreign, {stale} late from an earlier trial, {dup} duplicated frames"
        ));
    }
    let fin = |c: Option<bool>, what: &str, now: Option<f64>, was: Option<f64>| {
        match (c, now, was) {
        (Some(false), _, Some(w)) => Some(format!(
            "no final trial passed at the {what} of the searches ({}) or {FINAL_STEPS} steps under it: the {what} rests on the search's {:.1} s trials, unconfirmed",
            mpps(w),
            s.ndr_trial_s
        )),
        (Some(true), Some(v), Some(w)) if v < w * 0.9999 => Some(format!(
            "the {what} stepped down from the searches' {} to {} in final trials",
            mpps(w),
            mpps(v)
        )),
        _ => None,
    }
    };
    n.extend(fin(
        s.ndr_confirmed,
        "NDR",
        s.throughput_pps,
        s.search_throughput_pps,
    ));
    n.extend(fin(s.pdr_confirmed, "PDR", s.pdr_pps, s.search_pdr_pps));
    if s.empty_searches > 0 {
        n.push(format!(
            "{} of {} search(es) found no rate without loss (not in the median)",
            s.empty_searches,
            s.searches.len()
        ));
    }
    for (i, x) in s.searches.iter().enumerate() {
        if !x.converged {
            n.push(format!(
                "search {} ran out of trials before the resolution",
                i + 1
            ));
        }
    }
    if let Some(q) = &s.standing_queue {
        n.push(q.clone());
    }
    n
}

/// Progress: (frame size, what is happening).
pub type Progress<'a> = &'a mut dyn FnMut(u32, &str);

/// Run the procedures at every configured size. With repetitions, the
/// first search at every size comes first (with the frame-loss and
/// back-to-back procedures), then the further searches in further passes
/// over the sizes: the repetitions of a size are spread over the run, so
/// their spread also holds what drifts with time (the machine's load).
/// The last pass finishes each size ([`finish_size`]): final trials at the
/// reported NDR and PDR, then the latency at the NDR.
/// (The bench spreads them further: it runs each pass over every DuT,
/// through [`first_pass`] and [`further_pass`].)
pub fn run(
    cfg: &Rfc2544Config,
    t: &mut dyn Trials,
    progress: Progress,
) -> Result<Vec<SizeResult>, String> {
    let reps = cfg.repetitions.max(1);
    let mut out = first_pass(cfg, t, reps == 1, progress)?;
    for rep in 1..reps {
        further_pass(cfg, t, &mut out, rep, rep + 1 == reps, progress)?;
    }
    Ok(out)
}

/// Every procedure at every size, with the first throughput search; with
/// `finish` (the only pass), each size is finished ([`finish_size`]).
pub fn first_pass(
    cfg: &Rfc2544Config,
    t: &mut dyn Trials,
    finish: bool,
    progress: Progress,
) -> Result<Vec<SizeResult>, String> {
    let mut out = Vec::new();
    for &size in &cfg.sizes {
        if t.stopped() {
            break;
        }
        let mut r = run_size(cfg, t, size, progress)?;
        if finish {
            finish_size(cfg, t, &mut r, progress)?;
        }
        out.push(r);
    }
    Ok(out)
}

/// Throughput search number `rep` (from 0; 0 is the first pass's) at
/// every size of a first pass; with `finish` (the last pass), each size is
/// then finished ([`finish_size`]).
pub fn further_pass(
    cfg: &Rfc2544Config,
    t: &mut dyn Trials,
    sizes: &mut [SizeResult],
    rep: usize,
    finish: bool,
    progress: Progress,
) -> Result<(), String> {
    for r in sizes.iter_mut() {
        if t.stopped() {
            break;
        }
        let s = repetition(cfg, t, r, rep, progress)?;
        r.searches.push(s);
        r.summarise(cfg);
        if finish {
            finish_size(cfg, t, r, progress)?;
        }
    }
    Ok(())
}

/// A further throughput search at a size (`rep` counts from 0), made from
/// scratch: its own probe at the generator's top speed (which is the
/// result if it passes) and a search from that probe's bounds, knowing
/// nothing of the earlier searches, so their spread is the method's own.
fn repetition(
    cfg: &Rfc2544Config,
    t: &mut dyn Trials,
    r: &mut SizeResult,
    rep: usize,
    progress: Progress,
) -> Result<Search, String> {
    let size = r.frame_size;
    progress(size, &format!("search {}: top speed", rep + 1));
    let probe = valid_trial(
        t,
        r,
        &spec(size, Procedure::Probe, None, cfg),
        "top speed",
        progress,
    )?;
    let bounds = probe_bounds(cfg, &probe);
    let passed = passes(&probe, cfg);
    let i = r.push(probe);
    if passed {
        return Ok(Search::top_speed(bounds.0, i));
    }
    search(cfg, t, r, rep, i, bounds, progress)
}

/// The relative spread of repeated throughput searches, pooled over sizes:
/// the half width, as a fraction, of the 95 % prediction interval of a
/// re-run's result (the median of as many searches) around this run's.
/// Each size's searches are taken relative to their mean; the pooled
/// variance s^2 has sum(n_i - 1) degrees of freedom; two runs' means of n
/// searches differ with variance 2 s^2 / n, so the half width is
/// t(0.975, dof) * s * sqrt(2 / n). (The median is reported: for n <= 2 it
/// is the mean, for more the interval is a little narrow.) None with
/// fewer than two searches at any size.
pub fn repeat_spread(sizes: &[SizeResult]) -> Option<f64> {
    pooled_spread(sizes.iter())
}

/// [`repeat_spread`] pooled over the sizes of every DuT of a run where the
/// DuT, not the generator, was the limit: the bed's estimate of how far a
/// re-run moves. A DuT's own estimate has 7 degrees of freedom with the
/// default sizes and comes out below the truth now and then (measured:
/// linux-ipfwd stated ±5.8 % in one run, ±48.7 % in the next), so the
/// bench states the larger of the two.
pub fn bed_spread<'a>(duts: impl IntoIterator<Item = &'a [SizeResult]>) -> Option<f64> {
    pooled_spread(duts.into_iter().flatten().filter(|s| !s.generator_limited))
}

fn pooled_spread<'a>(sizes: impl Iterator<Item = &'a SizeResult>) -> Option<f64> {
    let (s, t, n_max) = pooled_relative(sizes.map(|r| {
        r.searches
            .iter()
            .map(|s| s.throughput_pps)
            .filter(|&x| x > 0.0)
            .collect()
    }))?;
    Some(t * s * (2.0 / n_max as f64).sqrt())
}

/// Groups of repeated results, each taken relative to its mean, the
/// variance pooled over the groups of two or more (sum(n_i - 1) degrees of
/// freedom): (s, t(0.975, dof), the largest group). None without a group
/// of two.
pub(crate) fn pooled_relative(groups: impl Iterator<Item = Vec<f64>>) -> Option<(f64, f64, usize)> {
    use statrs::distribution::{ContinuousCDF, StudentsT};
    let (mut ss, mut dof, mut n_max) = (0.0f64, 0usize, 0usize);
    for v in groups.filter(|v| v.len() >= 2) {
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        ss += v.iter().map(|x| (x / mean - 1.0).powi(2)).sum::<f64>();
        dof += v.len() - 1;
        n_max = n_max.max(v.len());
    }
    if dof == 0 {
        return None;
    }
    let t = StudentsT::new(0.0, 1.0, dof as f64)
        .ok()?
        .inverse_cdf(0.975);
    Some(((ss / dof as f64).sqrt(), t, n_max))
}

/// A trial at `rate` (None: the top speed), under the cap.
fn spec(size: u32, procedure: Procedure, rate: Option<f64>, cfg: &Rfc2544Config) -> TrialSpec {
    let rate = cfg.capped(size, rate);
    TrialSpec {
        frame_size: size,
        rate_pps: rate,
        frames: rate.map(|r| ((r * cfg.trial.as_secs_f64()).round() as u64).max(1)),
        duration: cfg.trial,
        latency: false,
        procedure,
    }
}

/// A valid trial that lost no more than the tolerance and duplicated nothing.
fn passes(t: &TrialRecord, cfg: &Rfc2544Config) -> bool {
    t.sent > 0
        && t.invalid.is_empty()
        && t.verify.duplicates == 0
        && t.loss_ratio <= cfg.loss_tolerance
}

/// A trial, run again while it is invalid (at most [`INVALID_REPEATS`]
/// times; the invalid ones are kept in `r`, marked `repeated`).
fn valid_trial(
    t: &mut dyn Trials,
    r: &mut SizeResult,
    s: &TrialSpec,
    what: &str,
    progress: Progress,
) -> Result<TrialRecord, String> {
    let mut rec = t.trial(s)?;
    for _ in 0..INVALID_REPEATS {
        if rec.invalid.is_empty() || t.stopped() {
            break;
        }
        progress(
            s.frame_size,
            &format!("{what}: invalid ({}): repeated", rec.invalid.join("; ")),
        );
        rec.repeated = true;
        r.push(rec);
        rec = t.trial(s)?;
    }
    Ok(rec)
}

/// A probe's bounds for a search: (the highest rate offered, never above
/// the cap; what the DuT forwarded at it).
fn probe_bounds(cfg: &Rfc2544Config, probe: &TrialRecord) -> (f64, f64) {
    let cap = cfg.cap(probe.frame_size).unwrap_or(f64::INFINITY);
    (probe.offered_pps.min(cap), probe.forwarded_pps.min(cap))
}

/// The probe offered the cap (the generator reached it): a pass there is
/// the cap's limit, not the generator's.
fn at_cap(cfg: &Rfc2544Config, probe: &TrialRecord) -> bool {
    cfg.cap(probe.frame_size)
        .is_some_and(|c| probe.offered_pps >= c * (1.0 - OFFERED_TOLERANCE))
}

fn mpps(v: f64) -> String {
    format!("{:.3} Mpps", v / 1e6)
}

/// The procedures at one frame size but the final trials and the latency
/// ([`finish_size`], after the last search): the probe, the first
/// throughput search, frame loss and back-to-back.
pub fn run_size(
    cfg: &Rfc2544Config,
    t: &mut dyn Trials,
    size: u32,
    progress: Progress,
) -> Result<SizeResult, String> {
    let mut r = SizeResult::new(size);
    progress(
        size,
        &match cfg.cap(size) {
            Some(c) => format!("probe at the rate cap, {}", mpps(c)),
            None => "probe at the generator's top speed".into(),
        },
    );
    let probe = valid_trial(
        t,
        &mut r,
        &spec(size, Procedure::Probe, None, cfg),
        "probe",
        progress,
    )?;
    if probe.sent == 0 {
        if t.stopped() {
            return Ok(r);
        }
        return Err(format!(
            "{}: the generator sent nothing at top speed",
            crate::frame_size::label_b(size)
        ));
    }
    (r.max_offered_pps, r.overload_forwarded_pps) = probe_bounds(cfg, &probe);
    let probe_passed = passes(&probe, cfg);
    let at_cap = at_cap(cfg, &probe);
    r.push(probe);
    progress(
        size,
        &format!(
            "top speed {} offered, {} forwarded",
            mpps(r.max_offered_pps),
            mpps(r.overload_forwarded_pps)
        ),
    );
    if !t.stopped() {
        let s = if probe_passed {
            r.rate_capped = at_cap;
            Search::top_speed(r.max_offered_pps, 0)
        } else {
            let bounds = (r.max_offered_pps, r.overload_forwarded_pps);
            search(cfg, t, &mut r, 0, 0, bounds, progress)?
        };
        r.searches.push(s);
        r.summarise(cfg);
    }
    if cfg.frame_loss_sizes.contains(&size) && !t.stopped() {
        frame_loss(cfg, t, &mut r, progress)?;
    }
    if cfg.back_to_back_sizes.contains(&size) {
        for _ in 0..cfg.back_to_back_trials.max(1) {
            if t.stopped() {
                break;
            }
            let b = back_to_back(cfg, t, &mut r, progress)?;
            r.back_to_back.push(b);
        }
    }
    Ok(r)
}

/// One throughput search from the bounds of its probe (trial `probe` of
/// `r`): (the generator's top speed, what the DuT forwarded at it).
fn search(
    cfg: &Rfc2544Config,
    t: &mut dyn Trials,
    r: &mut SizeResult,
    rep: usize,
    probe: usize,
    (max_offered, overload_forwarded): (f64, f64),
    progress: Progress,
) -> Result<Search, String> {
    let size = r.frame_size;
    let mut lo = 0.0f64; // highest rate that passed
    let mut hi = max_offered; // lowest rate that failed (the probe)
                              // Whether `hi` is the bed's bound, not the DuT's: the trial there
                              // stayed invalid (the generator could not offer the rate cleanly, the
                              // sink side dropped, the counters disagreed), so nothing says the DuT
                              // fails there, and a result under it is a lower bound.
    let mut hi_bed = !r.trials[probe].invalid.is_empty();
    let mut s = Search {
        throughput_pps: 0.0,
        lowest_fail_pps: Some(hi),
        trials: vec![probe],
        converged: false,
        pdr_pps: 0.0,
        pdr_lowest_fail_pps: Some(hi),
        generator_limited: false,
        pdr_generator_limited: false,
    };
    // Start just under the forwarding rate at overload.
    let mut next = overload_forwarded * (1.0 - cfg.resolution / 2.0);
    let mut up = 4.0 * cfg.resolution;
    // Whether this search failed a trial before its first pass.
    let mut failed = false;
    // Below this the DuT forwards (next to) nothing: stop.
    let floor = (hi * 1e-4).max(100.0);
    for _ in 0..cfg.max_search_trials.max(1) {
        if t.stopped() || hi - lo <= cfg.resolution * hi || hi < floor {
            break;
        }
        // Keep the candidate strictly inside (lo, hi), away from the edges
        // (by 5 % of the span, at most a quarter resolution: a small step
        // up from a pass must stay small).
        let margin = ((hi - lo) * 0.05).min(cfg.resolution * hi / 4.0);
        let c = next.clamp(lo + margin, hi - margin).max(1.0);
        let label = format!("search {}: {}", rep + 1, mpps(c));
        let ts = spec(size, Procedure::Throughput, Some(c), cfg);
        let mut rec = valid_trial(t, r, &ts, &label, progress)?;
        // A small loss is repeated where a false fail would cost much:
        // before anything passed in a first search (the next rate would be
        // far lower) or while the bisection's bounds are far apart. Near
        // the end a fail moves the result by a few resolutions at most,
        // and every fail just above the capacity is a small loss: repeating
        // those would double the trials there.
        let costly = lo == 0.0 || c - lo > SMALL_LOSS_SPAN * cfg.resolution * c;
        if !cfg.strict
            && costly
            && rec.loss_ratio < SMALL_LOSS
            && !passes(&rec, cfg)
            && rec.invalid.is_empty()
            && rec.sent > 0
            && !t.stopped()
        {
            progress(
                size,
                &format!(
                    "search {}: {} -> loss {:.4} %: a small loss, repeated once (exceed ratio 50 %)",
                    rep + 1,
                    mpps(c),
                    rec.loss_ratio * 100.0
                ),
            );
            rec.repeated = true;
            r.push(rec);
            rec = valid_trial(t, r, &ts, &label, progress)?;
        }
        let ok = passes(&rec, cfg);
        let bed = bed_bound(&rec);
        // What got through: for a trial the generator could not offer, at
        // most what it did offer.
        let (fwd, loss) = (rec.forwarded_pps.min(rec.offered_pps), rec.loss_ratio);
        s.trials.push(r.push(rec));
        progress(
            size,
            &format!(
                "search {}: {} -> loss {:.4} % {}",
                rep + 1,
                mpps(c),
                loss * 100.0,
                if ok { "pass" } else { "fail" }
            ),
        );
        if ok {
            lo = c;
            next = if hi == max_offered {
                // Only the probe failed so far: the capacity is most likely
                // just above the overload forwarding rate, not half way to
                // the generator's top speed. Step up a few resolutions,
                // doubling the step on each pass (a low first pass is left
                // behind fast).
                let n = lo * (1.0 + up.min(1.0));
                up *= 2.0;
                n
            } else {
                (lo + hi) / 2.0
            };
        } else {
            hi = c;
            hi_bed = bed;
            next = if lo == 0.0 {
                // Nothing passed yet. After the search's first fail, which
                // offered just under the overload forwarding rate and lost
                // more than a stall would: aim just under what it forwarded
                // (the capacity, to within what the DuT's queues let
                // through). Later: aim there only when the trial lost a lot,
                // else halve (a DuT that loses a little at every rate would
                // otherwise creep down by its loss ratio per trial).
                let aim = fwd * (1.0 - cfg.resolution);
                let n = if !failed && loss >= SMALL_LOSS {
                    aim
                } else {
                    aim.min(hi * 0.5)
                };
                failed = true;
                n.max(hi * 0.1)
            } else {
                (lo + hi) / 2.0
            };
        }
    }
    s.throughput_pps = lo;
    s.lowest_fail_pps = Some(hi);
    // Converged: the bounds met the resolution, or the DuT forwards next to
    // nothing (an empty search, said as such in the summary).
    s.converged = hi - lo <= cfg.resolution * hi || hi < floor;
    s.generator_limited = lo > 0.0 && hi_bed;
    partial_drop_rate(cfg, t, r, &mut s, rep, progress)?;
    Ok(s)
}

/// A trial that stayed invalid for the bed's reasons (the generator
/// offered short, fell behind or slipped; the sink side dropped; the
/// counters disagreed): it says nothing of the DuT at its rate. (More
/// frames received than sent is the DuT's doing: a fail.)
fn bed_bound(t: &TrialRecord) -> bool {
    !t.invalid.is_empty() && t.received <= t.sent
}

/// A valid trial that lost at most the PDR's loss and duplicated nothing.
fn passes_pdr(t: &TrialRecord, cfg: &Rfc2544Config) -> bool {
    t.sent > 0
        && t.invalid.is_empty()
        && t.verify.duplicates == 0
        && t.loss_ratio <= cfg.pdr_loss.max(cfg.loss_tolerance)
}

/// The rate a trial was asked for (its offered rate at top speed).
fn rate_of(t: &TrialRecord) -> f64 {
    t.requested_pps.unwrap_or(t.offered_pps)
}

/// The partial-drop rate of a finished NDR search `s`, as MLRsearch finds
/// both in one search: its bounds come from the trials the search made,
/// the upper one first: the lowest rate whose valid trial lost more than
/// `pdr_loss` (a fail below a pass is not ignored: the lower bound is the
/// highest pass under it, at least the NDR); then it bisects between them
/// to the resolution. So PDR >= NDR always. A trial that stayed invalid
/// is the bed's bound, not a fail; the PDR is a lower bound when no valid
/// trial above it failed.
fn partial_drop_rate(
    cfg: &Rfc2544Config,
    t: &mut dyn Trials,
    r: &mut SizeResult,
    s: &mut Search,
    rep: usize,
    progress: Progress,
) -> Result<(), String> {
    let size = r.frame_size;
    let counted = |i: &&usize| !r.trials[**i].repeated;
    // The lowest fail of the DuT's (valid trials), and of the bed's.
    let lowest = |bed: bool| {
        s.trials
            .iter()
            .filter(counted)
            .map(|&i| &r.trials[i])
            .filter(|x| !passes_pdr(x, cfg) && bed_bound(x) == bed)
            .map(rate_of)
            .filter(|&c| c > s.throughput_pps)
            .reduce(f64::min)
    };
    let (dut_hi, bed_hi) = (lowest(false), lowest(true));
    let mut hi = match (dut_hi, bed_hi) {
        (Some(d), Some(b)) => Some(d.min(b)),
        (d, b) => d.or(b),
    };
    let mut hi_bed = hi.is_some() && hi == bed_hi && bed_hi != dut_hi;
    let under = hi.unwrap_or(f64::INFINITY);
    let mut lo = s
        .trials
        .iter()
        .filter(counted)
        .map(|&i| &r.trials[i])
        .filter(|x| passes_pdr(x, cfg))
        .map(rate_of)
        .filter(|&c| c < under)
        .fold(s.throughput_pps, f64::max);
    let floor = (r.max_offered_pps * 1e-4).max(100.0);
    let mut n = 0;
    while let Some(h) = hi {
        if t.stopped() || h - lo <= cfg.resolution * h || h < floor || n >= cfg.max_search_trials {
            break;
        }
        n += 1;
        let c = (lo + h) / 2.0;
        let label = format!("search {} PDR: {}", rep + 1, mpps(c));
        let ts = spec(size, Procedure::Throughput, Some(c), cfg);
        let rec = valid_trial(t, r, &ts, &label, progress)?;
        let ok = passes_pdr(&rec, cfg);
        let bed = bed_bound(&rec);
        progress(
            size,
            &format!(
                "{label} -> loss {:.4} % {} (PDR: loss <= {} %)",
                rec.loss_ratio * 100.0,
                if ok { "pass" } else { "fail" },
                cfg.pdr_loss * 100.0
            ),
        );
        s.trials.push(r.push(rec));
        if ok {
            lo = c;
        } else {
            hi = Some(c);
            hi_bed = bed;
        }
    }
    s.pdr_pps = lo;
    s.pdr_lowest_fail_pps = hi;
    // No fail above it, or only the bed's: a lower bound (the probe at the
    // top speed lost no more than the PDR's loss: the top speed is ">=").
    s.pdr_generator_limited = lo > 0.0 && (hi.is_none() || hi_bed);
    Ok(())
}

/// Trials of length `d` from `rate` down until one passes `ok` (at most
/// [`FINAL_STEPS`] steps, never under `floor`): after a valid fail, the
/// next rate is under what that trial forwarded (a long trial's
/// forwarding rate is the DuT's sustained one: a short search's result
/// that rested on a ring's depth comes down in a step or two, not a
/// resolution at a time), after an invalid one under what it offered.
/// (The rate that passed, or None; whether a valid trial failed: the DuT
/// itself was found to lose above the result.)
#[allow(clippy::too_many_arguments)]
fn step_down(
    cfg: &Rfc2544Config,
    t: &mut dyn Trials,
    r: &mut SizeResult,
    d: Duration,
    mut rate: f64,
    floor: f64,
    ok: &dyn Fn(&TrialRecord) -> bool,
    what: &str,
    progress: Progress,
) -> Result<(Option<f64>, bool), String> {
    let long = Rfc2544Config {
        trial: d,
        ..cfg.clone()
    };
    let mut dut_failed = false;
    for _ in 0..=FINAL_STEPS {
        if t.stopped() || rate < floor.max(1.0) {
            break;
        }
        let label = format!(
            "final trial {:.0} s at the {what}, {}",
            d.as_secs_f64(),
            mpps(rate)
        );
        let ts = spec(r.frame_size, Procedure::Throughput, Some(rate), &long);
        let rec = valid_trial(t, r, &ts, &label, progress)?;
        let pass = ok(&rec);
        progress(
            r.frame_size,
            &format!(
                "{label} -> loss {:.4} % {}",
                rec.loss_ratio * 100.0,
                if pass { "pass" } else { "fail" }
            ),
        );
        let (fwd, offered, bed) = (rec.forwarded_pps, rec.offered_pps, bed_bound(&rec));
        let i = r.push(rec);
        r.final_trials.push(i);
        if pass {
            return Ok((Some(rate), dut_failed));
        }
        dut_failed |= !bed;
        let under = if bed { offered } else { fwd };
        rate = (rate * (1.0 - cfg.resolution)).min(under * (1.0 - cfg.resolution));
    }
    Ok((None, dut_failed))
}

/// Finish a size after its last search: confirm the reported NDR and PDR
/// with final trials (`final_trial`; FD.io CSIT's final trial, RFC 2544's
/// 60 s: short search trials pass a DuT whose rings absorb their
/// overload), stepping down until a final-length trial passes; then the
/// latency trials at the reported NDR; then look for a standing queue.
pub fn finish_size(
    cfg: &Rfc2544Config,
    t: &mut dyn Trials,
    r: &mut SizeResult,
    progress: Progress,
) -> Result<(), String> {
    if let (Some(d), Some(ndr)) = (cfg.final_trial, r.throughput_pps.filter(|&v| v > 0.0)) {
        r.search_throughput_pps = r.throughput_pps;
        r.search_pdr_pps = r.pdr_pps;
        let pdr = r.pdr_pps.unwrap_or(ndr).max(ndr);
        let first = r.final_trials.len();
        let pass_ndr = |x: &TrialRecord| passes(x, cfg);
        let (got, dut_failed) = step_down(cfg, t, r, d, ndr, 0.0, &pass_ndr, "NDR", progress)?;
        r.ndr_confirmed = Some(got.is_some());
        if let Some(v) = got {
            r.throughput_pps = Some(v);
            r.ndr_trial_s = d.as_secs_f64();
            // A valid final trial lost above it: the DuT's own limit.
            r.generator_limited &= !dut_failed;
        }
        let ndr = r.throughput_pps.unwrap_or(ndr);
        // A final trial already run at the PDR (or within a resolution
        // under it) that lost no more than the PDR's loss confirms it.
        let by_ndr = r.final_trials[first..]
            .iter()
            .map(|&i| &r.trials[i])
            .any(|x| passes_pdr(x, cfg) && rate_of(x) >= pdr * (1.0 - cfg.resolution));
        if by_ndr || pdr <= ndr * (1.0 + cfg.resolution) {
            r.pdr_confirmed = r.ndr_confirmed.map(|c| c || by_ndr);
            if by_ndr || got.is_some() {
                r.pdr_trial_s = d.as_secs_f64();
            }
            r.pdr_pps = Some(pdr.max(ndr));
            r.pdr_generator_limited &= r.generator_limited || by_ndr;
        } else {
            let pass_pdr = |x: &TrialRecord| passes_pdr(x, cfg);
            let floor = if got.is_some() { ndr } else { 0.0 };
            let (gotp, failed) = step_down(cfg, t, r, d, pdr, floor, &pass_pdr, "PDR", progress)?;
            match gotp {
                Some(v) => {
                    r.pdr_confirmed = Some(true);
                    r.pdr_pps = Some(v);
                    r.pdr_trial_s = d.as_secs_f64();
                    r.pdr_generator_limited &= !failed;
                }
                // Stepped to the NDR: the confirmed NDR passes the PDR too.
                None if got.is_some() => {
                    r.pdr_confirmed = Some(true);
                    r.pdr_pps = Some(ndr);
                    r.pdr_trial_s = d.as_secs_f64();
                    r.pdr_generator_limited = r.generator_limited;
                }
                None => r.pdr_confirmed = Some(false),
            }
        }
    }
    if cfg.latency && !t.stopped() {
        latency_at_ndr(cfg, t, r, progress)?;
    }
    r.standing_queue = standing_queue(r, cfg.empty_bed_p50_ns);
    Ok(())
}

/// RFC 2544 26.2: `latency_trials` trials at the reported NDR, merged.
fn latency_at_ndr(
    cfg: &Rfc2544Config,
    t: &mut dyn Trials,
    r: &mut SizeResult,
    progress: Progress,
) -> Result<(), String> {
    let Some(tp) = r.throughput_pps.filter(|&v| v > 0.0) else {
        return Ok(());
    };
    let size = r.frame_size;
    let n = cfg.latency_trials.max(1);
    for k in 0..n {
        if t.stopped() {
            break;
        }
        progress(
            size,
            &if n > 1 {
                format!("latency at {} ({}/{n})", mpps(tp), k + 1)
            } else {
                format!("latency at {}", mpps(tp))
            },
        );
        let mut s = spec(size, Procedure::Latency, Some(tp), cfg);
        s.latency = true;
        let rec = valid_trial(t, r, &s, "latency", progress)?;
        let i = r.push(rec);
        r.latency_trial.get_or_insert(i);
        r.latency_trials.push(i);
    }
    if r.latency_trials.len() > 1 {
        r.latency_merged = Latency::merge(
            r.latency_trials
                .iter()
                .filter_map(|&i| r.trials[i].latency.as_ref()),
        );
    }
    Ok(())
}

/// Frames still arriving this long after the generator stopped, in a
/// trial that lost none: a queue that stood through the trial (the drain
/// polls every 20 ms and waits 10 ms more once everything is in).
pub const STANDING_QUEUE_DRAIN_MS: f64 = 50.0;

/// A p50 latency at the NDR this far above the empty bed's: a queue that
/// stands (the bed's own is ~1 us; a DuT forwarding without a backlog
/// adds tens of us: its batches).
pub const STANDING_QUEUE_P50_NS: f64 = 100_000.0;

/// Signs of a standing queue at the reported NDR ([`SizeResult::standing_queue`]).
fn standing_queue(r: &SizeResult, empty_p50_ns: Option<f64>) -> Option<String> {
    let ndr = r.throughput_pps.filter(|&v| v > 0.0)?;
    let mut why = Vec::new();
    let at_ndr = |x: &&TrialRecord| {
        x.lost == 0 && x.invalid.is_empty() && (rate_of(x) - ndr).abs() <= 1e-6 * ndr
    };
    if let Some(x) = r
        .trials
        .iter()
        .filter(|x| x.procedure == Procedure::Throughput)
        .filter(at_ndr)
        .max_by(|a, b| a.drain_ms.total_cmp(&b.drain_ms))
        .filter(|x| x.drain_ms > STANDING_QUEUE_DRAIN_MS)
    {
        why.push(format!(
            "frames arrived for {:.0} ms after the generator stopped in a passing {:.1} s trial",
            x.drain_ms, x.tx_seconds
        ));
    }
    let base = empty_p50_ns.unwrap_or(0.0);
    if let Some(l) = r
        .latency()
        .filter(|l| l.p50_ns > base + STANDING_QUEUE_P50_NS)
    {
        why.push(format!(
            "p50 latency at the NDR {:.0} us against {:.1} us of the empty bed",
            l.p50_ns / 1e3,
            base / 1e3
        ));
    }
    (!why.is_empty()).then(|| format!("a standing queue: {}", why.join("; ")))
}

/// RFC 2544 26.3: from 100 % of the top speed down in steps until two
/// successive trials lose nothing.
fn frame_loss(
    cfg: &Rfc2544Config,
    t: &mut dyn Trials,
    r: &mut SizeResult,
    progress: Progress,
) -> Result<(), String> {
    let step = cfg.frame_loss_step.clamp(0.01, 1.0);
    let mut zero_run = 0;
    let mut k = 0usize;
    loop {
        let frac = 1.0 - step * k as f64;
        if frac < step / 2.0 || t.stopped() {
            break;
        }
        k += 1;
        let rate = r.max_offered_pps * frac;
        if rate < 1.0 {
            break;
        }
        let label = format!("frame loss at {:.0} %", frac * 100.0);
        let fs = spec(r.frame_size, Procedure::FrameLoss, Some(rate), cfg);
        let rec = valid_trial(t, r, &fs, &label, progress)?;
        let loss = if rec.sent == 0 { 0.0 } else { rec.loss_ratio };
        let (offered, invalid) = (rec.offered_pps, !rec.invalid.is_empty());
        r.push(rec);
        progress(
            r.frame_size,
            &format!(
                "frame loss at {:.0} % ({}): {:.3} %",
                frac * 100.0,
                mpps(rate),
                loss * 100.0
            ),
        );
        r.frame_loss.push((frac, offered, loss, invalid));
        if loss == 0.0 && !invalid {
            zero_run += 1;
            if zero_run == 2 {
                break;
            }
        } else {
            zero_run = 0;
        }
    }
    Ok(())
}

/// Latency at `rate` (the same for every DuT of a run, under the slowest
/// one's throughput), so that DuTs are compared at one load and not each
/// at its own throughput: `latency_trials` trials, merged.
pub fn common_latency(
    cfg: &Rfc2544Config,
    t: &mut dyn Trials,
    r: &mut SizeResult,
    rate: f64,
    progress: Progress,
) -> Result<(), String> {
    let n = cfg.latency_trials.max(1);
    let rate = cfg.capped(r.frame_size, Some(rate)).unwrap_or(rate);
    r.common_latency_pps = Some(rate);
    for k in 0..n {
        if t.stopped() {
            break;
        }
        progress(
            r.frame_size,
            &format!("latency at the common load {} ({}/{n})", mpps(rate), k + 1),
        );
        let mut s = spec(r.frame_size, Procedure::Latency, Some(rate), cfg);
        s.latency = true;
        let rec = valid_trial(t, r, &s, "latency at the common load", progress)?;
        let i = r.push(rec);
        r.common_latency_trials.push(i);
    }
    r.common_latency_merged = Latency::merge(
        r.common_latency_trials
            .iter()
            .filter_map(|&i| r.trials[i].latency.as_ref()),
    );
    Ok(())
}

/// RFC 2544 26.4: the longest burst at the top speed (under a cap: the
/// highest rate offered) forwarded without loss.
fn back_to_back(
    cfg: &Rfc2544Config,
    t: &mut dyn Trials,
    r: &mut SizeResult,
    progress: Progress,
) -> Result<Burst, String> {
    let max = ((r.max_offered_pps * cfg.back_to_back_max.as_secs_f64()) as u64).max(2);
    let burst = |t: &mut dyn Trials,
                 r: &mut SizeResult,
                 n: u64,
                 progress: Progress|
     -> Result<bool, String> {
        let s = TrialSpec {
            frame_size: r.frame_size,
            // Under a cap: at the highest rate its probe offered.
            rate_pps: cfg.cap(r.frame_size).map(|_| r.max_offered_pps),
            frames: Some(n),
            duration: cfg.trial,
            latency: false,
            procedure: Procedure::BackToBack,
        };
        let rec = valid_trial(t, r, &s, &format!("back-to-back {n}"), progress)?;
        let ok =
            rec.sent == n && rec.lost == 0 && rec.invalid.is_empty() && rec.verify.duplicates == 0;
        r.push(rec);
        Ok(ok)
    };
    if burst(t, r, max, progress)? {
        progress(r.frame_size, &format!("back-to-back: {max} frames pass"));
        return Ok(Burst {
            frames: max,
            at_least: true,
        });
    }
    // Geometric bisection: burst lengths span decades (a ring's worth to millions).
    let (mut lo, mut hi) = (0u64, max);
    for _ in 0..40 {
        if t.stopped() || hi - lo <= 1 || (lo > 0 && (hi - lo) as f64 <= 0.01 * hi as f64) {
            break;
        }
        let c = if lo == 0 {
            (hi / 16).max(1)
        } else {
            (((lo as f64) * (hi as f64)).sqrt() as u64).clamp(lo + 1, hi - 1)
        };
        if burst(t, r, c, progress)? {
            lo = c;
        } else {
            hi = c;
        }
    }
    progress(r.frame_size, &format!("back-to-back: {lo} frames"));
    Ok(Burst {
        frames: lo,
        at_least: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A DuT that forwards at most `capacity` pps with a queue of `queue`
    /// frames, fed by a generator with top speed `gen`.
    /// Throughput searches only (no latency, frame loss or back-to-back).
    fn search_only(sizes: Vec<u32>, repetitions: usize) -> Rfc2544Config {
        Rfc2544Config {
            sizes,
            latency: false,
            frame_loss_sizes: vec![],
            back_to_back_sizes: vec![],
            repetitions,
            final_trial: None,
            ..Default::default()
        }
    }

    struct Model {
        capacity: f64,
        queue: f64,
        gen: f64,
        trials: usize,
    }

    impl Model {
        fn new(capacity: f64, queue: f64, gen: f64) -> Model {
            Model {
                capacity,
                queue,
                gen,
                trials: 0,
            }
        }
    }

    impl Trials for Model {
        fn trial(&mut self, s: &TrialSpec) -> Result<TrialRecord, String> {
            self.trials += 1;
            let rate = s.rate_pps.unwrap_or(self.gen).min(self.gen);
            let frames = s.frames.unwrap_or((rate * s.duration.as_secs_f64()) as u64);
            let secs = frames as f64 / rate;
            // Frames beyond capacity * time + the queue are lost.
            let can = (self.capacity * secs + self.queue).floor() as u64;
            let received = frames.min(can);
            let mut rec = TrialRecord::new(s, frames, received, secs);
            rec.kernel.gen_iface_tx = frames;
            rec.kernel.dut_in_rx = frames;
            rec.kernel.dut_out_tx = received;
            rec.kernel.sink_iface_rx = received;
            rec.kernel.judge(frames, received);
            if s.latency {
                let ns = 1000.0 * (1 + self.trials % 3) as f64;
                rec.latency = Some(Latency {
                    samples: 10,
                    min_ns: ns,
                    mean_ns: ns,
                    p50_ns: ns,
                    max_ns: ns,
                    histogram: vec![(ns, 10)],
                    ..Default::default()
                });
            }
            rec.validate(s);
            Ok(rec)
        }
    }

    /// The model, but the throughput trials numbered (from 0) where `hit`
    /// holds lose `lost(sent)` more frames, with the generator's schedule
    /// `late_us` late (a stall of the machine, a slip of the generator).
    struct Perturbed {
        m: Model,
        hit: Box<dyn Fn(usize) -> bool>,
        lost: fn(u64) -> u64,
        late_us: f64,
        n: usize,
    }

    impl Perturbed {
        fn new(hit: impl Fn(usize) -> bool + 'static, lost: fn(u64) -> u64) -> Perturbed {
            Perturbed {
                m: Model::new(1e6, 0.0, 4e6),
                hit: Box::new(hit),
                lost,
                late_us: 0.0,
                n: 0,
            }
        }

        /// The generator's schedule slips 10 ms and 1000 frames are lost
        /// at the throughput trials numbered in `at`.
        fn slipping(at: Vec<usize>) -> Perturbed {
            Perturbed {
                late_us: 10_000.0,
                ..Perturbed::new(move |k| at.contains(&k), |_| 1000)
            }
        }
    }

    impl Trials for Perturbed {
        fn trial(&mut self, s: &TrialSpec) -> Result<TrialRecord, String> {
            let mut rec = self.m.trial(s)?;
            if s.procedure == Procedure::Throughput {
                if (self.hit)(self.n) {
                    rec.gen_late_max_us = rec.gen_late_max_us.max(self.late_us);
                    rec.received = rec.received.saturating_sub((self.lost)(rec.sent));
                    rec.lost = rec.sent - rec.received;
                    rec.loss_ratio = rec.lost as f64 / rec.sent as f64;
                    rec.kernel.dut_out_tx = rec.received;
                    rec.kernel.sink_iface_rx = rec.received;
                    rec.kernel.judge(rec.sent, rec.received);
                    rec.validate(s);
                }
                self.n += 1;
            }
            Ok(rec)
        }
    }

    #[test]
    fn a_trial_lost_to_a_slipped_schedule_is_repeated() {
        // Strict: only the slip repeats (a slip's loss is small as well).
        let cfg = Rfc2544Config {
            strict: true,
            ..search_only(vec![64], 1)
        };
        let clean = run(&cfg, &mut Model::new(1e6, 0.0, 4e6), &mut |_, _| {}).unwrap();
        // Slips at the 2nd and the 5th throughput trial.
        let mut t = Perturbed::slipping(vec![1, 4]);
        let r = run(&cfg, &mut t, &mut |_, _| {}).unwrap();
        assert_eq!(r[0].throughput_pps, clean[0].throughput_pps);
        let repeated: Vec<&TrialRecord> = r[0].trials.iter().filter(|x| x.repeated).collect();
        assert_eq!(repeated.len(), 2);
        assert!(repeated.iter().all(|x| x.lost >= 1000));
        // Repeated trials are kept but are not part of the search.
        for &i in &r[0].searches[0].trials {
            assert!(!r[0].trials[i].repeated);
        }
        // Two slips in a row: both repeated, the third trial counts.
        let mut t = Perturbed::slipping(vec![0, 1]);
        let r = run(&cfg, &mut t, &mut |_, _| {}).unwrap();
        assert_eq!(r[0].trials.iter().filter(|x| x.repeated).count(), 2);
        assert_eq!(r[0].throughput_pps, clean[0].throughput_pps);
        // Three: the last is still invalid, and counts as a fail.
        let mut t = Perturbed::slipping(vec![0, 1, 2]);
        let r = run(&cfg, &mut t, &mut |_, _| {}).unwrap();
        assert_eq!(r[0].trials.iter().filter(|x| x.repeated).count(), 2);
        let counted = &r[0].trials[r[0].searches[0].trials[1]];
        assert!(!counted.invalid.is_empty() && !counted.repeated);
        assert!(r[0].throughput_pps.unwrap() < clean[0].throughput_pps.unwrap());
        // A slip on a trial that lost nothing is invalid too: never a pass.
        let mut t = Perturbed {
            late_us: 10_000.0,
            ..Perturbed::new(|k| k == 0, |_| 0)
        };
        let r = run(&cfg, &mut t, &mut |_, _| {}).unwrap();
        let first = &r[0].trials[1];
        assert!(first.repeated && first.lost == 0, "{first:?}");
        assert!(
            first.invalid[0].contains("fell 10.0 ms behind"),
            "{:?}",
            first.invalid
        );
    }

    #[test]
    fn a_latency_trial_mostly_gaps_is_invalid() {
        let spec = TrialSpec {
            latency: true,
            frames: Some(20_000),
            ..spec(64, Procedure::Latency, Some(1e5), &search_only(vec![64], 1))
        };
        // 0.2 s of frames at the rate, the schedule slipped 15 ms: valid.
        let mut rec = TrialRecord::new(&spec, 20_000, 20_000, 0.2);
        rec.kernel.agrees = true;
        rec.gen_slipped_us = 15_000.0;
        rec.gen_slips = 7;
        rec.validate(&spec);
        assert!(rec.invalid.is_empty(), "{:?}", rec.invalid);
        // 25 ms of gaps: more than a tenth of the trial.
        rec.gen_slipped_us = 25_000.0;
        rec.validate(&spec);
        assert_eq!(rec.invalid.len(), 1, "{:?}", rec.invalid);
        assert!(
            rec.invalid[0].contains("slipped 25.0 ms in 7 gaps"),
            "{:?}",
            rec.invalid
        );
    }

    /// Every other throughput trial loses 200 frames (a stall of the
    /// machine), at any rate.
    fn stalling() -> Perturbed {
        Perturbed::new(|k| k.is_multiple_of(2), |_| 200)
    }

    #[test]
    fn a_small_loss_is_repeated_once_unless_strict() {
        let cfg = search_only(vec![64], 1);
        let clean = run(&cfg, &mut Model::new(1e6, 0.0, 4e6), &mut |_, _| {}).unwrap()[0]
            .throughput_pps
            .unwrap();
        let mut t = stalling();
        let r = run(&cfg, &mut t, &mut |_, _| {}).unwrap();
        // The stalled trials far from the result were repeated, and their
        // repeats counted; one near it may end the search a few
        // resolutions low (SMALL_LOSS_SPAN).
        let tp = r[0].throughput_pps.unwrap();
        assert!(
            tp <= clean && tp >= clean * (1.0 - 2.0 * SMALL_LOSS_SPAN * cfg.resolution),
            "{tp} vs {clean}"
        );
        // The first throughput trial (stalled, nothing passed yet) was.
        let first = r[0]
            .trials
            .iter()
            .find(|x| x.procedure == Procedure::Throughput)
            .unwrap();
        assert!(first.repeated);
        for &i in &r[0].searches[0].trials[1..] {
            assert!(!r[0].trials[i].repeated);
        }
        // Strict: the first stalled trial below the capacity ends lower.
        let strict = Rfc2544Config {
            strict: true,
            ..search_only(vec![64], 1)
        };
        let mut t = stalling();
        let r = run(&strict, &mut t, &mut |_, _| {}).unwrap();
        assert!(r[0].throughput_pps.unwrap() < clean * 0.9);
        assert_eq!(r[0].trials.iter().filter(|x| x.repeated).count(), 0);
        // A rate above the capacity fails twice: the result stays within
        // the resolution under the capacity (see the test below).
        assert!(clean <= 1e6 && clean >= 1e6 * (1.0 - cfg.resolution));
    }

    #[test]
    fn search_finds_the_capacity_within_the_resolution() {
        for capacity in [0.3e6, 0.671e6, 1.0e6, 3.8e6] {
            let mut m = Model::new(capacity, 256.0, 6e6);
            let cfg = search_only(vec![64], 1);
            let r = run(&cfg, &mut m, &mut |_, _| {}).unwrap();
            let tp = r[0].throughput_pps.unwrap();
            // The queue lets a little more than the capacity pass in 1 s.
            let truth = capacity + 256.0;
            assert!(tp <= truth, "{tp} above {truth}");
            assert!(
                tp >= truth * (1.0 - cfg.resolution),
                "{tp} too far below {truth}"
            );
            // The NDR search and the PDR's bisection, each within its budget.
            assert!(
                m.trials <= 1 + 2 * cfg.max_search_trials,
                "{} trials",
                m.trials
            );
            let s = &r[0].searches[0];
            let fail = s.lowest_fail_pps.unwrap();
            assert!(fail > truth && fail - tp <= cfg.resolution * fail + 1.0);
            assert!(!r[0].generator_limited);
            assert_eq!(r[0].kernel_disagreements, 0);
        }
    }

    /// One search gives both rates: the PDR (loss <= 0.5 %) where the
    /// model loses 0.5 %, the NDR where it loses nothing, PDR >= NDR.
    #[test]
    fn one_search_finds_the_ndr_and_the_pdr() {
        for capacity in [0.3e6, 1.0e6, 3.8e6] {
            let mut m = Model::new(capacity, 256.0, 6e6);
            let cfg = search_only(vec![64], 1);
            let r = run(&cfg, &mut m, &mut |_, _| {}).unwrap();
            let (ndr, pdr) = (r[0].throughput_pps.unwrap(), r[0].pdr_pps.unwrap());
            // 1 s trials: c frames, capacity + 256 forwarded.
            let truth = (capacity + 256.0) / (1.0 - cfg.pdr_loss);
            assert!(pdr >= ndr, "PDR {pdr} under NDR {ndr}");
            assert!(pdr <= truth, "PDR {pdr} above {truth}");
            assert!(
                pdr >= truth * (1.0 - cfg.resolution),
                "PDR {pdr} too far below {truth}"
            );
            let s = &r[0].searches[0];
            let fail = s.pdr_lowest_fail_pps.unwrap();
            assert!(fail > truth && fail - pdr <= cfg.resolution * fail + 1.0);
            // Every trial above the PDR lost more than 0.5 %, none under it.
            for &i in &s.trials {
                let t = &r[0].trials[i];
                let c = rate_of(t);
                assert_eq!(t.loss_ratio <= cfg.pdr_loss, c <= truth, "{c}: {t:?}");
            }
        }
        // A DuT faster than the generator: both are the top speed.
        let mut m = Model::new(9e6, 256.0, 6e6);
        let r = run(&search_only(vec![64], 1), &mut m, &mut |_, _| {}).unwrap();
        assert_eq!(r[0].pdr_pps, r[0].throughput_pps);
        assert!(r[0].generator_limited);
    }

    /// A DuT that loses 1 % of the frames above 100 kpps (sporadic stalls):
    /// the search must still get there within its trial budget.
    struct Lossy {
        trials: usize,
    }
    impl Trials for Lossy {
        fn trial(&mut self, s: &TrialSpec) -> Result<TrialRecord, String> {
            self.trials += 1;
            let rate = s.rate_pps.unwrap_or(3e6);
            let frames = s.frames.unwrap_or(rate as u64);
            let lost = if rate > 100e3 { frames / 100 } else { 0 };
            let mut rec = TrialRecord::new(s, frames, frames - lost, frames as f64 / rate);
            rec.kernel.gen_iface_tx = frames;
            rec.kernel.sink_iface_rx = frames - lost;
            rec.kernel.judge(frames, frames - lost);
            Ok(rec)
        }
    }

    /// A DuT that forwards 8 % more at overload than it can without loss
    /// (as the Linux bridge does): the search's first trial, just under
    /// the overload forwarding rate, loses ~7 %.
    struct Overloaded {
        capacity: f64,
        trials: usize,
    }
    impl Trials for Overloaded {
        fn trial(&mut self, s: &TrialSpec) -> Result<TrialRecord, String> {
            self.trials += 1;
            let rate = s.rate_pps.unwrap_or(3e6);
            let frames = s.frames.unwrap_or((rate * s.duration.as_secs_f64()) as u64);
            let secs = frames as f64 / rate;
            let cap = if rate > 1.5 * self.capacity {
                1.08 * self.capacity
            } else {
                self.capacity
            };
            let received = frames.min((cap * secs) as u64);
            let mut rec = TrialRecord::new(s, frames, received, secs);
            rec.kernel.gen_iface_tx = frames;
            rec.kernel.dut_in_rx = frames;
            rec.kernel.dut_out_tx = received;
            rec.kernel.sink_iface_rx = received;
            rec.kernel.judge(frames, received);
            rec.validate(s);
            Ok(rec)
        }
    }

    #[test]
    fn after_the_first_fail_the_search_aims_under_what_it_forwarded() {
        let mut m = Overloaded {
            capacity: 1e6,
            trials: 0,
        };
        // The NDR's trials alone (a PDR at the NDR's loss adds none).
        let cfg = Rfc2544Config {
            pdr_loss: 0.0,
            ..search_only(vec![64], 1)
        };
        let r = run(&cfg, &mut m, &mut |_, _| {}).unwrap();
        let tp = r[0].throughput_pps.unwrap();
        assert!((1e6 * (1.0 - cfg.resolution)..=1e6).contains(&tp), "{tp}");
        // Probe, the fail, a pass just under 1 Mpps, then bisection within
        // a few % (halving after the fail took 10 trials).
        assert!(m.trials <= 7, "{} trials", m.trials);
    }

    #[test]
    fn search_steps_down_fast_when_every_rate_loses_a_little() {
        let mut m = Lossy { trials: 0 };
        let cfg = search_only(vec![64], 1);
        let r = run(&cfg, &mut m, &mut |_, _| {}).unwrap();
        let tp = r[0].throughput_pps.unwrap();
        assert!((100e3 * 0.97..=100e3).contains(&tp), "{tp}");
    }

    #[test]
    fn generator_limited_when_the_top_speed_passes() {
        let mut m = Model::new(10e6, 0.0, 2e6);
        let cfg = search_only(vec![1518], 1);
        let r = run(&cfg, &mut m, &mut |_, _| {}).unwrap();
        assert!(r[0].generator_limited);
        assert_eq!(r[0].throughput_pps, Some(2e6));
        assert_eq!(m.trials, 1);
    }

    /// A cap bounds every trial: the probe, the search, the latency, the
    /// frame loss and the back-to-back bursts. A DuT faster than the cap
    /// is a bound at the cap; a slower one is searched under it; a cap
    /// above the generator's top speed leaves the generator the limit.
    #[test]
    fn a_rate_cap_bounds_every_trial() {
        let cap = 1e6;
        let cfg = Rfc2544Config {
            sizes: vec![64, 1518],
            frame_loss_sizes: vec![64],
            back_to_back_sizes: vec![64],
            back_to_back_trials: 1,
            max_rate: Some(MaxRate::Pps(cap)),
            ..Default::default()
        };
        for dut in [10e6, 0.5e6] {
            let r = run(&cfg, &mut Model::new(dut, 0.0, 4e6), &mut |_, _| {}).unwrap();
            for s in &r {
                for t in &s.trials {
                    let asked = t.requested_pps.expect("every trial paced");
                    assert!(asked <= cap && t.offered_pps <= cap, "{t:?}");
                }
                assert_eq!(s.rate_capped, dut > cap);
                assert_eq!(s.generator_limited, dut > cap);
                assert!(s.max_offered_pps <= cap);
            }
            let procs: Vec<Procedure> = r[0].trials.iter().map(|t| t.procedure).collect();
            for p in [
                Procedure::Latency,
                Procedure::FrameLoss,
                Procedure::BackToBack,
            ] {
                assert!(procs.contains(&p), "{p:?} in {procs:?}");
            }
            let tp = r[0].throughput_pps.unwrap();
            if dut > cap {
                assert_eq!(tp, cap);
                assert!(size_notes(&r[0])[0].contains("rate cap"));
            } else {
                assert!((0.49e6..=0.5e6).contains(&tp), "{tp}");
            }
        }
        // Above the generator's top speed: the probe offers what it can,
        // valid, and a pass is the generator's limit.
        let high = Rfc2544Config {
            max_rate: Some(MaxRate::Pps(8e6)),
            ..search_only(vec![64], 1)
        };
        let r = run(&high, &mut Model::new(10e6, 0.0, 4e6), &mut |_, _| {}).unwrap();
        assert!(r[0].trials[0].invalid.is_empty(), "{:?}", r[0].trials[0]);
        assert!(r[0].generator_limited && !r[0].rate_capped);
        assert_eq!(r[0].throughput_pps, Some(4e6));
    }

    #[test]
    fn bit_rate_caps_are_frame_rates_per_size() {
        let l1 = MaxRate::Bps { bps: 1e9, l1: true };
        assert!((l1.pps(64) - 1e9 / 8.0 / 84.0).abs() < 1e-6);
        assert!((l1.pps(1518) - 1e9 / 8.0 / 1538.0).abs() < 1e-6);
        let l2 = MaxRate::Bps {
            bps: 1e9,
            l1: false,
        };
        assert!((l2.pps(64) - 1e9 / 8.0 / 64.0).abs() < 1e-6);
        let imix = crate::frame_size::IMIX;
        assert!((l2.pps(imix) - 1e9 / 8.0 / crate::frame_size::IMIX_MEAN_BYTES).abs() < 1e-6);
        assert_eq!(MaxRate::Pps(5.0).pps(1518), 5.0);
        let cfg = Rfc2544Config {
            max_rate: Some(MaxRate::Pps(100.0)),
            ..Default::default()
        };
        assert_eq!(cfg.capped(64, None), Some(100.0));
        assert_eq!(cfg.capped(64, Some(50.0)), Some(50.0));
        assert_eq!(cfg.capped(64, Some(500.0)), Some(100.0));
        assert_eq!(Rfc2544Config::default().capped(64, None), None);
    }

    #[test]
    fn repetitions_give_median_min_max_and_a_spread() {
        let cfg = search_only(vec![64, 1518], 3);
        let mut m = Model::new(1e6, 0.0, 4e6);
        let mut order = Vec::new();
        let r = run(&cfg, &mut m, &mut |size, what: &str| {
            if let Some(w) = what.strip_prefix("search ") {
                let rep = w.split(':').next().unwrap().to_string();
                if order.last() != Some(&(size, rep.clone())) {
                    order.push((size, rep));
                }
            }
        })
        .unwrap();
        // All sizes' first searches, then the second ones, then the third.
        let want: Vec<(u32, String)> = ["1", "2", "3"]
            .iter()
            .flat_map(|rep| [64u32, 1518].map(|s| (s, rep.to_string())))
            .collect();
        assert_eq!(order, want);
        for s in &r {
            assert_eq!(s.searches.len(), 3);
            let mut v: Vec<f64> = s.searches.iter().map(|x| x.throughput_pps).collect();
            v.sort_by(f64::total_cmp);
            assert_eq!(s.throughput_pps, Some(v[1]));
            assert_eq!(s.throughput_min_pps, Some(v[0]));
            assert_eq!(s.throughput_max_pps, Some(v[2]));
            for x in v {
                assert!((0.99e6..=1e6).contains(&x), "{x}");
            }
        }
        // A deterministic DuT: every search within the resolution.
        let sp = repeat_spread(&r).unwrap();
        assert!(sp < 0.05, "{sp}");
    }

    #[test]
    fn a_final_trial_confirms_or_steps_down() {
        // A queue of 20 000 frames: 0.1 s trials pass up to 1.2 Mpps, 1 s
        // trials up to 1.02.
        let cfg = Rfc2544Config {
            strict: true,
            trial: Duration::from_millis(100),
            resolution: 0.05,
            ..search_only(vec![64], 1)
        };
        let short = run(&cfg, &mut Model::new(1e6, 20_000.0, 4e6), &mut |_, _| {}).unwrap();
        assert!(
            short[0].throughput_pps.unwrap() > 1.1e6,
            "{:?}",
            short[0].searches
        );
        assert_eq!(short[0].ndr_confirmed, None);
        assert_eq!(short[0].ndr_trial_s, 0.1);
        let fin = Rfc2544Config {
            final_trial: Some(Duration::from_secs(1)),
            ..cfg.clone()
        };
        let r = run(&fin, &mut Model::new(1e6, 20_000.0, 4e6), &mut |_, _| {}).unwrap();
        assert_eq!(r[0].ndr_confirmed, Some(true), "{:?}", r[0].final_trials);
        assert_eq!(r[0].ndr_trial_s, 1.0);
        let tp = r[0].throughput_pps.unwrap();
        assert!(tp <= 1.02e6 && tp > 0.9e6, "{tp}");
        assert!(r[0].search_throughput_pps.unwrap() > 1.1e6);
        // The passing final trial is the last of them, at the final length.
        let last = &r[0].trials[*r[0].final_trials.last().unwrap()];
        assert_eq!(last.sent, (tp * 1.0).round() as u64);
        assert!(size_notes(&r[0]).iter().any(|n| n.contains("stepped down")));
        // A DuT with no queue: confirmed at the result at once.
        let r = run(&fin, &mut Model::new(1e6, 0.0, 4e6), &mut |_, _| {}).unwrap();
        assert_eq!(r[0].ndr_confirmed, Some(true));
        assert_eq!(r[0].final_trials.len(), 1);
        assert!(r[0].throughput_pps.unwrap() > 0.95e6);
    }

    /// The ring that absorbs a short trial's overload: 0.2 s search trials
    /// pass far above the DuT's sustained rate, and the default final
    /// trial brings the reported NDR (and PDR) down to it, within the
    /// resolution, in a few steps (each under what the last one forwarded).
    #[test]
    fn a_ring_that_absorbs_short_trials_does_not_set_the_ndr() {
        let cfg = Rfc2544Config {
            trial: Duration::from_millis(200),
            ..search_only(vec![64], 2)
        };
        // 0.17 Mpps sustained, 30 000 frames of ring: 0.2 s trials pass
        // up to 0.32 Mpps.
        let model = || Model::new(170e3, 30_000.0, 4e6);
        let short = run(&cfg, &mut model(), &mut |_, _| {}).unwrap();
        assert!(short[0].throughput_pps.unwrap() > 0.3e6, "{short:?}");
        let fin = Rfc2544Config {
            final_trial: Some(DEFAULT_FINAL_TRIAL),
            ..cfg
        };
        let mut m = model();
        let r = run(&fin, &mut m, &mut |_, _| {}).unwrap();
        let (ndr, pdr) = (r[0].throughput_pps.unwrap(), r[0].pdr_pps.unwrap());
        // Within the resolution (2 steps at most) of the sustained rate
        // plus what the ring adds over 10 s (3 kpps).
        let top = 170e3 + 30_000.0 / 10.0;
        assert!(
            ndr <= top && ndr >= top * (1.0 - 2.0 * fin.resolution),
            "{ndr}"
        );
        assert!(
            pdr >= ndr && pdr <= top / (1.0 - fin.pdr_loss) * 1.001,
            "{pdr}"
        );
        assert_eq!(r[0].ndr_confirmed, Some(true));
        assert_eq!(r[0].pdr_confirmed, Some(true));
        assert_eq!((r[0].ndr_trial_s, r[0].pdr_trial_s), (10.0, 10.0));
        assert!(r[0].final_trials.len() <= 2 * (FINAL_STEPS + 1));
        let steps_ndr = r[0]
            .final_trials
            .iter()
            .filter(|&&i| r[0].trials[i].loss_ratio > 0.0)
            .count();
        assert!(steps_ndr <= 4, "{steps_ndr} failing final trials");
    }

    #[test]
    fn further_searches_start_from_scratch() {
        let cfg = Rfc2544Config {
            strict: true,
            ..search_only(vec![64], 1)
        };
        let mut m = Model::new(1e6, 0.0, 4e6);
        let mut r = run(&cfg, &mut m, &mut |_, _| {}).unwrap();
        let first_trials = m.trials;
        // The same DuT: a search of its own (its own probe, as many trials).
        m.trials = 0;
        let n0 = r[0].trials.len();
        let s = repetition(&cfg, &mut m, &mut r[0], 1, &mut |_, _| {}).unwrap();
        assert!(
            s.throughput_pps <= 1e6 && s.throughput_pps >= 0.98e6,
            "{s:?}"
        );
        assert_eq!(r[0].trials[n0].procedure, Procedure::Probe);
        assert_eq!(s.trials[0], n0, "the search's own probe");
        assert_eq!(m.trials, first_trials, "the same search again");
        // The capacity moves: each search finds it without the earlier result.
        for cap in [0.5e6, 2e6] {
            m.capacity = cap;
            let s = repetition(&cfg, &mut m, &mut r[0], 2, &mut |_, _| {}).unwrap();
            assert!(
                s.throughput_pps <= cap && s.throughput_pps >= cap * 0.98,
                "{cap}: {s:?}"
            );
        }
    }

    #[test]
    fn repetitions_of_a_generator_limited_dut_run_their_own_top_speed_trial() {
        let mut m = Model::new(10e6, 0.0, 2e6);
        let cfg = search_only(vec![64], 2);
        let r = run(&cfg, &mut m, &mut |_, _| {}).unwrap();
        assert_eq!(m.trials, 2);
        assert_eq!(r[0].searches.len(), 2);
        assert!(r[0].generator_limited);
        assert_eq!(r[0].searches[1].trials, vec![1]);
        assert_eq!(r[0].trials[1].procedure, Procedure::Probe);
    }

    /// A DuT whose loss ratio is `loss(rate)`, behind a generator whose
    /// top speed is `top` and whose pacing keeps at most `paced` (a paced
    /// trial asking for more leaves at `paced`: offered short, invalid).
    struct Curve {
        loss: fn(f64) -> f64,
        top: f64,
        paced: f64,
        trials: usize,
    }
    impl Trials for Curve {
        fn trial(&mut self, s: &TrialSpec) -> Result<TrialRecord, String> {
            self.trials += 1;
            let rate = match s.rate_pps {
                Some(r) => r.min(self.paced),
                None => self.top,
            };
            let frames = s.frames.unwrap_or((rate * s.duration.as_secs_f64()) as u64);
            let lost = (frames as f64 * (self.loss)(rate)).round() as u64;
            let received = frames - lost;
            let mut rec = TrialRecord::new(s, frames, received, frames as f64 / rate);
            rec.kernel.gen_iface_tx = frames;
            rec.kernel.dut_in_rx = frames;
            rec.kernel.dut_out_tx = received;
            rec.kernel.sink_iface_rx = received;
            rec.kernel.judge(frames, received);
            rec.validate(s);
            Ok(rec)
        }
    }

    /// A generator capped below the DuT: every repetition's result is a
    /// lower bound, NDR and PDR, also when the probe at the top speed
    /// fails but the paced trials above the result are ones the generator
    /// could not offer (they were fails of the DuT before).
    #[test]
    fn a_generator_below_the_dut_gives_bounds_in_every_repetition() {
        let cfg = search_only(vec![64], 3);
        // Probe passes: the top speed is the result, three times.
        let r = run(&cfg, &mut Model::new(10e6, 0.0, 2e6), &mut |_, _| {}).unwrap();
        assert!(r[0]
            .searches
            .iter()
            .all(|s| s.generator_limited && s.pdr_generator_limited));
        assert!(r[0].generator_limited && r[0].pdr_generator_limited);
        // The probe's burst loses (a DuT of 3 Mpps behind a 4 Mpps burst),
        // but the pacer keeps only 1.5 Mpps: no valid trial fails.
        let mut c = Curve {
            loss: |r| if r > 3e6 { 0.2 } else { 0.0 },
            top: 4e6,
            paced: 1.5e6,
            trials: 0,
        };
        let r = run(&cfg, &mut c, &mut |_, _| {}).unwrap();
        for s in &r[0].searches {
            assert!(s.generator_limited, "{s:?}");
            // (A trial offered within OFFERED_TOLERANCE of its rate counts.)
            let most = 1.5e6 / (1.0 - OFFERED_TOLERANCE);
            assert!(
                s.throughput_pps <= most && s.throughput_pps > 1.4e6,
                "{s:?}"
            );
        }
        assert!(r[0].generator_limited && r[0].pdr_generator_limited);
        // A DuT that does fail under the pacer's limit: no bound.
        c.loss = |r| if r > 1e6 { 0.2 } else { 0.0 };
        let r = run(&cfg, &mut c, &mut |_, _| {}).unwrap();
        assert!(!r[0].generator_limited, "{:?}", r[0].searches);
        assert!(r[0].throughput_pps.unwrap() <= 1e6);
    }

    /// A probe that loses no more than the PDR's loss: the PDR is the top
    /// speed, a lower bound; the NDR is searched and is exact.
    #[test]
    fn a_pdr_at_the_top_speed_is_a_bound() {
        let cfg = search_only(vec![64], 1);
        let mut c = Curve {
            loss: |r| if r > 1.9e6 { 0.002 } else { 0.0 },
            top: 2e6,
            paced: f64::INFINITY,
            trials: 0,
        };
        let r = run(&cfg, &mut c, &mut |_, _| {}).unwrap();
        assert_eq!(r[0].pdr_pps, Some(2e6));
        assert!(r[0].pdr_generator_limited);
        assert!(!r[0].generator_limited);
        assert!(r[0].throughput_pps.unwrap() <= 1.9e6);
    }

    /// MLRsearch's order: the lowest fail first. A fail of the PDR's loss
    /// below a rate that passed it (a DuT whose loss is not monotonic, or
    /// a noisy trial) bounds the PDR; it is not skipped over.
    #[test]
    fn the_pdr_takes_the_lowest_fail_first() {
        let cfg = search_only(vec![64], 1);
        let mut r = SizeResult::new(64);
        r.max_offered_pps = 4e6;
        let mut c = Curve {
            loss: |x| {
                if (0.9e6..0.95e6).contains(&x) {
                    0.01
                } else {
                    0.0
                }
            },
            top: 4e6,
            paced: f64::INFINITY,
            trials: 0,
        };
        let mut s = Search::top_speed(0.8e6, 0);
        s.trials.clear();
        s.generator_limited = false;
        for rate in [0.8e6, 0.92e6, 1.0e6] {
            let rec = c
                .trial(&spec(64, Procedure::Throughput, Some(rate), &cfg))
                .unwrap();
            s.trials.push(r.push(rec));
        }
        partial_drop_rate(&cfg, &mut c, &mut r, &mut s, 0, &mut |_, _| {}).unwrap();
        assert!(s.pdr_pps < 0.92e6 && s.pdr_pps >= 0.8e6, "{s:?}");
        assert_eq!(s.pdr_lowest_fail_pps.map(|h| h <= 0.92e6), Some(true));
        assert!(!s.pdr_generator_limited);
    }

    /// An empty search (nothing passed) is not half of a median.
    #[test]
    fn an_empty_search_is_its_own_result() {
        let cfg = search_only(vec![64], 2);
        let mut r = SizeResult::new(64);
        let mut empty = Search::top_speed(0.0, 0);
        empty.generator_limited = false;
        r.searches.push(empty);
        let mut found = Search::top_speed(1e6, 0);
        found.generator_limited = false;
        r.searches.push(found);
        r.summarise(&cfg);
        assert_eq!(r.throughput_pps, Some(1e6));
        assert_eq!(r.empty_searches, 1);
        assert!(size_notes(&r)
            .iter()
            .any(|n| n.contains("no rate without loss")));
    }

    /// Every latency trial is checked for loss, not only the first.
    #[test]
    fn every_latency_trial_is_checked_for_loss() {
        let cfg = Rfc2544Config {
            latency: true,
            latency_trials: 3,
            ..search_only(vec![64], 1)
        };
        let mut r = run(&cfg, &mut Model::new(1e6, 0.0, 4e6), &mut |_, _| {}).unwrap();
        assert!(size_notes(&r[0])
            .iter()
            .all(|n| !n.contains("latency trial")));
        let third = r[0].latency_trials[2];
        r[0].trials[third].lost = 7;
        let notes = size_notes(&r[0]);
        assert!(
            notes
                .iter()
                .any(|n| n.contains("1 of 3 latency trial(s) lost frames")),
            "{notes:?}"
        );
    }

    /// The latency is measured at the reported NDR, after the last search
    /// and the final trial: the rate of the final figure.
    #[test]
    fn latency_runs_at_the_reported_ndr() {
        let cfg = Rfc2544Config {
            latency: true,
            final_trial: Some(Duration::from_secs(1)),
            trial: Duration::from_millis(100),
            ..search_only(vec![64], 3)
        };
        let r = run(&cfg, &mut Model::new(1e6, 20_000.0, 4e6), &mut |_, _| {}).unwrap();
        let i = r[0].latency_trial.unwrap();
        assert_eq!(r[0].trials[i].requested_pps, r[0].throughput_pps);
        assert!(i > *r[0].final_trials.last().unwrap());
    }

    /// A passing trial at the NDR whose frames kept arriving long after
    /// the generator stopped is flagged as a standing queue.
    #[test]
    fn a_standing_queue_is_flagged() {
        let cfg = search_only(vec![64], 1);
        let mut r = run(&cfg, &mut Model::new(1e6, 0.0, 4e6), &mut |_, _| {}).unwrap();
        assert_eq!(standing_queue(&r[0], None), None);
        let ndr = r[0].throughput_pps.unwrap();
        let i = r[0]
            .trials
            .iter()
            .position(|t| t.requested_pps == Some(ndr) && t.lost == 0)
            .unwrap();
        r[0].trials[i].drain_ms = 400.0;
        let q = standing_queue(&r[0], None).unwrap();
        assert!(q.contains("400 ms"), "{q}");
    }

    #[test]
    fn repeat_spread_is_the_pooled_prediction_interval() {
        let size = |v: &[f64]| {
            let mut r = SizeResult::new(64);
            for &x in v {
                r.searches.push(Search::top_speed(x, 0));
            }
            r
        };
        // By hand: relative deviations +-1/101 and +-2/198; pooled variance
        // (2 (1/101)^2 + 2 (2/198)^2) / 2 with 2 degrees of freedom;
        // t(0.975, 2) = 4.302652729911275; n = 2: sqrt(2 / n) = 1.
        let r = vec![size(&[100.0, 102.0]), size(&[200.0, 196.0]), size(&[50.0])];
        let s2 = (2.0 * (1.0f64 / 101.0).powi(2) + 2.0 * (2.0f64 / 198.0).powi(2)) / 2.0;
        let want = 4.302652729911275 * s2.sqrt();
        let got = repeat_spread(&r).unwrap();
        assert!((got - want).abs() < 1e-9, "{got} vs {want}");
        // One search per size: no spread.
        assert_eq!(repeat_spread(&[size(&[1.0]), size(&[2.0])]), None);
        // The bed's: the same over several DuTs' sizes, generator-limited
        // sizes left out.
        let mut limited = size(&[10.0, 20.0]);
        limited.generator_limited = true;
        let other = [size(&[100.0, 102.0]), limited];
        let bed = bed_spread([&r[..1], &r[1..], &other[..]]).unwrap();
        let s2 = (4.0 * (1.0f64 / 101.0).powi(2) + 2.0 * (2.0f64 / 198.0).powi(2)) / 3.0;
        let want = 3.182446305284263 * s2.sqrt();
        assert!((bed - want).abs() < 1e-9, "{bed} vs {want}");
    }

    #[test]
    fn frame_loss_steps_down_until_two_clean_trials() {
        let mut m = Model::new(2.5e6, 0.0, 5e6);
        let cfg = Rfc2544Config {
            sizes: vec![64],
            latency: false,
            repetitions: 1,
            back_to_back_sizes: vec![],
            ..Default::default()
        };
        let r = run(&cfg, &mut m, &mut |_, _| {}).unwrap();
        let fl = &r[0].frame_loss;
        // 100 % .. 50 % lose (50 % = capacity: 0 lost), 40 % clean: stop there.
        let fracs: Vec<f64> = fl.iter().map(|p| (p.0 * 10.0).round() / 10.0).collect();
        assert_eq!(fracs, vec![1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4]);
        assert!((fl[0].2 - 0.5).abs() < 1e-3, "{:?}", fl[0]);
        assert!((fl[1].2 - (1.0 - 2.5 / 4.5)).abs() < 1e-3);
        assert_eq!(fl[5].2, 0.0);
        assert_eq!(fl[6].2, 0.0);
    }

    #[test]
    fn back_to_back_finds_the_queue() {
        // Bursts at 5 Mpps into 1 Mpps with a 5000-frame queue: a burst of n
        // takes n/5e6 s, during which 0.2 n drain, so n <= 6250 pass.
        let mut m = Model::new(1e6, 5000.0, 5e6);
        let cfg = Rfc2544Config {
            sizes: vec![64],
            latency: false,
            frame_loss_sizes: vec![],
            back_to_back_trials: 1,
            ..Default::default()
        };
        let r = run(&cfg, &mut m, &mut |_, _| {}).unwrap();
        let b = &r[0].back_to_back[0];
        assert!(!b.at_least);
        assert!(
            b.frames <= 6250 && b.frames as f64 >= 6250.0 * 0.99,
            "{b:?}"
        );
    }

    #[test]
    fn latency_trials_are_repeated_and_merged() {
        let cfg = Rfc2544Config {
            latency: true,
            latency_trials: 3,
            ..search_only(vec![64], 1)
        };
        let r = run(&cfg, &mut Model::new(1e6, 0.0, 4e6), &mut |_, _| {}).unwrap();
        assert_eq!(r[0].latency_trials.len(), 3);
        assert_eq!(r[0].latency_trial, Some(r[0].latency_trials[0]));
        let l = r[0].latency().unwrap();
        assert_eq!(l.samples, 30);
        assert!(l.min_ns < l.max_ns, "{l:?}");
        // One trial: no merge, the trial's own.
        let cfg1 = Rfc2544Config {
            latency_trials: 1,
            ..cfg
        };
        let one = run(&cfg1, &mut Model::new(1e6, 0.0, 4e6), &mut |_, _| {}).unwrap();
        assert!(one[0].latency_merged.is_none());
        assert_eq!(one[0].latency().unwrap().samples, 10);
    }

    /// The common load's latency: its trials at the rate asked, merged.
    #[test]
    fn common_load_latency_runs_at_the_rate_given() {
        let mut m = Model::new(1e6, 256.0, 4e6);
        let cfg = Rfc2544Config {
            latency_trials: 3,
            ..search_only(vec![64], 1)
        };
        let mut r = run(&cfg, &mut m, &mut |_, _| {}).unwrap().remove(0);
        common_latency(&cfg, &mut m, &mut r, 250e3, &mut |_, _| {}).unwrap();
        assert_eq!(r.common_latency_pps, Some(250e3));
        assert_eq!(r.common_latency_trials.len(), 3);
        for &i in &r.common_latency_trials {
            let t = &r.trials[i];
            assert_eq!(t.procedure, Procedure::Latency);
            assert_eq!(t.requested_pps, Some(250e3));
            assert_eq!(t.lost, 0);
        }
        let merged = r.common_latency_merged.as_ref().unwrap();
        assert_eq!(merged.samples, 30);
    }

    #[test]
    fn latencies_merge_exactly_at_the_ends() {
        let a = Latency {
            samples: 3,
            bad_stamps: 1,
            min_ns: 900.0,
            mean_ns: 1000.0,
            histogram: vec![(950.0, 1), (1000.0, 2)],
            max_ns: 1010.0,
            ..Default::default()
        };
        let b = Latency {
            samples: 1,
            min_ns: 5000.0,
            mean_ns: 5000.0,
            histogram: vec![(5100.0, 1)],
            max_ns: 5000.0,
            ..Default::default()
        };
        let m = Latency::merge([&a, &b, &Latency::default()]).unwrap();
        assert_eq!((m.samples, m.bad_stamps), (4, 1));
        assert_eq!((m.min_ns, m.max_ns), (900.0, 5000.0));
        assert_eq!(m.mean_ns, 2000.0);
        assert_eq!(m.p50_ns, 1000.0);
        // The top bucket's middle lies above the exact max: clamped.
        assert_eq!(m.p99_ns, 5000.0);
        assert_eq!(m.histogram, vec![(950.0, 1), (1000.0, 2), (5100.0, 1)]);
        assert!(Latency::merge([&Latency::default()]).is_none());
    }

    #[test]
    fn kernel_check_flags_disagreements() {
        let mut k = KernelCheck {
            gen_iface_tx: 1000,
            dut_in_rx: 1000,
            dut_out_tx: 1000,
            sink_iface_rx: 994,
            ..Default::default()
        };
        k.judge(1000, 1000);
        assert!(!k.agrees);
        assert!((k.forwarded_diff_pct + 0.6).abs() < 1e-9);
        assert_eq!(k.disagreements(), "s0 received -0.60 %");
        k.sink_iface_rx = 996;
        k.judge(1000, 1000);
        assert!(k.agrees);
        // d0 and d1 are judged too: frames into or out of the DuT that the
        // generator and the sink did not see.
        k.dut_in_rx = 1010;
        k.judge(1000, 1000);
        assert!(!k.agrees);
        assert_eq!(k.disagreements(), "d0 received +1.00 %");
        k.dut_in_rx = 1000;
        k.dut_out_tx = 990;
        k.judge(1000, 1000);
        assert_eq!(k.disagreements(), "d1 sent -1.00 %");
        // An invalid trial says why.
        let spec = spec(
            64,
            Procedure::Throughput,
            Some(1000.0),
            &Rfc2544Config::default(),
        );
        let n = spec.frames.unwrap();
        let mut rec = TrialRecord::new(&spec, n, n, n as f64 / 1000.0);
        rec.kernel = k;
        rec.validate(&spec);
        assert_eq!(rec.invalid.len(), 1);
        assert!(
            rec.invalid[0].contains("d1 sent -1.00 %"),
            "{:?}",
            rec.invalid
        );
        assert!(!passes(&rec, &Rfc2544Config::default()));
    }

    /// A valid kernel check of a trial that sent `sent` and counted
    /// `received` at the sink, with the sink side's drops as given.
    fn check_with_sink_drops(
        sent: u64,
        received: u64,
        d1_dropped: u64,
        s0_dropped: u64,
        twice: u64,
    ) -> KernelCheck {
        let mut k = KernelCheck {
            gen_iface_tx: sent,
            dut_in_rx: sent,
            dut_out_tx: received,
            sink_iface_rx: received,
            dut_out_tx_dropped: d1_dropped,
            sink_iface_rx_dropped: s0_dropped,
            sink_side_counted_twice: twice,
            sink_side_ports: ("d1".into(), "s0".into()),
            ..Default::default()
        };
        k.judge(sent, received);
        k
    }

    #[test]
    fn frames_the_sink_side_dropped_make_a_trial_invalid_not_a_loss_of_the_dut() {
        let cfg = Rfc2544Config::default();
        let s = spec(64, Procedure::Throughput, Some(1e5), &cfg);
        let n = s.frames.unwrap();
        // 1234 frames lost, every one of them after the DuT sent it: d1
        // could not put 1200 into s0's ring, s0 dropped 40, 6 of which
        // the veth counts at both ends.
        let mut rec = TrialRecord::new(&s, n, n - 1234, cfg.trial.as_secs_f64());
        rec.kernel = check_with_sink_drops(n, n - 1234, 1200, 40, 6);
        // The four comparisons agree (on veth they cannot see this loss).
        assert!(rec.kernel.agrees, "{:?}", rec.kernel);
        assert_eq!(rec.kernel.sink_side_dropped, 1234);
        rec.validate(&s);
        assert_eq!(
            rec.invalid,
            vec!["the sink side dropped 1234 frames (d1 tx_dropped 1200, s0 rx_dropped 40, 6 counted at both ends, once here), 1234 lost in all: the bed's loss, not the DuT's".to_string()]
        );
        assert!(!passes(&rec, &cfg));
        // Drops on the sink side in a trial that lost nothing (frames of
        // no trial): every frame arrived, the trial stands.
        let mut clean = TrialRecord::new(&s, n, n, cfg.trial.as_secs_f64());
        clean.kernel = check_with_sink_drops(n, n, 0, 3, 0);
        clean.validate(&s);
        assert!(clean.invalid.is_empty(), "{:?}", clean.invalid);
        // An external DuT: d1 is not ours to read, s0's drops are.
        let mut ext = TrialRecord::new(&s, n, n - 10, cfg.trial.as_secs_f64());
        ext.kernel = check_with_sink_drops(n, n - 10, 0, 10, 0);
        ext.kernel.dut_unseen = true;
        ext.kernel.sink_side_ports = (String::new(), "eth1".into());
        ext.validate(&s);
        assert_eq!(
            ext.invalid,
            vec!["the sink side dropped 10 frames (eth1 rx_dropped 10), 10 lost in all: the bed's loss, not the DuT's".to_string()]
        );
        // In the JSON under plain names.
        let j = serde_json::to_value(&rec.kernel).unwrap();
        assert_eq!(j["sink_side_dropped"], 1234);
        assert_eq!(j["dut_out_tx_dropped"], 1200);
        assert_eq!(j["sink_iface_rx_dropped"], 40);
        assert_eq!(j["sink_side_counted_twice"], 6);
    }

    /// The model, but the throughput trials numbered (from 0) in `at`
    /// lose 1000 frames on the sink side (the sink fell behind): the
    /// kernel counts them as d1's tx_dropped.
    struct SinkDrops {
        m: Model,
        at: Vec<usize>,
        n: usize,
    }

    impl Trials for SinkDrops {
        fn trial(&mut self, s: &TrialSpec) -> Result<TrialRecord, String> {
            let mut rec = self.m.trial(s)?;
            if s.procedure == Procedure::Throughput {
                if self.at.contains(&self.n) {
                    rec.received = rec.received.saturating_sub(1000);
                    rec.lost = rec.sent - rec.received;
                    rec.loss_ratio = rec.lost as f64 / rec.sent as f64;
                    rec.kernel = check_with_sink_drops(rec.sent, rec.received, 1000, 0, 0);
                    rec.validate(s);
                }
                self.n += 1;
            }
            Ok(rec)
        }
    }

    #[test]
    fn the_search_does_not_charge_the_sink_sides_loss_to_the_dut() {
        // Strict: any loss the DuT is charged with fails the rate.
        let cfg = Rfc2544Config {
            strict: true,
            ..search_only(vec![64], 1)
        };
        let clean = run(&cfg, &mut Model::new(1e6, 0.0, 4e6), &mut |_, _| {}).unwrap();
        // The sink side drops in the 2nd and the 4th throughput trial, both
        // at rates the DuT forwards without loss and at the ones it does not.
        let mut t = SinkDrops {
            m: Model::new(1e6, 0.0, 4e6),
            at: vec![1, 3],
            n: 0,
        };
        let r = run(&cfg, &mut t, &mut |_, _| {}).unwrap();
        assert_eq!(r[0].throughput_pps, clean[0].throughput_pps);
        let repeated: Vec<&TrialRecord> = r[0].trials.iter().filter(|x| x.repeated).collect();
        assert_eq!(repeated.len(), 2, "{:#?}", r[0].trials);
        for x in &repeated {
            assert!(
                x.kernel.sink_side_dropped == 1000 && x.lost >= 1000,
                "{x:?}"
            );
            assert!(x.invalid[0].contains("the bed's loss, not the DuT's"));
        }
        // No trial that counts in the search holds the sink side's loss.
        for &i in &r[0].searches[0].trials {
            let x = &r[0].trials[i];
            assert!(!x.repeated && x.kernel.sink_side_dropped == 0, "{x:?}");
        }
    }

    #[test]
    fn both_ways_rates_are_over_the_span_the_directions_share() {
        // 2000 pps both ways: 1000 pps, 1000 frames each way.
        let cfg = Rfc2544Config::default();
        let s = spec(64, Procedure::Throughput, Some(2e3), &cfg);
        let half = spec(64, Procedure::Throughput, Some(1e3), &cfg);
        let dir = |sent: u64, received: u64, secs: f64, span: Option<(u64, u64)>| {
            let mut d = TrialRecord::new(&half, sent, received, secs);
            d.send_span_ns = span;
            d.kernel = check_with_sink_drops(sent, received, 0, 0, 0);
            d
        };
        // Each direction 1000 frames in 1 s (1000 pps each), the reverse
        // starting 0.5 s after the forward: they share 1.5 s.
        let t0 = 5_000_000_000u64;
        let fwd = dir(1000, 1000, 1.0, Some((t0, t0 + 1_000_000_000)));
        let rev = dir(1000, 900, 1.0, Some((t0 + 500_000_000, t0 + 1_500_000_000)));
        let sum_of_rates = fwd.offered_pps + rev.offered_pps;
        let r = TrialRecord::both_ways(&s, vec![fwd.clone(), rev.clone()]);
        assert_eq!(r.send_span_ns, Some((t0, t0 + 1_500_000_000)));
        assert!((r.tx_seconds - 1.5).abs() < 1e-12, "{}", r.tx_seconds);
        assert!(
            (r.offered_pps - 2000.0 / 1.5).abs() < 1e-9,
            "{}",
            r.offered_pps
        );
        assert!((r.forwarded_pps - 1900.0 / 1.5).abs() < 1e-9);
        // Not the sum of the rates each over its own span (2000 pps).
        assert!(
            r.offered_pps < sum_of_rates,
            "{} {sum_of_rates}",
            r.offered_pps
        );
        // Spans that coincide: the sum.
        let same = dir(1000, 1000, 1.0, Some((t0, t0 + 1_000_000_000)));
        let r = TrialRecord::both_ways(&s, vec![fwd.clone(), same]);
        assert!((r.offered_pps - 2000.0).abs() < 1e-9, "{}", r.offered_pps);
        // No spans known: assumed to coincide, over the longest direction's
        // time (never more than the sum of the rates).
        let a = dir(1000, 1000, 1.0, None);
        let b = dir(800, 800, 0.8, None);
        let r = TrialRecord::both_ways(&s, vec![a, b]);
        assert!((r.offered_pps - 1800.0).abs() < 1e-9, "{}", r.offered_pps);
        assert_eq!(r.send_span_ns, None);
        // The sink side's drops of each direction add up, and each
        // direction's reason keeps its name.
        let mut f = dir(1000, 990, 1.0, Some((t0, t0 + 1_000_000_000)));
        f.kernel = check_with_sink_drops(1000, 990, 10, 0, 0);
        f.validate(&half);
        let mut v = rev.clone();
        v.kernel = check_with_sink_drops(1000, 900, 0, 100, 0);
        v.kernel.sink_side_ports = ("d0".into(), "g0".into());
        v.validate(&half);
        let r = TrialRecord::both_ways(&s, vec![f, v]);
        assert_eq!(r.kernel.sink_side_dropped, 110);
        assert_eq!(
            (r.kernel.dut_out_tx_dropped, r.kernel.sink_iface_rx_dropped),
            (10, 100)
        );
        assert!(
            r.invalid[0].starts_with("forward: the sink side dropped 10"),
            "{:?}",
            r.invalid
        );
        assert!(
            r.invalid[1].starts_with(
                "reverse: the sink side dropped 100 frames (d0 tx_dropped 0, g0 rx_dropped 100)"
            ),
            "{:?}",
            r.invalid
        );
    }

    #[test]
    fn offered_short_duplicates_and_more_received_than_sent_never_pass() {
        let cfg = Rfc2544Config::default();
        let s = spec(64, Procedure::Throughput, Some(1e6), &cfg);
        let good = |rec: &mut TrialRecord| {
            rec.kernel = KernelCheck {
                gen_iface_tx: rec.sent,
                dut_in_rx: rec.sent,
                dut_out_tx: rec.received,
                sink_iface_rx: rec.received,
                ..Default::default()
            };
            rec.kernel.judge(rec.sent, rec.received);
        };
        let frames = s.frames.unwrap();
        // Valid and lossless: a pass.
        let mut rec = TrialRecord::new(&s, frames, frames, cfg.trial.as_secs_f64());
        good(&mut rec);
        rec.validate(&s);
        assert!(rec.invalid.is_empty(), "{:?}", rec.invalid);
        assert!(passes(&rec, &cfg));
        // 2 % slower than asked: invalid.
        let mut slow = TrialRecord::new(&s, frames, frames, cfg.trial.as_secs_f64() * 1.02);
        good(&mut slow);
        slow.validate(&s);
        assert!(
            slow.invalid[0].starts_with("offered 0.980 Mpps"),
            "{:?}",
            slow.invalid
        );
        assert!(!passes(&slow, &cfg));
        // Every frame there, some twice: a fail, not a pass.
        let mut dup = rec.clone();
        dup.verify.duplicates = 5;
        assert!(!passes(&dup, &cfg));
        // Short of frames (the generator stopped early): invalid.
        let mut short = TrialRecord::new(&s, frames - 10, frames - 10, cfg.trial.as_secs_f64());
        good(&mut short);
        short.validate(&s);
        assert!(
            short.invalid.iter().any(|w| w.contains("sent")),
            "{:?}",
            short.invalid
        );
        // More received than sent: invalid, and no negative loss.
        let mut more = TrialRecord::new(&s, frames, frames + 3, cfg.trial.as_secs_f64());
        good(&mut more);
        more.validate(&s);
        assert_eq!(more.lost, 0);
        assert!(
            more.invalid.iter().any(|w| w.contains("received of")),
            "{:?}",
            more.invalid
        );
        assert!(!passes(&more, &cfg));
    }
}
