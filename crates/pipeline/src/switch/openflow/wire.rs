//! OpenFlow 1.3 framing: the 8-byte header, a bounded big-endian reader,
//! a writer, the error a request is refused with, and the protocol's
//! numbers (OpenFlow 1.3.5, sect. 7; the Nicira numbers from Open
//! vSwitch's `nicira-ext.h`).

use core::fmt;

pub const VERSION: u8 = 0x04;
pub const HEADER: usize = 8;
/// The largest message (the header's 16-bit length).
pub const MAX_LEN: usize = 0xffff;

// Message types.
pub const HELLO: u8 = 0;
pub const ERROR: u8 = 1;
pub const ECHO_REQUEST: u8 = 2;
pub const ECHO_REPLY: u8 = 3;
pub const EXPERIMENTER: u8 = 4;
pub const FEATURES_REQUEST: u8 = 5;
pub const FEATURES_REPLY: u8 = 6;
pub const GET_CONFIG_REQUEST: u8 = 7;
pub const GET_CONFIG_REPLY: u8 = 8;
pub const SET_CONFIG: u8 = 9;
pub const PACKET_IN: u8 = 10;
pub const FLOW_REMOVED: u8 = 11;
pub const PORT_STATUS: u8 = 12;
pub const PACKET_OUT: u8 = 13;
pub const FLOW_MOD: u8 = 14;
pub const GROUP_MOD: u8 = 15;
pub const PORT_MOD: u8 = 16;
pub const TABLE_MOD: u8 = 17;
pub const MULTIPART_REQUEST: u8 = 18;
pub const MULTIPART_REPLY: u8 = 19;
pub const BARRIER_REQUEST: u8 = 20;
pub const BARRIER_REPLY: u8 = 21;
pub const ROLE_REQUEST: u8 = 24;
pub const ROLE_REPLY: u8 = 25;
pub const GET_ASYNC_REQUEST: u8 = 26;
pub const GET_ASYNC_REPLY: u8 = 27;
pub const SET_ASYNC: u8 = 28;
pub const METER_MOD: u8 = 29;

// Multipart types.
pub const MP_DESC: u16 = 0;
pub const MP_FLOW: u16 = 1;
pub const MP_AGGREGATE: u16 = 2;
pub const MP_TABLE: u16 = 3;
pub const MP_PORT_STATS: u16 = 4;
pub const MP_GROUP: u16 = 6;
pub const MP_GROUP_DESC: u16 = 7;
pub const MP_GROUP_FEATURES: u16 = 8;
pub const MP_METER: u16 = 9;
pub const MP_METER_CONFIG: u16 = 10;
pub const MP_METER_FEATURES: u16 = 11;
pub const MP_TABLE_FEATURES: u16 = 12;
pub const MP_PORT_DESC: u16 = 13;
/// `flags` of a multipart reply: more parts follow.
pub const MPF_MORE: u16 = 1;

// Reserved ports (32-bit).
pub const OFPP_MAX: u32 = 0xffff_ff00;
pub const OFPP_IN_PORT: u32 = 0xffff_fff8;
pub const OFPP_TABLE: u32 = 0xffff_fff9;
pub const OFPP_NORMAL: u32 = 0xffff_fffa;
pub const OFPP_FLOOD: u32 = 0xffff_fffb;
pub const OFPP_ALL: u32 = 0xffff_fffc;
pub const OFPP_CONTROLLER: u32 = 0xffff_fffd;
pub const OFPP_LOCAL: u32 = 0xffff_fffe;
pub const OFPP_ANY: u32 = 0xffff_ffff;
pub const OFPG_ALL: u32 = 0xffff_fffc;
pub const OFPG_ANY: u32 = 0xffff_ffff;
pub const OFPM_ALL: u32 = 0xffff_ffff;
pub const OFPTT_ALL: u8 = 0xff;
pub const NO_BUFFER: u32 = 0xffff_ffff;

/// Nicira's experimenter id (actions, messages).
pub const NX_VENDOR: u32 = 0x0000_2320;

/// Error types and codes (sect. 7.4.4).
pub mod err {
    pub const HELLO_FAILED: u16 = 0;
    pub const HF_INCOMPATIBLE: u16 = 0;
    pub const BAD_REQUEST: u16 = 1;
    pub const BR_BAD_VERSION: u16 = 0;
    pub const BR_BAD_TYPE: u16 = 1;
    pub const BR_BAD_MULTIPART: u16 = 2;
    pub const BR_BAD_EXPERIMENTER: u16 = 3;
    pub const BR_BAD_LEN: u16 = 6;
    pub const BR_BUFFER_UNKNOWN: u16 = 8;
    pub const BR_BAD_TABLE_ID: u16 = 9;
    pub const BR_IS_SLAVE: u16 = 10;
    pub const BR_BAD_PORT: u16 = 11;
    pub const BR_BAD_PACKET: u16 = 12;
    pub const ROLE_REQUEST_FAILED: u16 = 11;
    pub const RR_STALE: u16 = 0;
    pub const RR_BAD_ROLE: u16 = 2;
    pub const BAD_ACTION: u16 = 2;
    pub const BA_BAD_TYPE: u16 = 0;
    pub const BA_BAD_LEN: u16 = 1;
    pub const BA_BAD_EXPERIMENTER: u16 = 2;
    pub const BA_BAD_EXP_TYPE: u16 = 3;
    pub const BA_BAD_OUT_PORT: u16 = 4;
    pub const BA_BAD_ARGUMENT: u16 = 5;
    pub const BA_BAD_OUT_GROUP: u16 = 9;
    pub const BA_BAD_SET_TYPE: u16 = 13;
    pub const BAD_INSTRUCTION: u16 = 3;
    pub const BI_UNKNOWN_INST: u16 = 0;
    pub const BI_UNSUP_INST: u16 = 1;
    pub const BI_BAD_TABLE_ID: u16 = 2;
    pub const BI_BAD_LEN: u16 = 8;
    pub const BAD_MATCH: u16 = 4;
    pub const BM_BAD_TYPE: u16 = 0;
    pub const BM_BAD_LEN: u16 = 1;
    pub const BM_BAD_FIELD: u16 = 6;
    pub const BM_BAD_VALUE: u16 = 7;
    pub const BM_BAD_MASK: u16 = 8;
    pub const BM_BAD_PREREQ: u16 = 9;
    pub const BM_DUP_FIELD: u16 = 10;
    pub const FLOW_MOD_FAILED: u16 = 5;
    pub const FM_UNKNOWN: u16 = 0;
    pub const FM_TABLE_FULL: u16 = 1;
    pub const FM_BAD_TABLE_ID: u16 = 2;
    pub const FM_BAD_COMMAND: u16 = 6;
    pub const FM_BAD_FLAGS: u16 = 7;
    pub const GROUP_MOD_FAILED: u16 = 6;
    pub const GM_GROUP_EXISTS: u16 = 0;
    pub const GM_INVALID_GROUP: u16 = 1;
    pub const GM_OUT_OF_GROUPS: u16 = 3;
    pub const GM_WEIGHT_UNSUPPORTED: u16 = 2;
    pub const GM_OUT_OF_BUCKETS: u16 = 4;
    pub const GM_CHAINING_UNSUPPORTED: u16 = 5;
    pub const GM_LOOP: u16 = 7;
    pub const GM_UNKNOWN_GROUP: u16 = 8;
    pub const GM_BAD_TYPE: u16 = 10;
    pub const GM_BAD_COMMAND: u16 = 11;
    pub const GM_BAD_BUCKET: u16 = 12;
    pub const GM_BAD_WATCH: u16 = 13;
    pub const PORT_MOD_FAILED: u16 = 7;
    pub const TABLE_MOD_FAILED: u16 = 8;
    pub const METER_MOD_FAILED: u16 = 12;
    pub const MM_METER_EXISTS: u16 = 1;
    pub const MM_UNKNOWN_METER: u16 = 3;
    pub const MM_BAD_COMMAND: u16 = 4;
    pub const MM_BAD_FLAGS: u16 = 5;
    pub const MM_BAD_RATE: u16 = 6;
    pub const MM_BAD_BAND: u16 = 8;
    pub const MM_OUT_OF_METERS: u16 = 10;
}

/// Why a request is refused: the `OFPT_ERROR` type and code sent back,
/// and a one-line reason for the switch's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OfError {
    pub kind: u16,
    pub code: u16,
    pub why: String,
}

impl OfError {
    pub fn new(kind: u16, code: u16, why: impl Into<String>) -> OfError {
        OfError {
            kind,
            code,
            why: why.into(),
        }
    }
    /// A request shorter or longer than its fields say.
    pub fn bad_len(why: impl Into<String>) -> OfError {
        OfError::new(err::BAD_REQUEST, err::BR_BAD_LEN, why)
    }
}

impl fmt::Display for OfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} (error type {}, code {})",
            self.why, self.kind, self.code
        )
    }
}

pub type Result<T> = core::result::Result<T, OfError>;

/// A message's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub version: u8,
    pub kind: u8,
    pub len: u16,
    pub xid: u32,
}

impl Header {
    /// The header at the start of `b` (at least 8 bytes).
    pub fn parse(b: &[u8]) -> Option<Header> {
        let h = b.get(..HEADER)?;
        Some(Header {
            version: h[0],
            kind: h[1],
            len: u16::from_be_bytes([h[2], h[3]]),
            xid: u32::from_be_bytes([h[4], h[5], h[6], h[7]]),
        })
    }
}

/// A bounded big-endian reader: every read past the end is an error
/// (what `what` names), never a panic.
#[derive(Clone, Copy)]
pub struct Reader<'a> {
    b: &'a [u8],
    what: &'static str,
}

impl<'a> Reader<'a> {
    pub fn new(b: &'a [u8], what: &'static str) -> Reader<'a> {
        Reader { b, what }
    }
    pub fn len(&self) -> usize {
        self.b.len()
    }
    pub fn is_empty(&self) -> bool {
        self.b.is_empty()
    }
    pub fn rest(&self) -> &'a [u8] {
        self.b
    }
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8]> {
        if n > self.b.len() {
            return Err(OfError::bad_len(format!(
                "{}: {n} bytes wanted, {} left",
                self.what,
                self.b.len()
            )));
        }
        let (a, b) = self.b.split_at(n);
        self.b = b;
        Ok(a)
    }
    pub fn skip(&mut self, n: usize) -> Result<()> {
        self.bytes(n).map(|_| ())
    }
    pub fn u8(&mut self) -> Result<u8> {
        Ok(self.bytes(1)?[0])
    }
    pub fn u16(&mut self) -> Result<u16> {
        let b = self.bytes(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }
    pub fn u32(&mut self) -> Result<u32> {
        let b = self.bytes(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    pub fn u64(&mut self) -> Result<u64> {
        let b = self.bytes(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_be_bytes(a))
    }
    /// The next TLV (type u16, length u16 counting the 4 bytes, at least
    /// `min`): (type, whole TLV). Padding up to a multiple of `align` after
    /// it is skipped too (and may be missing at the very end).
    pub fn tlv(&mut self, min: usize, align: usize) -> Result<(u16, Reader<'a>)> {
        let mut peek = *self;
        let t = peek.u16()?;
        let l = peek.u16()? as usize;
        if l < min.max(4) {
            return Err(OfError::bad_len(format!(
                "{}: a TLV of type {t} says length {l}",
                self.what
            )));
        }
        let whole = self.bytes(l)?;
        let pad = (align - l % align) % align;
        self.b = &self.b[pad.min(self.b.len())..];
        Ok((t, Reader::new(whole, self.what)))
    }
}

/// A message being built: the header is filled in by [`Writer::finish`].
pub struct Writer {
    pub b: Vec<u8>,
}

impl Writer {
    pub fn new(kind: u8, xid: u32) -> Writer {
        let mut b = Vec::with_capacity(64);
        b.extend_from_slice(&[VERSION, kind, 0, 0]);
        b.extend_from_slice(&xid.to_be_bytes());
        Writer { b }
    }
    /// A multipart reply's header (type, flags, pad).
    pub fn multipart(mp: u16, flags: u16, xid: u32) -> Writer {
        let mut w = Writer::new(MULTIPART_REPLY, xid);
        w.u16(mp);
        w.u16(flags);
        w.zeros(4);
        w
    }
    pub fn u8(&mut self, v: u8) {
        self.b.push(v)
    }
    pub fn u16(&mut self, v: u16) {
        self.b.extend_from_slice(&v.to_be_bytes())
    }
    pub fn u32(&mut self, v: u32) {
        self.b.extend_from_slice(&v.to_be_bytes())
    }
    pub fn u64(&mut self, v: u64) {
        self.b.extend_from_slice(&v.to_be_bytes())
    }
    pub fn bytes(&mut self, v: &[u8]) {
        self.b.extend_from_slice(v)
    }
    pub fn zeros(&mut self, n: usize) {
        self.b.resize(self.b.len() + n, 0)
    }
    pub fn len(&self) -> usize {
        self.b.len()
    }
    pub fn is_empty(&self) -> bool {
        self.b.is_empty()
    }
    /// Pad with zeros to a multiple of 8.
    pub fn pad8(&mut self) {
        let n = (8 - self.b.len() % 8) % 8;
        self.zeros(n)
    }
    /// Write the u16 at `at` (a length filled in afterwards).
    pub fn put_u16(&mut self, at: usize, v: u16) {
        self.b[at..at + 2].copy_from_slice(&v.to_be_bytes())
    }
    /// The finished message (its length in the header). A message longer
    /// than [`MAX_LEN`] has no valid header: its length is written as 0,
    /// which [`sendable`] refuses (what could make one is refused when it
    /// is added: [`super::instr::fits_in_reply`], the group bucket limit),
    /// so no length is ever sent wrapped.
    pub fn finish(mut self) -> Vec<u8> {
        let n = if self.b.len() <= MAX_LEN {
            self.b.len() as u16
        } else {
            0
        };
        self.put_u16(2, n);
        self.b
    }
}

/// Can `m` go on the wire: at least a header, and exactly as long as its
/// header says?
pub fn sendable(m: &[u8]) -> bool {
    Header::parse(m).is_some_and(|h| h.len as usize == m.len())
}

/// An `OFPT_ERROR` for the request `req` (the whole request as data, as
/// Open vSwitch sends, so the peer can print what was refused; cut to fit).
pub fn error_msg(xid: u32, e: &OfError, req: &[u8]) -> Vec<u8> {
    let mut w = Writer::new(ERROR, xid);
    w.u16(e.kind);
    w.u16(e.code);
    w.bytes(&req[..req.len().min(MAX_LEN - 12)]);
    w.finish()
}

/// One port's description (`ofp_port`): number, a MAC made from it, the
/// name, and its link's state.
pub fn port_desc(n: u32, uri: &str, up: bool) -> Vec<u8> {
    let mut w = Writer { b: Vec::new() };
    w.u32(n);
    w.zeros(4);
    // A locally administered MAC from the port number.
    w.bytes(&[0x02, 0x6c, 0x72, 0, (n >> 8) as u8, n as u8]);
    w.zeros(2);
    // The name: the URI's interface or file part, 15 bytes at most.
    let name = uri
        .split(['?', '#'])
        .next()
        .unwrap_or(uri)
        .rsplit([':', '/'])
        .next()
        .unwrap_or(uri);
    let name = if name.is_empty() { uri } else { name };
    let nb = name.as_bytes();
    let k = nb.len().min(15);
    w.bytes(&nb[..k]);
    w.zeros(16 - k);
    w.u32(0); // config
              // State: LIVE (4) with its link up, else LINK_DOWN (1).
    w.u32(if up { 4 } else { 1 });
    for _ in 0..4 {
        w.u32(0); // curr, advertised, supported, peer features
    }
    w.u32(0);
    w.u32(0);
    w.b
}
