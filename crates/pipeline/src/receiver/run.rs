//! The receive loop of `linerate count` (and of `linerate gen --rx`): batches
//! from a port into a [`Receiver`] until stopped, a deadline, a packet count,
//! an idle time or the end of a finite source.

use super::{monotonic_ns, Receiver};
use crate::poll::{Poll, Polling};
use linerate_io::{Batch, PortError, RxPort};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

/// When a receive loop ends (besides the stop flag and the end of a finite source).
#[derive(Clone, Copy, Debug, Default)]
pub struct Until {
    pub deadline: Option<Instant>,
    pub packets: Option<u64>,
    /// No packet for this long after the first one.
    pub idle: Option<Duration>,
}

/// Receive from an open port into `rx` until stopped, on the polling core;
/// calls `tick` once a second.
pub fn receive_loop(
    port: &mut dyn RxPort,
    rx: &mut Receiver,
    batch: usize,
    stop: &AtomicBool,
    until: Until,
    tick: impl FnMut(&mut Receiver),
) -> Result<(), PortError> {
    let now = Instant::now();
    let mut t = Turns {
        port,
        rx,
        b: Batch::new(batch),
        until,
        last_tick: now,
        last_pkt: now,
        got_any: false,
        tick,
    };
    crate::poll::run(&mut t, stop, Polling::Wait)
}

/// The receive loop's turns.
struct Turns<'a, F> {
    port: &'a mut dyn RxPort,
    rx: &'a mut Receiver,
    b: Batch,
    until: Until,
    last_tick: Instant,
    last_pkt: Instant,
    got_any: bool,
    tick: F,
}

impl<F: FnMut(&mut Receiver)> Poll for Turns<'_, F> {
    type Error = PortError;

    fn turn(&mut self) -> Result<usize, PortError> {
        let n = self.port.recv(&mut self.b)?;
        if n > 0 {
            // One clock read per batch (vDSO, no syscall).
            self.rx.on_batch(self.b.pkts(), monotonic_ns());
            self.port.release(&mut self.b)?;
            self.got_any = true;
        }
        Ok(n)
    }

    fn at_end(&self) -> bool {
        self.port.at_end()
    }

    fn wait(&mut self, timeout_ms: i32) -> Result<(), PortError> {
        self.port.wait(timeout_ms)
    }

    fn tend(&mut self, got: usize) -> Result<bool, PortError> {
        let u = self.until;
        if u.packets.is_some_and(|m| self.rx.counters().packets >= m) {
            return Ok(true);
        }
        let now = Instant::now();
        if got > 0 {
            self.last_pkt = now;
        }
        if u.deadline.is_some_and(|d| now >= d)
            || (self.got_any && u.idle.is_some_and(|i| now - self.last_pkt >= i))
        {
            return Ok(true);
        }
        if now - self.last_tick >= Duration::from_secs(1) {
            self.rx.clock_mut().refresh();
            (self.tick)(self.rx);
            self.last_tick = now;
        }
        Ok(false)
    }
}
