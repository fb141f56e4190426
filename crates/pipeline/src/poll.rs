//! The polling core every pipeline's loop runs on: turn over the ports
//! until stopped or every source is at its end, wait by one idle policy
//! when nothing came, drain what is in flight at the end. The pipelines
//! (the forwarder's directions, the switch's datapath) say what one turn,
//! one wait and the drain are ([`Poll`]); the receiver, the generator and
//! the capture dispatcher and workers too. The threads that supervise them
//! (reports once a second, deadlines, the XDP programs) wake by [`Watch`].

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// How the loop waits when idle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Polling {
    /// Spin on the rings (lowest latency, one core at 100 %).
    Busy,
    /// Sleep in poll() when idle (need_wakeup mode).
    Wait,
}

impl Polling {
    /// "busy" or anything else ("wait"), as the commands' `--poll` says it.
    pub fn from_name(s: &str) -> Polling {
        if s == "busy" {
            Polling::Busy
        } else {
            Polling::Wait
        }
    }
}

/// The one idle policy: after [`IDLE_TURNS`] empty turns in a row, wait
/// ([`Polling::Wait`]) or spin on ([`Polling::Busy`]). What a wait is
/// belongs to the loop ([`Poll::wait`]): poll() on its ports, a sleep on
/// a ring another thread fills, or a paced sender's sleep until its next
/// departure.
#[derive(Clone, Copy, Debug)]
pub struct Idle {
    polling: Polling,
    empty: u32,
}

impl Idle {
    pub fn new(polling: Polling) -> Idle {
        Idle { polling, empty: 0 }
    }

    /// After a turn that handled `got` packets: whether to wait now.
    #[inline]
    pub fn after(&mut self, got: usize) -> bool {
        if got > 0 {
            self.empty = 0;
            return false;
        }
        // Wrapping: [`Idle::tend_due`] tests it modulo a power of two.
        self.empty = self.empty.wrapping_add(1);
        self.polling == Polling::Wait && (self.empty > IDLE_TURNS || self.empty == 0)
    }

    /// Time for [`Poll::tend`]: after a turn with packets, and every
    /// [`TEND_EVERY`] empty turns (the clock is read there, not per turn).
    #[inline]
    pub fn tend_due(&self) -> bool {
        self.empty.is_multiple_of(TEND_EVERY)
    }
}

/// Empty turns before [`Polling::Wait`] waits: about 64 spins of a few
/// hundred ns cover a burst's gaps without a syscall.
pub const IDLE_TURNS: u32 = 64;

/// Empty turns between two calls of [`Poll::tend`] while idle.
pub const TEND_EVERY: u32 = 64;

/// The longest a wait lasts before the loop looks at its stop flag again.
pub const WAIT_MS: i32 = 1;

/// How long the end's drain waits for frames in flight.
pub const DRAIN: Duration = Duration::from_millis(500);

/// A pipeline's loop, as the polling core drives it.
pub trait Poll {
    type Error;
    /// One turn over every port; the packets handled. Every batch is fully
    /// counted before it returns.
    fn turn(&mut self) -> Result<usize, Self::Error>;
    /// Every source is at its end (finite sources: files, mem ports, a
    /// generator's last packet, a ring whose writer is gone).
    fn at_end(&self) -> bool;
    /// Wait until there may be work: `timeout_ms` at most (per port).
    fn wait(&mut self, timeout_ms: i32) -> Result<(), Self::Error>;
    /// Flush TX once; the frames still in flight.
    fn flush(&mut self) -> Result<usize, Self::Error> {
        Ok(0)
    }
    /// After the drain (done or timed out): finish the ports.
    fn finish(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }
    /// Between turns (see [`Idle::tend_due`]): the loop's timed work, a
    /// once-a-second report, a deadline, a packet limit. `true` ends the
    /// loop. The forwarder's and the switch's loops have none.
    #[inline]
    fn tend(&mut self, _got: usize) -> Result<bool, Self::Error> {
        Ok(false)
    }
}

/// Run `p` until `stop` is set, every source is at its end or
/// [`Poll::tend`] ends it, then drain for at most [`DRAIN`]. Accounting is
/// exact at return: `stop` is read after each turn, never inside a batch.
pub fn run<P: Poll>(p: &mut P, stop: &AtomicBool, polling: Polling) -> Result<(), P::Error> {
    let mut idle = Idle::new(polling);
    loop {
        let got = p.turn()?;
        if stop.load(Relaxed) || (got == 0 && p.at_end()) {
            break;
        }
        let wait = idle.after(got);
        if idle.tend_due() && p.tend(got)? {
            break;
        }
        if wait {
            // A wait of 1 ms at most on each port in turn, so an idle port
            // never holds up the others for long.
            p.wait(WAIT_MS)?;
        } else if got == 0 {
            std::hint::spin_loop();
        }
    }
    let t = Instant::now();
    while p.flush()? > 0 && t.elapsed() <= DRAIN {
        std::thread::sleep(Duration::from_micros(200));
    }
    p.finish()
}

/// How long before a departure a paced wait stops sleeping and spins
/// (covers the timer slack of a normal thread, 50 us).
pub const SPIN: Duration = Duration::from_micros(60);

/// One step of a paced sender's wait for a departure `left_ns` away: a
/// sleep to about [`SPIN`] before it, `most` at most; none when it is
/// nearer (the caller spins). Whether it slept.
pub fn pace_sleep(left_ns: u64, most: Duration) -> bool {
    let left = Duration::from_nanos(left_ns);
    if left <= SPIN {
        return false;
    }
    std::thread::sleep((left - SPIN).min(most));
    true
}

/// A paced wait to the time `t_ns` of the clock `now` reads: sleeps of
/// 10 ms at most (so that `stop` is seen), then a spin to it.
pub fn wait_until(t_ns: u64, now: impl Fn() -> u64, stop: &AtomicBool) {
    loop {
        let n = now();
        if n >= t_ns || stop.load(Relaxed) {
            return;
        }
        if !pace_sleep(t_ns - n, Duration::from_millis(10)) {
            std::hint::spin_loop();
        }
    }
}

/// How often a supervising thread wakes.
pub const WATCH_PERIOD: Duration = Duration::from_millis(20);

/// The supervising thread beside the engines (reports, deadlines, the XDP
/// programs' counters and links): it wakes every [`WATCH_PERIOD`] until
/// `stop` is set or the deadline passes, and says when a second has passed
/// since the last report. Stopping the engines is the caller's, after.
///
/// ```text
/// let mut w = Watch::new(&stop, deadline);
/// while let Some(second) = w.next() {
///     if engines_done { break; }
///     if let Some(dt) = second { report(dt); }
/// }
/// ```
pub struct Watch<'a> {
    stop: &'a AtomicBool,
    deadline: Option<Instant>,
    last: Instant,
}

impl<'a> Watch<'a> {
    pub fn new(stop: &'a AtomicBool, deadline: Option<Instant>) -> Watch<'a> {
        Watch {
            stop,
            deadline,
            last: Instant::now(),
        }
    }

    /// Sleep one period. `None`: the run is over. `Some(Some(dt))`: `dt`
    /// seconds since the last report, time for the next one.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Option<Option<f64>> {
        std::thread::sleep(WATCH_PERIOD);
        if self.stop.load(Relaxed) {
            return None;
        }
        let now = Instant::now();
        if self.deadline.is_some_and(|d| now >= d) {
            return None;
        }
        let dt = now - self.last;
        if dt < Duration::from_secs(1) {
            return Some(None);
        }
        self.last = now;
        Some(Some(dt.as_secs_f64()))
    }
}

/// The deadline `secs` from `t0` (negative: now).
pub fn deadline(t0: Instant, secs: Option<f64>) -> Option<Instant> {
    secs.map(|d| t0 + Duration::from_secs_f64(d.max(0.0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A loop with 8 packets per turn for `turns` turns, then nothing; at
    /// its end after `end_after_empty` empty turns; `inflight` frames drain
    /// one per flush.
    struct Fake {
        turns: u32,
        empty: u32,
        end_after_empty: u32,
        inflight: usize,
        waits: u32,
        handled: usize,
        finished: bool,
    }
    impl Poll for Fake {
        type Error = ();
        fn turn(&mut self) -> Result<usize, ()> {
            if self.turns == 0 {
                self.empty += 1;
                return Ok(0);
            }
            self.turns -= 1;
            self.handled += 8;
            Ok(8)
        }
        fn at_end(&self) -> bool {
            self.turns == 0 && self.empty >= self.end_after_empty
        }
        fn wait(&mut self, _: i32) -> Result<(), ()> {
            self.waits += 1;
            Ok(())
        }
        fn flush(&mut self) -> Result<usize, ()> {
            self.inflight = self.inflight.saturating_sub(1);
            Ok(self.inflight)
        }
        fn finish(&mut self) -> Result<(), ()> {
            self.finished = true;
            Ok(())
        }
    }

    fn fake(turns: u32, end_after_empty: u32) -> Fake {
        Fake {
            turns,
            empty: 0,
            end_after_empty,
            inflight: 3,
            waits: 0,
            handled: 0,
            finished: false,
        }
    }

    #[test]
    fn a_finite_source_ends_the_loop_and_the_drain_empties_the_ports() {
        let mut f = fake(10, 1);
        run(&mut f, &AtomicBool::new(false), Polling::Wait).unwrap();
        assert_eq!((f.handled, f.inflight, f.finished), (80, 0, true));
        assert_eq!((f.empty, f.waits), (1, 0), "one empty turn, its end");
    }

    #[test]
    fn wait_polling_sleeps_in_poll_only_after_the_idle_turns() {
        let n = IDLE_TURNS + 10;
        let mut w = fake(5, n);
        run(&mut w, &AtomicBool::new(false), Polling::Wait).unwrap();
        // Turns 1..=IDLE_TURNS spin; each later empty turn but the last waits.
        assert_eq!(w.waits, n - 1 - IDLE_TURNS);
        let mut b = fake(5, n);
        run(&mut b, &AtomicBool::new(false), Polling::Busy).unwrap();
        assert_eq!((b.waits, b.handled), (0, 40));
    }

    #[test]
    fn stop_ends_after_the_turn_in_progress() {
        let stop = AtomicBool::new(true);
        let mut f = fake(10, u32::MAX);
        run(&mut f, &stop, Polling::Busy).unwrap();
        assert_eq!((f.handled, f.finished), (8, true));
    }

    /// A loop that counts its tends and ends by one after `limit` packets.
    struct Limited {
        handled: usize,
        limit: usize,
        tends: u32,
        empty_left: u32,
    }
    impl Poll for Limited {
        type Error = ();
        fn turn(&mut self) -> Result<usize, ()> {
            if self.empty_left > 0 {
                self.empty_left -= 1;
                return Ok(0);
            }
            self.handled += 4;
            Ok(4)
        }
        fn at_end(&self) -> bool {
            false
        }
        fn wait(&mut self, _: i32) -> Result<(), ()> {
            Ok(())
        }
        fn tend(&mut self, _got: usize) -> Result<bool, ()> {
            self.tends += 1;
            Ok(self.handled >= self.limit)
        }
    }

    #[test]
    fn tend_runs_after_every_batch_and_every_few_empty_turns_and_may_end_the_loop() {
        let mut l = Limited {
            handled: 0,
            limit: 40,
            tends: 0,
            empty_left: 2 * TEND_EVERY,
        };
        run(&mut l, &AtomicBool::new(false), Polling::Wait).unwrap();
        assert_eq!(l.handled, 40, "ended by tend at its limit");
        // Two tends while idle (empty turns 64 and 128), one per batch.
        assert_eq!(l.tends, 2 + 10);
    }

    #[test]
    fn watch_ends_at_stop_or_deadline_and_reports_each_second() {
        let stop = AtomicBool::new(false);
        let t = Instant::now();
        let mut w = Watch::new(&stop, Some(t + Duration::from_millis(1100)));
        let mut seconds = 0;
        while let Some(s) = w.next() {
            if let Some(dt) = s {
                assert!(dt >= 1.0);
                seconds += 1;
            }
        }
        assert_eq!(seconds, 1);
        assert!(t.elapsed() >= Duration::from_millis(1100));
        stop.store(true, Relaxed);
        assert!(Watch::new(&stop, None).next().is_none());
    }

    #[test]
    fn a_paced_wait_sleeps_only_when_the_departure_is_far() {
        assert!(!pace_sleep(
            SPIN.as_nanos() as u64,
            Duration::from_millis(1)
        ));
        let t = Instant::now();
        assert!(pace_sleep(5_000_000, Duration::from_micros(300)));
        let took = t.elapsed();
        assert!(took >= Duration::from_micros(300) && took < Duration::from_millis(5));
        let stop = AtomicBool::new(false);
        let t0 = Instant::now();
        wait_until(2_000_000, || t0.elapsed().as_nanos() as u64, &stop);
        assert!(t0.elapsed() >= Duration::from_millis(2));
        stop.store(true, Relaxed);
        let t1 = Instant::now();
        wait_until(u64::MAX, || t1.elapsed().as_nanos() as u64, &stop);
        assert!(
            t1.elapsed() < Duration::from_millis(50),
            "stop ends the wait"
        );
    }
}
