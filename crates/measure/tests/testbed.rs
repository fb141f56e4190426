//! Test bed tests: they build real namespaces and veths, so they need root
//! (CAP_NET_ADMIN, CAP_SYS_ADMIN); without it they fail.
//! Every bed has a unique name (pid + counter) and is removed by Drop even
//! when an assertion fails.

use linerate_measure::testbed::{self, DutMode, Testbed, TestbedConfig};
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use linerate_testkit::{require_cpus, require_root, wait_until, Netns};

static N: AtomicU32 = AtomicU32::new(0);

/// A unique bed name for this test process.
fn uname(tag: &str) -> String {
    format!(
        "lrt{}{}{}",
        std::process::id(),
        tag,
        N.fetch_add(1, Ordering::Relaxed)
    )
}

fn cfg(tag: &str) -> TestbedConfig {
    TestbedConfig {
        name: Some(uname(tag)),
        ..Default::default()
    }
}

fn netns_list() -> String {
    let o = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn root_links() -> String {
    let o = Command::new("ip").args(["-o", "link"]).output().unwrap();
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Send one UDP datagram from `src` in namespace `from` to `dst` in
/// namespace `to`; true if it arrives within 500 ms.
fn udp_reaches(from: &str, src: IpAddr, to: &str, dst: IpAddr) -> bool {
    let rx = testbed::in_netns(to, || UdpSocket::bind(SocketAddr::new(dst, 0)))
        .unwrap()
        .unwrap();
    rx.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let tx = testbed::in_netns(from, || UdpSocket::bind(SocketAddr::new(src, 0)))
        .unwrap()
        .unwrap();
    let payload = b"linerate testbed probe";
    // A send error (e.g. "network unreachable") means: did not reach.
    if tx.send_to(payload, rx.local_addr().unwrap()).is_err() {
        return false;
    }
    let mut buf = [0u8; 64];
    match rx.recv_from(&mut buf) {
        Ok((n, from_addr)) => &buf[..n] == payload && from_addr.ip() == src,
        Err(_) => false,
    }
}

#[test]
fn up_status_down_leaves_nothing() {
    require_root();
    let bed = Testbed::up(&cfg("a")).unwrap();
    let info = bed.info().clone();
    let nl = netns_list();
    for ns in info.namespaces() {
        assert!(nl.contains(ns), "{ns} missing from ip netns list: {nl}");
    }
    assert!(info.complete);
    assert!(testbed::is_alive(&info));
    // Recorded for other processes.
    let rec = testbed::load(&info.name).unwrap();
    assert_eq!(rec, info);
    assert!(testbed::list().iter().any(|i| i.name == info.name));
    // Interfaces in the right namespaces, with the planned MACs, up.
    for f in info.ifaces() {
        let o = Command::new("ip")
            .args(["-n", &f.ns, "-o", "link", "show", "dev", &f.name])
            .output()
            .unwrap();
        let s = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "{} not in {}", f.name, f.ns);
        assert!(s.contains(&f.mac.to_string()), "{s}");
        assert!(
            s.contains(",UP,") || s.contains("<UP,") || s.contains(",UP>"),
            "{s}"
        );
        testbed::iface_stats(&f.ns, &f.name).unwrap();
    }
    // Nothing in the root namespace.
    let links = root_links();
    for f in info.ifaces() {
        assert!(!links.contains(&f.mac.to_string()), "{links}");
    }
    bed.down().unwrap();
    let nl = netns_list();
    for ns in info.namespaces() {
        assert!(!nl.contains(ns), "{ns} still in ip netns list: {nl}");
    }
    assert!(testbed::load(&info.name).is_err());
    let links = root_links();
    for f in info.ifaces() {
        assert!(!links.contains(&f.mac.to_string()), "{links}");
    }
}

#[test]
fn drop_removes_and_down_is_idempotent() {
    require_root();
    let info = {
        let bed = Testbed::up(&TestbedConfig::default()).unwrap();
        assert!(bed.name().starts_with("lr"));
        bed.info().clone()
    };
    for ns in info.namespaces() {
        assert!(!testbed::netns_exists(ns));
    }
    assert!(testbed::down_by_name(&info.name).is_err(), "record is gone");
}

#[test]
fn drop_on_panic_removes() {
    require_root();
    let c = cfg("p");
    let name = c.name.clone().unwrap();
    let r = std::panic::catch_unwind(|| {
        let _bed = Testbed::up(&c).unwrap();
        panic!("test panic with a bed up");
    });
    assert!(r.is_err());
    for r in ["gen", "dut", "sink"] {
        assert!(!testbed::netns_exists(&format!("{name}-{r}")));
    }
}

#[test]
fn detached_bed_is_removed_by_name() {
    require_root();
    let info = Testbed::up(&cfg("d")).unwrap().detach();
    assert!(testbed::is_alive(&info));
    assert!(testbed::owner_alive(&info));
    testbed::down_by_name(&info.name).unwrap();
    assert!(!info.namespaces().iter().any(|n| testbed::netns_exists(n)));
    assert!(testbed::load(&info.name).is_err());
}

#[test]
fn two_beds_in_parallel_do_not_collide() {
    require_root();
    let h: Vec<_> = (0..2)
        .map(|_| std::thread::spawn(|| Testbed::up(&cfg("par")).unwrap()))
        .collect();
    let beds: Vec<Testbed> = h.into_iter().map(|t| t.join().unwrap()).collect();
    let (a, b) = (beds[0].info(), beds[1].info());
    assert_ne!(a.name, b.name);
    assert_ne!(a.ns_gen, b.ns_gen);
    assert!(testbed::is_alive(a) && testbed::is_alive(b));
    // Each works on its own.
    for bed in &beds {
        assert!(udp_reaches(
            bed.ns_gen(),
            bed.gen().ipv4.into(),
            bed.ns_dut(),
            bed.dut_in().ipv4.into()
        ));
    }
    // Same name twice: refused, and the first bed is untouched.
    let again = TestbedConfig {
        name: Some(a.name.clone()),
        ..Default::default()
    };
    let e = Testbed::up(&again).unwrap_err().to_string();
    assert!(e.contains("already exists"), "{e}");
    assert!(testbed::is_alive(a));
}

#[test]
fn traffic_gen_to_dut_and_through_ip_forwarding() {
    require_root();
    let mut bed = Testbed::up(&cfg("fwd")).unwrap();
    let (g, d0, s) = (bed.gen().clone(), bed.dut_in().clone(), bed.sink().clone());
    // gen -> d0 (directly connected, static neighbour).
    assert!(udp_reaches(
        bed.ns_gen(),
        g.ipv4.into(),
        bed.ns_dut(),
        d0.ipv4.into()
    ));
    assert!(udp_reaches(
        bed.ns_gen(),
        g.ipv6.into(),
        bed.ns_dut(),
        d0.ipv6.into()
    ));
    // gen -> sink needs the DuT to forward.
    assert!(!udp_reaches(
        bed.ns_gen(),
        g.ipv4.into(),
        bed.ns_sink(),
        s.ipv4.into()
    ));
    bed.enable_ip_forwarding().unwrap();
    assert_eq!(bed.info().dut_mode, DutMode::IpForward);
    assert_eq!(
        testbed::load(bed.name()).unwrap().dut_mode,
        DutMode::IpForward
    );
    let before = testbed::iface_stats(bed.ns_dut(), "d1").unwrap();
    assert!(udp_reaches(
        bed.ns_gen(),
        g.ipv4.into(),
        bed.ns_sink(),
        s.ipv4.into()
    ));
    assert!(udp_reaches(
        bed.ns_gen(),
        g.ipv6.into(),
        bed.ns_sink(),
        s.ipv6.into()
    ));
    let after = testbed::iface_stats(bed.ns_dut(), "d1").unwrap();
    assert_eq!(
        after.tx_packets - before.tx_packets,
        2,
        "{before:?} {after:?}"
    );
    let fa = bed.frame_addrs();
    assert_eq!(fa.dst_mac, d0.mac);
    assert_eq!(fa.dst_ip, s.ipv4);
    assert!(bed.enable_bridge().is_err());
}

#[test]
fn traffic_through_bridge() {
    require_root();
    let mut bed = Testbed::up(&cfg("br")).unwrap();
    let (g, s) = (bed.gen().clone(), bed.sink().clone());
    bed.enable_bridge().unwrap();
    assert_eq!(bed.frame_addrs().dst_mac, s.mac);
    let before = testbed::iface_stats(bed.ns_sink(), "s0").unwrap();
    assert!(udp_reaches(
        bed.ns_gen(),
        g.ipv4.into(),
        bed.ns_sink(),
        s.ipv4.into()
    ));
    assert!(udp_reaches(
        bed.ns_gen(),
        g.ipv6.into(),
        bed.ns_sink(),
        s.ipv6.into()
    ));
    let after = testbed::iface_stats(bed.ns_sink(), "s0").unwrap();
    assert_eq!(after.rx_packets - before.rx_packets, 2);
    let name = bed.name().to_string();
    bed.down().unwrap();
    assert!(!testbed::netns_exists(&format!("{name}-dut")));
}

#[test]
fn idle_bed_sends_no_stray_packets() {
    require_root();
    let plain = Testbed::up(&cfg("q")).unwrap();
    let mut fwd = Testbed::up(&cfg("q")).unwrap();
    fwd.enable_ip_forwarding().unwrap();
    let mut br = Testbed::up(&cfg("q")).unwrap();
    br.enable_bridge().unwrap();
    // The property under test is silence over time: 1.5 s in which an idle
    // bed must send nothing (no router solicitation, ARP, MLD, ...).
    std::thread::sleep(Duration::from_millis(1500));
    for bed in [&plain, &fwd, &br] {
        for f in bed.info().ifaces() {
            let s = testbed::iface_stats(&f.ns, &f.name).unwrap();
            assert_eq!(
                (s.tx_packets, s.rx_packets),
                (0, 0),
                "{:?} {} {s:?}",
                bed.info().dut_mode,
                f.name
            );
        }
    }
}

#[test]
fn collision_fails_and_leaves_the_other_namespace_alone() {
    require_root();
    let c = cfg("col");
    let name = c.name.clone().unwrap();
    let sink = format!("{name}-sink");
    // Someone else's namespace at the name the bed's sink would take.
    let _g = Netns::named(&sink);
    let e = Testbed::up(&c).unwrap_err().to_string();
    assert!(e.contains(&sink) && e.contains("already exists"), "{e}");
    assert!(
        testbed::netns_exists(&sink),
        "someone else's namespace kept"
    );
    assert!(!testbed::netns_exists(&format!("{name}-gen")));
    assert!(!testbed::netns_exists(&format!("{name}-dut")));
    assert!(testbed::load(&name).is_err(), "no record left");
}

#[test]
fn failure_half_way_rolls_back() {
    require_root();
    // veth accepts at most 65535: this fails after namespaces and veths exist.
    let c = TestbedConfig {
        mtu: Some(100_000),
        ..cfg("rb")
    };
    let name = c.name.clone().unwrap();
    let e = Testbed::up(&c).unwrap_err().to_string();
    assert!(e.contains("mtu"), "{e}");
    for r in ["gen", "dut", "sink"] {
        assert!(!testbed::netns_exists(&format!("{name}-{r}")));
    }
    assert!(!netns_list().contains(&name));
    assert!(testbed::load(&name).is_err(), "no record left");
    // Bad configurations are refused before anything is made.
    let e = Testbed::up(&TestbedConfig {
        queues: 0,
        ..cfg("rb")
    })
    .unwrap_err();
    assert!(e.to_string().contains("queues"));
    let e = Testbed::up(&TestbedConfig {
        name: Some("bad/name".into()),
        ..Default::default()
    })
    .unwrap_err();
    assert!(e.to_string().contains("bad/name"));
}

#[test]
fn queues_mtu_and_threaded_napi_pinned() {
    require_root();
    let c = TestbedConfig {
        queues: 2,
        mtu: Some(3000),
        threaded_napi: true,
        napi_cpu: Some(0),
        ..cfg("napi")
    };
    let bed = Testbed::up(&c).unwrap();
    let o = Command::new("ip")
        .args(["-n", bed.ns_dut(), "-d", "-j", "link", "show", "dev", "d0"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v[0]["num_tx_queues"], 2, "{v}");
    assert_eq!(v[0]["num_rx_queues"], 2, "{v}");
    assert_eq!(v[0]["mtu"], 3000, "{v}");
    let threads = &bed.info().napi_threads;
    // One NAPI per RX queue on each of the four veths.
    assert_eq!(threads.len(), 8, "{threads:?}");
    for t in threads {
        let comm = std::fs::read_to_string(format!("/proc/{}/comm", t.pid)).unwrap();
        assert_eq!(comm.trim(), format!("napi/{}-{}", t.ifname, t.napi_id));
        let st = std::fs::read_to_string(format!("/proc/{}/status", t.pid)).unwrap();
        let l = st
            .lines()
            .find(|l| l.starts_with("Cpus_allowed_list"))
            .unwrap();
        assert!(l.ends_with("\t0"), "{l}");
    }
    let pids: Vec<u32> = threads.iter().map(|t| t.pid).collect();
    bed.down().unwrap();
    // The kernel stops the NAPI threads of deleted devices asynchronously.
    let napi_alive = |p: &u32| {
        std::fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.starts_with("napi/"))
    };
    wait_until(
        Duration::from_secs(10),
        &format!("the NAPI threads {pids:?} of the removed bed to end"),
        || !pids.iter().any(napi_alive),
    );
}

#[test]
fn in_netns_runs_inside_and_propagates_errors() {
    require_root();
    let bed = Testbed::up(&cfg("ns")).unwrap();
    let names = bed
        .in_netns(bed.ns_gen(), || {
            std::fs::read_to_string("/proc/thread-self/net/dev").unwrap()
        })
        .unwrap();
    assert!(names.contains("g0:") && !names.contains("d0:"));
    // The calling thread did not move.
    let here = std::fs::read_to_string("/proc/thread-self/net/dev").unwrap();
    assert!(!here.contains(" g0:"));
    let e = testbed::in_netns("lr-no-such-ns", || ()).unwrap_err();
    assert!(e.to_string().contains("lr-no-such-ns"));
    let e = testbed::iface_stats(bed.ns_gen(), "nope").unwrap_err();
    assert!(e.to_string().contains("no interface named 'nope'"), "{e}");
    let o = bed.exec_in(bed.ns_sink(), &["ip", "-o", "link"]).unwrap();
    assert!(String::from_utf8_lossy(&o.stdout).contains("s0@"));
}

/// Packets each CPU's backlog has processed so far (first column of
/// /proc/net/softnet_stat, one row per CPU).
fn softnet_processed() -> Vec<u64> {
    std::fs::read_to_string("/proc/net/softnet_stat")
        .unwrap()
        .lines()
        .map(|l| u64::from_str_radix(l.split_whitespace().next().unwrap(), 16).unwrap())
        .collect()
}

#[test]
fn rps_moves_the_forwarding_work_to_the_chosen_cpu() {
    require_root();
    require_cpus(2);
    let mut bed = Testbed::up(&TestbedConfig {
        rps_cpu: Some(1),
        ipv6: false,
        ..cfg("rps")
    })
    .unwrap();
    assert_eq!(bed.info().rps_cpu, Some(1));
    let out = bed
        .exec_in(
            bed.ns_dut(),
            &["cat", "/sys/class/net/d0/queues/rx-0/rps_cpus"],
        )
        .unwrap();
    let mask = String::from_utf8_lossy(&out.stdout).trim().replace(',', "");
    assert_eq!(u64::from_str_radix(&mask, 16).unwrap(), 0b10, "{mask}");
    bed.enable_ip_forwarding().unwrap();
    let (g, s) = (bed.gen().clone(), bed.sink().clone());
    const N: u64 = 20_000;
    let d1_before = testbed::iface_stats(bed.ns_dut(), "d1").unwrap();
    let before = softnet_processed();
    // The sender on CPU 0: without RPS, d0's receive work (and so the
    // forwarding) would run in its softirq there.
    let ns = bed.ns_gen().to_string();
    testbed::in_netns(&ns, move || {
        testbed::pin_thread(0, 0).unwrap(); // 0: this thread
        let tx = UdpSocket::bind(SocketAddr::new(g.ipv4.into(), 0)).unwrap();
        let to = SocketAddr::new(s.ipv4.into(), 9);
        for i in 0..N {
            tx.send_to(b"rps", to).unwrap();
            if i % 200 == 199 {
                // Paced: the backlog of CPU 1 holds 1000 frames.
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    })
    .unwrap();
    // The frames still in the backlogs are forwarded within moments.
    let forwarded =
        || testbed::iface_stats(bed.ns_dut(), "d1").unwrap().tx_packets - d1_before.tx_packets;
    wait_until(
        Duration::from_secs(10),
        &format!("d1 to send 95 % of the {N} frames (forwarded)"),
        || forwarded() >= N * 95 / 100,
    );
    let forwarded = forwarded();
    let after = softnet_processed();
    // Each forwarded frame passes CPU 1's backlog twice (d0's receive,
    // steered there, and the sink's, run where d1 transmits).
    let cpu1 = after[1] - before[1];
    assert!(
        cpu1 >= forwarded,
        "CPU 1 processed {cpu1} packets for {forwarded} forwarded (CPU 0: {})",
        after[0] - before[0]
    );
}
