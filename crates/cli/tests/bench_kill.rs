//! Killing `linerate bench` at any moment leaves nothing behind: no network
//! namespace, no veth, no XDP program, no process, no peer state file.
//! SIGKILL cannot be caught: the watchdog (`linerate __reap`, see
//! `linerate_measure::guard`) cleans up; SIGTERM/SIGINT are handled by the
//! bench itself.
//!
//! Needs root (else the tests print a note and pass). While a run goes, the
//! test samples what the run made: processes (descendants of the bench and
//! everything in its namespaces, with their start times), BPF programs they
//! hold (/proc/PID/fdinfo) and XDP programs attached in its namespaces.
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

const BIN: &str = env!("CARGO_BIN_EXE_linerate");
/// How long cleanup may take after the kill.
const CLEANUP_LIMIT: Duration = Duration::from_secs(15);

fn root() -> bool {
    // SAFETY: geteuid has no preconditions.
    let r = unsafe { libc::geteuid() } == 0;
    if !r {
        eprintln!("skipped: needs root");
    }
    r
}

fn have(cmd: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {cmd}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
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
    let Ok(o) = Command::new("bpftool")
        .args(["prog", "show", "-j"])
        .output()
    else {
        return BTreeMap::new();
    };
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
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

fn prefixed_netns(prefix: &str) -> Vec<String> {
    fs::read_dir("/run/netns")
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| n.starts_with(prefix))
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
        // Descendants of the bench.
        let mut mine: BTreeSet<u32> = BTreeSet::from([root_pid]);
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
        let nss = prefixed_netns(prefix);
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
    for n in prefixed_netns(prefix) {
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
        for n in prefixed_netns("") {
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
        let ids: BTreeSet<_> = prefixed_netns(&self.prefix)
            .iter()
            .filter_map(|n| ns_id(&Path::new("/run/netns").join(n)))
            .collect();
        for p in linerate_measure::guard::pids_in_netns(&ids) {
            // SAFETY: a process in a namespace of this test's run.
            unsafe { libc::kill(p as i32, libc::SIGKILL) };
        }
        for n in prefixed_netns(&self.prefix) {
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

#[derive(Clone, Copy, Debug)]
enum Sig {
    Kill,
    Term,
    Int,
    /// SIGTERM twice, 50 ms apart: the bench exits at once, the watchdog cleans up.
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

/// Run the bench with `duts`, send `sig` after `at`, and check that
/// everything goes away. Returns a line for the summary.
fn scenario(prefix: &str, duts: &[&str], sig: Sig, at: Duration) -> String {
    let before = xdp_progs();
    let log = std::env::temp_dir().join(format!("{prefix}.log"));
    let mut cmd = Command::new(BIN);
    cmd.args([
        "bench",
        "--quick",
        "--no-report",
        "--no-history",
        "--name",
        prefix,
    ]);
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
    let t0 = Instant::now();
    let mut seen = Seen::default();
    let mut k = 0u32;
    while t0.elapsed() < at {
        // `ip` in every namespace is slower: every 4th round only.
        seen.sample(pid, prefix, k.is_multiple_of(4));
        k += 1;
        guard.procs = seen.procs.keys().copied().collect();
        std::thread::sleep(Duration::from_millis(25));
    }
    seen.sample(pid, prefix, true);
    guard.procs = seen.procs.keys().copied().collect();
    let state = format!(
        "{} namespace(s), {} process(es), {} XDP program(s) seen",
        seen.netns.len(),
        seen.procs.len(),
        seen.progs.len()
    );
    // SAFETY: our child.
    unsafe { libc::kill(pid as i32, sig.num()) };
    let tk = Instant::now();
    if let Sig::TermTwice = sig {
        std::thread::sleep(Duration::from_millis(50));
        // SAFETY: our child (a zombie at worst: not reaped yet).
        unsafe { libc::kill(pid as i32, sig.num()) };
    }
    let child = guard.child.as_mut().unwrap();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            tk.elapsed() < Duration::from_secs(15),
            "{prefix}: bench still running 15 s after {sig:?}; log {}",
            log.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    let exit_s = tk.elapsed().as_secs_f64();
    guard.child = None;
    match sig {
        Sig::Kill => {
            assert_eq!(status.signal(), Some(libc::SIGKILL));
            // From ~0.3 s on the watchdog runs (it is started first).
            assert!(
                seen.watchdog || at < Duration::from_millis(200),
                "{prefix}: no watchdog process seen in {at:?}"
            );
        }
        Sig::Term | Sig::Int | Sig::TermTwice => assert!(
            status.signal().is_none(),
            "{prefix}: bench did not handle {sig:?} ({status}); log {}",
            log.display()
        ),
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
    assert!(
        left.is_empty(),
        "{prefix}: {sig:?} at {at:?} ({state}): left behind after {} s:\n  {}\nlog {}:\n{}",
        CLEANUP_LIMIT.as_secs(),
        left.join("\n  "),
        log.display(),
        fs::read_to_string(&log).unwrap_or_default()
    );
    let _ = fs::remove_file(&log);
    format!(
        "{prefix}: {sig:?} at {:.1} s ({state}): exited after {exit_s:.2} s, all gone after {clean_s:.2} s",
        at.as_secs_f64()
    )
}

fn prefix(tag: char) -> String {
    format!("lrk{}{tag}", std::process::id())
}

#[test]
fn bench_killed_at_any_moment_leaves_nothing_behind() {
    if !root() {
        return;
    }
    let t = Instant::now();
    let duts = ["linux-bridge", "linerate-afxdp", "linerate-afpacket"];
    let ms = Duration::from_millis;
    // (signal, when): bed set-up of the first DuT, its traffic, start of
    // linerate fwd (afxdp), the second or third DuT; then the handled signals.
    let plan = [
        (Sig::Kill, ms(300)),
        (Sig::Kill, ms(1000)),
        (Sig::Kill, ms(2500)),
        (Sig::Kill, ms(5000)),
        (Sig::Term, ms(2000)),
        (Sig::Int, ms(3500)),
        (Sig::TermTwice, ms(2500)),
    ];
    let mut summary = Vec::new();
    for (i, (sig, at)) in plan.into_iter().enumerate() {
        let p = prefix((b'a' + i as u8) as char);
        summary.push(scenario(&p, &duts, sig, at));
    }
    // Peers: a script (bash) in the root namespace starting daemons in the
    // DuT namespace, killed in the middle of its start.
    if have("dpdk-testpmd") {
        summary.push(scenario(
            &prefix('p'),
            &["testpmd-af_xdp"],
            Sig::Kill,
            ms(1500),
        ));
    }
    if have("ovs-vswitchd") {
        summary.push(scenario(&prefix('q'), &["ovs-afxdp"], Sig::Kill, ms(1800)));
    }
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
    if !root() {
        return;
    }
    let name = prefix('h');
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
    assert_eq!(prefixed_netns(&name).len(), 3);
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
