use crate::checksum;
use crate::{arr, be16, put16, put_bytes, Error, Result};

/// Length of an IPv4 header without options.
pub const MIN_HEADER_LEN: usize = 20;
/// Length of an IPv4 header with the most options (IHL = 15).
pub const MAX_HEADER_LEN: usize = 60;

/// IP protocol numbers used by this crate (shared with IPv6 next-header).
pub mod proto {
    pub const HOPOPT: u8 = 0;
    pub const ICMP: u8 = 1;
    pub const TCP: u8 = 6;
    pub const UDP: u8 = 17;
    pub const IPV6_ROUTE: u8 = 43;
    pub const IPV6_FRAG: u8 = 44;
    pub const ESP: u8 = 50;
    pub const AH: u8 = 51;
    pub const ICMPV6: u8 = 58;
    pub const IPV6_NONXT: u8 = 59;
    pub const IPV6_OPTS: u8 = 60;
}

/// A view over an IPv4 packet.
///
/// `new_checked` guarantees: version 4, IHL >= 5, header fits the buffer,
/// total length >= header length and <= buffer length (the buffer may be
/// longer, e.g. Ethernet padding; [`Ipv4Packet::payload`] stops at total length).
#[derive(Debug, Clone)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

/// Validate an IPv4 header at the start of `b`; returns (header_len, total_len).
#[inline(always)]
pub(crate) fn check(b: &[u8]) -> Result<(usize, usize)> {
    if b.len() < MIN_HEADER_LEN {
        return Err(Error::Truncated);
    }
    if b[0] >> 4 != 4 {
        return Err(Error::BadVersion);
    }
    let hl = ((b[0] & 0x0f) as usize) * 4;
    if hl < MIN_HEADER_LEN {
        return Err(Error::BadHeaderLen);
    }
    let total = u16::from_be_bytes([b[2], b[3]]) as usize;
    if total < hl {
        return Err(Error::BadLength);
    }
    if total > b.len() {
        return Err(Error::Truncated);
    }
    Ok((hl, total))
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    pub fn new_checked(buffer: T) -> Result<Self> {
        check(buffer.as_ref())?;
        Ok(Ipv4Packet { buffer })
    }
    pub fn into_inner(self) -> T {
        self.buffer
    }
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    pub fn version(&self) -> u8 {
        self.b()[0] >> 4
    }
    /// Header length in bytes (IHL * 4).
    pub fn header_len(&self) -> usize {
        ((self.b()[0] & 0x0f) as usize) * 4
    }
    pub fn dscp(&self) -> u8 {
        self.b()[1] >> 2
    }
    pub fn ecn(&self) -> u8 {
        self.b()[1] & 3
    }
    pub fn total_len(&self) -> u16 {
        be16(self.b(), 2)
    }
    pub fn ident(&self) -> u16 {
        be16(self.b(), 4)
    }
    pub fn dont_frag(&self) -> bool {
        self.b()[6] & 0x40 != 0
    }
    pub fn more_frags(&self) -> bool {
        self.b()[6] & 0x20 != 0
    }
    /// Fragment offset in 8-byte units.
    pub fn frag_offset(&self) -> u16 {
        be16(self.b(), 6) & 0x1fff
    }
    /// True for any fragment (MF set or offset non-zero).
    pub fn is_fragment(&self) -> bool {
        be16(self.b(), 6) & 0x3fff != 0
    }
    pub fn ttl(&self) -> u8 {
        self.b()[8]
    }
    pub fn protocol(&self) -> u8 {
        self.b()[9]
    }
    pub fn checksum(&self) -> u16 {
        be16(self.b(), 10)
    }
    pub fn src(&self) -> [u8; 4] {
        arr(self.b(), 12)
    }
    pub fn dst(&self) -> [u8; 4] {
        arr(self.b(), 16)
    }
    /// Option bytes (between byte 20 and the header length).
    pub fn options(&self) -> &[u8] {
        self.b()
            .get(MIN_HEADER_LEN..self.header_len())
            .unwrap_or(&[])
    }
    /// Bytes after the header up to the total length.
    pub fn payload(&self) -> &[u8] {
        let (h, t) = (self.header_len(), self.total_len() as usize);
        self.b().get(h..t).unwrap_or(&[])
    }
    /// True if the header checksum is correct.
    pub fn verify_checksum(&self) -> bool {
        match self.b().get(..self.header_len()) {
            Some(h) => checksum::checksum(h) == 0,
            None => false,
        }
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    fn bm(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }
    pub fn set_ttl(&mut self, v: u8) {
        self.bm()[8] = v
    }
    pub fn set_dscp_ecn(&mut self, dscp: u8, ecn: u8) {
        self.bm()[1] = (dscp << 2) | (ecn & 3)
    }
    pub fn set_ident(&mut self, v: u16) {
        put16(self.bm(), 4, v)
    }
    pub fn set_protocol(&mut self, v: u8) {
        self.bm()[9] = v
    }
    pub fn set_checksum(&mut self, v: u16) {
        put16(self.bm(), 10, v)
    }
    pub fn set_src(&mut self, v: [u8; 4]) {
        put_bytes(self.bm(), 12, &v)
    }
    pub fn set_dst(&mut self, v: [u8; 4]) {
        put_bytes(self.bm(), 16, &v)
    }
    /// Recompute and store the header checksum.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let hl = self.header_len();
        let c = self.b().get(..hl).map(checksum::checksum).unwrap_or(0);
        self.set_checksum(c)
    }
    /// Decrement the TTL and patch the checksum incrementally (RFC 1624).
    /// Returns the new TTL (0 means the packet must be dropped).
    pub fn decrement_ttl(&mut self) -> u8 {
        let old = be16(self.b(), 8);
        let ttl = self.ttl().saturating_sub(1);
        self.set_ttl(ttl);
        let new = be16(self.b(), 8);
        let c = checksum::update16(self.checksum(), old, new);
        self.set_checksum(c);
        ttl
    }
    /// Set the source address, patching the header checksum incrementally.
    pub fn set_src_incremental(&mut self, v: [u8; 4]) {
        let c = checksum::update32(
            self.checksum(),
            u32::from_be_bytes(self.src()),
            u32::from_be_bytes(v),
        );
        self.set_src(v);
        self.set_checksum(c);
    }
    /// Set the destination address, patching the header checksum incrementally.
    pub fn set_dst_incremental(&mut self, v: [u8; 4]) {
        let c = checksum::update32(
            self.checksum(),
            u32::from_be_bytes(self.dst()),
            u32::from_be_bytes(v),
        );
        self.set_dst(v);
        self.set_checksum(c);
    }
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let (h, t) = (self.header_len(), self.total_len() as usize);
        self.bm().get_mut(h..t).unwrap_or(&mut [])
    }
}

/// Fields of an IPv4 header for [`emit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Repr {
    pub src: [u8; 4],
    pub dst: [u8; 4],
    pub protocol: u8,
    pub ttl: u8,
    /// DSCP << 2 | ECN.
    pub tos: u8,
    pub ident: u16,
    pub dont_frag: bool,
    /// Length of what follows the header.
    pub payload_len: usize,
}

/// Write an IPv4 header with `options` (length a multiple of 4, at most 40)
/// and a correct checksum into `buf`; returns the header length.
pub fn emit(buf: &mut [u8], r: &Ipv4Repr, options: &[u8]) -> Result<usize> {
    if !options.len().is_multiple_of(4) || options.len() > MAX_HEADER_LEN - MIN_HEADER_LEN {
        return Err(Error::BadParam);
    }
    let hl = MIN_HEADER_LEN + options.len();
    let total = hl + r.payload_len;
    if total > u16::MAX as usize {
        return Err(Error::BadParam);
    }
    let h = buf.get_mut(..hl).ok_or(Error::BufferTooSmall)?;
    h[0] = 0x40 | (hl / 4) as u8;
    h[1] = r.tos;
    put16(h, 2, total as u16);
    put16(h, 4, r.ident);
    put16(h, 6, if r.dont_frag { 0x4000 } else { 0 });
    h[8] = r.ttl;
    h[9] = r.protocol;
    put16(h, 10, 0);
    h[12..16].copy_from_slice(&r.src);
    h[16..20].copy_from_slice(&r.dst);
    h[20..].copy_from_slice(options);
    let c = checksum::checksum(h);
    put16(h, 10, c);
    Ok(hl)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Wikipedia's IPv4 header example (UDP, 192.168.0.1 -> 192.168.0.199).
    const HDR: [u8; 20] = [
        0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8, 0x00,
        0x01, 0xc0, 0xa8, 0x00, 0xc7,
    ];

    fn packet() -> [u8; 0x73] {
        let mut b = [0u8; 0x73];
        b[..20].copy_from_slice(&HDR);
        b
    }

    #[test]
    fn parse_known() {
        let b = packet();
        let p = Ipv4Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.header_len(), 20);
        assert_eq!(p.total_len(), 0x73);
        assert!(p.dont_frag() && !p.more_frags() && !p.is_fragment());
        assert_eq!((p.ttl(), p.protocol()), (64, 17));
        assert_eq!(p.src(), [192, 168, 0, 1]);
        assert_eq!(p.dst(), [192, 168, 0, 199]);
        assert!(p.verify_checksum());
        assert_eq!(p.payload().len(), 0x73 - 20);
        let mut out = [0u8; 20];
        let r = Ipv4Repr {
            src: p.src(),
            dst: p.dst(),
            protocol: 17,
            ttl: 64,
            tos: 0,
            ident: 0,
            dont_frag: true,
            payload_len: 0x73 - 20,
        };
        assert_eq!(emit(&mut out, &r, &[]), Ok(20));
        assert_eq!(out, HDR);
    }

    #[test]
    fn options_and_padding() {
        let mut b = [0u8; 64];
        let r = Ipv4Repr {
            src: [10, 0, 0, 1],
            dst: [10, 0, 0, 2],
            protocol: 6,
            ttl: 1,
            tos: 0xb8,
            ident: 7,
            dont_frag: false,
            payload_len: 4,
        };
        // Router alert option (RFC 2113): 94 04 00 00.
        assert_eq!(emit(&mut b, &r, &[0x94, 0x04, 0, 0]), Ok(24));
        let p = Ipv4Packet::new_checked(&b[..]).unwrap(); // 64 > 28: padding allowed
        assert_eq!(p.header_len(), 24);
        assert_eq!(p.options(), &[0x94, 0x04, 0, 0]);
        assert_eq!(p.payload().len(), 4);
        assert_eq!(p.dscp(), 46);
        assert!(p.verify_checksum());
        assert_eq!(emit(&mut b, &r, &[1, 1, 1]), Err(Error::BadParam));
        assert_eq!(emit(&mut b, &r, &[1; 44]), Err(Error::BadParam));
        assert_eq!(emit(&mut b[..23], &r, &[1; 4]), Err(Error::BufferTooSmall));
    }

    #[test]
    fn malformed() {
        let b = packet();
        for n in 0..b.len() {
            assert!(Ipv4Packet::new_checked(&b[..n]).is_err(), "prefix {n}");
        }
        let mut x = b;
        x[0] = 0x65;
        assert_eq!(
            Ipv4Packet::new_checked(&x[..]).unwrap_err(),
            Error::BadVersion
        );
        for ihl in 0..5 {
            x[0] = 0x40 | ihl;
            assert_eq!(
                Ipv4Packet::new_checked(&x[..]).unwrap_err(),
                Error::BadHeaderLen
            );
        }
        // IHL 15 = 60 bytes > total length 40
        x = b;
        x[0] = 0x4f;
        x[2] = 0;
        x[3] = 40;
        assert_eq!(
            Ipv4Packet::new_checked(&x[..]).unwrap_err(),
            Error::BadLength
        );
        // IHL 15 with only 40 bytes of buffer
        x[3] = 60;
        assert_eq!(
            Ipv4Packet::new_checked(&x[..40]).unwrap_err(),
            Error::Truncated
        );
        // total length beyond buffer
        x = b;
        x[3] = 0x74;
        assert_eq!(
            Ipv4Packet::new_checked(&x[..]).unwrap_err(),
            Error::Truncated
        );
    }

    #[test]
    fn ttl_and_address_rewrite_keep_checksum() {
        let mut b = packet();
        let mut p = Ipv4Packet::new_checked(&mut b[..]).unwrap();
        assert_eq!(p.decrement_ttl(), 63);
        assert!(p.verify_checksum());
        p.set_src_incremental([10, 1, 2, 3]);
        p.set_dst_incremental([255, 255, 255, 255]);
        assert!(p.verify_checksum());
        let c = p.checksum();
        p.fill_checksum();
        assert_eq!(p.checksum(), c);
    }
}
