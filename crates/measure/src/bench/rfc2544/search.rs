//! The throughput search (MLRsearch-style, NDR then PDR from the same
//! trials) and the final trials' step-down.

use super::*;

/// One throughput search from the bounds of its probe (trial `probe` of
/// `r`): (the generator's top speed, what the DuT forwarded at it).
pub(super) fn search(
    cfg: &Rfc2544Config,
    t: &mut dyn Trials,
    r: &mut SizeResult,
    rep: usize,
    probe: usize,
    (max_offered, overload_forwarded): (f64, f64),
    progress: Progress,
) -> Result<Search, String> {
    let size = r.frame_size;
    let mut lo = 0.0f64; // highest rate that passed
    let mut hi = max_offered; // lowest rate that failed (the probe)
                              // Whether `hi` is the bed's bound, not the DuT's: the trial there
                              // stayed invalid (the generator could not offer the rate cleanly, the
                              // sink side dropped, the counters disagreed), so nothing says the DuT
                              // fails there, and a result under it is a lower bound.
    let mut hi_bed = !r.trials[probe].invalid.is_empty();
    // The lowest rate the DuT itself failed (a valid trial): a bed's bound
    // under it by no more than the resolution makes no lower bound (the
    // DuT's limit is known to the search's precision).
    let mut dut_fail = if hi_bed { f64::INFINITY } else { hi };
    let mut s = Search {
        throughput_pps: 0.0,
        lowest_fail_pps: Some(hi),
        trials: vec![probe],
        converged: false,
        pdr_pps: 0.0,
        pdr_lowest_fail_pps: Some(hi),
        generator_limited: false,
        pdr_generator_limited: false,
    };
    // Start just under the forwarding rate at overload.
    let mut next = overload_forwarded * (1.0 - cfg.resolution / 2.0);
    let mut up = 4.0 * cfg.resolution;
    // Whether this search failed a trial before its first pass.
    let mut failed = false;
    // Below this the DuT forwards (next to) nothing: stop.
    let floor = (hi * 1e-4).max(100.0);
    for _ in 0..cfg.max_search_trials.max(1) {
        if t.stopped() || hi - lo <= cfg.resolution * hi || hi < floor {
            break;
        }
        // Keep the candidate strictly inside (lo, hi), away from the edges
        // (by 5 % of the span, at most a quarter resolution: a small step
        // up from a pass must stay small).
        let margin = ((hi - lo) * 0.05).min(cfg.resolution * hi / 4.0);
        let c = next.clamp(lo + margin, hi - margin).max(1.0);
        let label = format!("search {}: {}", rep + 1, mpps(c));
        let ts = spec(size, Procedure::Throughput, Some(c), cfg);
        let mut rec = valid_trial(t, r, &ts, &label, progress)?;
        // A small loss is repeated where a false fail would cost much:
        // before anything passed in a first search (the next rate would be
        // far lower) or while the bisection's bounds are far apart. Near
        // the end a fail moves the result by a few resolutions at most,
        // and every fail just above the capacity is a small loss: repeating
        // those would double the trials there.
        let costly = lo == 0.0 || c - lo > SMALL_LOSS_SPAN * cfg.resolution * c;
        if !cfg.strict
            && costly
            && rec.loss_ratio < SMALL_LOSS
            && !passes(&rec, cfg)
            && rec.invalid.is_empty()
            && rec.sent > 0
            && !t.stopped()
        {
            progress(
                size,
                &format!(
                    "search {}: {} -> {}: a small loss, repeated once (exceed ratio 50 %)",
                    rep + 1,
                    mpps(c),
                    loss_text(&rec)
                ),
            );
            rec.repeated = true;
            r.push(rec);
            rec = valid_trial(t, r, &ts, &label, progress)?;
        }
        let ok = passes(&rec, cfg);
        let bed = bed_bound(&rec);
        // What got through: for a trial the generator could not offer, at
        // most what it did offer.
        let (fwd, loss) = (rec.forwarded_pps.min(rec.offered_pps), rec.loss_ratio);
        let loss_line = format!("{} {}", loss_text(&rec), verdict(&rec, ok));
        s.trials.push(r.push(rec));
        progress(
            size,
            &format!("search {}: {} -> {loss_line}", rep + 1, mpps(c)),
        );
        if ok {
            lo = c;
            next = if hi == max_offered {
                // Only the probe failed so far: the capacity is most likely
                // just above the overload forwarding rate, not half way to
                // the generator's top speed. Step up a few resolutions,
                // doubling the step on each pass (a low first pass is left
                // behind fast).
                let n = lo * (1.0 + up.min(1.0));
                up *= 2.0;
                n
            } else {
                (lo + hi) / 2.0
            };
        } else {
            hi = c;
            hi_bed = bed;
            if !bed {
                dut_fail = dut_fail.min(c);
            }
            next = if lo == 0.0 {
                // Nothing passed yet. After the search's first fail, which
                // offered just under the overload forwarding rate and lost
                // more than a stall would: aim just under what it forwarded
                // (the capacity, to within what the DuT's queues let
                // through). Later: aim there only when the trial lost a lot,
                // else halve (a DuT that loses a little at every rate would
                // otherwise creep down by its loss ratio per trial).
                let aim = fwd * (1.0 - cfg.resolution);
                let n = if !failed && loss >= SMALL_LOSS {
                    aim
                } else {
                    aim.min(hi * 0.5)
                };
                failed = true;
                n.max(hi * 0.1)
            } else {
                (lo + hi) / 2.0
            };
        }
    }
    s.throughput_pps = lo;
    s.lowest_fail_pps = Some(hi);
    // Converged: the bounds met the resolution, or the DuT forwards next to
    // nothing (an empty search, said as such in the summary).
    s.converged = hi - lo <= cfg.resolution * hi || hi < floor;
    s.generator_limited = lo > 0.0 && hi_bed && dut_fail > hi * (1.0 + cfg.resolution);
    partial_drop_rate(cfg, t, r, &mut s, rep, progress)?;
    Ok(s)
}

/// A trial that stayed invalid for the bed's reasons (the generator
/// offered short, fell behind or slipped; the sink side dropped; the
/// counters disagreed): it says nothing of the DuT at its rate. (More
/// frames received than sent is the DuT's doing: a fail.)
pub(super) fn bed_bound(t: &TrialRecord) -> bool {
    !t.invalid.is_empty() && t.received <= t.sent
}

/// Gaps in a trial's schedule from which on its generator fell short
/// because of the rate, not of a stall of the machine (a stall leaves a
/// few long gaps: 8-15 of ~10 ms in a 10 s trial on the 2-CPU guest).
pub const RATE_SLIPS: u64 = 100;

/// An invalid trial at `rate` that lost nothing and whose generator
/// sustained less than the rate over its span (gaps included), in at
/// least [`RATE_SLIPS`] gaps: the generator, not the DuT, fell short, and
/// would again at this rate.
fn generator_fell_short(t: &TrialRecord, rate: f64) -> bool {
    bed_bound(t)
        && t.lost == 0
        && t.gen_slips >= RATE_SLIPS
        && t.sustained_pps() < rate * (1.0 - OFFERED_TOLERANCE)
}

/// A valid trial that lost at most the PDR's loss and duplicated nothing.
pub(super) fn passes_pdr(t: &TrialRecord, cfg: &Rfc2544Config) -> bool {
    t.sent > 0
        && t.invalid.is_empty()
        && t.verify.duplicates == 0
        && t.loss_ratio <= cfg.pdr_loss.max(cfg.loss_tolerance)
}

/// The rate a trial was asked for (its offered rate at top speed).
pub(super) fn rate_of(t: &TrialRecord) -> f64 {
    t.requested_pps.unwrap_or(t.offered_pps)
}

/// The partial-drop rate of a finished NDR search `s`, as MLRsearch finds
/// both in one search: its bounds come from the trials the search made,
/// the upper one first: the lowest rate whose valid trial lost more than
/// `pdr_loss` (a fail below a pass is not ignored: the lower bound is the
/// highest pass under it, at least the NDR); then it bisects between them
/// to the resolution. So PDR >= NDR always. A trial that stayed invalid
/// is the bed's bound, not a fail; the PDR is a lower bound when no valid
/// trial above it failed.
pub(super) fn partial_drop_rate(
    cfg: &Rfc2544Config,
    t: &mut dyn Trials,
    r: &mut SizeResult,
    s: &mut Search,
    rep: usize,
    progress: Progress,
) -> Result<(), String> {
    let size = r.frame_size;
    let counted = |i: &&usize| !r.trials[**i].repeated;
    // The lowest fail of the DuT's (valid trials), and of the bed's.
    let lowest = |bed: bool| {
        s.trials
            .iter()
            .filter(counted)
            .map(|&i| &r.trials[i])
            .filter(|x| !passes_pdr(x, cfg) && bed_bound(x) == bed)
            .map(rate_of)
            .filter(|&c| c > s.throughput_pps)
            .reduce(f64::min)
    };
    let (dut_hi, bed_hi) = (lowest(false), lowest(true));
    let mut hi = match (dut_hi, bed_hi) {
        (Some(d), Some(b)) => Some(d.min(b)),
        (d, b) => d.or(b),
    };
    let mut hi_bed = hi.is_some() && hi == bed_hi && bed_hi != dut_hi;
    let under = hi.unwrap_or(f64::INFINITY);
    let mut lo = s
        .trials
        .iter()
        .filter(counted)
        .map(|&i| &r.trials[i])
        .filter(|x| passes_pdr(x, cfg))
        .map(rate_of)
        .filter(|&c| c < under)
        .fold(s.throughput_pps, f64::max);
    let floor = (r.max_offered_pps * 1e-4).max(100.0);
    let mut n = 0;
    while let Some(h) = hi {
        if t.stopped() || h - lo <= cfg.resolution * h || h < floor || n >= cfg.max_search_trials {
            break;
        }
        n += 1;
        let c = (lo + h) / 2.0;
        let label = format!("search {} PDR: {}", rep + 1, mpps(c));
        let ts = spec(size, Procedure::Throughput, Some(c), cfg);
        let rec = valid_trial(t, r, &ts, &label, progress)?;
        let ok = passes_pdr(&rec, cfg);
        let bed = bed_bound(&rec);
        progress(
            size,
            &format!(
                "{label} -> {} {} (PDR: loss <= {} %)",
                loss_text(&rec),
                verdict(&rec, ok),
                cfg.pdr_loss * 100.0
            ),
        );
        s.trials.push(r.push(rec));
        if ok {
            lo = c;
        } else {
            hi = Some(c);
            hi_bed = bed;
        }
    }
    s.pdr_pps = lo;
    s.pdr_lowest_fail_pps = hi;
    // No fail above it, or only the bed's: a lower bound (the probe at the
    // top speed lost no more than the PDR's loss: the top speed is ">=").
    // (A DuT's fail within a resolution above a bed's bound: the DuT's
    // limit is known to the search's precision, no bound.)
    let dut_near = dut_hi.is_some_and(|d| hi.is_some_and(|h| d <= h * (1.0 + cfg.resolution)));
    s.pdr_generator_limited = lo > 0.0 && (hi.is_none() || (hi_bed && !dut_near));
    Ok(())
}

/// Trials of length `d` from `rate` down until one passes `ok`, never
/// under `floor`, and no trial once the size has [`FINAL_TRIALS_PER_SIZE`]
/// final trials from `first` on. After a valid fail that lost much (at
/// least [`RING_LOSS`]: the DuT's rings overflowed), the next rate is under
/// what it forwarded (a long trial's forwarding rate is the DuT's sustained
/// one: a short search's result that rested on a ring's depth comes down in
/// one step); after one that lost little (a stall of the machine longer
/// than the rings absorb at this rate, not the rate itself: forwarding
/// says nothing), halfway down to the highest pass, or to half the rate
/// when nothing passed; after an invalid one under what the generator
/// sustained. After a pass the trials go halfway back up to the lowest
/// fail while it is more than [`SMALL_LOSS_SPAN`] resolutions above. No
/// small-loss repeat: a final trial is the long one a loss is judged by.
/// An invalid final trial is run once more, except one where the
/// generator fell short and the DuT lost nothing (the next rate is lower).
/// (The highest rate that passed, or None; whether a valid trial failed:
/// the DuT itself was found to lose above the result.)
#[allow(clippy::too_many_arguments)]
pub(super) fn step_down(
    cfg: &Rfc2544Config,
    t: &mut dyn Trials,
    r: &mut SizeResult,
    d: Duration,
    mut rate: f64,
    floor: f64,
    ok: &dyn Fn(&TrialRecord) -> bool,
    what: &str,
    first: usize,
    progress: Progress,
) -> Result<(Option<f64>, bool), String> {
    let long = Rfc2544Config {
        trial: d,
        ..cfg.clone()
    };
    let mut dut_failed = false;
    let (mut lo, mut hi): (Option<f64>, Option<f64>) = (None, None);
    let spent = |r: &SizeResult| r.final_trials.len().saturating_sub(first);
    for _ in 0..=FINAL_STEPS {
        if t.stopped() || rate < floor.max(1.0) {
            break;
        }
        if spent(r) >= FINAL_TRIALS_PER_SIZE {
            progress(
                r.frame_size,
                &format!("{what}: {FINAL_TRIALS_PER_SIZE} final trials run for this size"),
            );
            break;
        }
        let label = format!(
            "final trial {:.0} s at the {what}, {}",
            d.as_secs_f64(),
            mpps(rate)
        );
        let ts = spec(r.frame_size, Procedure::Throughput, Some(rate), &long);
        // An invalid final trial is run once more, not twice: each repeat
        // costs the final length. Not one the generator could not keep up
        // with at this rate (it fell short over the trial's span in many
        // gaps, and the DuT lost nothing): at the same rate it falls short
        // again (on the 2-CPU bed an XDP DuT's work runs in the
        // generator's softirq: 10 s trials at 2.7-4.4 Mpps slipped in 138
        // to 16 097 gaps); a lower rate is what can pass. A few long gaps
        // (a stall of the machine: 8-15 of ~10 ms) are repeated.
        let mut rec = t.trial(&ts)?;
        if !rec.invalid.is_empty()
            && !t.stopped()
            && spent(r) + 1 < FINAL_TRIALS_PER_SIZE
            && !generator_fell_short(&rec, rate)
        {
            progress(
                r.frame_size,
                &format!("{label}: invalid ({}): repeated", rec.invalid.join("; ")),
            );
            rec.repeated = true;
            let i = r.push(rec);
            r.final_trials.push(i);
            rec = t.trial(&ts)?;
        }
        let pass = ok(&rec);
        progress(
            r.frame_size,
            &format!("{label} -> {} {}", loss_text(&rec), verdict(&rec, pass)),
        );
        let (fwd, sustained, bed) = (rec.forwarded_pps, rec.sustained_pps(), bed_bound(&rec));
        let loss = rec.loss_ratio;
        let i = r.push(rec);
        r.final_trials.push(i);
        let next = if pass {
            lo = Some(rate);
            // Back up while the lowest fail is far above.
            match hi {
                Some(h) if h - rate > SMALL_LOSS_SPAN * cfg.resolution * h => (rate + h) / 2.0,
                _ => break,
            }
        } else if bed {
            // Going back up and the bed failed: the pass stands.
            if lo.is_some() {
                break;
            }
            // Still invalid for the bed's reasons other than an offer short
            // of the rate, gaps included (the generator fell behind, the
            // sink side dropped): a lower rate would not make the bed
            // cleaner. Unconfirmed.
            if sustained >= rate * (1.0 - OFFERED_TOLERANCE) {
                progress(
                    r.frame_size,
                    &format!("{label}: the bed could not run a valid final trial"),
                );
                break;
            }
            sustained.min(rate) * (1.0 - cfg.resolution)
        } else {
            dut_failed = true;
            hi = Some(hi.map_or(rate, |h: f64| h.min(rate)));
            let n = if loss >= RING_LOSS {
                fwd * (1.0 - cfg.resolution)
            } else {
                (lo.unwrap_or(0.0) + rate) / 2.0
            };
            let n = n.min(rate * (1.0 - cfg.resolution));
            // Within a resolution of a pass: that pass is the result.
            if lo.is_some_and(|l| n <= l * (1.0 + cfg.resolution)) {
                break;
            }
            n
        };
        rate = next;
    }
    Ok((lo, dut_failed))
}
