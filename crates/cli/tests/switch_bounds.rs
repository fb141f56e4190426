//! Issue 34: what the switch holds is bounded whatever its peers send.
//! - frames with random source MACs through a learning pipeline for 60 s:
//!   the learned table stays at its limit (older learned rules evicted,
//!   counted), resident memory stops growing once it is full, forwarding
//!   goes on, and a FLOW_MOD past the limit gets OFPFMFC_TABLE_FULL
//!   (ovs-ofctl says so);
//! - 64 OpenFlow connections each streaming a million FLOW_MODs at once:
//!   peak resident memory within the stated budget (the table at its
//!   limit, the channel's budget, a reserve and buffers per connection);
//! - a dump of a million rules to clients that read a byte a millisecond
//!   (OpenFlow and the control socket): memory does not grow with it, and
//!   other clients are served meanwhile;
//! - the largest group and a rule of 1000 actions round-trip through
//!   ovs-ofctl exactly; a group or rule too large for an OpenFlow reply is
//!   refused at add with one line.

mod support;

use linerate_pipeline::switch::openflow::client::{multipart_request, stats_request};
use linerate_pipeline::switch::openflow::msg::{flow_mod_add, hello, CONN_RESERVE, PENDING_BUDGET};
use linerate_pipeline::switch::openflow::wire::{
    Header, Writer, BARRIER_REPLY, BARRIER_REQUEST, ERROR, HEADER, MPF_MORE, MP_FLOW,
    MULTIPART_REPLY,
};
use linerate_pipeline::switch::Rule;
use serde_json::Value;
use std::io::{BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::*;

/// (VmRSS, VmHWM) of process `pid`, in bytes.
fn rss(pid: u32) -> (u64, u64) {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kb = |k: &str| {
        s.lines()
            .find(|l| l.starts_with(k))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
            * 1024
    };
    (kb("VmRSS:"), kb("VmHWM:"))
}

/// Samples a process's resident memory every 20 ms until dropped; the
/// highest sample.
struct RssWatch {
    stop: Arc<AtomicBool>,
    max: Arc<AtomicU64>,
    t: Option<std::thread::JoinHandle<()>>,
}

impl RssWatch {
    fn start(pid: u32) -> RssWatch {
        let (stop, max) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicU64::new(0)),
        );
        let (st, mx) = (stop.clone(), max.clone());
        let t = std::thread::spawn(move || {
            let t0 = Instant::now();
            let mut last = 0;
            while !st.load(Ordering::Relaxed) {
                let r = rss(pid).0;
                mx.fetch_max(r, Ordering::Relaxed);
                if std::env::var("LR_RSS_TRACE").is_ok() && r / MB != last / MB {
                    eprintln!("rss {:.2}s {} MB", t0.elapsed().as_secs_f64(), r / MB);
                    last = r;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        RssWatch {
            stop,
            max,
            t: Some(t),
        }
    }
    fn max(&self) -> u64 {
        self.max.load(Ordering::Relaxed)
    }
}

impl Drop for RssWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.t.take() {
            let _ = t.join();
        }
    }
}

const MB: u64 = 1 << 20;

/// `linerate switch` in the switch namespace of `bed`: port 1 its veth
/// (afpacket), port 2 a sink, the control socket `sock`, OpenFlow on
/// 127.0.0.1:`of` there, and `extra` arguments; with its stderr, read as
/// it comes (a pipe nobody reads fills up and stops the switch's logging
/// threads).
fn switch_in(
    bed: &NetnsStar,
    sock: &Path,
    of: u16,
    extra: &[&str],
) -> (Proc, std::sync::mpsc::Receiver<String>) {
    let p1 = format!("1=afpacket:{}", bed.sw_if(1));
    let ofa = format!("ptcp:{of}");
    let mut args = vec![
        "switch",
        "--port",
        &p1,
        "--port",
        "2=mem:out?sink",
        "--poll",
        "wait",
        "--ctl",
    ];
    let sock_s = sock.to_str().unwrap();
    args.push(sock_s);
    args.extend(["--openflow", &ofa, "--json"]);
    args.extend(extra);
    let mut p = spawn_in(&bed.sw_ns(), &args);
    let err = p.stderr_lines();
    wait_ctl(&mut p, sock, "linerate switch");
    (p, err)
}

fn ctl(sock: &Path, args: &[&str]) -> Value {
    let mut a = vec!["switch-ctl", sock.to_str().unwrap()];
    a.extend(args);
    a.push("--json");
    serde_json::from_str(linerate_ok(&a).trim()).unwrap()
}

/// Table `t`'s row of `dump-tables`.
fn table(sock: &Path, t: u64) -> Value {
    ctl(sock, &["dump-tables"])["tables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["table"] == t)
        .cloned()
        .unwrap_or(Value::Null)
}

/// `ovs-ofctl -O OpenFlow13 ARGS TARGET...` in namespace `ns`: its output.
fn ofctl_in(ns: &str, cmd: &str, target: &str, args: &[&str]) -> std::process::Output {
    std::process::Command::new("ip")
        .args([
            "netns",
            "exec",
            ns,
            "ovs-ofctl",
            "-O",
            "OpenFlow13",
            cmd,
            target,
        ])
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn learning_from_random_source_macs_stays_at_the_table_limit() {
    require_tools(&["ovs-ofctl"]);
    let bed = NetnsStar::up("lrsb", 1);
    let dir = TempDir::new("lr-bounds-learn");
    let flows = dir.write(
        "learn.flows",
        "table=0,priority=0,actions=learn(table=1,NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],output:NXM_OF_IN_PORT[]),resubmit(,1)\n\
         table=1,priority=0,actions=output:2\n",
    );
    let limit = 10_000u64;
    let sock = dir.join("sw.sock");
    let of = free_port();
    let (mut sw, _err) = switch_in(
        &bed,
        &sock,
        of,
        &[
            "--flows",
            flows.to_str().unwrap(),
            "--flow-table",
            &format!("table=1,flow_limit={limit}"),
        ],
    );
    let ticks = sw.stdout_lines();
    // Random source MACs (unicast, 2^40 of them) at the generator's top
    // speed for 60 s.
    let profile = dir.write(
        "random-macs.toml",
        "duration_s = 60.0\n\
         [[streams]]\nname = \"macs\"\nid = 1\nsize = 60\n\
         [streams.template]\neth_src = \"02:00:00:00:00:01\"\neth_dst = \"02:00:00:00:00:02\"\n\
         l3 = { ipv4 = { src = \"10.0.0.1\", dst = \"10.0.0.2\" } }\nl4 = { udp = { sport = 1, dport = 2 } }\n\
         [[streams.fields]]\nfield = \"eth_src\"\nop = \"random\"\nmin = \"02:00:00:00:00:00\"\nmax = \"02:ff:ff:ff:ff:ff\"\nseed = 7\n",
    );
    let base = rss(sw.pid()).0;
    let h1 = format!("afpacket:{}", bed.host_if(1));
    let gen = spawn_in(
        &bed.host_ns(1),
        &["gen", &h1, "--profile", profile.to_str().unwrap(), "--json"],
    );
    let watch = RssWatch::start(sw.pid());
    // The table fills...
    wait_until(Duration::from_secs(30), "table 1 at its limit", || {
        sw.assert_running("linerate switch");
        table(&sock, 1)["rules"].as_u64() == Some(limit)
    });
    let at_full = rss(sw.pid()).0;
    let full_at = Instant::now();
    // ... and stays full while older learned rules give way to new ones.
    let mut evicted = Vec::new();
    let mut refused_checked = false;
    while full_at.elapsed() < Duration::from_secs(45) {
        std::thread::sleep(Duration::from_secs(5));
        let t1 = table(&sock, 1);
        assert_eq!(t1["rules"].as_u64(), Some(limit), "{t1}");
        evicted.push(t1["evicted"].as_u64().unwrap());
        if !refused_checked {
            // A FLOW_MOD for the full table is refused as Open vSwitch
            // would: OFPFMFC_TABLE_FULL, and nothing added.
            let target = format!("tcp:127.0.0.1:{of}");
            let o = ofctl_in(
                &bed.sw_ns(),
                "add-flow",
                &target,
                &["table=1,priority=5,in_port=9,actions=drop"],
            );
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(
                !o.status.success() && err.contains("OFPFMFC_TABLE_FULL"),
                "ovs-ofctl: {err}"
            );
            assert!(table(&sock, 1)["refused_full"].as_u64().unwrap() >= 1);
            refused_checked = true;
        }
    }
    assert!(
        evicted.windows(2).all(|w| w[1] > w[0]),
        "evictions go on: {evicted:?}"
    );
    let g = gen.wait_json(Duration::from_secs(60), "linerate gen");
    let sent: u64 = g["streams"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["sent"].as_u64())
        .sum();
    let peak = watch.max().max(rss(sw.pid()).1);
    drop(watch);
    // Forwarding went on every second of the run (the per-second lines).
    sw.interrupt();
    let lines = drain_lines(&ticks, Duration::from_secs(15), "switch json lines");
    let out = sw.wait_output(Duration::from_secs(15), "linerate switch");
    assert_ok(&out, "linerate switch");
    let fin = last_json(&lines.join("\n"));
    let fwd: Vec<f64> = lines
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| v["fwd_pps"].as_f64())
        .collect();
    let busy: Vec<f64> = fwd.iter().copied().filter(|&x| x > 0.0).collect();
    assert!(busy.len() >= 55, "forwarding seconds: {fwd:?}");
    let t1 = fin["tables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["table"] == 1)
        .unwrap()
        .clone();
    let learned = fin["cache"]["learn_requests"].as_u64().unwrap();
    eprintln!(
        "sent {sent}, learn requests {learned}, evicted {}, rss base {} MB, at full {} MB, peak {} MB",
        t1["evicted"],
        base / MB,
        at_full / MB,
        peak / MB
    );
    assert!(sent > 1_000_000 && learned > 10 * limit, "{g} {fin}");
    assert_eq!(fin["balanced"], true, "{fin}");
    // Each eviction made room for a learned rule (table 1 holds its
    // static rule and limit - 1 learned ones).
    let ev = t1["evicted"].as_u64().unwrap();
    assert!(ev > 0 && ev + limit - 1 <= learned, "{t1}");
    // Memory: once the table was full, nothing more to hold (the stated
    // bound: the table at its limit, reached in the first seconds).
    assert!(
        peak <= at_full + 32 * MB,
        "resident memory grew from {} MB (table full) to {} MB",
        at_full / MB,
        peak / MB
    );
}

/// A FLOW_MOD for rule `n` of a family: `priority=10,in_port=1,ip,
/// nw_dst=N` (N as an IPv4 address), built by patching one encoded
/// message (encoding a million rules would cost the test more than the
/// switch).
struct FlowModFamily {
    template: Vec<u8>,
    addr_at: usize,
}

impl FlowModFamily {
    fn new() -> FlowModFamily {
        let r = |a: &str| {
            Rule::parse(&format!(
                "priority=10,in_port=1,ip,nw_dst={a},actions=output:2"
            ))
            .unwrap()
        };
        let a = flow_mod_add(&r("1.2.3.4"), 0);
        let b = flow_mod_add(&r("5.6.7.8"), 0);
        let addr_at = (0..a.len()).find(|&i| a[i] != b[i]).unwrap();
        assert_eq!(&a[addr_at..addr_at + 4], &[1, 2, 3, 4]);
        FlowModFamily {
            template: a,
            addr_at,
        }
    }
    fn put(&self, out: &mut Vec<u8>, n: u32) {
        let at = out.len();
        out.extend_from_slice(&self.template);
        out[at + 4..at + 8].copy_from_slice(&n.to_be_bytes());
        out[at + self.addr_at..at + self.addr_at + 4].copy_from_slice(&n.to_be_bytes());
    }
}

/// Reads messages until a BARRIER_REPLY: (errors of type 5 code 1, other
/// errors, messages).
fn read_until_barrier(mut s: &TcpStream) -> (u64, u64, u64) {
    let mut r = BufReader::with_capacity(1 << 16, &mut s);
    let (mut full, mut other, mut n) = (0, 0, 0);
    let mut h = [0u8; HEADER];
    let mut body = vec![0u8; 1 << 16];
    loop {
        r.read_exact(&mut h).expect("reading the switch's replies");
        let hd = Header::parse(&h).unwrap();
        let len = hd.len as usize;
        assert!(len >= HEADER, "a message of {len} bytes");
        r.read_exact(&mut body[..len - HEADER]).unwrap();
        n += 1;
        match hd.kind {
            ERROR if body[..4] == [0, 5, 0, 1] => full += 1,
            ERROR => other += 1,
            BARRIER_REPLY => return (full, other, n),
            _ => {}
        }
    }
}

/// Connect and exchange HELLOs.
fn of_connect(port: u16) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_nodelay(true).unwrap();
    s.write_all(&hello()).unwrap();
    let mut h = [0u8; HEADER];
    s.read_exact(&mut h).unwrap();
    let hd = Header::parse(&h).unwrap();
    let mut rest = vec![0u8; hd.len as usize - HEADER];
    s.read_exact(&mut rest).unwrap();
    assert_eq!(hd.kind, 0, "HELLO first");
    s
}

#[test]
fn sixty_four_connections_streaming_a_million_flow_mods_stay_in_budget() {
    let bed = NetnsStar::up("lrsm", 1);
    let dir = TempDir::new("lr-bounds-storm");
    let sock = dir.join("sw.sock");
    let max_flows = 100_000u64;
    // (LR_STORM_EACH: fewer FLOW_MODs per connection, to time a change.)
    let each: u32 = std::env::var("LR_STORM_EACH")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let conns = 64u32;
    let ns = bed.sw_ns();
    let of = {
        let ns = ns.clone();
        std::thread::spawn(move || {
            enter(&ns);
            free_port()
        })
        .join()
        .unwrap()
    };
    let (mut sw, _err) = switch_in(
        &bed,
        &sock,
        of,
        &["--max-flows", &max_flows.to_string(), "--quiet"],
    );
    let pid = sw.pid();
    let base = rss(pid).0;
    let watch = RssWatch::start(pid);
    let fam = Arc::new(FlowModFamily::new());
    let t0 = Instant::now();
    let clients: Vec<_> = (0..conns)
        .map(|c| {
            let (ns, fam) = (ns.clone(), fam.clone());
            std::thread::spawn(move || {
                enter(&ns);
                let s = of_connect(of);
                // Replies are read as they come (the switch writes each
                // before it reads on: a client that does not read holds
                // up only itself).
                let rd = s.try_clone().unwrap();
                let reader = std::thread::spawn(move || read_until_barrier(&rd));
                let mut w = &s;
                let mut buf = Vec::with_capacity(1 << 20);
                for i in 0..each {
                    fam.put(&mut buf, c * each + i);
                    if buf.len() >= (1 << 20) - 128 {
                        w.write_all(&buf).unwrap();
                        buf.clear();
                    }
                }
                buf.extend_from_slice(&Writer::new(BARRIER_REQUEST, u32::MAX).finish());
                w.write_all(&buf).unwrap();
                reader.join().unwrap()
            })
        })
        .collect();
    let (mut full, mut other) = (0u64, 0u64);
    for c in clients {
        let (f, o, _) = c.join().unwrap();
        full += f;
        other += o;
    }
    let took = t0.elapsed();
    let peak = watch.max().max(rss(pid).1);
    drop(watch);
    sw.assert_running("linerate switch");
    let rules = table(&sock, 0)["rules"].as_u64().unwrap();
    sw.interrupt();
    let out = sw.wait_output(Duration::from_secs(30), "linerate switch");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "linerate switch: {}; {}",
        out.status,
        stdout.lines().last().unwrap_or("")
    );
    let fin = last_json(&stdout);
    // The stated budget: the table at its limit (under 1 KiB a rule at the
    // high-water mark, two versions while one is published), the
    // channel's budget, a reserve, buffers and a thread per connection.
    let budget = base
        + max_flows * 1024
        + PENDING_BUDGET as u64
        + conns as u64 * (CONN_RESERVE as u64 + 512 * 1024)
        + 32 * MB;
    eprintln!(
        "{conns} x {each} FLOW_MODs in {took:?}: {rules} rules, {full} TABLE_FULL; rss base {} MB, peak {} MB, budget {} MB; channel {}",
        base / MB,
        peak / MB,
        budget / MB,
        fin["openflow"]
    );
    assert_eq!(rules, max_flows);
    assert_eq!(other, 0);
    assert_eq!(full, conns as u64 * each as u64 - max_flows);
    assert_eq!(fin["openflow"]["unsendable"], 0, "{fin}");
    assert!(
        peak <= budget,
        "peak {} MB over the budget {} MB",
        peak / MB,
        budget / MB
    );
}

/// A flow-stats request for every rule.
fn all_flows_request(xid: u32) -> Vec<u8> {
    multipart_request(xid, MP_FLOW, &stats_request(0, 0))
}

#[test]
fn a_million_rule_dump_to_slow_readers_holds_no_copy() {
    require_tools(&["ovs-ofctl"]);
    let bed = NetnsStar::up("lrsd", 1);
    let dir = TempDir::new("lr-bounds-dump");
    let sock = dir.join("sw.sock");
    let n = 1_000_000u32;
    let mut text = String::with_capacity(n as usize * 64);
    for i in 0..n {
        text.push_str(&format!(
            "priority=10,in_port=1,ip,nw_dst={}.{}.{}.{},actions=output:2\n",
            i >> 24,
            (i >> 16) & 255,
            (i >> 8) & 255,
            i & 255
        ));
    }
    let flows = dir.write("million.flows", &text);
    drop(text);
    let ns = bed.sw_ns();
    let of = {
        let ns = ns.clone();
        std::thread::spawn(move || {
            enter(&ns);
            free_port()
        })
        .join()
        .unwrap()
    };
    let (sw, _err) = switch_in(&bed, &sock, of, &["--quiet"]);
    let pid = sw.pid();
    let added = ctl(&sock, &["add-flows", flows.to_str().unwrap()]);
    assert_eq!(added["added"].as_u64(), Some(n as u64), "{added}");
    // Settled: what a million rules hold.
    let before = rss(pid).1;
    let watch = RssWatch::start(pid);
    // An OpenFlow client and a control-socket client ask for every rule,
    // then read one byte a millisecond.
    let stop = Arc::new(AtomicBool::new(false));
    let slow_of = {
        let (ns, stop) = (ns.clone(), stop.clone());
        std::thread::spawn(move || {
            enter(&ns);
            let mut s = of_connect(of);
            s.write_all(&all_flows_request(9)).unwrap();
            let mut got = 0u64;
            let mut b = [0u8; 1];
            while !stop.load(Ordering::Relaxed) {
                match s.read(&mut b) {
                    Ok(1) => got += 1,
                    _ => break,
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            got
        })
    };
    let slow_ctl = {
        let (sock, stop) = (sock.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut s = std::os::unix::net::UnixStream::connect(&sock).unwrap();
            s.write_all(b"dump-flows\n").unwrap();
            let mut got = 0u64;
            let mut b = [0u8; 1];
            while !stop.load(Ordering::Relaxed) {
                match s.read(&mut b) {
                    Ok(1) => got += 1,
                    _ => break,
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            got
        })
    };
    // Meanwhile other clients are served: ovs-ofctl and switch-ctl.
    let target = format!("tcp:127.0.0.1:{of}");
    for _ in 0..3 {
        std::thread::sleep(Duration::from_secs(2));
        let t = Instant::now();
        let o = ofctl_in(&ns, "dump-tables", &target, &[]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let tb = table(&sock, 0);
        assert_eq!(tb["rules"].as_u64(), Some(n as u64), "{tb}");
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    }
    // A whole dump to a client that reads it: every rule, once.
    let t = Instant::now();
    let o = ofctl_in(&ns, "dump-aggregate", &target, &[]);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains(&format!("flow_count={n}")),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let fast = {
        let ns = ns.clone();
        std::thread::spawn(move || {
            enter(&ns);
            let mut s = of_connect(of);
            s.write_all(&all_flows_request(10)).unwrap();
            let mut r = BufReader::with_capacity(1 << 16, s);
            let (mut entries, mut msgs) = (0u64, 0u64);
            let mut h = [0u8; HEADER];
            let mut body = vec![0u8; 1 << 16];
            loop {
                r.read_exact(&mut h).unwrap();
                let hd = Header::parse(&h).unwrap();
                let len = hd.len as usize;
                r.read_exact(&mut body[..len - HEADER]).unwrap();
                assert_eq!(hd.kind, MULTIPART_REPLY);
                msgs += 1;
                let mut at = 8;
                while at < len - HEADER {
                    entries += 1;
                    at += u16::from_be_bytes([body[at], body[at + 1]]) as usize;
                }
                assert_eq!(at, len - HEADER, "entries fill the message");
                if u16::from_be_bytes([body[2], body[3]]) & MPF_MORE == 0 {
                    return (entries, msgs);
                }
            }
        })
    };
    let (entries, msgs) = fast.join().unwrap();
    assert_eq!(entries, n as u64);
    eprintln!("a dump of {n} rules in {msgs} messages, {:?}", t.elapsed());
    stop.store(true, Ordering::Relaxed);
    let (a, b) = (slow_of.join().unwrap(), slow_ctl.join().unwrap());
    let peak = watch.max().max(rss(pid).1);
    drop(watch);
    eprintln!(
        "slow readers got {a} and {b} bytes; rss with a million rules {} MB, peak {} MB",
        before / MB,
        peak / MB
    );
    assert!(a > 1000 && b > 1000, "{a} {b}");
    // The dumps cost their buffers, not a copy of the table.
    assert!(
        peak <= before + 32 * MB,
        "{} MB -> {} MB",
        before / MB,
        peak / MB
    );
    let fin = sw.finish_json(Duration::from_secs(30), "linerate switch");
    assert_eq!(fin["openflow"]["unsendable"], 0, "{fin}");
}

#[test]
fn large_groups_and_rules_round_trip_or_are_refused_with_one_line() {
    require_tools(&["ovs-ofctl"]);
    let dir = TempDir::new("lr-bounds-big");
    let sock = dir.join("sw.sock");
    let port = free_port();
    let mut p = Proc::from(
        std::process::Command::new(EXE)
            .args([
                "switch",
                "--port",
                "1=mem:a?source=64&flows=4",
                "--port",
                "2=mem:b?sink",
                "--poll",
                "wait",
                "--openflow",
                &format!("ptcp:{port}"),
                "--ctl",
                sock.to_str().unwrap(),
                "--json",
                "--quiet",
            ])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    wait_ctl(&mut p, &sock, "linerate switch");
    let target = format!("tcp:127.0.0.1:{port}");
    let ofctl = |cmd: &str, args: &[&str]| {
        let o = std::process::Command::new("ovs-ofctl")
            .args(["-O", "OpenFlow13", cmd, &target])
            .args(args)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "ovs-ofctl {cmd}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    // The largest group: 2047 buckets (one group description of 64 KiB).
    let buckets = |n: usize| {
        (0..n)
            .map(|i| format!("bucket=output:{}", i % 60 + 1))
            .collect::<Vec<_>>()
            .join(",")
    };
    ofctl(
        "add-group",
        &[&format!("group_id=5,type=all,{}", buckets(2047))],
    );
    let g = ofctl("dump-groups", &[]);
    let line = g.lines().find(|l| l.contains("group_id=5")).unwrap().trim();
    let want = format!(
        "group_id=5,type=all,{}",
        (0..2047)
            .map(|i| format!("bucket=actions=output:{}", i % 60 + 1))
            .collect::<Vec<_>>()
            .join(",")
    );
    assert_eq!(line, want, "dump-groups gives the group back exactly");
    // 3000 buckets: refused at add, one line, by the control socket and a
    // groups file.
    let out = linerate(&[
        "switch-ctl",
        sock.to_str().unwrap(),
        "add-group",
        &format!("group_id=6,type=all,{}", buckets(3000)),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("3000 buckets") && err.contains("at most 2047"),
        "{err}"
    );
    let gf = dir.write(
        "big.groups",
        &format!("group_id=6,type=all,{}\n", buckets(3000)),
    );
    let out = linerate(&[
        "switch",
        "--port",
        "1=mem:x?source=64",
        "--groups",
        gf.to_str().unwrap(),
        "--duration",
        "1",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("big.groups:1:") && err.contains("3000 buckets"),
        "{err}"
    );
    assert!(err.trim().lines().last().unwrap().len() < 300, "{err}");
    // A rule of 1000 actions round-trips through dump-flows exactly.
    let acts = |n: usize| {
        (0..n)
            .map(|i| format!("output:{}", i % 60 + 1))
            .collect::<Vec<_>>()
            .join(",")
    };
    ofctl(
        "add-flow",
        &[&format!("priority=5,in_port=1,actions={}", acts(1000))],
    );
    let f = ofctl("dump-flows", &[]);
    let line = f.lines().find(|l| l.contains("priority=5")).unwrap();
    assert!(
        line.ends_with(&format!("priority=5,in_port=1 actions={}", acts(1000))),
        "{}",
        &line[..200.min(line.len())]
    );
    // 5000 actions: more than a flow-stats entry holds: refused at add
    // with one short line.
    let out = linerate(&[
        "switch-ctl",
        sock.to_str().unwrap(),
        "add-flow",
        &format!("priority=6,in_port=1,actions={}", acts(5000)),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.trim().lines().count() == 1 && err.len() < 400 && err.contains("5000 actions"),
        "{err}"
    );
    let fin = p.finish_json(Duration::from_secs(15), "linerate switch");
    assert_eq!(fin["openflow"]["unsendable"], 0, "{fin}");
    assert_eq!(fin["openflow"]["errors"], 0, "{fin}");
}
