//! What an OpenFlow connection runs over: a TCP or Unix stream, or TLS
//! over TCP ([`Tls`], rustls with the ring provider), all behind one
//! small trait ([`Transport`]) so that the channel's framing loop is one
//! function for every endpoint, and for its fuzz target's in-memory
//! stream.
//!
//! TLS is mutual, as Open vSwitch's: both sides present
//! `--certificate`/`--private-key`; a listener (`pssl:`) requires the
//! peer's certificate and verifies its chain against `--ca-cert`; an
//! active connection (`ssl:`) verifies the controller's chain against
//! `--ca-cert` but, like Open vSwitch, not the name or address in it
//! ([`ChainOnly`]).

use super::controllers::poll_two;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig};
use std::io::{self, ErrorKind, Read, Write};
use std::net::{IpAddr, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// A byte stream the channel's framing loop runs over.
pub trait Transport: Read + Write {
    /// Wait up to `ms` for something to read (bytes, the end, an error),
    /// or for `wake` to become readable (a connection's queue of
    /// asynchronous messages); true when a read would not wait.
    fn readable(&mut self, ms: i32, wake: Option<RawFd>) -> bool;

    /// The time the loop's deadlines are measured in (the fuzz target's
    /// stream has a clock of its own, so that deadlines pass at once).
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// Wait on `fd`, and on `wake` if given (poll() skips a descriptor of -1).
fn wait_in(fd: RawFd, ms: i32, wake: Option<RawFd>) -> bool {
    poll_two(fd, wake.unwrap_or(-1), ms).0
}

impl Transport for TcpStream {
    fn readable(&mut self, ms: i32, wake: Option<RawFd>) -> bool {
        wait_in(self.as_raw_fd(), ms, wake)
    }
}

impl Transport for UnixStream {
    fn readable(&mut self, ms: i32, wake: Option<RawFd>) -> bool {
        wait_in(self.as_raw_fd(), ms, wake)
    }
}

/// The largest certificate or key file read (a PEM chain is a few KiB; a
/// device or a huge file is an error, not a hang).
const MAX_PEM: u64 = 1 << 20;

/// The TLS files, as `ovs-vswitchd` names its options.
#[derive(Clone, Debug, Default)]
pub struct TlsFiles {
    /// `--private-key`: this side's key (PEM: PKCS#8, PKCS#1 or SEC1).
    pub private_key: Option<PathBuf>,
    /// `--certificate`: this side's certificate (PEM; a chain may follow).
    pub certificate: Option<PathBuf>,
    /// `--ca-cert`: the CA certificates a peer's chain must end in (PEM).
    pub ca_cert: Option<PathBuf>,
}

impl TlsFiles {
    /// Is any of the files given?
    pub fn any(&self) -> bool {
        self.private_key.is_some() || self.certificate.is_some() || self.ca_cert.is_some()
    }

    /// The three files, or an error naming those missing (`what` is the
    /// endpoint, for the message).
    fn all(&self, what: &str) -> Result<(&Path, &Path, &Path), String> {
        match (&self.private_key, &self.certificate, &self.ca_cert) {
            (Some(k), Some(c), Some(ca)) => Ok((k, c, ca)),
            _ => {
                let missing: Vec<&str> = [
                    (self.private_key.is_none(), "--private-key"),
                    (self.certificate.is_none(), "--certificate"),
                    (self.ca_cert.is_none(), "--ca-cert"),
                ]
                .iter()
                .filter(|(m, _)| *m)
                .map(|(_, n)| *n)
                .collect();
                Err(format!(
                    "--openflow {what}: TLS needs --private-key, --certificate and --ca-cert (missing: {})",
                    missing.join(", ")
                ))
            }
        }
    }

    /// The listener's TLS (`pssl:`): our certificate, and a client
    /// certificate required and verified against `--ca-cert`.
    pub fn server(&self, what: &str) -> Result<Arc<ServerConfig>, String> {
        let (k, c, ca) = self.all(what)?;
        let p = provider();
        let roots = Arc::new(roots(ca)?);
        let v = WebPkiClientVerifier::builder_with_provider(roots, p.clone())
            .build()
            .map_err(|e| format!("--ca-cert '{}': {}", ca.display(), line(&e)))?;
        let cfg = ServerConfig::builder_with_provider(p)
            .with_safe_default_protocol_versions()
            .map_err(|e| line(&e))?
            .with_client_cert_verifier(v)
            .with_single_cert(certs(c)?, key(k)?)
            .map_err(|e| mismatch(k, c, &e))?;
        Ok(Arc::new(cfg))
    }

    /// The active side's TLS (`ssl:`): our certificate, and the
    /// controller's chain verified against `--ca-cert` (not its name).
    pub fn client(&self, what: &str) -> Result<Arc<ClientConfig>, String> {
        let (k, c, ca) = self.all(what)?;
        let p = provider();
        let roots = Arc::new(roots(ca)?);
        let inner = WebPkiServerVerifier::builder_with_provider(roots, p.clone())
            .build()
            .map_err(|e| format!("--ca-cert '{}': {}", ca.display(), line(&e)))?;
        let cfg = ClientConfig::builder_with_provider(p)
            .with_safe_default_protocol_versions()
            .map_err(|e| line(&e))?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(ChainOnly(inner)))
            .with_client_auth_cert(certs(c)?, key(k)?)
            .map_err(|e| mismatch(k, c, &e))?;
        Ok(Arc::new(cfg))
    }
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// An error's text on one line.
fn line(e: &dyn std::fmt::Display) -> String {
    e.to_string().replace(['\n', '\r'], " ")
}

fn mismatch(k: &Path, c: &Path, e: &rustls::Error) -> String {
    format!(
        "--private-key '{}' and --certificate '{}': {}",
        k.display(),
        c.display(),
        line(e)
    )
}

/// A PEM file's bytes (at most [`MAX_PEM`]).
fn read_pem(flag: &str, p: &Path) -> Result<Vec<u8>, String> {
    let f = std::fs::File::open(p)
        .map_err(|e| format!("{flag} '{}': cannot read: {e}", p.display()))?;
    let mut b = Vec::new();
    f.take(MAX_PEM + 1)
        .read_to_end(&mut b)
        .map_err(|e| format!("{flag} '{}': cannot read: {e}", p.display()))?;
    if b.len() as u64 > MAX_PEM {
        return Err(format!(
            "{flag} '{}': larger than {} KiB, not a PEM file",
            p.display(),
            MAX_PEM >> 10
        ));
    }
    Ok(b)
}

fn pem_certs(flag: &str, p: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let b = read_pem(flag, p)?;
    let v = CertificateDer::pem_slice_iter(&b)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{flag} '{}': {}", p.display(), line(&e)))?;
    if v.is_empty() {
        return Err(format!(
            "{flag} '{}': no PEM certificate in it",
            p.display()
        ));
    }
    Ok(v)
}

fn certs(p: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    pem_certs("--certificate", p)
}

fn key(p: &Path) -> Result<PrivateKeyDer<'static>, String> {
    let b = read_pem("--private-key", p)?;
    PrivateKeyDer::from_pem_slice(&b).map_err(|e| {
        format!(
            "--private-key '{}': no private key: {}",
            p.display(),
            line(&e)
        )
    })
}

fn roots(p: &Path) -> Result<RootCertStore, String> {
    let mut r = RootCertStore::empty();
    for c in pem_certs("--ca-cert", p)? {
        r.add(c)
            .map_err(|e| format!("--ca-cert '{}': {}", p.display(), line(&e)))?;
    }
    Ok(r)
}

/// The controller's certificate checked as Open vSwitch does: its chain
/// must end in `--ca-cert` (and be valid, for server use, now), but the
/// name or address in it is not compared with the one connected to
/// (controllers' certificates seldom name their address). The inner
/// verifier checks the name last, after the chain: only that error is
/// forgiven.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            r => r,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// TLS over a TCP stream whose reads time out (the channel's 100 ms): a
/// read that times out is `WouldBlock` and leaves the connection as it
/// was (rustls keeps a partial record), so the loop can look at its
/// deadlines and read again.
pub struct Tls {
    conn: rustls::Connection,
    sock: TcpStream,
}

impl Tls {
    /// The switch's side of a `pssl:` connection.
    pub fn accept(cfg: &Arc<ServerConfig>, sock: TcpStream) -> Result<Tls, String> {
        let c = rustls::ServerConnection::new(cfg.clone()).map_err(|e| line(&e))?;
        Ok(Tls {
            conn: c.into(),
            sock,
        })
    }

    /// The switch's side of an `ssl:` connection to `ip`.
    pub fn connect(cfg: &Arc<ClientConfig>, ip: IpAddr, sock: TcpStream) -> Result<Tls, String> {
        let c = rustls::ClientConnection::new(cfg.clone(), ServerName::IpAddress(ip.into()))
            .map_err(|e| line(&e))?;
        Ok(Tls {
            conn: c.into(),
            sock,
        })
    }

    /// Complete the handshake by `deadline` (checked at every read
    /// timeout, as is `give_up`: the switch stopping, an eviction): true
    /// when done, false if the peer closed the connection before it sent
    /// anything (a port probe, a health check). A refused peer gets TLS's
    /// alert before the error is returned.
    pub fn handshake(
        &mut self,
        deadline: Instant,
        give_up: &dyn Fn() -> bool,
    ) -> Result<bool, String> {
        let mut heard = false;
        while self.conn.is_handshaking() {
            self.push()
                .map_err(|e| format!("TLS handshake: writing: {e}"))?;
            if !self.conn.is_handshaking() {
                break;
            }
            match self.conn.read_tls(&mut self.sock) {
                Ok(0) if !heard => return Ok(false),
                Ok(0) => return Err("TLS handshake: the peer closed the connection".into()),
                Ok(_) => {
                    heard = true;
                    if let Err(e) = self.conn.process_new_packets() {
                        let _ = self.push();
                        return Err(format!("TLS handshake: {}", line(&e)));
                    }
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                    ) => {}
                Err(e) => return Err(format!("TLS handshake: reading: {e}")),
            }
            if give_up() {
                return Err("TLS handshake: abandoned".into());
            }
            if Instant::now() >= deadline {
                return Err("TLS handshake: not completed in time".into());
            }
        }
        self.push()
            .map_err(|e| format!("TLS handshake: writing: {e}"))?;
        Ok(true)
    }

    /// Write every TLS record waiting (each write may time out: an error).
    fn push(&mut self) -> io::Result<()> {
        while self.conn.wants_write() {
            if self.conn.write_tls(&mut self.sock)? == 0 {
                return Err(ErrorKind::WriteZero.into());
            }
        }
        Ok(())
    }
}

impl Read for Tls {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.conn.reader().read(buf) {
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                r => return r,
            }
            // No plaintext: more records (this read may time out).
            let n = self.conn.read_tls(&mut self.sock)?;
            let st = self.conn.process_new_packets().map_err(|e| {
                let _ = self.push();
                io::Error::new(ErrorKind::InvalidData, line(&e))
            });
            // Alerts, key updates.
            self.push()?;
            st?;
            if n == 0 {
                // The end: the reader now says how (close_notify: Ok(0),
                // else UnexpectedEof), never WouldBlock again.
                return match self.conn.reader().read(buf) {
                    Err(e) if e.kind() == ErrorKind::WouldBlock => Ok(0),
                    r => r,
                };
            }
        }
    }
}

impl Write for Tls {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.conn.writer().write(buf)?;
        self.push()?;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.conn.writer().flush()?;
        self.push()
    }
}

impl Transport for Tls {
    fn readable(&mut self, ms: i32, wake: Option<RawFd>) -> bool {
        match self.conn.process_new_packets() {
            Ok(st) if st.plaintext_bytes_to_read() > 0 || st.peer_has_closed() => true,
            Err(_) => true,
            Ok(_) => wait_in(self.sock.as_raw_fd(), ms, wake),
        }
    }
}

/// Who is on the other end of a Unix socket: "pid P uid U" (the kernel's
/// word for it, `SO_PEERCRED`), for the log.
pub fn unix_peer(s: &UnixStream) -> String {
    let mut c = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `c`.
    let r = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut c as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if r == 0 {
        format!("pid {} uid {}", c.pid, c.uid)
    } else {
        "unknown peer".into()
    }
}
