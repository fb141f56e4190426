//! The switch DuTs of `linerate bench`: the 10 000-rule set parses with the
//! switch's own rule parser, loads into its flow table without duplicates,
//! and classifies the bench's frames (both directions) by a rule of the set
//! rather than the catch-all; and a short real run of `linerate-switch-10k`,
//! `ovs-afxdp-10k` and `linerate-switch-offload-10k` forwards (the last
//! mostly in XDP).

mod support;
use support::{require_root, require_tools, Netns, TempDir};

use linerate_io::xdp::generator::ipv4_udp_frame;
use linerate_measure::bench::dut::switch::{switch_rules, RuleSet, RULES_10K};
use linerate_pipeline::switch::{Action, FlowTable, Key, Rule};
use std::net::Ipv4Addr;
use std::process::Command;

/// The flows `linerate bench` sends: UDP source ports 1024.. (64 flows), destination port 9.
const BENCH_FLOWS: u16 = 64;

fn table(text: &str) -> FlowTable {
    let mut t = FlowTable::new();
    for (n, l) in text.lines().enumerate() {
        if l.starts_with('#') {
            continue;
        }
        let r = Rule::parse(l).unwrap_or_else(|e| panic!("line {}: '{l}': {e}", n + 1));
        t.add_flow(r, 0)
            .unwrap_or_else(|e| panic!("line {}: '{l}': {e}", n + 1));
    }
    t
}

#[test]
fn ten_k_rules_parse_and_match_bench_traffic_in_both_directions() {
    for x in [1u8, 77, 254] {
        let (g, s) = (Ipv4Addr::new(10, x, 1, 1), Ipv4Addr::new(10, x, 2, 2));
        let t = table(&switch_rules(RuleSet::TenK, g, s));
        // No two rules with the same match and priority (add_flow would merge them).
        assert_eq!(t.len(), RULES_10K);
        assert!(
            t.classifier().subtables() >= 6,
            "{} subtables",
            t.classifier().subtables()
        );
        for (in_port, out, src, dst) in [(1u32, 2u32, g, s), (2, 1, s, g)] {
            let keys: Vec<Key> = (0..BENCH_FLOWS)
                .map(|f| {
                    let fr = ipv4_udp_frame(
                        [2, 0, 0, 0, 0, 2],
                        [2, 0, 0, 0, 0, 1],
                        src.octets(),
                        dst.octets(),
                        1024 + f,
                        9,
                        60,
                    );
                    Key::extract(&fr, in_port)
                })
                .collect();
            let mut ids = vec![None; keys.len()];
            t.classifier().lookup_batch(&keys, &mut ids);
            for (f, id) in ids.iter().enumerate() {
                let id = id.unwrap_or_else(|| panic!("x={x} port {in_port} flow {f}: no rule"));
                let r = &t.entry(id).unwrap().rule;
                assert!(
                    r.priority > 0,
                    "x={x} port {in_port} flow {f}: only the catch-all matched"
                );
                assert_eq!(r.priority, 300, "{r}");
                assert_eq!(r.actions, vec![Action::Output(out)], "{r}");
            }
        }
    }
    // The one-rule set: one in_port rule per direction.
    let t = table(&switch_rules(
        RuleSet::OnePerDirection,
        Ipv4Addr::new(10, 1, 1, 1),
        Ipv4Addr::new(10, 1, 2, 2),
    ));
    assert_eq!(t.len(), 2);
}

/// The namespaces of the bench's two runs (`{prefix}{i}-{part}`), removed on
/// drop if the test fails half way.
fn cleanup(prefix: &str) -> Netns {
    Netns::adopt(
        (0..2)
            .flat_map(|i| ["gen", "dut", "sink"].map(|part| format!("{prefix}{i}-{part}")))
            .collect(),
    )
}

/// `linerate-switch-10k` and `ovs-afxdp-10k` (Open vSwitch: scripts/setup.sh
/// installs it) forward the bench's frames with the 10 000 rules loaded.
#[test]
fn bench_switches_with_10k_rules_forward() {
    require_root();
    // What scripts/peers/dut-ovs.sh runs: without them the bench would
    // report ovs-afxdp-10k as skipped.
    require_tools(&[
        "ovsdb-tool",
        "ovsdb-server",
        "ovs-vswitchd",
        "ovs-vsctl",
        "ovs-ofctl",
        "ovs-appctl",
    ]);
    let prefix = format!("lrsw{}", std::process::id() % 100_000);
    let _c = cleanup(&prefix);
    let dir = TempDir::new("bench-switch");
    let json = dir.0.join("bench.json");
    let duts = [
        "linerate-switch-10k",
        "ovs-afxdp-10k",
        "linerate-switch-offload-10k",
    ];
    let out = Command::new(support::EXE)
        .args([
            "bench",
            "--dut",
            duts[0],
            "--dut",
            duts[1],
            "--dut",
            duts[2],
            "--name",
            &prefix,
            "--no-history",
        ])
        .args(["--sizes", "64", "--trial", "0.2", "--resolution", "5"])
        // No final trials (CI time): the searches show the switch's rules work.
        .args(["--final-trial", "0"])
        .args([
            "--repetitions",
            "1",
            "--no-latency",
            "--frame-loss-sizes",
            "none",
        ])
        .args(["--b2b-sizes", "none", "--no-report", "--json"])
        .arg(&json)
        .output()
        .expect("run linerate bench");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "bench failed: {stderr}");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), duts.len());
    for (r, d) in results.iter().zip(duts) {
        assert_eq!(r["name"], d);
        let status = r["status"].as_str().unwrap();
        assert_eq!(status, "ok", "{d}: {r}");
        let tp = r["sizes"][0]["throughput_pps"].as_f64().unwrap_or(0.0);
        assert!(tp > 1000.0, "{d}: throughput {tp} pps: {r}");
    }
    // linerate switch's own account: every rule loaded, nothing dropped.
    let acct = &results[0]["dut_account"];
    assert_eq!(acct["cache"]["rules"], RULES_10K as u64, "{acct}");
    assert_eq!(acct["dropped"], 0, "{acct}");
    assert!(acct["forwarded"].as_u64().unwrap() > 0, "{acct}");
    // With --offload xdp: the flows went into XDP, which forwarded most
    // frames; the account holds across both paths.
    let off = &results[2]["dut_account"]["offload"];
    assert_eq!(off["xdp_balanced"], true, "{off}");
    assert!(off["offload"]["installed"].as_u64().unwrap() >= 1, "{off}");
    assert!(
        off["share_forwarded_in_xdp"].as_f64().unwrap() > 0.5,
        "{off}"
    );
    assert_eq!(
        off["received"].as_u64(),
        Some(off["forwarded"].as_u64().unwrap() + off["dropped"].as_u64().unwrap()),
        "{off}"
    );
    // The bed and the rules files (each in a private directory
    // linerate-NS-RANDOM) are gone.
    let ns = Command::new("ip").args(["netns", "list"]).output().unwrap();
    assert!(
        !String::from_utf8_lossy(&ns.stdout).contains(&prefix),
        "namespaces left behind"
    );
    let left: Vec<_> = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .filter(|e| {
            let n = e.file_name().to_string_lossy().to_string();
            n.starts_with(&format!("linerate-{prefix}"))
        })
        .collect();
    assert!(left.is_empty(), "rules file left behind: {left:?}");
}
