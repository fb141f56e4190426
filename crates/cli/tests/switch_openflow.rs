//! Issue 22, second acceptance line: `ovs-ofctl -O OpenFlow13` (Debian's
//! openvswitch-common) adds, dumps and deletes flows, groups and meters on
//! a running `linerate switch --openflow ptcp:PORT`, and its `dump-flows`
//! lists the same rules as `linerate switch-ctl dump-flows`. A hostile
//! connection (a message whose length field lies) is closed with an
//! OpenFlow error while the datapath goes on forwarding.
//!
//! The switch runs on in-memory ports (port 1 a source of frames, 2 and 3
//! sinks): the channel is what is tested, over loopback TCP. The test
//! fails (never skips) without ovs-ofctl; the switch is killed on drop.

mod support;
use support::*;

use linerate_pipeline::switch::openflow::msg::canonical;
use linerate_pipeline::switch::Rule;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

const FLOWS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../examples/flows/vlan-learning.flows"
);

struct Sw {
    _p: Option<Proc>,
    target: String,
    sock: std::path::PathBuf,
    _dir: TempDir,
}

fn ofctl(sw: &Sw, args: &[&str]) -> Output {
    let mut a = vec!["-O", "OpenFlow13", "--timeout=10"];
    a.push(args[0]);
    a.push(&sw.target);
    a.extend(&args[1..]);
    Command::new("ovs-ofctl")
        .args(&a)
        .output()
        .expect("run ovs-ofctl")
}

fn ofctl_ok(sw: &Sw, args: &[&str]) -> String {
    let out = ofctl(sw, args);
    assert!(
        out.status.success(),
        "ovs-ofctl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn ctl(sw: &Sw, args: &[&str]) -> serde_json::Value {
    let mut a = vec!["switch-ctl", sw.sock.to_str().unwrap()];
    a.extend(args);
    a.push("--json");
    last_json(&linerate_ok(&a))
}

/// A dump-flows line (either tool's) without its statistics, as a rule.
fn rule_of(line: &str) -> Rule {
    let fields: Vec<&str> = line
        .trim()
        .split(", ")
        .filter(|f| {
            ![
                "duration=",
                "n_packets=",
                "n_bytes=",
                "idle_age=",
                "hard_age=",
            ]
            .iter()
            .any(|p| f.starts_with(p))
        })
        .collect();
    let text = fields.join(",").replacen(" actions=", ",actions=", 1);
    canonical(Rule::parse(&text).unwrap_or_else(|e| panic!("'{line}': {e}")))
}

/// The rules of `ovs-ofctl dump-flows`, sorted.
fn of_rules(sw: &Sw) -> Vec<String> {
    let out = ofctl_ok(sw, &["dump-flows"]);
    let mut v: Vec<String> = out
        .lines()
        .skip(1)
        .map(|l| rule_of(l).to_string())
        .collect();
    v.sort();
    v
}

/// The rules of `switch-ctl dump-flows`, sorted.
fn ctl_rules(sw: &Sw) -> Vec<String> {
    let d = ctl(sw, &["dump-flows"]);
    let mut v: Vec<String> = d["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| rule_of(l.as_str().unwrap()).to_string())
        .collect();
    v.sort();
    v
}

/// `linerate switch` with ports 1 (`port1`), 2 and 3 (sinks), the OpenFlow
/// channel `of` and the control socket `sock`.
fn spawn(port1: &str, of: &str, sock: &std::path::Path) -> Proc {
    Proc::from(
        Command::new(EXE)
            .args([
                "switch",
                "--port",
                &format!("1={port1}"),
                "--port",
                "2=mem:b?sink",
                "--port",
                "3=mem:c?sink",
                "--poll",
                "wait",
                "--openflow",
                of,
                "--ctl",
                sock.to_str().unwrap(),
                "--quiet",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start linerate switch"),
    )
}

/// The switch; `port1` is port 1's URI (a source of frames: with only
/// sinks the switch would end at once).
fn start(port1: &str) -> Sw {
    require_tool("ovs-ofctl");
    let dir = TempDir::new("lr-of");
    let sock = dir.join("sw.sock");
    // A free port: bound, its number taken, let go.
    let port = free_port();
    let of = format!("ptcp:{port}");
    let mut p = spawn(port1, &of, &sock);
    wait_until(Duration::from_secs(20), "the OpenFlow listener", || {
        p.assert_running("linerate switch --openflow");
        TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    Sw {
        _p: Some(p),
        target: format!("tcp:127.0.0.1:{port}"),
        sock,
        _dir: dir,
    }
}

/// The five-table pipeline's rules as OpenFlow 1.3 takes them: ovs-ofctl
/// refuses `strip_vlan` (pop_vlan) in OpenFlow 1.3 unless the match says
/// the frame is tagged, so those rules get `vlan_tci=0x1000/0x1000`.
fn of13_rules(dir: &TempDir) -> (std::path::PathBuf, Vec<String>) {
    let lines: Vec<String> = std::fs::read_to_string(FLOWS)
        .unwrap()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            if l.contains("strip_vlan") && !l.contains("dl_vlan") {
                l.replacen(",actions=", ",vlan_tci=0x1000/0x1000,actions=", 1)
            } else {
                l.to_string()
            }
        })
        .collect();
    (dir.write("of13.flows", &(lines.join("\n") + "\n")), lines)
}

#[test]
fn ovs_ofctl_programs_a_running_switch() {
    let sw = start("mem:a?source=64&flows=8");
    // Flows: the five-table pipeline, one FLOW_MOD + barrier a line.
    let (path, lines) = of13_rules(&sw._dir);
    ofctl_ok(&sw, &["add-flows", path.to_str().unwrap()]);
    let file: Vec<String> = {
        let mut v: Vec<String> = lines
            .iter()
            .map(|l| canonical(Rule::parse(l).unwrap()).to_string())
            .collect();
        v.sort();
        v
    };
    assert!(file.len() >= 10, "{file:?}");
    // Port 1's frames go through the pipeline: its learn adds a rule to
    // table 10 (and then no more: the frames have one source address).
    wait_until(
        Duration::from_secs(10),
        "a rule learned in table 10",
        || of_rules(&sw).iter().any(|r| r.starts_with("table=10,")),
    );
    let of = of_rules(&sw);
    let added: Vec<String> = of
        .iter()
        .filter(|r| !r.starts_with("table=10,"))
        .cloned()
        .collect();
    assert_eq!(added, file, "ovs-ofctl dump-flows lists the file's rules");
    assert_eq!(ctl_rules(&sw), of, "switch-ctl dump-flows lists the same");

    // Groups and meters, and flows that use them.
    ofctl_ok(
        &sw,
        &[
            "add-group",
            "group_id=7,type=all,bucket=output:2,bucket=output:3",
        ],
    );
    ofctl_ok(
        &sw,
        &["add-meter", "meter=5,pktps,band=type=drop,rate=1000"],
    );
    ofctl_ok(
        &sw,
        &[
            "add-flow",
            "table=20,cookie=0x77,priority=9,ip,nw_dst=10.0.0.0/8,actions=meter:5,group:7",
        ],
    );
    let g = ofctl_ok(&sw, &["dump-groups"]);
    assert!(
        g.contains("group_id=7,type=all,bucket=actions=output:2,bucket=actions=output:3"),
        "{g}"
    );
    let cg = ctl(&sw, &["dump-groups"]);
    assert_eq!(
        cg["groups"][0],
        "group_id=7,type=all,bucket=actions=output:2,bucket=actions=output:3"
    );
    ofctl_ok(
        &sw,
        &[
            "add-meter",
            "meter=6,kbps,burst,stats,band=type=drop,rate=2000,burst_size=300",
        ],
    );
    let m = ofctl_ok(&sw, &["dump-meters"]);
    // Read back as added: no burst flag nor burst size that was not asked
    // for (was: meter 5 came back with "burst" and its default bucket).
    let line = |id: &str| {
        let at = m
            .find(&format!("meter={id} "))
            .unwrap_or_else(|| panic!("meter {id}: {m}"));
        let rest = &m[at..];
        rest[..rest[1..].find("meter=").map_or(rest.len(), |e| e + 1)].to_string()
    };
    let (m5, m6) = (line("5"), line("6"));
    assert!(
        m5.contains("meter=5 pktps") && m5.contains("rate=1000"),
        "{m5}"
    );
    assert!(!m5.contains("burst") && !m5.contains("stats"), "{m5}");
    assert!(
        m6.contains("meter=6 kbps burst stats") && m6.contains("burst_size=300"),
        "{m6}"
    );
    assert_eq!(ctl_rules(&sw), of_rules(&sw));
    assert!(of_rules(&sw).iter().any(|r| r.contains("meter:5,group:7")));

    // ARP's sender address written by set_field on an ARP rule (was
    // refused: decoded as ipv4_src, which wants ip in the match).
    ofctl_ok(
        &sw,
        &[
            "add-flow",
            "table=30,priority=5,arp,actions=set_field:10.9.9.9->arp_spa,output:2",
        ],
    );
    let arp: Vec<String> = of_rules(&sw)
        .into_iter()
        .filter(|r| r.contains("table=30"))
        .collect();
    assert!(
        arp.len() == 1 && arp[0].contains("set_field:10.9.9.9->arp_spa,output:2"),
        "{arp:?}"
    );
    ofctl_ok(&sw, &["del-flows", "table=30"]);

    // A rule the switch refuses: ovs-ofctl gets the OpenFlow error.
    let out = ofctl(&sw, &["add-flow", "actions=group:99"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("OFPBAC_BAD_OUT_GROUP"), "{err}");

    // Modify, then deletes: strict, by cookie, by table; groups, meters.
    ofctl_ok(&sw, &["mod-flows", "table=20,actions=output:3"]);
    assert!(of_rules(&sw)
        .iter()
        .any(|r| r.contains("table=20") && r.ends_with("actions=output:3")));
    let before = of_rules(&sw).len();
    ofctl_ok(&sw, &["del-flows", "--strict", "table=0,priority=0"]);
    assert_eq!(of_rules(&sw).len(), before - 1);
    ofctl_ok(&sw, &["del-flows", "cookie=0x77/-1"]);
    assert!(!of_rules(&sw).iter().any(|r| r.contains("table=20")));
    ofctl_ok(&sw, &["del-flows", "table=3"]);
    assert!(!of_rules(&sw).iter().any(|r| r.starts_with("table=3,")));
    assert_eq!(ctl_rules(&sw), of_rules(&sw));
    ofctl_ok(&sw, &["del-groups"]);
    ofctl_ok(&sw, &["del-meters"]);
    assert!(!ofctl_ok(&sw, &["dump-groups"]).contains("group_id"));
    assert!(!ofctl_ok(&sw, &["dump-meters"]).contains("meter="));
    ofctl_ok(&sw, &["del-flows"]);
    assert!(of_rules(&sw).is_empty());
    assert!(ctl_rules(&sw).is_empty());
    // The other dumps ovs-ofctl has.
    let t = ofctl_ok(&sw, &["dump-tables"]);
    assert!(t.contains("table 0:"), "{t}");
    let p = ofctl_ok(&sw, &["dump-ports"]);
    // Three ports and the controller port (its packet-ins).
    assert!(
        p.contains("4 ports") && p.contains("port  1:") && p.contains("port CONTROLLER:"),
        "{p}"
    );
    let s = ofctl_ok(&sw, &["show"]);
    assert!(s.contains("n_tables:255") && s.contains(" 1(a):"), "{s}");
}

#[test]
fn a_lying_message_closes_only_its_connection() {
    let sw = start("mem:a?source=64&flows=8");
    ofctl_ok(&sw, &["add-flow", "in_port=1,actions=output:2"]);
    let sent = |sw: &Sw| {
        ctl(sw, &["dump-ports"])["ports"][1]["tx_packets"]
            .as_u64()
            .unwrap()
    };
    let before = sent(&sw);
    let port: u16 = sw.target.rsplit(':').next().unwrap().parse().unwrap();
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut hello = [0u8; 16];
    s.read_exact(&mut hello).unwrap();
    assert_eq!(hello[1], 0, "the switch's HELLO first");
    s.write_all(&[4, 0, 0, 8, 0, 0, 0, 1]).unwrap(); // HELLO
                                                     // A FLOW_MOD whose header says 4 bytes: shorter than a header.
    s.write_all(&[4, 14, 0, 4, 0, 0, 0, 2]).unwrap();
    let mut rest = Vec::new();
    s.read_to_end(&mut rest).unwrap(); // ends: the switch closed it
    assert!(
        rest.len() >= 12 && rest[1] == 1,
        "an OFPT_ERROR, then EOF: {rest:?}"
    );
    assert_eq!(
        &rest[8..12],
        &[0, 1, 0, 6],
        "OFPET_BAD_REQUEST/OFPBRC_BAD_LEN"
    );
    // The datapath never noticed: it forwards on, and the channel serves.
    wait_until(
        Duration::from_secs(10),
        "frames forwarded after the bad connection",
        || sent(&sw) > before,
    );
    assert_eq!(of_rules(&sw).len(), 1);
}

/// `--openflow tcp:IP:PORT`: the switch connects to a controller (here the
/// test, with linerate's OpenFlow client), which programs it; the switch
/// connects again when the controller goes away.
#[test]
fn the_switch_connects_to_a_controller() {
    use linerate_pipeline::switch::openflow::client::Client;
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let dir = TempDir::new("lr-of-active");
    let sock = dir.join("sw.sock");
    let of = format!("tcp:127.0.0.1:{port}");
    let mut p = spawn("mem:a?source=64&flows=8", &of, &sock);
    let sw = Sw {
        _p: None,
        target: String::new(),
        sock: sock.clone(),
        _dir: dir,
    };
    l.set_nonblocking(true).unwrap();
    let accept = |p: &mut Proc| {
        wait_for(Duration::from_secs(20), "the switch's connection", || {
            p.assert_running("linerate switch --openflow tcp:");
            l.accept().ok().map(|(s, _)| s)
        })
    };
    let s = accept(&mut p);
    s.set_nonblocking(false).unwrap();
    let mut c = Client::over(s, Duration::from_secs(10)).unwrap();
    let r = Rule::parse("cookie=0x5,priority=7,udp,actions=output:2").unwrap();
    c.add(&r).unwrap();
    assert!(c.barrier().unwrap().is_empty());
    assert_eq!(c.aggregate(5).unwrap().2, 1);
    wait_until(Duration::from_secs(10), "frames hitting the rule", || {
        c.aggregate(5).unwrap().0 > 0
    });
    assert_eq!(ctl_rules(&sw), vec![canonical(r).to_string()]);
    // The controller goes away; the switch comes back (within its 1 s
    // backoff) and still has the rule.
    drop(c);
    let s = accept(&mut p);
    s.set_nonblocking(false).unwrap();
    let mut c = Client::over(s, Duration::from_secs(10)).unwrap();
    assert_eq!(c.aggregate(5).unwrap().2, 1);
}

/// Groups of every type, added by `ovs-ofctl add-group`, read back by
/// `ovs-ofctl dump-groups` and `switch-ctl dump-groups` as written (Open
/// vSwitch's own printing); what the switch refuses gets Open vSwitch's
/// error codes.
#[test]
fn groups_of_every_type_read_back_as_written() {
    let sw = start("mem:a?source=64&flows=8");
    let groups = [
        "group_id=1,type=indirect,bucket=actions=set_field:10.9.9.9->ip_dst,dec_ttl,output:1",
        "group_id=2,type=select,bucket=weight:3,watch_port:1,actions=set_field:02:00:00:00:00:01->eth_dst,output:1,bucket=weight:5,actions=push_vlan:0x8100,set_field:4->vlan_pcp,output:1,bucket=weight:0,actions=drop",
        "group_id=3,type=ff,bucket=watch_port:1,actions=output:1,bucket=watch_group:1,actions=group:1,bucket=watch_port:7,actions=CONTROLLER:128",
        "group_id=4,type=all,bucket=actions=set_field:5->udp_dst,output:1,bucket=actions=group:2",
    ];
    for g in groups {
        ofctl_ok(&sw, &["add-group", g]);
    }
    let dumped = ofctl_ok(&sw, &["dump-groups"]);
    let lines: Vec<&str> = dumped
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("group_id="))
        .collect();
    let mut want: Vec<&str> = groups.to_vec();
    want.sort();
    let mut got = lines.clone();
    got.sort();
    assert_eq!(got, want, "{dumped}");
    let cg = ctl(&sw, &["dump-groups"]);
    let ctl_lines: Vec<&str> = cg["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(ctl_lines, groups.to_vec(), "switch-ctl, by id");
    // Group features say what is taken.
    let f = ofctl_ok(&sw, &["dump-group-features"]);
    for t in ["all", "select", "indirect", "fast failover"] {
        assert!(f.contains(&format!("{t} group:")), "{t}: {f}");
    }
    // Select weight and liveness, chaining.
    assert!(f.contains("Capabilities:  0x7"), "{f}");
    // Refused as Open vSwitch refuses them.
    for (cmd, spec, code) in [
        (
            "mod-group",
            "group_id=2,type=indirect,bucket=actions=group:4",
            "OFPGMFC_LOOP",
        ),
        (
            "add-group",
            "group_id=9,type=all,bucket=actions=group:99",
            "OFPGMFC_CHAINING_UNSUPPORTED",
        ),
    ] {
        let o = ofctl(&sw, &[cmd, spec]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains(code), "{spec}: {err}");
    }
    // A group that others name may be deleted: they then do nothing.
    ofctl_ok(&sw, &["del-groups", "group_id=1"]);
    let after = ofctl_ok(&sw, &["dump-groups"]);
    assert!(
        !after.contains("group_id=1,") && after.contains("group_id=3,"),
        "{after}"
    );
}

/// The matches and actions issue 37 added, through `ovs-ofctl add-flow`
/// and back through `ovs-ofctl dump-flows`: each rule as written (Open
/// vSwitch's own encoding and printing on both ways).
#[test]
fn mpls_sctp_icmp_and_arp_rules_round_trip_through_ovs_ofctl() {
    let sw = start("mem:a?source=64&flows=8");
    let rules = [
        "priority=11,mpls,mpls_label=100,mpls_tc=3,mpls_bos=1,actions=dec_mpls_ttl,pop_mpls:0x0800,output:2",
        "priority=12,ip,actions=push_mpls:0x8847,set_field:1000->mpls_label,set_field:5->mpls_tc,set_mpls_ttl(9),output:2",
        "priority=13,sctp,tp_src=5000,actions=set_field:9->sctp_dst,output:2",
        "priority=14,icmp,actions=set_field:0->icmp_type,set_field:3->icmp_code,output:2",
        "priority=15,icmp6,actions=set_field:129->icmpv6_type,output:2",
        "priority=16,arp,arp_sha=02:00:00:00:00:01,arp_tha=02:00:00:00:00:00/ff:ff:ff:00:00:00,actions=set_field:02:00:00:00:00:07->arp_sha,output:2",
        "priority=17,tun_id=0x5,actions=output:2",
        "priority=19,ipv6,ipv6_label=0x12345,actions=set_field:0xabcde->ipv6_label,output:2",
        "priority=20,udp6,ipv6_label=0x10000/0xf0000,actions=output:2",
        "priority=21,icmp6,icmp_type=135,nd_target=fe80::7,nd_sll=02:00:00:00:00:0a,actions=set_field:fe80::8->nd_target,set_field:02:00:00:00:00:0b->nd_sll,output:2",
        "priority=22,icmp6,icmp_type=136,nd_target=fe80::/64,nd_tll=02:00:00:00:00:00/ff:ff:ff:00:00:00,actions=set_field:02:00:00:00:00:0c->nd_tll,output:2",
        "priority=18,tunnel_id=0x100/0xff00,actions=set_field:0x77->tun_id,move:NXM_NX_TUN_ID[0..15]->NXM_NX_REG0[0..15],output:2",
    ];
    for r in rules {
        ofctl_ok(&sw, &["add-flow", r]);
    }
    let mut want: Vec<String> = rules
        .iter()
        .map(|r| canonical(Rule::parse(r).unwrap()).to_string())
        .collect();
    want.sort();
    let got: Vec<String> = of_rules(&sw)
        .into_iter()
        .filter(|r| !r.starts_with("table=10,"))
        .collect();
    assert_eq!(got, want);
}
