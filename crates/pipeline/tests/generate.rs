//! Example profiles parse and compile; the generator's loop against a port
//! that takes only part of each batch loses nothing and keeps the sequence.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use linerate_io::{Pkt, PortError, TxPort};
use linerate_pipeline::generate::run::{run_loop, GenRemote};
use linerate_pipeline::generate::{Generator, Profile, RateSpec, SigSpec, StreamSpec};
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

/// Takes at most 5 packets per send, keeps copies (shared: the loop owns
/// the port).
struct Stingy {
    frames: Arc<Mutex<Vec<Vec<u8>>>>,
    partial: Arc<AtomicU64>,
}

impl TxPort for Stingy {
    fn send(&mut self, pkts: &[Pkt]) -> Result<usize, PortError> {
        let n = pkts.len().min(5);
        if n < pkts.len() {
            self.partial.fetch_add(1, Ordering::Relaxed);
        }
        let mut f = self.frames.lock().unwrap();
        for p in &pkts[..n] {
            f.push(p.bytes().to_vec());
        }
        Ok(n)
    }
}

/// The generator's loop (`linerate gen`'s) against a port that takes only
/// part of each batch: the rest is retried, nothing lost, in sequence.
#[test]
fn run_loop_retries_partial_sends_without_loss() {
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
    let g = Generator::new(&p).unwrap();
    let (frames, partial) = (
        Arc::new(Mutex::new(Vec::new())),
        Arc::new(AtomicU64::new(0)),
    );
    let port = Stingy {
        frames: frames.clone(),
        partial: partial.clone(),
    };
    let ctl = Arc::new(GenRemote::new(
        vec!["probe".into()],
        Arc::new(AtomicBool::new(false)),
    ));
    let (end, r) = run_loop(g, Box::new(port), ctl.clone(), 64, false);
    r.unwrap();
    assert!(partial.load(Ordering::Relaxed) > 0, "no batch was cut");
    let frames = frames.lock().unwrap();
    assert_eq!(frames.len(), 2000);
    let mut last_ts = 0;
    for (i, f) in frames.iter().enumerate() {
        let l = parse_frame(f).unwrap();
        let sg = signature::read(l.payload(f)).unwrap();
        assert_eq!((sg.stream, sg.seq), (3, i as u64));
        assert!(sg.tx_ns >= last_ts);
        last_ts = sg.tx_ns;
    }
    let s = &end.stats[0];
    assert_eq!(
        (s.generated_pkts, s.sent_pkts, s.sampled_pkts),
        (2000, 2000, 2000)
    );
    assert_eq!(s.departures.gaps, 1999);
    assert_eq!(ctl.sent_packets(), [2000]);
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
