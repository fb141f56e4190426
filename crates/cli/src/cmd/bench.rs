//! `linerate bench`: every device under test on the default test bed.

use anyhow::{bail, Result};
use linerate_measure::bench::dut::{self, Dut, DutEnv};
use linerate_measure::bench::rfc2544::{Rfc2544Config, STANDARD_SIZES};
use linerate_measure::bench::{
    self, history, to_report, BenchConfig, DutResult, Rfc2544Bench, Rfc2544Result,
};
use linerate_measure::frame_size;
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[derive(clap::Args)]
#[command(
    about = "RFC 2544 benchmark of linerate against the kernel and other tools on a namespace test bed",
    after_help = "\
For each device under test (DuT) a test bed is built (gen-ns <-veth-> dut-ns <-veth-> sink-ns), the
DuT is started between d0 and d1, and the RFC 2544 procedures run at every frame size: throughput
(binary search for the highest rate with no loss: exact frame counts, paced one by one by an
in-kernel XDP generator on one core, queues drained before the sink's XDP counter is read),
latency at that rate (one-way, timestamped in the generator, histogrammed at the sink), frame loss
from 100 % of the generator's top speed down, and back-to-back bursts.

One search gives the non-drop rate (NDR, the throughput: no loss, or --loss-tolerance) and the
partial-drop rate (PDR, loss <= --pdr-loss, 0.5 %), as FD.io CSIT's MLRsearch. --sizes takes
\"imix\" (64, 570 and 1518-byte frames, 7:4:1, interleaved) beside the fixed sizes. After the
searches every DuT's latency is measured once more at one load, the same for all
(--latency-rate, default half the slowest DuT's NDR), so that DuTs are compared at equal load.

Verified frames: every frame carries a tag (the trial's stream id, a sequence number, a TX time);
the sink counts a frame as received only if it is this trial's and its sequence number is new.
Foreign frames, late frames of an earlier trial, duplicates and reordering are counted apart; a
trial with a duplicate fails. A trial is invalid when a paced trial offered under 99 % of the rate
asked, when the generator fell more than 2048 frames' worth behind its schedule (its catch-up
leaves as one burst, more than a DuT's ring may hold), when the kernel's counters of g0, d0, d1 or
s0 disagree with ours by over 0.5 %, or when more frames arrived than were sent. An invalid trial
is repeated (at most twice); one still invalid counts as a fail. Unless --strict, a throughput
trial that lost under 1 % is repeated once where a false fail costs much (before the first pass,
or with the bounds more than 4 resolutions apart); the rate passes if the repeat does. Each
search (--repetitions) starts from scratch with its own probe at top speed. Every trial,
repeated or not, is in the report and the JSON with the reason. Prints a table,
writes an HTML report with plots (and JSON with every trial on request), removes the bed.
Interrupting it (Ctrl-C, SIGTERM) stops at once and removes the test bed and the DuT.

DuTs: linerate-afxdp, linerate-afpacket, linerate-afpacket-v3, linerate-afpacket-mmsg, linerate-xdp, linux-bridge,
linux-ipfwd, xdp-redirect-bare, testpmd-af_xdp, testpmd-af_packet, ovs-afxdp, ovs-system (the
peers are skipped with a reason when their package is missing; scripts/setup.sh installs them).
Only with --dut: linerate-switch and linerate-switch-10k (linerate switch over afxdp:d0/d1 with
1 rule per direction or 10 000 rules), ovs-afxdp-10k (Open vSwitch with the same 10 000 rules),
ovs-system, linerate-afpacket-v3 (TPACKET_V3 block rings), linerate-afpacket-mmsg.

Your own DuT: describe it in a TOML file and pass it with --dut-file (examples/dut-*.toml):
  name = \"my-router\"                    mode = \"l3\" (frames to d0's MAC) or \"l2\" (to the sink's MAC)
  description = \"Linux router with my firewall\"
  start = \"nft -f {spec_dir}/fw.nft && sysctl -qw net.ipv4.ip_forward=1\"   (runs to completion)
  run = \"my-fwd {d0} {d1} --core {cpu}\" (optional: kept running, SIGINT at the end)
  stop = \"nft flush ruleset\"            (optional; also run by the watchdog if the bench dies)
Commands run in the DuT's namespace with placeholders {ns} {d0} {d1} {cpu} {linerate} {peers}
{spec_dir} and {gen,d0,d1,sink}_{mac,ip,ip6}; start exiting 3 means unavailable (skipped).
The bench sends probe frames until they come out of d1 (ready_timeout, default 10 s). The
built-in DuTs that are commands are such files too (crates/measure/duts/).

Examples:
  linerate bench                                 # every available DuT, all sizes, report in linerate-report.html
  linerate bench --dut-file examples/dut-ipfwd-nft.toml --dut linux-ipfwd --sizes 64,1518
  linerate bench --dut linux-bridge --dut linerate-afxdp --sizes 64,imix --pdr-loss 0.5 --latency-rate 50%
  linerate bench --dut linux-bridge --dut linerate-xdp --direction uni,bi --sizes 64   # one way and both ways
  linerate bench --port-a eth1 --port-b eth2 --port-mode l2                            # your switch between eth1 and eth2
  linerate bench --port-a eth1 --port-b eth2 --port-mode l3 --tester-a 10.1.0.2 --gateway-a 10.1.0.1 --tester-b 10.2.0.2
  linerate bench --quick                         # 64 and 1518 bytes, short trials: a first look in ~2 min
  linerate bench --dut linux-bridge --dut linerate-xdp --sizes 64,512,1518 --trial 5 --repetitions 3
  linerate bench --loss-tolerance 0.1 --resolution 0.5 --json bench.json --report bench.html
  linerate bench --overload --frame-size 64 --duration 5   # forwarding rate at overload only

Cleanup: nothing is left behind, however the run ends. SIGINT/SIGTERM/SIGHUP stop it at once and
it removes its test beds and DuTs itself (a second signal exits at once). For everything else,
SIGKILL included, a watchdog process started first ('linerate __reap', in its own session,
ignoring those signals) notices the end of the run and kills the processes in the run's
namespaces and the scripts it started, runs the peers' 'stop', and deletes the namespaces (with
their veths and XDP programs) and the bed records."
)]
pub struct Args {
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
    #[arg(long, value_delimiter = ',', default_values_t = STANDARD_SIZES.to_vec(), value_parser = frame_size::parse)]
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
    /// A confirmation trial of this many seconds at every search's result (FD.io CSIT's final
    /// trial duration; RFC 2544 suggests 60): if it fails, the rate steps down a resolution at
    /// a time (5 at most) until a trial of that length passes.
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

/// The DuTs asked for, in order (see [`dut::select`]).
fn select_duts(a: &Args, peers: bool) -> Result<Vec<Box<dyn Dut>>> {
    dut::select(&a.duts, &a.dut_files, peers).map_err(anyhow::Error::msg)
}

pub fn run(a: Args) -> Result<()> {
    if let Some(n) = &a.name {
        check_name(n)?;
    }
    if !(a.warmup.is_finite() && (0.0..=3600.0).contains(&a.warmup)) {
        bail!("--warmup {}: must be 0 to 3600 seconds", a.warmup);
    }
    if !(a.duration.is_finite() && a.duration > 0.0 && a.duration <= 3600.0) {
        bail!(
            "--duration {}: must be over 0 and at most 3600 seconds",
            a.duration
        );
    }
    // The cleanup guarantee: a watchdog removes what this run made if it
    // dies without cleaning up itself (SIGKILL, crash).
    let guard = super::reap::guard()?;
    if a.overload {
        run_overload(a)?;
    } else {
        run_rfc2544(a)?;
    }
    // Every bed and DuT is gone by now.
    guard.disarm()?;
    Ok(())
}

fn dut_env(exe: &std::path::Path, cpu: usize) -> DutEnv {
    DutEnv {
        linerate: exe.to_path_buf(),
        peers_dir: dut::find_peers_dir(exe),
        cpu,
    }
}

fn check_name(n: &str) -> Result<()> {
    if n.is_empty()
        || n.len() > 20
        || !n
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        bail!("--name {n:?}: letters, digits, '-' and '_', at most 20 characters");
    }
    Ok(())
}

fn pct_arg(name: &str, v: f64, max: f64) -> Result<f64> {
    if !(v.is_finite() && (0.0..=max).contains(&v)) {
        bail!("--{name} {v}: must be a percentage from 0 to {max}");
    }
    Ok(v / 100.0)
}

/// A frame size, or 0 for "none" / an empty list (dropped later).
/// The external ports asked for, checked (None: the namespace bed).
fn external_ports(a: &Args) -> Result<Option<bench::external::External>> {
    use bench::external::{ExtMode, External, L3Port};
    let (Some(pa), Some(pb), Some(mode)) = (&a.port_a, &a.port_b, &a.port_mode) else {
        if a.tester_a.is_some() || a.gateway_a.is_some() || a.tester_b.is_some() {
            bail!(
                "--tester-a, --gateway-a and --tester-b go with --port-a/--port-b --port-mode l3"
            );
        }
        return Ok(None);
    };
    if a.direction.contains(&bench::Direction::Bi) {
        bail!("--direction bi: external ports are measured one way (A -> B)");
    }
    let mode = match mode.as_str() {
        "l3" => {
            let (Some(ta), Some(ga), Some(tb)) = (a.tester_a, a.gateway_a, a.tester_b) else {
                bail!("--port-mode l3: give --tester-a, --gateway-a and --tester-b");
            };
            ExtMode::L3 {
                a: L3Port {
                    ip: ta,
                    gateway: ga,
                },
                b: L3Port {
                    ip: tb,
                    gateway: std::net::Ipv4Addr::UNSPECIFIED,
                },
            }
        }
        _ => {
            if a.tester_a.is_some() || a.gateway_a.is_some() || a.tester_b.is_some() {
                bail!("--port-mode l2: --tester-a, --gateway-a and --tester-b are for l3");
            }
            ExtMode::L2
        }
    };
    Ok(Some(External {
        port_a: pa.clone(),
        port_b: pb.clone(),
        mode,
    }))
}

fn direction(s: &str) -> std::result::Result<bench::Direction, String> {
    match s.trim() {
        "uni" => Ok(bench::Direction::Uni),
        "bi" => Ok(bench::Direction::Bi),
        t => Err(format!("{t:?}: uni (one way) or bi (both ways at once)")),
    }
}

fn common_load(s: &str) -> std::result::Result<bench::CommonLoad, String> {
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

fn size_or_none(s: &str) -> std::result::Result<u32, String> {
    match s.trim() {
        "" | "none" => Ok(0),
        t => frame_size::parse(t),
    }
}

fn run_rfc2544(mut a: Args) -> Result<()> {
    a.frame_loss_sizes.retain(|&s| s != 0);
    a.b2b_sizes.retain(|&s| s != 0);
    let mut sizes = if a.quick {
        vec![64, 1518]
    } else {
        a.sizes.clone()
    };
    sizes.dedup();
    for s in sizes.iter().chain(&a.frame_loss_sizes).chain(&a.b2b_sizes) {
        if !frame_size::is_valid(*s) {
            bail!("frame size {s}: must be 64..=1518 (bytes on the wire, with FCS) or imix");
        }
    }
    if sizes.is_empty() {
        bail!("--sizes: give at least one frame size");
    }
    if !(a.trial.is_finite() && (0.05..=3600.0).contains(&a.trial)) {
        bail!("--trial {}: must be 0.05 to 3600 seconds", a.trial);
    }
    if !(a.line_rate.is_finite() && a.line_rate >= 0.0) {
        bail!(
            "--line-rate {}: must be a number of Gbit/s >= 0",
            a.line_rate
        );
    }
    let loss_tolerance = pct_arg("loss-tolerance", a.loss_tolerance, 100.0)?;
    let pdr_loss = pct_arg("pdr-loss", a.pdr_loss, 100.0)?;
    if pdr_loss < loss_tolerance {
        bail!(
            "--pdr-loss {}: must be at least --loss-tolerance ({})",
            a.pdr_loss,
            a.loss_tolerance
        );
    }
    let resolution = pct_arg("resolution", a.resolution, 50.0)?;
    if resolution <= 0.0 {
        bail!("--resolution 0: must be above 0 %");
    }
    let external = external_ports(&a)?;
    let mut duts = if external.is_some() {
        Vec::new()
    } else {
        select_duts(&a, !a.no_peers)?
    };
    let exe = std::env::current_exe()?;
    let procedures = Rfc2544Config {
        sizes: sizes.clone(),
        trial: Duration::from_secs_f64(if a.quick { 0.2 } else { a.trial }),
        loss_tolerance,
        pdr_loss,
        strict: a.strict,
        resolution: if a.quick {
            resolution.max(0.02)
        } else {
            resolution
        },
        repetitions: a.repetitions.unwrap_or(if a.quick { 1 } else { 2 }).max(1),
        latency_trials: a
            .latency_trials
            .unwrap_or(if a.strict { 20 } else { 1 })
            .max(1),
        settle: seconds(
            "--settle",
            a.settle.unwrap_or(if a.strict { 5.0 } else { 0.0 }),
        )?,
        final_trial: a
            .final_trial
            .map(|v| seconds("--final-trial", v))
            .transpose()?,
        latency: !a.no_latency,
        frame_loss_sizes: if a.quick {
            vec![64]
        } else {
            a.frame_loss_sizes.clone()
        },
        back_to_back_sizes: if a.quick {
            vec![64]
        } else {
            a.b2b_sizes.clone()
        },
        back_to_back_trials: if a.quick { 1 } else { a.b2b_trials.max(1) },
        ..Rfc2544Config::default()
    };
    if let Some(c) = a.sink_cpu {
        if c == a.gen_cpu || c == a.dut_cpu {
            eprintln!(
                "warning: --sink-cpu {c} is the {}'s CPU: the sink's receive thread shares it (a spinning generator starves it; measured: 0.06 Mpps at 64 B), so losses there are the sink's",
                if c == a.gen_cpu { "generator" } else { "DuT" }
            );
        }
    }
    let cfg = Rfc2544Bench {
        procedures,
        gen_cpu: a.gen_cpu,
        dut_cpu: a.dut_cpu,
        flows: 64,
        ts_every: 16,
        threaded_napi: a.threaded_napi,
        rps: !a.no_rps,
        sink_cpu: a.sink_cpu,
        bed_name: a.name.clone(),
        env: dut_env(&exe, a.dut_cpu),
        directions: a.direction.clone(),
        reverse_gen_cpu: a.reverse_gen_cpu,
        common_load: if a.no_latency {
            bench::CommonLoad::Off
        } else {
            a.latency_rate
        },
    };
    // Earlier runs, read before the run: an unreadable file ends it now.
    // Runs against external DuTs are not kept: the history pools runs of
    // the same DuTs, which it cannot tell apart behind two interfaces.
    let history_file = if a.no_history || external.is_some() {
        None
    } else {
        a.history.clone().or_else(history::default_path)
    };
    let (machine, settings) = (history::machine(), history::settings(&cfg));
    let earlier = match &history_file {
        Some(p) => {
            let l = history::load(p, &machine, &settings).map_err(anyhow::Error::msg)?;
            eprintln!(
                "history: {} earlier run(s) with these settings on this machine in {}{}",
                l.runs.len(),
                p.display(),
                if l.bad_lines > 0 {
                    format!(" ({} line(s) that are not a run skipped)", l.bad_lines)
                } else {
                    String::new()
                }
            );
            l.runs
        }
        None => Vec::new(),
    };
    let stop = super::common::stop_flag()?;
    let t0 = Instant::now();
    let n = duts.len();
    eprintln!(
        "linerate bench: RFC 2544 on {n} DuTs at {:?} bytes, {:.2} s trials, loss tolerance {} %, resolution {} %; generator on CPU {}, DuT on CPU {}",
        cfg.procedures.sizes,
        cfg.procedures.trial.as_secs_f64(),
        a.loss_tolerance,
        cfg.procedures.resolution * 100.0,
        a.gen_cpu,
        a.dut_cpu
    );
    // Further repetitions come in further passes over every DuT.
    let names: Vec<String> = duts
        .iter()
        .flat_map(|d| {
            cfg.directions.iter().map(move |dir| match dir {
                bench::Direction::Uni => d.name(),
                bench::Direction::Bi => format!("{} bi", d.name()),
            })
        })
        .collect();
    let names = if external.is_some() {
        vec!["external".to_string()]
    } else {
        names
    };
    let n = names.len();
    let passes = cfg.procedures.repetitions;
    let (mut pass, mut last) = (1, 0);
    let mut progress = |name: &str, size: u32, what: &str| {
        let i = names.iter().position(|x| x == name).unwrap_or(0) + 1;
        if i < last {
            pass += 1;
        }
        last = i;
        let at = if size > 0 {
            format!(" {}", frame_size::label_b(size))
        } else {
            String::new()
        };
        // After the searches' passes: the latency at the common load.
        let of = if pass > passes {
            "common load, ".to_string()
        } else if passes > 1 {
            format!("pass {pass}/{passes}, ")
        } else {
            String::new()
        };
        eprintln!(
            "[{:>5.1}s] [{of}{i}/{n}] {name}{at}: {what}",
            t0.elapsed().as_secs_f64()
        );
    };
    // The measurement's own latency first: the generator straight into the
    // sink (on the namespace bed; not for external ports).
    let empty = if cfg.procedures.latency && external.is_none() {
        bench::empty_bed(&cfg, &stop, &mut progress).unwrap_or_else(|e| {
            eprintln!("empty bed: {e} (no latency baseline)");
            Vec::new()
        })
    } else {
        Vec::new()
    };
    let mut results = match &external {
        Some(ext) => vec![bench::external::run(&cfg, ext, &stop, &mut progress)],
        None => bench::run_rfc2544(&cfg, &mut duts, &stop, &mut progress),
    };
    drop(duts);
    let interrupted = stop.load(std::sync::atomic::Ordering::SeqCst);
    if interrupted {
        eprintln!("interrupted: test beds and DuTs removed");
    }
    let date = date_now();
    let history = history_file.map(|file| {
        let this = history::run_of(&date, &machine, &settings, &results);
        let spread = history::between_run_spread(&this, &earlier);
        history::widen(&mut results, spread);
        // Only a whole run is kept; a failed write costs the next run's
        // between-run spread, not this run's results.
        if !interrupted && !this.results.is_empty() {
            if let Err(e) = history::append(&file, &this) {
                eprintln!("{e}: this run is not kept");
            }
        }
        history::Summary {
            file,
            runs: earlier.len(),
            spread,
        }
    });
    let json_to_stdout = a.json.as_deref() == Some(std::path::Path::new("-"));
    {
        let mut out: Box<dyn Write> = if json_to_stdout {
            Box::new(std::io::stderr().lock())
        } else {
            Box::new(std::io::stdout().lock())
        };
        print_rfc2544(
            &mut out,
            &results,
            &empty,
            &cfg,
            history.as_ref(),
            external.is_some(),
        )?;
    }
    if let Some(p) = &a.json {
        let v = serde_json::json!({
            "date": date,
            "environment": to_report::environment(&cfg, &results),
            "procedures": cfg.procedures,
            "history": history,
            "seconds": t0.elapsed().as_secs_f64(),
            "interrupted": interrupted,
            "empty_bed": empty,
            "results": results,
        });
        if json_to_stdout {
            outln!("{v}");
        } else {
            linerate_io::file::write_whole(p, format!("{v:#}\n").as_bytes())
                .map_err(|e| anyhow::anyhow!("--json {e}"))?;
            eprintln!("JSON with every trial: {}", p.display());
        }
    }
    if !a.no_report {
        let d = to_report::report_data(
            "linerate bench: RFC 2544",
            &date,
            &cfg,
            &results,
            &empty,
            a.line_rate,
            history.as_ref(),
        );
        linerate_io::file::write_whole(
            &a.report,
            linerate_measure::report::render_html(&d).as_bytes(),
        )
        .map_err(|e| anyhow::anyhow!("--report {e}"))?;
        eprintln!("report: {}", a.report.display());
    }
    eprintln!("done in {:.0} s", t0.elapsed().as_secs_f64());
    // A DuT that failed (did not start, never forwarded, died) fails the
    // run: one line each, naming where it is described.
    let mut failed = results
        .iter()
        .filter(|r| r.status.starts_with("failed") || r.status.starts_with("repetition"))
        .map(|r| {
            let at = if r.origin == "built-in" {
                String::new()
            } else {
                format!("{}: ", r.origin)
            };
            format!("{at}DuT {}: {}", r.label(), r.status)
        })
        .collect::<Vec<_>>();
    if let Some(last) = failed.pop() {
        for f in failed {
            eprintln!("error: {f}");
        }
        bail!("{last}");
    }
    Ok(())
}

/// A duration option in seconds: finite, not negative, at most a day.
fn seconds(what: &str, v: f64) -> Result<Duration> {
    if !(v.is_finite() && (0.0..=86400.0).contains(&v)) {
        anyhow::bail!("{what}: {v} is not a number of seconds from 0 to 86400");
    }
    Ok(Duration::from_secs_f64(v))
}

/// UTC date and time, RFC 3339, from the system clock.
fn date_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let days = secs / 86400;
    let (h, m, s) = (secs % 86400 / 3600, secs % 3600 / 60, secs % 60);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let mo = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(mo <= 2);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{m:02}:{s:02}Z")
}

fn print_rfc2544(
    o: &mut dyn Write,
    results: &[Rfc2544Result],
    empty: &[bench::EmptyBed],
    cfg: &Rfc2544Bench,
    history: Option<&history::Summary>,
    external: bool,
) -> Result<()> {
    writeln!(o)?;
    writeln!(
        o,
        "RFC 2544 throughput: NDR (loss tolerance {} %) and PDR (loss <= {} %), latency at the NDR; kernel {}\nCPUs: {}",
        cfg.procedures.loss_tolerance * 100.0,
        cfg.procedures.pdr_loss * 100.0,
        dut::kernel_release(),
        if external {
            format!(
                "generator on CPU {}; the DuT is external (its CPUs are its own)",
                cfg.gen_cpu
            )
        } else {
            bench::cpu_placement(cfg)
        }
    )?;
    for e in empty {
        if let Some(l) = &e.trial.latency {
            writeln!(
                o,
                "empty bed (generator -> veth -> sink, no DuT) {} at {:.1} Mpps: latency p50 {:.1} us, p99 {:.1} us, min {:.1} us, max {:.1} us{}",
                frame_size::label_b(e.frame_size),
                e.rate_pps / 1e6,
                l.p50_ns / 1e3,
                l.p99_ns / 1e3,
                l.min_ns / 1e3,
                l.max_ns / 1e3,
                if e.trial.invalid.is_empty() {
                    String::new()
                } else {
                    format!(" (invalid: {})", e.trial.invalid.join("; "))
                }
            )?;
        }
    }
    writeln!(
        o,
        "{:<20} {:>5} {:>10} {:>8} {:>15} {:>10} {:>26} {:>9}  note",
        "DuT",
        "bytes",
        "NDR Mpps",
        "Gbit/s",
        "min-max Mpps",
        "PDR Mpps",
        "lat p50/p99 (-empty) us",
        "vs bridge"
    )?;
    // The measurement's own share of a p50: " (p50 minus the empty bed's)".
    let minus_empty = |size: u32, l: &linerate_measure::bench::rfc2544::Latency| {
        empty
            .iter()
            .find(|e| e.frame_size == size)
            .and_then(|e| e.trial.latency.as_ref())
            .map_or(String::new(), |b| {
                format!(" ({:+.1})", (l.p50_ns - b.p50_ns) / 1e3)
            })
    };
    let bridge = |size: u32, dir: bench::Direction| {
        results
            .iter()
            .find(|r| r.name == "linux-bridge" && r.direction == dir)
            .and_then(|r| r.sizes.iter().find(|s| s.frame_size == size))
            .and_then(|s| s.throughput_pps)
    };
    for r in results {
        if r.sizes.is_empty() {
            writeln!(o, "{:<20} {:>5} {:>10}  {}", r.label(), "-", "-", r.status)?;
            continue;
        }
        for s in &r.sizes {
            let (tp, g, spread, ratio) = match s.throughput_pps {
                Some(v) => (
                    format!(
                        "{}{:.3}",
                        if s.generator_limited { ">=" } else { "" },
                        v / 1e6
                    ),
                    format!(
                        "{:.2}",
                        linerate_measure::report::l1_gbps(
                            v / 1e6,
                            frame_size::wire_bytes(s.frame_size)
                        )
                    ),
                    format!(
                        "{:.3}-{:.3}",
                        s.throughput_min_pps.unwrap_or(v) / 1e6,
                        s.throughput_max_pps.unwrap_or(v) / 1e6
                    ),
                    bridge(s.frame_size, r.direction)
                        .filter(|b| *b > 0.0)
                        .map(|b| format!("{:.2}x", v / b))
                        .unwrap_or_else(|| "-".into()),
                ),
                None => ("-".into(), "-".into(), "-".into(), "-".into()),
            };
            let pdr = s.pdr_pps.map_or_else(
                || "-".into(),
                |v| {
                    format!(
                        "{}{:.3}",
                        if s.generator_limited { ">=" } else { "" },
                        v / 1e6
                    )
                },
            );
            let lat = s
                .latency()
                .filter(|l| l.samples > 0)
                .map(|l| {
                    format!(
                        "{:.1}/{:.1}{}",
                        l.p50_ns / 1e3,
                        l.p99_ns / 1e3,
                        minus_empty(s.frame_size, l)
                    )
                })
                .unwrap_or_else(|| "-".into());
            let mut note = Vec::new();
            if s.generator_limited {
                note.push("generator-limited".to_string());
            }
            if s.kernel_disagreements > 0 {
                note.push(format!(
                    "{} trial(s) disagree with kernel counters > 0.5 %",
                    s.kernel_disagreements
                ));
            }
            if s.searches.iter().any(|x| x.throughput_pps == 0.0) {
                note.push("a search where no rate passed".into());
            }
            note.extend(linerate_measure::bench::rfc2544::size_notes(s));
            if r.status != "ok" {
                note.push(r.status.clone());
            }
            writeln!(
                o,
                "{:<20} {:>5} {:>10} {:>8} {:>15} {:>10} {:>26} {:>9}  {}",
                r.label(),
                frame_size::label(s.frame_size),
                tp,
                g,
                spread,
                pdr,
                lat,
                ratio,
                note.join("; ")
            )?;
        }
    }
    // Latency at the common load: every DuT at one rate per size.
    let mut common: Vec<String> = Vec::new();
    for r in results {
        for s in &r.sizes {
            let (Some(rate), Some(l)) = (s.common_latency_pps, s.common_latency_merged.as_ref())
            else {
                continue;
            };
            let own = minus_empty(s.frame_size, l);
            let bad = s
                .common_latency_trials
                .iter()
                .filter(|&&i| s.trials[i].lost > 0 || !s.trials[i].invalid.is_empty())
                .count();
            common.push(format!(
                "{:<20} {:>5} {:>10.3} {:>26} {:>10.1}  {}",
                r.label(),
                frame_size::label(s.frame_size),
                rate / 1e6,
                format!("{:.1}/{:.1}{own}", l.p50_ns / 1e3, l.p99_ns / 1e3),
                l.max_ns / 1e3,
                if bad > 0 {
                    format!("{bad} trial(s) lost frames or stayed invalid")
                } else {
                    String::new()
                }
            ));
        }
    }
    if !common.is_empty() {
        writeln!(
            o,
            "\nLatency at a common load (the same rate for every DuT: {}):\n{:<20} {:>5} {:>10} {:>26} {:>10}  note",
            match cfg.common_load {
                bench::CommonLoad::OfSlowest(f) => format!("{:.0} % of the slowest DuT's NDR at each size", f * 100.0),
                bench::CommonLoad::Pps(p) => format!("{p:.0} frames/s"),
                bench::CommonLoad::Off => String::new(),
            },
            "DuT",
            "bytes",
            "Mpps",
            "lat p50/p99 (-empty) us",
            "max us"
        )?;
        for l in common {
            writeln!(o, "{l}")?;
        }
    }
    let spreads: Vec<String> = results
        .iter()
        .filter_map(|r| {
            r.throughput_spread
                .map(|x| format!("{} ±{:.1} %", r.label(), x * 100.0))
        })
        .collect();
    if !spreads.is_empty() {
        writeln!(
            o,
            "\nRe-run spread: a re-run's throughput is expected within this of this run's \
             (95 % prediction interval{}{})",
            if cfg.procedures.repetitions > 1 {
                format!(
                    " from the {} searches per size, pooled over the DuT's sizes, at least the \
                     one pooled over every DuT's",
                    cfg.procedures.repetitions
                )
            } else {
                String::new()
            },
            match history.map(|h| (h.runs, h.spread)) {
                Some((n, Some(b))) => format!(
                    "{} between this run and {n} earlier run(s) here, pooled over every DuT: \
                     ±{:.1} %",
                    if cfg.procedures.repetitions > 1 {
                        " and the one"
                    } else {
                        ""
                    },
                    b * 100.0
                ),
                Some(_) => "; no earlier run here yet to add the spread between runs".into(),
                None => String::new(),
            }
        )?;
        for chunk in spreads.chunks(4) {
            writeln!(o, "  {}", chunk.join("   "))?;
        }
    }
    let loss: Vec<&Rfc2544Result> = results
        .iter()
        .filter(|r| {
            r.sizes
                .iter()
                .any(|s| !s.frame_loss.is_empty() || !s.back_to_back.is_empty())
        })
        .collect();
    if !loss.is_empty() {
        writeln!(o)?;
        writeln!(
            o,
            "Frame loss (% of frames) at % of the generator's top speed; back-to-back: longest lossless burst"
        )?;
        for r in loss {
            for s in &r.sizes {
                if s.frame_loss.is_empty() && s.back_to_back.is_empty() {
                    continue;
                }
                let fl: Vec<String> = s
                    .frame_loss
                    .iter()
                    .map(|(f, _, l)| format!("{:.0}%:{:.1}", f * 100.0, l * 100.0))
                    .collect();
                let bb: Vec<String> = s
                    .back_to_back
                    .iter()
                    .map(|b| format!("{}{}", if b.at_least { ">=" } else { "" }, b.frames))
                    .collect();
                writeln!(
                    o,
                    "{:<20} {:>5}  loss {}  b2b {}",
                    r.label(),
                    frame_size::label(s.frame_size),
                    if fl.is_empty() {
                        "-".into()
                    } else {
                        fl.join(" ")
                    },
                    if bb.is_empty() {
                        "-".into()
                    } else {
                        bb.join(", ")
                    }
                )?;
            }
        }
    }
    Ok(())
}

fn run_overload(a: Args) -> Result<()> {
    if a.frame_size < 64 || a.frame_size > 1518 {
        bail!("--frame-size {}: must be 64..=1518", a.frame_size);
    }
    let mut duts = select_duts(&a, a.peers)?;
    let exe = std::env::current_exe()?;
    let (duration, warmup) = if a.quick {
        (1.0, 0.5)
    } else {
        (a.duration, a.warmup)
    };
    let cfg = BenchConfig {
        frame_len: a.frame_size - 4,
        warmup: Duration::from_secs_f64(warmup),
        duration: Duration::from_secs_f64(duration),
        repeat: a.repeat.max(1),
        gen_cpu: a.gen_cpu,
        dut_cpu: a.dut_cpu,
        flows: 64,
        threaded_napi: a.threaded_napi,
        rps: !a.no_rps,
        bed_prefix: a.name.clone(),
        env: dut_env(&exe, a.dut_cpu),
    };
    let stop = super::common::stop_flag()?;
    let t0 = Instant::now();
    let n = duts.len();
    let mut i = 0;
    let mut last = String::new();
    let mut progress = |name: &str, what: &str| {
        if name != last {
            i += 1;
            last = name.to_string();
        }
        eprintln!(
            "[{:>5.1}s] [{i}/{n}] {name}: {what}",
            t0.elapsed().as_secs_f64()
        );
    };
    eprintln!(
        "linerate bench: {} DuTs, {}-byte frames, {:.1} s per trial after {:.1} s warm-up, generator on CPU {}, DuT on CPU {}",
        n, a.frame_size, duration, warmup, a.gen_cpu, a.dut_cpu
    );
    let results = bench::run(&cfg, &mut duts, &stop, &mut progress);
    drop(duts);
    if stop.load(std::sync::atomic::Ordering::SeqCst) {
        eprintln!("interrupted: test beds and DuTs removed");
    }
    if a.json.is_some() {
        let v = serde_json::json!({
            "frame_size": a.frame_size,
            "duration_s": duration,
            "warmup_s": warmup,
            "gen_cpu": a.gen_cpu,
            "dut_cpu": a.dut_cpu,
            "threaded_napi": a.threaded_napi,
            "rps": !a.no_rps,
            "kernel": kernel_release(),
            "results": results,
        });
        outln!("{v}");
    } else {
        print_table(&results, a.frame_size)?;
    }
    Ok(())
}

use linerate_io::host::kernel_release;

fn print_table(results: &[DutResult], frame: usize) -> Result<()> {
    let bridge = results
        .iter()
        .find(|r| r.name == "linux-bridge")
        .and_then(|r| r.median_pps);
    let mut o = std::io::stdout().lock();
    writeln!(o)?;
    writeln!(
        o,
        "{frame}-byte frames at overload, forwarded rate counted at the sink (kernel {})",
        kernel_release()
    )?;
    writeln!(
        o,
        "{:<24} {:>9} {:>10} {:>15} {:>9}  note",
        "DuT", "offered", "forwarded", "min-max", "vs bridge"
    )?;
    writeln!(
        o,
        "{:<24} {:>9} {:>10} {:>15} {:>9}",
        "", "Mpps", "Mpps", "Mpps", ""
    )?;
    for r in results {
        let off =
            r.trials.iter().map(|t| t.offered_pps).sum::<f64>() / r.trials.len().max(1) as f64;
        match r.median_pps {
            Some(m) => {
                let ratio = bridge
                    .map(|b| format!("{:.2}x", m / b))
                    .unwrap_or_else(|| "-".into());
                let spread = format!(
                    "{:.3}-{:.3}",
                    r.min_pps.unwrap_or(m) / 1e6,
                    r.max_pps.unwrap_or(m) / 1e6
                );
                let note = if r.status == "ok" {
                    r.description.clone()
                } else {
                    r.status.clone()
                };
                writeln!(
                    o,
                    "{:<24} {:>9.3} {:>10.3} {:>15} {:>9}  {}",
                    r.name,
                    off / 1e6,
                    m / 1e6,
                    spread,
                    ratio,
                    note
                )?;
            }
            None => writeln!(
                o,
                "{:<24} {:>9} {:>10} {:>15} {:>9}  {}",
                r.name, "-", "-", "-", "-", r.status
            )?,
        }
    }
    Ok(())
}
