//! The switch study's part `veth`: the software switches forwarding through
//! the veth test bed in one `linerate bench` run (RFC 2544 throughput, no
//! frame loss or back-to-back procedure): the Linux bridge, `linerate
//! switch` with 1 rule per direction and with 10 000 rules, Open vSwitch's
//! userspace datapath (afxdp ports) with its 2 in_port rules and with the
//! same 10 000 rules (`crate::bench::dut::switch::switch_rules`). The table
//! (Mpps per size, ratio to the bridge, latency at the common load) and the
//! findings are computed from the bench's JSON.

use crate::report::Table;
use crate::study::bench_json;
use serde_json::Value;
use std::path::Path;

/// The DuTs of the part by default.
pub const DUTS: [&str; 5] = [
    "linux-bridge",
    "linerate-switch",
    "linerate-switch-10k",
    "ovs-afxdp",
    "ovs-afxdp-10k",
];

/// The part's settings.
#[derive(Clone, Debug)]
pub struct VethPart {
    /// Throughput searches per size.
    pub repetitions: usize,
    /// Frame sizes on the wire, bytes with FCS.
    pub sizes: Vec<u32>,
    /// The DuTs (built-in names).
    pub duts: Vec<String>,
    /// Seconds per final trial (None: the bench's default; 0: none).
    pub final_trial: Option<f64>,
}

impl Default for VethPart {
    fn default() -> Self {
        VethPart {
            repetitions: 3,
            sizes: vec![64],
            duts: DUTS.map(String::from).to_vec(),
            final_trial: None,
        }
    }
}

impl VethPart {
    /// Bad settings, as one line.
    pub fn check(&self) -> Result<(), String> {
        if self.repetitions == 0 || self.repetitions > 50 {
            return Err(format!("--veth-repetitions {}: 1 to 50", self.repetitions));
        }
        if let Some(s) = self.sizes.iter().find(|s| !(64..=1518).contains(*s)) {
            return Err(format!(
                "--veth-sizes {s}: frame sizes are 64 to 1518 bytes"
            ));
        }
        if self.sizes.is_empty() || self.duts.is_empty() {
            return Err("--veth-sizes and --veth-duts: at least one each".into());
        }
        crate::bench::dut::check_builtin("--veth-duts", &self.duts)?;
        crate::study::final_trial_args("--veth-final-trial", self.final_trial)?;
        Ok(())
    }

    /// The options of the switch study's command that reproduce it.
    pub fn options(&self) -> String {
        let sizes: Vec<String> = self.sizes.iter().map(u32::to_string).collect();
        let mut o = format!(
            " --veth-repetitions {} --veth-sizes {} --veth-duts {}",
            self.repetitions,
            sizes.join(","),
            self.duts.join(",")
        );
        if let Some(f) = self.final_trial {
            o.push_str(&format!(" --veth-final-trial {f}"));
        }
        o
    }

    /// The bench's arguments (its beds named `PREFIX0`, `PREFIX1`, ...).
    fn args(&self, cpu: usize, prefix: &str) -> Vec<String> {
        let sizes: Vec<String> = self.sizes.iter().map(u32::to_string).collect();
        let mut a: Vec<String> = [
            "bench",
            "--sizes",
            &sizes.join(","),
            "--frame-loss-sizes",
            "none",
            "--b2b-sizes",
            "none",
            "--repetitions",
            &self.repetitions.to_string(),
            "--dut-cpu",
            &cpu.to_string(),
            "--name",
            prefix,
            "--no-report",
            "--json",
            "-",
        ]
        .map(String::from)
        .to_vec();
        for d in &self.duts {
            a.extend(["--dut".to_string(), d.clone()]);
        }
        a.extend(
            crate::study::final_trial_args("--veth-final-trial", self.final_trial)
                .unwrap_or_default(),
        );
        a
    }

    /// Run the bench (its progress and table on standard error); its JSON.
    pub fn run(
        &self,
        lr: &Path,
        cpu: usize,
        progress: &mut dyn FnMut(&str),
    ) -> Result<Value, String> {
        let a = self.args(cpu, &format!("lrsw{}x", std::process::id()));
        progress(&format!("veth: linerate {}", a.join(" ")));
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        bench_json(lr, &a)
    }
}

/// What a DuT's rules are.
fn rules(name: &str) -> &'static str {
    match name {
        "linux-bridge" => "FDB (2 MACs)",
        "linerate-switch" | "ovs-afxdp" => "2 (1 per direction)",
        "linerate-switch-10k" | "ovs-afxdp-10k" => "10 000",
        _ => "-",
    }
}

fn size(r: &Value, z: u64) -> Option<&Value> {
    r["sizes"]
        .as_array()?
        .iter()
        .find(|s| s["frame_size"].as_u64() == Some(z))
}

/// The intro paragraph, the table and the findings of the bench run `d`.
pub fn report(part: &VethPart, d: &Value) -> (String, Table, Vec<String>) {
    let res: Vec<&Value> = d["results"].as_array().into_iter().flatten().collect();
    let mut sizes: Vec<u64> = res
        .iter()
        .flat_map(|r| r["sizes"].as_array().into_iter().flatten())
        .filter_map(|s| s["frame_size"].as_u64())
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    let first = sizes.first().copied().unwrap_or(64);
    let mpps = |s: &Value, k: &str| s[k].as_f64().map(|v| v / 1e6);
    // The RFC 2544 section's cell: median, ">=" when generator-limited,
    // the searches' min-max when they differ.
    let cell =
        |s: Option<&Value>| s.map_or_else(|| "-".into(), crate::bench::markdown::throughput_range);
    let bridge = res.iter().copied().find(|r| r["name"] == "linux-bridge");
    let bs = bridge.and_then(|b| size(b, first));
    let base = bs.and_then(|s| mpps(s, "throughput_pps"));
    // A generator-limited bridge forwards at least `base`: the ratios are
    // then upper bounds.
    let base_lim = bs.is_some_and(|s| s["generator_limited"] == true);
    let lat = |s: &Value| -> Option<(f64, f64, f64)> {
        let m = &s["common_latency_merged"];
        Some((
            mpps(s, "common_latency_pps")?,
            m["p50_ns"].as_f64()? / 1e3,
            m["p99_ns"].as_f64()? / 1e3,
        ))
    };
    let mut header = vec!["DuT".to_string(), "rules".into()];
    header.extend(sizes.iter().map(|z| format!("{z} B Mpps")));
    header.extend([
        format!("{first} B / bridge"),
        format!("{first} B p50/p99 at the common load (µs)"),
        "status".into(),
    ]);
    let mut t = Table {
        title: "Forwarding through the veth test bed, 1 and 10 000 rules, against Open vSwitch and the bridge (RFC 2544 throughput, Mpps: median (min-max) of the searches)".into(),
        header,
        rows: vec![],
    };
    let mut ratios = Vec::new();
    let mut lats = Vec::new();
    for r in &res {
        let name = r["name"].as_str().unwrap_or("?");
        let s = size(r, first);
        let v = s.and_then(|s| mpps(s, "throughput_pps"));
        let mut ratio = "-".to_string();
        if let (Some(s), Some(v), Some(b)) = (s, v, base) {
            let lim = s["generator_limited"] == true;
            ratio = if bridge.is_some_and(|b| std::ptr::eq(b, *r)) {
                "1.00".into()
            } else if base_lim && lim {
                "? (both generator-limited)".into()
            } else {
                format!(
                    "{}{:.2}",
                    if base_lim {
                        "<="
                    } else if lim {
                        ">="
                    } else {
                        ""
                    },
                    v / b
                )
            };
            if name != "linux-bridge" {
                ratios.push(format!("{name} {v:.3} ({ratio}x)"));
            }
        }
        let l = s.and_then(lat);
        if let Some((_, p50, p99)) = l {
            lats.push(format!("{p50:.1}/{p99:.1} ({name})"));
        }
        let mut row = vec![name.to_string(), rules(name).into()];
        row.extend(sizes.iter().map(|z| cell(size(r, *z))));
        row.push(ratio);
        row.push(l.map_or("-".into(), |(_, a, b)| format!("{a:.1}/{b:.1}")));
        row.push(r["status"].as_str().unwrap_or("?").to_string());
        t.rows.push(row);
    }
    let intro = format!(
        "Through the veth test bed: one `linerate bench --sizes {} --frame-loss-sizes none --b2b-sizes none --repetitions {}{}` run \
         with `--dut {}` ({}, {:.0} s; RFC 2544 throughput, the default trial length; the test bed of the RFC 2544 section, \
         with RPS of d0 to the DuT's core). Throughput: the highest offered rate with no loss. The 10 000 rules are 5 000 \
         per direction over 6 subtables (5-tuples, destination /32 + port, /24 and /16 prefixes, TCP ports, a catch-all; \
         `crates/measure/src/bench/dut_switch.rs`), and the bench traffic hits a priority-300 rule inside them.",
        sizes.iter().map(u64::to_string).collect::<Vec<_>>().join(","),
        part.repetitions,
        part.final_trial
            .map_or(String::new(), |f| format!(" --final-trial {f}")),
        part.duts.join(" --dut "),
        d["date"].as_str().unwrap_or("?"),
        d["seconds"].as_f64().unwrap_or(0.0),
    );
    let mut findings = Vec::new();
    if let (Some(b), false) = (base, ratios.is_empty()) {
        findings.push(format!(
            "Through veth at {first} B: {}; the bridge {b:.3} Mpps.",
            ratios.join(", ")
        ));
    }
    let common = res
        .iter()
        .find_map(|r| size(r, first).and_then(lat))
        .map(|l| l.0);
    if let (Some(c), false) = (common, lats.is_empty()) {
        findings.push(format!(
            "At the common load ({c:.3} Mpps, {first} B) p50/p99 were {} µs.",
            lats.join(", ")
        ));
    }
    let spreads: Vec<String> = res
        .iter()
        .filter_map(|r| {
            let x = r["throughput_spread"].as_f64()?;
            Some(format!(
                "{} ±{:.1} %",
                r["name"].as_str().unwrap_or("?"),
                x * 100.0
            ))
        })
        .collect();
    if !spreads.is_empty() {
        let h = &d["history"];
        findings.push(format!(
            "Re-run spread (95 % prediction interval of a re-run's throughput, from the {} searches per size{}): {}.",
            part.repetitions,
            match (h["runs"].as_u64(), h["spread"].as_f64()) {
                (Some(n), Some(s)) => format!(
                    " and the spread between this run and {n} earlier run(s) here, in \
                     logarithms, ±{:.1} %",
                    s * 100.0
                ),
                (Some(0), None) => "; no earlier run here yet".into(),
                (Some(n), None) => format!(
                    "; the {n} earlier run(s) here share too few results with this one for a \
                     spread between runs (at least {} degrees of freedom)",
                    crate::bench::history::MIN_DOF
                ),
                _ => String::new(),
            },
            spreads.join(", ")
        ));
    }
    (intro, t, findings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_table_and_ratios_come_from_the_bench_json() {
        let size = |pps: f64, lim: bool| {
            json!({"frame_size": 64, "throughput_pps": pps, "throughput_min_pps": pps * 0.9,
            "throughput_max_pps": pps * 1.1, "searches": [{}, {}], "generator_limited": lim,
            "common_latency_pps": 400e3, "common_latency_merged": {"p50_ns": 2000.0, "p99_ns": 7000.0}})
        };
        let d = json!({"date": "D", "seconds": 9.0, "history": {"runs": 0, "spread": null}, "results": [
            {"name": "linux-bridge", "status": "ok", "sizes": [size(0.8e6, false)], "throughput_spread": 0.1},
            {"name": "linerate-switch", "status": "ok", "sizes": [size(1.0e6, false)], "throughput_spread": 0.05},
            {"name": "ovs-afxdp", "status": "ok", "sizes": [size(1.2e6, true)]},
            {"name": "ovs-afxdp-10k", "status": "unavailable: no ovs", "sizes": []},
        ]});
        let (intro, t, f) = report(&VethPart::default(), &d);
        assert!(intro.contains("D, 9 s"), "{intro}");
        assert_eq!(
            t.rows[1],
            [
                "linerate-switch",
                "2 (1 per direction)",
                "1.000 (0.900-1.100)",
                "1.25",
                "2.0/7.0",
                "ok"
            ]
        );
        assert_eq!(t.rows[0][3], "1.00");
        assert!(t.rows[2][2].starts_with(">=1.200") && t.rows[2][3] == ">=1.50");
        assert_eq!(t.rows[3][2..], ["-", "-", "-", "unavailable: no ovs"]);
        assert!(f[0].contains("linerate-switch 1.000 (1.25x)"), "{f:?}");
        assert!(f[1].contains("(0.400 Mpps, 64 B)"), "{f:?}");
        assert!(
            f[2].contains("linux-bridge ±10.0 %, linerate-switch ±5.0 %"),
            "{f:?}"
        );
    }
}
