//! Toeplitz hash as specified by Microsoft's RSS and implemented by NICs.
//! Input layouts (all big-endian, as on the wire): IPv4 `src, dst` (8 bytes)
//! or `src, dst, src_port, dst_port` (12 bytes); IPv6 likewise with 16-byte
//! addresses (32 or 36 bytes).

use crate::flow::{as_v4, FlowKey};
use crate::ipv4::proto;

/// Microsoft's default 40-byte RSS key (also the default of many NIC drivers).
pub const MICROSOFT_KEY: [u8; 40] = [
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0,
    0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c,
    0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
];

/// Symmetric key: 0x6d5a repeated. Its 16-bit period makes the hash of
/// (src, dst, sport, dport) equal to that of (dst, src, dport, sport).
pub const SYMMETRIC_KEY: [u8; 40] = {
    let mut k = [0u8; 40];
    let mut i = 0;
    while i < 40 {
        k[i] = if i % 2 == 0 { 0x6d } else { 0x5a };
        i += 1;
    }
    k
};

/// Toeplitz hash of `input` with `key`. The key should be at least
/// `input.len() + 4` bytes long; missing key bytes count as zero.
#[inline]
pub fn toeplitz(key: &[u8], input: &[u8]) -> u32 {
    let kb = |i: usize| key.get(i).copied().unwrap_or(0) as u64;
    let mut win: u64 = 0;
    for i in 0..8 {
        win = (win << 8) | kb(i);
    }
    let mut h = 0u32;
    for (i, &byte) in input.iter().enumerate() {
        // The 32 key bits aligned with input bit b are bits b..b+32 of `win`.
        for b in 0..8 {
            let mask = 0u32.wrapping_sub(((byte >> (7 - b)) & 1) as u32);
            h ^= ((win >> (32 - b)) as u32) & mask;
        }
        win = (win << 8) | kb(i + 8);
    }
    h
}

/// RSS hash of an IPv4 packet: 2-tuple when `ports` is `None`, else 4-tuple.
pub fn hash_ipv4(key: &[u8], src: [u8; 4], dst: [u8; 4], ports: Option<(u16, u16)>) -> u32 {
    let mut b = [0u8; 12];
    b[..4].copy_from_slice(&src);
    b[4..8].copy_from_slice(&dst);
    match ports {
        Some((s, d)) => {
            b[8..10].copy_from_slice(&s.to_be_bytes());
            b[10..12].copy_from_slice(&d.to_be_bytes());
            toeplitz(key, &b)
        }
        None => toeplitz(key, &b[..8]),
    }
}

/// RSS hash of an IPv6 packet: 2-tuple when `ports` is `None`, else 4-tuple.
pub fn hash_ipv6(key: &[u8], src: [u8; 16], dst: [u8; 16], ports: Option<(u16, u16)>) -> u32 {
    let mut b = [0u8; 36];
    b[..16].copy_from_slice(&src);
    b[16..32].copy_from_slice(&dst);
    match ports {
        Some((s, d)) => {
            b[32..34].copy_from_slice(&s.to_be_bytes());
            b[34..36].copy_from_slice(&d.to_be_bytes());
            toeplitz(key, &b)
        }
        None => toeplitz(key, &b[..32]),
    }
}

/// RSS hash of a flow as a NIC computes it: 4-tuple for TCP/UDP, 2-tuple
/// otherwise; IPv4 layout when both addresses are v4-mapped.
pub fn hash_flow(key: &[u8], k: &FlowKey) -> u32 {
    let ports = if k.proto == proto::TCP || k.proto == proto::UDP {
        Some((k.src_port, k.dst_port))
    } else {
        None
    };
    match (as_v4(&k.src_ip), as_v4(&k.dst_ip)) {
        (Some(s), Some(d)) => hash_ipv4(key, s, d, ports),
        _ => hash_ipv6(key, k.src_ip, k.dst_ip, ports),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::Rng;

    // "Verifying the RSS Hash Calculation" (Microsoft), also in the Intel
    // 82599 datasheet 7.1.2.8.3: (dst, dport, src, sport, ip-only, with ports).
    type V4Row = ([u8; 4], u16, [u8; 4], u16, u32, u32);
    const V4: [V4Row; 5] = [
        (
            [161, 142, 100, 80],
            1766,
            [66, 9, 149, 187],
            2794,
            0x323e8fc2,
            0x51ccc178,
        ),
        (
            [65, 69, 140, 83],
            4739,
            [199, 92, 111, 2],
            14230,
            0xd718262a,
            0xc626b0ea,
        ),
        (
            [12, 22, 207, 184],
            38024,
            [24, 19, 198, 95],
            12898,
            0xd2d0a5de,
            0x5c2b394a,
        ),
        (
            [209, 142, 163, 6],
            2217,
            [38, 27, 205, 30],
            48228,
            0x82989176,
            0xafc7327f,
        ),
        (
            [202, 188, 127, 2],
            1303,
            [153, 39, 163, 191],
            44251,
            0x5d1809c5,
            0x10e828a2,
        ),
    ];

    fn v6(s: &str) -> [u8; 16] {
        s.parse::<std::net::Ipv6Addr>().unwrap().octets()
    }

    #[test]
    fn microsoft_vectors_ipv4() {
        for (dst, dp, src, sp, h2, h4) in V4 {
            assert_eq!(hash_ipv4(&MICROSOFT_KEY, src, dst, None), h2);
            assert_eq!(hash_ipv4(&MICROSOFT_KEY, src, dst, Some((sp, dp))), h4);
            let k = FlowKey::v4(src, dst, sp, dp, 6);
            assert_eq!(hash_flow(&MICROSOFT_KEY, &k), h4);
            let k = FlowKey::v4(src, dst, sp, dp, 1);
            assert_eq!(hash_flow(&MICROSOFT_KEY, &k), h2);
        }
    }

    #[test]
    fn microsoft_vectors_ipv6() {
        let t = [
            (
                "3ffe:2501:200:3::1",
                1766,
                "3ffe:2501:200:1fff::7",
                2794,
                0x2cc18cd5,
                0x40207d3d,
            ),
            (
                "ff02::1",
                4739,
                "3ffe:501:8::260:97ff:fe40:efab",
                14230,
                0x0f0c461c,
                0xdde51bbf,
            ),
            (
                "fe80::200:f8ff:fe21:67cf",
                38024,
                "3ffe:1900:4545:3:200:f8ff:fe21:67cf",
                44251,
                0x4b61e985,
                0x02d1feef,
            ),
        ];
        for (dst, dp, src, sp, h2, h4) in t {
            let (s, d) = (v6(src), v6(dst));
            assert_eq!(hash_ipv6(&MICROSOFT_KEY, s, d, None), h2);
            assert_eq!(hash_ipv6(&MICROSOFT_KEY, s, d, Some((sp, dp))), h4);
            let k = FlowKey {
                src_ip: s,
                dst_ip: d,
                src_port: sp,
                dst_port: dp,
                proto: 17,
            };
            assert_eq!(hash_flow(&MICROSOFT_KEY, &k), h4);
        }
    }

    #[test]
    fn symmetric_key_is_symmetric() {
        assert_eq!(&SYMMETRIC_KEY[..4], &[0x6d, 0x5a, 0x6d, 0x5a]);
        let mut r = Rng(3);
        for _ in 0..2000 {
            let mut s = [0u8; 16];
            let mut d = [0u8; 16];
            r.fill(&mut s);
            r.fill(&mut d);
            let (sp, dp) = (r.next() as u16, r.next() as u16);
            let (s4, d4) = ([s[0], s[1], s[2], s[3]], [d[0], d[1], d[2], d[3]]);
            let k = &SYMMETRIC_KEY;
            assert_eq!(
                hash_ipv4(k, s4, d4, Some((sp, dp))),
                hash_ipv4(k, d4, s4, Some((dp, sp)))
            );
            assert_eq!(hash_ipv4(k, s4, d4, None), hash_ipv4(k, d4, s4, None));
            assert_eq!(
                hash_ipv6(k, s, d, Some((sp, dp))),
                hash_ipv6(k, d, s, Some((dp, sp)))
            );
            let f = FlowKey {
                src_ip: s,
                dst_ip: d,
                src_port: sp,
                dst_port: dp,
                proto: 6,
            };
            assert_eq!(hash_flow(k, &f), hash_flow(k, &f.reversed()));
            // the Microsoft key is not symmetric
            if s4 != d4 {
                assert_ne!(
                    hash_ipv4(&MICROSOFT_KEY, s4, d4, Some((sp, dp))),
                    hash_ipv4(&MICROSOFT_KEY, d4, s4, Some((dp, sp)))
                );
            }
        }
    }

    #[test]
    fn short_key_does_not_panic() {
        assert_eq!(toeplitz(&[], &[1, 2, 3]), 0);
        let _ = toeplitz(&[0xff; 3], &[0xff; 64]);
    }
}
