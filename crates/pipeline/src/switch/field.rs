//! Fields by name as `ovs-ofctl` spells them (NXM names such as
//! `NXM_NX_REG0`, OXM names such as `OXM_OF_METADATA`, and the plain names
//! `reg0`, `eth_src`, ...), and subfields `NAME[start..end]`: the operands
//! of `load`, `move`, `output:FIELD` and `learn(...)`.
//!
//! A subfield is a bit range of one field; it reads and writes the packet
//! key ([`Key`]). Writing a packet header (`eth_src`, `vlan_tci`, ...)
//! also has to change the frame: the pipeline does that ([`Field::header`]
//! says which fields are headers).

use super::key::{self, FieldLoc, Key};
use core::fmt;

/// A field that `load`, `move` and `learn` can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Field {
    /// `NXM_OF_IN_PORT`: the input port's low 16 bits (OpenFlow 1.0 ports).
    InPort,
    /// `OXM_OF_IN_PORT`: the 32-bit input port.
    InPortOxm,
    EthSrc,
    EthDst,
    EthType,
    /// `NXM_OF_VLAN_TCI`: PCP, CFI (set = tagged) and VID.
    VlanTci,
    /// `OXM_OF_VLAN_VID`: present bit (0x1000) and VID.
    VlanVid,
    IpSrc,
    IpDst,
    IpProto,
    TpSrc,
    TpDst,
    /// `NXM_NX_REG0`..`NXM_NX_REG7`.
    Reg(u8),
    /// `OXM_OF_METADATA`.
    Metadata,
    /// `NXM_NX_TUN_ID` (`tun_id`, `tunnel_id`, `OXM_OF_TUNNEL_ID`).
    TunId,
}

/// (field, canonical name, other names).
const NAMES: &[(Field, &str, &[&str])] = &[
    (Field::InPort, "NXM_OF_IN_PORT", &["in_port"]),
    (Field::InPortOxm, "OXM_OF_IN_PORT", &["in_port_oxm"]),
    (
        Field::EthSrc,
        "NXM_OF_ETH_SRC",
        &["eth_src", "dl_src", "OXM_OF_ETH_SRC"],
    ),
    (
        Field::EthDst,
        "NXM_OF_ETH_DST",
        &["eth_dst", "dl_dst", "OXM_OF_ETH_DST"],
    ),
    (
        Field::EthType,
        "NXM_OF_ETH_TYPE",
        &["eth_type", "dl_type", "OXM_OF_ETH_TYPE"],
    ),
    (Field::VlanTci, "NXM_OF_VLAN_TCI", &["vlan_tci"]),
    (Field::VlanVid, "OXM_OF_VLAN_VID", &["vlan_vid"]),
    (
        Field::IpSrc,
        "NXM_OF_IP_SRC",
        &["ip_src", "nw_src", "ipv4_src", "OXM_OF_IPV4_SRC"],
    ),
    (
        Field::IpDst,
        "NXM_OF_IP_DST",
        &["ip_dst", "nw_dst", "ipv4_dst", "OXM_OF_IPV4_DST"],
    ),
    (
        Field::IpProto,
        "NXM_OF_IP_PROTO",
        &["nw_proto", "ip_proto", "OXM_OF_IP_PROTO"],
    ),
    (
        Field::TpSrc,
        "NXM_OF_TCP_SRC",
        &[
            "tcp_src",
            "udp_src",
            "tp_src",
            "NXM_OF_UDP_SRC",
            "OXM_OF_TCP_SRC",
            "OXM_OF_UDP_SRC",
        ],
    ),
    (
        Field::TpDst,
        "NXM_OF_TCP_DST",
        &[
            "tcp_dst",
            "udp_dst",
            "tp_dst",
            "NXM_OF_UDP_DST",
            "OXM_OF_TCP_DST",
            "OXM_OF_UDP_DST",
        ],
    ),
    (Field::Reg(0), "NXM_NX_REG0", &["reg0"]),
    (Field::Reg(1), "NXM_NX_REG1", &["reg1"]),
    (Field::Reg(2), "NXM_NX_REG2", &["reg2"]),
    (Field::Reg(3), "NXM_NX_REG3", &["reg3"]),
    (Field::Reg(4), "NXM_NX_REG4", &["reg4"]),
    (Field::Reg(5), "NXM_NX_REG5", &["reg5"]),
    (Field::Reg(6), "NXM_NX_REG6", &["reg6"]),
    (Field::Reg(7), "NXM_NX_REG7", &["reg7"]),
    (Field::Metadata, "OXM_OF_METADATA", &["metadata"]),
    (
        Field::TunId,
        "NXM_NX_TUN_ID",
        &["tun_id", "tunnel_id", "OXM_OF_TUNNEL_ID"],
    ),
];

impl Field {
    /// The field of a name (any spelling in the table above).
    pub fn from_name(s: &str) -> Option<Field> {
        NAMES
            .iter()
            .find(|(_, n, alt)| *n == s || alt.contains(&s))
            .map(|&(f, _, _)| f)
    }

    /// The canonical (NXM or OXM) name.
    pub fn name(self) -> &'static str {
        NAMES
            .iter()
            .find(|(f, _, _)| *f == self)
            .map(|&(_, n, _)| n)
            .unwrap_or("?")
    }

    /// Where the field lives in the key.
    pub const fn loc(self) -> FieldLoc {
        match self {
            Field::InPort => FieldLoc {
                word: key::IN_PORT.word,
                shift: key::IN_PORT.shift,
                bits: 16,
            },
            Field::InPortOxm => key::IN_PORT,
            Field::EthSrc => key::DL_SRC,
            Field::EthDst => key::DL_DST,
            Field::EthType => key::DL_TYPE,
            Field::VlanTci => key::VLAN_TCI,
            Field::VlanVid => FieldLoc {
                word: key::VLAN_TCI.word,
                shift: key::VLAN_TCI.shift,
                bits: 13,
            },
            Field::IpSrc => key::NW_SRC,
            Field::IpDst => key::NW_DST,
            Field::IpProto => key::NW_PROTO,
            Field::TpSrc => key::TP_SRC,
            Field::TpDst => key::TP_DST,
            Field::Reg(n) => key::reg(n as usize),
            Field::Metadata => key::METADATA,
            Field::TunId => key::TUN_ID,
        }
    }

    pub const fn bits(self) -> u32 {
        self.loc().bits
    }

    /// A header of the frame (writing it changes the frame), as opposed
    /// to the pipeline's own state (registers, metadata, the tunnel id, the
    /// input port).
    pub fn header(self) -> bool {
        !matches!(
            self,
            Field::Reg(_) | Field::Metadata | Field::TunId | Field::InPort | Field::InPortOxm
        )
    }

    /// Can `load`/`move` write it? Registers, metadata, the tunnel id, the
    /// input port, the MACs and the VLAN tag; the other headers are written with
    /// `set_field` (whole fields, checksums patched).
    pub fn writable(self) -> bool {
        !self.header()
            || matches!(
                self,
                Field::EthSrc | Field::EthDst | Field::VlanTci | Field::VlanVid
            )
    }
}

/// Bits `ofs .. ofs + nbits` of a field (`NAME[ofs..ofs+nbits-1]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SubField {
    pub field: Field,
    pub ofs: u8,
    pub nbits: u8,
}

impl SubField {
    /// The whole field.
    pub fn whole(field: Field) -> SubField {
        SubField {
            field,
            ofs: 0,
            nbits: field.bits() as u8,
        }
    }

    /// `NAME[]`, `NAME[start..end]` (inclusive, as ovs-ofctl), `NAME[bit]`,
    /// or a bare `NAME` (the whole field).
    pub fn parse(s: &str) -> Result<SubField, String> {
        let (name, range) = match s.split_once('[') {
            Some((n, r)) => (
                n,
                Some(
                    r.strip_suffix(']')
                        .ok_or_else(|| format!("'{s}': no closing ']'"))?,
                ),
            ),
            None => (s, None),
        };
        let field = Field::from_name(name).ok_or_else(|| format!("unknown field '{name}'"))?;
        let bits = field.bits();
        let (lo, hi) = match range {
            None | Some("") => (0, bits - 1),
            Some(r) => {
                let num = |x: &str| {
                    x.trim()
                        .parse::<u32>()
                        .map_err(|_| format!("'{s}': '{x}' is not a bit number"))
                };
                match r.split_once("..") {
                    Some((a, b)) => (num(a)?, num(b)?),
                    None => {
                        let b = num(r)?;
                        (b, b)
                    }
                }
            }
        };
        if lo > hi || hi >= bits {
            return Err(format!(
                "'{s}': bits {lo}..{hi} are not within the field's {bits} bits"
            ));
        }
        Ok(SubField {
            field,
            ofs: lo as u8,
            nbits: (hi - lo + 1) as u8,
        })
    }

    /// All-ones of the subfield's width.
    #[inline(always)]
    pub fn ones(&self) -> u64 {
        if self.nbits >= 64 {
            u64::MAX
        } else {
            (1u64 << self.nbits) - 1
        }
    }

    /// The subfield's bits in `k`.
    #[inline(always)]
    pub fn read(&self, k: &Key) -> u64 {
        (k.get(self.field.loc()) >> self.ofs) & self.ones()
    }

    /// Set the subfield's bits in `k` to `v` (truncated to the width).
    #[inline(always)]
    pub fn write(&self, k: &mut Key, v: u64) {
        let loc = self.field.loc();
        let m = self.ones() << self.ofs;
        let old = k.get(loc);
        k.set(loc, (old & !m) | ((v << self.ofs) & m));
    }

    /// The subfield as a mask of its field (for matches).
    pub fn field_mask(&self) -> u64 {
        self.ones() << self.ofs
    }
}

impl fmt::Display for SubField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.ofs == 0 && self.nbits as u32 == self.field.bits() {
            write!(f, "{}[]", self.field.name())
        } else {
            write!(
                f,
                "{}[{}..{}]",
                self.field.name(),
                self.ofs,
                self.ofs as u32 + self.nbits as u32 - 1
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subfields_parse_print_read_and_write() {
        let s = SubField::parse("NXM_NX_REG0[0..15]").unwrap();
        assert_eq!((s.field, s.ofs, s.nbits), (Field::Reg(0), 0, 16));
        assert_eq!(s.to_string(), "NXM_NX_REG0[0..15]");
        assert_eq!(
            SubField::parse("reg3").unwrap().to_string(),
            "NXM_NX_REG3[]"
        );
        assert_eq!(SubField::parse("NXM_OF_VLAN_TCI[0..11]").unwrap().nbits, 12);
        assert_eq!(SubField::parse("metadata[63]").unwrap().ofs, 63);
        for bad in [
            "NXM_NX_REG9[]",
            "reg0[0..32]",
            "reg0[5..2]",
            "reg0[x]",
            "reg0[1",
        ] {
            assert!(SubField::parse(bad).is_err(), "{bad}");
        }
        let mut k = Key::ZERO;
        let r1 = SubField::parse("reg1[8..15]").unwrap();
        r1.write(&mut k, 0x1ab);
        assert_eq!(r1.read(&k), 0xab);
        assert_eq!(k.get(key::reg(1)), 0xab00);
        assert_eq!(k.get(key::reg(0)), 0, "reg0 shares the word");
        let m = SubField::whole(Field::Metadata);
        m.write(&mut k, u64::MAX);
        assert_eq!(m.read(&k), u64::MAX);
        k.set(key::IN_PORT, 0x1_0005);
        assert_eq!(SubField::parse("NXM_OF_IN_PORT[]").unwrap().read(&k), 5);
        assert_eq!(
            SubField::parse("OXM_OF_IN_PORT[]").unwrap().read(&k),
            0x1_0005
        );
    }
}
