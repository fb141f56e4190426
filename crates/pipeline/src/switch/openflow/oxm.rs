//! Matches on the wire: `ofp_match` with OXM TLVs (class 0x8000), and the
//! Nicira NXM classes 0x0000/0x0001 that `ovs-ofctl` puts among them for
//! registers, `vlan_tci`, `nw_ttl`, `tcp_flags`, `tun_id` and `ipv6_label`.
//!
//! Decoding writes the match in the rule syntax (`in_port=1,dl_type=0x0800,
//! nw_dst=10.0.0.0/255.0.0.0`) for [`super::super::Rule::parse`] to check;
//! encoding walks a [`Match`]'s fields and writes each one set.

use super::wire::{err, OfError, Reader, Result, Writer};
use crate::switch::field::Field;
use crate::switch::key::{self, FieldLoc};
use crate::switch::Match;
use core::fmt::Write as _;
use std::net::{Ipv4Addr, Ipv6Addr};

pub const CLASS_NXM0: u16 = 0x0000;
pub const CLASS_NXM1: u16 = 0x0001;
pub const CLASS_OXM: u16 = 0x8000;
pub const CLASS_EXPERIMENTER: u16 = 0xffff;
/// The ONF experimenter id (OpenFlow 1.3's `tcp_flags` extension).
pub const ONF_EXPERIMENTER: u32 = 0x4f4e_4600;

/// An OXM/NXM header: class, field, has-mask, payload length.
pub const fn header(class: u16, field: u8, hasmask: bool, len: u8) -> u32 {
    (class as u32) << 16 | (field as u32) << 9 | (hasmask as u32) << 8 | len as u32
}

// OXM (class 0x8000) field numbers.
const IN_PORT: u8 = 0;
const METADATA: u8 = 2;
const ETH_DST: u8 = 3;
const ETH_SRC: u8 = 4;
const ETH_TYPE: u8 = 5;
const VLAN_VID: u8 = 6;
const VLAN_PCP: u8 = 7;
const IP_DSCP: u8 = 8;
const IP_ECN: u8 = 9;
const IP_PROTO: u8 = 10;
const IPV4_SRC: u8 = 11;
const IPV4_DST: u8 = 12;
const TCP_SRC: u8 = 13;
const TCP_DST: u8 = 14;
const UDP_SRC: u8 = 15;
const UDP_DST: u8 = 16;
const SCTP_SRC: u8 = 17;
const SCTP_DST: u8 = 18;
const ICMPV4_TYPE: u8 = 19;
const ICMPV4_CODE: u8 = 20;
const ARP_OP: u8 = 21;
const ARP_SPA: u8 = 22;
const ARP_TPA: u8 = 23;
const ARP_SHA: u8 = 24;
const ARP_THA: u8 = 25;
const IPV6_SRC: u8 = 26;
const IPV6_DST: u8 = 27;
const IPV6_FLABEL: u8 = 28;
const ICMPV6_TYPE: u8 = 29;
const ICMPV6_CODE: u8 = 30;
const IPV6_ND_TARGET: u8 = 31;
const IPV6_ND_SLL: u8 = 32;
const IPV6_ND_TLL: u8 = 33;
const MPLS_LABEL: u8 = 34;
const MPLS_TC: u8 = 35;
const MPLS_BOS: u8 = 36;
const TUNNEL_ID: u8 = 38;
const TCP_FLAGS_OXM: u8 = 42;
// NXM class 1 field numbers.
const NX_TUN_ID: u8 = 16;
const NX_IPV6_LABEL: u8 = 27;
const NX_IP_TTL: u8 = 29;
const NX_TCP_FLAGS: u8 = 34;

/// The (class, field, payload bytes) `load`, `move`, `output:` and
/// `learn` name a field by (what `ovs-ofctl` sends in those Nicira
/// actions; [`field_of`] also takes the OXM names, e.g. `OXM_OF_TUNNEL_ID`).
pub fn field_header(f: Field) -> (u16, u8, u8) {
    match f {
        Field::InPort => (CLASS_NXM0, 0, 2),
        Field::InPortOxm => (CLASS_OXM, IN_PORT, 4),
        Field::EthDst => (CLASS_NXM0, 1, 6),
        Field::EthSrc => (CLASS_NXM0, 2, 6),
        Field::EthType => (CLASS_NXM0, 3, 2),
        Field::VlanTci => (CLASS_NXM0, 4, 2),
        Field::VlanVid => (CLASS_OXM, VLAN_VID, 2),
        Field::IpProto => (CLASS_NXM0, 6, 1),
        Field::IpSrc => (CLASS_NXM0, 7, 4),
        Field::IpDst => (CLASS_NXM0, 8, 4),
        Field::TpSrc => (CLASS_NXM0, 9, 2),
        Field::TpDst => (CLASS_NXM0, 10, 2),
        Field::Reg(n) => (CLASS_NXM1, n, 4),
        Field::Metadata => (CLASS_OXM, METADATA, 8),
        Field::TunId => (CLASS_NXM1, NX_TUN_ID, 8),
    }
}

/// The field a header (as in `load`/`move`/`learn`) names, if linerate
/// has it; its mask bit and length are not looked at.
pub fn field_of(h: u32) -> Option<Field> {
    let (class, field) = ((h >> 16) as u16, ((h >> 9) & 0x7f) as u8);
    Some(match (class, field) {
        (CLASS_NXM0, 0) => Field::InPort,
        (CLASS_OXM, IN_PORT) => Field::InPortOxm,
        (CLASS_NXM0, 1) | (CLASS_OXM, ETH_DST) => Field::EthDst,
        (CLASS_NXM0, 2) | (CLASS_OXM, ETH_SRC) => Field::EthSrc,
        (CLASS_NXM0, 3) | (CLASS_OXM, ETH_TYPE) => Field::EthType,
        (CLASS_NXM0, 4) => Field::VlanTci,
        (CLASS_OXM, VLAN_VID) => Field::VlanVid,
        (CLASS_NXM0, 6) | (CLASS_OXM, IP_PROTO) => Field::IpProto,
        (CLASS_NXM0, 7) | (CLASS_OXM, IPV4_SRC) => Field::IpSrc,
        (CLASS_NXM0, 8) | (CLASS_OXM, IPV4_DST) => Field::IpDst,
        (CLASS_NXM0, 9 | 11) | (CLASS_OXM, TCP_SRC | UDP_SRC | SCTP_SRC) => Field::TpSrc,
        (CLASS_NXM0, 10 | 12) | (CLASS_OXM, TCP_DST | UDP_DST | SCTP_DST) => Field::TpDst,
        (CLASS_NXM1, n @ 0..=7) => Field::Reg(n),
        (CLASS_OXM, METADATA) => Field::Metadata,
        (CLASS_NXM1, NX_TUN_ID) | (CLASS_OXM, TUNNEL_ID) => Field::TunId,
        _ => return None,
    })
}

/// The header of field `f` (no mask).
pub fn header_of(f: Field) -> u32 {
    let (c, n, l) = field_header(f);
    header(c, n, false, l)
}

/// A field in a match: how its value is written in the rule syntax.
#[derive(Clone, Copy)]
enum Tok {
    /// `name=N` (decimal, no mask).
    Dec(&'static str),
    /// `name=0xV[/0xM]`.
    Hex(&'static str),
    Mac(&'static str),
    V4(&'static str),
    V6(&'static str),
}

/// The match token of an OXM/NXM field linerate matches on.
fn tok_of(class: u16, field: u8) -> Option<Tok> {
    use Tok::*;
    Some(match (class, field) {
        (CLASS_OXM, IN_PORT) | (CLASS_NXM0, 0) => Dec("in_port"),
        (CLASS_OXM, METADATA) => Hex("metadata"),
        (CLASS_OXM, TUNNEL_ID) | (CLASS_NXM1, NX_TUN_ID) => Hex("tun_id"),
        (CLASS_OXM, ETH_DST) | (CLASS_NXM0, 1) => Mac("dl_dst"),
        (CLASS_OXM, ETH_SRC) | (CLASS_NXM0, 2) => Mac("dl_src"),
        (CLASS_OXM, ETH_TYPE) | (CLASS_NXM0, 3) => Hex("dl_type"),
        (CLASS_OXM, VLAN_VID) => Hex("vlan_vid"),
        (CLASS_NXM0, 4) => Hex("vlan_tci"),
        (CLASS_OXM, VLAN_PCP) => Dec("vlan_pcp"),
        (CLASS_OXM, IP_DSCP) => Dec("ip_dscp"),
        (CLASS_OXM, IP_ECN) => Dec("ip_ecn"),
        (CLASS_NXM0, 5) => Dec("nw_tos"),
        (CLASS_OXM, IP_PROTO) | (CLASS_NXM0, 6) => Dec("nw_proto"),
        (CLASS_OXM, IPV4_SRC | ARP_SPA) | (CLASS_NXM0, 7 | 16) => V4("nw_src"),
        (CLASS_OXM, IPV4_DST | ARP_TPA) | (CLASS_NXM0, 8 | 17) => V4("nw_dst"),
        (CLASS_OXM, TCP_SRC) | (CLASS_NXM0, 9) => Hex("tcp_src"),
        (CLASS_OXM, TCP_DST) | (CLASS_NXM0, 10) => Hex("tcp_dst"),
        (CLASS_OXM, UDP_SRC) | (CLASS_NXM0, 11) => Hex("udp_src"),
        (CLASS_OXM, UDP_DST) | (CLASS_NXM0, 12) => Hex("udp_dst"),
        (CLASS_OXM, SCTP_SRC) => Hex("sctp_src"),
        (CLASS_OXM, SCTP_DST) => Hex("sctp_dst"),
        (CLASS_OXM, ARP_SHA) | (CLASS_NXM1, 17) => Mac("arp_sha"),
        (CLASS_OXM, ARP_THA) | (CLASS_NXM1, 18) => Mac("arp_tha"),
        (CLASS_OXM, ICMPV4_TYPE) | (CLASS_NXM0, 13) => Dec("icmp_type"),
        (CLASS_OXM, ICMPV4_CODE) | (CLASS_NXM0, 14) => Dec("icmp_code"),
        (CLASS_OXM, ARP_OP) | (CLASS_NXM0, 15) => Dec("nw_proto"),
        (CLASS_OXM, IPV6_SRC) | (CLASS_NXM1, 19) => V6("ipv6_src"),
        (CLASS_OXM, IPV6_DST) | (CLASS_NXM1, 20) => V6("ipv6_dst"),
        (CLASS_OXM, IPV6_FLABEL) | (CLASS_NXM1, NX_IPV6_LABEL) => Hex("ipv6_label"),
        (CLASS_OXM, ICMPV6_TYPE) | (CLASS_NXM1, 21) => Dec("icmpv6_type"),
        (CLASS_OXM, ICMPV6_CODE) | (CLASS_NXM1, 22) => Dec("icmpv6_code"),
        (CLASS_OXM, IPV6_ND_TARGET) | (CLASS_NXM1, 23) => V6("nd_target"),
        (CLASS_OXM, IPV6_ND_SLL) | (CLASS_NXM1, 24) => Mac("nd_sll"),
        (CLASS_OXM, IPV6_ND_TLL) | (CLASS_NXM1, 25) => Mac("nd_tll"),
        (CLASS_NXM1, NX_IP_TTL) => Dec("nw_ttl"),
        (CLASS_OXM, MPLS_LABEL) => Dec("mpls_label"),
        (CLASS_OXM, MPLS_TC) => Dec("mpls_tc"),
        (CLASS_OXM, MPLS_BOS) => Dec("mpls_bos"),
        (CLASS_NXM1, NX_TCP_FLAGS) | (CLASS_OXM, TCP_FLAGS_OXM) => Hex("tcp_flags"),
        _ => return None,
    })
}

fn be(b: &[u8]) -> u128 {
    b.iter().fold(0u128, |v, &x| (v << 8) | x as u128)
}

fn bad_field(h: u32, why: &str) -> OfError {
    OfError::new(
        err::BAD_MATCH,
        err::BM_BAD_FIELD,
        format!(
            "match field class {:#06x} field {}: {why}",
            h >> 16,
            (h >> 9) & 0x7f
        ),
    )
}

/// One OXM TLV from `r` (header, value, mask) written as a match token
/// into `out` (comma first when `out` is not empty); registers get
/// `regN=`.
pub fn decode_match_field(r: &mut Reader, out: &mut String) -> Result<()> {
    let h = r.u32()?;
    let (class, field, hasmask, len) = (
        (h >> 16) as u16,
        ((h >> 9) & 0x7f) as u8,
        h & 0x100 != 0,
        (h & 0xff) as usize,
    );
    let mut body = Reader::new(r.bytes(len)?, "match field");
    if class == CLASS_EXPERIMENTER {
        // The payload starts with the experimenter id.
        let exp = body.u32()?;
        if exp != ONF_EXPERIMENTER || field != TCP_FLAGS_OXM {
            return Err(bad_field(h, "unknown experimenter field"));
        }
    }
    let n = if hasmask { body.len() / 2 } else { body.len() };
    if n == 0 || n > 16 || (hasmask && !body.len().is_multiple_of(2)) {
        return Err(OfError::new(
            err::BAD_MATCH,
            err::BM_BAD_LEN,
            format!("match field header {h:#010x}: bad length {len}"),
        ));
    }
    let v = be(body.bytes(n)?);
    let full = if n == 16 {
        u128::MAX
    } else {
        (1u128 << (8 * n)) - 1
    };
    let m = if hasmask { be(body.bytes(n)?) } else { full };
    let reg = (class == CLASS_NXM1 && field < 8).then_some(field);
    let tok = match reg {
        Some(_) => Tok::Hex("reg"),
        None => tok_of(class, field).ok_or_else(|| bad_field(h, "not supported"))?,
    };
    if !out.is_empty() {
        out.push(',');
    }
    let masked = m != full;
    if class == CLASS_OXM && field == VLAN_VID && !masked && v == 0 {
        // "No tag": OvS's vlan_tci=0 (what ovs-ofctl sends it as).
        out.push_str("vlan_tci=0");
        return Ok(());
    }
    let _ = match tok {
        Tok::Dec(name) => {
            if masked {
                return Err(OfError::new(
                    err::BAD_MATCH,
                    err::BM_BAD_MASK,
                    format!("{name} takes no mask"),
                ));
            }
            write!(out, "{name}={v}")
        }
        Tok::Hex(name) => {
            match reg {
                Some(i) => {
                    let _ = write!(out, "reg{i}=");
                }
                None => {
                    let _ = write!(out, "{name}=");
                }
            }
            if masked {
                write!(out, "{v:#x}/{m:#x}")
            } else {
                write!(out, "{v:#x}")
            }
        }
        Tok::Mac(name) => {
            let mac = |x: u128| {
                let b = (x as u64).to_be_bytes();
                format!(
                    "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
                    b[2], b[3], b[4], b[5], b[6], b[7]
                )
            };
            if n != 6 {
                return Err(bad_field(h, "a MAC address is 6 bytes"));
            }
            write!(out, "{name}={}/{}", mac(v), mac(m))
        }
        Tok::V4(name) => {
            if n != 4 {
                return Err(bad_field(h, "an IPv4 address is 4 bytes"));
            }
            write!(
                out,
                "{name}={}/{}",
                Ipv4Addr::from(v as u32),
                Ipv4Addr::from(m as u32)
            )
        }
        Tok::V6(name) => {
            if n != 16 {
                return Err(bad_field(h, "an IPv6 address is 16 bytes"));
            }
            write!(out, "{name}={}/{}", Ipv6Addr::from(v), Ipv6Addr::from(m))
        }
    };
    Ok(())
}

/// Read an `ofp_match` (type OXM, its fields, padding to 8) and write it
/// in the rule syntax into `out`.
pub fn decode_match(r: &mut Reader, out: &mut String) -> Result<()> {
    let t = r.u16()?;
    let len = r.u16()? as usize;
    if t != 1 {
        return Err(OfError::new(
            err::BAD_MATCH,
            err::BM_BAD_TYPE,
            format!("match type {t}: only OXM (1) is supported"),
        ));
    }
    if len < 4 {
        return Err(OfError::new(
            err::BAD_MATCH,
            err::BM_BAD_LEN,
            format!("match length {len}"),
        ));
    }
    let mut fields = Reader::new(r.bytes(len - 4)?, "match");
    let pad = (8 - len % 8) % 8;
    r.skip(pad.min(r.len()))?;
    let mut s = String::new();
    while !fields.is_empty() {
        decode_match_field(&mut fields, &mut s)?;
    }
    if !s.is_empty() {
        if !out.is_empty() {
            out.push(',');
        }
        out.push_str(&s);
    }
    Ok(())
}

/// Write one field: its value's low `n` bytes, the mask when it is not
/// all ones.
fn put(w: &mut Writer, class: u16, field: u8, n: usize, v: u128, m: u128) {
    let full = if n == 16 {
        u128::MAX
    } else {
        (1u128 << (8 * n)) - 1
    };
    let hasmask = m & full != full;
    let len = if hasmask { 2 * n } else { n };
    w.u32(header(class, field, hasmask, len as u8));
    w.bytes(&v.to_be_bytes()[16 - n..]);
    if hasmask {
        w.bytes(&m.to_be_bytes()[16 - n..]);
    }
}

fn get(m: &Match, f: FieldLoc) -> (u128, u128) {
    (m.value.get(f) as u128, m.mask.get(f) as u128)
}

/// Write `m` as an `ofp_match` (OXM, padded to 8), in prerequisite order.
pub fn encode_match(m: &Match, w: &mut Writer) {
    let start = w.len();
    w.u16(1);
    w.u16(0);
    let set = |f: FieldLoc| m.mask.get(f) != 0;
    let exact = |f: FieldLoc| (m.mask.get(f) == f.full()).then(|| m.value.get(f));
    if set(key::IN_PORT) {
        let (v, k) = get(m, key::IN_PORT);
        put(w, CLASS_OXM, IN_PORT, 4, v, k);
    }
    let dl = exact(key::DL_TYPE);
    if set(key::DL_TYPE) {
        let (v, k) = get(m, key::DL_TYPE);
        put(w, CLASS_OXM, ETH_TYPE, 2, v, k);
    }
    if set(key::VLAN_TCI) {
        let (v, k) = get(m, key::VLAN_TCI);
        let cfi = key::VLAN_CFI as u128;
        let low = k & 0x1fff;
        let pcp = k & 0xe000;
        if (low == 0x1fff || low == cfi) && v & cfi != 0 && (pcp == 0 || pcp == 0xe000) {
            let k = if low == 0x1fff { 0xffff } else { low };
            put(w, CLASS_OXM, VLAN_VID, 2, v & low, k);
            if pcp != 0 {
                put(w, CLASS_OXM, VLAN_PCP, 1, v >> 13, 0xff);
            }
        } else {
            put(w, CLASS_NXM0, 4, 2, v, k);
        }
    }
    for (f, field) in [(key::DL_SRC, ETH_SRC), (key::DL_DST, ETH_DST)] {
        if set(f) {
            let (v, k) = get(m, f);
            put(w, CLASS_OXM, field, 6, v, k);
        }
    }
    let proto = exact(key::NW_PROTO);
    if set(key::NW_PROTO) {
        let (v, k) = get(m, key::NW_PROTO);
        if dl == Some(0x0806) {
            put(w, CLASS_OXM, ARP_OP, 2, v, 0xffff);
        } else {
            put(w, CLASS_OXM, IP_PROTO, 1, v, k);
        }
    }
    if set(key::NW_TOS) {
        let (v, k) = get(m, key::NW_TOS);
        if k & 0xfc != 0 {
            put(w, CLASS_OXM, IP_DSCP, 1, v >> 2, 0xff);
        }
        if k & 0x03 != 0 {
            put(w, CLASS_OXM, IP_ECN, 1, v & 3, 0xff);
        }
    }
    if set(key::NW_TTL) {
        let (v, k) = get(m, key::NW_TTL);
        put(w, CLASS_NXM1, NX_IP_TTL, 1, v, k);
    }
    if dl == Some(0x86dd) {
        for (word, field) in [
            (key::IPV6_SRC_WORD, IPV6_SRC),
            (key::IPV6_DST_WORD, IPV6_DST),
        ] {
            let k = m.mask.get128(word);
            if k != 0 {
                put(w, CLASS_OXM, field, 16, m.value.get128(word), k);
            }
        }
        if set(key::IPV6_LABEL) {
            // 20 bits in 4 bytes: the whole label is an exact match.
            let (v, k) = get(m, key::IPV6_LABEL);
            let k = if k == key::IPV6_LABEL.full() as u128 {
                u128::MAX
            } else {
                k
            };
            put(w, CLASS_OXM, IPV6_FLABEL, 4, v, k);
        }
    } else {
        let arp = dl == Some(0x0806);
        for (f, ip, ar) in [
            (key::NW_SRC, IPV4_SRC, ARP_SPA),
            (key::NW_DST, IPV4_DST, ARP_TPA),
        ] {
            if set(f) {
                let (v, k) = get(m, f);
                put(w, CLASS_OXM, if arp { ar } else { ip }, 4, v, k);
            }
        }
        for (f, field) in [(key::ARP_SHA, ARP_SHA), (key::ARP_THA, ARP_THA)] {
            if arp && set(f) {
                let (v, k) = get(m, f);
                put(w, CLASS_OXM, field, 6, v, k);
            }
        }
    }
    if matches!(dl, Some(0x8847 | 0x8848)) {
        for (f, field, n) in [
            (key::MPLS_LABEL, MPLS_LABEL, 4),
            (key::MPLS_TC, MPLS_TC, 1),
            (key::MPLS_BOS, MPLS_BOS, 1),
        ] {
            if set(f) {
                // The fields take no mask (the parser allows none).
                let (v, _) = get(m, f);
                put(w, CLASS_OXM, field, n, v, u128::MAX);
            }
        }
    }
    let (src, dst) = match (dl, proto) {
        (_, Some(6)) => (TCP_SRC, TCP_DST),
        (_, Some(17)) => (UDP_SRC, UDP_DST),
        (_, Some(132)) => (SCTP_SRC, SCTP_DST),
        (Some(0x0800), Some(1)) => (ICMPV4_TYPE, ICMPV4_CODE),
        (Some(0x86dd), Some(58)) => (ICMPV6_TYPE, ICMPV6_CODE),
        _ => (TCP_SRC, TCP_DST),
    };
    let icmp = matches!(src, ICMPV4_TYPE | ICMPV6_TYPE);
    for (f, field) in [(key::TP_SRC, src), (key::TP_DST, dst)] {
        if set(f) {
            let (v, k) = get(m, f);
            if icmp {
                put(w, CLASS_OXM, field, 1, v, 0xff);
            } else {
                put(w, CLASS_OXM, field, 2, v, k);
            }
        }
    }
    if dl == Some(0x86dd) && proto == Some(58) {
        // Neighbour discovery's fields (their prerequisite: icmp6 with the
        // type, written just before).
        let k = m.mask.get128(key::ND_TARGET_WORD);
        if k != 0 {
            let v = m.value.get128(key::ND_TARGET_WORD);
            put(w, CLASS_OXM, IPV6_ND_TARGET, 16, v, k);
        }
        for (f, field) in [(key::ND_SLL, IPV6_ND_SLL), (key::ND_TLL, IPV6_ND_TLL)] {
            if set(f) {
                let (v, k) = get(m, f);
                put(w, CLASS_OXM, field, 6, v, k);
            }
        }
    }
    if set(key::TCP_FLAGS) {
        let (v, k) = get(m, key::TCP_FLAGS);
        put(w, CLASS_NXM1, NX_TCP_FLAGS, 2, v, k);
    }
    for i in 0..key::REGS {
        let f = key::reg(i);
        if set(f) {
            let (v, k) = get(m, f);
            put(w, CLASS_NXM1, i as u8, 4, v, k);
        }
    }
    if set(key::METADATA) {
        let (v, k) = get(m, key::METADATA);
        put(w, CLASS_OXM, METADATA, 8, v, k);
    }
    if set(key::TUN_ID) {
        let (v, k) = get(m, key::TUN_ID);
        put(w, CLASS_OXM, TUNNEL_ID, 8, v, k);
    }
    let len = (w.len() - start) as u16;
    w.put_u16(start + 2, len);
    w.pad8();
}
