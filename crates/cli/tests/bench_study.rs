//! `linerate bench STUDY`: the studies of docs/BENCHMARKS.md run as
//! procedures of the binary and write their table, JSON, HTML and Markdown
//! section.

mod support;
use support::*;

/// `linerate bench NAME ARGS --json --report` into a private directory
/// (removed when the returned guard drops): its standard output and its
/// JSON's `data`.
fn study(name: &str, args: &[&str]) -> (String, serde_json::Value, TempDir) {
    let dir = TempDir::new(&format!("study-{name}"));
    let (json, html) = (dir.join("s.json"), dir.join("s.html"));
    let mut a = vec!["bench", name];
    a.extend(args);
    a.extend(["--json", json.to_str().unwrap()]);
    a.extend(["--report", html.to_str().unwrap()]);
    let out = linerate_ok(&a);
    assert!(html.exists(), "{name}: no HTML page");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    (out, v["data"].clone(), dir)
}

#[test]
fn dnac_study_runs_its_four_captures_and_writes_every_output() {
    let dir = std::env::temp_dir().join(format!("lr-study-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let md = dir.join("B.md");
    std::fs::write(
        &md,
        "# Benchmarks\n\n<!-- dnac -->\nold\n<!-- /dnac -->\n\nkept\n",
    )
    .unwrap();
    let (json, html) = (dir.join("d.json"), dir.join("d.html"));
    let out = linerate_ok(&[
        "bench",
        "dnac",
        "--connections",
        "60",
        "--json",
        json.to_str().unwrap(),
        "--report",
        html.to_str().unwrap(),
        "--markdown",
        md.to_str().unwrap(),
    ]);
    assert!(out.contains("Events found per run"), "{out}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["study"], "dnac");
    let d = &v["data"];
    let packets = d["truth"]["packets"].as_u64().unwrap();
    let pairs = d["truth"]["pairs"].as_u64().unwrap();
    assert_eq!(pairs, 60);
    let runs = d["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 4);
    let mut pairs_at = std::collections::HashMap::new();
    for r in runs {
        let t = &r["capture"]["totals"];
        // Every packet of the trace was read, and accounted for.
        assert_eq!(t["received"].as_u64(), Some(packets), "{r}");
        let dropped: u64 = t["dropped"]
            .as_object()
            .unwrap()
            .values()
            .map(|x| x.as_u64().unwrap())
            .sum();
        assert_eq!(t["forwarded"].as_u64().unwrap() + dropped, packets, "{r}");
        let key = format!(
            "{}-{}",
            r["load"].as_str().unwrap(),
            r["ted"].as_str().unwrap()
        );
        pairs_at.insert(key, t["events"]["http_pair"].as_u64().unwrap_or(0));
    }
    // At overload TED keeps the connections' heads: at least as many pairs
    // found as without it (seed 002's finding).
    assert!(pairs_at["high-on"] >= pairs_at["high-off"], "{pairs_at:?}");
    assert!(d["high_pps"].as_u64() > d["low_pps"].as_u64());
    // The HTML page has its plot; the Markdown section replaced the old one
    // in place and named the command.
    let h = std::fs::read_to_string(&html).unwrap();
    assert!(h.contains("<svg") && h.contains("Events found per run"));
    let m = std::fs::read_to_string(&md).unwrap();
    assert!(
        m.starts_with("# Benchmarks\n\n<!-- dnac -->\n## DNAC"),
        "{m}"
    );
    assert!(m.contains("`linerate bench dnac --connections 60 "), "{m}");
    assert!(
        m.ends_with("<!-- /dnac -->\n\nkept\n") && !m.contains("\nold\n"),
        "{m}"
    );
}

#[test]
fn a_study_with_bad_settings_is_one_line_and_writes_nothing() {
    let out = linerate(&[
        "bench",
        "dnac",
        "--overload",
        "0.5",
        "--report",
        "/nonexistent/x.html",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("overload"), "{err}");
}

#[test]
fn capture_study_searches_each_method_and_allocates_the_variation() {
    let (out, d, dir) = study(
        "capture",
        &[
            "--sizes",
            "64,512",
            "--methods",
            "tpacket-v3,xdp-count",
            "--repetitions",
            "2",
            "--trial",
            "0.3",
            "--no-scaling",
        ],
    );
    assert!(
        out.contains("Highest loss-free capture rate, 64-byte frames"),
        "{out}"
    );
    assert!(out.contains("Mpps by frame size"), "{out}");
    // Two factors of two levels each, two replications: the ANOVA table
    // with both factors and their interaction.
    assert!(out.contains("Allocation of variation"), "{out}");
    for row in ["method ", "frame_size ", "Errors "] {
        assert!(out.lines().any(|l| l.starts_with(row)), "{row}: {out}");
    }
    let trials = d["trials"].as_array().unwrap();
    // At least a top-speed trial per method, size and repetition.
    assert!(trials.len() >= 8, "{}", trials.len());
    for t in trials {
        assert!(t["sent"].as_u64().unwrap() > 0, "{t}");
        assert_eq!(
            t["lost"].as_u64().unwrap(),
            t["sent"]
                .as_u64()
                .unwrap()
                .saturating_sub(t["captured"].as_u64().unwrap()),
            "{t}"
        );
    }
    let html = std::fs::read_to_string(dir.join("s.html")).unwrap();
    assert!(html.contains("<svg"));
}

#[test]
fn capture_study_at_one_frame_size_allocates_over_the_methods_only() {
    let out = linerate_ok(&[
        "bench",
        "capture",
        "--sizes",
        "64",
        "--methods",
        "tpacket-v3,xdp-count",
        "--repetitions",
        "2",
        "--trial",
        "0.3",
        "--no-scaling",
        "--report",
        "/dev/null",
    ]);
    assert!(out.contains("Allocation of variation"), "{out}");
    assert!(out.lines().any(|l| l.starts_with("method ")), "{out}");
    assert!(!out.lines().any(|l| l.starts_with("frame_size ")), "{out}");
    assert!(!out.contains("Mpps by frame size"), "{out}");
}

#[test]
fn gen_study_counts_every_paced_frame_at_the_receiver() {
    let (out, d, _dir) = study("gen", &["--seconds", "1"]);
    assert!(out.contains("Maximum single-core 64-byte rate"), "{out}");
    let acc = d["accuracy"].as_array().unwrap();
    assert_eq!(acc.len(), 11, "7 software-paced rates and 4 --xdp rates");
    for a in acc {
        let sent = if a["kind"] == "xdp" {
            a["gen"]["stats"]["sent"].as_u64().unwrap()
        } else {
            a["gen"]["streams"][0]["sent"].as_u64().unwrap()
        };
        assert!(sent > 0, "{a}");
        // The paced rates well below the port's maximum: every frame sent
        // was counted at d0, no more and no fewer.
        if a["requested_pps"].as_f64().is_some_and(|r| r <= 100e3) {
            assert_eq!(a["received"].as_u64(), Some(sent), "{a}");
        }
    }
    // Every sender that ran was counted; the latency of both paths measured
    // from signed frames.
    let max = d["max_rate"].as_array().unwrap();
    assert!(max.len() >= 4, "{max:?}");
    assert!(
        max.iter().all(|m| m["rx_packets"].as_u64().unwrap() > 0),
        "{max:?}"
    );
    let lat = d["latency"].as_array().unwrap();
    assert_eq!(lat.len(), 2);
    for l in lat {
        let s = &l["count"]["streams"][0];
        assert!(s["packets"].as_u64().unwrap() > 0, "{l}");
        assert!(s["latency"]["p50_ns"].as_u64().unwrap() > 0, "{l}");
    }
}

#[test]
fn switch_study_sweeps_inserts_into_both_switches_and_times_the_first_hit() {
    let (out, d, _dir) = study(
        "switch",
        &["--seconds", "1", "--rounds", "5", "--ovs-max", "1000"],
    );
    assert!(out.contains("Flow sweep on in-memory ports"), "{out}");
    let sweep = d["sweep"].as_array().unwrap();
    assert_eq!(sweep.len(), 10, "5 flow counts, cache on and off");
    for s in sweep {
        assert_eq!(s["switch"]["balanced"], true, "{s}");
        assert!(s["switch"]["received"].as_u64().unwrap() > 0, "{s}");
    }
    // One flow always hits the cache; a million flows almost never do.
    let hit = |n: u64| {
        sweep
            .iter()
            .find(|s| s["flows"] == n && s["emc"] == true)
            .unwrap()["switch"]["cache"]["emc_hit_rate"]
            .as_f64()
            .unwrap()
    };
    assert!(
        hit(1) > 0.99 && hit(1_000_000) < 0.1,
        "{} {}",
        hit(1),
        hit(1_000_000)
    );
    let ins = d["insert"].as_array().unwrap();
    let lr: Vec<_> = ins.iter().filter(|i| i["switch"] == "linerate").collect();
    assert_eq!(lr.len(), 5);
    assert!(lr.iter().all(|i| i["table_s"].as_f64().unwrap() > 0.0));
    // Open vSwitch took the 1000 rules (and was not given the larger batches).
    let ovs: Vec<_> = ins.iter().filter(|i| i["switch"] == "ovs").collect();
    let o1k = ovs.iter().find(|i| i["rules"] == 1000).expect("ovs 1000");
    assert_eq!(o1k["flow_count"].as_u64(), Some(1000), "{o1k}");
    assert!(ovs
        .iter()
        .any(|i| i["rules"] == 10_000 && i["skipped"].is_string()));
    let first = d["first"].as_array().unwrap();
    assert_eq!(first.len(), 2);
    for f in first {
        let l = f["latency_us"].as_array().unwrap();
        assert_eq!(l.len(), 5);
        assert!(l.iter().all(|x| x.as_f64().unwrap() > 0.0), "{f}");
    }
    // The private Open vSwitch and its namespace are gone.
    let ns = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .unwrap();
    let ns = String::from_utf8_lossy(&ns.stdout);
    assert!(!ns.lines().any(|l| l.starts_with("lrswb-")), "{ns}");
}
