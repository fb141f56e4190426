//! One OpenFlow connection's framing loop, the same for every endpoint
//! (TCP, Unix, TLS) and for the fuzz target ([`fuzz_channel`], over an
//! in-memory stream): our `HELLO`, then whole messages in (the header's
//! length, at most 64 KiB, read whole before it is looked at) and the
//! session's replies out, one at a time.
//!
//! The loop holds the peer to two deadlines:
//! - its `HELLO` within [`HELLO_TIMEOUT`] of the connection (for TLS, the
//!   handshake counts against it), so a connection that says nothing can
//!   hold a slot for 5 s at most;
//! - with an inactivity probe of N s (Open vSwitch's `inactivity_probe`):
//!   after N s without a message from the peer it gets an
//!   `ECHO_REQUEST`, and after 2N s without one the connection is closed
//!   (a controller that vanished without a FIN, or stopped, is noticed).
//!   Time the switch spends on the peer's requests (applying a large
//!   batch, writing a dump) is not the peer's silence: it counts from the
//!   end of that work.
//!
//! Reads wake every 100 ms (the socket's read timeout) to look at the
//! deadlines, the switch stopping and an eviction.

use super::msg::{hello, ChannelStats, Session};
use super::slots::{LogLimit, SlotGuard};
use super::transport::Transport;
use super::wire::{Header, Writer, ECHO_REQUEST, HEADER, HELLO};
use crate::switch::ctl::Shared;
use std::io::{ErrorKind, Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a pause in a peer's stream of `FLOW_MOD`s (with no barrier)
/// has to be before they are applied.
pub const IDLE_FLUSH_MS: i32 = 2;

/// The peer's `HELLO` (and the TLS handshake before it) is due within this
/// of the connection.
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(5);

/// How a connection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The peer closed it, or a read or write failed (a peer that does not
    /// read its replies: the write timeout).
    Closed,
    /// A malformed message: the session refused it (its reason is logged)
    /// and the connection ends.
    Refused,
    /// No `HELLO` (or no TLS handshake) within [`HELLO_TIMEOUT`].
    HelloTimeout,
    /// No message for twice the inactivity probe.
    ProbeTimeout,
    /// The switch is stopping.
    Stopped,
    /// Closed before its `HELLO` to make room for a new connection.
    Evicted,
}

/// What the loop needs to know of its connection.
pub struct Conn<'a> {
    /// Who the peer is, for the log.
    pub peer: &'a str,
    pub stop: &'a AtomicBool,
    /// The connection's slot: the peer's `HELLO` is recorded in it, and
    /// an eviction is read from it.
    pub slot: &'a SlotGuard,
    pub log: &'a LogLimit,
    /// When the peer's `HELLO` is due.
    pub hello_by: Instant,
    /// The inactivity probe (None: off).
    pub probe: Option<Duration>,
}

/// Replies are gathered up to this many bytes before they are written:
/// a stream of requests that each get an answer (errors for a stream of
/// refused `FLOW_MOD`s) costs a write per this much, not per message.
const OUT_BUF: usize = 64 << 10;

/// Take the session's replies into `out`, each whole before the next is
/// taken, writing `out` whenever it is full; with `all`, write what is
/// left too (before the loop waits for the peer, and at the end). False
/// when the peer is gone or does not read (the write timeout).
fn send<T: Transport>(t: &mut T, sess: &mut Session, out: &mut Vec<u8>, all: bool) -> bool {
    while let Some(m) = sess.next_out() {
        if out.len() + m.len() > OUT_BUF {
            if t.write_all(out).is_err() {
                return false;
            }
            out.clear();
        }
        out.extend_from_slice(&m);
    }
    if all && !out.is_empty() {
        if t.write_all(out).is_err() {
            return false;
        }
        out.clear();
    }
    !all || t.flush().is_ok()
}

/// The session's last refusal, one line on the (rate-limited) log: the
/// peer gets the OpenFlow error, this says why in words.
fn log_refusal(sess: &mut Session, c: &Conn) {
    if let Some(e) = sess.last_error.take() {
        c.log.line(&format!("openflow: {}: refused: {e}", c.peer));
    }
}

/// Serve one connection to its end (see the module docs).
pub fn serve<T: Transport>(t: &mut T, sess: &mut Session, c: &Conn) -> End {
    if t.write_all(&hello()).and_then(|_| t.flush()).is_err() {
        return End::Closed;
    }
    let mut buf: Vec<u8> = Vec::with_capacity(1 << 17);
    let mut out: Vec<u8> = Vec::with_capacity(OUT_BUF);
    let mut at = 0usize;
    let mut chunk = vec![0u8; 1 << 16];
    let mut hello_in = false;
    // The last time the peer was heard from (or our work for it ended),
    // and whether it was probed since.
    let mut heard = t.now();
    let mut probed = false;
    let mut echo_xid = 0u32;
    loop {
        // Every whole message in the buffer.
        while buf.len() - at >= HEADER {
            let len = Header::parse(&buf[at..]).map_or(0, |h| h.len as usize);
            if len < HEADER {
                // Unframeable: the session answers with an error.
                let _ = sess.message(&buf[at..at + HEADER]);
                log_refusal(sess, c);
                sess.flush();
                send(t, sess, &mut out, true);
                return End::Refused;
            }
            if buf.len() - at < len {
                break;
            }
            let r = sess.message(&buf[at..at + len]);
            at += len;
            log_refusal(sess, c);
            if r.is_err() {
                sess.flush();
                send(t, sess, &mut out, true);
                return End::Refused;
            }
            // The first message the session takes is the peer's HELLO.
            if !hello_in {
                if !c.slot.hello() {
                    return End::Evicted;
                }
                hello_in = true;
            }
            if sess.has_out() && !send(t, sess, &mut out, false) {
                return End::Closed;
            }
            heard = t.now();
            probed = false;
        }
        buf.drain(..at);
        at = 0;
        // Packet-ins waiting for this controller go out with the replies.
        sess.pull_async();
        // Everything answered so far goes out before the loop waits.
        if (!out.is_empty() || sess.has_out()) && !send(t, sess, &mut out, true) {
            return End::Closed;
        }
        // Apply waiting FLOW_MODs once the peer pauses (nothing more
        // within IDLE_FLUSH_MS): a stream of them becomes a few large table
        // versions (each publication copies the table), a lone one still
        // takes effect within milliseconds. A barrier applies them at once.
        if sess.has_pending() && !t.readable(IDLE_FLUSH_MS, None) {
            sess.flush();
            log_refusal(sess, c);
            if !send(t, sess, &mut out, true) {
                return End::Closed;
            }
            heard = t.now();
        }
        if c.stop.load(Ordering::SeqCst) {
            return End::Stopped;
        }
        if c.slot.evicted() {
            return End::Evicted;
        }
        let now = t.now();
        if !hello_in && now >= c.hello_by {
            return End::HelloTimeout;
        }
        if let Some(n) = c.probe.filter(|_| hello_in) {
            let quiet = now.saturating_duration_since(heard);
            if quiet >= 2 * n {
                return End::ProbeTimeout;
            }
            if quiet >= n && !probed {
                echo_xid = echo_xid.wrapping_add(1);
                let m = Writer::new(ECHO_REQUEST, echo_xid).finish();
                if t.write_all(&m).and_then(|_| t.flush()).is_err() {
                    return End::Closed;
                }
                probed = true;
            }
        }
        // Woken by the peer or by a packet-in for it (then the loop goes
        // round to send it).
        if let Some(w) = sess.wake_fd() {
            if !t.readable(100, Some(w)) {
                continue;
            }
        }
        match t.read(&mut chunk) {
            Ok(0) => {
                sess.flush();
                log_refusal(sess, c);
                send(t, sess, &mut out, true);
                return End::Closed;
            }
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) => {}
            Err(_) => return End::Closed,
        }
    }
}

/// An in-memory stream for the loop: what the peer sends, in chunks, with
/// silences in between, on a clock of its own (a read in a silence takes
/// 100 ms of it, as a socket's read timeout would), and what the loop
/// writes (in parts, as a socket may take them).
pub struct Script {
    steps: std::collections::VecDeque<Step>,
    clock: Duration,
    t0: Instant,
    /// Every write takes at most this many bytes (0: all).
    pub write_part: usize,
    pub written: Vec<u8>,
}

pub enum Step {
    Bytes(Vec<u8>),
    Silence(Duration),
}

impl Script {
    pub fn new(steps: Vec<Step>) -> Script {
        Script {
            steps: steps.into(),
            clock: Duration::ZERO,
            t0: Instant::now(),
            write_part: 0,
            written: Vec::new(),
        }
    }

    /// Pass up to `d` of the silence at the front; true if there is one.
    fn wait(&mut self, d: Duration) -> bool {
        match self.steps.front_mut() {
            Some(Step::Silence(left)) => {
                let d = d.min(*left);
                *left -= d;
                self.clock += d;
                if left.is_zero() {
                    self.steps.pop_front();
                }
                true
            }
            _ => false,
        }
    }
}

impl Read for Script {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if self.wait(Duration::from_millis(100)) {
            return Err(ErrorKind::WouldBlock.into());
        }
        match self.steps.front_mut() {
            Some(Step::Bytes(b)) => {
                let k = b.len().min(out.len());
                out[..k].copy_from_slice(&b[..k]);
                b.drain(..k);
                if b.is_empty() {
                    self.steps.pop_front();
                }
                Ok(k)
            }
            _ => Ok(0),
        }
    }
}

impl Write for Script {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        let k = match self.write_part {
            0 => b.len(),
            p => b.len().min(p),
        };
        self.written.extend_from_slice(&b[..k]);
        Ok(k)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Transport for Script {
    fn readable(&mut self, ms: i32, _wake: Option<std::os::fd::RawFd>) -> bool {
        !self.wait(Duration::from_millis(ms.max(0) as u64))
    }
    fn now(&self) -> Instant {
        self.t0 + self.clock
    }
}

/// The messages of a byte stream, cut on their headers' lengths; None if
/// one is shorter than a header or the stream ends inside one.
pub fn messages(mut b: &[u8]) -> Option<Vec<&[u8]>> {
    let mut v = Vec::new();
    while !b.is_empty() {
        let len = Header::parse(b)?.len as usize;
        if len < HEADER || len > b.len() {
            return None;
        }
        let (m, rest) = b.split_at(len);
        v.push(m);
        b = rest;
    }
    Some(v)
}

/// A switch with an empty table, for the loop's tests and fuzz target.
pub fn test_shared() -> Arc<Shared> {
    use crate::switch::counters::{CacheCounters, SwitchCounters};
    use crate::switch::table::{FlowTable, TableHandle};
    Arc::new(Shared {
        ctl: TableHandle::new(FlowTable::new()),
        ports: vec![(1, "mem:a".into(), Default::default())],
        cache: Arc::new(CacheCounters::default()),
        counters: Arc::new(SwitchCounters::default()),
        controller: Default::default(),
        links: Default::default(),
    })
}

/// Run the loop over `script` (probe `probe`) to its end: how it ended
/// and what it wrote.
pub fn run_script(script: &mut Script, probe: Option<Duration>, slot: &SlotGuard) -> End {
    let stop = AtomicBool::new(false);
    let log = LogLimit::quiet();
    let mut sess = Session::new(test_shared(), Arc::new(ChannelStats::default()), 1);
    let c = Conn {
        peer: "fuzz",
        stop: &stop,
        slot,
        log: &log,
        hello_by: script.now() + HELLO_TIMEOUT,
        probe,
    };
    serve(script, &mut sess, &c)
}

/// Arbitrary bytes as what a peer sends over the real framing loop: the
/// first byte picks the inactivity probe (off, 1, 2 or 3 s), the rest is
/// the stream, cut into chunks of sizes the bytes pick, with silences (up
/// to 8 s: past the deadlines) between some of them; the loop's writes
/// are taken in parts of sizes picked too. No panic; the loop ends; what
/// it wrote is our HELLO, then whole messages, each of the length its
/// header says (at least a header's).
pub fn fuzz_channel(data: &[u8]) {
    let Some((&cfg, rest)) = data.split_first() else {
        return;
    };
    let probe = match cfg % 4 {
        0 => None,
        k => Some(Duration::from_secs(k as u64)),
    };
    let mut steps = Vec::new();
    let (mut h, mut i) = (7usize, 0usize);
    while i < rest.len() {
        h = h.wrapping_mul(31).wrapping_add(rest[i] as usize);
        if h % 11 == 0 {
            steps.push(Step::Silence(Duration::from_millis(
                (h / 11 % 80) as u64 * 100,
            )));
        }
        let k = if h % 3 == 0 { h % 4096 } else { h % 61 } + 1;
        let k = k.min(rest.len() - i);
        steps.push(Step::Bytes(rest[i..i + k].to_vec()));
        i += k;
    }
    let mut s = Script::new(steps);
    s.write_part = (cfg as usize >> 2) % 5 * 7;
    let slots = super::slots::Slots::new(1);
    let Some(slot) = slots.take_now() else {
        unreachable!("a free slot")
    };
    run_script(&mut s, probe, &slot);
    let out = messages(&s.written).expect("whole messages, each at least a header");
    assert_eq!(out.first().map(|m| m[1]), Some(HELLO), "our HELLO first");
}

#[cfg(test)]
mod tests {
    use super::super::slots::Slots;
    use super::super::wire::{ECHO_REPLY, ERROR, FEATURES_REPLY, FEATURES_REQUEST};
    use super::*;

    fn msg(kind: u8, xid: u32) -> Vec<u8> {
        Writer::new(kind, xid).finish()
    }

    fn kinds(s: &Script) -> Vec<u8> {
        messages(&s.written).unwrap().iter().map(|m| m[1]).collect()
    }

    fn secs(s: f64) -> Step {
        Step::Silence(Duration::from_secs_f64(s))
    }

    fn run(steps: Vec<Step>, probe: Option<u64>) -> (End, Script, bool) {
        let slots = Slots::new(1);
        let slot = slots.take_now().unwrap();
        let mut s = Script::new(steps);
        let end = run_script(&mut s, probe.map(Duration::from_secs), &slot);
        let hello = slot.hello_seen();
        (end, s, hello)
    }

    #[test]
    fn a_silent_peer_is_closed_after_five_seconds() {
        let (end, s, seen) = run(vec![secs(60.0)], Some(1));
        assert_eq!(end, End::HelloTimeout);
        assert!(!seen);
        assert_eq!(kinds(&s), vec![HELLO], "no probe before HELLO");
        // Closed at 5 s, not later (reads wake every 100 ms).
        let t = s.clock;
        assert!(t >= HELLO_TIMEOUT && t <= HELLO_TIMEOUT + Duration::from_millis(200));
        // A HELLO trickled a byte at a time does not get longer.
        let h = hello();
        let mut steps = Vec::new();
        for b in h {
            steps.push(Step::Bytes(vec![b]));
            steps.push(secs(1.0));
        }
        assert_eq!(run(steps, None).0, End::HelloTimeout);
    }

    #[test]
    fn the_probe_asks_after_n_and_closes_after_2n() {
        // HELLO, then 1.5 s of silence (one probe at 1 s), the peer's
        // ECHO_REPLY (heard again), then silence: a second probe 1 s
        // after the reply, and the end 2 s after it.
        let steps = vec![
            Step::Bytes(hello()),
            secs(1.5),
            Step::Bytes(msg(ECHO_REPLY, 1)),
            secs(60.0),
        ];
        let (end, s, seen) = run(steps, Some(1));
        assert_eq!(end, End::ProbeTimeout);
        assert!(seen);
        assert_eq!(kinds(&s), vec![HELLO, ECHO_REQUEST, ECHO_REQUEST]);
        let t = s.clock.as_secs_f64();
        assert!((3.5..=3.7).contains(&t), "closed at {t} s");
        // Without the probe the same peer is served until it goes.
        let steps = vec![Step::Bytes(hello()), secs(60.0)];
        let (end, s, _) = run(steps, None);
        assert_eq!(end, End::Closed);
        assert_eq!(kinds(&s), vec![HELLO]);
    }

    #[test]
    fn messages_split_anywhere_are_served_and_bad_ones_refused() {
        // A HELLO and a FEATURES_REQUEST cut into 3-byte pieces, the
        // replies written 5 bytes at a time.
        let mut all = hello();
        all.extend(msg(FEATURES_REQUEST, 9));
        let steps = all.chunks(3).map(|c| Step::Bytes(c.to_vec())).collect();
        let slots = Slots::new(1);
        let slot = slots.take_now().unwrap();
        let mut s = Script::new(steps);
        s.write_part = 5;
        assert_eq!(run_script(&mut s, None, &slot), End::Closed);
        assert_eq!(kinds(&s), vec![HELLO, FEATURES_REPLY]);
        // A header shorter than a header: an error, and the end.
        let steps = vec![
            Step::Bytes(hello()),
            Step::Bytes(vec![4, 14, 0, 4, 0, 0, 0, 2]),
        ];
        let (end, s, _) = run(steps, None);
        assert_eq!(end, End::Refused);
        assert_eq!(kinds(&s), vec![HELLO, ERROR]);
        // No HELLO first: refused.
        let (end, s, seen) = run(vec![Step::Bytes(msg(FEATURES_REQUEST, 1))], Some(1));
        assert_eq!((end, seen), (End::Refused, false));
        assert_eq!(kinds(&s), vec![HELLO, ERROR]);
    }

    #[test]
    fn an_evicted_connection_ends_before_its_hello() {
        let slots = Slots::new(1);
        let slot = slots.take_now().unwrap();
        // The only slot is taken by a connection without HELLO: the next
        // one evicts it.
        let next = slots.take_now().expect("the silent one makes room");
        assert!(slot.evicted());
        let mut s = Script::new(vec![secs(1.0), Step::Bytes(hello())]);
        assert_eq!(run_script(&mut s, None, &slot), End::Evicted);
        drop(slot);
        drop(next);
        assert_eq!(slots.counts(), (0, 0));
    }

    #[test]
    fn fuzz_smoke() {
        fuzz_channel(&[]);
        fuzz_channel(&[1]);
        let mut d = vec![3];
        d.extend(hello());
        d.extend(msg(FEATURES_REQUEST, 2));
        d.extend(msg(ECHO_REQUEST, 3));
        fuzz_channel(&d);
        for seed in 0u8..64 {
            let d: Vec<u8> = (0..300u32)
                .map(|i| (i as u8).wrapping_mul(seed) ^ seed)
                .collect();
            fuzz_channel(&d);
        }
    }
}
