//! `linerate bench`: every device under test on the default test bed (or
//! the user's own between two interfaces). The options are in args.rs,
//! their checks in config.rs; the run is `measure::bench::session`, the
//! tables `measure::bench::text`.

mod args;
mod config;
mod metrics;
mod openflow_client;
mod study;

pub use args::Args;

use anyhow::{bail, Result};
use linerate_measure::bench::{self, text};
use linerate_measure::frame_size;
use std::io::Write;
use std::time::Instant;

pub fn run(mut a: Args) -> Result<()> {
    if a.metrics.is_some() && (a.study.is_some() || a.overload) {
        bail!("--metrics: served by the RFC 2544 bench only (not by --overload or a study)");
    }
    if a.study.is_none() {
        config::check_common(&a)?;
    }
    // The cleanup guarantee: a watchdog removes what this run made if it
    // dies without cleaning up itself (SIGKILL, crash; a study also on
    // SIGINT, which ends it at once).
    let guard = super::reap::guard()?;
    if let Some(s) = a.study.take() {
        study::run(s)?;
    } else if a.overload {
        run_overload(a)?;
    } else {
        run_rfc2544(a)?;
    }
    // Every bed and DuT is gone by now.
    guard.disarm()?;
    Ok(())
}

fn run_rfc2544(a: Args) -> Result<()> {
    let mut plan = config::rfc2544_plan(&a)?;
    // Before any bed is built: a bad address or a port in use ends the run here.
    super::common::serve_metrics(a.metrics.as_deref(), "bench", false)?;
    let watch = a.metrics.is_some().then(metrics::BenchMetrics::default);
    plan.cfg.on_trial = watch.as_ref().map(metrics::BenchMetrics::observer);
    let mut duts = if plan.external.is_some() {
        Vec::new()
    } else {
        config::select_duts(&a, !a.no_peers)?
    };
    let cfg = &plan.cfg;
    let earlier = plan
        .earlier(&mut |l| eprintln!("{l}"))
        .map_err(anyhow::Error::msg)?;
    let stop = super::common::stop_flag()?;
    let t0 = Instant::now();
    eprintln!(
        "linerate bench: RFC 2544 on {} DuTs at {:?} bytes, {:.2} s trials, loss tolerance {} %, resolution {} %; generator on CPU {}, DuT on CPU {}",
        duts.len(),
        cfg.procedures.sizes,
        cfg.procedures.trial.as_secs_f64(),
        a.loss_tolerance,
        cfg.procedures.resolution * 100.0,
        a.gen_cpu,
        a.dut_cpu
    );
    // Progress: "[time] [pass p/P, i/n] DuT size: what". Further
    // repetitions come in further passes over every DuT, then the latency
    // at the common load.
    let names = plan.rows(&duts);
    let n = names.len();
    let passes = cfg.procedures.repetitions;
    let (mut pass, mut last) = (1, 0);
    let mut progress = |name: &str, size: u32, what: &str| {
        if let Some(w) = &watch {
            w.at(name, size);
        }
        let i = names.iter().position(|x| x == name).unwrap_or(0) + 1;
        if i < last {
            pass += 1;
        }
        last = i;
        let at = if size > 0 {
            format!(" {}", frame_size::label_b(size))
        } else {
            String::new()
        };
        let of = if pass > passes {
            "common load, ".to_string()
        } else if passes > 1 {
            format!("pass {pass}/{passes}, ")
        } else {
            String::new()
        };
        eprintln!(
            "[{:>5.1}s] [{of}{i}/{n}] {name}{at}: {what}",
            t0.elapsed().as_secs_f64()
        );
    };
    let s = plan.run(earlier, &mut duts, &stop, &mut progress, &mut |l| {
        eprintln!("{l}")
    });
    drop(duts);
    if s.interrupted {
        eprintln!("interrupted: test beds and DuTs removed");
    }
    let json_to_stdout = a.json.as_deref() == Some(std::path::Path::new("-"));
    {
        let mut out: Box<dyn Write> = if json_to_stdout {
            Box::new(std::io::stderr().lock())
        } else {
            Box::new(std::io::stdout().lock())
        };
        let (empty, history) = (&s.empty, s.history.as_ref());
        let external = plan.external.is_some();
        text::rfc2544(&mut out, &s.results, empty, cfg, history, external)?;
    }
    if let Some(p) = &a.json {
        let v = s.json(cfg);
        if json_to_stdout {
            outln!("{v}");
        } else {
            linerate_io::file::write_whole(p, format!("{v:#}\n").as_bytes())
                .map_err(|e| anyhow::anyhow!("--json {e}"))?;
            eprintln!("JSON with every trial: {}", p.display());
        }
    }
    if !a.no_report {
        linerate_io::file::write_whole(&a.report, s.html(cfg, a.line_rate).as_bytes())
            .map_err(|e| anyhow::anyhow!("--report {e}"))?;
        eprintln!("report: {}", a.report.display());
    }
    if let Some(md) = &a.markdown {
        if s.interrupted {
            eprintln!(
                "interrupted: section '{}' of {} left as it was",
                a.section,
                md.display()
            );
        } else {
            let report = (!a.no_report).then(|| a.report.display().to_string());
            let body = s.markdown(cfg, &command_line(), report.as_deref());
            linerate_measure::study::put_section(md, &a.section, &body)
                .map_err(anyhow::Error::msg)?;
            eprintln!("section '{}' of {}", a.section, md.display());
        }
    }
    eprintln!("done in {:.0} s", t0.elapsed().as_secs_f64());
    // A DuT that failed fails the run: one line each.
    let mut failed = s.failures();
    if let Some(last) = failed.pop() {
        for f in failed {
            eprintln!("error: {f}");
        }
        bail!("{last}");
    }
    Ok(())
}

fn run_overload(a: Args) -> Result<()> {
    let cfg = config::overload_config(&a)?;
    let mut duts = config::select_duts(&a, a.peers)?;
    let stop = super::common::stop_flag()?;
    let t0 = Instant::now();
    let n = duts.len();
    let mut i = 0;
    let mut last = String::new();
    let mut progress = |name: &str, what: &str| {
        if name != last {
            i += 1;
            last = name.to_string();
        }
        eprintln!(
            "[{:>5.1}s] [{i}/{n}] {name}: {what}",
            t0.elapsed().as_secs_f64()
        );
    };
    eprintln!(
        "linerate bench: {} DuTs, {}-byte frames, {:.1} s per trial after {:.1} s warm-up, generator on CPU {}, DuT on CPU {}",
        n,
        a.frame_size,
        cfg.duration.as_secs_f64(),
        cfg.warmup.as_secs_f64(),
        a.gen_cpu,
        a.dut_cpu
    );
    let results = bench::run(&cfg, &mut duts, &stop, &mut progress);
    drop(duts);
    if stop.load(std::sync::atomic::Ordering::SeqCst) {
        eprintln!("interrupted: test beds and DuTs removed");
    }
    if a.json.is_some() {
        let v = serde_json::json!({
            "frame_size": a.frame_size,
            "duration_s": cfg.duration.as_secs_f64(),
            "warmup_s": cfg.warmup.as_secs_f64(),
            "gen_cpu": a.gen_cpu,
            "dut_cpu": a.dut_cpu,
            "threaded_napi": a.threaded_napi,
            "rps": !a.no_rps,
            "kernel": linerate_io::host::kernel_release(),
            "results": results,
        });
        outln!("{v}");
    } else {
        text::overload(&mut std::io::stdout().lock(), &results, a.frame_size)?;
    }
    Ok(())
}

/// This process's command line as given, "linerate" first, an argument
/// with spaces or quotes quoted (the command that reproduces the run).
fn command_line() -> String {
    let mut v = vec!["linerate".to_string()];
    v.extend(std::env::args_os().skip(1).map(|x| {
        let x = x.to_string_lossy().into_owned();
        if !x.is_empty()
            && x.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./,:=%+@".contains(c))
        {
            x
        } else {
            format!("'{}'", x.replace('\'', "'\\''"))
        }
    }));
    v.join(" ")
}
