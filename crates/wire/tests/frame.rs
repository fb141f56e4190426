//! Whole-frame tests: builders cross-checked against hand-written bytes,
//! every prefix of every frame kind, malformed headers, NAT rewrites vs.
//! full recomputation, and the fuzz bodies on the same inputs.

use linerate_wire::arp::{self, ArpRepr};
use linerate_wire::build::{build_arp, build_icmp_echo, build_tcp, build_udp, FrameParams, IpPair};
use linerate_wire::checksum;
use linerate_wire::flow::v4_mapped;
use linerate_wire::frame::{self, Endpoint, FLAG_FRAGMENT, FLAG_LATER_FRAGMENT, L3, L4};
use linerate_wire::ipv4::Ipv4Packet;
use linerate_wire::tcp::{flags, TcpPacket, TcpRepr};
use linerate_wire::udp::UdpPacket;
use linerate_wire::{fuzz, parse_frame, Error, FlowKey, Layers};

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn fill(&mut self, b: &mut [u8]) {
        for x in b {
            *x = self.next() as u8;
        }
    }
}

const V6A: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
const V6B: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];

/// A UDP/IPv4 DNS-like frame written out by hand (as a capture shows it):
/// 02:00:00:00:00:01 -> 02:00:00:00:00:02, 10.0.0.1:1234 -> 10.0.0.2:53,
/// TTL 64, DF, id 0, payload "hi". Checksums (0x26cd, 0x7e67) computed
/// independently with a few lines of Python.
const HAND_UDP4: [u8; 44] = [
    0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x08, 0x00, // eth
    0x45, 0x00, 0x00, 0x1e, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x26, 0xcd, // ip
    0x0a, 0x00, 0x00, 0x01, 0x0a, 0x00, 0x00, 0x02, //
    0x04, 0xd2, 0x00, 0x35, 0x00, 0x0a, 0x7e, 0x67, // udp
    b'h', b'i',
];

fn all_frames() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let payload = [0xabu8; 37];
    let ips = [
        IpPair::V4 {
            src: [10, 0, 0, 1],
            dst: [10, 0, 0, 2],
        },
        IpPair::V6 { src: V6A, dst: V6B },
    ];
    let vlans: [&[u16]; 3] = [&[], &[100], &[200, 0x6064]];
    for ip in ips {
        for v in vlans {
            let mut p = FrameParams::new(ip);
            p.vlans = v;
            p.payload = &payload;
            let mut b = [0u8; 256];
            let n = build_udp(&mut b, &p, 1000, 2000).unwrap();
            out.push(b[..n].to_vec());
            let t = TcpRepr {
                src_port: 3000,
                dst_port: 80,
                seq: 1,
                ack: 2,
                flags: flags::SYN | flags::ACK,
                window: 1000,
                urgent: 0,
            };
            let n = build_tcp(&mut b, &p, &t).unwrap();
            out.push(b[..n].to_vec());
            let n = build_icmp_echo(&mut b, &p, true, 7, 8).unwrap();
            out.push(b[..n].to_vec());
        }
    }
    let mut b = [0u8; 64];
    let r = ArpRepr {
        operation: arp::OP_REQUEST,
        sender_mac: [2, 0, 0, 0, 0, 1],
        sender_ip: [10, 0, 0, 1],
        target_mac: [0; 6],
        target_ip: [10, 0, 0, 2],
    };
    let n = build_arp(&mut b, [0xff; 6], [2, 0, 0, 0, 0, 1], &[5], &r).unwrap();
    out.push(b[..n].to_vec());
    out
}

#[test]
fn builder_matches_hand_written_bytes() {
    let mut p = FrameParams::new(IpPair::V4 {
        src: [10, 0, 0, 1],
        dst: [10, 0, 0, 2],
    });
    p.payload = b"hi";
    let mut b = [0u8; 64];
    let n = build_udp(&mut b, &p, 1234, 53).unwrap();
    assert_eq!(&b[..n], &HAND_UDP4[..]);
    let l = parse_frame(&HAND_UDP4).unwrap();
    assert_eq!(
        (
            l.l3,
            l.l4,
            l.l3_offset,
            l.l4_offset,
            l.payload_offset,
            l.end
        ),
        (L3::Ipv4, L4::Udp, 14, 34, 42, 44)
    );
    assert_eq!(
        l.flow_key(),
        FlowKey::v4([10, 0, 0, 1], [10, 0, 0, 2], 1234, 53, 17)
    );
    assert_eq!(l.payload(&HAND_UDP4), b"hi");
}

#[test]
fn parse_every_builder_frame() {
    for f in all_frames() {
        let l = parse_frame(&f).unwrap();
        match l.l3 {
            L3::Arp => {
                assert_eq!(l.vlans.count, 1);
                assert_eq!(l.vlans.tags[0].vid(), 5);
                continue;
            }
            L3::Ipv4 => {
                assert_eq!(l.src_ip, v4_mapped([10, 0, 0, 1]));
                assert!(Ipv4Packet::new_checked(l.l3_bytes(&f))
                    .unwrap()
                    .verify_checksum());
            }
            L3::Ipv6 => assert_eq!(l.dst_ip, V6B),
            L3::None => panic!("no L3"),
        }
        assert_eq!(l.payload(&f), &[0xab; 37][..]);
        let seg = l.l4_bytes(&f);
        let ok = match (l.l3, l.l4) {
            (L3::Ipv4, L4::Icmpv4) => checksum::checksum(seg) == 0,
            (L3::Ipv4, _) => {
                checksum::l4_checksum_v4(&[10, 0, 0, 1], &[10, 0, 0, 2], l.proto, seg) == 0
            }
            _ => checksum::l4_checksum_v6(&V6A, &V6B, l.proto, seg) == 0,
        };
        assert!(ok, "{:?} checksum", l.l4);
        match l.l4 {
            L4::Udp => assert_eq!((l.src_port, l.dst_port), (1000, 2000)),
            L4::Tcp => assert_eq!(l.tcp_flags, flags::SYN | flags::ACK),
            L4::Icmpv4 | L4::Icmpv6 => assert_eq!(l.src_port, 0),
            _ => panic!("unexpected {:?}", l.l4),
        }
        if l.vlans.count == 2 {
            assert_eq!(l.vlans.tags[0].tpid, 0x88a8);
            assert_eq!(l.vlans.tags[1].tpid, 0x8100);
            assert_eq!((l.vlans.tags[1].vid(), l.vlans.tags[1].pcp()), (0x64, 3));
        }
    }
}

#[test]
fn every_prefix_errs_or_is_consistent() {
    for f in all_frames() {
        let full = parse_frame(&f).unwrap();
        for n in 0..f.len() {
            let r = parse_frame(&f[..n]);
            // Builders emit no padding, so every strict prefix cuts a header
            // or the IP payload the length field promises.
            assert!(r.is_err(), "prefix {n} of {:?} parsed: {r:?}", full.l3);
            for (_, t) in fuzz::TARGETS {
                t(&f[..n]);
            }
        }
        // Ethernet padding after the IP packet is fine and excluded.
        let mut padded = f.clone();
        padded.extend_from_slice(&[0; 20]);
        let p = parse_frame(&padded).unwrap();
        if full.is_ip() {
            assert_eq!(p.end, full.end);
        }
        assert_eq!(p.flow_key(), full.flow_key());
    }
}

fn udp4() -> Vec<u8> {
    HAND_UDP4.to_vec()
}

#[test]
fn malformed_ipv4_in_frame() {
    let mut f = udp4();
    for ihl in 0..5u8 {
        f[14] = 0x40 | ihl;
        assert_eq!(parse_frame(&f), Err(Error::BadHeaderLen));
    }
    f[14] = 0x46; // 24-byte header but total length 30: L4 would be 6 bytes
    assert_eq!(parse_frame(&f), Err(Error::Truncated));
    f[14] = 0x4f; // 60 > total length
    assert_eq!(parse_frame(&f), Err(Error::BadLength));
    f = udp4();
    f[14] = 0x55;
    assert_eq!(parse_frame(&f), Err(Error::BadVersion));
    f = udp4();
    f[17] = 0x1f; // total length 31 > 30 available
    assert_eq!(parse_frame(&f), Err(Error::Truncated));
    f = udp4();
    f[39] = 7; // UDP length 7 < 8
    assert_eq!(parse_frame(&f), Err(Error::BadLength));
    f[39] = 11; // UDP length beyond IP payload
    assert_eq!(parse_frame(&f), Err(Error::Truncated));
}

#[test]
fn fragments() {
    let mut f = udp4();
    // later fragment: no L4, ports 0
    f[20] = 0x00;
    f[21] = 0x10;
    let l = parse_frame(&f).unwrap();
    assert_eq!(l.flags, FLAG_FRAGMENT | FLAG_LATER_FRAGMENT);
    assert_eq!(
        (l.l4, l.src_port, l.proto, l.l4_offset),
        (L4::None, 0, 17, 34)
    );
    // first fragment with MF: UDP length may exceed the fragment
    f[20] = 0x20;
    f[21] = 0;
    f[39] = 200;
    let l = parse_frame(&f).unwrap();
    assert_eq!((l.flags, l.l4, l.dst_port), (FLAG_FRAGMENT, L4::Udp, 53));
}

#[test]
fn ipv6_ext_headers_in_frame() {
    // IPv6 + HBH(8) + frag(8, offset 0) + UDP(8)
    let mut f = vec![0u8; 14 + 40 + 24];
    f[12] = 0x86;
    f[13] = 0xdd;
    f[14] = 0x60;
    f[18..20].copy_from_slice(&24u16.to_be_bytes());
    f[20] = 0; // HBH
    f[21] = 64;
    f[22..38].copy_from_slice(&V6A);
    f[38..54].copy_from_slice(&V6B);
    f[54] = 44; // HBH -> frag
    f[62] = 17; // frag -> UDP
    f[70..72].copy_from_slice(&5353u16.to_be_bytes());
    f[72..74].copy_from_slice(&53u16.to_be_bytes());
    f[74..76].copy_from_slice(&8u16.to_be_bytes());
    let l = parse_frame(&f).unwrap();
    assert_eq!(
        (l.l3, l.l4, l.proto, l.l4_offset, l.payload_offset),
        (L3::Ipv6, L4::Udp, 17, 70, 78)
    );
    assert_eq!((l.src_port, l.dst_port, l.flags), (5353, 53, FLAG_FRAGMENT));
    for n in 0..f.len() {
        assert!(parse_frame(&f[..n]).is_err());
    }
    // Chain of 9 destination-options headers: refused.
    let mut g = vec![0u8; 14 + 40 + 9 * 8 + 8];
    g[12] = 0x86;
    g[13] = 0xdd;
    g[14] = 0x60;
    g[18..20].copy_from_slice(&((9 * 8 + 8) as u16).to_be_bytes());
    g[20] = 60;
    for i in 0..9 {
        g[54 + i * 8] = if i == 8 { 17 } else { 60 };
    }
    g[54 + 72 + 4..54 + 72 + 6].copy_from_slice(&8u16.to_be_bytes());
    assert_eq!(parse_frame(&g), Err(Error::TooManyExtHeaders));
}

#[test]
fn three_vlan_tags_and_unknown_ethertype() {
    let mut f = vec![0u8; 14 + 12 + 20];
    f[12..14].copy_from_slice(&[0x88, 0xa8]);
    f[16..18].copy_from_slice(&[0x81, 0x00]);
    f[20..22].copy_from_slice(&[0x81, 0x00]);
    let l = parse_frame(&f).unwrap();
    assert_eq!(
        (l.vlans.count, l.ethertype, l.l3, l.l3_offset),
        (2, 0x8100, L3::None, 22)
    );
    f[12..14].copy_from_slice(&[0x88, 0xcc]); // LLDP
    let l = parse_frame(&f).unwrap();
    assert_eq!((l.l3, l.ethertype, l.l4), (L3::None, 0x88cc, L4::None));
}

fn full_l4_ok(f: &[u8], l: &Layers) -> bool {
    let seg = l.l4_bytes(f);
    match l.l3 {
        L3::Ipv4 => {
            let s = linerate_wire::flow::as_v4(&l.src_ip).unwrap();
            let d = linerate_wire::flow::as_v4(&l.dst_ip).unwrap();
            checksum::l4_checksum_v4(&s, &d, l.proto, seg) == 0
        }
        _ => checksum::l4_checksum_v6(&l.src_ip, &l.dst_ip, l.proto, seg) == 0,
    }
}

#[test]
fn nat_rewrite_incremental_equals_full_recompute() {
    let mut r = Rng(0x9e37_79b9_7f4a_7c15);
    let mut payload = [0u8; 300];
    for i in 0..3000 {
        let plen = (r.next() % 300) as usize;
        r.fill(&mut payload[..plen]);
        let v6 = i % 3 == 2;
        let ip = if v6 {
            let (mut s, mut d) = ([0u8; 16], [0u8; 16]);
            r.fill(&mut s);
            r.fill(&mut d);
            IpPair::V6 { src: s, dst: d }
        } else {
            IpPair::V4 {
                src: (r.next() as u32).to_be_bytes(),
                dst: (r.next() as u32).to_be_bytes(),
            }
        };
        let mut p = FrameParams::new(ip);
        p.payload = &payload[..plen];
        p.ip_id = r.next() as u16;
        let mut b = [0u8; 512];
        let n = if i % 2 == 0 {
            build_udp(&mut b, &p, r.next() as u16, r.next() as u16).unwrap()
        } else {
            let t = TcpRepr {
                src_port: r.next() as u16,
                dst_port: r.next() as u16,
                seq: r.next() as u32,
                ack: r.next() as u32,
                flags: flags::ACK,
                window: r.next() as u16,
                urgent: 0,
            };
            build_tcp(&mut b, &p, &t).unwrap()
        };
        let f = &mut b[..n];
        let mut l = parse_frame(f).unwrap();
        for _ in 0..4 {
            let which = if r.next() & 1 == 0 {
                Endpoint::Src
            } else {
                Endpoint::Dst
            };
            match r.next() % 3 {
                0 if !v6 => {
                    frame::rewrite_ipv4_addr(f, &mut l, which, (r.next() as u32).to_be_bytes())
                        .unwrap()
                }
                0 | 1 if v6 => {
                    let mut a = [0u8; 16];
                    r.fill(&mut a);
                    frame::rewrite_ipv6_addr(f, &mut l, which, a).unwrap()
                }
                _ => frame::rewrite_port(f, &mut l, which, r.next() as u16).unwrap(),
            }
        }
        assert_eq!(parse_frame(f).unwrap(), l);
        // Incremental result == full recomputation, bit for bit.
        let seg_off = l.l4_offset as usize;
        let (csum_at, is_udp) = if l.l4 == L4::Tcp {
            (16, false)
        } else {
            (6, true)
        };
        let inc = u16::from_be_bytes([f[seg_off + csum_at], f[seg_off + csum_at + 1]]);
        assert!(full_l4_ok(f, &l), "frame {i}");
        let mut copy = f.to_vec();
        let full = {
            let seg = &mut copy[seg_off..l.end as usize];
            if is_udp {
                let mut u = UdpPacket::new_checked(seg).unwrap();
                match ip {
                    IpPair::V4 { .. } => u.fill_checksum_v4(&as4(&l.src_ip), &as4(&l.dst_ip)),
                    IpPair::V6 { .. } => u.fill_checksum_v6(&l.src_ip, &l.dst_ip),
                }
                u.checksum()
            } else {
                let mut t = TcpPacket::new_checked(seg).unwrap();
                match ip {
                    IpPair::V4 { .. } => t.fill_checksum_v4(&as4(&l.src_ip), &as4(&l.dst_ip)),
                    IpPair::V6 { .. } => t.fill_checksum_v6(&l.src_ip, &l.dst_ip),
                }
                t.checksum()
            }
        };
        assert_eq!(inc, full, "frame {i}: incremental L4 checksum differs");
        if !v6 {
            let ip_inc = u16::from_be_bytes([f[24], f[25]]);
            let mut ipc = Ipv4Packet::new_checked(&mut copy[14..]).unwrap();
            ipc.fill_checksum();
            assert_eq!(
                ip_inc,
                ipc.checksum(),
                "frame {i}: incremental IP checksum differs"
            );
        }
        fuzz::frame(f);
        fuzz::flowkey(f);
    }
}

fn as4(a: &[u8; 16]) -> [u8; 4] {
    linerate_wire::flow::as_v4(a).unwrap()
}

#[test]
fn udp_checksum_zero_in_ipv4_is_kept_on_rewrite() {
    let mut f = udp4();
    f[40] = 0;
    f[41] = 0;
    let mut l = parse_frame(&f).unwrap();
    frame::rewrite_ipv4_addr(&mut f, &mut l, Endpoint::Dst, [1, 1, 1, 1]).unwrap();
    frame::rewrite_port(&mut f, &mut l, Endpoint::Src, 9).unwrap();
    assert_eq!(&f[40..42], &[0, 0]);
    assert!(Ipv4Packet::new_checked(&f[14..]).unwrap().verify_checksum());
    assert_eq!(
        frame::rewrite_ipv6_addr(&mut f, &mut l, Endpoint::Dst, [0; 16]),
        Err(Error::BadParam)
    );
}

#[test]
fn flow_key_from_frame_and_reverse_direction() {
    let mut a = [0u8; 128];
    let mut b = [0u8; 128];
    let p = FrameParams::new(IpPair::V6 { src: V6A, dst: V6B });
    let q = FrameParams::new(IpPair::V6 { src: V6B, dst: V6A });
    let na = build_udp(&mut a, &p, 1, 2).unwrap();
    let nb = build_udp(&mut b, &q, 2, 1).unwrap();
    let ka = FlowKey::from_frame(&a[..na]).unwrap();
    let kb = FlowKey::from_frame(&b[..nb]).unwrap();
    assert_eq!(ka.reversed(), kb);
    assert_eq!(ka.symmetric_hash(), kb.symmetric_hash());
    assert!(!ka.is_ipv4());
    assert_eq!(FlowKey::from_frame(&a[..20]), Err(Error::Truncated));
}

#[test]
fn builder_errors() {
    let p = FrameParams::new(IpPair::V4 {
        src: [1; 4],
        dst: [2; 4],
    });
    assert_eq!(
        build_udp(&mut [0u8; 41], &p, 1, 2),
        Err(Error::BufferTooSmall)
    );
    assert_eq!(build_udp(&mut [0u8; 42], &p, 1, 2), Ok(42));
    let mut q = p;
    q.vlans = &[1, 2, 3];
    assert_eq!(build_udp(&mut [0u8; 100], &q, 1, 2), Err(Error::BadParam));
    let big = vec![0u8; 70000];
    let mut q = p;
    q.payload = &big;
    assert_eq!(
        build_udp(&mut vec![0u8; 80000], &q, 1, 2),
        Err(Error::BadParam)
    );
}
