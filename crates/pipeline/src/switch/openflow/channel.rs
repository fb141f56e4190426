//! The OpenFlow channel's connections: `ptcp:PORT[:ADDR]` listens (as
//! `ovs-vswitchd`'s `set-controller BR ptcp:...`, for `ovs-ofctl` and
//! controllers that connect to switches), `tcp:IP:PORT` connects to a
//! controller and reconnects when the connection ends (1, 2, 4, 8 s
//! apart).
//!
//! Each connection has a thread of its own (at most [`MAX_CONNECTIONS`]
//! at once): a slow or hostile peer holds up only itself, never the
//! datapath (which only ever sees the table versions the session
//! publishes through [`crate::switch::Control`]). A message is read whole
//! (the header's length, at most 64 KiB) before it is looked at; reads
//! wake every 100 ms to notice the switch stopping.

use super::msg::{hello, ChannelStats, Session};
use super::wire::{Header, HEADER};
use crate::control::poll_in;
use crate::switch::ctl::Shared;
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How long a pause in a peer's stream of `FLOW_MOD`s (with no barrier)
/// has to be before they are applied.
pub const IDLE_FLUSH_MS: i32 = 2;

/// Connections served at once (one more is closed at once).
pub const MAX_CONNECTIONS: usize = 64;

/// Where the channel listens or connects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// `ptcp:PORT[:ADDR]` (ADDR defaults to 127.0.0.1: an OpenFlow
    /// channel has no authentication, so every address is opt-in with
    /// `ptcp:6653:0.0.0.0`).
    Listen(SocketAddr),
    /// `tcp:IP:PORT`: an active connection to a controller.
    Connect(SocketAddr),
}

impl Endpoint {
    /// Parse `ptcp:PORT[:ADDR]` or `tcp:IP[:PORT]` (port 6653 by default,
    /// as Open vSwitch); errors are one line.
    pub fn parse(s: &str) -> Result<Endpoint, String> {
        let bad =
            |why: &str| format!("--openflow '{s}': {why} (ptcp:PORT[:ADDR] or tcp:IP[:PORT])");
        let port = |p: &str| {
            p.parse::<u16>()
                .map_err(|_| bad(&format!("'{p}' is not a port")))
        };
        let ip = |a: &str| {
            a.trim_matches(['[', ']'])
                .parse::<IpAddr>()
                .map_err(|_| bad(&format!("'{a}' is not an IP address")))
        };
        if let Some(rest) = s.strip_prefix("ptcp:") {
            let (p, a) = rest.split_once(':').unwrap_or((rest, ""));
            let addr = if a.is_empty() {
                IpAddr::V4(Ipv4Addr::LOCALHOST)
            } else {
                ip(a)?
            };
            let p = if p.is_empty() { 6653 } else { port(p)? };
            Ok(Endpoint::Listen(SocketAddr::new(addr, p)))
        } else if let Some(rest) = s.strip_prefix("tcp:") {
            let (a, p) = match rest.rsplit_once(':') {
                Some((a, p)) if !a.is_empty() && !rest.ends_with(']') => (a, port(p)?),
                _ => (rest, 6653),
            };
            Ok(Endpoint::Connect(SocketAddr::new(ip(a)?, p)))
        } else {
            Err(bad("unknown form"))
        }
    }
}

/// A running channel.
pub struct Channel {
    /// The address listened on (the port the system chose for port 0) or
    /// connected to.
    pub addr: SocketAddr,
    pub stats: Arc<ChannelStats>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Channel {
    /// Bind (listen) or start connecting; `dpid` is the datapath id
    /// `FEATURES_REPLY` gives.
    pub fn start(ep: Endpoint, sh: Arc<Shared>, dpid: u64) -> Result<Channel, String> {
        let stop = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(ChannelStats::default());
        let (st, ss) = (stop.clone(), stats.clone());
        let (addr, thread) = match ep {
            Endpoint::Listen(a) => {
                let l = TcpListener::bind(a).map_err(|e| {
                    format!(
                        "--openflow ptcp:{}:{}: cannot listen: {e}",
                        a.port(),
                        a.ip()
                    )
                })?;
                l.set_nonblocking(true).map_err(|e| e.to_string())?;
                let addr = l.local_addr().map_err(|e| e.to_string())?;
                let t = std::thread::Builder::new()
                    .name("linerate-of-listen".into())
                    .spawn(move || accept_loop(l, sh, ss, st, dpid))
                    .map_err(|e| e.to_string())?;
                (addr, t)
            }
            Endpoint::Connect(a) => {
                let t = std::thread::Builder::new()
                    .name("linerate-of-connect".into())
                    .spawn(move || connect_loop(a, sh, ss, st, dpid))
                    .map_err(|e| e.to_string())?;
                (a, t)
            }
        };
        Ok(Channel {
            addr,
            stats,
            stop,
            thread: Some(thread),
        })
    }

    /// Stop listening or connecting; connection threads notice within
    /// 100 ms (they are not waited for).
    pub fn stop(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Channel {
    fn drop(&mut self) {
        self.stop_now();
    }
}

fn accept_loop(
    l: TcpListener,
    sh: Arc<Shared>,
    stats: Arc<ChannelStats>,
    stop: Arc<AtomicBool>,
    dpid: u64,
) {
    let active = Arc::new(AtomicUsize::new(0));
    while !stop.load(Ordering::SeqCst) {
        match l.accept() {
            Ok((s, _)) => {
                if active.load(Ordering::SeqCst) >= MAX_CONNECTIONS {
                    drop(s);
                    continue;
                }
                active.fetch_add(1, Ordering::SeqCst);
                let (sh, stats, stop, act) =
                    (sh.clone(), stats.clone(), stop.clone(), active.clone());
                let spawned = std::thread::Builder::new()
                    .name("linerate-of-conn".into())
                    .spawn(move || {
                        serve(s, &sh, &stats, &stop, dpid);
                        act.fetch_sub(1, Ordering::SeqCst);
                    });
                if spawned.is_err() {
                    // The stream went with the closure: closed.
                    active.fetch_sub(1, Ordering::SeqCst);
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                poll_in(l.as_raw_fd(), 100);
            }
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

fn connect_loop(
    a: SocketAddr,
    sh: Arc<Shared>,
    stats: Arc<ChannelStats>,
    stop: Arc<AtomicBool>,
    dpid: u64,
) {
    let mut backoff = 1u64;
    while !stop.load(Ordering::SeqCst) {
        match TcpStream::connect_timeout(&a, Duration::from_secs(2)) {
            Ok(s) => {
                backoff = 1;
                serve(s, &sh, &stats, &stop, dpid);
            }
            Err(_) => {
                for _ in 0..backoff * 10 {
                    if stop.load(Ordering::SeqCst) {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
                backoff = (backoff * 2).min(8);
            }
        }
    }
}

/// Write the session's replies; false when the peer is gone or stuck.
fn send(s: &mut TcpStream, sess: &mut Session) -> bool {
    while let Some(m) = sess.next_out() {
        if s.write_all(&m).is_err() {
            return false;
        }
    }
    true
}

/// The session's last refusal, one line on stderr (the peer gets the
/// OpenFlow error; this says why in words).
fn log(sess: &mut Session, peer: Option<SocketAddr>) {
    if let Some(e) = sess.last_error.take() {
        match peer {
            Some(p) => eprintln!("openflow: {p}: refused: {e}"),
            None => eprintln!("openflow: refused: {e}"),
        }
    }
}

/// One connection, to its end (EOF, error, a malformed message, stop).
fn serve(
    mut s: TcpStream,
    sh: &Arc<Shared>,
    stats: &Arc<ChannelStats>,
    stop: &AtomicBool,
    dpid: u64,
) {
    stats.connections.fetch_add(1, Ordering::Relaxed);
    let peer = s.peer_addr().ok();
    let _ = s.set_nodelay(true);
    let _ = s.set_read_timeout(Some(Duration::from_millis(100)));
    let _ = s.set_write_timeout(Some(Duration::from_secs(5)));
    if s.write_all(&hello()).is_err() {
        return;
    }
    let mut sess = Session::new(sh.clone(), stats.clone(), dpid);
    let mut buf: Vec<u8> = Vec::with_capacity(1 << 17);
    let mut at = 0usize;
    let mut chunk = vec![0u8; 1 << 16];
    loop {
        // Every whole message in the buffer.
        while buf.len() - at >= HEADER {
            let len = Header::parse(&buf[at..]).map_or(0, |h| h.len as usize);
            if len < HEADER {
                // Unframeable: the session answers with an error.
                let _ = sess.message(&buf[at..at + HEADER]);
                sess.flush();
                send(&mut s, &mut sess);
                return;
            }
            if buf.len() - at < len {
                break;
            }
            let r = sess.message(&buf[at..at + len]);
            at += len;
            log(&mut sess, peer);
            if r.is_err() {
                sess.flush();
                send(&mut s, &mut sess);
                return;
            }
            if sess.has_out() && !send(&mut s, &mut sess) {
                return;
            }
        }
        buf.drain(..at);
        at = 0;
        // Apply waiting FLOW_MODs once the peer pauses (nothing more
        // within IDLE_FLUSH_MS): a stream of them becomes a few large table
        // versions (each publication copies the table), a lone one still
        // takes effect within milliseconds. A barrier applies them at once.
        if sess.has_pending() && !poll_in(s.as_raw_fd(), IDLE_FLUSH_MS) {
            sess.flush();
            log(&mut sess, peer);
            if !send(&mut s, &mut sess) {
                return;
            }
        }
        if stop.load(Ordering::SeqCst) {
            return;
        }
        match s.read(&mut chunk) {
            Ok(0) => {
                sess.flush();
                send(&mut s, &mut sess);
                return;
            }
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}
