//! `linerate bench gen`: the traffic generator's accuracy and speed.
//!
//! 1. Rate accuracy: requested against achieved rate through
//!    `afpacket:g0` (the software pacer) and through `--xdp` (paced inside
//!    the XDP program), 64-byte frames;
//! 2. the maximum single-core 64-byte rate on a veth pair, side by side:
//!    `gen --xdp`, trafgen, gen through `afpacket:g0?ring=mmsg`,
//!    `afpacket:g0` (TPACKET_V3) and `afxdp:g0`;
//! 3. latency at 10 kpps with `--signature` through an idle path (the
//!    Linux bridge) and through `linerate fwd afpacket:d0 afpacket:d1`,
//!    timestamped by `linerate count afpacket:s0`.
//!
//! The receiver of 1 and 2 is g0's veth peer d0 with `linerate count d0
//! --xdp` attached (it drops every frame after counting: veth NAPI keeps
//! running and the receiver's cost is the same, and small, for every
//! sender); the count is d0's kernel `rx_packets` (for veth it includes
//! frames handled by XDP; exact).

use super::{last_json, StudyReport};
use crate::report::svg::{Axis, Chart, Line, Marker, PALETTE};
use crate::report::Table;
use crate::testbed::{DutMode, Testbed, TestbedConfig};
use linerate_testkit::{has_capture_fd, Proc};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

/// The study's settings.
#[derive(Clone, Debug)]
pub struct GenStudy {
    pub linerate: PathBuf,
    /// The peers' scripts (trafgen), None: trafgen is left out.
    pub peers_dir: Option<PathBuf>,
    /// Seconds per run.
    pub seconds: u64,
}

fn ns_cmd(ns: &str, args: &[String]) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns]).args(args);
    c
}

fn run_ns(ns: &str, args: &[String]) -> Result<String, String> {
    let o = ns_cmd(ns, args)
        .output()
        .map_err(|e| format!("{}: {e}", args.join(" ")))?;
    if !o.status.success() {
        return Err(format!(
            "{}: {}",
            args.join(" "),
            String::from_utf8_lossy(&o.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&o.stdout).into_owned())
}

/// Start `args` in `ns` and wait until it holds its socket or XDP link,
/// then a moment for the set-up that follows (bind, mmap, attach).
fn spawn_ready(ns: &str, args: &[String]) -> Result<Proc, String> {
    let mut c = Proc::spawn(&mut ns_cmd(ns, args), &args.join(" "))?;
    c.wait_ready(Duration::from_secs(10), has_capture_fd)?;
    std::thread::sleep(Duration::from_millis(300));
    Ok(c)
}

fn rx_packets(ns: &str, ifname: &str) -> Result<u64, String> {
    run_ns(
        ns,
        &[
            "cat".into(),
            format!("/sys/class/net/{ifname}/statistics/rx_packets"),
        ],
    )?
    .trim()
    .parse()
    .map_err(|e| format!("rx_packets of {ifname}: {e}"))
}

fn pct(x: f64) -> String {
    format!("{x:+.3}")
}

impl GenStudy {
    fn lr(&self) -> String {
        self.linerate.display().to_string()
    }

    fn args(&self, rest: &str) -> Vec<String> {
        let mut v = vec![self.lr()];
        v.extend(rest.split(' ').map(String::from));
        v
    }

    /// Run it; every bed and process is removed at the end, also on errors.
    pub fn run(&self, progress: &mut dyn FnMut(&str)) -> Result<StudyReport, String> {
        if self.seconds == 0 || self.seconds > 600 {
            return Err("--seconds: 1 to 600".into());
        }
        progress("test bed: gen -> d0 (XDP counter and drop)");
        let bed = Testbed::up(&TestbedConfig {
            gro: Some(true),
            ipv6: false,
            ..TestbedConfig::default()
        })
        .map_err(|e| e.to_string())?;
        let (gns, dns) = (bed.info().ns_gen.clone(), bed.info().ns_dut.clone());
        let d0mac = bed.info().dut_in.mac.to_string();
        let _drop = spawn_ready(&dns, &self.args("count d0 --xdp --json --quiet"))?;
        let secs = self.seconds;
        // 1. Rate accuracy.
        let mut acc = Vec::new();
        for (tag, req) in [
            ("10k", 10e3),
            ("50k", 50e3),
            ("100k", 100e3),
            ("200k", 200e3),
            ("500k", 500e3),
            ("1M", 1e6),
            ("max", 0.0),
        ] {
            progress(&format!("1. rate accuracy, afpacket:g0, {tag}"));
            let rate = if req > 0.0 {
                format!(" --rate {tag}pps")
            } else {
                String::new()
            };
            let a = rx_packets(&dns, "d0")?;
            let g = last_json("gen", &run_ns(&gns, &self.args(&format!(
                "gen afpacket:g0 --size 60 --dst-mac {d0mac}{rate} --duration {secs} --cpu 0 --json --quiet")))?)?;
            std::thread::sleep(Duration::from_millis(200)); // frames in flight reach d0
            let rx = rx_packets(&dns, "d0")? - a;
            acc.push(json!({"kind": "afpacket", "requested_pps": (req > 0.0).then_some(req), "received": rx, "gen": g}));
        }
        for (tag, req) in [("10k", 10e3), ("100k", 100e3), ("1M", 1e6), ("2M", 2e6)] {
            progress(&format!("1. rate accuracy, --xdp, {tag}"));
            let a = rx_packets(&dns, "d0")?;
            let g = last_json("gen --xdp", &run_ns(&gns, &self.args(&format!(
                "gen g0 --xdp --size 60 --dst-mac {d0mac} --rate {tag}pps --duration {secs} --cpu 0 --json --quiet")))?)?;
            std::thread::sleep(Duration::from_millis(200));
            let rx = rx_packets(&dns, "d0")? - a;
            acc.push(json!({"kind": "xdp", "requested_pps": req, "received": rx, "gen": g}));
        }
        // 2. The maximum rate: each sender for warm-up + window + 1 s; d0
        // counted over the window after 1 s of warm-up.
        let run_for = secs + 2;
        let mut senders: Vec<(&str, Vec<String>)> = vec![
            ("linerate gen g0 --xdp (BPF_PROG_RUN live frames)", self.args(&format!("gen g0 --xdp --size 60 --dst-mac {d0mac} --duration {run_for} --cpu 0 --json --quiet"))),
        ];
        if let Some(p) = &self.peers_dir {
            let script = p.join("gen-trafgen.sh").display().to_string();
            // The peer script enters the namespace itself.
            senders.push((
                "trafgen (netsniff-ng), TX_RING, qdisc bypass",
                vec![
                    "--".into(),
                    script,
                    gns.clone(),
                    "g0".into(),
                    d0mac.clone(),
                    "10.95.1.2".into(),
                    run_for.to_string(),
                    "0".into(),
                ],
            ));
        }
        senders.extend([
            ("linerate gen afpacket:g0?ring=mmsg (sendmmsg)", self.args(&format!("gen afpacket:g0?ring=mmsg --size 60 --dst-mac {d0mac} --duration {run_for} --cpu 0 --json --quiet"))),
            ("linerate gen afpacket:g0 (TPACKET_V3 TX ring)", self.args(&format!("gen afpacket:g0 --size 60 --dst-mac {d0mac} --duration {run_for} --cpu 0 --json --quiet"))),
            ("linerate gen afxdp:g0 (AF_XDP, copy mode on veth)", self.args(&format!("gen afxdp:g0 --size 60 --dst-mac {d0mac} --duration {run_for} --cpu 0 --json --quiet"))),
        ]);
        let mut max = Vec::new();
        for (name, cmd) in &senders {
            progress(&format!("2. maximum rate: {name}"));
            let mut cmd_line = if cmd.first().map(String::as_str) == Some("--") {
                let mut c = Command::new(&cmd[1]);
                c.args(&cmd[2..]);
                c
            } else {
                ns_cmd(&gns, cmd)
            };
            let c = Proc::spawn(&mut cmd_line, name)?;
            std::thread::sleep(Duration::from_secs(1));
            let (a, t0) = (rx_packets(&dns, "d0")?, Instant::now());
            std::thread::sleep(Duration::from_secs(secs));
            let (b, w) = (rx_packets(&dns, "d0")?, t0.elapsed().as_secs_f64());
            let st = c.wait()?;
            max.push(
                json!({"sender": name, "rx_packets": b - a, "window_s": w, "ok": st.success(),
                            "mpps": (b - a) as f64 / w / 1e6}),
            );
        }
        drop(_drop);
        drop(bed);
        // 3. Latency at 10 kpps.
        let mut lat = Vec::new();
        for (name, dut) in [
            (
                "idle path: Linux bridge br0 (d0, d1) in the DuT namespace",
                DutMode::Bridge,
            ),
            (
                "through `linerate fwd afpacket:d0 afpacket:d1` (CPU 1)",
                DutMode::None,
            ),
        ] {
            progress(&format!("3. latency at 10 kpps: {name}"));
            let mut b = Testbed::up(&TestbedConfig {
                gro: Some(true),
                ..TestbedConfig::default()
            })
            .map_err(|e| e.to_string())?;
            if dut == DutMode::Bridge {
                b.enable_bridge().map_err(|e| e.to_string())?;
            }
            let i = b.info().clone();
            let fwd = if dut == DutMode::None {
                Some(spawn_ready(
                    &i.ns_dut,
                    &self.args("fwd afpacket:d0 afpacket:d1 --cpu 1 --json --quiet"),
                )?)
            } else {
                None
            };
            let count = spawn_ready(
                &i.ns_sink,
                &self.args(&format!(
                    "count afpacket:s0 --idle 1 --duration {} --json --quiet",
                    secs + 5
                )),
            )?;
            let g = last_json("gen", &run_ns(&i.ns_gen, &self.args(&format!(
                "gen afpacket:g0 --rate 10kpps --signature --dst-mac {} --duration {secs} --cpu 0 --json --quiet", i.sink.mac)))?)?;
            let c = last_json("count", &count.finish()?.0)?;
            if let Some(f) = fwd {
                f.finish()?;
            }
            lat.push(json!({"path": name, "gen": g, "count": c}));
            drop(b);
        }
        Ok(self.report(&acc, &max, &lat))
    }

    fn report(&self, acc: &[Value], max: &[Value], lat: &[Value]) -> StudyReport {
        let f = |v: &Value| v.as_f64().unwrap_or(0.0);
        let mut tables = Vec::new();
        let mut soft = Table {
            title: "Rate accuracy, `afpacket:g0` (software pacer)".into(),
            header: [
                "requested pps",
                "sent",
                "achieved (sender) pps",
                "achieved (receiver) pps",
                "error %",
                "mean gap",
                "jitter (gap std. dev.)",
                "max gap",
                "error <= 1 %",
            ]
            .map(String::from)
            .to_vec(),
            rows: vec![],
        };
        let mut xdp = Table {
            title: "Rate accuracy, `--xdp` (in-kernel live frames, paced inside the XDP program)"
                .into(),
            header: [
                "requested pps",
                "sent",
                "achieved (receiver) pps",
                "error %",
                "BPF_PROG_RUN calls",
                "error <= 1 %",
            ]
            .map(String::from)
            .to_vec(),
            rows: vec![],
        };
        let (mut pts_soft, mut pts_xdp) = (Vec::new(), Vec::new());
        for a in acc {
            let req = a["requested_pps"].as_f64();
            let g = &a["gen"];
            let rx = f(&a["received"]);
            if a["kind"] == "afpacket" {
                let s = &g["streams"][0];
                let el = f(&g["elapsed_s"]).max(1e-9);
                let rx_pps = rx / el;
                let err = req.map(|r| (rx_pps - r) / r * 100.0);
                if let Some(r) = req {
                    pts_soft.push((r, rx_pps));
                }
                soft.rows.push(vec![
                    req.map_or("max (no --rate)".into(), |r| format!("{r:.0}")),
                    format!("{}", s["sent"]),
                    format!("{:.0}", f(&s["achieved_pps"])),
                    format!("{rx_pps:.0}"),
                    err.map_or("-".into(), pct),
                    format!("{:.1} us", f(&s["mean_gap_ns"]) / 1e3),
                    format!("{:.1} us", f(&s["gap_stddev_ns"]) / 1e3),
                    format!("{:.1} us", f(&s["gap_max_ns"]) / 1e3),
                    err.map_or("-".into(), |e| {
                        if e.abs() <= 1.0 {
                            "yes".into()
                        } else {
                            "**no**".into()
                        }
                    }),
                ]);
            } else {
                let st = &g["stats"];
                let secs = (f(&st["duration_ns"]) / 1e9).max(1e-9);
                let r = req.unwrap_or(0.0);
                let rx_pps = rx / secs;
                let err = (rx_pps - r) / r.max(1.0) * 100.0;
                pts_xdp.push((r, rx_pps));
                xdp.rows.push(vec![
                    format!("{r:.0}"),
                    format!("{}", st["sent"]),
                    format!("{rx_pps:.0}"),
                    pct(err),
                    format!("{}", st["syscalls"]),
                    if err.abs() <= 1.0 {
                        "yes".into()
                    } else {
                        "**no**".into()
                    },
                ]);
            }
        }
        tables.push(soft);
        tables.push(xdp);
        let top = max.first().map_or(0.0, |m| f(&m["mpps"]));
        tables.push(Table {
            title: "Maximum single-core 64-byte rate on a veth pair".into(),
            header: ["sender", "Mpps at the receiver", "`--xdp` / it"]
                .map(String::from)
                .to_vec(),
            rows: max
                .iter()
                .map(|m| {
                    let v = f(&m["mpps"]);
                    vec![
                        m["sender"].as_str().unwrap_or("").to_string(),
                        if m["ok"] == true {
                            format!("**{v:.3}**")
                        } else {
                            format!("{v:.3} (the sender failed)")
                        },
                        if v > 0.0 {
                            format!("{:.2}x", top / v)
                        } else {
                            "-".into()
                        },
                    ]
                })
                .collect(),
        });
        let us = |c: &Value, k: &str| format!("{:.1}", f(&c["streams"][0]["latency"][k]) / 1e3);
        tables.push(Table {
            title: "Latency at 10 kpps (`--signature`), RX time - TX time".into(),
            header: [
                "path", "sent", "received", "lost", "p50 us", "p90 us", "p99 us", "p99.9 us",
                "max us",
            ]
            .map(String::from)
            .to_vec(),
            rows: lat
                .iter()
                .map(|l| {
                    let c = &l["count"];
                    let s = &c["streams"][0];
                    vec![
                        l["path"].as_str().unwrap_or("").to_string(),
                        format!("{}", l["gen"]["streams"][0]["sent"]),
                        format!("{}", s["packets"]),
                        format!("{}", s["lost"]),
                        us(c, "p50_ns"),
                        us(c, "p90_ns"),
                        us(c, "p99_ns"),
                        us(c, "p99_9_ns"),
                        us(c, "max_ns"),
                    ]
                })
                .collect(),
        });
        let ideal: Vec<(f64, f64)> = pts_soft
            .iter()
            .chain(&pts_xdp)
            .map(|p| (p.0, p.0))
            .collect();
        let mut ref_line = Line::new(
            "requested",
            crate::report::svg::REFERENCE_COLOR,
            ideal,
            Marker::None,
        );
        ref_line.dashed = true;
        let chart = Chart {
            id: "gen-accuracy".into(),
            title: "Achieved against requested rate".into(),
            x: Axis::log("requested (packets/s)"),
            y: Axis::log("achieved at the receiver (packets/s)"),
            lines: vec![
                Line::new(
                    "afpacket:g0 (software pacer)",
                    PALETTE[0],
                    pts_soft.clone(),
                    Marker::nth(0),
                ),
                Line::new(
                    "--xdp (paced in the program)",
                    PALETTE[1],
                    pts_xdp,
                    Marker::nth(1),
                ),
                ref_line,
            ],
        };
        let trafgen = max
            .iter()
            .find(|m| m["sender"].as_str().unwrap_or("").starts_with("trafgen"))
            .map(|m| f(&m["mpps"]));
        let mut findings = vec![];
        // The software pacer against the requests it can reach: those below
        // what the port sends unpaced (the "max" row).
        let unpaced = acc
            .iter()
            .find(|a| a["kind"] == "afpacket" && a["requested_pps"].is_null())
            .map(|a| f(&a["received"]) / f(&a["gen"]["elapsed_s"]).max(1e-9));
        if let Some(m) = unpaced {
            let errs: Vec<f64> = pts_soft
                .iter()
                .filter(|p| p.0 < m)
                .map(|p| ((p.1 - p.0) / p.0 * 100.0).abs())
                .collect();
            let worst = errs.iter().copied().fold(0.0, f64::max);
            findings.push(format!(
                "Software pacer: {} of {} requested rates are below what the port sends unpaced here ({:.3} Mpps); on those the worst error is {worst:.3} % (goal: at most 1 %). A request above the port's maximum cannot be reached: the pacer then sends back to back and the error is the port's limit, not the pacer's.",
                errs.len(), pts_soft.len(), m / 1e6
            ));
        }
        if let Some(t) = trafgen.filter(|t| *t > 0.0) {
            findings.push(format!("`--xdp` sends {:.1}x trafgen's rate on one core ({top:.3} against {t:.3} Mpps; goal: at least 10x).", top / t));
        }
        findings.push("Pacing smoothness of `--xdp` (coefficient of variation of the per-millisecond rate at the receiver) is a report of its own: `cargo test --release -p linerate-pipeline --test kprog -- --ignored --nocapture gen_pacing_smoothness_report`.".into());
        let clock = lat
            .first()
            .and_then(|l| l["count"]["clock_detail"].as_str())
            .unwrap_or("")
            .to_string();
        StudyReport {
            name: "gen",
            title: "Traffic generator (`linerate gen`)".into(),
            date: linerate_io::time::utc_rfc3339(),
            command: format!("linerate bench gen --seconds {}", self.seconds),
            environment: vec![
                ("CPU".into(), linerate_io::host::cpu_model()),
                ("kernel".into(), linerate_io::host::kernel_release()),
            ],
            intro: vec![
                format!("Test beds: `linerate testbed` namespaces; the sender pinned to CPU 0; 60-byte frames (64 on the wire), UDP over IPv4, one flow, {} s per run. Rates and maximum: the receiver is g0's veth peer d0 with `linerate count d0 --xdp` attached (counts and drops every frame), counted by d0's kernel `rx_packets` (exact). veth receive work runs as softirq on the sending core, so the sender's CPU also carries the receive side. Software pacer: sender = gen's `achieved_pps` (departures between the first and last), receiver = frames at d0 over gen's elapsed time; jitter = standard deviation of the inter-departure gaps gen measures at send. `--xdp`: the program keeps the schedule (frame n due at start + n x gap); the rate is per second of the run's real duration.", self.seconds),
                format!("Latency: `linerate gen afpacket:g0 --rate 10kpps --signature` into the DuT namespace, counted by `linerate count afpacket:s0` in the sink's; idle path: a bed with the Linux bridge; through linerate: `linerate fwd afpacket:d0 afpacket:d1 --cpu 1`. Clock: {clock}."),
            ],
            tables,
            charts: vec![(chart, "Achieved rate at the receiver against the rate requested, both pacers; the dashed line is the request.".into())],
            blocks: vec![],
            findings,
            data: json!({"accuracy": acc, "max_rate": max, "latency": lat}),
        }
    }
}
