//! What every device under test is: the [`Dut`] trait, its environment
//! and errors, and the helpers DuTs share (a `linerate` child process,
//! the peers' scripts, CPU affinity).

use crate::testbed::{DutMode, Testbed};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Default wait for the first probe frames to come out.
pub const READY_TIMEOUT: Duration = Duration::from_secs(10);

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
        format!("Linux {}", linerate_io::host::kernel_release())
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
    /// ([`crate::bench::history::spec_hash`]), part of its key in the history.
    /// None: the DuT is code of the bench's own (its version says it).
    fn spec_hash(&self) -> Option<String> {
        None
    }
    /// How long after `start` the first probe frames may take to come out
    /// of d1 (the bench measures readiness; it never sleeps for it).
    fn ready_timeout(&self) -> Duration {
        READY_TIMEOUT
    }
    /// Err when the DuT ended by itself (its process exited): checked
    /// while waiting for it to forward.
    fn alive(&mut self) -> Result<(), DutError> {
        Ok(())
    }
    /// `e` with what the DuT can add (a guest: its console log's path).
    fn explain(&mut self, e: DutError) -> DutError {
        e
    }
}

/// A DuT's processes run on every CPU (they pin what they pin themselves),
/// whatever CPUs the bench keeps its own threads on
/// ([`linerate_io::host::OffCpu`]).
pub(crate) fn on_every_cpu(cmd: &mut Command) -> &mut Command {
    with_affinity(cmd, None)
}

/// Run `cmd` (and every thread it starts) on `cpu` only: a DuT's helper
/// threads (the switch's offloader, learner, link watcher) then share the
/// DuT's core instead of preempting the generator on its own (a fresh
/// `linerate-switch-offload-10k`: a 10 s trial at 2 Mpps whose generator
/// slipped 2.7 % of the time in 223 gaps, invalid, passed with every
/// thread of the DuT on its core; one run each).
pub(crate) fn on_cpu(cmd: &mut Command, cpu: usize) -> &mut Command {
    with_affinity(cmd, Some(cpu))
}

/// `cmd` runs on `cpu`, or on every CPU: without one, or when it may not
/// run there (never on the bench's own mask, which leaves the DuT's CPU
/// out).
fn with_affinity(cmd: &mut Command, cpu: Option<usize>) -> &mut Command {
    use std::os::unix::process::CommandExt;
    let all = linerate_io::host::every_cpu();
    let one = cpu.and_then(linerate_io::host::cpu_set);
    // SAFETY: sched_setaffinity is async-signal-safe; the sets are copies
    // (nothing is allocated in the child).
    unsafe {
        cmd.pre_exec(move || {
            if one.is_none_or(|s| linerate_io::host::set_affinity(&s).is_err()) {
                let _ = linerate_io::host::set_affinity(&all);
            }
            Ok(())
        })
    }
}

/// A `linerate` command run as the DuT: a child process in the DuT
/// namespace, pinned to `env.cpu` with all its threads, stopped with SIGINT (it then prints its
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
        on_cpu(&mut cmd, env.cpu);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn on_cpu_pins_every_thread() {
        // The highest CPU this process may run on (not 0 only, so a no-op
        // would not pass where every process runs on CPU 0).
        // SAFETY: a zeroed cpu_set_t is valid for sched_getaffinity to fill.
        let mut mine: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: mine is a valid cpu_set_t of the size given.
        let r = unsafe {
            libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut mine)
        };
        assert_eq!(r, 0);
        let last = (0..libc::CPU_SETSIZE as usize)
            // SAFETY: i < CPU_SETSIZE.
            .filter(|&i| unsafe { libc::CPU_ISSET(i, &mine) })
            .max()
            .unwrap();
        let status = |c: &mut Command| {
            c.args(["-c", "grep Cpus_allowed_list /proc/self/status"]);
            let out = c.output().unwrap();
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        let mut c = Command::new("sh");
        on_cpu(&mut c, last);
        let s = status(&mut c);
        assert_eq!(
            s.split_whitespace().nth(1),
            Some(last.to_string().as_str()),
            "{s}"
        );
        // A CPU that does not exist: every CPU, not the caller's mask.
        let mut c = Command::new("sh");
        on_cpu(&mut c, libc::CPU_SETSIZE as usize + 1);
        let s = status(&mut c);
        // SAFETY: sysconf has no preconditions.
        let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1);
        let want = if n == 1 {
            "0".to_string()
        } else {
            format!("0-{}", n - 1)
        };
        assert_eq!(s.split_whitespace().nth(1), Some(want.as_str()), "{s}");
    }
}
