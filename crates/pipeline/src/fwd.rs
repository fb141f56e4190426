//! The L2 forwarder (being written).
