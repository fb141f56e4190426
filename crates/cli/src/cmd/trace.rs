//! `linerate trace http OUT`: write a synthetic trace file (for the DNAC
//! experiment: `linerate capture 'pcap:OUT?rate=PPS' --analyser http`).

use anyhow::{bail, Result};
use linerate_io::pcap::{PcapWriter, WriteFormat};
use linerate_pipeline::generate::http_trace::{write_trace, HttpTraceConfig};
use std::path::PathBuf;
use std::time::Instant;

#[derive(clap::Args)]
#[command(
    about = "Write a synthetic trace file (pcapng, or classic pcap for a .pcap name)",
    after_help = "\
Examples:
  # 50 000 HTTP downloads from 1000 clients to 25 servers, heavy-tailed sizes
  linerate trace http /tmp/http.pcapng
  # smaller, another seed, JSON ground truth
  linerate trace http /tmp/small.pcap --connections 2000 --seed 7 --json
  # write it again over the earlier file (refused without --overwrite)
  linerate trace http /tmp/small.pcap --connections 2000 --seed 8 --overwrite
  # replay it into the capture layer at 50 kpps with the http analyser
  linerate capture 'pcap:/tmp/http.pcapng?rate=50000' --analyser http"
)]
pub struct Args {
    #[command(subcommand)]
    pub kind: Kind,
}

#[derive(clap::Subcommand)]
pub enum Kind {
    /// HTTP/1.1 downloads over TCP: handshake, GET, 200 OK with a Pareto-sized body, FINs.
    Http(HttpArgs),
}

#[derive(clap::Args)]
pub struct HttpArgs {
    /// Output file (.pcapng or .pcap).
    pub out: PathBuf,
    /// TCP connections (one request and one response each).
    #[arg(long, default_value_t = 50_000)]
    pub connections: u64,
    /// Client addresses (10.1.x.y).
    #[arg(long, default_value_t = 1000)]
    pub clients: u32,
    /// Server addresses (10.9.0.x, port 80).
    #[arg(long, default_value_t = 25)]
    pub servers: u32,
    /// Pareto shape of the body sizes (> 1; smaller = heavier tail).
    #[arg(long, default_value_t = 1.2)]
    pub pareto_shape: f64,
    /// Smallest body in bytes (the Pareto scale).
    #[arg(long, default_value_t = 2000)]
    pub min_size: u64,
    /// Largest body in bytes.
    #[arg(long, default_value_t = 20_000_000)]
    pub max_size: u64,
    /// Random seed (same seed and options, same file).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Mean gap between connection starts, microseconds.
    #[arg(long, default_value_t = 50.0)]
    pub mean_gap_us: f64,
    /// Print the ground truth as one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Replace OUT if it exists (a regular file; never through a symbolic link).
    #[arg(long)]
    pub overwrite: bool,
}

/// File timestamps start here (2026-01-01T00:00:00Z), so a trace is the
/// same file every time.
const EPOCH_NS: u64 = 1_767_225_600_000_000_000;

pub fn run(a: Args) -> Result<()> {
    let Kind::Http(a) = a.kind;
    if !(a.mean_gap_us.is_finite() && a.mean_gap_us > 0.0) {
        bail!("--mean-gap-us {}: must be > 0", a.mean_gap_us);
    }
    let cfg = HttpTraceConfig {
        connections: a.connections,
        clients: a.clients,
        servers: a.servers,
        pareto_shape: a.pareto_shape,
        min_size: a.min_size,
        max_size: a.max_size,
        seed: a.seed,
        mean_gap_ns: (a.mean_gap_us * 1000.0).max(1.0) as u64,
        ..HttpTraceConfig::default()
    };
    cfg.check()
        .map_err(|e| anyhow::anyhow!("trace http: {e}"))?;
    let name = a.out.to_string_lossy();
    let format = if name.ends_with(".pcap") {
        WriteFormat::Pcap
    } else {
        WriteFormat::PcapNg
    };
    let mut w = PcapWriter::create(&name, format, a.overwrite).map_err(|e| {
        if a.overwrite || !e.ends_with("not overwritten") {
            anyhow::anyhow!(e)
        } else {
            anyhow::anyhow!("{e} (--overwrite replaces it)")
        }
    })?;
    let t = Instant::now();
    // One record per call: the writer buffers 4 MiB before each write.
    let truth = write_trace(&cfg, |ts, f| w.write_record(f, f.len(), EPOCH_NS + ts))
        .map_err(anyhow::Error::msg)?;
    w.write_out().map_err(anyhow::Error::msg)?;
    drop(w);
    let secs = t.elapsed().as_secs_f64();
    if a.json {
        let mut v = serde_json::to_value(&truth)?;
        v["file"] = serde_json::json!(name);
        v["seconds"] = serde_json::json!(secs);
        outln!("{v}");
    } else {
        outln!(
            "{name}: {} connections, {} packets, {:.1} MB in {secs:.1} s; ground truth {} requests, {} responses, {} pairs; bodies median {} B, largest {} B, largest 10 % carry {:.0} % of the bytes",
            truth.connections,
            truth.packets,
            truth.bytes as f64 / 1e6,
            truth.requests,
            truth.responses,
            truth.pairs,
            truth.median_body,
            truth.largest_body,
            truth.top10_byte_share * 100.0
        );
    }
    Ok(())
}
