//! What a connection of the OpenFlow channel holds and counts: its slot
//! among [`super::channel::MAX_CONNECTIONS`] ([`SlotGuard`], released on
//! every way out), the connections' counters ([`ConnStats`]) and the
//! rate limit of their log lines ([`LogLimit`]).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Log lines about connections per second, at most.
pub const LOG_PER_SECOND: u32 = 10;

/// Counters of the connections themselves (the session's are
/// [`ChannelStats`]).
#[derive(Debug, Default)]
pub struct ConnStats {
    /// Closed without a `HELLO` (or a TLS handshake) within 5 s.
    pub hello_timeouts: AtomicU64,
    /// Closed after twice the inactivity probe without a message.
    pub probe_timeouts: AtomicU64,
    /// Closed before their `HELLO` to make room for a new connection.
    pub evicted: AtomicU64,
    /// Closed at once: every slot held by a connection past its `HELLO`.
    pub rejected: AtomicU64,
    /// TLS handshakes that failed (a certificate refused, not TLS).
    pub tls_failures: AtomicU64,
    /// Log lines left out (over [`LOG_PER_SECOND`]).
    pub log_lines_dropped: AtomicU64,
}

impl ConnStats {
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "hello_timeouts": self.hello_timeouts.load(Relaxed),
            "probe_timeouts": self.probe_timeouts.load(Relaxed),
            "evicted": self.evicted.load(Relaxed),
            "rejected": self.rejected.load(Relaxed),
            "tls_failures": self.tls_failures.load(Relaxed),
            "log_lines_dropped": self.log_lines_dropped.load(Relaxed),
        })
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A thread that panicked while holding it left consistent data (every
    // critical section here is a few plain assignments).
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// At most [`LOG_PER_SECOND`] lines a second (in windows of one second);
/// the lines over it are counted, and their number is logged before the
/// next line that gets through (and at the channel's end).
pub struct LogLimit {
    st: Mutex<(Instant, u32, u64)>,
    sink: Box<dyn Fn(&str) + Send + Sync>,
    dropped: Option<Arc<ConnStats>>,
}

impl LogLimit {
    /// Lines to stderr.
    pub fn stderr(stats: Arc<ConnStats>) -> LogLimit {
        LogLimit::to(Box::new(|l| eprintln!("{l}")), Some(stats))
    }

    /// Lines to nowhere (the fuzz target).
    pub fn quiet() -> LogLimit {
        LogLimit::to(Box::new(|_| {}), None)
    }

    pub fn to(sink: Box<dyn Fn(&str) + Send + Sync>, dropped: Option<Arc<ConnStats>>) -> LogLimit {
        LogLimit {
            st: Mutex::new((Instant::now(), 0, 0)),
            sink,
            dropped,
        }
    }

    pub fn line(&self, l: &str) {
        self.line_at(l, Instant::now())
    }

    pub(super) fn line_at(&self, l: &str, now: Instant) {
        let mut st = lock(&self.st);
        let (window, used, held) = &mut *st;
        if now.saturating_duration_since(*window) >= Duration::from_secs(1) {
            *window = now;
            *used = 0;
        }
        if *used >= LOG_PER_SECOND {
            *held += 1;
            if let Some(s) = &self.dropped {
                s.log_lines_dropped.fetch_add(1, Relaxed);
            }
            return;
        }
        *used += 1;
        if *held > 0 {
            (self.sink)(&format!(
                "openflow: {held} more lines about connections not logged (at most {LOG_PER_SECOND} a second)"
            ));
            *held = 0;
        }
        (self.sink)(l);
    }

    /// Log the number of lines held back, if any.
    pub fn finish(&self) {
        let mut st = lock(&self.st);
        if st.2 > 0 {
            (self.sink)(&format!(
                "openflow: {} more lines about connections not logged (at most {LOG_PER_SECOND} a second)",
                st.2
            ));
            st.2 = 0;
        }
    }
}

/// One slot's state, shared by the slot table and the connection.
#[derive(Default)]
struct SlotState {
    hello: AtomicBool,
    evict: AtomicBool,
}

/// The connection slots (see the module docs).
pub struct Slots {
    max: usize,
    /// (the connections served, oldest first; how many are being evicted).
    st: Mutex<(Vec<Arc<SlotState>>, usize)>,
}

/// What [`Slots::take`] found.
pub enum Take {
    Slot(SlotGuard),
    /// Every slot is held by a connection past its `HELLO`.
    Full,
    /// A connection could be evicted, but as many are being evicted as can
    /// be: wait for one of them to end.
    Wait,
}

/// A connection's slot, released when dropped (the connection's thread
/// ending in any way, a panic included).
pub struct SlotGuard {
    slots: Arc<Slots>,
    st: Arc<SlotState>,
}

impl Slots {
    pub fn new(max: usize) -> Arc<Slots> {
        Arc::new(Slots {
            max,
            st: Mutex::new((Vec::new(), 0)),
        })
    }

    /// A slot for a new connection: a free one, or the one of the oldest
    /// connection without a `HELLO` (told to close).
    pub fn take(self: &Arc<Self>) -> Take {
        let mut st = lock(&self.st);
        let (served, evicting) = &mut *st;
        if served.len() >= self.max {
            let Some(i) = served.iter().position(|s| !s.hello.load(Relaxed)) else {
                return Take::Full;
            };
            if *evicting >= self.max {
                return Take::Wait;
            }
            served.remove(i).evict.store(true, Relaxed);
            *evicting += 1;
        }
        let s = Arc::new(SlotState::default());
        served.push(s.clone());
        Take::Slot(SlotGuard {
            slots: self.clone(),
            st: s,
        })
    }

    /// [`Slots::take`], None unless it gives a slot.
    pub fn take_now(self: &Arc<Self>) -> Option<SlotGuard> {
        match self.take() {
            Take::Slot(g) => Some(g),
            _ => None,
        }
    }

    /// (connections served, connections being evicted).
    pub fn counts(&self) -> (usize, usize) {
        let st = lock(&self.st);
        (st.0.len(), st.1)
    }
}

impl SlotGuard {
    /// Record the peer's `HELLO`; false if the connection was evicted
    /// before it (then it must close). Under the table's lock, so a
    /// connection is never evicted after its `HELLO`.
    pub fn hello(&self) -> bool {
        let _st = lock(&self.slots.st);
        if self.st.evict.load(Relaxed) {
            return false;
        }
        self.st.hello.store(true, Relaxed);
        true
    }

    pub fn hello_seen(&self) -> bool {
        self.st.hello.load(Relaxed)
    }

    pub fn evicted(&self) -> bool {
        self.st.evict.load(Relaxed)
    }
}

impl Drop for SlotGuard {
    fn drop(&mut self) {
        let mut st = lock(&self.slots.st);
        let (served, evicting) = &mut *st;
        match served.iter().position(|s| Arc::ptr_eq(s, &self.st)) {
            Some(i) => {
                served.remove(i);
            }
            None => *evicting -= 1,
        }
    }
}
