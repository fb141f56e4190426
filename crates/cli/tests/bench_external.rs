//! `linerate bench --port-a IF --port-b IF --port-mode l2|l3`: the DuT is a
//! black box between two interfaces; the bench is told nothing else about
//! it. l3: a router the test builds by hand in its own namespaces (IPv4
//! forwarding, RPS to the DuT's CPU, as the built-in bed has it): the bench
//! resolves the router's MAC by ARP, answers its ARP for the tester's
//! address, and measures it; the result is within the stated re-run spread
//! of the built-in linux-ipfwd measured in the same test (in one of up to
//! three pairs of runs: the spread is a 95 % interval). l2: a learning
//! bridge with a third port: after the learning frames, no frame of the
//! trials is flooded to the third port. Nothing on the interfaces is left
//! changed (no XDP program, no address). Needs root and ethtool.

use std::process::{Command, Stdio};
use std::time::Duration;

mod support;
use support::{require_root, require_tool, Proc, TempDir, EXE};

/// One bench at a time (they share the CPUs they measure with).
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

fn sh(args: &[&str]) {
    let o = Command::new(args[0]).args(&args[1..]).output().unwrap();
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// A tester namespace and a DuT namespace, removed on drop.
struct Net {
    tester: String,
    dut: String,
}

impl Net {
    fn new(tag: &str) -> Net {
        let n = Net {
            tester: format!("lrx{tag}{}t", std::process::id()),
            dut: format!("lrx{tag}{}d", std::process::id()),
        };
        for ns in [&n.tester, &n.dut] {
            sh(&["ip", "netns", "add", ns]);
            sh(&[
                "ip",
                "netns",
                "exec",
                ns,
                "sysctl",
                "-qw",
                "net.ipv6.conf.all.disable_ipv6=1",
            ]);
            sh(&[
                "ip",
                "netns",
                "exec",
                ns,
                "sysctl",
                "-qw",
                "net.ipv6.conf.default.disable_ipv6=1",
            ]);
            sh(&["ip", "-n", ns, "link", "set", "lo", "up"]);
        }
        n
    }
    /// Tester port `p` <-> DuT port `d`; the DuT's side with GRO (a veth
    /// takes XDP frames only with NAPI) and RPS to CPU 1 (the DuT's CPU).
    fn link(&self, p: &str, d: &str) {
        sh(&[
            "ip",
            "-n",
            &self.tester,
            "link",
            "add",
            p,
            "type",
            "veth",
            "peer",
            "name",
            d,
            "netns",
            &self.dut,
        ]);
        sh(&["ip", "-n", &self.tester, "link", "set", p, "up"]);
        sh(&["ip", "-n", &self.dut, "link", "set", d, "up"]);
        sh(&[
            "ip", "netns", "exec", &self.dut, "ethtool", "-K", d, "gro", "on",
        ]);
        sh(&[
            "ip",
            "netns",
            "exec",
            &self.dut,
            "sh",
            "-c",
            &format!("echo 2 > /sys/class/net/{d}/queues/rx-0/rps_cpus"),
        ]);
    }
    fn dut(&self, args: &[&str]) {
        let mut v = vec!["ip", "netns", "exec", &self.dut];
        v.extend_from_slice(args);
        sh(&v);
    }
    /// tx_packets of a DuT port.
    fn tx_packets(&self, d: &str) -> u64 {
        linerate_measure::testbed::iface_stats(&self.dut, d)
            .unwrap()
            .tx_packets
    }
    /// The bench, in the tester's namespace; (status, stderr, JSON).
    fn bench(&self, args: &[&str], json: &std::path::Path) -> (bool, String, serde_json::Value) {
        let child = Command::new("ip")
            .args(["netns", "exec", &self.tester, EXE, "bench"])
            .args(args)
            .arg("--json")
            .arg(json)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = Proc(Some(child)).wait_output(Duration::from_secs(300), "bench");
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        let v = std::fs::read_to_string(json)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or(serde_json::Value::Null);
        (out.status.success(), err, v)
    }
    /// No XDP program and no address on the tester's ports.
    fn untouched(&self, ports: &[&str]) {
        for p in ports {
            let o = Command::new("ip")
                .args(["-n", &self.tester, "-d", "addr", "show", "dev", p])
                .output()
                .unwrap();
            let t = String::from_utf8_lossy(&o.stdout);
            assert!(!t.contains("xdp") && !t.contains("prog/xdp"), "{p}: {t}");
            assert!(!t.contains("inet "), "{p}: {t}");
        }
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for ns in [&self.tester, &self.dut] {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

const COMMON: &[&str] = &[
    "--sizes",
    "64,256",
    "--trial",
    "0.2",
    "--repetitions",
    "3",
    "--no-latency",
    "--frame-loss-sizes",
    "none",
    "--b2b-sizes",
    "none",
    "--no-report",
    "--no-history",
];

#[test]
fn l3_router_by_arp_within_the_spread_of_linux_ipfwd() {
    require_root();
    require_tool("ethtool");
    let _s = serial();
    let dir = TempDir::new("ext-l3");
    let net = Net::new("r");
    net.link("pa", "ra");
    net.link("pb", "rb");
    net.dut(&["ip", "addr", "add", "10.91.1.1/24", "dev", "ra"]);
    net.dut(&["ip", "addr", "add", "10.91.2.1/24", "dev", "rb"]);
    net.dut(&["sysctl", "-qw", "net.ipv4.ip_forward=1"]);
    let mut args = vec![
        "--port-a",
        "pa",
        "--port-b",
        "pb",
        "--port-mode",
        "l3",
        "--tester-a",
        "10.91.1.2",
        "--gateway-a",
        "10.91.1.1",
        "--tester-b",
        "10.91.2.2",
    ];
    args.extend_from_slice(COMMON);
    // The stated spread is a 95 % prediction interval: one pair of runs of
    // two equivalent devices falls outside it about once in ten (two sizes).
    // A device the bench measures wrongly falls outside it every time, so
    // a pair that disagrees is measured again, up to three pairs in all.
    let mut misses = Vec::new();
    for attempt in 0..3 {
        let (ok, err, v) = net.bench(&args, &dir.join("ext.json"));
        assert!(ok, "{err}");
        assert!(err.contains("10.91.1.1 is at "), "{err}");
        let ext = &v["results"][0];
        assert_eq!(ext["name"], "external");
        assert_eq!(ext["status"], "ok", "{ext}");
        // The router learnt the tester's address on port B from our ARP replies.
        let o = Command::new("ip")
            .args(["-n", &net.dut, "neigh", "show", "10.91.2.2"])
            .output()
            .unwrap();
        let neigh = String::from_utf8_lossy(&o.stdout);
        assert!(neigh.contains("lladdr"), "{neigh}");
        net.untouched(&["pa", "pb"]);
        // The built-in linux-ipfwd, the same way.
        let mut ip_args = vec!["--dut", "linux-ipfwd"];
        ip_args.extend_from_slice(COMMON);
        let (ok, err, w) = net.bench(&ip_args, &dir.join("ipfwd.json"));
        assert!(ok, "{err}");
        let ipfwd = &w["results"][0];
        let spread = ipfwd["throughput_spread"]
            .as_f64()
            .unwrap()
            .max(ext["throughput_spread"].as_f64().unwrap());
        let mut off = Vec::new();
        for i in 0..2 {
            let a = ext["sizes"][i]["throughput_pps"].as_f64().unwrap();
            let b = ipfwd["sizes"][i]["throughput_pps"].as_f64().unwrap();
            if (a / b - 1.0).abs() > spread {
                off.push(format!(
                    "pair {}: {} B: external {a:.0} pps against linux-ipfwd {b:.0}: {:+.1} %, stated re-run spread ±{:.1} %",
                    attempt + 1,
                    ext["sizes"][i]["frame_size"],
                    (a / b - 1.0) * 100.0,
                    spread * 100.0
                ));
            }
        }
        if off.is_empty() {
            return;
        }
        eprintln!("{}", off.join("\n"));
        misses.extend(off);
    }
    panic!("three pairs outside the spread:\n{}", misses.join("\n"));
}

#[test]
fn l2_learning_bridge_floods_nothing_after_learning() {
    require_root();
    require_tool("ethtool");
    let _s = serial();
    let dir = TempDir::new("ext-l2");
    let net = Net::new("b");
    net.link("pa", "ra");
    net.link("pb", "rb");
    net.link("pc", "rc");
    // No STP, no multicast snooping, no multicast from the bridge itself:
    // it sends nothing of its own out of the third port.
    net.dut(&[
        "ip",
        "link",
        "add",
        "br0",
        "type",
        "bridge",
        "stp_state",
        "0",
        "mcast_snooping",
        "0",
    ]);
    net.dut(&["ip", "link", "set", "br0", "multicast", "off"]);
    for p in ["ra", "rb", "rc"] {
        net.dut(&["ip", "link", "set", p, "master", "br0"]);
    }
    net.dut(&["ip", "link", "set", "br0", "up"]);
    let rc0 = net.tx_packets("rc");
    let mut args = vec!["--port-a", "pa", "--port-b", "pb", "--port-mode", "l2"];
    args.extend_from_slice(COMMON);
    let (ok, err, v) = net.bench(&args, &dir.join("l2.json"));
    assert!(ok, "{err}");
    let r = &v["results"][0];
    assert_eq!(r["status"], "ok", "{r}");
    let sent: u64 = r["sizes"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["trials"].as_array().unwrap().iter())
        .map(|t| t["sent"].as_u64().unwrap())
        .sum();
    assert!(sent > 100_000, "{sent} frames sent");
    // Flooded to the third port: the learning frames from port B (sent to
    // port A's address before the bridge knew it), nothing of the trials.
    let flooded = net.tx_packets("rc") - rc0;
    assert!(
        flooded <= 4,
        "{flooded} frames flooded to the third port of {sent} sent"
    );
    net.untouched(&["pa", "pb"]);
}
