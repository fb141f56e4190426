use crate::ethernet::ethertype;
use crate::{be16, put16, Error, Result};

/// Length of one VLAN tag (TCI + inner EtherType) after its TPID.
pub const TAG_LEN: usize = 4;
/// Most tags [`parse_stack`] and [`crate::frame::parse_frame`] walk.
pub const MAX_TAGS: usize = 2;

/// Is `t` a VLAN TPID (802.1Q 0x8100 or 802.1ad 0x88a8)?
#[inline(always)]
pub fn is_tpid(t: u16) -> bool {
    t == ethertype::VLAN || t == ethertype::QINQ
}

/// One VLAN tag: the TPID that announced it and its TCI.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Tag {
    pub tpid: u16,
    pub tci: u16,
}

impl Tag {
    /// VLAN id (12 bits).
    pub fn vid(&self) -> u16 {
        self.tci & 0x0fff
    }
    /// Priority code point (3 bits).
    pub fn pcp(&self) -> u8 {
        (self.tci >> 13) as u8
    }
    /// Drop eligible indicator.
    pub fn dei(&self) -> bool {
        self.tci & 0x1000 != 0
    }
}

/// Build a TCI from its fields (vid is masked to 12 bits, pcp to 3).
pub fn tci(pcp: u8, dei: bool, vid: u16) -> u16 {
    ((pcp as u16 & 7) << 13) | ((dei as u16) << 12) | (vid & 0x0fff)
}

/// A view over one VLAN tag body: TCI (2 bytes) then the inner EtherType.
#[derive(Debug, Clone)]
pub struct VlanPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> VlanPacket<T> {
    pub fn new_checked(buffer: T) -> Result<Self> {
        if buffer.as_ref().len() < TAG_LEN {
            return Err(Error::Truncated);
        }
        Ok(VlanPacket { buffer })
    }
    pub fn tci(&self) -> u16 {
        be16(self.buffer.as_ref(), 0)
    }
    pub fn vid(&self) -> u16 {
        self.tci() & 0x0fff
    }
    pub fn pcp(&self) -> u8 {
        (self.tci() >> 13) as u8
    }
    pub fn dei(&self) -> bool {
        self.tci() & 0x1000 != 0
    }
    pub fn ethertype(&self) -> u16 {
        be16(self.buffer.as_ref(), 2)
    }
    pub fn payload(&self) -> &[u8] {
        self.buffer.as_ref().get(TAG_LEN..).unwrap_or(&[])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> VlanPacket<T> {
    pub fn set_tci(&mut self, v: u16) {
        put16(self.buffer.as_mut(), 0, v)
    }
    pub fn set_vid(&mut self, vid: u16) {
        let t = (self.tci() & 0xf000) | (vid & 0x0fff);
        self.set_tci(t)
    }
    pub fn set_ethertype(&mut self, v: u16) {
        put16(self.buffer.as_mut(), 2, v)
    }
}

/// Up to [`MAX_TAGS`] tags, outermost first.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Stack {
    pub count: u8,
    pub tags: [Tag; MAX_TAGS],
}

impl Stack {
    pub fn as_slice(&self) -> &[Tag] {
        &self.tags[..(self.count as usize).min(MAX_TAGS)]
    }
    pub fn outer(&self) -> Option<Tag> {
        self.as_slice().first().copied()
    }
    pub fn inner(&self) -> Option<Tag> {
        self.as_slice().last().copied()
    }
}

/// Result of [`parse_stack`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Parsed {
    pub stack: Stack,
    /// EtherType after the last tag walked (a TPID if more than 2 tags).
    pub ethertype: u16,
    /// Bytes of `buf` consumed by the tags.
    pub len: usize,
}

/// Walk the tags that start at `buf`, given the EtherType field that
/// preceded them (`ethertype`). Walks at most [`MAX_TAGS`]; a third tag is
/// left unparsed and its TPID returned as `ethertype`.
#[inline]
pub fn parse_stack(mut ethertype: u16, buf: &[u8]) -> Result<Parsed> {
    let mut p = Parsed::default();
    while is_tpid(ethertype) && (p.stack.count as usize) < MAX_TAGS {
        let t = buf.get(p.len..p.len + TAG_LEN).ok_or(Error::Truncated)?;
        p.stack.tags[p.stack.count as usize] = Tag {
            tpid: ethertype,
            tci: u16::from_be_bytes([t[0], t[1]]),
        };
        p.stack.count += 1;
        ethertype = u16::from_be_bytes([t[2], t[3]]);
        p.len += TAG_LEN;
    }
    p.ethertype = ethertype;
    Ok(p)
}

/// Write the tags of `tcis` (outermost first, at most 2) into `buf`, where
/// `buf` starts at the EtherType field of the Ethernet header; the last
/// tag announces `inner`. The outer TPID is 0x88a8 when there are two tags,
/// else 0x8100. Returns bytes written (2 + 4 * tags).
pub fn emit_stack(buf: &mut [u8], tcis: &[u16], inner: u16) -> Result<usize> {
    if tcis.len() > MAX_TAGS {
        return Err(Error::BadParam);
    }
    let need = 2 + TAG_LEN * tcis.len();
    let b = buf.get_mut(..need).ok_or(Error::BufferTooSmall)?;
    let mut off = 0;
    for (i, t) in tcis.iter().enumerate() {
        let tpid = if tcis.len() == 2 && i == 0 {
            ethertype::QINQ
        } else {
            ethertype::VLAN
        };
        put16(b, off, tpid);
        put16(b, off + 2, *t);
        off += 4;
    }
    put16(b, off, inner);
    Ok(need)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_and_qinq() {
        // ethertype field onwards: 88a8 | tci 0064 | 8100 | tci a00a | 0800
        let b = [
            0x88, 0xa8, 0x00, 0x64, 0x81, 0x00, 0xa0, 0x0a, 0x08, 0x00, 0x45,
        ];
        let p = parse_stack(0x88a8, &b[2..]).unwrap();
        assert_eq!(p.stack.count, 2);
        assert_eq!(
            p.stack.tags[0],
            Tag {
                tpid: 0x88a8,
                tci: 100
            }
        );
        assert_eq!(p.stack.tags[1].vid(), 10);
        assert_eq!(p.stack.tags[1].pcp(), 5);
        assert_eq!(p.ethertype, 0x0800);
        assert_eq!(p.len, 8);
        let mut out = [0u8; 10];
        assert_eq!(emit_stack(&mut out, &[100, 0xa00a], 0x0800), Ok(10));
        assert_eq!(&out[..], &b[..10]);
        let v = VlanPacket::new_checked(&b[2..]).unwrap();
        assert_eq!((v.vid(), v.ethertype(), v.dei()), (100, 0x8100, false));
    }

    #[test]
    fn three_tags_stop_and_truncation() {
        let b = [0, 1, 0x81, 0x00, 0, 2, 0x81, 0x00, 0, 3, 0x08, 0x00];
        let p = parse_stack(0x8100, &b).unwrap();
        assert_eq!(p.stack.count, 2);
        assert_eq!(p.ethertype, 0x8100);
        for n in 0..8 {
            assert_eq!(parse_stack(0x8100, &b[..n]), Err(Error::Truncated));
        }
        assert_eq!(parse_stack(0x0800, &[]).unwrap().len, 0);
        assert_eq!(
            emit_stack(&mut [0u8; 20], &[1, 2, 3], 0),
            Err(Error::BadParam)
        );
        assert_eq!(tci(7, true, 0xffff), 0xffff);
    }
}
