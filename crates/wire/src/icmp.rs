use crate::checksum;
use crate::ipv4::proto;
use crate::{be16, put16, Error, Result};

/// Length of the common ICMP header (type, code, checksum, 4 bytes of rest).
pub const HEADER_LEN: usize = 8;

/// ICMPv4 message types used here.
pub mod v4 {
    pub const ECHO_REPLY: u8 = 0;
    pub const DEST_UNREACHABLE: u8 = 3;
    pub const ECHO_REQUEST: u8 = 8;
    pub const TIME_EXCEEDED: u8 = 11;
}

/// ICMPv6 message types used here.
pub mod v6 {
    pub const DEST_UNREACHABLE: u8 = 1;
    pub const PACKET_TOO_BIG: u8 = 2;
    pub const TIME_EXCEEDED: u8 = 3;
    pub const ECHO_REQUEST: u8 = 128;
    pub const ECHO_REPLY: u8 = 129;
    pub const NEIGHBOR_SOLICIT: u8 = 135;
    pub const NEIGHBOR_ADVERT: u8 = 136;
}

/// A view over an ICMPv4 or ICMPv6 message (same header layout; only the
/// checksum differs: ICMPv6 covers an IPv6 pseudo-header).
///
/// `new_checked` guarantees the 8-byte header is present.
#[derive(Debug, Clone)]
pub struct IcmpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> IcmpPacket<T> {
    pub fn new_checked(buffer: T) -> Result<Self> {
        if buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(IcmpPacket { buffer })
    }
    pub fn into_inner(self) -> T {
        self.buffer
    }
    pub fn msg_type(&self) -> u8 {
        self.buffer.as_ref()[0]
    }
    pub fn code(&self) -> u8 {
        self.buffer.as_ref()[1]
    }
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), 2)
    }
    /// Echo identifier (bytes 4..6), meaningful for echo messages.
    pub fn echo_ident(&self) -> u16 {
        be16(self.buffer.as_ref(), 4)
    }
    /// Echo sequence number (bytes 6..8).
    pub fn echo_seq(&self) -> u16 {
        be16(self.buffer.as_ref(), 6)
    }
    /// Bytes after the 8-byte header (echo data, or the quoted packet of an error).
    pub fn payload(&self) -> &[u8] {
        self.buffer.as_ref().get(HEADER_LEN..).unwrap_or(&[])
    }
    /// ICMPv4 checksum (no pseudo-header) is correct.
    pub fn verify_checksum_v4(&self) -> bool {
        checksum::checksum(self.buffer.as_ref()) == 0
    }
    /// ICMPv6 checksum (IPv6 pseudo-header) is correct.
    pub fn verify_checksum_v6(&self, src: &[u8; 16], dst: &[u8; 16]) -> bool {
        checksum::l4_checksum_v6(src, dst, proto::ICMPV6, self.buffer.as_ref()) == 0
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> IcmpPacket<T> {
    pub fn set_msg_type(&mut self, v: u8) {
        self.buffer.as_mut()[0] = v
    }
    pub fn set_code(&mut self, v: u8) {
        self.buffer.as_mut()[1] = v
    }
    pub fn set_checksum(&mut self, v: u16) {
        put16(self.buffer.as_mut(), 2, v)
    }
    pub fn set_echo(&mut self, ident: u16, seq: u16) {
        put16(self.buffer.as_mut(), 4, ident);
        put16(self.buffer.as_mut(), 6, seq);
    }
    pub fn payload_mut(&mut self) -> &mut [u8] {
        self.buffer
            .as_mut()
            .get_mut(HEADER_LEN..)
            .unwrap_or(&mut [])
    }
    pub fn fill_checksum_v4(&mut self) {
        self.set_checksum(0);
        let c = checksum::checksum(self.buffer.as_ref());
        self.set_checksum(c)
    }
    pub fn fill_checksum_v6(&mut self, src: &[u8; 16], dst: &[u8; 16]) {
        self.set_checksum(0);
        let c = checksum::l4_checksum_v6(src, dst, proto::ICMPV6, self.buffer.as_ref());
        self.set_checksum(c)
    }
}

/// Write an echo header (checksum 0) into `buf`; returns 8.
pub fn emit_echo(buf: &mut [u8], msg_type: u8, ident: u16, seq: u16) -> Result<usize> {
    let h = buf.get_mut(..HEADER_LEN).ok_or(Error::BufferTooSmall)?;
    h[0] = msg_type;
    h[1] = 0;
    put16(h, 2, 0);
    put16(h, 4, ident);
    put16(h, 6, seq);
    Ok(HEADER_LEN)
}

#[cfg(test)]
mod tests {
    use super::*;

    // `ping` echo request body from a capture: id 0x0001 seq 0x0001,
    // 32 bytes "abcdefghijklmnopqrstuvwabcdefghi" (Windows ping), checksum 0x4d5a.
    fn windows_ping() -> [u8; 40] {
        let mut b = [0u8; 40];
        b[..8].copy_from_slice(&[0x08, 0x00, 0x4d, 0x5a, 0x00, 0x01, 0x00, 0x01]);
        b[8..].copy_from_slice(b"abcdefghijklmnopqrstuvwabcdefghi");
        b
    }

    #[test]
    fn v4_known_checksum() {
        let mut b = windows_ping();
        let p = IcmpPacket::new_checked(&b[..]).unwrap();
        assert!(p.verify_checksum_v4());
        assert_eq!((p.msg_type(), p.echo_ident(), p.echo_seq()), (8, 1, 1));
        let mut p = IcmpPacket::new_checked(&mut b[..]).unwrap();
        p.fill_checksum_v4();
        assert_eq!(p.checksum(), 0x4d5a);
        for n in 0..8 {
            assert!(IcmpPacket::new_checked(&b[..n]).is_err());
        }
    }

    #[test]
    fn v6_checksum() {
        let mut b = [0u8; 16];
        emit_echo(&mut b, v6::ECHO_REQUEST, 7, 9).unwrap();
        let (s, d) = ([0xfe; 16], [0x01; 16]);
        let mut p = IcmpPacket::new_checked(&mut b[..]).unwrap();
        p.fill_checksum_v6(&s, &d);
        assert!(p.verify_checksum_v6(&s, &d));
        assert!(!p.verify_checksum_v6(&s, &[0x02; 16]));
        assert!(!p.verify_checksum_v4());
    }
}
