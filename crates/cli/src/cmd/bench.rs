//! `linerate bench`: every device under test on the default test bed.

use anyhow::{bail, Result};
use linerate_measure::bench::dut::{
    self, BareRedirect, Bridge, Dut, DutEnv, IpForward, LinerateFwd, ScriptPeer,
};
use linerate_measure::bench::{self, BenchConfig, DutResult};
use std::io::Write;
use std::time::{Duration, Instant};

#[derive(clap::Args)]
#[command(
    about = "Benchmark linerate against the kernel and other tools on a namespace test bed",
    after_help = "\
Builds a fresh gen-ns <-veth-> dut-ns <-veth-> sink-ns bed for each device under test, sends
64-byte UDP frames at overload from an in-kernel XDP generator (BPF_PROG_RUN live frames) pinned
to one core, runs the DuT on the other core, and counts at the sink with an XDP counter.

Examples:
  linerate bench                          # linerate fwd (afxdp, afpacket, xdp), bridge, IP forwarding, bare XDP
  linerate bench --peers                  # also DPDK testpmd (af_xdp, af_packet) and Open vSwitch (afxdp)
  linerate bench --dut linux-bridge --dut linerate-afxdp --duration 10 --repeat 3
  linerate bench --quick --json > bench.json

Cleanup: nothing is left behind, however the run ends. SIGINT/SIGTERM/SIGHUP stop it at once and
it removes its test beds and DuTs itself (a second signal exits at once). For everything else,
SIGKILL included, a watchdog process started first ('linerate __reap', in its own session,
ignoring those signals) notices the end of the run and kills the processes in the run's
namespaces and the scripts it started, runs the peers' 'stop', and deletes the namespaces (with
their veths and XDP programs) and the bed records."
)]
pub struct Args {
    /// Only these DuTs (repeatable). Known: linerate-afxdp, linerate-afpacket, linerate-afpacket-mmsg,
    /// linerate-xdp, linux-bridge, linux-ipfwd, xdp-redirect-bare, testpmd-af_xdp, testpmd-af_packet, ovs-afxdp, ovs-system.
    #[arg(long = "dut")]
    pub duts: Vec<String>,
    /// Add the peers that need other packages: DPDK testpmd and Open vSwitch.
    #[arg(long)]
    pub peers: bool,
    /// Seconds measured per trial (after the warm-up).
    #[arg(long, default_value_t = 5.0)]
    pub duration: f64,
    /// Warm-up seconds per trial.
    #[arg(long, default_value_t = 1.0)]
    pub warmup: f64,
    /// Trials per DuT (the table shows the median and min-max).
    #[arg(long, default_value_t = 1)]
    pub repeat: usize,
    /// Frame size in bytes on the wire, with FCS (64 = minimum Ethernet frame).
    #[arg(long, default_value_t = 64)]
    pub frame_size: usize,
    /// Short trials (1 s, 0.5 s warm-up): for CI and a first look.
    #[arg(long)]
    pub quick: bool,
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
    /// Print the results as JSON on stdout (progress still goes to stderr).
    #[arg(long)]
    pub json: bool,
    /// Test bed names: PREFIX + a counter (namespaces PREFIX0-gen, ...); default "lr" + pid + letters.
    #[arg(long = "name", value_name = "PREFIX")]
    pub name: Option<String>,
}

fn all_duts() -> Vec<Box<dyn Dut>> {
    vec![
        Box::new(Bridge),
        Box::new(IpForward),
        Box::new(LinerateFwd::new("afpacket")),
        Box::new(LinerateFwd::new("afpacket-mmsg")),
        Box::new(LinerateFwd::new("afxdp")),
        Box::new(LinerateFwd::new("xdp")),
        Box::new(BareRedirect::new()),
        Box::new(ScriptPeer::new(
            "testpmd-af_xdp",
            "dut-testpmd.sh",
            &["af_xdp"],
            "DPDK testpmd io forward, net_af_xdp",
        )),
        Box::new(ScriptPeer::new(
            "testpmd-af_packet",
            "dut-testpmd.sh",
            &["af_packet"],
            "DPDK testpmd io forward, net_af_packet",
        )),
        Box::new(ScriptPeer::new(
            "ovs-afxdp",
            "dut-ovs.sh",
            &["afxdp"],
            "Open vSwitch userspace datapath, afxdp ports",
        )),
        Box::new(ScriptPeer::new(
            "ovs-system",
            "dut-ovs.sh",
            &["system"],
            "Open vSwitch userspace datapath, system ports",
        )),
    ]
}

const DEFAULT: [&str; 6] = [
    "linux-bridge",
    "linux-ipfwd",
    "linerate-afpacket",
    "linerate-afxdp",
    "linerate-xdp",
    "xdp-redirect-bare",
];
const PEERS: [&str; 3] = ["testpmd-af_xdp", "testpmd-af_packet", "ovs-afxdp"];

pub fn run(a: Args) -> Result<()> {
    if a.frame_size < 64 || a.frame_size > 1518 {
        bail!("--frame-size {}: must be 64..=1518", a.frame_size);
    }
    // --- cleanup guarantee (watchdog) ---
    if let Some(p) = &a.name {
        if p.is_empty()
            || p.len() > 20
            || !p
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            bail!("--name '{p}': use 1 to 20 letters, digits, '-' or '_'");
        }
    }
    let guard = super::reap::guard()?;
    // --- end ---
    let known: Vec<String> = all_duts().iter().map(|d| d.name()).collect();
    for d in &a.duts {
        if !known.contains(d) {
            bail!(
                "--dut {d}: unknown device under test (known: {})",
                known.join(", ")
            );
        }
    }
    let want: Vec<String> = if !a.duts.is_empty() {
        a.duts.clone()
    } else {
        let mut w: Vec<String> = DEFAULT.iter().map(|s| s.to_string()).collect();
        if a.peers {
            w.extend(PEERS.iter().map(|s| s.to_string()));
        }
        w
    };
    let mut duts: Vec<Box<dyn Dut>> = all_duts()
        .into_iter()
        .filter(|d| want.contains(&d.name()))
        .collect();
    duts.sort_by_key(|d| want.iter().position(|w| *w == d.name()));
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
        env: DutEnv {
            linerate: exe.clone(),
            peers_dir: dut::find_peers_dir(&exe),
            cpu: a.dut_cpu,
        },
        bed_prefix: a.name.clone(),
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
    // Everything is removed: the watchdog has nothing to do.
    guard.disarm()?;
    if stop.load(std::sync::atomic::Ordering::SeqCst) {
        eprintln!("interrupted: test beds and DuTs removed");
    }
    if a.json {
        let v = serde_json::json!({
            "frame_size": a.frame_size,
            "duration_s": duration,
            "warmup_s": warmup,
            "gen_cpu": a.gen_cpu,
            "dut_cpu": a.dut_cpu,
            "threaded_napi": a.threaded_napi,
            "kernel": kernel_release(),
            "results": results,
        });
        println!("{v}");
    } else {
        print_table(&results, a.frame_size)?;
    }
    Ok(())
}

fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .unwrap_or_default()
        .trim()
        .to_string()
}

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
