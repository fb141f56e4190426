//! Rates of linerate's in-kernel pieces on veth pairs (run as root):
//!
//! (a) xdp::generator -> xdp::count directly;
//! (b) xdp::generator -> xdp::fwd -> xdp::count;
//! (c) xdp::generator -> bare XDP_REDIRECT -> xdp::count;
//!
//! each with several CPU placements. The generator thread is pinned to
//! CPU 0. On veth, the receiving NAPI runs on the CPU that transmitted
//! unless threaded NAPI is enabled on the receiving veth; the placements
//! move chosen NAPI kthreads to CPU 1.
//!
//! Test bed (own namespaces, removed at exit): `lrr<pid>g` holds the
//! generator ends, `lrr<pid>d` the forwarder's two ports, `lrr<pid>s` the
//! sinks.
//!
//! ```text
//! cargo run --release -p linerate-pipeline --example xdp_rates [seconds] [frame_len]
//! ```
//!
//! With `XDP_RATES_FIFO=1` the pinned NAPI kthreads also get SCHED_FIFO 50
//! (on a busy machine this keeps them from being preempted, which
//! otherwise overflows the veth's 256-frame XDP ring).
//!
//! Columns: frames counted by the sink per second of wall time, frames
//! sent by the generator, lost frames (all of them show up as veth
//! `xdp_xmit_errors`: ring full), and rates per CPU second of the
//! generator thread and of the NAPI kthreads, which are the meaningful
//! figures when other work shares the CPUs.
use linerate_io::xdp::count::XdpCount;
use linerate_io::xdp::fwd::{veth_xdp_xmit_errors, XdpFwd, XdpRedirectBare};
use linerate_io::xdp::generator::{ipv4_udp_frame, GenConfig, XdpGen, IPV4_UDP_PAYLOAD};
use linerate_io::xdp::AttachMode;
use linerate_pipeline::generate::xdp::{send, send_for};
use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

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

fn pin(pid: i32, cpu: usize) -> bool {
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET stays in bounds.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(pid, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

/// Turn threaded NAPI on or off for `dev` in `ns`, and pin its kthread(s)
/// (returned).
fn threaded(ns: &str, dev: &str, cpu: Option<usize>) -> Result<Vec<i32>, String> {
    let v = if cpu.is_some() { "1" } else { "0" };
    run(&[
        "ip",
        "netns",
        "exec",
        ns,
        "sh",
        "-c",
        &format!("echo {v} > /sys/class/net/{dev}/threaded"),
    ])?;
    let Some(cpu) = cpu else {
        return Ok(Vec::new());
    };
    let prefix = format!("napi/{dev}-");
    let mut pinned = Vec::new();
    for _ in 0..50 {
        for e in std::fs::read_dir("/proc")
            .map_err(|e| e.to_string())?
            .flatten()
        {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
            if comm.trim_end().starts_with(&prefix) && pin(pid, cpu) {
                if std::env::var_os("XDP_RATES_FIFO").is_some() {
                    let p = libc::sched_param { sched_priority: 50 };
                    // SAFETY: valid pid and parameter.
                    unsafe { libc::sched_setscheduler(pid, libc::SCHED_FIFO, &p) };
                }
                pinned.push(pid);
            }
        }
        if !pinned.is_empty() {
            return Ok(pinned);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(format!("no NAPI kthread for {dev} appeared"))
}

/// On-CPU time of a task in ns (first field of /proc/PID/schedstat).
fn task_cpu_ns(pid: i32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/schedstat"))
        .ok()
        .and_then(|t| t.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

struct Measure {
    sent: u64,
    received: u64,
    secs: f64,
    gen_cpu_s: f64,
    napi_cpu_s: f64,
    xmit_errors: u64,
}

/// Veth devices whose `xdp_xmit_errors` count losses, by namespace.
type Hops<'a> = &'a [(&'a str, &'a str)];

fn xmit_errors(hops: Hops) -> u64 {
    hops.iter()
        .map(|(ns, dev)| {
            enter(ns);
            veth_xdp_xmit_errors(dev).unwrap_or(0)
        })
        .sum()
}

fn measure(
    gen_ns: &str,
    gen: &mut XdpGen,
    sink: &XdpCount,
    secs: f64,
    hops: Hops,
    napi: &[i32],
) -> Result<Measure, String> {
    let e0 = xmit_errors(hops);
    let k0: u64 = napi.iter().map(|p| task_cpu_ns(*p)).sum();
    let c0 = sink.read().unwrap().packets;
    enter(gen_ns);
    let st = send_for(gen, Duration::from_secs_f64(secs), &AtomicBool::new(false))
        .map_err(|e| e.to_string())?;
    std::thread::sleep(Duration::from_millis(200));
    let c1 = sink.read().unwrap().packets;
    let k1: u64 = napi.iter().map(|p| task_cpu_ns(*p)).sum();
    let e1 = xmit_errors(hops);
    enter(gen_ns);
    Ok(Measure {
        sent: st.sent,
        received: c1 - c0,
        secs: st.duration_ns as f64 / 1e9,
        gen_cpu_s: st.cpu_ns as f64 / 1e9,
        napi_cpu_s: k1.saturating_sub(k0) as f64 / 1e9,
        xmit_errors: e1 - e0,
    })
}

fn report(what: &str, placement: &str, m: &Measure) {
    let napi = if m.napi_cpu_s > 0.0 {
        format!(
            " | per NAPI-kthread CPU s {:>5.2} Mpps",
            m.received as f64 / m.napi_cpu_s / 1e6
        )
    } else {
        String::new()
    };
    println!(
        "{what:<22} {placement:<40} sink {:>5.2} Mpps (gen {:>5.2}) lost {:>9} (veth xmit errors {:>9}) | per gen-thread CPU s {:>5.2} Mpps{napi}",
        m.received as f64 / m.secs / 1e6,
        m.sent as f64 / m.secs / 1e6,
        m.sent.saturating_sub(m.received),
        m.xmit_errors,
        m.sent as f64 / m.gen_cpu_s.max(1e-9) / 1e6,
    );
}

fn main() {
    let secs: f64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(3.0);
    let len: usize = std::env::args()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let pid = std::process::id();
    let bed = Bed(Vec::new());
    let r = std::thread::spawn(move || -> Result<(), String> {
        let mut bed = bed;
        let (g, d, s) = (
            format!("lrr{pid}g"),
            format!("lrr{pid}d"),
            format!("lrr{pid}s"),
        );
        for n in [&g, &d, &s] {
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
        // Short, unique device names so NAPI kthreads ("napi/DEV-ID") can be found.
        let n = |r: &str| format!("{r}{pid}");
        let (gd, sd, gf, fa, fb, sf) = (n("x"), n("y"), n("g"), n("a"), n("b"), n("s"));
        let veth = |x: &str, a: &str, y: &str, b: &str| -> Result<(), String> {
            run(&[
                "ip", "-n", x, "link", "add", "dev", a, "type", "veth", "peer", "name", b,
                "netns", y,
            ])?;
            run(&["ip", "-n", x, "link", "set", "dev", a, "up"])?;
            run(&["ip", "-n", y, "link", "set", "dev", b, "up"])?;
            Ok(())
        };
        veth(&g, &gd, &s, &sd)?; // direct
        veth(&g, &gf, &d, &fa)?; // generator -> forwarder
        veth(&d, &fb, &s, &sf)?; // forwarder -> sink

        let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get());
        // The generator runs on this thread: CPU 0.
        if !pin(0, 0) {
            return Err("cannot pin the generator thread to CPU 0".into());
        }
        let frame = ipv4_udp_frame(
            [2, 0, 0, 0, 0, 2],
            [2, 0, 0, 0, 0, 1],
            [10, 0, 0, 1],
            [10, 0, 0, 2],
            5000,
            6000,
            len,
        );
        let cfg = GenConfig {
            flows: 1,
            signature: (len >= IPV4_UDP_PAYLOAD + 24).then_some(linerate_io::xdp::generator::SigConfig { offset: IPV4_UDP_PAYLOAD, stream: 0, sample_every: 1 }),
            ..Default::default()
        };
        println!(
            "frames of {len} bytes (+4 FCS), {secs} s per point, {ncpu} CPUs, generator pinned to CPU 0"
        );
        let e = |x: linerate_io::PortError| x.to_string();

        // (a) direct.
        enter(&s);
        let sink_d = XdpCount::attach(&sd, AttachMode::Native, false).map_err(e)?;
        let sink_f = XdpCount::attach(&sf, AttachMode::Native, false).map_err(e)?;
        enter(&g);
        let mut gen_d = XdpGen::new(&gd, &frame, cfg).map_err(e)?;
        let mut gen_f = XdpGen::new(&gf, &frame, cfg).map_err(e)?;
        // Warm up (page pool, first call).
        send(&mut gen_d, 1 << 20, &AtomicBool::new(false)).map_err(e)?;
        let hops_d = [(g.as_str(), gd.as_str())];
        let m = measure(&g, &mut gen_d, &sink_d, secs, &hops_d, &[])?;
        report("(a) gen -> count", "all on CPU 0 (sink in gen's softirq)", &m);
        if ncpu > 1 {
            let k = threaded(&s, &sd, Some(1))?;
            let m = measure(&g, &mut gen_d, &sink_d, secs, &hops_d, &k)?;
            report("(a) gen -> count", "sink threaded NAPI on CPU 1", &m);
            threaded(&s, &sd, None)?;
        }

        // (b) and (c): the forwarders.
        for which in ["(b) gen -> xdp::fwd", "(c) gen -> bare redir"] {
            enter(&d);
            let fwd = if which.starts_with("(b)") {
                Some(XdpFwd::start(&fa, &fb, AttachMode::Native, None).map_err(e)?)
            } else {
                None
            };
            let bare = if fwd.is_none() {
                Some(XdpRedirectBare::start(&fa, &fb, AttachMode::Native).map_err(e)?)
            } else {
                None
            };
            enter(&g);
            send(&mut gen_f, 1 << 20, &AtomicBool::new(false)).map_err(e)?;
            let hops = [(g.as_str(), gf.as_str()), (d.as_str(), fb.as_str())];
            let m = measure(&g, &mut gen_f, &sink_f, secs, &hops, &[])?;
            report(which, "all on CPU 0", &m);
            if ncpu > 1 {
                let k = threaded(&d, &fa, Some(1))?;
                let m = measure(&g, &mut gen_f, &sink_f, secs, &hops, &k)?;
                report(which, "fwd threaded CPU 1 (sink follows)", &m);
                let k2 = threaded(&s, &sf, Some(0))?;
                let both: Vec<i32> = k.iter().chain(&k2).copied().collect();
                let m = measure(&g, &mut gen_f, &sink_f, secs, &hops, &both)?;
                report(which, "fwd threaded CPU 1, sink threaded CPU 0", &m);
                threaded(&d, &fa, None)?;
                let k = threaded(&s, &sf, Some(1))?;
                let m = measure(&g, &mut gen_f, &sink_f, secs, &hops, &k)?;
                report(which, "fwd in gen's softirq, sink threaded CPU 1", &m);
                threaded(&s, &sf, None)?;
            }
            if let Some(f) = &fwd {
                let c = f.counters();
                println!(
                    "    xdp::fwd counters a->b: rx {} fwd {} drops {} (redirect {} malformed {})",
                    c.a_to_b.rx,
                    c.a_to_b.fwd,
                    c.a_to_b.drops(),
                    c.a_to_b.drop_redirect,
                    c.a_to_b.drop_malformed
                );
            }
            drop(fwd);
            drop(bare);
        }
        Ok(())
    })
    .join();
    match r {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            eprintln!("xdp_rates: {e}");
            std::process::exit(1);
        }
        Err(_) => std::process::exit(2),
    }
}
