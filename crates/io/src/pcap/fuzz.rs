//! The fuzz body of the reader's chunked path: what a file over [`CHUNK`]
//! goes through (refills that move the unread bytes to the front, seeks
//! over skipped records, rewinds for a new pass, the replaying port's
//! loop), driven with buffers of a few dozen to a few thousand bytes so
//! that every input exercises it. The same bytes read whole, in memory,
//! are the reference.

use std::fs::File;
use std::io::{Seek, Write};
use std::os::fd::FromRawFd;

use super::*;

/// Arbitrary bytes: the first four set the reader up, the rest is the
/// file. Byte 0-1: the buffer (32..=8223 bytes); byte 2: the largest
/// packet (64..=2104 bytes); byte 3: the passes (1..=4) and the batch
/// size (1..=16). No panic, and:
/// - every packet the reader counted was delivered, none longer than the
///   largest packet;
/// - every pass gives the same packets, a prefix of the file's as read
///   whole (a record longer than the buffer ends a pass early, counted as
///   truncated), and there are as many passes as asked (one if the first
///   gave nothing);
/// - when the whole file fits in the buffer, each pass gives every packet
///   of the file and counts the same records as too big, malformed and
///   truncated.
///
/// Returns the packets delivered.
#[doc(hidden)]
pub fn fuzz_chunked(data: &[u8]) -> usize {
    let Some((hdr, file)) = data.split_first_chunk::<4>() else {
        return 0;
    };
    let chunk = 32 + u16::from_le_bytes([hdr[0], hdr[1]]) as usize % 8192;
    let max_pkt = 64 + hdr[2] as usize * 8;
    let loops = 1 + u64::from(hdr[3] & 3);
    let batch_cap = 1 + (hdr[3] >> 2) as usize % 16;

    // The reference: the whole file in memory, one pass.
    let mut whole = Reader::from_bytes(file.to_vec(), max_pkt);
    let whole_ok = whole.prime().is_ok();
    let mut want: Vec<(u64, Vec<u8>)> = Vec::new();
    if whole_ok {
        while let Ok(Some((off, len, ts))) = whole.next() {
            want.push((ts, whole.buf[off..off + len].to_vec()));
        }
    }

    // The same bytes as a file (a memfd: no file system), in chunks.
    let Some(f) = memfd(file) else {
        return 0;
    };
    let mut r = Reader::chunked(f, chunk, max_pkt);
    if r.prime().is_err() {
        return 0;
    }
    // Opened where the whole file was refused: only by stopping before
    // the damage (a block longer than the buffer), with nothing to give.
    assert!(
        whole_ok || r.stats.truncated > 0,
        "the chunked reader opened what the whole one refused"
    );
    let opts = OpenOptions {
        ring_size: 64,
        frame_size: max_pkt as u32,
        ..OpenOptions::default()
    };
    let Ok(mut rx) = PcapRx::new(
        r,
        &opts,
        Pace::Top,
        loops,
        "pcap:fuzz".into(),
        "fuzz".into(),
    ) else {
        return 0;
    };
    let mut batch = Batch::new(batch_cap);
    let mut got: Vec<(u64, Vec<u8>)> = Vec::new();
    loop {
        // Packets put into the batch before an error are in it too.
        let res = rx.recv(&mut batch);
        for p in batch.pkts() {
            assert!(
                p.bytes().len() <= max_pkt,
                "{} > {max_pkt}",
                p.bytes().len()
            );
            got.push((p.ts_ns(), p.bytes().to_vec()));
        }
        // The batch is this port's own: its release cannot be refused.
        rx.release(&mut batch).expect("the port's own batch");
        if matches!(res, Ok(0) | Err(_)) {
            break;
        }
    }
    let s = rx.reader.stats;
    assert_eq!(
        got.len() as u64,
        s.packets,
        "packets counted but not delivered"
    );
    if s.passes == 0 {
        // An error in the first pass (passes are alike, so it comes there).
        assert!(got.len() <= want.len(), "{} > {}", got.len(), want.len());
        assert!(
            got == want[..got.len()],
            "the packets before the error differ"
        );
        return got.len();
    }
    let passes = s.passes as usize;
    assert_eq!(
        got.len() % passes,
        0,
        "{} packets in {passes} passes",
        got.len()
    );
    let k = got.len() / passes;
    assert_eq!(s.passes, if k == 0 { 1 } else { loops }, "passes");
    assert!(k <= want.len(), "a pass gave {k} packets of {}", want.len());
    for (i, pass) in got.chunks(k.max(1)).enumerate() {
        assert!(pass == &want[..k], "pass {} differs from the file", i + 1);
    }
    if file.len() <= chunk {
        let w = whole.stats;
        assert_eq!(k, want.len(), "the whole file fits, yet a pass ended early");
        let per_pass = |v: u64| v * s.passes;
        assert_eq!(s.too_big, per_pass(w.too_big), "too_big");
        assert_eq!(
            s.malformed_records,
            per_pass(w.malformed_records),
            "malformed"
        );
        assert_eq!(s.truncated, per_pass(w.truncated), "truncated");
    }
    got.len()
}

/// `data` in an anonymous in-memory file, at its start.
fn memfd(data: &[u8]) -> Option<File> {
    // SAFETY: a NUL-terminated name; the fd is new and owned by the File.
    let fd = unsafe { libc::memfd_create(c"linerate-fuzz".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return None;
    }
    // SAFETY: `fd` is a valid descriptor nothing else owns.
    let mut f = unsafe { File::from_raw_fd(fd) };
    f.write_all(data).ok()?;
    f.rewind().ok()?;
    Some(f)
}
