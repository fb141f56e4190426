//! Single rules on Open vSwitch and on `linerate switch`, frame for frame
//! (issue 37's oracle for actions and matches): every case is one rule and
//! one frame; the frame goes into port 1 of each switch and whatever comes
//! out of port 2 must be the same bytes on both. Each case's rule also
//! matches its own source MAC, so that all the rules sit in one table and
//! a frame can only hit its own. A case also says how many frames must come
//! out, so that two switches that both drop everything fail the test.
//!
//! The bed: a switch namespace with two ports (veths) to hosts h1 and h2,
//! raw packet sockets in the hosts (opened before anything is sent). No
//! fixed sleeps: after each case's frame comes a marker (its own EtherType,
//! a rule of higher priority sends it to port 2) on the same ingress port;
//! once the marker is out, the case's frame has been handled, and frames
//! that arrive within 100 ms after it still count (Open vSwitch may send a
//! flow's first packet by its slow path, after a later one).
//!
//! Groups ([`GROUPS`]) are loaded into both before the rules: the cases
//! whose buckets are chosen the same way on both (indirect, all, fast
//! failover, select with one live bucket) are compared frame for frame;
//! which bucket of a select group a flow gets depends on each switch's
//! hash, so the last test checks the properties instead (a flow stays on
//! its bucket, every bucket gets flows) on both.
//!
//! Open vSwitch runs with the userspace datapath (private ovsdb-server and
//! ovs-vswitchd, ports as system netdevs, rules by `ovs-ofctl add-flows`,
//! groups by `add-groups`, OpenFlow 1.3); linerate with afpacket ports,
//! `--flows` and `--groups`. Needs root and the Open
//! vSwitch tools (fails without them); removes what it made on drop.

mod support;
use support::*;

use std::time::{Duration, Instant};

/// The markers' EtherType (IEEE's local experimental one).
const MARKER_TYPE: [u8; 2] = [0x88, 0xb5];
const MARKER_SRC: [u8; 6] = [2, 0, 0, 0, 0xff, 0xff];
const LIMIT: Duration = Duration::from_secs(10);
const GRACE: Duration = Duration::from_millis(100);

/// One rule (without its source MAC and priority) and one frame (its
/// source MAC is set per case); `out`: frames that must leave port 2.
struct Case {
    name: &'static str,
    rule: &'static str,
    frame: Vec<u8>,
    out: usize,
}

fn src_mac(i: usize) -> [u8; 6] {
    [2, 0, 0, 0, 1, i as u8]
}

fn eth(ethertype: u16) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0];
    f.extend(ethertype.to_be_bytes());
    f
}

/// An IPv4 header (checksum set) for `proto` with `payload` bytes after it.
fn ipv4(proto: u8, payload: usize, ttl: u8, tos: u8) -> Vec<u8> {
    let total = (20 + payload) as u16;
    let mut h = vec![0x45, tos];
    h.extend(total.to_be_bytes());
    h.extend([0, 1, 0, 0, ttl, proto, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
    let c = linerate_wire::checksum::checksum(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    h
}

/// Ethernet + IPv4 + UDP (checksum 0) with 18 bytes of payload.
fn udp4(tos: u8) -> Vec<u8> {
    let mut f = eth(0x0800);
    f.extend(ipv4(17, 26, 64, tos));
    f.extend([0x30, 0x39, 0, 9, 0, 26, 0, 0]);
    f.extend([0xab; 18]);
    f
}

/// Ethernet + IPv6 + UDP (checksum computed) with 18 bytes of payload.
fn udp6() -> Vec<u8> {
    let (src, dst) = ([0xfd; 16], [0xfe; 16]);
    let mut f = eth(0x86dd);
    f.extend([0x60, 0, 0, 0, 0, 26, 17, 64]);
    f.extend(src);
    f.extend(dst);
    let mut u = vec![0x30, 0x39, 0, 9, 0, 26, 0, 0];
    u.extend([0xab; 18]);
    let c = linerate_wire::checksum::l4_checksum_v6(&src, &dst, 17, &u);
    u[6..8].copy_from_slice(&c.to_be_bytes());
    f.extend(u);
    f
}

/// [`udp6`] with this flow label (its checksum does not cover the label).
fn udp6_label(label: u32) -> Vec<u8> {
    let mut f = udp6();
    f[15] = (f[15] & 0xf0) | (label >> 16) as u8 & 0x0f;
    f[16..18].copy_from_slice(&(label as u16).to_be_bytes());
    f
}

/// Ethernet + IPv4 + SCTP common header (checksum left 0: neither switch
/// looks at it) and one 16-byte DATA chunk.
fn sctp(sp: u16, dp: u16) -> Vec<u8> {
    let mut f = eth(0x0800);
    f.extend(ipv4(132, 28, 64, 0));
    f.extend(sp.to_be_bytes());
    f.extend(dp.to_be_bytes());
    f.extend([0, 0, 0, 1, 0, 0, 0, 0]);
    f.extend([0, 3, 0, 16, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0]);
    f
}

/// Ethernet + IPv4 + an ICMP echo request (checksum set), 18 bytes of data.
fn icmp4() -> Vec<u8> {
    let mut f = eth(0x0800);
    f.extend(ipv4(1, 26, 64, 0));
    let mut m = vec![8, 0, 0, 0, 0x12, 0x34, 0, 1];
    m.extend([0xab; 18]);
    let c = linerate_wire::checksum::checksum(&m);
    m[2..4].copy_from_slice(&c.to_be_bytes());
    f.extend(m);
    f
}

/// Ethernet + IPv6 + an ICMPv6 echo request (checksum set).
fn icmp6() -> Vec<u8> {
    let (src, dst) = ([0xfd; 16], [0xfe; 16]);
    let mut f = eth(0x86dd);
    f.extend([0x60, 0, 0, 0, 0, 26, 58, 64]);
    f.extend(src);
    f.extend(dst);
    let mut m = vec![128, 0, 0, 0, 0x12, 0x34, 0, 1];
    m.extend([0xab; 18]);
    let c = linerate_wire::checksum::l4_checksum_v6(&src, &dst, 58, &m);
    m[2..4].copy_from_slice(&c.to_be_bytes());
    f.extend(m);
    f
}

/// Ethernet + IPv6 + a neighbour solicitation (`advert`: advertisement)
/// for fe80::`last` with these options (`(kind, MAC)`: 1 source, 2 target
/// link-layer address), checksum set.
fn nd(advert: bool, last: u8, opts: &[(u8, u8)]) -> Vec<u8> {
    let (src, dst) = ([0xfd; 16], [0xfe; 16]);
    let mut m = vec![if advert { 136 } else { 135 }, 0, 0, 0, 0, 0, 0, 0];
    m.extend([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, last]);
    for &(kind, mac) in opts {
        m.extend([kind, 1, 2, 0, 0, 0, 0, mac]);
    }
    let mut f = eth(0x86dd);
    f.extend([0x60, 0, 0, 0, 0, m.len() as u8, 58, 255]);
    f.extend(src);
    f.extend(dst);
    let c = linerate_wire::checksum::l4_checksum_v6(&src, &dst, 58, &m);
    m[2..4].copy_from_slice(&c.to_be_bytes());
    f.extend(m);
    f
}

/// An MPLS frame (EtherType 0x8847): one label stack entry (label 100,
/// TC 3, bottom of stack, TTL 20) over the IPv4 UDP frame's IP packet.
fn mpls() -> Vec<u8> {
    let mut f = eth(0x8847);
    f.extend(((100u32 << 12) | (3 << 9) | 0x100 | 20).to_be_bytes());
    f.extend(&udp4(0)[14..]);
    f
}

/// An ARP request from 10.0.0.1 for 10.0.0.2, broadcast.
fn arp_request() -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend([0; 6]);
    f.extend([0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, 1]);
    f.extend([2, 0, 0, 0, 0, 1, 10, 0, 0, 1]);
    f.extend([0, 0, 0, 0, 0, 0, 10, 0, 0, 2]);
    f.resize(60, 0);
    f
}

/// `frame` with an 802.1Q tag (PCP 1, VID `vid`) after the MACs.
fn tagged(mut frame: Vec<u8>, vid: u16) -> Vec<u8> {
    let tci = (1u16 << 13) | vid;
    let mut tag = vec![0x81, 0x00];
    tag.extend(tci.to_be_bytes());
    frame.splice(12..12, tag);
    frame
}

/// The groups the cases name. Port 99 does not exist: a bucket watching
/// it is dead.
const GROUPS: &str = "\
group_id=11,type=indirect,bucket=actions=set_field:10.9.9.9->ip_dst,dec_ttl,output:2
group_id=12,type=all,bucket=actions=set_field:7->udp_dst,output:2,bucket=actions=set_field:02:00:00:00:00:77->eth_dst,output:2,bucket=actions=output:2
group_id=13,type=ff,bucket=watch_port:99,actions=set_field:1->udp_dst,output:2,bucket=watch_port:2,actions=set_field:2->udp_dst,output:2
group_id=14,type=select,bucket=watch_port:99,actions=set_field:1->udp_dst,output:2,bucket=watch_port:2,actions=set_field:2->udp_dst,output:2
group_id=15,type=select,bucket=weight:0,actions=set_field:1->udp_dst,output:2,bucket=weight:5,actions=set_field:2->udp_dst,output:2
group_id=16,type=ff,bucket=watch_group:13,actions=group:11
group_id=17,type=all,bucket=actions=push_vlan:0x8100,set_field:3->vlan_pcp,output:2,bucket=actions=dec_ttl,output:2
group_id=18,type=select,bucket=weight:1,actions=set_field:02:00:00:00:00:a1->eth_dst,output:2,bucket=weight:1,actions=set_field:02:00:00:00:00:a2->eth_dst,output:2,bucket=weight:2,actions=set_field:02:00:00:00:00:a3->eth_dst,output:2
";

fn cases() -> Vec<Case> {
    let c = |name, rule, frame, out| Case {
        name,
        rule,
        frame,
        out,
    };
    vec![
        c(
            "sctp source port",
            "sctp,tp_src=5000,actions=output:2",
            sctp(5000, 9),
            1,
        ),
        c(
            "sctp other port",
            "sctp,tp_src=5000,actions=output:2",
            sctp(5001, 9),
            0,
        ),
        c(
            "sctp destination port",
            "sctp,tp_dst=9,actions=output:2",
            sctp(7, 9),
            1,
        ),
        c(
            "arp match",
            "arp,arp_op=1,arp_spa=10.0.0.1,arp_tpa=10.0.0.2,actions=output:2",
            arp_request(),
            1,
        ),
        c(
            "set_field arp_spa, arp_tpa",
            "arp,actions=set_field:10.9.9.9->arp_spa,set_field:10.0.0.7->arp_tpa,output:2",
            arp_request(),
            1,
        ),
        c(
            "set_field nw_ecn, mod_nw_ttl (IPv4)",
            "ip,actions=set_field:2->nw_ecn,mod_nw_ttl:9,output:2",
            udp4(0xb8),
            1,
        ),
        c(
            "set_field nw_ecn, mod_nw_ttl (IPv6)",
            "ipv6,actions=set_field:1->nw_ecn,mod_nw_ttl:200,output:2",
            udp6(),
            1,
        ),
        c(
            "set_field vlan_pcp",
            "dl_vlan=5,actions=set_field:6->vlan_pcp,output:2",
            tagged(udp4(0), 5),
            1,
        ),
        c(
            "sctp_src match",
            "sctp,sctp_src=5000,actions=output:2",
            sctp(5000, 9),
            1,
        ),
        c(
            "set_field sctp_src (checksum patched)",
            "sctp,actions=set_field:5000->sctp_src,output:2",
            sctp(7, 9),
            1,
        ),
        c(
            "mod_tp_dst on sctp",
            "sctp,actions=mod_tp_dst:99,output:2",
            sctp(7, 9),
            1,
        ),
        c(
            "set_field icmp_type, icmp_code",
            "icmp,actions=set_field:0->icmp_type,set_field:3->icmp_code,output:2",
            icmp4(),
            1,
        ),
        c(
            "set_field icmpv6_type, icmpv6_code",
            "icmp6,actions=set_field:129->icmpv6_type,set_field:1->icmpv6_code,output:2",
            icmp6(),
            1,
        ),
        c(
            "arp_sha, arp_tha match; set_field arp_sha, arp_tha",
            "arp,arp_sha=02:00:00:00:00:01,arp_tha=00:00:00:00:00:00,actions=set_field:02:00:00:00:00:99->arp_tha,set_field:02:00:00:00:00:98->arp_sha,output:2",
            arp_request(),
            1,
        ),
        c(
            "arp_sha other value",
            "arp,arp_sha=02:00:00:00:00:02,actions=output:2",
            arp_request(),
            0,
        ),
        c(
            "push_mpls on IPv4 (TC and TTL from the IP header)",
            "ip,actions=push_mpls:0x8847,output:2",
            udp4(0xb8),
            1,
        ),
        c(
            "push_mpls on IPv6",
            "ipv6,actions=push_mpls:0x8848,output:2",
            udp6(),
            1,
        ),
        c(
            "push_mpls, set_field mpls_label, mpls_tc, set_mpls_ttl",
            "ip,actions=push_mpls:0x8847,set_field:1000->mpls_label,set_field:5->mpls_tc,set_mpls_ttl(9),output:2",
            udp4(0),
            1,
        ),
        c(
            "mpls match, dec_mpls_ttl",
            "mpls,mpls_label=100,mpls_tc=3,mpls_bos=1,actions=dec_mpls_ttl,output:2",
            mpls(),
            1,
        ),
        c(
            "mpls match, other label",
            "mpls,mpls_label=101,actions=output:2",
            mpls(),
            0,
        ),
        c(
            "pop_mpls",
            "mpls,actions=pop_mpls:0x0800,output:2",
            mpls(),
            1,
        ),
        c(
            "push_mpls onto MPLS",
            "mpls,actions=push_mpls:0x8847,output:2",
            mpls(),
            1,
        ),
        c(
            "dec_mpls_ttl to 0 drops",
            "mpls,actions=set_mpls_ttl(1),dec_mpls_ttl,output:2",
            mpls(),
            0,
        ),
        c(
            "ipv6_label",
            "ipv6,ipv6_label=0x12345,actions=output:2",
            udp6_label(0x12345),
            1,
        ),
        c(
            "ipv6_label, another label",
            "ipv6,ipv6_label=0x12345,actions=output:2",
            udp6_label(0x12344),
            0,
        ),
        c(
            "ipv6_label masked",
            "udp6,ipv6_label=0x10000/0xf0000,actions=output:2",
            udp6_label(0x1abcd),
            1,
        ),
        c(
            "set_field ipv6_label",
            "ipv6,actions=set_field:0xabcde->ipv6_label,output:2",
            udp6_label(0x12345),
            1,
        ),
        c(
            "nd_target",
            "icmp6,icmp_type=135,nd_target=fe80::7,actions=output:2",
            nd(false, 7, &[(1, 0xa)]),
            1,
        ),
        c(
            "nd_target, another target",
            "icmp6,icmp_type=135,nd_target=fe80::7,actions=output:2",
            nd(false, 8, &[(1, 0xa)]),
            0,
        ),
        c(
            "nd_target masked, advertisement",
            "icmp6,icmp_type=136,nd_target=fe80::/64,actions=output:2",
            nd(true, 9, &[(2, 0xb)]),
            1,
        ),
        c(
            "nd_target of a message with two source options (Open vSwitch: none)",
            "icmp6,icmp_type=135,nd_target=fe80::7,actions=output:2",
            nd(false, 7, &[(1, 0xa), (1, 0xb)]),
            0,
        ),
        c(
            "nd_sll",
            "icmp6,icmp_type=135,nd_sll=02:00:00:00:00:0a,actions=output:2",
            nd(false, 7, &[(1, 0xa)]),
            1,
        ),
        c(
            "nd_sll, another address",
            "icmp6,icmp_type=135,nd_sll=02:00:00:00:00:0a,actions=output:2",
            nd(false, 7, &[(1, 0xc)]),
            0,
        ),
        c(
            "nd_tll masked",
            "icmp6,icmp_type=136,nd_tll=02:00:00:00:00:00/ff:ff:ff:00:00:00,actions=output:2",
            nd(true, 7, &[(2, 0xb)]),
            1,
        ),
        c(
            "nd_tll of an advertisement without options",
            "icmp6,icmp_type=136,nd_tll=00:00:00:00:00:00,actions=output:2",
            nd(true, 7, &[]),
            1,
        ),
        c(
            "set_field nd_target and nd_sll",
            "icmp6,icmp_type=135,actions=set_field:2001:db8::9->nd_target,set_field:02:00:00:00:00:0d->nd_sll,output:2",
            nd(false, 7, &[(1, 0xa)]),
            1,
        ),
        c(
            "set_field nd_tll",
            "icmp6,icmp_type=136,actions=set_field:02:00:00:00:00:0e->nd_tll,output:2",
            nd(true, 7, &[(2, 0xb)]),
            1,
        ),
        c(
            "set_field nd_sll where the first option is a target one",
            "icmp6,icmp_type=135,actions=set_field:02:00:00:00:00:0d->nd_sll,output:2",
            nd(false, 7, &[(2, 0xb), (1, 0xa)]),
            1,
        ),
        c(
            "tun_id is 0 on a frame from a port that is not a tunnel",
            "udp,tun_id=0,actions=output:2",
            udp4(0),
            1,
        ),
        c(
            "tun_id 5 does not match a frame from a port",
            "udp,tun_id=5,actions=output:2",
            udp4(0),
            0,
        ),
        c(
            "tunnel_id masked",
            "udp,tunnel_id=0/0xff,actions=output:2",
            udp4(0),
            1,
        ),
        c(
            "set_field tun_id, read back by move into eth_dst",
            "udp,actions=set_field:0x20000000077->tun_id,move:NXM_NX_TUN_ID[0..47]->NXM_OF_ETH_DST[],output:2",
            udp4(0),
            1,
        ),
        c(
            "output to the port a tun_id names",
            "udp,actions=set_tunnel:2,output:NXM_NX_TUN_ID[0..15]",
            udp4(0),
            1,
        ),
        c("indirect group", "udp,actions=group:11", udp4(0), 1),
        c(
            "all group: three copies",
            "udp,actions=group:12",
            udp4(0),
            3,
        ),
        c(
            "all group: its buckets change their own copies",
            "udp,actions=set_field:5->udp_src,group:12,output:2",
            udp4(0),
            4,
        ),
        c(
            "fast failover: the first live bucket",
            "udp,actions=group:13",
            udp4(0),
            1,
        ),
        c(
            "select: the one live bucket",
            "udp,actions=group:14",
            udp4(0),
            1,
        ),
        c(
            "select: weight 0 is never chosen",
            "udp,actions=group:15",
            udp4(0),
            1,
        ),
        c(
            "fast failover watching a group, chained",
            "udp,actions=group:16",
            udp4(0),
            1,
        ),
        c(
            "all group: push_vlan and dec_ttl",
            "udp,actions=group:17",
            udp4(0),
            2,
        ),
        c(
            "group on a frame without the fields it sets",
            "arp,actions=group:11",
            arp_request(),
            1,
        ),
    ]
}

/// The frame of case `i` as sent (its own source MAC).
fn frame_of(i: usize, c: &Case) -> Vec<u8> {
    let mut f = c.frame.clone();
    f[6..12].copy_from_slice(&src_mac(i));
    f
}

fn marker(i: usize) -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend(MARKER_SRC);
    f.extend(MARKER_TYPE);
    f.extend((i as u32).to_be_bytes());
    f.resize(60, 0);
    f
}

/// The rules file both switches load: each case's rule with its source
/// MAC, and the markers' rule above them.
fn flows(cases: &[Case]) -> String {
    let mac = |m: [u8; 6]| {
        m.iter()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(":")
    };
    let mut s = format!(
        "priority=200,dl_src={},dl_type=0x88b5,actions=output:2\n",
        mac(MARKER_SRC)
    );
    for (i, c) in cases.iter().enumerate() {
        s += &format!("priority=100,dl_src={},{}\n", mac(src_mac(i)), c.rule);
    }
    s
}

/// Send every case and its marker into port 1; per case, the frames that
/// came out of port 2 (ours only: the hosts' own traffic is left out).
fn run(socks: &[PacketSocket; 2], cases: &[Case], who: &str) -> Vec<Vec<Vec<u8>>> {
    let mut got: Vec<Vec<Vec<u8>>> = vec![vec![]; cases.len()];
    for (i, c) in cases.iter().enumerate() {
        socks[0].send(&frame_of(i, c));
        socks[0].send(&marker(i));
        let t = Instant::now();
        let mut marker_at = None;
        loop {
            PacketSocket::wait_any(&socks[1..], Duration::from_millis(20));
            while let Some(f) = socks[1].recv() {
                if f.len() >= 18 && f[6..12] == MARKER_SRC && f[12..14] == MARKER_TYPE {
                    if f[14..18] == (i as u32).to_be_bytes() {
                        marker_at.get_or_insert_with(Instant::now);
                    }
                } else if f.len() >= 12 && f[6..12] == src_mac(i) {
                    got[i].push(f);
                } else if f.len() >= 12 && f[6..10] == [2, 0, 0, 0] && f[10] == 1 {
                    panic!(
                        "{who}: case {i} ({}): a frame of another case: {f:02x?}",
                        c.name
                    );
                }
            }
            if marker_at.is_some_and(|m| m.elapsed() >= GRACE) {
                break;
            }
            assert!(
                t.elapsed() < LIMIT,
                "{who}: case {i} ({}): its marker did not come out of port 2 within {LIMIT:?}",
                c.name
            );
        }
    }
    got
}

#[test]
fn single_rules_forward_the_same_frames_on_ovs_and_linerate() {
    require_root();
    require_tools(&OVS_TOOLS);
    let cases = cases();
    let dir = TempDir::new("switch-oracle");
    let file = dir.join("cases.flows");
    std::fs::write(&file, flows(&cases)).unwrap();
    let groups = dir.join("cases.groups");
    std::fs::write(&groups, GROUPS).unwrap();

    let mut results = Vec::new();
    for who in ["Open vSwitch", "linerate"] {
        // A fresh bed for each: nothing of one run reaches the other.
        let star = NetnsStar::up("lror", 2);
        let socks = [
            PacketSocket::open(&star.host_ns(1), &star.host_if(1)),
            PacketSocket::open(&star.host_ns(2), &star.host_if(2)),
        ];
        let got = if who == "Open vSwitch" {
            let ports: Vec<(u32, String)> = (1..=2).map(|i| (i, star.sw_if(i))).collect();
            let mut ovs = Ovs::start(&star.sw_ns(), "br0", &ports);
            ovs.ofctl(
                "add-groups",
                &["-O", "OpenFlow13", groups.to_str().unwrap()],
            );
            ovs.ofctl("add-flows", &["-O", "OpenFlow13", file.to_str().unwrap()]);
            let got = run(&socks, &cases, who);
            ovs.assert_running();
            got
        } else {
            let sock = dir.join("ctl.sock");
            let ifs: Vec<String> = (1..=2).map(|i| star.sw_if(i)).collect();
            let mut p = start_switch_with(
                &star.sw_ns(),
                &ifs,
                &file,
                &sock,
                &["--groups", groups.to_str().unwrap()],
            );
            let got = run(&socks, &cases, who);
            p.assert_running("linerate switch");
            got
        };
        results.push(got);
    }
    let (ovs, lr) = (&results[0], &results[1]);
    let mut bad = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        if ovs[i].len() != c.out {
            bad.push(format!(
                "case {i} ({}): Open vSwitch sent {} frames, the case expects {}",
                c.name,
                ovs[i].len(),
                c.out
            ));
        }
        if lr[i] != ovs[i] {
            bad.push(format!(
                "case {i} ({}): `{}`\n  Open vSwitch: {:02x?}\n  linerate:     {:02x?}",
                c.name, c.rule, ovs[i], lr[i]
            ));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// Flows through select group 18 (three buckets, weights 1, 1 and 2, each
/// writing its own destination MAC) on both switches: each flow sent twice
/// gets the same bucket both times, and every bucket gets flows. (Which
/// bucket a given flow gets is each switch's own hash.)
#[test]
fn select_groups_keep_each_flow_on_one_bucket_and_use_every_bucket_on_ovs_and_linerate() {
    require_root();
    require_tools(&OVS_TOOLS);
    const FLOWS: u16 = 64;
    let src = src_mac(0);
    let mac = |m: [u8; 6]| {
        m.iter()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(":")
    };
    let dir = TempDir::new("switch-oracle-select");
    let file = dir.join("select.flows");
    std::fs::write(
        &file,
        format!(
            "priority=200,dl_src={},dl_type=0x88b5,actions=output:2\n\
             priority=100,dl_src={},udp,actions=group:18\n",
            mac(MARKER_SRC),
            mac(src)
        ),
    )
    .unwrap();
    let groups = dir.join("select.groups");
    std::fs::write(&groups, GROUPS).unwrap();
    // Flow i: from 10.0.1.i (Open vSwitch's symmetric L4 hash leaves UDP
    // ports out, so flows differ in their address).
    let frame = |i: u16| {
        let mut f = udp4(0);
        f[6..12].copy_from_slice(&src);
        f[28..30].copy_from_slice(&[1, i as u8]);
        f[24..26].copy_from_slice(&[0, 0]);
        let c = linerate_wire::checksum::checksum(&f[14..34]);
        f[24..26].copy_from_slice(&c.to_be_bytes());
        f
    };
    for who in ["Open vSwitch", "linerate"] {
        let star = NetnsStar::up("lros", 2);
        let socks = [
            PacketSocket::open(&star.host_ns(1), &star.host_if(1)),
            PacketSocket::open(&star.host_ns(2), &star.host_if(2)),
        ];
        let mut ovs = None;
        let mut lr = None;
        if who == "Open vSwitch" {
            let ports: Vec<(u32, String)> = (1..=2).map(|i| (i, star.sw_if(i))).collect();
            let o = Ovs::start(&star.sw_ns(), "br0", &ports);
            o.ofctl(
                "add-groups",
                &["-O", "OpenFlow13", groups.to_str().unwrap()],
            );
            o.ofctl("add-flows", &["-O", "OpenFlow13", file.to_str().unwrap()]);
            ovs = Some(o);
        } else {
            let ifs: Vec<String> = (1..=2).map(|i| star.sw_if(i)).collect();
            let sock = dir.join("ctl.sock");
            lr = Some(start_switch_with(
                &star.sw_ns(),
                &ifs,
                &file,
                &sock,
                &["--groups", groups.to_str().unwrap()],
            ));
        }
        // Each flow twice, the second round after the first.
        for _ in 0..2 {
            for sp in 0..FLOWS {
                socks[0].send(&frame(sp));
            }
        }
        socks[0].send(&marker(0));
        // Per flow, the last byte of each copy's destination MAC.
        let mut got: Vec<Vec<u8>> = vec![vec![]; FLOWS as usize];
        let t = Instant::now();
        let mut marker_at = None;
        while marker_at.is_none_or(|m: Instant| m.elapsed() < GRACE) {
            assert!(t.elapsed() < LIMIT, "{who}: the marker did not come out");
            PacketSocket::wait_any(&socks[1..], Duration::from_millis(20));
            while let Some(f) = socks[1].recv() {
                if f.len() >= 18 && f[6..12] == MARKER_SRC {
                    marker_at.get_or_insert_with(Instant::now);
                } else if f.len() >= 36 && f[6..12] == src && f[28] == 1 {
                    got[f[29] as usize % FLOWS as usize].push(f[5]);
                }
            }
        }
        let mut used = std::collections::BTreeSet::new();
        for (sp, g) in got.iter().enumerate() {
            assert_eq!(g.len(), 2, "{who}: flow {sp}: copies {g:02x?}");
            assert_eq!(g[0], g[1], "{who}: flow {sp} changed bucket: {g:02x?}");
            used.insert(g[0]);
        }
        assert_eq!(
            used.into_iter().collect::<Vec<_>>(),
            vec![0xa1, 0xa2, 0xa3],
            "{who}: the buckets used"
        );
        if let Some(o) = &mut ovs {
            o.assert_running();
        }
        if let Some(p) = &mut lr {
            p.assert_running("linerate switch");
        }
    }
}
