use crate::ipv4::proto;
use crate::{arr, be16, be32, put16, put32, put_bytes, Error, Result};

/// Length of the IPv6 fixed header.
pub const HEADER_LEN: usize = 40;
/// Most extension headers [`walk_ext_headers`] accepts before giving up
/// with [`Error::TooManyExtHeaders`] (bounds the per-packet work).
pub const MAX_EXT_HEADERS: usize = 8;

/// A view over an IPv6 packet.
///
/// `new_checked` guarantees: version 6, 40-byte header present,
/// 40 + payload length <= buffer length (the buffer may be longer).
/// Jumbograms (payload length 0 with a jumbo option) are not supported:
/// their payload is seen as empty.
#[derive(Debug, Clone)]
pub struct Ipv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

#[inline(always)]
pub(crate) fn check(b: &[u8]) -> Result<usize> {
    if b.len() < HEADER_LEN {
        return Err(Error::Truncated);
    }
    if b[0] >> 4 != 6 {
        return Err(Error::BadVersion);
    }
    let plen = u16::from_be_bytes([b[4], b[5]]) as usize;
    if HEADER_LEN + plen > b.len() {
        return Err(Error::Truncated);
    }
    Ok(plen)
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    pub fn new_checked(buffer: T) -> Result<Self> {
        check(buffer.as_ref())?;
        Ok(Ipv6Packet { buffer })
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
    pub fn traffic_class(&self) -> u8 {
        (be16(self.b(), 0) >> 4) as u8
    }
    pub fn flow_label(&self) -> u32 {
        be32(self.b(), 0) & 0x000f_ffff
    }
    pub fn payload_len(&self) -> u16 {
        be16(self.b(), 4)
    }
    pub fn next_header(&self) -> u8 {
        self.b()[6]
    }
    pub fn hop_limit(&self) -> u8 {
        self.b()[7]
    }
    pub fn src(&self) -> [u8; 16] {
        arr(self.b(), 8)
    }
    pub fn dst(&self) -> [u8; 16] {
        arr(self.b(), 24)
    }
    /// Bytes after the fixed header up to the payload length (extension
    /// headers included).
    pub fn payload(&self) -> &[u8] {
        let end = HEADER_LEN + self.payload_len() as usize;
        self.b().get(HEADER_LEN..end).unwrap_or(&[])
    }
    /// Walk the extension headers: upper-layer protocol and its offset in
    /// [`Ipv6Packet::payload`].
    pub fn upper_layer(&self) -> Result<ExtWalk> {
        walk_ext_headers(self.next_header(), self.payload())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    pub fn set_hop_limit(&mut self, v: u8) {
        self.buffer.as_mut()[7] = v
    }
    pub fn set_next_header(&mut self, v: u8) {
        self.buffer.as_mut()[6] = v
    }
    pub fn set_traffic_class(&mut self, v: u8) {
        let w = (be32(self.b(), 0) & 0xf00f_ffff) | ((v as u32) << 20);
        put32(self.buffer.as_mut(), 0, w)
    }
    pub fn set_flow_label(&mut self, v: u32) {
        let w = (be32(self.b(), 0) & 0xfff0_0000) | (v & 0x000f_ffff);
        put32(self.buffer.as_mut(), 0, w)
    }
    pub fn set_src(&mut self, v: [u8; 16]) {
        put_bytes(self.buffer.as_mut(), 8, &v)
    }
    pub fn set_dst(&mut self, v: [u8; 16]) {
        put_bytes(self.buffer.as_mut(), 24, &v)
    }
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = HEADER_LEN + self.payload_len() as usize;
        self.buffer
            .as_mut()
            .get_mut(HEADER_LEN..end)
            .unwrap_or(&mut [])
    }
}

/// Fragment header contents.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FragInfo {
    /// Offset in 8-byte units.
    pub offset: u16,
    pub more: bool,
    pub ident: u32,
}

/// Result of [`walk_ext_headers`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExtWalk {
    /// Upper-layer protocol (next header after the last extension header;
    /// 59 = no next header, 50 = ESP which is not walked).
    pub proto: u8,
    /// Offset of the upper-layer header from the start of the IPv6 payload.
    pub offset: usize,
    /// Number of extension headers skipped.
    pub count: u8,
    /// The fragment header, if any. With a non-zero offset the bytes at
    /// `offset` are fragment data, not an upper-layer header.
    pub frag: Option<FragInfo>,
}

/// Is `nh` an extension header this walker skips?
#[inline(always)]
pub fn is_ext_header(nh: u8) -> bool {
    matches!(
        nh,
        proto::HOPOPT | proto::IPV6_ROUTE | proto::IPV6_FRAG | proto::IPV6_OPTS | proto::AH
    )
}

/// Skip hop-by-hop, routing, fragment, destination-options and AH headers
/// that start `payload` (the bytes after the fixed header), bounds-checking
/// each. Stops after a fragment header with a non-zero offset. At most
/// [`MAX_EXT_HEADERS`] are walked.
#[inline]
pub fn walk_ext_headers(next_header: u8, payload: &[u8]) -> Result<ExtWalk> {
    let mut w = ExtWalk {
        proto: next_header,
        ..ExtWalk::default()
    };
    while is_ext_header(w.proto) {
        if w.count as usize >= MAX_EXT_HEADERS {
            return Err(Error::TooManyExtHeaders);
        }
        let h = payload
            .get(w.offset..w.offset + 2)
            .ok_or(Error::Truncated)?;
        let len = match w.proto {
            proto::IPV6_FRAG => 8,
            proto::AH => (h[1] as usize + 2) * 4,
            _ => (h[1] as usize + 1) * 8,
        };
        let nh = h[0];
        let body = payload
            .get(w.offset..w.offset + len)
            .ok_or(Error::Truncated)?;
        if w.proto == proto::IPV6_FRAG {
            let fo = u16::from_be_bytes([body[2], body[3]]);
            w.frag = Some(FragInfo {
                offset: fo >> 3,
                more: fo & 1 != 0,
                ident: u32::from_be_bytes([body[4], body[5], body[6], body[7]]),
            });
        }
        w.proto = nh;
        w.offset += len;
        w.count += 1;
        if let Some(f) = w.frag {
            if f.offset != 0 {
                break;
            }
        }
    }
    Ok(w)
}

/// Fields of an IPv6 fixed header for [`emit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6Repr {
    pub src: [u8; 16],
    pub dst: [u8; 16],
    pub next_header: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
    pub flow_label: u32,
    /// Length of what follows the fixed header.
    pub payload_len: usize,
}

/// Write an IPv6 fixed header into `buf`; returns [`HEADER_LEN`].
pub fn emit(buf: &mut [u8], r: &Ipv6Repr) -> Result<usize> {
    if r.payload_len > u16::MAX as usize {
        return Err(Error::BadParam);
    }
    let h = buf.get_mut(..HEADER_LEN).ok_or(Error::BufferTooSmall)?;
    put32(
        h,
        0,
        (6 << 28) | ((r.traffic_class as u32) << 20) | (r.flow_label & 0xf_ffff),
    );
    put16(h, 4, r.payload_len as u16);
    h[6] = r.next_header;
    h[7] = r.hop_limit;
    h[8..24].copy_from_slice(&r.src);
    h[24..40].copy_from_slice(&r.dst);
    Ok(HEADER_LEN)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hdr(next: u8, plen: u16) -> [u8; 40] {
        let mut b = [0u8; 40];
        let r = Ipv6Repr {
            src: [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
            dst: [0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
            next_header: next,
            hop_limit: 255,
            traffic_class: 0xa1,
            flow_label: 0x12345,
            payload_len: plen as usize,
        };
        emit(&mut b, &r).unwrap();
        b
    }

    #[test]
    fn fixed_header() {
        let mut b = [0u8; 48];
        b[..40].copy_from_slice(&hdr(17, 8));
        let mut p = Ipv6Packet::new_checked(&mut b[..]).unwrap();
        assert_eq!(p.version(), 6);
        assert_eq!(p.traffic_class(), 0xa1);
        assert_eq!(p.flow_label(), 0x12345);
        assert_eq!(
            (p.payload_len(), p.next_header(), p.hop_limit()),
            (8, 17, 255)
        );
        assert_eq!(p.src()[15], 1);
        assert_eq!(p.dst()[0], 0xff);
        assert_eq!(p.upper_layer().unwrap().proto, 17);
        p.set_traffic_class(0x5);
        p.set_flow_label(0xfffff);
        assert_eq!(
            (p.traffic_class(), p.flow_label(), p.version()),
            (5, 0xfffff, 6)
        );
        for n in 0..48 {
            assert!(Ipv6Packet::new_checked(&b[..n]).is_err());
        }
        let mut x = b;
        x[0] = 0x45;
        assert_eq!(
            Ipv6Packet::new_checked(&x[..]).unwrap_err(),
            Error::BadVersion
        );
    }

    #[test]
    fn ext_chain() {
        // HBH (8) -> routing (16) -> fragment (8, offset 0) -> dst opts (8) -> AH (12+4=16) -> TCP
        let mut p = [0u8; 56 + 20];
        p[0] = 43; // HBH next = routing
        p[1] = 0;
        p[8] = 44; // routing next = frag, len 1 => 16 bytes
        p[9] = 1;
        p[24] = 60; // frag next = dst opts
        p[26] = 0;
        p[27] = 1; // M flag, offset 0
        p[28..32].copy_from_slice(&0xdeadbeefu32.to_be_bytes());
        p[32] = 51; // dst opts next = AH
        p[33] = 0;
        p[40] = 6; // AH next = TCP, payload len 2 => (2+2)*4 = 16
        p[41] = 2;
        let w = walk_ext_headers(0, &p).unwrap();
        assert_eq!(w.proto, 6);
        assert_eq!(w.offset, 56);
        assert_eq!(w.count, 5);
        assert_eq!(
            w.frag,
            Some(FragInfo {
                offset: 0,
                more: true,
                ident: 0xdeadbeef
            })
        );
        // every truncation inside the chain is an error
        for n in 0..56 {
            assert_eq!(walk_ext_headers(0, &p[..n]), Err(Error::Truncated), "n={n}");
        }
        assert!(walk_ext_headers(0, &p[..56]).is_ok());
        // non-first fragment stops the walk
        p[26] = 0x01; // offset 32 units
        let w = walk_ext_headers(0, &p).unwrap();
        assert_eq!((w.proto, w.offset, w.count), (60, 32, 3));
        assert_eq!(w.frag.unwrap().offset, 32);
        // no next header / ESP end the walk
        assert_eq!(walk_ext_headers(59, &[]).unwrap().proto, 59);
        assert_eq!(walk_ext_headers(50, &[]).unwrap().offset, 0);
    }

    #[test]
    fn too_many_ext_headers() {
        // 9 destination-options headers chained, then UDP.
        let mut p = [0u8; 8 * 9 + 8];
        for i in 0..9 {
            p[i * 8] = if i == 8 { 17 } else { 60 };
        }
        assert_eq!(walk_ext_headers(60, &p), Err(Error::TooManyExtHeaders));
        // 8 are fine
        let w = walk_ext_headers(60, &p[8..]).unwrap();
        assert_eq!((w.proto, w.offset, w.count), (17, 64, 8));
    }
}
