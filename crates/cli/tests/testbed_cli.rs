//! `linerate testbed` end to end, with the built binary. Needs root (the
//! tests fail without it). Every bed has a unique name and a guard removes
//! it if a test fails.

use linerate_measure::testbed::{self, TestbedInfo};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_linerate");

mod support;
use support::{require_root, wait_for};

static N: AtomicU32 = AtomicU32::new(0);

fn uname(tag: &str) -> String {
    format!(
        "lrc{}{}{}",
        std::process::id(),
        tag,
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Removes the bed (if still there) and kills the child (if still running).
struct Guard {
    name: String,
    child: Option<Child>,
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(c) = self.child.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = testbed::down_by_name(&self.name);
    }
}

fn lr(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().unwrap()
}

fn gone(name: &str) -> bool {
    ["gen", "dut", "sink"]
        .iter()
        .all(|r| !testbed::netns_exists(&format!("{name}-{r}")))
        && testbed::load(name).is_err()
}

fn wait_exit(c: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let t = Instant::now();
    while t.elapsed() < limit {
        if let Some(s) = c.try_wait().unwrap() {
            return Some(s);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

fn hold_then_signal(sig: i32) {
    let name = uname("h");
    let mut g = Guard {
        name: name.clone(),
        child: None,
    };
    let mut child = Command::new(BIN)
        .args(["testbed", "up", "--name", &name, "--hold", "--json"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let pid = child.id() as i32;
    g.child = Some(child);
    let info: TestbedInfo = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
    assert_eq!(info.name, name);
    assert!(testbed::is_alive(&info));
    assert_eq!(info.owner_pid as i32, pid);
    // SAFETY: signalling our own child.
    assert_eq!(unsafe { libc::kill(pid, sig) }, 0);
    let st = wait_exit(g.child.as_mut().unwrap(), Duration::from_secs(10))
        .expect("linerate testbed up --hold did not exit on the signal");
    assert!(st.success(), "{st:?}");
    g.child = None;
    assert!(gone(&name), "bed {name} left after signal {sig}");
    let links = String::from_utf8_lossy(
        &Command::new("ip")
            .args(["-o", "link"])
            .output()
            .unwrap()
            .stdout,
    )
    .into_owned();
    assert!(!links.contains(&info.gen.mac.to_string()), "{links}");
}

#[test]
fn hold_is_removed_on_sigterm() {
    require_root();
    hold_then_signal(libc::SIGTERM);
}

#[test]
fn hold_is_removed_on_sigint() {
    require_root();
    hold_then_signal(libc::SIGINT);
}

#[test]
fn up_status_exec_down() {
    require_root();
    let name = uname("u");
    let _g = Guard {
        name: name.clone(),
        child: None,
    };
    let o = lr(&["testbed", "up", "--name", &name, "--dut", "ip-forward"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains(&format!("{name}-gen")) && text.contains("ip netns exec"),
        "{text}"
    );
    // Still up after the command ended, visible to other processes.
    let o = lr(&["testbed", "status", "--json"]);
    assert!(o.status.success());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let me = v
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["name"] == name.as_str())
        .expect("bed in status");
    assert_eq!(me["alive"], true);
    assert_eq!(me["dut_mode"], "ip-forward");
    // exec runs in the right namespace and passes the exit status.
    let o = lr(&[
        "testbed", "exec", "--name", &name, "sink", "--", "ip", "-o", "link",
    ]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("s0@"));
    let o = lr(&["testbed", "exec", "--name", &name, "dut", "--", "false"]);
    assert!(!o.status.success());
    // Same name again: one-line error, bed untouched.
    let o = lr(&["testbed", "up", "--name", &name]);
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("already exists") && e.lines().count() == 1,
        "{e}"
    );
    assert!(testbed::netns_exists(&format!("{name}-dut")));
    let o = lr(&["testbed", "down", "--name", &name]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(gone(&name));
    let o = lr(&["testbed", "down", "--name", &name]);
    assert!(
        !o.status.success(),
        "second down reports the bed is unknown"
    );
}

#[test]
fn bed_of_a_killed_process_is_removed_by_down() {
    require_root();
    let name = uname("k");
    let mut g = Guard {
        name: name.clone(),
        child: None,
    };
    let mut child = Command::new(BIN)
        .args(["testbed", "up", "--name", &name, "--hold", "--json"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    g.child = Some(child);
    let c = g.child.as_mut().unwrap();
    // `--hold` starts a watchdog that would remove the bed (see
    // bench_kill.rs); kill it first, as `kill -9` of every linerate would.
    let pid = c.id();
    let wd = wait_for(
        Duration::from_secs(10),
        "the watchdog (linerate __reap) that testbed up --hold starts",
        || watchdog_of(pid),
    );
    // SAFETY: the watchdog child of our child.
    unsafe { libc::kill(wd as i32, libc::SIGKILL) };
    c.kill().unwrap(); // SIGKILL: no cleanup possible in the process
    c.wait().unwrap();
    g.child = None;
    let info = testbed::load(&name).unwrap();
    assert!(testbed::is_alive(&info));
    assert!(!testbed::owner_alive(&info));
    let o = lr(&["testbed", "down", "--name", &name]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(gone(&name));
}

/// Pid of the `linerate __reap` child of `pid`.
fn watchdog_of(pid: u32) -> Option<u32> {
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let p: u32 = e.file_name().to_str()?.parse().ok()?;
        let st = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
        let ppid: u32 = st[st.rfind(')')? + 1..]
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()?;
        let cmd = std::fs::read(format!("/proc/{p}/cmdline")).ok()?;
        (ppid == pid && String::from_utf8_lossy(&cmd).contains("__reap")).then_some(p)
    })
}
