//! `linerate bench soak`: does a long run leak? `linerate fwd`, `linerate
//! switch` and `linerate capture`, one after the other, each on a fresh bed
//! over afxdp:d0/afxdp:d1 (capture: afxdp:d0, HTTP analyser) on CPU 1, for
//! a long time under traffic at half its loss-free rate, the resident
//! memory (VmRSS) of the process sampled at a fixed interval.
//!
//! Per pipeline:
//! 1. its loss-free rate: for fwd and switch the RFC 2544 throughput of
//!    `linerate bench --dut linerate-afxdp --dut linerate-switch` (64 B, the
//!    same pipelines on the same kind of bed); for capture (not a bench
//!    DuT) trials of the in-kernel generator (`gen g0 --xdp`) against the
//!    capture's own count of what it took in without a drop (its
//!    once-a-second report), bisection between 10 kpps and 4 Mpps to 5 %;
//!    no final trials (`--final-trial 0`): the soak runs at half the rate,
//!    a wider margin than a final trial's correction;
//!
//! No file is made (the switch's rules come on its standard input), so a
//! run ended by a signal leaves nothing the watchdog of `linerate bench`
//! does not remove (the beds and the processes in them).
//! 2. the soak at half that rate, RSS from /proc/PID/status every interval;
//! 3. growth: RSS at the end against RSS after the warm-up, and the slope
//!    of a least-squares line through the samples after the warm-up; the
//!    pipeline's final report: received = passed + drops, drops by reason,
//!    the kernel's AF_XDP rx_ring_full, the generator's longest stall.

use super::{check_prefix, last_json, run_bench, StudyReport};
use crate::report::svg::{Axis, Chart, Line, Marker, PALETTE};
use crate::report::Table;
use crate::testbed::{Testbed, TestbedConfig};
use linerate_testkit::{in_ns, Proc};
use serde_json::{json, Value};
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The pipelines, by name, and the bench DuT that runs the same one.
pub const PIPELINES: [(&str, Option<&str>); 3] = [
    ("fwd", Some("linerate-afxdp")),
    ("switch", Some("linerate-switch")),
    ("capture", None),
];

const FLOWS: &str = "priority=10,in_port=1,udp,actions=output:2
priority=10,in_port=2,actions=output:1
priority=1,actions=drop
";

/// The study's settings.
#[derive(Clone, Debug)]
pub struct SoakStudy {
    pub linerate: PathBuf,
    /// Seconds of soak per pipeline.
    pub seconds: u64,
    /// Seconds between RSS samples.
    pub interval: u64,
    /// Seconds of warm-up before growth is counted.
    pub warmup: u64,
    /// Names from [`PIPELINES`], in this order.
    pub pipelines: Vec<String>,
    /// Searches of the bench for fwd's and switch's loss-free rate.
    pub searches: usize,
    /// Seconds per trial of capture's bisection.
    pub capture_trial: u64,
    /// Test bed name prefix (the beds are PREFIX-1.., the bench's PREFIXb..).
    pub name: String,
    /// The command as the user gave it (for the report).
    pub command: String,
}

/// What one pipeline's soak gave.
struct Soaked {
    name: String,
    loss_free_pps: u64,
    rate_pps: u64,
    /// (seconds since the start of the soak, VmRSS in KiB).
    rss: Vec<(f64, u64)>,
    gen: Value,
    last: Value,
    trials: Vec<Value>,
}

/// VmRSS of process `pid` in KiB.
fn rss_kib(pid: u32) -> Result<u64, String> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(|e| format!("/proc/{pid}/status: {e}"))?;
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .ok_or(format!("/proc/{pid}/status: no VmRSS"))
}

/// What a capture's once-a-second report `line` says it took in without
/// a drop.
fn captured(line: &str) -> Result<u64, String> {
    let v: Value =
        serde_json::from_str(line).map_err(|e| format!("linerate capture: {e}: {line}"))?;
    let t = &v["totals"];
    let dropped: u64 = t["dropped"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(_, n)| n.as_u64())
        .sum();
    Ok(t["received"].as_u64().unwrap_or(0).saturating_sub(dropped))
}

/// Least-squares slope of `pts` (x seconds, y KiB) in KiB per minute.
pub fn slope_per_min(pts: &[(f64, u64)]) -> f64 {
    let n = pts.len() as f64;
    if pts.len() < 2 {
        return 0.0;
    }
    let mt = pts.iter().map(|p| p.0).sum::<f64>() / n;
    let mv = pts.iter().map(|p| p.1 as f64).sum::<f64>() / n;
    let den: f64 = pts.iter().map(|p| (p.0 - mt).powi(2)).sum();
    if den == 0.0 {
        return 0.0;
    }
    pts.iter()
        .map(|p| (p.0 - mt) * (p.1 as f64 - mv))
        .sum::<f64>()
        / den
        * 60.0
}

/// A running pipeline: the process, its stdout lines and the last one.
struct Pipeline {
    child: Proc,
    lines: std::sync::mpsc::Receiver<String>,
    last: String,
}

impl Pipeline {
    fn drain(&mut self) {
        while let Ok(l) = self.lines.try_recv() {
            self.last = l;
        }
    }

    /// Its next report line (at most `limit` away).
    fn next(&mut self, limit: Duration) -> Result<String, String> {
        let l = self
            .lines
            .recv_timeout(limit)
            .map_err(|_| format!("no report line in {} s", limit.as_secs()))?;
        self.last = l.clone();
        Ok(l)
    }

    /// SIGINT; its final report (the last line of its output).
    fn stop(mut self, what: &str) -> Result<Value, String> {
        self.drain();
        let (_, err) = self.child.finish()?;
        for l in self.lines.iter() {
            self.last = l;
        }
        last_json(what, &self.last).map_err(|e| format!("{e}; stderr: {}", err.trim()))
    }
}

impl SoakStudy {
    fn lr(&self, rest: &str) -> Vec<String> {
        let mut v = vec![self.linerate.display().to_string()];
        v.extend(rest.split(' ').map(String::from));
        v
    }

    fn check(&self) -> Result<(), String> {
        if self.interval == 0 || self.seconds < 2 * self.interval {
            return Err(format!(
                "the soak ({} s) must last at least two sample intervals ({} s each)",
                self.seconds, self.interval
            ));
        }
        if self.warmup >= self.seconds {
            return Err(format!(
                "--warmup {} s: must be shorter than the soak ({} s)",
                self.warmup, self.seconds
            ));
        }
        if self.pipelines.is_empty() {
            return Err("--pipelines: at least one of fwd, switch, capture".into());
        }
        for p in &self.pipelines {
            if !PIPELINES.iter().any(|x| x.0 == p) {
                return Err(format!(
                    "--pipelines: unknown pipeline '{p}' (known: fwd, switch, capture)"
                ));
            }
        }
        if !(1..=20).contains(&self.searches) {
            return Err(format!("--searches {}: 1 to 20", self.searches));
        }
        if !(1..=60).contains(&self.capture_trial) {
            return Err(format!("--capture-trial {}: 1 to 60 s", self.capture_trial));
        }
        check_prefix(&self.name)
    }

    /// Run it; every bed and process is removed at the end, also on
    /// errors (and by the watchdog of `linerate bench` on a signal).
    pub fn run(&self, progress: &mut dyn FnMut(&str)) -> Result<StudyReport, String> {
        self.check()?;
        let duts: Vec<&str> = PIPELINES
            .iter()
            .filter(|p| self.pipelines.iter().any(|x| x == p.0))
            .filter_map(|p| p.1)
            .collect();
        let bench = if duts.is_empty() {
            Value::Null
        } else {
            progress(&format!(
                "loss-free rates of {} (linerate bench)",
                duts.join(" and ")
            ));
            let mut args: Vec<String> = Vec::new();
            for d in &duts {
                args.extend(["--dut".to_string(), d.to_string()]);
            }
            args.extend(
                format!("--sizes 64 --final-trial 0 --repetitions {} --no-latency --frame-loss-sizes none --b2b-sizes none --no-report --no-history --name {}b", self.searches, self.name)
                    .split(' ')
                    .map(String::from),
            );
            run_bench(&self.linerate, &args, progress)?
        };
        let mut done = Vec::new();
        for (i, p) in self.pipelines.iter().enumerate() {
            progress(&format!("== {p}"));
            let bed = format!("{}-{}", self.name, i + 1);
            done.push(self.soak_one(p, &bed, &bench, progress)?);
        }
        Ok(self.report(&done, &bench))
    }

    fn start(&self, name: &str, ns: &str) -> Result<Pipeline, String> {
        let cmd = match name {
            "fwd" => self.lr("fwd afxdp:d0 afxdp:d1 --cpu 1 --json"),
            "switch" => self
                .lr("switch --port 1=afxdp:d0 --port 2=afxdp:d1 --flows /dev/stdin --cpu 1 --json"),
            _ => self.lr("capture afxdp:d0 --analyser http --json"),
        };
        let mut c = in_ns(ns, &cmd);
        c.stdin(std::process::Stdio::piped());
        let mut child = Proc::spawn(&mut c, &format!("linerate {name}"))?;
        // The switch's rules on its standard input (end of file: all).
        if let Some(mut i) = child.stdin() {
            if name == "switch" {
                i.write_all(FLOWS.as_bytes())
                    .map_err(|e| format!("linerate switch: its rules: {e}"))?;
            }
        }
        child.keep_stderr_tail();
        let lines = child.stdout_lines();
        // Ready once its first once-a-second line is out: its ports are
        // open and its loop runs.
        let first = std::cell::RefCell::new(None);
        child.wait_ready(Duration::from_secs(30), |_| {
            let l = lines.try_recv().ok();
            let got = l.is_some();
            if got {
                *first.borrow_mut() = l;
            }
            got
        })?;
        Ok(Pipeline {
            child,
            lines,
            last: first.into_inner().unwrap_or_default(),
        })
    }

    /// Run the generator in `ns` to its end; its JSON.
    fn gen(&self, ns: &str, rate: u64, secs: u64) -> Result<Value, String> {
        let (st, out, err) = Proc::spawn(
            &mut in_ns(
                ns,
                &self.lr(&format!(
                    "gen g0 --xdp --rate {rate} --duration {secs} --cpu 0 --json --quiet"
                )),
            ),
            "linerate gen g0 --xdp",
        )?
        .output()?;
        if !st.success() {
            return Err(format!("linerate gen g0 --xdp: {st}: {}", err.trim()));
        }
        last_json("linerate gen", &out)
    }

    /// Capture's loss-free rate: bisection with trials of the generator
    /// against what the capture took in (its once-a-second reports).
    fn capture_rate(
        &self,
        ns_gen: &str,
        p: &mut Pipeline,
        trials: &mut Vec<Value>,
        progress: &mut dyn FnMut(&str),
    ) -> Result<u64, String> {
        let limit = Duration::from_secs(5);
        let (mut lo, mut hi) = (10_000u64, 4_000_000u64);
        let mut passed = false;
        while hi - lo > lo / 20 {
            let r = (lo + hi) / 2;
            // Every report of the previous trial read: the count before.
            p.drain();
            let before = captured(&p.last)?;
            let g = self.gen(ns_gen, r, self.capture_trial)?;
            let sent = g["stats"]["sent"].as_u64().unwrap_or(0);
            // It has taken what it will once its count stops moving
            // between two reports: from the newest report on (the ones
            // that queued up during the trial are older than its end).
            p.drain();
            let mut now = captured(&p.last)?;
            loop {
                let next = captured(&p.next(limit)?)?;
                if next == now {
                    break;
                }
                now = next;
            }
            let taken = now.saturating_sub(before);
            let pass = sent > 0 && taken >= sent;
            progress(&format!(
                "  capture: {r} pps -> sent {sent}, taken in {taken}: {}",
                if pass { "pass" } else { "fail" }
            ));
            trials.push(json!({"rate_pps": r, "sent": sent, "taken": taken, "pass": pass}));
            if pass {
                lo = r;
                passed = true;
            } else {
                hi = r;
            }
        }
        if !passed {
            return Err(format!(
                "capture: no rate passed (the lowest tried: {hi} pps)"
            ));
        }
        Ok(lo)
    }

    fn soak_one(
        &self,
        name: &str,
        bed_name: &str,
        bench: &Value,
        progress: &mut dyn FnMut(&str),
    ) -> Result<Soaked, String> {
        let bed = Testbed::up(&TestbedConfig {
            name: Some(bed_name.to_string()),
            ipv6: false,
            ..TestbedConfig::default()
        })
        .map_err(|e| e.to_string())?;
        let (ns_gen, ns_dut) = (bed.info().ns_gen.clone(), bed.info().ns_dut.clone());
        let mut p = self.start(name, &ns_dut)?;
        let mut trials = Vec::new();
        let loss_free = match PIPELINES.iter().find(|x| x.0 == name).and_then(|x| x.1) {
            Some(dut) => bench["results"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|r| r["name"] == dut)
                .and_then(|r| r["sizes"][0]["throughput_pps"].as_f64())
                .ok_or(format!("linerate bench: no throughput of {dut}"))?
                as u64,
            None => {
                let r = self.capture_rate(&ns_gen, &mut p, &mut trials, progress)?;
                // A fresh process for the soak: its counts and memory then
                // hold only the soak, not the bisection's overload trials.
                p.stop("linerate capture")?;
                p = self.start(name, &ns_dut)?;
                r
            }
        };
        if loss_free == 0 {
            return Err(format!("{name}: no loss-free rate to soak at (0 pps)"));
        }
        let rate = (loss_free / 2).max(1);
        progress(&format!(
            "  {name}: loss-free ~{loss_free} pps; soaking at {rate} pps for {} s",
            self.seconds
        ));
        let mut gen = Proc::spawn(
            &mut in_ns(
                &ns_gen,
                &self.lr(&format!(
                    "gen g0 --xdp --rate {rate} --duration {} --cpu 0 --json --quiet",
                    self.seconds
                )),
            ),
            "linerate gen g0 --xdp",
        )?;
        let pid = p.child.pid();
        let t0 = Instant::now();
        let mut rss = Vec::new();
        let mut k = 0u64;
        loop {
            if p.child.exited() {
                return Err(format!(
                    "linerate {name} ended during the soak: {}",
                    p.child.stderr_tail()
                ));
            }
            p.drain();
            rss.push((t0.elapsed().as_secs_f64(), rss_kib(pid)?));
            if gen.exited() {
                break;
            }
            // The sampling period (not a wait for readiness): the next
            // sample at k x interval, or as soon as the generator ends.
            k += 1;
            let next = t0 + Duration::from_secs(k * self.interval);
            while Instant::now() < next && !gen.exited() {
                std::thread::sleep(Duration::from_millis(50).min(next - Instant::now()));
            }
        }
        let (st, out, err) = gen.output()?;
        if !st.success() {
            return Err(format!("linerate gen g0 --xdp: {st}: {}", err.trim()));
        }
        let gen = last_json("linerate gen", &out)?;
        let last = p.stop(&format!("linerate {name}"))?;
        drop(bed);
        Ok(Soaked {
            name: name.to_string(),
            loss_free_pps: loss_free,
            rate_pps: rate,
            rss,
            gen,
            last,
            trials,
        })
    }

    fn report(&self, done: &[Soaked], bench: &Value) -> StudyReport {
        let mib = |k: u64| format!("{:.1} MiB", k as f64 / 1024.0);
        let mut t = Table {
            title: String::new(),
            header: [
                "pipeline",
                "loss-free",
                "soak rate",
                "sent",
                "taken in",
                "RSS after warm-up",
                "RSS max",
                "RSS at the end",
                "growth",
                "slope",
            ]
            .map(String::from)
            .to_vec(),
            rows: vec![],
        };
        let mut bullets = Vec::new();
        let mut data = Vec::new();
        let mut lines = Vec::new();
        let (mut worst_growth, mut worst_slope) = (0i64, 0.0f64);
        for (i, s) in done.iter().enumerate() {
            let w = self.warmup as f64;
            let post: Vec<(f64, u64)> = s.rss.iter().copied().filter(|p| p.0 >= w).collect();
            let post = if post.is_empty() { s.rss.clone() } else { post };
            let (first, end) = (post[0].1, s.rss[s.rss.len() - 1].1);
            let max = s.rss.iter().map(|p| p.1).max().unwrap_or(0);
            let growth = end as i64 - first as i64;
            let slope = slope_per_min(&post);
            worst_growth = worst_growth.max(growth);
            worst_slope = worst_slope.max(slope);
            let sent = s.gen["stats"]["sent"].as_u64().unwrap_or(0);
            let f = &s.last;
            let (got, balanced, drops) = final_counts(f);
            let short = if sent > 0 {
                format!(
                    "{:.2} % short",
                    (sent as f64 - got as f64) / sent as f64 * 100.0
                )
            } else {
                "-".into()
            };
            t.rows.push(vec![
                s.name.clone(),
                format!("{:.3} Mpps", s.loss_free_pps as f64 / 1e6),
                format!("{:.3} Mpps", s.rate_pps as f64 / 1e6),
                sent.to_string(),
                format!("{got} ({short})"),
                mib(first),
                mib(max),
                mib(end),
                format!("{growth:+} KiB"),
                format!("{slope:+.2} KiB/min"),
            ]);
            let kern = rx_ring_full(f).map_or(String::new(), |n| {
                format!("; the kernel's AF_XDP rx_ring_full: {n}")
            });
            bullets.push(format!(
                "- {}: received = passed + drops: {balanced}; drops by reason: {}{kern}; the generator's longest stall {:.0} ms.",
                s.name,
                if drops.is_empty() { "none".to_string() } else { drops.join(", ") },
                s.gen["stats"]["late_max_ns"].as_f64().unwrap_or(0.0) / 1e6
            ));
            lines.push(Line::new(
                &s.name,
                PALETTE[i % PALETTE.len()],
                s.rss
                    .iter()
                    .map(|p| (p.0 / 60.0, p.1 as f64 / 1024.0))
                    .collect(),
                Marker::nth(i),
            ));
            data.push(json!({
                "name": s.name, "loss_free_pps": s.loss_free_pps, "rate_pps": s.rate_pps,
                "rss": s.rss.iter().map(|p| json!([p.0, p.1])).collect::<Vec<_>>(),
                "growth_kib": growth, "slope_kib_per_min": slope, "received": got,
                "balanced": balanced, "gen": s.gen, "final": s.last, "capture_trials": s.trials,
            }));
        }
        let dur = if self.seconds.is_multiple_of(60) {
            format!("{} min", self.seconds / 60)
        } else {
            format!("{} s", self.seconds)
        };
        let findings = vec![
            bullets.join("\n"),
            format!(
                "After the warm-up the resident memory grew by at most {worst_growth:+} KiB (steepest slope {worst_slope:+.2} KiB/min) over the pipelines."
            ),
            "Frames short of what was sent were dropped before the pipeline (the AF_XDP RX ring full): when the in-kernel generator falls behind its schedule (its longest stall above) it sends the frames it owes in one catch-up burst (crates/io/src/xdp/generator.rs, Pacing::InProgram) that the 2048-frame ring cannot hold.".into(),
        ];
        let chart = Chart {
            id: "soak-rss".into(),
            title: "Resident memory during the soak".into(),
            x: Axis::linear("minutes"),
            y: Axis::linear("VmRSS (MiB)"),
            lines,
        };
        StudyReport {
            name: "soak",
            title: "Soak: memory over a long run".into(),
            date: linerate_io::time::utc_rfc3339(),
            command: self.command.clone(),
            environment: super::machine(),
            intro: vec![format!(
                "Each pipeline on a fresh bed (afxdp:d0/d1, CPU 1), {dur} of 64-byte frames from the in-kernel generator at half its loss-free rate (measured first: fwd and switch by `linerate bench --final-trial 0` with {} search(es), capture by {} s trials of the generator against its own count); the resident memory (VmRSS) of the process every {} s. Growth: the last sample against the first after a {} s warm-up; slope: least squares over the samples after warm-up.",
                self.searches, self.capture_trial, self.interval, self.warmup
            )],
            tables: vec![t],
            charts: vec![(chart, "VmRSS of each pipeline's process during its soak.".into())],
            blocks: vec![],
            findings,
            data: json!({"pipelines": data, "bench": bench}),
        }
    }
}

/// From a pipeline's final report: (received, received = passed + drops,
/// drops by reason that are not 0).
pub fn final_counts(f: &Value) -> (u64, bool, Vec<String>) {
    let sum = |v: &Value| -> u64 {
        v.as_object()
            .into_iter()
            .flatten()
            .filter_map(|(_, n)| n.as_u64())
            .sum()
    };
    let named = |v: &Value| -> Vec<String> {
        v.as_object()
            .into_iter()
            .flatten()
            .filter(|(_, n)| n.as_u64().unwrap_or(0) > 0)
            .map(|(k, n)| format!("{k} {n}"))
            .collect()
    };
    if let Some(t) = f.get("totals") {
        // capture
        let got = t["received"].as_u64().unwrap_or(0);
        let bal = got == t["forwarded"].as_u64().unwrap_or(0) + sum(&t["dropped"]);
        return (got, bal, named(&t["dropped"]));
    }
    if let Some(d) = f["directions"].as_array() {
        // fwd
        let got = d.iter().filter_map(|x| x["received"].as_u64()).sum();
        let bal = d.iter().all(|x| x["balanced"] == true);
        let drops = d
            .iter()
            .filter(|x| x["dropped"].as_u64().unwrap_or(0) > 0)
            .map(|x| format!("{} {}", x["direction"].as_str().unwrap_or("?"), x["drops"]))
            .collect();
        return (got, bal, drops);
    }
    // switch
    (
        f["received"].as_u64().unwrap_or(0),
        f["balanced"] == true,
        named(&f["drops"]),
    )
}

/// The kernel's AF_XDP rx_ring_full from a final report (fwd: summed over
/// its RX sides; capture: its socket's); None: not reported (switch).
pub fn rx_ring_full(f: &Value) -> Option<u64> {
    match &f["kernel"] {
        Value::Array(sides) => Some(
            sides
                .iter()
                .filter(|s| s["side"].as_str().is_some_and(|x| x.ends_with("rx")))
                .flat_map(|s| s["counters"].as_array().into_iter().flatten())
                .filter(|c| c[0] == "rx_ring_full")
                .filter_map(|c| c[1].as_u64())
                .sum(),
        ),
        Value::Object(k) => k.get("rx_ring_full").and_then(Value::as_u64),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slope_is_kib_per_minute() {
        assert_eq!(
            slope_per_min(&[(0.0, 100), (60.0, 160), (120.0, 220)]),
            60.0
        );
        assert_eq!(slope_per_min(&[(0.0, 100), (10.0, 100)]), 0.0);
        assert_eq!(slope_per_min(&[(0.0, 100)]), 0.0);
    }

    #[test]
    fn counts_from_each_pipeline_s_final_report() {
        let fwd = json!({"directions": [
            {"balanced": true, "direction": "A->B", "dropped": 0, "drops": [], "received": 5},
            {"balanced": true, "direction": "B->A", "dropped": 2, "drops": [["no_tx", 2]], "received": 3}],
            "kernel": [{"side": "A rx", "counters": [["rx_ring_full", 4]]},
                       {"side": "A tx", "counters": [["rx_ring_full", 4]]},
                       {"side": "B rx", "counters": [["rx_ring_full", 1]]}]});
        let (got, bal, drops) = final_counts(&fwd);
        assert_eq!((got, bal, drops.len()), (8, true, 1));
        assert_eq!(rx_ring_full(&fwd), Some(5));
        let cap = json!({"kernel": {"rx_ring_full": 7},
            "totals": {"received": 10, "forwarded": 9, "dropped": {"filter": 0, "ring_full": 1}}});
        assert_eq!(
            final_counts(&cap),
            (10, true, vec!["ring_full 1".to_string()])
        );
        assert_eq!(rx_ring_full(&cap), Some(7));
        let sw = json!({"balanced": false, "received": 4, "drops": {}});
        assert_eq!(final_counts(&sw), (4, false, vec![]));
        assert_eq!(rx_ring_full(&sw), None);
    }
}
