//! Running a [`Generator`] on a port: the generator thread's loop (batches
//! into the port, control commands between batches, counters published
//! every ~10 ms) and the control surface a script or a reporter uses while
//! it runs ([`GenControl`], implemented by [`GenRemote`]).

use super::{GenError, Generator, StreamStats};
use crate::poll::{Poll, Polling};
use crate::receiver::{monotonic_ns, Receiver};
use linerate_io::TxPort;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Generator-side counters of one stream.
#[derive(Clone, Debug, Default)]
pub struct StreamCounters {
    pub name: String,
    pub packets: u64,
    pub bytes: u64,
    /// Rate over the last second (or since start).
    pub pps: f64,
}

/// Receiver-side counters of one stream.
#[derive(Clone, Debug, Default)]
pub struct RxCounters {
    pub name: String,
    pub packets: u64,
    pub lost: u64,
    pub reordered: u64,
    pub duplicates: u64,
    pub p50_ns: Option<u64>,
    pub p99_ns: Option<u64>,
}

/// What a script may do to a running generator.
pub trait GenControl: Send + Sync {
    fn streams(&self) -> Vec<String>;
    fn set_rate_pps(&self, stream: &str, pps: f64) -> Result<(), String>;
    fn set_paused(&self, stream: &str, paused: bool) -> Result<(), String>;
    fn stats(&self) -> Vec<StreamCounters>;
    fn rx(&self) -> Option<Vec<RxCounters>>;
    /// Ask the generator to end.
    fn stop(&self);
    /// True once the generator ended (count/duration reached or stopped).
    fn finished(&self) -> bool;
}

/// Commands from a script to the generator thread.
enum Cmd {
    Rate(usize, f64),
    Pause(usize, bool),
}

/// Shared between the generator thread, the reporter and a script.
pub struct GenRemote {
    names: Vec<String>,
    cmds: Mutex<Vec<Cmd>>,
    dirty: AtomicBool,
    stop: Arc<AtomicBool>,
    finished: AtomicBool,
    /// Per stream: packets and bytes the port took (published every ~10 ms).
    sent: Vec<(AtomicU64, AtomicU64)>,
    last: Mutex<(Instant, Vec<u64>, Vec<f64>)>,
    rx: Mutex<Option<Vec<RxCounters>>>,
}

impl GenRemote {
    fn index(&self, s: &str) -> Result<usize, String> {
        self.names
            .iter()
            .position(|n| n == s)
            .ok_or_else(|| format!("no stream named '{s}' (streams: {})", self.names.join(", ")))
    }
    fn push(&self, c: Cmd) {
        self.cmds.lock().unwrap_or_else(|e| e.into_inner()).push(c);
        self.dirty.store(true, Ordering::Release);
    }
}

impl GenControl for GenRemote {
    fn streams(&self) -> Vec<String> {
        self.names.clone()
    }
    fn set_rate_pps(&self, stream: &str, pps: f64) -> Result<(), String> {
        let i = self.index(stream)?;
        self.push(Cmd::Rate(i, pps));
        Ok(())
    }
    fn set_paused(&self, stream: &str, paused: bool) -> Result<(), String> {
        let i = self.index(stream)?;
        self.push(Cmd::Pause(i, paused));
        Ok(())
    }
    fn stats(&self) -> Vec<StreamCounters> {
        let mut l = self.last.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        let dt = (now - l.0).as_secs_f64();
        let pk: Vec<u64> = self
            .sent
            .iter()
            .map(|(p, _)| p.load(Ordering::Relaxed))
            .collect();
        if dt >= 0.2 {
            let rates = pk
                .iter()
                .zip(&l.1)
                .map(|(n, o)| (n - o) as f64 / dt)
                .collect();
            *l = (now, pk.clone(), rates);
        }
        self.names
            .iter()
            .enumerate()
            .map(|(i, n)| StreamCounters {
                name: n.clone(),
                packets: pk[i],
                bytes: self.sent[i].1.load(Ordering::Relaxed),
                pps: l.2.get(i).copied().unwrap_or(0.0),
            })
            .collect()
    }
    fn rx(&self) -> Option<Vec<RxCounters>> {
        self.rx.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
    fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }
    fn finished(&self) -> bool {
        self.finished.load(Ordering::SeqCst)
    }
}

/// What the generator thread reports at the end.
pub struct GenEnd {
    pub stats: Vec<StreamStats>,
    /// Sends the port refused whole (its ring was full).
    pub tx_ring_full: u64,
    pub elapsed_s: f64,
    pub kernel: linerate_io::KernelStats,
}

/// The generator loop: batches out of the generator into the port, control
/// commands applied between batches, counters published every ~10 ms.
pub fn run_loop(
    mut g: Generator,
    mut tx: Box<dyn TxPort>,
    ctl: Arc<GenRemote>,
    batch: usize,
    file_port: bool,
) -> (GenEnd, Result<(), GenError>) {
    let t0 = Instant::now();
    let mut t = Turns {
        g: &mut g,
        tx: tx.as_mut(),
        ctl: &ctl,
        batch,
        file_port,
        ring_full: 0,
        done: false,
        last_pub: monotonic_ns(),
    };
    let r = crate::poll::run(&mut t, &ctl.stop, Polling::Wait);
    let ring_full = t.ring_full;
    publish(&g, &ctl);
    // What was sent up to an error (a port gone) is reported too.
    let end = GenEnd {
        stats: g.stats(),
        tx_ring_full: ring_full,
        elapsed_s: t0.elapsed().as_secs_f64(),
        kernel: tx.kernel_stats(),
    };
    (end, r)
}

/// Per-stream packets and bytes the port took, for the reporter and scripts.
fn publish(g: &Generator, ctl: &GenRemote) {
    for (s, (p, by)) in g.stats().iter().zip(&ctl.sent) {
        p.store(s.sent_pkts, Ordering::Relaxed);
        by.store(s.sent_bytes, Ordering::Relaxed);
    }
}

/// The turns of [`run_loop`] until the generator is done, stopped or its
/// port fails.
struct Turns<'a> {
    g: &'a mut Generator,
    tx: &'a mut dyn TxPort,
    ctl: &'a GenRemote,
    batch: usize,
    file_port: bool,
    /// Sends the port refused whole.
    ring_full: u64,
    done: bool,
    last_pub: u64,
}

impl Turns<'_> {
    /// The control commands that came since the last turn.
    fn commands(&mut self) -> Result<(), GenError> {
        let now = monotonic_ns();
        let cmds: Vec<Cmd> =
            std::mem::take(&mut *self.ctl.cmds.lock().unwrap_or_else(|e| e.into_inner()));
        for c in cmds {
            match c {
                Cmd::Rate(i, pps) => self.g.set_rate_pps(i, (pps > 0.0).then_some(pps), now)?,
                Cmd::Pause(i, p) => self.g.set_paused(i, p, now)?,
            }
        }
        Ok(())
    }

    /// Frames `0..n` of the generator's batch into the port, retried while
    /// its ring is full.
    fn send(&mut self, n: usize) -> Result<(), GenError> {
        let mut off = 0;
        while off < n {
            // TX time as late as possible: right before the port takes the batch.
            let ts = monotonic_ns();
            self.g.stamp(off, ts);
            if self.file_port {
                // A capture file's record times are CLOCK_REALTIME (what
                // `count pcap:` and tshark read), not the generator's
                // CLOCK_MONOTONIC: ts_ns = 0 makes the writer stamp
                // CLOCK_REALTIME, read once per batch.
                self.g.clear_times(off);
            }
            let k = self.tx.send(&self.g.batch().pkts()[off..n])?;
            self.g.sent(off, k, ts);
            off += k;
            if k == 0 {
                self.ring_full += 1;
                self.tx.flush()?;
                if self.ctl.stop.load(Ordering::Relaxed) {
                    break;
                }
            }
        }
        Ok(())
    }
}

impl Poll for Turns<'_> {
    type Error = GenError;

    fn turn(&mut self) -> Result<usize, GenError> {
        if self.ctl.dirty.swap(false, Ordering::Acquire) {
            self.commands()?;
        }
        let now = monotonic_ns();
        if self.g.done_at(now) {
            self.done = true;
            return Ok(0);
        }
        let n = self.g.next_batch(now, self.batch);
        if n > 0 {
            self.send(n)?;
        }
        self.tx.flush()?;
        if now.saturating_sub(self.last_pub) > 10_000_000 {
            publish(self.g, self.ctl);
            self.last_pub = now;
        }
        Ok(n)
    }

    fn at_end(&self) -> bool {
        self.done
    }

    /// The next departure is a wait like any other: a sleep when it is far,
    /// none (the loop spins) when it is near.
    fn wait(&mut self, timeout_ms: i32) -> Result<(), GenError> {
        let most = Duration::from_millis(timeout_ms.max(0) as u64);
        let left = match self.g.next_departure_ns() {
            Some(t) => t.saturating_sub(monotonic_ns()),
            // Every stream paused: nothing is due until a command comes.
            None => u64::MAX,
        };
        crate::poll::pace_sleep(left, most);
        Ok(())
    }

    fn flush(&mut self) -> Result<usize, GenError> {
        self.tx.flush()?;
        Ok(self.tx.in_flight())
    }

    fn finish(&mut self) -> Result<(), GenError> {
        Ok(self.tx.finish()?)
    }
}

pub fn rx_counters(r: &Receiver, names: &[String]) -> Vec<RxCounters> {
    r.final_report()
        .streams
        .iter()
        .map(|s| RxCounters {
            name: names
                .get(s.stream as usize)
                .cloned()
                .unwrap_or_else(|| format!("stream{}", s.stream)),
            packets: s.packets,
            lost: s.lost,
            reordered: s.reordered,
            duplicates: s.duplicates,
            p50_ns: s.latency.as_ref().map(|l| l.p50_ns),
            p99_ns: s.latency.as_ref().map(|l| l.p99_ns),
        })
        .collect()
}

impl GenRemote {
    /// The control of a run of streams `names`, ended by `stop`.
    pub fn new(names: Vec<String>, stop: Arc<AtomicBool>) -> GenRemote {
        GenRemote {
            sent: names
                .iter()
                .map(|_| (AtomicU64::new(0), AtomicU64::new(0)))
                .collect(),
            last: Mutex::new((Instant::now(), vec![0; names.len()], vec![0.0; names.len()])),
            names,
            cmds: Mutex::new(Vec::new()),
            dirty: AtomicBool::new(false),
            stop,
            finished: AtomicBool::new(false),
            rx: Mutex::new(None),
        }
    }
    /// Per stream: packets the port took so far.
    pub fn sent_packets(&self) -> Vec<u64> {
        self.sent
            .iter()
            .map(|(p, _)| p.load(Ordering::Relaxed))
            .collect()
    }
    /// Per stream: bytes the port took so far.
    pub fn sent_bytes(&self) -> Vec<u64> {
        self.sent
            .iter()
            .map(|(_, b)| b.load(Ordering::Relaxed))
            .collect()
    }
    /// The generator thread ended (set by whoever runs [`run_loop`]).
    pub fn set_finished(&self) {
        self.finished.store(true, Ordering::SeqCst);
    }
    /// The receiver's counters, for scripts (`rx()`).
    pub fn set_rx(&self, rx: Vec<RxCounters>) {
        *self.rx.lock().unwrap_or_else(|e| e.into_inner()) = Some(rx);
    }
}
