//! `linerate fwd PORT_A PORT_B`: bidirectional L2 forwarding.

use anyhow::{bail, Context, Result};
use linerate_io::xdp::AttachMode;
use linerate_io::Uri;
use linerate_pipeline::fwd::run::{self, FwdConfig};
use linerate_pipeline::fwd::xdp::{self, XdpFwdConfig};
use linerate_pipeline::fwd::{self, MacRewrite};
use std::sync::atomic::AtomicBool;

use super::common;

#[derive(clap::Args)]
#[command(
    about = "Forward frames between two ports in both directions (L2, run to completion)",
    after_help = "\
Examples:
  # AF_XDP between two interfaces, one core, per-second rates, Ctrl-C for the final account
  linerate fwd afxdp:d0 afxdp:d1
  # TPACKET_V3 rings, MAC rewrite towards B, one core per direction
  linerate fwd afpacket:d0 afpacket:d1 --rewrite-a2b 02:00:00:00:00:02/02:00:00:00:00:01 --cores per-direction
  # the in-kernel XDP path (devmap redirect), counters from the program's per-CPU maps
  linerate fwd --mode xdp afxdp:d0 afxdp:d1
  # pure CPU cost: an endless in-memory source into a sink, with per-stage cycles
  linerate fwd 'mem:a?source=64' 'mem:b?sink' --duration 5 --profile
  # Prometheus metrics at http://127.0.0.1:9100/metrics while it runs
  linerate fwd afxdp:d0 afxdp:d1 --metrics 127.0.0.1:9100
  # replay a capture into a new pcapng file
  linerate fwd pcap:in.pcap pcap:out.pcapng

Ports: afxdp:IFACE[?queue=N&mode=native|generic&zerocopy=0|1]
       afpacket:IFACE[?ring=v2|v3|mmsg&fanout=hash|cpu|lb&qdisc_bypass=0|1]
       pcap:FILE[?mode=read|write&speed=top|original|X&rate=PPS&loop=N]
       mem:NAME[?source=SIZE[&flows=N]|sink]"
)]
pub struct Args {
    /// First port (URI).
    pub port_a: String,
    /// Second port (URI).
    pub port_b: String,
    /// user: forward in this process through the ports; xdp: an XDP program redirects in the kernel.
    #[arg(long, value_parser = ["user", "xdp"], default_value = "user")]
    pub mode: String,
    /// Packets per batch (1-256).
    #[arg(long, default_value_t = linerate_io::DEFAULT_BATCH)]
    pub batch: usize,
    /// Ring size per port (frames, power of two).
    #[arg(long, default_value_t = 2048)]
    pub ring: u32,
    /// single: both directions on one core; per-direction: one thread per direction.
    #[arg(long, value_parser = ["single", "per-direction"], default_value = "single")]
    pub cores: String,
    /// CPUs to pin the forwarding thread(s) to, e.g. `1` or `0,1`.
    #[arg(long, value_delimiter = ',')]
    pub cpu: Vec<usize>,
    /// busy: spin on the rings; wait: sleep in poll() when idle (need_wakeup).
    #[arg(long, value_parser = ["busy", "wait"], default_value = "busy")]
    pub poll: String,
    /// Rewrite MACs of frames going A to B: DST/SRC, e.g. 02:00:00:00:00:02/02:00:00:00:00:01.
    #[arg(long, value_name = "DST/SRC")]
    pub rewrite_a2b: Option<String>,
    /// Rewrite MACs of frames going B to A: DST/SRC.
    #[arg(long, value_name = "DST/SRC")]
    pub rewrite_b2a: Option<String>,
    /// XDP attach mode for --mode xdp.
    #[arg(long, value_parser = ["native", "generic"], default_value = "native")]
    pub xdp_mode: String,
    /// Stop after this many seconds (default: until Ctrl-C, or the end of finite sources).
    #[arg(long)]
    pub duration: Option<f64>,
    /// Report TSC cycles per packet for RX, TX, buffer management and processing.
    #[arg(long)]
    pub profile: bool,
    /// Print JSON lines (one per second and a final object) instead of text.
    #[arg(long)]
    pub json: bool,
    /// No per-second lines.
    #[arg(long, short)]
    pub quiet: bool,
    /// Serve Prometheus metrics at http://ADDR:PORT/metrics while running (e.g. 127.0.0.1:9100).
    #[arg(long, value_name = "ADDR:PORT")]
    pub metrics: Option<String>,
}

fn parse_rewrite(s: &Option<String>, flag: &str) -> Result<Option<MacRewrite>> {
    let Some(s) = s else { return Ok(None) };
    let (d, sr) = s
        .split_once('/')
        .with_context(|| format!("{flag} '{s}': expected DST/SRC MAC addresses"))?;
    let dst = fwd::parse_mac(d).with_context(|| format!("{flag}: '{d}' is not a MAC address"))?;
    let src = fwd::parse_mac(sr).with_context(|| format!("{flag}: '{sr}' is not a MAC address"))?;
    Ok(Some(MacRewrite { dst, src }))
}

pub fn run(a: Args) -> Result<()> {
    if !(1..=linerate_io::MAX_BATCH).contains(&a.batch) {
        bail!(
            "--batch {}: must be between 1 and {}",
            a.batch,
            linerate_io::MAX_BATCH
        );
    }
    if !a.ring.is_power_of_two() || a.ring < 64 {
        bail!("--ring {}: must be a power of two >= 64", a.ring);
    }
    let rw_ab = parse_rewrite(&a.rewrite_a2b, "--rewrite-a2b")?;
    let rw_ba = parse_rewrite(&a.rewrite_b2a, "--rewrite-b2a")?;
    let stop = common::stop_flag()?;
    common::serve_metrics(a.metrics.as_deref(), "fwd", a.json)?;
    if a.mode == "xdp" {
        return run_xdp(&a, rw_ab, rw_ba, &stop);
    }
    let (open, polling) = common::polling_ports(a.batch, a.ring, &a.poll);
    let cfg = FwdConfig {
        port_a: a.port_a.clone(),
        port_b: a.port_b.clone(),
        rewrite_a2b: rw_ab,
        rewrite_b2a: rw_ba,
        open,
        polling,
        single_core: a.cores == "single",
        cpus: a.cpu.clone(),
        profile: a.profile,
        duration: a.duration,
    };
    let end = run::run(&cfg, &stop, &mut |e| {
        common::print_event(e, a.json, a.quiet)
    })
    .map_err(anyhow::Error::msg)?;
    common::finish(&end, a.json)
}

/// `--mode xdp`: the in-kernel forwarder on the ports' interfaces.
fn run_xdp(
    a: &Args,
    rewrite_a2b: Option<MacRewrite>,
    rewrite_b2a: Option<MacRewrite>,
    stop: &AtomicBool,
) -> Result<()> {
    let cfg = XdpFwdConfig {
        if_a: xdp_ifname(&a.port_a)?,
        if_b: xdp_ifname(&a.port_b)?,
        mode: AttachMode::parse(&a.xdp_mode).unwrap_or(AttachMode::Native),
        rewrite_a2b,
        rewrite_b2a,
        duration: a.duration,
    };
    let end = xdp::run(&cfg, stop, &mut |e| common::print_event(e, a.json, a.quiet))
        .map_err(anyhow::Error::msg)?;
    common::print_report(&end, a.json);
    if a.profile {
        eprintln!(
            "note: --profile measures the user-space loop; in xdp mode all work is in the kernel"
        );
    }
    match end.error {
        Some(e) => bail!("{e}"),
        None => Ok(()),
    }
}

/// The interface behind a port name: `afxdp:IF`, `afpacket:IF` or a bare `IF`.
fn xdp_ifname(port: &str) -> Result<String> {
    if !port.contains(':') {
        return Ok(port.to_string());
    }
    let u = Uri::parse(port)?;
    match u.scheme.as_str() {
        "afxdp" | "afpacket" => Ok(u.target),
        s => bail!("--mode xdp: port '{port}' is a {s} port; the XDP forwarder needs interfaces (afxdp:IF or IF)"),
    }
}
