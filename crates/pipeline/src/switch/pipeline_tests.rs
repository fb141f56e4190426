//! Multi-table pipelines: the parser's new fields and actions, and the
//! walk ([`super::xlate`]) with its cache of lookup traces against a linear
//! reference model of the same semantics, on random multi-table rule sets
//! with random adds, deletes and learned rules.

use super::actions::{Env, FrameBuf, Out};
use super::classifier::LookupStats;
use super::key::{self, Key};
use super::learn::Learn;
use super::normal::Decision;
use super::rule::{Action, Match, MatchSpec, Rule};
use super::table::FlowTable;
use super::xlate::{self, End, Mode, PipeEnv, TableCounts, Trace, Walk, MAX_DEPTH};
use proptest::prelude::*;
use std::collections::HashMap;
use std::sync::Arc;

// ---------- parser ----------

const GOOD: &[&str] = &[
    "table=0,priority=0,actions=resubmit(,1)",
    "table=1,in_port=2,vlan_tci=0,actions=mod_vlan_vid:20,resubmit(,2)",
    "table=2,actions=learn(table=10,NXM_OF_VLAN_TCI[0..11],NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],load:NXM_OF_IN_PORT[]->NXM_NX_REG0[0..15]),resubmit(,3)",
    "table=4,reg0=0x1,actions=output:1",
    "table=4,priority=99,reg0=0,dl_vlan=30,actions=1,strip_vlan,3,4",
    "table=3,reg1=0x5/0xff,metadata=0x10/0xf0,actions=output:NXM_NX_REG0[0..15]",
    "actions=load:0x2->NXM_NX_REG0[0..15],move:NXM_NX_REG0[0..15]->NXM_NX_REG1[16..31],goto_table:4",
    "actions=set_field:0x5->reg3,set_field:0x100/0xff00->metadata,write_metadata:0x1/0x1,goto_table:2",
    "actions=resubmit:3,resubmit(2,7),NORMAL",
    "actions=load:0x20000000001->NXM_OF_ETH_DST[],move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[],output:2",
    "actions=load:0x100a->NXM_OF_VLAN_TCI[],output:2",
    "actions=set_field:0x5->tun_id,goto_table:1",
    "table=1,tun_id=0x5/0xff,tunnel_id=0x5,actions=output:2",
    "actions=move:NXM_NX_TUN_ID[0..31]->NXM_NX_REG0[],load:0x7->OXM_OF_TUNNEL_ID[8..15],output:2",
];

#[test]
fn pipeline_rules_parse_and_print_back() {
    for s in GOOD {
        let r = Rule::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"));
        let t = r.to_string();
        let r2 = Rule::parse(&t).unwrap_or_else(|e| panic!("{s} printed as {t}: {e}"));
        assert_eq!(r, r2, "{s} -> {t}");
    }
    let r = Rule::parse("actions=set_field:0x100/0xff00->metadata").unwrap();
    assert_eq!(r.actions[0].to_string(), "load:0x1->OXM_OF_METADATA[8..15]");
    let r = Rule::parse("actions=set_tunnel:0x77,set_field:5->tunnel_id").unwrap();
    assert_eq!(
        r.actions.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
        ["load:0x77->NXM_NX_TUN_ID[]", "load:0x5->NXM_NX_TUN_ID[]"]
    );
    let r = Rule::parse("table=3,reg2=7,actions=resubmit(,5)").unwrap();
    assert_eq!(r.m.value.get(key::reg(2)), 7);
    assert_eq!(
        r.to_string(),
        "table=3,priority=32768,reg2=0x7,actions=resubmit(,5)"
    );
}

#[test]
fn pipeline_errors_are_one_line_and_name_the_problem() {
    for (s, want) in [
        ("table=2,actions=goto_table:1", "later table"),
        ("actions=goto_table:1,output:2", "last action"),
        ("actions=write_metadata:1,output:2", "write_metadata"),
        ("actions=load:1->NXM_OF_IP_SRC[]", "set_field"),
        ("actions=load:0x10000->NXM_NX_REG0[0..15]", "does not fit"),
        ("actions=move:NXM_NX_REG0[]->NXM_NX_REG1[0..15]", "bits"),
        ("actions=output:NXM_NX_REG8[]", "unknown field"),
        ("actions=controller(reason=no_match)", "only max_len"),
        ("actions=controller:65536", "controller"),
        ("actions=resubmit(,)", "resubmit"),
        ("actions=learn(limit=3)", "limit"),
        ("table=255,actions=drop", "254"),
        ("reg8=1,actions=drop", "reg8"),
    ] {
        let e = Rule::parse(s).unwrap_err().0;
        assert!(e.contains(want), "{s}: {e}");
        assert!(!e.contains('\n'), "{s}: {e}");
    }
    // The controller port's forms; a table-miss rule's packet-ins say
    // NO_MATCH, any other's ACTION, with the rule's table and cookie.
    use super::rule::{Action, Pin, PIN_ACTION, PIN_NO_MATCH};
    for (s, max_len, reason, table, cookie, shown) in [
        (
            "priority=0,actions=controller",
            0xffff,
            PIN_NO_MATCH,
            0,
            0,
            "CONTROLLER:65535",
        ),
        (
            "table=3,cookie=0x9,priority=0,actions=CONTROLLER:128",
            128,
            PIN_NO_MATCH,
            3,
            9,
            "CONTROLLER:128",
        ),
        (
            "priority=0,in_port=1,actions=controller(max_len=64)",
            64,
            PIN_ACTION,
            0,
            0,
            "CONTROLLER:64",
        ),
        ("actions=controller:0", 0, PIN_ACTION, 0, 0, "CONTROLLER:0"),
    ] {
        let r = Rule::parse(s).unwrap();
        let want = Pin {
            max_len,
            reason,
            table,
            cookie,
        };
        assert_eq!(r.actions, vec![Action::Controller(want)], "{s}");
        assert!(
            r.to_string().ends_with(&format!("actions={shown}")),
            "{s}: {r}"
        );
        assert_eq!(Rule::parse(&r.to_string()).unwrap(), r, "{s}: prints back");
    }
    // del-flows/dump-flows: the table when given, else every table.
    assert_eq!(MatchSpec::parse("table=10").unwrap().table, Some(10));
    assert_eq!(MatchSpec::parse("in_port=1").unwrap().table, None);
}

// ---------- the walk against a reference model ----------

/// What a walk did: outputs (ports, raw) and learn requests (the rules).
#[derive(Default)]
struct TEnv {
    out: Vec<u32>,
    learned: Vec<Rule>,
}

impl Env for TEnv {
    fn output(&mut self, out: Out, _frame: &[u8]) {
        self.out.push(match out {
            Out::Port(p) => p,
            _ => u32::MAX,
        });
    }
    fn meter(&mut self, _id: u32, _bytes: usize) -> bool {
        true
    }
}

impl PipeEnv for TEnv {
    fn normal(&mut self, _k: &Key) -> Decision {
        Decision::Flood
    }
    fn learn(&mut self, spec: &Arc<Learn>, k: &Key) {
        self.learned.push(spec.rule(k));
    }
}

/// The reference: per table, rules in insertion order; the winner is the
/// highest priority, the earliest inserted among equals; the same
/// semantics as [`xlate`] written plainly over the key.
#[derive(Default, Clone)]
struct Model {
    tables: HashMap<u8, Vec<(Match, u16, Vec<Action>)>>,
}

enum Stop {
    Limit,
}

impl Model {
    fn add(&mut self, r: &Rule) {
        let m = r.m.normalized();
        let t = self.tables.entry(r.table).or_default();
        match t.iter_mut().find(|(x, p, _)| *x == m && *p == r.priority) {
            Some(e) => e.2 = r.actions.clone(),
            None => t.push((m, r.priority, r.actions.clone())),
        }
    }

    fn del_loose(&mut self, s: &MatchSpec) {
        let m = s.m.normalized();
        for (t, rules) in self.tables.iter_mut() {
            if s.table.is_none_or(|x| x == *t) {
                rules.retain(|(x, _, _)| !m.covers(x));
            }
        }
    }

    fn lookup(&self, t: u8, k: &Key) -> Option<&(Match, u16, Vec<Action>)> {
        let rules = self.tables.get(&t)?;
        let mut best: Option<&(Match, u16, Vec<Action>)> = None;
        for r in rules {
            if r.0.matches(k) && best.is_none_or(|b| r.1 > b.1) {
                best = Some(r);
            }
        }
        best
    }

    fn walk(&self, k: &mut Key, env: &mut TEnv, n: &mut u32) -> Result<End, Stop> {
        self.run(0, k, env, 0, n, None)
    }

    /// `port`: resubmit's port, for the first lookup only (Open vSwitch
    /// puts the original in_port back right after it).
    fn run(
        &self,
        mut t: u8,
        k: &mut Key,
        env: &mut TEnv,
        depth: u32,
        n: &mut u32,
        mut port: Option<u32>,
    ) -> Result<End, Stop> {
        loop {
            *n += 1;
            if *n > xlate::MAX_LOOKUPS {
                return Err(Stop::Limit);
            }
            let mut probe = *k;
            if let Some(p) = port.take() {
                probe.set(key::IN_PORT, p as u64);
            }
            let Some((_, _, actions)) = self.lookup(t, &probe) else {
                return Ok(End::Miss);
            };
            if actions.is_empty() {
                return Ok(End::Drop);
            }
            let mut next = None;
            for a in actions {
                match a {
                    Action::Output(p) => env.out.push(*p),
                    Action::OutputField(s) => env.out.push(s.read(k) as u32),
                    Action::Load { dst, value } => dst.write(k, *value),
                    Action::Move { src, dst } => {
                        let v = src.read(k);
                        dst.write(k, v)
                    }
                    Action::WriteMetadata { value, mask } => {
                        let v = k.get(key::METADATA);
                        k.set(key::METADATA, (v & !mask) | value)
                    }
                    Action::Learn(l) => env.learned.push(l.rule(k)),
                    Action::Resubmit { port, table } => {
                        if depth + 1 > MAX_DEPTH {
                            return Err(Stop::Limit);
                        }
                        self.run(table.unwrap_or(t), k, env, depth + 1, n, *port)?;
                    }
                    Action::GotoTable(x) => next = Some(*x),
                    other => panic!("model does not run {other}"),
                }
            }
            match next {
                Some(x) => t = x,
                None => return Ok(End::Done),
            }
        }
    }
}

const TABLES: u8 = 4;

fn arb_match() -> impl Strategy<Value = String> {
    (
        prop::option::weighted(0.3, 1u32..=4),
        prop::option::weighted(0.3, 0u64..4),
        prop::option::weighted(0.2, 0u64..4),
        prop::option::weighted(0.2, 1u16..=3),
    )
        .prop_map(|(p, r0, md, tp)| {
            let mut v = vec![];
            if let Some(p) = p {
                v.push(format!("in_port={p}"));
            }
            if let Some(r) = r0 {
                v.push(format!("reg0={r}/0x3"));
            }
            if let Some(m) = md {
                v.push(format!("metadata={m}/0x3"));
            }
            if let Some(t) = tp {
                v.push(format!("udp,tp_dst={t}"));
            }
            v.join(",")
        })
}

fn arb_action(table: u8) -> impl Strategy<Value = String> {
    prop_oneof![
        4 => (1u32..=4).prop_map(|p| format!("output:{p}")),
        1 => (0u64..4).prop_map(|v| format!("load:{v}->NXM_NX_REG0[0..1]")),
        1 => (0u64..8).prop_map(|v| format!("load:{v}->NXM_NX_REG1[0..2]")),
        1 => Just("move:NXM_NX_REG0[0..1]->NXM_NX_REG1[1..2]".to_string()),
        1 => Just("move:NXM_OF_IN_PORT[0..1]->NXM_NX_REG0[0..1]".to_string()),
        1 => Just("output:NXM_NX_REG1[0..2]".to_string()),
        1 => (0u8..TABLES).prop_map(|t| format!("resubmit(,{t})")),
        1 => (1u32..=4, 0u8..TABLES).prop_map(|(p, t)| format!("resubmit({p},{t})")),
        1 => (0u8..TABLES).prop_map(|t| format!(
            "learn(table={t},priority=7,NXM_OF_IN_PORT[],NXM_NX_REG0[0..1],load:NXM_NX_REG1[0..1]->NXM_NX_REG0[0..1])"
        )),
        1 => Just(format!("resubmit(,{table})")),
    ]
}

/// A random rule: (table, text).
fn arb_rule() -> impl Strategy<Value = String> {
    let table = prop_oneof![2 => Just(0u8), 3 => 1u8..TABLES];
    (table, 0u16..4, arb_match()).prop_flat_map(|(t, prio, m)| {
        (
            prop::collection::vec(arb_action(t), 0..5),
            prop::option::of((t + 1)..=TABLES),
            prop::option::of(0u64..4),
        )
            .prop_map(move |(acts, goto, md)| {
                let mut a = acts;
                if let (Some(g), true) = (goto, t + 1 < TABLES) {
                    if let Some(v) = md {
                        a.push(format!("write_metadata:{v}/0x3"));
                    }
                    a.push(format!("goto_table:{}", g.min(TABLES - 1)));
                }
                let acts = if a.is_empty() {
                    "drop".to_string()
                } else {
                    a.join(",")
                };
                let sep = if m.is_empty() { "" } else { "," };
                format!("table={t},priority={prio}{sep}{m},actions={acts}")
            })
    })
}

#[derive(Debug, Clone)]
enum Op {
    Add(String),
    Del(Option<u8>, String),
    /// Packets (in_port, tp_dst), each walked live, through the cache, and
    /// by the model; then their learn requests are applied.
    Packets(Vec<(u32, u16)>),
}

fn arb_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => arb_rule().prop_map(Op::Add),
        1 => (prop::option::of(0u8..TABLES), arb_match()).prop_map(|(t, m)| Op::Del(t, m)),
        3 => prop::collection::vec((1u32..=4, 1u16..=3), 1..12).prop_map(Op::Packets),
    ]
}

fn frame(tp_dst: u16) -> Vec<u8> {
    use linerate_wire::build::{build_udp, FrameParams, IpPair};
    let mut p = FrameParams::new(IpPair::V4 {
        src: [10, 0, 0, 1],
        dst: [10, 0, 0, 2],
    });
    p.payload = &[0u8; 18];
    let mut b = vec![0u8; 2048];
    let n = build_udp(&mut b, &p, 1000, tp_dst).unwrap();
    b.truncate(n);
    b
}

/// One walk of `ft` in `mode` over the packet; outputs, learned rules, end.
fn walk_once(
    ft: &FlowTable,
    pkt: &[u8],
    in_port: u32,
    mut mode: Mode<'_>,
) -> (TEnv, Result<End, ()>, Option<Trace>) {
    let mut env = TEnv::default();
    let mut counts = TableCounts::default();
    let mut st = LookupStats::default();
    let mut buf = pkt.to_vec();
    let len = buf.len();
    let key = Key::extract(pkt, in_port);
    let mut w = Walk::new(ft, key, &mut env, &mut mode, 1, &mut counts, &mut st);
    let mut f = FrameBuf::new(&mut buf, 0, len).unwrap();
    let r = w.walk(&mut f).map_err(|_| ());
    let tr = w.trace().map(|(t, _)| *t);
    (env, r, tr)
}

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
/// What the random workload exercised: walks, replays (of which after a
/// table change), walks with outputs, learned rules that changed a table,
/// walks that looked up beyond table 0.
static SEEN: [AtomicU64; 5] = [const { AtomicU64::new(0) }; 5];

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    /// Live walks, cached (replayed) walks and the model agree on every
    /// packet's outputs, learned rules and end, across table changes.
    #[test]
    fn walks_and_cache_agree_with_the_model(ops in prop::collection::vec(arb_op(), 1..40)) {
        let mut ft = FlowTable::new();
        let mut model = Model::default();
        // The pipeline cache: packet key -> (trace, epoch it was valid at).
        let mut cache: HashMap<[u64; key::PKT_WORDS], (Trace, u64)> = HashMap::new();
        for op in &ops {
            match op {
                Op::Add(s) => {
                    let r = Rule::parse(s).unwrap();
                    ft.add_flow(r.clone(), 0).unwrap();
                    model.add(&r);
                }
                Op::Del(t, m) => {
                    let text = match t { Some(t) if m.is_empty() => format!("table={t}"), Some(t) => format!("table={t},{m}"), None => m.clone() };
                    let s = MatchSpec::parse(&text).unwrap();
                    ft.del_flows(Some(&s));
                    model.del_loose(&s);
                }
                Op::Packets(ps) => {
                    let mut learned = Vec::new();
                    for &(in_port, tp) in ps {
                        let pkt = frame(tp);
                        let mut k = Key::extract(&pkt, in_port);
                        let mut menv = TEnv::default();
                        let mut n = 0;
                        let want = model.walk(&mut k, &mut menv, &mut n).map_err(|_| ());
                        let (live, r, tr) = walk_once(&ft, &pkt, in_port, Mode::live(None));
                        prop_assert_eq!(&r, &want, "end, live");
                        prop_assert_eq!(&live.out, &menv.out, "outputs, live");
                        prop_assert_eq!(&live.learned, &menv.learned, "learned, live");
                        SEEN[0].fetch_add(1, Relaxed);
                        SEEN[2].fetch_add(!menv.out.is_empty() as u64, Relaxed);
                        SEEN[4].fetch_add(tr.is_some_and(|t| t.deps & !1 != 0) as u64, Relaxed);
                        // Through the cache: replay when an entry is still valid.
                        let pk = Key::extract(&pkt, in_port).pkt();
                        let stale = xlate::stale_epochs(&ft);
                        let cached = cache.get(&pk).filter(|(t, e)| *e == ft.epoch() || t.valid(&stale, *e)).map(|(t, _)| *t);
                        match cached {
                            Some(t) => {
                                SEEN[1].fetch_add(1, Relaxed);
                                let (rep, r2, _) = walk_once(&ft, &pkt, in_port, Mode::Replay { trace: &t, pos: 0 });
                                prop_assert_eq!(&r2, &want, "end, replayed");
                                prop_assert_eq!(&rep.out, &menv.out, "outputs, replayed");
                                prop_assert_eq!(&rep.learned, &menv.learned, "learned, replayed");
                            }
                            None => {
                                if let Some(t) = tr.filter(|t| t.cacheable()) {
                                    cache.insert(pk, (t, ft.epoch()));
                                }
                            }
                        }
                        learned.extend(menv.learned);
                    }
                    for r in learned {
                        let changed = ft.learn(r.clone(), 5).unwrap();
                        SEEN[3].fetch_add(changed as u64, Relaxed);
                        model.add(&r);
                    }
                }
            }
        }
    }
}

/// The random workload is not trivial (run in the same test, so the
/// counters are filled).
#[test]
fn pipeline_workload_is_meaningful() {
    walks_and_cache_agree_with_the_model();
    let s: Vec<u64> = SEEN.iter().map(|c| c.load(Relaxed)).collect();
    let (walks, replays, outputs, learned, deep) = (s[0], s[1], s[2], s[3], s[4]);
    // Bounds well below what runs give (walks ~15k, replays ~6k, outputs
    // ~5k, learned ~300-600, deep ~4k; the cases are random per run).
    assert!(walks > 5_000, "{s:?}");
    assert!(replays * 10 > walks, "replays {s:?}");
    assert!(outputs * 6 > walks, "outputs {s:?}");
    assert!(learned > 100, "learned rules {s:?}");
    assert!(deep * 6 > walks, "walks beyond table 0 {s:?}");
}

#[test]
fn a_resubmit_loop_is_cut_at_the_limit() {
    let mut ft = FlowTable::new();
    ft.add_flow(Rule::parse("actions=output:2,resubmit(,0)").unwrap(), 0)
        .unwrap();
    let (env, r, _) = walk_once(&ft, &frame(1), 1, Mode::live(None));
    assert_eq!(r, Err(()));
    assert_eq!(env.out.len(), MAX_DEPTH as usize + 1);
    // A chain that goes forward ends, and a miss in a resubmit goes on.
    let mut ft = FlowTable::new();
    for s in [
        "actions=resubmit(,3),goto_table:1",
        "table=1,actions=load:4->NXM_NX_REG2[],goto_table:2",
        "table=2,reg2=4,actions=output:NXM_NX_REG2[0..15]",
    ] {
        ft.add_flow(Rule::parse(s).unwrap(), 0).unwrap();
    }
    let (env, r, tr) = walk_once(&ft, &frame(1), 1, Mode::live(None));
    assert_eq!((env.out, r), (vec![4], Ok(End::Done)));
    assert_eq!(tr.unwrap().deps, 0b1111, "tables 0..3 looked up");
    // resubmit(PORT,T): PORT for that lookup only; the rule it finds (and
    // the tables it goes to) sees the original in_port, as in Open vSwitch.
    let mut ft = FlowTable::new();
    for s in [
        "actions=resubmit(3,1)",
        "table=1,in_port=3,actions=output:NXM_OF_IN_PORT[],goto_table:2",
        "table=2,in_port=1,actions=output:9",
    ] {
        ft.add_flow(Rule::parse(s).unwrap(), 0).unwrap();
    }
    let (env, r, _) = walk_once(&ft, &frame(1), 1, Mode::live(None));
    assert_eq!((env.out, r), (vec![1, 9], Ok(End::Done)));
}

#[test]
fn tun_id_is_zero_on_arrival_and_later_tables_match_what_set_field_wrote() {
    // No tunnel ports: a frame arrives with tun_id 0, as one from a plain
    // port does in Open vSwitch; after that it is pipeline state like
    // metadata.
    let mut ft = FlowTable::new();
    for s in [
        "tun_id=0x5,actions=output:8",
        "priority=1,tun_id=0,actions=set_field:0x1234->tun_id,goto_table:1",
        "table=1,tunnel_id=0x34/0xff,actions=output:NXM_NX_TUN_ID[8..15],set_tunnel64:0x1234,goto_table:2",
        "table=1,priority=0,actions=output:9",
        "table=2,tun_id=0x1234,actions=load:0x6->NXM_NX_TUN_ID[0..3],move:NXM_NX_TUN_ID[0..3]->NXM_NX_REG0[0..3],output:NXM_NX_REG0[0..3]",
    ] {
        ft.add_flow(Rule::parse(s).unwrap(), 0).unwrap();
    }
    let (env, r, _) = walk_once(&ft, &frame(1), 1, Mode::live(None));
    assert_eq!((env.out, r), (vec![0x12, 6], Ok(End::Done)));
}
