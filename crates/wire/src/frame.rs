//! [`parse_frame`] walks Ethernet -> up to two VLAN tags -> IPv4/IPv6 (with
//! extension headers) -> UDP/TCP/ICMP in one pass over the bytes, with no
//! allocation and a handful of branches, and returns a [`Layers`] summary:
//! offsets of every layer, the 5-tuple, TCP flags and fragment state.
//!
//! The rewrite helpers change an address or port in place and patch the IP
//! and L4 checksums incrementally (RFC 1624), as a NAT does.

use crate::checksum;
use crate::ethernet::{ethertype, HEADER_LEN as ETH_LEN};
use crate::flow::{v4_mapped, FlowKey};
use crate::ipv4::{self, proto};
use crate::ipv6;
use crate::tcp;
use crate::vlan;
use crate::{be16, Error, Result};

/// Network layer found by [`parse_frame`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum L3 {
    /// Unknown EtherType, or more than two VLAN tags.
    #[default]
    None,
    Ipv4,
    Ipv6,
    Arp,
}

/// Transport layer found by [`parse_frame`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum L4 {
    /// No L4 header: not IP, or a non-first fragment.
    #[default]
    None,
    Udp,
    Tcp,
    Icmpv4,
    Icmpv6,
    /// Another protocol (`Layers::proto`); `l4_offset` is where it starts.
    Other,
}

/// `Layers::flags`: the packet is an IP fragment (first or later).
pub const FLAG_FRAGMENT: u8 = 1;
/// `Layers::flags`: the packet is a non-first fragment (no L4 header).
pub const FLAG_LATER_FRAGMENT: u8 = 2;

/// Offsets (from the start of the frame) and fields of every layer found.
///
/// Offsets satisfy `l3_offset <= l4_offset <= payload_offset <= end <= frame.len()`
/// whenever the corresponding layer is present; `end` is where the IP
/// packet ends (Ethernet padding excluded), or the frame length for non-IP.
/// Offsets are `u32`: frames are far below 4 GiB.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Layers {
    /// VLAN tags, outermost first.
    pub vlans: vlan::Stack,
    /// Innermost EtherType (after the VLAN tags).
    pub ethertype: u16,
    pub l3: L3,
    pub l3_offset: u32,
    pub l4: L4,
    /// IP protocol / IPv6 upper-layer next header (0 when not IP).
    pub proto: u8,
    pub l4_offset: u32,
    /// Start of the L4 payload (after the UDP/TCP/ICMP header).
    pub payload_offset: u32,
    pub end: u32,
    /// Addresses; IPv4 as v4-mapped IPv6 (`::ffff:a.b.c.d`). Zero when not IP.
    pub src_ip: [u8; 16],
    pub dst_ip: [u8; 16],
    /// Ports for UDP/TCP, 0 otherwise.
    pub src_port: u16,
    pub dst_port: u16,
    /// TCP flags (9 bits, see [`crate::tcp::flags`]), 0 otherwise.
    pub tcp_flags: u16,
    /// [`FLAG_FRAGMENT`] | [`FLAG_LATER_FRAGMENT`].
    pub flags: u8,
}

impl Layers {
    /// The 5-tuple as a [`FlowKey`] (ports 0 when there is no UDP/TCP header).
    #[inline(always)]
    pub fn flow_key(&self) -> FlowKey {
        FlowKey {
            src_ip: self.src_ip,
            dst_ip: self.dst_ip,
            src_port: self.src_port,
            dst_port: self.dst_port,
            proto: self.proto,
        }
    }
    /// True for IPv4 or IPv6.
    pub fn is_ip(&self) -> bool {
        matches!(self.l3, L3::Ipv4 | L3::Ipv6)
    }
    pub fn is_fragment(&self) -> bool {
        self.flags & FLAG_FRAGMENT != 0
    }
    /// The L3 packet (header + payload, padding excluded) within `frame`.
    pub fn l3_bytes<'a>(&self, frame: &'a [u8]) -> &'a [u8] {
        frame
            .get(self.l3_offset as usize..self.end as usize)
            .unwrap_or(&[])
    }
    /// The L4 segment (header + payload) within `frame`, empty if none.
    pub fn l4_bytes<'a>(&self, frame: &'a [u8]) -> &'a [u8] {
        if self.l4 == L4::None {
            return &[];
        }
        frame
            .get(self.l4_offset as usize..self.end as usize)
            .unwrap_or(&[])
    }
    /// The L4 payload within `frame` (after the UDP/TCP/ICMP header).
    pub fn payload<'a>(&self, frame: &'a [u8]) -> &'a [u8] {
        frame
            .get(self.payload_offset as usize..self.end as usize)
            .unwrap_or(&[])
    }
}

/// Parse a whole Ethernet frame. `Err` if any header present is truncated
/// or malformed; unknown EtherTypes and IP protocols are not errors (the
/// walk stops there with `L3::None` / `L4::Other`).
#[inline]
pub fn parse_frame(f: &[u8]) -> Result<Layers> {
    let mut l = Layers::default();
    if f.len() < ETH_LEN {
        return Err(Error::Truncated);
    }
    let mut et = be16(f, 12);
    let mut off = ETH_LEN;
    if vlan::is_tpid(et) {
        let p = vlan::parse_stack(et, &f[ETH_LEN..])?;
        l.vlans = p.stack;
        et = p.ethertype;
        off += p.len;
    }
    l.ethertype = et;
    l.l3_offset = off as u32;
    l.l4_offset = off as u32;
    l.payload_offset = off as u32;
    l.end = f.len() as u32;
    match et {
        ethertype::IPV4 => parse_ipv4(f, off, &mut l)?,
        ethertype::IPV6 => parse_ipv6(f, off, &mut l)?,
        ethertype::ARP => {
            crate::arp::ArpPacket::new_checked(&f[off..])?;
            l.l3 = L3::Arp;
        }
        _ => {}
    }
    Ok(l)
}

#[inline(always)]
fn parse_ipv4(f: &[u8], off: usize, l: &mut Layers) -> Result<()> {
    let b = &f[off..];
    let (hl, total) = ipv4::check(b)?;
    l.l3 = L3::Ipv4;
    l.end = (off + total) as u32;
    l.src_ip = v4_mapped([b[12], b[13], b[14], b[15]]);
    l.dst_ip = v4_mapped([b[16], b[17], b[18], b[19]]);
    let p = b[9];
    l.proto = p;
    let l4 = off + hl;
    l.l4_offset = l4 as u32;
    l.payload_offset = l4 as u32;
    let fo = u16::from_be_bytes([b[6], b[7]]);
    if fo & 0x3fff != 0 {
        l.flags |= FLAG_FRAGMENT;
        if fo & 0x1fff != 0 {
            l.flags |= FLAG_LATER_FRAGMENT;
            return Ok(());
        }
    }
    parse_l4(&f[l4..off + total], l4, p, false, l)
}

#[inline(always)]
fn parse_ipv6(f: &[u8], off: usize, l: &mut Layers) -> Result<()> {
    let b = &f[off..];
    let plen = ipv6::check(b)?;
    l.l3 = L3::Ipv6;
    let end = off + ipv6::HEADER_LEN + plen;
    l.end = end as u32;
    l.src_ip = crate::arr(b, 8);
    l.dst_ip = crate::arr(b, 24);
    let payload = &f[off + ipv6::HEADER_LEN..end];
    let nh = b[6];
    let (p, ext_len) = if ipv6::is_ext_header(nh) {
        let w = ipv6::walk_ext_headers(nh, payload)?;
        if let Some(fr) = w.frag {
            l.flags |= FLAG_FRAGMENT;
            if fr.offset != 0 {
                l.flags |= FLAG_LATER_FRAGMENT;
            }
        }
        (w.proto, w.offset)
    } else {
        (nh, 0)
    };
    l.proto = p;
    let l4 = off + ipv6::HEADER_LEN + ext_len;
    l.l4_offset = l4 as u32;
    l.payload_offset = l4 as u32;
    if l.flags & FLAG_LATER_FRAGMENT != 0 {
        return Ok(());
    }
    let seg = f.get(l4..end).ok_or(Error::Truncated)?;
    parse_l4(seg, l4, p, true, l)
}

#[inline(always)]
fn parse_l4(seg: &[u8], l4: usize, p: u8, v6: bool, l: &mut Layers) -> Result<()> {
    match p {
        proto::UDP => {
            if seg.len() < 8 {
                return Err(Error::Truncated);
            }
            let ulen = u16::from_be_bytes([seg[4], seg[5]]) as usize;
            // A first fragment carries only part of the datagram.
            if l.flags & FLAG_FRAGMENT == 0 {
                if ulen < 8 {
                    return Err(Error::BadLength);
                }
                if ulen > seg.len() {
                    return Err(Error::Truncated);
                }
            }
            l.l4 = L4::Udp;
            l.src_port = u16::from_be_bytes([seg[0], seg[1]]);
            l.dst_port = u16::from_be_bytes([seg[2], seg[3]]);
            l.payload_offset = (l4 + 8) as u32;
        }
        proto::TCP => {
            let hl = tcp::check(seg)?;
            l.l4 = L4::Tcp;
            l.src_port = u16::from_be_bytes([seg[0], seg[1]]);
            l.dst_port = u16::from_be_bytes([seg[2], seg[3]]);
            l.tcp_flags = u16::from_be_bytes([seg[12], seg[13]]) & 0x01ff;
            l.payload_offset = (l4 + hl) as u32;
        }
        proto::ICMP | proto::ICMPV6 if (p == proto::ICMPV6) == v6 => {
            if seg.len() < crate::icmp::HEADER_LEN {
                return Err(Error::Truncated);
            }
            l.l4 = if v6 { L4::Icmpv6 } else { L4::Icmpv4 };
            l.payload_offset = (l4 + crate::icmp::HEADER_LEN) as u32;
        }
        _ => l.l4 = L4::Other,
    }
    Ok(())
}

/// Which endpoint of a packet to rewrite.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    Src,
    Dst,
}

/// Offset of the L4 checksum field for TCP/UDP/ICMPv6 (the ones covering a
/// pseudo-header), if the L4 header is present.
fn pseudo_l4_csum_off(l: &Layers) -> Option<usize> {
    match l.l4 {
        L4::Tcp => Some(l.l4_offset as usize + 16),
        L4::Udp => Some(l.l4_offset as usize + 6),
        L4::Icmpv6 => Some(l.l4_offset as usize + 2),
        _ => None,
    }
}

fn patch_l4(frame: &mut [u8], l: &Layers, f: impl Fn(u16) -> u16) {
    if let Some(o) = pseudo_l4_csum_off(l) {
        let old = be16(frame, o);
        if l.l4 == L4::Udp {
            // 0 = no checksum (IPv4 only): leave it; a result of 0 is sent as 0xffff.
            if old == 0 && l.l3 == L3::Ipv4 {
                return;
            }
            crate::put16(frame, o, crate::udp::wire_checksum(f(old)));
        } else {
            crate::put16(frame, o, f(old));
        }
    }
}

/// Rewrite an IPv4 address in place, fixing the IP header checksum and the
/// TCP/UDP checksum incrementally; `l` is updated. `Err(BadParam)` if `l`
/// is not IPv4 or does not fit `frame`.
pub fn rewrite_ipv4_addr(
    frame: &mut [u8],
    l: &mut Layers,
    which: Endpoint,
    new: [u8; 4],
) -> Result<()> {
    if l.l3 != L3::Ipv4 || (l.end as usize) > frame.len() {
        return Err(Error::BadParam);
    }
    let ip = l.l3_offset as usize;
    let a = ip + if which == Endpoint::Src { 12 } else { 16 };
    let old: [u8; 4] = crate::arr(frame, a);
    let (o32, n32) = (u32::from_be_bytes(old), u32::from_be_bytes(new));
    let c = checksum::update32(be16(frame, ip + 10), o32, n32);
    crate::put16(frame, ip + 10, c);
    crate::put_bytes(frame, a, &new);
    patch_l4(frame, l, |hc| checksum::update32(hc, o32, n32));
    match which {
        Endpoint::Src => l.src_ip = v4_mapped(new),
        Endpoint::Dst => l.dst_ip = v4_mapped(new),
    }
    Ok(())
}

/// Rewrite an IPv6 address in place, fixing the TCP/UDP/ICMPv6 checksum
/// incrementally; `l` is updated.
pub fn rewrite_ipv6_addr(
    frame: &mut [u8],
    l: &mut Layers,
    which: Endpoint,
    new: [u8; 16],
) -> Result<()> {
    if l.l3 != L3::Ipv6 || (l.end as usize) > frame.len() {
        return Err(Error::BadParam);
    }
    let a = l.l3_offset as usize + if which == Endpoint::Src { 8 } else { 24 };
    let old: [u8; 16] = crate::arr(frame, a);
    crate::put_bytes(frame, a, &new);
    patch_l4(frame, l, |hc| checksum::update_bytes(hc, &old, &new));
    match which {
        Endpoint::Src => l.src_ip = new,
        Endpoint::Dst => l.dst_ip = new,
    }
    Ok(())
}

/// Rewrite a TCP/UDP port in place, fixing the L4 checksum incrementally;
/// `l` is updated. `Err(BadParam)` if there is no TCP/UDP header.
pub fn rewrite_port(frame: &mut [u8], l: &mut Layers, which: Endpoint, new: u16) -> Result<()> {
    if !matches!(l.l4, L4::Tcp | L4::Udp) || (l.end as usize) > frame.len() {
        return Err(Error::BadParam);
    }
    let o = l.l4_offset as usize + if which == Endpoint::Src { 0 } else { 2 };
    let old = be16(frame, o);
    crate::put16(frame, o, new);
    patch_l4(frame, l, |hc| checksum::update16(hc, old, new));
    match which {
        Endpoint::Src => l.src_port = new,
        Endpoint::Dst => l.dst_port = new,
    }
    Ok(())
}
impl FlowKey {
    /// Parse `frame` and extract its 5-tuple (here, beside the parser, so
    /// that the flow key's own file needs nothing of the frame's).
    #[inline]
    pub fn from_frame(frame: &[u8]) -> Result<FlowKey> {
        parse_frame(frame).map(|l| l.flow_key())
    }
}
