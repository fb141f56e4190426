//! The `pcap` port backend: replay a pcap/pcapng file, or write one.
//!
//! `pcap:FILE[?mode=read|write&speed=top|original|X&rate=PPS&loop=N&format=pcapng|pcap]`
//!
//! - If FILE exists it is read (RX replays it, TX takes nothing); if not, it
//!   is created and written (RX gives nothing and is at its end). `mode=`
//!   overrides: `mode=write` replaces an existing regular file (the
//!   explicit opt-in; without it no file is ever overwritten).
//! - What the caller does with the port ([`OpenOptions::role`]) narrows
//!   this: a port only received from (capture, count) never creates its
//!   file (a missing one, a typo, is a one-line error); a port only sent to
//!   (gen) refuses an existing file unless `mode=write`.
//! - A file is written only through its own name, never through a symbolic
//!   link (also with `mode=write`), and is created exclusively
//!   (`O_CREAT|O_EXCL|O_NOFOLLOW`): a file or link that appears at the name
//!   meanwhile is an error, not a victim.
//! - Reading: classic pcap (microsecond and nanosecond magic, both byte
//!   orders, and the "modified" variant) and pcapng (SHB/IDB/EPB/SPB, the
//!   `if_tsresol`/`if_tsoffset` of each interface, several interfaces and
//!   sections). Link type Ethernet only. The file is read in 4 MiB chunks
//!   (a file that small is read once and kept); each packet is copied into
//!   a frame of the port's own pool, valid until `release()`, so in-place
//!   edits never reach the next loop pass. Records longer than the frame
//!   size are counted (`too_big`) and skipped, damaged records are counted
//!   (`malformed_records`), a truncated last record is counted
//!   (`truncated`); damage that makes the rest unreadable is a one-line
//!   error naming the file and the offset. `Pkt::ts_ns` is the file
//!   timestamp in ns (clock "file").
//! - Replay: `speed=top` (default), `original` (= 1.0) or a multiplier,
//!   or `rate=PPS`; `loop=N` passes (0 = forever, default 1). Pacing reads
//!   the clock once per `recv()` and hands out every packet whose time has
//!   come, up to the batch room.
//! - Writing: pcapng (SHB, one IDB with `if_tsresol=9` and snaplen 262144,
//!   one EPB per packet) or, with `format=pcap`, classic pcap with the
//!   nanosecond magic. Records go whole into a 4 MiB buffer that is written
//!   out when full, about once a second from `flush()`, and on drop, so
//!   the file on disk always ends on a record boundary.
//!   `Pkt::ts_ns == 0` is replaced by CLOCK_REALTIME read once per batch.

use std::time::Instant;

use crate::batch::Batch;
use crate::port::{OpenOptions, Port, PortError, PortInfo, PortRole, RxPort};
use crate::uri::Uri;

/// Size of the read buffer, and of the write buffer.
pub const CHUNK: usize = 4 << 20;
/// Snap length written in file headers; longer packets are written truncated.
pub const SNAPLEN: u32 = 262_144;
/// Largest captured length accepted in a record before the file is called corrupt.
const MAX_CAPLEN: usize = 16 << 20;

const SHB: u32 = 0x0A0D_0D0A;
const IDB: u32 = 0x0000_0001;
const SPB: u32 = 0x0000_0003;
const EPB: u32 = 0x0000_0006;
const BOM: u32 = 0x1A2B_3C4D;

/// Open a `pcap:` port (see the module docs).
pub fn open(uri: &Uri, opts: &OpenOptions) -> Result<Port, PortError> {
    uri.check_known(&["mode", "speed", "rate", "loop", "format"])?;
    let path = uri.target.as_str();
    let mode = uri.get_choice("mode", &["read", "write", "auto"], "auto")?;
    let exists = std::path::Path::new(path).exists();
    let read = match (mode, opts.role) {
        ("read", PortRole::TxOnly) => {
            return Err(uri
                .err("mode=read: this port is only sent to, and a file being read takes nothing"));
        }
        ("write", PortRole::RxOnly) => {
            return Err(uri.err("mode=write: this port is only received from, and a file being written gives nothing"));
        }
        ("read", _) | (_, PortRole::RxOnly) => true,
        ("write", _) => false,
        (_, PortRole::TxOnly) if exists => {
            return Err(uri.err(format!(
                "{path}: exists; not overwritten (mode=write replaces it)"
            )));
        }
        _ => exists,
    };
    if read {
        if uri.get("format").is_some() {
            return Err(uri.err("'format' is for writing; a file being read has its own format"));
        }
        let pace = Pace::from_uri(uri)?;
        let loops: u64 = uri.get_or("loop", 1u64)?;
        let reader = Reader::open_file(path, opts.frame_size as usize)
            .map_err(|e| uri.err(format!("{path}: {e}")))?;
        let detail = format!(
            "reading {} ({}), {}, {}",
            path,
            reader.format_name(),
            pace.describe(),
            match loops {
                0 => "looping forever".to_string(),
                1 => "once".to_string(),
                n => format!("{n} times"),
            }
        );
        let rx = PcapRx::new(
            reader,
            opts,
            pace,
            loops,
            uri.text.clone(),
            path.to_string(),
        )
        .map_err(|e| uri.err(e))?;
        Ok(Port {
            info: PortInfo {
                uri: uri.text.clone(),
                kind: "pcap",
                detail,
                clock: "file",
                ifindex: None,
                ifname: None,
            },
            rx: Box::new(rx),
            tx: Box::new(RefuseTx { not_taken: 0 }),
        })
    } else {
        for k in ["speed", "rate", "loop"] {
            if uri.get(k).is_some() {
                return Err(uri.err(format!(
                    "'{k}' is for replaying; {path} is opened for writing"
                )));
            }
        }
        let format = match uri.get_choice("format", &["pcapng", "pcap"], "pcapng")? {
            "pcap" => WriteFormat::Pcap,
            _ => WriteFormat::PcapNg,
        };
        // Only an explicit mode=write replaces an existing file.
        let w = PcapWriter::create(path, format, mode == "write").map_err(|e| uri.err(e))?;
        Ok(Port {
            info: PortInfo {
                uri: uri.text.clone(),
                kind: "pcap",
                detail: format!(
                    "writing {path} ({}, ns timestamps, snaplen {SNAPLEN})",
                    match format {
                        WriteFormat::Pcap => "pcap",
                        WriteFormat::PcapNg => "pcapng",
                    }
                ),
                clock: "file",
                ifindex: None,
                ifname: None,
            },
            rx: Box::new(crate::port::NoRx::new()),
            tx: Box::new(PcapTx {
                w,
                calls: 0,
                last_out: Instant::now(),
                uri: uri.text.clone(),
            }),
        })
    }
}

mod fuzz;
mod pace;
mod read;
mod rx;
mod write;

pub use fuzz::fuzz_chunked;

use pace::Pace;
pub use read::ReadStats;
use read::Reader;
use rx::{PcapRx, RefuseTx};
use write::PcapTx;
pub use write::{PcapWriter, WriteFormat};

/// Parse arbitrary bytes as a capture file through the same code path as
/// a `pcap:` port (open checks, then replay at top speed, one pass) and
/// return the number of packets read. Never panics.
#[doc(hidden)]
pub fn fuzz_read(data: &[u8]) -> usize {
    let mut r = Reader::from_bytes(data.to_vec(), 2048);
    if r.prime().is_err() {
        return 0;
    }
    let opts = OpenOptions {
        ring_size: 512,
        frame_size: 2048,
        ..OpenOptions::default()
    };
    let Ok(mut rx) = PcapRx::new(r, &opts, Pace::Top, 1, "pcap:fuzz".into(), "fuzz".into()) else {
        return 0;
    };
    let mut batch = Batch::new(64);
    let mut n = 0;
    loop {
        match rx.recv(&mut batch) {
            Ok(0) | Err(_) => break,
            Ok(k) => n += k,
        }
        for p in batch.pkts() {
            // Touch the bytes: they must be inside the frame.
            std::hint::black_box(p.bytes().iter().fold(0u8, |a, b| a ^ b));
        }
        if rx.release(&mut batch).is_err() {
            break;
        }
    }
    n
}
