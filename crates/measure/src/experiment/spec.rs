//! The files of `linerate experiment`: the experiment file (see
//! `examples/experiment-*.toml`), TOML naming the factors and their levels,
//! the replications, the response, the bench defaults or a `[data]` file;
//! and the observations file (CSV, `--data`, `[data]`, `--csv`).
//!
//! [`parse`] reads and checks an experiment file; what it cannot check
//! without the bench (DuT names, the response the bench measures, the
//! levels of the bench's factors) the runner checks before anything runs.
//! [`parse_data`] reads observations, [`data_csv`] writes them.

use super::{Design, ExperimentError, Factor, Observations, Transform};
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

/// An [`ExperimentError`]'s message without the "experiment: " its
/// Display starts with.
fn message(e: ExperimentError) -> String {
    match e {
        ExperimentError::Design(m) | ExperimentError::Observation(m) => m,
    }
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
    let design = Design::new(factors, replications).map_err(message)?;
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

// ------------------------------------------------------------ observations

/// One measured (or read) observation.
#[derive(Clone, Debug, PartialEq)]
pub struct Obs {
    /// 1-based position in the run order (the CSV line order in data mode
    /// unless the CSV has a `run` column).
    pub run: usize,
    /// Level index per factor.
    pub levels: Vec<usize>,
    /// 1-based replication within the cell.
    pub replication: usize,
    pub y: f64,
}

/// A problem in an observations file, on one line of it or not.
#[derive(Clone, Debug, PartialEq)]
pub struct DataError {
    /// 1-based line number.
    pub line: Option<usize>,
    /// One line.
    pub msg: String,
}

/// Splits one CSV line: commas, fields optionally in double quotes ("" is a
/// quote inside quotes), spaces around fields trimmed.
pub fn csv_fields(line: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chars = line.chars().peekable();
    let mut quoted = false;
    let mut was_quoted = false;
    while let Some(c) = chars.next() {
        if quoted {
            if c == '"' {
                if chars.peek() == Some(&'"') {
                    chars.next();
                    cur.push('"');
                } else {
                    quoted = false;
                }
            } else {
                cur.push(c);
            }
        } else if c == '"' && cur.trim().is_empty() && !was_quoted {
            cur.clear();
            quoted = true;
            was_quoted = true;
        } else if c == ',' {
            out.push(if was_quoted {
                std::mem::take(&mut cur)
            } else {
                cur.trim().to_string()
            });
            cur.clear();
            was_quoted = false;
        } else if was_quoted {
            if !c.is_whitespace() {
                return Err(format!("text after a closing quote: '{c}'"));
            }
        } else {
            cur.push(c);
        }
    }
    if quoted {
        return Err("unterminated quote".into());
    }
    out.push(if was_quoted {
        cur
    } else {
        cur.trim().to_string()
    });
    Ok(out)
}

/// One CSV field, quoted when it must be.
pub fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) || s.trim() != s {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Reads the observations of `design` from the text of a CSV file: a
/// header row naming every factor and the response (and optionally `run`),
/// then one line per observation; every cell must have exactly
/// `replications` values. Sorted by run.
pub fn parse_data(text: &str, design: &Design, response: &str) -> Result<Vec<Obs>, DataError> {
    let whole = |msg: String| DataError { line: None, msg };
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim_end_matches('\r')))
        .filter(|(_, l)| !l.trim().is_empty() && !l.trim_start().starts_with('#'));
    let Some((hl, header)) = lines.next() else {
        return Err(whole(format!(
            "empty file: want a header row naming the factors and '{response}'"
        )));
    };
    let at_header = |msg: String| DataError {
        line: Some(hl),
        msg,
    };
    let header = csv_fields(header).map_err(at_header)?;
    for (i, h) in header.iter().enumerate() {
        if header[..i].contains(h) {
            return Err(at_header(format!("column '{h}' appears twice")));
        }
        let known = h == response || h == "run" || design.factors.iter().any(|f| &f.name == h);
        if !known {
            return Err(at_header(format!(
                "unknown column '{h}' (want the factors {}, the response '{response}' and optionally 'run')",
                design.factors.iter().map(|f| f.name.as_str()).collect::<Vec<_>>().join(", ")
            )));
        }
    }
    let col = |c: &str| header.iter().position(|h| h == c);
    let mut fcols = Vec::new();
    for f in &design.factors {
        fcols.push(
            col(&f.name).ok_or_else(|| at_header(format!("no column for factor '{}'", f.name)))?,
        );
    }
    let ycol = col(response)
        .ok_or_else(|| at_header(format!("no column for the response '{response}'")))?;
    let runcol = col("run");

    let mut obs = Observations::new(design.clone()).map_err(|e| whole(message(e)))?;
    let mut filled = vec![0usize; design.cells()];
    let mut out = Vec::new();
    for (ln, line) in lines {
        let at = |msg: String| DataError {
            line: Some(ln),
            msg,
        };
        let fields = csv_fields(line).map_err(at)?;
        if fields.len() != header.len() {
            return Err(at(format!(
                "{} fields; the header has {}",
                fields.len(),
                header.len()
            )));
        }
        let mut levels = Vec::with_capacity(fcols.len());
        for (f, &c) in design.factors.iter().zip(&fcols) {
            let v = &fields[c];
            match f.levels.iter().position(|l| l == v) {
                Some(i) => levels.push(i),
                None => {
                    return Err(at(format!(
                        "factor '{}' has no level '{v}' (levels: {})",
                        f.name,
                        f.levels.join(", ")
                    )))
                }
            }
        }
        let ytext = &fields[ycol];
        let y: f64 = ytext
            .parse()
            .ok()
            .filter(|y: &f64| y.is_finite())
            .ok_or_else(|| at(format!("{response} '{ytext}' is not a finite number")))?;
        let run = match runcol {
            Some(c) => fields[c]
                .parse::<usize>()
                .ok()
                .filter(|&r| r >= 1)
                .ok_or_else(|| at(format!("run '{}' is not a number >= 1", fields[c])))?,
            None => out.len() + 1,
        };
        let cell = design.cell(&levels).map_err(|e| at(message(e)))?;
        if filled[cell] >= design.replications {
            return Err(at(format!(
                "extra observation: cell ({}) already has {} replication(s); the design has {}",
                design.describe(&levels),
                filled[cell],
                design.replications
            )));
        }
        obs.add(&levels, y).map_err(|e| at(message(e)))?;
        filled[cell] += 1;
        out.push((
            cell,
            Obs {
                run,
                levels,
                replication: 0,
                y,
            },
        ));
    }
    if let Err(e) = obs.values() {
        return Err(whole(message(e)));
    }
    // Replications are numbered in run order, not line order: the same
    // observations read the same in any line order (and as written back).
    out.sort_by_key(|(_, o)| o.run);
    let mut seen = vec![0usize; design.cells()];
    Ok(out
        .into_iter()
        .map(|(cell, mut o)| {
            seen[cell] += 1;
            o.replication = seen[cell];
            o
        })
        .collect())
}

/// The observations as a CSV file that [`parse_data`] reads back: a `run`
/// column, the factors, the response.
pub fn data_csv(design: &Design, response: &str, obs: &[Obs]) -> String {
    let mut s = String::from("run");
    for f in &design.factors {
        s.push(',');
        s.push_str(&csv_field(&f.name));
    }
    s.push(',');
    s.push_str(&csv_field(response));
    s.push('\n');
    for o in obs {
        s.push_str(&o.run.to_string());
        for (f, &l) in design.factors.iter().zip(&o.levels) {
            s.push(',');
            s.push_str(&csv_field(&f.levels[l]));
        }
        // Shortest representation that reads back to the same f64.
        s.push_str(&format!(",{}\n", o.y));
    }
    s
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

    #[test]
    fn csv_fields_quotes_and_spaces() {
        assert_eq!(csv_fields(" a , b,c ").unwrap(), ["a", "b", "c"]);
        assert_eq!(csv_fields("\"x, y\",\"q\"\"\"").unwrap(), ["x, y", "q\""]);
        assert_eq!(csv_fields("a,,b").unwrap(), ["a", "", "b"]);
        assert!(csv_fields("\"open").is_err());
        assert!(csv_fields("\"a\"b").is_err());
        for s in ["plain", "with,comma", "quo\"te", " sp "] {
            assert_eq!(csv_fields(&csv_field(s)).unwrap(), [s]);
        }
    }

    #[test]
    fn data_reads_the_example_and_writes_back() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
        let x = parse(&std::fs::read_to_string(dir.join("experiment-data.toml")).unwrap()).unwrap();
        let text = std::fs::read_to_string(dir.join("experiment-dut-size.csv")).unwrap();
        let obs = parse_data(&text, &x.design, &x.response).unwrap();
        assert_eq!(obs.len(), x.design.runs());
        let again = data_csv(&x.design, &x.response, &obs);
        assert_eq!(parse_data(&again, &x.design, &x.response).unwrap(), obs);
        // Found by fuzzing: replications were numbered in line order, so
        // lines out of run order read back (after --csv, which writes them
        // in run order) with other replication numbers.
        let mut lines: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
        lines[1..].reverse();
        let reversed = parse_data(&lines.join("\n"), &x.design, &x.response).unwrap();
        assert_eq!(reversed, obs);
        let e = parse_data("run,dut\n", &x.design, &x.response).unwrap_err();
        assert_eq!(e.line, Some(1));
        assert!(e.msg.starts_with("no column for factor"), "{e:?}");
        let e = parse_data("# nothing\n", &x.design, &x.response).unwrap_err();
        assert_eq!(e.line, None);
        assert!(e.msg.starts_with("empty file"), "{e:?}");
    }
}
