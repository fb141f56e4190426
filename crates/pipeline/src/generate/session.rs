//! One run of `linerate gen`: the generator thread on its port, an optional
//! receiver in the same process, the once-a-second rates, and the report.
//! A scenario (a Lua script in the CLI) steers the run through
//! [`GenSession::control`] while [`GenSession::wait`] reports.

use super::run::{run_loop, rx_counters, GenEnd, GenRemote};
use super::{GenError, Generator, Profile};
use crate::poll::Watch;
use crate::receiver::{receive_loop, Clock, Receiver, Until};
use linerate_io::{OpenOptions, PortRole};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Where and how the streams run.
#[derive(Clone, Debug)]
pub struct GenSetup {
    /// The port URI the streams go out of.
    pub port: String,
    /// A receiver in this process on this port URI (counts, loss, latency).
    pub rx: Option<String>,
    pub batch: usize,
    /// Pin the generator thread to this CPU.
    pub cpu: Option<usize>,
}

/// The generator thread: its end and its error, or a setup error.
type Worker = JoinHandle<Result<(GenEnd, Result<(), GenError>), String>>;
/// The receiver thread and the flag that ends it.
type RxThread = (Arc<AtomicBool>, JoinHandle<Result<Receiver, String>>);

/// A running generator.
pub struct GenSession {
    names: Vec<String>,
    ctl: Arc<GenRemote>,
    worker: Worker,
    rx: Option<RxThread>,
    /// What runs, in one line ("gen: 2 stream(s) [a, b] -> afpacket:g0 (...)").
    pub started: String,
}

/// The once-a-second progress: packets sent so far and the rate over the
/// last interval, per stream.
pub struct Tick<'a> {
    pub t: f64,
    pub names: &'a [String],
    pub sent: &'a [u64],
    pub sent_bytes: &'a [u64],
    pub pps: &'a [f64],
}

impl crate::metrics::Publish for Tick<'_> {
    fn metrics(&self, m: &mut crate::metrics::Exposition) {
        for (i, name) in self.names.iter().enumerate() {
            let l = [("stream", name.as_str())];
            m.counter(
                "linerate_generator_sent_packets_total",
                "Frames of a stream the port took.",
                &l,
                self.sent.get(i).copied().unwrap_or(0),
            );
            m.counter(
                "linerate_generator_sent_bytes_total",
                "Bytes of a stream's frames the port took.",
                &l,
                self.sent_bytes.get(i).copied().unwrap_or(0),
            );
            m.gauge(
                "linerate_generator_rate_packets_per_second",
                "A stream's achieved rate over the last second.",
                &l,
                self.pps.get(i).copied().unwrap_or(0.0),
            );
        }
    }
}

/// How a run ended.
pub struct GenOutcome {
    pub end: GenEnd,
    /// The generator's error (a port that failed), if one ended it.
    pub gen: Result<(), GenError>,
    /// The receiver's counts, or its error.
    pub rx: Option<Result<Receiver, String>>,
}

impl GenSession {
    /// Open the ports and start the generator (and the receiver). Frames
    /// larger than the port takes are refused here.
    pub fn start(
        profile: &Profile,
        setup: &GenSetup,
        stop: &Arc<AtomicBool>,
    ) -> Result<GenSession, String> {
        let g = Generator::new(profile).map_err(|e| e.to_string())?;
        let names: Vec<String> = g.stream_names().iter().map(|s| s.to_string()).collect();
        let opts = OpenOptions {
            batch: setup.batch,
            role: PortRole::TxOnly,
            ..OpenOptions::default()
        };
        let port = linerate_io::open(&setup.port, &opts).map_err(|e| e.to_string())?;
        if g.max_frame_len() > port.tx.max_frame() {
            return Err(format!(
                "frames of {} bytes do not fit port '{}' (at most {})",
                g.max_frame_len(),
                setup.port,
                port.tx.max_frame()
            ));
        }
        let started = format!(
            "gen: {} stream(s) [{}] -> {} ({}: {})",
            names.len(),
            names.join(", "),
            port.info.uri,
            port.info.kind,
            port.info.detail
        );
        let ctl = Arc::new(GenRemote::new(names.clone(), stop.clone()));
        let rx = match &setup.rx {
            None => None,
            Some(uri) => {
                let ropts = OpenOptions {
                    busy_poll: false,
                    role: PortRole::RxOnly,
                    ..opts.clone()
                };
                let mut rport = linerate_io::open(uri, &ropts).map_err(|e| e.to_string())?;
                let clock = Clock::for_port(rport.info.clock);
                let done = Arc::new(AtomicBool::new(false));
                let (ctl2, done2, names2, batch) =
                    (ctl.clone(), done.clone(), names.clone(), setup.batch);
                let h = std::thread::spawn(move || -> Result<Receiver, String> {
                    let mut r = Receiver::new(clock);
                    r.preallocate(names2.len());
                    receive_loop(
                        rport.rx.as_mut(),
                        &mut r,
                        batch,
                        &done2,
                        Until::default(),
                        |r| ctl2.set_rx(rx_counters(r, &names2)),
                    )
                    .map_err(|e| e.to_string())?;
                    Ok(r)
                });
                Some((done, h))
            }
        };
        let (ctl2, batch, cpu) = (ctl.clone(), setup.batch, setup.cpu);
        let file_port = port.info.clock == "file";
        let tx = port.tx;
        let worker = std::thread::Builder::new()
            .name("linerate-gen".into())
            .spawn(move || {
                if let Some(c) = cpu {
                    linerate_io::host::pin_to_cpu(c)?;
                }
                let r = run_loop(g, tx, ctl2.clone(), batch, file_port);
                ctl2.set_finished();
                Ok(r)
            })
            .map_err(|e| format!("starting the generator thread: {e}"))?;
        Ok(GenSession {
            names,
            ctl,
            worker,
            rx,
            started,
        })
    }

    /// The control surface for a scenario (rates, pauses, stop).
    pub fn control(&self) -> Arc<GenRemote> {
        self.ctl.clone()
    }

    /// Report once a second until the generator ends, then give the
    /// receiver 300 ms for the last packets in flight and stop it.
    pub fn wait(self, tick: &mut dyn FnMut(&Tick<'_>)) -> Result<GenOutcome, String> {
        let t0 = Instant::now();
        let mut last = vec![0u64; self.names.len()];
        // Only the generator's end ends it (a stop ends the generator).
        let never = AtomicBool::new(false);
        let mut w = Watch::new(&never, None);
        while let Some(second) = w.next() {
            if self.worker.is_finished() {
                break;
            }
            if let Some(dt) = second {
                let now = self.ctl.sent_packets();
                let pps: Vec<f64> = now
                    .iter()
                    .zip(&last)
                    .map(|(n, o)| (n - o) as f64 / dt)
                    .collect();
                tick(&Tick {
                    t: t0.elapsed().as_secs_f64(),
                    names: &self.names,
                    sent: &now,
                    sent_bytes: &self.ctl.sent_bytes(),
                    pps: &pps,
                });
                last = now;
            }
        }
        let (end, gen) = self
            .worker
            .join()
            .map_err(|_| "generator thread panicked".to_string())??;
        let rx = match self.rx {
            None => None,
            Some((done, h)) => {
                std::thread::sleep(Duration::from_millis(300));
                done.store(true, Ordering::SeqCst);
                Some(
                    h.join()
                        .map_err(|_| "receiver thread panicked".to_string())?,
                )
            }
        };
        Ok(GenOutcome { end, gen, rx })
    }
}

impl GenOutcome {
    /// The receiver's report, if it ran and did not fail.
    fn rx_report(&self) -> Option<crate::receiver::Report> {
        self.rx
            .as_ref()
            .and_then(|r| r.as_ref().ok())
            .map(|r| r.final_report())
    }

    /// The report as one JSON object.
    pub fn json(&self) -> Value {
        let end = &self.end;
        let rows: Vec<Value> = end
            .stats
            .iter()
            .map(|s| {
                let d = &s.departures;
                json!({
                    "stream": s.name, "id": s.id, "sent": s.sent_pkts, "bytes": s.sent_bytes, "sampled": s.sampled_pkts,
                    "achieved_pps": d.achieved_pps(), "mean_gap_ns": d.mean_gap_ns(), "gap_stddev_ns": d.gap_stddev_ns(),
                    "gap_min_ns": (d.gaps > 0).then_some(d.gap_min_ns), "gap_max_ns": (d.gaps > 0).then_some(d.gap_max_ns),
                    "gap_log2_buckets": d.buckets,
                })
            })
            .collect();
        let mut v = json!({
            "elapsed_s": end.elapsed_s, "tx_ring_full_retries": end.tx_ring_full,
            "tx_kernel": end.kernel.counters, "streams": rows,
        });
        if let Some(r) = self.rx_report() {
            v["rx"] = r.to_json();
        }
        v
    }

    /// The report as text: one line per stream, then the receiver's.
    pub fn text(&self) -> String {
        let end = &self.end;
        let mut o = format!(
            "sent in {:.2} s (departure times measured at send; jitter = std. dev. of the gaps):\n",
            end.elapsed_s
        );
        o += &format!(
            "  {:<12} {:>12} {:>14} {:>12} {:>12} {:>12}\n",
            "stream", "packets", "achieved pps", "mean gap", "jitter", "max gap"
        );
        let ns = |x: Option<f64>| x.map_or_else(|| "-".into(), |v| format!("{v:.0} ns"));
        for s in &end.stats {
            let d = &s.departures;
            o += &format!(
                "  {:<12} {:>12} {:>14} {:>12} {:>12} {:>12}\n",
                s.name,
                s.sent_pkts,
                d.achieved_pps()
                    .map_or_else(|| "-".into(), |p| format!("{p:.0}")),
                ns(d.mean_gap_ns()),
                ns(d.gap_stddev_ns()),
                if d.gaps > 0 {
                    format!("{} ns", d.gap_max_ns)
                } else {
                    "-".into()
                }
            );
        }
        if end.tx_ring_full > 0 {
            o += &format!(
                "  (the port's TX ring was full {} times; those packets were retried, not dropped)\n",
                end.tx_ring_full
            );
        }
        if let Some(r) = self.rx_report() {
            o += "received (same process):\n";
            o += &r.to_text();
        }
        o
    }
}
