//! External ports refuse the machine's own links. A typo such as
//! `--port-b eth0` for a test interface would put line-rate traffic on a
//! production link and the sink's XDP program, which drops everything but
//! ARP, on it for the whole run: the machine's SSH goes dark. So an
//! interface that looks like one the machine lives on is refused unless
//! the user names it with `--force-port`: one that holds a default route,
//! has a global address, or is enslaved to a bridge, bond or other master.
//!
//! Everything is read from the kernel, in this process's network namespace
//! (the one the bench runs in): /proc/net/route and /proc/net/ipv6_route
//! (/proc/net follows the calling thread's namespace), the addresses by
//! getifaddrs(3) (netlink), /sys/class/net/IF/master (sysfs as mounted for
//! this namespace, as `ip netns exec` does).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why `ifname` looks like one of the machine's own links, in words (empty:
/// it does not).
pub fn reasons(ifname: &str) -> Vec<String> {
    let mut why = Vec::new();
    let route4 = std::fs::read_to_string("/proc/net/route").unwrap_or_default();
    let route6 = std::fs::read_to_string("/proc/net/ipv6_route").unwrap_or_default();
    if default_route_v4(&route4, ifname) {
        why.push("it holds the IPv4 default route".to_string());
    }
    if default_route_v6(&route6, ifname) {
        why.push("it holds the IPv6 default route".to_string());
    }
    if let Some(a) = addresses(ifname).into_iter().find(|a| is_global(*a)) {
        why.push(format!("it has the global address {a}"));
    }
    if let Some(m) = master(ifname) {
        why.push(format!("it is enslaved to {m}"));
    }
    why
}

/// Refuse `ifname` (given as `opt`) if it looks like one of the machine's
/// own links: one line saying why and how to override.
pub fn refuse_own(opt: &str, ifname: &str) -> Result<(), String> {
    let why = reasons(ifname);
    if why.is_empty() {
        return Ok(());
    }
    Err(format!(
        "{opt} {ifname}: refused: {} (one of this machine's own links? the bench would flood it and its XDP sink drops all but ARP); --force-port {ifname} if it is a test port",
        why.join(", ")
    ))
}

/// /proc/net/route holds a default route (destination and mask 0, up) out
/// of `ifname`.
fn default_route_v4(text: &str, ifname: &str) -> bool {
    const RTF_UP: u32 = 0x1;
    text.lines().skip(1).any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.len() >= 8
            && f[0] == ifname
            && f[1] == "00000000"
            && f[7] == "00000000"
            && u32::from_str_radix(f[3], 16).is_ok_and(|fl| fl & RTF_UP != 0)
    })
}

/// /proc/net/ipv6_route holds a default route (::/0, up, not a reject
/// route: the kernel's "unreachable" defaults sit on lo) out of `ifname`.
fn default_route_v6(text: &str, ifname: &str) -> bool {
    const RTF_UP: u32 = 0x1;
    const RTF_REJECT: u32 = 0x200;
    text.lines().any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.len() >= 10
            && f[9] == ifname
            && f[0].bytes().all(|b| b == b'0')
            && f[1] == "00"
            && u32::from_str_radix(f[8], 16)
                .is_ok_and(|fl| fl & RTF_UP != 0 && fl & RTF_REJECT == 0)
    })
}

/// An address the machine is reached at from beyond the link: IPv4 outside
/// 127/8 and 169.254/16, IPv6 other than loopback and link-local (fe80::/10).
fn is_global(a: IpAddr) -> bool {
    match a {
        IpAddr::V4(v) => !(v.is_loopback() || v.is_link_local() || v.is_unspecified()),
        IpAddr::V6(v) => {
            !(v.is_loopback() || v.is_unspecified() || (v.segments()[0] & 0xffc0) == 0xfe80)
        }
    }
}

/// The IPv4 and IPv6 addresses of `ifname` (getifaddrs; none on errors).
fn addresses(ifname: &str) -> Vec<IpAddr> {
    let mut out = Vec::new();
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list we free below; every
    // pointer is checked for null before use, and each sockaddr is read as
    // the type its family says.
    unsafe {
        if libc::getifaddrs(&mut head) != 0 {
            return out;
        }
        let mut p = head;
        while !p.is_null() {
            let ifa = &*p;
            p = ifa.ifa_next;
            if ifa.ifa_addr.is_null() || ifa.ifa_name.is_null() {
                continue;
            }
            if std::ffi::CStr::from_ptr(ifa.ifa_name).to_bytes() != ifname.as_bytes() {
                continue;
            }
            match (*ifa.ifa_addr).sa_family as i32 {
                libc::AF_INET => {
                    let sa = &*(ifa.ifa_addr as *const libc::sockaddr_in);
                    out.push(IpAddr::V4(Ipv4Addr::from(u32::from_be(sa.sin_addr.s_addr))));
                }
                libc::AF_INET6 => {
                    let sa = &*(ifa.ifa_addr as *const libc::sockaddr_in6);
                    out.push(IpAddr::V6(Ipv6Addr::from(sa.sin6_addr.s6_addr)));
                }
                _ => {}
            }
        }
        libc::freeifaddrs(head);
    }
    out
}

/// The bridge, bond (or other master) `ifname` is enslaved to.
fn master(ifname: &str) -> Option<String> {
    if ifname.is_empty() || ifname.contains('/') || ifname.starts_with('.') {
        return None;
    }
    let link = std::fs::read_link(format!("/sys/class/net/{ifname}/master")).ok()?;
    Some(link.file_name()?.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROUTE: &str =
        "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT
eth0\t00000000\t0101A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0
eth0\t0001A8C0\t00000000\t0001\t0\t0\t100\t00FFFFFF\t0\t0\t0
veth1\t0000000A\t00000000\t0001\t0\t0\t0\t000000FF\t0\t0\t0
down0\t00000000\t00000000\t0000\t0\t0\t0\t00000000\t0\t0\t0
";

    #[test]
    fn ipv4_default_routes_are_found_by_interface() {
        assert!(default_route_v4(ROUTE, "eth0"));
        // A subnet route is not a default route; a route not up is none.
        assert!(!default_route_v4(ROUTE, "veth1"));
        assert!(!default_route_v4(ROUTE, "down0"));
        assert!(!default_route_v4(ROUTE, "eth"));
        assert!(!default_route_v4("", "eth0"));
        // The header line names no interface.
        assert!(!default_route_v4(ROUTE, "Iface"));
    }

    #[test]
    fn ipv6_default_routes_skip_reject_routes() {
        let t = "\
00000000000000000000000000000000 00 00000000000000000000000000000000 00 fe800000000000000000000000000001 00000400 00000001 00000000 00000003 eth0
00000000000000000000000000000000 00 00000000000000000000000000000000 00 00000000000000000000000000000000 ffffffff 00000001 00000000 00200200 lo
fe800000000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001 veth1
";
        assert!(default_route_v6(t, "eth0"));
        assert!(!default_route_v6(t, "lo"));
        assert!(!default_route_v6(t, "veth1"));
        assert!(!default_route_v6("garbage", "eth0"));
    }

    #[test]
    fn global_addresses_leave_out_loopback_and_link_local() {
        let g = |s: &str| is_global(s.parse().unwrap());
        assert!(g("10.0.0.1") && g("192.0.2.7") && g("2001:db8::1") && g("fd00::1"));
        assert!(!g("127.0.0.1") && !g("127.5.0.1") && !g("169.254.3.4"));
        assert!(!g("::1") && !g("fe80::1") && !g("febf::1"));
        assert!(g("fec0::1"));
    }

    #[test]
    fn absent_interfaces_have_no_reasons() {
        // (The real checks on real interfaces: crates/cli/tests/bench_external.rs.)
        assert!(reasons("no-such-if-x").is_empty());
        assert!(refuse_own("--port-a", "no-such-if-x").is_ok());
        assert_eq!(master("../x"), None);
    }
}
