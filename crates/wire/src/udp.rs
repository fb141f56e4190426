use crate::checksum;
use crate::ipv4::proto;
use crate::{be16, put16, Error, Result};

/// Length of the UDP header.
pub const HEADER_LEN: usize = 8;

/// A view over a UDP datagram.
///
/// `new_checked` guarantees: 8-byte header present, length field >= 8 and
/// <= buffer length (the buffer may be longer; payload stops at the length field).
#[derive(Debug, Clone)]
pub struct UdpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> UdpPacket<T> {
    pub fn new_checked(buffer: T) -> Result<Self> {
        let b = buffer.as_ref();
        if b.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let len = be16(b, 4) as usize;
        if len < HEADER_LEN {
            return Err(Error::BadLength);
        }
        if len > b.len() {
            return Err(Error::Truncated);
        }
        Ok(UdpPacket { buffer })
    }
    pub fn into_inner(self) -> T {
        self.buffer
    }
    pub fn src_port(&self) -> u16 {
        be16(self.buffer.as_ref(), 0)
    }
    pub fn dst_port(&self) -> u16 {
        be16(self.buffer.as_ref(), 2)
    }
    pub fn len(&self) -> u16 {
        be16(self.buffer.as_ref(), 4)
    }
    pub fn is_empty(&self) -> bool {
        self.len() as usize <= HEADER_LEN
    }
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), 6)
    }
    /// The datagram (header + payload) as the length field says.
    pub fn datagram(&self) -> &[u8] {
        self.buffer
            .as_ref()
            .get(..self.len() as usize)
            .unwrap_or(&[])
    }
    pub fn payload(&self) -> &[u8] {
        self.buffer
            .as_ref()
            .get(HEADER_LEN..self.len() as usize)
            .unwrap_or(&[])
    }
    /// True if the checksum is correct, or absent (0) as IPv4 allows.
    pub fn verify_checksum_v4(&self, src: &[u8; 4], dst: &[u8; 4]) -> bool {
        self.checksum() == 0 || checksum::l4_checksum_v4(src, dst, proto::UDP, self.datagram()) == 0
    }
    /// True if the checksum is correct (mandatory in IPv6).
    pub fn verify_checksum_v6(&self, src: &[u8; 16], dst: &[u8; 16]) -> bool {
        self.checksum() != 0 && checksum::l4_checksum_v6(src, dst, proto::UDP, self.datagram()) == 0
    }
}

/// A computed UDP checksum of 0 is sent as 0xffff (0 means "none").
#[inline(always)]
pub fn wire_checksum(c: u16) -> u16 {
    if c == 0 {
        0xffff
    } else {
        c
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpPacket<T> {
    pub fn set_src_port(&mut self, v: u16) {
        put16(self.buffer.as_mut(), 0, v)
    }
    pub fn set_dst_port(&mut self, v: u16) {
        put16(self.buffer.as_mut(), 2, v)
    }
    pub fn set_checksum(&mut self, v: u16) {
        put16(self.buffer.as_mut(), 6, v)
    }
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let l = self.len() as usize;
        self.buffer
            .as_mut()
            .get_mut(HEADER_LEN..l)
            .unwrap_or(&mut [])
    }
    pub fn fill_checksum_v4(&mut self, src: &[u8; 4], dst: &[u8; 4]) {
        self.set_checksum(0);
        let c = checksum::l4_checksum_v4(src, dst, proto::UDP, self.datagram());
        self.set_checksum(wire_checksum(c));
    }
    pub fn fill_checksum_v6(&mut self, src: &[u8; 16], dst: &[u8; 16]) {
        self.set_checksum(0);
        let c = checksum::l4_checksum_v6(src, dst, proto::UDP, self.datagram());
        self.set_checksum(wire_checksum(c));
    }
}

/// Write a UDP header (checksum 0; fill it afterwards) into `buf`; the
/// payload of `payload_len` bytes is expected right after. Returns 8.
pub fn emit(buf: &mut [u8], src_port: u16, dst_port: u16, payload_len: usize) -> Result<usize> {
    let len = HEADER_LEN + payload_len;
    if len > u16::MAX as usize {
        return Err(Error::BadParam);
    }
    let h = buf.get_mut(..HEADER_LEN).ok_or(Error::BufferTooSmall)?;
    put16(h, 0, src_port);
    put16(h, 2, dst_port);
    put16(h, 4, len as u16);
    put16(h, 6, 0);
    Ok(HEADER_LEN)
}

#[cfg(test)]
mod tests {
    use super::*;

    // DNS query from a capture: 192.168.1.100:52100 -> 8.8.8.8:53, "A example.com".
    const SRC: [u8; 4] = [192, 168, 1, 100];
    const DST: [u8; 4] = [8, 8, 8, 8];

    fn dgram() -> [u8; 37] {
        let mut b = [0u8; 37];
        emit(&mut b, 52100, 53, 29).unwrap();
        b[8..].copy_from_slice(&[
            0x12, 0x34, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x07, b'e',
            b'x', b'a', b'm', b'p', b'l', b'e', 0x03, b'c', b'o', b'm', 0x00, 0x00, 0x01, 0x00,
            0x01,
        ]);
        b
    }

    #[test]
    fn checksum_v4_v6() {
        let mut b = dgram();
        let mut u = UdpPacket::new_checked(&mut b[..]).unwrap();
        assert_eq!((u.src_port(), u.dst_port(), u.len()), (52100, 53, 37));
        u.fill_checksum_v4(&SRC, &DST);
        assert!(u.verify_checksum_v4(&SRC, &DST));
        assert!(!u.verify_checksum_v4(&SRC, &[8, 8, 4, 4]));
        let (s6, d6) = ([1u8; 16], [2u8; 16]);
        u.fill_checksum_v6(&s6, &d6);
        assert!(u.verify_checksum_v6(&s6, &d6));
        assert!(!u.verify_checksum_v6(&d6, &[3u8; 16]));
        u.set_checksum(0);
        assert!(u.verify_checksum_v4(&SRC, &DST));
        assert!(!u.verify_checksum_v6(&s6, &d6));
        assert_eq!(u.payload().len(), 29);
    }

    #[test]
    fn malformed() {
        let b = dgram();
        for n in 0..b.len() {
            assert!(UdpPacket::new_checked(&b[..n]).is_err());
        }
        let mut x = b;
        x[5] = 7;
        assert_eq!(
            UdpPacket::new_checked(&x[..]).unwrap_err(),
            Error::BadLength
        );
        x[5] = 38;
        assert_eq!(
            UdpPacket::new_checked(&x[..]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(wire_checksum(0), 0xffff);
    }
}
