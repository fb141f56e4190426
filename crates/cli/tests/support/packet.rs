//! Raw packet sockets opened in a network namespace ([`PacketSocket`]) that
//! send real frames and see every frame that arrives, VLAN tag included
//! (put back from the auxiliary data by linerate_io's own `vlan_of`, which
//! is why this stays beside the CLI tests rather than in the test kit).

use linerate_testkit::run_in;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

/// A raw AF_PACKET socket bound to one interface of a namespace: it sends
/// whole Ethernet frames as given and receives every frame that arrives on
/// the interface (whatever its destination address; not the frames it
/// sends itself), with the VLAN tag that the kernel may have taken out of
/// the frame (receive VLAN offload) put back in place.
pub struct PacketSocket {
    fd: OwnedFd,
    pub ifname: String,
}

fn sockopt_int(fd: i32, opt: i32, v: i32, what: &str) {
    // SAFETY: a valid socket and an int option value of the right size.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_PACKET,
            opt,
            &v as *const i32 as *const libc::c_void,
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    assert_eq!(r, 0, "{what}: {}", std::io::Error::last_os_error());
}

impl PacketSocket {
    /// Open it on `ifname` in namespace `ns`. From the return on, every
    /// frame that arrives there waits in the socket until read.
    pub fn open(ns: &str, ifname: &str) -> PacketSocket {
        let name = ifname.to_string();
        // Sockets made in a thread that entered `ns` stay there for good.
        let fd = run_in(ns, move || {
            let proto = (libc::ETH_P_ALL as u16).to_be();
            // SAFETY: plain socket creation; the fd is owned right away.
            let raw = unsafe {
                libc::socket(
                    libc::AF_PACKET,
                    libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                    proto as i32,
                )
            };
            assert!(
                raw >= 0,
                "AF_PACKET socket: {}",
                std::io::Error::last_os_error()
            );
            // SAFETY: raw is a fresh descriptor that nothing else owns.
            let fd = unsafe { OwnedFd::from_raw_fd(raw) };
            let cname = std::ffi::CString::new(name.clone()).unwrap();
            // SAFETY: a NUL-terminated name.
            let ifindex = unsafe { libc::if_nametoindex(cname.as_ptr()) };
            assert!(ifindex != 0, "no interface {name} in this namespace");
            sockopt_int(raw, libc::PACKET_AUXDATA, 1, "PACKET_AUXDATA");
            sockopt_int(
                raw,
                libc::PACKET_IGNORE_OUTGOING,
                1,
                "PACKET_IGNORE_OUTGOING",
            );
            // SAFETY: sockaddr_ll is plain old data; all-zero is valid.
            let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
            sll.sll_family = libc::AF_PACKET as u16;
            sll.sll_protocol = proto;
            sll.sll_ifindex = ifindex as i32;
            // SAFETY: binding to a sockaddr_ll of the right size.
            let r = unsafe {
                libc::bind(
                    raw,
                    &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
                    std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
                )
            };
            assert_eq!(r, 0, "bind to {name}: {}", std::io::Error::last_os_error());
            fd
        });
        let s = PacketSocket {
            fd,
            ifname: ifname.to_string(),
        };
        // Frames of other interfaces of the namespace (lo) that came in
        // between socket() and bind().
        while s.recv().is_some() {}
        s
    }

    /// Send one whole frame (as it goes on the wire, tag included).
    pub fn send(&self, frame: &[u8]) {
        // SAFETY: the buffer is valid for its length.
        let n = unsafe {
            libc::send(
                self.fd.as_raw_fd(),
                frame.as_ptr() as *const libc::c_void,
                frame.len(),
                0,
            )
        };
        assert_eq!(
            n,
            frame.len() as isize,
            "send on {}: {}",
            self.ifname,
            std::io::Error::last_os_error()
        );
    }

    /// Stamp every frame with the kernel's receive time ([`Self::recv_stamped`])
    /// and make the receive buffer 64 MiB (a reader that falls behind a
    /// burst loses nothing).
    pub fn stamp(&self) {
        for (opt, v, what) in [
            (libc::SO_TIMESTAMPNS, 1, "SO_TIMESTAMPNS"),
            (libc::SO_RCVBUFFORCE, 64 << 20, "SO_RCVBUFFORCE"),
        ] {
            // SAFETY: a valid socket and an int option value of the right size.
            let r = unsafe {
                libc::setsockopt(
                    self.fd.as_raw_fd(),
                    libc::SOL_SOCKET,
                    opt,
                    &v as *const i32 as *const libc::c_void,
                    std::mem::size_of::<i32>() as libc::socklen_t,
                )
            };
            assert_eq!(r, 0, "{what}: {}", std::io::Error::last_os_error());
        }
    }

    /// The next frame that has arrived, if any (does not wait); a VLAN tag
    /// that the kernel took out is back in the frame.
    pub fn recv(&self) -> Option<Vec<u8>> {
        self.recv_stamped().map(|(f, _)| f)
    }

    /// [`Self::recv`] with the kernel's receive time (CLOCK_REALTIME, ns)
    /// when [`Self::stamp`] asked for it.
    pub fn recv_stamped(&self) -> Option<(Vec<u8>, Option<u64>)> {
        loop {
            let mut buf = vec![0u8; 65536];
            let mut ctl = [0u64; 16];
            // SAFETY: sockaddr_ll is plain old data; all-zero is valid.
            let mut from: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
            let mut iov = libc::iovec {
                iov_base: buf.as_mut_ptr() as *mut libc::c_void,
                iov_len: buf.len(),
            };
            // SAFETY: msghdr is plain old data; all-zero is valid.
            let mut h: libc::msghdr = unsafe { std::mem::zeroed() };
            h.msg_name = &mut from as *mut libc::sockaddr_ll as *mut libc::c_void;
            h.msg_namelen = std::mem::size_of::<libc::sockaddr_ll>() as u32;
            h.msg_iov = &mut iov;
            h.msg_iovlen = 1;
            h.msg_control = ctl.as_mut_ptr() as *mut libc::c_void;
            h.msg_controllen = std::mem::size_of_val(&ctl);
            // SAFETY: every pointer in h refers to a live local buffer.
            let n = unsafe { libc::recvmsg(self.fd.as_raw_fd(), &mut h, libc::MSG_DONTWAIT) };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                match e.kind() {
                    std::io::ErrorKind::WouldBlock => return None,
                    std::io::ErrorKind::Interrupted => continue,
                    _ => panic!("recv on {}: {e}", self.ifname),
                }
            }
            assert!(
                h.msg_flags & libc::MSG_TRUNC == 0,
                "{}: frame truncated",
                self.ifname
            );
            if from.sll_pkttype == libc::PACKET_OUTGOING {
                continue;
            }
            // SAFETY: timespec is plain integers; h describes our control
            // buffer as the kernel filled it.
            let stamp = unsafe {
                linerate_io::afpacket::cmsg_data::<libc::timespec>(
                    &h,
                    libc::SOL_SOCKET,
                    libc::SCM_TIMESTAMPNS,
                )
            }
            .map(|t| t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64);
            let mut frame = buf;
            frame.truncate(n as usize);
            if let Some((tpid, tci)) = linerate_io::afpacket::vlan_of(&h) {
                if frame.len() >= 12 {
                    let tag = [tpid.to_be_bytes(), tci.to_be_bytes()].concat();
                    frame.splice(12..12, tag);
                }
            }
            return Some((frame, stamp));
        }
    }

    /// Wait until one of `socks` has a frame to read or `t` has passed.
    pub fn wait_any(socks: &[PacketSocket], t: Duration) {
        let mut fds: Vec<libc::pollfd> = socks
            .iter()
            .map(|s| libc::pollfd {
                fd: s.fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        // SAFETY: fds is a live array of pollfd of the given length.
        unsafe {
            libc::poll(
                fds.as_mut_ptr(),
                fds.len() as libc::nfds_t,
                t.as_millis().min(i32::MAX as u128) as i32,
            )
        };
    }
}
