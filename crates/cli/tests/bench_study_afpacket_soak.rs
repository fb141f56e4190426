//! `linerate bench afpacket` and `linerate bench soak`, run short: their
//! figures come from the run (the JSON's raw results are what the tables
//! show) and they leave nothing behind (no namespace, bed record or
//! process). Needs root.

mod support;
use serde_json::Value;
use std::collections::BTreeSet;
use std::time::Duration;
use support::*;

/// The tests run one at a time: each counts the linerate processes that
/// are left, and both would share the 2 CPUs.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Pids running this worktree's linerate binary.
fn linerate_pids() -> BTreeSet<u32> {
    let exe = std::path::Path::new(EXE)
        .canonicalize()
        .unwrap_or_else(|_| EXE.into());
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| std::fs::read_link(format!("/proc/{p}/exe")).is_ok_and(|e| e == exe))
        .collect()
}

/// Network namespaces and bed records named with `prefix` and linerate
/// processes not in `before`: what the run left behind.
fn leftovers(prefix: &str, before: &BTreeSet<u32>) -> Vec<String> {
    let mut v = Vec::new();
    let ns = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .unwrap();
    for l in String::from_utf8_lossy(&ns.stdout).lines() {
        if l.starts_with(prefix) {
            v.push(format!("namespace {l}"));
        }
    }
    for e in std::fs::read_dir(linerate_measure::testbed::STATE_DIR)
        .into_iter()
        .flatten()
        .flatten()
    {
        let n = e.file_name().to_string_lossy().to_string();
        if n.starts_with(prefix) {
            v.push(format!("bed record {n}"));
        }
    }
    for p in linerate_pids().difference(before) {
        v.push(format!("process {p}"));
    }
    v
}

/// Wait until the run left nothing (its watchdogs end just after it).
fn assert_nothing_left(prefix: &str, before: &BTreeSet<u32>) {
    let mut left = Vec::new();
    wait_until(Duration::from_secs(15), "the run's leftovers gone", || {
        left = leftovers(prefix, before);
        left.is_empty()
    });
    assert!(left.is_empty(), "{left:?}");
}

fn read_json(p: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

#[test]
fn afpacket_study_measures_three_paths_and_both_rings_and_leaves_nothing() {
    require_root();
    let _s = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = TempDir::new("afp-study");
    let prefix = format!("lrt{}a", std::process::id());
    let before = linerate_pids();
    let (json, md) = (dir.path().join("a.json"), dir.path().join("B.md"));
    std::fs::write(
        &md,
        "# B\n\n<!-- afpacket -->\nOLD SECTION\n<!-- /afpacket -->\n",
    )
    .unwrap();
    let out = linerate_ok(&[
        "bench",
        "afpacket",
        "--seconds",
        "1",
        "--trial",
        "1",
        "--searches",
        "1",
        "--short-searches",
        "1",
        "--name",
        &prefix,
        "--json",
        json.to_str().unwrap(),
        "--report",
        dir.path().join("a.html").to_str().unwrap(),
        "--markdown",
        md.to_str().unwrap(),
    ]);
    assert_nothing_left(&prefix, &before);
    let v = read_json(&json);
    assert_eq!(v["study"], "afpacket");
    let d = &v["data"];
    let lat = d["latency"].as_array().unwrap();
    let names: Vec<&str> = lat.iter().map(|l| l["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["bridge", "v2", "v3"]);
    for l in lat {
        // Every frame of the run is accounted for at the counter, and the
        // table shows the run's own figures.
        let sent: u64 = l["gen"]["streams"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["sent"].as_u64().unwrap())
            .sum();
        let s = &l["count"]["streams"][0];
        let (got, lost) = (s["packets"].as_u64().unwrap(), s["lost"].as_u64().unwrap());
        assert!(sent > 0 && got > 0 && got + lost <= sent, "{l}");
        let p50 = s["latency"]["p50_ns"].as_f64().unwrap();
        assert!(p50 > 0.0, "{l}");
        let row = format!("{sent}  {got}  {lost}  {:.1}", p50 / 1e3);
        assert!(
            out.lines().any(|x| x
                .split_whitespace()
                .collect::<Vec<_>>()
                .join("  ")
                .contains(&row)),
            "{row}: {out}"
        );
    }
    // Both DuTs searched with 0.2 s and with 1 s trials; the table's rate
    // is the bench's median.
    let rate = d["rate"].as_array().unwrap();
    assert_eq!(rate.len(), 2);
    assert_eq!(rate[0]["trial_s"], 0.2);
    assert_eq!(rate[1]["trial_s"], 1.0);
    let m = std::fs::read_to_string(&md).unwrap();
    for r in rate {
        let res = r["bench"]["results"].as_array().unwrap();
        let duts: Vec<&str> = res.iter().map(|x| x["name"].as_str().unwrap()).collect();
        assert_eq!(duts, ["linerate-afpacket", "linerate-afpacket-v3"]);
        for x in res {
            let s = &x["sizes"][0];
            assert_eq!(s["frame_size"], 64);
            let pps = s["throughput_pps"].as_f64().unwrap();
            assert!(pps > 0.0, "{x}");
            let row = m
                .lines()
                .find(|l| l.starts_with(&format!("| {} |", x["name"].as_str().unwrap())))
                .unwrap();
            assert!(row.contains(&format!(" {:.3}", pps / 1e6)), "{row}");
            // The trials ran for the length asked.
            let tr = s["trials"].as_array().unwrap();
            assert!(tr.iter().any(|t| t["procedure"] == "throughput"), "{x}");
        }
    }
    assert!(
        m.starts_with("# B\n\n<!-- afpacket -->\n## AF_PACKET rings") && !m.contains("OLD SECTION"),
        "{m}"
    );
    assert!(
        m.contains(
            "`linerate bench afpacket --seconds 1 --trial 1 --searches 1 --short-searches 1`"
        ),
        "{m}"
    );
    assert!(m.contains("Goals (issue 19)"), "{m}");
}

#[test]
fn soak_study_samples_the_pipeline_s_memory_and_leaves_nothing() {
    require_root();
    let _s = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = TempDir::new("soak-study");
    let prefix = format!("lrt{}s", std::process::id());
    let before = linerate_pids();
    let json = dir.path().join("s.json");
    let (secs, interval, warmup) = (6u64, 1u64, 2u64);
    let out = linerate_ok(&[
        "bench",
        "soak",
        "--pipelines",
        "fwd",
        "--seconds",
        &secs.to_string(),
        "--interval",
        &interval.to_string(),
        "--warmup",
        &warmup.to_string(),
        "--searches",
        "1",
        "--name",
        &prefix,
        "--json",
        json.to_str().unwrap(),
        "--report",
        dir.path().join("s.html").to_str().unwrap(),
    ]);
    assert_nothing_left(&prefix, &before);
    let v = read_json(&json);
    assert_eq!(v["study"], "soak");
    let d = &v["data"];
    let ps = d["pipelines"].as_array().unwrap();
    assert_eq!(ps.len(), 1);
    let p = &ps[0];
    assert_eq!(p["name"], "fwd");
    // The rate is half the bench's loss-free rate of the same pipeline.
    let bench = d["bench"]["results"][0]["sizes"][0]["throughput_pps"]
        .as_f64()
        .unwrap() as u64;
    assert_eq!(p["loss_free_pps"].as_u64(), Some(bench));
    assert_eq!(p["rate_pps"].as_u64(), Some((bench / 2).max(1)));
    // A sample per interval over the soak, each a real resident size.
    let rss: Vec<(f64, u64)> = p["rss"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s[0].as_f64().unwrap(), s[1].as_u64().unwrap()))
        .collect();
    assert!(rss.len() as u64 > secs / interval, "{rss:?}");
    assert!(rss.windows(2).all(|w| w[1].0 > w[0].0), "{rss:?}");
    assert!(rss.iter().all(|s| s.1 > 1024), "{rss:?}");
    assert!(rss.last().unwrap().0 >= secs as f64 - 0.5, "{rss:?}");
    let first = rss.iter().find(|s| s.0 >= warmup as f64).unwrap().1;
    let growth = rss.last().unwrap().1 as i64 - first as i64;
    assert_eq!(p["growth_kib"].as_i64(), Some(growth));
    let row = out.lines().find(|l| l.starts_with("fwd ")).unwrap();
    assert!(row.contains(&format!("{growth:+} KiB")), "{row}");
    // The balance is the forwarder's own final report's.
    let f = &p["final"];
    let dirs = f["directions"].as_array().unwrap();
    let bal = dirs.iter().all(|x| x["balanced"] == true);
    assert_eq!(p["balanced"].as_bool(), Some(bal));
    assert!(bal, "{f}");
    let got: u64 = dirs.iter().map(|x| x["received"].as_u64().unwrap()).sum();
    let sent = p["gen"]["stats"]["sent"].as_u64().unwrap();
    assert_eq!(p["received"].as_u64(), Some(got));
    assert!(got > 0 && got <= sent, "{got} of {sent}");
    assert!(
        out.contains(&format!("- fwd: received = passed + drops: {bal}")),
        "{out}"
    );
}

#[test]
fn soak_with_a_warm_up_past_its_end_is_one_line_and_builds_nothing() {
    let _s = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let out = linerate(&[
        "bench",
        "soak",
        "--seconds",
        "5",
        "--interval",
        "1",
        "--warmup",
        "10",
        "--report",
        "/dev/null",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("--warmup 10 s"), "{err}");
}
