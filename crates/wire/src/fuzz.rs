//! Each function takes arbitrary bytes, runs one parser and every getter on
//! the result, and asserts invariants that must hold for any input. A panic
//! here is a bug. The cargo-fuzz targets in `fuzz/` and the wire tests
//! (through [`TARGETS`]) call them.

use crate::arp::ArpPacket;
use crate::ethernet::EthernetFrame;
use crate::flow::FlowKey;
use crate::frame::{self, parse_frame, Endpoint, L3, L4};
use crate::icmp::IcmpPacket;
use crate::ipv4::Ipv4Packet;
use crate::ipv6::{self, Ipv6Packet};
use crate::tcp::TcpPacket;
use crate::udp::UdpPacket;
use crate::{checksum, rss, vlan};

/// Largest input copied to a stack buffer for the mutation checks.
const SCRATCH: usize = 2048;

/// A fuzz body.
pub type Target = fn(&[u8]);

/// All fuzz targets by name.
pub const TARGETS: &[(&str, Target)] = &[
    ("ethernet", ethernet),
    ("vlan", vlan),
    ("arp", arp),
    ("ipv4", ipv4),
    ("ipv6", ipv6),
    ("udp", udp),
    ("tcp", tcp),
    ("icmp", icmp),
    ("frame", frame),
    ("flowkey", flowkey),
];

pub fn ethernet(data: &[u8]) {
    if let Ok(f) = EthernetFrame::new_checked(data) {
        assert!(data.len() >= 14);
        let _ = (f.dst(), f.src(), f.ethertype());
        assert_eq!(f.payload().len(), data.len() - 14);
    }
}

/// Input: a 2-byte EtherType then the tag bytes.
pub fn vlan(data: &[u8]) {
    if data.len() >= 2 {
        let et = u16::from_be_bytes([data[0], data[1]]);
        if let Ok(p) = vlan::parse_stack(et, &data[2..]) {
            assert!(p.len <= data.len() - 2);
            assert!(p.stack.count as usize <= vlan::MAX_TAGS);
            assert_eq!(p.len, p.stack.count as usize * vlan::TAG_LEN);
            for t in p.stack.as_slice() {
                assert!(t.vid() < 4096 && t.pcp() < 8);
                let _ = t.dei();
            }
        }
    }
    if let Ok(v) = vlan::VlanPacket::new_checked(data) {
        let _ = (
            v.tci(),
            v.vid(),
            v.pcp(),
            v.dei(),
            v.ethertype(),
            v.payload(),
        );
    }
}

pub fn arp(data: &[u8]) {
    if let Ok(a) = ArpPacket::new_checked(data) {
        let _ = (
            a.operation(),
            a.sender_mac(),
            a.sender_ip(),
            a.target_mac(),
            a.target_ip(),
        );
    }
}

pub fn ipv4(data: &[u8]) {
    if let Ok(p) = Ipv4Packet::new_checked(data) {
        let hl = p.header_len();
        assert!(hl >= 20 && hl <= p.total_len() as usize && p.total_len() as usize <= data.len());
        assert_eq!(p.payload().len(), p.total_len() as usize - hl);
        assert_eq!(p.options().len(), hl - 20);
        let _ = (
            p.dscp(),
            p.ecn(),
            p.ident(),
            p.frag_offset(),
            p.is_fragment(),
            p.ttl(),
        );
        let _ = (p.protocol(), p.src(), p.dst(), p.verify_checksum());
        if data.len() <= SCRATCH {
            let mut buf = [0u8; SCRATCH];
            buf[..data.len()].copy_from_slice(data);
            let mut q = Ipv4Packet::new_checked(&mut buf[..data.len()]).unwrap();
            q.fill_checksum();
            assert!(q.verify_checksum());
            q.decrement_ttl();
            q.set_src_incremental([1, 2, 3, 4]);
            assert!(q.verify_checksum());
        }
    }
}

pub fn ipv6(data: &[u8]) {
    if let Ok(p) = Ipv6Packet::new_checked(data) {
        assert_eq!(p.payload().len(), p.payload_len() as usize);
        let _ = (
            p.traffic_class(),
            p.flow_label(),
            p.hop_limit(),
            p.src(),
            p.dst(),
        );
        if let Ok(w) = p.upper_layer() {
            assert!(w.offset <= p.payload().len());
            assert!(w.count as usize <= ipv6::MAX_EXT_HEADERS);
        }
    }
    // The walker alone on raw bytes, with the first byte as next header.
    if let Some((&nh, rest)) = data.split_first() {
        if let Ok(w) = ipv6::walk_ext_headers(nh, rest) {
            assert!(w.offset <= rest.len());
        }
    }
}

pub fn udp(data: &[u8]) {
    if let Ok(u) = UdpPacket::new_checked(data) {
        assert!(u.len() as usize >= 8 && u.len() as usize <= data.len());
        assert_eq!(u.payload().len(), u.len() as usize - 8);
        let _ = (u.src_port(), u.dst_port(), u.checksum(), u.is_empty());
        let _ = u.verify_checksum_v4(&[1, 2, 3, 4], &[5, 6, 7, 8]);
        let _ = u.verify_checksum_v6(&[1; 16], &[2; 16]);
    }
}

pub fn tcp(data: &[u8]) {
    if let Ok(t) = TcpPacket::new_checked(data) {
        let hl = t.header_len();
        assert!(hl >= 20 && hl <= data.len());
        assert_eq!(t.payload().len(), data.len() - hl);
        let _ = (
            t.src_port(),
            t.dst_port(),
            t.seq(),
            t.ack(),
            t.flags(),
            t.window(),
        );
        let _ = (
            t.urgent(),
            t.options(),
            t.verify_checksum_v4(&[1; 4], &[2; 4]),
        );
    }
}

pub fn icmp(data: &[u8]) {
    if let Ok(i) = IcmpPacket::new_checked(data) {
        let _ = (
            i.msg_type(),
            i.code(),
            i.checksum(),
            i.echo_ident(),
            i.echo_seq(),
        );
        let _ = (
            i.payload(),
            i.verify_checksum_v4(),
            i.verify_checksum_v6(&[0; 16], &[1; 16]),
        );
    }
}

/// Whole-frame parse: offsets ordered and in bounds, deterministic, and
/// in-place rewrites keep valid checksums valid.
pub fn frame(data: &[u8]) {
    let Ok(l) = parse_frame(data) else { return };
    assert_eq!(parse_frame(data), Ok(l));
    let n = data.len() as u32;
    assert!(l.l3_offset <= l.l4_offset && l.l4_offset <= l.payload_offset);
    assert!(l.payload_offset <= l.end && l.end <= n);
    assert!(l.l3_offset >= 14 && l.vlans.count as usize <= vlan::MAX_TAGS);
    let _ = (
        l.l3_bytes(data),
        l.l4_bytes(data),
        l.payload(data),
        l.flow_key(),
    );
    if !l.is_ip() {
        assert_eq!(l.l4, L4::None);
    }
    if data.len() > SCRATCH {
        return;
    }
    let mut buf = [0u8; SCRATCH];
    let b = &mut buf[..data.len()];
    b.copy_from_slice(data);
    let ip_ok = l.l3 == L3::Ipv4
        && Ipv4Packet::new_checked(l.l3_bytes(data)).is_ok_and(|p| p.verify_checksum());
    let l4_ok = l4_valid(data, &l);
    let mut m = l;
    match l.l3 {
        L3::Ipv4 => {
            frame::rewrite_ipv4_addr(b, &mut m, Endpoint::Src, [192, 0, 2, 1]).unwrap();
            frame::rewrite_ipv4_addr(b, &mut m, Endpoint::Dst, [198, 51, 100, 7]).unwrap();
        }
        L3::Ipv6 => {
            let a = [
                0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x42,
            ];
            frame::rewrite_ipv6_addr(b, &mut m, Endpoint::Dst, a).unwrap();
        }
        _ => return,
    }
    if matches!(l.l4, L4::Tcp | L4::Udp) {
        frame::rewrite_port(b, &mut m, Endpoint::Src, 40000).unwrap();
        frame::rewrite_port(b, &mut m, Endpoint::Dst, 53).unwrap();
    }
    let again = parse_frame(b).expect("rewritten frame must still parse");
    assert_eq!(again, m);
    if ip_ok {
        assert!(Ipv4Packet::new_checked(again.l3_bytes(b))
            .unwrap()
            .verify_checksum());
    }
    if l4_ok {
        assert!(l4_valid(b, &again), "L4 checksum broken by rewrite");
    }
}

/// Non-fragmented TCP/UDP with a correct (non-zero) checksum.
fn l4_valid(f: &[u8], l: &crate::Layers) -> bool {
    if l.is_fragment() || !matches!(l.l4, L4::Tcp | L4::Udp) {
        return false;
    }
    let seg = l.l4_bytes(f);
    let at = if l.l4 == L4::Tcp { 16 } else { 6 };
    if crate::be16(seg, at) == 0 {
        return false;
    }
    if l.l4 == L4::Udp && crate::be16(seg, 4) as usize != seg.len() {
        return false;
    }
    let c = match (
        crate::flow::as_v4(&l.src_ip),
        crate::flow::as_v4(&l.dst_ip),
        l.l3,
    ) {
        (Some(s), Some(d), L3::Ipv4) => checksum::l4_checksum_v4(&s, &d, l.proto, seg),
        (_, _, L3::Ipv6) => checksum::l4_checksum_v6(&l.src_ip, &l.dst_ip, l.proto, seg),
        _ => return false,
    };
    c == 0
}

/// Flow key extraction and hashes: symmetric hashes must not depend on direction.
pub fn flowkey(data: &[u8]) {
    let Ok(k) = FlowKey::from_frame(data) else {
        return;
    };
    let r = k.reversed();
    assert_eq!(k.symmetric_hash(), r.symmetric_hash());
    assert_eq!(k.canonical(), r.canonical());
    assert_eq!(
        rss::hash_flow(&rss::SYMMETRIC_KEY, &k),
        rss::hash_flow(&rss::SYMMETRIC_KEY, &r)
    );
    let _ = rss::hash_flow(&rss::MICROSOFT_KEY, &k);
}
