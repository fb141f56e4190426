//! The procedures' parameters ([`Rfc2544Config`]), the rate cap and the
//! defaults.

use super::*;

/// Parameters of the procedures.
#[derive(Clone, Debug, Serialize)]
pub struct Rfc2544Config {
    /// Frame sizes on the wire (FCS included).
    pub sizes: Vec<u32>,
    /// Sending time of a throughput / frame-loss / latency trial.
    pub trial: Duration,
    /// Largest loss ratio a throughput trial may have and pass (0: none):
    /// the non-drop rate (NDR) with 0.
    pub loss_tolerance: f64,
    /// Largest loss ratio of the partial-drop rate (PDR), found by the
    /// same search (FD.io CSIT's MLRsearch: 0.5 %); at least `loss_tolerance`.
    pub pdr_loss: f64,
    /// Every failed throughput trial fails its rate (RFC 2544 to the
    /// letter). Otherwise a trial that lost under [`SMALL_LOSS`] of its
    /// frames is repeated once and the rate passes if the repeat does.
    pub strict: bool,
    /// The search ends when (fail - pass) <= resolution * fail.
    pub resolution: f64,
    /// Independent throughput searches per size (the result is their
    /// median; min and max are the spread).
    pub repetitions: usize,
    /// Most trials one search may use.
    pub max_search_trials: usize,
    /// Run the latency trial after each throughput search.
    pub latency: bool,
    /// Latency trials per size (RFC 2544 26.2 asks for 20; merged).
    pub latency_trials: usize,
    /// Idle time before every trial after the first, for the DuT to
    /// restabilise (RFC 2544 section 23: at least 5 s). The drain after a
    /// trial already waits for the DuT's queues to empty.
    pub settle: Duration,
    /// A confirmation trial of this length at the reported NDR and PDR
    /// (FD.io CSIT's final trial duration; [`finish_size`]); if it fails,
    /// the rate steps down ([`FINAL_STEPS`] at most) until a final-length
    /// trial passes. None: the figures rest on the search's trials.
    pub final_trial: Option<Duration>,
    /// Sizes that get the frame-loss-rate procedure.
    pub frame_loss_sizes: Vec<u32>,
    /// Step of offered load for frame loss (fraction, RFC 2544: 0.1).
    pub frame_loss_step: f64,
    /// Sizes that get the back-to-back procedure.
    pub back_to_back_sizes: Vec<u32>,
    /// Longest burst tried, as time at the generator's top speed.
    pub back_to_back_max: Duration,
    /// Back-to-back searches per size (RFC 2544 asks for 50; the mean is reported).
    pub back_to_back_trials: usize,
    /// The most the bench offers (`--max-rate`; None: the generator's top
    /// speed): the probe and the back-to-back bursts are paced at it and
    /// no trial asks for more.
    pub max_rate: Option<MaxRate>,
    /// The empty bed's p50 latency (ns), when measured: a DuT's p50 at its
    /// NDR far above it flags a standing queue ([`STANDING_QUEUE_P50_NS`]).
    pub empty_bed_p50_ns: Option<f64>,
}

/// A rate cap: frames/s, or a bit rate on the wire, which is a frame rate
/// at each size (L1: frame, FCS, preamble and inter-frame gap, as a link's
/// speed counts; L2: frame and FCS).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MaxRate {
    Pps(f64),
    Bps { bps: f64, l1: bool },
}

/// The least rate cap, frames/s: the readiness and check trials send 2000
/// frames (2 s here) and a search needs some frames per trial.
pub const MIN_CAP_PPS: f64 = 1000.0;

/// Bytes of preamble, start delimiter and inter-frame gap per frame.
pub(super) const L1_OVERHEAD: f64 = 20.0;

impl MaxRate {
    /// Frames/s at `size` (bytes on the wire with FCS; the IMIX's mean).
    pub fn pps(&self, size: u32) -> f64 {
        match *self {
            MaxRate::Pps(p) => p,
            MaxRate::Bps { bps, l1 } => {
                let extra = if l1 { L1_OVERHEAD } else { 0.0 };
                bps / 8.0 / (crate::frame_size::wire_bytes(size) + extra)
            }
        }
    }
}

impl Rfc2544Config {
    /// The cap at `size` (frames/s), if there is one.
    pub fn cap(&self, size: u32) -> Option<f64> {
        self.max_rate.map(|m| m.pps(size))
    }

    /// `rate` under the cap (None, the generator's top speed: the cap).
    pub fn capped(&self, size: u32, rate: Option<f64>) -> Option<f64> {
        match (rate, self.cap(size)) {
            (Some(r), Some(c)) => Some(r.min(c)),
            (r, c) => r.or(c),
        }
    }
}

impl Default for Rfc2544Config {
    fn default() -> Self {
        Rfc2544Config {
            sizes: STANDARD_SIZES.to_vec(),
            trial: Duration::from_secs(1),
            loss_tolerance: 0.0,
            pdr_loss: PDR_LOSS,
            strict: false,
            resolution: 0.01,
            repetitions: 1,
            max_search_trials: 16,
            latency: true,
            latency_trials: 1,
            settle: Duration::ZERO,
            final_trial: None,
            frame_loss_sizes: vec![64],
            frame_loss_step: 0.1,
            back_to_back_sizes: vec![64],
            back_to_back_max: Duration::from_millis(500),
            back_to_back_trials: 2,
            max_rate: None,
            empty_bed_p50_ns: None,
        }
    }
}

/// The final trial's length by default: long enough that a DuT's rings
/// (thousands of frames: milliseconds at these rates) cannot hide a
/// backlog, short enough for the README's main command (28 min with it on
/// 2 AMD EPYC vCPUs; FD.io CSIT uses 30 s, RFC 2544 suggests 60 for a
/// formal result: `--final-trial 60`).
pub const DEFAULT_FINAL_TRIAL: Duration = Duration::from_secs(10);

/// The partial-drop rate's loss ratio by default (FD.io CSIT's PDR).
pub const PDR_LOSS: f64 = 0.005;

/// RFC 2544 section 9.1's frame sizes for Ethernet, plus 1280 (IPv6's minimum MTU).
pub const STANDARD_SIZES: [u32; 7] = [64, 128, 256, 512, 1024, 1280, 1518];

/// `linerate bench`'s sizes by default: the smallest and the largest of
/// [`STANDARD_SIZES`] (a final trial per figure costs 10 s or more: with
/// 512 B too the main command took 28 minutes on 2 AMD EPYC vCPUs, with
/// all seven it would take over an hour; `--sizes` adds them).
pub const DEFAULT_SIZES: [u32; 2] = [64, 1518];
