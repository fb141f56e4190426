//! Devices under test. Each knows how to start in the test bed's DuT
//! namespace, which frames the generator must send it, and how to stop
//! leaving nothing behind. Adding a DuT is one `impl Dut`.

use crate::testbed::{DutMode, Testbed};
use linerate_io::xdp::AttachMode;
use linerate_io::xdpfwd::XdpRedirectBare;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

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
}

/// `uname -r`.
pub fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// The installed version of a Debian package, if any.
fn package_version(pkg: &str) -> Option<String> {
    let out = Command::new("dpkg-query")
        .args(["-W", "-f", "${Version}", pkg])
        .output()
        .ok()?;
    let v = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !v.is_empty()).then_some(v)
}

/// The Linux bridge (br0 with d0, d1).
pub struct Bridge;
impl Dut for Bridge {
    fn name(&self) -> String {
        "linux-bridge".into()
    }
    fn describe(&self) -> String {
        "Linux bridge br0 (d0, d1), static FDB".into()
    }
    fn mode(&self) -> DutMode {
        DutMode::Bridge
    }
    fn start(&mut self, bed: &mut Testbed, _: &DutEnv) -> Result<(), DutError> {
        bed.enable_bridge()
            .map_err(|e| DutError::Failed(e.to_string()))
    }
    fn stop(&mut self, _: &Testbed) -> Result<Option<serde_json::Value>, DutError> {
        Ok(None)
    }
}

/// Linux IPv4 forwarding with static neighbours.
pub struct IpForward;
impl Dut for IpForward {
    fn name(&self) -> String {
        "linux-ipfwd".into()
    }
    fn describe(&self) -> String {
        "Linux IPv4 forwarding d0 -> d1, static neighbours".into()
    }
    fn mode(&self) -> DutMode {
        DutMode::IpForward
    }
    fn start(&mut self, bed: &mut Testbed, _: &DutEnv) -> Result<(), DutError> {
        bed.enable_ip_forwarding()
            .map_err(|e| DutError::Failed(e.to_string()))
    }
    fn stop(&mut self, _: &Testbed) -> Result<Option<serde_json::Value>, DutError> {
        Ok(None)
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
/// Shared by [`LinerateFwd`] and the switch DuTs.
#[derive(Default)]
pub struct LinerateChild {
    child: Option<Child>,
}

impl LinerateChild {
    /// Run `linerate ARGS --quiet --json --profile --cpu env.cpu` in the DuT
    /// namespace and give it time to attach; fails early if it exits.
    pub fn start(&mut self, bed: &Testbed, env: &DutEnv, args: &[String]) -> Result<(), DutError> {
        let mut cmd = Command::new("ip");
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
        let mut child = cmd
            .spawn()
            .map_err(|e| DutError::Failed(format!("cannot run {}: {e}", env.linerate.display())))?;
        crate::guard::register_pid(child.id());
        // Give it time to attach; fail early if it exits.
        let t = Instant::now();
        while t.elapsed() < Duration::from_millis(700) {
            if let Ok(Some(st)) = child.try_wait() {
                crate::guard::unregister_pid(child.id());
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    use std::io::Read;
                    let _ = e.read_to_string(&mut err);
                }
                return Err(DutError::Failed(format!(
                    "exited with {st}: {}",
                    err.trim()
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.child = Some(child);
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

/// `linerate fwd` in one of its modes, as a child process in the DuT namespace.
pub struct LinerateFwd {
    /// "afxdp", "afpacket" (TPACKET_V2 RX ring, the busy-polling default),
    /// "afpacket-v3" (TPACKET_V3 block ring), "afpacket-mmsg" or "xdp".
    pub kind: &'static str,
    child: LinerateChild,
}

impl LinerateFwd {
    pub fn new(kind: &'static str) -> Self {
        LinerateFwd {
            kind,
            child: LinerateChild::default(),
        }
    }
    fn args(&self) -> Vec<String> {
        let s = |x: &str| x.to_string();
        match self.kind {
            "afxdp" => vec![s("afxdp:d0"), s("afxdp:d1")],
            "afpacket" => vec![s("afpacket:d0"), s("afpacket:d1")],
            "afpacket-v3" => vec![s("afpacket:d0?ring=v3"), s("afpacket:d1?ring=v3")],
            "afpacket-mmsg" => vec![s("afpacket:d0?ring=mmsg"), s("afpacket:d1?ring=mmsg")],
            _ => vec![s("--mode"), s("xdp"), s("afxdp:d0"), s("afxdp:d1")],
        }
    }
}

impl Dut for LinerateFwd {
    fn name(&self) -> String {
        format!("linerate-{}", self.kind)
    }
    fn version(&self) -> String {
        format!("linerate {}", env!("CARGO_PKG_VERSION"))
    }
    fn describe(&self) -> String {
        format!("linerate fwd {}", self.args().join(" "))
    }
    fn start(&mut self, bed: &mut Testbed, env: &DutEnv) -> Result<(), DutError> {
        let mut args = vec!["fwd".to_string()];
        args.extend(self.args());
        self.child.start(bed, env, &args)
    }
    fn stop(&mut self, _: &Testbed) -> Result<Option<serde_json::Value>, DutError> {
        self.child.stop("linerate fwd")
    }
}

/// A peer run by a script in scripts/peers/ (`dut-NAME.sh start NS ARGS`, `stop NS`):
/// DPDK testpmd, Open vSwitch. Exit status 3 from `start` means unavailable.
pub struct ScriptPeer {
    pub name: &'static str,
    pub script: &'static str,
    pub args: Vec<String>,
    /// Extra environment of `start` (e.g. `OVS_FLOWS_FILE` for dut-ovs.sh).
    pub env: Vec<(String, String)>,
    pub what: &'static str,
    started: Option<String>,
}

impl ScriptPeer {
    pub fn new(
        name: &'static str,
        script: &'static str,
        args: &[&str],
        what: &'static str,
    ) -> Self {
        ScriptPeer {
            name,
            script,
            args: args.iter().map(|s| s.to_string()).collect(),
            env: Vec::new(),
            what,
            started: None,
        }
    }
    fn path(&self, env: &DutEnv) -> Result<PathBuf, DutError> {
        let dir = env.peers_dir.as_ref().ok_or_else(|| {
            DutError::Unavailable("scripts/peers not found next to the binary".into())
        })?;
        Ok(dir.join(self.script))
    }
}

impl Dut for ScriptPeer {
    fn name(&self) -> String {
        self.name.into()
    }
    fn version(&self) -> String {
        let pkg = match self.script {
            "dut-testpmd.sh" => "dpdk",
            "dut-ovs.sh" => "openvswitch-switch",
            _ => return "unknown".into(),
        };
        match package_version(pkg) {
            Some(v) => format!("{pkg} {v}"),
            None => format!("{pkg} not installed"),
        }
    }
    fn describe(&self) -> String {
        self.what.into()
    }
    fn start(&mut self, bed: &mut Testbed, env: &DutEnv) -> Result<(), DutError> {
        let p = self.path(env)?;
        // Registered before it starts: the watchdog runs `stop` if we die.
        crate::guard::register_peer(&p, bed.ns_dut());
        let out = run_script(
            Command::new(&p)
                .arg("start")
                .arg(bed.ns_dut())
                .args(&self.args)
                .envs(self.env.iter().map(|(k, v)| (k, v)))
                .env("DUT_CPU", env.cpu.to_string()),
        )
        .map_err(|e| DutError::Failed(format!("{}: {e}", p.display())))?;
        let msg = |o: &std::process::Output| {
            let e = String::from_utf8_lossy(&o.stderr);
            let s = String::from_utf8_lossy(&o.stdout);
            e.lines()
                .chain(s.lines())
                .rfind(|l| !l.trim().is_empty())
                .unwrap_or("")
                .to_string()
        };
        match out.status.code() {
            Some(0) => {
                self.started = Some(bed.ns_dut().to_string());
                Ok(())
            }
            code => {
                // Half-started: stop what may be there (`stop NS` takes no
                // more arguments).
                let _ = run_script(Command::new(&p).arg("stop").arg(bed.ns_dut()));
                crate::guard::unregister_peer(&p, bed.ns_dut());
                if code == Some(3) {
                    Err(DutError::Unavailable(msg(&out)))
                } else {
                    Err(DutError::Failed(msg(&out)))
                }
            }
        }
    }
    fn stop(&mut self, _: &Testbed) -> Result<Option<serde_json::Value>, DutError> {
        self.stop_script()
    }
}

impl ScriptPeer {
    fn stop_script(&mut self) -> Result<Option<serde_json::Value>, DutError> {
        let Some(ns) = self.started.take() else {
            return Ok(None);
        };
        let Some(dir) = peers_dir_cached() else {
            return Ok(None);
        };
        let script = dir.join(self.script);
        let out = run_script(Command::new(&script).arg("stop").arg(&ns))
            .map_err(|e| DutError::Failed(e.to_string()))?;
        if !out.status.success() {
            // Stays registered: the watchdog tries again if we die.
            return Err(DutError::Failed(
                String::from_utf8_lossy(&out.stderr).trim().to_string(),
            ));
        }
        crate::guard::unregister_peer(&script, &ns);
        Ok(None)
    }
}

impl Drop for ScriptPeer {
    fn drop(&mut self) {
        let _ = self.stop_script();
    }
}

/// Run a peer script to its end: in its own process group, which the
/// watchdog (crate::guard) kills if we die meanwhile, and killed with us.
fn run_script(cmd: &mut Command) -> std::io::Result<std::process::Output> {
    use std::os::unix::process::CommandExt;
    crate::guard::die_with_parent(cmd);
    let child = cmd
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let pgid = child.id();
    crate::guard::register_group(pgid);
    let out = child.wait_with_output();
    crate::guard::unregister_group(pgid);
    out
}

fn peers_dir_cached() -> Option<PathBuf> {
    find_peers_dir(&std::env::current_exe().ok()?)
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
