//! `linerate bench switch`: the flow-table switch's studies.
//!
//! - sweep: Mpps and cycles per packet and stage on in-memory ports against
//!   the number of active flows (1 .. 1M), the exact-match cache on and
//!   off, over a ~5k-rule set in 5 subtables (the shape of seed 000 Fig. 5);
//! - insert: the time to insert 1k .. 1M rules through the control socket
//!   into a switch forwarding at full speed, and into Open vSwitch's
//!   userspace datapath with `ovs-ofctl add-flows` (seed 000 found its
//!   insertion time growing exponentially);
//! - first: the time from `switch-ctl add-flow` until the first packet
//!   hits the new rule, under load (seed 004 Sect. 5.5);
//! - pipeline: a 5-table pipeline against the single table, cycles per
//!   packet at 1 and 1M flows ([`pipeline`]);
//! - veth: the bridge, the switch with 1 and 10 000 rules and Open vSwitch
//!   forwarding through the veth test bed (one `linerate bench` run,
//!   [`veth`]);
//! - openflow: the time to insert 1k .. 1M rules through the OpenFlow
//!   channel and to the first packet through the last of them, linerate and
//!   Open vSwitch programmed by the same client in the same run, on veth
//!   ports ([`openflow`]).

pub mod openflow;
mod ovs;
pub mod pipeline;
mod rules;
pub mod veth;

pub use rules::sweep_rules_text;

use super::{last_json, linerate, StudyReport};
use crate::report::svg::{Axis, Chart, Line, Marker, PALETTE};
use crate::report::Table;
use linerate_testkit::Proc;
use ovs::{ovs_version, Ovs, NO_OVS};
use rules::{insert_rules, sweep_rules};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The study's settings.
#[derive(Clone, Debug)]
pub struct SwitchStudy {
    pub linerate: PathBuf,
    /// Where the rule files and sockets go (a directory of its own is made
    /// in it and removed afterwards).
    pub dir: PathBuf,
    /// Seconds per sweep point.
    pub seconds: u64,
    /// The datapath's CPU.
    pub cpu: usize,
    /// Open vSwitch gets the insertion batches up to this many rules.
    pub ovs_max: u64,
    /// Rounds of the first-hit measurement per table size.
    pub rounds: usize,
    pub sweep: bool,
    pub insert: bool,
    pub first: bool,
    pub pipeline: bool,
    /// The part `openflow`, with the OpenFlow client's rule parser (the
    /// CLI gives linerate's client).
    pub openflow: Option<openflow::Prepare>,
    /// The part `veth`, if asked for.
    pub veth: Option<veth::VethPart>,
}

/// A running `linerate switch` with a control socket (killed and reaped if
/// dropped before [`Switch::finish`]).
struct Switch {
    child: Proc,
    sock: PathBuf,
}

impl Switch {
    fn start(
        lr: &Path,
        dir: &Path,
        source: &str,
        flows: Option<&Path>,
        cpu: usize,
    ) -> Result<Switch, String> {
        let sock = dir.join("switch.sock");
        let _ = std::fs::remove_file(&sock);
        let mut c = Command::new(lr);
        c.args([
            "switch",
            "--port",
            &format!("1={source}"),
            "--port",
            "2=mem:b?sink",
            "--ctl",
        ])
        .arg(&sock)
        .args(["--cpu", &cpu.to_string(), "--quiet", "--json"]);
        if let Some(f) = flows {
            c.arg("--flows").arg(f);
        }
        let mut child = Proc::spawn(&mut c, "linerate switch")?;
        // A run that dies leaves no switch behind: the bench's watchdog kills it.
        crate::guard::register_pid(child.pid());
        child.wait_ready(Duration::from_secs(60), |_| sock.exists())?;
        Ok(Switch { child, sock })
    }

    fn ctl(&self, lr: &Path, args: &[&str]) -> Result<Value, String> {
        let sock = self.sock.display().to_string();
        let mut a = vec!["switch-ctl", &sock];
        a.extend(args);
        a.push("--json");
        last_json("switch-ctl", &linerate(lr, &a)?)
    }

    /// SIGINT; its final account.
    fn finish(self) -> Result<Value, String> {
        last_json("linerate switch", &self.child.finish()?.0)
    }
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or(0.0)
}

impl SwitchStudy {
    /// Run the parts asked for; every switch, daemon and file is removed at
    /// the end, also on errors.
    pub fn run(&self, progress: &mut dyn FnMut(&str)) -> Result<StudyReport, String> {
        if !(self.sweep
            || self.insert
            || self.first
            || self.pipeline
            || self.openflow.is_some()
            || self.veth.is_some())
        {
            return Err(
                "nothing to run: give at least one of sweep, insert, first, pipeline, openflow, veth"
                    .into(),
            );
        }
        if let Some(v) = &self.veth {
            v.check()?;
        }
        let dir = self
            .dir
            .join(format!("linerate-switch-study-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let r = self.parts(&dir, progress);
        let _ = std::fs::remove_dir_all(&dir);
        r
    }

    fn parts(&self, dir: &Path, progress: &mut dyn FnMut(&str)) -> Result<StudyReport, String> {
        let lr = &self.linerate;
        let sweep_file = dir.join("sweep.flows");
        std::fs::write(&sweep_file, sweep_rules()).map_err(|e| e.to_string())?;
        let sf = sweep_file.display().to_string();
        let mut sweep = Vec::new();
        if self.sweep {
            for n in [1u64, 100, 10_000, 100_000, 1_000_000] {
                for emc in [true, false] {
                    progress(&format!(
                        "sweep: {n} flows, cache {}",
                        if emc { "on" } else { "off" }
                    ));
                    let src = format!("1=mem:a?source=64&flows={n}");
                    let (cpu, secs) = (self.cpu.to_string(), self.seconds.to_string());
                    let mut a = vec![
                        "switch",
                        "--port",
                        &src,
                        "--port",
                        "2=mem:b?sink",
                        "--flows",
                        &sf,
                        "--cpu",
                        &cpu,
                        "--duration",
                        &secs,
                        "--profile",
                        "--json",
                        "--quiet",
                    ];
                    if !emc {
                        a.push("--no-emc");
                    }
                    let v = last_json("linerate switch", &linerate(lr, &a)?)?;
                    if v["balanced"] != true {
                        return Err(format!(
                            "sweep at {n} flows: received != forwarded + drops: {v}"
                        ));
                    }
                    sweep.push(json!({"flows": n, "emc": emc, "switch": v}));
                }
            }
        }
        let mut insert = Vec::new();
        if self.insert {
            let sw = Switch::start(lr, dir, "mem:a?source=64", None, self.cpu)?;
            // The largest size twice: the first time the switch's memory
            // grows (page faults), the second time it reuses it.
            let mut seen = Vec::new();
            for n in [1000u32, 10_000, 100_000, 1_000_000, 1_000_000] {
                let file = dir.join(format!("rules-{n}.flows"));
                if !file.exists() {
                    std::fs::write(&file, insert_rules(n)).map_err(|e| e.to_string())?;
                }
                progress(&format!("insert: {n} rules into linerate switch"));
                sw.ctl(lr, &["del-flows"])?;
                let again = seen.contains(&n);
                seen.push(n);
                let t0 = Instant::now();
                let rep = sw.ctl(lr, &["add-flows", &file.display().to_string()])?;
                let wall = t0.elapsed().as_secs_f64();
                insert.push(json!({"switch": "linerate", "rules": n, "again": again, "table_s": rep["seconds"], "parse_s": rep["receive_parse_seconds"], "wall_s": wall}));
            }
            let end = sw.finish()?;
            if end["balanced"] != true {
                return Err(format!("insert: received != forwarded + drops: {end}"));
            }
            match ovs_version() {
                Some(version) => {
                    let ovs = Ovs::start(dir)?;
                    for n in [1000u32, 10_000, 100_000, 1_000_000] {
                        if u64::from(n) > self.ovs_max {
                            insert.push(json!({"switch": "ovs", "rules": n, "skipped": format!("--ovs-max {}", self.ovs_max)}));
                            continue;
                        }
                        progress(&format!(
                            "insert: {n} rules into Open vSwitch (ovs-ofctl add-flows)"
                        ));
                        ovs.ofctl(&["del-flows", "lrbench"])?;
                        let t0 = Instant::now();
                        ovs.ofctl(&[
                            "add-flows",
                            "lrbench",
                            &dir.join(format!("rules-{n}.flows")).display().to_string(),
                        ])?;
                        let wall = t0.elapsed().as_secs_f64();
                        let agg = ovs.ofctl(&["dump-aggregate", "lrbench"])?;
                        let count = agg
                            .split("flow_count=")
                            .nth(1)
                            .and_then(|x| x.split_whitespace().next())
                            .and_then(|x| x.parse::<u64>().ok());
                        insert.push(json!({"switch": "ovs", "version": version, "rules": n, "wall_s": wall, "flow_count": count}));
                    }
                }
                None => insert.push(json!({"switch": "ovs", "skipped": NO_OVS})),
            }
        }
        let mut first = Vec::new();
        if self.first {
            let big = dir.join("first-big.flows");
            std::fs::write(&big, sweep_rules() + &insert_rules(100_000))
                .map_err(|e| e.to_string())?;
            for base in [&sweep_file, &big] {
                let rules = std::fs::read_to_string(base)
                    .map_err(|e| e.to_string())?
                    .lines()
                    .count();
                progress(&format!(
                    "first packet: {rules} rules in the table, {} rounds",
                    self.rounds
                ));
                let sw = Switch::start(lr, dir, "mem:a?source=64&flows=16", Some(base), self.cpu)?;
                let mut lat = Vec::new();
                for i in 0..self.rounds {
                    let (prio, src) = (500 + i, format!("10.0.0.{}", i % 16));
                    sw.ctl(
                        lr,
                        &[
                            "add-flow",
                            &format!("priority={prio},udp,nw_src={src},actions=output:2"),
                        ],
                    )?;
                    let t0 = Instant::now();
                    loop {
                        let d = sw.ctl(lr, &["dump-flows", &format!("udp,nw_src={src}")])?;
                        let hit = d["stats"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .find(|x| x["priority"].as_u64() == Some(prio as u64));
                        if let Some(h) = hit.filter(|h| h["first_hit_ns"].as_u64().unwrap_or(0) > 0)
                        {
                            lat.push((f(&h["first_hit_ns"]) - f(&h["created_ns"])) / 1e3);
                            break;
                        }
                        if t0.elapsed() > Duration::from_secs(5) {
                            return Err(format!("first packet: rule {prio} not hit within 5 s"));
                        }
                        std::thread::sleep(Duration::from_millis(2));
                    }
                }
                let end = sw.finish()?;
                if end["balanced"] != true {
                    return Err(format!(
                        "first packet: received != forwarded + drops: {end}"
                    ));
                }
                lat.sort_by(f64::total_cmp);
                first.push(json!({"rules": rules, "rounds": lat.len(), "latency_us": lat}));
            }
        }
        let pipeline = if self.pipeline {
            pipeline::run(lr, dir, &sweep_file, self.cpu, self.seconds, progress)?
        } else {
            Value::Null
        };
        // The veth and openflow parts' failures are findings; the parts
        // before them stay.
        let veth = match &self.veth {
            Some(v) => v
                .run(lr, self.cpu, progress)
                .unwrap_or_else(|e| json!({ "error": e })),
            None => Value::Null,
        };
        let openflow = match self.openflow {
            Some(prepare) => openflow::run(lr, dir, self.cpu, self.ovs_max, prepare, progress)
                .unwrap_or_else(|e| json!({ "error": e })),
            None => Value::Null,
        };
        Ok(self.report(&sweep, &insert, &first, &pipeline, &openflow, &veth))
    }

    fn report(
        &self,
        sweep: &[Value],
        insert: &[Value],
        first: &[Value],
        pipeline: &Value,
        openflow: &Value,
        veth: &Value,
    ) -> StudyReport {
        let mut findings = Vec::new();
        let mut tables = Vec::new();
        let mut charts = Vec::new();
        let mut intro = Vec::new();
        if !sweep.is_empty() {
            intro.push(format!("Sweep: `linerate switch --port '1=mem:a?source=64&flows=N' --port '2=mem:b?sink' --flows sweep.flows --cpu {} --duration {} --profile [--no-emc]`; sweep.flows: 5114 rules in 5 subtables (1000 exact 5-tuples, 4096 /24 sources to UDP 53, 16 /16 sources with a MAC rewrite, one /16 destination with dec_ttl, a drop-all). The source draws each packet's flow at random and writes its addresses (rx column: the work a NIC would do); \"switch\" is every stage but rx, the cost of the switch itself.", self.cpu, self.seconds));
            let mut t = Table {
                title: "Flow sweep on in-memory ports (seed 000 Fig. 5), TSC cycles per packet"
                    .into(),
                header: [
                    "flows",
                    "cache",
                    "Mpps",
                    "cache hit rate",
                    "subtables per classifier lookup",
                    "rx",
                    "extract",
                    "lookup",
                    "actions",
                    "tx+buffers",
                    "switch cycles/pkt",
                    "total cycles/pkt",
                ]
                .map(String::from)
                .to_vec(),
                rows: vec![],
            };
            let (mut on, mut off) = (Vec::new(), Vec::new());
            for s in sweep {
                let j = &s["switch"];
                let c = &j["profile"]["cycles_per_packet"];
                let emc = s["emc"] == true;
                let sw = f(&c["total"]) - f(&c["rx"]);
                let n = f(&s["flows"]);
                if emc {
                    on.push((n, sw))
                } else {
                    off.push((n, sw))
                }
                t.rows.push(vec![
                    super::thousands(s["flows"].as_u64().unwrap_or(0)),
                    if emc { "on" } else { "off" }.into(),
                    format!(
                        "{:.1}",
                        f(&j["received"]) / f(&j["elapsed_s"]).max(1e-9) / 1e6
                    ),
                    if emc {
                        format!("{:.1} %", 100.0 * f(&j["cache"]["emc_hit_rate"]))
                    } else {
                        "-".into()
                    },
                    format!("{:.2}", f(&j["cache"]["subtables_per_lookup"])),
                    format!("{:.1}", f(&c["rx"])),
                    format!("{:.1}", f(&c["extract"])),
                    format!("{:.1}", f(&c["lookup"])),
                    format!("{:.1}", f(&c["actions"])),
                    format!("{:.1}", f(&c["tx"]) + f(&c["buffers"])),
                    format!("**{sw:.1}**"),
                    format!("{:.1}", f(&c["total"])),
                ]);
            }
            tables.push(t);
            charts.push((
                Chart {
                    id: "switch-sweep".into(),
                    title: "Switch cycles per packet against active flows".into(),
                    x: Axis::log("active flows"),
                    y: Axis::linear("cycles per packet (all stages but rx)"),
                    lines: vec![
                        Line::new("cache on", PALETTE[0], on, Marker::nth(0)),
                        Line::new("cache off", PALETTE[1], off, Marker::nth(1)),
                    ],
                },
                "TSC cycles per packet of the switch's stages (extract, lookup, actions, tx, buffers) against the number of flows the source draws from.".to_string(),
            ));
        }
        if !insert.is_empty() {
            let version = insert
                .iter()
                .find_map(|i| i["version"].as_str())
                .unwrap_or("")
                .to_string();
            intro.push(format!("Insertion: rules `priority=100..106,udp,nw_dst=10.A.B.C,tp_dst=1000..1049,actions=output:2` (one subtable), each batch into an emptied table. linerate: `linerate switch-ctl SOCK add-flows FILE` into a switch forwarding at full speed on mem ports; reply fields `receive_parse_seconds` (reading and parsing the rule text) and `seconds` (checking the rules, building and publishing the table); wall: the whole command. The 1M batch runs twice: the first time the switch's memory grows to hold it (page faults), the second time it reuses that memory. Open vSwitch {version}: `ovs-ofctl add-flows BR FILE` into a private ovs-vswitchd with a netdev (userspace) bridge, wall time of the command."));
            let mut t = Table {
                title:
                    "Rule insertion (seed 000: Open vSwitch's insertion time grew exponentially)"
                        .into(),
                header: [
                    "rules",
                    "linerate parse (s)",
                    "linerate table (s)",
                    "table rules/s",
                    "linerate wall (s)",
                    "wall rules/s",
                    "Open vSwitch wall (s)",
                    "OvS rules/s",
                    "OvS/linerate wall",
                ]
                .map(String::from)
                .to_vec(),
                rows: vec![],
            };
            for l in insert.iter().filter(|i| i["switch"] == "linerate") {
                let n = f(&l["rules"]);
                let again = l["again"] == true;
                let o = (!again)
                    .then(|| {
                        insert
                            .iter()
                            .find(|i| i["switch"] == "ovs" && i["rules"] == l["rules"])
                    })
                    .flatten();
                let (ow, orate, ratio) = match o {
                    Some(o) if o["wall_s"].is_number() => (
                        format!("{:.2}", f(&o["wall_s"])),
                        format!("{:.0}", n / f(&o["wall_s"]).max(1e-9)),
                        format!("{:.1}x", f(&o["wall_s"]) / f(&l["wall_s"]).max(1e-9)),
                    ),
                    Some(o) => (
                        format!("skipped ({})", o["skipped"].as_str().unwrap_or("")),
                        "-".into(),
                        "-".into(),
                    ),
                    None => ("-".into(), "-".into(), "-".into()),
                };
                t.rows.push(vec![
                    format!(
                        "{}{}",
                        super::thousands(n as u64),
                        if again { " (again)" } else { "" }
                    ),
                    format!("{:.3}", f(&l["parse_s"])),
                    format!("{:.3}", f(&l["table_s"])),
                    format!("{:.0}", n / f(&l["table_s"]).max(1e-9)),
                    format!("{:.2}", f(&l["wall_s"])),
                    format!("{:.0}", n / f(&l["wall_s"]).max(1e-9)),
                    ow,
                    orate,
                    ratio,
                ]);
            }
            if let Some(s) = insert
                .iter()
                .find(|i| i["switch"] == "ovs" && i["rules"].is_null())
            {
                intro.push(format!(
                    "Open vSwitch: {}.",
                    s["skipped"].as_str().unwrap_or("")
                ));
            }
            tables.push(t);
        }
        if !first.is_empty() {
            intro.push(format!("First hit: the switch forwards 16 UDP flows from `mem:a?source=64&flows=16` at full speed on CPU {}; each round `switch-ctl add-flow` adds a rule (priority above all others) for one of the flows, and `switch-ctl dump-flows MATCH --json` reads its `first_hit_ns - created_ns` (created: when the switch took the request; first hit: the batch that first hit it): copying and publishing the table, the datapath taking the new version at its next batch, and the first matching packet.", self.cpu));
            let q = |v: &[f64], p: f64| {
                v.get(((v.len() as f64 * p) as usize).min(v.len().saturating_sub(1)))
                    .copied()
                    .unwrap_or(0.0)
            };
            tables.push(Table {
                title: "Time from add-flow to the first packet that hits the rule, under load (seed 004 Sect. 5.5)".into(),
                header: ["rules in the table", "rounds", "median (µs)", "p90 (µs)", "max (µs)", "min (µs)"].map(String::from).to_vec(),
                rows: first.iter().map(|x| {
                    let v: Vec<f64> = x["latency_us"].as_array().into_iter().flatten().filter_map(Value::as_f64).collect();
                    vec![
                        x["rules"].to_string(),
                        x["rounds"].to_string(),
                        format!("{:.1}", q(&v, 0.5)),
                        format!("{:.1}", q(&v, 0.9)),
                        format!("{:.1}", v.last().copied().unwrap_or(0.0)),
                        format!("{:.1}", v.first().copied().unwrap_or(0.0)),
                    ]
                }).collect(),
            });
        }
        if !pipeline.is_null() {
            let (i, t, f) = pipeline::report(pipeline, self.cpu, self.seconds);
            intro.push(i);
            tables.push(t);
            findings.extend(f);
        }
        if let Some(e) = veth["error"].as_str() {
            findings.push(format!("The veth part did not run to its end: {e}"));
        } else if let (Some(v), false) = (&self.veth, veth.is_null()) {
            let (i, t, f) = veth::report(v, veth);
            intro.push(i);
            tables.push(t);
            findings.extend(f);
        }
        if let Some(e) = openflow["error"].as_str() {
            findings.push(format!("The openflow part did not run: {e}"));
        } else if !openflow.is_null() {
            let (i, t, f) = openflow::report(openflow);
            intro.push(i);
            tables.push(t);
            findings.extend(f);
        }
        let parts: Vec<&str> = [
            ("sweep", self.sweep),
            ("insert", self.insert),
            ("first", self.first),
            ("pipeline", self.pipeline),
            ("veth", self.veth.is_some()),
            ("openflow", self.openflow.is_some()),
        ]
        .iter()
        .filter(|p| p.1)
        .map(|p| p.0)
        .collect();
        StudyReport {
            name: "switch",
            title: format!(
                "`linerate switch`: flow sweep, rule insertion, first hit{}{}{}",
                if self.pipeline {
                    ", 5-table pipeline"
                } else {
                    ""
                },
                if self.veth.is_some() {
                    ", through the veth test bed"
                } else {
                    ""
                },
                if self.openflow.is_some() {
                    ", insertion over OpenFlow"
                } else {
                    ""
                }
            ),
            date: linerate_io::time::utc_rfc3339(),
            command: format!(
                "linerate bench switch --parts {} --seconds {} --cpu {} --ovs-max {} --rounds {}{}",
                parts.join(","),
                self.seconds,
                self.cpu,
                self.ovs_max,
                self.rounds,
                self.veth.as_ref().map_or(String::new(), |v| v.options())
            ),
            environment: vec![
                ("CPU".into(), linerate_io::host::cpu_model()),
                ("kernel".into(), linerate_io::host::kernel_release()),
            ],
            intro,
            tables,
            charts,
            blocks: vec![],
            findings,
            data: json!({"sweep": sweep, "insert": insert, "first": first, "pipeline": pipeline, "openflow": openflow, "veth": veth}),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_rule_sets_have_their_shape() {
        let s = super::sweep_rules();
        assert_eq!(s.lines().count(), 1000 + 4096 + 16 + 2);
        assert!(
            s.starts_with("priority=400,udp,nw_src=10.0.0.0,nw_dst=10.1.0.1,tp_src=1024,tp_dst=9,")
        );
        let i = super::insert_rules(70_000);
        assert_eq!(i.lines().count(), 70_000);
        assert_eq!(
            i.lines().nth(65_537),
            Some("priority=103,udp,nw_dst=10.1.0.1,tp_dst=1037,actions=output:2")
        );
    }
}
