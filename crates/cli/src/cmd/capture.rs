//! `linerate capture PORT`: DNAC-style capture (seed 002). Packets are
//! steered by a symmetric flow hash to N workers; a forwarder in front of
//! each worker drops early by rules (libpcap filters, priority classes),
//! shunting and TED; each worker takes batches, runs the in-process
//! analyser and/or writes pcapng files and/or sends the packets it kept
//! out of a port (`--out`, e.g. a veth into a namespace where tcpdump,
//! tshark or Suricata listens).
//!
//! Threads, `--steer dispatcher` (default, any port): one RX thread reads
//! the port in batches and runs the software dispatcher (parse, hash,
//! forwarder, copy into the worker's SPSC ring, publish once per batch);
//! N worker threads pop batches from their rings. `--steer fanout`
//! (AF_PACKET ports): each worker opens its own socket in one
//! PACKET_FANOUT_HASH group (the kernel picks the socket by
//! `__skb_get_hash_symmetric`, so both directions of a connection reach the
//! same worker) and runs its own forwarder; TED's queue signal is then the
//! run of consecutive full batches (a backlog in the kernel ring, see
//! [`FULL_RUN`]).
//!
//! Stats once a second and at the end; a control socket (`--ctl`) takes
//! `shunt SRC:SPORT DST:DPORT PROTO` and `stats`.

use anyhow::{bail, Context, Result};
use linerate_io::{Batch, OpenOptions, Port};
use linerate_pipeline::capture::analyser::{Costly, NullAnalyser};
use linerate_pipeline::capture::worker::{
    dispatcher_worker, monotonic_ns, realtime_ns, CaptureCtl, Consumer, Inbox, OutPort, Shared,
    WorkerShared,
};
use linerate_pipeline::capture::{
    Analyser, CaptureWriter, Dispatcher, Filter, Forwarder, ForwarderConfig, HttpAnalyser,
    HttpConfig, RotateConfig, SteerConfig, TedConfig,
};
use linerate_pipeline::control::{Handler, Limits, Listener, Server};
use linerate_wire::FlowKey;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Steer {
    /// Software dispatcher thread feeding per-worker SPSC rings (any port).
    Dispatcher,
    /// AF_PACKET PACKET_FANOUT_HASH: one socket per worker (afpacket: ports).
    Fanout,
    /// One AF_XDP socket per worker on queues 0..workers (afxdp: ports): the
    /// NIC's RSS spreads the flows (symmetric only with a symmetric RSS key);
    /// a veth picks the queue by the sending CPU.
    Queues,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OnOff {
    On,
    Off,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum AnalyserKind {
    /// HTTP/1.x requests, responses and request/response pairs.
    Http,
}

#[derive(clap::Args)]
#[command(
    about = "Capture with overload control: symmetric steering to workers, TED, shunting, filters, pcapng, analysers",
    after_help = "\
Every packet goes through the forwarder of its worker, which drops, in order: malformed frames,
packets refused by --filter/--drop, shunted connections, and (TED, when the worker's queue fills)
the tails of connections that already carried more than the current threshold. TCP SYN/FIN/RST and
--priority packets are never cut by TED. Every drop is counted by reason:
received = forwarded + drops, per worker.

Files: DIR/NAME-wW-NNNN.pcapng (W worker, NNNN file number), nanosecond timestamps. A record is
'acknowledged' in the stats once the write(2) carrying it has returned; on SIGINT/SIGTERM every
buffered record is written out and the files are closed whole. --merge: one file, DIR/NAME.pcapng,
merged from the workers' files in timestamp order when the capture ends (also on SIGINT/SIGTERM).

A pcap/pcapng file read at top speed (no rate= or speed=) is read no faster than the workers take
it: nothing is dropped for a full ring (like tcpdump -r). With rate= or speed= it is a live feed.

Control socket (--ctl, mode 0600), one command per line:
  shunt 10.0.0.1:40000 10.0.0.2:80 tcp     drop the rest of that connection (both directions)
  stats                                     one JSON line

Examples:
  # 2 workers into one pcapng file (merged in timestamp order at the end)
  linerate capture afpacket:eth1 --workers 2 --write /data --merge
  # 2 workers, pcapng files rotated every 100 MB, stats once a second
  linerate capture afpacket:eth1 --workers 2 --write /data/cap --rotate-mb 100
  # HTTP events, shunting connections once the response headers are seen, TED on
  linerate capture afpacket:eth1 --analyser http --shunt-after-response --json
  # emulate a heavy analyser (2 us per packet) on a replayed trace, TED off
  linerate capture pcap:trace.pcapng --analyser http --cost-ns 2000 --ted off
  # keep only web traffic, TED on, and hand it to an analyser listening on veth1's peer
  linerate capture afpacket:eth1 --filter 'tcp port 80' --out afpacket:veth1
  # kernel fanout instead of the software dispatcher; keep only web traffic
  linerate capture afpacket:eth1 --steer fanout --workers 2 --filter 'tcp port 80'
  # one AF_XDP socket per NIC queue (queues 0 and 1), RSS spreads the flows
  linerate capture afxdp:eth1 --steer queues --workers 2"
)]
pub struct Args {
    /// Port to capture from (URI: afpacket:IFACE, afxdp:IFACE, pcap:FILE...).
    pub port: String,
    /// Worker threads.
    #[arg(long, default_value_t = 1)]
    pub workers: usize,
    /// How packets are spread over the workers.
    #[arg(long, value_enum, default_value_t = Steer::Dispatcher)]
    pub steer: Steer,
    /// Write pcapng files into this directory.
    #[arg(long)]
    pub write: Option<PathBuf>,
    /// Send every packet a worker keeps out of this port (URI, e.g.
    /// afpacket:veth1 into a namespace where an external analyser listens);
    /// each worker opens its own.
    #[arg(long, value_name = "URI")]
    pub out: Option<String>,
    /// At the end, merge the workers' files into one, DIR/NAME.pcapng, in
    /// timestamp order (the workers write their own files while capturing).
    #[arg(long, requires = "write", conflicts_with_all = ["rotate_mb", "rotate_s"])]
    pub merge: bool,
    /// File name prefix.
    #[arg(long, default_value = "capture")]
    pub name: String,
    /// Start a new file when one would exceed this many MB.
    #[arg(long)]
    pub rotate_mb: Option<f64>,
    /// Start a new file every this many seconds.
    #[arg(long)]
    pub rotate_s: Option<f64>,
    /// Keep only packets matching this libpcap filter.
    #[arg(long)]
    pub filter: Option<String>,
    /// Drop packets matching this libpcap filter.
    #[arg(long)]
    pub drop: Option<String>,
    /// Packets matching this libpcap filter are never cut by TED.
    #[arg(long)]
    pub priority: Option<String>,
    /// Tail early dropping.
    #[arg(long, value_enum, default_value_t = OnOff::On)]
    pub ted: OnOff,
    /// In-process analyser run by every worker.
    #[arg(long, value_enum)]
    pub analyser: Option<AnalyserKind>,
    /// http: shunt a connection once a response's headers were seen.
    #[arg(long)]
    pub shunt_after_response: bool,
    /// Busy-wait this many ns per packet in the worker (a heavy analyser).
    #[arg(long, default_value_t = 0)]
    pub cost_ns: u64,
    /// Slots per worker ring (dispatcher steering).
    #[arg(long, default_value_t = 4096)]
    pub ring_slots: usize,
    /// Bytes per ring slot (longer frames are truncated, original length kept).
    #[arg(long, default_value_t = 2048)]
    pub slot_size: usize,
    /// Frames per port ring (afxdp: RX/TX/fill rings, power of two; afpacket ring=mmsg:
    /// receive buffers; ring=v3 sizes its ring with blocks= in the URI).
    #[arg(long)]
    pub ring_size: Option<u32>,
    /// Packets per batch.
    #[arg(long, default_value_t = linerate_io::DEFAULT_BATCH)]
    pub batch: usize,
    /// Stop after this many seconds (default: Ctrl-C, or the end of a finite source).
    #[arg(long)]
    pub duration: Option<f64>,
    /// JSON lines once a second and a final JSON report on stdout.
    #[arg(long)]
    pub json: bool,
    /// No once-a-second lines.
    #[arg(long, short)]
    pub quiet: bool,
    /// Control socket path (Unix stream socket, mode 0600).
    #[arg(long)]
    pub ctl: Option<PathBuf>,
    /// Do not pin threads to CPUs.
    #[arg(long)]
    pub no_pin: bool,
}

/// Named counters published by a thread.
type Counters = Mutex<Vec<(&'static str, u64)>>;

fn text_line(v: &Value) -> String {
    let t = &v["totals"];
    let mut s = format!(
        "{:>7.1}s rx {} fwd {} drop ted {} shunt {} filter {} ring_full {} malformed {} | ack {}",
        v["t"].as_f64().unwrap_or(0.0),
        t["received"],
        t["forwarded"],
        t["dropped"]["ted"],
        t["dropped"]["shunt"],
        t["dropped"]["filter"],
        t["dropped"]["ring_full"],
        t["dropped"]["malformed"],
        t["acknowledged"],
    );
    if t["out_sent"].as_u64().unwrap_or(0) + t["out_dropped"].as_u64().unwrap_or(0) > 0 {
        s += &format!(" | out {} out_drop {}", t["out_sent"], t["out_dropped"]);
    }
    if let Some(ws) = v["workers"].as_array() {
        for w in ws {
            let th = match w["ted_threshold"].as_u64() {
                Some(b) => format!("{b}B"),
                None => "off".into(),
            };
            s += &format!(
                " | w{} rx {} fwd {} q {}/{} ted {}",
                w["worker"],
                w["received"],
                w["forwarded"],
                w["queue_used"],
                w["queue_capacity"],
                th
            );
        }
    }
    if let Some(ev) = t["events"].as_object() {
        for k in ["http_request", "http_response", "http_pair"] {
            if let Some(x) = ev.get(k) {
                s += &format!(" {k} {x}");
            }
        }
    }
    s
}

/// Serve `--ctl`, if given.
fn start_ctl(path: Option<&PathBuf>, shared: &Arc<Shared>) -> Result<Option<Server>> {
    let Some(p) = path else { return Ok(None) };
    let l = Listener::bind(p).map_err(|e| anyhow::anyhow!("--ctl {e}"))?;
    let h: Arc<dyn Handler> = Arc::new(CaptureCtl(shared.clone()));
    Ok(Some(
        Server::start(l, h, Limits::default()).map_err(anyhow::Error::msg)?,
    ))
}

fn cpus() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

pub fn run(a: Args) -> Result<()> {
    if a.workers == 0 || a.workers > 256 {
        bail!("--workers {}: must be 1..=256", a.workers);
    }
    if !(1..=linerate_io::MAX_BATCH).contains(&a.batch) {
        bail!(
            "--batch {}: must be between 1 and {}",
            a.batch,
            linerate_io::MAX_BATCH
        );
    }
    if a.shunt_after_response && a.analyser.is_none() {
        bail!("--shunt-after-response needs --analyser http");
    }
    let compile = |flag: &str, e: &Option<String>| -> Result<Option<Arc<Filter>>> {
        e.as_deref()
            .map(|s| Filter::compile(s).map(Arc::new))
            .transpose()
            .map_err(|e| anyhow::anyhow!("--{flag}: {e}"))
    };
    let fcfg = ForwarderConfig {
        keep: compile("filter", &a.filter)?,
        drop: compile("drop", &a.drop)?,
        priority: compile("priority", &a.priority)?,
        ted: TedConfig {
            enabled: a.ted == OnOff::On,
            ..TedConfig::default()
        },
        ..ForwarderConfig::default()
    };
    let rotate = |w: usize| -> Result<Option<CaptureWriter>> {
        let Some(dir) = &a.write else { return Ok(None) };
        let mut r = RotateConfig::new(dir, &a.name, w);
        if let Some(mb) = a.rotate_mb {
            if mb.is_nan() || mb <= 0.0 {
                bail!("--rotate-mb {mb}: must be > 0");
            }
            r.max_bytes = Some((mb * 1e6) as u64);
        }
        if let Some(s) = a.rotate_s {
            if s.is_nan() || s <= 0.0 {
                bail!("--rotate-s {s}: must be > 0");
            }
            r.max_age = Some(Duration::from_secs_f64(s));
        }
        Ok(Some(CaptureWriter::new(r).map_err(anyhow::Error::msg)?))
    };
    let analyser = || -> Option<Box<dyn Analyser>> {
        let inner: Box<dyn Analyser> = match a.analyser {
            Some(AnalyserKind::Http) => Box::new(HttpAnalyser::new(HttpConfig {
                shunt_after_response: a.shunt_after_response,
                ..HttpConfig::default()
            })),
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
    };
    let stop = super::common::stop_flag()?;
    let deadline = a
        .duration
        .map(|d| Instant::now() + Duration::from_secs_f64(d.max(0.0)));
    let mut opts = OpenOptions {
        batch: a.batch,
        busy_poll: false,
        ..OpenOptions::default()
    };
    if let Some(r) = a.ring_size {
        opts.ring_size = r;
    }
    let n = a.workers;
    // RX thread on CPU 0, workers on 1..; only when every thread has its own CPU.
    let pin = !a.no_pin && cpus() >= n + if a.steer == Steer::Dispatcher { 1 } else { 0 };
    let t0 = Instant::now();
    let wshared: Vec<Arc<WorkerShared>> = (0..n).map(|_| Arc::default()).collect();
    let mut consumers = Vec::with_capacity(n);
    for (w, ws) in wshared.iter().enumerate() {
        let out = match &a.out {
            Some(uri) => {
                let p = linerate_io::open(uri, &opts).with_context(|| format!("--out {uri}"))?;
                Some(OutPort::new(p.tx, a.batch, a.slot_size))
            }
            None => None,
        };
        consumers.push(Consumer::new(
            analyser(),
            rotate(w)?,
            out,
            ws.clone(),
            stop.clone(),
        ));
    }
    match a.steer {
        Steer::Dispatcher => {
            let mut port = linerate_io::open(&a.port, &opts)?;
            let keep_ts = matches!(port.info.clock, "kernel-realtime" | "file");
            let offline = file_at_top_speed(&a.port);
            let (mut d, rxs) = Dispatcher::new(SteerConfig {
                workers: n,
                ring_slots: a.ring_slots,
                slot_size: a.slot_size,
                forwarder: fcfg,
            })
            .map_err(anyhow::Error::msg)?;
            let inbox = Arc::new(Inbox::default());
            let shared = Arc::new(Shared {
                steering: "dispatcher",
                port: port.info.uri.clone(),
                pinned: pin,
                fwd: (0..n).map(|w| d.forwarder(w).shared()).collect(),
                workers: wshared.clone(),
                inboxes: vec![inbox.clone()],
                kernel: Mutex::new(Vec::new()),
                t0,
            });
            if !a.json {
                eprintln!(
                    "capture: {} ({}: {}); {} workers, steering dispatcher{}",
                    port.info.uri,
                    port.info.kind,
                    port.info.detail,
                    n,
                    if pin { ", pinned" } else { "" }
                );
            }
            let ctl = start_ctl(a.ctl.as_ref(), &shared)?;
            let mut handles = Vec::new();
            for (w, (rx, c)) in rxs.into_iter().zip(consumers).enumerate() {
                let batch = a.batch;
                handles.push(
                    std::thread::Builder::new()
                        .name(format!("capture-w{w}"))
                        .spawn(move || {
                            if pin {
                                let _ = super::common::pin_to_cpu(w + 1);
                            }
                            dispatcher_worker(rx, c, batch)
                        })?,
                );
            }
            if pin {
                let _ = super::common::pin_to_cpu(0);
            }
            let mut b = Batch::new(a.batch);
            let mut empty = 0u32;
            let mut last_tick = Instant::now();
            let mut rx_err = None;
            loop {
                if offline {
                    // A file read at top speed cannot overflow: read the
                    // next batch only when every worker's ring has room for
                    // it. A full ring is waited out until a quarter of it is
                    // free, in 1 ms sleeps: few wake-ups, the CPUs stay with
                    // the workers, and the ring still holds far more than
                    // 1 ms of their work. Per batch with room: one relaxed
                    // load per worker.
                    for w in 0..n {
                        let g = d.gauge(w);
                        if g.capacity() - g.used() < a.batch {
                            let want = a.batch.max(g.capacity() / 4);
                            while g.capacity() - g.used() < want && !stop.load(Relaxed) {
                                std::thread::sleep(Duration::from_millis(1));
                            }
                        }
                    }
                }
                match port.rx.recv(&mut b) {
                    Ok(k) if k > 0 => {
                        let now_ns = monotonic_ns(t0);
                        // Shunt requests from the workers apply to this batch
                        // already (one atomic load per worker when none).
                        for w in 0..n {
                            d.forwarder_mut(w).poll_shunts();
                        }
                        let mut rt = None;
                        for p in b.pkts() {
                            let ts = if keep_ts && p.ts_ns() != 0 {
                                p.ts_ns()
                            } else {
                                *rt.get_or_insert_with(realtime_ns)
                            };
                            d.dispatch_one(p.bytes(), ts, now_ns);
                        }
                        port.rx.release(&mut b);
                        inbox.take(|key| {
                            let w = linerate_pipeline::capture::worker_of(&key, n);
                            d.forwarder_mut(w).shunt(&key);
                        });
                        d.flush();
                        empty = 0;
                    }
                    Ok(_) => {
                        empty += 1;
                        if port.rx.at_end() {
                            break;
                        }
                        if empty > 256 {
                            if let Err(e) = port.rx.wait(10) {
                                rx_err = Some(e);
                                break;
                            }
                        }
                    }
                    Err(e) => {
                        rx_err = Some(e);
                        break;
                    }
                }
                if empty == 0 || empty.is_multiple_of(64) {
                    let now = Instant::now();
                    if stop.load(Relaxed) || deadline.is_some_and(|dl| now >= dl) {
                        break;
                    }
                    if now - last_tick >= Duration::from_secs(1) {
                        last_tick = now;
                        d.flush();
                        if let Ok(mut k) = shared.kernel.lock() {
                            *k = port.rx.kernel_stats().counters;
                        }
                        if !a.quiet {
                            let v = shared.snapshot();
                            if a.json {
                                outln!("{v}");
                            } else {
                                outln!("{}", text_line(&v));
                            }
                        }
                    }
                }
            }
            d.flush();
            if let Ok(mut k) = shared.kernel.lock() {
                *k = port.rx.kernel_stats().counters;
            }
            // Workers drain their rings and end once the dispatcher is gone.
            drop(d);
            stop.store(true, Relaxed);
            let errs = join_workers(handles, ctl);
            finish_report(&shared, &a)?;
            if let Some(e) = rx_err {
                return Err(e.into());
            }
            if let Some(e) = errs.into_iter().next() {
                bail!("{e}");
            }
            Ok(())
        }
        Steer::Fanout | Steer::Queues => {
            run_fanout(a, opts, fcfg, consumers, wshared, stop, deadline, pin, t0)
        }
    }
}

fn finish_report(shared: &Shared, a: &Args) -> Result<()> {
    let mut v = shared.snapshot();
    let files: Vec<Value> = shared
        .workers
        .iter()
        .flat_map(|w| w.files.lock().map(|f| f.clone()).unwrap_or_default())
        .map(|p| json!(p.display().to_string()))
        .collect();
    v["files"] = json!(files);
    if let (true, Some(dir)) = (a.merge, &a.write) {
        let inputs: Vec<std::path::PathBuf> = shared
            .workers
            .iter()
            .flat_map(|w| w.files.lock().map(|f| f.clone()).unwrap_or_default())
            .collect();
        let out = dir.join(format!("{}.pcapng", a.name));
        let n = linerate_pipeline::capture::merge_files(&inputs, &out)
            .map_err(|e| anyhow::anyhow!("--merge: {e}"))?;
        v["files"] = json!([out.display().to_string()]);
        v["merged_records"] = json!(n);
    }
    v["final"] = json!(true);
    if a.json {
        outln!("{v}");
    } else {
        outln!("{}", text_line(&v));
        if let Some(n) = v["merged_records"].as_u64() {
            eprintln!(
                "merged {n} records into {}",
                v["files"][0].as_str().unwrap_or("")
            );
        } else if !files.is_empty() {
            eprintln!("wrote {} files", files.len());
        }
    }
    Ok(())
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

/// Fanout steering: the kernel ring's fill is not visible through the port,
/// so TED's queue fraction is the run of consecutive full batches over this
/// many (a worker that keeps up soon gets a partial batch; one that falls
/// behind only gets full ones). Queue "used" in the stats is that run times
/// the batch size, an estimate of the backlog.
const FULL_RUN: usize = 16;

/// The port URI of worker `w` of `workers` with a steering that gives every
/// worker its own port: the user's URI plus the fanout group (fanout; one
/// worker needs no group, and the kernel then skips the per-packet flow
/// hash) or the queue (queues).
fn worker_uri(steer: Steer, port: &str, group: u16, w: usize, workers: usize) -> Result<String> {
    let sep = if port.contains('?') { '&' } else { '?' };
    match steer {
        Steer::Fanout if port.starts_with("afpacket:") && workers == 1 => Ok(port.to_string()),
        Steer::Fanout if port.starts_with("afpacket:") => {
            Ok(format!("{port}{sep}fanout=hash&fanout_group={group}"))
        }
        Steer::Fanout => {
            bail!("--steer fanout: needs an afpacket: port (got '{port}'); use --steer dispatcher")
        }
        Steer::Queues if port.starts_with("afxdp:") => {
            if port.contains("queue=") {
                bail!("--steer queues: '{port}' names a queue; the workers take queues 0..N");
            }
            Ok(format!("{port}{sep}queue={w}"))
        }
        Steer::Queues => {
            bail!("--steer queues: needs an afxdp: port (got '{port}'); use --steer dispatcher")
        }
        Steer::Dispatcher => Ok(port.to_string()),
    }
}

#[allow(clippy::too_many_arguments)]
fn run_fanout(
    a: Args,
    opts: OpenOptions,
    fcfg: ForwarderConfig,
    consumers: Vec<Consumer>,
    wshared: Vec<Arc<WorkerShared>>,
    stop: Arc<AtomicBool>,
    deadline: Option<Instant>,
    pin: bool,
    t0: Instant,
) -> Result<()> {
    let n = a.workers;
    let group = (std::process::id() & 0xffff) as u16;
    let uri = worker_uri(a.steer, &a.port, group, 0, n)?;
    let mut ports: Vec<Port> = Vec::with_capacity(n);
    let mut fwds = Vec::with_capacity(n);
    for w in 0..n {
        let u = worker_uri(a.steer, &a.port, group, w, n)?;
        ports.push(linerate_io::open(&u, &opts).with_context(|| format!("worker {w}: {u}"))?);
        fwds.push(Forwarder::new(fcfg.clone()).map_err(anyhow::Error::msg)?);
    }
    let (steering, how) = match a.steer {
        Steer::Queues => (
            "queues",
            "one AF_XDP socket per queue, RSS spreads the flows",
        ),
        _ => ("fanout", "PACKET_FANOUT_HASH, symmetric"),
    };
    let inboxes: Vec<Arc<Inbox>> = (0..n).map(|_| Arc::default()).collect();
    let shared = Arc::new(Shared {
        steering,
        port: uri.clone(),
        pinned: pin,
        fwd: fwds.iter().map(|f| f.shared()).collect(),
        workers: wshared,
        inboxes: inboxes.clone(),
        kernel: Mutex::new(Vec::new()),
        t0,
    });
    if !a.json {
        eprintln!(
            "capture: {uri} ({}); {n} workers, steering {steering} ({how}){}",
            ports[0].info.detail,
            if pin { ", pinned" } else { "" }
        );
    }
    let ctl = start_ctl(a.ctl.as_ref(), &shared)?;
    let done = Arc::new(AtomicBool::new(false));
    let kstats: Vec<Arc<Counters>> = (0..n).map(|_| Arc::default()).collect();
    let mut handles = Vec::new();
    for (w, ((mut port, mut fwd), mut c)) in ports.into_iter().zip(fwds).zip(consumers).enumerate()
    {
        let (dn, inbox, ks) = (done.clone(), inboxes[w].clone(), kstats[w].clone());
        let batch = a.batch;
        handles.push(std::thread::spawn(move || -> Result<(), String> {
            if pin {
                let _ = super::common::pin_to_cpu(w);
            }
            let mut b = Batch::new(batch);
            let mut shunts: Vec<FlowKey> = Vec::with_capacity(batch);
            let mut empty = 0u32;
            let mut full_run = 0usize;
            let mut last_events = Instant::now();
            c.shared
                .queue_capacity
                .store((FULL_RUN * batch) as u64, Relaxed);
            // A port that fails (its interface went away) ends this worker
            // in order: its files are closed whole and its counts published.
            let mut port_err = None;
            while !dn.load(Relaxed) {
                let k = match port.rx.recv(&mut b) {
                    Ok(k) => k,
                    Err(e) => {
                        port_err = Some(e.to_string());
                        break;
                    }
                };
                if k > 0 {
                    let now_ns = monotonic_ns(t0);
                    // TED's queue signal: the run of full batches (see the module docs).
                    full_run = if k >= batch {
                        (full_run + 1).min(FULL_RUN)
                    } else {
                        0
                    };
                    fwd.set_queue_fraction(full_run as f64 / FULL_RUN as f64);
                    c.shared
                        .queue_used
                        .store((full_run * batch) as u64, Relaxed);
                    inbox.take(|key| fwd.shunt(&key));
                    let mut rt = None;
                    for p in b.pkts() {
                        let ts = if p.ts_ns() != 0 {
                            p.ts_ns()
                        } else {
                            *rt.get_or_insert_with(realtime_ns)
                        };
                        if fwd.decide(p.bytes(), now_ns).is_forward() {
                            if let Some(key) = c.on_packet(p.bytes(), p.len() as usize, ts) {
                                if shunts.len() < shunts.capacity() {
                                    shunts.push(key);
                                }
                            }
                        }
                    }
                    port.rx.release(&mut b);
                    for key in shunts.drain(..) {
                        fwd.shunt(&key);
                    }
                    fwd.publish();
                    empty = 0;
                } else {
                    empty += 1;
                    if empty > 64 {
                        if let Err(e) = port.rx.wait(10) {
                            port_err = Some(e.to_string());
                            break;
                        }
                    }
                }
                if k > 0 || empty.is_multiple_of(64) {
                    let now = Instant::now();
                    let ev = now.duration_since(last_events) >= Duration::from_millis(500);
                    if ev {
                        last_events = now;
                        if let Ok(mut s) = ks.lock() {
                            *s = port.rx.kernel_stats().counters;
                        }
                    }
                    c.after_batch(now, ev);
                }
            }
            fwd.publish();
            if let Ok(mut s) = ks.lock() {
                *s = port.rx.kernel_stats().counters;
            }
            let r = c.finish();
            match port_err {
                Some(e) => Err(e),
                None => r,
            }
        }));
    }
    let mut last_tick = Instant::now();
    loop {
        std::thread::sleep(Duration::from_millis(20));
        let now = Instant::now();
        if stop.load(Relaxed)
            || deadline.is_some_and(|dl| now >= dl)
            || handles.iter().any(|h| h.is_finished())
        {
            break;
        }
        if now - last_tick >= Duration::from_secs(1) {
            last_tick = now;
            sum_kernel(&shared, &kstats);
            if !a.quiet {
                let v = shared.snapshot();
                if a.json {
                    outln!("{v}");
                } else {
                    outln!("{}", text_line(&v));
                }
            }
        }
    }
    done.store(true, Relaxed);
    let errs = join_workers(handles, ctl);
    sum_kernel(&shared, &kstats);
    finish_report(&shared, &a)?;
    if let Some(e) = errs.into_iter().next() {
        bail!("{e}");
    }
    Ok(())
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

/// End of a capture: join the workers (their errors, in order), then stop
/// the control socket thread and remove its file.
fn join_workers<E: From<&'static str>>(
    handles: Vec<std::thread::JoinHandle<Result<(), E>>>,
    ctl: Option<Server>,
) -> Vec<E> {
    let mut errs = Vec::new();
    for h in handles {
        match h.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => errs.push(e),
            Err(_) => errs.push("a worker panicked".into()),
        }
    }
    // Stops accepting and removes the socket file; clients are not waited for.
    if let Some(c) = ctl {
        c.stop();
    }
    errs
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
        assert_eq!(
            worker_uri(Steer::Fanout, "afpacket:eth0?ring=v3", 7, 1, 2).unwrap(),
            "afpacket:eth0?ring=v3&fanout=hash&fanout_group=7"
        );
        assert_eq!(
            worker_uri(Steer::Fanout, "afpacket:eth0", 7, 0, 1).unwrap(),
            "afpacket:eth0"
        );
        assert!(worker_uri(Steer::Fanout, "pcap:x", 1, 0, 2).is_err());
        assert!(worker_uri(Steer::Fanout, "afxdp:eth0", 1, 0, 2).is_err());
        assert_eq!(
            worker_uri(Steer::Queues, "afxdp:eth0", 7, 0, 2).unwrap(),
            "afxdp:eth0?queue=0"
        );
        assert_eq!(
            worker_uri(Steer::Queues, "afxdp:eth0?mode=native", 7, 3, 2).unwrap(),
            "afxdp:eth0?mode=native&queue=3"
        );
        assert!(worker_uri(Steer::Queues, "afxdp:eth0?queue=1", 7, 0, 2).is_err());
        assert!(worker_uri(Steer::Queues, "afpacket:eth0", 7, 0, 2).is_err());
    }
}
