//! One trial: what it should do ([`TrialSpec`]), every counter it kept
//! ([`TrialRecord`]), the kernel's cross-check ([`KernelCheck`]), the
//! sink's verification, its latency, and the rules that make it valid.

use super::*;

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

/// A latency trial whose generator's schedule slipped (the gaps it left,
/// see [`TrialRecord::gen_slipped_us`]) for more than this fraction of the
/// time its frames took to leave is invalid: too little of it was at the
/// asked load.
pub const SLIP_TOLERANCE: f64 = 0.1;

/// Throughput trials: a frame more than this fraction of
/// [`LATE_BUDGET_FRAMES`]' time late makes the schedule slip instead of
/// catching up (so no catch-up burst is larger than half the budget: a
/// 10 s trial on the 2-CPU bed has the generator preempted for 4-7 ms now
/// and then, more than the budget at most rates, and every one of them
/// was invalid when it caught up). Its gaps may take at most
/// [`THROUGHPUT_SLIP_TOLERANCE`] of the trial.
pub const THROUGHPUT_LAG_SHARE: f64 = 0.5;

/// A throughput trial whose schedule slipped for more than this share of
/// its sending time is invalid. A gap rests the DuT: a tenth of the time
/// in gaps (the latency trials' [`SLIP_TOLERANCE`]) would pass a DuT ~10 %
/// over its rate; this keeps the load over the trial's span, gaps
/// included, within the search's default resolution (2 %) of the rate.
/// (In a 10 s trial the 2-CPU guest's generator left 8-15 gaps of ~10 ms:
/// 1-1.5 % of it.)
pub const THROUGHPUT_SLIP_TOLERANCE: f64 = 0.02;

/// How late a frame of a trial at `spec` may leave before the generator's
/// schedule slips (the generator's `set_max_lag`);
/// None: it catches up (a probe at the top speed).
pub fn max_lag(spec: &TrialSpec) -> Option<Duration> {
    if spec.latency {
        return Some(LATENCY_MAX_LAG);
    }
    if spec.procedure == Procedure::Probe {
        return None;
    }
    spec.rate_pps
        .filter(|&r| r > 0.0)
        .map(|r| Duration::from_secs_f64(THROUGHPUT_LAG_SHARE * LATE_BUDGET_FRAMES / r))
}

/// The share of its sending time a trial's schedule may have slipped.
pub fn slip_tolerance(spec: &TrialSpec) -> f64 {
    if spec.latency {
        SLIP_TOLERANCE
    } else {
        THROUGHPUT_SLIP_TOLERANCE
    }
}

/// Most steps down of a final trial that failed at a search's result.
pub const FINAL_STEPS: usize = 5;

/// A final trial that lost at least this share of its frames overflowed
/// the DuT's rings: what it forwarded is the DuT's sustained rate, and the
/// next one runs under it. Less is a stall longer than the rings absorb
/// (the 2-CPU guest loses its CPUs for ~10 ms several times in 10 s),
/// which says nothing of the rate: the next one runs halfway down.
pub const RING_LOSS: f64 = 0.05;

/// Most final trials a size runs for its NDR and PDR together, repeats
/// included (each costs the final length: a DuT that loses a little at
/// every rate in a long trial, as a packet socket's on a preempted CPU
/// does, would otherwise step the whole way down twice).
pub const FINAL_TRIALS_PER_SIZE: usize = 4;

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
    pub(super) fn disagreements(&self) -> String {
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
    /// Per CPU of the machine (index: its number), the milliseconds the
    /// host took it away while this guest had work for it (steal time,
    /// [`linerate_io::host::steal_ns`], in 10 ms ticks) from the
    /// generator's start to the drain's end: on a virtual machine a stall
    /// of the DuT's CPU longer than its rings absorb loses frames in a
    /// long trial at any rate the short trials passed (docs/BENCHMARKS.md,
    /// issue 35). Recorded, not judged: a DuT on such a machine meets the
    /// stalls in service too. Empty: not read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steal_ms: Vec<f64>,
}

/// The span (ns, CLOCK_MONOTONIC) the directions of a trial sent in
/// together: from the earliest start to the latest end of the known
/// sending spans ([`TrialRecord::send_span_ns`]), None if none is known.
pub(super) fn common_span_ns(dirs: &[TrialRecord]) -> Option<(u64, u64)> {
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
            steal_ms: Vec::new(),
        }
    }

    /// The CPUs the host took time from during the trial, in words
    /// ("the host's steal: CPU 1 20 ms"), or "" when it took none.
    pub fn steal_text(&self) -> String {
        let cpus: Vec<String> = self
            .steal_ms
            .iter()
            .enumerate()
            .filter(|(_, &ms)| ms > 0.0)
            .map(|(c, ms)| format!("CPU {c} {ms:.0} ms"))
            .collect();
        if cpus.is_empty() {
            String::new()
        } else {
            format!("the host's steal: {}", cpus.join(", "))
        }
    }

    /// What the generator kept up over the trial's span, its schedule's
    /// gaps included (frames/s): `offered_pps` leaves the gaps out.
    pub fn sustained_pps(&self) -> f64 {
        let span = self.tx_seconds + self.gen_slipped_us / 1e6;
        if span > 0.0 {
            self.sent as f64 / span
        } else {
            0.0
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
        let slip = slip_tolerance(spec);
        if self.gen_slipped_us > slip * self.tx_seconds * 1e6 {
            why.push(format!(
                "the generator's schedule slipped {:.1} ms in {} gaps ({:.0} % of {:.1} ms allowed)",
                self.gen_slipped_us / 1e3,
                self.gen_slips,
                slip * 100.0,
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
