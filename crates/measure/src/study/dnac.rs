//! `linerate bench dnac`: seed 002's experiment (Table 3): the events an
//! analyser finds with TED on and off, at a low rate and at overload.
//!
//! 1. `linerate trace http` writes a trace of HTTP/1.1 downloads (Pareto
//!    body sizes) and prints its ground truth;
//! 2. one `linerate capture` worker with the HTTP analyser and a fixed cost
//!    per packet (a heavy analyser) takes the trace at top speed: what it
//!    forwards per second is its capacity;
//! 3. the trace is replayed at `low_frac` times and at `overload` times the
//!    capacity, each with TED off and on; the events found are compared
//!    with the ground truth.

use super::{last_json, linerate, thousands, StudyReport};
use crate::report::svg::{Axis, Chart, Line, Marker, PALETTE};
use crate::report::Table;
use serde_json::{json, Value};
use std::path::PathBuf;

/// The experiment's settings.
#[derive(Clone, Debug)]
pub struct Dnac {
    /// The linerate binary that runs the trace and the captures.
    pub linerate: PathBuf,
    /// Where the trace is written (removed afterwards).
    pub dir: PathBuf,
    pub connections: u64,
    /// Smallest HTTP body (bytes): heavy tails start here.
    pub min_size: u64,
    /// Busy work per packet in the worker (ns).
    pub cost_ns: u64,
    /// The overload: this many times the worker's capacity.
    pub overload: f64,
    /// The low rate: this fraction of the capacity.
    pub low_frac: f64,
    pub seed: u64,
}

impl Default for Dnac {
    fn default() -> Dnac {
        Dnac {
            linerate: PathBuf::from("linerate"),
            dir: std::env::temp_dir(),
            connections: 1000,
            min_size: 100_000,
            cost_ns: 10_000,
            overload: 10.0,
            low_frac: 0.2,
            seed: 1,
        }
    }
}

fn num(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

impl Dnac {
    /// Run it; `progress` gets a line per step.
    pub fn run(&self, progress: &mut dyn FnMut(&str)) -> Result<StudyReport, String> {
        if !(self.overload > 1.0 && self.low_frac > 0.0 && self.low_frac < 1.0) {
            return Err("overload must be over 1 and the low fraction between 0 and 1".into());
        }
        let trace = self
            .dir
            .join(format!("linerate-dnac-{}.pcapng", std::process::id()));
        let t = trace.display().to_string();
        let r = self.experiment(&t, progress);
        let _ = std::fs::remove_file(&trace);
        r
    }

    fn experiment(
        &self,
        trace: &str,
        progress: &mut dyn FnMut(&str),
    ) -> Result<StudyReport, String> {
        let lr = &self.linerate;
        progress(&format!("trace: {} connections", self.connections));
        let truth = last_json(
            "trace",
            &linerate(
                lr,
                &[
                    "trace",
                    "http",
                    trace,
                    "--connections",
                    &self.connections.to_string(),
                    "--min-size",
                    &self.min_size.to_string(),
                    "--mean-gap-us",
                    "1000",
                    "--seed",
                    &self.seed.to_string(),
                    "--json",
                ],
            )?,
        )?;
        let cost = self.cost_ns.to_string();
        let cap = |rate: u64, ted: &str| -> Result<Value, String> {
            let port = format!("pcap:{trace}?rate={rate}");
            let args = [
                "capture",
                &port,
                "--analyser",
                "http",
                "--cost-ns",
                &cost,
                "--ted",
                ted,
                "--json",
                "--quiet",
            ];
            let v = last_json("capture", &linerate(lr, &args)?)?;
            let t = &v["totals"];
            let dropped: u64 = t["dropped"]
                .as_object()
                .map_or(0, |d| d.values().map(num).sum());
            if num(&t["received"]) != num(&t["forwarded"]) + dropped {
                return Err(format!(
                    "capture at {rate} pps, TED {ted}: received != forwarded + drops: {t}"
                ));
            }
            Ok(v)
        };
        progress(&format!(
            "capacity of one worker (cost {} ns per packet)",
            self.cost_ns
        ));
        let c = cap(1_000_000, "off")?;
        let secs = c["t"].as_f64().unwrap_or(0.0);
        if secs <= 0.0 {
            return Err("capacity run: no time measured".into());
        }
        let capacity = (num(&c["totals"]["forwarded"]) as f64 / secs) as u64;
        let low = (capacity as f64 * self.low_frac) as u64;
        let high = (capacity as f64 * self.overload) as u64;
        let mut runs = Vec::new();
        for (label, rate) in [("low", low), ("high", high)] {
            for ted in ["off", "on"] {
                progress(&format!("{label} rate ({rate} pps), TED {ted}"));
                runs.push((label, rate, ted, cap(rate, ted)?));
            }
        }
        Ok(self.report(&truth, capacity, low, high, &c, &runs))
    }

    fn report(
        &self,
        truth: &Value,
        capacity: u64,
        low: u64,
        high: u64,
        capacity_run: &Value,
        runs: &[(&str, u64, &str, Value)],
    ) -> StudyReport {
        let pairs = num(&truth["pairs"]).max(1);
        let mut rows = Vec::new();
        for (label, rate, ted, v) in runs {
            let t = &v["totals"];
            let e = &t["events"];
            rows.push(vec![
                format!(
                    "{} pps ({})",
                    thousands(*rate),
                    if *label == "low" {
                        "low".to_string()
                    } else {
                        format!("{}x capacity", self.overload)
                    }
                ),
                ted.to_string(),
                thousands(num(&t["received"])),
                thousands(num(&t["forwarded"])),
                thousands(num(&t["dropped"]["ted"])),
                thousands(num(&t["dropped"]["ring_full"])),
                thousands(num(&e["http_request"])),
                thousands(num(&e["http_response"])),
                thousands(num(&e["http_pair"])),
                format!(
                    "{:.1} %",
                    100.0 * num(&e["http_pair"]) as f64 / pairs as f64
                ),
            ]);
        }
        let ev = |label: &str, ted: &str, k: &str| {
            runs.iter()
                .find(|r| r.0 == label && r.2 == ted)
                .map_or(0, |r| num(&r.3["totals"]["events"][k]))
        };
        let ratio = |k: &str| {
            let (off, on) = (ev("high", "off", k), ev("high", "on", k));
            if off > 0 {
                format!("{:.1}x", on as f64 / off as f64)
            } else {
                format!("{on} vs 0")
            }
        };
        let found = |ted: &str| {
            vec![
                (
                    low as f64,
                    100.0 * ev("low", ted, "http_pair") as f64 / pairs as f64,
                ),
                (
                    high as f64,
                    100.0 * ev("high", ted, "http_pair") as f64 / pairs as f64,
                ),
            ]
        };
        // The rate the replay reached at overload: received over the run's time.
        let reached = |ted: &str| {
            runs.iter()
                .find(|r| r.0 == "high" && r.2 == ted)
                .map_or(0.0, |r| {
                    num(&r.3["totals"]["received"]) as f64
                        / r.3["t"].as_f64().unwrap_or(1.0).max(1e-9)
                })
        };
        let chart = Chart {
            id: "dnac-pairs".into(),
            title: "Request/response pairs found".into(),
            x: Axis::log("offered rate (packets/s)"),
            y: Axis::linear("pairs found (% of the ground truth)").range(0.0, 105.0),
            lines: vec![
                Line::new("TED off", PALETTE[1], found("off"), Marker::nth(0)),
                Line::new("TED on", PALETTE[0], found("on"), Marker::nth(1)),
            ],
        };
        StudyReport {
            name: "dnac",
            title: "DNAC experiment: events detected with TED on and off (seed 002 Table 3)".into(),
            date: linerate_io::time::utc_rfc3339(),
            command: format!(
                "linerate bench dnac --connections {} --min-size {} --cost-ns {} --overload {} --low-frac {} --seed {}",
                self.connections, self.min_size, self.cost_ns, self.overload, self.low_frac, self.seed
            ),
            environment: vec![
                ("CPU".into(), linerate_io::host::cpu_model()),
                ("kernel".into(), linerate_io::host::kernel_release()),
            ],
            intro: vec![
                format!(
                    "Trace (`linerate trace http`): {} HTTP/1.1 downloads from 1000 clients to 25 servers, {} packets, {:.0} MB; body sizes Pareto (shape 1.2, minimum {} B), median {} B, largest {} B; the largest 10 % carry {:.0} % of the bytes. Ground truth: {} requests, {} responses, {} request/response pairs.",
                    thousands(num(&truth["connections"])),
                    thousands(num(&truth["packets"])),
                    num(&truth["bytes"]) as f64 / 1e6,
                    thousands(self.min_size),
                    thousands(num(&truth["median_body"])),
                    thousands(num(&truth["largest_body"])),
                    100.0 * truth["top10_byte_share"].as_f64().unwrap_or(0.0),
                    thousands(num(&truth["requests"])),
                    thousands(num(&truth["responses"])),
                    thousands(num(&truth["pairs"])),
                ),
                format!(
                    "One capture worker (software dispatcher, `--analyser http --cost-ns {}`: the built-in HTTP analyser plus {} µs of busy work per packet, a heavy analyser) takes {} packets/s (trace at top speed, TED off). The trace is then replayed (`pcap:FILE?rate=PPS`) at {}x that ({} pps) and at {}x ({} pps), with TED on and off.",
                    self.cost_ns,
                    self.cost_ns as f64 / 1000.0,
                    thousands(capacity),
                    self.low_frac,
                    thousands(low),
                    self.overload,
                    thousands(high),
                ),
            ],
            tables: vec![Table {
                title: "Events found per run".into(),
                header: [
                    "offered", "TED", "received", "forwarded", "dropped: TED", "dropped: ring full",
                    "http_request", "http_response", "http_pair", "pairs found",
                ]
                .map(String::from)
                .to_vec(),
                rows,
            }],
            charts: vec![(
                chart,
                "Request/response pairs the analyser found, in percent of the trace's, at the low rate and at overload, TED off and on.".into(),
            )],
            blocks: vec![],
            findings: vec![
                format!(
                    "At overload TED finds {} the requests, {} the responses and {} the request/response pairs that the same worker finds without it (seed 002 reports 2.5-3.2x).",
                    ratio("http_request"),
                    ratio("http_response"),
                    ratio("http_pair")
                ),
                format!(
                    "The replay reached {:.0} kpps (TED off) and {:.0} kpps (TED on) in the overload runs (received packets over the run's time), {:.1}x and {:.1}x the worker's capacity. At the low rate the analyser found {:.1} % (TED off) and {:.1} % (TED on) of the pairs.",
                    reached("off") / 1e3,
                    reached("on") / 1e3,
                    reached("off") / capacity.max(1) as f64,
                    reached("on") / capacity.max(1) as f64,
                    found("off")[0].1,
                    found("on")[0].1,
                ),
            ],
            data: json!({
                "truth": truth, "capacity_pps": capacity, "low_pps": low, "high_pps": high,
                "capacity_run": capacity_run,
                "runs": runs.iter().map(|(l, r, t, v)| json!({"load": l, "rate_pps": r, "ted": t, "capture": v})).collect::<Vec<_>>(),
            }),
        }
    }
}
