//! Builders write a complete frame (Ethernet, 0-2 VLAN tags, IPv4 or IPv6,
//! UDP/TCP/ICMP echo, payload) with correct lengths and checksums into a
//! caller's buffer and return its length. No allocation: generators call
//! them once per template and then patch fields.
//!
//! ```
//! use linerate_wire::build::{build_udp, FrameParams, IpPair};
//! let mut buf = [0u8; 128];
//! let mut p = FrameParams::new(IpPair::V4 { src: [10, 0, 0, 1], dst: [10, 0, 0, 2] });
//! p.payload = b"hello";
//! let n = build_udp(&mut buf, &p, 1234, 5678).unwrap();
//! let l = linerate_wire::parse_frame(&buf[..n]).unwrap();
//! assert_eq!((l.src_port, l.dst_port), (1234, 5678));
//! ```

use crate::arp::{self, ArpRepr};
use crate::checksum;
use crate::ethernet::{ethertype, Mac, HEADER_LEN as ETH_LEN};
use crate::icmp;
use crate::ipv4::{self, proto, Ipv4Repr};
use crate::ipv6::{self, Ipv6Repr};
use crate::tcp::{self, TcpRepr};
use crate::udp;
use crate::vlan;
use crate::{put16, Error, Result};

/// Source and destination addresses, which also pick the IP version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpPair {
    V4 { src: [u8; 4], dst: [u8; 4] },
    V6 { src: [u8; 16], dst: [u8; 16] },
}

/// Everything below L4 plus the payload.
#[derive(Debug, Clone, Copy)]
pub struct FrameParams<'a> {
    pub eth_dst: Mac,
    pub eth_src: Mac,
    /// VLAN TCIs, outermost first, at most 2 (two tags = QinQ, outer TPID 0x88a8).
    pub vlans: &'a [u16],
    pub ip: IpPair,
    /// TTL / hop limit.
    pub ttl: u8,
    /// IPv4 TOS byte / IPv6 traffic class.
    pub tos: u8,
    /// IPv4 identification.
    pub ip_id: u16,
    /// IPv6 flow label.
    pub flow_label: u32,
    /// Bytes after the L4 header.
    pub payload: &'a [u8],
}

impl<'a> FrameParams<'a> {
    /// Defaults: MACs 02:00:00:00:00:01 -> 02:00:00:00:00:02, no VLAN,
    /// TTL 64, DF set for IPv4, empty payload.
    pub fn new(ip: IpPair) -> FrameParams<'a> {
        FrameParams {
            eth_dst: [0x02, 0, 0, 0, 0, 0x02],
            eth_src: [0x02, 0, 0, 0, 0, 0x01],
            vlans: &[],
            ip,
            ttl: 64,
            tos: 0,
            ip_id: 0,
            flow_label: 0,
            payload: &[],
        }
    }
}

fn l2(buf: &mut [u8], dst: Mac, src: Mac, vlans: &[u16], inner: u16) -> Result<usize> {
    let h = buf.get_mut(..12).ok_or(Error::BufferTooSmall)?;
    h[..6].copy_from_slice(&dst);
    h[6..12].copy_from_slice(&src);
    Ok(12 + vlan::emit_stack(&mut buf[12..], vlans, inner)?)
}

/// Writes L2 + L3 headers and the payload; returns (l4 offset, total length).
fn frame(buf: &mut [u8], p: &FrameParams, l4_proto: u8, l4_hdr: usize) -> Result<(usize, usize)> {
    let l4_len = l4_hdr + p.payload.len();
    let (et, l3_len) = match p.ip {
        IpPair::V4 { .. } => (ethertype::IPV4, ipv4::MIN_HEADER_LEN),
        IpPair::V6 { .. } => (ethertype::IPV6, ipv6::HEADER_LEN),
    };
    if p.vlans.len() > vlan::MAX_TAGS || l3_len + l4_len > u16::MAX as usize {
        return Err(Error::BadParam);
    }
    let total = ETH_LEN + vlan::TAG_LEN * p.vlans.len() + l3_len + l4_len;
    if buf.len() < total {
        return Err(Error::BufferTooSmall);
    }
    let off = l2(buf, p.eth_dst, p.eth_src, p.vlans, et)?;
    let l3 = match p.ip {
        IpPair::V4 { src, dst } => ipv4::emit(
            &mut buf[off..],
            &Ipv4Repr {
                src,
                dst,
                protocol: l4_proto,
                ttl: p.ttl,
                tos: p.tos,
                ident: p.ip_id,
                dont_frag: true,
                payload_len: l4_len,
            },
            &[],
        )?,
        IpPair::V6 { src, dst } => ipv6::emit(
            &mut buf[off..],
            &Ipv6Repr {
                src,
                dst,
                next_header: l4_proto,
                hop_limit: p.ttl,
                traffic_class: p.tos,
                flow_label: p.flow_label,
                payload_len: l4_len,
            },
        )?,
    };
    let l4 = off + l3;
    buf[l4 + l4_hdr..total].copy_from_slice(p.payload);
    Ok((l4, total))
}

/// Compute the pseudo-header L4 checksum of `seg` and store it at `at`.
fn fill_l4(seg: &mut [u8], ip: &IpPair, l4_proto: u8, at: usize) {
    put16(seg, at, 0);
    let c = match ip {
        IpPair::V4 { src, dst } => checksum::l4_checksum_v4(src, dst, l4_proto, seg),
        IpPair::V6 { src, dst } => checksum::l4_checksum_v6(src, dst, l4_proto, seg),
    };
    let c = if l4_proto == proto::UDP {
        udp::wire_checksum(c)
    } else {
        c
    };
    put16(seg, at, c);
}

/// Build Ethernet [+ VLANs] + IPv4/IPv6 + UDP + payload; returns the frame length.
pub fn build_udp(buf: &mut [u8], p: &FrameParams, src_port: u16, dst_port: u16) -> Result<usize> {
    let (l4, total) = frame(buf, p, proto::UDP, udp::HEADER_LEN)?;
    udp::emit(&mut buf[l4..], src_port, dst_port, p.payload.len())?;
    fill_l4(&mut buf[l4..total], &p.ip, proto::UDP, 6);
    Ok(total)
}

/// Build Ethernet [+ VLANs] + IPv4/IPv6 + TCP (no options) + payload.
pub fn build_tcp(buf: &mut [u8], p: &FrameParams, t: &TcpRepr) -> Result<usize> {
    let (l4, total) = frame(buf, p, proto::TCP, tcp::MIN_HEADER_LEN)?;
    tcp::emit(&mut buf[l4..], t, &[])?;
    fill_l4(&mut buf[l4..total], &p.ip, proto::TCP, 16);
    Ok(total)
}

/// Build an ICMP echo request (or reply): ICMPv4 for [`IpPair::V4`],
/// ICMPv6 for [`IpPair::V6`].
pub fn build_icmp_echo(
    buf: &mut [u8],
    p: &FrameParams,
    request: bool,
    ident: u16,
    seq: u16,
) -> Result<usize> {
    let (l4_proto, ty) = match (p.ip, request) {
        (IpPair::V4 { .. }, true) => (proto::ICMP, icmp::v4::ECHO_REQUEST),
        (IpPair::V4 { .. }, false) => (proto::ICMP, icmp::v4::ECHO_REPLY),
        (IpPair::V6 { .. }, true) => (proto::ICMPV6, icmp::v6::ECHO_REQUEST),
        (IpPair::V6 { .. }, false) => (proto::ICMPV6, icmp::v6::ECHO_REPLY),
    };
    let (l4, total) = frame(buf, p, l4_proto, icmp::HEADER_LEN)?;
    icmp::emit_echo(&mut buf[l4..], ty, ident, seq)?;
    let seg = &mut buf[l4..total];
    if l4_proto == proto::ICMP {
        let c = checksum::checksum(seg);
        put16(seg, 2, c);
    } else {
        fill_l4(seg, &p.ip, l4_proto, 2);
    }
    Ok(total)
}

/// Build an IPv6 neighbour solicitation (`advert` false: ICMPv6 type 135)
/// or advertisement (136, its R/S/O flags 0): the ICMPv6 header, `target`,
/// then `p.payload` as the options (see [`nd_lla_option`]), checksummed.
/// `p.ip` must be [`IpPair::V6`].
pub fn build_nd(buf: &mut [u8], p: &FrameParams, advert: bool, target: &[u8; 16]) -> Result<usize> {
    if !matches!(p.ip, IpPair::V6 { .. }) {
        return Err(Error::BadParam);
    }
    let (l4, total) = frame(buf, p, proto::ICMPV6, icmp::HEADER_LEN + 16)?;
    let seg = &mut buf[l4..total];
    seg[0] = if advert {
        icmp::v6::NEIGHBOR_ADVERT
    } else {
        icmp::v6::NEIGHBOR_SOLICIT
    };
    seg[1..icmp::HEADER_LEN].fill(0);
    seg[icmp::HEADER_LEN..icmp::HEADER_LEN + 16].copy_from_slice(target);
    fill_l4(seg, &p.ip, proto::ICMPV6, 2);
    Ok(total)
}

/// A neighbour discovery link-layer address option (RFC 4861 4.6.1): `kind`
/// 1 (source) or 2 (target), length 1 (8 bytes), the MAC.
pub fn nd_lla_option(kind: u8, mac: Mac) -> [u8; 8] {
    let mut o = [kind, 1, 0, 0, 0, 0, 0, 0];
    o[2..].copy_from_slice(&mac);
    o
}

/// Build Ethernet [+ VLANs] + ARP. Returns the frame length (42 untagged;
/// pad to 60 yourself if the port does not).
pub fn build_arp(
    buf: &mut [u8],
    eth_dst: Mac,
    eth_src: Mac,
    vlans: &[u16],
    r: &ArpRepr,
) -> Result<usize> {
    if vlans.len() > vlan::MAX_TAGS {
        return Err(Error::BadParam);
    }
    let total = ETH_LEN + vlan::TAG_LEN * vlans.len() + arp::PACKET_LEN;
    if buf.len() < total {
        return Err(Error::BufferTooSmall);
    }
    let off = l2(buf, eth_dst, eth_src, vlans, ethertype::ARP)?;
    arp::emit(&mut buf[off..], r)?;
    Ok(total)
}
