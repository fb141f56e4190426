//! The control socket of a running pipeline (`linerate switch --ctl`,
//! `linerate capture --ctl`): a Unix stream socket, mode 0600, one request
//! per line, one reply line per request.
//!
//! A client can never hold up the pipeline, its once-a-second tick or its
//! exit, whatever it does:
//! - every client is served by a thread of its own (at most
//!   [`Limits::max_clients`] at once; one more gets an error line and is
//!   closed), so a slow one delays only itself;
//! - a request line longer than [`Limits::max_line`] is an error and ends
//!   the connection (nothing is buffered beyond the limit);
//! - a request, with any lines it reads after its first (`add-flows N`),
//!   must arrive within [`Limits::request_time`]; a connection idle for
//!   [`Limits::idle`] is closed;
//! - a reply the client does not read times out after
//!   [`Limits::write_timeout`] per write and ends the connection;
//! - handlers parse what they read before they take any lock the pipeline
//!   or its tick needs (the switch's edit lock is taken only to apply a
//!   request that was read and parsed whole);
//! - at the end, [`Server::stop`] returns at once: the accept loop wakes
//!   every 100 ms, and client threads are not waited for (each notices the
//!   stop within 100 ms, and the process exit ends them in any case).
//!
//! [`Listener::bind`] refuses a path where another process answers, and
//! replaces only a stale socket file (nobody listening).

use std::io::{ErrorKind, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Bounds on what one client may do (see the module docs).
#[derive(Clone, Debug)]
pub struct Limits {
    /// Longest request line, in bytes (the newline not counted).
    pub max_line: usize,
    /// A request and every line it reads must arrive within this.
    pub request_time: Duration,
    /// A connection without a request for this long is closed.
    pub idle: Duration,
    /// How long one write of a reply may wait for the client to read.
    pub write_timeout: Duration,
    /// Clients served at once.
    pub max_clients: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_line: 1 << 20,
            request_time: Duration::from_secs(60),
            idle: Duration::from_secs(300),
            write_timeout: Duration::from_secs(2),
            max_clients: 64,
        }
    }
}

/// What a pipeline answers on its control socket.
pub trait Handler: Send + Sync + 'static {
    /// Answer one request line (without its newline; never empty); more
    /// lines of the same request can be read from `conn`. The reply is one
    /// line (the newline is added). A reply that may be large (a dump) is
    /// written through [`Conn::stream_reply`] instead, never built whole;
    /// what `handle` returns then is not sent.
    fn handle(&self, line: &str, conn: &mut Conn) -> String;

    /// The reply line for an error of the connection itself (a request
    /// line too long, a request too slow, too many clients).
    fn error(&self, msg: &str) -> String {
        format!("error: {msg}")
    }
}

/// A bound control socket, not yet served. Removes its file when dropped.
pub struct Listener {
    l: UnixListener,
    path: PathBuf,
}

impl Listener {
    /// Bind `path` (mode 0600 from the start). A socket file where nobody
    /// listens is replaced; a socket where another process answers, or a
    /// file that is not a socket, is an error naming the path.
    pub fn bind(path: &Path) -> Result<Listener, String> {
        let shown = path.display();
        if let Ok(md) = std::fs::symlink_metadata(path) {
            if !md.file_type().is_socket() {
                return Err(format!(
                    "{shown}: exists and is not a socket; not replacing it"
                ));
            }
            if UnixStream::connect(path).is_ok() {
                return Err(format!(
                    "{shown}: another process is listening on this socket; not taking it over"
                ));
            }
            std::fs::remove_file(path)
                .map_err(|e| format!("{shown}: removing the stale socket: {e}"))?;
        }
        // umask 0177 around bind: the socket file is never reachable by
        // others, not even for a moment. (umask is per process; this runs
        // before the pipeline's threads create files.)
        // SAFETY: umask only changes this process's file-creation mask.
        let old = unsafe { libc::umask(0o177) };
        let l = UnixListener::bind(path);
        // SAFETY: as above.
        unsafe { libc::umask(old) };
        let l = l.map_err(|e| format!("{shown}: cannot bind: {e}"))?;
        let me = Listener {
            l,
            path: path.to_path_buf(),
        };
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| format!("{shown}: chmod 0600: {e}"))?;
        me.l.set_nonblocking(true)
            .map_err(|e| format!("{shown}: {e}"))?;
        Ok(me)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The bound socket (the OpenFlow channel's `punix:` accepts on it).
    pub(crate) fn socket(&self) -> &UnixListener {
        &self.l
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// A served control socket: its accept thread and the flag that ends it.
pub struct Server {
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
    clients: Arc<AtomicUsize>,
}

impl Server {
    /// Serve `listener` with `handler` on a thread of its own.
    pub fn start(
        listener: Listener,
        handler: Arc<dyn Handler>,
        limits: Limits,
    ) -> Result<Server, String> {
        let stop = Arc::new(AtomicBool::new(false));
        let clients = Arc::new(AtomicUsize::new(0));
        let (st, cl) = (stop.clone(), clients.clone());
        let accept = std::thread::Builder::new()
            .name("linerate-ctl".into())
            .spawn(move || accept_loop(listener, handler, limits, st, cl))
            .map_err(|e| format!("control socket: cannot start its thread: {e}"))?;
        Ok(Server {
            stop,
            accept: Some(accept),
            clients,
        })
    }

    /// Clients being served now.
    pub fn clients(&self) -> usize {
        self.clients.load(Ordering::Relaxed)
    }

    /// Stop accepting and remove the socket file (within ~100 ms); client
    /// threads end on their own (see the module docs).
    pub fn stop(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop_now();
    }
}

/// Wait up to `ms` for `fd` to be readable (or closed); true when it is
/// (the control socket's and the OpenFlow channel's accept loops and reads).
pub(crate) fn poll_in(fd: i32, ms: i32) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    unsafe { libc::poll(&mut p, 1, ms) > 0 }
}

fn accept_loop(
    listener: Listener,
    handler: Arc<dyn Handler>,
    limits: Limits,
    stop: Arc<AtomicBool>,
    clients: Arc<AtomicUsize>,
) {
    while !stop.load(Ordering::SeqCst) {
        poll_in(listener.l.as_raw_fd(), 100);
        let s = match listener.l.accept() {
            Ok((s, _)) => s,
            Err(e) if e.kind() == ErrorKind::WouldBlock => continue,
            Err(_) => {
                // EMFILE and friends: do not spin on them.
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        let _ = s.set_nonblocking(false);
        let _ = s.set_write_timeout(Some(limits.write_timeout));
        if clients.load(Ordering::SeqCst) >= limits.max_clients {
            let mut s = s;
            let msg = format!("busy: {} clients are connected already", limits.max_clients);
            let _ = writeln!(s, "{}", handler.error(&msg));
            continue;
        }
        clients.fetch_add(1, Ordering::SeqCst);
        let (h, l, st, cl) = (
            handler.clone(),
            limits.clone(),
            stop.clone(),
            clients.clone(),
        );
        let spawned = std::thread::Builder::new()
            .name("linerate-ctl-client".into())
            .spawn(move || {
                let mut c = Conn::new(s, l, st);
                serve_client(&mut c, h.as_ref());
                cl.fetch_sub(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            clients.fetch_sub(1, Ordering::SeqCst);
        }
    }
    drop(listener);
}

fn serve_client(c: &mut Conn, h: &dyn Handler) {
    loop {
        c.deadline = Instant::now() + c.limits.idle;
        let line = match c.read_line() {
            Ok(Some(l)) => l,
            Ok(None) => return,
            Err(e) => {
                // Too long, too slow or stopped: say why, then close.
                let _ = c.reply(&h.error(&e));
                return;
            }
        };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        c.deadline = Instant::now() + c.limits.request_time;
        let reply = h.handle(line, c);
        if std::mem::take(&mut c.streamed) {
            if c.closing {
                return;
            }
            continue;
        }
        if c.reply(&reply).is_err() || c.closing {
            return;
        }
    }
}

/// Lines from a byte stream, each at most `max` bytes (the newline not
/// counted), buffered in at most `max + 1` bytes: a longer line is an error
/// as soon as its first `max + 1` bytes are in, whatever the stream sends
/// after. The framing of every control-socket request.
pub struct LineReader<R> {
    r: R,
    max: usize,
    /// Bytes read and not yet returned as lines: `buf[start..end]`.
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

impl<R: Read> LineReader<R> {
    pub fn new(r: R, max: usize) -> LineReader<R> {
        LineReader {
            r,
            max,
            buf: vec![0; (64 << 10).min(max + 1).max(64)],
            start: 0,
            end: 0,
        }
    }

    /// The next line (without its newline, invalid UTF-8 replaced), or None
    /// at the end of the stream. `wake` is called after every read that
    /// does not complete the line, bytes or a timeout (so a client that
    /// trickles bytes is held to its deadlines as one that sends nothing),
    /// with whether bytes of the line are in: its error ends the wait.
    pub fn next_line(
        &mut self,
        mut wake: impl FnMut(bool) -> Result<(), String>,
    ) -> Result<Option<String>, String> {
        let max = self.max;
        // Bytes of the current line that were already looked at.
        let mut scanned = 0;
        loop {
            let pending = &self.buf[self.start..self.end];
            if let Some(i) = pending[scanned..].iter().position(|&b| b == b'\n') {
                let n = scanned + i;
                if n > max {
                    return Err(format!("request line longer than {max} bytes"));
                }
                let line = String::from_utf8_lossy(&pending[..n]).into_owned();
                self.start += n + 1;
                return Ok(Some(line));
            }
            scanned = pending.len();
            if scanned > max {
                return Err(format!("request line longer than {max} bytes"));
            }
            // Room at the end: move what is pending to the front, or grow
            // (up to the line limit plus a newline).
            if self.end == self.buf.len() {
                if self.start > 0 {
                    self.buf.copy_within(self.start..self.end, 0);
                    self.end -= self.start;
                    self.start = 0;
                } else {
                    let grown = (self.buf.len() * 2).clamp(self.buf.len() + 1, max + 1);
                    self.buf.resize(grown, 0);
                }
            }
            let end = self.end;
            match self.r.read(&mut self.buf[end..]) {
                Ok(0) if scanned == 0 => return Ok(None),
                Ok(0) => return Err("the request ends without a newline".into()),
                Ok(k) => {
                    self.end += k;
                    if !self.buf[end..self.end].contains(&b'\n') {
                        wake(true)?
                    }
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    wake(self.end > self.start)?
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("reading the request: {e}")),
            }
        }
    }
}

/// Arbitrary bytes, read in chunks of the sizes the bytes themselves pick,
/// through a [`LineReader`] with a 64-byte limit: no panic, every line
/// returned is at most 64 bytes and has no newline, an over-long line is an
/// error, and the lines returned are the stream's lines in order.
pub fn fuzz_lines(data: &[u8]) {
    struct Chunks<'a>(&'a [u8], usize);
    impl Read for Chunks<'_> {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            if self.0.is_empty() {
                return Ok(0);
            }
            self.1 = self.1.wrapping_mul(31).wrapping_add(self.0[0] as usize);
            let k = (self.1 % 17 + 1).min(self.0.len()).min(out.len());
            out[..k].copy_from_slice(&self.0[..k]);
            self.0 = &self.0[k..];
            Ok(k)
        }
    }
    let mut r = LineReader::new(Chunks(data, 7), 64);
    let mut want = data.split(|&b| b == b'\n');
    loop {
        match r.next_line(|_| Ok(())) {
            Ok(Some(l)) => {
                let w = want.next().expect("a line the stream does not have");
                assert!(w.len() <= 64 && !l.contains('\n'));
                assert_eq!(l, String::from_utf8_lossy(w));
            }
            Ok(None) => return,
            Err(e) => {
                assert!(!e.contains('\n'));
                return;
            }
        }
    }
}

/// Arbitrary bytes as request lines for `parse` (a pipeline's request
/// parser): no panic, every error is one line.
pub fn fuzz_requests<T>(data: &[u8], parse: impl Fn(&str) -> Result<T, String>) {
    let s = String::from_utf8_lossy(data);
    for line in s.split('\n') {
        if let Err(e) = parse(line) {
            assert!(!e.contains('\n'), "{e}");
        }
    }
}

/// One client connection, as a handler sees it.
pub struct Conn {
    lines: LineReader<UnixStream>,
    limits: Limits,
    stop: Arc<AtomicBool>,
    deadline: Instant,
    /// Set by a failed read: the connection ends after the reply.
    closing: bool,
    /// The handler wrote its reply itself ([`Conn::stream_reply`]).
    streamed: bool,
}

impl Conn {
    fn new(s: UnixStream, limits: Limits, stop: Arc<AtomicBool>) -> Conn {
        // Reads wake every 100 ms to look at the deadline and the stop flag.
        let _ = s.set_read_timeout(Some(Duration::from_millis(100)));
        Conn {
            lines: LineReader::new(s, limits.max_line),
            deadline: Instant::now() + limits.idle,
            limits,
            stop,
            closing: false,
            streamed: false,
        }
    }

    /// The next line (without its newline), or None at the end of the
    /// stream. Errors: a line longer than the limit, the request's time
    /// used up, the pipeline stopping, a broken connection. After an error
    /// the connection is closed once the handler replied.
    pub fn read_line(&mut self) -> Result<Option<String>, String> {
        let (stop, mut deadline) = (&self.stop, self.deadline);
        let request_time = self.limits.request_time;
        // From the line's first byte on, the whole line is due within the
        // request time (a client trickling bytes is not idle).
        let mut started = false;
        let r = self.lines.next_line(|partial| {
            let now = Instant::now();
            if partial && !started {
                started = true;
                deadline = deadline.min(now + request_time);
            }
            if stop.load(Ordering::Relaxed) {
                Err("the pipeline is stopping".into())
            } else if now >= deadline {
                Err("request not received in time".into())
            } else {
                Ok(())
            }
        });
        if r.is_err() {
            self.closing = true;
        }
        r
    }

    /// Write the reply line with `f` as it is made, through a 64 KiB
    /// buffer (the newline is added): a reply of any size costs the buffer,
    /// and each write waits for the client at most
    /// [`Limits::write_timeout`] (then the connection ends). For a handler
    /// whose reply may be large; it returns an empty string after.
    pub fn stream_reply(
        &mut self,
        f: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        self.streamed = true;
        let mut w = std::io::BufWriter::with_capacity(64 << 10, &mut self.lines.r);
        let r = f(&mut w)
            .and_then(|()| w.write_all(b"\n"))
            .and_then(|()| w.flush());
        if r.is_err() {
            self.closing = true;
        }
        r
    }

    /// Write one reply line (the write times out if the client does not read).
    fn reply(&mut self, text: &str) -> std::io::Result<()> {
        let mut b = Vec::with_capacity(text.len() + 1);
        b.extend_from_slice(text.as_bytes());
        b.push(b'\n');
        self.lines.r.write_all(&b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader};

    /// Echoes; `sum N` reads N more lines of numbers and adds them up.
    struct Echo;
    impl Handler for Echo {
        fn handle(&self, line: &str, conn: &mut Conn) -> String {
            if let Some(n) = line.strip_prefix("sum ") {
                let n: usize = n.parse().unwrap_or(0);
                let mut t = 0u64;
                for _ in 0..n {
                    match conn.read_line() {
                        Ok(Some(l)) => t += l.trim().parse::<u64>().unwrap_or(0),
                        Ok(None) => return "error: short".into(),
                        Err(e) => return format!("error: {e}"),
                    }
                }
                return format!("sum {t}");
            }
            format!("echo {line}")
        }
    }

    fn path(tag: &str) -> PathBuf {
        std::env::temp_dir().join(format!("lr-ctl-{tag}-{}.sock", std::process::id()))
    }

    fn ask(p: &Path, req: &str) -> String {
        let mut s = UnixStream::connect(p).unwrap();
        // A request the server refuses part way (too long) may meet a
        // closed socket: the reply is what counts.
        let _ = s.write_all(req.as_bytes());
        let mut r = String::new();
        BufReader::new(s).read_line(&mut r).unwrap();
        r
    }

    #[test]
    fn lines_are_framed_and_bounded() {
        fuzz_lines(b"a\nbb\n\nccc\n");
        fuzz_lines(&[b'x'; 200]);
        let mut long = vec![b'y'; 65];
        long.push(b'\n');
        fuzz_lines(&long);
        let mut r = LineReader::new(&long[..], 64);
        assert!(r
            .next_line(|_| Ok(()))
            .unwrap_err()
            .contains("longer than 64"));
        let mut r = LineReader::new(&b"ok\nrest"[..], 64);
        assert_eq!(r.next_line(|_| Ok(())).unwrap().as_deref(), Some("ok"));
        assert!(r
            .next_line(|_| Ok(()))
            .unwrap_err()
            .contains("without a newline"));
    }

    #[test]
    fn serves_lines_and_multi_line_requests() {
        let p = path("basic");
        let srv = Server::start(
            Listener::bind(&p).unwrap(),
            Arc::new(Echo),
            Limits::default(),
        )
        .unwrap();
        assert_eq!(ask(&p, "hello\n"), "echo hello\n");
        assert_eq!(ask(&p, "sum 3\n1\n2\n3\n"), "sum 6\n");
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        // A second listener on the same path is refused while this one answers.
        let e = Listener::bind(&p).err().unwrap();
        assert!(e.contains("another process is listening"), "{e}");
        srv.stop();
        assert!(!p.exists(), "the socket file is removed");
        // A stale socket file (nobody listening) is replaced.
        let stale = UnixListener::bind(&p).unwrap();
        drop(stale);
        assert!(p.exists());
        let l = Listener::bind(&p).unwrap();
        drop(l);
        // A file that is not a socket is not replaced.
        std::fs::write(&p, b"x").unwrap();
        assert!(Listener::bind(&p).err().unwrap().contains("not a socket"));
        std::fs::remove_file(&p).unwrap();
    }

    #[test]
    fn a_full_house_refuses_one_more_client() {
        // Idle time far beyond any scheduling delay: the two clients stay
        // counted until this test drops them (with 400 ms, a starved test
        // thread could see both closed before it looked).
        let p = path("house");
        let lim = Limits {
            idle: Duration::from_secs(60),
            max_clients: 2,
            ..Limits::default()
        };
        let srv = Server::start(Listener::bind(&p).unwrap(), Arc::new(Echo), lim).unwrap();
        let a = UnixStream::connect(&p).unwrap();
        let b = UnixStream::connect(&p).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while srv.clients() < 2 {
            assert!(Instant::now() < deadline, "clients never counted");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(ask(&p, "hello\n").starts_with("error: busy"));
        drop(a);
        drop(b);
        let deadline = Instant::now() + Duration::from_secs(10);
        while srv.clients() > 0 {
            assert!(Instant::now() < deadline, "closed clients never uncounted");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(ask(&p, "hello\n"), "echo hello\n");
        srv.stop();
    }

    #[test]
    fn long_lines_slow_requests_and_idle_clients_are_refused() {
        let p = path("limits");
        let lim = Limits {
            max_line: 1000,
            request_time: Duration::from_millis(300),
            idle: Duration::from_millis(400),
            max_clients: 2,
            ..Limits::default()
        };
        let srv = Server::start(Listener::bind(&p).unwrap(), Arc::new(Echo), lim).unwrap();
        let long = format!("{}\n", "x".repeat(5000));
        assert_eq!(
            ask(&p, &long),
            "error: request line longer than 1000 bytes\n"
        );
        // The lines of a request must arrive in time.
        let t = Instant::now();
        assert_eq!(
            ask(&p, "sum 2\n1\n"),
            "error: request not received in time\n"
        );
        assert!(t.elapsed() < Duration::from_secs(2));
        // An idle connection is told so and closed.
        let a = UnixStream::connect(&p).unwrap();
        let mut r = String::new();
        BufReader::new(&a).read_line(&mut r).unwrap();
        assert_eq!(r, "error: request not received in time\n");
        drop(a);
        let deadline = Instant::now() + Duration::from_secs(5);
        while srv.clients() > 0 {
            assert!(Instant::now() < deadline, "idle client never closed");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(ask(&p, "hello\n"), "echo hello\n");
        // A client trickling a byte every 20 ms (more often than the reads'
        // 100 ms wake-up) is held to the request time all the same.
        let mut c = UnixStream::connect(&p).unwrap();
        c.set_read_timeout(Some(Duration::from_millis(10))).unwrap();
        let t = Instant::now();
        let mut got = Vec::new();
        while t.elapsed() < Duration::from_secs(5) {
            if c.write_all(b"x").is_err() {
                break;
            }
            let mut b = [0u8; 64];
            match c.read(&mut b) {
                Ok(0) => break,
                Ok(k) => got.extend_from_slice(&b[..k]),
                Err(_) => {} // nothing yet: the 10 ms read timeout
            }
            if got.ends_with(b"\n") {
                break;
            }
            // The trickle's pace, not a wait for readiness.
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(got, b"error: request not received in time\n");
        assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
        srv.stop();
    }
}
