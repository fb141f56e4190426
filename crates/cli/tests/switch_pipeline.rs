//! Issue 22, first acceptance line: a five-table VLAN-aware learning
//! switch (examples/flows/vlan-learning.flows: admission, VLAN input,
//! learn, lookup, output; the pipeline of Open vSwitch's "OVS Advanced
//! Features" tutorial) forwards, floods and learns correctly with four
//! ports, on Open vSwitch and on `linerate switch` from the same rules
//! file, and both give the same result for every frame.
//!
//! The bed: host namespaces h1..h4, each with one veth to the switch's
//! namespace (ports 1..4; 1 is a trunk, 2 an access port of VLAN 20, 3 and
//! 4 access ports of VLAN 30). A script of real Ethernet frames goes out of
//! raw packet sockets in the hosts: tagged on the trunk, untagged on the
//! access ports; unicast to unknown and to learned addresses, broadcast,
//! multicast, a multicast source and an STP destination (dropped at
//! admission), a tagged frame on an access port (dropped by VLAN input),
//! frames that must stay inside their VLAN, output to the input port (goes
//! nowhere), a station that moves. Packet sockets opened in every host
//! before the first frame record where each frame arrives, with which tag
//! (none, or its VID) and whether its bytes are the ones expected. A small
//! model of a VLAN learning switch written here, not derived from the
//! rules, says where each frame must arrive; the switch's learned table
//! (table 10) must hold the model's (VLAN, MAC) -> port entries after every
//! frame.
//!
//! No fixed sleeps: after each frame come marker broadcasts from its own
//! host (behind it on the same ingress port: once they are out, the switch
//! has handled the frame), then markers from the other hosts (sent after
//! that, so each reaches its ports after any copy of the frame there;
//! together the markers reach all four ports), then a bounded 100 ms wait
//! for stragglers before "did not arrive" counts. Markers are frames of the
//! script like any other: the model predicts them too. Before the next
//! frame the switch's table 10 must show what the model learned (learning
//! is asynchronous in both switches); on Open vSwitch, when table 10 has
//! changed, also a revalidator round ends (`ovs-appctl revalidator/wait`)
//! so that no datapath flow cached before the learn still forwards by the
//! old state (frames 2 and 4 of the script, and the hairpin and the moved
//! station, share their headers).
//!
//! The whole script runs twice, each on a fresh bed: on Open vSwitch
//! (userspace datapath, private ovsdb-server and ovs-vswitchd, the ports
//! as system netdevs, the rules loaded with `ovs-ofctl add-flows`) and on
//! `linerate switch` (afpacket ports, `--flows`). The test needs root and
//! the Open vSwitch tools and fails without them (never skips); it removes
//! everything it made (namespaces, veths, processes, run directories) on
//! drop, also when it fails.

mod support;
use support::*;

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The rules file, as both switches load it.
const FLOWS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../examples/flows/vlan-learning.flows"
);

const PORTS: u32 = 4;

/// The VLAN of access port `p`; None for the trunk (port 1).
fn access_vlan(p: u32) -> Option<u16> {
    match p {
        1 => None,
        2 => Some(20),
        3 | 4 => Some(30),
        _ => panic!("no port {p}"),
    }
}

type Mac = [u8; 6];

const fn station(last: u8) -> Mac {
    [0x02, 0, 0, 0, 0, last]
}
/// Stations behind the trunk.
const A: Mac = station(0x0a);
const E: Mac = station(0x0e);
/// On port 2 (VLAN 20).
const B: Mac = station(0x0b);
/// On port 3 (VLAN 30).
const C: Mac = station(0x0c);
const C2: Mac = station(0x1c);
/// On port 4 (VLAN 30).
const D: Mac = station(0x0d);
/// Senders of frames that must be dropped before learning.
const F: Mac = station(0x0f);
const G: Mac = station(0x47);
/// Never a source: always unknown.
const U: Mac = station(0x99);
const BCAST: Mac = [0xff; 6];
const MCAST: Mac = [0x01, 0x00, 0x5e, 0x00, 0x00, 0xfb];
/// The Spanning Tree Protocol's destination (01:80:c2:00:00:0x: reserved).
const STP: Mac = [0x01, 0x80, 0xc2, 0x00, 0x00, 0x00];
/// A source address with the group (multicast) bit set.
const MCAST_SRC: Mac = [0x03, 0, 0, 0, 0, 0x0c];

/// The marker source of host `i`.
fn marker_mac(i: u32) -> Mac {
    [0x02, 0, 0, 0, 0x01, i as u8]
}

fn is_group(m: &Mac) -> bool {
    m[0] & 1 == 1
}

/// IEEE 802 local experimental EtherType 1: nothing else sends it.
const ETHERTYPE: u16 = 0x88b5;
/// The payload begins with this, then the frame's number (u32, big endian).
const MAGIC: &[u8; 8] = b"lrvlan22";

/// One frame of the script: sent by host `port` (into switch port `port`).
#[derive(Clone, Debug)]
struct Frame {
    port: u32,
    /// The VID of its 802.1Q tag (priority 0); None: untagged.
    tag: Option<u16>,
    src: Mac,
    dst: Mac,
    what: &'static str,
}

impl Frame {
    fn new(port: u32, tag: Option<u16>, src: Mac, dst: Mac, what: &'static str) -> Frame {
        Frame {
            port,
            tag,
            src,
            dst,
            what,
        }
    }

    /// Its bytes as number `id` with tag `tag` (TCI = VID): 60 bytes
    /// untagged, 64 tagged.
    fn wire(&self, id: u32, tag: Option<u16>) -> Vec<u8> {
        let mut f = Vec::with_capacity(64);
        f.extend(self.dst);
        f.extend(self.src);
        if let Some(vid) = tag {
            f.extend([0x81, 0x00]);
            f.extend(vid.to_be_bytes());
        }
        f.extend(ETHERTYPE.to_be_bytes());
        f.extend(MAGIC);
        f.extend(id.to_be_bytes());
        f.resize(if tag.is_some() { 64 } else { 60 }, 0);
        f
    }
}

/// The frame number and TCI of a frame of this test (None: another frame).
fn parse(f: &[u8]) -> Option<(u32, Option<u16>)> {
    if f.len() < 14 {
        return None;
    }
    let (tci, rest) = if f[12..14] == [0x81, 0x00] && f.len() >= 18 {
        (Some(u16::from_be_bytes([f[14], f[15]])), &f[16..])
    } else {
        (None, &f[12..])
    };
    if rest.len() < 14 || rest[0..2] != ETHERTYPE.to_be_bytes() || &rest[2..10] != MAGIC {
        return None;
    }
    Some((u32::from_be_bytes(rest[10..14].try_into().unwrap()), tci))
}

/// A copy of a frame at a port: with which tag, and whether its bytes are
/// the frame's own with that tag (and nothing else changed).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
struct Arrival {
    port: u32,
    vid: Option<u16>,
    intact: bool,
}

impl fmt::Display for Arrival {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self.vid {
            Some(v) => write!(f, "{}:vlan{v}", self.port)?,
            None => write!(f, "{}:untagged", self.port)?,
        }
        if !self.intact {
            write!(f, "(altered)")?;
        }
        Ok(())
    }
}

fn show(v: &[Arrival]) -> String {
    if v.is_empty() {
        return "nowhere".into();
    }
    v.iter()
        .map(|a| a.to_string())
        .collect::<Vec<_>>()
        .join(" ")
}

/// A VLAN learning switch as the issue describes it: admission drops
/// multicast sources and reserved destinations; the trunk takes any frame
/// (untagged ones in VLAN 0), an access port only untagged frames, which
/// join its VLAN; the source is learned per (VLAN, MAC); a learned unicast
/// destination goes to its port, anything else floods the ports of the
/// VLAN; never back out of the input port; tagged on the trunk, untagged on
/// access ports.
#[derive(Default)]
struct Model {
    learned: BTreeMap<(u16, Mac), u32>,
}

impl Model {
    fn forward(&mut self, f: &Frame) -> Vec<Arrival> {
        if is_group(&f.src) || (f.dst[..5] == STP[..5] && f.dst[5] & 0xf0 == 0) {
            return vec![];
        }
        let vid = match (access_vlan(f.port), f.tag) {
            (None, tag) => tag.unwrap_or(0),
            (Some(vlan), None) => vlan,
            (Some(_), Some(_)) => return vec![],
        };
        self.learned.insert((vid, f.src), f.port);
        let known = if is_group(&f.dst) {
            None
        } else {
            self.learned.get(&(vid, f.dst)).copied()
        };
        let out: Vec<u32> = match known {
            Some(p) => vec![p],
            None => (1..=PORTS)
                .filter(|&p| access_vlan(p).is_none_or(|v| v == vid))
                .collect(),
        };
        let mut v: Vec<Arrival> = out
            .into_iter()
            .filter(|&p| p != f.port)
            .map(|port| Arrival {
                port,
                vid: match access_vlan(port) {
                    None => (vid != 0).then_some(vid),
                    Some(_) => None,
                },
                intact: true,
            })
            .collect();
        v.sort();
        v
    }
}

/// The frames, in order (the markers between them are added by [`Run`]).
fn script() -> Vec<Frame> {
    let (t20, t30) = (Some(20), Some(30));
    vec![
        Frame::new(
            2,
            None,
            B,
            U,
            "unknown unicast from access port 2: floods VLAN 20 (trunk, tagged)",
        ),
        Frame::new(
            1,
            t30,
            E,
            C,
            "unknown unicast on the trunk in VLAN 30: floods ports 3 and 4, untagged",
        ),
        Frame::new(
            3,
            None,
            C,
            E,
            "to E, learned on the trunk in VLAN 30: port 1 only, tagged 30",
        ),
        Frame::new(
            1,
            t30,
            E,
            C,
            "the first trunk frame again, now that C is learned on port 3: port 3 only",
        ),
        Frame::new(
            1,
            t20,
            A,
            B,
            "to B, learned on port 2 in VLAN 20: port 2 only, untagged",
        ),
        Frame::new(
            2,
            None,
            B,
            A,
            "to A, learned on the trunk in VLAN 20: port 1 only, tagged 20",
        ),
        Frame::new(
            4,
            None,
            D,
            A,
            "to A from VLAN 30, where A is not learned: floods VLAN 30 (1 tagged, 3)",
        ),
        Frame::new(
            3,
            None,
            C,
            B,
            "to B (VLAN 20) from VLAN 30: floods VLAN 30 only, never port 2",
        ),
        Frame::new(
            2,
            None,
            B,
            BCAST,
            "broadcast from port 2: the trunk only, tagged 20",
        ),
        Frame::new(
            4,
            None,
            D,
            BCAST,
            "broadcast from port 4: port 1 tagged 30 and port 3",
        ),
        Frame::new(
            1,
            t20,
            A,
            BCAST,
            "broadcast on the trunk in VLAN 20: port 2 only",
        ),
        Frame::new(
            1,
            t30,
            E,
            MCAST,
            "multicast on the trunk in VLAN 30: ports 3 and 4",
        ),
        Frame::new(
            3,
            None,
            MCAST_SRC,
            D,
            "multicast source address: dropped at admission, not learned",
        ),
        Frame::new(
            2,
            None,
            F,
            STP,
            "STP destination: dropped at admission, F not learned",
        ),
        Frame::new(
            2,
            t30,
            G,
            BCAST,
            "tagged (VLAN 30) on access port 2: dropped at VLAN input, no leak, G not learned",
        ),
        Frame::new(
            1,
            None,
            A,
            BCAST,
            "untagged on the trunk (VLAN 0, carried by the trunk only): nowhere; learned in VLAN 0",
        ),
        Frame::new(
            1,
            Some(55),
            A,
            BCAST,
            "VLAN 55 on the trunk, no access port carries it: nowhere; learned in VLAN 55",
        ),
        Frame::new(
            1,
            t20,
            E,
            A,
            "to A, learned on the trunk itself: output to the input port, nowhere",
        ),
        Frame::new(
            2,
            None,
            A,
            U,
            "A moves to port 2: floods VLAN 20 (the trunk); the learned port of A changes",
        ),
        Frame::new(
            1,
            t20,
            E,
            A,
            "to A again from the trunk: now port 2, untagged",
        ),
        Frame::new(3, None, C, D, "to D, learned on port 4: port 4 only"),
        Frame::new(4, None, D, C, "to C, learned on port 3: port 3 only"),
        Frame::new(3, None, C2, C, "to C from its own port 3: nowhere"),
        Frame::new(
            1,
            t20,
            E,
            C,
            "to C from VLAN 20 (C is learned in VLAN 30 only): floods VLAN 20, port 2, never 3",
        ),
    ]
}

/// One frame sent, what the model expects of it and what arrived.
#[derive(Clone)]
struct Record {
    frame: Frame,
    marker: bool,
    expected: Vec<Arrival>,
    got: Vec<Arrival>,
}

/// The switch under test, beyond its ports.
trait Switch {
    /// Its learned table: the text of its dump of table 10.
    fn dump_learned(&mut self) -> String;
    /// Called once its learned table is the model's, before the next frame.
    fn settle(&mut self) {}
}

/// The learned entries (VLAN, MAC) -> port of a dump of table 10, in the
/// spelling of ovs-ofctl (`vlan_tci=0x0014/0x0fff,dl_dst=MAC
/// actions=load:0x1->NXM_NX_REG0[0..15]`) or the OpenFlow 1.3 one
/// (`dl_vlan`/`vlan_vid`, `eth_dst`, `set_field:1->reg0`).
fn parse_learned(dump: &str) -> Result<BTreeMap<(u16, Mac), u32>, String> {
    let mut m = BTreeMap::new();
    for l in dump.lines() {
        let Some((matches, actions)) = l.split_once("actions=") else {
            continue;
        };
        let tokens: Vec<&str> = matches
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|t| !t.is_empty())
            .collect();
        let field = |names: &[&str]| {
            tokens.iter().find_map(|t| {
                let (k, v) = t.split_once('=')?;
                names.contains(&k).then_some(v)
            })
        };
        if field(&["table"]).is_some_and(|t| t != "10") {
            continue;
        }
        // A learned entry loads reg0.
        let Some(port) = actions.split(',').find_map(|a| {
            let a = a.trim();
            let rest = a
                .strip_prefix("load:")
                .or_else(|| a.strip_prefix("set_field:"))?;
            let (v, target) = rest.split_once("->")?;
            target.to_ascii_lowercase().contains("reg0").then_some(v)
        }) else {
            continue;
        };
        let bad = |what: &str| format!("{what} in: {l}");
        let port = num(port).ok_or_else(|| bad("port"))? as u32;
        let vid = if let Some(v) = field(&["vlan_tci"]) {
            let (val, mask) = v.split_once('/').unwrap_or((v, "0xffff"));
            let mask = num(mask).ok_or_else(|| bad("vlan_tci mask"))?;
            if mask & 0xfff != 0xfff {
                return Err(bad("a vlan_tci mask without the whole VID"));
            }
            num(val).ok_or_else(|| bad("vlan_tci"))? & 0xfff
        } else if let Some(v) = field(&["dl_vlan", "vlan_vid"]) {
            num(v.split('/').next().unwrap()).ok_or_else(|| bad("VLAN"))? & 0xfff
        } else {
            return Err(bad("no VLAN match"));
        } as u16;
        let dst = field(&["dl_dst", "eth_dst"]).ok_or_else(|| bad("no dl_dst"))?;
        let dst = parse_mac(dst).ok_or_else(|| bad("dl_dst"))?;
        if m.insert((vid, dst), port).is_some() {
            return Err(bad("a second entry for the same VLAN and MAC"));
        }
    }
    Ok(m)
}

fn num(s: &str) -> Option<u64> {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

fn parse_mac(s: &str) -> Option<Mac> {
    let v: Vec<u8> = s
        .split(':')
        .map(|b| u8::from_str_radix(b, 16).ok())
        .collect::<Option<_>>()?;
    v.try_into().ok()
}

fn fmt_mac(m: &Mac) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

fn fmt_learned(m: &BTreeMap<(u16, Mac), u32>) -> String {
    m.iter()
        .map(|((v, mac), p)| format!("vlan {v} {} -> {p}", fmt_mac(mac)))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The bed: namespaces and one packet socket per host (index: port - 1),
/// open before anything is sent.
struct Bed {
    star: NetnsStar,
    socks: Vec<PacketSocket>,
}

impl Bed {
    fn up() -> Bed {
        let star = NetnsStar::up("lrvl", PORTS);
        let socks = (1..=PORTS)
            .map(|i| PacketSocket::open(&star.host_ns(i), &star.host_if(i)))
            .collect();
        Bed { star, socks }
    }
}

/// How long a marker may take to arrive, and the learned table to match.
const LIMIT: Duration = Duration::from_secs(10);
/// How long to keep collecting after the last marker of a step is in.
const GRACE: Duration = Duration::from_millis(100);

/// The script's run through one switch.
struct Run<'a> {
    bed: &'a Bed,
    sw: &'a mut dyn Switch,
    name: &'static str,
    model: Model,
    sent: Vec<Record>,
    /// Frames that were not the test's (first bytes), by port.
    foreign: Vec<(u32, String)>,
    /// The learned table when the switch last settled.
    settled: BTreeMap<(u16, Mac), u32>,
}

impl Run<'_> {
    fn send(&mut self, frame: Frame, marker: bool) {
        let id = self.sent.len() as u32 + 1;
        let expected = self.model.forward(&frame);
        self.bed.socks[frame.port as usize - 1].send(&frame.wire(id, frame.tag));
        self.sent.push(Record {
            frame,
            marker,
            expected,
            got: vec![],
        });
    }

    /// Read what has arrived, waiting up to `t` for the first frame.
    fn pull(&mut self, t: Duration) {
        PacketSocket::wait_any(&self.bed.socks, t);
        for (i, s) in self.bed.socks.iter().enumerate() {
            let port = i as u32 + 1;
            while let Some(f) = s.recv() {
                match parse(&f) {
                    Some((id, tci)) if id >= 1 && id as usize <= self.sent.len() => {
                        let r = &mut self.sent[id as usize - 1];
                        let vid = tci.map(|t| t & 0xfff);
                        let intact = f == r.frame.wire(id, vid);
                        r.got.push(Arrival { port, vid, intact });
                        r.got.sort();
                    }
                    _ => self.foreign.push((
                        port,
                        f.iter().take(18).map(|b| format!("{b:02x}")).collect(),
                    )),
                }
            }
        }
    }

    /// Wait until every expected copy of the frames `ids` has arrived.
    fn await_all(&mut self, ids: Range<usize>, what: &str) {
        let t = Instant::now();
        loop {
            let missing: Vec<String> = self.sent[ids.clone()]
                .iter()
                .enumerate()
                .flat_map(|(k, r)| {
                    r.expected
                        .iter()
                        .filter(|a| !r.got.contains(a))
                        .map(move |a| format!("frame {} at {a}", ids.start + k + 1))
                })
                .collect();
            if missing.is_empty() {
                return;
            }
            assert!(
                t.elapsed() < LIMIT,
                "{}: {what}: still missing after {LIMIT:?}: {}\n{}",
                self.name,
                missing.join(", "),
                table(&self.sent, None)
            );
            self.pull(Duration::from_millis(20));
        }
    }

    /// The markers host `port` sends: a broadcast in each VLAN it carries.
    fn markers(port: u32) -> Vec<Frame> {
        let tags = match access_vlan(port) {
            None => vec![Some(20), Some(30)],
            Some(_) => vec![None],
        };
        tags.into_iter()
            .map(|tag| Frame::new(port, tag, marker_mac(port), BCAST, "marker"))
            .collect()
    }

    /// Send `frame`, then the markers, and collect what arrives; then wait
    /// for the switch's learned table to be the model's.
    fn step(&mut self, frame: Frame) {
        let id = self.sent.len() + 1;
        let from = frame.port;
        self.send(frame, false);
        // Markers behind it on its own ingress port: when they are out,
        // the switch has handled the frame.
        let own = self.sent.len();
        for m in Self::markers(from) {
            self.send(m, true);
        }
        self.await_all(own..self.sent.len(), &format!("markers after frame {id}"));
        // Then the other hosts' markers: on each port they come after any
        // copy of the frame there.
        let others = self.sent.len();
        for p in (1..=PORTS).filter(|&p| p != from) {
            for m in Self::markers(p) {
                self.send(m, true);
            }
        }
        self.await_all(
            others..self.sent.len(),
            &format!("markers after frame {id}"),
        );
        let mut reached: Vec<u32> = self.sent[own..]
            .iter()
            .flat_map(|r| r.expected.iter().map(|a| a.port))
            .collect();
        reached.sort();
        reached.dedup();
        assert_eq!(
            reached,
            (1..=PORTS).collect::<Vec<_>>(),
            "the markers after frame {id} must reach every port"
        );
        let t = Instant::now();
        while t.elapsed() < GRACE {
            self.pull(GRACE.saturating_sub(t.elapsed()));
        }
        self.sync_learned(id);
    }

    /// Wait until the switch's table 10 holds exactly the model's entries.
    fn sync_learned(&mut self, id: usize) {
        let t = Instant::now();
        loop {
            let dump = self.sw.dump_learned();
            let got = parse_learned(&dump);
            if got.as_ref() == Ok(&self.model.learned) {
                break;
            }
            assert!(
                t.elapsed() < LIMIT,
                "{}: after frame {id}, table 10 is not what the model learned \
                 within {LIMIT:?}\nmodel: {}\nswitch: {}\ndump:\n{dump}\n{}",
                self.name,
                fmt_learned(&self.model.learned),
                got.map_or_else(|e| e, |m| fmt_learned(&m)),
                table(&self.sent, None)
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        if self.settled != self.model.learned {
            self.sw.settle();
            self.settled = self.model.learned.clone();
        }
    }
}

/// Run the script through `sw` (whose ports are `bed`'s): every frame and
/// marker with what the model expects and what arrived.
fn run(bed: &Bed, sw: &mut dyn Switch, name: &'static str) -> Vec<Record> {
    let mut r = Run {
        bed,
        sw,
        name,
        model: Model::default(),
        sent: vec![],
        foreign: vec![],
        settled: BTreeMap::new(),
    };
    r.sync_learned(0);
    for f in script() {
        r.step(f);
    }
    if !r.foreign.is_empty() {
        eprintln!(
            "{name}: {} frames that are not the test's (ignored): {:?}",
            r.foreign.len(),
            &r.foreign[..r.foreign.len().min(10)]
        );
    }
    r.sent
}

/// The frames as a table: number, what, model, each switch; markers only
/// where something differs. `other`: a second switch's records.
fn table(a: &[Record], other: Option<(&str, &[Record])>) -> String {
    let mut s = String::new();
    for (i, r) in a.iter().enumerate() {
        let o = other.map(|(n, v)| (n, &v[i]));
        let same = r.got == r.expected && o.is_none_or(|(_, o)| o.got == r.expected);
        if r.marker && same {
            continue;
        }
        let f = &r.frame;
        s.push_str(&format!(
            "{}{:3} port {} {} {} -> {}: {}\n      model: {}; got: {}",
            if same { " " } else { "!" },
            i + 1,
            f.port,
            f.tag.map_or("untagged".into(), |v| format!("vlan{v}")),
            fmt_mac(&f.src),
            fmt_mac(&f.dst),
            f.what,
            show(&r.expected),
            show(&r.got)
        ));
        if let Some((n, o)) = o {
            s.push_str(&format!("; {n}: {}", show(&o.got)));
        }
        s.push('\n');
    }
    s
}

/// Open vSwitch on the bed's switch namespace, rules from [`FLOWS`].
struct OvsSwitch(Ovs);

impl OvsSwitch {
    fn start(bed: &Bed) -> OvsSwitch {
        let ports: Vec<(u32, String)> = (1..=PORTS).map(|i| (i, bed.star.sw_if(i))).collect();
        let ovs = Ovs::start(&bed.star.sw_ns(), "br0", &ports);
        ovs.ofctl("add-flows", &[FLOWS]);
        OvsSwitch(ovs)
    }
}

impl Switch for OvsSwitch {
    fn dump_learned(&mut self) -> String {
        self.0.assert_running();
        self.0.ofctl("dump-flows", &["table=10"])
    }
    fn settle(&mut self) {
        // A frame that hits a datapath flow cached before a learn is
        // forwarded by that flow until a revalidator has looked at it
        // again; the learn itself triggers a round. Waiting for the end of
        // a round that began after the learn is in table 10.
        self.0.appctl(&["revalidator/wait"]);
    }
}

/// `linerate switch` on the bed's switch namespace, rules from [`FLOWS`].
struct LinerateSwitch {
    p: Proc,
    sock: PathBuf,
    _dir: TempDir,
}

impl LinerateSwitch {
    fn start(bed: &Bed) -> LinerateSwitch {
        let dir = TempDir::new("vlan-switch");
        let sock = dir.join("ctl.sock");
        let ifs: Vec<String> = (1..=PORTS).map(|i| bed.star.sw_if(i)).collect();
        let p = start_switch_in(&bed.star.sw_ns(), &ifs, Path::new(FLOWS), &sock);
        LinerateSwitch { p, sock, _dir: dir }
    }
}

impl Switch for LinerateSwitch {
    fn dump_learned(&mut self) -> String {
        self.p.assert_running("linerate switch");
        let o = Command::new(EXE)
            .arg("switch-ctl")
            .arg(&self.sock)
            .args(["dump-flows", "table=10"])
            .output()
            .unwrap();
        assert_ok(&o, "linerate switch-ctl dump-flows table=10");
        String::from_utf8_lossy(&o.stdout).into_owned()
    }
}

fn mismatches(v: &[Record]) -> usize {
    v.iter().filter(|r| r.got != r.expected).count()
}

#[test]
fn vlan_learning_pipeline_same_on_ovs_and_linerate() {
    require_root();
    require_tools(&OVS_TOOLS);
    let n = script().len();

    let t = Instant::now();
    let ovs = {
        let bed = Bed::up();
        let mut sw = OvsSwitch::start(&bed);
        run(&bed, &mut sw, "Open vSwitch")
    };
    eprintln!(
        "Open vSwitch: {n} frames and {} markers in {:.1} s, {} not as the model says",
        ovs.len() - n,
        t.elapsed().as_secs_f64(),
        mismatches(&ovs),
    );
    // The reference itself must be right before linerate is held to it.
    assert_eq!(
        mismatches(&ovs),
        0,
        "Open vSwitch: frames not as the model says (marked !):\n{}",
        table(&ovs, None)
    );

    let t = Instant::now();
    let lr = {
        let bed = Bed::up();
        let mut sw = LinerateSwitch::start(&bed);
        run(&bed, &mut sw, "linerate switch")
    };
    eprintln!(
        "linerate switch: {n} frames and {} markers in {:.1} s, {} not as the model says",
        lr.len() - n,
        t.elapsed().as_secs_f64(),
        mismatches(&lr)
    );

    assert_eq!(ovs.len(), lr.len());
    let differ = ovs.iter().zip(&lr).filter(|(o, l)| o.got != l.got).count();
    assert!(
        mismatches(&ovs) == 0 && mismatches(&lr) == 0 && differ == 0,
        "{} frames not as the model says on Open vSwitch, {} on linerate switch, \
         {differ} where the two differ (got: Open vSwitch; then linerate):\n{}",
        mismatches(&ovs),
        mismatches(&lr),
        table(&ovs, Some(("linerate", &lr)))
    );
}
