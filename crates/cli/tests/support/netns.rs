//! Network namespaces for the end-to-end tests: a star of host namespaces
//! around a switch namespace ([`NetnsStar`]) and raw packet sockets opened
//! in a namespace ([`PacketSocket`]) that send real frames and see every
//! frame that arrives, VLAN tag included.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// Run a command (no shell) that must succeed; its stdout.
pub fn run_cmd(args: &[&str]) -> String {
    let o = Command::new(args[0])
        .args(&args[1..])
        .output()
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

static STAR_SEQ: AtomicU32 = AtomicU32::new(0);

/// Namespaces `{tag}sw` and `{tag}h1..hN`; veth `{tag}pI` (in sw, the
/// switch's port I) <-> `{tag}hI` (in hI), all up, IPv6 off (no neighbour
/// discovery or router solicitations among the test's frames). The tag is
/// the caller's prefix, this process's id and a counter: unique per bed.
/// Every namespace made is removed on drop, also when the test fails
/// (with it the veths and whatever else lived there).
pub struct NetnsStar {
    pub tag: String,
    pub hosts: u32,
    made: Vec<String>,
}

impl NetnsStar {
    /// The bed with `hosts` host namespaces. `prefix` starts with "lr"
    /// (scripts/test.sh looks for namespaces left behind by that).
    pub fn up(prefix: &str, hosts: u32) -> NetnsStar {
        super::require_root();
        super::require_tools(&["ip", "sysctl"]);
        assert!(prefix.starts_with("lr"), "prefix {prefix}");
        let tag = format!(
            "{prefix}{}{}",
            std::process::id() % 100_000,
            STAR_SEQ.fetch_add(1, Ordering::SeqCst)
        );
        // Interface names have 15 characters at most: tag, 'p' or 'h', port.
        assert!(
            tag.len() + 1 + hosts.to_string().len() <= 15,
            "tag {tag} too long"
        );
        let mut s = NetnsStar {
            tag,
            hosts,
            made: Vec::new(),
        };
        let names: Vec<String> = std::iter::once(s.sw_ns())
            .chain((1..=hosts).map(|i| s.host_ns(i)))
            .collect();
        for ns in names {
            run_cmd(&["ip", "netns", "add", &ns]);
            s.made.push(ns.clone());
            run_cmd(&["ip", "-n", &ns, "link", "set", "lo", "up"]);
            run_cmd(&[
                "ip",
                "netns",
                "exec",
                &ns,
                "sysctl",
                "-qw",
                "net.ipv6.conf.all.disable_ipv6=1",
                "net.ipv6.conf.default.disable_ipv6=1",
            ]);
        }
        for i in 1..=hosts {
            let (p, h, hns) = (s.sw_if(i), s.host_if(i), s.host_ns(i));
            run_cmd(&[
                "ip",
                "link",
                "add",
                &p,
                "netns",
                &s.sw_ns(),
                "type",
                "veth",
                "peer",
                "name",
                &h,
                "netns",
                &hns,
            ]);
            run_cmd(&["ip", "-n", &s.sw_ns(), "link", "set", &p, "up"]);
            run_cmd(&["ip", "-n", &hns, "link", "set", &h, "up"]);
        }
        s
    }
    /// The switch's namespace.
    pub fn sw_ns(&self) -> String {
        format!("{}sw", self.tag)
    }
    /// Host `i`'s namespace (1-based).
    pub fn host_ns(&self, i: u32) -> String {
        format!("{}h{i}", self.tag)
    }
    /// The switch's end of host `i`'s veth (in [`NetnsStar::sw_ns`]).
    pub fn sw_if(&self, i: u32) -> String {
        format!("{}p{i}", self.tag)
    }
    /// Host `i`'s end of its veth (in [`NetnsStar::host_ns`]).
    pub fn host_if(&self, i: u32) -> String {
        format!("{}h{i}", self.tag)
    }
}

impl Drop for NetnsStar {
    fn drop(&mut self) {
        for n in &self.made {
            let _ = Command::new("ip").args(["netns", "del", n]).output();
        }
    }
}

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
        let fd = linerate_measure::testbed::in_netns(ns, move || {
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
        })
        .unwrap_or_else(|e| panic!("{e}"));
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

    /// The next frame that has arrived, if any (does not wait); a VLAN tag
    /// that the kernel took out is back in the frame.
    pub fn recv(&self) -> Option<Vec<u8>> {
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
            let mut frame = buf;
            frame.truncate(n as usize);
            if let Some((tpid, tci)) = linerate_io::afpacket::vlan_of(&h) {
                if frame.len() >= 12 {
                    let tag = [tpid.to_be_bytes(), tci.to_be_bytes()].concat();
                    frame.splice(12..12, tag);
                }
            }
            return Some(frame);
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
