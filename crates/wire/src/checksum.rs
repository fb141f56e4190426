//! The Internet checksum is the one's complement of the one's complement
//! sum of 16-bit big-endian words. Sums here are kept in a `u64` with an
//! end-around carry (2^64 = 1 mod 0xffff), so 8 bytes are added at a time,
//! and folded to 16 bits at the end.

/// One's complement sum of `data` (big-endian 16-bit words, an odd last byte
/// padded with zero) added to `acc`. Not folded: pass the result to [`fold`].
///
/// Sums of several slices can be chained; every slice but the last must have
/// an even length.
#[inline]
pub fn sum(data: &[u8], mut acc: u64) -> u64 {
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let v = u64::from_be_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        let (s, carry) = acc.overflowing_add(v);
        acc = s + carry as u64;
    }
    let rest = chunks.remainder();
    let mut words = rest.chunks_exact(2);
    for w in &mut words {
        acc = add(acc, u16::from_be_bytes([w[0], w[1]]) as u64);
    }
    if let [b] = words.remainder() {
        acc = add(acc, (*b as u64) << 8);
    }
    acc
}

/// One's complement add of two unfolded sums.
#[inline(always)]
pub fn add(a: u64, b: u64) -> u64 {
    let (s, carry) = a.overflowing_add(b);
    s + carry as u64
}

/// Fold an unfolded sum to 16 bits (end-around carry). 0xffff stays 0xffff.
#[inline(always)]
pub fn fold(mut acc: u64) -> u16 {
    acc = (acc & 0xffff_ffff) + (acc >> 32);
    acc = (acc & 0xffff_ffff) + (acc >> 32);
    acc = (acc & 0xffff) + (acc >> 16);
    acc = (acc & 0xffff) + (acc >> 16);
    acc as u16
}

/// Internet checksum (RFC 1071) of `data`: `!fold(sum(data))`.
#[inline]
pub fn checksum(data: &[u8]) -> u16 {
    !fold(sum(data, 0))
}

/// Unfolded sum of the IPv4 pseudo-header (src, dst, zero, protocol, L4 length).
#[inline]
pub fn pseudo_v4(src: &[u8; 4], dst: &[u8; 4], proto: u8, l4_len: u16) -> u64 {
    let s = u32::from_be_bytes(*src) as u64;
    let d = u32::from_be_bytes(*dst) as u64;
    s + d + proto as u64 + l4_len as u64
}

/// Unfolded sum of the IPv6 pseudo-header (src, dst, upper-layer length, next header).
#[inline]
pub fn pseudo_v6(src: &[u8; 16], dst: &[u8; 16], proto: u8, l4_len: u32) -> u64 {
    let acc = sum(src, 0);
    let acc = sum(dst, acc);
    add(acc, proto as u64 + l4_len as u64)
}

/// L4 checksum (UDP/TCP/ICMPv6) over an IPv4 pseudo-header and `l4` (header
/// with its checksum field zeroed, or in place when verifying).
#[inline]
pub fn l4_checksum_v4(src: &[u8; 4], dst: &[u8; 4], proto: u8, l4: &[u8]) -> u16 {
    !fold(sum(l4, pseudo_v4(src, dst, proto, l4.len() as u16)))
}

/// L4 checksum over an IPv6 pseudo-header and `l4`.
#[inline]
pub fn l4_checksum_v6(src: &[u8; 16], dst: &[u8; 16], proto: u8, l4: &[u8]) -> u16 {
    !fold(sum(l4, pseudo_v6(src, dst, proto, l4.len() as u32)))
}

/// Incremental update for one 16-bit field changing from `old` to `new`
/// (RFC 1624 eqn. 3: `HC' = ~(~HC + ~m + m')`).
///
/// Unlike RFC 1141's `HC + m + ~m'`, this gives the same result as a full
/// recomputation, including when the new sum is 0xffff (checksum 0x0000).
#[inline(always)]
pub fn update16(hc: u16, old: u16, new: u16) -> u16 {
    let acc = (!hc) as u64 + (!old) as u64 + new as u64;
    !fold(acc)
}

/// Incremental update for one 32-bit field (e.g. an IPv4 address).
#[inline(always)]
pub fn update32(hc: u16, old: u32, new: u32) -> u16 {
    let acc = (!hc) as u64
        + (!(old >> 16) & 0xffff) as u64
        + (!old & 0xffff) as u64
        + (new >> 16) as u64
        + (new & 0xffff) as u64;
    !fold(acc)
}

/// Incremental update for a field of even length changing from `old` to
/// `new` (e.g. a 16-byte IPv6 address). Lengths must match; if they do not,
/// `hc` is returned unchanged.
#[inline]
pub fn update_bytes(hc: u16, old: &[u8], new: &[u8]) -> u16 {
    if old.len() != new.len() {
        return hc;
    }
    // ~m summed = -(sum m) in one's complement: add the complement of the folded sum.
    let m = fold(sum(old, 0));
    let acc = add((!hc) as u64 + (!m) as u64, sum(new, 0));
    !fold(acc)
}

/// CRC32c (Castagnoli), SCTP's checksum (RFC 9260, appendix A):
/// reflected, all-ones start and final complement. SCTP carries it in its
/// common header as the little-endian bytes of this value.
pub fn crc32c(data: &[u8]) -> u32 {
    let mut c = !0u32;
    for &b in data {
        c = CRC32C[((c ^ b as u32) & 0xff) as usize] ^ (c >> 8);
    }
    !c
}

/// The byte-at-a-time table of the reflected polynomial 0x82f63b78.
const CRC32C: [u32; 256] = {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0x82f6_3b78
            } else {
                c >> 1
            };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_check_values() {
        // The standard check value, and RFC 3720's all-zero 32 bytes.
        assert_eq!(crc32c(b"123456789"), 0xe306_9283);
        assert_eq!(crc32c(&[0u8; 32]), 0x8a91_36aa);
        assert_eq!(crc32c(&[]), 0);
    }
    use crate::testutil::Rng;

    fn naive(data: &[u8]) -> u16 {
        let mut s: u32 = 0;
        let mut i = 0;
        while i + 1 < data.len() {
            s += u16::from_be_bytes([data[i], data[i + 1]]) as u32;
            i += 2;
        }
        if i < data.len() {
            s += (data[i] as u32) << 8;
        }
        while s >> 16 != 0 {
            s = (s & 0xffff) + (s >> 16);
        }
        !(s as u16)
    }

    #[test]
    fn rfc1071_example() {
        // RFC 1071 section 3: bytes 00 01 f2 03 f4 f5 f6 f7 sum to 0xddf2.
        let d = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(sum(&d, 0)), 0xddf2);
        assert_eq!(checksum(&d), !0xddf2);
    }

    #[test]
    fn matches_naive_all_lengths() {
        let mut r = Rng(7);
        let mut buf = [0u8; 300];
        for len in 0..300 {
            r.fill(&mut buf[..len]);
            assert_eq!(checksum(&buf[..len]), naive(&buf[..len]), "len {len}");
        }
        // all 0xff: worst case for carries
        let ones = [0xffu8; 1501];
        assert_eq!(checksum(&ones), naive(&ones));
    }

    #[test]
    fn known_ipv4_header() {
        // Header from Wikipedia's IPv4 checksum example: checksum b861.
        let mut h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(checksum(&h), 0xb861);
        h[10] = 0xb8;
        h[11] = 0x61;
        assert_eq!(checksum(&h), 0);
    }

    #[test]
    fn rfc1624_corner_case() {
        // RFC 1624 section 4: sum of other words 0xcd7a, field 0x5555 -> 0x3285.
        let hc = !fold(0xcd7a + 0x5555);
        assert_eq!(hc, 0xdd2f);
        let full = !fold(0xcd7a + 0x3285);
        assert_eq!(full, 0x0000);
        // RFC 1141 (eqn 2) gives the wrong 0xffff here ...
        let eqn2 = fold(hc as u64 + 0x5555 + (!0x3285u16) as u64);
        assert_eq!(eqn2, 0xffff);
        // ... eqn 3 agrees with the full recomputation.
        assert_eq!(update16(hc, 0x5555, 0x3285), 0x0000);
        assert_eq!(update32(hc, 0x0000_5555, 0x0000_3285), 0x0000);
        assert_eq!(update_bytes(hc, &[0x55, 0x55], &[0x32, 0x85]), 0x0000);
    }

    #[test]
    fn incremental_matches_full_random() {
        let mut r = Rng(0x1234_5678);
        let mut buf = [0u8; 64];
        for _ in 0..20000 {
            let len = 4 + 2 * r.below(30) as usize;
            r.fill(&mut buf[..len]);
            let hc = checksum(&buf[..len]);
            let off = 2 * r.below((len / 2) as u64) as usize;
            let old = u16::from_be_bytes([buf[off], buf[off + 1]]);
            let new = r.next() as u16;
            buf[off..off + 2].copy_from_slice(&new.to_be_bytes());
            assert_eq!(update16(hc, old, new), checksum(&buf[..len]));
            // 32-bit field
            if len >= 8 {
                let hc = checksum(&buf[..len]);
                let off = 2 * r.below(((len - 4) / 2) as u64) as usize;
                let old = u32::from_be_bytes(buf[off..off + 4].try_into().unwrap());
                let new = r.next() as u32;
                buf[off..off + 4].copy_from_slice(&new.to_be_bytes());
                assert_eq!(update32(hc, old, new), checksum(&buf[..len]));
            }
            // byte range (like an IPv6 address)
            if len >= 20 {
                let hc = checksum(&buf[..len]);
                let mut old = [0u8; 16];
                old.copy_from_slice(&buf[2..18]);
                let mut new = [0u8; 16];
                r.fill(&mut new);
                buf[2..18].copy_from_slice(&new);
                assert_eq!(update_bytes(hc, &old, &new), checksum(&buf[..len]));
            }
        }
    }
}
