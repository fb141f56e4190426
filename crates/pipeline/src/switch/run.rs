//! A whole `linerate switch` run: the table loaded from the rule files,
//! the ports opened, the datapath in its own thread, the control socket,
//! a once-a-second tick (table timeouts, the rates) off the datapath, and
//! the final account.

use super::actions::Meter;
use super::counters::{CacheCounters, SwitchCyclesSnapshot};
use super::ctl::{cache_json, ports_json, tables_json, Shared, SwitchCtl};
use super::datapath::{Datapath, Polling, SwitchPort};
use super::group::Group;
use super::learner::LearnReq;
use super::openflow::controllers::{Controllers, FailMode, FailOpen};
use super::rule::rule_lines;
use super::table::{mono_ns, FlowTable, TableHandle};
use super::Rule;
use crate::ctl::{Handler, Limits, Listener, Server};
use crate::event::{Account, Report};
use crate::metrics::{Exposition, Publish};
use crate::poll::Watch;
use linerate_io::time::tsc_hz;
use linerate_io::OpenOptions;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The rule files of a switch (each optional), and the bounds its tables
/// keep.
#[derive(Clone, Debug, Default)]
pub struct RuleFiles {
    pub flows: Option<PathBuf>,
    pub groups: Option<PathBuf>,
    pub meters: Option<PathBuf>,
    pub limits: super::table::Limits,
}

impl RuleFiles {
    /// The table: groups and meters first (rules refer to them). Errors
    /// name the file and line (`flows.txt:3: unknown action 'x'`).
    pub fn load(&self) -> Result<FlowTable, String> {
        fn each(
            p: &Path,
            what: &str,
            f: &mut dyn FnMut(&str) -> Result<(), String>,
        ) -> Result<(), String> {
            let s = std::fs::read_to_string(p)
                .map_err(|e| format!("{what} file '{}': {e}", p.display()))?;
            for (ln, l) in rule_lines(&s) {
                f(l).map_err(|e| format!("{}:{ln}: {e}", p.display()))?;
            }
            Ok(())
        }
        let mut table = FlowTable::new();
        table.set_limits(self.limits.clone());
        if let Some(p) = &self.groups {
            each(p, "--groups", &mut |l| {
                table.add_group(Group::parse(l)?)?;
                Ok(())
            })?;
        }
        if let Some(p) = &self.meters {
            each(p, "--meters", &mut |l| {
                table.add_meter(Meter::parse(l)?)?;
                Ok(())
            })?;
        }
        if let Some(p) = &self.flows {
            let now = mono_ns();
            each(p, "--flows", &mut |l| {
                let r = Rule::parse(l).map_err(|e| e.to_string())?;
                table
                    .add_flow(r, now)
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            })?;
        }
        Ok(table)
    }
}

/// Are there controllers the switch connects to (not only sockets it
/// listens on)?
fn has_primaries(cfg: &SwitchConfig) -> bool {
    cfg.openflow.iter().any(|c| !c.endpoint.listens())
}

/// `--fail-mode standalone` with no controller to connect to: Open
/// vSwitch's `priority=0,actions=NORMAL` in table 0, unless table 0 has a
/// priority-0 rule matching everything already. What was done, in a line.
fn standalone_rule(cfg: &SwitchConfig, ctl: &TableHandle) -> Result<Option<String>, String> {
    if cfg.fail_mode != FailMode::Standalone || has_primaries(cfg) {
        return Ok(None);
    }
    let r = Rule::parse("priority=0,actions=NORMAL").map_err(|e| e.to_string())?;
    let added = ctl.edit(|t| {
        if t.has(&r) {
            return Ok(false);
        }
        t.add_flow(r, mono_ns()).map(|_| true)
    })?;
    Ok(added.then(|| {
        "fail mode standalone, no controller to connect to: priority=0,actions=NORMAL in table 0"
            .to_string()
    }))
}

/// `--fail-mode standalone` with controllers to connect to: fail-open
/// after 3 of their inactivity probes without one connected.
fn fail_open(cfg: &SwitchConfig) -> Option<FailOpen> {
    if cfg.fail_mode != FailMode::Standalone || !has_primaries(cfg) {
        return None;
    }
    let probe = cfg
        .openflow
        .iter()
        .filter(|c| !c.endpoint.listens())
        .filter_map(|c| c.inactivity_probe)
        .max();
    Some(FailOpen::new(probe, std::time::Instant::now()))
}

/// A switch: its ports (OpenFlow number, URI), rules and settings.
#[derive(Clone, Debug)]
pub struct SwitchConfig {
    pub ports: Vec<(u32, String)>,
    pub rules: RuleFiles,
    pub ctl: Option<PathBuf>,
    /// The OpenFlow 1.3 channels (`punix:PATH`, `pssl:6653`, `ssl:IP`, ...).
    pub openflow: Vec<super::openflow::Config>,
    pub cpu: Option<usize>,
    pub open: OpenOptions,
    pub polling: Polling,
    pub emc: bool,
    pub profile: bool,
    pub duration: Option<f64>,
    /// The packet-in rate limit (`--controller-rate`, `--controller-burst`).
    pub controller: super::controller::PinLimit,
    /// `--fail-mode`.
    pub fail_mode: super::openflow::controllers::FailMode,
    /// `--offload xdp`: forward cached flows in XDP (afxdp ports only).
    pub offload: bool,
    /// `--offload-cpu`: XDP's forwarding of those flows on this CPU.
    pub offload_cpu: Option<u32>,
    /// `--offload-entries`: at most this many flows in XDP
    /// (1..=[`super::offload::MAX_ENTRIES`]).
    pub offload_entries: usize,
}

/// What the caller hears while the switch runs: what was opened (a port,
/// the control socket), and once a second the rates and cache figures of
/// the last interval.
pub type Event<'a> = crate::event::Event<'a, Tick>;

/// One second of a running switch.
pub struct Tick {
    pub t: f64,
    pub rx_pps: f64,
    pub fwd_pps: f64,
    /// Drops in the interval by reason (only those that happened).
    pub drops: Vec<(&'static str, u64)>,
    pub rules: usize,
    pub emc_hit_rate: f64,
    pub subtables_per_lookup: f64,
    /// The switch's state, read by the metrics view.
    pub shared: Arc<Shared>,
    /// The OpenFlow channels' controllers (with `--openflow`).
    pub controllers: Option<Arc<super::openflow::controllers::Controllers>>,
}

/// The final account.
pub struct Finished {
    pub elapsed_s: f64,
    pub shared: Arc<Shared>,
    pub cycles: SwitchCyclesSnapshot,
    pub profile: bool,
    /// The datapath's error (a port that failed), if one ended it.
    pub error: Option<String>,
    /// The OpenFlow channel's counters (its sessions', its connections'),
    /// when it ran.
    pub openflow: Option<(
        Arc<super::openflow::msg::ChannelStats>,
        Arc<super::openflow::channel::ConnStats>,
        Arc<super::openflow::controllers::Controllers>,
    )>,
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

/// (EMC hits, classifier lookups = EMC misses, subtables searched).
fn cache_now(c: &CacheCounters) -> [u64; 3] {
    [
        c.emc_hits.load(Relaxed),
        c.cls_lookups.load(Relaxed),
        c.subtables_searched.load(Relaxed),
    ]
}

/// `learn(...)` requests the datapath may have in flight to the learning
/// thread (more are counted as `learn_queue_full` and asked again).
const LEARN_QUEUE: usize = 4096;

/// Learned rules wait at least this long in the control copy before they
/// are published (a new version of the table) ...
const LEARN_PUBLISH_MIN: Duration = Duration::from_millis(10);
/// ... and at most this long.
const LEARN_PUBLISH_MAX: Duration = Duration::from_secs(1);

/// The learning thread: the datapath's `learn(...)` requests become rules
/// in the control copy as they come; they are published when the last
/// publication is ten times its own cost old (at least
/// [`LEARN_PUBLISH_MIN`], at most [`LEARN_PUBLISH_MAX`]). A publication
/// copies the whole table, so at most a tenth of this thread's time goes
/// to copies however fast the wire makes it learn (random source MACs at
/// line rate): learning costs the rules it adds, not the table's size
/// times the batches. A full table evicts or refuses by its policy.
fn learn_loop(rx: &std::sync::mpsc::Receiver<LearnReq>, ctl: &TableHandle, stats: &CacheCounters) {
    use std::sync::mpsc::RecvTimeoutError;
    let mut last = Instant::now();
    let mut gap = LEARN_PUBLISH_MIN;
    loop {
        let due = |last: Instant, gap: Duration| gap.saturating_sub(last.elapsed());
        let first = match rx.recv_timeout(due(last, gap).max(Duration::from_millis(1))) {
            Ok(r) => Some(r),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => {
                ctl.publish_waiting();
                return;
            }
        };
        let t = Instant::now();
        let published = match first {
            Some(first) => {
                let more = std::iter::from_fn(|| rx.try_recv().ok()).take(LEARN_QUEUE);
                let rules = std::iter::once(first)
                    .chain(more)
                    .map(|r| r.spec.rule(&r.key));
                let l = ctl.learn(rules, mono_ns(), due(last, gap).is_zero());
                stats.learn_refused.fetch_add(l.refused as u64, Relaxed);
                l.published
            }
            None => ctl.publish_waiting(),
        };
        if published {
            gap = (t.elapsed() * 10).clamp(LEARN_PUBLISH_MIN, LEARN_PUBLISH_MAX);
            last = Instant::now();
        }
    }
}

/// Run the switch until `stop`, its duration or the end of finite sources.
/// Look at the ports' links every [`super::link::LOOK_EVERY`] until `stop`;
/// each change goes to the controllers as a `PORT_STATUS`.
fn link_loop(sh: &Shared, ctrls: Option<&Controllers>, stop: &AtomicBool) {
    while !stop.load(Ordering::SeqCst) {
        std::thread::sleep(super::link::LOOK_EVERY);
        for (i, up) in sh.links.look() {
            if let (Some(c), Some((n, uri, _))) = (ctrls, sh.ports.get(i)) {
                c.port_status(*n, uri, up);
            }
        }
    }
}

pub fn run(
    cfg: &SwitchConfig,
    stop: &Arc<AtomicBool>,
    on: &mut dyn FnMut(Event<'_>),
) -> Result<Finished, String> {
    let ctl = TableHandle::new(cfg.rules.load()?);
    if let Some(line) = standalone_rule(cfg, &ctl)? {
        on(Event::Opened(line));
    }
    let mut ports = Vec::new();
    let mut open = cfg.open.clone();
    open.switch_offload = cfg.offload;
    let mut xdp_ports = Vec::new();
    for (n, uri) in &cfg.ports {
        let p = linerate_io::open(uri, &open).map_err(|e| format!("port {n}: {e}"))?;
        if cfg.offload {
            let maps = p
                .info
                .ifindex
                .filter(|_| p.info.kind == "afxdp")
                .and_then(|i| linerate_io::afxdp::offload_maps(i).map(|m| (i, m)));
            let Some((ifindex, maps)) = maps else {
                return Err(format!(
                    "port {n}: --offload xdp needs afxdp: ports ('{uri}' is {})",
                    p.info.kind
                ));
            };
            // One XDP program per interface keys frames with one in_port.
            if let Some((m, _, _)) = xdp_ports.iter().find(|(_, i, _)| *i == ifindex) {
                return Err(format!(
                    "port {n}: --offload xdp needs one port per interface ('{uri}' is on port {m}'s)"
                ));
            }
            xdp_ports.push((*n, ifindex, maps));
        }
        on(Event::Opened(format!(
            "port {n}: {} ({}: {})",
            p.info.uri, p.info.kind, p.info.detail
        )));
        ports.push(SwitchPort::new(*n, uri, p.rx, p.tx));
    }
    keep_freed_memory();
    let mut dp = Datapath::new(ports, ctl.clone(), cfg.open.batch, cfg.emc);
    // `--offload xdp`: the offloader installs what the datapath offers
    // (it ends when the datapath drops its sender).
    let offloader = if cfg.offload {
        let o = Arc::new(super::offload::Offload::new(
            xdp_ports,
            cfg.offload_cpu,
            cfg.offload_entries,
        )?);
        ctl.set_offload(o.clone());
        let (tx, rx) = std::sync::mpsc::sync_channel(super::offload::OFFER_QUEUE);
        dp.set_offerer(super::offload::Offerer::new(tx, o.clone()));
        let c = ctl.clone();
        on(Event::Opened(format!(
            "offload: xdp, at most {} flows in XDP{} (on veth, a peer takes redirected frames only with NAPI: GRO on or an XDP program of its own)",
            cfg.offload_entries,
            match cfg.offload_cpu {
                Some(c) => format!(", forwarded on CPU {c}"),
                None => String::new(),
            }
        )));
        Some(
            std::thread::Builder::new()
                .name("linerate-offload".into())
                .spawn(move || o.serve(&c, rx))
                .map_err(|e| format!("spawning the offloader: {e}"))?,
        )
    } else {
        None
    };
    let shared = Arc::new(Shared {
        ctl: ctl.clone(),
        ports: dp
            .ports
            .iter()
            .map(|p| (p.no, p.uri.clone(), p.counters.clone()))
            .collect(),
        cache: dp.cache.clone(),
        counters: dp.counters.clone(),
        controller: Default::default(),
        links: dp.links.clone(),
    });
    let cycles = dp.cycles.clone();
    // `learn(...)`: the datapath hands requests over, this thread builds
    // and adds the rules (it ends when the datapath drops its sender).
    let (learn_tx, learn_rx) = std::sync::mpsc::sync_channel::<LearnReq>(LEARN_QUEUE);
    dp.set_learner(learn_tx);
    let learn_ctl = ctl.clone();
    let learn_stats = dp.cache.clone();
    let learner = std::thread::Builder::new()
        .name("linerate-learn".into())
        .spawn(move || learn_loop(&learn_rx, &learn_ctl, &learn_stats))
        .map_err(|e| format!("spawning the learning thread: {e}"))?;
    // The OpenFlow channels (a controller to connect to, a socket for
    // ovs-ofctl, ...), sharing one controller port: packet-ins out (one
    // thread serves them to the connections), packet-outs in.
    let mut channels = Vec::new();
    let mut pins = None;
    let mut common = super::openflow::channel::Common::default();
    if !cfg.openflow.is_empty() {
        let (pin_tx, pin_rx) =
            super::controller::pin_queue(cfg.controller, shared.controller.clone());
        let ttl = pin_tx.ttl_flag();
        let (pout_tx, pout_rx) = super::controller::pout_queue();
        dp.set_controller(pin_tx, pout_rx);
        common.pouts = Some(pout_tx);
        let pin_stop = Arc::new(AtomicBool::new(false));
        let (c, st, t) = (common.ctrls.clone(), pin_stop.clone(), ctl.clone());
        let fail = fail_open(cfg);
        // Rules with `send_flow_rem` are kept for FLOW_REMOVEDs from now on.
        ctl.read(|t| t.report_removed());
        let t = std::thread::Builder::new()
            .name("linerate-of-async".into())
            .spawn(move || super::openflow::controllers::async_loop(pin_rx, c, t, ttl, fail, st))
            .map_err(|e| format!("spawning the packet-in thread: {e}"))?;
        pins = Some((t, pin_stop));
    }
    // The datapath id: "lr" and the process id (unique per host).
    let dpid = 0x6c72_0000_0000 | std::process::id() as u64;
    for of in &cfg.openflow {
        let c = super::openflow::Channel::start(of, shared.clone(), dpid, &common)?;
        let ep = &c.endpoint;
        on(Event::Opened(format!(
            "openflow: {} {ep} (OpenFlow 1.3{})",
            if ep.listens() {
                "listening on"
            } else {
                "connecting to"
            },
            if ep.tls() { ", mutual TLS" } else { "" }
        )));
        channels.push(c);
    }
    // The control socket last: once it answers, the OpenFlow listeners
    // are up too (what scripts and tests wait for).
    let server = match &cfg.ctl {
        Some(path) => {
            let l = Listener::bind(path).map_err(|e| format!("--ctl {e}"))?;
            on(Event::Opened(format!("control socket: {}", path.display())));
            let h: Arc<dyn Handler> = Arc::new(SwitchCtl(shared.clone()));
            Some(Server::start(l, h, Limits::default())?)
        }
        None => None,
    };
    let (polling, profile, cpu) = (cfg.polling, cfg.profile, cfg.cpu);
    let done = Arc::new(AtomicBool::new(false));
    let (st, dn) = (stop.clone(), done.clone());
    let t0 = Instant::now();
    let worker = std::thread::Builder::new()
        .name("linerate-switch".into())
        .spawn(move || -> Result<(), String> {
            if let Some(c) = cpu {
                linerate_io::host::pin_to_cpu(c)?;
            }
            let r = dp.run(&st, polling, profile);
            dn.store(true, Ordering::SeqCst);
            r.map_err(|e| e.to_string())
        })
        .map_err(|e| format!("spawning the datapath thread: {e}"))?;
    // The links' watcher: PORT_STATUS to the controllers, the groups'
    // liveness (the datapath reads the links it keeps). Started after the
    // datapath: `stop` ends both.
    let watcher = if shared.links.watches() {
        let (sh, st) = (shared.clone(), stop.clone());
        let ctrls = (!cfg.openflow.is_empty()).then(|| common.ctrls.clone());
        let w = std::thread::Builder::new()
            .name("linerate-links".into())
            .spawn(move || link_loop(&sh, ctrls.as_deref(), &st));
        match w {
            Ok(w) => Some(w),
            Err(e) => {
                stop.store(true, Ordering::SeqCst);
                let _ = worker.join();
                return Err(format!("spawning the link watcher: {e}"));
            }
        }
    } else {
        None
    };

    // The tick: once a second, never on the datapath.
    let mut last = shared.counters.snapshot();
    let mut last_c = cache_now(&shared.cache);
    let mut w = Watch::new(stop, crate::poll::deadline(t0, cfg.duration));
    while let Some(second) = w.next() {
        if done.load(Ordering::SeqCst) || worker.is_finished() {
            break;
        }
        for (i, up) in shared.links.take_changes() {
            let (n, uri, _) = &shared.ports[i];
            on(Event::Opened(format!(
                "port {n}: {uri}: link {}",
                if up { "up" } else { "down" }
            )));
        }
        if let Some(dt) = second {
            // Never blocks on a control client: a tick that finds the table
            // being edited waits for the next second.
            let _ = ctl.try_tick(mono_ns());
            let now = shared.counters.snapshot();
            let now_c = cache_now(&shared.cache);
            let d = now.delta(&last);
            let dc: [u64; 3] = std::array::from_fn(|i| now_c[i].wrapping_sub(last_c[i]));
            on(Event::Tick(&Tick {
                t: t0.elapsed().as_secs_f64(),
                rx_pps: d.received as f64 / dt,
                fwd_pps: d.passed as f64 / dt,
                drops: d.drops_nonzero().collect(),
                rules: shared.ctl.current().len(),
                emc_hit_rate: dc[0] as f64 / (dc[0] + dc[1]).max(1) as f64,
                subtables_per_lookup: dc[2] as f64 / dc[1].max(1) as f64,
                shared: shared.clone(),
                controllers: (!cfg.openflow.is_empty()).then(|| common.ctrls.clone()),
            }));
            last = now;
            last_c = now_c;
        }
    }
    stop.store(true, Ordering::SeqCst);
    let r = worker
        .join()
        .map_err(|_| "datapath thread panicked".to_string())?;
    learner
        .join()
        .map_err(|_| "learning thread panicked".to_string())?;
    if let Some(t) = offloader {
        t.join()
            .map_err(|_| "offload thread panicked".to_string())?;
    }
    if let Some(w) = watcher {
        w.join().map_err(|_| "link watcher panicked".to_string())?;
    }
    // Stops accepting and removes the socket file at once; clients are not
    // waited for.
    if let Some(s) = server {
        s.stop();
    }
    let openflow = (!channels.is_empty()).then(|| {
        (
            common.stats.clone(),
            common.conns.clone(),
            common.ctrls.clone(),
        )
    });
    for c in channels {
        c.stop();
    }
    if let Some((t, st)) = pins {
        st.store(true, Ordering::SeqCst);
        let _ = t.join();
    }
    Ok(Finished {
        openflow,
        elapsed_s: t0.elapsed().as_secs_f64(),
        shared,
        cycles: cycles.snapshot(),
        profile,
        error: r.err(),
    })
}

impl Report for Tick {
    fn json(&self) -> Value {
        let drops: serde_json::Map<String, Value> = self
            .drops
            .iter()
            .map(|(n, c)| (n.to_string(), json!(c)))
            .collect();
        json!({"t": self.t, "rx_pps": self.rx_pps, "fwd_pps": self.fwd_pps,
               "drops": drops, "rules": self.rules,
               "emc_hit_rate": self.emc_hit_rate, "subtables_per_lookup": self.subtables_per_lookup})
    }

    fn text(&self) -> String {
        let drops: Vec<String> = self.drops.iter().map(|(n, c)| format!("{n}={c}")).collect();
        format!(
            "{:>7.1}s  rx {:>8.3} Mpps  fwd {:>8.3} Mpps | emc {:>5.1} %  {:.2} subtables/lookup | drops: {}",
            self.t,
            self.rx_pps / 1e6,
            self.fwd_pps / 1e6,
            self.emc_hit_rate * 100.0,
            self.subtables_per_lookup,
            if drops.is_empty() {
                "none".to_string()
            } else {
                drops.join(" ")
            }
        )
    }
}

/// The controller port and the controllers, as metrics: packet-ins by
/// where they went, FLOW_REMOVEDs, refusals, fail-open.
fn controller_metrics(
    m: &mut Exposition,
    port: &super::counters::PortCounters,
    cs: &super::openflow::controllers::Controllers,
) {
    let a = &cs.stats;
    let pin = "Packet-ins: taken by the controller port (taken), refused by its rate or a full \
               queue (dropped), queued for a connection (sent), wanted by none (unwanted).";
    for (result, v) in [
        ("taken", port.tx_packets.load(Relaxed)),
        ("dropped", port.tx_dropped.load(Relaxed)),
        ("sent", a.packet_ins_sent.load(Relaxed)),
        ("unwanted", a.packet_ins_unwanted.load(Relaxed)),
    ] {
        m.counter(
            "linerate_switch_packet_ins_total",
            pin,
            &[("result", result)],
            v,
        );
    }
    for (result, v) in [
        ("sent", &a.flow_removed_sent),
        ("unwanted", &a.flow_removed_unwanted),
    ] {
        m.counter(
            "linerate_switch_flow_removed_total",
            "FLOW_REMOVEDs queued for a connection (sent), or wanted by none (unwanted).",
            &[("result", result)],
            v.load(Relaxed),
        );
    }
    for (name, help, v) in [
        (
            "linerate_switch_flow_removed_dropped_total",
            "Removed rules not reported: the queue of them was full.",
            &a.flow_removed_dropped,
        ),
        (
            "linerate_switch_controller_slow_peer_total",
            "Asynchronous messages dropped for a connection whose queue was full.",
            &a.slow_peer,
        ),
        (
            "linerate_switch_controller_is_slave_total",
            "Requests refused because their connection is a slave.",
            &a.is_slave,
        ),
        (
            "linerate_switch_packet_outs_queue_full_total",
            "PACKET_OUTs the datapath's queue had no room for.",
            &a.packet_outs_queue_full,
        ),
        (
            "linerate_switch_fail_open_entered_total",
            "Times fail-open was entered (--fail-mode standalone).",
            &a.fail_open_entered,
        ),
    ] {
        m.counter(name, help, &[], v.load(Relaxed));
    }
    m.gauge(
        "linerate_switch_fail_open",
        "1 while in fail-open: every frame NORMAL, the rules aside.",
        &[],
        a.fail_open.load(Relaxed) as f64,
    );
    m.gauge(
        "linerate_switch_controller_connections",
        "OpenFlow connections past their HELLO.",
        &[],
        cs.len() as f64,
    );
}

impl Publish for Tick {
    fn metrics(&self, m: &mut Exposition) {
        let sh = &self.shared;
        m.stage(&[("stage", "switch")], &sh.counters.snapshot());
        for (_, uri, c) in &sh.ports {
            m.port(
                uri,
                "rx",
                c.rx_packets.load(Relaxed),
                Some(c.rx_bytes.load(Relaxed)),
            );
            m.port(
                uri,
                "tx",
                c.tx_packets.load(Relaxed),
                Some(c.tx_bytes.load(Relaxed)),
            );
            m.counter(
                "linerate_switch_port_tx_dropped_total",
                "Copies for a port not sent (its ring or staging full, too big).",
                &[("port", uri)],
                c.tx_dropped.load(Relaxed),
            );
        }
        if let Some(cs) = &self.controllers {
            controller_metrics(m, &sh.controller, cs);
        }
        let t = sh.ctl.current();
        m.gauge(
            "linerate_switch_rules",
            "Rules in every table.",
            &[],
            t.len() as f64,
        );
        m.gauge(
            "linerate_switch_table_epoch",
            "The pipeline's epoch: it changes with every edit of the rules.",
            &[],
            t.epoch() as f64,
        );
        for (i, tb) in t.tables() {
            let id = i.to_string();
            let l = [("table", id.as_str())];
            m.gauge(
                "linerate_switch_table_rules",
                "Rules in a table.",
                &l,
                tb.classifier().len() as f64,
            );
            let st = &tb.stats;
            for (name, help, v) in [
                (
                    "linerate_switch_table_lookups_total",
                    "Lookups in a table.",
                    &st.lookups,
                ),
                (
                    "linerate_switch_table_matches_total",
                    "Lookups in a table that matched a rule.",
                    &st.matches,
                ),
                (
                    "linerate_switch_table_evicted_total",
                    "Rules a full table evicted.",
                    &st.evicted,
                ),
                (
                    "linerate_switch_table_refused_full_total",
                    "Rules a full table refused.",
                    &st.refused_full,
                ),
            ] {
                m.counter(name, help, &l, v.load(Relaxed));
            }
        }
        let c = &sh.cache;
        for (cache, result, v) in [
            ("emc", "hit", &c.emc_hits),
            ("emc", "miss", &c.emc_misses),
            ("emc", "bypassed", &c.emc_bypassed),
            ("megaflow", "hit", &c.mega_hits),
            ("megaflow", "miss", &c.mega_misses),
            ("classifier", "hit", &c.cls_matched),
        ] {
            m.counter(
                "linerate_switch_cache_lookups_total",
                "Lookups in the switch's caches (emc, megaflow) and classifier, by result.",
                &[("cache", cache), ("result", result)],
                v.load(Relaxed),
            );
        }
        m.counter(
            "linerate_switch_classifier_lookups_total",
            "Packets that went to the classifier.",
            &[],
            c.cls_lookups.load(Relaxed),
        );
        m.counter(
            "linerate_switch_subtables_searched_total",
            "Classifier subtables searched (divided by lookups: subtables per lookup).",
            &[],
            c.subtables_searched.load(Relaxed),
        );
        m.gauge(
            "linerate_switch_megaflows",
            "Megaflows in the cache.",
            &[],
            c.megaflows.load(Relaxed) as f64,
        );
        for (outcome, v) in [
            ("requested", &c.learn_requests),
            ("queue_full", &c.learn_queue_full),
            ("refused", &c.learn_refused),
        ] {
            m.counter(
                "linerate_switch_learn_total",
                "learn() requests of the datapath, by outcome.",
                &[("outcome", outcome)],
                v.load(Relaxed),
            );
        }
    }
}

impl Report for Finished {
    fn json(&self) -> Value {
        let sh = &self.shared;
        let s = sh.counters.snapshot();
        let drops: serde_json::Map<String, Value> = s
            .drops_nonzero()
            .map(|(n, c)| (n.to_string(), json!(c)))
            .collect();
        let mut v = json!({
            "elapsed_s": self.elapsed_s, "received": s.received, "received_bytes": s.received_bytes,
            "forwarded": s.passed, "dropped": s.dropped(), "drops": drops,
            "balanced": s.balanced(), "ports": ports_json(sh), "cache": cache_json(sh),
            "tables": tables_json(sh), "max_flows": sh.ctl.current().limits().max_flows,
        });
        if let Some(o) = sh.ctl.offload() {
            v["offload"] = offload_json(o, &s);
        }
        if let Some((o, c, a)) = &self.openflow {
            let mut j = o.json();
            if let (Some(j), serde_json::Value::Object(c)) = (j.as_object_mut(), c.json()) {
                j.extend(c);
            }
            j["controllers"] = a.stats.json();
            let c = &sh.controller;
            j["controllers"]["port"] = json!({
                "tx_packets": c.tx_packets.load(Relaxed),
                "tx_bytes": c.tx_bytes.load(Relaxed),
                "tx_dropped": c.tx_dropped.load(Relaxed),
            });
            v["openflow"] = j;
        }
        if self.profile {
            let per = self.cycles.per_packet_json(s.received);
            v["profile"] = json!({"clock": "tsc", "tsc_hz": tsc_hz(), "packets": s.received,
                "batches": self.cycles.batches, "cycles_per_packet": per,
                "empty_polls": self.cycles.empty_polls});
        }
        v
    }

    fn text(&self) -> String {
        let sh = &self.shared;
        let s = sh.counters.snapshot();
        let mut o = format!("final account after {:.2} s:\n", self.elapsed_s);
        let by: Vec<String> = s.drops_nonzero().map(|(n, c)| format!("{n}={c}")).collect();
        o += &format!(
            "  received {}  forwarded {}  dropped {} ({})  received = forwarded + drops {}\n",
            s.received,
            s.passed,
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
        if let Some(off) = sh.ctl.offload() {
            let v = offload_json(off, &s);
            let x = off.xdp_stats();
            o += &format!(
                "  in XDP: received {}  forwarded {}  dropped {} (rule={} no_match={} redirect={})  up to the datapath {}; both paths: forwarded {} ({:.1} % in XDP)\n",
                x.handled(),
                x.fwd,
                x.dropped(),
                x.drop_rule,
                x.drop_miss,
                x.drop_redirect,
                x.up,
                v["forwarded"],
                v["share_forwarded_in_xdp"].as_f64().unwrap_or(0.0) * 100.0
            );
        }
        for (n, uri, c) in &sh.ports {
            o += &format!(
                "  port {n:<3} {uri:<24} rx {:>12}  tx {:>12}  tx_dropped {}\n",
                c.rx_packets.load(Relaxed),
                c.tx_packets.load(Relaxed),
                c.tx_dropped.load(Relaxed)
            );
        }
        let c = cache_json(sh);
        o += &format!(
            "  cache: emc hit rate {:.1} % ({} hits, {} misses, {} bypassed), classifier {} lookups, {:.2} subtables per lookup, {} rules in {} subtables\n",
            c["emc_hit_rate"].as_f64().unwrap_or(0.0) * 100.0,
            c["emc_hits"], c["emc_misses"], c["emc_bypassed"], c["classifier_lookups"],
            c["subtables_per_lookup"].as_f64().unwrap_or(0.0), c["rules"], c["subtables"]
        );
        let tables = tables_json(sh);
        let sum = |k: &str| -> u64 {
            let t = tables.as_array().into_iter().flatten();
            t.map(|t| t[k].as_u64().unwrap_or(0)).sum()
        };
        let (lr, ev, rf) = (
            c["learn_requests"].as_u64().unwrap_or(0),
            sum("evicted"),
            sum("refused_full"),
        );
        if lr > 0 || ev > 0 || rf > 0 {
            o += &format!(
                "  tables: {} rules (max-flows {}), {ev} evicted, {rf} refused (full); learn: {lr} requests, {} lost (queue full), {} refused\n",
                c["rules"],
                sh.ctl.current().limits().max_flows,
                c["learn_queue_full"],
                c["learn_refused"]
            );
        }
        if let Some((of, c, a)) = &self.openflow {
            let (j, c, a) = (of.json(), c.json(), a.stats.json());
            o += &format!(
                "  openflow: {} connections, {} messages ({} flow_mods in {} table versions), {} errors sent; closed: {} without HELLO, {} by the inactivity probe, {} evicted, {} refused (full), {} TLS failures\n",
                j["connections"], j["messages"], j["flow_mods"], j["versions"], j["errors"],
                c["hello_timeouts"], c["probe_timeouts"], c["evicted"], c["rejected"], c["tls_failures"]
            );
            o += &format!(
                "  controllers: {} packet-ins ({} sent, {} wanted by none, {} dropped for a slow peer), {} packet-outs dropped (queue full), {} requests refused to slaves\n",
                a["packet_ins"], a["packet_ins_sent"], a["packet_ins_unwanted"], a["slow_peer"],
                a["packet_outs_queue_full"], a["is_slave"]
            );
        }
        if self.profile {
            let per = self.cycles.per_packet(s.received);
            o += &format!(
                "profile (TSC cycles per packet, {:.2} GHz, {} packets in {} batches):\n",
                tsc_hz() / 1e9,
                s.received,
                self.cycles.batches
            );
            let h: Vec<String> = per.iter().map(|(n, _)| format!("{n:>9}")).collect();
            o += &format!("  {}\n", h.join(""));
            let v: Vec<String> = per.iter().map(|(_, c)| format!("{c:>9.1}")).collect();
            o += &format!("  {}\n", v.join(""));
        }
        o
    }
}

/// `--offload xdp`: the XDP side's counters, the offload's, and the
/// account across both paths (a frame XDP sent up is received again by the
/// datapath, so it is counted there).
fn offload_json(
    o: &dyn super::table::Offloaded,
    s: &linerate_io::counters::Snapshot<super::SwDrop>,
) -> Value {
    let x = o.xdp_stats();
    let in_xdp = x.handled();
    let fwd = s.passed + x.fwd;
    json!({
        "xdp": x,
        "offload": o.counters_json(),
        "xdp_balanced": x.balanced(),
        "received": s.received + in_xdp,
        "forwarded": fwd,
        "dropped": s.dropped() + x.dropped(),
        "share_forwarded_in_xdp": if fwd == 0 { 0.0 } else { x.fwd as f64 / fwd as f64 },
    })
}

impl Account for Finished {
    fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }
    fn balanced(&self) -> bool {
        self.shared.counters.snapshot().balanced()
    }
}
