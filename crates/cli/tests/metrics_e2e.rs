//! `--metrics ADDR:PORT`, Prometheus' view of every engine:
//!
//! - every command's page (fwd in user and in XDP mode, switch, capture,
//!   count, gen) passes `promtool check metrics` (its format and its lint:
//!   names, `_total` on counters, help text);
//! - a real Prometheus server (Debian's package), scraping every second,
//!   stores exactly the final counts of `linerate fwd` and of `linerate
//!   capture` after a known number of frames went through them in
//!   namespaces;
//! - a bad address or a port in use is a one-line error at the start; a
//!   client that connects and never sends or never reads stalls neither the
//!   run nor its exit.
//!
//! Needs root, promtool and prometheus (scripts/setup.sh installs them) and
//! fails without. Every wait is for a condition (the page shows a tick,
//! Prometheus answers, its stored value equals the final count).

use linerate_measure::testbed::{in_netns, Testbed, TestbedConfig};
use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod support;
use support::*;

/// `GET path` on 127.0.0.1:`port` (in network namespace `ns`, if given):
/// the body of a 200 answer, or None (not listening yet, another status).
fn get(ns: Option<&str>, port: u16, path: &str) -> Option<String> {
    let path = path.to_string();
    let f = move || -> Option<String> {
        let mut c = TcpStream::connect(("127.0.0.1", port)).ok()?;
        c.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        write!(c, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
        let mut r = String::new();
        c.read_to_string(&mut r).ok()?;
        let (head, body) = r.split_once("\r\n\r\n")?;
        let status = head.split_whitespace().nth(1)?;
        (status == "200").then(|| body.to_string())
    };
    match ns {
        Some(ns) => in_netns(ns, f).unwrap_or_else(|e| panic!("{e}")),
        None => f(),
    }
}

/// The value of the sample `series` (name and labels as written) in a page.
fn sample(page: &str, series: &str) -> Option<f64> {
    page.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// Wait until `p`'s metrics page has `series` (its first report is out).
fn wait_page(p: &mut Proc, ns: Option<&str>, port: u16, series: &str, what: &str) -> String {
    wait_for(
        Duration::from_secs(20),
        &format!("{what}: {series} on its page"),
        || {
            p.assert_running(what);
            get(ns, port, "/metrics").filter(|b| sample(b, series).is_some())
        },
    )
}

/// `promtool check metrics` over `page`: it must pass without a remark.
fn promtool_accepts(page: &str, what: &str) {
    let promtool = require_tool("promtool");
    let mut c = Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin.take().unwrap().write_all(page.as_bytes()).unwrap();
    let out = c.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && said.trim().is_empty(),
        "promtool check metrics on {what}'s page: {said}\npage:\n{page}"
    );
}

fn spawn(args: &[&str]) -> Proc {
    Proc::from(
        Command::new(EXE)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    )
}

#[test]
fn every_command_s_page_passes_promtool() {
    require_tools(&["promtool"]);
    let cases: [(&str, &[&str], &str); 5] = [
        (
            "fwd",
            &["fwd", "mem:a?source=64", "mem:b?sink"],
            "linerate_stage_passed_packets_total{stage=\"a_to_b\"}",
        ),
        (
            "switch",
            &[
                "switch",
                "--port",
                "1=mem:a?source=64&flows=4",
                "--port",
                "2=mem:b?sink",
                "--poll",
                "wait",
            ],
            "linerate_stage_received_packets_total{stage=\"switch\"}",
        ),
        (
            "capture",
            &["capture", "mem:a?source=64&flows=16", "--workers", "2"],
            "linerate_capture_queue_capacity{worker=\"1\"}",
        ),
        (
            "count",
            &["count", "mem:a?source=64"],
            "linerate_receiver_packets_total",
        ),
        (
            "gen",
            &["gen", "mem:a?sink", "--rate", "10kpps", "--signature"],
            "linerate_generator_sent_packets_total{stream=\"s0\"}",
        ),
    ];
    for (what, args, series) in cases {
        let port = free_port();
        let addr = format!("127.0.0.1:{port}");
        let mut a = args.to_vec();
        a.extend(["--duration", "60", "--quiet", "--metrics", &addr]);
        let mut p = spawn(&a);
        let page = wait_page(&mut p, None, port, series, what);
        assert!(
            page.contains(&format!(
                "linerate_build_info{{version=\"{}\",command=\"{what}\"}} 1",
                env!("CARGO_PKG_VERSION")
            )),
            "{page}"
        );
        assert!(
            sample(&page, "linerate_start_time_seconds").is_some_and(|t| t > 1.7e9),
            "{page}"
        );
        promtool_accepts(&page, what);
    }
}

/// A switch with an OpenFlow channel: the controller port's series
/// (packet-ins taken by the port and wanted by no connection, none
/// connected, not in fail-open) on a page promtool accepts.
#[test]
fn a_switch_with_a_controller_port_has_its_series() {
    require_tools(&["promtool"]);
    let dir = TempDir::new("mctl");
    let flows = dir.join("miss.flows");
    std::fs::write(&flows, "priority=0,actions=controller\n").unwrap();
    let sock = format!("punix:{}", dir.join("sw.of").display());
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut p = spawn(&[
        "switch",
        "--port",
        "1=mem:a?source=64&flows=4",
        "--port",
        "2=mem:b?sink",
        "--poll",
        "wait",
        "--flows",
        flows.to_str().unwrap(),
        "--openflow",
        &sock,
        "--duration",
        "60",
        "--quiet",
        "--metrics",
        &addr,
    ]);
    let unwanted = "linerate_switch_packet_ins_total{result=\"unwanted\"}";
    let page = wait_for(
        Duration::from_secs(20),
        "packet-ins no connection wanted",
        || {
            p.assert_running("switch");
            get(None, port, "/metrics").filter(|b| sample(b, unwanted).is_some_and(|v| v > 0.0))
        },
    );
    promtool_accepts(&page, "switch under a controller");
    let taken = sample(&page, "linerate_switch_packet_ins_total{result=\"taken\"}").unwrap();
    assert!(taken > 0.0, "{page}");
    assert_eq!(
        sample(&page, "linerate_switch_fail_open"),
        Some(0.0),
        "{page}"
    );
    assert_eq!(
        sample(&page, "linerate_switch_controller_connections"),
        Some(0.0),
        "{page}"
    );
    p.interrupt();
}

#[test]
fn the_in_kernel_engines_pages_pass_promtool() {
    require_root();
    require_tools(&["promtool"]);
    let bed = Testbed::up(&TestbedConfig::default()).expect("test bed");
    let (p1, p2) = (free_port(), free_port());
    let (a1, a2) = (format!("127.0.0.1:{p1}"), format!("127.0.0.1:{p2}"));
    let mut fwd = spawn_in(
        bed.ns_dut(),
        &[
            "fwd",
            "--mode",
            "xdp",
            "d0",
            "d1",
            "--quiet",
            "--metrics",
            &a1,
        ],
    );
    let mut count = spawn_in(
        bed.ns_sink(),
        &["count", "s0", "--xdp", "--quiet", "--metrics", &a2],
    );
    send(&bed, 1000);
    let page = wait_page(
        &mut fwd,
        Some(bed.ns_dut()),
        p1,
        "linerate_stage_passed_packets_total{stage=\"a_to_b\"}",
        "fwd --mode xdp",
    );
    promtool_accepts(&page, "fwd --mode xdp");
    let page = wait_page(
        &mut count,
        Some(bed.ns_sink()),
        p2,
        "linerate_port_packets_total{port=\"s0\",direction=\"rx\"}",
        "count --xdp",
    );
    promtool_accepts(&page, "count --xdp");
    drop((fwd, count));
    bed.down().unwrap();
}

#[test]
fn a_receiver_s_latency_is_a_histogram() {
    require_tools(&["promtool"]);
    // gen into a pcap file with signatures, then count it back in real time:
    // each frame's latency is its age when counted, a histogram per stream.
    let dir = TempDir::new("lr-metrics-lat");
    let f = dir.join("sig.pcap");
    let out = linerate(&[
        "gen",
        &format!("pcap:{}?mode=write", f.display()),
        "--signature",
        "--count",
        "3000",
        "--rate",
        "1kpps",
        "--quiet",
    ]);
    assert_ok(&out, "linerate gen into a pcap file");
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let src = format!("pcap:{}?speed=original", f.display());
    let mut p = spawn(&["count", &src, "--quiet", "--metrics", &addr]);
    let page = wait_page(
        &mut p,
        None,
        port,
        "linerate_receiver_latency_seconds_count{stream=\"0\"}",
        "count",
    );
    assert!(
        page.contains("# TYPE linerate_receiver_latency_seconds histogram\n"),
        "{page}"
    );
    let inf = sample(
        &page,
        "linerate_receiver_latency_seconds_bucket{stream=\"0\",le=\"+Inf\"}",
    )
    .unwrap();
    let n = sample(
        &page,
        "linerate_receiver_latency_seconds_count{stream=\"0\"}",
    )
    .unwrap();
    assert!(n > 0.0 && inf == n, "{page}");
    // Cumulative: every bucket holds the ones below it.
    let buckets: Vec<f64> = page
        .lines()
        .filter(|l| l.starts_with("linerate_receiver_latency_seconds_bucket{stream=\"0\""))
        .map(|l| l.rsplit(' ').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(buckets.len(), 23, "{page}");
    assert!(buckets.windows(2).all(|w| w[0] <= w[1]), "{buckets:?}");
    promtool_accepts(&page, "count with latency");
}

#[test]
fn a_bad_address_or_a_port_in_use_is_one_line_at_the_start() {
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = held.local_addr().unwrap().to_string();
    for (bad, says) in [
        ("nonsense", "expected ADDR:PORT"),
        ("127.0.0.1", "expected ADDR:PORT"),
        ("127.0.0.1:70000", "expected ADDR:PORT"),
        (taken.as_str(), "in use"),
    ] {
        for cmd in [
            &["fwd", "mem:a?source=64", "mem:b?sink", "--duration", "30"][..],
            &["count", "mem:a?source=64", "--duration", "30"][..],
            &["capture", "mem:a?source=64", "--duration", "30"][..],
            &["gen", "mem:a?sink", "--duration", "30"][..],
            &[
                "switch",
                "--port",
                "1=mem:a?source=64",
                "--port",
                "2=mem:b?sink",
                "--duration",
                "30",
            ][..],
            // Before any test bed is built.
            &[
                "bench",
                "--dut",
                "linux-bridge",
                "--no-history",
                "--no-report",
            ][..],
        ] {
            let mut a = cmd.to_vec();
            a.extend(["--metrics", bad]);
            let t0 = Instant::now();
            let out = linerate(&a);
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "{a:?}: {err}");
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "{a:?} took {:?}",
                t0.elapsed()
            );
            let lines: Vec<&str> = err.lines().collect();
            assert_eq!(lines.len(), 1, "{a:?}: {err}");
            assert!(
                lines[0].contains(&format!("--metrics '{bad}'")) && lines[0].contains(says),
                "{a:?}: {err}"
            );
        }
    }
}

#[test]
fn metrics_where_there_are_no_reports_are_refused_in_one_line() {
    let m = "127.0.0.1:9";
    for (a, says) in [
        (
            &["gen", "mem:a?sink", "--xdp", "--metrics", m][..],
            "gen --xdp",
        ),
        (
            &["gen", "mem:a?sink", "--replay", "x.pcap", "--metrics", m][..],
            "gen --replay",
        ),
        (&["bench", "--overload", "--metrics", m][..], "--overload"),
        (&["bench", "--metrics", m, "soak"][..], "a study"),
    ] {
        let out = linerate(a);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{a:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{a:?}: {err}");
        assert!(
            err.contains("--metrics") && err.contains(says),
            "{a:?}: {err}"
        );
    }
}

#[test]
fn a_client_that_never_sends_or_never_reads_stalls_neither_the_run_nor_its_exit() {
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let t0 = Instant::now();
    let mut p = spawn(&[
        "fwd",
        "mem:a?source=64",
        "mem:b?sink",
        "--duration",
        "4",
        "--json",
        "--quiet",
        "--metrics",
        &addr,
    ]);
    wait_page(
        &mut p,
        None,
        port,
        "linerate_stage_passed_packets_total{stage=\"a_to_b\"}",
        "fwd",
    );
    // Connected, never a byte sent; and a request sent, its answer never read.
    let silent: Vec<TcpStream> = (0..4)
        .map(|_| TcpStream::connect(("127.0.0.1", port)).unwrap())
        .collect();
    let mut deaf = TcpStream::connect(("127.0.0.1", port)).unwrap();
    deaf.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").unwrap();
    let v = p.wait_json(
        Duration::from_secs(30),
        "linerate fwd with stuck metrics clients",
    );
    assert!(
        t0.elapsed() < Duration::from_secs(15),
        "the run took {:?}",
        t0.elapsed()
    );
    assert_eq!(v["directions"][0]["balanced"], true, "{v}");
    assert!(v["directions"][0]["forwarded"].as_u64().unwrap() > 0, "{v}");
    drop((silent, deaf));
}

/// A Prometheus server in namespace `ns` scraping 127.0.0.1:`target`
/// every second, storage in a temporary directory; killed on drop.
struct Prometheus {
    _p: Proc,
    _dir: TempDir,
    ns: String,
    port: u16,
}

impl Prometheus {
    fn start(ns: &str, target: u16) -> Prometheus {
        let bin = require_tool("prometheus");
        let dir = TempDir::new("lr-prometheus");
        let cfg = dir.join("prometheus.yml");
        std::fs::write(
            &cfg,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
                 scrape_configs:\n  - job_name: linerate\n    static_configs:\n      - targets: ['127.0.0.1:{target}']\n"
            ),
        )
        .unwrap();
        let port = free_port();
        let data = dir.join("data");
        let mut p = Proc::from(
            Command::new("ip")
                .args(["netns", "exec", ns])
                .arg(bin)
                .arg(format!("--config.file={}", cfg.display()))
                .arg(format!("--storage.tsdb.path={}", data.display()))
                .arg(format!("--web.listen-address=127.0.0.1:{port}"))
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        );
        wait_until(Duration::from_secs(60), "prometheus ready", || {
            p.assert_running("prometheus");
            get(Some(ns), port, "/-/ready").is_some()
        });
        Prometheus {
            _p: p,
            _dir: dir,
            ns: ns.to_string(),
            port,
        }
    }

    /// The stored value of an instant query that names one series.
    fn query(&self, q: &str) -> Option<f64> {
        let enc: String = q
            .bytes()
            .map(|b| match b {
                b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' => (b as char).to_string(),
                _ => format!("%{b:02X}"),
            })
            .collect();
        let body = get(
            Some(&self.ns),
            self.port,
            &format!("/api/v1/query?query={enc}"),
        )?;
        let v: Value = serde_json::from_str(&body).ok()?;
        let r = v["data"]["result"].as_array()?;
        (r.len() == 1).then_some(())?;
        r[0]["value"][1].as_str()?.parse().ok()
    }

    /// Wait until the stored value of `q` is `want`.
    fn wait_value(&self, q: &str, want: u64) {
        let mut last = None;
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(30) {
            last = self.query(q);
            if last == Some(want as f64) {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        panic!("prometheus: {q} = {last:?}, want {want}");
    }
}

/// `linerate gen` in the bed's generator namespace: `n` frames to the DuT.
fn send(bed: &Testbed, n: u64) {
    let (g, d) = (bed.gen().clone(), bed.dut_in().clone());
    let out = Command::new("ip")
        .args(["netns", "exec", bed.ns_gen(), EXE])
        .args([
            "gen",
            "afpacket:g0",
            "--flows",
            "16",
            "--src-mac",
            &g.mac.to_string(),
            "--dst-mac",
            &d.mac.to_string(),
            "--src-ip",
            &g.ipv4.to_string(),
            "--dst-ip",
            &d.ipv4.to_string(),
            "--rate",
            "20kpps",
            "--count",
            &n.to_string(),
            "--quiet",
        ])
        .output()
        .unwrap();
    assert_ok(&out, "linerate gen");
}

const N: u64 = 20_000;

#[test]
fn prometheus_stores_the_exact_final_counts_of_fwd() {
    require_root();
    require_tools(&["prometheus"]);
    let bed = Testbed::up(&TestbedConfig::default()).expect("test bed");
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut fwd = spawn_in(
        bed.ns_dut(),
        &[
            "fwd",
            "afpacket:d0",
            "afpacket:d1",
            "--json",
            "--quiet",
            "--metrics",
            &addr,
        ],
    );
    wait_packet_sockets(&mut fwd, 2, "linerate fwd");
    let series = "linerate_stage_received_packets_total{stage=\"a_to_b\"}";
    wait_page(&mut fwd, Some(bed.ns_dut()), port, series, "fwd");
    let prom = Prometheus::start(bed.ns_dut(), port);
    send(&bed, N);
    // Every frame through the forwarder and on its page, then stored.
    wait_until(
        Duration::from_secs(30),
        "fwd's page to count every frame",
        || {
            get(Some(bed.ns_dut()), port, "/metrics").and_then(|p| sample(&p, series))
                == Some(N as f64)
        },
    );
    prom.wait_value(series, N);
    let v = fwd.finish_json(Duration::from_secs(20), "linerate fwd");
    let ab = &v["directions"][0];
    assert_eq!(ab["received"], N, "{v}");
    for (q, field) in [
        (
            "linerate_stage_received_packets_total{stage=\"a_to_b\"}",
            "received",
        ),
        (
            "linerate_stage_passed_packets_total{stage=\"a_to_b\"}",
            "forwarded",
        ),
        (
            "sum(linerate_stage_dropped_packets_total{stage=\"a_to_b\"})",
            "dropped",
        ),
    ] {
        assert_eq!(
            prom.query(q),
            Some(ab[field].as_u64().unwrap() as f64),
            "{q} vs {ab}"
        );
    }
    assert_eq!(
        prom.query("linerate_port_packets_total{port=\"afpacket:d1\",direction=\"tx\"}"),
        Some(ab["forwarded"].as_u64().unwrap() as f64)
    );
    drop(prom);
    bed.down().unwrap();
}

#[test]
fn prometheus_stores_the_exact_final_counts_of_capture() {
    require_root();
    require_tools(&["prometheus"]);
    let bed = Testbed::up(&TestbedConfig::default()).expect("test bed");
    let dir = TempDir::new("lr-metrics-cap");
    let ctl = dir.join("ctl.sock");
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut cap = spawn_in(
        bed.ns_dut(),
        &[
            "capture",
            "afpacket:d0",
            "--workers",
            "2",
            "--json",
            "--quiet",
            "--ctl",
            ctl.to_str().unwrap(),
            "--metrics",
            &addr,
        ],
    );
    wait_ctl(&mut cap, &ctl, "linerate capture");
    wait_packet_sockets(&mut cap, 1, "linerate capture");
    let series = "linerate_port_packets_total{port=\"afpacket:d0\",direction=\"rx\"}";
    wait_page(&mut cap, Some(bed.ns_dut()), port, series, "capture");
    let prom = Prometheus::start(bed.ns_dut(), port);
    send(&bed, N);
    wait_capture_received(&mut cap, &ctl, N, "linerate capture");
    wait_until(
        Duration::from_secs(30),
        "capture's page to count every frame",
        || {
            get(Some(bed.ns_dut()), port, "/metrics").and_then(|p| sample(&p, series))
                == Some(N as f64)
        },
    );
    prom.wait_value(series, N);
    cap.signal(libc::SIGINT);
    let out = cap.wait_output(Duration::from_secs(20), "capture");
    assert_ok(&out, "linerate capture");
    let v = last_json(&String::from_utf8_lossy(&out.stdout));
    let t = &v["totals"];
    assert_eq!(t["received"], N, "{v}");
    let stored = |q: &str| {
        prom.query(q)
            .unwrap_or_else(|| panic!("{q}: nothing stored"))
    };
    assert_eq!(
        stored("sum(linerate_stage_received_packets_total{stage=\"capture\"})"),
        N as f64
    );
    assert_eq!(
        stored("sum(linerate_stage_passed_packets_total{stage=\"capture\"})"),
        t["forwarded"].as_u64().unwrap() as f64
    );
    for (w, wv) in v["workers"].as_array().unwrap().iter().enumerate() {
        assert_eq!(
            stored(&format!(
                "linerate_stage_received_packets_total{{stage=\"capture\",worker=\"{w}\"}}"
            )),
            wv["received"].as_u64().unwrap() as f64,
            "worker {w}: {wv}"
        );
    }
    drop(prom);
    bed.down().unwrap();
}

#[test]
fn the_bench_publishes_its_trials_while_it_runs() {
    require_root();
    require_tools(&["promtool"]);
    let pid = std::process::id();
    let c = Cleanup {
        dir: std::env::temp_dir().join(format!("lr-bench-metrics-{pid}")),
        prefix: format!("lrbm{}", pid % 100_000),
    };
    std::fs::create_dir_all(&c.dir).unwrap();
    let json = c.dir.join("r.json");
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut p = spawn(&[
        "bench",
        "--final-trial",
        "0",
        "--dut",
        "linux-bridge",
        "--sizes",
        "64",
        "--repetitions",
        "1",
        "--trial",
        "0.1",
        "--frame-loss-sizes",
        "none",
        "--b2b-sizes",
        "none",
        "--no-history",
        "--no-report",
        "--name",
        &c.prefix,
        "--json",
        json.to_str().unwrap(),
        "--metrics",
        &addr,
    ]);
    // Scrape every 100 ms until the run ends; keep the last page that
    // counted trials.
    let mut last: Option<String> = None;
    let t0 = Instant::now();
    loop {
        if let Some(page) = get(None, port, "/metrics") {
            if page.contains("linerate_bench_trials_total{") {
                last = Some(page);
            }
        }
        if p.child_mut().unwrap().try_wait().unwrap().is_some() {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(300),
            "the bench took too long"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = p.wait_output(Duration::from_secs(10), "linerate bench");
    assert_ok(&out, "linerate bench --metrics");
    let page = last.expect("no page counted a trial");
    promtool_accepts(&page, "bench");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    // The throughput trials the page counted (the bench's readiness checks
    // and probes are trials too, counted under their own procedure).
    let trials = v["results"][0]["sizes"][0]["trials"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["procedure"] == "throughput")
        .count() as f64;
    let seen = sample(
        &page,
        "linerate_bench_trials_total{dut=\"linux-bridge\",frame_size=\"64 B\",procedure=\"throughput\"}",
    )
    .unwrap_or(0.0);
    assert!(
        seen >= 1.0 && seen <= trials,
        "{seen} throughput trials on the page, {trials} in the JSON\n{page}"
    );
    // The last trial's rates and loss (of whichever DuT ran last: the
    // empty bed's latency trials come after the DuTs).
    assert!(
        page.contains("\nlinerate_bench_last_trial_loss_ratio{dut=\""),
        "{page}"
    );
}
