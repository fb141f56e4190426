//! The requests of `linerate switch`'s control socket (one per line, see
//! [`crate::ctl`]), parsed before the switch acts on any of them, and
//! the switch's answers to them ([`SwitchCtl`]).

use super::actions::Meter;
use super::counters::{CacheCounters, PortCounters, SwitchCounters};
use super::group::Group;
use super::rule::{MatchSpec, Rule};
use super::table::{mono_ns, FlowCursor, FlowTable, TableHandle};
use crate::ctl::{Conn, Handler};
use serde_json::{json, Value};
use std::io::Write;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Instant;

/// One request line.
#[derive(Debug)]
pub enum Request {
    /// `add-flow RULE`
    AddFlow(Rule),
    /// `add-flows N`: N rule lines follow.
    AddFlows(usize),
    /// `del-flows [MATCH]`
    DelFlows(Option<MatchSpec>),
    /// `dump-flows [MATCH]`
    DumpFlows(Option<MatchSpec>),
    DumpPorts,
    DumpGroups,
    /// Per-table rules, lookups and matches.
    DumpTables,
    /// `add-group SPEC`
    AddGroup(Group),
    /// `add-meter SPEC`
    AddMeter(Meter),
    CacheStats,
}

/// The commands, for error messages.
pub const COMMANDS: &str =
    "add-flow, add-flows, del-flows, dump-flows, dump-ports, dump-groups, dump-tables, add-group, add-meter, cache-stats";

impl Request {
    /// Parse one request line; errors are one line.
    pub fn parse(line: &str) -> Result<Request, String> {
        let line = line.trim();
        let (cmd, arg) = line.split_once([' ', '\t']).unwrap_or((line, ""));
        let arg = arg.trim();
        let spec = |a: &str| -> Result<Option<MatchSpec>, String> {
            if a.is_empty() {
                Ok(None)
            } else {
                MatchSpec::parse(a).map(Some).map_err(|e| e.to_string())
            }
        };
        let none = |r: Request| -> Result<Request, String> {
            if arg.is_empty() {
                Ok(r)
            } else {
                Err(format!("{cmd} takes no argument"))
            }
        };
        match cmd {
            "add-flow" => Rule::parse(arg)
                .map(Request::AddFlow)
                .map_err(|e| e.to_string()),
            "add-flows" => arg.parse().map(Request::AddFlows).map_err(|_| {
                format!(
                    "add-flows '{}': expected the number of rule lines",
                    arg.escape_debug()
                )
            }),
            "del-flows" => spec(arg).map(Request::DelFlows),
            "dump-flows" => spec(arg).map(Request::DumpFlows),
            "dump-ports" => none(Request::DumpPorts),
            "dump-groups" => none(Request::DumpGroups),
            "dump-tables" => none(Request::DumpTables),
            "add-group" => Group::parse(arg).map(Request::AddGroup),
            "add-meter" => Meter::parse(arg).map(Request::AddMeter),
            "cache-stats" => none(Request::CacheStats),
            "" => Err("empty command".into()),
            _ => Err(format!(
                "unknown command '{}' ({COMMANDS})",
                cmd.escape_debug()
            )),
        }
    }
}

/// Arbitrary bytes as a request line: no panic, errors are one line.
pub fn fuzz(data: &[u8]) {
    crate::ctl::fuzz_requests(data, Request::parse);
}

/// What the control server and the switch's reporter read.
pub struct Shared {
    pub ctl: Arc<TableHandle>,
    /// (port number, URI, counters).
    pub ports: Vec<(u32, String, Arc<PortCounters>)>,
    pub cache: Arc<CacheCounters>,
    pub counters: Arc<SwitchCounters>,
    /// The controller port's: packet-ins handed to the OpenFlow channel
    /// (tx), refused by the rate or a full queue (tx_dropped).
    pub controller: Arc<PortCounters>,
    /// The ports' links (by index in `ports`).
    pub links: Arc<super::link::Links>,
}

/// Check, make room for and add `rules` to `t` (emptying `rules`). On an
/// error `t` may hold part of them: callers edit through
/// [`TableHandle::try_edit`], which then puts the table back.
fn add_batch(t: &mut FlowTable, rules: &mut Vec<Rule>, now: u64) -> Result<(), String> {
    for r in rules.iter() {
        // The rule quoted short: a rule of thousands of actions would make
        // a line of tens of kilobytes.
        t.check(r)
            .map_err(|e| format!("rule {}: {e}", super::rule::q(&r.to_string())))?;
    }
    if rules.len() > 1 {
        t.reserve_for(rules.iter());
    }
    for r in rules.drain(..) {
        t.add_flow(r, now)?;
    }
    Ok(())
}

/// Add `rules` all or nothing, as one new table version.
fn add_rules(ctl: &TableHandle, mut rules: Vec<Rule>) -> Result<usize, String> {
    let n = rules.len();
    ctl.try_edit(|t| add_batch(t, &mut rules, mono_ns()))
        .map(|()| n)
}

/// Rules parsed per batch by `add-flows`: a large request is parsed and
/// added in pieces this size, so no vector of a million parsed rules is
/// built (and page-faulted in) first.
const ADD_CHUNK: usize = 4096;

/// Most rule lines one `add-flows` request may carry.
const MAX_ADD_FLOWS: usize = 16 << 20;

/// `add-flows N`: read `N` rule lines (from `next_line`) and parse them, in
/// chunks, with no lock held: a slow client holds up nothing. Then add them
/// all or nothing as one new table version, the only step that takes the
/// table's edit lock. Every line is read even after an error (the protocol
/// continues after them). Returns (rules added, seconds spent receiving
/// and parsing).
fn add_flows_stream(
    ctl: &TableHandle,
    mut next_line: impl FnMut() -> Result<Option<String>, String>,
    n: usize,
) -> Result<(usize, f64), String> {
    if n > MAX_ADD_FLOWS {
        return Err(format!(
            "add-flows {n}: at most {MAX_ADD_FLOWS} rules per request"
        ));
    }
    let t = Instant::now();
    let mut chunks: Vec<Vec<Rule>> = Vec::new();
    let mut chunk = Vec::with_capacity(ADD_CHUNK.min(n));
    let mut err = None;
    for i in 0..n {
        let Some(l) = next_line()? else {
            return Err(format!("add-flows: got {i} of {n} rule lines"));
        };
        if err.is_some() {
            continue;
        }
        match Rule::parse(l.trim()) {
            Ok(x) => chunk.push(x),
            Err(e) => err = Some(format!("line {}: {e}", i + 1)),
        }
        if chunk.len() == ADD_CHUNK {
            chunks.push(std::mem::replace(
                &mut chunk,
                Vec::with_capacity(ADD_CHUNK.min(n - i)),
            ));
        }
    }
    if let Some(e) = err {
        return Err(e);
    }
    chunks.push(chunk);
    let parse = t.elapsed().as_secs_f64();
    let now = mono_ns();
    ctl.try_edit(|t| {
        for mut c in chunks {
            add_batch(t, &mut c, now)?;
        }
        Ok((n, parse))
    })
}

/// The exact-match cache's and the classifier's counters (`cache-stats`);
/// with `--offload xdp`, XDP's and the offload's (`offload`).
pub fn cache_json(sh: &Shared) -> Value {
    let mut v = cache_json_dp(sh);
    if let Some(o) = sh.ctl.offload() {
        v["offload"] = json!({"xdp": o.xdp_stats(), "entries": o.counters_json()});
    }
    v
}

fn cache_json_dp(sh: &Shared) -> Value {
    let c = &sh.cache;
    let (hits, misses) = (c.emc_hits.load(Relaxed), c.emc_misses.load(Relaxed));
    let lookups = c.cls_lookups.load(Relaxed);
    let searched = c.subtables_searched.load(Relaxed);
    let (rules, subtables) = {
        let t = sh.ctl.current();
        (t.len(), t.classifier().subtables())
    };
    json!({
        "emc_hits": hits, "emc_misses": misses,
        "emc_hit_rate": if hits + misses > 0 { hits as f64 / (hits + misses) as f64 } else { 0.0 },
        "emc_inserts": c.emc_inserts.load(Relaxed),
        "emc_skipped_inserts": c.emc_skipped_inserts.load(Relaxed),
        "emc_bypassed": c.emc_bypassed.load(Relaxed),
        "learn_requests": c.learn_requests.load(Relaxed),
        "learn_queue_full": c.learn_queue_full.load(Relaxed),
        "learn_refused": c.learn_refused.load(Relaxed),
        "packet_outs": c.packet_outs.load(Relaxed),
        "packet_outs_dropped": c.packet_outs_dropped.load(Relaxed),
        "megaflow_hits": c.mega_hits.load(Relaxed),
        "megaflow_misses": c.mega_misses.load(Relaxed),
        "megaflows": c.megaflows.load(Relaxed),
        "megaflow_masks": c.mega_masks.load(Relaxed),
        "classifier_lookups": lookups, "classifier_matched": c.cls_matched.load(Relaxed),
        "subtables_searched": searched,
        "subtables_per_lookup": if lookups > 0 { searched as f64 / lookups as f64 } else { 0.0 },
        "rules": rules, "subtables": subtables,
    })
}

/// Per-port packet and byte counters (`dump-ports`).
pub fn ports_json(sh: &Shared) -> Value {
    sh.ports
        .iter()
        .enumerate()
        .map(|(i, (n, uri, c))| {
            json!({"port": n, "uri": uri,
                "link": if sh.links.is_up(i) { "up" } else { "down" },
                "rx_packets": c.rx_packets.load(Relaxed), "rx_bytes": c.rx_bytes.load(Relaxed),
                "tx_packets": c.tx_packets.load(Relaxed), "tx_bytes": c.tx_bytes.load(Relaxed),
                "tx_dropped": c.tx_dropped.load(Relaxed)})
        })
        .collect()
}

/// The switch's answers on its control socket: one JSON object per request,
/// with `"ok"`.
pub struct SwitchCtl(pub Arc<Shared>);

impl Handler for SwitchCtl {
    fn handle(&self, line: &str, conn: &mut Conn) -> String {
        let sh = &self.0;
        match Request::parse(line) {
            // Dumps are written as they are made (never built whole): a
            // million rules to a client that reads slowly cost the
            // connection's buffer, not a copy of the table.
            Ok(Request::DumpFlows(spec)) => {
                let _ = conn.stream_reply(|w| dump_flows(sh, spec.as_ref(), w));
                String::new()
            }
            Ok(Request::DumpGroups) => {
                let _ = conn.stream_reply(|w| dump_groups(sh, w));
                String::new()
            }
            Ok(req) => match handle(req, conn, sh) {
                Ok(mut v) => {
                    v["ok"] = json!(true);
                    v.to_string()
                }
                Err(e) => self.error(&e),
            },
            Err(e) => self.error(&e),
        }
    }
    fn error(&self, msg: &str) -> String {
        json!({"ok": false, "error": msg}).to_string()
    }
}

/// `dump-flows [MATCH]`: `{"ok":true,"now_ns":N,"rules":[...]}`, one object
/// per rule (its `ovs-ofctl` line, table, priority, counters, creation and
/// hit times), in table then id order; [`request`] gives the client the
/// `flows` lines and `stats` objects sorted as `ovs-ofctl` sorts them.
fn dump_flows(sh: &Shared, spec: Option<&MatchSpec>, w: &mut dyn Write) -> std::io::Result<()> {
    sh.ctl.sync_counters();
    let now = mono_ns();
    write!(w, "{{\"ok\":true,\"now_ns\":{now},\"rules\":[")?;
    let mut cur = FlowCursor::new(spec);
    let mut first = true;
    // The current version at each step: no version is held while the
    // client reads.
    while let Some(e) = cur.next(&sh.ctl.current()) {
        if !first {
            w.write_all(b",")?;
        }
        first = false;
        let st = &e.stats;
        serde_json::to_writer(
            &mut *w,
            &json!({
                "flow": FlowTable::dump_line(&e, now),
                "table": e.rule.table,
                "priority": e.rule.priority,
                "packets": st.packets(),
                "bytes": st.bytes(),
                "created_ns": e.created_ns,
                "first_hit_ns": st.first_hit_ns.load(Relaxed),
                "last_hit_ns": st.last_hit_ns.load(Relaxed),
                "learned": e.learned,
            }),
        )?;
    }
    w.write_all(b"]}")
}

/// `dump-groups`: `{"ok":true,"groups":[LINE,...]}` by group id, one group
/// at a time from the current version.
fn dump_groups(sh: &Shared, w: &mut dyn Write) -> std::io::Result<()> {
    w.write_all(b"{\"ok\":true,\"groups\":[")?;
    let ids = sh.ctl.current().group_ids();
    let mut first = true;
    for id in ids {
        let Some(line) = sh.ctl.current().group(id).map(|g| g.to_string()) else {
            continue;
        };
        if !first {
            w.write_all(b",")?;
        }
        first = false;
        serde_json::to_writer(&mut *w, &line)?;
    }
    w.write_all(b"]}")
}

/// Per table: rules, bounds, lookups, matches, evictions and refusals
/// (`dump-tables`, the final account).
pub fn tables_json(sh: &Shared) -> Value {
    let t = sh.ctl.current();
    let v: Vec<Value> = t
        .tables()
        .filter(|(i, tb)| {
            *i == 0
                || !tb.classifier().is_empty()
                || tb.stats.lookups.load(Relaxed) > 0
                || tb.stats.refused_full.load(Relaxed) > 0
        })
        .map(|(i, tb)| {
            let lim = t.limits().table(i);
            json!({"table": i, "rules": tb.classifier().len(),
                "subtables": tb.classifier().subtables(),
                "lookups": tb.stats.lookups.load(Relaxed),
                "matches": tb.stats.matches.load(Relaxed),
                "flow_limit": (lim.flow_limit != usize::MAX).then_some(lim.flow_limit),
                "overflow_policy": lim.overflow.as_str(),
                "evicted": tb.stats.evicted.load(Relaxed),
                "refused_full": tb.stats.refused_full.load(Relaxed)})
        })
        .collect();
    json!(v)
}

/// Every request but the dumps (streamed by [`SwitchCtl::handle`]).
fn handle(req: Request, conn: &mut Conn, sh: &Shared) -> Result<Value, String> {
    let ctl = &sh.ctl;
    match req {
        Request::AddFlow(rule) => {
            add_rules(ctl, vec![rule])?;
            Ok(json!({"added": 1}))
        }
        Request::AddFlows(n) => {
            let t = Instant::now();
            let (k, parse_seconds) = add_flows_stream(ctl, || conn.read_line(), n)?;
            Ok(
                json!({"added": k, "seconds": t.elapsed().as_secs_f64() - parse_seconds,
                      "receive_parse_seconds": parse_seconds}),
            )
        }
        Request::DelFlows(spec) => {
            let n = ctl.edit(|t| t.del_flows(spec.as_ref()));
            Ok(json!({"deleted": n}))
        }
        Request::DumpPorts => Ok(json!({"ports": ports_json(sh)})),
        Request::DumpTables => {
            let max = ctl.current().limits().max_flows;
            Ok(json!({"tables": tables_json(sh), "max_flows": max}))
        }
        Request::AddGroup(g) => {
            ctl.try_edit(|t| t.add_group(g))?;
            Ok(json!({}))
        }
        Request::AddMeter(m) => {
            ctl.try_edit(|t| t.add_meter(m))?;
            Ok(json!({}))
        }
        Request::CacheStats => Ok(cache_json(sh)),
        Request::DumpFlows(_) | Request::DumpGroups => {
            Err("internal: dumps are streamed by the handler".into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_parse_and_errors_are_one_line() {
        assert!(matches!(
            Request::parse("add-flow priority=1,actions=drop"),
            Ok(Request::AddFlow(_))
        ));
        assert!(matches!(
            Request::parse("add-flows 3"),
            Ok(Request::AddFlows(3))
        ));
        assert!(matches!(
            Request::parse("dump-flows"),
            Ok(Request::DumpFlows(None))
        ));
        assert!(matches!(
            Request::parse("del-flows in_port=1"),
            Ok(Request::DelFlows(Some(_)))
        ));
        assert!(matches!(
            Request::parse(" cache-stats "),
            Ok(Request::CacheStats)
        ));
        for (bad, want) in [
            ("add-flows x\ty", "expected the number"),
            ("nope\u{7}", "unknown command 'nope\\u{7}'"),
            ("dump-ports 1", "takes no argument"),
            ("", "empty command"),
        ] {
            let e = Request::parse(bad).unwrap_err();
            assert!(e.contains(want) && !e.contains('\n'), "{bad:?}: {e}");
        }
        fuzz(b"add-flow \n\ndump-flows zz=1\nadd-meter meter=1\n");
    }
}

#[cfg(test)]
mod stream_tests {
    use super::*;
    use std::io::{BufRead, Cursor};

    /// The lines of `r`, as the control socket hands them out.
    fn lines(r: &mut Cursor<String>) -> impl FnMut() -> Result<Option<String>, String> + '_ {
        move || {
            let mut l = String::new();
            match r.read_line(&mut l) {
                Ok(0) => Ok(None),
                Ok(_) => Ok(Some(l.trim_end_matches('\n').to_string())),
                Err(e) => Err(e.to_string()),
            }
        }
    }

    fn rules(n: usize, bad_at: Option<(usize, &str)>) -> String {
        let mut s = String::new();
        for i in 0..n {
            match bad_at {
                Some((b, text)) if b == i => s.push_str(text),
                _ => s.push_str(&format!(
                    "priority=10,udp,nw_dst=10.0.{}.{},tp_dst=9,actions=output:2",
                    (i >> 8) & 255,
                    i & 255
                )),
            }
            s.push('\n');
        }
        s.push_str("after\n");
        s
    }

    fn control() -> Arc<TableHandle> {
        let mut t = FlowTable::new();
        t.add_flow(Rule::parse("priority=1,actions=drop").unwrap(), 0)
            .unwrap();
        TableHandle::new(t)
    }

    /// What the reader holds after the request: the next command line.
    fn rest(r: &mut impl BufRead) -> String {
        let mut l = String::new();
        r.read_line(&mut l).unwrap();
        l
    }

    #[test]
    fn add_flows_adds_every_chunk_as_one_version() {
        let ctl = control();
        let n = ADD_CHUNK * 2 + 5;
        let mut r = Cursor::new(rules(n, None));
        let (k, _) = add_flows_stream(&ctl, lines(&mut r), n).unwrap();
        assert_eq!(k, n);
        assert_eq!(ctl.current().len(), n + 1);
        assert_eq!(rest(&mut r), "after\n");
    }

    #[test]
    fn add_flows_is_all_or_nothing() {
        // A parse error, and a rule the table refuses in a later chunk
        // (after whole chunks went into the control copy): neither the
        // published table nor the control copy keeps any of the request,
        // and every line of it is consumed.
        for (at, bad, want) in [
            (3, "priority=5,udp,tp_dst=99999,actions=output:2", "line 4"),
            (ADD_CHUNK + 7, "priority=5,ip,actions=group:7", "group 7"),
        ] {
            let ctl = control();
            let n = ADD_CHUNK * 2;
            let mut r = Cursor::new(rules(n, Some((at, bad))));
            let e = add_flows_stream(&ctl, lines(&mut r), n).unwrap_err();
            assert!(e.contains(want), "{e}");
            assert_eq!(rest(&mut r), "after\n", "{want}");
            assert_eq!(ctl.current().len(), 1, "{want}: published");
            assert_eq!(ctl.read(|t| t.len()), 1, "{want}: control copy");
        }
    }

    /// dump-flows and dump-groups over a real socket: streamed by the
    /// switch, and what `request` gives the client is the flows by table
    /// and highest priority first with their counters beside them; a
    /// client that reads slowly holds up only itself.
    #[test]
    fn dumps_are_streamed_and_sorted_for_the_client() {
        use crate::ctl::{Limits, Listener, Server};
        let ctl = control();
        let n = 30_000usize;
        let mut r = Cursor::new(rules(n, None));
        add_flows_stream(&ctl, lines(&mut r), n).unwrap();
        ctl.try_edit(|t| {
            t.add_flow(Rule::parse("table=3,priority=7,actions=drop").unwrap(), 0)?;
            t.add_group(
                Group::parse("group_id=4,type=all,bucket=output:1,bucket=output:2").unwrap(),
            )
        })
        .unwrap();
        let sh = Arc::new(Shared {
            ctl,
            ports: Vec::new(),
            cache: Default::default(),
            counters: Default::default(),
            controller: Default::default(),
            links: Default::default(),
        });
        let path = std::env::temp_dir().join(format!("lr-ctl-dump-{}.sock", std::process::id()));
        let l = Listener::bind(&path).unwrap();
        let srv = Server::start(l, Arc::new(SwitchCtl(sh.clone())), Limits::default()).unwrap();
        // A client that asks for the dump and reads nothing for a while.
        let mut slow = std::os::unix::net::UnixStream::connect(&path).unwrap();
        slow.write_all(b"dump-flows\n").unwrap();
        let v = request(&path, "dump-flows", None).unwrap();
        let flows = v["flows"].as_array().unwrap();
        let stats = v["stats"].as_array().unwrap();
        assert_eq!((flows.len(), stats.len()), (n + 2, n + 2));
        assert!(v.get("rules").is_none());
        let key = |s: &Value| {
            (
                s["priority"].as_u64().unwrap(),
                s["learned"].as_bool().unwrap(),
            )
        };
        // Table 0 first (priorities 10 then 1), table 3 last.
        assert_eq!(key(&stats[0]), (10, false));
        assert_eq!(key(&stats[n]), (1, false));
        assert!(flows[n + 1].as_str().unwrap().contains("table=3"));
        assert!(flows[0].as_str().unwrap().contains("priority=10,udp"));
        let g = request(&path, "dump-groups", None).unwrap();
        assert_eq!(
            g["groups"],
            json!(["group_id=4,type=all,bucket=actions=output:1,bucket=actions=output:2"])
        );
        // The slow client gets its whole dump when it reads.
        let mut line = String::new();
        std::io::BufReader::new(&slow).read_line(&mut line).unwrap();
        let d: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(d["rules"].as_array().unwrap().len(), n + 2);
        srv.stop();
    }

    #[test]
    fn add_flows_short_stream_is_an_error() {
        let ctl = control();
        let mut r = Cursor::new("priority=10,ip,actions=drop\n".to_string());
        let e = add_flows_stream(&ctl, lines(&mut r), 3).unwrap_err();
        assert!(e.contains("got 1 of 3"), "{e}");
        assert_eq!(ctl.read(|t| t.len()), 1);
    }
}

/// The client side (`linerate switch-ctl`): send `command` (with its
/// argument) to the switch at `socket` and read the one-line JSON reply;
/// a reply with `"ok": false` is an error. `add-flows FILE` streams the
/// file's rule lines: they are counted, then written straight from the file
/// text through a buffer, with no copy of a million-rule file built (each
/// copy is ~70 MB to page-fault in, on the core the switch's control thread
/// needs).
pub fn request(
    socket: &std::path::Path,
    command: &str,
    arg: Option<&str>,
) -> Result<Value, String> {
    use std::io::{BufRead, BufReader, Write};
    let s = std::os::unix::net::UnixStream::connect(socket)
        .map_err(|e| format!("control socket '{}': {e}", socket.display()))?;
    let wrote = |e: std::io::Error| format!("writing to '{}': {e}", socket.display());
    s.set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .map_err(wrote)?;
    if command == "add-flows" {
        let f = arg.ok_or("add-flows needs a FILE")?;
        let text = std::fs::read_to_string(f).map_err(|e| format!("add-flows file '{f}': {e}"))?;
        let n = super::rule::rule_lines(&text).count();
        let mut w = std::io::BufWriter::with_capacity(1 << 16, &s);
        writeln!(w, "add-flows {n}").map_err(wrote)?;
        for (_, l) in super::rule::rule_lines(&text) {
            w.write_all(l.as_bytes()).map_err(wrote)?;
            w.write_all(b"\n").map_err(wrote)?;
        }
        w.flush().map_err(wrote)?;
    } else {
        let mut req = command.to_string();
        if let Some(x) = arg {
            if x.contains('\n') {
                return Err("argument contains a newline".into());
            }
            req.push(' ');
            req.push_str(x);
        }
        req.push('\n');
        (&s).write_all(req.as_bytes()).map_err(wrote)?;
    }
    let mut reply = String::new();
    BufReader::new(&s)
        .read_line(&mut reply)
        .map_err(|e| format!("reading from '{}': {e}", socket.display()))?;
    let mut v: Value = serde_json::from_str(reply.trim()).map_err(|_| {
        let r = reply.trim();
        let cut: String = r.chars().take(200).collect();
        format!("bad reply from '{}': '{cut}'", socket.display())
    })?;
    if v["ok"] != json!(true) {
        return Err(format!(
            "{command}: {}",
            v["error"].as_str().unwrap_or("failed")
        ));
    }
    flows_sorted(&mut v);
    Ok(v)
}

/// A `dump-flows` reply's `rules` (streamed by the switch in table and id
/// order) as `flows` (the lines) and `stats` (the counters), by table and
/// then highest priority first, as `ovs-ofctl dump-flows --rsort` shows
/// them (ties: the switch's order).
fn flows_sorted(v: &mut Value) {
    let Some(Value::Array(mut rules)) = v.as_object_mut().and_then(|o| o.remove("rules")) else {
        return;
    };
    let key = |r: &Value| {
        (
            r["table"].as_u64().unwrap_or(0),
            std::cmp::Reverse(r["priority"].as_u64().unwrap_or(0)),
        )
    };
    rules.sort_by_key(key);
    let mut flows = Vec::with_capacity(rules.len());
    for r in &mut rules {
        if let Some(o) = r.as_object_mut() {
            flows.push(o.remove("flow").unwrap_or(Value::Null));
            o.remove("table");
        }
    }
    v["flows"] = Value::Array(flows);
    v["stats"] = Value::Array(rules);
}
