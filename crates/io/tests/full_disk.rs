//! Writers on a full disk (a tmpfs of 64 KiB the test mounts): the bench
//! history keeps only whole lines, a whole-file write leaves the old file,
//! a capture file holds exactly its acknowledged records. Needs root (to
//! mount) and tshark; fails without.

use linerate_io::file::{append_line, write_whole};
use linerate_io::pcap::{PcapWriter, WriteFormat};
use std::process::Command;

use linerate_testkit::{require_tool, TempDir, Tmpfs};

#[test]
fn appended_lines_and_whole_files_survive_a_full_disk() {
    let td = TempDir::new("full-io");
    let mnt = Tmpfs::mount(td.join("mnt"), "64k");
    // A whole file written while there is room; the disk is filled after.
    let r = mnt.0.join("r.json");
    write_whole(&r, b"{\"old\":1}\n").unwrap();
    let h = mnt.0.join("history.jsonl");
    let line = format!("{{\"run\":\"{}\"}}", "x".repeat(1000));
    let mut ok = 0;
    let err = loop {
        match append_line(&h, &line) {
            Ok(()) => ok += 1,
            Err(e) => break e,
        }
        assert!(ok < 1000, "the disk never filled");
    };
    assert!(
        err.contains("No space left") && !err.contains('\n'),
        "{err}"
    );
    let text = std::fs::read_to_string(&h).unwrap();
    assert_eq!(text.lines().count(), ok, "only whole lines");
    assert!(text.ends_with("}\n"));
    assert!(text.lines().all(|l| l == line));
    // The disk is full: a whole-file write over an existing file fails and
    // leaves it as it was, with no temporary file behind.
    let e = write_whole(&r, &vec![b' '; 32 << 10]).unwrap_err();
    assert!(e.contains("No space left"), "{e}");
    assert_eq!(std::fs::read(&r).unwrap(), b"{\"old\":1}\n");
    let names: Vec<String> = std::fs::read_dir(&mnt.0)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.starts_with('.')), "{names:?}");
}

#[test]
fn a_capture_file_on_a_full_disk_holds_its_acknowledged_records() {
    require_tool("tshark");
    let td = TempDir::new("full-pcap");
    let mnt = Tmpfs::mount(td.join("mnt"), "64k");
    for format in [WriteFormat::PcapNg, WriteFormat::Pcap] {
        let f = mnt.0.join("w.cap");
        let mut w = PcapWriter::create(f.to_str().unwrap(), format, false).unwrap();
        let frame = [0x5au8; 300];
        let mut n = 0u64;
        // Write out every 7 records: most writes fit, the last one only in
        // part, and that part must be cut back to a record boundary.
        let err = loop {
            if let Err(e) = w.write_record(&frame, frame.len(), 1_000 + n) {
                break e;
            }
            n += 1;
            if n.is_multiple_of(7) {
                if let Err(e) = w.write_out() {
                    break e;
                }
            }
            assert!(n < 10_000, "the disk never filled");
        };
        assert!(err.contains("No space left"), "{err}");
        // Sticky.
        assert!(w.write_record(&frame, frame.len(), 0).is_err());
        let ack = w.written_packets();
        drop(w);
        let out = Command::new("tshark")
            .arg("-r")
            .arg(&f)
            .args(["-T", "fields", "-e", "frame.len"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && !stderr.lines().any(|l| !l.contains("Running as")),
            "{format:?}: {stderr}"
        );
        let got = String::from_utf8_lossy(&out.stdout).lines().count() as u64;
        assert!(ack > 0);
        assert_eq!(got, ack, "{format:?}: records in the file = acknowledged");
        std::fs::remove_file(&f).unwrap();
    }
}
