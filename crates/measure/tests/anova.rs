//! Full factorial ANOVA: cross-checked against an independent regression
//! computation in Python (tests/anova_check.py, numpy + scipy), against
//! published tables (Jain Table 21.13, seed 003 Table 3), and for bad input.

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use linerate_measure::experiment::{
    anova, Anova, AnovaOptions, Design, ExperimentError, Factor, Observations, Transform,
};
use serde_json::{json, Value};

use linerate_testkit::{require_python, TempDir};

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

fn factor(name: &str, n: usize) -> Factor {
    Factor {
        name: name.into(),
        levels: (1..=n)
            .map(|i| format!("{}{i}", name.to_lowercase()))
            .collect(),
    }
}

/// Random data with real factor effects and interactions plus noise, all
/// positive (so the log transform applies).
fn random_values(design: &Design, seed: u64) -> Vec<f64> {
    let mut rng = Rng(seed);
    let k = design.factors.len();
    let main: Vec<Vec<f64>> = design
        .factors
        .iter()
        .map(|f| f.levels.iter().map(|_| rng.next() * 40.0).collect())
        .collect();
    let mut out = Vec::new();
    for c in 0..design.cells() {
        let lv = design.levels_of(c);
        let inter = rng.next() * 10.0;
        let base: f64 = 100.0 + (0..k).map(|f| main[f][lv[f]]).sum::<f64>() + inter;
        for _ in 0..design.replications {
            out.push(base + (rng.next() - 0.5) * 12.0);
        }
    }
    out
}

static COUNTER: AtomicUsize = AtomicUsize::new(0);

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/anova_check.py")
}

/// Runs the Python cross-check on these observations. A python3 with
/// numpy and scipy ($LINERATE_PYTHON, `python3` in PATH, or Debian's
/// /usr/bin/python3 when the first python3 in PATH is another installation,
/// e.g. pyenv, without them) is required: scripts/setup.sh installs
/// python3-numpy and python3-scipy, and the test fails without them.
fn python_anova(design: &Design, values: &[f64], transform: Transform) -> Value {
    let py = require_python(&["numpy", "scipy"]);
    let input = json!({
        "factors": design.factors,
        "replications": design.replications,
        "values": values,
        "transform": transform,
    });
    let dir = TempDir::new("anova");
    let path = dir.join(&format!(
        "in-{}.json",
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::write(&path, input.to_string()).unwrap();
    let out = Command::new(&py).arg(script()).arg(&path).output().unwrap();
    assert!(
        out.status.success(),
        "anova_check.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn close(a: f64, b: f64, rel: f64, what: &str) {
    let scale = a.abs().max(b.abs()).max(1e-300);
    assert!(
        (a - b).abs() <= rel * scale,
        "{what}: rust {a} vs reference {b} (relative difference {})",
        (a - b).abs() / scale
    );
}

/// Absolute tolerance relative to a reference magnitude (for values that
/// are zero in exact arithmetic or that come out of a subtraction).
fn close_abs(a: f64, b: f64, tol: f64, what: &str) {
    assert!((a - b).abs() <= tol, "{what}: rust {a} vs reference {b}");
}

fn run(design: &Design, values: &[f64], transform: Transform) -> Anova {
    let obs = Observations::from_values(design.clone(), values).unwrap();
    anova(&obs, &AnovaOptions { transform }).unwrap()
}

/// Compares every number of the table and the effects to the Python result.
fn cross_check(design: Design, values: Vec<f64>, transform: Transform) {
    let a = run(&design, &values, transform);
    check_invariants(&a);
    let p = python_anova(&design, &values, transform);
    const REL: f64 = 1e-9;
    let f = |v: &Value| v.as_f64().unwrap();
    close(a.ssy, f(&p["ssy"]), REL, "SSY");
    close(a.ss0, f(&p["ss0"]), REL, "SS0");
    close(a.sst, f(&p["sst"]), REL, "SST");
    close(a.mean.value, f(&p["mean"]), REL, "mean");
    let comps = p["components"].as_array().unwrap();
    assert_eq!(a.components.len(), comps.len());
    for (c, q) in a.components.iter().zip(comps) {
        let n = &c.name;
        assert_eq!(n, q["name"].as_str().unwrap());
        close(c.sum_of_squares, f(&q["ss"]), REL, &format!("SS {n}"));
        assert_eq!(
            c.degrees_of_freedom as u64,
            q["df"].as_u64().unwrap(),
            "DF {n}"
        );
        close(c.mean_square, f(&q["ms"]), REL, &format!("MS {n}"));
        close(c.percent_variation, f(&q["pct"]), REL, &format!("% {n}"));
        match c.f_computed {
            Some(fc) => {
                close(fc, f(&q["f"]), REL, &format!("F {n}"));
                // statrs' inverse F vs scipy's: both iterative.
                close(
                    c.f_table_90.unwrap(),
                    f(&q["f90"]),
                    1e-7,
                    &format!("F90 {n}"),
                );
                close(
                    c.f_table_95.unwrap(),
                    f(&q["f95"]),
                    1e-7,
                    &format!("F95 {n}"),
                );
                let p_value = f(&q["p"]);
                assert_eq!(
                    c.significant_95,
                    Some(p_value < 0.05),
                    "significance 95 {n}"
                );
                assert_eq!(
                    c.significant_90,
                    Some(p_value < 0.10),
                    "significance 90 {n}"
                );
            }
            None => assert!(q.get("f").is_none(), "Python computed F for {n}"),
        }
        let pe = &p["effects"][n.as_str()];
        let group = a.effects.iter().find(|g| &g.name == n).unwrap();
        let pv = pe["values"].as_array().unwrap();
        assert_eq!(group.effects.len(), pv.len());
        // Effects can be near zero: compare against the response scale.
        let scale = a.mean.value.abs().max(1.0);
        for (e, v) in group.effects.iter().zip(pv) {
            close_abs(
                e.value,
                f(v),
                REL * scale,
                &format!("effect {n} {:?}", e.levels),
            );
        }
        if let Some(sd) = group.std_dev {
            for s in pe["sd"].as_array().unwrap() {
                close(sd, f(s), REL, &format!("std dev of effects {n}"));
            }
        }
    }
    match &a.error {
        Some(e) => {
            let q = &p["error"];
            close(e.sum_of_squares, f(&q["ss"]), REL, "SSE");
            assert_eq!(e.degrees_of_freedom as u64, q["df"].as_u64().unwrap());
            close(e.mean_square, f(&q["ms"]), REL, "MSE");
            close(e.percent_variation, f(&q["pct"]), REL, "% error");
            close(a.mean_std_dev.unwrap(), f(&p["mean_sd"]), REL, "sd of mean");
            // Confidence interval half-width = t * sd.
            let g = &a.effects[0];
            let [lo, hi] = g.effects[0].ci_90.unwrap();
            close(
                (hi - lo) / 2.0,
                f(&p["t90"]) * g.std_dev.unwrap(),
                1e-7,
                "CI 90",
            );
            let [lo, hi] = g.effects[0].ci_95.unwrap();
            close(
                (hi - lo) / 2.0,
                f(&p["t95"]) * g.std_dev.unwrap(),
                1e-7,
                "CI 95",
            );
        }
        None => assert!(p.get("error").is_none()),
    }
    eprintln!("cross-checked with Python:\n{}", a.table());
}

/// (b): effects sum to zero along every factor; SST = sum of components.
fn check_invariants(a: &Anova) {
    let total: f64 = a.components.iter().map(|c| c.sum_of_squares).sum::<f64>()
        + a.error.as_ref().map_or(0.0, |e| e.sum_of_squares);
    close(total, a.sst, 1e-10, "SST = sum of components");
    close(a.ssy, a.ss0 + a.sst, 1e-10, "SSY = SS0 + SST");
    let pct: f64 = a
        .components
        .iter()
        .map(|c| c.percent_variation)
        .sum::<f64>()
        + a.error.as_ref().map_or(0.0, |e| e.percent_variation);
    close(pct, 100.0, 1e-10, "percentages add to 100");
    let dfs: usize = a
        .components
        .iter()
        .map(|c| c.degrees_of_freedom)
        .sum::<usize>()
        + a.error.as_ref().map_or(0, |e| e.degrees_of_freedom);
    assert_eq!(dfs, a.observations - 1);
    let sizes: Vec<usize> = a.design.factors.iter().map(|f| f.levels.len()).collect();
    for g in &a.effects {
        // Sum along each factor of the group with the others held fixed.
        let gs: Vec<usize> = g.factors.iter().map(|&f| sizes[f]).collect();
        for (axis, &n_axis) in gs.iter().enumerate() {
            let mut sums = std::collections::HashMap::<Vec<usize>, f64>::new();
            for (i, e) in g.effects.iter().enumerate() {
                let mut rest = i;
                let mut idx = vec![0; gs.len()];
                for j in (0..gs.len()).rev() {
                    idx[j] = rest % gs[j];
                    rest /= gs[j];
                }
                idx[axis] = usize::MAX; // summed over
                *sums.entry(idx).or_default() += e.value;
            }
            assert_eq!(sums.len(), g.effects.len() / n_axis);
            for s in sums.values() {
                assert!(
                    s.abs() < 1e-9 * a.mean.value.abs().max(1.0),
                    "{}: effects sum to {s}",
                    g.name
                );
            }
        }
    }
}

#[test]
fn two_factors_3x4_with_3_replications_matches_python() {
    let d = Design::new(vec![factor("A", 3), factor("B", 4)], 3).unwrap();
    let v = random_values(&d, 2024);
    cross_check(d, v, Transform::None);
}

#[test]
fn three_factors_without_replications_matches_python() {
    let d = Design::new(vec![factor("A", 2), factor("B", 3), factor("C", 4)], 1).unwrap();
    let v = random_values(&d, 7);
    let a = run(&d, &v, Transform::None);
    assert!(a.error.is_none());
    assert!(a
        .components
        .iter()
        .all(|c| c.f_computed.is_none() && c.significant_95.is_none()));
    assert!(a
        .notes
        .iter()
        .any(|n| n.contains("F test") && n.contains("r >= 2")));
    assert_eq!(
        a.components.len(),
        7,
        "3 main effects, 3 two-way, 1 three-way"
    );
    assert_eq!(a.components[6].name, "A x B x C");
    cross_check(d, v, Transform::None);
}

#[test]
fn three_factors_with_replications_and_one_factor_match_python() {
    let d = Design::new(vec![factor("A", 2), factor("B", 3), factor("C", 2)], 2).unwrap();
    let v = random_values(&d, 99);
    cross_check(d, v, Transform::None);
    let d = Design::new(vec![factor("A", 5)], 4).unwrap();
    let v = random_values(&d, 5);
    cross_check(d, v, Transform::None);
}

/// (c): the log transform is applied before the analysis, also in Python.
#[test]
fn log_transform_matches_python_and_rejects_non_positive() {
    let d = Design::new(vec![factor("A", 3), factor("B", 2)], 4).unwrap();
    let v = random_values(&d, 31);
    let plain = run(&d, &v, Transform::None);
    let logged = run(&d, &v, Transform::Log10);
    let logs: Vec<f64> = v.iter().map(|y| y.log10()).collect();
    let by_hand = run(&d, &logs, Transform::None);
    close(logged.sst, by_hand.sst, 1e-12, "SST of log10(y)");
    assert_ne!(logged.sst, plain.sst);
    assert!(logged.table().starts_with("Response: log10(y)"));
    cross_check(d.clone(), v.clone(), Transform::Log10);

    let mut bad = v.clone();
    bad[5] = 0.0;
    let obs = Observations::from_values(d, &bad).unwrap();
    let err = anova(
        &obs,
        &AnovaOptions {
            transform: Transform::Log10,
        },
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("<= 0") && err.contains("A=a1, B=b2") && err.contains("replication 2"),
        "{err}"
    );
    assert!(!err.contains('\n'));
}

/// Jain Table 21.12/21.13 (Scheme versus Spectrum: log10 of execution
/// times, 5 workloads x 3 processors, no replications; Jain's "Errors" row
/// is the interaction here). The input is Jain's Table 21.12 of logarithms:
/// two of its workload rows are not exactly log10 of Table 21.11 (typos in
/// the book), and his ANOVA table was computed from Table 21.12.
#[test]
fn jain_table_21_13_scheme_versus_spectrum() {
    let workloads = [
        "Garbage Collection",
        "Pattern Match",
        "Bignum Addition",
        "Bignum Multiplication",
        "FFT",
    ];
    let d = Design::new(
        vec![
            Factor::new("Workloads", &workloads),
            Factor::new("Processors", &["Scheme86", "Spectrum125", "Spectrum62.5"]),
        ],
        1,
    )
    .unwrap();
    let v = [
        1.6017, 1.9959, 1.7500, -0.0186, 0.2232, 0.0976, -1.7212, -1.4949, -1.7447, -0.5918,
        -0.3737, -0.6271, 1.0090, 1.3092, 1.0060,
    ];
    let a = run(&d, &v, Transform::None);
    close_abs(a.ssy, 22.54, 0.005, "SSY");
    close_abs(a.ss0, 0.39, 0.005, "SS0");
    close_abs(a.sst, 22.15, 0.005, "SST");
    let w = &a.components[0];
    let p = &a.components[1];
    close_abs(w.sum_of_squares, 21.90, 0.005, "SS workloads");
    close_abs(w.percent_variation, 98.89, 0.005, "% workloads");
    close_abs(p.sum_of_squares, 0.22, 0.005, "SS processors");
    close_abs(
        a.components[2].sum_of_squares,
        0.02,
        0.005,
        "SS errors (interaction)",
    );
    assert_eq!(
        (
            w.degrees_of_freedom,
            p.degrees_of_freedom,
            a.components[2].degrees_of_freedom
        ),
        (4, 2, 8)
    );
    close_abs(a.mean.value, 0.1614, 0.00005, "mean");
    let procs: Vec<f64> = a.effects[1].effects.iter().map(|e| e.value).collect();
    for (got, want) in procs.iter().zip([-0.1056, 0.1706, -0.0650]) {
        close_abs(*got, want, 0.00005, "processor effect");
    }
    let work: Vec<f64> = a.effects[0].effects.iter().map(|e| e.value).collect();
    for (got, want) in work.iter().zip([1.6212, -0.0607, -1.8150, -0.6922, 0.9467]) {
        close_abs(
            *got,
            want,
            0.0001,
            "workload effect (Jain rounds row means first)",
        );
    }
    // Jain's F-Computed pools the interaction as error: 1935.48 and 39.29
    // (from his rounded mean squares).
    let ms_err = a.components[2].mean_square;
    close(w.mean_square / ms_err, 1935.48, 1e-3, "F workloads");
    close(p.mean_square / ms_err, 39.29, 1e-3, "F processors");
    check_invariants(&a);
    cross_check(d.clone(), v.to_vec(), Transform::None);
    // The same through the log transform of Table 21.11's raw times.
    let raw = [
        39.97, 99.06, 56.24, 0.958, 1.672, 1.252, 0.01910, 0.03175, 0.01844, 0.256, 0.423, 0.236,
        10.21, 20.28, 10.14,
    ];
    let l = run(&d, &raw, Transform::Log10);
    close_abs(
        l.components[0].percent_variation,
        98.89,
        0.2,
        "% workloads from raw times",
    );
    cross_check(d, raw.to_vec(), Transform::Log10);
}

/// Seed 003 Table 3: cell means of Table 2 (r = 12 samples each) give the
/// factor and interaction sums of squares (the error depends on the raw
/// samples, which the paper does not give: here +-d around each mean).
#[test]
fn seed_003_table_3_from_cell_means() {
    let d = Design::new(
        vec![
            Factor::new("Configuration", &["Default", "Custom"]),
            Factor::new("Capture Method", &["Kernel Module", "PF_PACKET", "PF_RING"]),
        ],
        12,
    )
    .unwrap();
    let means = [943.67, 562.17, 577.08, 951.75, 495.89, 747.72];
    let mut obs = Observations::new(d).unwrap();
    for (c, m) in means.iter().enumerate() {
        for k in 0..12 {
            let dev = if k % 2 == 0 { 1.3 } else { -1.3 };
            obs.add(&[c / 3, c % 3], m + dev).unwrap();
        }
    }
    let a = anova(&obs, &AnovaOptions::default()).unwrap();
    let by = |n: &str| a.components.iter().find(|c| c.name == n).unwrap();
    // Published values from rounded means: agree to about 1e-3.
    close(
        by("Capture Method").sum_of_squares,
        2_195_829.29,
        1e-4,
        "SS capture",
    );
    close(
        by("Configuration").sum_of_squares,
        25_288.13,
        1e-3,
        "SS configuration",
    );
    close(
        by("Configuration x Capture Method").sum_of_squares,
        176_177.69,
        1e-4,
        "SS interactions",
    );
    close(a.ss0, 36_607_259.69, 1e-5, "SS0");
    assert_eq!(a.observations, 72);
    assert_eq!(a.error.as_ref().unwrap().degrees_of_freedom, 66);
    assert_eq!(by("Capture Method").degrees_of_freedom, 2);
    // F-Table at 95 % for (2, 66): 3.136 (the paper's 3.23 is the (2, 40) row).
    close(
        by("Capture Method").f_table_95.unwrap(),
        3.1359,
        1e-3,
        "F table",
    );
    assert_eq!(by("Capture Method").significant_95, Some(true));
    let t = a.table();
    for col in [
        "Component",
        "Sum of Squares",
        "% Variation",
        "DF",
        "Mean Square",
        "F-Comp",
        "F-Table(90%)",
        "F-Table(95%)",
    ] {
        assert!(t.contains(col), "{col} missing:\n{t}");
    }
    for row in [
        "y ",
        "y.. ",
        "y - y..",
        "Configuration x Capture Method",
        "Errors",
        "s_e = sqrt(MSE)",
    ] {
        assert!(t.contains(row), "{row} missing:\n{t}");
    }
    let j: Value = serde_json::from_str(&a.to_json()).unwrap();
    assert_eq!(j["components"][1]["name"], "Capture Method");
    assert_eq!(j["error"]["degrees_of_freedom"], 66);
    assert!(j["effects"][0]["effects"][0]["ci_90"].is_array());
    eprintln!("{a}");
}

#[test]
fn effects_have_confidence_intervals_per_jain() {
    let d = Design::new(vec![factor("A", 3), factor("B", 4)], 3).unwrap();
    let v = random_values(&d, 11);
    let a = run(&d, &v, Transform::None);
    let se = a.error.as_ref().unwrap().std_dev;
    let abr: f64 = 36.0;
    close(
        a.effects[0].std_dev.unwrap(),
        se * (2.0 / abr).sqrt(),
        1e-12,
        "s_alpha",
    );
    close(
        a.effects[1].std_dev.unwrap(),
        se * (3.0 / abr).sqrt(),
        1e-12,
        "s_beta",
    );
    close(
        a.effects[2].std_dev.unwrap(),
        se * (6.0 / abr).sqrt(),
        1e-12,
        "s_gamma",
    );
    close(a.mean_std_dev.unwrap(), se / abr.sqrt(), 1e-12, "s_mu");
    for g in &a.effects {
        for e in &g.effects {
            let [lo, hi] = e.ci_95.unwrap();
            let [lo9, hi9] = e.ci_90.unwrap();
            assert!(lo < lo9 && lo9 < e.value && e.value < hi9 && hi9 < hi);
            assert_eq!(e.significant_95, Some(lo > 0.0 || hi < 0.0));
        }
    }
}

/// (d): bad inputs give one-line errors, never panics.
#[test]
fn bad_inputs_are_one_line_errors() {
    fn one_line<T: std::fmt::Debug>(r: Result<T, ExperimentError>, want: &str) {
        let e = r.unwrap_err().to_string();
        assert!(e.contains(want), "{e:?} lacks {want:?}");
        assert!(!e.contains('\n'), "{e:?}");
    }
    one_line(Design::new(vec![], 2), "no factors");
    one_line(
        Design::new(vec![Factor::new("A", &["x"])], 2),
        "factor 'A' has 1 level(s)",
    );
    one_line(Design::new(vec![Factor::new("A", &[])], 2), "at least 2");
    one_line(
        Design::new(vec![factor("A", 2)], 0),
        "replications must be at least 1",
    );
    one_line(
        Design::new(vec![factor("A", 2), factor("A", 3)], 1),
        "named twice",
    );
    one_line(Design::new(vec![Factor::new("A", &["x", "x"])], 1), "twice");
    one_line(
        Design::new(
            vec![factor("A", 1000); 12]
                .into_iter()
                .enumerate()
                .map(|(i, mut f)| {
                    f.name = format!("F{i}");
                    f
                })
                .collect(),
            1,
        ),
        "more than",
    );

    let d = Design::new(vec![factor("A", 2), factor("B", 3)], 2).unwrap();
    // Wrong number of observations.
    one_line(
        Observations::from_values(d.clone(), &[1.0; 11]),
        "the design needs 12",
    );
    one_line(
        Observations::from_values(d.clone(), &[f64::NAN; 12]),
        "not a finite number",
    );
    let mut o = Observations::new(d.clone()).unwrap();
    one_line(o.add(&[0], 1.0), "1 level indices given");
    one_line(o.add(&[2, 0], 1.0), "out of range for factor 'A'");
    one_line(
        o.add_named(&["a1", "nope"], 1.0),
        "factor 'B' has no level 'nope'",
    );
    one_line(o.set(&[0, 0], 2, 1.0), "beyond the design's 2");
    o.add(&[0, 0], 1.0).unwrap();
    o.add_named(&["a1", "b1"], 2.0).unwrap();
    one_line(o.add(&[0, 0], 3.0), "already has 2 replication(s)");
    // Missing observations.
    one_line(
        anova(&o, &AnovaOptions::default()),
        "missing observations: cell (A=a1, B=b2) has 0 of 2",
    );
    for c in 1..6 {
        o.add(&[c / 3, c % 3], c as f64).unwrap();
    }
    one_line(
        anova(&o, &AnovaOptions::default()),
        "cell (A=a1, B=b2) has 1 of 2",
    );
    for c in 1..6 {
        o.add(&[c / 3, c % 3], c as f64).unwrap();
    }
    // Complete now; identical replications (SSE = 0) do not panic either.
    let a = anova(&o, &AnovaOptions::default()).unwrap();
    assert_eq!(a.error.as_ref().unwrap().sum_of_squares, 0.5);
    let flat = Observations::from_values(d, &[5.0; 12]).unwrap();
    let a = anova(&flat, &AnovaOptions::default()).unwrap();
    assert_eq!(a.sst, 0.0);
    assert!(a
        .components
        .iter()
        .all(|c| c.f_computed.is_none() && c.percent_variation == 0.0));
    assert!(!a.table().is_empty() && !a.to_json().contains("NaN"));
}
