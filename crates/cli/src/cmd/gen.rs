//! `linerate gen PORT`: the traffic generator (streams from a TOML profile
//! or command-line shortcuts, rate control, field variation, measurement
//! signatures), its XDP fast path, pcap replay, Lua scenarios, and an
//! optional receiver in the same process.

use crate::script;
use anyhow::{bail, Context, Result};
use linerate_pipeline::generate::replay::Replay;
use linerate_pipeline::generate::session::{GenSession, GenSetup};
use linerate_pipeline::generate::{Profile, RateSpec, Shortcut};
use std::path::PathBuf;

#[derive(clap::Args)]
#[command(
    about = "Generate traffic: streams, rates, field variation, sequence numbers and TX timestamps",
    after_help = include_str!("gen_help.txt")
)]
pub struct Args {
    /// Output port (URI); with --xdp an interface (IF or afxdp:IF).
    pub port: String,
    /// Streams from a TOML profile (see examples/). Shortcut flags then only override the duration and count.
    #[arg(long)]
    pub profile: Option<PathBuf>,
    /// Frame size without FCS (60 = 64 on the wire), or an IMIX preset: imix, ipv6-imix.
    /// Default 60, or the smallest frame that holds the headers (IPv6 TCP: 74) and, with --signature,
    /// the signature (IPv4 UDP: 66).
    #[arg(long)]
    pub size: Option<String>,
    #[arg(long, default_value = "10.0.1.1")]
    pub src_ip: String,
    #[arg(long, default_value = "10.0.2.2")]
    pub dst_ip: String,
    #[arg(long, default_value = "02:00:00:00:00:01")]
    pub src_mac: String,
    #[arg(long, default_value = "02:00:00:00:00:02")]
    pub dst_mac: String,
    /// L4 protocol of the one-stream shortcut.
    #[arg(long, value_parser = ["udp", "tcp", "icmp"], default_value = "udp")]
    pub proto: String,
    #[arg(long, default_value_t = 1024)]
    pub sport: u16,
    #[arg(long, default_value_t = 9)]
    pub dport: u16,
    /// 802.1Q tag (repeat for QinQ, outermost first).
    #[arg(long)]
    pub vlan: Vec<u16>,
    /// Vary the UDP/TCP source port over this many values (flows).
    #[arg(long, default_value_t = 1)]
    pub flows: u32,
    /// Rate: pps (1000, 250kpps, 1.5Mpps) or bit/s (100Mbps, 10Gbps, 10Gbps@l2). Default: as fast as the port takes.
    #[arg(long)]
    pub rate: Option<String>,
    /// Departure process.
    #[arg(long, value_parser = ["cbr", "poisson", "burst"], default_value = "cbr")]
    pub pace: String,
    /// Packets per burst with --pace burst.
    #[arg(long, default_value_t = 32)]
    pub burst: u32,
    /// Stop after this many seconds.
    #[arg(long)]
    pub duration: Option<f64>,
    /// Stop after this many packets (per stream).
    #[arg(long)]
    pub count: Option<u64>,
    /// Put linerate's signature (stream, sequence number, TX time) in every packet.
    #[arg(long)]
    pub signature: bool,
    /// With --signature: only every Nth packet carries it (the others have the same size and headers).
    #[arg(long, default_value_t = 1)]
    pub sample_every: u32,
    /// In-kernel fast path: BPF_PROG_RUN with XDP live frames out of the interface (first stream only).
    #[arg(long)]
    pub xdp: bool,
    /// Replay a pcap/pcapng file instead of generating.
    #[arg(long)]
    pub replay: Option<PathBuf>,
    /// Replay speed: top, original, or a multiplier such as 2.
    #[arg(long)]
    pub speed: Option<String>,
    /// Replay this many times (0 = forever).
    #[arg(long = "loop")]
    pub loops: Option<u32>,
    /// Run a Lua scenario against the running generator (sandboxed: no io,
    /// os, require, dofile or loadfile).
    #[arg(long)]
    pub script: Option<PathBuf>,
    /// Give the script Lua's io, os and package libraries and bytecode
    /// (`string.dump`, binary chunks); it runs as the user running
    /// linerate, usually root.
    #[arg(long, requires = "script")]
    pub script_unsafe: bool,
    /// Receive on this port in the same process (loopback through a device under test) and report.
    #[arg(long)]
    pub rx: Option<String>,
    /// Packets per batch.
    #[arg(long, default_value_t = linerate_io::DEFAULT_BATCH)]
    pub batch: usize,
    /// CPU to pin the generator thread to.
    #[arg(long)]
    pub cpu: Option<usize>,
    /// JSON lines and a final JSON object on stdout.
    #[arg(long)]
    pub json: bool,
    /// No once-a-second lines.
    #[arg(long, short)]
    pub quiet: bool,
    /// Serve Prometheus metrics at http://ADDR:PORT/metrics while running (e.g. 127.0.0.1:9100).
    #[arg(long, value_name = "ADDR:PORT")]
    pub metrics: Option<String>,
}

/// Parse a rate: pps or bit/s, with an optional `@l1` / `@l2`.
fn parse_rate(s: &str) -> Result<RateSpec> {
    RateSpec::parse(s).map_err(anyhow::Error::msg)
}

fn build_profile(a: &Args) -> Result<Profile> {
    let mut p = match &a.profile {
        Some(f) => Profile::load(f)?,
        None => Profile::single(
            Shortcut {
                src_ip: a.src_ip.clone(),
                dst_ip: a.dst_ip.clone(),
                src_mac: a.src_mac.clone(),
                dst_mac: a.dst_mac.clone(),
                proto: a.proto.clone(),
                sport: a.sport,
                dport: a.dport,
                vlan: a.vlan.clone(),
                size: a.size.clone(),
                flows: a.flows,
                rate: a
                    .rate
                    .as_deref()
                    .map(RateSpec::parse)
                    .transpose()
                    .map_err(anyhow::Error::msg)?,
                pace: a.pace.clone(),
                burst: a.burst,
                signature: a.signature,
                sample_every: a.sample_every,
            }
            .stream()
            .map_err(anyhow::Error::msg)?,
        ),
    };
    if a.duration.is_some() {
        p.duration_s = a.duration;
    }
    if a.count.is_some() {
        p.count = a.count;
    }
    Ok(p)
}

pub fn run(a: Args) -> Result<()> {
    if !(1..=linerate_io::MAX_BATCH).contains(&a.batch) {
        bail!(
            "--batch {}: must be between 1 and {}",
            a.batch,
            linerate_io::MAX_BATCH
        );
    }
    if a.replay.is_some() {
        if a.metrics.is_some() {
            bail!("--metrics: gen --replay has no once-a-second reports yet; leave --metrics off");
        }
        return replay(&a);
    }
    if a.speed.is_some() || a.loops.is_some() {
        bail!("--speed and --loop apply to --replay");
    }
    let profile = build_profile(&a)?;
    let stop = super::common::stop_flag()?;
    if a.xdp && a.metrics.is_some() {
        bail!("--metrics: gen --xdp runs to its end without once-a-second reports; leave --xdp out or --metrics off");
    }
    super::common::serve_metrics(a.metrics.as_deref(), "gen", a.json)?;
    if a.xdp {
        let ifname = super::common::xdp_ifname(&a.port)?;
        if let Some(c) = a.cpu {
            super::common::pin_to_cpu(c)?;
        }
        let st =
            linerate_pipeline::generate::xdp::run(&profile, &ifname, a.flows, &stop, &mut |l| {
                if !a.json {
                    eprintln!("{l}")
                }
            })
            .map_err(anyhow::Error::msg)?;
        if a.json {
            outln!(
                "{}",
                serde_json::json!({"mode": "xdp", "stats": st, "pps": st.pps()})
            );
        } else {
            outln!(
                "sent {} frames in {:.3} s: {:.3} Mpps ({} BPF_PROG_RUN calls)",
                st.sent,
                st.duration_ns as f64 / 1e9,
                st.pps() / 1e6,
                st.syscalls
            );
        }
        return Ok(());
    }
    let setup = GenSetup {
        port: a.port.clone(),
        rx: a.rx.clone(),
        batch: a.batch,
        cpu: a.cpu,
    };
    let session = GenSession::start(&profile, &setup, &stop).map_err(anyhow::Error::msg)?;
    if !a.json {
        eprintln!("{}", session.started);
    }
    // A Lua scenario steers the run through the generator's control.
    let scenario = a.script.as_deref().map(|path| {
        let sandbox = if a.script_unsafe {
            script::Sandbox::Off
        } else {
            script::Sandbox::On
        };
        script::spawn(path, session.control(), stop.clone(), a.json, sandbox)
    });
    let end = session
        .wait(&mut |t| {
            super::common::publish(t);
            if a.quiet {
            } else if a.json {
                outln!(
                    "{}",
                    serde_json::json!({"t": t.t, "streams": t.names, "sent": t.sent, "pps": t.pps})
                );
            } else {
                let parts: Vec<String> = (t.names.iter().zip(t.pps).zip(t.sent))
                    .map(|((n, r), s)| format!("{n}: {:.3} Mpps ({s} sent)", r / 1e6))
                    .collect();
                outln!("{:>7.1}s  {}", t.t, parts.join(" | "));
            }
        })
        .map_err(anyhow::Error::msg)?;
    let script_result = scenario.map(script::Scenario::finish);
    // The report also when a port failed (its interface went away): what
    // was sent up to then, then the error.
    if a.json {
        outln!("{}", end.json());
    } else {
        out!("{}", end.text());
    }
    end.gen?;
    if let Some(Err(e)) = end.rx {
        bail!("{e}");
    }
    if let Some(r) = script_result {
        r?;
    }
    Ok(())
}

/// `--replay FILE`: a pcap port as the source, paced by the file, forwarded to the port.
fn replay(a: &Args) -> Result<()> {
    let r = Replay {
        file: a.replay.clone().expect("checked"),
        port: a.port.clone(),
        speed: a.speed.clone(),
        pps: match &a.rate {
            Some(r) => Some(
                parse_rate(r)?
                    .pps
                    .context("--replay --rate: packets/s only")?,
            ),
            None => None,
        },
        loops: a.loops,
        duration: a.duration,
        batch: a.batch,
    };
    let done = r
        .run(&super::common::stop_flag()?)
        .map_err(anyhow::Error::msg)?;
    if a.json {
        outln!("{}", done.json());
    } else {
        outln!("{}", done.text());
    }
    Ok(())
}
