//! The switch study's rule sets: the sweep's (five subtables) and the
//! insertion batches'.

use std::fmt::Write as _;

/// The sweep's rule set. The mem source's flow F is
/// 10.F2.F1.F0:1024+(F&0x3fff) -> 10.1.0.1:9/udp.
/// The sweep's rule set as text (for the pipeline part's tests).
pub fn sweep_rules_text() -> String {
    sweep_rules()
}

pub(crate) fn sweep_rules() -> String {
    let mut s = String::new();
    // 1000 exact 5-tuples for flows 0..999 (subtable 1).
    for f in 0..1000u32 {
        let _ = writeln!(
            s,
            "priority=400,udp,nw_src=10.{}.{}.{},nw_dst=10.1.0.1,tp_src={},tp_dst=9,actions=output:2",
            (f >> 16) & 255,
            (f >> 8) & 255,
            f & 255,
            1024 + (f & 0x3fff)
        );
    }
    // 4096 /24 sources to UDP 53, never matched by this traffic (subtable 2).
    for b in 0..4096u32 {
        let _ = writeln!(
            s,
            "priority=300,udp,nw_src=10.{}.{}.0/24,tp_dst=53,actions=drop",
            b >> 8,
            b & 255
        );
    }
    // 16 /16 sources with a MAC rewrite (subtable 3, covers flows < 1M).
    for x in 0..16 {
        let _ = writeln!(s, "priority=200,ip,nw_src=10.{x}.0.0/16,actions=set_field:02:00:00:00:00:09->eth_dst,output:2");
    }
    s.push_str("priority=100,ip,nw_dst=10.1.0.0/16,actions=dec_ttl,output:2\n");
    s.push_str("priority=0,actions=drop\n");
    s
}

/// `n` rules in one subtable, for the insertion batches (the first `n`
/// of any larger batch).
pub(crate) fn insert_rules(n: u32) -> String {
    let mut s = String::with_capacity(n as usize * 72);
    for i in 0..n {
        let _ = writeln!(
            s,
            "priority={},udp,nw_dst=10.{}.{}.{},tp_dst={},actions=output:2",
            100 + i % 7,
            (i >> 16) & 255,
            (i >> 8) & 255,
            i & 255,
            1000 + i % 50
        );
    }
    s
}
