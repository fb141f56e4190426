//! Time for every layer above `io`: the kernel's clocks read without a
//! system call (vDSO), and the time-stamp counter: cycles for per-stage
//! profiles and a cheap clock.
//!
//! These VMs have no hardware PMU, but the TSC is constant and invariant
//! (`constant_tsc nonstop_tsc` in /proc/cpuinfo), so TSC ticks are wall
//! time at a fixed rate and serve as "cycles" as in seed 000 Table II.

use std::time::{Duration, Instant};

/// The clock `id` (`libc::CLOCK_MONOTONIC`, `CLOCK_MONOTONIC_COARSE`,
/// `CLOCK_REALTIME`, `CLOCK_THREAD_CPUTIME_ID`...) in nanoseconds; 0 if the
/// clock cannot be read.
#[inline(always)]
pub fn clock_ns(id: libc::clockid_t) -> u64 {
    // SAFETY: clock_gettime writes only the timespec it is given.
    timespec_ns(|ts| unsafe { libc::clock_gettime(id, ts) })
}

/// CPU time of the calling thread in nanoseconds (0 if it cannot be read).
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// The nanoseconds of the timespec `call` fills; 0 if it fails.
#[inline(always)]
fn timespec_ns(call: impl FnOnce(&mut libc::timespec) -> libc::c_int) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    if call(&mut ts) != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The resolution of clock `id` in nanoseconds; 0 if it cannot be read.
pub fn clock_res_ns(id: libc::clockid_t) -> u64 {
    // SAFETY: clock_getres writes only the timespec it is given.
    timespec_ns(|ts| unsafe { libc::clock_getres(id, ts) })
}

/// Read the TSC (no serialisation: we time whole batches, so a few cycles of
/// reordering are noise).
#[inline(always)]
pub fn rdtsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: rdtsc has no preconditions on x86_64.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        use std::sync::OnceLock;
        static T0: OnceLock<Instant> = OnceLock::new();
        T0.get_or_init(Instant::now).elapsed().as_nanos() as u64
    }
}

/// True when /proc/cpuinfo says the TSC is constant and does not stop.
pub fn tsc_invariant() -> bool {
    std::fs::read_to_string("/proc/cpuinfo")
        .map(|s| s.contains("constant_tsc") && s.contains("nonstop_tsc"))
        .unwrap_or(false)
}

/// Measure the TSC frequency against the monotonic clock over `d`.
pub fn tsc_hz_measure(d: Duration) -> f64 {
    let t0 = Instant::now();
    let c0 = rdtsc();
    while t0.elapsed() < d {
        std::hint::spin_loop();
    }
    let c1 = rdtsc();
    let el = t0.elapsed();
    (c1.wrapping_sub(c0)) as f64 / el.as_secs_f64()
}

/// TSC frequency, measured once (50 ms) and cached.
pub fn tsc_hz() -> f64 {
    use std::sync::OnceLock;
    static HZ: OnceLock<f64> = OnceLock::new();
    *HZ.get_or_init(|| tsc_hz_measure(Duration::from_millis(50)))
}

/// The system clock's time now, UTC, RFC 3339 to the second
/// ("2026-11-26T10:15:00Z"), for reports and history files.
pub fn utc_rfc3339() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    rfc3339(secs)
}

/// Seconds since 1970-01-01 as UTC, RFC 3339.
fn rfc3339(secs: u64) -> String {
    let days = secs / 86400;
    let (h, m, s) = (secs % 86400 / 3600, secs % 3600 / 60, secs % 60);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let mo = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(mo <= 2);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{m:02}:{s:02}Z")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tsc_advances_at_plausible_rate() {
        let a = rdtsc();
        let hz = tsc_hz_measure(Duration::from_millis(20));
        let b = rdtsc();
        assert!(b > a);
        assert!(hz > 1e8 && hz < 1e10, "TSC at {hz} Hz");
    }

    #[test]
    fn rfc3339_dates() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        // 2000-02-29 (a leap day of a century year divisible by 400).
        assert_eq!(rfc3339(951_782_400 + 3661), "2000-02-29T01:01:01Z");
        assert_eq!(rfc3339(1_795_000_000), "2026-11-18T11:06:40Z");
    }
}
