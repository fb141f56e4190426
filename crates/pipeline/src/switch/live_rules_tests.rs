//! Issue 37, "no accepted rule can be dead": for every match field the
//! rule parser accepts, a frame that carries the rule's value matches the
//! rule, and the same frame with another value does not. Each frame goes
//! the datapath's way: the key extraction (the general one and the fast
//! one, which must agree), then the tuple-space classifier and the linear
//! reference. This is the class of the `sctp,tp_src=` bug (accepted, and
//! never matched: the key filled ports for TCP and UDP only).
//!
//! A guard keeps the list whole: Open vSwitch's field names are tried
//! with every prerequisite, and any the parser accepts must have a case
//! here, so a field added to the parser without one fails this test.

use super::classifier::Classifier;
use super::key::{self, Key};
use super::reference::Reference;
use super::rule::MatchSpec;
use linerate_wire::arp::ArpRepr;
use linerate_wire::build::{
    build_arp, build_icmp_echo, build_nd, build_tcp, build_udp, nd_lla_option, FrameParams, IpPair,
};
use linerate_wire::tcp::TcpRepr;

#[derive(Clone, Copy, PartialEq)]
enum L3 {
    V4,
    V6,
    Arp,
    /// One MPLS entry ([`Spec::lse`]) over the IPv4 packet.
    Mpls,
}

#[derive(Clone, Copy, PartialEq)]
enum L4 {
    Udp,
    Tcp,
    Sctp,
    Icmp,
    /// A neighbour solicitation (`icmp.0` 135) or advertisement (136),
    /// with [`Spec::nd`]'s target and options.
    Nd,
}

/// A frame to build, and the pipeline state it meets a table with.
#[derive(Clone, Copy)]
struct Spec {
    in_port: u32,
    src: [u8; 6],
    dst: [u8; 6],
    /// The 802.1Q TCI (PCP and VID), if tagged.
    tci: Option<u16>,
    l3: L3,
    tos: u8,
    ttl: u8,
    src4: [u8; 4],
    dst4: [u8; 4],
    src6: [u8; 16],
    dst6: [u8; 16],
    arp_op: u16,
    /// ARP's target hardware address (its sender's is `src`).
    tha: [u8; 6],
    /// The MPLS entry, and the multicast EtherType (0x8848).
    lse: u32,
    mpls_mc: bool,
    l4: L4,
    sp: u16,
    dp: u16,
    tcp_flags: u16,
    icmp: (u8, u8),
    /// IPv6's flow label.
    flabel: u32,
    /// Neighbour discovery's target, and its source and target link-layer
    /// address options if any.
    nd: ([u8; 16], Option<[u8; 6]>, Option<[u8; 6]>),
    /// Written by earlier tables (`write_metadata`, `load`).
    metadata: u64,
    reg: [u32; key::REGS],
    /// 0 on arrival (no tunnel ports), then written like metadata.
    tun_id: u64,
}

fn v6(last: u8) -> [u8; 16] {
    let mut a = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    a[15] = last;
    a
}

impl Spec {
    fn base(l3: L3, l4: L4) -> Spec {
        Spec {
            in_port: 1,
            src: [2, 0, 0, 0, 0, 0x0a],
            dst: [2, 0, 0, 0, 0, 0x0b],
            tci: None,
            l3,
            tos: 0,
            ttl: 64,
            src4: [10, 1, 2, 3],
            dst4: [10, 9, 8, 7],
            src6: v6(1),
            dst6: v6(2),
            arp_op: 1,
            tha: [0; 6],
            lse: (100 << 12) | (3 << 9) | 0x100 | 20,
            mpls_mc: false,
            l4,
            sp: 1000,
            dp: 2000,
            tcp_flags: 0x10,
            icmp: (8, 0),
            flabel: 0,
            nd: (v6(7), None, None),
            metadata: 0,
            reg: [0; key::REGS],
            tun_id: 0,
        }
    }

    fn frame(&self) -> Vec<u8> {
        let mut b = [0u8; 256];
        let tags: Vec<u16> = self.tci.into_iter().collect();
        if self.l3 == L3::Arp {
            let r = ArpRepr {
                operation: self.arp_op,
                sender_mac: self.src,
                sender_ip: self.src4,
                target_mac: self.tha,
                target_ip: self.dst4,
            };
            let n = build_arp(&mut b, self.dst, self.src, &tags, &r).unwrap();
            return b[..n.max(60)].to_vec();
        }
        if self.l3 == L3::Mpls {
            let mut f = Spec {
                l3: L3::V4,
                ..*self
            }
            .frame();
            let at = 12 + 4 * tags.len();
            let et: u16 = if self.mpls_mc { 0x8848 } else { 0x8847 };
            f[at..at + 2].copy_from_slice(&et.to_be_bytes());
            f.splice(at + 2..at + 2, self.lse.to_be_bytes());
            return f;
        }
        let ip = match self.l3 {
            L3::V4 => IpPair::V4 {
                src: self.src4,
                dst: self.dst4,
            },
            _ => IpPair::V6 {
                src: self.src6,
                dst: self.dst6,
            },
        };
        let mut p = FrameParams::new(ip);
        (p.eth_src, p.eth_dst, p.vlans, p.tos, p.ttl) =
            (self.src, self.dst, &tags, self.tos, self.ttl);
        p.flow_label = self.flabel;
        p.payload = &[0; 16];
        let opts: Vec<u8> = [(1, self.nd.1), (2, self.nd.2)]
            .iter()
            .filter_map(|&(kind, mac)| mac.map(|m| nd_lla_option(kind, m)))
            .flatten()
            .collect();
        if self.l4 == L4::Nd {
            p.payload = &opts;
        }
        let n = match self.l4 {
            L4::Udp | L4::Sctp => build_udp(&mut b, &p, self.sp, self.dp),
            L4::Tcp => build_tcp(
                &mut b,
                &p,
                &TcpRepr {
                    src_port: self.sp,
                    dst_port: self.dp,
                    seq: 1,
                    ack: 0,
                    flags: self.tcp_flags,
                    window: 1024,
                    urgent: 0,
                },
            ),
            L4::Icmp => build_icmp_echo(&mut b, &p, true, 1, 1),
            L4::Nd => build_nd(&mut b, &p, self.icmp.0 == 136, &self.nd.0),
        }
        .unwrap();
        let l3 = 14 + 4 * tags.len();
        let l4 = l3 + if self.l3 == L3::V4 { 20 } else { 40 };
        match self.l4 {
            // SCTP: the UDP frame's first 8 bytes are SCTP's ports and
            // verification tag; the protocol number says SCTP.
            L4::Sctp if self.l3 == L3::V4 => {
                b[l3 + 9] = 132;
                b[l3 + 10..l3 + 12].fill(0);
                let c = linerate_wire::checksum::checksum(&b[l3..l3 + 20]);
                b[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
            }
            L4::Sctp => b[l3 + 6] = 132,
            L4::Icmp | L4::Nd => (b[l4], b[l4 + 1]) = self.icmp,
            _ => {}
        }
        b[..n.max(60)].to_vec()
    }

    /// The key the datapath works on: extracted (both ways, which must
    /// agree), then the pipeline state.
    fn key(&self) -> Key {
        let f = self.frame();
        let mut k = Key::extract_general(&f, self.in_port);
        if let Some(fast) = Key::extract_fast(&f, self.in_port) {
            assert_eq!(fast, k, "the fast extraction disagrees on {f:02x?}");
        }
        k.set(key::METADATA, self.metadata);
        k.set(key::TUN_ID, self.tun_id);
        for (i, r) in self.reg.iter().enumerate() {
            k.set(key::reg(i), *r as u64);
        }
        k
    }
}

type Tweak = fn(&mut Spec);

/// (the rule's match, the frame's layers, what makes the base frame
/// match, what makes it not: each applied to the base frame).
struct Case(&'static str, L3, L4, Tweak, Tweak);

fn cases() -> Vec<Case> {
    use L3::*;
    use L4::*;
    let nop: Tweak = |_| {};
    vec![
        Case("in_port=3", V4, Udp, |s| s.in_port = 3, |s| s.in_port = 4),
        Case("dl_src=02:00:00:00:00:0c", V4, Udp, |s| s.src[5] = 0xc, nop),
        Case(
            "eth_src=02:00:00:00:00:0c",
            V4,
            Udp,
            |s| s.src[5] = 0xc,
            nop,
        ),
        Case("dl_dst=02:00:00:00:00:0c", V4, Udp, |s| s.dst[5] = 0xc, nop),
        Case(
            "eth_dst=02:00:00:00:00:0c",
            V4,
            Udp,
            |s| s.dst[5] = 0xc,
            nop,
        ),
        Case("dl_type=0x0806", Arp, Udp, nop, |s| s.l3 = V4),
        Case("eth_type=0x86dd", V6, Udp, nop, |s| s.l3 = V4),
        Case(
            "vlan_tci=0x1064/0x1fff",
            V4,
            Udp,
            |s| s.tci = Some(100),
            |s| s.tci = Some(101),
        ),
        Case(
            "dl_vlan=100",
            V4,
            Udp,
            |s| s.tci = Some(100),
            |s| s.tci = None,
        ),
        Case(
            "vlan_vid=0x1064",
            V4,
            Udp,
            |s| s.tci = Some(100),
            |s| s.tci = Some(99),
        ),
        Case(
            "dl_vlan_pcp=5",
            V4,
            Udp,
            |s| s.tci = Some(5 << 13 | 7),
            |s| s.tci = Some(4 << 13 | 7),
        ),
        Case(
            "vlan_pcp=5",
            V4,
            Udp,
            |s| s.tci = Some(5 << 13 | 7),
            |s| s.tci = None,
        ),
        Case("arp,arp_op=2", Arp, Udp, |s| s.arp_op = 2, nop),
        Case("arp,arp_spa=10.1.2.0/24", Arp, Udp, nop, |s| s.src4[2] = 9),
        Case("arp,arp_tpa=10.9.8.7", Arp, Udp, nop, |s| s.dst4[3] = 6),
        Case("arp,arp_sha=02:00:00:00:00:0a", Arp, Udp, nop, |s| {
            s.src[5] = 0xc
        }),
        Case(
            "arp,arp_tha=02:00:00:00:00:00/ff:00:00:00:00:00",
            Arp,
            Udp,
            |s| s.tha = [2, 0, 0, 0, 0, 7],
            |s| s.tha = [4, 0, 0, 0, 0, 7],
        ),
        Case("ip,nw_src=10.1.0.0/16", V4, Udp, nop, |s| s.src4[1] = 2),
        Case("ip,ip_src=10.1.2.3", V4, Udp, nop, |s| s.src4[3] = 4),
        Case("ip,nw_dst=10.9.8.7", V4, Udp, nop, |s| s.dst4[3] = 6),
        Case("ip,ip_dst=10.9.0.0/16", V4, Udp, nop, |s| s.dst4[1] = 8),
        Case("ipv6,ipv6_src=2001:db8::/32", V6, Udp, nop, |s| {
            s.src6[2] = 0
        }),
        Case("ipv6,ipv6_dst=2001:db8::2", V6, Udp, nop, |s| {
            s.dst6[15] = 3
        }),
        Case("ip,nw_proto=6", V4, Tcp, nop, |s| s.l4 = Udp),
        Case("ipv6,ip_proto=17", V6, Udp, nop, |s| s.l4 = Tcp),
        Case("ip,nw_tos=40", V4, Udp, |s| s.tos = 40 | 1, |s| s.tos = 44),
        Case(
            "ipv6,ip_dscp=10",
            V6,
            Udp,
            |s| s.tos = 40 | 2,
            |s| s.tos = 44,
        ),
        Case(
            "ip,ip_ecn=2",
            V4,
            Udp,
            |s| s.tos = 40 | 2,
            |s| s.tos = 40 | 1,
        ),
        Case("ipv6,nw_ecn=1", V6, Udp, |s| s.tos = 1, |s| s.tos = 3),
        Case("ip,nw_ttl=7", V4, Udp, |s| s.ttl = 7, |s| s.ttl = 8),
        Case("ipv6,nw_ttl=7", V6, Udp, |s| s.ttl = 7, |s| s.ttl = 8),
        Case("tcp,tp_src=1000", V4, Tcp, nop, |s| s.sp = 1001),
        Case("udp,tp_dst=2000", V4, Udp, nop, |s| s.dp = 2001),
        Case("sctp,tp_src=1000", V4, Sctp, nop, |s| s.sp = 1001),
        Case("sctp,tp_dst=2000", V4, Sctp, nop, |s| s.dp = 2001),
        Case("tcp6,tp_dst=0x07d0/0xfff0", V6, Tcp, nop, |s| s.dp = 0x7e0),
        Case("udp6,tp_src=1000", V6, Udp, nop, |s| s.sp = 1001),
        Case("sctp6,tp_src=1000", V6, Sctp, nop, |s| s.sp = 1001),
        Case("sctp6,tp_dst=2000", V6, Sctp, nop, |s| s.dp = 2001),
        Case("sctp,sctp_src=1000", V4, Sctp, nop, |s| s.sp = 1001),
        Case("sctp6,sctp_dst=0x07d0/0xfff0", V6, Sctp, nop, |s| {
            s.dp = 0x7e0
        }),
        Case("tcp,tcp_src=1000", V4, Tcp, nop, |s| s.sp = 1001),
        Case("tcp6,tcp_dst=2000", V6, Tcp, nop, |s| s.dp = 2001),
        Case("udp,udp_src=1000", V4, Udp, nop, |s| s.sp = 1001),
        Case("udp6,udp_dst=2000", V6, Udp, nop, |s| s.dp = 2001),
        Case(
            "tcp,tcp_flags=0x012",
            V4,
            Tcp,
            |s| s.tcp_flags = 0x12,
            |s| s.tcp_flags = 0x10,
        ),
        Case(
            "tcp6,tcp_flags=+syn-ack",
            V6,
            Tcp,
            |s| s.tcp_flags = 0x02,
            |s| s.tcp_flags = 0x12,
        ),
        Case("icmp,icmp_type=3", V4, Icmp, |s| s.icmp = (3, 1), nop),
        Case(
            "icmp,icmp_code=1",
            V4,
            Icmp,
            |s| s.icmp = (3, 1),
            |s| s.icmp = (3, 0),
        ),
        Case(
            "icmp6,icmpv6_type=135",
            V6,
            Icmp,
            |s| s.icmp = (135, 0),
            nop,
        ),
        Case("icmp6,icmp6_type=136", V6, Icmp, |s| s.icmp = (136, 0), nop),
        Case(
            "icmp6,icmpv6_code=4",
            V6,
            Icmp,
            |s| s.icmp = (1, 4),
            |s| s.icmp = (1, 3),
        ),
        Case(
            "icmp6,icmp6_code=4",
            V6,
            Icmp,
            |s| s.icmp = (1, 4),
            |s| s.icmp = (1, 0),
        ),
        Case("mpls,mpls_label=100", Mpls, Udp, nop, |s| {
            s.lse = (101 << 12) | 0x100
        }),
        Case("mpls,mpls_tc=3", Mpls, Udp, nop, |s| s.lse &= !(1 << 9)),
        Case(
            "mplsm,mpls_bos=1",
            Mpls,
            Udp,
            |s| s.mpls_mc = true,
            |s| s.lse &= !0x100,
        ),
        Case("mpls", Mpls, Udp, nop, |s| s.mpls_mc = true),
        Case("mplsm", Mpls, Udp, |s| s.mpls_mc = true, |s| s.l3 = V4),
        Case("ip", V4, Udp, nop, |s| s.l3 = V6),
        Case("ipv6", V6, Udp, nop, |s| s.l3 = Arp),
        Case("arp", Arp, Udp, nop, |s| s.l3 = V4),
        Case("tcp", V4, Tcp, nop, |s| s.l3 = V6),
        Case("udp", V4, Udp, nop, |s| s.l4 = Sctp),
        Case("sctp", V4, Sctp, nop, |s| s.l4 = Udp),
        Case("icmp", V4, Icmp, nop, |s| s.l3 = V6),
        Case("tcp6", V6, Tcp, nop, |s| s.l4 = Udp),
        Case("udp6", V6, Udp, nop, |s| s.l3 = V4),
        Case("sctp6", V6, Sctp, nop, |s| s.l4 = Tcp),
        Case("icmp6", V6, Icmp, nop, |s| s.l3 = V4),
        // Pipeline state: what earlier tables wrote.
        Case(
            "metadata=0x5/0xf",
            V4,
            Udp,
            |s| s.metadata = 0x75,
            |s| s.metadata = 0x76,
        ),
        Case(
            "ipv6,ipv6_label=0x12345",
            V6,
            Udp,
            |s| s.flabel = 0x12345,
            |s| s.flabel = 0x12344,
        ),
        Case(
            "ipv6_flabel=0x500/0xf00,tcp6",
            V6,
            Tcp,
            |s| s.flabel = 0xf5ab,
            |s| s.flabel = 0x600,
        ),
        Case(
            "icmp6,icmp_type=135,nd_target=2001:db8::7",
            V6,
            Nd,
            |s| s.icmp = (135, 0),
            |s| s.icmp = (135, 1),
        ),
        Case(
            "icmp6,icmp_type=136,icmp_code=0,nd_target=2001:db8::/120",
            V6,
            Nd,
            |s| s.icmp = (136, 0),
            |s| (s.icmp, s.nd.0[14]) = ((136, 0), 1),
        ),
        Case(
            "icmp6,icmp_type=135,nd_sll=02:00:00:00:00:0c",
            V6,
            Nd,
            |s| (s.icmp, s.nd.1) = ((135, 0), Some([2, 0, 0, 0, 0, 0xc])),
            |s| (s.icmp, s.nd.1) = ((135, 0), Some([2, 0, 0, 0, 0, 0xd])),
        ),
        Case(
            "icmp6,icmp_type=136,nd_tll=02:00:00:00:00:00/ff:ff:ff:00:00:00",
            V6,
            Nd,
            |s| (s.icmp, s.nd.2) = ((136, 0), Some([2, 0, 0, 0, 0, 0xc])),
            |s| (s.icmp, s.nd.2) = ((136, 0), Some([4, 0, 0, 0, 0, 0xc])),
        ),
        Case("tun_id=0", V4, Udp, nop, |s| s.tun_id = 1),
        Case(
            "tunnel_id=0x500/0xff00",
            V4,
            Udp,
            |s| s.tun_id = 0x5ab,
            |s| s.tun_id = 0x600,
        ),
        Case("reg0=7", V4, Udp, |s| s.reg[0] = 7, nop),
        Case("reg1=7", V4, Udp, |s| s.reg[1] = 7, nop),
        Case("reg2=7", V4, Udp, |s| s.reg[2] = 7, nop),
        Case("reg3=7", V4, Udp, |s| s.reg[3] = 7, nop),
        Case("reg4=7", V4, Udp, |s| s.reg[4] = 7, nop),
        Case("reg5=7", V4, Udp, |s| s.reg[5] = 7, nop),
        Case("reg6=7", V4, Udp, |s| s.reg[6] = 7, nop),
        Case("reg7=0x10000/0x10000", V4, Udp, |s| s.reg[7] = 0x1ffff, nop),
    ]
}

#[test]
fn every_accepted_match_field_matches_a_frame_that_has_its_value() {
    for Case(text, l3, l4, hit, miss) in cases() {
        let m = MatchSpec::parse(text)
            .unwrap_or_else(|e| panic!("{text}: {e}"))
            .m;
        let mut cls = Classifier::new();
        let mut refr = Reference::new();
        let (id, _) = cls.insert(&m, 10);
        refr.insert(id, &m, 10).unwrap();
        let (mut yes, mut no) = (Spec::base(l3, l4), Spec::base(l3, l4));
        hit(&mut yes);
        miss(&mut no);
        for (s, want) in [(yes, Some(id)), (no, None)] {
            let k = s.key();
            let mut out = [None];
            cls.lookup_batch(&[k], &mut out);
            assert_eq!(
                (out[0], refr.lookup(&k), k.matches(&m.mask, &m.value)),
                (want, want, want.is_some()),
                "rule '{text}' against the {} frame {:02x?}",
                if want.is_some() { "matching" } else { "other" },
                s.frame()
            );
        }
    }
}

/// A rule over every word a valid match can use (17 of the key's 18:
/// `nd_sll` and `nd_tll` never meet in one match) is found by the batch
/// lookup, whose probes are specialised by word count, as by the one-key
/// lookup; and so is the same rule without its last word.
#[test]
fn rules_over_the_widest_masks_match() {
    let wide = "in_port=1,dl_src=02:00:00:00:00:0a,icmp6,icmp_type=135,ipv6_src=2001:db8::1,\
                ipv6_dst=2001:db8::2,reg0=1,reg2=2,reg4=3,reg6=4,metadata=5,tun_id=6,\
                nd_target=2001:db8::7";
    let mut s = Spec::base(L3::V6, L4::Nd);
    (s.icmp, s.nd.1) = ((135, 0), Some([2, 0, 0, 0, 0, 0xc]));
    (s.reg[0], s.reg[2], s.reg[4], s.reg[6]) = (1, 2, 3, 4);
    (s.metadata, s.tun_id) = (5, 6);
    for text in [wide.to_string(), format!("{wide},nd_sll=02:00:00:00:00:0c")] {
        let m = MatchSpec::parse(&text).unwrap().m;
        let words = (0..key::WORDS).filter(|&w| m.mask.w[w] != 0).count();
        let mut cls = Classifier::new();
        let (id, _) = cls.insert(&m, 10);
        let mut out = [None; 3];
        let mut other = s;
        other.nd.0[15] = 8;
        cls.lookup_batch(&[s.key(), other.key(), s.key()], &mut out);
        assert_eq!(out, [Some(id), None, Some(id)], "{words} words: {text}");
    }
}

/// Open vSwitch's field names (ovs-fields(7)) and the shorthands.
const OVS_FIELDS: &[&str] = &[
    "in_port",
    "in_port_oxm",
    "skb_priority",
    "pkt_mark",
    "ct_state",
    "ct_zone",
    "ct_mark",
    "ct_label",
    "recirc_id",
    "dp_hash",
    "conj_id",
    "actset_output",
    "packet_type",
    "tun_id",
    "tunnel_id",
    "tun_src",
    "tun_dst",
    "tun_flags",
    "metadata",
    "reg0",
    "reg1",
    "reg2",
    "reg3",
    "reg4",
    "reg5",
    "reg6",
    "reg7",
    "reg8",
    "reg15",
    "xreg0",
    "xxreg0",
    "dl_src",
    "eth_src",
    "dl_dst",
    "eth_dst",
    "dl_type",
    "eth_type",
    "vlan_tci",
    "dl_vlan",
    "vlan_vid",
    "dl_vlan_pcp",
    "vlan_pcp",
    "mpls_label",
    "mpls_tc",
    "mpls_bos",
    "mpls_ttl",
    "nw_src",
    "ip_src",
    "ipv4_src",
    "nw_dst",
    "ip_dst",
    "ipv4_dst",
    "ipv6_src",
    "ipv6_dst",
    "ipv6_label",
    "ipv6_flabel",
    "nw_proto",
    "ip_proto",
    "nw_ttl",
    "nw_tos",
    "ip_dscp",
    "nw_ecn",
    "ip_ecn",
    "nw_frag",
    "ip_frag",
    "arp_op",
    "arp_spa",
    "arp_tpa",
    "arp_sha",
    "arp_tha",
    "tcp_src",
    "tcp_dst",
    "tcp_flags",
    "udp_src",
    "udp_dst",
    "sctp_src",
    "sctp_dst",
    "tp_src",
    "tp_dst",
    "icmp_type",
    "icmp_code",
    "icmpv6_type",
    "icmpv6_code",
    "icmp6_type",
    "icmp6_code",
    "nd_target",
    "nd_sll",
    "nd_tll",
    "pbb_isid",
    "ip",
    "ipv6",
    "arp",
    "rarp",
    "tcp",
    "udp",
    "sctp",
    "icmp",
    "tcp6",
    "udp6",
    "sctp6",
    "icmp6",
    "mpls",
    "mplsm",
    "ip6",
];

#[test]
fn every_field_name_the_parser_accepts_has_a_case() {
    let covered: Vec<String> = cases()
        .iter()
        .flat_map(|c| {
            c.0.split(',')
                .map(|t| t.split('=').next().unwrap_or(t).to_string())
                .collect::<Vec<_>>()
        })
        .collect();
    let prereqs = [
        "",
        "ip,",
        "ipv6,",
        "arp,",
        "tcp,",
        "udp,",
        "sctp,",
        "icmp,",
        "tcp6,",
        "udp6,",
        "sctp6,",
        "icmp6,",
        "icmp6,icmp_type=135,",
        "icmp6,icmp_type=136,",
    ];
    let values = ["1", "10.0.0.1", "2001:db8::1", "02:00:00:00:00:01", "0x1"];
    let mut missing = Vec::new();
    for name in OVS_FIELDS {
        let accepted = MatchSpec::parse(name).is_ok()
            || prereqs.iter().any(|p| {
                values
                    .iter()
                    .any(|v| MatchSpec::parse(&format!("{p}{name}={v}")).is_ok())
            });
        if accepted && !covered.iter().any(|c| c == name) {
            missing.push(*name);
        }
    }
    assert!(
        missing.is_empty(),
        "accepted by the rule parser with no frame case in live_rules_tests.rs: {missing:?}"
    );
}
