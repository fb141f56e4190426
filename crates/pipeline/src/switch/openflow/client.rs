//! A small OpenFlow 1.3 client (the controller side): what the insertion
//! benchmark and the tests use to program any OpenFlow switch — linerate
//! or Open vSwitch — the same way.
//!
//! Writes are buffered (a stream of `FLOW_MOD`s goes out in large
//! writes); [`Client::barrier`] flushes, sends a `BARRIER_REQUEST` and
//! reads until its reply, collecting the errors the switch sent before it.
//! The switch's `ECHO_REQUEST`s are answered while reading.

use super::msg::{decode_flow_stats, flow_mod_add};
use super::wire::{
    Header, OfError, Reader, Writer, BARRIER_REPLY, BARRIER_REQUEST, ECHO_REPLY, ECHO_REQUEST,
    ERROR, FLOW_MOD, HEADER, HELLO, MPF_MORE, MP_AGGREGATE, MP_FLOW, MULTIPART_REQUEST, NO_BUFFER,
    OFPG_ANY, OFPP_ANY, OFPTT_ALL,
};
use crate::switch::Rule;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

/// An error of the connection to `target`: "openflow TARGET: WHY".
fn named(target: &str, why: &str) -> String {
    format!(
        "openflow {target}: {}",
        why.strip_prefix("openflow: ").unwrap_or(why)
    )
}

/// An `OFPT_ERROR` the switch sent: (xid, type, code).
pub type Refused = (u32, u16, u16);

/// Most bytes one request reads back (a barrier's errors before its
/// reply, a multipart reply's parts, the echo requests one read answers):
/// a switch that never stops sending is an error, not unbounded memory or
/// a hang. A dump of a million rules is about 150 MB.
pub const MAX_REPLY: usize = 512 << 20;

/// Queued writes go out once this many bytes are waiting (or at a flush).
const WRITE_BUFFER: usize = 1 << 16;

/// A controller's connection to a switch over `T` (TCP, a Unix socket, or
/// any byte stream: the fuzz target's is in memory).
pub struct Client<T = TcpStream> {
    t: T,
    out: Vec<u8>,
    xid: u32,
}

impl Client<TcpStream> {
    /// Connect and exchange `HELLO`s (OpenFlow 1.3); `timeout` bounds the
    /// connection and every later read and write (a switch that stops
    /// reading a long stream of `FLOW_MOD`s is an error, not a hang).
    pub fn connect(addr: SocketAddr, timeout: Duration) -> Result<Client, String> {
        let s = TcpStream::connect_timeout(&addr, timeout)
            .map_err(|e| format!("openflow tcp:{addr}: {e}"))?;
        Client::over(s, timeout)
    }

    /// The same over a connection made otherwise (a controller's accepted
    /// connection from a switch that connects actively).
    pub fn over(s: TcpStream, timeout: Duration) -> Result<Client, String> {
        let addr = s
            .peer_addr()
            .map(|a| a.to_string())
            .unwrap_or_else(|_| "?".into());
        let _ = s.set_nodelay(true);
        s.set_read_timeout(Some(timeout))
            .map_err(|e| e.to_string())?;
        s.set_write_timeout(Some(timeout))
            .map_err(|e| e.to_string())?;
        Client::start(s).map_err(|e| named(&format!("tcp:{addr}"), &e))
    }
}

impl Client<UnixStream> {
    /// Connect to a switch's `punix:` socket; `timeout` as
    /// [`Client::connect`]'s.
    pub fn connect_unix(path: &Path, timeout: Duration) -> Result<Self, String> {
        let name = format!("unix:{}", path.display());
        let s = UnixStream::connect(path).map_err(|e| named(&name, &e.to_string()))?;
        s.set_read_timeout(Some(timeout))
            .map_err(|e| e.to_string())?;
        s.set_write_timeout(Some(timeout))
            .map_err(|e| e.to_string())?;
        Client::start(s).map_err(|e| named(&name, &e))
    }
}

impl<T: Read + Write> Client<T> {
    /// Exchange `HELLO`s over `t` (whose reads and writes should time
    /// out: a switch that says nothing is then an error, not a hang).
    pub fn start(t: T) -> Result<Client<T>, String> {
        let mut c = Client::raw(t);
        c.send(&super::msg::hello())?;
        c.flush()?;
        let m = c.read()?;
        if m.get(1) != Some(&HELLO) {
            return Err("the switch did not start with HELLO".into());
        }
        Ok(c)
    }

    /// Without the `HELLO` exchange.
    fn raw(t: T) -> Client<T> {
        Client {
            t,
            out: Vec::with_capacity(WRITE_BUFFER),
            xid: 1,
        }
    }

    /// A fresh transaction id.
    pub fn next_xid(&mut self) -> u32 {
        self.xid = self.xid.wrapping_add(1);
        self.xid
    }

    /// Queue one message.
    pub fn send(&mut self, m: &[u8]) -> Result<(), String> {
        self.out.extend_from_slice(m);
        if self.out.len() >= WRITE_BUFFER {
            self.write_out()?;
        }
        Ok(())
    }

    fn write_out(&mut self) -> Result<(), String> {
        let r = self.t.write_all(&self.out);
        self.out.clear();
        r.map_err(|e| format!("openflow: writing: {e}"))
    }

    pub fn flush(&mut self) -> Result<(), String> {
        self.write_out()?;
        self.t
            .flush()
            .map_err(|e| format!("openflow: writing: {e}"))
    }

    /// Queue a `FLOW_MOD` adding `r`; returns its xid.
    pub fn add(&mut self, r: &Rule) -> Result<u32, String> {
        let x = self.next_xid();
        self.send(&flow_mod_add(r, x))?;
        Ok(x)
    }

    /// Queue a `FLOW_MOD` deleting every rule of every table.
    pub fn delete_all(&mut self) -> Result<(), String> {
        let x = self.next_xid();
        self.send(&delete_all_request(x))
    }

    /// One whole message (ECHO_REQUESTs answered on the way, at most
    /// [`MAX_REPLY`] bytes of them).
    pub fn read(&mut self) -> Result<Vec<u8>, String> {
        let mut echoes = 0usize;
        loop {
            let mut h = [0u8; HEADER];
            self.t
                .read_exact(&mut h)
                .map_err(|e| format!("openflow: reading: {e}"))?;
            let hd = Header::parse(&h).ok_or("openflow: short header")?;
            if (hd.len as usize) < HEADER {
                return Err(format!("openflow: message length {}", hd.len));
            }
            let mut m = h.to_vec();
            m.resize(hd.len as usize, 0);
            self.t
                .read_exact(&mut m[HEADER..])
                .map_err(|e| format!("openflow: reading: {e}"))?;
            if hd.kind == ECHO_REQUEST {
                echoes += m.len();
                if echoes > MAX_REPLY {
                    return Err("openflow: the switch sends nothing but ECHO_REQUESTs".into());
                }
                m[1] = ECHO_REPLY;
                self.send(&m)?;
                self.flush()?;
                continue;
            }
            return Ok(m);
        }
    }

    /// [`Client::read`], counting the bytes against one request's
    /// [`MAX_REPLY`].
    fn read_for(&mut self, used: &mut usize, what: &str) -> Result<Vec<u8>, String> {
        let m = self.read()?;
        *used += m.len();
        if *used > MAX_REPLY {
            return Err(format!(
                "openflow: more than {} MiB in reply to {what}",
                MAX_REPLY >> 20
            ));
        }
        Ok(m)
    }

    /// Flush, send a barrier and read to its reply: every message queued
    /// before it has been carried out. Returns the errors the switch sent.
    pub fn barrier(&mut self) -> Result<Vec<Refused>, String> {
        let x = self.next_xid();
        self.send(&Writer::new(BARRIER_REQUEST, x).finish())?;
        self.flush()?;
        let mut errors = Vec::new();
        let mut used = 0;
        loop {
            let m = self.read_for(&mut used, "a barrier")?;
            let h = Header::parse(&m).ok_or("openflow: short message")?;
            match h.kind {
                BARRIER_REPLY if h.xid == x => return Ok(errors),
                ERROR if m.len() >= 12 => errors.push((
                    h.xid,
                    u16::from_be_bytes([m[8], m[9]]),
                    u16::from_be_bytes([m[10], m[11]]),
                )),
                _ => {}
            }
        }
    }

    /// A multipart request of type `mp` with `body`: the bodies of every
    /// reply part, joined.
    pub fn multipart(&mut self, mp: u16, body: &[u8]) -> Result<Vec<u8>, String> {
        let x = self.next_xid();
        self.send(&multipart_request(x, mp, body))?;
        self.flush()?;
        let mut out = Vec::new();
        let mut used = 0;
        loop {
            let m = self.read_for(&mut used, "a multipart request")?;
            let h = Header::parse(&m).ok_or("openflow: short message")?;
            if h.xid != x {
                continue;
            }
            if h.kind == ERROR {
                let code = |i: usize| {
                    m.get(i..i + 2)
                        .map_or(0, |b| u16::from_be_bytes([b[0], b[1]]))
                };
                return Err(format!(
                    "openflow: multipart {mp} refused: error type {} code {}",
                    code(8),
                    code(10)
                ));
            }
            if m.len() < 16 {
                return Err("openflow: short multipart reply".into());
            }
            out.extend_from_slice(&m[16..]);
            if u16::from_be_bytes([m[10], m[11]]) & MPF_MORE == 0 {
                return Ok(out);
            }
        }
    }

    /// (packets, bytes, rules) of the rules whose cookie is `cookie`
    /// (`OFPMP_AGGREGATE`, every table).
    pub fn aggregate(&mut self, cookie: u64) -> Result<(u64, u64, u32), String> {
        let b = self.multipart(MP_AGGREGATE, &stats_request(cookie, u64::MAX))?;
        let mut r = Reader::new(&b, "aggregate reply");
        let f = |e: OfError| e.why;
        Ok((
            r.u64().map_err(f)?,
            r.u64().map_err(f)?,
            r.u32().map_err(f)?,
        ))
    }

    /// Every rule of every table, with its (packets, bytes)
    /// (`OFPMP_FLOW`).
    pub fn dump_flows(&mut self) -> Result<Vec<(Rule, u64, u64)>, String> {
        let b = self.multipart(MP_FLOW, &stats_request(0, 0))?;
        decode_flow_stats(&b).map_err(|e| format!("openflow: flow stats reply: {e}"))
    }
}

/// A `FLOW_MOD` deleting every rule of every table.
pub fn delete_all_request(xid: u32) -> Vec<u8> {
    let mut w = Writer::new(FLOW_MOD, xid);
    w.zeros(16); // cookie, cookie mask
    w.u8(OFPTT_ALL);
    w.u8(3); // OFPFC_DELETE
    w.zeros(6);
    w.u32(NO_BUFFER);
    w.u32(OFPP_ANY);
    w.u32(OFPG_ANY);
    w.zeros(4);
    w.u16(1); // empty OXM match
    w.u16(4);
    w.zeros(4);
    w.finish()
}

/// A multipart request of type `mp` with `body`.
pub fn multipart_request(xid: u32, mp: u16, body: &[u8]) -> Vec<u8> {
    let mut w = Writer::new(MULTIPART_REQUEST, xid);
    w.u16(mp);
    w.u16(0);
    w.zeros(4);
    w.bytes(body);
    w.finish()
}

/// The body of a flow or aggregate statistics request: every table, port
/// and group, the rules whose cookie matches `cookie` under `mask`.
pub fn stats_request(cookie: u64, mask: u64) -> Vec<u8> {
    let mut w = Writer { b: Vec::new() };
    w.u8(OFPTT_ALL);
    w.zeros(3);
    w.u32(OFPP_ANY);
    w.u32(OFPG_ANY);
    w.zeros(4);
    w.u64(cookie);
    w.u64(mask);
    w.u16(1); // empty OXM match
    w.u16(4);
    w.zeros(4);
    w.b
}

/// What a switch sent, read back in chunks of sizes its bytes pick; what
/// is written to it goes nowhere.
struct Replay<'a>(&'a [u8], usize);

impl Read for Replay<'_> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if self.0.is_empty() {
            return Ok(0);
        }
        self.1 = self.1.wrapping_mul(31).wrapping_add(self.0[0] as usize);
        let k = (self.1 % 97 + 1).min(self.0.len()).min(out.len());
        out[..k].copy_from_slice(&self.0[..k]);
        self.0 = &self.0[k..];
        Ok(k)
    }
}

impl Write for Replay<'_> {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Arbitrary bytes as a switch's replies to this client: the first byte
/// picks the requests (read, barrier, flow dump, aggregate, a multipart
/// of another type) and the rest is what the switch sends, in chunks of
/// sizes the bytes pick. No panic, no hang (the end of the bytes is an
/// error of the request waiting), memory bounded by the bytes; the rest
/// is also decoded as a flow dump on its own.
pub fn fuzz_client(data: &[u8]) {
    let Some((&ops, rest)) = data.split_first() else {
        return;
    };
    let _ = decode_flow_stats(rest);
    let mut c = Client::raw(Replay(rest, 7));
    for i in 0..4 {
        let r = match (ops >> (2 * i)) & 3 {
            0 => c.read().map(|_| ()),
            1 => c.barrier().map(|_| ()),
            2 => c.dump_flows().map(|_| ()),
            _ if ops & 0x80 != 0 => c.multipart(7, &[]).map(|_| ()),
            _ => c.aggregate(5).map(|_| ()),
        };
        if let Err(e) = r {
            assert!(!e.contains('\n'), "{e}");
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::msg::hello;
    use super::super::wire::{MULTIPART_REPLY, VERSION};
    use super::*;

    fn reply(kind: u8, xid: u32, body: &[u8]) -> Vec<u8> {
        let mut w = Writer::new(kind, xid);
        w.bytes(body);
        w.finish()
    }

    #[test]
    fn replies_are_read_and_bad_ones_are_errors() {
        // A barrier (xid 2) with an error before it, answered.
        let mut d = vec![0b01];
        d.extend(reply(ERROR, 9, &[0, 1, 0, 6]));
        d.extend(reply(BARRIER_REPLY, 2, &[]));
        fuzz_client(&d);
        // A reply length under a header's: an error, not a wait.
        let mut c = Client::raw(Replay(&[VERSION, 0, 0, 4, 0, 0, 0, 0], 0));
        assert!(c.read().unwrap_err().contains("message length 4"));
        // An error reply to a multipart request shorter than an error.
        let e = reply(ERROR, 2, &[]);
        let mut c = Client::raw(Replay(&e, 0));
        assert!(c.multipart(7, &[]).unwrap_err().contains("refused"));
        // The end of the stream in the middle of a reply.
        let mut m = reply(MULTIPART_REPLY, 2, &[0, 1, 0, 1, 0, 0, 0, 0]);
        m.truncate(12);
        let mut c = Client::raw(Replay(&m, 0));
        assert!(c.dump_flows().unwrap_err().contains("reading"));
        // HELLO, then the dump of an empty table.
        let mut d = hello();
        d.extend(reply(MULTIPART_REPLY, 2, &[0, 1, 0, 0, 0, 0, 0, 0]));
        let mut c = Client::start(Replay(&d, 0)).unwrap();
        assert!(c.dump_flows().unwrap().is_empty());
        for seed in 0u8..32 {
            let d: Vec<u8> = (0..200u32)
                .map(|i| (i as u8).wrapping_mul(seed) ^ seed.rotate_left(3))
                .collect();
            fuzz_client(&d);
        }
    }
}
