//! The count receiver end to end on generated batches: throughput of
//! `on_batch` and exact figures over a million packets.

use std::time::Instant;

use linerate_io::{Batch, Pkt, MAX_BATCH};
use linerate_pipeline::receiver::{Clock, Receiver};
use linerate_wire::build::{build_udp, FrameParams, IpPair};
use linerate_wire::signature::{self, Signature, FLAG_TS, SEQ_OFFSET, TS_OFFSET};

const N: u64 = 1_000_000;

/// The sequence number the test generator puts in packet `j` of a stream:
/// one number in 1000 is skipped (lost); at `j % 500 == 100` the previous
/// number is repeated (a duplicate, and that packet's own number is lost);
/// at `j % 500 == 200` two numbers are swapped (one reordered).
fn seq_of(j: u64) -> u64 {
    let base = j + j / 1000;
    match j % 500 {
        100 if j > 0 => base - 1,
        200 => base + 1,
        201 => base - 1,
        _ => base,
    }
}

#[test]
fn million_packets_exact_and_fast() {
    run(4);
}

/// 1024 streams: every packet touches another stream's bitmap and histogram.
#[test]
fn million_packets_1024_streams() {
    run(1024);
}

fn run(streams: u64) {
    // One template frame per batch slot; the signature's fields are
    // patched in place before each batch, as a generator would.
    let mut payload = [0u8; 46];
    signature::write(&mut payload, &Signature::default()).unwrap();
    let mut p = FrameParams::new(IpPair::V4 {
        src: [10, 0, 0, 1],
        dst: [10, 0, 0, 2],
    });
    p.payload = &payload;
    let mut tpl = [0u8; 128];
    let len = build_udp(&mut tpl, &p, 1, 2).unwrap();
    let sig_off = linerate_wire::parse_frame(&tpl[..len])
        .unwrap()
        .payload_offset as usize;
    let mut frames = vec![tpl; MAX_BATCH];
    let bs = 64usize;
    let mut r = Receiver::new(Clock::Monotonic);
    if streams > 4 {
        r.preallocate(streams as usize);
    }
    let mut batch = Batch::new(bs);
    let mut sent = 0u64;
    let mut elapsed = std::time::Duration::ZERO;
    let mut first_elapsed = std::time::Duration::ZERO;
    let t_base = 1_000_000_000u64;
    while sent < N {
        batch.clear();
        for (i, f) in frames.iter_mut().take(bs).enumerate() {
            let k = sent + i as u64;
            let stream = (k % streams) as usize;
            let q = seq_of(k / streams);
            let sig = &mut f[sig_off..sig_off + signature::LEN];
            sig[4..6].copy_from_slice(&(stream as u16).to_be_bytes());
            sig[6..8].copy_from_slice(&FLAG_TS.to_be_bytes());
            sig[SEQ_OFFSET..SEQ_OFFSET + 8].copy_from_slice(&q.to_be_bytes());
            sig[TS_OFFSET..TS_OFFSET + 8].copy_from_slice(&(t_base + k * 100).to_be_bytes());
            // SAFETY: one test buffer per descriptor; it outlives the descriptor and nothing else touches it meanwhile.
            batch.push(unsafe { Pkt::from_raw(f.as_mut_ptr(), len as u32, 0, 0) });
        }
        // TX every 100 ns; the batch is received 5 µs after its last TX.
        let now = t_base + (sent + bs as u64 - 1) * 100 + 5_000;
        let t0 = Instant::now();
        r.on_batch(batch.pkts(), now);
        let dt = t0.elapsed();
        elapsed += dt;
        if sent < streams {
            // The first packet of each stream allocates its state.
            first_elapsed += dt;
        }
        sent += bs as u64;
    }
    let ns_per_pkt = elapsed.as_nanos() as f64 / sent as f64;
    let steady = (elapsed - first_elapsed).as_nanos() as f64 / (sent - streams.min(sent)) as f64;
    println!(
        "on_batch, {streams} streams: {sent} packets in {elapsed:?}: {ns_per_pkt:.1} ns/packet, \
         {steady:.1} ns/packet after every stream's first packet ({})",
        if cfg!(debug_assertions) {
            "debug build, not asserted"
        } else {
            "release"
        }
    );
    let rep = r.final_report();
    assert_eq!(rep.totals.packets, sent);
    assert_eq!(rep.totals.signed, sent);
    assert_eq!(rep.streams.len(), streams as usize);
    // Reference model of the same pattern: plain set arithmetic.
    for st in &rep.streams {
        let mut seen = std::collections::HashSet::new();
        let (mut dup, mut reord, mut max) = (0u64, 0u64, None::<u64>);
        for j in 0..(sent - st.stream as u64).div_ceil(streams) {
            let q = seq_of(j);
            if !seen.insert(q) {
                dup += 1;
            } else if max.is_some_and(|m| q < m) {
                reord += 1;
            }
            max = max.max(Some(q));
        }
        let lost = max.unwrap() + 1 - seen.len() as u64;
        assert_eq!(st.duplicates, dup, "stream {}", st.stream);
        assert_eq!(st.reordered, reord, "stream {}", st.stream);
        assert_eq!(st.lost, lost, "stream {}", st.stream);
        assert!(
            st.lost >= 2 && st.duplicates >= 2 && st.reordered >= 2,
            "{st:?}"
        );
        let l = st.latency.as_ref().unwrap();
        assert_eq!(l.samples, st.packets);
        assert!(l.min_ns >= 5_000 && l.max_ns <= 5_000 + 64 * 100, "{l:?}");
    }
    if !cfg!(debug_assertions) {
        assert!(elapsed.as_secs_f64() < 1.0, "{ns_per_pkt:.1} ns/packet");
    }
}
