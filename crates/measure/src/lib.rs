//! Measurement: the test bed of namespaces and veth pairs, the TSC clock,
//! the bench, full factorial experiments with ANOVA, and HTML reports.

pub mod bench;
pub mod experiment;
pub mod report;
pub mod testbed;
pub mod tsc;
