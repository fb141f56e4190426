//! Rules in the `ovs-ofctl` flow syntax: parse and print.
//!
//! ```text
//! priority=100,in_port=1,udp,nw_dst=10.0.0.0/8,tp_dst=53,actions=set_field:02:00:00:00:00:09->eth_dst,output:2
//! ```
//!
//! Fields are separated by commas or blanks; everything after `actions=`
//! is the action list. Prerequisites are enforced as Open vSwitch does
//! (ovs-fields(7)): `tp_dst` needs `tcp`/`udp` (an exact `nw_proto` of 6,
//! 17 or 132 and an IP `dl_type`), `nw_dst` needs `ip` or `arp`, `ipv6_src`
//! needs `ipv6`, `tcp_flags` needs `tcp`, `icmp_type` needs `icmp`,
//! `icmpv6_type` needs `icmp6`; `set_field` on a header also needs it in the
//! match. A field given twice with conflicting values is an error. Every
//! error is one line naming the token; no input panics.
//!
//! [`Rule`]'s `Display` prints a canonical form that parses back to an
//! equal rule (`mod_*` actions print as `set_field`).

use super::field::{Field, SubField};
use super::key::{self, FieldLoc, Key};
use core::fmt::{self, Write as _};
use std::net::{Ipv4Addr, Ipv6Addr};

pub use super::learn::DEFAULT_PRIORITY;

/// A match: `key & mask == value` (value is kept masked).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Match {
    pub value: Key,
    pub mask: Key,
}

/// The rule lines of a flows/groups/meters file: numbered from 1, trimmed,
/// without blank lines and `#` comments.
pub fn rule_lines(s: &str) -> impl Iterator<Item = (usize, &str)> {
    s.lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'))
}

impl Match {
    /// The same match with the value's bits outside the mask cleared (two
    /// matches of the same packets are then equal).
    #[inline]
    pub fn normalized(&self) -> Match {
        Match {
            value: self.value.and(&self.mask),
            mask: self.mask,
        }
    }

    /// The match-everything match.
    pub const ANY: Match = Match {
        value: Key::ZERO,
        mask: Key::ZERO,
    };

    #[inline(always)]
    pub fn matches(&self, k: &Key) -> bool {
        k.matches(&self.mask, &self.value)
    }

    /// True if every packet matching `other` also matches `self` given the
    /// fields `self` constrains: `self`'s mask is a subset of `other`'s and
    /// they agree on it (OVS `del-flows` "loose" covering).
    pub fn covers(&self, other: &Match) -> bool {
        (0..key::WORDS).all(|i| {
            self.mask.w[i] & !other.mask.w[i] == 0
                && (other.value.w[i] & self.mask.w[i]) == self.value.w[i]
        })
    }

    fn field_exact(&self, f: FieldLoc) -> Option<u64> {
        (self.mask.get(f) == f.full()).then(|| self.value.get(f))
    }

    /// Set `f` to `v/m`; error if it conflicts with what is already set.
    fn put(&mut self, f: FieldLoc, v: u64, m: u64) -> Result<(), String> {
        let m = m & f.full();
        let v = v & m;
        let old_m = self.mask.get(f);
        let old_v = self.value.get(f);
        if (old_v ^ v) & (old_m & m) != 0 {
            return Err("conflicts with an earlier value of the same field".into());
        }
        self.mask.set(f, old_m | m);
        self.value.set(f, old_v | v);
        Ok(())
    }

    /// Match subfield `sf` against `v` (bits outside it untouched; a
    /// later value wins over an earlier one where they overlap).
    pub fn put_sub(&mut self, sf: &super::field::SubField, v: u64) {
        let loc = sf.field.loc();
        let m = sf.field_mask();
        let (om, ov) = (self.mask.get(loc), self.value.get(loc));
        self.mask.set(loc, om | m);
        self.value.set(loc, (ov & !m) | ((v << sf.ofs) & m));
    }

    fn put128(&mut self, word: usize, v: u128, m: u128) -> Result<(), String> {
        let v = v & m;
        let old_m = self.mask.get128(word);
        let old_v = self.value.get128(word);
        if (old_v ^ v) & (old_m & m) != 0 {
            return Err("conflicts with an earlier value of the same field".into());
        }
        self.mask.set128(word, old_m | m);
        self.value.set128(word, old_v | v);
        Ok(())
    }

    fn dl_type(&self) -> Option<u16> {
        self.field_exact(key::DL_TYPE).map(|v| v as u16)
    }

    fn nw_proto(&self) -> Option<u8> {
        self.field_exact(key::NW_PROTO).map(|v| v as u8)
    }

    fn is_ip(&self) -> bool {
        matches!(self.dl_type(), Some(ETH_IP | ETH_IPV6))
    }
}

const ETH_IP: u16 = 0x0800;
const ETH_IPV6: u16 = 0x86dd;
const ETH_ARP: u16 = 0x0806;

/// A field written by `set_field` (and the `mod_*` actions).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SetField {
    EthSrc([u8; 6]),
    EthDst([u8; 6]),
    Ipv4Src([u8; 4]),
    Ipv4Dst([u8; 4]),
    Ipv6Src([u8; 16]),
    Ipv6Dst([u8; 16]),
    TcpSrc(u16),
    TcpDst(u16),
    UdpSrc(u16),
    UdpDst(u16),
    /// 12-bit VLAN id of the outer tag.
    VlanVid(u16),
    /// 6-bit DSCP.
    IpDscp(u8),
    /// The ARP sender and target protocol addresses (`arp_spa`, `arp_tpa`).
    ArpSpa([u8; 4]),
    ArpTpa([u8; 4]),
    /// 2-bit ECN (`nw_ecn`).
    IpEcn(u8),
    /// 3-bit PCP of the outer tag (a frame without one is left as it is).
    VlanPcp(u8),
    /// The TTL / hop limit (`mod_nw_ttl`, OpenFlow's SET_NW_TTL).
    NwTtl(u8),
    /// SCTP's ports (the CRC32c checksum is patched as Open vSwitch does:
    /// a segment whose checksum was wrong keeps it wrong).
    SctpSrc(u16),
    SctpDst(u16),
    /// ICMP (`v6`: ICMPv6) type or (`code`) code; the checksum patched.
    Icmp {
        v6: bool,
        code: bool,
        v: u8,
    },
    /// ARP's sender and target hardware addresses.
    ArpSha([u8; 6]),
    ArpTha([u8; 6]),
    /// The top MPLS entry's label (20 bits) and traffic class (3 bits).
    MplsLabel(u32),
    MplsTc(u8),
    /// IPv6's 20-bit flow label (no checksum covers it).
    Ipv6Label(u32),
    /// A neighbour discovery message's target address, and the address of
    /// its first link-layer address option when that is a source (`NdSll`)
    /// or target (`NdTll`) one, as Open vSwitch writes them; the ICMPv6
    /// checksum patched.
    NdTarget([u8; 16]),
    NdSll([u8; 6]),
    NdTll([u8; 6]),
}

/// One action. The pipeline's own (`GotoTable` .. `Learn`) are what
/// makes a table set a multi-table pipeline (see [`Action::pipeline`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Action {
    Output(u32),
    Flood,
    All,
    InPort,
    Group(u32),
    Meter(u32),
    Set(SetField),
    /// `dec_ttl`; on a TTL of 0 or 1 the frame is dropped and, for the
    /// controllers that ask for `INVALID_TTL`, sent as this packet-in.
    DecTtl(Pin),
    /// Push an outer tag with this TPID (0x8100 or 0x88a8).
    PushVlan(u16),
    PopVlan,
    /// `push_mpls:ETHERTYPE` (0x8847 or 0x8848): a label stack entry after
    /// the VLAN tags, copied from the top one (bottom-of-stack cleared) or
    /// new (label 0, or 2 over IPv6; TC from the DSCP's low bits; TTL from
    /// the IP TTL, else 64), as Open vSwitch's `flow_push_mpls`.
    PushMpls(u16),
    /// `pop_mpls:ETHERTYPE`: the top entry removed, the EtherType set.
    PopMpls(u16),
    /// `set_mpls_ttl(TTL)` and `dec_mpls_ttl` on the top entry.
    SetMplsTtl(u8),
    DecMplsTtl,
    /// `mod_vlan_vid:VID`: set the outer tag's VID, pushing a tag (TPID
    /// 0x8100, PCP 0) when the frame has none (as Open vSwitch).
    ModVlanVid(u16),
    /// `goto_table:N` (an instruction: the last of the list; N beyond the
    /// rule's own table).
    GotoTable(u8),
    /// `resubmit(PORT,TABLE)`: look the packet up in `table` (the current
    /// one when `None`) as if it came from `port` (its own when `None`),
    /// run that rule's actions, then continue here.
    Resubmit {
        port: Option<u32>,
        table: Option<u8>,
    },
    /// `load:VALUE->DST[..]` (and `set_field` to a register, metadata or
    /// the tunnel id, and `set_tunnel`).
    Load {
        dst: super::field::SubField,
        value: u64,
    },
    /// `move:SRC[..]->DST[..]`.
    Move {
        src: super::field::SubField,
        dst: super::field::SubField,
    },
    /// `write_metadata:VALUE[/MASK]` (an instruction: before `goto_table`).
    WriteMetadata {
        value: u64,
        mask: u64,
    },
    /// `output:SRC[..]`: to the port the subfield holds.
    OutputField(super::field::SubField),
    /// `normal`: a MAC-learning, VLAN-aware L2 switch.
    Normal,
    /// `learn(...)`.
    Learn(std::sync::Arc<super::learn::Learn>),
    /// `controller[:MAX_LEN]`: a packet-in to the controllers.
    Controller(Pin),
}

/// OpenFlow's `OFPCML_NO_BUFFER`: the whole frame goes to the controller.
pub const PIN_WHOLE: u16 = 0xffff;
/// Packet-in reasons (OpenFlow 1.3 `OFPR_*`).
pub const PIN_NO_MATCH: u8 = 0;
pub const PIN_ACTION: u8 = 1;
pub const PIN_INVALID_TTL: u8 = 2;

/// What a packet-in says besides the frame: the bytes asked for, and the
/// reason, table and cookie of the rule whose action sent it. The last
/// three are the rule's ([`Rule::bind_controller`], when it is parsed and
/// when it enters a table): a table-miss rule (priority 0, matching
/// everything) sends `NO_MATCH`, any other `ACTION`, as Open vSwitch
/// reports them to an OpenFlow 1.3 controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Pin {
    pub max_len: u16,
    pub reason: u8,
    pub table: u8,
    pub cookie: u64,
}

/// `metadata`, the registers and the tunnel id of a packet in the pipeline.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PipeState {
    pub metadata: u64,
    pub regs: [u32; key::REGS],
    pub tun_id: u64,
}

impl PipeState {
    /// The pipeline words of key `k`.
    #[inline]
    pub fn of(k: &Key) -> PipeState {
        PipeState {
            metadata: k.get(key::METADATA),
            regs: std::array::from_fn(|i| k.get(key::reg(i)) as u32),
            tun_id: k.get(key::TUN_ID),
        }
    }
}

impl Pin {
    pub fn new(max_len: u16) -> Pin {
        Pin {
            max_len,
            reason: PIN_ACTION,
            table: 0,
            cookie: 0,
        }
    }

    /// The packet-in of a `dec_ttl` on a TTL of 0 or 1: the whole frame,
    /// reason `INVALID_TTL` (sent only to controllers that ask for it).
    pub fn invalid_ttl() -> Pin {
        Pin {
            reason: PIN_INVALID_TTL,
            ..Pin::new(PIN_WHOLE)
        }
    }
}

impl Action {
    /// An OpenFlow output action other than to the controller (to a port,
    /// `in_port`, `normal`, `flood`, `all`): those [`Rule::out_max_len`]
    /// keeps a `max_len` for.
    pub fn port_output(&self) -> bool {
        matches!(
            self,
            Action::Output(_) | Action::InPort | Action::Normal | Action::Flood | Action::All
        )
    }

    /// An action only a multi-table pipeline runs (the single-table fast
    /// path runs the others).
    pub fn pipeline(&self) -> bool {
        matches!(
            self,
            Action::ModVlanVid(_)
                | Action::GotoTable(_)
                | Action::Resubmit { .. }
                | Action::Load { .. }
                | Action::Move { .. }
                | Action::WriteMetadata { .. }
                | Action::OutputField(_)
                | Action::Normal
                | Action::Learn(_)
        )
    }
}

/// A parsed rule (`repr(C)`, the actions first: see
/// [`super::table::FlowEntry`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[repr(C)]
pub struct Rule {
    /// Empty = drop.
    pub actions: Vec<Action>,
    pub table: u8,
    pub priority: u16,
    pub cookie: u64,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    /// `send_flow_rem` (`OFPFF_SEND_FLOW_REM`): the controllers get a
    /// `FLOW_REMOVED` when the rule times out or is deleted.
    pub send_flow_rem: bool,
    /// The `max_len` of each output action ([`Action::port_output`]), in
    /// order, as a controller wrote it: OpenFlow keeps it for every output
    /// (read back in flow stats), though only `controller` uses one. Empty
    /// when all are 0 (the rule syntax has no way to say them). Not read
    /// by the datapath.
    pub out_max_len: Vec<u16>,
    pub m: Match,
}

/// A parse error: one line naming the offending token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError(pub String);

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ParseError {}

/// Quote a token for an error message: control characters escaped, long
/// tokens cut, so the message stays one line.
pub(crate) fn q(s: &str) -> String {
    let mut o = String::from("'");
    for (i, c) in s.chars().enumerate() {
        if i >= 60 {
            o.push_str("...");
            break;
        }
        if c.is_control() {
            let _ = write!(o, "{}", c.escape_default());
        } else {
            o.push(c);
        }
    }
    o.push('\'');
    o
}

fn err<T>(tok: &str, why: impl fmt::Display) -> Result<T, ParseError> {
    Err(ParseError(format!(
        "flow token {}: {}",
        q(tok),
        one_line(why)
    )))
}

/// An error that may quote user text, with its control characters escaped
/// so that it stays one line.
fn one_line(why: impl fmt::Display) -> String {
    why.to_string()
        .chars()
        .flat_map(|c| {
            let e: Vec<char> = if c.is_control() {
                c.escape_default().collect()
            } else {
                vec![c]
            };
            e
        })
        .collect()
}

/// Integer in decimal or `0x` hex, at most `max`.
fn parse_int(s: &str, max: u64) -> Result<u64, String> {
    let v = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u64::from_str_radix(h, 16)
    } else {
        s.parse::<u64>()
    }
    .map_err(|_| format!("'{s}' is not a number"))?;
    if v > max {
        return Err(format!("{v} is larger than {max}"));
    }
    Ok(v)
}

/// `v[/m]` integers; no mask = exact.
fn parse_int_masked(s: &str, max: u64, maskable: bool) -> Result<(u64, u64), String> {
    match s.split_once('/') {
        Some((v, m)) if maskable => Ok((parse_int(v, max)?, parse_int(m, max)?)),
        Some(_) => Err("this field takes no mask".into()),
        None => Ok((parse_int(s, max)?, max)),
    }
}

/// A MAC address as the 48-bit number the match keys hold.
fn parse_mac(s: &str) -> Result<u64, String> {
    let m = linerate_wire::ethernet::parse_mac(s)
        .ok_or_else(|| format!("'{s}' is not a MAC address"))?;
    Ok(m.iter().fold(0u64, |v, &b| (v << 8) | b as u64))
}

fn parse_mac_masked(s: &str) -> Result<(u64, u64), String> {
    match s.split_once('/') {
        Some((v, m)) => Ok((parse_mac(v)?, parse_mac(m)?)),
        None => Ok((parse_mac(s)?, (1 << 48) - 1)),
    }
}

fn parse_v4(s: &str) -> Result<u32, String> {
    s.parse::<Ipv4Addr>()
        .map(u32::from)
        .map_err(|_| format!("'{s}' is not an IPv4 address"))
}

fn parse_v4_masked(s: &str) -> Result<(u32, u32), String> {
    match s.split_once('/') {
        None => Ok((parse_v4(s)?, u32::MAX)),
        Some((a, m)) => {
            let a = parse_v4(a)?;
            let m = if m.contains('.') {
                parse_v4(m)?
            } else {
                let p = parse_int(m, 32).map_err(|_| format!("bad prefix length '{m}'"))?;
                if p == 0 {
                    0
                } else {
                    u32::MAX << (32 - p)
                }
            };
            Ok((a, m))
        }
    }
}

fn parse_v6(s: &str) -> Result<u128, String> {
    s.parse::<Ipv6Addr>()
        .map(u128::from)
        .map_err(|_| format!("'{s}' is not an IPv6 address"))
}

fn parse_v6_masked(s: &str) -> Result<(u128, u128), String> {
    match s.split_once('/') {
        None => Ok((parse_v6(s)?, u128::MAX)),
        Some((a, m)) => {
            let a = parse_v6(a)?;
            let m = if m.contains(':') {
                parse_v6(m)?
            } else {
                let p = parse_int(m, 128).map_err(|_| format!("bad prefix length '{m}'"))?;
                if p == 0 {
                    0
                } else {
                    u128::MAX << (128 - p)
                }
            };
            Ok((a, m))
        }
    }
}

const TCP_FLAG_NAMES: &[(&str, u16)] = &[
    ("fin", 0x001),
    ("syn", 0x002),
    ("rst", 0x004),
    ("psh", 0x008),
    ("ack", 0x010),
    ("urg", 0x020),
    ("ece", 0x040),
    ("cwr", 0x080),
    ("ns", 0x100),
];

/// `+syn-ack` style, or `value[/mask]`.
fn parse_tcp_flags(s: &str) -> Result<(u64, u64), String> {
    if !s.starts_with(['+', '-']) {
        return parse_int_masked(s, 0xfff, true);
    }
    let (mut v, mut m) = (0u64, 0u64);
    let mut rest = s;
    while !rest.is_empty() {
        let on = rest.starts_with('+');
        if !on && !rest.starts_with('-') {
            return Err(format!("'{s}': expected '+' or '-' before a flag name"));
        }
        rest = &rest[1..];
        let end = rest.find(['+', '-']).unwrap_or(rest.len());
        let name = &rest[..end];
        let bit = TCP_FLAG_NAMES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|&(_, b)| b as u64)
            .ok_or_else(|| format!("unknown TCP flag '{name}'"))?;
        if m & bit != 0 {
            return Err(format!("TCP flag '{name}' given twice"));
        }
        m |= bit;
        if on {
            v |= bit;
        }
        rest = &rest[end..];
    }
    Ok((v, m))
}

/// What a match field needs in the match (checked after all tokens).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Prereq {
    None,
    /// dl_type arp.
    Arp,
    /// A VLAN tag in the match (`dl_vlan`, `vlan_tci` with the CFI bit).
    Vlan,
    /// dl_type ip or arp (nw_src/nw_dst, nw_proto).
    IpOrArp,
    /// dl_type ip or ipv6.
    AnyIp,
    Ipv6,
    /// ip/ipv6 with nw_proto tcp, udp or sctp.
    Transport,
    Tcp,
    Udp,
    Sctp,
    Icmp4,
    Icmp6,
    /// icmp or icmp6 (`icmp_type` and `icmp_code` name both, as in
    /// `ovs-ofctl`).
    AnyIcmp,
    /// dl_type 0x8847 or 0x8848.
    Mpls,
    /// icmp6 with icmp_type 135 or 136 and icmp_code 0 (left out counts as
    /// 0, as in Open vSwitch): a neighbour solicitation or advertisement.
    Nd,
    /// [`Prereq::Nd`] with icmp_type 135 (a solicitation).
    NdSolicit,
    /// [`Prereq::Nd`] with icmp_type 136 (an advertisement).
    NdAdvert,
}

fn check_prereq(m: &Match, p: Prereq) -> Result<(), &'static str> {
    let proto = m.nw_proto();
    let ok = match p {
        Prereq::None => true,
        Prereq::Arp => m.dl_type() == Some(ETH_ARP),
        Prereq::Vlan => {
            let cfi = key::VLAN_CFI as u64;
            m.mask.get(key::VLAN_TCI) & cfi != 0 && m.value.get(key::VLAN_TCI) & cfi != 0
        }
        Prereq::IpOrArp => matches!(m.dl_type(), Some(ETH_IP | ETH_ARP)),
        Prereq::AnyIp => m.is_ip(),
        Prereq::Ipv6 => m.dl_type() == Some(ETH_IPV6),
        Prereq::Transport => m.is_ip() && matches!(proto, Some(6 | 17 | 132)),
        Prereq::Tcp => m.is_ip() && proto == Some(6),
        Prereq::Udp => m.is_ip() && proto == Some(17),
        Prereq::Sctp => m.is_ip() && proto == Some(132),
        Prereq::Mpls => matches!(m.dl_type(), Some(key::ETH_MPLS | key::ETH_MPLS_MC)),
        Prereq::Icmp4 => m.dl_type() == Some(ETH_IP) && proto == Some(1),
        Prereq::Icmp6 => m.dl_type() == Some(ETH_IPV6) && proto == Some(58),
        Prereq::AnyIcmp => {
            check_prereq(m, Prereq::Icmp4).is_ok() || check_prereq(m, Prereq::Icmp6).is_ok()
        }
        Prereq::Nd | Prereq::NdSolicit | Prereq::NdAdvert => {
            let (t, code) = (m.value.get(key::TP_SRC), m.value.get(key::TP_DST));
            let want = match p {
                Prereq::NdSolicit => t == key::ND_SOLICIT as u64,
                Prereq::NdAdvert => t == key::ND_ADVERT as u64,
                _ => t == key::ND_SOLICIT as u64 || t == key::ND_ADVERT as u64,
            };
            m.dl_type() == Some(ETH_IPV6) && proto == Some(58) && code == 0 && want
        }
    };
    if ok {
        return Ok(());
    }
    Err(match p {
        Prereq::None => "",
        Prereq::Arp => "needs arp in the match (dl_type=0x0806)",
        Prereq::Vlan => "needs a VLAN in the match (dl_vlan=, or vlan_tci= with 0x1000)",
        Prereq::IpOrArp => "needs ip or arp in the match (dl_type=0x0800 or 0x0806)",
        Prereq::AnyIp => "needs ip or ipv6 in the match",
        Prereq::Ipv6 => "needs ipv6 in the match (dl_type=0x86dd)",
        Prereq::Transport => "needs tcp, udp or sctp in the match (with ip or ipv6)",
        Prereq::Tcp => "needs tcp or tcp6 in the match",
        Prereq::Udp => "needs udp or udp6 in the match",
        Prereq::Sctp => "needs sctp or sctp6 in the match",
        Prereq::Mpls => "needs mpls or mplsm in the match (dl_type=0x8847 or 0x8848)",
        Prereq::Icmp4 => "needs icmp in the match (ip,nw_proto=1)",
        Prereq::Icmp6 => "needs icmp6 in the match (ipv6,nw_proto=58)",
        Prereq::AnyIcmp => "needs icmp or icmp6 in the match",
        Prereq::Nd => "needs icmp6 with icmp_type=135 or 136 (and icmp_code 0) in the match",
        Prereq::NdSolicit => "needs icmp6,icmp_type=135 (and icmp_code 0) in the match",
        Prereq::NdAdvert => "needs icmp6,icmp_type=136 (and icmp_code 0) in the match",
    })
}

/// Parse one match token `name=value` (or a shorthand) into `m`.
/// Returns the prerequisite to check once the whole match is known.
fn parse_match_token(m: &mut Match, name: &str, val: Option<&str>) -> Result<Prereq, String> {
    // Shorthands.
    let short = |et: u16, proto: Option<u8>| (et, proto);
    let sh = match name {
        "ip" => Some(short(ETH_IP, None)),
        "ipv6" => Some(short(ETH_IPV6, None)),
        "arp" => Some(short(ETH_ARP, None)),
        "tcp" => Some(short(ETH_IP, Some(6))),
        "udp" => Some(short(ETH_IP, Some(17))),
        "sctp" => Some(short(ETH_IP, Some(132))),
        "icmp" => Some(short(ETH_IP, Some(1))),
        "tcp6" => Some(short(ETH_IPV6, Some(6))),
        "udp6" => Some(short(ETH_IPV6, Some(17))),
        "sctp6" => Some(short(ETH_IPV6, Some(132))),
        "icmp6" => Some(short(ETH_IPV6, Some(58))),
        "mpls" => Some(short(key::ETH_MPLS, None)),
        "mplsm" => Some(short(key::ETH_MPLS_MC, None)),
        _ => None,
    };
    if let Some((et, proto)) = sh {
        if val.is_some() {
            return Err(format!("'{name}' takes no value"));
        }
        m.put(key::DL_TYPE, et as u64, u64::MAX)?;
        if let Some(p) = proto {
            m.put(key::NW_PROTO, p as u64, u64::MAX)?;
        }
        return Ok(Prereq::None);
    }
    let v = val.ok_or_else(|| format!("'{name}' needs a value ({name}=...)"))?;
    if v.is_empty() {
        return Err(format!("'{name}' has an empty value"));
    }
    let scalar =
        |m: &mut Match, f: FieldLoc, maskable: bool, p: Prereq| -> Result<Prereq, String> {
            let (val, mask) = parse_int_masked(v, f.full(), maskable)?;
            m.put(f, val, mask)?;
            Ok(p)
        };
    match name {
        "in_port" => scalar(m, key::IN_PORT, false, Prereq::None),
        "dl_src" | "eth_src" => {
            let (a, b) = parse_mac_masked(v)?;
            m.put(key::DL_SRC, a, b)?;
            Ok(Prereq::None)
        }
        "dl_dst" | "eth_dst" => {
            let (a, b) = parse_mac_masked(v)?;
            m.put(key::DL_DST, a, b)?;
            Ok(Prereq::None)
        }
        "dl_type" | "eth_type" => scalar(m, key::DL_TYPE, false, Prereq::None),
        "vlan_tci" => scalar(m, key::VLAN_TCI, true, Prereq::None),
        "dl_vlan" => {
            // 0xffff = "no 802.1Q header"; else a VID (OVS's dl_vlan).
            let x = parse_int(v, 0xffff)?;
            if x == 0xffff {
                m.put(key::VLAN_TCI, 0, 0xffff)?;
            } else if x > 0xfff {
                return Err(format!("VLAN id {x} is larger than 4095"));
            } else {
                m.put(key::VLAN_TCI, key::VLAN_CFI as u64 | x, 0x1fff)?;
            }
            Ok(Prereq::None)
        }
        "vlan_vid" => {
            // OXM semantics: 0x1000 = present bit (OFPVID_PRESENT); 0 = no tag.
            let (x, mk) = parse_int_masked(v, 0x1fff, true)?;
            m.put(key::VLAN_TCI, x, mk & 0x1fff)?;
            Ok(Prereq::None)
        }
        "dl_vlan_pcp" | "vlan_pcp" => {
            let x = parse_int(v, 7)?;
            m.put(key::VLAN_TCI, key::VLAN_CFI as u64 | (x << 13), 0xf000)?;
            Ok(Prereq::None)
        }
        "arp_op" => {
            scalar(m, key::NW_PROTO, false, Prereq::None)?;
            Ok(Prereq::Arp)
        }
        // ARP's addresses are the same key fields, by Open vSwitch's names.
        "nw_src" | "ip_src" | "nw_dst" | "ip_dst" | "arp_spa" | "arp_tpa" => {
            let f = if name.ends_with("src") || name == "arp_spa" {
                key::NW_SRC
            } else {
                key::NW_DST
            };
            let (a, b) = parse_v4_masked(v)?;
            m.put(f, a as u64, b as u64)?;
            Ok(if name.starts_with("arp") {
                Prereq::Arp
            } else {
                Prereq::IpOrArp
            })
        }
        "arp_sha" | "arp_tha" => {
            let (a, b) = parse_mac_masked(v)?;
            let f = if name == "arp_sha" {
                key::ARP_SHA
            } else {
                key::ARP_THA
            };
            m.put(f, a, b)?;
            Ok(Prereq::Arp)
        }
        "ipv6_label" | "ipv6_flabel" => scalar(m, key::IPV6_LABEL, true, Prereq::Ipv6),
        "nd_target" => {
            let (a, b) = parse_v6_masked(v)?;
            m.put128(key::ND_TARGET_WORD, a, b)?;
            Ok(Prereq::Nd)
        }
        "nd_sll" | "nd_tll" => {
            let (a, b) = parse_mac_masked(v)?;
            let (f, p) = if name == "nd_sll" {
                (key::ND_SLL, Prereq::NdSolicit)
            } else {
                (key::ND_TLL, Prereq::NdAdvert)
            };
            m.put(f, a, b)?;
            Ok(p)
        }
        "ipv6_src" | "ipv6_dst" => {
            let w = if name == "ipv6_src" {
                key::IPV6_SRC_WORD
            } else {
                key::IPV6_DST_WORD
            };
            let (a, b) = parse_v6_masked(v)?;
            m.put128(w, a, b)?;
            Ok(Prereq::Ipv6)
        }
        "nw_proto" | "ip_proto" => {
            scalar(m, key::NW_PROTO, false, Prereq::None)?;
            // ip, ipv6 or arp (nw_proto is the ARP opcode's low byte).
            if matches!(m.dl_type(), Some(ETH_ARP)) {
                Ok(Prereq::IpOrArp)
            } else {
                Ok(Prereq::AnyIp)
            }
        }
        "nw_tos" => {
            let x = parse_int(v, 0xff)?;
            if x & 3 != 0 {
                return Err(format!("nw_tos {x} has ECN bits set (use a multiple of 4)"));
            }
            m.put(key::NW_TOS, x, 0xfc)?;
            Ok(Prereq::AnyIp)
        }
        "ip_dscp" => {
            let x = parse_int(v, 63)?;
            m.put(key::NW_TOS, x << 2, 0xfc)?;
            Ok(Prereq::AnyIp)
        }
        "ip_ecn" | "nw_ecn" => {
            let x = parse_int(v, 3)?;
            m.put(key::NW_TOS, x, 0x03)?;
            Ok(Prereq::AnyIp)
        }
        "nw_ttl" => scalar(m, key::NW_TTL, false, Prereq::AnyIp),
        "metadata" => scalar(m, key::METADATA, true, Prereq::None),
        "tun_id" | "tunnel_id" => scalar(m, key::TUN_ID, true, Prereq::None),
        _ if name.len() == 4
            && name.starts_with("reg")
            && (b'0'..b'8').contains(&name.as_bytes()[3]) =>
        {
            scalar(
                m,
                key::reg((name.as_bytes()[3] - b'0') as usize),
                true,
                Prereq::None,
            )
        }
        "tp_src" => scalar(m, key::TP_SRC, true, Prereq::Transport),
        "tp_dst" => scalar(m, key::TP_DST, true, Prereq::Transport),
        "tcp_src" => scalar(m, key::TP_SRC, true, Prereq::Tcp),
        "tcp_dst" => scalar(m, key::TP_DST, true, Prereq::Tcp),
        "udp_src" => scalar(m, key::TP_SRC, true, Prereq::Udp),
        "udp_dst" => scalar(m, key::TP_DST, true, Prereq::Udp),
        "mpls_label" => scalar(m, key::MPLS_LABEL, false, Prereq::Mpls),
        "mpls_tc" => scalar(m, key::MPLS_TC, false, Prereq::Mpls),
        "mpls_bos" => scalar(m, key::MPLS_BOS, false, Prereq::Mpls),
        "sctp_src" => scalar(m, key::TP_SRC, true, Prereq::Sctp),
        "sctp_dst" => scalar(m, key::TP_DST, true, Prereq::Sctp),
        "tcp_flags" => {
            let (a, b) = parse_tcp_flags(v)?;
            m.put(key::TCP_FLAGS, a, b)?;
            Ok(Prereq::Tcp)
        }
        "icmp_type" => scalar(m, key::TP_SRC, false, Prereq::AnyIcmp).and_then(|p| {
            check_u8(m.value.get(key::TP_SRC))?;
            Ok(p)
        }),
        "icmp_code" => scalar(m, key::TP_DST, false, Prereq::AnyIcmp).and_then(|p| {
            check_u8(m.value.get(key::TP_DST))?;
            Ok(p)
        }),
        "icmpv6_type" | "icmp6_type" => {
            scalar(m, key::TP_SRC, false, Prereq::Icmp6).and_then(|p| {
                check_u8(m.value.get(key::TP_SRC))?;
                Ok(p)
            })
        }
        "icmpv6_code" | "icmp6_code" => {
            scalar(m, key::TP_DST, false, Prereq::Icmp6).and_then(|p| {
                check_u8(m.value.get(key::TP_DST))?;
                Ok(p)
            })
        }
        _ => Err(format!("unknown match field '{name}'")),
    }
}

fn check_u8(v: u64) -> Result<(), String> {
    if v > 255 {
        Err(format!("{v} is larger than 255"))
    } else {
        Ok(())
    }
}

fn set_field_prereq(m: &Match, s: &SetField) -> Result<(), &'static str> {
    let p = match s {
        SetField::EthSrc(_) | SetField::EthDst(_) | SetField::VlanVid(_) => Prereq::None,
        SetField::Ipv4Src(_) | SetField::Ipv4Dst(_) => {
            if m.dl_type() == Some(ETH_IP) {
                Prereq::None
            } else {
                return Err("needs ip in the match");
            }
        }
        SetField::Ipv6Src(_) | SetField::Ipv6Dst(_) | SetField::Ipv6Label(_) => Prereq::Ipv6,
        SetField::TcpSrc(_) | SetField::TcpDst(_) => Prereq::Tcp,
        SetField::UdpSrc(_) | SetField::UdpDst(_) => Prereq::Udp,
        SetField::IpDscp(_) => Prereq::AnyIp,
        SetField::ArpSpa(_) | SetField::ArpTpa(_) => Prereq::Arp,
        SetField::IpEcn(_) | SetField::NwTtl(_) => Prereq::AnyIp,
        SetField::VlanPcp(_) => Prereq::Vlan,
        SetField::SctpSrc(_) | SetField::SctpDst(_) => Prereq::Sctp,
        SetField::Icmp { v6: false, .. } => Prereq::Icmp4,
        SetField::Icmp { v6: true, .. } => Prereq::Icmp6,
        SetField::ArpSha(_) | SetField::ArpTha(_) => Prereq::Arp,
        // An MPLS frame, or one an earlier push_mpls made one: checked
        // when the action runs (a frame without MPLS is left as it is).
        SetField::MplsLabel(_) | SetField::MplsTc(_) => Prereq::None,
        SetField::NdTarget(_) => Prereq::Nd,
        SetField::NdSll(_) => Prereq::NdSolicit,
        SetField::NdTll(_) => Prereq::NdAdvert,
    };
    check_prereq(m, p)
}

fn parse_set_field(value: &str, field: &str, m: Option<&Match>) -> Result<SetField, String> {
    let u16v = |max: u64| -> Result<u16, String> { Ok(parse_int(value, max)? as u16) };
    let mac = || -> Result<[u8; 6], String> {
        let v = parse_mac(value)?;
        let b = v.to_be_bytes();
        Ok([b[2], b[3], b[4], b[5], b[6], b[7]])
    };
    Ok(match field {
        "eth_src" | "dl_src" => SetField::EthSrc(mac()?),
        "eth_dst" | "dl_dst" => SetField::EthDst(mac()?),
        "ip_src" | "nw_src" | "ipv4_src" => SetField::Ipv4Src(parse_v4(value)?.to_be_bytes()),
        "ip_dst" | "nw_dst" | "ipv4_dst" => SetField::Ipv4Dst(parse_v4(value)?.to_be_bytes()),
        "arp_spa" => SetField::ArpSpa(parse_v4(value)?.to_be_bytes()),
        "ip_ecn" | "nw_ecn" => SetField::IpEcn(parse_int(value, 3)? as u8),
        "vlan_pcp" | "dl_vlan_pcp" => SetField::VlanPcp(parse_int(value, 7)? as u8),
        "arp_tpa" => SetField::ArpTpa(parse_v4(value)?.to_be_bytes()),
        "ipv6_src" => SetField::Ipv6Src(parse_v6(value)?.to_be_bytes()),
        "ipv6_dst" => SetField::Ipv6Dst(parse_v6(value)?.to_be_bytes()),
        "ipv6_label" | "ipv6_flabel" => SetField::Ipv6Label(parse_int(value, 0xf_ffff)? as u32),
        "tcp_src" => SetField::TcpSrc(u16v(0xffff)?),
        "tcp_dst" => SetField::TcpDst(u16v(0xffff)?),
        "udp_src" => SetField::UdpSrc(u16v(0xffff)?),
        "udp_dst" => SetField::UdpDst(u16v(0xffff)?),
        "sctp_src" => SetField::SctpSrc(u16v(0xffff)?),
        "sctp_dst" => SetField::SctpDst(u16v(0xffff)?),
        "arp_sha" => SetField::ArpSha(mac()?),
        "mpls_label" => SetField::MplsLabel(parse_int(value, 0xf_ffff)? as u32),
        "mpls_tc" => SetField::MplsTc(parse_int(value, 7)? as u8),
        "arp_tha" => SetField::ArpTha(mac()?),
        "nd_target" => SetField::NdTarget(parse_v6(value)?.to_be_bytes()),
        "nd_sll" => SetField::NdSll(mac()?),
        "nd_tll" => SetField::NdTll(mac()?),
        "icmp_type" | "icmp_code" | "icmpv6_type" | "icmpv6_code" | "icmp6_type" | "icmp6_code" => {
            SetField::Icmp {
                v6: field.starts_with("icmpv6") || field.starts_with("icmp6"),
                code: field.ends_with("code"),
                v: parse_int(value, 255)? as u8,
            }
        }
        "tp_src" | "tp_dst" => {
            let v = u16v(0xffff)?;
            let src = field == "tp_src";
            match m.and_then(|m| m.nw_proto()) {
                Some(6) if src => SetField::TcpSrc(v),
                Some(6) => SetField::TcpDst(v),
                Some(17) if src => SetField::UdpSrc(v),
                Some(17) => SetField::UdpDst(v),
                Some(132) if src => SetField::SctpSrc(v),
                Some(132) => SetField::SctpDst(v),
                _ => return Err(format!("{field} needs tcp, udp or sctp in the match")),
            }
        }
        // Accept the OXM form with the present bit (0x1000 | vid) too.
        "vlan_vid" | "dl_vlan" => SetField::VlanVid((parse_int(value, 0x1fff)? & 0xfff) as u16),
        "ip_dscp" => SetField::IpDscp(parse_int(value, 63)? as u8),
        "nw_tos" => {
            let t = parse_int(value, 255)?;
            if t & 3 != 0 {
                return Err(format!("nw_tos {t} has ECN bits set (use a multiple of 4)"));
            }
            SetField::IpDscp((t >> 2) as u8)
        }
        _ => return Err(format!("set_field cannot write '{field}'")),
    })
}

/// `set_field:VALUE[/MASK]->FIELD` into a register, metadata or `tun_id`: a
/// [`Action::Load`] of the mask's bits (`None` for other fields).
fn pipeline_set_field(v: &str, f: &str) -> Result<Option<Action>, String> {
    let field = match Field::from_name(f) {
        Some(x @ (Field::Reg(_) | Field::Metadata | Field::TunId)) => x,
        _ => return Ok(None),
    };
    let whole = SubField::whole(field);
    let (value, mask) = match v.split_once('/') {
        Some((v, m)) => (parse_int(v, whole.ones())?, parse_int(m, whole.ones())?),
        None => (parse_int(v, whole.ones())?, whole.ones()),
    };
    if mask == 0
        || (mask >> mask.trailing_zeros()).count_ones()
            != (mask >> mask.trailing_zeros()).trailing_ones()
    {
        return Err(format!("set_field mask {mask:#x} is not one run of bits"));
    }
    let dst = SubField {
        field,
        ofs: mask.trailing_zeros() as u8,
        nbits: mask.count_ones() as u8,
    };
    Ok(Some(Action::Load {
        dst,
        value: (value & mask) >> dst.ofs,
    }))
}

fn writable(dst: &SubField) -> Result<(), String> {
    if dst.field.writable() {
        Ok(())
    } else {
        Err(format!(
            "{} cannot be written by load or move (use set_field for whole headers)",
            dst.field.name()
        ))
    }
}

/// Split the action list on commas outside parentheses.
fn split_actions(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

/// A group bucket's action list (`ovs-ofctl` syntax, `drop` or empty for
/// none). No prerequisites: a `set_field` of a header the frame lacks does
/// nothing (as Open vSwitch). The pipeline's actions (`goto_table`,
/// `resubmit`, registers, `normal`, `learn`) and `meter` are refused: a
/// bucket runs the single-table actions on its own copy of the frame.
pub fn parse_bucket_actions(s: &str) -> Result<Vec<Action>, String> {
    let s = s.trim();
    let mut v = Vec::new();
    if s.is_empty() || s == "drop" {
        return Ok(v);
    }
    for t in split_actions(s) {
        let t = t.trim();
        if t.is_empty() || t == "drop" {
            return Err(format!(
                "bucket actions {}: empty or 'drop' in a list",
                q(s)
            ));
        }
        let a = parse_action(t, None)
            .map_err(|e| format!("bucket action {}: {}", q(t), one_line(e)))?;
        if let Action::Load { dst, .. } = &a {
            if dst.field.header() {
                return Err(format!(
                    "bucket action {}: a group's bucket takes outputs, set_field, push/pop_vlan, dec_ttl, group and controller only",
                    q(t)
                ));
            }
            // A bucket's actions end the walk: nothing after them reads
            // pipeline state (linerate has no tunnel ports either).
            return Err(format!(
                "bucket action {}: {} is pipeline state, and a group's bucket does not go back to the tables",
                q(t),
                dst.field.name()
            ));
        }
        if a.pipeline() || matches!(a, Action::Meter(_)) {
            return Err(format!(
                "bucket action {}: a group's bucket takes outputs, set_field, push/pop_vlan, dec_ttl, group and controller only",
                q(t)
            ));
        }
        v.push(a);
    }
    Ok(v)
}

/// One action; `m`: the rule's match, whose prerequisites `set_field` needs
/// (`None` in a group's bucket: a field the frame lacks is not written).
fn parse_action(tok: &str, m: Option<&Match>) -> Result<Action, String> {
    let (name, arg) = match tok.find([':', '=', '(']) {
        Some(i) => {
            let (n, rest) = tok.split_at(i);
            let a = if rest.starts_with('(') {
                rest.strip_prefix('(')
                    .and_then(|r| r.strip_suffix(')'))
                    .ok_or("unbalanced parentheses")?
            } else {
                &rest[1..]
            };
            (n, Some(a))
        }
        None => (tok, None),
    };
    let need = || {
        arg.filter(|s| !s.is_empty())
            .ok_or(format!("'{name}' needs an argument"))
    };
    let no_arg = |a: Action| {
        if arg.is_some() {
            Err(format!("'{name}' takes no argument"))
        } else {
            Ok(a)
        }
    };
    let lname = name.to_ascii_lowercase();
    let set = |sf: SetField| -> Result<Action, String> {
        if let Some(m) = m {
            set_field_prereq(m, &sf).map_err(|e| format!("{name} {e}"))?;
        }
        Ok(Action::Set(sf))
    };
    match lname.as_str() {
        "output" => {
            let a = need()?;
            if a.starts_with(|c: char| c.is_ascii_digit()) {
                Ok(Action::Output(parse_int(a, u32::MAX as u64)? as u32))
            } else {
                Ok(Action::OutputField(SubField::parse(a)?))
            }
        }
        "flood" => no_arg(Action::Flood),
        "all" => no_arg(Action::All),
        "in_port" => no_arg(Action::InPort),
        "group" => Ok(Action::Group(parse_int(need()?, u32::MAX as u64)? as u32)),
        "meter" => Ok(Action::Meter(parse_int(need()?, u32::MAX as u64)? as u32)),
        "dec_ttl" => no_arg(Action::DecTtl(Pin::invalid_ttl())),
        "pop_vlan" | "strip_vlan" => no_arg(Action::PopVlan),
        "push_mpls" => {
            let t = parse_int(need()?, 0xffff)? as u16;
            if t != key::ETH_MPLS && t != key::ETH_MPLS_MC {
                return Err(format!("push_mpls ethertype {t:#06x} is not 0x8847 or 0x8848"));
            }
            Ok(Action::PushMpls(t))
        }
        "pop_mpls" => Ok(Action::PopMpls(parse_int(need()?, 0xffff)? as u16)),
        "set_mpls_ttl" => Ok(Action::SetMplsTtl(parse_int(need()?, 255)? as u8)),
        "dec_mpls_ttl" => no_arg(Action::DecMplsTtl),
        "push_vlan" => {
            let t = parse_int(need()?, 0xffff)? as u16;
            if t != 0x8100 && t != 0x88a8 {
                return Err(format!(
                    "push_vlan ethertype {t:#06x} is not 0x8100 or 0x88a8"
                ));
            }
            Ok(Action::PushVlan(t))
        }
        "set_field" => {
            let a = need()?;
            let (v, f) = a
                .split_once("->")
                .ok_or_else(|| format!("set_field needs VALUE->FIELD, got '{a}'"))?;
            match pipeline_set_field(v, f)? {
                Some(load) => Ok(load),
                None => set(parse_set_field(v, f, m)?),
            }
        }
        "load" => {
            let (src, dst) = super::learn::parse_load(need()?)?;
            writable(&dst)?;
            match src {
                super::learn::LearnSrc::Imm(value) => Ok(Action::Load { dst, value }),
                super::learn::LearnSrc::Field(_) => {
                    Err("load takes a value (use move to copy a field)".into())
                }
            }
        }
        "move" => {
            let a = need()?;
            let (src, dst) = a
                .split_once("->")
                .ok_or_else(|| format!("move needs SRC->DST, got '{a}'"))?;
            let (src, dst) = (SubField::parse(src)?, SubField::parse(dst)?);
            if src.nbits != dst.nbits {
                return Err(format!(
                    "{src} is {} bits but {dst} is {} bits",
                    src.nbits, dst.nbits
                ));
            }
            writable(&dst)?;
            Ok(Action::Move { src, dst })
        }
        "goto_table" => Ok(Action::GotoTable(parse_int(need()?, 254)? as u8)),
        "resubmit" => {
            let a = need()?;
            let (p, t) = match (tok.contains('('), a.split_once(',')) {
                (true, Some((p, t))) => (p.trim(), Some(t.trim())),
                (true, None) => (a.trim(), None),
                (false, _) => (a.trim(), None),
            };
            let port = match p {
                "" | "in_port" => None,
                p => Some(parse_int(p, u32::MAX as u64)? as u32),
            };
            let table = match t {
                None | Some("") => None,
                Some(t) => Some(parse_int(t, 254)? as u8),
            };
            if port.is_none() && table.is_none() {
                return Err("resubmit needs a port or a table: resubmit(,TABLE)".into());
            }
            Ok(Action::Resubmit { port, table })
        }
        "write_metadata" => {
            let (value, mask) = match need()?.split_once('/') {
                Some((v, m)) => (parse_int(v, u64::MAX)?, parse_int(m, u64::MAX)?),
                None => (parse_int(need()?, u64::MAX)?, u64::MAX),
            };
            Ok(Action::WriteMetadata {
                value: value & mask,
                mask,
            })
        }
        // Open vSwitch's Nicira actions for the tunnel id: a whole-field load.
        "set_tunnel" | "set_tunnel64" => Ok(Action::Load {
            dst: SubField::whole(Field::TunId),
            value: parse_int(need()?, u64::MAX)?,
        }),
        "mod_vlan_vid" => Ok(Action::ModVlanVid(parse_int(need()?, 0xfff)? as u16)),
        "mod_nw_ttl" | "set_nw_ttl" => set(SetField::NwTtl(parse_int(need()?, 255)? as u8)),
        "mod_nw_ecn" => set(SetField::IpEcn(parse_int(need()?, 3)? as u8)),
        "normal" => no_arg(Action::Normal),
        "learn" => Ok(Action::Learn(std::sync::Arc::new(
            super::learn::Learn::parse(arg.unwrap_or(""))?,
        ))),
        "controller" => {
            // `controller`, `controller:N`, `controller(max_len=N)`.
            let n = match arg.map(str::trim) {
                None | Some("") => PIN_WHOLE as u64,
                Some(a) => match a.split_once('=') {
                    Some((k, v)) if k.trim() == "max_len" => parse_int(v.trim(), 0xffff)?,
                    Some((k, _)) => {
                        return Err(format!(
                            "controller({k}=...): only max_len is supported (reason, id and userdata are not)"
                        ))
                    }
                    None => parse_int(a, 0xffff)?,
                },
            };
            Ok(Action::Controller(Pin::new(n as u16)))
        }
        "write_actions" | "clear_actions" => Err(format!(
            "'{name}' is not supported (the OpenFlow action set): use apply-actions (the plain list)"
        )),
        "mod_dl_src" => set(parse_set_field(need()?, "eth_src", m)?),
        "mod_dl_dst" => set(parse_set_field(need()?, "eth_dst", m)?),
        "mod_nw_src" => set(parse_set_field(need()?, "ip_src", m)?),
        "mod_nw_dst" => set(parse_set_field(need()?, "ip_dst", m)?),
        "mod_tp_src" => set(parse_set_field(need()?, "tp_src", m)?),
        "mod_tp_dst" => set(parse_set_field(need()?, "tp_dst", m)?),
        "mod_nw_tos" => set(parse_set_field(need()?, "nw_tos", m)?),
        _ if arg.is_none() && !tok.is_empty() && tok.bytes().all(|b| b.is_ascii_digit()) => {
            Ok(Action::Output(parse_int(tok, u32::MAX as u64)? as u32))
        }
        _ => Err(format!("unknown action '{name}'")),
    }
}

/// Which kind of text is parsed: a rule to add needs `actions=`; a match
/// (del-flows, dump-flows filters) must not have one.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Rule,
    MatchOnly,
}

struct Parsed {
    rule: Rule,
    priority_given: bool,
    table_given: bool,
}

fn parse_inner(s: &str, mode: Mode) -> Result<Parsed, ParseError> {
    let (head, actions) = match s.find("actions=") {
        Some(i) => {
            // `actions=` must start a token.
            let before = &s[..i];
            if !(before.is_empty() || before.ends_with([',', ' ', '\t'])) {
                return err(s, "'actions=' must be its own field");
            }
            (before, Some(&s[i + "actions=".len()..]))
        }
        None => (s, None),
    };
    let mut r = Rule {
        table: 0,
        priority: DEFAULT_PRIORITY,
        cookie: 0,
        idle_timeout: 0,
        hard_timeout: 0,
        send_flow_rem: false,
        out_max_len: Vec::new(),
        m: Match::ANY,
        actions: Vec::new(),
    };
    let mut priority_given = false;
    let mut table_given = false;
    let mut prereqs: Vec<(&str, Prereq)> = Vec::new();
    for tok in head.split([',', ' ', '\t']).filter(|t| !t.is_empty()) {
        let (name, val) = match tok.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (tok, None),
        };
        let num = |max: u64| -> Result<u64, ParseError> {
            match val {
                Some(v) => parse_int(v, max).or_else(|e| err(tok, e)),
                None => err(tok, format!("'{name}' needs a value")),
            }
        };
        match name {
            "priority" => {
                r.priority = num(u16::MAX as u64)? as u16;
                priority_given = true;
            }
            "table" => {
                r.table = num(254)? as u8;
                table_given = true;
            }
            "cookie" => r.cookie = num(u64::MAX)?,
            "idle_timeout" => r.idle_timeout = num(u16::MAX as u64)? as u16,
            "hard_timeout" => r.hard_timeout = num(u16::MAX as u64)? as u16,
            "send_flow_rem" if val.is_none() => r.send_flow_rem = true,
            _ => match parse_match_token(&mut r.m, name, val) {
                Ok(p) => prereqs.push((tok, p)),
                Err(e) => return err(tok, e),
            },
        }
    }
    for (tok, p) in prereqs {
        if let Err(e) = check_prereq(&r.m, p) {
            return err(tok, e);
        }
    }
    match (mode, actions) {
        (Mode::Rule, None) => {
            return Err(ParseError(format!(
                "flow {}: no 'actions=' (use actions=drop to drop)",
                q(s)
            )));
        }
        (Mode::MatchOnly, Some(_)) => return err(s, "a match takes no 'actions='"),
        (Mode::Rule, Some(a)) => {
            let a = a.trim();
            if a.is_empty() || a == "drop" {
                // Empty action list = drop.
            } else {
                for t in split_actions(a) {
                    let t = t.trim();
                    if t == "drop" {
                        return err(t, "'drop' must be the only action");
                    }
                    if t.is_empty() {
                        return err(a, "empty action in the list");
                    }
                    match parse_action(t, Some(&r.m)) {
                        Ok(x) => r.actions.push(x),
                        Err(e) => return err(t, e),
                    }
                }
                if let Err(e) = check_instructions(&r) {
                    return err(a, e);
                }
            }
        }
        (Mode::MatchOnly, None) => {}
    }
    Ok(Parsed {
        rule: r,
        priority_given,
        table_given,
    })
}

/// OpenFlow's instruction order: `write_metadata` then `goto_table` end
/// the list, and `goto_table` goes to a later table.
fn check_instructions(r: &Rule) -> Result<(), String> {
    let n = r.actions.len();
    for (i, a) in r.actions.iter().enumerate() {
        match a {
            Action::GotoTable(t) if i + 1 != n => {
                return Err(format!("goto_table:{t} must be the last action"))
            }
            Action::GotoTable(t) if *t <= r.table => {
                return Err(format!(
                    "goto_table:{t} in table {}: goto_table only goes to a later table",
                    r.table
                ))
            }
            Action::WriteMetadata { .. }
                if !(i + 1 == n
                    || (i + 2 == n && matches!(r.actions[n - 1], Action::GotoTable(_)))) =>
            {
                return Err("write_metadata may only be followed by goto_table".into())
            }
            _ => {}
        }
    }
    Ok(())
}

impl Rule {
    /// Parse a rule (`add-flow` syntax; `actions=` required).
    pub fn parse(s: &str) -> Result<Rule, ParseError> {
        parse_inner(s, Mode::Rule).map(|p| {
            let mut r = p.rule;
            r.bind_controller();
            r
        })
    }

    /// Is this a table-miss rule (priority 0, every field wildcarded)?
    pub fn table_miss(&self) -> bool {
        self.priority == 0 && self.m.mask == Key::ZERO
    }

    /// Give each `controller` action the rule's table, cookie and reason
    /// (see [`Pin`]).
    pub fn bind_controller(&mut self) {
        let reason = if self.table_miss() {
            PIN_NO_MATCH
        } else {
            PIN_ACTION
        };
        let (table, cookie) = (self.table, self.cookie);
        for a in &mut self.actions {
            match a {
                Action::Controller(p) => {
                    p.reason = reason;
                    p.table = table;
                    p.cookie = cookie;
                }
                Action::DecTtl(p) => {
                    p.table = table;
                    p.cookie = cookie;
                }
                _ => {}
            }
        }
    }

    /// Keep `lens`, the `max_len`s of the rule's output actions in order
    /// ([`Rule::out_max_len`]): nothing when all are 0 or when they do not
    /// pair with the actions.
    pub fn set_out_max_len(&mut self, lens: Vec<u16>) {
        let outputs = self.actions.iter().filter(|a| a.port_output()).count();
        self.out_max_len = if lens.iter().all(|&l| l == 0) || lens.len() != outputs {
            Vec::new()
        } else {
            lens
        };
    }

    /// The `max_len` of the rule's `i`th output action (0 unless set).
    pub fn out_max_len(&self, i: usize) -> u16 {
        self.out_max_len.get(i).copied().unwrap_or(0)
    }

    /// Bytes the rule holds on the heap (its actions; a `learn` spec's
    /// items), for memory budgets.
    pub fn heap_bytes(&self) -> usize {
        Rule::actions_heap_bytes(&self.actions) + self.out_max_len.capacity() * 2
    }

    /// Bytes an action list holds on the heap.
    pub fn actions_heap_bytes(actions: &Vec<Action>) -> usize {
        actions.capacity() * std::mem::size_of::<Action>()
            + actions
                .iter()
                .map(|a| match a {
                    Action::Learn(l) => {
                        std::mem::size_of::<super::learn::Learn>()
                            + l.items.capacity() * std::mem::size_of::<super::learn::LearnItem>()
                    }
                    _ => 0,
                })
                .sum::<usize>()
    }
}

/// A match for `del-flows` / `dump-flows`: fields only, the priority if
/// one was given (then deletion is strict on it) and the table if one was
/// given (else every table, as ovs-ofctl).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MatchSpec {
    pub m: Match,
    pub priority: Option<u16>,
    pub table: Option<u8>,
}

impl MatchSpec {
    pub fn parse(s: &str) -> Result<MatchSpec, ParseError> {
        let p = parse_inner(s, Mode::MatchOnly)?;
        Ok(MatchSpec {
            m: p.rule.m,
            priority: p.priority_given.then_some(p.rule.priority),
            table: p.table_given.then_some(p.rule.table),
        })
    }
}

fn fmt_mac(v: u64) -> String {
    let b = v.to_be_bytes();
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        b[2], b[3], b[4], b[5], b[6], b[7]
    )
}

fn fmt_v4(v: u32, m: u32) -> String {
    if m == u32::MAX {
        Ipv4Addr::from(v).to_string()
    } else if m.leading_ones() + m.trailing_zeros() == 32 {
        format!("{}/{}", Ipv4Addr::from(v), m.leading_ones())
    } else {
        format!("{}/{}", Ipv4Addr::from(v), Ipv4Addr::from(m))
    }
}

fn fmt_v6(v: u128, m: u128) -> String {
    if m == u128::MAX {
        Ipv6Addr::from(v).to_string()
    } else if m.leading_ones() + m.trailing_zeros() == 128 {
        format!("{}/{}", Ipv6Addr::from(v), m.leading_ones())
    } else {
        format!("{}/{}", Ipv6Addr::from(v), Ipv6Addr::from(m))
    }
}

impl fmt::Display for Match {
    /// Canonical match text (`priority`, `actions` not included); empty for
    /// the match-everything match.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts: Vec<String> = Vec::new();
        let num = |fl: FieldLoc| -> Option<String> {
            let m = self.mask.get(fl);
            let v = self.value.get(fl);
            if m == 0 {
                None
            } else if m == fl.full() {
                Some(format!("{v}"))
            } else {
                Some(format!("{v:#x}/{m:#x}"))
            }
        };
        if let Some(s) = num(key::IN_PORT) {
            parts.push(format!("in_port={s}"));
        }
        let dl = self.dl_type();
        let proto = self.nw_proto();
        let mut proto_done = false;
        match (dl, proto) {
            (Some(ETH_IP), Some(p @ (1 | 6 | 17 | 132))) => {
                parts.push(
                    ["icmp", "tcp", "udp", "sctp"]
                        [[1, 6, 17, 132].iter().position(|&x| x == p).unwrap_or(0)]
                    .into(),
                );
                proto_done = true;
            }
            (Some(ETH_IPV6), Some(p @ (58 | 6 | 17 | 132))) => {
                parts.push(
                    ["icmp6", "tcp6", "udp6", "sctp6"]
                        [[58, 6, 17, 132].iter().position(|&x| x == p).unwrap_or(0)]
                    .into(),
                );
                proto_done = true;
            }
            (Some(ETH_IP), _) => parts.push("ip".into()),
            (Some(ETH_IPV6), _) => parts.push("ipv6".into()),
            (Some(ETH_ARP), _) => parts.push("arp".into()),
            (Some(key::ETH_MPLS), _) => parts.push("mpls".into()),
            (Some(key::ETH_MPLS_MC), _) => parts.push("mplsm".into()),
            _ => {
                if let Some(s) = num(key::DL_TYPE) {
                    let v = self.value.get(key::DL_TYPE);
                    let _ = s;
                    parts.push(format!("dl_type={v:#06x}"));
                }
            }
        }
        if self.mask.get(key::VLAN_TCI) != 0 {
            let (v, m) = (self.value.get(key::VLAN_TCI), self.mask.get(key::VLAN_TCI));
            if m == 0xffff {
                parts.push(format!("vlan_tci={v:#06x}"));
            } else {
                parts.push(format!("vlan_tci={v:#06x}/{m:#06x}"));
            }
        }
        // A MAC field: `name=MAC`, or `name=MAC/MASK`.
        let macs = |parts: &mut Vec<String>, fields: [(&str, FieldLoc); 2]| {
            for (name, fl) in fields {
                let m = self.mask.get(fl);
                if m == fl.full() {
                    parts.push(format!("{name}={}", fmt_mac(self.value.get(fl))));
                } else if m != 0 {
                    parts.push(format!(
                        "{name}={}/{}",
                        fmt_mac(self.value.get(fl)),
                        fmt_mac(m)
                    ));
                }
            }
        };
        macs(
            &mut parts,
            [("dl_src", key::DL_SRC), ("dl_dst", key::DL_DST)],
        );
        if dl == Some(ETH_IPV6) {
            for (name, w) in [
                ("ipv6_src", key::IPV6_SRC_WORD),
                ("ipv6_dst", key::IPV6_DST_WORD),
            ] {
                let m = self.mask.get128(w);
                if m != 0 {
                    parts.push(format!("{name}={}", fmt_v6(self.value.get128(w), m)));
                }
            }
            if let Some(s) = self.hex_masked("ipv6_label", key::IPV6_LABEL) {
                parts.push(s);
            }
        } else {
            for (name, fl) in [("nw_src", key::NW_SRC), ("nw_dst", key::NW_DST)] {
                let m = self.mask.get(fl) as u32;
                if m != 0 {
                    parts.push(format!("{name}={}", fmt_v4(self.value.get(fl) as u32, m)));
                }
            }
            macs(
                &mut parts,
                [("arp_sha", key::ARP_SHA), ("arp_tha", key::ARP_THA)],
            );
        }
        if !proto_done {
            if let Some(s) = num(key::NW_PROTO) {
                parts.push(format!("nw_proto={s}"));
            }
        }
        let tm = self.mask.get(key::NW_TOS);
        let tv = self.value.get(key::NW_TOS);
        if tm & 0xfc != 0 {
            parts.push(format!("nw_tos={}", tv & 0xfc));
        }
        if tm & 0x03 != 0 {
            parts.push(format!("ip_ecn={}", tv & 3));
        }
        if let Some(s) = num(key::NW_TTL) {
            parts.push(format!("nw_ttl={s}"));
        }
        if matches!(dl, Some(key::ETH_MPLS | key::ETH_MPLS_MC)) {
            for (name, fl) in [
                ("mpls_label", key::MPLS_LABEL),
                ("mpls_tc", key::MPLS_TC),
                ("mpls_bos", key::MPLS_BOS),
            ] {
                if let Some(s) = num(fl) {
                    parts.push(format!("{name}={s}"));
                }
            }
        }
        let icmp = matches!(proto, Some(1 | 58)) && proto_done;
        // ICMPv6's too are printed as `icmp_type` and `icmp_code`, as
        // Open vSwitch prints them.
        let (sname, dname) = if icmp {
            ("icmp_type", "icmp_code")
        } else {
            ("tp_src", "tp_dst")
        };
        if let Some(s) = num(key::TP_SRC) {
            parts.push(format!("{sname}={s}"));
        }
        if let Some(s) = num(key::TP_DST) {
            parts.push(format!("{dname}={s}"));
        }
        // Neighbour discovery's fields after the ICMPv6 type and code (as
        // Open vSwitch prints them).
        let m = self.mask.get128(key::ND_TARGET_WORD);
        if m != 0 {
            let v = self.value.get128(key::ND_TARGET_WORD);
            parts.push(format!("nd_target={}", fmt_v6(v, m)));
        }
        macs(
            &mut parts,
            [("nd_sll", key::ND_SLL), ("nd_tll", key::ND_TLL)],
        );
        let (fv, fm) = (
            self.value.get(key::TCP_FLAGS),
            self.mask.get(key::TCP_FLAGS),
        );
        if fm != 0 {
            parts.push(format!("tcp_flags={fv:#05x}/{fm:#05x}"));
        }
        let regs = (0..key::REGS).map(|n| (format!("reg{n}"), key::reg(n)));
        let pipe = [
            ("metadata".to_string(), key::METADATA),
            ("tun_id".to_string(), key::TUN_ID),
        ];
        for (name, fl) in regs.chain(pipe) {
            parts.extend(self.hex_masked(&name, fl));
        }
        f.write_str(&parts.join(","))
    }
}

impl Match {
    /// `name=0xV` (the whole field), `name=0xV/0xM`, or nothing when the
    /// match leaves the field out.
    fn hex_masked(&self, name: &str, fl: FieldLoc) -> Option<String> {
        let (v, m) = (self.value.get(fl), self.mask.get(fl));
        if m == fl.full() {
            Some(format!("{name}={v:#x}"))
        } else if m != 0 {
            Some(format!("{name}={v:#x}/{m:#x}"))
        } else {
            None
        }
    }
}

fn fmt_set(s: &SetField) -> String {
    let mac = |b: &[u8; 6]| {
        format!(
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    };
    match s {
        SetField::EthSrc(b) => format!("set_field:{}->eth_src", mac(b)),
        SetField::EthDst(b) => format!("set_field:{}->eth_dst", mac(b)),
        SetField::Ipv4Src(a) => format!("set_field:{}->ip_src", Ipv4Addr::from(*a)),
        SetField::Ipv4Dst(a) => format!("set_field:{}->ip_dst", Ipv4Addr::from(*a)),
        SetField::Ipv6Src(a) => format!("set_field:{}->ipv6_src", Ipv6Addr::from(*a)),
        SetField::Ipv6Label(l) => format!("set_field:{l:#x}->ipv6_label"),
        SetField::NdTarget(a) => format!("set_field:{}->nd_target", Ipv6Addr::from(*a)),
        SetField::NdSll(b) => format!("set_field:{}->nd_sll", mac(b)),
        SetField::NdTll(b) => format!("set_field:{}->nd_tll", mac(b)),
        SetField::Ipv6Dst(a) => format!("set_field:{}->ipv6_dst", Ipv6Addr::from(*a)),
        SetField::TcpSrc(p) => format!("set_field:{p}->tcp_src"),
        SetField::TcpDst(p) => format!("set_field:{p}->tcp_dst"),
        SetField::UdpSrc(p) => format!("set_field:{p}->udp_src"),
        SetField::UdpDst(p) => format!("set_field:{p}->udp_dst"),
        SetField::VlanVid(v) => format!("set_field:{v}->vlan_vid"),
        SetField::IpDscp(d) => format!("set_field:{d}->ip_dscp"),
        SetField::ArpSpa(a) => format!("set_field:{}->arp_spa", Ipv4Addr::from(*a)),
        SetField::IpEcn(e) => format!("set_field:{e}->nw_ecn"),
        SetField::VlanPcp(p) => format!("set_field:{p}->vlan_pcp"),
        SetField::NwTtl(t) => format!("mod_nw_ttl:{t}"),
        SetField::ArpTpa(a) => format!("set_field:{}->arp_tpa", Ipv4Addr::from(*a)),
        SetField::SctpSrc(p) => format!("set_field:{p}->sctp_src"),
        SetField::SctpDst(p) => format!("set_field:{p}->sctp_dst"),
        SetField::Icmp { v6, code, v } => format!(
            "set_field:{v}->{}_{}",
            if *v6 { "icmpv6" } else { "icmp" },
            if *code { "code" } else { "type" }
        ),
        SetField::ArpSha(m) => format!("set_field:{}->arp_sha", mac(m)),
        SetField::MplsLabel(l) => format!("set_field:{l}->mpls_label"),
        SetField::MplsTc(t) => format!("set_field:{t}->mpls_tc"),
        SetField::ArpTha(m) => format!("set_field:{}->arp_tha", mac(m)),
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::Output(p) => write!(f, "output:{p}"),
            Action::Flood => f.write_str("flood"),
            Action::All => f.write_str("all"),
            Action::InPort => f.write_str("in_port"),
            Action::Group(g) => write!(f, "group:{g}"),
            Action::Meter(m) => write!(f, "meter:{m}"),
            Action::Set(s) => f.write_str(&fmt_set(s)),
            Action::DecTtl(_) => f.write_str("dec_ttl"),
            Action::PushVlan(t) => write!(f, "push_vlan:{t:#06x}"),
            Action::PopVlan => f.write_str("pop_vlan"),
            Action::PushMpls(t) => write!(f, "push_mpls:{t:#06x}"),
            Action::PopMpls(t) => write!(f, "pop_mpls:{t:#06x}"),
            Action::SetMplsTtl(t) => write!(f, "set_mpls_ttl({t})"),
            Action::DecMplsTtl => f.write_str("dec_mpls_ttl"),
            Action::ModVlanVid(v) => write!(f, "mod_vlan_vid:{v}"),
            Action::GotoTable(t) => write!(f, "goto_table:{t}"),
            Action::Resubmit { port, table } => {
                f.write_str("resubmit(")?;
                if let Some(p) = port {
                    write!(f, "{p}")?;
                }
                f.write_str(",")?;
                if let Some(t) = table {
                    write!(f, "{t}")?;
                }
                f.write_str(")")
            }
            Action::Load { dst, value } => write!(f, "load:{value:#x}->{dst}"),
            Action::Move { src, dst } => write!(f, "move:{src}->{dst}"),
            Action::WriteMetadata { value, mask } if *mask == u64::MAX => {
                write!(f, "write_metadata:{value:#x}")
            }
            Action::WriteMetadata { value, mask } => {
                write!(f, "write_metadata:{value:#x}/{mask:#x}")
            }
            Action::OutputField(s) => write!(f, "output:{s}"),
            Action::Normal => f.write_str("NORMAL"),
            Action::Learn(l) => write!(f, "{l}"),
            Action::Controller(p) => write!(f, "CONTROLLER:{}", p.max_len),
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.table != 0 {
            write!(f, "table={},", self.table)?;
        }
        if self.cookie != 0 {
            write!(f, "cookie={:#x},", self.cookie)?;
        }
        if self.idle_timeout != 0 {
            write!(f, "idle_timeout={},", self.idle_timeout)?;
        }
        if self.hard_timeout != 0 {
            write!(f, "hard_timeout={},", self.hard_timeout)?;
        }
        if self.send_flow_rem {
            f.write_str("send_flow_rem,")?;
        }
        write!(f, "priority={}", self.priority)?;
        let m = self.m.to_string();
        if !m.is_empty() {
            write!(f, ",{m}")?;
        }
        f.write_str(",actions=")?;
        if self.actions.is_empty() {
            return f.write_str("drop");
        }
        for (i, a) in self.actions.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{a}")?;
        }
        Ok(())
    }
}

/// Fuzz body: any bytes as a rule and as a match; printing a parsed rule
/// must parse back to the same rule; errors are one line.
pub fn fuzz(data: &[u8]) {
    let Ok(s) = core::str::from_utf8(data) else {
        return;
    };
    match Rule::parse(s) {
        Ok(r) => {
            let t = r.to_string();
            let r2 = Rule::parse(&t)
                .unwrap_or_else(|e| panic!("printed rule {t:?} does not parse: {e}"));
            assert_eq!(r, r2, "round trip of {t:?}");
        }
        Err(e) => assert!(!e.0.contains('\n'), "multi-line error: {e:?}"),
    }
    match MatchSpec::parse(s) {
        Ok(m) => {
            let t = m.m.to_string();
            let m2 = MatchSpec::parse(&t)
                .unwrap_or_else(|e| panic!("printed match {t:?} does not parse: {e}"));
            assert_eq!(m.m, m2.m);
        }
        Err(e) => assert!(!e.0.contains('\n'), "multi-line error: {e:?}"),
    }
}

impl super::learn::Learn {
    /// The rule this spec learns from a packet whose key (at the `learn`
    /// action) is `k`.
    pub fn rule(&self, k: &Key) -> Rule {
        let val = |s: &super::learn::LearnSrc| match s {
            super::learn::LearnSrc::Field(f) => f.read(k),
            super::learn::LearnSrc::Imm(v) => *v,
        };
        let mut m = Match::ANY;
        let mut actions = Vec::new();
        for it in &self.items {
            match it {
                super::learn::LearnItem::Match { dst, src } => {
                    m.put_sub(dst, val(src));
                }
                super::learn::LearnItem::Load { dst, src } => actions.push(Action::Load {
                    dst: *dst,
                    value: val(src) & dst.ones(),
                }),
                super::learn::LearnItem::Output(s) => {
                    actions.push(Action::Output(s.read(k) as u32))
                }
            }
        }
        Rule {
            table: self.table,
            priority: self.priority,
            cookie: self.cookie,
            idle_timeout: self.idle_timeout,
            hard_timeout: self.hard_timeout,
            send_flow_rem: false,
            out_max_len: Vec::new(),
            m,
            actions,
        }
    }
}
