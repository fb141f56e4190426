//! Faults and bad input, end to end (issue "faults, bad input and honest
//! gates"):
//!
//! - files on a full disk (a small tmpfs the test mounts) and on /dev/full:
//!   a one-line error, a non-zero exit, and files that tshark reads cleanly
//!   holding exactly the acknowledged records;
//! - hostile control-socket clients (a 100 MB request line, a client sending
//!   a byte every 4 s, a dump-flows client that never reads, 50 clients at
//!   once) leave the switch forwarding with balanced counters, and SIGTERM
//!   is answered within 2 s;
//! - `ip link del` (and `set down`) of a port under traffic ends fwd (afxdp,
//!   afpacket), switch, capture, gen and count within 2 s with their final
//!   account and a one-line error;
//! - Lua: `sleep(math.huge)`, `while true do end` + SIGTERM and
//!   examples/ramp.lua each end within 2 s with one line.
//!
//! They need root, tshark and a kernel with veth and tmpfs (scripts/setup.sh
//! installs the tools) and fail without; namespaces, mounts and processes
//! are removed on drop, also when a test fails.

use linerate_measure::testbed::{Testbed, TestbedConfig};
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

mod support;
use support::*;

/// The command failed with exactly one line on stderr, a linerate error
/// that contains `want`; that line.
fn one_line_error(out: &Output, want: &str, what: &str) -> String {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{what}: succeeded; stderr: {err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{what}: one line on stderr, got: {err}");
    assert!(
        lines[0].starts_with("linerate: error: ") && lines[0].contains(want),
        "{what}: {}",
        lines[0]
    );
    lines[0].to_string()
}

/// An HTTP trace of about 25 MB (37 766 packets) in `dir`.
fn trace(dir: &TempDir) -> PathBuf {
    let p = dir.join("in.pcapng");
    linerate_ok(&[
        "trace",
        "http",
        "--connections",
        "2000",
        p.to_str().unwrap(),
    ]);
    p
}

// ---------------------------------------------------------------- files

#[test]
fn capture_onto_a_full_disk_keeps_exactly_the_acknowledged_records() {
    let td = TempDir::new("full-cap");
    let input = trace(&td);
    let mnt = Tmpfs::mount(td.join("mnt"), "2m");
    let out = Command::new(EXE)
        .args(["capture", &format!("pcap:{}", input.display()), "--write"])
        .arg(&mnt.0)
        .args(["--ted", "off", "--json", "-q"])
        .output()
        .unwrap();
    one_line_error(&out, "No space left on device", "capture onto 2 MB");
    let v = last_json(&String::from_utf8_lossy(&out.stdout));
    let ack = v["totals"]["acknowledged"].as_u64().unwrap();
    let written = v["totals"]["written"].as_u64().unwrap();
    assert!(
        ack > 1000 && ack < written,
        "acknowledged {ack} of {written}"
    );
    let files: Vec<PathBuf> = v["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| PathBuf::from(f.as_str().unwrap()))
        .collect();
    assert!(!files.is_empty());
    let in_files: u64 = files.iter().map(|f| tshark_count(f)).sum();
    assert_eq!(in_files, ack, "records in the files = acknowledged");
}

#[test]
fn gen_into_a_full_disk_keeps_exactly_the_acknowledged_records() {
    let td = TempDir::new("full-gen");
    let mnt = Tmpfs::mount(td.join("mnt"), "512k");
    let f = mnt.0.join("g.pcapng");
    let out = Command::new(EXE)
        .args(["gen", &format!("pcap:{}?mode=write", f.display())])
        .args(["--dst-ip", "10.0.0.2", "--count", "100000", "--json"])
        .output()
        .unwrap();
    one_line_error(&out, "No space left on device", "gen into 512 KB");
    let v = last_json(&String::from_utf8_lossy(&out.stdout));
    let ack = v["tx_kernel"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c[0] == "acknowledged_packets")
        .and_then(|c| c[1].as_u64())
        .expect("acknowledged_packets in tx_kernel");
    assert!(ack > 100 && ack < 100_000, "acknowledged {ack}");
    assert_eq!(tshark_count(&f), ack);
}

#[test]
fn dev_full_is_a_one_line_error_for_every_writer() {
    let td = TempDir::new("devfull");
    let input = trace(&td);
    let inp = format!("pcap:{}", input.display());
    // A capture file.
    let out = linerate(&[
        "gen",
        "pcap:/dev/full?mode=write",
        "--dst-ip",
        "10.0.0.2",
        "--count",
        "10",
        "--json",
    ]);
    one_line_error(
        &out,
        "/dev/full: write error: No space left",
        "gen to /dev/full",
    );
    let out = linerate(&["trace", "http", "--connections", "10", "/dev/full"]);
    one_line_error(&out, "No space left", "trace to /dev/full");
    // A CSV.
    let ex = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/experiment-data.toml"
    );
    let out = linerate(&["experiment", ex, "--csv", "/dev/full"]);
    one_line_error(
        &out,
        "--csv /dev/full: No space left",
        "experiment --csv /dev/full",
    );
    // Standard output (a JSON report, then the text one).
    for json in [true, false] {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let mut c = Command::new(EXE);
        c.args(["count", &inp]);
        if json {
            c.arg("--json");
        }
        let out = c.stdout(full).stderr(Stdio::piped()).output().unwrap();
        if !json {
            // Without --json, count names its port on stderr first.
            let err = String::from_utf8_lossy(&out.stderr);
            let last = err.lines().last().unwrap_or("");
            assert!(
                !out.status.success() && last.contains("writing to standard output: No space left"),
                "{err}"
            );
            assert!(!err.contains("panicked"), "{err}");
        } else {
            one_line_error(
                &out,
                "writing to standard output: No space left",
                "count --json > /dev/full",
            );
        }
    }
}

#[test]
fn reports_on_a_full_disk_are_whole_or_absent() {
    let td = TempDir::new("full-rep");
    let input = trace(&td);
    let mnt = Tmpfs::mount(td.join("mnt"), "64k");
    // Fill the disk but for a little room.
    let fill = vec![0u8; 60 << 10];
    let _ = std::fs::write(mnt.0.join("filler"), &fill);
    let dir = mnt.0.join("rep");
    let out = Command::new(EXE)
        .args([
            "count",
            &format!("pcap:{}", input.display()),
            "--json",
            "--out",
        ])
        .arg(&dir)
        .output()
        .unwrap();
    one_line_error(
        &out,
        "No space left on device",
        "count --out onto a full disk",
    );
    // Whatever was written is whole; no temporary file is left behind.
    for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        assert!(!name.starts_with('.'), "left behind: {name}");
        if name.ends_with(".json") {
            let t = std::fs::read_to_string(e.path()).unwrap();
            serde_json::from_str::<Value>(&t).unwrap_or_else(|err| panic!("{name}: {err}"));
        }
    }
}

// ------------------------------------------------------ control sockets

/// Send `line` on a new connection to `sock`; the reply as JSON.
fn ask(sock: &Path, line: &str) -> Value {
    let r = ctl_request(sock, line).unwrap_or_else(|| panic!("no answer to '{line}'"));
    serde_json::from_str(&r).unwrap_or_else(|e| panic!("'{r}': {e}"))
}

fn rx_packets(sock: &Path) -> u64 {
    let v = ask(sock, "dump-ports");
    v["ports"][0]["rx_packets"].as_u64().unwrap()
}

#[test]
fn hostile_control_clients_cannot_hold_the_switch() {
    let td = TempDir::new("ctl");
    let sock = td.join("sw.sock");
    // 200 000 rules: a dump-flows reply of tens of MB, far more than a
    // socket buffer holds, for the client that never reads.
    let mut flows = String::from("priority=1,in_port=1,actions=output:2\n");
    for i in 0..200_000u32 {
        flows.push_str(&format!(
            "priority=10,udp,nw_dst=10.{}.{}.{},tp_dst=9,actions=output:2\n",
            i >> 16,
            (i >> 8) & 255,
            i & 255
        ));
    }
    let f = td.write("flows.txt", &flows);
    let mut sw = Proc::from(
        Command::new(EXE)
            .args([
                "switch",
                "--port",
                "1=mem:a?source=64",
                "--port",
                "2=mem:b?sink",
            ])
            .args(["--poll", "wait", "--json", "-q", "--flows"])
            .arg(&f)
            .arg("--ctl")
            .arg(&sock)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    wait_until(
        Duration::from_secs(60),
        "the switch's control socket",
        || {
            sw.assert_running("switch");
            ctl_request(&sock, "cache-stats").is_some()
        },
    );
    let before = rx_packets(&sock);

    // A 100 MB request line: refused after the first MiB, connection closed.
    {
        let mut s = UnixStream::connect(&sock).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let chunk = vec![b'x'; 1 << 20];
        for _ in 0..100 {
            if s.write_all(&chunk).is_err() {
                break; // the switch closed the connection: as it should
            }
        }
        let mut reply = String::new();
        let _ = BufReader::new(&s).read_line(&mut reply);
        let v: Value =
            serde_json::from_str(reply.trim()).unwrap_or_else(|e| panic!("'{reply}': {e}"));
        assert_eq!(v["ok"], false);
        assert!(v["error"].as_str().unwrap().contains("longer than"), "{v}");
    }
    // A client that sends a byte every 4 s (it stays connected to the end).
    let slow = UnixStream::connect(&sock).unwrap();
    let slow_w = slow.try_clone().unwrap();
    let trickle = std::thread::spawn(move || {
        let mut w = slow_w;
        for b in b"dump-flows\n".iter() {
            if w.write_all(&[*b]).is_err() {
                return;
            }
            // The slowness under test, not a wait for readiness.
            std::thread::sleep(Duration::from_secs(4));
        }
    });
    // A client that asks for every flow and never reads the reply.
    let mut deaf = UnixStream::connect(&sock).unwrap();
    deaf.write_all(b"dump-flows\n").unwrap();
    // 50 clients at once, each answered.
    let hs: Vec<_> = (0..50)
        .map(|_| {
            let s = sock.clone();
            std::thread::spawn(move || ask(&s, "dump-ports"))
        })
        .collect();
    for h in hs {
        assert_eq!(h.join().unwrap()["ok"], true);
    }
    // Still forwarding, and rules can still be changed.
    let mid = rx_packets(&sock);
    assert!(mid > before, "the switch forwards ({before} -> {mid})");
    assert_eq!(
        ask(&sock, "add-flow priority=20,in_port=1,actions=output:2")["ok"],
        true
    );
    wait_until(Duration::from_secs(10), "more packets forwarded", || {
        rx_packets(&sock) > mid
    });

    // SIGTERM is answered within 2 s with a balanced account, while the slow
    // and the deaf clients are still connected.
    let t = Instant::now();
    sw.signal(libc::SIGTERM);
    let out = sw.wait_output(Duration::from_secs(10), "switch after SIGTERM");
    let dt = t.elapsed();
    assert!(dt < Duration::from_secs(2), "switch took {dt:?} to end");
    assert_ok(&out, "switch");
    let v = last_json(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(v["balanced"], true, "{v}");
    assert!(v["forwarded"].as_u64().unwrap() > 0);
    assert!(!sock.exists(), "the socket file is removed");
    drop(deaf);
    drop(slow);
    let _ = trickle.join();
}

#[test]
fn a_second_capture_does_not_take_over_a_live_control_socket() {
    let td = TempDir::new("ctl2");
    let sock = td.join("c.sock");
    let mut a = Proc::from(
        Command::new(EXE)
            .args(["capture", "mem:a?source=64", "--json", "-q", "--ctl"])
            .arg(&sock)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    wait_ctl(&mut a, &sock, "first capture");
    let out = Command::new(EXE)
        .args(["capture", "mem:b?source=64", "--json", "-q", "--ctl"])
        .arg(&sock)
        .output()
        .unwrap();
    one_line_error(
        &out,
        "another process is listening",
        "second capture on the same --ctl",
    );
    assert!(
        ctl_request(&sock, "stats").is_some(),
        "the first still answers"
    );
}

// ------------------------------------------------------ dead interfaces

/// A command under traffic in the test bed, then `how` done to `ifname` in
/// `ns`: the command ends within 2 s with its final account on stdout and a
/// one-line error naming the interface on stderr.
struct Doomed<'a> {
    bed: &'a Testbed,
    /// Where the command runs.
    ns: &'a str,
    args: Vec<String>,
    /// Where and what to remove (or set down).
    del_ns: &'a str,
    ifname: &'a str,
    down: bool,
}

impl Doomed<'_> {
    /// `ready(line)`: a stdout line shows the command under traffic.
    fn run(&self, ready: impl FnMut(&Value) -> bool, what: &str) -> Vec<Value> {
        let mut ready = ready;
        let args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        let mut p = spawn_in(self.ns, &args);
        let lines = p.stdout_lines();
        // Traffic into the bed from the generator's side.
        let gen_if = self.bed.info().gen.name.clone();
        let _traffic = if self.args[0] == "gen" {
            None
        } else {
            let g = spawn_in(
                self.bed.ns_gen(),
                &[
                    "gen",
                    &format!("afpacket:{gen_if}"),
                    "--dst-ip",
                    "10.0.1.2",
                    "--rate",
                    "20kpps",
                    "-q",
                ],
            );
            Some(g)
        };
        wait_line(
            &lines,
            Duration::from_secs(30),
            &format!("{what} under traffic"),
            |l| serde_json::from_str::<Value>(l).ok().filter(|v| ready(v)),
        );
        p.assert_running(what);
        let verb: Vec<&str> = if self.down {
            vec!["-n", self.del_ns, "link", "set", self.ifname, "down"]
        } else {
            vec!["-n", self.del_ns, "link", "del", self.ifname]
        };
        let st = Command::new("ip").args(&verb).status().unwrap();
        assert!(st.success(), "ip {}", verb.join(" "));
        let t = Instant::now();
        let out = p.wait_output(Duration::from_secs(10), what);
        let dt = t.elapsed();
        assert!(dt < Duration::from_secs(2), "{what}: took {dt:?} to notice");
        let line = one_line_error(&out, &format!("interface '{}'", self.ifname), what);
        // A deleted interface is set down first: either word may come.
        let words: &[&str] = if self.down {
            &["went down"]
        } else {
            &["is gone", "went down"]
        };
        assert!(words.iter().any(|w| line.contains(w)), "{what}: {line}");
        let mut rest: Vec<Value> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        // Lines the reader thread took before the exit.
        while let Ok(l) = lines.try_recv() {
            if let Ok(v) = serde_json::from_str(&l) {
                rest.push(v);
            }
        }
        rest
    }
}

fn bed() -> Testbed {
    require_root();
    Testbed::up(&TestbedConfig::default()).expect("test bed")
}

#[test]
fn fwd_afxdp_and_afpacket_end_when_their_interface_goes() {
    for kind in ["afxdp", "afpacket"] {
        let bed = bed();
        let (d0, d1) = (
            bed.info().dut_in.name.clone(),
            bed.info().dut_out.name.clone(),
        );
        let d = Doomed {
            bed: &bed,
            ns: bed.ns_dut(),
            args: [
                "fwd",
                &format!("{kind}:{d0}"),
                &format!("{kind}:{d1}"),
                "--json",
            ]
            .map(String::from)
            .to_vec(),
            del_ns: bed.ns_dut(),
            ifname: &d0,
            down: false,
        };
        let out = d.run(
            |v| v["a2b"]["rx_pps"].as_f64().is_some_and(|x| x > 0.0),
            &format!("fwd {kind}"),
        );
        let fin = out
            .iter()
            .rev()
            .find(|v| v.get("directions").is_some() || v.get("a2b").is_none());
        let fin = fin.unwrap_or_else(|| panic!("fwd {kind}: no final account in {out:?}"));
        let s = fin.to_string();
        assert!(
            s.contains("\"balanced\":true") && !s.contains("\"balanced\":false"),
            "{s}"
        );
    }
}

#[test]
fn switch_ends_when_an_output_port_goes() {
    let bed = bed();
    let (d0, d1) = (
        bed.info().dut_in.name.clone(),
        bed.info().dut_out.name.clone(),
    );
    let td = TempDir::new("sw-dead");
    let f = td.write("f", "priority=1,in_port=1,actions=output:2\n");
    let d = Doomed {
        bed: &bed,
        ns: bed.ns_dut(),
        args: vec![
            "switch".into(),
            "--port".into(),
            format!("1=afpacket:{d0}"),
            "--port".into(),
            format!("2=afpacket:{d1}"),
            "--flows".into(),
            f.display().to_string(),
            "--json".into(),
        ],
        // The output port: its TX half notices.
        del_ns: bed.ns_dut(),
        ifname: &d1,
        down: false,
    };
    let out = d.run(|v| v["fwd_pps"].as_f64().is_some_and(|x| x > 0.0), "switch");
    let fin = out.last().expect("a final account");
    assert_eq!(fin["balanced"], true, "{fin}");
    assert!(fin["received"].as_u64().unwrap() > 0, "{fin}");
}

#[test]
fn capture_gen_and_count_end_when_their_interface_goes() {
    // capture: the files stay whole.
    {
        let bed = bed();
        let d0 = bed.info().dut_in.name.clone();
        let td = TempDir::new("cap-dead");
        let d = Doomed {
            bed: &bed,
            ns: bed.ns_dut(),
            args: vec![
                "capture".into(),
                format!("afpacket:{d0}"),
                "--write".into(),
                td.path().display().to_string(),
                "--json".into(),
            ],
            del_ns: bed.ns_dut(),
            ifname: &d0,
            down: false,
        };
        let out = d.run(
            |v| v["totals"]["received"].as_u64().is_some_and(|x| x > 0),
            "capture",
        );
        let fin = out.last().unwrap();
        assert_eq!(fin["final"], true, "{fin}");
        let ack = fin["totals"]["acknowledged"].as_u64().unwrap();
        let files: u64 = fin["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| tshark_count(Path::new(f.as_str().unwrap())))
            .sum();
        assert!(ack > 0);
        assert_eq!(files, ack);
    }
    // gen: its report, then the error.
    {
        let bed = bed();
        let g0 = bed.info().gen.name.clone();
        let d = Doomed {
            bed: &bed,
            ns: bed.ns_gen(),
            args: [
                "gen",
                &format!("afpacket:{g0}"),
                "--dst-ip",
                "10.0.1.2",
                "--rate",
                "20kpps",
                "--json",
            ]
            .map(String::from)
            .to_vec(),
            del_ns: bed.ns_gen(),
            ifname: &g0,
            down: false,
        };
        let out = d.run(|v| v["sent"][0].as_u64().is_some_and(|x| x > 0), "gen");
        let fin = out.last().unwrap();
        assert!(fin["streams"][0]["sent"].as_u64().unwrap() > 0, "{fin}");
    }
    // count: set down rather than deleted.
    {
        let bed = bed();
        let d0 = bed.info().dut_in.name.clone();
        let d = Doomed {
            bed: &bed,
            ns: bed.ns_dut(),
            args: ["count", &format!("afpacket:{d0}"), "--json"]
                .map(String::from)
                .to_vec(),
            del_ns: bed.ns_dut(),
            ifname: &d0,
            down: true,
        };
        let out = d.run(|v| v["packets"].as_u64().is_some_and(|x| x > 0), "count");
        let fin = out.last().unwrap();
        assert!(fin["totals"]["packets"].as_u64().unwrap() > 0, "{fin}");
    }
}

// ------------------------------------------------------------------- Lua

fn gen_script(script: &Path) -> Proc {
    Proc::from(
        Command::new(EXE)
            .args([
                "gen",
                "mem:x?sink",
                "--dst-ip",
                "10.0.0.2",
                "--signature",
                "--script",
            ])
            .arg(script)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    )
}

/// Issue 34: bytecode is how a script leaves the sandbox (Lua does not
/// verify it): `load(string.dump(f))` is an error of one line, the run
/// ends at once, and a script file of bytecode is not run.
#[test]
fn lua_bytecode_is_refused_with_one_line() {
    let td = TempDir::new("lua-bc");
    let p = td.write(
        "escape.lua",
        "log('started')\nload(string.dump(function() return 42 end))()\nlog('escaped')\n",
    );
    let out = gen_script(&p).wait_output(Duration::from_secs(10), "string.dump");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("started") && !err.contains("escaped"), "{err}");
    let last = err.lines().last().unwrap_or("");
    assert!(
        last.contains("escape.lua") && last.contains("dump"),
        "one line naming the script and the cause: {err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    // A file of bytecode (its signature, then anything): refused as such.
    let p = td.write("chunk.lua", "\x1bLua\x54\x00\x19\r\n\x1a\n");
    let out = gen_script(&p).wait_output(Duration::from_secs(10), "bytecode file");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    let last = err.lines().last().unwrap_or("");
    assert!(
        last.contains("chunk.lua") && last.contains("binary chunk"),
        "{err}"
    );
}

#[test]
fn lua_scripts_end_within_two_seconds_with_one_line() {
    let td = TempDir::new("lua");
    // sleep(math.huge): an argument error, not a panic.
    let p = td.write("huge.lua", "sleep(math.huge)\n");
    let t = Instant::now();
    let out = gen_script(&p).wait_output(Duration::from_secs(10), "sleep(math.huge)");
    assert!(t.elapsed() < Duration::from_secs(2));
    let err = String::from_utf8_lossy(&out.stderr);
    let last = err.lines().last().unwrap_or("");
    assert!(
        !out.status.success() && last.contains("sleep(inf): seconds must be a number"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");

    // while true do end: SIGTERM ends it (the instruction hook).
    let p = td.write("spin.lua", "log('spinning')\nwhile true do end\n");
    let mut g = gen_script(&p);
    let mut err = BufReader::new(g.child_mut().unwrap().stderr.take().unwrap());
    let mut l = String::new();
    // Ready: the script has started (its first log line).
    while !l.contains("spinning") {
        l.clear();
        assert!(err.read_line(&mut l).unwrap() > 0, "gen ended early");
    }
    let t = Instant::now();
    g.signal(libc::SIGTERM);
    let out = g.wait_output(Duration::from_secs(10), "while true + SIGTERM");
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    let mut rest = String::new();
    err.read_to_string(&mut rest).unwrap();
    let lines: Vec<&str> = rest.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{rest}");
    assert!(
        lines[0].contains("the run was stopped while it was still running"),
        "{rest}"
    );
    assert!(out.status.success());

    // examples/ramp.lua: five one-second steps, then the end within 2 s;
    // each step's rate is what the generator sent in it.
    let ramp = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/ramp.lua"
    ));
    let t = Instant::now();
    let out = gen_script(&ramp).wait_output(Duration::from_secs(20), "ramp.lua");
    let dt = t.elapsed();
    assert_ok(&out, "ramp.lua");
    assert!(
        dt >= Duration::from_secs(5) && dt < Duration::from_secs(7),
        "{dt:?}"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    let steps: Vec<&str> = err.lines().filter(|l| l.contains("pps measured")).collect();
    assert_eq!(steps.len(), 5, "{err}");
    for (i, s) in steps.iter().enumerate().skip(1) {
        // "[script   2.00s] s0 at 20000 pps: sent 123623 (19926 pps measured)"
        let want = 10_000.0 * (i + 1) as f64;
        let got: f64 = s
            .split('(')
            .nth(1)
            .unwrap()
            .split(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert!((got - want).abs() < 0.1 * want, "step {i}: {s}");
    }
    // And a SIGTERM in the middle of the ramp ends it within 2 s.
    let mut g = gen_script(&ramp);
    let mut err = BufReader::new(g.child_mut().unwrap().stderr.take().unwrap());
    let mut l = String::new();
    while !l.contains("pps measured") {
        l.clear();
        assert!(err.read_line(&mut l).unwrap() > 0, "ramp ended early");
    }
    let t = Instant::now();
    g.signal(libc::SIGTERM);
    let out = g.wait_output(Duration::from_secs(10), "ramp.lua + SIGTERM");
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    assert_ok(&out, "ramp.lua + SIGTERM");
}
