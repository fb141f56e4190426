//! `Pacing::InProgram`: the program keeps the schedule in its
//! `gen_pace` map, and two threads ("lanes") take turns making its calls
//! so that one always runs the program while the other pays its call's
//! fixed teardown cost (the module docs of `linerate_io::xdp::generator`).

use crate::poll;
use linerate_io::time::thread_cpu_ns;
use linerate_io::xdp::generator::{GenStats, RawPace, XdpGen};
use linerate_io::PortError;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// CLOCK_MONOTONIC in ns (the clock of `bpf_ktime_get_ns`).
fn mono_ns() -> u64 {
    linerate_io::time::clock_ns(libc::CLOCK_MONOTONIC)
}

/// Program runs per ns and the fixed cost of a call (ns), from calls
/// of idle runs (measured once per generator, ~0.3 s).
fn calibrate(g: &mut XdpGen) -> Result<(f64, f64), PortError> {
    if let Some(c) = g.calibration() {
        return Ok(c);
    }
    // Every run reads the time and drops (span_ns = 0).
    g.set_pace(RawPace {
        on: 1,
        limit: u64::MAX,
        ..Default::default()
    })?;
    // Three rounds of calls of A and 4A runs; the median of each
    // estimate (a preempted call on a busy machine skews one round).
    const A: u32 = 1 << 17;
    let mut rates = [0f64; 3];
    let mut fixed = [0f64; 3];
    for i in 0..3 {
        let mut took = [0f64; 2];
        for (j, n) in [A, 4 * A].into_iter().enumerate() {
            let t = Instant::now();
            g.call(n)?;
            took[j] = t.elapsed().as_nanos() as f64;
        }
        let per_3a = (took[1] - took[0]).max(1.0);
        // Bounded: a round in which the machine stalled during the
        // first call (a VM paused) reads a near-zero difference, and a
        // rate that high would size the calls of a paced run at
        // minutes of program runs (seen: a trial stuck for over 3 min).
        rates[i] = (3.0 * A as f64 / per_3a).min(MAX_RUNS_PER_NS);
        fixed[i] = (took[0] - per_3a / 3.0).max(0.0);
    }
    rates.sort_by(f64::total_cmp);
    fixed.sort_by(f64::total_cmp);
    let c = (fixed[1], rates[1]);
    g.set_calibration((c.1, c.0));
    Ok((c.1, c.0))
}

/// The in-program paced loop: the schedule (frame n due at start +
/// n / pps, at most `count` frames, none at or after start + `limit`)
/// is written into the program's `gen_pace` map; then two threads
/// ("lanes") take turns making calls of about [`LANE_CALL`] +
/// 2 [`LANE_OVERLAP`], call k starting at start + k [`LANE_CALL`] -
/// [`LANE_OVERLAP`], so that one call always runs the program while
/// the other pays its fixed teardown cost (~24 ms of RCU
/// synchronisation). Frames the lanes left unsent (the rate was not
/// reached) are sent by single calls at the end, until the end time.
pub fn in_program(
    g: &mut XdpGen,
    pps: f64,
    count: u64,
    limit: Option<Duration>,
    stop: &AtomicBool,
) -> Result<GenStats, PortError> {
    let mut st = GenStats::default();
    if stop.load(Ordering::Relaxed) {
        return Ok(st);
    }
    let (rate, fixed) = calibrate(g)?;
    g.span_reset()?;
    let (base, idle0) = g.stats()?;
    let c0 = thread_cpu_ns();
    let t0 = Instant::now();
    let gap_fp = (1e9 / pps * 65536.0).round() as u64;
    let mut frames = count;
    if let Some(d) = limit {
        frames = frames.min((pps * d.as_secs_f64()).floor() as u64);
    }
    let start_ns = mono_ns();
    // The program sends nothing after the end plus [`END_GRACE`]: frames
    // due before the end but delayed (the thread preempted) still go
    // out, and `frames` bounds the count.
    let end_ns = limit.map_or(u64::MAX, |d| {
        start_ns.saturating_add(d.as_nanos().min(u64::MAX as u128) as u64)
    });
    let prog_end_ns = end_ns.saturating_add(END_GRACE.as_nanos() as u64);
    // The time of the last frame (bounded by the end).
    let last_ns = if frames == 0 {
        start_ns
    } else {
        let t = ((frames - 1) as u128 * gap_fp as u128) >> 16;
        start_ns.saturating_add(t.min(u64::MAX as u128) as u64)
    }
    .min(end_ns);
    // start_ns 0: the program starts the schedule at its first run (a
    // call's set-up takes ~10-15 ms; frames due meanwhile would leave
    // as a burst). Every call has that set-up, so the lanes' timing
    // below, relative to `start_ns` here, keeps its overlaps.
    g.set_pace(RawPace {
        on: 1,
        start_ns: 0,
        gap_fp,
        limit: frames,
        span_ns: prog_end_ns - start_ns,
        sent: 0,
        max_late: 0,
        // At least 1 ns: 0 means "catch up".
        max_lag: g.max_lag().map_or(0, |d| (d.as_nanos() as u64).max(1)),
        slipped: 0,
        slips: 0,
    })?;
    let runner = g.runner();
    // Runs per ns (f64 bits), refined by every call.
    let shared_rate = std::sync::atomic::AtomicU64::new(rate.to_bits());
    let period = LANE_CALL.as_nanos() as u64;
    let ov = LANE_OVERLAP.as_nanos() as u64;
    let lane = |first: u64| -> Result<(u64, u64), PortError> {
        let (mut calls, mut intr) = (0, 0);
        let mut k = first;
        loop {
            let at = (start_ns + k * period).saturating_sub(if k > 0 { ov } else { 0 });
            if at >= last_ns {
                break; // the other lane's call covers the rest
            }
            poll::wait_until(at, mono_ns, stop);
            let now = mono_ns();
            if stop.load(Ordering::Relaxed) || now >= last_ns {
                break;
            }
            let r = f64::from_bits(shared_rate.load(Ordering::Relaxed));
            // Slack past the last frame: the rate estimate may be low
            // (calibrated while the machine was busy), and runs left
            // short would leave the last frames to a tail call, one
            // call's ~24 ms teardown late. Extra runs only spin idle.
            let left = last_ns - now;
            let full = period + 2 * ov;
            // A call that is not the last gets half as many runs again
            // as the estimate says: the estimate comes from calls that
            // shared the core with the other lane during their overlaps
            // (each at half speed), so a call running alone used up its
            // runs early, and until the next call had set up no frame
            // left: 40-70 ms of lateness in every 10 s at 60 kpps on an
            // idle bed (AMD EPYC, 2 vCPUs), 0.4-1.1 ms with the margin.
            // Extra runs only overlap the next call more.
            let want = if left > full {
                full as f64 * CALL_MARGIN
            } else {
                (left + (left / 4).max(2_000_000)) as f64
            };
            let repeat = (want * r).clamp(4096.0, u32::MAX as f64) as u32;
            let t = Instant::now();
            let done = runner.call(repeat)?;
            let took = t.elapsed().as_nanos() as f64;
            calls += 1;
            if done {
                if took > 2.0 * fixed {
                    let obs = repeat as f64 / (took - fixed);
                    shared_rate.store((0.5 * r + 0.5 * obs).to_bits(), Ordering::Relaxed);
                }
            } else {
                intr += 1;
            }
            k += 2;
        }
        Ok((calls, intr))
    };
    let res: Vec<Result<(u64, u64), PortError>> = std::thread::scope(|sc| {
        let other = sc.spawn(|| lane(1));
        let mine = lane(0);
        vec![
            mine,
            other
                .join()
                .unwrap_or_else(|_| Err(PortError::new("XDP generator: lane thread panicked"))),
        ]
    });
    for r in res {
        let (c, i) = r?;
        st.syscalls += c;
        st.interrupted += i;
    }
    // The tail: frames due but not sent (the rate was not reached).
    let mut p = g.pace()?;
    while p.sent < frames && !stop.load(Ordering::Relaxed) {
        let now = mono_ns();
        if now >= prog_end_ns {
            break;
        }
        let r = f64::from_bits(shared_rate.load(Ordering::Relaxed));
        let left = ((frames - p.sent) as f64 * 1e9 / pps).max(1e6);
        let t = left
            .min(LANE_CALL.as_nanos() as f64)
            .min(end_ns.saturating_sub(now).max(1_000_000) as f64);
        let repeat = (t * r).clamp(4096.0, u32::MAX as f64) as u32;
        if !g.call(repeat)? {
            st.interrupted += 1;
        }
        st.syscalls += 1;
        p = g.pace()?;
    }
    let p = g.pace()?;
    st.late_max_ns = p.max_late;
    st.slipped_ns = p.slipped;
    st.slips = p.slips;
    let (sent, idle) = g.stats()?;
    st.sent = sent - base;
    st.idle_runs = idle - idle0;
    st.duration_ns = t0.elapsed().as_nanos() as u64;
    st.send_ns = g.send_span_ns(st.sent)?;
    g.note_stamps(&mut st)?;
    st.cpu_ns = thread_cpu_ns().saturating_sub(c0);
    Ok(st)
}

/// `Pacing::InProgram`, timed runs: how long after the end frames due
/// before it may still leave (catch-up after a preemption); none are sent
/// after that.
pub const END_GRACE: Duration = Duration::from_millis(20);
/// Upper bound of the calibrated program runs per ns (the program's idle
/// run takes tens of ns here; 0.5 per ns is far above any real machine).
const MAX_RUNS_PER_NS: f64 = 0.5;
/// `Pacing::InProgram`: the period of each of the two lanes' calls is
/// twice this; the stop flag is checked between calls.
pub const LANE_CALL: Duration = Duration::from_millis(200);
/// `Pacing::InProgram`: runs of a lane's call (other than the last)
/// against what the rate estimate says its period takes.
const CALL_MARGIN: f64 = 1.5;
/// `Pacing::InProgram`: how long two calls overlap at each end (covers a
/// late wake-up and the error of the call's size).
pub const LANE_OVERLAP: Duration = Duration::from_millis(15);
