//! Maximum rate of linerate's XDP live-frames generator against other
//! software generators, and accuracy of its rate limit (run as root):
//!
//! (a) `xdp::generator` (BPF_PROG_RUN + live frames, XDP_TX out of g0);
//! (b) trafgen (netsniff-ng), TX_RING with qdisc bypass (its fast path),
//!     and `-t 0 -q` (sendto through the qdisc);
//! (c) linerate's `afpacket:g0?ring=mmsg` TxPort, batches of 64 copies;
//! (d) linerate's `afpacket:g0` (TPACKET_V3 TX ring) TxPort, same batches.
//!
//! Test bed (own namespaces, removed at exit): `lrgr<pid>g` holds g0,
//! `lrgr<pid>r` its veth peer r0 with an XDP counter (drop mode). 64-byte
//! frames (60 + FCS), senders pinned to CPU 0; the rate is frames counted
//! at r0 per second of wall time over the window.
//!
//! ```text
//! cargo run --release -p linerate-pipeline --example gen_rates [seconds]
//! ```
use linerate_io::batch::Pkt;
use linerate_io::xdp::count::XdpCount;
use linerate_io::xdp::generator::{ipv4_udp_frame, GenConfig, GenStats, XdpGen};
use linerate_io::xdp::AttachMode;
use linerate_pipeline::generate::xdp::{send, send_for};
use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn run(args: &[&str]) -> Result<String, String> {
    let o = Command::new(args[0])
        .args(&args[1..])
        .output()
        .map_err(|e| format!("{args:?}: {e}"))?;
    if !o.status.success() {
        return Err(format!(
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&o.stdout).to_string())
}

struct Bed(Vec<String>);
impl Drop for Bed {
    fn drop(&mut self) {
        for n in &self.0 {
            let _ = Command::new("ip").args(["netns", "del", n]).status();
        }
    }
}

fn enter(ns: &str) {
    let f = std::fs::File::open(format!("/run/netns/{ns}")).expect("namespace exists");
    // SAFETY: setns affects the calling thread only.
    let r = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
    assert_eq!(r, 0, "setns {ns}");
}

fn pin(cpu: usize) -> bool {
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET stays in bounds.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

const LEN: usize = 60;

fn frame() -> Vec<u8> {
    ipv4_udp_frame(
        [2, 0, 0, 0, 0, 2],
        [2, 0, 0, 0, 0, 1],
        [10, 0, 0, 1],
        [10, 0, 0, 2],
        5000,
        6000,
        LEN,
    )
}

/// Frames counted at r0 per second over `secs`, after a 0.5 s warm-up,
/// while `start` (called in the generator namespace, on this thread) sends
/// until the flag it is given is set.
fn measure<F>(sink: &XdpCount, secs: f64, start: F) -> f64
where
    F: FnOnce(Arc<AtomicBool>) -> std::thread::JoinHandle<()>,
{
    let stop = Arc::new(AtomicBool::new(false));
    let h = start(stop.clone());
    std::thread::sleep(Duration::from_millis(500));
    let c0 = sink.read().unwrap().packets;
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(secs));
    let c1 = sink.read().unwrap().packets;
    let dt = t0.elapsed().as_secs_f64();
    stop.store(true, Ordering::SeqCst);
    let _ = h.join();
    (c1 - c0) as f64 / dt
}

fn afpacket_sender(
    ns: String,
    uri: &'static str,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        enter(&ns);
        pin(0);
        let mut port = match linerate_io::open(uri, &Default::default()) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("{uri}: {e}");
                return;
            }
        };
        let mut frames: Vec<Vec<u8>> = (0..64).map(|_| frame()).collect();
        // SAFETY: one frame per descriptor; `frames` outlives `pkts` and is
        // only read (by send) while they live.
        let pkts: Vec<Pkt> = frames
            .iter_mut()
            .map(|f| unsafe { Pkt::from_raw(f.as_mut_ptr(), f.len() as u32, 0, 0) })
            .collect();
        while !stop.load(Ordering::Relaxed) {
            if let Err(e) = port.tx.send(&pkts) {
                eprintln!("{uri}: {e}");
                return;
            }
            let _ = port.tx.flush();
        }
    })
}

/// trafgen in the generator namespace with `extra` options, stopped with
/// SIGINT (it then stops its worker).
fn trafgen(
    ns: &str,
    conf: &str,
    extra: &[&str],
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    let mut args = vec![
        "netns", "exec", ns, "trafgen", "-o", "g0", "-i", conf, "-P", "1", "-Q",
    ];
    args.extend_from_slice(extra);
    let child = Command::new("ip")
        .args(&args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn();
    std::thread::spawn(move || {
        let mut child = match child {
            Ok(c) => c,
            Err(e) => {
                eprintln!("trafgen: {e}");
                return;
            }
        };
        while !stop.load(Ordering::Relaxed) {
            if let Ok(Some(st)) = child.try_wait() {
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    use std::io::Read;
                    let _ = e.read_to_string(&mut err);
                }
                eprintln!("trafgen exited early ({st}): {}", err.trim());
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // `ip netns exec` execs trafgen: this pid is trafgen's.
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(3) {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
    })
}

fn main() -> Result<(), String> {
    let secs: f64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(5.0);
    let pid = std::process::id();
    let (g, r) = (format!("lrgr{pid}g"), format!("lrgr{pid}r"));
    let mut bed = Bed(Vec::new());
    for n in [&g, &r] {
        run(&["ip", "netns", "add", n])?;
        bed.0.push(n.clone());
        for k in ["all", "default"] {
            run(&[
                "ip",
                "netns",
                "exec",
                n,
                "sysctl",
                "-qw",
                &format!("net.ipv6.conf.{k}.disable_ipv6=1"),
            ])?;
        }
    }
    run(&[
        "ip", "-n", &g, "link", "add", "g0", "type", "veth", "peer", "name", "r0", "netns", &r,
    ])?;
    run(&["ip", "-n", &g, "link", "set", "g0", "up"])?;
    run(&["ip", "-n", &r, "link", "set", "r0", "up"])?;
    let e = |x: linerate_io::PortError| x.to_string();
    enter(&r);
    let sink = XdpCount::attach("r0", AttachMode::Native, false).map_err(e)?;
    enter(&g);
    if !pin(0) {
        return Err("cannot pin to CPU 0".into());
    }
    let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("{LEN}-byte frames (+4 FCS), {secs} s windows, {ncpu} CPUs, senders on CPU 0");

    // Rate accuracy first (task 2).
    println!("\nrate limit: requested vs achieved (xdp::generator, counted at r0)");
    println!(
        "{:>12} {:>12} {:>12} {:>9} {:>9} {:>10} {:>10} {:>9}",
        "requested", "sent/s", "counted/s", "err %", "slice", "late mean", "late max", "calls"
    );
    let f = frame();
    for pps in [10e3, 100e3, 1e6, 2e6, 5e6, 20e6] {
        let cfg = GenConfig {
            pps: Some(pps),
            ..Default::default()
        };
        let mut gen = XdpGen::new("g0", &f, cfg).map_err(e)?;
        let c0 = sink.read().unwrap().packets;
        let d = secs.min(3.0);
        let st: GenStats = send_for(
            &mut gen,
            Duration::from_secs_f64(d),
            &AtomicBool::new(false),
        )
        .map_err(e)?;
        std::thread::sleep(Duration::from_millis(100));
        let counted = sink.read().unwrap().packets - c0;
        // Rates per second of the requested duration (the run ends up to
        // one call's overhead later, see the xdp::generator docs).
        // Per second of the run's real duration: the count is exact
        // (floor(pps * d)) but the run may overrun d (a call's overhead,
        // or a backlog the machine cannot send in time).
        let wall = st.duration_ns as f64 / 1e9;
        let sent_rate = st.pps();
        println!(
            "{:>12.0} {:>12.0} {:>12.0} {:>+9.3} {:>7.2}ms {:>8.1}us {:>8.1}us {:>9}",
            pps,
            sent_rate,
            counted as f64 / wall,
            (sent_rate - pps) / pps * 100.0,
            linerate_pipeline::generate::xdp::send::slice_for(pps).as_secs_f64() * 1e3,
            st.late_sum_ns as f64 / st.slices.max(1) as f64 / 1e3,
            st.late_max_ns as f64 / 1e3,
            st.syscalls,
        );
    }
    // Exact count at a rate.
    let mut gen = XdpGen::new(
        "g0",
        &f,
        GenConfig {
            pps: Some(1e6),
            ..Default::default()
        },
    )
    .map_err(e)?;
    let c0 = sink.read().unwrap().packets;
    let st = send(&mut gen, 1_234_567, &AtomicBool::new(false)).map_err(e)?;
    std::thread::sleep(Duration::from_millis(100));
    println!(
        "run(1234567) at 1 Mpps: sent {} counted {} in {:.4} s (ideal 1.2346 s)",
        st.sent,
        sink.read().unwrap().packets - c0,
        st.duration_ns as f64 / 1e9
    );

    // Max rates (task 3).
    let mut rows: Vec<(String, f64)> = Vec::new();
    let fr = f.clone();
    let ns = g.clone();
    let xdp = measure(&sink, secs, move |stop| {
        std::thread::spawn(move || {
            enter(&ns);
            pin(0);
            let mut gen = XdpGen::new("g0", &fr, GenConfig::default()).expect("xdp::generator");
            let _ = send_for(&mut gen, Duration::from_secs(3600), &stop);
        })
    });
    rows.push(("(a) xdp::generator live frames".into(), xdp));
    // trafgen configuration: the same frame as bytes.
    let conf = std::env::temp_dir().join(format!("lrgr{pid}.cfg"));
    let body: Vec<String> = f.iter().map(|b| format!("0x{b:02x}")).collect();
    std::fs::write(&conf, format!("{{ {} }}\n", body.join(", "))).map_err(|e| e.to_string())?;
    let confs = conf.to_string_lossy().to_string();
    for (name, extra) in [
        ("(b) trafgen TX_RING, qdisc bypass", &[][..]),
        (
            "(b') trafgen -t 0 -q (sendto, qdisc)",
            &["-t", "0", "-q"][..],
        ),
    ] {
        let (ns, c) = (g.clone(), confs.clone());
        let v = measure(&sink, secs, move |stop| trafgen(&ns, &c, extra, stop));
        rows.push((name.into(), v));
    }
    let _ = std::fs::remove_file(&conf);
    for (name, uri) in [
        ("(c) afpacket ring=mmsg x64", "afpacket:g0?ring=mmsg"),
        ("(d) afpacket TPACKET_V3 TX ring", "afpacket:g0"),
    ] {
        let ns = g.clone();
        let v = measure(&sink, secs, move |stop| afpacket_sender(ns, uri, stop));
        rows.push((name.into(), v));
    }
    println!("\nmax rate, counted at r0");
    println!(
        "{:<40} {:>10} {:>12}",
        "method", "Mpps", "xdp::generator / it"
    );
    for (n, v) in &rows {
        let ratio = if *v > 0.0 { xdp / v } else { f64::INFINITY };
        println!("{n:<40} {:>10.3} {ratio:>12.2}", v / 1e6);
    }
    drop(sink);
    Ok(())
}
