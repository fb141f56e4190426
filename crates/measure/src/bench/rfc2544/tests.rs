//! The procedures against model DuTs.
use super::*;

/// A DuT that forwards at most `capacity` pps with a queue of `queue`
/// frames, fed by a generator with top speed `gen`.
/// Throughput searches only (no latency, frame loss or back-to-back).
fn search_only(sizes: Vec<u32>, repetitions: usize) -> Rfc2544Config {
    Rfc2544Config {
        sizes,
        latency: false,
        frame_loss_sizes: vec![],
        back_to_back_sizes: vec![],
        repetitions,
        final_trial: None,
        ..Default::default()
    }
}

struct Model {
    capacity: f64,
    queue: f64,
    gen: f64,
    trials: usize,
}

impl Model {
    fn new(capacity: f64, queue: f64, gen: f64) -> Model {
        Model {
            capacity,
            queue,
            gen,
            trials: 0,
        }
    }
}

impl Trials for Model {
    fn trial(&mut self, s: &TrialSpec) -> Result<TrialRecord, String> {
        self.trials += 1;
        let rate = s.rate_pps.unwrap_or(self.gen).min(self.gen);
        let frames = s.frames.unwrap_or((rate * s.duration.as_secs_f64()) as u64);
        let secs = frames as f64 / rate;
        // Frames beyond capacity * time + the queue are lost.
        let can = (self.capacity * secs + self.queue).floor() as u64;
        let received = frames.min(can);
        let mut rec = TrialRecord::new(s, frames, received, secs);
        rec.kernel.gen_iface_tx = frames;
        rec.kernel.dut_in_rx = frames;
        rec.kernel.dut_out_tx = received;
        rec.kernel.sink_iface_rx = received;
        rec.kernel.judge(frames, received);
        if s.latency {
            let ns = 1000.0 * (1 + self.trials % 3) as f64;
            rec.latency = Some(Latency {
                samples: 10,
                min_ns: ns,
                mean_ns: ns,
                p50_ns: ns,
                max_ns: ns,
                histogram: vec![(ns, 10)],
                ..Default::default()
            });
        }
        rec.validate(s);
        Ok(rec)
    }
}

/// The model, but the throughput trials numbered (from 0) where `hit`
/// holds lose `lost(sent)` more frames, with the generator's schedule
/// `late_us` late (a stall of the machine, a slip of the generator).
struct Perturbed {
    m: Model,
    hit: Box<dyn Fn(usize) -> bool>,
    lost: fn(u64) -> u64,
    late_us: f64,
    n: usize,
}

impl Perturbed {
    fn new(hit: impl Fn(usize) -> bool + 'static, lost: fn(u64) -> u64) -> Perturbed {
        Perturbed {
            m: Model::new(1e6, 0.0, 4e6),
            hit: Box::new(hit),
            lost,
            late_us: 0.0,
            n: 0,
        }
    }

    /// The generator's schedule slips 10 ms and 1000 frames are lost
    /// at the throughput trials numbered in `at`.
    fn slipping(at: Vec<usize>) -> Perturbed {
        Perturbed {
            late_us: 10_000.0,
            ..Perturbed::new(move |k| at.contains(&k), |_| 1000)
        }
    }
}

impl Trials for Perturbed {
    fn trial(&mut self, s: &TrialSpec) -> Result<TrialRecord, String> {
        let mut rec = self.m.trial(s)?;
        if s.procedure == Procedure::Throughput {
            if (self.hit)(self.n) {
                rec.gen_late_max_us = rec.gen_late_max_us.max(self.late_us);
                rec.received = rec.received.saturating_sub((self.lost)(rec.sent));
                rec.lost = rec.sent - rec.received;
                rec.loss_ratio = rec.lost as f64 / rec.sent as f64;
                rec.kernel.dut_out_tx = rec.received;
                rec.kernel.sink_iface_rx = rec.received;
                rec.kernel.judge(rec.sent, rec.received);
                rec.validate(s);
            }
            self.n += 1;
        }
        Ok(rec)
    }
}

#[test]
fn a_trial_lost_to_a_slipped_schedule_is_repeated() {
    // Strict: only the slip repeats (a slip's loss is small as well).
    let cfg = Rfc2544Config {
        strict: true,
        ..search_only(vec![64], 1)
    };
    let clean = run(&cfg, &mut Model::new(1e6, 0.0, 4e6), &mut |_, _| {}).unwrap();
    // Slips at the 2nd and the 5th throughput trial.
    let mut t = Perturbed::slipping(vec![1, 4]);
    let r = run(&cfg, &mut t, &mut |_, _| {}).unwrap();
    assert_eq!(r[0].throughput_pps, clean[0].throughput_pps);
    let repeated: Vec<&TrialRecord> = r[0].trials.iter().filter(|x| x.repeated).collect();
    assert_eq!(repeated.len(), 2);
    assert!(repeated.iter().all(|x| x.lost >= 1000));
    // Repeated trials are kept but are not part of the search.
    for &i in &r[0].searches[0].trials {
        assert!(!r[0].trials[i].repeated);
    }
    // Two slips in a row: both repeated, the third trial counts.
    let mut t = Perturbed::slipping(vec![0, 1]);
    let r = run(&cfg, &mut t, &mut |_, _| {}).unwrap();
    assert_eq!(r[0].trials.iter().filter(|x| x.repeated).count(), 2);
    assert_eq!(r[0].throughput_pps, clean[0].throughput_pps);
    // Three: the last is still invalid, and counts as a fail.
    let mut t = Perturbed::slipping(vec![0, 1, 2]);
    let r = run(&cfg, &mut t, &mut |_, _| {}).unwrap();
    assert_eq!(r[0].trials.iter().filter(|x| x.repeated).count(), 2);
    let counted = &r[0].trials[r[0].searches[0].trials[1]];
    assert!(!counted.invalid.is_empty() && !counted.repeated);
    assert!(r[0].throughput_pps.unwrap() < clean[0].throughput_pps.unwrap());
    // A slip on a trial that lost nothing is invalid too: never a pass.
    let mut t = Perturbed {
        late_us: 10_000.0,
        ..Perturbed::new(|k| k == 0, |_| 0)
    };
    let r = run(&cfg, &mut t, &mut |_, _| {}).unwrap();
    let first = &r[0].trials[1];
    assert!(first.repeated && first.lost == 0, "{first:?}");
    assert!(
        first.invalid[0].contains("fell 10.0 ms behind"),
        "{:?}",
        first.invalid
    );
}

#[test]
fn a_latency_trial_mostly_gaps_is_invalid() {
    let spec = TrialSpec {
        latency: true,
        frames: Some(20_000),
        ..spec(64, Procedure::Latency, Some(1e5), &search_only(vec![64], 1))
    };
    // 0.2 s of frames at the rate, the schedule slipped 15 ms: valid.
    let mut rec = TrialRecord::new(&spec, 20_000, 20_000, 0.2);
    rec.kernel.agrees = true;
    rec.gen_slipped_us = 15_000.0;
    rec.gen_slips = 7;
    rec.validate(&spec);
    assert!(rec.invalid.is_empty(), "{:?}", rec.invalid);
    // 25 ms of gaps: more than a tenth of the trial.
    rec.gen_slipped_us = 25_000.0;
    rec.validate(&spec);
    assert_eq!(rec.invalid.len(), 1, "{:?}", rec.invalid);
    assert!(
        rec.invalid[0].contains("slipped 25.0 ms in 7 gaps"),
        "{:?}",
        rec.invalid
    );
}

/// Every other throughput trial loses 200 frames (a stall of the
/// machine), at any rate.
fn stalling() -> Perturbed {
    Perturbed::new(|k| k.is_multiple_of(2), |_| 200)
}

#[test]
fn a_small_loss_is_repeated_once_unless_strict() {
    let cfg = search_only(vec![64], 1);
    let clean = run(&cfg, &mut Model::new(1e6, 0.0, 4e6), &mut |_, _| {}).unwrap()[0]
        .throughput_pps
        .unwrap();
    let mut t = stalling();
    let r = run(&cfg, &mut t, &mut |_, _| {}).unwrap();
    // The stalled trials far from the result were repeated, and their
    // repeats counted; one near it may end the search a few
    // resolutions low (SMALL_LOSS_SPAN).
    let tp = r[0].throughput_pps.unwrap();
    assert!(
        tp <= clean && tp >= clean * (1.0 - 2.0 * SMALL_LOSS_SPAN * cfg.resolution),
        "{tp} vs {clean}"
    );
    // The first throughput trial (stalled, nothing passed yet) was.
    let first = r[0]
        .trials
        .iter()
        .find(|x| x.procedure == Procedure::Throughput)
        .unwrap();
    assert!(first.repeated);
    for &i in &r[0].searches[0].trials[1..] {
        assert!(!r[0].trials[i].repeated);
    }
    // Strict: the first stalled trial below the capacity ends lower.
    let strict = Rfc2544Config {
        strict: true,
        ..search_only(vec![64], 1)
    };
    let mut t = stalling();
    let r = run(&strict, &mut t, &mut |_, _| {}).unwrap();
    assert!(r[0].throughput_pps.unwrap() < clean * 0.9);
    assert_eq!(r[0].trials.iter().filter(|x| x.repeated).count(), 0);
    // A rate above the capacity fails twice: the result stays within
    // the resolution under the capacity (see the test below).
    assert!(clean <= 1e6 && clean >= 1e6 * (1.0 - cfg.resolution));
}

#[test]
fn search_finds_the_capacity_within_the_resolution() {
    for capacity in [0.3e6, 0.671e6, 1.0e6, 3.8e6] {
        let mut m = Model::new(capacity, 256.0, 6e6);
        let cfg = search_only(vec![64], 1);
        let r = run(&cfg, &mut m, &mut |_, _| {}).unwrap();
        let tp = r[0].throughput_pps.unwrap();
        // The queue lets a little more than the capacity pass in 1 s.
        let truth = capacity + 256.0;
        assert!(tp <= truth, "{tp} above {truth}");
        assert!(
            tp >= truth * (1.0 - cfg.resolution),
            "{tp} too far below {truth}"
        );
        // The NDR search and the PDR's bisection, each within its budget.
        assert!(
            m.trials <= 1 + 2 * cfg.max_search_trials,
            "{} trials",
            m.trials
        );
        let s = &r[0].searches[0];
        let fail = s.lowest_fail_pps.unwrap();
        assert!(fail > truth && fail - tp <= cfg.resolution * fail + 1.0);
        assert!(!r[0].generator_limited);
        assert_eq!(r[0].kernel_disagreements, 0);
    }
}

/// One search gives both rates: the PDR (loss <= 0.5 %) where the
/// model loses 0.5 %, the NDR where it loses nothing, PDR >= NDR.
#[test]
fn one_search_finds_the_ndr_and_the_pdr() {
    for capacity in [0.3e6, 1.0e6, 3.8e6] {
        let mut m = Model::new(capacity, 256.0, 6e6);
        let cfg = search_only(vec![64], 1);
        let r = run(&cfg, &mut m, &mut |_, _| {}).unwrap();
        let (ndr, pdr) = (r[0].throughput_pps.unwrap(), r[0].pdr_pps.unwrap());
        // 1 s trials: c frames, capacity + 256 forwarded.
        let truth = (capacity + 256.0) / (1.0 - cfg.pdr_loss);
        assert!(pdr >= ndr, "PDR {pdr} under NDR {ndr}");
        assert!(pdr <= truth, "PDR {pdr} above {truth}");
        assert!(
            pdr >= truth * (1.0 - cfg.resolution),
            "PDR {pdr} too far below {truth}"
        );
        let s = &r[0].searches[0];
        let fail = s.pdr_lowest_fail_pps.unwrap();
        assert!(fail > truth && fail - pdr <= cfg.resolution * fail + 1.0);
        // Every trial above the PDR lost more than 0.5 %, none under it.
        for &i in &s.trials {
            let t = &r[0].trials[i];
            let c = rate_of(t);
            assert_eq!(t.loss_ratio <= cfg.pdr_loss, c <= truth, "{c}: {t:?}");
        }
    }
    // A DuT faster than the generator: both are the top speed.
    let mut m = Model::new(9e6, 256.0, 6e6);
    let r = run(&search_only(vec![64], 1), &mut m, &mut |_, _| {}).unwrap();
    assert_eq!(r[0].pdr_pps, r[0].throughput_pps);
    assert!(r[0].generator_limited);
}

/// A DuT that loses 1 % of the frames above 100 kpps (sporadic stalls):
/// the search must still get there within its trial budget.
struct Lossy {
    trials: usize,
}
impl Trials for Lossy {
    fn trial(&mut self, s: &TrialSpec) -> Result<TrialRecord, String> {
        self.trials += 1;
        let rate = s.rate_pps.unwrap_or(3e6);
        let frames = s.frames.unwrap_or(rate as u64);
        let lost = if rate > 100e3 { frames / 100 } else { 0 };
        let mut rec = TrialRecord::new(s, frames, frames - lost, frames as f64 / rate);
        rec.kernel.gen_iface_tx = frames;
        rec.kernel.sink_iface_rx = frames - lost;
        rec.kernel.judge(frames, frames - lost);
        Ok(rec)
    }
}

/// A DuT that forwards 8 % more at overload than it can without loss
/// (as the Linux bridge does): the search's first trial, just under
/// the overload forwarding rate, loses ~7 %.
struct Overloaded {
    capacity: f64,
    trials: usize,
}
impl Trials for Overloaded {
    fn trial(&mut self, s: &TrialSpec) -> Result<TrialRecord, String> {
        self.trials += 1;
        let rate = s.rate_pps.unwrap_or(3e6);
        let frames = s.frames.unwrap_or((rate * s.duration.as_secs_f64()) as u64);
        let secs = frames as f64 / rate;
        let cap = if rate > 1.5 * self.capacity {
            1.08 * self.capacity
        } else {
            self.capacity
        };
        let received = frames.min((cap * secs) as u64);
        let mut rec = TrialRecord::new(s, frames, received, secs);
        rec.kernel.gen_iface_tx = frames;
        rec.kernel.dut_in_rx = frames;
        rec.kernel.dut_out_tx = received;
        rec.kernel.sink_iface_rx = received;
        rec.kernel.judge(frames, received);
        rec.validate(s);
        Ok(rec)
    }
}

#[test]
fn after_the_first_fail_the_search_aims_under_what_it_forwarded() {
    let mut m = Overloaded {
        capacity: 1e6,
        trials: 0,
    };
    // The NDR's trials alone (a PDR at the NDR's loss adds none).
    let cfg = Rfc2544Config {
        pdr_loss: 0.0,
        ..search_only(vec![64], 1)
    };
    let r = run(&cfg, &mut m, &mut |_, _| {}).unwrap();
    let tp = r[0].throughput_pps.unwrap();
    assert!((1e6 * (1.0 - cfg.resolution)..=1e6).contains(&tp), "{tp}");
    // Probe, the fail, a pass just under 1 Mpps, then bisection within
    // a few % (halving after the fail took 10 trials).
    assert!(m.trials <= 7, "{} trials", m.trials);
}

#[test]
fn search_steps_down_fast_when_every_rate_loses_a_little() {
    let mut m = Lossy { trials: 0 };
    let cfg = search_only(vec![64], 1);
    let r = run(&cfg, &mut m, &mut |_, _| {}).unwrap();
    let tp = r[0].throughput_pps.unwrap();
    assert!((100e3 * 0.97..=100e3).contains(&tp), "{tp}");
}

#[test]
fn generator_limited_when_the_top_speed_passes() {
    let mut m = Model::new(10e6, 0.0, 2e6);
    let cfg = search_only(vec![1518], 1);
    let r = run(&cfg, &mut m, &mut |_, _| {}).unwrap();
    assert!(r[0].generator_limited);
    assert_eq!(r[0].throughput_pps, Some(2e6));
    assert_eq!(m.trials, 1);
}

/// A cap bounds every trial: the probe, the search, the latency, the
/// frame loss and the back-to-back bursts. A DuT faster than the cap
/// is a bound at the cap; a slower one is searched under it; a cap
/// above the generator's top speed leaves the generator the limit.
#[test]
fn a_rate_cap_bounds_every_trial() {
    let cap = 1e6;
    let cfg = Rfc2544Config {
        sizes: vec![64, 1518],
        frame_loss_sizes: vec![64],
        back_to_back_sizes: vec![64],
        back_to_back_trials: 1,
        max_rate: Some(MaxRate::Pps(cap)),
        ..Default::default()
    };
    for dut in [10e6, 0.5e6] {
        let r = run(&cfg, &mut Model::new(dut, 0.0, 4e6), &mut |_, _| {}).unwrap();
        for s in &r {
            for t in &s.trials {
                let asked = t.requested_pps.expect("every trial paced");
                assert!(asked <= cap && t.offered_pps <= cap, "{t:?}");
            }
            assert_eq!(s.rate_capped, dut > cap);
            assert_eq!(s.generator_limited, dut > cap);
            assert!(s.max_offered_pps <= cap);
        }
        let procs: Vec<Procedure> = r[0].trials.iter().map(|t| t.procedure).collect();
        for p in [
            Procedure::Latency,
            Procedure::FrameLoss,
            Procedure::BackToBack,
        ] {
            assert!(procs.contains(&p), "{p:?} in {procs:?}");
        }
        let tp = r[0].throughput_pps.unwrap();
        if dut > cap {
            assert_eq!(tp, cap);
            assert!(size_notes(&r[0])[0].contains("rate cap"));
        } else {
            assert!((0.49e6..=0.5e6).contains(&tp), "{tp}");
        }
    }
    // Above the generator's top speed: the probe offers what it can,
    // valid, and a pass is the generator's limit.
    let high = Rfc2544Config {
        max_rate: Some(MaxRate::Pps(8e6)),
        ..search_only(vec![64], 1)
    };
    let r = run(&high, &mut Model::new(10e6, 0.0, 4e6), &mut |_, _| {}).unwrap();
    assert!(r[0].trials[0].invalid.is_empty(), "{:?}", r[0].trials[0]);
    assert!(r[0].generator_limited && !r[0].rate_capped);
    assert_eq!(r[0].throughput_pps, Some(4e6));
}

#[test]
fn bit_rate_caps_are_frame_rates_per_size() {
    let l1 = MaxRate::Bps { bps: 1e9, l1: true };
    assert!((l1.pps(64) - 1e9 / 8.0 / 84.0).abs() < 1e-6);
    assert!((l1.pps(1518) - 1e9 / 8.0 / 1538.0).abs() < 1e-6);
    let l2 = MaxRate::Bps {
        bps: 1e9,
        l1: false,
    };
    assert!((l2.pps(64) - 1e9 / 8.0 / 64.0).abs() < 1e-6);
    let imix = crate::frame_size::IMIX;
    assert!((l2.pps(imix) - 1e9 / 8.0 / crate::frame_size::IMIX_MEAN_BYTES).abs() < 1e-6);
    assert_eq!(MaxRate::Pps(5.0).pps(1518), 5.0);
    let cfg = Rfc2544Config {
        max_rate: Some(MaxRate::Pps(100.0)),
        ..Default::default()
    };
    assert_eq!(cfg.capped(64, None), Some(100.0));
    assert_eq!(cfg.capped(64, Some(50.0)), Some(50.0));
    assert_eq!(cfg.capped(64, Some(500.0)), Some(100.0));
    assert_eq!(Rfc2544Config::default().capped(64, None), None);
}

#[test]
fn repetitions_give_median_min_max_and_a_spread() {
    let cfg = search_only(vec![64, 1518], 3);
    let mut m = Model::new(1e6, 0.0, 4e6);
    let mut order = Vec::new();
    let r = run(&cfg, &mut m, &mut |size, what: &str| {
        if let Some(w) = what.strip_prefix("search ") {
            let rep = w.split(':').next().unwrap().to_string();
            if order.last() != Some(&(size, rep.clone())) {
                order.push((size, rep));
            }
        }
    })
    .unwrap();
    // All sizes' first searches, then the second ones, then the third.
    let want: Vec<(u32, String)> = ["1", "2", "3"]
        .iter()
        .flat_map(|rep| [64u32, 1518].map(|s| (s, rep.to_string())))
        .collect();
    assert_eq!(order, want);
    for s in &r {
        assert_eq!(s.searches.len(), 3);
        let mut v: Vec<f64> = s.searches.iter().map(|x| x.throughput_pps).collect();
        v.sort_by(f64::total_cmp);
        assert_eq!(s.throughput_pps, Some(v[1]));
        assert_eq!(s.throughput_min_pps, Some(v[0]));
        assert_eq!(s.throughput_max_pps, Some(v[2]));
        for x in v {
            assert!((0.99e6..=1e6).contains(&x), "{x}");
        }
    }
    // A deterministic DuT: every search within the resolution.
    let sp = repeat_spread(&r).unwrap();
    assert!(sp < 0.05, "{sp}");
}

#[test]
fn a_final_trial_confirms_or_steps_down() {
    // A queue of 20 000 frames: 0.1 s trials pass up to 1.2 Mpps, 1 s
    // trials up to 1.02.
    let cfg = Rfc2544Config {
        strict: true,
        trial: Duration::from_millis(100),
        resolution: 0.05,
        ..search_only(vec![64], 1)
    };
    let short = run(&cfg, &mut Model::new(1e6, 20_000.0, 4e6), &mut |_, _| {}).unwrap();
    assert!(
        short[0].throughput_pps.unwrap() > 1.1e6,
        "{:?}",
        short[0].searches
    );
    assert_eq!(short[0].ndr_confirmed, None);
    assert_eq!(short[0].ndr_trial_s, 0.1);
    let fin = Rfc2544Config {
        final_trial: Some(Duration::from_secs(1)),
        ..cfg.clone()
    };
    let r = run(&fin, &mut Model::new(1e6, 20_000.0, 4e6), &mut |_, _| {}).unwrap();
    assert_eq!(r[0].ndr_confirmed, Some(true), "{:?}", r[0].final_trials);
    assert_eq!(r[0].ndr_trial_s, 1.0);
    let tp = r[0].throughput_pps.unwrap();
    assert!(tp <= 1.02e6 && tp > 0.9e6, "{tp}");
    assert!(r[0].search_throughput_pps.unwrap() > 1.1e6);
    // The passing final trial is the last of them, at the final length.
    let last = &r[0].trials[*r[0].final_trials.last().unwrap()];
    assert_eq!(last.sent, (tp * 1.0).round() as u64);
    assert!(size_notes(&r[0]).iter().any(|n| n.contains("stepped down")));
    // A DuT with no queue: confirmed at the result at once.
    let r = run(&fin, &mut Model::new(1e6, 0.0, 4e6), &mut |_, _| {}).unwrap();
    assert_eq!(r[0].ndr_confirmed, Some(true));
    assert_eq!(r[0].final_trials.len(), 1);
    assert!(r[0].throughput_pps.unwrap() > 0.95e6);
}

/// The ring that absorbs a short trial's overload: 0.2 s search trials
/// pass far above the DuT's sustained rate, and the default final
/// trial brings the reported NDR (and PDR) down to it, within the
/// resolution, in a few steps (each under what the last one forwarded).
#[test]
fn a_ring_that_absorbs_short_trials_does_not_set_the_ndr() {
    let cfg = Rfc2544Config {
        trial: Duration::from_millis(200),
        ..search_only(vec![64], 2)
    };
    // 0.17 Mpps sustained, 30 000 frames of ring: 0.2 s trials pass
    // up to 0.32 Mpps.
    let model = || Model::new(170e3, 30_000.0, 4e6);
    let short = run(&cfg, &mut model(), &mut |_, _| {}).unwrap();
    assert!(short[0].throughput_pps.unwrap() > 0.3e6, "{short:?}");
    let fin = Rfc2544Config {
        final_trial: Some(DEFAULT_FINAL_TRIAL),
        ..cfg
    };
    let mut m = model();
    let r = run(&fin, &mut m, &mut |_, _| {}).unwrap();
    let (ndr, pdr) = (r[0].throughput_pps.unwrap(), r[0].pdr_pps.unwrap());
    // Within the resolution (2 steps at most) of the sustained rate
    // plus what the ring adds over 10 s (3 kpps).
    let top = 170e3 + 30_000.0 / 10.0;
    assert!(
        ndr <= top && ndr >= top * (1.0 - 2.0 * fin.resolution),
        "{ndr}"
    );
    assert!(
        pdr >= ndr && pdr <= top / (1.0 - fin.pdr_loss) * 1.001,
        "{pdr}"
    );
    assert_eq!(r[0].ndr_confirmed, Some(true));
    assert_eq!(r[0].pdr_confirmed, Some(true));
    assert_eq!((r[0].ndr_trial_s, r[0].pdr_trial_s), (10.0, 10.0));
    assert!(r[0].final_trials.len() <= FINAL_TRIALS_PER_SIZE);
    let steps_ndr = r[0]
        .final_trials
        .iter()
        .filter(|&&i| r[0].trials[i].loss_ratio > 0.0)
        .count();
    assert!(steps_ndr <= 4, "{steps_ndr} failing final trials");
}

#[test]
fn further_searches_start_from_scratch() {
    let cfg = Rfc2544Config {
        strict: true,
        ..search_only(vec![64], 1)
    };
    let mut m = Model::new(1e6, 0.0, 4e6);
    let mut r = run(&cfg, &mut m, &mut |_, _| {}).unwrap();
    let first_trials = m.trials;
    // The same DuT: a search of its own (its own probe, as many trials).
    m.trials = 0;
    let n0 = r[0].trials.len();
    let s = repetition(&cfg, &mut m, &mut r[0], 1, &mut |_, _| {}).unwrap();
    assert!(
        s.throughput_pps <= 1e6 && s.throughput_pps >= 0.98e6,
        "{s:?}"
    );
    assert_eq!(r[0].trials[n0].procedure, Procedure::Probe);
    assert_eq!(s.trials[0], n0, "the search's own probe");
    assert_eq!(m.trials, first_trials, "the same search again");
    // The capacity moves: each search finds it without the earlier result.
    for cap in [0.5e6, 2e6] {
        m.capacity = cap;
        let s = repetition(&cfg, &mut m, &mut r[0], 2, &mut |_, _| {}).unwrap();
        assert!(
            s.throughput_pps <= cap && s.throughput_pps >= cap * 0.98,
            "{cap}: {s:?}"
        );
    }
}

#[test]
fn repetitions_of_a_generator_limited_dut_run_their_own_top_speed_trial() {
    let mut m = Model::new(10e6, 0.0, 2e6);
    let cfg = search_only(vec![64], 2);
    let r = run(&cfg, &mut m, &mut |_, _| {}).unwrap();
    assert_eq!(m.trials, 2);
    assert_eq!(r[0].searches.len(), 2);
    assert!(r[0].generator_limited);
    assert_eq!(r[0].searches[1].trials, vec![1]);
    assert_eq!(r[0].trials[1].procedure, Procedure::Probe);
}

/// A DuT whose loss ratio is `loss(rate)`, behind a generator whose
/// top speed is `top` and whose pacing keeps at most `paced` (a paced
/// trial asking for more leaves at `paced`: offered short, invalid).
struct Curve {
    loss: fn(f64) -> f64,
    top: f64,
    paced: f64,
    trials: usize,
}
impl Trials for Curve {
    fn trial(&mut self, s: &TrialSpec) -> Result<TrialRecord, String> {
        self.trials += 1;
        let rate = match s.rate_pps {
            Some(r) => r.min(self.paced),
            None => self.top,
        };
        let frames = s.frames.unwrap_or((rate * s.duration.as_secs_f64()) as u64);
        let lost = (frames as f64 * (self.loss)(rate)).round() as u64;
        let received = frames - lost;
        let mut rec = TrialRecord::new(s, frames, received, frames as f64 / rate);
        rec.kernel.gen_iface_tx = frames;
        rec.kernel.dut_in_rx = frames;
        rec.kernel.dut_out_tx = received;
        rec.kernel.sink_iface_rx = received;
        rec.kernel.judge(frames, received);
        rec.validate(s);
        Ok(rec)
    }
}

/// A generator capped below the DuT: every repetition's result is a
/// lower bound, NDR and PDR, also when the probe at the top speed
/// fails but the paced trials above the result are ones the generator
/// could not offer (they were fails of the DuT before).
#[test]
fn a_generator_below_the_dut_gives_bounds_in_every_repetition() {
    let cfg = search_only(vec![64], 3);
    // Probe passes: the top speed is the result, three times.
    let r = run(&cfg, &mut Model::new(10e6, 0.0, 2e6), &mut |_, _| {}).unwrap();
    assert!(r[0]
        .searches
        .iter()
        .all(|s| s.generator_limited && s.pdr_generator_limited));
    assert!(r[0].generator_limited && r[0].pdr_generator_limited);
    // The probe's burst loses (a DuT of 3 Mpps behind a 4 Mpps burst),
    // but the pacer keeps only 1.5 Mpps: no valid trial fails.
    let mut c = Curve {
        loss: |r| if r > 3e6 { 0.2 } else { 0.0 },
        top: 4e6,
        paced: 1.5e6,
        trials: 0,
    };
    let r = run(&cfg, &mut c, &mut |_, _| {}).unwrap();
    for s in &r[0].searches {
        assert!(s.generator_limited, "{s:?}");
        // (A trial offered within OFFERED_TOLERANCE of its rate counts.)
        let most = 1.5e6 / (1.0 - OFFERED_TOLERANCE);
        assert!(
            s.throughput_pps <= most && s.throughput_pps > 1.4e6,
            "{s:?}"
        );
    }
    assert!(r[0].generator_limited && r[0].pdr_generator_limited);
    // A DuT that does fail under the pacer's limit: no bound.
    c.loss = |r| if r > 1e6 { 0.2 } else { 0.0 };
    let r = run(&cfg, &mut c, &mut |_, _| {}).unwrap();
    assert!(!r[0].generator_limited, "{:?}", r[0].searches);
    assert!(r[0].throughput_pps.unwrap() <= 1e6);
}

/// A probe that loses no more than the PDR's loss: the PDR is the top
/// speed, a lower bound; the NDR is searched and is exact.
#[test]
fn a_pdr_at_the_top_speed_is_a_bound() {
    let cfg = search_only(vec![64], 1);
    let mut c = Curve {
        loss: |r| if r > 1.9e6 { 0.002 } else { 0.0 },
        top: 2e6,
        paced: f64::INFINITY,
        trials: 0,
    };
    let r = run(&cfg, &mut c, &mut |_, _| {}).unwrap();
    assert_eq!(r[0].pdr_pps, Some(2e6));
    assert!(r[0].pdr_generator_limited);
    assert!(!r[0].generator_limited);
    assert!(r[0].throughput_pps.unwrap() <= 1.9e6);
}

/// MLRsearch's order: the lowest fail first. A fail of the PDR's loss
/// below a rate that passed it (a DuT whose loss is not monotonic, or
/// a noisy trial) bounds the PDR; it is not skipped over.
#[test]
fn the_pdr_takes_the_lowest_fail_first() {
    let cfg = search_only(vec![64], 1);
    let mut r = SizeResult::new(64);
    r.max_offered_pps = 4e6;
    let mut c = Curve {
        loss: |x| {
            if (0.9e6..0.95e6).contains(&x) {
                0.01
            } else {
                0.0
            }
        },
        top: 4e6,
        paced: f64::INFINITY,
        trials: 0,
    };
    let mut s = Search::top_speed(0.8e6, 0);
    s.trials.clear();
    s.generator_limited = false;
    for rate in [0.8e6, 0.92e6, 1.0e6] {
        let rec = c
            .trial(&spec(64, Procedure::Throughput, Some(rate), &cfg))
            .unwrap();
        s.trials.push(r.push(rec));
    }
    partial_drop_rate(&cfg, &mut c, &mut r, &mut s, 0, &mut |_, _| {}).unwrap();
    assert!(s.pdr_pps < 0.92e6 && s.pdr_pps >= 0.8e6, "{s:?}");
    assert_eq!(s.pdr_lowest_fail_pps.map(|h| h <= 0.92e6), Some(true));
    assert!(!s.pdr_generator_limited);
}

/// An empty search (nothing passed) is not half of a median.
#[test]
fn an_empty_search_is_its_own_result() {
    let cfg = search_only(vec![64], 2);
    let mut r = SizeResult::new(64);
    let mut empty = Search::top_speed(0.0, 0);
    empty.generator_limited = false;
    r.searches.push(empty);
    let mut found = Search::top_speed(1e6, 0);
    found.generator_limited = false;
    r.searches.push(found);
    r.summarise(&cfg);
    assert_eq!(r.throughput_pps, Some(1e6));
    assert_eq!(r.empty_searches, 1);
    assert!(size_notes(&r)
        .iter()
        .any(|n| n.contains("no rate without loss")));
}

/// Every latency trial is checked for loss, not only the first.
#[test]
fn every_latency_trial_is_checked_for_loss() {
    let cfg = Rfc2544Config {
        latency: true,
        latency_trials: 3,
        ..search_only(vec![64], 1)
    };
    let mut r = run(&cfg, &mut Model::new(1e6, 0.0, 4e6), &mut |_, _| {}).unwrap();
    assert!(size_notes(&r[0])
        .iter()
        .all(|n| !n.contains("latency trial")));
    let third = r[0].latency_trials[2];
    r[0].trials[third].lost = 7;
    let notes = size_notes(&r[0]);
    assert!(
        notes
            .iter()
            .any(|n| n.contains("1 of 3 latency trial(s) lost frames")),
        "{notes:?}"
    );
}

/// The latency is measured at the reported NDR, after the last search
/// and the final trial: the rate of the final figure.
#[test]
fn latency_runs_at_the_reported_ndr() {
    let cfg = Rfc2544Config {
        latency: true,
        final_trial: Some(Duration::from_secs(1)),
        trial: Duration::from_millis(100),
        ..search_only(vec![64], 3)
    };
    let r = run(&cfg, &mut Model::new(1e6, 20_000.0, 4e6), &mut |_, _| {}).unwrap();
    let i = r[0].latency_trial.unwrap();
    assert_eq!(r[0].trials[i].requested_pps, r[0].throughput_pps);
    assert!(i > *r[0].final_trials.last().unwrap());
}

/// A passing trial at the NDR whose frames kept arriving long after
/// the generator stopped is flagged as a standing queue.
#[test]
fn a_standing_queue_is_flagged() {
    let cfg = search_only(vec![64], 1);
    let mut r = run(&cfg, &mut Model::new(1e6, 0.0, 4e6), &mut |_, _| {}).unwrap();
    assert_eq!(standing_queue(&r[0], None), None);
    let ndr = r[0].throughput_pps.unwrap();
    let i = r[0]
        .trials
        .iter()
        .position(|t| t.requested_pps == Some(ndr) && t.lost == 0)
        .unwrap();
    r[0].trials[i].drain_ms = 400.0;
    let q = standing_queue(&r[0], None).unwrap();
    assert!(q.contains("400 ms"), "{q}");
}

#[test]
fn repeat_spread_is_the_pooled_prediction_interval() {
    let size = |v: &[f64]| {
        let mut r = SizeResult::new(64);
        for &x in v {
            r.searches.push(Search::top_speed(x, 0));
        }
        r
    };
    // By hand: relative deviations +-1/101 and +-2/198; pooled variance
    // (2 (1/101)^2 + 2 (2/198)^2) / 2 with 2 degrees of freedom;
    // t(0.975, 2) = 4.302652729911275; n = 2: sqrt(2 / n) = 1.
    let r = vec![size(&[100.0, 102.0]), size(&[200.0, 196.0]), size(&[50.0])];
    let s2 = (2.0 * (1.0f64 / 101.0).powi(2) + 2.0 * (2.0f64 / 198.0).powi(2)) / 2.0;
    let want = 4.302652729911275 * s2.sqrt();
    let got = repeat_spread(&r).unwrap();
    assert!((got - want).abs() < 1e-9, "{got} vs {want}");
    // One search per size: no spread.
    assert_eq!(repeat_spread(&[size(&[1.0]), size(&[2.0])]), None);
    // The bed's: the same over several DuTs' sizes, generator-limited
    // sizes left out.
    let mut limited = size(&[10.0, 20.0]);
    limited.generator_limited = true;
    let other = [size(&[100.0, 102.0]), limited];
    let bed = bed_spread([&r[..1], &r[1..], &other[..]]).unwrap();
    let s2 = (4.0 * (1.0f64 / 101.0).powi(2) + 2.0 * (2.0f64 / 198.0).powi(2)) / 3.0;
    let want = 3.182446305284263 * s2.sqrt();
    assert!((bed - want).abs() < 1e-9, "{bed} vs {want}");
}

#[test]
fn frame_loss_steps_down_until_two_clean_trials() {
    let mut m = Model::new(2.5e6, 0.0, 5e6);
    let cfg = Rfc2544Config {
        sizes: vec![64],
        latency: false,
        repetitions: 1,
        back_to_back_sizes: vec![],
        ..Default::default()
    };
    let r = run(&cfg, &mut m, &mut |_, _| {}).unwrap();
    let fl = &r[0].frame_loss;
    // 100 % .. 50 % lose (50 % = capacity: 0 lost), 40 % clean: stop there.
    let fracs: Vec<f64> = fl.iter().map(|p| (p.0 * 10.0).round() / 10.0).collect();
    assert_eq!(fracs, vec![1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4]);
    assert!((fl[0].2 - 0.5).abs() < 1e-3, "{:?}", fl[0]);
    assert!((fl[1].2 - (1.0 - 2.5 / 4.5)).abs() < 1e-3);
    assert_eq!(fl[5].2, 0.0);
    assert_eq!(fl[6].2, 0.0);
}

#[test]
fn back_to_back_finds_the_queue() {
    // Bursts at 5 Mpps into 1 Mpps with a 5000-frame queue: a burst of n
    // takes n/5e6 s, during which 0.2 n drain, so n <= 6250 pass.
    let mut m = Model::new(1e6, 5000.0, 5e6);
    let cfg = Rfc2544Config {
        sizes: vec![64],
        latency: false,
        frame_loss_sizes: vec![],
        back_to_back_trials: 1,
        ..Default::default()
    };
    let r = run(&cfg, &mut m, &mut |_, _| {}).unwrap();
    let b = &r[0].back_to_back[0];
    assert!(!b.at_least);
    assert!(
        b.frames <= 6250 && b.frames as f64 >= 6250.0 * 0.99,
        "{b:?}"
    );
}

#[test]
fn latency_trials_are_repeated_and_merged() {
    let cfg = Rfc2544Config {
        latency: true,
        latency_trials: 3,
        ..search_only(vec![64], 1)
    };
    let r = run(&cfg, &mut Model::new(1e6, 0.0, 4e6), &mut |_, _| {}).unwrap();
    assert_eq!(r[0].latency_trials.len(), 3);
    assert_eq!(r[0].latency_trial, Some(r[0].latency_trials[0]));
    let l = r[0].latency().unwrap();
    assert_eq!(l.samples, 30);
    assert!(l.min_ns < l.max_ns, "{l:?}");
    // One trial: no merge, the trial's own.
    let cfg1 = Rfc2544Config {
        latency_trials: 1,
        ..cfg
    };
    let one = run(&cfg1, &mut Model::new(1e6, 0.0, 4e6), &mut |_, _| {}).unwrap();
    assert!(one[0].latency_merged.is_none());
    assert_eq!(one[0].latency().unwrap().samples, 10);
}

/// The common load's latency: its trials at the rate asked, merged.
#[test]
fn common_load_latency_runs_at_the_rate_given() {
    let mut m = Model::new(1e6, 256.0, 4e6);
    let cfg = Rfc2544Config {
        latency_trials: 3,
        ..search_only(vec![64], 1)
    };
    let mut r = run(&cfg, &mut m, &mut |_, _| {}).unwrap().remove(0);
    common_latency(&cfg, &mut m, &mut r, 250e3, &mut |_, _| {}).unwrap();
    assert_eq!(r.common_latency_pps, Some(250e3));
    assert_eq!(r.common_latency_trials.len(), 3);
    for &i in &r.common_latency_trials {
        let t = &r.trials[i];
        assert_eq!(t.procedure, Procedure::Latency);
        assert_eq!(t.requested_pps, Some(250e3));
        assert_eq!(t.lost, 0);
    }
    let merged = r.common_latency_merged.as_ref().unwrap();
    assert_eq!(merged.samples, 30);
}

#[test]
fn latencies_merge_exactly_at_the_ends() {
    let a = Latency {
        samples: 3,
        bad_stamps: 1,
        min_ns: 900.0,
        mean_ns: 1000.0,
        histogram: vec![(950.0, 1), (1000.0, 2)],
        max_ns: 1010.0,
        ..Default::default()
    };
    let b = Latency {
        samples: 1,
        min_ns: 5000.0,
        mean_ns: 5000.0,
        histogram: vec![(5100.0, 1)],
        max_ns: 5000.0,
        ..Default::default()
    };
    let m = Latency::merge([&a, &b, &Latency::default()]).unwrap();
    assert_eq!((m.samples, m.bad_stamps), (4, 1));
    assert_eq!((m.min_ns, m.max_ns), (900.0, 5000.0));
    assert_eq!(m.mean_ns, 2000.0);
    assert_eq!(m.p50_ns, 1000.0);
    // The top bucket's middle lies above the exact max: clamped.
    assert_eq!(m.p99_ns, 5000.0);
    assert_eq!(m.histogram, vec![(950.0, 1), (1000.0, 2), (5100.0, 1)]);
    assert!(Latency::merge([&Latency::default()]).is_none());
}

#[test]
fn kernel_check_flags_disagreements() {
    let mut k = KernelCheck {
        gen_iface_tx: 1000,
        dut_in_rx: 1000,
        dut_out_tx: 1000,
        sink_iface_rx: 994,
        ..Default::default()
    };
    k.judge(1000, 1000);
    assert!(!k.agrees);
    assert!((k.forwarded_diff_pct + 0.6).abs() < 1e-9);
    assert_eq!(k.disagreements(), "s0 received -0.60 %");
    k.sink_iface_rx = 996;
    k.judge(1000, 1000);
    assert!(k.agrees);
    // d0 and d1 are judged too: frames into or out of the DuT that the
    // generator and the sink did not see.
    k.dut_in_rx = 1010;
    k.judge(1000, 1000);
    assert!(!k.agrees);
    assert_eq!(k.disagreements(), "d0 received +1.00 %");
    k.dut_in_rx = 1000;
    k.dut_out_tx = 990;
    k.judge(1000, 1000);
    assert_eq!(k.disagreements(), "d1 sent -1.00 %");
    // An invalid trial says why.
    let spec = spec(
        64,
        Procedure::Throughput,
        Some(1000.0),
        &Rfc2544Config::default(),
    );
    let n = spec.frames.unwrap();
    let mut rec = TrialRecord::new(&spec, n, n, n as f64 / 1000.0);
    rec.kernel = k;
    rec.validate(&spec);
    assert_eq!(rec.invalid.len(), 1);
    assert!(
        rec.invalid[0].contains("d1 sent -1.00 %"),
        "{:?}",
        rec.invalid
    );
    assert!(!passes(&rec, &Rfc2544Config::default()));
}

/// A valid kernel check of a trial that sent `sent` and counted
/// `received` at the sink, with the sink side's drops as given.
fn check_with_sink_drops(
    sent: u64,
    received: u64,
    d1_dropped: u64,
    s0_dropped: u64,
    twice: u64,
) -> KernelCheck {
    let mut k = KernelCheck {
        gen_iface_tx: sent,
        dut_in_rx: sent,
        dut_out_tx: received,
        sink_iface_rx: received,
        dut_out_tx_dropped: d1_dropped,
        sink_iface_rx_dropped: s0_dropped,
        sink_side_counted_twice: twice,
        sink_side_ports: ("d1".into(), "s0".into()),
        ..Default::default()
    };
    k.judge(sent, received);
    k
}

#[test]
fn frames_the_sink_side_dropped_make_a_trial_invalid_not_a_loss_of_the_dut() {
    let cfg = Rfc2544Config::default();
    let s = spec(64, Procedure::Throughput, Some(1e5), &cfg);
    let n = s.frames.unwrap();
    // 1234 frames lost, every one of them after the DuT sent it: d1
    // could not put 1200 into s0's ring, s0 dropped 40, 6 of which
    // the veth counts at both ends.
    let mut rec = TrialRecord::new(&s, n, n - 1234, cfg.trial.as_secs_f64());
    rec.kernel = check_with_sink_drops(n, n - 1234, 1200, 40, 6);
    // The four comparisons agree (on veth they cannot see this loss).
    assert!(rec.kernel.agrees, "{:?}", rec.kernel);
    assert_eq!(rec.kernel.sink_side_dropped, 1234);
    rec.validate(&s);
    assert_eq!(
        rec.invalid,
        vec!["the sink side dropped 1234 frames (d1 tx_dropped 1200, s0 rx_dropped 40, 6 counted at both ends, once here), 1234 lost in all: the bed's loss, not the DuT's".to_string()]
    );
    assert!(!passes(&rec, &cfg));
    // Drops on the sink side in a trial that lost nothing (frames of
    // no trial): every frame arrived, the trial stands.
    let mut clean = TrialRecord::new(&s, n, n, cfg.trial.as_secs_f64());
    clean.kernel = check_with_sink_drops(n, n, 0, 3, 0);
    clean.validate(&s);
    assert!(clean.invalid.is_empty(), "{:?}", clean.invalid);
    // An external DuT: d1 is not ours to read, s0's drops are.
    let mut ext = TrialRecord::new(&s, n, n - 10, cfg.trial.as_secs_f64());
    ext.kernel = check_with_sink_drops(n, n - 10, 0, 10, 0);
    ext.kernel.dut_unseen = true;
    ext.kernel.sink_side_ports = (String::new(), "eth1".into());
    ext.validate(&s);
    assert_eq!(
        ext.invalid,
        vec!["the sink side dropped 10 frames (eth1 rx_dropped 10), 10 lost in all: the bed's loss, not the DuT's".to_string()]
    );
    // In the JSON under plain names.
    let j = serde_json::to_value(&rec.kernel).unwrap();
    assert_eq!(j["sink_side_dropped"], 1234);
    assert_eq!(j["dut_out_tx_dropped"], 1200);
    assert_eq!(j["sink_iface_rx_dropped"], 40);
    assert_eq!(j["sink_side_counted_twice"], 6);
}

/// The model, but the throughput trials numbered (from 0) in `at`
/// lose 1000 frames on the sink side (the sink fell behind): the
/// kernel counts them as d1's tx_dropped.
struct SinkDrops {
    m: Model,
    at: Vec<usize>,
    n: usize,
}

impl Trials for SinkDrops {
    fn trial(&mut self, s: &TrialSpec) -> Result<TrialRecord, String> {
        let mut rec = self.m.trial(s)?;
        if s.procedure == Procedure::Throughput {
            if self.at.contains(&self.n) {
                rec.received = rec.received.saturating_sub(1000);
                rec.lost = rec.sent - rec.received;
                rec.loss_ratio = rec.lost as f64 / rec.sent as f64;
                rec.kernel = check_with_sink_drops(rec.sent, rec.received, 1000, 0, 0);
                rec.validate(s);
            }
            self.n += 1;
        }
        Ok(rec)
    }
}

#[test]
fn the_search_does_not_charge_the_sink_sides_loss_to_the_dut() {
    // Strict: any loss the DuT is charged with fails the rate.
    let cfg = Rfc2544Config {
        strict: true,
        ..search_only(vec![64], 1)
    };
    let clean = run(&cfg, &mut Model::new(1e6, 0.0, 4e6), &mut |_, _| {}).unwrap();
    // The sink side drops in the 2nd and the 4th throughput trial, both
    // at rates the DuT forwards without loss and at the ones it does not.
    let mut t = SinkDrops {
        m: Model::new(1e6, 0.0, 4e6),
        at: vec![1, 3],
        n: 0,
    };
    let r = run(&cfg, &mut t, &mut |_, _| {}).unwrap();
    assert_eq!(r[0].throughput_pps, clean[0].throughput_pps);
    let repeated: Vec<&TrialRecord> = r[0].trials.iter().filter(|x| x.repeated).collect();
    assert_eq!(repeated.len(), 2, "{:#?}", r[0].trials);
    for x in &repeated {
        assert!(
            x.kernel.sink_side_dropped == 1000 && x.lost >= 1000,
            "{x:?}"
        );
        assert!(x.invalid[0].contains("the bed's loss, not the DuT's"));
    }
    // No trial that counts in the search holds the sink side's loss.
    for &i in &r[0].searches[0].trials {
        let x = &r[0].trials[i];
        assert!(!x.repeated && x.kernel.sink_side_dropped == 0, "{x:?}");
    }
}

#[test]
fn both_ways_rates_are_over_the_span_the_directions_share() {
    // 2000 pps both ways: 1000 pps, 1000 frames each way.
    let cfg = Rfc2544Config::default();
    let s = spec(64, Procedure::Throughput, Some(2e3), &cfg);
    let half = spec(64, Procedure::Throughput, Some(1e3), &cfg);
    let dir = |sent: u64, received: u64, secs: f64, span: Option<(u64, u64)>| {
        let mut d = TrialRecord::new(&half, sent, received, secs);
        d.send_span_ns = span;
        d.kernel = check_with_sink_drops(sent, received, 0, 0, 0);
        d
    };
    // Each direction 1000 frames in 1 s (1000 pps each), the reverse
    // starting 0.5 s after the forward: they share 1.5 s.
    let t0 = 5_000_000_000u64;
    let fwd = dir(1000, 1000, 1.0, Some((t0, t0 + 1_000_000_000)));
    let rev = dir(1000, 900, 1.0, Some((t0 + 500_000_000, t0 + 1_500_000_000)));
    let sum_of_rates = fwd.offered_pps + rev.offered_pps;
    let r = TrialRecord::both_ways(&s, vec![fwd.clone(), rev.clone()]);
    assert_eq!(r.send_span_ns, Some((t0, t0 + 1_500_000_000)));
    assert!((r.tx_seconds - 1.5).abs() < 1e-12, "{}", r.tx_seconds);
    assert!(
        (r.offered_pps - 2000.0 / 1.5).abs() < 1e-9,
        "{}",
        r.offered_pps
    );
    assert!((r.forwarded_pps - 1900.0 / 1.5).abs() < 1e-9);
    // Not the sum of the rates each over its own span (2000 pps).
    assert!(
        r.offered_pps < sum_of_rates,
        "{} {sum_of_rates}",
        r.offered_pps
    );
    // Spans that coincide: the sum.
    let same = dir(1000, 1000, 1.0, Some((t0, t0 + 1_000_000_000)));
    let r = TrialRecord::both_ways(&s, vec![fwd.clone(), same]);
    assert!((r.offered_pps - 2000.0).abs() < 1e-9, "{}", r.offered_pps);
    // No spans known: assumed to coincide, over the longest direction's
    // time (never more than the sum of the rates).
    let a = dir(1000, 1000, 1.0, None);
    let b = dir(800, 800, 0.8, None);
    let r = TrialRecord::both_ways(&s, vec![a, b]);
    assert!((r.offered_pps - 1800.0).abs() < 1e-9, "{}", r.offered_pps);
    assert_eq!(r.send_span_ns, None);
    // The sink side's drops of each direction add up, and each
    // direction's reason keeps its name.
    let mut f = dir(1000, 990, 1.0, Some((t0, t0 + 1_000_000_000)));
    f.kernel = check_with_sink_drops(1000, 990, 10, 0, 0);
    f.validate(&half);
    let mut v = rev.clone();
    v.kernel = check_with_sink_drops(1000, 900, 0, 100, 0);
    v.kernel.sink_side_ports = ("d0".into(), "g0".into());
    v.validate(&half);
    let r = TrialRecord::both_ways(&s, vec![f, v]);
    assert_eq!(r.kernel.sink_side_dropped, 110);
    assert_eq!(
        (r.kernel.dut_out_tx_dropped, r.kernel.sink_iface_rx_dropped),
        (10, 100)
    );
    assert!(
        r.invalid[0].starts_with("forward: the sink side dropped 10"),
        "{:?}",
        r.invalid
    );
    assert!(
        r.invalid[1].starts_with(
            "reverse: the sink side dropped 100 frames (d0 tx_dropped 0, g0 rx_dropped 100)"
        ),
        "{:?}",
        r.invalid
    );
}

#[test]
fn offered_short_duplicates_and_more_received_than_sent_never_pass() {
    let cfg = Rfc2544Config::default();
    let s = spec(64, Procedure::Throughput, Some(1e6), &cfg);
    let good = |rec: &mut TrialRecord| {
        rec.kernel = KernelCheck {
            gen_iface_tx: rec.sent,
            dut_in_rx: rec.sent,
            dut_out_tx: rec.received,
            sink_iface_rx: rec.received,
            ..Default::default()
        };
        rec.kernel.judge(rec.sent, rec.received);
    };
    let frames = s.frames.unwrap();
    // Valid and lossless: a pass.
    let mut rec = TrialRecord::new(&s, frames, frames, cfg.trial.as_secs_f64());
    good(&mut rec);
    rec.validate(&s);
    assert!(rec.invalid.is_empty(), "{:?}", rec.invalid);
    assert!(passes(&rec, &cfg));
    // 2 % slower than asked: invalid.
    let mut slow = TrialRecord::new(&s, frames, frames, cfg.trial.as_secs_f64() * 1.02);
    good(&mut slow);
    slow.validate(&s);
    assert!(
        slow.invalid[0].starts_with("offered 0.980 Mpps"),
        "{:?}",
        slow.invalid
    );
    assert!(!passes(&slow, &cfg));
    // Every frame there, some twice: a fail, not a pass.
    let mut dup = rec.clone();
    dup.verify.duplicates = 5;
    assert!(!passes(&dup, &cfg));
    // Short of frames (the generator stopped early): invalid.
    let mut short = TrialRecord::new(&s, frames - 10, frames - 10, cfg.trial.as_secs_f64());
    good(&mut short);
    short.validate(&s);
    assert!(
        short.invalid.iter().any(|w| w.contains("sent")),
        "{:?}",
        short.invalid
    );
    // More received than sent: invalid, and no negative loss.
    let mut more = TrialRecord::new(&s, frames, frames + 3, cfg.trial.as_secs_f64());
    good(&mut more);
    more.validate(&s);
    assert_eq!(more.lost, 0);
    assert!(
        more.invalid.iter().any(|w| w.contains("received of")),
        "{:?}",
        more.invalid
    );
    assert!(!passes(&more, &cfg));
}

#[test]
fn a_throughput_trial_slips_instead_of_catching_up_and_its_gaps_count() {
    let cfg = search_only(vec![64], 1);
    let tput = spec(64, Procedure::Throughput, Some(1e6), &cfg);
    // Half the budget's time at the rate: a catch-up of at most 1024 frames.
    let lag = max_lag(&tput).unwrap().as_secs_f64();
    assert!((lag - 0.5 * LATE_BUDGET_FRAMES / 1e6).abs() < 1e-9, "{lag}");
    let lat = TrialSpec {
        latency: true,
        ..spec(64, Procedure::Latency, Some(1e6), &cfg)
    };
    assert_eq!(max_lag(&lat), Some(LATENCY_MAX_LAG));
    assert_eq!(max_lag(&spec(64, Procedure::Probe, None, &cfg)), None);
    // 1 s of frames; 15 ms of gaps (1.5 %) pass, 25 ms (2.5 %) do not: a
    // gap rests the DuT, so a throughput trial's gaps are held within the
    // resolution, not to the latency trials' 10 %.
    let mut rec = TrialRecord::new(&tput, 1_000_000, 1_000_000, 1.0);
    rec.kernel.agrees = true;
    rec.gen_slipped_us = 15_000.0;
    rec.gen_slips = 1;
    rec.validate(&tput);
    assert!(rec.invalid.is_empty(), "{:?}", rec.invalid);
    rec.gen_slipped_us = 25_000.0;
    rec.validate(&tput);
    assert_eq!(rec.invalid.len(), 1, "{:?}", rec.invalid);
    assert!(
        rec.invalid[0].contains("slipped 25.0 ms"),
        "{:?}",
        rec.invalid
    );
    // What it sustained over its span, gaps included.
    assert!((rec.sustained_pps() - 1e6 / 1.025).abs() < 1.0);
    // The same gaps in a latency trial pass.
    rec.validate(&lat);
    assert!(rec.invalid.is_empty(), "{:?}", rec.invalid);
}

/// The model, but a generator that keeps up at most `sustain` frames/s
/// over trials of a second or more: its schedule slips (in `slips` gaps)
/// for the rest of the time.
struct SlowLong {
    m: Model,
    sustain: f64,
    slips: u64,
}

impl Trials for SlowLong {
    fn trial(&mut self, s: &TrialSpec) -> Result<TrialRecord, String> {
        let mut rec = self.m.trial(s)?;
        let r = s.rate_pps.unwrap_or(0.0);
        if s.duration >= Duration::from_secs(1) && r > self.sustain {
            let n = rec.sent as f64;
            rec.gen_slipped_us = (n / self.sustain - n / r) * 1e6;
            rec.gen_slips = self.slips;
            rec.validate(s);
        }
        Ok(rec)
    }
}

#[test]
fn a_final_trial_the_generator_cannot_keep_up_steps_under_what_it_sustained() {
    // The DuT forwards 5 Mpps, the generator offers 4 in short trials and
    // keeps up 3.5 in long ones: the NDR is confirmed under 3.5, still a
    // bound (the DuT never lost).
    let cfg = Rfc2544Config {
        final_trial: Some(Duration::from_secs(1)),
        ..search_only(vec![64], 1)
    };
    let mut t = SlowLong {
        m: Model::new(5e6, 0.0, 4e6),
        sustain: 3.5e6,
        slips: RATE_SLIPS,
    };
    let r = run(&cfg, &mut t, &mut |_, _| {}).unwrap();
    let ndr = r[0].throughput_pps.unwrap();
    assert_eq!(r[0].ndr_confirmed, Some(true), "{:?}", r[0].final_trials);
    assert!(
        ndr <= 3.5e6 && ndr >= 3.5e6 * (1.0 - 2.0 * cfg.resolution),
        "{ndr}"
    );
    assert!(r[0].generator_limited);
    // The first final trial was invalid for its gaps.
    let first = &r[0].trials[r[0].final_trials[0]];
    assert!(
        first.invalid.iter().any(|w| w.contains("slipped")),
        "{:?}",
        first.invalid
    );
    // Invalid and not repeated (the generator fell short at that rate and
    // the DuT lost nothing: the same rate would fall short again), the
    // pass under what it sustained; the PDR (4 Mpps in the search) does
    // not start over above it: it is the NDR's.
    assert!(!first.repeated);
    assert_eq!(r[0].final_trials.len(), 2, "{:?}", r[0].final_trials);
    assert_eq!(r[0].pdr_pps, Some(ndr));
    assert_eq!(r[0].pdr_confirmed, Some(true));
    // The same shortfall in a few gaps (a stall of the machine, not the
    // rate): repeated once at the same rate, then under what it sustained.
    t.slips = RATE_SLIPS - 1;
    let r = run(&cfg, &mut t, &mut |_, _| {}).unwrap();
    let first = &r[0].trials[r[0].final_trials[0]];
    assert!(first.repeated, "{:?}", r[0].final_trials);
    assert_eq!(r[0].final_trials.len(), 3, "{:?}", r[0].final_trials);
    assert_eq!(r[0].ndr_confirmed, Some(true));
    assert_eq!(r[0].throughput_pps, Some(ndr));
}

/// The model, but every trial of a second or more above the rate given
/// loses 0.1 % of its frames (a DuT preempted now and then, whose rings
/// absorb the stall only under that rate).
struct LongLossy(Model, f64);

impl Trials for LongLossy {
    fn trial(&mut self, s: &TrialSpec) -> Result<TrialRecord, String> {
        let mut rec = self.0.trial(s)?;
        let over = s.rate_pps.is_some_and(|r| r > self.1);
        if s.duration >= Duration::from_secs(1) && s.procedure == Procedure::Throughput && over {
            rec.received = rec.received.saturating_sub(rec.sent / 1000);
            rec.lost = rec.sent - rec.received;
            rec.loss_ratio = rec.lost as f64 / rec.sent as f64;
            rec.kernel.dut_out_tx = rec.received;
            rec.kernel.sink_iface_rx = rec.received;
            rec.kernel.judge(rec.sent, rec.received);
            rec.validate(s);
            // The stall: the host took 20 ms of the DuT's CPU 1.
            rec.steal_ms = vec![0.0, 20.0];
        } else {
            rec.steal_ms = vec![0.0, 0.0];
        }
        Ok(rec)
    }
}

/// A 1 Mpps model DuT whose 1 s final trials lose 0.1 % above `above`
/// (after 0.2 s searches): its result and the rates of its final trials.
fn long_lossy_run(above: f64) -> (SizeResult, Vec<f64>) {
    let cfg = Rfc2544Config {
        final_trial: Some(Duration::from_secs(1)),
        trial: Duration::from_millis(200),
        ..search_only(vec![64], 1)
    };
    let mut r = run(
        &cfg,
        &mut LongLossy(Model::new(1e6, 0.0, 4e6), above),
        &mut |_, _| {},
    )
    .unwrap();
    let r = r.remove(0);
    let rates = r
        .final_trials
        .iter()
        .map(|&i| rate_of(&r.trials[i]))
        .collect();
    (r, rates)
}

#[test]
fn final_trials_stop_at_the_sizes_budget() {
    let (r, rates) = long_lossy_run(0.0);
    let r = [r];
    // No long trial passes the NDR: unconfirmed after the budget, not
    // after FINAL_STEPS steps.
    assert_eq!(r[0].ndr_confirmed, Some(false), "{rates:?}");
    assert_eq!(r[0].final_trials.len(), FINAL_TRIALS_PER_SIZE);
    // No small-loss repeat: each final trial ran at a rate of its own,
    // halving after each small loss (a stall, not the rate).
    assert!(r[0].final_trials.iter().all(|&i| !r[0].trials[i].repeated));
    for w in rates.windows(2) {
        assert!((w[1] / w[0] - 0.5).abs() < 1e-9, "{rates:?}");
    }
    // The PDR (0.5 %) passes at the first final trial: confirmed.
    assert_eq!(r[0].pdr_confirmed, Some(true));
    assert!(size_notes(&r[0]).iter().any(|n| n.contains("unconfirmed")));
}

#[test]
fn a_final_trial_after_a_stall_halves_then_goes_back_up() {
    // Long trials lose a little above 0.4 Mpps: the search's ~1 Mpps
    // fails, half of it fails, a quarter passes, and the trial halfway
    // back up (0.375) passes: the NDR, confirmed, under 0.4.
    let (r, rates) = long_lossy_run(0.4e6);
    let r = [r];
    let ndr = r[0].throughput_pps.unwrap();
    assert_eq!(r[0].ndr_confirmed, Some(true), "{rates:?}");
    assert!((0.35e6..=0.4e6).contains(&ndr), "{ndr} {rates:?}");
    assert_eq!(ndr, rates[3], "{rates:?}");
    assert!(!r[0].generator_limited);
    // The NDR lies between the pass and the fail at half the search's
    // rate: the stated spread is at least that bracket.
    let b = rates[1] / ndr - 1.0;
    assert!((r[0].final_bracket.unwrap() - b).abs() < 1e-12, "{rates:?}");
    assert!(repeat_spread(&r).unwrap() >= b);
    // The notes name the final trials that lost frames and the host's
    // steal in each: the two above 0.4 Mpps.
    let notes = size_notes(&r[0]);
    let lossy = notes
        .iter()
        .find(|n| n.starts_with("final trial(s) that lost frames: "))
        .unwrap_or_else(|| panic!("{notes:?}"));
    assert_eq!(
        lossy.matches("(the host's steal: CPU 1 20 ms)").count(),
        2,
        "{lossy}"
    );
    assert!(!lossy.contains("CPU 0"), "{lossy}");
}

/// A trial that failed without losing a frame says why: it stayed
/// invalid after its repeats ("loss 0.0000 % fail" said nothing).
#[test]
fn a_fail_without_loss_names_its_reason() {
    // Every throughput trial 10 ms behind its schedule, nothing lost.
    let mut t = Perturbed {
        late_us: 10_000.0,
        ..Perturbed::new(|_| true, |_| 0)
    };
    let mut lines = Vec::new();
    run(&search_only(vec![64], 1), &mut t, &mut |_, l| {
        lines.push(l.to_string())
    })
    .unwrap();
    let fails: Vec<&String> = lines.iter().filter(|l| l.contains(" fail")).collect();
    assert!(!fails.is_empty(), "{lines:?}");
    for l in fails {
        assert!(l.contains("fail (still invalid: "), "{l}");
    }
}

/// A failed trial's progress line says how many frames it lost: a loss
/// that rounds to "0.0000 %" must not read as a fail without a loss.
#[test]
fn a_failed_trial_s_progress_line_names_the_frames_lost() {
    // 7 more frames lost in every throughput trial: each one fails.
    let mut t = Perturbed::new(|_| true, |_| 7);
    let cfg = Rfc2544Config {
        strict: true,
        ..search_only(vec![64], 1)
    };
    let mut lines = Vec::new();
    run(&cfg, &mut t, &mut |_, l| lines.push(l.to_string())).unwrap();
    let fails: Vec<&String> = lines.iter().filter(|l| l.ends_with(" fail")).collect();
    assert!(!fails.is_empty(), "{lines:?}");
    for l in fails {
        assert!(l.contains(" frames) fail"), "{l}");
    }
    assert!(
        lines.iter().any(|l| l.contains("(7 frames) fail")),
        "{lines:?}"
    );
}
