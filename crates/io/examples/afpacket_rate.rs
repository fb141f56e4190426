//! Quick single-core rates of the afpacket port on a veth pair (root).
//!
//! `cargo run --release -p linerate-io --example afpacket_rate -- [v3|mmsg] [SECONDS] [LEN] [EXTRA_PARAMS]`
//!
//! Makes a private namespace with a veth pair va <-> vb and measures, with
//! `LEN`-byte frames (default 64 without FCS: 60):
//! 1. TX only: one thread (CPU 0) sends through `afpacket:va` as fast as it can;
//! 2. TX + RX: the same sender on CPU 0 and one receiver on `afpacket:vb` on CPU 1.
//!
//! On veth the receive work of the kernel (delivery into the ring) runs on the
//! sender's CPU, so the receiver's rate is bounded by the sender.
use linerate_io::{open, Batch, OpenOptions, Pkt};
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

fn sh(args: &[&str]) {
    let st = Command::new(args[0])
        .args(&args[1..])
        .status()
        .expect("run");
    assert!(st.success(), "{args:?} failed");
}

fn pin(cpu: usize) {
    // SAFETY: cpu_set_t is plain data; sched_setaffinity on the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// CPU time used by the calling thread, in seconds.
fn thread_cpu() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let ring = args.get(1).cloned().unwrap_or_else(|| "v3".into());
    let secs: f64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(2.0);
    let len: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(60);
    let extra = args.get(4).cloned().unwrap_or_default();
    let ns = Ns(format!("lrrate{}", std::process::id()));
    sh(&["ip", "netns", "add", &ns.0]);
    let f = std::fs::File::open(format!("/run/netns/{}", ns.0)).unwrap();
    // SAFETY: setns of the main thread before any other thread exists; threads
    // spawned later and child processes inherit the namespace.
    assert_eq!(unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) }, 0);
    sh(&[
        "sysctl",
        "-qw",
        "net.ipv6.conf.all.disable_ipv6=1",
        "net.ipv6.conf.default.disable_ipv6=1",
    ]);
    sh(&[
        "ip", "link", "add", "va", "type", "veth", "peer", "name", "vb",
    ]);
    sh(&["ip", "link", "set", "va", "up"]);
    sh(&["ip", "link", "set", "vb", "up"]);
    let opts = OpenOptions::default();
    let sfx = if extra.is_empty() {
        String::new()
    } else {
        format!("&{extra}")
    };
    let mut frame = vec![0u8; len];
    frame[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    frame[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    frame[12..14].copy_from_slice(&0x88B5u16.to_be_bytes());
    let frame = Arc::new(frame);

    for with_rx in [false, true] {
        let tx =
            open(&format!("afpacket:va?ring={ring}{sfx}"), &opts).unwrap_or_else(|e| panic!("{e}"));
        let rx =
            open(&format!("afpacket:vb?ring={ring}{sfx}"), &opts).unwrap_or_else(|e| panic!("{e}"));
        if !with_rx {
            println!("{}: {}", tx.info.uri, tx.info.detail);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(AtomicU64::new(0));
        let sender = {
            let (stop, sent, frame) = (stop.clone(), sent.clone(), frame.clone());
            let mut tx = tx;
            std::thread::spawn(move || {
                pin(0);
                let mut frames: Vec<Vec<u8>> = (0..64).map(|_| frame.to_vec()).collect();
                // SAFETY: one buffer per descriptor; `frames` outlives `pkts`
                // and is only read (by send) while they live.
                let pkts: Vec<Pkt> = frames
                    .iter_mut()
                    .map(|f| unsafe { Pkt::from_raw(f.as_mut_ptr(), f.len() as u32, 0, 0) })
                    .collect();
                let mut n = 0u64;
                let c0 = thread_cpu();
                while !stop.load(Ordering::Relaxed) {
                    n += tx.tx.send(&pkts).unwrap() as u64;
                    tx.tx.flush().unwrap();
                }
                sent.store(n, Ordering::Relaxed);
                (tx, thread_cpu() - c0)
            })
        };
        let receiver = {
            let stop = stop.clone();
            let mut rx = rx;
            std::thread::spawn(move || {
                pin(1);
                let mut b = Batch::new(64);
                let mut n = 0u64;
                let c0 = thread_cpu();
                if with_rx {
                    while !stop.load(Ordering::Relaxed) {
                        n += rx.rx.recv(&mut b).unwrap() as u64;
                        rx.rx.release(&mut b).unwrap();
                    }
                }
                (n, rx, thread_cpu() - c0)
            })
        };
        let t = Instant::now();
        std::thread::sleep(Duration::from_secs_f64(secs));
        stop.store(true, Ordering::Relaxed);
        let el = t.elapsed().as_secs_f64();
        let (_tx, tx_cpu) = sender.join().unwrap();
        let (got, rx, rx_cpu) = receiver.join().unwrap();
        let s = sent.load(Ordering::Relaxed);
        let k = rx.rx.kernel_stats();
        if with_rx {
            println!(
                "  TX+RX ({len}-byte frames): tx {:.3} Mpps ({:.3} per CPU-second), rx {:.3} Mpps ({:.3} per CPU-second), kernel {:?}",
                s as f64 / el / 1e6,
                s as f64 / tx_cpu / 1e6,
                got as f64 / el / 1e6,
                got as f64 / rx_cpu / 1e6,
                k.counters
            );
        } else {
            println!(
                "  TX only ({len}-byte frames): {:.3} Mpps ({:.3} per CPU-second)",
                s as f64 / el / 1e6,
                s as f64 / tx_cpu / 1e6
            );
        }
    }
}
