//! `linerate experiment` with the built binary: the analysis of CSV data
//! checked against an independent numpy/scipy computation
//! (tests/anova_check.py), one-line errors for bad files, and one real run
//! on namespace test beds (needs root; fails without it).

use linerate_measure::testbed;
use serde_json::{json, Value};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_linerate");

mod support;
use support::{require_python, require_root, TempDir};

static N: AtomicU32 = AtomicU32::new(0);

/// Deterministic pseudo-random numbers in [0, 1) (SplitMix64).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn lr(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(BIN).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

fn lr_json(args: &[&str]) -> Value {
    let (code, out, err) = lr(args);
    assert_eq!(code, 0, "{args:?}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: bad JSON ({e}): {out}"))
}

/// The independent reference: tests/anova_check.py (least squares with
/// effect coding, numpy + scipy) on cell-major values.
fn reference(dir: &TempDir, factors: &Value, r: usize, values: &[f64], transform: &str) -> Value {
    let py = require_python(&["numpy", "scipy"]);
    let input = dir.write(
        &format!("ref-{}.json", N.fetch_add(1, Ordering::Relaxed)),
        &json!({"factors": factors, "replications": r, "values": values, "transform": transform})
            .to_string(),
    );
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/anova_check.py");
    let out = Command::new(py).arg(script).arg(&input).output().unwrap();
    assert!(
        out.status.success(),
        "anova_check.py: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn close(a: f64, b: f64, what: &str) {
    let scale = a.abs().max(b.abs()).max(1e-300);
    assert!(
        (a - b).abs() <= 1e-9 * scale,
        "{what}: linerate {a} vs numpy/scipy {b}"
    );
}

/// Compares the ANOVA of `linerate experiment --json` with the reference.
fn compare(got: &Value, want: &Value) {
    let a = &got["anova"];
    let f = |v: &Value| v.as_f64().unwrap();
    close(f(&a["sst"]), f(&want["sst"]), "SST");
    close(f(&a["ssy"]), f(&want["ssy"]), "SSY");
    close(f(&a["ss0"]), f(&want["ss0"]), "SS0");
    let comps = a["components"].as_array().unwrap();
    let wc = want["components"].as_array().unwrap();
    assert_eq!(comps.len(), wc.len());
    for (c, w) in comps.iter().zip(wc) {
        let name = c["name"].as_str().unwrap();
        assert_eq!(name, w["name"].as_str().unwrap());
        close(f(&c["sum_of_squares"]), f(&w["ss"]), &format!("SS {name}"));
        assert_eq!(c["degrees_of_freedom"], w["df"], "DF {name}");
        close(f(&c["mean_square"]), f(&w["ms"]), &format!("MS {name}"));
        close(f(&c["f_computed"]), f(&w["f"]), &format!("F {name}"));
        close(
            f(&c["percent_variation"]),
            f(&w["pct"]),
            &format!("% {name}"),
        );
    }
    let e = &a["error"];
    close(f(&e["sum_of_squares"]), f(&want["error"]["ss"]), "SS error");
    assert_eq!(e["degrees_of_freedom"], want["error"]["df"], "DF error");
    close(f(&e["mean_square"]), f(&want["error"]["ms"]), "MSE");
}

const TOML_2F: &str = r#"
title = "seed 003 style: capture method x kernel configuration"
replications = 4
response = "tput"
seed = 5
[[factor]]
name = "method"
levels = ["kernel-module", "PF_PACKET", "PF_RING"]
[[factor]]
name = "config"
levels = ["default", "custom"]
"#;

/// A two-factor (3 x 2) replicated data set with main effects, an
/// interaction and noise; returns (cell-major values, CSV with the rows in
/// a scrambled order and a spare `run` column).
fn data_3x2(seed: u64) -> (Vec<f64>, String) {
    let methods = ["kernel-module", "PF_PACKET", "PF_RING"];
    let configs = ["default", "custom"];
    let mut rng = Rng(seed);
    let mut values = Vec::new();
    let mut rows = Vec::new();
    for (i, m) in methods.iter().enumerate() {
        for (j, c) in configs.iter().enumerate() {
            let base = [943.0, 530.0, 660.0][i] + [0.0, 8.0][j] + rng.next() * 60.0;
            for _ in 0..4 {
                let y = base + (rng.next() - 0.5) * 20.0;
                values.push(y);
                rows.push((rng.next(), format!("{m},{c},{y}")));
            }
        }
    }
    rows.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut csv = String::from("# measured elsewhere\nmethod, config ,tput\n");
    for (_, r) in rows {
        csv.push_str(&r);
        csv.push('\n');
    }
    (values, csv)
}

#[test]
fn data_mode_matches_numpy_scipy() {
    let dir = TempDir::new("data");
    let (values, csv) = data_3x2(11);
    let toml = dir.write("exp.toml", TOML_2F);
    let obs = dir.write("obs.csv", &csv);
    let factors = json!([
        {"name": "method", "levels": ["kernel-module", "PF_PACKET", "PF_RING"]},
        {"name": "config", "levels": ["default", "custom"]},
    ]);

    let got = lr_json(&[
        "experiment",
        toml.to_str().unwrap(),
        "--data",
        obs.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(got["complete"], true);
    assert_eq!(got["observations"].as_array().unwrap().len(), 24);
    assert_eq!(got["anova"]["error"]["degrees_of_freedom"], 18);
    compare(&got, &reference(&dir, &factors, 4, &values, "none"));

    // --transform log: the multiplicative model of seed 003 Table 5.
    let got = lr_json(&[
        "experiment",
        toml.to_str().unwrap(),
        "--data",
        obs.to_str().unwrap(),
        "--json",
        "--transform",
        "log",
    ]);
    assert_eq!(got["transform"], "log10");
    compare(&got, &reference(&dir, &factors, 4, &values, "log10"));

    // [data] in the file (relative to it), and --csv writes what --data reads.
    let toml2 = dir.write(
        "exp2.toml",
        &format!("{TOML_2F}\n[data]\nfile = \"obs.csv\"\n"),
    );
    let out_csv = dir.0.join("again.csv");
    let got2 = lr_json(&[
        "experiment",
        toml2.to_str().unwrap(),
        "--json",
        "--csv",
        out_csv.to_str().unwrap(),
    ]);
    compare(&got2, &reference(&dir, &factors, 4, &values, "none"));
    let got3 = lr_json(&[
        "experiment",
        toml.to_str().unwrap(),
        "--data",
        out_csv.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(got3["anova"], got2["anova"], "--csv output re-analysed");
    assert_eq!(got3["observations"], got2["observations"]);

    // The text output has the observations and both tables.
    let (code, text, err) = lr(&[
        "experiment",
        toml.to_str().unwrap(),
        "--data",
        obs.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    for want in [
        "Allocation of variation (ANOVA)",
        "y - y..",
        "method x config",
        "Errors",
        "Effects",
        "method=PF_RING, config=custom",
    ] {
        assert!(text.contains(want), "'{want}' not in:\n{text}");
    }
}

fn one_line_error(args: &[&str], needle: &str) {
    let (code, _, err) = lr(args);
    assert_eq!(code, 1, "{args:?}: exit code; stderr: {err}");
    assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{args:?}: want one line, got: {err}");
    assert!(lines[0].starts_with("linerate: error: "), "{err}");
    assert!(
        lines[0].contains(needle),
        "{args:?}: '{needle}' not in: {err}"
    );
}

#[test]
fn bad_files_give_one_line_errors() {
    let dir = TempDir::new("err");
    let file = |name: &str, text: &str| dir.write(name, text).to_str().unwrap().to_string();
    let base = "replications = 2\n[[factor]]\nname = \"dut\"\nlevels = [\"linux-bridge\", \"linux-ipfwd\"]\n";

    let missing = dir.0.join("nope.toml");
    one_line_error(
        &["experiment", missing.to_str().unwrap()],
        "No such file or directory",
    );
    one_line_error(
        &["experiment", &file("bad.toml", "replications = [\n")],
        "line 1",
    );
    one_line_error(
        &[
            "experiment",
            &file("key.toml", &format!("{base}colour = 1\n")),
        ],
        "unknown field `colour`",
    );
    one_line_error(
        &[
            "experiment",
            &file("benchkey.toml", &format!("{base}[bench]\nspeed = 2\n")),
        ],
        "unknown field `speed`",
    );
    one_line_error(
        &[
            "experiment",
            &file(
                "factor.toml",
                &format!("{base}[[factor]]\nname = \"colour\"\nlevels = [\"red\", \"blue\"]\n"),
            ),
        ],
        "unknown factor 'colour'",
    );
    one_line_error(
        &[
            "experiment",
            &file(
                "one.toml",
                "replications = 2\n[[factor]]\nname = \"dut\"\nlevels = [\"linux-bridge\"]\n",
            ),
        ],
        "factor 'dut' has 1 level(s); a factor needs at least 2",
    );
    one_line_error(
        &[
            "experiment",
            &file(
                "dut.toml",
                "replications = 2\n[[factor]]\nname = \"dut\"\nlevels = [\"linux-bridge\", \"nosuchdut\"]\n",
            ),
        ],
        "dut 'nosuchdut': unknown device under test",
    );
    one_line_error(
        &[
            "experiment",
            &file(
                "size.toml",
                "replications = 2\n[[factor]]\nname = \"frame_size\"\nlevels = [64, 9000]\n",
            ),
        ],
        "frame_size '9000': must be a whole number of bytes in 64..=1518",
    );
    one_line_error(
        &[
            "experiment",
            &file(
                "reps.toml",
                &base.replace("replications = 2", "replications = 0"),
            ),
        ],
        "replications = 0: must be at least 1",
    );
    one_line_error(
        &[
            "experiment",
            &file("resp.toml", &format!("response = \"latency\"\n{base}")),
        ],
        "response 'latency'",
    );
    one_line_error(
        &[
            "experiment",
            &file("tr.toml", &format!("transform = \"sqrt\"\n{base}")),
        ],
        "transform 'sqrt'",
    );

    // Data files.
    let toml = file("exp.toml", TOML_2F);
    let (_, csv) = data_3x2(3);
    let mut lines: Vec<&str> = csv.lines().collect();
    // Drop the last observation of one cell: a missing replication.
    let victim = lines
        .iter()
        .rposition(|l| l.starts_with("PF_RING,custom,"))
        .unwrap();
    lines.remove(victim);
    let short = file("short.csv", &(lines.join("\n") + "\n"));
    one_line_error(
        &["experiment", &toml, "--data", &short],
        "cell (method=PF_RING, config=custom) has 3 of 4 replication(s)",
    );
    let extra = file("extra.csv", &format!("{csv}PF_RING,custom,700\n"));
    one_line_error(
        &["experiment", &toml, "--data", &extra],
        "extra observation: cell (method=PF_RING, config=custom) already has 4 replication(s)",
    );
    let level = file("level.csv", &format!("{csv}PF_RONG,custom,700\n"));
    one_line_error(
        &["experiment", &toml, "--data", &level],
        "factor 'method' has no level 'PF_RONG'",
    );
    let num = file("num.csv", "method,config,tput\nPF_RING,custom,fast\n");
    one_line_error(
        &["experiment", &toml, "--data", &num],
        "line 2: tput 'fast' is not a finite number",
    );
    let col = file("col.csv", "method,tput\nPF_RING,1\n");
    one_line_error(
        &["experiment", &toml, "--data", &col],
        "no column for factor 'config'",
    );
    let fields = file("fields.csv", "method,config,tput\nPF_RING,custom\n");
    one_line_error(
        &["experiment", &toml, "--data", &fields],
        "line 2: 2 fields; the header has 3",
    );
    let nodata = dir.0.join("none.csv");
    one_line_error(
        &["experiment", &toml, "--data", nodata.to_str().unwrap()],
        "data '",
    );
}

/// Stops the child (SIGINT, then SIGKILL) if it still runs, and removes
/// any test bed it left (also when the child was already reaped).
struct Guard {
    child: Option<Child>,
    pid: u32,
}
impl Guard {
    fn new(c: Child) -> Guard {
        Guard {
            pid: c.id(),
            child: Some(c),
        }
    }
}
impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            if c.try_wait().ok().flatten().is_none() {
                // SAFETY: signalling our own child.
                unsafe { libc::kill(self.pid as i32, libc::SIGINT) };
                let t = Instant::now();
                while t.elapsed() < Duration::from_secs(10) && c.try_wait().ok().flatten().is_none()
                {
                    std::thread::sleep(Duration::from_millis(50));
                }
                let _ = c.kill();
                let _ = c.wait();
            }
        }
        for info in testbed::list() {
            if info.owner_pid == self.pid {
                let _ = testbed::down_by_name(&info.name);
            }
        }
    }
}

#[test]
fn real_run_on_namespaces() {
    require_root();
    let dir = TempDir::new("run");
    let toml = dir.write(
        "exp.toml",
        r#"
title = "DuT x frame size"
replications = 2
seed = 9
[bench]
duration = 0.3
warmup = 0.2
[[factor]]
name = "dut"
levels = ["linux-bridge", "linux-ipfwd"]
[[factor]]
name = "frame_size"
levels = [64, 1518]
"#,
    );
    let csv = dir.0.join("obs.csv");
    let t0 = Instant::now();
    let child = Command::new(BIN)
        .args(["experiment", toml.to_str().unwrap(), "--json", "--csv"])
        .arg(&csv)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut g = Guard::new(child);
    let pid = g.pid;
    let out = g.child.take().unwrap().wait_with_output().unwrap();
    let took = t0.elapsed();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "experiment failed: {err}");
    eprintln!("real run: {:.1} s\n{err}", took.as_secs_f64());
    // A progress line per run.
    for i in 1..=8 {
        assert!(err.contains(&format!("run {i}/8: dut=")), "{err}");
    }
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["complete"], true);
    let obs = v["observations"].as_array().unwrap();
    assert_eq!(obs.len(), 8);
    let mut runs: Vec<u64> = obs.iter().map(|o| o["run"].as_u64().unwrap()).collect();
    runs.sort();
    assert_eq!(runs, (1..=8).collect::<Vec<_>>());
    for o in obs {
        let y = o["y"].as_f64().unwrap();
        assert!(y > 0.0, "observation {o}");
    }
    let a = &v["anova"];
    let names: Vec<&str> = a["components"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["dut", "frame_size", "dut x frame_size"]);
    assert_eq!(a["error"]["degrees_of_freedom"], 4);
    let pct: f64 = a["components"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["percent_variation"].as_f64().unwrap())
        .sum::<f64>()
        + a["error"]["percent_variation"].as_f64().unwrap();
    assert!((pct - 100.0).abs() < 1e-6, "percentages sum to {pct}");
    // The CSV re-analyses to the same table.
    let again = lr_json(&[
        "experiment",
        toml.to_str().unwrap(),
        "--data",
        csv.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(again["anova"], v["anova"]);
    // Nothing left behind.
    assert!(
        testbed::list().iter().all(|i| i.owner_pid != pid),
        "a test bed was left"
    );
}

/// Every examples/experiment-*.toml is valid: the bench experiments plan
/// (their factors and levels are checked, nothing runs), the data ones
/// analyse.
#[test]
fn examples_are_valid() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        if !(name.starts_with("experiment-") && name.ends_with(".toml")) {
            continue;
        }
        n += 1;
        let text = std::fs::read_to_string(&p).unwrap();
        let path = p.to_str().unwrap();
        if text.contains("\n[data]") {
            let v = lr_json(&["experiment", path, "--json"]);
            assert_eq!(v["complete"], true, "{name}");
            assert!(v["anova"]["components"].is_array(), "{name}");
        } else {
            let (code, out, err) = lr(&["experiment", path, "--plan"]);
            assert_eq!(code, 0, "{name}: {err}");
            assert!(out.contains("run 1/"), "{name}: {out}");
        }
    }
    assert!(n >= 3, "only {n} examples/experiment-*.toml");
}

/// Ctrl-C during a run: what was measured is printed, without an ANOVA,
/// and no test bed is left behind.
#[test]
fn interrupt_prints_partial_observations() {
    use std::io::{BufRead, BufReader, Read};
    require_root();
    let dir = TempDir::new("int");
    let toml = dir.write(
        "exp.toml",
        "replications = 2\n[bench]\nduration = 0.5\nwarmup = 0.2\n[[factor]]\nname = \"dut\"\nlevels = [\"linux-bridge\", \"linux-ipfwd\"]\n",
    );
    let mut child = Command::new(BIN)
        .args(["experiment", toml.to_str().unwrap(), "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut stdout = child.stdout.take().unwrap();
    let stderr = child.stderr.take().unwrap();
    let g = Guard::new(child);
    // Drain stdout in the background so the child never blocks on it.
    let out_thread = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let mut err = BufReader::new(stderr);
    let mut log = String::new();
    loop {
        let mut line = String::new();
        assert!(err.read_line(&mut line).unwrap() > 0, "ended early: {log}");
        log.push_str(&line);
        if line.starts_with("run 1/4:") {
            assert!(line.contains(" Mpps"), "{line}");
            break;
        }
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(pid as i32, libc::SIGINT) };
    let mut rest = String::new();
    err.read_to_string(&mut rest).unwrap();
    log.push_str(&rest);
    let mut g = g;
    let status = g.child.take().unwrap().wait().unwrap();
    assert!(status.success(), "{status}: {log}");
    assert!(log.contains("interrupted"), "{log}");
    let v: Value = serde_json::from_str(&out_thread.join().unwrap()).unwrap();
    assert_eq!(v["complete"], false);
    assert!(v["anova"].is_null());
    let obs = v["observations"].as_array().unwrap();
    assert!((1..4).contains(&obs.len()), "{obs:?}");
    assert!(obs.iter().all(|o| o["y"].as_f64().unwrap() > 0.0));
    assert!(v["note"].as_str().unwrap().contains("no ANOVA"));
    assert!(
        testbed::list().iter().all(|i| i.owner_pid != pid),
        "a test bed was left"
    );
}
