//! `linerate bench --metrics ADDR:PORT`: the bench's progress as
//! Prometheus metrics. The bench tells it which DuT and frame size it is at
//! (its progress lines) and every trial's record as the trial ends; each
//! of those publishes a new page. No trial waits on it: it renders a page
//! of a few dozen lines between trials.

use linerate_measure::bench::rfc2544::TrialRecord;
use linerate_measure::bench::trial::TrialObserver;
use linerate_measure::frame_size;
use linerate_pipeline::metrics::{Exposition, Publish};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// Totals of one (DuT, frame size, procedure).
#[derive(Default, Clone)]
struct Totals {
    trials: u64,
    sent: u64,
    received: u64,
}

#[derive(Default)]
struct State {
    /// What the bench is at now.
    dut: String,
    size: String,
    /// Progress lines so far.
    steps: u64,
    totals: BTreeMap<(String, String, String), Totals>,
    last: Option<TrialRecord>,
    last_at: (String, String),
}

/// The bench's metrics view; cheap to clone (one state).
#[derive(Clone, Default)]
pub struct BenchMetrics(Arc<Mutex<State>>);

impl BenchMetrics {
    /// The bench is at `dut`, frame size `size` (0: none).
    pub fn at(&self, dut: &str, size: u32) {
        if let Ok(mut s) = self.0.lock() {
            s.dut = dut.to_string();
            if size > 0 {
                s.size = frame_size::label_b(size);
            }
            s.steps += 1;
        }
        super::super::common::publish(self);
    }

    /// The observer the bench calls with every trial's record.
    pub fn observer(&self) -> TrialObserver {
        let me = self.clone();
        TrialObserver(Arc::new(move |r: &TrialRecord| {
            if let Ok(mut s) = me.0.lock() {
                let size = frame_size::label_b(r.frame_size);
                // The procedure as the JSON names it ("frame-loss").
                let procedure = serde_json::to_value(r.procedure)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default();
                let key = (s.dut.clone(), size.clone(), procedure);
                let t = s.totals.entry(key).or_default();
                t.trials += 1;
                t.sent += r.sent;
                t.received += r.received;
                s.last_at = (s.dut.clone(), size);
                s.last = Some(r.clone());
            }
            super::super::common::publish(&me);
        }))
    }
}

impl Publish for BenchMetrics {
    fn metrics(&self, m: &mut Exposition) {
        let Ok(s) = self.0.lock() else { return };
        m.gauge(
            "linerate_bench_current",
            "The DuT and frame size the bench is at (always 1).",
            &[("dut", &s.dut), ("frame_size", &s.size)],
            1.0,
        );
        m.counter(
            "linerate_bench_steps_total",
            "Progress lines of the bench so far.",
            &[],
            s.steps,
        );
        for ((dut, size, procedure), t) in &s.totals {
            let l = [
                ("dut", dut.as_str()),
                ("frame_size", size.as_str()),
                ("procedure", procedure.as_str()),
            ];
            m.counter("linerate_bench_trials_total", "Trials run.", &l, t.trials);
            m.counter(
                "linerate_bench_sent_packets_total",
                "Frames the generator sent in the trials.",
                &l,
                t.sent,
            );
            m.counter(
                "linerate_bench_received_packets_total",
                "Frames the sink counted in the trials.",
                &l,
                t.received,
            );
        }
        if let Some(r) = &s.last {
            let l = [
                ("dut", s.last_at.0.as_str()),
                ("frame_size", s.last_at.1.as_str()),
            ];
            for (name, help, v) in [
                (
                    "linerate_bench_last_trial_offered_packets_per_second",
                    "The rate the last trial offered.",
                    r.offered_pps,
                ),
                (
                    "linerate_bench_last_trial_forwarded_packets_per_second",
                    "The rate at which the last trial's frames reached the sink.",
                    r.forwarded_pps,
                ),
                (
                    "linerate_bench_last_trial_loss_ratio",
                    "The share of the last trial's frames lost.",
                    r.loss_ratio,
                ),
                (
                    "linerate_bench_last_trial_generator_slip_seconds",
                    "How far the generator's schedule slipped at worst in the last trial.",
                    r.gen_late_max_us / 1e6,
                ),
            ] {
                m.gauge(name, help, &l, v);
            }
        }
    }
}
