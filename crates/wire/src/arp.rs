use crate::ethernet::Mac;
use crate::{arr, be16, put16, put_bytes, Error, Result};

/// Length of an Ethernet/IPv4 ARP packet.
pub const PACKET_LEN: usize = 28;
pub const OP_REQUEST: u16 = 1;
pub const OP_REPLY: u16 = 2;

/// A view over an ARP packet for Ethernet (htype 1) and IPv4 (ptype 0x0800).
#[derive(Debug, Clone)]
pub struct ArpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ArpPacket<T> {
    /// `Err(Truncated)` if shorter than 28 bytes, `Err(Unsupported)` for
    /// other hardware/protocol types or address lengths.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let b = buffer.as_ref();
        if b.len() < PACKET_LEN {
            return Err(Error::Truncated);
        }
        if be16(b, 0) != 1 || be16(b, 2) != 0x0800 || b[4] != 6 || b[5] != 4 {
            return Err(Error::Unsupported);
        }
        Ok(ArpPacket { buffer })
    }
    pub fn operation(&self) -> u16 {
        be16(self.buffer.as_ref(), 6)
    }
    pub fn sender_mac(&self) -> Mac {
        arr(self.buffer.as_ref(), 8)
    }
    pub fn sender_ip(&self) -> [u8; 4] {
        arr(self.buffer.as_ref(), 14)
    }
    pub fn target_mac(&self) -> Mac {
        arr(self.buffer.as_ref(), 18)
    }
    pub fn target_ip(&self) -> [u8; 4] {
        arr(self.buffer.as_ref(), 24)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ArpPacket<T> {
    pub fn set_operation(&mut self, v: u16) {
        put16(self.buffer.as_mut(), 6, v)
    }
    pub fn set_sender(&mut self, mac: Mac, ip: [u8; 4]) {
        put_bytes(self.buffer.as_mut(), 8, &mac);
        put_bytes(self.buffer.as_mut(), 14, &ip);
    }
    pub fn set_target(&mut self, mac: Mac, ip: [u8; 4]) {
        put_bytes(self.buffer.as_mut(), 18, &mac);
        put_bytes(self.buffer.as_mut(), 24, &ip);
    }
}

/// Fields of an Ethernet/IPv4 ARP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArpRepr {
    pub operation: u16,
    pub sender_mac: Mac,
    pub sender_ip: [u8; 4],
    pub target_mac: Mac,
    pub target_ip: [u8; 4],
}

/// Write an ARP packet into `buf`; returns [`PACKET_LEN`].
pub fn emit(buf: &mut [u8], r: &ArpRepr) -> Result<usize> {
    let b = buf.get_mut(..PACKET_LEN).ok_or(Error::BufferTooSmall)?;
    b[..6].copy_from_slice(&[0, 1, 0x08, 0x00, 6, 4]);
    put16(b, 6, r.operation);
    b[8..14].copy_from_slice(&r.sender_mac);
    b[14..18].copy_from_slice(&r.sender_ip);
    b[18..24].copy_from_slice(&r.target_mac);
    b[24..28].copy_from_slice(&r.target_ip);
    Ok(PACKET_LEN)
}

#[cfg(test)]
mod tests {
    use super::*;

    // ARP request "who has 192.168.1.1 tell 192.168.1.100" (a capture's body).
    const REQ: [u8; 28] = [
        0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, 0x00, 0x0c, 0x29, 0x3e, 0x5c, 0x71, 0xc0,
        0xa8, 0x01, 0x64, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc0, 0xa8, 0x01, 0x01,
    ];

    #[test]
    fn parse_known() {
        let p = ArpPacket::new_checked(&REQ[..]).unwrap();
        assert_eq!(p.operation(), OP_REQUEST);
        assert_eq!(p.sender_mac(), [0x00, 0x0c, 0x29, 0x3e, 0x5c, 0x71]);
        assert_eq!(p.sender_ip(), [192, 168, 1, 100]);
        assert_eq!(p.target_ip(), [192, 168, 1, 1]);
        let mut out = [0u8; 28];
        let r = ArpRepr {
            operation: 1,
            sender_mac: p.sender_mac(),
            sender_ip: p.sender_ip(),
            target_mac: p.target_mac(),
            target_ip: p.target_ip(),
        };
        emit(&mut out, &r).unwrap();
        assert_eq!(out, REQ);
    }

    #[test]
    fn truncation_and_unsupported() {
        for n in 0..28 {
            assert_eq!(
                ArpPacket::new_checked(&REQ[..n]).unwrap_err(),
                Error::Truncated
            );
        }
        let mut b = REQ;
        b[5] = 16;
        assert_eq!(
            ArpPacket::new_checked(&b[..]).unwrap_err(),
            Error::Unsupported
        );
    }
}
