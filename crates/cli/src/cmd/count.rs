//! `linerate count PORT`: the receiver: per-stream packets, rate, loss,
//! reordering, duplicates and latency from linerate's signatures.

use anyhow::{bail, Context, Result};
use linerate_io::OpenOptions;
use linerate_pipeline::event::Event;
use linerate_pipeline::receiver::{clock, receive_loop, xdp, Clock, Receiver, Until};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

#[derive(clap::Args)]
#[command(
    about = "Receive and measure: per-stream rate, loss, reordering, duplicates and latency",
    after_help = "\
Reads linerate's measurement signature (stream id, sequence number, TX time) from the L4 payload of
every packet; packets without one are counted as unsigned. Latency = RX time - TX time, both in
CLOCK_MONOTONIC; the report names the RX clock (kernel timestamps of TPACKET_V3 converted from
CLOCK_REALTIME, or user space per batch) and its resolution.

Examples:
  # count on an interface for 10 s, once-a-second lines, final table
  linerate count afpacket:s0 --duration 10
  # JSON lines and a final JSON report; latency histogram and CDF as CSV files
  linerate count afxdp:s0 --json --out results/
  # loss, reordering and duplicates in a capture
  linerate count pcap:trace.pcapng
  # count in the kernel (XDP program, per-CPU counters; nothing reaches user space)
  linerate count s0 --xdp --duration 10 --json"
)]
pub struct Args {
    /// Port to receive on (URI).
    pub port: String,
    /// Stop after this many seconds (default: Ctrl-C, or the end of a finite source).
    #[arg(long)]
    pub duration: Option<f64>,
    /// Stop after this many packets.
    #[arg(long)]
    pub packets: Option<u64>,
    /// Stop when no packet arrived for this many seconds (after the first one).
    #[arg(long)]
    pub idle: Option<f64>,
    /// Packets per batch.
    #[arg(long, default_value_t = linerate_io::DEFAULT_BATCH)]
    pub batch: usize,
    /// Write report.json, report.txt and latency histogram/CDF CSVs per stream into this directory.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// JSON lines once a second and a final JSON report on stdout.
    #[arg(long)]
    pub json: bool,
    /// No once-a-second lines.
    #[arg(long, short)]
    pub quiet: bool,
    /// Serve Prometheus metrics at http://ADDR:PORT/metrics while running (e.g. 127.0.0.1:9100).
    #[arg(long, value_name = "ADDR:PORT")]
    pub metrics: Option<String>,
    /// Count in the kernel: an XDP program on the interface (IF or afxdp:IF)
    /// counts and drops every frame; packets and bytes only (the analogue of
    /// a capture kernel module, seed 003).
    #[arg(long, conflicts_with_all = ["out", "batch"])]
    pub xdp: bool,
}

pub fn run(a: Args) -> Result<()> {
    if !(1..=linerate_io::MAX_BATCH).contains(&a.batch) {
        bail!(
            "--batch {}: must be between 1 and {}",
            a.batch,
            linerate_io::MAX_BATCH
        );
    }
    let stop = super::common::stop_flag()?;
    super::common::serve_metrics(a.metrics.as_deref(), "count", a.json)?;
    if a.xdp {
        return count_xdp(&a, &stop);
    }
    let opts = OpenOptions {
        batch: a.batch,
        busy_poll: false,
        role: linerate_io::PortRole::RxOnly,
        ..OpenOptions::default()
    };
    let mut port = linerate_io::open(&a.port, &opts)?;
    // A capture's timestamps are CLOCK_REALTIME of the machine that wrote it.
    let clock = match port.info.clock {
        "file" => Clock::kernel_realtime(),
        c => Clock::for_port(c),
    };
    let mut rx = Receiver::new(clock);
    if !a.json {
        eprintln!(
            "count: {} ({}: {}); {}",
            port.info.uri,
            port.info.kind,
            port.info.detail,
            rx.clock().describe()
        );
    }
    let deadline = a
        .duration
        .map(|d| Instant::now() + Duration::from_secs_f64(d.max(0.0)));
    let (json, quiet) = (a.json, a.quiet);
    let t0 = Instant::now();
    // A port that fails (its interface went away) ends the loop; what was
    // counted up to then is still reported and written, then the error.
    let looped = receive_loop(
        port.rx.as_mut(),
        &mut rx,
        a.batch,
        &stop,
        Until {
            deadline,
            packets: a.packets,
            idle: a.idle.map(Duration::from_secs_f64),
        },
        |rx| {
            super::common::publish(rx);
            if quiet {
                return;
            }
            let s = rx.snapshot(clock::monotonic_ns());
            if json {
                outln!("{}", serde_json::to_string(&s).unwrap_or_default());
            } else {
                outln!(
                    "{:>7.1}s {}",
                    t0.elapsed().as_secs_f64(),
                    s.to_text().trim_end()
                );
            }
        },
    );
    let report = rx.final_report();
    if let Some(dir) = &a.out {
        let files = rx
            .write_dir(dir)
            .with_context(|| format!("--out {}", dir.display()))?;
        if !a.json {
            eprintln!("wrote {} files to {}", files.len(), dir.display());
        }
    }
    if a.json {
        outln!("{}", report.to_json());
    } else {
        out!("{}", report.to_text());
    }
    Ok(looped?)
}

/// `--xdp`: the in-kernel counter on the interface until a stop condition;
/// once-a-second lines from its per-CPU counters.
fn count_xdp(a: &Args, stop: &AtomicBool) -> Result<()> {
    let ifname = super::common::xdp_ifname(&a.port)?;
    let line = |t: f64, s: &linerate_io::xdp::count::CountStats, pps: f64| {
        if a.json {
            serde_json::json!({
                "t": t, "mode": "xdp", "interface": ifname,
                "packets": s.packets, "bytes": s.bytes, "pps": pps,
            })
            .to_string()
        } else {
            format!(
                "{t:>7.1}s {} packets {} bytes {:.3} Mpps",
                s.packets,
                s.bytes,
                pps / 1e6
            )
        }
    };
    let until = Until {
        deadline: a
            .duration
            .map(|d| Instant::now() + Duration::from_secs_f64(d.max(0.0))),
        packets: a.packets,
        idle: a.idle.map(Duration::from_secs_f64),
    };
    let end = xdp::run(&ifname, until, stop, &mut |ev| match ev {
        Event::Opened(what) if !a.json => eprintln!("{what}"),
        Event::Opened(_) => {}
        Event::Tick(s) => {
            super::common::publish(&s.tick);
            if !a.quiet {
                outln!("{}", line(s.t, s.tick.stats, s.pps));
            }
        }
    })
    .map_err(anyhow::Error::msg)?;
    let pps = end.stats.packets as f64 / end.elapsed_s.max(1e-9);
    if a.json {
        outln!("{}", line(end.elapsed_s, &end.stats, pps));
    } else {
        outln!("total: {}", line(end.elapsed_s, &end.stats, pps));
    }
    // An interface gone or down ends the count: the total, then the error.
    match end.error {
        Some(e) => bail!(e),
        None => Ok(()),
    }
}
