//! `linerate count --xdp`: the in-kernel counter (an XDP program in native
//! mode, per-CPU counters, frames dropped after counting) on an interface,
//! read once a second by the supervising [`Watch`] until a stop condition.
//! Nothing runs per packet in user space.

use super::{Until, XdpCountTick};
use crate::event::Event;
use crate::poll::Watch;
use linerate_io::xdp::count::{CountStats, XdpCount};
use linerate_io::xdp::AttachMode;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

/// One second of the count: seconds since the start, the totals, the rate
/// over the second.
pub struct XdpSecond<'a> {
    pub t: f64,
    pub tick: XdpCountTick<'a>,
    pub pps: f64,
}

/// How an in-kernel count ended: its totals, and the error that ended it
/// (the interface gone or down), if one did.
pub struct XdpCounted {
    pub stats: CountStats,
    pub elapsed_s: f64,
    pub error: Option<String>,
}

/// Attach the counter to `ifname` and watch it until `stop`, or a limit in
/// `until` (deadline, packets, idle after the first packet); `on` once a
/// second. Errors before the count starts are `Err`.
pub fn run(
    ifname: &str,
    until: Until,
    stop: &AtomicBool,
    on: &mut dyn FnMut(Event<'_, XdpSecond<'_>>),
) -> Result<XdpCounted, String> {
    let e = |e: linerate_io::PortError| format!("--xdp on {ifname}: {e}");
    let sink = XdpCount::attach(ifname, AttachMode::Native, false).map_err(e)?;
    on(Event::Opened(format!(
        "count --xdp: counting in the kernel on {ifname} (XDP, native; frames dropped after counting)"
    )));
    let t0 = Instant::now();
    let mut links = linerate_io::link::watch_interfaces(&[ifname]).map_err(e)?;
    let mut last = sink.read().map_err(e)?;
    let (mut prev, mut last_change) = (last.packets, t0);
    let mut error = None;
    let mut w = Watch::new(stop, until.deadline);
    while let Some(second) = w.next() {
        // An interface gone or down ends the count: the total, then the error.
        if let Some(err) = links.iter_mut().find_map(|l| l.tick().err()) {
            error = Some(err.to_string());
            break;
        }
        let now = Instant::now();
        let s = sink.read().map_err(e)?;
        if s.packets != prev {
            (prev, last_change) = (s.packets, now);
        }
        if let Some(dt) = second {
            on(Event::Tick(&XdpSecond {
                t: (now - t0).as_secs_f64(),
                tick: XdpCountTick {
                    port: ifname,
                    stats: &s,
                },
                pps: s.packets.saturating_sub(last.packets) as f64 / dt,
            }));
            last = s;
        }
        let idle_over = until
            .idle
            .is_some_and(|i| s.packets > 0 && now - last_change >= i);
        if until.packets.is_some_and(|m| s.packets >= m) || idle_over {
            break;
        }
    }
    Ok(XdpCounted {
        stats: sink.read().map_err(e)?,
        elapsed_s: t0.elapsed().as_secs_f64(),
        error,
    })
}
