//! Measurement: the test bed of namespaces and veth pairs, the bench (RFC
//! 2544 and the studies of docs/BENCHMARKS.md, [`study`]), full factorial
//! experiments with ANOVA, HTML reports, and the watchdog that cleans up
//! after a killed process.

pub mod bench;
pub mod experiment;
pub mod frame_size;
pub mod fuzz;
pub mod guard;
pub mod pgroup;
pub mod reap;
pub mod report;
pub mod study;
pub mod testbed;
