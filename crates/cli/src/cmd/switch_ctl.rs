//! `linerate switch-ctl`: the client of a running `linerate switch`'s
//! control socket (the protocol is `linerate_pipeline::switch::ctl`).

use anyhow::Result;
use linerate_pipeline::switch::ctl::request;
use std::path::PathBuf;

#[derive(clap::Args)]
#[command(
    about = "Control a running `linerate switch` over its Unix socket",
    after_help = "\
Commands:
  add-flow RULE        add or replace one rule (ovs-ofctl syntax)
  add-flows FILE       add the rules of FILE (one per line), all or nothing
  del-flows [MATCH]    delete the rules the match covers (all without MATCH)
  dump-flows [MATCH]   rules with counters, ovs-ofctl style (with MATCH: those at least as
                       specific); --json adds each rule's counters, creation and first/last hit times
  dump-ports           per-port packet and byte counters
  dump-groups          groups
  dump-tables          per table: rules, lookups, matches, evictions and refusals (full), its
                       flow_limit; the switch's max-flows (ovs-ofctl dump-tables)
  add-group SPEC       group_id=ID,type=all|select|indirect|ff,bucket=[weight:W,][watch_port:P,]ACTIONS,...
  add-meter SPEC       meter=ID,pktps|kbps,band=type=drop,rate=R[,burst_size=B]
  cache-stats          exact-match cache and classifier counters (with --offload xdp, XDP's too)

Examples:
  linerate switch-ctl /run/sw.sock add-flow 'priority=100,in_port=1,udp,tp_dst=53,actions=output:2'
  linerate switch-ctl /run/sw.sock dump-flows
  linerate switch-ctl /run/sw.sock dump-flows table=10
  linerate switch-ctl /run/sw.sock del-flows 'in_port=1'
  linerate switch-ctl /run/sw.sock cache-stats --json"
)]
pub struct CtlArgs {
    /// The switch's control socket (--ctl).
    pub socket: PathBuf,
    /// The command (see below).
    pub command: String,
    /// Its argument (a rule, match, file or spec).
    pub arg: Option<String>,
    /// Print the reply as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run_ctl(a: CtlArgs) -> Result<()> {
    let v = request(&a.socket, &a.command, a.arg.as_deref()).map_err(anyhow::Error::msg)?;
    if a.json {
        outln!("{v}");
        return Ok(());
    }
    match a.command.as_str() {
        "dump-flows" | "dump-groups" => {
            let k = if a.command == "dump-flows" {
                "flows"
            } else {
                "groups"
            };
            for l in v[k].as_array().into_iter().flatten() {
                outln!(" {}", l.as_str().unwrap_or(""));
            }
        }
        "dump-tables" => {
            for t in v["tables"].as_array().into_iter().flatten() {
                let limit = match t["flow_limit"].as_u64() {
                    Some(l) => format!(
                        ", flow_limit={l} ({})",
                        t["overflow_policy"].as_str().unwrap_or("")
                    ),
                    None => String::new(),
                };
                outln!(
                    "  table {}: active={}, lookup={}, matched={}, evicted={}, refused_full={}{limit}",
                    t["table"],
                    t["rules"],
                    t["lookups"],
                    t["matches"],
                    t["evicted"],
                    t["refused_full"]
                );
            }
            outln!("  max-flows {} (all tables)", v["max_flows"]);
        }
        "dump-ports" => {
            for p in v["ports"].as_array().into_iter().flatten() {
                outln!(
                    "  port {}: rx pkts={}, bytes={} tx pkts={}, bytes={}, drop={}",
                    p["port"],
                    p["rx_packets"],
                    p["rx_bytes"],
                    p["tx_packets"],
                    p["tx_bytes"],
                    p["tx_dropped"]
                );
            }
        }
        _ => {
            let mut v = v;
            if let Some(o) = v.as_object_mut() {
                o.remove("ok");
            }
            if v.as_object().is_some_and(|o| !o.is_empty()) {
                outln!("{v}");
            }
        }
    }
    Ok(())
}
