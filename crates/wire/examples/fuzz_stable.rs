//! Stable-Rust fuzzer for the wire parsers (no nightly, no cargo-fuzz).
//!
//! Usage: fuzz_stable [SECONDS] [TARGET]
//! Seeds every target with frames made by the builders (sliced at the layer
//! the target parses), then feeds mutated inputs: bit flips, random bytes,
//! truncations, extensions and corrupted length/offset fields. On a panic
//! it prints the target and the input (hex), saves it under
//! target/fuzz-crashes/, and exits 1. Seed with FUZZ_SEED=N to reproduce.

use linerate_wire::arp::{self, ArpRepr};
use linerate_wire::build::{build_arp, build_icmp_echo, build_tcp, build_udp, FrameParams, IpPair};
use linerate_wire::fuzz::TARGETS;
use linerate_wire::tcp::{flags, TcpRepr};
use linerate_wire::{parse_frame, Layers};
use std::panic;
use std::time::{Duration, Instant};

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

/// A seed frame with its parse result (for layer slicing and field offsets).
struct Seed {
    frame: Vec<u8>,
    layers: Layers,
}

fn seed_frames() -> Vec<Seed> {
    let mut frames: Vec<Vec<u8>> = Vec::new();
    let v6a = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    let v6b = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
    let payload = *b"0123456789abcdefghijklmnopqrstuvwxyz";
    for ip in [
        IpPair::V4 {
            src: [10, 0, 0, 1],
            dst: [192, 168, 1, 2],
        },
        IpPair::V6 { src: v6a, dst: v6b },
    ] {
        for vlans in [&[][..], &[10][..], &[20, 30][..]] {
            for plen in [0, 5, 36] {
                let mut p = FrameParams::new(ip);
                p.vlans = vlans;
                p.payload = &payload[..plen];
                let mut b = [0u8; 256];
                let n = build_udp(&mut b, &p, 1234, 53).unwrap();
                frames.push(b[..n].to_vec());
                let t = TcpRepr {
                    src_port: 40000,
                    dst_port: 443,
                    seq: 1,
                    ack: 0,
                    flags: flags::SYN,
                    window: 65535,
                    urgent: 0,
                };
                let n = build_tcp(&mut b, &p, &t).unwrap();
                frames.push(b[..n].to_vec());
                let n = build_icmp_echo(&mut b, &p, true, 1, 2).unwrap();
                frames.push(b[..n].to_vec());
            }
        }
    }
    let r = ArpRepr {
        operation: arp::OP_REPLY,
        sender_mac: [2, 0, 0, 0, 0, 1],
        sender_ip: [10, 0, 0, 1],
        target_mac: [2, 0, 0, 0, 0, 2],
        target_ip: [10, 0, 0, 2],
    };
    let mut b = [0u8; 64];
    let n = build_arp(&mut b, [0xff; 6], [2, 0, 0, 0, 0, 1], &[], &r).unwrap();
    frames.push(b[..n].to_vec());
    // IPv6 with HBH + fragment + dst-opts + AH before UDP.
    let mut f = vec![0u8; 14 + 40 + 8 + 8 + 8 + 16 + 8];
    f[12..14].copy_from_slice(&[0x86, 0xdd]);
    f[14] = 0x60;
    f[18..20].copy_from_slice(&48u16.to_be_bytes());
    f[20] = 0;
    f[21] = 64;
    f[54] = 44;
    f[62] = 60;
    f[70] = 51;
    f[78] = 17;
    f[79] = 2;
    f[98..100].copy_from_slice(&8u16.to_be_bytes());
    frames.push(f);
    frames
        .into_iter()
        .map(|frame| {
            let layers = parse_frame(&frame).expect("seed frames parse");
            Seed { frame, layers }
        })
        .collect()
}

/// The bytes target `name` parses, cut from a seed frame.
fn slice_for<'a>(name: &str, s: &'a Seed) -> Option<&'a [u8]> {
    let l = &s.layers;
    let f = &s.frame[..];
    let l3 = l.l3_offset as usize;
    let l4 = l.l4_offset as usize;
    use linerate_wire::frame::{L3, L4};
    match name {
        "ethernet" | "frame" | "flowkey" => Some(f),
        "vlan" => Some(&f[12..]),
        "arp" => (l.l3 == L3::Arp).then(|| &f[l3..]),
        "ipv4" => (l.l3 == L3::Ipv4).then(|| &f[l3..]),
        "ipv6" => (l.l3 == L3::Ipv6).then(|| &f[l3..]),
        "udp" => (l.l4 == L4::Udp).then(|| &f[l4..]),
        "tcp" => (l.l4 == L4::Tcp).then(|| &f[l4..]),
        "icmp" => matches!(l.l4, L4::Icmpv4 | L4::Icmpv6).then(|| &f[l4..]),
        _ => None,
    }
}

/// Offsets of length/offset fields relative to the start of the slice.
fn fields_for(name: &str, s: &Seed) -> Vec<usize> {
    let l = &s.layers;
    let (l3, l4) = (l.l3_offset as usize, l.l4_offset as usize);
    let whole = |v: &[usize]| v.to_vec();
    match name {
        "ethernet" | "frame" | "flowkey" => {
            let mut v = whole(&[
                12,
                16,
                20,
                l3,
                l3 + 2,
                l3 + 4,
                l3 + 6,
                l3 + 9,
                l4 + 4,
                l4 + 12,
                l4 + 1,
            ]);
            v.retain(|&o| o + 1 < s.frame.len());
            v
        }
        "vlan" => vec![0, 4, 8],
        "ipv4" => vec![0, 2, 6, 9],
        "ipv6" => vec![4, 6, 40, 41, 48, 49],
        "udp" => vec![4],
        "tcp" => vec![12],
        _ => vec![0, 4, 5],
    }
}

fn mutate(r: &mut Rng, input: &mut Vec<u8>, fields: &[usize]) {
    let rounds = 1 + r.below(4);
    for _ in 0..rounds {
        match r.below(7) {
            0 if !input.is_empty() => {
                let i = r.below(input.len());
                input[i] ^= 1 << r.below(8);
            }
            1 if !input.is_empty() => {
                let i = r.below(input.len());
                input[i] = r.next() as u8;
            }
            2 => {
                let n = r.below(input.len() + 1);
                input.truncate(n);
            }
            3 => {
                for _ in 0..r.below(64) {
                    input.push(r.next() as u8);
                }
            }
            4 | 5 if !fields.is_empty() => {
                let o = fields[r.below(fields.len())];
                let len = input.len() as u16;
                let vals = [
                    0u16,
                    1,
                    4,
                    5,
                    7,
                    8,
                    15,
                    20,
                    0x40,
                    0xff,
                    0xffff,
                    len,
                    len.wrapping_add(1),
                    len.wrapping_sub(1),
                    r.next() as u16,
                ];
                let v = vals[r.below(vals.len())];
                if r.next() & 1 == 0 {
                    if o + 1 < input.len() {
                        input[o..o + 2].copy_from_slice(&v.to_be_bytes());
                    }
                } else if o < input.len() {
                    input[o] = v as u8;
                }
            }
            _ => {
                // splice: duplicate a chunk (stacks headers, e.g. VLAN tags or ext headers)
                if input.len() >= 8 {
                    let a = r.below(input.len() - 4);
                    let len = 4 + r.below(12.min(input.len() - a - 3));
                    let chunk: Vec<u8> = input[a..(a + len).min(input.len())].to_vec();
                    let at = r.below(input.len());
                    input.splice(at..at, chunk);
                }
            }
        }
    }
}

fn crash(name: &str, input: &[u8]) -> ! {
    let hex: String = input.iter().map(|b| format!("{b:02x}")).collect();
    eprintln!(
        "fuzz_stable: CRASH in target '{name}' on {} bytes: {hex}",
        input.len()
    );
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/fuzz-crashes");
    if std::fs::create_dir_all(&dir).is_ok() {
        let p = dir.join(format!("crash-{name}.bin"));
        if std::fs::write(&p, input).is_ok() {
            eprintln!("fuzz_stable: input saved to {}", p.display());
        }
    }
    std::process::exit(1);
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let secs: f64 = match args.get(1).map(|s| s.parse::<f64>()) {
        None => 60.0,
        Some(Ok(v)) if v > 0.0 => v,
        Some(_) => {
            eprintln!(
                "fuzz_stable: SECONDS must be a positive number, got '{}'",
                args[1]
            );
            std::process::exit(2);
        }
    };
    let only = args.get(2).cloned();
    let targets: Vec<_> = TARGETS
        .iter()
        .filter(|(n, _)| only.as_deref().is_none_or(|o| o == *n))
        .collect();
    if targets.is_empty() {
        let names: Vec<_> = TARGETS.iter().map(|t| t.0).collect();
        eprintln!(
            "fuzz_stable: no target named '{}' (targets: {})",
            only.unwrap_or_default(),
            names.join(", ")
        );
        std::process::exit(2);
    }
    let seed: u64 = std::env::var("FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        });
    println!(
        "fuzz_stable: {} targets, {secs} s total, FUZZ_SEED={seed}",
        targets.len()
    );
    let seeds = seed_frames();
    // Panics are reported by `crash`; keep the default hook's message too.
    let per = Duration::from_secs_f64(secs / targets.len() as f64);
    let mut total = 0u64;
    for (name, f) in targets {
        let mut r = Rng(seed | 1);
        let corpus: Vec<(Vec<u8>, Vec<usize>)> = seeds
            .iter()
            .filter_map(|s| slice_for(name, s).map(|b| (b.to_vec(), fields_for(name, s))))
            .collect();
        // Every prefix of every seed first.
        for (c, _) in &corpus {
            for n in 0..=c.len() {
                if panic::catch_unwind(|| f(&c[..n])).is_err() {
                    crash(name, &c[..n]);
                }
            }
        }
        let start = Instant::now();
        let mut iters = 0u64;
        let mut input = Vec::with_capacity(4096);
        while start.elapsed() < per {
            for _ in 0..256 {
                if corpus.is_empty() || r.below(16) == 0 {
                    input.clear();
                    for _ in 0..r.below(200) {
                        input.push(r.next() as u8);
                    }
                    mutate(&mut r, &mut input, &[]);
                } else {
                    let (c, fields) = &corpus[r.below(corpus.len())];
                    input.clear();
                    input.extend_from_slice(c);
                    mutate(&mut r, &mut input, fields);
                }
                if panic::catch_unwind(|| f(&input)).is_err() {
                    crash(name, &input);
                }
                iters += 1;
            }
        }
        println!("fuzz_stable: {name:<9} {iters:>10} inputs, no crash");
        total += iters;
    }
    println!("fuzz_stable: done, {total} inputs, no crash");
}
