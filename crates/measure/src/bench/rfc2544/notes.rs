//! What a size's figures need said beside them: invalid and lossy trials,
//! unconfirmed or stepped-down results, empty searches, standing queues.

use super::*;

/// What the summary should say about a size beyond its numbers: trials
/// that were invalid, a latency trial that lost frames or stayed invalid,
/// frames the sink did not count (foreign, late, duplicated).
pub fn size_notes(s: &SizeResult) -> Vec<String> {
    let mut n = Vec::new();
    if s.rate_capped {
        n.push("the probe at the rate cap (--max-rate) passed: a lower bound".into());
    }
    let invalid = s.trials.iter().filter(|t| !t.invalid.is_empty()).count();
    let counted_invalid = s
        .trials
        .iter()
        .filter(|t| {
            !t.invalid.is_empty()
                && !t.repeated
                && matches!(t.procedure, Procedure::Throughput | Procedure::Probe)
        })
        .count();
    if invalid > 0 {
        n.push(format!(
            "{invalid} invalid trial(s) repeated{}",
            if counted_invalid > 0 {
                format!(", {counted_invalid} throughput trial(s) still invalid (counted as fails)")
            } else {
                String::new()
            }
        ));
    }
    // Every latency trial (at the NDR and at the common load) is checked.
    let lat: Vec<(usize, &TrialRecord)> = s
        .latency_trials
        .iter()
        .chain(&s.common_latency_trials)
        .filter_map(|&i| s.trials.get(i).map(|t| (i, t)))
        .collect();
    let lossy: Vec<String> = lat
        .iter()
        .filter(|(_, t)| t.lost > 0)
        .map(|(_, t)| format!("{} of {} at {}", t.lost, t.sent, mpps(rate_of(t))))
        .collect();
    if !lossy.is_empty() {
        n.push(format!(
            "{} of {} latency trial(s) lost frames ({}): a backlog, their latency is not the DuT's at an even load",
            lossy.len(),
            lat.len(),
            lossy.join(", ")
        ));
    }
    let invalid_lat: Vec<String> = lat
        .iter()
        .filter(|(_, t)| !t.invalid.is_empty())
        .map(|(_, t)| t.invalid.join("; "))
        .collect();
    if !invalid_lat.is_empty() {
        n.push(format!(
            "{} latency trial(s) invalid: {}",
            invalid_lat.len(),
            invalid_lat.join(" | ")
        ));
    }
    let bad: u64 = lat
        .iter()
        .filter_map(|(_, t)| t.latency.as_ref())
        .map(|l| l.bad_stamps)
        .sum();
    if bad > 0 {
        n.push(format!("{bad} bad TX stamps left out"));
    }
    let sum = |f: fn(&Verification) -> u64| s.trials.iter().map(|t| f(&t.verify)).sum::<u64>();
    let (foreign, stale, dup) = (sum(|v| v.foreign), sum(|v| v.stale), sum(|v| v.duplicates));
    if foreign + stale + dup > 0 {
        n.push(format!(
            "not counted: {foreign} foreign, {stale} late from an earlier trial, {dup} duplicated frames"
        ));
    }
    // The final trials that lost frames, with the host's steal beside
    // each: on a guest, what a long trial at a rate short ones passed
    // meets (a stall of the DuT's CPU).
    let lossy_final: Vec<String> = s
        .final_trials
        .iter()
        .filter_map(|&i| s.trials.get(i))
        .filter(|t| t.lost > 0 && t.invalid.is_empty() && !t.repeated)
        .map(|t| {
            let steal = t.steal_text();
            format!(
                "{} of {} at {}{}",
                t.lost,
                t.sent,
                mpps(rate_of(t)),
                match (t.steal_ms.is_empty(), steal.is_empty()) {
                    (true, _) => String::new(),
                    (false, true) => " (the host's steal: none)".to_string(),
                    (false, false) => format!(" ({steal})"),
                }
            )
        })
        .collect();
    if !lossy_final.is_empty() {
        n.push(format!(
            "final trial(s) that lost frames: {}",
            lossy_final.join(", ")
        ));
    }
    let fin = |c: Option<bool>, what: &str, now: Option<f64>, was: Option<f64>| {
        match (c, now, was) {
        (Some(false), _, Some(w)) => Some(format!(
            "no final trial passed at the {what} of the searches ({}) or the steps under it ({FINAL_STEPS} steps, {FINAL_TRIALS_PER_SIZE} final trials a size at most): the {what} rests on the search's {:.1} s trials, unconfirmed",
            mpps(w),
            s.ndr_trial_s
        )),
        (Some(true), Some(v), Some(w)) if v < w * 0.9999 => Some(format!(
            "the {what} stepped down from the searches' {} to {} in final trials",
            mpps(w),
            mpps(v)
        )),
        _ => None,
    }
    };
    n.extend(fin(
        s.ndr_confirmed,
        "NDR",
        s.throughput_pps,
        s.search_throughput_pps,
    ));
    n.extend(fin(s.pdr_confirmed, "PDR", s.pdr_pps, s.search_pdr_pps));
    if s.empty_searches > 0 {
        n.push(format!(
            "{} of {} search(es) found no rate without loss (not in the median)",
            s.empty_searches,
            s.searches.len()
        ));
    }
    for (i, x) in s.searches.iter().enumerate() {
        if !x.converged {
            n.push(format!(
                "search {} ran out of trials before the resolution",
                i + 1
            ));
        }
    }
    if let Some(q) = &s.standing_queue {
        n.push(q.clone());
    }
    n
}

/// Frames still arriving this long after the generator stopped, in a
/// trial that lost none: a queue that stood through the trial (the drain
/// polls every 20 ms and waits 10 ms more once everything is in).
pub const STANDING_QUEUE_DRAIN_MS: f64 = 50.0;

/// A p50 latency at the NDR this far above the empty bed's: a queue that
/// stands (the bed's own is ~1 us; a DuT forwarding without a backlog
/// adds tens of us: its batches).
pub const STANDING_QUEUE_P50_NS: f64 = 100_000.0;

/// Signs of a standing queue at the reported NDR ([`SizeResult::standing_queue`]).
pub(super) fn standing_queue(r: &SizeResult, empty_p50_ns: Option<f64>) -> Option<String> {
    let ndr = r.throughput_pps.filter(|&v| v > 0.0)?;
    let mut why = Vec::new();
    let at_ndr = |x: &&TrialRecord| {
        x.lost == 0 && x.invalid.is_empty() && (rate_of(x) - ndr).abs() <= 1e-6 * ndr
    };
    if let Some(x) = r
        .trials
        .iter()
        .filter(|x| x.procedure == Procedure::Throughput)
        .filter(at_ndr)
        .max_by(|a, b| a.drain_ms.total_cmp(&b.drain_ms))
        .filter(|x| x.drain_ms > STANDING_QUEUE_DRAIN_MS)
    {
        why.push(format!(
            "frames arrived for {:.0} ms after the generator stopped in a passing {:.1} s trial",
            x.drain_ms, x.tx_seconds
        ));
    }
    let base = empty_p50_ns.unwrap_or(0.0);
    if let Some(l) = r
        .latency()
        .filter(|l| l.p50_ns > base + STANDING_QUEUE_P50_NS)
    {
        why.push(format!(
            "p50 latency at the NDR {:.0} us against {:.1} us of the empty bed",
            l.p50_ns / 1e3,
            base / 1e3
        ));
    }
    (!why.is_empty()).then(|| format!("a standing queue: {}", why.join("; ")))
}
