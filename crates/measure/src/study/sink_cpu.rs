//! `linerate bench sink-cpu`: where the sink's receive work runs, measured
//! both ways in one sitting. Two `linerate bench` runs on the same DuTs and
//! sizes, back to back: the default bed (veth runs s0's NAPI in the softirq
//! of the CPU that transmits to s0, the DuT's) and `--sink-cpu N` (s0's
//! NAPI in a kernel thread pinned to CPU N; on 2 CPUs that is the
//! generator's). The table puts each (DuT, size)'s throughput and latency
//! of the two runs side by side.

use super::StudyReport;
use crate::bench::markdown::{label, p50_us, size_label, throughput};
use crate::report::Table;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The study's settings.
#[derive(Clone, Debug)]
pub struct SinkCpuStudy {
    /// The linerate binary whose `bench` runs.
    pub linerate: PathBuf,
    /// Where the runs' JSON files are written (removed afterwards).
    pub dir: PathBuf,
    pub duts: Vec<String>,
    /// Frame sizes, as `--sizes` takes them ("64", "imix").
    pub sizes: Vec<String>,
    pub repetitions: usize,
    /// Seconds per trial.
    pub trial: f64,
    /// Seconds per final trial (None: the bench's default; 0: none).
    pub final_trial: Option<f64>,
    /// The CPU of the sink's receive thread in the second run.
    pub sink_cpu: usize,
    /// Test bed name prefix of both runs (None: the bench's own).
    pub bed_name: Option<String>,
}

impl Default for SinkCpuStudy {
    fn default() -> SinkCpuStudy {
        SinkCpuStudy {
            linerate: PathBuf::from("linerate"),
            dir: std::env::temp_dir(),
            duts: ["linerate-afxdp", "linux-bridge", "linux-ipfwd"]
                .map(String::from)
                .to_vec(),
            sizes: vec!["64".into(), "1518".into()],
            repetitions: 2,
            trial: 0.2,
            final_trial: None,
            sink_cpu: 0,
            bed_name: None,
        }
    }
}

impl SinkCpuStudy {
    /// The options of both runs (without `--json` and `--sink-cpu`).
    fn bench_args(&self) -> Vec<String> {
        let mut a: Vec<String> = ["bench", "--no-report", "--no-history"]
            .map(String::from)
            .to_vec();
        for d in &self.duts {
            a.extend(["--dut".into(), d.clone()]);
        }
        a.extend([
            "--sizes".into(),
            self.sizes.join(","),
            "--repetitions".into(),
            self.repetitions.to_string(),
            "--trial".into(),
            self.trial.to_string(),
        ]);
        a.extend(super::final_trial_args("--final-trial", self.final_trial).unwrap_or_default());
        a.extend([
            "--frame-loss-sizes".into(),
            "none".into(),
            "--b2b-sizes".into(),
            "none".into(),
        ]);
        if let Some(n) = &self.bed_name {
            a.extend(["--name".into(), n.clone()]);
        }
        a
    }

    /// Run both; `progress` gets the runs' progress lines.
    pub fn run(&self, progress: &mut dyn FnMut(&str)) -> Result<StudyReport, String> {
        if self.duts.is_empty() || self.sizes.is_empty() || self.repetitions == 0 {
            return Err("sink-cpu: give at least one DuT, one size and one repetition".into());
        }
        let tag = std::process::id();
        let files = [
            self.dir.join(format!("lr-sink-cpu-{tag}-default.json")),
            self.dir.join(format!("lr-sink-cpu-{tag}-thread.json")),
        ];
        let runs = self.both(&files, progress);
        for f in &files {
            let _ = std::fs::remove_file(f);
        }
        let (a, b) = runs?;
        Ok(self.report(a, b))
    }

    fn both(
        &self,
        files: &[PathBuf; 2],
        progress: &mut dyn FnMut(&str),
    ) -> Result<(Value, Value), String> {
        progress("== sink's receive on the DuT's CPU (default)");
        let a = self.bench(&files[0], None, progress)?;
        progress(&format!(
            "== sink's receive in a thread on CPU {} (--sink-cpu {})",
            self.sink_cpu, self.sink_cpu
        ));
        let b = self.bench(&files[1], Some(self.sink_cpu), progress)?;
        Ok((a, b))
    }

    /// One `linerate bench` run with its JSON in `file`; its standard
    /// error goes to `progress` line by line.
    fn bench(
        &self,
        file: &Path,
        sink_cpu: Option<usize>,
        progress: &mut dyn FnMut(&str),
    ) -> Result<Value, String> {
        let mut args = self.bench_args();
        args.extend(["--json".into(), file.display().to_string()]);
        if let Some(c) = sink_cpu {
            args.extend(["--sink-cpu".into(), c.to_string()]);
        }
        let what = format!("linerate {}", args.join(" "));
        let mut child = linerate_testkit::Proc::spawn(
            Command::new(&self.linerate)
                .args(&args)
                .stdin(Stdio::null()),
            &what,
        )?;
        // Its table (standard output) is drained apart, so that neither
        // pipe fills while the other is read.
        let (out, err) = child.take_pipes();
        let drain = out.map(|mut o| {
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut o, &mut std::io::sink());
            })
        });
        let mut last = String::new();
        for l in err
            .into_iter()
            .flat_map(|e| BufReader::new(e).lines().map_while(Result::ok))
        {
            progress(&l);
            last = l;
        }
        let st = child.wait()?;
        if let Some(t) = drain {
            let _ = t.join();
        }
        // A bench that exits non-zero after its run (a DuT failed) still
        // wrote its JSON: the failed DuT is a row of the table, not the end
        // of the study. Only a run without JSON is an error.
        let json = std::fs::read_to_string(file)
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok());
        match json {
            Some(v) => {
                if !st.success() {
                    progress(&format!("({what}: {st}; its results are kept)"));
                }
                Ok(v)
            }
            None if !st.success() => Err(format!("{what}: {st}: {last}")),
            None => Err(format!("{}: no JSON from the run", file.display())),
        }
    }

    /// The table of the two runs side by side, and what they say.
    fn report(&self, a: Value, b: Value) -> StudyReport {
        let env_of = |k: &str| {
            a["environment"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|kv| kv[0] == k)
                .and_then(|kv| kv[1].as_str())
                .unwrap_or("?")
                .to_string()
        };
        let mut rows = Vec::new();
        let mut ratios: Vec<f64> = Vec::new();
        // Every DuT and size of either run is a row: one that failed, was
        // skipped or is missing in a run shows its status there.
        let mut keys: Vec<(String, Value)> = Vec::new();
        for run in [&a, &b] {
            for r in run["results"].as_array().into_iter().flatten() {
                for x in r["sizes"].as_array().into_iter().flatten() {
                    let k = (label(r), x["frame_size"].clone());
                    if !keys.contains(&k) {
                        keys.push(k);
                    }
                }
            }
        }
        let status = |run: &Value, name: &str| {
            run["results"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|r| label(r) == name)
                .and_then(|r| r["status"].as_str())
                .unwrap_or("not run")
                .to_string()
        };
        for (name, size) in keys {
            let (x, y) = (
                crate::bench::markdown::size_of(&a, &name, &size),
                crate::bench::markdown::size_of(&b, &name, &size),
            );
            let tp =
                |v: Option<&Value>, run: &Value| v.map_or_else(|| status(run, &name), throughput);
            let pps = |v: Option<&Value>| v.and_then(|v| v["throughput_pps"].as_f64());
            let lim = |v: Option<&Value>| v.is_some_and(|v| v["generator_limited"] == true);
            let ratio = match (pps(x), pps(y)) {
                (Some(tx), Some(ty)) if tx > 0.0 => match (lim(x), lim(y)) {
                    // A lower bound over a lower bound says nothing.
                    (true, true) => "?".into(),
                    (true, false) => format!("<={:.2}x", ty / tx),
                    (false, true) => format!(">={:.2}x", ty / tx),
                    (false, false) => {
                        ratios.push(ty / tx);
                        format!("{:.2}x", ty / tx)
                    }
                },
                _ => "-".into(),
            };
            let p50 = |v: Option<&Value>| v.map_or_else(|| "-".to_string(), p50_us);
            rows.push(vec![
                name.clone(),
                size_label(&size),
                tp(x, &a),
                tp(y, &b),
                ratio,
                format!("{} / {}", p50(x), p50(y)),
            ]);
        }
        let c = self.sink_cpu;
        let mut findings = Vec::new();
        if !ratios.is_empty() {
            let lower = ratios.iter().filter(|r| **r < 1.0).count();
            let (lo, hi) = ratios
                .iter()
                .fold((f64::INFINITY, 0.0f64), |(l, h), r| (l.min(*r), h.max(*r)));
            findings.push(format!(
                "With the sink's receive in a thread on CPU {c}, the throughput was lower at {lower} of {} (DuT, frame size) pairs where neither run was generator-limited (ratio {lo:.2}x to {hi:.2}x).",
                ratios.len()
            ));
        }
        findings.push(if c == 0 {
            "Reading it. On two CPUs there is no free core for the sink: on CPU 0 its NAPI thread shares the core with the generator, which spins in BPF_PROG_RUN for the whole trial, so the thread runs only when the scheduler preempts the generator, s0's ring overflows, and the frames lost there count against the DuT (d1 sent them: the kernel's counters agree with ours). The rows with `--sink-cpu 0` are the sink's limit, not the DuT's. The default bed charges the sink's receive work to the DuT's core instead: the DuTs' numbers there are what a DuT reaches while also paying for its receiver. `--sink-cpu` is for machines with a third CPU.".to_string()
        } else {
            format!("Reading it. The default bed charges the sink's receive work to the DuT's core: the DuTs' numbers there are what a DuT reaches while also paying for its receiver. With the sink's receive on CPU {c}, away from the DuT's core and the generator's (CPU 0, unless `linerate bench --gen-cpu` moved it), the rows with `--sink-cpu {c}` are the DuT's own limit.")
        });
        let secs = |v: &Value| v["seconds"].as_f64().unwrap_or(0.0);
        let mut command = format!(
            "linerate bench sink-cpu --sizes {} --repetitions {} --trial {} --sink-cpu {c}",
            self.sizes.join(","),
            self.repetitions,
            self.trial
        );
        if let Some(f) = self.final_trial {
            command.push_str(&format!(" --final-trial {f}"));
        }
        for d in &self.duts {
            command.push_str(&format!(" --dut {d}"));
        }
        StudyReport {
            name: "sink-cpu",
            title: "Where the sink's receive work runs (`--sink-cpu`)".into(),
            date: a["date"].as_str().unwrap_or("?").to_string(),
            command,
            environment: vec![
                ("CPU".into(), env_of("CPU")),
                ("kernel".into(), env_of("kernel")),
                (
                    "the two `linerate bench` runs".into(),
                    format!(
                        "back to back, {:.0} s and {:.0} s",
                        secs(&a),
                        secs(&b)
                    ),
                ),
            ],
            intro: vec![format!(
                "veth runs a receiver's NAPI in the softirq of the CPU that transmits to it, so by default the sink's receive work (s0's NAPI and its XDP counter) runs on the DuT's core and is charged to the DuT. `--sink-cpu {c}` moves it into a kernel thread pinned to CPU {c}. Throughput in Mpps (median of the searches; `>=`: the generator was the limit), latency p50 in us."
            )],
            tables: vec![Table {
                title: "Throughput and latency, the sink's receive on the DuT's CPU and in a thread".into(),
                header: vec![
                    "DuT".into(),
                    "frame".into(),
                    "sink on the DuT's CPU".into(),
                    format!("sink in a thread on CPU {c}"),
                    "ratio".into(),
                    format!("p50 latency (default / --sink-cpu {c})"),
                ],
                rows,
            }],
            charts: vec![],
            blocks: vec![],
            findings,
            data: json!({"default": a, "sink_cpu": b, "sink_cpu_cpu": c}),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(results: Value) -> Value {
        json!({"date": "2026-11-26T00:00:00Z", "seconds": 10.0,
               "environment": [["CPU", "Test CPU"], ["kernel", "Linux 6"]], "results": results})
    }
    fn size(pps: f64, lim: bool) -> Value {
        json!({"frame_size": 64, "throughput_pps": pps, "generator_limited": lim})
    }

    #[test]
    fn every_dut_of_either_run_is_a_row_and_bounds_are_marked() {
        let a = run(json!([
            {"name": "linux-bridge", "status": "ok", "sizes": [size(800_000.0, false)]},
            {"name": "linux-ipfwd", "status": "ok", "sizes": [size(1_200_000.0, true)]},
            {"name": "linerate-afxdp", "status": "ok", "sizes": [size(900_000.0, false)]},
        ]));
        let b = run(json!([
            {"name": "linux-bridge", "status": "ok", "sizes": [size(400_000.0, false)]},
            {"name": "linux-ipfwd", "status": "ok", "sizes": [size(600_000.0, false)]},
            {"name": "linerate-afxdp", "status": "failed: no forwarder", "sizes": []},
        ]));
        let r = SinkCpuStudy::default().report(a, b);
        let rows = &r.tables[0].rows;
        assert_eq!(rows.len(), 3, "{rows:?}");
        assert_eq!(rows[0][2..5], ["0.800", "0.400", "0.50x"]);
        // The first run's figure is a lower bound: so is the ratio's denominator.
        assert_eq!(rows[1][2..5], [">=1.200", "0.600", "<=0.50x"]);
        // Failed in the second run: its status, no ratio.
        assert_eq!(rows[2][2..5], ["0.900", "failed: no forwarder", "-"]);
        assert!(
            r.findings[0].contains("lower at 1 of 1"),
            "only the pair without a bound counts: {}",
            r.findings[0]
        );
    }
}
