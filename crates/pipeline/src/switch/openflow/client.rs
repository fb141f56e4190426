//! A small OpenFlow 1.3 client (the controller side): what the insertion
//! benchmark and the tests use to program any OpenFlow switch — linerate
//! or Open vSwitch — the same way.
//!
//! Writes are buffered (a stream of `FLOW_MOD`s goes out in large
//! writes); [`Client::barrier`] flushes, sends a `BARRIER_REQUEST` and
//! reads until its reply, collecting the errors the switch sent before it.
//! The switch's `ECHO_REQUEST`s are answered while reading.

use super::msg::flow_mod_add;
use super::wire::{
    Header, OfError, Reader, Writer, BARRIER_REPLY, BARRIER_REQUEST, ECHO_REPLY, ECHO_REQUEST,
    ERROR, FLOW_MOD, HEADER, HELLO, MPF_MORE, MP_AGGREGATE, MULTIPART_REQUEST, NO_BUFFER, OFPG_ANY,
    OFPP_ANY, OFPTT_ALL,
};
use crate::switch::Rule;
use std::io::{BufWriter, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// An `OFPT_ERROR` the switch sent: (xid, type, code).
pub type Refused = (u32, u16, u16);

pub struct Client {
    w: BufWriter<TcpStream>,
    r: TcpStream,
    xid: u32,
}

impl Client {
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
        let r = s.try_clone().map_err(|e| e.to_string())?;
        let mut c = Client {
            w: BufWriter::with_capacity(1 << 16, s),
            r,
            xid: 1,
        };
        c.send(&super::msg::hello())?;
        c.flush()?;
        let m = c.read()?;
        if m.get(1) != Some(&HELLO) {
            return Err(format!(
                "openflow tcp:{addr}: the switch did not start with HELLO"
            ));
        }
        Ok(c)
    }

    /// A fresh transaction id.
    pub fn next_xid(&mut self) -> u32 {
        self.xid = self.xid.wrapping_add(1);
        self.xid
    }

    /// Queue one message.
    pub fn send(&mut self, m: &[u8]) -> Result<(), String> {
        self.w
            .write_all(m)
            .map_err(|e| format!("openflow: writing: {e}"))
    }

    pub fn flush(&mut self) -> Result<(), String> {
        self.w
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
        let mut w = Writer::new(FLOW_MOD, x);
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
        self.send(&w.finish())
    }

    /// One whole message (ECHO_REQUESTs answered on the way).
    pub fn read(&mut self) -> Result<Vec<u8>, String> {
        loop {
            let mut h = [0u8; HEADER];
            self.r
                .read_exact(&mut h)
                .map_err(|e| format!("openflow: reading: {e}"))?;
            let hd = Header::parse(&h).ok_or("openflow: short header")?;
            if (hd.len as usize) < HEADER {
                return Err(format!("openflow: message length {}", hd.len));
            }
            let mut m = h.to_vec();
            m.resize(hd.len as usize, 0);
            self.r
                .read_exact(&mut m[HEADER..])
                .map_err(|e| format!("openflow: reading: {e}"))?;
            if hd.kind == ECHO_REQUEST {
                m[1] = ECHO_REPLY;
                self.send(&m)?;
                self.flush()?;
                continue;
            }
            return Ok(m);
        }
    }

    /// Flush, send a barrier and read to its reply: every message queued
    /// before it has been carried out. Returns the errors the switch sent.
    pub fn barrier(&mut self) -> Result<Vec<Refused>, String> {
        let x = self.next_xid();
        self.send(&Writer::new(BARRIER_REQUEST, x).finish())?;
        self.flush()?;
        let mut errors = Vec::new();
        loop {
            let m = self.read()?;
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
        let mut w = Writer::new(MULTIPART_REQUEST, x);
        w.u16(mp);
        w.u16(0);
        w.zeros(4);
        w.bytes(body);
        self.send(&w.finish())?;
        self.flush()?;
        let mut out = Vec::new();
        loop {
            let m = self.read()?;
            let h = Header::parse(&m).ok_or("openflow: short message")?;
            if h.xid != x {
                continue;
            }
            if h.kind == ERROR {
                return Err(format!(
                    "openflow: multipart {mp} refused: error type {} code {}",
                    u16::from_be_bytes([m[8], m[9]]),
                    u16::from_be_bytes([m[10], m[11]])
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
        let mut w = Writer { b: Vec::new() };
        w.u8(OFPTT_ALL);
        w.zeros(3);
        w.u32(OFPP_ANY);
        w.u32(OFPG_ANY);
        w.zeros(4);
        w.u64(cookie);
        w.u64(u64::MAX);
        w.u16(1);
        w.u16(4);
        w.zeros(4);
        let b = self.multipart(MP_AGGREGATE, &w.b)?;
        let mut r = Reader::new(&b, "aggregate reply");
        let f = |e: OfError| e.why;
        Ok((
            r.u64().map_err(f)?,
            r.u64().map_err(f)?,
            r.u32().map_err(f)?,
        ))
    }
}
