//! The `pcap` port backend: replay a pcap/pcapng file, or write one.
//!
//! `pcap:FILE[?mode=read|write&speed=top|original|X&rate=PPS&loop=N&format=pcapng|pcap]`
//!
//! - If FILE exists it is read (RX replays it, TX takes nothing); if not, it
//!   is created and written (RX gives nothing and is at its end). `mode=`
//!   overrides (`mode=write` truncates an existing file).
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

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::sync::Arc;
use std::time::Instant;

use pcap_parser::Linktype;

use crate::batch::{Batch, Pkt};
use crate::counters::KernelStats;
use crate::pool::{FreeStack, Region};
use crate::port::{OpenOptions, Port, PortError, PortInfo, RxPort, TxPort};
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
    let read = match mode {
        "read" => true,
        "write" => false,
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
        let w = PcapWriter::create(path, format).map_err(|e| uri.err(e))?;
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
            rx: Box::new(crate::port::NoRx),
            tx: Box::new(PcapTx {
                w,
                calls: 0,
                last_out: Instant::now(),
                uri: uri.text.clone(),
            }),
        })
    }
}

// ---------------------------------------------------------------------------
// Reading: the record parser over a chunked buffer.

/// Timestamp resolution of a pcapng interface.
#[derive(Clone, Copy, Debug)]
enum Res {
    /// ns = ts * mul
    Mul(u64),
    /// ns = ts / div
    Div(u64),
    /// ns = ts * 1e9 >> shift
    Pow2(u32),
}

impl Res {
    fn from_tsresol(r: u8) -> Option<Res> {
        if r & 0x80 == 0 {
            match r {
                0..=9 => Some(Res::Mul(10u64.pow(9 - r as u32))),
                10..=19 => Some(Res::Div(10u64.pow(r as u32 - 9))),
                _ => None,
            }
        } else {
            let n = (r & 0x7f) as u32;
            (n <= 63).then_some(Res::Pow2(n))
        }
    }
    #[inline]
    fn to_ns(self, ts: u64) -> u64 {
        match self {
            Res::Mul(m) => ts.saturating_mul(m),
            Res::Div(d) => ts / d,
            Res::Pow2(n) => ((ts as u128 * 1_000_000_000u128) >> n).min(u64::MAX as u128) as u64,
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Iface {
    res: Res,
    offset_ns: i128,
    snaplen: u32,
}

#[derive(Debug)]
enum Fmt {
    /// File header not parsed yet.
    Start,
    Pcap {
        be: bool,
        nanos: bool,
        rec_hdr: usize,
    },
    Ng {
        be: bool,
        ifaces: Vec<Iface>,
    },
}

/// What one parse step found.
enum Step {
    /// A packet at `buf[off..off+len]`.
    Packet { off: usize, len: usize, ts: u64 },
    /// A record of `total` bytes to pass over (maybe not all in the buffer),
    /// with the counter it goes to.
    Skip { total: u64, why: Why },
    /// Fewer than `n` bytes available.
    Need(usize),
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Why {
    /// A block that is not a packet (ISB, NRB, custom...): not counted.
    Other,
    TooBig,
    Malformed,
}

/// Counters of a reader.
#[derive(Clone, Copy, Default, Debug)]
pub struct ReadStats {
    pub packets: u64,
    pub bytes: u64,
    pub malformed_records: u64,
    pub too_big: u64,
    pub truncated: u64,
    pub passes: u64,
}

/// A pcap/pcapng reader over a buffer refilled from a file in large chunks.
struct Reader {
    file: Option<File>,
    buf: Vec<u8>,
    pos: usize,
    end: usize,
    /// File offset of `buf[0]` (for messages).
    base: u64,
    eof: bool,
    /// The whole file is in `buf` from offset 0: a new pass just resets `pos`.
    whole: bool,
    fmt: Fmt,
    max_pkt: usize,
    last_ts: u64,
    stats: ReadStats,
    first_format: &'static str,
}

type ParseResult<T> = Result<T, String>;

#[inline(always)]
fn rd32(b: &[u8], be: bool) -> u32 {
    let a = [b[0], b[1], b[2], b[3]];
    if be {
        u32::from_be_bytes(a)
    } else {
        u32::from_le_bytes(a)
    }
}

impl Reader {
    fn open_file(path: &str, max_pkt: usize) -> ParseResult<Reader> {
        let mut f = File::open(path).map_err(|e| format!("cannot open: {e}"))?;
        let meta = f.metadata().map_err(|e| format!("cannot stat: {e}"))?;
        if meta.is_dir() {
            return Err("is a directory, not a capture file".into());
        }
        let len = meta.len();
        let mut r = if len <= CHUNK as u64 {
            let mut data = Vec::with_capacity(len as usize);
            f.read_to_end(&mut data)
                .map_err(|e| format!("cannot read: {e}"))?;
            Reader::from_bytes(data, max_pkt)
        } else {
            Reader {
                file: Some(f),
                buf: vec![0u8; CHUNK],
                pos: 0,
                end: 0,
                base: 0,
                eof: false,
                whole: false,
                fmt: Fmt::Start,
                max_pkt,
                last_ts: 0,
                stats: ReadStats::default(),
                first_format: "",
            }
        };
        r.prime()?;
        Ok(r)
    }

    /// A reader over bytes held in memory (small files, fuzzing).
    fn from_bytes(data: Vec<u8>, max_pkt: usize) -> Reader {
        let end = data.len();
        Reader {
            file: None,
            buf: data,
            pos: 0,
            end,
            base: 0,
            eof: true,
            whole: true,
            fmt: Fmt::Start,
            max_pkt,
            last_ts: 0,
            stats: ReadStats::default(),
            first_format: "",
        }
    }

    fn format_name(&self) -> &'static str {
        self.first_format
    }

    /// Parse the file header and the blocks before the first packet, so
    /// that a bad file or link type is reported at open.
    fn prime(&mut self) -> ParseResult<()> {
        loop {
            self.fill_if_needed(64)?;
            let avail = self.end - self.pos;
            if matches!(self.fmt, Fmt::Start) {
                if avail == 0 {
                    return Err("empty file".into());
                }
            } else if avail == 0 {
                return Ok(()); // a capture with no packets
            }
            if let Fmt::Ng { be, .. } = self.fmt {
                if avail >= 8 {
                    let t = rd32(&self.buf[self.pos..], be);
                    if t == EPB || t == SPB {
                        return Ok(());
                    }
                }
            } else if let Fmt::Pcap { .. } = self.fmt {
                return Ok(());
            }
            match self.step()? {
                Step::Packet { .. } => return Ok(()), // not reached: handled above
                Step::Skip { total, why } => self.skip(total, why)?,
                Step::Need(n) => {
                    if !self.refill(n)? {
                        if matches!(self.fmt, Fmt::Start) {
                            return Err(format!(
                                "truncated file header ({} bytes)",
                                self.base + self.end as u64
                            ));
                        }
                        self.stats.truncated += 1;
                        return Ok(());
                    }
                }
            }
        }
    }

    /// Make sure at least `n` bytes are buffered if the file has them.
    fn fill_if_needed(&mut self, n: usize) -> ParseResult<()> {
        if self.end - self.pos < n && !self.eof {
            self.refill(n)?;
        }
        Ok(())
    }

    /// Move the unread bytes to the front and read more. Returns false if
    /// no more bytes can come (end of file) and fewer than `n` are there.
    fn refill(&mut self, n: usize) -> ParseResult<bool> {
        if self.end - self.pos >= n {
            return Ok(true);
        }
        if self.eof {
            return Ok(false);
        }
        let Some(f) = self.file.as_mut() else {
            self.eof = true;
            return Ok(false);
        };
        self.buf.copy_within(self.pos..self.end, 0);
        self.base += self.pos as u64;
        self.end -= self.pos;
        self.pos = 0;
        // One read() per chunk, not per packet.
        while self.end < self.buf.len() {
            match f.read(&mut self.buf[self.end..]) {
                Ok(0) => {
                    self.eof = true;
                    break;
                }
                Ok(k) => self.end += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(format!("read error at offset {}: {e}", self.base)),
            }
        }
        Ok(self.end - self.pos >= n)
    }

    /// Pass over a record of `total` bytes starting at `pos`.
    fn skip(&mut self, total: u64, why: Why) -> ParseResult<()> {
        let avail = (self.end - self.pos) as u64;
        if total <= avail {
            self.pos += total as usize;
        } else {
            // Longer than what is buffered: drop the buffer and seek over the rest.
            let rest = total - avail;
            self.base += self.end as u64;
            self.pos = 0;
            self.end = 0;
            match self.file.as_mut() {
                Some(f) if !self.eof => {
                    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
                    if self.base + rest > len {
                        self.stats.truncated += 1;
                        self.eof = true;
                        return Ok(());
                    }
                    f.seek(SeekFrom::Current(rest as i64))
                        .map_err(|e| format!("seek error: {e}"))?;
                    self.base += rest;
                }
                _ => {
                    self.stats.truncated += 1;
                    self.eof = true;
                    return Ok(());
                }
            }
        }
        match why {
            Why::Other => {}
            Why::TooBig => self.stats.too_big += 1,
            Why::Malformed => self.stats.malformed_records += 1,
        }
        Ok(())
    }

    /// Next packet: `Some((off, len, ts_ns))` into `buf`, valid until the
    /// next call; `None` at the end of the file.
    fn next(&mut self) -> ParseResult<Option<(usize, usize, u64)>> {
        loop {
            match self.step()? {
                Step::Packet { off, len, ts } => {
                    self.stats.packets += 1;
                    self.stats.bytes += len as u64;
                    return Ok(Some((off, len, ts)));
                }
                Step::Skip { total, why } => self.skip(total, why)?,
                Step::Need(n) => {
                    if !self.refill(n)? {
                        if self.end > self.pos {
                            // A record cut short by the end of the file.
                            self.stats.truncated += 1;
                            self.pos = self.end;
                        }
                        return Ok(None);
                    }
                }
            }
        }
    }

    /// Start a new pass from the beginning of the file.
    fn rewind(&mut self) -> ParseResult<()> {
        self.fmt = Fmt::Start;
        if self.whole {
            self.pos = 0;
            return Ok(());
        }
        if let Some(f) = self.file.as_mut() {
            f.seek(SeekFrom::Start(0))
                .map_err(|e| format!("seek error: {e}"))?;
        }
        self.pos = 0;
        self.end = 0;
        self.base = 0;
        self.eof = false;
        Ok(())
    }

    fn off(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// Parse what starts at `pos`.
    fn step(&mut self) -> ParseResult<Step> {
        let b = &self.buf[self.pos..self.end];
        match &mut self.fmt {
            Fmt::Start => {
                if b.len() < 4 {
                    return Ok(Step::Need(4));
                }
                let magic = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                if magic == SHB {
                    return self.section_header();
                }
                match magic {
                    0xa1b2_c3d4 | 0xa1b2_3c4d | 0xa1b2_cd34 | 0xd4c3_b2a1 | 0x4d3c_b2a1
                    | 0x34cd_b2a1 => {}
                    _ => {
                        return Err(format!(
                            "not a pcap or pcapng file (starts with {:02x} {:02x} {:02x} {:02x})",
                            b[0], b[1], b[2], b[3]
                        ))
                    }
                }
                if b.len() < 24 {
                    return Ok(Step::Need(24));
                }
                let (_, h) = pcap_parser::parse_pcap_header(&b[..24])
                    .map_err(|e| format!("bad pcap file header: {e:?}"))?;
                if h.network != Linktype::ETHERNET {
                    return Err(link_err(h.network));
                }
                let be = h.is_bigendian();
                let modified = h.magic_number == 0xa1b2_cd34 || h.magic_number == 0x34cd_b2a1;
                self.fmt = Fmt::Pcap {
                    be,
                    nanos: h.is_nanosecond_precision(),
                    rec_hdr: if modified { 24 } else { 16 },
                };
                if self.first_format.is_empty() {
                    self.first_format = match (h.is_nanosecond_precision(), be) {
                        (true, false) => "pcap, ns",
                        (true, true) => "pcap, ns, big-endian",
                        (false, false) if modified => "pcap, modified",
                        (false, false) => "pcap, us",
                        (false, true) => "pcap, us, big-endian",
                    };
                }
                self.pos += 24;
                Ok(Step::Skip {
                    total: 0,
                    why: Why::Other,
                })
            }
            Fmt::Pcap { be, nanos, rec_hdr } => {
                let (be, nanos, rec_hdr) = (*be, *nanos, *rec_hdr);
                if b.len() < rec_hdr {
                    return Ok(Step::Need(rec_hdr));
                }
                let caplen = rd32(&b[8..], be) as usize;
                if caplen > MAX_CAPLEN {
                    return Err(format!(
                        "record at offset {}: captured length {caplen} is not plausible: file corrupt",
                        self.off()
                    ));
                }
                let total = rec_hdr + caplen;
                if caplen > self.max_pkt {
                    return Ok(Step::Skip {
                        total: total as u64,
                        why: Why::TooBig,
                    });
                }
                if b.len() < total {
                    return Ok(Step::Need(total));
                }
                // The record is complete: pcap-parser reads its fields.
                let parsed = if be {
                    pcap_parser::parse_pcap_frame_be(&b[..total])
                } else if rec_hdr == 24 {
                    pcap_parser::parse_pcap_frame_modified(&b[..total])
                } else {
                    pcap_parser::parse_pcap_frame(&b[..total])
                };
                let Ok((_, rec)) = parsed else {
                    return Ok(Step::Skip {
                        total: total as u64,
                        why: Why::Malformed,
                    });
                };
                let frac = rec.ts_usec as u64 * if nanos { 1 } else { 1000 };
                let ts = rec.ts_sec as u64 * 1_000_000_000 + frac;
                let off = self.pos + rec_hdr;
                self.pos += total;
                self.last_ts = ts;
                Ok(Step::Packet {
                    off,
                    len: caplen,
                    ts,
                })
            }
            Fmt::Ng { be, ifaces } => {
                let be = *be;
                if b.len() < 12 {
                    return Ok(Step::Need(12));
                }
                let btype = rd32(b, be);
                if btype == SHB {
                    return self.section_header();
                }
                let blen = rd32(&b[4..], be) as usize;
                if blen < 12 || !blen.is_multiple_of(4) {
                    return Err(format!(
                        "corrupt pcapng block at offset {} (type {btype:#x}, length {blen})",
                        self.off()
                    ));
                }
                match btype {
                    EPB => {
                        if blen < 32 {
                            return Ok(Step::Skip {
                                total: blen as u64,
                                why: Why::Malformed,
                            });
                        }
                        if b.len() < 28 {
                            return Ok(Step::Need(28));
                        }
                        let caplen = rd32(&b[20..], be) as usize;
                        if caplen > blen - 32 {
                            return Ok(Step::Skip {
                                total: blen as u64,
                                why: Why::Malformed,
                            });
                        }
                        if caplen > self.max_pkt {
                            return Ok(Step::Skip {
                                total: blen as u64,
                                why: Why::TooBig,
                            });
                        }
                        if b.len() < blen {
                            return Ok(Step::Need(blen));
                        }
                        // Fixed fields read by hand: pcap-parser's EPB parser
                        // collects the options into a Vec (an allocation per packet).
                        let ifid = rd32(&b[8..], be) as usize;
                        let Some(ifc) = ifaces.get(ifid) else {
                            return Ok(Step::Skip {
                                total: blen as u64,
                                why: Why::Malformed,
                            });
                        };
                        if rd32(&b[blen - 4..], be) as usize != blen {
                            return Ok(Step::Skip {
                                total: blen as u64,
                                why: Why::Malformed,
                            });
                        }
                        let raw = ((rd32(&b[12..], be) as u64) << 32) | rd32(&b[16..], be) as u64;
                        let ns = ifc.res.to_ns(raw) as i128 + ifc.offset_ns;
                        let ts = ns.clamp(0, u64::MAX as i128) as u64;
                        let off = self.pos + 28;
                        self.pos += blen;
                        self.last_ts = ts;
                        Ok(Step::Packet {
                            off,
                            len: caplen,
                            ts,
                        })
                    }
                    SPB => {
                        if blen < 16 {
                            return Ok(Step::Skip {
                                total: blen as u64,
                                why: Why::Malformed,
                            });
                        }
                        let Some(ifc) = ifaces.first() else {
                            return Ok(Step::Skip {
                                total: blen as u64,
                                why: Why::Malformed,
                            });
                        };
                        let orig = rd32(&b[8..], be) as usize;
                        let mut caplen = orig.min(blen - 16);
                        if ifc.snaplen > 0 {
                            caplen = caplen.min(ifc.snaplen as usize);
                        }
                        if caplen > self.max_pkt {
                            return Ok(Step::Skip {
                                total: blen as u64,
                                why: Why::TooBig,
                            });
                        }
                        if b.len() < blen {
                            return Ok(Step::Need(blen));
                        }
                        let off = self.pos + 12;
                        self.pos += blen;
                        // No timestamp in an SPB: it takes the previous packet's.
                        Ok(Step::Packet {
                            off,
                            len: caplen,
                            ts: self.last_ts,
                        })
                    }
                    IDB => {
                        if blen > MAX_CAPLEN {
                            return Err(format!(
                                "interface block at offset {} of implausible length {blen}",
                                self.off()
                            ));
                        }
                        if b.len() < blen {
                            return Ok(Step::Need(blen));
                        }
                        let parsed = if be {
                            pcap_parser::parse_interfacedescriptionblock_be(&b[..blen])
                        } else {
                            pcap_parser::parse_interfacedescriptionblock_le(&b[..blen])
                        };
                        let (_, idb) = parsed.map_err(|e| {
                            format!(
                                "bad interface description block at offset {}: {e:?}",
                                self.base + self.pos as u64
                            )
                        })?;
                        if idb.linktype != Linktype::ETHERNET {
                            return Err(format!(
                                "{} (interface {})",
                                link_err(idb.linktype),
                                ifaces.len()
                            ));
                        }
                        let res = Res::from_tsresol(idb.if_tsresol).ok_or_else(|| {
                            format!(
                                "interface {}: unsupported if_tsresol {:#x}",
                                ifaces.len(),
                                idb.if_tsresol
                            )
                        })?;
                        // pcap-parser reads if_tsoffset as little-endian.
                        let offset = if be {
                            idb.if_tsoffset.swap_bytes()
                        } else {
                            idb.if_tsoffset
                        };
                        ifaces.push(Iface {
                            res,
                            offset_ns: offset as i128 * 1_000_000_000,
                            snaplen: idb.snaplen,
                        });
                        Ok(Step::Skip {
                            total: blen as u64,
                            why: Why::Other,
                        })
                    }
                    _ => Ok(Step::Skip {
                        total: blen as u64,
                        why: Why::Other,
                    }),
                }
            }
        }
    }

    /// A section header block at `pos` (first block of the file or a new section).
    fn section_header(&mut self) -> ParseResult<Step> {
        let b = &self.buf[self.pos..self.end];
        if b.len() < 12 {
            return Ok(Step::Need(12));
        }
        let bom = u32::from_le_bytes([b[8], b[9], b[10], b[11]]);
        let be = if bom == BOM {
            false
        } else if bom == BOM.swap_bytes() {
            true
        } else {
            return Err(format!(
                "pcapng section header at offset {} has a bad byte-order magic {bom:#010x}",
                self.off()
            ));
        };
        let blen = rd32(&b[4..], be) as usize;
        if !(28..=MAX_CAPLEN).contains(&blen) || !blen.is_multiple_of(4) {
            return Err(format!(
                "pcapng section header at offset {} has a bad length {blen}",
                self.off()
            ));
        }
        if b.len() < blen {
            return Ok(Step::Need(blen));
        }
        pcap_parser::parse_sectionheaderblock(&b[..blen]).map_err(|e| {
            format!(
                "bad pcapng section header at offset {}: {e:?}",
                self.base + self.pos as u64
            )
        })?;
        if self.first_format.is_empty() {
            self.first_format = if be { "pcapng, big-endian" } else { "pcapng" };
        }
        self.fmt = Fmt::Ng {
            be,
            ifaces: Vec::new(),
        };
        Ok(Step::Skip {
            total: blen as u64,
            why: Why::Other,
        })
    }
}

fn link_err(l: Linktype) -> String {
    format!(
        "link type {l} ({}) is not supported: only Ethernet (1)",
        l.0
    )
}

// ---------------------------------------------------------------------------
// Replay pacing.

#[derive(Clone, Copy, Debug, PartialEq)]
enum Pace {
    Top,
    Speed(f64),
    Rate(f64),
}

impl Pace {
    fn from_uri(uri: &Uri) -> Result<Pace, PortError> {
        let speed = uri.get("speed");
        let rate = uri.get("rate");
        match (speed, rate) {
            (Some(_), Some(_)) => Err(uri.err("give either 'speed' or 'rate', not both")),
            (None, None) | (Some("top"), None) => Ok(Pace::Top),
            (Some("original"), None) => Ok(Pace::Speed(1.0)),
            (Some(s), None) => match s.parse::<f64>() {
                Ok(x) if x.is_finite() && x > 0.0 => Ok(Pace::Speed(x)),
                _ => Err(uri.err(format!(
                    "bad value '{s}' for parameter 'speed' (top, original or a positive multiplier)"
                ))),
            },
            (None, Some(r)) => match r.parse::<f64>() {
                Ok(x) if x.is_finite() && x > 0.0 => Ok(Pace::Rate(x)),
                _ => Err(uri.err(format!(
                    "bad value '{r}' for parameter 'rate' (packets per second, > 0)"
                ))),
            },
        }
    }
    fn describe(&self) -> String {
        match self {
            Pace::Top => "top speed".into(),
            Pace::Speed(x) if *x == 1.0 => "original timing".into(),
            Pace::Speed(x) => format!("{x}x original timing"),
            Pace::Rate(r) => format!("{r} packets/s"),
        }
    }
}

/// Computes when each packet is due, in ns since the first `recv()`.
struct Pacer {
    pace: Pace,
    start: Option<Instant>,
    /// File time of the first packet of the pass, and its due time.
    base_ts: Option<u64>,
    base_due: u64,
    last_due: u64,
    count: u64,
}

impl Pacer {
    fn due(&mut self, ts: u64) -> u64 {
        let d = match self.pace {
            Pace::Top => 0,
            Pace::Speed(x) => {
                let b = *self.base_ts.get_or_insert(ts);
                self.base_due + (ts.saturating_sub(b) as f64 / x) as u64
            }
            Pace::Rate(r) => (self.count as f64 * 1e9 / r) as u64,
        };
        self.count += 1;
        self.last_due = d;
        d
    }
    fn new_pass(&mut self) {
        self.base_ts = None;
        self.base_due = self.last_due;
    }
}

// ---------------------------------------------------------------------------
// The RX half of a read-mode port.

struct PcapRx {
    reader: Reader,
    /// The frames; also held by every batch this port fills.
    region: Arc<Region>,
    free: FreeStack,
    pacer: Pacer,
    /// A packet copied into a frame whose time has not come yet, with its due time.
    pending: Option<(Pkt, u64)>,
    loops: u64,
    /// Packets read before the current pass began.
    pass_start: u64,
    done: bool,
    /// The URI (for messages) and the file name.
    name: String,
    file: String,
}

impl PcapRx {
    fn new(
        reader: Reader,
        opts: &OpenOptions,
        pace: Pace,
        loops: u64,
        name: String,
        file: String,
    ) -> Result<PcapRx, String> {
        let frames = opts.ring_size.max(crate::batch::MAX_BATCH as u32 * 2);
        let fs = opts.frame_size.max(64);
        let region = Region::new(frames, fs).map_err(|e| format!("cannot map frames: {e}"))?;
        Ok(PcapRx {
            reader,
            region: Arc::new(region),
            free: FreeStack::new(0, frames, fs),
            pacer: Pacer {
                pace,
                start: None,
                base_ts: None,
                base_due: 0,
                last_due: 0,
                count: 0,
            },
            pending: None,
            loops,
            pass_start: 0,
            done: false,
            name,
            file,
        })
    }

    /// The next packet copied into a free frame, or None (no frame, or end).
    fn fetch(&mut self) -> Result<Option<Pkt>, String> {
        if self.free.is_empty() {
            return Ok(None);
        }
        loop {
            match self.reader.next()? {
                Some((off, len, ts)) => {
                    let Some(addr) = self.free.pop() else {
                        return Ok(None); // checked above
                    };
                    // SAFETY: addr is a free frame of our region; len <= max_pkt <= frame size.
                    let dst = unsafe { self.region.at(addr) };
                    // SAFETY: off+len lies in the reader's buffer (checked by the parser).
                    unsafe {
                        std::ptr::copy_nonoverlapping(self.reader.buf.as_ptr().add(off), dst, len)
                    };
                    // SAFETY: the frame was on the free stack (lent to no one)
                    // and goes back to it only in `release`; the region is
                    // held by the batch the packet is pushed to.
                    return Ok(Some(unsafe { Pkt::from_raw(dst, len as u32, addr, ts) }));
                }
                None => {
                    self.reader.stats.passes += 1;
                    let more = self.loops == 0 || self.reader.stats.passes < self.loops;
                    // A pass that gave no packet would loop forever for nothing.
                    let empty_pass = self.reader.stats.packets == self.pass_start;
                    if !more || empty_pass {
                        self.done = true;
                        return Ok(None);
                    }
                    self.reader.rewind()?;
                    self.pass_start = self.reader.stats.packets;
                    self.pacer.new_pass();
                }
            }
        }
    }
}

impl RxPort for PcapRx {
    fn recv(&mut self, batch: &mut Batch) -> Result<usize, PortError> {
        let n0 = batch.len();
        if self.done && self.pending.is_none() {
            return Ok(0);
        }
        batch.hold(&self.region);
        // One clock read per call, not per packet.
        let now = match self.pacer.pace {
            Pace::Top => u64::MAX,
            _ => {
                let s = *self.pacer.start.get_or_insert_with(Instant::now);
                s.elapsed().as_nanos() as u64
            }
        };
        while !batch.is_full() {
            let (p, due) = match self.pending.take() {
                Some(pd) => pd,
                None => {
                    if self.done {
                        break;
                    }
                    match self.fetch() {
                        Ok(Some(p)) => {
                            let d = self.pacer.due(p.ts_ns());
                            (p, d)
                        }
                        Ok(None) => break,
                        Err(e) => {
                            self.done = true;
                            return Err(PortError::new(format!(
                                "port '{}': {}: {e}",
                                self.name, self.file
                            )));
                        }
                    }
                }
            };
            if due > now {
                self.pending = Some((p, due));
                break;
            }
            batch.push(p);
        }
        Ok(batch.len() - n0)
    }
    fn release(&mut self, batch: &mut Batch) {
        for p in batch.pkts() {
            self.free.push(p.handle());
        }
        batch.clear();
    }
    fn wait(&mut self, timeout_ms: i32) -> Result<(), PortError> {
        // Sleep until the pending packet is due (bounded by the timeout).
        if let (Some((_, due)), Some(s)) = (&self.pending, self.pacer.start) {
            let now = s.elapsed().as_nanos() as u64;
            let ms = due.saturating_sub(now) / 1_000_000;
            let ms = ms.min(timeout_ms.max(0) as u64);
            if ms > 0 {
                std::thread::sleep(std::time::Duration::from_millis(ms));
            }
        }
        Ok(())
    }
    fn at_end(&self) -> bool {
        self.done && self.pending.is_none()
    }
    fn kernel_stats(&self) -> KernelStats {
        let s = &self.reader.stats;
        KernelStats {
            counters: vec![
                ("packets", s.packets),
                ("bytes", s.bytes),
                ("malformed_records", s.malformed_records),
                ("too_big", s.too_big),
                ("truncated", s.truncated),
                ("passes", s.passes),
            ],
        }
    }
}

/// TX of a read-mode port: takes nothing.
struct RefuseTx {
    not_taken: u64,
}

impl TxPort for RefuseTx {
    fn send(&mut self, pkts: &[Pkt]) -> Result<usize, PortError> {
        self.not_taken += pkts.len() as u64;
        Ok(0)
    }
    fn kernel_stats(&self) -> KernelStats {
        KernelStats {
            counters: vec![("tx_not_taken_read_mode", self.not_taken)],
        }
    }
}

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
        rx.release(&mut batch);
    }
    n
}

// ---------------------------------------------------------------------------
// Writing.

/// Format of a written file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteFormat {
    /// pcapng: SHB, one Ethernet IDB with if_tsresol=9, one EPB per packet.
    PcapNg,
    /// Classic pcap with the nanosecond magic.
    Pcap,
}

/// A capture file writer that buffers whole records and writes them out in
/// large chunks, so that the file on disk always ends on a record boundary.
///
/// A failed write (a full disk, `/dev/full`) is cut back to the last
/// record that reached the file whole: the file holds exactly the
/// acknowledged records ([`PcapWriter::written_packets`]); the error is
/// sticky (every later call returns it) and the records not written are
/// lost.
pub struct PcapWriter {
    file: File,
    buf: Vec<u8>,
    format: WriteFormat,
    path: String,
    packets: u64,
    bytes: u64,
    snapped: u64,
    /// Records in `buf`, not yet written out.
    buffered: u64,
    /// Records written out.
    written: u64,
    /// Bytes of the file, buffered ones included.
    file_len: u64,
    /// Bytes known to be in the file (written out by calls that succeeded).
    on_disk: u64,
    error: Option<String>,
}

impl PcapWriter {
    /// Create (truncate) `path` and write the file header.
    pub fn create(path: &str, format: WriteFormat) -> Result<PcapWriter, String> {
        let file = File::create(path).map_err(|e| format!("{path}: cannot create: {e}"))?;
        let mut w = PcapWriter {
            file,
            buf: Vec::with_capacity(CHUNK),
            format,
            path: path.to_string(),
            packets: 0,
            bytes: 0,
            snapped: 0,
            buffered: 0,
            written: 0,
            file_len: 0,
            on_disk: 0,
            error: None,
        };
        match format {
            WriteFormat::PcapNg => {
                // SHB with shb_userappl "linerate".
                let app = b"linerate";
                let shb_len: u32 = 28 + 4 + 8 + 4;
                w.put32(SHB);
                w.put32(shb_len);
                w.put32(BOM);
                w.buf.extend_from_slice(&1u16.to_le_bytes());
                w.buf.extend_from_slice(&0u16.to_le_bytes());
                w.buf.extend_from_slice(&(-1i64).to_le_bytes());
                w.buf.extend_from_slice(&4u16.to_le_bytes());
                w.buf.extend_from_slice(&(app.len() as u16).to_le_bytes());
                w.buf.extend_from_slice(app);
                w.put32(0); // opt_endofopt
                w.put32(shb_len);
                // IDB: Ethernet, snaplen, if_tsresol = 9.
                let idb_len: u32 = 20 + 8 + 4;
                w.put32(IDB);
                w.put32(idb_len);
                w.buf.extend_from_slice(&1u16.to_le_bytes());
                w.buf.extend_from_slice(&0u16.to_le_bytes());
                w.put32(SNAPLEN);
                w.buf.extend_from_slice(&9u16.to_le_bytes());
                w.buf.extend_from_slice(&1u16.to_le_bytes());
                w.buf.extend_from_slice(&[9, 0, 0, 0]);
                w.put32(0);
                w.put32(idb_len);
            }
            WriteFormat::Pcap => {
                w.put32(0xa1b2_3c4d);
                w.buf.extend_from_slice(&2u16.to_le_bytes());
                w.buf.extend_from_slice(&4u16.to_le_bytes());
                w.put32(0);
                w.put32(0);
                w.put32(SNAPLEN);
                w.put32(1);
            }
        }
        w.file_len = w.buf.len() as u64;
        if let Err(e) = w.write_out() {
            // Not even the header fits: leave no file that claims to be a
            // capture (a device such as /dev/full is not ours to remove).
            // Only a regular file by that name (not a symlink to one).
            if w.file.metadata().is_ok_and(|m| m.file_type().is_file())
                && std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_file())
            {
                let _ = std::fs::remove_file(path);
            }
            return Err(e);
        }
        Ok(w)
    }

    #[inline(always)]
    fn put32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    /// Append one record per packet (no syscall unless the buffer fills).
    pub fn write(&mut self, pkts: &[Pkt]) -> Result<(), String> {
        let mut now: Option<u64> = None;
        for p in pkts {
            let ts = if p.ts_ns() != 0 {
                p.ts_ns()
            } else {
                // CLOCK_REALTIME read at most once per batch.
                *now.get_or_insert_with(realtime_ns)
            };
            let data = p.bytes();
            self.write_record(data, data.len(), ts)?;
        }
        Ok(())
    }

    /// Append one record: `data` captured (truncated to the snap length
    /// if longer), `orig_len` its length on the wire (>= `data.len()`),
    /// `ts_ns` its timestamp. No syscall unless the buffer fills.
    #[inline]
    pub fn write_record(&mut self, data: &[u8], orig_len: usize, ts: u64) -> Result<(), String> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        let orig_len = orig_len.max(data.len()).min(u32::MAX as usize);
        let cap = data.len().min(SNAPLEN as usize);
        if cap < orig_len {
            self.snapped += 1;
        }
        let rec = match self.format {
            WriteFormat::PcapNg => 32 + cap.div_ceil(4) * 4,
            WriteFormat::Pcap => 16 + cap,
        };
        if self.buf.len() + rec > self.buf.capacity() {
            self.write_out()?;
        }
        match self.format {
            WriteFormat::PcapNg => {
                self.put32(EPB);
                self.put32(rec as u32);
                self.put32(0);
                self.put32((ts >> 32) as u32);
                self.put32(ts as u32);
                self.put32(cap as u32);
                self.put32(orig_len as u32);
                self.buf.extend_from_slice(&data[..cap]);
                let pad = cap.div_ceil(4) * 4 - cap;
                self.buf.extend_from_slice(&[0u8; 3][..pad]);
                self.put32(rec as u32);
            }
            WriteFormat::Pcap => {
                self.put32((ts / 1_000_000_000) as u32);
                self.put32((ts % 1_000_000_000) as u32);
                self.put32(cap as u32);
                self.put32(orig_len as u32);
                self.buf.extend_from_slice(&data[..cap]);
            }
        }
        self.packets += 1;
        self.buffered += 1;
        self.bytes += orig_len as u64;
        self.file_len += rec as u64;
        Ok(())
    }

    /// Write the buffered records to the file (one write of whole records).
    /// On an error the part of them that reached the file is cut off again
    /// and the error becomes sticky (see the type's docs).
    pub fn write_out(&mut self) -> Result<(), String> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        if self.buf.is_empty() {
            return Ok(());
        }
        let mut done = 0;
        let r = loop {
            if done == self.buf.len() {
                break Ok(());
            }
            match self.file.write(&self.buf[done..]) {
                Ok(0) => break Err(std::io::Error::from(std::io::ErrorKind::WriteZero)),
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => break Err(e),
            }
        };
        if let Err(e) = r {
            let msg = format!("{}: write error: {e}", self.path);
            // The records that reached the file whole are kept (and
            // acknowledged); the file is cut back to the end of the last of
            // them. (Not possible, and not needed, on a device such as
            // /dev/full.)
            let (keep, records) = self.whole_records(done);
            if self.file.metadata().is_ok_and(|m| m.file_type().is_file()) {
                let end = self.on_disk + keep as u64;
                let _ = self.file.set_len(end);
                let _ = self.file.seek(SeekFrom::Start(end));
                self.on_disk = end;
                self.written += records;
            }
            self.buf.clear();
            self.file_len = self.on_disk;
            self.buffered = 0;
            self.error = Some(msg.clone());
            return Err(msg);
        }
        self.on_disk += self.buf.len() as u64;
        self.buf.clear();
        self.written += self.buffered;
        self.buffered = 0;
        Ok(())
    }

    /// Of the first `limit` bytes of the buffer: the length of the whole
    /// blocks among them and how many of those are packet records (the file
    /// header, written first, is not a record).
    fn whole_records(&self, limit: usize) -> (usize, u64) {
        let b = &self.buf;
        let rd = |at: usize| u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
        let (mut off, mut recs) = (0usize, 0u64);
        if self.format == WriteFormat::Pcap && self.on_disk == 0 {
            if limit < 24 {
                return (0, 0);
            }
            off = 24;
        }
        loop {
            let (len, record) = match self.format {
                WriteFormat::PcapNg if off + 8 <= b.len() => (rd(off + 4) as usize, rd(off) == EPB),
                WriteFormat::Pcap if off + 16 <= b.len() => (16 + rd(off + 8) as usize, true),
                _ => break,
            };
            if len == 0 || off + len > limit {
                break;
            }
            off += len;
            recs += u64::from(record);
        }
        (off, recs)
    }

    /// The sticky error of a failed write, if any.
    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }

    /// Write out everything and ask the kernel to put it on disk.
    pub fn sync(&mut self) -> Result<(), String> {
        self.write_out()?;
        self.file
            .sync_data()
            .map_err(|e| format!("{}: sync error: {e}", self.path))
    }

    pub fn packets(&self) -> u64 {
        self.packets
    }

    /// Records handed to the kernel by `write(2)` (in the file, or in the
    /// page cache on its way there): these survive the end of the process.
    pub fn written_packets(&self) -> u64 {
        self.written
    }

    /// Length of the file once the buffer is written out (headers included).
    pub fn file_len(&self) -> u64 {
        self.file_len
    }
}

impl Drop for PcapWriter {
    fn drop(&mut self) {
        // Leave a complete file: every buffered record goes out whole.
        let _ = self.write_out();
    }
}

fn realtime_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// TX of a write-mode port.
struct PcapTx {
    w: PcapWriter,
    calls: u32,
    last_out: Instant,
    uri: String,
}

impl TxPort for PcapTx {
    fn send(&mut self, pkts: &[Pkt]) -> Result<usize, PortError> {
        self.w
            .write(pkts)
            .map_err(|e| PortError::new(format!("port '{}': {e}", self.uri)))?;
        Ok(pkts.len())
    }
    fn flush(&mut self) -> Result<(), PortError> {
        // Write out about once a second (the clock is read every 64th call),
        // so that a file being written is readable while the run goes on.
        self.calls = self.calls.wrapping_add(1);
        if self.calls.is_multiple_of(64)
            && !self.w.buf.is_empty()
            && self.last_out.elapsed().as_secs() >= 1
        {
            self.last_out = Instant::now();
            self.w
                .write_out()
                .map_err(|e| PortError::new(format!("port '{}': {e}", self.uri)))?;
        }
        Ok(())
    }
    fn finish(&mut self) -> Result<(), PortError> {
        self.w
            .write_out()
            .map_err(|e| PortError::new(format!("port '{}': {e}", self.uri)))
    }
    fn max_frame(&self) -> usize {
        SNAPLEN as usize
    }
    fn kernel_stats(&self) -> KernelStats {
        KernelStats {
            counters: vec![
                ("written_packets", self.w.packets),
                // Records in the file (written out); after a write error
                // (a full disk) exactly what the file holds.
                ("acknowledged_packets", self.w.written_packets()),
                ("written_bytes", self.w.bytes),
                ("snapped", self.w.snapped),
            ],
        }
    }
}
