//! `linerate switch`: the flow-table software switch, and `linerate
//! switch-ctl`: its control client over a Unix socket.

use anyhow::{bail, Context, Result};
use linerate_pipeline::switch::run::{self, RuleFiles, SwitchConfig};

use super::common;
use std::path::PathBuf;

#[derive(clap::Args)]
#[command(
    about = "Run the flow-table software switch over N ports (OpenFlow rules in ovs-ofctl syntax)",
    after_help = "\
Examples:
  # three ports, rules from a file, a control socket for switch-ctl
  linerate switch --port 1=afpacket:sw1 --port 2=afpacket:sw2 --port 3=afpacket:sw3 \\
      --flows flows.txt --ctl /run/linerate-sw.sock
  # flows.txt, one rule per line (# comments):
  #   priority=100,in_port=1,udp,nw_dst=10.0.0.2,actions=output:2
  #   priority=90,ip,nw_dst=10.0.0.3,actions=set_field:02:00:00:00:00:03->eth_dst,dec_ttl,output:3
  #   priority=0,actions=drop
  # groups (type all) and meters, one per line:
  #   group_id=1,type=all,bucket=output:2,bucket=output:3
  #   meter=1,pktps,band=type=drop,rate=20000
  linerate switch --port 1=afxdp:d0 --port 2=afxdp:d1 --groups groups.txt --meters meters.txt --flows flows.txt
  # a multi-table pipeline: a VLAN learning switch in 5 tables (Open vSwitch's tutorial)
  linerate switch --port 1=afpacket:p1 --port 2=afpacket:p2 --port 3=afpacket:p3 --port 4=afpacket:p4 \\
      --flows examples/flows/vlan-learning.flows --ctl /run/linerate-sw.sock
  #   table=0,priority=0,actions=resubmit(,1)
  #   table=2,actions=learn(table=10,NXM_OF_VLAN_TCI[0..11],NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],
  #                         load:NXM_OF_IN_PORT[]->NXM_NX_REG0[0..15]),resubmit(,3)
  #   table=4,reg0=2,actions=strip_vlan,output:2
  # also: goto_table:N, reg0..reg7 and metadata matches, load:/move:/set_field: into them,
  # write_metadata:V/M, output:NXM_NX_REG0[0..15], mod_vlan_vid:V, NORMAL
  # the OpenFlow 1.3 channel: ovs-ofctl (or a controller) programs the switch
  linerate switch --port 1=afpacket:p1 --port 2=afpacket:p2 --openflow ptcp:6653
  #   ovs-ofctl -O OpenFlow13 add-flow tcp:127.0.0.1:6653 'in_port=1,actions=output:2'
  #   ovs-ofctl -O OpenFlow13 dump-flows tcp:127.0.0.1:6653
  # bounds: 100k rules in all, a learning table of 10k (learned rules evict the oldest)
  linerate switch --port 1=afpacket:p1 --port 2=afpacket:p2 --flows examples/flows/vlan-learning.flows \\
      --max-flows 100000 --flow-table table=10,flow_limit=10000
  # CPU cost per stage on in-memory ports
  linerate switch --port '1=mem:a?source=64' --port '2=mem:b?sink' --flows f.txt --duration 5 --profile

Change the rules while it runs: linerate switch-ctl SOCKET add-flow|del-flows|dump-flows ... (see its --help)."
)]
pub struct Args {
    /// A port: NUMBER=URI (OpenFlow port number, then the port URI). Repeat for each port.
    #[arg(long = "port", value_name = "N=URI", required = true)]
    pub ports: Vec<String>,
    /// Rules, one per line in ovs-ofctl syntax (`table=N` for tables 1..254).
    #[arg(long)]
    pub flows: Option<PathBuf>,
    /// Groups, one per line: group_id=ID,type=all,bucket=output:P,...
    #[arg(long)]
    pub groups: Option<PathBuf>,
    /// Meters, one per line: meter=ID,pktps|kbps,band=type=drop,rate=R[,burst_size=B]
    #[arg(long)]
    pub meters: Option<PathBuf>,
    /// Most rules in all tables; a rule past it is refused (OpenFlow: TABLE_FULL)
    /// or, if learned, takes an older learned rule's place.
    #[arg(long, value_name = "N", default_value_t = linerate_pipeline::switch::table::DEFAULT_MAX_FLOWS)]
    pub max_flows: usize,
    /// One table's bound, as Open vSwitch's Flow_Table columns:
    /// table=N,flow_limit=M[,overflow_policy=refuse|evict-learned|evict] (default
    /// evict-learned: learned rules evict the oldest learned ones, others are refused).
    /// Repeat for each table.
    #[arg(long = "flow-table", value_name = "SPEC")]
    pub flow_tables: Vec<String>,
    /// Control socket path for `linerate switch-ctl` (created with mode 0600).
    #[arg(long)]
    pub ctl: Option<PathBuf>,
    /// OpenFlow 1.3 channel: ptcp:PORT[:ADDR] listens (ADDR 127.0.0.1 unless given) for
    /// ovs-ofctl -O OpenFlow13 and controllers; tcp:IP:PORT connects to a controller.
    #[arg(long, value_name = "ptcp:PORT[:ADDR]|tcp:IP:PORT")]
    pub openflow: Option<String>,
    /// CPU to pin the datapath thread to.
    #[arg(long)]
    pub cpu: Option<usize>,
    /// Packets per batch (1-256).
    #[arg(long, default_value_t = linerate_io::DEFAULT_BATCH)]
    pub batch: usize,
    /// Ring size per port (frames, power of two).
    #[arg(long, default_value_t = 2048)]
    pub ring: u32,
    /// busy: spin on the rings; wait: sleep in poll() when idle.
    #[arg(long, value_parser = ["busy", "wait"], default_value = "busy")]
    pub poll: String,
    /// Turn off the exact-match cache (every packet goes to the classifier).
    #[arg(long)]
    pub no_emc: bool,
    /// Stop after this many seconds (default: until Ctrl-C, or the end of finite sources).
    #[arg(long)]
    pub duration: Option<f64>,
    /// Report TSC cycles per packet per stage.
    #[arg(long)]
    pub profile: bool,
    /// JSON lines (one per second and a final object) instead of text.
    #[arg(long)]
    pub json: bool,
    /// No per-second lines.
    #[arg(long, short)]
    pub quiet: bool,
}

fn parse_port(s: &str) -> Result<(u32, String)> {
    let (n, uri) = s
        .split_once('=')
        .with_context(|| format!("--port '{s}': expected NUMBER=URI, e.g. 1=afpacket:eth0"))?;
    let n: u32 = n
        .parse()
        .ok()
        .filter(|&n| n > 0 && n < 0xff00)
        .with_context(|| format!("--port '{s}': '{n}' is not a port number (1-65279)"))?;
    Ok((n, uri.to_string()))
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
    let mut ports = Vec::new();
    for p in &a.ports {
        let (n, uri) = parse_port(p)?;
        if ports.iter().any(|(m, _)| *m == n) {
            bail!("--port '{p}': port number {n} given twice");
        }
        ports.push((n, uri));
    }
    let (open, polling) = common::polling_ports(a.batch, a.ring, &a.poll);
    let cfg = SwitchConfig {
        ports,
        rules: RuleFiles {
            flows: a.flows.clone(),
            groups: a.groups.clone(),
            meters: a.meters.clone(),
            limits: linerate_pipeline::switch::table::Limits::from_flags(
                a.max_flows,
                &a.flow_tables,
            )
            .map_err(anyhow::Error::msg)?,
        },
        ctl: a.ctl.clone(),
        openflow: a
            .openflow
            .as_deref()
            .map(linerate_pipeline::switch::openflow::Endpoint::parse)
            .transpose()
            .map_err(anyhow::Error::msg)?,
        cpu: a.cpu,
        open,
        polling,
        emc: !a.no_emc,
        profile: a.profile,
        duration: a.duration,
    };
    let stop = super::common::stop_flag()?;
    let end = run::run(&cfg, &stop, &mut |e| {
        common::print_event(e, a.json, a.quiet)
    })
    .map_err(anyhow::Error::msg)?;
    common::finish(&end, a.json)
}
