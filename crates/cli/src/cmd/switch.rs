//! `linerate switch`: the flow-table software switch, and `linerate
//! switch-ctl`: its control client over a Unix socket.

use anyhow::{bail, Context, Result};
use linerate_io::time as tsc;
use linerate_io::OpenOptions;
use linerate_pipeline::control::{Handler, Limits, Listener, Server};
use linerate_pipeline::switch::actions::{Group, Meter};
use linerate_pipeline::switch::ctl::{cache_json, ports_json, Shared, SwitchCtl};
use linerate_pipeline::switch::datapath::{
    CacheCounters, Datapath, Polling, SwitchCycles, SwitchPort, SwitchSnapshot,
};
use linerate_pipeline::switch::table::{mono_ns, Control, FlowTable};
use linerate_pipeline::switch::Rule;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::common;

#[derive(clap::Args)]
#[command(
    about = "Run the flow-table software switch over N ports (OpenFlow rules in ovs-ofctl syntax)",
    after_help = "\
Examples:
  # three ports, rules from a file, a control socket for switch-ctl
  linerate switch --port 1=afpacket:sw1 --port 2=afpacket:sw2 --port 3=afpacket:sw3 \\
      --flows flows.txt --ctl /run/linerate-sw.sock
  # flows.txt, one rule per line (# comments):
  #   priority=100,in_port=1,udp,nw_dst=10.0.0.2,actions=output:2
  #   priority=90,ip,nw_dst=10.0.0.3,actions=set_field:02:00:00:00:00:03->eth_dst,dec_ttl,output:3
  #   priority=0,actions=drop
  # groups (type all) and meters, one per line:
  #   group_id=1,type=all,bucket=output:2,bucket=output:3
  #   meter=1,pktps,band=type=drop,rate=20000
  linerate switch --port 1=afxdp:d0 --port 2=afxdp:d1 --groups groups.txt --meters meters.txt --flows flows.txt
  # CPU cost per stage on in-memory ports
  linerate switch --port '1=mem:a?source=64' --port '2=mem:b?sink' --flows f.txt --duration 5 --profile

Change the rules while it runs: linerate switch-ctl SOCKET add-flow|del-flows|dump-flows ... (see its --help)."
)]
pub struct Args {
    /// A port: NUMBER=URI (OpenFlow port number, then the port URI). Repeat for each port.
    #[arg(long = "port", value_name = "N=URI", required = true)]
    pub ports: Vec<String>,
    /// Rules, one per line in ovs-ofctl syntax.
    #[arg(long)]
    pub flows: Option<PathBuf>,
    /// Groups, one per line: group_id=ID,type=all,bucket=output:P,...
    #[arg(long)]
    pub groups: Option<PathBuf>,
    /// Meters, one per line: meter=ID,pktps|kbps,band=type=drop,rate=R[,burst_size=B]
    #[arg(long)]
    pub meters: Option<PathBuf>,
    /// Control socket path for `linerate switch-ctl` (created with mode 0600).
    #[arg(long)]
    pub ctl: Option<PathBuf>,
    /// CPU to pin the datapath thread to.
    #[arg(long)]
    pub cpu: Option<usize>,
    /// Packets per batch (1-256).
    #[arg(long, default_value_t = linerate_io::DEFAULT_BATCH)]
    pub batch: usize,
    /// Ring size per port (frames, power of two).
    #[arg(long, default_value_t = 2048)]
    pub ring: u32,
    /// busy: spin on the rings; wait: sleep in poll() when idle.
    #[arg(long, value_parser = ["busy", "wait"], default_value = "busy")]
    pub poll: String,
    /// Turn off the exact-match cache (every packet goes to the classifier).
    #[arg(long)]
    pub no_emc: bool,
    /// Stop after this many seconds (default: until Ctrl-C, or the end of finite sources).
    #[arg(long)]
    pub duration: Option<f64>,
    /// Report TSC cycles per packet per stage.
    #[arg(long)]
    pub profile: bool,
    /// JSON lines (one per second and a final object) instead of text.
    #[arg(long)]
    pub json: bool,
    /// No per-second lines.
    #[arg(long, short)]
    pub quiet: bool,
}

/// The rule lines of a flows/groups/meters file: numbered from 1, trimmed,
/// without blank lines and `#` comments.
fn rule_lines(s: &str) -> impl Iterator<Item = (usize, &str)> {
    s.lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'))
}

fn read_lines(p: &Path, what: &str) -> Result<Vec<(usize, String)>> {
    let s = std::fs::read_to_string(p).with_context(|| format!("{what} file '{}'", p.display()))?;
    Ok(rule_lines(&s).map(|(i, l)| (i, l.to_string())).collect())
}

fn parse_port(s: &str) -> Result<(u32, String)> {
    let (n, uri) = s
        .split_once('=')
        .with_context(|| format!("--port '{s}': expected NUMBER=URI, e.g. 1=afpacket:eth0"))?;
    let n: u32 = n
        .parse()
        .ok()
        .filter(|&n| n > 0 && n < 0xff00)
        .with_context(|| format!("--port '{s}': '{n}' is not a port number (1-65279)"))?;
    Ok((n, uri.to_string()))
}

/// Keep freed heap memory in the process for reuse instead of returning it
/// to the kernel: every rule batch builds a new table version and frees an
/// old one, and a million-rule version is ~200 MB; given back, each batch
/// page-faults it in again (a third of the time of inserting 1M rules).
/// The switch's memory then stays at its high-water mark, as a DPDK
/// application's preallocated memory does.
fn keep_freed_memory() {
    // SAFETY: mallopt only sets allocator parameters; called once at start.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, i32::MAX);
    }
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
    let mut specs = Vec::new();
    for p in &a.ports {
        let (n, uri) = parse_port(p)?;
        if specs.iter().any(|(m, _)| *m == n) {
            bail!("--port '{p}': port number {n} given twice");
        }
        specs.push((n, uri));
    }
    // The table: groups and meters first (rules refer to them).
    let mut table = FlowTable::new();
    if let Some(f) = &a.groups {
        for (ln, l) in read_lines(f, "--groups")? {
            let g = Group::parse(&l).map_err(|e| anyhow::anyhow!("{}:{ln}: {e}", f.display()))?;
            table.add_group(g);
        }
    }
    if let Some(f) = &a.meters {
        for (ln, l) in read_lines(f, "--meters")? {
            let m = Meter::parse(&l).map_err(|e| anyhow::anyhow!("{}:{ln}: {e}", f.display()))?;
            table.add_meter(m);
        }
    }
    if let Some(f) = &a.flows {
        let now = mono_ns();
        for (ln, l) in read_lines(f, "--flows")? {
            let r = Rule::parse(&l).map_err(|e| anyhow::anyhow!("{}:{ln}: {e}", f.display()))?;
            table
                .add_flow(r, now)
                .map_err(|e| anyhow::anyhow!("{}:{ln}: {e}", f.display()))?;
        }
    }
    let ctl = Control::new(table);
    let stop = common::stop_flag()?;
    let opts = OpenOptions {
        batch: a.batch,
        ring_size: a.ring,
        busy_poll: a.poll == "busy",
        ..OpenOptions::default()
    };
    let mut ports = Vec::new();
    for (n, uri) in &specs {
        let p = linerate_io::open(uri, &opts).with_context(|| format!("port {n}"))?;
        if !a.json {
            eprintln!(
                "port {n}: {} ({}: {})",
                p.info.uri, p.info.kind, p.info.detail
            );
        }
        ports.push(SwitchPort::new(*n, uri, p.rx, p.tx));
    }
    keep_freed_memory();
    let mut dp = Datapath::new(ports, ctl.clone(), a.batch, !a.no_emc);
    let shared = Arc::new(Shared {
        ctl: ctl.clone(),
        ports: dp
            .ports
            .iter()
            .map(|p| (p.no, p.uri.clone(), p.counters.clone()))
            .collect(),
        cache: dp.cache.clone(),
        counters: dp.counters.clone(),
    });
    let cycles: Arc<SwitchCycles> = dp.cycles.clone();

    let server = match &a.ctl {
        Some(path) => {
            let l = Listener::bind(path).map_err(|e| anyhow::anyhow!("--ctl {e}"))?;
            if !a.json {
                eprintln!("control socket: {}", path.display());
            }
            let h: Arc<dyn Handler> = Arc::new(SwitchCtl(shared.clone()));
            Some(Server::start(l, h, Limits::default()).map_err(anyhow::Error::msg)?)
        }
        None => None,
    };

    let polling = if a.poll == "busy" {
        Polling::Busy
    } else {
        Polling::Wait
    };
    let profile = a.profile;
    let cpu = a.cpu;
    let done = Arc::new(AtomicBool::new(false));
    let (st, dn) = (stop.clone(), done.clone());
    let t0 = Instant::now();
    let worker = std::thread::Builder::new()
        .name("linerate-switch".into())
        .spawn(move || -> Result<()> {
            if let Some(c) = cpu {
                common::pin_to_cpu(c)?;
            }
            let r = dp.run(&st, polling, profile);
            dn.store(true, Ordering::SeqCst);
            r?;
            Ok(())
        })
        .context("spawning the datapath thread")?;

    // Reporter and control tick: once a second, never on the datapath.
    let mut last = shared.counters.snapshot();
    let mut last_c = cache_now(&shared.cache);
    let mut last_t = Instant::now();
    let deadline = a.duration.map(|d| t0 + Duration::from_secs_f64(d.max(0.0)));
    while !done.load(Ordering::SeqCst) && !worker.is_finished() {
        std::thread::sleep(Duration::from_millis(50));
        if let Some(dl) = deadline {
            if Instant::now() >= dl {
                stop.store(true, Ordering::SeqCst);
            }
        }
        if last_t.elapsed() >= Duration::from_secs(1) {
            // Never blocks on a control client: a tick that finds the table
            // being edited waits for the next second.
            let _ = ctl.try_tick(mono_ns());
            let now = shared.counters.snapshot();
            let now_c = cache_now(&shared.cache);
            let dt = last_t.elapsed().as_secs_f64();
            if !a.quiet {
                let dc: [u64; 3] = std::array::from_fn(|i| now_c[i].wrapping_sub(last_c[i]));
                print_interval(
                    a.json,
                    t0.elapsed().as_secs_f64(),
                    dt,
                    &now.delta(&last),
                    dc,
                    &shared,
                );
            }
            last = now;
            last_c = now_c;
            last_t = Instant::now();
        }
    }
    stop.store(true, Ordering::SeqCst);
    let r = worker
        .join()
        .map_err(|_| anyhow::anyhow!("datapath thread panicked"))?;
    // Stops accepting and removes the socket file at once; clients are
    // not waited for.
    if let Some(s) = server {
        s.stop();
    }
    // The final account also when a port failed (its interface went away):
    // counters up to that point, then the error.
    let report = final_report(&a, t0.elapsed().as_secs_f64(), &shared, &cycles.snapshot());
    r?;
    report
}

/// (EMC hits, classifier lookups = EMC misses, subtables searched).
fn cache_now(c: &CacheCounters) -> [u64; 3] {
    [
        c.emc_hits.load(Relaxed),
        c.cls_lookups.load(Relaxed),
        c.subtables_searched.load(Relaxed),
    ]
}

fn print_interval(json: bool, t: f64, dt: f64, d: &SwitchSnapshot, dc: [u64; 3], sh: &Shared) {
    // EMC hit rate and subtables probed per classifier lookup in this interval.
    let hit = dc[0] as f64 / (dc[0] + dc[1]).max(1) as f64;
    let per = dc[2] as f64 / dc[1].max(1) as f64;
    if json {
        let drops: serde_json::Map<String, Value> = d
            .drops_nonzero()
            .map(|(n, c)| (n.to_string(), json!(c)))
            .collect();
        outln!(
            "{}",
            json!({"t": t, "rx_pps": d.received as f64 / dt, "fwd_pps": d.forwarded as f64 / dt,
                   "drops": drops, "rules": sh.ctl.current().len(),
                   "emc_hit_rate": hit, "subtables_per_lookup": per})
        );
        return;
    }
    let drops: Vec<String> = d.drops_nonzero().map(|(n, c)| format!("{n}={c}")).collect();
    outln!(
        "{t:>7.1}s  rx {:>8.3} Mpps  fwd {:>8.3} Mpps | emc {:>5.1} %  {per:.2} subtables/lookup | drops: {}",
        d.received as f64 / dt / 1e6,
        d.forwarded as f64 / dt / 1e6,
        hit * 100.0,
        if drops.is_empty() {
            "none".to_string()
        } else {
            drops.join(" ")
        }
    );
}

fn final_report(
    a: &Args,
    elapsed: f64,
    sh: &Shared,
    cy: &linerate_pipeline::switch::datapath::SwitchCyclesSnapshot,
) -> Result<()> {
    let s = sh.counters.snapshot();
    let drops: serde_json::Map<String, Value> = s
        .drops_nonzero()
        .map(|(n, c)| (n.to_string(), json!(c)))
        .collect();
    let pk = s.received.max(1) as f64;
    let stages = [
        ("rx", cy.rx),
        ("extract", cy.extract),
        ("lookup", cy.lookup),
        ("actions", cy.actions),
        ("tx", cy.tx),
        ("buffers", cy.buffers),
    ];
    let total: u64 = stages.iter().map(|(_, c)| c).sum();
    if a.json {
        let mut v = json!({
            "elapsed_s": elapsed, "received": s.received, "received_bytes": s.received_bytes,
            "forwarded": s.forwarded, "dropped": s.dropped(), "drops": drops,
            "balanced": s.balanced(), "ports": ports_json(sh), "cache": cache_json(sh),
        });
        if a.profile {
            let mut per: serde_json::Map<String, Value> = stages
                .iter()
                .map(|(n, c)| (n.to_string(), json!(*c as f64 / pk)))
                .collect();
            per.insert("total".into(), json!(total as f64 / pk));
            v["profile"] = json!({"clock": "tsc", "tsc_hz": tsc::tsc_hz(), "packets": s.received,
                "batches": cy.batches, "cycles_per_packet": per, "empty_polls": cy.empty_polls});
        }
        outln!("{v}");
    } else {
        outln!("final account after {elapsed:.2} s:");
        let by: Vec<String> = s.drops_nonzero().map(|(n, c)| format!("{n}={c}")).collect();
        outln!(
            "  received {}  forwarded {}  dropped {} ({})  received = forwarded + drops {}",
            s.received,
            s.forwarded,
            s.dropped(),
            if by.is_empty() {
                "-".to_string()
            } else {
                by.join(" ")
            },
            if s.balanced() {
                "holds"
            } else {
                "DOES NOT HOLD"
            }
        );
        for (n, uri, c) in &sh.ports {
            outln!(
                "  port {n:<3} {uri:<24} rx {:>12}  tx {:>12}  tx_dropped {}",
                c.rx_packets.load(Relaxed),
                c.tx_packets.load(Relaxed),
                c.tx_dropped.load(Relaxed)
            );
        }
        let c = cache_json(sh);
        outln!(
            "  cache: emc hit rate {:.1} % ({} hits, {} misses, {} bypassed), classifier {} lookups, {:.2} subtables per lookup, {} rules in {} subtables",
            c["emc_hit_rate"].as_f64().unwrap_or(0.0) * 100.0,
            c["emc_hits"], c["emc_misses"], c["emc_bypassed"], c["classifier_lookups"],
            c["subtables_per_lookup"].as_f64().unwrap_or(0.0), c["rules"], c["subtables"]
        );
        if a.profile {
            outln!(
                "profile (TSC cycles per packet, {:.2} GHz, {} packets in {} batches):",
                tsc::tsc_hz() / 1e9,
                s.received,
                cy.batches
            );
            let h: Vec<String> = stages.iter().map(|(n, _)| format!("{n:>9}")).collect();
            outln!("  {} {:>9}", h.join(""), "total");
            let v: Vec<String> = stages
                .iter()
                .map(|(_, c)| format!("{:>9.1}", *c as f64 / pk))
                .collect();
            outln!("  {} {:>9.1}", v.join(""), total as f64 / pk);
        }
    }
    if !s.balanced() {
        bail!("internal accounting error: received != forwarded + drops");
    }
    Ok(())
}

// ---- switch-ctl ----

#[derive(clap::Args)]
#[command(
    about = "Control a running `linerate switch` over its Unix socket",
    after_help = "\
Commands:
  add-flow RULE        add or replace one rule (ovs-ofctl syntax)
  add-flows FILE       add the rules of FILE (one per line), all or nothing
  del-flows [MATCH]    delete the rules the match covers (all without MATCH)
  dump-flows [MATCH]   rules with counters, ovs-ofctl style (with MATCH: those at least as
                       specific); --json adds each rule's counters, creation and first/last hit times
  dump-ports           per-port packet and byte counters
  dump-groups          groups
  add-group SPEC       group_id=ID,type=all,bucket=output:P,...
  add-meter SPEC       meter=ID,pktps|kbps,band=type=drop,rate=R[,burst_size=B]
  cache-stats          exact-match cache and classifier counters

Examples:
  linerate switch-ctl /run/sw.sock add-flow 'priority=100,in_port=1,udp,tp_dst=53,actions=output:2'
  linerate switch-ctl /run/sw.sock dump-flows
  linerate switch-ctl /run/sw.sock del-flows 'in_port=1'
  linerate switch-ctl /run/sw.sock cache-stats --json"
)]
pub struct CtlArgs {
    /// The switch's control socket (--ctl).
    pub socket: PathBuf,
    /// The command (see below).
    pub command: String,
    /// Its argument (a rule, match, file or spec).
    pub arg: Option<String>,
    /// Print the reply as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run_ctl(a: CtlArgs) -> Result<()> {
    let s = UnixStream::connect(&a.socket)
        .with_context(|| format!("control socket '{}'", a.socket.display()))?;
    s.set_read_timeout(Some(Duration::from_secs(60)))?;
    let wrote = || format!("writing to '{}'", a.socket.display());
    if a.command == "add-flows" {
        let f = a.arg.as_ref().context("add-flows needs a FILE")?;
        // The rule lines are counted, then written straight from the file
        // text through a buffer: no copy of a million-rule file is built
        // (each copy is ~70 MB to page-fault in, on the core the switch's
        // control thread needs).
        let text = std::fs::read_to_string(f).with_context(|| format!("add-flows file '{f}'"))?;
        let n = rule_lines(&text).count();
        let mut w = std::io::BufWriter::with_capacity(1 << 16, &s);
        writeln!(w, "add-flows {n}").with_context(wrote)?;
        for (_, l) in rule_lines(&text) {
            w.write_all(l.as_bytes()).with_context(wrote)?;
            w.write_all(b"\n").with_context(wrote)?;
        }
        w.flush().with_context(wrote)?;
    } else {
        let mut req = a.command.clone();
        if let Some(x) = &a.arg {
            if x.contains('\n') {
                bail!("argument contains a newline");
            }
            req.push(' ');
            req.push_str(x);
        }
        req.push('\n');
        (&s).write_all(req.as_bytes()).with_context(wrote)?;
    }
    let mut reply = String::new();
    BufReader::new(&s)
        .read_line(&mut reply)
        .with_context(|| format!("reading from '{}'", a.socket.display()))?;
    let v: Value = serde_json::from_str(reply.trim()).with_context(|| {
        format!(
            "bad reply from '{}': '{}'",
            a.socket.display(),
            reply.trim()
        )
    })?;
    if v["ok"] != json!(true) {
        bail!("{}: {}", a.command, v["error"].as_str().unwrap_or("failed"));
    }
    if a.json {
        outln!("{v}");
        return Ok(());
    }
    match a.command.as_str() {
        "dump-flows" | "dump-groups" => {
            let k = if a.command == "dump-flows" {
                "flows"
            } else {
                "groups"
            };
            for l in v[k].as_array().into_iter().flatten() {
                outln!(" {}", l.as_str().unwrap_or(""));
            }
        }
        "dump-ports" => {
            for p in v["ports"].as_array().into_iter().flatten() {
                outln!(
                    "  port {}: rx pkts={}, bytes={} tx pkts={}, bytes={}, drop={}",
                    p["port"],
                    p["rx_packets"],
                    p["rx_bytes"],
                    p["tx_packets"],
                    p["tx_bytes"],
                    p["tx_dropped"]
                );
            }
        }
        _ => {
            let mut v = v;
            if let Some(o) = v.as_object_mut() {
                o.remove("ok");
            }
            if v.as_object().is_some_and(|o| !o.is_empty()) {
                outln!("{v}");
            }
        }
    }
    Ok(())
}
