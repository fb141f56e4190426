//! `linerate bench sink-cpu`: the two `linerate bench` runs (default bed,
//! `--sink-cpu 0`) side by side in its JSON and Markdown section, nothing
//! left behind.

mod support;
use support::*;

#[test]
fn sink_cpu_study_puts_both_runs_side_by_side_and_leaves_nothing() {
    assert!(root(), "this test needs root (network namespaces, XDP)");
    let pid = std::process::id();
    let c = Cleanup {
        dir: std::env::temp_dir().join(format!("lr-sink-cpu-test-{pid}")),
        prefix: format!("lrsc{}", pid % 100_000),
    };
    std::fs::create_dir_all(&c.dir).unwrap();
    let md = c.dir.join("B.md");
    std::fs::write(
        &md,
        "# B\n\n<!-- sink-cpu -->\nold\n<!-- /sink-cpu -->\n\nkept\n",
    )
    .unwrap();
    let (json, html) = (c.dir.join("s.json"), c.dir.join("s.html"));
    let out = linerate_ok(&[
        "bench",
        "sink-cpu",
        "--dut",
        "linux-bridge",
        "--sizes",
        "64",
        "--repetitions",
        "1",
        "--trial",
        "0.1",
        // No final trials: the study's runs, not their confirmation (CI time).
        "--final-trial",
        "0",
        "--name",
        &c.prefix,
        "--json",
        json.to_str().unwrap(),
        "--report",
        html.to_str().unwrap(),
        "--markdown",
        md.to_str().unwrap(),
    ]);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["study"], "sink-cpu");
    // Each run measured the one DuT at the one size; the second with the
    // sink's receive in a thread on CPU 0 (its bed says so).
    let tp = |run: &str| {
        // Each run took the study's --final-trial 0: no final trial.
        let p = &v["data"][run]["procedures"];
        assert!(p["final_trial"].is_null(), "{p}");
        let r = &v["data"][run]["results"];
        assert_eq!(r.as_array().unwrap().len(), 1, "{r}");
        assert_eq!(r[0]["name"], "linux-bridge");
        let s = &r[0]["sizes"];
        assert_eq!(s.as_array().unwrap().len(), 1, "{s}");
        assert_eq!(s[0]["frame_size"], 64);
        s[0]["throughput_pps"].as_f64().expect("a throughput")
    };
    let (a, b) = (tp("default"), tp("sink_cpu"));
    // A run's figure is a lower bound (">=") when its search ended at
    // what the bed could offer or measure (with the sink in a thread, the
    // trials above lose frames on the sink side: invalid, the bed's loss);
    // a ratio from a bound is one too.
    let bound = |run: &str| v["data"][run]["results"][0]["sizes"][0]["generator_limited"] == true;
    let (ma, mb) = (
        if bound("default") { ">=" } else { "" },
        if bound("sink_cpu") { ">=" } else { "" },
    );
    let ratio_mark = match (ma, mb) {
        ("", "") => "",
        ("", _) => ">=",
        (_, "") => "<=",
        _ => "n/a",
    };
    assert!(a > 0.0 && b > 0.0, "{a} {b}");
    let placement = |run: &str| {
        v["data"][run]["environment"]
            .as_array()
            .unwrap()
            .iter()
            .find(|kv| kv[0] == "CPU placement")
            .unwrap()[1]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert!(placement("sink_cpu").contains("in a kernel thread on CPU 0"));
    assert!(!placement("default").contains("kernel thread on CPU 0"));
    // The table (stdout, JSON, Markdown) holds the two runs' figures.
    let ratio = if ratio_mark == "n/a" {
        "n/a".to_string()
    } else {
        format!("{ratio_mark}{:.2}x", b / a)
    };
    let row = format!(
        "| linux-bridge | 64 B | {ma}{:.3} | {mb}{:.3} | {ratio}",
        a / 1e6,
        b / 1e6,
    );
    let m = std::fs::read_to_string(&md).unwrap();
    assert!(m.contains(&row), "{row}\n{m}");
    assert!(
        m.starts_with("# B\n\n<!-- sink-cpu -->\n## Where the sink's receive work runs"),
        "{m}"
    );
    assert!(
        m.ends_with("<!-- /sink-cpu -->\n\nkept\n") && !m.contains("\nold\n"),
        "{m}"
    );
    assert!(
        m.contains("`linerate bench sink-cpu --sizes 64 --repetitions 1 --trial 0.1 --sink-cpu 0 --final-trial 0"),
        "{m}"
    );
    let t = &v["tables"][0]["rows"][0];
    assert_eq!(t[2], format!("{ma}{:.3}", a / 1e6));
    assert_eq!(t[3], format!("{mb}{:.3}", b / 1e6));
    assert!(out.contains(&ratio), "{out}");
    assert!(std::fs::read_to_string(&html)
        .unwrap()
        .contains("sink in a thread on CPU 0"));
    // Nothing left: no namespace of the runs' beds.
    assert_eq!(netns_with(&c.prefix), Vec::<String>::new());
}

#[test]
fn sink_cpu_study_refuses_bad_options_in_one_line() {
    for (args, says) in [
        (
            &["--trial", "0"][..],
            "--trial 0: must be 0.05 to 3600 seconds",
        ),
        (
            &["--repetitions", "0"][..],
            "--repetitions 0: must be 1 to 100",
        ),
        (
            &["--final-trial", "90000"][..],
            "--final-trial 90000: 0 (none) to 86400 seconds",
        ),
    ] {
        let out = linerate(&[&["bench", "sink-cpu"][..], args].concat());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        assert!(err.contains(says), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
}
