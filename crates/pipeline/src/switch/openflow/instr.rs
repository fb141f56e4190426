//! Instructions and actions on the wire: OpenFlow 1.3's (`apply_actions`,
//! `goto_table`, `write_metadata`, `meter`; `output`, `group`,
//! `push_vlan`, `pop_vlan`, `dec_nw_ttl`, `set_field`) and the Nicira
//! experimenter actions `ovs-ofctl` sends for the rest (`resubmit`,
//! `load`, `move`, `output:FIELD`, `learn`).
//!
//! Decoding writes the action list in the rule syntax; encoding writes a
//! rule's [`Action`]s as the instructions `ovs-ofctl` would send for them.

use super::oxm;
use super::wire::*;
use crate::switch::field::SubField;
use crate::switch::group::Group;
use crate::switch::learn::{Learn, LearnItem, LearnSrc};
use crate::switch::{Action, Rule, SetField};
use core::fmt::Write as _;

// Instruction types.
const IT_GOTO_TABLE: u16 = 1;
const IT_WRITE_METADATA: u16 = 2;
const IT_WRITE_ACTIONS: u16 = 3;
const IT_APPLY_ACTIONS: u16 = 4;
const IT_CLEAR_ACTIONS: u16 = 5;
const IT_METER: u16 = 6;

// Action types.
const AT_OUTPUT: u16 = 0;
const AT_SET_MPLS_TTL: u16 = 15;
const AT_DEC_MPLS_TTL: u16 = 16;
const AT_PUSH_VLAN: u16 = 17;
const AT_PUSH_MPLS: u16 = 19;
const AT_POP_MPLS: u16 = 20;
const AT_POP_VLAN: u16 = 18;
const AT_GROUP: u16 = 22;
const AT_SET_NW_TTL: u16 = 23;
const AT_DEC_NW_TTL: u16 = 24;
const AT_SET_FIELD: u16 = 25;
const AT_EXPERIMENTER: u16 = 0xffff;

// Nicira action subtypes.
const NXAST_RESUBMIT: u16 = 1;
const NXAST_REG_MOVE: u16 = 6;
const NXAST_REG_LOAD: u16 = 7;
const NXAST_RESUBMIT_TABLE: u16 = 14;
const NXAST_OUTPUT_REG: u16 = 15;
const NXAST_LEARN: u16 = 16;
/// OpenFlow 1.0's `OFPP_IN_PORT` (Nicira actions carry 16-bit ports).
const OFPP10_IN_PORT: u16 = 0xfff8;

fn bad_action(code: u16, why: impl Into<String>) -> OfError {
    OfError::new(err::BAD_ACTION, code, why)
}

/// `NAME[a..b]` of the field a header names, checked against its width.
fn subfield(h: u32, ofs: u32, nbits: u32) -> Result<SubField> {
    let field = oxm::field_of(h).ok_or_else(|| {
        bad_action(
            err::BA_BAD_ARGUMENT,
            format!(
                "field class {:#06x} field {} is not one load/move/learn can use",
                h >> 16,
                (h >> 9) & 0x7f
            ),
        )
    })?;
    if nbits == 0 || ofs + nbits > field.bits() {
        return Err(bad_action(
            err::BA_BAD_ARGUMENT,
            format!(
                "bits {ofs}..{} are not within {}'s {} bits",
                ofs + nbits.max(1) - 1,
                field.name(),
                field.bits()
            ),
        ));
    }
    Ok(SubField {
        field,
        ofs: ofs as u8,
        nbits: nbits as u8,
    })
}

/// `set_field:VALUE->NAME` of one OXM (the payload of `OFPAT_SET_FIELD`).
fn set_field_text(r: &mut Reader, out: &mut String) -> Result<()> {
    let mut m = String::new();
    let mut peek = *r;
    // The OXM's own field: the match decoder names ARP's addresses as
    // nw_src/nw_dst (one key field), but writing them is ARP's.
    let h = { *r }.u32()?;
    let arp = (h >> 16 == 0x8000).then_some((h >> 9) & 0x7f);
    oxm::decode_match_field(&mut peek, &mut m)?;
    // `NAME=VALUE[/MASK]` -> `set_field:VALUE[/MASK]->NAME`, the names
    // set_field knows.
    let (name, v) = m.split_once('=').unwrap_or((&m, ""));
    let name = match (arp, name) {
        (Some(22), _) => "arp_spa",
        (Some(23), _) => "arp_tpa",
        (_, name) => name,
    };
    let name = match name {
        "dl_src" => "eth_src",
        "dl_dst" => "eth_dst",
        "nw_src" => "ipv4_src",
        "nw_dst" => "ipv4_dst",
        n => n,
    };
    let v = v.strip_suffix("/0xffffffffffffffff").unwrap_or(v);
    let v = match v.split_once('/') {
        // A full mask printed by the match decoder (MACs, addresses).
        Some((a, b)) if b == "ff:ff:ff:ff:ff:ff" || b == "255.255.255.255" => a,
        Some((a, b)) if b.parse::<std::net::Ipv6Addr>().map(u128::from) == Ok(u128::MAX) => a,
        _ => v,
    };
    let _ = write!(out, "set_field:{v}->{name}");
    *r = peek;
    Ok(())
}

fn sep(out: &mut String) {
    if !out.is_empty() {
        out.push(',');
    }
}

/// One action list (the body of `apply_actions`) in the rule syntax.
pub fn decode_actions(r: Reader, out: &mut String) -> Result<()> {
    decode_list(r, out, false, &mut Vec::new())
}

/// A `PACKET_OUT`'s action list: `output:TABLE` is allowed there (as
/// `resubmit(,0)`: table 0 with the packet-out's `in_port`).
pub fn decode_actions_out(r: Reader, out: &mut String) -> Result<()> {
    decode_list(r, out, true, &mut Vec::new())
}

/// [`decode_actions`]; `lens` gets the `max_len` of each output action
/// but `controller` ([`Rule::out_max_len`]).
fn decode_list(
    mut r: Reader,
    out: &mut String,
    packet_out: bool,
    lens: &mut Vec<u16>,
) -> Result<()> {
    while !r.is_empty() {
        let (t, mut a) = r.tlv(8, 8)?;
        a.skip(4)?;
        sep(out);
        match t {
            AT_OUTPUT => {
                let p = a.u32()?;
                if p != OFPP_CONTROLLER && !(packet_out && p == OFPP_TABLE) {
                    let mut l = a;
                    lens.push(l.u16()?);
                }
                let _ = match p {
                    OFPP_IN_PORT => write!(out, "in_port"),
                    OFPP_NORMAL => write!(out, "normal"),
                    OFPP_FLOOD => write!(out, "flood"),
                    OFPP_ALL => write!(out, "all"),
                    OFPP_CONTROLLER => write!(out, "controller:{}", a.u16()?),
                    OFPP_TABLE if packet_out => write!(out, "resubmit(,0)"),
                    p if p > OFPP_MAX => {
                        return Err(bad_action(
                            err::BA_BAD_OUT_PORT,
                            format!("output to reserved port {p:#x} is not supported"),
                        ))
                    }
                    p => write!(out, "output:{p}"),
                };
            }
            AT_GROUP => {
                let _ = write!(out, "group:{}", a.u32()?);
            }
            AT_PUSH_VLAN => {
                let _ = write!(out, "push_vlan:{:#06x}", a.u16()?);
            }
            AT_POP_VLAN => out.push_str("pop_vlan"),
            AT_PUSH_MPLS => {
                let _ = write!(out, "push_mpls:{:#06x}", a.u16()?);
            }
            AT_POP_MPLS => {
                let _ = write!(out, "pop_mpls:{:#06x}", a.u16()?);
            }
            AT_SET_MPLS_TTL => {
                let _ = write!(out, "set_mpls_ttl({})", a.u8()?);
            }
            AT_DEC_MPLS_TTL => out.push_str("dec_mpls_ttl"),
            AT_DEC_NW_TTL => out.push_str("dec_ttl"),
            AT_SET_NW_TTL => {
                let _ = write!(out, "mod_nw_ttl:{}", a.u8()?);
            }
            AT_SET_FIELD => set_field_text(&mut a, out)?,
            AT_EXPERIMENTER => nicira(a, out)?,
            t => {
                return Err(bad_action(
                    err::BA_BAD_TYPE,
                    format!("action type {t} is not supported"),
                ))
            }
        }
    }
    Ok(())
}

/// A Nicira action (`a` after the type and length).
fn nicira(mut a: Reader, out: &mut String) -> Result<()> {
    let exp = a.u32()?;
    if exp != NX_VENDOR {
        return Err(bad_action(
            err::BA_BAD_EXPERIMENTER,
            format!("experimenter {exp:#x} is not supported"),
        ));
    }
    let sub = a.u16()?;
    let port = |p: u16| {
        if p == OFPP10_IN_PORT {
            String::new()
        } else {
            p.to_string()
        }
    };
    let _ = match sub {
        NXAST_RESUBMIT => write!(out, "resubmit({},)", port(a.u16()?)),
        NXAST_RESUBMIT_TABLE => {
            let p = port(a.u16()?);
            let t = a.u8()?;
            if t == OFPTT_ALL {
                write!(out, "resubmit({p},)")
            } else {
                write!(out, "resubmit({p},{t})")
            }
        }
        NXAST_REG_LOAD => {
            let ofs_nbits = a.u16()? as u32;
            let dst = subfield(a.u32()?, ofs_nbits >> 6, (ofs_nbits & 0x3f) + 1)?;
            write!(out, "load:{:#x}->{dst}", a.u64()?)
        }
        NXAST_REG_MOVE => {
            let (n, so, d) = (a.u16()? as u32, a.u16()? as u32, a.u16()? as u32);
            let src = subfield(a.u32()?, so, n)?;
            let dst = subfield(a.u32()?, d, n)?;
            write!(out, "move:{src}->{dst}")
        }
        NXAST_OUTPUT_REG => {
            let ofs_nbits = a.u16()? as u32;
            let src = subfield(a.u32()?, ofs_nbits >> 6, (ofs_nbits & 0x3f) + 1)?;
            write!(out, "output:{src}")
        }
        NXAST_LEARN => out.write_str(&learn_text(a)?),
        s => {
            return Err(bad_action(
                err::BA_BAD_EXP_TYPE,
                format!("Nicira action subtype {s} is not supported"),
            ))
        }
    };
    Ok(())
}

/// `learn(...)` from an `NXAST_LEARN` (after its subtype).
fn learn_text(mut a: Reader) -> Result<String> {
    {
        let (idle, hard, prio) = (a.u16()?, a.u16()?, a.u16()?);
        let cookie = a.u64()?;
        let flags = a.u16()?;
        let table = a.u8()?;
        a.skip(1)?;
        let (fin_idle, fin_hard) = (a.u16()?, a.u16()?);
        if flags != 0 || fin_idle != 0 || fin_hard != 0 {
            return Err(bad_action(
                err::BA_BAD_ARGUMENT,
                "learn: flags, fin_idle_timeout and fin_hard_timeout are not supported",
            ));
        }
        let mut s = format!(
            "learn(table={table},idle_timeout={idle},hard_timeout={hard},priority={prio},cookie={cookie:#x}"
        );
        while a.len() >= 2 {
            let h = a.u16()? as u32;
            if h == 0 {
                break;
            }
            let n = h & 0x3ff;
            let imm = h & (1 << 13) != 0;
            let dst_type = (h >> 11) & 3;
            let src = if imm {
                let b = a.bytes((n as usize).div_ceil(16) * 2)?;
                if b.len() > 8 && b[..b.len() - 8].iter().any(|&x| x != 0) {
                    return Err(bad_action(
                        err::BA_BAD_ARGUMENT,
                        "learn: value wider than 64 bits",
                    ));
                }
                let v = b.iter().fold(0u64, |v, &x| (v << 8) | x as u64);
                format!("{v:#x}")
            } else {
                let hd = a.u32()?;
                let ofs = a.u16()? as u32;
                subfield(hd, ofs, n)?.to_string()
            };
            match dst_type {
                0 | 1 => {
                    let hd = a.u32()?;
                    let ofs = a.u16()? as u32;
                    let dst = subfield(hd, ofs, n)?.to_string();
                    if dst_type == 1 {
                        let _ = write!(s, ",load:{src}->{dst}");
                    } else if src == dst {
                        let _ = write!(s, ",{dst}");
                    } else {
                        let _ = write!(s, ",{dst}={src}");
                    }
                }
                2 if !imm => {
                    let _ = write!(s, ",output:{src}");
                }
                _ => {
                    return Err(bad_action(
                        err::BA_BAD_ARGUMENT,
                        format!("learn: spec header {h:#06x} is not supported"),
                    ))
                }
            }
        }
        s.push(')');
        Ok(s)
    }
}

/// The instructions after a `FLOW_MOD`'s match, as `actions=...`
/// (the meter first, then the applied actions, `write_metadata`, and
/// `goto_table` last, the order OpenFlow runs them in). Returns what the
/// text cannot say: the `max_len` of each output action but `controller`,
/// in order ([`Rule::set_out_max_len`]).
pub fn decode_instructions(mut r: Reader, out: &mut String) -> Result<Vec<u16>> {
    let (mut meter, mut apply, mut meta, mut goto) = (None, None, None, None);
    let mut lens = Vec::new();
    while !r.is_empty() {
        let (t, mut i) = r.tlv(8, 8)?;
        i.skip(4)?;
        match t {
            IT_GOTO_TABLE => goto = Some(i.u8()?),
            IT_WRITE_METADATA => {
                i.skip(4)?;
                meta = Some((i.u64()?, i.u64()?));
            }
            IT_APPLY_ACTIONS => {
                i.skip(4)?;
                let mut s = String::new();
                decode_list(i, &mut s, false, &mut lens)?;
                apply = Some(s);
            }
            IT_METER => meter = Some(i.u32()?),
            IT_WRITE_ACTIONS | IT_CLEAR_ACTIONS => {
                return Err(OfError::new(
                    err::BAD_INSTRUCTION,
                    err::BI_UNSUP_INST,
                    "write_actions and clear_actions (the action set) are not supported: use apply_actions",
                ))
            }
            t => {
                return Err(OfError::new(
                    err::BAD_INSTRUCTION,
                    err::BI_UNKNOWN_INST,
                    format!("instruction type {t} is not supported"),
                ))
            }
        }
    }
    let mut s = String::new();
    if let Some(m) = meter {
        let _ = write!(s, "meter:{m}");
    }
    if let Some(a) = apply.filter(|a| !a.is_empty()) {
        sep(&mut s);
        s.push_str(&a);
    }
    if let Some((v, m)) = meta {
        sep(&mut s);
        let _ = write!(s, "write_metadata:{v:#x}/{m:#x}");
    }
    if let Some(t) = goto {
        sep(&mut s);
        let _ = write!(s, "goto_table:{t}");
    }
    if s.is_empty() {
        s.push_str("drop");
    }
    out.push_str("actions=");
    out.push_str(&s);
    Ok(lens)
}

fn experimenter(w: &mut Writer, sub: u16) -> usize {
    let at = w.len();
    w.u16(AT_EXPERIMENTER);
    w.u16(0);
    w.u32(NX_VENDOR);
    w.u16(sub);
    at
}

/// Fill in the length of the TLV that starts at `at`, padding it to 8.
fn close(w: &mut Writer, at: usize) {
    w.pad8();
    let n = (w.len() - at) as u16;
    w.put_u16(at + 2, n);
}

fn ofs_nbits(sf: &SubField) -> u16 {
    ((sf.ofs as u16) << 6) | (sf.nbits as u16 - 1)
}

fn port16(p: Option<u32>) -> u16 {
    match p {
        None => OFPP10_IN_PORT,
        Some(p) => p.min(0xffff) as u16,
    }
}

fn set_field(w: &mut Writer, s: &SetField) {
    let at = w.len();
    w.u16(AT_SET_FIELD);
    w.u16(0);
    let f = |w: &mut Writer, field: u8, v: &[u8]| {
        w.u32(oxm::header(oxm::CLASS_OXM, field, false, v.len() as u8));
        w.bytes(v);
    };
    match *s {
        SetField::EthDst(m) => f(w, 3, &m),
        SetField::EthSrc(m) => f(w, 4, &m),
        SetField::VlanVid(v) => f(w, 6, &(v | 0x1000).to_be_bytes()),
        SetField::IpDscp(v) => f(w, 8, &[v]),
        SetField::Ipv4Src(a) => f(w, 11, &a),
        SetField::Ipv4Dst(a) => f(w, 12, &a),
        SetField::TcpSrc(p) => f(w, 13, &p.to_be_bytes()),
        SetField::TcpDst(p) => f(w, 14, &p.to_be_bytes()),
        SetField::UdpSrc(p) => f(w, 15, &p.to_be_bytes()),
        SetField::UdpDst(p) => f(w, 16, &p.to_be_bytes()),
        SetField::Ipv6Src(a) => f(w, 26, &a),
        SetField::Ipv6Dst(a) => f(w, 27, &a),
        SetField::Ipv6Label(l) => f(w, 28, &l.to_be_bytes()),
        SetField::ArpSpa(a) => f(w, 22, &a),
        SetField::ArpTpa(a) => f(w, 23, &a),
        SetField::IpEcn(e) => f(w, 9, &[e]),
        SetField::VlanPcp(p) => f(w, 7, &[p]),
        SetField::SctpSrc(p) => f(w, 17, &p.to_be_bytes()),
        SetField::SctpDst(p) => f(w, 18, &p.to_be_bytes()),
        SetField::Icmp { v6, code, v } => f(w, 19 + u8::from(code) + if v6 { 10 } else { 0 }, &[v]),
        SetField::ArpSha(m) => f(w, 24, &m),
        SetField::ArpTha(m) => f(w, 25, &m),
        SetField::MplsLabel(l) => f(w, 34, &l.to_be_bytes()),
        SetField::MplsTc(t) => f(w, 35, &[t]),
        SetField::NdTarget(a) => f(w, 31, &a),
        SetField::NdSll(m) => f(w, 32, &m),
        SetField::NdTll(m) => f(w, 33, &m),
        // An action of its own (see `action`), never a set_field.
        SetField::NwTtl(_) => {}
    }
    close(w, at);
}

fn learn(w: &mut Writer, l: &Learn) {
    let at = experimenter(w, NXAST_LEARN);
    w.u16(l.idle_timeout);
    w.u16(l.hard_timeout);
    w.u16(l.priority);
    w.u64(l.cookie);
    w.u16(0);
    w.u8(l.table);
    w.u8(0);
    w.u32(0);
    let sf = |w: &mut Writer, s: &SubField| {
        w.u32(oxm::header_of(s.field));
        w.u16(s.ofs as u16);
    };
    let src = |w: &mut Writer, s: &LearnSrc, n: u8| match s {
        LearnSrc::Field(f) => sf(w, f),
        LearnSrc::Imm(v) => {
            let k = (n as usize).div_ceil(16) * 2;
            let b = v.to_be_bytes();
            if k > 8 {
                w.zeros(k - 8);
                w.bytes(&b);
            } else {
                w.bytes(&b[8 - k..]);
            }
        }
    };
    for it in &l.items {
        match it {
            LearnItem::Match { dst, src: s } | LearnItem::Load { dst, src: s } => {
                let imm = matches!(s, LearnSrc::Imm(_)) as u16;
                let load = matches!(it, LearnItem::Load { .. }) as u16;
                w.u16(imm << 13 | load << 11 | dst.nbits as u16);
                src(w, s, dst.nbits);
                sf(w, dst);
            }
            LearnItem::Output(s) => {
                w.u16(2 << 11 | s.nbits as u16);
                sf(w, s);
            }
        }
    }
    w.u16(0);
    close(w, at);
}

/// Write one action of an apply-actions list (the instructions'
/// own — meter, goto, write_metadata — are written by
/// [`encode_instructions`]).
/// `len`: the `max_len` of an output action as the controller wrote it.
fn action(w: &mut Writer, a: &Action, untagged: bool, len: u16) {
    let output_len = |w: &mut Writer, p: u32, max_len: u16| {
        w.u16(AT_OUTPUT);
        w.u16(16);
        w.u32(p);
        w.u16(max_len);
        w.zeros(6);
    };
    let output = |w: &mut Writer, p: u32| output_len(w, p, len);
    let short = |w: &mut Writer, t: u16, v: u32| {
        w.u16(t);
        w.u16(8);
        w.u32(v);
    };
    match a {
        Action::Output(p) => output(w, *p),
        Action::Flood => output(w, OFPP_FLOOD),
        Action::All => output(w, OFPP_ALL),
        Action::InPort => output(w, OFPP_IN_PORT),
        Action::Normal => output(w, OFPP_NORMAL),
        Action::Controller(p) => output_len(w, OFPP_CONTROLLER, p.max_len),
        Action::Group(g) => short(w, AT_GROUP, *g),
        Action::Set(SetField::NwTtl(t)) => short(w, AT_SET_NW_TTL, (*t as u32) << 24),
        Action::Set(s) => set_field(w, s),
        Action::DecTtl(_) => short(w, AT_DEC_NW_TTL, 0),
        Action::PushVlan(t) => short(w, AT_PUSH_VLAN, (*t as u32) << 16),
        Action::PopVlan => short(w, AT_POP_VLAN, 0),
        Action::PushMpls(t) => short(w, AT_PUSH_MPLS, (*t as u32) << 16),
        Action::PopMpls(t) => short(w, AT_POP_MPLS, (*t as u32) << 16),
        Action::SetMplsTtl(t) => short(w, AT_SET_MPLS_TTL, (*t as u32) << 24),
        Action::DecMplsTtl => short(w, AT_DEC_MPLS_TTL, 0),
        Action::ModVlanVid(v) => {
            // As ovs-ofctl: a push first when the rule matches untagged
            // frames.
            if untagged {
                short(w, AT_PUSH_VLAN, 0x8100 << 16);
            }
            set_field(w, &SetField::VlanVid(*v));
        }
        Action::Resubmit { port, table } => {
            let at = experimenter(w, NXAST_RESUBMIT_TABLE);
            w.u16(port16(*port));
            w.u8(table.unwrap_or(OFPTT_ALL));
            close(w, at);
        }
        Action::Load { dst, value } => {
            let at = experimenter(w, NXAST_REG_LOAD);
            w.u16(ofs_nbits(dst));
            w.u32(oxm::header_of(dst.field));
            w.u64(*value);
            close(w, at);
        }
        Action::Move { src, dst } => {
            let at = experimenter(w, NXAST_REG_MOVE);
            w.u16(src.nbits as u16);
            w.u16(src.ofs as u16);
            w.u16(dst.ofs as u16);
            w.u32(oxm::header_of(src.field));
            w.u32(oxm::header_of(dst.field));
            close(w, at);
        }
        Action::OutputField(src) => {
            let at = experimenter(w, NXAST_OUTPUT_REG);
            w.u16(ofs_nbits(src));
            w.u32(oxm::header_of(src.field));
            w.u16(0xffff);
            close(w, at);
        }
        Action::Learn(l) => learn(w, l),
        Action::Meter(_) | Action::GotoTable(_) | Action::WriteMetadata { .. } => {}
    }
}

/// A group's description (`ofp_group_desc`): type, id, and each bucket
/// (length, weight, watch port and group, its actions).
pub fn group_desc(g: &Group) -> Vec<u8> {
    let mut w = Writer { b: Vec::new() };
    w.u16(0);
    w.u8(g.kind.code());
    w.u8(0);
    w.u32(g.id);
    for b in &g.buckets {
        let at = w.len();
        w.u16(0);
        w.u16(b.weight);
        w.u32(b.watch_port);
        w.u32(b.watch_group);
        w.zeros(4);
        for a in &b.actions {
            action(&mut w, a, false, 0);
        }
        let n = (w.len() - at) as u16;
        w.put_u16(at, n);
    }
    let n = w.len() as u16;
    w.put_u16(0, n);
    w.b
}

/// Write `rule`'s actions as instructions: meter, apply_actions,
/// write_metadata, goto_table (what `ovs-ofctl` sends).
pub fn encode_instructions(rule: &Rule, w: &mut Writer) {
    let untagged = rule.m.mask.get(crate::switch::key::VLAN_TCI) & 0x1000 != 0
        && rule.m.value.get(crate::switch::key::VLAN_TCI) & 0x1000 == 0;
    for a in &rule.actions {
        if let Action::Meter(m) = a {
            w.u16(IT_METER);
            w.u16(8);
            w.u32(*m);
        }
    }
    let applied: Vec<&Action> = rule
        .actions
        .iter()
        .filter(|a| {
            !matches!(
                a,
                Action::Meter(_) | Action::GotoTable(_) | Action::WriteMetadata { .. }
            )
        })
        .collect();
    if !applied.is_empty() {
        let at = w.len();
        w.u16(IT_APPLY_ACTIONS);
        w.u16(0);
        w.zeros(4);
        let mut outputs = 0;
        for a in applied {
            let len = if a.port_output() {
                outputs += 1;
                rule.out_max_len(outputs - 1)
            } else {
                0
            };
            action(w, a, untagged, len);
        }
        let n = (w.len() - at) as u16;
        w.put_u16(at + 2, n);
    }
    for a in &rule.actions {
        if let Action::WriteMetadata { value, mask } = a {
            w.u16(IT_WRITE_METADATA);
            w.u16(24);
            w.zeros(4);
            w.u64(*value);
            w.u64(*mask);
        }
    }
    for a in &rule.actions {
        if let Action::GotoTable(t) = a {
            w.u16(IT_GOTO_TABLE);
            w.u16(8);
            w.u8(*t);
            w.zeros(3);
        }
    }
}
/// Does `r`'s flow-stats entry fit in one multipart reply (so it can be
/// dumped)? The error is one line naming the limit. Rules whose action
/// lists are short (no `learn`, at most 256 actions, each at most 32
/// bytes encoded) fit without encoding them.
pub fn fits_in_reply(r: &Rule) -> core::result::Result<(), String> {
    if r.actions.len() <= 256 && !r.actions.iter().any(|a| matches!(a, Action::Learn(_))) {
        return Ok(());
    }
    let mut w = Writer { b: Vec::new() };
    oxm::encode_match(&r.m, &mut w);
    encode_instructions(r, &mut w);
    let n = w.len() + FLOW_STATS_HEAD;
    if n + 16 > MAX_LEN {
        return Err(format!(
            "a rule of {} actions takes {n} bytes in an OpenFlow flow-stats entry; at most {} fit in one reply",
            r.actions.len(),
            MAX_LEN - 16
        ));
    }
    Ok(())
}

/// The fixed part of an `ofp_flow_stats` entry (before its match).
const FLOW_STATS_HEAD: usize = 48;
