//! The benchmark studies that are procedures of the binary (`linerate bench
//! dnac`, ...): each runs its experiment and returns a [`StudyReport`],
//! which is printed as a table, written as JSON, as an HTML page with its
//! plots, and as a Markdown section put into a file between
//! `<!-- NAME -->` markers (docs/BENCHMARKS.md), the command that
//! reproduces it named in it.
//!
//! The studies drive the `linerate` binary in child processes (its path is
//! given), as the RFC 2544 bench drives its DuTs: the tester and the thing
//! measured are separate processes, and measure stays beside the pipelines
//! rather than on top of them. The children are the test kit's
//! (`linerate_testkit::Proc`, run in a namespace with `in_ns`, ready by
//! `running_packet_sockets` or `has_capture_fd`): the same process helpers
//! as the tests', through their non-panicking half.

pub mod afpacket;
pub mod capture;
pub mod dnac;
pub mod gen;
pub mod overload;
pub mod sink_cpu;
pub mod soak;
pub mod switch;

use crate::report::svg::{self, escape, Chart};
use crate::report::{figure, table_html, Table, CSS};
use serde_json::Value;
use std::fmt::Write;
use std::io::Read;
use std::path::Path;

/// What a study found, ready to print and write.
pub struct StudyReport {
    /// The section's marker name in the Markdown file (`dnac`).
    pub name: &'static str,
    pub title: String,
    /// UTC, RFC 3339.
    pub date: String,
    /// The command that reproduces it.
    pub command: String,
    /// (what, value): CPU, kernel, settings.
    pub environment: Vec<(String, String)>,
    /// Paragraphs before the tables (Markdown inline code allowed).
    pub intro: Vec<String>,
    pub tables: Vec<Table>,
    pub charts: Vec<(Chart, String)>,
    /// Preformatted blocks after the tables (title, text): an ANOVA table.
    pub blocks: Vec<(String, String)>,
    /// Paragraphs after the tables: what the figures say.
    pub findings: Vec<String>,
    /// Every run's raw result.
    pub data: Value,
}

impl StudyReport {
    /// The tables as aligned text, then the findings.
    pub fn text(&self) -> String {
        let mut o = String::new();
        for t in &self.tables {
            let _ = writeln!(o, "\n{}", t.title);
            let w: Vec<usize> = (0..t.header.len())
                .map(|i| {
                    t.rows
                        .iter()
                        .map(|r| r.get(i).map_or(0, |c| c.replace("**", "").chars().count()))
                        .chain([t.header[i].chars().count()])
                        .max()
                        .unwrap_or(0)
                })
                .collect();
            // The first column (names) to the left, the figures to the right;
            // Markdown's bold markers dropped.
            let line = |cells: &[String]| {
                let c: Vec<String> = cells
                    .iter()
                    .zip(&w)
                    .enumerate()
                    .map(|(i, (c, w))| {
                        let c = c.replace("**", "");
                        if i == 0 {
                            format!("{c:<w$}")
                        } else {
                            format!("{c:>w$}")
                        }
                    })
                    .collect();
                c.join("  ").trim_end().to_string()
            };
            let _ = writeln!(o, "{}", line(&t.header));
            for r in &t.rows {
                let _ = writeln!(o, "{}", line(r));
            }
        }
        for (t, b) in &self.blocks {
            let _ = writeln!(o, "\n{t}\n{b}");
        }
        for f in &self.findings {
            let _ = writeln!(o, "\n{f}");
        }
        o
    }

    /// The Markdown section: title, command, machine, intro, tables,
    /// findings.
    pub fn markdown(&self) -> String {
        let mut o = format!("## {}\n\n", self.title);
        let env: Vec<String> = self
            .environment
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        let _ = writeln!(
            o,
            "`{}`, {}; {}.\n",
            self.command,
            self.date,
            env.join(", ")
        );
        for p in &self.intro {
            let _ = writeln!(o, "{p}\n");
        }
        for t in &self.tables {
            if !t.title.is_empty() {
                let _ = writeln!(o, "{}:\n", t.title);
            }
            let _ = writeln!(o, "| {} |", t.header.join(" | "));
            let align: Vec<&str> = (0..t.header.len())
                .map(|i| if i == 0 { "---" } else { "---:" })
                .collect();
            let _ = writeln!(o, "|{}|", align.join("|"));
            for r in &t.rows {
                let _ = writeln!(o, "| {} |", r.join(" | "));
            }
            o.push('\n');
        }
        for (t, b) in &self.blocks {
            let _ = writeln!(o, "{t}:\n\n```\n{}\n```\n", b.trim_end());
        }
        for f in &self.findings {
            let _ = writeln!(o, "{f}\n");
        }
        o
    }

    /// One self-contained HTML page with the tables and plots.
    pub fn html(&self) -> String {
        let mut o = format!(
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t}</title><style>{CSS}</style></head><body>\n<h1>{t}</h1>\n<p class=\"date\">{d}</p>\n",
            t = escape(&self.title),
            d = escape(&self.date)
        );
        let mut env = Table {
            title: String::new(),
            header: vec![],
            rows: vec![vec!["command".into(), self.command.clone()]],
        };
        env.rows.extend(
            self.environment
                .iter()
                .map(|(k, v)| vec![k.clone(), v.clone()]),
        );
        o.push_str("<h2>Environment</h2>\n");
        table_html(&mut o, &env);
        for p in &self.intro {
            let _ = writeln!(o, "<p>{}</p>", escape(p));
        }
        for (c, cap) in &self.charts {
            figure(&mut o, &svg::line_chart(c), cap);
        }
        for t in &self.tables {
            table_html(&mut o, t);
        }
        for (t, b) in &self.blocks {
            let _ = writeln!(o, "<h2>{}</h2>\n<pre>{}</pre>", escape(t), escape(b));
        }
        for f in &self.findings {
            let _ = writeln!(o, "<p>{}</p>", escape(f));
        }
        o.push_str("</body></html>\n");
        o
    }

    /// Everything, for `--json`.
    pub fn json(&self) -> Value {
        serde_json::json!({
            "study": self.name, "title": self.title, "date": self.date, "command": self.command,
            "environment": self.environment, "tables": self.tables, "data": self.data,
        })
    }
}

/// The machine a study ran on, for its environment lines: CPU model,
/// CPUs online, kernel release.
pub fn machine() -> Vec<(String, String)> {
    vec![
        ("CPU".into(), linerate_io::host::cpu_model()),
        (
            "CPUs".into(),
            std::thread::available_parallelism()
                .map_or(0, |n| n.get())
                .to_string(),
        ),
        ("kernel".into(), linerate_io::host::kernel_release()),
    ]
}

/// Put `body` into the Markdown file `md` between `<!-- name -->` and
/// `<!-- /name -->` (appended with the markers when they are missing), so
/// each study rewrites its own part of docs/BENCHMARKS.md and leaves the
/// rest.
pub fn put_section(md: &Path, name: &str, body: &str) -> Result<(), String> {
    let (start, end) = (format!("<!-- {name} -->"), format!("<!-- /{name} -->"));
    let section = format!("{start}\n{}\n{end}\n", body.trim_end());
    let text = match std::fs::read_to_string(md) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(format!("{}: {e}", md.display())),
    };
    let text = match (text.find(&start), text.find(&end)) {
        (Some(a), Some(b)) if b > a => {
            let after = (b + end.len() + 1).min(text.len());
            format!("{}{section}{}", &text[..a], &text[after..])
        }
        _ if text.is_empty() => section,
        _ => format!("{}\n\n{section}", text.trim_end_matches('\n')),
    };
    linerate_io::file::write_whole(md, text.as_bytes())
        .map_err(|e| format!("{}: {e}", md.display()))
}

/// Run `linerate ARGS` and return its standard output; an exit other than
/// 0 is an error with the last line of its standard error.
pub fn linerate(exe: &Path, args: &[&str]) -> Result<String, String> {
    let out = std::process::Command::new(exe)
        .args(args)
        .output()
        .map_err(|e| format!("{}: {e}", exe.display()))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(format!(
            "linerate {}: {}",
            args.join(" "),
            err.lines().last().unwrap_or("failed")
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// [`run_bench`] for a command line written out whole (`bench`, its
/// options and `--json -`), its progress on standard error.
pub fn bench_json(exe: &Path, args: &[&str]) -> Result<Value, String> {
    let mut a = Vec::new();
    let mut i = 0;
    while i < args.len() {
        match args[i] {
            "bench" if i == 0 => {}
            "--json" if args.get(i + 1) == Some(&"-") => i += 1,
            x => a.push(x.to_string()),
        }
        i += 1;
    }
    run_bench(exe, &a, &mut |l| eprintln!("{l}"))
}

/// The last line of `out` as JSON (a command's final `--json` object).
pub fn last_json(what: &str, out: &str) -> Result<Value, String> {
    let l = out.lines().last().ok_or(format!("{what}: no output"))?;
    serde_json::from_str(l).map_err(|e| format!("{what}: not JSON ({e}): {l}"))
}

/// 1234567 -> "1,234,567".
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut o = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            o.push(',');
        }
        o.push(c);
    }
    o
}

/// Run `linerate bench ARGS --json -` as a child that dies with this
/// process (and is killed by the watchdog of `linerate bench`, whose own
/// watchdog then removes its beds); its progress lines go to `progress`;
/// its JSON (its standard output).
pub fn run_bench(
    exe: &Path,
    args: &[String],
    progress: &mut dyn FnMut(&str),
) -> Result<Value, String> {
    use std::io::BufRead;
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("bench")
        .args(args)
        .args(["--json", "-"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    crate::guard::die_with_parent(&mut cmd);
    let what = format!("linerate bench {}", args.join(" "));
    let mut c = cmd.spawn().map_err(|e| format!("{what}: {e}"))?;
    crate::guard::register_pid(c.id());
    let out = c.stdout.take().map(|mut o| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = o.read_to_string(&mut s);
            s
        })
    });
    let mut last = String::new();
    if let Some(e) = c.stderr.take() {
        for l in std::io::BufReader::new(e).lines().map_while(Result::ok) {
            progress(&format!("  bench: {l}"));
            last = l;
        }
    }
    let st = c.wait().map_err(|e| format!("{what}: {e}"))?;
    crate::guard::unregister_pid(c.id());
    let out = out.and_then(|t| t.join().ok()).unwrap_or_default();
    // A bench that exits non-zero after its run (a DuT failed) still
    // printed its JSON: the failed DuT is a row of the study, not its end.
    // Only a run without JSON is an error.
    match serde_json::from_str::<Value>(out.trim()) {
        Ok(v) => {
            if !st.success() {
                progress(&format!("({what}: {st}; its results are kept)"));
            }
            Ok(v)
        }
        Err(_) if !st.success() => Err(format!("{what}: {st}: {last}")),
        Err(e) => Err(format!("{what}: its JSON: {e}")),
    }
}

/// A study's `--final-trial` for the benches it runs (None: the bench's
/// default, a final trial at every reported rate; 0: none), checked as the
/// bench checks it: `name` and the value in the one-line error.
pub fn final_trial_args(name: &str, v: Option<f64>) -> Result<Vec<String>, String> {
    match v {
        None => Ok(vec![]),
        Some(s) if s.is_finite() && (0.0..=86400.0).contains(&s) => {
            Ok(vec!["--final-trial".into(), s.to_string()])
        }
        Some(s) => Err(format!("{name} {s}: 0 (none) to 86400 seconds")),
    }
}

/// A test bed name prefix: letters, digits, '-' and '_', short enough for
/// the bed names made from it (at most 16 characters).
pub fn check_prefix(p: &str) -> Result<(), String> {
    if p.is_empty()
        || p.len() > 16
        || !p
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(format!("--name '{p}': 1 to 16 letters, digits, '-' or '_'"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_study_passes_its_final_trial_on_or_refuses_it_in_one_line() {
        assert!(final_trial_args("--final-trial", None).unwrap().is_empty());
        assert_eq!(
            final_trial_args("--final-trial", Some(0.0)).unwrap(),
            ["--final-trial", "0"]
        );
        assert_eq!(
            final_trial_args("--veth-final-trial", Some(2.5)).unwrap(),
            ["--final-trial", "2.5"]
        );
        for bad in [-1.0, 86400.5, f64::NAN] {
            let e = final_trial_args("--veth-final-trial", Some(bad)).unwrap_err();
            assert!(e.starts_with("--veth-final-trial "), "{e}");
            assert!(e.ends_with(": 0 (none) to 86400 seconds"), "{e}");
        }
    }

    #[test]
    fn a_section_is_replaced_in_place_or_appended() {
        let d = std::env::temp_dir().join(format!("lr-md-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&d);
        let md = d.join("B.md");
        std::fs::write(&md, "# B\n\n<!-- a -->\nold\n<!-- /a -->\n\ntail\n").unwrap();
        put_section(&md, "a", "new\n").unwrap();
        assert_eq!(
            std::fs::read_to_string(&md).unwrap(),
            "# B\n\n<!-- a -->\nnew\n<!-- /a -->\n\ntail\n"
        );
        put_section(&md, "b", "more").unwrap();
        assert!(std::fs::read_to_string(&md)
            .unwrap()
            .ends_with("tail\n\n<!-- b -->\nmore\n<!-- /b -->\n"));
        let fresh = d.join("C.md");
        put_section(&fresh, "c", "x").unwrap();
        assert_eq!(
            std::fs::read_to_string(&fresh).unwrap(),
            "<!-- c -->\nx\n<!-- /c -->\n"
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(445_156), "445,156");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }
}
