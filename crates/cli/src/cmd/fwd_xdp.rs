//! `linerate fwd --mode xdp`: forwarding by an XDP program (devmap redirect),
//! the "kernel module" approach. The counters come from the program's
//! per-CPU maps, read once a second.

use super::common;
use super::fwd::Args;
use anyhow::{bail, Result};
use linerate_io::xdp::fwd::{MacRewrite as XdpRewrite, XdpFwd, XdpFwdCounters, XdpFwdDir};
use linerate_io::xdp::AttachMode;
use linerate_io::Uri;
use linerate_pipeline::fwd::run::XdpTick;
use linerate_pipeline::fwd::MacRewrite;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The interface behind a port name: `afxdp:IF`, `afpacket:IF` or a bare `IF`.
fn ifname(port: &str) -> Result<String> {
    if !port.contains(':') {
        return Ok(port.to_string());
    }
    let u = Uri::parse(port)?;
    match u.scheme.as_str() {
        "afxdp" | "afpacket" => Ok(u.target),
        s => bail!("--mode xdp: port '{port}' is a {s} port; the XDP forwarder needs interfaces (afxdp:IF or IF)"),
    }
}

fn dir_json(d: &XdpFwdDir) -> serde_json::Value {
    serde_json::json!({
        "received": d.rx, "received_bytes": d.rx_bytes, "forwarded": d.fwd, "dropped": d.drops(),
        "drops": {"redirect_failed": d.drop_redirect, "malformed": d.drop_malformed},
        "balanced": d.rx == d.fwd + d.drops(),
    })
}

pub fn run(
    a: &Args,
    ab: Option<MacRewrite>,
    ba: Option<MacRewrite>,
    stop: Arc<AtomicBool>,
) -> Result<()> {
    let (ia, ib) = (ifname(&a.port_a)?, ifname(&a.port_b)?);
    let mode = AttachMode::parse(&a.xdp_mode).unwrap_or(AttachMode::Native);
    let rw = (ab.is_some() || ba.is_some()).then_some(XdpRewrite {
        a_to_b: ab,
        b_to_a: ba,
    });
    let fwd = XdpFwd::start(&ia, &ib, mode, rw)?;
    if !a.json {
        eprintln!(
            "xdp forwarder attached to {ia} and {ib} ({} mode, devmap redirect)",
            mode.name()
        );
    }
    let t0 = Instant::now();
    let deadline = a.duration.map(|d| t0 + Duration::from_secs_f64(d.max(0.0)));
    let mut last = fwd.try_counters()?;
    let mut last_t = Instant::now();
    let mut links = common::watch_links(&[&ia, &ib])?;
    let mut link_err = Ok(());
    while !stop.load(Ordering::SeqCst) && deadline.is_none_or(|d| Instant::now() < d) {
        std::thread::sleep(Duration::from_millis(50));
        // An interface gone or down ends the run: the account, then the error.
        link_err = common::check_links(&mut links);
        if link_err.is_err() {
            break;
        }
        if last_t.elapsed() >= Duration::from_secs(1) {
            let now = fwd.try_counters()?;
            common::publish(&XdpTick {
                ports: [&ia, &ib],
                counters: &now,
            });
            let dt = last_t.elapsed().as_secs_f64();
            if !a.quiet {
                print_interval(a.json, t0.elapsed().as_secs_f64(), dt, &now, &last);
            }
            last = now;
            last_t = Instant::now();
        }
    }
    let c = fwd.try_counters()?;
    drop(fwd); // detach before reporting: nothing more is counted after this
    let elapsed = t0.elapsed().as_secs_f64();
    if a.json {
        let v = serde_json::json!({
            "mode": "xdp", "xdp_mode": mode.name(), "elapsed_s": elapsed,
            "directions": [
                {"direction": "A->B", "account": dir_json(&c.a_to_b)},
                {"direction": "B->A", "account": dir_json(&c.b_to_a)},
            ],
            "other_interface_frames": c.other,
        });
        outln!("{v}");
    } else {
        outln!("final account after {elapsed:.2} s (from the XDP program's per-CPU counters):");
        outln!(
            "  {:<6} {:>12} {:>12} {:>10}  {:<28} received = forwarded + drops",
            "dir",
            "received",
            "forwarded",
            "dropped",
            "drops by reason"
        );
        for (n, d) in [("A->B", &c.a_to_b), ("B->A", &c.b_to_a)] {
            let mut by = Vec::new();
            if d.drop_redirect > 0 {
                by.push(format!("redirect_failed={}", d.drop_redirect));
            }
            if d.drop_malformed > 0 {
                by.push(format!("malformed={}", d.drop_malformed));
            }
            outln!(
                "  {:<6} {:>12} {:>12} {:>10}  {:<28} {}",
                n,
                d.rx,
                d.fwd,
                d.drops(),
                if by.is_empty() {
                    "-".into()
                } else {
                    by.join(" ")
                },
                if d.rx == d.fwd + d.drops() {
                    "holds"
                } else {
                    "DOES NOT HOLD"
                }
            );
        }
    }
    if a.profile {
        eprintln!(
            "note: --profile measures the user-space loop; in xdp mode all work is in the kernel"
        );
    }
    link_err
}

fn print_interval(json: bool, t: f64, dt: f64, now: &XdpFwdCounters, last: &XdpFwdCounters) {
    let rate = |n: &XdpFwdDir, l: &XdpFwdDir| {
        (
            (n.fwd - l.fwd) as f64 / dt,
            (n.rx_bytes - l.rx_bytes) as f64 * 8.0 / dt,
            n.drops() - l.drops(),
        )
    };
    let (ab, bab, dab) = rate(&now.a_to_b, &last.a_to_b);
    let (ba, bba, dba) = rate(&now.b_to_a, &last.b_to_a);
    if json {
        outln!(
            "{}",
            serde_json::json!({"t": t, "a2b": {"fwd_pps": ab, "rx_bps": bab, "drops": dab}, "b2a": {"fwd_pps": ba, "rx_bps": bba, "drops": dba}})
        );
    } else {
        outln!(
            "{t:>7.1}s  A->B {:>8.3} Mpps {:>7.3} Gbit/s | B->A {:>8.3} Mpps {:>7.3} Gbit/s | drops: {}",
            ab / 1e6,
            bab / 1e9,
            ba / 1e6,
            bba / 1e9,
            dab + dba
        );
    }
}
