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
//! The runner, the run order and the analysis live in
//! [`linerate_measure::experiment::runner`]; this file parses, calls them and
//! prints.

use anyhow::{anyhow, bail, Result};
use linerate_measure::experiment::runner::{
    analyse, describe, json_observations, load, measure, named_levels, observations_table,
    read_csv, run_order, write_csv, BenchRunner, Outcome,
};
use linerate_measure::experiment::Transform;
use std::io::Write;
use std::path::PathBuf;

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

// ------------------------------------------------------------------ output

pub fn run(a: Args) -> Result<()> {
    let mut x = load(&a.file).map_err(anyhow::Error::msg)?;
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
            .map_err(|e| anyhow!("experiment '{}': {e}", a.file.display()))?;
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
            read_csv(p, &design, &x.response).map_err(anyhow::Error::msg)?,
            Outcome::Complete,
            format!("data {}", p.display()),
        ),
        None => {
            let mut runner = BenchRunner::new(&x.bench, &design, &x.response)
                .map_err(|e| anyhow!("experiment '{}': {e}", a.file.display()))?;
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
        write_csv(p, &design, &x.response, &obs).map_err(anyhow::Error::msg)?;
    }
    let anova = match &outcome {
        Outcome::Complete => Some(analyse(&design, &obs, x.transform).map_err(anyhow::Error::msg)?),
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
        Outcome::Failed(e) => Err(anyhow::Error::msg(e)),
        Outcome::Interrupted => {
            eprintln!("interrupted: test beds and DuTs removed");
            Ok(())
        }
        Outcome::Complete => Ok(()),
    }
}
