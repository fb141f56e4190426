//! `linerate fwd PORT_A PORT_B`: bidirectional L2 forwarding.

use anyhow::{bail, Context, Result};
use linerate_io::time as tsc;
use linerate_io::{OpenOptions, StageSnapshot};
use linerate_pipeline::fwd::{
    self, CyclesSnapshot, Direction, DirectionReport, MacRewrite, Polling,
};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::common;

#[derive(clap::Args)]
#[command(
    about = "Forward frames between two ports in both directions (L2, run to completion)",
    after_help = "\
Examples:
  # AF_XDP between two interfaces, one core, per-second rates, Ctrl-C for the final account
  linerate fwd afxdp:d0 afxdp:d1
  # TPACKET_V3 rings, MAC rewrite towards B, one core per direction
  linerate fwd afpacket:d0 afpacket:d1 --rewrite-a2b 02:00:00:00:00:02/02:00:00:00:00:01 --cores per-direction
  # the in-kernel XDP path (devmap redirect), counters from the program's per-CPU maps
  linerate fwd --mode xdp afxdp:d0 afxdp:d1
  # pure CPU cost: an endless in-memory source into a sink, with per-stage cycles
  linerate fwd 'mem:a?source=64' 'mem:b?sink' --duration 5 --profile
  # replay a capture into a new pcapng file
  linerate fwd pcap:in.pcap pcap:out.pcapng

Ports: afxdp:IFACE[?queue=N&mode=native|generic&zerocopy=0|1]
       afpacket:IFACE[?ring=v2|v3|mmsg&fanout=hash|cpu|lb&qdisc_bypass=0|1]
       pcap:FILE[?mode=read|write&speed=top|original|X&rate=PPS&loop=N]
       mem:NAME[?source=SIZE[&flows=N]|sink]"
)]
pub struct Args {
    /// First port (URI).
    pub port_a: String,
    /// Second port (URI).
    pub port_b: String,
    /// user: forward in this process through the ports; xdp: an XDP program redirects in the kernel.
    #[arg(long, value_parser = ["user", "xdp"], default_value = "user")]
    pub mode: String,
    /// Packets per batch (1-256).
    #[arg(long, default_value_t = linerate_io::DEFAULT_BATCH)]
    pub batch: usize,
    /// Ring size per port (frames, power of two).
    #[arg(long, default_value_t = 2048)]
    pub ring: u32,
    /// single: both directions on one core; per-direction: one thread per direction.
    #[arg(long, value_parser = ["single", "per-direction"], default_value = "single")]
    pub cores: String,
    /// CPUs to pin the forwarding thread(s) to, e.g. `1` or `0,1`.
    #[arg(long, value_delimiter = ',')]
    pub cpu: Vec<usize>,
    /// busy: spin on the rings; wait: sleep in poll() when idle (need_wakeup).
    #[arg(long, value_parser = ["busy", "wait"], default_value = "busy")]
    pub poll: String,
    /// Rewrite MACs of frames going A to B: DST/SRC, e.g. 02:00:00:00:00:02/02:00:00:00:00:01.
    #[arg(long, value_name = "DST/SRC")]
    pub rewrite_a2b: Option<String>,
    /// Rewrite MACs of frames going B to A: DST/SRC.
    #[arg(long, value_name = "DST/SRC")]
    pub rewrite_b2a: Option<String>,
    /// XDP attach mode for --mode xdp.
    #[arg(long, value_parser = ["native", "generic"], default_value = "native")]
    pub xdp_mode: String,
    /// Stop after this many seconds (default: until Ctrl-C, or the end of finite sources).
    #[arg(long)]
    pub duration: Option<f64>,
    /// Report TSC cycles per packet for RX, TX, buffer management and processing.
    #[arg(long)]
    pub profile: bool,
    /// Print JSON lines (one per second and a final object) instead of text.
    #[arg(long)]
    pub json: bool,
    /// No per-second lines.
    #[arg(long, short)]
    pub quiet: bool,
}

fn parse_rewrite(s: &Option<String>, flag: &str) -> Result<Option<MacRewrite>> {
    let Some(s) = s else { return Ok(None) };
    let (d, sr) = s
        .split_once('/')
        .with_context(|| format!("{flag} '{s}': expected DST/SRC MAC addresses"))?;
    let dst = fwd::parse_mac(d).with_context(|| format!("{flag}: '{d}' is not a MAC address"))?;
    let src = fwd::parse_mac(sr).with_context(|| format!("{flag}: '{sr}' is not a MAC address"))?;
    Ok(Some(MacRewrite { dst, src }))
}

pub fn run(a: Args) -> Result<()> {
    if !(1..=linerate_io::MAX_BATCH).contains(&a.batch) {
        bail!(
            "--batch {}: must be between 1 and {}",
            a.batch,
            linerate_io::MAX_BATCH
        );
    }
    if !a.ring.is_power_of_two() || a.ring < 64 {
        bail!("--ring {}: must be a power of two >= 64", a.ring);
    }
    let rw_ab = parse_rewrite(&a.rewrite_a2b, "--rewrite-a2b")?;
    let rw_ba = parse_rewrite(&a.rewrite_b2a, "--rewrite-b2a")?;
    let stop = common::stop_flag()?;
    if a.mode == "xdp" {
        return super::fwd_xdp::run(&a, rw_ab, rw_ba, stop);
    }
    let opts = OpenOptions {
        batch: a.batch,
        ring_size: a.ring,
        busy_poll: a.poll == "busy",
        ..OpenOptions::default()
    };
    let pa = linerate_io::open(&a.port_a, &opts)?;
    let pb = linerate_io::open(&a.port_b, &opts)?;
    let info = [pa.info.clone(), pb.info.clone()];
    if !a.json {
        for (n, i) in ["A", "B"].iter().zip(&info) {
            eprintln!("port {n}: {} ({}: {})", i.uri, i.kind, i.detail);
        }
    }
    let ab = Direction::new("A->B", pa.rx, pb.tx, rw_ab, a.batch);
    let ba = Direction::new("B->A", pb.rx, pa.tx, rw_ba, a.batch);
    let counters = [ab.counters.clone(), ba.counters.clone()];
    let cycles = [ab.cycles.clone(), ba.cycles.clone()];
    let polling = if a.poll == "busy" {
        Polling::Busy
    } else {
        Polling::Wait
    };
    let profile = a.profile;

    let done = Arc::new(AtomicBool::new(false));
    let t0 = Instant::now();
    let mut workers = Vec::new();
    let spawn =
        |dirs: Vec<Direction>, cpu: Option<usize>, stop: Arc<AtomicBool>, done: Arc<AtomicBool>| {
            std::thread::Builder::new()
                .name("linerate-fwd".into())
                .spawn(move || -> (Vec<Direction>, Result<()>) {
                    let mut dirs = dirs;
                    let r = match cpu.map(common::pin_to_cpu).transpose() {
                        Ok(_) => {
                            let mut refs: Vec<&mut Direction> = dirs.iter_mut().collect();
                            fwd::run_loop(&mut refs, &stop, polling, profile)
                                .map_err(anyhow::Error::from)
                        }
                        Err(e) => Err(e),
                    };
                    // One direction failing (a port gone) ends the other too.
                    stop.store(true, Ordering::SeqCst);
                    done.store(true, Ordering::SeqCst);
                    (dirs, r)
                })
                .expect("spawn")
        };
    if a.cores == "single" {
        workers.push(spawn(
            vec![ab, ba],
            a.cpu.first().copied(),
            stop.clone(),
            done.clone(),
        ));
    } else {
        let d2 = Arc::new(AtomicBool::new(false));
        workers.push(spawn(
            vec![ab],
            a.cpu.first().copied(),
            stop.clone(),
            done.clone(),
        ));
        workers.push(spawn(
            vec![ba],
            a.cpu.get(1).or(a.cpu.first()).copied(),
            stop.clone(),
            d2,
        ));
    }

    // Reporter: once a second, from the counters (no access to the ports).
    let mut last = [counters[0].snapshot(), counters[1].snapshot()];
    let mut last_t = Instant::now();
    let deadline = a.duration.map(|d| t0 + Duration::from_secs_f64(d.max(0.0)));
    while !done.load(Ordering::SeqCst) && !workers.iter().all(|w| w.is_finished()) {
        std::thread::sleep(Duration::from_millis(50));
        if let Some(dl) = deadline {
            if Instant::now() >= dl {
                stop.store(true, Ordering::SeqCst);
            }
        }
        if last_t.elapsed() >= Duration::from_secs(1) {
            let now = [counters[0].snapshot(), counters[1].snapshot()];
            let dt = last_t.elapsed().as_secs_f64();
            if !a.quiet {
                print_interval(a.json, t0.elapsed().as_secs_f64(), dt, &now, &last);
            }
            last = now;
            last_t = Instant::now();
        }
    }
    stop.store(true, Ordering::SeqCst);
    // The final account is printed also when a port failed (its interface
    // went away): counters up to that point, then the error.
    let mut dirs = Vec::new();
    let mut err = None;
    for w in workers {
        let (d, r) = w
            .join()
            .map_err(|_| anyhow::anyhow!("forwarding thread panicked"))?;
        dirs.extend(d);
        if let Err(e) = r {
            err.get_or_insert(e);
        }
    }
    let elapsed = t0.elapsed().as_secs_f64();
    let snaps = [counters[0].snapshot(), counters[1].snapshot()];
    let cyc = [cycles[0].snapshot(), cycles[1].snapshot()];
    let kstats: Vec<(String, linerate_io::KernelStats)> = dirs
        .iter()
        .flat_map(|d| {
            let (rxn, txn) = if d.name == "A->B" {
                ("A rx", "B tx")
            } else {
                ("B rx", "A tx")
            };
            [
                (rxn.to_string(), d.rx.kernel_stats()),
                (txn.to_string(), d.tx.kernel_stats()),
            ]
        })
        .collect();
    let report = final_report(&a, elapsed, &snaps, &cyc, &kstats, &info);
    match err {
        Some(e) => Err(e),
        None => report,
    }
}

fn rate_line(name: &str, d: &StageSnapshot, dt: f64) -> String {
    format!(
        "{name} {:>8.3} Mpps {:>7.3} Gbit/s",
        d.passed as f64 / dt / 1e6,
        d.passed_bytes as f64 * 8.0 / dt / 1e9
    )
}

fn print_interval(
    json: bool,
    t: f64,
    dt: f64,
    now: &[StageSnapshot; 2],
    last: &[StageSnapshot; 2],
) {
    let d = [now[0].delta(&last[0]), now[1].delta(&last[1])];
    if json {
        let v = serde_json::json!({
            "t": t,
            "a2b": {"rx_pps": d[0].received as f64 / dt, "fwd_pps": d[0].passed as f64 / dt,
                     "fwd_bps": d[0].passed_bytes as f64 * 8.0 / dt, "drops": d[0].dropped()},
            "b2a": {"rx_pps": d[1].received as f64 / dt, "fwd_pps": d[1].passed as f64 / dt,
                     "fwd_bps": d[1].passed_bytes as f64 * 8.0 / dt, "drops": d[1].dropped()},
        });
        outln!("{v}");
        return;
    }
    let mut drops = String::new();
    for (dir, s) in ["A->B", "B->A"].iter().zip(&d) {
        for (n, c) in s.drops_nonzero() {
            drops.push_str(&format!(" {dir}:{n}={c}"));
        }
    }
    if drops.is_empty() {
        drops = " none".into();
    }
    outln!(
        "{t:>7.1}s  {} | {} | drops:{drops}",
        rate_line("A->B", &d[0], dt),
        rate_line("B->A", &d[1], dt)
    );
}

fn final_report(
    a: &Args,
    elapsed: f64,
    snaps: &[StageSnapshot; 2],
    cyc: &[CyclesSnapshot; 2],
    kstats: &[(String, linerate_io::KernelStats)],
    info: &[linerate_io::PortInfo; 2],
) -> Result<()> {
    let reps = [
        DirectionReport::from_snapshot("A->B", &snaps[0]),
        DirectionReport::from_snapshot("B->A", &snaps[1]),
    ];
    let hz = tsc::tsc_hz();
    let pkts = snaps[0].received + snaps[1].received;
    let mut total = CyclesSnapshot::default();
    for c in cyc {
        total.rx += c.rx;
        total.tx += c.tx;
        total.buffers += c.buffers;
        total.process += c.process;
        total.idle += c.idle;
        total.batches += c.batches;
        total.empty_polls += c.empty_polls;
    }
    let pp = total.per_packet(pkts);
    if a.json {
        let mut v = serde_json::json!({
            "mode": "user",
            "elapsed_s": elapsed,
            "ports": info,
            "directions": reps,
            "kernel": kstats.iter().map(|(n, k)| serde_json::json!({"side": n, "counters": k.counters})).collect::<Vec<_>>(),
        });
        if a.profile {
            v["profile"] = serde_json::json!({
                "clock": "tsc", "tsc_hz": hz, "packets": pkts, "batches": total.batches,
                "cycles_per_packet": {"rx": pp[0], "tx": pp[1], "buffers": pp[2], "processing": pp[3], "total": pp[4]},
                "empty_polls": total.empty_polls, "idle_cycles": total.idle,
            });
        }
        outln!("{v}");
    } else {
        outln!("final account after {elapsed:.2} s:");
        outln!(
            "  {:<6} {:>12} {:>12} {:>10}  {:<28} received = forwarded + drops",
            "dir",
            "received",
            "forwarded",
            "dropped",
            "drops by reason"
        );
        for r in &reps {
            let by: Vec<String> = r.drops.iter().map(|(n, c)| format!("{n}={c}")).collect();
            outln!(
                "  {:<6} {:>12} {:>12} {:>10}  {:<28} {}",
                r.direction,
                r.received,
                r.forwarded,
                r.dropped,
                if by.is_empty() {
                    "-".to_string()
                } else {
                    by.join(" ")
                },
                if r.balanced { "holds" } else { "DOES NOT HOLD" }
            );
        }
        for (n, k) in kstats {
            if !k.counters.is_empty() {
                let s: Vec<String> = k.counters.iter().map(|(c, v)| format!("{c}={v}")).collect();
                outln!("  kernel {n}: {}", s.join(" "));
            }
        }
        if a.profile {
            outln!(
                "profile (TSC cycles per packet, {:.2} GHz, {} packets in {} batches):",
                hz / 1e9,
                pkts,
                total.batches
            );
            outln!(
                "  {:>8} {:>8} {:>8} {:>11} {:>8}",
                "RX",
                "TX",
                "Buffers",
                "Processing",
                "Total"
            );
            outln!(
                "  {:>8.1} {:>8.1} {:>8.1} {:>11.1} {:>8.1}",
                pp[0],
                pp[1],
                pp[2],
                pp[3],
                pp[4]
            );
            outln!(
                "  (+ {} empty polls, {:.1} idle cycles per packet)",
                total.empty_polls,
                total.idle as f64 / pkts.max(1) as f64
            );
        }
    }
    if !(reps[0].balanced && reps[1].balanced) {
        bail!("internal accounting error: received != forwarded + drops");
    }
    Ok(())
}
