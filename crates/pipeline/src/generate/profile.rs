//! The traffic profile: what `linerate gen` sends, as read from TOML.
//!
//! ```toml
//! duration_s = 10.0          # optional: stop after this long (from the first departure)
//! count = 1000000            # optional: packets per stream
//!
//! [[streams]]
//! name = "udp"
//! id = 1
//! size = 64                  # or "simple" / "ipv6-simple" / { list = [...] } / { min = 60, max = 1514 }
//! rate = { pps = 100000 }    # or { bps = 1e9, accounting = "l1", mode = "poisson", seed = 7 }
//! signature = { enabled = true, sample_every = 1 }
//! [streams.template]
//! eth_src = "02:00:00:00:00:01"
//! eth_dst = "02:00:00:00:00:02"
//! vlans = [100]
//! l3 = { ipv4 = { src = "10.0.0.1", dst = "10.0.0.2", ttl = 64, dscp = 0 } }
//! l4 = { udp = { sport = 1024, dport = 1024 } }
//! payload = "deadbeef"       # hex byte pattern repeated over the payload (default zeros)
//! [[streams.fields]]
//! field = "ip_src"
//! op = "inc"
//! step = 1
//! count = 256
//! ```
//!
//! Frame sizes are Ethernet frame lengths WITHOUT the 4-byte FCS (60..=9000):
//! IMIX "simple" is 7:4:1 of 60/590/1514 bytes (64/594/1518 on the wire with
//! FCS); "ipv6-simple" is 7:4:1 of 78/590/1514 (82/594/1518 with FCS; 78
//! holds Ethernet + IPv6 + TCP). Frames must hold the headers, plus the
//! 24-byte signature when enabled (IPv4 UDP: 66, IPv6 TCP: 98), else
//! `Generator::new` fails: the presets' 60/78 do not fit a signature.

use serde::{Deserialize, Serialize};

/// A whole profile: independent streams plus global limits.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    pub streams: Vec<StreamSpec>,
    /// Stop after this many seconds (counted from the first departure).
    #[serde(default)]
    pub duration_s: Option<f64>,
    /// Packets PER STREAM (a stream's `rate.count` overrides it).
    #[serde(default)]
    pub count: Option<u64>,
}

/// One stream: a template, its frame sizes, varying fields, a rate.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct StreamSpec {
    pub name: String,
    /// Stream id written into the signature.
    #[serde(default)]
    pub id: u16,
    pub template: Template,
    #[serde(default)]
    pub size: SizeSpec,
    #[serde(default)]
    pub fields: Vec<FieldSpec>,
    #[serde(default)]
    pub rate: RateSpec,
    #[serde(default)]
    pub signature: SigSpec,
}

/// Header values of the template frame.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Template {
    #[serde(default = "default_src_mac")]
    pub eth_src: String,
    #[serde(default = "default_dst_mac")]
    pub eth_dst: String,
    /// VLAN TCIs (PCP/DEI/VID), outermost first, at most 2.
    #[serde(default)]
    pub vlans: Vec<u16>,
    pub l3: L3Spec,
    pub l4: L4Spec,
    /// Hex byte pattern repeated over the L4 payload ("" = zeros).
    #[serde(default)]
    pub payload: String,
}

fn default_src_mac() -> String {
    "02:00:00:00:00:01".into()
}
fn default_dst_mac() -> String {
    "02:00:00:00:00:02".into()
}
fn default_ttl() -> u8 {
    64
}

/// IPv4 or IPv6 header values.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "lowercase", deny_unknown_fields)]
pub enum L3Spec {
    Ipv4(IpSpec),
    Ipv6(IpSpec),
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct IpSpec {
    pub src: String,
    pub dst: String,
    #[serde(default = "default_ttl")]
    pub ttl: u8,
    /// DSCP (6 bits); ECN is 0.
    #[serde(default)]
    pub dscp: u8,
}

/// Transport header values.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "lowercase", deny_unknown_fields)]
pub enum L4Spec {
    Udp {
        sport: u16,
        dport: u16,
    },
    Tcp {
        sport: u16,
        dport: u16,
        /// TCP flags (9 bits); default SYN (0x002).
        #[serde(default = "default_tcp_flags")]
        flags: u16,
    },
    /// ICMP (ICMPv6 over IPv6); type default echo request.
    Icmp {
        #[serde(default, rename = "type")]
        ty: Option<u8>,
        #[serde(default)]
        code: u8,
        #[serde(default)]
        id: u16,
    },
}

fn default_tcp_flags() -> u16 {
    0x002
}

/// Frame sizes (without FCS).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum SizeSpec {
    /// One size.
    Fixed(u16),
    /// A preset: "simple" (IMIX 7:4:1 of 60/590/1514) or "ipv6-simple" (7:4:1 of 78/590/1514).
    Preset(String),
    /// Weighted sizes, sent in a fixed interleaved cycle (smooth weighted round robin).
    List { list: Vec<WeightedSize> },
    /// Uniformly random sizes in `min..=max` (seeded PRNG; at most 4096 distinct sizes).
    Uniform {
        min: u16,
        max: u16,
        #[serde(default)]
        seed: Option<u64>,
    },
}

impl Default for SizeSpec {
    fn default() -> Self {
        SizeSpec::Fixed(60)
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct WeightedSize {
    pub size: u16,
    #[serde(default = "one")]
    pub weight: u32,
}
fn one() -> u32 {
    1
}

/// A header field that varies per packet.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct FieldSpec {
    pub field: FieldName,
    #[serde(flatten)]
    pub op: FieldOp,
}

#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum FieldName {
    EthSrc,
    EthDst,
    IpSrc,
    IpDst,
    Sport,
    Dport,
    /// VID (12 bits) of the outermost VLAN tag.
    Vlan,
    /// IPv4 TTL / IPv6 hop limit.
    Ttl,
    Dscp,
    TcpFlags,
}

impl FieldName {
    pub fn as_str(&self) -> &'static str {
        match self {
            FieldName::EthSrc => "eth_src",
            FieldName::EthDst => "eth_dst",
            FieldName::IpSrc => "ip_src",
            FieldName::IpDst => "ip_dst",
            FieldName::Sport => "sport",
            FieldName::Dport => "dport",
            FieldName::Vlan => "vlan",
            FieldName::Ttl => "ttl",
            FieldName::Dscp => "dscp",
            FieldName::TcpFlags => "tcp_flags",
        }
    }
}

/// A value in a profile: a number, or a string (address, MAC, decimal, 0x-hex).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum Val {
    Int(u64),
    Str(String),
}

impl From<u64> for Val {
    fn from(v: u64) -> Val {
        Val::Int(v)
    }
}
impl From<&str> for Val {
    fn from(v: &str) -> Val {
        Val::Str(v.into())
    }
}

/// How a field's value changes from packet to packet (see `generate` docs
/// for the exact sequences).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(tag = "op", rename_all = "lowercase", deny_unknown_fields)]
pub enum FieldOp {
    Inc {
        #[serde(default)]
        start: Option<Val>,
        #[serde(default = "one_u64")]
        step: u64,
        count: u64,
    },
    Dec {
        #[serde(default)]
        start: Option<Val>,
        #[serde(default = "one_u64")]
        step: u64,
        count: u64,
    },
    Random {
        min: Val,
        max: Val,
        #[serde(default)]
        seed: Option<u64>,
    },
    List {
        values: Vec<Val>,
    },
    Range {
        min: Val,
        max: Val,
        #[serde(default = "one_u64")]
        step: u64,
    },
}
fn one_u64() -> u64 {
    1
}

/// Bytes counted per frame for bit rates.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Accounting {
    /// Frame + FCS 4 + preamble 8 + IFG 12 (what a line rate is quoted in).
    #[default]
    L1,
    /// Frame + FCS 4.
    L2,
}

#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum PaceMode {
    #[default]
    Cbr,
    Poisson,
    Burst,
}

/// A stream's rate. No `pps` and no `bps` = as fast as the port takes them.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RateSpec {
    #[serde(default)]
    pub pps: Option<f64>,
    #[serde(default)]
    pub bps: Option<f64>,
    #[serde(default)]
    pub accounting: Accounting,
    #[serde(default)]
    pub mode: PaceMode,
    /// Poisson PRNG seed (default 1).
    #[serde(default)]
    pub seed: Option<u64>,
    /// Packets per burst for `mode = "burst"`.
    #[serde(default)]
    pub burst: Option<u32>,
    /// Packets of this stream (overrides `Profile::count`).
    #[serde(default)]
    pub count: Option<u64>,
}

impl RateSpec {
    /// A rate as people write it: 1000 or 1000pps, 250kpps, 1.5Mpps; bit
    /// rates 100Mbps, 10Gbps (L1: frame + FCS + preamble + IFG) or
    /// 10Gbps@l2 (frame + FCS). Errors name the option (`--rate`).
    pub fn parse(s: &str) -> Result<RateSpec, String> {
        RateSpec::parse_as("--rate", s)
    }

    /// [`RateSpec::parse`] for another option: errors name `opt`.
    pub fn parse_as(opt: &str, s: &str) -> Result<RateSpec, String> {
        let t = s.trim().to_ascii_lowercase();
        let (v, acct) = match t.split_once('@') {
            Some((v, "l1")) => (v.to_string(), Some(Accounting::L1)),
            Some((v, "l2")) => (v.to_string(), Some(Accounting::L2)),
            Some((_, a)) => return Err(format!("{opt} '{s}': accounting '@{a}' is not l1 or l2")),
            None => (t.clone(), None),
        };
        let split = v.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(v.len());
        let (num, unit) = v.split_at(split);
        let x: f64 = num
            .parse()
            .map_err(|_| format!("{opt} '{s}': '{num}' is not a number"))?;
        let (mult, bits) = match unit {
            "" | "pps" => (1.0, false),
            "kpps" => (1e3, false),
            "mpps" => (1e6, false),
            "gpps" => (1e9, false),
            "bps" | "bit" | "bit/s" => (1.0, true),
            "kbps" | "kbit" | "kbit/s" => (1e3, true),
            "mbps" | "mbit" | "mbit/s" => (1e6, true),
            "gbps" | "gbit" | "gbit/s" => (1e9, true),
            u => {
                return Err(format!(
                    "{opt} '{s}': unknown unit '{u}' (pps, kpps, Mpps, bps, Mbps, Gbps)"
                ))
            }
        };
        let r = x * mult;
        if !(r.is_finite() && r > 0.0) {
            return Err(format!("{opt} '{s}': must be a positive rate"));
        }
        if !bits && acct.is_some() {
            return Err(format!("{opt} '{s}': @l1/@l2 applies to bit rates only"));
        }
        Ok(RateSpec {
            pps: (!bits).then_some(r),
            bps: bits.then_some(r),
            accounting: acct.unwrap_or(Accounting::L1),
            ..RateSpec::default()
        })
    }
}

/// One stream described by command-line shortcuts (`linerate gen`'s
/// --src-ip, --proto, --size, --flows, --rate, --pace ...), as a user of
/// trafgen or pktgen gives it without a profile file.
#[derive(Clone, Debug)]
pub struct Shortcut {
    pub src_ip: String,
    pub dst_ip: String,
    pub src_mac: String,
    pub dst_mac: String,
    /// udp, tcp or icmp.
    pub proto: String,
    pub sport: u16,
    pub dport: u16,
    /// 802.1Q tags, outermost first.
    pub vlan: Vec<u16>,
    /// Frame size without FCS, or imix / ipv6-imix; None: the smallest
    /// frame that holds the headers (and the signature), at least 60.
    pub size: Option<String>,
    /// Vary the L4 source port over this many values.
    pub flows: u32,
    pub rate: Option<RateSpec>,
    /// cbr, poisson or burst.
    pub pace: String,
    pub burst: u32,
    pub signature: bool,
    pub sample_every: u32,
}

impl Shortcut {
    /// The stream ("s0"). Errors name the option.
    pub fn stream(&self) -> Result<StreamSpec, String> {
        let a = self;
        let mut s = StreamSpec::udp("s0", &a.src_ip, &a.dst_ip, a.sport, a.dport);
        s.template.eth_src = a.src_mac.clone();
        s.template.eth_dst = a.dst_mac.clone();
        s.template.vlans = a.vlan.clone();
        s.template.l4 = match a.proto.as_str() {
            "tcp" => L4Spec::Tcp {
                sport: a.sport,
                dport: a.dport,
                flags: 0x10,
            },
            // An echo request of the IP version.
            "icmp" => L4Spec::Icmp {
                ty: None,
                code: 0,
                id: 1,
            },
            _ => L4Spec::Udp {
                sport: a.sport,
                dport: a.dport,
            },
        };
        let headers = 14
            + 4 * a.vlan.len()
            + if a.dst_ip.contains(':') { 40 } else { 20 }
            + if a.proto == "tcp" { 20 } else { 8 };
        // The smallest frame that holds the headers (IPv6 TCP, QinQ: more
        // than 60 bytes), plus the signature when on.
        let min_len = headers
            + if a.signature {
                linerate_wire::signature::LEN
            } else {
                0
            };
        let size = a
            .size
            .clone()
            .unwrap_or_else(|| min_len.max(60).to_string());
        s.size = match size.as_str() {
            "imix" | "simple" => SizeSpec::Preset("simple".into()),
            "ipv6-imix" | "ipv6-simple" => SizeSpec::Preset("ipv6-simple".into()),
            n => SizeSpec::Fixed(
                n.parse()
                    .map_err(|_| format!("--size '{n}': a frame size (60..9000) or imix"))?,
            ),
        };
        if a.flows > 1 {
            if a.proto == "icmp" {
                return Err("--flows: varies the L4 source port, which ICMP does not have".into());
            }
            s.fields.push(FieldSpec {
                field: FieldName::Sport,
                op: FieldOp::Inc {
                    start: None,
                    step: 1,
                    count: u64::from(a.flows),
                },
            });
        }
        if let Some(r) = &a.rate {
            s.rate = r.clone();
        }
        s.rate.mode = match a.pace.as_str() {
            "poisson" => PaceMode::Poisson,
            "burst" => PaceMode::Burst,
            _ => PaceMode::Cbr,
        };
        if s.rate.mode == PaceMode::Burst {
            s.rate.burst = Some(a.burst);
        }
        s.signature = SigSpec {
            enabled: a.signature,
            sample_every: a.sample_every.max(1),
        };
        Ok(s)
    }
}

/// Measurement signature.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SigSpec {
    #[serde(default)]
    pub enabled: bool,
    /// 1 = every packet carries the magic; N = packets with seq % N == 0.
    #[serde(default = "one")]
    pub sample_every: u32,
}

impl Default for SigSpec {
    fn default() -> Self {
        SigSpec {
            enabled: false,
            sample_every: 1,
        }
    }
}

impl Profile {
    /// Parse a TOML profile. Errors are one line.
    pub fn from_toml_str(s: &str) -> Result<Profile, super::GenError> {
        toml::from_str(s).map_err(|e| {
            super::GenError(format!(
                "profile: {}",
                e.to_string()
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ")
            ))
        })
    }

    /// Read and parse a TOML file.
    pub fn load(path: &std::path::Path) -> Result<Profile, super::GenError> {
        let s = std::fs::read_to_string(path)
            .map_err(|e| super::GenError(format!("profile '{}': {e}", path.display())))?;
        Profile::from_toml_str(&s).map_err(|e| {
            let m = e.0.strip_prefix("profile: ").unwrap_or(&e.0);
            super::GenError(format!("profile '{}': {m}", path.display()))
        })
    }

    /// A one-stream profile (what CLI shortcuts build).
    pub fn single(stream: StreamSpec) -> Profile {
        Profile {
            streams: vec![stream],
            duration_s: None,
            count: None,
        }
    }
}

impl StreamSpec {
    /// A UDP stream `src:sport -> dst:dport` (IPv4 or IPv6 picked from the
    /// address syntax), 60-byte frames, unlimited rate, no fields, no signature.
    pub fn udp(name: &str, src: &str, dst: &str, sport: u16, dport: u16) -> StreamSpec {
        let ip = IpSpec {
            src: src.into(),
            dst: dst.into(),
            ttl: 64,
            dscp: 0,
        };
        let l3 = if src.contains(':') {
            L3Spec::Ipv6(ip)
        } else {
            L3Spec::Ipv4(ip)
        };
        StreamSpec {
            name: name.into(),
            id: 0,
            template: Template {
                eth_src: default_src_mac(),
                eth_dst: default_dst_mac(),
                vlans: vec![],
                l3,
                l4: L4Spec::Udp { sport, dport },
                payload: String::new(),
            },
            size: SizeSpec::default(),
            fields: vec![],
            rate: RateSpec::default(),
            signature: SigSpec::default(),
        }
    }
}

#[cfg(test)]
mod rate_tests {
    use super::*;

    #[test]
    fn rates_parse() {
        let p = RateSpec::parse;
        assert_eq!(p("1000").unwrap().pps, Some(1000.0));
        assert_eq!(p("250kpps").unwrap().pps, Some(250e3));
        assert_eq!(p("1.5Mpps").unwrap().pps, Some(1.5e6));
        let r = p("10Gbps").unwrap();
        assert_eq!((r.bps, r.accounting), (Some(10e9), Accounting::L1));
        assert_eq!(p("100Mbps@l2").unwrap().accounting, Accounting::L2);
        assert!(p("fast").is_err());
        assert!(p("10furlongs").is_err());
        assert!(p("-5pps").is_err());
        assert!(p("1Mpps@l2").is_err());
        assert!(p("1Gbps@l3").is_err());
    }
}
