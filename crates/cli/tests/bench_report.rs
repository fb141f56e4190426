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
    rerun_states_the_spread_between_runs(&prefix, &dir, &history, &results[0]);
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
/// at 64 B only: it finds the first run in the history file and states
/// the spread between the two bridge results (one degree of freedom).
fn rerun_states_the_spread_between_runs(
    prefix: &str,
    dir: &std::path::Path,
    history: &std::path::Path,
    bridge: &serde_json::Value,
) {
    let json = dir.join("rerun.json");
    let _c = cleanup(&format!("{prefix}r"));
    let out = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .env("LINERATE_HISTORY", history)
        .args(["bench", "--dut", "linux-bridge", "--sizes", "64"])
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
        .args(["--no-report", "--name", &format!("{prefix}r"), "--json"])
        .arg(&json)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(v["history"]["runs"], 1, "{}", v["history"]);
    let s64 = |r: &serde_json::Value| {
        let s = &r["sizes"][0];
        assert_eq!(s["frame_size"], 64);
        assert_eq!(s["generator_limited"], false);
        s["throughput_pps"].as_f64().unwrap()
    };
    let (a, b) = (s64(bridge), s64(&v["results"][0]));
    // Two results about their mean: s^2 = sum (x/m - 1)^2 with one degree
    // of freedom; t(0.975, 1) = 12.706204736174698; times sqrt(2).
    let m = (a + b) / 2.0;
    let s = ((a / m - 1.0).powi(2) + (b / m - 1.0).powi(2)).sqrt();
    let want = 12.706204736174698 * s * 2f64.sqrt();
    for got in [
        v["history"]["spread"].as_f64().unwrap(),
        v["results"][0]["throughput_spread"].as_f64().unwrap(),
        v["results"][0]["throughput_spread_history"]
            .as_f64()
            .unwrap(),
    ] {
        assert!((got - want).abs() < 1e-9, "{got} vs {want} ({a}, {b})");
    }
    assert!(
        stdout.contains("between this run and 1 earlier run(s)"),
        "{stdout}"
    );
    assert_eq!(std::fs::read_to_string(history).unwrap().lines().count(), 2);
}
