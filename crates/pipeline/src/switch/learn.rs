//! The `learn(...)` action (the Open vSwitch extension): from the packet
//! being switched, build a rule and add it to a table (or refresh it).
//!
//! ```text
//! learn(table=10,idle_timeout=300,priority=100,NXM_OF_VLAN_TCI[0..11],
//!       NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],load:NXM_OF_IN_PORT[]->NXM_NX_REG0[0..15])
//! ```
//!
//! Items: `table=`, `priority=`, `idle_timeout=`, `hard_timeout=`,
//! `cookie=`; `FIELD[..]` (the new rule matches the packet's own value of
//! that subfield), `DST[..]=SRC[..]` (matches DST against the packet's
//! SRC), `DST[..]=VALUE` (an immediate); `load:SRC[..]->DST[..]` and
//! `load:VALUE->DST[..]` (the new rule's actions load the packet's value or
//! the immediate), `output:SRC[..]` (the new rule outputs to the port the
//! packet's SRC holds). Field names: see [`super::field`].
//!
//! The datapath never builds the rule itself (that allocates): it sends
//! the spec and the packet's key to the control side, which calls
//! [`Learn::rule`] (in `rule.rs`, beside the rules it builds; see
//! [`super::xlate`]).

use super::field::SubField;
use core::fmt;

/// OpenFlow's priority of a rule that names none (0x8000), learned or not.
pub const DEFAULT_PRIORITY: u16 = 32768;

/// Where a learned value comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LearnSrc {
    /// The packet's value of a subfield (same width as the destination).
    Field(SubField),
    /// A constant.
    Imm(u64),
}

/// One item of a learn spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LearnItem {
    /// The new rule matches `dst` against `src`.
    Match { dst: SubField, src: LearnSrc },
    /// The new rule loads `src` into `dst`.
    Load { dst: SubField, src: LearnSrc },
    /// The new rule outputs to the port in the packet's `src`.
    Output(SubField),
}

/// A parsed `learn(...)`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Learn {
    pub table: u8,
    pub priority: u16,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    pub cookie: u64,
    pub items: Vec<LearnItem>,
}

/// A number (decimal or 0x hex), a MAC or an IPv4 address as the value of
/// a field's bits.
fn parse_imm(s: &str) -> Result<u64, String> {
    if s.contains(':') {
        let m = linerate_wire::ethernet::parse_mac(s)
            .ok_or_else(|| format!("'{s}' is not a MAC address"))?;
        return Ok(m.iter().fold(0u64, |v, &b| (v << 8) | b as u64));
    }
    if s.contains('.') {
        return s
            .parse::<std::net::Ipv4Addr>()
            .map(|a| u32::from(a) as u64)
            .map_err(|_| format!("'{s}' is not an IPv4 address"));
    }
    let r = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16),
        None => s.parse::<u64>(),
    };
    r.map_err(|_| format!("'{s}' is not a number, MAC or IPv4 address"))
}

fn fits(v: u64, dst: &SubField, what: &str) -> Result<(), String> {
    if v & !dst.ones() != 0 {
        return Err(format!("{what} {v:#x} does not fit in {dst}"));
    }
    Ok(())
}

fn same_width(src: &SubField, dst: &SubField) -> Result<(), String> {
    if src.nbits != dst.nbits {
        return Err(format!(
            "{src} is {} bits but {dst} is {} bits",
            src.nbits, dst.nbits
        ));
    }
    Ok(())
}

/// The source of `load:SRC->DST` (a subfield or an immediate), checked
/// against the destination.
pub(crate) fn parse_load(arg: &str) -> Result<(LearnSrc, SubField), String> {
    let (src, dst) = arg
        .split_once("->")
        .ok_or_else(|| format!("'{arg}': expected SRC->DST"))?;
    let dst = SubField::parse(dst.trim())?;
    let src = src.trim();
    if src.starts_with(|c: char| c.is_ascii_digit()) {
        let v = parse_imm(src)?;
        fits(v, &dst, "value")?;
        Ok((LearnSrc::Imm(v), dst))
    } else {
        let s = SubField::parse(src)?;
        same_width(&s, &dst)?;
        Ok((LearnSrc::Field(s), dst))
    }
}

impl Learn {
    /// Parse the text between `learn(` and `)`.
    pub fn parse(arg: &str) -> Result<Learn, String> {
        let mut l = Learn {
            table: 1,
            priority: DEFAULT_PRIORITY,
            idle_timeout: 0,
            hard_timeout: 0,
            cookie: 0,
            items: Vec::new(),
        };
        for t in arg.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let num = |v: &str, max: u64| -> Result<u64, String> {
                let x = parse_imm(v)?;
                if x > max {
                    return Err(format!("learn: {t}: {x} is larger than {max}"));
                }
                Ok(x)
            };
            if let Some(a) = t.strip_prefix("load:") {
                let (src, dst) = parse_load(a).map_err(|e| format!("learn: {e}"))?;
                if !dst.field.writable() {
                    return Err(format!(
                        "learn: load into {} is not supported (registers, metadata, tun_id, in_port, the MACs and the VLAN tag)",
                        dst.field.name()
                    ));
                }
                l.items.push(LearnItem::Load { dst, src });
                continue;
            }
            if let Some(a) = t.strip_prefix("output:") {
                let s = SubField::parse(a).map_err(|e| format!("learn: {e}"))?;
                l.items.push(LearnItem::Output(s));
                continue;
            }
            let (k, v) = match t.split_once('=') {
                Some((k, v)) => (k.trim(), Some(v.trim())),
                None => (t, None),
            };
            match (k, v) {
                ("table", Some(v)) => l.table = num(v, 254)? as u8,
                ("priority", Some(v)) => l.priority = num(v, u16::MAX as u64)? as u16,
                ("idle_timeout", Some(v)) => l.idle_timeout = num(v, u16::MAX as u64)? as u16,
                ("hard_timeout", Some(v)) => l.hard_timeout = num(v, u16::MAX as u64)? as u16,
                ("cookie", Some(v)) => l.cookie = num(v, u64::MAX)?,
                (
                    "fin_idle_timeout" | "fin_hard_timeout" | "send_flow_rem" | "delete_learned"
                    | "limit" | "result_dst",
                    _,
                ) => return Err(format!("learn: '{k}' is not supported")),
                (_, None) => {
                    let s = SubField::parse(k).map_err(|e| format!("learn: {e}"))?;
                    l.items.push(LearnItem::Match {
                        dst: s,
                        src: LearnSrc::Field(s),
                    });
                }
                (_, Some(v)) => {
                    let dst = SubField::parse(k).map_err(|e| format!("learn: {e}"))?;
                    let src = if v.starts_with(|c: char| c.is_ascii_digit()) {
                        let x = parse_imm(v).map_err(|e| format!("learn: {e}"))?;
                        fits(x, &dst, "value").map_err(|e| format!("learn: {e}"))?;
                        LearnSrc::Imm(x)
                    } else {
                        let s = SubField::parse(v).map_err(|e| format!("learn: {e}"))?;
                        same_width(&s, &dst).map_err(|e| format!("learn: {e}"))?;
                        LearnSrc::Field(s)
                    };
                    l.items.push(LearnItem::Match { dst, src });
                }
            }
        }
        Ok(l)
    }
}

impl fmt::Display for Learn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "learn(table={}", self.table)?;
        if self.idle_timeout != 0 {
            write!(f, ",idle_timeout={}", self.idle_timeout)?;
        }
        if self.hard_timeout != 0 {
            write!(f, ",hard_timeout={}", self.hard_timeout)?;
        }
        if self.priority != DEFAULT_PRIORITY {
            write!(f, ",priority={}", self.priority)?;
        }
        if self.cookie != 0 {
            write!(f, ",cookie={:#x}", self.cookie)?;
        }
        for it in &self.items {
            match it {
                LearnItem::Match {
                    dst,
                    src: LearnSrc::Field(s),
                } if s == dst => write!(f, ",{dst}")?,
                LearnItem::Match {
                    dst,
                    src: LearnSrc::Field(s),
                } => write!(f, ",{dst}={s}")?,
                LearnItem::Match {
                    dst,
                    src: LearnSrc::Imm(v),
                } => write!(f, ",{dst}={v:#x}")?,
                LearnItem::Load {
                    dst,
                    src: LearnSrc::Field(s),
                } => write!(f, ",load:{s}->{dst}")?,
                LearnItem::Load {
                    dst,
                    src: LearnSrc::Imm(v),
                } => write!(f, ",load:{v:#x}->{dst}")?,
                LearnItem::Output(s) => write!(f, ",output:{s}")?,
            }
        }
        f.write_str(")")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::switch::key::{self, Key};

    const SPEC: &str = "table=10,idle_timeout=300,priority=100,NXM_OF_VLAN_TCI[0..11],NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],load:NXM_OF_IN_PORT[]->NXM_NX_REG0[0..15]";

    #[test]
    fn learns_a_mac_rule_from_a_packet() {
        let l = Learn::parse(SPEC).unwrap();
        assert_eq!((l.table, l.priority, l.idle_timeout), (10, 100, 300));
        let mut k = Key::ZERO;
        k.set(key::IN_PORT, 3);
        k.set(key::DL_SRC, 0x0200_0000_0001);
        k.set(key::VLAN_TCI, 0x1000 | 30);
        let r = l.rule(&k);
        assert_eq!(
            r.to_string(),
            "table=10,idle_timeout=300,priority=100,vlan_tci=0x001e/0x0fff,dl_dst=02:00:00:00:00:01,actions=load:0x3->NXM_NX_REG0[0..15]"
        );
        // The text prints back to an equal spec.
        let t = l.to_string();
        let inner = t.strip_prefix("learn(").unwrap().strip_suffix(')').unwrap();
        assert_eq!(Learn::parse(inner).unwrap(), l);
    }

    #[test]
    fn bad_specs_are_errors() {
        for bad in [
            "NXM_OF_ETH_DST[]=NXM_OF_IN_PORT[]",
            "load:0x10000->NXM_NX_REG0[0..15]",
            "table=255",
            "limit=10",
            "NXM_NX_REG9[]",
            "output:",
            "load:NXM_NX_REG0[]->NXM_OF_IP_SRC[]",
        ] {
            assert!(Learn::parse(bad).is_err(), "{bad}");
        }
    }
}
