//! The experiment file (`linerate experiment FILE`, see
//! `examples/experiment-*.toml`): TOML naming the factors and their levels,
//! the replications, the response, the bench defaults or a `[data]` file.
//!
//! [`parse`] reads and checks the text; what it cannot check without the
//! bench (DuT names, the response the bench measures, the levels of the
//! bench's factors) the runner checks before anything runs.

use super::{Design, ExperimentError, Factor, Transform};
use serde::Deserialize;
use std::path::PathBuf;

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct Spec {
    #[serde(default)]
    title: Option<String>,
    /// Signed so that a negative value gets our own message.
    replications: i64,
    #[serde(default = "default_response")]
    response: String,
    #[serde(default)]
    transform: Option<String>,
    #[serde(default = "default_seed")]
    seed: u64,
    #[serde(default)]
    bench: BenchSpec,
    #[serde(default)]
    factor: Vec<FactorSpec>,
    #[serde(default)]
    data: Option<DataSpec>,
}

fn default_response() -> String {
    "forwarding_mpps".into()
}
fn default_seed() -> u64 {
    1
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct FactorSpec {
    name: String,
    levels: Vec<toml::Value>,
}

/// A level as written in the file: `"64"` and `64` are the same level;
/// `true`/`false` read as on/off.
fn level_text(factor: &str, i: usize, v: &toml::Value) -> Result<String, String> {
    match v {
        toml::Value::String(s) => Ok(s.clone()),
        toml::Value::Integer(n) => Ok(n.to_string()),
        toml::Value::Float(f) => Ok(f.to_string()),
        toml::Value::Boolean(b) => Ok(if *b { "on" } else { "off" }.into()),
        other => Err(format!(
            "factor '{factor}' level {}: a {} where a string, number or boolean was expected",
            i + 1,
            other.type_str()
        )),
    }
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct DataSpec {
    file: PathBuf,
}

/// `[bench]`: the settings of every run that no factor varies.
#[derive(Deserialize, Debug, Clone, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct BenchSpec {
    /// Seconds measured per run, after the warm-up.
    pub duration: f64,
    pub warmup: f64,
    pub dut: String,
    /// Bytes on the wire with FCS.
    pub frame_size: usize,
    pub flows: u32,
    pub threaded_napi: bool,
    pub rps: bool,
    pub gen_cpu: usize,
    pub dut_cpu: usize,
}

impl Default for BenchSpec {
    fn default() -> Self {
        BenchSpec {
            duration: 1.0,
            warmup: 0.5,
            dut: "linux-bridge".into(),
            frame_size: 64,
            flows: 64,
            threaded_napi: false,
            rps: true,
            gen_cpu: 0,
            dut_cpu: 1,
        }
    }
}

/// The parsed experiment.
#[derive(Debug, Clone)]
pub struct Experiment {
    pub title: Option<String>,
    pub design: Design,
    pub response: String,
    pub transform: Transform,
    pub seed: u64,
    pub bench: BenchSpec,
    /// Observations to analyse instead of running, as written in the file
    /// (relative to the file's directory).
    pub data: Option<PathBuf>,
}

/// One-line message of a TOML error: "line L: message".
fn toml_error(text: &str, e: &toml::de::Error) -> String {
    let msg = e.message().split_whitespace().collect::<Vec<_>>().join(" ");
    match e.span() {
        Some(s) => {
            let line = text[..s.start.min(text.len())].matches('\n').count() + 1;
            format!("line {line}: {msg}")
        }
        None => msg,
    }
}

/// Reads and checks the text of an experiment file (not yet the bench
/// factors: data mode accepts any factor names). The error is one line,
/// without the file's name.
pub fn parse(text: &str) -> Result<Experiment, String> {
    let spec: Spec = toml::from_str(text).map_err(|e| toml_error(text, &e))?;
    if spec.replications < 1 {
        return Err(format!(
            "replications = {}: must be at least 1",
            spec.replications
        ));
    }
    if spec.factor.is_empty() {
        return Err("no [[factor]]: name at least one factor and its levels".into());
    }
    let transform = match spec.transform.as_deref() {
        None | Some("none") => Transform::None,
        Some("log") | Some("log10") => Transform::Log10,
        Some(t) => return Err(format!("transform '{t}': use \"none\" or \"log\"")),
    };
    if spec.response.trim().is_empty() {
        return Err("response is empty".into());
    }
    let mut factors = Vec::with_capacity(spec.factor.len());
    for f in &spec.factor {
        let levels = f
            .levels
            .iter()
            .enumerate()
            .map(|(i, v)| level_text(&f.name, i, v))
            .collect::<Result<Vec<_>, _>>()?;
        factors.push(Factor {
            name: f.name.clone(),
            levels,
        });
    }
    let replications = usize::try_from(spec.replications).map_err(|_| {
        format!(
            "replications = {}: too many for this machine",
            spec.replications
        )
    })?;
    let design = Design::new(factors, replications).map_err(|e| match e {
        ExperimentError::Design(m) | ExperimentError::Observation(m) => m,
    })?;
    for f in &design.factors {
        if f.name == spec.response || f.name == "run" {
            return Err(format!(
                "factor '{}' has the name of the {} column",
                f.name,
                if f.name == "run" {
                    "run-order"
                } else {
                    "response"
                }
            ));
        }
    }
    Ok(Experiment {
        title: spec.title,
        design,
        response: spec.response,
        transform,
        seed: spec.seed,
        bench: spec.bench,
        data: spec.data.map(|d| d.file),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_examples() {
        for f in [
            "experiment-data.toml",
            "experiment-dut-size.toml",
            "experiment-napi-flows.toml",
            "experiment-rfc2544.toml",
        ] {
            let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../examples")
                .join(f);
            let text = std::fs::read_to_string(&p).unwrap();
            let x = parse(&text).unwrap_or_else(|e| panic!("{f}: {e}"));
            assert!(x.design.runs() >= 2, "{f}");
        }
    }

    #[test]
    fn errors_are_one_line_and_name_the_problem() {
        let cases = [
            (
                "replications = 0\n[[factor]]\nname = \"a\"\nlevels = [1, 2]",
                "replications = 0: must be at least 1",
            ),
            ("replications = 1", "no [[factor]]"),
            (
                "replications = 1\ntransform = \"sqrt\"\n[[factor]]\nname = \"a\"\nlevels = [1, 2]",
                "transform 'sqrt'",
            ),
            (
                "replications = 1\n[[factor]]\nname = \"a\"\nlevels = [1, [2]]",
                "factor 'a' level 2: a array",
            ),
            (
                "replications = 1\n[[factor]]\nname = \"run\"\nlevels = [1, 2]",
                "name of the run-order column",
            ),
            ("replications = 1\n\ncolour = 3\n", "line 3: "),
        ];
        for (text, want) in cases {
            let e = parse(text).unwrap_err();
            assert!(e.contains(want), "{text:?}: {e}");
            assert!(!e.contains('\n'), "{e:?}");
        }
        let x =
            parse("replications = 2\n[[factor]]\nname = \"rps\"\nlevels = [true, false]").unwrap();
        assert_eq!(x.design.factors[0].levels, ["on", "off"]);
        assert_eq!(x.bench, BenchSpec::default());
        assert_eq!(x.response, "forwarding_mpps");
    }
}
