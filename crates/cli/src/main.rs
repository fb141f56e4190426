//! `linerate`: one binary, one subcommand per job.

use clap::{Parser, Subcommand};

/// `print!` without the panic: see [`cmd::common::out`].
macro_rules! out {
    ($($t:tt)*) => { $crate::cmd::common::out(format_args!($($t)*)) };
}
/// `println!` without the panic: see [`cmd::common::out`].
macro_rules! outln {
    () => { $crate::cmd::common::out(format_args!("\n")) };
    ($($t:tt)*) => { $crate::cmd::common::out(format_args!("{}\n", format_args!($($t)*))) };
}

mod cmd;
mod script;

#[derive(Parser)]
#[command(name = "linerate", version, about = "Move packets fast on commodity Linux, and prove how fast they move.",
    long_about = None, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    Fwd(cmd::fwd::Args),
    Testbed(cmd::testbed::Args),
    Bench(Box<cmd::bench::Args>),
    Count(cmd::count::Args),
    Gen(cmd::gen::Args),
    Experiment(cmd::experiment::Args),
    Capture(cmd::capture::Args),
    #[command(name = "__reap", hide = true)]
    Reap(cmd::reap::Args),
    Switch(cmd::switch::Args),
    SwitchCtl(cmd::switch_ctl::CtlArgs),
    Trace(cmd::trace::Args),
}

fn main() {
    let cli = Cli::parse();
    let r = match cli.command {
        Command::Fwd(a) => cmd::fwd::run(a),
        Command::Testbed(a) => cmd::testbed::run(a),
        Command::Bench(a) => cmd::bench::run(*a),
        Command::Count(a) => cmd::count::run(a),
        Command::Gen(a) => cmd::gen::run(a),
        Command::Experiment(a) => cmd::experiment::run(a),
        Command::Capture(a) => cmd::capture::run(a),
        Command::Reap(a) => cmd::reap::run(a),
        Command::Switch(a) => cmd::switch::run(a),
        Command::SwitchCtl(a) => cmd::switch_ctl::run_ctl(a),
        Command::Trace(a) => cmd::trace::run(a),
    };
    // A command's own error first; else a failed write to standard output.
    let r = r.and_then(|()| cmd::common::stdout_result());
    if let Err(e) = r {
        // One line, naming the problem; the chain is joined with ": ".
        eprintln!("linerate: error: {}", format!("{e:#}").replace('\n', " "));
        std::process::exit(1);
    }
}
