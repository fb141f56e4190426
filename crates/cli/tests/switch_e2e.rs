//! End to end tests of `linerate switch` and `linerate switch-ctl` in a
//! star of network namespaces: `sw` runs the switch on three veths whose
//! peers sit in the host namespaces `h1`, `h2`, `h3`. Traffic comes from
//! `linerate gen` in h1 and is counted by `linerate count` (sequence
//! numbers: loss and duplicates per stream) or captured with tcpdump and
//! decoded by tshark.
//!
//! - forward by in_port/nw_dst, drop, and a rule added with switch-ctl
//!   while traffic flows takes effect; the control socket has mode 0600;
//! - rewrite of eth_dst, ip dst, udp dst and dec_ttl: tshark finds the new
//!   headers and every IP/UDP checksum Good;
//! - a group of type all replicates to two ports, each copy arrives once;
//! - a 20 kpps meter on 50 kpps offered lets through 20 kpps within 2 %;
//! - adding and deleting 10 000 rules (repeatedly) while traffic flows
//!   loses no packet of the flow a rule forwards.
//!
//! Namespaces carry unique names (process id and a counter) and are
//! removed on drop, also when a test fails; children are killed on drop.
//! The namespace tests need root, tcpdump and tshark and fail without them;
//! they wait for readiness (receivers' sockets bound, the switch's control
//! socket answering, its counters moving), never for a fixed time.

use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use std::time::{Duration, Instant};

mod support;
use support::*;

/// The namespace tests run one at a time: on a 2-core machine a switch, a
/// generator and receivers already fill the CPUs, and a stalled switch
/// (e.g. next to another test's rule churn) would skew the meter's rate.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// The kit's star: namespaces `{tag}sw`, `{tag}h1..3`; veth `{tag}pN` (in
/// sw) <-> `{tag}hN` (in hN); and the test's private directory.
struct Star {
    star: NetnsStar,
    dir: TempDir,
}

impl Star {
    fn up() -> Star {
        let star = NetnsStar::up("lrsw", 3);
        let dir = TempDir::new(star.tag());
        Star { star, dir }
    }
    fn ns(&self, n: &str) -> String {
        format!("{}{n}", self.star.tag())
    }
    fn sw_if(&self, i: u32) -> String {
        self.star.sw_if(i)
    }
    fn host_if(&self, i: u32) -> String {
        self.star.host_if(i)
    }
    fn sock(&self) -> PathBuf {
        self.dir.join("ctl.sock")
    }
    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
    fn file(&self, name: &str, body: &str) -> PathBuf {
        let p = self.dir.join(name);
        std::fs::write(&p, body).unwrap();
        p
    }

    /// Start the switch on the three ports with these files.
    fn switch(&self, flows: &str, groups: &str, meters: &str) -> Proc {
        let f = self.file("flows.txt", flows);
        let g = self.file("groups.txt", groups);
        let m = self.file("meters.txt", meters);
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns("sw"), EXE, "switch"]);
        for i in 1..=3 {
            c.arg("--port")
                .arg(format!("{i}=afpacket:{}", self.sw_if(i)));
        }
        c.arg("--flows").arg(f).arg("--groups").arg(g);
        c.arg("--meters").arg(m).arg("--ctl").arg(self.sock());
        self.spawn_switch(c)
    }

    /// Run a `linerate switch` command line (ports, files, `--ctl`) in
    /// poll-wait mode with JSON output; wait until its control socket
    /// answers (it is started after every port is open).
    fn spawn_switch(&self, mut c: Command) -> Proc {
        c.args(["--poll", "wait", "--json", "--quiet"]);
        let mut p = Proc::from(
            c.stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        );
        wait_ctl(&mut p, &self.sock(), "linerate switch");
        p
    }

    fn ctl(&self, args: &[&str]) -> String {
        switch_ctl(&self.sock(), args)
    }

    /// `linerate count` on host `i`, stopping after `idle` quiet seconds,
    /// once its packet socket is bound.
    fn count(&self, i: u32, idle: f64) -> Proc {
        let port = format!("afpacket:{}", self.host_if(i));
        let idle = idle.to_string();
        let mut p = spawn_in(
            &self.ns(&format!("h{i}")),
            &[
                "count",
                &port,
                "--json",
                "--quiet",
                "--idle",
                &idle,
                "--duration",
                "30",
            ],
        );
        wait_packet_sockets(&mut p, 1, "linerate count");
        p
    }
    /// Port `no`'s counter `what` (rx_packets, tx_packets) from dump-ports.
    fn port_counter(&self, no: u64, what: &str) -> u64 {
        let v: Value = serde_json::from_str(self.ctl(&["dump-ports", "--json"]).trim()).unwrap();
        v["ports"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["port"] == no)
            .unwrap_or_else(|| panic!("no port {no}: {v}"))[what]
            .as_u64()
            .unwrap()
    }

    /// `linerate gen` from h1 (blocks until done).
    fn gen(&self, dst: &str, extra: &[&str]) {
        let o = Command::new("ip")
            .args(["netns", "exec", &self.ns("h1"), EXE, "gen"])
            .arg(format!("afpacket:{}", self.host_if(1)))
            .args(["--dst-ip", dst, "--signature", "--quiet"])
            .args(extra)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "gen: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

/// How long a receiver or the switch may take to end.
const END: Duration = Duration::from_secs(40);

/// Extensions of the shared [`Proc`] for these tests.
trait ProcExt {
    /// SIGINT, wait, last JSON line of stdout.
    fn stop(self) -> Value;
    /// Wait for the exit (a success), last JSON line of stdout.
    fn json(self) -> Value;
}

impl ProcExt for Proc {
    fn stop(self) -> Value {
        self.finish_json(END, "linerate")
    }
    fn json(self) -> Value {
        self.wait_json(END, "linerate")
    }
}

/// (packets, duplicates, pps) of stream 0 in a count report (zeros if none).
fn stream0(v: &Value) -> (u64, u64, f64) {
    let s = v["streams"]
        .as_array()
        .and_then(|a| a.iter().find(|s| s["stream"] == 0));
    match s {
        Some(s) => (
            s["packets"].as_u64().unwrap(),
            s["duplicates"].as_u64().unwrap(),
            s["pps"].as_f64().unwrap(),
        ),
        None => (0, 0, 0.0),
    }
}

#[test]
fn forward_drop_and_add_flow_under_traffic() {
    let _serial = serial();
    let s = Star::up();
    let sw = s.switch(
        "priority=10,in_port=1,udp,nw_dst=10.0.2.2,actions=output:2\n\
         priority=10,in_port=1,udp,nw_dst=10.0.3.3,actions=drop\n",
        "",
        "",
    );
    let mode = std::fs::metadata(s.sock()).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "control socket mode {mode:o}");

    // Forward: all 1000 arrive at h2, none at h3.
    let (c2, c3) = (s.count(2, 1.0), s.count(3, 1.0));
    s.gen("10.0.2.2", &["--count", "1000", "--rate", "10kpps"]);
    let (p2, d2, _) = stream0(&c2.json());
    let (p3, _, _) = stream0(&c3.json());
    assert_eq!((p2, d2, p3), (1000, 0, 0));

    // Drop: nothing arrives anywhere. No packet: count would stop only at
    // its --duration; stop it once the switch has taken in all 1000 (port
    // 1 has received 2000 in all), so none of them can still be on the way.
    let (c2, c3) = (s.count(2, 1.0), s.count(3, 1.0));
    s.gen("10.0.3.3", &["--count", "1000", "--rate", "10kpps"]);
    wait_until(
        Duration::from_secs(20),
        "the switch to receive the second 1000 packets on port 1",
        || s.port_counter(1, "rx_packets") >= 2000,
    );
    let (p2, _, _) = stream0(&c2.stop());
    let (p3, _, _) = stream0(&c3.stop());
    assert_eq!((p2, p3), (0, 0));

    // add-flow while traffic to 10.0.3.3 flows (10 kpps for 3 s): once
    // the higher-priority rule is in, every packet reaches h3. The rule is
    // added once the old one has dropped 2000 packets of this run (0.2 s).
    let c3 = s.count(3, 1.0);
    let t = std::thread::scope(|sc| {
        let g = sc.spawn(|| s.gen("10.0.3.3", &["--rate", "10kpps", "--duration", "3"]));
        wait_until(
            Duration::from_secs(20),
            "traffic to 10.0.3.3 at the switch (2000 packets on port 1)",
            || {
                assert!(
                    !g.is_finished(),
                    "gen ended before its traffic reached the switch"
                );
                s.port_counter(1, "rx_packets") >= 4000
            },
        );
        let t = Instant::now();
        s.ctl(&[
            "add-flow",
            "priority=20,in_port=1,udp,nw_dst=10.0.3.3,actions=output:3",
        ]);
        let t = t.elapsed();
        g.join().unwrap();
        t
    });
    let v3 = c3.json();
    let (p3, d3, _) = stream0(&v3);
    let st = &v3["streams"][0];
    let sent = st["max_seq"].as_u64().unwrap() + 1;
    assert!(p3 > 10_000 && p3 < 30_000, "{v3}");
    assert!(sent >= 29_000, "{v3}");
    assert_eq!(d3, 0);
    assert_eq!(st["reordered"].as_u64().unwrap(), 0, "{v3}");
    eprintln!("add-flow took {t:?}; {p3} of {sent} packets after it");

    let flows = s.ctl(&["dump-flows"]);
    assert!(
        flows.contains("priority=20,in_port=1,udp,nw_dst=10.0.3.3 actions=output:3"),
        "{flows}"
    );
    assert!(flows.contains(&format!("n_packets={p3},")), "{flows}");
    assert!(flows.contains("n_packets=1000,"), "{flows}");
    // dump-flows MATCH --json: only rules at least as specific, with the
    // new rule's raw counters and the time it took to take effect.
    let j: serde_json::Value =
        serde_json::from_str(&s.ctl(&["dump-flows", "udp,nw_dst=10.0.3.3", "--json"])).unwrap();
    let lines = j["flows"].as_array().unwrap();
    assert!(
        lines
            .iter()
            .all(|l| l.as_str().unwrap().contains("nw_dst=10.0.3.3")),
        "{j}"
    );
    let st = j["stats"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["priority"] == 20)
        .unwrap_or_else(|| panic!("{j}"));
    assert_eq!(st["packets"].as_u64(), Some(p3), "{j}");
    let (created, first) = (
        st["created_ns"].as_u64().unwrap(),
        st["first_hit_ns"].as_u64().unwrap(),
    );
    assert!(first > created, "{j}");
    // 10 kpps: a matching packet comes every 100 us; well under a second.
    assert!(first - created < 1_000_000_000, "{j}");
    let fin = sw.stop();
    assert_eq!(fin["balanced"], true, "{fin}");
    // No packet lost at the switch-over: every packet of the last run was
    // either dropped by the old rule or arrived at h3.
    let dropped = fin["drops"]["action_drop"].as_u64().unwrap();
    assert_eq!(dropped - 1000 + p3, sent, "{fin}");
}

#[test]
fn rewrite_headers_with_good_checksums() {
    let _serial = serial();
    let s = Star::up();
    let _sw = s.switch(
        "in_port=1,udp,actions=set_field:02:00:00:00:00:33->eth_dst,set_field:10.7.7.7->ip_dst,\
         set_field:4242->udp_dst,dec_ttl,output:2\n",
        "",
        "",
    );
    let tcpdump = require_tool("tcpdump");
    let tshark = require_tool("tshark");
    let pcap = s.path("rw.pcap");
    // -Z root: tcpdump keeps root, so it can write into our private directory.
    let mut cap = Proc::from(
        Command::new("ip")
            .args(["netns", "exec", &s.ns("h2"), "tcpdump", "-Z", "root"])
            .args(["-i", &s.host_if(2), "-U", "-c", "50", "-w"])
            .arg(&pcap)
            .arg("udp")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    wait_packet_sockets_of(&mut cap, &tcpdump, 1, "tcpdump");
    s.gen("10.0.2.2", &["--count", "50", "--rate", "1kpps"]);
    // tcpdump -c 50 exits once it has written 50 packets.
    let out = cap.wait_output(Duration::from_secs(20), "tcpdump -c 50");
    assert_ok(&out, "tcpdump");
    let o = Command::new(tshark)
        .arg("-r")
        .arg(&pcap)
        .args([
            "-o",
            "ip.check_checksum:TRUE",
            "-o",
            "udp.check_checksum:TRUE",
        ])
        .args([
            "-T",
            "fields",
            "-e",
            "eth.dst",
            "-e",
            "ip.dst",
            "-e",
            "udp.dstport",
        ])
        .args([
            "-e",
            "ip.ttl",
            "-e",
            "ip.checksum.status",
            "-e",
            "udp.checksum.status",
        ])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 50, "{out}");
    for l in lines {
        // checksum status 1 = Good.
        assert_eq!(l, "02:00:00:00:00:33\t10.7.7.7\t4242\t63\t1\t1", "{out}");
    }
}

#[test]
fn group_replicates_and_meter_limits_rate() {
    let _serial = serial();
    let s = Star::up();
    let sw = s.switch(
        "priority=10,in_port=1,udp,nw_dst=10.0.2.2,actions=group:1\n\
         priority=10,in_port=1,udp,nw_dst=10.0.9.9,actions=meter:1,output:2\n",
        "group_id=1,type=all,bucket=output:2,bucket=output:3\n",
        "meter=1,pktps,band=type=drop,rate=20000,burst_size=500\n",
    );
    assert!(s
        .ctl(&["dump-groups"])
        .contains("group_id=1,type=all,bucket=actions=output:2,bucket=actions=output:3"));

    // Replication: each of 2000 packets once at h2 and once at h3.
    let (c2, c3) = (s.count(2, 1.0), s.count(3, 1.0));
    s.gen("10.0.2.2", &["--count", "2000", "--rate", "10kpps"]);
    let (p2, d2, _) = stream0(&c2.json());
    let (p3, d3, _) = stream0(&c3.json());
    assert_eq!((p2, d2, p3, d3), (2000, 0, 2000, 0));

    // Meter: 50 kpps offered for 3 s, 20 kpps let through. The bucket
    // (500 packets, 25 ms) covers the switch's batching in poll-wait mode;
    // its initial fill adds 500 / 60 000 = 0.8 % at most.
    let c2 = s.count(2, 1.0);
    s.gen("10.0.9.9", &["--rate", "50kpps", "--duration", "3"]);
    let v = c2.json();
    let (p2, _, pps) = stream0(&v);
    eprintln!("metered rate {pps:.0} pps ({p2} packets)");
    assert!(
        (pps - 20_000.0).abs() <= 400.0,
        "metered rate {pps:.0} pps: {v}"
    );
    let ports = s.ctl(&["dump-ports", "--json"]);
    let pv: Value = serde_json::from_str(ports.trim()).unwrap();
    let tx3 = pv["ports"][2]["tx_packets"].as_u64().unwrap();
    assert_eq!(tx3, 2000, "{pv}");
    let fin = sw.stop();
    assert_eq!(fin["balanced"], true, "{fin}");
    let metered = fin["drops"]["metered"].as_u64().unwrap();
    let offered = fin["received"].as_u64().unwrap() - 2000;
    assert!(
        offered >= 140_000 && offered - metered >= p2,
        "offered {offered}, metered {metered}, arrived {p2}: {fin}"
    );
}

#[test]
fn rule_churn_under_traffic_loses_nothing() {
    let _serial = serial();
    let s = Star::up();
    let sw = s.switch(
        "priority=10,in_port=1,udp,nw_dst=10.0.2.2,actions=output:2\n",
        "",
        "",
    );
    // 10 000 rules that do not match the traffic, some of them above the
    // forwarding rule's priority, in one file.
    let mut body = String::new();
    for i in 0..10_000u32 {
        body.push_str(&format!(
            "priority={},in_port=1,udp,nw_dst=10.1.{}.{},tp_dst={},actions=output:3\n",
            1 + i % 20,
            i / 250,
            i % 250,
            1000 + i % 7
        ));
    }
    let many = s.file("many.txt", &body);
    let many = many.to_str().unwrap().to_string();
    let c2 = s.count(2, 1.0);
    let rounds = std::thread::scope(|sc| {
        let g = sc.spawn(|| s.gen("10.0.2.2", &["--rate", "20kpps", "--duration", "4"]));
        let mut rounds = 0;
        while !g.is_finished() {
            let r = s.ctl(&["add-flows", &many]);
            assert!(r.contains("\"added\":10000"), "{r}");
            // Single adds and a delete into a table of 10 001 rules.
            for k in 0..20 {
                s.ctl(&[
                    "add-flow",
                    &format!("priority=30,in_port=1,udp,nw_dst=10.2.0.{k},actions=drop"),
                ]);
            }
            let r = s.ctl(&["del-flows", "ip,nw_dst=10.1.0.0/16"]);
            assert!(r.contains("\"deleted\":10000"), "{r}");
            s.ctl(&["del-flows", "ip,nw_dst=10.2.0.0/24"]);
            rounds += 1;
        }
        g.join().unwrap();
        rounds
    });
    let v = c2.json();
    let (p2, d2, _) = stream0(&v);
    let sent = v["streams"][0]["max_seq"].as_u64().unwrap() + 1;
    eprintln!("{rounds} rounds of +10 000 / -10 000 rules; {p2} of {sent} packets arrived");
    assert!(rounds >= 1);
    assert!(sent >= 70_000, "{v}");
    assert_eq!((p2, d2), (sent, 0), "{v}");
    let fin = sw.stop();
    assert_eq!(fin["balanced"], true, "{fin}");
}

#[test]
fn errors_are_one_line() {
    let dir = TempDir::new("lsw-err");
    let flows = dir.join("bad.txt");
    std::fs::write(
        &flows,
        "# ok\npriority=1,actions=drop\nin_port=1,nw_dst=10.0.0.1,actions=output:2\n",
    )
    .unwrap();
    let run = |args: &[&str]| {
        let o = Command::new(EXE).args(args).output().unwrap();
        assert!(!o.status.success(), "{args:?} succeeded");
        let e = String::from_utf8_lossy(&o.stderr).into_owned();
        assert_eq!(e.trim().lines().count(), 1, "{e}");
        e
    };
    let e = run(&["switch", "--port", "1"]);
    assert!(e.contains("expected NUMBER=URI"), "{e}");
    let e = run(&["switch", "--port", "1=mem:a", "--port", "1=mem:b"]);
    assert!(e.contains("given twice"), "{e}");
    let f = flows.to_str().unwrap();
    let e = run(&["switch", "--port", "1=mem:a?sink", "--flows", f]);
    assert!(e.contains("bad.txt:3") && e.contains("nw_dst"), "{e}");
    let e = run(&["switch-ctl", "/nonexistent/ctl.sock", "dump-flows"]);
    assert!(e.contains("/nonexistent/ctl.sock"), "{e}");
}

/// FLOWer's amplification self test (seed 004 Sect. 4-5): a group rule
/// sends each generated packet out of N ports that are looped back into
/// the switch (veth pairs with both ends on it, the "external cabling"),
/// and rules send everything that comes back in to the sink: the sink
/// counts N times the generated packets, at N times the rate.
#[test]
fn flower_amplifies_through_a_group_and_loops() {
    let _serial = serial();
    const N: u32 = 4;
    const SENT: u64 = 4000;
    const PPS: f64 = 20_000.0;
    let s = Star::up();
    let sw_ns = s.ns("sw");
    let loop_if = |i: u32, end: &str| format!("{}l{i}{end}", s.star.tag());
    for i in 1..=N {
        let (a, b) = (loop_if(i, "a"), loop_if(i, "b"));
        run_cmd(&[
            "ip", "-n", &sw_ns, "link", "add", &a, "type", "veth", "peer", "name", &b,
        ]);
        run_cmd(&["ip", "-n", &sw_ns, "link", "set", &a, "up"]);
        run_cmd(&["ip", "-n", &sw_ns, "link", "set", &b, "up"]);
    }
    // Ports: 1 = generator (h1), 2 = sink (h2), 10+i / 20+i = the two ends of loop i.
    let buckets: String = (1..=N)
        .map(|i| format!(",bucket=output:{}", 10 + i))
        .collect();
    let mut flows = String::from("priority=10,in_port=1,udp,nw_dst=10.0.2.2,actions=group:1\n");
    for i in 1..=N {
        flows.push_str(&format!(
            "priority=10,in_port={},actions=output:2\n",
            20 + i
        ));
    }
    let f = s.file("flows.txt", &flows);
    let g = s.file("groups.txt", &format!("group_id=1,type=all{buckets}\n"));
    let mut c = Command::new("ip");
    c.args(["netns", "exec", &sw_ns, EXE, "switch"]);
    c.arg("--port").arg(format!("1=afpacket:{}", s.sw_if(1)));
    c.arg("--port").arg(format!("2=afpacket:{}", s.sw_if(2)));
    for i in 1..=N {
        c.arg("--port")
            .arg(format!("{}=afpacket:{}", 10 + i, loop_if(i, "a")));
        c.arg("--port")
            .arg(format!("{}=afpacket:{}", 20 + i, loop_if(i, "b")));
    }
    c.arg("--flows")
        .arg(f)
        .arg("--groups")
        .arg(g)
        .arg("--ctl")
        .arg(s.sock());
    let sw = s.spawn_switch(c);

    let sink = s.count(2, 1.0);
    s.gen(
        "10.0.2.2",
        &["--count", &SENT.to_string(), "--rate", "20kpps"],
    );
    let v = sink.json();
    let st = v["streams"]
        .as_array()
        .and_then(|a| a.iter().find(|x| x["stream"] == 0))
        .unwrap_or_else(|| panic!("no stream at the sink: {v}"));
    let got = st["packets"].as_u64().unwrap();
    let pps = st["pps"].as_f64().unwrap();
    eprintln!(
        "FLOWer x{N}: generated {SENT} at {PPS} pps, sink counted {got} at {pps:.0} pps ({:.2}x)",
        pps / PPS
    );
    // Every generated packet arrives once per loop: N copies, none lost.
    assert_eq!(got, N as u64 * SENT, "{v}");
    assert_eq!(st["unique"].as_u64(), Some(SENT), "{v}");
    assert_eq!(st["lost"].as_u64(), Some(0), "{v}");
    assert_eq!(
        st["duplicates"].as_u64(),
        Some((N as u64 - 1) * SENT),
        "{v}"
    );
    // The amplified rate: N times the generator's.
    assert!(
        (pps / (N as f64 * PPS) - 1.0).abs() < 0.1,
        "sink rate {pps:.0} pps, expected {} x {PPS}: {v}",
        N
    );
    // The switch's own account: each loop carried every packet once.
    let ports: Value = serde_json::from_str(s.ctl(&["dump-ports", "--json"]).trim()).unwrap();
    for p in ports["ports"].as_array().unwrap() {
        let no = p["port"].as_u64().unwrap();
        if no > 20 {
            assert_eq!(
                p["rx_packets"].as_u64(),
                Some(SENT),
                "loop port {no}: {ports}"
            );
        }
        if no == 2 {
            assert_eq!(p["tx_packets"].as_u64(), Some(N as u64 * SENT), "{ports}");
        }
    }
    let fin = sw.stop();
    assert_eq!(fin["balanced"], true, "{fin}");
}

impl Star {
    /// The switch on afxdp ports with `--offload xdp`. The hosts' veths get
    /// GRO (a NAPI), without which a veth drops what XDP redirects to it.
    fn switch_offload(&self, flows: &str) -> Proc {
        self.switch_offload_with(flows, &[])
    }

    fn switch_offload_with(&self, flows: &str, extra: &[&str]) -> Proc {
        for i in 1..=3 {
            let st = in_ns(
                &self.ns(&format!("h{i}")),
                &["ethtool", "-K", &self.host_if(i), "gro", "on"],
            )
            .stdout(Stdio::null())
            .status()
            .expect("ethtool (scripts/setup.sh installs it)");
            assert!(st.success(), "ethtool -K {} gro on", self.host_if(i));
        }
        let f = self.file("flows.txt", flows);
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns("sw"), EXE, "switch"]);
        for i in 1..=3 {
            c.arg("--port").arg(format!("{i}=afxdp:{}", self.sw_if(i)));
        }
        c.arg("--flows").arg(f).arg("--ctl").arg(self.sock());
        c.args(["--offload", "xdp"]).args(extra);
        self.spawn_switch(c)
    }

    /// Frames XDP has seen on every port (`cache-stats`).
    fn xdp_rx(&self) -> u64 {
        let v: Value = serde_json::from_str(self.ctl(&["cache-stats", "--json"]).trim()).unwrap();
        v["offload"]["xdp"]["rx"]
            .as_u64()
            .unwrap_or_else(|| panic!("cache-stats: {v}"))
    }

    /// The packets of the rule whose match contains `m` (dump-flows).
    fn rule_packets(&self, m: &str) -> u64 {
        let v: Value = serde_json::from_str(self.ctl(&["dump-flows", "--json"]).trim()).unwrap();
        let i = v["flows"]
            .as_array()
            .unwrap_or_else(|| panic!("dump-flows: {v}"))
            .iter()
            .position(|r| r.as_str().unwrap_or("").contains(m))
            .unwrap_or_else(|| panic!("no rule with {m}: {v}"));
        v["stats"][i]["packets"].as_u64().unwrap()
    }
}

/// `--offload-entries`: XDP holds at most that many flows; the others are
/// switched in user space, every frame still delivered and counted, and
/// the refusals counted.
#[test]
fn offload_entries_are_bounded_and_the_rest_stays_in_user_space() {
    let _serial = serial();
    let s = Star::up();
    let sw = s.switch_offload_with(
        "priority=10,in_port=1,udp,nw_dst=10.0.2.2,actions=output:2\n",
        &["--offload-entries", "8"],
    );
    let c2 = s.count(2, 1.0);
    // 32 flows (UDP source ports), 100 frames each.
    s.gen(
        "10.0.2.2",
        &["--flows", "32", "--count", "3200", "--rate", "20kpps"],
    );
    let (p2, d2, _) = stream0(&c2.json());
    assert_eq!((p2, d2), (3200, 0));
    assert_eq!(s.rule_packets("nw_dst=10.0.2.2"), 3200);
    let v: Value = serde_json::from_str(s.ctl(&["cache-stats", "--json"]).trim()).unwrap();
    let o = &v["offload"]["entries"];
    assert_eq!(o["entries"], 8, "{v}");
    assert_eq!(o["installed"], 8, "{v}");
    // Each flow beyond the bound was refused (once: a refusal does not
    // make the datapath offer again); two flows may share a slot of the
    // datapath's filter of offered flows, so not every one need be offered.
    let refused = o["refused_full"].as_u64().unwrap();
    assert!((1..=24).contains(&refused), "{v}");
    let fin = sw.stop();
    let x = &fin["offload"]["xdp"];
    // XDP forwarded the 8 flows' frames but the first of each (and those
    // on their way while the entry went in); user space the rest.
    let fwd = x["fwd"].as_u64().unwrap();
    assert!((600..=8 * 99).contains(&fwd), "{fin}");
    assert_eq!(fin["offload"]["forwarded"], 3200, "{fin}");
    assert_eq!(fin["offload"]["xdp_balanced"], true, "{fin}");
}

/// `--offload xdp`: a flow's frames are forwarded (with a rewrite and
/// dec_ttl) or dropped in XDP once the switch has seen the flow; every
/// frame arrives once; the rules' counters are exact across both paths;
/// deleting a rule takes its flows out of XDP before the command returns.
#[test]
fn offload_forwards_in_xdp_with_exact_counters() {
    let _serial = serial();
    let s = Star::up();
    let sw = s.switch_offload(
        "priority=10,in_port=1,udp,nw_dst=10.0.2.2,actions=mod_dl_dst:02:00:00:00:00:22,dec_ttl,output:2\n\
         priority=10,in_port=1,udp,nw_dst=10.0.3.3,actions=drop\n",
    );
    let (c2, c3) = (s.count(2, 1.0), s.count(3, 1.0));
    s.gen("10.0.2.2", &["--count", "20000", "--rate", "50kpps"]);
    let (p2, d2, _) = stream0(&c2.json());
    // h2 has them all, so none can still be on the way to h3.
    let (p3, _, _) = stream0(&c3.stop());
    assert_eq!((p2, d2, p3), (20000, 0, 0));
    assert_eq!(s.rule_packets("nw_dst=10.0.2.2"), 20000);

    // Dropped by the rule, in XDP too, and counted.
    let c3 = s.count(3, 1.0);
    s.gen("10.0.3.3", &["--count", "5000", "--rate", "50kpps"]);
    wait_until(
        Duration::from_secs(20),
        "the drop rule to count 5000 packets",
        || s.rule_packets("nw_dst=10.0.3.3") >= 5000,
    );
    assert_eq!(s.rule_packets("nw_dst=10.0.3.3"), 5000);
    assert_eq!(stream0(&c3.stop()).0, 0);

    // A rule deleted: its flow leaves XDP with it (and misses, dropped
    // in XDP too once the miss is offloaded).
    s.ctl(&["del-flows", "udp,nw_dst=10.0.2.2"]);
    let c2 = s.count(2, 1.0);
    let rx0 = s.xdp_rx();
    s.gen("10.0.2.2", &["--count", "1000", "--rate", "50kpps"]);
    wait_until(
        Duration::from_secs(20),
        "XDP to see the last 1000 packets",
        || s.xdp_rx() >= rx0 + 1000,
    );
    assert_eq!(stream0(&c2.stop()).0, 0);

    let fin = sw.stop();
    assert_eq!(fin["balanced"], true, "{fin}");
    let o = &fin["offload"];
    assert_eq!(o["xdp_balanced"], true, "{fin}");
    let x = &o["xdp"];
    // Most frames took XDP: all but the first of each flow and those on
    // their way while its entry went in.
    assert!(x["fwd"].as_u64().unwrap() >= 19_000, "{fin}");
    assert!(x["drop_rule"].as_u64().unwrap() >= 4_000, "{fin}");
    // The deleted rule's flow: a table miss, dropped in XDP as such.
    assert!(x["drop_miss"].as_u64().unwrap() >= 500, "{fin}");
    assert!(
        o["offload"]["removed_changed"].as_u64().unwrap() >= 1,
        "{fin}"
    );
    assert_eq!(
        o["received"].as_u64().unwrap(),
        o["forwarded"].as_u64().unwrap() + o["dropped"].as_u64().unwrap(),
        "{fin}"
    );
}

/// `del-flows` under traffic with `--offload xdp`: the flow goes from the
/// deleted rule (to h2, in XDP) to the one below it (to h3) at one
/// sequence number: h2 has a gap-free prefix of the stream and h3 all the
/// rest, none twice: no frame took the deleted rule after the first frame
/// took the new decision (a stale XDP entry would interleave them). And the
/// cut is before `del-flows` returned: no frame reached h2 later than the
/// command's return (by the kernel's receive time on h2, with 2 ms for
/// frames XDP had already sent on their way); an entry removed lazily, even
/// 50 ms late, fails this.
#[test]
fn offload_del_flows_under_traffic_cuts_cleanly() {
    let _serial = serial();
    let s = Star::up();
    let sw = s.switch_offload(
        "priority=20,in_port=1,udp,nw_dst=10.0.2.2,actions=output:2\n\
         priority=10,in_port=1,udp,actions=output:3\n",
    );
    let (c2, c3) = (s.count(2, 1.0), s.count(3, 1.0));
    let raw2 = PacketSocket::open(&s.ns("h2"), &s.host_if(2));
    raw2.stamp();
    let done = std::sync::atomic::AtomicBool::new(false);
    let realtime_ns = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    };
    let (stamps, returned) = std::thread::scope(|sc| {
        // h2's frames of the stream (UDP to 10.0.2.2), their receive times.
        let reader = sc.spawn(|| {
            let mut at = Vec::new();
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                PacketSocket::wait_any(std::slice::from_ref(&raw2), Duration::from_millis(20));
                while let Some((f, t)) = raw2.recv_stamped() {
                    if f.len() >= 34
                        && f[12..14] == [8, 0]
                        && f[23] == 17
                        && f[30..34] == [10, 0, 2, 2]
                    {
                        at.push(t.expect("SO_TIMESTAMPNS"));
                    }
                }
            }
            at
        });
        let g = sc.spawn(|| s.gen("10.0.2.2", &["--rate", "50kpps", "--duration", "3"]));
        wait_until(
            Duration::from_secs(20),
            "the deleted rule's flow in XDP (20 000 packets counted)",
            || {
                assert!(!g.is_finished(), "gen ended before the rule was deleted");
                s.rule_packets("nw_dst=10.0.2.2") >= 20_000
            },
        );
        s.ctl(&["del-flows", "udp,nw_dst=10.0.2.2"]);
        let returned = realtime_ns();
        g.join().unwrap();
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        (reader.join().unwrap(), returned)
    });
    let late: Vec<u64> = stamps
        .iter()
        .filter(|&&t| t > returned + 2_000_000)
        .map(|&t| (t - returned) / 1000)
        .collect();
    assert!(
        late.is_empty(),
        "{} of {} frames reached h2 after del-flows returned (us after: {:?})",
        late.len(),
        stamps.len(),
        &late[..late.len().min(10)]
    );
    assert!(
        stamps.len() >= 20_000,
        "h2's socket saw {} frames",
        stamps.len()
    );
    let v2 = c2.json();
    let v3 = c3.json();
    let (p2, d2, _) = stream0(&v2);
    let (p3, d3, _) = stream0(&v3);
    let max2 = v2["streams"][0]["max_seq"].as_u64().unwrap();
    let sent = v3["streams"][0]["max_seq"]
        .as_u64()
        .unwrap_or_else(|| panic!("nothing reached h3 after the delete: h2 {v2}"))
        + 1;
    assert_eq!((d2, d3), (0, 0));
    assert_eq!(p2, max2 + 1, "h2 got a prefix with gaps: {v2}");
    assert_eq!(p2 + p3, sent, "h2 {p2} + h3 {p3} of {sent}");
    assert!(p2 >= 20_000 && p3 > 0, "h2 {p2} h3 {p3}");
    let fin = sw.stop();
    assert!(
        fin["offload"]["xdp"]["fwd"].as_u64().unwrap() >= 15_000,
        "{fin}"
    );
    assert_eq!(fin["offload"]["xdp_balanced"], true, "{fin}");
}
