//! linerate's one test kit: the helpers that the integration tests of every
//! crate (crates/*/tests) and the benchmark studies (linerate-measure's
//! `study`) share, once.
//!
//! - [`need`]: what a test needs from the machine (root, tools with their
//!   Debian packages, CPUs, a python3 with modules). A test never passes by
//!   skipping: a missing need fails it, naming how to get it.
//! - [`wait`]: readiness by polling a condition (or reading lines) up to a
//!   generous limit, never a fixed sleep.
//! - [`proc`]: child processes ([`Proc`]) killed and reaped on drop, run in a
//!   network namespace, read line by line, waited for until ready (with the
//!   child's standard error when it exits first), packet-socket and capture
//!   readiness from /proc.
//! - [`netns`]: network-namespace beds ([`Netns`], and the star topology
//!   [`NetnsStar`] built on it) that delete what they made on drop, also
//!   when the test panics; running code inside a namespace.
//! - [`fs`]: private temporary directories removed on drop, tmpfs mounts.
//! - [`chromium`] (feature `chromium`): headless-Chromium screenshots and
//!   pixel counts for the HTML report tests.
//!
//! Two kinds of function live here. Those the studies call (shipped in the
//! `linerate` binary through linerate-measure) return `Result` and never
//! panic on bad input: [`Proc::spawn`], [`Proc::wait_ready`],
//! [`Proc::finish`], [`Proc::wait`], [`Proc::output`], [`in_ns`],
//! [`running_packet_sockets`], [`has_capture_fd`], [`lines_of`]. The rest
//! (`require_*`, `wait_*`, `assert_*`, the beds, [`TempDir`], ...) are
//! test-only conveniences that panic with a message naming what failed: a
//! panic is how a test fails. Their docs say so.
//!
//! Everything is also re-exported at the crate root
//! (`use linerate_testkit::*`).

pub mod fs;
pub mod need;
pub mod netns;
pub mod proc;
pub mod wait;

#[cfg(feature = "chromium")]
pub mod chromium;

pub use fs::*;
pub use need::*;
pub use netns::*;
pub use proc::*;
pub use wait::*;
