//! Which clock stamps a packet's arrival, and how it becomes
//! `CLOCK_MONOTONIC` nanoseconds, the clock of the generator's TX time.

use linerate_io::time::{clock_ns, clock_res_ns};

/// `CLOCK_MONOTONIC` now, in nanoseconds (what a caller passes as
/// `rx_now_ns`, once per batch: it is a vDSO call, not a syscall).
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// `CLOCK_REALTIME - CLOCK_MONOTONIC` in ns and the uncertainty of that
/// measurement (half the width of the tightest MONOTONIC bracket around a
/// REALTIME read, best of 32 tries).
pub fn measure_realtime_offset() -> (i64, u64) {
    let mut best = (0i64, u64::MAX);
    for _ in 0..32 {
        let m0 = clock_ns(libc::CLOCK_MONOTONIC);
        let r = clock_ns(libc::CLOCK_REALTIME);
        let m1 = clock_ns(libc::CLOCK_MONOTONIC);
        let half = (m1 - m0) / 2;
        if half < best.1 {
            best = (r as i64 - (m0 + half) as i64, half);
        }
    }
    best
}

/// How RX times are taken and turned into `CLOCK_MONOTONIC` ns.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Clock {
    /// Per-packet kernel timestamps in `CLOCK_REALTIME` (TPACKET_V3 ports,
    /// `PortInfo::clock == "kernel-realtime"`), converted with
    /// `rx_mono = ts - offset_ns`. A packet without a timestamp (0) falls
    /// back to the batch's `rx_now_ns`.
    KernelRealtime {
        /// `CLOCK_REALTIME - CLOCK_MONOTONIC` measured at start.
        offset_ns: i64,
        /// Uncertainty of `offset_ns`.
        offset_err_ns: u64,
    },
    /// No per-packet timestamps (AF_XDP, mmsg, mem): every packet of a
    /// batch gets the `rx_now_ns` the caller read once for that batch.
    Monotonic,
    /// Per-packet TSC timestamps (`PortInfo::clock == "tsc"`), converted with
    /// `mono0 + (tsc - tsc0) * 1e9 / hz`.
    Tsc { hz: f64, tsc0: u64, mono0: u64 },
}

impl Clock {
    /// The clock for a port whose `PortInfo::clock` is `port_clock`
    /// ("kernel-realtime", "tsc"; anything else, e.g. "none" or "file",
    /// uses user-space `CLOCK_MONOTONIC` per batch). Measures the offset or
    /// TSC rate now (the TSC takes 50 ms once per process).
    pub fn for_port(port_clock: &str) -> Clock {
        match port_clock {
            "kernel-realtime" => Clock::kernel_realtime(),
            "tsc" => Clock::tsc(),
            _ => Clock::Monotonic,
        }
    }

    /// [`Clock::KernelRealtime`] with the offset measured now.
    pub fn kernel_realtime() -> Clock {
        let (offset_ns, offset_err_ns) = measure_realtime_offset();
        Clock::KernelRealtime {
            offset_ns,
            offset_err_ns,
        }
    }

    /// [`Clock::Tsc`] calibrated now.
    pub fn tsc() -> Clock {
        let hz = linerate_io::time::tsc_hz();
        let tsc0 = linerate_io::time::rdtsc();
        let mono0 = monotonic_ns();
        Clock::Tsc { hz, tsc0, mono0 }
    }

    /// Measure the REALTIME-MONOTONIC offset again (call e.g. once a second
    /// so that an NTP step of the realtime clock is followed); no-op for
    /// the other clocks.
    pub fn refresh(&mut self) {
        if let Clock::KernelRealtime { .. } = self {
            *self = Clock::kernel_realtime();
        }
    }

    /// RX time of one packet in `CLOCK_MONOTONIC` ns, from its port
    /// timestamp `ts_ns` and the batch's `rx_now_ns`. Returns the time and
    /// whether a per-packet timestamp was used.
    #[inline(always)]
    pub fn rx_mono(&self, ts_ns: u64, rx_now_ns: u64) -> (u64, bool) {
        match *self {
            Clock::Monotonic => (rx_now_ns, false),
            _ if ts_ns == 0 => (rx_now_ns, false),
            Clock::KernelRealtime { offset_ns, .. } => {
                ((ts_ns as i64).wrapping_sub(offset_ns) as u64, true)
            }
            Clock::Tsc { hz, tsc0, mono0 } => {
                let d = ts_ns.wrapping_sub(tsc0) as i64 as f64 * 1e9 / hz;
                ((mono0 as i64).wrapping_add(d as i64) as u64, true)
            }
        }
    }

    /// Short name for JSON: "kernel-realtime", "monotonic-per-batch", "tsc".
    pub fn name(&self) -> &'static str {
        match self {
            Clock::KernelRealtime { .. } => "kernel-realtime",
            Clock::Monotonic => "monotonic-per-batch",
            Clock::Tsc { .. } => "tsc",
        }
    }

    /// One line for the report: where RX times come from, their
    /// resolution, and how they were converted.
    pub fn describe(&self) -> String {
        let tx = "tx: generator CLOCK_MONOTONIC";
        match *self {
            Clock::KernelRealtime {
                offset_ns,
                offset_err_ns,
            } => format!(
                "rx: kernel per-packet CLOCK_REALTIME timestamp ({} ns resolution) converted to \
                 CLOCK_MONOTONIC with REALTIME-MONOTONIC = {offset_ns} ns measured at start \
                 (+/- {offset_err_ns} ns); {tx}",
                clock_res_ns(libc::CLOCK_REALTIME)
            ),
            Clock::Monotonic => format!(
                "rx: user space CLOCK_MONOTONIC read once per batch ({} ns resolution, batch \
                 granularity: includes time the packet waited in the ring); {tx}",
                clock_res_ns(libc::CLOCK_MONOTONIC)
            ),
            Clock::Tsc { hz, .. } => format!(
                "rx: per-packet TSC ({:.3} GHz, {:.2} ns resolution) converted to CLOCK_MONOTONIC \
                 from one calibration at start; {tx}",
                hz / 1e9,
                1e9 / hz
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn realtime_to_monotonic() {
        let c = Clock::kernel_realtime();
        let Clock::KernelRealtime {
            offset_ns,
            offset_err_ns,
        } = c
        else {
            panic!("kind")
        };
        assert!(offset_err_ns < 1_000_000, "offset error {offset_err_ns} ns");
        let m0 = monotonic_ns();
        let r = clock_ns(libc::CLOCK_REALTIME);
        let m1 = monotonic_ns();
        let (conv, per_pkt) = c.rx_mono(r, 7);
        assert!(per_pkt);
        // The converted realtime read lies between the two monotonic reads
        // (up to the offset's uncertainty).
        let slack = offset_err_ns + 1_000;
        assert!(conv + slack >= m0 && conv <= m1 + slack, "{m0} {conv} {m1}");
        // Exact arithmetic on a known offset.
        let k = Clock::KernelRealtime {
            offset_ns: 1_000,
            offset_err_ns: 0,
        };
        assert_eq!(k.rx_mono(5_000, 9), (4_000, true));
        // No kernel timestamp: falls back to the batch time.
        assert_eq!(k.rx_mono(0, 9), (9, false));
        assert_eq!(Clock::Monotonic.rx_mono(5_000, 9), (9, false));
        assert!(offset_ns > 0);
        assert!(c.describe().contains("CLOCK_REALTIME"));
    }

    #[test]
    fn tsc_conversion() {
        let c = Clock::Tsc {
            hz: 2e9,
            tsc0: 1_000,
            mono0: 50_000,
        };
        assert_eq!(c.rx_mono(3_000, 0), (51_000, true));
        assert_eq!(Clock::for_port("none"), Clock::Monotonic);
        assert!(matches!(
            Clock::for_port("kernel-realtime"),
            Clock::KernelRealtime { .. }
        ));
    }
}
