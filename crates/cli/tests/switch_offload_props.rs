//! `linerate switch --offload xdp` against the reference model, with real
//! XDP in network namespaces (issue 38): random rule sets (two tables,
//! rewrites, dec_ttl, drops, goto_table, two outputs, output to the input
//! port) and random frame sequences, with random rule additions and
//! deletions between frames. Every frame is sent one to six times, so that
//! later copies find the flow in XDP. Per frame, what comes out of ports 2
//! and 3 (bytes, count and order) must be what the model sends; per case,
//! every rule's packet counter must be the model's.
//!
//! The model: a linear classifier per table ([`Reference`]) over the rules
//! as added and deleted, the winner's actions run by the switch library's
//! action executor on a copy of the frame, `goto_table` looking the
//! rewritten frame up again. Output to the input port and to ports that do
//! not exist sends nothing; `dec_ttl` on TTL <= 1 drops (no controller).
//!
//! The bed: the switch (afxdp ports, `--offload xdp`) in `{tag}sw`, raw
//! packet sockets in h1 (sends), h2 and h3 (receive; GRO on, so that their
//! veths take XDP-redirected frames). After each frame a marker (its own
//! EtherType, not IPv4: always handled in user space) goes to ports 2 and
//! 3; a frame handled in XDP leaves before the marker reaches the socket,
//! so once both markers are in, the frame's copies are too. No sleeps.
//! Cases are seeded (the seed is printed on failure). Needs root and
//! ethtool; removes what it made on drop.

mod support;
use support::*;

use linerate_io::rng::SplitMix64;
use linerate_pipeline::switch::actions::{execute, Env, FrameBuf, Out};
use linerate_pipeline::switch::{Key, MatchSpec, Reference, Rule};
use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CASES: u64 = 24;
const OPS: usize = 30;
const LIMIT: Duration = Duration::from_secs(10);
const MARKER_TYPE: [u8; 2] = [0x88, 0xb5];
const MARKER_PRIORITY: u16 = 65000;

const MATCHES: &[&str] = &[
    "udp",
    "tcp",
    "ip",
    "udp,nw_dst=10.0.2.2",
    "ip,nw_dst=10.0.3.0/24",
    "udp,tp_dst=53",
    "tcp,tp_dst=80",
    "ip,nw_src=10.0.0.9",
    "in_port=1,ip",
    "in_port=2,ip",
    "udp,nw_dst=10.0.3.7,tp_dst=1000",
];

const ACTIONS: &[&str] = &[
    "output:2",
    "output:3",
    "drop",
    "mod_dl_dst:02:00:00:00:00:aa,output:2",
    "dec_ttl,output:3",
    "set_field:192.168.1.1->ip_src,output:2",
    "mod_nw_dst:10.9.9.9,mod_tp_dst:99,output:3",
    "mod_tp_src:7,dec_ttl,output:2",
    "set_field:4242->tcp_dst,output:3",
    "output:2,output:3",
    "output:1",
    "output:2,mod_dl_src:02:00:00:00:00:bb",
    "goto_table:1",
    "mod_dl_dst:02:00:00:00:00:cc,goto_table:1",
    "output:2,goto_table:1",
    "output:2,mod_nw_dst:10.0.3.7,goto_table:1",
    "output:3,dec_ttl",
];

const TABLE1_ACTIONS: &[&str] = &["output:2", "output:3", "drop", "dec_ttl,output:2"];

fn pick<'a>(r: &mut SplitMix64, xs: &[&'a str]) -> &'a str {
    xs[r.below(xs.len() as u64) as usize]
}

fn csum(b: &[u8], acc: u64) -> u16 {
    linerate_wire::checksum::fold(linerate_wire::checksum::sum(b, acc))
}

/// A UDP or TCP frame over IPv4 with valid checksums, from h1's MAC `src`.
fn frame(r: &mut SplitMix64, src: [u8; 6]) -> Vec<u8> {
    let tcp = r.below(3) == 0;
    let dst = [[10, 0, 2, 2], [10, 0, 3, 3], [10, 0, 3, 7]][r.below(3) as usize];
    let sip = [[10, 0, 0, 1], [10, 0, 0, 9]][r.below(2) as usize];
    let dport: u16 = [53, 80, 1000][r.below(3) as usize];
    let ttl = [1u8, 2, 64][r.below(3) as usize];
    let l4len = if tcp { 20 + 10 } else { 8 + 18 };
    let mut f = vec![2, 0, 0, 0, 0, 2];
    f.extend(src);
    f.extend([8, 0]);
    let total = (20 + l4len) as u16;
    let mut ip = vec![0x45, 0];
    ip.extend(total.to_be_bytes());
    ip.extend([0, 1, 0, 0, ttl, if tcp { 6 } else { 17 }, 0, 0]);
    ip.extend(sip);
    ip.extend(dst);
    let c = !csum(&ip, 0);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend(&ip);
    let mut l4 = Vec::new();
    l4.extend(4000u16.to_be_bytes());
    l4.extend(dport.to_be_bytes());
    if tcp {
        l4.extend([0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x18, 0xff, 0xff, 0, 0, 0, 0]);
    } else {
        l4.extend((l4len as u16).to_be_bytes());
        l4.extend([0, 0]);
    }
    l4.resize(l4len, 0x5a);
    let proto = if tcp { 6 } else { 17 };
    let ps = linerate_wire::checksum::pseudo_v4(&sip, &dst, proto, l4len as u16);
    let c = !csum(&l4, ps);
    let at = if tcp { 16 } else { 6 };
    l4[at..at + 2].copy_from_slice(&c.to_be_bytes());
    f.extend(l4);
    f
}

fn marker(src: [u8; 6], n: u32) -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend(src);
    f.extend(MARKER_TYPE);
    f.extend(n.to_be_bytes());
    f.resize(60, 0);
    f
}

/// What the model's executor sends.
#[derive(Default)]
struct Sink {
    out: Vec<(u32, Vec<u8>)>,
}

impl Env for Sink {
    fn output(&mut self, out: Out, frame: &[u8]) {
        if let Out::Port(p) = out {
            // The input port (1) is skipped; 2 and 3 exist.
            if p == 2 || p == 3 {
                self.out.push((p, frame.to_vec()));
            }
        }
    }
    fn meter(&mut self, _id: u32, _bytes: usize) -> bool {
        true
    }
}

/// Rules per table: a linear classifier and each rule with its count.
struct Model {
    tables: [Reference; 2],
    /// (table, id, rule, packets)
    rules: Vec<(u8, u32, Rule, u64)>,
    next_id: u32,
}

impl Model {
    fn new() -> Model {
        Model {
            tables: [Reference::new(), Reference::new()],
            rules: Vec::new(),
            next_id: 0,
        }
    }

    fn add(&mut self, r: Rule) {
        let id = self.next_id;
        self.next_id += 1;
        self.tables[r.table as usize]
            .insert(id, &r.m, r.priority)
            .expect("priorities are unique");
        self.rules.push((r.table, id, r, 0));
    }

    fn del_loose(&mut self, spec: &MatchSpec) {
        for t in 0..2 {
            for id in self.tables[t].remove_loose(&spec.m) {
                self.rules.retain(|(_, i, _, _)| *i != id);
            }
        }
    }

    /// The model's outputs for `f` arriving on port 1 (counting the rules hit).
    fn run(&mut self, f: &[u8]) -> Vec<(u32, Vec<u8>)> {
        let mut buf = vec![0u8; 2048];
        buf[128..128 + f.len()].copy_from_slice(f);
        let mut fb = FrameBuf::new(&mut buf, 128, f.len()).unwrap();
        let mut sink = Sink::default();
        let mut t = 0usize;
        loop {
            let k = Key::extract(fb.bytes(), 1);
            let Some(id) = self.tables[t].lookup(&k) else {
                break;
            };
            let e = self.rules.iter_mut().find(|r| r.1 == id).unwrap();
            e.3 += 1;
            let acts = e.2.actions.clone();
            if execute(&mut fb, &acts, &mut sink).is_err() {
                break;
            }
            match acts.iter().find_map(|a| match a {
                linerate_pipeline::switch::Action::GotoTable(n) => Some(*n),
                _ => None,
            }) {
                Some(n) => t = n as usize,
                None => break,
            }
        }
        sink.out
    }
}

struct Bed {
    star: NetnsStar,
    dir: TempDir,
    h1: PacketSocket,
    rx: [PacketSocket; 2],
    sw: Option<Proc>,
}

impl Bed {
    /// `cpu`: `--offload-cpu 1` (XDP forwards on CPU 1 through a CPUMAP).
    fn up(cpu: bool) -> Bed {
        require_root();
        require_tool("ethtool");
        let star = NetnsStar::up("lrop", 3);
        let dir = TempDir::new(star.tag());
        for i in 1..=3 {
            let st = in_ns(
                &star.host_ns(i),
                &["ethtool", "-K", &star.host_if(i), "gro", "on"],
            )
            .stdout(Stdio::null())
            .status()
            .unwrap();
            assert!(st.success(), "ethtool -K {} gro on", star.host_if(i));
        }
        let h1 = PacketSocket::open(&star.host_ns(1), &star.host_if(1));
        let rx = [
            PacketSocket::open(&star.host_ns(2), &star.host_if(2)),
            PacketSocket::open(&star.host_ns(3), &star.host_if(3)),
        ];
        let flows = dir.join("flows.txt");
        std::fs::write(&flows, "").unwrap();
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &star.sw_ns(), EXE, "switch"]);
        for i in 1..=3 {
            c.arg("--port").arg(format!("{i}=afxdp:{}", star.sw_if(i)));
        }
        c.arg("--flows")
            .arg(&flows)
            .arg("--ctl")
            .arg(dir.join("ctl.sock"));
        c.args(["--offload", "xdp", "--poll", "wait", "--json", "--quiet"]);
        if cpu {
            require_cpus(2);
            c.args(["--offload-cpu", "1"]);
        }
        let mut p = Proc::from(
            c.stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        );
        wait_ctl(
            &mut p,
            &dir.join("ctl.sock"),
            "linerate switch --offload xdp",
        );
        Bed {
            star,
            dir,
            h1,
            rx,
            sw: Some(p),
        }
    }

    fn ctl(&self, args: &[&str]) -> String {
        switch_ctl(&self.dir.join("ctl.sock"), args)
    }

    /// Send `f` then a marker into port 1; what came out of ports 2 and 3
    /// with h1's source MAC `src`, once both markers are in and at least
    /// `want` frames came out of each (with a forwarding CPU, XDP's frames
    /// go through its queue and may come out after the marker, which user
    /// space sends; a frame more than `want` shows up at the next send).
    fn send(&self, f: &[u8], src: [u8; 6], n: u32, want: [usize; 2]) -> [Vec<Vec<u8>>; 2] {
        self.h1.send(f);
        self.h1.send(&marker(src, n));
        let mut got: [Vec<Vec<u8>>; 2] = [vec![], vec![]];
        let mut seen = [false; 2];
        let t = Instant::now();
        while !(seen[0] && seen[1] && got[0].len() >= want[0] && got[1].len() >= want[1]) {
            PacketSocket::wait_any(&self.rx, Duration::from_millis(20));
            for (i, s) in self.rx.iter().enumerate() {
                while let Some(g) = s.recv() {
                    if g.len() >= 18 && g[12..14] == MARKER_TYPE && g[6..12] == src {
                        if g[14..18] == n.to_be_bytes() {
                            seen[i] = true;
                        }
                    } else if g.len() >= 14 && g[12..14] == [8, 0] && g[26..30] != [0; 4] {
                        // Ours: IPv4 from h1 (a rewritten source MAC too).
                        if g[6..12] == src || g[6..12] == [2, 0, 0, 0, 0, 0xbb] {
                            got[i].push(g);
                        }
                    }
                }
            }
            if t.elapsed() >= LIMIT {
                assert!(
                    seen[0] && seen[1],
                    "marker {n} did not come out within {LIMIT:?}"
                );
                // Fewer frames than the model's: the caller's comparison says which.
                break;
            }
        }
        got
    }

    /// (table, priority) -> packets, from dump-flows.
    fn counters(&self) -> Vec<(u8, u16, u64)> {
        let v: Value = serde_json::from_str(self.ctl(&["dump-flows", "--json"]).trim()).unwrap();
        let flows = v["flows"].as_array().unwrap();
        flows
            .iter()
            .zip(v["stats"].as_array().unwrap())
            .map(|(f, s)| {
                let f = f.as_str().unwrap();
                let field = |name: &str| -> u64 {
                    f.split([',', ' '])
                        .find_map(|x| x.strip_prefix(name))
                        .map(|x| x.parse().unwrap())
                        .unwrap_or(0)
                };
                (
                    field("table=") as u8,
                    field("priority=") as u16,
                    s["packets"].as_u64().unwrap(),
                )
            })
            .collect()
    }
}

impl Drop for Bed {
    fn drop(&mut self) {
        // The switch before the namespaces (Proc kills it on drop).
        self.sw.take();
        let _ = &self.star;
    }
}

#[test]
fn offloaded_switch_matches_the_model_across_random_rules_and_changes() {
    against_the_model(false);
}

/// The same with the forwarding on another CPU (`--offload-cpu 1`).
#[test]
fn offloaded_switch_on_a_forwarding_cpu_matches_the_model() {
    against_the_model(true);
}

fn against_the_model(cpu: bool) {
    let b = Bed::up(cpu);
    let mut sent = 0u64;
    let mut marker_n = 0u32;
    for case in 0..CASES {
        let seed = 0x38_0000 + case;
        let mut r = SplitMix64(seed);
        let src = [2, 0, 0, 0, 1, case as u8];
        let mac = src
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(":");
        b.ctl(&["del-flows"]);
        b.ctl(&[
            "add-flow",
            &format!("priority={MARKER_PRIORITY},dl_type=0x88b5,actions=output:2,output:3"),
        ]);
        let mut m = Model::new();
        // Below every random rule: most frames match something.
        let floor = "priority=1,ip,actions=output:3";
        b.ctl(&["add-flow", floor]);
        m.add(Rule::parse(floor).unwrap());
        let mut prio: u16 = 100;
        let mut log = Vec::new();
        for _ in 0..OPS {
            match r.below(10) {
                0..=1 => {
                    prio += 1 + r.below(50) as u16;
                    let text = if r.below(4) == 0 {
                        format!(
                            "table=1,priority={prio},{},actions={}",
                            pick(&mut r, MATCHES),
                            pick(&mut r, TABLE1_ACTIONS)
                        )
                    } else {
                        format!(
                            "priority={prio},{},actions={}",
                            pick(&mut r, MATCHES),
                            pick(&mut r, ACTIONS)
                        )
                    };
                    // A rule whose actions lack their prerequisites in
                    // the match (set_field:..->tcp_dst without tcp) is
                    // refused by both: not sent.
                    let Ok(rule) = Rule::parse(&text) else {
                        continue;
                    };
                    b.ctl(&["add-flow", &text]);
                    m.add(rule);
                    log.push(format!("add-flow {text}"));
                }
                2 => {
                    let spec = pick(&mut r, MATCHES).to_string();
                    b.ctl(&["del-flows", &spec]);
                    m.del_loose(&MatchSpec::parse(&spec).unwrap());
                    log.push(format!("del-flows {spec}"));
                }
                _ => {
                    let f = frame(&mut r, src);
                    for copy in 0..1 + r.below(6) {
                        marker_n += 1;
                        let want = m.run(&f);
                        let want: [Vec<Vec<u8>>; 2] = [2u32, 3].map(|p| {
                            want.iter()
                                .filter(|(q, _)| *q == p)
                                .map(|(_, g)| g.clone())
                                .collect()
                        });
                        let got = b.send(&f, src, marker_n, [want[0].len(), want[1].len()]);
                        sent += 1;
                        assert_eq!(
                            got, want,
                            "seed {seed:#x}, copy {copy} of frame {f:02x?} (src {mac}); ops so far:\n{}",
                            log.join("\n")
                        );
                    }
                    log.push(format!("frame {f:02x?}"));
                }
            }
        }
        // Every rule's counter, XDP's packets folded in.
        let got = b.counters();
        for (t, _, rule, n) in &m.rules {
            let c = got
                .iter()
                .find(|(gt, gp, _)| gt == t && *gp == rule.priority)
                .unwrap_or_else(|| panic!("seed {seed:#x}: rule {rule} not in dump-flows"));
            assert_eq!(
                c.2,
                *n,
                "seed {seed:#x}: packets of rule {rule}; ops:\n{}",
                log.join("\n")
            );
        }
    }
    let mut b = b;
    let fin =
        b.sw.take()
            .unwrap()
            .finish_json(Duration::from_secs(30), "linerate switch");
    let x = &fin["offload"]["xdp"];
    let in_xdp = x["rx"].as_u64().unwrap() - x["up"].as_u64().unwrap();
    eprintln!(
        "{sent} frames sent, {in_xdp} handled in XDP: {}",
        fin["offload"]
    );
    assert_eq!(fin["offload"]["xdp_balanced"], true, "{fin}");
    // Not a test of user space alone: a good share took XDP.
    assert!(in_xdp * 3 >= sent, "{in_xdp} of {sent} in XDP: {fin}");
    assert!(x["fwd"].as_u64().unwrap() * 5 >= sent, "{fin}");
    assert!(x["drop_rule"].as_u64().unwrap() > 0, "{fin}");
    if cpu {
        // Every forwarded frame went through CPU 1's queue, none lost there.
        assert!(
            x["to_cpu"].as_u64().unwrap() >= x["fwd"].as_u64().unwrap(),
            "{fin}"
        );
        assert_eq!(x["to_cpu"], x["cpu_rx"], "{fin}");
    } else {
        assert_eq!(x["to_cpu"], 0, "{fin}");
    }
}
