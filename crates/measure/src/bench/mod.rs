//! `linerate bench`: devices under test side by side on one test bed.
//!
//! For each DuT a fresh test bed is built (gen-ns <-veth-> dut-ns
//! <-veth-> sink-ns), the DuT is started between d0 and d1, the in-kernel
//! generator ([`linerate_io::xdp::generator`], BPF_PROG_RUN live frames)
//! sends into g0 from CPU `gen_cpu`, and the sink
//! ([`linerate_io::xdp::count`]) counts and verifies what arrives at s0, so
//! every DuT is measured with the same generator and the same counter.
//!
//! This file drives the RFC 2544 bench over the DuTs ([`run_rfc2544`]: the
//! passes, each DuT's session on a fresh bed, the empty bed); the
//! procedures are in [`rfc2544`], a trial on the bed in [`trial`], the
//! overload bench in [`overload`], the run as a whole (history, reports)
//! in [`session`].

pub mod dut;
pub mod external;
pub mod history;
pub mod markdown;
pub mod overload;
pub mod own_link;
pub mod rfc2544;
pub mod session;
pub mod text;
pub mod to_report;
pub mod trial;

pub use overload::{run, BenchConfig, DutResult, Progress, Trial};

use crate::testbed::{self, FrameAddrs, Testbed, TestbedConfig};
use dut::{Dut, DutEnv, DutError};
use linerate_io::xdp::count::XdpCount;
use linerate_io::xdp::generator;
use linerate_io::xdp::AttachMode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn failed(e: impl std::fmt::Display) -> DutError {
    DutError::Failed(e.to_string())
}

/// How to run the RFC 2544 bench ([`run_rfc2544`]).
#[derive(Clone, Debug)]
pub struct Rfc2544Bench {
    pub procedures: rfc2544::Rfc2544Config,
    pub gen_cpu: usize,
    pub dut_cpu: usize,
    /// UDP source ports to cycle through (flows).
    pub flows: u32,
    /// Timestamp every n-th frame for the latency histogram.
    pub ts_every: u32,
    pub threaded_napi: bool,
    /// RPS of d0 to `dut_cpu` (see [`BenchConfig::rps`]).
    pub rps: bool,
    /// Run the sink's receive work (s0's NAPI) in a kernel thread pinned to
    /// this CPU. None: softirq on the CPU that transmits to s0 (veth runs
    /// the receiver's NAPI there: the DuT's, so the sink's work is charged
    /// to the DuT's core).
    pub sink_cpu: Option<usize>,
    /// Bed name prefix (a counter is appended); None: "lr" + pid + counter.
    pub bed_name: Option<String>,
    pub env: DutEnv,
    /// The load of the latency compared across DuTs ([`CommonLoad`]).
    pub common_load: CommonLoad,
    /// Every DuT is measured in each of these (a DuT that forwards one
    /// way only is skipped for [`Direction::Bi`]).
    pub directions: Vec<Direction>,
    /// CPU of the reverse generator (both ways); None: `gen_cpu`.
    pub reverse_gen_cpu: Option<usize>,
    /// Told every trial's record as it ends (`--metrics`).
    pub on_trial: Option<trial::TrialObserver>,
}

/// The rate at which every DuT's latency is measured once more after the
/// throughput searches, the same for all of them.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CommonLoad {
    /// None.
    Off,
    /// This fraction of the slowest DuT's NDR at each size.
    OfSlowest(f64),
    /// This rate (frames/s) at every size.
    Pps(f64),
}

/// Default [`CommonLoad`]: half the slowest DuT's NDR.
pub const COMMON_LOAD_FRACTION: f64 = 0.5;

/// The common load at each size: (size, rate), from the DuTs that finished.
pub fn common_rates(load: CommonLoad, results: &[Rfc2544Result]) -> Vec<(u32, f64)> {
    let ok: Vec<&Rfc2544Result> = results.iter().filter(|r| r.status == "ok").collect();
    let Some(first) = ok.first() else {
        return Vec::new();
    };
    first
        .sizes
        .iter()
        .filter_map(|s| {
            let size = s.frame_size;
            let rate = match load {
                CommonLoad::Off => return None,
                CommonLoad::Pps(p) => p,
                CommonLoad::OfSlowest(f) => {
                    let slowest = ok
                        .iter()
                        .map(|r| {
                            r.sizes
                                .iter()
                                .find(|x| x.frame_size == size)
                                .and_then(|x| x.throughput_pps)
                                .unwrap_or(0.0)
                        })
                        .fold(f64::INFINITY, f64::min);
                    f * slowest
                }
            };
            (rate >= 1.0).then_some((size, rate))
        })
        .collect()
}

/// What one session of a DuT on a fresh bed does.
#[derive(Clone, Copy)]
enum Session<'a> {
    /// Every procedure with the first throughput search.
    First,
    /// Throughput search number n (from 0) at every size.
    Further(usize),
    /// Latency at the common load at each (size, rate).
    CommonLoad(&'a [(u32, f64)]),
}

/// The RFC 2544 result for one DuT.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Rfc2544Result {
    pub name: String,
    pub description: String,
    pub version: String,
    /// "ok", "skipped: ...", "failed: ...", "interrupted"
    pub status: String,
    /// Where the DuT is described ("built-in" or its spec file).
    pub origin: String,
    /// A DuT described by a spec (a file, or a built-in one): the hash of
    /// the spec's text as read ([`dut::Dut::spec_hash`]); with `version`,
    /// the DuT's key in the history.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spec_hash: Option<String>,
    /// One way (g0 -> s0) or both at once.
    pub direction: Direction,
    /// Seconds from the DuT's start until probe frames came through.
    pub ready_s: Option<f64>,
    /// The forwarding check made before the procedures.
    pub check: Option<rfc2544::TrialRecord>,
    pub sizes: Vec<rfc2544::SizeResult>,
    /// With repetitions: the half width (fraction) of the 95 % prediction
    /// interval of a re-run's throughput that the bench states: the largest
    /// of the DuT's own estimate, the bed's ([`rfc2544::bed_spread`]) and
    /// the one between runs ([`history::widen`]).
    pub throughput_spread: Option<f64>,
    /// The DuT's own estimate, pooled over its sizes
    /// ([`rfc2544::repeat_spread`]).
    pub throughput_spread_own: Option<f64>,
    /// The spread between this run and the earlier runs on this machine
    /// ([`history::between_run_spread`]); the stated spread is at least this.
    pub throughput_spread_history: Option<f64>,
    /// The DuT's own account at the end of its first pass (linerate fwd's
    /// JSON; each pass starts the DuT anew).
    pub dut_account: Option<serde_json::Value>,
    pub seconds: f64,
}

impl Rfc2544Result {
    /// The note on the DuT's first row from its account: `linerate switch
    /// --offload xdp`'s share forwarded in XDP, or a guest's acceleration
    /// and boot time ([`dut::vm::note`]).
    pub fn dut_note(&self) -> Option<String> {
        self.offload_share()
            .or_else(|| dut::vm::note(self.dut_account.as_ref()?))
    }

    /// `linerate switch --offload xdp`: the share of the frames it
    /// forwarded that XDP forwarded, in its first pass (the account kept:
    /// [`Self::dut_account`]).
    fn offload_share(&self) -> Option<String> {
        let o = self.dut_account.as_ref()?.get("offload")?;
        let x = o["xdp"]["fwd"].as_u64()?;
        let all = o["forwarded"].as_u64()?;
        Some(format!(
            "{:.1} % of the frames it forwarded went through XDP ({x} of {all} in its first pass)",
            100.0 * x as f64 / all.max(1) as f64
        ))
    }

    /// A DuT not yet run.
    pub fn new(name: &str, description: String, version: String) -> Self {
        Rfc2544Result {
            name: name.into(),
            description,
            version,
            origin: "built-in".into(),
            spec_hash: None,
            direction: Direction::Uni,
            ready_s: None,
            status: "ok".into(),
            check: None,
            sizes: Vec::new(),
            throughput_spread: None,
            throughput_spread_own: None,
            throughput_spread_history: None,
            dut_account: None,
            seconds: 0.0,
        }
    }
}

/// A guest DuT's (`vm:NAME`) NDR over NAME's on the host in the same run
/// and direction, at `size` (seed 001's guest against host): "guest/host
/// NDR 0.02x"; None for another DuT, or without the host's figure.
pub fn guest_host_note(results: &[Rfc2544Result], r: &Rfc2544Result, size: u32) -> Option<String> {
    let host = r.name.strip_prefix("vm:")?;
    let fig = |x: &Rfc2544Result| {
        x.sizes
            .iter()
            .find(|s| s.frame_size == size)
            .map(to_report::ndr)
            .filter(|f| f.pps.is_some())
    };
    let h = results
        .iter()
        .find(|x| x.name == host && x.direction == r.direction)?;
    Some(format!("guest/host NDR {}", fig(r)?.ratio(&fig(h)?)))
}

/// Frames per readiness probe (at 20 kpps; 95 % must come through).
const READY_PROBE_FRAMES: u64 = 200;

impl Rfc2544Result {
    /// The DuT's name, with " bi" for both directions.
    pub fn label(&self) -> String {
        match self.direction {
            Direction::Uni => self.name.clone(),
            Direction::Bi => format!("{} bi", self.name),
        }
    }
}

/// The directions of traffic through a DuT (RFC 2544 section 14).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Direction {
    /// g0 -> d0 -> d1 -> s0.
    Uni,
    /// Both at once, half the rate each way; the throughput is the
    /// aggregate at which neither direction loses.
    Bi,
}

/// Progress: (DuT, frame size or 0, what is happening).
pub type Progress3<'a> = &'a mut dyn FnMut(&str, u32, &str);

/// The empty bed's latency at one frame size: the generator's frames
/// straight into the sink one veth away (d0, no DuT): what the measurement
/// itself adds to every DuT's latency.
#[derive(Clone, Debug, serde::Serialize)]
pub struct EmptyBed {
    #[serde(with = "crate::frame_size::serde_size")]
    pub frame_size: u32,
    /// The rate of the latency trial.
    pub rate_pps: f64,
    /// The trial (its latency in `latency`); invalid ones repeated first.
    pub trial: rfc2544::TrialRecord,
}

/// Rate of the empty bed's latency trials: within what the generator paces
/// cleanly and the sink takes at every size.
pub const EMPTY_BED_PPS: f64 = 1e6;

/// Trials between `ends` as `cfg` sets them up (generator CPU, flows,
/// stamps, restabilisation wait, rate cap).
pub(crate) fn bed_trials<'a>(
    ends: trial::Ends,
    sink: &'a mut XdpCount,
    addrs: FrameAddrs,
    cfg: &Rfc2544Bench,
    stop: &Arc<AtomicBool>,
) -> trial::BedTrials<'a> {
    let mut t = trial::BedTrials::new(
        ends,
        sink,
        addrs,
        cfg.gen_cpu,
        cfg.flows,
        cfg.ts_every,
        stop.clone(),
    );
    t.settle = cfg.procedures.settle;
    t.max_rate = cfg.procedures.max_rate;
    t.on_trial = cfg.on_trial.clone();
    t
}

/// The empty bed's latency at every size at [`EMPTY_BED_PPS`]
/// ([`EmptyBed`]), on a bed of its own (removed afterwards, also on
/// errors): the measurement's own latency.
pub fn empty_bed(
    cfg: &Rfc2544Bench,
    stop: &Arc<AtomicBool>,
    progress: Progress3,
) -> Result<Vec<EmptyBed>, String> {
    let rates: Vec<(u32, f64)> = cfg
        .procedures
        .sizes
        .iter()
        .map(|&size| {
            let r = cfg.procedures.capped(size, Some(EMPTY_BED_PPS));
            (size, r.unwrap_or(EMPTY_BED_PPS))
        })
        .collect();
    empty_bed_at(cfg, &rates, stop, progress)
}

/// The empty bed's latency at each (size, rate): the baseline a latency
/// row subtracts, measured at the row's own rate (the generator's batch
/// follows the rate as in the row's trial; a stamped frame never waits for
/// its batch either way).
pub fn empty_bed_at(
    cfg: &Rfc2544Bench,
    rates: &[(u32, f64)],
    stop: &Arc<AtomicBool>,
    progress: Progress3,
) -> Result<Vec<EmptyBed>, String> {
    let name = "empty bed";
    progress(name, 0, "building the test bed");
    let bed_cfg = TestbedConfig {
        name: cfg.bed_name.as_ref().map(|p| format!("{p}e")),
        gro: Some(true),
        ipv6: false,
        ..TestbedConfig::default()
    };
    let bed = Testbed::up(&bed_cfg).map_err(|e| e.to_string())?;
    let ns = bed.ns_dut().to_string();
    let out = (|| {
        let mut sink = bed
            .in_netns(&ns, || {
                XdpCount::attach_verified("d0", AttachMode::Native, false, trial::TAG_OFFSET)
            })
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("sink counter on d0: {e}"))?;
        let addrs = FrameAddrs::for_mode(bed.info(), testbed::DutMode::None);
        let ends = trial::Ends::of_bed(&bed);
        let mut t = bed_trials(ends, &mut sink, addrs, cfg, stop).direct();
        let mut out = Vec::new();
        for &(size, rate) in rates {
            if stop.load(Ordering::SeqCst) {
                break;
            }
            let spec = rfc2544::TrialSpec {
                frame_size: size,
                rate_pps: Some(rate),
                frames: Some((rate * cfg.procedures.trial.as_secs_f64()).round().max(1.0) as u64),
                duration: cfg.procedures.trial,
                latency: true,
                procedure: rfc2544::Procedure::Latency,
            };
            use rfc2544::Trials;
            let mut rec = t.trial(&spec)?;
            for _ in 0..rfc2544::INVALID_REPEATS {
                if rec.invalid.is_empty() || stop.load(Ordering::SeqCst) {
                    break;
                }
                rec = t.trial(&spec)?;
            }
            if let Some(l) = &rec.latency {
                progress(
                    name,
                    size,
                    &format!(
                        "latency at {:.1} Mpps: p50 {:.1} us, p99 {:.1} us",
                        rate / 1e6,
                        l.p50_ns / 1e3,
                        l.p99_ns / 1e3
                    ),
                );
            }
            out.push(EmptyBed {
                frame_size: size,
                rate_pps: rate,
                trial: rec,
            });
        }
        Ok(out)
    })();
    let _ = bed.down();
    out
}

/// Where the bed's work runs, in words (the report's environment and the
/// table's header).
pub fn cpu_placement(cfg: &Rfc2544Bench) -> String {
    let rps = if cfg.rps {
        format!("the kernel's work on d0's frames after its XDP hook (bridge, routing, packet sockets) on CPU {} (RPS)", cfg.dut_cpu)
    } else {
        "the kernel DuTs' forwarding too (no RPS)".into()
    };
    let d0 = if cfg.threaded_napi {
        format!(
            "d0's and d1's NAPI (and XDP) in kernel threads on CPU {}",
            cfg.dut_cpu
        )
    } else {
        format!(
            "d0's NAPI and XDP (an AF_XDP DuT's receive) in the generator's softirq on CPU {}",
            cfg.gen_cpu
        )
    };
    let sink = match cfg.sink_cpu {
        Some(c) => format!("the sink's receive (s0's NAPI and its XDP counter) in a kernel thread on CPU {c}"),
        None => format!(
            "the sink's receive (s0's NAPI and its XDP counter) in the softirq of whatever transmits to s0: the DuT's CPU {} (--sink-cpu moves it)",
            cfg.dut_cpu
        ),
    };
    format!(
        "generator on CPU {}; DuT on CPU {}; {d0}; {rps}; {sink}",
        cfg.gen_cpu, cfg.dut_cpu
    )
}

/// Run the RFC 2544 procedures against every DuT in turn, each on a fresh
/// test bed that is removed afterwards (also on errors and on `stop`).
/// With repetitions, the further throughput searches come in further
/// passes over all the DuTs (each DuT started again on a fresh bed): a
/// DuT's searches are spread over the whole run, so the re-run spread
/// also holds how the machine drifts in that time.
pub fn run_rfc2544(
    cfg: &Rfc2544Bench,
    duts: &mut [Box<dyn Dut>],
    stop: &Arc<AtomicBool>,
    progress: Progress3,
) -> Vec<Rfc2544Result> {
    // This thread (the trials' control: counters, histograms, drains) and
    // the helpers it starts stay off the DuT's CPU: seen taking it from a
    // busy-polling DuT for 2.3 ms at a time. The DuTs' processes do not
    // inherit that: a linerate DuT runs on the DuT's CPU with all its
    // threads (dut::device::on_cpu), the peers' on every CPU
    // (dut::on_every_cpu); the generator pins itself.
    let _off = linerate_io::host::OffCpu::new(cfg.dut_cpu);
    // Every DuT in every direction asked: one result each.
    let jobs: Vec<(usize, Direction)> = (0..duts.len())
        .flat_map(|i| cfg.directions.iter().map(move |&dir| (i, dir)))
        .collect();
    let mut out: Vec<Rfc2544Result> = Vec::new();
    for pass in 0..cfg.procedures.repetitions.max(1) {
        for (j, &(i, dir)) in jobs.iter().enumerate() {
            let d = &mut duts[i];
            if stop.load(Ordering::SeqCst) {
                break;
            }
            if pass > 0 && out.get(j).is_none_or(|r| r.status != "ok") {
                continue;
            }
            let t0 = Instant::now();
            if pass == 0 {
                let mut r = Rfc2544Result::new(&d.name(), d.describe(), d.version());
                r.origin = d.origin();
                r.spec_hash = d.spec_hash();
                r.direction = dir;
                if dir == Direction::Bi && !d.both_ways() {
                    r.status = "skipped: forwards one way only".into();
                }
                out.push(r);
            }
            let r = &mut out[j];
            if r.status != "ok" {
                progress(&r.label(), 0, &r.status);
                continue;
            }
            let label = r.label();
            let bed_name = cfg.bed_name.as_ref().map(|p| format!("{p}{j}"));
            let session = if pass == 0 {
                Session::First
            } else {
                Session::Further(pass)
            };
            if let Err(e) = rfc2544_dut(cfg, d.as_mut(), bed_name, stop, r, session, progress) {
                // A trial cut short by the stop (the check trial included,
                // which then "does not forward") is an interruption.
                r.status = if stop.load(Ordering::SeqCst) {
                    "interrupted".into()
                } else if pass == 0 {
                    e.to_string()
                } else {
                    format!("repetition {}: {e}", pass + 1)
                };
            }
            if stop.load(Ordering::SeqCst) && r.status == "ok" {
                r.status = "interrupted".into();
            }
            r.throughput_spread_own = rfc2544::repeat_spread(&r.sizes);
            r.seconds += t0.elapsed().as_secs_f64();
            progress(&label, 0, &r.status);
        }
    }
    // The latency of every DuT at one load (under the slowest's NDR), per
    // direction.
    for &dir in &cfg.directions {
        let group: Vec<Rfc2544Result> =
            out.iter().filter(|r| r.direction == dir).cloned().collect();
        let rates =
            if cfg.procedures.latency && group.iter().filter(|r| r.status == "ok").count() > 1 {
                common_rates(cfg.common_load, &group)
            } else {
                Vec::new()
            };
        if rates.is_empty() {
            continue;
        }
        for (j, &(i, jdir)) in jobs.iter().enumerate() {
            if stop.load(Ordering::SeqCst) {
                break;
            }
            let r = &mut out[j];
            if jdir != dir || r.status != "ok" {
                continue;
            }
            let t0 = Instant::now();
            let bed_name = cfg.bed_name.as_ref().map(|p| format!("{p}{j}"));
            let session = Session::CommonLoad(&rates);
            let d = &mut duts[i];
            if let Err(e) = rfc2544_dut(cfg, d.as_mut(), bed_name, stop, r, session, progress) {
                r.status = if stop.load(Ordering::SeqCst) {
                    "interrupted".into()
                } else {
                    format!("latency at the common load: {e}")
                };
            }
            r.seconds += t0.elapsed().as_secs_f64();
        }
    }
    let bed = rfc2544::bed_spread(out.iter().map(|r| r.sizes.as_slice())).unwrap_or(0.0);
    for r in &mut out {
        r.throughput_spread = r.throughput_spread_own.map(|own| own.max(bed));
    }
    out
}

/// One session of a DuT: a fresh bed, the DuT started and checked, then
/// the first pass of the procedures (`pass` 0) or a further throughput
/// search at every size; everything removed again.
fn rfc2544_dut(
    cfg: &Rfc2544Bench,
    d: &mut dyn Dut,
    bed_name: Option<String>,
    stop: &Arc<AtomicBool>,
    r: &mut Rfc2544Result,
    session: Session,
    progress: Progress3,
) -> Result<(), DutError> {
    let pass = match session {
        Session::First => 0,
        Session::Further(n) => n,
        Session::CommonLoad(_) => usize::MAX,
    };
    let name = r.label();
    progress(&name, 0, "building the test bed");
    let bed_cfg = TestbedConfig {
        name: bed_name,
        gro: Some(true),
        threaded_napi: cfg.threaded_napi,
        threaded_dut_only: true,
        // No IPv6: no router/neighbour solicitations wander into the counts.
        ipv6: false,
        // The kernel DuTs' forwarding on the DuT's core, as every other
        // DuT's (RFC 2544: the tester is not the device under test).
        rps_cpu: cfg.rps.then_some(cfg.dut_cpu),
        ..TestbedConfig::default()
    };
    let mut bed = Testbed::up(&bed_cfg).map_err(failed)?;
    if let Some(cpu) = cfg.sink_cpu {
        if let Err(e) = bed.sink_napi_thread(cpu) {
            let _ = bed.down();
            return Err(failed(e));
        }
    }
    let ns_sink = bed.ns_sink().to_string();
    let mut sink = match bed.in_netns(&ns_sink, || {
        XdpCount::attach_verified("s0", AttachMode::Native, false, trial::TAG_OFFSET)
    }) {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            let _ = bed.down();
            return Err(failed(format!("sink counter: {e}")));
        }
        Err(e) => {
            let _ = bed.down();
            return Err(failed(e));
        }
    };
    // Both ways: a second verified counter on g0 for the reverse frames.
    let mut rev_sink = if r.direction == Direction::Bi {
        let ns_gen = bed.ns_gen().to_string();
        match bed.in_netns(&ns_gen, || {
            XdpCount::attach_verified("g0", AttachMode::Native, false, trial::TAG_OFFSET)
        }) {
            Ok(Ok(s)) => Some(s),
            Ok(Err(e)) => {
                drop(sink);
                let _ = bed.down();
                return Err(failed(format!("reverse sink counter on g0: {e}")));
            }
            Err(e) => {
                drop(sink);
                let _ = bed.down();
                return Err(failed(e));
            }
        }
    } else {
        None
    };
    progress(&name, 0, "starting");
    let started = d.start(&mut bed, &cfg.env);
    let result = started.and_then(|()| {
        if cfg.threaded_napi {
            let bc = BenchConfig {
                frame_len: 60,
                warmup: Duration::ZERO,
                duration: Duration::ZERO,
                repeat: 1,
                gen_cpu: cfg.gen_cpu,
                dut_cpu: cfg.dut_cpu,
                flows: cfg.flows,
                threaded_napi: true,
                rps: cfg.rps,
                bed_prefix: None,
                env: cfg.env.clone(),
                max_rate: cfg.procedures.max_rate,
            };
            place_napi(&bed, &bc).map_err(failed)?;
        }
        let addrs = FrameAddrs::for_mode(bed.info(), d.mode());
        let mut trials = bed_trials(trial::Ends::of_bed(&bed), &mut sink, addrs, cfg, stop);
        if let Some(rs) = rev_sink.as_mut() {
            trials = trials.both_ways(
                rs,
                FrameAddrs::reverse(bed.info(), d.mode()),
                cfg.reverse_gen_cpu,
            );
        }
        let size0 = cfg.procedures.sizes.first().copied().unwrap_or(64);
        let ready = ready_and_check(
            &mut trials,
            size0,
            d.ready_timeout(),
            &mut || d.alive(),
            stop,
            &mut |w| progress(&name, 0, w),
        );
        let (ready_s, check) = ready.map_err(|e| d.explain(e))?;
        if pass == 0 {
            r.ready_s = Some(ready_s);
            r.check = Some(check);
        }
        let mut p = |size: u32, what: &str| progress(&name, size, what);
        match session {
            Session::First => {
                let last = cfg.procedures.repetitions <= 1;
                r.sizes = rfc2544::first_pass(&cfg.procedures, &mut trials, last, &mut p)
                    .map_err(failed)?;
            }
            Session::Further(n) => {
                // The last pass finishes each size: final trials at the
                // reported NDR and PDR, the latency at the NDR.
                let last = n + 1 >= cfg.procedures.repetitions;
                rfc2544::further_pass(&cfg.procedures, &mut trials, &mut r.sizes, n, last, &mut p)
                    .map_err(failed)?;
            }
            Session::CommonLoad(rates) => {
                for &(size, rate) in rates {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    if let Some(s) = r.sizes.iter_mut().find(|s| s.frame_size == size) {
                        rfc2544::common_latency(&cfg.procedures, &mut trials, s, rate, &mut p)
                            .map_err(failed)?;
                    }
                }
            }
        }
        Ok(())
    });
    let acct = d.stop(&bed);
    drop(sink);
    drop(rev_sink);
    let _ = bed.down();
    result?;
    let acct = acct?;
    if pass == 0 {
        r.dut_account = acct;
    }
    Ok(())
}

/// Wait for a started DuT to forward, then check that it does: probe
/// frames (200 at 20 kpps) until 95 % come out (readiness is measured,
/// never slept for: a DuT may take milliseconds or seconds to attach), at
/// most `timeout`; then 2000 frames at 20 kpps of which 95 % must arrive.
/// (Seconds until ready, the check trial.)
pub(crate) fn ready_and_check(
    trials: &mut dyn rfc2544::Trials,
    size0: u32,
    timeout: Duration,
    alive: &mut dyn FnMut() -> Result<(), DutError>,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(&str),
) -> Result<(f64, rfc2544::TrialRecord), DutError> {
    progress("waiting for the first frames through");
    let t_ready = Instant::now();
    let mut probes = 0u32;
    loop {
        stopped(stop)?;
        alive()?;
        let p = trials
            .trial(&rfc2544::TrialSpec {
                frame_size: size0,
                rate_pps: Some(20_000.0),
                frames: Some(READY_PROBE_FRAMES),
                duration: Duration::from_millis(10),
                latency: false,
                procedure: rfc2544::Procedure::Check,
            })
            .map_err(failed)?;
        probes += 1;
        if p.received * 100 >= READY_PROBE_FRAMES * 95 {
            break;
        }
        if t_ready.elapsed() >= timeout {
            alive()?;
            return Err(failed(format!(
                "never forwarded: {probes} probes of {READY_PROBE_FRAMES} frames in {:.1} s after the start, the last with {} of its frames through (ready_timeout {:.0} s)",
                t_ready.elapsed().as_secs_f64(),
                p.received,
                timeout.as_secs_f64()
            )));
        }
    }
    let ready_s = t_ready.elapsed().as_secs_f64();
    // Does it forward at all? 2000 frames at 20 kpps.
    let check = trials
        .trial(&rfc2544::TrialSpec {
            frame_size: size0,
            rate_pps: Some(20_000.0),
            frames: Some(2000),
            duration: Duration::from_millis(100),
            latency: false,
            procedure: rfc2544::Procedure::Check,
        })
        .map_err(failed)?;
    if check.received < 1900 {
        return Err(failed(format!(
            "does not forward: {} of 2000 check frames at 20 kpps arrived",
            check.received
        )));
    }
    Ok((ready_s, check))
}

/// Pin the NAPI threads: d0 and d1 on the DuT's core, g0 and s0 on the
/// generator's, so the DuT's whole receive and transmit work is on its core.
fn place_napi(bed: &Testbed, cfg: &BenchConfig) -> Result<(), String> {
    for (ns, ifname, cpu) in [
        (bed.ns_dut(), "d0", cfg.dut_cpu),
        (bed.ns_dut(), "d1", cfg.dut_cpu),
        (bed.ns_gen(), "g0", cfg.gen_cpu),
        (bed.ns_sink(), "s0", cfg.gen_cpu),
    ] {
        for e in crate::testbed::napi_of(ns, ifname).map_err(|e| e.to_string())? {
            if let Some(pid) = e.pid {
                crate::testbed::pin_thread(pid, cpu).map_err(|e| e.to_string())?;
            }
        }
    }
    Ok(())
}

fn gs_stop_join(h: std::thread::JoinHandle<()>) {
    let _ = h.join();
}

fn sleep_unless(d: Duration, stop: &AtomicBool) {
    let t = Instant::now();
    while t.elapsed() < d && !stop.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The bench's test frame: IPv4 UDP 1024 -> 9 (discard) of `len` bytes
/// (without FCS), addressed as the DuT needs.
pub fn udp_frame(a: &FrameAddrs, len: usize) -> Vec<u8> {
    generator::ipv4_udp_frame(
        a.dst_mac.0,
        a.src_mac.0,
        a.src_ip.octets(),
        a.dst_ip.octets(),
        1024,
        9,
        len,
    )
}

/// Pin the calling thread to `cpu` (best effort: unpinned, the trial's
/// own checks still hold).
pub fn pin(cpu: usize) {
    let _ = linerate_io::host::pin_to_cpu(cpu);
}

// ------------------------------------------------------ bed names (--name)

static BED_COUNTER: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// The next bed name: `bed_prefix` + counter, or None (the default name).
fn bed_name(cfg: &BenchConfig) -> Option<String> {
    let p = cfg.bed_prefix.as_ref()?;
    Some(format!(
        "{p}{}",
        BED_COUNTER.fetch_add(1, Ordering::Relaxed)
    ))
}

/// SIGINT/SIGTERM: abandon the trial at once (what it made is removed on the way out).
fn stopped(stop: &AtomicBool) -> Result<(), DutError> {
    if stop.load(Ordering::SeqCst) {
        return Err(failed("interrupted"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_guest_row_gives_its_ndr_over_the_host_twins() {
        let with = |name: &str, pps: f64, bound: bool| {
            let mut r = Rfc2544Result::new(name, String::new(), String::new());
            let mut s = rfc2544::SizeResult::new(64);
            s.throughput_pps = Some(pps);
            s.generator_limited = bound;
            r.sizes.push(s);
            r
        };
        let host = with("linerate-xdp", 2e6, false);
        let guest = with("vm:linerate-xdp", 5e4, false);
        let other = with("vm:linux-bridge", 4e4, false);
        let all = vec![host.clone(), guest.clone(), other.clone()];
        assert_eq!(
            guest_host_note(&all, &guest, 64).as_deref(),
            Some("guest/host NDR 0.03x")
        );
        // No host twin in the run, another size, or not a guest: nothing.
        assert_eq!(guest_host_note(&all, &other, 64), None);
        assert_eq!(guest_host_note(&all, &guest, 1518), None);
        assert_eq!(guest_host_note(&all, &host, 64), None);
        // The host generator-limited: the ratio is at most that.
        let all = vec![with("linerate-xdp", 2e6, true), guest.clone()];
        assert_eq!(
            guest_host_note(&all, &guest, 64).as_deref(),
            Some("guest/host NDR <=0.03x")
        );
    }

    #[test]
    fn the_dut_note_gives_the_share_forwarded_in_xdp() {
        let mut r = Rfc2544Result::new("linerate-switch-offload", String::new(), String::new());
        assert_eq!(r.dut_note(), None);
        r.dut_account = Some(serde_json::json!({"forwarded": 10}));
        assert_eq!(
            r.dut_note(),
            None,
            "no offload section: not an offloading DuT"
        );
        r.dut_account = Some(serde_json::json!({
            "offload": {"xdp": {"fwd": 996}, "forwarded": 1000}
        }));
        assert_eq!(
            r.dut_note().as_deref(),
            Some("99.6 % of the frames it forwarded went through XDP (996 of 1000 in its first pass)")
        );
    }

    fn result(name: &str, status: &str, tp: &[(u32, f64)]) -> Rfc2544Result {
        let mut r = Rfc2544Result::new(name, String::new(), String::new());
        r.status = status.into();
        r.sizes = tp
            .iter()
            .map(|&(size, v)| rfc2544::SizeResult {
                frame_size: size,
                throughput_pps: Some(v),
                ..Default::default()
            })
            .collect();
        r
    }

    /// The common load: a fraction of the slowest finished DuT's NDR per
    /// size (failed DuTs left out), or one rate for every size.
    #[test]
    fn common_rates_follow_the_slowest_finished_dut() {
        let rs = vec![
            result("a", "ok", &[(64, 1e6), (1518, 0.5e6)]),
            result("b", "ok", &[(64, 0.4e6), (1518, 0.8e6)]),
            result("c", "failed: x", &[(64, 1e3)]),
        ];
        assert_eq!(
            common_rates(CommonLoad::OfSlowest(0.5), &rs),
            vec![(64, 0.2e6), (1518, 0.25e6)]
        );
        assert_eq!(
            common_rates(CommonLoad::Pps(1e5), &rs),
            vec![(64, 1e5), (1518, 1e5)]
        );
        assert!(common_rates(CommonLoad::Off, &rs).is_empty());
        // A DuT where nothing passed: no rate at that size.
        let zero = vec![
            result("a", "ok", &[(64, 0.0)]),
            result("b", "ok", &[(64, 1e6)]),
        ];
        assert!(common_rates(CommonLoad::OfSlowest(0.5), &zero).is_empty());
    }
}
