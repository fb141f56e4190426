//! `linerate experiment FILE`: a full factorial experiment (seed 003 /
//! Jain ch. 18-22) over the bench's parameters, or the analysis of
//! observations measured elsewhere.
//!
//! The TOML file names the factors and their levels, the replications, the
//! response and the bench defaults. Every combination of levels is run
//! `replications` times in an order randomised with `seed` (so drifts of the
//! machine spread over all cells instead of biasing one), each run on a fresh
//! test bed; then the allocation of variation
//! ([`linerate_measure::experiment::anova`]) says how much of the variation
//! each factor and interaction explains, with F tests and confidence
//! intervals. With `[data]` or `--data` the observations come from a CSV file
//! and nothing is run.
//!
//! What a run measures is behind the [`Runner`] trait; [`BenchRunner`] is the
//! bench at overload (response `forwarding_mpps`).

use anyhow::{anyhow, bail, Context, Result};
use linerate_measure::bench::dut::{self, DutEnv};
use linerate_measure::bench::{self, BenchConfig};
use linerate_measure::experiment::spec::{self, BenchSpec, Experiment, Obs};
use linerate_measure::experiment::{anova, Anova, AnovaOptions, Design, Observations, Transform};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[derive(clap::Args)]
#[command(
    about = "Run a full factorial experiment on the bench (or analyse its data): ANOVA allocation of variation",
    after_help = "\
The file names factors and levels; every combination is run `replications` times in a randomised
order (seeded), each run on a fresh gen/dut/sink test bed, and the variation of the response is
allocated to the factors, their interactions and the experimental error (Jain, The Art of Computer
Systems Performance Analysis, ch. 18-22; seed 003 Tables 3 and 5), with F tests and confidence
intervals of the effects.

File (see examples/experiment-*.toml):
  title = \"DuT x frame size\"
  replications = 3
  response = \"forwarding_mpps\"     # forwarded packets/s at overload / 1e6, counted at the sink
  transform = \"none\"               # or \"log\" (log10: multiplicative model)
  seed = 1                         # randomises the run order
  [bench]                          # defaults for every run: duration, warmup, dut, frame_size,
  duration = 1.0                   #   flows, threaded_napi, rps, gen_cpu, dut_cpu
  [[factor]]
  name = \"dut\"                     # factors: dut, frame_size (64..=1518), flows, threaded_napi, rps (on/off)
  levels = [\"linux-bridge\", \"linux-ipfwd\"]
  [[factor]]
  name = \"frame_size\"
  levels = [64, 1518]
  [data]                           # optional: analyse this CSV instead of running (any factor names)
  file = \"obs.csv\"                 # relative to the TOML file

CSV (--data, [data], --csv): a header row naming every factor and the response (and optionally
`run`), then one line per observation; every cell needs exactly `replications` lines.

Examples:
  linerate experiment examples/experiment-dut-size.toml                   # run (root), print the ANOVA
  linerate experiment examples/experiment-dut-size.toml --csv obs.csv --json > exp.json
  linerate experiment examples/experiment-dut-size.toml --data obs.csv --transform log
  linerate experiment examples/experiment-dut-size.toml --plan            # the randomised run order only
  linerate experiment examples/experiment-data.toml                       # a [data] file: analysis only"
)]
pub struct Args {
    /// The experiment (TOML): factors, levels, replications, response, bench defaults or [data].
    pub file: PathBuf,
    /// Analyse the observations in this CSV instead of running (overrides [data]).
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// Transformation of the response before the analysis (overrides the file's `transform`).
    #[arg(long, value_enum)]
    pub transform: Option<TransformArg>,
    /// Print the design, the observations (with run order) and the ANOVA as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Also write the observations to this CSV file (the --data format, to re-analyse later).
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Print the randomised run order and exit without running.
    #[arg(long)]
    pub plan: bool,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum TransformArg {
    None,
    /// Decimal logarithm.
    #[value(alias = "log10")]
    Log,
}

// ---------------------------------------------------------------- the file

/// Highest `flows`: the generator counts UDP source ports up from 1024.
const MAX_FLOWS: u32 = 65536 - 1024;

/// The factors the bench runner understands.
const BENCH_FACTORS: [&str; 5] = ["dut", "frame_size", "flows", "threaded_napi", "rps"];

/// A level of an on/off factor.
fn on_off(factor: &str, level: &str) -> Result<bool> {
    match level {
        "on" | "true" | "1" | "yes" => Ok(true),
        "off" | "false" | "0" | "no" => Ok(false),
        _ => bail!("{factor} '{level}': use on or off"),
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
    fn apply(&mut self, factor: &str, level: &str) -> Result<()>;
    fn validate(&self) -> Result<()>;
}

impl BenchCheck for BenchSpec {
    /// Sets one factor to one level, or says why it cannot.
    fn apply(&mut self, factor: &str, level: &str) -> Result<()> {
        match factor {
            "dut" => {
                let known: Vec<String> = linerate_measure::bench::dut::builtin().iter().map(|d| d.name()).collect();
                if !known.iter().any(|k| k == level) {
                    bail!(
                        "dut '{level}': unknown device under test (known: {})",
                        known.join(", ")
                    );
                }
                self.dut = level.to_string();
            }
            "frame_size" => {
                self.frame_size = match level.parse::<usize>() {
                    Ok(n) if (64..=1518).contains(&n) => n,
                    _ => bail!("frame_size '{level}': must be a whole number of bytes in 64..=1518"),
                };
            }
            "flows" => {
                self.flows = match level.parse::<u32>() {
                    Ok(n) if (1..=MAX_FLOWS).contains(&n) => n,
                    _ => bail!("flows '{level}': must be a whole number in 1..={MAX_FLOWS}"),
                };
            }
            "threaded_napi" => self.threaded_napi = on_off(factor, level)?,
            "rps" => self.rps = on_off(factor, level)?,
            _ => bail!(
                "unknown factor '{factor}': the bench varies {} (use [data] to analyse other factors)",
                BENCH_FACTORS.join(", ")
            ),
        }
        Ok(())
    }

    /// Checks the defaults themselves.
    fn validate(&self) -> Result<()> {
        if !(self.duration.is_finite() && self.duration > 0.0 && self.duration <= 3600.0) {
            bail!(
                "bench.duration = {}: must be a number of seconds in (0, 3600]",
                self.duration
            );
        }
        if !(self.warmup.is_finite() && self.warmup >= 0.0 && self.warmup <= 3600.0) {
            bail!(
                "bench.warmup = {}: must be a number of seconds in [0, 3600]",
                self.warmup
            );
        }
        let mut probe = self.clone();
        probe
            .apply("dut", &self.dut)
            .map_err(|e| anyhow!("bench.{e}"))?;
        probe
            .apply("frame_size", &self.frame_size.to_string())
            .map_err(|e| anyhow!("bench.{e}"))?;
        probe
            .apply("flows", &self.flows.to_string())
            .map_err(|e| anyhow!("bench.{e}"))?;
        Ok(())
    }
}

/// Reads and checks the experiment file (not yet the bench factors: data
/// mode accepts any factor names); `[data]` is resolved against the file's
/// directory.
fn load(path: &Path) -> Result<Experiment> {
    let name = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| anyhow!("experiment '{name}': {e}"))?;
    let mut x = spec::parse(&text).map_err(|m| anyhow!("experiment '{name}': {m}"))?;
    x.data = x.data.map(|d| {
        path.parent()
            .map(|p| p.join(&d))
            .unwrap_or_else(|| d.clone())
    });
    Ok(x)
}

/// ExperimentError's Display starts with "experiment: ".
fn strip(s: &str) -> String {
    s.strip_prefix("experiment: ").unwrap_or(s).to_string()
}

// ------------------------------------------------------------ observations

/// Reads the observations of `design` from a CSV file; every cell must have
/// exactly `replications` values.
fn read_csv(path: &Path, design: &Design, response: &str) -> Result<Vec<Obs>> {
    let name = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| anyhow!("data '{name}': {e}"))?;
    spec::parse_data(&text, design, response).map_err(|e| match e.line {
        Some(l) => anyhow!("data '{name}' line {l}: {}", e.msg),
        None => anyhow!("data '{name}': {}", e.msg),
    })
}

fn write_csv(path: &Path, design: &Design, response: &str, obs: &[Obs]) -> Result<()> {
    linerate_io::file::write_whole(path, spec::data_csv(design, response, obs).as_bytes())
        .map_err(|e| anyhow!("--csv {e}"))
}

// ------------------------------------------------------------------ runner

/// Measures the response of one run of the experiment.
///
/// `levels` are (factor, level) pairs in design order. `stop` is the user's
/// Ctrl-C: a runner returns soon after it is set (an error is fine, the
/// caller checks the flag). A new response (e.g. an RFC 2544 throughput
/// search) is a new implementation.
pub(crate) trait Runner {
    fn run(&mut self, levels: &[(String, String)], stop: &Arc<AtomicBool>) -> Result<f64>;
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
pub(crate) struct BenchRunner {
    base: BenchSpec,
    env: DutEnv,
    response: String,
}

impl BenchRunner {
    /// Checks the response, every factor and every level before anything runs.
    fn new(base: &BenchSpec, design: &Design, response: &str) -> Result<BenchRunner> {
        if !BENCH_RESPONSES.contains(&response) {
            bail!(
                "response '{response}': the bench measures {} (use [data] or --data to analyse other responses)",
                BENCH_RESPONSES.join(", ")
            );
        }
        base.validate()?;
        for f in &design.factors {
            for l in &f.levels {
                base.clone().apply(&f.name, l)?;
            }
        }
        let exe = std::env::current_exe().context("locating the linerate binary")?;
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
    fn run(&mut self, levels: &[(String, String)], stop: &Arc<AtomicBool>) -> Result<f64> {
        let mut s = self.base.clone();
        for (f, l) in levels {
            s.apply(f, l)?;
        }
        let mut duts: Vec<_> = linerate_measure::bench::dut::builtin()
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
        };
        let results = bench::run(&cfg, &mut duts, stop, &mut |_, _| {});
        let r = results
            .into_iter()
            .next()
            .ok_or_else(|| anyhow!("interrupted"))?;
        if r.status != "ok" {
            bail!("{}: {}", r.name, r.status);
        }
        let pps = r
            .median_pps
            .ok_or_else(|| anyhow!("{}: no trial measured", r.name))?;
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
    ) -> Result<f64> {
        use linerate_measure::bench::rfc2544::Rfc2544Config;
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
        };
        let r = bench::run_rfc2544(&cfg, duts, stop, &mut |_, _, _| {})
            .into_iter()
            .next()
            .ok_or_else(|| anyhow!("interrupted"))?;
        if r.status != "ok" {
            bail!("{}: {}", r.name, r.status);
        }
        let size = r
            .sizes
            .first()
            .ok_or_else(|| anyhow!("{}: nothing measured", r.name))?;
        match self.response.as_str() {
            "throughput_mpps" => size
                .throughput_pps
                .map(|v| v / 1e6)
                .ok_or_else(|| anyhow!("{}: no throughput found", r.name)),
            _ => {
                let l = size
                    .latency()
                    .filter(|l| l.samples > 0)
                    .ok_or_else(|| anyhow!("{}: no latency samples", r.name))?;
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
fn run_order(design: &Design, seed: u64) -> Vec<(usize, usize)> {
    let r = design.replications;
    let mut cells: Vec<usize> = (0..design.cells())
        .flat_map(|c| std::iter::repeat_n(c, r))
        .collect();
    let mut rng = linerate_pipeline::generate::field::SplitMix64(seed);
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

fn named_levels(design: &Design, levels: &[usize]) -> Vec<(String, String)> {
    design
        .factors
        .iter()
        .zip(levels)
        .map(|(f, &l)| (f.name.clone(), f.levels[l].clone()))
        .collect()
}

fn describe(levels: &[(String, String)]) -> String {
    levels
        .iter()
        .map(|(f, l)| format!("{f}={l}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// How the runs ended.
enum Outcome {
    Complete,
    Interrupted,
    /// A run failed: the message names the run.
    Failed(anyhow::Error),
}

/// Runs the plan in order; a progress line per run on stderr.
fn measure(
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
                    Outcome::Failed(anyhow!("run {}/{n} ({what}): response {y}", i + 1)),
                );
            }
            Err(e) => {
                eprintln!("-> failed");
                return (
                    out,
                    Outcome::Failed(anyhow!("run {}/{n} ({what}): {e:#}", i + 1)),
                );
            }
        }
    }
    (out, Outcome::Complete)
}

// ------------------------------------------------------------------ output

fn analyse(design: &Design, obs: &[Obs], transform: Transform) -> Result<Anova> {
    let mut o = Observations::new(design.clone()).map_err(|e| anyhow!(strip(&e.to_string())))?;
    for x in obs {
        o.set(&x.levels, x.replication - 1, x.y)
            .map_err(|e| anyhow!(strip(&e.to_string())))?;
    }
    anova(&o, &AnovaOptions { transform }).map_err(|e| anyhow!(strip(&e.to_string())))
}

/// Columns padded to their widest cell, the last (y) right-aligned.
fn observations_table(design: &Design, response: &str, obs: &[Obs]) -> String {
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

fn json_observations(design: &Design, obs: &[Obs]) -> serde_json::Value {
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

pub fn run(a: Args) -> Result<()> {
    let mut x = load(&a.file)?;
    if let Some(t) = a.transform {
        x.transform = match t {
            TransformArg::None => Transform::None,
            TransformArg::Log => Transform::Log10,
        };
    }
    let data = a.data.clone().or(x.data.clone());
    let design = x.design.clone();
    let plan = run_order(&design, x.seed);
    let n = plan.len();
    let shape = design
        .factors
        .iter()
        .map(|f| format!("{} ({} levels)", f.name, f.levels.len()))
        .collect::<Vec<_>>()
        .join(" x ");

    if a.plan {
        if data.is_some() {
            bail!("--plan: this experiment analyses a data file; there is nothing to run");
        }
        BenchRunner::new(&x.bench, &design, &x.response)
            .map_err(|e| anyhow!("experiment '{}': {e:#}", a.file.display()))?;
        let mut o = std::io::stdout().lock();
        writeln!(
            o,
            "{shape}, {} replication(s) = {n} runs, seed {}",
            design.replications, x.seed
        )?;
        for (i, &(cell, rep)) in plan.iter().enumerate() {
            let named = named_levels(&design, &design.levels_of(cell));
            writeln!(
                o,
                "run {}/{n}: {} (replication {rep})",
                i + 1,
                describe(&named)
            )?;
        }
        return Ok(());
    }

    let (obs, outcome, source) = match &data {
        Some(p) => (
            read_csv(p, &design, &x.response)?,
            Outcome::Complete,
            format!("data {}", p.display()),
        ),
        None => {
            let mut runner = BenchRunner::new(&x.bench, &design, &x.response)
                .map_err(|e| anyhow!("experiment '{}': {e:#}", a.file.display()))?;
            let stop = super::common::stop_flag()?;
            eprintln!(
                "linerate experiment: {shape}, {} replication(s) = {n} runs in random order (seed {}), {:.1} s per run after {:.1} s warm-up",
                design.replications, x.seed, x.bench.duration, x.bench.warmup
            );
            let (obs, outcome) = measure(&design, &plan, &mut runner, &stop);
            (obs, outcome, "bench".to_string())
        }
    };
    if let Some(p) = &a.csv {
        write_csv(p, &design, &x.response, &obs)?;
    }
    let anova = match &outcome {
        Outcome::Complete => Some(analyse(&design, &obs, x.transform)?),
        _ => None,
    };
    let note = match &outcome {
        Outcome::Complete => None,
        Outcome::Interrupted => Some(format!(
            "interrupted after {} of {n} runs: no ANOVA (the design is incomplete)",
            obs.len()
        )),
        Outcome::Failed(_) => Some(format!(
            "stopped after {} of {n} runs: a run failed; no ANOVA",
            obs.len()
        )),
    };

    if a.json {
        let v = serde_json::json!({
            "title": x.title,
            "source": source,
            "response": x.response,
            "transform": x.transform,
            "seed": x.seed,
            "design": design,
            "runs_planned": n,
            "complete": anova.is_some(),
            "bench": (data.is_none()).then(|| serde_json::json!({
                "duration_s": x.bench.duration,
                "warmup_s": x.bench.warmup,
                "dut": x.bench.dut,
                "frame_size": x.bench.frame_size,
                "flows": x.bench.flows,
                "threaded_napi": x.bench.threaded_napi,
                "rps": x.bench.rps,
                "gen_cpu": x.bench.gen_cpu,
                "dut_cpu": x.bench.dut_cpu,
            })),
            "observations": json_observations(&design, &obs),
            "anova": anova.as_ref().map(serde_json::to_value).transpose()?,
            "note": note,
        });
        outln!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        let mut o = std::io::stdout().lock();
        if let Some(t) = &x.title {
            writeln!(o, "{t}")?;
        }
        writeln!(
            o,
            "{shape}, {} replication(s), {} of {n} observations ({source}); response {}",
            design.replications,
            obs.len(),
            x.response
        )?;
        writeln!(o)?;
        write!(o, "{}", observations_table(&design, &x.response, &obs))?;
        if let Some(a) = &anova {
            writeln!(o)?;
            writeln!(o, "Allocation of variation (ANOVA)")?;
            write!(o, "{}", a.table())?;
            writeln!(o)?;
            writeln!(o, "Effects")?;
            write!(o, "{}", a.effects_table())?;
        }
        if let Some(n) = &note {
            writeln!(o)?;
            writeln!(o, "note: {n}")?;
        }
    }
    match outcome {
        Outcome::Failed(e) => Err(e),
        Outcome::Interrupted => {
            eprintln!("interrupted: test beds and DuTs removed");
            Ok(())
        }
        Outcome::Complete => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_measure::experiment::Factor;

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
        fn run(&mut self, levels: &[(String, String)], stop: &Arc<AtomicBool>) -> Result<f64> {
            self.0 += 1;
            if self.0 == 4 {
                stop.store(true, Ordering::SeqCst);
                bail!("interrupted");
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
