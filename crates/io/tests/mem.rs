//! Tests of the `mem:` backend: links across threads, ring full, the
//! registry, source frames, and a throughput print.

use linerate_io::{open, Batch, OpenOptions, Pkt};

mod common;
use common::release_elsewhere_is_refused;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

/// An empty TX descriptor slot (no bytes).
// SAFETY: a null pointer with length 0 describes no memory.
const NO_PKT: Pkt = unsafe { Pkt::from_raw(std::ptr::null_mut(), 0, 0, 0) };

fn uniq(tag: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn fill(buf: &mut [u8], seq: u64) {
    buf[..8].copy_from_slice(&seq.to_le_bytes());
    for (i, b) in buf[8..].iter_mut().enumerate() {
        *b = (seq as u8).wrapping_add(i as u8).wrapping_mul(31);
    }
}

#[test]
fn two_threads_order_and_bytes() {
    const N: u64 = 1_000_000;
    let name = uniq("tt");
    let opts = OpenOptions::default();
    let a = open(&format!("mem:{name}"), &opts).unwrap();
    let b = open(&format!("mem:{name}"), &opts).unwrap();
    assert!(a.info.detail.contains("end 0"), "{}", a.info.detail);
    assert!(b.info.detail.contains("end 1"), "{}", b.info.detail);
    let mut tx = a.tx;
    let mut rx = b.rx;
    let sender = std::thread::spawn(move || {
        let mut rng = Rng(0x1234_5678_9abc_def1);
        let mut bufs: Vec<Vec<u8>> = (0..64).map(|_| vec![0u8; 1514]).collect();
        let mut seq = 0u64;
        let mut not_taken = 0u64;
        while seq < N {
            let n = (N - seq).min(64) as usize;
            let mut pkts = [const { NO_PKT }; 64];
            for i in 0..n {
                let len = 60 + (rng.next() % (1514 - 60 + 1)) as usize;
                fill(&mut bufs[i][..len], seq + i as u64);
                // SAFETY: one test buffer per descriptor; it outlives the descriptor and nothing else touches it meanwhile.
                pkts[i] = unsafe { Pkt::from_raw(bufs[i].as_mut_ptr(), len as u32, 0, 0) };
            }
            let mut off = 0;
            while off < n {
                let t = tx.send(&pkts[off..n]).unwrap();
                if t == 0 {
                    not_taken += 1;
                    std::thread::yield_now();
                }
                off += t;
            }
            seq += n as u64;
        }
        (tx, not_taken)
    });
    let mut rng = Rng(0x1234_5678_9abc_def1);
    let mut batch = Batch::new(128);
    let mut expect = 0u64;
    let mut check = vec![0u8; 1514];
    let t0 = Instant::now();
    while expect < N {
        let n = rx.recv(&mut batch).unwrap();
        if n == 0 {
            std::thread::yield_now();
            assert!(t0.elapsed().as_secs() < 120, "stalled at {expect}");
            continue;
        }
        for p in batch.pkts() {
            let len = 60 + (rng.next() % (1514 - 60 + 1)) as usize;
            assert_eq!(p.len() as usize, len, "length of packet {expect}");
            fill(&mut check[..len], expect);
            assert!(p.bytes() == &check[..len], "bytes of packet {expect}");
            expect += 1;
        }
        rx.release(&mut batch).unwrap();
    }
    let (tx, _) = sender.join().unwrap();
    let ks = tx.kernel_stats();
    assert_eq!(ks.get("tx_packets"), Some(N));
    assert_eq!(rx.kernel_stats().get("rx_packets"), Some(N));
    let mut batch = Batch::new(64);
    assert_eq!(rx.recv(&mut batch).unwrap(), 0, "nothing more than sent");
}

#[test]
fn both_directions() {
    let name = uniq("bd");
    let opts = OpenOptions::default();
    let mut a = open(&format!("mem:{name}"), &opts).unwrap();
    let mut b = open(&format!("mem:{name}"), &opts).unwrap();
    let mut x = [1u8, 2, 3, 4];
    let mut y = [[9u8; 100]; 2];
    let [y0, y1] = &mut y;
    // SAFETY: one test buffer per descriptor; they outlive the descriptors and nothing else touches them meanwhile.
    let (pa, pb0, pb1) = unsafe {
        (
            Pkt::from_raw(x.as_mut_ptr(), 4, 0, 0),
            Pkt::from_raw(y0.as_mut_ptr(), 100, 0, 0),
            Pkt::from_raw(y1.as_mut_ptr(), 100, 0, 0),
        )
    };
    assert_eq!(a.tx.send(std::slice::from_ref(&pa)).unwrap(), 1);
    assert_eq!(b.tx.send(&[pb0, pb1]).unwrap(), 2);
    let mut batch = Batch::new(64);
    assert_eq!(b.rx.recv(&mut batch).unwrap(), 1);
    assert_eq!(batch.pkts()[0].bytes(), &[1, 2, 3, 4]);
    b.rx.release(&mut batch).unwrap();
    assert_eq!(a.rx.recv(&mut batch).unwrap(), 2);
    assert!(batch.pkts().iter().all(|p| p.bytes() == [9u8; 100]));
    a.rx.release(&mut batch).unwrap();
    // Too big for a frame: consumed and counted.
    let mut big = vec![0u8; 5000];
    // SAFETY: one test buffer per descriptor; it outlives the descriptor and nothing else touches it meanwhile.
    let pbig = unsafe { Pkt::from_raw(big.as_mut_ptr(), 5000, 0, 0) };
    assert_eq!(a.tx.send(&[pbig, pa]).unwrap(), 2);
    assert_eq!(a.tx.kernel_stats().get("tx_too_big_drops"), Some(1));
    assert_eq!(b.rx.recv(&mut batch).unwrap(), 1);
    assert_eq!(batch.pkts()[0].len(), 4);
}

#[test]
fn ring_full_when_peer_does_not_read() {
    let name = uniq("rf");
    let opts = OpenOptions {
        ring_size: 512,
        ..OpenOptions::default()
    };
    let mut a = open(&format!("mem:{name}"), &opts).unwrap();
    let mut b = open(&format!("mem:{name}"), &opts).unwrap();
    let mut bufs = [[0xabu8; 64]; 256];
    // SAFETY: one test buffer per descriptor; it outlives the descriptor and nothing else touches it meanwhile.
    let pkts: Vec<Pkt> = bufs
        .iter_mut()
        .map(|b| unsafe { Pkt::from_raw(b.as_mut_ptr(), 64, 0, 0) })
        .collect();
    let mut taken = 0;
    let mut short = false;
    for _ in 0..100 {
        let t = a.tx.send(&pkts).unwrap();
        taken += t;
        if t < pkts.len() {
            short = true;
            break;
        }
    }
    assert!(
        short,
        "send must take fewer than offered once the ring is full"
    );
    assert!(taken >= 512, "ring of 512 holds at least 512 ({taken})");
    assert_eq!(a.tx.send(&pkts).unwrap(), 0, "full ring takes nothing");
    let ks = a.tx.kernel_stats();
    assert!(ks.get("ring_full").unwrap() >= 256, "{ks:?}");
    // Drain: everything taken arrives, then the ring accepts again.
    let mut batch = Batch::new(256);
    let mut got = 0;
    loop {
        let n = b.rx.recv(&mut batch).unwrap();
        if n == 0 {
            break;
        }
        got += n;
        b.rx.release(&mut batch).unwrap();
    }
    assert_eq!(got, taken);
    assert_eq!(a.tx.send(&pkts).unwrap(), 256);
    // Receiver holding frames without releasing: the sender runs out of
    // frames and says so.
    let mut held: Vec<Batch> = Vec::new();
    let mut total_taken = 256;
    for _ in 0..200 {
        let mut bt = Batch::new(256);
        let n = b.rx.recv(&mut bt).unwrap();
        held.push(bt);
        let t = a.tx.send(&pkts).unwrap();
        total_taken += t;
        if n == 0 && t == 0 {
            break;
        }
    }
    let ks = a.tx.kernel_stats();
    assert!(ks.get("ring_full_no_frame").unwrap() > 0, "{ks:?}");
    for mut bt in held {
        b.rx.release(&mut bt).unwrap();
    }
    assert!(a.tx.send(&pkts).unwrap() > 0, "frames came back");
    assert!(total_taken > 0);
}

#[test]
fn third_open_is_an_error() {
    let name = uniq("three");
    let opts = OpenOptions::default();
    let _a = open(&format!("mem:{name}"), &opts).unwrap();
    let _b = open(&format!("mem:{name}"), &opts).unwrap();
    let e = open(&format!("mem:{name}"), &opts)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains(&name) && e.contains("both ends"), "{e}");
    assert!(!e.contains('\n'));
    // Bad parameters.
    for bad in [
        "mem:x?source=10",
        "mem:x?source=abc",
        "mem:x?source=64&sink",
        "mem:x?foo=1",
        "mem:x?source=100000",
        "mem:x?source=64&flows=0",
        "mem:x?source=64&flows=16777217",
        "mem:x?source=64&flows=many",
        "mem:x?sink&flows=10",
    ] {
        let e = open(bad, &opts).err().unwrap().to_string();
        assert!(e.starts_with(&format!("port '{bad}'")), "{e}");
        assert!(!e.contains('\n'));
    }
}

#[test]
fn link_name_reusable_after_both_ends_close() {
    let name = uniq("reuse");
    let opts = OpenOptions::default();
    let a = open(&format!("mem:{name}"), &opts).unwrap();
    let b = open(&format!("mem:{name}"), &opts).unwrap();
    drop(a);
    drop(b);
    let a = open(&format!("mem:{name}"), &opts).unwrap();
    assert!(a.info.detail.contains("end 0"));
    // End 0 closed before anyone took end 1: the name starts afresh too.
    drop(a);
    let a = open(&format!("mem:{name}"), &opts).unwrap();
    assert!(a.info.detail.contains("end 0"), "{}", a.info.detail);
    let b = open(&format!("mem:{name}"), &opts).unwrap();
    assert!(b.info.detail.contains("end 1"));
}

fn csum(data: &[u8]) -> u16 {
    let mut s: u32 = 0;
    for w in data.chunks(2) {
        let v = if w.len() == 2 {
            u16::from_be_bytes([w[0], w[1]])
        } else {
            (w[0] as u16) << 8
        };
        s += v as u32;
    }
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

#[test]
fn source_frames_are_valid_ipv4_udp() {
    let opts = OpenOptions::default();
    for size in [42usize, 60, 64, 65, 128, 1514, 2048] {
        let mut p = open(&format!("mem:s?source={size}"), &opts).unwrap();
        let mut batch = Batch::new(256);
        let mut flows = std::collections::HashSet::new();
        for _round in 0..3 {
            assert_eq!(p.rx.recv(&mut batch).unwrap(), 256);
            let mut addrs = std::collections::HashSet::new();
            for pk in batch.pkts() {
                assert!(
                    addrs.insert(pk.as_ptr() as usize),
                    "a frame twice in one batch"
                );
                let f = pk.bytes();
                assert_eq!(f.len(), size);
                assert_eq!(&f[12..14], &[0x08, 0x00], "IPv4 ethertype");
                let ip = &f[14..34];
                assert_eq!(ip[0], 0x45);
                assert_eq!(u16::from_be_bytes([ip[2], ip[3]]) as usize, size - 14);
                assert_eq!(ip[9], 17, "UDP");
                assert_eq!(csum(ip), 0, "IPv4 header checksum");
                let udp_len = u16::from_be_bytes([f[38], f[39]]) as usize;
                assert_eq!(udp_len, size - 34);
                // UDP checksum with the pseudo-header sums to zero.
                let mut pseudo = Vec::new();
                pseudo.extend_from_slice(&ip[12..20]);
                pseudo.extend_from_slice(&[0, 17]);
                pseudo.extend_from_slice(&(udp_len as u16).to_be_bytes());
                pseudo.extend_from_slice(&f[34..]);
                assert_eq!(csum(&pseudo), 0, "UDP checksum");
                flows.insert((ip[12..16].to_vec(), [f[34], f[35]]));
            }
            p.rx.release(&mut batch).unwrap();
        }
        assert!(flows.len() >= 64, "frames spread over flows");
        assert!(!p.rx.at_end());
        // TX of a source discards and counts.
        // SAFETY: one test buffer per descriptor; it outlives the descriptor and nothing else touches it meanwhile.
        let pk = [const { NO_PKT }; 5];
        assert_eq!(p.tx.send(&pk).unwrap(), 5);
    }
    let mut s = open("mem:k?sink", &opts).unwrap();
    let mut batch = Batch::new(64);
    assert_eq!(s.rx.recv(&mut batch).unwrap(), 0);
    assert!(s.rx.at_end());
    let mut src = open("mem:g?gen=100", &opts).unwrap();
    src.rx.recv(&mut batch).unwrap();
    assert_eq!(s.tx.send(batch.pkts()).unwrap(), 64);
    assert_eq!(s.tx.kernel_stats().get("sink_packets"), Some(64));
    assert_eq!(s.tx.kernel_stats().get("sink_bytes"), Some(6400));
}

#[test]
fn throughput_print() {
    let opts = OpenOptions::default();
    let mut src = open("mem:a?source=64", &opts).unwrap();
    let mut sink = open("mem:b?sink", &opts).unwrap();
    let mut batch = Batch::new(64);
    let iters = if cfg!(debug_assertions) {
        20_000
    } else {
        2_000_000
    };
    let t0 = Instant::now();
    let mut n = 0u64;
    for _ in 0..iters {
        src.rx.recv(&mut batch).unwrap();
        n += sink.tx.send(batch.pkts()).unwrap() as u64;
        src.rx.release(&mut batch).unwrap();
    }
    let dt = t0.elapsed().as_secs_f64();
    println!(
        "mem source->sink, batch 64: {n} packets in {dt:.3} s = {:.1} Mpps",
        n as f64 / dt / 1e6
    );

    // Link on one thread (send a batch, receive it, release it): the CPU
    // cost of copy + rings without any cross-core traffic.
    let name = uniq("tp1");
    let mut a = open(&format!("mem:{name}"), &opts).unwrap();
    let mut b = open(&format!("mem:{name}"), &opts).unwrap();
    let mut rb = Batch::new(64);
    let iters = iters / 4;
    let t0 = Instant::now();
    let mut n = 0u64;
    for _ in 0..iters {
        src.rx.recv(&mut batch).unwrap();
        a.tx.send(batch.pkts()).unwrap();
        src.rx.release(&mut batch).unwrap();
        n += b.rx.recv(&mut rb).unwrap() as u64;
        b.rx.release(&mut rb).unwrap();
    }
    let dt = t0.elapsed().as_secs_f64();
    println!(
        "mem link, one thread, 64 B, batch 64: {n} packets in {dt:.3} s = {:.1} Mpps",
        n as f64 / dt / 1e6
    );

    // Link across two threads.
    let name = uniq("tp");
    let a = open(&format!("mem:{name}"), &opts).unwrap();
    let b = open(&format!("mem:{name}"), &opts).unwrap();
    let total: u64 = if cfg!(debug_assertions) {
        200_000
    } else {
        20_000_000
    };
    let mut tx = a.tx;
    let mut rx = b.rx;
    let t0 = Instant::now();
    let h = std::thread::spawn(move || {
        let mut src = open("mem:x?source=64", &OpenOptions::default()).unwrap();
        let mut batch = Batch::new(64);
        let mut sent = 0u64;
        // Packets of `batch` before `off` were taken; the rest wait for the next try.
        let mut off = 0;
        while sent < total {
            if batch.is_empty() {
                src.rx.recv(&mut batch).unwrap();
                off = 0;
            }
            let t = tx.send(&batch.pkts()[off..]).unwrap();
            sent += t as u64;
            off += t;
            if t == 0 {
                std::thread::yield_now();
            }
            if off == batch.len() {
                src.rx.release(&mut batch).unwrap();
            }
        }
    });
    let mut got = 0u64;
    let mut b2 = Batch::new(64);
    while got < total {
        let k = rx.recv(&mut b2).unwrap() as u64;
        got += k;
        rx.release(&mut b2).unwrap();
        if k == 0 {
            // Be kind on an oversubscribed machine.
            std::thread::yield_now();
        }
    }
    h.join().unwrap();
    let dt = t0.elapsed().as_secs_f64();
    println!(
        "mem link across threads, 64 B, batch 64: {got} packets in {dt:.3} s = {:.1} Mpps",
        got as f64 / dt / 1e6
    );
}

/// `flows=N`: every frame is one of exactly N flows (distinct IPv4 source
/// addresses), all N appear, and the IPv4 header checksum stays valid.
#[test]
fn source_flows_draws_from_n_flows_with_valid_headers() {
    let opts = OpenOptions::default();
    for n in [1u32, 7, 1000] {
        let mut p = open(&format!("mem:x?source=64&flows={n}"), &opts).unwrap();
        assert!(
            p.info.detail.contains(&format!("{n} flows")),
            "{}",
            p.info.detail
        );
        let mut seen = std::collections::HashSet::new();
        let mut b = Batch::new(64);
        for _ in 0..(n as usize * 20 / 64 + 2) {
            p.rx.recv(&mut b).unwrap();
            for pkt in b.pkts() {
                let f = pkt.bytes();
                let hdr = &f[14..34];
                let sum = hdr
                    .chunks(2)
                    .map(|w| u16::from_be_bytes([w[0], w[1]]) as u32)
                    .sum::<u32>();
                let folded = (sum & 0xffff) + (sum >> 16);
                assert_eq!((folded & 0xffff) + (folded >> 16), 0xffff, "IPv4 checksum");
                assert_eq!(&f[40..42], &[0, 0], "no UDP checksum");
                let src = u32::from_be_bytes([f[26], f[27], f[28], f[29]]);
                assert_eq!(src >> 24, 10);
                assert!(src & 0xff_ffff < n, "flow {} of {n}", src & 0xff_ffff);
                seen.insert(src);
            }
            p.rx.release(&mut b).unwrap();
        }
        assert_eq!(seen.len(), n as usize, "distinct flows seen");
    }
}

/// A batch of one mem port released into another is refused and changes
/// nothing: a link's frame addresses would otherwise go into the other
/// link's return ring (a write outside that sender's frames). Links,
/// sources and a sink's RX; the right port takes the batch back and its
/// frames are used again.
#[test]
fn a_batch_goes_back_only_to_its_own_port() {
    let opts = OpenOptions {
        ring_size: 4,
        ..OpenOptions::default()
    };
    let (n1, n2) = (uniq("own1"), uniq("own2"));
    let (mut a1, mut b1) = (
        open(&format!("mem:{n1}"), &opts).unwrap(),
        open(&format!("mem:{n1}"), &opts).unwrap(),
    );
    let (_a2, mut b2) = (
        open(&format!("mem:{n2}"), &opts).unwrap(),
        open(&format!("mem:{n2}"), &opts).unwrap(),
    );
    let mut src = open("mem:s?source=64", &opts).unwrap();
    let mut src2 = open("mem:s?source=64", &opts).unwrap();
    let mut sink = open("mem:k?sink", &opts).unwrap();
    let mut f = vec![7u8; 60];
    let mut batch = Batch::new(8);
    // Many more rounds than the sender has frames (4): every frame came
    // back to its own pool each time.
    for round in 0..16u8 {
        f[0] = round;
        // SAFETY: one test buffer per descriptor; it outlives the descriptor and nothing else touches it meanwhile.
        let p = unsafe { Pkt::from_raw(f.as_mut_ptr(), 60, 0, 0) };
        assert_eq!(
            a1.tx.send(std::slice::from_ref(&p)).unwrap(),
            1,
            "round {round}"
        );
        assert_eq!(b1.rx.recv(&mut batch).unwrap(), 1);
        assert_eq!(batch.pkts()[0].bytes()[0], round);
        release_elsewhere_is_refused(b1.rx.as_mut(), b2.rx.as_mut(), &mut batch);
    }
    let mut small = Batch::new(4);
    assert_eq!(src.rx.recv(&mut small).unwrap(), 4);
    release_elsewhere_is_refused(src.rx.as_mut(), src2.rx.as_mut(), &mut small);
    assert_eq!(src.rx.recv(&mut small).unwrap(), 4);
    release_elsewhere_is_refused(src.rx.as_mut(), sink.rx.as_mut(), &mut small);
    assert_eq!(src.rx.recv(&mut small).unwrap(), 4);
    release_elsewhere_is_refused(src.rx.as_mut(), b1.rx.as_mut(), &mut small);
}
