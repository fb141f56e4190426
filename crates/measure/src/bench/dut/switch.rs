//! The flow-table switches as devices under test: `linerate switch` with
//! one rule per direction or with the 10 000-rule set of [`switch_rules`],
//! and Open vSwitch (userspace datapath, afxdp ports, scripts/peers/dut-ovs.sh)
//! with the same 10 000 rules. OpenFlow ports: 1 = d0, 2 = d1 in both.

use super::device::{Dut, DutEnv, DutError, LinerateChild};
use super::spec::{SpecDut, OVS_AFXDP};
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
/// destination port 9, see [`crate::bench::udp_frame`]) are matched by the
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

/// A rules file, removed with its directory on drop.
///
/// The bench runs as root, so the file must not be written at a name in the
/// shared temporary directory that another user could predict and pre-empt
/// (a symlink planted there would make root overwrite its target). It lives
/// in a directory of its own, made with mode 0700 under a name with 64
/// random bits (mkdir fails on anything already at that path, symlinks
/// included, so nothing made by anyone else is ever followed), and is
/// created new (O_EXCL) with mode 0600 inside it. Only root reads it: the
/// switch (`--flows`) and `ovs-ofctl add-flows` in the peer script.
struct RulesFile {
    dir: PathBuf,
    path: PathBuf,
}

impl RulesFile {
    /// Write the rules for `bed` into a fresh private directory named
    /// after its DuT namespace.
    fn write(set: RuleSet, bed: &Testbed) -> Result<RulesFile, DutError> {
        use std::io::Write as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        let i = bed.info();
        let dir = private_dir(&format!("linerate-{}-", bed.ns_dut()))?;
        // From here on, Drop removes the directory (also on an error below).
        let rf = RulesFile {
            path: dir.join("rules.flows"),
            dir,
        };
        let err = |e: std::io::Error| {
            DutError::Failed(format!("rules file '{}': {e}", rf.path.display()))
        };
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&rf.path)
            .map_err(err)?;
        f.write_all(switch_rules(set, i.gen.ipv4, i.sink.ipv4).as_bytes())
            .and_then(|()| f.flush())
            .map_err(err)?;
        Ok(rf)
    }
}

impl Drop for RulesFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// A new directory `$TMPDIR/PREFIX<16 random hex digits>` with mode 0700,
/// made by this call (never one that was there before).
fn private_dir(prefix: &str) -> Result<PathBuf, DutError> {
    use std::os::unix::fs::DirBuilderExt as _;
    let base = std::env::temp_dir();
    let mut last = None;
    for _ in 0..16 {
        let p = base.join(format!("{prefix}{:016x}", random_u64()?));
        match std::fs::DirBuilder::new().mode(0o700).create(&p) {
            Ok(()) => return Ok(p),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(p),
            Err(e) => {
                return Err(DutError::Failed(format!(
                    "rules directory '{}': {e}",
                    p.display()
                )))
            }
        }
    }
    Err(DutError::Failed(format!(
        "rules directory: 16 random names in {} already taken (last '{}')",
        base.display(),
        last.map(|p| p.display().to_string()).unwrap_or_default()
    )))
}

/// 64 bits from the kernel's random source (getrandom(2)).
fn random_u64() -> Result<u64, DutError> {
    let mut b = [0u8; 8];
    // SAFETY: getrandom writes at most b.len() bytes into b.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    if n != b.len() as isize {
        return Err(DutError::Failed(format!(
            "rules directory: getrandom: {}",
            std::io::Error::last_os_error()
        )));
    }
    Ok(u64::from_ne_bytes(b))
}

fn rules_note(set: RuleSet) -> &'static str {
    match set {
        RuleSet::OnePerDirection => "1 rule per direction (in_port)",
        RuleSet::TenK => "10 000 rules (6 subtables)",
    }
}

/// `linerate switch --port 1=afxdp:d0 --port 2=afxdp:d1 --flows FILE`,
/// with `--offload xdp` for the `-offload` DuTs.
pub struct LinerateSwitch {
    set: RuleSet,
    offload: bool,
    child: LinerateChild,
    rules: Option<RulesFile>,
}

impl LinerateSwitch {
    pub fn new(set: RuleSet) -> Self {
        LinerateSwitch {
            set,
            offload: false,
            child: LinerateChild::default(),
            rules: None,
        }
    }

    /// With `--offload xdp` (cached flows forwarded in XDP).
    pub fn offload(set: RuleSet) -> Self {
        LinerateSwitch {
            offload: true,
            ..LinerateSwitch::new(set)
        }
    }
}

impl Dut for LinerateSwitch {
    fn name(&self) -> String {
        match (self.set, self.offload) {
            (RuleSet::OnePerDirection, false) => "linerate-switch".into(),
            (RuleSet::TenK, false) => "linerate-switch-10k".into(),
            (RuleSet::OnePerDirection, true) => "linerate-switch-offload".into(),
            (RuleSet::TenK, true) => "linerate-switch-offload-10k".into(),
        }
    }
    fn version(&self) -> String {
        format!("linerate {}", env!("CARGO_PKG_VERSION"))
    }
    fn describe(&self) -> String {
        format!(
            "linerate switch --port 1=afxdp:d0 --port 2=afxdp:d1{}, {}",
            if self.offload { " --offload xdp" } else { "" },
            rules_note(self.set)
        )
    }
    fn start(&mut self, bed: &mut Testbed, env: &DutEnv) -> Result<(), DutError> {
        let rules = RulesFile::write(self.set, bed)?;
        let args: Vec<String> = ["switch", "--port", "1=afxdp:d0", "--port", "2=afxdp:d1"]
            .iter()
            .map(|s| s.to_string())
            .chain(["--flows".to_string(), rules.path.display().to_string()])
            .chain(
                // XDP forwards where d0 receives, as for every XDP DuT of
                // the bed (--offload-cpu moved it to the DuT's CPU: with
                // the sink's receive there too, 1.6-2.0 Mpps against
                // 3.5-5 in place, frames lost in the CPU's queue).
                self.offload
                    .then(|| ["--offload".to_string(), "xdp".to_string()])
                    .into_iter()
                    .flatten(),
            )
            .collect();
        self.child.start(bed, env, &args)?;
        self.rules = Some(rules);
        Ok(())
    }
    fn alive(&mut self) -> Result<(), DutError> {
        self.child.alive()
    }
    fn stop(&mut self, _: &Testbed) -> Result<Option<serde_json::Value>, DutError> {
        let r = self.child.stop("linerate switch");
        self.rules = None;
        r
    }
}

/// Open vSwitch (dut-ovs.sh, afxdp ports) with the rules of [`switch_rules`]
/// loaded by `ovs-ofctl add-flows` (the file is passed in `OVS_FLOWS_FILE`).
/// With one rule per direction it is the built-in spec `ovs-afxdp` itself.
pub struct OvsRules {
    peer: SpecDut,
    rules: Option<RulesFile>,
}

impl OvsRules {
    /// `ovs-afxdp-10k`: the [`RuleSet::TenK`] rules.
    pub fn ten_k() -> Self {
        let mut peer = SpecDut::builtin(OVS_AFXDP, "ovs-afxdp");
        peer.spec.name = "ovs-afxdp-10k".into();
        OvsRules { peer, rules: None }
    }
}

impl Dut for OvsRules {
    fn name(&self) -> String {
        self.peer.name()
    }
    fn version(&self) -> String {
        self.peer.version()
    }
    fn spec_hash(&self) -> Option<String> {
        self.peer.spec_hash()
    }
    fn describe(&self) -> String {
        format!("{}, {}", self.peer.describe(), rules_note(RuleSet::TenK))
    }
    fn start(&mut self, bed: &mut Testbed, env: &DutEnv) -> Result<(), DutError> {
        let rules = RulesFile::write(RuleSet::TenK, bed)?;
        self.peer.env = vec![("OVS_FLOWS_FILE".into(), rules.path.display().to_string())];
        self.rules = Some(rules);
        let r = self.peer.start(bed, env);
        if r.is_err() {
            self.rules = None;
        }
        r
    }
    fn alive(&mut self) -> Result<(), DutError> {
        self.peer.alive()
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

    /// The rules' directory is new, private (0700) and unpredictable.
    #[test]
    fn private_dirs_are_new_0700_and_distinct() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let prefix = format!("linerate-unit-{}-", std::process::id());
        let (a, b) = (private_dir(&prefix).unwrap(), private_dir(&prefix).unwrap());
        assert_ne!(a, b);
        for d in [&a, &b] {
            let m = std::fs::symlink_metadata(d).unwrap();
            assert!(m.is_dir(), "{}", d.display());
            assert_eq!(m.permissions().mode() & 0o777, 0o700, "{}", d.display());
            // SAFETY: geteuid has no preconditions.
            assert_eq!(m.uid(), unsafe { libc::geteuid() });
            let name = d.file_name().unwrap().to_str().unwrap();
            let tail = name.strip_prefix(&prefix).unwrap();
            assert!(tail.len() == 16 && tail.chars().all(|c| c.is_ascii_hexdigit()));
        }
        let _ = std::fs::remove_dir(&a);
        let _ = std::fs::remove_dir(&b);
    }
}
