//! The RFC 2544 procedures (section 26): throughput, latency, frame loss
//! rate and back-to-back frames, over any [`Trials`] (the real test bed in
//! [`super::trial`], a simulated DuT in the tests).
//!
//! Method (after FD.io CSIT and RFC 2544):
//! - every trial sends an exact number of frames at a fixed rate (the
//!   in-kernel generator paces them one by one), then stops, lets the
//!   DuT's queues drain, and only then reads the counters: loss is
//!   frames sent minus frames counted at the sink, not a rate difference;
//! - **throughput** (26.1): a probe at the generator's top speed gives the
//!   highest offered rate G and the DuT's forwarding rate at overload F;
//!   the search starts just under F (the best guess of where loss starts),
//!   then bisects between the highest rate that passed and the lowest that
//!   failed until they are within `resolution` of each other; a trial
//!   passes when its loss ratio is at most `loss_tolerance` (0: RFC 2544's
//!   zero loss). After a failed trial with nothing passed yet, the next
//!   rate is the rate that trial forwarded (CSIT's MLRsearch idea): the
//!   search needs a handful of trials, not log2(G / resolution). Unless
//!   `strict`, a trial that lost a little (under [`SMALL_LOSS`] of its
//!   frames) is run once more and the rate passes if the repeat passes:
//!   MLRsearch's goal exceed ratio of 50 % (draft-ietf-bmwg-mlrsearch),
//!   which keeps a rare stall of the machine (a few ms in which a ring
//!   overflows) from ending a search far below the DuT's capacity. Further
//!   searches (repetitions) start from scratch: their own probe, no
//!   knowledge of the earlier results, so their spread is the method's;
//! - **latency** (26.2): a trial at the throughput found, every n-th frame
//!   timestamped in the generator and its one-way latency histogrammed at
//!   the sink;
//! - **frame loss rate** (26.3): trials at 100 %, 90 %, ... of G until two
//!   successive trials lose nothing;
//! - **back-to-back** (26.4): bursts at G of a binary-searched length, the
//!   longest burst forwarded without loss.
//!
//! Every trial is kept ([`TrialRecord`]), with the kernel's own interface
//! counters for the same trial ([`KernelCheck`]).
//!
//! A trial counts only when it is valid ([`TrialRecord::validate`]): the
//! frames received are the generator's own of this trial, each once
//! (verified at the sink; duplicates fail the trial, foreign and late
//! frames are not counted); a paced trial offered at least
//! (1 - [`OFFERED_TOLERANCE`]) of the requested rate, and its generator
//! never fell further behind its schedule than the DuT's rings can absorb
//! ([`LATE_BUDGET_FRAMES`] frames: the catch-up leaves as one burst); a
//! generator later than that does not catch up: its schedule slips
//! ([`max_lag`]: past half the budget, latency trials past
//! [`LATENCY_MAX_LAG`]) and the gaps may take at most [`THROUGHPUT_SLIP_TOLERANCE`]
//! of the trial ([`SLIP_TOLERANCE`] for latency trials); the
//! kernel's counters of g0, d0, d1 and s0 agree with ours within
//! [`KERNEL_TOLERANCE_PCT`]; a trial that lost frames had none dropped on
//! the sink side, between the DuT and the sink's count (the bed's loss,
//! not the DuT's: [`KernelCheck::sink_side_dropped`]). An invalid trial
//! is kept, marked `repeated`, and run again, up to [`INVALID_REPEATS`]
//! times; one still invalid then counts as a fail (a rate that cannot be
//! offered cleanly is not credited).
//!
//! A rate cap ([`Rfc2544Config::max_rate`], `--max-rate`) bounds every
//! trial: the probe and the back-to-back bursts run paced at the cap
//! instead of the generator's top speed, and no procedure asks for more;
//! a size whose probe at the cap passed is marked as a bound
//! ([`SizeResult::rate_capped`], with `generator_limited`: ">=").

//! Files: `record` (a trial and its validity), `config` (the parameters),
//! `search` (the throughput search and the final trials' step-down),
//! `procedures` (the passes, a size's procedures, the finish), `result`
//! (a size's figures and the re-run spread), `notes` (what the figures need
//! said beside them); `tests` runs them against model DuTs.

mod config;
mod notes;
mod procedures;
mod record;
mod result;
mod search;
#[cfg(test)]
mod tests;

pub use config::*;
pub use notes::*;
pub use procedures::*;
pub use record::*;
pub use result::*;
use search::*;

use serde::Serialize;
use std::time::Duration;
