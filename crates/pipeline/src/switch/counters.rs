//! What the switch counts: drops by reason ([`SwDrop`]), per port, the
//! caches' and classifier's counters, and the stages of `--profile`.

use crate::perf::{self, Cycles, CyclesSnapshot};
use linerate_io::counters::{Counters, Reason, Snapshot};
use std::sync::atomic::AtomicU64;

/// Why the switch dropped a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SwDrop {
    /// No rule matched (table miss).
    NoMatch,
    /// The rule's actions are `drop` (empty).
    ActionDrop,
    /// The actions produced no output (only the input port, unknown ports
    /// or groups, empty groups).
    NoOutput,
    /// `dec_ttl` on TTL / hop limit 0 or 1.
    TtlExpired,
    /// A meter's bucket was empty (or the meter does not exist).
    Metered,
    /// `push_vlan` without room, or the frame was too short for an action.
    Malformed,
    /// The pipeline went deeper than its resubmit limit (a loop of tables).
    ResubmitLimit,
    /// Every copy found its TX ring (or staging area) full.
    TxFull,
    /// Every copy was larger than its output port's frame size.
    TooBig,
    /// An output port failed (its interface went away): its copies are
    /// counted here and the switch stops with the port's error.
    TxError,
    /// A packet-in beyond the controller rate (`--controller-rate`).
    ControllerRate,
    /// A packet-in with no free buffer (the channel is behind).
    ControllerQueue,
    /// A packet-in on a switch without an OpenFlow channel.
    NoController,
}

impl SwDrop {
    pub const COUNT: usize = <SwDrop as Reason>::ALL.len();
}

// The counter arrays have room for every reason (a compile error, not an
// index out of bounds at run time).
const _: () = assert!(SwDrop::COUNT <= linerate_io::counters::MAX_REASONS);

impl Reason for SwDrop {
    const ALL: &'static [SwDrop] = &[
        SwDrop::NoMatch,
        SwDrop::ActionDrop,
        SwDrop::NoOutput,
        SwDrop::TtlExpired,
        SwDrop::Metered,
        SwDrop::Malformed,
        SwDrop::ResubmitLimit,
        SwDrop::TxFull,
        SwDrop::TooBig,
        SwDrop::TxError,
        SwDrop::ControllerRate,
        SwDrop::ControllerQueue,
        SwDrop::NoController,
    ];
    fn name(self) -> &'static str {
        match self {
            SwDrop::NoMatch => "no_match",
            SwDrop::ActionDrop => "action_drop",
            SwDrop::NoOutput => "no_output",
            SwDrop::TtlExpired => "ttl_expired",
            SwDrop::Metered => "metered",
            SwDrop::Malformed => "malformed",
            SwDrop::ResubmitLimit => "resubmit_limit",
            SwDrop::TxFull => "tx_full",
            SwDrop::TooBig => "too_big",
            SwDrop::TxError => "tx_error",
            SwDrop::ControllerRate => "controller_rate",
            SwDrop::ControllerQueue => "controller_queue_full",
            SwDrop::NoController => "no_controller",
        }
    }
    #[inline(always)]
    fn index(self) -> usize {
        self as usize
    }
}

/// Switch-wide packet counters (one writer: the datapath); `passed`:
/// packets of which at least one copy was sent.
pub type SwitchCounters = Counters<SwDrop>;
/// Plain copy of [`SwitchCounters`].
pub type SwitchSnapshot = Snapshot<SwDrop>;

/// Per-port counters (copies sent count once per copy).
#[derive(Debug, Default)]
pub struct PortCounters {
    pub rx_packets: AtomicU64,
    pub rx_bytes: AtomicU64,
    pub tx_packets: AtomicU64,
    pub tx_bytes: AtomicU64,
    /// Copies for this port not sent (ring or staging full, too big).
    pub tx_dropped: AtomicU64,
}

/// Cache and classifier counters, published by the datapath once per batch.
#[derive(Debug, Default)]
pub struct CacheCounters {
    pub emc_hits: AtomicU64,
    pub emc_misses: AtomicU64,
    pub emc_inserts: AtomicU64,
    pub emc_skipped_inserts: AtomicU64,
    /// Lookups that skipped the cache while its hit rate was low.
    pub emc_bypassed: AtomicU64,
    /// `learn(...)` requests handed to the control side, and those lost
    /// because its queue was full.
    pub learn_requests: AtomicU64,
    pub learn_queue_full: AtomicU64,
    /// Learned rules the control side refused: their table was full and
    /// its policy evicts nothing (written by the learning thread).
    pub learn_refused: AtomicU64,
    /// `PACKET_OUT`s run with at least one copy sent, and with none.
    pub packet_outs: AtomicU64,
    pub packet_outs_dropped: AtomicU64,
    /// Megaflows (multi-table pipelines): hits, misses (walked live), how
    /// many there are and their masks.
    pub mega_hits: AtomicU64,
    pub mega_misses: AtomicU64,
    pub megaflows: AtomicU64,
    pub mega_masks: AtomicU64,
    /// Packets that went to the classifier.
    pub cls_lookups: AtomicU64,
    pub cls_matched: AtomicU64,
    pub subtables_searched: AtomicU64,
}

/// The switch's stages for `--profile`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SwStage {
    Rx,
    Extract,
    Lookup,
    Actions,
    Tx,
    Buffers,
}

impl perf::Stage for SwStage {
    const ALL: &'static [SwStage] = &[
        SwStage::Rx,
        SwStage::Extract,
        SwStage::Lookup,
        SwStage::Actions,
        SwStage::Tx,
        SwStage::Buffers,
    ];
    fn name(self) -> &'static str {
        match self {
            SwStage::Rx => "rx",
            SwStage::Extract => "extract",
            SwStage::Lookup => "lookup",
            SwStage::Actions => "actions",
            SwStage::Tx => "tx",
            SwStage::Buffers => "buffers",
        }
    }
    #[inline(always)]
    fn index(self) -> usize {
        self as usize
    }
}

/// TSC cycles per stage (one writer).
pub type SwitchCycles = Cycles<SwStage>;
/// Plain copy of [`SwitchCycles`].
pub type SwitchCyclesSnapshot = CyclesSnapshot<SwStage>;
