//! Killing `linerate bench` at any moment leaves nothing behind: no network
//! namespace, no veth, no XDP program, no process, no peer state file.
//! SIGKILL cannot be caught: the watchdog (`linerate __reap`, see
//! `linerate_measure::guard`) cleans up; SIGTERM/SIGINT are handled by the
//! bench itself.
//!
//! Needs root, bpftool, DPDK's testpmd and Open vSwitch (scripts/setup.sh
//! installs them; the tests fail without). Each scenario sends its signal
//! once the bench is in the phase it is about (seen in its progress lines
//! and processes) and proves afterwards that it still was: a SIGKILLed
//! bench's log ends in that phase, a handled signal marks the DuT that was
//! running "interrupted" (a second SIGTERM: exit status 130). While a run
//! goes, the test samples what the run made: processes (descendants of the
//! bench, its watchdog and everything in its namespaces, with their start
//! times), BPF programs they hold (/proc/PID/fdinfo) and XDP programs
//! attached in its namespaces.
//! After the kill, every one of those must disappear; also no namespace,
//! record or root-namespace interface with the run's names may remain, and
//! no XDP program may appear that nobody holds or has attached (a leaked
//! namespace would keep one). Sampling instead of a global before/after
//! comparison keeps the test correct while other programs load XDP
//! programs or run `linerate` on the same machine.

use linerate_measure::testbed;
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod support;
use support::{netns_with, require_root, require_tool, require_tools, TempDir};

const BIN: &str = env!("CARGO_BIN_EXE_linerate");
/// How long cleanup may take after the kill.
const CLEANUP_LIMIT: Duration = Duration::from_secs(15);

/// The two tests run one at a time: a watchdog's second sweep kills the
/// processes in namespaces with the inode numbers of the beds it removed,
/// and the kernel hands those numbers to the next namespaces made (the
/// other test's), whose `ip netns add` it then kills.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

// ------------------------------------------------------------ /proc

#[derive(Clone, Copy)]
struct Stat {
    ppid: u32,
    start: u64,
    zombie: bool,
}

fn stat(pid: u32) -> Option<Stat> {
    let s = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let f: Vec<&str> = s[s.rfind(')')? + 1..].split_whitespace().collect();
    Some(Stat {
        zombie: f.first()? == &"Z",
        ppid: f.get(1)?.parse().ok()?,
        start: f.get(19)?.parse().ok()?,
    })
}

fn all_pids() -> Vec<u32> {
    fs::read_dir("/proc")
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

fn alive(pid: u32, start: u64) -> bool {
    stat(pid).is_some_and(|s| s.start == start && !s.zombie)
}

fn ns_id(p: &Path) -> Option<(u64, u64)> {
    fs::metadata(p).ok().map(|m| (m.dev(), m.ino()))
}

/// BPF program ids held by process `pid` (prog and link fds).
fn held_progs(pid: u32, out: &mut BTreeSet<u32>) {
    let Ok(rd) = fs::read_dir(format!("/proc/{pid}/fdinfo")) else {
        return;
    };
    for e in rd.flatten() {
        if let Ok(t) = fs::read_to_string(e.path()) {
            for l in t.lines() {
                if let Some(v) = l.strip_prefix("prog_id:") {
                    if let Ok(id) = v.trim().parse() {
                        out.insert(id);
                    }
                }
            }
        }
    }
}

/// Ids of XDP programs attached to interfaces of namespace `ns` (None: this one).
fn attached_progs(ns: Option<&str>, out: &mut BTreeSet<u32>) {
    let mut c = Command::new("ip");
    if let Some(n) = ns {
        c.args(["-n", n]);
    }
    let Ok(o) = c.args(["-d", "link", "show"]).output() else {
        return;
    };
    let t = String::from_utf8_lossy(&o.stdout);
    let w: Vec<&str> = t.split_whitespace().collect();
    for k in 0..w.len().saturating_sub(2) {
        if w[k].starts_with("prog/xdp") && w[k + 1] == "id" {
            if let Ok(id) = w[k + 2].parse() {
                out.insert(id);
            }
        }
    }
}

/// All loaded XDP programs: id -> name.
fn xdp_progs() -> BTreeMap<u32, String> {
    let o = Command::new(require_tool("bpftool"))
        .args(["prog", "show", "-j"])
        .output()
        .expect("run bpftool");
    assert!(
        o.status.success(),
        "bpftool prog show: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("bpftool prog show -j: not JSON ({e})"));
    v.as_array()
        .map(|a| {
            a.iter()
                .filter(|p| p["type"] == "xdp")
                .filter_map(|p| {
                    Some((
                        p["id"].as_u64()? as u32,
                        p["name"].as_str().unwrap_or("").to_string(),
                    ))
                })
                .collect()
        })
        .unwrap_or_default()
}

// ------------------------------------------------------------ sampling

/// What a run was seen to make.
#[derive(Default)]
struct Seen {
    /// (pid, start time, comm)
    procs: BTreeMap<(u32, u64), String>,
    progs: BTreeSet<u32>,
    netns: BTreeSet<String>,
    watchdog: bool,
}

impl Seen {
    fn sample(&mut self, root_pid: u32, prefix: &str, with_ip: bool) {
        let pids = all_pids();
        let stats: BTreeMap<u32, Stat> = pids.iter().filter_map(|&p| Some((p, stat(p)?))).collect();
        // Descendants of the bench, and its watchdog (in a session of its
        // own; once the bench is dead, a child of init).
        let mut mine: BTreeSet<u32> = BTreeSet::from([root_pid]);
        let reap = format!("\0__reap\0--parent\0{root_pid}\0");
        for &p in &pids {
            if fs::read(format!("/proc/{p}/cmdline"))
                .is_ok_and(|b| String::from_utf8_lossy(&b).contains(&reap))
            {
                mine.insert(p);
            }
        }
        loop {
            let n = mine.len();
            for (&p, s) in &stats {
                if mine.contains(&s.ppid) {
                    mine.insert(p);
                }
            }
            if mine.len() == n {
                break;
            }
        }
        // Everything in the run's namespaces.
        let nss = netns_with(prefix);
        let ids: BTreeSet<_> = nss
            .iter()
            .filter_map(|n| ns_id(&Path::new("/run/netns").join(n)))
            .collect();
        if !ids.is_empty() {
            for &p in &pids {
                if ns_id(Path::new(&format!("/proc/{p}/ns/net"))).is_some_and(|i| ids.contains(&i))
                {
                    mine.insert(p);
                }
            }
        }
        for p in mine {
            let Some(s) = stats.get(&p) else { continue };
            if s.zombie {
                continue;
            }
            let cmdline = fs::read(format!("/proc/{p}/cmdline"))
                .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
                .unwrap_or_default();
            if cmdline.contains("__reap") {
                self.watchdog = true;
            }
            self.procs.insert((p, s.start), cmdline.trim().to_string());
            held_progs(p, &mut self.progs);
        }
        if with_ip {
            for n in &nss {
                attached_progs(Some(n), &mut self.progs);
            }
        }
        self.netns.extend(nss);
    }
}

/// Everything of the run still there (empty: clean).
fn leftovers(prefix: &str, seen: &Seen, before: &BTreeMap<u32, String>) -> Vec<String> {
    let mut v = Vec::new();
    for n in netns_with(prefix) {
        v.push(format!("network namespace {n}"));
    }
    if let Ok(rd) = fs::read_dir(testbed::STATE_DIR) {
        for e in rd.flatten() {
            let n = e.file_name().to_string_lossy().to_string();
            if n.starts_with(prefix) {
                v.push(format!("record {}/{n}", testbed::STATE_DIR));
            }
        }
    }
    if let Ok(rd) = fs::read_dir("/sys/class/net") {
        for e in rd.flatten() {
            let n = e.file_name().to_string_lossy().to_string();
            if ["g0", "d0", "d1", "s0"].contains(&n.as_str()) || n.starts_with(prefix) {
                v.push(format!("interface {n} in the root namespace"));
            }
        }
    }
    for ((p, st), cmd) in &seen.procs {
        if alive(*p, *st) {
            v.push(format!("process {p}: {cmd}"));
        }
    }
    let now = xdp_progs();
    for id in &seen.progs {
        if let Some(name) = now.get(id) {
            v.push(format!("XDP program {id} ({name}) the run used"));
        }
    }
    // New XDP programs nobody holds or has attached anywhere visible: only
    // a namespace that lives on without a name would keep such a one.
    let fresh: Vec<u32> = now
        .keys()
        .filter(|id| !before.contains_key(id))
        .copied()
        .collect();
    if !fresh.is_empty() {
        let mut explained = BTreeSet::new();
        for p in all_pids() {
            held_progs(p, &mut explained);
        }
        attached_progs(None, &mut explained);
        for n in netns_with("") {
            attached_progs(Some(&n), &mut explained);
        }
        for id in fresh {
            if !explained.contains(&id) {
                v.push(format!(
                    "XDP program {id} ({}) held by no process and attached nowhere visible",
                    now[&id]
                ));
            }
        }
    }
    for dir in ["/run/linerate-peers"] {
        if let Ok(rd) = fs::read_dir(dir) {
            for e in rd.flatten() {
                let n = e.file_name().to_string_lossy().to_string();
                // testpmd-NS.pid / .state are state; the .log stays by design.
                if n.starts_with(&format!("testpmd-{prefix}")) && !n.ends_with(".log") {
                    v.push(format!("peer state {dir}/{n}"));
                }
            }
        }
    }
    if let Ok(rd) = fs::read_dir("/run") {
        for e in rd.flatten() {
            let n = e.file_name().to_string_lossy().to_string();
            if n.starts_with(&format!("linerate-ovs-{prefix}")) {
                v.push(format!("peer run directory /run/{n}"));
            }
        }
    }
    v
}

/// Removes whatever a failed scenario left (kills its processes, deletes its namespaces).
struct Cleanup {
    prefix: String,
    child: Option<Child>,
    procs: Vec<(u32, u64)>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Some(c) = self.child.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
        for &(p, st) in &self.procs {
            if alive(p, st) {
                // SAFETY: a process of this test's run (start time checked).
                unsafe { libc::kill(p as i32, libc::SIGKILL) };
            }
        }
        let ids: BTreeSet<_> = netns_with(&self.prefix)
            .iter()
            .filter_map(|n| ns_id(&Path::new("/run/netns").join(n)))
            .collect();
        for p in linerate_measure::reap::pids_in_netns(&ids) {
            // SAFETY: a process in a namespace of this test's run.
            unsafe { libc::kill(p as i32, libc::SIGKILL) };
        }
        for n in netns_with(&self.prefix) {
            let _ = Command::new("ip").args(["netns", "del", &n]).output();
        }
        for b in testbed::list() {
            if b.name.starts_with(&self.prefix) {
                let _ = testbed::down_by_name(&b.name);
            }
        }
        if let Ok(rd) = fs::read_dir("/run") {
            for e in rd.flatten() {
                if e.file_name()
                    .to_string_lossy()
                    .starts_with(&format!("linerate-ovs-{}", self.prefix))
                {
                    let _ = fs::remove_dir_all(e.path());
                }
            }
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Sig {
    Kill,
    Term,
    Int,
    /// SIGTERM twice, 20 ms apart: the second one while the bench cleans
    /// up after the first makes it exit at once (status 130); the watchdog
    /// cleans up.
    TermTwice,
}

impl Sig {
    fn num(self) -> i32 {
        match self {
            Sig::Kill => libc::SIGKILL,
            Sig::Term | Sig::TermTwice => libc::SIGTERM,
            Sig::Int => libc::SIGINT,
        }
    }
}

/// The steps of one DuT in the bench's progress lines, in order.
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd)]
enum Step {
    /// `[i/n] DUT: building the test bed`
    Bed,
    /// `[i/n] DUT: starting`, `[i/n] DUT: waiting for the first frames
    /// through` (the DuT starting, then probed until it forwards)
    Start,
    /// `[i/n] DUT 64 B: ...` (a trial)
    Trial,
    /// `[i/n] DUT: STATUS` (ok, failed: ..., interrupted)
    Status,
}

/// Where in the run a scenario sends its signal (DuT numbers from 1).
#[derive(Clone, Copy, Debug)]
enum Phase {
    /// Building DuT `n`'s bed: its progress line is the last one and a
    /// namespace of that bed exists already.
    BedSetup(usize),
    /// DuT `n`'s trials: a trial line of it is the last one.
    Traffic(usize),
    /// DuT `n` (a linerate DuT) starting: `linerate fwd` is running in the
    /// bed, no trial has begun.
    FwdStart(usize),
    /// DuT `n` (a peer) starting: its script (`dut-NAME.sh start`) is
    /// running, no trial has begun.
    PeerStart(usize),
}

impl Phase {
    /// (DuT, step) of the phase.
    fn at(self) -> (usize, Step) {
        match self {
            Phase::BedSetup(n) => (n, Step::Bed),
            Phase::Traffic(n) => (n, Step::Trial),
            Phase::FwdStart(n) | Phase::PeerStart(n) => (n, Step::Start),
        }
    }
}

/// The progress lines of a log as (DuT number, step, the line).
fn events<'a>(log: &'a str, duts: &[&str]) -> Vec<(usize, Step, &'a str)> {
    let mut v = Vec::new();
    for l in log.lines() {
        // "[  1.2s] [2/3] linerate-afxdp 64 B: probe ..."
        let Some((_, rest)) = l.split_once("s] ") else {
            continue;
        };
        for (i, d) in duts.iter().enumerate() {
            let tag = format!("[{}/{}] {d}", i + 1, duts.len());
            let Some(r) = rest.strip_prefix(&tag) else {
                continue;
            };
            let step = if r.starts_with(" 64 B: ") {
                Step::Trial
            } else if r == ": building the test bed" {
                Step::Bed
            } else if r == ": starting" || r == ": waiting for the first frames through" {
                Step::Start
            } else if r.starts_with(": ") {
                Step::Status
            } else {
                continue;
            };
            v.push((i + 1, step, l));
        }
    }
    v
}

/// Processes of the run alive now whose command line contains `what`.
fn running(seen: &Seen, what: &str) -> bool {
    seen.procs
        .iter()
        .any(|((p, st), cmd)| cmd.contains(what) && alive(*p, *st))
}

/// The bench is in `phase` now (see [`Phase`]).
fn in_phase(phase: Phase, ev: &[(usize, Step, &str)], seen: &Seen, prefix: &str) -> bool {
    let (n, step) = phase.at();
    if ev.last().map(|e| (e.0, e.1)) != Some((n, step)) {
        return false;
    }
    match phase {
        Phase::BedSetup(n) => !netns_with(&format!("{prefix}{}-", n - 1)).is_empty(),
        Phase::Traffic(_) => true,
        Phase::FwdStart(_) => running(seen, "linerate fwd "),
        Phase::PeerStart(_) => running(seen, ".sh start "),
    }
}

/// The bench went past `phase` (a later step or DuT is in the log).
fn past(phase: Phase, ev: &[(usize, Step, &str)]) -> bool {
    let (n, step) = phase.at();
    ev.iter().any(|e| e.0 > n || (e.0 == n && e.1 > step))
}

/// Whether the run's log and exit status prove that the bench was still
/// running, in `phase`, when `sig` was sent (Err: why not).
fn proven(
    phase: Phase,
    sig: Sig,
    log: &str,
    duts: &[&str],
    status: std::process::ExitStatus,
) -> Result<(), String> {
    let ev = events(log, duts);
    let (n, step) = phase.at();
    let last = ev.last().map(|e| e.2).unwrap_or("(none)");
    let later_dut = ev.iter().any(|e| e.0 > n);
    match sig {
        // The log ends where the kill cut the bench off.
        Sig::Kill => {
            if status.signal() != Some(libc::SIGKILL) {
                return Err(format!("the bench was not killed by SIGKILL: {status}"));
            }
            match ev.last() {
                Some(e) if (e.0, e.1) == (n, step) => Ok(()),
                _ => Err(format!(
                    "killed after {phase:?}: last progress line '{last}'"
                )),
            }
        }
        // The handler sets the stop flag (the bench then says
        // "interrupted: ..." and exits 0): the signal found it running. It
        // ends DuT n, whose status line follows, and starts no further DuT.
        // In its trials DuT n's status is "interrupted"; during its start it
        // is the check trial's verdict (an interrupted check frame count),
        // but no trial of DuT n may have begun.
        Sig::Term | Sig::Int => {
            if status.code() != Some(0) {
                return Err(format!("exit {status}, not 0 after a handled {sig:?}"));
            }
            if !log.contains("interrupted: test beds and DuTs removed") {
                return Err("no 'interrupted: test beds and DuTs removed' in the log".into());
            }
            let Some(st) = ev.iter().find(|e| e.0 == n && e.1 == Step::Status) else {
                return Err(format!("no status line of DuT {n}"));
            };
            if step == Step::Trial && !st.2.contains("interrupted") {
                return Err(format!(
                    "DuT {n}'s status line is '{}', not 'interrupted'",
                    st.2
                ));
            }
            if later_dut {
                return Err(format!("a DuT after {n} started: {last}"));
            }
            if step == Step::Start && ev.iter().any(|e| e.0 == n && e.1 == Step::Trial) {
                return Err(format!("DuT {n} reached its trials before the signal"));
            }
            Ok(())
        }
        // The second signal made the bench exit at once (status 130): it
        // was still running, cleaning up after the first; the first came
        // while DuT n ran (no later DuT started).
        Sig::TermTwice => {
            if status.code() != Some(130) {
                return Err(format!(
                    "exit {status}, not 130: the second SIGTERM did not find the bench running"
                ));
            }
            if later_dut {
                return Err(format!("a DuT after {n} started: {last}"));
            }
            Ok(())
        }
    }
}

/// The bench's arguments: one frame size and no frame loss or
/// back-to-back procedures keep a DuT to a few seconds, so that the third
/// DuT is reached soon; throughput and latency trials remain.
const BENCH: [&str; 17] = [
    "bench",
    "--final-trial",
    "0",
    "--sizes",
    "64",
    "--trial",
    "0.2",
    "--resolution",
    "5",
    "--repetitions",
    "1",
    "--frame-loss-sizes",
    "none",
    "--b2b-sizes",
    "none",
    "--no-report",
    "--no-history",
];

/// How long a run may take to reach the phase of its scenario.
const PHASE_LIMIT: Duration = Duration::from_secs(120);

/// One run of the bench with `duts`: `sig` sent as soon as the bench is in
/// `phase`; then everything must go away. Ok: a line for the summary; Err:
/// the bench was not (provably) in the phase when the signal was sent, a
/// matter of timing (the run is still checked to leave nothing behind).
fn attempt(prefix: &str, duts: &[&str], sig: Sig, phase: Phase) -> Result<String, String> {
    let before = xdp_progs();
    let dir = TempDir::new(prefix);
    let log = dir.join("bench.log");
    let mut cmd = Command::new(BIN);
    cmd.args(BENCH).args(["--name", prefix]);
    for d in duts {
        cmd.args(["--dut", d]);
    }
    let f = fs::File::create(&log).unwrap();
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::from(f.try_clone().unwrap()))
        .stderr(Stdio::from(f))
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut guard = Cleanup {
        prefix: prefix.to_string(),
        child: Some(child),
        procs: Vec::new(),
    };
    let read_log = || fs::read_to_string(&log).unwrap_or_default();
    let t0 = Instant::now();
    let mut seen = Seen::default();
    let mut k = 0u32;
    // Wait for the phase: poll the log every 5 ms, sampling what the run
    // made on the way (`ip` in every namespace is slower: every 8th round).
    let reached = loop {
        seen.sample(pid, prefix, k.is_multiple_of(8));
        k += 1;
        guard.procs = seen.procs.keys().copied().collect();
        let text = read_log();
        let ev = events(&text, duts);
        if in_phase(phase, &ev, &seen, prefix) {
            break true;
        }
        if past(phase, &ev) {
            break false;
        }
        if let Some(st) = guard.child.as_mut().unwrap().try_wait().unwrap() {
            panic!("{prefix}: the bench ended ({st}) before {phase:?}; log:\n{text}");
        }
        assert!(
            t0.elapsed() < PHASE_LIMIT,
            "{prefix}: {phase:?} not reached in {PHASE_LIMIT:?}; log:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(5));
    };
    let at = t0.elapsed();
    // SAFETY: our child (not reaped yet: a zombie at worst).
    unsafe { libc::kill(pid as i32, sig.num()) };
    let tk = Instant::now();
    if let Sig::TermTwice = sig {
        std::thread::sleep(Duration::from_millis(20));
        // SAFETY: our child (not reaped yet: a zombie at worst).
        unsafe { libc::kill(pid as i32, sig.num()) };
    }
    // What is still there right after the signal (the watchdog, processes
    // in the namespaces), then whatever appears until the bench has exited.
    seen.sample(pid, prefix, true);
    let status = loop {
        if let Some(s) = guard.child.as_mut().unwrap().try_wait().unwrap() {
            break s;
        }
        assert!(
            tk.elapsed() < Duration::from_secs(15),
            "{prefix}: bench still running 15 s after {sig:?}; log:\n{}",
            read_log()
        );
        seen.sample(pid, prefix, false);
        guard.procs = seen.procs.keys().copied().collect();
        std::thread::sleep(Duration::from_millis(10));
    };
    let exit_s = tk.elapsed().as_secs_f64();
    guard.child = None;
    guard.procs = seen.procs.keys().copied().collect();
    let state = format!(
        "{} namespace(s), {} process(es), {} XDP program(s) seen",
        seen.netns.len(),
        seen.procs.len(),
        seen.progs.len()
    );
    if sig == Sig::Kill {
        assert!(
            seen.watchdog,
            "{prefix}: no watchdog process (linerate __reap --parent {pid}) seen"
        );
    }
    let mut left = Vec::new();
    while tk.elapsed() < CLEANUP_LIMIT {
        left = leftovers(prefix, &seen, &before);
        if left.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let clean_s = tk.elapsed().as_secs_f64();
    let text = read_log();
    assert!(
        left.is_empty(),
        "{prefix}: {sig:?} in {phase:?} ({state}): left behind after {} s:\n  {}\nlog:\n{text}",
        CLEANUP_LIMIT.as_secs(),
        left.join("\n  "),
    );
    let why = if reached {
        proven(phase, sig, &text, duts, status).err()
    } else {
        Some("the bench went past the phase between two looks".to_string())
    };
    match why {
        None => Ok(format!(
            "{prefix}: {sig:?} in {phase:?} at {:.2} s ({state}): exited after {exit_s:.2} s, all gone after {clean_s:.2} s",
            at.as_secs_f64()
        )),
        Some(w) => Err(format!("{w}; log:\n{text}")),
    }
}

/// A scenario: runs of the bench until one provably sent `sig` in `phase`
/// (at most 3: the phase may be missed by a few ms on a busy machine);
/// every run must leave nothing behind.
fn scenario(tag: char, duts: &[&str], sig: Sig, phase: Phase) -> String {
    let mut missed: Vec<String> = Vec::new();
    for n in 0..3u8 {
        let p = prefix(tag, n);
        match attempt(&p, duts, sig, phase) {
            Ok(line) if missed.is_empty() => return line,
            Ok(line) => {
                let why: Vec<&str> = missed.iter().filter_map(|m| m.lines().next()).collect();
                return format!(
                    "{line} (after {} missed run(s): {})",
                    missed.len(),
                    why.join("; ")
                );
            }
            Err(e) => missed.push(format!("{p}: {e}")),
        }
    }
    panic!(
        "{sig:?} in {phase:?}: no run proved the bench was in the phase when the signal was sent:\n{}",
        missed.join("\n")
    );
}

fn prefix(tag: char, attempt: u8) -> String {
    format!("lrk{}{tag}{attempt}", std::process::id())
}

#[test]
fn bench_killed_at_any_moment_leaves_nothing_behind() {
    require_root();
    let _serial = serial();
    // Every DuT of the plan must run: peers are not skipped here.
    require_tools(&["bpftool", "dpdk-testpmd", "ovs-vswitchd", "ovs-vsctl"]);
    let t = Instant::now();
    let duts = ["linux-bridge", "linerate-afxdp", "linerate-afpacket"];
    // (signal, phase): SIGKILL (the watchdog cleans up) in the first DuT's
    // bed set-up and traffic, while linerate fwd (afxdp) starts as the
    // second DuT, in the third DuT's traffic; then the signals the bench
    // handles itself.
    let plan = [
        (Sig::Kill, Phase::BedSetup(1)),
        (Sig::Kill, Phase::Traffic(1)),
        (Sig::Kill, Phase::FwdStart(2)),
        (Sig::Kill, Phase::Traffic(3)),
        (Sig::Term, Phase::Traffic(1)),
        (Sig::Int, Phase::FwdStart(2)),
        (Sig::TermTwice, Phase::Traffic(2)),
    ];
    let mut summary = Vec::new();
    for (i, (sig, phase)) in plan.into_iter().enumerate() {
        summary.push(scenario((b'a' + i as u8) as char, &duts, sig, phase));
    }
    // Peers: a script (bash) in the root namespace starting daemons in the
    // DuT namespace, killed in the middle of its start.
    summary.push(scenario(
        'p',
        &["testpmd-af_xdp"],
        Sig::Kill,
        Phase::PeerStart(1),
    ));
    summary.push(scenario(
        'q',
        &["ovs-afxdp"],
        Sig::Kill,
        Phase::PeerStart(1),
    ));
    eprintln!(
        "{}\ntotal {:.1} s",
        summary.join("\n"),
        t.elapsed().as_secs_f64()
    );
}

/// The watchdog alone: `linerate testbed up --hold` (which starts one)
/// killed with SIGKILL; its bed must go.
#[test]
fn watchdog_removes_the_bed_of_a_killed_testbed_hold() {
    require_root();
    let _serial = serial();
    let name = prefix('h', 0);
    let child = Command::new(BIN)
        .args(["testbed", "up", "--name", &name, "--hold"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut guard = Cleanup {
        prefix: name.clone(),
        child: Some(child),
        procs: Vec::new(),
    };
    let t = Instant::now();
    let mut seen = Seen::default();
    loop {
        seen.sample(pid, &name, false);
        if testbed::load(&name).is_ok_and(|i| i.complete) && seen.watchdog {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "bed {name} not up in 20 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    guard.procs = seen.procs.keys().copied().collect();
    assert_eq!(netns_with(&name).len(), 3);
    // SAFETY: our child.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    let c = guard.child.as_mut().unwrap();
    let st = c.wait().unwrap();
    guard.child = None;
    assert_eq!(st.signal(), Some(libc::SIGKILL));
    let tk = Instant::now();
    let before = xdp_progs();
    let mut left = Vec::new();
    while tk.elapsed() < Duration::from_secs(10) {
        left = leftovers(&name, &seen, &before);
        if left.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(left.is_empty(), "left behind: {left:?}");
    eprintln!(
        "testbed up --hold killed: bed removed after {:.2} s",
        tk.elapsed().as_secs_f64()
    );
}
