//! The port abstraction: one trait pair, four backends (opened by URI in
//! [`crate::registry`], above them).
//!
//! A port is split into an RX half and a TX half so that a forwarder can
//! run one direction per core (RX of A with TX of B on one thread). Every
//! call moves a whole batch: the per-packet path makes no syscall.

use crate::batch::{Batch, Pkt, PortId};
use crate::counters::KernelStats;
pub use crate::error::PortError;

/// Receive half of a port.
pub trait RxPort: Send {
    /// Append up to `batch.room()` received packets to `batch`; never blocks.
    /// Returns how many were appended. The frames belong to this port until
    /// [`RxPort::release`], and the batch with them ([`Batch::claim`]): a
    /// batch still holding another port's frames is an error, nothing
    /// appended.
    fn recv(&mut self, batch: &mut Batch) -> Result<usize, PortError>;
    /// Give every frame of `batch` back to the port and clear the batch.
    /// A batch this port did not fill is refused ([`Batch::check_owner`]):
    /// an error, the batch and the port untouched; an empty batch is
    /// released anywhere.
    fn release(&mut self, batch: &mut Batch) -> Result<(), PortError>;
    /// Sleep until packets may be there or `timeout_ms` passes (the
    /// poll()/need_wakeup mode). Busy-polling callers never call this.
    fn wait(&mut self, timeout_ms: i32) -> Result<(), PortError> {
        let _ = timeout_ms;
        Ok(())
    }
    /// True once a finite source (a pcap file without loop) is exhausted.
    fn at_end(&self) -> bool {
        false
    }
    /// Counters kept by the kernel side (one syscall; call at most once a second).
    fn kernel_stats(&self) -> KernelStats {
        KernelStats::default()
    }
}

/// Transmit half of a port.
pub trait TxPort: Send {
    /// Queue the packets for transmission (copying their bytes into this
    /// port's own frames) and return how many, from the front, were taken.
    /// Those not taken (ring full) are the caller's to count as drops.
    fn send(&mut self, pkts: &[Pkt]) -> Result<usize, PortError>;
    /// Kick the kernel / reclaim completed frames. Called once per loop turn.
    fn flush(&mut self) -> Result<(), PortError> {
        Ok(())
    }
    /// At the end of a run: write out whatever the port still buffers (a
    /// capture file's last records), so that its counters are final.
    fn finish(&mut self) -> Result<(), PortError> {
        Ok(())
    }
    /// Packets queued but not yet known to be handed to the wire.
    fn in_flight(&self) -> usize {
        0
    }
    /// Largest frame (bytes, without FCS) this port transmits.
    fn max_frame(&self) -> usize {
        1514
    }
    /// Counters kept by the kernel side.
    fn kernel_stats(&self) -> KernelStats {
        KernelStats::default()
    }
}

/// The RX half of a port that only transmits (a pcap file being written,
/// a mem sink): gives nothing and is at its end from the start.
pub struct NoRx(PortId);

impl NoRx {
    pub fn new() -> NoRx {
        NoRx(PortId::fresh())
    }
}

impl Default for NoRx {
    fn default() -> Self {
        NoRx::new()
    }
}

impl RxPort for NoRx {
    fn recv(&mut self, batch: &mut Batch) -> Result<usize, PortError> {
        batch.claim(self.0)?;
        Ok(0)
    }
    fn release(&mut self, batch: &mut Batch) -> Result<(), PortError> {
        // It lends no frame: only an empty batch is its to clear.
        batch.check_owner(self.0)?;
        batch.clear();
        Ok(())
    }
    fn at_end(&self) -> bool {
        true
    }
}

/// What a port is, for reports.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct PortInfo {
    /// The URI as given.
    pub uri: String,
    /// Backend: "afxdp", "afpacket", "pcap", "mem".
    pub kind: &'static str,
    /// Human details: "native XDP, copy mode, queue 0, need_wakeup".
    pub detail: String,
    /// Clock of `Pkt::ts_ns` ("none", "kernel-realtime", "tsc", "file").
    pub clock: &'static str,
    /// Interface index for interface-backed ports.
    pub ifindex: Option<u32>,
    /// Interface name for interface-backed ports.
    pub ifname: Option<String>,
}

/// An open port: both halves plus its description.
pub struct Port {
    pub info: PortInfo,
    pub rx: Box<dyn RxPort>,
    pub tx: Box<dyn TxPort>,
}

/// How to open ports (sizes chosen by the pipeline).
#[derive(Clone, Debug)]
pub struct OpenOptions {
    /// Batch size the pipeline will use.
    pub batch: usize,
    /// Frames in each ring (RX and TX); power of two.
    pub ring_size: u32,
    /// Frame size in bytes (2048 or 4096).
    pub frame_size: u32,
    /// Busy-poll (true) or use need_wakeup/poll (false) where the backend has the choice.
    pub busy_poll: bool,
    /// What the caller does with the port. A `pcap:` file in `mode=auto`
    /// follows it: a port only received from never creates its file (a
    /// missing one is an error, not a new empty capture), a port only sent
    /// to never reads (nor replaces) an existing one.
    pub role: PortRole,
    /// `afxdp:` ports: run the switch's offload program
    /// ([`crate::xdp::switch_offload`]) instead of `xsk_redirect`; its maps
    /// are then [`crate::afxdp::offload_maps`]. Other backends ignore it.
    pub switch_offload: bool,
}

/// What a caller does with a port (see [`OpenOptions::role`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PortRole {
    /// Both halves are used (`fwd`, `switch`).
    #[default]
    Both,
    /// Only the RX half (capture, count, a replayed file).
    RxOnly,
    /// Only the TX half (gen's port, capture's `--out`).
    TxOnly,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            batch: crate::batch::DEFAULT_BATCH,
            ring_size: 2048,
            frame_size: crate::pool::DEFAULT_FRAME_SIZE,
            busy_poll: true,
            role: PortRole::Both,
            switch_offload: false,
        }
    }
}
