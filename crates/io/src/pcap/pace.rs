//! Replay pacing: top speed, the file's own timing times a factor, or a fixed rate.

use std::time::Instant;

use crate::error::PortError;

use super::*;

#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Pace {
    Top,
    Speed(f64),
    Rate(f64),
}

impl Pace {
    pub(super) fn from_uri(uri: &Uri) -> Result<Pace, PortError> {
        let speed = uri.get("speed");
        let rate = uri.get("rate");
        match (speed, rate) {
            (Some(_), Some(_)) => Err(uri.err("give either 'speed' or 'rate', not both")),
            (None, None) | (Some("top"), None) => Ok(Pace::Top),
            (Some("original"), None) => Ok(Pace::Speed(1.0)),
            (Some(s), None) => match s.parse::<f64>() {
                Ok(x) if x.is_finite() && x > 0.0 => Ok(Pace::Speed(x)),
                _ => Err(uri.err(format!(
                    "bad value '{s}' for parameter 'speed' (top, original or a positive multiplier)"
                ))),
            },
            (None, Some(r)) => match r.parse::<f64>() {
                Ok(x) if x.is_finite() && x > 0.0 => Ok(Pace::Rate(x)),
                _ => Err(uri.err(format!(
                    "bad value '{r}' for parameter 'rate' (packets per second, > 0)"
                ))),
            },
        }
    }
    pub(super) fn describe(&self) -> String {
        match self {
            Pace::Top => "top speed".into(),
            Pace::Speed(x) if *x == 1.0 => "original timing".into(),
            Pace::Speed(x) => format!("{x}x original timing"),
            Pace::Rate(r) => format!("{r} packets/s"),
        }
    }
}

/// Computes when each packet is due, in ns since the first `recv()`.
pub(super) struct Pacer {
    pub(super) pace: Pace,
    pub(super) start: Option<Instant>,
    /// File time of the first packet of the pass, and its due time.
    pub(super) base_ts: Option<u64>,
    pub(super) base_due: u64,
    pub(super) last_due: u64,
    pub(super) count: u64,
}

impl Pacer {
    pub(super) fn due(&mut self, ts: u64) -> u64 {
        let d = match self.pace {
            Pace::Top => 0,
            Pace::Speed(x) => {
                let b = *self.base_ts.get_or_insert(ts);
                self.base_due + (ts.saturating_sub(b) as f64 / x) as u64
            }
            Pace::Rate(r) => (self.count as f64 * 1e9 / r) as u64,
        };
        self.count += 1;
        self.last_due = d;
        d
    }
    pub(super) fn new_pass(&mut self) {
        self.base_ts = None;
        self.base_due = self.last_due;
    }
}

// ---------------------------------------------------------------------------
// The RX half of a read-mode port.
