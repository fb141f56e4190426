//! `linerate bench STUDY`: the benchmark studies of docs/BENCHMARKS.md as
//! procedures of the binary (`linerate_measure::study`). Each prints its
//! table, and writes JSON, an HTML page with plots and its Markdown section
//! on request.

mod afpacket_soak;
mod out;
mod overload;
mod sink_cpu;

pub use out::Out;

use anyhow::Result;
use linerate_measure::study::{
    self, capture::CaptureStudy, dnac::Dnac, gen::GenStudy, switch::SwitchStudy, StudyReport,
};
use std::path::PathBuf;

#[derive(clap::Subcommand)]
pub enum Study {
    /// Seed 002's DNAC experiment: events an HTTP analyser finds with TED on and off, at a
    /// low rate and at overload (a trace replayed into one capture worker with a heavy
    /// per-packet cost). About a minute.
    #[command(after_help = "\
Examples:
  linerate bench dnac                                   # the defaults, table on stdout, linerate-dnac.html
  linerate bench dnac --connections 200 --overload 5 --json dnac.json
  linerate bench dnac --markdown docs/BENCHMARKS.md     # rewrite its section there")]
    Dnac(DnacArgs),
    /// Seed 003's capture-method comparison: the highest loss-free capture rate of plain
    /// AF_PACKET, TPACKET_V3, AF_XDP, in-kernel XDP counting and tcpdump on the veth bed, the
    /// CPU each uses, 1 against 2 workers, and the method x frame size ANOVA. Root; about 10 min
    /// with the defaults.
    #[command(after_help = "\
Examples:
  linerate bench capture                                # every method at 64 and 1024 bytes, twice
  linerate bench capture --sizes 64 --methods tpacket-v3,afxdp --repetitions 3 --no-scaling
  linerate bench capture --markdown docs/BENCHMARKS.md  # rewrite its section there")]
    Capture(CaptureArgs),
    /// The traffic generator: rate accuracy of the software pacer and of --xdp, the maximum
    /// single-core 64-byte rate against trafgen and the other ports, latency at 10 kpps through
    /// the Linux bridge and through linerate fwd. Root; about 2.5 min with the defaults.
    #[command(after_help = "\
Examples:
  linerate bench gen                                    # 5 s runs
  linerate bench gen --seconds 2 --json gen.json
  linerate bench gen --markdown docs/BENCHMARKS.md      # rewrite its section there")]
    Gen(GenArgs),
    /// The flow-table switch: cycles per packet against active flows (1..1M) with the cache on
    /// and off, rule insertion 1k..1M against Open vSwitch's userspace datapath, the time
    /// from add-flow to the first packet hitting the rule (about 5 min); on request, RFC 2544
    /// throughput through the veth bed against the bridge and Open vSwitch (part veth, root,
    /// about 2 min) and the insertion of 1k..1M rules over OpenFlow into linerate and Open
    /// vSwitch by one client, with the time to the first packet through them (part openflow,
    /// root, under a minute).
    #[command(after_help = "\
Examples:
  linerate bench switch                                 # sweep, insert and first
  linerate bench switch --parts sweep --seconds 5
  linerate bench switch --parts pipeline  # 5 tables against one, cycles per packet
  linerate bench switch --parts sweep,insert,first,veth # and through the veth bed
  linerate bench switch --parts veth --veth-repetitions 1 --veth-duts linux-bridge,linerate-switch
  linerate bench switch --parts openflow --ovs-max 100000 # insertion over OpenFlow, both switches
  linerate bench switch --markdown docs/BENCHMARKS.md   # rewrite its section there")]
    Switch(SwitchArgs),
    /// Where the sink's receive work runs: two `linerate bench` runs on the same DuTs and sizes,
    /// the default bed (s0's NAPI on the DuT's CPU) and --sink-cpu (in a kernel thread on that
    /// CPU), side by side. Root; about 2.5 min with the defaults.
    #[command(after_help = "\
Examples:
  linerate bench sink-cpu                               # afxdp, bridge, IP forwarding at 64 and 1518 B
  linerate bench sink-cpu --dut linux-bridge --sizes 64 --repetitions 1 --json sink.json
  linerate bench sink-cpu --markdown docs/BENCHMARKS.md # rewrite its section there")]
    SinkCpu(sink_cpu::SinkCpuArgs),
    /// L2 forwarding at overload (64-byte frames) through every DuT of the veth bed, issue 2's
    /// targets, cycles per packet and stage, and the pure-CPU forwarder on in-memory ports
    /// against testpmd io-forward between net_null ports. Root; about 3 min with the defaults.
    #[command(after_help = "\
Examples:
  linerate bench overload                               # every DuT, 5 s x 2 trials
  linerate bench overload --seconds 2 --repeat 1 --duts linux-bridge,linerate-xdp
  linerate bench overload --markdown docs/BENCHMARKS.md # rewrite its section there")]
    Overload(overload::OverloadArgs),
    /// AF_PACKET rings of `linerate fwd`: latency at 10 kpps through the bridge, ring=v2 and
    /// ring=v3 on fresh beds, and the loss-free 64-byte rate of both with the bench's 0.2 s
    /// trials and with long trials, the generator's lateness. Root; ~30 min with the defaults.
    #[command(after_help = "\
Examples:
  linerate bench afpacket                               # 5 s latency runs, 30 s trials, 2 searches
  linerate bench afpacket --seconds 2 --trial 5 --searches 1 --short-searches 1
  linerate bench afpacket --markdown docs/BENCHMARKS.md # rewrite its section there")]
    Afpacket(afpacket_soak::AfpacketArgs),
    /// Soak: fwd, switch and capture, each on a fresh bed over afxdp for a long time at half
    /// its loss-free rate, the process's resident memory sampled; growth and slope after the
    /// warm-up, drops by reason, balance, rx_ring_full, generator stalls. Root; 30 min per
    /// pipeline with the defaults.
    #[command(after_help = "\
Examples:
  linerate bench soak                                   # 30 min per pipeline
  linerate bench soak --minutes 3 --markdown docs/BENCHMARKS.md
  linerate bench soak --pipelines fwd --seconds 20 --interval 2 --warmup 6 --searches 1")]
    Soak(afpacket_soak::SoakArgs),
}

#[derive(clap::Args)]
pub struct SwitchArgs {
    /// Which parts, comma separated: sweep, insert, first, pipeline, openflow, veth.
    #[arg(long, value_delimiter = ',', default_value = "sweep,insert,first,pipeline", value_parser = ["sweep", "insert", "first", "pipeline", "openflow", "veth"])]
    pub parts: Vec<String>,
    /// Seconds per sweep point.
    #[arg(long, default_value_t = 3)]
    pub seconds: u64,
    /// The datapath's CPU (veth: the DuT's CPU of the bench).
    #[arg(long, default_value_t = 1)]
    pub cpu: usize,
    /// Open vSwitch gets the insertion batches up to this many rules (parts insert, openflow).
    #[arg(long, default_value_t = 100_000)]
    pub ovs_max: u64,
    /// Rounds of the first-hit measurement per table size.
    #[arg(long, default_value_t = 200)]
    pub rounds: usize,
    #[command(flatten)]
    pub veth: overload::VethArgs,
    #[command(flatten)]
    pub out: Out,
}

#[derive(clap::Args)]
pub struct GenArgs {
    /// Seconds per run.
    #[arg(long, default_value_t = 5)]
    pub seconds: u64,
    #[command(flatten)]
    pub out: Out,
}

#[derive(clap::Args)]
pub struct DnacArgs {
    /// HTTP downloads in the trace.
    #[arg(long, default_value_t = 1000)]
    pub connections: u64,
    /// Smallest HTTP body in bytes (Pareto tail above it).
    #[arg(long, default_value_t = 100_000)]
    pub min_size: u64,
    /// Busy work per packet in the worker, ns (a heavy analyser).
    #[arg(long, default_value_t = 10_000)]
    pub cost_ns: u64,
    /// The overload: this many times the worker's capacity (over 1).
    #[arg(long, default_value_t = 10.0)]
    pub overload: f64,
    /// The low rate: this fraction of the capacity (between 0 and 1).
    #[arg(long, default_value_t = 0.2)]
    pub low_frac: f64,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[command(flatten)]
    pub out: Out,
}

#[derive(clap::Args)]
pub struct CaptureArgs {
    /// Frame sizes in bytes on the wire with FCS, comma separated.
    #[arg(long, value_delimiter = ',', default_values_t = vec![64u32, 1024])]
    pub sizes: Vec<u32>,
    /// Searches per method and size (the ANOVA's replications).
    #[arg(long, default_value_t = 2)]
    pub repetitions: usize,
    /// Seconds per trial.
    #[arg(long, default_value_t = 2.0)]
    pub trial: f64,
    /// The search stops when its bounds are this many % apart.
    #[arg(long, default_value_t = 3.0)]
    pub resolution: f64,
    /// Methods, comma separated: afpacket-recv, tpacket-v3, afxdp, xdp-count, tcpdump.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "afpacket-recv,tpacket-v3,afxdp,xdp-count,tcpdump"
    )]
    pub methods: Vec<String>,
    /// Worker scaling's analysis costs per packet in ns, comma separated.
    #[arg(long, value_delimiter = ',', default_values_t = vec![5000u64, 20000])]
    pub scaling_costs: Vec<u64>,
    /// No worker scaling.
    #[arg(long)]
    pub no_scaling: bool,
    #[command(flatten)]
    pub out: Out,
}

pub fn run(s: Study) -> Result<()> {
    let exe = std::env::current_exe()?;
    let progress = |l: &str| eprintln!("{l}");
    let (report, out) = match s {
        Study::Overload(a) => overload::overload(a, exe)?,
        Study::Dnac(a) => {
            let d = Dnac {
                linerate: exe,
                connections: a.connections,
                min_size: a.min_size,
                cost_ns: a.cost_ns,
                overload: a.overload,
                low_frac: a.low_frac,
                seed: a.seed,
                ..Dnac::default()
            };
            (d.run(&mut { progress }).map_err(anyhow::Error::msg)?, a.out)
        }
        Study::Switch(a) => {
            if a.seconds == 0 || a.rounds == 0 {
                anyhow::bail!("--seconds and --rounds: at least 1");
            }
            let has = |p: &str| a.parts.iter().any(|x| x == p);
            let s = SwitchStudy {
                linerate: exe,
                dir: std::env::temp_dir(),
                seconds: a.seconds,
                cpu: a.cpu,
                ovs_max: a.ovs_max,
                rounds: a.rounds,
                sweep: has("sweep"),
                insert: has("insert"),
                first: has("first"),
                pipeline: has("pipeline"),
                openflow: has("openflow").then_some(super::openflow_client::prepare as _),
                veth: a.veth.part(has("veth")),
            };
            (s.run(&mut { progress }).map_err(anyhow::Error::msg)?, a.out)
        }
        Study::Gen(a) => {
            let g = GenStudy {
                peers_dir: linerate_measure::bench::dut::find_peers_dir(&exe),
                linerate: exe,
                seconds: a.seconds,
            };
            (g.run(&mut { progress }).map_err(anyhow::Error::msg)?, a.out)
        }
        Study::Capture(a) => {
            if !(a.trial.is_finite() && (0.1..=600.0).contains(&a.trial)) {
                anyhow::bail!("--trial {}: must be 0.1 to 600 seconds", a.trial);
            }
            if !(a.resolution.is_finite() && a.resolution > 0.0 && a.resolution <= 50.0) {
                anyhow::bail!(
                    "--resolution {}: must be over 0 and at most 50 %",
                    a.resolution
                );
            }
            let c = CaptureStudy {
                linerate: exe,
                sizes: a.sizes,
                reps: a.repetitions,
                trial: a.trial,
                resolution: a.resolution / 100.0,
                methods: a.methods,
                scaling_costs: if a.no_scaling {
                    vec![]
                } else {
                    a.scaling_costs
                },
                ..CaptureStudy::default()
            };
            (c.run(&mut { progress }).map_err(anyhow::Error::msg)?, a.out)
        }
        Study::SinkCpu(a) => sink_cpu::run(a, &mut { progress })?,
        Study::Afpacket(a) => afpacket_soak::afpacket(a, exe, &mut { progress })?,
        Study::Soak(a) => afpacket_soak::soak(a, exe, &mut { progress })?,
    };
    write(&report, &out)
}

fn write(r: &StudyReport, out: &Out) -> Result<()> {
    let json_stdout = out.json.as_deref() == Some(std::path::Path::new("-"));
    if json_stdout {
        eprint!("{}", r.text());
        outln!("{}", r.json());
    } else {
        out!("{}", r.text());
    }
    if let Some(p) = out.json.as_ref().filter(|_| !json_stdout) {
        linerate_io::file::write_whole(p, format!("{:#}\n", r.json()).as_bytes())
            .map_err(|e| anyhow::anyhow!("--json {e}"))?;
        eprintln!("JSON: {}", p.display());
    }
    let html = out
        .report
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("linerate-{}.html", r.name)));
    linerate_io::file::write_whole(&html, r.html().as_bytes())
        .map_err(|e| anyhow::anyhow!("--report {e}"))?;
    eprintln!("report: {}", html.display());
    if let Some(md) = &out.markdown {
        study::put_section(md, r.name, &r.markdown()).map_err(anyhow::Error::msg)?;
        eprintln!("section '{}' of {}", r.name, md.display());
    }
    Ok(())
}
