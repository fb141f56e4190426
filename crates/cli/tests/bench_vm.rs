//! A device under test in a guest (`linerate bench --dut vm:NAME`, a DuT
//! spec's `[vm]` section): the bench builds the guest from the host's
//! packages, boots it under qemu (KVM when a probe guest boots under it,
//! else TCG, as on this project's CI machines), and joins its two NICs to
//! the bed through taps in the DuT's namespace.
//!
//! * 10 000 frames of mixed sizes (60-1514 B, VLAN-tagged and not, IPv4
//!   and IPv6) cross `linerate fwd afxdp` inside the guest byte for byte
//!   and in order; stopped, the guest leaves no qemu, tap or image behind.
//! * A bench killed with SIGKILL while a guest DuT runs leaves no qemu
//!   process, no namespace (the taps live there) and no boot files.
//! * A bad guest (no kernel, never forwards, panics) gives one line naming
//!   the cause and the console log, and leaves nothing.
//!
//! Needs root, qemu-system-x86_64, busybox and a guest kernel (scripts/setup.sh).

use linerate_io::{Batch, OpenOptions, Pkt};
use linerate_measure::bench::dut::{self, DutEnv};
use linerate_measure::testbed::{Testbed, TestbedConfig};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod support;
use support::{
    mixed_frame, netns_with, require_root, require_tool, wait_until, Proc, TempDir, EXE,
};

/// One guest at a time: each runs on the DuT's CPU, and a watchdog's second
/// sweep kills processes in namespaces with the inode numbers of the beds
/// it removed.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

fn require_vm_tools() {
    require_root();
    require_tool("qemu-system-x86_64");
    require_tool("busybox");
    // The guest kernel scripts/setup.sh unpacks (or one in /boot).
    if let Err(e) = dut::vm::image::Kernel::find(None, None) {
        panic!("{e}");
    }
}

const N: u64 = 10_000;
/// The UDP port of readiness probes (data frames use 9).
const PROBE_PORT: u16 = 7;

/// Frame `i` ([`mixed_frame`]) to `dst` (d0's MAC: the guest's NIC filters
/// on it as a NIC does until it is promiscuous); `probe`: a readiness probe
/// (UDP port [`PROBE_PORT`]) instead.
fn frame(i: u64, dst: [u8; 6], probe: bool, buf: &mut [u8; 1514]) -> usize {
    mixed_frame(i, Some(dst), if probe { PROBE_PORT } else { 9 }, buf)
}

/// The UDP destination port of `f` (VLAN tag or not, IPv4 or IPv6).
fn udp_dport(f: &[u8]) -> Option<u16> {
    let mut o = 12;
    if f.get(o..o + 2)? == [0x81, 0x00] {
        o += 4;
    }
    let l4 = match f.get(o..o + 2)? {
        [0x08, 0x00] => o + 2 + 4 * (f.get(o + 2)? & 0xf) as usize,
        [0x86, 0xdd] => o + 2 + 40,
        _ => return None,
    };
    Some(u16::from_be_bytes([*f.get(l4 + 2)?, *f.get(l4 + 3)?]))
}

/// Processes whose command line has `needle`.
fn procs_with(needle: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
                .filter(|p| {
                    std::fs::read(format!("/proc/{p}/cmdline"))
                        .map(|c| String::from_utf8_lossy(&c).contains(needle))
                        .unwrap_or(false)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The qemu of the guests a process `pid` built (their initramfs is in
/// `/run/linerate/vm/PID-...`).
fn qemus_of(pid: u32) -> Vec<u32> {
    procs_with(&format!("/run/linerate/vm/{pid}-"))
}

#[test]
fn a_guest_forwards_10000_frames_byte_for_byte_and_leaves_nothing() {
    require_vm_tools();
    let _s = serial();
    // GRO on: a veth takes frames redirected to it (from a tap) only with NAPI.
    let mut bed = Testbed::up(&TestbedConfig {
        gro: Some(true),
        ..TestbedConfig::default()
    })
    .expect("test bed");
    let mut duts = dut::select(&["vm:linerate-afxdp".to_string()], &[], false).unwrap();
    let d = &mut duts[0];
    let env = DutEnv {
        linerate: PathBuf::from(EXE),
        peers_dir: None,
        cpu: 1,
    };
    d.start(&mut bed, &env).expect("the guest starts");
    let ns_dut = bed.ns_dut().to_string();
    let qemu = qemus_of(std::process::id());
    assert_eq!(qemu.len(), 1, "one qemu: {qemu:?}");
    let dst = bed.info().dut_in.mac.0;

    let received = Arc::new(AtomicU64::new(0));
    let probes_seen = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicBool::new(false));
    let ready = Arc::new(AtomicBool::new(false));
    let (rc, ps, fl, rd) = (
        received.clone(),
        probes_seen.clone(),
        failed.clone(),
        ready.clone(),
    );
    let ns_sink = bed.ns_sink().to_string();
    let sink = std::thread::spawn(move || {
        linerate_measure::testbed::in_netns(&ns_sink, move || {
            let mut port =
                linerate_io::open("afpacket:s0", &OpenOptions::default()).expect("sink port");
            rd.store(true, Ordering::SeqCst);
            let mut b = Batch::new(64);
            let mut want = [0u8; 1514];
            let t = Instant::now();
            let mut i = 0u64;
            while i < N && t.elapsed() < Duration::from_secs(180) && !fl.load(Ordering::SeqCst) {
                port.rx.recv(&mut b).unwrap();
                for p in b.pkts() {
                    if udp_dport(p.bytes()) == Some(PROBE_PORT) {
                        ps.fetch_add(1, Ordering::SeqCst);
                        continue;
                    }
                    let n = frame(i, dst, false, &mut want);
                    if p.bytes() != &want[..n] {
                        fl.store(true, Ordering::SeqCst);
                        panic!("frame {i}: got {} bytes, want {n}, or other bytes", p.len());
                    }
                    i += 1;
                }
                port.rx.release(&mut b).unwrap();
                rc.store(i, Ordering::SeqCst);
            }
            i
        })
        .unwrap()
    });
    wait_until(
        Duration::from_secs(10),
        "the sink's port on s0 open",
        || {
            assert!(
                !sink.is_finished(),
                "the sink thread ended before it was ready"
            );
            ready.load(Ordering::SeqCst)
        },
    );
    let ns_gen = bed.ns_gen().to_string();
    let mut gen = linerate_measure::testbed::in_netns(&ns_gen, || {
        linerate_io::open("afpacket:g0?ring=mmsg", &OpenOptions::default()).expect("gen port")
    })
    .unwrap();
    let mut bufs = vec![[0u8; 1514]; 32];
    let mut send = |gen: &mut linerate_io::Port, from: u64, k: usize, probe: bool| {
        const NO_PKT: Pkt = unsafe { Pkt::from_raw(std::ptr::null_mut(), 0, 0, 0) };
        let mut pk = [NO_PKT; 32];
        for j in 0..k {
            let n = frame(from + j as u64, dst, probe, &mut bufs[j]);
            // SAFETY: one test buffer per descriptor; it outlives the descriptor and nothing else touches it meanwhile.
            pk[j] = unsafe { Pkt::from_raw(bufs[j].as_mut_ptr(), n as u32, 0, 0) };
        }
        let mut off = 0;
        while off < k {
            off += gen.tx.send(&pk[off..k]).unwrap();
            gen.tx.flush().unwrap();
        }
    };
    // Ready when a probe comes through (the guest boots, then its
    // forwarder opens its ports); the guest must not end meanwhile.
    let t = Instant::now();
    let mut k = 0;
    while probes_seen.load(Ordering::SeqCst) == 0 {
        if let Err(e) = d.alive() {
            panic!("{e}");
        }
        assert!(
            t.elapsed() < Duration::from_secs(120),
            "no probe came through the guest in 120 s"
        );
        send(&mut gen, k, 1, true);
        k += 1;
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!("ready after {:.1} s", t.elapsed().as_secs_f64());
    let t = Instant::now();
    let mut i = 0u64;
    while i < N && !failed.load(Ordering::SeqCst) && t.elapsed() < Duration::from_secs(180) {
        // At most 128 frames ahead of the sink: no queue on the way
        // overflows (the test is exact, not a measure of speed).
        if i - received.load(Ordering::SeqCst) > 128 {
            std::thread::yield_now();
            continue;
        }
        let k = 32.min((N - i) as usize);
        send(&mut gen, i, k, false);
        i += k as u64;
    }
    let got = sink.join().expect("sink thread");
    assert!(!failed.load(Ordering::SeqCst));
    assert_eq!(got, N, "frames through the guest in order");
    eprintln!("{N} frames in {:.1} s", t.elapsed().as_secs_f64());
    drop(gen);

    let acct = d.stop(&bed).expect("the guest stops").expect("an account");
    let vm = &acct["vm"];
    assert!(
        matches!(vm["accel"].as_str(), Some("kvm" | "tcg")),
        "{acct}"
    );
    assert_eq!(vm["emulated"], vm["accel"] == "tcg", "{acct}");
    assert!(vm["boot_s"].as_f64().unwrap() > 0.0, "{acct}");
    eprintln!("acceleration: {} ({})", vm["accel"], vm["why"]);
    assert!(!vm["why"].as_str().unwrap().is_empty(), "{acct}");
    let console = PathBuf::from(vm["console_log"].as_str().unwrap());
    let text = std::fs::read_to_string(&console).unwrap();
    assert!(text.contains("linerate-guest: running"), "{text}");
    // linerate fwd's own account, from inside the guest: the N frames and
    // the probes through, nothing dropped.
    let ab = &acct["directions"][0];
    assert_eq!(ab["direction"], "A->B", "{acct}");
    assert!(ab["forwarded"].as_u64().unwrap() >= N, "{acct}");
    assert_eq!(ab["dropped"], 0, "{acct}");
    // Stopped: qemu reaped, taps and boot files gone; the bed is as it was.
    assert!(
        !Path::new(&format!("/proc/{}", qemu[0])).exists(),
        "qemu {} still there",
        qemu[0]
    );
    for tap in ["tap0", "tap1"] {
        let st = Command::new("ip")
            .args(["-n", &ns_dut, "link", "show", tap])
            .stderr(Stdio::null())
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(!st.success(), "{tap} left in {ns_dut}");
    }
    let dirs: Vec<_> = std::fs::read_dir("/run/linerate/vm")
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(&format!("{}-", std::process::id())))
                .collect()
        })
        .unwrap_or_default();
    assert!(dirs.is_empty(), "boot files left: {dirs:?}");
    drop(duts);
    bed.down().unwrap();
}

/// A spec of `linerate fwd afxdp` in a TCG guest, with `extra` lines in its
/// `[vm]` section and `body` instead of its `run` when given.
fn guest_spec(dir: &TempDir, file: &str, name: &str, body: Option<&str>, extra: &str) -> PathBuf {
    let run = body.unwrap_or(
        "run = \"exec {linerate} fwd afxdp:{d0} afxdp:{d1} --quiet --json --cpu {cpu}\"",
    );
    dir.write(
        file,
        &format!(
            "name = \"{name}\"\ndescription = \"a test guest\"\nmode = \"l3\"\n{run}\n\n[vm]\naccel = \"tcg\"\n{extra}\n"
        ),
    )
}

const QUICK: &[&str] = &[
    "--final-trial",
    "0",
    "--sizes",
    "64",
    "--repetitions",
    "1",
    "--no-latency",
    "--frame-loss-sizes",
    "none",
    "--b2b-sizes",
    "none",
    "--no-report",
    "--no-history",
];

fn bench(spec: &Path, prefix: &str) -> Proc {
    let child = Command::new(EXE)
        .args(["bench", "--dut-file"])
        .arg(spec)
        .args(QUICK)
        .args(["--trial", "1", "--name", prefix])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    Proc::from(child)
}

#[test]
fn a_killed_bench_leaves_no_qemu_tap_or_namespace() {
    require_vm_tools();
    let _s = serial();
    let dir = TempDir::new("vm-kill");
    let spec = guest_spec(&dir, "g.toml", "guest-afxdp", None, "");
    let mut p = bench(&spec, "bvk");
    let pid = p.pid();
    let rx = p.stderr_lines();
    let mut log = Vec::new();
    // Killed while its trials run: the guest booted and forwards.
    wait_until(Duration::from_secs(120), "a trial of the guest DuT", || {
        while let Ok(l) = rx.try_recv() {
            log.push(l);
        }
        assert!(
            !log.iter().any(|l| l.contains("failed")),
            "the bench failed: {log:?}"
        );
        log.iter().any(|l| l.contains("guest-afxdp 64 B: "))
    });
    let boot_files = |pid: u32| {
        std::fs::read_dir("/run/linerate/vm")
            .map(|rd| {
                rd.flatten()
                    .filter(|e| {
                        e.file_name()
                            .to_string_lossy()
                            .starts_with(&format!("{pid}-"))
                    })
                    .count()
            })
            .unwrap_or(0)
    };
    let qemu = qemus_of(pid);
    assert_eq!(qemu.len(), 1, "one qemu: {qemu:?} {log:?}");
    assert_eq!(boot_files(pid), 1, "the guest's boot files");
    // The taps are in the DuT's namespace (and so go with it).
    let dut_ns = netns_with("bvk")
        .into_iter()
        .find(|n| n.ends_with("-dut"))
        .expect("the bed's DuT namespace");
    for tap in ["tap0", "tap1"] {
        let st = Command::new("ip")
            .args(["-n", &dut_ns, "link", "show", tap])
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(st.success(), "{tap} not in {dut_ns}");
    }
    p.signal(libc::SIGKILL);
    let _ = p.take_child().unwrap().wait();
    wait_until(
        Duration::from_secs(30),
        "the watchdog to end qemu, remove the bed (and its taps) and the guest's boot files",
        || qemus_of(pid).is_empty() && netns_with("bvk").is_empty() && boot_files(pid) == 0,
    );
}

#[test]
fn bad_guests_get_one_line_naming_the_cause_and_the_console_log() {
    require_vm_tools();
    let _s = serial();
    let dir = TempDir::new("vm-bad");
    // (file, run line, [vm] lines, what the error must say)
    let cases: [(&str, Option<&str>, &str, &[&str]); 3] = [
        (
            "nokernel.toml",
            None,
            "kernel = \"/nonexistent/vmlinuz-9.9\"",
            &["kernel /nonexistent/vmlinuz-9.9: No such file or directory"],
        ),
        (
            "never.toml",
            Some("run = \"exec sleep 1000\""),
            "boot_timeout = 8",
            &[
                "never forwarded",
                "(vm.boot_timeout 8 s); its console's last line: linerate-guest: running",
            ],
        ),
        (
            "crash.toml",
            Some("start = \"echo c > /proc/sysrq-trigger\""),
            "",
            &["the guest ended (qemu ", "the guest kernel panicked: "],
        ),
    ];
    for (i, (file, body, extra, want)) in cases.iter().enumerate() {
        let spec = guest_spec(&dir, file, &format!("bad{i}"), *body, extra);
        let prefix = format!("bvb{i}");
        let p = bench(&spec, &prefix);
        let pid = p.pid();
        let out = p.wait_output(Duration::from_secs(120), "bench");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{file}: {err}");
        let last = err.lines().last().unwrap_or("");
        assert!(last.starts_with("linerate: error: "), "{file}: {err}");
        for w in *want {
            assert!(last.contains(w), "{file}: {last:?} lacks {w:?}");
        }
        let log = last
            .split("(console log ")
            .nth(1)
            .and_then(|s| s.split(')').next())
            .unwrap_or_else(|| panic!("{file}: no console log named: {last}"));
        assert!(
            log.starts_with("/run/linerate/dut-log/") && Path::new(log).is_file(),
            "{file}: {log}"
        );
        assert!(
            netns_with(&prefix).is_empty(),
            "{file}: {:?}",
            netns_with(&prefix)
        );
        assert!(qemus_of(pid).is_empty(), "{file}: qemu left");
    }
}
