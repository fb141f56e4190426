//! `linerate bench` end to end: a short RFC 2544 run on real test beds
//! (Linux bridge, linerate fwd in XDP mode and in AF_PACKET mode), then the
//! JSON checked for what every trial must hold and the HTML report
//! rendered by headless Chromium with every DuT's color in the plots; then
//! a second short run with the same settings states the spread between
//! the two runs, kept in the history file.

mod support;
use support::{chromium, require_root, Netns};

use std::path::PathBuf;
use std::process::Command;

use linerate_measure::report::svg::PALETTE;

/// The namespaces of the bench's three runs (`{prefix}{i}-{part}`), removed
/// on drop if the test fails half way.
fn cleanup(prefix: &str) -> Netns {
    Netns::adopt(
        (0..3)
            .flat_map(|i| ["gen", "dut", "sink"].map(|part| format!("{prefix}{i}-{part}")))
            .collect(),
    )
}

#[test]
fn rfc2544_run_reports_every_trial_and_renders() {
    require_root();
    let prefix = format!("lrbr{}", std::process::id() % 100_000);
    let _c = cleanup(&prefix);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("bench-report-{prefix}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("bench.json");
    let html = dir.join("bench.html");
    let history = dir.join("history.jsonl");
    let duts = ["linux-bridge", "linerate-xdp", "linerate-afpacket"];
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_linerate"));
    cmd.env("LINERATE_HISTORY", &history)
        .args(["bench", "--quick", "--name", &prefix])
        .arg("--json")
        .arg(&json)
        .arg("--report")
        .arg(&html);
    for d in duts {
        cmd.args(["--dut", d]);
    }
    let out = cmd.output().expect("run linerate bench");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "bench failed: {stderr}");
    // The table names every DuT at both sizes.
    for d in duts {
        assert!(
            stdout.lines().filter(|l| l.starts_with(d)).count() >= 2,
            "{d} missing from the table:\n{stdout}"
        );
    }
    // Each figure says the trials it rests on: --quick has no final
    // trials, so the search's 0.2 s ones.
    let table: Vec<&str> = stdout
        .lines()
        .skip_while(|l| !(l.starts_with("DuT") && l.contains("trial s")))
        .skip(1)
        .take_while(|l| !l.starts_with("trial s:"))
        .collect();
    for d in duts {
        let rows: Vec<&&str> = table.iter().filter(|l| l.starts_with(d)).collect();
        assert!(
            rows.len() == 2 && rows.iter().all(|l| l.contains(" 0.2/0.2 ")),
            "{d}: no trial length:\n{stdout}"
        );
    }
    // Progress lines name the current trial.
    assert!(stderr.contains("search") || stderr.contains("probe"));

    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    // The empty bed's latency at both sizes, every flow stamped.
    let empty = v["empty_bed"].as_array().unwrap();
    assert_eq!(empty.len(), 2, "{empty:?}");
    for e in empty {
        let l = &e["trial"]["latency"];
        assert!(l["samples"].as_u64().unwrap() > 1000, "{e}");
        let (min, p50) = (l["min_ns"].as_f64().unwrap(), l["p50_ns"].as_f64().unwrap());
        assert!(min > 0.0 && min <= p50 && p50 < 1e6, "{e}");
    }
    assert!(stdout.contains("empty bed"), "{stdout}");
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), duts.len());
    for (r, d) in results.iter().zip(duts) {
        assert_eq!(r["name"], d);
        assert_eq!(r["status"], "ok", "{d}: {}", r["status"]);
        let sizes = r["sizes"].as_array().unwrap();
        let got: Vec<u64> = sizes
            .iter()
            .map(|s| s["frame_size"].as_u64().unwrap())
            .collect();
        assert_eq!(got, vec![64, 1518], "{d}");
        for s in sizes {
            let fs = s["frame_size"].as_u64().unwrap();
            // What the summaries say beyond the numbers, in the JSON too.
            assert!(s["notes"].is_array(), "{d} {fs}: notes");
            let tp = s["throughput_pps"].as_f64().unwrap_or(0.0);
            assert!(tp > 1000.0, "{d} {fs}: throughput {tp}");
            let trials = s["trials"].as_array().unwrap();
            assert_eq!(trials[0]["procedure"], "probe");
            for t in trials {
                let (sent, recv, lost) = (
                    t["sent"].as_u64().unwrap(),
                    t["received"].as_u64().unwrap(),
                    t["lost"].as_u64().unwrap(),
                );
                assert_eq!(lost, sent.saturating_sub(recv), "{d} {fs}: {t}");
                // The generator's count is the kernel's count of g0's
                // transmissions (+ refused), and the sink's is s0's.
                let k = &t["kernel"];
                assert_eq!(
                    k["gen_iface_tx"].as_u64().unwrap()
                        + k["gen_iface_xmit_errors"].as_u64().unwrap(),
                    sent,
                    "{d} {fs}: {t}"
                );
                assert_eq!(k["sink_iface_rx"].as_u64().unwrap(), recv, "{d} {fs}: {t}");
                assert_eq!(k["agrees"], true);
                // Verified frames: nothing foreign, late or duplicated on
                // this bed (no IPv6, no ARP), and never more than sent.
                let v = &t["verify"];
                for f in ["foreign", "duplicates", "unchecked"] {
                    assert_eq!(v[f], 0, "{d} {fs}: {f}: {t}");
                }
                assert!(recv <= sent, "{d} {fs}: {t}");
            }
            // Every paced trial that counted is valid and within what the
            // DuT's rings absorb of generator lateness.
            // (On a loaded machine a rate may stay invalid through its
            // repeats: then the trials before it are those repeats, at the
            // same rate, and it counts as the bed's bound.)
            for (i, t) in trials.iter().enumerate() {
                if t["repeated"] == false && t["procedure"] == "throughput" && t["lost"] == 0 {
                    let invalid = !t["invalid"].as_array().unwrap().is_empty();
                    let repeats = i >= 2
                        && trials[i - 2..i].iter().all(|x| {
                            x["repeated"] == true && x["requested_pps"] == t["requested_pps"]
                        });
                    assert!(!invalid || repeats, "{d} {fs}: {t}");
                }
            }
            // The throughput is a rate that passed with zero loss: the rate
            // asked of a passing trial, or the top speed when that passed.
            let passed = trials.iter().any(|t| {
                let rate = t["requested_pps"]
                    .as_f64()
                    .unwrap_or_else(|| t["offered_pps"].as_f64().unwrap());
                t["lost"] == 0
                    && t["invalid"].as_array().unwrap().is_empty()
                    && (rate - tp).abs() <= tp * 1e-9
            });
            assert!(passed, "{d} {fs}: no lossless trial near {tp}");
            let lat = &trials[s["latency_trial"].as_u64().unwrap() as usize]["latency"];
            assert!(lat["samples"].as_u64().unwrap() > 0, "{d} {fs}: {lat}");
            let (p50, p99) = (
                lat["p50_ns"].as_f64().unwrap(),
                lat["p99_ns"].as_f64().unwrap(),
            );
            assert!(p50 > 0.0 && p50 <= p99, "{d} {fs}: {lat}");
            // The row's baseline: the empty bed at the latency trial's own
            // rate and size (not one rate for every row).
            let b = &s["latency_baseline"];
            let lt = &trials[s["latency_trial"].as_u64().unwrap() as usize];
            assert_eq!(
                b["rate_pps"].as_f64(),
                lt["requested_pps"].as_f64(),
                "{d} {fs}: {b}"
            );
            assert!(b["p50_ns"].as_f64().unwrap() > 0.0, "{d} {fs}: {b}");
            if fs == 64 {
                assert!(!s["frame_loss"].as_array().unwrap().is_empty());
                assert!(!s["back_to_back"].as_array().unwrap().is_empty());
            }
        }
    }
    // Nothing left behind.
    let ns = Command::new("ip").args(["netns", "list"]).output().unwrap();
    assert!(
        !String::from_utf8_lossy(&ns.stdout).contains(&prefix),
        "namespaces left behind"
    );

    let page = std::fs::read_to_string(&html).unwrap();
    assert!(!page.contains("<script") && !page.contains("NaN"));
    assert!(page.contains("Every trial"));
    // What an audit needs: the empty bed, per-trial lateness and whether a
    // trial counted, the CPU placement, the validity rules.
    for want in [
        "Empty bed",
        "every flow",
        "generator late (ms)",
        "foreign / late / duplicated / reordered",
        "counted",
        "CPU placement",
        "valid trials",
        "p50 minus the empty bed",
        "trial length NDR / PDR (s)",
        "schedule slipped",
    ] {
        assert!(page.contains(want), "the report lacks '{want}'");
    }
    // A first run here: no earlier run, no spread (one search per size);
    // the run is kept, every DuT at both sizes.
    assert_eq!(v["history"]["runs"], 0, "{}", v["history"]);
    assert!(v["history"]["spread"].is_null());
    assert!(results.iter().all(|r| r["throughput_spread"].is_null()));
    let kept = std::fs::read_to_string(&history).unwrap();
    assert_eq!(kept.lines().count(), 1);
    let run: serde_json::Value = serde_json::from_str(kept.lines().next().unwrap()).unwrap();
    assert_eq!(run["results"].as_array().unwrap().len(), 2 * duts.len());
    // Kept with each DuT's version (and, for the spec DuTs, the spec's
    // hash): a changed DuT does not pool with these.
    for p in run["results"].as_array().unwrap() {
        assert!(p["dut_version"].is_string(), "{p}");
    }
    assert!(
        kept.contains(r#""dut":"linux-bridge""#) && kept.contains("fnv1a64:"),
        "{kept}"
    );
    rerun_states_the_spread_between_runs(&prefix, &dir, &history, results);
    let png = dir.join("bench.png");
    chromium::screenshot(&html, &png, &dir.join("profile"), 3000);
    let shot = chromium::Shot::load(&png);
    let white = shot.count([255, 255, 255]);
    assert!(
        white < (shot.width * shot.height) as usize,
        "screenshot is blank"
    );
    for (c, d) in PALETTE.iter().zip(duts) {
        let n = shot.count(chromium::hex(c));
        assert!(n > 500, "{d} (color {c}) shows in only {n} pixels");
    }
    let _ = std::fs::remove_dir_all(dir.join("profile"));
}

/// A second run with the first's settings (those of --quick), the bridge
/// and linerate-afpacket at both sizes: it finds the first run in the
/// history file and states the spread between the two runs (four pairs of
/// results, in logarithms: four degrees of freedom); then a third run of
/// the bridge at 64 B alone against a history of its own, one pair (one
/// degree of freedom): too few to state a spread, and it says so.
fn rerun_states_the_spread_between_runs(
    prefix: &str,
    dir: &std::path::Path,
    history: &std::path::Path,
    first: &[serde_json::Value],
) {
    let rerun = |tag: &str, duts: &[&str], sizes: &str, history: &std::path::Path| {
        let json = dir.join(format!("rerun-{tag}.json"));
        let _c = cleanup(&format!("{prefix}{tag}"));
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_linerate"));
        cmd.env("LINERATE_HISTORY", history).arg("bench");
        for d in duts {
            cmd.args(["--dut", d]);
        }
        let out = cmd
            .args(["--sizes", sizes])
            .args(["--repetitions", "1", "--trial", "0.2", "--resolution", "2"])
            // --quick has no final trials; the default has (other settings).
            .args(["--final-trial", "0"])
            .args([
                "--no-latency",
                "--frame-loss-sizes",
                "none",
                "--b2b-sizes",
                "none",
            ])
            .args(["--no-report", "--name", &format!("{prefix}{tag}"), "--json"])
            .arg(&json)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        (v, String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let tp = |r: &serde_json::Value, size: u64| {
        let s = r["sizes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["frame_size"] == size)
            .unwrap();
        (!s["generator_limited"].as_bool().unwrap()).then(|| s["throughput_pps"].as_f64().unwrap())
    };
    let by_name = |rs: &[serde_json::Value], d: &str| {
        let r = rs
            .iter()
            .find(|r| r["name"] == d)
            .unwrap_or_else(|| panic!("{d} missing"));
        assert_eq!(r["status"], "ok", "{r}");
        r.clone()
    };
    let duts = ["linux-bridge", "linerate-afpacket"];
    let (v, stdout) = rerun("r", &duts, "64,1518", history);
    assert_eq!(v["history"]["runs"], 1, "{}", v["history"]);
    let again = v["results"].as_array().unwrap();
    // Each pair in logarithms about its mean: (ln a - ln b)^2 / 2, one
    // degree of freedom each; the ratio's interval exp(t s sqrt(2)).
    let (mut ss, mut dof) = (0.0f64, 0usize);
    for d in duts {
        for size in [64, 1518] {
            if let (Some(a), Some(b)) = (tp(&by_name(first, d), size), tp(&by_name(again, d), size))
            {
                ss += (a.ln() - b.ln()).powi(2) / 2.0;
                dof += 1;
            }
        }
    }
    if dof < 3 {
        // A result the generator bounded (a loaded machine) leaves too
        // few pairs: said, not stated.
        assert!(v["history"]["spread"].is_null(), "{}", v["history"]);
        assert!(stdout.contains("share too few results"), "{stdout}");
    } else {
        // t(0.975, dof) for 3 and 4 degrees of freedom.
        let t = *[3.182446305284263, 2.7764451051977987]
            .get(dof - 3)
            .expect("t for 3..=4 degrees of freedom");
        let want = (t * (ss / dof as f64).sqrt() * 2f64.sqrt()).exp() - 1.0;
        let got = v["history"]["spread"].as_f64().unwrap();
        assert!((got - want).abs() < 1e-9, "{got} vs {want} (dof {dof})");
        for r in again {
            let spread = r["throughput_spread"].as_f64().unwrap();
            assert_eq!(r["throughput_spread_history"].as_f64(), Some(got), "{r}");
            assert!(spread >= got, "{r}");
        }
        assert!(
            stdout.contains("between this run and 1 earlier run(s)"),
            "{stdout}"
        );
    }
    assert_eq!(std::fs::read_to_string(history).unwrap().lines().count(), 2);
    // One pair alone: too few, said.
    let lone = dir.join("history-lone.jsonl");
    let _ = std::fs::remove_file(&lone);
    std::fs::write(
        &lone,
        std::fs::read_to_string(history)
            .unwrap()
            .lines()
            .next()
            .unwrap()
            .to_owned()
            + "\n",
    )
    .unwrap();
    let (v, stdout) = rerun("l", &duts[..1], "64", &lone);
    assert_eq!(v["history"]["runs"], 1, "{}", v["history"]);
    assert!(v["history"]["spread"].is_null(), "{}", v["history"]);
    assert!(v["results"][0]["throughput_spread"].is_null());
    assert!(
        stdout.contains("the 1 earlier run(s) here share too few results with this one"),
        "{stdout}"
    );
    assert_eq!(std::fs::read_to_string(history).unwrap().lines().count(), 2);
}
