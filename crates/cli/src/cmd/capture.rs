//! `linerate capture PORT`: DNAC-style capture (seed 002). Packets are
//! steered by a symmetric flow hash to N workers; a forwarder in front of
//! each worker drops early by rules (libpcap filters, priority classes),
//! shunting and TED; each worker takes batches, runs the in-process
//! analyser and/or writes pcapng files and/or sends the packets it kept
//! out of a port (`--out`). The capture itself is
//! `linerate_pipeline::capture::run`; this parses, calls it and prints the
//! stats once a second and at the end.

use anyhow::{bail, Result};
use linerate_io::OpenOptions;
use linerate_pipeline::capture::run::{self, AnalyserConfig, CaptureConfig, Steering};
use linerate_pipeline::capture::{Filter, ForwarderConfig, HttpConfig, RotateConfig, TedConfig};
use std::path::PathBuf;
use std::sync::Arc;
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
    after_help = include_str!("capture_help.txt")

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
    /// Replace the files of an earlier capture with the same --name in the
    /// --write directory (without it the run is refused before it starts).
    #[arg(long, requires = "write")]
    pub overwrite: bool,
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
    /// Serve Prometheus metrics at http://ADDR:PORT/metrics while running (e.g. 127.0.0.1:9100).
    #[arg(long, value_name = "ADDR:PORT")]
    pub metrics: Option<String>,
    /// Control socket path (Unix stream socket, mode 0600).
    #[arg(long)]
    pub ctl: Option<PathBuf>,
    /// Do not pin threads to CPUs.
    #[arg(long)]
    pub no_pin: bool,
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
    let forwarder = ForwarderConfig {
        keep: compile("filter", &a.filter)?,
        drop: compile("drop", &a.drop)?,
        priority: compile("priority", &a.priority)?,
        ted: TedConfig {
            enabled: a.ted == OnOff::On,
            ..TedConfig::default()
        },
        ..ForwarderConfig::default()
    };
    let write = match &a.write {
        None => None,
        Some(dir) => {
            let mut r = RotateConfig::new(dir, &a.name, 0);
            r.overwrite = a.overwrite;
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
            Some(r)
        }
    };
    let mut open = OpenOptions {
        batch: a.batch,
        busy_poll: false,
        ..OpenOptions::default()
    };
    if let Some(r) = a.ring_size {
        open.ring_size = r;
    }
    let steering = match a.steer {
        Steer::Dispatcher => Steering::Dispatcher,
        Steer::Fanout => Steering::Fanout,
        Steer::Queues => Steering::Queues,
    };
    let cfg = CaptureConfig {
        port: a.port.clone(),
        workers: a.workers,
        steering,
        forwarder,
        analyser: AnalyserConfig {
            http: a.analyser.map(|AnalyserKind::Http| HttpConfig {
                shunt_after_response: a.shunt_after_response,
                ..HttpConfig::default()
            }),
            cost_ns: a.cost_ns,
        },
        write,
        merge: a.merge,
        out: a.out.clone(),
        open,
        ring_slots: a.ring_slots,
        slot_size: a.slot_size,
        // Only when every thread has its own CPU (the dispatcher's RX
        // thread needs one more).
        pin: !a.no_pin && cpus() >= a.workers + usize::from(steering == Steering::Dispatcher),
        deadline: a
            .duration
            .map(|d| Instant::now() + Duration::from_secs_f64(d.max(0.0))),
        ctl: a.ctl.clone(),
    };
    let stop = super::common::stop_flag()?;
    super::common::serve_metrics(a.metrics.as_deref(), "capture", a.json)?;
    let end = run::run(&cfg, &stop, &mut |e| {
        super::common::print_event(e, a.json, a.quiet)
    })
    .map_err(anyhow::Error::msg)?;
    super::common::print_report(&end, a.json);
    let v = &end.report;
    if !a.json {
        let files = v["files"].as_array().map_or(0, |f| f.len());
        if let Some(n) = v["merged_records"].as_u64() {
            eprintln!(
                "merged {n} records into {}",
                v["files"][0].as_str().unwrap_or("")
            );
        } else if files > 0 {
            eprintln!("wrote {files} files");
        }
    }
    match end.error {
        Some(e) => bail!("{e}"),
        None => Ok(()),
    }
}
