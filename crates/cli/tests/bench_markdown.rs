//! `linerate bench --markdown FILE --section NAME`: the RFC 2544 run puts
//! its section, with the figures of its own JSON, into the file and leaves
//! the rest of it.

mod support;
use support::*;

#[test]
fn the_run_writes_its_own_section_from_its_figures() {
    assert!(root(), "this test needs root (network namespaces, XDP)");
    let pid = std::process::id();
    let c = Cleanup {
        dir: std::env::temp_dir().join(format!("lr-bench-md-{pid}")),
        prefix: format!("lrmd{}", pid % 100_000),
    };
    std::fs::create_dir_all(&c.dir).unwrap();
    let md = c.dir.join("B.md");
    std::fs::write(&md, "# B\n\n<!-- mine -->\nold\n<!-- /mine -->\n\nkept\n").unwrap();
    let json = c.dir.join("r.json");
    let (md_s, json_s) = (md.to_str().unwrap(), json.to_str().unwrap());
    let args = [
        "bench",
        "--final-trial",
        "1",
        "--dut",
        "linux-bridge",
        "--sizes",
        "64",
        "--repetitions",
        "1",
        "--trial",
        "0.1",
        "--frame-loss-sizes",
        "none",
        "--b2b-sizes",
        "none",
        "--no-history",
        "--no-report",
        "--name",
        &c.prefix,
        "--json",
        json_s,
        "--markdown",
        md_s,
        "--section",
        "mine",
    ];
    linerate_ok(&args);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let s = &v["results"][0]["sizes"][0];
    let tp = s["throughput_pps"].as_f64().expect("a throughput");
    let m = std::fs::read_to_string(&md).unwrap();
    assert!(m.starts_with("# B\n\n<!-- mine -->\n## RFC 2544"), "{m}");
    assert!(
        m.ends_with("<!-- /mine -->\n\nkept\n") && !m.contains("\nold\n"),
        "{m}"
    );
    // The command as given, the run's date, its throughput in the table.
    assert!(
        m.contains(&format!("Command: `linerate {}`.", args.join(" "))),
        "{m}"
    );
    assert!(
        m.contains(&format!("Date {},", v["date"].as_str().unwrap())),
        "{m}"
    );
    assert!(
        m.contains(&format!("| linux-bridge | {:.3}", tp / 1e6)),
        "{tp}\n{m}"
    );
    assert!(m.contains("`--no-history`"), "{m}");
    assert_eq!(netns_with(&c.prefix), Vec::<String>::new());
}
