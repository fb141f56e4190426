//! The test bed described for people: what `linerate testbed up` and
//! `status` print.

use super::{DutMode, FrameAddrs, IfaceStats, TestbedInfo};
use std::fmt::Write;

/// A bed as `status` shows it: its record, whether its namespaces exist,
/// whether the process that made it runs, and its interfaces' counters.
#[derive(serde::Serialize)]
pub struct Status {
    #[serde(flatten)]
    pub info: TestbedInfo,
    pub alive: bool,
    pub owner_alive: bool,
    pub stats: Vec<(String, Option<IfaceStats>)>,
}

/// The beds recorded on this machine (or the one named), with their state.
pub fn status(name: Option<&str>) -> Result<Vec<Status>, super::TestbedError> {
    let beds = match name {
        Some(n) => vec![super::load(n)?],
        None => super::list(),
    };
    Ok(beds
        .into_iter()
        .map(|info| {
            let alive = super::is_alive(&info);
            let stats = info
                .ifaces()
                .iter()
                .map(|f| {
                    let s = if alive {
                        super::iface_stats(&f.ns, &f.name).ok()
                    } else {
                        None
                    };
                    (f.name.clone(), s)
                })
                .collect();
            Status {
                owner_alive: super::owner_alive(&info),
                alive,
                stats,
                info,
            }
        })
        .collect())
}

impl Status {
    pub fn text(&self) -> String {
        let mut out = self.info.text();
        let state = match (self.alive, self.info.complete) {
            (true, true) => "up",
            (true, false) => "being built (or left half built)",
            (false, _) => "stale: namespaces missing; 'linerate testbed down' removes the record",
        };
        let _ = writeln!(
            out,
            "  state: {state}; made by pid {} ({})",
            self.info.owner_pid,
            if self.owner_alive { "running" } else { "gone" }
        );
        for (ifn, c) in &self.stats {
            if let Some(c) = c {
                let _ = writeln!(
                    out,
                    "  {ifn}: rx {} pkts {} bytes {} dropped, tx {} pkts {} bytes {} dropped",
                    c.rx_packets, c.rx_bytes, c.rx_dropped, c.tx_packets, c.tx_bytes, c.tx_dropped
                );
            }
        }
        out
    }
}

impl TestbedInfo {
    /// The bed: namespaces, interfaces and addresses, the DuT, the
    /// generator's frame addresses, queues, MTU and NAPI threads.
    pub fn text(&self) -> String {
        let i = self;
        let mut out = String::new();
        let _ = writeln!(out, "test bed {}", i.name);
        let _ = writeln!(
            out,
            "  {:<20} {:<5} {:<17} {:<15} IPv6",
            "namespace", "if", "MAC", "IPv4"
        );
        for f in i.ifaces() {
            let _ = writeln!(
                out,
                "  {:<20} {:<5} {:<17} {:<15} {}/{}",
                f.ns,
                f.name,
                f.mac.to_string(),
                format!("{}/{}", f.ipv4, f.prefix4),
                f.ipv6,
                f.prefix6
            );
        }
        let mode = match i.dut_mode {
            DutMode::None => "none (add one with --dut, or run a forwarder on d0/d1)",
            DutMode::IpForward => "Linux IP forwarding",
            DutMode::Bridge => "Linux bridge br0 (d0, d1)",
        };
        let _ = writeln!(out, "  DuT: {mode}");
        let f = FrameAddrs::for_mode(i, i.dut_mode);
        let _ = writeln!(
            out,
            "  generator frames: src {} dst {}, IPv4 {} -> {}, IPv6 {} -> {}",
            f.src_mac, f.dst_mac, f.src_ip, f.dst_ip, f.src_ip6, f.dst_ip6
        );
        let _ = writeln!(out, "  queues per veth: {}", i.queues);
        if let Some(m) = i.mtu {
            let _ = writeln!(out, "  MTU: {m}");
        }
        for t in &i.napi_threads {
            let cpu = t.cpu.map(|c| format!(" on cpu {c}")).unwrap_or_default();
            let _ = writeln!(
                out,
                "  NAPI thread napi/{}-{} pid {}{cpu} ({})",
                t.ifname, t.napi_id, t.pid, t.ns
            );
        }
        out
    }

    /// Commands to try on the bed (`hold`: it is removed by a signal).
    pub fn examples(&self, hold: bool) -> String {
        let i = self;
        let mut out = String::from("Examples:\n");
        let _ = writeln!(
            out,
            "  ip netns exec {} ping -c1 {}",
            i.ns_gen, i.dut_in.ipv4
        );
        let _ = writeln!(out, "  ip netns exec {} ip -s link show d0", i.ns_dut);
        let _ = writeln!(
            out,
            "  linerate testbed exec --name {} sink -- ip -s link show s0",
            i.name
        );
        if hold {
            let _ = writeln!(out, "Holding: Ctrl-C or SIGTERM removes the bed.");
        } else {
            let _ = writeln!(out, "  linerate testbed down --name {}", i.name);
        }
        out
    }
}
