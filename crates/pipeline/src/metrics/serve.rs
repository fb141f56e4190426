//! `--metrics ADDR:PORT`: a plain HTTP/1.1 server for Prometheus' scrapes,
//! on its own thread, that serves the page the run last published (the
//! reporter publishes once a second; the per-packet path never sees it).
//!
//! Bounds, since a peer may be hostile: one connection at a time (a scrape
//! is one short request); a request is read for at most [`READ_LIMIT`]
//! bytes and [`DEADLINE`]; the answer is written within [`DEADLINE`] or the
//! connection is closed. A client that connects and never sends, or never
//! reads, costs the server at most that long and the run nothing; every
//! connection's outcome is counted (`linerate_metrics_connections_total`).
//! Only `GET /metrics` (and `HEAD`) is served; nothing is ever read from
//! the request beyond its first line.

use super::Exposition;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The most of a request read (its line and headers).
pub const READ_LIMIT: usize = 8192;
/// The longest a connection is served (reading the request, then writing).
pub const DEADLINE: Duration = Duration::from_secs(2);
/// How often the accept loop looks at the stop flag.
const TICK_MS: i32 = 100;

/// How connections ended.
#[derive(Clone, Copy)]
enum Outcome {
    Served,
    NotFound,
    BadRequest,
    TimedOut,
    Failed,
}

const OUTCOMES: [(Outcome, &str); 5] = [
    (Outcome::Served, "served"),
    (Outcome::NotFound, "not_found"),
    (Outcome::BadRequest, "bad_request"),
    (Outcome::TimedOut, "timed_out"),
    (Outcome::Failed, "failed"),
];

struct Inner {
    page: Mutex<Arc<String>>,
    stop: AtomicBool,
    outcomes: [AtomicU64; 5],
    command: String,
    start_unix_s: f64,
}

/// The running server; dropping it stops it (the thread ends within a
/// tenth of a second or after the connection it serves, never waited for).
pub struct Server {
    inner: Arc<Inner>,
    addr: SocketAddr,
}

impl Server {
    /// Listen on `addr` (`ADDR:PORT`, e.g. `127.0.0.1:9100` or `[::1]:9100`)
    /// for `command`'s metrics. A bad address or a port in use is an error
    /// of one line.
    pub fn start(addr: &str, command: &str) -> Result<Server, String> {
        let bad = |why: String| format!("--metrics '{addr}': {why}");
        // Numeric addresses only (and `localhost`): no name lookup, which
        // could wait on a resolver, at the start of a run.
        let numeric = match addr.strip_prefix("localhost:") {
            Some(port) => format!("127.0.0.1:{port}"),
            None => addr.to_string(),
        };
        let at: SocketAddr = numeric.parse().map_err(|_| {
            bad(
                "expected ADDR:PORT with a numeric address, e.g. 127.0.0.1:9100 or [::1]:9100"
                    .into(),
            )
        })?;
        let listener = TcpListener::bind(at).map_err(|e| bad(e.to_string()))?;
        // Non-blocking: a connection that goes away between poll() and
        // accept() must not leave the thread blocked in accept().
        listener
            .set_nonblocking(true)
            .map_err(|e| bad(e.to_string()))?;
        let local = listener.local_addr().map_err(|e| bad(e.to_string()))?;
        let inner = Arc::new(Inner {
            page: Mutex::new(Arc::new(String::new())),
            stop: AtomicBool::new(false),
            outcomes: Default::default(),
            command: command.to_string(),
            start_unix_s: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_secs_f64())
                .unwrap_or(0.0),
        });
        let i = inner.clone();
        std::thread::Builder::new()
            .name("linerate-metrics".into())
            .spawn(move || accept_loop(&listener, &i))
            .map_err(|e| bad(format!("starting its thread: {e}")))?;
        Ok(Server { inner, addr: local })
    }

    /// The address it listens on (the port the kernel chose for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Make `m` the page scrapes get from now on. Called by the reporter
    /// once a second: the lock is held for one pointer swap, and the
    /// server holds it only to clone that pointer.
    pub fn publish(&self, m: &Exposition) {
        let page = Arc::new(m.render());
        if let Ok(mut p) = self.inner.page.lock() {
            *p = page;
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.inner.stop.store(true, Relaxed);
    }
}

fn accept_loop(l: &TcpListener, inner: &Inner) {
    let mut pfd = libc::pollfd {
        fd: l.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    while !inner.stop.load(Relaxed) {
        // SAFETY: pfd is a valid pollfd for the listener, which outlives the call.
        let n = unsafe { libc::poll(&mut pfd, 1, TICK_MS) };
        if n <= 0 {
            continue;
        }
        // The accepted socket blocks (serve() bounds it with its timeouts).
        if let Ok((s, _)) = l.accept() {
            let o = match s.set_nonblocking(false) {
                Ok(()) => serve(s, inner),
                Err(_) => Outcome::Failed,
            };
            inner.outcomes[o as usize].fetch_add(1, Relaxed);
        }
    }
}

/// The page with the server's own metrics: build info, start time and its
/// connections so far.
fn page(inner: &Inner) -> String {
    let mut m = Exposition::new();
    m.gauge(
        "linerate_build_info",
        "The linerate build serving these metrics (always 1).",
        &[
            ("version", env!("CARGO_PKG_VERSION")),
            ("command", &inner.command),
        ],
        1.0,
    );
    m.gauge(
        "linerate_start_time_seconds",
        "When the command started, in seconds since the Unix epoch.",
        &[],
        inner.start_unix_s,
    );
    for (o, name) in OUTCOMES {
        m.counter(
            "linerate_metrics_connections_total",
            "Connections to the metrics server, by how they ended.",
            &[("outcome", name)],
            // The scrape being answered counts as served already.
            inner.outcomes[o as usize].load(Relaxed) + matches!(o, Outcome::Served) as u64,
        );
    }
    let published = inner.page.lock().map(|p| p.clone()).unwrap_or_default();
    let mut s = m.render();
    s.push_str(&published);
    s
}

fn serve(mut s: TcpStream, inner: &Inner) -> Outcome {
    let t0 = Instant::now();
    let mut buf = [0u8; READ_LIMIT];
    let mut n = 0;
    // The request line and headers, up to the blank line.
    loop {
        let left = DEADLINE.saturating_sub(t0.elapsed());
        if left.is_zero() || s.set_read_timeout(Some(left)).is_err() {
            return Outcome::TimedOut;
        }
        match s.read(&mut buf[n..]) {
            Ok(0) => return Outcome::BadRequest,
            Ok(k) => n += k,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Outcome::TimedOut
            }
            Err(_) => return Outcome::Failed,
        }
        if buf[..n].windows(4).any(|w| w == b"\r\n\r\n")
            || buf[..n].windows(2).any(|w| w == b"\n\n")
        {
            break;
        }
        if n == buf.len() {
            let _ = respond(&mut s, t0, "431 Request Header Fields Too Large", "", false);
            return Outcome::BadRequest;
        }
    }
    let (status, outcome, head) = route(&buf[..n]);
    let body = match outcome {
        Outcome::Served => page(inner),
        Outcome::NotFound => "linerate serves its metrics at /metrics\n".to_string(),
        _ => "GET /metrics\n".to_string(),
    };
    match respond(&mut s, t0, status, &body, head) {
        Ok(()) => outcome,
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) =>
        {
            Outcome::TimedOut
        }
        Err(_) => Outcome::Failed,
    }
}

/// What a request (its line and headers, as read) gets: the status line,
/// the outcome, and whether it is a HEAD (no body). Only the request line
/// is looked at; any bytes are safe here.
fn route(request: &[u8]) -> (&'static str, Outcome, bool) {
    let line = request.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut words = line.split_whitespace();
    let (method, path) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let path = path.split('?').next().unwrap_or("");
    let head = method == "HEAD";
    match (method, path) {
        ("GET" | "HEAD", "/metrics") => ("200 OK", Outcome::Served, head),
        ("GET" | "HEAD", _) => ("404 Not Found", Outcome::NotFound, head),
        _ => ("405 Method Not Allowed", Outcome::BadRequest, false),
    }
}

/// Arbitrary bytes as a request to the metrics server: no panic; only
/// `GET`/`HEAD /metrics[?...]` is served.
pub fn fuzz(data: &[u8]) {
    let (status, outcome, _) = route(data);
    if matches!(outcome, Outcome::Served) {
        let line = data.split(|&b| b == b'\n').next().unwrap_or_default();
        let line = String::from_utf8_lossy(line);
        let mut w = line.split_whitespace();
        assert!(matches!(w.next(), Some("GET" | "HEAD")), "{line}");
        assert!(
            w.next()
                .is_some_and(|p| p == "/metrics" || p.starts_with("/metrics?")),
            "{line}"
        );
    }
    assert!(!status.contains('\n'));
}

/// Write the answer within what is left of [`DEADLINE`], then close.
fn respond(
    s: &mut TcpStream,
    t0: Instant,
    status: &str,
    body: &str,
    head: bool,
) -> std::io::Result<()> {
    let left = DEADLINE
        .saturating_sub(t0.elapsed())
        .max(Duration::from_millis(1));
    s.set_write_timeout(Some(left))?;
    let hdr = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(hdr.as_bytes())?;
    if !head {
        s.write_all(body.as_bytes())?;
    }
    let _ = s.shutdown(std::net::Shutdown::Write);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(addr: SocketAddr, req: &str) -> String {
        let mut c = TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        c.write_all(req.as_bytes()).unwrap();
        let mut out = String::new();
        c.read_to_string(&mut out).unwrap();
        out
    }

    #[test]
    fn serves_the_published_page_and_counts_its_connections() {
        let s = Server::start("127.0.0.1:0", "test").unwrap();
        let mut m = Exposition::new();
        m.counter("linerate_x_total", "X.", &[], 42);
        s.publish(&m);
        let r = get(s.local_addr(), "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{r}");
        assert!(r.contains("text/plain; version=0.0.4"));
        assert!(r.contains("\nlinerate_x_total 42\n"), "{r}");
        assert!(r.contains("linerate_build_info{version=\""));
        assert!(r.contains("linerate_metrics_connections_total{outcome=\"served\"} 1\n"));
        let r = get(s.local_addr(), "GET / HTTP/1.0\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 404"), "{r}");
        let r = get(s.local_addr(), "POST /metrics HTTP/1.0\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 405"), "{r}");
        let r = get(s.local_addr(), "GET /metrics HTTP/1.1\r\n\r\n");
        assert!(r.contains("outcome=\"served\"} 2\n"), "{r}");
        assert!(r.contains("outcome=\"not_found\"} 1\n"), "{r}");
        assert!(r.contains("outcome=\"bad_request\"} 1\n"), "{r}");
    }

    #[test]
    fn a_silent_client_is_cut_at_the_deadline_and_others_are_served_after_it() {
        let s = Server::start("127.0.0.1:0", "test").unwrap();
        let _silent = TcpStream::connect(s.local_addr()).unwrap();
        let t0 = Instant::now();
        let r = get(s.local_addr(), "GET /metrics HTTP/1.1\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 200"), "{r}");
        assert!(t0.elapsed() < DEADLINE + Duration::from_secs(2));
        assert!(r.contains("outcome=\"timed_out\"} 1\n"), "{r}");
    }

    #[test]
    fn an_endless_request_is_refused_at_the_read_limit() {
        let s = Server::start("127.0.0.1:0", "test").unwrap();
        let long = format!("GET /metrics HTTP/1.1\r\nX: {}", "a".repeat(READ_LIMIT));
        let mut c = TcpStream::connect(s.local_addr()).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let _ = c.write_all(long.as_bytes());
        let mut out = String::new();
        let _ = c.read_to_string(&mut out);
        assert!(out.starts_with("HTTP/1.1 431"), "{out}");
    }

    #[test]
    fn a_bad_address_or_a_port_in_use_is_one_line() {
        for bad in ["nonsense", "127.0.0.1", "127.0.0.1:99999", "256.0.0.1:80"] {
            let e = Server::start(bad, "t").err().expect(bad);
            assert!(e.starts_with(&format!("--metrics '{bad}'")), "{e}");
            assert!(!e.contains('\n'), "{e}");
        }
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let taken = l.local_addr().unwrap().to_string();
        let e = Server::start(&taken, "t").err().unwrap();
        assert!(e.contains("in use"), "{e}");
        assert!(!e.contains('\n'), "{e}");
    }
}
