//! The L2 forwarder: DPDK l2fwd's job, run to completion.
//!
//! Each direction is one loop: receive a batch from port A, optionally
//! rewrite the MAC addresses in place, hand the batch to port B's TX,
//! release the frames to A. Every packet received is either forwarded
//! (taken by B's TX) or dropped with a reason, so `received = forwarded +
//! drops` after every batch. Both directions run on one core by default
//! (alternating), or one core per direction.
//!
//! With profiling on, the loop reads the TSC around each step of a batch
//! and adds the cycles to per-stage counters (seed 000, Table II): RX
//! (`recv`), processing (MAC rewrite and accounting), TX (`send` + `flush`)
//! and buffer management (`release`). Empty polls are counted apart.

pub mod run;
pub mod xdp;

use crate::perf::{Cycles, CyclesSnapshot, Stage};
use crate::poll::Poll;
use linerate_io::time::rdtsc;
use linerate_io::{Batch, DropReason, RxPort, StageCounters, StageSnapshot, TxPort};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// New destination and source MAC written into every forwarded frame (the
/// same type the in-kernel forwarder takes).
pub use linerate_io::xdp::fwd::MacPair as MacRewrite;

pub use linerate_wire::ethernet::parse_mac;

/// The forwarder's stages for `--profile`: RX = `recv` (ring read), TX =
/// `send` + `flush`, buffers = `release`, processing = MAC rewrite and
/// accounting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FwdStage {
    Rx,
    Tx,
    Buffers,
    Processing,
}

impl Stage for FwdStage {
    const ALL: &'static [FwdStage] = &[
        FwdStage::Rx,
        FwdStage::Tx,
        FwdStage::Buffers,
        FwdStage::Processing,
    ];
    fn name(self) -> &'static str {
        match self {
            FwdStage::Rx => "rx",
            FwdStage::Tx => "tx",
            FwdStage::Buffers => "buffers",
            FwdStage::Processing => "processing",
        }
    }
    #[inline(always)]
    fn index(self) -> usize {
        self as usize
    }
}

/// TSC cycles spent per stage (one writer, read by the reporter).
pub type StageCycles = Cycles<FwdStage>;
/// Plain copy of [`StageCycles`].
pub type FwdCycles = CyclesSnapshot<FwdStage>;

/// One direction of forwarding: RX of one port into TX of the other.
pub struct Direction {
    /// "A->B" or "B->A".
    pub name: &'static str,
    pub rx: Box<dyn RxPort>,
    pub tx: Box<dyn TxPort>,
    pub rewrite: Option<MacRewrite>,
    /// Counters: received, passed (= forwarded), drops by reason.
    pub counters: Arc<StageCounters>,
    pub cycles: Arc<StageCycles>,
    batch: Batch,
}

impl Direction {
    pub fn new(
        name: &'static str,
        rx: Box<dyn RxPort>,
        tx: Box<dyn TxPort>,
        rewrite: Option<MacRewrite>,
        batch: usize,
    ) -> Direction {
        Direction {
            name,
            rx,
            tx,
            rewrite,
            counters: Arc::new(StageCounters::default()),
            cycles: Arc::new(StageCycles::default()),
            batch: Batch::new(batch),
        }
    }

    /// One turn of the run-to-completion loop: at most one batch.
    /// Returns the number of packets received.
    #[inline]
    pub fn poll(&mut self, profile: bool) -> Result<usize, linerate_io::PortError> {
        let t0 = if profile { rdtsc() } else { 0 };
        let n = self.rx.recv(&mut self.batch)?;
        if n == 0 {
            // Still reap TX completions so that frames come back while idle.
            self.tx.flush()?;
            if profile {
                self.cycles.empty_poll(rdtsc().wrapping_sub(t0));
            }
            return Ok(0);
        }
        let t1 = if profile { rdtsc() } else { 0 };

        // Processing: MAC rewrite in place, byte count for the counters.
        let mut bytes = 0u64;
        let max = self.tx.max_frame() as u32;
        let mut too_big = 0u64;
        for mut p in self.batch.iter_mut() {
            bytes += p.len() as u64;
            if p.len() > max {
                too_big += 1;
            }
            if let Some(rw) = &self.rewrite {
                let b = p.bytes_mut();
                if b.len() >= 12 {
                    b[0..6].copy_from_slice(&rw.dst);
                    b[6..12].copy_from_slice(&rw.src);
                }
            }
        }
        let t2 = if profile { rdtsc() } else { 0 };

        // TX: the port copies what it takes. Oversized frames are not offered.
        // A port that fails (its interface went away) takes nothing: the
        // batch is still counted (tx_error) and released, then the error
        // ends the run.
        let r = if too_big == 0 {
            self.tx.send(self.batch.pkts())
        } else {
            self.send_fitting(max)
        };
        let (sent, tx_err) = match r.and_then(|k| self.tx.flush().map(|()| k)) {
            Ok(k) => (k, None),
            Err(e) => (0, Some(e)),
        };
        let t3 = if profile { rdtsc() } else { 0 };

        let sent_bytes: u64 = if sent == n && too_big == 0 {
            bytes
        } else {
            self.batch.pkts()[..sent]
                .iter()
                .map(|p| p.len() as u64)
                .sum()
        };
        let c = &self.counters;
        c.add_received(n as u64, bytes);
        c.add_passed(sent as u64, sent_bytes);
        let unsent = (n - sent) as u64;
        if too_big > 0 {
            c.add_drop(DropReason::TooBig, too_big);
        }
        if unsent > too_big {
            let why = if tx_err.is_some() {
                DropReason::TxError
            } else {
                DropReason::RingFull
            };
            c.add_drop(why, unsent - too_big);
        }
        // Refused only for a batch of another port (a bug): an error of the run.
        let released = self.rx.release(&mut self.batch);
        if profile {
            let t4 = rdtsc();
            let cy = &self.cycles;
            cy.add(FwdStage::Rx, t1.wrapping_sub(t0));
            cy.add(FwdStage::Processing, t2.wrapping_sub(t1));
            cy.add(FwdStage::Tx, t3.wrapping_sub(t2));
            cy.add(FwdStage::Buffers, t4.wrapping_sub(t3));
            cy.batch();
        }
        match tx_err {
            Some(e) => Err(e),
            None => released.map(|()| n),
        }
    }

    /// Rare path: some frames exceed the output's frame size. Move the ones
    /// that fit to the front (order kept) and send those; the oversized ones
    /// stay past `sent` and are released with the batch.
    #[cold]
    fn send_fitting(&mut self, max: u32) -> Result<usize, linerate_io::PortError> {
        let mut w = 0;
        for r in 0..self.batch.len() {
            if self.batch.pkts()[r].len() <= max {
                self.batch.swap(w, r);
                w += 1;
            }
        }
        // The partition keeps the order of the fitting frames: each moves
        // forward only past oversized ones.
        let pk = &self.batch.pkts()[..w];
        self.tx.send(pk)
    }

    /// Wait for traffic (poll mode).
    pub fn wait(&mut self, timeout_ms: i32) -> Result<(), linerate_io::PortError> {
        self.rx.wait(timeout_ms)
    }

    pub fn at_end(&self) -> bool {
        self.rx.at_end()
    }
}

pub use crate::poll::Polling;

/// The directions as the polling core ([`crate::poll::run`]) drives them.
struct Dirs<'a, 'b> {
    dirs: &'a mut [&'b mut Direction],
    profile: bool,
}

impl Poll for Dirs<'_, '_> {
    type Error = linerate_io::PortError;
    #[inline]
    fn turn(&mut self) -> Result<usize, Self::Error> {
        let mut got = 0;
        for d in self.dirs.iter_mut() {
            got += d.poll(self.profile)?;
        }
        Ok(got)
    }
    fn at_end(&self) -> bool {
        self.dirs.iter().all(|d| d.at_end())
    }
    fn wait(&mut self, timeout_ms: i32) -> Result<(), Self::Error> {
        // Each direction in turn, so an idle one never holds up the other
        // for long. (One poll() over every socket would be tighter; the
        // port trait does not expose its descriptors.)
        for d in self.dirs.iter_mut() {
            d.wait(timeout_ms)?;
        }
        Ok(())
    }
    fn flush(&mut self) -> Result<usize, Self::Error> {
        let mut n = 0;
        for d in self.dirs.iter_mut() {
            d.tx.flush()?;
            n += d.tx.in_flight();
        }
        Ok(n)
    }
    fn finish(&mut self) -> Result<(), Self::Error> {
        for d in self.dirs.iter_mut() {
            d.tx.finish()?;
        }
        Ok(())
    }
}

/// Run directions to completion on the calling thread until `stop` is set
/// or every RX is at its end (finite sources). Accounting is exact at
/// return: each batch is fully counted before the stop flag is checked.
pub fn run_loop(
    dirs: &mut [&mut Direction],
    stop: &AtomicBool,
    polling: Polling,
    profile: bool,
) -> Result<(), linerate_io::PortError> {
    crate::poll::run(&mut Dirs { dirs, profile }, stop, polling)
}

/// Final or periodic account of one direction.
#[derive(Clone, Debug, serde::Serialize)]
pub struct DirectionReport {
    pub direction: &'static str,
    pub received: u64,
    pub received_bytes: u64,
    pub forwarded: u64,
    pub forwarded_bytes: u64,
    pub dropped: u64,
    pub drops: Vec<(&'static str, u64)>,
    pub balanced: bool,
}

impl DirectionReport {
    pub fn from_snapshot(direction: &'static str, s: &StageSnapshot) -> DirectionReport {
        DirectionReport {
            direction,
            received: s.received,
            received_bytes: s.received_bytes,
            forwarded: s.passed,
            forwarded_bytes: s.passed_bytes,
            dropped: s.dropped(),
            drops: s.drops_nonzero().collect(),
            balanced: s.balanced(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_io::{Pkt, PortError};

    /// A source of `total` numbered frames of `len` bytes.
    struct Src {
        frames: Vec<Vec<u8>>,
        next: usize,
        total: usize,
        outstanding: usize,
    }
    impl RxPort for Src {
        fn recv(&mut self, b: &mut Batch) -> Result<usize, PortError> {
            assert_eq!(self.outstanding, 0, "recv before release");
            let mut n = 0;
            while !b.is_full() && self.next < self.total {
                let k = self.next % self.frames.len();
                let f = &mut self.frames[k];
                f[20] = self.next as u8;
                // SAFETY: one test buffer per descriptor; it outlives the descriptor and nothing else touches it meanwhile.
                b.push(unsafe {
                    Pkt::from_raw(f.as_mut_ptr(), f.len() as u32, self.next as u64, 0)
                });
                self.next += 1;
                n += 1;
            }
            self.outstanding = n;
            Ok(n)
        }
        fn release(&mut self, b: &mut Batch) -> Result<(), PortError> {
            self.outstanding = 0;
            b.clear();
            Ok(())
        }
        fn at_end(&self) -> bool {
            self.next >= self.total
        }
    }
    /// A sink that takes at most `per_call` per send and records bytes.
    struct Sink {
        got: Vec<Vec<u8>>,
        per_call: usize,
        max: usize,
    }
    impl TxPort for Sink {
        fn send(&mut self, pkts: &[Pkt]) -> Result<usize, PortError> {
            let n = pkts.len().min(self.per_call);
            for p in &pkts[..n] {
                self.got.push(p.bytes().to_vec());
            }
            Ok(n)
        }
        fn max_frame(&self) -> usize {
            self.max
        }
    }

    fn frames(sizes: &[usize]) -> Vec<Vec<u8>> {
        sizes.iter().map(|&s| vec![0xab; s]).collect()
    }

    #[test]
    fn fwd_stages_fit() {
        assert!(crate::perf::stages_fit::<FwdStage>());
    }

    #[test]
    fn forwards_everything_and_accounts() {
        let src = Src {
            frames: frames(&[60, 128, 1514]),
            next: 0,
            total: 1000,
            outstanding: 0,
        };
        let sink = Sink {
            got: vec![],
            per_call: usize::MAX,
            max: 1514,
        };
        let rw = MacRewrite {
            dst: [2, 0, 0, 0, 0, 9],
            src: [2, 0, 0, 0, 0, 8],
        };
        let mut d = Direction::new("A->B", Box::new(src), Box::new(sink), Some(rw), 32);
        let stop = AtomicBool::new(false);
        run_loop(&mut [&mut d], &stop, Polling::Busy, true).unwrap();
        let s = d.counters.snapshot();
        assert_eq!(s.received, 1000);
        assert_eq!(s.passed, 1000);
        assert!(s.balanced());
        let cy = d.cycles.snapshot();
        assert!(cy.batches >= 1000 / 32);
        assert!(cy.of(FwdStage::Rx) > 0 && cy.of(FwdStage::Tx) > 0);
    }

    #[test]
    fn ring_full_and_too_big_are_counted_drops() {
        let src = Src {
            frames: frames(&[60, 2000, 100]),
            next: 0,
            total: 300,
            outstanding: 0,
        };
        let sink = Sink {
            got: vec![],
            per_call: 10,
            max: 1514,
        };
        let mut d = Direction::new("A->B", Box::new(src), Box::new(sink), None, 32);
        let stop = AtomicBool::new(false);
        run_loop(&mut [&mut d], &stop, Polling::Busy, false).unwrap();
        let s = d.counters.snapshot();
        assert_eq!(s.received, 300);
        assert_eq!(s.drop_of(DropReason::TooBig), 100);
        assert!(s.drop_of(DropReason::RingFull) > 0);
        assert!(s.balanced(), "{s:?}");
    }

    #[test]
    fn mac_parse() {
        assert_eq!(parse_mac("02:00:0a:ff:00:01"), Some([2, 0, 10, 255, 0, 1]));
        assert_eq!(parse_mac("02:00:0a:ff:00"), None);
        assert_eq!(parse_mac("02:00:0a:ff:00:01:02"), None);
        assert_eq!(parse_mac("zz:00:0a:ff:00:01"), None);
    }
}
