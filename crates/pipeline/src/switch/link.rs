//! The ports' links: up or down, as the kernel says (the interface's
//! carrier, `/sys/class/net/IF/carrier`, which reads as down when the
//! interface is administratively down too). What uses it:
//!
//! - groups: a bucket watching a port is live while the port's link is up
//!   (fast failover, select; [`super::group`]);
//! - OpenFlow: a `PORT_STATUS` (reason `MODIFY`) to each controller that
//!   wants it when a link goes up or down, and the port's state
//!   (`LINK_DOWN` or `LIVE`) in port descriptions;
//! - the switch's output: a line per change, and the state in `dump-ports`.
//!
//! A watcher thread looks every [`LOOK_EVERY`] (one `read` per kernel
//! port, never on the datapath); the datapath reads the state with one
//! relaxed load when a group asks. Ports without a kernel interface
//! (`mem:`, `pcap:`) are always up.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::Duration;

/// How often the watcher looks at the links.
pub const LOOK_EVERY: Duration = Duration::from_millis(100);
/// Changes kept for the switch's output until it prints them (older ones
/// are counted, not kept).
pub const CHANGES_KEPT: usize = 256;

/// The link state of each port (by the datapath's port index).
#[derive(Debug)]
pub struct Links {
    up: Box<[AtomicBool]>,
    /// The kernel interface of each port (`None`: always up).
    ifs: Vec<Option<String>>,
    /// Changes seen, as (port index, up), until taken.
    changes: Mutex<Vec<(usize, bool)>>,
    pub changes_dropped: AtomicU64,
}

/// The kernel interface a port URI names (`afpacket:IF...`, `afxdp:IF...`).
pub fn interface(uri: &str) -> Option<String> {
    let (scheme, rest) = uri.split_once(':')?;
    if !matches!(scheme, "afpacket" | "afxdp") {
        return None;
    }
    let name = rest.split(['?', '@']).next()?;
    (!name.is_empty() && !name.contains('/')).then(|| name.to_string())
}

/// The carrier of interface `name`: up when `/sys/class/net/NAME/carrier`
/// reads 1 (an interface that is down, or gone, reads as down).
pub fn carrier(name: &str) -> bool {
    std::fs::read(format!("/sys/class/net/{name}/carrier")).is_ok_and(|b| b.first() == Some(&b'1'))
}

impl Links {
    /// The links of ports `uris` (in the datapath's order), as they are now.
    pub fn new(uris: &[String]) -> Links {
        let ifs: Vec<Option<String>> = uris.iter().map(|u| interface(u)).collect();
        let up = ifs
            .iter()
            .map(|i| AtomicBool::new(i.as_deref().is_none_or(carrier)))
            .collect();
        Links {
            up,
            ifs,
            changes: Mutex::new(Vec::new()),
            changes_dropped: AtomicU64::new(0),
        }
    }

    /// Links that are always up (ports without kernel interfaces; tests).
    pub fn always_up(n: usize) -> Links {
        Links::new(&vec![String::new(); n])
    }

    /// Is there a kernel interface to watch?
    pub fn watches(&self) -> bool {
        self.ifs.iter().any(Option::is_some)
    }

    /// The state the datapath reads.
    #[inline]
    pub fn states(&self) -> &[AtomicBool] {
        &self.up
    }

    /// Port `i`'s link (a port the links do not know is up).
    pub fn is_up(&self, i: usize) -> bool {
        self.up.get(i).is_none_or(|u| u.load(Relaxed))
    }

    /// Look at every kernel interface; the ports whose link changed since
    /// the last look, as (index, up).
    pub fn look(&self) -> Vec<(usize, bool)> {
        self.look_with(carrier)
    }

    fn look_with(&self, carrier: impl Fn(&str) -> bool) -> Vec<(usize, bool)> {
        let mut changed = Vec::new();
        for (i, name) in self.ifs.iter().enumerate() {
            let Some(name) = name else { continue };
            let now = carrier(name);
            if self.up[i].swap(now, Relaxed) != now {
                changed.push((i, now));
            }
        }
        if !changed.is_empty() {
            let mut c = self.changes.lock().unwrap_or_else(|e| e.into_inner());
            for &x in &changed {
                if c.len() < CHANGES_KEPT {
                    c.push(x);
                } else {
                    self.changes_dropped.fetch_add(1, Relaxed);
                }
            }
        }
        changed
    }

    /// The changes not yet taken (for the switch's output).
    pub fn take_changes(&self) -> Vec<(usize, bool)> {
        std::mem::take(&mut *self.changes.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl Default for Links {
    fn default() -> Links {
        Links::always_up(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn interfaces_of_kernel_ports_only() {
        assert_eq!(
            interface("afpacket:veth0?ring=v3").as_deref(),
            Some("veth0")
        );
        assert_eq!(interface("afxdp:d0?queue=1").as_deref(), Some("d0"));
        assert_eq!(interface("mem:a"), None);
        assert_eq!(interface("pcap:trace.pcap"), None);
        assert_eq!(interface("afpacket:../x"), None);
        assert!(!carrier("no-such-interface-here"));
        assert!(carrier("lo") || !std::path::Path::new("/sys/class/net/lo").exists());
    }

    #[test]
    fn looks_report_each_change_once_and_keep_a_bounded_log() {
        let l = Links::new(&["afpacket:a".into(), "mem:b".into(), "afpacket:c".into()]);
        // Neither "a" nor "c" exists: down; the mem port is up.
        assert_eq!((l.is_up(0), l.is_up(1), l.is_up(2)), (false, true, false));
        let up_a = Cell::new(true);
        let f = |n: &str| n == "a" && up_a.get();
        assert_eq!(l.look_with(f), vec![(0, true)]);
        assert_eq!(l.look_with(f), vec![]);
        up_a.set(false);
        assert_eq!(l.look_with(f), vec![(0, false)]);
        assert_eq!(l.take_changes(), vec![(0, true), (0, false)]);
        assert!(l.take_changes().is_empty());
        for i in 0..CHANGES_KEPT + 10 {
            up_a.set(i % 2 == 0);
            l.look_with(f);
        }
        assert_eq!(l.take_changes().len(), CHANGES_KEPT);
        assert_eq!(l.changes_dropped.load(Relaxed), 10);
    }
}
