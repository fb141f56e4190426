//! The receive loop of `linerate count` (and of `linerate gen --rx`): batches
//! from a port into a [`Receiver`] until stopped, a deadline, a packet count,
//! an idle time or the end of a finite source.

use super::{monotonic_ns, Receiver};
use linerate_io::{Batch, PortError, RxPort};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// When a receive loop ends (besides the stop flag and the end of a finite source).
#[derive(Clone, Copy, Debug, Default)]
pub struct Until {
    pub deadline: Option<Instant>,
    pub packets: Option<u64>,
    /// No packet for this long after the first one.
    pub idle: Option<Duration>,
}

/// Receive from an open port into `rx` until stopped; calls `tick` once a second.
pub fn receive_loop(
    port: &mut dyn RxPort,
    rx: &mut Receiver,
    batch: usize,
    stop: &AtomicBool,
    until: Until,
    mut tick: impl FnMut(&mut Receiver),
) -> Result<(), PortError> {
    let Until {
        deadline,
        packets: max_packets,
        idle,
    } = until;
    let mut b = Batch::new(batch);
    let mut last_tick = Instant::now();
    let mut last_pkt = Instant::now();
    let mut got_any = false;
    let mut empty = 0u32;
    loop {
        let n = port.recv(&mut b)?;
        if n > 0 {
            // One clock read per batch (vDSO, no syscall).
            rx.on_batch(b.pkts(), monotonic_ns());
            port.release(&mut b)?;
            got_any = true;
            empty = 0;
        } else {
            empty += 1;
            if port.at_end() {
                break;
            }
            if empty > 256 {
                port.wait(10)?;
            }
        }
        // Cheap checks every turn; the clock only every 64 empty turns or per batch.
        if n > 0 || empty.is_multiple_of(64) {
            let now = Instant::now();
            if n > 0 {
                last_pkt = now;
            }
            if stop.load(Ordering::Relaxed) || deadline.is_some_and(|d| now >= d) {
                break;
            }
            if let (Some(i), true) = (idle, got_any) {
                if now - last_pkt >= i {
                    break;
                }
            }
            if now - last_tick >= Duration::from_secs(1) {
                rx.clock_mut().refresh();
                tick(rx);
                last_tick = now;
            }
        }
        if max_packets.is_some_and(|m| rx.counters().packets >= m) {
            break;
        }
    }
    Ok(())
}
