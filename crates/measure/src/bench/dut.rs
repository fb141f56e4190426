//! Devices under test. Each knows how to start in the test bed's DuT
//! namespace, which frames the generator must send it, and how to stop
//! leaving nothing behind. A DuT that is a few commands is a spec file
//! ([`super::dut_spec`], the built-in ones in `crates/measure/duts/`);
//! one that needs code (an in-process XDP program, generated rules) is
//! an `impl Dut`.

use crate::testbed::{DutMode, Testbed};
use linerate_io::xdp::fwd::XdpRedirectBare;
use linerate_io::xdp::AttachMode;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Why a DuT did not run.
#[derive(Debug)]
pub enum DutError {
    /// Not available on this machine (missing package, unsupported): skipped.
    Unavailable(String),
    /// Available but failed.
    Failed(String),
}

impl std::fmt::Display for DutError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DutError::Unavailable(s) => write!(f, "skipped: {s}"),
            DutError::Failed(s) => write!(f, "failed: {s}"),
        }
    }
}

/// Settings every DuT may use.
#[derive(Clone, Debug)]
pub struct DutEnv {
    /// The `linerate` binary (to run `linerate fwd` as the DuT).
    pub linerate: PathBuf,
    /// scripts/peers of the repository, when found.
    pub peers_dir: Option<PathBuf>,
    /// CPU the DuT runs on.
    pub cpu: usize,
}

pub trait Dut {
    /// Short stable name, e.g. "linerate-afxdp".
    fn name(&self) -> String;
    /// One-line description for the report.
    fn describe(&self) -> String;
    /// What the generator must address (see [`crate::testbed::FrameAddrs::for_mode`]).
    fn mode(&self) -> DutMode {
        DutMode::None
    }
    /// Start forwarding between d0 and d1 of `bed`.
    fn start(&mut self, bed: &mut Testbed, env: &DutEnv) -> Result<(), DutError>;
    /// Stop; returns the DuT's own account (JSON) when it keeps one.
    fn stop(&mut self, bed: &Testbed) -> Result<Option<serde_json::Value>, DutError>;
    /// Software and version, for the report (default: the kernel's).
    fn version(&self) -> String {
        format!("Linux {}", kernel_release())
    }
    /// Forwards d1 -> d0 as well as d0 -> d1 (for traffic both ways).
    fn both_ways(&self) -> bool {
        true
    }
    /// Where it is described: "built-in", or its spec file.
    fn origin(&self) -> String {
        "built-in".into()
    }
    /// A DuT described by a spec: the hash of the spec's text
    /// ([`super::history::spec_hash`]), part of its key in the history.
    /// None: the DuT is code of the bench's own (its version says it).
    fn spec_hash(&self) -> Option<String> {
        None
    }
    /// How long after `start` the first probe frames may take to come out
    /// of d1 (the bench measures readiness; it never sleeps for it).
    fn ready_timeout(&self) -> Duration {
        super::dut_spec::READY_TIMEOUT
    }
    /// Err when the DuT ended by itself (its process exited): checked
    /// while waiting for it to forward.
    fn alive(&mut self) -> Result<(), DutError> {
        Ok(())
    }
}

pub use linerate_io::host::kernel_release;

/// A DuT's processes run on every CPU (they pin what they pin themselves),
/// whatever CPUs the bench keeps its own threads on
/// ([`linerate_io::host::OffCpu`]).
pub(crate) fn on_every_cpu(cmd: &mut Command) -> &mut Command {
    use std::os::unix::process::CommandExt;
    let all = linerate_io::host::every_cpu();
    // SAFETY: sched_setaffinity is async-signal-safe; `all` is a copy.
    unsafe {
        cmd.pre_exec(move || {
            let _ = linerate_io::host::set_affinity(&all);
            Ok(())
        })
    }
}

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

/// A `linerate` command run as the DuT: a child process in the DuT
/// namespace, pinned to `env.cpu`, stopped with SIGINT (it then prints its
/// final account as the last JSON line), killed if dropped while running.
/// Used by the switch DuTs.
#[derive(Default)]
pub struct LinerateChild {
    child: Option<Child>,
}

impl LinerateChild {
    /// Run `linerate ARGS --quiet --json --profile --cpu env.cpu` in the DuT
    /// namespace.
    pub fn start(&mut self, bed: &Testbed, env: &DutEnv, args: &[String]) -> Result<(), DutError> {
        let mut cmd = Command::new("ip");
        on_every_cpu(&mut cmd);
        cmd.args(["netns", "exec", bed.ns_dut()])
            .arg(&env.linerate)
            .args(args)
            .args([
                "--quiet",
                "--json",
                "--profile",
                "--cpu",
                &env.cpu.to_string(),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let child = cmd
            .spawn()
            .map_err(|e| DutError::Failed(format!("cannot run {}: {e}", env.linerate.display())))?;
        crate::guard::register_pid(child.id());
        // Not waited for: the bench sends probe frames until they come out
        // (and asks `alive` meanwhile).
        self.child = Some(child);
        Ok(())
    }

    /// Err with its error output when it exited.
    pub fn alive(&mut self) -> Result<(), DutError> {
        let Some(child) = &mut self.child else {
            return Ok(());
        };
        if let Ok(Some(st)) = child.try_wait() {
            crate::guard::unregister_pid(child.id());
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                use std::io::Read;
                let _ = e.read_to_string(&mut err);
            }
            self.child = None;
            return Err(DutError::Failed(format!(
                "exited with {st}: {}",
                err.trim()
            )));
        }
        Ok(())
    }

    /// SIGINT, wait, and the last JSON line of its output (`what` names it
    /// in errors, e.g. "linerate fwd").
    pub fn stop(&mut self, what: &str) -> Result<Option<serde_json::Value>, DutError> {
        let Some(child) = self.child.take() else {
            return Ok(None);
        };
        // SIGINT: linerate prints its final account and detaches.
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        let pid = child.id();
        let out = child
            .wait_with_output()
            .map_err(|e| DutError::Failed(e.to_string()))?;
        crate::guard::unregister_pid(pid);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let last = stdout.lines().rev().find(|l| l.starts_with('{'));
        if !out.status.success() {
            return Err(DutError::Failed(format!(
                "{what} ended with {}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(last.and_then(|l| serde_json::from_str(l).ok()))
    }
}

impl Drop for LinerateChild {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
            crate::guard::unregister_pid(c.id());
        }
    }
}

/// scripts/peers of the repository the binary was built in (walks up from
/// `exe`), or `$LINERATE_PEERS`.
pub fn find_peers_dir(exe: &Path) -> Option<PathBuf> {
    if let Ok(p) = std::env::var("LINERATE_PEERS") {
        return Some(PathBuf::from(p));
    }
    exe.ancestors()
        .map(|a| a.join("scripts/peers"))
        .find(|p| p.is_dir())
        .or_else(|| {
            let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/peers");
            p.is_dir().then_some(p)
        })
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

pub fn builtin() -> Vec<Box<dyn Dut>> {
    use super::dut_spec::SpecDut;
    use super::dut_switch::{LinerateSwitch, OvsRules, RuleSet};
    let spec = |name: &str, text: &str| -> Box<dyn Dut> { Box::new(SpecDut::builtin(text, name)) };
    vec![
        spec("linux-bridge", include_str!("../../duts/linux-bridge.toml")),
        spec("linux-ipfwd", include_str!("../../duts/linux-ipfwd.toml")),
        spec(
            "linerate-afpacket",
            include_str!("../../duts/linerate-afpacket.toml"),
        ),
        spec(
            "linerate-afpacket-v3",
            include_str!("../../duts/linerate-afpacket-v3.toml"),
        ),
        spec(
            "linerate-afpacket-mmsg",
            include_str!("../../duts/linerate-afpacket-mmsg.toml"),
        ),
        spec(
            "linerate-afxdp",
            include_str!("../../duts/linerate-afxdp.toml"),
        ),
        spec("linerate-xdp", include_str!("../../duts/linerate-xdp.toml")),
        Box::new(BareRedirect::new()),
        Box::new(LinerateSwitch::new(RuleSet::OnePerDirection)),
        Box::new(LinerateSwitch::new(RuleSet::TenK)),
        spec(
            "testpmd-af_xdp",
            include_str!("../../duts/testpmd-af_xdp.toml"),
        ),
        spec(
            "testpmd-af_packet",
            include_str!("../../duts/testpmd-af_packet.toml"),
        ),
        spec("ovs-afxdp", include_str!("../../duts/ovs-afxdp.toml")),
        Box::new(OvsRules::ten_k()),
        spec("ovs-system", include_str!("../../duts/ovs-system.toml")),
    ]
}

/// The text of the built-in spec `ovs-afxdp` (the base of `ovs-afxdp-10k`).
pub(crate) const OVS_AFXDP: &str = include_str!("../../duts/ovs-afxdp.toml");

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
        let s = super::dut_spec::DutSpec::load(f)?;
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
        specs.push(Box::new(super::dut_spec::SpecDut::new(s)));
    }
    for d in names {
        if !known.contains(d) {
            return Err(format!(
                "--dut {d}: unknown device under test (known: {}; or describe yours with --dut-file)",
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
            let s = super::super::dut_spec::DutSpec::load(&p).unwrap();
            assert_eq!(
                format!("{}.toml", s.name),
                p.file_name().unwrap().to_str().unwrap()
            );
            n += 1;
        }
        let names: Vec<String> = super::builtin().iter().map(|d| d.name()).collect();
        assert_eq!(names.len(), n + 4, "{names:?}");
        let mut sorted = names.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), names.len(), "{names:?}");
    }
}
