//! End to end: 100 000 crafted frames of mixed sizes (60..1514 bytes, VLAN
//! and not, IPv4 and IPv6) sent from the gen namespace through `linerate
//! fwd` in the DuT namespace arrive at the sink byte for byte and in order,
//! for each of the afxdp and afpacket backends; the forwarder's final
//! account matches the kernel's interface counters.

use linerate_io::{Batch, OpenOptions, Pkt};
use linerate_measure::testbed::{Testbed, TestbedConfig};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod support;
use support::*;

/// An empty TX descriptor slot (no bytes).
// SAFETY: a null pointer with length 0 describes no memory.
const NO_PKT: Pkt = unsafe { Pkt::from_raw(std::ptr::null_mut(), 0, 0, 0) };

const N: u64 = 100_000;

/// Frame number `i` ([`mixed_frame`], to the default MAC, UDP port 9).
fn frame(i: u64, buf: &mut [u8; 1514]) -> usize {
    mixed_frame(i, None, 9, buf)
}

fn run_backend(scheme: &str) {
    run_backend_with(scheme, &[]);
}

fn run_backend_with(scheme: &str, extra: &[&str]) {
    require_root();
    let bed = Testbed::up(&TestbedConfig::default()).expect("test bed");
    let (a, b) = (format!("{scheme}:d0"), format!("{scheme}:d1"));
    let mut args = vec!["fwd", a.as_str(), b.as_str(), "--json", "--quiet"];
    args.extend_from_slice(extra);
    let mut child = spawn_in(bed.ns_dut(), &args);
    // The forwarder is ready once both ports are open: AF_XDP attaches its
    // program after the socket is bound and in the program's map; an
    // AF_PACKET socket is running once bound. The ports' rings keep every
    // frame from then on.
    if scheme == "afxdp" {
        for port in ["d0", "d1"] {
            wait_xdp(&mut child, bed.ns_dut(), port, "linerate fwd");
        }
    } else {
        wait_packet_sockets(&mut child, 2, "linerate fwd");
    }

    let received = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicBool::new(false));
    let ready = Arc::new(AtomicBool::new(false));
    let (rc, fl, rd) = (received.clone(), failed.clone(), ready.clone());
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
            while i < N && t.elapsed() < Duration::from_secs(60) {
                port.rx.recv(&mut b).unwrap();
                for p in b.pkts() {
                    let n = frame(i, &mut want);
                    if p.bytes() != &want[..n] {
                        fl.store(true, Ordering::SeqCst);
                        panic!(
                            "frame {i}: got {} bytes, want {n} (first differing bytes differ)",
                            p.len()
                        );
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
    // The sink must be listening before the first frame leaves.
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
    let rc = received.clone();
    let fl = failed.clone();
    linerate_measure::testbed::in_netns(&ns_gen, move || {
        let mut port =
            linerate_io::open("afpacket:g0?ring=mmsg", &OpenOptions::default()).expect("gen port");
        let mut bufs = vec![[0u8; 1514]; 32];
        let mut i = 0u64;
        let t = Instant::now();
        while i < N && !fl.load(Ordering::SeqCst) && t.elapsed() < Duration::from_secs(60) {
            // Window flow control: never more than 512 frames ahead of the sink,
            // so that no ring on the way overflows and the test is exact.
            if i - rc.load(Ordering::SeqCst) > 512 {
                std::thread::yield_now();
                continue;
            }
            let k = 32.min((N - i) as usize);
            let mut pk = [const { NO_PKT }; 32];
            for j in 0..k {
                let n = frame(i + j as u64, &mut bufs[j]);
                // SAFETY: one test buffer per descriptor; it outlives the descriptor and nothing else touches it meanwhile.
                pk[j] = unsafe { Pkt::from_raw(bufs[j].as_mut_ptr(), n as u32, 0, 0) };
            }
            let mut off = 0;
            while off < k {
                off += port.tx.send(&pk[off..k]).unwrap();
                port.tx.flush().unwrap();
            }
            i += k as u64;
        }
        while port.tx.in_flight() > 0 {
            port.tx.flush().unwrap();
        }
    })
    .unwrap();
    let got = sink.join().expect("sink thread");
    if got != N {
        for (ns, i) in [
            (bed.ns_gen(), "g0"),
            (bed.ns_dut(), "d0"),
            (bed.ns_dut(), "d1"),
            (bed.ns_sink(), "s0"),
        ] {
            eprintln!("{i}: {:?}", bed.iface_stats(ns, i));
        }
    }
    assert!(!failed.load(Ordering::SeqCst));
    assert_eq!(got, N, "{scheme}: frames at the sink");

    // Final account from the forwarder (SIGINT), against interface
    // counters (read once they have counted the N frames the sink got).
    let (d0, d1, s0) = wait_for(
        Duration::from_secs(10),
        "the interface counters of d0, d1 and s0 to count the frames the sink got",
        || {
            let d0 = bed.iface_stats(bed.ns_dut(), "d0").unwrap();
            let d1 = bed.iface_stats(bed.ns_dut(), "d1").unwrap();
            let s0 = bed.iface_stats(bed.ns_sink(), "s0").unwrap();
            (d0.rx_packets >= N && d1.tx_packets >= N && s0.rx_packets >= N).then_some((d0, d1, s0))
        },
    );
    let v = child.finish_json(Duration::from_secs(20), "linerate fwd");
    let ab = &v["directions"][0];
    assert_eq!(ab["direction"], "A->B");
    assert_eq!(ab["received"], N, "{scheme}: {ab}");
    assert_eq!(ab["forwarded"], N, "{scheme}: {ab}");
    assert_eq!(ab["dropped"], 0);
    assert_eq!(ab["balanced"], true);
    assert_eq!(
        v["directions"][1]["received"], 0,
        "nothing came back from the sink"
    );
    // The kernel's counters agree: what entered d0, left d1 and reached s0.
    assert_eq!(d0.rx_packets, N, "{scheme}: d0 rx_packets {d0:?}");
    assert_eq!(d1.tx_packets, N, "{scheme}: d1 tx_packets {d1:?}");
    assert_eq!(s0.rx_packets, N, "{scheme}: s0 rx_packets {s0:?}");
    bed.down().unwrap();
}

#[test]
fn fwd_afpacket_100k_mixed_frames_exact() {
    run_backend("afpacket");
}

#[test]
fn fwd_afxdp_100k_mixed_frames_exact() {
    run_backend("afxdp");
}

#[test]
fn fwd_afxdp_per_direction_cores_poll_mode_exact() {
    // One thread per direction, sleeping in poll() when idle (need_wakeup).
    run_backend_with("afxdp", &["--cores", "per-direction", "--poll", "wait"]);
}
