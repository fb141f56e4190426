//! From RFC 2544 results ([`Rfc2544Result`]) to the report's data
//! ([`ReportData`]): plots, the environment and the tables of every trial.

use super::history::Summary;
use super::markdown::{Figure, AGGREGATE, STANDING_QUEUE, UNCONFIRMED};
use super::rfc2544::{Procedure, SizeResult};
use super::{Direction, Rfc2544Bench, Rfc2544Result};
use crate::report::{l1_gbps, LatencySeries, ReportData, Series, Table};
use linerate_io::host::{cpu_model, kernel_release};

/// A size's NDR as the tables show it ([`Figure`]: ">=" for a bound, the
/// marks, the trials it rests on).
pub fn ndr(s: &SizeResult) -> Figure {
    Figure {
        pps: s.throughput_pps,
        bound: s.generator_limited,
        trial_s: s.ndr_trial_s,
        unconfirmed: s.ndr_confirmed == Some(false),
        standing_queue: s.standing_queue.is_some(),
    }
}

/// A size's PDR: a bound of its own (`pdr_generator_limited`).
pub fn pdr(s: &SizeResult) -> Figure {
    Figure {
        pps: s.pdr_pps,
        bound: s.pdr_generator_limited,
        trial_s: s.pdr_trial_s,
        unconfirmed: s.pdr_confirmed == Some(false),
        standing_queue: false,
    }
}

/// The DuT as a row of a table: a both-ways row says its figures are the
/// aggregate of the two directions ([`super::markdown::row_label`]).
pub fn row_label(r: &Rfc2544Result) -> String {
    match r.direction {
        Direction::Uni => r.label(),
        Direction::Bi => format!("{} ({AGGREGATE})", r.label()),
    }
}

/// What the marks of the tables mean, for their titles and legends.
pub fn marks_legend() -> String {
    format!(
        "\">=\": a lower bound (the generator or the bed, not the DuT, was the limit; a ratio \
         from one is a bound too); {UNCONFIRMED}: no final trial passed at the searches' figure \
         or the steps under it, so it rests on the search's shorter trials (unconfirmed); \
         {STANDING_QUEUE}: a standing queue at the NDR (see the notes)"
    )
}

/// The machine, for the report and the JSON.
pub fn environment(cfg: &Rfc2544Bench, results: &[Rfc2544Result]) -> Vec<(String, String)> {
    let cpu = cpu_model();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let p = &cfg.procedures;
    let mut env = vec![
        ("kernel".to_string(), format!("Linux {}", kernel_release())),
        ("CPU".into(), format!("{cpu}, {cores} cores online")),
        (
            "test bed".into(),
            "network namespaces gen | dut | sink joined by veth pairs (g0-d0, d1-s0), GRO on, IPv6 off"
                .into(),
        ),
        (
            "XDP mode".into(),
            "native (veth driver) for the generator, the sink counter and XDP DuTs".into(),
        ),
        (
            "generator".into(),
            format!(
                "in-kernel XDP (BPF_PROG_RUN live frames, XDP_TX out of g0), paced in the program, on CPU {}, {} UDP flows; every frame tagged (trial stream, sequence number), TX time in every {} frames (every flow stamped)",
                cfg.gen_cpu, cfg.flows, super::trial::stamp_every(cfg.ts_every, cfg.flows)
            ),
        ),
        (
            "sink".into(),
            "XDP program on s0: counts a frame as received only if it carries this trial's tag with a sequence number not seen before (foreign, late, duplicated and reordered frames counted apart), histograms one-way latency (same CLOCK_MONOTONIC as the generator)".into(),
        ),
        ("DuT CPU".into(), cfg.dut_cpu.to_string()),
        ("CPU placement".into(), super::cpu_placement(cfg)),
        (
            "threaded NAPI".into(),
            if cfg.threaded_napi { "on" } else { "off" }.into(),
        ),
        (
            "receive steering".into(),
            if cfg.rps {
                format!("RPS of d0 to CPU {}: the kernel's work after d0's XDP hook (bridge, routing, packet sockets) runs on the DuT's core; d0's NAPI and XDP run on the generator's", cfg.dut_cpu)
            } else {
                "none: d0's receive work, the kernel DuTs' forwarding included, runs on the generator's core".into()
            },
        ),
        (
            "valid trials".into(),
            format!(
                "frames counted only when verified (this trial's tag, each sequence number once; a duplicate fails the trial); a paced trial offered at least {:.0} % of the rate asked, its generator never more than {} frames' worth behind its schedule (the catch-up leaves as one burst), its schedule slipped (gaps left where the generator fell more than half that behind and did not catch up) for at most {:.0} % of its sending time ({:.0} % in latency trials), the kernel's counters of g0, d0, d1 and s0 within {} % of ours; an invalid trial is repeated up to {} times, one still invalid counts as a fail",
                (1.0 - super::rfc2544::OFFERED_TOLERANCE) * 100.0,
                super::rfc2544::LATE_BUDGET_FRAMES,
                super::rfc2544::THROUGHPUT_SLIP_TOLERANCE * 100.0,
                super::rfc2544::SLIP_TOLERANCE * 100.0,
                super::rfc2544::KERNEL_TOLERANCE_PCT,
                super::rfc2544::INVALID_REPEATS
            ),
        ),
        (
            "procedures".into(),
            format!(
                "trial {:.2} s, loss tolerance {} % (NDR), PDR loss at most {} %{}, resolution {} %, {} search(es) per size (each from scratch), latency {} ({} trial(s)), restabilisation wait {:.1} s, final trial {}, frame loss at {:?} B, back-to-back at {:?} B x{}",
                p.trial.as_secs_f64(),
                p.loss_tolerance * 100.0,
                p.pdr_loss * 100.0,
                if p.strict {
                    " (strict: no trial repeated)"
                } else {
                    " (a trial losing under 1 % repeated once: exceed ratio 50 %)"
                },

                p.resolution * 100.0,
                p.repetitions,
                if p.latency { "on" } else { "off" },
                p.latency_trials,
                p.settle.as_secs_f64(),
                p.final_trial.map_or(
                    format!(
                        "none (every NDR and PDR rests on the search's {} s trials)",
                        super::markdown::secs(p.trial.as_secs_f64())
                    ),
                    |d| format!(
                        "{} s at each NDR and PDR (a figure it confirmed rests on it; one it did not, on the search's {} s trials, marked {UNCONFIRMED})",
                        super::markdown::secs(d.as_secs_f64()),
                        super::markdown::secs(p.trial.as_secs_f64())
                    )
                ),
                p.frame_loss_sizes,
                p.back_to_back_sizes,
                p.back_to_back_trials
            ),
        ),
    ];
    for r in results {
        env.push((
            format!("DuT {}", r.label()),
            format!(
                "{} ({}{})",
                r.description,
                r.version,
                r.spec_hash
                    .as_ref()
                    .map_or(String::new(), |h| format!("; spec {h}"))
            ),
        ));
    }
    env
}

fn f3(v: f64) -> String {
    format!("{:.3}", v)
}

fn us(ns: f64) -> String {
    format!("{:.1}", ns / 1e3)
}

/// The report for `results`.
pub fn report_data(
    title: &str,
    date: &str,
    cfg: &Rfc2544Bench,
    results: &[Rfc2544Result],
    empty: &[super::EmptyBed],
    line_rate_gbps: f64,
    history: Option<&Summary>,
) -> ReportData {
    let mut d = ReportData {
        title: title.to_string(),
        date: date.to_string(),
        environment: environment(cfg, results),
        line_rate_gbps,
        frame_loss_load: "the generator's top speed".into(),
        ..Default::default()
    };
    let mut summary = Table {
        title: format!(
            "Throughput (RFC 2544 26.1) and latency at it (26.2); a both-ways row's rates are \
             the {AGGREGATE}; {}",
            marks_legend()
        ),
        header: [
            "DuT",
            "frame (B)",
            "throughput, NDR (Mpps)",
            "Gbit/s (L1)",
            "min-max (Mpps)",
            "PDR (Mpps)",
            "trial length NDR / PDR (s)",
            "search step (Mpps)",
            "top speed offered / forwarded (Mpps)",
            "latency p50 / p99 / max (us)",
            "p50 minus the empty bed's at the row's rate (us)",
            "kernel check",
            "trials (invalid)",
            "notes",
        ]
        .map(String::from)
        .to_vec(),
        rows: Vec::new(),
    };
    let mut b2b = Table {
        title: "Back-to-back frames (RFC 2544 26.4): longest burst at top speed without loss"
            .into(),
        header: ["DuT", "frame (B)", "bursts (frames)", "mean (frames)"]
            .map(String::from)
            .to_vec(),
        rows: Vec::new(),
    };
    let mut trials = Table {
        title: "Every trial".into(),
        header: [
            "DuT",
            "frame (B)",
            "procedure",
            "requested (Mpps)",
            "offered (Mpps)",
            "sent (frames)",
            "received (frames)",
            "loss (%)",
            "drain (ms)",
            "generator late (ms)",
            "foreign / late / duplicated / reordered (frames)",
            "kernel g0 / d0 / d1 / s0 diff (%)",
            "counted",
        ]
        .map(String::from)
        .to_vec(),
        rows: Vec::new(),
    };
    for r in results {
        if r.status != "ok" && r.sizes.is_empty() {
            summary.rows.push(vec![
                row_label(r),
                "-".into(),
                r.status.clone(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
            ]);
            continue;
        }
        let mut tp = Series {
            dut: r.label(),
            ..Default::default()
        };
        for s in &r.sizes {
            // The throughput-by-size chart has fixed sizes only (the
            // IMIX is a row of the table); a lower bound is named in the
            // legend.
            if let (Some(v), false) = (s.throughput_pps, s.frame_size == crate::frame_size::IMIX) {
                tp.points.push((s.frame_size as f64, v / 1e6));
                if s.generator_limited {
                    tp.lower_bounds.push(s.frame_size as f64);
                }
            }
            summary.rows.push(summary_row(results, r, s, empty));
            if let Some(l) = s.latency() {
                if l.samples > 0 {
                    d.latency.push(latency_series(&r.label(), s.frame_size, l));
                }
            }
            if !s.frame_loss.is_empty() && s.frame_size == first_loss_size(results) {
                d.frame_loss.push(Series {
                    dut: r.label(),
                    points: s
                        .frame_loss
                        .iter()
                        // At the load offered (over the sending time), not
                        // the one asked; a trial that stayed invalid is no
                        // DuT figure: left out (the tables flag it).
                        .filter(|p| !p.3 && s.max_offered_pps > 0.0)
                        .map(|&(_, offered, loss, _)| {
                            (offered / s.max_offered_pps * 100.0, loss * 100.0)
                        })
                        .collect(),
                    ..Default::default()
                });
            }
            if !s.back_to_back.is_empty() {
                let n: Vec<String> = s
                    .back_to_back
                    .iter()
                    .map(|b| format!("{}{}", if b.at_least { ">=" } else { "" }, b.frames))
                    .collect();
                let mean = s.back_to_back.iter().map(|b| b.frames as f64).sum::<f64>()
                    / s.back_to_back.len() as f64;
                b2b.rows.push(vec![
                    row_label(r),
                    crate::frame_size::label_mix(s.frame_size),
                    n.join(", "),
                    format!("{mean:.0}"),
                ]);
            }
            for t in &s.trials {
                trials.rows.push(vec![
                    row_label(r),
                    crate::frame_size::label(t.frame_size),
                    procedure_name(t.procedure).into(),
                    t.requested_pps
                        .map(|v| format!("{:.4}", v / 1e6))
                        .unwrap_or_else(|| "top".into()),
                    format!("{:.4}", t.offered_pps / 1e6),
                    t.sent.to_string(),
                    t.received.to_string(),
                    format!("{:.4}", t.loss_ratio * 100.0),
                    format!("{:.0}", t.drain_ms),
                    if t.requested_pps.is_some() {
                        format!("{:.2}", t.gen_late_max_us / 1e3)
                    } else {
                        "-".into()
                    },
                    format!(
                        "{} / {} / {} / {}",
                        t.verify.foreign, t.verify.stale, t.verify.duplicates, t.verify.reordered
                    ),
                    format!(
                        "{:+.2} / {:+.2} / {:+.2} / {:+.2}{}",
                        t.kernel.offered_diff_pct,
                        t.kernel.dut_in_diff_pct,
                        t.kernel.dut_out_diff_pct,
                        t.kernel.forwarded_diff_pct,
                        if t.kernel.agrees { "" } else { " DISAGREE" }
                    ),
                    match (t.repeated, t.invalid.is_empty()) {
                        (false, true) => "yes".into(),
                        (true, true) => "no: repeated (exceed ratio)".into(),
                        (true, false) => format!("no: invalid, repeated: {}", t.invalid.join("; ")),
                        (false, false) => format!("as a fail: invalid: {}", t.invalid.join("; ")),
                    },
                ]);
            }
        }
        if !tp.points.is_empty() {
            d.throughput.push(tp);
        }
    }
    d.tables.push(summary);
    let common: Vec<Vec<String>> = results
        .iter()
        .flat_map(|r| {
            r.sizes.iter().filter_map(move |s| {
                let rate = s.common_latency_pps?;
                let l = s.common_latency_merged.as_ref()?;
                let lost: u64 = s
                    .common_latency_trials
                    .iter()
                    .map(|&i| s.trials[i].lost)
                    .sum();
                Some(vec![
                    row_label(r),
                    crate::frame_size::label_mix(s.frame_size),
                    f3(rate / 1e6),
                    l.samples.to_string(),
                    us(l.p50_ns),
                    us(l.p99_ns),
                    us(l.max_ns),
                    lost.to_string(),
                ])
            })
        })
        .collect();
    if !common.is_empty() {
        d.tables.push(Table {
            title: match cfg.common_load {
                super::CommonLoad::OfSlowest(f) => format!(
                    "Latency at a common load: every DuT at {:.0} % of the slowest DuT's \
                     throughput (NDR) at each size, the same rate for all",
                    f * 100.0
                ),
                _ => "Latency at a common load: every DuT at the same rate".into(),
            },
            header: [
                "DuT",
                "frame (B)",
                "rate (Mpps)",
                "samples",
                "p50 (us)",
                "p99 (us)",
                "max (us)",
                "frames lost",
            ]
            .map(String::from)
            .to_vec(),
            rows: common,
        });
    }
    if !empty.is_empty() {
        d.tables.push(Table {
            title: format!(
                "Empty bed: the generator's frames straight into the sink one veth away (no DuT), \
                 at {:.1} Mpps: the latency the measurement itself adds (stamps on every {}th \
                 frame: every flow)",
                super::EMPTY_BED_PPS / 1e6,
                super::trial::stamp_every(cfg.ts_every, cfg.flows)
            ),
            header: [
                "frame (B)",
                "samples",
                "min (us)",
                "p50 (us)",
                "p99 (us)",
                "max (us)",
                "valid",
            ]
            .map(String::from)
            .to_vec(),
            rows: empty
                .iter()
                .filter_map(|e| {
                    let l = e.trial.latency.as_ref()?;
                    Some(vec![
                        crate::frame_size::label(e.frame_size),
                        l.samples.to_string(),
                        us(l.min_ns),
                        us(l.p50_ns),
                        us(l.p99_ns),
                        us(l.max_ns),
                        if e.trial.invalid.is_empty() {
                            "yes".into()
                        } else {
                            e.trial.invalid.join("; ")
                        },
                    ])
                })
                .collect(),
        });
    }
    let pct = |v: Option<f64>| v.map_or("-".into(), |o| format!("±{:.1}", o * 100.0));
    let spread_rows: Vec<Vec<String>> = results
        .iter()
        .filter_map(|r| {
            r.throughput_spread.map(|x| {
                let n = r.sizes.iter().map(|s| s.searches.len()).max().unwrap_or(0);
                let only = if r.throughput_spread_history.is_none() {
                    " (this run only)"
                } else {
                    ""
                };
                vec![
                    row_label(r),
                    format!("{}{only}", pct(Some(x))),
                    pct(r.throughput_spread_own),
                    pct(r.throughput_spread_history),
                    n.to_string(),
                ]
            })
        })
        .collect();
    if !spread_rows.is_empty() {
        let between = match history {
            Some(h) if h.spread.is_some() => format!(
                "from this run and the {} earlier run(s) of the bench with the same settings \
                 on this machine (same CPU and kernel, same DuT version and spec) kept in {}",
                h.runs,
                h.file.display()
            ),
            Some(h) if h.runs > 0 => format!(
                "none yet: the {} earlier run(s) with the same settings on this machine in {} \
                 share too few results with this one (at least {} degrees of freedom). Until \
                 then the spread holds only what moved within this run",
                h.runs,
                h.file.display(),
                super::history::MIN_DOF
            ),
            Some(h) => format!(
                "none yet: no earlier run with the same settings (and DuTs and sizes) on this \
                 machine in {} (this run is kept there for the next). Until then the spread \
                 holds only what moved within this run; a shared or virtual machine can \
                 change speed for minutes at a time",
                h.file.display()
            ),
            None => "not used (--no-history)".into(),
        };
        d.tables.push(Table {
            title: format!(
                "Re-run spread: a re-run's throughput is expected within this of this \
                 run's (95 % prediction interval). The spread stated is the largest of three: \
                 the DuT's own (its repeated searches, pooled over the frame sizes; the \
                 repetitions of a size are spread over the run), the one pooled over every \
                 DuT (sizes where the generator was the limit left out: one DuT's few \
                 searches now and then come out close by chance), and the one between runs, \
                 pooled over every DuT in logarithms (results move by factors: its ± is the \
                 upper end of the interval of a re-run's ratio to this run's, which covers the \
                 lower end too): {between}"
            ),
            header: [
                "DuT",
                "spread (%)",
                "own (%)",
                "between runs (%)",
                "searches per size",
            ]
            .map(String::from)
            .to_vec(),
            rows: spread_rows,
        });
    }
    if !b2b.rows.is_empty() {
        d.tables.push(b2b);
    }
    d.tables.push(trials);
    d
}

fn first_loss_size(results: &[Rfc2544Result]) -> u32 {
    results
        .iter()
        .flat_map(|r| r.sizes.iter())
        .find(|s| !s.frame_loss.is_empty())
        .map_or(0, |s| s.frame_size)
}

/// Name of a procedure as in the JSON.
pub fn procedure_name(p: Procedure) -> &'static str {
    match p {
        Procedure::Probe => "probe",
        Procedure::Throughput => "throughput",
        Procedure::Latency => "latency",
        Procedure::FrameLoss => "frame-loss",
        Procedure::BackToBack => "back-to-back",
        Procedure::Check => "check",
    }
}

fn summary_row(
    results: &[Rfc2544Result],
    r: &Rfc2544Result,
    s: &SizeResult,
    empty: &[super::EmptyBed],
) -> Vec<String> {
    let size = crate::frame_size::wire_bytes(s.frame_size);
    let (n, p) = (ndr(s), pdr(s));
    let (tp, gbps) = match s.throughput_pps {
        Some(v) => (
            n.cell(),
            format!(
                "{}{:.2}",
                if n.bound { ">=" } else { "" },
                l1_gbps(v / 1e6, size)
            ),
        ),
        None => ("-".into(), "-".into()),
    };
    let tp = if s.searches.iter().any(|x| x.throughput_pps == 0.0) {
        format!("{tp} (a search where no rate passed)")
    } else {
        tp
    };
    let spread = match (s.throughput_min_pps, s.throughput_max_pps) {
        (Some(a), Some(b)) => format!("{}-{}", f3(a / 1e6), f3(b / 1e6)),
        _ => "-".into(),
    };
    let pdr = match (s.pdr_min_pps, s.pdr_max_pps) {
        (Some(a), Some(b)) if a < b && p.pps.is_some() => {
            format!("{} ({}-{})", p.cell(), f3(a / 1e6), f3(b / 1e6))
        }
        _ => p.cell(),
    };
    let lat = s
        .latency()
        .filter(|l| l.samples > 0)
        .map(|l| format!("{} / {} / {}", us(l.p50_ns), us(l.p99_ns), us(l.max_ns)))
        .unwrap_or_else(|| "-".into());
    let minus_empty = s
        .latency()
        .filter(|l| l.samples > 0)
        .and_then(|l| {
            // The row's own baseline (the empty bed at its rate), named.
            if let Some(b) = &s.latency_baseline {
                return Some(format!(
                    "{:+.1} (empty bed {} at {:.3} Mpps)",
                    (l.p50_ns - b.p50_ns) / 1e3,
                    us(b.p50_ns),
                    b.rate_pps / 1e6
                ));
            }
            let e = empty.iter().find(|e| e.frame_size == s.frame_size)?;
            let b = e.trial.latency.as_ref()?;
            Some(format!("{:+.1}", (l.p50_ns - b.p50_ns) / 1e3))
        })
        .unwrap_or_else(|| "-".into());
    let disagree = s.kernel_disagreements;
    vec![
        row_label(r),
        crate::frame_size::label_mix(s.frame_size),
        tp,
        gbps,
        spread,
        pdr,
        format!("{} / {}", n.trial(), p.trial()),
        s.resolution_pps
            .map(|v| format!("{:.4}", v / 1e6))
            .unwrap_or_else(|| "-".into()),
        format!(
            "{} / {}",
            f3(s.max_offered_pps / 1e6),
            f3(s.overload_forwarded_pps / 1e6)
        ),
        lat,
        minus_empty,
        if disagree == 0 {
            "agrees".into()
        } else {
            format!("{disagree} trial(s) > 0.5 %")
        },
        format!(
            "{} ({})",
            s.trials.len(),
            s.trials.iter().filter(|t| !t.invalid.is_empty()).count()
        ),
        super::rfc2544::size_notes(s)
            .into_iter()
            .chain(super::guest_host_note(results, r, s.frame_size))
            .chain(std::ptr::eq(s, &r.sizes[0]).then(|| r.dut_note()).flatten())
            .collect::<Vec<_>>()
            .join("; "),
    ]
}

fn latency_series(dut: &str, size: u32, l: &super::rfc2544::Latency) -> LatencySeries {
    let total: u64 = l.histogram.iter().map(|p| p.1).sum();
    let mut acc = 0u64;
    let cdf = l
        .histogram
        .iter()
        .map(|&(x, c)| {
            acc += c;
            (x, acc as f64 / total.max(1) as f64)
        })
        .collect();
    LatencySeries {
        dut: dut.to_string(),
        frame_size: size,
        cdf,
        histogram: l.histogram.clone(),
        samples: Some(l.samples),
        min_ns: Some(l.min_ns),
        mean_ns: Some(l.mean_ns),
        p50_ns: Some(l.p50_ns),
        p90_ns: Some(l.p90_ns),
        p99_ns: Some(l.p99_ns),
        p999_ns: Some(l.p999_ns),
        max_ns: Some(l.max_ns),
    }
}

#[cfg(test)]
mod tests {
    use super::super::text::tests::{cfg, result, size};
    use super::*;
    use crate::frame_size::IMIX;

    /// The summary table's cell of DuT row `dut` at `frame`, column `col`.
    fn cell(d: &ReportData, dut: &str, frame: &str, col: &str) -> String {
        let t = d
            .tables
            .iter()
            .find(|t| t.title.starts_with("Throughput"))
            .unwrap();
        let i = t.header.iter().position(|h| h == col).unwrap();
        let row = t
            .rows
            .iter()
            .find(|r| r[0] == dut && r[1] == frame)
            .unwrap_or_else(|| panic!("no row {dut} {frame}: {:?}", t.rows));
        row[i].clone()
    }

    #[test]
    fn the_summary_shows_bounds_trials_marks_and_the_imix() {
        // NDR exact, PDR a bound; the PDR unconfirmed (on 0.5 s trials).
        let mut s64 = size(64, 1.0e6, false, 1.2e6, true);
        s64.pdr_trial_s = 0.5;
        s64.pdr_confirmed = Some(false);
        s64.search_pdr_pps = Some(1.2e6);
        s64.standing_queue = Some("p50 at the NDR 300 us above the empty bed's".into());
        let xdp = size(512, 2.0e6, true, 2.0e6, true);
        let results = [
            result("dut", Direction::Uni, vec![s64, xdp]),
            result(
                "dut",
                Direction::Bi,
                vec![size(IMIX, 1.0e6, false, 1.0e6, false)],
            ),
        ];
        let d = report_data("t", "now", &cfg(), &results, &[], 10.0, None);
        assert_eq!(cell(&d, "dut", "64", "throughput, NDR (Mpps)"), "1.000‡");
        assert_eq!(cell(&d, "dut", "64", "PDR (Mpps)"), ">=1.200†");
        assert_eq!(
            cell(&d, "dut", "64", "trial length NDR / PDR (s)"),
            "10 s / 0.5 s"
        );
        let notes = cell(&d, "dut", "64", "notes");
        assert!(
            notes.contains("300 us above") && notes.contains("unconfirmed"),
            "{notes}"
        );
        assert_eq!(cell(&d, "dut", "512", "Gbit/s (L1)"), ">=8.51");
        // Both ways: the aggregate; the IMIX: its mix, Gbit/s at its mean.
        let bi = "dut bi (aggregate, both ways)";
        let imix = "imix (IPv4 IMIX 64/570/1518 B at 7:4:1, mean 353.8 B)";
        assert_eq!(cell(&d, bi, imix, "Gbit/s (L1)"), "2.99");
        // The plot's legend names the sizes where the DuT's points are
        // lower bounds; the color stays the DuT's.
        assert_eq!(d.throughput[0].lower_bounds, [512.0]);
        let html = crate::report::render_html(&d);
        assert!(html.contains("dut (&gt;= at 512 B)"), "legend");
        assert!(html.contains("lower bounds at those sizes"), "caption");
        // The environment says the slip rule and the final trials.
        let env = |k: &str| d.environment.iter().find(|e| e.0 == k).unwrap().1.clone();
        assert!(
            env("valid trials").contains("schedule slipped"),
            "{}",
            env("valid trials")
        );
        assert!(
            env("procedures").contains("final trial 10 s at each NDR and PDR"),
            "{}",
            env("procedures")
        );
    }
}
