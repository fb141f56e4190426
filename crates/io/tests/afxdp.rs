//! The afxdp port on a veth pair in a private network namespace (root).
//!
//! Each test makes its own namespace (unique name, removed by a guard even
//! when the test fails) with a veth pair x0 <-> x1, and runs the port code
//! on a thread that joined the namespace with setns.
use linerate_io::{Batch, OpenOptions, Pkt, Port};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// An empty TX descriptor slot (no bytes).
// SAFETY: a null pointer with length 0 describes no memory.
const NO_PKT: Pkt = unsafe { Pkt::from_raw(std::ptr::null_mut(), 0, 0, 0) };

mod common;
use common::release_elsewhere_is_refused;
use linerate_testkit::{run_cmd as run, wait_until, Netns};

const ETHERTYPE: u16 = 0x88b5; // local experimental
const N: u32 = 10_000;

/// A fresh namespace with veth x0 <-> x1 up (IPv6 off: no stray frames).
fn veth_ns() -> Netns {
    let ns = Netns::one("lrxdp");
    ns.veth("x0", "x1");
    ns
}

/// Run `f` on a thread inside namespace `ns` (threads it spawns inherit it).
fn in_ns<T: Send + 'static>(ns: &Netns, f: impl FnOnce() -> T + Send + 'static) -> T {
    ns.run(f)
}

fn frame_len(i: u32) -> usize {
    60 + (i as usize * 7919) % (1514 - 60 + 1)
}

/// Frame `i`: fixed MACs, our ethertype, sequence number, patterned payload.
fn frame(i: u32, buf: &mut Vec<u8>) {
    buf.clear();
    buf.extend_from_slice(&[2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1]);
    buf.extend_from_slice(&ETHERTYPE.to_be_bytes());
    buf.extend_from_slice(&i.to_be_bytes());
    let len = frame_len(i);
    let mut j = 0u32;
    while buf.len() < len {
        buf.push((i.wrapping_mul(7).wrapping_add(j)) as u8);
        j += 1;
    }
}

fn is_ours(b: &[u8]) -> bool {
    b.len() >= 18 && b[12..14] == ETHERTYPE.to_be_bytes()
}

fn seq_of(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[14], b[15], b[16], b[17]])
}

/// A raw AF_PACKET socket bound to `ifname` for our ethertype.
struct Raw(std::os::fd::OwnedFd);
impl Raw {
    fn new(ifname: &str) -> Raw {
        use std::os::fd::FromRawFd;
        let proto = (ETHERTYPE).to_be() as i32;
        // SAFETY: plain socket call.
        let fd =
            unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, proto) };
        assert!(
            fd >= 0,
            "AF_PACKET socket: {}",
            std::io::Error::last_os_error()
        );
        // SAFETY: fresh fd.
        let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
        let c = std::ffi::CString::new(ifname).unwrap();
        // SAFETY: valid C string.
        let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
        assert!(idx > 0);
        // SAFETY: zeroed sockaddr_ll, then filled.
        let mut sa: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sa.sll_family = libc::AF_PACKET as u16;
        sa.sll_protocol = ETHERTYPE.to_be();
        sa.sll_ifindex = idx as i32;
        // SAFETY: valid sockaddr_ll.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                &sa as *const _ as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        assert_eq!(rc, 0, "bind: {}", std::io::Error::last_os_error());
        let big: libc::c_int = 64 << 20;
        // SAFETY: int option.
        unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUFFORCE,
                &big as *const _ as *const libc::c_void,
                4,
            );
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_SNDBUFFORCE,
                &big as *const _ as *const libc::c_void,
                4,
            );
        }
        Raw(fd)
    }
    fn send(&self, b: &[u8]) {
        loop {
            // SAFETY: b is a valid buffer.
            let rc = unsafe { libc::send(self.0.as_raw_fd(), b.as_ptr() as *const _, b.len(), 0) };
            if rc == b.len() as isize {
                return;
            }
            let e = std::io::Error::last_os_error();
            assert!(
                matches!(e.raw_os_error(), Some(libc::ENOBUFS) | Some(libc::EAGAIN)),
                "send: {e}"
            );
            std::thread::sleep(Duration::from_micros(50));
        }
    }
    /// One frame, or None after `timeout`.
    fn recv(&self, buf: &mut [u8], timeout: Duration) -> Option<usize> {
        let mut pfd = libc::pollfd {
            fd: self.0.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd.
        if unsafe { libc::poll(&mut pfd, 1, timeout.as_millis() as i32) } <= 0 {
            return None;
        }
        // SAFETY: buf is writable.
        let rc = unsafe {
            libc::recv(
                self.0.as_raw_fd(),
                buf.as_mut_ptr() as *mut _,
                buf.len(),
                libc::MSG_DONTWAIT,
            )
        };
        (rc > 0).then_some(rc as usize)
    }
}

fn opts() -> OpenOptions {
    OpenOptions {
        ring_size: 2048,
        frame_size: 2048,
        busy_poll: false,
        ..OpenOptions::default()
    }
}

fn open(uri: &str) -> Port {
    linerate_io::open(uri, &opts()).unwrap_or_else(|e| panic!("{e}"))
}

/// Wait until no XDP program is attached to `ifname` (the kernel releases
/// a bpf_link on the last close asynchronously); fails with `what` if one
/// still is after 10 s.
fn wait_no_xdp(ns: &Netns, ifname: &str, what: &str) {
    wait_until(Duration::from_secs(10), what, || {
        !ns.ip(&["link", "show", ifname]).contains("xdp")
    });
}

/// Receive N frames through an afxdp port on x1 while a raw socket sends them into x0.
fn rx_test(mode: &'static str) {
    let ns = veth_ns();
    let uri = format!("afxdp:x1?queue=0&mode={mode}");
    let info = in_ns(&ns, move || {
        let mut port = open(&uri);
        let info = port.info.clone();
        let received = Arc::new(AtomicU64::new(0));
        let rcv = received.clone();
        let sender = std::thread::spawn(move || {
            let raw = Raw::new("x0");
            let mut buf = Vec::new();
            for i in 0..N {
                // Keep at most 512 frames in flight (veth's NAPI ring is 256
                // per queue, backlog 1000): this test checks correctness.
                let t = Instant::now();
                while (i as u64).saturating_sub(rcv.load(Ordering::Relaxed)) > 512 {
                    assert!(
                        t.elapsed() < Duration::from_secs(10),
                        "receiver stalled at {i}"
                    );
                    std::thread::yield_now();
                }
                frame(i, &mut buf);
                raw.send(&buf);
            }
        });
        let mut batch = Batch::new(64);
        let mut want = 0u32;
        let mut expect = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        while want < N {
            assert!(
                Instant::now() < deadline,
                "timed out at frame {want} ({mode})"
            );
            let n = port.rx.recv(&mut batch).unwrap();
            if n == 0 {
                port.rx.wait(10).unwrap();
                continue;
            }
            for p in batch.pkts() {
                let b = p.bytes();
                if !is_ours(b) {
                    continue;
                }
                assert_eq!(seq_of(b), want, "order ({mode})");
                frame(want, &mut expect);
                assert_eq!(b, &expect[..], "bytes of frame {want} ({mode})");
                want += 1;
            }
            port.rx.release(&mut batch).unwrap();
            received.store(want as u64, Ordering::Relaxed);
        }
        sender.join().unwrap();
        let ks = port.rx.kernel_stats();
        assert_eq!(ks.get("rx_dropped"), Some(0), "{ks:?}");
        info
    });
    assert_eq!(info.kind, "afxdp");
    assert!(
        info.detail
            .starts_with(&format!("{mode} XDP, copy mode, queue 0")),
        "{}",
        info.detail
    );
    assert_eq!(info.clock, "none");
    assert_eq!(info.ifname.as_deref(), Some("x1"));
    assert!(info.ifindex.is_some());
    wait_no_xdp(&ns, "x1", "XDP program on x1 gone after the drop");
}

#[test]
fn rx_native_10k_in_order() {
    rx_test("native");
}

#[test]
fn rx_generic_10k_in_order() {
    rx_test("generic");
}

#[test]
fn tx_10k_to_raw_socket() {
    let ns = veth_ns();
    in_ns(&ns, || {
        let raw = Raw::new("x1");
        let mut port = open("afxdp:x0");
        assert!(port.tx.max_frame() >= 1514);
        let received = Arc::new(AtomicU64::new(0));
        let rcv = received.clone();
        let receiver = std::thread::spawn(move || {
            let mut buf = vec![0u8; 4096];
            let mut expect = Vec::new();
            let mut want = 0u32;
            while want < N {
                let n = raw
                    .recv(&mut buf, Duration::from_secs(5))
                    .unwrap_or_else(|| panic!("no frame {want} within 5 s"));
                let b = &buf[..n];
                assert_eq!(seq_of(b), want, "order");
                frame(want, &mut expect);
                assert_eq!(b, &expect[..], "bytes of frame {want}");
                want += 1;
                rcv.store(want as u64, Ordering::Relaxed);
            }
        });
        let mut bufs: Vec<Vec<u8>> = (0..32).map(|_| Vec::new()).collect();
        let mut pkts = [const { NO_PKT }; 32];
        let mut next = 0u32;
        let deadline = Instant::now() + Duration::from_secs(30);
        while next < N {
            assert!(Instant::now() < deadline, "TX stalled at {next}");
            port.tx.flush().unwrap();
            // Window below the peer's backlog (1000): correctness, not speed.
            if next as u64 - received.load(Ordering::Relaxed) > 512 {
                std::thread::yield_now();
                continue;
            }
            let k = (N - next).min(32) as usize;
            for j in 0..k {
                frame(next + j as u32, &mut bufs[j]);
                // SAFETY: one test buffer per descriptor; it outlives the descriptor and nothing else touches it meanwhile.
                pkts[j] =
                    unsafe { Pkt::from_raw(bufs[j].as_mut_ptr(), bufs[j].len() as u32, 0, 0) };
            }
            let sent = port.tx.send(&pkts[..k]).unwrap();
            next += sent as u32;
        }
        while port.tx.in_flight() > 0 {
            assert!(Instant::now() < deadline, "completions missing");
            port.tx.flush().unwrap();
            std::thread::yield_now();
        }
        receiver.join().unwrap();
        let ks = port.tx.kernel_stats();
        assert_eq!(ks.get("tx_invalid_descs"), Some(0), "{ks:?}");
        assert_eq!(ks.get("tx_too_big"), Some(0), "{ks:?}");
    });
    wait_no_xdp(&ns, "x0", "XDP program on x0 gone after the drop");
}

#[test]
fn too_big_is_taken_and_counted() {
    let ns = veth_ns();
    in_ns(&ns, || {
        let mut port = open("afxdp:x0");
        let mut big = vec![0u8; 1600];
        let mut ok = Vec::new();
        frame(0, &mut ok);
        let pkts = [
            // SAFETY: one test buffer per descriptor; it outlives the descriptor and nothing else touches it meanwhile.
            unsafe { Pkt::from_raw(big.as_mut_ptr(), 1600, 0, 0) },
            unsafe { Pkt::from_raw(ok.as_mut_ptr(), ok.len() as u32, 0, 0) },
        ];
        assert_eq!(port.tx.send(&pkts).unwrap(), 2);
        assert_eq!(port.tx.kernel_stats().get("tx_too_big"), Some(1));
    });
}

#[test]
fn reopen_after_drop_and_panic() {
    let ns = veth_ns();
    in_ns(&ns, || {
        for round in 0..3 {
            let t = Instant::now();
            let mut port = open("afxdp:x1?queue=0");
            let mut b = Batch::new(8);
            port.rx.recv(&mut b).unwrap();
            port.rx.release(&mut b).unwrap();
            drop(port);
            eprintln!("round {round}: open+drop took {:?}", t.elapsed());
        }
        // Unwinding out of a panic releases the port too.
        let r = std::panic::catch_unwind(|| {
            let _port = open("afxdp:x1?queue=0");
            panic!("on purpose");
        });
        assert!(r.is_err());
        let port = open("afxdp:x1?queue=0");
        // Halves dropped on different threads, TX half last.
        let Port { rx, tx, .. } = port;
        std::thread::spawn(move || drop(rx)).join().unwrap();
        drop(tx);
        drop(open("afxdp:x1?queue=0"));
    });
    wait_no_xdp(&ns, "x1", "XDP program on x1 gone after the drop");
}

#[test]
fn zerocopy_on_veth_falls_back_to_copy() {
    let ns = veth_ns();
    let detail = in_ns(&ns, || open("afxdp:x1?zerocopy=1&mode=native").info.detail);
    assert!(detail.contains("copy mode"), "{detail}");
    assert!(detail.contains("zero-copy not supported"), "{detail}");
}

#[test]
fn mode_default_is_native() {
    let ns = veth_ns();
    let detail = in_ns(&ns, || open("afxdp:x1").info.detail);
    assert!(
        detail.starts_with("native XDP, copy mode, queue 0, need_wakeup, 2048-frame rings"),
        "{detail}"
    );
}

#[test]
fn one_line_errors() {
    let ns = veth_ns();
    in_ns(&ns, || {
        let e = |u: &str| match linerate_io::open(u, &opts()) {
            Ok(_) => panic!("{u} opened"),
            Err(e) => {
                assert!(!e.0.contains('\n'), "{e}");
                eprintln!("{e}");
                e.0
            }
        };
        let m = e("afxdp:nope0");
        assert!(m.contains("no interface named 'nope0'"), "{m}");
        let m = e("afxdp:x1?queue=3");
        assert!(
            m.contains("queue 3 does not exist") && m.contains("1 RX queue"),
            "{m}"
        );
        let m = e("afxdp:x1?mode=turbo");
        assert!(
            m.contains("'mode'") && m.contains("native or generic"),
            "{m}"
        );
        let m = e("afxdp:x1?zerocopy=maybe");
        assert!(m.contains("zerocopy"), "{m}");
        let m = e("afxdp:x1?colour=red");
        assert!(m.contains("unknown parameter 'colour'"), "{m}");
        // Two sockets on one queue: the second one is refused, in one line.
        let _a = open("afxdp:x1");
        let m = e("afxdp:x1");
        assert!(m.contains("in use by another AF_XDP socket"), "{m}");
    });
}

#[test]
fn kernel_stats_names() {
    let ns = veth_ns();
    in_ns(&ns, || {
        let port = open("afxdp:x1");
        for ks in [port.rx.kernel_stats(), port.tx.kernel_stats()] {
            for name in [
                "rx_dropped",
                "rx_invalid_descs",
                "tx_invalid_descs",
                "rx_ring_full",
                "rx_fill_ring_empty_descs",
                "tx_ring_empty_descs",
            ] {
                assert_eq!(ks.get(name), Some(0), "{name} in {ks:?}");
            }
        }
    });
}

/// Drop every capability from the effective set of the calling thread only.
fn drop_caps_this_thread() {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let mut h = Header {
        version: 0x2008_0522,
        pid: 0,
    };
    let mut d = [Data::default(); 2];
    // SAFETY: capget/capset with a v3 header and two data words, this thread only.
    unsafe {
        assert_eq!(libc::syscall(libc::SYS_capget, &mut h, d.as_mut_ptr()), 0);
        d[0].effective = 0;
        d[1].effective = 0;
        assert_eq!(libc::syscall(libc::SYS_capset, &h, d.as_ptr()), 0);
    }
}

#[test]
fn without_privileges_says_so() {
    let ns = veth_ns();
    let m = in_ns(&ns, || {
        drop_caps_this_thread();
        match linerate_io::open("afxdp:x1", &opts()) {
            Ok(_) => panic!("opened without capabilities"),
            Err(e) => e.0,
        }
    });
    assert!(m.contains("permission denied") && m.contains("root"), "{m}");
    assert!(!m.contains('\n'));
}

/// afxdp TX on x0 into afxdp RX on x1 (native XDP on x1): the frames sent by
/// an AF_XDP socket go through veth's NAPI and x1's XDP program.
#[test]
fn afxdp_to_afxdp_10k() {
    let ns = veth_ns();
    in_ns(&ns, || {
        let Port { mut rx, .. } = open("afxdp:x1?mode=native");
        let Port { mut tx, .. } = open("afxdp:x0?mode=generic");
        let received = Arc::new(AtomicU64::new(0));
        let rcv = received.clone();
        let receiver = std::thread::spawn(move || {
            let mut batch = Batch::new(64);
            let mut want = 0u32;
            let mut expect = Vec::new();
            let deadline = Instant::now() + Duration::from_secs(30);
            while want < N {
                assert!(Instant::now() < deadline, "timed out at frame {want}");
                if rx.recv(&mut batch).unwrap() == 0 {
                    rx.wait(10).unwrap();
                    continue;
                }
                for p in batch.pkts() {
                    let b = p.bytes();
                    assert_eq!(seq_of(b), want, "order");
                    frame(want, &mut expect);
                    assert_eq!(b, &expect[..], "bytes of frame {want}");
                    want += 1;
                }
                rx.release(&mut batch).unwrap();
                rcv.store(want as u64, Ordering::Relaxed);
            }
            rx.kernel_stats()
        });
        let mut bufs: Vec<Vec<u8>> = (0..64).map(|_| Vec::new()).collect();
        let mut pkts = [const { NO_PKT }; 64];
        let mut next = 0u32;
        let deadline = Instant::now() + Duration::from_secs(30);
        while next < N {
            assert!(Instant::now() < deadline, "TX stalled at {next}");
            tx.flush().unwrap();
            // Stay below the 2048-frame RX ring: correctness, not speed.
            if next as u64 - received.load(Ordering::Relaxed) > 1024 {
                std::thread::yield_now();
                continue;
            }
            let k = (N - next).min(64) as usize;
            for j in 0..k {
                frame(next + j as u32, &mut bufs[j]);
                // SAFETY: one test buffer per descriptor; it outlives the descriptor and nothing else touches it meanwhile.
                pkts[j] =
                    unsafe { Pkt::from_raw(bufs[j].as_mut_ptr(), bufs[j].len() as u32, 0, 0) };
            }
            next += tx.send(&pkts[..k]).unwrap() as u32;
        }
        let ks = receiver.join().unwrap();
        assert_eq!(ks.get("rx_ring_full"), Some(0), "{ks:?}");
        assert_eq!(ks.get("rx_dropped"), Some(0), "{ks:?}");
    });
}

#[test]
fn multiqueue_veth_queue_index() {
    let ns = veth_ns();
    let n = ns.name();
    run(&[
        "ip",
        "-n",
        n,
        "link",
        "add",
        "m0",
        "numtxqueues",
        "4",
        "numrxqueues",
        "4",
        "type",
        "veth",
        "peer",
        "name",
        "m1",
        "numtxqueues",
        "4",
        "numrxqueues",
        "4",
    ]);
    run(&["ip", "-n", n, "link", "set", "m1", "up"]);
    let (detail, err) = in_ns(&ns, || {
        let p = open("afxdp:m1?queue=2");
        let e = linerate_io::open("afxdp:m1?queue=4", &opts())
            .err()
            .unwrap()
            .0;
        (p.info.detail.clone(), e)
    });
    assert!(detail.contains("queue 2"), "{detail}");
    assert!(
        err.contains("queue 4 does not exist") && err.contains("4 RX queues"),
        "{err}"
    );
}

/// A batch of one AF_XDP socket released into another is refused and
/// changes nothing: its UMEM addresses would go into the other socket's
/// fill ring (frames of another UMEM, or frames still in use). Sockets on
/// both ends of a veth; the right socket takes the batch back, and both
/// keep receiving.
#[test]
fn a_batch_goes_back_only_to_its_own_port() {
    let ns = veth_ns();
    in_ns(&ns, || {
        let mut a = open("afxdp:x1?mode=native");
        let mut b = open("afxdp:x0?mode=native");
        let (to_a, to_b) = (Raw::new("x0"), Raw::new("x1"));
        let mut buf = Vec::new();
        let recv_one = |p: &mut Port, what: &str| -> Batch {
            let mut batch = Batch::new(8);
            let t = Instant::now();
            loop {
                if p.rx.recv(&mut batch).unwrap() > 0 {
                    return batch;
                }
                assert!(t.elapsed() < Duration::from_secs(5), "{what} never arrived");
                p.rx.wait(100).unwrap();
            }
        };
        for k in 0..3u32 {
            frame(k, &mut buf);
            to_a.send(&buf);
            let mut batch = recv_one(&mut a, "the frame to x1");
            assert_eq!(batch.pkts()[0].bytes(), &buf[..]);
            release_elsewhere_is_refused(a.rx.as_mut(), b.rx.as_mut(), &mut batch);
            to_b.send(&buf);
            let mut own = recv_one(&mut b, "the frame to x0");
            assert_eq!(own.pkts()[0].bytes(), &buf[..]);
            b.rx.release(&mut own).unwrap();
        }
        for p in [&a, &b] {
            let k = p.rx.kernel_stats();
            assert_eq!(k.get("rx_bad_release"), Some(0), "{k:?}");
            assert_eq!(k.get("rx_bad_desc"), Some(0), "{k:?}");
        }
    });
}
