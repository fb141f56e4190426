//! A whole capture (`linerate capture`): open the port(s), start the
//! workers, run the receive side until the end of the source, the deadline
//! or `stop`, then drain, join and report.
//!
//! Threads, [`Steering::Dispatcher`] (any port): one RX thread reads the
//! port in batches and runs the software dispatcher (parse, hash,
//! forwarder, copy into the worker's SPSC ring, publish once per batch);
//! N worker threads ([`dispatcher_worker`]) pop batches from their rings.
//! [`Steering::Fanout`] (AF_PACKET ports): each worker opens its own socket
//! in one PACKET_FANOUT_HASH group (the kernel picks the socket by
//! `__skb_get_hash_symmetric`, so both directions of a connection reach the
//! same worker) and runs its own forwarder; TED's queue signal is then the
//! run of consecutive full batches (a backlog in the kernel ring, see
//! [`FULL_RUN`]). [`Steering::Queues`] (AF_XDP ports): the same with one
//! socket per NIC queue.

use super::analyser::{Costly, NullAnalyser};
use super::worker::{
    dispatcher_worker, monotonic_ns, realtime_ns, CaptureCtl, Consumer, Inbox, OutPort, Shared,
    WorkerShared,
};
use super::{
    check_existing, merge_files, merged_path, Analyser, CaptureWriter, Dispatcher, Forwarder,
    ForwarderConfig, HttpAnalyser, HttpConfig, RotateConfig, SteerConfig,
};
use crate::ctl::{Handler, Limits, Listener, Server};
use crate::poll::{Polling, Watch};
use linerate_io::{Batch, OpenOptions, Port, PortRole};
use linerate_wire::FlowKey;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How packets are spread over the workers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Steering {
    /// Software dispatcher thread feeding per-worker SPSC rings (any port).
    Dispatcher,
    /// AF_PACKET PACKET_FANOUT_HASH: one socket per worker (afpacket: ports).
    Fanout,
    /// One AF_XDP socket per worker on queues 0..workers (afxdp: ports).
    Queues,
}

/// What a worker runs on the packets its forwarder kept.
#[derive(Clone, Debug, Default)]
pub struct AnalyserConfig {
    /// The HTTP/1.x analyser, with these settings.
    pub http: Option<HttpConfig>,
    /// Busy-wait this many ns per packet (a heavy analyser; alone: on a
    /// analyser that does nothing else).
    pub cost_ns: u64,
}

/// A whole capture.
#[derive(Clone, Debug)]
pub struct CaptureConfig {
    /// The port URI (afpacket:IFACE, afxdp:IFACE, pcap:FILE...).
    pub port: String,
    pub workers: usize,
    pub steering: Steering,
    pub forwarder: ForwarderConfig,
    pub analyser: AnalyserConfig,
    /// The workers' pcapng files (`worker` is set per worker).
    pub write: Option<RotateConfig>,
    /// At the end, merge the workers' files into `DIR/NAME.pcapng`.
    pub merge: bool,
    /// Each worker sends the packets it keeps out of its own port at this URI.
    pub out: Option<String>,
    /// Ports are opened with these (`batch`: packets per batch).
    pub open: OpenOptions,
    /// Dispatcher steering: slots per worker ring, bytes per slot.
    pub ring_slots: usize,
    pub slot_size: usize,
    /// Pin the threads (RX thread on CPU 0, workers on 1..), where every
    /// thread has a CPU of its own.
    pub pin: bool,
    pub deadline: Option<Instant>,
    /// Serve the control socket (`shunt`, `stats`) here.
    pub ctl: Option<PathBuf>,
}

/// What the caller hears while the capture runs: one line saying what
/// runs once the port is open, and the stats (JSON) once a second.
pub type Event<'a> = crate::event::Event<'a, super::worker::CaptureSnapshot>;

/// How a capture ended: the final stats (with `files`, and
/// `merged_records` after a merge) and the first error of the port or a
/// worker, if one ended it.
pub struct Finished {
    pub report: Value,
    pub error: Option<String>,
}

impl crate::event::Report for Finished {
    fn json(&self) -> Value {
        self.report.clone()
    }
    fn text(&self) -> String {
        super::worker::text_line(&self.report)
    }
}

/// Named counters published by a thread.
type Counters = Mutex<Vec<(&'static str, u64)>>;

/// Fanout steering: the kernel ring's fill is not visible through the port,
/// so TED's queue fraction is the run of consecutive full batches over this
/// many (a worker that keeps up soon gets a partial batch; one that falls
/// behind only gets full ones). Queue "used" in the stats is that run times
/// the batch size, an estimate of the backlog.
pub const FULL_RUN: usize = 16;

/// Run a capture until the end of its source, its deadline or `stop`.
/// Errors before the capture starts (a port that does not open, a bad
/// setting) are returned as `Err`; errors once it runs end it in order
/// (files closed whole, the final stats made) and are in [`Finished`].
pub fn run(
    cfg: &CaptureConfig,
    stop: &Arc<AtomicBool>,
    on: &mut dyn FnMut(Event<'_>),
) -> Result<Finished, String> {
    let n = cfg.workers;
    if n == 0 || n > 256 {
        return Err(format!("--workers {n}: must be 1..=256"));
    }
    // Refused before any traffic: files of an earlier capture at the names
    // this one writes.
    if let Some(r) = &cfg.write {
        check_existing(r, cfg.merge)?;
    }
    // The capture's port(s) before any file: one that does not open (a
    // mistyped pcap: file) leaves nothing behind.
    let ports = open_inputs(cfg)?;
    let wshared: Vec<Arc<WorkerShared>> = (0..n).map(|_| Arc::default()).collect();
    let mut consumers = Vec::with_capacity(n);
    let out_opts = OpenOptions {
        role: PortRole::TxOnly,
        ..cfg.open.clone()
    };
    for (w, ws) in wshared.iter().enumerate() {
        let out = match &cfg.out {
            Some(uri) => {
                let p =
                    linerate_io::open(uri, &out_opts).map_err(|e| format!("--out {uri}: {e}"))?;
                Some(OutPort::new(p.tx, cfg.open.batch, cfg.slot_size))
            }
            None => None,
        };
        let writer = match &cfg.write {
            Some(r) => Some(CaptureWriter::new(RotateConfig {
                worker: w,
                ..r.clone()
            })?),
            None => None,
        };
        consumers.push(Consumer::new(
            analyser(&cfg.analyser),
            writer,
            out,
            ws.clone(),
            stop.clone(),
        ));
    }
    let t0 = Instant::now();
    let (shared, ctl, error) = match cfg.steering {
        Steering::Dispatcher => dispatch(cfg, ports, consumers, wshared, stop, t0, on)?,
        Steering::Fanout | Steering::Queues => {
            fanout(cfg, ports, consumers, wshared, stop, t0, on)?
        }
    };
    // Stops accepting and removes the socket file; clients are not waited for.
    if let Some(c) = ctl {
        c.stop();
    }
    let mut report = shared.snapshot().to_json();
    let files: Vec<PathBuf> = shared
        .workers
        .iter()
        .flat_map(|w| w.files.lock().map(|f| f.clone()).unwrap_or_default())
        .collect();
    report["files"] = json!(files
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>());
    if let (true, Some(r)) = (cfg.merge, &cfg.write) {
        let out = merged_path(&r.dir, &r.name);
        let k = merge_files(&files, &out, r.overwrite).map_err(|e| format!("--merge: {e}"))?;
        report["files"] = json!([out.display().to_string()]);
        report["merged_records"] = json!(k);
    }
    report["final"] = json!(true);
    Ok(Finished { report, error })
}

/// The port group of fanout steering (one per process).
fn fanout_group() -> u16 {
    (std::process::id() & 0xffff) as u16
}

/// Open the port(s) the capture reads: one (dispatcher steering) or one
/// per worker. Opened as inputs: a `pcap:` file that does not exist is an
/// error, never a new empty file.
fn open_inputs(cfg: &CaptureConfig) -> Result<Vec<Port>, String> {
    let opts = OpenOptions {
        role: PortRole::RxOnly,
        ..cfg.open.clone()
    };
    if cfg.steering == Steering::Dispatcher {
        let p = linerate_io::open(&cfg.port, &opts).map_err(|e| e.to_string())?;
        return Ok(vec![p]);
    }
    let n = cfg.workers;
    let mut ports = Vec::with_capacity(n);
    for w in 0..n {
        let u = worker_uri(cfg.steering, &cfg.port, fanout_group(), w, n)?;
        ports.push(linerate_io::open(&u, &opts).map_err(|e| format!("worker {w}: {u}: {e}"))?);
    }
    Ok(ports)
}

/// A worker's analyser, if it runs one.
fn analyser(a: &AnalyserConfig) -> Option<Box<dyn Analyser>> {
    let inner: Box<dyn Analyser> = match &a.http {
        Some(h) => Box::new(HttpAnalyser::new(*h)),
        None if a.cost_ns > 0 => Box::new(NullAnalyser),
        None => return None,
    };
    Some(if a.cost_ns > 0 {
        Box::new(Costly {
            inner,
            cost_ns: a.cost_ns,
        })
    } else {
        inner
    })
}

/// Serve the control socket, if asked.
fn start_ctl(path: Option<&PathBuf>, shared: &Arc<Shared>) -> Result<Option<Server>, String> {
    let Some(p) = path else { return Ok(None) };
    let l = Listener::bind(p).map_err(|e| format!("--ctl {e}"))?;
    let h: Arc<dyn Handler> = Arc::new(CaptureCtl(shared.clone()));
    Ok(Some(Server::start(l, h, Limits::default())?))
}

/// A capture that ended: its stats, its control socket (still serving), and
/// the first error of the port or a worker.
type Ended = (Arc<Shared>, Option<Server>, Option<String>);

/// Dispatcher steering: the workers on their rings, this thread reads the
/// port and dispatches until the end; then the dispatcher is dropped, the
/// workers drain their rings and end, and are joined.
fn dispatch(
    cfg: &CaptureConfig,
    ports: Vec<Port>,
    consumers: Vec<Consumer>,
    wshared: Vec<Arc<WorkerShared>>,
    stop: &Arc<AtomicBool>,
    t0: Instant,
    on: &mut dyn FnMut(Event<'_>),
) -> Result<Ended, String> {
    let (n, batch) = (cfg.workers, cfg.open.batch);
    let Some(port) = ports.into_iter().next() else {
        return Err("capture: no port".into());
    };
    let keep_ts = matches!(port.info.clock, "kernel-realtime" | "file");
    let offline = file_at_top_speed(&cfg.port);
    let (d, rxs) = Dispatcher::new(SteerConfig {
        workers: n,
        ring_slots: cfg.ring_slots,
        slot_size: cfg.slot_size,
        forwarder: cfg.forwarder.clone(),
    })?;
    let inbox = Arc::new(Inbox::default());
    let shared = Arc::new(Shared {
        steering: "dispatcher",
        port: port.info.uri.clone(),
        pinned: cfg.pin,
        fwd: (0..n).map(|w| d.forwarder(w).shared()).collect(),
        workers: wshared,
        inboxes: vec![inbox.clone()],
        kernel: Mutex::new(Vec::new()),
        t0,
    });
    on(Event::Opened(format!(
        "capture: {} ({}: {}); {} workers, steering dispatcher{}",
        port.info.uri,
        port.info.kind,
        port.info.detail,
        n,
        if cfg.pin { ", pinned" } else { "" }
    )));
    let ctl = start_ctl(cfg.ctl.as_ref(), &shared)?;
    let mut handles = Vec::new();
    for (w, (rx, c)) in rxs.into_iter().zip(consumers).enumerate() {
        let pin = cfg.pin;
        handles.push(
            std::thread::Builder::new()
                .name(format!("capture-w{w}"))
                .spawn(move || {
                    if pin {
                        let _ = linerate_io::host::pin_to_cpu(w + 1);
                    }
                    dispatcher_worker(rx, c, batch)
                })
                .map_err(|e| format!("starting worker {w}: {e}"))?,
        );
    }
    if cfg.pin {
        let _ = linerate_io::host::pin_to_cpu(0);
    }
    let gauges = (0..n).map(|w| d.gauge(w)).collect();
    let mut t = DispatchTurns {
        b: Batch::new(batch),
        port,
        d,
        keep_ts,
        offline,
        starved: false,
        gauges,
        inbox: &inbox,
        shared: &shared,
        deadline: cfg.deadline,
        last_tick: Instant::now(),
        t0,
        on,
    };
    let rx_err = crate::poll::run(&mut t, stop, Polling::Wait).err();
    t.d.flush();
    t.kernel_stats();
    // Workers drain their rings and end once the dispatcher is gone.
    drop(t);
    stop.store(true, Relaxed);
    let errs = join_all(handles);
    Ok((shared, ctl, rx_err.or_else(|| errs.into_iter().next())))
}

/// The dispatcher's turns: a batch from the port into the workers' rings.
struct DispatchTurns<'a, 'o> {
    port: Port,
    b: Batch,
    d: Dispatcher,
    /// The port's timestamps are wall-clock ones (kernel or file).
    keep_ts: bool,
    /// A file read at top speed (see [`DispatchTurns::room`]).
    offline: bool,
    /// A ring was full: wait until a quarter of it is free.
    starved: bool,
    /// The workers' rings' fill, taken once (each a shared handle).
    gauges: Vec<super::spsc::Gauge>,
    inbox: &'a Inbox,
    shared: &'a Shared,
    deadline: Option<Instant>,
    last_tick: Instant,
    t0: Instant,
    on: &'a mut (dyn FnMut(Event<'_>) + 'o),
}

impl DispatchTurns<'_, '_> {
    /// A file read at top speed cannot overflow: the next batch is read
    /// only when every worker's ring has room for it. A full ring is waited
    /// out until a quarter of it is free, in 1 ms waits: few wake-ups, the
    /// CPUs stay with the workers, and the ring still holds far more than
    /// 1 ms of their work. Per batch with room: one relaxed load per worker.
    fn room(&mut self) -> bool {
        let batch = self.b.capacity();
        let starved = self.gauges.iter().any(|g| {
            let want = if self.starved {
                batch.max(g.capacity() / 4)
            } else {
                batch
            };
            g.capacity() - g.used() < want
        });
        self.starved = starved;
        !starved
    }

    fn kernel_stats(&self) {
        if let Ok(mut k) = self.shared.kernel.lock() {
            *k = self.port.rx.kernel_stats().counters;
        }
    }
}

impl crate::poll::Poll for DispatchTurns<'_, '_> {
    type Error = String;

    fn turn(&mut self) -> Result<usize, String> {
        if self.offline && !self.room() {
            return Ok(0);
        }
        let k = self.port.rx.recv(&mut self.b).map_err(|e| e.to_string())?;
        if k == 0 {
            return Ok(0);
        }
        let n = self.d.workers();
        let d = &mut self.d;
        let now_ns = monotonic_ns(self.t0);
        // Shunt requests from the workers apply to this batch already (one
        // atomic load per worker when none).
        for w in 0..n {
            d.forwarder_mut(w).poll_shunts();
        }
        let mut rt = None;
        for p in self.b.pkts() {
            let ts = if self.keep_ts && p.ts_ns() != 0 {
                p.ts_ns()
            } else {
                *rt.get_or_insert_with(realtime_ns)
            };
            d.dispatch_one(p.bytes(), ts, now_ns);
        }
        self.port
            .rx
            .release(&mut self.b)
            .map_err(|e| e.to_string())?;
        self.inbox.take(|key| {
            let w = super::worker_of(&key, n);
            d.forwarder_mut(w).shunt(&key);
        });
        d.flush();
        Ok(k)
    }

    fn at_end(&self) -> bool {
        // A file still to be read waits for ring room, not at its end.
        !self.starved && self.port.rx.at_end()
    }

    fn wait(&mut self, timeout_ms: i32) -> Result<(), String> {
        if self.starved {
            std::thread::sleep(Duration::from_millis(1));
            return Ok(());
        }
        self.port.rx.wait(timeout_ms).map_err(|e| e.to_string())
    }

    fn tend(&mut self, _got: usize) -> Result<bool, String> {
        let now = Instant::now();
        if self.deadline.is_some_and(|dl| now >= dl) {
            return Ok(true);
        }
        if now - self.last_tick >= Duration::from_secs(1) {
            self.last_tick = now;
            self.d.flush();
            self.kernel_stats();
            (self.on)(Event::Tick(&self.shared.snapshot()));
        }
        Ok(false)
    }
}

/// A pcap/pcapng file read at top speed (no `rate=` or `speed=` other than
/// top): the dispatcher then waits for ring room instead of dropping, as
/// tcpdump -r or Suricata's offline mode never drop.
fn file_at_top_speed(port: &str) -> bool {
    linerate_io::Uri::parse(port).is_ok_and(|u| {
        u.scheme == "pcap"
            && u.get("rate").is_none()
            && u.get("speed").is_none_or(|s| s == "top")
            && u.get("mode").is_none_or(|m| m == "read")
    })
}

/// The port URI of worker `w` of `workers` with a steering that gives every
/// worker its own port: the user's URI plus the fanout group (fanout; one
/// worker needs no group, and the kernel then skips the per-packet flow
/// hash) or the queue (queues).
fn worker_uri(
    steer: Steering,
    port: &str,
    group: u16,
    w: usize,
    workers: usize,
) -> Result<String, String> {
    let sep = if port.contains('?') { '&' } else { '?' };
    match steer {
        Steering::Fanout if port.starts_with("afpacket:") && workers == 1 => Ok(port.to_string()),
        Steering::Fanout if port.starts_with("afpacket:") => {
            Ok(format!("{port}{sep}fanout=hash&fanout_group={group}"))
        }
        Steering::Fanout => Err(format!(
            "--steer fanout: needs an afpacket: port (got '{port}'); use --steer dispatcher"
        )),
        Steering::Queues if port.starts_with("afxdp:") => {
            if port.contains("queue=") {
                return Err(format!(
                    "--steer queues: '{port}' names a queue; the workers take queues 0..N"
                ));
            }
            Ok(format!("{port}{sep}queue={w}"))
        }
        Steering::Queues => Err(format!(
            "--steer queues: needs an afxdp: port (got '{port}'); use --steer dispatcher"
        )),
        Steering::Dispatcher => Ok(port.to_string()),
    }
}

/// Fanout and queue steering: every worker reads its own port and runs its
/// own forwarder; this thread publishes the stats until the end and tells
/// the workers to stop (they close their files and publish their counts).
fn fanout(
    cfg: &CaptureConfig,
    ports: Vec<Port>,
    consumers: Vec<Consumer>,
    wshared: Vec<Arc<WorkerShared>>,
    stop: &Arc<AtomicBool>,
    t0: Instant,
    on: &mut dyn FnMut(Event<'_>),
) -> Result<Ended, String> {
    let n = cfg.workers;
    let uri = worker_uri(cfg.steering, &cfg.port, fanout_group(), 0, n)?;
    let mut fwds = Vec::with_capacity(n);
    for _ in 0..n {
        fwds.push(Forwarder::new(cfg.forwarder.clone())?);
    }
    let (steering, how) = match cfg.steering {
        Steering::Queues => (
            "queues",
            "one AF_XDP socket per queue, RSS spreads the flows",
        ),
        _ => ("fanout", "PACKET_FANOUT_HASH, symmetric"),
    };
    let inboxes: Vec<Arc<Inbox>> = (0..n).map(|_| Arc::default()).collect();
    let shared = Arc::new(Shared {
        steering,
        port: uri.clone(),
        pinned: cfg.pin,
        fwd: fwds.iter().map(|f| f.shared()).collect(),
        workers: wshared,
        inboxes: inboxes.clone(),
        kernel: Mutex::new(Vec::new()),
        t0,
    });
    on(Event::Opened(format!(
        "capture: {uri} ({}); {n} workers, steering {steering} ({how}){}",
        ports[0].info.detail,
        if cfg.pin { ", pinned" } else { "" }
    )));
    let ctl = start_ctl(cfg.ctl.as_ref(), &shared)?;
    let done = Arc::new(AtomicBool::new(false));
    let kstats: Vec<Arc<Counters>> = (0..n).map(|_| Arc::default()).collect();
    let mut handles = Vec::new();
    for (w, ((port, fwd), c)) in ports.into_iter().zip(fwds).zip(consumers).enumerate() {
        let (dn, inbox, ks) = (done.clone(), inboxes[w].clone(), kstats[w].clone());
        let (batch, pin) = (cfg.open.batch, cfg.pin);
        handles.push(std::thread::spawn(move || {
            if pin {
                let _ = linerate_io::host::pin_to_cpu(w);
            }
            fanout_worker(port, fwd, c, &dn, &inbox, &ks, batch, t0)
        }));
    }
    let mut w = Watch::new(stop, cfg.deadline);
    while let Some(second) = w.next() {
        if handles.iter().any(|h| h.is_finished()) {
            break;
        }
        if second.is_some() {
            sum_kernel(&shared, &kstats);
            on(Event::Tick(&shared.snapshot()));
        }
    }
    done.store(true, Relaxed);
    // The workers end at `done`; join them before the kernel counts are summed.
    let errs = join_all(handles);
    sum_kernel(&shared, &kstats);
    Ok((shared, ctl, errs.into_iter().next()))
}

/// One worker of fanout/queue steering: its own port, forwarder and
/// consumer, until `done` or its port fails.
#[allow(clippy::too_many_arguments)]
fn fanout_worker(
    port: Port,
    fwd: Forwarder,
    mut c: Consumer,
    done: &AtomicBool,
    inbox: &Inbox,
    ks: &Counters,
    batch: usize,
    t0: Instant,
) -> Result<(), String> {
    c.shared
        .queue_capacity
        .store((FULL_RUN * batch) as u64, Relaxed);
    let mut t = PortTurns {
        b: Batch::new(batch),
        port,
        fwd,
        c: &mut c,
        inbox,
        ks,
        shunts: Vec::with_capacity(batch),
        full_run: 0,
        last_events: Instant::now(),
        t0,
    };
    // A port that fails (its interface went away) ends this worker in
    // order: its files are closed whole and its counts published.
    let port_err = crate::poll::run(&mut t, done, Polling::Wait).err();
    t.fwd.publish();
    t.kernel_stats();
    let r = c.finish();
    match port_err {
        Some(e) => Err(e),
        None => r,
    }
}

/// A fanout or queue worker's turns over its own port.
struct PortTurns<'a> {
    port: Port,
    b: Batch,
    fwd: Forwarder,
    c: &'a mut Consumer,
    inbox: &'a Inbox,
    ks: &'a Counters,
    shunts: Vec<FlowKey>,
    /// Full batches in a row (TED's queue signal, see [`FULL_RUN`]).
    full_run: usize,
    last_events: Instant,
    t0: Instant,
}

impl PortTurns<'_> {
    fn kernel_stats(&self) {
        if let Ok(mut s) = self.ks.lock() {
            *s = self.port.rx.kernel_stats().counters;
        }
    }
}

impl crate::poll::Poll for PortTurns<'_> {
    type Error = String;

    fn turn(&mut self) -> Result<usize, String> {
        let k = self.port.rx.recv(&mut self.b).map_err(|e| e.to_string())?;
        if k == 0 {
            return Ok(0);
        }
        let now_ns = monotonic_ns(self.t0);
        let batch = self.b.capacity();
        self.full_run = if k >= batch {
            (self.full_run + 1).min(FULL_RUN)
        } else {
            0
        };
        let fwd = &mut self.fwd;
        fwd.set_queue_fraction(self.full_run as f64 / FULL_RUN as f64);
        self.c
            .shared
            .queue_used
            .store((self.full_run * batch) as u64, Relaxed);
        self.inbox.take(|key| fwd.shunt(&key));
        let mut rt = None;
        for p in self.b.pkts() {
            let ts = if p.ts_ns() != 0 {
                p.ts_ns()
            } else {
                *rt.get_or_insert_with(realtime_ns)
            };
            if fwd.decide(p.bytes(), now_ns).is_forward() {
                if let Some(key) = self.c.on_packet(p.bytes(), p.len() as usize, ts) {
                    if self.shunts.len() < self.shunts.capacity() {
                        self.shunts.push(key);
                    }
                }
            }
        }
        self.port
            .rx
            .release(&mut self.b)
            .map_err(|e| e.to_string())?;
        for key in self.shunts.drain(..) {
            fwd.shunt(&key);
        }
        fwd.publish();
        Ok(k)
    }

    fn at_end(&self) -> bool {
        self.port.rx.at_end()
    }

    fn wait(&mut self, timeout_ms: i32) -> Result<(), String> {
        self.port.rx.wait(timeout_ms).map_err(|e| e.to_string())
    }

    fn tend(&mut self, _got: usize) -> Result<bool, String> {
        let now = Instant::now();
        let ev = now.duration_since(self.last_events) >= Duration::from_millis(500);
        if ev {
            self.last_events = now;
            self.kernel_stats();
        }
        self.c.after_batch(now, ev);
        Ok(false)
    }
}

fn sum_kernel(shared: &Shared, ks: &[Arc<Counters>]) {
    let mut tot: Vec<(&'static str, u64)> = Vec::new();
    for k in ks {
        for (n, v) in k.lock().map(|x| x.clone()).unwrap_or_default() {
            match tot.iter_mut().find(|(m, _)| *m == n) {
                Some(e) => e.1 += v,
                None => tot.push((n, v)),
            }
        }
    }
    if let Ok(mut k) = shared.kernel.lock() {
        *k = tot;
    }
}

/// Join the workers: their errors, in order.
fn join_all(handles: Vec<std::thread::JoinHandle<Result<(), String>>>) -> Vec<String> {
    handles
        .into_iter()
        .filter_map(|h| match h.join() {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e),
            Err(_) => Some("a worker panicked".into()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_files_at_top_speed_are_read_with_backpressure() {
        assert!(file_at_top_speed("pcap:/t/x.pcapng"));
        assert!(file_at_top_speed("pcap:/t/x.pcap?speed=top&loop=2"));
        assert!(!file_at_top_speed("pcap:/t/x.pcap?rate=1000"));
        assert!(!file_at_top_speed("pcap:/t/x.pcap?speed=original"));
        assert!(!file_at_top_speed("afpacket:eth0"));
        assert!(!file_at_top_speed("mem:a?source=60"));
    }

    #[test]
    fn worker_ports_by_steering() {
        let f = Steering::Fanout;
        let q = Steering::Queues;
        assert_eq!(
            worker_uri(f, "afpacket:eth0?ring=v3", 7, 1, 2).unwrap(),
            "afpacket:eth0?ring=v3&fanout=hash&fanout_group=7"
        );
        assert_eq!(
            worker_uri(f, "afpacket:eth0", 7, 0, 1).unwrap(),
            "afpacket:eth0"
        );
        assert!(worker_uri(f, "pcap:x", 1, 0, 2).is_err());
        assert!(worker_uri(f, "afxdp:eth0", 1, 0, 2).is_err());
        assert_eq!(
            worker_uri(q, "afxdp:eth0", 7, 0, 2).unwrap(),
            "afxdp:eth0?queue=0"
        );
        assert_eq!(
            worker_uri(q, "afxdp:eth0?mode=native", 7, 3, 2).unwrap(),
            "afxdp:eth0?mode=native&queue=3"
        );
        assert!(worker_uri(q, "afxdp:eth0?queue=1", 7, 0, 2).is_err());
        assert!(worker_uri(q, "afpacket:eth0", 7, 0, 2).is_err());
    }
}
