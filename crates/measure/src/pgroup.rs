//! A command run as a process group of its own, bounded in time, its
//! output in a file: how the bench runs a DuT's commands and the watchdog
//! a peer's `stop`.
//!
//! Waiting for end of file on a command's pipes waits for every process
//! that inherited them: `start = "my-fwd &"` leaves one behind, and so
//! would wait forever. So the output goes to a file (nobody waits on a
//! file), the wait is for the group's leader only, with a time limit, and
//! killing means SIGKILL to the whole group: the shell and everything it
//! started that stayed in its group.
//!
//! The leader is not reaped until the group is killed: a zombie keeps its
//! pid, so the group's number cannot be handed to another process meanwhile
//! and a late `kill(-pgid)` cannot hit a stranger's group.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How often a wait looks at the leader.
const POLL: Duration = Duration::from_millis(10);

/// A process group started by [`Group::spawn`]; killed (SIGKILL to the
/// whole group) and its leader reaped when dropped.
#[derive(Debug)]
pub struct Group {
    child: Option<Child>,
    pgid: libc::pid_t,
}

impl Group {
    /// Start `cmd` as the leader of a new process group, stdin from
    /// /dev/null, stdout to `out` and stderr to `err` (files, never pipes:
    /// see the module documentation). The group is registered with the
    /// installed watchdog ([`crate::guard`]) until it is killed.
    pub fn spawn(cmd: &mut Command, out: &File, err: &File) -> io::Result<Group> {
        Self::spawn_with_stdin(cmd, Stdio::null(), out, err)
    }

    /// [`Group::spawn`] with `stdin` as the leader's standard input (a
    /// pipe: take it with [`Group::stdin`]).
    pub fn spawn_with_stdin(
        cmd: &mut Command,
        stdin: Stdio,
        out: &File,
        err: &File,
    ) -> io::Result<Group> {
        let child = cmd
            .process_group(0)
            .stdin(stdin)
            .stdout(out.try_clone()?)
            .stderr(err.try_clone()?)
            .spawn()?;
        let pgid = child.id() as libc::pid_t;
        crate::guard::register_group(pgid as u32);
        Ok(Group {
            child: Some(child),
            pgid,
        })
    }

    /// The leader's standard input, when it was spawned with a pipe (once).
    pub fn stdin(&mut self) -> Option<std::process::ChildStdin> {
        self.child.as_mut()?.stdin.take()
    }

    /// The group's number (its leader's pid).
    pub fn pgid(&self) -> u32 {
        self.pgid as u32
    }

    /// The leader's exit status once it has exited. The leader stays a
    /// zombie (WNOWAIT) until the group is killed.
    pub fn exited(&self) -> Option<ExitStatus> {
        self.child.as_ref()?;
        // SAFETY: an all-zero siginfo_t is valid; waitid fills it in.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waiting for our own child without reaping it.
        let r = unsafe {
            libc::waitid(
                libc::P_PID,
                self.pgid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            )
        };
        // SAFETY: reading the fields waitid filled in for a child's exit.
        let (pid, status) = unsafe { (info.si_pid(), info.si_status()) };
        if r != 0 || pid == 0 {
            return None;
        }
        // The raw wait(2) status: the exit code in the second byte, or the
        // signal in the first.
        Some(ExitStatus::from_raw(if info.si_code == libc::CLD_EXITED {
            (status & 0xff) << 8
        } else {
            status & 0x7f
        }))
    }

    /// Wait for the leader's exit, at most `limit`; None at the limit.
    pub fn wait_for(&self, limit: Duration) -> Option<ExitStatus> {
        let t = Instant::now();
        loop {
            if let Some(s) = self.exited() {
                return Some(s);
            }
            if t.elapsed() >= limit {
                return None;
            }
            std::thread::sleep(POLL.min(limit.saturating_sub(t.elapsed())));
        }
    }

    /// Send `sig` to every process in the group.
    pub fn signal(&self, sig: libc::c_int) {
        if self.child.is_some() {
            // SAFETY: the group is ours: its leader is not reaped yet.
            unsafe { libc::kill(-self.pgid, sig) };
        }
    }

    /// SIGKILL to every process in the group, then reap the leader.
    pub fn kill(&mut self) {
        self.signal(libc::SIGKILL);
        if let Some(mut c) = self.child.take() {
            let _ = c.wait();
            crate::guard::unregister_group(self.pgid as u32);
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.kill();
    }
}

/// At most this much of a log is read back.
pub const TAIL_BYTES: u64 = 64 * 1024;

/// The lines of `f` after byte `from`, at most its last [`TAIL_BYTES`]
/// (a line cut by that is left out).
pub fn tail_lines(f: &mut File, from: u64) -> Vec<String> {
    let Ok(len) = f.seek(SeekFrom::End(0)) else {
        return Vec::new();
    };
    let start = from.max(len.saturating_sub(TAIL_BYTES));
    let mut b = Vec::new();
    if f.seek(SeekFrom::Start(start)).is_err() || f.take(TAIL_BYTES).read_to_end(&mut b).is_err() {
        return Vec::new();
    }
    let text = String::from_utf8_lossy(&b);
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    if start > from && !lines.is_empty() {
        lines.remove(0);
    }
    lines
}

/// The last line of `lines` that is not blank, trimmed ("" if none).
pub fn last_line(lines: &[String]) -> String {
    lines
        .iter()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map_or_else(String::new, |l| l.trim().to_string())
}

/// An anonymous file in memory (memfd), for the output of a command
/// nobody keeps a log of.
pub fn scratch_file() -> io::Result<File> {
    use std::os::fd::FromRawFd;
    // SAFETY: a valid C string; the fd returned is ours to own.
    let fd = unsafe { libc::memfd_create(c"linerate-output".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a freshly created descriptor nothing else owns.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// How a command run by [`run_bounded`] ended.
#[derive(Debug)]
pub enum Ended {
    Exited(ExitStatus),
    /// Still running at the limit: its group was killed.
    TimedOut,
}

/// Run `cmd` to its end as a [`Group`] with its output in `out`, at most
/// `limit`; its whole group is killed afterwards (whatever it left behind
/// in it), and at the limit.
pub fn run_bounded(cmd: &mut Command, out: &File, limit: Duration) -> io::Result<Ended> {
    let mut g = Group::spawn(cmd, out, out)?;
    let r = g.wait_for(limit);
    g.kill();
    Ok(r.map_or(Ended::TimedOut, Ended::Exited))
}

/// [`run_bounded`] with the output in memory: how it ended and the lines
/// it wrote (stdout and stderr, at most their last [`TAIL_BYTES`]).
pub fn output_bounded(cmd: &mut Command, limit: Duration) -> io::Result<(Ended, Vec<String>)> {
    let mut out = scratch_file()?;
    let ended = run_bounded(cmd, &out, limit)?;
    Ok((ended, tail_lines(&mut out, 0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Command {
        let mut c = Command::new("sh");
        c.args(["-c", script]);
        c
    }

    fn alive(pid: u32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            s.rsplit(')')
                .next()
                .is_some_and(|r| !r.trim_start().starts_with('Z'))
        })
    }

    /// A background child keeping the output open does not hold up the
    /// wait, and dies with the group.
    #[test]
    fn a_background_child_neither_holds_up_nor_survives() {
        let mut out = scratch_file().unwrap();
        let t = Instant::now();
        let mut g = Group::spawn(&mut sh("sleep 30 & echo $!; echo done"), &out, &out).unwrap();
        let st = g
            .wait_for(Duration::from_secs(10))
            .expect("the shell exits");
        assert!(st.success(), "{st}");
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        let lines = tail_lines(&mut out, 0);
        assert_eq!(lines.last().map(String::as_str), Some("done"), "{lines:?}");
        let bg: u32 = lines[0].parse().unwrap();
        assert!(alive(bg), "the background child runs on in the group");
        g.kill();
        let t = Instant::now();
        while alive(bg) {
            assert!(
                t.elapsed() < Duration::from_secs(5),
                "{bg} outlived its group"
            );
            std::thread::sleep(POLL);
        }
    }

    #[test]
    fn the_limit_kills_the_group_and_statuses_read_right() {
        let out = scratch_file().unwrap();
        let t = Instant::now();
        let r = run_bounded(&mut sh("sleep 30"), &out, Duration::from_millis(200)).unwrap();
        assert!(matches!(r, Ended::TimedOut), "{r:?}");
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        match run_bounded(&mut sh("exit 3"), &out, Duration::from_secs(10)).unwrap() {
            Ended::Exited(s) => assert_eq!(s.code(), Some(3)),
            e => panic!("{e:?}"),
        }
        match run_bounded(&mut sh("kill -9 $$"), &out, Duration::from_secs(10)).unwrap() {
            Ended::Exited(s) => assert_eq!(s.signal(), Some(libc::SIGKILL)),
            e => panic!("{e:?}"),
        }
    }

    #[test]
    fn tails_are_bounded_and_start_at_the_offset() {
        use std::io::Write;
        let mut f = scratch_file().unwrap();
        writeln!(f, "old\nolder").unwrap();
        let from = f.stream_position().unwrap();
        write!(f, "new\n\n").unwrap();
        let l = tail_lines(&mut f, from);
        assert_eq!(l, ["new", ""]);
        assert_eq!(last_line(&l), "new");
        let big = "x".repeat(100) + "\n";
        for _ in 0..2000 {
            f.write_all(big.as_bytes()).unwrap();
        }
        let l = tail_lines(&mut f, 0);
        assert!(
            l.len() < 700 && l.iter().all(|x| x.len() == 100),
            "{}",
            l.len()
        );
    }
}
