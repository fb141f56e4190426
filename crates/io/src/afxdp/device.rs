//! The interface and socket set-up an AF_XDP port needs: its URI, queues, MTU, socket options, bind.

use super::*;
use crate::error::PortError;
use crate::uri::Uri;
use crate::xdp::AttachMode;
use std::io;
use std::os::fd::RawFd;
use std::os::fd::{FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

/// Parsed `afxdp:` URI.
pub(super) struct Params {
    pub(super) ifname: String,
    pub(super) queue: u32,
    /// None: native, falling back to generic.
    pub(super) mode: Option<AttachMode>,
    pub(super) zerocopy: bool,
    pub(super) need_wakeup: bool,
}

pub(super) fn parse(uri: &Uri) -> Result<Params, PortError> {
    uri.check_known(&["queue", "mode", "zerocopy", "need_wakeup"])?;
    let mode = match uri.get("mode") {
        None => None,
        Some(m) => Some(AttachMode::parse(m).ok_or_else(|| {
            uri.err(format!(
                "parameter 'mode' must be native or generic (got '{m}')"
            ))
        })?),
    };
    Ok(Params {
        ifname: uri.target.clone(),
        queue: uri.get_or("queue", 0u32)?,
        mode,
        zerocopy: uri.get_bool("zerocopy", false)?,
        need_wakeup: uri.get_bool("need_wakeup", true)?,
    })
}

/// A plain AF_INET socket for interface ioctls in the current namespace.
pub(super) fn ioctl_socket() -> Option<OwnedFd> {
    // SAFETY: plain socket call; the fd is owned right away.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return None;
    }
    // SAFETY: fd is a fresh descriptor we own.
    Some(unsafe { OwnedFd::from_raw_fd(fd) })
}

pub(super) fn ifreq_for(name: &str) -> libc::ifreq {
    // SAFETY: zeroed plain struct.
    let mut r: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in r
        .ifr_name
        .iter_mut()
        .zip(name.bytes().take(libc::IFNAMSIZ - 1))
    {
        *d = s as libc::c_char;
    }
    r
}

/// Number of RX queues of `name` (ethtool channels; sysfs as fallback), if known.
pub(super) fn rx_queues(name: &str, ifindex: u32) -> Option<u32> {
    #[repr(C)]
    #[derive(Default)]
    struct EthtoolChannels {
        cmd: u32,
        max_rx: u32,
        max_tx: u32,
        max_other: u32,
        max_combined: u32,
        rx_count: u32,
        tx_count: u32,
        other_count: u32,
        combined_count: u32,
    }
    const ETHTOOL_GCHANNELS: u32 = 0x3c;
    const SIOCETHTOOL: libc::c_ulong = 0x8946;
    if let Some(sock) = ioctl_socket() {
        let mut ch = EthtoolChannels {
            cmd: ETHTOOL_GCHANNELS,
            ..Default::default()
        };
        let mut r = ifreq_for(name);
        r.ifr_ifru.ifru_data = &mut ch as *mut EthtoolChannels as *mut libc::c_char;
        // SAFETY: SIOCETHTOOL with a valid ifreq pointing at a live ethtool_channels.
        if unsafe { libc::ioctl(sock.as_raw_fd(), SIOCETHTOOL, &mut r) } == 0 {
            let n = ch.rx_count + ch.combined_count;
            if n > 0 {
                return Some(n);
            }
        }
    }
    // sysfs shows the namespace it was mounted in: trust it only if the
    // interface there has our index.
    let dir = format!("/sys/class/net/{name}");
    let idx: u32 = std::fs::read_to_string(format!("{dir}/ifindex"))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    if idx != ifindex {
        return None;
    }
    let n = std::fs::read_dir(format!("{dir}/queues"))
        .ok()?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
        .count();
    (n > 0).then_some(n as u32)
}

/// MTU of `name`, if the ioctl answers.
pub(super) fn mtu(name: &str) -> Option<u32> {
    let sock = ioctl_socket()?;
    let mut r = ifreq_for(name);
    // SAFETY: SIOCGIFMTU with a valid ifreq.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFMTU, &mut r) } != 0 {
        return None;
    }
    // SAFETY: the kernel filled the mtu member.
    let m = unsafe { r.ifr_ifru.ifru_mtu };
    (m > 0).then_some(m as u32)
}

pub(super) fn setsockopt<T>(fd: RawFd, opt: libc::c_int, v: &T) -> io::Result<()> {
    // SAFETY: v points at a live T of the given size.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_XDP,
            opt,
            v as *const T as *const libc::c_void,
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

pub(super) fn is_perm(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EPERM) | Some(libc::EACCES))
}

pub(super) const PERM_HINT: &str =
    "permission denied: AF_XDP needs root (CAP_NET_RAW, CAP_NET_ADMIN and CAP_BPF)";

pub(super) fn bind(fd: RawFd, ifindex: u32, queue: u32, flags: u16) -> io::Result<()> {
    let sa = libc::sockaddr_xdp {
        sxdp_family: libc::AF_XDP as u16,
        sxdp_flags: flags,
        sxdp_ifindex: ifindex,
        sxdp_queue_id: queue,
        sxdp_shared_umem_fd: 0,
    };
    let start = Instant::now();
    loop {
        // SAFETY: sa is a valid sockaddr_xdp of the given length.
        let rc = unsafe {
            libc::bind(
                fd,
                &sa as *const libc::sockaddr_xdp as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
            )
        };
        if rc == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        // EBUSY right after another socket on this queue was closed: the
        // kernel releases the queue asynchronously. Retry a little.
        if e.raw_os_error() == Some(libc::EBUSY) && start.elapsed() < BIND_BUSY_RETRY {
            std::thread::sleep(Duration::from_millis(2));
            continue;
        }
        return Err(e);
    }
}
