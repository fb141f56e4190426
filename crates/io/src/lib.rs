//! Packet I/O and buffers.
//!
//! - [`batch`]: packet descriptors and fixed-capacity batches;
//! - [`pool`]: the frame region made once at start-up and its free stacks;
//! - [`counters`]: per-stage counters, drops by reason;
//! - [`error`]: the one-line [`PortError`] everything below reports;
//! - [`port`]: the RX/TX traits every backend implements; [`registry`]: a port by URI ([`uri`]), above the backends;
//! - backends: [`afxdp`], [`afpacket`], [`pcap`], [`mem`];
//! - [`xdp`]: loading and attaching the XDP programs (C, `xdp/NAME.bpf.c`, compiled by `build.rs` with clang; [`xdp::objects`]);
//! - in-kernel pieces under [`xdp`]: [`xdp::fwd`] (L2 forwarder), [`xdp::generator`] (BPF_PROG_RUN
//!   live-frames generator), [`xdp::count`] (sink counter), each beside its program.

pub mod afpacket;
pub mod afxdp;
pub mod batch;
pub mod counters;
pub mod error;
pub mod file;
pub mod host;
pub mod link;
pub mod mem;
pub mod pcap;
pub mod pool;
pub mod port;
pub mod registry;
pub mod rng;
pub mod time;
pub mod uri;
pub mod xdp;

pub use batch::{Batch, Pkt, PktMut, PortId, DEFAULT_BATCH, MAX_BATCH};
pub use counters::{
    Counters, DropReason, KernelStats, Reason, Snapshot, StageCounters, StageSnapshot,
};
pub use error::PortError;
pub use port::{OpenOptions, Port, PortInfo, PortRole, RxPort, TxPort};
pub use registry::open;
pub use uri::Uri;
