//! The OpenFlow channel against the conversations `ovs-ofctl -O
//! OpenFlow13` had with Open vSwitch 3.1 (`tests/data/openflow`, recorded
//! on the wire): linerate decodes what ovs-ofctl sent into the rule
//! ovs-ofctl was given, decodes Open vSwitch's flow dump into the rules
//! ovs-ofctl printed, and what it encodes decodes back to the same rule.

use super::msg::{canonical, decode_flow_stats, flow_mod_add, hello, ChannelStats, Session};
use super::wire::sendable;
use super::wire::*;
use crate::switch::actions::{Meter, MeterUnit};
use crate::switch::counters::{CacheCounters, SwitchCounters};
use crate::switch::ctl::Shared;
use crate::switch::group::Group;
use crate::switch::table::{FlowTable, TableHandle};
use crate::switch::Rule;
use std::path::PathBuf;
use std::sync::Arc;

/// One recorded message: (from ovs-ofctl?, title, bytes).
struct Msg {
    to_switch: bool,
    title: String,
    bytes: Vec<u8>,
}

struct Conversation {
    name: String,
    command: String,
    stdout: Vec<String>,
    msgs: Vec<Msg>,
}

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/openflow")
}

fn load(name: &str) -> Conversation {
    let p = dir().join(format!("{name}.txt"));
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let mut c = Conversation {
        name: name.into(),
        command: String::new(),
        stdout: Vec::new(),
        msgs: Vec::new(),
    };
    for l in text.lines() {
        if let Some(x) = l.strip_prefix("# command: ") {
            c.command = x.into();
        } else if let Some(x) = l.strip_prefix("# stdout: ") {
            c.stdout.push(x.into());
        } else if let Some(x) = l.strip_prefix("# c->s ").or(l.strip_prefix("# s->c ")) {
            c.msgs.push(Msg {
                to_switch: l.starts_with("# c->s"),
                title: x.into(),
                bytes: Vec::new(),
            });
        } else if !l.starts_with('#') && !l.is_empty() {
            let m = c.msgs.last_mut().expect("hex before a title");
            m.bytes.extend(
                l.split_whitespace()
                    .map(|h| u8::from_str_radix(h, 16).expect("hex byte")),
            );
        }
    }
    c
}

/// The quoted argument of the recorded command.
fn quoted(cmd: &str) -> &str {
    cmd.split('\'').nth(1).unwrap_or("")
}

fn shared() -> Arc<Shared> {
    let mut t = FlowTable::new();
    t.add_group(Group::parse("group_id=1,type=all,bucket=output:2,bucket=output:3").unwrap())
        .unwrap();
    t.add_meter(Meter::new(1, MeterUnit::Pktps, 1000, 0))
        .unwrap();
    Arc::new(Shared {
        ctl: TableHandle::new(t),
        ports: vec![(1, "mem:a".into(), Default::default())],
        cache: Arc::new(CacheCounters::default()),
        counters: Arc::new(SwitchCounters::default()),
        controller: Default::default(),
        links: Default::default(),
    })
}

fn session(sh: &Arc<Shared>) -> Session {
    let mut s = Session::new(sh.clone(), Arc::new(ChannelStats::default()), 7);
    s.message(&hello()).unwrap();
    s
}

fn kinds(out: &[Vec<u8>]) -> Vec<u8> {
    out.iter().map(|m| m[1]).collect()
}

fn barrier(xid: u32) -> Vec<u8> {
    Writer::new(BARRIER_REQUEST, xid).finish()
}

/// The first `FLOW_MOD` ovs-ofctl sent in `c`, through `s` with a barrier:
/// only the barrier is answered.
fn flow_mod_ok(s: &mut Session, c: &Conversation) {
    let fm = c
        .msgs
        .iter()
        .find(|m| m.to_switch && m.title.contains("OFPT_FLOW_MOD"))
        .unwrap_or_else(|| panic!("{}: no FLOW_MOD", c.name));
    s.take_out();
    s.message(&fm.bytes).unwrap();
    s.message(&barrier(99)).unwrap();
    assert_eq!(
        kinds(&s.take_out()),
        vec![BARRIER_REPLY],
        "{}: {:?}",
        c.name,
        s.last_error
    );
}

/// The FLOW_MOD linerate encodes for `want` adds `want` to a fresh table.
fn assert_round_trip(want: &Rule, what: &str) {
    let sh = shared();
    let mut s = session(&sh);
    s.message(&flow_mod_add(want, 5)).unwrap();
    s.message(&barrier(6)).unwrap();
    assert_eq!(
        kinds(&s.take_out()),
        vec![BARRIER_REPLY],
        "{what}: {:?}",
        s.last_error
    );
    assert_eq!(
        &sh.ctl.current().flows()[0].rule,
        want,
        "{what}: round trip"
    );
}

/// Every `add-flow` ovs-ofctl sent decodes to the rule it was given
/// (`mod_vlan_vid` on an untagged match: sent as push_vlan + set_field,
/// read back as `mod_vlan_vid`), and is answered by a barrier reply only.
#[test]
fn recorded_add_flows_decode_to_the_rule_ovs_ofctl_was_given() {
    let mut n = 0;
    for e in std::fs::read_dir(dir()).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        let Some(name) = name.strip_suffix(".txt") else {
            continue;
        };
        // OpenFlow 1.0 and port names are not OpenFlow 1.3 numbers.
        if !name.starts_with("add-flow-") || name.ends_with("of10") || name.contains("names") {
            continue;
        }
        let c = load(name);
        let text = quoted(&c.command);
        let want = canonical(Rule::parse(text).unwrap());
        let sh = shared();
        let mut s = session(&sh);
        flow_mod_ok(&mut s, &c);
        let t = sh.ctl.current();
        let got: Vec<&Rule> = t.flows().into_iter().map(|e| &e.rule).collect();
        assert_eq!(got, vec![&want], "{name}: {text}");
        // And what linerate would send for it decodes to it again.
        assert_round_trip(&want, name);
        n += 1;
    }
    assert!(n >= 14, "only {n} add-flow conversations found");
}

/// Open vSwitch's flow dump (its bytes) decodes to the rules ovs-ofctl
/// printed from it.
#[test]
fn recorded_flow_dump_decodes_to_what_ovs_ofctl_printed() {
    let c = load("dump-flows");
    let body: Vec<u8> = c
        .msgs
        .iter()
        .filter(|m| !m.to_switch && m.title.contains("OFPMP_FLOW"))
        .flat_map(|m| m.bytes[16..].to_vec())
        .collect();
    let rules = decode_flow_stats(&body).unwrap();
    // stdout: "OFPST_FLOW reply ...", then one line per rule.
    let printed: Vec<&String> = c.stdout.iter().skip(1).collect();
    assert_eq!(rules.len(), printed.len(), "{:?}", c.stdout);
    assert_eq!(rules.len(), 4, "{}", c.name);
    for ((r, _, _), line) in rules.iter().zip(&printed) {
        // The printed line without its statistics, as a rule.
        let text: Vec<&str> = line
            .split(", ")
            .filter(|f| {
                !["duration=", "n_packets=", "n_bytes=", "idle_age="]
                    .iter()
                    .any(|p| f.trim().starts_with(p))
            })
            .collect();
        let text = text.join(",").replacen(" actions=", ",actions=", 1);
        let want = canonical(Rule::parse(text.trim()).unwrap());
        assert_eq!(r, &want, "{line}");
    }
}

/// A flow dump from linerate lists the table's rules; every kind of
/// request ovs-ofctl sends gets the replies it waits for.
#[test]
fn dumps_list_the_table_and_requests_get_their_replies() {
    let sh = shared();
    let rules = [
        "table=0,priority=0,actions=resubmit(,1)",
        "table=1,priority=10,reg0=0x1/0xff,actions=resubmit(,2)",
        "table=1,priority=0,actions=learn(table=10,NXM_OF_VLAN_TCI[0..11],NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],load:NXM_OF_IN_PORT[]->NXM_NX_REG0[0..15]),output:2",
        "table=2,priority=5,ipv6,ipv6_dst=2001:db8::/32,tcp6,tcp_flags=+syn-ack,actions=output:3",
        "table=2,priority=6,arp,nw_src=10.0.0.1,nw_proto=1,actions=flood",
        "table=3,priority=7,icmp,icmp_type=8,nw_ttl=64,ip_dscp=10,actions=meter:1,group:1",
        "table=4,priority=8,vlan_tci=0,actions=mod_vlan_vid:7,output:1",
        "table=4,priority=9,vlan_tci=0x1005/0x1fff,ip,actions=strip_vlan,set_field:10.0.0.9->ip_dst,in_port",
    ];
    let mut s = session(&sh);
    for (i, r) in rules.iter().enumerate() {
        let r = Rule::parse(r).unwrap();
        s.message(&flow_mod_add(&r, i as u32 + 10)).unwrap();
    }
    s.message(&barrier(1)).unwrap();
    assert_eq!(
        kinds(&s.take_out()),
        vec![BARRIER_REPLY],
        "{:?}",
        s.last_error
    );
    s.take_out();
    // dump-flows (the request ovs-ofctl sent OvS).
    let dump = load("dump-flows");
    let req = &dump
        .msgs
        .iter()
        .find(|m| m.to_switch && m.title.contains("OFPMP_FLOW"))
        .unwrap()
        .bytes;
    s.message(req).unwrap();
    let body: Vec<u8> = s.take_out().iter().flat_map(|m| m[16..].to_vec()).collect();
    let mut got: Vec<Rule> = decode_flow_stats(&body)
        .unwrap()
        .into_iter()
        .map(|x| x.0)
        .collect();
    // Rules come table by table (in the classifier's order within one, as
    // Open vSwitch sends them: ovs-ofctl sorts with --sort/--rsort).
    assert!(got.windows(2).all(|w| w[0].table <= w[1].table), "{got:?}");
    let by = |r: &Rule| (r.table, std::cmp::Reverse(r.priority));
    got.sort_by_key(by);
    let mut want: Vec<Rule> = rules
        .iter()
        .map(|r| canonical(Rule::parse(r).unwrap()))
        .collect();
    want.sort_by_key(by);
    assert_eq!(got, want);
    // Each recorded request of these conversations gets a reply of the
    // type ovs-ofctl got from OvS (tables, ports, groups, meters, show).
    for name in [
        "dump-tables",
        "dump-ports",
        "dump-ports-desc",
        "dump-groups",
        "dump-meters",
        "dump-aggregate",
        "show",
        "dump-flows-table",
    ] {
        let c = load(name);
        let mut s = session(&sh);
        for m in c.msgs.iter().filter(|m| m.to_switch && !m.bytes.is_empty()) {
            if m.bytes[1] == HELLO {
                continue;
            }
            s.take_out();
            s.message(&m.bytes).unwrap();
            let xid = Header::parse(&m.bytes).unwrap().xid;
            // OvS's replies by the title (a table-features reply's hex is
            // in another file): their type names.
            let tag = format!("(xid {xid:#010x})");
            let want: Vec<&str> = c
                .msgs
                .iter()
                .filter(|r| !r.to_switch && r.title.contains(&tag))
                .filter_map(|r| r.title.split_whitespace().find(|w| w.starts_with("OFPT_")))
                .collect();
            let name_of = |k: u8| match k {
                MULTIPART_REPLY => "OFPT_MULTIPART_REPLY",
                FEATURES_REPLY => "OFPT_FEATURES_REPLY",
                GET_CONFIG_REPLY => "OFPT_GET_CONFIG_REPLY",
                _ => "other",
            };
            let out = s.take_out();
            let got: Vec<&str> = out.iter().map(|m| name_of(m[1])).collect();
            assert!(
                !got.is_empty() && got.iter().all(|k| want.contains(k)),
                "{name}: {} -> {got:?}, OvS {want:?}",
                m.title
            );
            assert!(out.iter().all(|m| Header::parse(m).unwrap().xid == xid));
        }
    }
}

/// Deletes and modifies select as ovs-ofctl means them: strict, cookie,
/// out_port (the recorded requests, against the recorded rules).
#[test]
fn recorded_deletes_and_modifies_select_the_rules_ovs_did() {
    let sh = shared();
    let mut s = session(&sh);
    for r in [
        "table=4,priority=99,reg0=0,dl_vlan=30,actions=output:1,strip_vlan,output:3,output:4",
        "table=4,reg0=1,actions=output:1",
        "cookie=0x1234,idle_timeout=10,hard_timeout=60,priority=5,ip,actions=NORMAL",
        "table=6,actions=output:2",
    ] {
        s.message(&flow_mod_add(&Rule::parse(r).unwrap(), 3))
            .unwrap();
    }
    let step = |s: &mut Session, name: &str| {
        flow_mod_ok(s, &load(name));
        let t = sh.ctl.current();
        t.flows()
            .iter()
            .map(|e| e.rule.to_string())
            .collect::<Vec<_>>()
    };
    // mod-flows 'table=4,reg0=1,actions=output:2': only that rule changes.
    let v = step(&mut s, "mod-flows");
    assert!(
        v.iter().any(|r| r.contains("table=4")
            && r.contains("reg0=0x1,")
            && r.ends_with("actions=output:2")),
        "{v:?}"
    );
    assert!(
        v.iter()
            .any(|r| r.contains("priority=99") && r.contains("output:1,pop_vlan")),
        "{v:?}"
    );
    // --strict del-flows 'table=4,priority=99,reg0=0,dl_vlan=30'
    let v = step(&mut s, "del-flows-strict");
    assert!(!v.iter().any(|r| r.contains("priority=99")), "{v:?}");
    assert_eq!(v.len(), 3);
    // del-flows cookie=0x1234/-1
    let v = step(&mut s, "del-flows-cookie");
    assert!(!v.iter().any(|r| r.contains("0x1234")), "{v:?}");
    assert_eq!(v.len(), 2);
    // del-flows out_port=2: the two rules left output to 2.
    let v = step(&mut s, "del-flows-out-port");
    assert!(v.is_empty(), "{v:?}");
}

/// Malformed messages end the connection with an error; requests linerate
/// does not support get an error and the connection goes on.
#[test]
fn malformed_messages_end_the_connection_unsupported_ones_do_not() {
    let sh = shared();
    // Before HELLO.
    let mut s = Session::new(sh.clone(), Arc::new(ChannelStats::default()), 1);
    assert!(s.message(&barrier(1)).is_err());
    assert_eq!(kinds(&s.take_out()), vec![ERROR]);
    // A peer that speaks OpenFlow 1.0 only.
    let mut s = Session::new(sh.clone(), Arc::new(ChannelStats::default()), 1);
    let mut h = Writer::new(HELLO, 1);
    h.b[0] = 1;
    h.u16(1);
    h.u16(8);
    h.u32(1 << 1);
    assert!(s.message(&h.finish()).is_err());
    assert_eq!(
        &s.take_out()[0][8..12],
        &[0, 0, 0, 0],
        "HELLO_FAILED/INCOMPATIBLE"
    );
    // A length that does not add up, a bad version.
    let mut s = session(&sh);
    let mut m = barrier(2);
    m[3] = 20;
    assert!(s.message(&m).is_err());
    let mut s = session(&sh);
    let mut m = barrier(2);
    m[0] = 5;
    assert!(s.message(&m).is_err());
    // A FLOW_MOD whose match runs past its end.
    let mut s = session(&sh);
    let mut fm = flow_mod_add(&Rule::parse("in_port=1,actions=output:2").unwrap(), 3);
    fm[51] = 200;
    assert!(s.message(&fm).is_err());
    // Unsupported, well-formed: error, connection lives, barrier answered.
    let mut s = session(&sh);
    let c = load("add-flow-group");
    let mut fm = c
        .msgs
        .iter()
        .find(|m| m.title.contains("OFPT_FLOW_MOD"))
        .unwrap()
        .bytes
        .clone();
    fm[68..72].copy_from_slice(&99u32.to_be_bytes()); // group 99: none
    s.message(&fm).unwrap();
    s.message(&packet_out(7, 1, &[2], &[0u8; 60], 8)).unwrap();
    s.message(&barrier(9)).unwrap();
    let out = s.take_out();
    assert_eq!(kinds(&out), vec![ERROR, ERROR, BARRIER_REPLY]);
    assert_eq!(err_of(&out[1]), (err::BAD_REQUEST, err::BR_BUFFER_UNKNOWN));
    assert_eq!(&out[0][8..12], &[0, 2, 0, 9], "BAD_ACTION/BAD_OUT_GROUP");
    assert_eq!(sh.ctl.current().len(), 0);
}

/// What Open vSwitch 3.1 refuses too gets its error: `copy_ttl_out`,
/// `copy_ttl_in`, `push_pbb` and `pop_pbb` (OpenFlow 1.3 action types 11,
/// 12, 26, 27; "not supported" in its `ofp-actions.c`) are
/// `BAD_ACTION/BAD_TYPE`, and a match on `OXM_OF_PBB_ISID` (37), a field
/// it does not have, is `BAD_MATCH/BAD_FIELD` (its strict OXM decoding of
/// a FLOW_MOD). The connection lives on.
#[test]
fn what_open_vswitch_refuses_gets_its_error_code() {
    let sh = shared();
    let find = |m: &[u8], pat: [u8; 4]| m.windows(4).rposition(|w| w == pat).unwrap();
    for t in [11u16, 12, 26, 27] {
        let mut s = session(&sh);
        let mut fm = flow_mod_add(&Rule::parse("actions=dec_ttl").unwrap(), 5);
        // OFPAT_DEC_NW_TTL (24), 8 bytes: the same shape as these four.
        let at = find(&fm, [0, 24, 0, 8]);
        fm[at..at + 2].copy_from_slice(&t.to_be_bytes());
        s.message(&fm).unwrap();
        s.message(&barrier(6)).unwrap();
        let out = s.take_out();
        assert_eq!(kinds(&out), vec![ERROR, BARRIER_REPLY], "action type {t}");
        assert_eq!(
            err_of(&out[0]),
            (err::BAD_ACTION, err::BA_BAD_TYPE),
            "action type {t}"
        );
    }
    let mut s = session(&sh);
    let mut fm = flow_mod_add(&Rule::parse("tun_id=5,actions=output:2").unwrap(), 7);
    // OXM_OF_TUNNEL_ID (38, 8 bytes) made field 37.
    let at = find(&fm, [0x80, 0, 38 << 1, 8]);
    fm[at + 2] = 37 << 1;
    s.message(&fm).unwrap();
    s.message(&barrier(8)).unwrap();
    let out = s.take_out();
    assert_eq!(kinds(&out), vec![ERROR, BARRIER_REPLY]);
    assert_eq!(err_of(&out[0]), (err::BAD_MATCH, err::BM_BAD_FIELD));
    assert_eq!(sh.ctl.current().len(), 0);
}

#[test]
fn fuzz_smoke() {
    let c = load("add-flow-learn");
    let mut all = Vec::new();
    for m in c.msgs.iter().filter(|m| m.to_switch) {
        all.extend_from_slice(&m.bytes);
    }
    super::fuzz(&all);
    for cut in [1usize, 7, 9, 60, 100] {
        super::fuzz(&all[..cut.min(all.len())]);
        let mut x = all.clone();
        if cut < x.len() {
            x[cut] ^= 0xff;
        }
        super::fuzz(&x);
    }
}

/// The recorded GROUP_MOD and METER_MOD add and delete what ovs-ofctl
/// asked for.
#[test]
fn recorded_group_and_meter_mods() {
    let sh = Arc::new(Shared {
        ctl: TableHandle::new(FlowTable::new()),
        ports: vec![],
        cache: Arc::new(CacheCounters::default()),
        counters: Arc::new(SwitchCounters::default()),
        controller: Default::default(),
        links: Default::default(),
    });
    let mut s = session(&sh);
    let send = |s: &mut Session, name: &str, title: &str| {
        let c = load(name);
        let m = c
            .msgs
            .iter()
            .find(|m| m.to_switch && m.title.contains(title))
            .unwrap_or_else(|| panic!("{name}: no {title}"));
        s.take_out();
        s.message(&m.bytes).unwrap();
        s.message(&barrier(1)).unwrap();
        assert_eq!(
            kinds(&s.take_out()),
            vec![BARRIER_REPLY],
            "{name}: {:?}",
            s.last_error
        );
    };
    send(&mut s, "add-group", "OFPT_GROUP_MOD");
    send(&mut s, "add-meter", "OFPT_METER_MOD");
    {
        let t = sh.ctl.current();
        let g: Vec<&Group> = t.groups().collect();
        assert_eq!(
            g,
            vec![&Group::parse("group_id=1,type=all,bucket=output:2,bucket=output:3").unwrap()]
        );
        let m = t.meter(1).expect("meter 1");
        assert_eq!((m.unit, m.rate), (MeterUnit::Pktps, 1000));
    }
    // The same group again is an error (OFPGMFC_GROUP_EXISTS).
    let c = load("add-group");
    let gm = &c
        .msgs
        .iter()
        .find(|m| m.title.contains("OFPT_GROUP_MOD"))
        .unwrap()
        .bytes;
    s.take_out();
    s.message(gm).unwrap();
    let out = s.take_out();
    assert_eq!(kinds(&out), vec![ERROR]);
    assert_eq!(&out[0][8..12], &[0, 6, 0, 0]);
    send(&mut s, "del-groups", "OFPT_GROUP_MOD");
    send(&mut s, "del-meters", "OFPT_METER_MOD");
    let t = sh.ctl.current();
    assert_eq!(t.groups().count(), 0);
    assert!(t.meter(1).is_none());
}

use super::client::{
    delete_all_request as delete_all, multipart_request as mp_request, stats_request,
};

/// A flow-stats request for every rule of every table.
fn all_flows(xid: u32) -> Vec<u8> {
    mp_request(xid, MP_FLOW, &stats_request(0, 0))
}

/// Rule `n` of a family of distinct rules (in_port and a destination).
fn nth_rule(n: u32) -> Rule {
    Rule::parse(&format!(
        "priority=10,in_port={},ip,nw_dst=10.{}.{}.{},actions=output:2",
        n % 60 + 1,
        (n >> 16) & 0xff,
        (n >> 8) & 0xff,
        n & 0xff
    ))
    .unwrap()
}

/// (type, code) of an error message.
fn err_of(m: &[u8]) -> (u16, u16) {
    (
        u16::from_be_bytes([m[8], m[9]]),
        u16::from_be_bytes([m[10], m[11]]),
    )
}

/// A FLOW_MOD past a full table's limit gets OFPFMFC_TABLE_FULL, whether
/// it waited for its batch or was refused at once (the table already
/// full); a delete waiting before it keeps it from being refused early.
#[test]
fn a_full_table_answers_table_full() {
    use crate::switch::table::Limits;
    let sh = shared();
    sh.ctl
        .edit(|t| t.set_limits(Limits::from_flags(3, &[]).unwrap()));
    let mut s = session(&sh);
    for n in 0..5 {
        s.message(&flow_mod_add(&nth_rule(n), 100 + n)).unwrap();
    }
    s.message(&barrier(1)).unwrap();
    let out = s.take_out();
    assert_eq!(kinds(&out), vec![ERROR, ERROR, BARRIER_REPLY]);
    assert_eq!(err_of(&out[0]), (err::FLOW_MOD_FAILED, err::FM_TABLE_FULL));
    assert_eq!(Header::parse(&out[0]).unwrap().xid, 103);
    assert_eq!(sh.ctl.current().len(), 3);
    // Full now: refused as they come, nothing held for the batch.
    let held = s_held(&s);
    s.message(&flow_mod_add(&nth_rule(7), 7)).unwrap();
    assert_eq!(s_held(&s), held + out_cost_of(&s), "no pending rule");
    s.message(&barrier(2)).unwrap();
    let out = s.take_out();
    assert_eq!(kinds(&out), vec![ERROR, BARRIER_REPLY]);
    assert_eq!(err_of(&out[0]), (err::FLOW_MOD_FAILED, err::FM_TABLE_FULL));
    // Replacing a rule of a full table needs no room.
    s.message(&flow_mod_add(&nth_rule(0), 8)).unwrap();
    // A delete before an add: the add waits, and fits.
    s.message(&delete_all(9)).unwrap();
    s.message(&flow_mod_add(&nth_rule(9), 10)).unwrap();
    s.message(&barrier(3)).unwrap();
    assert_eq!(
        kinds(&s.take_out()),
        vec![BARRIER_REPLY],
        "{:?}",
        s.last_error
    );
    assert_eq!(sh.ctl.current().len(), 1);
}

/// The channel's charge now, in bytes.
fn s_held(s: &Session) -> usize {
    s.stats().held.load(std::sync::atomic::Ordering::Relaxed)
}

/// What the replies waiting in `s` are charged.
fn out_cost_of(s: &Session) -> usize {
    s.out_cost()
}

/// Decoded FLOW_MODs of many connections share one budget: each
/// connection past it applies what it holds beyond its reserve, so the
/// whole never holds more than the budget plus a reserve per connection,
/// and every rule is applied.
#[test]
fn pending_flow_mods_of_all_connections_share_one_budget() {
    use super::msg::{CONN_RESERVE, PENDING_BUDGET};
    use std::sync::atomic::Ordering::Relaxed;
    let sh = shared();
    let stats = Arc::new(ChannelStats::default());
    let budget = 256 << 10;
    stats.budget.store(budget, Relaxed);
    let (conns, each) = (16u32, 6000u32);
    let mut ss: Vec<Session> = (0..conns)
        .map(|_| {
            let mut s = Session::new(sh.clone(), stats.clone(), 7);
            s.message(&hello()).unwrap();
            s
        })
        .collect();
    let msg_len = flow_mod_add(&nth_rule(0), 0).len();
    for i in 0..each {
        for (c, s) in ss.iter_mut().enumerate() {
            let n = c as u32 * each + i;
            s.message(&flow_mod_add(&nth_rule(n), n)).unwrap();
            assert!(s.take_out().is_empty(), "no error");
        }
    }
    let max = stats.held_max.load(Relaxed);
    // Without the budget each would hold all of its own: ~3 MB each here.
    assert!(max > budget, "the budget was reached ({max} bytes)");
    assert!(
        max <= budget + conns as usize * (CONN_RESERVE + 4 * msg_len + 4096),
        "held at most {max} bytes"
    );
    eprintln!("held at most {max} bytes, budget {budget}");
    assert!(budget < PENDING_BUDGET);
    for s in &mut ss {
        s.message(&barrier(1)).unwrap();
        assert_eq!(kinds(&s.take_out()), vec![BARRIER_REPLY]);
    }
    assert_eq!(sh.ctl.current().len(), (conns * each) as usize);
    drop(ss);
    assert_eq!(stats.held.load(Relaxed), 0, "everything given back");
}

/// A flow dump is made a message at a time from the table's current
/// version: every message framed (at most 64 KiB, MORE on all but the
/// last), nothing of it queued ahead, and rules deleted while it is sent
/// are not sent.
#[test]
fn dumps_are_made_a_message_at_a_time() {
    let sh = shared();
    let n = 20_000u32;
    sh.ctl
        .try_edit(|t| {
            for i in 0..n {
                t.add_flow(nth_rule(i), 0)?;
            }
            Ok::<(), String>(())
        })
        .unwrap();
    let mut s = session(&sh);
    s.message(&all_flows(5)).unwrap();
    let first = s.next_out().unwrap();
    assert!(sendable(&first) && first.len() > 60_000, "{}", first.len());
    assert_eq!(
        u16::from_be_bytes([first[10], first[11]]) & MPF_MORE,
        MPF_MORE
    );
    assert!(s.has_out());
    assert_eq!(out_cost_of(&s), 0, "the rest is not made yet");
    let mut msgs = vec![first];
    msgs.extend(s.take_out());
    for (i, m) in msgs.iter().enumerate() {
        assert!(sendable(m), "message {i}");
        let more = u16::from_be_bytes([m[10], m[11]]) & MPF_MORE != 0;
        assert_eq!(more, i + 1 < msgs.len(), "message {i} of {}", msgs.len());
    }
    let body: Vec<u8> = msgs.iter().flat_map(|m| m[16..].to_vec()).collect();
    assert_eq!(decode_flow_stats(&body).unwrap().len(), n as usize);
    // Again, deleting every rule after the first message.
    s.message(&all_flows(6)).unwrap();
    let first = s.next_out().unwrap();
    sh.ctl.edit(|t| t.del_flows(None));
    let mut msgs = vec![first];
    msgs.extend(s.take_out());
    assert!(msgs.len() <= 2, "{} messages", msgs.len());
    let body: Vec<u8> = msgs.iter().flat_map(|m| m[16..].to_vec()).collect();
    let sent = decode_flow_stats(&body).unwrap().len();
    assert!(sent > 0 && sent < 1000, "{sent} rules sent");
}

/// The largest group the table takes (2047 buckets) is one group
/// description of at most 64 KiB, and a group statistics entry.
#[test]
fn the_largest_group_is_dumped_whole() {
    use crate::switch::table::MAX_BUCKETS;
    let sh = shared();
    let buckets: Vec<String> = (1..=MAX_BUCKETS)
        .map(|p| format!("bucket=output:{p}"))
        .collect();
    let g = Group::parse(&format!("group_id=9,type=all,{}", buckets.join(","))).unwrap();
    sh.ctl.try_edit(|t| t.add_group(g)).unwrap();
    let mut s = session(&sh);
    let mut want = Writer { b: Vec::new() };
    want.u32(9);
    want.zeros(4);
    s.message(&mp_request(3, MP_GROUP_DESC, &[])).unwrap();
    let out = s.take_out();
    assert!(out.iter().all(|m| sendable(m)));
    let body: Vec<u8> = out.iter().flat_map(|m| m[16..].to_vec()).collect();
    // Two groups (the shared table's group 1 and group 9), each whole.
    let mut r = Reader::new(&body, "groups");
    let mut buckets = Vec::new();
    while !r.is_empty() {
        let len = Reader::new(r.rest(), "len").u16().unwrap() as usize;
        let mut e = Reader::new(r.bytes(len).unwrap(), "group");
        e.skip(4).unwrap();
        let id = e.u32().unwrap();
        buckets.push((id, e.len() / 32));
    }
    assert_eq!(buckets, vec![(1, 2), (9, MAX_BUCKETS)]);
    s.message(&mp_request(4, MP_GROUP, &want.b)).unwrap();
    let out = s.take_out();
    assert_eq!(out.len(), 1);
    assert!(sendable(&out[0]));
    assert_eq!(out[0].len(), 16 + 40 + 16 * MAX_BUCKETS);
}

/// Deletes that delete nothing publish no table version.
#[test]
fn deletes_of_nothing_publish_nothing() {
    let sh = shared();
    let mut s = session(&sh);
    let v = sh.ctl.current().clone();
    s.message(&delete_all(1)).unwrap();
    let mut gm = Writer::new(GROUP_MOD, 2);
    gm.u16(2);
    gm.u8(0);
    gm.u8(0);
    gm.u32(77);
    s.message(&gm.finish()).unwrap();
    let mut mm = Writer::new(METER_MOD, 3);
    mm.u16(2);
    mm.u16(0);
    mm.u32(78);
    s.message(&mm.finish()).unwrap();
    s.message(&barrier(4)).unwrap();
    assert_eq!(kinds(&s.take_out()), vec![BARRIER_REPLY]);
    assert!(Arc::ptr_eq(&v, &sh.ctl.current()));
    assert_eq!(
        s.stats()
            .versions
            .load(std::sync::atomic::Ordering::Relaxed),
        0
    );
}

/// Rules linerate encodes into FLOW_MODs decode to themselves: ARP's
/// addresses written by set_field (was: decoded as ipv4_src, then refused
/// for want of ip in the match), an SCTP port match, ECN, PCP and
/// SET_NW_TTL.
#[test]
fn arp_set_field_and_sctp_matches_round_trip() {
    for text in [
        "arp,arp_op=1,actions=set_field:10.9.9.9->arp_spa,set_field:10.0.0.7->arp_tpa,output:2",
        "arp,arp_spa=10.0.0.1,arp_tpa=10.0.0.0/24,actions=output:3",
        "sctp,tp_src=5000,tp_dst=9,actions=output:2",
        "sctp6,sctp_src=5000,sctp_dst=0x10/0xfff0,actions=output:2",
        "arp,arp_sha=02:00:00:00:00:01,arp_tha=02:00:00:00:00:00/ff:ff:ff:00:00:00,actions=output:2",
        "ip,actions=set_field:2->nw_ecn,mod_nw_ttl:9,output:2",
        "ipv6,actions=set_field:1->nw_ecn,mod_nw_ttl:200,output:2",
        "dl_vlan=5,actions=set_field:3->vlan_pcp,output:2",
        "icmp6,icmp_type=135,nd_target=fe80::7,nd_sll=02:00:00:00:00:0a,actions=set_field:fe80::8->nd_target,set_field:02:00:00:00:00:0b->nd_sll,output:2",
        "icmp6,icmp_type=136,icmp_code=0,nd_target=fe80::/64,nd_tll=02:00:00:00:00:00/ff:ff:ff:00:00:00,actions=set_field:02:00:00:00:00:0c->nd_tll,output:2",
    ] {
        assert_round_trip(&canonical(Rule::parse(text).unwrap()), text);
    }
}

/// Every action type linerate has goes into a FLOW_MOD and comes back as
/// it was (issue 37: "round-trip tests for every action type").
#[test]
fn every_action_type_round_trips() {
    for text in [
        "actions=output:2",
        "actions=flood",
        "actions=all",
        "actions=in_port",
        "actions=normal",
        "actions=group:1",
        "actions=meter:1,output:2",
        "ip,actions=dec_ttl,output:2",
        "actions=push_vlan:0x8100,set_field:5->vlan_vid,output:2",
        "actions=push_vlan:0x88a8,output:2",
        "dl_vlan=5,actions=pop_vlan,output:2",
        "dl_vlan=0xffff,actions=mod_vlan_vid:7,output:2",
        "dl_vlan=5,actions=set_field:6->vlan_pcp,output:2",
        "actions=set_field:02:00:00:00:00:09->eth_dst,set_field:02:00:00:00:00:08->eth_src,output:2",
        "ip,actions=set_field:10.1.2.3->ip_src,set_field:10.3.2.1->ip_dst,output:2",
        "ipv6,actions=set_field:fd00::1->ipv6_src,set_field:fd00::2->ipv6_dst,output:2",
        "tcp,actions=set_field:80->tcp_src,set_field:8080->tcp_dst,output:2",
        "udp,actions=set_field:53->udp_src,set_field:5353->udp_dst,output:2",
        "ip,actions=set_field:46->ip_dscp,set_field:2->nw_ecn,mod_nw_ttl:9,output:2",
        "arp,actions=set_field:10.9.9.9->arp_spa,set_field:10.0.0.7->arp_tpa,output:2",
        "arp,actions=set_field:02:00:00:00:00:07->arp_sha,set_field:02:00:00:00:00:08->arp_tha,output:2",
        "sctp,actions=set_field:5000->sctp_src,set_field:9->sctp_dst,output:2",
        "sctp6,actions=mod_tp_src:7,output:2",
        "icmp,actions=set_field:0->icmp_type,set_field:3->icmp_code,output:2",
        "icmp6,actions=set_field:129->icmpv6_type,set_field:1->icmpv6_code,output:2",
        "ip,actions=push_mpls:0x8847,set_field:1000->mpls_label,set_field:5->mpls_tc,set_mpls_ttl(9),dec_mpls_ttl,output:2",
        "mpls,mpls_label=100,mpls_tc=3,mpls_bos=1,actions=pop_mpls:0x0800,output:2",
        "mplsm,actions=push_mpls:0x8848,output:2",
        "actions=load:0x5->NXM_NX_REG0[0..15],move:NXM_OF_IN_PORT[]->NXM_NX_REG1[0..15],output:NXM_NX_REG0[0..15]",
        "actions=write_metadata:0x10/0xff,goto_table:3",
        "actions=resubmit(,4),resubmit(3,5)",
        "actions=learn(table=10,idle_timeout=300,priority=100,NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],load:NXM_OF_IN_PORT[]->NXM_NX_REG0[0..15]),output:2",
        "priority=0,actions=controller",
        "cookie=0x7,table=2,priority=9,udp,actions=controller:128,output:2",
    ] {
        assert_round_trip(&canonical(Rule::parse(text).unwrap()), text);
    }
}

/// `PACKET_OUT` with no buffer, output actions to `ports` (OFPP_TABLE
/// among them as is), `frame`.
fn packet_out(buffer: u32, in_port: u32, ports: &[u32], frame: &[u8], xid: u32) -> Vec<u8> {
    let mut w = Writer::new(PACKET_OUT, xid);
    w.u32(buffer);
    w.u32(in_port);
    w.u16(16 * ports.len() as u16);
    w.zeros(6);
    for &p in ports {
        w.u16(0);
        w.u16(16);
        w.u32(p);
        w.u16(0);
        w.zeros(6);
    }
    w.bytes(frame);
    w.finish()
}

fn role_request(role: u32, gen: u64, xid: u32) -> Vec<u8> {
    let mut w = Writer::new(ROLE_REQUEST, xid);
    w.u32(role);
    w.zeros(4);
    w.u64(gen);
    w.finish()
}

fn switch_session(
    sh: &Arc<Shared>,
    cs: &Arc<super::controllers::Controllers>,
    pouts: Option<crate::switch::controller::PoutTx>,
) -> Session {
    let mut s = Session::for_switch(
        sh.clone(),
        Arc::new(ChannelStats::default()),
        7,
        cs.clone(),
        pouts,
    );
    s.message(&hello()).unwrap();
    s
}

fn pin_buf() -> crate::switch::controller::PinBuf {
    crate::switch::controller::PinBuf {
        pin: crate::switch::rule::Pin::new(0xffff),
        in_port: 1,
        pipe: Default::default(),
        total_len: 14,
        len: 14,
        data: [0; crate::switch::controller::PIN_DATA],
    }
}

/// Issue 37: a slave controller's FLOW_MOD is refused with IS_SLAVE, a
/// stale generation id with ROLE_REQUEST_FAILED/STALE, and only the
/// master gets packet-ins.
#[test]
fn a_slave_is_refused_and_only_the_master_gets_packet_ins() {
    use super::controllers::{Controllers, ROLE_MASTER, ROLE_SLAVE};
    let sh = shared();
    let cs = Arc::new(Controllers::default());
    let mut a = switch_session(&sh, &cs, None);
    let mut b = switch_session(&sh, &cs, None);
    assert_eq!(cs.len(), 2);
    // Both equal: both get packet-ins.
    cs.packet_in(&pin_buf());
    a.pull_async();
    b.pull_async();
    assert_eq!(kinds(&a.take_out()), vec![PACKET_IN]);
    assert_eq!(kinds(&b.take_out()), vec![PACKET_IN]);
    a.message(&role_request(ROLE_MASTER, 1, 1)).unwrap();
    b.message(&role_request(ROLE_MASTER, 2, 2)).unwrap();
    let (ra, rb) = (a.take_out(), b.take_out());
    assert_eq!(kinds(&ra), vec![ROLE_REPLY]);
    assert_eq!(&rb[0][8..12], &ROLE_MASTER.to_be_bytes());
    assert_eq!(&rb[0][16..24], &2u64.to_be_bytes());
    // a is a slave now.
    a.message(&role_request(0, 0, 3)).unwrap();
    assert_eq!(&a.take_out()[0][8..12], &ROLE_SLAVE.to_be_bytes());
    let fm = flow_mod_add(&Rule::parse("actions=output:2").unwrap(), 4);
    a.message(&fm).unwrap();
    a.message(&packet_out(NO_BUFFER, 1, &[2], &[0u8; 60], 5))
        .unwrap();
    a.message(&barrier(6)).unwrap();
    let out = a.take_out();
    assert_eq!(kinds(&out), vec![ERROR, ERROR, BARRIER_REPLY]);
    assert_eq!(err_of(&out[0]), (err::BAD_REQUEST, err::BR_IS_SLAVE));
    assert_eq!(err_of(&out[1]), (err::BAD_REQUEST, err::BR_IS_SLAVE));
    assert_eq!(sh.ctl.current().len(), 0);
    assert_eq!(
        cs.stats.is_slave.load(std::sync::atomic::Ordering::Relaxed),
        2
    );
    // The master's is applied.
    b.message(&fm).unwrap();
    b.message(&barrier(7)).unwrap();
    assert_eq!(kinds(&b.take_out()), vec![BARRIER_REPLY]);
    assert_eq!(sh.ctl.current().len(), 1);
    // An older generation id is stale.
    a.message(&role_request(ROLE_MASTER, 1, 8)).unwrap();
    let out = a.take_out();
    assert_eq!(err_of(&out[0]), (err::ROLE_REQUEST_FAILED, err::RR_STALE));
    // Only the master gets packet-ins; the slave's async config says so.
    cs.packet_in(&pin_buf());
    a.pull_async();
    b.pull_async();
    assert!(a.take_out().is_empty());
    assert_eq!(kinds(&b.take_out()), vec![PACKET_IN]);
    a.message(&Writer::new(GET_ASYNC_REQUEST, 9).finish())
        .unwrap();
    let r = &a.take_out()[0];
    // packet_in_mask[0] (master/equal), packet_in_mask[1] (slave).
    assert_eq!(
        (&r[8..12], &r[12..16]),
        (&[0, 0, 0, 3][..], &[0, 0, 0, 0][..])
    );
    drop(a);
    assert_eq!(cs.len(), 1, "a closed session leaves");
}

/// `PACKET_OUT`: the actions (`output:TABLE` as `resubmit(,0)`), in_port
/// and frame reach the datapath's queue; a frame too short, a buffer id
/// and a full queue are refused or counted; `SET_CONFIG` reads back.
#[test]
fn packet_outs_are_decoded_for_the_datapath() {
    use crate::switch::controller::{pout_queue, POUT_QUEUE};
    use crate::switch::Action;
    let sh = shared();
    let cs = Arc::new(super::controllers::Controllers::default());
    let (tx, rx) = pout_queue();
    let mut s = switch_session(&sh, &cs, Some(tx));
    let frame: Vec<u8> = (0..60u8).collect();
    s.message(&packet_out(NO_BUFFER, 3, &[2, OFPP_TABLE], &frame, 1))
        .unwrap();
    s.message(&packet_out(NO_BUFFER, 3, &[2], &frame[..10], 2))
        .unwrap();
    s.message(&packet_out(NO_BUFFER, 3, &[OFPP_MAX + 5], &frame, 3))
        .unwrap();
    let out = s.take_out();
    assert_eq!(kinds(&out), vec![ERROR, ERROR]);
    assert_eq!(err_of(&out[0]), (err::BAD_REQUEST, err::BR_BAD_PACKET));
    assert_eq!(err_of(&out[1]), (err::BAD_ACTION, err::BA_BAD_OUT_PORT));
    let po = rx.next().expect("the packet-out");
    assert_eq!(po.in_port, 3);
    assert_eq!(po.frame, frame);
    assert_eq!(
        po.actions,
        vec![
            Action::Output(2),
            Action::Resubmit {
                port: None,
                table: Some(0)
            }
        ]
    );
    assert!(rx.next().is_none());
    // OFPP_TABLE is for packet-outs only.
    let r = Rule::parse(&format!("actions=output:{OFPP_TABLE}")).unwrap();
    s.message(&flow_mod_add(&r, 4)).unwrap();
    s.message(&barrier(5)).unwrap();
    let out = s.take_out();
    assert_eq!(kinds(&out), vec![ERROR, BARRIER_REPLY]);
    assert_eq!(err_of(&out[0]), (err::BAD_ACTION, err::BA_BAD_OUT_PORT));
    // A full queue: counted, no error (Open vSwitch has none for it).
    for i in 0..POUT_QUEUE + 3 {
        s.message(&packet_out(NO_BUFFER, 1, &[2], &frame, 10 + i as u32))
            .unwrap();
    }
    assert!(s.take_out().is_empty());
    assert_eq!(
        cs.stats
            .packet_outs_queue_full
            .load(std::sync::atomic::Ordering::Relaxed),
        3
    );
    // SET_CONFIG's miss_send_len reads back.
    let mut w = Writer::new(SET_CONFIG, 20);
    w.u16(0);
    w.u16(300);
    s.message(&w.finish()).unwrap();
    s.message(&Writer::new(GET_CONFIG_REQUEST, 21).finish())
        .unwrap();
    let r = &s.take_out()[0];
    assert_eq!(&r[10..12], &300u16.to_be_bytes());
}

/// Issue 37: `send_flow_rem` round-trips through FLOW_MOD and flow stats;
/// a delete reports the rule as FLOW_REMOVED (reason DELETE, its cookie,
/// priority, table and match) to the master before the barrier reply and
/// not to a slave; a flag linerate does not keep is refused, not ignored.
#[test]
fn send_flow_rem_reports_a_delete_as_flow_removed_to_the_master_only() {
    use super::controllers::{Controllers, ROLE_MASTER, ROLE_SLAVE};
    use crate::switch::table::RR_DELETE;
    let sh = shared();
    sh.ctl.read(|t| t.report_removed());
    let cs = Arc::new(Controllers::default());
    let mut m = switch_session(&sh, &cs, None);
    let mut s = switch_session(&sh, &cs, None);
    m.message(&role_request(ROLE_MASTER, 1, 1)).unwrap();
    s.message(&role_request(ROLE_SLAVE, 1, 2)).unwrap();
    m.take_out();
    s.take_out();
    let want = Rule::parse("send_flow_rem,cookie=0x5,priority=7,udp,actions=output:2").unwrap();
    let add = flow_mod_add(&want, 3);
    m.message(&add).unwrap();
    m.message(&barrier(4)).unwrap();
    assert_eq!(
        kinds(&m.take_out()),
        vec![BARRIER_REPLY],
        "{:?}",
        m.last_error
    );
    assert_eq!(sh.ctl.current().flows()[0].rule, want);
    // Flow stats say so (flags = OFPFF_SEND_FLOW_REM).
    m.message(&all_flows(5)).unwrap();
    let body: Vec<u8> = m.take_out().iter().flat_map(|r| r[16..].to_vec()).collect();
    let got = decode_flow_stats(&body).unwrap();
    assert_eq!(got[0].0, want);
    // check_overlap (2) is refused with BAD_FLAGS.
    let mut bad = add.clone();
    bad[44..46].copy_from_slice(&3u16.to_be_bytes());
    m.message(&bad).unwrap();
    m.message(&barrier(6)).unwrap();
    let out = m.take_out();
    assert_eq!(kinds(&out), vec![ERROR, BARRIER_REPLY]);
    assert_eq!(err_of(&out[0]), (err::FLOW_MOD_FAILED, err::FM_BAD_FLAGS));
    // The same message as a delete (command 3, any table).
    let mut del = add.clone();
    del[24] = OFPTT_ALL;
    del[25] = 3;
    m.message(&del).unwrap();
    m.message(&barrier(7)).unwrap();
    let out = m.take_out();
    assert_eq!(kinds(&out), vec![FLOW_REMOVED, BARRIER_REPLY]);
    let fr = &out[0];
    assert_eq!(&fr[8..16], &5u64.to_be_bytes(), "cookie");
    assert_eq!(&fr[16..18], &7u16.to_be_bytes(), "priority");
    assert_eq!((fr[18], fr[19]), (RR_DELETE, 0), "reason, table");
    // The match: OXM type, then eth_type 0x0800 and ip_proto 17.
    assert_eq!(&fr[48..50], &1u16.to_be_bytes());
    assert!(fr[52..].windows(2).any(|w| w == [0x08, 0x00]));
    s.pull_async();
    assert!(s.take_out().is_empty(), "a slave gets no FLOW_REMOVED");
    assert_eq!(
        cs.stats
            .flow_removed_sent
            .load(std::sync::atomic::Ordering::Relaxed),
        1
    );
}

/// Issue 37: an output's `max_len` reads back as written (os-ken writes
/// 65509 on every output), for ports, `flood`, `normal` and `in_port`,
/// through FLOW_MOD, the table and flow stats; a modify replaces them
/// with the new actions'.
#[test]
fn output_max_len_reads_back_as_written() {
    let mut want =
        Rule::parse("priority=3,udp,actions=output:2,flood,NORMAL,in_port,controller:77").unwrap();
    want.set_out_max_len(vec![65509, 7, 0, 1]);
    assert_eq!(want.out_max_len, [65509, 7, 0, 1]);
    assert_round_trip(&want, "max_len");
    let sh = shared();
    let mut s = session(&sh);
    s.message(&flow_mod_add(&want, 1)).unwrap();
    s.message(&all_flows(2)).unwrap();
    let out = s.take_out();
    let body: Vec<u8> = out.iter().flat_map(|r| r[16..].to_vec()).collect();
    // output:2 with max_len 0xffe5, as an ofp_action_output.
    let port2 = [0, 0, 0, 16, 0, 0, 0, 2, 0xff, 0xe5];
    assert!(body.windows(10).any(|w| w == port2), "{body:02x?}");
    assert_eq!(decode_flow_stats(&body).unwrap()[0].0, want);
    // A modify (command 1) brings its own.
    let mut other = want.clone();
    other.set_out_max_len(vec![1, 2, 3, 4]);
    let mut modify = flow_mod_add(&other, 3);
    modify[25] = 1;
    s.message(&modify).unwrap();
    s.message(&barrier(4)).unwrap();
    assert_eq!(
        kinds(&s.take_out()),
        vec![BARRIER_REPLY],
        "{:?}",
        s.last_error
    );
    assert_eq!(sh.ctl.current().flows()[0].rule.out_max_len, [1, 2, 3, 4]);
    // All zero: nothing kept (a rule from the text syntax is the same rule).
    let mut plain = Rule::parse("actions=output:2").unwrap();
    plain.set_out_max_len(vec![0]);
    assert!(plain.out_max_len.is_empty());
    // A count that does not pair with the outputs is not kept.
    plain.set_out_max_len(vec![5, 5]);
    assert!(plain.out_max_len.is_empty());
}

/// Issue 37: a packet-out's actions have their prerequisites checked
/// against its packet (as Open vSwitch does): `set_field` of an IPv4
/// source is taken for a UDP frame and refused for an ARP one.
#[test]
fn packet_out_prerequisites_are_the_packet_s() {
    use crate::switch::controller::pout_queue;
    use linerate_wire::build::{build_udp, FrameParams, IpPair};
    let sh = shared();
    let cs = Arc::new(super::controllers::Controllers::default());
    let (tx, rx) = pout_queue();
    let mut s = switch_session(&sh, &cs, Some(tx));
    let set_src = |frame: &[u8], xid: u32| {
        let mut w = Writer::new(PACKET_OUT, xid);
        w.u32(NO_BUFFER);
        w.u32(1);
        w.u16(32);
        w.zeros(6);
        // set_field ipv4_src=10.9.9.9, then output:2.
        w.u16(25);
        w.u16(16);
        w.u32(0x8000_1604);
        w.bytes(&[10, 9, 9, 9]);
        w.zeros(4);
        w.u16(0);
        w.u16(16);
        w.u32(2);
        w.u16(0);
        w.zeros(6);
        w.bytes(frame);
        w.finish()
    };
    let mut udp = [0u8; 128];
    let p = FrameParams::new(IpPair::V4 {
        src: [10, 0, 0, 1],
        dst: [10, 0, 0, 2],
    });
    let n = build_udp(&mut udp, &p, 1, 2).unwrap();
    s.message(&set_src(&udp[..n], 1)).unwrap();
    let mut arp = udp[..n].to_vec();
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    s.message(&set_src(&arp, 2)).unwrap();
    let out = s.take_out();
    assert_eq!(kinds(&out), vec![ERROR], "{:?}", s.last_error);
    assert_eq!(err_of(&out[0]), (err::BAD_ACTION, err::BA_BAD_ARGUMENT));
    let po = rx.next().expect("the UDP frame's packet-out");
    assert_eq!(po.actions.len(), 2);
    assert!(rx.next().is_none());
}
