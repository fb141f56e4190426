//! A whole `linerate fwd --mode xdp` run: an XDP program on both interfaces
//! forwards in the kernel (devmap redirect, the "kernel module" approach);
//! this side attaches it, reads its per-CPU counters once a second,
//! watches both links (an interface gone or down ends the run: the
//! account, then the error) and detaches it before the final account.

use super::MacRewrite;
use crate::event::Report;
use crate::metrics::{Exposition, Publish};
use crate::poll::Watch;
use linerate_io::xdp::fwd::{MacRewrite as XdpRewrite, XdpFwd, XdpFwdCounters, XdpFwdDir};
use linerate_io::xdp::AttachMode;
use serde_json::{json, Value};
use std::sync::atomic::AtomicBool;
use std::time::Instant;

/// The in-kernel forwarder between two interfaces.
#[derive(Clone, Debug)]
pub struct XdpFwdConfig {
    /// The interfaces of ports A and B.
    pub if_a: String,
    pub if_b: String,
    pub mode: AttachMode,
    pub rewrite_a2b: Option<MacRewrite>,
    pub rewrite_b2a: Option<MacRewrite>,
    pub duration: Option<f64>,
}

/// What the caller hears: the program attached, then once a second its
/// counters.
pub type Event<'a> = crate::event::Event<'a, XdpTick>;

/// One interval of the in-kernel forwarder: its counters now and a second
/// earlier.
pub struct XdpTick {
    pub t: f64,
    pub dt: f64,
    /// The interfaces of ports A and B.
    pub ports: [String; 2],
    pub now: XdpFwdCounters,
    pub last: XdpFwdCounters,
}

/// The final account, from the program's counters read just before it was
/// detached. Not an [`crate::event::Account`]: the per-CPU counters are
/// read while frames may still be between the program's RX and redirect
/// counts, so the balance is shown per direction, not enforced.
pub struct XdpFinished {
    pub mode: AttachMode,
    pub elapsed_s: f64,
    pub counters: XdpFwdCounters,
    /// A link that went away or down, if one ended the run.
    pub error: Option<String>,
}

/// Attach, report once a second until `stop` or the duration, detach.
pub fn run(
    cfg: &XdpFwdConfig,
    stop: &AtomicBool,
    on: &mut dyn FnMut(Event<'_>),
) -> Result<XdpFinished, String> {
    let (ia, ib) = (cfg.if_a.as_str(), cfg.if_b.as_str());
    let rw = (cfg.rewrite_a2b.is_some() || cfg.rewrite_b2a.is_some()).then_some(XdpRewrite {
        a_to_b: cfg.rewrite_a2b,
        b_to_a: cfg.rewrite_b2a,
    });
    let fwd = XdpFwd::start(ia, ib, cfg.mode, rw).map_err(|e| e.to_string())?;
    on(Event::Opened(format!(
        "xdp forwarder attached to {ia} and {ib} ({} mode, devmap redirect)",
        cfg.mode.name()
    )));
    let t0 = Instant::now();
    let counters = |f: &XdpFwd| f.try_counters().map_err(|e| e.to_string());
    let mut last = counters(&fwd)?;
    let mut links = linerate_io::link::watch_interfaces(&[ia, ib]).map_err(|e| e.to_string())?;
    let mut error = None;
    let mut w = Watch::new(stop, crate::poll::deadline(t0, cfg.duration));
    while let Some(second) = w.next() {
        if let Some(e) = links.iter_mut().find_map(|l| l.tick().err()) {
            error = Some(e.to_string());
            break;
        }
        if let Some(dt) = second {
            let now = counters(&fwd)?;
            let tick = XdpTick {
                t: t0.elapsed().as_secs_f64(),
                dt,
                ports: [ia.to_string(), ib.to_string()],
                now,
                last,
            };
            on(Event::Tick(&tick));
            last = now;
        }
    }
    let c = counters(&fwd)?;
    drop(fwd); // detach before reporting: nothing more is counted after this
    Ok(XdpFinished {
        mode: cfg.mode,
        elapsed_s: t0.elapsed().as_secs_f64(),
        counters: c,
        error,
    })
}

impl XdpTick {
    /// Per direction: forwarded pps, received bit/s, drops in the interval.
    fn rates(&self) -> [(f64, f64, u64); 2] {
        let dt = self.dt;
        let rate = |n: &XdpFwdDir, l: &XdpFwdDir| {
            (
                (n.fwd - l.fwd) as f64 / dt,
                (n.rx_bytes - l.rx_bytes) as f64 * 8.0 / dt,
                n.drops() - l.drops(),
            )
        };
        [
            rate(&self.now.a_to_b, &self.last.a_to_b),
            rate(&self.now.b_to_a, &self.last.b_to_a),
        ]
    }
}

impl Report for XdpTick {
    fn json(&self) -> Value {
        let [(ab, bab, dab), (ba, bba, dba)] = self.rates();
        json!({"t": self.t, "a2b": {"fwd_pps": ab, "rx_bps": bab, "drops": dab},
               "b2a": {"fwd_pps": ba, "rx_bps": bba, "drops": dba}})
    }
    fn text(&self) -> String {
        let [(ab, bab, dab), (ba, bba, dba)] = self.rates();
        format!(
            "{:>7.1}s  A->B {:>8.3} Mpps {:>7.3} Gbit/s | B->A {:>8.3} Mpps {:>7.3} Gbit/s | drops: {}",
            self.t,
            ab / 1e6,
            bab / 1e9,
            ba / 1e6,
            bba / 1e9,
            dab + dba
        )
    }
}

impl Publish for XdpTick {
    fn metrics(&self, m: &mut Exposition) {
        let [a, b] = [self.ports[0].as_str(), self.ports[1].as_str()];
        let c = &self.now;
        for (stage, rx, tx, d) in [("a_to_b", a, b, &c.a_to_b), ("b_to_a", b, a, &c.b_to_a)] {
            m.stage_counts(
                &[("stage", stage)],
                (d.rx, d.rx_bytes),
                (d.fwd, None),
                &[
                    ("redirect_failed", d.drop_redirect),
                    ("malformed", d.drop_malformed),
                ],
            );
            m.port(rx, "rx", d.rx, Some(d.rx_bytes));
            m.port(tx, "tx", d.fwd, None);
        }
    }
}

fn dir_json(d: &XdpFwdDir) -> Value {
    json!({
        "received": d.rx, "received_bytes": d.rx_bytes, "forwarded": d.fwd, "dropped": d.drops(),
        "drops": {"redirect_failed": d.drop_redirect, "malformed": d.drop_malformed},
        "balanced": d.rx == d.fwd + d.drops(),
    })
}

impl Report for XdpFinished {
    fn json(&self) -> Value {
        let c = &self.counters;
        json!({
            "mode": "xdp", "xdp_mode": self.mode.name(), "elapsed_s": self.elapsed_s,
            "directions": [
                {"direction": "A->B", "account": dir_json(&c.a_to_b)},
                {"direction": "B->A", "account": dir_json(&c.b_to_a)},
            ],
            "other_interface_frames": c.other,
        })
    }

    fn text(&self) -> String {
        let c = &self.counters;
        let mut o = format!(
            "final account after {:.2} s (from the XDP program's per-CPU counters):\n",
            self.elapsed_s
        );
        o += &format!(
            "  {:<6} {:>12} {:>12} {:>10}  {:<28} received = forwarded + drops\n",
            "dir", "received", "forwarded", "dropped", "drops by reason"
        );
        for (n, d) in [("A->B", &c.a_to_b), ("B->A", &c.b_to_a)] {
            let mut by = Vec::new();
            if d.drop_redirect > 0 {
                by.push(format!("redirect_failed={}", d.drop_redirect));
            }
            if d.drop_malformed > 0 {
                by.push(format!("malformed={}", d.drop_malformed));
            }
            o += &format!(
                "  {:<6} {:>12} {:>12} {:>10}  {:<28} {}\n",
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
        o
    }
}
