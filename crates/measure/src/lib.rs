//! Measurement: the test bed of namespaces and veth pairs, the TSC clock,
//! and (later) the RFC 2544 bench and statistics.

pub mod bench;
pub mod experiment;
pub mod testbed;
pub mod tsc;
