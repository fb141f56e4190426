//! Writing a pcap/pcapng file: whole records into a large buffer, written out in chunks.

use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::time::Instant;

use crate::batch::Pkt;
use crate::counters::KernelStats;
use crate::port::{PortError, TxPort};

use super::*;

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
    pub(super) file: File,
    pub(super) buf: Vec<u8>,
    pub(super) format: WriteFormat,
    pub(super) path: String,
    pub(super) packets: u64,
    pub(super) bytes: u64,
    pub(super) snapped: u64,
    /// Records in `buf`, not yet written out.
    pub(super) buffered: u64,
    /// Records written out.
    pub(super) written: u64,
    /// Bytes of the file, buffered ones included.
    pub(super) file_len: u64,
    /// Bytes known to be in the file (written out by calls that succeeded).
    pub(super) on_disk: u64,
    pub(super) error: Option<String>,
}

impl PcapWriter {
    /// Create `path` and write the file header. The file is created
    /// exclusively and never through a symbolic link: an existing file is
    /// an error unless `replace` (see [`create_file`]).
    pub fn create(path: &str, format: WriteFormat, replace: bool) -> Result<PcapWriter, String> {
        let file = create_file(path, replace)?;
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
    pub(super) fn put32(&mut self, v: u32) {
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
    pub(super) fn whole_records(&self, limit: usize) -> (usize, u64) {
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

/// Open `path` to write a capture file into. It is created exclusively and
/// never through a symbolic link (`O_CREAT|O_EXCL|O_NOFOLLOW`): an existing
/// file is refused, and so is a link planted at the name (by anyone who can
/// write to the directory: linerate runs as root), even with `replace`.
/// With `replace` an existing regular file is removed and a new one created
/// the same way (not truncated in place: a hard link to the old file keeps
/// its bytes, and a link planted between the two steps is refused). A
/// character device (`/dev/null`, `/dev/full`) is written in place: writing
/// there destroys nothing. Anything else (a directory, a FIFO that would
/// block until a reader comes, a block device) is refused. One-line errors
/// naming the file.
pub(crate) fn create_file(path: &str, replace: bool) -> Result<File, String> {
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let create = || {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)
            .map_err(|e| format!("{path}: cannot create: {e}"))
    };
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => create(),
        Err(e) => Err(format!("{path}: cannot create: {e}")),
        Ok(m) => {
            let t = m.file_type();
            if t.is_symlink() {
                Err(format!("{path}: is a symbolic link; not followed"))
            } else if t.is_char_device() {
                std::fs::OpenOptions::new()
                    .write(true)
                    .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                    .open(path)
                    .map_err(|e| format!("{path}: cannot open: {e}"))
            } else if !t.is_file() {
                Err(format!("{path}: exists and is not a regular file"))
            } else if !replace {
                Err(format!("{path}: exists; not overwritten"))
            } else {
                std::fs::remove_file(path).map_err(|e| format!("{path}: cannot replace: {e}"))?;
                create()
            }
        }
    }
}

pub(super) fn realtime_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// TX of a write-mode port.
pub(super) struct PcapTx {
    pub(super) w: PcapWriter,
    pub(super) calls: u32,
    pub(super) last_out: Instant,
    pub(super) uri: String,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file::tests::dir;
    use std::os::unix::fs::FileTypeExt;

    fn s(p: &std::path::Path) -> &str {
        p.to_str().unwrap()
    }

    /// A writer with one record, written out and closed.
    fn write_one(path: &str, replace: bool) -> Result<u64, String> {
        let mut w = PcapWriter::create(path, WriteFormat::PcapNg, replace)?;
        w.write_record(&[7u8; 60], 60, 1)?;
        w.write_out()?;
        Ok(w.file_len())
    }

    #[test]
    fn an_existing_file_is_refused_and_kept() {
        let d = dir("pcapw-exists");
        let f = d.join("a.pcapng");
        std::fs::write(&f, b"earlier capture").unwrap();
        for format in [WriteFormat::PcapNg, WriteFormat::Pcap] {
            let e = PcapWriter::create(s(&f), format, false).err().unwrap();
            assert_eq!(e, format!("{}: exists; not overwritten", f.display()));
        }
        assert_eq!(std::fs::read(&f).unwrap(), b"earlier capture");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_symlink_at_the_name_is_not_followed_even_when_replacing() {
        let d = dir("pcapw-link");
        let victim = d.join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        let link = d.join("out.pcapng");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        // A dangling link (the target would be created through it) too.
        let dangling = d.join("dangling.pcapng");
        std::os::unix::fs::symlink(d.join("made-through-link"), &dangling).unwrap();
        for l in [&link, &dangling] {
            for replace in [false, true] {
                let e = write_one(s(l), replace).unwrap_err();
                assert!(e.contains("symbolic link") && !e.contains('\n'), "{e}");
                assert!(std::fs::symlink_metadata(l)
                    .unwrap()
                    .file_type()
                    .is_symlink());
            }
        }
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        assert!(!d.join("made-through-link").exists());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn replace_makes_a_new_file_and_a_hard_link_keeps_the_old_bytes() {
        let d = dir("pcapw-replace");
        let f = d.join("a.pcapng");
        let other = d.join("hardlink");
        std::fs::write(&f, b"old").unwrap();
        std::fs::hard_link(&f, &other).unwrap();
        let len = write_one(s(&f), true).unwrap();
        assert_eq!(std::fs::metadata(&f).unwrap().len(), len);
        assert!(len > 60);
        assert_eq!(std::fs::read(&other).unwrap(), b"old");
        // A new file is created without `replace` too.
        let g = d.join("new.pcapng");
        assert_eq!(write_one(s(&g), false).unwrap(), len);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn devices_are_written_in_place_other_kinds_refused() {
        // /dev/null: written, nothing destroyed; it stays a device.
        write_one("/dev/null", false).unwrap();
        assert!(std::fs::metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_char_device());
        let d = dir("pcapw-kinds");
        let e = write_one(s(&d), true).unwrap_err();
        assert!(e.contains("not a regular file"), "{e}");
        let fifo = d.join("fifo");
        let c = std::ffi::CString::new(s(&fifo)).unwrap();
        // SAFETY: c is a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        // Refused at once, not a wait for a reader.
        let e = write_one(s(&fifo), true).unwrap_err();
        assert!(e.contains("not a regular file"), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
