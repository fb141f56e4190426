//! `linerate bench overload`: L2 forwarding at overload through every DuT
//! of the veth bed, the forwarder's cycles per packet and stage, and the
//! pure-CPU forwarding loop on in-memory ports against DPDK testpmd's
//! io-forward between two net_null ports.
//!
//! Three kinds of child processes, one after the other:
//! `linerate bench --overload --peers` (64-byte frames at overload, a fresh
//! bed per trial), `linerate fwd 'mem:a?source=60' 'mem:b?sink' --profile`
//! with and without a MAC rewrite, and `scripts/peers/dut-testpmd.sh null`
//! (a missing testpmd is a row saying so). The tables and the findings
//! (issue 2's targets, the share of TX in the AF_XDP forwarder's cycles,
//! the ordering at overload) are computed from their JSON.

use super::{bench_json, last_json, linerate, StudyReport};
use crate::report::Table;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::Command;

/// The study's settings.
#[derive(Clone, Debug)]
pub struct OverloadStudy {
    pub linerate: PathBuf,
    /// The peers' scripts (dut-testpmd.sh); None: testpmd is left out.
    pub peers_dir: Option<PathBuf>,
    /// Seconds per overload trial and per pure-CPU run.
    pub seconds: u64,
    /// Overload trials per DuT.
    pub repeat: usize,
    /// The DuT's CPU in the bench, and the pure-CPU forwarders'.
    pub cpu: usize,
    /// Only these DuTs of the bench (empty: every built-in one and the peers).
    pub duts: Vec<String>,
}

/// The frame size at overload, bytes on the wire with FCS.
const FRAME: u64 = 64;
/// The MAC rewrite of the second pure-CPU run.
const REWRITE: &str = "02:00:00:00:00:02/02:00:00:00:00:01";

impl OverloadStudy {
    /// Run the bench, the two pure-CPU forwarders and testpmd's net_null
    /// reference; every bed and process is gone at the end, also on errors.
    pub fn run(&self, progress: &mut dyn FnMut(&str)) -> Result<StudyReport, String> {
        if self.seconds == 0 || self.seconds > 3600 || self.repeat == 0 {
            return Err(format!(
                "--seconds {} and --repeat {}: seconds 1 to 3600, at least 1 trial",
                self.seconds, self.repeat
            ));
        }
        crate::bench::dut::check_builtin("--duts", &self.duts)?;
        let lr = &self.linerate;
        let (secs, cpu) = (self.seconds.to_string(), self.cpu.to_string());
        let (reps, name) = (
            self.repeat.to_string(),
            format!("lrov{}x", std::process::id()),
        );
        let mut a = vec![
            "bench",
            "--overload",
            "--peers",
            "--frame-size",
            "64",
            "--duration",
            &secs,
            "--repeat",
            &reps,
            "--dut-cpu",
            &cpu,
            "--name",
            &name,
            "--json",
            "-",
        ];
        for d in &self.duts {
            a.extend(["--dut", d]);
        }
        progress(&format!("== linerate {}", a.join(" ")));
        let bench = bench_json(lr, &a)?;
        let fwd = |rewrite: bool| -> Result<Value, String> {
            let mut a = vec![
                "fwd",
                "mem:a?source=60",
                "mem:b?sink",
                "--cpu",
                &cpu,
                "--duration",
                &secs,
                "--profile",
                "--json",
                "--quiet",
            ];
            if rewrite {
                a.extend(["--rewrite-a2b", REWRITE]);
            }
            last_json("linerate fwd", &linerate(lr, &a)?)
        };
        progress("== pure CPU: linerate fwd mem ports");
        let mem = fwd(false)?;
        progress("== pure CPU: linerate fwd mem ports, MAC rewrite");
        let memrw = fwd(true)?;
        progress("== pure CPU: testpmd io-forward between net_null ports");
        let null = self.testpmd_null();
        if let Err(e) = &null {
            progress(&format!("testpmd net_null unavailable: {e}"));
        }
        Ok(report(&self.command(), &bench, &mem, &memrw, &null))
    }

    /// `dut-testpmd.sh null SECONDS CPU`: Mpps per port, or why not.
    fn testpmd_null(&self) -> Result<Vec<f64>, String> {
        let dir = self
            .peers_dir
            .as_ref()
            .ok_or("the peers' scripts (scripts/peers) not found")?;
        let script = dir.join("dut-testpmd.sh");
        // At least 3 s: the script leaves out its first per-second sample
        // (start-up), and one slow start takes a second.
        let out = Command::new(&script)
            .args([
                "null",
                &self.seconds.max(3).to_string(),
                &self.cpu.to_string(),
            ])
            .output()
            .map_err(|e| format!("{}: {e}", script.display()))?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            return Err(err.lines().last().unwrap_or("failed").trim().to_string());
        }
        let v = parse_null(&String::from_utf8_lossy(&out.stdout));
        if v.is_empty() {
            return Err("dut-testpmd.sh null printed no 'null port N: X Mpps' line".into());
        }
        if v.iter().all(|x| *x <= 0.0) {
            return Err("testpmd forwarded nothing in its run (start-up took it)".into());
        }
        Ok(v)
    }

    fn command(&self) -> String {
        let mut c = format!(
            "linerate bench overload --seconds {} --repeat {} --cpu {}",
            self.seconds, self.repeat, self.cpu
        );
        if !self.duts.is_empty() {
            c += &format!(" --duts {}", self.duts.join(","));
        }
        c
    }
}

/// "null port 0: 31.96 Mpps" lines: the Mpps.
fn parse_null(out: &str) -> Vec<f64> {
    out.lines()
        .filter_map(|l| l.strip_prefix("null port "))
        .filter_map(|l| l.split_once(": ")?.1.strip_suffix(" Mpps")?.parse().ok())
        .collect()
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or(0.0)
}

/// A pure-CPU run's forwarded Mpps (direction A->B over the run).
fn mem_mpps(j: &Value) -> f64 {
    f(&j["directions"][0]["forwarded"]) / f(&j["elapsed_s"]).max(1e-9) / 1e6
}

/// Machine, kernel and OS, as the section's first line names them.
fn environment(bench: &Value) -> Vec<(String, String)> {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let vm = cpuinfo
        .lines()
        .any(|l| l.starts_with("flags") && l.split_whitespace().any(|w| w == "hypervisor"));
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let os = std::fs::read_to_string("/etc/os-release")
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("PRETTY_NAME="))
                .map(|v| v.trim_matches('"').to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    vec![
        ("CPU".into(), linerate_io::host::cpu_model()),
        (
            "cores".into(),
            format!("{cores}{}", if vm { " (VM)" } else { "" }),
        ),
        (
            "kernel".into(),
            bench["kernel"].as_str().unwrap_or("?").to_string(),
        ),
        ("OS".into(), os),
    ]
}

/// The report from the runs' JSON: `null` is testpmd's Mpps per port or why
/// it did not run.
pub fn report(
    command: &str,
    bench: &Value,
    mem: &Value,
    memrw: &Value,
    null: &Result<Vec<f64>, String>,
) -> StudyReport {
    let results: Vec<&Value> = bench["results"].as_array().into_iter().flatten().collect();
    let res = |n: &str| results.iter().copied().find(|r| r["name"] == n);
    let med = |n: &str| {
        res(n)
            .and_then(|r| r["median_pps"].as_f64())
            .filter(|v| *v > 0.0)
            .map(|v| v / 1e6)
    };
    let (gen_cpu, dut_cpu) = (&bench["gen_cpu"], &bench["dut_cpu"]);
    let rps = bench["rps"] == true;
    // The most any DuT ran (a DuT that failed or was skipped ran fewer).
    let trials = results
        .iter()
        .filter_map(|r| r["trials"].as_array())
        .map(Vec::len)
        .max()
        .unwrap_or(0);
    let mut intro = vec![format!(
        "Test bed: three network namespaces, gen <-veth-> dut <-veth-> sink (`linerate testbed`), a fresh one per trial. \
         Generator: linerate's in-kernel XDP generator (BPF_PROG_RUN live frames) on CPU {gen_cpu}, \
         {FRAME}-byte UDP frames over 64 flows, the same for every DuT. Counted at the sink by an XDP counter on s0; \
         the kernel's rx_packets of s0 is the independent check (column `check`). \
         User-space DuTs are pinned to CPU {dut_cpu}. veth receive work (NAPI, d0's XDP hook) runs as \
         softirq on the CPU that sends into the veth, CPU {gen_cpu}: the XDP DuTs and the AF_XDP copy on \
         receive share it with the generator. {}{:.0} s per trial after {:.0} s warm-up, {trials} trial(s); \
         the median is shown with min-max.",
        if rps {
            format!("Receive packet steering (RPS) of d0 moves the kernel's work after the XDP hook (bridge, IP forwarding, \
                     the packet socket's receive) to CPU {dut_cpu}. ")
        } else {
            "Without RPS (`--no-rps`), the bridge's, IP forwarding's and the packet socket's receive work also runs there. ".into()
        },
        f(&bench["duration_s"]),
        f(&bench["warmup_s"]),
    )];
    let br = med("linux-bridge");
    let mut over = Table {
        title: format!("Forwarding at overload, {FRAME}-byte frames"),
        header: [
            "DuT",
            "offered Mpps",
            "forwarded Mpps",
            "min-max",
            "vs bridge",
            "check (sink vs kernel counter)",
        ]
        .map(String::from)
        .to_vec(),
        rows: vec![],
    };
    for r in &results {
        let name = r["name"].as_str().unwrap_or("?");
        let label = format!("{name}: {}", r["description"].as_str().unwrap_or(""));
        let Some(m) = r["median_pps"]
            .as_f64()
            .filter(|v| *v > 0.0)
            .map(|v| v / 1e6)
        else {
            let mut row = vec![label];
            row.extend(["-"; 4].map(String::from));
            row.push(r["status"].as_str().unwrap_or("?").to_string());
            over.rows.push(row);
            continue;
        };
        let t: Vec<&Value> = r["trials"].as_array().into_iter().flatten().collect();
        let off = t.iter().map(|t| f(&t["offered_pps"])).sum::<f64>() / t.len().max(1) as f64 / 1e6;
        let chk = t
            .iter()
            .map(|t| {
                (f(&t["sink_iface_packets"]) - f(&t["sink_packets"])).abs()
                    / f(&t["sink_packets"]).max(1.0)
            })
            .fold(0.0, f64::max);
        over.rows.push(vec![
            label,
            format!("{off:.3}"),
            format!("**{m:.3}**"),
            format!(
                "{:.3}-{:.3}",
                f(&r["min_pps"]) / 1e6,
                f(&r["max_pps"]) / 1e6
            ),
            br.map_or("-".into(), |b| format!("{:.2}x", m / b)),
            format!("{:.2} %", chk * 100.0),
        ]);
    }
    // Issue 2's targets.
    let mut targets = Table {
        title: "Targets of issue 2".into(),
        header: ["target", "measured", "met"].map(String::from).to_vec(),
        rows: vec![],
    };
    let mut target = |t: &str, m: String, ok: bool| {
        targets
            .rows
            .push(vec![t.into(), m, if ok { "yes" } else { "**no**" }.into()])
    };
    let best_peer = ["testpmd-af_xdp", "testpmd-af_packet", "ovs-afxdp"]
        .iter()
        .filter_map(|n| med(n))
        .fold(None, |a: Option<f64>, v| Some(a.map_or(v, |a| a.max(v))));
    let (afx, xdp, bare) = (
        med("linerate-afxdp"),
        med("linerate-xdp"),
        med("xdp-redirect-bare"),
    );
    let ratio = |a: f64, b: f64| format!("{a:.3} / {b:.3} = {:.2}x", a / b);
    if let (Some(a), Some(p)) = (afx, best_peer) {
        target(
            "afxdp mode >= 2x the best of testpmd/OvS",
            ratio(a, p),
            a / p >= 2.0,
        );
    }
    if let (Some(x), Some(b)) = (xdp, br) {
        target("xdp mode >= 3x the bridge", ratio(x, b), x / b >= 3.0);
    }
    if let (Some(x), Some(b)) = (xdp, bare) {
        target(
            "xdp mode >= 0.9x a bare XDP_REDIRECT",
            ratio(x, b),
            x / b >= 0.9,
        );
    }
    let (mem_pps, mem_cyc) = (
        mem_mpps(mem),
        f(&mem["profile"]["cycles_per_packet"]["total"]),
    );
    let null_max = null
        .as_ref()
        .ok()
        .and_then(|v| v.iter().copied().reduce(f64::max));
    if let Some(n) = null_max {
        target(
            "mem-port Mpps per core >= testpmd io-forward net_null (per port)",
            format!("{mem_pps:.1} / {n:.1} = {:.2}x", mem_pps / n),
            mem_pps >= n,
        );
    }
    target(
        "mem-port forwarding under 40 cycles per packet",
        format!("{mem_cyc:.1} cycles"),
        mem_cyc < 40.0,
    );
    // Cycles per packet and stage.
    intro.push(
        "Cycles per packet and stage: `linerate fwd --profile`, TSC cycles per packet (the TSC is constant and invariant), \
         measured per batch around each step: RX = `recv` (ring read), TX = `send` + `flush` (copy into the TX ring \
         and the kernel's transmit, including the syscall), buffer management = `release` (frames back to the fill \
         ring / block back to the kernel), processing = MAC rewrite and accounting. For the veth rows the forwarder \
         was the DuT of the bench above (at overload), its last trial.".into(),
    );
    intro.push(format!(
        "Pure CPU: `linerate fwd 'mem:a?source=60' 'mem:b?sink' --cpu {dut_cpu}` (an endless source of pre-built frames into a sink: \
         the job of DPDK's net_null) against `dpdk-testpmd` io-forward between two net_null ports on CPU {dut_cpu} \
         (`scripts/peers/dut-testpmd.sh null`), run one after the other."
    ));
    let mut cycles = Table {
        title: "Cycles per packet and stage (seed 000, Table II)".into(),
        header: [
            "forwarder",
            "RX",
            "TX",
            "Buffers",
            "Processing",
            "Total",
            "Mpps",
        ]
        .map(String::from)
        .to_vec(),
        rows: vec![],
    };
    let c5 = |c: &Value| {
        ["rx", "tx", "buffers", "processing", "total"]
            .iter()
            .map(|k| format!("{:.1}", f(&c[*k])))
            .collect::<Vec<_>>()
    };
    // The veth forwarder's last trial's profile.
    let last_profile = |n: &str| -> Option<(Value, f64)> {
        let t = res(n)?["trials"].as_array()?.last()?;
        let p = t["dut_account"]["profile"]["cycles_per_packet"].clone();
        p.is_object().then(|| (p, f(&t["forwarded_pps"]) / 1e6))
    };
    for n in ["linerate-afxdp", "linerate-afpacket"] {
        if let Some((c, pps)) = last_profile(n) {
            let mut row = vec![format!("{n} (veth, {FRAME} B)")];
            row.extend(c5(&c));
            row.push(format!("{pps:.3}"));
            cycles.rows.push(row);
        }
    }
    for (label, j) in [
        ("mem ports, no rewrite", mem),
        ("mem ports, MAC rewrite", memrw),
    ] {
        let mut row = vec![format!("linerate fwd {label} (60 B)")];
        row.extend(c5(&j["profile"]["cycles_per_packet"]));
        row.push(format!("{:.1}", mem_mpps(j)));
        cycles.rows.push(row);
    }
    for (n, c) in [
        ("DPDK L2FWD", ["55", "62", "0", "0", "117"]),
        ("Linux bridge", ["491", "456", "178+311", "1508", "2944"]),
    ] {
        let mut row = vec![format!("seed 000 Table II: {n}")];
        row.extend(c.map(String::from));
        row.push(String::new());
        cycles.rows.push(row);
    }
    let memrw_cyc = f(&memrw["profile"]["cycles_per_packet"]["total"]);
    let mut pure = Table {
        title: "Pure CPU: forwarding between in-memory ports".into(),
        header: ["forwarder", "Mpps per core", "cycles per packet"]
            .map(String::from)
            .to_vec(),
        rows: vec![
            vec![
                "linerate fwd, mem ports".into(),
                format!("{mem_pps:.1}"),
                format!("{mem_cyc:.1}"),
            ],
            vec![
                "linerate fwd, mem ports, MAC rewrite".into(),
                format!("{:.1}", mem_mpps(memrw)),
                format!("{memrw_cyc:.1}"),
            ],
        ],
    };
    pure.rows.push(match null {
        Ok(v) => vec![
            "testpmd io-forward, net_null (per port, mean of the ports)".into(),
            format!("{:.1}", v.iter().sum::<f64>() / v.len().max(1) as f64),
            String::new(),
        ],
        Err(e) => vec![
            "testpmd io-forward, net_null".into(),
            format!("unavailable: {e}"),
            String::new(),
        ],
    });
    // What the figures say.
    let (tx_share, own) = match last_profile("linerate-afxdp") {
        Some((c, _)) => (
            format!("{:.0} %", f(&c["tx"]) / f(&c["total"]).max(1e-9) * 100.0),
            format!(
                "about {:.0}",
                f(&c["rx"]) + f(&c["buffers"]) + f(&c["processing"])
            ),
        ),
        None => ("most".into(), "a small part of the".into()),
    };
    let mut findings = vec![
        format!("**AF_XDP on veth is capped by the kernel's copy-mode transmit.** veth has no zero-copy AF_XDP, so every \
         frame an AF_XDP socket sends becomes an skb (allocate, copy, `veth_xmit`, and the sink veth's receive, \
         which runs as softirq on the sending core). The profile above shows it: of the cycles per packet of \
         `linerate-afxdp`, {tx_share} are in TX, i.e. inside `sendto()`; linerate's own per-packet work \
         (RX ring, processing, buffer recycling) is {own} cycles. testpmd (net_af_xdp) and Open vSwitch (afxdp \
         ports) pay the same kernel path, so the issue's goal of 2x the best of them is \
         out of reach on veth whatever the user-space side does; it is a property of the test bed, not of the \
         forwarders. On a NIC with zero-copy AF_XDP the TX cost is a descriptor write."),
        "**The XDP mode** forwards in the kernel with a devmap redirect (the 'kernel module' approach of seed 003) \
         and runs in d0's NAPI on the generator's core; it keeps per-CPU counters per direction, and the table \
         above compares it with the bare redirect.".into(),
        "**mem ports vs net_null:** linerate's mem source hands out descriptors of pre-built frames (no buffer \
         allocation, no data touched), and the sink counts and discards; testpmd's net_null allocates and frees an \
         mbuf per packet from a mempool. Both measure the forwarding loop without I/O, but the mem ports are cheaper \
         by construction: the ratio says more about the loop's overhead (dynamic dispatch per batch, counters per \
         batch) than about a like-for-like buffer cost.".into(),
    ];
    if let (true, Some(afp), Some(b)) = (rps, med("linerate-afpacket"), br) {
        if afp < 0.2 * b {
            findings.push(format!("**AF_PACKET at overload, with RPS: receive livelock.** The packet socket's receive work (its copy into \
             the ring) runs in softirq on the DuT's own core, CPU {dut_cpu}; offered far more than it can take, \
             that softirq keeps the core and the forwarder barely runs: linerate-afpacket forwards {afp:.3} Mpps here, \
             under a fifth of the bridge's {b:.3}; its loss-free rate is in the RFC 2544 section. \
             `--no-rps` leaves that work on the generator's core, where the forwarder keeps its own."));
        }
    }
    let mut order: Vec<(f64, &str)> = [
        "linux-bridge",
        "linux-ipfwd",
        "linerate-afxdp",
        "linerate-xdp",
        "linerate-afpacket",
    ]
    .iter()
    .filter_map(|n| Some((med(n)?, *n)))
    .collect();
    order.sort_by(|a, b| a.0.total_cmp(&b.0));
    if order.len() > 1 {
        let o: Vec<String> = order.iter().map(|(v, n)| format!("{n} {v:.3}")).collect();
        findings.push(format!(
            "**Ordering at overload:** {} Mpps. Seeds 000 and 001 found bridge < IP forwarding < the user-space and \
             XDP paths. The RFC 2544 section measures the loss-free rates, which are what the seeds' order is about.",
            o.join(" < ")
        ));
    }
    StudyReport {
        name: "overload",
        title: format!(
            "L2 forwarding at overload ({FRAME}-byte frames), cycles per packet, pure CPU"
        ),
        date: linerate_io::time::utc_rfc3339(),
        command: command.to_string(),
        environment: environment(bench),
        intro,
        tables: vec![over, targets, cycles, pure],
        charts: vec![],
        blocks: vec![],
        findings,
        data: json!({
            "bench": bench, "mem": mem, "mem_rewrite": memrw,
            "testpmd_null": match null {
                Ok(v) => json!({"mpps_per_port": v}),
                Err(e) => json!({"unavailable": e}),
            },
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn testpmd_null_lines_are_read_and_others_left() {
        let v = parse_null("null port 0: 31.96 Mpps\nnoise\nnull port 1: 32.50 Mpps\n");
        assert_eq!(v, vec![31.96, 32.5]);
        assert!(parse_null("dut-testpmd: no Rx-pps samples").is_empty());
    }

    /// The tables and targets follow the JSON they are given.
    #[test]
    fn the_figures_come_from_the_runs() {
        let trial = |fwd: f64| {
            json!({"offered_pps": 2e6, "forwarded_pps": fwd, "sink_packets": 1000, "sink_iface_packets": 1001,
            "dut_account": {"profile": {"cycles_per_packet": {"rx": 5.0, "tx": 90.0, "buffers": 3.0, "processing": 2.0, "total": 100.0}}}})
        };
        let dut = |n: &str, pps: f64| {
            json!({"name": n, "description": "d", "status": "ok", "median_pps": pps,
            "min_pps": pps * 0.9, "max_pps": pps, "trials": [trial(pps)]})
        };
        let bench = json!({"kernel": "k", "gen_cpu": 0, "dut_cpu": 1, "rps": true, "duration_s": 1.0, "warmup_s": 1.0,
            "results": [dut("linux-bridge", 0.5e6), dut("linerate-afxdp", 1.2e6), dut("linerate-xdp", 2.0e6),
                        json!({"name": "ovs-afxdp", "description": "o", "status": "unavailable: no ovs", "median_pps": null, "trials": []})]});
        let mem = |n: f64, cyc: f64| {
            json!({"elapsed_s": 2.0, "directions": [{"forwarded": n}],
            "profile": {"cycles_per_packet": {"rx": 1.0, "tx": 1.0, "buffers": 1.0, "processing": 1.0, "total": cyc}}})
        };
        let r = report(
            "c",
            &bench,
            &mem(400e6, 5.0),
            &mem(300e6, 7.0),
            &Ok(vec![30.0, 34.0]),
        );
        let md = r.markdown();
        assert!(
            md.contains("| linerate-afxdp: d | 2.000 | **1.200** | 1.080-1.200 | 2.40x | 0.10 % |"),
            "{md}"
        );
        assert!(md.contains("| ovs-afxdp: o | - | - | - | - | unavailable: no ovs |"));
        assert!(md.contains("| xdp mode >= 3x the bridge | 2.000 / 0.500 = 4.00x | yes |"));
        assert!(md.contains("200.0 / 34.0 = 5.88x | yes |"), "{md}");
        assert!(
            md.contains("| testpmd io-forward, net_null (per port, mean of the ports) | 32.0 |")
        );
        assert!(md.contains("of `linerate-afxdp`, 90 % are in TX"), "{md}");
        assert!(md.contains("linux-bridge 0.500 < linerate-afxdp 1.200 < linerate-xdp 2.000 Mpps"));
        // No testpmd: a row saying why, no target against it.
        let r = report(
            "c",
            &bench,
            &mem(400e6, 5.0),
            &mem(300e6, 7.0),
            &Err("no dpdk-testpmd".into()),
        );
        let md = r.markdown();
        assert!(md.contains("| testpmd io-forward, net_null | unavailable: no dpdk-testpmd |"));
        assert!(!md.contains("net_null (per port)"));
    }
}
