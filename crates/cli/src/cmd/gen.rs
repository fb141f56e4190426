//! `linerate gen PORT`: the traffic generator (streams from a TOML profile
//! or command-line shortcuts, rate control, field variation, measurement
//! signatures), its XDP fast path, pcap replay, Lua scenarios, and an
//! optional receiver in the same process.

use crate::script;
use anyhow::{bail, Context, Result};
use linerate_io::OpenOptions;
use linerate_pipeline::count::{Clock, Receiver};
use linerate_pipeline::generate::run::{run_loop, rx_counters, Control, GenControl, GenEnd};
use linerate_pipeline::generate::{
    Accounting, FieldSpec, GenError, Generator, L4Spec, PaceMode, Profile, RateSpec, SigSpec,
    SizeSpec, StreamSpec,
};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(clap::Args)]
#[command(
    about = "Generate traffic: streams, rates, field variation, sequence numbers and TX timestamps",
    after_help = "\
Examples:
  # 64-byte UDP frames at 1 Mpps for 10 s out of a veth, with signatures for loss and latency
  linerate gen afpacket:g0 --dst-ip 10.0.2.2 --rate 1Mpps --duration 10 --signature
  # a profile of several streams (see examples/*.toml), receiver in the same process
  linerate gen afxdp:g0 --profile examples/imix-mix.toml --rx afpacket:s0 --duration 5
  # 10 Gbit/s line rate (L1: preamble and IFG counted), Poisson departures, 1 M packets
  linerate gen afpacket:g0 --rate 10Gbps --pace poisson --count 1000000
  # the in-kernel fast path (BPF_PROG_RUN live frames) on a veth, 64 flows, top speed
  linerate gen g0 --xdp --flows 64 --duration 5
  # replay a capture at twice its original speed, three times
  linerate gen afpacket:g0 --replay trace.pcapng --speed 2 --loop 3
  # a Lua scenario: ramps, phases, stop conditions (see examples/ramp.lua)
  linerate gen afpacket:g0 --dst-ip 10.0.2.2 --signature --script examples/ramp.lua

Rates: 1000 or 1000pps, 250kpps, 1.5Mpps; bit rates 100Mbps, 10Gbps (L1: frame + FCS + preamble +
IFG, as line rate is counted) or 10Gbps@l2 (frame + FCS)."
)]
pub struct Args {
    /// Output port (URI); with --xdp an interface (IF or afxdp:IF).
    pub port: String,
    /// Streams from a TOML profile (see examples/). Shortcut flags then only override the duration and count.
    #[arg(long)]
    pub profile: Option<PathBuf>,
    /// Frame size without FCS (60 = 64 on the wire), or an IMIX preset: imix, ipv6-imix.
    /// Default 60, or the smallest frame that holds the headers (IPv6 TCP: 74) and, with --signature,
    /// the signature (IPv4 UDP: 66).
    #[arg(long)]
    pub size: Option<String>,
    #[arg(long, default_value = "10.0.1.1")]
    pub src_ip: String,
    #[arg(long, default_value = "10.0.2.2")]
    pub dst_ip: String,
    #[arg(long, default_value = "02:00:00:00:00:01")]
    pub src_mac: String,
    #[arg(long, default_value = "02:00:00:00:00:02")]
    pub dst_mac: String,
    /// L4 protocol of the one-stream shortcut.
    #[arg(long, value_parser = ["udp", "tcp", "icmp"], default_value = "udp")]
    pub proto: String,
    #[arg(long, default_value_t = 1024)]
    pub sport: u16,
    #[arg(long, default_value_t = 9)]
    pub dport: u16,
    /// 802.1Q tag (repeat for QinQ, outermost first).
    #[arg(long)]
    pub vlan: Vec<u16>,
    /// Vary the UDP/TCP source port over this many values (flows).
    #[arg(long, default_value_t = 1)]
    pub flows: u32,
    /// Rate: pps (1000, 250kpps, 1.5Mpps) or bit/s (100Mbps, 10Gbps, 10Gbps@l2). Default: as fast as the port takes.
    #[arg(long)]
    pub rate: Option<String>,
    /// Departure process.
    #[arg(long, value_parser = ["cbr", "poisson", "burst"], default_value = "cbr")]
    pub pace: String,
    /// Packets per burst with --pace burst.
    #[arg(long, default_value_t = 32)]
    pub burst: u32,
    /// Stop after this many seconds.
    #[arg(long)]
    pub duration: Option<f64>,
    /// Stop after this many packets (per stream).
    #[arg(long)]
    pub count: Option<u64>,
    /// Put linerate's signature (stream, sequence number, TX time) in every packet.
    #[arg(long)]
    pub signature: bool,
    /// With --signature: only every Nth packet carries it (the others have the same size and headers).
    #[arg(long, default_value_t = 1)]
    pub sample_every: u32,
    /// In-kernel fast path: BPF_PROG_RUN with XDP live frames out of the interface (first stream only).
    #[arg(long)]
    pub xdp: bool,
    /// Replay a pcap/pcapng file instead of generating.
    #[arg(long)]
    pub replay: Option<PathBuf>,
    /// Replay speed: top, original, or a multiplier such as 2.
    #[arg(long)]
    pub speed: Option<String>,
    /// Replay this many times (0 = forever).
    #[arg(long = "loop")]
    pub loops: Option<u32>,
    /// Run a Lua scenario against the running generator (sandboxed: no io,
    /// os, require, dofile or loadfile).
    #[arg(long)]
    pub script: Option<PathBuf>,
    /// Give the script Lua's io, os and package libraries (it runs as the
    /// user running linerate, usually root).
    #[arg(long, requires = "script")]
    pub script_unsafe: bool,
    /// Receive on this port in the same process (loopback through a device under test) and report.
    #[arg(long)]
    pub rx: Option<String>,
    /// Packets per batch.
    #[arg(long, default_value_t = linerate_io::DEFAULT_BATCH)]
    pub batch: usize,
    /// CPU to pin the generator thread to.
    #[arg(long)]
    pub cpu: Option<usize>,
    /// JSON lines and a final JSON object on stdout.
    #[arg(long)]
    pub json: bool,
    /// No once-a-second lines.
    #[arg(long, short)]
    pub quiet: bool,
}

/// Parse a rate: pps or bit/s, with an optional `@l1` / `@l2`.
pub fn parse_rate(s: &str) -> Result<RateSpec> {
    let t = s.trim().to_ascii_lowercase();
    let (v, acct) = match t.split_once('@') {
        Some((v, "l1")) => (v.to_string(), Some(Accounting::L1)),
        Some((v, "l2")) => (v.to_string(), Some(Accounting::L2)),
        Some((_, a)) => bail!("--rate '{s}': accounting '@{a}' is not l1 or l2"),
        None => (t.clone(), None),
    };
    let split = v.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(v.len());
    let (num, unit) = v.split_at(split);
    let x: f64 = num
        .parse()
        .map_err(|_| anyhow::anyhow!("--rate '{s}': '{num}' is not a number"))?;
    let (mult, bits) = match unit {
        "" | "pps" => (1.0, false),
        "kpps" => (1e3, false),
        "mpps" => (1e6, false),
        "gpps" => (1e9, false),
        "bps" | "bit" | "bit/s" => (1.0, true),
        "kbps" | "kbit" | "kbit/s" => (1e3, true),
        "mbps" | "mbit" | "mbit/s" => (1e6, true),
        "gbps" | "gbit" | "gbit/s" => (1e9, true),
        u => bail!("--rate '{s}': unknown unit '{u}' (pps, kpps, Mpps, bps, Mbps, Gbps)"),
    };
    let r = x * mult;
    if !(r.is_finite() && r > 0.0) {
        bail!("--rate '{s}': must be a positive rate");
    }
    if !bits && acct.is_some() {
        bail!("--rate '{s}': @l1/@l2 applies to bit rates only");
    }
    Ok(RateSpec {
        pps: (!bits).then_some(r),
        bps: bits.then_some(r),
        accounting: acct.unwrap_or(Accounting::L1),
        ..RateSpec::default()
    })
}

fn shortcut_stream(a: &Args) -> Result<StreamSpec> {
    let mut s = StreamSpec::udp("s0", &a.src_ip, &a.dst_ip, a.sport, a.dport);
    s.template.eth_src = a.src_mac.clone();
    s.template.eth_dst = a.dst_mac.clone();
    s.template.vlans = a.vlan.clone();
    s.template.l4 = match a.proto.as_str() {
        "tcp" => L4Spec::Tcp {
            sport: a.sport,
            dport: a.dport,
            flags: 0x10,
        },
        "icmp" => L4Spec::Icmp {
            ty: None,
            code: 0,
            id: 1,
        }, // echo request of the IP version
        _ => L4Spec::Udp {
            sport: a.sport,
            dport: a.dport,
        },
    };
    let headers = 14
        + 4 * a.vlan.len()
        + if a.dst_ip.contains(':') { 40 } else { 20 }
        + match a.proto.as_str() {
            "tcp" => 20,
            _ => 8,
        };
    // The smallest frame that holds the headers (IPv6 TCP, QinQ: more than
    // 60 bytes), plus the signature when on.
    let min_len = headers
        + if a.signature {
            linerate_wire::signature::LEN
        } else {
            0
        };
    let size = a
        .size
        .clone()
        .unwrap_or_else(|| min_len.max(60).to_string());
    s.size = match size.as_str() {
        "imix" | "simple" => SizeSpec::Preset("simple".into()),
        "ipv6-imix" | "ipv6-simple" => SizeSpec::Preset("ipv6-simple".into()),
        n => SizeSpec::Fixed(
            n.parse()
                .map_err(|_| anyhow::anyhow!("--size '{n}': a frame size (60..9000) or imix"))?,
        ),
    };
    if a.flows > 1 {
        if a.proto == "icmp" {
            bail!("--flows: varies the L4 source port, which ICMP does not have");
        }
        s.fields.push(toml_field(&format!(
            "field = \"sport\"\nop = \"inc\"\nstep = 1\ncount = {}",
            a.flows
        ))?);
    }
    if let Some(r) = &a.rate {
        s.rate = parse_rate(r)?;
    }
    s.rate.mode = match a.pace.as_str() {
        "poisson" => PaceMode::Poisson,
        "burst" => PaceMode::Burst,
        _ => PaceMode::Cbr,
    };
    if s.rate.mode == PaceMode::Burst {
        s.rate.burst = Some(a.burst);
    }
    s.signature = SigSpec {
        enabled: a.signature,
        sample_every: a.sample_every.max(1),
    };
    Ok(s)
}

fn toml_field(s: &str) -> Result<FieldSpec> {
    toml::from_str(s).context("internal field spec")
}

fn build_profile(a: &Args) -> Result<Profile> {
    let mut p = match &a.profile {
        Some(f) => Profile::load(f)?,
        None => Profile::single(shortcut_stream(a)?),
    };
    if a.duration.is_some() {
        p.duration_s = a.duration;
    }
    if a.count.is_some() {
        p.count = a.count;
    }
    Ok(p)
}

pub fn run(a: Args) -> Result<()> {
    if !(1..=linerate_io::MAX_BATCH).contains(&a.batch) {
        bail!(
            "--batch {}: must be between 1 and {}",
            a.batch,
            linerate_io::MAX_BATCH
        );
    }
    if a.replay.is_some() {
        return replay(&a);
    }
    if a.speed.is_some() || a.loops.is_some() {
        bail!("--speed and --loop apply to --replay");
    }
    let profile = build_profile(&a)?;
    if a.xdp {
        return xdp(&a, &profile);
    }
    let g = Generator::new(&profile)?;
    let names: Vec<String> = g.stream_names().iter().map(|s| s.to_string()).collect();
    let stop = super::common::stop_flag()?;
    let opts = OpenOptions {
        batch: a.batch,
        ..OpenOptions::default()
    };
    let port = linerate_io::open(&a.port, &opts)?;
    if g.max_frame_len() > port.tx.max_frame() {
        bail!(
            "frames of {} bytes do not fit port '{}' (at most {})",
            g.max_frame_len(),
            a.port,
            port.tx.max_frame()
        );
    }
    if !a.json {
        eprintln!(
            "gen: {} stream(s) [{}] -> {} ({}: {})",
            names.len(),
            names.join(", "),
            port.info.uri,
            port.info.kind,
            port.info.detail
        );
    }
    let ctl = Arc::new(Control::new(names.clone(), stop.clone()));

    // Optional receiver in this process.
    let rx_done = Arc::new(AtomicBool::new(false));
    let rx_thread = match &a.rx {
        None => None,
        Some(uri) => {
            let mut rport = linerate_io::open(
                uri,
                &OpenOptions {
                    batch: a.batch,
                    busy_poll: false,
                    ..OpenOptions::default()
                },
            )?;
            let clock = Clock::for_port(rport.info.clock);
            let (ctl2, done2, names2, batch) =
                (ctl.clone(), rx_done.clone(), names.clone(), a.batch);
            Some(std::thread::spawn(move || -> Result<Receiver> {
                let mut r = Receiver::new(clock);
                r.preallocate(names2.len());
                let until = linerate_pipeline::count::Until::default();
                linerate_pipeline::count::receive_loop(
                    rport.rx.as_mut(),
                    &mut r,
                    batch,
                    &done2,
                    until,
                    |r| {
                        ctl2.set_rx(rx_counters(r, &names2));
                    },
                )?;
                Ok(r)
            }))
        }
    };

    let (ctl2, batch, cpu) = (ctl.clone(), a.batch, a.cpu);
    let file_port = port.info.clock == "file";
    let tx = port.tx;
    let worker = std::thread::Builder::new()
        .name("linerate-gen".into())
        .spawn(move || -> Result<(GenEnd, Result<(), GenError>)> {
            if let Some(c) = cpu {
                super::common::pin_to_cpu(c)?;
            }
            let r = run_loop(g, tx, ctl2.clone(), batch, file_port);
            ctl2.set_finished();
            Ok(r)
        })?;

    let script_thread = a.script.clone().map(|path| {
        let (c, s, quiet) = (ctl.clone(), stop.clone(), a.json);
        let sandbox = if a.script_unsafe {
            script::Sandbox::Off
        } else {
            script::Sandbox::On
        };
        std::thread::spawn(move || -> Result<()> {
            let r = script::run(&path, c.clone(), s, quiet, sandbox);
            c.stop(); // the scenario decides when the run ends
            if let Ok(script::Ended::Interrupted) = r {
                eprintln!(
                    "script {}: ended: the run was stopped while it was still running",
                    path.display()
                );
            }
            r.map(|_| ())
        })
    });

    // Reporter.
    let t0 = Instant::now();
    let mut last = vec![0u64; names.len()];
    let mut last_t = Instant::now();
    while !worker.is_finished() {
        std::thread::sleep(Duration::from_millis(50));
        if last_t.elapsed() >= Duration::from_secs(1) {
            let dt = last_t.elapsed().as_secs_f64();
            let now: Vec<u64> = ctl.sent_packets();
            if !a.quiet {
                let rates: Vec<f64> = now
                    .iter()
                    .zip(&last)
                    .map(|(n, o)| (n - o) as f64 / dt)
                    .collect();
                if a.json {
                    outln!(
                        "{}",
                        serde_json::json!({"t": t0.elapsed().as_secs_f64(), "streams": names, "sent": now, "pps": rates})
                    );
                } else {
                    let parts: Vec<String> = names
                        .iter()
                        .zip(&rates)
                        .zip(&now)
                        .map(|((n, r), t)| format!("{n}: {:.3} Mpps ({t} sent)", r / 1e6))
                        .collect();
                    outln!(
                        "{:>7.1}s  {}",
                        t0.elapsed().as_secs_f64(),
                        parts.join(" | ")
                    );
                }
            }
            last = now;
            last_t = Instant::now();
        }
    }
    let (end, gen_result) = worker
        .join()
        .map_err(|_| anyhow::anyhow!("generator thread panicked"))??;
    // The script ends about script::GRACE after the run (its instruction
    // hook); one stuck in a single long library call (a huge string.rep)
    // cannot be interrupted and is left behind: the process exits.
    let script_result = script_thread.map(|h| {
        let until = Instant::now() + script::GRACE + Duration::from_secs(1);
        while !h.is_finished() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
        if !h.is_finished() {
            return Ok(Err(anyhow::anyhow!(
                "script {}: still running {:.1} s after the run ended (inside one long library call); abandoned",
                a.script.as_deref().unwrap_or(std::path::Path::new("?")).display(),
                (script::GRACE + Duration::from_secs(1)).as_secs_f64()
            )));
        }
        h.join()
            .map_err(|_| anyhow::anyhow!("script thread panicked"))
    });
    // Let the last packets arrive, then stop the receiver.
    let rx_report = match rx_thread {
        None => None,
        Some(h) => {
            std::thread::sleep(Duration::from_millis(300));
            rx_done.store(true, Ordering::SeqCst);
            Some(
                h.join()
                    .map_err(|_| anyhow::anyhow!("receiver thread panicked"))?,
            )
        }
    };
    let (rx_report, rx_result) = match rx_report {
        Some(Ok(r)) => (Some(r), Ok(())),
        Some(Err(e)) => (None, Err(e)),
        None => (None, Ok(())),
    };
    // The report also when a port failed (its interface went away): what
    // was sent up to then, then the error.
    report(&a, &names, &end, rx_report.as_ref())?;
    gen_result?;
    rx_result?;
    if let Some(r) = script_result {
        r??;
    }
    Ok(())
}

fn report(a: &Args, names: &[String], end: &GenEnd, rx: Option<&Receiver>) -> Result<()> {
    let rows: Vec<serde_json::Value> = end
        .stats
        .iter()
        .map(|s| {
            let d = &s.departures;
            serde_json::json!({
                "stream": s.name, "id": s.id, "sent": s.sent_pkts, "bytes": s.sent_bytes, "sampled": s.sampled_pkts,
                "achieved_pps": d.achieved_pps(), "mean_gap_ns": d.mean_gap_ns(), "gap_stddev_ns": d.gap_stddev_ns(),
                "gap_min_ns": (d.gaps > 0).then_some(d.gap_min_ns), "gap_max_ns": (d.gaps > 0).then_some(d.gap_max_ns),
                "gap_log2_buckets": d.buckets,
            })
        })
        .collect();
    let rxr = rx.map(|r| r.final_report());
    if a.json {
        let mut v = serde_json::json!({
            "elapsed_s": end.elapsed_s, "tx_ring_full_retries": end.tx_ring_full,
            "tx_kernel": end.kernel.counters, "streams": rows,
        });
        if let Some(r) = &rxr {
            v["rx"] = r.to_json();
        }
        outln!("{v}");
        return Ok(());
    }
    outln!(
        "sent in {:.2} s (departure times measured at send; jitter = std. dev. of the gaps):",
        end.elapsed_s
    );
    outln!(
        "  {:<12} {:>12} {:>14} {:>12} {:>12} {:>12}",
        "stream",
        "packets",
        "achieved pps",
        "mean gap",
        "jitter",
        "max gap"
    );
    for (s, n) in end.stats.iter().zip(names) {
        let d = &s.departures;
        let f = |x: Option<f64>| {
            x.map(|v| format!("{:.0} ns", v))
                .unwrap_or_else(|| "-".into())
        };
        outln!(
            "  {:<12} {:>12} {:>14} {:>12} {:>12} {:>12}",
            n,
            s.sent_pkts,
            d.achieved_pps()
                .map(|p| format!("{p:.0}"))
                .unwrap_or_else(|| "-".into()),
            f(d.mean_gap_ns()),
            f(d.gap_stddev_ns()),
            if d.gaps > 0 {
                format!("{} ns", d.gap_max_ns)
            } else {
                "-".into()
            }
        );
    }
    if end.tx_ring_full > 0 {
        outln!(
            "  (the port's TX ring was full {} times; those packets were retried, not dropped)",
            end.tx_ring_full
        );
    }
    if let Some(r) = &rxr {
        outln!("received (same process):");
        out!("{}", r.to_text());
    }
    Ok(())
}

/// `--xdp`: the BPF_PROG_RUN live-frames path for the first stream.
fn xdp(a: &Args, profile: &Profile) -> Result<()> {
    use linerate_io::xdpgen::{GenConfig, SigConfig, XdpGen};
    if profile.streams.len() != 1 {
        bail!(
            "--xdp sends one stream; the profile has {}",
            profile.streams.len()
        );
    }
    let spec = &profile.streams[0];
    if spec.rate.bps.is_some() || spec.rate.mode != PaceMode::Cbr {
        bail!("--xdp: rates in packets/s with --pace cbr only");
    }
    // The template: the first packet the generator would send.
    let mut one = Profile::single(StreamSpec {
        fields: vec![],
        rate: RateSpec::default(),
        ..spec.clone()
    });
    one.count = Some(1);
    let mut g = Generator::new(&one)?;
    g.next_batch(0, 1);
    let frame = g
        .batch()
        .pkts()
        .first()
        .map(|p| p.bytes().to_vec())
        .context("no template frame")?;
    let layers =
        linerate_wire::frame::parse_frame(&frame).map_err(|e| anyhow::anyhow!("template: {e}"))?;
    let ifname = super::common::xdp_ifname(&a.port)?;
    let cfg = GenConfig {
        flows: a.flows.max(1),
        signature: spec.signature.enabled.then_some(SigConfig {
            offset: layers.payload_offset as usize,
            stream: spec.id,
            sample_every: spec.signature.sample_every.max(1),
        }),
        pps: spec.rate.pps,
        ..GenConfig::default()
    };
    let stop = super::common::stop_flag()?;
    if let Some(c) = a.cpu {
        super::common::pin_to_cpu(c)?;
    }
    let mut x = XdpGen::new(&ifname, &frame, cfg)?;
    if !a.json {
        eprintln!(
            "gen --xdp: {}-byte frames out of {ifname} (BPF_PROG_RUN live frames, XDP_TX), {}",
            frame.len(),
            spec.rate
                .pps
                .map(|p| format!("{p:.0} pps"))
                .unwrap_or_else(|| "top speed".into())
        );
    }
    let count = spec.rate.count.or(profile.count);
    let st = match (count, profile.duration_s) {
        (Some(n), _) => x.run(n, &stop)?,
        (None, Some(d)) => x.run_for(Duration::from_secs_f64(d), &stop)?,
        (None, None) => x.run_for(Duration::from_secs(u64::MAX / 4), &stop)?,
    };
    if a.json {
        outln!(
            "{}",
            serde_json::json!({"mode": "xdp", "stats": st, "pps": st.pps()})
        );
    } else {
        outln!(
            "sent {} frames in {:.3} s: {:.3} Mpps ({} BPF_PROG_RUN calls)",
            st.sent,
            st.duration_ns as f64 / 1e9,
            st.pps() / 1e6,
            st.syscalls
        );
    }
    Ok(())
}

/// `--replay FILE`: a pcap port as the source, paced by the file, forwarded to the port.
fn replay(a: &Args) -> Result<()> {
    use linerate_pipeline::fwd::{run_loop, Direction, Polling};
    let file = a.replay.as_ref().expect("checked");
    let mut q = vec!["mode=read".to_string()];
    if let Some(s) = &a.speed {
        q.push(format!("speed={s}"));
    }
    if let Some(r) = &a.rate {
        let r = parse_rate(r)?;
        let pps = r.pps.context("--replay --rate: packets/s only")?;
        q.push(format!("rate={pps}"));
    }
    if let Some(l) = a.loops {
        q.push(format!("loop={l}"));
    }
    let uri = format!("pcap:{}?{}", file.display(), q.join("&"));
    let opts = OpenOptions {
        batch: a.batch,
        ..OpenOptions::default()
    };
    let src = linerate_io::open(&uri, &opts)?;
    let dst = linerate_io::open(&a.port, &opts)?;
    let stop = super::common::stop_flag()?;
    let mut d = Direction::new("replay", src.rx, dst.tx, None, a.batch);
    let counters = d.counters.clone();
    let t0 = Instant::now();
    if let Some(dur) = a.duration {
        let s = stop.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs_f64(dur));
            s.store(true, Ordering::SeqCst);
        });
    }
    run_loop(&mut [&mut d], &stop, Polling::Wait, false)?;
    let s = counters.snapshot();
    let el = t0.elapsed().as_secs_f64();
    if a.json {
        outln!(
            "{}",
            serde_json::json!({"mode": "replay", "file": file, "read": s.received, "sent": s.passed, "dropped": s.dropped(), "elapsed_s": el})
        );
    } else {
        outln!(
            "replayed {} of {} packets from {} in {:.2} s ({:.3} Mpps); dropped: {}",
            s.passed,
            s.received,
            file.display(),
            el,
            s.passed as f64 / el.max(1e-9) / 1e6,
            s.dropped()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_parse() {
        assert_eq!(parse_rate("1000").unwrap().pps, Some(1000.0));
        assert_eq!(parse_rate("250kpps").unwrap().pps, Some(250e3));
        assert_eq!(parse_rate("1.5Mpps").unwrap().pps, Some(1.5e6));
        let r = parse_rate("10Gbps").unwrap();
        assert_eq!((r.bps, r.accounting), (Some(10e9), Accounting::L1));
        assert_eq!(parse_rate("100Mbps@l2").unwrap().accounting, Accounting::L2);
        assert!(parse_rate("fast").is_err());
        assert!(parse_rate("10furlongs").is_err());
        assert!(parse_rate("-5pps").is_err());
        assert!(parse_rate("1Mpps@l2").is_err());
        assert!(parse_rate("1Gbps@l3").is_err());
    }
}
