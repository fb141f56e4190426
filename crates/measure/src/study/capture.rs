//! `linerate bench capture`: the capture-method comparison of seed 003
//! (Table 2) and seed 001 (Fig. 3) on the veth bed, with its ANOVA.
//!
//! A test bed (GRO on, so the veth has NAPI): `linerate gen g0 --xdp` on
//! CPU 0 sends into d0; each method captures on d0 with its user-space part
//! on CPU 1. d0's kernel receive work (veth NAPI, the copy into the
//! socket's ring) runs in softirq on CPU 0 right after each burst the
//! generator hands over, so the 256-frame veth ring never overflows and a
//! loss is the method's own (its ring or queue full). Per method and frame
//! size: the highest loss-free capture rate (a trial at the generator's top
//! speed, then bisection below it; zero loss = every frame the generator
//! sent was counted by the method), CPU 1's busy share and CPU 0's softirq
//! share at that rate. Then worker scaling (1 against 2 workers, bound by
//! the analysis and bound by capture) and the method x frame size ANOVA
//! (allocation of variation, `measure::experiment`).

use super::{last_json, linerate, StudyReport};
use crate::experiment::runner::{analyse, observations_table};
use crate::experiment::spec::Obs;
use crate::experiment::Transform;
use crate::experiment::{Design, Factor};
use crate::report::svg::{Axis, Chart, Line, Marker, PALETTE};
use crate::report::Table;
use crate::testbed::{Testbed, TestbedConfig};
use linerate_testkit::{has_capture_fd, Proc};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// The methods compared, by name: (description, command run in the
/// capture namespace; `{lr}` is the linerate binary).
pub const METHODS: [(&str, &str, &str); 5] = [
    (
        "afpacket-recv",
        "plain AF_PACKET, recvmmsg (`linerate capture afpacket:d0?ring=mmsg`)",
        "{lr} capture afpacket:d0?ring=mmsg --steer fanout --no-pin --json --quiet",
    ),
    (
        "tpacket-v3",
        "TPACKET_V3 mmap ring (`linerate capture afpacket:d0`)",
        "{lr} capture afpacket:d0 --steer fanout --no-pin --json --quiet",
    ),
    (
        "afxdp",
        "AF_XDP, copy mode on veth (`linerate capture afxdp:d0 --steer queues --ring-size 8192`)",
        "{lr} capture afxdp:d0 --steer queues --ring-size 8192 --no-pin --json --quiet",
    ),
    (
        "xdp-count",
        "in-kernel XDP counting (`linerate count d0 --xdp`), the kernel-module analogue",
        "{lr} count d0 --xdp --json --quiet",
    ),
    (
        "tcpdump",
        "tcpdump (libpcap, TPACKET_V3), `tcpdump -i d0 -n -s 0 -B 16384 -w /dev/null`",
        "tcpdump -i d0 -n -s 0 -B 16384 -w /dev/null",
    ),
];

const GEN_CPU: usize = 0;
const CAP_CPU: usize = 1;

/// The study's settings.
#[derive(Clone, Debug)]
pub struct CaptureStudy {
    pub linerate: PathBuf,
    /// Frame sizes on the wire with FCS.
    pub sizes: Vec<u32>,
    /// Searches per method and size (the ANOVA's replications).
    pub reps: usize,
    /// Seconds per trial.
    pub trial: f64,
    /// The search stops when the bounds are this fraction apart.
    pub resolution: f64,
    /// Trials per search after the one at top speed.
    pub max_trials: usize,
    /// Names from [`METHODS`].
    pub methods: Vec<String>,
    /// Worker scaling's analysis costs per packet (ns); empty: no scaling.
    pub scaling_costs: Vec<u64>,
    /// Where the scaling trace is written (removed afterwards).
    pub dir: PathBuf,
}

impl Default for CaptureStudy {
    fn default() -> CaptureStudy {
        CaptureStudy {
            linerate: PathBuf::from("linerate"),
            sizes: vec![64, 1024],
            reps: 2,
            trial: 2.0,
            resolution: 0.03,
            max_trials: 8,
            methods: METHODS.iter().map(|m| m.0.to_string()).collect(),
            scaling_costs: vec![5000, 20000],
            dir: std::env::temp_dir(),
        }
    }
}

/// One trial: what was offered, sent and captured, and the CPUs' shares.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Trial {
    pub method: String,
    pub frame_size: u32,
    /// None: the generator's top speed.
    pub offered_pps: Option<f64>,
    pub sent: u64,
    pub seconds: f64,
    pub sent_pps: f64,
    pub captured: u64,
    pub lost: u64,
    /// Frames g0 could not put into d0's ring (veth xdp_xmit errors).
    pub veth_ring_full: u64,
    /// CPU 1 busy (the method's user side), CPU 0 softirq (its kernel side).
    pub cpu: f64,
    pub cpu0_softirq: f64,
}

/// (busy, softirq, total) jiffies of one CPU from /proc/stat.
fn cpu_ticks(cpu: usize) -> Result<(u64, u64, u64), String> {
    let s = std::fs::read_to_string("/proc/stat").map_err(|e| format!("/proc/stat: {e}"))?;
    let tag = format!("cpu{cpu} ");
    let l = s
        .lines()
        .find(|l| l.starts_with(&tag))
        .ok_or(format!("no cpu{cpu} in /proc/stat"))?;
    let v: Vec<u64> = l
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    if v.len() < 7 {
        return Err(format!("/proc/stat: short line: {l}"));
    }
    let total: u64 = v.iter().sum();
    Ok((total - v[3] - v[4], v[6], total))
}

fn share(a: (u64, u64, u64), b: (u64, u64, u64), busy: bool) -> f64 {
    let d = if busy { b.0 - a.0 } else { b.1 - a.1 };
    d as f64 / (b.2 - a.2).max(1) as f64
}

fn in_ns(ns: &str, cpus: &str, cmd: &[String]) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns, "taskset", "-c", cpus])
        .args(cmd);
    c
}

struct Bed<'a> {
    study: &'a CaptureStudy,
    ns_gen: String,
    ns_cap: String,
}

impl Bed<'_> {
    /// Frames g0 could not put into d0's receive ring, over its queues.
    fn xmit_errors(&self) -> u64 {
        Command::new("ip")
            .args(["netns", "exec", &self.ns_gen, "ethtool", "-S", "g0"])
            .output()
            .map(|o| {
                // Lines "     rx_queue_0_xdp_xmit_errors: 12", one per queue.
                String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .filter_map(|l| l.trim().split_once("_xdp_xmit_errors:"))
                    .filter_map(|(_, n)| n.trim().parse::<u64>().ok())
                    .sum()
            })
            .unwrap_or(0)
    }

    fn method_cmd(&self, method: &str) -> Result<Vec<String>, String> {
        let m = METHODS
            .iter()
            .find(|m| m.0 == method)
            .ok_or(format!("unknown method '{method}'"))?;
        let lr = self.study.linerate.display().to_string();
        Ok(m.2.split(' ').map(|w| w.replace("{lr}", &lr)).collect())
    }

    /// Offer `rate` pps (None: the generator's top speed) for a trial.
    fn trial(
        &self,
        method: &str,
        size: u32,
        rate: Option<f64>,
        cmd: Option<Vec<String>>,
        cpus: &str,
    ) -> Result<Trial, String> {
        let cmd = match cmd {
            Some(c) => c,
            None => self.method_cmd(method)?,
        };
        // Ready once it holds its socket or XDP link; then a moment for the
        // ring set-up that follows (bind, mmap, attach). Dropped on an
        // error: killed and reaped.
        let mut cap = Proc::spawn(&mut in_ns(&self.ns_cap, cpus, &cmd), method)?;
        cap.wait_ready(Duration::from_secs(10), has_capture_fd)?;
        std::thread::sleep(Duration::from_millis(300));
        let s = self.study;
        let mut gen = vec![
            s.linerate.display().to_string(),
            "gen".into(),
            "g0".into(),
            "--xdp".into(),
            "--size".into(),
            (size - 4).to_string(),
            "--json".into(),
        ];
        match rate {
            None => gen.extend(["--duration".into(), s.trial.to_string()]),
            Some(r) => gen.extend([
                "--rate".into(),
                format!("{}pps", r as u64),
                "--count".into(),
                ((r * s.trial) as u64).to_string(),
            ]),
        }
        let (x0, b0, k0) = (self.xmit_errors(), cpu_ticks(CAP_CPU)?, cpu_ticks(GEN_CPU)?);
        let g = in_ns(&self.ns_gen, &GEN_CPU.to_string(), &gen)
            .output()
            .map_err(|e| format!("generator: {e}"))?;
        let (b1, k1, x1) = (cpu_ticks(CAP_CPU)?, cpu_ticks(GEN_CPU)?, self.xmit_errors());
        if !g.status.success() {
            return Err(format!(
                "generator: {}",
                String::from_utf8_lossy(&g.stderr).trim()
            ));
        }
        // Let the method drain its queues, then end it (SIGINT: its final
        // report); a method that does not end in 20 s is killed.
        std::thread::sleep(Duration::from_millis(500));
        let (out, err) = cap.finish()?;
        let st = &last_json("generator", &String::from_utf8_lossy(&g.stdout))?["stats"];
        let sent = st["sent"].as_u64().unwrap_or(0);
        let seconds = st["duration_ns"].as_f64().unwrap_or(0.0) / 1e9;
        let captured = captured(method, &out, &err)?;
        Ok(Trial {
            method: method.to_string(),
            frame_size: size,
            offered_pps: rate,
            sent,
            seconds,
            sent_pps: sent as f64 / seconds.max(1e-9),
            captured,
            lost: sent.saturating_sub(captured),
            veth_ring_full: x1.saturating_sub(x0),
            cpu: share(b0, b1, true),
            cpu0_softirq: share(k0, k1, false),
        })
    }

    /// The highest loss-free rate: a trial at top speed, then bisection
    /// below it. Returns the best trial (None: no rate passed) and whether
    /// the generator was the limit.
    fn search(
        &self,
        method: &str,
        size: u32,
        trials: &mut Vec<Trial>,
        progress: &mut dyn FnMut(&str),
    ) -> Result<(Option<Trial>, bool), String> {
        let s = self.study;
        let t = self.trial(method, size, None, None, &CAP_CPU.to_string())?;
        progress(&format!(
            "  {method} {size} B top speed: sent {:.3} Mpps, lost {}",
            t.sent_pps / 1e6,
            t.lost
        ));
        trials.push(t.clone());
        if t.lost == 0 {
            return Ok((Some(t), true));
        }
        let (mut lo, mut hi, mut best) = (0.0f64, t.sent_pps, None::<Trial>);
        let mut guess = Some(0.95 * t.captured as f64 / t.seconds.max(1e-9));
        for _ in 0..s.max_trials {
            if best.is_some() && hi - lo <= s.resolution * hi {
                break;
            }
            let rate = match guess.take() {
                Some(g) if lo < g && g < hi => g,
                _ => (lo + hi) / 2.0,
            };
            let t = self.trial(method, size, Some(rate), None, &CAP_CPU.to_string())?;
            let ok = t.lost == 0;
            progress(&format!(
                "  {method} {size} B {:.3} Mpps: lost {} (veth ring full {}), CPU 1 {:.0} %, CPU 0 softirq {:.0} % -> {}",
                rate / 1e6,
                t.lost,
                t.veth_ring_full,
                100.0 * t.cpu,
                100.0 * t.cpu0_softirq,
                if ok { "pass" } else { "fail" }
            ));
            trials.push(t.clone());
            if ok {
                lo = rate;
                best = Some(t);
            } else {
                hi = rate;
                if best.is_none() && lo == 0.0 {
                    guess = Some(0.7 * rate);
                }
            }
        }
        Ok((best, false))
    }
}

/// Frames a method counted: tcpdump's "N packets captured", the XDP
/// counter's packets, the capture's received total.
fn captured(method: &str, out: &str, err: &str) -> Result<u64, String> {
    if method == "tcpdump" {
        return err
            .lines()
            .find_map(|l| {
                let l = l.trim();
                l.strip_suffix(" packets captured")
                    .or_else(|| l.strip_suffix(" packet captured"))
                    .and_then(|n| n.trim().parse().ok())
            })
            .ok_or(format!("tcpdump: no count in: {}", err.trim()));
    }
    let v = last_json(method, out).map_err(|e| format!("{e}; stderr: {}", err.trim()))?;
    Ok(if method == "xdp-count" {
        v["packets"].as_u64()
    } else {
        v["totals"]["received"].as_u64()
    }
    .unwrap_or(0))
}

/// The searches' results per (method, size): (pps, best trial, generator limit).
type Results = Vec<((String, u32), Vec<(f64, Option<Trial>, bool)>)>;

impl CaptureStudy {
    /// Run it on a bed of its own (removed afterwards, also on errors).
    pub fn run(&self, progress: &mut dyn FnMut(&str)) -> Result<StudyReport, String> {
        for m in &self.methods {
            if !METHODS.iter().any(|x| x.0 == m) {
                let known: Vec<&str> = METHODS.iter().map(|x| x.0).collect();
                return Err(format!(
                    "--methods: unknown method '{m}' (known: {})",
                    known.join(", ")
                ));
            }
        }
        if self.sizes.is_empty() || self.methods.is_empty() || self.reps == 0 {
            return Err("give at least one frame size, one method and one repetition".into());
        }
        if let Some(s) = self.sizes.iter().find(|s| !(64..=1518).contains(*s)) {
            return Err(format!("--sizes: {s} is not a frame size from 64 to 1518"));
        }
        if self.methods.iter().any(|m| m == "tcpdump")
            && Command::new("tcpdump").arg("--version").output().is_err()
        {
            return Err(
                "method tcpdump: command 'tcpdump' not found (scripts/setup.sh installs it)".into(),
            );
        }
        progress("building the test bed (GRO on: the veth has NAPI)");
        let tb = Testbed::up(&TestbedConfig {
            gro: Some(true),
            ..TestbedConfig::default()
        })
        .map_err(|e| e.to_string())?;
        let bed = Bed {
            study: self,
            ns_gen: tb.info().ns_gen.clone(),
            ns_cap: tb.info().ns_dut.clone(),
        };
        let mut trials = Vec::new();
        let mut results: Results = Vec::new();
        let mut obs = Vec::new();
        for rep in 0..self.reps {
            for (si, &size) in self.sizes.iter().enumerate() {
                for (mi, m) in self.methods.iter().enumerate() {
                    progress(&format!(
                        "== {m}, {size}-byte frames, repetition {}/{}",
                        rep + 1,
                        self.reps
                    ));
                    let (best, lim) = bed.search(m, size, &mut trials, progress)?;
                    let pps = best.as_ref().map_or(0.0, |b| b.sent_pps);
                    let key = (m.clone(), size);
                    match results.iter_mut().find(|r| r.0 == key) {
                        Some(r) => r.1.push((pps, best, lim)),
                        None => results.push((key, vec![(pps, best, lim)])),
                    }
                    obs.push(Obs {
                        run: obs.len() + 1,
                        levels: vec![mi, si],
                        replication: rep + 1,
                        y: pps / 1e6,
                    });
                }
            }
        }
        let scaling = if self.scaling_costs.is_empty() {
            None
        } else {
            progress("== worker scaling");
            Some(self.scaling(&bed, progress)?)
        };
        drop(tb);
        Ok(self.report(&results, scaling.as_ref(), &obs, &trials))
    }

    /// 1 against 2 workers: (a) bound by the analysis (the http analyser
    /// plus a cost per packet), a trace replayed in-process at top speed;
    /// (b) bound by capture (no analyser), the veth at the generator's top
    /// speed, fanout steering.
    fn scaling(&self, bed: &Bed<'_>, progress: &mut dyn FnMut(&str)) -> Result<Value, String> {
        let lr = &self.linerate;
        let trace = self
            .dir
            .join(format!("linerate-scaling-{}.pcapng", std::process::id()));
        let t = trace.display().to_string();
        let r = (|| -> Result<Value, String> {
            linerate(
                lr,
                &[
                    "trace",
                    "http",
                    &t,
                    "--connections",
                    "300",
                    "--min-size",
                    "100000",
                    "--seed",
                    "2",
                    "--json",
                ],
            )?;
            let mut rows = Vec::new();
            for &cost in &self.scaling_costs {
                let mut by_n = Vec::new();
                for n in [1usize, 2] {
                    let (mut rates, mut busiest) = (Vec::new(), 0.0);
                    for _ in 0..self.reps {
                        let src = format!("pcap:{t}");
                        let v = last_json(
                            "capture",
                            &linerate(
                                lr,
                                &[
                                    "capture",
                                    &src,
                                    "--workers",
                                    &n.to_string(),
                                    "--analyser",
                                    "http",
                                    "--cost-ns",
                                    &cost.to_string(),
                                    "--ted",
                                    "off",
                                    "--json",
                                    "--quiet",
                                ],
                            )?,
                        )?;
                        rates.push(
                            v["totals"]["forwarded"].as_f64().unwrap_or(0.0)
                                / v["t"].as_f64().unwrap_or(1.0).max(1e-9),
                        );
                        let fw: Vec<f64> = v["workers"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .map(|w| w["forwarded"].as_f64().unwrap_or(0.0))
                            .collect();
                        busiest = fw.iter().copied().fold(0.0, f64::max)
                            / fw.iter().sum::<f64>().max(1.0);
                    }
                    progress(&format!(
                        "  scaling (a) {cost} ns/packet, {n} worker(s): {:.1} kpps",
                        mean(&rates) / 1e3
                    ));
                    by_n.push(json!({"workers": n, "pps": rates, "busiest_share": busiest}));
                }
                rows.push(json!({"bound": "analysis", "cost_ns": cost, "runs": by_n}));
            }
            let mut by_n = Vec::new();
            for n in [1usize, 2] {
                let mut rates = Vec::new();
                for _ in 0..self.reps {
                    let cmd: Vec<String> = format!(
                        "{} capture afpacket:d0 --steer fanout --workers {n} --json --quiet",
                        lr.display()
                    )
                    .split(' ')
                    .map(String::from)
                    .collect();
                    let cpus = if n == 2 {
                        "0-1".to_string()
                    } else {
                        CAP_CPU.to_string()
                    };
                    let tr = bed.trial(&format!("fanout-{n}"), 64, None, Some(cmd), &cpus)?;
                    rates.push(tr.captured as f64 / tr.seconds.max(1e-9));
                }
                progress(&format!(
                    "  scaling (b) {n} worker(s): {:.3} Mpps",
                    mean(&rates) / 1e6
                ));
                by_n.push(json!({"workers": n, "pps": rates}));
            }
            rows.push(json!({"bound": "capture", "runs": by_n}));
            Ok(Value::Array(rows))
        })();
        let _ = std::fs::remove_file(&trace);
        r
    }

    fn report(
        &self,
        results: &Results,
        scaling: Option<&Value>,
        obs: &[Obs],
        trials: &[Trial],
    ) -> StudyReport {
        let get = |m: &str, s: u32| {
            results
                .iter()
                .find(|r| r.0 .0 == m && r.0 .1 == s)
                .map(|r| &r.1)
        };
        let avg = |m: &str, s: u32| {
            get(m, s).map_or(0.0, |v| mean(&v.iter().map(|x| x.0).collect::<Vec<_>>()))
        };
        let size0 = self.sizes[0];
        let base = avg("tcpdump", size0);
        let desc = |m: &str| {
            METHODS
                .iter()
                .find(|x| x.0 == m)
                .map_or(m, |x| x.1)
                .to_string()
        };
        let mut main = Table {
            title: format!("Highest loss-free capture rate, {size0}-byte frames"),
            header: [
                "method",
                "Mpps (runs)",
                "Gbit/s",
                "CPU 1 busy (user side)",
                "CPU 0 softirq (kernel side)",
                "/ tcpdump",
            ]
            .map(String::from)
            .to_vec(),
            rows: vec![],
        };
        for m in &self.methods {
            let v = get(m, size0).cloned().unwrap_or_default();
            let runs: Vec<String> = v.iter().map(|x| format!("{:.3}", x.0 / 1e6)).collect();
            let cpu: Vec<f64> = v
                .iter()
                .filter_map(|x| x.1.as_ref().map(|b| b.cpu))
                .collect();
            let sirq: Vec<f64> = v
                .iter()
                .filter_map(|x| x.1.as_ref().map(|b| b.cpu0_softirq))
                .collect();
            let lim = v.iter().filter(|x| x.2).count();
            let a = avg(m, size0);
            main.rows.push(vec![
                desc(m),
                format!(
                    "**{:.3}**{} ({})",
                    a / 1e6,
                    if lim > 0 {
                        format!(" (generator limit in {lim} of {})", v.len())
                    } else {
                        String::new()
                    },
                    runs.join(", ")
                ),
                format!("{:.2}", a * f64::from(size0) * 8.0 / 1e9),
                format!("{:.0} %", 100.0 * mean(&cpu)),
                format!("{:.0} %", 100.0 * mean(&sirq)),
                if base > 0.0 {
                    format!("{:.1}x", a / base)
                } else {
                    "-".into()
                },
            ]);
        }
        let mut tables = vec![main];
        if self.sizes.len() > 1 {
            let mut header = vec!["method".to_string()];
            header.extend(self.sizes.iter().map(|s| format!("{s} B")));
            tables.push(Table {
                title: "Mpps by frame size (mean of the searches)".into(),
                header,
                rows: self
                    .methods
                    .iter()
                    .map(|m| {
                        let mut r = vec![m.clone()];
                        r.extend(
                            self.sizes
                                .iter()
                                .map(|&s| format!("{:.3}", avg(m, s) / 1e6)),
                        );
                        r
                    })
                    .collect(),
            });
        }
        if let Some(sc) = scaling {
            let mut t = Table {
                title: "Two workers against one (mean of the runs)".into(),
                header: [
                    "workers bound by",
                    "1 worker",
                    "2 workers",
                    "2 / 1",
                    "bound by the flow split (busiest worker's share)",
                ]
                .map(String::from)
                .to_vec(),
                rows: vec![],
            };
            for row in sc.as_array().into_iter().flatten() {
                let runs = row["runs"].as_array().cloned().unwrap_or_default();
                let pps = |i: usize| {
                    mean(
                        &runs
                            .get(i)
                            .and_then(|r| r["pps"].as_array())
                            .into_iter()
                            .flatten()
                            .filter_map(Value::as_f64)
                            .collect::<Vec<_>>(),
                    )
                };
                let (one, two) = (pps(0), pps(1));
                let analysis = row["bound"] == "analysis";
                let unit = |x: f64| {
                    if analysis {
                        format!("{:.1} kpps", x / 1e3)
                    } else {
                        format!("{:.3} Mpps", x / 1e6)
                    }
                };
                let b = runs
                    .get(1)
                    .and_then(|r| r["busiest_share"].as_f64())
                    .unwrap_or(0.0);
                t.rows.push(vec![
                    if analysis {
                        format!("analysis: http analyser + {} µs/packet, trace replayed in-process at top speed (`pcap:`), dispatcher", row["cost_ns"].as_f64().unwrap_or(0.0) / 1e3)
                    } else {
                        "capture: no analyser, veth at the generator's top speed, fanout".into()
                    },
                    unit(one),
                    unit(two),
                    format!("**{:.2}x**", two / one.max(1e-9)),
                    if analysis && b > 0.0 { format!("{:.2}x ({:.1} %)", 1.0 / b, 100.0 * b) } else { "-".into() },
                ]);
            }
            tables.push(t);
        }
        // The ANOVA over the factors with two levels or more.
        let mut factors = Vec::new();
        let mut keep = Vec::new();
        if self.methods.len() > 1 {
            factors.push(Factor::new(
                "method",
                &self.methods.iter().map(String::as_str).collect::<Vec<_>>(),
            ));
            keep.push(0);
        }
        let sizes: Vec<String> = self.sizes.iter().map(u32::to_string).collect();
        if self.sizes.len() > 1 {
            factors.push(Factor::new(
                "frame_size",
                &sizes.iter().map(String::as_str).collect::<Vec<_>>(),
            ));
            keep.push(1);
        }
        let mut blocks = Vec::new();
        let mut findings = Vec::new();
        if factors.is_empty() {
            findings.push("No allocation of variation: one method at one frame size has no factor to allocate it to.".into());
        } else {
            let o: Vec<Obs> = obs
                .iter()
                .map(|x| Obs {
                    levels: keep.iter().map(|&i| x.levels[i]).collect(),
                    ..x.clone()
                })
                .collect();
            match Design::new(factors, self.reps)
                .map_err(|e| e.to_string())
                .and_then(|d| analyse(&d, &o, Transform::None).map(|a| (d, a)))
            {
                Ok((d, a)) => blocks.push((
                    "Allocation of variation (ANOVA) of the highest loss-free rate (Mpps)".into(),
                    format!("{}\n{a}", observations_table(&d, "capture_mpps", &o)),
                )),
                Err(e) => findings.push(format!("No allocation of variation: {e}.")),
            }
        }
        let lines: Vec<Line> = self
            .methods
            .iter()
            .enumerate()
            .map(|(i, m)| {
                Line::new(
                    m,
                    PALETTE[i % PALETTE.len()],
                    self.sizes
                        .iter()
                        .map(|&s| (f64::from(s), avg(m, s) / 1e6))
                        .collect(),
                    Marker::nth(i),
                )
            })
            .collect();
        let chart = Chart {
            id: "capture-rate".into(),
            title: "Highest loss-free capture rate".into(),
            x: Axis::linear("frame size (bytes)"),
            y: Axis::log("Mpps"),
            lines,
        };
        StudyReport {
            name: "capture",
            title: "Capture-method comparison (seed 003 Table 2, seed 001 Fig. 3)".into(),
            date: linerate_io::time::utc_rfc3339(),
            command: format!(
                "linerate bench capture --sizes {} --repetitions {} --trial {} --methods {}{}",
                sizes.join(","),
                self.reps,
                self.trial,
                self.methods.join(","),
                if self.scaling_costs.is_empty() { " --no-scaling".to_string() } else { String::new() }
            ),
            environment: vec![
                ("CPU".into(), linerate_io::host::cpu_model()),
                ("kernel".into(), linerate_io::host::kernel_release()),
            ],
            intro: vec![format!(
                "The veth bed: `linerate gen g0 --xdp` (CPU 0) sends {}-byte frames into d0; each method captures on d0, its user-space part alone on CPU 1. d0's kernel receive work (veth NAPI, the copy into the socket's ring) runs in softirq on CPU 0 with the generator: it lowers the generator's top speed and is the CPU 0 softirq column. A trial offers a rate for {} s; a method passes if it counted every frame the generator sent. The search starts with a trial at the generator's top speed and bisects below it to {} %; where a method loses nothing at top speed, its figure is a lower bound (\"generator limit\"). Mean of {} searches.",
                sizes.join("- and "),
                self.trial,
                100.0 * self.resolution,
                self.reps
            )],
            tables,
            charts: vec![(chart, "The highest loss-free capture rate of each method against the frame size (mean of the searches; log scale).".into())],
            blocks,
            findings,
            data: json!({"trials": trials, "scaling": scaling}),
        }
    }
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_read_from_each_method_s_report() {
        assert_eq!(
            captured(
                "tcpdump",
                "",
                "listening on d0\n1234 packets captured\n1300 packets received by filter\n"
            ),
            Ok(1234)
        );
        assert_eq!(captured("tcpdump", "", "1 packet captured\n"), Ok(1));
        assert!(captured("tcpdump", "", "tcpdump: d0: No such device").is_err());
        assert_eq!(captured("xdp-count", "{\"packets\": 7}\n", ""), Ok(7));
        assert_eq!(
            captured(
                "tpacket-v3",
                "{\"t\":1}\n{\"totals\": {\"received\": 9}}\n",
                ""
            ),
            Ok(9)
        );
        assert!(captured("afxdp", "", "error").is_err());
    }

    #[test]
    fn cpu_shares_from_tick_deltas() {
        assert_eq!(share((10, 5, 100), (60, 30, 200), true), 0.5);
        assert_eq!(share((10, 5, 100), (60, 30, 200), false), 0.25);
        assert!(cpu_ticks(0).is_ok());
    }
}
