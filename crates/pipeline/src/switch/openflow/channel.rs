//! The OpenFlow channel's endpoints, as Open vSwitch has them
//! ([`Endpoint`]): `punix:PATH` (mode 0600: root only), `pssl:` (mutual
//! TLS) and `ptcp:` (no authentication: any local user or container could
//! change the switch's flows, so it is only there when asked for, with a
//! warning) listen; `unix:`, `ssl:` and `tcp:` connect to a controller and
//! connect again when the connection ends, 1, 2, 4, 8 s apart (8 s is
//! Open vSwitch's `max_backoff`; also after a connection that failed or
//! ended before its `HELLO`, so a controller that accepts and closes gets
//! no storm; 1 s again after a session that got its `HELLO`).
//!
//! Each connection has a thread of its own, which does its TLS handshake
//! and runs the framing loop ([`super::conn`]): a slow or hostile peer
//! holds up only itself, never the datapath (which only ever sees the
//! table versions the session publishes through
//! [`crate::switch::TableHandle`]), nor the accept loop.
//!
//! Bounds: at most [`MAX_CONNECTIONS`] connections are served at once,
//! each holding a slot ([`SlotGuard`]) that is released on every way out
//! of its thread, a panic included. When all are taken, a new connection
//! evicts the oldest one that has not sent its `HELLO` (which closes
//! within its 100 ms read timeout), so connections that say nothing can
//! never lock a controller out; if all have sent theirs, the new one is
//! closed at once. So there are at most 64 connections being served and
//! 64 being evicted (while 64 are, the accept loop waits for them to end
//! before it accepts more). Log lines about connections (refusals,
//! timeouts) are at most [`LOG_PER_SECOND`] a second; the rest are
//! counted, and their number logged when logging resumes.

pub use super::conn::IDLE_FLUSH_MS;
use super::conn::{serve, Conn, End, HELLO_TIMEOUT};
use super::controllers::Controllers;
use super::endpoint::Endpoint;
use super::msg::{ChannelStats, Session};
pub use super::slots::{ConnStats, LogLimit, SlotGuard, Slots, Take, LOG_PER_SECOND};
use super::transport::{unix_peer, Tls, TlsFiles, Transport};
use crate::ctl::{poll_in, Listener};
use crate::switch::controller::PoutTx;
use crate::switch::ctl::Shared;
use rustls::{ClientConfig, ServerConfig};
use std::io::ErrorKind;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Connections served at once (see the module docs for the rest).
pub const MAX_CONNECTIONS: usize = 64;

/// Open vSwitch's default inactivity probe for a controller.
pub const DEFAULT_PROBE: Duration = Duration::from_secs(5);

/// How long one write to a peer may wait for it to read.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// The longest wait between two connection attempts.
const MAX_BACKOFF_S: u64 = 8;

/// What the channel is told at start.
#[derive(Clone, Debug)]
pub struct Config {
    pub endpoint: Endpoint,
    /// For `pssl:` and `ssl:` (all three needed), refused for the others.
    pub tls: TlsFiles,
    /// `ECHO_REQUEST` after this long without a message from the peer,
    /// closed after twice it; None: no probe.
    pub inactivity_probe: Option<Duration>,
}

impl Config {
    pub fn new(endpoint: Endpoint) -> Config {
        Config {
            endpoint,
            tls: TlsFiles::default(),
            inactivity_probe: Some(DEFAULT_PROBE),
        }
    }
}

/// What every connection thread of a channel shares.
struct Chan {
    sh: Arc<Shared>,
    stats: Arc<ChannelStats>,
    conns: Arc<ConnStats>,
    stop: Arc<AtomicBool>,
    log: LogLimit,
    dpid: u64,
    probe: Option<Duration>,
    ctrls: Arc<Controllers>,
    pouts: Option<PoutTx>,
    /// Connects to a controller (its connections are what fail-open
    /// watches), rather than listening.
    primary: bool,
}

impl Chan {
    /// Serve one connection (its slot held) and log how it ended; true if
    /// the peer's HELLO came.
    fn serve<T: Transport>(
        &self,
        t: &mut T,
        peer: &str,
        slot: &SlotGuard,
        hello_by: Instant,
    ) -> bool {
        self.stats.connections.fetch_add(1, Relaxed);
        let _up = self.primary.then(|| self.ctrls.primary_up(&self.sh.ctl));
        let mut sess = Session::for_switch(
            self.sh.clone(),
            self.stats.clone(),
            self.dpid,
            self.ctrls.clone(),
            self.pouts.clone(),
        );
        let c = Conn {
            peer,
            stop: &self.stop,
            slot,
            log: &self.log,
            hello_by,
            probe: self.probe,
        };
        let end = serve(t, &mut sess, &c);
        self.ended(peer, end);
        slot.hello_seen()
    }

    fn ended(&self, peer: &str, end: End) {
        let s = &self.conns;
        let why = match end {
            End::HelloTimeout => {
                s.hello_timeouts.fetch_add(1, Relaxed);
                format!("no HELLO within {} s: closed", HELLO_TIMEOUT.as_secs())
            }
            End::ProbeTimeout => {
                s.probe_timeouts.fetch_add(1, Relaxed);
                let n = self.probe.unwrap_or_default().as_secs_f64();
                format!(
                    "inactivity probe: no message for {:.1} s (echo requested after {n:.1} s): disconnected",
                    2.0 * n
                )
            }
            End::Evicted => {
                s.evicted.fetch_add(1, Relaxed);
                format!("closed before its HELLO to make room ({MAX_CONNECTIONS} connections)")
            }
            End::Closed | End::Refused | End::Stopped => return,
        };
        self.log.line(&format!("openflow: {peer}: {why}"));
    }

    /// A TLS handshake, counted and logged as what ended it when it fails
    /// (a peer that closes before it sends anything is not a failure);
    /// true when done.
    fn handshake(&self, t: &mut Tls, peer: &str, slot: &SlotGuard, hello_by: Instant) -> bool {
        let give_up = || self.stop.load(Relaxed) || slot.evicted();
        let e = match t.handshake(hello_by, &give_up) {
            Ok(done) => return done,
            Err(e) => e,
        };
        if slot.evicted() {
            self.ended(peer, End::Evicted);
        } else if Instant::now() >= hello_by {
            self.ended(peer, End::HelloTimeout);
        } else if !self.stop.load(Relaxed) {
            self.conns.tls_failures.fetch_add(1, Relaxed);
            self.log.line(&format!("openflow: {peer}: refused: {e}"));
        }
        false
    }
}

/// A running channel.
pub struct Channel {
    /// Where it listens (with the port the system chose for port 0) or
    /// connects.
    pub endpoint: Endpoint,
    pub stats: Arc<ChannelStats>,
    pub conns: Arc<ConnStats>,
    /// The connections as controllers, and their counters.
    pub ctrls: Arc<Controllers>,
    chan: Arc<Chan>,
    thread: Option<JoinHandle<()>>,
}

/// What every channel of a switch shares (a switch may listen for
/// `ovs-ofctl` and connect to a controller at once): counters, the
/// controllers, the datapath's packet-out queue.
#[derive(Clone, Default)]
pub struct Common {
    pub stats: Arc<ChannelStats>,
    pub conns: Arc<ConnStats>,
    pub ctrls: Arc<Controllers>,
    pub pouts: Option<PoutTx>,
}

/// A listening socket.
enum Listening {
    Tcp(TcpListener, Option<Arc<ServerConfig>>),
    Unix(Listener),
}

impl Channel {
    /// Bind (listen) or start connecting; `dpid` is the datapath id
    /// `FEATURES_REPLY` gives; `common`: what it shares with the switch's
    /// other channels. TLS files are read here: a missing, unreadable or
    /// mismatched one is a one-line error naming its flag.
    pub fn start(
        cfg: &Config,
        sh: Arc<Shared>,
        dpid: u64,
        common: &Common,
    ) -> Result<Channel, String> {
        let ep = &cfg.endpoint;
        if !ep.tls() && cfg.tls.any() {
            return Err(format!(
                "--private-key, --certificate and --ca-cert are for ssl: and pssl:, not --openflow {ep}"
            ));
        }
        let conns = common.conns.clone();
        let ctrls = common.ctrls.clone();
        let chan = Arc::new(Chan {
            ctrls: ctrls.clone(),
            pouts: common.pouts.clone(),
            sh,
            stats: common.stats.clone(),
            conns: conns.clone(),
            stop: Arc::new(AtomicBool::new(false)),
            log: LogLimit::stderr(conns.clone()),
            dpid,
            probe: cfg.inactivity_probe.filter(|d| !d.is_zero()),
            primary: !ep.listens(),
        });
        let bind = |a: &SocketAddr| {
            let l =
                TcpListener::bind(a).map_err(|e| format!("--openflow {ep}: cannot listen: {e}"))?;
            l.set_nonblocking(true).map_err(|e| e.to_string())?;
            let a = l.local_addr().map_err(|e| e.to_string())?;
            Ok::<_, String>((l, a))
        };
        let (endpoint, listening) = match ep {
            Endpoint::PTcp(a) => {
                let (l, a) = bind(a)?;
                eprintln!(
                    "openflow: {} has no authentication: any local user or container can change this switch's flows; use punix: or pssl:",
                    Endpoint::PTcp(a)
                );
                (Endpoint::PTcp(a), Some(Listening::Tcp(l, None)))
            }
            Endpoint::PSsl(a) => {
                let tls = cfg.tls.server(&ep.to_string())?;
                let (l, a) = bind(a)?;
                (Endpoint::PSsl(a), Some(Listening::Tcp(l, Some(tls))))
            }
            Endpoint::PUnix(p) => {
                let l = Listener::bind(p).map_err(|e| format!("--openflow punix:{e}"))?;
                (ep.clone(), Some(Listening::Unix(l)))
            }
            _ => (ep.clone(), None),
        };
        let c = chan.clone();
        let thread = match listening {
            Some(l) => std::thread::Builder::new()
                .name("linerate-of-listen".into())
                .spawn(move || accept_loop(l, c)),
            None => {
                let tls = match ep {
                    Endpoint::Ssl(_) => Some(cfg.tls.client(&ep.to_string())?),
                    _ => None,
                };
                let ep = ep.clone();
                std::thread::Builder::new()
                    .name("linerate-of-connect".into())
                    .spawn(move || connect_loop(ep, tls, c))
            }
        }
        .map_err(|e| format!("--openflow {ep}: cannot start its thread: {e}"))?;
        Ok(Channel {
            endpoint,
            stats: chan.stats.clone(),
            conns,
            ctrls,
            chan,
            thread: Some(thread),
        })
    }

    /// Stop listening (a `punix:` socket file is removed) or connecting;
    /// connection threads notice within 100 ms (they are not waited for).
    pub fn stop(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        self.chan.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.chan.log.finish();
    }
}

impl Drop for Channel {
    fn drop(&mut self) {
        self.stop_now();
    }
}

/// An accepted connection.
enum Accepted {
    Tcp(TcpStream, SocketAddr),
    Unix(UnixStream),
}

fn accept_loop(l: Listening, chan: Arc<Chan>) {
    let slots = Slots::new(MAX_CONNECTIONS);
    // A Unix peer is named by the socket and its process (it has no
    // address); a TCP one by its address.
    let (fd, shown) = match &l {
        Listening::Tcp(t, _) => (t.as_raw_fd(), String::new()),
        Listening::Unix(u) => (
            u.socket().as_raw_fd(),
            format!("punix:{}", u.path().display()),
        ),
    };
    while !chan.stop.load(Ordering::SeqCst) {
        let got = match &l {
            Listening::Tcp(t, _) => t.accept().map(|(s, a)| Accepted::Tcp(s, a)),
            Listening::Unix(u) => u.socket().accept().map(|(s, _)| Accepted::Unix(s)),
        };
        let s = match got {
            Ok(s) => s,
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                poll_in(fd, 100);
                continue;
            }
            // EMFILE and friends: do not spin on them.
            Err(_) => {
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        let accepted = Instant::now();
        let peer = match &s {
            Accepted::Tcp(_, a) => a.to_string(),
            Accepted::Unix(u) => format!("{shown} ({})", unix_peer(u)),
        };
        let slot = loop {
            match slots.take() {
                Take::Slot(g) => break Some(g),
                Take::Full => break None,
                // Evicted connections end within their read timeout.
                Take::Wait if !chan.stop.load(Ordering::SeqCst) => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                Take::Wait => return,
            }
        };
        let Some(slot) = slot else {
            chan.conns.rejected.fetch_add(1, Relaxed);
            chan.log.line(&format!(
                "openflow: {peer}: refused: {MAX_CONNECTIONS} connections are open already"
            ));
            continue;
        };
        let tls = match &l {
            Listening::Tcp(_, tls) => tls.clone(),
            Listening::Unix(_) => None,
        };
        let c = chan.clone();
        // If the thread cannot start, the closure (stream and slot) is
        // dropped: the connection is closed and the slot released.
        let _ = std::thread::Builder::new()
            .name("linerate-of-conn".into())
            .spawn(move || {
                let hello_by = accepted + HELLO_TIMEOUT;
                match s {
                    Accepted::Tcp(s, _) => {
                        if timeouts(&s).is_err() {
                            return;
                        }
                        match tls {
                            Some(cfg) => {
                                let Ok(mut t) = Tls::accept(&cfg, s) else {
                                    return;
                                };
                                if c.handshake(&mut t, &peer, &slot, hello_by) {
                                    c.serve(&mut t, &peer, &slot, hello_by);
                                }
                            }
                            None => {
                                let mut s = s;
                                c.serve(&mut s, &peer, &slot, hello_by);
                            }
                        }
                    }
                    Accepted::Unix(mut s) => {
                        if unix_timeouts(&s).is_ok() {
                            c.serve(&mut s, &peer, &slot, hello_by);
                        }
                    }
                }
            });
    }
}

/// Reads wake every 100 ms (deadlines, stop, eviction); a write waits
/// [`WRITE_TIMEOUT`] at most for the peer to read.
fn timeouts(s: &TcpStream) -> std::io::Result<()> {
    s.set_nonblocking(false)?;
    let _ = s.set_nodelay(true);
    s.set_read_timeout(Some(Duration::from_millis(100)))?;
    s.set_write_timeout(Some(WRITE_TIMEOUT))
}

fn unix_timeouts(s: &UnixStream) -> std::io::Result<()> {
    s.set_nonblocking(false)?;
    s.set_read_timeout(Some(Duration::from_millis(100)))?;
    s.set_write_timeout(Some(WRITE_TIMEOUT))
}

/// Connect to the controller, run the connection, and again after the
/// backoff (see the module docs).
fn connect_loop(ep: Endpoint, tls: Option<Arc<ClientConfig>>, chan: Arc<Chan>) {
    let slots = Slots::new(1);
    let mut backoff = 1u64;
    while !chan.stop.load(Ordering::SeqCst) {
        let started = Instant::now();
        let hello_by = started + HELLO_TIMEOUT;
        let peer = ep.to_string();
        let Some(slot) = slots.take_now() else { return };
        let hello = match connect(&ep) {
            Ok(Accepted::Tcp(s, a)) => {
                if timeouts(&s).is_err() {
                    false
                } else if let Some(cfg) = &tls {
                    match Tls::connect(cfg, a.ip(), s) {
                        Ok(mut t) => {
                            chan.handshake(&mut t, &peer, &slot, hello_by)
                                && chan.serve(&mut t, &peer, &slot, hello_by)
                        }
                        Err(e) => {
                            chan.log.line(&format!("openflow: {peer}: {e}"));
                            false
                        }
                    }
                } else {
                    let mut s = s;
                    chan.serve(&mut s, &peer, &slot, hello_by)
                }
            }
            Ok(Accepted::Unix(mut s)) => {
                unix_timeouts(&s).is_ok() && chan.serve(&mut s, &peer, &slot, hello_by)
            }
            Err(e) => {
                chan.log
                    .line(&format!("openflow: {peer}: cannot connect: {e}"));
                false
            }
        };
        drop(slot);
        let wait = if hello { 1 } else { backoff };
        backoff = if hello {
            2
        } else {
            (backoff * 2).min(MAX_BACKOFF_S)
        };
        let until = Instant::now() + Duration::from_secs(wait);
        while Instant::now() < until {
            if chan.stop.load(Ordering::SeqCst) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

fn connect(ep: &Endpoint) -> std::io::Result<Accepted> {
    match ep {
        Endpoint::Tcp(a) | Endpoint::Ssl(a) => {
            TcpStream::connect_timeout(a, Duration::from_secs(2)).map(|s| Accepted::Tcp(s, *a))
        }
        Endpoint::Unix(p) => UnixStream::connect(p).map(Accepted::Unix),
        _ => Err(ErrorKind::InvalidInput.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn a_slot_is_released_when_its_thread_panics() {
        let slots = Slots::new(2);
        let g = slots.take_now().unwrap();
        let t = std::thread::spawn(move || {
            let _held = g;
            panic!("a connection thread that panics");
        });
        assert!(t.join().is_err());
        assert_eq!(slots.counts(), (0, 0));
        // An evicted slot's thread that panics is uncounted too.
        let a = slots.take_now().unwrap();
        let b = slots.take_now().unwrap();
        assert!(b.hello());
        let c = slots.take_now().expect("a, without HELLO, is evicted");
        assert!(a.evicted() && !a.hello(), "no HELLO after the eviction");
        assert_eq!(slots.counts(), (2, 1));
        let t = std::thread::spawn(move || {
            let _held = a;
            panic!("an evicted connection's thread that panics");
        });
        assert!(t.join().is_err());
        assert_eq!(slots.counts(), (2, 0));
        drop((b, c));
        assert_eq!(slots.counts(), (0, 0));
    }

    #[test]
    fn connections_past_hello_are_never_evicted() {
        let slots = Slots::new(3);
        let held: Vec<SlotGuard> = (0..3).map(|_| slots.take_now().unwrap()).collect();
        assert!(held[0].hello() && held[2].hello());
        // The oldest without HELLO (the second) makes room.
        let d = slots.take_now().unwrap();
        assert!(held[1].evicted() && !held[0].evicted() && !held[2].evicted());
        assert!(d.hello());
        // All three served ones are past HELLO: the next is refused.
        assert!(matches!(slots.take(), Take::Full));
        assert_eq!(slots.counts(), (3, 1));
        drop(held);
        assert_eq!(slots.counts(), (1, 0));
    }

    #[test]
    fn evictions_are_bounded_too() {
        // One slot: a silent connection, evicted by a second, evicted by
        // a third... while the first has not ended, at most one is being
        // evicted, and the next waits.
        let slots = Slots::new(1);
        let a = slots.take_now().unwrap();
        let b = slots.take_now().unwrap();
        assert!(a.evicted());
        assert!(matches!(slots.take(), Take::Wait));
        drop(a);
        let c = slots.take_now().unwrap();
        assert!(b.evicted() && !c.evicted());
        assert_eq!(slots.counts(), (1, 1));
    }

    #[test]
    fn log_lines_are_limited_and_the_rest_counted() {
        let lines = Arc::new(Mutex::new(Vec::<String>::new()));
        let l2 = lines.clone();
        let stats = Arc::new(ConnStats::default());
        let log = LogLimit::to(
            Box::new(move |l| l2.lock().unwrap().push(l.to_string())),
            Some(stats.clone()),
        );
        let t0 = Instant::now();
        for i in 0..100 {
            log.line_at(&format!("refused {i}"), t0);
        }
        assert_eq!(lines.lock().unwrap().len(), LOG_PER_SECOND as usize);
        assert_eq!(stats.log_lines_dropped.load(Relaxed), 90);
        // A second later: the count, then the line.
        log.line_at("later", t0 + Duration::from_millis(1001));
        let v = lines.lock().unwrap().clone();
        assert_eq!(
            &v[10..],
            [
                "openflow: 90 more lines about connections not logged (at most 10 a second)",
                "later"
            ]
        );
        for _ in 0..20 {
            log.line_at("x", t0 + Duration::from_millis(1002));
        }
        log.finish();
        let v = lines.lock().unwrap().clone();
        assert!(
            v.last().unwrap().starts_with("openflow: 11 more lines"),
            "{v:?}"
        );
    }
}
