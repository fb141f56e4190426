//! A whole `linerate fwd` run in user space: both ports opened, the two
//! directions on one core or one thread each ([`super::run_loop`]), the
//! once-a-second rates from the counters (never from the ports), and the
//! final account with the ports' kernel counters and the cycle profile.

use super::{run_loop, Direction, DirectionReport, FwdCycles, MacRewrite, Polling};
use crate::event::{Account, Report};
use crate::metrics::{Exposition, Publish};
use crate::poll::Watch;
use linerate_io::time::tsc_hz;
use linerate_io::{KernelStats, OpenOptions, PortInfo, StageSnapshot};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// A forwarder between two ports.
#[derive(Clone, Debug)]
pub struct FwdConfig {
    pub port_a: String,
    pub port_b: String,
    pub rewrite_a2b: Option<MacRewrite>,
    pub rewrite_b2a: Option<MacRewrite>,
    pub open: OpenOptions,
    pub polling: Polling,
    /// Both directions in one thread (true), or one thread each.
    pub single_core: bool,
    /// CPUs to pin the thread(s) to: the first for A->B (or both), the
    /// second for B->A.
    pub cpus: Vec<usize>,
    /// Count TSC cycles per stage.
    pub profile: bool,
    pub duration: Option<f64>,
}

/// What the caller hears while the forwarder runs: the ports opened, and
/// once a second the counters' deltas over the interval.
pub type Event<'a> = crate::event::Event<'a, Tick>;

/// One interval of a running forwarder.
pub struct Tick {
    pub t: f64,
    pub dt: f64,
    /// A->B and B->A in the interval.
    pub delta: [StageSnapshot; 2],
    /// A->B and B->A since the start.
    pub total: [StageSnapshot; 2],
    /// The URIs of ports A and B.
    pub ports: [String; 2],
}

/// The final account.
pub struct Finished {
    pub elapsed_s: f64,
    pub info: [PortInfo; 2],
    pub snaps: [StageSnapshot; 2],
    pub cycles: [FwdCycles; 2],
    /// The ports' own counters ("A rx", "B tx", ...).
    pub kernel: Vec<(String, KernelStats)>,
    pub profile: bool,
    /// The first error of a forwarding thread (a port that failed).
    pub error: Option<String>,
}

type Worker = std::thread::JoinHandle<(Vec<Direction>, Result<(), String>)>;

/// One forwarding thread over `dirs`; one direction failing (a port gone)
/// ends the other too.
fn spawn(
    dirs: Vec<Direction>,
    cpu: Option<usize>,
    stop: Arc<AtomicBool>,
    done: Arc<AtomicBool>,
    polling: Polling,
    profile: bool,
) -> Result<Worker, String> {
    std::thread::Builder::new()
        .name("linerate-fwd".into())
        .spawn(move || {
            let mut dirs = dirs;
            let r = match cpu.map(linerate_io::host::pin_to_cpu).transpose() {
                Ok(_) => {
                    let mut refs: Vec<&mut Direction> = dirs.iter_mut().collect();
                    run_loop(&mut refs, &stop, polling, profile).map_err(|e| e.to_string())
                }
                Err(e) => Err(e),
            };
            stop.store(true, Ordering::SeqCst);
            done.store(true, Ordering::SeqCst);
            (dirs, r)
        })
        .map_err(|e| format!("starting a forwarding thread: {e}"))
}

/// Forward until `stop`, the duration or the end of finite sources.
pub fn run(
    cfg: &FwdConfig,
    stop: &Arc<AtomicBool>,
    on: &mut dyn FnMut(Event<'_>),
) -> Result<Finished, String> {
    let pa = linerate_io::open(&cfg.port_a, &cfg.open).map_err(|e| e.to_string())?;
    let pb = linerate_io::open(&cfg.port_b, &cfg.open).map_err(|e| e.to_string())?;
    let info = [pa.info.clone(), pb.info.clone()];
    for (n, i) in ["A", "B"].iter().zip(&info) {
        on(Event::Opened(format!(
            "port {n}: {} ({}: {})",
            i.uri, i.kind, i.detail
        )));
    }
    let batch = cfg.open.batch;
    let ab = Direction::new("A->B", pa.rx, pb.tx, cfg.rewrite_a2b, batch);
    let ba = Direction::new("B->A", pb.rx, pa.tx, cfg.rewrite_b2a, batch);
    let counters = [ab.counters.clone(), ba.counters.clone()];
    let cycles = [ab.cycles.clone(), ba.cycles.clone()];
    let (polling, profile) = (cfg.polling, cfg.profile);
    let done = Arc::new(AtomicBool::new(false));
    let t0 = Instant::now();
    let first = cfg.cpus.first().copied();
    let workers = if cfg.single_core {
        vec![spawn(
            vec![ab, ba],
            first,
            stop.clone(),
            done.clone(),
            polling,
            profile,
        )?]
    } else {
        let second = cfg.cpus.get(1).copied().or(first);
        let d2 = Arc::new(AtomicBool::new(false));
        vec![
            spawn(
                vec![ab],
                first,
                stop.clone(),
                done.clone(),
                polling,
                profile,
            )?,
            spawn(vec![ba], second, stop.clone(), d2, polling, profile)?,
        ]
    };

    // Once a second, from the counters (no access to the ports).
    let mut last = [counters[0].snapshot(), counters[1].snapshot()];
    let mut w = Watch::new(stop, crate::poll::deadline(t0, cfg.duration));
    while let Some(second) = w.next() {
        if done.load(Ordering::SeqCst) || workers.iter().all(|w| w.is_finished()) {
            break;
        }
        if let Some(dt) = second {
            let now = [counters[0].snapshot(), counters[1].snapshot()];
            on(Event::Tick(&Tick {
                t: t0.elapsed().as_secs_f64(),
                dt,
                delta: [now[0].delta(&last[0]), now[1].delta(&last[1])],
                total: now,
                ports: [cfg.port_a.clone(), cfg.port_b.clone()],
            }));
            last = now;
        }
    }
    stop.store(true, Ordering::SeqCst);
    let mut dirs = Vec::new();
    let mut error = None;
    for w in workers {
        let (d, r) = w
            .join()
            .map_err(|_| "forwarding thread panicked".to_string())?;
        dirs.extend(d);
        if let Err(e) = r {
            error.get_or_insert(e);
        }
    }
    let kernel = dirs
        .iter()
        .flat_map(|d| {
            let (rxn, txn) = if d.name == "A->B" {
                ("A rx", "B tx")
            } else {
                ("B rx", "A tx")
            };
            [
                (rxn.to_string(), d.rx.kernel_stats()),
                (txn.to_string(), d.tx.kernel_stats()),
            ]
        })
        .collect();
    Ok(Finished {
        elapsed_s: t0.elapsed().as_secs_f64(),
        info,
        snaps: [counters[0].snapshot(), counters[1].snapshot()],
        cycles: [cycles[0].snapshot(), cycles[1].snapshot()],
        kernel,
        profile,
        error,
    })
}

fn rate_line(name: &str, d: &StageSnapshot, dt: f64) -> String {
    format!(
        "{name} {:>8.3} Mpps {:>7.3} Gbit/s",
        d.passed as f64 / dt / 1e6,
        d.passed_bytes as f64 * 8.0 / dt / 1e9
    )
}

impl Report for Tick {
    fn json(&self) -> Value {
        let (d, dt) = (&self.delta, self.dt);
        let dir = |d: &StageSnapshot| {
            json!({"rx_pps": d.received as f64 / dt, "fwd_pps": d.passed as f64 / dt,
                   "fwd_bps": d.passed_bytes as f64 * 8.0 / dt, "drops": d.dropped()})
        };
        json!({"t": self.t, "a2b": dir(&d[0]), "b2a": dir(&d[1])})
    }

    fn text(&self) -> String {
        let mut drops = String::new();
        for (dir, s) in ["A->B", "B->A"].iter().zip(&self.delta) {
            for (n, c) in s.drops_nonzero() {
                drops.push_str(&format!(" {dir}:{n}={c}"));
            }
        }
        if drops.is_empty() {
            drops = " none".into();
        }
        format!(
            "{:>7.1}s  {} | {} | drops:{drops}",
            self.t,
            rate_line("A->B", &self.delta[0], self.dt),
            rate_line("B->A", &self.delta[1], self.dt)
        )
    }
}

impl Publish for Tick {
    fn metrics(&self, m: &mut Exposition) {
        let [a, b] = [self.ports[0].as_str(), self.ports[1].as_str()];
        for ((stage, rx, tx), s) in [("a_to_b", a, b), ("b_to_a", b, a)].iter().zip(&self.total) {
            m.stage(&[("stage", stage)], s);
            m.port(rx, "rx", s.received, Some(s.received_bytes));
            m.port(tx, "tx", s.passed, Some(s.passed_bytes));
        }
    }
}

impl Finished {
    fn reports(&self) -> [DirectionReport; 2] {
        [
            DirectionReport::from_snapshot("A->B", &self.snaps[0]),
            DirectionReport::from_snapshot("B->A", &self.snaps[1]),
        ]
    }

    /// Both directions' cycles summed, and the packets they saw.
    fn total_cycles(&self) -> (FwdCycles, u64) {
        let mut t = self.cycles[0];
        t += self.cycles[1];
        (t, self.snaps[0].received + self.snaps[1].received)
    }
}

impl Report for Finished {
    fn json(&self) -> Value {
        let mut v = json!({
            "mode": "user",
            "elapsed_s": self.elapsed_s,
            "ports": self.info,
            "directions": self.reports(),
            "kernel": self.kernel.iter().map(|(n, k)| json!({"side": n, "counters": k.counters})).collect::<Vec<_>>(),
        });
        if self.profile {
            let (total, pkts) = self.total_cycles();
            v["profile"] = json!({
                "clock": "tsc", "tsc_hz": tsc_hz(), "packets": pkts, "batches": total.batches,
                "cycles_per_packet": total.per_packet_json(pkts),
                "empty_polls": total.empty_polls, "idle_cycles": total.idle,
            });
        }
        v
    }

    fn text(&self) -> String {
        let mut o = format!("final account after {:.2} s:\n", self.elapsed_s);
        o += &format!(
            "  {:<6} {:>12} {:>12} {:>10}  {:<28} received = forwarded + drops\n",
            "dir", "received", "forwarded", "dropped", "drops by reason"
        );
        for r in &self.reports() {
            let by: Vec<String> = r.drops.iter().map(|(n, c)| format!("{n}={c}")).collect();
            o += &format!(
                "  {:<6} {:>12} {:>12} {:>10}  {:<28} {}\n",
                r.direction,
                r.received,
                r.forwarded,
                r.dropped,
                if by.is_empty() {
                    "-".to_string()
                } else {
                    by.join(" ")
                },
                if r.balanced { "holds" } else { "DOES NOT HOLD" }
            );
        }
        for (n, k) in &self.kernel {
            if !k.counters.is_empty() {
                let s: Vec<String> = k.counters.iter().map(|(c, v)| format!("{c}={v}")).collect();
                o += &format!("  kernel {n}: {}\n", s.join(" "));
            }
        }
        if self.profile {
            let (total, pkts) = self.total_cycles();
            let pp: Vec<f64> = total.per_packet(pkts).iter().map(|p| p.1).collect();
            o += &format!(
                "profile (TSC cycles per packet, {:.2} GHz, {} packets in {} batches):\n",
                tsc_hz() / 1e9,
                pkts,
                total.batches
            );
            o += &format!(
                "  {:>8} {:>8} {:>8} {:>11} {:>8}\n",
                "RX", "TX", "Buffers", "Processing", "Total"
            );
            o += &format!(
                "  {:>8.1} {:>8.1} {:>8.1} {:>11.1} {:>8.1}\n",
                pp[0], pp[1], pp[2], pp[3], pp[4]
            );
            o += &format!(
                "  (+ {} empty polls, {:.1} idle cycles per packet)\n",
                total.empty_polls,
                total.idle as f64 / pkts.max(1) as f64
            );
        }
        o
    }
}

impl Account for Finished {
    fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }
    fn balanced(&self) -> bool {
        self.reports().iter().all(|r| r.balanced)
    }
}
