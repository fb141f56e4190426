//! Watching the interface under a port: an interface that is deleted or
//! set down under a running pipeline becomes a one-line error within a
//! fraction of a second, instead of a port that silently never receives
//! again (an AF_XDP socket whose interface is gone polls as "nothing to
//! read" forever) or an error code nobody looks at.
//!
//! Each port half owns a [`LinkWatch`] and calls [`LinkWatch::tick`] once
//! per `recv`/`wait`/`send`/`flush` call, i.e. once per batch, never per
//! packet: it reads the coarse monotonic clock (a vDSO call, no system
//! call) and, every [`CHECK_EVERY`], asks the kernel about the interface
//! (one `ioctl` for its name by index, one for its flags) and the socket
//! (its pending error, `SO_ERROR`). The `ioctl`s go through a datagram
//! socket of the port's network namespace, opened with the port.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

use crate::error::PortError;
use crate::uri::Uri;

/// How often the interface is looked at.
pub const CHECK_EVERY: Duration = Duration::from_millis(200);

/// What is wrong with an interface, if anything.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkState {
    Up,
    /// Administratively down (`ip link set IF down`).
    Down,
    /// No interface with this index any more (`ip link del`).
    Gone,
}

/// The coarse monotonic clock in nanoseconds (vDSO, no system call).
#[inline(always)]
fn coarse_ns() -> u64 {
    crate::time::clock_ns(libc::CLOCK_MONOTONIC_COARSE)
}

/// The interface under one port half (see the module docs).
pub struct LinkWatch {
    /// For the ioctls: a datagram socket of the port's namespace.
    ctl: OwnedFd,
    ifindex: u32,
    ifname: String,
    /// The port's own socket, for `SO_ERROR` (-1: none).
    sock: RawFd,
    /// What the error says the port is ("port 'afxdp:d0'").
    what: String,
    next_ns: u64,
    failed: Option<PortError>,
}

impl LinkWatch {
    /// Watch `ifname` (index `ifindex`) for the port `uri`; `sock` is the
    /// port's socket (its pending error is read too), or -1.
    pub fn new(uri: &str, ifname: &str, ifindex: u32, sock: RawFd) -> Result<LinkWatch, PortError> {
        // SAFETY: plain socket call, checked.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(PortError::os(
                format!("port '{uri}': a socket to watch '{ifname}'"),
                std::io::Error::last_os_error(),
            ));
        }
        Ok(LinkWatch {
            // SAFETY: fd was just created and is owned by nobody else.
            ctl: unsafe { OwnedFd::from_raw_fd(fd) },
            ifindex,
            ifname: ifname.to_string(),
            sock,
            what: format!("port '{uri}'"),
            next_ns: coarse_ns() + CHECK_EVERY.as_nanos() as u64,
            failed: None,
        })
    }

    /// Once per call of the port: an error once the interface is gone or
    /// down (and ever after). Cheap unless a check is due.
    #[inline]
    pub fn tick(&mut self) -> Result<(), PortError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let now = coarse_ns();
        if now < self.next_ns {
            return Ok(());
        }
        self.next_ns = now + CHECK_EVERY.as_nanos() as u64;
        self.check()
    }

    /// Look at the interface and the socket now.
    #[cold]
    pub fn check(&mut self) -> Result<(), PortError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let mut state = self.state();
        if state == LinkState::Down {
            // `ip link del` sets the interface down first: look again a
            // moment later to name what really happened (once, on the way
            // to an error, never on the packet path).
            std::thread::sleep(Duration::from_millis(50));
            state = self.state();
        }
        let why = match state {
            LinkState::Gone => Some(format!(
                "interface '{}' is gone (deleted while in use)",
                self.ifname
            )),
            LinkState::Down => Some(format!("interface '{}' went down", self.ifname)),
            LinkState::Up => self.socket_error().map(|e| {
                format!(
                    "interface '{}': the socket reports an error: {e}",
                    self.ifname
                )
            }),
        };
        match why {
            Some(w) => {
                let e = PortError::new(format!("{}: {w}", self.what));
                self.failed = Some(e.clone());
                Err(e)
            }
            None => Ok(()),
        }
    }

    /// The interface's state, by index (a renamed interface is still ours).
    pub fn state(&self) -> LinkState {
        // SAFETY: ifreq is plain data; zero is a valid value.
        let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
        ifr.ifr_ifru.ifru_ifindex = self.ifindex as libc::c_int;
        // SAFETY: ifr is a valid ifreq; SIOCGIFNAME fills ifr_name.
        if unsafe { libc::ioctl(self.ctl.as_raw_fd(), libc::SIOCGIFNAME, &mut ifr) } < 0 {
            let e = std::io::Error::last_os_error();
            return if matches!(e.raw_os_error(), Some(libc::ENODEV) | Some(libc::ENXIO)) {
                LinkState::Gone
            } else {
                LinkState::Up // cannot tell: do not stop a working port
            };
        }
        // SAFETY: ifr_name is NUL-terminated by the kernel; SIOCGIFFLAGS
        // fills the flags member.
        if unsafe { libc::ioctl(self.ctl.as_raw_fd(), libc::SIOCGIFFLAGS, &mut ifr) } < 0 {
            let e = std::io::Error::last_os_error();
            return if e.raw_os_error() == Some(libc::ENODEV) {
                LinkState::Gone
            } else {
                LinkState::Up
            };
        }
        // SAFETY: SIOCGIFFLAGS filled the flags member of the union.
        let flags = unsafe { ifr.ifr_ifru.ifru_flags } as libc::c_int;
        if flags & libc::IFF_UP == 0 {
            LinkState::Down
        } else {
            LinkState::Up
        }
    }

    /// The socket's pending error (`SO_ERROR`, which also clears it): the
    /// kernel sets ENETDOWN on AF_PACKET and AF_XDP sockets whose interface
    /// went down or away.
    fn socket_error(&self) -> Option<std::io::Error> {
        if self.sock < 0 {
            return None;
        }
        let mut v: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: v is writable for len bytes.
        let r = unsafe {
            libc::getsockopt(
                self.sock,
                libc::SOL_SOCKET,
                libc::SO_ERROR,
                &mut v as *mut libc::c_int as *mut libc::c_void,
                &mut len,
            )
        };
        // Only the errors that say the device is gone: anything else (read
        // and so cleared here) is not this watch's business.
        (r == 0 && matches!(v, libc::ENETDOWN | libc::ENODEV | libc::ENXIO))
            .then(|| std::io::Error::from_raw_os_error(v))
    }
}

/// Watches on the interfaces an in-kernel (XDP) job runs on, which has no
/// port to notice them going away: [`LinkWatch::tick`] each from its loop.
pub fn watch_interfaces(names: &[&str]) -> Result<Vec<LinkWatch>, PortError> {
    names
        .iter()
        .map(|n| {
            let uri = Uri::parse(&format!("afxdp:{n}"))?;
            LinkWatch::new(n, n, ifindex(&uri, n)?, -1)
        })
        .collect()
}

/// Interface index of `name` in the current network namespace, or a one-line error.
pub fn ifindex(uri: &Uri, name: &str) -> Result<u32, PortError> {
    let c = std::ffi::CString::new(name).map_err(|_| uri.err("interface name contains NUL"))?;
    // SAFETY: c is a valid NUL-terminated string.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if idx == 0 {
        return Err(uri.err(format!(
            "no interface named '{name}' in this network namespace"
        )));
    }
    Ok(idx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_up_and_a_missing_index_is_gone() {
        let lo = unsafe { libc::if_nametoindex(c"lo".as_ptr()) };
        assert!(lo > 0);
        let mut w = LinkWatch::new("afpacket:lo", "lo", lo, -1).unwrap();
        assert_eq!(w.state(), LinkState::Up);
        w.check().unwrap();
        let mut gone = LinkWatch::new("afpacket:x", "x", 0x7fff_fff0, -1).unwrap();
        assert_eq!(gone.state(), LinkState::Gone);
        let e = gone.check().unwrap_err().to_string();
        assert_eq!(
            e,
            "port 'afpacket:x': interface 'x' is gone (deleted while in use)"
        );
        // Sticky, also through tick.
        assert_eq!(gone.tick().unwrap_err().to_string(), e);
    }
}
