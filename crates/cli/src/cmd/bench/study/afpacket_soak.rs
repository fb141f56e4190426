//! The options of `linerate bench afpacket` and `linerate bench soak`
//! (`linerate_measure::study::{afpacket, soak}`), and their checks.

use super::out::Out;
use anyhow::{bail, Result};
use linerate_measure::study::{afpacket::AfpacketStudy, soak::SoakStudy, StudyReport};

#[derive(clap::Args)]
pub struct AfpacketArgs {
    /// Seconds per latency run (10 kpps through the bridge, ring=v2 and ring=v3).
    #[arg(long, default_value_t = 5)]
    pub seconds: u64,
    /// Seconds per trial of the long-trial searches.
    #[arg(long, default_value_t = 30.0)]
    pub trial: f64,
    /// Long-trial searches per DuT (~7 min each at 30 s trials).
    #[arg(long, default_value_t = 2)]
    pub searches: usize,
    /// Searches per DuT with the bench's 0.2 s trials.
    #[arg(long, default_value_t = 3)]
    pub short_searches: usize,
    /// Test bed name prefix [default: lrafp + this process's id].
    #[arg(long)]
    pub name: Option<String>,
    #[command(flatten)]
    pub out: Out,
}

#[derive(clap::Args)]
pub struct SoakArgs {
    /// Minutes of soak per pipeline.
    #[arg(long, default_value_t = 30)]
    pub minutes: u64,
    /// Seconds of soak per pipeline instead of --minutes (a short run).
    #[arg(long, conflicts_with = "minutes")]
    pub seconds: Option<u64>,
    /// Seconds between the RSS samples.
    #[arg(long, default_value_t = 10)]
    pub interval: u64,
    /// Seconds of warm-up before growth is counted.
    #[arg(long, default_value_t = 120)]
    pub warmup: u64,
    /// The pipelines, comma separated, soaked in this order.
    #[arg(long, value_delimiter = ',', default_value = "fwd,switch,capture", value_parser = ["fwd", "switch", "capture"])]
    pub pipelines: Vec<String>,
    /// Searches of `linerate bench` for fwd's and switch's loss-free rate.
    #[arg(long, default_value_t = 2)]
    pub searches: usize,
    /// Seconds per trial of capture's loss-free rate bisection.
    #[arg(long, default_value_t = 5)]
    pub capture_trial: u64,
    /// Test bed name prefix [default: lrsoak + this process's id].
    #[arg(long)]
    pub name: Option<String>,
    #[command(flatten)]
    pub out: Out,
}

pub fn afpacket(
    a: AfpacketArgs,
    exe: std::path::PathBuf,
    progress: &mut dyn FnMut(&str),
) -> Result<(StudyReport, Out)> {
    let s = AfpacketStudy {
        linerate: exe,
        seconds: a.seconds,
        short_searches: a.short_searches,
        trial: a.trial,
        searches: a.searches,
        name: a
            .name
            .unwrap_or_else(|| format!("lrafp{}", std::process::id())),
    };
    Ok((s.run(progress).map_err(anyhow::Error::msg)?, a.out))
}

pub fn soak(
    a: SoakArgs,
    exe: std::path::PathBuf,
    progress: &mut dyn FnMut(&str),
) -> Result<(StudyReport, Out)> {
    let seconds = match a.seconds {
        Some(s) => s,
        None => a.minutes.saturating_mul(60),
    };
    if seconds == 0 {
        bail!("--minutes/--seconds: at least 1");
    }
    let mut command = match a.seconds {
        Some(s) => format!("linerate bench soak --seconds {s}"),
        None => format!("linerate bench soak --minutes {}", a.minutes),
    };
    if a.interval != 10 || a.warmup != 120 {
        command += &format!(" --interval {} --warmup {}", a.interval, a.warmup);
    }
    if a.pipelines.join(",") != "fwd,switch,capture" {
        command += &format!(" --pipelines {}", a.pipelines.join(","));
    }
    if a.searches != 2 {
        command += &format!(" --searches {}", a.searches);
    }
    if a.capture_trial != 5 {
        command += &format!(" --capture-trial {}", a.capture_trial);
    }
    let s = SoakStudy {
        linerate: exe,
        seconds,
        interval: a.interval,
        warmup: a.warmup,
        pipelines: a.pipelines,
        searches: a.searches,
        capture_trial: a.capture_trial,
        name: a
            .name
            .unwrap_or_else(|| format!("lrsoak{}", std::process::id())),
        command,
    };
    Ok((s.run(progress).map_err(anyhow::Error::msg)?, a.out))
}
