//! The datapath's side of the controller port (issue 37): packet-ins out
//! (`controller` actions), packet-outs in (`PACKET_OUT`).
//!
//! Packet-ins: the datapath copies the frame into one of [`PIN_QUEUE`]
//! buffers allocated at start and hands it to the OpenFlow channel
//! through a bounded channel; the channel gives the buffer back once it
//! has made its messages. `try_send`/`try_recv` on a bounded std channel
//! neither allocate nor block; the send wakes the channel's thread when it
//! waits (a futex call), at most once per packet-in, which the rate limit
//! bounds. Before any copy, a token bucket ([`PinLimit`]: Open vSwitch's
//! `controller_rate` and `controller_burst`) admits the packet-in or drops
//! it; no buffer free drops it too. Both are counted
//! ([`SwDrop::ControllerRate`], [`SwDrop::ControllerQueue`]), and a switch
//! without an OpenFlow channel counts [`SwDrop::NoController`].
//!
//! Packet-outs come the other way, decoded by a connection's thread, at
//! most [`POUT_QUEUE`] waiting (a full queue is the sender's error). The
//! datapath takes them between batches (one `try_recv` per turn) and runs
//! their actions as a rule's (`table`: through the pipeline from table 0).

use super::actions::Meter;
use super::actions::MeterUnit;
use super::counters::{PortCounters, SwDrop};
use super::rule::{Action, Pin, PipeState};
use linerate_io::counters::bump;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;

/// Packet-in buffers (the most in flight to the channel).
pub const PIN_QUEUE: usize = 256;
/// The largest frame a packet-in carries (the datapath's own largest, its
/// `STRIDE`: checked there).
pub const PIN_DATA: usize = 2048;
/// Packet-outs waiting for the datapath.
pub const POUT_QUEUE: usize = 256;
/// Open vSwitch's bounds on `controller_rate` and `controller_burst`.
pub const MIN_RATE: u64 = 100;
pub const MIN_BURST: u64 = 25;
/// linerate's default packet-in rate (Open vSwitch has none unless one is
/// configured; a switch run as root next to hostile peers has one).
pub const DEFAULT_RATE: u64 = 1000;

/// One packet-in, as the datapath made it.
pub struct PinBuf {
    pub pin: Pin,
    pub in_port: u32,
    /// The pipeline's state when the packet reached the `controller`
    /// action (what earlier tables wrote; zero in a single table): Open
    /// vSwitch puts the non-zero ones in the packet-in's match.
    pub pipe: PipeState,
    /// The frame's length, and the bytes copied (`max_len` at most).
    pub total_len: u16,
    pub len: u16,
    pub data: [u8; PIN_DATA],
}

impl PinBuf {
    pub fn bytes(&self) -> &[u8] {
        &self.data[..self.len as usize]
    }
}

/// The packet-in rate limit: `rate` a second, bursts of `burst` (0: a
/// quarter of the rate, as Open vSwitch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PinLimit {
    pub rate: u64,
    pub burst: u64,
}

impl Default for PinLimit {
    fn default() -> PinLimit {
        PinLimit {
            rate: DEFAULT_RATE,
            burst: 0,
        }
    }
}

impl PinLimit {
    /// Checked as Open vSwitch checks them; the error names the option.
    pub fn new(rate: u64, burst: u64) -> Result<PinLimit, String> {
        if rate < MIN_RATE {
            return Err(format!(
                "--controller-rate {rate}: at least {MIN_RATE} packet-ins a second"
            ));
        }
        if burst != 0 && burst < MIN_BURST {
            return Err(format!(
                "--controller-burst {burst}: at least {MIN_BURST} packet-ins"
            ));
        }
        Ok(PinLimit { rate, burst })
    }

    pub fn burst(&self) -> u64 {
        if self.burst == 0 {
            (self.rate / 4).max(MIN_BURST)
        } else {
            self.burst
        }
    }
}

/// The datapath's end: the limit, the free buffers, the full ones.
pub struct PinTx {
    bucket: Meter,
    /// The controller port's counters (one writer: the datapath).
    counters: Arc<PortCounters>,
    free: Receiver<Box<PinBuf>>,
    full: SyncSender<Box<PinBuf>>,
    /// Some controller asks for `INVALID_TTL` packet-ins (set by the
    /// channel; without one, a TTL drop takes no token of the bucket).
    ttl_wanted: Arc<std::sync::atomic::AtomicBool>,
}

/// The channel's end: packet-ins to send, and where their buffers go back.
pub struct PinRx {
    pub full: Receiver<Box<PinBuf>>,
    free: SyncSender<Box<PinBuf>>,
}

impl PinRx {
    /// Give a buffer back to the datapath.
    pub fn give_back(&self, b: Box<PinBuf>) {
        // Never full: there are as many places as buffers.
        let _ = self.free.try_send(b);
    }
}

/// The two ends, with [`PIN_QUEUE`] buffers; the datapath's end counts
/// into `counters` (the controller port's).
pub fn pin_queue(limit: PinLimit, counters: Arc<PortCounters>) -> (PinTx, PinRx) {
    let (free_tx, free_rx) = sync_channel(PIN_QUEUE);
    let (full_tx, full_rx) = sync_channel(PIN_QUEUE);
    for _ in 0..PIN_QUEUE {
        let b = Box::new(PinBuf {
            pin: Pin::new(0),
            in_port: 0,
            pipe: PipeState::default(),
            total_len: 0,
            len: 0,
            data: [0; PIN_DATA],
        });
        let _ = free_tx.try_send(b);
    }
    let bucket = Meter::new(0, MeterUnit::Pktps, limit.rate, limit.burst());
    (
        PinTx {
            bucket,
            counters,
            free: free_rx,
            full: full_tx,
            ttl_wanted: Arc::default(),
        },
        PinRx {
            full: full_rx,
            free: free_tx,
        },
    )
}

impl PinTx {
    /// Does a controller ask for `INVALID_TTL` packet-ins (a relaxed load;
    /// the channel keeps [`PinTx::ttl_flag`] current)?
    #[inline]
    pub fn ttl_wanted(&self) -> bool {
        self.ttl_wanted.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The flag behind [`PinTx::ttl_wanted`].
    pub fn ttl_flag(&self) -> Arc<std::sync::atomic::AtomicBool> {
        self.ttl_wanted.clone()
    }

    /// Hand `frame` (received on `in_port`, with the pipeline's state
    /// `pipe`) to the channel, or say why not.
    #[inline]
    pub fn post(
        &mut self,
        pin: &Pin,
        in_port: u32,
        pipe: &PipeState,
        frame: &[u8],
        now_ns: u64,
    ) -> Result<(), SwDrop> {
        let r = self.hand_over(pin, in_port, pipe, frame, now_ns);
        let c = &self.counters;
        match r {
            Ok(()) => {
                bump(&c.tx_packets, 1);
                bump(&c.tx_bytes, frame.len() as u64);
            }
            Err(_) => bump(&c.tx_dropped, 1),
        }
        r
    }

    #[inline]
    fn hand_over(
        &mut self,
        pin: &Pin,
        in_port: u32,
        pipe: &PipeState,
        frame: &[u8],
        now_ns: u64,
    ) -> Result<(), SwDrop> {
        if !self.bucket.admit(now_ns, 1) {
            return Err(SwDrop::ControllerRate);
        }
        let Ok(mut b) = self.free.try_recv() else {
            return Err(SwDrop::ControllerQueue);
        };
        let n = frame.len().min(pin.max_len as usize).min(PIN_DATA);
        b.data[..n].copy_from_slice(&frame[..n]);
        b.pin = *pin;
        b.in_port = in_port;
        b.pipe = *pipe;
        b.total_len = frame.len().min(u16::MAX as usize) as u16;
        b.len = n as u16;
        // As many places as buffers: never full. If the channel's end is
        // gone (the switch stopping), the packet-in is lost with it.
        self.full.try_send(b).map_err(|_| SwDrop::ControllerQueue)
    }
}

/// A decoded `PACKET_OUT`: the frame, the port it is said to come from,
/// and the actions to run on it.
pub struct PacketOut {
    pub in_port: u32,
    pub actions: Vec<Action>,
    pub frame: Vec<u8>,
}

/// The control side's end of the packet-out queue.
#[derive(Clone)]
pub struct PoutTx(SyncSender<PacketOut>);

/// The datapath's end.
pub struct PoutRx(Receiver<PacketOut>);

pub fn pout_queue() -> (PoutTx, PoutRx) {
    let (tx, rx) = sync_channel(POUT_QUEUE);
    (PoutTx(tx), PoutRx(rx))
}

impl PoutTx {
    /// Queue one; false when [`POUT_QUEUE`] wait already (or the datapath
    /// is gone).
    pub fn send(&self, p: PacketOut) -> bool {
        self.0.try_send(p).is_ok()
    }
}

impl PoutRx {
    /// The next waiting packet-out, if any (a couple of atomic loads when
    /// none).
    #[inline]
    pub fn next(&self) -> Option<PacketOut> {
        // Empty or disconnected (the channel gone): nothing.
        self.0.try_recv().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bucket_admits_its_burst_then_its_rate() {
        let (mut tx, rx) = pin_queue(PinLimit::new(1000, 50).unwrap(), Default::default());
        let f = [7u8; 100];
        let p = Pin::new(60);
        let mut ok = 0;
        let mut rate = 0;
        let mut queue = 0;
        // 300 at one instant: the burst passes, the rest is the rate's.
        for _ in 0..300 {
            match tx.post(&p, 3, &PipeState::default(), &f, 1_000_000_000) {
                Ok(()) => ok += 1,
                Err(SwDrop::ControllerRate) => rate += 1,
                Err(SwDrop::ControllerQueue) => queue += 1,
                Err(d) => panic!("{d:?}"),
            }
        }
        assert_eq!((ok, rate, queue), (50, 250, 0));
        let b = rx.full.try_recv().unwrap();
        assert_eq!((b.len, b.total_len, b.in_port), (60, 100, 3));
        assert_eq!(b.bytes(), &f[..60]);
        rx.give_back(b);
        // A second later: 1000 more tokens, capped at the burst.
        let mut ok2 = 0;
        for _ in 0..100 {
            ok2 += tx
                .post(&p, 3, &PipeState::default(), &f, 2_000_000_000)
                .is_ok() as u32;
        }
        assert_eq!(ok2, 50);
    }

    #[test]
    fn no_free_buffer_is_a_counted_drop() {
        let (mut tx, rx) = pin_queue(
            PinLimit::new(1_000_000, 100_000).unwrap(),
            Default::default(),
        );
        let f = [1u8; 64];
        let p = Pin::new(crate::switch::rule::PIN_WHOLE);
        for _ in 0..PIN_QUEUE {
            tx.post(&p, 1, &PipeState::default(), &f, 1).unwrap();
        }
        assert_eq!(
            tx.post(&p, 1, &PipeState::default(), &f, 1),
            Err(SwDrop::ControllerQueue)
        );
        // One given back: room for one.
        let b = rx.full.try_recv().unwrap();
        assert_eq!(b.len, 64);
        rx.give_back(b);
        assert!(tx.post(&p, 1, &PipeState::default(), &f, 1).is_ok());
        assert_eq!(
            tx.post(&p, 1, &PipeState::default(), &f, 1),
            Err(SwDrop::ControllerQueue)
        );
    }

    #[test]
    fn limits_are_checked_as_open_vswitch_checks_them() {
        assert!(PinLimit::new(99, 0)
            .unwrap_err()
            .contains("--controller-rate 99"));
        assert!(PinLimit::new(100, 24)
            .unwrap_err()
            .contains("--controller-burst 24"));
        assert_eq!(PinLimit::new(1000, 0).unwrap().burst(), 250);
        assert_eq!(PinLimit::new(100, 0).unwrap().burst(), 25);
    }
}
