//! Running a [`Generator`] on a port: the generator thread's loop (batches
//! into the port, control commands between batches, counters published
//! every ~10 ms) and the control surface a script or a reporter uses while
//! it runs ([`GenControl`], implemented by [`GenRemote`]).

use super::{GenError, Generator, StreamStats};
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
    let mut ring_full = 0u64;
    let mut r = gen_turns(&mut g, tx.as_mut(), &ctl, batch, file_port, &mut ring_full);
    if r.is_ok() {
        let t = Instant::now();
        while tx.in_flight() > 0 && t.elapsed() < Duration::from_millis(500) {
            if let Err(e) = tx.flush() {
                r = Err(e.into());
                break;
            }
        }
    }
    if r.is_ok() {
        r = tx.finish().map_err(GenError::from);
    }
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
fn gen_turns(
    g: &mut Generator,
    tx: &mut dyn TxPort,
    ctl: &GenRemote,
    batch: usize,
    file_port: bool,
    ring_full: &mut u64,
) -> Result<(), GenError> {
    let mono = monotonic_ns;
    let mut last_pub = mono();
    loop {
        if ctl.stop.load(Ordering::Relaxed) {
            break;
        }
        if ctl.dirty.swap(false, Ordering::Acquire) {
            let now = mono();
            let cmds: Vec<Cmd> =
                std::mem::take(&mut *ctl.cmds.lock().unwrap_or_else(|e| e.into_inner()));
            for c in cmds {
                let r = match c {
                    Cmd::Rate(i, pps) => g.set_rate_pps(i, (pps > 0.0).then_some(pps), now),
                    Cmd::Pause(i, p) => g.set_paused(i, p, now),
                };
                r?;
            }
        }
        let now = mono();
        if g.done_at(now) {
            break;
        }
        let n = g.next_batch(now, batch);
        if n == 0 {
            tx.flush()?;
            // Wait for the next departure: sleep when it is far, spin when near.
            if let Some(t) = g.next_departure_ns() {
                let wait = t.saturating_sub(mono());
                if wait > 100_000 {
                    std::thread::sleep(Duration::from_nanos((wait - 50_000).min(1_000_000)));
                } else {
                    std::hint::spin_loop();
                }
            }
        } else {
            let mut off = 0;
            while off < n {
                // TX time as late as possible: right before the port takes the batch.
                let ts = mono();
                g.stamp(off, ts);
                if file_port {
                    // A capture file's record times are CLOCK_REALTIME (what
                    // `count pcap:` and tshark read), not the generator's
                    // CLOCK_MONOTONIC: ts_ns = 0 makes the writer stamp
                    // CLOCK_REALTIME, read once per batch.
                    g.clear_times(off);
                }
                let k = tx.send(&g.batch().pkts()[off..n])?;
                g.sent(off, k, ts);
                off += k;
                if k == 0 {
                    *ring_full += 1;
                    tx.flush()?;
                    if ctl.stop.load(Ordering::Relaxed) {
                        break;
                    }
                }
            }
            tx.flush()?;
        }
        if now.saturating_sub(last_pub) > 10_000_000 {
            publish(g, ctl);
            last_pub = now;
        }
    }
    Ok(())
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
