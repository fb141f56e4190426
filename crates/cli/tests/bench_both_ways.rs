//! `linerate bench --direction uni,bi`: every DuT one way and both ways at
//! once. Each direction of a trial both ways is counted and verified on
//! its own (forward g0 -> s0, reverse s0 -> g0) and cross-checked with the
//! kernel's counters of that direction's interfaces; the aggregate passes
//! only when neither direction loses. A spec that forwards one way only is
//! not measured both ways. Needs root.

use std::process::{Command, Stdio};
use std::time::Duration;

mod support;
use support::{require_root, Proc, TempDir, EXE};

#[test]
fn both_ways_counts_each_direction_exactly() {
    require_root();
    let dir = TempDir::new("bench-bi");
    let json = dir.join("b.json");
    let oneway = dir.write(
        "oneway.toml",
        "name = \"oneway\"\ndescription = \"d0 -> d1 only\"\nmode = \"l3\"\nstart = \"sysctl -qw net.ipv4.ip_forward=1\"\nboth_ways = false\n",
    );
    let child = Command::new(EXE)
        .args(["bench", "--dut", "linux-bridge", "--dut-file"])
        .arg(&oneway)
        .args([
            "--direction",
            "uni,bi",
            // (Two generators on one core: 10 s trials both ways rarely
            // stay valid on 2 CPUs; the final trial is tested elsewhere.)
            "--final-trial",
            "0",
            "--sizes",
            "64",
            "--trial",
            "0.2",
            "--repetitions",
            "1",
            "--latency-rate",
            "off",
            "--frame-loss-sizes",
            "none",
            "--b2b-sizes",
            "none",
            "--no-report",
            "--no-history",
            "--json",
        ])
        .arg(&json)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = Proc::from(child).wait_output(Duration::from_secs(300), "bench");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let rs = v["results"].as_array().unwrap();
    let find = |name: &str, d: &str| {
        rs.iter()
            .find(|r| r["name"] == name && r["direction"] == d)
            .unwrap_or_else(|| panic!("no {name} {d}: {v}"))
    };
    assert_eq!(
        find("oneway", "bi")["status"],
        "skipped: forwards one way only"
    );
    assert_eq!(find("oneway", "uni")["status"], "ok");
    let uni = find("linux-bridge", "uni");
    let bi = find("linux-bridge", "bi");
    assert_eq!(bi["status"], "ok", "{bi}");
    assert!(uni["check"]["directions"].is_null(), "{}", uni["check"]);
    // The check trial (2000 frames at 20 kpps): 1000 each way, every one
    // through, each direction's kernel counters agreeing with its counts.
    let check = &bi["check"];
    let dirs = check["directions"].as_array().unwrap();
    assert_eq!(dirs.len(), 2, "{check}");
    let mut sent = 0;
    for d in dirs {
        assert_eq!(d["sent"], 1000, "{d}");
        assert_eq!(d["received"], 1000, "{d}");
        assert_eq!(d["lost"], 0, "{d}");
        assert_eq!(d["kernel"]["agrees"], true, "{d}");
        assert_eq!(d["kernel"]["gen_iface_tx"], 1000, "{d}");
        assert_eq!(d["kernel"]["sink_iface_rx"], 1000, "{d}");
        for k in ["foreign", "stale", "duplicates"] {
            assert_eq!(d["verify"][k], 0, "{k}: {d}");
        }
        sent += d["sent"].as_u64().unwrap();
    }
    assert_eq!(check["sent"].as_u64().unwrap(), sent);
    // Every counted trial both ways: the aggregate is the sum, the loss
    // ratio the worse direction's, and a pass lost nothing either way.
    let size = &bi["sizes"][0];
    assert!(size["throughput_pps"].as_f64().unwrap() > 1000.0, "{size}");
    for t in size["trials"].as_array().unwrap() {
        let d = t["directions"].as_array().unwrap();
        assert_eq!(d.len(), 2, "{t}");
        let s: u64 = d.iter().map(|x| x["sent"].as_u64().unwrap()).sum();
        let r: u64 = d.iter().map(|x| x["received"].as_u64().unwrap()).sum();
        assert_eq!(
            (t["sent"].as_u64().unwrap(), t["received"].as_u64().unwrap()),
            (s, r)
        );
        let worst = d
            .iter()
            .map(|x| x["loss_ratio"].as_f64().unwrap())
            .fold(0.0, f64::max);
        assert_eq!(t["loss_ratio"].as_f64().unwrap(), worst, "{t}");
    }
}
