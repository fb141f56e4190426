//! Reading the kernel's clocks without a system call (vDSO).

/// The clock `id` (`libc::CLOCK_MONOTONIC`, `CLOCK_MONOTONIC_COARSE`,
/// `CLOCK_REALTIME`, `CLOCK_THREAD_CPUTIME_ID`...) in nanoseconds; 0 if the
/// clock cannot be read.
#[inline(always)]
pub fn clock_ns(id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer.
    if unsafe { libc::clock_gettime(id, &mut ts) } != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
