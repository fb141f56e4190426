//! Rough single-core rates of the afxdp port on a veth pair (root):
//! phase 1 sends 64-byte frames through `afxdp:x0` alone (x1 has no XDP,
//! the peer's stack drops them); phase 2 adds `afxdp:x1` receiving them on
//! the other core. Information only: veth + copy mode, not a NIC.
//!
//! `cargo run --release -p linerate-io --example afxdp_rate [seconds] [mode]`
use linerate_io::{Batch, OpenOptions, Pkt};
use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

struct Ns(String);
impl Drop for Ns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

fn ip(args: &[&str]) {
    assert!(
        Command::new("ip").args(args).status().unwrap().success(),
        "ip {args:?}"
    );
}

fn pin(cpu: usize) {
    // SAFETY: plain cpu_set_t manipulation and sched_setaffinity on this thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// CPU time of the calling thread in nanoseconds.
fn thread_cpu_ns() -> u64 {
    // SAFETY: plain clock_gettime into a local timespec.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Packets done and CPU time used by one thread (the machine may be shared:
/// packets per CPU-second is the single-core rate).
#[derive(Default)]
struct Progress {
    pkts: AtomicU64,
    cpu_ns: AtomicU64,
}

fn opts() -> OpenOptions {
    OpenOptions {
        ring_size: 2048,
        busy_poll: true,
        ..OpenOptions::default()
    }
}

fn tx_loop(uri: String, stop: Arc<AtomicBool>, count: Arc<Progress>) {
    pin(0);
    let mut port = linerate_io::open(&uri, &opts()).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("TX {}: {}", uri, port.info.detail);
    let mut frame = [0u8; 64];
    frame[..12].copy_from_slice(&[2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1]);
    frame[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
    let mut frames = [frame; 64];
    // SAFETY: one buffer per descriptor; `frames` outlives `pkts` and is only
    // read (by send) while they live.
    let pkts: Vec<Pkt> = frames
        .iter_mut()
        .map(|f| unsafe { Pkt::from_raw(f.as_mut_ptr(), 64, 0, 0) })
        .collect();
    let mut sent = 0u64;
    let mut i = 0u64;
    while !stop.load(Ordering::Relaxed) {
        sent += port.tx.send(&pkts).unwrap() as u64;
        port.tx.flush().unwrap();
        count
            .pkts
            .store(sent - port.tx.in_flight() as u64, Ordering::Relaxed);
        i += 1;
        if i.is_multiple_of(256) {
            count.cpu_ns.store(thread_cpu_ns(), Ordering::Relaxed);
        }
    }
    eprintln!("TX kernel stats: {:?}", port.tx.kernel_stats().counters);
}

fn rx_loop(uri: String, stop: Arc<AtomicBool>, count: Arc<Progress>, ready: Arc<AtomicBool>) {
    pin(1);
    let mut port = linerate_io::open(&uri, &opts()).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("RX {}: {}", uri, port.info.detail);
    ready.store(true, Ordering::Relaxed);
    let mut b = Batch::new(64);
    let mut n = 0u64;
    let mut i = 0u64;
    let mut sum = 0u64;
    // Best drain time of a full RX ring (after a pause): the cost of
    // recv+release per packet on this core, free of the generator's speed.
    let mut best = f64::MAX;
    let mut last_drain = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        if last_drain.elapsed() > Duration::from_millis(300) {
            std::thread::sleep(Duration::from_millis(50));
            let t = Instant::now();
            let mut k = 0u64;
            loop {
                let got = port.rx.recv(&mut b).unwrap() as u64;
                if got == 0 {
                    break;
                }
                for p in b.pkts() {
                    sum = sum.wrapping_add(p.bytes()[12] as u64);
                }
                port.rx.release(&mut b).unwrap();
                k += got;
            }
            if k >= 1024 {
                best = best.min(t.elapsed().as_nanos() as f64 / k as f64);
            }
            n += k;
            last_drain = Instant::now();
        }
        let got = port.rx.recv(&mut b).unwrap() as u64;
        for p in b.pkts() {
            sum = sum.wrapping_add(p.bytes()[12] as u64);
        }
        port.rx.release(&mut b).unwrap();
        n += got;
        count.pkts.store(n, Ordering::Relaxed);
        i += 1;
        if i.is_multiple_of(256) {
            count.cpu_ns.store(thread_cpu_ns(), Ordering::Relaxed);
        }
    }
    eprintln!(
        "RX kernel stats: {:?} (checksum {sum})",
        port.rx.kernel_stats().counters
    );
    if best < f64::MAX {
        println!(
            "RX drain of a full ring: best {best:.1} ns per packet (recv+release, one header byte read) => {:.1} Mpps for one core",
            1e3 / best
        );
    }
}

fn measure(what: &str, secs: u64, counters: &[(&str, &Arc<Progress>)]) {
    std::thread::sleep(Duration::from_millis(500));
    let t0 = Instant::now();
    let snap = |c: &Progress| {
        (
            c.pkts.load(Ordering::Relaxed),
            c.cpu_ns.load(Ordering::Relaxed),
        )
    };
    let a: Vec<(u64, u64)> = counters.iter().map(|(_, c)| snap(c)).collect();
    std::thread::sleep(Duration::from_secs(secs));
    let dt = t0.elapsed().as_secs_f64();
    for ((name, c), a) in counters.iter().zip(a) {
        let b = snap(c);
        let (dp, dc) = (b.0 - a.0, (b.1 - a.1) as f64 / 1e9);
        println!(
            "{what}: {name} {:.3} Mpps wall, thread had {:.0}% of a core, {:.3} Mpps per CPU-second (64 B)",
            dp as f64 / dt / 1e6,
            100.0 * dc / dt,
            dp as f64 / dc / 1e6
        );
    }
}

fn main() {
    let secs: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let mode = std::env::args().nth(2).unwrap_or_else(|| "native".into());
    let ns = Ns(format!("lrxrate{}", std::process::id()));
    ip(&["netns", "add", &ns.0]);
    ip(&[
        "-n", &ns.0, "link", "add", "x0", "type", "veth", "peer", "name", "x1",
    ]);
    ip(&["-n", &ns.0, "link", "set", "x0", "up"]);
    ip(&["-n", &ns.0, "link", "set", "x1", "up"]);
    let f = std::fs::File::open(format!("/run/netns/{}", ns.0)).unwrap();
    // SAFETY: setns on the main thread before any port thread is spawned (they inherit it).
    assert_eq!(unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) }, 0);

    // Phase 1: TX alone.
    let stop = Arc::new(AtomicBool::new(false));
    let txc = Arc::new(Progress::default());
    let t = {
        let (s, c) = (stop.clone(), txc.clone());
        std::thread::spawn(move || tx_loop("afxdp:x0".into(), s, c))
    };
    measure("TX only", secs, &[("tx", &txc)]);
    stop.store(true, Ordering::Relaxed);
    t.join().unwrap();

    // Phase 2: TX on core 0 into x0, RX on core 1 from x1.
    let stop = Arc::new(AtomicBool::new(false));
    let (txc, rxc) = (Arc::new(Progress::default()), Arc::new(Progress::default()));
    let ready = Arc::new(AtomicBool::new(false));
    let r = {
        let (s, c, rd) = (stop.clone(), rxc.clone(), ready.clone());
        let uri = format!("afxdp:x1?mode={mode}");
        std::thread::spawn(move || rx_loop(uri, s, c, rd))
    };
    while !ready.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let t = {
        let (s, c) = (stop.clone(), txc.clone());
        std::thread::spawn(move || tx_loop("afxdp:x0".into(), s, c))
    };
    measure(
        &format!("TX+RX ({mode})"),
        secs,
        &[("tx", &txc), ("rx", &rxc)],
    );
    stop.store(true, Ordering::Relaxed);
    t.join().unwrap();
    r.join().unwrap();
}
