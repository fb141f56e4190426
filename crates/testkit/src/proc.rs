//! Child processes: [`Proc`] owns one, killed and reaped when it is dropped
//! (a test's panic or a study's early return included), so no process of a
//! test or a study outlives it. Commands run in a network namespace with
//! [`in_ns`]; output is read line by line by threads of their own
//! ([`Proc::stdout_lines`], [`lines_of`]) so a test or a study can wait for
//! a line with a deadline and a long run never fills its pipes; readiness
//! is waited for with [`Proc::wait_ready`] (an exit first is an error with
//! the child's standard error) and probed from /proc
//! ([`running_packet_sockets`], [`has_capture_fd`]).
//!
//! The studies (shipped code) use [`Proc::spawn`], [`Proc::wait_ready`],
//! [`Proc::finish`], [`Proc::wait`], [`Proc::output`], the line readers and
//! the /proc probes: these return `Result` (or a plain value) and never
//! panic. The methods and functions marked test-only ([`Proc::wait_output`],
//! [`Proc::assert_running`], [`Proc::wait_json`], [`wait_packet_sockets_of`],
//! [`wait_xdp`], [`run_cmd`], ...) panic with the child's standard error or
//! the command's: that is how a test fails.

use crate::need::require_tool;
use crate::wait::wait_until;
use serde_json::Value;
use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{
    Child, ChildStderr, ChildStdin, ChildStdout, Command, ExitStatus, Output, Stdio,
};
use std::sync::mpsc::Receiver;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A child process, killed and reaped on drop (test failure and early
/// return included). `what` names it in errors.
pub struct Proc {
    child: Option<Child>,
    what: String,
    /// With [`Proc::keep_stderr_tail`]: the thread reading its standard
    /// error, which returns the last lines at its end.
    err_thread: Option<JoinHandle<String>>,
}

impl From<Child> for Proc {
    /// Own a child spawned elsewhere (named "child process" in errors).
    fn from(c: Child) -> Proc {
        Proc::new(c, "child process")
    }
}

impl Proc {
    /// Own the spawned child `c`; `what` names it in errors.
    pub fn new(c: Child, what: &str) -> Proc {
        Proc {
            child: Some(c),
            what: what.to_string(),
            err_thread: None,
        }
    }

    /// Start `cmd` with its standard output and error piped (`what` names
    /// it in errors). Never panics.
    pub fn spawn(cmd: &mut Command, what: &str) -> Result<Proc, String> {
        let c = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("{what}: {e}"))?;
        Ok(Proc::new(c, what))
    }

    /// Its process id (0 once it has been given up by [`Proc::take_child`]
    /// or a consuming method).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, |c| c.id())
    }

    /// The child itself, while this owns it.
    pub fn child_mut(&mut self) -> Option<&mut Child> {
        self.child.as_mut()
    }

    /// Give the child up: it is no longer killed on drop.
    pub fn take_child(&mut self) -> Option<Child> {
        self.child.take()
    }

    /// Send signal `sig` to it (nothing once it has been given up, so never
    /// a signal to pid 0).
    pub fn signal(&self, sig: i32) {
        let pid = self.pid();
        if pid != 0 {
            // SAFETY: kill(2) on our own child, not yet reaped (its pid is
            // still ours; `ip netns exec` execs the command in place).
            unsafe { libc::kill(pid as i32, sig) };
        }
    }

    /// SIGINT (linerate's commands then print their final report).
    pub fn interrupt(&self) {
        self.signal(libc::SIGINT);
    }

    /// Whether it has ended (by itself or killed), or was given up.
    pub fn exited(&mut self) -> bool {
        self.child
            .as_mut()
            .is_none_or(|c| c.try_wait().ok().flatten().is_some())
    }

    /// Wait until `ready(pid)` holds (at most `limit`, polling every 20
    /// ms); an exit before that is an error with the child's standard
    /// error, and so is the limit passing. Never panics.
    pub fn wait_ready(
        &mut self,
        limit: Duration,
        ready: impl Fn(u32) -> bool,
    ) -> Result<(), String> {
        let t0 = Instant::now();
        let c = self.child.as_mut().ok_or("no process")?;
        while !ready(c.id()) {
            if let Ok(Some(st)) = c.try_wait() {
                let mut e = String::new();
                if let Some(mut s) = c.stderr.take() {
                    let _ = s.read_to_string(&mut e);
                }
                // Its standard error may be read by a thread already.
                if let Some(t) = self.err_thread.take() {
                    e = t.join().unwrap_or_default();
                }
                return Err(format!("{} ended early ({st}): {}", self.what, e.trim()));
            }
            if t0.elapsed() > limit {
                return Err(format!(
                    "{}: not ready after {} s",
                    self.what,
                    limit.as_secs()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    /// Its standard output and error, for the caller to read as it runs.
    pub fn take_pipes(&mut self) -> (Option<ChildStdout>, Option<ChildStderr>) {
        self.child
            .as_mut()
            .map_or((None, None), |c| (c.stdout.take(), c.stderr.take()))
    }

    /// Its standard input, if the command was given a piped one.
    pub fn stdin(&mut self) -> Option<ChildStdin> {
        self.child.as_mut().and_then(|c| c.stdin.take())
    }

    /// Its standard output line by line, read by a thread from now on (the
    /// receiver ends with the stream; at once if stdout is not piped or
    /// taken already). [`Proc::finish`] then returns no standard output.
    pub fn stdout_lines(&mut self) -> Receiver<String> {
        match self.child.as_mut().and_then(|c| c.stdout.take()) {
            Some(o) => lines_of(o),
            None => std::sync::mpsc::channel().1,
        }
    }

    /// [`Proc::stdout_lines`] for its standard error.
    pub fn stderr_lines(&mut self) -> Receiver<String> {
        match self.child.as_mut().and_then(|c| c.stderr.take()) {
            Some(e) => lines_of(e),
            None => std::sync::mpsc::channel().1,
        }
    }

    /// Read its standard error by a thread from now on, keeping the last 20
    /// lines for [`Proc::finish`], [`Proc::stderr_tail`],
    /// [`Proc::wait_ready`] and the test-only reports (a long run's
    /// standard error would otherwise fill the pipe and stop it).
    pub fn keep_stderr_tail(&mut self) {
        if let Some(e) = self.child.as_mut().and_then(|c| c.stderr.take()) {
            self.err_thread = Some(std::thread::spawn(move || {
                let mut tail = std::collections::VecDeque::new();
                for l in BufReader::new(e).lines().map_while(Result::ok) {
                    if tail.len() == 20 {
                        tail.pop_front();
                    }
                    tail.push_back(l);
                }
                Vec::from(tail).join("\n")
            }));
        }
    }

    /// The last lines of its standard error, once it has ended (for the
    /// message of a child that died): the last two, joined by " / ".
    pub fn stderr_tail(&mut self) -> String {
        let mut e = String::new();
        if let Some(mut s) = self.child.as_mut().and_then(|c| c.stderr.take()) {
            let _ = s.read_to_string(&mut e);
        }
        if let Some(t) = self.err_thread.take() {
            e = t.join().unwrap_or_default();
        }
        let l: Vec<&str> = e.trim().lines().collect();
        l[l.len().saturating_sub(2)..].join(" / ")
    }

    /// Wait for it to end by itself; its exit status.
    pub fn wait(mut self) -> Result<ExitStatus, String> {
        let mut c = self.child.take().ok_or("no process")?;
        c.wait().map_err(|e| format!("{}: {e}", self.what))
    }

    /// SIGINT, then (stdout, stderr) once it ended; one that has not ended
    /// 20 s later is killed (its output then is what it wrote so far).
    pub fn finish(mut self) -> Result<(String, String), String> {
        let mut c = self.child.take().ok_or("no process")?;
        // SAFETY: kill(2) on our own child, not yet reaped (so its pid is
        // still ours).
        unsafe {
            libc::kill(c.id() as i32, libc::SIGINT);
        }
        let t0 = Instant::now();
        while c.try_wait().ok().flatten().is_none() {
            if t0.elapsed() > Duration::from_secs(20) {
                let _ = c.kill();
                let _ = c.wait();
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let (mut out, mut err) = (String::new(), String::new());
        if let Some(mut o) = c.stdout.take() {
            let _ = o.read_to_string(&mut out);
        }
        if let Some(mut e) = c.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        if let Some(t) = self.err_thread.take() {
            err = t.join().unwrap_or_default();
        }
        Ok((out, err))
    }

    /// Wait for it to end by itself: (exit status, stdout, stderr).
    pub fn output(mut self) -> Result<(ExitStatus, String, String), String> {
        let c = self.child.take().ok_or("no process")?;
        let o = c
            .wait_with_output()
            .map_err(|e| format!("{}: {e}", self.what))?;
        Ok((
            o.status,
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        ))
    }

    /// Its whole output once ended, the kept tail of its standard error in
    /// place of the standard error a thread took.
    fn collect(&mut self, c: Child) -> std::io::Result<Output> {
        let mut out = c.wait_with_output()?;
        if let Some(t) = self.err_thread.take() {
            if out.stderr.is_empty() {
                out.stderr = t.join().unwrap_or_default().into_bytes();
            }
        }
        Ok(out)
    }

    /// Test-only: wait up to `t` for the exit; kill it after that and
    /// panic with its standard error.
    pub fn wait_output(mut self, t: Duration, what: &str) -> Output {
        let mut c = self.child.take().expect("the process was given up");
        let start = Instant::now();
        while c.try_wait().unwrap().is_none() {
            if start.elapsed() > t {
                let _ = c.kill();
                let out = self.collect(c).unwrap();
                panic!(
                    "{what} did not end within {t:?}; stderr: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.collect(c).unwrap()
    }

    /// Test-only: wait up to `t` for the exit, which must be a success; the
    /// last JSON line of its stdout ([`last_json`]).
    pub fn wait_json(self, t: Duration, what: &str) -> Value {
        let out = self.wait_output(t, what);
        assert_ok(&out, what);
        last_json(&String::from_utf8_lossy(&out.stdout))
    }

    /// Test-only: SIGINT, then [`Proc::wait_json`].
    pub fn finish_json(self, t: Duration, what: &str) -> Value {
        self.interrupt();
        self.wait_json(t, what)
    }

    /// Test-only: panic with its standard error if it has exited.
    pub fn assert_running(&mut self, what: &str) {
        let c = self.child.as_mut().expect("the process was given up");
        if let Some(st) = c.try_wait().unwrap() {
            let c = self.child.take().unwrap();
            let out = self.collect(c).unwrap();
            panic!(
                "{what} exited early ({st}): {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(c) = self.child.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The lines of `r`, read by a thread of their own; the receiver ends with
/// the stream (or at the first line that is not UTF-8).
pub fn lines_of(r: impl Read + Send + 'static) -> Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(r).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    rx
}

/// `cmd` run in network namespace `ns` (`ip netns exec`, which execs it:
/// the child's pid is the command's).
pub fn in_ns<S: AsRef<OsStr>>(ns: &str, cmd: &[S]) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns]).args(cmd);
    c
}

/// Packet sockets bound to an interface and running in the network
/// namespace of process `pid` (/proc/PID/net/packet), once the process runs
/// `exe` (so `ip netns exec` has entered the namespace and exec'd it);
/// 0 before, and for a process that is gone. From then on the sockets'
/// rings keep every frame that arrives until the process reads it.
pub fn running_packet_sockets(pid: u32, exe: &Path) -> usize {
    let exe = exe.canonicalize().unwrap_or_else(|_| exe.to_path_buf());
    if !std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|e| e == exe) {
        return 0;
    }
    std::fs::read_to_string(format!("/proc/{pid}/net/packet"))
        .unwrap_or_default()
        .lines()
        .skip(1)
        .filter(|l| {
            // sk RefCnt Type Proto Iface R Rmem User Inode
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() > 5 && f[4] != "0" && f[5] == "1"
        })
        .count()
}

/// Whether process `pid` holds a socket or a BPF link (it has opened what
/// it captures with); false for a process that is gone.
pub fn has_capture_fd(pid: u32) -> bool {
    std::fs::read_dir(format!("/proc/{pid}/fd")).is_ok_and(|d| {
        d.flatten().any(|e| {
            std::fs::read_link(e.path()).is_ok_and(|t| {
                let t = t.to_string_lossy();
                t.starts_with("socket:") || t.contains("bpf-link") || t.contains("bpf-prog")
            })
        })
    })
}

/// Test-only: wait (up to 20 s) until process `p` runs program `exe`
/// (exec done, so it is in its namespace) and has `n` packet sockets bound
/// and running there ([`running_packet_sockets`]; /proc/PID/net/packet
/// lists the sockets of the process's namespace, which only this bed's
/// processes use). Panics with its standard error if it exits meanwhile.
pub fn wait_packet_sockets_of(p: &mut Proc, exe: &Path, n: usize, what: &str) {
    let exe = exe.canonicalize().unwrap_or_else(|_| exe.to_path_buf());
    wait_until(
        Duration::from_secs(20),
        &format!("{what}: {n} running packet sockets"),
        || {
            p.assert_running(what);
            running_packet_sockets(p.pid(), &exe) >= n
        },
    );
}

/// Test-only: wait (up to 20 s) until `ifname` in namespace `ns` has an XDP
/// program attached (by process `p`, which must not exit meanwhile). An
/// in-kernel counter (`count --xdp`) counts from then on.
pub fn wait_xdp(p: &mut Proc, ns: &str, ifname: &str, what: &str) {
    wait_until(
        Duration::from_secs(20),
        &format!("{what}: an XDP program on {ifname}"),
        || {
            p.assert_running(what);
            let out = Command::new("ip")
                .args(["-n", ns, "link", "show", "dev", ifname])
                .output()
                .expect("ip link");
            String::from_utf8_lossy(&out.stdout).contains("prog/xdp")
        },
    );
}

/// Test-only: run a command (no shell) that must succeed; its stdout.
/// Panics with its standard error if it fails, naming the tool and its
/// Debian package when it is not installed.
pub fn run_cmd(args: &[&str]) -> String {
    require_tool(args[0]);
    let o = Command::new(args[0])
        .args(&args[1..])
        .output()
        .unwrap_or_else(|e| panic!("cannot run {args:?}: {e}"));
    assert!(
        o.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&o.stderr).trim()
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Test-only: a finished process, which must have succeeded (else panic
/// with its standard error).
pub fn assert_ok(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what}: {}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Test-only: the last JSON object line (starting with `{`) of a command's
/// stdout; panics if there is none or it does not parse.
pub fn last_json(stdout: &str) -> Value {
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .unwrap_or_else(|| panic!("no JSON line in: {stdout}"));
    serde_json::from_str(line).unwrap()
}
