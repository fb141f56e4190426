//! `linerate bench overload`'s options and the switch study's `veth` part
//! options (linerate_measure::study::{overload, switch::veth}).

use super::out::Out;
use linerate_measure::study::switch::veth as switch_veth;
use linerate_measure::study::{overload::OverloadStudy, StudyReport};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct OverloadArgs {
    /// Seconds per overload trial (after 1 s of warm-up) and per pure-CPU run.
    #[arg(long, default_value_t = 5)]
    pub seconds: u64,
    /// Overload trials per DuT (the table shows the median and min-max).
    #[arg(long, default_value_t = 2)]
    pub repeat: usize,
    /// The DuT's CPU in the bench, and the CPU of the pure-CPU forwarders and testpmd.
    #[arg(long, default_value_t = 1)]
    pub cpu: usize,
    /// Only these DuTs at overload, comma separated [default: every built-in DuT and the
    /// peers (testpmd, Open vSwitch)].
    #[arg(long, value_delimiter = ',')]
    pub duts: Vec<String>,
    #[command(flatten)]
    pub out: Out,
}

/// The switch study's part `veth` (`--parts ...,veth`).
#[derive(clap::Args)]
pub struct VethArgs {
    /// veth: throughput searches per frame size and DuT.
    #[arg(long, default_value_t = 3)]
    pub veth_repetitions: usize,
    /// veth: frame sizes in bytes on the wire with FCS, comma separated.
    #[arg(long, value_delimiter = ',', default_values_t = vec![64u32])]
    pub veth_sizes: Vec<u32>,
    /// veth: the DuTs, comma separated.
    #[arg(long, value_delimiter = ',', default_values_t = switch_veth::DUTS.map(String::from).to_vec())]
    pub veth_duts: Vec<String>,
    /// veth: seconds of each final trial at the reported rates (0: none) [default: the bench's, 10].
    #[arg(long)]
    pub veth_final_trial: Option<f64>,
}

impl VethArgs {
    /// The part, when `on`.
    pub fn part(&self, on: bool) -> Option<switch_veth::VethPart> {
        on.then(|| switch_veth::VethPart {
            repetitions: self.veth_repetitions,
            sizes: self.veth_sizes.clone(),
            duts: self.veth_duts.clone(),
            final_trial: self.veth_final_trial,
        })
    }
}

/// Run `linerate bench overload`.
pub fn overload(a: OverloadArgs, exe: PathBuf) -> anyhow::Result<(StudyReport, Out)> {
    let s = OverloadStudy {
        peers_dir: linerate_measure::bench::dut::find_peers_dir(&exe),
        linerate: exe,
        seconds: a.seconds,
        repeat: a.repeat,
        cpu: a.cpu,
        duts: a.duts,
    };
    let r = s
        .run(&mut |l: &str| eprintln!("{l}"))
        .map_err(anyhow::Error::msg)?;
    Ok((r, a.out))
}
