use crate::{arr, be16, put16, put_bytes, Error, Result};

/// Length of an Ethernet II header.
pub const HEADER_LEN: usize = 14;

/// A MAC address.
pub type Mac = [u8; 6];

/// Parse a MAC address written `aa:bb:cc:dd:ee:ff` (or with `-`): six
/// groups of one or two hex digits. `None` for anything else.
pub fn parse_mac(s: &str) -> Option<Mac> {
    let mut m = [0u8; 6];
    let mut it = s.split([':', '-']);
    for b in m.iter_mut() {
        let p = it.next()?;
        if p.is_empty() || p.len() > 2 {
            return None;
        }
        *b = u8::from_str_radix(p, 16).ok()?;
    }
    it.next().is_none().then_some(m)
}
/// The broadcast MAC address.
pub const BROADCAST: Mac = [0xff; 6];

/// EtherType values used by this crate.
pub mod ethertype {
    pub const IPV4: u16 = 0x0800;
    pub const ARP: u16 = 0x0806;
    pub const VLAN: u16 = 0x8100;
    pub const QINQ: u16 = 0x88a8;
    pub const IPV6: u16 = 0x86dd;
}

/// A view over an Ethernet II frame.
#[derive(Debug, Clone)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// Wrap `buffer`; `Err(Truncated)` if shorter than 14 bytes.
    pub fn new_checked(buffer: T) -> Result<Self> {
        if buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(EthernetFrame { buffer })
    }
    pub fn into_inner(self) -> T {
        self.buffer
    }
    pub fn dst(&self) -> Mac {
        arr(self.buffer.as_ref(), 0)
    }
    pub fn src(&self) -> Mac {
        arr(self.buffer.as_ref(), 6)
    }
    pub fn ethertype(&self) -> u16 {
        be16(self.buffer.as_ref(), 12)
    }
    /// Bytes after the 14-byte header (may start with a VLAN tag).
    pub fn payload(&self) -> &[u8] {
        self.buffer.as_ref().get(HEADER_LEN..).unwrap_or(&[])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    pub fn set_dst(&mut self, v: Mac) {
        put_bytes(self.buffer.as_mut(), 0, &v)
    }
    pub fn set_src(&mut self, v: Mac) {
        put_bytes(self.buffer.as_mut(), 6, &v)
    }
    pub fn set_ethertype(&mut self, v: u16) {
        put16(self.buffer.as_mut(), 12, v)
    }
    pub fn payload_mut(&mut self) -> &mut [u8] {
        self.buffer
            .as_mut()
            .get_mut(HEADER_LEN..)
            .unwrap_or(&mut [])
    }
}

/// Write an Ethernet header into `buf`; returns [`HEADER_LEN`].
pub fn emit(buf: &mut [u8], dst: Mac, src: Mac, ethertype: u16) -> Result<usize> {
    let h = buf.get_mut(..HEADER_LEN).ok_or(Error::BufferTooSmall)?;
    h[..6].copy_from_slice(&dst);
    h[6..12].copy_from_slice(&src);
    h[12..14].copy_from_slice(&ethertype.to_be_bytes());
    Ok(HEADER_LEN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_set() {
        let mut b = [0u8; 20];
        emit(
            &mut b,
            [1, 2, 3, 4, 5, 6],
            [7, 8, 9, 10, 11, 12],
            ethertype::IPV6,
        )
        .unwrap();
        let mut f = EthernetFrame::new_checked(&mut b[..]).unwrap();
        assert_eq!(f.dst(), [1, 2, 3, 4, 5, 6]);
        assert_eq!(f.src(), [7, 8, 9, 10, 11, 12]);
        assert_eq!(f.ethertype(), 0x86dd);
        assert_eq!(f.payload().len(), 6);
        f.set_ethertype(0x0800);
        f.set_dst(BROADCAST);
        assert_eq!(&b[..6], &BROADCAST);
        assert_eq!(&b[12..14], &[0x08, 0x00]);
    }

    #[test]
    fn truncation() {
        let b = [0u8; 14];
        for n in 0..14 {
            assert_eq!(
                EthernetFrame::new_checked(&b[..n]).unwrap_err(),
                Error::Truncated
            );
        }
        assert!(EthernetFrame::new_checked(&b[..]).is_ok());
        assert_eq!(
            emit(&mut [0u8; 13], BROADCAST, BROADCAST, 0),
            Err(Error::BufferTooSmall)
        );
    }
}
