//! The requests of `linerate capture`'s control socket (one per line, see
//! [`crate::ctl`]): `shunt SRC:SPORT DST:DPORT PROTO` and `stats`.

use linerate_wire::FlowKey;

/// One request line.
#[derive(Debug, PartialEq, Eq)]
pub enum Request {
    /// Drop the rest of this connection (both directions).
    Shunt(FlowKey),
    /// The capture's counters, as one JSON line.
    Stats,
}

impl Request {
    /// Parse one request line; errors are one line.
    pub fn parse(line: &str) -> Result<Request, String> {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.first().copied() {
            Some("stats") if words.len() == 1 => Ok(Request::Stats),
            Some("stats") => Err("stats takes no argument".into()),
            Some("shunt") => parse_shunt(&words[1..]).map(Request::Shunt),
            Some(c) => Err(format!(
                "unknown command '{}' (shunt, stats)",
                c.escape_debug()
            )),
            None => Err("empty command".into()),
        }
    }
}

/// Parse `SRC:SPORT DST:DPORT PROTO`.
fn parse_shunt(words: &[&str]) -> Result<FlowKey, String> {
    let [src, dst, proto] = words else {
        return Err("usage: shunt SRC:SPORT DST:DPORT tcp|udp|NUMBER".into());
    };
    let sa: std::net::SocketAddr = src
        .parse()
        .map_err(|_| format!("'{}' is not ADDR:PORT", src.escape_debug()))?;
    let da: std::net::SocketAddr = dst
        .parse()
        .map_err(|_| format!("'{}' is not ADDR:PORT", dst.escape_debug()))?;
    let proto: u8 = match proto.to_ascii_lowercase().as_str() {
        "tcp" => 6,
        "udp" => 17,
        p => p.parse().map_err(|_| {
            format!(
                "'{}' is not tcp, udp or a protocol number",
                p.escape_debug()
            )
        })?,
    };
    let ip16 = |a: std::net::IpAddr| match a {
        std::net::IpAddr::V4(v) => v.to_ipv6_mapped().octets(),
        std::net::IpAddr::V6(v) => v.octets(),
    };
    Ok(FlowKey {
        src_ip: ip16(sa.ip()),
        dst_ip: ip16(da.ip()),
        src_port: sa.port(),
        dst_port: da.port(),
        proto,
    })
}

/// Arbitrary bytes as request lines: no panic, errors are one line.
pub fn fuzz(data: &[u8]) {
    crate::ctl::fuzz_requests(data, Request::parse);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shunt_command_parses() {
        let k = Request::parse("shunt 10.0.0.1:40000 10.0.0.2:80 tcp").unwrap();
        assert_eq!(
            k,
            Request::Shunt(FlowKey::v4([10, 0, 0, 1], [10, 0, 0, 2], 40000, 80, 6))
        );
        let Request::Shunt(k) = Request::parse("shunt [fe80::1]:1 [fe80::2]:2 17").unwrap() else {
            panic!()
        };
        assert_eq!((k.proto, k.src_port, k.dst_port), (17, 1, 2));
        assert_eq!(Request::parse(" stats ").unwrap(), Request::Stats);
        for (bad, want) in [
            ("shunt 10.0.0.1 10.0.0.2:80 tcp", "ADDR:PORT"),
            ("shunt 10.0.0.1:1 10.0.0.2:80 sctpx", "not tcp, udp"),
            ("shunt x", "usage"),
            ("stats now", "no argument"),
            ("bogus", "unknown command"),
            ("", "empty"),
        ] {
            let e = Request::parse(bad).unwrap_err();
            assert!(e.contains(want) && !e.contains('\n'), "{bad}: {e}");
        }
    }
}
