//! `linerate __reap --parent PID` (hidden): the watchdog process of
//! `linerate_measure::guard`. Started by `Guard::spawn` with its stdin
//! connected to the parent; removes what the parent registered when the
//! parent dies without saying "done".

/// The watchdog (internal; started by `linerate bench` and `testbed up --hold`).
#[derive(clap::Args)]
pub struct Args {
    /// Pid of the process watched (its test bed records are removed too).
    #[arg(long)]
    pub parent: u32,
}

pub fn run(a: Args) -> ! {
    std::process::exit(linerate_measure::reap::watchdog_main(a.parent))
}

/// Start the watchdog for this process and route the registrations of
/// test beds, peers and children to it.
pub fn guard() -> anyhow::Result<linerate_measure::guard::Guard> {
    // /proc/self/exe: this very binary, even if the file was replaced meanwhile.
    let g = linerate_measure::guard::Guard::spawn(
        std::path::Path::new("/proc/self/exe"),
        &[linerate_measure::guard::REAP_SUBCOMMAND],
    )?;
    g.install();
    Ok(g)
}
