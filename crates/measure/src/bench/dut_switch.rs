//! The flow-table switches as devices under test: `linerate switch` with
//! one rule per direction or with the 10 000-rule set of [`switch_rules`],
//! and Open vSwitch (userspace datapath, afxdp ports, scripts/peers/dut-ovs.sh)
//! with the same 10 000 rules. OpenFlow ports: 1 = d0, 2 = d1 in both.

use super::dut::{Dut, DutEnv, DutError, LinerateChild, ScriptPeer};
use crate::testbed::Testbed;
use std::fmt::Write as _;
use std::net::Ipv4Addr;
use std::path::PathBuf;

/// Rules in the large rule set.
pub const RULES_10K: usize = 10_000;

/// Which rules the switch gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuleSet {
    /// `in_port=1,actions=output:2` and `in_port=2,actions=output:1`.
    OnePerDirection,
    /// The [`RULES_10K`] rules of [`switch_rules`].
    TenK,
}

/// The rule text (ovs-ofctl syntax, one rule a line; `linerate switch
/// --flows` and `ovs-ofctl add-flows` both read it) for traffic between
/// `gen` (behind port 1 = d0) and `sink` (behind port 2 = d1).
///
/// [`RuleSet::TenK`]: 5 000 rules per direction, in six masks (subtables),
/// written for direction 1 -> 2 (`src` = `gen`, `dst` = `sink`,
/// `output:2`) and mirrored for 2 -> 1 (`in_port=2`, `src` = `sink`,
/// `dst` = `gen`, `output:1`):
///
/// | priority | match                                                   | rules |
/// |----------|---------------------------------------------------------|-------|
/// | 400 | `udp`, 5-tuple: `nw_src` = a.b.(10..19).(1..200) of `src`'s /16, `nw_dst` = `dst`, `tp_src` = 1024+i, `tp_dst=9` | 2 000 |
/// | 300 | `udp`, `nw_dst` = every host .1-.250 of `dst`'s /24, `tp_dst` in 9, 53, 123, 443, 4789, 8080 | 1 500 |
/// | 200 | `ip`, `nw_src` = 172.(16..19).x.0/24, `nw_dst` = `dst`'s /24 | 500 |
/// | 200 | `ip`, `nw_src` = (40..41).x.0.0/16, `nw_dst` = `dst`'s /24 | 499 |
/// | 100 | `tcp`, `nw_dst` = 192.168.x.0/24, `tp_dst` 80 or 443 | 500 |
/// | 0   | `in_port` only (catch-all: nothing is dropped) | 1 |
///
/// The bench's frames (UDP `gen` -> `sink`, source ports 1024 + flow,
/// destination port 9, see [`super::udp_frame`]) are matched by the
/// priority-300 rule for (`sink`, 9) after the priority-400 subtable missed;
/// the same frames sent back (`sink` -> `gen`) by the mirrored rule.
pub fn switch_rules(set: RuleSet, gen: Ipv4Addr, sink: Ipv4Addr) -> String {
    let mut s = String::new();
    if set == RuleSet::OnePerDirection {
        s.push_str("in_port=1,actions=output:2\nin_port=2,actions=output:1\n");
        return s;
    }
    let _ = writeln!(
        s,
        "# {RULES_10K} rules for traffic {gen} (port 1) <-> {sink} (port 2), see linerate_measure::bench::dut_switch"
    );
    for (inp, out, src, dst) in [(1, 2, gen, sink), (2, 1, sink, gen)] {
        let (a, d) = (src.octets(), dst.octets());
        let act = format!("actions=output:{out}");
        for i in 0..2000u32 {
            let src = Ipv4Addr::new(a[0], a[1], 10 + (i / 200) as u8, 1 + (i % 200) as u8);
            let _ = writeln!(
                s,
                "priority=400,udp,in_port={inp},nw_src={src},nw_dst={dst},tp_src={},tp_dst=9,{act}",
                1024 + i
            );
        }
        for port in [9, 53, 123, 443, 4789, 8080] {
            for h in 1..=250u8 {
                let _ = writeln!(
                    s,
                    "priority=300,udp,in_port={inp},nw_dst={}.{}.{}.{h},tp_dst={port},{act}",
                    d[0], d[1], d[2]
                );
            }
        }
        let dnet = format!("{}.{}.{}.0/24", d[0], d[1], d[2]);
        for i in 0..500u32 {
            let _ = writeln!(
                s,
                "priority=200,ip,in_port={inp},nw_src=172.{}.{}.0/24,nw_dst={dnet},{act}",
                16 + i / 250,
                i % 250
            );
        }
        for i in 0..499u32 {
            let _ = writeln!(
                s,
                "priority=200,ip,in_port={inp},nw_src={}.{}.0.0/16,nw_dst={dnet},{act}",
                40 + i / 250,
                i % 250
            );
        }
        for i in 0..500u32 {
            let _ = writeln!(
                s,
                "priority=100,tcp,in_port={inp},nw_dst=192.168.{}.0/24,tp_dst={},{act}",
                i % 250,
                if i < 250 { 80 } else { 443 }
            );
        }
        let _ = writeln!(s, "priority=0,in_port={inp},{act}");
    }
    s
}

/// A rules file, removed on drop.
struct RulesFile(PathBuf);

impl RulesFile {
    /// Write the rules for `bed` to a file named after its DuT namespace.
    fn write(set: RuleSet, bed: &Testbed) -> Result<RulesFile, DutError> {
        let i = bed.info();
        let p = std::env::temp_dir().join(format!(
            "linerate-{}-{}.flows",
            bed.ns_dut(),
            std::process::id()
        ));
        std::fs::write(&p, switch_rules(set, i.gen.ipv4, i.sink.ipv4))
            .map_err(|e| DutError::Failed(format!("rules file '{}': {e}", p.display())))?;
        Ok(RulesFile(p))
    }
}

impl Drop for RulesFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn rules_note(set: RuleSet) -> &'static str {
    match set {
        RuleSet::OnePerDirection => "1 rule per direction (in_port)",
        RuleSet::TenK => "10 000 rules (6 subtables)",
    }
}

/// `linerate switch --port 1=afxdp:d0 --port 2=afxdp:d1 --flows FILE`.
pub struct LinerateSwitch {
    set: RuleSet,
    child: LinerateChild,
    rules: Option<RulesFile>,
}

impl LinerateSwitch {
    pub fn new(set: RuleSet) -> Self {
        LinerateSwitch {
            set,
            child: LinerateChild::default(),
            rules: None,
        }
    }
}

impl Dut for LinerateSwitch {
    fn name(&self) -> String {
        match self.set {
            RuleSet::OnePerDirection => "linerate-switch".into(),
            RuleSet::TenK => "linerate-switch-10k".into(),
        }
    }
    fn version(&self) -> String {
        format!("linerate {}", env!("CARGO_PKG_VERSION"))
    }
    fn describe(&self) -> String {
        format!(
            "linerate switch --port 1=afxdp:d0 --port 2=afxdp:d1, {}",
            rules_note(self.set)
        )
    }
    fn start(&mut self, bed: &mut Testbed, env: &DutEnv) -> Result<(), DutError> {
        let rules = RulesFile::write(self.set, bed)?;
        let args: Vec<String> = ["switch", "--port", "1=afxdp:d0", "--port", "2=afxdp:d1"]
            .iter()
            .map(|s| s.to_string())
            .chain(["--flows".to_string(), rules.0.display().to_string()])
            .collect();
        self.child.start(bed, env, &args)?;
        self.rules = Some(rules);
        Ok(())
    }
    fn stop(&mut self, _: &Testbed) -> Result<Option<serde_json::Value>, DutError> {
        let r = self.child.stop("linerate switch");
        self.rules = None;
        r
    }
}

/// Open vSwitch (dut-ovs.sh, afxdp ports) with the rules of [`switch_rules`]
/// loaded by `ovs-ofctl add-flows` (the file is passed in `OVS_FLOWS_FILE`).
/// With one rule per direction it is the `ovs-afxdp` [`ScriptPeer`] itself.
pub struct OvsRules {
    peer: ScriptPeer,
    rules: Option<RulesFile>,
}

impl OvsRules {
    /// `ovs-afxdp-10k`: the [`RuleSet::TenK`] rules.
    pub fn ten_k() -> Self {
        OvsRules {
            peer: ScriptPeer::new(
                "ovs-afxdp-10k",
                "dut-ovs.sh",
                &["afxdp"],
                "Open vSwitch userspace datapath, afxdp ports",
            ),
            rules: None,
        }
    }
}

impl Dut for OvsRules {
    fn name(&self) -> String {
        self.peer.name()
    }
    fn version(&self) -> String {
        self.peer.version()
    }
    fn describe(&self) -> String {
        format!("{}, {}", self.peer.what, rules_note(RuleSet::TenK))
    }
    fn start(&mut self, bed: &mut Testbed, env: &DutEnv) -> Result<(), DutError> {
        let rules = RulesFile::write(RuleSet::TenK, bed)?;
        self.peer.env = vec![("OVS_FLOWS_FILE".into(), rules.0.display().to_string())];
        self.rules = Some(rules);
        let r = self.peer.start(bed, env);
        if r.is_err() {
            self.rules = None;
        }
        r
    }
    fn stop(&mut self, bed: &Testbed) -> Result<Option<serde_json::Value>, DutError> {
        let r = self.peer.stop(bed);
        self.rules = None;
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ten_k_rules_are_distinct_and_counted() {
        let g = Ipv4Addr::new(10, 7, 1, 1);
        let s = Ipv4Addr::new(10, 7, 2, 2);
        let text = switch_rules(RuleSet::TenK, g, s);
        let rules: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(rules.len(), RULES_10K);
        let mut matches: Vec<&str> = rules
            .iter()
            .map(|l| l.rsplit_once(",actions=").unwrap().0)
            .collect();
        matches.sort_unstable();
        matches.dedup();
        assert_eq!(matches.len(), RULES_10K, "duplicate matches");
        assert_eq!(
            switch_rules(RuleSet::OnePerDirection, g, s).lines().count(),
            2
        );
    }
}
