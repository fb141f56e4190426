//! Example profiles parse and compile; `run` against an in-memory port that
//! takes only part of each batch loses nothing and keeps the sequence.

use std::sync::atomic::AtomicBool;

use linerate_io::{Pkt, PortError, TxPort};
use linerate_pipeline::generate::{run, Generator, Profile, RateSpec, SigSpec, StreamSpec};
use linerate_wire::{parse_frame, signature};

fn example(name: &str) -> Profile {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name);
    Profile::load(&p).unwrap()
}

#[test]
fn examples_compile() {
    for n in ["udp-cbr.toml", "imix-mix.toml", "poisson-latency.toml"] {
        let p = example(n);
        let g = Generator::new(&p).unwrap_or_else(|e| panic!("{n}: {e}"));
        assert!(g.max_frame_len() <= 1514, "{n}");
    }
    assert_eq!(example("imix-mix.toml").streams.len(), 2);
}

/// Takes at most 5 packets per send, keeps copies.
struct Stingy {
    frames: Vec<Vec<u8>>,
    sends: u64,
}

impl TxPort for Stingy {
    fn send(&mut self, pkts: &[Pkt]) -> Result<usize, PortError> {
        self.sends += 1;
        let n = pkts.len().min(5);
        for p in &pkts[..n] {
            self.frames.push(p.bytes().to_vec());
        }
        Ok(n)
    }
}

#[test]
fn run_retries_partial_sends_without_loss() {
    let mut s = StreamSpec::udp("probe", "10.0.0.1", "10.0.0.2", 9, 9);
    s.id = 3;
    s.size = linerate_pipeline::generate::SizeSpec::Fixed(100);
    s.signature = SigSpec {
        enabled: true,
        sample_every: 1,
    };
    s.rate = RateSpec {
        pps: Some(2e6),
        ..Default::default()
    };
    let mut p = Profile::single(s);
    p.count = Some(2000);
    let mut g = Generator::new(&p).unwrap();
    let mut port = Stingy {
        frames: vec![],
        sends: 0,
    };
    let stop = AtomicBool::new(false);
    // fake clock: 5 µs per call, so batches hold ~10 packets
    let mut t = 0u64;
    let st = run(&mut g, &mut port, &stop, || {
        t += 5000;
        t
    })
    .unwrap();
    assert_eq!(st.sent_pkts, 2000);
    assert!(st.tx_ring_full > 0);
    assert_eq!(port.frames.len(), 2000);
    let mut last_ts = 0;
    for (i, f) in port.frames.iter().enumerate() {
        let l = parse_frame(f).unwrap();
        let sg = signature::read(l.payload(f)).unwrap();
        assert_eq!((sg.stream, sg.seq), (3, i as u64));
        assert!(sg.tx_ns >= last_ts);
        last_ts = sg.tx_ns;
    }
    let s = &g.stats()[0];
    assert_eq!(
        (s.generated_pkts, s.sent_pkts, s.sampled_pkts),
        (2000, 2000, 2000)
    );
    let r = s.departures.achieved_pps().unwrap();
    // measured, not assumed: the stingy port (5 per send, 2 clock reads per
    // turn) cannot keep up with 2 Mpps, and the departure stats show it
    assert!(r > 0.5e6 && r < 1.5e6, "{r}");
    assert!(s.departures.gaps == 1999);
}

/// Throughput of the generator alone (next_batch + stamp, no port): 60-byte
/// UDP (64 on the wire) with two varying fields. Prints packets/s; run with
/// `cargo test --release -p linerate-pipeline --test generate throughput -- --nocapture`.
#[test]
fn throughput_next_batch_and_stamp() {
    use linerate_pipeline::generate::{FieldName, FieldOp, FieldSpec, Val};
    let mut s = StreamSpec::udp("perf", "10.0.0.1", "10.0.0.2", 1, 2);
    s.fields = vec![
        FieldSpec {
            field: FieldName::IpSrc,
            op: FieldOp::Inc {
                start: None,
                step: 1,
                count: 65536,
            },
        },
        FieldSpec {
            field: FieldName::Sport,
            op: FieldOp::Random {
                min: Val::Int(1024),
                max: Val::Int(65535),
                seed: Some(1),
            },
        },
    ];
    let n_target: u64 = if cfg!(debug_assertions) {
        200_000
    } else {
        20_000_000
    };
    for sig in [false, true] {
        let mut s = s.clone();
        if sig {
            s.size = linerate_pipeline::generate::SizeSpec::Fixed(66);
            s.signature = SigSpec {
                enabled: true,
                sample_every: 1,
            };
        }
        let mut p = Profile::single(s);
        p.count = Some(n_target);
        let mut g = Generator::new(&p).unwrap();
        let t0 = std::time::Instant::now();
        let mut n = 0u64;
        let mut sink = 0u64;
        while !g.done() || n == 0 {
            let k = g.next_batch(n, 64);
            g.stamp(0, n);
            sink = sink.wrapping_add(
                g.batch()
                    .pkts()
                    .iter()
                    .map(|p| p.bytes()[26] as u64)
                    .sum::<u64>(),
            );
            n += k as u64;
        }
        let dt = t0.elapsed().as_secs_f64();
        assert_eq!(n, n_target);
        println!(
            "generator (signature {sig}): {n} pkts in {dt:.3} s = {:.2} Mpps (sink {sink})",
            n as f64 / dt / 1e6
        );
    }
}
