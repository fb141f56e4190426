//! Bad command lines, ports and files get a one-line error naming the
//! problem and a non-zero exit; nothing panics.

use std::process::Command;

mod support;
use support::{require_tool, TempDir};

fn run(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

fn one_line_error(args: &[&str], needle: &str) {
    let (code, err) = run(args);
    assert_eq!(code, 1, "{args:?}: exit code; stderr: {err}");
    assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{args:?}: want one line, got: {err}");
    assert!(lines[0].starts_with("linerate: error: "), "{err}");
    assert!(
        lines[0].contains(needle),
        "{args:?}: '{needle}' not in: {err}"
    );
}

#[test]
fn unknown_scheme() {
    one_line_error(&["fwd", "foo:x", "mem:b"], "unknown scheme 'foo'");
}

#[test]
fn missing_interface() {
    one_line_error(
        &["fwd", "afpacket:nosuchif0", "mem:b?sink"],
        "no interface named 'nosuchif0'",
    );
    one_line_error(
        &["fwd", "afxdp:nosuchif0", "mem:b?sink"],
        "no interface named 'nosuchif0'",
    );
    one_line_error(
        &["fwd", "--mode", "xdp", "nosuchif0", "nosuchif1"],
        "no interface named 'nosuchif0'",
    );
}

#[test]
fn unknown_parameter_and_bad_values() {
    one_line_error(
        &["fwd", "afpacket:lo?rnig=v3", "mem:b?sink"],
        "unknown parameter 'rnig'",
    );
    one_line_error(
        &["fwd", "mem:a?source=64", "mem:b?sink", "--batch", "0"],
        "--batch 0",
    );
    one_line_error(
        &[
            "fwd",
            "mem:a?source=64",
            "mem:b?sink",
            "--rewrite-a2b",
            "02:00:00:00:00:01",
        ],
        "expected DST/SRC",
    );
}

#[test]
fn garbage_pcap_file() {
    let tmp = TempDir::new("garbage");
    let dir = tmp.0.clone();
    let f = dir.join("garbage.pcap");
    std::fs::write(
        &f,
        b"this is not a capture file, just some text of some length....",
    )
    .unwrap();
    let uri = format!("pcap:{}", f.display());
    one_line_error(&["fwd", &uri, "mem:b?sink"], "garbage.pcap");
    let empty = dir.join("empty.pcap");
    std::fs::write(&empty, b"").unwrap();
    let uri = format!("pcap:{}", empty.display());
    one_line_error(&["fwd", &uri, "mem:b?sink"], "empty.pcap");
}

#[test]
fn pcap_replay_through_fwd_is_unchanged() {
    // Write a capture with the pcap port (through fwd from the mem source),
    // then replay it through fwd into a second file: identical records.
    let tmp = TempDir::new("replay");
    let dir = tmp.0.clone();
    let a = dir.join("a.pcapng");
    let b = dir.join("b.pcapng");
    let out = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args([
            "fwd",
            "mem:src?source=128",
            &format!("pcap:{}", a.display()),
            "--duration",
            "0.2",
            "--quiet",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args([
            "fwd",
            &format!("pcap:{}", a.display()),
            &format!("pcap:{}", b.display()),
            "--quiet",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().last().unwrap()).unwrap();
    let n = v["directions"][0]["forwarded"].as_u64().unwrap();
    assert!(n > 0);
    assert_eq!(v["directions"][0]["received"].as_u64().unwrap(), n);
    // Same packets in the same order, read back with the pcap port.
    let read = |p: &std::path::Path| -> Vec<Vec<u8>> {
        let mut port =
            linerate_io::open(&format!("pcap:{}", p.display()), &Default::default()).unwrap();
        let mut b = linerate_io::Batch::new(256);
        let mut v = Vec::new();
        loop {
            let k = port.rx.recv(&mut b).unwrap();
            v.extend(b.pkts().iter().map(|p| p.bytes().to_vec()));
            port.rx.release(&mut b).unwrap();
            if k == 0 && port.rx.at_end() {
                break;
            }
        }
        v
    };
    let (ra, rb) = (read(&a), read(&b));
    assert_eq!(ra.len() as u64, n);
    assert_eq!(ra, rb);
}

#[test]
fn trace_http_bad_options() {
    one_line_error(
        &["trace", "http", "/tmp/x.pcapng", "--servers", "0"],
        "servers 0 out of range",
    );
    one_line_error(
        &["trace", "http", "/tmp/x.pcapng", "--pareto-shape", "0.5"],
        "pareto shape 0.5",
    );
    one_line_error(
        &["trace", "http", "/nonexistent-dir/x.pcapng"],
        "/nonexistent-dir/x.pcapng",
    );
}

/// `linerate trace http OUT` never replaces an existing OUT unless
/// --overwrite, and never writes through a symbolic link.
#[test]
fn trace_http_keeps_an_existing_file_unless_overwrite() {
    let tmp = TempDir::new("trace-again");
    let f = tmp.join("t.pcapng");
    std::fs::write(&f, b"earlier").unwrap();
    let name = f.to_str().unwrap();
    let small = ["--connections", "5", "--min-size", "2000"];
    one_line_error(
        &[&["trace", "http", name][..], &small].concat(),
        "t.pcapng: exists; not overwritten (--overwrite replaces it)",
    );
    assert_eq!(std::fs::read(&f).unwrap(), b"earlier");
    let link = tmp.join("l.pcapng");
    std::os::unix::fs::symlink(&f, &link).unwrap();
    one_line_error(
        &[
            &["trace", "http", link.to_str().unwrap(), "--overwrite"][..],
            &small,
        ]
        .concat(),
        "l.pcapng: is a symbolic link; not followed",
    );
    assert_eq!(std::fs::read(&f).unwrap(), b"earlier");
    let (code, err) = run(&[&["trace", "http", name, "--overwrite"][..], &small].concat());
    assert_eq!(code, 0, "{err}");
    assert!(std::fs::read(&f).unwrap().len() > 1000);
}

/// `linerate trace http` writes a file that tshark reads without an error,
/// with the packets and connections its ground truth states, and that the
/// capture layer's http analyser fully decodes from the pcap port.
#[test]
fn trace_http_file_reads_back() {
    let tmp = TempDir::new("trace");
    let dir = tmp.0.clone();
    let f = dir.join("t.pcapng");
    let exe = env!("CARGO_BIN_EXE_linerate");
    let o = Command::new(exe)
        .args(["trace", "http", f.to_str().unwrap(), "--connections", "200"])
        .args(["--seed", "5", "--json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let truth: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let packets = truth["packets"].as_u64().unwrap();
    assert_eq!(truth["connections"], 200);
    let t = Command::new(require_tool("tshark"))
        .args(["-r", f.to_str().unwrap(), "-q", "-z", "conv,tcp"])
        .output()
        .expect("run tshark");
    let s = String::from_utf8_lossy(&t.stdout);
    let e = String::from_utf8_lossy(&t.stderr).to_lowercase();
    assert!(t.status.success(), "tshark: {s} {e}");
    assert!(
        !e.contains("error") && !e.contains("malformed"),
        "tshark: {e}"
    );
    let convs = s.lines().filter(|l| l.contains("<->")).count();
    assert_eq!(convs, 200, "{s}");
    let o = Command::new(exe)
        .args(["capture", &format!("pcap:{}", f.display())])
        .args(["--analyser", "http", "--json", "--quiet"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    let v: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    let t = &v["totals"];
    assert_eq!(t["received"].as_u64(), Some(packets), "{v}");
    assert_eq!(t["events"]["http_pair"].as_u64(), Some(200), "{v}");
}

#[test]
fn bench_bad_times_are_one_line_errors() {
    // Each would have panicked converting to a Duration (negative, NaN).
    one_line_error(
        &["bench", "--overload", "--duration=-1"],
        "--duration -1: must be over 0",
    );
    one_line_error(
        &["bench", "--warmup", "nan"],
        "--warmup NaN: must be 0 to 3600",
    );
    one_line_error(&["bench", "--overload", "--warmup=-2"], "--warmup -2");
}

#[test]
fn bench_vm_of_a_dut_that_does_not_run_in_a_guest_is_a_one_line_error() {
    one_line_error(
        &["bench", "--dut", "vm:ovs-afxdp"],
        "--dut vm:ovs-afxdp: ovs-afxdp does not run in a guest (these do: vm:linux-bridge,",
    );
}

#[test]
fn bench_unreadable_history_is_a_one_line_error_before_any_bed() {
    // A directory where the history file should be: the run ends before
    // it builds a bed, not after minutes of measuring.
    one_line_error(
        &["bench", "--dut", "linux-bridge", "--history", "/"],
        "history /: Is a directory",
    );
}
