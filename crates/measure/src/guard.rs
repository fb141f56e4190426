//! A watchdog process that removes what a process made (test beds, peer
//! DuTs, child processes) when that process dies, however it dies:
//! SIGKILL cannot be caught, so the cleanup cannot run in the process
//! itself.
//!
//! [`Guard::spawn`] re-executes the `linerate` binary as `linerate __reap
//! --parent PID` (see [`crate::reap::watchdog_main`]; the watchdog's side is
//! `reap.rs`, this file is the parent's) with its stdin connected by a pipe
//! to the parent. The watchdog calls setsid() and ignores SIGINT, SIGTERM,
//! SIGHUP and SIGPIPE (set between fork and exec, so there is no window),
//! then blocks reading the pipe. The parent registers what it makes, one
//! line per item:
//!
//! ```text
//! bed NAME            test bed NAME (namespaces NAME-gen, NAME-dut, NAME-sink)
//! peer NS SCRIPT      a peer DuT started with `SCRIPT start NS ...`, stopped by `SCRIPT stop NS`
//! peerlimit S NS SCRIPT   the same, its stop given S seconds (1..=3600) instead of 30
//! pid PID START       a child process (START: its start time, field 22 of /proc/PID/stat)
//! group PGID          a process group (a script and its children)
//! unbed / unpeer / unpid / ungroup ...   the same, removed again by the parent
//! keep NAME           bed NAME is detached on purpose: never removed (even if its record names the parent)
//! done                the parent cleaned up itself: exit without doing anything
//! ```
//!
//! The write end of the pipe is close-on-exec and held only by the parent,
//! so end of file means the parent is gone (or dropped the [`Guard`]). On
//! end of file without "done" the watchdog reaps, in this order:
//!
//! 1. SIGKILL to every registered process group and process (a pid is only
//!    killed when its start time still matches: no pid reuse accident);
//! 2. SIGKILL to every process in the network namespaces of the beds, until
//!    three scans in a row find none (a process that was entering a
//!    namespace with `ip netns exec` is caught by the next scan);
//! 3. `SCRIPT stop NS` for every registered peer (removes the peer's pid
//!    files and run directories; the processes are dead already), each in
//!    a process group of its own, its output in memory (never a pipe a
//!    child it leaves could hold open), SIGKILL to that group when it ends
//!    or at its time limit (30 s, or the peer's own): no stop holds the
//!    watchdog up;
//! 4. the beds: every bed registered, and every bed whose record in
//!    [`crate::testbed::STATE_DIR`] names the parent as owner (so a bed
//!    still being built is found as well): namespaces deleted (which removes
//!    the veths and their XDP programs), record removed;
//! 5. 300 ms later a second sweep: processes that entered a bed's namespace
//!    meanwhile (found by the namespace inode, even after the namespace was
//!    unmounted) are killed, namespaces that reappeared (an orphaned `ip
//!    netns add`) are deleted.
//!
//! In the process that owns the guard, [`Guard::install`] routes the free
//! functions [`register_bed`], [`register_peer`], [`register_pid`],
//! [`register_group`] (and their `unregister_*`) to it; without an
//! installed guard they do nothing. [`crate::testbed::Testbed::up`]
//! registers every bed it claims, its teardown unregisters it.
//!
//! Children the parent runs in the root namespace should die with it:
//! [`die_with_parent`] sets PR_SET_PDEATHSIG=SIGKILL on a `Command`.

use std::fs;
use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// The hidden subcommand of the `linerate` binary that runs [`watchdog_main`].
pub const REAP_SUBCOMMAND: &str = "__reap";

type Tx = Arc<Mutex<Option<ChildStdin>>>;

/// The parent side of a watchdog; see the module documentation.
#[derive(Debug)]
pub struct Guard {
    tx: Tx,
    child: Option<Child>,
}

static INSTALLED: OnceLock<Mutex<Option<Tx>>> = OnceLock::new();

fn installed() -> &'static Mutex<Option<Tx>> {
    INSTALLED.get_or_init(|| Mutex::new(None))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Guard {
    /// Start the watchdog: `exe ARGS... --parent PID` (for linerate:
    /// `Guard::spawn(Path::new("/proc/self/exe"), &["__reap"])`, which
    /// works even when the binary was replaced or deleted since it
    /// started). Returns once the watchdog runs and has answered "ready"
    /// (so it ignores the signals already).
    pub fn spawn(exe: &Path, args: &[&str]) -> io::Result<Guard> {
        let mut cmd = Command::new(exe);
        if exe == Path::new("/proc/self/exe") {
            // argv[0] for ps: the binary's name, not /proc/self/exe.
            if let Ok(p) = std::env::current_exe() {
                cmd.arg0(p);
            }
        }
        cmd.args(args)
            .arg("--parent")
            .arg(std::process::id().to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        // SAFETY: setsid and signal are async-signal-safe; the closure runs
        // in the child between fork and exec. Ignored signals stay ignored
        // across exec, so the watchdog is immune from its first instruction.
        unsafe {
            cmd.pre_exec(|| {
                libc::setsid();
                for s in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGPIPE] {
                    libc::signal(s, libc::SIG_IGN);
                }
                Ok(())
            });
        }
        let mut child = cmd.spawn().map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot start the watchdog {}: {e}", exe.display()),
            )
        })?;
        let mut line = String::new();
        if let Some(out) = child.stdout.take() {
            let _ = BufReader::new(out).read_line(&mut line);
        }
        if line.trim() != "ready" {
            let _ = child.kill();
            let _ = child.wait();
            return Err(io::Error::other(format!(
                "the watchdog {} {} did not start (answered '{}')",
                exe.display(),
                args.join(" "),
                line.trim()
            )));
        }
        let tx = Arc::new(Mutex::new(child.stdin.take()));
        Ok(Guard {
            tx,
            child: Some(child),
        })
    }

    /// Pid of the watchdog process.
    pub fn watchdog_pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// Route the free `register_*` functions of this process to this guard.
    pub fn install(&self) {
        *lock(installed()) = Some(self.tx.clone());
    }

    fn send(&self, line: &str) {
        send_to(&self.tx, line);
    }

    pub fn register_bed(&self, name: &str) {
        self.send(&format!("bed {name}"));
    }
    pub fn unregister_bed(&self, name: &str) {
        self.send(&format!("unbed {name}"));
    }
    /// A peer started with `script start NS ...`; reaped with `script stop NS`.
    pub fn register_peer(&self, script: &Path, ns: &str) {
        self.send(&format!("peer {ns} {}", script.display()));
    }
    /// [`Guard::register_peer`] with a time limit of its own for the stop.
    pub fn register_peer_limit(&self, script: &Path, ns: &str, limit: Duration) {
        self.send(&peer_limit_line(script, ns, limit));
    }
    pub fn unregister_peer(&self, script: &Path, ns: &str) {
        self.send(&format!("unpeer {ns} {}", script.display()));
    }
    /// A child process (killed only while its start time matches).
    pub fn register_pid(&self, pid: u32) {
        if let Some(st) = start_time(pid) {
            self.send(&format!("pid {pid} {st}"));
        }
    }
    pub fn unregister_pid(&self, pid: u32) {
        self.send(&format!("unpid {pid}"));
    }
    /// A process group (e.g. a script started with `process_group(0)`).
    pub fn register_group(&self, pgid: u32) {
        self.send(&format!("group {pgid}"));
    }
    pub fn unregister_group(&self, pgid: u32) {
        self.send(&format!("ungroup {pgid}"));
    }

    /// Normal end: the parent removed everything itself. Tells the
    /// watchdog "done" and waits for it to exit.
    pub fn disarm(mut self) -> io::Result<()> {
        self.finish(true)
    }

    fn finish(&mut self, done: bool) -> io::Result<()> {
        let mut g = lock(&self.tx);
        if let Some(mut w) = g.take() {
            if done {
                let _ = w.write_all(b"done\n");
            }
            // Dropping `w` closes the pipe: end of file for the watchdog.
        }
        drop(g);
        let mut inst = lock(installed());
        if inst.as_ref().is_some_and(|t| Arc::ptr_eq(t, &self.tx)) {
            *inst = None;
        }
        drop(inst);
        if let Some(mut c) = self.child.take() {
            c.wait()?;
        }
        Ok(())
    }
}

impl Drop for Guard {
    /// Dropped without [`Guard::disarm`] (an error path): the pipe closes
    /// without "done", so the watchdog reaps whatever is left; waits for it.
    fn drop(&mut self) {
        let _ = self.finish(false);
    }
}

fn send_to(tx: &Tx, line: &str) {
    let mut g = lock(tx);
    if let Some(w) = g.as_mut() {
        // One write per line (< PIPE_BUF: atomic). A failed write means the
        // watchdog is gone; nothing better to do than go on.
        let mut b = Vec::with_capacity(line.len() + 1);
        b.extend_from_slice(line.as_bytes());
        b.push(b'\n');
        if w.write_all(&b).is_err() {
            *g = None;
        }
    }
}

fn send_installed(line: &str) {
    let tx = lock(installed()).clone();
    if let Some(tx) = tx {
        send_to(&tx, line);
    }
}

/// Register a test bed with this process's installed guard (no-op without one).
pub fn register_bed(name: &str) {
    send_installed(&format!("bed {name}"));
}
pub fn unregister_bed(name: &str) {
    send_installed(&format!("unbed {name}"));
}
/// Bed `name` is left up on purpose: the watchdog must not remove it.
pub fn keep_bed(name: &str) {
    send_installed(&format!("keep {name}"));
}
pub fn register_peer(script: &Path, ns: &str) {
    send_installed(&format!("peer {ns} {}", script.display()));
}
/// [`register_peer`] with a time limit of its own for the stop (whole
/// seconds, rounded up, 1 to 3600).
pub fn register_peer_limit(script: &Path, ns: &str, limit: Duration) {
    send_installed(&peer_limit_line(script, ns, limit));
}
pub fn unregister_peer(script: &Path, ns: &str) {
    send_installed(&format!("unpeer {ns} {}", script.display()));
}

pub(crate) fn peer_limit_line(script: &Path, ns: &str, limit: Duration) -> String {
    let s = limit.as_secs() + u64::from(limit.subsec_nanos() > 0);
    format!(
        "peerlimit {} {ns} {}",
        s.clamp(1, MAX_PEER_STOP_LIMIT),
        script.display()
    )
}
pub fn register_pid(pid: u32) {
    if let Some(st) = start_time(pid) {
        send_installed(&format!("pid {pid} {st}"));
    }
}
pub fn unregister_pid(pid: u32) {
    send_installed(&format!("unpid {pid}"));
}
pub fn register_group(pgid: u32) {
    send_installed(&format!("group {pgid}"));
}
pub fn unregister_group(pgid: u32) {
    send_installed(&format!("ungroup {pgid}"));
}

/// True when a guard is installed in this process.
pub fn is_installed() -> bool {
    lock(installed()).is_some()
}

/// Make the child of `cmd` receive SIGKILL when the thread that spawns it
/// ends (PR_SET_PDEATHSIG; for a synchronous `output()`/`wait()` that is
/// when the process dies). Use for short helpers run in the root namespace.
pub fn die_with_parent(cmd: &mut Command) -> &mut Command {
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: prctl and getppid are async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            // The parent may have died before prctl: then nobody signals us.
            if libc::getppid() != parent {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        })
    }
}

/// The longest limit a `peerlimit` record may give, in seconds.
pub(crate) const MAX_PEER_STOP_LIMIT: u64 = 3600;

/// Start time of process `pid` (clock ticks after boot, /proc/PID/stat field 22).
pub fn start_time(pid: u32) -> Option<u64> {
    let s = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // comm (field 2) may contain spaces and ')': fields 3.. follow the last ')'.
    let rest = &s[s.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_time_of_self() {
        let me = std::process::id();
        let a = start_time(me).unwrap();
        assert_eq!(start_time(me), Some(a));
        assert_eq!(start_time(u32::MAX), None);
    }
}
