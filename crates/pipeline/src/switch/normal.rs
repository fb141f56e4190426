//! The `normal` action: a MAC-learning, VLAN-aware L2 switch (Open
//! vSwitch's NORMAL with every port a trunk: frames keep their tags).
//!
//! Per frame: learn (VLAN, source MAC) -> input port, unless the source is
//! a group address; then a group (multicast or broadcast) destination or
//! an unknown one floods to every port but the input, a known one goes to
//! its port, and a destination learned on the input port itself is
//! dropped (it is already there). Entries age out after
//! [`DEFAULT_AGING_S`] seconds without a frame from that address (OVS's
//! `mac-aging-time`).
//!
//! The table is fixed-size (allocated once per datapath, per core:
//! no lock, no allocation per frame): [`SLOTS`] entries, 4-way sets
//! indexed by a hash of (VLAN, MAC); a full set replaces its oldest entry.

use super::key::{self, Key};

/// Entries of a MAC table.
pub const SLOTS: usize = 8192;
const WAYS: usize = 4;
/// Seconds an address stays learned without a frame from it.
pub const DEFAULT_AGING_S: u64 = 300;

#[derive(Clone, Copy, Default)]
struct Entry {
    /// VLAN id + 1 in the top 16 bits, MAC in the low 48 (0 = empty).
    tag: u64,
    port: u32,
    seen_ns: u64,
}

/// Where `normal` sends a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Flood,
    Port(u32),
    /// The destination is on the input port.
    Drop,
}

/// A per-core MAC learning table.
pub struct MacTable {
    e: Box<[Entry]>,
    aging_ns: u64,
}

impl Default for MacTable {
    fn default() -> MacTable {
        MacTable::new(DEFAULT_AGING_S)
    }
}

fn tag(vlan: u16, mac: u64) -> u64 {
    ((vlan as u64 + 1) << 48) | (mac & 0xffff_ffff_ffff)
}

impl MacTable {
    pub fn new(aging_s: u64) -> MacTable {
        MacTable {
            e: vec![Entry::default(); SLOTS].into_boxed_slice(),
            aging_ns: aging_s.saturating_mul(1_000_000_000),
        }
    }

    #[inline]
    fn set(&self, t: u64) -> usize {
        let h = (t ^ (t >> 29)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        ((h >> 40) as usize % (SLOTS / WAYS)) * WAYS
    }

    /// The port of (VLAN, MAC) if learned and not aged out.
    pub fn lookup(&self, vlan: u16, mac: u64, now_ns: u64) -> Option<u32> {
        let t = tag(vlan, mac);
        let s = self.set(t);
        self.e[s..s + WAYS]
            .iter()
            .find(|e| e.tag == t && now_ns.saturating_sub(e.seen_ns) < self.aging_ns)
            .map(|e| e.port)
    }

    /// Learn (VLAN, MAC) on `port` at `now_ns`.
    pub fn learn(&mut self, vlan: u16, mac: u64, port: u32, now_ns: u64) {
        let t = tag(vlan, mac);
        let s = self.set(t);
        let set = &mut self.e[s..s + WAYS];
        let i = match set.iter().position(|e| e.tag == t) {
            Some(i) => i,
            None => set
                .iter()
                .enumerate()
                .min_by_key(|(_, e)| if e.tag == 0 { 0 } else { e.seen_ns + 1 })
                .map(|(i, _)| i)
                .unwrap_or(0),
        };
        set[i] = Entry {
            tag: t,
            port,
            seen_ns: now_ns,
        };
    }

    /// Learn from a frame whose key is `k` and decide where it goes.
    pub fn switch(&mut self, k: &Key, now_ns: u64) -> Decision {
        let tci = k.get(key::VLAN_TCI) as u16;
        let vlan = if tci & key::VLAN_CFI != 0 {
            tci & 0x0fff
        } else {
            0
        };
        let in_port = k.get(key::IN_PORT) as u32;
        let (src, dst) = (k.get(key::DL_SRC), k.get(key::DL_DST));
        const GROUP: u64 = 1 << 40;
        if src & GROUP == 0 {
            self.learn(vlan, src, in_port, now_ns);
        }
        if dst & GROUP != 0 {
            return Decision::Flood;
        }
        match self.lookup(vlan, dst, now_ns) {
            Some(p) if p == in_port => Decision::Drop,
            Some(p) => Decision::Port(p),
            None => Decision::Flood,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(in_port: u32, vlan: Option<u16>, src: u64, dst: u64) -> Key {
        let mut k = Key::ZERO;
        k.set(key::IN_PORT, in_port as u64);
        k.set(key::DL_SRC, src);
        k.set(key::DL_DST, dst);
        if let Some(v) = vlan {
            k.set(key::VLAN_TCI, (key::VLAN_CFI | v) as u64);
        }
        k
    }

    #[test]
    fn learns_per_vlan_floods_unknown_and_ages() {
        let mut t = MacTable::new(10);
        let (a, b) = (0x0200_0000_000a, 0x0200_0000_000b);
        assert_eq!(t.switch(&k(1, Some(20), a, b), 0), Decision::Flood);
        assert_eq!(t.switch(&k(2, Some(20), b, a), 1), Decision::Port(1));
        // Another VLAN has not learned a.
        assert_eq!(t.switch(&k(3, Some(30), b, a), 2), Decision::Flood);
        // Broadcast floods; a frame back to its own port is dropped.
        assert_eq!(
            t.switch(&k(1, Some(20), a, 0xffff_ffff_ffff), 3),
            Decision::Flood
        );
        assert_eq!(t.switch(&k(1, Some(20), b, a), 4), Decision::Drop);
        // b moved to port 1 with that frame; a ages out after 10 s.
        assert_eq!(t.lookup(20, b, 5), Some(1));
        assert_eq!(t.lookup(20, a, 3 + 10_000_000_000), None);
        // A full set keeps working (the oldest is replaced).
        for m in 0..100_000u64 {
            t.learn(1, m, 7, 100 + m);
        }
        assert_eq!(t.lookup(1, 99_999, 200_000), Some(7));
    }
}
