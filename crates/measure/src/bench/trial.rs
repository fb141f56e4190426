//! RFC 2544 trials on the namespace test bed: the in-kernel generator
//! ([`XdpGen`], one per frame size, kept across trials so its pacing
//! calibration is done once) on a thread in the generator's namespace
//! pinned to the generator's CPU, the sink counter ([`XdpCount`] with the
//! latency histogram) on s0, and the kernel's interface counters of g0, d0,
//! d1 and s0 read before and after every trial, with the XDP drops each
//! veth that sends towards a sink counts at both ends (`ethtool -S`):
//! frames dropped between the DuT and the sink's count are the bed's loss
//! ([`KernelCheck::sink_side_dropped`]), and both ways the generators'
//! send stamps give the span the directions share
//! ([`TrialRecord::both_ways`]).
//!
//! Verified frames: every frame carries the generator's tag (stream,
//! sequence number, TX time; [`linerate_io::xdp::generator::TagConfig`]); each
//! trial is a new stream, and the sink counts as received only this
//! stream's frames, each sequence number once. Foreign frames, frames of
//! an earlier trial (late), duplicates and reordering are counted apart
//! ([`super::rfc2544::Verification`]).

use super::rfc2544::{
    max_lag, KernelCheck, Latency, MaxRate, TrialRecord, TrialSpec, Trials, Verification,
};
use crate::testbed::{
    iface_stats, in_netns, veth_xdp_errors, FrameAddrs, IfaceStats, Testbed, VethXdpErrors,
};
use linerate_io::xdp::count::{CountStats, LatencyHistogram, XdpCount};
use linerate_io::xdp::generator::{self, GenConfig, GenStats, TagConfig, XdpGen};
use linerate_pipeline::generate::xdp::{send, send_for};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Where the generator writes its 18-byte tag: the UDP payload (a 64-byte
/// frame has exactly 18 bytes of it).
pub const TAG_OFFSET: usize = generator::IPV4_UDP_PAYLOAD;

/// Frames per kernel batch of a latency trial at `pps`: a stamped frame
/// waits for the batch's later runs before it leaves (measured on the
/// empty bed at 1 Mpps: p50 3.8 us with the kernel's 64, 1.2 us with 16,
/// 0.5 us with 4, 0.3 us with 1), and small batches cap the generator
/// (~1.2 Mpps with 1, ~2.6 with 4 on the machine measured): one frame per
/// 400 kpps, rounded up to a power of two.
pub fn latency_batch(pps: f64) -> u32 {
    ((pps / 400e3).ceil().max(1.0) as u32)
        .next_power_of_two()
        .min(64)
}

/// The smallest n >= `every` that shares no factor with `flows`: the flow
/// of frame k is k % flows, so stamping every n-th frame stamps every flow.
pub fn stamp_every(every: u32, flows: u32) -> u32 {
    fn gcd(a: u32, b: u32) -> u32 {
        if b == 0 {
            a
        } else {
            gcd(b, a % b)
        }
    }
    let mut n = every.max(1);
    while flows > 1 && gcd(n, flows) != 1 {
        n += 1;
    }
    n
}

struct GenCmd {
    /// Bytes on the wire with FCS, or the IMIX.
    frame_size: u32,
    stream: u16,
    batch: u32,
    pps: Option<f64>,
    frames: Option<u64>,
    duration: Duration,
    /// Slip the schedule instead of catching up ([`XdpGen::set_max_lag`]).
    max_lag: Option<Duration>,
}

/// The generator thread: lives in the generator's namespace, pinned.
struct GenServer {
    tx: Option<Sender<GenCmd>>,
    rx: Receiver<Result<GenStats, String>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl GenServer {
    #[allow(clippy::too_many_arguments)]
    fn start(
        ns: String,
        ifname: String,
        cpu: usize,
        addrs: FrameAddrs,
        flows: u32,
        ts_every: u32,
        stop: Arc<AtomicBool>,
    ) -> GenServer {
        let (ctx, crx) = channel::<GenCmd>();
        let (rtx, rrx) = channel();
        let thread = std::thread::spawn(move || {
            // If the namespace cannot be entered the thread ends, and every
            // request fails with "generator thread is gone".
            let _ = in_netns(&ns, move || {
                super::pin(cpu);
                let mut gens: HashMap<u32, XdpGen> = HashMap::new();
                while let Ok(c) = crx.recv() {
                    let res = (|| -> Result<GenStats, String> {
                        let g = match gens.entry(c.frame_size) {
                            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                            std::collections::hash_map::Entry::Vacant(v) => {
                                // The IMIX: the longest frame, cut to each
                                // length in the program.
                                let imix = c.frame_size == crate::frame_size::IMIX;
                                let len = if imix {
                                    1514
                                } else {
                                    c.frame_size as usize - 4
                                };
                                let frame = super::udp_frame(&addrs, len);
                                let cfg = GenConfig {
                                    flows,
                                    tag: Some(TagConfig {
                                        offset: TAG_OFFSET,
                                        every: ts_every,
                                    }),
                                    mix: imix.then_some(&generator::IMIX_CSIT[..]),
                                    ..GenConfig::default()
                                };
                                v.insert(
                                    XdpGen::new(&ifname, &frame, cfg).map_err(|e| e.to_string())?,
                                )
                            }
                        };

                        g.set_rate(c.pps).map_err(|e| e.to_string())?;
                        g.set_stream(c.stream).map_err(|e| e.to_string())?;
                        g.set_batch_size(c.batch).map_err(|e| e.to_string())?;
                        g.set_max_lag(c.max_lag);
                        match c.frames {
                            Some(n) => send(g, n, &stop),
                            None => send_for(g, c.duration, &stop),
                        }
                        .map_err(|e| e.to_string())
                    })();
                    if rtx.send(res).is_err() {
                        break;
                    }
                }
            });
        });
        GenServer {
            tx: Some(ctx),
            rx: rrx,
            thread: Some(thread),
        }
    }

    /// Hand the generator a run; [`GenServer::wait`] gives its account.
    fn submit(&self, c: GenCmd) -> Result<(), String> {
        self.tx
            .as_ref()
            .ok_or("generator stopped")?
            .send(c)
            .map_err(|_| {
                "generator thread is gone (could not enter the generator's namespace?)".to_string()
            })
    }

    fn wait(&self) -> Result<GenStats, String> {
        self.rx
            .recv()
            .map_err(|_| "generator thread ended".to_string())?
    }
}

impl Drop for GenServer {
    fn drop(&mut self) {
        self.tx.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Interface counters of the four bed interfaces plus the XDP drops a
/// veth counts at both ends ([`VethXdpErrors`], `ethtool -S`; zero where
/// not read or not a veth) of the ports that send towards a sink: g0 (its
/// xmit errors are also the frames the generator offered that d0 refused),
/// d1 (into s0), and both ways d0 (into g0) and s0 (the reverse
/// generator's).
#[derive(Clone, Copy, Default)]
struct BedCounters {
    g0: IfaceStats,
    g0_xdp: VethXdpErrors,
    /// The DuT's ports (None: an external DuT, whose counters are not ours).
    d0: Option<IfaceStats>,
    d0_xdp: VethXdpErrors,
    d1: Option<IfaceStats>,
    d1_xdp: VethXdpErrors,
    s0: IfaceStats,
    s0_xdp: VethXdpErrors,
}

/// Fill in `k`'s sink side from the counters before (`k0`) and after
/// (`k1`) a trial: `out` picks the port that sends to the sink's port (and
/// its [`VethXdpErrors`]; None when it is not ours to read), `sink` the
/// sink's port. See [`KernelCheck::sink_side_dropped`].
fn sink_side(
    k: &mut KernelCheck,
    k0: &BedCounters,
    k1: &BedCounters,
    out: fn(&BedCounters) -> Option<(IfaceStats, VethXdpErrors)>,
    sink: fn(&BedCounters) -> IfaceStats,
) {
    if let (Some((o1, x1)), Some((o0, x0))) = (out(k1), out(k0)) {
        k.dut_out_tx_dropped = o1.tx_dropped.saturating_sub(o0.tx_dropped);
        k.dut_out_tx_errors = o1.tx_errors.saturating_sub(o0.tx_errors);
        k.sink_side_counted_twice = x1.since(&x0).counted_twice();
    }
    k.sink_iface_rx_dropped = sink(k1).rx_dropped.saturating_sub(sink(k0).rx_dropped);
}

/// One direction through the DuT: a generator and the sink that verifies
/// its frames.
struct Path<'a> {
    gen: GenServer,
    sink: &'a mut XdpCount,
    /// The stream of the last trial (each trial is a new one).
    stream: u16,
    /// The sink's counts when the last trial was read: frames of that
    /// trial verified after it (before the stream moved on) are late too.
    last: Option<CountStats>,
    /// Forward (g0 -> d0 -> d1 -> s0) or reverse (s0 -> d1 -> d0 -> g0).
    reverse: bool,
}

impl<'a> Path<'a> {
    fn new(gen: GenServer, sink: &'a mut XdpCount, reverse: bool) -> Path<'a> {
        Path {
            gen,
            stream: sink.stream(),
            last: None,
            sink,
            reverse,
        }
    }
}

/// What a path had before a trial.
struct Before {
    h0: Option<LatencyHistogram>,
    c0: CountStats,
    base: CountStats,
    late_before: u64,
}

/// Where the trials send and count: the generator's and the sink's
/// interfaces (each in a network namespace: a name, or a path such as
/// `/proc/self/ns/net` for this process's own), and the DuT's ports when
/// their counters can be read (the namespace bed; not an external DuT).
#[derive(Clone, Debug)]
pub struct Ends {
    pub gen_ns: String,
    pub gen_if: String,
    pub sink_ns: String,
    pub sink_if: String,
    /// (namespace, port facing the generator, port facing the sink).
    pub dut: Option<(String, String, String)>,
}

impl Ends {
    /// The namespace bed: g0 -> d0 | d1 -> s0.
    pub fn of_bed(bed: &Testbed) -> Ends {
        Ends {
            gen_ns: bed.ns_gen().into(),
            gen_if: "g0".into(),
            sink_ns: bed.ns_sink().into(),
            sink_if: "s0".into(),
            dut: Some((bed.ns_dut().into(), "d0".into(), "d1".into())),
        }
    }
}

/// Trials on a running test bed with a started DuT: one direction
/// (generator on g0, sink on s0), or both at once ([`BedTrials::both_ways`]).
pub struct BedTrials<'a> {
    /// Told every trial's record as it ends (`--metrics`).
    pub on_trial: Option<TrialObserver>,
    ends: Ends,
    paths: Vec<Path<'a>>,
    /// Every n-th frame carries a TX time (n shares no factor with the flows).
    pub ts_every: u32,
    gen_cpu: usize,
    flows: u32,
    stop: Arc<AtomicBool>,
    /// Longest wait for the sink count to settle after a trial.
    pub max_drain: Duration,
    /// The empty bed: the sink is on d0 (no DuT, one veth from the
    /// generator); d1 and s0 carry nothing.
    direct: bool,
    /// Idle time before every trial but the first (the DuT restabilises).
    pub settle: Duration,
    /// Trials run so far.
    runs: u64,
    /// Per frame size: the smallest batch a latency trial may use (raised
    /// when the generator could not keep the rate with smaller ones).
    lat_batch: HashMap<u32, u32>,
    /// The most any trial offers (`--max-rate`): every trial passes here,
    /// the readiness probes and the check included, so a trial asking for
    /// more (or for the top speed) is paced at the cap.
    pub max_rate: Option<MaxRate>,
}

impl<'a> BedTrials<'a> {
    /// Trials from `ends.gen_if` to `ends.sink_if` (the bed's:
    /// [`Ends::of_bed`]). `sink` must have been attached with
    /// [`XdpCount::attach_verified`] at [`TAG_OFFSET`]; `ts_every`:
    /// timestamp every n-th frame (raised to the next number sharing no
    /// factor with `flows`: [`stamp_every`]).
    pub fn new(
        ends: Ends,
        sink: &'a mut XdpCount,
        addrs: FrameAddrs,
        gen_cpu: usize,
        flows: u32,
        ts_every: u32,
        stop: Arc<AtomicBool>,
    ) -> BedTrials<'a> {
        let ts_every = stamp_every(ts_every, flows);
        let gen = GenServer::start(
            ends.gen_ns.clone(),
            ends.gen_if.clone(),
            gen_cpu,
            addrs,
            flows,
            ts_every,
            stop.clone(),
        );
        BedTrials {
            on_trial: None,
            ends,
            paths: vec![Path::new(gen, sink, false)],
            ts_every,
            gen_cpu,
            flows,
            stop,
            max_drain: Duration::from_secs(2),
            direct: false,
            settle: Duration::ZERO,
            runs: 0,
            lat_batch: HashMap::new(),
            max_rate: None,
        }
    }

    /// Both directions at once (RFC 2544 section 14): a second generator
    /// in the sink's namespace sends `addrs` (the reverse frames) out of
    /// s0 and `sink`, attached verified on g0, counts them. A trial's rate
    /// is the aggregate, half each way; its record holds both directions
    /// (`directions`), and it passes only when neither loses.
    /// `cpu`: the reverse generator's CPU (None: the forward one's, where
    /// the two share the CPU in time slices: on two CPUs each direction
    /// then falls some milliseconds behind its schedule at a time).
    pub fn both_ways(
        mut self,
        sink: &'a mut XdpCount,
        addrs: FrameAddrs,
        cpu: Option<usize>,
    ) -> Self {
        let gen = GenServer::start(
            self.ends.sink_ns.clone(),
            self.ends.sink_if.clone(),
            cpu.unwrap_or(self.gen_cpu),
            addrs,
            self.flows,
            self.ts_every,
            self.stop.clone(),
        );
        self.paths.push(Path::new(gen, sink, true));
        self
    }

    /// For the empty bed: `sink` is attached to d0 (in the DuT's
    /// namespace, with no DuT): the measurement's own latency.
    pub fn direct(mut self) -> Self {
        self.direct = true;
        self
    }

    fn counters(&self) -> Result<BedCounters, String> {
        let b = &self.ends;
        let e = |x: crate::testbed::TestbedError| x.to_string();
        let xdp = |ns: &str, ifname: &str| veth_xdp_errors(ns, ifname).unwrap_or_default();
        let both = self.paths.len() > 1;
        let mut k = BedCounters {
            g0: iface_stats(&b.gen_ns, &b.gen_if).map_err(e)?,
            g0_xdp: xdp(&b.gen_ns, &b.gen_if),
            s0: iface_stats(&b.sink_ns, &b.sink_if).map_err(e)?,
            ..Default::default()
        };
        if both {
            k.s0_xdp = xdp(&b.sink_ns, &b.sink_if);
        }
        if let Some((ns, i, o)) = &b.dut {
            k.d0 = Some(iface_stats(ns, i).map_err(e)?);
            k.d1 = Some(iface_stats(ns, o).map_err(e)?);
            if both {
                k.d0_xdp = xdp(ns, i);
            }
            if !self.direct {
                k.d1_xdp = xdp(ns, o);
            }
        }
        Ok(k)
    }

    /// Wait until the sink's count stops moving (the DuT's queues drained):
    /// it must not change over 3 polls 20 ms apart, or reach `expect`
    /// frames of this trial.
    fn drain(
        &self,
        sink: &XdpCount,
        expect: u64,
        base: &CountStats,
    ) -> Result<(CountStats, Duration), String> {
        let t = Instant::now();
        let read = || sink.read().map_err(|e| e.to_string());
        let mine = |c: &CountStats| c.since(base).verified + c.since(base).beyond;
        let mut last = read()?;
        let mut still = 0;
        while t.elapsed() < self.max_drain {
            if mine(&last) >= expect {
                // Everything arrived; a short pause catches extras (never expected).
                std::thread::sleep(Duration::from_millis(10));
                last = read()?;
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
            let now = read()?;
            if now.packets == last.packets {
                still += 1;
                if still >= 3 {
                    break;
                }
            } else {
                still = 0;
            }
            last = now;
        }
        Ok((last, t.elapsed()))
    }
}

/// A trial's share for one of `n` paths (`i` from 0): the rate split
/// evenly, the frames too (the first paths take the odd ones).
fn share(spec: &TrialSpec, i: usize, n: usize) -> TrialSpec {
    let mut s = spec.clone();
    if n > 1 {
        s.rate_pps = spec.rate_pps.map(|r| r / n as f64);
        s.frames = spec
            .frames
            .map(|f| f / n as u64 + u64::from((i as u64) < f % n as u64));
    }
    s
}

/// `spec` at most at `cap` frames/s (a top-speed trial at the cap).
fn capped(spec: &TrialSpec, cap: f64) -> TrialSpec {
    let mut s = spec.clone();
    s.rate_pps = Some(spec.rate_pps.map_or(cap, |r| r.min(cap)));
    s
}

/// Whoever wants every trial's record as it ends (the bench's metrics):
/// called on the bench's thread, between trials.
#[derive(Clone)]
pub struct TrialObserver(pub Arc<dyn Fn(&TrialRecord) + Send + Sync>);

impl std::fmt::Debug for TrialObserver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TrialObserver")
    }
}

impl Trials for BedTrials<'_> {
    fn trial(&mut self, spec: &TrialSpec) -> Result<TrialRecord, String> {
        let rec = self.run_trial(spec)?;
        if let Some(o) = &self.on_trial {
            (o.0)(&rec);
        }
        Ok(rec)
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }
}

impl BedTrials<'_> {
    fn run_trial(&mut self, spec: &TrialSpec) -> Result<TrialRecord, String> {
        let capped_spec;
        let spec = match self.max_rate {
            Some(m) => {
                capped_spec = capped(spec, m.pps(spec.frame_size));
                &capped_spec
            }
            None => spec,
        };
        if self.runs > 0 && !self.settle.is_zero() {
            // The restabilisation wait of RFC 2544 section 23 (a protocol
            // wait, not a wait for readiness); cut short by a stop.
            let t = Instant::now();
            while t.elapsed() < self.settle && !self.stop.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(20).min(self.settle));
            }
        }
        self.runs += 1;
        let n = self.paths.len();
        // Latency trials: small batches (a stamped frame leaves only when
        // its batch is flushed, after the batch's later runs), by each
        // generator's own rate.
        let batch = match (spec.latency, spec.rate_pps) {
            (true, Some(r)) => latency_batch(r / n as f64)
                .max(self.lat_batch.get(&spec.frame_size).copied().unwrap_or(1)),
            _ => 0,
        };
        let mut before = Vec::with_capacity(n);
        for p in &mut self.paths {
            // A new stream: frames of earlier trials are stale from here on.
            p.stream = p.stream.wrapping_add(1);
            p.sink.set_stream(p.stream).map_err(|e| e.to_string())?;
            let h0 = if spec.latency {
                Some(p.sink.latency().map_err(|e| e.to_string())?)
            } else {
                None
            };
            let c0 = p.sink.read().map_err(|e| e.to_string())?;
            // Since the last trial was counted: its own frames that arrived
            // before the stream moved on (verified then), and stale and
            // foreign frames at any time up to the end of this trial.
            let base = p.last.unwrap_or(c0);
            let late_before = c0.since(&base).verified + c0.since(&base).beyond;
            before.push(Before {
                h0,
                c0,
                base,
                late_before,
            });
        }
        let k0 = self.counters()?;
        let steal0 = linerate_io::host::steal_ns();
        // Both generators at once; then each one's account.
        for (i, p) in self.paths.iter().enumerate() {
            let s = share(spec, i, n);
            p.gen.submit(GenCmd {
                frame_size: spec.frame_size,
                stream: p.stream,
                batch,
                pps: s.rate_pps,
                frames: s.frames,
                duration: spec.duration,
                // A late generator leaves a gap, not a catch-up burst that
                // would queue in the DuT: latency trials past 20 us, the
                // others past half of what the smallest ring absorbs.
                max_lag: max_lag(spec),
            })?;
        }
        let mut gens = Vec::with_capacity(n);
        for p in &self.paths {
            gens.push(p.gen.wait());
        }
        let gens = gens
            .into_iter()
            .collect::<Result<Vec<GenStats>, String>>()?;
        let mut after = Vec::with_capacity(n);
        for (p, (b, g)) in self.paths.iter().zip(before.iter().zip(&gens)) {
            after.push(self.drain(p.sink, g.sent, &b.c0)?);
        }
        let k1 = self.counters()?;
        let steal1 = linerate_io::host::steal_ns();
        let mut recs = Vec::with_capacity(n);
        for (i, ((p, b), (g, (c1, drained)))) in self
            .paths
            .iter_mut()
            .zip(&before)
            .zip(gens.iter().zip(&after))
            .enumerate()
        {
            let s = share(spec, i, n);
            p.last = Some(*c1);
            let d = c1.since(&b.c0);
            // Received: this trial's frames, each once (unchecked ones past
            // the duplicate bitmap count too).
            let received = d.verified + d.beyond;
            // The time the frames took to leave, from the generator
            // program's stamps: the wall time of the run adds the calls'
            // set-up and teardown (~35 ms each), in which nothing is sent.
            // A slipped schedule's gaps are not part of the offered load.
            let tx_ns = if g.send_ns > 0 {
                g.send_ns
            } else {
                g.duration_ns
            }
            .saturating_sub(g.slipped_ns);
            let mut rec = TrialRecord::new(&s, g.sent, received, tx_ns as f64 / 1e9);
            // When the frames left, for the span both ways share: from the
            // first stamp, until the last one but no sooner than the time
            // the frames took to leave (stamps are every 64th frame's).
            rec.send_span_ns = (g.first_ns > 0)
                .then(|| (g.first_ns, g.last_ns.max(g.first_ns.saturating_add(tx_ns))));
            rec.drain_ms = drained.as_secs_f64() * 1e3;
            rec.gen_late_max_us = g.late_max_ns as f64 / 1e3;
            rec.gen_slipped_us = g.slipped_ns as f64 / 1e3;
            rec.gen_slips = g.slips;
            let between = c1.since(&b.base);
            rec.verify = Verification {
                foreign: between.foreign,
                stale: between.stale + b.late_before,
                duplicates: d.dup,
                reordered: d.reordered,
                unchecked: d.beyond,
            };
            let diff = |a: u64, b: u64| a.saturating_sub(b);
            let dut = |f: fn(&IfaceStats) -> u64, one: fn(&BedCounters) -> Option<IfaceStats>| {
                Some(diff(f(&one(&k1)?), f(&one(&k0)?)))
            };
            // The DuT's ports' names (for the sink side's reasons in words).
            let (dut_in, dut_out) = match &self.ends.dut {
                Some((_, i, o)) => (i.as_str(), o.as_str()),
                None => ("", ""),
            };
            rec.kernel = if p.reverse {
                // The reverse path's ends: s0 sends, d1 takes in, d0
                // sends on, g0 receives.
                let mut k = KernelCheck {
                    gen_iface_tx: diff(k1.s0.tx_packets, k0.s0.tx_packets),
                    gen_iface_xmit_errors: diff(k1.s0_xdp.xmit_errors, k0.s0_xdp.xmit_errors),
                    dut_in_rx: dut(|s| s.rx_packets, |k| k.d1).unwrap_or(0),
                    dut_out_tx: dut(|s| s.tx_packets, |k| k.d0).unwrap_or(0),
                    sink_iface_rx: diff(k1.g0.rx_packets, k0.g0.rx_packets),
                    sink_side_ports: (dut_in.into(), self.ends.gen_if.clone()),
                    ..Default::default()
                };
                sink_side(&mut k, &k0, &k1, |k| Some((k.d0?, k.d0_xdp)), |k| k.g0);
                k
            } else {
                let mut k = KernelCheck {
                    gen_iface_tx: diff(k1.g0.tx_packets, k0.g0.tx_packets),
                    gen_iface_xmit_errors: diff(k1.g0_xdp.xmit_errors, k0.g0_xdp.xmit_errors),
                    dut_in_rx: dut(|s| s.rx_packets, |k| k.d0).unwrap_or(0),
                    dut_out_tx: dut(|s| s.tx_packets, |k| k.d1).unwrap_or(0),
                    sink_iface_rx: diff(k1.s0.rx_packets, k0.s0.rx_packets),
                    sink_side_ports: (dut_out.into(), self.ends.sink_if.clone()),
                    ..Default::default()
                };
                sink_side(&mut k, &k0, &k1, |k| Some((k.d1?, k.d1_xdp)), |k| k.s0);
                k
            };
            if self.ends.dut.is_none() {
                // An external DuT: its ports are not ours to read; the
                // check covers what left the generator's port and what
                // reached the sink's, and the sink side is the sink's
                // port alone (sink_side above read none of the DuT's).
                rec.kernel.dut_unseen = true;
                rec.kernel.dut_in_rx = rec.kernel.gen_iface_tx;
                rec.kernel.dut_out_tx = d.packets;
            }
            if self.direct {
                // d0 is the sink's interface; no DuT sends anything out.
                // The sink side is g0's sending into d0: what d0's ring
                // refused is the bed's loss here (there is no DuT).
                rec.kernel.sink_iface_rx = rec.kernel.dut_in_rx;
                rec.kernel.dut_out_tx = d.packets;
                rec.kernel.sink_side_ports = (self.ends.gen_if.clone(), dut_in.into());
                sink_side(
                    &mut rec.kernel,
                    &k0,
                    &k1,
                    |k| Some((k.g0, k.g0_xdp)),
                    |k| k.d0.unwrap_or_default(),
                );
            }
            rec.kernel.judge(g.sent, d.packets);
            if let Some(h0) = &b.h0 {
                let h = p.sink.latency().map_err(|e| e.to_string())?.since(h0);
                rec.latency = Some(latency_of(&h, &d, c1));
            }
            rec.gen_batch = if batch == 0 { 64 } else { batch };
            rec.validate(&s);
            recs.push(rec);
        }
        let mut rec = if n == 1 {
            recs.pop().expect("one path")
        } else {
            TrialRecord::both_ways(spec, recs)
        };
        rec.steal_ms = steal1
            .iter()
            .zip(&steal0)
            .map(|(b, a)| b.saturating_sub(*a) as f64 / 1e6)
            .collect();
        if batch > 0
            && rec
                .invalid
                .iter()
                .any(|w| w.contains("behind") || w.contains("offered"))
        {
            // The generator could not keep the rate with batches this
            // small: the next latency trial at this size uses larger ones.
            self.lat_batch.insert(spec.frame_size, (batch * 2).min(64));
        }
        Ok(rec)
    }
}

/// The latency of a trial: quantiles from the histogram (bucket middles,
/// within 1/32 of the value, clamped to min..max), min and max exact (this
/// stream's).
fn latency_of(h: &LatencyHistogram, d: &CountStats, now: &CountStats) -> Latency {
    let n = d.lat_count;
    let min = now.stream_lat_min_ns.map(|v| v as f64);
    let max = now.stream_lat_max_ns.map(|v| v as f64);
    // A bucket's middle may lie outside the exact min and max (a bucket is
    // 1/16 of its values wide): clamped to them.
    let q = |p: f64| {
        let v = h.quantile(p).unwrap_or(0.0);
        match (min, max) {
            (Some(lo), Some(hi)) => v.clamp(lo, hi),
            _ => v,
        }
    };
    Latency {
        samples: n,
        bad_stamps: d.lat_bad,
        min_ns: min.unwrap_or_else(|| q(0.0)),
        mean_ns: if n == 0 {
            0.0
        } else {
            d.lat_sum_ns as f64 / n as f64
        },
        p50_ns: q(0.5),
        p90_ns: q(0.9),
        p99_ns: q(0.99),
        p999_ns: q(0.999),
        max_ns: max.unwrap_or_else(|| q(1.0)),
        histogram: h.points(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn caps_pace_top_speed_and_lower_faster_trials() {
        use super::super::rfc2544::{Procedure, TrialSpec};
        let s = |rate| TrialSpec {
            frame_size: 64,
            rate_pps: rate,
            frames: Some(1000),
            duration: std::time::Duration::from_millis(100),
            latency: false,
            procedure: Procedure::Probe,
        };
        assert_eq!(super::capped(&s(None), 1e4).rate_pps, Some(1e4));
        assert_eq!(super::capped(&s(Some(2e4)), 1e4).rate_pps, Some(1e4));
        assert_eq!(super::capped(&s(Some(5e3)), 1e4).rate_pps, Some(5e3));
        assert_eq!(super::capped(&s(None), 1e4).frames, Some(1000));
    }

    #[test]
    fn latency_batches_grow_with_the_rate() {
        use super::latency_batch;
        assert_eq!(latency_batch(10e3), 1);
        assert_eq!(latency_batch(400e3), 1);
        assert_eq!(latency_batch(700e3), 2);
        assert_eq!(latency_batch(1.5e6), 4);
        assert_eq!(latency_batch(3.3e6), 16);
        assert_eq!(latency_batch(1e9), 64);
    }

    #[test]
    fn stamps_reach_every_flow() {
        use super::stamp_every;
        assert_eq!(stamp_every(16, 64), 17);
        assert_eq!(stamp_every(16, 1), 16);
        assert_eq!(stamp_every(10, 15), 11);
        assert_eq!(stamp_every(0, 64), 1);
        for (every, flows) in [(16u32, 64u32), (100, 10), (7, 49)] {
            let n = stamp_every(every, flows);
            let hit: std::collections::HashSet<u32> = (0..flows).map(|k| (k * n) % flows).collect();
            assert_eq!(hit.len() as u32, flows, "every {n} of {flows} flows");
        }
    }
}
