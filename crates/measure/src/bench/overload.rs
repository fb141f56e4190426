//! The forwarding rate at overload (`linerate bench --overload`, the
//! overload study): each DuT on a fresh bed, the generator at its top
//! speed, the sink's count over a timed window after a warm-up.

use super::dut::{Dut, DutEnv, DutError};
use super::{
    bed_name, failed, gs_stop_join, pin, place_napi, rfc2544, sleep_unless, stopped, udp_frame,
};
use crate::testbed::{FrameAddrs, Testbed, TestbedConfig};
use linerate_io::xdp::count::XdpCount;
use linerate_io::xdp::generator::{self, GenConfig, XdpGen};
use linerate_io::xdp::AttachMode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How to run the bench.
#[derive(Clone, Debug)]
pub struct BenchConfig {
    /// Frame size without FCS (60 = a 64-byte frame on the wire).
    pub frame_len: usize,
    pub warmup: Duration,
    pub duration: Duration,
    /// Repetitions per DuT (the table shows the median and the spread).
    pub repeat: usize,
    pub gen_cpu: usize,
    pub dut_cpu: usize,
    /// UDP source ports to cycle through (flows).
    pub flows: u32,
    /// Threaded NAPI with d0/d1 pinned to `dut_cpu` and g0/s0 to
    /// `gen_cpu`. Off: veth receive work runs as softirq on the CPU that
    /// sent the frame (the generator's for d0), as on a default system.
    pub threaded_napi: bool,
    /// RPS of d0 to `dut_cpu` ([`TestbedConfig::rps_cpu`]): the kernel
    /// DuTs' forwarding runs on the DuT's core. Off: it runs in the
    /// generator's softirq on the generator's core.
    pub rps: bool,
    pub env: DutEnv,
    /// Test bed names: this prefix + a counter (None: unique default names).
    pub bed_prefix: Option<String>,
    /// The most the generator offers (`--max-rate`; None: its top speed).
    pub max_rate: Option<rfc2544::MaxRate>,
}

/// One measured trial.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Trial {
    pub offered_pps: f64,
    pub forwarded_pps: f64,
    pub sink_packets: u64,
    pub window_s: f64,
    pub gen_sent: u64,
    /// Packets counted by the kernel on s0 (rx_packets) in the window, as an independent check.
    pub sink_iface_packets: u64,
    pub dut_account: Option<serde_json::Value>,
}

/// The result for one DuT.
#[derive(Clone, Debug, serde::Serialize)]
pub struct DutResult {
    pub name: String,
    pub description: String,
    /// "ok", "skipped: ...", "failed: ..."
    pub status: String,
    pub trials: Vec<Trial>,
    /// Median forwarded rate over the trials (packets/s).
    pub median_pps: Option<f64>,
    pub min_pps: Option<f64>,
    pub max_pps: Option<f64>,
}

/// Progress callback: (dut name, what is happening).
pub type Progress<'a> = &'a mut dyn FnMut(&str, &str);

/// Run every DuT in turn; `stop` ends early (the current trial is abandoned).
pub fn run(
    cfg: &BenchConfig,
    duts: &mut [Box<dyn Dut>],
    stop: &Arc<AtomicBool>,
    progress: Progress,
) -> Vec<DutResult> {
    let mut out = Vec::new();
    for d in duts.iter_mut() {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let mut trials = Vec::new();
        let mut status = "ok".to_string();
        for rep in 0..cfg.repeat.max(1) {
            if stop.load(Ordering::SeqCst) {
                break;
            }
            progress(
                &d.name(),
                &format!("trial {}/{}", rep + 1, cfg.repeat.max(1)),
            );
            match trial(cfg, d.as_mut(), stop) {
                Ok(t) => trials.push(t),
                Err(e) => {
                    status = e.to_string();
                    break;
                }
            }
        }
        let mut rates: Vec<f64> = trials.iter().map(|t| t.forwarded_pps).collect();
        rates.sort_by(|a, b| a.total_cmp(b));
        let median = (!rates.is_empty()).then(|| rates[rates.len() / 2]);
        progress(&d.name(), &status);
        out.push(DutResult {
            name: d.name(),
            description: d.describe(),
            status,
            min_pps: rates.first().copied(),
            max_pps: rates.last().copied(),
            median_pps: median,
            trials,
        });
    }
    out
}

/// One trial: fresh bed, DuT up, generator on, count, tear everything down.
fn trial(cfg: &BenchConfig, d: &mut dyn Dut, stop: &Arc<AtomicBool>) -> Result<Trial, DutError> {
    let bed_cfg = TestbedConfig {
        // GRO on: veth runs NAPI on d0/s0 even without an XDP program.
        // Threaded NAPI (optional): the DuT's receive work runs in kthreads
        // that place_napi() pins to the DuT's core, not on the generator's.
        gro: Some(true),
        threaded_napi: cfg.threaded_napi,
        name: bed_name(cfg),
        rps_cpu: cfg.rps.then_some(cfg.dut_cpu),
        ..TestbedConfig::default()
    };
    // Registered with the watchdog of the process (crate::guard) by `up`.
    let mut bed = Testbed::up(&bed_cfg).map_err(failed)?;
    stopped(stop)?;
    let ns_sink = bed.ns_sink().to_string();
    let ns_gen = bed.ns_gen().to_string();
    let sink = bed
        .in_netns(&ns_sink, || {
            XdpCount::attach("s0", AttachMode::Native, false)
        })
        .map_err(failed)?
        .map_err(|e| failed(format!("sink counter: {e}")))?;
    d.start(&mut bed, &cfg.env)?;
    // After the DuT started: attaching XDP re-creates a veth's NAPI thread.
    if cfg.threaded_napi {
        place_napi(&bed, cfg).map_err(failed)?;
    }
    let result = (|| {
        stopped(stop)?;
        let a = FrameAddrs::for_mode(bed.info(), d.mode());
        let frame = udp_frame(&a, cfg.frame_len);
        let gstop = Arc::new(AtomicBool::new(false));
        let total = cfg.warmup + cfg.duration + Duration::from_secs(2);
        let (gen_cpu, flows, max_rate) = (cfg.gen_cpu, cfg.flows, cfg.max_rate);
        let frame_len = cfg.frame_len;
        let gs = gstop.clone();
        let outer_stop = stop.clone();
        let ns = ns_gen.clone();
        let gen_thread = std::thread::spawn(move || {
            crate::testbed::in_netns(&ns, move || -> Result<generator::GenStats, String> {
                pin(gen_cpu);
                let mut g = XdpGen::new(
                    "g0",
                    &frame,
                    GenConfig {
                        flows,
                        ..GenConfig::default()
                    },
                )
                .map_err(|e| e.to_string())?;
                g.set_rate(max_rate.map(|m| m.pps(frame_len as u32 + 4)))
                    .map_err(|e| e.to_string())?;
                // Stop on either flag: the trial's or the user's.
                let both = Arc::new(AtomicBool::new(false));
                let b2 = both.clone();
                let watcher = std::thread::spawn(move || {
                    while !gs.load(Ordering::SeqCst) && !outer_stop.load(Ordering::SeqCst) {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    b2.store(true, Ordering::SeqCst);
                });
                let r = linerate_pipeline::generate::xdp::send_for(&mut g, total, &both)
                    .map_err(|e| e.to_string());
                both.store(true, Ordering::SeqCst);
                gs_stop_join(watcher);
                r
            })
        });
        sleep_unless(cfg.warmup, stop);
        // Offered and forwarded over one window: g0's transmitted frames
        // (the kernel's count) and the sink's, read together at its ends.
        // (The generator's own rate, frames over its whole run, holds the
        // gaps between its calls and the warm-up: it read under what was
        // forwarded, 3.889 against 3.966 Mpps.)
        let g0 = || bed.iface_stats(&ns_gen, "g0").map_err(failed);
        let o0 = g0()?;
        let c0 = sink.read().map_err(failed)?;
        let i0 = bed.iface_stats(&ns_sink, "s0").map_err(failed)?;
        let t0 = Instant::now();
        sleep_unless(cfg.duration, stop);
        let o1 = g0()?;
        let c1 = sink.read().map_err(failed)?;
        let i1 = bed.iface_stats(&ns_sink, "s0").map_err(failed)?;
        let window = t0.elapsed().as_secs_f64();
        gstop.store(true, Ordering::SeqCst);
        let g = gen_thread
            .join()
            .map_err(|_| failed("generator thread panicked"))?
            .map_err(failed)?
            .map_err(|e| failed(format!("generator: {e}")))?;
        if stop.load(Ordering::SeqCst) {
            return Err(failed("interrupted"));
        }
        let pk = c1.packets - c0.packets;
        let offered = o1.tx_packets.saturating_sub(o0.tx_packets);
        Ok(Trial {
            offered_pps: offered as f64 / window,
            forwarded_pps: pk as f64 / window,
            sink_packets: pk,
            window_s: window,
            gen_sent: g.sent,
            sink_iface_packets: i1.rx_packets.saturating_sub(i0.rx_packets),
            dut_account: None,
        })
    })();
    let acct = d.stop(&bed);
    drop(sink);
    let _ = bed.down();
    let mut t = result?;
    t.dut_account = acct?;
    Ok(t)
}
