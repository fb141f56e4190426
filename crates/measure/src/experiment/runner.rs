//! Running a full factorial experiment over the bench's parameters: the
//! experiment file and its data CSV, the randomised run order, the
//! [`Runner`] that measures one run ([`BenchRunner`]: the bench at
//! overload or its RFC 2544 search), and the analysis and tables of the
//! observations. `linerate experiment` parses its options, calls these and
//! prints.

use super::spec::{self, BenchSpec, Experiment, Obs};
use super::{anova, Anova, AnovaOptions, Design, Observations, Transform};
use crate::bench::dut::{self, DutEnv};
use crate::bench::{self, BenchConfig};
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Highest `flows`: the generator counts UDP source ports up from 1024.
const MAX_FLOWS: u32 = 65536 - 1024;

/// The factors the bench runner understands.
const BENCH_FACTORS: [&str; 5] = ["dut", "frame_size", "flows", "threaded_napi", "rps"];

/// A level of an on/off factor.
pub fn on_off(factor: &str, level: &str) -> Result<bool, String> {
    match level {
        "on" | "true" | "1" | "yes" => Ok(true),
        "off" | "false" | "0" | "no" => Ok(false),
        _ => Err(format!("{factor} '{level}': use on or off")),
    }
}

/// The responses the bench runner measures.
const BENCH_RESPONSES: [&str; 4] = [
    "forwarding_mpps",
    "throughput_mpps",
    "latency_p50_us",
    "latency_p99_us",
];

/// The bench's checks of [`BenchSpec`] (they need the CLI's list of DuTs).
trait BenchCheck {
    fn apply(&mut self, factor: &str, level: &str) -> Result<(), String>;
    fn validate(&self) -> Result<(), String>;
}

impl BenchCheck for BenchSpec {
    /// Sets one factor to one level, or says why it cannot.
    fn apply(&mut self, factor: &str, level: &str) -> Result<(), String> {
        match factor {
            "dut" => {
                let known: Vec<String> = crate::bench::dut::builtin().iter().map(|d| d.name()).collect();
                if !known.iter().any(|k| k == level) {
                    return Err(format!(
                        "dut '{level}': unknown device under test (known: {})",
                        known.join(", ")
                    ));
                }
                self.dut = level.to_string();
            }
            "frame_size" => {
                self.frame_size = match level.parse::<usize>() {
                    Ok(n) if (64..=1518).contains(&n) => n,
                    _ => return Err(format!("frame_size '{level}': must be a whole number of bytes in 64..=1518")),
                };
            }
            "flows" => {
                self.flows = match level.parse::<u32>() {
                    Ok(n) if (1..=MAX_FLOWS).contains(&n) => n,
                    _ => return Err(format!("flows '{level}': must be a whole number in 1..={MAX_FLOWS}")),
                };
            }
            "threaded_napi" => self.threaded_napi = on_off(factor, level)?,
            "rps" => self.rps = on_off(factor, level)?,
            _ => return Err(format!(
                "unknown factor '{factor}': the bench varies {} (use [data] to analyse other factors)",
                BENCH_FACTORS.join(", ")
            )),
        }
        Ok(())
    }

    /// Checks the defaults themselves.
    fn validate(&self) -> Result<(), String> {
        if !(self.duration.is_finite() && self.duration > 0.0 && self.duration <= 3600.0) {
            return Err(format!(
                "bench.duration = {}: must be a number of seconds in (0, 3600]",
                self.duration
            ));
        }
        if !(self.warmup.is_finite() && self.warmup >= 0.0 && self.warmup <= 3600.0) {
            return Err(format!(
                "bench.warmup = {}: must be a number of seconds in [0, 3600]",
                self.warmup
            ));
        }
        let mut probe = self.clone();
        probe
            .apply("dut", &self.dut)
            .map_err(|e| format!("bench.{e}"))?;
        probe
            .apply("frame_size", &self.frame_size.to_string())
            .map_err(|e| format!("bench.{e}"))?;
        probe
            .apply("flows", &self.flows.to_string())
            .map_err(|e| format!("bench.{e}"))?;
        Ok(())
    }
}

/// Reads and checks the experiment file (not yet the bench factors: data
/// mode accepts any factor names); `[data]` is resolved against the file's
/// directory.
pub fn load(path: &Path) -> Result<Experiment, String> {
    let name = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| format!("experiment '{name}': {e}"))?;
    let mut x = spec::parse(&text).map_err(|m| format!("experiment '{name}': {m}"))?;
    x.data = x.data.map(|d| {
        path.parent()
            .map(|p| p.join(&d))
            .unwrap_or_else(|| d.clone())
    });
    Ok(x)
}

/// ExperimentError's Display starts with "experiment: ".
pub fn strip(s: &str) -> String {
    s.strip_prefix("experiment: ").unwrap_or(s).to_string()
}

// ------------------------------------------------------------ observations

/// Reads the observations of `design` from a CSV file; every cell must have
/// exactly `replications` values.
pub fn read_csv(path: &Path, design: &Design, response: &str) -> Result<Vec<Obs>, String> {
    let name = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| format!("data '{name}': {e}"))?;
    spec::parse_data(&text, design, response).map_err(|e| match e.line {
        Some(l) => format!("data '{name}' line {l}: {}", e.msg),
        None => format!("data '{name}': {}", e.msg),
    })
}

pub fn write_csv(path: &Path, design: &Design, response: &str, obs: &[Obs]) -> Result<(), String> {
    linerate_io::file::write_whole(path, spec::data_csv(design, response, obs).as_bytes())
        .map_err(|e| format!("--csv {e}"))
}

// ------------------------------------------------------------------ runner

/// Measures the response of one run of the experiment.
///
/// `levels` are (factor, level) pairs in design order. `stop` is the user's
/// Ctrl-C: a runner returns soon after it is set (an error is fine, the
/// caller checks the flag). A new response (e.g. an RFC 2544 throughput
/// search) is a new implementation.
pub trait Runner {
    fn run(&mut self, levels: &[(String, String)], stop: &Arc<AtomicBool>) -> Result<f64, String>;
    /// Unit of the response for the progress lines.
    fn unit(&self) -> &str {
        ""
    }
}

/// The bench at overload: one DuT on a fresh test bed per run, response
/// `forwarding_mpps` = forwarded packets per second counted at the sink
/// over the measurement window / 1e6.
/// `throughput_mpps`: the RFC 2544 throughput search (zero loss, trials of
/// `duration` s, 1 % resolution) at the run's frame size;
/// `latency_p50_us` / `latency_p99_us`: one-way latency at that throughput.
pub struct BenchRunner {
    base: BenchSpec,
    env: DutEnv,
    response: String,
}

impl BenchRunner {
    /// Checks the response, every factor and every level before anything runs.
    pub fn new(base: &BenchSpec, design: &Design, response: &str) -> Result<BenchRunner, String> {
        if !BENCH_RESPONSES.contains(&response) {
            return Err(format!(
                "response '{response}': the bench measures {} (use [data] or --data to analyse other responses)",
                BENCH_RESPONSES.join(", ")
            ));
        }
        base.validate()?;
        for f in &design.factors {
            for l in &f.levels {
                base.clone().apply(&f.name, l)?;
            }
        }
        let exe =
            std::env::current_exe().map_err(|e| format!("locating the linerate binary: {e}"))?;
        Ok(BenchRunner {
            base: base.clone(),
            response: response.to_string(),
            env: DutEnv {
                linerate: exe.clone(),
                peers_dir: dut::find_peers_dir(&exe),
                cpu: base.dut_cpu,
            },
        })
    }
}

impl Runner for BenchRunner {
    fn run(&mut self, levels: &[(String, String)], stop: &Arc<AtomicBool>) -> Result<f64, String> {
        let mut s = self.base.clone();
        for (f, l) in levels {
            s.apply(f, l)?;
        }
        let mut duts: Vec<_> = crate::bench::dut::builtin()
            .into_iter()
            .filter(|d| d.name() == s.dut)
            .collect();
        if self.response != "forwarding_mpps" {
            return self.run_rfc2544(&s, &mut duts, stop);
        }
        let cfg = BenchConfig {
            frame_len: s.frame_size - 4,
            warmup: Duration::from_secs_f64(s.warmup),
            duration: Duration::from_secs_f64(s.duration),
            repeat: 1,
            gen_cpu: s.gen_cpu,
            dut_cpu: s.dut_cpu,
            flows: s.flows,
            threaded_napi: s.threaded_napi,
            rps: s.rps,
            bed_prefix: None,
            env: DutEnv {
                cpu: s.dut_cpu,
                ..self.env.clone()
            },
            max_rate: None,
        };
        let results = bench::run(&cfg, &mut duts, stop, &mut |_, _| {});
        let r = results
            .into_iter()
            .next()
            .ok_or_else(|| "interrupted".to_string())?;
        if r.status != "ok" {
            return Err(format!("{}: {}", r.name, r.status));
        }
        let pps = r
            .median_pps
            .ok_or_else(|| format!("{}: no trial measured", r.name))?;
        Ok(pps / 1e6)
    }
    fn unit(&self) -> &str {
        if self.response.starts_with("latency") {
            "us"
        } else {
            "Mpps"
        }
    }
}

impl BenchRunner {
    fn run_rfc2544(
        &self,
        s: &BenchSpec,
        duts: &mut [Box<dyn dut::Dut>],
        stop: &Arc<AtomicBool>,
    ) -> Result<f64, String> {
        use crate::bench::rfc2544::Rfc2544Config;
        let latency = self.response.starts_with("latency");
        let cfg = bench::Rfc2544Bench {
            procedures: Rfc2544Config {
                sizes: vec![s.frame_size as u32],
                trial: Duration::from_secs_f64(s.duration),
                latency,
                frame_loss_sizes: vec![],
                back_to_back_sizes: vec![],
                ..Rfc2544Config::default()
            },
            gen_cpu: s.gen_cpu,
            dut_cpu: s.dut_cpu,
            flows: s.flows,
            ts_every: 16,
            threaded_napi: s.threaded_napi,
            rps: s.rps,
            sink_cpu: None,
            bed_name: None,
            env: DutEnv {
                cpu: s.dut_cpu,
                ..self.env.clone()
            },
            common_load: bench::CommonLoad::Off,
            directions: vec![bench::Direction::Uni],
            reverse_gen_cpu: None,
            on_trial: None,
        };
        let r = bench::run_rfc2544(&cfg, duts, stop, &mut |_, _, _| {})
            .into_iter()
            .next()
            .ok_or_else(|| "interrupted".to_string())?;
        if r.status != "ok" {
            return Err(format!("{}: {}", r.name, r.status));
        }
        let size = r
            .sizes
            .first()
            .ok_or_else(|| format!("{}: nothing measured", r.name))?;
        match self.response.as_str() {
            "throughput_mpps" => size
                .throughput_pps
                .map(|v| v / 1e6)
                .ok_or_else(|| format!("{}: no throughput found", r.name)),
            _ => {
                let l = size
                    .latency()
                    .filter(|l| l.samples > 0)
                    .ok_or_else(|| format!("{}: no latency samples", r.name))?;
                Ok(if self.response == "latency_p50_us" {
                    l.p50_ns
                } else {
                    l.p99_ns
                } / 1e3)
            }
        }
    }
}

/// Every (cell, replication) of the design in a random order
/// (Fisher-Yates with `seed`). Replication numbers increase with run order
/// within a cell.
pub fn run_order(design: &Design, seed: u64) -> Vec<(usize, usize)> {
    let r = design.replications;
    let mut cells: Vec<usize> = (0..design.cells())
        .flat_map(|c| std::iter::repeat_n(c, r))
        .collect();
    let mut rng = linerate_io::rng::SplitMix64(seed);
    for i in (1..cells.len()).rev() {
        // Uniform in 0..=i by multiply-shift (bias below 2^-40 for a design's size).
        let j = ((rng.next_u64() as u128 * (i as u128 + 1)) >> 64) as usize;
        cells.swap(i, j);
    }
    let mut seen = vec![0usize; design.cells()];
    cells
        .into_iter()
        .map(|c| {
            seen[c] += 1;
            (c, seen[c])
        })
        .collect()
}

pub fn named_levels(design: &Design, levels: &[usize]) -> Vec<(String, String)> {
    design
        .factors
        .iter()
        .zip(levels)
        .map(|(f, &l)| (f.name.clone(), f.levels[l].clone()))
        .collect()
}

pub fn describe(levels: &[(String, String)]) -> String {
    levels
        .iter()
        .map(|(f, l)| format!("{f}={l}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// How the runs ended.
pub enum Outcome {
    Complete,
    Interrupted,
    /// A run failed: the message names the run.
    Failed(String),
}

/// Runs the plan in order; a progress line per run on stderr.
pub fn measure(
    design: &Design,
    plan: &[(usize, usize)],
    runner: &mut dyn Runner,
    stop: &Arc<AtomicBool>,
) -> (Vec<Obs>, Outcome) {
    let n = plan.len();
    let mut out = Vec::with_capacity(n);
    for (i, &(cell, replication)) in plan.iter().enumerate() {
        if stop.load(Ordering::SeqCst) {
            return (out, Outcome::Interrupted);
        }
        let levels = design.levels_of(cell);
        let named = named_levels(design, &levels);
        let what = describe(&named);
        eprint!("run {}/{n}: {what} ", i + 1);
        let _ = std::io::stderr().flush();
        match runner.run(&named, stop) {
            Ok(y) if y.is_finite() => {
                eprintln!("-> {y:.3} {}", runner.unit());
                out.push(Obs {
                    run: i + 1,
                    levels,
                    replication,
                    y,
                });
            }
            _ if stop.load(Ordering::SeqCst) => {
                eprintln!("-> interrupted");
                return (out, Outcome::Interrupted);
            }
            Ok(y) => {
                eprintln!("-> failed");
                return (
                    out,
                    Outcome::Failed(format!("run {}/{n} ({what}): response {y}", i + 1)),
                );
            }
            Err(e) => {
                eprintln!("-> failed");
                return (
                    out,
                    Outcome::Failed(format!("run {}/{n} ({what}): {e}", i + 1)),
                );
            }
        }
    }
    (out, Outcome::Complete)
}

pub fn analyse(design: &Design, obs: &[Obs], transform: Transform) -> Result<Anova, String> {
    let mut o = Observations::new(design.clone()).map_err(|e| strip(&e.to_string()))?;
    for x in obs {
        o.set(&x.levels, x.replication - 1, x.y)
            .map_err(|e| strip(&e.to_string()))?;
    }
    anova(&o, &AnovaOptions { transform }).map_err(|e| strip(&e.to_string()))
}

/// Columns padded to their widest cell, the last (y) right-aligned.
pub fn observations_table(design: &Design, response: &str, obs: &[Obs]) -> String {
    let mut rows: Vec<Vec<String>> = vec![design
        .factors
        .iter()
        .map(|f| f.name.clone())
        .chain(["rep".into(), "run".into(), response.to_string()])
        .collect()];
    let mut sorted: Vec<&Obs> = obs.iter().collect();
    sorted.sort_by_key(|o| (design.cell(&o.levels).unwrap_or(0), o.replication));
    for o in sorted {
        let mut r: Vec<String> = design
            .factors
            .iter()
            .zip(&o.levels)
            .map(|(f, &l)| f.levels[l].clone())
            .collect();
        r.push(o.replication.to_string());
        r.push(o.run.to_string());
        r.push(format!("{:.4}", o.y));
        rows.push(r);
    }
    let cols = rows[0].len();
    let mut w = vec![0; cols];
    for r in &rows {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let mut s = String::new();
    for r in &rows {
        let mut line = String::new();
        for (i, c) in r.iter().enumerate() {
            if i + 3 < cols {
                line.push_str(&format!("{c:<width$}  ", width = w[i]));
            } else {
                line.push_str(&format!("{c:>width$}  ", width = w[i]));
            }
        }
        s.push_str(line.trim_end());
        s.push('\n');
    }
    s
}

pub fn json_observations(design: &Design, obs: &[Obs]) -> serde_json::Value {
    let mut v: Vec<&Obs> = obs.iter().collect();
    v.sort_by_key(|o| o.run);
    serde_json::Value::Array(
        v.into_iter()
            .map(|o| {
                let levels: serde_json::Map<String, serde_json::Value> = design
                    .factors
                    .iter()
                    .zip(&o.levels)
                    .map(|(f, &l)| (f.name.clone(), f.levels[l].clone().into()))
                    .collect();
                serde_json::json!({
                    "run": o.run,
                    "levels": levels,
                    "replication": o.replication,
                    "y": o.y,
                })
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::Factor;

    #[test]
    fn run_order_is_a_seeded_permutation() {
        let d = Design::new(
            vec![
                Factor::new("a", &["1", "2", "3"]),
                Factor::new("b", &["x", "y"]),
            ],
            3,
        )
        .unwrap();
        let p = run_order(&d, 7);
        assert_eq!(p, run_order(&d, 7));
        assert_ne!(p, run_order(&d, 8));
        let mut sorted = p.clone();
        sorted.sort();
        let want: Vec<(usize, usize)> = (0..6).flat_map(|c| (1..=3).map(move |r| (c, r))).collect();
        assert_eq!(sorted, want);
        // Not the design order.
        assert_ne!(p, want);
    }

    /// A runner that returns a known function of the levels.
    struct Fake(usize);
    impl Runner for Fake {
        fn run(
            &mut self,
            levels: &[(String, String)],
            stop: &Arc<AtomicBool>,
        ) -> Result<f64, String> {
            self.0 += 1;
            if self.0 == 4 {
                stop.store(true, Ordering::SeqCst);
                return Err("interrupted".into());
            }
            Ok(levels.len() as f64 + self.0 as f64)
        }
    }

    #[test]
    fn measure_stops_on_the_flag() {
        let d = Design::new(vec![Factor::new("a", &["1", "2"])], 3).unwrap();
        let plan = run_order(&d, 1);
        let stop = Arc::new(AtomicBool::new(false));
        let (obs, outcome) = measure(&d, &plan, &mut Fake(0), &stop);
        assert_eq!(obs.len(), 3);
        assert!(matches!(outcome, Outcome::Interrupted));
        assert_eq!(obs.iter().map(|o| o.run).collect::<Vec<_>>(), [1, 2, 3]);
    }

    #[test]
    fn bench_levels_are_checked() {
        let mut b = BenchSpec::default();
        assert!(b.apply("frame_size", "1518").is_ok());
        assert_eq!(b.frame_size, 1518);
        assert!(b.apply("frame_size", "63").is_err());
        assert!(b.apply("flows", "0").is_err());
        assert!(b.apply("threaded_napi", "on").is_ok());
        assert!(b.rps);
        assert!(b.apply("rps", "off").is_ok());
        assert!(!b.rps);
        assert!(b.apply("rps", "sometimes").is_err());
        assert!(b.threaded_napi);
        let e = b.apply("dut", "nope").unwrap_err().to_string();
        assert!(e.contains("unknown device under test"), "{e}");
        let e = b.apply("colour", "red").unwrap_err().to_string();
        assert!(e.contains("unknown factor 'colour'"), "{e}");
    }
}
