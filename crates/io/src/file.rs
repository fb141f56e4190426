//! Writing whole files so that an error (a full disk, `/dev/full`, a
//! removed directory) never leaves a half-written one behind.
//!
//! - [`write_whole`]: a report, a JSON or CSV file written in one go goes
//!   to a temporary file next to it, which is renamed over the target only
//!   once every byte is written: the target holds either its old content or
//!   the whole new one. A target that is not a regular file (a device such
//!   as `/dev/full` or `/dev/stdout`, a FIFO) is written directly.
//! - [`append_line`]: one line appended to a log-like file (the bench
//!   history); a failed write is cut back off, so the file keeps only whole
//!   lines.
//!
//! Capture files, written record by record over a long run, keep their own
//! discipline in [`crate::pcap::PcapWriter`] (cut back to the last whole
//! record on a failed write).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// A one-line error naming the file.
fn err(path: &Path, e: std::io::Error) -> String {
    format!("{}: {e}", path.display())
}

/// Is `path` to be written in place: something other than a regular file
/// (a device, a FIFO, a socket), a name under `/dev` or `/proc`
/// (`/dev/stdout` is a symlink to `/proc/self/fd/1`, which may well be a
/// regular file: the shell's `> out.csv`; a rename there would replace the
/// link, and what the process writes to its stdout would go to a file no
/// longer named), or a symlink that leads nowhere yet?
fn in_place(path: &Path) -> bool {
    if path.starts_with("/dev") || path.starts_with("/proc") {
        return true;
    }
    match std::fs::metadata(path) {
        Ok(m) => {
            let t = m.file_type();
            t.is_char_device() || t.is_block_device() || t.is_fifo() || t.is_socket()
        }
        Err(_) => std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()),
    }
}

/// Where a whole-file write lands: a symlink's target (the link stays a
/// link), else the path itself.
fn real_target(path: &Path) -> PathBuf {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => {
            std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
        }
        _ => path.to_path_buf(),
    }
}

/// The temporary sibling of `path`: same directory (so the rename is
/// atomic), a name no other writer uses.
fn tmp_path(path: &Path) -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = format!(
        ".{name}.tmp-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    );
    path.with_file_name(tmp)
}

/// Write `bytes` as the whole content of `path`: all of it or, on an error,
/// nothing (the old content, if any, stays). Errors are one line naming the
/// file.
pub fn write_whole(path: &Path, bytes: &[u8]) -> Result<(), String> {
    if in_place(path) {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(|e| err(path, e))?;
        return f.write_all(bytes).map_err(|e| err(path, e));
    }
    let shown = path;
    let path = &real_target(path);
    let tmp = tmp_path(path);
    let mode = std::fs::metadata(path)
        .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o7777)
        .unwrap_or(0o644);
    let r = (|| -> std::io::Result<()> {
        let mut f: File = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)?;
        f.write_all(bytes)?;
        // On the disk before the rename makes it the file: a crash leaves
        // the old file or the whole new one, never an empty one.
        f.sync_data()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = r {
        let _ = std::fs::remove_file(&tmp);
        return Err(err(shown, e));
    }
    Ok(())
}

/// Append `line` and a newline to `path` (created if missing) in one
/// write; on an error the file is cut back to its old length, so it holds
/// only whole lines.
pub fn append_line(path: &Path, line: &str) -> Result<(), String> {
    let mut f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| err(path, e))?;
    let before = f.metadata().map_err(|e| err(path, e))?.len();
    let mut buf = Vec::with_capacity(line.len() + 1);
    buf.extend_from_slice(line.as_bytes());
    buf.push(b'\n');
    // One write of the whole line: lines appended at once do not interleave.
    if let Err(e) = f.write_all(&buf) {
        if f.metadata().is_ok_and(|m| m.file_type().is_file()) {
            let _ = f.set_len(before);
        }
        return Err(err(path, e));
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A fresh, empty directory for test `tag` (unique tags per test).
    pub(crate) fn dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("lr-file-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn whole_files_replace_or_stay() {
        let d = dir("whole");
        let p = d.join("r.json");
        write_whole(&p, b"old\n").unwrap();
        write_whole(&p, b"new content\n").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new content\n");
        // No temporary file is left behind.
        assert_eq!(std::fs::read_dir(&d).unwrap().count(), 1);
        // A directory that is gone: an error naming the file, nothing made.
        let e = write_whole(&d.join("no/such/x.json"), b"x").unwrap_err();
        assert!(e.contains("no/such/x.json") && !e.contains('\n'), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_symlink_stays_a_link_and_dev_paths_are_written_in_place() {
        let d = dir("link");
        let real = d.join("real.json");
        let link = d.join("link.json");
        write_whole(&real, b"old\n").unwrap();
        std::os::unix::fs::symlink(&real, &link).unwrap();
        write_whole(&link, b"new\n").unwrap();
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read(&real).unwrap(), b"new\n");
        assert_eq!(std::fs::read_dir(&d).unwrap().count(), 2);
        // /dev/stdout (a link to /proc/self/fd/1, maybe a regular file):
        // written through, the link left alone.
        assert!(in_place(Path::new("/dev/stdout")));
        assert!(in_place(Path::new("/proc/self/fd/1")));
        assert!(!in_place(&real) && !in_place(&link));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn dev_full_is_a_one_line_error() {
        let e = write_whole(Path::new("/dev/full"), &[0u8; 100_000]).unwrap_err();
        assert!(e.starts_with("/dev/full: "), "{e}");
        assert!(e.contains("No space left"), "{e}");
        let e = append_line(Path::new("/dev/full"), "x").unwrap_err();
        assert!(e.contains("No space left"), "{e}");
    }

    #[test]
    fn appended_lines_are_whole() {
        let d = dir("append");
        let p = d.join("h.jsonl");
        append_line(&p, "a").unwrap();
        append_line(&p, "b").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "a\nb\n");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
