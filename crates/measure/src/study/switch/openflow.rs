//! The switch study's part `openflow` (issue 22 point 4): rule insertion
//! through the OpenFlow channel, timed by one client against `linerate
//! switch --openflow` and Open vSwitch's userspace datapath (its own
//! OpenFlow listener) in the same run, 1k to 1M rules.
//!
//! The bed is the RFC 2544 test bed (namespaces gen | dut | sink, veth
//! pairs g0-d0 and d1-s0). The switch under test runs in the dut namespace
//! with d0 as OpenFlow port 1 and d1 as port 2 and listens on
//! 127.0.0.1:[`OF_PORT`] there; the client's TCP connection is made by a
//! thread that entered that namespace (a socket stays in the namespace it
//! was made in, so the measuring thread uses it from outside). A thread in
//! the gen namespace sends a paced trickle of UDP frames into g0 (so into
//! port 1) that only the probe rule matches; a thread in the sink namespace
//! notes when they come out of s0 (port 2).
//!
//! Per table size N: `FLOW_MOD` delete-all, `priority=0,actions=drop`,
//! barrier; wait until no probe frame has come out for [`QUIET`]; t0; the
//! N rules of [`super`]'s insertion batches then the probe rule,
//! all queued back to back, then one barrier; t_barrier = its reply;
//! t_first = the first probe frame out of port 2 after t0 (one monotonic
//! clock); `OFPMP_AGGREGATE` on the part's cookie counts the rules the
//! switch holds (N + 1 expected).

use super::ovs::{ovs_version, Ovs, NO_OVS};
use super::rules::insert_rules;
use crate::bench::external::Raw;
use crate::report::Table;
use crate::study::{last_json, thousands};
use crate::testbed::{in_netns, Testbed, TestbedConfig, IF_GEN, IF_SINK};
use linerate_io::xdp::generator::ipv4_udp_frame;
use linerate_testkit::{in_ns, Proc};
use serde_json::{json, Value};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The table sizes.
pub const SIZES: [u32; 4] = [1000, 10_000, 100_000, 1_000_000];
/// Probe frames a second into port 1, sent [`BURST`] at a time.
pub const RATE_PPS: u64 = 20_000;
const BURST: u64 = 2;
/// The probe rule, queued after the N rules; the trickle's frames (UDP to
/// 192.168.77.1:7777) match it and nothing else.
pub const PROBE_RULE: &str = "priority=200,udp,nw_dst=192.168.77.1,tp_dst=7777,actions=output:2";
const PROBE_IP: [u8; 4] = [192, 168, 77, 1];
const PROBE_PORT: u16 = 7777;
const DROP_RULE: &str = "priority=0,actions=drop";
/// The cookie of the N rules and the probe rule (what `aggregate` counts).
pub const COOKIE: u64 = 0x6c72_0f00;
/// The OpenFlow listener's port (127.0.0.1 in the dut namespace).
pub const OF_PORT: u16 = 16653;
/// Bounds every read and write of the OpenFlow connection.
const TIMEOUT: Duration = Duration::from_secs(300);
/// No probe frame for this long after the table was emptied: nothing of
/// the last size is still on its way.
pub const QUIET: Duration = Duration::from_millis(100);
/// The first probe frame after the barrier reply, at most this late.
const FIRST_LIMIT: Duration = Duration::from_secs(60);

/// An `OFPT_ERROR` a switch sent: (xid, type, code).
pub type Refused = (u32, u16, u16);

/// One OpenFlow 1.3 controller connection, as the part uses it. The CLI
/// gives linerate's client (`linerate_pipeline::switch::openflow::client`,
/// the same for both switches): measure drives the pipelines from beside,
/// it does not link them.
pub trait Controller: Send {
    /// Queue a `FLOW_MOD` deleting every rule of every table.
    fn delete_all(&mut self) -> Result<(), String>;
    /// Queue a `FLOW_MOD` adding rule `i` of the set given to [`Prepare`].
    fn add(&mut self, i: usize) -> Result<(), String>;
    /// Flush, send a `BARRIER_REQUEST` and wait for its reply; the errors
    /// the switch sent before it.
    fn barrier(&mut self) -> Result<Vec<Refused>, String>;
    /// The rules whose cookie is `cookie` (`OFPMP_AGGREGATE`, every table).
    fn count(&mut self, cookie: u64) -> Result<u32, String>;
}

/// Makes connections for one parsed rule set.
pub trait Dialer: Sync {
    /// Connect to `addr` and exchange `HELLO`s; `timeout` bounds every
    /// read and write.
    fn connect(&self, addr: SocketAddr, timeout: Duration) -> Result<Box<dyn Controller>, String>;
}

/// Parse the rules (ovs-ofctl syntax, one per entry) once, before any
/// timing; an error names the rule.
pub type Prepare = fn(&[String]) -> Result<Box<dyn Dialer>, String>;

/// What the sender, the receiver and the measuring thread share. Times are
/// nanoseconds since `base` (0: none yet).
struct Probe {
    base: Instant,
    stop: AtomicBool,
    sent: AtomicU64,
    seen: AtomicU64,
    /// The last probe frame out of port 2.
    last: AtomicU64,
    /// The first probe frame out of port 2 at or after `armed`.
    armed: AtomicU64,
    first: AtomicU64,
    /// The sender's or the receiver's failure.
    error: Mutex<Option<String>>,
}

impl Probe {
    fn new() -> Probe {
        Probe {
            base: Instant::now(),
            stop: AtomicBool::new(false),
            sent: AtomicU64::new(0),
            seen: AtomicU64::new(0),
            last: AtomicU64::new(0),
            armed: AtomicU64::new(0),
            first: AtomicU64::new(0),
            error: Mutex::new(None),
        }
    }

    fn now(&self) -> u64 {
        (self.base.elapsed().as_nanos() as u64).max(1)
    }

    /// A probe frame came out of port 2.
    fn saw(&self) {
        let t = self.now();
        self.seen.fetch_add(1, Ordering::Relaxed);
        self.last.store(t, Ordering::SeqCst);
        let a = self.armed.load(Ordering::SeqCst);
        if a != 0 && t >= a {
            let _ = self
                .first
                .compare_exchange(0, t, Ordering::SeqCst, Ordering::SeqCst);
        }
    }

    /// t0: from now on the first probe frame is noted.
    fn arm(&self) -> u64 {
        self.first.store(0, Ordering::SeqCst);
        let t = self.now();
        self.armed.store(t, Ordering::SeqCst);
        t
    }

    fn fail(&self, e: String) {
        if let Ok(mut g) = self.error.lock() {
            g.get_or_insert(e);
        }
        self.stop.store(true, Ordering::SeqCst);
    }

    /// Poll `cond` (every millisecond) until it holds; an error after
    /// `limit` or when the sender or receiver failed.
    fn wait(&self, what: &str, limit: Duration, cond: impl Fn() -> bool) -> Result<(), String> {
        let t = Instant::now();
        while !cond() {
            if let Some(e) = self.error.lock().ok().and_then(|g| g.clone()) {
                return Err(e);
            }
            if t.elapsed() > limit {
                return Err(format!("{what}: not within {} s", limit.as_secs()));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(())
    }
}

/// Stops the trickle when the measuring code is left, however.
struct StopOnDrop<'a>(&'a Probe);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.stop.store(true, Ordering::SeqCst);
    }
}

/// Whether `f` is a trickle frame: IPv4, UDP, to 192.168.77.1:7777.
pub fn is_probe(f: &[u8]) -> bool {
    f.len() >= 42
        && f[12..14] == [0x08, 0x00]
        && f[23] == 17
        && f[30..34] == PROBE_IP
        && f[36..38] == PROBE_PORT.to_be_bytes()
}

/// The part's rules: the `max` rules of the largest size (size N: the
/// first N), the probe rule (index `max`), both with the part's cookie,
/// and the drop rule (index `max + 1`).
pub fn rule_lines(max: u32) -> Vec<String> {
    insert_rules(max)
        .lines()
        .chain([PROBE_RULE])
        .map(|l| format!("cookie={COOKIE:#x},{l}"))
        .chain([DROP_RULE.to_string()])
        .collect()
}

/// Run the part: linerate, then Open vSwitch up to `ovs_max` rules. Every
/// size's result, or why it has none, is in the JSON's `runs`.
pub fn run(
    lr: &Path,
    dir: &Path,
    cpu: usize,
    ovs_max: u64,
    prepare: Prepare,
    progress: &mut dyn FnMut(&str),
) -> Result<Value, String> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpu >= cpus {
        return Err(format!(
            "--cpu {cpu}: this machine has CPUs 0 to {}",
            cpus - 1
        ));
    }
    let max = SIZES[SIZES.len() - 1];
    progress(&format!(
        "openflow: parsing {} rules",
        thousands(u64::from(max) + 2)
    ));
    let dialer = prepare(&rule_lines(max))?;
    let dialer = dialer.as_ref();
    let bed = Testbed::up(&TestbedConfig {
        ipv6: false,
        ..TestbedConfig::default()
    })
    .map_err(|e| format!("test bed: {e}"))?;
    let i = bed.info().clone();
    let ns = i.ns_dut.as_str();
    let frame = ipv4_udp_frame(
        i.sink.mac.0,
        i.gen.mac.0,
        i.gen.ipv4.octets(),
        PROBE_IP,
        1024,
        PROBE_PORT,
        60,
    );
    // The trickle's threads keep off the switch's CPU.
    let other = (cpu + 1) % cpus;
    let p = Probe::new();
    let mut runs = Vec::new();
    let mut linerate_final = Value::Null;
    let mut ovs_v = Value::Null;
    std::thread::scope(|s| {
        let (p, frame) = (&p, &frame);
        s.spawn(move || beside(p, &i.ns_gen, other, || send_trickle(p, frame)));
        s.spawn(move || beside(p, &i.ns_sink, other, || receive(p)));
        let _stop = StopOnDrop(p);
        progress(&format!("openflow: linerate switch --port 1=afpacket:d0 --port 2=afpacket:d1 --openflow ptcp:{OF_PORT} --cpu {cpu}"));
        match start_linerate(lr, ns, cpu, dialer) {
            Ok((sw, mut c)) => {
                series(c.as_mut(), "linerate", u64::MAX, p, &mut runs, progress);
                drop(c);
                match sw.finish() {
                    Ok(v) => linerate_final = v,
                    Err(e) => runs.push(json!({"switch": "linerate", "error": e})),
                }
            }
            Err(e) => runs.push(json!({"switch": "linerate", "error": e})),
        }
        let Some(v) = ovs_version() else {
            runs.push(json!({"switch": "ovs", "skipped": NO_OVS}));
            return;
        };
        progress(&format!("openflow: Open vSwitch {v}, bridge lrbench (netdev datapath, d0 = 1, d1 = 2), ptcp:{OF_PORT}:127.0.0.1"));
        ovs_v = json!(v);
        match start_ovs(dir, ns, dialer) {
            Ok((ovs, mut c)) => {
                series(c.as_mut(), "ovs", ovs_max, p, &mut runs, progress);
                // The connection closes before the daemons stop.
                drop(c);
                drop(ovs);
            }
            Err(e) => runs.push(json!({"switch": "ovs", "error": e})),
        }
    });
    let sent = p.sent.load(Ordering::Relaxed);
    let seen = p.seen.load(Ordering::Relaxed);
    // Daemons and switch are gone; the bed goes now (its errors on stderr).
    drop(bed);
    Ok(json!({
        "sizes": SIZES, "rate_pps": RATE_PPS, "probe_rule": PROBE_RULE, "cookie": COOKIE,
        "cpu": cpu, "cpus": cpus, "ovs_max": ovs_max, "ovs_version": ovs_v,
        "date": linerate_io::time::utc_rfc3339(),
        "cpu_model": linerate_io::host::cpu_model(),
        "kernel": linerate_io::host::kernel_release(),
        "probe_frames": {"sent": sent, "out_of_port_2": seen},
        "linerate_final": linerate_final, "runs": runs,
    }))
}

/// Run `f` on this thread in namespace `ns`, pinned to `cpu`; its error
/// stops the part (through `p`).
fn beside(p: &Probe, ns: &str, cpu: usize, f: impl FnOnce() -> Result<(), String> + Send) {
    let r = in_netns(ns, || {
        crate::bench::pin(cpu);
        f()
    });
    if let Err(e) = r.map_err(|e| e.to_string()).and_then(|r| r) {
        p.fail(e);
    }
}

/// Every size into one switch (`name`: linerate, ovs), up to `limit`
/// rules; the first failure ends the switch's series.
fn series(
    c: &mut dyn Controller,
    name: &str,
    limit: u64,
    p: &Probe,
    runs: &mut Vec<Value>,
    progress: &mut dyn FnMut(&str),
) {
    for n in SIZES {
        if u64::from(n) > limit {
            runs.push(json!({"switch": name, "rules": n, "skipped": format!("--ovs-max {limit}")}));
            continue;
        }
        progress(&format!(
            "openflow: {} rules into {name} over OpenFlow",
            thousands(u64::from(n))
        ));
        match insert(c, n as usize, p) {
            Ok(mut v) => {
                progress(&format!(
                    "openflow:   {name} {}: barrier after {:.3} s ({:.0} rules/s), first packet {:.3} s, {} errors, {} rules in the table",
                    thousands(u64::from(n)),
                    f(&v["insert_s"]),
                    f64::from(n) / f(&v["insert_s"]).max(1e-9),
                    f(&v["first_s"]),
                    v["errors"],
                    v["rules_in_table"]
                ));
                v["switch"] = json!(name);
                v["rules"] = json!(n);
                runs.push(v);
            }
            Err(e) => {
                progress(&format!("openflow:   {name} {n}: {e}"));
                runs.push(json!({"switch": name, "rules": n, "error": e}));
                return;
            }
        }
    }
}

/// One size: empty the table, wait for quiet, insert `n` rules and the
/// probe rule, time the barrier and the first probe frame, count the rules.
fn insert(c: &mut dyn Controller, n: usize, p: &Probe) -> Result<Value, String> {
    let max = SIZES[SIZES.len() - 1] as usize;
    c.delete_all()?;
    c.add(max + 1)?;
    let e = c.barrier()?;
    if let Some(x) = e.first() {
        return Err(format!(
            "emptying the table: {} OpenFlow errors (first: type {} code {})",
            e.len(),
            x.1,
            x.2
        ));
    }
    p.wait(
        "the probe trickle's first frame",
        Duration::from_secs(10),
        || p.sent.load(Ordering::Relaxed) > 0,
    )?;
    let quiet = QUIET.as_nanos() as u64;
    p.wait(
        "no probe frame out of port 2 for 100 ms after the table was emptied",
        Duration::from_secs(30),
        || p.now().saturating_sub(p.last.load(Ordering::SeqCst)) >= quiet,
    )?;
    let t0 = p.arm();
    for i in 0..n {
        c.add(i)?;
    }
    c.add(max)?;
    let errors = c.barrier()?;
    let tb = p.now();
    let waited = p.wait(
        "the first probe frame out of port 2 after the barrier reply",
        FIRST_LIMIT,
        || p.first.load(Ordering::SeqCst) != 0,
    );
    p.armed.store(0, Ordering::SeqCst);
    if let Err(w) = waited {
        return Err(format!("{w} ({} OpenFlow errors)", errors.len()));
    }
    let tf = p.first.load(Ordering::SeqCst);
    let count = c.count(COOKIE)?;
    let s = |ns: f64| ns / 1e9;
    Ok(json!({
        "insert_s": s((tb - t0) as f64),
        "first_s": s(tf.saturating_sub(t0) as f64),
        "first_after_barrier_s": s(tf as f64 - tb as f64),
        "errors": errors.len(),
        "first_errors": errors.iter().take(5).map(|(x, t, c)| json!({"xid": x, "type": t, "code": c})).collect::<Vec<_>>(),
        "rules_in_table": count,
        "rules_expected": n + 1,
    }))
}

fn of_addr() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], OF_PORT))
}

/// Whether the OpenFlow listener in namespace `ns` takes connections.
fn listening(ns: &str) -> bool {
    in_netns(ns, || TcpStream::connect(of_addr()).is_ok()).unwrap_or(false)
}

/// A client connected from namespace `ns` (HELLOs exchanged).
fn connect(ns: &str, d: &dyn Dialer) -> Result<Box<dyn Controller>, String> {
    in_netns(ns, || d.connect(of_addr(), TIMEOUT)).map_err(|e| e.to_string())?
}

/// A running `linerate switch` (killed if dropped) and the lines of its
/// standard output.
struct Linerate {
    child: Proc,
    lines: Receiver<String>,
}

impl Linerate {
    /// SIGINT; its final account.
    fn finish(self) -> Result<Value, String> {
        self.child.finish()?;
        let last = self.lines.iter().last().unwrap_or_default();
        last_json("linerate switch", &last)
    }
}

/// `linerate switch` on d0 and d1 in namespace `ns`, listening for
/// OpenFlow; its client.
fn start_linerate(
    lr: &Path,
    ns: &str,
    cpu: usize,
    d: &dyn Dialer,
) -> Result<(Linerate, Box<dyn Controller>), String> {
    let port = format!("ptcp:{OF_PORT}");
    let cpu = cpu.to_string();
    let args: Vec<String> = [
        &lr.display().to_string(),
        "switch",
        "--port",
        "1=afpacket:d0",
        "--port",
        "2=afpacket:d1",
        "--openflow",
        &port,
        "--cpu",
        &cpu,
        "--quiet",
        "--json",
    ]
    .map(String::from)
    .to_vec();
    let mut child = Proc::spawn(&mut in_ns(ns, &args), "linerate switch")?;
    crate::guard::register_pid(child.pid());
    // Both pipes are read from now on: a stream of refusals on its
    // standard error cannot stop it.
    child.keep_stderr_tail();
    let lines = child.stdout_lines();
    child.wait_ready(Duration::from_secs(30), |_| listening(ns))?;
    let c = connect(ns, d)?;
    Ok((Linerate { child, lines }, c))
}

/// Open vSwitch in namespace `ns`: bridge `lrbench` (netdev datapath,
/// fail_mode=secure, OpenFlow 1.3, no in-band rules) with d0 as port 1 and
/// d1 as port 2, a passive OpenFlow listener; its client.
fn start_ovs(dir: &Path, ns: &str, d: &dyn Dialer) -> Result<(Ovs, Box<dyn Controller>), String> {
    let ovs = Ovs::start_in(dir, ns)?;
    let target = format!("ptcp:{OF_PORT}:127.0.0.1");
    ovs.vsctl(&[
        "set",
        "bridge",
        "lrbench",
        "fail_mode=secure",
        "protocols=OpenFlow13",
        "other_config:disable-in-band=true",
        "--",
        "add-port",
        "lrbench",
        "d0",
        "--",
        "set",
        "interface",
        "d0",
        "ofport_request=1",
        "--",
        "add-port",
        "lrbench",
        "d1",
        "--",
        "set",
        "interface",
        "d1",
        "ofport_request=2",
        "--",
        "set-controller",
        "lrbench",
        &target,
    ])?;
    let t = Instant::now();
    loop {
        let port = |i: &str| ovs.vsctl(&["get", "interface", i, "ofport"]);
        let (a, b) = (port("d0")?, port("d1")?);
        if a == "1" && b == "2" {
            break;
        }
        if t.elapsed() > Duration::from_secs(20) {
            return Err(format!(
                "Open vSwitch: d0 and d1 are OpenFlow ports {a} and {b}, not 1 and 2 (d0's error: {})",
                ovs.vsctl(&["get", "interface", "d0", "error"]).unwrap_or_default()
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let t = Instant::now();
    while !listening(ns) {
        if t.elapsed() > Duration::from_secs(20) {
            return Err(format!(
                "Open vSwitch: no OpenFlow listener on {target} after 20 s"
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let c = connect(ns, d)?;
    Ok((ovs, c))
}

/// The trickle: [`BURST`] frames every `BURST / RATE_PPS` seconds into g0
/// (this thread is in the gen namespace), sleeping in between.
fn send_trickle(p: &Probe, frame: &[u8]) -> Result<(), String> {
    let raw = Raw::open(IF_GEN, 0).map_err(|e| format!("probe sender: {e}"))?;
    // Wake-ups within a few µs of the schedule (the default slack is 50 µs).
    // SAFETY: prctl on the calling thread with a plain integer argument.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1000u64) };
    let period = Duration::from_nanos(1_000_000_000 * BURST / RATE_PPS);
    let mut next = Instant::now();
    while !p.stop.load(Ordering::Relaxed) {
        for _ in 0..BURST {
            raw.send(frame)
                .map_err(|e| format!("probe sender on {IF_GEN}: {e}"))?;
        }
        p.sent.fetch_add(BURST, Ordering::Relaxed);
        next += period;
        let now = Instant::now();
        match next.checked_duration_since(now) {
            Some(d) => std::thread::sleep(d),
            // Far behind (the CPU was busy): no burst to catch up.
            None if now - next > 10 * period => next = now,
            None => {}
        }
    }
    Ok(())
}

/// Note every probe frame out of s0 (this thread is in the sink namespace).
fn receive(p: &Probe) -> Result<(), String> {
    const ETH_P_IP: u16 = 0x0800;
    let raw = Raw::open(IF_SINK, ETH_P_IP).map_err(|e| format!("probe receiver: {e}"))?;
    let mut buf = [0u8; 2048];
    while !p.stop.load(Ordering::Relaxed) {
        if let Some(n) = raw.recv(&mut buf) {
            if is_probe(&buf[..n]) {
                p.saw();
            }
        }
    }
    Ok(())
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or(0.0)
}

/// The part's paragraph, table and findings from its JSON.
pub fn report(v: &Value) -> (String, Table, Vec<String>) {
    let runs: Vec<&Value> = v["runs"].as_array().into_iter().flatten().collect();
    let get = |sw: &str, n: u64| {
        runs.iter()
            .copied()
            .find(|r| r["switch"] == sw && r["rules"].as_u64() == Some(n))
    };
    let name = |sw: &str| {
        if sw == "ovs" {
            "Open vSwitch"
        } else {
            "linerate"
        }
    };
    let mut t = Table {
        title: "Rule insertion over OpenFlow 1.3, linerate against Open vSwitch (N FLOW_MODs, the probe rule, one barrier)".into(),
        header: [
            "rules",
            "switch",
            "insertion: to the barrier reply (s)",
            "rules/s",
            "first packet through the probe rule (s)",
            "first packet - barrier reply (ms)",
            "OpenFlow errors",
            "rules in the table (N+1)",
            "Open vSwitch / linerate",
        ]
        .map(String::from)
        .to_vec(),
        rows: vec![],
    };
    let mut findings = Vec::new();
    let mut bad = Vec::new();
    for n in v["sizes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_u64)
    {
        for sw in ["linerate", "ovs"] {
            let Some(r) = get(sw, n) else { continue };
            let mut row = vec![thousands(n), name(sw).to_string()];
            if let Some(e) = r["error"].as_str() {
                row.push(format!("failed: {e}"));
                row.extend(["-"; 6].map(String::from));
            } else if let Some(s) = r["skipped"].as_str() {
                row.push(format!("skipped ({s})"));
                row.extend(["-"; 6].map(String::from));
            } else {
                let ins = f(&r["insert_s"]);
                let ratio = match (sw, get("linerate", n)) {
                    ("ovs", Some(l)) if l["insert_s"].is_number() => {
                        format!("{:.1}x", ins / f(&l["insert_s"]).max(1e-9))
                    }
                    _ => "-".into(),
                };
                let (count, want) = (&r["rules_in_table"], &r["rules_expected"]);
                if r["errors"] != 0 || count != want {
                    bad.push(format!(
                        "{} at {}: {} OpenFlow errors, {count} of {want} rules in the table",
                        name(sw),
                        thousands(n),
                        r["errors"]
                    ));
                }
                row.extend([
                    format!("**{ins:.3}**"),
                    format!("{:.0}", n as f64 / ins.max(1e-9)),
                    format!("{:.3}", f(&r["first_s"])),
                    format!("{:+.1}", f(&r["first_after_barrier_s"]) * 1e3),
                    r["errors"].to_string(),
                    thousands(count.as_u64().unwrap_or(0)),
                    ratio,
                ]);
            }
            t.rows.push(row);
        }
    }
    for e in runs
        .iter()
        .filter(|r| r["rules"].is_null() && r["error"].is_string())
    {
        findings.push(format!(
            "{}: {}",
            name(e["switch"].as_str().unwrap_or("")),
            e["error"].as_str().unwrap_or("")
        ));
    }
    let done = |sw: &str| -> Vec<(u64, f64)> {
        runs.iter()
            .filter(|r| r["switch"] == sw && r["insert_s"].is_number())
            .filter_map(|r| Some((r["rules"].as_u64()?, f(&r["insert_s"]))))
            .collect()
    };
    let rate = |(n, s): (u64, f64)| format!("{:.0}", n as f64 / s.max(1e-9));
    let (lr, ovs) = (done("linerate"), done("ovs"));
    if let Some(&(n, s)) = lr.last() {
        let r = get("linerate", n).unwrap_or(&Value::Null);
        findings.push(format!(
            "**linerate took {} rules over OpenFlow in {s:.2} s ({} rules/s) to the barrier reply**; the first probe frame came out {:.3} s after t0, when the first FLOW_MOD was queued ({:+.1} ms from the barrier reply). Rules/s from {} to {} rules: {}.",
            thousands(n),
            rate((n, s)),
            f(&r["first_s"]),
            f(&r["first_after_barrier_s"]) * 1e3,
            thousands(lr[0].0),
            thousands(n),
            lr.iter().map(|x| rate(*x)).collect::<Vec<_>>().join(", ")
        ));
    }
    if let Some(&(n, s)) = ovs.last() {
        let l = lr.iter().find(|x| x.0 == n);
        findings.push(format!(
            "Open vSwitch took {} rules in {s:.2} s ({} rules/s){}; rules/s from {} to {} rules: {}.",
            thousands(n),
            rate((n, s)),
            l.map_or(String::new(), |l| format!(", {:.1}x linerate's time", s / l.1.max(1e-9))),
            thousands(ovs[0].0),
            thousands(n),
            ovs.iter().map(|x| rate(*x)).collect::<Vec<_>>().join(", ")
        ));
    }
    if bad.is_empty() {
        if !lr.is_empty() || !ovs.is_empty() {
            findings.push("Every size: no OpenFlow error, and the switch held N+1 rules (OFPMP_AGGREGATE on the part's cookie).".into());
        }
    } else {
        findings.push(format!("Not clean: {}.", bad.join("; ")));
    }
    let intro = format!(
        "Insertion over OpenFlow (issue 22 point 4; seed 000 found Open vSwitch's insertion time growing exponentially, seed 004 timed hardware switches this way): `linerate bench switch --parts openflow --cpu {cpu} --ovs-max {ovs_max}`, {date}, {model}, Linux {kernel}. \
         One client (linerate's OpenFlow 1.3 client, `crates/pipeline/src/switch/openflow/client.rs`) programs both switches in the same run over TCP, in the RFC 2544 test bed's namespaces (g0-d0, d1-s0). \
         linerate: `linerate switch --port 1=afpacket:d0 --port 2=afpacket:d1 --openflow ptcp:{OF_PORT} --cpu {cpu}` (the datapath thread busy-polls CPU {cpu}; the OpenFlow thread, which decodes the FLOW_MODs and builds the table versions, is unpinned, so with {cpus} CPUs it shares the others with the client and the trickle). \
         Open vSwitch {ovs}: a private ovs-vswitchd, bridge `lrbench` with datapath_type=netdev (userspace), fail_mode=secure, protocols=OpenFlow13, in-band off, d0 and d1 as plain (netdev-linux, not polled by a PMD thread) ports 1 and 2, `set-controller lrbench ptcp:{OF_PORT}:127.0.0.1`; unpinned, its threads may use every CPU. \
         A paced trickle of {rate} UDP frames/s to 192.168.77.1:7777 enters port 1 from g0 throughout; before each size the table holds only `priority=0,actions=drop`. \
         Per size N: delete-all, the drop rule and a barrier; wait until no probe frame has come out of port 2 for {quiet} ms; t0; N FLOW_MODs (`priority=100..106,udp,nw_dst=10.A.B.C,tp_dst=1000..1049,actions=output:2`, the insert part's rules, parsed before t0) and last the probe rule `{PROBE_RULE}`, back to back, then one BARRIER_REQUEST. \
         Insertion: t0 to the BARRIER_REPLY; first packet: t0 to the first probe frame seen on s0 (a packet socket in the sink namespace, same monotonic clock; the trickle's spacing, {gap} µs, bounds its resolution); the rules counted afterwards with OFPMP_AGGREGATE on the part's cookie. One run per size. Open vSwitch above --ovs-max is skipped.",
        cpu = v["cpu"],
        ovs_max = v["ovs_max"],
        date = v["date"].as_str().unwrap_or("?"),
        model = v["cpu_model"].as_str().unwrap_or("?"),
        kernel = v["kernel"].as_str().unwrap_or("?"),
        ovs = v["ovs_version"].as_str().unwrap_or("(not installed)"),
        cpus = v["cpus"],
        rate = thousands(v["rate_pps"].as_u64().unwrap_or(0)),
        quiet = QUIET.as_millis(),
        gap = 1_000_000 * BURST / RATE_PPS,
    );
    (intro, t, findings)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_rule_is_last_and_only_it_matches_the_trickle() {
        use linerate_pipeline::switch::Rule;
        let rules: Vec<Rule> = rule_lines(70_000)
            .iter()
            .map(|l| Rule::parse(l).unwrap())
            .collect();
        assert_eq!(rules.len(), 70_002);
        assert!(rules[..=70_000].iter().all(|r| r.cookie == COOKIE));
        assert_eq!(rules[70_000].priority, 200);
        let drop = &rules[70_001];
        assert!(drop.actions.is_empty() && drop.priority == 0 && drop.cookie == 0);
        // No rule of the batches matches a UDP frame to 192.168.77.1:7777.
        assert!(!insert_rules(1000).contains("nw_dst=192.168."));
        assert!(!insert_rules(1000).contains("tp_dst=7777"));
        let f = ipv4_udp_frame(
            [2; 6],
            [4; 6],
            [10, 0, 0, 1],
            PROBE_IP,
            1024,
            PROBE_PORT,
            60,
        );
        assert!(is_probe(&f));
        let other = ipv4_udp_frame([2; 6], [4; 6], [10, 0, 0, 1], PROBE_IP, 1024, 9, 60);
        assert!(!is_probe(&other));
        assert!(!is_probe(&f[..41]));
    }

    #[test]
    fn the_table_pairs_the_switches_per_size() {
        let ok = |sw: &str, n: u64, s: f64| {
            json!({"switch": sw, "rules": n, "insert_s": s, "first_s": s + 0.001,
                   "first_after_barrier_s": -0.0005, "errors": 0,
                   "rules_in_table": n + 1, "rules_expected": n + 1})
        };
        let v = json!({"sizes": [1000, 10000, 100000], "cpu": 1, "cpus": 2, "ovs_max": 10000, "date": "D",
            "cpu_model": "M", "kernel": "K", "ovs_version": "3.1.0", "rate_pps": 20000,
            "runs": [ok("linerate", 1000, 0.002), ok("linerate", 10000, 0.01),
                     {"switch": "linerate", "rules": 100000, "error": "boom"},
                     ok("ovs", 1000, 0.02), ok("ovs", 10000, 0.5),
                     {"switch": "ovs", "rules": 100000, "skipped": "--ovs-max 10000"}]});
        let (intro, t, findings) = report(&v);
        assert!(intro.contains("--ovs-max 10000`, D, M, Linux K"), "{intro}");
        assert_eq!(t.rows.len(), 6);
        assert_eq!(
            t.rows[3],
            [
                "10,000",
                "Open vSwitch",
                "**0.500**",
                "20000",
                "0.501",
                "-0.5",
                "0",
                "10,001",
                "50.0x"
            ]
        );
        assert_eq!(t.rows[0][8], "-");
        assert_eq!(t.rows[4][2], "failed: boom");
        assert_eq!(t.rows[5][2], "skipped (--ovs-max 10000)");
        assert!(
            findings[0].contains("10,000 rules over OpenFlow in 0.01 s (1000000 rules/s)"),
            "{findings:?}"
        );
        assert!(
            findings[1].contains("50.0x linerate's time"),
            "{findings:?}"
        );
        assert!(findings[2].starts_with("Every size"), "{findings:?}");
    }
}
