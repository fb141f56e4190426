//! Readiness: poll a condition until it holds, or read a process's lines
//! until one says what the test waits for, up to a generous limit, never a
//! fixed sleep; the failure names what never happened.
//!
//! All of these are test-only conveniences: they panic when the limit
//! passes (that is how the test fails). The studies wait with
//! [`crate::Proc::wait_ready`], which returns an error instead.

use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// Poll `cond` (every 10 ms) until it holds; panic after `limit` naming
/// `what` (the condition that never came true).
pub fn wait_until(limit: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    wait_for(limit, what, || cond().then_some(()))
}

/// Poll `f` (every 10 ms) until it gives a value; that value. Panics after
/// `limit` naming `what` (test-only).
pub fn wait_for<T>(limit: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let t = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            t.elapsed() < limit,
            "waited {:.1} s, in vain, for: {what}",
            limit.as_secs_f64()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The first line from `lines` (see [`crate::Proc::stdout_lines`]) for
/// which `f` gives a value; panics after `limit` (or when the stream ends)
/// naming `what` and the last line seen (test-only).
pub fn wait_line<T>(
    lines: &Receiver<String>,
    limit: Duration,
    what: &str,
    mut f: impl FnMut(&str) -> Option<T>,
) -> T {
    let t = Instant::now();
    let mut last = String::new();
    loop {
        let left = limit.saturating_sub(t.elapsed());
        match lines.recv_timeout(left) {
            Ok(l) => {
                if let Some(v) = f(&l) {
                    return v;
                }
                last = l;
            }
            Err(RecvTimeoutError::Timeout) => panic!(
                "waited {:.1} s, in vain, for: {what} (last line: {last})",
                limit.as_secs_f64()
            ),
            Err(RecvTimeoutError::Disconnected) => {
                panic!("output ended before: {what} (last line: {last})")
            }
        }
    }
}

/// Every further line of `lines` until the stream ends (the process
/// closed its stdout, e.g. exited); panics if it has not ended after
/// `limit` (test-only).
pub fn drain_lines(lines: &Receiver<String>, limit: Duration, what: &str) -> Vec<String> {
    let t = Instant::now();
    let mut v = Vec::new();
    loop {
        match lines.recv_timeout(limit.saturating_sub(t.elapsed())) {
            Ok(l) => v.push(l),
            Err(RecvTimeoutError::Disconnected) => return v,
            Err(RecvTimeoutError::Timeout) => panic!(
                "{what}: output still open after {:.1} s",
                limit.as_secs_f64()
            ),
        }
    }
}
