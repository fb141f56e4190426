//! DNAC-style capture (seed 002): symmetric steering of packets to worker
//! cores, batched delivery, and a forwarder in front of each worker that
//! drops early by rules (libpcap filters, priority classes), shunting
//! requests from the consumer, and TED (tail early dropping) under
//! congestion.
//!
//! * [`steer`]: software dispatcher, `symmetric_hash mod N` to per-worker
//!   SPSC rings ([`spsc`]) of fixed-size slots;
//! * [`forwarder`]: the per-packet decision and its counters;
//! * [`ted`]: the cut-off threshold controller;
//! * [`flowtable`]: the bounded per-worker connection table;
//! * [`filter`]: libpcap filter expressions compiled by libpcap;
//! * [`pcapng`]: the per-worker rotating pcapng writer;
//! * [`analyser`]: the in-process analyser API and the `http` analyser.

pub mod analyser;
pub mod ctl;
pub mod filter;
pub mod flowtable;
pub mod forwarder;
pub mod pcapng;
pub mod run;
pub mod spsc;
pub mod steer;
pub mod ted;
pub mod worker;

pub use analyser::{Analyser, AnalyserAction, HttpAnalyser, HttpConfig, HttpStats};
pub use filter::Filter;
pub use flowtable::{FlowEntry, FlowTable, FlowTableStats};
pub use forwarder::{
    CaptureDrop, Forwarder, ForwarderConfig, ForwarderCounts, ForwarderReport, ForwarderShared,
    ShuntSender, Verdict,
};
pub use pcapng::{
    check_existing, merge_files, merged_path, CaptureWriter, RotateConfig, WriterReport,
};
pub use steer::{worker_of, Dispatcher, Slot, SteerConfig, WorkerRx};
pub use ted::{Ted, TedConfig, TedStats};
