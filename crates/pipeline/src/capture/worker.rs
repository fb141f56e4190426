//! The capture's workers (seed 002's consumers): what each worker does with
//! the packets its forwarder kept (the analyser, the pcapng writer, an
//! output port), the worker loop of the dispatcher steering, the stats the
//! workers publish, and the answers on the capture's control socket
//! (`stats`, `shunt`). `linerate capture` builds these from its options.

use super::ctl::Request as CtlRequest;
use super::forwarder::CaptureDrop;
use super::{Analyser, AnalyserAction, CaptureWriter, ForwarderShared, WorkerRx};
use crate::ctl::{Conn, Handler};
use linerate_io::counters::{Reason, MAX_REASONS};
use linerate_io::{Pkt, TxPort};
use linerate_wire::FlowKey;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The stats ([`CaptureSnapshot::to_json`]) as one line of text.
pub fn text_line(v: &Value) -> String {
    let t = &v["totals"];
    let mut s = format!(
        "{:>7.1}s rx {} fwd {} drop ted {} shunt {} filter {} ring_full {} malformed {} | ack {}",
        v["t"].as_f64().unwrap_or(0.0),
        t["received"],
        t["forwarded"],
        t["dropped"]["ted"],
        t["dropped"]["shunt"],
        t["dropped"]["filter"],
        t["dropped"]["ring_full"],
        t["dropped"]["malformed"],
        t["acknowledged"],
    );
    if t["out_sent"].as_u64().unwrap_or(0) + t["out_dropped"].as_u64().unwrap_or(0) > 0 {
        s += &format!(" | out {} out_drop {}", t["out_sent"], t["out_dropped"]);
    }
    if let Some(ws) = v["workers"].as_array() {
        for w in ws {
            let th = match w["ted_threshold"].as_u64() {
                Some(b) => format!("{b}B"),
                None => "off".into(),
            };
            s += &format!(
                " | w{} rx {} fwd {} q {}/{} ted {}",
                w["worker"],
                w["received"],
                w["forwarded"],
                w["queue_used"],
                w["queue_capacity"],
                th
            );
        }
    }
    if let Some(ev) = t["events"].as_object() {
        for k in ["http_request", "http_response", "http_pair"] {
            if let Some(x) = ev.get(k) {
                s += &format!(" {k} {x}");
            }
        }
    }
    s
}

/// What a worker publishes for the stats.
#[derive(Default)]
pub struct WorkerShared {
    pub taken: AtomicU64,
    pub written: AtomicU64,
    /// `--out`: packets the port took, and packets it refused (TX ring full).
    pub out_sent: AtomicU64,
    pub out_dropped: AtomicU64,
    pub acknowledged: AtomicU64,
    pub queue_used: AtomicU64,
    pub queue_capacity: AtomicU64,
    pub events: Mutex<Vec<(&'static str, u64)>>,
    pub files: Mutex<Vec<PathBuf>>,
}

/// Shunt requests from the control socket for one forwarder owner.
#[derive(Default)]
pub struct Inbox {
    pending: AtomicBool,
    keys: Mutex<Vec<FlowKey>>,
}

impl Inbox {
    pub fn push(&self, k: FlowKey) {
        self.keys.lock().unwrap_or_else(|e| e.into_inner()).push(k);
        self.pending.store(true, Relaxed);
    }
    /// Once per batch: one relaxed load; the lock only when something is pending.
    pub fn take(&self, mut f: impl FnMut(FlowKey)) {
        if self.pending.swap(false, Relaxed) {
            let v = std::mem::take(&mut *self.keys.lock().unwrap_or_else(|e| e.into_inner()));
            v.into_iter().for_each(&mut f);
        }
    }
}

/// What the control socket, the reporter and the final report read.
pub struct Shared {
    pub steering: &'static str,
    pub port: String,
    pub pinned: bool,
    pub fwd: Vec<Arc<ForwarderShared>>,
    pub workers: Vec<Arc<WorkerShared>>,
    pub inboxes: Vec<Arc<Inbox>>,
    pub kernel: Mutex<Vec<(&'static str, u64)>>,
    pub t0: Instant,
}

/// One worker's counters at one moment.
pub struct WorkerSnapshot {
    pub fwd: super::forwarder::ForwarderReport,
    pub taken: u64,
    pub written: u64,
    pub out_sent: u64,
    pub out_dropped: u64,
    pub acknowledged: u64,
    pub queue_used: u64,
    pub queue_capacity: u64,
    pub events: Vec<(&'static str, u64)>,
}

/// The capture's counters at one moment (once a second, `stats` on the
/// socket, the end): its text, JSON and metrics views.
pub struct CaptureSnapshot {
    pub t: f64,
    pub port: String,
    pub steering: &'static str,
    pub pinned: bool,
    pub workers: Vec<WorkerSnapshot>,
    pub kernel: Vec<(&'static str, u64)>,
}

impl Shared {
    /// The counters of every worker, read now.
    pub fn snapshot(&self) -> CaptureSnapshot {
        let workers = self
            .fwd
            .iter()
            .zip(&self.workers)
            .map(|(f, ws)| WorkerSnapshot {
                fwd: f.snapshot(),
                taken: ws.taken.load(Relaxed),
                written: ws.written.load(Relaxed),
                out_sent: ws.out_sent.load(Relaxed),
                out_dropped: ws.out_dropped.load(Relaxed),
                acknowledged: ws.acknowledged.load(Relaxed),
                queue_used: ws.queue_used.load(Relaxed),
                queue_capacity: ws.queue_capacity.load(Relaxed),
                events: ws.events.lock().map(|e| e.clone()).unwrap_or_default(),
            })
            .collect();
        CaptureSnapshot {
            t: self.t0.elapsed().as_secs_f64(),
            port: self.port.clone(),
            steering: self.steering,
            pinned: self.pinned,
            workers,
            kernel: self.kernel.lock().map(|k| k.clone()).unwrap_or_default(),
        }
    }
}

impl CaptureSnapshot {
    /// The stats as JSON.
    pub fn to_json(&self) -> Value {
        let mut tot = [0u64; MAX_REASONS];
        let (mut rx, mut fw, mut ack, mut wr) = (0u64, 0u64, 0u64, 0u64);
        let (mut os, mut od) = (0u64, 0u64);
        let mut events_tot: Vec<(&'static str, u64)> = Vec::new();
        let events_json = |ev: &[(&'static str, u64)]| {
            ev.iter()
                .map(|(k, v)| ((*k).to_string(), json!(v)))
                .collect::<serde_json::Map<_, _>>()
        };
        let workers: Vec<Value> = self
            .workers
            .iter()
            .enumerate()
            .map(|(w, ws)| {
                let r = &ws.fwd;
                let mut drops = serde_json::Map::new();
                for &d in CaptureDrop::ALL {
                    let v = r.stage.drop_of(d);
                    tot[d.index()] += v;
                    drops.insert(d.name().into(), v.into());
                }
                rx += r.stage.received;
                fw += r.stage.passed;
                ack += ws.acknowledged;
                wr += ws.written;
                os += ws.out_sent;
                od += ws.out_dropped;
                for (k, v) in &ws.events {
                    match events_tot.iter_mut().find(|(n, _)| n == k) {
                        Some(e) => e.1 += v,
                        None => events_tot.push((k, *v)),
                    }
                }
                json!({
                    "worker": w,
                    "received": r.stage.received,
                    "forwarded": r.stage.passed,
                    "dropped": drops,
                    "priority": r.priority,
                    "ted_threshold": r.ted_threshold,
                    "flows": r.flows_occupied,
                    "flow_evictions": r.flow_evictions,
                    "shunted_flows": r.shunts,
                    "queue_used": ws.queue_used,
                    "queue_capacity": ws.queue_capacity,
                    "taken": ws.taken,
                    "written": ws.written,
                    "acknowledged": ws.acknowledged,
                    "out_sent": ws.out_sent,
                    "out_dropped": ws.out_dropped,
                    "events": events_json(&ws.events),
                })
            })
            .collect();
        let mut drops = serde_json::Map::new();
        for &d in CaptureDrop::ALL {
            drops.insert(d.name().into(), tot[d.index()].into());
        }
        json!({
            "t": self.t,
            "port": self.port,
            "steering": self.steering,
            "pinned": self.pinned,
            "totals": {
                "received": rx,
                "forwarded": fw,
                "dropped": drops,
                "written": wr,
                "acknowledged": ack,
                "out_sent": os,
                "out_dropped": od,
                "events": events_json(&events_tot),
            },
            "workers": workers,
            "kernel": self.kernel.iter().map(|(k, v)| ((*k).to_string(), json!(v))).collect::<serde_json::Map<_, _>>(),
        })
    }
}

impl crate::event::Report for CaptureSnapshot {
    fn json(&self) -> Value {
        self.to_json()
    }
    fn text(&self) -> String {
        text_line(&self.to_json())
    }
}

impl crate::metrics::Publish for CaptureSnapshot {
    fn metrics(&self, m: &mut crate::metrics::Exposition) {
        let (mut rx, mut rx_bytes) = (0u64, 0u64);
        for (i, w) in self.workers.iter().enumerate() {
            let id = i.to_string();
            let l = [("stage", "capture"), ("worker", id.as_str())];
            let wl = &l[1..];
            m.stage(&l, &w.fwd.stage);
            rx += w.fwd.stage.received;
            rx_bytes += w.fwd.stage.received_bytes;
            for (name, help, v) in [
                (
                    "linerate_capture_taken_packets_total",
                    "Packets a worker took from its queue.",
                    w.taken,
                ),
                (
                    "linerate_capture_written_packets_total",
                    "Packets a worker wrote to its capture file.",
                    w.written,
                ),
                (
                    "linerate_capture_acknowledged_packets_total",
                    "Packets a worker acknowledged (done with).",
                    w.acknowledged,
                ),
                (
                    "linerate_capture_out_sent_packets_total",
                    "Packets a worker sent to its --out port.",
                    w.out_sent,
                ),
                (
                    "linerate_capture_out_dropped_packets_total",
                    "Packets its --out port refused (TX ring full).",
                    w.out_dropped,
                ),
                (
                    "linerate_capture_flow_evictions_total",
                    "Flows evicted from a worker's flow table.",
                    w.fwd.flow_evictions,
                ),
            ] {
                m.counter(name, help, wl, v);
            }
            for (name, help, v) in [
                (
                    "linerate_capture_queue_used",
                    "Packets waiting in a worker's queue.",
                    w.queue_used,
                ),
                (
                    "linerate_capture_queue_capacity",
                    "A worker's queue capacity, in packets.",
                    w.queue_capacity,
                ),
                (
                    "linerate_capture_flows",
                    "Flows in a worker's flow table.",
                    w.fwd.flows_occupied,
                ),
                (
                    "linerate_capture_priority",
                    "A worker's priority.",
                    w.fwd.priority,
                ),
            ] {
                m.gauge(name, help, wl, v as f64);
            }
            // TED (early dropping under overload): the byte threshold past
            // which a flow's packets are dropped, +Inf while it is off.
            m.gauge(
                "linerate_capture_ted_threshold_bytes",
                "The early-drop threshold of a worker (bytes per flow; +Inf when off).",
                wl,
                w.fwd.ted_threshold.map_or(f64::INFINITY, |b| b as f64),
            );
            for (k, v) in &w.events {
                m.counter(
                    "linerate_capture_events_total",
                    "Events a worker's analyser reported, by kind.",
                    &[("worker", id.as_str()), ("event", k)],
                    *v,
                );
            }
        }
        m.port(&self.port, "rx", rx, Some(rx_bytes));
        for (k, v) in &self.kernel {
            m.counter(
                "linerate_capture_kernel_total",
                "The capture socket's own counters, as the kernel keeps them.",
                &[("port", &self.port), ("counter", k)],
                *v,
            );
        }
    }
}

fn ctl_line(line: &str, shared: &Shared) -> String {
    match CtlRequest::parse(line) {
        Ok(CtlRequest::Stats) => shared.snapshot().to_json().to_string(),
        Ok(CtlRequest::Shunt(k)) => {
            for i in &shared.inboxes {
                i.push(k);
            }
            "ok".into()
        }
        Err(e) => format!("error: {e}"),
    }
}

/// The capture's answers on its control socket (`--ctl`).
pub struct CaptureCtl(pub Arc<Shared>);

impl Handler for CaptureCtl {
    fn handle(&self, line: &str, _conn: &mut Conn) -> String {
        ctl_line(line, &self.0)
    }
}

/// CLOCK_REALTIME in ns (capture files' record times).
pub fn realtime_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// ns since `t0`.
pub fn monotonic_ns(t0: Instant) -> u64 {
    t0.elapsed().as_nanos() as u64
}

/// `--out`: a worker's kept packets sent out of a port. Each packet is
/// copied into a staging slot (the memory it came in is handed back to its
/// ring before the send) and the slots go out as one batch: one send and
/// one flush per batch, no allocation per packet.
pub struct OutPort {
    tx: Box<dyn TxPort>,
    buf: Vec<u8>,
    pkts: Vec<Pkt>,
    slot: usize,
    sent: u64,
    dropped: u64,
}

impl OutPort {
    pub fn new(tx: Box<dyn TxPort>, batch: usize, slot: usize) -> OutPort {
        OutPort {
            tx,
            buf: vec![0; batch * slot],
            pkts: Vec::with_capacity(batch),
            slot,
            sent: 0,
            dropped: 0,
        }
    }

    #[inline]
    pub fn push(&mut self, data: &[u8]) -> Result<(), String> {
        if self.pkts.len() == self.pkts.capacity() {
            self.send()?;
        }
        let len = data.len().min(self.slot);
        let off = self.pkts.len() * self.slot;
        let dst = &mut self.buf[off..off + len];
        dst.copy_from_slice(&data[..len]);
        // SAFETY: the descriptor points at this packet's own slot of `buf`,
        // which is never resized and outlives the send; `send` clears the
        // descriptors before a slot is written again.
        self.pkts
            .push(unsafe { Pkt::from_raw(dst.as_mut_ptr(), len as u32, 0, 0) });
        Ok(())
    }

    /// Send what is staged; what the TX ring refuses is counted as dropped.
    pub fn send(&mut self) -> Result<(), String> {
        if self.pkts.is_empty() {
            return Ok(());
        }
        let n = self.tx.send(&self.pkts).map_err(|e| e.to_string())?;
        self.tx.flush().map_err(|e| e.to_string())?;
        self.sent += n as u64;
        self.dropped += (self.pkts.len() - n) as u64;
        self.pkts.clear();
        Ok(())
    }
}

/// The consumer part of a worker: analyser, writer and output port.
pub struct Consumer {
    analyser: Option<Box<dyn Analyser>>,
    writer: Option<CaptureWriter>,
    out: Option<OutPort>,
    pub shared: Arc<WorkerShared>,
    pub taken: u64,
    error: Option<String>,
    /// The capture's stop flag: the first error of a writer or output port
    /// (a full disk, an interface gone) stops the whole capture, which then
    /// closes its files whole and exits with that error.
    stop: Arc<AtomicBool>,
}

impl Consumer {
    #[cold]
    fn fail(&mut self, e: String) {
        if self.error.is_none() {
            self.error = Some(e);
            self.stop.store(true, Relaxed);
        }
    }

    /// One packet; returns a shunt request if the analyser made one.
    #[inline]
    pub fn on_packet(&mut self, data: &[u8], orig_len: usize, ts_ns: u64) -> Option<FlowKey> {
        self.taken += 1;
        // After a failure (the capture is stopping) the writer and the
        // output port are left alone: their error is sticky.
        if self.error.is_none() {
            if let Some(w) = self.writer.as_mut() {
                if let Err(e) = w.write(data, orig_len, ts_ns) {
                    self.fail(e);
                }
            }
            if let Some(Err(e)) = self.out.as_mut().map(|o| o.push(data)) {
                self.fail(e);
            }
        }
        match self.analyser.as_mut().map(|a| a.on_packet(data, ts_ns)) {
            Some(AnalyserAction::Shunt(k)) => Some(k),
            _ => None,
        }
    }

    /// Once per batch.
    pub fn after_batch(&mut self, now: Instant, publish_events: bool) {
        if let Some(w) = self.writer.as_mut() {
            let r = w.tick(now);
            self.shared.written.store(w.records(), Relaxed);
            self.shared.acknowledged.store(w.acknowledged(), Relaxed);
            if let Err(e) = r {
                self.fail(e);
            }
        }
        if let Some(o) = self.out.as_mut() {
            let r = o.send();
            self.shared.out_sent.store(o.sent, Relaxed);
            self.shared.out_dropped.store(o.dropped, Relaxed);
            if let Err(e) = r {
                self.fail(e);
            }
        }
        self.shared.taken.store(self.taken, Relaxed);
        if publish_events {
            if let (Some(a), Ok(mut e)) = (self.analyser.as_ref(), self.shared.events.lock()) {
                *e = a.events();
            }
        }
    }

    pub fn finish(mut self) -> Result<(), String> {
        self.after_batch(Instant::now(), true);
        if let Some(w) = self.writer.take() {
            let r = w.finish();
            self.shared.written.store(r.records, Relaxed);
            self.shared.acknowledged.store(r.acknowledged, Relaxed);
            if let Ok(mut f) = self.shared.files.lock() {
                *f = r.files;
            }
            if let Some(e) = r.error {
                self.fail(e);
            }
        }
        match self.error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// A worker of the dispatcher steering: batches from its ring into its
/// consumer, shunt requests back to its forwarder, until the dispatcher is
/// gone and the ring is empty; on the polling core.
pub fn dispatcher_worker(rx: WorkerRx, mut c: Consumer, batch: usize) -> Result<(), String> {
    let g = rx.gauge();
    c.shared.queue_capacity.store(g.capacity() as u64, Relaxed);
    let mut t = RingTurns {
        rx,
        gauge: g,
        c: &mut c,
        shunts: Vec::with_capacity(batch),
        batch,
        gone: false,
        last_events: Instant::now(),
    };
    // Only the ring's end ends it: no stop flag of its own.
    let r = crate::poll::run(&mut t, &AtomicBool::new(false), crate::poll::Polling::Wait);
    r.and(c.finish())
}

/// A dispatcher worker's turns over its ring.
struct RingTurns<'a> {
    rx: WorkerRx,
    gauge: super::spsc::Gauge,
    c: &'a mut Consumer,
    shunts: Vec<FlowKey>,
    batch: usize,
    /// The dispatcher was gone before the last turn's receive.
    gone: bool,
    last_events: Instant,
}

impl crate::poll::Poll for RingTurns<'_> {
    type Error = String;

    fn turn(&mut self) -> Result<usize, String> {
        // Read before recv: a ring that is empty after the dispatcher was
        // seen gone holds nothing more (it flushes before it goes).
        self.gone = self.rx.dispatcher_gone();
        let (c, shunts) = (&mut *self.c, &mut self.shunts);
        let n = self.rx.recv(self.batch, |s| {
            if let Some(k) = c.on_packet(s.bytes(), s.orig_len as usize, s.ts_ns) {
                if shunts.len() < shunts.capacity() {
                    shunts.push(k);
                }
            }
        });
        for k in self.shunts.drain(..) {
            self.rx.shunt(&k);
        }
        Ok(n)
    }

    fn at_end(&self) -> bool {
        self.gone
    }

    fn wait(&mut self, _timeout_ms: i32) -> Result<(), String> {
        // A ring another thread fills: 200 us behind, it still holds far
        // more than that of work.
        std::thread::sleep(Duration::from_micros(200));
        Ok(())
    }

    fn tend(&mut self, _got: usize) -> Result<bool, String> {
        let now = Instant::now();
        let ev = now.duration_since(self.last_events) >= Duration::from_millis(500);
        if ev {
            self.last_events = now;
        }
        let used = self.gauge.used() as u64;
        self.c.shared.queue_used.store(used, Relaxed);
        self.c.after_batch(now, ev);
        Ok(false)
    }
}

impl Consumer {
    /// A worker's consumer; `stop` is the capture's stop flag (the first
    /// error of a writer or output port sets it).
    pub fn new(
        analyser: Option<Box<dyn Analyser>>,
        writer: Option<CaptureWriter>,
        out: Option<OutPort>,
        shared: Arc<WorkerShared>,
        stop: Arc<AtomicBool>,
    ) -> Consumer {
        Consumer {
            analyser,
            writer,
            out,
            shared,
            taken: 0,
            error: None,
            stop,
        }
    }
}
