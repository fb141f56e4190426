//! An RFC 2544 run as the Markdown section of docs/BENCHMARKS.md
//! (`linerate bench --markdown FILE`): the machine, the throughput per DuT
//! and size with the searches' min-max, the latency, what the validity rules
//! did, frame loss and back-to-back, and what the figures say. Rendered from
//! the run's JSON ([`super::session::Session::json`]), so a run's `--json`
//! file renders the same; the helpers serve the studies that read `linerate
//! bench --json` of their child runs.

use serde_json::Value;
use std::fmt::Write;

/// The DuT's name, with " bi" for both directions (as in the tables).
pub fn label(r: &Value) -> String {
    let n = r["name"].as_str().unwrap_or("?");
    if r["direction"] == "bi" {
        format!("{n} bi")
    } else {
        n.to_string()
    }
}

/// What a both-ways row's throughput is: the rate offered is split
/// between the directions, the figure is their sum.
pub const AGGREGATE: &str = "aggregate, both ways";

/// [`label`] as a table's row shows it: a both-ways row says its figures
/// are the aggregate of the two directions (half each way), not a rate
/// one way that could be set beside the one-way rows'.
pub fn row_label(r: &Value) -> String {
    if r["direction"] == "bi" {
        format!("{} ({AGGREGATE})", label(r))
    } else {
        label(r)
    }
}

/// A frame size of the JSON (bytes, or "imix") as a column label: "64 B".
pub fn size_label(z: &Value) -> String {
    match z.as_u64() {
        Some(n) => format!("{n} B"),
        None => z.as_str().unwrap_or("?").to_string(),
    }
}

/// [`size_label`], the IMIX with its mix and mean: a reader of one table
/// cannot tell what "imix" sent.
pub fn size_label_mix(z: &Value) -> String {
    match z.as_u64() {
        Some(n) => format!("{n} B"),
        None if z == "imix" => crate::frame_size::label_mix(crate::frame_size::IMIX),
        None => z.as_str().unwrap_or("?").to_string(),
    }
}

/// The frame size of the JSON as the bench's `u32` (bytes, or
/// [`crate::frame_size::IMIX`]).
fn size_u32(z: &Value) -> Option<u32> {
    match z.as_u64() {
        Some(n) => u32::try_from(n).ok(),
        None => (z == "imix").then_some(crate::frame_size::IMIX),
    }
}

/// The size result of DuT `dut` (its [`label`]) at `size` in a run's JSON.
pub fn size_of<'a>(run: &'a Value, dut: &str, size: &Value) -> Option<&'a Value> {
    run["results"]
        .as_array()?
        .iter()
        .find(|r| label(r) == dut)?["sizes"]
        .as_array()?
        .iter()
        .find(|s| &s["frame_size"] == size)
}

/// Every frame size of the run, the byte sizes ascending, "imix" last.
pub fn sizes(run: &Value) -> Vec<Value> {
    let mut v: Vec<Value> = Vec::new();
    for r in run["results"].as_array().into_iter().flatten() {
        for s in r["sizes"].as_array().into_iter().flatten() {
            if !v.contains(&s["frame_size"]) {
                v.push(s["frame_size"].clone());
            }
        }
    }
    v.sort_by_key(|z| z.as_u64().unwrap_or(u64::MAX));
    v
}

fn f(v: &Value) -> Option<f64> {
    v.as_f64()
}

/// Mark of a figure that a final trial ran for and did not confirm (none
/// passed at it or at the steps under it): it rests on the search's
/// shorter trials.
pub const UNCONFIRMED: &str = "†";

/// Mark of an NDR with a standing queue behind it (frames still arriving
/// long after the trial, or a p50 far above the empty bed's): the rate
/// passed, but a longer trial may not.
pub const STANDING_QUEUE: &str = "‡";

/// One NDR or PDR as every report shows it: the rate with ">=" when it is
/// a lower bound (the generator or the bed was the limit, not the DuT),
/// its marks, and the length of the trials it rests on. From the JSON
/// ([`Figure::ndr`], [`Figure::pdr`]) or from a
/// [`super::rfc2544::SizeResult`] ([`super::to_report::ndr`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Figure {
    /// Frames/s; None: not measured.
    pub pps: Option<f64>,
    /// A lower bound: ">=".
    pub bound: bool,
    /// Seconds of traffic of the trials it rests on (0: not known, a run
    /// from before they were kept).
    pub trial_s: f64,
    /// A final trial ran and none passed: [`UNCONFIRMED`].
    pub unconfirmed: bool,
    /// [`STANDING_QUEUE`] (the NDR only).
    pub standing_queue: bool,
}

impl Figure {
    /// The NDR of a size result of the JSON.
    pub fn ndr(s: &Value) -> Figure {
        Figure {
            pps: f(&s["throughput_pps"]),
            bound: s["generator_limited"] == true,
            trial_s: f(&s["ndr_trial_s"]).unwrap_or(0.0),
            unconfirmed: s["ndr_confirmed"] == false,
            standing_queue: s["standing_queue"].is_string(),
        }
    }

    /// The PDR of a size result of the JSON: a bound of its own
    /// (`pdr_generator_limited`), whatever the NDR is.
    pub fn pdr(s: &Value) -> Figure {
        Figure {
            pps: f(&s["pdr_pps"]),
            bound: s["pdr_generator_limited"] == true,
            trial_s: f(&s["pdr_trial_s"]).unwrap_or(0.0),
            unconfirmed: s["pdr_confirmed"] == false,
            standing_queue: false,
        }
    }

    /// The rate in Mpps, ">=1.234" for a bound; "-" without one.
    pub fn mpps(&self) -> String {
        match self.pps {
            None => "-".into(),
            Some(v) => format!("{}{:.3}", if self.bound { ">=" } else { "" }, v / 1e6),
        }
    }

    /// The marks that go after the rate ([`UNCONFIRMED`], [`STANDING_QUEUE`]).
    pub fn marks(&self) -> String {
        let mut m = String::new();
        if self.pps.is_some() && self.unconfirmed {
            m.push_str(UNCONFIRMED);
        }
        if self.pps.is_some() && self.standing_queue {
            m.push_str(STANDING_QUEUE);
        }
        m
    }

    /// [`Figure::mpps`] with its marks: ">=1.234†".
    pub fn cell(&self) -> String {
        self.mpps() + &self.marks()
    }

    /// The length of the trials it rests on: "10 s", "0.5 s"; "-" unknown.
    pub fn trial(&self) -> String {
        match self.pps {
            Some(_) if self.trial_s > 0.0 => format!("{} s", secs(self.trial_s)),
            _ => "-".into(),
        }
    }

    /// This figure over `other` ("1.25x"). A bound over an exact figure is
    /// at least that (">="), an exact one over a bound at most ("<="),
    /// and a bound over a bound says nothing: both true rates may be
    /// anywhere above. "-" without both.
    pub fn ratio(&self, other: &Figure) -> String {
        match (self.pps, other.pps) {
            (Some(a), Some(b)) if b > 0.0 => match (self.bound, other.bound) {
                (false, false) => format!("{:.2}x", a / b),
                (true, false) => format!(">={:.2}x", a / b),
                (false, true) => format!("<={:.2}x", a / b),
                (true, true) => "n/a (both bounds)".into(),
            },
            _ => "-".into(),
        }
    }

    /// Whether this figure's true rate is above `other`'s: None when the
    /// bounds leave it open (the one shown lower is a bound, so its true
    /// rate may be the higher).
    pub fn above(&self, other: &Figure) -> Option<bool> {
        let (a, b) = (self.pps?, other.pps?);
        if a > b {
            (!other.bound).then_some(true)
        } else {
            (!self.bound).then_some(false)
        }
    }
}

/// Seconds as short as they read: "10", "0.5", "0.25".
pub fn secs(x: f64) -> String {
    let t = format!("{x:.2}");
    t.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// A size's throughput (NDR) in Mpps, ">=" when the generator was the
/// limit; "-" without one.
pub fn throughput(s: &Value) -> String {
    Figure::ndr(s).mpps()
}

/// [`throughput`] with the searches' min-max in brackets when they differ.
pub fn throughput_range(s: &Value) -> String {
    let t = throughput(s);
    let mpps = |k: &str| f(&s[k]).map(|v| format!("{:.3}", v / 1e6));
    match (mpps("throughput_min_pps"), mpps("throughput_max_pps")) {
        (Some(a), Some(b)) if a != b && t != "-" => format!("{t} ({a}-{b})"),
        _ => t,
    }
}

/// The latency at a size's throughput: the merged trials, else the one
/// latency trial; None without samples.
pub fn latency(s: &Value) -> Option<&Value> {
    if s["latency_merged"].is_object() {
        return Some(&s["latency_merged"]);
    }
    let i = s["latency_trial"].as_u64()? as usize;
    let l = &s["trials"][i]["latency"];
    (l["samples"].as_u64().unwrap_or(0) > 0).then_some(l)
}

/// A latency's p50 in µs ("-" without one).
pub fn p50_us(s: &Value) -> String {
    latency(s)
        .and_then(|l| f(&l["p50_ns"]))
        .map_or("-".into(), |v| format!("{:.1}", v / 1e3))
}

fn empty_p50(run: &Value, size: &Value) -> Option<f64> {
    run["empty_bed"].as_array()?.iter().find_map(|e| {
        let l = &e["trial"]["latency"];
        (&e["frame_size"] == size && l["samples"].as_u64().unwrap_or(0) > 0)
            .then(|| f(&l["p50_ns"]))
            .flatten()
    })
}

/// "p50 / p99 (p50 minus the empty bed's)" in µs.
fn latency_cell(run: &Value, s: &Value) -> String {
    let Some(l) = latency(s) else {
        return "-".into();
    };
    let (p50, p99) = (
        f(&l["p50_ns"]).unwrap_or(0.0),
        f(&l["p99_ns"]).unwrap_or(0.0),
    );
    // The row's own baseline (the empty bed at its rate and size), named;
    // an older run's JSON has none: the empty bed's at the size.
    let b = &s["latency_baseline"];
    let minus = match (f(&b["p50_ns"]), f(&b["rate_pps"])) {
        (Some(base), Some(rate)) => format!(
            " ({:+.1}; empty bed {:.1} at {:.3} Mpps)",
            (p50 - base) / 1e3,
            base / 1e3,
            rate / 1e6
        ),
        _ => empty_p50(run, &s["frame_size"])
            .map_or(String::new(), |b| format!(" ({:+.1})", (p50 - b) / 1e3)),
    };
    format!("{:.1} / {:.1}{minus}", p50 / 1e3, p99 / 1e3)
}

/// A size's NDR (with the searches' min-max, and the L1 Gbit/s of the
/// IMIX) and PDR, each with its marks and the length of the trials it
/// rests on: "0.539 (0.520-0.558) [10 s] / >=0.600† [0.5 s]".
pub fn figures_cell(s: &Value) -> String {
    let (ndr, pdr) = (Figure::ndr(s), Figure::pdr(s));
    let mut n = ndr.cell();
    let mpps = |k: &str| f(&s[k]).map(|v| format!("{:.3}", v / 1e6));
    if let (Some(a), Some(b), Some(_)) = (
        mpps("throughput_min_pps"),
        mpps("throughput_max_pps"),
        ndr.pps,
    ) {
        if a != b {
            let _ = write!(n, " ({a}-{b})");
        }
    }
    let imix = size_u32(&s["frame_size"]) == Some(crate::frame_size::IMIX);
    if let (Some(v), true) = (ndr.pps, imix) {
        let g = crate::report::l1_gbps(v / 1e6, crate::frame_size::IMIX_MEAN_BYTES);
        let _ = write!(n, ", {}{g:.2} Gbit/s L1", if ndr.bound { ">=" } else { "" });
    }
    let with_trial = |mut c: String, x: &Figure| {
        if x.pps.is_some() && x.trial_s > 0.0 {
            let _ = write!(c, " [{}]", x.trial());
        }
        c
    };
    format!("{} / {}", with_trial(n, &ndr), with_trial(pdr.cell(), &pdr))
}

/// The validity rules: (column, what its message says).
const RULES: [(&str, &str); 6] = [
    ("offered short", "under the rate asked"),
    ("generator behind", "behind"),
    ("schedule slipped", "schedule slipped"),
    ("kernel disagrees", "kernel's counters disagree"),
    ("sent short", "the generator sent"),
    ("more received than sent", "received of"),
];

/// The order of seeds 000 and 001 at 64 bytes, lowest first.
const SEED_ORDER: [&str; 4] = [
    "linux-bridge",
    "linux-ipfwd",
    "linerate-afxdp",
    "linerate-xdp",
];

fn table(o: &mut String, header: &[String], rows: &[Vec<String>]) {
    let _ = writeln!(o, "| {} |", header.join(" | "));
    let _ = writeln!(o, "|{}", "---|".repeat(header.len()));
    for r in rows {
        let _ = writeln!(o, "| {} |", r.join(" | "));
    }
    o.push('\n');
}

/// The section for the run `run` (its `--json`), `command` the command line
/// that made it, `report` where its HTML report was written (None: none).
pub fn rfc2544(run: &Value, command: &str, report: Option<&str>) -> String {
    let mut o = String::from(
        "## RFC 2544: throughput, latency, frame loss, back-to-back (`linerate bench`)\n\n",
    );
    let results: &[Value] = run["results"].as_array().map_or(&[], |v| v);
    let _ = write!(
        o,
        "Date {}, {:.0} s for the whole run. Command: `{command}`.",
        run["date"].as_str().unwrap_or("?"),
        f(&run["seconds"]).unwrap_or(0.0)
    );
    if run["interrupted"] == true {
        o.push_str(" The run was interrupted: the tables hold what it measured before.");
    }
    o.push_str("\n\n");
    for kv in run["environment"].as_array().into_iter().flatten() {
        let _ = writeln!(
            o,
            "- {}: {}",
            kv[0].as_str().unwrap_or("?"),
            kv[1].as_str().unwrap_or("?")
        );
    }
    let reps = run["procedures"]["repetitions"].as_u64().unwrap_or(1);
    let pdr_loss = f(&run["procedures"]["pdr_loss"]).map_or(String::new(), |v| {
        format!(" (loss at most {} %)", v * 100.0)
    });
    o.push('\n');
    let _ = write!(
        o,
        "Throughput is the non-drop rate (NDR): the highest offered rate in Mpps that lost no \
         frame (RFC 2544 26.1: exact frame counts, queues drained before counting), and after \
         the slash the partial-drop rate (PDR{pdr_loss}): the median of the {reps} search(es) \
         per size, in brackets the NDR's min-max where they differ. `>=` marks a lower bound: \
         a figure where the generator, not the DuT, was the limit (its top speed passed, or the \
         rates above stayed invalid: the XDP DuTs do their work in d0's XDP hook, which runs on \
         the generator's core, so there the number is where generator and DuT together fill one \
         core); the NDR and the PDR are bounds each on its own. Every other DuT forwards on its \
         own core: the user-space DuTs are pinned there and RPS steers the kernel's work on what \
         d0 receives there. Latency is one-way at the NDR, p50 / p99 in us, and in brackets the \
         p50 minus the empty bed's measured at the row's own rate and size (the generator's \
         frames straight into the sink, no DuT: what the measurement adds; a stamped frame \
         leaves at once, never waiting for the generator's batch). Frames are verified: the sink counts only the trial's own tagged \
         frames, each once. A trial counts only when valid (the rules are under \"valid \
         trials\" above); an invalid one is repeated, and one still invalid counts as a fail. \
         The last column counts the kernel's disagreements.\n\n"
    );
    // Throughput per DuT and size.
    let zs = sizes(run);
    let lat_size = zs
        .iter()
        .find(|z| z.as_u64() == Some(64))
        .or(zs.first())
        .cloned()
        .unwrap_or(Value::Null);
    let mut header = vec!["DuT".to_string()];
    header.extend(
        zs.iter()
            .map(|z| format!("{} NDR / PDR (Mpps)", size_label_mix(z))),
    );
    header.extend([
        "re-run spread (%)".to_string(),
        format!("latency {} p50 / p99 (us)", size_label(&lat_size)),
        "kernel check".into(),
    ]);
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    for r in results {
        let name = label(r);
        let rs: &[Value] = r["sizes"].as_array().map_or(&[], |v| v);
        if rs.is_empty() {
            let mut row = vec![
                row_label(r),
                r["status"].as_str().unwrap_or("?").to_string(),
            ];
            row.resize(header.len(), String::new());
            rows.push(row);
            continue;
        }
        for s in rs {
            let n: Vec<&str> = s["notes"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            if !n.is_empty() {
                notes.push(format!(
                    "- {} {}: {}.",
                    row_label(r),
                    size_label(&s["frame_size"]),
                    n.join("; ")
                ));
            }
        }
        let mut row = vec![row_label(r)];
        row.extend(
            zs.iter()
                .map(|z| size_of(run, &name, z).map_or("-".into(), figures_cell)),
        );
        let dis: u64 = rs
            .iter()
            .map(|s| s["kernel_disagreements"].as_u64().unwrap_or(0))
            .sum();
        let ntr: usize = rs
            .iter()
            .map(|s| s["trials"].as_array().map_or(0, |t| t.len()))
            .sum();
        // This run's alone (no earlier run here): it cannot know how far
        // a re-run moves, and says so.
        let only = if r["throughput_spread_history"].is_null() {
            " (this run only)"
        } else {
            ""
        };
        row.push(
            f(&r["throughput_spread"]).map_or("-".into(), |v| format!("±{:.1} %{only}", v * 100.0)),
        );
        row.push(size_of(run, &name, &lat_size).map_or("-".into(), |s| latency_cell(run, s)));
        row.push(if dis == 0 {
            "agrees".into()
        } else {
            format!("{dis} of {ntr} trials > 0.5 %")
        });
        rows.push(row);
    }
    table(&mut o, &header, &rows);
    o.push_str(
        "`[10 s]`: the length of the trials a figure rests on, the final trial's when one \
         confirmed it at that rate (or stepped down to it), else the search's. `>=`: a lower \
         bound; a ratio or an order taken from one is a bound too, and from two bounds it is \
         not known. `†`: a final trial ran and none passed at the searches' figure or the steps \
         under it, so the figure rests on the search's shorter trials: unconfirmed. `‡`: a \
         standing queue at the NDR (the note says which sign). The IMIX's Gbit/s is on the \
         wire (L1): frames/s x (its mean frame + 20 B of preamble and gap) x 8.\n\n",
    );
    if !notes.is_empty() {
        o.push_str("Notes per DuT and size:\n\n");
        for n in notes {
            let _ = writeln!(o, "{n}");
        }
        o.push('\n');
    }
    spread_paragraph(&mut o, run);
    // The empty bed.
    let empty: Vec<&Value> = run["empty_bed"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["trial"]["latency"]["samples"].as_u64().unwrap_or(0) > 0)
        .collect();
    if let Some(e0) = empty.first() {
        let _ = writeln!(
            o,
            "Empty bed (generator -> veth -> XDP sink on d0, no DuT) at {:.1} Mpps, one-way \
             latency in us (stamps on frames of every flow; latency trials send in small kernel \
             batches, one frame per 400 kpps of rate, as a stamped frame leaves only when its \
             batch is flushed):\n",
            f(&e0["rate_pps"]).unwrap_or(0.0) / 1e6
        );
        let us = |l: &Value, k: &str| format!("{:.1}", f(&l[k]).unwrap_or(0.0) / 1e3);
        let rows: Vec<Vec<String>> = empty
            .iter()
            .map(|e| {
                let l = &e["trial"]["latency"];
                vec![
                    size_label_mix(&e["frame_size"]),
                    l["samples"].to_string(),
                    us(l, "min_ns"),
                    us(l, "p50_ns"),
                    us(l, "p99_ns"),
                    us(l, "max_ns"),
                ]
            })
            .collect();
        let h = [
            "frame", "samples", "min (us)", "p50 (us)", "p99 (us)", "max (us)",
        ]
        .map(String::from);
        table(&mut o, &h, &rows);
    }
    validity(&mut o, results);
    loss_and_b2b(&mut o, results);
    findings(&mut o, run, &zs);
    match report {
        Some(p) => {
            let _ = writeln!(
                o,
                "The HTML report of this run (plots of throughput against frame size with the \
                 line rate, latency CDFs and histograms, frame loss) is `{p}`; the JSON with \
                 every trial is written by `--json`."
            );
        }
        None => o.push_str(
            "The JSON with every trial is written by `--json`, the HTML report with the plots by \
             `--report`.\n",
        ),
    }
    o
}

/// What the re-run spread column states, and the history it includes.
fn spread_paragraph(o: &mut String, run: &Value) {
    let h = &run["history"];
    let between = if let Some(sp) = f(&h["spread"]) {
        format!(
            "It is also at least the spread between runs, ±{:.1} %: this run's results against \
             those of the {} earlier run(s) with the same settings kept in the machine's history \
             file (`--history`), pooled over every DuT and size where the DuT's version and spec \
             file are the same as in this run, in logarithms (the results move by factors: ± is \
             the upper end of the 95 % interval of a re-run's ratio to this run's, which covers \
             its lower end too).",
            sp * 100.0,
            h["runs"].as_u64().unwrap_or(0)
        )
    } else if h["runs"].as_u64().is_some_and(|n| n > 0) {
        format!(
            "The machine's history file held {} earlier run(s) with the same settings, sharing \
             too few results with this one to state a spread between runs (at least {} degrees \
             of freedom), so the spread holds only what moved within this run.",
            h["runs"],
            super::history::MIN_DOF
        )
    } else if h.is_object() {
        "The machine's history file held no earlier run with the same settings, so the spread \
         holds no between-run part: only what moved within this run."
            .into()
    } else {
        "The history file was not used (`--no-history`): the spread is from this run alone.".into()
    };
    let _ = writeln!(
        o,
        "The re-run spread is the 95 % prediction interval of a re-run's result from the \
         searches per size, pooled over the DuT's sizes, and at least the one pooled over every \
         DuT's sizes where the DuT was the limit, and at least the bracket a size's final \
         trials left (the NDR between a pass and a fail above it: a re-run's final trials may \
         land anywhere in it). {between} A few searches per size are a small \
         sample: the spread is an estimate, and it cannot foresee a rare event that no search \
         met.\n"
    );
}

/// Per DuT what the validity rules did.
fn validity(o: &mut String, results: &[Value]) {
    let mut rows = Vec::new();
    for r in results {
        let trials: Vec<&Value> = r["sizes"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|s| s["trials"].as_array().into_iter().flatten())
            .collect();
        if trials.is_empty() {
            continue;
        }
        let invalid = |t: &Value| -> Vec<String> {
            t["invalid"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|w| w.as_str().map(String::from))
                .collect()
        };
        let mut row = vec![row_label(r), trials.len().to_string()];
        for (_, key) in RULES {
            let n = trials
                .iter()
                .filter(|t| invalid(t).iter().any(|w| w.contains(key)))
                .count();
            row.push(n.to_string());
        }
        let stuck = trials
            .iter()
            .filter(|t| !invalid(t).is_empty() && t["repeated"] != true)
            .count();
        let small = trials
            .iter()
            .filter(|t| invalid(t).is_empty() && t["repeated"] == true)
            .count();
        let v: Vec<String> = ["foreign", "stale", "duplicates"]
            .iter()
            .map(|k| {
                trials
                    .iter()
                    .map(|t| t["verify"][k].as_u64().unwrap_or(0))
                    .sum::<u64>()
                    .to_string()
            })
            .collect();
        row.extend([stuck.to_string(), small.to_string(), v.join(" / ")]);
        rows.push(row);
    }
    if rows.is_empty() {
        return;
    }
    o.push_str(
        "What the validity rules did in this run, per DuT (all sizes, all procedures), in \
         trials: trials run, trials found invalid by each rule (a trial may break more than \
         one; \"schedule slipped\": the generator's schedule slipped, leaving gaps, for more \
         than the share of the sending time allowed), invalid trials that still counted (as \
         fails, after the repeats), trials repeated under the search's small-loss rule; and the \
         frames the sink did not count as received.\n\n",
    );
    let mut h = vec!["DuT".to_string(), "trials".into()];
    h.extend(RULES.iter().map(|(n, _)| n.to_string()));
    h.extend([
        "invalid, counted as fail".into(),
        "small-loss repeats".into(),
        "foreign / late / duplicated frames".into(),
    ]);
    table(o, &h, &rows);
}

/// Frame loss rate and back-to-back, per DuT and size where measured.
fn loss_and_b2b(o: &mut String, results: &[Value]) {
    let mut rows = Vec::new();
    for r in results {
        for s in r["sizes"].as_array().into_iter().flatten() {
            // (fraction asked, offered pps, loss ratio, invalid): the
            // load is the one offered (over the sending time), and a trial
            // that stayed invalid is no DuT figure: flagged.
            let fl: Vec<String> = s["frame_loss"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|x| {
                    format!(
                        "{:.0} % ({:.3} Mpps): {:.1} %{}",
                        f(&x[0]).unwrap_or(0.0) * 100.0,
                        f(&x[1]).unwrap_or(0.0) / 1e6,
                        f(&x[2]).unwrap_or(0.0) * 100.0,
                        if x[3] == true { " invalid" } else { "" }
                    )
                })
                .collect();
            let bb: Vec<String> = s["back_to_back"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|b| {
                    format!(
                        "{}{}",
                        if b["at_least"] == true { "&ge;" } else { "" },
                        b["frames"].as_u64().unwrap_or(0)
                    )
                })
                .collect();
            if fl.is_empty() && bb.is_empty() {
                continue;
            }
            let or_dash = |v: String| if v.is_empty() { "-".into() } else { v };
            rows.push(vec![
                row_label(r),
                size_label_mix(&s["frame_size"]),
                or_dash(fl.join("; ")),
                or_dash(bb.join(", ")),
            ]);
        }
    }
    if rows.is_empty() {
        return;
    }
    o.push_str(
        "Frame loss rate: per load asked (% of the generator's top speed), the load offered \
         (Mpps: frames sent over the time they took to leave) and the frames lost (%); \
         `invalid`: the trial stayed invalid after its repeats, no figure of the DuT's. \
         Back-to-back: the longest burst at top speed forwarded without loss.\n\n",
    );
    let h = [
        "DuT",
        "frame",
        "frame loss: % asked (Mpps offered): % lost",
        "back-to-back (frames)",
    ]
    .map(String::from);
    table(o, &h, &rows);
}

/// The order at 64 bytes against the seeds', linerate afxdp against IP
/// forwarding, and what the bed does to them.
fn findings(o: &mut String, run: &Value, zs: &[Value]) {
    let at64 = Value::from(64u64);
    let tp = |name: &str, z: &Value| {
        size_of(run, name, z)
            .map(Figure::ndr)
            .filter(|x| x.pps.is_some_and(|v| v > 0.0))
    };
    let mut order: Vec<(&str, Figure)> = SEED_ORDER
        .iter()
        .chain(&["linerate-afpacket"])
        .filter_map(|n| tp(n, &at64).map(|v| (*n, v)))
        .collect();
    order.sort_by(|a, b| a.1.pps.unwrap_or(0.0).total_cmp(&b.1.pps.unwrap_or(0.0)));
    if order.is_empty() {
        return;
    }
    // A lower bound shown below a figure may be above it: "vs", not "<".
    let mut list = format!("{} {}", order[0].0, order[0].1.mpps());
    for w in order.windows(2) {
        let sep = if w[0].1.bound { "vs" } else { "<" };
        let _ = write!(list, " {sep} {} {}", w[1].0, w[1].1.mpps());
    }
    let open = if order.windows(2).any(|w| w[0].1.bound) {
        " (`vs`: the order is not known, the lower figure is a lower bound)"
    } else {
        ""
    };
    let _ = writeln!(o, "Order at 64 B: {list} Mpps{open}.\n");
    // The seeds' DuTs measured here, in the seeds' order: neighbours found
    // the other way round (not when the lower one is a bound: its true
    // rate may be the higher).
    let present: Vec<(&str, Figure)> = SEED_ORDER
        .iter()
        .filter_map(|n| tp(n, &at64).map(|v| (*n, v)))
        .collect();
    let swapped: Vec<String> = present
        .windows(2)
        .filter(|w| w[0].1.above(&w[1].1) == Some(true))
        .map(|w| {
            format!(
                "{} {} < {} {}",
                w[1].0,
                w[1].1.mpps(),
                w[0].0,
                w[0].1.mpps()
            )
        })
        .collect();
    let open: Vec<String> = present
        .windows(2)
        .filter(|w| w[0].1.above(&w[1].1).is_none())
        .map(|w| {
            format!(
                "{} {} vs {} {}",
                w[0].0,
                w[0].1.mpps(),
                w[1].0,
                w[1].1.mpps()
            )
        })
        .collect();
    const SEEDS: &str = "the bridge, then IP forwarding, then linerate's user-space AF_XDP path, \
                         then its XDP path, which the generator cannot overload";
    let order_text = if present.len() < 2 {
        String::new()
    } else if swapped.is_empty() && open.is_empty() {
        format!(" At 64 bytes the order is that of seeds 000 and 001 ({SEEDS}).")
    } else if swapped.is_empty() {
        format!(
            " At 64 bytes the order of seeds 000 and 001 ({SEEDS}) is not contradicted in this \
             run, but lower bounds leave it open ({}).",
            open.join("; ")
        )
    } else {
        format!(
            " At 64 bytes the order of seeds 000 and 001 ({SEEDS}) does not hold in this run ({}): \
             on this machine a result that meets its slow level can do that.",
            swapped.join("; ")
        )
    };
    // Sizes where the bounds leave the comparison open are counted apart.
    let (mut n, mut k, mut open) = (0, 0, 0);
    for z in zs {
        if let (Some(a), Some(b)) = (tp("linerate-afxdp", z), tp("linux-ipfwd", z)) {
            match a.above(&b) {
                Some(up) => {
                    n += 1;
                    k += usize::from(up);
                }
                None => open += 1,
            }
        }
    }
    let open = if open > 0 {
        format!(", not known at {open}: lower bounds")
    } else {
        String::new()
    };
    let above = if n > 0 {
        format!(
            " At larger frames linerate afxdp and IP forwarding are close (linerate afxdp above \
             IP forwarding at {k} of {n} sizes{open}): on veth, AF_XDP is copy mode, and every frame \
             the DuT transmits becomes an skb in its sendto, copied once more by veth into a \
             page before the sink's XDP program sees it (skb_pp_cow_data), so the user-space \
             path pays two copies per frame that in-kernel forwarding does not; with a NIC with \
             zero-copy AF_XDP both go."
        )
    } else {
        String::new()
    };
    let _ = writeln!(
        o,
        "Reading it. Each DuT forwards on its own core, the generator and d0's driver work \
         (NAPI, the XDP hook) run on the generator's, and the sink's receive work runs where the \
         DuT transmits (veth runs the receiver's NAPI on the sending core). The kernel DuTs run \
         on the DuT's core through receive packet steering (RPS) of d0 (`--no-rps` leaves them \
         in the generator's softirq, where their results are lower bounds of generator and DuT \
         together).{order_text}{above} The AF_PACKET DuTs pay the packet socket's receive copy \
         on their own core; their deep rings pass short trials while a backlog builds (the \
         latency trial at their throughput then loses frames, noted in the report): longer \
         trials (`--trial 10`) give lower, more conservative numbers. A p99 latency near 1 ms \
         of an AF_XDP DuT at its throughput is its 2048-frame ring filling at the edge of \
         capacity.\n"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A latency row subtracts the empty bed measured at its own rate and
    /// says so; an older JSON without one falls back to the size's.
    #[test]
    fn a_latency_row_subtracts_its_own_baseline() {
        let run = json!({"empty_bed": [{"frame_size": 64,
            "trial": {"latency": {"samples": 10, "p50_ns": 500.0}}}]});
        let mut s = json!({"frame_size": 64, "latency_trial": 0,
            "trials": [{"latency": {"samples": 10, "p50_ns": 40500.0, "p99_ns": 50000.0}}],
            "latency_baseline": {"rate_pps": 9.6e5, "p50_ns": 300.0, "p99_ns": 400.0,
                                 "gen_batch": 4}});
        let c = latency_cell(&run, &s);
        assert_eq!(c, "40.5 / 50.0 (+40.2; empty bed 0.3 at 0.960 Mpps)");
        s["latency_baseline"] = Value::Null;
        assert_eq!(latency_cell(&run, &s), "40.5 / 50.0 (+40.0)");
    }

    fn trial(invalid: &[&str], repeated: bool, foreign: u64) -> Value {
        json!({"invalid": invalid, "repeated": repeated,
               "verify": {"foreign": foreign, "stale": 0, "duplicates": 1},
               "latency": {"samples": 10, "p50_ns": 20_000.0, "p99_ns": 90_000.0}})
    }

    fn size(z: u64, tp: f64, lo: f64, hi: f64, gen_limited: bool) -> Value {
        json!({"frame_size": z, "throughput_pps": tp, "throughput_min_pps": lo,
               "throughput_max_pps": hi, "generator_limited": gen_limited,
               "latency_trial": 0, "kernel_disagreements": 0,
               "frame_loss": [[1.0, 2e6, 0.25, false], [0.9, 1.8e6, 0.0, true]],
               "back_to_back": [{"frames": 4004, "at_least": false}],
               "trials": [trial(&[], false, 0),
                          trial(&["offered 90 % under the rate asked"], true, 3),
                          trial(&["the generator fell 3000 frames behind"], false, 0)]})
    }

    fn run() -> Value {
        json!({
            "date": "2026-11-26T05:14:08Z", "seconds": 540.4, "interrupted": false,
            "environment": [["kernel", "Linux 6.18"], ["CPU", "Test CPU, 2 cores online"]],
            "procedures": {"repetitions": 2},
            "history": {"file": "/h", "runs": 3, "spread": 0.071},
            "empty_bed": [{"frame_size": 64, "rate_pps": 1e6,
                "trial": {"latency": {"samples": 11765, "min_ns": 300.0, "p50_ns": 500.0,
                                      "p99_ns": 600.0, "max_ns": 14600.0}}}],
            "results": [
                {"name": "linux-bridge", "direction": "uni", "status": "ok",
                 "throughput_spread": 0.354,
                 "sizes": [size(64, 539_000.0, 520_000.0, 558_000.0, false),
                           size(1518, 947_000.0, 947_000.0, 947_000.0, false)]},
                {"name": "linux-ipfwd", "direction": "uni", "status": "ok",
                 "throughput_spread": 0.283,
                 "sizes": [size(64, 1_367_000.0, 1_300_000.0, 1_400_000.0, false),
                           size(1518, 1_134_000.0, 1_100_000.0, 1_200_000.0, false)]},
                {"name": "linerate-afxdp", "direction": "uni", "status": "ok",
                 "throughput_spread": 0.182,
                 "sizes": [size(64, 1_049_000.0, 1_000_000.0, 1_100_000.0, false),
                           size(1518, 1_200_000.0, 1_200_000.0, 1_200_000.0, false)]},
                {"name": "linerate-xdp", "direction": "uni", "status": "ok",
                 "sizes": [size(64, 4_190_000.0, 4_190_000.0, 4_190_000.0, true)]},
                {"name": "ovs-afxdp", "direction": "uni", "status": "skipped: not installed",
                 "sizes": []}
            ]
        })
    }

    #[test]
    fn the_section_holds_the_runs_figures() {
        let m = rfc2544(&run(), "linerate bench --markdown B.md", Some("r.html"));
        assert!(m.starts_with("## RFC 2544"), "{m}");
        assert!(m.contains(
            "Date 2026-11-26T05:14:08Z, 540 s for the whole run. Command: `linerate bench --markdown B.md`."
        ), "{m}");
        assert!(m.contains("- CPU: Test CPU, 2 cores online\n"), "{m}");
        assert!(
            m.contains(
                "| DuT | 64 B NDR / PDR (Mpps) | 1518 B NDR / PDR (Mpps) | re-run spread (%) \
                 | latency 64 B p50 / p99 (us) | kernel check |"
            ),
            "{m}"
        );
        // Median with min-max, one figure where the searches agree; the
        // latency minus the empty bed's; the skipped DuT's status.
        assert!(m.contains(
            "| linux-bridge | 0.539 (0.520-0.558) / - | 0.947 / - | ±35.4 % (this run only) | 20.0 / 90.0 (+19.5) | agrees |"
        ), "{m}");
        assert!(m.contains("| linerate-xdp | >=4.190 / - | - | - |"), "{m}");
        assert!(m.contains("| ovs-afxdp | skipped: not installed |"), "{m}");
        assert!(
            m.contains("| frame | samples | min (us) | p50 (us) | p99 (us) | max (us) |"),
            "{m}"
        );
        assert!(
            m.contains("| 64 B | 11765 | 0.3 | 0.5 | 0.6 | 14.6 |"),
            "{m}"
        );
        // Validity: 2 sizes x 3 trials; one offered short (repeated), one
        // behind (not repeated: counted as fail); foreign frames 3 per size.
        assert!(
            m.contains("| linux-bridge | 6 | 2 | 2 | 0 | 0 | 0 | 0 | 2 | 0 | 6 / 0 / 6 |"),
            "{m}"
        );
        // Frame loss at the load offered; the invalid point flagged.
        assert!(
            m.contains(
                "| linux-ipfwd | 64 B | 100 % (2.000 Mpps): 25.0 %; \
                 90 % (1.800 Mpps): 0.0 % invalid | 4004 |"
            ),
            "{m}"
        );
        assert!(m.contains("±7.1 %: this run's results against those of the 3 earlier"));
        // Earlier runs that share too few results: said, no spread.
        let mut few = run();
        few["history"] = json!({"file": "/h", "runs": 1, "spread": null});
        let f = rfc2544(&few, "linerate bench", None);
        assert!(
            f.contains("held 1 earlier run(s) with the same settings, sharing too few results"),
            "{f}"
        );
        // The order computed from the figures, the swap named; the bound
        // marked (the one above it is exact: the order holds).
        assert!(m.contains(
            "Order at 64 B: linux-bridge 0.539 < linerate-afxdp 1.049 < linux-ipfwd 1.367 < linerate-xdp >=4.190 Mpps."
        ), "{m}");
        assert!(m.contains("does not hold in this run (linerate-afxdp 1.049 < linux-ipfwd 1.367)"));
        assert!(m.contains("linerate afxdp above IP forwarding at 1 of 2 sizes"));
        assert!(m.contains("is `r.html`"));
    }

    #[test]
    fn the_seeds_order_is_stated_when_it_holds() {
        let mut r = run();
        r["results"][1]["sizes"][0]["throughput_pps"] = json!(900_000.0);
        r["history"] = Value::Null;
        let m = rfc2544(&r, "x", None);
        assert!(
            m.contains("At 64 bytes the order is that of seeds 000 and 001"),
            "{m}"
        );
        assert!(m.contains("`--no-history`"), "{m}");
        assert!(!m.contains("is `"), "{m}");
        // Not neighbours in the seeds' order, but the wrong way round once
        // IP forwarding is not in the run.
        r["results"][1]["sizes"] = json!([]);
        r["results"][0]["sizes"][0]["throughput_pps"] = json!(1_100_000.0);
        let m = rfc2544(&r, "x", None);
        assert!(
            m.contains("does not hold in this run (linerate-afxdp 1.049 < linux-bridge 1.100)"),
            "{m}"
        );
    }

    #[test]
    fn figures_say_their_bounds_trials_and_marks() {
        let mut r = run();
        // The bridge at 64 B: NDR exact on a 10 s final trial, PDR a bound
        // on the search's 0.5 s trials (its final trial failed), a
        // standing queue at the NDR, and what size_notes said.
        let s = &mut r["results"][0]["sizes"][0];
        s["pdr_pps"] = json!(600_000.0);
        s["pdr_generator_limited"] = json!(true);
        s["ndr_trial_s"] = json!(10.0);
        s["pdr_trial_s"] = json!(0.5);
        s["ndr_confirmed"] = json!(true);
        s["pdr_confirmed"] = json!(false);
        s["standing_queue"] = json!("frames arrived 80 ms after the trial");
        s["notes"] = json!(["frames arrived 80 ms after the trial"]);
        // A trial whose schedule slipped.
        s["trials"][0]["invalid"] = json!([
            "the generator's schedule slipped 30.0 ms in 3 gaps (10 % of 200.0 ms allowed)"
        ]);
        // Both ways, at the IMIX.
        let mut bi = r["results"][1].clone();
        bi["direction"] = json!("bi");
        bi["sizes"][1]["frame_size"] = json!("imix");
        r["results"].as_array_mut().unwrap().push(bi);
        // IP forwarding's NDR at 64 B a bound under afxdp's: the order
        // between them is not known.
        r["results"][1]["sizes"][0]["throughput_pps"] = json!(1_000_000.0);
        r["results"][1]["sizes"][0]["generator_limited"] = json!(true);
        let m = rfc2544(&r, "x", None);
        assert!(
            m.contains(
                "| linux-bridge | 0.539‡ (0.520-0.558) [10 s] / >=0.600† [0.5 s] | 0.947 / - |"
            ),
            "{m}"
        );
        assert!(
            m.contains("- linux-bridge 64 B: frames arrived 80 ms after the trial.\n"),
            "{m}"
        );
        // The slip rule's column, between "generator behind" and the kernel.
        assert!(
            m.contains(
                "| offered short | generator behind | schedule slipped | kernel disagrees |"
            ),
            "{m}"
        );
        assert!(
            m.contains("| linux-bridge | 6 | 2 | 2 | 1 | 0 | 0 | 0 | 3 | 0 | 6 / 0 / 6 |"),
            "{m}"
        );
        // Both ways: the aggregate, in every table.
        assert!(
            m.contains("| linux-ipfwd bi (aggregate, both ways) | 1.367 (1.300-1.400) / - |"),
            "{m}"
        );
        assert!(
            m.contains("| linux-ipfwd bi (aggregate, both ways) | 6 | 2 | 2 | 0 |"),
            "{m}"
        );
        assert!(
            m.contains("| linux-ipfwd bi (aggregate, both ways) | 64 B | 100 % "),
            "{m}"
        );
        // The IMIX column names its mix; its NDR has its L1 Gbit/s:
        // 1.134 Mpps x (353.83 + 20) B x 8 = 3.39 Gbit/s.
        assert!(
            m.contains(
                "| imix (IPv4 IMIX 64/570/1518 B at 7:4:1, mean 353.8 B) NDR / PDR (Mpps) |"
            ),
            "{m}"
        );
        assert!(
            m.contains("1.134 (1.100-1.200), 3.39 Gbit/s L1 / - |"),
            "{m}"
        );
        // A lower bound under an exact figure: not ordered, not a swap,
        // and no comparison counted at that size.
        assert!(
            m.contains(
                "Order at 64 B: linux-bridge 0.539 < linux-ipfwd >=1.000 vs linerate-afxdp 1.049 \
                 < linerate-xdp >=4.190 Mpps (`vs`: the order"
            ),
            "{m}"
        );
        assert!(!m.contains("does not hold in this run"), "{m}");
        assert!(
            m.contains(
                "is not contradicted in this run, but lower bounds leave it open \
                        (linux-ipfwd >=1.000 vs linerate-afxdp 1.049)"
            ),
            "{m}"
        );
        assert!(
            m.contains("above IP forwarding at 1 of 1 sizes, not known at 1: lower bounds"),
            "{m}"
        );
    }

    #[test]
    fn a_ratio_of_a_bound_is_a_bound() {
        let x = |pps: f64, bound: bool| Figure {
            pps: Some(pps),
            bound,
            ..Default::default()
        };
        assert_eq!(x(2.0, false).ratio(&x(1.0, false)), "2.00x");
        assert_eq!(x(2.0, true).ratio(&x(1.0, false)), ">=2.00x");
        assert_eq!(x(2.0, false).ratio(&x(1.0, true)), "<=2.00x");
        assert_eq!(x(2.0, true).ratio(&x(1.0, true)), "n/a (both bounds)");
        assert_eq!(x(2.0, false).ratio(&Figure::default()), "-");
        // Above: decided unless the one shown lower is a bound.
        assert_eq!(x(2.0, false).above(&x(1.0, false)), Some(true));
        assert_eq!(x(2.0, true).above(&x(1.0, false)), Some(true));
        assert_eq!(x(2.0, false).above(&x(1.0, true)), None);
        assert_eq!(x(1.0, true).above(&x(2.0, false)), None);
        assert_eq!(x(1.0, false).above(&x(2.0, true)), Some(false));
        assert_eq!(
            (secs(10.0), secs(0.5), secs(0.25)),
            ("10".into(), "0.5".into(), "0.25".into())
        );
    }
}
