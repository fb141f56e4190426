//! Earlier runs of the RFC 2544 bench on this machine, and the spread
//! between runs that they show.
//!
//! A run's own repeated searches are minutes apart, but this kind of
//! machine (a guest on a shared host) changes speed for minutes at a time:
//! measured here, IP forwarding at 256 B stayed near 1.5 Mpps for several
//! fresh beds in a row, then near 2.2, and every DuT moved with it. A run
//! that meets one level all along cannot see the other, so the spread it
//! states from its own searches is too narrow for a re-run at the other
//! level. As FD.io CSIT's trending does, the bench keeps every finished
//! run's results per machine (one JSON line each) and widens the stated
//! spread by what those runs show between runs.
//!
//! A result is pooled only with earlier results of the same DuT: same
//! name, frame size, version string and (for a DuT from a spec file) hash
//! of the spec's text ([`Point::same_dut`]). A DuT upgraded, or its spec
//! edited, between runs is another DuT: its change would read as spread
//! between runs. Lines written before the version and hash were kept have
//! neither and pool with no new result.

use super::rfc2544::SizeResult;
use super::{Rfc2544Bench, Rfc2544Result};
use std::path::{Path, PathBuf};

/// At most this many earlier runs are used (the newest).
pub const MAX_RUNS: usize = 20;

/// One finished run, as kept in the history file.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Run {
    pub date: String,
    /// The CPU, its count and the kernel: runs on another machine (or the
    /// same guest moved to another host CPU) are not compared.
    pub machine: String,
    /// What changes the result besides the machine: trial time, loss
    /// tolerance, resolution, searches per size, cores, NAPI and RPS.
    pub settings: String,
    pub results: Vec<Point>,
}

/// One DuT's throughput at one size.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Point {
    pub dut: String,
    #[serde(with = "crate::frame_size::serde_size")]
    pub frame_size: u32,
    pub throughput_pps: f64,
    /// The partial-drop rate (runs before it was measured have none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pdr_pps: Option<f64>,
    pub generator_limited: bool,
    /// The DuT's version string ([`Rfc2544Result::version`]); None in
    /// lines from before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dut_version: Option<String>,
    /// A DuT from a spec file: [`spec_hash`] of the file's text as read
    /// for the run ([`Rfc2544Result::spec_hash`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_hash: Option<String>,
}

impl Point {
    /// Results of one DuT that may be pooled: the same name (and
    /// direction), frame size, version and spec. A point without a version
    /// (an old line) matches no point that has one.
    pub fn same_dut(&self, q: &Point) -> bool {
        self.dut == q.dut
            && self.frame_size == q.frame_size
            && self.dut_version == q.dut_version
            && self.spec_hash == q.spec_hash
    }
}

/// A spec file's text as the history keeps it: FNV-1a, 64 bits, in hex.
/// Written out rather than std's `DefaultHasher`, whose output may change
/// with the Rust version (the file outlives the binary that wrote it);
/// only a change of the text matters here, not an adversary.
pub fn spec_hash(text: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("fnv1a64:{h:016x}")
}

/// The earlier runs that match this one, and what the file held besides.
#[derive(Debug, Default)]
pub struct Loaded {
    /// Oldest first, at most [`MAX_RUNS`].
    pub runs: Vec<Run>,
    /// Lines that are not a run (a truncated write, an edit by hand).
    pub bad_lines: usize,
    /// Runs from another machine or with other settings.
    pub other: usize,
}

/// What the bench states about the runs it compared with.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Summary {
    pub file: PathBuf,
    /// Earlier runs used: same machine and settings, and at least one
    /// result of the same DuT ([`Point::same_dut`]) as this run.
    pub runs: usize,
    /// The between-run spread (fraction), None without an earlier run.
    pub spread: Option<f64>,
}

/// `$LINERATE_HISTORY`, else `$XDG_STATE_HOME/linerate/bench-history.jsonl`,
/// else `~/.local/state/linerate/bench-history.jsonl`.
pub fn default_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("LINERATE_HISTORY").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let state = std::env::var_os("XDG_STATE_HOME")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|p| !p.is_empty())
                .map(|h| PathBuf::from(h).join(".local/state"))
        })?;
    Some(state.join("linerate/bench-history.jsonl"))
}

/// This machine: CPU model, CPUs online, kernel release.
pub fn machine() -> String {
    format!(
        "{}; {} CPUs; Linux {}",
        linerate_io::host::cpu_model(),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        linerate_io::host::kernel_release()
    )
}

/// The method's version: raised when a change to the method moves the
/// results (runs of another method are not compared). 2: verified frames,
/// validity rules, searches from scratch, a gap-free top speed.
pub const METHOD: u32 = 2;

/// The settings that change a result besides the machine.
pub fn settings(cfg: &Rfc2544Bench) -> String {
    let p = &cfg.procedures;
    // A cap moves the results (capped sizes are bounds); said only when
    // set, so runs without one keep matching the earlier ones.
    let cap = p
        .max_rate
        .map_or(String::new(), |m| format!("; max rate {m:?}"));
    format!(
        "method {METHOD}; trial {} s; loss tolerance {}; {}; resolution {}; {} searches; \
         generator CPU {}, DuT CPU {}; {} flows; threaded NAPI {}; RPS {}; sink CPU {:?}; \
         settle {} s; final trial {:?}",
        p.trial.as_secs_f64(),
        p.loss_tolerance,
        if p.strict {
            "strict"
        } else {
            "small-loss repeat"
        },
        p.resolution,
        p.repetitions,
        cfg.gen_cpu,
        cfg.dut_cpu,
        cfg.flows,
        cfg.threaded_napi,
        cfg.rps,
        cfg.sink_cpu,
        p.settle.as_secs_f64(),
        p.final_trial.map(|d| d.as_secs_f64())
    ) + &cap
}

/// This run, for the history file: every DuT that finished, at every size
/// with a throughput.
pub fn run_of(date: &str, machine: &str, settings: &str, results: &[Rfc2544Result]) -> Run {
    let results = results
        .iter()
        .filter(|r| r.status == "ok")
        .flat_map(|r| {
            r.sizes.iter().filter_map(|s: &SizeResult| {
                s.throughput_pps.map(|tp| Point {
                    dut: r.label(),
                    frame_size: s.frame_size,
                    throughput_pps: tp,
                    pdr_pps: s.pdr_pps,
                    generator_limited: s.generator_limited,
                    dut_version: Some(r.version.clone()),
                    spec_hash: r.spec_hash.clone(),
                })
            })
        })
        .collect();
    Run {
        date: date.into(),
        machine: machine.into(),
        settings: settings.into(),
        results,
    }
}

/// The earlier runs in `path` with this machine and these settings. A
/// missing file is no runs; lines that do not parse are counted and
/// skipped; an unreadable file is a one-line error.
pub fn load(path: &Path, machine: &str, settings: &str) -> Result<Loaded, String> {
    let text = match std::fs::read(path) {
        Ok(b) => String::from_utf8_lossy(&b).into_owned(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Loaded::default()),
        Err(e) => return Err(format!("history {}: {e}", path.display())),
    };
    let mut out = Loaded::default();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        match serde_json::from_str::<Run>(line) {
            Ok(r) if r.machine == machine && r.settings == settings => out.runs.push(r),
            Ok(_) => out.other += 1,
            Err(_) => out.bad_lines += 1,
        }
    }
    let drop = out.runs.len().saturating_sub(MAX_RUNS);
    out.runs.drain(..drop);
    Ok(out)
}

/// Append `run` to `path` as one line (the directory is made if missing).
pub fn append(path: &Path, run: &Run) -> Result<(), String> {
    let err = |e: std::io::Error| format!("history {}: {e}", path.display());
    if let Some(d) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(d).map_err(err)?;
    }
    let line = serde_json::to_string(run).map_err(|e| format!("history: {e}"))?;
    // One write of the whole line (runs appended at once do not
    // interleave); a failed write is cut back off.
    linerate_io::file::append_line(path, &line).map_err(|e| format!("history {e}"))
}

/// The fewest degrees of freedom a between-run spread is stated from: with
/// one (two results of one DuT and size) t(0.975) is 12.7 and the spread
/// says nothing (it came out as ±991 % here); with 3 it is 3.18.
pub const MIN_DOF: usize = 3;

/// How far a re-run's throughput moves from this run's, as a fraction: the
/// upper end of the 95 % prediction interval of their ratio, less one.
/// From this run and the earlier ones: for every DuT and size where the
/// DuT was the limit, the runs' results in logarithms about their mean,
/// the variance pooled (sum(n_i - 1) degrees of freedom); two runs'
/// results differ with twice that variance, so the interval of the ratio
/// is exp(±t(0.975, dof) * s * sqrt(2)). Logarithms, as the results move
/// by factors: on a guest whose host takes the DuT's CPU for ~10 ms now and
/// then, a 10 s final trial passes at a rate or at half of it depending on
/// whether such a stall met it (docs/BENCHMARKS.md, issue 35), and the
/// runs' results are skewed to the high side in absolute terms. The
/// stated spread is symmetric (±), so this, its upper side, covers the
/// lower side too (1 - s <= 1 / (1 + s)). Pooled over every DuT, as the
/// machine's speed moves them all together. None without an earlier run
/// that shares [`MIN_DOF`] degrees of freedom with this one.
pub fn between_run_spread(this: &Run, earlier: &[Run]) -> Option<f64> {
    let groups = this
        .results
        .iter()
        .filter(|p| !p.generator_limited)
        .map(|p| {
            std::iter::once(p.throughput_pps)
                .chain(earlier.iter().filter_map(|r| {
                    r.results
                        .iter()
                        .find(|q| p.same_dut(q))
                        .filter(|q| !q.generator_limited)
                        .map(|q| q.throughput_pps)
                }))
                .filter(|&x| x.is_finite() && x > 0.0)
                .collect()
        });
    let p = super::rfc2544::pooled_log(groups)?;
    // Results a factor of 1e100 apart (a hand-edited file) would make it
    // infinite: no spread then.
    Some((p.t * p.s * 2f64.sqrt()).exp() - 1.0).filter(|s| p.dof >= MIN_DOF && s.is_finite())
}

/// The earlier runs that hold a result of a DuT of this run
/// ([`Point::same_dut`]): those [`between_run_spread`] can pool.
pub fn pooled_runs(this: &Run, earlier: &[Run]) -> usize {
    earlier
        .iter()
        .filter(|r| {
            r.results
                .iter()
                .any(|q| this.results.iter().any(|p| p.same_dut(q)))
        })
        .count()
}

/// Widen every DuT's stated spread to at least `between` and keep it
/// apart as `throughput_spread_history`. A DuT with one search per size
/// has no spread of its own: it is stated `between` alone.
pub fn widen(results: &mut [Rfc2544Result], between: Option<f64>) {
    for r in results.iter_mut().filter(|r| !r.sizes.is_empty()) {
        r.throughput_spread_history = between;
        r.throughput_spread = match (r.throughput_spread, between) {
            (Some(s), Some(b)) => Some(s.max(b)),
            (s, b) => s.or(b),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn run(machine: &str, pts: &[(&str, u32, f64, bool)]) -> Run {
        Run {
            date: "2026-11-25T00:00:00Z".into(),
            machine: machine.into(),
            settings: "s".into(),
            results: pts
                .iter()
                .map(|&(d, s, tp, g)| Point {
                    dut: d.into(),
                    frame_size: s,
                    throughput_pps: tp,
                    pdr_pps: None,
                    generator_limited: g,
                    dut_version: Some("v1".into()),
                    spec_hash: None,
                })
                .collect(),
        }
    }

    #[test]
    fn between_run_spread_is_the_pooled_prediction_interval() {
        let this = run(
            "m",
            &[
                ("a", 64, 1.0e6, false),
                ("a", 128, 2.0e6, false),
                ("b", 64, 9.0e6, true),
                ("c", 64, 5.0e6, false),
            ],
        );
        let earlier = [
            run("m", &[("a", 64, 2.0e6, false), ("b", 64, 1.0e6, false)]),
            run("m", &[("a", 64, 0.5e6, false), ("a", 128, 4.0e6, false)]),
            run("m", &[("a", 128, 1.0e6, false)]),
        ];
        // In logarithms: a/64: ln 1, ln 2, ln 0.5 (mean 0): ss 2 ln2^2, dof 2.
        // a/128: ln 2, ln 4, ln 1 (mean ln 2): ss 2 ln2^2, dof 2.
        // b/64: this run's is generator-limited; c/64: no earlier run.
        // s^2 = 4 ln2^2 / 4; t(0.975, 4) = 2.7764451051977987.
        let l2 = 2f64.ln();
        let want = (2.7764451051977987 * l2 * 2f64.sqrt()).exp() - 1.0;
        let got = between_run_spread(&this, &earlier).unwrap();
        assert!((got - want).abs() < 1e-9, "{got} vs {want}");
        // Symmetric in the ratio: a re-run at half or at twice this run's
        // is as likely, and the stated ± covers both (1 - s below 1/(1+s)).
        assert!(got >= 1.0 && 1.0 - got <= 1.0 / (1.0 + got));
        assert_eq!(between_run_spread(&this, &[]), None);
        assert_eq!(between_run_spread(&this, &earlier[..0]), None);
        // An earlier run that shares no point gives nothing.
        let apart = [run("m", &[("z", 64, 1.0e6, false)])];
        assert_eq!(between_run_spread(&this, &apart), None);
        // Too few degrees of freedom (one earlier run: a/64 alone, 1; or
        // a/64 and a/128, 2) say nothing rather than a spread from
        // t(0.975, 1) = 12.7 or t(0.975, 2) = 4.3.
        assert_eq!(between_run_spread(&this, &earlier[..1]), None);
        assert_eq!(between_run_spread(&this, &earlier[1..2]), None);
    }

    #[test]
    fn the_file_keeps_runs_per_machine_and_settings_and_skips_bad_lines() {
        let dir = std::env::temp_dir().join(format!("lr-history-{}", std::process::id()));
        let path = dir.join("sub/h.jsonl");
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(load(&path, "m", "s").unwrap().runs.len(), 0);
        let mine = run("m", &[("a", 64, 1.0e6, false)]);
        let other = run("other", &[("a", 64, 2.0e6, false)]);
        append(&path, &mine).unwrap();
        append(&path, &other).unwrap();
        // A line cut short (a run killed while writing) and a stray line.
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        f.write_all(b"{\"date\":\"2026\",\"mach\nnot json\n")
            .unwrap();
        for _ in 0..MAX_RUNS + 3 {
            append(&path, &mine).unwrap();
        }
        let l = load(&path, "m", "s").unwrap();
        assert_eq!(l.runs.len(), MAX_RUNS);
        assert!(l.runs.iter().all(|r| *r == mine));
        assert_eq!((l.bad_lines, l.other), (2, 1));
        assert_eq!(load(&path, "m", "other settings").unwrap().runs.len(), 0);
        // A directory where the file should be: a one-line error.
        let e = load(&dir, "m", "s").unwrap_err();
        assert!(e.starts_with("history ") && !e.contains('\n'), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn widen_keeps_the_larger_spread() {
        // Two with a spread of their own, one with one search per size,
        // one that never ran (skipped).
        let mut r: Vec<Rfc2544Result> = [(Some(0.10), 1), (Some(0.30), 1), (None, 1), (None, 0)]
            .into_iter()
            .map(|(s, n)| {
                let mut r = Rfc2544Result::new("d", String::new(), String::new());
                r.throughput_spread = s;
                r.sizes = vec![SizeResult::default(); n];
                r
            })
            .collect();
        widen(&mut r, Some(0.2));
        let got: Vec<Option<f64>> = r.iter().map(|r| r.throughput_spread).collect();
        assert_eq!(got, [Some(0.2), Some(0.3), Some(0.2), None]);
        let hist: Vec<Option<f64>> = r.iter().map(|r| r.throughput_spread_history).collect();
        assert_eq!(hist, [Some(0.2), Some(0.2), Some(0.2), None]);
        let mut r2 = r.clone();
        widen(&mut r2, None);
        let got: Vec<Option<f64>> = r2.iter().map(|r| r.throughput_spread).collect();
        assert_eq!(got, [Some(0.2), Some(0.3), Some(0.2), None]);
    }

    #[test]
    fn a_changed_dut_does_not_pool_with_its_old_results() {
        // Three sizes: the fewest degrees of freedom a spread needs.
        let sizes = |r: [f64; 3]| {
            [
                ("a", 64, r[0], false),
                ("a", 128, r[1], false),
                ("a", 256, r[2], false),
            ]
        };
        let this = run("m", &sizes([1.0e6, 2.0e6, 3.0e6]));
        let same = run("m", &sizes([1.2e6, 3.0e6, 2.0e6]));
        let pooled = between_run_spread(&this, std::slice::from_ref(&same)).unwrap();
        // Another version, another spec text, or a line from before they
        // were kept: the same name and size, but not the same DuT.
        let with = |f: &dyn Fn(&mut Point)| {
            let mut r = same.clone();
            r.results.iter_mut().for_each(f);
            r
        };
        let upgraded = with(&|p| p.dut_version = Some("v2".into()));
        let edited = with(&|p| p.spec_hash = Some(spec_hash("start = \"y\"")));
        let old: Run = serde_json::from_str(
            r#"{"date":"2026-01-01T00:00:00Z","machine":"m","settings":"s","results":
               [{"dut":"a","frame_size":64,"throughput_pps":1.2e6,"generator_limited":false},
                {"dut":"a","frame_size":128,"throughput_pps":3.0e6,"generator_limited":false}]}"#,
        )
        .unwrap();
        assert_eq!(
            (
                old.results[0].dut_version.as_ref(),
                old.results[0].spec_hash.as_ref()
            ),
            (None, None)
        );
        for other in [&upgraded, &edited, &old] {
            assert_eq!(between_run_spread(&this, std::slice::from_ref(other)), None);
            assert_eq!(pooled_runs(&this, std::slice::from_ref(other)), 0);
            // Beside a matching run, only the matching one counts.
            let both = [same.clone(), other.clone()];
            assert_eq!(between_run_spread(&this, &both), Some(pooled));
            assert_eq!(pooled_runs(&this, &both), 1);
        }
        // The key is written and read back; a line without it omits it.
        let mut keyed = this.clone();
        keyed.results[0].spec_hash = Some(spec_hash(""));
        let line = serde_json::to_string(&keyed).unwrap();
        assert!(
            line.contains(r#""dut_version":"v1","spec_hash":"fnv1a64:cbf29ce484222325""#),
            "{line}"
        );
        assert_eq!(serde_json::from_str::<Run>(&line).unwrap(), keyed);
        assert!(!serde_json::to_string(&old).unwrap().contains("dut_version"));
        // A run's points carry its DuTs' keys.
        let mut r = Rfc2544Result::new("d", String::new(), "d 1.2".into());
        r.spec_hash = Some(spec_hash("x"));
        r.sizes = vec![SizeResult {
            frame_size: 64,
            throughput_pps: Some(1e6),
            ..Default::default()
        }];
        let p = &run_of("now", "m", "s", &[r]).results[0];
        assert_eq!(p.dut_version.as_deref(), Some("d 1.2"));
        assert_eq!(p.spec_hash, Some(spec_hash("x")));
    }

    #[test]
    fn the_spec_hash_is_fnv1a_64() {
        // The published FNV-1a 64 test vectors: stable across builds.
        assert_eq!(spec_hash(""), "fnv1a64:cbf29ce484222325");
        assert_eq!(spec_hash("a"), "fnv1a64:af63dc4c8601ec8c");
        assert_eq!(spec_hash("foobar"), "fnv1a64:85944171f73967e8");
        assert_ne!(spec_hash("start = \"x\"\n"), spec_hash("start = \"y\"\n"));
    }
}
