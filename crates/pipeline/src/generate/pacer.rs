//! Rate control. A [`Pacer`] keeps an ABSOLUTE departure schedule computed
//! from the start time and the cumulative cost sent so far (no relative
//! sleeps, so no drift): packet k may leave at
//! `start + cost(packets 0..k) * ns_per_unit` (CBR), at the same time as the
//! first packet of its burst (burst), or at `start + sum of k exponential
//! gaps` (Poisson, gap mean = the CBR gap of the previous packet).
//! Cost is 1 per packet for pps rates, or bits on the wire for bit rates
//! (`l1`: (frame + 4 FCS + 8 preamble + 12 IFG) * 8, `l2`: (frame + 4 FCS) * 8).
//! It never sleeps: callers ask [`Pacer::ready`] with their clock's `now`.

use super::field::SplitMix64;
use super::profile::{Accounting, PaceMode, RateSpec};

#[derive(Clone, Debug)]
pub struct Pacer {
    /// None = unlimited.
    ns_per_unit: Option<f64>,
    per_bit: bool,
    l1: bool,
    mode: PaceMode,
    burst: u64,
    rng: SplitMix64,
    start_ns: Option<u64>,
    /// Cumulative cost of packets taken.
    cum: u64,
    /// Cumulative cost at the start of the current burst.
    burst_cum: u64,
    sent: u64,
    /// Poisson: absolute next departure (ns since start, f64).
    poisson_next: f64,
    limit: Option<u64>,
    end_ns: Option<u64>,
    duration_ns: Option<u64>,
}

impl Pacer {
    /// Build from a rate spec. `count` limits packets, `duration_ns` limits
    /// departures to `[start, start + duration)`.
    pub fn new(
        r: &RateSpec,
        count: Option<u64>,
        duration_ns: Option<u64>,
    ) -> Result<Pacer, String> {
        let (rate, per_bit) = match (r.pps, r.bps) {
            (Some(_), Some(_)) => return Err("rate: give pps or bps, not both".into()),
            (Some(p), None) => (Some(p), false),
            (None, Some(b)) => (Some(b), true),
            (None, None) => (None, false),
        };
        if let Some(x) = rate {
            if !(x.is_finite() && x > 0.0) {
                return Err(format!("rate: {x} is not a positive rate"));
            }
        }
        if rate.is_none() && r.mode != PaceMode::Cbr {
            return Err("rate: poisson and burst modes need pps or bps".into());
        }
        let burst = match (r.mode, r.burst) {
            (PaceMode::Burst, Some(n)) if n >= 1 => n as u64,
            (PaceMode::Burst, _) => return Err("rate: burst mode needs burst >= 1".into()),
            _ => 1,
        };
        Ok(Pacer {
            ns_per_unit: rate.map(|x| 1e9 / x),
            per_bit,
            l1: r.accounting == Accounting::L1,
            mode: r.mode,
            burst,
            rng: SplitMix64(r.seed.unwrap_or(1)),
            start_ns: None,
            cum: 0,
            burst_cum: 0,
            sent: 0,
            poisson_next: 0.0,
            limit: count.or(r.count),
            end_ns: None,
            duration_ns,
        })
    }

    /// Fix the schedule's origin (first call wins; `ready` calls it too).
    pub fn start(&mut self, now_ns: u64) {
        if self.start_ns.is_none() {
            self.start_ns = Some(now_ns);
            self.end_ns = self.duration_ns.map(|d| now_ns.saturating_add(d));
        }
    }

    /// Cost of one frame of `len` bytes (without FCS).
    #[inline(always)]
    fn cost(&self, len: u32) -> u64 {
        if !self.per_bit {
            1
        } else if self.l1 {
            (len as u64 + 24) * 8
        } else {
            (len as u64 + 4) * 8
        }
    }

    /// Departure time of the next packet, None when the stream has ended
    /// (count reached or next departure at/after the duration's end).
    #[inline]
    pub fn next_departure_ns(&self) -> Option<u64> {
        if self.limit.is_some_and(|l| self.sent >= l) {
            return None;
        }
        let start = self.start_ns.unwrap_or(0);
        let t = match self.ns_per_unit {
            None => start,
            Some(u) => {
                let off = match self.mode {
                    PaceMode::Cbr => self.cum as f64 * u,
                    PaceMode::Burst => self.burst_cum as f64 * u,
                    PaceMode::Poisson => self.poisson_next,
                };
                start.saturating_add(off.ceil() as u64)
            }
        };
        if self.end_ns.is_some_and(|e| t >= e) {
            return None;
        }
        Some(t)
    }

    /// May the next packet leave at `now_ns`?
    #[inline(always)]
    pub fn ready(&mut self, now_ns: u64) -> bool {
        self.start(now_ns);
        match self.next_departure_ns() {
            Some(t) => {
                // unlimited streams still stop at the duration's end
                t <= now_ns
                    && !self
                        .end_ns
                        .is_some_and(|e| now_ns >= e && self.ns_per_unit.is_none())
            }
            None => false,
        }
    }

    /// The packet that was ready leaves now, `len` bytes long (without FCS).
    #[inline(always)]
    pub fn take(&mut self, len: u32) {
        let c = self.cost(len);
        self.sent += 1;
        self.cum += c;
        match self.mode {
            PaceMode::Cbr => {}
            PaceMode::Burst => {
                if self.sent.is_multiple_of(self.burst) {
                    self.burst_cum = self.cum;
                }
            }
            PaceMode::Poisson => {
                if let Some(u) = self.ns_per_unit {
                    // exponential gap with mean c * u: -ln(U) * mean
                    self.poisson_next += -self.rng.unit_open().ln() * c as f64 * u;
                }
            }
        }
    }

    /// True once the stream sent its count or its duration is over at `now_ns`.
    pub fn done(&self, now_ns: u64) -> bool {
        if self.start_ns.is_none() {
            return self.limit == Some(0);
        }
        if self.ns_per_unit.is_none() && self.end_ns.is_some_and(|e| now_ns >= e) {
            return true;
        }
        self.next_departure_ns().is_none()
    }

    /// Packets taken so far.
    pub fn sent(&self) -> u64 {
        self.sent
    }

    /// Change the rate while running (scripts): `pps` None = unlimited.
    /// The schedule restarts at `now_ns` (no catch-up burst, no gap);
    /// counts and the duration's end are kept.
    pub fn set_pps(&mut self, pps: Option<f64>, now_ns: u64) -> Result<(), String> {
        if let Some(x) = pps {
            if !(x.is_finite() && x > 0.0) {
                return Err(format!("rate: {x} is not a positive rate"));
            }
        }
        self.per_bit = false;
        self.ns_per_unit = pps.map(|x| 1e9 / x);
        self.rebase(now_ns);
        Ok(())
    }

    /// Restart the schedule at `now_ns` (after a pause).
    pub fn rebase(&mut self, now_ns: u64) {
        if self.start_ns.is_none() {
            self.start(now_ns);
        }
        self.start_ns = Some(now_ns);
        self.cum = 0;
        self.burst_cum = 0;
        self.poisson_next = 0.0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(pps: f64, mode: PaceMode) -> RateSpec {
        RateSpec {
            pps: Some(pps),
            mode,
            ..Default::default()
        }
    }

    /// Drive a pacer with a fake clock advancing `tick` ns; returns departure times.
    fn drive(p: &mut Pacer, t0: u64, until: u64, tick: u64, len: u32) -> Vec<u64> {
        let mut out = vec![];
        let mut now = t0;
        while now < until {
            while p.ready(now) {
                p.take(len);
                out.push(now);
            }
            now += tick;
        }
        out
    }

    #[test]
    fn cbr_1mpps_for_one_second_is_exact() {
        let mut p = Pacer::new(&spec(1e6, PaceMode::Cbr), None, Some(1_000_000_000)).unwrap();
        let d = drive(&mut p, 5_000, 2_000_000_000, 37, 60);
        assert!(d.len().abs_diff(1_000_000) <= 1, "{}", d.len());
        assert!(p.done(2_000_000_000));
        // no drift: packet k leaves within one tick after 5000 + k*1000
        for (k, t) in d.iter().enumerate().step_by(9973) {
            let due = 5_000 + k as u64 * 1000;
            assert!(*t >= due && *t < due + 37, "k {k} t {t}");
        }
    }

    #[test]
    fn cbr_bit_rate_counts_l1_and_l2() {
        // 60-byte frames at 1 Gbit/s L1 = 84 B * 8 = 672 ns apart -> 1_488_095 pps
        let r = RateSpec {
            bps: Some(1e9),
            ..Default::default()
        };
        let mut p = Pacer::new(&r, None, Some(1_000_000_000)).unwrap();
        let n = drive(&mut p, 0, 1_100_000_000, 100, 60).len();
        assert!(n.abs_diff(1_488_096) <= 1, "{n}");
        let r = RateSpec {
            bps: Some(1e9),
            accounting: Accounting::L2,
            ..Default::default()
        };
        let mut p = Pacer::new(&r, None, Some(1_000_000_000)).unwrap();
        let n = drive(&mut p, 0, 1_100_000_000, 100, 60).len();
        assert!(n.abs_diff(1_953_125) <= 1, "{n}");
    }

    #[test]
    fn count_limit() {
        let mut p = Pacer::new(&spec(1e6, PaceMode::Cbr), Some(10), None).unwrap();
        assert_eq!(drive(&mut p, 0, 1_000_000, 10, 60).len(), 10);
        assert!(p.done(0));
        let mut p = Pacer::new(&RateSpec::default(), Some(5), None).unwrap();
        let mut n = 0;
        while p.ready(0) {
            p.take(60);
            n += 1;
        }
        assert_eq!(n, 5);
    }

    #[test]
    fn bursts_are_exact() {
        let r = RateSpec {
            pps: Some(1e6),
            mode: PaceMode::Burst,
            burst: Some(8),
            ..Default::default()
        };
        let mut p = Pacer::new(&r, None, Some(1_000_000)).unwrap();
        let d = drive(&mut p, 0, 2_000_000, 1, 60);
        assert_eq!(d.len(), 1000);
        for (k, t) in d.iter().enumerate() {
            // burst j = k / 8 leaves at j * 8 us, all 8 back to back
            assert_eq!(*t, (k as u64 / 8) * 8_000, "k {k}");
        }
    }

    #[test]
    fn poisson_mean_and_exponential_gaps() {
        let mut p = Pacer::new(&spec(1e6, PaceMode::Poisson), Some(1_000_000), None).unwrap();
        p.start(0);
        // read the schedule directly (fake clock jumps to each departure)
        let mut times = Vec::with_capacity(1_000_000);
        while let Some(t) = p.next_departure_ns() {
            assert!(p.ready(t));
            p.take(60);
            times.push(t);
        }
        assert_eq!(times.len(), 1_000_000);
        let span = (*times.last().unwrap() - times[0]) as f64;
        let rate = (times.len() - 1) as f64 / span * 1e9;
        assert!((rate / 1e6 - 1.0).abs() < 0.01, "rate {rate}");
        let gaps: Vec<f64> = times.windows(2).map(|w| (w[1] - w[0]) as f64).collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        let var = gaps.iter().map(|g| (g - mean) * (g - mean)).sum::<f64>() / gaps.len() as f64;
        let cv = var.sqrt() / mean;
        assert!((cv - 1.0).abs() < 0.02, "cv {cv}");
        // P(gap > mean) = e^-1 for an exponential
        let over = gaps.iter().filter(|g| **g > mean).count() as f64 / gaps.len() as f64;
        assert!((over - (-1f64).exp()).abs() < 0.01, "{over}");
    }

    #[test]
    fn bad_rates() {
        let r = RateSpec {
            pps: Some(1.0),
            bps: Some(1.0),
            ..Default::default()
        };
        assert!(Pacer::new(&r, None, None).is_err());
        assert!(Pacer::new(&spec(-1.0, PaceMode::Cbr), None, None).is_err());
        let r = RateSpec {
            pps: Some(1.0),
            mode: PaceMode::Burst,
            ..Default::default()
        };
        assert!(Pacer::new(&r, None, None).is_err());
    }
}
