//! The bench's results as plain-text tables (what `linerate bench` prints).

use super::markdown::{secs, Figure};
use super::to_report::{marks_legend, ndr, pdr, row_label};
use super::{history, CommonLoad, Direction, DutResult, EmptyBed, Rfc2544Bench, Rfc2544Result};
use crate::frame_size;
use linerate_io::host::kernel_release;
use std::io::{Result, Write};

/// The RFC 2544 table: NDR/PDR per DuT and size, the latency at the common
/// load, the re-run spreads and the frame-loss / back-to-back lines.
pub fn rfc2544(
    o: &mut dyn Write,
    results: &[Rfc2544Result],
    empty: &[EmptyBed],
    cfg: &Rfc2544Bench,
    history: Option<&history::Summary>,
    external: bool,
) -> Result<()> {
    writeln!(o)?;
    writeln!(
        o,
        "RFC 2544 throughput: NDR (loss tolerance {} %) and PDR (loss <= {} %), latency at the NDR; kernel {}\nCPUs: {}",
        cfg.procedures.loss_tolerance * 100.0,
        cfg.procedures.pdr_loss * 100.0,
        kernel_release(),
        if external {
            format!(
                "generator on CPU {}; the DuT is external (its CPUs are its own)",
                cfg.gen_cpu
            )
        } else {
            super::cpu_placement(cfg)
        }
    )?;
    for e in empty {
        if let Some(l) = &e.trial.latency {
            writeln!(
                o,
                "empty bed (generator -> veth -> sink, no DuT) {} at {:.1} Mpps: latency p50 {:.1} us, p99 {:.1} us, min {:.1} us, max {:.1} us{}",
                frame_size::label_b(e.frame_size),
                e.rate_pps / 1e6,
                l.p50_ns / 1e3,
                l.p99_ns / 1e3,
                l.min_ns / 1e3,
                l.max_ns / 1e3,
                if e.trial.invalid.is_empty() {
                    String::new()
                } else {
                    format!(" (invalid: {})", e.trial.invalid.join("; "))
                }
            )?;
        }
    }
    // Wide enough for a both-ways row's label ("... (aggregate, both ways)").
    let w = results
        .iter()
        .map(|r| row_label(r).chars().count())
        .max()
        .unwrap_or(0)
        .max(20);
    writeln!(
        o,
        "{:<w$} {:>5} {:>10} {:>9} {:>15} {:>10} {:>9} {:>26} {:>17}  note",
        "DuT",
        "bytes",
        "NDR Mpps",
        "L1 Gbit/s",
        "min-max Mpps",
        "PDR Mpps",
        "trial s",
        "lat p50/p99 (-empty) us",
        "vs bridge"
    )?;
    // The measurement's own share of a p50: " (p50 minus the empty bed's)".
    // The row's own baseline (the empty bed at the row's rate and size),
    // shown with what it is; without one, the empty bed's at the size.
    let minus_empty =
        |size: u32, l: &super::rfc2544::Latency, base: Option<&super::rfc2544::Baseline>| {
            if let Some(b) = base {
                return format!(
                    " ({:+.1} = minus {:.1} of the empty bed at {:.3} Mpps)",
                    (l.p50_ns - b.p50_ns) / 1e3,
                    b.p50_ns / 1e3,
                    b.rate_pps / 1e6
                );
            }
            empty
                .iter()
                .find(|e| e.frame_size == size)
                .and_then(|e| e.trial.latency.as_ref())
                .map_or(String::new(), |b| {
                    format!(" ({:+.1})", (l.p50_ns - b.p50_ns) / 1e3)
                })
        };
    // The bridge's NDR at a size: the ratio to it is a bound when either
    // figure is one.
    let bridge = |size: u32, dir: Direction| {
        results
            .iter()
            .find(|r| r.name == "linux-bridge" && r.direction == dir)
            .and_then(|r| r.sizes.iter().find(|s| s.frame_size == size))
            .map(ndr)
            .unwrap_or_default()
    };
    for r in results {
        if r.sizes.is_empty() {
            writeln!(
                o,
                "{:<w$} {:>5} {:>10}  {}",
                row_label(r),
                "-",
                "-",
                r.status
            )?;
            continue;
        }
        for s in &r.sizes {
            let (n, p) = (ndr(s), pdr(s));
            let (tp, g, spread, ratio) = match s.throughput_pps {
                Some(v) => (
                    n.cell(),
                    format!(
                        "{}{:.2}",
                        if n.bound { ">=" } else { "" },
                        crate::report::l1_gbps(v / 1e6, frame_size::wire_bytes(s.frame_size))
                    ),
                    format!(
                        "{:.3}-{:.3}",
                        s.throughput_min_pps.unwrap_or(v) / 1e6,
                        s.throughput_max_pps.unwrap_or(v) / 1e6
                    ),
                    n.ratio(&bridge(s.frame_size, r.direction)),
                ),
                None => ("-".into(), "-".into(), "-".into(), "-".into()),
            };
            let pdr = p.cell();
            let trial_s = |x: &Figure| match x.pps {
                Some(_) if x.trial_s > 0.0 => secs(x.trial_s),
                _ => "-".into(),
            };
            let trials = format!("{}/{}", trial_s(&n), trial_s(&p));
            let lat = s
                .latency()
                .filter(|l| l.samples > 0)
                .map(|l| {
                    format!(
                        "{:.1}/{:.1}{}",
                        l.p50_ns / 1e3,
                        l.p99_ns / 1e3,
                        minus_empty(s.frame_size, l, s.latency_baseline.as_ref())
                    )
                })
                .unwrap_or_else(|| "-".into());
            let mut note = Vec::new();
            if s.frame_size == frame_size::IMIX {
                note.push(format!(
                    "imix: {}, mean {:.1} B",
                    frame_size::IMIX_MIX,
                    frame_size::IMIX_MEAN_BYTES
                ));
            }
            match (n.bound && !s.rate_capped, p.bound && !s.rate_capped) {
                (true, true) => note.push("generator-limited: NDR and PDR are lower bounds".into()),
                (true, false) => note.push("generator-limited: the NDR is a lower bound".into()),
                (false, true) => note.push("generator-limited: the PDR is a lower bound".into()),
                (false, false) => {}
            }
            if s.kernel_disagreements > 0 {
                note.push(format!(
                    "{} trial(s) disagree with kernel counters > 0.5 %",
                    s.kernel_disagreements
                ));
            }
            if s.searches.iter().any(|x| x.throughput_pps == 0.0) {
                note.push("a search where no rate passed".into());
            }
            note.extend(super::rfc2544::size_notes(s));
            note.extend(super::guest_host_note(results, r, s.frame_size));
            if std::ptr::eq(s, &r.sizes[0]) {
                note.extend(r.dut_note());
            }
            if r.status != "ok" {
                note.push(r.status.clone());
            }
            writeln!(
                o,
                "{:<w$} {:>5} {:>10} {:>9} {:>15} {:>10} {:>9} {:>26} {:>17}  {}",
                row_label(r),
                frame_size::label(s.frame_size),
                tp,
                g,
                spread,
                pdr,
                trials,
                lat,
                ratio,
                note.join("; ")
            )?;
        }
    }
    writeln!(
        o,
        "trial s: seconds of the trials the NDR / PDR rest on (the final trial's when one \
         confirmed it); {}",
        marks_legend()
    )?;
    // Latency at the common load: every DuT at one rate per size.
    let mut common: Vec<String> = Vec::new();
    for r in results {
        for s in &r.sizes {
            let (Some(rate), Some(l)) = (s.common_latency_pps, s.common_latency_merged.as_ref())
            else {
                continue;
            };
            let own = minus_empty(s.frame_size, l, s.common_latency_baseline.as_ref());
            let bad = s
                .common_latency_trials
                .iter()
                .filter(|&&i| s.trials[i].lost > 0 || !s.trials[i].invalid.is_empty())
                .count();
            common.push(format!(
                "{:<w$} {:>5} {:>10.3} {:>26} {:>10.1}  {}",
                row_label(r),
                frame_size::label(s.frame_size),
                rate / 1e6,
                format!("{:.1}/{:.1}{own}", l.p50_ns / 1e3, l.p99_ns / 1e3),
                l.max_ns / 1e3,
                if bad > 0 {
                    format!("{bad} trial(s) lost frames or stayed invalid")
                } else {
                    String::new()
                }
            ));
        }
    }
    if !common.is_empty() {
        writeln!(
            o,
            "\nLatency at a common load (the same rate for every DuT: {}):\n{:<w$} {:>5} {:>10} {:>26} {:>10}  note",
            match cfg.common_load {
                CommonLoad::OfSlowest(f) => format!("{:.0} % of the slowest DuT's NDR at each size", f * 100.0),
                CommonLoad::Pps(p) => format!("{p:.0} frames/s"),
                CommonLoad::Off => String::new(),
            },
            "DuT",
            "bytes",
            "Mpps",
            "lat p50/p99 (-empty) us",
            "max us"
        )?;
        for l in common {
            writeln!(o, "{l}")?;
        }
    }
    let spreads: Vec<String> = results
        .iter()
        .filter_map(|r| {
            // Without an earlier run here the spread is this run's alone,
            // which cannot know how far a re-run moves: said beside it.
            r.throughput_spread.map(|x| {
                let only = if r.throughput_spread_history.is_none() {
                    " (this run only: a re-run may move further)"
                } else {
                    ""
                };
                format!("{} ±{:.1} %{only}", row_label(r), x * 100.0)
            })
        })
        .collect();
    if !spreads.is_empty() {
        writeln!(
            o,
            "\nRe-run spread: a re-run's throughput is expected within this of this run's \
             (95 % prediction interval{}{})",
            if cfg.procedures.repetitions > 1 {
                format!(
                    " from the {} searches per size, pooled over the DuT's sizes, at least the \
                     one pooled over every DuT's and the bracket its final trials left (a pass \
                     under a fail)",
                    cfg.procedures.repetitions
                )
            } else {
                String::new()
            },
            match history.map(|h| (h.runs, h.spread)) {
                Some((n, Some(b))) => format!(
                    "{} between this run and {n} earlier run(s) here, pooled over every DuT: \
                     ±{:.1} %",
                    if cfg.procedures.repetitions > 1 {
                        " and the one"
                    } else {
                        ""
                    },
                    b * 100.0
                ),
                Some((0, _)) => "; no earlier run here yet to add the spread between runs".into(),
                Some((n, None)) => format!(
                    "; {n} earlier run(s) here share too few results with this one to state \
                     the spread between runs (at least {} degrees of freedom)",
                    history::MIN_DOF
                ),
                None => String::new(),
            }
        )?;
        for chunk in spreads.chunks(4) {
            writeln!(o, "  {}", chunk.join("   "))?;
        }
    } else if let Some(h) = history.filter(|h| h.runs > 0 && h.spread.is_none()) {
        writeln!(
            o,
            "\nRe-run spread: none stated: one search per size, and the {} earlier run(s) here \
             share too few results with this one to state the spread between runs (at least {} \
             degrees of freedom)",
            h.runs,
            history::MIN_DOF
        )?;
    }
    let loss: Vec<&Rfc2544Result> = results
        .iter()
        .filter(|r| {
            r.sizes
                .iter()
                .any(|s| !s.frame_loss.is_empty() || !s.back_to_back.is_empty())
        })
        .collect();
    if !loss.is_empty() {
        writeln!(o)?;
        writeln!(
            o,
            "Frame loss (% of frames) at % of the generator's top speed asked (Mpps offered); back-to-back: longest lossless burst (frames)"
        )?;
        for r in loss {
            for s in &r.sizes {
                if s.frame_loss.is_empty() && s.back_to_back.is_empty() {
                    continue;
                }
                let fl: Vec<String> = s
                    .frame_loss
                    .iter()
                    .map(|(f, offered, l, bad)| {
                        let flag = if *bad { "(invalid)" } else { "" };
                        format!(
                            "{:.0}%({:.3}):{:.1}{flag}",
                            f * 100.0,
                            offered / 1e6,
                            l * 100.0
                        )
                    })
                    .collect();
                let bb: Vec<String> = s
                    .back_to_back
                    .iter()
                    .map(|b| format!("{}{}", if b.at_least { ">=" } else { "" }, b.frames))
                    .collect();
                writeln!(
                    o,
                    "{:<w$} {:>5}  loss {}  b2b {}",
                    row_label(r),
                    frame_size::label(s.frame_size),
                    if fl.is_empty() {
                        "-".into()
                    } else {
                        fl.join(" ")
                    },
                    if bb.is_empty() {
                        "-".into()
                    } else {
                        bb.join(", ")
                    }
                )?;
            }
        }
    }
    Ok(())
}

/// The forwarding rate at overload, one line per DuT, with its ratio to
/// the Linux bridge.
pub fn overload(o: &mut dyn Write, results: &[DutResult], frame: usize) -> Result<()> {
    let bridge = results
        .iter()
        .find(|r| r.name == "linux-bridge")
        .and_then(|r| r.median_pps);
    writeln!(o)?;
    writeln!(
        o,
        "{frame}-byte frames at overload, forwarded rate counted at the sink (kernel {})",
        kernel_release()
    )?;
    writeln!(
        o,
        "{:<24} {:>9} {:>10} {:>15} {:>9}  note",
        "DuT", "offered", "forwarded", "min-max", "vs bridge"
    )?;
    writeln!(
        o,
        "{:<24} {:>9} {:>10} {:>15} {:>9}",
        "", "Mpps", "Mpps", "Mpps", ""
    )?;
    for r in results {
        let off =
            r.trials.iter().map(|t| t.offered_pps).sum::<f64>() / r.trials.len().max(1) as f64;
        match r.median_pps {
            Some(m) => {
                let ratio = bridge
                    .map(|b| format!("{:.2}x", m / b))
                    .unwrap_or_else(|| "-".into());
                let spread = format!(
                    "{:.3}-{:.3}",
                    r.min_pps.unwrap_or(m) / 1e6,
                    r.max_pps.unwrap_or(m) / 1e6
                );
                let note = if r.status == "ok" {
                    r.description.clone()
                } else {
                    r.status.clone()
                };
                writeln!(
                    o,
                    "{:<24} {:>9.3} {:>10.3} {:>15} {:>9}  {}",
                    r.name,
                    off / 1e6,
                    m / 1e6,
                    spread,
                    ratio,
                    note
                )?;
            }
            None => writeln!(
                o,
                "{:<24} {:>9} {:>10} {:>15} {:>9}  {}",
                r.name, "-", "-", "-", "-", r.status
            )?,
        }
    }
    Ok(())
}

/// Fixtures shared with the report's tests ([`super::to_report`]).
#[cfg(test)]
pub(super) mod tests {
    use super::super::dut::DutEnv;
    use super::super::rfc2544::{Rfc2544Config, SizeResult};
    use super::*;

    pub(in super::super) fn cfg() -> Rfc2544Bench {
        Rfc2544Bench {
            // As `linerate bench` runs it: final trials on.
            procedures: Rfc2544Config {
                final_trial: Some(crate::bench::rfc2544::DEFAULT_FINAL_TRIAL),
                ..Rfc2544Config::default()
            },
            gen_cpu: 0,
            dut_cpu: 1,
            flows: 1,
            ts_every: 1,
            threaded_napi: false,
            rps: true,
            sink_cpu: None,
            bed_name: None,
            env: DutEnv {
                linerate: "linerate".into(),
                peers_dir: None,
                cpu: 1,
            },
            common_load: CommonLoad::Off,
            directions: vec![Direction::Uni],
            reverse_gen_cpu: None,
            on_trial: None,
        }
    }

    /// A size with NDR `ndr` and PDR `pdr` (pps), each a bound or not, on
    /// 10 s final trials.
    pub(in super::super) fn size(
        frame: u32,
        ndr: f64,
        ndr_bound: bool,
        pdr: f64,
        pdr_bound: bool,
    ) -> SizeResult {
        SizeResult {
            frame_size: frame,
            throughput_pps: Some(ndr),
            throughput_min_pps: Some(ndr),
            throughput_max_pps: Some(ndr),
            generator_limited: ndr_bound,
            pdr_pps: Some(pdr),
            pdr_generator_limited: pdr_bound,
            ndr_trial_s: 10.0,
            pdr_trial_s: 10.0,
            ndr_confirmed: Some(true),
            pdr_confirmed: Some(true),
            ..Default::default()
        }
    }

    pub(in super::super) fn result(
        name: &str,
        dir: Direction,
        sizes: Vec<SizeResult>,
    ) -> Rfc2544Result {
        let mut r = Rfc2544Result::new(name, String::new(), "v".into());
        r.direction = dir;
        r.sizes = sizes;
        r
    }

    fn table(results: &[Rfc2544Result]) -> String {
        let mut o = Vec::new();
        rfc2544(&mut o, results, &[], &cfg(), None, false).unwrap();
        String::from_utf8(o).unwrap()
    }

    /// The row of `label` at `bytes`, its cells split on runs of spaces.
    fn row<'a>(t: &'a str, label: &str, bytes: &str) -> Vec<&'a str> {
        let line = t
            .lines()
            .find(|l| {
                l.starts_with(label) && l[label.len()..].split_whitespace().next() == Some(bytes)
            })
            .unwrap_or_else(|| panic!("no row {label} {bytes}:\n{t}"));
        line[label.len()..].split_whitespace().collect()
    }

    #[test]
    fn bounds_ratios_trials_and_marks_are_shown_per_figure() {
        // bridge exact at 64 B, a bound at 1518 B; the DuT's PDR a bound
        // while its NDR is not at 64 B, both bounds at 1518 B.
        let mut dut64 = size(64, 2.0e6, false, 2.5e6, true);
        dut64.ndr_trial_s = 0.5;
        dut64.ndr_confirmed = Some(false);
        dut64.search_throughput_pps = Some(2.0e6);
        dut64.standing_queue = Some("frames arrived 80 ms after the trial".into());
        let results = [
            result(
                "linux-bridge",
                Direction::Uni,
                vec![
                    size(64, 1.0e6, false, 1.0e6, false),
                    size(1518, 0.8e6, true, 0.8e6, true),
                ],
            ),
            result(
                "dut",
                Direction::Uni,
                vec![dut64, size(1518, 0.4e6, false, 0.4e6, false)],
            ),
            result(
                "xdp",
                Direction::Uni,
                vec![
                    size(64, 4.0e6, true, 4.0e6, true),
                    size(1518, 0.9e6, true, 0.9e6, true),
                ],
            ),
        ];
        let t = table(&results);
        assert!(t.contains("L1 Gbit/s") && t.contains("trial s"), "{t}");
        // NDR exact (unconfirmed: †, a standing queue: ‡), PDR a bound;
        // the NDR on the search's 0.5 s trials, the PDR on 10 s ones.
        let r = row(&t, "dut", "64");
        assert_eq!(
            &r[..6],
            ["64", "2.000†‡", "1.34", "2.000-2.000", ">=2.500", "0.5/10"]
        );
        assert_eq!(r[7], "2.00x", "{t}");
        assert!(
            t.contains("generator-limited: the PDR is a lower bound"),
            "{t}"
        );
        // The notes of size_notes: the unconfirmed NDR, the standing queue.
        assert!(t.contains("frames arrived 80 ms after the trial"), "{t}");
        assert!(t.contains("unconfirmed"), "{t}");
        // Exact over a bound: at most; a bound over exact: at least; two
        // bounds: no ratio.
        assert_eq!(row(&t, "dut", "1518")[7], "<=0.50x", "{t}");
        assert_eq!(row(&t, "xdp", "64")[7], ">=4.00x", "{t}");
        assert!(
            t.lines()
                .any(|l| l.starts_with("xdp") && l.contains("n/a (both bounds)")),
            "{t}"
        );
        assert_eq!(row(&t, "xdp", "64")[..2], ["64", ">=4.000"]);
        assert!(t.contains("NDR and PDR are lower bounds"), "{t}");
    }

    #[test]
    fn both_ways_rows_say_aggregate_and_the_imix_its_mix_and_gbit() {
        let results = [result(
            "linux-bridge",
            Direction::Bi,
            vec![size(crate::frame_size::IMIX, 1.0e6, false, 1.0e6, false)],
        )];
        let t = table(&results);
        let r = row(&t, "linux-bridge bi (aggregate, both ways)", "imix");
        // 1 Mpps x (353.83 + 20) B x 8 = 2.99 Gbit/s on the wire.
        assert_eq!(r[..3], ["imix", "1.000", "2.99"], "{t}");
        assert!(
            t.contains("imix: IPv4 IMIX 64/570/1518 B at 7:4:1, mean 353.8 B"),
            "{t}"
        );
    }
}
