//! TED, tail early dropping (seed 002, Table 2): under congestion, drop the
//! *tails* of connections and keep their heads, by a per-worker cut-off
//! threshold on the bytes a connection has carried so far.
//!
//! Traffic is heavy-tailed: a few long connections carry most bytes, and
//! the information an analyser needs (handshake, request, response headers)
//! sits in the first bytes of each connection. So when a worker cannot keep
//! up, the cheapest packets to lose are those deep inside long connections.
//! The forwarder drops a packet when its connection has already carried
//! `threshold` bytes (both directions, counting dropped packets too, so the
//! threshold is a position in the connection, not a forwarded budget).
//!
//! # The controller
//!
//! A closed loop on the occupancy `q` (0..1) of the worker's input queue,
//! evaluated on a packet when `update_packets` packets have passed since
//! the last update, or `update_interval_ns` has (whichever comes first).
//! Not per packet: reading the queue's shared indices touches another
//! core's cache line, and the queue needs time to show the effect of a
//! change. At high rates the packet count sets the pace (one update per
//! 256 packets), at low rates the time does (a worker that slowed down is
//! noticed within 100 us of its next packet). AIMD:
//!
//! | condition | action |
//! |---|---|
//! | `q >= panic_watermark` | multiplicative decrease, always |
//! | `q >= high_watermark` and `q` not falling since the last update | multiplicative decrease: `t = max(min_bytes, t * decrease)`; from unlimited, `t = max_bytes` |
//! | `q >= high_watermark`, falling | hold (the last cut is taking effect) |
//! | `low_watermark < q < high_watermark` | hold |
//! | `q <= low_watermark` | additive increase: `t += increase_bytes`; above `max_bytes`, unlimited again |
//!
//! Why these choices:
//! * *Unlimited while the worker keeps up*: below the low watermark with
//!   the threshold back above `max_bytes`, TED drops nothing.
//! * *Multiplicative decrease, guarded by the trend*: a cut acts only on
//!   packets arriving after it; the queue still holds the backlog and
//!   drains at the worker's rate. Cutting again every update while the
//!   backlog drains would drive the threshold to `min_bytes` for every
//!   overload (over-reaction). So above the high watermark the threshold is
//!   only cut again when the queue is not shrinking (the previous cut was
//!   not enough), and unconditionally only near full (`panic_watermark`),
//!   where ring-full drops, which hit heads and tails alike, are imminent.
//! * *Additive increase*: recovery probes slowly (AIMD converges and is
//!   stable, as in TCP congestion control); from `min_bytes` to `max_bytes`
//!   takes `(max - min) / increase_bytes` updates.
//! * *Bounded*: `min_bytes` keeps at least the head of every connection
//!   (handshake, request, response headers); `max_bytes` is where the cut
//!   starts and above which TED turns off.
//!
//! Priority packets (TCP SYN/FIN/RST, user priority filter) are never cut:
//! that is the forwarder's job ([`super::forwarder`]), the controller only
//! supplies the threshold.

/// Parameters of the TED controller (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct TedConfig {
    /// TED on (false: the threshold stays unlimited).
    pub enabled: bool,
    /// Queue fraction at or above which the threshold is cut (0.5).
    pub high_watermark: f64,
    /// Queue fraction at or below which the threshold grows back (0.2).
    pub low_watermark: f64,
    /// Queue fraction at or above which the cut ignores the trend (0.9).
    pub panic_watermark: f64,
    /// First cut from unlimited, and the ceiling above which TED turns off (16 MiB).
    pub max_bytes: u64,
    /// Floor of the threshold (4 KiB).
    pub min_bytes: u64,
    /// Multiplicative decrease factor in (0, 1) (0.5).
    pub decrease: f64,
    /// Additive increase per update (32 KiB).
    pub increase_bytes: u64,
    /// Update at least every this many packets (256).
    pub update_packets: u32,
    /// ... or when this much time has passed since the last update (100 us).
    pub update_interval_ns: u64,
}

impl Default for TedConfig {
    fn default() -> Self {
        TedConfig {
            enabled: true,
            high_watermark: 0.5,
            low_watermark: 0.2,
            panic_watermark: 0.9,
            max_bytes: 16 << 20,
            min_bytes: 4096,
            decrease: 0.5,
            increase_bytes: 32 << 10,
            update_packets: 256,
            update_interval_ns: 100_000,
        }
    }
}

impl TedConfig {
    /// Check the parameters; one-line error.
    pub fn validate(&self) -> Result<(), String> {
        let f = |x: f64| (0.0..=1.0).contains(&x);
        if !(f(self.low_watermark) && f(self.high_watermark) && f(self.panic_watermark)) {
            return Err("ted: watermarks must be fractions in [0, 1]".into());
        }
        if !(self.low_watermark < self.high_watermark
            && self.high_watermark <= self.panic_watermark)
        {
            return Err(format!(
                "ted: watermarks must satisfy low < high <= panic (got {} {} {})",
                self.low_watermark, self.high_watermark, self.panic_watermark
            ));
        }
        if self.min_bytes == 0 || self.min_bytes > self.max_bytes {
            return Err(format!(
                "ted: need 0 < min_bytes <= max_bytes (got {} and {})",
                self.min_bytes, self.max_bytes
            ));
        }
        if !(self.decrease > 0.0 && self.decrease < 1.0) {
            return Err(format!(
                "ted: decrease must be in (0, 1) (got {})",
                self.decrease
            ));
        }
        if self.increase_bytes == 0 || self.update_packets == 0 {
            return Err("ted: increase_bytes and update_packets must be > 0".into());
        }
        Ok(())
    }
}

/// Controller counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct TedStats {
    pub updates: u64,
    pub decreases: u64,
    pub increases: u64,
}

/// The controller of one worker.
#[derive(Clone, Debug)]
pub struct Ted {
    cfg: TedConfig,
    /// Current cut-off in bytes; `u64::MAX` = unlimited.
    threshold: u64,
    last_q: f64,
    pkts_since: u32,
    last_update_ns: u64,
    stats: TedStats,
}

/// The threshold value meaning "no cut".
pub const UNLIMITED: u64 = u64::MAX;

impl Ted {
    pub fn new(cfg: TedConfig) -> Ted {
        Ted {
            cfg,
            threshold: UNLIMITED,
            last_q: 0.0,
            pkts_since: 0,
            last_update_ns: 0,
            stats: TedStats::default(),
        }
    }

    pub fn config(&self) -> &TedConfig {
        &self.cfg
    }

    /// Current threshold, `None` when unlimited.
    pub fn threshold(&self) -> Option<u64> {
        (self.threshold != UNLIMITED).then_some(self.threshold)
    }

    /// Raw threshold (`UNLIMITED` = no cut).
    #[inline(always)]
    pub fn threshold_raw(&self) -> u64 {
        self.threshold
    }

    pub fn stats(&self) -> TedStats {
        self.stats
    }

    /// Count one packet; true when the controller should be updated now
    /// (then call [`Ted::update`] with the queue occupancy).
    #[inline(always)]
    pub fn tick(&mut self, now_ns: u64) -> bool {
        // Also due when TED is off: the forwarder's periodic housekeeping
        // (flow-table aging) runs on the same tick; update() is then a no-op.
        self.pkts_since += 1;
        self.pkts_since >= self.cfg.update_packets
            || now_ns.wrapping_sub(self.last_update_ns) >= self.cfg.update_interval_ns
    }

    /// Does a packet of a connection that has carried `bytes_before` bytes
    /// before it fall in the tail being cut?
    #[inline(always)]
    pub fn cuts(&self, bytes_before: u64) -> bool {
        bytes_before >= self.threshold
    }

    /// One controller step with queue occupancy `q` in [0, 1].
    pub fn update(&mut self, q: f64, now_ns: u64) {
        self.pkts_since = 0;
        self.last_update_ns = now_ns;
        if !self.cfg.enabled {
            self.threshold = UNLIMITED;
            return;
        }
        self.stats.updates += 1;
        let c = &self.cfg;
        let falling = q < self.last_q;
        if q >= c.panic_watermark || (q >= c.high_watermark && !falling) {
            self.threshold = if self.threshold == UNLIMITED {
                c.max_bytes
            } else {
                ((self.threshold as f64 * c.decrease) as u64).max(c.min_bytes)
            };
            self.stats.decreases += 1;
        } else if q <= c.low_watermark && self.threshold != UNLIMITED {
            self.threshold = self.threshold.saturating_add(c.increase_bytes);
            if self.threshold > c.max_bytes {
                self.threshold = UNLIMITED;
            }
            self.stats.increases += 1;
        }
        self.last_q = q;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fluid model of one worker: arrivals of connections with a
    /// heavy-tailed byte count, a queue of `cap` packets drained at `mu`
    /// packets per step; TED drops packets whose connection is past the
    /// threshold. Returns (threshold after each step, queue fraction after
    /// each step).
    fn simulate(
        ted: &mut Ted,
        steps: usize,
        lambda: impl Fn(usize) -> f64,
    ) -> Vec<(Option<u64>, f64)> {
        let cap = 4096.0;
        let mu = 100.0; // packets per step the worker takes
        let mut q: f64 = 0.0;
        let mut out = vec![];
        for s in 0..steps {
            // Share of offered packets that lie before the threshold in
            // their connection; heavy-tailed sizes make it grow slowly with
            // the threshold: (t / 16 MiB)^0.35 (about 5% at 4 KiB).
            let keep = match ted.threshold() {
                None => 1.0,
                Some(t) => (t as f64 / (16u64 << 20) as f64).powf(0.35).min(1.0),
            };
            let arrivals = lambda(s) * keep;
            q = (q + arrivals - mu).clamp(0.0, cap);
            let now = (s as u64 + 1) * 100_000;
            assert!(ted.tick(now), "interval elapsed: update due");
            ted.update(q / cap, now);
            out.push((ted.threshold(), q / cap));
        }
        out
    }

    #[test]
    fn unlimited_while_keeping_up() {
        let mut ted = Ted::new(TedConfig::default());
        let r = simulate(&mut ted, 1000, |_| 90.0);
        assert!(r.iter().all(|(t, _)| t.is_none()));
        assert_eq!(ted.stats().decreases, 0);
    }

    #[test]
    fn falls_under_overload_and_recovers() {
        let cfg = TedConfig::default();
        let mut ted = Ted::new(cfg);
        // 10x overload for 2000 steps, then 0.5x.
        let r = simulate(&mut ted, 6000, |s| if s < 2000 { 1000.0 } else { 50.0 });
        let over = &r[..2000];
        let first_cut = over
            .iter()
            .position(|(t, _)| t.is_some())
            .expect("cuts under overload");
        assert!(first_cut < 100, "reacts fast: {first_cut}");
        // Threshold falls well below the initial cut and stays bounded.
        let min_t = over.iter().filter_map(|(t, _)| *t).min().unwrap();
        assert!(min_t < cfg.max_bytes / 16, "{min_t}");
        assert!(min_t >= cfg.min_bytes);
        // In the second half of the overload the queue is controlled: it
        // does not sit at full (ring-full drops would hit heads).
        let full_steps = over[1000..].iter().filter(|(_, q)| *q > 0.99).count();
        assert!(full_steps < 50, "queue full for {full_steps} steps");
        // After load falls, TED turns off again.
        let after = &r[2000..];
        let back = after
            .iter()
            .position(|(t, _)| t.is_none())
            .expect("recovers to unlimited");
        assert!(back < 3000, "{back}");
        assert!(r.last().unwrap().0.is_none());
    }

    #[test]
    fn multiplicative_decrease_additive_increase_bounds() {
        let cfg = TedConfig::default();
        let mut ted = Ted::new(cfg);
        ted.update(0.6, 1);
        assert_eq!(ted.threshold(), Some(cfg.max_bytes));
        ted.update(0.7, 2);
        assert_eq!(ted.threshold(), Some(cfg.max_bytes / 2));
        // above high but falling: hold
        ted.update(0.65, 3);
        assert_eq!(ted.threshold(), Some(cfg.max_bytes / 2));
        // panic: cut even though falling
        ted.update(0.95, 4);
        ted.update(0.92, 5);
        assert_eq!(ted.threshold(), Some(cfg.max_bytes / 8));
        for i in 0..100 {
            ted.update(0.95, 6 + i);
        }
        assert_eq!(ted.threshold(), Some(cfg.min_bytes));
        // between watermarks: hold
        ted.update(0.3, 200);
        assert_eq!(ted.threshold(), Some(cfg.min_bytes));
        ted.update(0.1, 201);
        assert_eq!(ted.threshold(), Some(cfg.min_bytes + cfg.increase_bytes));
        assert!(ted.cuts(cfg.min_bytes + cfg.increase_bytes));
        assert!(!ted.cuts(cfg.min_bytes + cfg.increase_bytes - 1));
        let steps = (cfg.max_bytes - cfg.min_bytes) / cfg.increase_bytes + 1;
        for i in 0..steps {
            ted.update(0.0, 300 + i);
        }
        assert_eq!(ted.threshold(), None);
        assert!(!ted.cuts(u64::MAX - 1));
    }

    #[test]
    fn tick_every_n_packets_or_interval() {
        let cfg = TedConfig {
            update_packets: 4,
            update_interval_ns: 1000,
            ..TedConfig::default()
        };
        let mut ted = Ted::new(cfg);
        ted.update(0.0, 0);
        assert!(!ted.tick(1));
        assert!(!ted.tick(2));
        assert!(!ted.tick(3));
        assert!(ted.tick(4), "4th packet");
        ted.update(0.0, 4);
        assert!(ted.tick(1004), "interval");
        let mut off = Ted::new(TedConfig {
            enabled: false,
            ..cfg
        });
        for i in 0..100 {
            if off.tick(i * 10_000) {
                off.update(1.0, i * 10_000);
            }
            assert_eq!(off.threshold(), None, "TED off never cuts");
        }
        assert_eq!(off.stats().decreases, 0);
    }

    #[test]
    fn validate() {
        assert!(TedConfig::default().validate().is_ok());
        let bad = TedConfig {
            low_watermark: 0.6,
            ..TedConfig::default()
        };
        assert!(bad.validate().unwrap_err().contains("low < high"));
    }
}
