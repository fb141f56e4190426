//! NAPI instances of the interfaces of the calling thread's network namespace,
//! read with the generic netlink family "netdev" (`napi-get` dump, Linux 6.8+
//! reports the pid of the NAPI kthread when threaded NAPI is on).
//!
//! Kthreads are named `napi/IFNAME-ID`, and our interface names (g0, d0, ...)
//! repeat in every test bed, so the name alone cannot tell which bed a thread
//! belongs to; the netlink dump, made from inside the bed's namespace, can.

use std::io;

const NETLINK_GENERIC: i32 = 16;
const GENL_ID_CTRL: u16 = 0x10;
const CTRL_CMD_GETFAMILY: u8 = 3;
const CTRL_ATTR_FAMILY_ID: u16 = 1;
const CTRL_ATTR_FAMILY_NAME: u16 = 2;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_ACK: u16 = 4;
const NLM_F_DUMP: u16 = 0x300;
/// `NETDEV_CMD_NAPI_GET` in include/uapi/linux/netdev.h.
const NETDEV_CMD_NAPI_GET: u8 = 11;
const NETDEV_A_NAPI_IFINDEX: u16 = 1;
const NETDEV_A_NAPI_ID: u16 = 2;
const NETDEV_A_NAPI_PID: u16 = 4;

/// One NAPI instance as the kernel reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NapiEntry {
    pub ifindex: u32,
    pub napi_id: u32,
    /// Pid of the `napi/IF-ID` kthread; None when NAPI is not threaded.
    pub pid: Option<u32>,
}

struct Sock(i32);

impl Drop for Sock {
    fn drop(&mut self) {
        // SAFETY: we own the descriptor.
        unsafe { libc::close(self.0) };
    }
}

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

fn msg(ty: u16, flags: u16, seq: u32, cmd: u8, attrs: &[(u16, &[u8])]) -> Vec<u8> {
    let mut b = vec![0u8; 20];
    for (t, v) in attrs {
        let len = 4 + v.len();
        b.extend_from_slice(&(len as u16).to_ne_bytes());
        b.extend_from_slice(&t.to_ne_bytes());
        b.extend_from_slice(v);
        b.resize(align4(b.len()), 0);
    }
    let total = b.len() as u32;
    b[0..4].copy_from_slice(&total.to_ne_bytes());
    b[4..6].copy_from_slice(&ty.to_ne_bytes());
    b[6..8].copy_from_slice(&flags.to_ne_bytes());
    b[8..12].copy_from_slice(&seq.to_ne_bytes());
    b[16] = cmd;
    b[17] = 1; // version
    b
}

/// Attributes after the 4-byte genl header; malformed lengths end the walk.
fn attrs(payload: &[u8]) -> Vec<(u16, &[u8])> {
    let mut out = Vec::new();
    let mut p = payload;
    while p.len() >= 4 {
        let len = u16::from_ne_bytes([p[0], p[1]]) as usize;
        let ty = u16::from_ne_bytes([p[2], p[3]]) & 0x3fff;
        if len < 4 || len > p.len() {
            break;
        }
        out.push((ty, &p[4..len]));
        p = &p[align4(len).min(p.len())..];
    }
    out
}

fn u32_of(v: &[u8]) -> Option<u32> {
    v.get(..4)
        .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
}

impl Sock {
    fn open() -> io::Result<Sock> {
        // SAFETY: plain socket(2) call.
        let fd = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                NETLINK_GENERIC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Sock(fd))
    }

    fn send(&self, b: &[u8]) -> io::Result<()> {
        // SAFETY: b is a valid buffer; the kernel address is all zeros.
        let mut sa: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        sa.nl_family = libc::AF_NETLINK as u16;
        let r = unsafe {
            libc::sendto(
                self.0,
                b.as_ptr().cast(),
                b.len(),
                0,
                (&sa as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as u32,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Receive messages of request `seq` until DONE (dump) or the first
    /// reply (non-dump); returns the genl payloads (after the genl header).
    fn recv_all(&self, seq: u32, dump: bool) -> io::Result<Vec<Vec<u8>>> {
        let mut buf = vec![0u8; 65536];
        let mut out = Vec::new();
        loop {
            // SAFETY: buf is valid for its length.
            let n = unsafe { libc::recv(self.0, buf.as_mut_ptr().cast(), buf.len(), 0) };
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            let mut p = &buf[..n as usize];
            while p.len() >= 16 {
                let len = u32_of(p).unwrap_or(0) as usize;
                if len < 16 || len > p.len() {
                    return Err(io::Error::other("malformed netlink reply"));
                }
                let ty = u16::from_ne_bytes([p[4], p[5]]);
                let s = u32_of(&p[8..]).unwrap_or(0);
                if s == seq {
                    match ty {
                        NLMSG_DONE => return Ok(out),
                        NLMSG_ERROR => {
                            let e = u32_of(&p[16..]).unwrap_or(0) as i32;
                            if e != 0 {
                                return Err(io::Error::from_raw_os_error(-e));
                            }
                            if !dump {
                                return Ok(out);
                            }
                        }
                        _ => {
                            if len >= 20 {
                                out.push(p[20..len].to_vec());
                            }
                        }
                    }
                }
                p = &p[align4(len).min(p.len())..];
            }
        }
    }
}

fn family_id(s: &Sock, name: &str) -> io::Result<u16> {
    let mut n = name.as_bytes().to_vec();
    n.push(0);
    s.send(&msg(
        GENL_ID_CTRL,
        NLM_F_REQUEST | NLM_F_ACK,
        1,
        CTRL_CMD_GETFAMILY,
        &[(CTRL_ATTR_FAMILY_NAME, &n)],
    ))?;
    for m in s.recv_all(1, false)? {
        for (t, v) in attrs(&m) {
            if t == CTRL_ATTR_FAMILY_ID && v.len() >= 2 {
                return Ok(u16::from_ne_bytes([v[0], v[1]]));
            }
        }
    }
    Err(io::Error::other(format!(
        "generic netlink family '{name}' not found"
    )))
}

/// NAPI instances of the calling thread's network namespace (run it inside
/// [`super::in_netns`]).
pub fn napi_list() -> io::Result<Vec<NapiEntry>> {
    let s = Sock::open()?;
    let fam = family_id(&s, "netdev")
        .map_err(|e| io::Error::other(format!("netdev netlink family (Linux 6.8+): {e}")))?;
    s.send(&msg(
        fam,
        NLM_F_REQUEST | NLM_F_DUMP,
        2,
        NETDEV_CMD_NAPI_GET,
        &[],
    ))?;
    let mut out = Vec::new();
    for m in s.recv_all(2, true)? {
        let mut e = NapiEntry {
            ifindex: 0,
            napi_id: 0,
            pid: None,
        };
        for (t, v) in attrs(&m) {
            match t {
                NETDEV_A_NAPI_IFINDEX => e.ifindex = u32_of(v).unwrap_or(0),
                NETDEV_A_NAPI_ID => e.napi_id = u32_of(v).unwrap_or(0),
                NETDEV_A_NAPI_PID => e.pid = u32_of(v).filter(|&p| p != 0),
                _ => {}
            }
        }
        out.push(e);
    }
    Ok(out)
}
