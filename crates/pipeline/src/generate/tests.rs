use super::*;
use linerate_wire::frame::{parse_frame, L3, L4};
use linerate_wire::ipv4::Ipv4Packet;
use linerate_wire::{icmp::IcmpPacket, tcp::TcpPacket, udp::UdpPacket};

/// Every checksum in `f` is valid (IPv4 header, UDP/TCP/ICMP).
pub(crate) fn verify(f: &[u8]) -> Layers {
    let l = parse_frame(f).unwrap();
    let l4b = l.l4_bytes(f);
    let v4 = |a: [u8; 16]| -> [u8; 4] { a[12..].try_into().unwrap() };
    match l.l3 {
        L3::Ipv4 => {
            let ip = Ipv4Packet::new_checked(l.l3_bytes(f)).unwrap();
            assert!(ip.verify_checksum(), "ip checksum");
            let (s, d) = (v4(l.src_ip), v4(l.dst_ip));
            match l.l4 {
                L4::Udp => {
                    let u = UdpPacket::new_checked(l4b).unwrap();
                    assert_ne!(u.checksum(), 0, "udp checksum must be present");
                    assert!(u.verify_checksum_v4(&s, &d), "udp checksum");
                }
                L4::Tcp => assert!(TcpPacket::new_checked(l4b)
                    .unwrap()
                    .verify_checksum_v4(&s, &d)),
                L4::Icmpv4 => assert!(IcmpPacket::new_checked(l4b).unwrap().verify_checksum_v4()),
                o => panic!("unexpected {o:?}"),
            }
        }
        L3::Ipv6 => {
            let (s, d) = (l.src_ip, l.dst_ip);
            match l.l4 {
                L4::Udp => assert!(UdpPacket::new_checked(l4b)
                    .unwrap()
                    .verify_checksum_v6(&s, &d)),
                L4::Tcp => assert!(TcpPacket::new_checked(l4b)
                    .unwrap()
                    .verify_checksum_v6(&s, &d)),
                L4::Icmpv6 => {
                    assert!(IcmpPacket::new_checked(l4b)
                        .unwrap()
                        .verify_checksum_v6(&s, &d))
                }
                o => panic!("unexpected {o:?}"),
            }
        }
        o => panic!("unexpected {o:?}"),
    }
    l
}

use linerate_wire::Layers;

fn stream(v6: bool, l4: L4Spec, vlans: Vec<u16>) -> StreamSpec {
    let mut s = if v6 {
        StreamSpec::udp("s", "fd00::1", "fd00::2", 1, 2)
    } else {
        StreamSpec::udp("s", "10.0.0.1", "10.0.0.2", 1, 2)
    };
    s.template.l4 = l4;
    s.template.vlans = vlans;
    s.template.payload = "a5c3".into();
    s.size = SizeSpec::List {
        list: vec![
            WeightedSize {
                size: 127,
                weight: 1,
            },
            WeightedSize {
                size: 200,
                weight: 2,
            },
        ],
    };
    s
}

fn f(field: FieldName, op: FieldOp) -> FieldSpec {
    FieldSpec { field, op }
}

fn all_fields(tcp: bool, v6: bool, vlan: bool, l4ports: bool) -> Vec<FieldSpec> {
    let mut v = vec![
        f(
            FieldName::IpSrc,
            FieldOp::Random {
                min: Val::Int(0),
                max: if v6 {
                    Val::Str("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff".into())
                } else {
                    Val::Str("255.255.255.255".into())
                },
                seed: Some(9),
            },
        ),
        f(
            FieldName::IpDst,
            FieldOp::Inc {
                start: None,
                step: 0x1234_5677,
                count: 1000,
            },
        ),
        f(
            FieldName::Ttl,
            FieldOp::Range {
                min: Val::Int(1),
                max: Val::Int(255),
                step: 7,
            },
        ),
        f(
            FieldName::Dscp,
            FieldOp::List {
                values: vec![Val::Int(0), Val::Int(46), Val::Int(63)],
            },
        ),
        f(
            FieldName::EthSrc,
            FieldOp::Dec {
                start: Some(Val::Str("02:00:00:00:00:05".into())),
                step: 3,
                count: 5,
            },
        ),
        f(
            FieldName::EthDst,
            FieldOp::Random {
                min: Val::Int(0),
                max: Val::Int((1 << 48) - 1),
                seed: None,
            },
        ),
    ];
    if l4ports {
        v.push(f(
            FieldName::Sport,
            FieldOp::Random {
                min: Val::Int(0),
                max: Val::Int(65535),
                seed: Some(3),
            },
        ));
        v.push(f(
            FieldName::Dport,
            FieldOp::Dec {
                start: Some(Val::Int(3)),
                step: 1,
                count: 10,
            },
        ));
    }
    if tcp {
        v.push(f(
            FieldName::TcpFlags,
            FieldOp::List {
                values: vec![
                    Val::Int(0x002),
                    Val::Int(0x012),
                    Val::Int(0x1ff),
                    Val::Int(0),
                ],
            },
        ));
    }
    if vlan {
        v.push(f(
            FieldName::Vlan,
            FieldOp::Range {
                min: Val::Int(1),
                max: Val::Int(4095),
                step: 1000,
            },
        ));
    }
    v
}

#[test]
fn every_packet_has_valid_checksums_all_protocols() {
    let l4s = [
        L4Spec::Udp { sport: 1, dport: 2 },
        L4Spec::Tcp {
            sport: 1,
            dport: 2,
            flags: 0x010,
        },
        L4Spec::Icmp {
            ty: None,
            code: 0,
            id: 7,
        },
    ];
    for v6 in [false, true] {
        for l4 in &l4s {
            for vlans in [vec![], vec![0x2064], vec![0x0064, 0xe0c8]] {
                for sig_every in [0u32, 1, 3] {
                    let tcp = matches!(l4, L4Spec::Tcp { .. });
                    let ports = !matches!(l4, L4Spec::Icmp { .. });
                    let mut s = stream(v6, l4.clone(), vlans.clone());
                    s.fields = all_fields(tcp, v6, !vlans.is_empty(), ports);
                    s.signature = SigSpec {
                        enabled: sig_every > 0,
                        sample_every: sig_every.max(1),
                    };
                    s.id = 42;
                    let mut p = Profile::single(s);
                    p.count = Some(3000);
                    let mut g = Generator::new(&p).unwrap();
                    let mut seq = 0u64;
                    let mut now = 1000;
                    while !g.done_at(now) {
                        let n = g.next_batch(now, 64);
                        g.stamp(0, now + 5);
                        for pk in &g.batch().pkts()[..n] {
                            let fr = pk.bytes();
                            let l = verify(fr);
                            assert_eq!(l.vlans.as_slice().len(), vlans.len());
                            assert!(fr.len() == 127 || fr.len() == 200);
                            if sig_every > 0 {
                                let got = signature::read(l.payload(fr));
                                if seq.is_multiple_of(sig_every as u64) {
                                    let sg = got.expect("sampled packet has a signature");
                                    assert_eq!(
                                        (sg.stream, sg.seq, sg.tx_time()),
                                        (42, seq, Some(now + 5))
                                    );
                                } else {
                                    assert_eq!(got, None);
                                    assert_eq!(&l.payload(fr)[..24], &[0u8; 24]);
                                }
                                // pattern continues after the signature block
                                assert_eq!(l.payload(fr)[24], 0xa5);
                            } else {
                                assert_eq!(&l.payload(fr)[..2], &[0xa5, 0xc3]);
                            }
                            seq += 1;
                        }
                        now += 1000;
                    }
                    assert_eq!(seq, 3000, "v6 {v6} {l4:?} {vlans:?}");
                    // a re-stamp (retry after a full ring) keeps checksums valid
                    g.stamp(0, 99);
                    for pk in g.batch().pkts() {
                        verify(pk.bytes());
                    }
                }
            }
        }
    }
}

#[test]
fn exact_field_values_in_frames() {
    let mut s = stream(false, L4Spec::Udp { sport: 1, dport: 2 }, vec![0x2005]);
    s.size = SizeSpec::Fixed(60);
    s.fields = vec![
        f(
            FieldName::IpSrc,
            FieldOp::Inc {
                start: Some(Val::Str("10.0.0.254".into())),
                step: 1,
                count: 4,
            },
        ),
        f(
            FieldName::Dport,
            FieldOp::List {
                values: vec![Val::Int(80), Val::Int(443)],
            },
        ),
        f(
            FieldName::Vlan,
            FieldOp::Range {
                min: Val::Int(10),
                max: Val::Int(12),
                step: 1,
            },
        ),
        f(
            FieldName::Dscp,
            FieldOp::Inc {
                start: Some(Val::Int(62)),
                step: 1,
                count: 3,
            },
        ),
        f(
            FieldName::Ttl,
            FieldOp::Dec {
                start: Some(Val::Int(1)),
                step: 1,
                count: 3,
            },
        ),
    ];
    let mut g = Generator::new(&Profile::single(s)).unwrap();
    assert_eq!(g.next_batch(0, 6), 6);
    let b = g.batch();
    let want_src = [
        "10.0.0.254",
        "10.0.0.255",
        "10.0.1.0",
        "10.0.1.1",
        "10.0.0.254",
        "10.0.0.255",
    ];
    for (i, p) in b.pkts().iter().enumerate() {
        let fr = p.bytes();
        let l = verify(fr);
        let src: [u8; 4] = l.src_ip[12..].try_into().unwrap();
        assert_eq!(std::net::Ipv4Addr::from(src).to_string(), want_src[i]);
        assert_eq!(l.dst_port, [80, 443][i % 2]);
        let tci = l.vlans.as_slice()[0].tci;
        assert_eq!(tci & 0xfff, [10, 11, 12][i % 3]);
        assert_eq!(tci >> 13, 1, "PCP kept");
        let ip = Ipv4Packet::new_checked(l.l3_bytes(fr)).unwrap();
        assert_eq!(ip.dscp(), [62, 63, 0][i % 3]);
        assert_eq!(ip.ttl(), [1, 0, 255][i % 3]);
    }
}

#[test]
fn imix_cycle_and_rates_per_stream() {
    let mut a = StreamSpec::udp("a", "10.0.0.1", "10.0.0.2", 1, 2);
    a.size = SizeSpec::Preset("simple".into());
    a.rate = RateSpec {
        pps: Some(1e6),
        ..Default::default()
    };
    let mut b6 = StreamSpec::udp("b", "fd00::1", "fd00::2", 1, 2);
    b6.size = SizeSpec::Fixed(100);
    b6.rate = RateSpec {
        pps: Some(250_000.0),
        ..Default::default()
    };
    let p = Profile {
        streams: vec![a, b6],
        duration_s: Some(0.01),
        count: None,
    };
    let mut g = Generator::new(&p).unwrap();
    let mut now = 0u64;
    let mut sizes = vec![];
    while !g.done_at(now) {
        let n = g.next_batch(now, 256);
        g.stamp(0, now);
        g.sent(0, n, now);
        let b = g.batch();
        sizes.extend(b.pkts().iter().filter(|p| p.len() != 100).map(|p| p.len()));
        now += 500;
    }
    let st = g.stats();
    assert_eq!(st[0].sent_pkts, 10_000);
    assert_eq!(st[1].sent_pkts, 2_500);
    // smooth weighted round robin: 7:4:1 over every 12 packets
    for c in sizes.chunks_exact(12) {
        let n = |s| c.iter().filter(|x| **x == s).count();
        assert_eq!((n(60), n(590), n(1514)), (7, 4, 1));
    }
    assert_eq!(
        &sizes[..12],
        &[60, 590, 60, 60, 590, 60, 1514, 60, 590, 60, 590, 60]
    );
    let r = st[0].departures.achieved_pps().unwrap();
    assert!((r / 1e6 - 1.0).abs() < 0.01, "{r}");
}

#[test]
fn errors_name_stream_and_field() {
    let mut s = StreamSpec::udp("a", "10.0.0.1", "10.0.0.2", 1, 2);
    s.fields = vec![f(
        FieldName::IpSrc,
        FieldOp::Range {
            min: Val::Str("10.0.0.9".into()),
            max: Val::Str("10.0.0.1".into()),
            step: 1,
        },
    )];
    let e = Generator::new(&Profile::single(s.clone())).err().unwrap();
    assert_eq!(e.0, "stream 'a': field 'ip_src': range min > max");
    s.fields = vec![f(
        FieldName::TcpFlags,
        FieldOp::List {
            values: vec![Val::Int(1)],
        },
    )];
    assert_eq!(
        Generator::new(&Profile::single(s.clone())).err().unwrap().0,
        "stream 'a': field 'tcp_flags': needs a TCP template"
    );
    s.fields = vec![];
    s.signature.enabled = true;
    let e = Generator::new(&Profile::single(s.clone())).err().unwrap();
    assert_eq!(
        e.0,
        "stream 'a': size 60: too small for the headers and the signature (66 bytes)"
    );
    s.size = SizeSpec::Fixed(66);
    assert!(Generator::new(&Profile::single(s.clone())).is_ok());
    s.size = SizeSpec::Fixed(9001);
    assert!(Generator::new(&Profile::single(s.clone()))
        .err()
        .unwrap()
        .0
        .contains("60..=9000"));
    s.size = SizeSpec::Preset("trimodal".into());
    assert!(Generator::new(&Profile::single(s.clone()))
        .err()
        .unwrap()
        .0
        .contains("unknown preset"));
    s.size = SizeSpec::Fixed(66);
    s.template.l3 = L3Spec::Ipv4(IpSpec {
        src: "10.0.0.300".into(),
        dst: "10.0.0.1".into(),
        ttl: 1,
        dscp: 0,
    });
    assert_eq!(
        Generator::new(&Profile::single(s)).err().unwrap().0,
        "stream 'a': l3 src: bad IPv4 address '10.0.0.300'"
    );
    let e = Profile::from_toml_str("streams = 3").err().unwrap();
    assert!(e.0.starts_with("profile: ") && !e.0.contains('\n'), "{e}");
}
