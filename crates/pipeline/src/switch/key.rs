//! The packet key: every matchable field of a frame packed into eighteen
//! 64-bit words (eight of the packet, the 64 bytes the caches key on; six
//! of pipeline state; four of IPv6 neighbour discovery), plus
//! masks of the same shape, so a rule matches a packet when
//! `(key & mask) == value`.
//!
//! Layout (bit 63 is the most significant bit of a word):
//!
//! | word | bits 63..48 | 47..32 | 31..16 | 15..8 | 7..0 |
//! |---|---|---|---|---|---|
//! | 0 | in_port (63..32) | | dl_type | vlan_tci (15..0) | |
//! | 1 | dl_dst (63..16) | | | nw_proto | nw_tos |
//! | 2 | dl_src (63..16) | | | nw_ttl | 0 |
//! | 3 | tcp_flags (63..52, 12 bits), tp_src / icmp_type (51..36), tp_dst / icmp_code (35..20), ipv6_label (19..0) |||||
//! | 4, 5 | source IP, 16 bytes big-endian (IPv4 and ARP spa as `::ffff:a.b.c.d`; ARP's sha in word 4's bits 63..16) |
//! | 6, 7 | destination IP (ARP tpa likewise; ARP's tha in word 6's bits 63..16) |
//! | 8..11 | registers: `reg0` (63..32) and `reg1` (31..0) in word 8, `reg2`/`reg3` in 9, ... |
//! | 12 | `metadata` (64 bits) |
//! | 13 | `tun_id` (64 bits) |
//! | 14, 15 | `nd_target`, 16 bytes big-endian (neighbour solicitations and advertisements only) |
//! | 16 | `nd_sll` (63..16): the first source link-layer address option (matched in solicitations) |
//! | 17 | `nd_tll` (63..16): the first target link-layer address option (matched in advertisements) |
//!
//! Words 0..7 ([`PKT_WORDS`]) are the packet: what [`Key::extract`] fills
//! (with the ND words below) and the exact-match caches key on. Words 8..13 are the pipeline's state
//! (registers, metadata, tunnel id): zero when a packet enters table 0
//! (linerate has no tunnel ports, so every frame arrives with the tunnel id
//! Open vSwitch gives a frame from a port that is not a tunnel: 0), written by
//! `load`, `move`, `set_field`, `write_metadata` and `set_tunnel` as it goes
//! through the tables, and matched by later tables. A classifier subtable hashes and
//! stores only the words its mask uses, so the extra words cost a rule that
//! does not match them nothing.
//!
//! Words 14..17 ([`ND_WORDS`]) are packet fields too, but of one rare kind
//! of frame: ICMPv6 neighbour solicitations and advertisements (type 135 or
//! 136, code 0), parsed as Open vSwitch parses them (the target, then the
//! first source and target link-layer address options; a second option of
//! either kind makes all three 0). They are zero for every other frame.
//! Then, as in Open vSwitch, they are the flow's: a rewrite of the ICMPv6
//! type or code leaves them, and only `set_field` on them writes them.
//! They stay out of the caches' keys, which are the eight packet words
//! (a ninth word would cost every packet): a rule that matches them runs
//! the multi-table path, where no exact entry is made from the live walk
//! of an ND frame ([`Key::is_nd`]) and a walk whose lookups read these
//! words never becomes a megaflow. (An ND frame may still replay a
//! megaflow, and be stored as an exact entry from it: that walk read no
//! ND word.)
//!
//! `vlan_tci` follows Open vSwitch: `0x1000` (the CFI bit position) is set
//! when the frame has an 802.1Q tag (the outer one), so `0` means "no tag".
//! `dl_type` is the EtherType after the VLAN tags. `nw_tos` is the whole
//! IPv4 TOS / IPv6 traffic class byte (DSCP << 2 | ECN); `nw_ttl` the TTL /
//! hop limit. For ARP, `nw_proto` is the low byte of the opcode (as OVS).
//! ICMP type and code live in the port slots (as OVS's `tp_src`/`tp_dst`).
//!
//! Frames whose upper layers are truncated or malformed still get a key:
//! the layers that parsed are filled and the rest stay zero (OVS does the
//! same), so L2 rules still apply to them. Frames shorter than an Ethernet
//! header give a key with only `in_port` set.

use linerate_wire::frame::{parse_frame, L3, L4};
use linerate_wire::{ethernet, flow::v4_mapped};

/// Number of 64-bit words in a [`Key`].
pub const WORDS: usize = 18;
/// The words a packet's headers fill and the caches key on (then pipeline
/// state, then [`ND_WORDS`]).
pub const PKT_WORDS: usize = 8;
/// The words of neighbour discovery's fields (see the module doc).
pub const ND_WORDS: core::ops::Range<usize> = 14..18;

/// A packet key, or a mask, or a masked value (same shape).
#[derive(Clone, Copy, Eq, Default)]
// Not aligned to a cache line: a rule stores two keys (match and mask),
// and 64-byte alignment padded each stored rule to 320 bytes and made
// every allocation an aligned one (a third more memory to fault in when
// inserting a million rules). The datapath's keys sit in one array.
#[repr(C)]
pub struct Key {
    pub w: [u64; WORDS],
}

impl core::fmt::Debug for Key {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Key[")?;
        for (i, w) in self.w.iter().enumerate() {
            if i > 0 {
                write!(f, " ")?;
            }
            write!(f, "{w:016x}")?;
        }
        write!(f, "]")
    }
}

impl PartialEq for Key {
    /// Branch-free word compare (the derived one calls memcmp).
    #[inline(always)]
    fn eq(&self, o: &Key) -> bool {
        let mut d = 0;
        for i in 0..WORDS {
            d |= self.w[i] ^ o.w[i];
        }
        d == 0
    }
}

impl core::hash::Hash for Key {
    #[inline]
    fn hash<H: core::hash::Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash64());
    }
}

/// Where a scalar field lives in the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldLoc {
    pub word: usize,
    pub shift: u32,
    pub bits: u32,
}

impl FieldLoc {
    /// All-ones mask of the field's width, unshifted.
    pub const fn full(&self) -> u64 {
        if self.bits >= 64 {
            u64::MAX
        } else {
            (1u64 << self.bits) - 1
        }
    }
}

/// IP protocol number of SCTP (RFC 4960).
const IPPROTO_SCTP: u8 = 132;
/// SCTP's common header: source port, destination port, verification tag, checksum.
const SCTP_HEADER_LEN: usize = 12;

pub const IN_PORT: FieldLoc = FieldLoc {
    word: 0,
    shift: 32,
    bits: 32,
};
pub const DL_TYPE: FieldLoc = FieldLoc {
    word: 0,
    shift: 16,
    bits: 16,
};
pub const VLAN_TCI: FieldLoc = FieldLoc {
    word: 0,
    shift: 0,
    bits: 16,
};
pub const DL_DST: FieldLoc = FieldLoc {
    word: 1,
    shift: 16,
    bits: 48,
};
pub const NW_PROTO: FieldLoc = FieldLoc {
    word: 1,
    shift: 8,
    bits: 8,
};
pub const NW_TOS: FieldLoc = FieldLoc {
    word: 1,
    shift: 0,
    bits: 8,
};
pub const DL_SRC: FieldLoc = FieldLoc {
    word: 2,
    shift: 16,
    bits: 48,
};
pub const NW_TTL: FieldLoc = FieldLoc {
    word: 2,
    shift: 8,
    bits: 8,
};
/// TCP's 12 flag bits (Open vSwitch's `tcp_flags` width).
pub const TCP_FLAGS: FieldLoc = FieldLoc {
    word: 3,
    shift: 52,
    bits: 12,
};
pub const TP_SRC: FieldLoc = FieldLoc {
    word: 3,
    shift: 36,
    bits: 16,
};
pub const TP_DST: FieldLoc = FieldLoc {
    word: 3,
    shift: 20,
    bits: 16,
};
/// IPv6's 20-bit flow label (`ipv6_label`).
pub const IPV6_LABEL: FieldLoc = FieldLoc {
    word: 3,
    shift: 0,
    bits: 20,
};
/// IPv4 source: the low 32 bits of word 5 (the v4-mapped address's tail).
pub const NW_SRC: FieldLoc = FieldLoc {
    word: 5,
    shift: 0,
    bits: 32,
};
pub const NW_DST: FieldLoc = FieldLoc {
    word: 7,
    shift: 0,
    bits: 32,
};
/// ARP's sender and target hardware addresses: the high 48 bits of words
/// 4 and 6 (an ARP frame's protocol addresses are v4-mapped there, whose
/// high 64 bits are zero; the `arp` prerequisite keeps them apart from
/// IPv6's).
pub const ARP_SHA: FieldLoc = FieldLoc {
    word: 4,
    shift: 16,
    bits: 48,
};
pub const ARP_THA: FieldLoc = FieldLoc {
    word: 6,
    shift: 16,
    bits: 48,
};
/// The top MPLS label stack entry of an MPLS frame (EtherType 0x8847 or
/// 0x8848), in word 4's low 32 bits (an MPLS frame has no IP addresses;
/// the `mpls` prerequisite keeps these apart): label (20 bits), traffic
/// class (3), bottom of stack (1), TTL (8), as on the wire.
pub const MPLS_LABEL: FieldLoc = FieldLoc {
    word: 4,
    shift: 12,
    bits: 20,
};
pub const MPLS_TC: FieldLoc = FieldLoc {
    word: 4,
    shift: 9,
    bits: 3,
};
pub const MPLS_BOS: FieldLoc = FieldLoc {
    word: 4,
    shift: 8,
    bits: 1,
};
pub const MPLS_TTL: FieldLoc = FieldLoc {
    word: 4,
    shift: 0,
    bits: 8,
};
/// The MPLS EtherTypes (unicast, multicast).
pub const ETH_MPLS: u16 = 0x8847;
pub const ETH_MPLS_MC: u16 = 0x8848;
/// Register `reg{n}` (n < 8): 32 bits, two per word from word 8.
pub const fn reg(n: usize) -> FieldLoc {
    FieldLoc {
        word: 8 + n / 2,
        shift: if n & 1 == 0 { 32 } else { 0 },
        bits: 32,
    }
}
/// Number of registers.
pub const REGS: usize = 8;
pub const METADATA: FieldLoc = FieldLoc {
    word: 12,
    shift: 0,
    bits: 64,
};
/// `tun_id` / `tunnel_id`: 0 on arrival (no tunnel ports), then pipeline
/// state like `metadata` (`set_field:...->tun_id` and later tables match it).
pub const TUN_ID: FieldLoc = FieldLoc {
    word: 13,
    shift: 0,
    bits: 64,
};
/// First word of a neighbour discovery message's 128-bit target address.
pub const ND_TARGET_WORD: usize = 14;
/// A neighbour solicitation's source link-layer address option (`nd_sll`).
pub const ND_SLL: FieldLoc = FieldLoc {
    word: 16,
    shift: 16,
    bits: 48,
};
/// A neighbour advertisement's target link-layer address option (`nd_tll`).
pub const ND_TLL: FieldLoc = FieldLoc {
    word: 17,
    shift: 16,
    bits: 48,
};
/// ICMPv6 neighbour solicitation and advertisement (RFC 4861).
pub const ND_SOLICIT: u8 = linerate_wire::icmp::v6::NEIGHBOR_SOLICIT;
pub const ND_ADVERT: u8 = linerate_wire::icmp::v6::NEIGHBOR_ADVERT;
/// First word of the 128-bit source / destination address.
pub const IPV6_SRC_WORD: usize = 4;
pub const IPV6_DST_WORD: usize = 6;

/// `vlan_tci` bit meaning "a tag is present".
pub const VLAN_CFI: u16 = 0x1000;

// Three sets of eight (a word's `xk` is taken within its set of eight).
const HASH_K: [u64; 24] = [
    0x9e37_79b9_7f4a_7c15,
    0xc2b2_ae3d_27d4_eb4f,
    0x1656_67b1_9e37_79f9,
    0x85eb_ca77_c2b2_ae63,
    0x27d4_eb2f_1656_67c5,
    0xff51_afd7_ed55_8ccd,
    0xc4ce_b9fe_1a85_ec53,
    0x9fb2_1c65_1e98_df25,
    0xd6e8_feb8_6659_fd93,
    0xa076_1d64_78bd_642f,
    0xe703_7ed1_a0b4_28db,
    0x8ebc_6af0_9c88_c6e3,
    0x5899_65cc_7537_4cc3,
    0x1d8e_4e27_c47d_124f,
    0xb492_b66f_be98_f273,
    0x9ae1_6a3b_2f90_404f,
    0xd1b5_4a32_d192_ed03,
    0xaef1_7502_108e_f2d9,
    0xf135_7aea_2e62_a9c5,
    0x94d0_49bb_1331_11eb,
    0xbf58_476d_1ce4_e5b9,
    0x6c8e_9cf5_7043_2c3b,
    0x2545_f491_4f6c_dd1d,
    0x9e6c_63d0_676a_9a99,
];
/// The constants of one word's step of the key hash: multiplied by its
/// own odd constant and added, so the steps of different words are
/// independent (the CPU runs them in parallel). Rotating by the word's
/// position keeps words that hold the same value in different places from
/// cancelling out. A subtable keeps the steps of its words.
#[derive(Debug, Clone, Copy, Default)]
pub struct WordHash {
    xk: u64,
    mk: u64,
    rot: u32,
}

impl WordHash {
    #[inline(always)]
    pub const fn of(word: usize) -> WordHash {
        WordHash {
            // Words 0..7 keep the constants they had when the key was
            // eight words; words 8..15 take the second eight, 16.. the third.
            xk: HASH_K[(word + 3) % PKT_WORDS + word / PKT_WORDS * PKT_WORDS],
            mk: HASH_K[word],
            rot: word as u32 * 8,
        }
    }

    #[inline(always)]
    pub fn step(&self, h: u64, v: u64) -> u64 {
        h.wrapping_add((v ^ self.xk).rotate_left(self.rot).wrapping_mul(self.mk))
    }
}

/// The start value of the key hash.
pub const HASH_SEED: u64 = 0x243f_6a88_85a3_08d3;

#[inline(always)]
fn hash_step(h: u64, i: usize, v: u64) -> u64 {
    WordHash::of(i).step(h, v)
}

/// The last step of the key hash (mixes the high bits down).
#[inline(always)]
pub fn hash_finish(mut h: u64) -> u64 {
    h ^= h >> 29;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^ (h >> 32)
}

impl Key {
    pub const ZERO: Key = Key { w: [0; WORDS] };

    #[inline(always)]
    pub fn get(&self, f: FieldLoc) -> u64 {
        (self.w[f.word] >> f.shift) & f.full()
    }

    /// Set a field (the value is truncated to the field's width).
    #[inline(always)]
    pub fn set(&mut self, f: FieldLoc, v: u64) {
        let m = f.full() << f.shift;
        self.w[f.word] = (self.w[f.word] & !m) | ((v << f.shift) & m);
    }

    pub fn get128(&self, word: usize) -> u128 {
        ((self.w[word] as u128) << 64) | self.w[word + 1] as u128
    }

    pub fn set128(&mut self, word: usize, v: u128) {
        self.w[word] = (v >> 64) as u64;
        self.w[word + 1] = v as u64;
    }

    #[inline(always)]
    pub fn and(&self, m: &Key) -> Key {
        let mut r = Key::ZERO;
        for i in 0..WORDS {
            r.w[i] = self.w[i] & m.w[i];
        }
        r
    }

    /// True if `self & mask == value` (value already masked).
    #[inline(always)]
    pub fn matches(&self, mask: &Key, value: &Key) -> bool {
        let mut d = 0;
        for i in 0..WORDS {
            d |= (self.w[i] & mask.w[i]) ^ value.w[i];
        }
        d == 0
    }

    pub fn is_zero(&self) -> bool {
        self.w.iter().all(|&w| w == 0)
    }

    /// A fast 64-bit hash of all words (not DoS resistant: the tables are
    /// sized by the operator's rules, and EMC collisions only cost a miss).
    ///
    /// Each word is multiplied by its own odd constant and the products
    /// summed, then mixed: the eight multiplies are independent, so the
    /// CPU runs them in parallel (a chain of multiply-xor rounds, one per
    /// word, took ~40 cycles of latency per probe; a classifier lookup
    /// hashes once per subtable searched).
    #[inline(always)]
    pub fn hash64(&self) -> u64 {
        let mut h = HASH_SEED;
        for i in 0..WORDS {
            h = hash_step(h, i, self.w[i]);
        }
        hash_finish(h)
    }

    /// [`Self::hash64`] of the packet words only (the caches' hash: their
    /// keys are packets entering table 0, whose other words are zero).
    #[inline(always)]
    pub fn hash_pkt(&self) -> u64 {
        let mut h = HASH_SEED;
        for i in 0..PKT_WORDS {
            h = hash_step(h, i, self.w[i]);
        }
        hash_finish(h)
    }

    /// Are the packet words of `self` and `o` equal? (Branch-free.)
    #[inline(always)]
    pub fn pkt_eq(&self, o: &[u64; PKT_WORDS]) -> bool {
        let mut d = 0;
        for (a, b) in self.w[..PKT_WORDS].iter().zip(o) {
            d |= a ^ b;
        }
        d == 0
    }

    /// The packet words.
    #[inline(always)]
    pub fn pkt(&self) -> [u64; PKT_WORDS] {
        let mut p = [0u64; PKT_WORDS];
        p.copy_from_slice(&self.w[..PKT_WORDS]);
        p
    }

    /// Hash of the words `sel` (indices into the key) of `self & mask`,
    /// and those masked words into `out` (`out[j]` for `sel[j]`). A
    /// subtable hashes only the words its mask uses (2 to 5 of the 8 for
    /// usual rules), which is most of a probe's cost.
    #[inline(always)]
    pub fn hash_masked(&self, mask: &Key, sel: &[u8], out: &mut [u64; WORDS]) -> u64 {
        let mut h = HASH_SEED;
        for (j, &w) in sel.iter().enumerate() {
            let v = self.w[w as usize] & mask.w[w as usize];
            out[j] = v;
            h = hash_step(h, w as usize, v);
        }
        hash_finish(h)
    }

    /// [`Self::hash_masked`] of a value already masked and packed
    /// (`vals[j]` is word `sel[j]`): the same hash.
    #[inline(always)]
    pub fn hash_packed(vals: &[u64], sel: &[u8]) -> u64 {
        let mut h = HASH_SEED;
        for (&v, &w) in vals.iter().zip(sel) {
            h = hash_step(h, w as usize, v);
        }
        hash_finish(h)
    }

    /// Extract the key of `frame` received on `in_port` (see the module doc
    /// for what malformed frames give). No allocation.
    #[inline]
    pub fn extract(frame: &[u8], in_port: u32) -> Key {
        let mut k = Key::ZERO;
        k.extract_into(frame, in_port);
        k
    }

    /// [`Self::extract`] into the packet words of `self`, written in place
    /// (a key built on the stack and then copied as 16-byte moves stalled
    /// on store forwarding: ~8 cycles of the switch's budget). The
    /// pipeline words (registers, metadata, tunnel id) are left as they are;
    /// the neighbour discovery words are written (zero for other frames).
    #[inline(always)]
    pub fn extract_into(&mut self, frame: &[u8], in_port: u32) {
        if !self.extract_fast_into(frame, in_port) {
            let g = Key::extract_general(frame, in_port);
            self.w[..PKT_WORDS].copy_from_slice(&g.w[..PKT_WORDS]);
            self.w[ND_WORDS].copy_from_slice(&g.w[ND_WORDS]);
        }
    }

    /// [`Self::extract_fast_into`] as a value.
    pub fn extract_fast(f: &[u8], in_port: u32) -> Option<Key> {
        let mut k = Key::ZERO;
        k.extract_fast_into(f, in_port).then_some(k)
    }

    /// The usual frame (untagged IPv4 without options, not a fragment, UDP
    /// or TCP with valid lengths) read at fixed offsets, whole words at a
    /// time; `None` for anything else, which goes to
    /// [`Self::extract_general`]. It gives exactly the key the general
    /// path gives (a property test compares them on mutated frames); it
    /// halves the extract stage of the switch. Writes `self` only when it
    /// returns true.
    #[inline(always)]
    pub fn extract_fast_into(&mut self, f: &[u8], in_port: u32) -> bool {
        const L3: usize = ethernet::HEADER_LEN;
        const L4: usize = L3 + 20;
        if f.len() < L4 + 8 || f[12] != 0x08 || f[13] != 0x00 || f[L3] != 0x45 {
            return false;
        }
        let be16 = |o: usize| u16::from_be_bytes([f[o], f[o + 1]]) as u64;
        let be32 = |o: usize| u32::from_be_bytes([f[o], f[o + 1], f[o + 2], f[o + 3]]) as u64;
        let be64 = |o: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&f[o..o + 8]);
            u64::from_be_bytes(b)
        };
        let total = be16(L3 + 2) as usize;
        // The segment after the 20-byte header, up to the total length.
        if total < 20 || L3 + total > f.len() || be16(L3 + 6) & 0x3fff != 0 {
            return false;
        }
        let seg = total - 20;
        let proto = f[L3 + 9] as u64;
        let tcp_flags = match proto {
            17 => {
                let ulen = be16(L4 + 4) as usize;
                if seg < 8 || ulen < 8 || ulen > seg {
                    return false;
                }
                0
            }
            6 => {
                // seg >= 20 first: the frame then holds the TCP header.
                if seg < 20 {
                    return false;
                }
                let hl = (f[L4 + 12] >> 4) as usize * 4;
                if hl < 20 || hl > seg {
                    return false;
                }
                be16(L4 + 12) & 0x01ff
            }
            _ => return false,
        };
        const V4_MAPPED: u64 = 0xffff_0000_0000;
        // The packet words only: the pipeline words stay as they are (zero
        // in the datapath's key array, which only ever holds packets).
        self.w[..PKT_WORDS].copy_from_slice(&[
            ((in_port as u64) << 32) | (0x0800 << 16),
            (be64(0) & !0xffff) | (proto << 8) | f[L3 + 1] as u64,
            (be64(6) & !0xffff) | ((f[L3 + 8] as u64) << 8),
            (tcp_flags << TCP_FLAGS.shift)
                | (be16(L4) << TP_SRC.shift)
                | (be16(L4 + 2) << TP_DST.shift),
            0,
            V4_MAPPED | be32(L3 + 12),
            0,
            V4_MAPPED | be32(L3 + 16),
        ]);
        // The slot may have held a neighbour discovery frame.
        self.w[ND_WORDS].fill(0);
        true
    }

    /// Every frame: the wire parser's layers into the key.
    pub fn extract_general(frame: &[u8], in_port: u32) -> Key {
        let mut k = Key::ZERO;
        k.set(IN_PORT, in_port as u64);
        if frame.len() < ethernet::HEADER_LEN {
            return k;
        }
        let mac = |o: usize| -> u64 {
            let mut v = 0u64;
            for &b in &frame[o..o + 6] {
                v = (v << 8) | b as u64;
            }
            v
        };
        k.set(DL_DST, mac(0));
        k.set(DL_SRC, mac(6));
        let l = match parse_frame(frame) {
            Ok(l) => l,
            Err(_) => {
                // Keep the L2 part: the outer EtherType (or the tag's if it parses).
                let et = u16::from_be_bytes([frame[12], frame[13]]);
                k.set(DL_TYPE, et as u64);
                return k;
            }
        };
        k.set(DL_TYPE, l.ethertype as u64);
        if let Some(t) = l.vlans.outer() {
            let tci = VLAN_CFI | ((t.pcp() as u16) << 13) | t.vid();
            k.set(VLAN_TCI, tci as u64);
        }
        let l3 = l.l3_offset as usize;
        match l.l3 {
            L3::Ipv4 => {
                k.set(NW_TOS, frame[l3 + 1] as u64);
                k.set(NW_TTL, frame[l3 + 8] as u64);
            }
            L3::Ipv6 => {
                let tc = ((frame[l3] & 0x0f) << 4) | (frame[l3 + 1] >> 4);
                k.set(NW_TOS, tc as u64);
                k.set(NW_TTL, frame[l3 + 7] as u64);
                let label = u32::from_be_bytes([0, frame[l3 + 1], frame[l3 + 2], frame[l3 + 3]]);
                k.set(IPV6_LABEL, (label & 0xf_ffff) as u64);
            }
            L3::Arp => {
                // ARP (checked by parse_frame: 28 bytes from l3).
                let a = &frame[l3..];
                k.set(NW_PROTO, a[7] as u64);
                k.set128(
                    IPV6_SRC_WORD,
                    u128::from_be_bytes(v4_mapped([a[14], a[15], a[16], a[17]])),
                );
                k.set128(
                    IPV6_DST_WORD,
                    u128::from_be_bytes(v4_mapped([a[24], a[25], a[26], a[27]])),
                );
                k.set(ARP_SHA, mac(l3 + 8));
                k.set(ARP_THA, mac(l3 + 18));
                return k;
            }
            L3::None => {
                // MPLS: the top label stack entry (Open vSwitch parses no
                // further).
                if matches!(l.ethertype, ETH_MPLS | ETH_MPLS_MC) && frame.len() >= l3 + 4 {
                    let lse = u32::from_be_bytes([
                        frame[l3],
                        frame[l3 + 1],
                        frame[l3 + 2],
                        frame[l3 + 3],
                    ]);
                    k.w[MPLS_LABEL.word] |= lse as u64;
                }
                return k;
            }
        }
        k.set(NW_PROTO, l.proto as u64);
        k.set128(IPV6_SRC_WORD, u128::from_be_bytes(l.src_ip));
        k.set128(IPV6_DST_WORD, u128::from_be_bytes(l.dst_ip));
        match l.l4 {
            L4::Tcp | L4::Udp => {
                k.set(TP_SRC, l.src_port as u64);
                k.set(TP_DST, l.dst_port as u64);
                k.set(TCP_FLAGS, l.tcp_flags as u64);
            }
            L4::Icmpv4 | L4::Icmpv6 => {
                let o = l.l4_offset as usize;
                k.set(TP_SRC, frame[o] as u64);
                k.set(TP_DST, frame[o + 1] as u64);
                if l.l4 == L4::Icmpv6
                    && frame[o + 1] == 0
                    && matches!(frame[o], ND_SOLICIT | ND_ADVERT)
                {
                    // After the 8-byte ICMPv6 header (parse_frame checked it).
                    let end = (l.end as usize).min(frame.len());
                    k.extract_nd(&frame[o + 8..end.max(o + 8)]);
                }
            }
            // SCTP: the ports of its 12-byte common header, as Open vSwitch
            // reads them (a rule on `sctp,tp_src=` must be able to match);
            // a segment too short for the header leaves them 0.
            L4::Other if l.proto == IPPROTO_SCTP => {
                let o = l.l4_offset as usize;
                if (l.end as usize).saturating_sub(o) >= SCTP_HEADER_LEN {
                    k.set(TP_SRC, u16::from_be_bytes([frame[o], frame[o + 1]]) as u64);
                    k.set(
                        TP_DST,
                        u16::from_be_bytes([frame[o + 2], frame[o + 3]]) as u64,
                    );
                }
            }
            _ => {}
        }
        k
    }
}

/// A MAC address as the low 48 bits of a key word's field value.
#[inline(always)]
pub fn mac_u64(m: &[u8; 6]) -> u64 {
    m.iter().fold(0u64, |v, &b| (v << 8) | b as u64)
}

impl Key {
    /// A neighbour discovery message's fields from its body after the
    /// ICMPv6 header (`body`: the target, then options), as Open vSwitch's
    /// `parse_icmpv6` reads them: a body too short for the target leaves
    /// all three 0; options are read while 8 bytes remain, up to one of
    /// length 0 or longer than what remains; the first source and the
    /// first target link-layer address option (type 1 and 2, length 1)
    /// give `nd_sll` and `nd_tll`, and a second one of either kind (after
    /// one that was not all zero) makes all three 0.
    fn extract_nd(&mut self, body: &[u8]) {
        let Some(target) = body.get(..16) else {
            return;
        };
        let mut t = [0u8; 16];
        t.copy_from_slice(target);
        let mut lla = [0u64; 2];
        let mut rest = &body[16..];
        while rest.len() >= 8 {
            let len = rest[1] as usize * 8;
            if len == 0 || len > rest.len() {
                break;
            }
            let kind = rest[0];
            if matches!(kind, 1 | 2) && len == 8 {
                let i = kind as usize - 1;
                if lla[i] != 0 {
                    // Open vSwitch's `invalid`: no target, no addresses.
                    return;
                }
                let mut m = [0u8; 6];
                m.copy_from_slice(&rest[2..8]);
                lla[i] = mac_u64(&m);
            }
            rest = &rest[len..];
        }
        self.set128(ND_TARGET_WORD, u128::from_be_bytes(t));
        self.set(ND_SLL, lla[0]);
        self.set(ND_TLL, lla[1]);
    }

    /// Is this the key of a neighbour solicitation or advertisement (the
    /// frames whose [`ND_WORDS`] may be non-zero)? No exact entry of the
    /// multi-table path's cache, which keys on the packet words (they do
    /// not hold these fields), is made from such a frame's live walk.
    #[inline(always)]
    pub fn is_nd(&self) -> bool {
        const ICMP6: u64 = 58;
        self.get(DL_TYPE) == 0x86dd
            && self.get(NW_PROTO) == ICMP6
            && self.get(TP_DST) == 0
            && matches!(self.get(TP_SRC) as u8, ND_SOLICIT | ND_ADVERT)
    }
}

/// Fuzz body: any bytes as a frame. Extraction never panics, and the fast
/// path, when it takes the frame, gives the general path's key.
pub fn fuzz(data: &[u8]) {
    let port = data.first().copied().unwrap_or(0) as u32;
    let general = Key::extract_general(data, port);
    if let Some(k) = Key::extract_fast(data, port) {
        assert_eq!(k, general, "fast and general keys differ");
    }
    assert_eq!(Key::extract(data, port), general);
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    #[test]
    fn field_set_get() {
        let mut k = Key::ZERO;
        k.set(IN_PORT, 7);
        k.set(DL_TYPE, 0x0800);
        k.set(VLAN_TCI, 0x1005);
        k.set(TP_DST, 53);
        k.set(NW_DST, 0x0a000001);
        assert_eq!(k.get(IN_PORT), 7);
        assert_eq!(k.get(DL_TYPE), 0x0800);
        assert_eq!(k.get(VLAN_TCI), 0x1005);
        assert_eq!(k.get(TP_DST), 53);
        assert_eq!(k.get(NW_DST), 0x0a000001);
        k.set(DL_TYPE, 0x86dd);
        assert_eq!(k.get(IN_PORT), 7);
        assert_eq!(k.get(VLAN_TCI), 0x1005);
    }

    use linerate_wire::build::{build_nd, build_udp, nd_lla_option, FrameParams, IpPair};

    const TARGET: [u8; 16] = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7];
    const MAC_A: [u8; 6] = [2, 0, 0, 0, 0, 0xa];
    const MAC_B: [u8; 6] = [2, 0, 0, 0, 0, 0xb];

    /// A neighbour discovery frame for fe80::7 with these options
    /// (`advert`: an advertisement, 136), checksum set.
    pub(in crate::switch) fn nd(advert: bool, opts: &[u8]) -> Vec<u8> {
        let mut p = FrameParams::new(IpPair::V6 {
            src: [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
            dst: [0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0, 0, 7],
        });
        p.payload = opts;
        let mut b = vec![0u8; 256];
        let n = build_nd(&mut b, &p, advert, &TARGET).unwrap();
        b.truncate(n);
        b
    }

    fn nd_fields(k: &Key) -> (u128, u64, u64) {
        (k.get128(ND_TARGET_WORD), k.get(ND_SLL), k.get(ND_TLL))
    }

    #[test]
    fn neighbour_discovery_fields_as_open_vswitch_reads_them() {
        let t = u128::from_be_bytes(TARGET);
        let sll = nd_lla_option(1, MAC_A);
        let tll = nd_lla_option(2, MAC_B);
        // A solicitation with its source address option.
        let k = Key::extract(&nd(false, &sll), 1);
        assert!(k.is_nd());
        assert_eq!(k.get(TP_SRC), 135);
        assert_eq!(nd_fields(&k), (t, mac_u64(&MAC_A), 0));
        // An advertisement with its target address option; an unknown
        // option (nonce, type 14) before it is stepped over.
        let nonce = [14u8, 1, 9, 9, 9, 9, 9, 9];
        let k = Key::extract(&nd(true, &[nonce, tll].concat()), 1);
        assert_eq!(nd_fields(&k), (t, 0, mac_u64(&MAC_B)));
        // Both kinds in one message: both read (only the prerequisites
        // keep nd_tll to advertisements).
        let k = Key::extract(&nd(false, &[sll, tll].concat()), 1);
        assert_eq!(nd_fields(&k), (t, mac_u64(&MAC_A), mac_u64(&MAC_B)));
        // No options: the target only.
        assert_eq!(nd_fields(&Key::extract(&nd(true, &[]), 1)), (t, 0, 0));
        // A second source option: Open vSwitch's `invalid`, all three 0
        // (the frame is still ND by its type).
        let two = [sll, nd_lla_option(1, MAC_B)].concat();
        let k = Key::extract(&nd(false, &two), 1);
        assert!(k.is_nd());
        assert_eq!(nd_fields(&k), (0, 0, 0));
        // ... unless the first was all zero.
        let two = [nd_lla_option(1, [0; 6]), nd_lla_option(1, MAC_B)].concat();
        assert_eq!(
            nd_fields(&Key::extract(&nd(false, &two), 1)),
            (t, mac_u64(&MAC_B), 0)
        );
        // An option of length 0 ends the walk (what was read stays).
        let zero_len = [tll, [1u8, 0, 1, 2, 3, 4, 5, 6], sll].concat();
        assert_eq!(
            nd_fields(&Key::extract(&nd(true, &zero_len), 1)),
            (t, 0, mac_u64(&MAC_B))
        );
        // A source option of length 2 is not an Ethernet address.
        let long = [1u8, 2, 1, 2, 3, 4, 5, 6, 0, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(nd_fields(&Key::extract(&nd(false, &long), 1)), (t, 0, 0));
    }

    #[test]
    fn only_code_zero_solicitations_and_advertisements_are_nd() {
        let sll = nd_lla_option(1, MAC_A);
        let mut f = nd(false, &sll);
        let o = f.len() - 8 - 16 - 8;
        // Code 1: not ND (Open vSwitch's icmp6_is_nd), no fields.
        f[o + 1] = 1;
        let k = Key::extract(&f, 1);
        assert!(!k.is_nd());
        assert_eq!(nd_fields(&k), (0, 0, 0));
        // Another type (router solicitation, 133).
        f[o + 1] = 0;
        f[o] = 133;
        assert_eq!(nd_fields(&Key::extract(&f, 1)), (0, 0, 0));
        // A message cut inside the target (the IPv6 payload length says
        // so): ND by its type, but no fields.
        let mut f = nd(false, &[]);
        let l3 = 14;
        let plen = 8 + 10;
        f[l3 + 4..l3 + 6].copy_from_slice(&(plen as u16).to_be_bytes());
        f.truncate(l3 + 40 + plen);
        let k = Key::extract(&f, 1);
        assert!(k.is_nd());
        assert_eq!(nd_fields(&k), (0, 0, 0));
    }

    #[test]
    fn a_key_slot_reused_after_an_nd_frame_holds_no_nd_fields() {
        let mut k = Key::ZERO;
        k.extract_into(&nd(false, &nd_lla_option(1, MAC_A)), 3);
        assert_ne!(nd_fields(&k), (0, 0, 0));
        // An IPv4 UDP frame (the fast path), then an IPv6 UDP one (the
        // general path): both clear the ND words.
        let mut b = [0u8; 128];
        let v4 = IpPair::V4 {
            src: [10, 0, 0, 1],
            dst: [10, 0, 0, 2],
        };
        let n = build_udp(&mut b, &FrameParams::new(v4), 1, 2).unwrap();
        assert!(Key::extract_fast(&b[..n], 3).is_some());
        k.extract_into(&b[..n], 3);
        assert_eq!(k, Key::extract_general(&b[..n], 3));
        k.extract_into(&nd(true, &nd_lla_option(2, MAC_B)), 3);
        let v6 = IpPair::V6 {
            src: [0xfd; 16],
            dst: [0xfe; 16],
        };
        let n = build_udp(&mut b, &FrameParams::new(v6), 1, 2).unwrap();
        k.extract_into(&b[..n], 3);
        assert_eq!(k, Key::extract_general(&b[..n], 3));
        assert_eq!(nd_fields(&k), (0, 0, 0));
    }

    #[test]
    fn short_frame_gives_port_only() {
        let k = Key::extract(&[1, 2, 3], 9);
        let mut e = Key::ZERO;
        e.set(IN_PORT, 9);
        assert_eq!(k, e);
    }
}
