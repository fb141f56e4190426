//! RFC 2544 section 26's procedures over [`Trials`]: the passes over the
//! sizes, a size's probe and first search, the finish (final trials and
//! the latency at the NDR), frame loss, back-to-back, the common-load
//! latency.

use super::*;

/// Progress: (frame size, what is happening).
pub type Progress<'a> = &'a mut dyn FnMut(u32, &str);

/// Run the procedures at every configured size. With repetitions, the
/// first search at every size comes first (with the frame-loss and
/// back-to-back procedures), then the further searches in further passes
/// over the sizes: the repetitions of a size are spread over the run, so
/// their spread also holds what drifts with time (the machine's load).
/// The last pass finishes each size ([`finish_size`]): final trials at the
/// reported NDR and PDR, then the latency at the NDR.
/// (The bench spreads them further: it runs each pass over every DuT,
/// through [`first_pass`] and [`further_pass`].)
pub fn run(
    cfg: &Rfc2544Config,
    t: &mut dyn Trials,
    progress: Progress,
) -> Result<Vec<SizeResult>, String> {
    let reps = cfg.repetitions.max(1);
    let mut out = first_pass(cfg, t, reps == 1, progress)?;
    for rep in 1..reps {
        further_pass(cfg, t, &mut out, rep, rep + 1 == reps, progress)?;
    }
    Ok(out)
}

/// Every procedure at every size, with the first throughput search; with
/// `finish` (the only pass), each size is finished ([`finish_size`]).
pub fn first_pass(
    cfg: &Rfc2544Config,
    t: &mut dyn Trials,
    finish: bool,
    progress: Progress,
) -> Result<Vec<SizeResult>, String> {
    let mut out = Vec::new();
    for &size in &cfg.sizes {
        if t.stopped() {
            break;
        }
        let mut r = run_size(cfg, t, size, progress)?;
        if finish {
            finish_size(cfg, t, &mut r, progress)?;
        }
        out.push(r);
    }
    Ok(out)
}

/// Throughput search number `rep` (from 0; 0 is the first pass's) at
/// every size of a first pass; with `finish` (the last pass), each size is
/// then finished ([`finish_size`]).
pub fn further_pass(
    cfg: &Rfc2544Config,
    t: &mut dyn Trials,
    sizes: &mut [SizeResult],
    rep: usize,
    finish: bool,
    progress: Progress,
) -> Result<(), String> {
    for r in sizes.iter_mut() {
        if t.stopped() {
            break;
        }
        let s = repetition(cfg, t, r, rep, progress)?;
        r.searches.push(s);
        r.summarise(cfg);
        if finish {
            finish_size(cfg, t, r, progress)?;
        }
    }
    Ok(())
}

/// A further throughput search at a size (`rep` counts from 0), made from
/// scratch: its own probe at the generator's top speed (which is the
/// result if it passes) and a search from that probe's bounds, knowing
/// nothing of the earlier searches, so their spread is the method's own.
pub(super) fn repetition(
    cfg: &Rfc2544Config,
    t: &mut dyn Trials,
    r: &mut SizeResult,
    rep: usize,
    progress: Progress,
) -> Result<Search, String> {
    let size = r.frame_size;
    progress(size, &format!("search {}: top speed", rep + 1));
    let probe = valid_trial(
        t,
        r,
        &spec(size, Procedure::Probe, None, cfg),
        "top speed",
        progress,
    )?;
    let bounds = probe_bounds(cfg, &probe);
    let passed = passes(&probe, cfg);
    let i = r.push(probe);
    if passed {
        return Ok(Search::top_speed(bounds.0, i));
    }
    search(cfg, t, r, rep, i, bounds, progress)
}

/// A trial at `rate` (None: the top speed), under the cap.
pub(super) fn spec(
    size: u32,
    procedure: Procedure,
    rate: Option<f64>,
    cfg: &Rfc2544Config,
) -> TrialSpec {
    let rate = cfg.capped(size, rate);
    TrialSpec {
        frame_size: size,
        rate_pps: rate,
        frames: rate.map(|r| ((r * cfg.trial.as_secs_f64()).round() as u64).max(1)),
        duration: cfg.trial,
        latency: false,
        procedure,
    }
}

/// A valid trial that lost no more than the tolerance and duplicated nothing.
pub(super) fn passes(t: &TrialRecord, cfg: &Rfc2544Config) -> bool {
    t.sent > 0
        && t.invalid.is_empty()
        && t.verify.duplicates == 0
        && t.loss_ratio <= cfg.loss_tolerance
}

/// A trial, run again while it is invalid (at most [`INVALID_REPEATS`]
/// times; the invalid ones are kept in `r`, marked `repeated`).
pub(super) fn valid_trial(
    t: &mut dyn Trials,
    r: &mut SizeResult,
    s: &TrialSpec,
    what: &str,
    progress: Progress,
) -> Result<TrialRecord, String> {
    let mut rec = t.trial(s)?;
    for _ in 0..INVALID_REPEATS {
        if rec.invalid.is_empty() || t.stopped() {
            break;
        }
        progress(
            s.frame_size,
            &format!("{what}: invalid ({}): repeated", rec.invalid.join("; ")),
        );
        rec.repeated = true;
        r.push(rec);
        rec = t.trial(s)?;
    }
    Ok(rec)
}

/// A probe's bounds for a search: (the highest rate offered, never above
/// the cap; what the DuT forwarded at it).
pub(super) fn probe_bounds(cfg: &Rfc2544Config, probe: &TrialRecord) -> (f64, f64) {
    let cap = cfg.cap(probe.frame_size).unwrap_or(f64::INFINITY);
    (probe.offered_pps.min(cap), probe.forwarded_pps.min(cap))
}

/// The probe offered the cap (the generator reached it): a pass there is
/// the cap's limit, not the generator's.
pub(super) fn at_cap(cfg: &Rfc2544Config, probe: &TrialRecord) -> bool {
    cfg.cap(probe.frame_size)
        .is_some_and(|c| probe.offered_pps >= c * (1.0 - OFFERED_TOLERANCE))
}

pub(super) fn mpps(v: f64) -> String {
    format!("{:.3} Mpps", v / 1e6)
}

/// A trial's verdict for the progress lines, with the reason of a fail
/// that lost nothing ("loss 0.0000 % fail" said neither why nor what):
/// still invalid after its repeats, or frames duplicated.
pub(super) fn verdict(rec: &TrialRecord, pass: bool) -> String {
    if pass {
        "pass".into()
    } else if !rec.invalid.is_empty() {
        format!("fail (still invalid: {})", rec.invalid.join("; "))
    } else if rec.verify.duplicates > 0 {
        format!("fail ({} duplicated frames)", rec.verify.duplicates)
    } else {
        "fail".into()
    }
}

/// A trial's loss for the progress lines: the ratio, and the frames when
/// any were lost (a fail at "0.0000 %" reads as a contradiction: 7 frames
/// of 37 million are 0.00002 %).
pub(super) fn loss_text(rec: &TrialRecord) -> String {
    if rec.lost == 0 {
        format!("loss {:.4} %", rec.loss_ratio * 100.0)
    } else {
        // A loss with the host's steal beside it: on a guest, a stall of
        // the DuT's CPU longer than its rings absorb.
        let steal = rec.steal_text();
        let sep = if steal.is_empty() { "" } else { "; " };
        format!(
            "loss {:.4} % ({} frames{sep}{steal})",
            rec.loss_ratio * 100.0,
            rec.lost
        )
    }
}

/// The procedures at one frame size but the final trials and the latency
/// ([`finish_size`], after the last search): the probe, the first
/// throughput search, frame loss and back-to-back.
pub fn run_size(
    cfg: &Rfc2544Config,
    t: &mut dyn Trials,
    size: u32,
    progress: Progress,
) -> Result<SizeResult, String> {
    let mut r = SizeResult::new(size);
    progress(
        size,
        &match cfg.cap(size) {
            Some(c) => format!("probe at the rate cap, {}", mpps(c)),
            None => "probe at the generator's top speed".into(),
        },
    );
    let probe = valid_trial(
        t,
        &mut r,
        &spec(size, Procedure::Probe, None, cfg),
        "probe",
        progress,
    )?;
    if probe.sent == 0 {
        if t.stopped() {
            return Ok(r);
        }
        return Err(format!(
            "{}: the generator sent nothing at top speed",
            crate::frame_size::label_b(size)
        ));
    }
    (r.max_offered_pps, r.overload_forwarded_pps) = probe_bounds(cfg, &probe);
    let probe_passed = passes(&probe, cfg);
    let at_cap = at_cap(cfg, &probe);
    r.push(probe);
    progress(
        size,
        &format!(
            "top speed {} offered, {} forwarded",
            mpps(r.max_offered_pps),
            mpps(r.overload_forwarded_pps)
        ),
    );
    if !t.stopped() {
        let s = if probe_passed {
            r.rate_capped = at_cap;
            Search::top_speed(r.max_offered_pps, 0)
        } else {
            let bounds = (r.max_offered_pps, r.overload_forwarded_pps);
            search(cfg, t, &mut r, 0, 0, bounds, progress)?
        };
        r.searches.push(s);
        r.summarise(cfg);
    }
    if cfg.frame_loss_sizes.contains(&size) && !t.stopped() {
        frame_loss(cfg, t, &mut r, progress)?;
    }
    if cfg.back_to_back_sizes.contains(&size) {
        for _ in 0..cfg.back_to_back_trials.max(1) {
            if t.stopped() {
                break;
            }
            let b = back_to_back(cfg, t, &mut r, progress)?;
            r.back_to_back.push(b);
        }
    }
    Ok(r)
}

/// Finish a size after its last search: confirm the reported NDR and PDR
/// with final trials (`final_trial`; FD.io CSIT's final trial, RFC 2544's
/// 60 s: short search trials pass a DuT whose rings absorb their
/// overload), stepping down until a final-length trial passes; then the
/// latency trials at the reported NDR; then look for a standing queue.
pub fn finish_size(
    cfg: &Rfc2544Config,
    t: &mut dyn Trials,
    r: &mut SizeResult,
    progress: Progress,
) -> Result<(), String> {
    if let (Some(d), Some(ndr)) = (cfg.final_trial, r.throughput_pps.filter(|&v| v > 0.0)) {
        r.search_throughput_pps = r.throughput_pps;
        r.search_pdr_pps = r.pdr_pps;
        let pdr = r.pdr_pps.unwrap_or(ndr).max(ndr);
        let first = r.final_trials.len();
        let pass_ndr = |x: &TrialRecord| passes(x, cfg);
        let (got, dut_failed) =
            step_down(cfg, t, r, d, ndr, 0.0, &pass_ndr, "NDR", first, progress)?;
        r.ndr_confirmed = Some(got.is_some());
        if let Some(v) = got {
            r.throughput_pps = Some(v);
            r.ndr_trial_s = d.as_secs_f64();
            // A valid final trial lost above it: the DuT's own limit.
            r.generator_limited &= !dut_failed;
        }
        let ndr = r.throughput_pps.unwrap_or(ndr);
        if got.is_some() {
            r.final_bracket = r.final_trials[first..]
                .iter()
                .map(|&i| &r.trials[i])
                .filter(|x| !x.repeated && !bed_bound(x) && !passes(x, cfg))
                .map(rate_of)
                .filter(|&c| c > ndr)
                .reduce(f64::min)
                .map(|c| c / ndr - 1.0);
        }
        let finals = || {
            r.final_trials[first..]
                .iter()
                .map(|&i| &r.trials[i])
                .filter(|x| !x.repeated)
        };
        // The highest of the NDR's final trials that lost no more than the
        // PDR's loss: the PDR is at least that, confirmed at length.
        let pdr_seen = finals()
            .filter(|x| passes_pdr(x, cfg))
            .map(rate_of)
            .reduce(f64::max);
        // A final trial the generator could not keep up (offered short
        // over its span, gaps included): the PDR's start no higher than
        // the step under what it sustained.
        let bed_ceiling = finals()
            .filter(|x| bed_bound(x) && x.sustained_pps() < rate_of(x) * (1.0 - OFFERED_TOLERANCE))
            .map(|x| x.sustained_pps() * (1.0 - cfg.resolution))
            .reduce(f64::min);
        let pdr = match bed_ceiling {
            Some(c) if c < pdr => c.max(ndr),
            _ => pdr,
        };
        // A final trial already run at the PDR (or within a resolution
        // under it) that lost no more than the PDR's loss confirms it.
        let by_ndr = pdr_seen.is_some_and(|v| v >= pdr * (1.0 - cfg.resolution));
        // The NDR's final trials ended on one the bed could not run
        // validly: the PDR's would too (unconfirmed, not tried).
        let bed_stopped = got.is_none()
            && r.final_trials
                .last()
                .is_some_and(|&i| bed_bound(&r.trials[i]));
        if bed_stopped {
            r.pdr_confirmed = Some(false);
        } else if by_ndr || pdr <= ndr * (1.0 + cfg.resolution) {
            r.pdr_confirmed = r.ndr_confirmed.map(|c| c || by_ndr);
            if by_ndr || got.is_some() {
                r.pdr_trial_s = d.as_secs_f64();
            }
            let seen = pdr_seen.filter(|_| by_ndr).unwrap_or(pdr);
            r.pdr_pps = Some(pdr.min(seen).max(ndr));
            r.pdr_generator_limited &= r.generator_limited || by_ndr;
        } else {
            let pass_pdr = |x: &TrialRecord| passes_pdr(x, cfg);
            // Never under what a final trial already confirmed.
            let known = match (got, pdr_seen) {
                (Some(_), Some(v)) => Some(v.max(ndr)),
                (Some(_), None) => Some(ndr),
                (None, v) => v,
            };
            let floor = known.unwrap_or(0.0);
            let (gotp, failed) =
                step_down(cfg, t, r, d, pdr, floor, &pass_pdr, "PDR", first, progress)?;
            match (gotp, known) {
                (Some(v), _) => {
                    r.pdr_confirmed = Some(true);
                    r.pdr_pps = Some(v);
                    r.pdr_trial_s = d.as_secs_f64();
                    r.pdr_generator_limited &= !failed;
                }
                // Stepped to (or ran out of final trials above) a rate a
                // final trial passed the PDR at: the NDR's, or one of its
                // steps that lost no more than the PDR's loss.
                (None, Some(v)) => {
                    r.pdr_confirmed = Some(true);
                    r.pdr_pps = Some(v);
                    r.pdr_trial_s = d.as_secs_f64();
                    r.pdr_generator_limited = r.generator_limited;
                }
                (None, None) => r.pdr_confirmed = Some(false),
            }
        }
    }
    if cfg.latency && !t.stopped() {
        latency_at_ndr(cfg, t, r, progress)?;
    }
    r.standing_queue = standing_queue(r, cfg.empty_bed_p50_ns);
    Ok(())
}

/// RFC 2544 26.2: `latency_trials` trials at the reported NDR, merged.
pub(super) fn latency_at_ndr(
    cfg: &Rfc2544Config,
    t: &mut dyn Trials,
    r: &mut SizeResult,
    progress: Progress,
) -> Result<(), String> {
    let Some(tp) = r.throughput_pps.filter(|&v| v > 0.0) else {
        return Ok(());
    };
    let size = r.frame_size;
    let n = cfg.latency_trials.max(1);
    for k in 0..n {
        if t.stopped() {
            break;
        }
        progress(
            size,
            &if n > 1 {
                format!("latency at {} ({}/{n})", mpps(tp), k + 1)
            } else {
                format!("latency at {}", mpps(tp))
            },
        );
        let mut s = spec(size, Procedure::Latency, Some(tp), cfg);
        s.latency = true;
        let rec = valid_trial(t, r, &s, "latency", progress)?;
        let i = r.push(rec);
        r.latency_trial.get_or_insert(i);
        r.latency_trials.push(i);
    }
    if r.latency_trials.len() > 1 {
        r.latency_merged = Latency::merge(
            r.latency_trials
                .iter()
                .filter_map(|&i| r.trials[i].latency.as_ref()),
        );
    }
    Ok(())
}

/// RFC 2544 26.3: from 100 % of the top speed down in steps until two
/// successive trials lose nothing.
pub(super) fn frame_loss(
    cfg: &Rfc2544Config,
    t: &mut dyn Trials,
    r: &mut SizeResult,
    progress: Progress,
) -> Result<(), String> {
    let step = cfg.frame_loss_step.clamp(0.01, 1.0);
    let mut zero_run = 0;
    let mut k = 0usize;
    loop {
        let frac = 1.0 - step * k as f64;
        if frac < step / 2.0 || t.stopped() {
            break;
        }
        k += 1;
        let rate = r.max_offered_pps * frac;
        if rate < 1.0 {
            break;
        }
        let label = format!("frame loss at {:.0} %", frac * 100.0);
        let fs = spec(r.frame_size, Procedure::FrameLoss, Some(rate), cfg);
        let rec = valid_trial(t, r, &fs, &label, progress)?;
        let loss = if rec.sent == 0 { 0.0 } else { rec.loss_ratio };
        let (offered, invalid) = (rec.offered_pps, !rec.invalid.is_empty());
        r.push(rec);
        progress(
            r.frame_size,
            &format!(
                "frame loss at {:.0} % ({}): {:.3} %",
                frac * 100.0,
                mpps(rate),
                loss * 100.0
            ),
        );
        r.frame_loss.push((frac, offered, loss, invalid));
        if loss == 0.0 && !invalid {
            zero_run += 1;
            if zero_run == 2 {
                break;
            }
        } else {
            zero_run = 0;
        }
    }
    Ok(())
}

/// Latency at `rate` (the same for every DuT of a run, under the slowest
/// one's throughput), so that DuTs are compared at one load and not each
/// at its own throughput: `latency_trials` trials, merged.
pub fn common_latency(
    cfg: &Rfc2544Config,
    t: &mut dyn Trials,
    r: &mut SizeResult,
    rate: f64,
    progress: Progress,
) -> Result<(), String> {
    let n = cfg.latency_trials.max(1);
    let rate = cfg.capped(r.frame_size, Some(rate)).unwrap_or(rate);
    r.common_latency_pps = Some(rate);
    for k in 0..n {
        if t.stopped() {
            break;
        }
        progress(
            r.frame_size,
            &format!("latency at the common load {} ({}/{n})", mpps(rate), k + 1),
        );
        let mut s = spec(r.frame_size, Procedure::Latency, Some(rate), cfg);
        s.latency = true;
        let rec = valid_trial(t, r, &s, "latency at the common load", progress)?;
        let i = r.push(rec);
        r.common_latency_trials.push(i);
    }
    r.common_latency_merged = Latency::merge(
        r.common_latency_trials
            .iter()
            .filter_map(|&i| r.trials[i].latency.as_ref()),
    );
    Ok(())
}

/// RFC 2544 26.4: the longest burst at the top speed (under a cap: the
/// highest rate offered) forwarded without loss.
pub(super) fn back_to_back(
    cfg: &Rfc2544Config,
    t: &mut dyn Trials,
    r: &mut SizeResult,
    progress: Progress,
) -> Result<Burst, String> {
    let max = ((r.max_offered_pps * cfg.back_to_back_max.as_secs_f64()) as u64).max(2);
    let burst = |t: &mut dyn Trials,
                 r: &mut SizeResult,
                 n: u64,
                 progress: Progress|
     -> Result<bool, String> {
        let s = TrialSpec {
            frame_size: r.frame_size,
            // Under a cap: at the highest rate its probe offered.
            rate_pps: cfg.cap(r.frame_size).map(|_| r.max_offered_pps),
            frames: Some(n),
            duration: cfg.trial,
            latency: false,
            procedure: Procedure::BackToBack,
        };
        let rec = valid_trial(t, r, &s, &format!("back-to-back {n}"), progress)?;
        let ok =
            rec.sent == n && rec.lost == 0 && rec.invalid.is_empty() && rec.verify.duplicates == 0;
        r.push(rec);
        Ok(ok)
    };
    if burst(t, r, max, progress)? {
        progress(r.frame_size, &format!("back-to-back: {max} frames pass"));
        return Ok(Burst {
            frames: max,
            at_least: true,
        });
    }
    // Geometric bisection: burst lengths span decades (a ring's worth to millions).
    let (mut lo, mut hi) = (0u64, max);
    for _ in 0..40 {
        if t.stopped() || hi - lo <= 1 || (lo > 0 && (hi - lo) as f64 <= 0.01 * hi as f64) {
            break;
        }
        let c = if lo == 0 {
            (hi / 16).max(1)
        } else {
            (((lo as f64) * (hi as f64)).sqrt() as u64).clamp(lo + 1, hi - 1)
        };
        if burst(t, r, c, progress)? {
            lo = c;
        } else {
            hi = c;
        }
    }
    progress(r.frame_size, &format!("back-to-back: {lo} frames"));
    Ok(Burst {
        frames: lo,
        at_least: false,
    })
}
