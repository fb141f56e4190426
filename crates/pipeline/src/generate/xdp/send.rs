//! Running the in-kernel generator ([`XdpGen`]) on the calling thread:
//! unpaced (calls of [`CHUNK`] frames, or sized to end a timed run on
//! time) and paced in time slices ([`Pacing::Slices`]); paced in the
//! program, by the lanes ([`super::lanes`]). The io layer keeps the
//! program, its maps and the call; the module docs of
//! `linerate_io::xdp::generator` say what was measured.

use super::lanes;
use crate::poll;
use linerate_io::time::thread_cpu_ns;
use linerate_io::xdp::generator::{GenStats, Pacing, XdpGen, CHUNK};
use linerate_io::PortError;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Send `count` frames (or fewer if `stop` becomes true; it is checked
/// between calls) as fast as the rate limit lets, on the calling thread.
pub fn send(g: &mut XdpGen, count: u64, stop: &AtomicBool) -> Result<GenStats, PortError> {
    send_until(g, count, None, stop)
}

/// Send for about `d` (the last call is sized from the rate measured so
/// far) or until `stop`.
pub fn send_for(g: &mut XdpGen, d: Duration, stop: &AtomicBool) -> Result<GenStats, PortError> {
    send_until(g, u64::MAX, Some(d), stop)
}

fn send_until(
    g: &mut XdpGen,
    count: u64,
    limit: Option<Duration>,
    stop: &AtomicBool,
) -> Result<GenStats, PortError> {
    g.align_stamps()?;
    match g.rate() {
        (Some(pps), Pacing::Slices) => return paced(g, pps, count, limit, stop),
        (Some(pps), Pacing::InProgram) => return lanes::in_program(g, pps, count, limit, stop),
        (None, _) => {}
    }
    g.span_reset()?;
    let base = g.total_sent()?;
    let c0 = thread_cpu_ns();
    let t0 = Instant::now();
    let mut st = GenStats::default();
    // Time-limited runs start with a short call to learn the rate
    // (2^18 frames: 0.07 s at 3.6 Mpps, 0.44 s when a DuT in the
    // generator's softirq holds it to 0.6 Mpps; 2^20 made a 0.5 s
    // top-speed trial of the bridge last 1.7 s).
    let mut next = if limit.is_some() { 1 << 18 } else { CHUNK };
    while st.sent < count && !stop.load(Ordering::Relaxed) {
        let elapsed = t0.elapsed();
        if let Some(d) = limit {
            if elapsed >= d {
                break;
            }
            if st.sent > 0 {
                let rate = st.sent as f64 / elapsed.as_secs_f64();
                let left = (d - elapsed).as_secs_f64() * rate;
                next = (left as u64).clamp(1 << 16, CHUNK as u64) as u32;
            }
        }
        let repeat = (count - st.sent).min(next as u64) as u32;
        let before = st.sent;
        let done = g.call(repeat)?;
        st.syscalls += 1;
        if !done {
            st.interrupted += 1;
        }
        st.sent = g.total_sent()? - base;
        // Each call's own span (stamped inside it), summed: the gaps
        // between calls (set-up, RCU synchronisation: ~35 ms each, no
        // frame leaves) are not sending time, so the rate is the
        // generator's top speed while it sends.
        st.send_ns += g.send_span_ns(st.sent - before)?;
        g.note_stamps(&mut st)?;
        g.span_reset()?;
        if limit.is_none() {
            next = CHUNK;
        }
    }
    st.duration_ns = t0.elapsed().as_nanos() as u64;
    st.cpu_ns = thread_cpu_ns().saturating_sub(c0);
    Ok(st)
}

/// The rate-limited loop: time slices of [`slice_for`]`(pps)` on an
/// absolute schedule from the start. Before slice k's deadline
/// (t0 + k * slice) the frames due by then, `floor(pps * k * slice)`
/// minus those sent, go out in one call (a burst at the start of the
/// slice), then the thread sleeps until ~[`poll::SPIN`] before the deadline
/// and spins to it. A late slice (a call longer than the slice) is
/// caught up by the next one, so the long-run mean is exact while the
/// machine can reach the rate.
fn paced(
    g: &mut XdpGen,
    pps: f64,
    count: u64,
    limit: Option<Duration>,
    stop: &AtomicBool,
) -> Result<GenStats, PortError> {
    g.span_reset()?;
    let base = g.total_sent()?;
    let c0 = thread_cpu_ns();
    let t0 = Instant::now();
    let mut st = GenStats::default();
    let slice = slice_for(pps).as_nanos() as u64;
    // When the last frame of `count` is due, and when a timed run ends.
    let count_ns = if count == u64::MAX {
        u64::MAX
    } else {
        ((count as f64) * 1e9 / pps).ceil() as u64
    };
    let end_ns = limit.map_or(u64::MAX, |d| d.as_nanos().min(u64::MAX as u128) as u64);
    let mut k: u64 = 0;
    while st.sent < count && !stop.load(Ordering::Relaxed) {
        // Slices missed while a call ran (each call costs a few ms,
        // see the module docs) are skipped: their frames go out now.
        let now = t0.elapsed().as_nanos() as u64;
        k = (k + 1).max(now / slice + 1);
        let start_ns = (k - 1).saturating_mul(slice);
        if start_ns >= end_ns {
            // The frames due by the end that the last call's
            // overhead pushed past it: sent now, so that a timed run
            // sends exactly floor(pps * d).
            let target = ((pps * end_ns as f64 / 1e9) as u64).min(count);
            while st.sent < target && !stop.load(Ordering::Relaxed) {
                let repeat = (target - st.sent).min(CHUNK as u64) as u32;
                if !g.call(repeat)? {
                    st.interrupted += 1;
                }
                st.syscalls += 1;
                st.sent = g.total_sent()? - base;
            }
            break;
        }
        let due_ns = k.saturating_mul(slice).min(count_ns).min(end_ns);
        let target = if due_ns == count_ns {
            count
        } else {
            ((pps * due_ns as f64 / 1e9) as u64).min(count)
        };
        let late = now.saturating_sub(start_ns);
        st.slices += 1;
        st.late_sum_ns += late;
        st.late_max_ns = st.late_max_ns.max(late);
        while st.sent < target && !stop.load(Ordering::Relaxed) {
            if end_ns != u64::MAX && t0.elapsed().as_nanos() as u64 >= end_ns {
                break;
            }
            let repeat = (target - st.sent).min(CHUNK as u64) as u32;
            let done = g.call(repeat)?;
            st.syscalls += 1;
            if !done {
                st.interrupted += 1;
            }
            st.sent = g.total_sent()? - base;
        }
        poll::wait_until(due_ns, || t0.elapsed().as_nanos() as u64, stop);
    }
    st.duration_ns = t0.elapsed().as_nanos() as u64;
    st.send_ns = g.send_span_ns(st.sent)?;
    g.note_stamps(&mut st)?;
    st.cpu_ns = thread_cpu_ns().saturating_sub(c0);
    Ok(st)
}

/// The time slice of a rate-limited run at `pps`: long enough that a call
/// carries at least [`MIN_CALL`] frames, between 1 ms and 10 ms.
pub fn slice_for(pps: f64) -> Duration {
    let ns = (MIN_CALL as f64 * 1e9 / pps).clamp(1e6, 1e7);
    Duration::from_nanos(ns as u64)
}

/// Frames per call a rate-limited run aims for (per-call cost amortised).
pub const MIN_CALL: u32 = 256;
