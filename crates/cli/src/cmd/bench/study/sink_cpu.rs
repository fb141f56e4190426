//! `linerate bench sink-cpu`'s options and their checks
//! (`linerate_measure::study::sink_cpu`).

use super::out::Out;
use anyhow::{bail, Result};
use linerate_measure::frame_size;
use linerate_measure::study::{sink_cpu::SinkCpuStudy, StudyReport};

#[derive(clap::Args)]
pub struct SinkCpuArgs {
    /// The DuTs (repeatable).
    #[arg(long = "dut", default_values_t = ["linerate-afxdp".to_string(), "linux-bridge".into(), "linux-ipfwd".into()])]
    pub duts: Vec<String>,
    /// Frame sizes in bytes on the wire with FCS (or imix), comma separated.
    #[arg(long, value_delimiter = ',', default_values_t = vec![64u32, 1518], value_parser = frame_size::parse)]
    pub sizes: Vec<u32>,
    /// Throughput searches per frame size in each run.
    #[arg(long, default_value_t = 2)]
    pub repetitions: usize,
    /// Seconds of traffic per trial.
    #[arg(long, default_value_t = 0.2)]
    pub trial: f64,
    /// Seconds of each final trial at the reported rates (0: none) [default: the bench's, 10].
    #[arg(long)]
    pub final_trial: Option<f64>,
    /// The CPU of the sink's receive thread in the second run.
    #[arg(long, default_value_t = 0)]
    pub sink_cpu: usize,
    /// Test bed name prefix of both runs (letters, digits, '-', '_'; at most 20).
    #[arg(long)]
    pub name: Option<String>,
    #[command(flatten)]
    pub out: Out,
}

/// Run the study as the options ask.
pub fn run(a: SinkCpuArgs, progress: &mut dyn FnMut(&str)) -> Result<(StudyReport, Out)> {
    if a.repetitions == 0 || a.repetitions > 100 {
        bail!("--repetitions {}: must be 1 to 100", a.repetitions);
    }
    if !(a.trial.is_finite() && (0.05..=3600.0).contains(&a.trial)) {
        bail!("--trial {}: must be 0.05 to 3600 seconds", a.trial);
    }
    linerate_measure::study::final_trial_args("--final-trial", a.final_trial)
        .map_err(anyhow::Error::msg)?;
    let s = SinkCpuStudy {
        linerate: std::env::current_exe()?,
        duts: a.duts,
        sizes: a.sizes.iter().map(|z| frame_size::label(*z)).collect(),
        repetitions: a.repetitions,
        trial: a.trial,
        final_trial: a.final_trial,
        sink_cpu: a.sink_cpu,
        bed_name: a.name,
        ..SinkCpuStudy::default()
    };
    Ok((s.run(progress).map_err(anyhow::Error::msg)?, a.out))
}
