//! The pcapng consumer of a capture worker: one series of files per worker,
//! `DIR/NAME-wW-NNNN.pcapng` (W the worker, NNNN the file number from
//! 0000), rotated by size and/or time.
//!
//! Records are built by [`linerate_io::pcap::PcapWriter`] (SHB, one
//! Ethernet IDB with `if_tsresol=9`, i.e. nanosecond timestamps, one EPB
//! per packet with the original length kept when the ring slot truncated
//! the frame). Records go whole into the writer's 4 MiB buffer, which is
//! written out (one `write(2)`) when it fills, at least every
//! `flush_interval` ([`CaptureWriter::tick`], once per batch), on rotation
//! and at the end ([`CaptureWriter::finish`], also run on drop). A file on
//! disk therefore always ends on a record boundary, even if the process is
//! killed between two writes.
//!
//! **Acknowledged** records: a record counts in
//! [`CaptureWriter::acknowledged`] only once the `write(2)` that carries it
//! has returned, i.e. it is in the file (in the page cache, so it survives
//! the end of the process, though not a power cut: no fsync per write).
//! A capture stopped by SIGINT/SIGTERM loses none of them, and every
//! record still in the buffer is written out by `finish`.
//!
//! [`merge_files`] combines the workers' files into one in timestamp order
//! once the capture has ended (`linerate capture --merge`).
//!
//! **No earlier capture is destroyed.** Every file is created exclusively
//! and never through a symbolic link ([`PcapWriter::create`]); the names a
//! capture may write restart at `-w0-0000` every run, so
//! [`check_existing`] refuses, before any traffic, a directory that already
//! holds files of that series (any worker, any number) or the merged file,
//! unless [`RotateConfig::overwrite`] (`--overwrite`), which replaces them
//! one by one as the run reaches them (a symbolic link is refused even
//! then). This is stricter than `tcpdump -w`, which truncates silently.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use linerate_io::pcap::{PcapWriter, WriteFormat};

/// Settings of a worker's file series.
#[derive(Clone, Debug)]
pub struct RotateConfig {
    pub dir: PathBuf,
    /// File name prefix (`capture`).
    pub name: String,
    pub worker: usize,
    /// Start a new file before one would exceed this many bytes.
    pub max_bytes: Option<u64>,
    /// Start a new file when one has been open this long.
    pub max_age: Option<Duration>,
    /// Write buffered records out at least this often (100 ms).
    pub flush_interval: Duration,
    /// Replace existing files of the series (and the merged file) instead
    /// of refusing the run (see the module docs).
    pub overwrite: bool,
}

impl RotateConfig {
    pub fn new(dir: impl Into<PathBuf>, name: &str, worker: usize) -> RotateConfig {
        RotateConfig {
            dir: dir.into(),
            name: name.to_string(),
            worker,
            max_bytes: None,
            max_age: None,
            flush_interval: Duration::from_millis(100),
            overwrite: false,
        }
    }
}

/// What a finished writer did.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct WriterReport {
    pub files: Vec<PathBuf>,
    pub records: u64,
    /// Records in the files (every file holds exactly these, whole).
    pub acknowledged: u64,
    /// The write error that stopped the writer (a full disk), if any: the
    /// files then end at the last acknowledged record.
    pub error: Option<String>,
}

/// A rotating pcapng writer (see the module docs).
pub struct CaptureWriter {
    cfg: RotateConfig,
    cur: Option<PcapWriter>,
    opened: Instant,
    last_flush: Instant,
    files: Vec<PathBuf>,
    /// Records of closed files (all written out).
    closed_records: u64,
    error: Option<String>,
}

/// The path of file `index` of worker `worker`.
pub fn file_path(dir: &Path, name: &str, worker: usize, index: usize) -> PathBuf {
    dir.join(format!("{name}-w{worker}-{index:04}.pcapng"))
}

/// The path of the merged file (`--merge`).
pub fn merged_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.pcapng"))
}

/// Is `file` a name of the series `name` ([`file_path`] of any worker and
/// index)?
fn in_series(file: &str, name: &str) -> bool {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    file.strip_prefix(name)
        .and_then(|r| r.strip_prefix("-w"))
        .and_then(|r| r.strip_suffix(".pcapng"))
        .and_then(|r| r.split_once('-'))
        .is_some_and(|(w, i)| digits(w) && digits(i))
}

/// Before a capture starts: refuse if `cfg.dir` holds a file this run may
/// write (a file of the series, of any worker; the merged file with
/// `merge`), unless `cfg.overwrite`; a symbolic link at such a name is
/// refused even then. One line naming the first such file. A directory
/// that does not exist yet holds nothing.
pub fn check_existing(cfg: &RotateConfig, merge: bool) -> Result<(), String> {
    let entries = match std::fs::read_dir(&cfg.dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("capture: {}: {e}", cfg.dir.display())),
    };
    let merged = format!("{}.pcapng", cfg.name);
    let mut taken: Vec<(PathBuf, bool)> = entries
        .filter_map(|e| e.ok())
        .filter(|e| {
            let f = e.file_name();
            let f = f.to_string_lossy();
            in_series(&f, &cfg.name) || (merge && f == merged)
        })
        .map(|e| (e.path(), e.file_type().is_ok_and(|t| t.is_symlink())))
        .filter(|(_, link)| *link || !cfg.overwrite)
        .collect();
    taken.sort();
    match taken.first() {
        None => Ok(()),
        Some((p, true)) => Err(format!(
            "capture: {} is a symbolic link; not followed (remove it, or choose another --name)",
            p.display()
        )),
        Some((p, false)) => Err(format!(
            "capture: {} exists (an earlier capture); not overwritten: --overwrite replaces it, or choose another --write directory or --name",
            p.display()
        )),
    }
}

impl CaptureWriter {
    /// Create the directory if needed and open the first file.
    pub fn new(cfg: RotateConfig) -> Result<CaptureWriter, String> {
        if cfg.max_bytes.is_some_and(|b| b < 4096) {
            return Err(format!(
                "capture: rotation size must be at least 4096 bytes (got {})",
                cfg.max_bytes.unwrap_or(0)
            ));
        }
        if cfg.max_age.is_some_and(|d| d.is_zero()) {
            return Err("capture: rotation time must be > 0".into());
        }
        std::fs::create_dir_all(&cfg.dir)
            .map_err(|e| format!("capture: {}: cannot create: {e}", cfg.dir.display()))?;
        let now = Instant::now();
        let mut w = CaptureWriter {
            cfg,
            cur: None,
            opened: now,
            last_flush: now,
            files: Vec::new(),
            closed_records: 0,
            error: None,
        };
        w.open_next()?;
        Ok(w)
    }

    fn open_next(&mut self) -> Result<(), String> {
        let path = file_path(
            &self.cfg.dir,
            &self.cfg.name,
            self.cfg.worker,
            self.files.len(),
        );
        let p = path.to_string_lossy().into_owned();
        let w = PcapWriter::create(&p, WriteFormat::PcapNg, self.cfg.overwrite)?;
        self.cur = Some(w);
        self.files.push(path);
        self.opened = Instant::now();
        Ok(())
    }

    fn close_current(&mut self) -> Result<(), String> {
        if let Some(mut w) = self.cur.take() {
            let r = w.write_out();
            self.closed_records += w.written_packets();
            r?;
        }
        Ok(())
    }

    fn rotate(&mut self) -> Result<(), String> {
        self.close_current()?;
        self.open_next()
    }

    /// Append one record (no syscall unless the buffer fills or the file
    /// rotates by size).
    #[inline]
    pub fn write(&mut self, data: &[u8], orig_len: usize, ts_ns: u64) -> Result<(), String> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        let r = self.write_inner(data, orig_len, ts_ns);
        if let Err(e) = &r {
            self.error = Some(e.clone());
        }
        r
    }

    fn write_inner(&mut self, data: &[u8], orig_len: usize, ts_ns: u64) -> Result<(), String> {
        if let (Some(max), Some(w)) = (self.cfg.max_bytes, self.cur.as_ref()) {
            let rec = 32 + data.len().div_ceil(4) as u64 * 4;
            // A file holds at least one record, however small the limit.
            if w.packets() > 0 && w.file_len() + rec > max {
                self.rotate()?;
            }
        }
        match self.cur.as_mut() {
            Some(w) => w.write_record(data, orig_len, ts_ns),
            None => Err("capture: writer closed".into()),
        }
    }

    /// Once per batch (one clock read): rotate by time and write out what
    /// is buffered every `flush_interval`.
    pub fn tick(&mut self, now: Instant) -> Result<(), String> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        let r = self.tick_inner(now);
        if let Err(e) = &r {
            self.error = Some(e.clone());
        }
        r
    }

    fn tick_inner(&mut self, now: Instant) -> Result<(), String> {
        if self
            .cfg
            .max_age
            .is_some_and(|a| now.saturating_duration_since(self.opened) >= a)
        {
            self.last_flush = now;
            return self.rotate();
        }
        if now.saturating_duration_since(self.last_flush) >= self.cfg.flush_interval {
            self.last_flush = now;
            if let Some(w) = self.cur.as_mut() {
                w.write_out()?;
            }
        }
        Ok(())
    }

    /// Records accepted by [`CaptureWriter::write`].
    pub fn records(&self) -> u64 {
        self.closed_records + self.cur.as_ref().map_or(0, |w| w.packets())
    }

    /// Records known to be in the files (see the module docs).
    pub fn acknowledged(&self) -> u64 {
        self.closed_records + self.cur.as_ref().map_or(0, |w| w.written_packets())
    }

    pub fn files(&self) -> &[PathBuf] {
        &self.files
    }

    /// Write everything out and close the file. Also after a write error:
    /// the report then says what the files hold and names the error.
    pub fn finish(mut self) -> WriterReport {
        let records = self.records();
        let r = self.close_current();
        WriterReport {
            files: std::mem::take(&mut self.files),
            records,
            acknowledged: self.closed_records,
            error: self.error.take().or(r.err()),
        }
    }
}

impl Drop for CaptureWriter {
    fn drop(&mut self) {
        // Dropped before `finish` and before it took any record: the run
        // failed to start (a bad --ctl path, ...). Its only file holds just
        // the header this run wrote; removed, so that the corrected run is
        // not refused for a file that holds no capture.
        let unused = self.cur.is_some() && self.files.len() == 1 && self.records() == 0;
        let _ = self.close_current();
        if unused {
            let _ = std::fs::remove_file(&self.files[0]);
        }
    }
}

/// One EPB of a file this module wrote: (timestamp ns, original length, data).
type Record = (u64, usize, Vec<u8>);

/// Reads the EPBs of a pcapng file written by [`CaptureWriter`] (little
/// endian, one IDB with nanosecond timestamps); other blocks are skipped.
struct EpbReader<R = std::io::BufReader<std::fs::File>> {
    path: PathBuf,
    r: R,
}

impl EpbReader {
    fn open(path: &Path) -> Result<EpbReader, String> {
        let f = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(EpbReader {
            path: path.to_path_buf(),
            r: std::io::BufReader::with_capacity(1 << 20, f),
        })
    }
}

impl<R: std::io::Read> EpbReader<R> {
    fn next(&mut self) -> Result<Option<Record>, String> {
        let bad = |what: &str| format!("{}: {what}", self.path.display());
        loop {
            let mut h = [0u8; 8];
            match self.r.read_exact(&mut h) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
                Err(e) => return Err(bad(&e.to_string())),
            }
            let t = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
            let len = u32::from_le_bytes([h[4], h[5], h[6], h[7]]) as usize;
            if len < 12 || !len.is_multiple_of(4) || len > (1 << 26) {
                return Err(bad(&format!("bad block length {len}")));
            }
            let mut b = vec![0u8; len - 8];
            self.r
                .read_exact(&mut b)
                .map_err(|e| bad(&format!("truncated block: {e}")))?;
            if t != 6 {
                continue; // SHB, IDB, ...
            }
            if b.len() < 24 {
                return Err(bad("short EPB"));
            }
            let w = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
            let ts = (u64::from(w(4)) << 32) | u64::from(w(8));
            let (cap, orig) = (w(12) as usize, w(16) as usize);
            if 20 + cap > b.len() - 4 {
                return Err(bad("EPB captured length beyond the block"));
            }
            return Ok(Some((ts, orig, b[20..20 + cap].to_vec())));
        }
    }
}

/// Fuzz body: arbitrary bytes as a worker's file read back by
/// [`merge_files`]: no panic, one-line errors, every record within the
/// input. Returns the number of records read.
pub fn fuzz_read(data: &[u8]) -> usize {
    let mut r = EpbReader {
        path: PathBuf::from("fuzz.pcapng"),
        r: data,
    };
    let mut n = 0;
    loop {
        match r.next() {
            Ok(Some((_, _, d))) => {
                assert!(d.len() + 32 <= data.len(), "record longer than the input");
                n += 1;
            }
            Ok(None) => return n,
            Err(e) => {
                assert!(!e.contains('\n'), "multi-line error: {e:?}");
                return n;
            }
        }
    }
}

/// Merge the workers' files into one pcapng file `out` in timestamp order
/// (records with equal timestamps keep the order of `inputs`), then remove
/// the inputs. An existing `out` is replaced only with `replace`. Returns
/// the number of records written. Runs once at the end of a capture, after
/// the workers stopped: the per-packet path writes per-worker files and
/// shares nothing.
pub fn merge_files(inputs: &[PathBuf], out: &Path, replace: bool) -> Result<u64, String> {
    let mut readers = inputs
        .iter()
        .map(|p| EpbReader::open(p))
        .collect::<Result<Vec<_>, _>>()?;
    let mut heads: Vec<Option<Record>> = readers
        .iter_mut()
        .map(|r| r.next())
        .collect::<Result<_, _>>()?;
    let o = out.to_string_lossy().into_owned();
    let mut w = PcapWriter::create(&o, WriteFormat::PcapNg, replace)?;
    let mut n = 0u64;
    loop {
        let pick = heads
            .iter()
            .enumerate()
            .filter_map(|(i, h)| h.as_ref().map(|r| (r.0, i)))
            .min();
        let Some((_, i)) = pick else { break };
        let (ts, orig, data) = heads[i].take().expect("picked a head");
        w.write_record(&data, orig, ts)?;
        n += 1;
        heads[i] = readers[i].next()?;
    }
    w.write_out()?;
    drop(w);
    for p in inputs {
        std::fs::remove_file(p).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_io::{Batch, OpenOptions};

    fn tmp(tag: &str) -> PathBuf {
        let p = std::env::temp_dir().join(format!("lr-capw-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        p
    }

    fn read_back(path: &Path) -> Vec<(Vec<u8>, u64)> {
        let uri = format!("pcap:{}", path.display());
        let mut port = linerate_io::open(&uri, &OpenOptions::default()).unwrap();
        let mut b = Batch::new(64);
        let mut out = vec![];
        loop {
            let n = port.rx.recv(&mut b).unwrap();
            for p in b.pkts() {
                out.push((p.bytes().to_vec(), p.ts_ns()));
            }
            port.rx.release(&mut b).unwrap();
            if n == 0 && port.rx.at_end() {
                break;
            }
        }
        out
    }

    #[test]
    fn rotates_by_size_and_keeps_every_record_with_ns_timestamps() {
        let dir = tmp("size");
        let mut cfg = RotateConfig::new(&dir, "cap", 3);
        cfg.max_bytes = Some(10_000);
        let mut w = CaptureWriter::new(cfg).unwrap();
        for i in 0..100u32 {
            let mut f = vec![0u8; 60 + i as usize];
            f[..4].copy_from_slice(&i.to_be_bytes());
            w.write(&f, f.len() + 7, 1_700_000_000_123_456_789 + i as u64)
                .unwrap();
        }
        // Closed files are written out; the current file's records wait in the buffer.
        assert!(w.acknowledged() < 100 && w.acknowledged() > 0);
        assert!(w.records() == 100);
        let r = w.finish();
        assert_eq!(r.error, None);
        assert_eq!(r.records, 100);
        assert_eq!(r.acknowledged, 100);
        assert!(r.files.len() > 1, "{:?}", r.files);
        let mut i = 0u32;
        for (k, f) in r.files.iter().enumerate() {
            assert_eq!(f, &file_path(&dir, "cap", 3, k));
            assert!(std::fs::metadata(f).unwrap().len() <= 10_000);
            for (bytes, ts) in read_back(f) {
                assert_eq!(&bytes[..4], &i.to_be_bytes());
                assert_eq!(bytes.len(), 60 + i as usize);
                assert_eq!(ts, 1_700_000_000_123_456_789 + i as u64);
                i += 1;
            }
        }
        assert_eq!(i, 100);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn rotates_by_time_and_acknowledges_after_write_out() {
        let dir = tmp("time");
        let mut cfg = RotateConfig::new(&dir, "t", 0);
        cfg.max_age = Some(Duration::from_millis(50));
        cfg.flush_interval = Duration::from_millis(10);
        let mut w = CaptureWriter::new(cfg).unwrap();
        let t0 = Instant::now();
        w.write(&[1u8; 64], 64, 1).unwrap();
        w.tick(t0 + Duration::from_millis(20)).unwrap();
        assert_eq!(w.acknowledged(), 1);
        assert_eq!(w.files().len(), 1);
        w.write(&[2u8; 64], 64, 2).unwrap();
        w.tick(t0 + Duration::from_millis(200)).unwrap();
        assert_eq!(w.files().len(), 2);
        assert_eq!(w.acknowledged(), 2);
        let files = w.files().to_vec();
        drop(w);
        assert_eq!(read_back(&files[0]).len(), 2);
        assert_eq!(read_back(&files[1]).len(), 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn merge_interleaves_workers_by_timestamp_and_keeps_lengths() {
        let dir = tmp("merge");
        let mut files = vec![];
        for wk in 0..3usize {
            let mut w = CaptureWriter::new(RotateConfig::new(&dir, "m", wk)).unwrap();
            // Worker wk has timestamps wk, wk+3, wk+6, ...; frame byte 0 = ts.
            for k in 0..50u64 {
                let ts = wk as u64 + 3 * k;
                let f = vec![ts as u8; 60 + wk];
                w.write(&f, f.len() + 100, 1_000 + ts).unwrap();
            }
            files.extend(w.finish().files);
        }
        let out = dir.join("m.pcapng");
        assert_eq!(merge_files(&files, &out, false).unwrap(), 150);
        for f in &files {
            assert!(!f.exists(), "input {} removed", f.display());
        }
        let recs = read_back(&out);
        assert_eq!(recs.len(), 150);
        for (i, (bytes, ts)) in recs.iter().enumerate() {
            assert_eq!(*ts, 1_000 + i as u64);
            assert_eq!(bytes[0], i as u8);
            assert_eq!(bytes.len(), 60 + i % 3);
        }
        // The original length survives the merge.
        let mut r = EpbReader::open(&out).unwrap();
        let (_, orig, data) = r.next().unwrap().unwrap();
        assert_eq!(orig, data.len() + 100);
        // A truncated input is an error naming the file, not a panic.
        let cut = dir.join("cut.pcapng");
        let b = std::fs::read(&out).unwrap();
        std::fs::write(&cut, &b[..b.len() - 10]).unwrap();
        let e = merge_files(std::slice::from_ref(&cut), &dir.join("x.pcapng"), false).unwrap_err();
        assert!(e.contains("cut.pcapng") && e.contains("truncated"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_earlier_series_is_refused_before_the_run_unless_overwrite() {
        let dir = tmp("again");
        let cfg = RotateConfig::new(&dir, "cap", 0);
        // A directory not made yet, or holding only other names: nothing to refuse.
        check_existing(&cfg, true).unwrap();
        std::fs::create_dir_all(&dir).unwrap();
        for other in [
            "cap.pcap",
            "cap-w1-x.pcapng",
            "capx-w0-0000.pcapng",
            "cap-w-0000.pcapng",
        ] {
            std::fs::write(dir.join(other), b"x").unwrap();
        }
        check_existing(&cfg, true).unwrap();
        // A file of another worker of the series (an earlier run with more
        // workers) is refused, naming the file and --overwrite.
        let earlier = file_path(&dir, "cap", 3, 12);
        std::fs::write(&earlier, b"earlier").unwrap();
        let e = check_existing(&cfg, false).unwrap_err();
        assert!(
            e.contains(&earlier.display().to_string()) && e.contains("--overwrite"),
            "{e}"
        );
        assert!(!e.contains('\n'));
        // The writer itself refuses its first file too (a file that appears
        // after the check), and leaves it alone.
        let first = file_path(&dir, "cap", 0, 0);
        std::fs::write(&first, b"earlier").unwrap();
        let e = CaptureWriter::new(cfg.clone()).err().unwrap();
        assert!(e.contains("exists; not overwritten"), "{e}");
        assert_eq!(std::fs::read(&first).unwrap(), b"earlier");
        // With --overwrite the files are replaced.
        let over = RotateConfig {
            overwrite: true,
            ..cfg.clone()
        };
        check_existing(&over, false).unwrap();
        let mut w = CaptureWriter::new(over.clone()).unwrap();
        w.write(&[1u8; 60], 60, 1).unwrap();
        drop(w.finish());
        assert_eq!(read_back(&first).len(), 1);
        // The merged file counts only with --merge.
        std::fs::remove_file(&earlier).unwrap();
        std::fs::remove_file(&first).unwrap();
        let merged = merged_path(&dir, "cap");
        std::fs::write(&merged, b"earlier").unwrap();
        check_existing(&cfg, false).unwrap();
        let e = check_existing(&cfg, true).unwrap_err();
        assert!(e.contains("cap.pcapng"), "{e}");
        // A symbolic link at a name of the series: refused even with --overwrite.
        std::fs::remove_file(&merged).unwrap();
        let victim = dir.join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        std::os::unix::fs::symlink(&victim, &first).unwrap();
        let e = check_existing(&over, false).unwrap_err();
        assert!(e.contains("symbolic link"), "{e}");
        assert!(CaptureWriter::new(over).is_err());
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_writer_dropped_unused_leaves_no_file() {
        let dir = tmp("unused");
        let w = CaptureWriter::new(RotateConfig::new(&dir, "u", 0)).unwrap();
        let f = w.files()[0].clone();
        assert!(f.exists());
        drop(w);
        assert!(
            !f.exists(),
            "a header-only file of a run that never started"
        );
        // One that took a record keeps it, also when dropped unfinished.
        let mut w = CaptureWriter::new(RotateConfig::new(&dir, "u", 0)).unwrap();
        w.write(&[1u8; 60], 60, 1).unwrap();
        drop(w);
        assert_eq!(read_back(&f).len(), 1);
        // A finished one with no record keeps its (empty) file.
        let w = CaptureWriter::new(RotateConfig::new(&dir, "v", 0)).unwrap();
        let r = w.finish();
        assert!(r.files[0].exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn bad_settings_are_one_line_errors() {
        let mut cfg = RotateConfig::new(tmp("bad"), "x", 0);
        cfg.max_bytes = Some(10);
        let e = CaptureWriter::new(cfg).err().unwrap();
        assert!(e.contains("rotation size"), "{e}");
        let cfg = RotateConfig::new("/proc/nope/dir", "x", 0);
        let e = CaptureWriter::new(cfg).err().unwrap();
        assert!(e.contains("/proc/nope/dir"), "{e}");
    }
}
