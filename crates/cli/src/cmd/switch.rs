//! `linerate switch`: the flow-table software switch, and `linerate
//! switch-ctl`: its control client over a Unix socket.

use anyhow::{bail, Context, Result};
use linerate_pipeline::switch::openflow as of;
use linerate_pipeline::switch::run::{self, RuleFiles, SwitchConfig};

use super::common;
use std::path::PathBuf;
use std::time::Duration;

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
  # groups (all, select, indirect, ff) and meters, one per line:
  #   group_id=1,type=all,bucket=output:2,bucket=output:3
  #   group_id=2,type=select,bucket=weight:3,output:2,bucket=weight:1,set_field:10.0.0.9->ip_dst,output:3
  #   group_id=3,type=ff,bucket=watch_port:2,output:2,bucket=watch_port:3,output:3
  #   meter=1,pktps,band=type=drop,rate=20000
  linerate switch --port 1=afxdp:d0 --port 2=afxdp:d1 --groups groups.txt --meters meters.txt --flows flows.txt
  # a multi-table pipeline: a VLAN learning switch in 5 tables (Open vSwitch's tutorial)
  linerate switch --port 1=afpacket:p1 --port 2=afpacket:p2 --port 3=afpacket:p3 --port 4=afpacket:p4 \\
      --flows examples/flows/vlan-learning.flows --ctl /run/linerate-sw.sock
  #   table=0,priority=0,actions=resubmit(,1)
  #   table=2,actions=learn(table=10,NXM_OF_VLAN_TCI[0..11],NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],
  #                         load:NXM_OF_IN_PORT[]->NXM_NX_REG0[0..15]),resubmit(,3)
  #   table=4,reg0=2,actions=strip_vlan,output:2
  # also: goto_table:N, reg0..reg7, metadata and tun_id matches, load:/move:/set_field: into them,
  # write_metadata:V/M, output:NXM_NX_REG0[0..15], mod_vlan_vid:V, NORMAL
  # IPv6 neighbour discovery: icmp6,icmp_type=135,nd_target=fe80::/64,nd_sll=02:00:00:00:00:01
  #   (nd_tll with icmp_type=136); set_field:...->nd_target, nd_sll, nd_tll
  # the OpenFlow 1.3 channel on a Unix socket (mode 0600: root only): ovs-ofctl programs the switch
  linerate switch --port 1=afpacket:p1 --port 2=afpacket:p2 --openflow punix:/run/linerate-sw.of
  #   ovs-ofctl -O OpenFlow13 add-flow unix:/run/linerate-sw.of 'in_port=1,actions=output:2'
  #   ovs-ofctl -O OpenFlow13 dump-flows unix:/run/linerate-sw.of
  # over mutual TLS (clients need a certificate signed by ca.pem), or to a controller over TLS
  linerate switch --port 1=afpacket:p1 --port 2=afpacket:p2 --openflow pssl:6653 \\
      --private-key sw-key.pem --certificate sw-cert.pem --ca-cert ca.pem
  #   ovs-ofctl -O OpenFlow13 --private-key=k.pem --certificate=c.pem --ca-cert=ca.pem dump-flows ssl:127.0.0.1:6653
  linerate switch --port 1=afpacket:p1 --port 2=afpacket:p2 --openflow ssl:192.0.2.10:6653 \\
      --private-key sw-key.pem --certificate sw-cert.pem --ca-cert ca.pem --inactivity-probe 10
  # under a controller (os-ken, Ryu, Faucet, ONOS): it connects, installs its table-miss rule
  # (priority=0,actions=CONTROLLER:65535) and gets packet-ins, at most 1000 a second by default
  linerate switch --port 1=afpacket:p1 --port 2=afpacket:p2 --openflow tcp:127.0.0.1:6653 --controller-rate 500
  # and a socket for ovs-ofctl beside it (dump-flows shows the controller's rules)
  linerate switch --port 1=afpacket:p1 --port 2=afpacket:p2 --openflow tcp:127.0.0.1:6653 \
      --openflow punix:/run/linerate-sw.of
  # a learning switch while the controller is away (Open vSwitch's fail_mode=standalone): every
  # frame NORMAL once no controller has been connected for 3 inactivity probes (here 6 s)
  linerate switch --port 1=afpacket:p1 --port 2=afpacket:p2 --openflow tcp:127.0.0.1:6653 \\
      --fail-mode standalone --inactivity-probe 2
  # plain TCP (no authentication: anyone on the host can change the flows; a warning says so)
  linerate switch --port 1=afpacket:p1 --port 2=afpacket:p2 --openflow ptcp:6653
  # bounds: 100k rules in all, a learning table of 10k (learned rules evict the oldest)
  linerate switch --port 1=afpacket:p1 --port 2=afpacket:p2 --flows examples/flows/vlan-learning.flows \\
      --max-flows 100000 --flow-table table=10,flow_limit=10000
  # hot flows forwarded in XDP, the rest (learn, normal, controller, groups, meters) in user space
  linerate switch --port 1=afxdp:d0 --port 2=afxdp:d1 --flows flows.txt --offload xdp
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
    /// Groups, one per line (ovs-ofctl add-group syntax): group_id=ID,type=all|select|indirect|ff,bucket=[weight:W,][watch_port:P,]ACTIONS,...
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
    /// OpenFlow 1.3 channel, as Open vSwitch names them: punix:PATH (mode 0600), pssl:[PORT][:ADDR]
    /// (mutual TLS) or ptcp:[PORT][:ADDR] (no authentication) listen for ovs-ofctl -O OpenFlow13
    /// and controllers (ADDR 127.0.0.1 unless given, PORT 6653); unix:PATH, ssl:IP[:PORT] and
    /// tcp:IP[:PORT] connect to a controller (again after 1, 2, 4, 8 s when it goes). Repeat for
    /// more (a controller to connect to and a socket for ovs-ofctl).
    #[arg(long, value_name = "punix:PATH|pssl:PORT|ssl:IP:PORT|...")]
    pub openflow: Vec<String>,
    /// TLS (pssl:, ssl:): this switch's private key (PEM).
    #[arg(long, value_name = "FILE")]
    pub private_key: Option<PathBuf>,
    /// TLS (pssl:, ssl:): this switch's certificate (PEM).
    #[arg(long, value_name = "FILE")]
    pub certificate: Option<PathBuf>,
    /// TLS (pssl:, ssl:): the CA certificate(s) the peer's certificate must be signed by (PEM).
    #[arg(long, value_name = "FILE")]
    pub ca_cert: Option<PathBuf>,
    /// OpenFlow: send an ECHO_REQUEST after this many seconds without a message from the peer,
    /// disconnect after twice it (0: never).
    #[arg(long, value_name = "SECONDS", default_value_t = 5,
          value_parser = clap::value_parser!(u64).range(0..=86400))]
    pub inactivity_probe: u64,
    /// OpenFlow: packet-ins a second to the controllers at most (Open vSwitch's controller_rate;
    /// at least 100). Beyond, they are dropped and counted (controller_rate).
    #[arg(long, value_name = "N", default_value_t = linerate_pipeline::switch::controller::DEFAULT_RATE)]
    pub controller_rate: u64,
    /// OpenFlow: packet-ins let through in a burst (at least 25; default: a quarter of the rate).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub controller_burst: u64,
    /// What the switch does while no controller is connected, as Open vSwitch's fail_mode:
    /// secure (the default here: only the rules) or standalone (Open vSwitch's default: a
    /// learning switch: with no controller to connect to, priority=0,actions=NORMAL in table 0;
    /// with one, every frame NORMAL once none has been connected for 3 inactivity probes).
    #[arg(long, value_name = "secure|standalone", default_value = "secure",
          value_parser = ["secure", "standalone"])]
    pub fail_mode: String,
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
    /// Forward each flow in XDP once the switch has seen it, when XDP can carry its rules out
    /// (one output or a drop, after MAC/IPv4/port rewrites and dec_ttl, across goto_table):
    /// afxdp ports only, one per interface. Rule counters, timeouts and rule changes behave as
    /// without; table lookup counts and port counters count what reaches user space. On veth, the
    /// peers must have NAPI (GRO on, or an XDP program) to take frames XDP redirects to them.
    #[arg(long, value_name = "xdp", value_parser = ["xdp"])]
    pub offload: Option<String>,
    /// With --offload xdp: XDP forwards the offloaded flows' frames on this CPU (a CPUMAP), not on
    /// the CPU that received them (which only looks them up): for interfaces whose receive work
    /// all lands on one CPU (veth, NICs without RSS).
    #[arg(long, value_name = "CPU", requires = "offload", value_parser = clap::value_parser!(u32).range(0..64))]
    pub offload_cpu: Option<u32>,
    /// With --offload xdp: at most this many flows in XDP (1-65536); beyond, a flow is switched in
    /// user space and the refusal counted (`cache-stats`: refused_full).
    #[arg(long, value_name = "N", requires = "offload",
          default_value_t = linerate_pipeline::switch::offload::MAX_ENTRIES,
          value_parser = offload_entries)]
    pub offload_entries: usize,
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
    /// Serve Prometheus metrics at http://ADDR:PORT/metrics while running (e.g. 127.0.0.1:9100).
    #[arg(long, value_name = "ADDR:PORT")]
    pub metrics: Option<String>,
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

/// The OpenFlow channels' settings (the endpoints parsed; their TLS files
/// are read when they start).
fn openflow(a: &Args) -> Result<Vec<of::Config>> {
    let tls = a.private_key.is_some() || a.certificate.is_some() || a.ca_cert.is_some();
    let mut v = Vec::new();
    for ep in &a.openflow {
        let endpoint = of::Endpoint::parse(ep).map_err(anyhow::Error::msg)?;
        // TLS files go to the TLS endpoints only.
        let files = if endpoint.tls() {
            of::TlsFiles {
                private_key: a.private_key.clone(),
                certificate: a.certificate.clone(),
                ca_cert: a.ca_cert.clone(),
            }
        } else {
            of::TlsFiles::default()
        };
        v.push(of::Config {
            endpoint,
            tls: files,
            inactivity_probe: Some(Duration::from_secs(a.inactivity_probe)),
        });
    }
    if tls && !v.iter().any(|c| c.endpoint.tls()) {
        match a.openflow.first() {
            None => bail!("--private-key, --certificate and --ca-cert go with --openflow pssl: or ssl:"),
            Some(ep) => bail!(
                "--private-key, --certificate and --ca-cert are for ssl: and pssl:, not --openflow {ep}"
            ),
        }
    }
    Ok(v)
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
        openflow: openflow(&a)?,
        cpu: a.cpu,
        open,
        polling,
        emc: !a.no_emc,
        profile: a.profile,
        duration: a.duration,
        controller: linerate_pipeline::switch::controller::PinLimit::new(
            a.controller_rate,
            a.controller_burst,
        )
        .map_err(anyhow::Error::msg)?,
        fail_mode: linerate_pipeline::switch::openflow::controllers::FailMode::parse(&a.fail_mode)
            .map_err(anyhow::Error::msg)?,
        offload: a.offload.is_some(),
        offload_cpu: a.offload_cpu,
        offload_entries: a.offload_entries,
    };
    let stop = super::common::stop_flag()?;
    super::common::serve_metrics(a.metrics.as_deref(), "switch", a.json)?;
    let end = run::run(&cfg, &stop, &mut |e| {
        common::print_event(e, a.json, a.quiet)
    })
    .map_err(anyhow::Error::msg)?;
    common::finish(&end, a.json)
}

/// `--offload-entries`: 1 to [`linerate_pipeline::switch::offload::MAX_ENTRIES`].
fn offload_entries(s: &str) -> Result<usize, String> {
    let max = linerate_pipeline::switch::offload::MAX_ENTRIES;
    match s.parse::<usize>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!("'{s}': a number of flows from 1 to {max}")),
    }
}
