//! Issue 37: `linerate switch` under a controller. Real frames between
//! hosts in network namespaces, a real OpenFlow controller:
//!
//! - os-ken (PyPI, installed by scripts/setup.sh in /opt/linerate/os-ken)
//!   runs a MAC-learning application (tests/controllers/learning_switch.py,
//!   simple_switch_13's behaviour): four hosts ping every pair after
//!   learning by packet-in, the controller's rules show in `ovs-ofctl
//!   dump-flows` on the switch's second channel, and a host that moves,
//!   twice, is learned at its new port each time;
//! - `ovs-ofctl monitor` gets the packet-ins of table-miss frames, and
//!   `ovs-ofctl packet-out` delivers frames with `actions=output:N` and
//!   with `actions=table` (through the rules);
//! - two controller processes, master and slave: the slave's FLOW_MOD is
//!   refused with IS_SLAVE, and only the master gets packet-ins;
//! - `--fail-mode standalone`: NORMAL while no controller is connected;
//! - rules with `send_flow_rem` come back as `FLOW_REMOVED` when they time
//!   out or are deleted.
//!
//! Every namespace, process and socket goes on drop, also when a test
//! fails; a missing tool fails the test with its name.

mod support;
use support::*;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const APPS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/controllers");

fn mac(i: u32) -> String {
    format!("02:00:00:00:00:{i:02x}")
}

fn ofctl(sock: &Path, args: &[&str]) -> String {
    let target = format!("unix:{}", sock.display());
    let mut a = vec!["-O", "OpenFlow13", "--timeout=10", args[0], &target];
    a.extend(&args[1..]);
    let out = Command::new(require_tool("ovs-ofctl"))
        .args(&a)
        .output()
        .expect("run ovs-ofctl");
    assert!(
        out.status.success(),
        "ovs-ofctl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The switch in the star's switch namespace, ports 1..=N on its veths,
/// the given channels; returns once the `punix:` one answers.
fn switch(star: &NetnsStar, openflow: &[String], sock: &Path) -> Proc {
    switch_with(star, openflow, sock, &[])
}

/// [`switch`] with more options.
fn switch_with(star: &NetnsStar, openflow: &[String], sock: &Path, more: &[&str]) -> Proc {
    let mut args: Vec<String> = vec!["switch".into()];
    args.extend(more.iter().map(|s| s.to_string()));
    for i in 1..=star.hosts {
        args.push("--port".into());
        args.push(format!("{i}=afpacket:{}", star.sw_if(i)));
    }
    for o in openflow {
        args.push("--openflow".into());
        args.push(o.clone());
    }
    args.extend(["--poll", "wait", "--json", "--quiet"].map(String::from));
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut p = spawn_in(&star.sw_ns(), &a);
    p.keep_stderr_tail();
    wait_until(
        Duration::from_secs(20),
        "the switch's OpenFlow socket",
        || {
            p.assert_running("linerate switch");
            sock.exists()
                && Command::new("ovs-ofctl")
                    .args(["-O", "OpenFlow13", "--timeout=2", "show"])
                    .arg(format!("unix:{}", sock.display()))
                    .output()
                    .is_ok_and(|o| o.status.success())
        },
    );
    p
}

/// Host `i`: address 10.77.0.i/24, MAC 02:00:00:00:00:0i.
fn address(star: &NetnsStar, i: u32, as_host: u32) {
    let ns = star.host_ns(i);
    let ifn = star.host_if(i);
    run_cmd(&["ip", "-n", &ns, "link", "set", &ifn, "down"]);
    run_cmd(&["ip", "-n", &ns, "addr", "flush", "dev", &ifn]);
    run_cmd(&[
        "ip",
        "-n",
        &ns,
        "link",
        "set",
        &ifn,
        "address",
        &mac(as_host),
    ]);
    run_cmd(&[
        "ip",
        "-n",
        &ns,
        "addr",
        "add",
        &format!("10.77.0.{as_host}/24"),
        "dev",
        &ifn,
    ]);
    run_cmd(&["ip", "-n", &ns, "link", "set", &ifn, "up"]);
}

/// `ping` from host `a`'s namespace to 10.77.0.b: at least one reply
/// within 5 s.
fn ping(star: &NetnsStar, a: u32, b: u32) -> bool {
    Command::new("ip")
        .args(["netns", "exec", &star.host_ns(a)])
        .arg(require_tool("ping"))
        .args(["-c", "1", "-w", "5", "-q", &format!("10.77.0.{b}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The rules of `dump-flows` that send dl_dst `dst` somewhere: the
/// output ports.
fn outputs_to(flows: &str, dst: &str) -> Vec<String> {
    flows
        .lines()
        .filter(|l| l.contains(&format!("dl_dst={dst}")))
        .filter_map(|l| l.split("actions=").nth(1).map(|a| a.trim().to_string()))
        .collect()
}

#[test]
fn an_os_ken_learning_switch_drives_linerate_switch() {
    require_root();
    require_tools(&["ovs-ofctl", "ping", "ss"]);
    let python = require_osken();
    let star = NetnsStar::up("lrctl", 4);
    let dir = TempDir::new("ctl");
    let sock = dir.join("sw.of");
    for i in 1..=4 {
        address(&star, i, i);
    }
    // The controller, on the switch namespace's own loopback.
    let (mut osken, _lines) = osken(&star, &python, 6653, "learning_switch", &[]);
    let mut sw = switch(
        &star,
        &[
            "tcp:127.0.0.1:6653".into(),
            format!("punix:{}", sock.display()),
        ],
        &sock,
    );
    // The controller's first rule: the table miss to itself.
    wait_until(
        Duration::from_secs(30),
        "the controller's table-miss rule",
        || {
            sw.assert_running("linerate switch");
            ofctl(&sock, &["dump-flows"]).contains("priority=0 actions=CONTROLLER:65535")
        },
    );
    let mut failed = Vec::new();
    for a in 1..=4 {
        for b in 1..=4 {
            if a != b && !ping(&star, a, b) {
                failed.push(format!("{a}->{b}"));
            }
        }
    }
    assert!(
        failed.is_empty(),
        "pings that failed: {failed:?}; switch: {}; os-ken: {}",
        sw.stderr_tail(),
        osken.stderr_tail()
    );
    // Every pair's rule, as the controller installed it, in dump-flows.
    let flows = ofctl(&sock, &["dump-flows"]);
    for a in 1..=4u32 {
        for b in (1..=4u32).filter(|&b| b != a) {
            let want = format!(
                "priority=1,in_port={a},dl_src={},dl_dst={} actions=output:{b}",
                mac(a),
                mac(b)
            );
            assert!(flows.contains(&want), "no '{want}' in:\n{flows}");
        }
    }
    // Host 1 moves: its MAC and address go to host 2's port, then to
    // host 3's (the application deletes the rules towards a MAC seen on a
    // new port). Each time host 4 reaches it at the new port, and the rules
    // towards it say so.
    for (to, gone) in [(2u32, 1u32), (3, 2)] {
        // The old host takes another address (its port stays up).
        address(&star, gone, 10 + gone);
        address(&star, to, 1);
        assert!(
            ping(&star, to, 4),
            "the moved host (now at port {to}) reaches host 4"
        );
        assert!(
            ping(&star, 4, 1),
            "host 4 reaches the moved host at port {to}"
        );
        let flows = ofctl(&sock, &["dump-flows"]);
        let outs = outputs_to(&flows, &mac(1));
        assert!(
            outs.iter().any(|o| o == &format!("output:{to}")),
            "no rule sends {} to port {to}:\n{flows}",
            mac(1)
        );
        assert!(
            !outs.iter().any(|o| o == &format!("output:{gone}")),
            "a rule still sends {} to its old port {gone}:\n{flows}",
            mac(1)
        );
    }
    let v = sw.finish_json(Duration::from_secs(20), "linerate switch");
    let c = &v["openflow"]["controllers"];
    assert!(c["packet_ins"].as_u64().unwrap() >= 12, "{v}");
    assert_eq!(c["packet_ins_unwanted"], 0, "{v}");
    assert!(v["cache"]["packet_outs"].as_u64().unwrap() >= 12, "{v}");
    assert_eq!(v["balanced"], true, "{v}");
}

/// `ovs-ofctl monitor` on the switch's socket for `secs` seconds (its
/// `--timeout`); what it got is on its standard error once it ends.
fn monitor(dir: &TempDir, sock: &Path, secs: u32) -> Proc {
    Proc::spawn(
        Command::new(require_tool("ovs-ofctl"))
            .args(["-O", "OpenFlow13", &format!("--timeout={secs}")])
            .arg(format!("--unixctl={}", dir.join("mon.ctl").display()))
            .arg("monitor")
            .arg(format!("unix:{}", sock.display())),
        "ovs-ofctl monitor",
    )
    .expect("start ovs-ofctl monitor")
}

#[test]
fn ovs_ofctl_monitor_gets_packet_ins_and_packet_out_delivers() {
    require_root();
    require_tools(&["ovs-ofctl"]);
    let star = NetnsStar::up("lrcpo", 2);
    let dir = TempDir::new("cpo");
    let sock = dir.join("sw.of");
    let sw = switch(&star, &[format!("punix:{}", sock.display())], &sock);
    ofctl(&sock, &["add-flow", "priority=0,actions=CONTROLLER:65535"]);
    let h1 = PacketSocket::open(&star.host_ns(1), &star.host_if(1));
    let h2 = PacketSocket::open(&star.host_ns(2), &star.host_if(2));
    // A UDP frame from host 1 to host 2, marked by its source port.
    let frame = |sport: u16| -> Vec<u8> {
        let mut f = hex("0200000000020200000000010800");
        f.extend(hex("450000200001000040110000"));
        f.extend([10, 77, 0, 1, 10, 77, 0, 2]);
        f.extend(sport.to_be_bytes());
        f.extend(hex("0009000c0000cafe"));
        f.resize(60, 0);
        f
    };
    // The monitor runs for 4 s (--timeout), while host 1 sends a
    // table-miss frame every 100 ms; it prints what it got (to standard
    // error, with the OpenFlow 1.3 packet-in format).
    let mut mon = monitor(&dir, &sock, 4);
    let t = Instant::now();
    while !mon.exited() {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "ovs-ofctl monitor did not end"
        );
        h1.send(&frame(4242));
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = mon.wait_output(Duration::from_secs(5), "ovs-ofctl monitor");
    let text = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
    let got: Vec<String> = text.lines().map(String::from).collect();
    assert!(
        got.iter().any(|l| l.contains("tp_src=4242")),
        "no packet-in for the table-miss frame; monitor said: {got:?}"
    );
    let i = got.iter().position(|l| l.contains("tp_src=4242")).unwrap();
    assert!(
        got[..i]
            .iter()
            .any(|l| l.starts_with("OFPT_PACKET_IN (OF1.3)")
                && l.contains("in_port=1 (via no_match)")
                && l.contains("total_len=60")),
        "{got:?}"
    );
    // Packet-outs: straight to port 2, and through the rules (`table`).
    let hexf = |f: &[u8]| f.iter().map(|b| format!("{b:02x}")).collect::<String>();
    let arrives = |sport: u16| -> bool {
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(5) {
            PacketSocket::wait_any(std::slice::from_ref(&h2), Duration::from_millis(100));
            while let Some(f) = h2.recv() {
                if f.len() >= 36 && f[34..36] == sport.to_be_bytes() {
                    return true;
                }
            }
        }
        false
    };
    ofctl(
        &sock,
        &[
            "packet-out",
            &format!(
                "in_port=controller packet={} actions=output:2",
                hexf(&frame(5001))
            ),
        ],
    );
    assert!(
        arrives(5001),
        "packet-out actions=output:2 did not reach host 2"
    );
    ofctl(
        &sock,
        &[
            "add-flow",
            "priority=10,in_port=1,udp,tp_src=5002,actions=output:2",
        ],
    );
    ofctl(
        &sock,
        &[
            "packet-out",
            &format!("in_port=1 packet={} actions=table", hexf(&frame(5002))),
        ],
    );
    assert!(
        arrives(5002),
        "packet-out actions=table did not reach host 2 through the rule"
    );
    let flows = ofctl(&sock, &["dump-flows"]);
    assert!(
        flows
            .lines()
            .any(|l| l.contains("tp_src=5002") && l.contains("n_packets=1,")),
        "the packet-out went through the rule once:\n{flows}"
    );
    // The controller port in the port statistics: the packet-ins sent.
    let ports = ofctl(&sock, &["dump-ports"]);
    assert!(ports.contains("port CONTROLLER"), "{ports}");
    let v = sw.finish_json(Duration::from_secs(20), "linerate switch");
    assert_eq!(v["cache"]["packet_outs"], 2, "{v}");
    assert!(
        v["openflow"]["controllers"]["packet_ins_sent"]
            .as_u64()
            .unwrap()
            >= 1,
        "{v}"
    );
}

/// An os-ken process running `role_app.py` as `role` (master or slave,
/// generation id 1): [`osken`].
fn role_controller(
    star: &NetnsStar,
    python: &str,
    port: u16,
    role: &str,
) -> (Proc, std::sync::mpsc::Receiver<String>) {
    osken(
        star,
        python,
        port,
        "role_app",
        &[("LR_ROLE", role), ("LR_GEN", "1")],
    )
}

/// An os-ken process running application `app` (with environment `env`)
/// on 127.0.0.1:`port` of the switch's namespace, listening when this
/// returns; and its standard output's lines as they come.
fn osken(
    star: &NetnsStar,
    python: &str,
    port: u16,
    app: &str,
    env: &[(&str, &str)],
) -> (Proc, std::sync::mpsc::Receiver<String>) {
    let mut cmd = in_ns(
        &star.sw_ns(),
        &[python, "run_osken.py", &port.to_string(), app],
    );
    cmd.current_dir(APPS).envs(env.iter().copied());
    let mut p = Proc::spawn(&mut cmd, "os-ken").expect("start os-ken");
    p.keep_stderr_tail();
    let lines = p.stdout_lines();
    wait_until(Duration::from_secs(30), "os-ken listening", || {
        p.assert_running("os-ken");
        !run_cmd(&[
            "ip",
            "netns",
            "exec",
            &star.sw_ns(),
            "ss",
            "-Hltn",
            &format!("sport = :{port}"),
        ])
        .trim()
        .is_empty()
    });
    (p, lines)
}

/// Two controller processes: the master's rule is applied and it gets the
/// packet-ins; the slave's FLOW_MOD is refused with IS_SLAVE and it gets
/// no packet-in.
#[test]
fn a_slave_controller_is_refused_and_only_the_master_gets_packet_ins() {
    require_root();
    require_tools(&["ovs-ofctl", "ss"]);
    let python = require_osken();
    let star = NetnsStar::up("lrcro", 2);
    let dir = TempDir::new("cro");
    let sock = dir.join("sw.of");
    let (mut master, m_rx) = role_controller(&star, &python, 6653, "master");
    let (mut slave, s_rx) = role_controller(&star, &python, 6654, "slave");
    let mut sw = switch(
        &star,
        &[
            "tcp:127.0.0.1:6653".into(),
            "tcp:127.0.0.1:6654".into(),
            format!("punix:{}", sock.display()),
        ],
        &sock,
    );
    let (mut m_out, mut s_out) = (Vec::<String>::new(), Vec::<String>::new());
    let has = |v: &[String], s: &str| v.iter().any(|l| l.contains(s));
    wait_until(
        Duration::from_secs(30),
        "both controllers' roles and barriers",
        || {
            sw.assert_running("linerate switch");
            master.assert_running("os-ken (master)");
            slave.assert_running("os-ken (slave)");
            m_out.extend(m_rx.try_iter());
            s_out.extend(s_rx.try_iter());
            has(&m_out, "barrier") && has(&s_out, "barrier")
        },
    );
    assert!(has(&m_out, "role_app: role=2 gen=1"), "{m_out:?}");
    assert!(has(&s_out, "role_app: role=3 gen=1"), "{s_out:?}");
    // BAD_REQUEST (1) / IS_SLAVE (10); the master's rule has no error.
    assert!(has(&s_out, "role_app: error type=1 code=10"), "{s_out:?}");
    assert!(!has(&m_out, "error"), "{m_out:?}");
    let flows = ofctl(&sock, &["dump-flows"]);
    assert!(
        flows.contains("priority=0 actions=CONTROLLER:65535"),
        "{flows}"
    );
    assert!(
        !flows.contains("0x88b5"),
        "the slave's rule was applied:\n{flows}"
    );
    // Frames from host 1 miss the table: packet-ins to the master only.
    let h1 = PacketSocket::open(&star.host_ns(1), &star.host_if(1));
    let mut f = vec![0xff; 6];
    f.extend([2, 0, 0, 0, 0, 1, 0x88, 0xb6]);
    f.resize(60, 0);
    wait_until(
        Duration::from_secs(15),
        "3 packet-ins at the master",
        || {
            h1.send(&f);
            std::thread::sleep(Duration::from_millis(50));
            m_out.extend(m_rx.try_iter());
            m_out
                .iter()
                .filter(|l| l.contains("packet-in in_port=1"))
                .count()
                >= 3
        },
    );
    let v = sw.finish_json(Duration::from_secs(20), "linerate switch");
    s_out.extend(s_rx.try_iter());
    assert!(
        !has(&s_out, "packet-in"),
        "the slave got a packet-in: {s_out:?}"
    );
    let c = &v["openflow"]["controllers"];
    assert!(c["is_slave"].as_u64().unwrap() >= 1, "{v}");
    assert_eq!(c["packet_ins_unwanted"], 0, "{v}");
}

/// `--fail-mode standalone`: with no controller to connect to, a NORMAL
/// rule and the hosts reach each other; with a controller that is away,
/// fail-open after 3 inactivity probes (the hosts reach each other with
/// no rule at all), and once the controller connects, its rules again
/// (its table miss sends frames to it, and it forwards none).
#[test]
fn standalone_fail_mode_switches_normal_while_no_controller_is_connected() {
    require_root();
    require_tools(&["ovs-ofctl", "ping", "ss"]);
    let python = require_osken();
    let star = NetnsStar::up("lrcfm", 2);
    address(&star, 1, 1);
    address(&star, 2, 2);
    let dir = TempDir::new("cfm");
    let sock = dir.join("a.of");
    let sw = switch_with(
        &star,
        &[format!("punix:{}", sock.display())],
        &sock,
        &["--fail-mode", "standalone"],
    );
    let flows = ofctl(&sock, &["dump-flows"]);
    assert!(flows.contains("priority=0 actions=NORMAL"), "{flows}");
    assert!(ping(&star, 1, 2), "no controller to connect to: NORMAL");
    sw.finish_json(Duration::from_secs(20), "linerate switch");
    // A controller that is not there yet.
    let sock = dir.join("b.of");
    let mut sw = switch_with(
        &star,
        &[
            "tcp:127.0.0.1:6655".into(),
            format!("punix:{}", sock.display()),
        ],
        &sock,
        &["--fail-mode", "standalone", "--inactivity-probe", "1"],
    );
    assert!(
        !ofctl(&sock, &["dump-flows"]).contains("NORMAL"),
        "no rule is added when there is a controller to connect to"
    );
    wait_until(
        Duration::from_secs(20),
        "fail-open: host 1 reaches host 2",
        || {
            sw.assert_running("linerate switch");
            ping(&star, 1, 2)
        },
    );
    let (mut ctrl, _lines) = role_controller(&star, &python, 6655, "master");
    wait_until(
        Duration::from_secs(30),
        "the controller connected and its table miss installed",
        || {
            ctrl.assert_running("os-ken");
            ofctl(&sock, &["dump-flows"]).contains("actions=CONTROLLER:65535")
        },
    );
    let pinged = ping(&star, 1, 2);
    let v = sw.finish_json(Duration::from_secs(20), "linerate switch");
    assert!(
        !pinged,
        "the controller's rules apply again (its table miss forwards nothing): {v}"
    );
    let c = &v["openflow"]["controllers"];
    assert_eq!(c["fail_open_entered"], 1, "{v}");
    assert_eq!(c["fail_open"], false, "{v}");
}

/// Rules added with `send_flow_rem` come back to the controllers as
/// `FLOW_REMOVED`: for a hard timeout (reason=hard) and for a delete
/// (reason=delete), as `ovs-ofctl monitor` prints them.
#[test]
fn ovs_ofctl_monitor_gets_flow_removed_for_timeouts_and_deletes() {
    require_root();
    require_tools(&["ovs-ofctl"]);
    let star = NetnsStar::up("lrcfr", 1);
    let dir = TempDir::new("cfr");
    let sock = dir.join("sw.of");
    let sw = switch(&star, &[format!("punix:{}", sock.display())], &sock);
    let mut mon = monitor(&dir, &sock, 5);
    // Until the monitor ends (it cannot say when it is connected): every
    // 500 ms a rule that times out after 1 s and one deleted at once,
    // each with its own cookie.
    let t = Instant::now();
    let mut n = 0;
    while !mon.exited() {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "ovs-ofctl monitor did not end"
        );
        n += 1;
        ofctl(
            &sock,
            &[
                "add-flow",
                &format!("send_flow_rem,hard_timeout=1,cookie={n},priority=5,udp,tp_dst={n},actions=drop"),
            ],
        );
        ofctl(
            &sock,
            &[
                "add-flow",
                &format!(
                    "send_flow_rem,cookie={},priority=6,tcp,tp_dst={n},actions=drop",
                    1000 + n
                ),
            ],
        );
        ofctl(&sock, &["del-flows", &format!("tcp,tp_dst={n}")]);
        std::thread::sleep(Duration::from_millis(500));
    }
    let out = mon.wait_output(Duration::from_secs(5), "ovs-ofctl monitor");
    let text = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
    let removed: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("OFPT_FLOW_REMOVED (OF1.3)"))
        .collect();
    assert!(
        removed
            .iter()
            .any(|l| l.contains("priority=5,udp,tp_dst=") && l.contains("reason=hard")),
        "no FLOW_REMOVED for a hard timeout; monitor said:\n{text}"
    );
    assert!(
        removed
            .iter()
            .any(|l| l.contains("priority=6,tcp,tp_dst=") && l.contains("reason=delete")),
        "no FLOW_REMOVED for a delete; monitor said:\n{text}"
    );
    let v = sw.finish_json(Duration::from_secs(20), "linerate switch");
    let c = &v["openflow"]["controllers"];
    assert!(c["flow_removed_sent"].as_u64().unwrap() >= 2, "{v}");
    assert_eq!(c["flow_removed_dropped"], 0, "{v}");
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// A table-miss flood at the source's top speed (in-memory ports, 10 s)
/// with one controller connected: it gets packet-ins at the configured
/// rate at most (every one the switch sent it), its ECHO_REQUESTs are
/// answered within 1 s throughout, the excess is counted by reason, and
/// the one flow with a rule of its own is forwarded whole.
#[test]
fn a_table_miss_flood_stays_at_the_controller_rate() {
    use linerate_pipeline::switch::openflow::client::Client;
    use linerate_pipeline::switch::openflow::wire::{Writer, ECHO_REPLY, ECHO_REQUEST, PACKET_IN};
    require_tools(&["ovs-ofctl"]);
    let dir = TempDir::new("flood");
    let sock = dir.join("sw.of");
    let flows = dir.write(
        "flows.txt",
        "priority=0,actions=controller\npriority=10,udp,tp_src=1024,actions=output:2\n",
    );
    let rate = 500u64;
    let mut sw = Proc::spawn(
        Command::new(EXE).args([
            "switch",
            "--port",
            "1=mem:a?source=64",
            "--port",
            "2=mem:b?sink",
            "--flows",
            flows.to_str().unwrap(),
            "--openflow",
            &format!("punix:{}", sock.display()),
            "--controller-rate",
            &rate.to_string(),
            "--duration",
            "10",
            "--json",
            "--quiet",
        ]),
        "linerate switch",
    )
    .expect("start linerate switch");
    let t0 = Instant::now();
    let mut c = wait_for(
        Duration::from_secs(10),
        "the switch's OpenFlow socket",
        || {
            sw.assert_running("linerate switch");
            Client::connect_unix(&sock, Duration::from_secs(2)).ok()
        },
    );
    let (mut pins, mut echoes, mut worst) = (0u64, 0u32, Duration::ZERO);
    let mut pending: Option<(u32, Instant)> = None;
    let mut next = Instant::now();
    loop {
        if pending.is_none() && Instant::now() >= next {
            let x = c.next_xid();
            c.send(&Writer::new(ECHO_REQUEST, x).finish()).unwrap();
            c.flush().unwrap();
            pending = Some((x, Instant::now()));
            next += Duration::from_millis(100);
        }
        if let Some((_, at)) = pending {
            worst = worst.max(at.elapsed());
        }
        // The switch closes the connection when its 10 s are over.
        let Ok(m) = c.read() else { break };
        match m[1] {
            PACKET_IN => pins += 1,
            ECHO_REPLY if pending.is_some_and(|(x, _)| m[4..8] == x.to_be_bytes()) => {
                if let Some((_, at)) = pending.take() {
                    worst = worst.max(at.elapsed());
                }
                echoes += 1;
            }
            _ => {}
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the switch did not end"
        );
    }
    let v = sw.wait_json(Duration::from_secs(20), "linerate switch");
    eprintln!(
        "flood: {} frames received, {pins} packet-ins at the controller, {echoes} echoes (slowest {worst:?}), drops {}",
        v["received"], v["drops"]
    );
    assert!(echoes >= 50, "{echoes} echoes answered in 10 s");
    assert!(
        worst < Duration::from_secs(1),
        "an ECHO_REQUEST waited {worst:?}"
    );
    let cs = &v["openflow"]["controllers"];
    let n = |x: &serde_json::Value| x.as_u64().unwrap();
    // Every packet-in the switch sent this connection arrived; the
    // datapath let through the rate at most (and the burst, 125).
    assert_eq!(pins + n(&cs["slow_peer"]), n(&cs["packet_ins_sent"]), "{v}");
    let elapsed = v["elapsed_s"].as_f64().unwrap();
    assert!(
        (n(&cs["packet_ins"]) as f64) <= rate as f64 * elapsed + 125.0,
        "{} packet-ins in {elapsed} s at {rate}/s: {v}",
        cs["packet_ins"]
    );
    assert!(
        pins >= rate * 5,
        "{pins} packet-ins in 10 s at {rate}/s: {v}"
    );
    let drops = &v["drops"];
    assert!(
        n(&drops["controller_rate"]) > 100_000,
        "the excess is counted: {v}"
    );
    // The controller port's counters say the same.
    let port = &cs["port"];
    assert_eq!(port["tx_packets"], cs["packet_ins"], "{v}");
    assert_eq!(
        n(&port["tx_dropped"]),
        n(&drops["controller_rate"]) + drops["controller_queue_full"].as_u64().unwrap_or(0),
        "{v}"
    );
    assert_eq!(v["balanced"], true, "{v}");
    // The forwarded flow: one in 256 of the source's frames, every one out.
    let received = n(&v["received"]);
    let port2 = n(&v["ports"][1]["tx_packets"]);
    assert_eq!(port2 + n(&cs["packet_ins"]), n(&v["forwarded"]), "{v}");
    assert!(
        (port2 * 256).abs_diff(received) <= 256 * 32,
        "{port2} of {received} forwarded: the flow is 1 in 256"
    );
}

/// A port's link going down and up (its host's end of the veth set down,
/// then up): `ovs-ofctl monitor` gets `PORT_STATUS` for both, the port's
/// description says so, and a fast-failover group moves its frames to the
/// next live port and back.
#[test]
fn link_changes_send_port_status_and_fail_a_fast_failover_group_over() {
    require_root();
    require_tools(&["ovs-ofctl"]);
    let star = NetnsStar::up("lrcps", 3);
    let dir = TempDir::new("cps");
    let sock = dir.join("sw.of");
    let groups = dir.write(
        "groups",
        "group_id=1,type=ff,bucket=watch_port:2,actions=output:2,bucket=watch_port:3,actions=output:3\n",
    );
    let sw = switch_with(
        &star,
        &[format!("punix:{}", sock.display())],
        &sock,
        &["--groups", groups.to_str().unwrap()],
    );
    ofctl(
        &sock,
        &["add-flow", "priority=10,in_port=1,udp,actions=group:1"],
    );
    let set = |up: bool| {
        run_cmd(&[
            "ip",
            "-n",
            &star.host_ns(2),
            "link",
            "set",
            &star.host_if(2),
            if up { "up" } else { "down" },
        ])
    };
    let state_of_2 = || {
        ofctl(&sock, &["dump-ports-desc"])
            .split(" 2(")
            .nth(1)
            .and_then(|s| s.lines().find(|l| l.contains("state:")).map(str::to_string))
            .unwrap_or_default()
    };
    // While the monitor runs: port 2's link down, then up, every 500 ms.
    let mut mon = monitor(&dir, &sock, 3);
    let t = Instant::now();
    let mut up = true;
    while !mon.exited() {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "ovs-ofctl monitor did not end"
        );
        std::thread::sleep(Duration::from_millis(500));
        up = !up;
        set(up);
    }
    let out = mon.wait_output(Duration::from_secs(5), "ovs-ofctl monitor");
    let text = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
    let status: Vec<&str> = text.split("OFPT_PORT_STATUS (OF1.3)").skip(1).collect();
    assert!(
        status
            .iter()
            .any(|s| s.contains("MOD: 2(") && s.contains("LINK_DOWN")),
        "no PORT_STATUS for port 2 going down; monitor said:\n{text}"
    );
    assert!(
        status
            .iter()
            .any(|s| s.contains("MOD: 2(") && s.contains("LIVE")),
        "no PORT_STATUS for port 2 coming up; monitor said:\n{text}"
    );
    // Down: the state says so and the group sends to port 3; up: port 2.
    let h1 = PacketSocket::open(&star.host_ns(1), &star.host_if(1));
    let h3 = PacketSocket::open(&star.host_ns(3), &star.host_if(3));
    let frame = |sport: u16| -> Vec<u8> {
        let mut f = hex("0200000000090200000000010800");
        f.extend(hex("450000200001000040110000"));
        f.extend([10, 77, 0, 1, 10, 77, 0, 9]);
        f.extend(sport.to_be_bytes());
        f.extend(hex("0009000c0000cafe"));
        f.resize(60, 0);
        f
    };
    // Which of `hosts` frames of source port `sport` reach, sent every
    // 50 ms until one does (a socket on a host whose link is down cannot
    // receive: the caller listens on the hosts that are up).
    let lands = |sport: u16, hosts: &[(u32, &PacketSocket)]| -> u32 {
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(5) {
            h1.send(&frame(sport));
            std::thread::sleep(Duration::from_millis(50));
            for (n, h) in hosts {
                while let Some(f) = h.recv() {
                    if f.len() >= 36 && f[34..36] == sport.to_be_bytes() {
                        return *n;
                    }
                }
            }
        }
        0
    };
    set(false);
    wait_until(Duration::from_secs(5), "port 2's state LINK_DOWN", || {
        state_of_2().contains("LINK_DOWN")
    });
    assert_eq!(
        lands(7001, &[(3, &h3)]),
        3,
        "with port 2 down the group sends to port 3"
    );
    set(true);
    wait_until(Duration::from_secs(5), "port 2's state LIVE", || {
        state_of_2().contains("LIVE")
    });
    let h2 = PacketSocket::open(&star.host_ns(2), &star.host_if(2));
    assert_eq!(
        lands(7002, &[(2, &h2), (3, &h3)]),
        2,
        "with port 2 up again the group sends to port 2"
    );
    let v = sw.finish_json(Duration::from_secs(20), "linerate switch");
    let c = &v["openflow"]["controllers"];
    assert!(c["port_status_sent"].as_u64().unwrap() >= 2, "{v}");
}
