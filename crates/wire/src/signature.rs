//! The measurement signature linerate's generator writes into the L4
//! payload and its receiver reads back: stream id, sequence number and TX
//! timestamp. 24 bytes, big-endian, at the start of the payload:
//!
//! ```text
//!  0      4        6        8               16              24
//!  | magic | stream | flags  | sequence (u64) | tx time (u64) |
//! ```
//!
//! `magic` is `"LRSG"`. Sampled streams write the signature on some packets
//! only; the others carry the same bytes with a zero magic, so headers and
//! sizes are identical and a device under test cannot tell them apart.
//! The TX time is nanoseconds of `CLOCK_MONOTONIC` (what `bpf_ktime_get_ns`
//! returns in an XDP program); flag [`FLAG_TS`] says it is set.

use crate::{Error, Result};

/// Bytes of the signature.
pub const LEN: usize = 24;
/// `"LRSG"`.
pub const MAGIC: u32 = 0x4c52_5347;
/// The TX timestamp field is valid.
pub const FLAG_TS: u16 = 1;

/// A decoded signature.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Signature {
    pub stream: u16,
    pub flags: u16,
    pub seq: u64,
    pub tx_ns: u64,
}

impl Signature {
    /// The TX timestamp, if the generator set one.
    pub fn tx_time(&self) -> Option<u64> {
        (self.flags & FLAG_TS != 0).then_some(self.tx_ns)
    }
}

/// Write `sig` at the start of `payload`.
pub fn write(payload: &mut [u8], sig: &Signature) -> Result<()> {
    let b = payload.get_mut(..LEN).ok_or(Error::Truncated)?;
    b[0..4].copy_from_slice(&MAGIC.to_be_bytes());
    b[4..6].copy_from_slice(&sig.stream.to_be_bytes());
    b[6..8].copy_from_slice(&sig.flags.to_be_bytes());
    b[8..16].copy_from_slice(&sig.seq.to_be_bytes());
    b[16..24].copy_from_slice(&sig.tx_ns.to_be_bytes());
    Ok(())
}

/// Write a signature-sized block with a zero magic (an unsampled packet).
pub fn write_blank(payload: &mut [u8]) -> Result<()> {
    payload.get_mut(..LEN).ok_or(Error::Truncated)?.fill(0);
    Ok(())
}

/// Read the signature at the start of `payload`; `None` when the payload is
/// too short or carries no signature.
#[inline]
pub fn read(payload: &[u8]) -> Option<Signature> {
    let b = payload.get(..LEN)?;
    if u32::from_be_bytes([b[0], b[1], b[2], b[3]]) != MAGIC {
        return None;
    }
    let u64_at = |o: usize| {
        let mut a = [0u8; 8];
        a.copy_from_slice(&b[o..o + 8]);
        u64::from_be_bytes(a)
    };
    Some(Signature {
        stream: u16::from_be_bytes([b[4], b[5]]),
        flags: u16::from_be_bytes([b[6], b[7]]),
        seq: u64_at(8),
        tx_ns: u64_at(16),
    })
}

/// Offset of the sequence number inside the signature (for in-kernel writers).
pub const SEQ_OFFSET: usize = 8;
/// Offset of the TX timestamp inside the signature.
pub const TS_OFFSET: usize = 16;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_blank() {
        let mut p = [0xffu8; 40];
        let s = Signature {
            stream: 7,
            flags: FLAG_TS,
            seq: 1 << 40,
            tx_ns: 123_456_789,
        };
        write(&mut p, &s).unwrap();
        assert_eq!(read(&p), Some(s));
        assert_eq!(read(&p).unwrap().tx_time(), Some(123_456_789));
        write_blank(&mut p).unwrap();
        assert_eq!(read(&p), None);
        assert!(write(&mut [0u8; 23], &s).is_err());
        assert_eq!(read(&p[..10]), None);
    }
}
