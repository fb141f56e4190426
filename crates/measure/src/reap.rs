//! The watchdog's side of [`crate::guard`]: what the parent registered
//! ([`Registry`], read from the pipe by [`watchdog_main`]) and the reaping
//! when the parent is gone without saying "done" (processes, namespaces'
//! processes, peers' stops, beds; the order is in `guard.rs`).

use crate::guard::{start_time, MAX_PEER_STOP_LIMIT};
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What the parent registered.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Registry {
    pub beds: BTreeSet<String>,
    /// (namespace, script) -> the time limit of its stop
    pub peers: BTreeMap<(String, PathBuf), Duration>,
    /// pid -> start time
    pub pids: BTreeMap<u32, u64>,
    pub groups: BTreeSet<u32>,
    /// Beds detached on purpose ([`crate::testbed::Testbed::detach`]).
    pub kept: BTreeSet<String>,
    pub done: bool,
}

impl Registry {
    /// Apply one line of the protocol; malformed lines are ignored (and
    /// reported as false).
    pub fn apply(&mut self, line: &str) -> bool {
        let line = line.trim_end_matches(['\n', '\r']);
        let (verb, rest) = line.split_once(' ').unwrap_or((line, ""));
        // A process id fits pid_t: reap() casts it for kill(2), where a
        // larger number would name another process (or -1: every process).
        let num = |s: &str| {
            s.trim()
                .parse::<u32>()
                .ok()
                .filter(|&p| libc::pid_t::try_from(p).is_ok())
        };
        let peer = |s: &str| {
            let (ns, script) = s.split_once(' ')?;
            (!ns.is_empty() && !script.is_empty()).then(|| (ns.to_string(), PathBuf::from(script)))
        };
        match verb {
            "done" => self.done = true,
            "keep" if valid_bed_name(rest) => {
                self.beds.remove(rest);
                self.kept.insert(rest.to_string());
            }
            "bed" | "unbed" if valid_bed_name(rest) => {
                if verb == "bed" {
                    self.beds.insert(rest.to_string());
                } else {
                    self.beds.remove(rest);
                }
            }
            "peerlimit" => {
                let (secs, rest) = rest.split_once(' ').unwrap_or((rest, ""));
                match (secs.parse::<u64>(), peer(rest)) {
                    (Ok(s), Some(p)) if (1..=MAX_PEER_STOP_LIMIT).contains(&s) => {
                        self.peers.insert(p, Duration::from_secs(s));
                    }
                    _ => return false,
                }
            }
            "peer" | "unpeer" => match peer(rest) {
                Some(p) if verb == "peer" => {
                    self.peers.insert(p, PEER_STOP_LIMIT);
                }
                Some(p) => {
                    self.peers.remove(&p);
                }
                None => return false,
            },
            "pid" => {
                let mut it = rest.split_whitespace();
                match (
                    it.next().and_then(num),
                    it.next().and_then(|s| s.parse::<u64>().ok()),
                ) {
                    (Some(p), Some(st)) if p > 1 => {
                        self.pids.insert(p, st);
                    }
                    _ => return false,
                }
            }
            "unpid" => match num(rest) {
                Some(p) => {
                    self.pids.remove(&p);
                }
                None => return false,
            },
            "group" => match num(rest) {
                Some(p) if p > 1 => {
                    self.groups.insert(p);
                }
                _ => return false,
            },
            "ungroup" => match num(rest) {
                Some(p) => {
                    self.groups.remove(&p);
                }
                None => return false,
            },
            _ => return false,
        }
        true
    }

    pub fn is_empty(&self) -> bool {
        self.beds.is_empty()
            && self.peers.is_empty()
            && self.pids.is_empty()
            && self.groups.is_empty()
    }
}

fn valid_bed_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 24
        && n.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// The body of `linerate __reap --parent PID`: answers "ready" on stdout,
/// reads the registrations from stdin until end of file, then reaps unless
/// told "done". Returns the exit code.
pub fn watchdog_main(parent: u32) -> i32 {
    // Normally set by Guard::spawn before exec already; again for a watchdog
    // started some other way.
    // SAFETY: plain libc calls on this process.
    unsafe {
        libc::setsid();
        for s in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGPIPE] {
            libc::signal(s, libc::SIG_IGN);
        }
    }
    {
        let mut o = io::stdout().lock();
        let _ = o.write_all(b"ready\n");
        let _ = o.flush();
    }
    // Close stdout: nothing more is written there, and a parent reading it
    // must not wait for us.
    // SAFETY: fd 1 belongs to this process; /dev/null replaces it.
    unsafe {
        let fd = libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY);
        if fd >= 0 {
            libc::dup2(fd, 1);
            libc::close(fd);
        }
    }
    let reg = read_registry(io::stdin().lock());
    if reg.done {
        return 0;
    }
    let mut log = io::stderr();
    let r = reap(parent, &reg);
    if !r.is_quiet() {
        let _ = writeln!(log, "linerate: watchdog: process {parent} ended; {r}");
    }
    for e in &r.errors {
        let _ = writeln!(log, "linerate: watchdog: {e}");
    }
    if r.errors.is_empty() {
        0
    } else {
        1
    }
}

/// Read protocol lines until end of file (or "done").
pub fn read_registry(input: impl Read) -> Registry {
    let mut reg = Registry::default();
    let mut r = BufReader::new(input);
    let mut line = String::new();
    loop {
        line.clear();
        match r.read_line(&mut line) {
            Ok(0) => break,
            Ok(_) => {
                reg.apply(&line);
                if reg.done {
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            // Not UTF-8 or a read error: skip what we have, keep reading.
            Err(e) if e.kind() == io::ErrorKind::InvalidData => continue,
            Err(_) => break,
        }
    }
    reg
}

/// What a reap did.
#[derive(Debug, Default)]
pub struct ReapReport {
    pub beds: Vec<String>,
    pub killed: usize,
    pub peers_stopped: usize,
    pub errors: Vec<String>,
}

impl ReapReport {
    fn is_quiet(&self) -> bool {
        self.beds.is_empty() && self.killed == 0 && self.peers_stopped == 0
    }
}

impl std::fmt::Display for ReapReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "killed {} process(es), stopped {} peer(s), removed {} test bed(s){}{}",
            self.killed,
            self.peers_stopped,
            self.beds.len(),
            if self.beds.is_empty() { "" } else { ": " },
            self.beds.join(", ")
        )
    }
}

/// Remove everything `parent` registered in `reg` or recorded as its own.
pub fn reap(parent: u32, reg: &Registry) -> ReapReport {
    let mut rep = ReapReport::default();
    // 1. Registered processes and groups.
    for &g in &reg.groups {
        // SAFETY: signalling a process group.
        unsafe { libc::kill(-(g as libc::pid_t), libc::SIGKILL) };
    }
    for (&pid, &st) in &reg.pids {
        if start_time(pid) == Some(st) {
            // SAFETY: signalling a process whose identity was checked.
            if unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) } == 0 {
                rep.killed += 1;
            }
        }
    }
    // 2. Beds: registered ones and records owned by the parent.
    let mut beds: BTreeSet<String> = reg.beds.clone();
    for info in crate::testbed::list() {
        if info.owner_pid == parent {
            beds.insert(info.name.clone());
        }
    }
    beds.retain(|b| !reg.kept.contains(b));
    let ns_names: Vec<String> = beds
        .iter()
        .flat_map(|b| ["gen", "dut", "sink"].map(|r| format!("{b}-{r}")))
        .collect();
    // The namespaces are held open until the end: a namespace's inode
    // number is freed with the namespace, and the kernel gives it to the
    // next namespace made (anyone's), so the second sweep below must not
    // look for inode numbers of namespaces that no longer exist.
    let mut held: Vec<fs::File> = Vec::new();
    let mut inodes: BTreeSet<(u64, u64)> = BTreeSet::new();
    for ns in &ns_names {
        if let Some(id) = hold_ns(&Path::new("/run/netns").join(ns), &mut held) {
            inodes.insert(id);
        }
    }
    rep.killed += kill_in_netns(&inodes);
    // 3. Peers' own cleanup (pid files, run directories, XDP detach).
    for ((ns, script), &limit) in &reg.peers {
        match run_timeout(Command::new(script).arg("stop").arg(ns), limit) {
            Ok(()) => rep.peers_stopped += 1,
            Err(e) => rep
                .errors
                .push(format!("{} stop {ns}: {e}", script.display())),
        }
    }
    // A peer's stop may have started nothing, but make sure.
    rep.killed += kill_in_netns(&inodes);
    // 4. The beds themselves.
    for b in &beds {
        match remove_bed(b, parent, reg.beds.contains(b)) {
            Ok(true) => rep.beds.push(b.clone()),
            Ok(false) => {}
            Err(e) => rep.errors.push(e),
        }
    }
    remove_tmp_records(parent);
    // 5. Second sweep for late arrivals.
    if !beds.is_empty() {
        std::thread::sleep(Duration::from_millis(300));
        for ns in &ns_names {
            if let Some(id) = hold_ns(&Path::new("/run/netns").join(ns), &mut held) {
                inodes.insert(id);
            }
        }
        rep.killed += kill_in_netns(&inodes);
        for ns in &ns_names {
            if crate::testbed::netns_exists(ns) {
                if let Err(e) = netns_del(ns) {
                    rep.errors.push(e);
                }
            }
        }
    }
    drop(held);
    rep
}

/// How long a peer's `stop` may take (a `peer` record).
const PEER_STOP_LIMIT: Duration = Duration::from_secs(30);

/// Open the namespace file `p` (which keeps the namespace, and so its inode
/// number, alive while the file is in `held`); its (device, inode).
fn hold_ns(p: &Path, held: &mut Vec<fs::File>) -> Option<(u64, u64)> {
    let f = fs::File::open(p).ok()?;
    let m = f.metadata().ok()?;
    held.push(f);
    Some((m.dev(), m.ino()))
}

/// (device, inode) of a network namespace file (/run/netns/X or /proc/P/ns/net).
fn ns_id(p: &Path) -> Option<(u64, u64)> {
    fs::metadata(p).ok().map(|m| (m.dev(), m.ino()))
}

/// Pids of processes whose network namespace is one of `ids`.
pub fn pids_in_netns(ids: &BTreeSet<(u64, u64)>) -> Vec<u32> {
    let mut v = Vec::new();
    if ids.is_empty() {
        return v;
    }
    let me = std::process::id();
    let Ok(rd) = fs::read_dir("/proc") else {
        return v;
    };
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        // A zombie has no namespaces any more: the stat fails, skipped.
        if let Some(id) = ns_id(&e.path().join("ns/net")) {
            if ids.contains(&id) {
                v.push(pid);
            }
        }
    }
    v
}

/// SIGKILL every process in network namespace `ns` (/run/netns/NS) until
/// none is left (as in the watchdog's sweep); how many were signalled.
pub fn kill_netns_processes(ns: &str) -> usize {
    let mut held = Vec::new();
    match hold_ns(&Path::new("/run/netns").join(ns), &mut held) {
        Some(id) => kill_in_netns(&BTreeSet::from([id])),
        None => 0,
    }
}

/// SIGKILL every process in the namespaces until three scans in a row,
/// 30 ms apart, find none (at most ~5 s). Returns how many were signalled.
fn kill_in_netns(ids: &BTreeSet<(u64, u64)>) -> usize {
    let mut n = 0;
    let mut quiet = 0;
    let t = Instant::now();
    while quiet < 3 && t.elapsed() < Duration::from_secs(5) {
        let pids = pids_in_netns(ids);
        if pids.is_empty() {
            quiet += 1;
        } else {
            quiet = 0;
            for p in pids {
                // SAFETY: the process is in one of the namespaces being removed.
                if unsafe { libc::kill(p as libc::pid_t, libc::SIGKILL) } == 0 {
                    n += 1;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(30));
    }
    n
}

/// Remove bed `name`: by its record when there is one (and it is the
/// parent's, or the parent registered the name), else its namespaces by
/// name. Ok(true) when something was removed.
fn remove_bed(name: &str, parent: u32, registered: bool) -> Result<bool, String> {
    let nss = ["gen", "dut", "sink"].map(|r| format!("{name}-{r}"));
    let mut did = false;
    match crate::testbed::load(name) {
        Ok(info) if info.owner_pid == parent || registered => {
            crate::testbed::down_by_name(name).map_err(|e| e.to_string())?;
            did = true;
        }
        // Another process's bed under that name now: not ours to remove.
        Ok(_) => return Ok(false),
        Err(_) => {}
    }
    for ns in &nss {
        if crate::testbed::netns_exists(ns) {
            netns_del(ns)?;
            did = true;
        }
    }
    Ok(did)
}

fn netns_del(ns: &str) -> Result<(), String> {
    let out = Command::new("ip")
        .args(["netns", "del", ns])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run 'ip netns del {ns}': {e}"))?;
    if !out.status.success() && crate::testbed::netns_exists(ns) {
        return Err(format!(
            "'ip netns del {ns}' failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}

/// Temporary record files a write by `parent` left (NAME.json.tmpPID).
fn remove_tmp_records(parent: u32) {
    let suffix = format!(".json.tmp{parent}");
    let Ok(rd) = fs::read_dir(crate::testbed::STATE_DIR) else {
        return;
    };
    for e in rd.flatten() {
        if e.file_name().to_string_lossy().ends_with(&suffix) {
            let _ = fs::remove_file(e.path());
        }
    }
}

/// Run a command with a time limit, in a process group of its own that is
/// killed when it ends or at the limit (crate::pgroup); stdout and stderr
/// in memory, the last line in the error.
fn run_timeout(cmd: &mut Command, limit: Duration) -> Result<(), String> {
    use crate::pgroup::{last_line, output_bounded, Ended};
    match output_bounded(cmd, limit).map_err(|e| e.to_string())? {
        (Ended::Exited(st), _) if st.success() => Ok(()),
        (Ended::Exited(st), lines) => Err(format!("ended with {st}: {}", last_line(&lines))),
        (Ended::TimedOut, _) => Err(format!(
            "still running after {} s, its process group killed",
            limit.as_secs()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guard::peer_limit_line;

    #[test]
    fn protocol() {
        let mut r = Registry::default();
        assert!(r.apply("bed lr1a\n"));
        assert!(r.apply("bed lr1b"));
        assert!(r.apply("unbed lr1a"));
        assert!(r.apply("peer lr1b-dut /x/scripts/peers/dut ovs.sh\n"));
        assert!(r.apply("pid 1234 5678"));
        assert!(r.apply("group 99"));
        assert!(r.apply("pid 77 1"));
        assert!(r.apply("unpid 77"));
        assert!(!r.apply("bed ../etc"));
        assert!(!r.apply("bed "));
        assert!(!r.apply("pid 1 5"));
        assert!(!r.apply("pid x 5"));
        assert!(!r.apply("peer onlyns"));
        assert!(!r.apply("rm -rf /"));
        assert!(!r.apply(""));
        assert_eq!(r.beds.iter().collect::<Vec<_>>(), ["lr1b"]);
        assert_eq!(
            r.peers.iter().next().unwrap(),
            (
                &(
                    "lr1b-dut".to_string(),
                    PathBuf::from("/x/scripts/peers/dut ovs.sh")
                ),
                &PEER_STOP_LIMIT
            )
        );
        assert_eq!(r.pids.get(&1234), Some(&5678));
        assert!(!r.pids.contains_key(&77));
        assert!(r.groups.contains(&99));
        assert!(!r.done);
        assert!(r.apply("unpeer lr1b-dut /x/scripts/peers/dut ovs.sh"));
        assert!(r.peers.is_empty());
        assert!(r.apply("peerlimit 2 lr1b-dut /run/x y.sh"));
        let key = ("lr1b-dut".to_string(), PathBuf::from("/run/x y.sh"));
        assert_eq!(r.peers.get(&key), Some(&Duration::from_secs(2)));
        for bad in [
            "peerlimit 0 n /s",
            "peerlimit 3601 n /s",
            "peerlimit x n /s",
            "peerlimit 5 n",
        ] {
            assert!(!r.apply(bad), "{bad}");
        }
        assert_eq!(
            peer_limit_line(Path::new("/s"), "n", Duration::from_millis(1500)),
            "peerlimit 2 n /s"
        );
        assert!(r.apply("unpeer lr1b-dut /run/x y.sh"));
        assert!(r.peers.is_empty());
        assert!(r.apply("keep lr1b"));
        assert!(r.beds.is_empty() && r.kept.contains("lr1b"));
        let r2 = read_registry(&b"bed a\ngroup 5\ndone\nbed b\n"[..]);
        assert!(r2.done);
        assert!(!r2.beds.contains("b"), "nothing after done is read");
        let r3 = read_registry(&b"bed a\n\xff\xfe\nbed c"[..]);
        assert!(!r3.done);
        assert_eq!(r3.beds.len(), 2);
    }

    #[test]
    fn pids_beyond_pid_t_are_refused() {
        // Found by fuzzing: "group 4294967295" was kept, and reap() would
        // have sent SIGKILL to -(-1) = process 1 (2147483648: an overflow).
        let mut r = Registry::default();
        for line in [
            "group 4294967295",
            "group 2147483648",
            "pid 4294967295 1",
            "pid 2147483648 1",
        ] {
            assert!(!r.apply(line), "{line}");
        }
        assert!(r.is_empty(), "{r:?}");
        assert!(r.apply("group 2147483647") && r.apply("pid 2147483647 1"));
    }

    #[test]
    fn netns_scan_finds_self_namespace_peers() {
        // The root namespace holds at least init (pid 1) besides us.
        let id = ns_id(Path::new("/proc/self/ns/net")).unwrap();
        let pids = pids_in_netns(&BTreeSet::from([id]));
        assert!(!pids.contains(&std::process::id()));
        assert!(pids_in_netns(&BTreeSet::new()).is_empty());
    }

    /// A peer's stop that hangs, or that ends but leaves a child holding
    /// its output open, holds the watchdog up no longer than its limit,
    /// and what it started dies with its process group.
    #[test]
    fn a_hanging_or_lingering_stop_does_not_hold_up_the_watchdog() {
        let dir = std::env::temp_dir().join(format!("lr-guard-stop-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        // Each script's children are `sleep` with a number of its own, found
        // afterwards in /proc.
        let secs = format!("{}.{}", 900 + std::process::id() % 97, std::process::id());
        let script = |name: &str, body: &str| {
            use std::os::unix::fs::PermissionsExt;
            let p = dir.join(name);
            fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
            fs::set_permissions(&p, fs::Permissions::from_mode(0o700)).unwrap();
            p
        };
        let hangs = script("hangs", &format!("sleep {secs} & sleep {secs}"));
        let lingers = script(
            "lingers",
            &format!("sleep {secs} & echo stopped $2 >&2; exit 1"),
        );
        let mut reg = Registry::default();
        assert!(reg.apply(&peer_limit_line(&hangs, "lrx-dut", Duration::from_secs(1))));
        assert!(reg.apply(&format!("peer lrx-dut {}", lingers.display())));
        let t = Instant::now();
        let r = reap(u32::MAX - 1, &reg);
        let took = t.elapsed();
        let sleeping = || -> Vec<u32> {
            let want = format!("sleep\0{secs}\0");
            fs::read_dir("/proc")
                .unwrap()
                .flatten()
                .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
                .filter(|p| {
                    fs::read(format!("/proc/{p}/cmdline")).is_ok_and(|c| c == want.as_bytes())
                })
                .collect()
        };
        let left = sleeping();
        let _ = fs::remove_dir_all(&dir);
        assert!(took < Duration::from_secs(10), "reap took {took:?}: {r:?}");
        assert_eq!(r.errors.len(), 2, "{r:?}");
        let e = r.errors.join(" | ");
        assert!(
            e.contains("still running after 1 s, its process group killed"),
            "{e}"
        );
        assert!(
            e.contains("ended with exit status: 1: stopped lrx-dut"),
            "{e}"
        );
        assert!(left.is_empty(), "their children live on: {left:?}");
    }

    #[test]
    fn reap_of_nothing_is_quiet() {
        // A parent pid that owns no record: nothing is touched.
        let r = reap(u32::MAX - 1, &Registry::default());
        assert!(r.is_quiet(), "{r}");
        assert!(r.errors.is_empty());
    }
}
