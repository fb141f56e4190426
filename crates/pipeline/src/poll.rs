//! The polling core every pipeline's loop runs on: turn over the ports
//! until stopped or every source is at its end, wait by one idle policy
//! when nothing came, drain what is in flight at the end. The pipelines
//! (the forwarder's directions, the switch's datapath) say what one turn,
//! one wait and the drain are ([`Poll`]); the capture workers, which wait
//! on a ring rather than on ports, use the same [`Backoff`].

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

/// Empty turns before [`Polling::Wait`] sleeps in poll(): about 64 spins
/// of a few hundred ns cover a burst's gaps without a syscall.
pub const IDLE_TURNS: u32 = 64;

/// How long the end's drain waits for frames in flight.
pub const DRAIN: Duration = Duration::from_millis(500);

/// A pipeline's loop, as the polling core drives it.
pub trait Poll {
    type Error;
    /// One turn over every port; the packets handled. Every batch is fully
    /// counted before it returns.
    fn turn(&mut self) -> Result<usize, Self::Error>;
    /// Every source is at its end (finite sources: files, mem ports).
    fn at_end(&self) -> bool;
    /// Sleep until a port has work: `timeout_ms` at most per port.
    fn wait(&mut self, timeout_ms: i32) -> Result<(), Self::Error>;
    /// Flush TX once; the frames still in flight.
    fn flush(&mut self) -> Result<usize, Self::Error>;
    /// After the drain (done or timed out): finish the ports.
    fn finish(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }
}

/// Run `p` until `stop` is set or every source is at its end, then drain
/// for at most [`DRAIN`]. Accounting is exact at return: `stop` is read
/// after each turn, never inside a batch.
pub fn run<P: Poll>(p: &mut P, stop: &AtomicBool, polling: Polling) -> Result<(), P::Error> {
    let mut idle_turns = 0u32;
    loop {
        let got = p.turn()?;
        if stop.load(Relaxed) {
            break;
        }
        if got == 0 {
            if p.at_end() {
                break;
            }
            idle_turns = idle_turns.saturating_add(1);
            if polling == Polling::Wait && idle_turns > IDLE_TURNS {
                // Sleep in poll() on each port in turn, 1 ms at most each,
                // so an idle port never holds up the others for long.
                p.wait(1)?;
            } else {
                std::hint::spin_loop();
            }
        } else {
            idle_turns = 0;
        }
    }
    let t = Instant::now();
    let mut b = Backoff::default();
    while p.flush()? > 0 && t.elapsed() <= DRAIN {
        b.sleep();
    }
    p.finish()
}

/// Waiting on something that is not a port (a ring another thread fills,
/// frames in flight): spin [`Backoff::SPINS`] times, then sleep 200 us a
/// time (a ring 200 us behind still holds far more than that of work).
#[derive(Default)]
pub struct Backoff {
    empty: u32,
}

impl Backoff {
    pub const SPINS: u32 = 256;

    /// Nothing came this turn.
    #[inline]
    pub fn idle(&mut self) {
        // Wrapping: callers test empty_turns() modulo a power of two.
        self.empty = self.empty.wrapping_add(1);
        if self.empty > Self::SPINS || self.empty == 0 {
            self.sleep();
        } else {
            std::hint::spin_loop();
        }
    }

    /// Something came: spin again next time.
    #[inline]
    pub fn reset(&mut self) {
        self.empty = 0;
    }

    /// Empty turns since the last reset.
    pub fn empty_turns(&self) -> u32 {
        self.empty
    }

    fn sleep(&mut self) {
        std::thread::sleep(Duration::from_micros(200));
    }
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
}
