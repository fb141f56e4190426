use crate::checksum;
use crate::ipv4::proto;
use crate::{be16, be32, put16, put32, Error, Result};

/// Length of a TCP header without options.
pub const MIN_HEADER_LEN: usize = 20;

/// TCP flag bits (as returned by [`TcpPacket::flags`]).
pub mod flags {
    pub const FIN: u16 = 0x001;
    pub const SYN: u16 = 0x002;
    pub const RST: u16 = 0x004;
    pub const PSH: u16 = 0x008;
    pub const ACK: u16 = 0x010;
    pub const URG: u16 = 0x020;
    pub const ECE: u16 = 0x040;
    pub const CWR: u16 = 0x080;
    pub const NS: u16 = 0x100;
}

/// A view over a TCP segment.
///
/// `new_checked` guarantees: 20 bytes present, data offset >= 5 and the
/// header (data offset * 4) fits the buffer. The whole buffer after the
/// header is the payload: bound the buffer by the IP length first.
#[derive(Debug, Clone)]
pub struct TcpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

/// Validate a TCP header at the start of `b`; returns the header length.
#[inline(always)]
pub(crate) fn check(b: &[u8]) -> Result<usize> {
    if b.len() < MIN_HEADER_LEN {
        return Err(Error::Truncated);
    }
    let hl = ((b[12] >> 4) as usize) * 4;
    if hl < MIN_HEADER_LEN {
        return Err(Error::BadHeaderLen);
    }
    if hl > b.len() {
        return Err(Error::Truncated);
    }
    Ok(hl)
}

impl<T: AsRef<[u8]>> TcpPacket<T> {
    pub fn new_checked(buffer: T) -> Result<Self> {
        check(buffer.as_ref())?;
        Ok(TcpPacket { buffer })
    }
    pub fn into_inner(self) -> T {
        self.buffer
    }
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    pub fn src_port(&self) -> u16 {
        be16(self.b(), 0)
    }
    pub fn dst_port(&self) -> u16 {
        be16(self.b(), 2)
    }
    pub fn seq(&self) -> u32 {
        be32(self.b(), 4)
    }
    pub fn ack(&self) -> u32 {
        be32(self.b(), 8)
    }
    /// Header length in bytes (data offset * 4).
    pub fn header_len(&self) -> usize {
        ((self.b()[12] >> 4) as usize) * 4
    }
    /// The 9 flag bits (see [`flags`]).
    pub fn flags(&self) -> u16 {
        be16(self.b(), 12) & 0x01ff
    }
    pub fn has(&self, flag: u16) -> bool {
        self.flags() & flag != 0
    }
    pub fn window(&self) -> u16 {
        be16(self.b(), 14)
    }
    pub fn checksum(&self) -> u16 {
        be16(self.b(), 16)
    }
    pub fn urgent(&self) -> u16 {
        be16(self.b(), 18)
    }
    pub fn options(&self) -> &[u8] {
        self.b()
            .get(MIN_HEADER_LEN..self.header_len())
            .unwrap_or(&[])
    }
    pub fn payload(&self) -> &[u8] {
        self.b().get(self.header_len()..).unwrap_or(&[])
    }
    pub fn verify_checksum_v4(&self, src: &[u8; 4], dst: &[u8; 4]) -> bool {
        checksum::l4_checksum_v4(src, dst, proto::TCP, self.b()) == 0
    }
    pub fn verify_checksum_v6(&self, src: &[u8; 16], dst: &[u8; 16]) -> bool {
        checksum::l4_checksum_v6(src, dst, proto::TCP, self.b()) == 0
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TcpPacket<T> {
    pub fn set_src_port(&mut self, v: u16) {
        put16(self.buffer.as_mut(), 0, v)
    }
    pub fn set_dst_port(&mut self, v: u16) {
        put16(self.buffer.as_mut(), 2, v)
    }
    pub fn set_seq(&mut self, v: u32) {
        put32(self.buffer.as_mut(), 4, v)
    }
    pub fn set_ack(&mut self, v: u32) {
        put32(self.buffer.as_mut(), 8, v)
    }
    pub fn set_flags(&mut self, f: u16) {
        let w = (be16(self.b(), 12) & 0xfe00) | (f & 0x01ff);
        put16(self.buffer.as_mut(), 12, w)
    }
    pub fn set_window(&mut self, v: u16) {
        put16(self.buffer.as_mut(), 14, v)
    }
    pub fn set_checksum(&mut self, v: u16) {
        put16(self.buffer.as_mut(), 16, v)
    }
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let h = self.header_len();
        self.buffer.as_mut().get_mut(h..).unwrap_or(&mut [])
    }
    pub fn fill_checksum_v4(&mut self, src: &[u8; 4], dst: &[u8; 4]) {
        self.set_checksum(0);
        let c = checksum::l4_checksum_v4(src, dst, proto::TCP, self.b());
        self.set_checksum(c)
    }
    pub fn fill_checksum_v6(&mut self, src: &[u8; 16], dst: &[u8; 16]) {
        self.set_checksum(0);
        let c = checksum::l4_checksum_v6(src, dst, proto::TCP, self.b());
        self.set_checksum(c)
    }
}

/// Fields of a TCP header for [`emit`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TcpRepr {
    pub src_port: u16,
    pub dst_port: u16,
    pub seq: u32,
    pub ack: u32,
    pub flags: u16,
    pub window: u16,
    pub urgent: u16,
}

/// Write a TCP header with `options` (a multiple of 4, at most 40 bytes)
/// and checksum 0 into `buf`; returns the header length.
pub fn emit(buf: &mut [u8], r: &TcpRepr, options: &[u8]) -> Result<usize> {
    if !options.len().is_multiple_of(4) || options.len() > 40 {
        return Err(Error::BadParam);
    }
    let hl = MIN_HEADER_LEN + options.len();
    let h = buf.get_mut(..hl).ok_or(Error::BufferTooSmall)?;
    put16(h, 0, r.src_port);
    put16(h, 2, r.dst_port);
    put32(h, 4, r.seq);
    put32(h, 8, r.ack);
    put16(h, 12, (((hl / 4) as u16) << 12) | (r.flags & 0x01ff));
    put16(h, 14, r.window);
    put16(h, 16, 0);
    put16(h, 18, r.urgent);
    h[20..].copy_from_slice(options);
    Ok(hl)
}

#[cfg(test)]
mod tests {
    use super::*;

    // A SYN as Linux sends it: 10.0.0.1:49152 -> 10.0.0.2:80, seq 0x1a2b3c4d,
    // MSS 1460 option, window 64240; checksum field zeroed.
    const SYN: [u8; 24] = [
        0xc0, 0x00, 0x00, 0x50, 0x1a, 0x2b, 0x3c, 0x4d, 0x00, 0x00, 0x00, 0x00, 0x60, 0x02, 0xfa,
        0xf0, 0x00, 0x00, 0x00, 0x00, 0x02, 0x04, 0x05, 0xb4,
    ];

    #[test]
    fn parse_emit_checksum() {
        let p = TcpPacket::new_checked(&SYN[..]).unwrap();
        assert_eq!((p.src_port(), p.dst_port()), (49152, 80));
        assert_eq!(p.seq(), 0x1a2b3c4d);
        assert_eq!(p.header_len(), 24);
        assert_eq!(p.flags(), flags::SYN);
        assert!(p.has(flags::SYN) && !p.has(flags::ACK));
        assert_eq!(p.window(), 64240);
        assert_eq!(p.options(), &[2, 4, 5, 0xb4]);
        let mut out = [0u8; 24];
        let r = TcpRepr {
            src_port: 49152,
            dst_port: 80,
            seq: 0x1a2b3c4d,
            flags: flags::SYN,
            window: 64240,
            ..Default::default()
        };
        assert_eq!(emit(&mut out, &r, &[2, 4, 5, 0xb4]), Ok(24));
        assert_eq!(out, SYN);
        let mut t = TcpPacket::new_checked(&mut out[..]).unwrap();
        t.fill_checksum_v4(&[10, 0, 0, 1], &[10, 0, 0, 2]);
        assert!(t.verify_checksum_v4(&[10, 0, 0, 1], &[10, 0, 0, 2]));
        // Cross-check with a checksum computed by hand: pseudo header
        // 0a00+0001+0a00+0002+0006+0018 and the segment words.
        let c = t.checksum();
        assert_eq!(c, {
            let mut s: u32 = 0x0a00 + 0x0001 + 0x0a00 + 0x0002 + 0x0006 + 24;
            for w in SYN.chunks(2) {
                s += u16::from_be_bytes([w[0], w[1]]) as u32;
            }
            while s > 0xffff {
                s = (s & 0xffff) + (s >> 16);
            }
            !(s as u16)
        });
        t.set_flags(flags::SYN | flags::ACK | flags::NS);
        assert_eq!(t.flags(), 0x112);
        assert_eq!(t.header_len(), 24);
    }

    #[test]
    fn malformed() {
        for n in 0..24 {
            assert!(TcpPacket::new_checked(&SYN[..n]).is_err(), "{n}");
        }
        let mut x = SYN;
        for off in 0..5u8 {
            x[12] = off << 4;
            assert_eq!(
                TcpPacket::new_checked(&x[..]).unwrap_err(),
                Error::BadHeaderLen
            );
        }
        x[12] = 0x70; // 28 > 24
        assert_eq!(
            TcpPacket::new_checked(&x[..]).unwrap_err(),
            Error::Truncated
        );
    }
}
