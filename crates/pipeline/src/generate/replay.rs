//! `linerate gen --replay FILE`: a pcap/pcapng file as the source, paced by
//! its own timestamps (or a rate), forwarded to the port by the forwarder's
//! loop.

use crate::fwd::{run_loop, Direction, Polling};
use linerate_io::{OpenOptions, PortRole};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A replay: the file, how fast, how often, and where to.
#[derive(Clone, Debug)]
pub struct Replay {
    pub file: PathBuf,
    pub port: String,
    /// A speed factor ("2", "top"), as the pcap port's `speed=`.
    pub speed: Option<String>,
    /// Packets per second instead of the file's timing.
    pub pps: Option<f64>,
    pub loops: Option<u32>,
    pub duration: Option<f64>,
    pub batch: usize,
}

/// What a replay did.
pub struct Replayed {
    pub file: PathBuf,
    pub read: u64,
    pub sent: u64,
    pub dropped: u64,
    pub elapsed_s: f64,
}

impl Replay {
    /// Replay until the file (and its loops) ends, the duration or `stop`.
    pub fn run(&self, stop: &Arc<AtomicBool>) -> Result<Replayed, String> {
        let mut q = vec!["mode=read".to_string()];
        if let Some(s) = &self.speed {
            q.push(format!("speed={s}"));
        }
        if let Some(pps) = self.pps {
            q.push(format!("rate={pps}"));
        }
        if let Some(l) = self.loops {
            q.push(format!("loop={l}"));
        }
        let uri = format!("pcap:{}?{}", self.file.display(), q.join("&"));
        let opts = OpenOptions {
            batch: self.batch,
            ..OpenOptions::default()
        };
        let src = linerate_io::open(
            &uri,
            &OpenOptions {
                role: PortRole::RxOnly,
                ..opts.clone()
            },
        )
        .map_err(|e| e.to_string())?;
        let dst = linerate_io::open(
            &self.port,
            &OpenOptions {
                role: PortRole::TxOnly,
                ..opts
            },
        )
        .map_err(|e| e.to_string())?;
        let mut d = Direction::new("replay", src.rx, dst.tx, None, self.batch);
        let counters = d.counters.clone();
        let t0 = Instant::now();
        if let Some(dur) = self.duration {
            // A timer thread, not a check in the loop: the loop stays the
            // forwarder's own.
            let s = stop.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_secs_f64(dur));
                s.store(true, Ordering::SeqCst);
            });
        }
        run_loop(&mut [&mut d], stop, Polling::Wait, false).map_err(|e| e.to_string())?;
        let s = counters.snapshot();
        Ok(Replayed {
            file: self.file.clone(),
            read: s.received,
            sent: s.passed,
            dropped: s.dropped(),
            elapsed_s: t0.elapsed().as_secs_f64(),
        })
    }
}

impl Replayed {
    pub fn json(&self) -> Value {
        json!({"mode": "replay", "file": self.file, "read": self.read, "sent": self.sent,
               "dropped": self.dropped, "elapsed_s": self.elapsed_s})
    }

    pub fn text(&self) -> String {
        format!(
            "replayed {} of {} packets from {} in {:.2} s ({:.3} Mpps); dropped: {}",
            self.sent,
            self.read,
            self.file.display(),
            self.elapsed_s,
            self.sent as f64 / self.elapsed_s.max(1e-9) / 1e6,
            self.dropped
        )
    }
}
