//! The afpacket port over a veth pair in a private namespace: byte-exact,
//! in-order delivery (TPACKET_V3 ring and recvmmsg/sendmmsg), kernel
//! counters, hash fanout, and the one-line errors. Needs root.
mod common;

use common::release_elsewhere_is_refused;
use linerate_io::{open, Batch, OpenOptions, Pkt, Port};
use linerate_testkit::{require_root, Netns};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const MAGIC: [u8; 4] = *b"LRAT";
const N: usize = 10_000;

/// Frame `seq`: a size in 60..=1514 and contents derived from `seq`.
/// `udp_flows > 0`: an IPv4/UDP frame of flow `seq % udp_flows`, else EtherType 0x88B5.
fn frame(seq: u32, udp_flows: u32) -> Vec<u8> {
    let len = 60 + (seq as usize * 7919) % (1514 - 60 + 1);
    let mut f = vec![0u8; len];
    f[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x02]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
    let payload_at;
    if udp_flows > 0 {
        let flow = seq % udp_flows;
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        let ip = &mut f[14..34];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&((len - 14) as u16).to_be_bytes());
        ip[8] = 64;
        ip[9] = 17;
        ip[12..16].copy_from_slice(&[10, 0, (flow >> 8) as u8, flow as u8]);
        ip[16..20].copy_from_slice(&[10, 1, 0, 1]);
        let mut sum = 0u32;
        for c in ip.chunks(2) {
            sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
        }
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        ip[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
        let udp = &mut f[34..42];
        udp[0..2].copy_from_slice(&(1000 + flow as u16).to_be_bytes());
        udp[2..4].copy_from_slice(&9u16.to_be_bytes());
        udp[4..6].copy_from_slice(&((len - 34) as u16).to_be_bytes());
        payload_at = 42;
    } else {
        f[12..14].copy_from_slice(&0x88B5u16.to_be_bytes());
        payload_at = 14;
    }
    f[payload_at..payload_at + 4].copy_from_slice(&MAGIC);
    f[payload_at + 4..payload_at + 8].copy_from_slice(&seq.to_be_bytes());
    for (i, b) in f[payload_at + 8..].iter_mut().enumerate() {
        *b = (seq as usize).wrapping_mul(31).wrapping_add(i) as u8;
    }
    f
}

/// Frame `seq` with an 802.1Q tag (VID from `seq`) after the MAC addresses.
fn vlan_frame(seq: u32) -> Vec<u8> {
    let mut f = frame(seq, 0);
    let tci = 0x2000u16 | (seq % 4000 + 1) as u16;
    let mut tag = 0x8100u16.to_be_bytes().to_vec();
    tag.extend_from_slice(&tci.to_be_bytes());
    f.splice(12..12, tag);
    f.truncate(1514);
    f
}

/// The sequence number of one of our frames, None for anything else.
fn seq_of(b: &[u8]) -> Option<u32> {
    for at in [14usize, 18, 42] {
        if b.len() >= at + 8 && b[at..at + 4] == MAGIC {
            return Some(u32::from_be_bytes(b[at + 4..at + 8].try_into().unwrap()));
        }
    }
    None
}

/// Open `tx_uri` and `rx_uri` (each list of RX ports) inside the namespace.
fn open_in(ns: &Netns, uris: &[&str], opts: &OpenOptions) -> Vec<Port> {
    let uris: Vec<String> = uris.iter().map(|s| s.to_string()).collect();
    let opts = opts.clone();
    ns.run(move || {
        uris.iter()
            .map(|u| open(u, &opts).unwrap_or_else(|e| panic!("{e}")))
            .collect()
    })
}

/// Send frames 0..n through `port.tx`, never more than `window` ahead of `received`.
fn send_all(
    port: &mut Port,
    frames: &[Vec<u8>],
    window: usize,
    batch: usize,
    received: &AtomicUsize,
    stop: &AtomicBool,
) {
    let pkts: Vec<Pkt> = frames
        .iter()
        // SAFETY: one test buffer per descriptor; it outlives the descriptor and nothing else touches it meanwhile.
        .map(|f| unsafe { Pkt::from_raw(f.as_ptr() as *mut u8, f.len() as u32, 0, 0) })
        .collect();
    let mut sent = 0;
    let mut last = Instant::now();
    while sent < pkts.len() {
        assert!(!stop.load(Ordering::Relaxed), "receiver gave up");
        let room = (received.load(Ordering::Acquire) + window).saturating_sub(sent);
        let n = room.min(batch).min(pkts.len() - sent);
        if n == 0 {
            port.tx.flush().unwrap();
            std::thread::yield_now();
            assert!(
                last.elapsed() < Duration::from_secs(10),
                "sender stuck at {sent}"
            );
            continue;
        }
        let k = port.tx.send(&pkts[sent..sent + n]).unwrap();
        if k > 0 {
            last = Instant::now();
        }
        sent += k;
        port.tx.flush().unwrap();
    }
    let t = Instant::now();
    while port.tx.in_flight() > 0 && t.elapsed() < Duration::from_secs(5) {
        port.tx.flush().unwrap();
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(port.tx.in_flight(), 0, "TX frames never came back");
}

/// Receive until `n` of our frames arrived; returns (our seqs in order, all frames seen).
/// `hold`: keep this many batches before releasing them (newest first).
fn recv_all(
    port: &mut Port,
    n: usize,
    batch: usize,
    hold: usize,
    received: &AtomicUsize,
    check: impl Fn(u32, &[u8]),
) -> (Vec<u32>, usize) {
    let mut seqs = Vec::with_capacity(n);
    let mut all = 0;
    let mut held: Vec<Batch> = (0..=hold).map(|_| Batch::new(batch)).collect();
    let mut which = 0;
    let t = Instant::now();
    while seqs.len() < n {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "only {} of {n} frames arrived",
            seqs.len()
        );
        let b = &mut held[which];
        let got = port.rx.recv(b).unwrap();
        if got == 0 {
            port.rx.wait(10).unwrap();
            continue;
        }
        for p in b.pkts() {
            all += 1;
            if let Some(s) = seq_of(p.bytes()) {
                check(s, p.bytes());
                seqs.push(s);
            }
        }
        received.store(seqs.len(), Ordering::Release);
        which += 1;
        if which > hold {
            // Release the held batches newest first (out of order on purpose).
            for b in held.iter_mut().rev() {
                port.rx.release(b).unwrap();
            }
            which = 0;
        }
    }
    for b in held.iter_mut() {
        port.rx.release(b).unwrap();
    }
    (seqs, all)
}

/// One direction va -> vb: every frame arrives byte for byte and in order,
/// the kernel counters agree.
fn transfer(tx_params: &str, rx_params: &str, batch: usize, hold: usize, window: usize) {
    transfer_frames(tx_params, rx_params, batch, hold, window, |s| frame(s, 0));
}

fn transfer_frames(
    tx_params: &str,
    rx_params: &str,
    batch: usize,
    hold: usize,
    window: usize,
    make: fn(u32) -> Vec<u8>,
) {
    require_root();
    let ns = Netns::one("lrap");
    ns.veth("va", "vb");
    let opts = OpenOptions {
        batch,
        ..OpenOptions::default()
    };
    let mut ports = open_in(
        &ns,
        &[
            &format!("afpacket:va?{tx_params}"),
            &format!("afpacket:vb?{rx_params}"),
        ],
        &opts,
    );
    let mut rxp = ports.pop().unwrap();
    let mut txp = ports.pop().unwrap();
    assert_eq!(rxp.info.kind, "afpacket");
    assert_eq!(rxp.info.ifname.as_deref(), Some("vb"));
    assert!(rxp.info.ifindex.is_some());
    let frames: Arc<Vec<Vec<u8>>> = Arc::new((0..N as u32).map(make).collect());
    let received = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let sender = {
        let (frames, received, stop) = (frames.clone(), received.clone(), stop.clone());
        std::thread::spawn(move || {
            send_all(&mut txp, &frames, window, batch, &received, &stop);
            txp
        })
    };
    let f2 = frames.clone();
    let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        recv_all(&mut rxp, N, batch, hold, &received, |s, b| {
            assert_eq!(b, &f2[s as usize][..], "frame {s} differs");
        })
    }));
    stop.store(true, Ordering::Relaxed);
    let txp = sender.join();
    let (seqs, all) = res.unwrap_or_else(|p| std::panic::resume_unwind(p));
    let txp = txp.unwrap_or_else(|p| std::panic::resume_unwind(p));
    for (i, s) in seqs.iter().enumerate() {
        assert_eq!(*s as usize, i, "out of order at {i}");
    }
    // Counters: everything the socket saw was received by us, nothing dropped.
    let k1 = rxp.rx.kernel_stats();
    let k2 = rxp.rx.kernel_stats();
    assert_eq!(k1.get("tp_packets"), Some(all as u64), "{k1:?}");
    assert_eq!(k1.get("tp_drops"), Some(0), "{k1:?}");
    // Accumulated, not reset by the second read.
    assert_eq!(k2.get("tp_packets"), Some(all as u64), "{k2:?}");
    assert_eq!(all, N, "stray frames on the test link");
    let kt = txp.tx.kernel_stats();
    assert_eq!(kt.drops(), 0, "{kt:?}");
}

#[test]
fn v3_to_v3_exact_and_in_order() {
    transfer("ring=v3", "ring=v3", 64, 0, 4096);
}

#[test]
fn mmsg_to_mmsg_exact_and_in_order() {
    transfer("ring=mmsg", "ring=mmsg", 64, 0, 1024);
}

#[test]
fn mmsg_to_v3_and_v3_to_mmsg() {
    transfer("ring=mmsg&qdisc_bypass=0", "ring=v3", 32, 0, 2048);
    transfer("ring=v3&qdisc_bypass=0", "ring=mmsg", 32, 0, 1024);
}

/// The kernel takes VLAN tags out of received frames (into metadata); both
/// RX paths put them back, so tagged frames arrive unchanged.
#[test]
fn vlan_tags_survive() {
    transfer_frames("ring=v3", "ring=v3", 64, 0, 2048, vlan_frame);
    transfer_frames("ring=mmsg", "ring=mmsg", 64, 0, 1024, vlan_frame);
}

/// A tiny ring (8 blocks of 16 KiB) wraps ~500 times while the receiver
/// keeps two batches of 7 (spanning block ends) and releases them out of order.
#[test]
fn v3_small_ring_wraps_with_held_batches() {
    transfer(
        "ring=v3&frame_size=2048",
        "ring=v3&blocks=8&block_size=16384&tov_ms=1",
        7,
        1,
        8,
    );
}

#[test]
fn v2_exact_in_order_with_vlan_tags() {
    transfer("ring=v3", "ring=v2", 64, 0, 4096);
    transfer_frames("ring=v2", "ring=v2", 64, 0, 2048, vlan_frame);
}

/// A 16-frame V2 ring wraps thousands of times while the receiver keeps two
/// batches of 7 and releases them out of order: no frame is handed out twice
/// (a held frame still says TP_STATUS_USER when the ring laps it).
#[test]
fn v2_small_ring_wraps_with_held_batches() {
    transfer(
        "ring=v3&frame_size=2048",
        "ring=v2&blocks=2&block_size=16384&frame_size=2048",
        7,
        1,
        8,
    );
}

/// Send one frame through `port.tx` and flush it.
fn send_one(port: &mut Port, f: &[u8]) {
    // SAFETY: the caller's buffer outlives the descriptor, which the port
    // only reads (copied into its TX ring before send returns).
    let p = unsafe { Pkt::from_raw(f.as_ptr() as *mut u8, f.len() as u32, 0, 0) };
    assert_eq!(port.tx.send(std::slice::from_ref(&p)).unwrap(), 1);
    port.tx.flush().unwrap();
}

/// The first batch `port.rx` hands out (2 s at most, or the test fails
/// naming `what`).
fn recv_some(port: &mut Port, what: &str) -> Batch {
    let t = Instant::now();
    let mut b = Batch::new(8);
    while port.rx.recv(&mut b).unwrap() == 0 {
        assert!(t.elapsed() < Duration::from_secs(2), "{what} never arrived");
        port.rx.wait(100).unwrap();
    }
    b
}

/// `port.rx` hands out exactly the frame `want` (named `what`), and its
/// count of frames cut by the kernel is `truncated`.
fn recv_only(port: &mut Port, want: &[u8], what: &str, truncated: u64) {
    let mut b = recv_some(port, what);
    assert_eq!(b.len(), 1, "{what}");
    assert_eq!(b.pkts()[0].bytes(), want, "{what}");
    port.rx.release(&mut b).unwrap();
    assert_eq!(
        port.rx.kernel_stats().get("rx_truncated_drops"),
        Some(truncated),
        "{what}"
    );
}

/// A frame longer than a V2 ring frame holds arrives cut by the kernel: it
/// is dropped and counted (rx_truncated_drops), not passed on cut.
#[test]
fn v2_drops_and_counts_frames_longer_than_its_frames() {
    require_root();
    let ns = Netns::one("lrap2");
    ns.veth("va", "vb");
    let opts = OpenOptions::default();
    let mut ports = open_in(
        &ns,
        &["afpacket:va", "afpacket:vb?ring=v2&frame_size=512"],
        &opts,
    );
    let mut rx = ports.pop().unwrap();
    let mut tx = ports.pop().unwrap();
    let (long, short) = (frame(1, 0), frame(0, 0));
    assert!(long.len() > 512 && short.len() < 400);
    for f in [&long, &short] {
        send_one(&mut tx, f);
    }
    recv_only(&mut rx, &short, "the short frame", 1);
}

/// The default V2 ring's frames are sized to the interface's MTU: a frame
/// of the largest size the MTU allows arrives whole, at MTU 1500 and at a
/// jumbo MTU (fewer, larger frames: the ring stays within 64 MiB).
#[test]
fn v2_default_frames_hold_an_mtu_sized_frame() {
    require_root();
    let ns = Netns::one("lrap3");
    ns.veth("va", "vb");
    let busy = OpenOptions {
        busy_poll: true,
        ..OpenOptions::default()
    };
    for (mtu, ring) in [(1500usize, "32768x1600"), (9000, "7360x9088")] {
        for i in ["va", "vb"] {
            ns.ip(&["link", "set", i, "mtu", &mtu.to_string()]);
        }
        let mut tx = open_in(&ns, &["afpacket:va?ring=v3&frame_size=16384"], &busy).remove(0);
        let mut rx = open_in(&ns, &["afpacket:vb"], &busy).remove(0);
        let d = &rx.info.detail;
        assert!(d.starts_with(&format!("TPACKET_V2 rx ring {ring}")), "{d}");
        let mut f = vec![0u8; mtu + 14];
        f[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x02]);
        f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
        f[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
        for (k, b) in f[14..].iter_mut().enumerate() {
            *b = (k % 251) as u8;
        }
        send_one(&mut tx, &f);
        let what = format!("the {} byte frame at MTU {mtu}", f.len());
        recv_only(&mut rx, &f, &what, 0);
    }
}

/// A lone frame is handed over by a V2 ring as soon as it is written; a V3
/// ring keeps it until its block retire timeout (here 3 s): the latency of
/// every packet at low rates.
#[test]
fn v2_hands_a_lone_frame_over_at_once_v3_after_its_timeout() {
    require_root();
    let ns = Netns::one("lrap1");
    ns.veth("va", "vb");
    let opts = OpenOptions::default();
    let mut ports = open_in(
        &ns,
        &[
            "afpacket:va",
            "afpacket:vb?ring=v2",
            "afpacket:vb?ring=v3&tov_ms=3000",
        ],
        &opts,
    );
    let mut v3 = ports.pop().unwrap();
    let mut v2 = ports.pop().unwrap();
    let mut tx = ports.pop().unwrap();
    let f = frame(7, 0);
    // SAFETY: one test buffer per descriptor; it outlives the descriptor and nothing else touches it meanwhile.
    let p = unsafe { Pkt::from_raw(f.as_ptr() as *mut u8, f.len() as u32, 0, 0) };
    let t = Instant::now();
    assert_eq!(tx.tx.send(std::slice::from_ref(&p)).unwrap(), 1);
    tx.tx.flush().unwrap();
    let mut b = Batch::new(8);
    while v2.rx.recv(&mut b).unwrap() == 0 {
        assert!(
            t.elapsed() < Duration::from_secs(2),
            "ring=v2 never got the frame"
        );
    }
    let dt = t.elapsed();
    assert_eq!(seq_of(b.pkts()[0].bytes()), Some(7));
    v2.rx.release(&mut b).unwrap();
    // The V3 ring has the frame in an open block: not handed over yet.
    assert_eq!(
        v3.rx.recv(&mut b).unwrap(),
        0,
        "ring=v3 before its timeout ({dt:?})"
    );
    assert!(dt < Duration::from_millis(500), "{dt:?}");
    while v3.rx.recv(&mut b).unwrap() == 0 {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "ring=v3 never got the frame"
        );
        v3.rx.wait(100).unwrap();
    }
    assert!(t.elapsed() >= Duration::from_secs(2), "{:?}", t.elapsed());
    v3.rx.release(&mut b).unwrap();
}

/// Two sockets in one hash fanout group split the traffic: disjoint sets
/// whose union is every frame, each flow on one socket only.
#[test]
fn fanout_hash_splits_disjoint() {
    require_root();
    const FLOWS: u32 = 64;
    let ns = Netns::one("lraf");
    ns.veth("va", "vb");
    let opts = OpenOptions::default();
    let mut ports = open_in(
        &ns,
        &[
            "afpacket:va?ring=v3",
            "afpacket:vb?ring=v3&fanout=hash",
            "afpacket:vb?ring=mmsg&fanout=hash",
        ],
        &opts,
    );
    let mut r2 = ports.pop().unwrap();
    let mut r1 = ports.pop().unwrap();
    let mut txp = ports.pop().unwrap();
    assert!(
        r1.info.detail.contains("fanout hash group"),
        "{}",
        r1.info.detail
    );
    let frames: Vec<Vec<u8>> = (0..N as u32).map(|s| frame(s, FLOWS)).collect();
    let pkts: Vec<Pkt> = frames
        .iter()
        // SAFETY: one test buffer per descriptor; it outlives the descriptor and nothing else touches it meanwhile.
        .map(|f| unsafe { Pkt::from_raw(f.as_ptr() as *mut u8, f.len() as u32, 0, 0) })
        .collect();
    let mut seen: Vec<u8> = vec![0; N];
    let mut flow_owner: HashMap<u32, u8> = HashMap::new();
    let mut count = [0usize; 2];
    let mut sent = 0;
    let mut got = 0;
    let mut b = Batch::new(64);
    let t = Instant::now();
    while got < N {
        assert!(t.elapsed() < Duration::from_secs(20), "only {got} of {N}");
        if sent < N && sent - got < 512 {
            let n = 32.min(N - sent);
            sent += txp.tx.send(&pkts[sent..sent + n]).unwrap();
        }
        txp.tx.flush().unwrap();
        for (who, p) in [&mut r1, &mut r2].into_iter().enumerate() {
            p.rx.recv(&mut b).unwrap();
            for pk in b.pkts() {
                let s = seq_of(pk.bytes()).expect("only our frames on the link") as usize;
                assert_eq!(pk.bytes(), &frames[s][..], "frame {s} differs");
                assert_eq!(seen[s], 0, "frame {s} delivered twice");
                seen[s] = who as u8 + 1;
                let flow = s as u32 % FLOWS;
                let o = *flow_owner.entry(flow).or_insert(who as u8);
                assert_eq!(o, who as u8, "flow {flow} on both sockets");
                count[who] += 1;
                got += 1;
            }
            p.rx.release(&mut b).unwrap();
        }
    }
    assert!(seen.iter().all(|&w| w != 0));
    assert!(
        count[0] > 0 && count[1] > 0,
        "one socket got nothing: {count:?}"
    );
    let k1 = r1.rx.kernel_stats().get("tp_packets").unwrap();
    let k2 = r2.rx.kernel_stats().get("tp_packets").unwrap();
    assert_eq!((k1 as usize, k2 as usize), (count[0], count[1]));
}

#[test]
fn one_line_errors() {
    let e = open("afpacket:lrnope0?ring=v3", &OpenOptions::default())
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("no interface named 'lrnope0' in this network namespace"),
        "{e}"
    );
    assert!(!e.contains('\n'));
    let e = open("afpacket:lo?rign=v3", &OpenOptions::default())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("unknown parameter 'rign'"), "{e}");
    assert!(e.contains("ring"), "lists known parameters: {e}");
    let e = open("afpacket:lo?ring=v4", &OpenOptions::default())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("v3|mmsg"), "{e}");
    let e = open("afpacket:lo?block_size=1000", &OpenOptions::default())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("block_size"), "{e}");
    let e = open("afpacket:lo?fanout_group=3", &OpenOptions::default())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("fanout"), "{e}");
}

/// Opening, describing and closing both ring kinds on loopback of a private namespace.
#[test]
fn info_and_reopen() {
    require_root();
    let ns = Netns::one("lrai");
    ns.veth("va", "vb");
    for _ in 0..3 {
        let ports = open_in(
            &ns,
            &[
                "afpacket:va?ring=v3&fanout=lb&fanout_group=77",
                "afpacket:vb?ring=mmsg",
            ],
            &OpenOptions::default(),
        );
        let d = &ports[0].info.detail;
        assert!(
            d.starts_with("TPACKET_V3 rx ring 64x256KiB, tx ring 2048x2048"),
            "{d}"
        );
        assert!(d.contains("qdisc bypass"), "{d}");
        assert!(d.contains("fanout lb group 77"), "{d}");
        assert_eq!(ports[0].info.clock, "kernel-realtime");
        assert!(ports[1].info.detail.contains("recvmmsg"));
        assert!(ports[0].tx.max_frame() >= 1514);
    }
    // Without ring=: a frame ring for a busy-polling pipeline, a block ring
    // for one that sleeps in poll().
    for (busy, want) in [
        (true, "TPACKET_V2 rx ring 32768x1600"),
        (false, "TPACKET_V3 rx ring 64x256KiB"),
    ] {
        let opts = OpenOptions {
            busy_poll: busy,
            ..OpenOptions::default()
        };
        let p = open_in(&ns, &["afpacket:va"], &opts);
        assert!(p[0].info.detail.starts_with(want), "{}", p[0].info.detail);
        assert_eq!(p[0].info.clock, "kernel-realtime");
    }
}

/// Without CAP_NET_RAW the error says what is needed. The capability is
/// dropped on a thread of its own (capset affects only the calling thread).
#[test]
fn eperm_says_cap_net_raw() {
    require_root();
    let e = std::thread::spawn(|| {
        #[repr(C)]
        struct Hdr {
            version: u32,
            pid: i32,
        }
        #[repr(C)]
        #[derive(Clone, Copy)]
        struct Data {
            effective: u32,
            permitted: u32,
            inheritable: u32,
        }
        let mut h = Hdr {
            version: 0x2008_0522, // _LINUX_CAPABILITY_VERSION_3
            pid: 0,
        };
        let mut d = [Data {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        }; 2];
        // SAFETY: capget/capset with a v3 header and two data words, on this thread.
        unsafe {
            assert_eq!(libc::syscall(libc::SYS_capget, &mut h, d.as_mut_ptr()), 0);
            d[0].effective &= !(1 << 13); // CAP_NET_RAW
            assert_eq!(libc::syscall(libc::SYS_capset, &mut h, d.as_ptr()), 0);
        }
        open("afpacket:lo", &OpenOptions::default())
            .err()
            .unwrap()
            .to_string()
    })
    .join()
    .unwrap();
    assert!(e.contains("needs root or CAP_NET_RAW"), "{e}");
    assert!(e.starts_with("port 'afpacket:lo'"), "{e}");
}

/// A batch of one afpacket socket released into another is refused and
/// changes nothing (V2: its frame indices would hand the other ring's
/// frames back to the kernel while in use; V3: its packets would be
/// counted off the other ring's blocks; mmsg: its buffers would join the
/// other free list). Two sockets of each kind on one interface, each
/// receiving every frame; the right socket takes the batch back, and both
/// keep receiving.
#[test]
fn a_batch_goes_back_only_to_its_own_port() {
    require_root();
    let ns = Netns::one("lrapown");
    ns.veth("va", "vb");
    for ring in ["v2", "v3&tov_ms=1", "mmsg"] {
        let rx = format!("afpacket:vb?ring={ring}");
        let mut ports = open_in(&ns, &["afpacket:va", &rx, &rx], &OpenOptions::default());
        let mut b = ports.pop().unwrap();
        let mut a = ports.pop().unwrap();
        let mut tx = ports.pop().unwrap();
        for k in 0..3u32 {
            let f = frame(k, 0);
            send_one(&mut tx, &f);
            let what = format!("frame {k} on {ring}");
            let mut batch = recv_some(&mut a, &what);
            assert_eq!(batch.pkts()[0].bytes(), &f[..], "{what}");
            release_elsewhere_is_refused(a.rx.as_mut(), b.rx.as_mut(), &mut batch);
            // b's own copy of the frame: its ring is intact.
            let mut own = recv_some(&mut b, &what);
            assert_eq!(own.pkts()[0].bytes(), &f[..], "{what}");
            b.rx.release(&mut own).unwrap();
        }
        for p in [&a, &b] {
            let k = p.rx.kernel_stats();
            assert_eq!(k.get("tp_drops"), Some(0), "{ring}: {k:?}");
            if ring.starts_with("v3") {
                assert_eq!(k.get("rx_bad_release"), Some(0), "{ring}: {k:?}");
            }
        }
    }
}
