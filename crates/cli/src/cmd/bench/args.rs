//! `linerate bench`'s options (the help text is in help.txt).

use linerate_measure::bench::{self, rfc2544, rfc2544::DEFAULT_SIZES};
use linerate_measure::frame_size;
use std::path::PathBuf;

#[derive(clap::Args)]
#[command(
    about = "RFC 2544 benchmark of linerate against the kernel and other tools on a namespace test bed",
    after_help = include_str!("help.txt")
)]
pub struct Args {
    /// A benchmark study instead of the RFC 2544 bench (see `linerate bench STUDY --help`).
    #[command(subcommand)]
    pub study: Option<super::study::Study>,
    /// Only these DuTs (repeatable; see the list below).
    #[arg(long = "dut")]
    pub duts: Vec<String>,
    /// External ports: no test bed; the generator sends out of this interface of this machine
    /// towards your DuT (another machine, a VM, a namespace you built) and the sink counts on
    /// --port-b. Needs --port-mode.
    #[arg(long, value_name = "IF", requires_all = ["port_b", "port_mode"], conflicts_with_all = ["duts", "dut_files"])]
    pub port_a: Option<String>,
    /// External ports: the interface the DuT sends the traffic back to.
    #[arg(long, value_name = "IF", requires = "port_a")]
    pub port_b: Option<String>,
    /// External ports: l2 (a switch: learning frames are sent first, RFC 2544 section 23) or
    /// l3 (a router: give --tester-a, --gateway-a and --tester-b; the gateway's MAC is resolved
    /// by ARP and the tester answers ARP for its address on port B, as TRex's L3 mode does).
    #[arg(long, value_name = "l2|l3", requires = "port_a", value_parser = ["l2", "l3"])]
    pub port_mode: Option<String>,
    /// l3: the tester's IPv4 address on port A (the traffic's source).
    #[arg(long, value_name = "IP")]
    pub tester_a: Option<std::net::Ipv4Addr>,
    /// l3: the DuT's address on port A's side (the gateway the tester sends to).
    #[arg(long, value_name = "IP")]
    pub gateway_a: Option<std::net::Ipv4Addr>,
    /// l3: the tester's IPv4 address on port B (the traffic's destination).
    #[arg(long, value_name = "IP")]
    pub tester_b: Option<std::net::Ipv4Addr>,
    /// External ports: measure this port although it looks like one of this machine's own
    /// links. A port that holds a default route, has a global address or is enslaved to a
    /// bridge or bond is refused otherwise (a mistyped --port-b eth0 would flood the machine's
    /// link and cut it off: the sink's XDP program drops all but ARP). Repeatable, for that
    /// port only, e.g. --force-port enp3s0f1.
    #[arg(long = "force-port", value_name = "IF", requires = "port_a")]
    pub force_ports: Vec<String>,
    /// The most the bench offers, in every trial: the probe and the back-to-back bursts are
    /// paced at it instead of the generator's top speed, no trial asks for more, and a size
    /// whose probe passes at it is a lower bound (">="). Frames/s (10kpps, 1.5Mpps) or a bit
    /// rate on the wire (100Mbps: frame, FCS, preamble and gap; 1Gbps@l2: frame and FCS);
    /// at least 1 kpps at every size. E.g. --max-rate 10kpps.
    #[arg(long, value_name = "RATE", value_parser = max_rate)]
    pub max_rate: Option<rfc2544::MaxRate>,
    /// Also (or, without --dut, only) the DuT this TOML file describes (repeatable): its
    /// start/run/stop commands with placeholders for the bed; see "Your own DuT" below.
    #[arg(long = "dut-file", value_name = "FILE")]
    pub dut_files: Vec<PathBuf>,
    /// Leave out the peers that need other packages (DPDK testpmd, Open vSwitch).
    #[arg(long)]
    pub no_peers: bool,
    /// Also the peers (kept for compatibility: they are in the default set).
    #[arg(long, hide = true)]
    pub peers: bool,
    /// Frame sizes in bytes on the wire with FCS (64..=1518), comma separated; "imix" is FD.io
    /// CSIT's IPv4 IMIX (64, 570 and 1518 bytes, 7:4:1, interleaved), its own row.
    ///
    /// Default: 64 and 1518 (RFC 2544's smallest and largest), to keep the run near 15 minutes
    /// with a final trial per figure (with 512 too it took 28 min on 2 AMD EPYC vCPUs); RFC 2544
    /// section 9.1's seven: --sizes 64,128,256,512,1024,1280,1518.
    #[arg(long, value_delimiter = ',', default_values_t = DEFAULT_SIZES.to_vec(), value_parser = frame_size::parse)]
    pub sizes: Vec<u32>,
    /// Seconds of traffic per trial (RFC 2544 suggests 60 for a formal result; short trials
    /// favour DuTs with deep buffers, which hide a backlog until the trial ends).
    #[arg(long, default_value_t = 0.2)]
    pub trial: f64,
    /// Loss (in % of the frames sent) a throughput trial may have and still pass: the
    /// non-drop rate (NDR) at 0.
    #[arg(long, default_value_t = 0.0)]
    pub loss_tolerance: f64,
    /// Loss (in %) of the partial-drop rate (PDR), found by the same search as the NDR (FD.io
    /// CSIT's MLRsearch): the trials already made bound it, then it is bisected to the
    /// resolution. At least --loss-tolerance.
    #[arg(long, default_value_t = 0.5)]
    pub pdr_loss: f64,
    /// Every throughput trial that loses a frame fails its rate (RFC 2544 to the letter). Default:
    /// a trial that loses under 1 % of its frames is run once more and the rate passes if the
    /// repeat loses nothing (the goal exceed ratio of 50 % of FD.io CSIT's MLRsearch), so that
    /// one stall of the machine does not end a search far below the DuT's capacity.
    #[arg(long)]
    pub strict: bool,
    /// The search stops when the passing and failing rates are within this many % of each other
    /// (2 %: finer than that is below what a re-run on this kind of machine reproduces).
    #[arg(long, default_value_t = 2.0)]
    pub resolution: f64,
    /// Throughput searches per frame size [default: 2; --quick: 1]. The median is reported with
    /// min-max, and per DuT the re-run spread: the 95 % prediction interval of a re-run's result,
    /// pooled over the sizes. Further searches come in later passes over all the DuTs (each
    /// started again on a fresh bed), each from scratch: its own probe, no knowledge of the
    /// earlier results.
    #[arg(long)]
    pub repetitions: Option<usize>,
    /// No latency trial.
    #[arg(long)]
    pub no_latency: bool,
    /// Latency trials per size at the throughput found, merged into one distribution [default:
    /// 1; --strict: 20, RFC 2544 26.2's number]. A latency trial that loses frames is flagged.
    #[arg(long, value_name = "N")]
    pub latency_trials: Option<usize>,
    /// Traffic one way (g0 -> s0), both ways at once (RFC 2544 section 14: half the rate each
    /// way, each direction counted and verified on its own; the throughput is the aggregate at
    /// which neither loses), or both measurements side by side ("uni,bi").
    #[arg(long, value_delimiter = ',', default_value = "uni", value_parser = direction)]
    pub direction: Vec<bench::Direction>,
    /// Both ways: the CPU of the reverse generator (in the sink's namespace). Default: the
    /// generator's, which the two then share in time slices (on this kind of 2-CPU machine
    /// each falls ~8 ms behind at a time, and trials above ~0.25 Mpps per direction are
    /// invalid for it): give a third CPU where there is one.
    #[arg(long, value_name = "CPU")]
    pub reverse_gen_cpu: Option<usize>,
    /// The load at which every DuT's latency is measured once more, the same for all, so that
    /// they are compared at one load (RFC 2544's latency is at each DuT's own throughput):
    /// "N%" of the slowest DuT's NDR at each size, a rate in frames/s, or "off". With two
    /// DuTs or more.
    #[arg(long, value_name = "N%|PPS|off", default_value = "50%", value_parser = common_load)]
    pub latency_rate: bench::CommonLoad,
    /// Seconds of idle time before every trial for the DuT to restabilise [default: 0;
    /// --strict: 5, RFC 2544 section 23]. The drain after each trial waits for the DuT's
    /// queues to empty either way.
    #[arg(long, value_name = "SECONDS")]
    pub settle: Option<f64>,
    /// Seconds of the final trials that confirm every reported NDR and PDR [default: 10;
    /// --quick: none; 0: none] (FD.io CSIT's final trial; RFC 2544 suggests 60 for a formal
    /// result). The search runs short trials (--trial), which a DuT's rings can pass while a
    /// backlog builds; a final trial that fails steps down (under what it forwarded, 5 steps
    /// at most) until one of this length passes. The report says which trial length each
    /// figure rests on.
    #[arg(long, value_name = "SECONDS")]
    pub final_trial: Option<f64>,
    /// Frame sizes for the frame-loss-rate procedure ("none" or empty: none).
    #[arg(long, value_delimiter = ',', default_values_t = vec![64u32], value_parser = size_or_none)]
    pub frame_loss_sizes: Vec<u32>,
    /// Frame sizes for the back-to-back procedure ("none" or empty: none).
    #[arg(long, value_delimiter = ',', default_values_t = vec![64u32], value_parser = size_or_none)]
    pub b2b_sizes: Vec<u32>,
    /// Back-to-back searches per size (RFC 2544 asks for 50).
    #[arg(long, default_value_t = 1)]
    pub b2b_trials: usize,
    /// A first look: 64- and 1518-byte frames, 0.2 s trials, 2 % resolution, one back-to-back search.
    #[arg(long)]
    pub quick: bool,
    /// Write the HTML report here.
    #[arg(long, default_value = "linerate-report.html")]
    pub report: PathBuf,
    /// Write no HTML report.
    #[arg(long)]
    pub no_report: bool,
    /// Write every trial as JSON to this file ("-": standard output, the table then goes to stderr).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Serve Prometheus metrics (the DuT and size at hand, every trial's counts, the last trial's
    /// rates, loss and generator slip) at http://ADDR:PORT/metrics while the RFC 2544 bench runs.
    #[arg(long, value_name = "ADDR:PORT")]
    pub metrics: Option<String>,
    /// Put the run's Markdown section (the machine, the tables, what the figures say) into this
    /// file between <!-- SECTION --> markers (replaced in place, or appended), e.g.
    /// docs/BENCHMARKS.md.
    #[arg(long, value_name = "FILE", conflicts_with = "overload")]
    pub markdown: Option<PathBuf>,
    /// The section's marker name for --markdown (another run, a switch comparison, writes its
    /// own section).
    #[arg(
        long,
        value_name = "NAME",
        default_value = "rfc2544",
        requires = "markdown"
    )]
    pub section: String,
    /// Keep this run's throughput results in this file and widen the stated re-run spread by
    /// the spread between the earlier runs kept there (same CPU, kernel and settings; the newest
    /// 20) [default: $LINERATE_HISTORY, else $XDG_STATE_HOME or ~/.local/state, then
    /// linerate/bench-history.jsonl].
    #[arg(long, value_name = "FILE")]
    pub history: Option<PathBuf>,
    /// Neither read nor write the history file: the spread stated is from this run alone.
    #[arg(long, conflicts_with = "history")]
    pub no_history: bool,
    /// Link speed of the line-rate curve in the report (Gbit/s).
    #[arg(long, default_value_t = 10.0)]
    pub line_rate: f64,
    /// Test bed name prefix (a counter is appended per DuT).
    #[arg(long)]
    pub name: Option<String>,
    /// CPU of the generator.
    #[arg(long, default_value_t = 0)]
    pub gen_cpu: usize,
    /// CPU of the device under test.
    #[arg(long, default_value_t = 1)]
    pub dut_cpu: usize,
    /// Threaded NAPI: the veth receive work of d0/d1 in kernel threads pinned to the DuT's
    /// CPU (default: softirq on the sending CPU, the generator's for d0).
    #[arg(long)]
    pub threaded_napi: bool,
    /// Leave the kernel's receive work of d0 on the CPU running its NAPI (the generator's):
    /// the kernel DuTs (bridge, IP forwarding) then forward on the generator's core and
    /// their results are lower bounds. Default: RPS steers it to the DuT's CPU.
    #[arg(long)]
    pub no_rps: bool,
    /// Run the sink's receive work (s0's NAPI and its XDP counter) in a kernel thread pinned
    /// to this CPU. Default: veth runs it in the softirq of the CPU that transmits to s0, the
    /// DuT's, so it is charged to the DuT's core (on 2 CPUs, moving it puts it on the
    /// generator's).
    #[arg(long, value_name = "CPU")]
    pub sink_cpu: Option<usize>,
    /// Instead of RFC 2544: the forwarding rate at overload (one frame size, timed trials).
    #[arg(long)]
    pub overload: bool,
    /// --overload: frame size in bytes on the wire, with FCS.
    #[arg(long, default_value_t = 64)]
    pub frame_size: usize,
    /// --overload: seconds measured per trial (after the warm-up).
    #[arg(long, default_value_t = 5.0)]
    pub duration: f64,
    /// --overload: warm-up seconds per trial.
    #[arg(long, default_value_t = 1.0)]
    pub warmup: f64,
    /// --overload: trials per DuT (the table shows the median and min-max).
    #[arg(long, default_value_t = 1)]
    pub repeat: usize,
}

/// A rate cap: the syntax of `linerate gen --rate`.
fn max_rate(s: &str) -> Result<rfc2544::MaxRate, String> {
    use linerate_pipeline::generate::profile::{Accounting, RateSpec};
    let r = RateSpec::parse_as("--max-rate", s)?;
    Ok(match (r.pps, r.bps) {
        (Some(p), _) => rfc2544::MaxRate::Pps(p),
        (None, Some(b)) => rfc2544::MaxRate::Bps {
            bps: b,
            l1: r.accounting == Accounting::L1,
        },
        (None, None) => return Err(format!("--max-rate '{s}': no rate")),
    })
}

fn direction(s: &str) -> Result<bench::Direction, String> {
    match s.trim() {
        "uni" => Ok(bench::Direction::Uni),
        "bi" => Ok(bench::Direction::Bi),
        t => Err(format!("{t:?}: uni (one way) or bi (both ways at once)")),
    }
}

fn common_load(s: &str) -> Result<bench::CommonLoad, String> {
    let t = s.trim();
    if t == "off" {
        return Ok(bench::CommonLoad::Off);
    }
    if let Some(p) = t.strip_suffix('%') {
        return match p.trim().parse::<f64>() {
            Ok(v) if v > 0.0 && v <= 100.0 => Ok(bench::CommonLoad::OfSlowest(v / 100.0)),
            _ => Err(format!("{t:?}: a percentage over 0 and at most 100")),
        };
    }
    match t.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 1.0 => Ok(bench::CommonLoad::Pps(v)),
        _ => Err(format!(
            "{t:?}: N% (of the slowest DuT's NDR), a rate in frames/s (at least 1) or off"
        )),
    }
}

/// A frame size, or 0 for "none" / an empty list (dropped later).
fn size_or_none(s: &str) -> Result<u32, String> {
    match s.trim() {
        "" | "none" => Ok(0),
        t => frame_size::parse(t),
    }
}
