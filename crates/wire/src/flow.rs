//! A [`FlowKey`] holds both address families in 16 bytes: IPv4 addresses
//! are stored v4-mapped (`::ffff:a.b.c.d`, RFC 4291 2.5.5.2). IPv6 packets
//! that carry v4-mapped addresses on the wire (which RFC 4038 says must
//! not happen) are therefore seen as IPv4 flows.

/// The 5-tuple of a packet.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowKey {
    pub src_ip: [u8; 16],
    pub dst_ip: [u8; 16],
    pub src_port: u16,
    pub dst_port: u16,
    pub proto: u8,
}

/// `::ffff:a.b.c.d`.
#[inline(always)]
pub const fn v4_mapped(a: [u8; 4]) -> [u8; 16] {
    [
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, a[0], a[1], a[2], a[3],
    ]
}

/// The IPv4 address inside a v4-mapped address.
#[inline(always)]
pub fn as_v4(a: &[u8; 16]) -> Option<[u8; 4]> {
    if a[..12] == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff] {
        Some([a[12], a[13], a[14], a[15]])
    } else {
        None
    }
}

#[inline(always)]
fn mum(a: u64, b: u64) -> u64 {
    let r = (a as u128).wrapping_mul(b as u128);
    (r as u64) ^ ((r >> 64) as u64)
}

const K: [u64; 6] = [
    0xa076_1d64_78bd_642f,
    0xe703_7ed1_a0b4_28db,
    0x8ebc_6af0_9c88_c6e3,
    0x5899_65cc_7537_4cc3,
    0x1d8e_4e27_c47d_124f,
    0x9e37_79b9_7f4a_7c15,
];

impl FlowKey {
    /// An IPv4 5-tuple.
    pub fn v4(src: [u8; 4], dst: [u8; 4], src_port: u16, dst_port: u16, proto: u8) -> FlowKey {
        FlowKey {
            src_ip: v4_mapped(src),
            dst_ip: v4_mapped(dst),
            src_port,
            dst_port,
            proto,
        }
    }

    /// True if both addresses are v4-mapped.
    pub fn is_ipv4(&self) -> bool {
        as_v4(&self.src_ip).is_some() && as_v4(&self.dst_ip).is_some()
    }

    /// The key of the reverse direction.
    pub fn reversed(&self) -> FlowKey {
        FlowKey {
            src_ip: self.dst_ip,
            dst_ip: self.src_ip,
            src_port: self.dst_port,
            dst_port: self.src_port,
            proto: self.proto,
        }
    }

    /// The same key for both directions: the smaller endpoint (address,
    /// port) first. For bidirectional flow tables.
    pub fn canonical(&self) -> FlowKey {
        if (self.src_ip, self.src_port) <= (self.dst_ip, self.dst_port) {
            *self
        } else {
            self.reversed()
        }
    }

    /// Direction-independent 64-bit hash: `symmetric_hash(a->b) ==
    /// symmetric_hash(b->a)`. Orders the endpoints, then mixes with three
    /// 64x64->128 multiply-folds (wyhash style) and a final avalanche.
    /// A few ns, no tables.
    #[inline]
    pub fn symmetric_hash(&self) -> u64 {
        let a = u128::from_le_bytes(self.src_ip);
        let b = u128::from_le_bytes(self.dst_ip);
        let (pa, pb) = (self.src_port, self.dst_port);
        let swap = (b, pb) < (a, pa);
        let (lo, hi) = if swap { (b, a) } else { (a, b) };
        let (plo, phi) = if swap { (pb, pa) } else { (pa, pb) };
        let h1 = mum(lo as u64 ^ K[0], (lo >> 64) as u64 ^ K[1]);
        let h2 = mum(hi as u64 ^ K[2], (hi >> 64) as u64 ^ K[3]);
        let tail = ((plo as u64) << 32) | ((phi as u64) << 16) | self.proto as u64;
        let mut h = mum(h1 ^ tail ^ K[4], h2 ^ K[5]);
        // Final avalanche (murmur3 fmix64 tail) so every bit window is usable.
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^ (h >> 33)
    }

    /// [`FlowKey::symmetric_hash`] folded to 32 bits.
    #[inline]
    pub fn symmetric_hash32(&self) -> u32 {
        let h = self.symmetric_hash();
        (h ^ (h >> 32)) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::Rng;
    use std::vec;

    fn random_key(r: &mut Rng) -> FlowKey {
        let mut k = FlowKey::default();
        if r.next() & 1 == 0 {
            let mut a = [0u8; 4];
            r.fill(&mut a);
            k.src_ip = v4_mapped(a);
            r.fill(&mut a);
            k.dst_ip = v4_mapped(a);
        } else {
            r.fill(&mut k.src_ip);
            r.fill(&mut k.dst_ip);
        }
        k.src_port = r.next() as u16;
        k.dst_port = r.next() as u16;
        k.proto = [6u8, 17, 1][r.below(3) as usize];
        k
    }

    #[test]
    fn symmetric() {
        let mut r = Rng(99);
        for _ in 0..10000 {
            let k = random_key(&mut r);
            assert_eq!(k.symmetric_hash(), k.reversed().symmetric_hash());
            assert_eq!(k.canonical(), k.reversed().canonical());
        }
        // same address, different ports
        let k = FlowKey::v4([1, 2, 3, 4], [1, 2, 3, 4], 5, 6, 17);
        assert_eq!(k.symmetric_hash(), k.reversed().symmetric_hash());
        assert!(k.is_ipv4());
        assert_eq!(as_v4(&k.src_ip), Some([1, 2, 3, 4]));
    }

    #[test]
    fn distribution() {
        // Sequential-looking flows (one /24, ports counting up) spread evenly
        // over 64 buckets for every bit window of the hash.
        let n = 64 * 1000;
        for shift in [0u32, 6, 16, 26, 32, 58] {
            let mut buckets = vec![0u32; 64];
            for i in 0..n as u32 {
                let k = FlowKey::v4(
                    [10, 0, 0, (i % 256) as u8],
                    [192, 168, 1, 1],
                    1024 + (i / 256) as u16,
                    80,
                    6,
                );
                buckets[((k.symmetric_hash() >> shift) & 63) as usize] += 1;
            }
            let exp = (n / 64) as f64;
            let chi2: f64 = buckets
                .iter()
                .map(|&b| (b as f64 - exp).powi(2) / exp)
                .sum();
            // 63 degrees of freedom: p=0.001 critical value is ~103.
            assert!(chi2 < 103.0, "shift {shift}: chi2 {chi2}");
        }
        // Single-bit changes flip about half of the bits (avalanche).
        let mut r = Rng(5);
        let mut total = 0u32;
        let trials = 2000;
        for _ in 0..trials {
            let k = random_key(&mut r);
            let mut k2 = k;
            k2.src_port ^= 1 << r.below(16);
            total += (k.symmetric_hash() ^ k2.symmetric_hash()).count_ones();
        }
        let avg = total as f64 / trials as f64;
        assert!((28.0..36.0).contains(&avg), "avalanche {avg}");
    }
}
