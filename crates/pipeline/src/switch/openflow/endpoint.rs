//! Where the OpenFlow channel listens or connects, in Open vSwitch's
//! syntax (`ovs-vswitchd`'s controller targets, `ovs-ofctl`'s switch
//! targets): `punix:PATH`, `pssl:[PORT][:ADDR]` and `ptcp:[PORT][:ADDR]`
//! listen; `unix:PATH`, `ssl:IP[:PORT]` and `tcp:IP[:PORT]` connect to a
//! controller. The port is 6653 unless given; a listener's address is
//! 127.0.0.1 unless given (every other address is opt-in). An IPv6
//! address goes in brackets (`tcp:[::1]:6653`, `ptcp:6653:[::1]`), or
//! bare where nothing can follow it (`tcp:::1`, `ptcp:6653:::1`).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;

/// The OpenFlow port (IANA), as Open vSwitch's default.
pub const DEFAULT_PORT: u16 = 6653;

/// The longest Unix socket path (`sun_path` holds 108 bytes with the
/// terminating zero).
const MAX_PATH: usize = 107;

/// Where the channel listens or connects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// `punix:PATH`: a Unix socket, mode 0600 (only root can connect).
    PUnix(PathBuf),
    /// `pssl:[PORT][:ADDR]`: TLS with client certificates (mutual).
    PSsl(SocketAddr),
    /// `ptcp:[PORT][:ADDR]`: plain TCP, no authentication at all.
    PTcp(SocketAddr),
    /// `unix:PATH`: connect to a controller's Unix socket.
    Unix(PathBuf),
    /// `ssl:IP[:PORT]`: connect to a controller over mutual TLS.
    Ssl(SocketAddr),
    /// `tcp:IP[:PORT]`: connect to a controller over plain TCP.
    Tcp(SocketAddr),
}

const FORMS: &str =
    "punix:PATH, pssl:[PORT][:ADDR], ptcp:[PORT][:ADDR], unix:PATH, ssl:IP[:PORT] or tcp:IP[:PORT]";

impl Endpoint {
    /// Parse one of the forms of the module docs. Errors are one line
    /// (the input is quoted with its control characters escaped).
    pub fn parse(s: &str) -> Result<Endpoint, String> {
        let bad = |why: &str| format!("--openflow '{}': {why} ({FORMS})", s.escape_debug());
        let (kind, rest) = s
            .split_once(':')
            .ok_or_else(|| bad("no kind (such as 'punix:')"))?;
        match kind {
            "ptcp" => listen_addr(rest).map(Endpoint::PTcp).map_err(|e| bad(&e)),
            "pssl" => listen_addr(rest).map(Endpoint::PSsl).map_err(|e| bad(&e)),
            "tcp" => peer_addr(rest).map(Endpoint::Tcp).map_err(|e| bad(&e)),
            "ssl" => peer_addr(rest).map(Endpoint::Ssl).map_err(|e| bad(&e)),
            "punix" => socket_path(rest).map(Endpoint::PUnix).map_err(|e| bad(&e)),
            "unix" => socket_path(rest).map(Endpoint::Unix).map_err(|e| bad(&e)),
            _ => Err(bad(&format!("unknown kind '{}'", kind.escape_debug()))),
        }
    }

    /// Does the channel listen (accept connections) rather than connect?
    pub fn listens(&self) -> bool {
        matches!(
            self,
            Endpoint::PUnix(_) | Endpoint::PSsl(_) | Endpoint::PTcp(_)
        )
    }

    /// Is it TLS (needs `--private-key`, `--certificate`, `--ca-cert`)?
    pub fn tls(&self) -> bool {
        matches!(self, Endpoint::PSsl(_) | Endpoint::Ssl(_))
    }
}

/// Open vSwitch's syntax, which [`Endpoint::parse`] reads back to the same
/// endpoint: a listener always with its address (`ptcp:6653:127.0.0.1`,
/// `pssl:6653:[::1]`), an active one as `tcp:IP:PORT` (`tcp:[::1]:6653`).
impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let listen = |f: &mut fmt::Formatter<'_>, kind: &str, a: &SocketAddr| match a.ip() {
            IpAddr::V4(ip) => write!(f, "{kind}:{}:{ip}", a.port()),
            IpAddr::V6(ip) => write!(f, "{kind}:{}:[{ip}]", a.port()),
        };
        match self {
            Endpoint::PUnix(p) => write!(f, "punix:{}", p.display()),
            Endpoint::PSsl(a) => listen(f, "pssl", a),
            Endpoint::PTcp(a) => listen(f, "ptcp", a),
            Endpoint::Unix(p) => write!(f, "unix:{}", p.display()),
            Endpoint::Ssl(a) => write!(f, "ssl:{a}"),
            Endpoint::Tcp(a) => write!(f, "tcp:{a}"),
        }
    }
}

fn port(p: &str) -> Result<u16, String> {
    p.parse::<u16>()
        .map_err(|_| format!("'{}' is not a port (0-65535)", p.escape_debug()))
}

fn ip(a: &str) -> Result<IpAddr, String> {
    let inner = match a.strip_prefix('[') {
        Some(r) => r
            .strip_suffix(']')
            .ok_or_else(|| format!("'{}' has no closing ']'", a.escape_debug()))?,
        None => a,
    };
    inner
        .parse::<IpAddr>()
        .map_err(|_| format!("'{}' is not an IP address", a.escape_debug()))
}

/// `[PORT][:ADDR]`: the port comes first, so everything after its colon is
/// the address (a bare IPv6 address too).
fn listen_addr(rest: &str) -> Result<SocketAddr, String> {
    let (p, a) = rest.split_once(':').unwrap_or((rest, ""));
    let p = if p.is_empty() { DEFAULT_PORT } else { port(p)? };
    let a = if a.is_empty() {
        IpAddr::V4(Ipv4Addr::LOCALHOST)
    } else {
        ip(a)?
    };
    Ok(SocketAddr::new(a, p))
}

/// `IP[:PORT]`: `1.2.3.4`, `1.2.3.4:6653`, `[::1]`, `[::1]:6653`, or a
/// bare IPv6 address without a port (`::1`: more than one colon).
fn peer_addr(rest: &str) -> Result<SocketAddr, String> {
    let (a, p) = if let Some(r) = rest.strip_prefix('[') {
        let (a, after) = r
            .split_once(']')
            .ok_or_else(|| format!("'{}' has no closing ']'", rest.escape_debug()))?;
        let a = a
            .parse::<Ipv6Addr>()
            .map_err(|_| format!("'[{}]' is not an IPv6 address", a.escape_debug()))?;
        let p = match after {
            "" => DEFAULT_PORT,
            _ => port(after.strip_prefix(':').ok_or_else(|| {
                format!("'{}' after ']' (expected ':PORT')", after.escape_debug())
            })?)?,
        };
        (IpAddr::V6(a), p)
    } else if rest.matches(':').count() > 1 {
        (ip(rest)?, DEFAULT_PORT)
    } else {
        let (a, p) = rest.split_once(':').unwrap_or((rest, ""));
        if a.is_empty() {
            return Err("no IP address".into());
        }
        let p = if p.is_empty() { DEFAULT_PORT } else { port(p)? };
        (ip(a)?, p)
    };
    if p == 0 {
        return Err("port 0 cannot be connected to".into());
    }
    Ok(SocketAddr::new(a, p))
}

fn socket_path(p: &str) -> Result<PathBuf, String> {
    if p.is_empty() {
        return Err("no path".into());
    }
    if p.chars().any(char::is_control) {
        return Err("the path has control characters".into());
    }
    if p.len() > MAX_PATH {
        return Err(format!(
            "the path is {} bytes, a Unix socket's is at most {MAX_PATH}",
            p.len()
        ));
    }
    Ok(PathBuf::from(p))
}

/// Arbitrary bytes as an `--openflow` value: no panic; an error is one
/// line; an endpoint prints in Open vSwitch's syntax and reads back to
/// itself.
pub fn fuzz_endpoint(data: &[u8]) {
    let s = String::from_utf8_lossy(data);
    match Endpoint::parse(&s) {
        Ok(ep) => {
            let shown = ep.to_string();
            assert_eq!(Endpoint::parse(&shown).as_ref(), Ok(&ep), "{shown}");
        }
        Err(e) => assert!(!e.contains(['\n', '\r']), "{e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> Endpoint {
        Endpoint::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn forms_as_open_vswitch_writes_them() {
        assert_eq!(ok("ptcp:"), Endpoint::PTcp(sa("127.0.0.1:6653")));
        assert_eq!(ok("ptcp:6633"), Endpoint::PTcp(sa("127.0.0.1:6633")));
        assert_eq!(ok("ptcp:0"), Endpoint::PTcp(sa("127.0.0.1:0")));
        assert_eq!(ok("ptcp::0.0.0.0"), Endpoint::PTcp(sa("0.0.0.0:6653")));
        assert_eq!(ok("pssl:7000:[::1]"), Endpoint::PSsl(sa("[::1]:7000")));
        // A bare IPv6 address after the port: everything after the colon.
        assert_eq!(ok("ptcp:6653:::1"), Endpoint::PTcp(sa("[::1]:6653")));
        assert_eq!(ok("tcp:10.0.0.1"), Endpoint::Tcp(sa("10.0.0.1:6653")));
        assert_eq!(ok("tcp:10.0.0.1:99"), Endpoint::Tcp(sa("10.0.0.1:99")));
        assert_eq!(ok("ssl:[::1]:99"), Endpoint::Ssl(sa("[::1]:99")));
        assert_eq!(ok("ssl:[::1]"), Endpoint::Ssl(sa("[::1]:6653")));
        // The case: `tcp:::1` is ::1 on the default port, not
        // port 1 of `::`.
        assert_eq!(ok("tcp:::1"), Endpoint::Tcp(sa("[::1]:6653")));
        assert_eq!(ok("tcp:fe80::2:3"), Endpoint::Tcp(sa("[fe80::2:3]:6653")));
        assert_eq!(ok("punix:/run/lr.of"), Endpoint::PUnix("/run/lr.of".into()));
        assert_eq!(ok("unix:rel/x"), Endpoint::Unix("rel/x".into()));
        assert!(ok("punix:/x").listens() && !ok("unix:/x").listens());
        assert!(ok("pssl:").tls() && ok("ssl:1.2.3.4").tls() && !ok("ptcp:").tls());
    }

    #[test]
    fn errors_are_one_line_and_say_why() {
        for (s, why) in [
            ("", "no kind"),
            ("6653", "no kind"),
            ("udp:1.2.3.4", "unknown kind 'udp'"),
            ("ptcp:x", "'x' is not a port"),
            ("ptcp:70000", "not a port"),
            ("ptcp:1:host", "'host' is not an IP address"),
            ("ptcp:1:[::1", "no closing ']'"),
            ("tcp:", "no IP address"),
            ("tcp::5", "no IP address"),
            ("tcp:1.2.3.4:0", "port 0"),
            ("tcp:[::1]x", "after ']'"),
            ("tcp:[1.2.3.4]:5", "not an IPv6 address"),
            ("tcp:::1:x:y", "not an IP address"),
            ("punix:", "no path"),
            ("unix:/a\nb", "control characters"),
        ] {
            let e = Endpoint::parse(s).unwrap_err();
            assert!(e.contains(why), "{s:?}: {e}");
            assert!(!e.contains('\n'), "{s:?}: {e}");
        }
        let long = format!("punix:/{}", "a".repeat(200));
        assert!(Endpoint::parse(&long).unwrap_err().contains("at most 107"));
    }

    #[test]
    fn endpoints_print_back_to_themselves() {
        for s in [
            "ptcp:",
            "ptcp:6653:::1",
            "pssl:1:[fe80::1]",
            "ptcp::0.0.0.0",
            "tcp:::1",
            "tcp:[::ffff:1.2.3.4]:9",
            "ssl:10.1.2.3",
            "punix:/tmp/a b",
            "unix:x",
        ] {
            fuzz_endpoint(s.as_bytes());
        }
        assert_eq!(ok("ptcp:").to_string(), "ptcp:6653:127.0.0.1");
        assert_eq!(ok("tcp:::1").to_string(), "tcp:[::1]:6653");
        assert_eq!(ok("pssl:9:::1").to_string(), "pssl:9:[::1]");
        fuzz_endpoint(b"\xff\xfe:\n");
    }
}
