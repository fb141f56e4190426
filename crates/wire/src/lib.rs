//! Wire formats: typed, allocation-free views over byte buffers.
//!
//! Every parser takes untrusted bytes and returns `Err` on truncated or
//! malformed input; none of them panics or allocates. The style follows
//! smoltcp's `wire` module: a view `XxxPacket<T: AsRef<[u8]>>` is made with
//! `new_checked(buf)`, has field getters, and setters when `T: AsMut<[u8]>`;
//! `emit` functions write a header into a `&mut [u8]`.
//!
//! The per-packet entry point is [`frame::parse_frame`], which walks
//! Ethernet -> VLAN(s) -> IPv4/IPv6 -> L4 and returns offsets and the 5-tuple.
#![forbid(unsafe_code)]
#![no_std]

#[cfg(test)]
extern crate std;

/// ARP for Ethernet/IPv4.
pub mod arp;
/// Frame builders for generators and tests (Ethernet/VLAN/IP/L4 + payload).
pub mod build;
/// Internet checksum (RFC 1071), pseudo-headers, incremental update (RFC 1624).
pub mod checksum;
/// Ethernet II header (dst, src, ethertype).
pub mod ethernet;
/// Flow key (5-tuple, IPv4 as v4-mapped IPv6) and a cheap symmetric hash.
pub mod flow;
/// Whole-frame parser (the per-packet fast path) and in-place NAT rewrites.
pub mod frame;
/// Fuzz bodies, one per parser, shared by cargo-fuzz and the stable fuzzer.
pub mod fuzz;
/// ICMPv4 and ICMPv6 headers and checksums.
pub mod icmp;
/// IPv4 header with options; header checksum.
pub mod ipv4;
/// IPv6 fixed header and extension-header walk (bounded).
pub mod ipv6;
/// Toeplitz RSS hash (Microsoft key, symmetric key) and its tuple layouts.
pub mod rss;
/// The measurement signature (stream id, sequence number, TX timestamp) in the payload.
pub mod signature;
/// TCP header (data offset, flags, options) and checksum.
pub mod tcp;
/// UDP header and checksum with IPv4/IPv6 pseudo-headers.
pub mod udp;
/// 802.1Q VLAN tags and QinQ (802.1ad) stacks of up to two tags.
pub mod vlan;

mod error;
pub use error::Error;
pub use flow::FlowKey;
pub use frame::{parse_frame, Layers};

/// Result type of this crate.
pub type Result<T> = core::result::Result<T, Error>;

/// Read a big-endian u16 at `off`. Callers have checked the bounds; the
/// `get` keeps this panic-free even if a caller got it wrong.
#[inline(always)]
pub(crate) fn be16(b: &[u8], off: usize) -> u16 {
    match b.get(off..off + 2) {
        Some(s) => u16::from_be_bytes([s[0], s[1]]),
        None => 0,
    }
}

#[inline(always)]
pub(crate) fn be32(b: &[u8], off: usize) -> u32 {
    match b.get(off..off + 4) {
        Some(s) => u32::from_be_bytes([s[0], s[1], s[2], s[3]]),
        None => 0,
    }
}

#[inline(always)]
pub(crate) fn put16(b: &mut [u8], off: usize, v: u16) {
    if let Some(s) = b.get_mut(off..off + 2) {
        s.copy_from_slice(&v.to_be_bytes());
    }
}

#[inline(always)]
pub(crate) fn put32(b: &mut [u8], off: usize, v: u32) {
    if let Some(s) = b.get_mut(off..off + 4) {
        s.copy_from_slice(&v.to_be_bytes());
    }
}

#[inline(always)]
pub(crate) fn arr<const N: usize>(b: &[u8], off: usize) -> [u8; N] {
    let mut out = [0u8; N];
    if let Some(s) = b.get(off..off + N) {
        out.copy_from_slice(s);
    }
    out
}

#[inline(always)]
pub(crate) fn put_bytes(b: &mut [u8], off: usize, v: &[u8]) {
    if let Some(s) = b.get_mut(off..off + v.len()) {
        s.copy_from_slice(v);
    }
}

#[cfg(test)]
pub(crate) mod testutil {
    /// Small deterministic PRNG (xorshift64*), enough for tests.
    pub struct Rng(pub u64);
    impl Rng {
        pub fn next(&mut self) -> u64 {
            let mut x = self.0;
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            self.0 = x;
            x.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }
        pub fn below(&mut self, n: u64) -> u64 {
            if n == 0 {
                0
            } else {
                self.next() % n
            }
        }
        pub fn fill(&mut self, b: &mut [u8]) {
            for x in b {
                *x = self.next() as u8;
            }
        }
    }
}
