//! Cross-checks of the classifier and cache against the linear reference,
//! parser round trips and errors, ranking.

use super::classifier::{Classifier, RuleId};
use super::emc::Emc;
use super::key::{self, Key};
use super::reference::Reference;
use super::rule::{Action, MatchSpec, Rule, SetField};
use proptest::prelude::*;

// ---------- parser ----------

#[test]
fn parses_the_issue_example() {
    let r = Rule::parse(
        "priority=100,in_port=1,udp,nw_dst=10.0.0.0/8,tp_dst=53,actions=set_field:02:00:00:00:00:09->eth_dst,output:2",
    )
    .unwrap();
    assert_eq!(r.priority, 100);
    assert_eq!(r.m.value.get(key::IN_PORT), 1);
    assert_eq!(r.m.value.get(key::DL_TYPE), 0x0800);
    assert_eq!(r.m.value.get(key::NW_PROTO), 17);
    assert_eq!(r.m.value.get(key::NW_DST), 0x0a00_0000);
    assert_eq!(r.m.mask.get(key::NW_DST), 0xff00_0000);
    assert_eq!(r.m.value.get(key::TP_DST), 53);
    assert_eq!(
        r.actions,
        vec![
            Action::Set(SetField::EthDst([2, 0, 0, 0, 0, 9])),
            Action::Output(2)
        ]
    );
    assert_eq!(
        r.to_string(),
        "priority=100,in_port=1,udp,nw_dst=10.0.0.0/8,tp_dst=53,actions=set_field:02:00:00:00:00:09->eth_dst,output:2"
    );
}

const GOOD: &[&str] = &[
    "actions=drop",
    "priority=0,actions=",
    "table=0,cookie=0x1234,idle_timeout=10,hard_timeout=60,priority=5,ip,actions=output:1",
    "in_port=3 dl_src=00:11:22:33:44:55/ff:ff:ff:00:00:00 dl_dst=01:00:00:00:00:00/01:00:00:00:00:00 actions=flood",
    "eth_type=0x88cc,actions=all",
    "dl_vlan=10,dl_vlan_pcp=3,actions=pop_vlan,output:4",
    "dl_vlan=0xffff,actions=push_vlan:0x8100,set_field:7->vlan_vid,output:1",
    "vlan_vid=0x1005/0x1fff,actions=strip_vlan,2",
    "ip,nw_src=192.168.0.0/255.255.0.255,nw_dst=10.1.2.3,nw_tos=32,ip_ecn=1,nw_ttl=64,actions=dec_ttl,output:1",
    "ip,ip_dscp=46,actions=mod_nw_tos:184,in_port",
    "ipv6,ipv6_src=2001:db8::/32,ipv6_dst=fe80::1,actions=set_field:2001:db8::9->ipv6_dst,output:2",
    "tcp,tp_src=1024/0xfc00,tp_dst=80,tcp_flags=+syn-ack,actions=group:1",
    "tcp6,tcp_dst=443,tcp_flags=0x002/0x012,actions=set_field:8443->tcp_dst,output:1",
    "udp,udp_src=53,actions=mod_tp_dst:5353,meter:1,output:3",
    "udp6,actions=set_field:9->udp_src,output:3",
    "icmp,icmp_type=8,icmp_code=0,actions=output:1",
    "icmp6,icmpv6_type=135,actions=output:1",
    "icmp6,icmp_type=135,nd_target=fe80::/64,nd_sll=02:00:00:00:00:01,actions=set_field:fe80::7->nd_target,output:1",
    "icmp6,icmp_type=136,icmp_code=0,nd_target=::1/::ff,nd_tll=02:00:00:00:00:00/ff:ff:ff:00:00:00,actions=set_field:02:00:00:00:00:07->nd_tll,output:1",
    "arp,nw_dst=10.0.0.1,nw_proto=1,actions=flood",
    "ip,actions=mod_nw_src:1.2.3.4,mod_nw_dst:5.6.7.8,mod_dl_src:00:00:00:00:00:01,mod_dl_dst:00:00:00:00:00:02,output:1",
    "tcp,actions=mod_tp_src:1,set_field:10.0.0.1->ip_src,set_field:3->ip_dscp,output:1",
    "dl_type=0x0800,nw_proto=17,tp_dst=53,actions=output:9",
    "sctp,tp_dst=9,actions=output:1",
    "priority=65535,in_port=4294967295,actions=output:4294967295",
];

#[test]
fn round_trips() {
    for s in GOOD {
        let r = Rule::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"));
        let t = r.to_string();
        let r2 = Rule::parse(&t).unwrap_or_else(|e| panic!("{s} printed as {t}: {e}"));
        assert_eq!(r, r2, "{s} printed as {t}");
        assert_eq!(t, r2.to_string());
    }
}

#[test]
fn errors_name_the_token() {
    let bad: &[(&str, &str)] = &[
        ("in_port=1", "no 'actions='"),
        (
            "tp_dst=53,actions=drop",
            "'tp_dst=53': needs tcp, udp or sctp",
        ),
        (
            "nw_dst=10.0.0.1,actions=drop",
            "'nw_dst=10.0.0.1': needs ip or arp",
        ),
        ("ipv6_src=::1,actions=drop", "needs ipv6"),
        ("ip,ipv6_src=::1,actions=drop", "needs ipv6"),
        ("udp,tcp_dst=1,actions=drop", "needs tcp"),
        ("tcp,tcp_flags=+syn,udp,actions=drop", "'udp': conflicts"),
        ("udp6,icmp_type=1,actions=drop", "needs icmp or icmp6"),
        ("icmp6,nd_target=::1,actions=drop", "icmp_type=135 or 136"),
        (
            "icmp6,icmp_type=135,icmp_code=1,nd_target=::1,actions=drop",
            "icmp_code 0",
        ),
        (
            "icmp6,icmp_type=135,nd_tll=02:00:00:00:00:01,actions=drop",
            "icmp_type=136",
        ),
        (
            "icmp6,icmp_type=136,actions=set_field:02:00:00:00:00:01->nd_sll",
            "icmp_type=135",
        ),
        ("ip,tcp_flags=+syn,actions=drop", "needs tcp"),
        ("nw_ttl=3,actions=drop", "needs ip or ipv6"),
        (
            "ip,nw_dst=10.0.0.0/33,actions=drop",
            "bad prefix length '33'",
        ),
        ("ip,nw_dst=10.0.0,actions=drop", "not an IPv4 address"),
        ("dl_src=00:11:22:33:44,actions=drop", "not a MAC address"),
        (
            "dl_src=00:11:22:33:44:55:66,actions=drop",
            "not a MAC address",
        ),
        ("in_port=x,actions=drop", "'x' is not a number"),
        ("in_port=1/1,actions=drop", "takes no mask"),
        (
            "priority=65536,actions=drop",
            "'priority=65536': 65536 is larger than 65535",
        ),
        ("foo=1,actions=drop", "unknown match field 'foo'"),
        ("actions=output:1,drop", "'drop' must be the only action"),
        ("actions=frobnicate", "unknown action 'frobnicate'"),
        ("actions=output:", "'output' needs an argument"),
        (
            "actions=set_field:1->tcp_dst",
            "'set_field:1->tcp_dst': set_field needs tcp",
        ),
        ("actions=set_field:1.2.3.4->ip_dst", "needs ip in the match"),
        ("actions=set_field:1->nope", "set_field cannot write 'nope'"),
        ("actions=set_field:1", "VALUE->FIELD"),
        ("actions=push_vlan:0x0800", "not 0x8100 or 0x88a8"),
        ("actions=mod_tp_dst:1", "needs tcp, udp or sctp"),
        ("actions=output:1,,output:2", "empty action"),
        ("ip,nw_tos=3,actions=drop", "ECN bits"),
        ("dl_vlan=5000,actions=drop", "larger than 4095"),
        ("tcp,tcp_flags=+foo,actions=drop", "unknown TCP flag 'foo'"),
        ("ip,actions=out\nput:1", "unknown action 'out\\nput'"),
        ("in_port=\n1,actions=drop", "not a number"),
        ("in_portactions=drop", "must be its own field"),
        ("ip=1,actions=drop", "'ip' takes no value"),
        ("in_port,actions=drop", "needs a value"),
    ];
    for (s, want) in bad {
        let e = Rule::parse(s).expect_err(s).to_string();
        assert!(e.contains(want), "{s:?}: error {e:?} lacks {want:?}");
        assert!(!e.contains('\n'), "{s:?}: multi-line error {e:?}");
    }
    assert!(MatchSpec::parse("ip,actions=drop").is_err());
}

#[test]
fn match_spec_and_covering() {
    let loose = MatchSpec::parse("ip,nw_dst=10.0.0.0/8").unwrap();
    assert_eq!(loose.priority, None);
    let r = Rule::parse("udp,nw_dst=10.1.0.0/16,actions=drop").unwrap();
    assert!(loose.m.covers(&r.m));
    assert!(!r.m.covers(&loose.m));
    let other = Rule::parse("ip,nw_dst=11.0.0.0/16,actions=drop").unwrap();
    assert!(!loose.m.covers(&other.m));
    let s = MatchSpec::parse("priority=7,in_port=1").unwrap();
    assert_eq!(s.priority, Some(7));
}

#[test]
fn fuzz_body_on_samples() {
    for s in GOOD {
        super::rule::fuzz(s.as_bytes());
        for cut in 0..s.len() {
            super::rule::fuzz(&s.as_bytes()[..cut]);
        }
    }
    super::rule::fuzz(b"\xff\xfe");
    super::rule::fuzz("actions=set_field:\u{1F600}->eth_dst".as_bytes());
}

// ---------- key extraction ----------

#[test]
fn extract_udp_frame_matches_rule() {
    use linerate_wire::build::{build_udp, FrameParams, IpPair};
    let mut buf = [0u8; 128];
    let mut p = FrameParams::new(IpPair::V4 {
        src: [192, 168, 1, 1],
        dst: [10, 2, 3, 4],
    });
    p.vlans = &[(3 << 13) | 42];
    p.tos = 0xb9;
    let n = build_udp(&mut buf, &p, 1234, 53).unwrap();
    let k = Key::extract(&buf[..n], 1);
    assert_eq!(k.get(key::VLAN_TCI), 0x1000 | (3 << 13) | 42);
    assert_eq!(k.get(key::NW_TOS), 0xb9);
    assert_eq!(k.get(key::NW_TTL), 64);
    assert_eq!(k.get(key::TP_SRC), 1234);
    for (s, hit) in [
        (
            "priority=100,in_port=1,udp,nw_dst=10.0.0.0/8,tp_dst=53,actions=output:2",
            true,
        ),
        ("in_port=2,actions=drop", false),
        (
            "dl_vlan=42,dl_vlan_pcp=3,ip,ip_dscp=46,ip_ecn=1,nw_ttl=64,actions=drop",
            true,
        ),
        ("dl_vlan=0xffff,actions=drop", false),
        ("udp,nw_src=192.168.1.0/24,udp_src=1234,actions=drop", true),
        ("tcp,actions=drop", false),
        (
            "dl_src=02:00:00:00:00:01,dl_dst=02:00:00:00:00:02,actions=drop",
            true,
        ),
    ] {
        assert_eq!(Rule::parse(s).unwrap().m.matches(&k), hit, "{s}");
    }
}

#[test]
fn extract_tcp_icmp_v6() {
    use linerate_wire::build::{build_icmp_echo, build_tcp, FrameParams, IpPair};
    use linerate_wire::tcp::TcpRepr;
    let mut buf = [0u8; 160];
    let src: [u8; 16] = "2001:db8::1"
        .parse::<std::net::Ipv6Addr>()
        .unwrap()
        .octets();
    let dst: [u8; 16] = "2001:db8::2"
        .parse::<std::net::Ipv6Addr>()
        .unwrap()
        .octets();
    let p = FrameParams::new(IpPair::V6 { src, dst });
    let t = TcpRepr {
        src_port: 5000,
        dst_port: 443,
        flags: 0x002,
        ..TcpRepr::default()
    };
    let n = build_tcp(&mut buf, &p, &t).unwrap();
    let k = Key::extract(&buf[..n], 7);
    for (s, hit) in [
        (
            "tcp6,ipv6_dst=2001:db8::/64,tcp_dst=443,tcp_flags=+syn-ack,actions=drop",
            true,
        ),
        ("tcp6,tcp_flags=+ack,actions=drop", false),
        ("ipv6,ipv6_src=2001:db8::2,actions=drop", false),
    ] {
        assert_eq!(Rule::parse(s).unwrap().m.matches(&k), hit, "{s}");
    }
    let p4 = FrameParams::new(IpPair::V4 {
        src: [1, 1, 1, 1],
        dst: [2, 2, 2, 2],
    });
    let n = build_icmp_echo(&mut buf, &p4, true, 1, 1).unwrap();
    let k = Key::extract(&buf[..n], 7);
    assert!(Rule::parse("icmp,icmp_type=8,icmp_code=0,actions=drop")
        .unwrap()
        .m
        .matches(&k));
    assert!(!Rule::parse("icmp,icmp_type=0,actions=drop")
        .unwrap()
        .m
        .matches(&k));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    /// The fast key path gives the general path's key whenever it takes a
    /// frame, and takes the usual ones: valid UDP and TCP frames with
    /// random bytes overwritten (lengths, version, fragment bits, protocol,
    /// TCP data offset, any header byte) and random truncation.
    #[test]
    fn extract_fast_agrees_with_general(
        tcp in any::<bool>(),
        payload in 0usize..64,
        edits in prop::collection::vec((0usize..80, any::<u8>()), 0..3),
        cut in 0usize..100,
        port in any::<u32>(),
    ) {
        use linerate_wire::build::{build_tcp, build_udp, FrameParams, IpPair};
        use linerate_wire::tcp::TcpRepr;
        let mut buf = [0u8; 256];
        let mut p = FrameParams::new(IpPair::V4 { src: [10, 1, 2, 3], dst: [192, 168, 7, 9] });
        let body = [0x5au8; 64];
        p.payload = &body[..payload];
        p.tos = 0x2e;
        let n = if tcp {
            let t = TcpRepr { src_port: 40000, dst_port: 80, flags: 0x018, ..TcpRepr::default() };
            build_tcp(&mut buf, &p, &t).unwrap()
        } else {
            build_udp(&mut buf, &p, 5353, 53).unwrap()
        };
        let fresh = Key::extract_fast(&buf[..n], port);
        prop_assert!(fresh.is_some(), "a valid frame takes the fast path");
        prop_assert_eq!(fresh.unwrap(), Key::extract_general(&buf[..n], port));
        for &(o, v) in &edits {
            if o < n {
                buf[o] = v;
            }
        }
        let len = n.min(cut.max(1));
        if let Some(k) = Key::extract_fast(&buf[..len], port) {
            prop_assert_eq!(k, Key::extract_general(&buf[..len], port));
        }
    }
}

// ---------- classifier ----------

fn parse(s: &str) -> Rule {
    Rule::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
}

#[test]
fn priority_and_ties() {
    let mut c = Classifier::new();
    let a = c.insert(&parse("ip,actions=drop").m, 10).0;
    let b = c.insert(&parse("udp,actions=drop").m, 10).0;
    let hi = c.insert(&parse("udp,tp_dst=53,actions=drop").m, 20).0;
    let mut k = Key::ZERO;
    k.set(key::DL_TYPE, 0x0800);
    k.set(key::NW_PROTO, 17);
    let mut out = [None; 1];
    c.lookup_batch(&[k], &mut out);
    assert_eq!(out[0], Some(a), "equal priority: earlier inserted wins");
    k.set(key::TP_DST, 53);
    c.lookup_batch(&[k], &mut out);
    assert_eq!(out[0], Some(hi));
    // Re-adding an identical rule keeps the original.
    assert_eq!(c.insert(&parse("ip,actions=drop").m, 10), (a, false));
    assert_eq!(c.remove_strict(&parse("ip,actions=drop").m, 10), Some(a));
    k.set(key::TP_DST, 54);
    c.lookup_batch(&[k], &mut out);
    assert_eq!(out[0], Some(b));
    assert_eq!(c.remove_loose(&MatchSpec::parse("ip").unwrap().m), {
        let mut v = vec![b, hi];
        v.sort();
        v
    });
    assert!(c.is_empty());
    assert_eq!(c.subtables(), 0);
}

#[test]
fn ranking_follows_hits_and_early_exit_skips() {
    let mut c = Classifier::new();
    // Three masks; the last inserted gets the traffic.
    c.insert(&parse("in_port=1,actions=drop").m, 5);
    c.insert(&parse("ip,actions=drop").m, 5);
    let hot = c.insert(&parse("udp,tp_dst=9,actions=drop").m, 5).0;
    let hot_mask = c.get(hot).unwrap().0.mask;
    assert_eq!(c.subtable_ranking()[2].0, hot_mask, "new subtables go last");
    let mut k = Key::ZERO;
    k.set(key::IN_PORT, 2);
    k.set(key::DL_TYPE, 0x86dd);
    k.set(key::NW_PROTO, 17);
    k.set(key::TP_DST, 9);
    // ipv6 + udp-looking key: only the tp_dst rule can... it needs ip (0x0800): nothing matches.
    let keys = [k; 10];
    let mut out = [None; 10];
    c.lookup_batch(&keys, &mut out);
    assert!(out.iter().all(|o| o.is_none()));
    k.set(key::DL_TYPE, 0x0800);
    let keys = [k; 10];
    c.lookup_batch(&keys, &mut out);
    // "ip" (earlier, same priority) wins over the udp rule.
    let ip = c.find_strict(&parse("ip,actions=drop").m, 5).unwrap();
    assert!(out.iter().all(|&o| o == Some(ip)));
    c.rerank();
    let r = c.subtable_ranking();
    assert_eq!(r[0].0, c.get(ip).unwrap().0.mask, "most hits first: {r:?}");
    assert_eq!(r[0].1, 5, "halved after rerank");
    // Early exit: a top-priority rule in the first subtable ends the search.
    let mut c = Classifier::new();
    let top = c.insert(&parse("ip,actions=drop").m, 100).0;
    for i in 0..20 {
        c.insert(
            &parse(&format!("udp,tp_dst={i},actions=drop")).m,
            1 + (i % 3) as u16,
        );
        c.insert(&parse(&format!("in_port={i},actions=drop")).m, 1);
        c.insert(&parse(&format!("tcp,tp_src={i},actions=drop")).m, 1);
    }
    let mut st = super::LookupStats::default();
    c.lookup_batch_stats(&keys, &mut out, &mut st);
    assert!(out.iter().all(|&o| o == Some(top)));
    assert_eq!(st.subtables_searched, 10, "one probe per packet: {st:?}");
}

// ---------- property tests against the reference ----------

const MACS: &[&str] = &[
    "02:00:00:00:00:01",
    "02:00:00:00:00:02",
    "ff:ff:ff:ff:ff:ff",
];
const NETS: &[&str] = &["10.0.0.0", "10.1.0.0", "10.1.2.3", "192.168.1.7"];
const V6: &[&str] = &["2001:db8::1", "2001:db8:1::5", "fe80::1"];

/// One random match text built from small pools so rules overlap.
fn match_text() -> impl Strategy<Value = String> {
    (
        prop::option::of(1u32..4),
        0usize..5, // 0 none, 1 ip, 2 ipv6, 3 arp, 4 tcp/udp via proto
        prop::option::of((0usize..3, any::<bool>())),
        prop::option::of((
            0usize..4,
            prop::sample::select(vec![8u32, 16, 24, 32]),
            any::<bool>(),
        )),
        prop::option::of((
            prop::sample::select(vec![53u16, 80, 443, 0x1234]),
            any::<bool>(),
        )),
        prop::option::of(0usize..3),
        prop::option::of(prop::sample::select(vec![0u16, 10, 11])),
        any::<bool>(),
        prop::option::of((0usize..3, prop::sample::select(vec![32u32, 64, 128]))),
    )
        .prop_map(|(port, l3, mac, net, tp, tos, vlan, udp, v6)| {
            let mut p: Vec<String> = Vec::new();
            if let Some(x) = port {
                p.push(format!("in_port={x}"));
            }
            if let Some((i, full)) = mac {
                if full {
                    p.push(format!("dl_dst={}", MACS[i]));
                } else {
                    p.push(format!("dl_dst={}/01:00:00:00:00:00", MACS[i]));
                }
            }
            if let Some(v) = vlan {
                if v == 0 {
                    p.push("dl_vlan=0xffff".into());
                } else {
                    p.push(format!("dl_vlan={v}"));
                }
            }
            match l3 {
                1 => p.push("ip".into()),
                2 => p.push(if udp { "udp6" } else { "ipv6" }.into()),
                3 => p.push("arp".into()),
                4 => p.push(if udp { "udp" } else { "tcp" }.into()),
                _ => {}
            }
            if matches!(l3, 1 | 3 | 4) {
                if let Some((i, pre, src)) = net {
                    p.push(format!(
                        "{}={}/{pre}",
                        if src { "nw_src" } else { "nw_dst" },
                        NETS[i]
                    ));
                }
            }
            if l3 == 2 {
                if let Some((i, pre)) = v6 {
                    p.push(format!("ipv6_dst={}/{pre}", V6[i]));
                }
            }
            if matches!(l3, 1 | 2 | 4) {
                if let Some(t) = tos {
                    p.push(format!("ip_dscp={}", [0, 10, 46][t]));
                }
            }
            if l3 == 4 || (l3 == 2 && udp) {
                if let Some((port, full)) = tp {
                    if full {
                        p.push(format!("tp_dst={port}"));
                    } else {
                        p.push(format!("tp_dst={port}/0xff00"));
                    }
                }
            }
            p.join(",")
        })
}

/// A random key from the same pools (so it matches some rules), then
/// mixed with a rule's value.
fn key_base() -> impl Strategy<Value = Key> {
    (
        1u64..4,
        prop::sample::select(vec![0x0800u64, 0x86dd, 0x0806, 0x88cc]),
        0usize..3,
        prop::sample::select(vec![
            0u64,
            0x1000 | 10,
            0x1000 | 11,
            0x1000 | (3 << 13) | 10,
        ]),
        prop::sample::select(vec![6u64, 17, 1]),
        (0usize..4, 0usize..4, any::<u8>()),
        prop::sample::select(vec![53u64, 80, 443, 0x1234, 0x12ff, 7]),
        prop::sample::select(vec![0u64, 40, 184, 185]),
        0usize..3,
    )
        .prop_map(|(port, et, mac, tci, proto, (s, d, lo), tp, tos, v6)| {
            let mut k = Key::ZERO;
            k.set(key::IN_PORT, port);
            k.set(key::DL_TYPE, et);
            let m: std::net::Ipv4Addr = "0.0.0.0".parse().unwrap();
            let _ = m;
            let mac_v = u64::from_str_radix(&MACS[mac].replace(':', ""), 16).unwrap();
            k.set(key::DL_DST, mac_v);
            k.set(key::VLAN_TCI, tci);
            k.set(key::NW_PROTO, proto);
            k.set(key::NW_TOS, tos);
            k.set(key::TP_DST, tp);
            if et == 0x86dd {
                let a: std::net::Ipv6Addr = V6[v6].parse().unwrap();
                k.set128(key::IPV6_DST_WORD, u128::from(a));
            } else {
                let ns =
                    |i: usize| u32::from(NETS[i].parse::<std::net::Ipv4Addr>().unwrap()) as u64;
                k.set(key::NW_SRC, ns(s) ^ (lo as u64 & 0x3));
                k.set(key::NW_DST, ns(d));
            }
            k
        })
}

#[derive(Debug, Clone)]
enum Op {
    Add(String, u16),
    DelStrict(usize),
    DelLoose(String),
    Lookup(Vec<(usize, Key)>),
    Rerank,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (match_text(), prop::sample::select(vec![0u16, 1, 5, 5, 100, 32768])).prop_map(|(m, p)| Op::Add(m, p)),
        2 => any::<usize>().prop_map(Op::DelStrict),
        1 => match_text().prop_map(Op::DelLoose),
        6 => prop::collection::vec((any::<usize>(), key_base()), 1..80).prop_map(Op::Lookup),
        1 => Just(Op::Rerank),
    ]
}

struct Harness {
    cls: Classifier,
    reference: Reference,
    emc: Emc,
    rules: Vec<(super::Match, u16)>,
    lookups: u64,
    matched: u64,
    distinct: std::collections::HashSet<RuleId>,
}

impl Harness {
    fn new(emc_slots: usize, inv_prob: u32) -> Harness {
        Harness {
            cls: Classifier::new(),
            reference: Reference::new(),
            emc: Emc::new(emc_slots, inv_prob),
            rules: Vec::new(),
            lookups: 0,
            matched: 0,
            distinct: Default::default(),
        }
    }

    fn apply(&mut self, op: &Op) {
        match op {
            Op::Add(m, p) => {
                let r = parse(&format!("{m},actions=drop"));
                let (id, new) = self.cls.insert(&r.m, *p);
                let rr = self.reference.insert(id, &r.m, *p);
                assert_eq!(rr.is_ok(), new, "insert {m} prio {p}");
                if let Err(old) = rr {
                    assert_eq!(old, id);
                }
                self.rules.push((r.m, *p));
            }
            Op::DelStrict(i) => {
                if self.rules.is_empty() {
                    return;
                }
                let (m, p) = self.rules[i % self.rules.len()];
                assert_eq!(
                    self.cls.remove_strict(&m, p),
                    self.reference.remove_strict(&m, p)
                );
            }
            Op::DelLoose(m) => {
                let s = MatchSpec::parse(m).unwrap();
                assert_eq!(
                    self.cls.remove_loose(&s.m),
                    self.reference.remove_loose(&s.m),
                    "del-flows {m}"
                );
            }
            Op::Rerank => self.cls.rerank(),
            Op::Lookup(ks) => {
                let keys: Vec<Key> = ks
                    .iter()
                    .map(|(i, base)| {
                        if self.rules.is_empty() {
                            return *base;
                        }
                        // Half the keys are forced to match a chosen rule.
                        let (m, _) = &self.rules[i % self.rules.len()];
                        if i % 2 == 0 {
                            let mut k = Key::ZERO;
                            for w in 0..key::WORDS {
                                k.w[w] = m.value.w[w] | (base.w[w] & !m.mask.w[w]);
                            }
                            k
                        } else {
                            *base
                        }
                    })
                    .collect();
                let want: Vec<Option<RuleId>> =
                    keys.iter().map(|k| self.reference.lookup(k)).collect();
                let mut got = vec![Some(u32::MAX); keys.len()];
                self.cls.lookup_batch(&keys, &mut got);
                assert_eq!(got, want, "classifier vs reference");
                // Twice through the cache: the second pass hits it.
                for _ in 0..2 {
                    let mut got = vec![Some(u32::MAX); keys.len()];
                    self.emc.lookup_batch(&self.cls, &keys, &mut got);
                    assert_eq!(got, want, "emc+classifier vs reference");
                }
                self.lookups += keys.len() as u64;
                self.matched += want.iter().filter(|w| w.is_some()).count() as u64;
                self.distinct.extend(want.iter().flatten().copied());
            }
        }
        assert_eq!(self.cls.len(), self.reference.len());
        // Every rule reads back (its entry and subtable are tracked when
        // entries and subtables move).
        for (id, m, p) in self.reference.rules() {
            assert_eq!(self.cls.get(id), Some((*m, p)), "rule {id}");
        }
    }
}

static TOTAL: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
static MATCHED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
static DISTINCT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The random workload is not trivial: many lookups match, and many
/// different rules win (checked after the property test, in the same test
/// so the counters are filled).
#[test]
fn workload_is_meaningful() {
    classifier_and_cache_agree_with_reference();
    let (t, m, d) = (
        TOTAL.load(std::sync::atomic::Ordering::Relaxed),
        MATCHED.load(std::sync::atomic::Ordering::Relaxed),
        DISTINCT.load(std::sync::atomic::Ordering::Relaxed),
    );
    eprintln!("lookups {t}, matched {m}, distinct winners summed over cases {d}");
    assert!(m * 4 > t, "too few matches: {m} of {t}");
    assert!(d > 200, "too few distinct winners: {d}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn classifier_and_cache_agree_with_reference(ops in prop::collection::vec(op(), 1..120)) {
        let mut h = Harness::new(64, 1);
        let mut small = Harness::new(4, 100);
        for o in &ops {
            h.apply(o);
            small.apply(o);
        }
        TOTAL.fetch_add(h.lookups, std::sync::atomic::Ordering::Relaxed);
        MATCHED.fetch_add(h.matched, std::sync::atomic::Ordering::Relaxed);
        DISTINCT.fetch_add(h.distinct.len() as u64, std::sync::atomic::Ordering::Relaxed);
    }

    #[test]
    fn parse_print_parse(m in match_text(), p in any::<u16>(), acts in prop::sample::subsequence(vec![
        "output:1", "flood", "group:3", "meter:2", "dec_ttl", "push_vlan:0x8100", "pop_vlan",
        "set_field:00:00:00:00:00:05->eth_src", "set_field:5->vlan_vid", "in_port", "all",
    ], 0..5)) {
        let s = format!("priority={p},{m},actions={}", acts.join(","));
        let r = Rule::parse(&s).unwrap();
        let t = r.to_string();
        prop_assert_eq!(&Rule::parse(&t).unwrap(), &r, "{} printed as {}", s, t);
    }

    #[test]
    fn parser_never_panics(s in "[a-z_0-9=,:./>+-]{0,60}") {
        super::rule::fuzz(s.as_bytes());
    }
}

#[test]
fn emc_is_invalidated_by_rule_changes() {
    let mut c = Classifier::new();
    let mut e = Emc::new(16, 1);
    let low = c.insert(&parse("ip,actions=drop").m, 1).0;
    let mut k = Key::ZERO;
    k.set(key::DL_TYPE, 0x0800);
    let mut out = [None];
    e.lookup_batch(&c, &[k], &mut out);
    e.lookup_batch(&c, &[k], &mut out);
    assert_eq!(out[0], Some(low));
    assert_eq!(e.stats.hits, 1);
    let high = c.insert(&parse("ip,actions=output:1").m, 2).0;
    e.lookup_batch(&c, &[k], &mut out);
    assert_eq!(out[0], Some(high), "new rule visible at once");
    c.remove(high);
    e.lookup_batch(&c, &[k], &mut out);
    assert_eq!(out[0], Some(low));
}

#[test]
fn emc_does_not_thrash_under_many_flows() {
    let mut c = Classifier::new();
    c.insert(&Rule::parse("actions=drop").unwrap().m, 0);
    let mut e = Emc::new(256, 100);
    // The insertion policy alone (the bypass would stop probing here).
    e.set_auto_bypass(false);
    // A hot flow and a flood of one-off flows.
    let mut hot = Key::ZERO;
    hot.set(key::TP_DST, 1);
    let mut out = [None; 64];
    let mut keys = [Key::ZERO; 64];
    for round in 0..200u64 {
        keys[0] = hot;
        for (i, k) in keys.iter_mut().enumerate().skip(1) {
            k.set(key::TP_SRC, (round * 64 + i as u64) & 0xffff);
            k.set(key::NW_DST, round);
        }
        e.lookup_batch(&c, &keys, &mut out);
    }
    // Inserts when busy are rare, so the hot flow stays cached most rounds.
    assert!(
        e.stats.skipped_inserts > e.stats.inserts * 10,
        "{:?}",
        e.stats
    );
    assert!(
        e.stats.hits >= 150,
        "hot flow evicted too often: {:?}",
        e.stats
    );
}

/// Under a flood of one-off flows the cache bypasses itself (lookups still
/// give the classifier's decisions), and comes back once the traffic is a
/// few hot flows again.
#[test]
fn emc_bypasses_itself_at_a_low_hit_rate_and_comes_back() {
    use super::emc::{SAMPLE_EVERY, WINDOW};
    let mut c = Classifier::new();
    let drop = c.insert(&Rule::parse("actions=drop").unwrap().m, 0).0;
    let udp = c
        .insert(&Rule::parse("udp,tp_dst=7,actions=output:1").unwrap().m, 5)
        .0;
    let mut e = Emc::new(256, 100);
    let mut out = [None; 64];
    let mut keys = [Key::ZERO; 64];
    let mut round = 0u64;
    let one_off = |keys: &mut [Key; 64], round: &mut u64| {
        for (i, k) in keys.iter_mut().enumerate() {
            *k = Key::ZERO;
            k.set(key::DL_TYPE, 0x0800);
            k.set(key::NW_PROTO, 17);
            k.set(key::TP_DST, 7 * (i as u64 & 1));
            k.set(key::NW_SRC, *round * 64 + i as u64);
        }
        *round += 1;
    };
    // One window of misses switches the bypass on.
    for _ in 0..(WINDOW as usize / 64 + 1) {
        one_off(&mut keys, &mut round);
        e.lookup_batch(&c, &keys, &mut out);
    }
    assert!(e.bypassed(), "{:?}", e.stats);
    // Bypassed lookups are still right, and only samples are probed.
    let before = e.stats;
    for _ in 0..(SAMPLE_EVERY as usize * 4) {
        one_off(&mut keys, &mut round);
        e.lookup_batch(&c, &keys, &mut out);
        for (i, o) in out.iter().enumerate() {
            assert_eq!(*o, Some(if i & 1 == 1 { udp } else { drop }));
        }
    }
    let probed = (e.stats.hits + e.stats.misses) - (before.hits + before.misses);
    assert_eq!(probed, 4 * 64, "one chunk in {SAMPLE_EVERY} probed");
    assert_eq!(
        e.stats.bypassed - before.bypassed,
        (SAMPLE_EVERY as u64 - 1) * 4 * 64
    );
    // Four hot flows: the samples see hits, and the bypass ends.
    let mut hot = [Key::ZERO; 64];
    for (i, k) in hot.iter_mut().enumerate() {
        k.set(key::DL_TYPE, 0x0800);
        k.set(key::NW_SRC, i as u64 % 4);
    }
    let mut chunks = 0;
    while e.bypassed() {
        e.lookup_batch(&c, &hot, &mut out);
        chunks += 1;
        assert!(
            chunks < 4 * SAMPLE_EVERY as usize * (WINDOW as usize / 64),
            "bypass never ended"
        );
    }
    let hits = e.stats.hits;
    e.lookup_batch(&c, &hot, &mut out);
    assert_eq!(e.stats.hits - hits, 64, "every hot lookup a hit again");
    assert!(out.iter().all(|o| *o == Some(drop)));
    // Turned off, the cache never bypasses.
    let mut e = Emc::new(256, 100);
    e.set_auto_bypass(false);
    for _ in 0..(2 * WINDOW as usize / 64) {
        one_off(&mut keys, &mut round);
        e.lookup_batch(&c, &keys, &mut out);
    }
    assert!(!e.bypassed());
    assert_eq!(e.stats.bypassed, 0);
}

/// An IPv4 SCTP frame from port `sp` to `dp` (a UDP frame rewritten: the
/// protocol 132 and the header checksum), `chunk` bytes after the 12-byte
/// common header.
fn sctp_frame(sp: u16, dp: u16, keep: usize) -> Vec<u8> {
    use linerate_wire::build::{build_udp, FrameParams, IpPair};
    let mut buf = [0u8; 128];
    let p = FrameParams::new(IpPair::V4 {
        src: [10, 0, 0, 1],
        dst: [10, 0, 0, 2],
    });
    let n = build_udp(&mut buf, &p, 0, 0).unwrap();
    let mut f = buf[..n].to_vec();
    f[23] = 132;
    f[34..36].copy_from_slice(&sp.to_be_bytes());
    f[36..38].copy_from_slice(&dp.to_be_bytes());
    // The IP packet ends `keep` bytes into the SCTP header and its chunks.
    let total = (20 + keep) as u16;
    f.resize(14 + 20 + keep, 0);
    f[16..18].copy_from_slice(&total.to_be_bytes());
    f[24..26].copy_from_slice(&[0, 0]);
    let c = linerate_wire::checksum::checksum(&f[14..34]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
    f
}

#[test]
fn sctp_ports_are_in_the_key_and_rules_on_them_match() {
    // Was a dead rule: the key held transport ports for TCP and UDP only.
    let f = sctp_frame(5000, 9, 28);
    let k = Key::extract(&f, 1);
    assert_eq!(
        (k.get(key::NW_PROTO), k.get(key::TP_SRC), k.get(key::TP_DST)),
        (132, 5000, 9)
    );
    for (s, hit) in [
        ("sctp,tp_src=5000,actions=output:2", true),
        ("sctp,tp_dst=9,actions=output:2", true),
        ("sctp,tp_src=5001,actions=output:2", false),
        ("udp,tp_src=5000,actions=output:2", false),
    ] {
        assert_eq!(Rule::parse(s).unwrap().m.matches(&k), hit, "{s}");
    }
    // A segment too short for the common header: no ports, as in Open vSwitch.
    let short = Key::extract(&sctp_frame(5000, 9, 8), 1);
    assert_eq!((short.get(key::NW_PROTO), short.get(key::TP_SRC)), (132, 0));
}

/// `rule`'s set_field actions applied to `f` (it must print back to itself).
fn apply_set_fields(rule: &str, f: &[u8]) -> Vec<u8> {
    let r = Rule::parse(rule).unwrap();
    assert_eq!(Rule::parse(&r.to_string()).unwrap(), r, "prints back: {r}");
    let mut store = f.to_vec();
    let n = store.len();
    let mut buf = super::actions::FrameBuf::new(&mut store, 0, n).unwrap();
    let mut layers = None;
    for a in &r.actions {
        if let Action::Set(s) = a {
            super::actions::set_field(&mut buf, &mut layers, s);
        }
    }
    buf.bytes().to_vec()
}

#[test]
fn set_field_writes_arp_addresses_on_arp_rules_only() {
    let e = Rule::parse("ip,actions=set_field:10.9.9.9->arp_spa").unwrap_err();
    assert!(e.to_string().contains("needs arp"), "{e}");
    assert!(Rule::parse("ip,arp_spa=10.0.0.1,actions=drop").is_err());
    // An ARP request from 10.0.0.1 (02:..:01) for 10.0.0.2.
    let mut f = vec![0xff; 6];
    f.extend([2, 0, 0, 0, 0, 1, 0x08, 0x06]);
    f.extend([0, 1, 0x08, 0, 6, 4, 0, 1, 2, 0, 0, 0, 0, 1, 10, 0, 0, 1]);
    f.extend([0, 0, 0, 0, 0, 0, 10, 0, 0, 2]);
    let k = Key::extract(&f, 1);
    assert!(
        Rule::parse("arp,arp_op=1,arp_spa=10.0.0.1,arp_tpa=10.0.0.2,actions=drop")
            .unwrap()
            .m
            .matches(&k)
    );
    let out = apply_set_fields(
        "arp,actions=set_field:10.9.9.9->arp_spa,set_field:10.0.0.7->arp_tpa,output:2",
        &f,
    );
    assert_eq!(&out[28..32], &[10, 9, 9, 9], "sender address");
    assert_eq!(&out[38..42], &[10, 0, 0, 7], "target address");
    assert_eq!(&out[..28], &f[..28], "nothing else moved");
    assert_eq!(&out[32..38], &f[32..38]);
}

#[test]
fn set_field_ecn_pcp_and_ttl_rewrite_the_headers_and_keep_checksums_valid() {
    use linerate_wire::build::{build_udp, FrameParams, IpPair};
    let mut buf = [0u8; 128];
    let mut p = FrameParams::new(IpPair::V4 {
        src: [10, 0, 0, 1],
        dst: [10, 0, 0, 2],
    });
    p.tos = 0xb8; // DSCP 46, ECN 0
    p.vlans = &[(1 << 13) | 5];
    let n = build_udp(&mut buf, &p, 1, 2).unwrap();
    let f = &buf[..n];
    let out = apply_set_fields(
        "dl_vlan=5,ip,actions=set_field:2->nw_ecn,mod_nw_ttl:9,set_field:6->vlan_pcp",
        f,
    );
    let k = Key::extract(&out, 1);
    assert_eq!(k.get(key::NW_TOS), 0xb8 | 2, "ECN set, DSCP kept");
    assert_eq!(k.get(key::NW_TTL), 9);
    assert_eq!(
        k.get(key::VLAN_TCI),
        0x1000 | (6 << 13) | 5,
        "PCP set, VID kept"
    );
    assert_eq!(
        linerate_wire::checksum::checksum(&out[18..38]),
        0,
        "IPv4 header checksum still valid"
    );
    // IPv6: ECN in the traffic class, the hop limit.
    let p6 = FrameParams::new(IpPair::V6 {
        src: [0xfe; 16],
        dst: [0xfd; 16],
    });
    let n6 = build_udp(&mut buf, &p6, 1, 2).unwrap();
    let out6 = apply_set_fields("ipv6,actions=set_field:3->nw_ecn,mod_nw_ttl:7", &buf[..n6]);
    let k6 = Key::extract(&out6, 1);
    assert_eq!((k6.get(key::NW_TOS) & 3, k6.get(key::NW_TTL)), (3, 7));
    // Prerequisites as Open vSwitch has them.
    for bad in [
        "actions=set_field:3->vlan_pcp",
        "actions=set_field:1->nw_ecn",
        "arp,actions=mod_nw_ttl:9",
    ] {
        assert!(Rule::parse(bad).is_err(), "{bad}");
    }
}
