//! Helpers shared by commands: signals, standard output, CPU pinning.

use anyhow::{Context, Result};
use linerate_pipeline::event::{Account, Event, Report};
use linerate_pipeline::metrics::{serve::Server, Exposition, Publish};
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

static STOP: OnceLock<Arc<AtomicBool>> = OnceLock::new();

/// The first error writing to standard output (a full disk, a closed pipe).
static STDOUT_ERR: OnceLock<String> = OnceLock::new();

/// Write to standard output (the `out!` and `outln!` macros). A failed
/// write does not panic as `println!` does: the error is kept, nothing more
/// is written, a running command is asked to stop (as by SIGTERM, so that
/// it closes its files whole) and `main` ends with the error, one line.
pub fn out(args: std::fmt::Arguments<'_>) {
    if STDOUT_ERR.get().is_some() {
        return;
    }
    if let Err(e) = std::io::stdout().lock().write_fmt(args) {
        let _ = STDOUT_ERR.set(format!("writing to standard output: {e}"));
        if let Some(f) = STOP.get() {
            f.store(true, Ordering::SeqCst);
        }
    }
}

/// Flush standard output; the error of any write to it, if one failed.
pub fn stdout_result() -> Result<()> {
    if STDOUT_ERR.get().is_none() {
        if let Err(e) = std::io::stdout().lock().flush() {
            let _ = STDOUT_ERR.set(format!("writing to standard output: {e}"));
        }
    }
    match STDOUT_ERR.get() {
        Some(e) => Err(anyhow::anyhow!("{e}")),
        None => Ok(()),
    }
}

/// A flag set on SIGINT or SIGTERM (installed once per process). Commands
/// poll it and end in order, so that Drop impls detach XDP programs,
/// close sockets, flush files and remove test beds.
pub fn stop_flag() -> Result<Arc<AtomicBool>> {
    if let Some(f) = STOP.get() {
        return Ok(f.clone());
    }
    let f = Arc::new(AtomicBool::new(false));
    let g = f.clone();
    ctrlc::set_handler(move || {
        if g.swap(true, Ordering::SeqCst) {
            // Second signal: the user insists. Exit now; bpf links and
            // sockets are released by the kernel when the process ends.
            std::process::exit(130);
        }
    })
    .context("installing the SIGINT/SIGTERM handler")?;
    let _ = STOP.set(f.clone());
    Ok(STOP.get().cloned().unwrap_or(f))
}

/// Pin the calling thread to one CPU.
pub fn pin_to_cpu(cpu: usize) -> Result<()> {
    linerate_io::host::pin_to_cpu(cpu).map_err(anyhow::Error::msg)
}

/// `--xdp` (gen, count): the interface named by `port` (IF, afxdp:IF or
/// afpacket:IF, options ignored); other schemes are an error.
pub fn xdp_ifname(port: &str) -> Result<String> {
    match port.split_once(':') {
        Some(("afxdp" | "afpacket", rest)) => {
            Ok(rest.split('?').next().unwrap_or(rest).to_string())
        }
        Some((s, _)) => {
            anyhow::bail!("--xdp: port '{port}' is a {s} port; give an interface (IF or afxdp:IF)")
        }
        None => Ok(port.to_string()),
    }
}

/// The metrics server of this process (`--metrics`), once started.
static METRICS: OnceLock<Server> = OnceLock::new();

/// `--metrics ADDR:PORT`: serve `command`'s metrics in Prometheus' text
/// format at `http://ADDR:PORT/metrics` for the rest of the process. A bad
/// address or a port in use is a one-line error.
pub fn serve_metrics(addr: Option<&str>, command: &str, json: bool) -> Result<()> {
    let Some(addr) = addr else { return Ok(()) };
    let s = Server::start(addr, command).map_err(anyhow::Error::msg)?;
    if !json {
        eprintln!("metrics: http://{}/metrics", s.local_addr());
    }
    let _ = METRICS.set(s);
    Ok(())
}

/// Give the metrics server (if one runs) `r`'s view: once per report.
pub fn publish<T: Publish>(r: &T) {
    if let Some(s) = METRICS.get() {
        let mut m = Exposition::new();
        r.metrics(&mut m);
        s.publish(&m);
    }
}

/// Print a running pipeline's events: the ports it opened on stderr (not
/// with `--json`), its once-a-second ticks on stdout (not with `--quiet`)
/// and to the metrics server (with `--metrics`).
pub fn print_event<T: Report + Publish>(e: Event<'_, T>, json: bool, quiet: bool) {
    match e {
        Event::Opened(l) if !json => eprintln!("{l}"),
        Event::Opened(_) => {}
        Event::Tick(t) => {
            publish(t);
            if !quiet {
                print_report(t, json)
            }
        }
    }
}

/// Print a report as one JSON line or as its text.
pub fn print_report<T: Report>(r: &T, json: bool) {
    if json {
        out(format_args!("{}\n", r.json()));
    } else {
        let t = r.text();
        out(format_args!(
            "{t}{}",
            if t.ends_with('\n') { "" } else { "\n" }
        ));
    }
}

/// The end of a run: its final account, also when a port failed (its
/// interface went away: counters up to that point, then the error); a
/// broken balance of the counters is an error too.
pub fn finish<T: Account>(end: &T, json: bool) -> Result<()> {
    print_report(end, json);
    if let Some(e) = end.error() {
        anyhow::bail!("{e}");
    }
    if !end.balanced() {
        anyhow::bail!("internal accounting error: received != forwarded + drops");
    }
    Ok(())
}

/// The ports' options and the loop's idle policy of a busy-polling
/// pipeline (`fwd`, `switch`) from its `--batch`, `--ring` and `--poll`.
pub fn polling_ports(
    batch: usize,
    ring: u32,
    poll: &str,
) -> (linerate_io::OpenOptions, linerate_pipeline::poll::Polling) {
    let polling = linerate_pipeline::poll::Polling::from_name(poll);
    let open = linerate_io::OpenOptions {
        batch,
        ring_size: ring,
        busy_poll: polling == linerate_pipeline::poll::Polling::Busy,
        ..linerate_io::OpenOptions::default()
    };
    (open, polling)
}
