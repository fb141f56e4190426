//! `linerate bench overload` and the switch study's part `veth`: short runs
//! whose tables must be the figures of the runs' JSON, with every test bed
//! removed at the end.

mod support;
use serde_json::Value;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;
use support::*;

/// One bench at a time: both pin to the same CPUs.
static ONE_BENCH: Mutex<()> = Mutex::new(());

/// `linerate ARGS`, which must succeed within `limit`; its pid and stdout.
fn run_study(args: &[&str], hist: &std::path::Path, limit: Duration) -> (u32, String) {
    let c = Command::new(EXE)
        .args(args)
        .env("LINERATE_HISTORY", hist)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run linerate");
    let p = Proc::from(c);
    let pid = p.pid();
    let out = p.wait_output(limit, &args.join(" "));
    assert_ok(&out, &args.join(" "));
    (pid, String::from_utf8_lossy(&out.stdout).into_owned())
}

/// No namespace and no bed record named with `prefix` is left.
fn assert_no_bed_left(prefix: &str) {
    let ns = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let ns = String::from_utf8_lossy(&ns.stdout);
    assert!(!ns.lines().any(|l| l.starts_with(prefix)), "{ns}");
    let left: Vec<String> = std::fs::read_dir("/run/linerate/testbeds")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(prefix))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap()
}

#[test]
fn overload_study_tables_are_the_runs_figures() {
    require_root();
    let _one = ONE_BENCH.lock().unwrap_or_else(|e| e.into_inner());
    let dir = TempDir::new("lr-ovstudy");
    let md = dir.path().join("B.md");
    std::fs::write(
        &md,
        "# B\n\n<!-- overload -->\nold\n<!-- /overload -->\n\nkept\n",
    )
    .unwrap();
    let json = dir.path().join("o.json");
    let (pid, out) = run_study(
        &[
            "bench",
            "overload",
            "--seconds",
            "1",
            "--repeat",
            "1",
            "--duts",
            "linux-bridge,linerate-afxdp",
            "--json",
            json.to_str().unwrap(),
            "--report",
            dir.path().join("o.html").to_str().unwrap(),
            "--markdown",
            md.to_str().unwrap(),
        ],
        &dir.path().join("history.jsonl"),
        Duration::from_secs(120),
    );
    assert!(out.contains("Targets of issue 2"), "{out}");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["study"], "overload");
    let d = &v["data"];
    let m = std::fs::read_to_string(&md).unwrap();
    assert!(
        m.starts_with("# B\n\n<!-- overload -->\n## L2 forwarding at overload"),
        "{m}"
    );
    assert!(
        m.ends_with("<!-- /overload -->\n\nkept\n") && !m.contains("\nold\n"),
        "{m}"
    );
    // The two DuTs asked for, in that order, each forwarded at overload;
    // their rows carry the bench's own median and the bridge ratio.
    let res = d["bench"]["results"].as_array().unwrap();
    let names: Vec<&str> = res.iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["linux-bridge", "linerate-afxdp"]);
    let bridge = f(&res[0]["median_pps"]);
    // Offered and forwarded are counted over one window: nothing forwards
    // more than it was offered (the generator's own rate over its whole
    // run, gaps between calls included, read under it: 3.889 < 3.966).
    for t in res.iter().flat_map(|r| r["trials"].as_array().unwrap()) {
        let (o, fw) = (f(&t["offered_pps"]), f(&t["forwarded_pps"]));
        assert!(fw <= o * 1.01, "forwarded {fw} > offered {o}: {t}");
    }
    for r in res {
        let med = f(&r["median_pps"]);
        assert!(med > 0.0, "{r}");
        let row = format!(
            "| {}: {} | ",
            r["name"].as_str().unwrap(),
            r["description"].as_str().unwrap()
        );
        let line = m.lines().find(|l| l.starts_with(&row)).expect(&row);
        assert!(
            line.contains(&format!("| **{:.3}** |", med / 1e6)),
            "{line}"
        );
        assert!(
            line.contains(&format!("| {:.2}x |", med / bridge)),
            "{line}"
        );
    }
    // The veth forwarder's cycles from its trial's profile.
    let c = &res[1]["trials"][0]["dut_account"]["profile"]["cycles_per_packet"];
    let line = m
        .lines()
        .find(|l| l.starts_with("| linerate-afxdp (veth, 64 B) |"))
        .expect("cycles row");
    assert!(
        line.contains(&format!("| {:.1} |", f(&c["total"]))),
        "{line}"
    );
    // The pure-CPU rows: Mpps and cycles of the mem runs, which forwarded
    // every frame the source gave.
    for (label, j) in [
        ("mem ports", &d["mem"]),
        ("mem ports, MAC rewrite", &d["mem_rewrite"]),
    ] {
        let dir0 = &j["directions"][0];
        assert_eq!(dir0["balanced"], true, "{j}");
        let mpps = f(&dir0["forwarded"]) / f(&j["elapsed_s"]) / 1e6;
        assert!(mpps > 1.0, "{j}");
        let row = format!(
            "| linerate fwd, {label} | {mpps:.1} | {:.1} |",
            f(&j["profile"]["cycles_per_packet"]["total"])
        );
        assert!(m.contains(&row), "{row}\n{m}");
    }
    // testpmd: its Mpps per port, or the reason it did not run.
    let t = &d["testpmd_null"];
    match t["mpps_per_port"].as_array() {
        Some(p) => {
            let mean = p.iter().map(f).sum::<f64>() / p.len() as f64;
            assert!(mean > 0.0, "{t}");
            assert!(
                m.contains(&format!("(per port, mean of the ports) | {mean:.1} |")),
                "{m}"
            );
        }
        None => assert!(
            m.contains(&format!(
                "| unavailable: {} |",
                t["unavailable"].as_str().unwrap()
            )),
            "{m}"
        ),
    }
    assert_no_bed_left(&format!("lrov{pid}x"));
}

#[test]
fn switch_study_veth_part_tables_the_bench_run() {
    require_root();
    let _one = ONE_BENCH.lock().unwrap_or_else(|e| e.into_inner());
    let dir = TempDir::new("lr-swveth");
    let json = dir.path().join("s.json");
    let hist = dir.path().join("history.jsonl");
    let (pid, out) = run_study(
        &[
            "bench",
            "switch",
            "--parts",
            "veth",
            "--veth-repetitions",
            "1",
            "--veth-duts",
            "linux-bridge,linerate-switch",
            // No final trials (CI time): the part's runs, not their confirmation.
            "--veth-final-trial",
            "0",
            "--json",
            json.to_str().unwrap(),
            "--report",
            dir.path().join("s.html").to_str().unwrap(),
        ],
        &hist,
        Duration::from_secs(120),
    );
    assert!(
        out.contains("Forwarding through the veth test bed"),
        "{out}"
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert!(v["data"]["sweep"].as_array().unwrap().is_empty());
    assert!(v["data"]["veth"]["procedures"]["final_trial"].is_null());
    let res = v["data"]["veth"]["results"].as_array().unwrap();
    let names: Vec<&str> = res.iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["linux-bridge", "linerate-switch"]);
    let t = v["tables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| {
            t["title"]
                .as_str()
                .unwrap()
                .starts_with("Forwarding through the veth")
        })
        .expect("veth table");
    let rows = t["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    let tp = |r: &Value| {
        let s = &r["sizes"][0];
        assert_eq!(s["frame_size"], 64);
        assert_eq!(s["searches"].as_array().unwrap().len(), 1, "one repetition");
        f(&s["throughput_pps"]) / 1e6
    };
    let (b, sw) = (tp(&res[0]), tp(&res[1]));
    assert!(b > 0.0 && sw > 0.0, "{b} {sw}");
    // Each row is its DuT's throughput, and the switch's ratio is to the
    // bridge's of the same run.
    let cell = |r: usize, c: usize| rows[r][c].as_str().unwrap().to_string();
    assert_eq!(cell(0, 0), "linux-bridge");
    assert!(cell(0, 2).ends_with(&format!("{b:.3}")), "{rows:?}");
    assert!(cell(1, 2).ends_with(&format!("{sw:.3}")), "{rows:?}");
    assert!(cell(1, 3).ends_with(&format!("{:.2}", sw / b)), "{rows:?}");
    assert_eq!(cell(1, 5), res[1]["status"].as_str().unwrap());
    // The bench kept its history where it was told to, and no bed is left.
    assert!(hist.exists());
    assert_no_bed_left(&format!("lrsw{pid}x"));
}
