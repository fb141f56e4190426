//! One RFC 2544 run of `linerate bench` from start to end: the earlier runs
//! from the history file, the empty bed's latency, every DuT (or the
//! external ports), the history update; then what is written from it (the
//! JSON, the HTML report, the failures that end the run with an error).

use super::external::{self, External};
use super::{history, to_report, Direction, EmptyBed, Progress3, Rfc2544Bench, Rfc2544Result};
use crate::bench::dut::Dut;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// What to run: the bench, the external ports instead of the namespace bed,
/// and the history file (None: neither read nor written).
pub struct Plan {
    pub cfg: Rfc2544Bench,
    pub external: Option<External>,
    pub history_file: Option<PathBuf>,
}

/// The earlier runs of the history file with this machine and settings.
pub struct Earlier {
    runs: Vec<history::Run>,
    machine: String,
    settings: String,
}

/// What a run found.
pub struct Session {
    /// UTC, RFC 3339, at the end of the run.
    pub date: String,
    pub results: Vec<Rfc2544Result>,
    pub empty: Vec<EmptyBed>,
    pub history: Option<history::Summary>,
    pub interrupted: bool,
    pub seconds: f64,
}

impl Plan {
    /// The rows of the run in the order they are measured (a DuT once per
    /// direction), for the progress lines.
    pub fn rows(&self, duts: &[Box<dyn Dut>]) -> Vec<String> {
        if self.external.is_some() {
            return vec!["external".to_string()];
        }
        duts.iter()
            .flat_map(|d| {
                self.cfg.directions.iter().map(move |dir| match dir {
                    Direction::Uni => d.name(),
                    Direction::Bi => format!("{} bi", d.name()),
                })
            })
            .collect()
    }

    /// The earlier runs in the history file, read before the run: an
    /// unreadable file ends it before any bed is built. `note` gets one
    /// line saying what was read.
    pub fn earlier(&self, note: &mut dyn FnMut(&str)) -> Result<Earlier, String> {
        let (machine, settings) = (history::machine(), history::settings(&self.cfg));
        let runs = match &self.history_file {
            Some(p) => {
                let l = history::load(p, &machine, &settings)?;
                note(&format!(
                    "history: {} earlier run(s) with these settings on this machine in {}{}",
                    l.runs.len(),
                    p.display(),
                    if l.bad_lines > 0 {
                        format!(" ({} line(s) that are not a run skipped)", l.bad_lines)
                    } else {
                        String::new()
                    }
                ));
                l.runs
            }
            None => Vec::new(),
        };
        Ok(Earlier {
            runs,
            machine,
            settings,
        })
    }

    /// Run it. `note` gets the lines worth telling the user on the way (an
    /// empty bed that failed, a history not written).
    pub fn run(
        &self,
        earlier: Earlier,
        duts: &mut [Box<dyn Dut>],
        stop: &Arc<AtomicBool>,
        progress: Progress3,
        note: &mut dyn FnMut(&str),
    ) -> Session {
        let t0 = Instant::now();
        let cfg = &self.cfg;
        let Earlier {
            runs: earlier,
            machine,
            settings,
        } = earlier;
        // The measurement's own latency first: the generator straight into
        // the sink (on the namespace bed; not for external ports).
        let empty = if cfg.procedures.latency && self.external.is_none() {
            super::empty_bed(cfg, stop, progress).unwrap_or_else(|e| {
                note(&format!("empty bed: {e} (no latency baseline)"));
                Vec::new()
            })
        } else {
            Vec::new()
        };
        // The empty bed's p50 (the largest over the sizes): a DuT's p50 at
        // its NDR far above it flags a standing queue.
        let mut with_base = cfg.clone();
        with_base.procedures.empty_bed_p50_ns = empty
            .iter()
            .filter_map(|e| e.trial.latency.as_ref())
            .map(|l| l.p50_ns)
            .reduce(f64::max);
        let cfg = &with_base;
        let mut results = match &self.external {
            Some(ext) => vec![external::run(cfg, ext, stop, progress)],
            None => super::run_rfc2544(cfg, duts, stop, progress),
        };
        if cfg.procedures.latency && self.external.is_none() && !stop.load(Ordering::SeqCst) {
            if let Err(e) = baselines(cfg, &mut results, stop, progress) {
                note(&format!(
                    "empty bed at the latency rows' rates: {e} (no baselines)"
                ));
            }
        }
        let interrupted = stop.load(Ordering::SeqCst);
        let date = linerate_io::time::utc_rfc3339();
        let history = self.history_file.clone().map(|file| {
            let this = history::run_of(&date, &machine, &settings, &results);
            let spread = history::between_run_spread(&this, &earlier);
            history::widen(&mut results, spread);
            // Only a whole run is kept; a failed write costs the next run's
            // between-run spread, not this run's results.
            if !interrupted && !this.results.is_empty() {
                if let Err(e) = history::append(&file, &this) {
                    note(&format!("{e}: this run is not kept"));
                }
            }
            history::Summary {
                file,
                runs: history::pooled_runs(&this, &earlier),
                spread,
            }
        });
        Session {
            date,
            results,
            empty,
            history,
            interrupted,
            seconds: t0.elapsed().as_secs_f64(),
        }
    }
}

impl Session {
    /// Every trial, the environment and the settings, as `--json` writes it.
    /// Every size result also holds `notes`: what the summaries say about
    /// it beyond its numbers ([`super::rfc2544::size_notes`]), so the
    /// Markdown rendered from the JSON says it too.
    pub fn json(&self, cfg: &Rfc2544Bench) -> serde_json::Value {
        let mut results = serde_json::json!(self.results);
        for (r, rj) in self
            .results
            .iter()
            .zip(results.as_array_mut().into_iter().flatten())
        {
            for (s, sj) in r
                .sizes
                .iter()
                .zip(rj["sizes"].as_array_mut().into_iter().flatten())
            {
                let mut notes = super::rfc2544::size_notes(s);
                notes.extend(super::guest_host_note(&self.results, r, s.frame_size));
                if std::ptr::eq(s, &r.sizes[0]) {
                    notes.extend(r.dut_note());
                }
                sj["notes"] = serde_json::json!(notes);
            }
        }
        serde_json::json!({
            "date": self.date,
            "environment": to_report::environment(cfg, &self.results),
            "procedures": cfg.procedures,
            "history": self.history,
            "seconds": self.seconds,
            "interrupted": self.interrupted,
            "empty_bed": self.empty,
            "results": results,
        })
    }

    /// The Markdown section of docs/BENCHMARKS.md ([`super::markdown`]):
    /// `command` the command line as given, `report` the HTML report's path
    /// when one was written.
    pub fn markdown(&self, cfg: &Rfc2544Bench, command: &str, report: Option<&str>) -> String {
        super::markdown::rfc2544(&self.json(cfg), command, report)
    }

    /// The HTML report with its plots (`line_rate_gbps`: the link speed of
    /// the line-rate curve).
    pub fn html(&self, cfg: &Rfc2544Bench, line_rate_gbps: f64) -> String {
        let d = to_report::report_data(
            "linerate bench: RFC 2544",
            &self.date,
            cfg,
            &self.results,
            &self.empty,
            line_rate_gbps,
            self.history.as_ref(),
        );
        crate::report::render_html(&d)
    }

    /// The DuTs that failed (did not start, never forwarded, died): one line
    /// each, naming where the DuT is described.
    pub fn failures(&self) -> Vec<String> {
        self.results
            .iter()
            .filter(|r| r.status.starts_with("failed") || r.status.starts_with("repetition"))
            .map(|r| {
                let at = if r.origin == "built-in" {
                    String::new()
                } else {
                    format!("{}: ", r.origin)
                };
                format!("{at}DuT {}: {}", r.label(), r.status)
            })
            .collect()
    }
}

/// Each latency row's baseline: the empty bed at the row's own rate and
/// size (one bed for all of them; a both-ways row's baseline runs at each
/// direction's share, one way), filled into
/// [`rfc2544::SizeResult::latency_baseline`] and `common_latency_baseline`.
fn baselines(
    cfg: &super::Rfc2544Bench,
    results: &mut [super::Rfc2544Result],
    stop: &Arc<AtomicBool>,
    progress: super::Progress3,
) -> Result<(), String> {
    use super::rfc2544::Baseline;
    let share = |r: &super::Rfc2544Result| match r.direction {
        super::Direction::Uni => 1.0,
        super::Direction::Bi => 0.5,
    };
    let key = |size: u32, rate: f64| (size, rate.round() as u64);
    let mut want: Vec<(u32, f64)> = Vec::new();
    for r in results.iter().filter(|r| r.status == "ok") {
        for s in &r.sizes {
            let rows = [
                s.latency_trial.map(|i| s.trials[i].requested_pps),
                s.common_latency_trials
                    .first()
                    .map(|&i| s.trials[i].requested_pps),
            ];
            for rate in rows.into_iter().flatten().flatten() {
                let x = (s.frame_size, rate * share(r));
                if !want.iter().any(|w| key(w.0, w.1) == key(x.0, x.1)) {
                    want.push(x);
                }
            }
        }
    }
    if want.is_empty() {
        return Ok(());
    }
    let got = super::empty_bed_at(cfg, &want, stop, progress)?;
    let find = |size: u32, rate: f64| {
        got.iter()
            .find(|e| key(e.frame_size, e.rate_pps) == key(size, rate))
            .and_then(|e| Baseline::of(&e.trial))
    };
    for r in results.iter_mut().filter(|r| r.status == "ok") {
        let k = share(r);
        for s in &mut r.sizes {
            if let Some(rate) = s.latency_trial.and_then(|i| s.trials[i].requested_pps) {
                s.latency_baseline = find(s.frame_size, rate * k);
            }
            if let Some(rate) = s
                .common_latency_trials
                .first()
                .and_then(|&i| s.trials[i].requested_pps)
            {
                s.common_latency_baseline = find(s.frame_size, rate * k);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::text::tests::{cfg, result, size};
    use super::*;

    #[test]
    fn the_json_and_its_markdown_hold_every_sizes_notes() {
        let mut s = size(64, 1e6, false, 1e6, false);
        s.standing_queue = Some("frames arrived 80 ms after the trial".into());
        let session = Session {
            date: "now".into(),
            results: vec![result("dut", Direction::Uni, vec![s])],
            empty: Vec::new(),
            history: None,
            interrupted: false,
            seconds: 1.0,
        };
        let j = session.json(&cfg());
        assert_eq!(
            j["results"][0]["sizes"][0]["notes"],
            serde_json::json!(["frames arrived 80 ms after the trial"])
        );
        let m = session.markdown(&cfg(), "x", None);
        assert!(
            m.contains("- dut 64 B: frames arrived 80 ms after the trial.\n"),
            "{m}"
        );
        assert!(m.contains("| dut | 1.000‡ [10 s] / 1.000 [10 s] |"), "{m}");
    }
}
