//! `linerate testbed`: build, inspect and remove the namespace/veth test bed
//! (gen <-veth-> dut <-veth-> sink), see `linerate_measure::testbed`.
//!
//! Signals: `up` installs a SIGINT/SIGTERM/SIGHUP handler (ctrlc crate,
//! "termination" feature) before it builds anything. With `--hold` the bed
//! stays until such a signal, then it is removed; a signal that arrives
//! while `up` is still building makes it remove the bed and fail. A bed left
//! by a process killed with SIGKILL is removed with `down --name` / `--all`;
//! with `--hold` a watchdog process (`linerate_measure::guard`) removes it
//! also then.

use anyhow::{bail, Context, Result};
use clap::{Args as ClapArgs, Subcommand, ValueEnum};
use linerate_measure::testbed::{self, Testbed, TestbedConfig};
use std::sync::atomic::Ordering;

#[derive(ClapArgs)]
#[command(
    about = "Build, inspect and remove the test bed: namespaces gen <-veth-> dut <-veth-> sink",
    after_help = "Examples:\n  linerate testbed up --name bed1 --dut ip-forward\n  linerate testbed status\n  linerate testbed exec --name bed1 gen -- ip -s link\n  linerate testbed down --name bed1\n  linerate testbed up --threaded-napi --napi-cpu 1 --hold   # removed on Ctrl-C"
)]
pub struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    Up(UpArgs),
    Down(DownArgs),
    Status(StatusArgs),
    Exec(ExecArgs),
}

#[derive(Clone, Copy, ValueEnum)]
enum OnOff {
    On,
    Off,
}

#[derive(Clone, Copy, ValueEnum)]
enum Dut {
    /// Nothing: the DuT namespace drops transit frames (or run your own DuT on d0/d1).
    None,
    /// Linux IPv4/IPv6 forwarding; generator: dst MAC = d0, dst IP = sink.
    IpForward,
    /// Linux bridge br0 over d0 and d1; generator: dst MAC = s0.
    Bridge,
}

/// Create a test bed and print its namespaces, interfaces, MACs and IPs.
#[derive(ClapArgs)]
#[command(
    after_help = "Examples:\n  linerate testbed up\n  linerate testbed up --name bed1 --queues 4 --dut bridge --json\n  linerate testbed up --threaded-napi --napi-cpu 1 --hold\n\nWithout --hold the bed stays after the command ends; remove it with 'linerate testbed down'."
)]
struct UpArgs {
    /// Bed name, prefix of the namespace names (default: "lr" + pid + counter).
    #[arg(long)]
    name: Option<String>,
    /// TX/RX queues per veth (for multi-queue AF_XDP).
    #[arg(long, default_value_t = 1)]
    queues: u32,
    /// MTU of the veths.
    #[arg(long)]
    mtu: Option<u32>,
    /// GRO on the veths (ethtool -K); default: kernel default (on with --threaded-napi).
    #[arg(long, value_enum)]
    gro: Option<OnOff>,
    /// Run the NAPI of every veth in its own kernel thread.
    #[arg(long)]
    threaded_napi: bool,
    /// Pin the NAPI threads to this CPU (needs --threaded-napi).
    #[arg(long, requires = "threaded_napi")]
    napi_cpu: Option<usize>,
    /// No IPv6 addresses (IPv6 disabled on the veths).
    #[arg(long)]
    no_ipv6: bool,
    /// Receive packet steering of d0 to this CPU: the stack's work on what d0 receives (after
    /// its XDP hook) runs there, not on the CPU that sent to d0.
    #[arg(long)]
    rps_cpu: Option<usize>,
    /// Make the DuT namespace a kernel DuT.
    #[arg(long, value_enum, default_value = "none")]
    dut: Dut,
    /// Stay up until SIGINT/SIGTERM, then remove the bed (a watchdog process removes it also
    /// when this process is killed with SIGKILL).
    #[arg(long)]
    hold: bool,
    /// Print the description as one line of JSON.
    #[arg(long)]
    json: bool,
}

/// Remove a test bed (also one left by a killed process).
#[derive(ClapArgs)]
#[command(
    after_help = "Examples:\n  linerate testbed down --name bed1\n  linerate testbed down --all"
)]
struct DownArgs {
    /// The bed to remove.
    #[arg(long, conflicts_with = "all")]
    name: Option<String>,
    /// Remove every bed recorded in /run/linerate/testbeds.
    #[arg(long)]
    all: bool,
}

/// List test beds with their interfaces and counters.
#[derive(ClapArgs)]
#[command(
    after_help = "Examples:\n  linerate testbed status\n  linerate testbed status --name bed1 --json"
)]
struct StatusArgs {
    /// Only this bed.
    #[arg(long)]
    name: Option<String>,
    /// JSON output (an array of beds).
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, ValueEnum)]
enum Role {
    Gen,
    Dut,
    Sink,
}

/// Run a command in a namespace of a test bed.
#[derive(ClapArgs)]
#[command(
    after_help = "Examples:\n  linerate testbed exec gen -- ip -s link show g0\n  linerate testbed exec --name bed1 dut -- sysctl net.ipv4.ip_forward"
)]
struct ExecArgs {
    /// The bed (default: the only one).
    #[arg(long)]
    name: Option<String>,
    /// Which namespace.
    #[arg(value_enum)]
    role: Role,
    /// The command and its arguments.
    #[arg(last = true, required = true)]
    cmd: Vec<String>,
}

pub fn run(a: Args) -> Result<()> {
    match a.cmd {
        Cmd::Up(u) => up(u),
        Cmd::Down(d) => down(d),
        Cmd::Status(s) => status(s),
        Cmd::Exec(e) => exec(e),
    }
}

fn up(a: UpArgs) -> Result<()> {
    let stop = super::common::stop_flag()?;
    // --hold: the bed lives as long as this process; a watchdog removes it
    // also when the process is killed with SIGKILL.
    let guard = if a.hold {
        Some(super::reap::guard()?)
    } else {
        None
    };
    let cfg = TestbedConfig {
        name: a.name.clone(),
        queues: a.queues,
        mtu: a.mtu,
        gro: a.gro.map(|g| matches!(g, OnOff::On)),
        threaded_napi: a.threaded_napi,
        napi_cpu: a.napi_cpu,
        threaded_dut_only: false,
        ipv6: !a.no_ipv6,
        rps_cpu: a.rps_cpu,
    };
    let mut bed = Testbed::up(&cfg)?;
    match a.dut {
        Dut::None => {}
        Dut::IpForward => bed.enable_ip_forwarding()?,
        Dut::Bridge => bed.enable_bridge()?,
    }
    if stop.load(Ordering::SeqCst) {
        drop(bed);
        bail!("interrupted; the test bed was removed");
    }
    let info = bed.info().clone();
    if a.json {
        outln!("{}", serde_json::to_string(&info)?);
    } else {
        out!("{}{}", info.text(), info.examples(a.hold));
    }
    super::common::stdout_result()?;
    if !a.hold {
        bed.detach();
        return Ok(());
    }
    // Wait for SIGINT/SIGTERM/SIGHUP; then `bed` drops and is removed.
    let mut w = linerate_pipeline::poll::Watch::new(&stop, None);
    while w.next().is_some() {}
    let name = info.name.clone();
    bed.down()?;
    if let Some(g) = guard {
        g.disarm()?;
    }
    if !a.json {
        outln!("test bed {name} removed");
    }
    Ok(())
}

fn down(a: DownArgs) -> Result<()> {
    if a.all {
        let names = testbed::down_all()?;
        if names.is_empty() {
            outln!("no test beds");
        }
        for n in names {
            outln!("test bed {n} removed");
        }
        return Ok(());
    }
    let name = match a.name {
        Some(n) => n,
        None => {
            let beds: Vec<String> = testbed::list().into_iter().map(|i| i.name).collect();
            bail!(
                "say which test bed: --name NAME or --all (beds: {})",
                if beds.is_empty() {
                    "none".to_string()
                } else {
                    beds.join(", ")
                }
            );
        }
    };
    testbed::down_by_name(&name)?;
    outln!("test bed {name} removed");
    Ok(())
}

fn status(a: StatusArgs) -> Result<()> {
    let st = testbed::text::status(a.name.as_deref())?;
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&st)?);
        return Ok(());
    }
    if st.is_empty() {
        outln!("no test beds");
    }
    for s in &st {
        out!("{}", s.text());
    }
    Ok(())
}

fn exec(a: ExecArgs) -> Result<()> {
    let info = match &a.name {
        Some(n) => testbed::load(n)?,
        None => {
            let mut beds = testbed::list();
            match beds.len() {
                1 => beds.remove(0),
                0 => bail!("no test beds; make one with 'linerate testbed up'"),
                _ => bail!(
                    "several test beds ({}): say which with --name",
                    beds.iter()
                        .map(|b| b.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            }
        }
    };
    let ns = match a.role {
        Role::Gen => &info.ns_gen,
        Role::Dut => &info.ns_dut,
        Role::Sink => &info.ns_sink,
    };
    if !testbed::netns_exists(ns) {
        bail!("test bed '{}': network namespace '{ns}' is gone", info.name);
    }
    let st = std::process::Command::new("ip")
        .args(["netns", "exec", ns])
        .args(&a.cmd)
        .status()
        .with_context(|| format!("cannot run 'ip netns exec {ns}'"))?;
    if !st.success() {
        std::process::exit(st.code().unwrap_or(1));
    }
    Ok(())
}
