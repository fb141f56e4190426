//! Reading a pcap/pcapng file: the record parser over a chunked buffer.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};

use pcap_parser::Linktype;

use super::*;

// ---------------------------------------------------------------------------
// Reading: the record parser over a chunked buffer.

/// Timestamp resolution of a pcapng interface.
#[derive(Clone, Copy, Debug)]
pub(super) enum Res {
    /// ns = ts * mul
    Mul(u64),
    /// ns = ts / div
    Div(u64),
    /// ns = ts * 1e9 >> shift
    Pow2(u32),
}

impl Res {
    pub(super) fn from_tsresol(r: u8) -> Option<Res> {
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
    pub(super) fn to_ns(self, ts: u64) -> u64 {
        match self {
            Res::Mul(m) => ts.saturating_mul(m),
            Res::Div(d) => ts / d,
            Res::Pow2(n) => ((ts as u128 * 1_000_000_000u128) >> n).min(u64::MAX as u128) as u64,
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub(super) struct Iface {
    pub(super) res: Res,
    pub(super) offset_ns: i128,
    pub(super) snaplen: u32,
}

#[derive(Debug)]
pub(super) enum Fmt {
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
pub(super) enum Step {
    /// A packet at `buf[off..off+len]`.
    Packet { off: usize, len: usize, ts: u64 },
    /// A record of `total` bytes to pass over (maybe not all in the buffer),
    /// with the counter it goes to.
    Skip { total: u64, why: Why },
    /// Fewer than `n` bytes available.
    Need(usize),
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Why {
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
pub(super) struct Reader {
    pub(super) file: Option<File>,
    pub(super) buf: Vec<u8>,
    pub(super) pos: usize,
    pub(super) end: usize,
    /// File offset of `buf[0]` (for messages).
    pub(super) base: u64,
    pub(super) eof: bool,
    /// The whole file is in `buf` from offset 0: a new pass just resets `pos`.
    pub(super) whole: bool,
    pub(super) fmt: Fmt,
    pub(super) max_pkt: usize,
    pub(super) last_ts: u64,
    pub(super) stats: ReadStats,
    pub(super) first_format: &'static str,
}

pub(super) type ParseResult<T> = Result<T, String>;

#[inline(always)]
pub(super) fn rd32(b: &[u8], be: bool) -> u32 {
    let a = [b[0], b[1], b[2], b[3]];
    if be {
        u32::from_be_bytes(a)
    } else {
        u32::from_le_bytes(a)
    }
}

impl Reader {
    pub(super) fn open_file(path: &str, max_pkt: usize) -> ParseResult<Reader> {
        let mut f = File::open(path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => "no such file".to_string(),
            _ => format!("cannot open: {e}"),
        })?;
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
            Reader::chunked(f, CHUNK, max_pkt)
        };
        r.prime()?;
        Ok(r)
    }

    /// A reader over `f` from its current offset (the start), refilled
    /// `chunk` bytes at a time (files over [`CHUNK`]; small chunks in
    /// fuzzing). A record that does not fit in `chunk` bytes ends the
    /// pass as truncated. Call [`Reader::prime`] next.
    pub(super) fn chunked(f: File, chunk: usize, max_pkt: usize) -> Reader {
        Reader {
            file: Some(f),
            buf: vec![0u8; chunk],
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
    }

    /// A reader over bytes held in memory (small files, fuzzing).
    pub(super) fn from_bytes(data: Vec<u8>, max_pkt: usize) -> Reader {
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

    pub(super) fn format_name(&self) -> &'static str {
        self.first_format
    }

    /// Parse the file header and the blocks before the first packet, so
    /// that a bad file or link type is reported at open.
    pub(super) fn prime(&mut self) -> ParseResult<()> {
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
    pub(super) fn fill_if_needed(&mut self, n: usize) -> ParseResult<()> {
        if self.end - self.pos < n && !self.eof {
            self.refill(n)?;
        }
        Ok(())
    }

    /// Move the unread bytes to the front and read more. Returns false if
    /// no more bytes can come (end of file) and fewer than `n` are there.
    pub(super) fn refill(&mut self, n: usize) -> ParseResult<bool> {
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
    pub(super) fn skip(&mut self, total: u64, why: Why) -> ParseResult<()> {
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
    pub(super) fn next(&mut self) -> ParseResult<Option<(usize, usize, u64)>> {
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
    pub(super) fn rewind(&mut self) -> ParseResult<()> {
        self.fmt = Fmt::Start;
        // An SPB before the first EPB takes 0 as on the first pass, not
        // the last timestamp of the pass before.
        self.last_ts = 0;
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

    pub(super) fn off(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// Parse what starts at `pos`.
    pub(super) fn step(&mut self) -> ParseResult<Step> {
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
    pub(super) fn section_header(&mut self) -> ParseResult<Step> {
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

pub(super) fn link_err(l: Linktype) -> String {
    format!(
        "link type {l} ({}) is not supported: only Ethernet (1)",
        l.0
    )
}

// ---------------------------------------------------------------------------
// Replay pacing.
