//! Devices under test. Each knows how to start in the test bed's DuT
//! namespace, which frames the generator must send it, and how to stop
//! leaving nothing behind. A DuT that is a few commands is a spec file
//! ([`spec`], the built-in ones in `crates/measure/duts/`);
//! one that needs code (an in-process XDP program, generated rules) is
//! an `impl Dut`.

mod device;
pub mod spec;
pub mod switch;
pub mod vm;

pub use device::*;
pub use linerate_io::host::kernel_release;
use spec::SpecDut;
use switch::{LinerateSwitch, OvsRules, RuleSet};

use crate::testbed::Testbed;
use linerate_io::xdp::fwd::XdpRedirectBare;
use linerate_io::xdp::AttachMode;

/// A bare XDP_REDIRECT through a devmap (no counters, no rewrite): the
/// reference for the in-kernel forwarding cost.
pub struct BareRedirect(Option<XdpRedirectBare>);
impl BareRedirect {
    pub fn new() -> Self {
        BareRedirect(None)
    }
}
impl Default for BareRedirect {
    fn default() -> Self {
        Self::new()
    }
}
impl Dut for BareRedirect {
    fn name(&self) -> String {
        "xdp-redirect-bare".into()
    }
    fn describe(&self) -> String {
        "reference: minimal XDP devmap redirect d0 <-> d1 (native)".into()
    }
    fn start(&mut self, bed: &mut Testbed, _: &DutEnv) -> Result<(), DutError> {
        let r = bed
            .in_netns(bed.ns_dut(), || {
                XdpRedirectBare::start("d0", "d1", AttachMode::Native)
            })
            .map_err(|e| DutError::Failed(e.to_string()))?
            .map_err(|e| DutError::Failed(e.to_string()))?;
        self.0 = Some(r);
        Ok(())
    }
    fn stop(&mut self, _: &Testbed) -> Result<Option<serde_json::Value>, DutError> {
        self.0 = None;
        Ok(None)
    }
}

/// The built-in DuTs, in the order `linerate bench` lists them.
/// `Err("OPTION NAME: unknown device under test (known: ...)")` for the
/// first of `names` that is not a built-in DuT.
pub fn check_builtin(option: &str, names: &[String]) -> Result<(), String> {
    let known: Vec<String> = builtin().iter().map(|d| d.name()).collect();
    match names.iter().find(|d| !known.contains(d)) {
        Some(d) => Err(format!(
            "{option} {d}: unknown device under test (known: {})",
            known.join(", ")
        )),
        None => Ok(()),
    }
}

/// The built-in DuTs that are spec files and may also run in a guest
/// (`vm:NAME`, [`vm::GUEST_DUTS`]): name and text.
const GUEST_SPECS: [(&str, &str); 7] = [
    (
        "linux-bridge",
        include_str!("../../../duts/linux-bridge.toml"),
    ),
    (
        "linux-ipfwd",
        include_str!("../../../duts/linux-ipfwd.toml"),
    ),
    (
        "linerate-afpacket",
        include_str!("../../../duts/linerate-afpacket.toml"),
    ),
    (
        "linerate-afpacket-v3",
        include_str!("../../../duts/linerate-afpacket-v3.toml"),
    ),
    (
        "linerate-afpacket-mmsg",
        include_str!("../../../duts/linerate-afpacket-mmsg.toml"),
    ),
    (
        "linerate-afxdp",
        include_str!("../../../duts/linerate-afxdp.toml"),
    ),
    (
        "linerate-xdp",
        include_str!("../../../duts/linerate-xdp.toml"),
    ),
];

/// `vm:NAME` for `name` (Ok(None): not a `vm:` name).
fn in_guest(name: &str) -> Result<Option<Box<dyn Dut>>, String> {
    let Some(inner) = name.strip_prefix("vm:") else {
        return Ok(None);
    };
    match GUEST_SPECS.iter().find(|(n, _)| *n == inner) {
        Some((n, text)) => Ok(Some(Box::new(vm::builtin_in_guest(n, text)))),
        None => Err(format!(
            "--dut {name}: {inner} does not run in a guest (these do: {})",
            GUEST_SPECS
                .iter()
                .map(|(n, _)| format!("vm:{n}"))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

pub fn builtin() -> Vec<Box<dyn Dut>> {
    let spec = |name: &str, text: &str| -> Box<dyn Dut> { Box::new(SpecDut::builtin(text, name)) };
    let mut v: Vec<Box<dyn Dut>> = GUEST_SPECS.iter().map(|(n, t)| spec(n, t)).collect();
    v.extend::<Vec<Box<dyn Dut>>>(vec![
        Box::new(BareRedirect::new()),
        Box::new(LinerateSwitch::new(RuleSet::OnePerDirection)),
        Box::new(LinerateSwitch::new(RuleSet::TenK)),
        Box::new(LinerateSwitch::offload(RuleSet::OnePerDirection)),
        Box::new(LinerateSwitch::offload(RuleSet::TenK)),
        spec(
            "testpmd-af_xdp",
            include_str!("../../../duts/testpmd-af_xdp.toml"),
        ),
        spec(
            "testpmd-af_packet",
            include_str!("../../../duts/testpmd-af_packet.toml"),
        ),
        spec("ovs-afxdp", include_str!("../../../duts/ovs-afxdp.toml")),
        Box::new(OvsRules::ten_k()),
        spec("ovs-system", include_str!("../../../duts/ovs-system.toml")),
    ]);
    v
}

/// The default DuTs of `linerate bench` (no `--dut`, no `--dut-file`).
pub const DEFAULT: [&str; 6] = [
    "linux-bridge",
    "linux-ipfwd",
    "linerate-afpacket",
    "linerate-afxdp",
    "linerate-xdp",
    "xdp-redirect-bare",
];
/// The peers added to the default unless asked not to.
pub const PEERS: [&str; 3] = ["testpmd-af_xdp", "testpmd-af_packet", "ovs-afxdp"];

/// The DuTs asked for, in order: the built-in ones named in `names`, then
/// the spec files (with neither: [`DEFAULT`], and [`PEERS`] when `peers`).
/// Errors name an unknown DuT, or the spec file and its field.
pub fn select(
    names: &[String],
    files: &[std::path::PathBuf],
    peers: bool,
) -> Result<Vec<Box<dyn Dut>>, String> {
    let known: Vec<String> = builtin().iter().map(|d| d.name()).collect();
    let mut specs: Vec<Box<dyn Dut>> = Vec::new();
    let mut taken: Vec<String> = Vec::new();
    for f in files {
        let s = spec::DutSpec::load(f)?;
        if known.contains(&s.name) {
            return Err(format!(
                "{}: field `name`: {:?} is a built-in DuT's name; choose another",
                f.display(),
                s.name
            ));
        }
        if taken.contains(&s.name) {
            return Err(format!(
                "{}: field `name`: {:?} is taken by an earlier --dut-file",
                f.display(),
                s.name
            ));
        }
        taken.push(s.name.clone());
        if s.vm.is_some() {
            specs.push(Box::new(vm::VmDut::new(s)));
        } else {
            specs.push(Box::new(SpecDut::new(s)));
        }
    }
    let mut guests: Vec<Box<dyn Dut>> = Vec::new();
    for d in names {
        if let Some(g) = in_guest(d)? {
            guests.push(g);
            continue;
        }
        if !known.contains(d) {
            return Err(format!(
                "--dut {d}: unknown device under test (known: {}; vm:NAME runs NAME in a guest; or describe yours with --dut-file)",
                known.join(", ")
            ));
        }
    }
    let want: Vec<String> = if !names.is_empty() || !specs.is_empty() {
        names.to_vec()
    } else {
        let mut w: Vec<String> = DEFAULT.iter().map(|s| s.to_string()).collect();
        if peers {
            w.extend(PEERS.iter().map(|s| s.to_string()));
        }
        w
    };
    let mut duts: Vec<Box<dyn Dut>> = builtin()
        .into_iter()
        .filter(|d| want.contains(&d.name()))
        .collect();
    duts.extend(guests);
    duts.sort_by_key(|d| want.iter().position(|w| *w == d.name()));
    duts.extend(specs);
    Ok(duts)
}

#[cfg(test)]
mod tests {
    /// Every built-in spec parses, and its file is named after its DuT.
    #[test]
    fn builtin_specs_parse_and_are_named_after_their_files() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("duts");
        let mut n = 0;
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let s = super::spec::DutSpec::load(&p).unwrap();
            assert_eq!(
                format!("{}.toml", s.name),
                p.file_name().unwrap().to_str().unwrap()
            );
            n += 1;
        }
        let names: Vec<String> = super::builtin().iter().map(|d| d.name()).collect();
        // The spec files, and the DuTs written in Rust: bare XDP_REDIRECT,
        // the four switch DuTs (with and without offload, 2 and 10k rules)
        // and Open vSwitch with 10k rules.
        assert_eq!(names.len(), n + 6, "{names:?}");
        let mut sorted = names.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), names.len(), "{names:?}");
    }
}
