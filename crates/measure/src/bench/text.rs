//! The bench's results as plain-text tables (what `linerate bench` prints).

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
    writeln!(
        o,
        "{:<20} {:>5} {:>10} {:>8} {:>15} {:>10} {:>26} {:>9}  note",
        "DuT",
        "bytes",
        "NDR Mpps",
        "Gbit/s",
        "min-max Mpps",
        "PDR Mpps",
        "lat p50/p99 (-empty) us",
        "vs bridge"
    )?;
    // The measurement's own share of a p50: " (p50 minus the empty bed's)".
    let minus_empty = |size: u32, l: &super::rfc2544::Latency| {
        empty
            .iter()
            .find(|e| e.frame_size == size)
            .and_then(|e| e.trial.latency.as_ref())
            .map_or(String::new(), |b| {
                format!(" ({:+.1})", (l.p50_ns - b.p50_ns) / 1e3)
            })
    };
    let bridge = |size: u32, dir: Direction| {
        results
            .iter()
            .find(|r| r.name == "linux-bridge" && r.direction == dir)
            .and_then(|r| r.sizes.iter().find(|s| s.frame_size == size))
            .and_then(|s| s.throughput_pps)
    };
    for r in results {
        if r.sizes.is_empty() {
            writeln!(o, "{:<20} {:>5} {:>10}  {}", r.label(), "-", "-", r.status)?;
            continue;
        }
        for s in &r.sizes {
            let (tp, g, spread, ratio) = match s.throughput_pps {
                Some(v) => (
                    format!(
                        "{}{:.3}",
                        if s.generator_limited { ">=" } else { "" },
                        v / 1e6
                    ),
                    format!(
                        "{:.2}",
                        crate::report::l1_gbps(v / 1e6, frame_size::wire_bytes(s.frame_size))
                    ),
                    format!(
                        "{:.3}-{:.3}",
                        s.throughput_min_pps.unwrap_or(v) / 1e6,
                        s.throughput_max_pps.unwrap_or(v) / 1e6
                    ),
                    bridge(s.frame_size, r.direction)
                        .filter(|b| *b > 0.0)
                        .map(|b| format!("{:.2}x", v / b))
                        .unwrap_or_else(|| "-".into()),
                ),
                None => ("-".into(), "-".into(), "-".into(), "-".into()),
            };
            let pdr = s.pdr_pps.map_or_else(
                || "-".into(),
                |v| {
                    format!(
                        "{}{:.3}",
                        if s.generator_limited { ">=" } else { "" },
                        v / 1e6
                    )
                },
            );
            let lat = s
                .latency()
                .filter(|l| l.samples > 0)
                .map(|l| {
                    format!(
                        "{:.1}/{:.1}{}",
                        l.p50_ns / 1e3,
                        l.p99_ns / 1e3,
                        minus_empty(s.frame_size, l)
                    )
                })
                .unwrap_or_else(|| "-".into());
            let mut note = Vec::new();
            if s.generator_limited && !s.rate_capped {
                note.push("generator-limited".to_string());
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
            if r.status != "ok" {
                note.push(r.status.clone());
            }
            writeln!(
                o,
                "{:<20} {:>5} {:>10} {:>8} {:>15} {:>10} {:>26} {:>9}  {}",
                r.label(),
                frame_size::label(s.frame_size),
                tp,
                g,
                spread,
                pdr,
                lat,
                ratio,
                note.join("; ")
            )?;
        }
    }
    // Latency at the common load: every DuT at one rate per size.
    let mut common: Vec<String> = Vec::new();
    for r in results {
        for s in &r.sizes {
            let (Some(rate), Some(l)) = (s.common_latency_pps, s.common_latency_merged.as_ref())
            else {
                continue;
            };
            let own = minus_empty(s.frame_size, l);
            let bad = s
                .common_latency_trials
                .iter()
                .filter(|&&i| s.trials[i].lost > 0 || !s.trials[i].invalid.is_empty())
                .count();
            common.push(format!(
                "{:<20} {:>5} {:>10.3} {:>26} {:>10.1}  {}",
                r.label(),
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
            "\nLatency at a common load (the same rate for every DuT: {}):\n{:<20} {:>5} {:>10} {:>26} {:>10}  note",
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
            r.throughput_spread
                .map(|x| format!("{} ±{:.1} %", r.label(), x * 100.0))
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
                     one pooled over every DuT's",
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
                Some(_) => "; no earlier run here yet to add the spread between runs".into(),
                None => String::new(),
            }
        )?;
        for chunk in spreads.chunks(4) {
            writeln!(o, "  {}", chunk.join("   "))?;
        }
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
            "Frame loss (% of frames) at % of the generator's top speed; back-to-back: longest lossless burst"
        )?;
        for r in loss {
            for s in &r.sizes {
                if s.frame_loss.is_empty() && s.back_to_back.is_empty() {
                    continue;
                }
                let fl: Vec<String> = s
                    .frame_loss
                    .iter()
                    .map(|(f, _, l, bad)| {
                        let flag = if *bad { "(invalid)" } else { "" };
                        format!("{:.0}%:{:.1}{flag}", f * 100.0, l * 100.0)
                    })
                    .collect();
                let bb: Vec<String> = s
                    .back_to_back
                    .iter()
                    .map(|b| format!("{}{}", if b.at_least { ">=" } else { "" }, b.frames))
                    .collect();
                writeln!(
                    o,
                    "{:<20} {:>5}  loss {}  b2b {}",
                    r.label(),
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
