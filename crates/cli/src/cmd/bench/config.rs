//! `linerate bench`'s options checked and turned into the library's plans:
//! one line naming the option for every value out of range.

use super::args::Args;
use anyhow::{bail, Result};
use linerate_measure::bench::dut::{self, Dut, DutEnv};
use linerate_measure::bench::rfc2544::{self, Rfc2544Config};
use linerate_measure::bench::session::Plan;
use linerate_measure::bench::{self, history, BenchConfig, Rfc2544Bench};
use linerate_measure::frame_size;
use std::time::Duration;

/// The DuTs asked for, in order (see [`dut::select`]).
pub fn select_duts(a: &Args, peers: bool) -> Result<Vec<Box<dyn Dut>>> {
    dut::select(&a.duts, &a.dut_files, peers).map_err(anyhow::Error::msg)
}

/// The options every mode shares.
pub fn check_common(a: &Args) -> Result<()> {
    if let Some(n) = &a.name {
        if n.is_empty()
            || n.len() > 20
            || !n
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            bail!("--name {n:?}: letters, digits, '-' and '_', at most 20 characters");
        }
    }
    if !(a.warmup.is_finite() && (0.0..=3600.0).contains(&a.warmup)) {
        bail!("--warmup {}: must be 0 to 3600 seconds", a.warmup);
    }
    if !(a.duration.is_finite() && a.duration > 0.0 && a.duration <= 3600.0) {
        bail!(
            "--duration {}: must be over 0 and at most 3600 seconds",
            a.duration
        );
    }
    Ok(())
}

fn dut_env(cpu: usize) -> Result<DutEnv> {
    let exe = std::env::current_exe()?;
    Ok(DutEnv {
        peers_dir: dut::find_peers_dir(&exe),
        linerate: exe,
        cpu,
    })
}

fn pct_arg(name: &str, v: f64, max: f64) -> Result<f64> {
    if !(v.is_finite() && (0.0..=max).contains(&v)) {
        bail!("--{name} {v}: must be a percentage from 0 to {max}");
    }
    Ok(v / 100.0)
}

/// A duration option in seconds: finite, not negative, at most a day.
fn seconds(what: &str, v: f64) -> Result<Duration> {
    if !(v.is_finite() && (0.0..=86400.0).contains(&v)) {
        bail!("{what}: {v} is not a number of seconds from 0 to 86400");
    }
    Ok(Duration::from_secs_f64(v))
}

/// The external ports asked for, checked (None: the namespace bed).
fn external_ports(a: &Args) -> Result<Option<bench::external::External>> {
    use bench::external::{ExtMode, External, L3Port};
    let (Some(pa), Some(pb), Some(mode)) = (&a.port_a, &a.port_b, &a.port_mode) else {
        if a.tester_a.is_some() || a.gateway_a.is_some() || a.tester_b.is_some() {
            bail!(
                "--tester-a, --gateway-a and --tester-b go with --port-a/--port-b --port-mode l3"
            );
        }
        return Ok(None);
    };
    if a.direction.contains(&bench::Direction::Bi) {
        bail!("--direction bi: external ports are measured one way (A -> B)");
    }
    let mode = match mode.as_str() {
        "l3" => {
            let (Some(ta), Some(ga), Some(tb)) = (a.tester_a, a.gateway_a, a.tester_b) else {
                bail!("--port-mode l3: give --tester-a, --gateway-a and --tester-b");
            };
            ExtMode::L3 {
                a: L3Port {
                    ip: ta,
                    gateway: ga,
                },
                b: L3Port {
                    ip: tb,
                    gateway: std::net::Ipv4Addr::UNSPECIFIED,
                },
            }
        }
        _ => {
            if a.tester_a.is_some() || a.gateway_a.is_some() || a.tester_b.is_some() {
                bail!("--port-mode l2: --tester-a, --gateway-a and --tester-b are for l3");
            }
            ExtMode::L2
        }
    };
    let ext = External {
        port_a: pa.clone(),
        port_b: pb.clone(),
        mode,
        force_ports: a.force_ports.clone(),
    };
    // Before anything is built or sent: a refusal is the run's one line.
    ext.check().map_err(anyhow::Error::msg)?;
    Ok(Some(ext))
}

/// The RFC 2544 run the options ask for.
pub fn rfc2544_plan(a: &Args) -> Result<Plan> {
    let frame_loss_sizes: Vec<u32> = a
        .frame_loss_sizes
        .iter()
        .copied()
        .filter(|&s| s != 0)
        .collect();
    let b2b_sizes: Vec<u32> = a.b2b_sizes.iter().copied().filter(|&s| s != 0).collect();
    let mut sizes = if a.quick {
        vec![64, 1518]
    } else {
        a.sizes.clone()
    };
    sizes.dedup();
    for s in sizes.iter().chain(&frame_loss_sizes).chain(&b2b_sizes) {
        if !frame_size::is_valid(*s) {
            bail!("frame size {s}: must be 64..=1518 (bytes on the wire, with FCS) or imix");
        }
    }
    if sizes.is_empty() {
        bail!("--sizes: give at least one frame size");
    }
    if a.section.is_empty()
        || !a
            .section
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        bail!("--section {:?}: letters, digits, '-' and '_'", a.section);
    }
    if !(a.trial.is_finite() && (0.05..=3600.0).contains(&a.trial)) {
        bail!("--trial {}: must be 0.05 to 3600 seconds", a.trial);
    }
    if !(a.line_rate.is_finite() && a.line_rate >= 0.0) {
        bail!(
            "--line-rate {}: must be a number of Gbit/s >= 0",
            a.line_rate
        );
    }
    let loss_tolerance = pct_arg("loss-tolerance", a.loss_tolerance, 100.0)?;
    let pdr_loss = pct_arg("pdr-loss", a.pdr_loss, 100.0)?;
    if pdr_loss < loss_tolerance {
        bail!(
            "--pdr-loss {}: must be at least --loss-tolerance ({})",
            a.pdr_loss,
            a.loss_tolerance
        );
    }
    let resolution = pct_arg("resolution", a.resolution, 50.0)?;
    if resolution <= 0.0 {
        bail!("--resolution 0: must be above 0 %");
    }
    let external = external_ports(a)?;
    for &s in sizes.iter().chain(&frame_loss_sizes).chain(&b2b_sizes) {
        max_rate_at(a, s)?;
    }
    let procedures = Rfc2544Config {
        sizes,
        trial: Duration::from_secs_f64(if a.quick { 0.2 } else { a.trial }),
        loss_tolerance,
        pdr_loss,
        strict: a.strict,
        resolution: if a.quick {
            resolution.max(0.02)
        } else {
            resolution
        },
        repetitions: a.repetitions.unwrap_or(if a.quick { 1 } else { 2 }).max(1),
        latency_trials: a
            .latency_trials
            .unwrap_or(if a.strict { 20 } else { 1 })
            .max(1),
        settle: seconds(
            "--settle",
            a.settle.unwrap_or(if a.strict { 5.0 } else { 0.0 }),
        )?,
        // Default: a final trial confirms every reported NDR and PDR
        // (--quick, a first look: none unless asked, and the report says
        // the figures rest on the search's short trials); 0: none.
        final_trial: match a.final_trial {
            Some(0.0) => None,
            Some(v) => Some(seconds("--final-trial", v)?),
            None if a.quick => None,
            None => Some(rfc2544::DEFAULT_FINAL_TRIAL),
        },
        latency: !a.no_latency,
        frame_loss_sizes: if a.quick { vec![64] } else { frame_loss_sizes },
        back_to_back_sizes: if a.quick { vec![64] } else { b2b_sizes },
        back_to_back_trials: if a.quick { 1 } else { a.b2b_trials.max(1) },
        max_rate: a.max_rate,
        ..Rfc2544Config::default()
    };
    if let Some(c) = a.sink_cpu {
        if c == a.gen_cpu || c == a.dut_cpu {
            eprintln!(
                "warning: --sink-cpu {c} is the {}'s CPU: the sink's receive thread shares it (a spinning generator starves it; measured: 0.06 Mpps at 64 B), so losses there are the sink's",
                if c == a.gen_cpu { "generator" } else { "DuT" }
            );
        }
    }
    let cfg = Rfc2544Bench {
        procedures,
        gen_cpu: a.gen_cpu,
        dut_cpu: a.dut_cpu,
        flows: 64,
        ts_every: 16,
        threaded_napi: a.threaded_napi,
        rps: !a.no_rps,
        sink_cpu: a.sink_cpu,
        bed_name: a.name.clone(),
        env: dut_env(a.dut_cpu)?,
        directions: a.direction.clone(),
        reverse_gen_cpu: a.reverse_gen_cpu,
        on_trial: None,
        common_load: if a.no_latency {
            bench::CommonLoad::Off
        } else {
            a.latency_rate
        },
    };
    // Runs against external DuTs are not kept: the history pools runs of
    // the same DuTs, which it cannot tell apart behind two interfaces.
    let history_file = if a.no_history || external.is_some() {
        None
    } else {
        a.history.clone().or_else(history::default_path)
    };
    Ok(Plan {
        cfg,
        external,
        history_file,
    })
}

/// --max-rate at frame size `size` is at least [`rfc2544::MIN_CAP_PPS`].
fn max_rate_at(a: &Args, size: u32) -> Result<()> {
    if let Some(m) = a.max_rate {
        let pps = m.pps(size);
        if pps < rfc2544::MIN_CAP_PPS {
            bail!(
                "--max-rate: {pps:.0} frames/s at {}, under the least of {} (the bench's check trials alone send 2000 frames)",
                frame_size::label_b(size),
                rfc2544::MIN_CAP_PPS
            );
        }
    }
    Ok(())
}

/// The overload run the options ask for.
pub fn overload_config(a: &Args) -> Result<BenchConfig> {
    if a.frame_size < 64 || a.frame_size > 1518 {
        bail!("--frame-size {}: must be 64..=1518", a.frame_size);
    }
    max_rate_at(a, a.frame_size as u32)?;
    let (duration, warmup) = if a.quick {
        (1.0, 0.5)
    } else {
        (a.duration, a.warmup)
    };
    Ok(BenchConfig {
        frame_len: a.frame_size - 4,
        warmup: Duration::from_secs_f64(warmup),
        duration: Duration::from_secs_f64(duration),
        repeat: a.repeat.max(1),
        gen_cpu: a.gen_cpu,
        dut_cpu: a.dut_cpu,
        flows: 64,
        threaded_napi: a.threaded_napi,
        rps: !a.no_rps,
        bed_prefix: a.name.clone(),
        env: dut_env(a.dut_cpu)?,
        max_rate: a.max_rate,
    })
}
