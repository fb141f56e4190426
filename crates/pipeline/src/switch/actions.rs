//! Applying a rule's actions to a frame in place, meters (token buckets)
//! (groups: [`super::group`]).
//!
//! # Frames and headroom
//!
//! A [`FrameBuf`] is a buffer `buf` holding the frame at
//! `buf[start..start + len]`: `start` bytes of headroom before it and
//! `buf.len() - start - len` bytes of tailroom after it. `push_vlan` needs 4
//! bytes: it takes them from the headroom when there is any (moving only
//! the 12 MAC bytes, so a port that reserves headroom makes it cheap) and
//! else from the tailroom (moving the rest of the frame up by 4). With
//! neither, the action fails with [`Verdict::NoRoom`] and the datapath
//! counts a drop "no room for VLAN tag". `pop_vlan` moves the MACs forward
//! and grows the headroom.
//!
//! # Execution
//!
//! [`execute`] walks the actions in order (OpenFlow "apply-actions"):
//! every output sees the frame as modified by the actions before it.
//! Header rewrites patch checksums incrementally (RFC 1624) through
//! `linerate_wire`: IPv4 header checksum for addresses, DSCP and TTL;
//! TCP/UDP/ICMPv6 checksums for addresses (pseudo-header) and ports. A
//! rewrite of a header the frame does not have is a no-op (the rule's
//! prerequisites make that rare: only frames whose upper layers failed to
//! parse). `set_field:vid->vlan_vid` changes the VID of an existing outer
//! tag and does nothing on an untagged frame (use `push_vlan` first).

use super::key;
use super::rule::{q, Action, Pin, PipeState, SetField};
use linerate_wire::frame::{self, parse_frame, Endpoint, Layers, L3, L4};
use linerate_wire::{checksum, vlan};

/// A frame inside a buffer with headroom and tailroom.
#[derive(Debug)]
pub struct FrameBuf<'a> {
    pub buf: &'a mut [u8],
    pub start: usize,
    pub len: usize,
}

impl<'a> FrameBuf<'a> {
    /// `buf[start..start + len]` is the frame; `None` if that is out of bounds.
    pub fn new(buf: &'a mut [u8], start: usize, len: usize) -> Option<FrameBuf<'a>> {
        (start.checked_add(len)? <= buf.len()).then_some(FrameBuf { buf, start, len })
    }

    #[inline(always)]
    pub fn bytes(&self) -> &[u8] {
        &self.buf[self.start..self.start + self.len]
    }

    #[inline(always)]
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.buf[self.start..self.start + self.len]
    }

    /// Insert an outer 802.1Q/802.1ad tag (`tpid`, TCI `tci`) after the MACs.
    pub fn push_vlan(&mut self, tpid: u16, tci: u16) -> Result<(), Verdict> {
        self.open4(12)?;
        let s = self.start;
        self.buf[s + 12..s + 14].copy_from_slice(&tpid.to_be_bytes());
        self.buf[s + 14..s + 16].copy_from_slice(&tci.to_be_bytes());
        Ok(())
    }

    /// Make 4 bytes of room at `at` (the bytes before it move into the
    /// headroom, or, without headroom, those after it into the tailroom).
    fn open4(&mut self, at: usize) -> Result<(), Verdict> {
        if self.len < at {
            return Err(Verdict::Malformed);
        }
        if self.start >= 4 {
            let s = self.start;
            self.buf.copy_within(s..s + at, s - 4);
            self.start -= 4;
        } else if self.buf.len() - self.start - self.len >= 4 {
            let s = self.start;
            self.buf.copy_within(s + at..s + self.len, s + at + 4);
        } else {
            return Err(Verdict::NoRoom);
        }
        self.len += 4;
        Ok(())
    }

    /// Remove the 4 bytes at `at` (the bytes before them move up).
    fn close4(&mut self, at: usize) {
        let s = self.start;
        self.buf.copy_within(s..s + at, s + 4);
        self.start += 4;
        self.len -= 4;
    }

    /// `push_mpls` (see [`Action::PushMpls`]): `l` are the frame's layers.
    fn push_mpls(&mut self, et: u16, l: &Layers) -> Result<(), Verdict> {
        let o = l.l3_offset as usize;
        let b = self.bytes();
        let lse = if is_mpls(l.ethertype) {
            if b.len() < o + 4 {
                return Err(Verdict::Malformed);
            }
            u32::from_be_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]) & !0x100
        } else {
            let (label, tc, ttl) = match l.l3 {
                L3::Ipv4 => (0, (b[o + 1] >> 2) & 7, b[o + 8]),
                L3::Ipv6 => (2, (((b[o] & 0x0f) << 4 | b[o + 1] >> 4) >> 2) & 7, b[o + 7]),
                _ => (0, 0, 0),
            };
            let ttl = if ttl == 0 { 64 } else { ttl };
            label << 12 | (tc as u32) << 9 | 0x100 | ttl as u32
        };
        self.open4(o)?;
        let s = self.start;
        self.buf[s + o - 2..s + o].copy_from_slice(&et.to_be_bytes());
        self.buf[s + o..s + o + 4].copy_from_slice(&lse.to_be_bytes());
        Ok(())
    }

    /// `pop_mpls` (see [`Action::PopMpls`]); a frame without MPLS is left
    /// as it is.
    fn pop_mpls(&mut self, et: u16, l: &Layers) {
        let o = l.l3_offset as usize;
        if !is_mpls(l.ethertype) || self.len < o + 4 {
            return;
        }
        self.close4(o);
        let s = self.start;
        self.buf[s + o - 2..s + o].copy_from_slice(&et.to_be_bytes());
    }

    /// The top MPLS entry, for a rewrite (`None`: no MPLS).
    fn lse(&mut self, l: &Layers) -> Option<&mut [u8]> {
        let o = l.l3_offset as usize;
        (is_mpls(l.ethertype) && self.len >= o + 4).then(|| &mut self.bytes_mut()[o..o + 4])
    }

    /// Remove the outer VLAN tag, if any (no-op otherwise).
    pub fn pop_vlan(&mut self) {
        let b = self.bytes();
        if b.len() < 18 || !vlan::is_tpid(u16::from_be_bytes([b[12], b[13]])) {
            return;
        }
        let s = self.start;
        self.buf.copy_within(s..s + 12, s + 4);
        self.start += 4;
        self.len -= 4;
    }
}

/// Why execution stopped early (the frame is then dropped, counted by reason).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// `dec_ttl` on a TTL / hop limit of 0 or 1.
    TtlExpired,
    /// A meter's bucket was empty.
    Metered,
    /// `push_vlan` with neither headroom nor tailroom.
    NoRoom,
    /// The frame is too short for the action.
    Malformed,
    /// The pipeline went deeper than its resubmit limit (a loop).
    TooDeep,
}

/// Where an output goes; the datapath resolves these (flood/all exclude
/// or include the input port, groups replicate).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Out {
    Port(u32),
    Flood,
    All,
    InPort,
    Group(u32),
    /// A packet-in.
    Controller(super::rule::Pin),
}

/// What [`execute`] needs from the datapath.
pub trait Env {
    /// Send a copy of `frame` (as it is now) to `out`.
    fn output(&mut self, out: Out, frame: &[u8]);
    /// Pass `bytes` through meter `id`; false = drop.
    fn meter(&mut self, id: u32, bytes: usize) -> bool;
    /// A `dec_ttl` found a TTL of 0 or 1 (the frame is dropped): the
    /// `INVALID_TTL` packet-in `p` of `frame`, with the pipeline's state,
    /// if a controller asks for it.
    fn ttl_expired(&mut self, _p: Pin, _frame: &[u8], _pipe: &PipeState) {}
}

fn is_mpls(et: u16) -> bool {
    matches!(et, super::key::ETH_MPLS | super::key::ETH_MPLS_MC)
}

fn layers(f: &FrameBuf, l: &mut Option<Layers>) -> Option<Layers> {
    if l.is_none() {
        *l = parse_frame(f.bytes()).ok();
    }
    *l
}

/// Apply one `set_field` in place.
#[inline(always)]
pub fn set_field(f: &mut FrameBuf, l: &mut Option<Layers>, s: &SetField) {
    // The MACs need no parse (a full parse costs more than the whole rest
    // of a simple action list), and are safe to write in any frame that
    // has them; they move no other header. Inlined: a call into the
    // general case below cost ~30 instructions per packet (its prologue
    // and epilogue) for a 6-byte copy.
    match s {
        SetField::EthDst(m) if f.len >= 12 => f.bytes_mut()[0..6].copy_from_slice(m),
        SetField::EthSrc(m) if f.len >= 12 => f.bytes_mut()[6..12].copy_from_slice(m),
        SetField::EthDst(_) | SetField::EthSrc(_) => {}
        _ => set_field_parsed(f, l, s),
    }
}

/// The `set_field`s that need the frame's layers (parsed on first need).
#[inline(never)]
fn set_field_parsed(f: &mut FrameBuf, l: &mut Option<Layers>, s: &SetField) {
    let Some(mut ly) = layers(f, l) else {
        return;
    };
    let b = f.bytes_mut();
    // Errors below mean "the frame has no such header": a no-op (module doc).
    let _ = match *s {
        // The MACs: written by `set_field` itself, never sent here.
        SetField::EthDst(_) | SetField::EthSrc(_) => Ok(()),
        SetField::Ipv4Src(a) => frame::rewrite_ipv4_addr(b, &mut ly, Endpoint::Src, a),
        SetField::Ipv4Dst(a) => frame::rewrite_ipv4_addr(b, &mut ly, Endpoint::Dst, a),
        // ARP for IPv4 over Ethernet (parse_frame checked its 28 bytes):
        // the sender address at 14, the target's at 24; no checksum.
        SetField::ArpSpa(a) | SetField::ArpTpa(a) => {
            if ly.l3 == L3::Arp {
                let o = ly.l3_offset as usize
                    + if matches!(s, SetField::ArpSpa(_)) {
                        14
                    } else {
                        24
                    };
                b[o..o + 4].copy_from_slice(&a);
            }
            Ok(())
        }
        SetField::Ipv6Src(a) => frame::rewrite_ipv6_addr(b, &mut ly, Endpoint::Src, a),
        SetField::Ipv6Dst(a) => frame::rewrite_ipv6_addr(b, &mut ly, Endpoint::Dst, a),
        SetField::Ipv6Label(v) => {
            // The label is the low 20 bits of the header's first word; no
            // checksum covers it (not in the transport pseudo-header).
            if ly.l3 == L3::Ipv6 {
                let o = ly.l3_offset as usize;
                let old = u32::from_be_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
                let new = (old & !0xf_ffff) | (v & 0xf_ffff);
                b[o..o + 4].copy_from_slice(&new.to_be_bytes());
            }
            Ok(())
        }
        SetField::TcpSrc(p) | SetField::UdpSrc(p) => {
            if (ly.l4 == L4::Tcp) == matches!(s, SetField::TcpSrc(_)) {
                frame::rewrite_port(b, &mut ly, Endpoint::Src, p)
            } else {
                Ok(())
            }
        }
        SetField::TcpDst(p) | SetField::UdpDst(p) => {
            if (ly.l4 == L4::Tcp) == matches!(s, SetField::TcpDst(_)) {
                frame::rewrite_port(b, &mut ly, Endpoint::Dst, p)
            } else {
                Ok(())
            }
        }
        SetField::VlanVid(v) => {
            if ly.vlans.outer().is_some() {
                let tci = u16::from_be_bytes([b[14], b[15]]);
                let n = (tci & 0xf000) | (v & 0x0fff);
                b[14..16].copy_from_slice(&n.to_be_bytes());
                ly.vlans = match parse_frame(b) {
                    Ok(x) => x.vlans,
                    Err(_) => ly.vlans,
                };
            }
            Ok(())
        }
        SetField::IpEcn(e) => {
            let o = ly.l3_offset as usize;
            match ly.l3 {
                L3::Ipv4 => {
                    let old = u16::from_be_bytes([b[o], b[o + 1]]);
                    b[o + 1] = (b[o + 1] & 0xfc) | (e & 3);
                    patch_ipv4_checksum(b, o, old, u16::from_be_bytes([b[o], b[o + 1]]));
                }
                L3::Ipv6 => {
                    // ECN = the traffic class's low 2 bits: byte 1's bits 5..4.
                    b[o + 1] = (b[o + 1] & 0xcf) | ((e & 3) << 4);
                }
                _ => {}
            }
            Ok(())
        }
        SetField::NwTtl(t) => {
            let o = ly.l3_offset as usize;
            match ly.l3 {
                L3::Ipv4 => {
                    let old = u16::from_be_bytes([b[o + 8], b[o + 9]]);
                    b[o + 8] = t;
                    patch_ipv4_checksum(b, o, old, u16::from_be_bytes([b[o + 8], b[o + 9]]));
                }
                L3::Ipv6 => b[o + 7] = t,
                _ => {}
            }
            Ok(())
        }
        SetField::SctpSrc(p) | SetField::SctpDst(p) => {
            set_sctp_port(b, &ly, matches!(s, SetField::SctpSrc(_)), p);
            Ok(())
        }
        SetField::Icmp { v6, code, v } => {
            let o = ly.l4_offset as usize;
            let is = if v6 { L4::Icmpv6 } else { L4::Icmpv4 };
            if ly.l4 == is && b.len() >= o + 4 {
                let old = u16::from_be_bytes([b[o], b[o + 1]]);
                b[o + usize::from(code)] = v;
                let new = u16::from_be_bytes([b[o], b[o + 1]]);
                let c = checksum::update16(u16::from_be_bytes([b[o + 2], b[o + 3]]), old, new);
                b[o + 2..o + 4].copy_from_slice(&c.to_be_bytes());
            }
            Ok(())
        }
        SetField::MplsLabel(v) => {
            set_lse(b, &ly, 0xffff_f000, v << 12);
            Ok(())
        }
        SetField::MplsTc(t) => {
            set_lse(b, &ly, 0xe00, (t as u32 & 7) << 9);
            Ok(())
        }
        SetField::ArpSha(m) | SetField::ArpTha(m) => {
            if ly.l3 == L3::Arp {
                // Sender at 8, target at 18 (parse_frame checked 28 bytes).
                let o = ly.l3_offset as usize
                    + if matches!(s, SetField::ArpSha(_)) {
                        8
                    } else {
                        18
                    };
                b[o..o + 6].copy_from_slice(&m);
            }
            Ok(())
        }
        SetField::NdTarget(a) => {
            if let Some((o, end)) = nd_body(b, &ly) {
                set_nd(b, o, end, o + 8, &a);
            }
            Ok(())
        }
        SetField::NdSll(m) | SetField::NdTll(m) => {
            // The first link-layer address option, if it is of this kind.
            let kind = if matches!(s, SetField::NdSll(_)) {
                1
            } else {
                2
            };
            if let Some((o, end)) = nd_body(b, &ly) {
                match first_lla(b, o + 24, end) {
                    Some(at) if b[at] == kind => set_nd(b, o, end, at + 2, &m),
                    _ => {}
                }
            }
            Ok(())
        }
        SetField::VlanPcp(p) => {
            if ly.vlans.outer().is_some() {
                let tci = u16::from_be_bytes([b[14], b[15]]);
                let n = (tci & 0x1fff) | ((p as u16 & 7) << 13);
                b[14..16].copy_from_slice(&n.to_be_bytes());
                ly.vlans = match parse_frame(b) {
                    Ok(x) => x.vlans,
                    Err(_) => ly.vlans,
                };
            }
            Ok(())
        }
        SetField::IpDscp(d) => {
            let o = ly.l3_offset as usize;
            match ly.l3 {
                L3::Ipv4 => {
                    let old = u16::from_be_bytes([b[o], b[o + 1]]);
                    b[o + 1] = (d << 2) | (b[o + 1] & 3);
                    patch_ipv4_checksum(b, o, old, u16::from_be_bytes([b[o], b[o + 1]]));
                }
                L3::Ipv6 => {
                    // Traffic class = low nibble of byte 0 and high nibble of byte 1.
                    let tc = (d << 2) | ((((b[o] & 0x0f) << 4) | (b[o + 1] >> 4)) & 3);
                    b[o] = (b[o] & 0xf0) | (tc >> 4);
                    b[o + 1] = (b[o + 1] & 0x0f) | (tc << 4);
                }
                _ => {}
            }
            Ok(())
        }
    };
    *l = Some(ly);
}

/// A neighbour discovery message's ICMPv6 segment (`l4_offset`, end), when
/// the frame is one (type 135 or 136, code 0) long enough for its target
/// (24 bytes), as Open vSwitch rewrites it; else `None`.
fn nd_body(b: &[u8], ly: &Layers) -> Option<(usize, usize)> {
    let (o, end) = (ly.l4_offset as usize, (ly.end as usize).min(b.len()));
    let nd = ly.l4 == L4::Icmpv6
        && end >= o + 24
        && b[o + 1] == 0
        && matches!(b[o], key::ND_SOLICIT | key::ND_ADVERT);
    nd.then_some((o, end))
}

/// The first source or target link-layer address option of length 1
/// (8 bytes) among the options from `at` to `end`: its offset. Options of
/// other kinds are stepped over; one of length 0 ends the walk.
fn first_lla(b: &[u8], mut at: usize, end: usize) -> Option<usize> {
    while end.saturating_sub(at) >= 8 && b[at + 1] != 0 {
        if matches!(b[at], 1 | 2) && b[at + 1] == 1 {
            return Some(at);
        }
        at += b[at + 1] as usize * 8;
    }
    None
}

/// Write `new` at `at` in the neighbour discovery message from `o` to
/// `end` ([`nd_body`]), its ICMPv6 checksum patched (RFC 1624; `at - o` is
/// even, so the bytes keep their 16-bit alignment).
fn set_nd(b: &mut [u8], o: usize, end: usize, at: usize, new: &[u8]) {
    if at + new.len() > end || b[at..at + new.len()] == *new {
        return;
    }
    let c = u16::from_be_bytes([b[o + 2], b[o + 3]]);
    let c = checksum::update_bytes(c, &b[at..at + new.len()], new);
    b[at..at + new.len()].copy_from_slice(new);
    b[o + 2..o + 4].copy_from_slice(&c.to_be_bytes());
}

/// The `mask` bits of the top MPLS entry set to `bits` (no MPLS: nothing).
fn set_lse(b: &mut [u8], ly: &Layers, mask: u32, bits: u32) {
    let o = ly.l3_offset as usize;
    if is_mpls(ly.ethertype) && b.len() >= o + 4 {
        let e = u32::from_be_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        b[o..o + 4].copy_from_slice(&((e & !mask) | (bits & mask)).to_be_bytes());
    }
}

/// SCTP's port (`src` or destination) to `p`, its checksum patched as Open
/// vSwitch's `packet_set_sctp_port` does: the CRC32c of the segment before
/// and after, each with the checksum field zero, XORed into the field (a
/// right checksum stays right, a wrong one stays as wrong). A segment
/// shorter than SCTP's common header is left as it is.
fn set_sctp_port(b: &mut [u8], ly: &Layers, src: bool, p: u16) {
    let (o, end) = (ly.l4_offset as usize, (ly.end as usize).min(b.len()));
    // `l4` is Other only for a first fragment or a whole packet (a later
    // fragment's payload is no SCTP header).
    if ly.l4 != L4::Other || ly.proto != 132 || end < o + 12 {
        return;
    }
    let seg = &mut b[o..end];
    let old = u32::from_le_bytes([seg[8], seg[9], seg[10], seg[11]]);
    seg[8..12].fill(0);
    let before = checksum::crc32c(seg);
    let at = if src { 0 } else { 2 };
    seg[at..at + 2].copy_from_slice(&p.to_be_bytes());
    let after = checksum::crc32c(seg);
    seg[8..12].copy_from_slice(&(old ^ before ^ after).to_le_bytes());
}

/// The IPv4 header at `o` had the 16-bit word `old` where it now has `new`:
/// its checksum follows (RFC 1624).
#[inline]
fn patch_ipv4_checksum(b: &mut [u8], o: usize, old: u16, new: u16) {
    let c = checksum::update16(u16::from_be_bytes([b[o + 10], b[o + 11]]), old, new);
    b[o + 10..o + 12].copy_from_slice(&c.to_be_bytes());
}

/// Decrement the TTL / hop limit (IPv4 checksum patched). `Err` when it
/// was 0 or 1 (the packet must not be forwarded); non-IP frames pass.
pub fn dec_ttl(f: &mut FrameBuf, l: &mut Option<Layers>) -> Result<(), Verdict> {
    let Some(ly) = layers(f, l) else {
        return Ok(());
    };
    let o = ly.l3_offset as usize;
    let b = f.bytes_mut();
    match ly.l3 {
        L3::Ipv4 => {
            if b[o + 8] <= 1 {
                return Err(Verdict::TtlExpired);
            }
            let old = u16::from_be_bytes([b[o + 8], b[o + 9]]);
            b[o + 8] -= 1;
            patch_ipv4_checksum(b, o, old, u16::from_be_bytes([b[o + 8], b[o + 9]]));
        }
        L3::Ipv6 => {
            if b[o + 7] <= 1 {
                return Err(Verdict::TtlExpired);
            }
            b[o + 7] -= 1;
        }
        _ => {}
    }
    Ok(())
}

/// Run `actions` on `f` (see the module doc). `Err` = the frame is dropped
/// at that point (outputs before it have happened). The pipeline's own
/// actions ([`Action::pipeline`]) are skipped: a table set that has them
/// runs through [`super::xlate`], which calls [`step`] for the others.
#[inline(always)]
pub fn execute(f: &mut FrameBuf, actions: &[Action], env: &mut impl Env) -> Result<(), Verdict> {
    let mut l: Option<Layers> = None;
    for a in actions {
        if let Err(v) = step(f, &mut l, a, env) {
            // A single table: no pipeline state.
            expired(a, v, f, env, &PipeState::default());
            return Err(v);
        }
    }
    Ok(())
}

/// After `a` failed with `v`: the `INVALID_TTL` packet-in of a `dec_ttl`.
#[cold]
pub fn expired(a: &Action, v: Verdict, f: &FrameBuf, env: &mut impl Env, pipe: &PipeState) {
    if let (Verdict::TtlExpired, Action::DecTtl(p)) = (v, a) {
        env.ttl_expired(*p, f.bytes(), pipe);
    }
}

/// Run one action of the single-table set on `f` (`l`: the frame's parsed
/// layers, filled on first need and cleared when the headers move).
/// Returns false, having done nothing, for a pipeline action.
#[inline(always)]
pub fn step(
    f: &mut FrameBuf,
    l: &mut Option<Layers>,
    a: &Action,
    env: &mut impl Env,
) -> Result<bool, Verdict> {
    match a {
        Action::Output(p) => env.output(Out::Port(*p), f.bytes()),
        Action::Flood => env.output(Out::Flood, f.bytes()),
        Action::All => env.output(Out::All, f.bytes()),
        Action::InPort => env.output(Out::InPort, f.bytes()),
        Action::Group(g) => env.output(Out::Group(*g), f.bytes()),
        Action::Controller(p) => env.output(Out::Controller(*p), f.bytes()),
        Action::Meter(m) => {
            if !env.meter(*m, f.len) {
                return Err(Verdict::Metered);
            }
        }
        Action::Set(s) => set_field(f, l, s),
        Action::DecTtl(_) => dec_ttl(f, l)?,
        Action::PushVlan(tpid) => {
            // The new tag copies the VID/PCP of an existing outer tag, else 0 (OpenFlow).
            let b = f.bytes();
            let tci = if b.len() >= 16 && vlan::is_tpid(u16::from_be_bytes([b[12], b[13]])) {
                u16::from_be_bytes([b[14], b[15]])
            } else {
                0
            };
            f.push_vlan(*tpid, tci)?;
            *l = None;
        }
        Action::PopVlan => {
            f.pop_vlan();
            *l = None;
        }
        Action::PushMpls(et) => {
            if let Some(ly) = layers(f, l) {
                f.push_mpls(*et, &ly)?;
                *l = None;
            }
        }
        Action::PopMpls(et) => {
            if let Some(ly) = layers(f, l) {
                f.pop_mpls(*et, &ly);
                *l = None;
            }
        }
        Action::SetMplsTtl(t) => {
            if let Some(e) = layers(f, l).and_then(|ly| f.lse(&ly)) {
                e[3] = *t;
            }
        }
        Action::DecMplsTtl => {
            if let Some(e) = layers(f, l).and_then(|ly| f.lse(&ly)) {
                if e[3] <= 1 {
                    return Err(Verdict::TtlExpired);
                }
                e[3] -= 1;
            }
        }
        Action::ModVlanVid(_)
        | Action::GotoTable(_)
        | Action::Resubmit { .. }
        | Action::Load { .. }
        | Action::Move { .. }
        | Action::WriteMetadata { .. }
        | Action::OutputField(_)
        | Action::Normal
        | Action::Learn(_) => return Ok(false),
    }
    Ok(true)
}

/// Meter rate unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MeterUnit {
    Pktps,
    Kbps,
}

/// A meter's flags and band burst size as configured (see [`Meter::asked`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MeterAsked {
    pub burst: bool,
    pub burst_size: u64,
    pub stats: bool,
}

/// A token-bucket meter with one drop band (OpenFlow meter, `ovs-ofctl
/// add-meter meter=1,pktps,band=type=drop,rate=1000[,burst_size=100]`).
///
/// Tokens are kept in "cost x nanoseconds" (u128, exact integer
/// arithmetic): a packet costs 1 (pktps) or its bits (kbps); refilling
/// adds `elapsed_ns x rate_per_second`; the bucket holds at most
/// `burst x 1e9`.
#[derive(Debug, Clone)]
pub struct Meter {
    pub id: u32,
    pub unit: MeterUnit,
    /// Packets/s or kbit/s.
    pub rate: u64,
    /// Packets or kbit; 0 at creation = default (rate / 10: 100 ms, at least one packet).
    pub burst: u64,
    /// As configured, for a controller reading it back (OFPMF_BURST,
    /// OFPMF_STATS, the band's burst_size): the burst flag and the size
    /// asked for (0: none, the default bucket above), the stats flag.
    pub asked: MeterAsked,
    tokens: u128,
    last_ns: u64,
    pub passed: u64,
    pub dropped: u64,
}

impl Meter {
    pub fn new(id: u32, unit: MeterUnit, rate: u64, burst: u64) -> Meter {
        let burst = if burst == 0 {
            match unit {
                MeterUnit::Pktps => (rate / 10).max(1),
                MeterUnit::Kbps => (rate / 10).max(12), // >= one 1500-byte frame
            }
        } else {
            burst
        };
        let asked = MeterAsked {
            burst: burst > 0,
            burst_size: burst,
            stats: false,
        };
        let mut m = Meter {
            id,
            unit,
            rate,
            burst,
            asked,
            tokens: 0,
            last_ns: 0,
            passed: 0,
            dropped: 0,
        };
        m.tokens = m.cap();
        m
    }

    /// The same meter with the flags as asked (a burst flag without a
    /// size keeps the default bucket; a size without the flag is not used,
    /// as in Open vSwitch).
    pub fn with_flags(self, burst_flag: bool, burst_size: u64, stats: bool) -> Meter {
        let burst = if burst_flag { burst_size } else { 0 };
        let mut m = Meter::new(self.id, self.unit, self.rate, burst);
        m.asked = MeterAsked {
            burst: burst_flag,
            burst_size: burst,
            stats,
        };
        m
    }

    fn cap(&self) -> u128 {
        let b = match self.unit {
            MeterUnit::Pktps => self.burst as u128,
            MeterUnit::Kbps => self.burst as u128 * 1000,
        };
        b * 1_000_000_000
    }

    fn rate_per_s(&self) -> u128 {
        match self.unit {
            MeterUnit::Pktps => self.rate as u128,
            MeterUnit::Kbps => self.rate as u128 * 1000,
        }
    }

    /// Admit a packet of `bytes` at time `now_ns` (monotonic)?
    pub fn admit(&mut self, now_ns: u64, bytes: usize) -> bool {
        if now_ns > self.last_ns {
            // Saturating: rate (up to 2^64 kbit/s = 1.8e22 bit/s) x a
            // long idle time (from a clock far from 0) can exceed u128.
            let add = ((now_ns - self.last_ns) as u128).saturating_mul(self.rate_per_s());
            self.tokens = self.tokens.saturating_add(add).min(self.cap());
            self.last_ns = now_ns;
        }
        let cost: u128 = match self.unit {
            MeterUnit::Pktps => 1,
            MeterUnit::Kbps => bytes as u128 * 8,
        } * 1_000_000_000;
        if self.tokens >= cost {
            self.tokens -= cost;
            self.passed += 1;
            true
        } else {
            self.dropped += 1;
            false
        }
    }

    /// Parse `meter=ID,pktps|kbps,band=type=drop,rate=R[,burst_size=B]`
    /// (fields may come in any order; `band=` prefixes the band fields).
    pub fn parse(s: &str) -> Result<Meter, String> {
        let (mut id, mut unit, mut rate, mut burst) = (None, None, None, 0u64);
        let (mut burst_flag, mut stats) = (false, false);
        for t in s.split([',', ' ', '\t']).filter(|t| !t.is_empty()) {
            let t = t.strip_prefix("band=").unwrap_or(t);
            let (k, v) = t.split_once('=').unwrap_or((t, ""));
            let num = |v: &str| -> Result<u64, String> {
                v.parse::<u64>()
                    .map_err(|_| format!("meter token {}: {} is not a number", q(t), q(v)))
            };
            match k {
                "meter" => {
                    id = Some(u32::try_from(num(v)?).map_err(|_| {
                        format!("meter token {}: the id must be at most {}", q(t), u32::MAX)
                    })?)
                }
                "pktps" => unit = Some(MeterUnit::Pktps),
                "kbps" => unit = Some(MeterUnit::Kbps),
                "type" if v == "drop" => {}
                "type" => {
                    return Err(format!(
                        "meter token {}: only type=drop bands are supported",
                        q(t)
                    ))
                }
                "rate" => rate = Some(num(v)?),
                "burst_size" => burst = num(v)?,
                "burst" => burst_flag = true,
                "stats" => stats = true,
                _ => return Err(format!("meter token {}: unknown", q(t))),
            }
        }
        let id = id.ok_or("meter: no 'meter=ID'")?;
        let rate = rate.ok_or("meter: no 'rate='")?;
        if rate == 0 {
            return Err("meter: rate must be > 0".into());
        }
        // linerate's own spelling: a burst_size alone asks for the burst.
        let burst_flag = burst_flag || burst > 0;
        Ok(Meter::new(id, unit.unwrap_or(MeterUnit::Kbps), rate, 0)
            .with_flags(burst_flag, burst, stats))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::switch::rule::Rule;
    use linerate_wire::build::{build_tcp, build_udp, FrameParams, IpPair};
    use linerate_wire::ipv4::Ipv4Packet;
    use linerate_wire::tcp::TcpRepr;

    #[derive(Default)]
    struct Rec {
        outs: Vec<(Out, Vec<u8>)>,
        meter_ok: bool,
    }
    impl Env for Rec {
        fn output(&mut self, out: Out, frame: &[u8]) {
            self.outs.push((out, frame.to_vec()));
        }
        fn meter(&mut self, _id: u32, _bytes: usize) -> bool {
            self.meter_ok
        }
    }

    /// Full recomputation of every checksum present matches the frame.
    fn checksums_ok(f: &[u8]) -> bool {
        let l = parse_frame(f).unwrap();
        let ip = &f[l.l3_offset as usize..l.end as usize];
        let l4 = &f[l.l4_offset as usize..l.end as usize];
        match l.l3 {
            L3::Ipv4 => {
                let p = Ipv4Packet::new_checked(ip).unwrap();
                let s: [u8; 4] = ip[12..16].try_into().unwrap();
                let d: [u8; 4] = ip[16..20].try_into().unwrap();
                p.verify_checksum()
                    && checksum::fold(checksum::add(
                        checksum::pseudo_v4(&s, &d, l.proto, l4.len() as u16),
                        checksum::sum(l4, 0),
                    )) == 0xffff
            }
            L3::Ipv6 => {
                let s: [u8; 16] = ip[8..24].try_into().unwrap();
                let d: [u8; 16] = ip[24..40].try_into().unwrap();
                checksum::fold(checksum::add(
                    checksum::pseudo_v6(&s, &d, l.proto, l4.len() as u32),
                    checksum::sum(l4, 0),
                )) == 0xffff
            }
            _ => true,
        }
    }

    fn udp4(buf: &mut [u8], at: usize) -> usize {
        let p = FrameParams::new(IpPair::V4 {
            src: [10, 0, 0, 1],
            dst: [10, 0, 0, 2],
        });
        build_udp(&mut buf[at..], &p, 1000, 53).unwrap()
    }

    #[test]
    fn rewrite_keeps_checksums_right() {
        let mut buf = [0u8; 256];
        let n = udp4(&mut buf, 0);
        assert!(checksums_ok(&buf[..n]));
        let r = Rule::parse(
            "udp,actions=set_field:02:00:00:00:00:09->eth_dst,set_field:192.168.7.7->ip_src,mod_nw_dst:1.2.3.4,set_field:4242->udp_dst,mod_tp_src:7,set_field:46->ip_dscp,dec_ttl,output:2",
        )
        .unwrap();
        let mut f = FrameBuf::new(&mut buf, 0, n).unwrap();
        let mut env = Rec::default();
        execute(&mut f, &r.actions, &mut env).unwrap();
        assert_eq!(env.outs.len(), 1);
        let (o, b) = &env.outs[0];
        assert_eq!(*o, Out::Port(2));
        assert!(checksums_ok(b));
        let l = parse_frame(b).unwrap();
        assert_eq!(&b[0..6], &[2, 0, 0, 0, 0, 9]);
        assert_eq!(l.src_ip[12..], [192, 168, 7, 7]);
        assert_eq!(l.dst_ip[12..], [1, 2, 3, 4]);
        assert_eq!((l.src_port, l.dst_port), (7, 4242));
        let ip = Ipv4Packet::new_checked(&b[14..]).unwrap();
        assert_eq!((ip.ttl(), ip.dscp()), (63, 46));
    }

    #[test]
    fn v6_tcp_rewrite_and_hop_limit() {
        let mut buf = [0u8; 256];
        let p = FrameParams::new(IpPair::V6 {
            src: [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
            dst: [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
        });
        let n = build_tcp(
            &mut buf,
            &p,
            &TcpRepr {
                src_port: 1,
                dst_port: 2,
                flags: 2,
                ..TcpRepr::default()
            },
        )
        .unwrap();
        let r = Rule::parse("tcp6,actions=set_field:2001:db8::99->ipv6_dst,set_field:8080->tcp_dst,set_field:10->ip_dscp,dec_ttl,output:1").unwrap();
        let mut f = FrameBuf::new(&mut buf, 0, n).unwrap();
        let mut env = Rec::default();
        execute(&mut f, &r.actions, &mut env).unwrap();
        let b = &env.outs[0].1;
        assert!(checksums_ok(b));
        let l = parse_frame(b).unwrap();
        assert_eq!(l.dst_ip[15], 0x99);
        assert_eq!(l.dst_port, 8080);
        assert_eq!(b[14 + 7], 63);
        let k = crate::switch::Key::extract(b, 1);
        assert_eq!(k.get(crate::switch::key::NW_TOS) >> 2, 10);
    }

    #[test]
    fn ttl_expiry_and_meter_stop_execution() {
        let mut buf = [0u8; 256];
        let p = FrameParams {
            ttl: 1,
            ..FrameParams::new(IpPair::V4 {
                src: [1, 1, 1, 1],
                dst: [2, 2, 2, 2],
            })
        };
        let n = build_udp(&mut buf, &p, 1, 2).unwrap();
        let r = Rule::parse("udp,actions=output:1,dec_ttl,output:2").unwrap();
        let mut f = FrameBuf::new(&mut buf, 0, n).unwrap();
        let mut env = Rec::default();
        assert_eq!(
            execute(&mut f, &r.actions, &mut env),
            Err(Verdict::TtlExpired)
        );
        assert_eq!(env.outs.len(), 1, "output before dec_ttl happened");
        let r = Rule::parse("actions=meter:1,output:2").unwrap();
        let mut env = Rec::default();
        assert_eq!(execute(&mut f, &r.actions, &mut env), Err(Verdict::Metered));
        env.meter_ok = true;
        assert_eq!(execute(&mut f, &r.actions, &mut env), Ok(()));
        assert_eq!(env.outs.len(), 1);
    }

    #[test]
    fn push_pop_vlan_with_headroom_and_tailroom() {
        for headroom in [0usize, 4, 64] {
            let mut buf = [0u8; 256];
            let n = udp4(&mut buf, headroom);
            let orig = buf[headroom..headroom + n].to_vec();
            let r = Rule::parse(
                "actions=push_vlan:0x8100,set_field:42->vlan_vid,output:1,pop_vlan,output:2",
            )
            .unwrap();
            let mut f = FrameBuf::new(&mut buf, headroom, n).unwrap();
            let mut env = Rec::default();
            execute(&mut f, &r.actions, &mut env).unwrap();
            let tagged = &env.outs[0].1;
            assert_eq!(tagged.len(), n + 4);
            let l = parse_frame(tagged).unwrap();
            assert_eq!(l.vlans.outer().unwrap().vid(), 42);
            assert!(checksums_ok(tagged));
            assert_eq!(&tagged[..12], &orig[..12]);
            assert_eq!(&tagged[16..], &orig[12..]);
            assert_eq!(
                env.outs[1].1, orig,
                "pop restores the frame (headroom {headroom})"
            );
        }
        // No room at all.
        let mut buf = [0u8; 256];
        let n = udp4(&mut buf, 0);
        let mut f = FrameBuf::new(&mut buf[..n], 0, n).unwrap();
        assert_eq!(f.push_vlan(0x8100, 1), Err(Verdict::NoRoom));
        f.pop_vlan(); // untagged: no-op
        assert_eq!(f.len, n);
    }

    #[test]
    fn meter_rates() {
        let mut m = Meter::parse("meter=1,pktps,band=type=drop,rate=1000,burst_size=10").unwrap();
        // 10 s at 10 kpps offered: ~1000/s pass (+ burst).
        let mut passed = 0;
        for i in 0..100_000u64 {
            passed += m.admit(i * 100_000, 64) as u64;
        }
        assert!((10_000..=10_011).contains(&passed), "{passed}");
        let mut m = Meter::parse("meter=2 kbps band=type=drop,rate=8000").unwrap();
        // 1 Mbit/s offered for 1 s with 1000-byte frames: 8 Mbit/s... pass 8000 kbit = 1000 frames/s.
        let mut passed = 0;
        for i in 0..10_000u64 {
            passed += m.admit(i * 100_000, 1000) as u64;
        }
        assert!((1000..=1000 + 101).contains(&passed), "{passed}");
        assert!(Meter::parse("meter=1,rate=0").is_err());
        assert!(Meter::parse("meter=1,pktps,band=type=dscp_remark,rate=1").is_err());
    }

    #[test]
    fn meter_at_the_largest_rate_and_clock() {
        // Found by fuzzing: the refill rate x elapsed time overflowed u128
        // (a panic with overflow checks, garbage tokens without).
        let mut m =
            Meter::parse(&format!("meter=1,kbps,band=type=drop,rate={}", u64::MAX)).unwrap();
        assert!(m.admit(0, 1500));
        assert!(m.admit(u64::MAX / 2, 1500));
        assert!(m.admit(u64::MAX, 65535));
        assert_eq!((m.passed, m.dropped), (3, 0));
        // Also found by fuzzing: an id beyond u32 was cut to its low bits
        // (meter=4294967297 was meter 1).
        let e = Meter::parse("meter=4294967297,rate=5").unwrap_err();
        assert!(e.contains("at most 4294967295"), "{e}");
        assert_eq!(
            Meter::parse("meter=4294967295,rate=5").unwrap().id,
            u32::MAX
        );
    }

    #[test]
    fn sctp_icmp_and_arp_rewrites_keep_checksums() {
        // SCTP: a right CRC32c stays right, a wrong one stays as wrong.
        let mut f = vec![0u8; 14];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        let mut ip = vec![
            0x45, 0, 0, 48, 0, 1, 0, 0, 64, 132, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
        ];
        let c = checksum::checksum(&ip);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        f.extend(ip);
        let mut seg = vec![0, 7, 0, 9, 0, 0, 0, 1, 0, 0, 0, 0];
        seg.extend([0, 3, 0, 16, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 5]);
        let crc = checksum::crc32c(&seg);
        seg[8..12].copy_from_slice(&crc.to_le_bytes());
        f.extend(seg);
        let crc_ok = |b: &[u8]| {
            let mut s = b[34..].to_vec();
            let got = u32::from_le_bytes([s[8], s[9], s[10], s[11]]);
            s[8..12].fill(0);
            got == checksum::crc32c(&s)
        };
        assert!(crc_ok(&f));
        let r =
            Rule::parse("sctp,actions=set_field:5000->sctp_src,mod_tp_dst:99,output:1").unwrap();
        let mut buf = f.clone();
        let n = buf.len();
        let mut fb = FrameBuf::new(&mut buf, 0, n).unwrap();
        let mut env = Rec::default();
        execute(&mut fb, &r.actions, &mut env).unwrap();
        let out = &env.outs[0].1;
        assert_eq!(&out[34..38], &[0x13, 0x88, 0, 99]);
        assert!(crc_ok(out));
        let mut bad = f.clone();
        bad[42] ^= 0xff;
        let mut fb = FrameBuf::new(&mut bad, 0, n).unwrap();
        let mut env = Rec::default();
        execute(&mut fb, &r.actions, &mut env).unwrap();
        assert!(!crc_ok(&env.outs[0].1));
        // A later fragment's payload is no SCTP header: left as it is.
        let mut frag = f.clone();
        frag[20] = 0x00;
        frag[21] = 0x10;
        let c = checksum::checksum(&{
            let mut h = frag[14..34].to_vec();
            h[10..12].fill(0);
            h
        });
        frag[24..26].copy_from_slice(&c.to_be_bytes());
        let mut buf = frag.clone();
        let mut fb = FrameBuf::new(&mut buf, 0, n).unwrap();
        let mut env = Rec::default();
        execute(&mut fb, &r.actions, &mut env).unwrap();
        assert_eq!(env.outs[0].1, frag);
        // ICMP: type and code rewritten, the checksum still sums to 0xffff.
        let mut buf = [0u8; 128];
        let p = FrameParams::new(IpPair::V4 {
            src: [10, 0, 0, 1],
            dst: [10, 0, 0, 2],
        });
        let n = linerate_wire::build::build_icmp_echo(&mut buf, &p, true, 1, 1).unwrap();
        let r = Rule::parse("icmp,actions=set_field:3->icmp_type,set_field:1->icmp_code,output:1")
            .unwrap();
        let mut fb = FrameBuf::new(&mut buf, 0, n).unwrap();
        let mut env = Rec::default();
        execute(&mut fb, &r.actions, &mut env).unwrap();
        let b = &env.outs[0].1;
        assert_eq!((b[34], b[35]), (3, 1));
        assert_eq!(checksum::fold(checksum::sum(&b[34..], 0)), 0xffff);
        // ARP's hardware addresses.
        let mut buf = [0u8; 64];
        let a = linerate_wire::arp::ArpRepr {
            operation: 1,
            sender_mac: [2, 0, 0, 0, 0, 1],
            sender_ip: [10, 0, 0, 1],
            target_mac: [0; 6],
            target_ip: [10, 0, 0, 2],
        };
        let n = linerate_wire::build::build_arp(&mut buf, [0xff; 6], [2, 0, 0, 0, 0, 1], &[], &a)
            .unwrap();
        let r = Rule::parse("arp,actions=set_field:02:00:00:00:00:07->arp_sha,set_field:02:00:00:00:00:08->arp_tha,output:1").unwrap();
        let mut fb = FrameBuf::new(&mut buf, 0, n).unwrap();
        let mut env = Rec::default();
        execute(&mut fb, &r.actions, &mut env).unwrap();
        let b = &env.outs[0].1;
        assert_eq!(
            (&b[22..28], &b[32..38]),
            (&[2, 0, 0, 0, 0, 7][..], &[2, 0, 0, 0, 0, 8][..])
        );
    }

    #[test]
    fn neighbour_discovery_rewrites_keep_the_checksum_and_follow_open_vswitch() {
        use crate::switch::key::tests::nd;
        use linerate_wire::build::nd_lla_option;
        let run = |rule: &str, f: &[u8]| -> Vec<u8> {
            let r = Rule::parse(rule).unwrap_or_else(|e| panic!("{rule}: {e}"));
            let mut buf = f.to_vec();
            let n = buf.len();
            let mut fb = FrameBuf::new(&mut buf, 0, n).unwrap();
            let mut env = Rec::default();
            execute(&mut fb, &r.actions, &mut env).unwrap();
            env.outs.remove(0).1
        };
        let l4 = 14 + 40;
        let (a, b) = ([2, 0, 0, 0, 0, 0xa], [2, 0, 0, 0, 0, 0xb]);
        // The target and the source option of a solicitation.
        let f = nd(false, &nd_lla_option(1, a));
        let out = run(
            "icmp6,icmp_type=135,actions=set_field:2001:db8::9->nd_target,set_field:02:00:00:00:00:0b->nd_sll,output:1",
            &f,
        );
        let t: [u8; 16] = "2001:db8::9"
            .parse::<std::net::Ipv6Addr>()
            .unwrap()
            .octets();
        assert_eq!(&out[l4 + 8..l4 + 24], &t);
        assert_eq!(&out[l4 + 26..l4 + 32], &b);
        assert!(checksums_ok(&out));
        // An advertisement's target option, after an option of another
        // kind (a nonce) that is stepped over.
        let nonce = [14u8, 1, 9, 9, 9, 9, 9, 9];
        let f = nd(true, &[nonce, nd_lla_option(2, a)].concat());
        let out = run(
            "icmp6,icmp_type=136,actions=set_field:02:00:00:00:00:0b->nd_tll,output:1",
            &f,
        );
        assert_eq!(&out[l4 + 34..l4 + 40], &b);
        assert!(checksums_ok(&out));
        // As Open vSwitch: only the first link-layer option is written,
        // and only when it is of the kind set (a solicitation whose first
        // option is a target one keeps its source one).
        let f = nd(false, &[nd_lla_option(2, a), nd_lla_option(1, a)].concat());
        let out = run(
            "icmp6,icmp_type=135,actions=set_field:02:00:00:00:00:0b->nd_sll,output:1",
            &f,
        );
        assert_eq!(out, f);
        // A message without options, and one that is not neighbour
        // discovery (code 1), are left as they are.
        let f = nd(false, &[]);
        let rule = "icmp6,icmp_type=135,actions=set_field:02:00:00:00:00:0b->nd_sll,output:1";
        assert_eq!(run(rule, &f), f);
        let mut f = nd(false, &[]);
        f[l4 + 1] = 1;
        let rule = "icmp6,icmp_type=135,actions=set_field:::5->nd_target,output:1";
        assert_eq!(run(rule, &f), f);
    }

    #[test]
    fn meter_errors_are_one_line() {
        // Found by fuzzing: a token with a newline (tokens end at ',', ' '
        // and now '\t' only) was quoted as it was.
        let e = Meter::parse("meter=1\0\n,rate=5").unwrap_err();
        assert_eq!(
            e,
            "meter token 'meter=1\\u{0}\\n': '1\\u{0}\\n' is not a number"
        );
        assert!(!e.contains('\n'));
    }
}
