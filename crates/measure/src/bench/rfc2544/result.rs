//! What the procedures found at a frame size ([`SizeResult`]): the
//! searches, their median and bounds, the baselines, and the re-run spread.

use super::*;

/// One throughput search.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Search {
    /// Highest rate that passed (0 when none did).
    pub throughput_pps: f64,
    /// Lowest rate that failed (None: the generator's top speed passed,
    /// the throughput is at least `throughput_pps`).
    pub lowest_fail_pps: Option<f64>,
    /// Trials used (indexes into [`SizeResult::trials`]).
    pub trials: Vec<usize>,
    /// The passing and failing rates ended within the resolution (or the
    /// generator's top speed passed); false: the search ran out of trials.
    pub converged: bool,
    /// The partial-drop rate: the highest rate whose valid trial lost at
    /// most `pdr_loss` (the search's own trials first, then bisected to
    /// the resolution); >= `throughput_pps`.
    pub pdr_pps: f64,
    /// The lowest rate that lost more than `pdr_loss` (None: the
    /// generator's top speed lost no more).
    pub pdr_lowest_fail_pps: Option<f64>,
    /// The NDR is a lower bound: the search's upper bound is not a rate
    /// the DuT failed but one the bed could not offer or measure (the
    /// probe at the generator's top speed passed; or the trials above the
    /// result stayed invalid: the generator offered short or fell behind,
    /// the sink side dropped). ">=" wherever it is shown.
    #[serde(default)]
    pub generator_limited: bool,
    /// The same for the PDR: no rate above it lost more than `pdr_loss` in
    /// a valid trial.
    #[serde(default)]
    pub pdr_generator_limited: bool,
}

impl Search {
    /// A search that ended at its probe: the generator's top speed passed
    /// (both rates are the top speed, lower bounds).
    pub(super) fn top_speed(pps: f64, probe: usize) -> Search {
        Search {
            throughput_pps: pps,
            lowest_fail_pps: None,
            trials: vec![probe],
            converged: true,
            pdr_pps: pps,
            pdr_lowest_fail_pps: None,
            generator_limited: true,
            pdr_generator_limited: true,
        }
    }
}

/// Back-to-back result of one search.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Burst {
    /// Longest burst forwarded without loss (frames).
    pub frames: u64,
    /// True when even the longest burst tried passed (a lower bound).
    pub at_least: bool,
}

/// Everything measured at one frame size.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct SizeResult {
    /// Bytes on the wire with FCS, or [`crate::frame_size::IMIX`] ("imix" in JSON).
    #[serde(with = "crate::frame_size::serde_size")]
    pub frame_size: u32,
    /// The generator's top speed (offered at overload).
    pub max_offered_pps: f64,
    /// What the DuT forwarded at overload.
    pub overload_forwarded_pps: f64,
    pub searches: Vec<Search>,
    /// Median of the searches' throughput (the mean of the middle two for
    /// an even number); min and max across them.
    pub throughput_pps: Option<f64>,
    pub throughput_min_pps: Option<f64>,
    pub throughput_max_pps: Option<f64>,
    /// The search's own uncertainty: the gap to the lowest failed rate (pps).
    pub resolution_pps: Option<f64>,
    /// Median, min and max of the searches' partial-drop rates (PDR;
    /// `throughput_pps` is the non-drop rate, NDR).
    pub pdr_pps: Option<f64>,
    pub pdr_min_pps: Option<f64>,
    pub pdr_max_pps: Option<f64>,
    /// The NDR shown is a lower bound (">="): a search behind it
    /// ([`Search::generator_limited`]) ended at what the generator could
    /// offer or the bed could measure, not at a rate the DuT failed.
    pub generator_limited: bool,
    /// The same for the PDR.
    #[serde(default)]
    pub pdr_generator_limited: bool,
    /// Searches that found no rate that passed (the DuT lost frames at
    /// every rate tried): a result of their own, said as such, and not in
    /// the median (which is of the other searches; 0 when all are empty).
    #[serde(default)]
    pub empty_searches: usize,
    /// The median of the searches before the final trials (short trials):
    /// what `throughput_pps` and `pdr_pps` were before confirming.
    #[serde(default)]
    pub search_throughput_pps: Option<f64>,
    #[serde(default)]
    pub search_pdr_pps: Option<f64>,
    /// Seconds of traffic of the trials the NDR and the PDR rest on: the
    /// final trial's length when one confirmed it, else the search's.
    #[serde(default)]
    pub ndr_trial_s: f64,
    #[serde(default)]
    pub pdr_trial_s: f64,
    /// With final trials: whether one passed at (or stepped down to) the
    /// NDR, the PDR (None: no final trial, or nothing to confirm).
    #[serde(default)]
    pub ndr_confirmed: Option<bool>,
    #[serde(default)]
    pub pdr_confirmed: Option<bool>,
    /// The final trials (indexes into `trials`), NDR's then PDR's.
    #[serde(default)]
    pub final_trials: Vec<usize>,
    /// The final trials moved the NDR: the lowest rate above it at which a
    /// valid final trial lost, relative to it, less one (the NDR lies in
    /// that bracket; a re-run's final trials may land anywhere in it, so
    /// the stated spread is at least this: [`repeat_spread`]).
    #[serde(default)]
    pub final_bracket: Option<f64>,
    /// A passing trial at the NDR held a standing queue: frames still
    /// arrived long after the generator stopped, or the latency at the NDR
    /// is far above the empty bed's. In words; None: no sign of one.
    #[serde(default)]
    pub standing_queue: Option<String>,
    /// The probe at the rate cap ([`Rfc2544Config::max_rate`]) passed: the
    /// throughput is at least the cap (`generator_limited` is set too: the
    /// offer, not the DuT, was the limit).
    pub rate_capped: bool,
    /// Index of the latency trial.
    pub latency_trial: Option<usize>,
    /// Every latency trial (`latency_trials` of the configuration; the
    /// first is `latency_trial`).
    pub latency_trials: Vec<usize>,
    /// With more than one latency trial: all of them merged (histograms
    /// summed, min and max over all, mean over every sample).
    pub latency_merged: Option<Latency>,
    /// Latency at the common load (a rate every DuT of the run sustains,
    /// [`common_latency`]): the rate and the trials, merged when several.
    pub common_latency_pps: Option<f64>,
    pub common_latency_trials: Vec<usize>,
    pub common_latency_merged: Option<Latency>,
    /// The empty bed's latency at the rate of this size's latency trials
    /// (at the NDR) and of the common load: what each row subtracts,
    /// measured at its own rate, size and generator batch (None: not
    /// measured: external ports, no latency, the empty bed failed).
    #[serde(default)]
    pub latency_baseline: Option<Baseline>,
    #[serde(default)]
    pub common_latency_baseline: Option<Baseline>,
    /// (requested load as a fraction of max_offered_pps, offered pps (what
    /// the generator sent over its sending time: plot at this), loss
    /// ratio, the trial stayed invalid (flagged, not a DuT figure)).
    pub frame_loss: Vec<(f64, f64, f64, bool)>,
    pub back_to_back: Vec<Burst>,
    /// Trials whose counts disagree with the kernel's by more than the tolerance.
    pub kernel_disagreements: usize,
    /// Every trial at this size, in order.
    pub trials: Vec<TrialRecord>,
}

/// The empty bed's latency at one rate: the generator's frames straight
/// into the sink (no DuT), the part of a latency row that is the
/// measurement's own.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Baseline {
    /// The rate of the baseline's trial (one way; for a both-ways row,
    /// each direction's share of it: the empty bed has one direction).
    pub rate_pps: f64,
    pub p50_ns: f64,
    pub p99_ns: f64,
    /// The generator's kernel batch in the baseline's trial.
    pub gen_batch: u32,
    /// The baseline's trial was invalid (its reasons): flagged.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub invalid: Vec<String>,
}

impl Baseline {
    /// From an empty-bed trial with its latency.
    pub fn of(t: &TrialRecord) -> Option<Baseline> {
        let l = t.latency.as_ref()?;
        Some(Baseline {
            rate_pps: rate_of(t),
            p50_ns: l.p50_ns,
            p99_ns: l.p99_ns,
            gen_batch: t.gen_batch,
            invalid: t.invalid.clone(),
        })
    }
}

/// Median (the mean of the middle two for an even number), min and max.
pub(super) fn median_min_max(v: impl Iterator<Item = f64>) -> Option<(f64, f64, f64)> {
    let mut found: Vec<f64> = v.collect();
    found.sort_by(|a, b| a.total_cmp(b));
    let m = found.len() / 2;
    let med = if found.is_empty() {
        return None;
    } else if found.len().is_multiple_of(2) {
        (found[m - 1] + found[m]) / 2.0
    } else {
        found[m]
    };
    Some((med, found[0], found[found.len() - 1]))
}

impl SizeResult {
    /// Median, min and max of the searches so far. An empty search (no
    /// rate passed) is counted apart, not averaged in: a median of 0 and x
    /// would read as x / 2, a rate nobody measured. The NDR (PDR) is a
    /// lower bound when a search behind it is one: the median of lower
    /// bounds and exact values is a lower bound of the true median.
    pub(super) fn summarise(&mut self, cfg: &Rfc2544Config) {
        let found: Vec<&Search> = self
            .searches
            .iter()
            .filter(|s| s.throughput_pps > 0.0)
            .collect();
        self.empty_searches = self.searches.len() - found.len();
        self.ndr_trial_s = cfg.trial.as_secs_f64();
        self.pdr_trial_s = cfg.trial.as_secs_f64();
        let Some((med, min, max)) = median_min_max(found.iter().map(|s| s.throughput_pps)) else {
            if !self.searches.is_empty() {
                // Every search empty: the DuT passed nothing; no bound.
                self.throughput_pps = Some(0.0);
                self.throughput_min_pps = Some(0.0);
                self.throughput_max_pps = Some(0.0);
                let pdr = self.searches.iter().map(|s| s.pdr_pps).fold(0.0, f64::max);
                self.pdr_pps = Some(pdr);
                self.pdr_min_pps = Some(pdr);
                self.pdr_max_pps = Some(pdr);
                self.generator_limited = false;
                self.pdr_generator_limited = false;
            }
            return;
        };
        self.throughput_pps = Some(med);
        self.throughput_min_pps = Some(min);
        self.throughput_max_pps = Some(max);
        if let Some((med, min, max)) = median_min_max(found.iter().map(|s| s.pdr_pps)) {
            self.pdr_pps = Some(med);
            self.pdr_min_pps = Some(min);
            self.pdr_max_pps = Some(max);
        }
        self.generator_limited = found.iter().any(|s| s.generator_limited);
        self.pdr_generator_limited = found.iter().any(|s| s.pdr_generator_limited);
        self.resolution_pps = found
            .iter()
            .filter_map(|s| s.lowest_fail_pps.map(|f| f - s.throughput_pps))
            .reduce(f64::max);
    }

    pub(crate) fn new(frame_size: u32) -> Self {
        SizeResult {
            frame_size,
            max_offered_pps: 0.0,
            overload_forwarded_pps: 0.0,
            searches: Vec::new(),
            throughput_pps: None,
            throughput_min_pps: None,
            throughput_max_pps: None,
            resolution_pps: None,
            pdr_pps: None,
            pdr_min_pps: None,
            pdr_max_pps: None,
            generator_limited: false,
            pdr_generator_limited: false,
            empty_searches: 0,
            search_throughput_pps: None,
            search_pdr_pps: None,
            ndr_trial_s: 0.0,
            pdr_trial_s: 0.0,
            ndr_confirmed: None,
            pdr_confirmed: None,
            final_trials: Vec::new(),
            final_bracket: None,
            standing_queue: None,
            rate_capped: false,
            latency_trial: None,
            latency_trials: Vec::new(),
            latency_merged: None,
            common_latency_pps: None,
            common_latency_trials: Vec::new(),
            common_latency_merged: None,
            latency_baseline: None,
            common_latency_baseline: None,
            frame_loss: Vec::new(),
            back_to_back: Vec::new(),
            kernel_disagreements: 0,
            trials: Vec::new(),
        }
    }

    pub(super) fn push(&mut self, t: TrialRecord) -> usize {
        if !t.kernel.agrees {
            self.kernel_disagreements += 1;
        }
        self.trials.push(t);
        self.trials.len() - 1
    }

    /// The latency: of the latency trial, or all of them merged.
    pub fn latency(&self) -> Option<&Latency> {
        self.latency_merged.as_ref().or_else(|| {
            self.latency_trial
                .and_then(|i| self.trials.get(i))
                .and_then(|t| t.latency.as_ref())
        })
    }
}

/// The relative spread of repeated throughput searches, pooled over sizes:
/// the half width, as a fraction, of the 95 % prediction interval of a
/// re-run's result (the median of as many searches) around this run's.
/// Each size's searches are taken relative to their mean; the pooled
/// variance s^2 has sum(n_i - 1) degrees of freedom; two runs' means of n
/// searches differ with variance 2 s^2 / n, so the half width is
/// t(0.975, dof) * s * sqrt(2 / n). (The median is reported: for n <= 2 it
/// is the mean, for more the interval is a little narrow.) None with
/// fewer than two searches at any size.
///
/// With final trials that moved a size's NDR, the spread is at least that
/// size's [`SizeResult::final_bracket`]: the searches' spread says how far
/// their short trials move, not where a re-run's final trials land.
pub fn repeat_spread(sizes: &[SizeResult]) -> Option<f64> {
    let bracket = sizes
        .iter()
        .filter_map(|s| s.final_bracket)
        .reduce(f64::max);
    match (pooled_spread(sizes.iter()), bracket) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// [`repeat_spread`] pooled over the sizes of every DuT of a run where the
/// DuT, not the generator, was the limit: the bed's estimate of how far a
/// re-run moves. A DuT's own estimate has 7 degrees of freedom with the
/// default sizes and comes out below the truth now and then (measured:
/// linux-ipfwd stated ±5.8 % in one run, ±48.7 % in the next), so the
/// bench states the larger of the two.
pub fn bed_spread<'a>(duts: impl IntoIterator<Item = &'a [SizeResult]>) -> Option<f64> {
    pooled_spread(duts.into_iter().flatten().filter(|s| !s.generator_limited))
}

pub(super) fn pooled_spread<'a>(sizes: impl Iterator<Item = &'a SizeResult>) -> Option<f64> {
    let (s, t, n_max) = pooled_relative(sizes.map(|r| {
        r.searches
            .iter()
            .map(|s| s.throughput_pps)
            .filter(|&x| x > 0.0)
            .collect()
    }))?;
    Some(t * s * (2.0 / n_max as f64).sqrt())
}

/// Groups of repeated results, each taken relative to its mean, the
/// variance pooled over the groups of two or more (sum(n_i - 1) degrees of
/// freedom): (s, t(0.975, dof), the largest group). None without a group
/// of two.
pub(crate) fn pooled_relative(groups: impl Iterator<Item = Vec<f64>>) -> Option<(f64, f64, usize)> {
    let p = pooled(groups.map(|v| {
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        v.iter().map(|x| x / mean - 1.0).collect()
    }))?;
    Some((p.s, p.t, p.n_max))
}

/// Groups of repeated results in logarithms, each about its mean, the
/// variance pooled as in [`pooled_relative`]: for results that move by
/// factors (a rate halved, or doubled), where a symmetric interval in
/// absolute terms would put half a re-run's chance below zero.
pub(crate) fn pooled_log(groups: impl Iterator<Item = Vec<f64>>) -> Option<Pooled> {
    pooled(groups.map(|v| {
        let ln: Vec<f64> = v.iter().map(|x| x.ln()).collect();
        let mean = ln.iter().sum::<f64>() / ln.len() as f64;
        ln.iter().map(|x| x - mean).collect()
    }))
}

/// A pooled standard deviation: s, t(0.975, dof), the degrees of freedom
/// and the largest group.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pooled {
    pub s: f64,
    pub t: f64,
    pub dof: usize,
    pub n_max: usize,
}

/// Deviations (each group's about its own mean), pooled over the groups
/// of two or more. None without one.
fn pooled(groups: impl Iterator<Item = Vec<f64>>) -> Option<Pooled> {
    use statrs::distribution::{ContinuousCDF, StudentsT};
    let (mut ss, mut dof, mut n_max) = (0.0f64, 0usize, 0usize);
    for v in groups.filter(|v| v.len() >= 2) {
        ss += v.iter().map(|d| d * d).sum::<f64>();
        dof += v.len() - 1;
        n_max = n_max.max(v.len());
    }
    if dof == 0 {
        return None;
    }
    let t = StudentsT::new(0.0, 1.0, dof as f64)
        .ok()?
        .inverse_cdf(0.975);
    Some(Pooled {
        s: (ss / dof as f64).sqrt(),
        t,
        dof,
        n_max,
    })
}
