//! `linerate bench --dut-file`: a DuT described in a spec file is started,
//! measured and removed like the built-in ones, also when the bench is
//! killed with SIGKILL (the watchdog runs the spec's `stop`); a spec that
//! is malformed, whose start fails, whose DuT never forwards or whose
//! `run` process dies gets one line naming the file (and the field), a
//! non-zero exit, and nothing left behind. Needs root and nft.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

mod support;
use support::{netns_with, require_root, require_tool, wait_until, Proc, TempDir, EXE};

/// One bench at a time: a watchdog's second sweep kills processes in
/// namespaces with the inode numbers of the beds it removed, which the
/// kernel hands to the next namespaces made.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

const QUICK: &[&str] = &[
    "--final-trial",
    "0",
    "--sizes",
    "64",
    "--repetitions",
    "1",
    "--no-latency",
    "--frame-loss-sizes",
    "none",
    "--b2b-sizes",
    "none",
    "--no-report",
    "--no-history",
];

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name)
}

/// The watchdog's stop scripts of process `pid` still on disk.
fn stop_scripts(pid: u32) -> Vec<String> {
    std::fs::read_dir("/run/linerate/dut-stop")
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| n.starts_with(&format!("{pid}-")))
                .collect()
        })
        .unwrap_or_default()
}

/// examples/dut-ipfwd-nft.toml in `dir` (with its ruleset), its start
/// leaving a marker and its stop keeping the ruleset with its counters and
/// removing the marker before doing what the example's stop does.
fn nft_spec(dir: &TempDir) -> PathBuf {
    std::fs::copy(example("dut-ipfwd-nft.nft"), dir.join("dut-ipfwd-nft.nft")).unwrap();
    let text = std::fs::read_to_string(example("dut-ipfwd-nft.toml")).unwrap();
    let mut t: toml::Table = toml::from_str(&text).unwrap();
    let d = dir.path().display();
    let start = t["start"].as_str().unwrap().to_string();
    let stop = t["stop"].as_str().unwrap().to_string();
    t.insert("start".into(), format!("touch {d}/started\n{start}").into());
    t.insert(
        "stop".into(),
        format!("nft list table inet lr_fw > {d}/ruleset; rm -f {d}/started; {stop}").into(),
    );
    dir.write("nft.toml", &toml::to_string(&t).unwrap())
}

#[test]
fn an_nft_firewall_spec_is_measured_and_removed() {
    require_root();
    require_tool("nft");
    let _s = serial();
    let dir = TempDir::new("dutfile-nft");
    let spec = nft_spec(&dir);
    let json = dir.join("b.json");
    let mut cmd = Command::new(EXE);
    cmd.args(["bench", "--dut-file"])
        .arg(&spec)
        .args(QUICK)
        .args(["--trial", "0.1", "--name", "dfm", "--json"])
        .arg(&json);
    let child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = Proc::from(child).wait_output(Duration::from_secs(300), "bench");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let r = &v["results"][0];
    assert_eq!(r["name"], "linux-ipfwd-nft", "{r}");
    assert_eq!(r["status"], "ok", "{r}");
    assert_eq!(r["origin"], spec.display().to_string());
    assert!(r["version"].as_str().unwrap().contains("nftables"), "{r}");
    assert!(r["ready_s"].as_f64().unwrap() > 0.0, "{r}");
    let tput = r["sizes"][0]["throughput_pps"].as_f64().unwrap();
    assert!(tput > 1000.0, "throughput {tput} pps");
    // The firewall was there, every rule of it, and the traffic went
    // through it.
    let rules = std::fs::read_to_string(dir.join("ruleset")).unwrap();
    let counters = rules.lines().filter(|l| l.contains("counter")).count();
    assert!(counters >= 300, "{counters} rules:\n{rules}");
    let packets = |needle: &str| -> u64 {
        let l = rules
            .lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no rule with {needle:?}:\n{rules}"));
        let w: Vec<&str> = l.split_whitespace().collect();
        let i = w.iter().position(|x| *x == "packets").unwrap();
        w[i + 1].parse().unwrap()
    };
    // One-way UDP stays "new" in conntrack (no reply is ever seen): every
    // frame walked the whole list to the bench's accept rule, at least a
    // 0.1 s trial's worth at the throughput found.
    assert!(packets("udp dport 1-65535") as f64 >= tput * 0.1, "{rules}");
    assert_eq!(packets("established,related"), 0, "{rules}");
    assert!(!dir.join("started").exists(), "stop did not run");
    assert!(netns_with("dfm").is_empty(), "{:?}", netns_with("dfm"));
    assert!(stop_scripts(pid).is_empty(), "{:?}", stop_scripts(pid));
}

/// The bench on `spec` (1 s trials, beds named PREFIX...), once its
/// trials of DuT `name` run; (the bench, its progress lines so far).
fn bench_in_trials(spec: &Path, prefix: &str, name: &str) -> (Proc, Vec<String>) {
    let child = Command::new(EXE)
        .args(["bench", "--dut-file"])
        .arg(spec)
        .args(QUICK)
        .args(["--trial", "1", "--name", prefix])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut p = Proc::from(child);
    let rx = p.stderr_lines();
    let mut log = Vec::new();
    let trial = format!("{name} 64 B: ");
    wait_until(
        Duration::from_secs(120),
        "a trial of the spec's DuT",
        || {
            while let Ok(l) = rx.try_recv() {
                log.push(l);
            }
            log.iter().any(|l| l.contains(&trial))
        },
    );
    (p, log)
}

#[test]
fn a_spec_dut_is_removed_when_the_bench_is_killed() {
    require_root();
    require_tool("nft");
    let _s = serial();
    let dir = TempDir::new("dutfile-kill");
    let spec = nft_spec(&dir);
    // Killed while its trials run: the DuT started, the firewall loaded.
    let (mut p, log) = bench_in_trials(&spec, "dfk", "linux-ipfwd-nft");
    let pid = p.pid();
    assert!(dir.join("started").exists(), "{log:?}");
    assert!(!stop_scripts(pid).is_empty(), "no stop script registered");
    p.signal(libc::SIGKILL);
    let _ = p.take_child().unwrap().wait();
    wait_until(
        Duration::from_secs(30),
        "the watchdog to run the spec's stop and remove the bed",
        || {
            !dir.join("started").exists()
                && netns_with("dfk").is_empty()
                && stop_scripts(pid).is_empty()
        },
    );
    // The stop ran with the namespace still there: the firewall it listed.
    let rules = std::fs::read_to_string(dir.join("ruleset")).unwrap();
    assert!(rules.contains("table inet lr_fw"), "{rules}");
}

/// Run the bench on one spec; (exit status, stderr).
fn bench_on(spec: &Path, prefix: &str) -> (std::process::ExitStatus, String) {
    let child = Command::new(EXE)
        .args(["bench", "--dut-file"])
        .arg(spec)
        .args(QUICK)
        .args(["--trial", "0.1", "--name", prefix])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = Proc::from(child).wait_output(Duration::from_secs(120), "bench");
    (
        out.status,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn bad_specs_get_one_line_naming_file_and_field_and_leave_nothing() {
    require_root();
    let _s = serial();
    let dir = TempDir::new("dutfile-bad");
    let d = dir.path().display().to_string();
    let head =
        |name: &str| format!("name = \"{name}\"\ndescription = \"a test DuT\"\nmode = \"l3\"\n");
    // (file, text, what the error must say)
    let cases: Vec<(&str, String, Vec<String>)> = vec![
        (
            "field.toml",
            format!("{}strat = \"true\"\n", head("f")),
            vec!["field.toml: line 4: unknown field `strat`".into()],
        ),
        (
            "placeholder.toml",
            format!("{}start = \"ip link set {{d2}} up\"\n", head("p")),
            vec!["placeholder.toml: field `start`: unknown placeholder {d2}".into()],
        ),
        (
            "start.toml",
            format!(
                "{}start = \"touch {d}/s; echo cannot load my module >&2; exit 1\"\nstop = \"rm -f {d}/s\"\n",
                head("s")
            ),
            vec![
                "start.toml: DuT s: failed: start: exit status: 1: cannot load my module".into(),
            ],
        ),
        (
            "never.toml",
            format!(
                "{}start = \"touch {d}/n\"\nstop = \"rm -f {d}/n\"\nready_timeout = 1\n",
                head("n")
            ),
            vec!["never.toml: DuT n: failed: never forwarded".into(), "ready_timeout 1 s".into()],
        ),
        (
            "run.toml",
            format!("{}run = \"echo giving up >&2; exit 4\"\n", head("r")),
            vec!["run.toml: DuT r: failed: run: ended with exit status: 4: giving up".into()],
        ),
    ];
    for (i, (file, text, want)) in cases.iter().enumerate() {
        let spec = dir.write(file, text);
        let prefix = format!("dfb{i}");
        let (st, err) = bench_on(&spec, &prefix);
        assert!(!st.success(), "{file}: {err}");
        let last = err.lines().last().unwrap_or("");
        assert!(last.starts_with("linerate: error: "), "{file}: {err}");
        for w in want {
            assert!(last.contains(w.as_str()), "{file}: {last:?} lacks {w:?}");
        }
        assert!(
            netns_with(&prefix).is_empty(),
            "{file}: {:?}",
            netns_with(&prefix)
        );
        // What start made, stop removed.
        for m in ["s", "n"] {
            assert!(!dir.join(m).exists(), "{file}: marker {m} left");
        }
    }
    // Nothing of this process's runs is registered any more.
    let left: Vec<_> = std::fs::read_dir("/run/linerate/dut-stop")
        .map(|rd| rd.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    for l in left {
        let n = l.to_string_lossy().into_owned();
        assert!(!n.contains("-dfb"), "stop script left: {n}");
    }
}

/// A `sleep` argument of this test process's own (`sleep 7001.PIDk`), to
/// find the processes a spec started in /proc.
fn sleep_arg(k: u32) -> String {
    format!("{}.{}{k}", 7000 + k, std::process::id())
}

/// Pids of the processes running `sleep ARG` for any of `args`.
fn sleeping(args: &[String]) -> Vec<u32> {
    let want: Vec<Vec<u8>> = args
        .iter()
        .map(|a| format!("sleep\0{a}\0").into_bytes())
        .collect();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| std::fs::read(format!("/proc/{p}/cmdline")).is_ok_and(|c| want.contains(&c)))
        .collect()
}

/// A spec whose `start` leaves a child in its process group and one that
/// left it (setsid; still in the DuT's namespace) and whose `stop` leaves
/// a child too and then hangs; (spec, the sleeps' arguments).
fn lingering_spec(dir: &TempDir, tag: u32) -> (PathBuf, Vec<String>) {
    let a: Vec<String> = (0..3).map(|k| sleep_arg(tag * 10 + k)).collect();
    let text = format!(
        r#"name = "lingering"
description = "a start that leaves children behind, a stop that hangs"
mode = "l3"
start = """
sleep {a0} &
echo $! > {{spec_dir}}/bg.pid
setsid sleep {a1} &
sysctl -qw net.ipv4.ip_forward=1
"""
stop = "kill -0 $(cat {{spec_dir}}/bg.pid) && touch {{spec_dir}}/bg-alive-at-stop; sleep {a2} & sleep {a2}"
start_timeout = 20
stop_timeout = 2
"#,
        a0 = a[0],
        a1 = a[1],
        a2 = a[2]
    );
    (dir.write("lingering.toml", &text), a)
}

/// The last line of `err` names a log file in /run/linerate/dut-log that
/// is there (after "log ").
fn named_log(err: &str) -> PathBuf {
    let last = err.lines().last().unwrap_or("");
    let p = last
        .rsplit_once("; log ")
        .or_else(|| last.rsplit_once("(log "))
        .map(|(_, p)| PathBuf::from(p.trim_end_matches(')')))
        .unwrap_or_else(|| panic!("no log named: {last:?}"));
    assert!(p.starts_with("/run/linerate/dut-log/"), "{}", p.display());
    assert!(p.is_file(), "{} is not there", p.display());
    p
}

#[test]
fn lingering_children_and_a_hanging_stop_do_not_hold_up_the_bench() {
    require_root();
    let _s = serial();
    let dir = TempDir::new("dutfile-linger");
    let (spec, args) = lingering_spec(&dir, 1);
    let t = std::time::Instant::now();
    let (st, err) = bench_on(&spec, "dfl");
    let took = t.elapsed();
    // The bench ran its trials and then failed on the stop, at its limit.
    assert!(!st.success(), "{err}");
    assert!(err.contains("lingering 64 B: "), "no trial ran: {err}");
    let last = err.lines().last().unwrap_or("");
    assert!(
        last.contains("DuT lingering: failed: stop: still running after 2 s (stop_timeout): its process group killed; log /run/linerate/dut-log/"),
        "{last}"
    );
    let log = named_log(&err);
    assert!(
        log.to_string_lossy().ends_with("-lingering.stop.log"),
        "{}",
        log.display()
    );
    assert!(took < Duration::from_secs(60), "the bench took {took:?}");
    // The child `start` left was the DuT's until `stop`; then all went.
    assert!(
        dir.join("bg-alive-at-stop").exists(),
        "start's child died early"
    );
    assert!(
        sleeping(&args).is_empty(),
        "left running: {:?}",
        sleeping(&args)
    );
    assert!(netns_with("dfl").is_empty(), "{:?}", netns_with("dfl"));

    // A start that hangs is killed at start_timeout, with what it started.
    let a = sleep_arg(19);
    let text = format!(
        "name = \"hangs\"\ndescription = \"a start that hangs\"\nmode = \"l3\"\nstart = \"setsid sleep {a} & sleep {a}\"\nstart_timeout = 1\n"
    );
    let spec = dir.write("hangs.toml", &text);
    let t = std::time::Instant::now();
    let (st, err) = bench_on(&spec, "dfh");
    assert!(!st.success(), "{err}");
    let last = err.lines().last().unwrap_or("");
    assert!(
        last.contains("DuT hangs: failed: start: still running after 1 s (start_timeout): its process group killed; log /run/linerate/dut-log/"),
        "{last}"
    );
    named_log(&err);
    assert!(t.elapsed() < Duration::from_secs(60), "{:?}", t.elapsed());
    let left = sleeping(std::slice::from_ref(&a));
    assert!(left.is_empty(), "left running: {left:?}");
    assert!(netns_with("dfh").is_empty(), "{:?}", netns_with("dfh"));
}

#[test]
fn a_lingering_spec_is_removed_when_the_bench_is_killed() {
    require_root();
    let _s = serial();
    let dir = TempDir::new("dutfile-lingerkill");
    let (spec, args) = lingering_spec(&dir, 2);
    let (mut p, log) = bench_in_trials(&spec, "dflk", "lingering");
    let pid = p.pid();
    // Both children of `start` run (the one in its group, the one that left it).
    assert_eq!(sleeping(&args[..2]).len(), 2, "{log:?}");
    assert!(!stop_scripts(pid).is_empty(), "no stop script registered");
    p.signal(libc::SIGKILL);
    let _ = p.take_child().unwrap().wait();
    // The watchdog kills the groups and the namespace's processes, runs the
    // stop (which hangs: killed at stop_timeout, 2 s) and removes the bed.
    wait_until(
        Duration::from_secs(30),
        "the watchdog to leave no process and no namespace of the spec",
        || {
            sleeping(&args).is_empty()
                && netns_with("dflk").is_empty()
                && stop_scripts(pid).is_empty()
        },
    );
}

/// A spec in a directory whose name holds a command substitution (the
/// shipped nftables example, `{spec_dir}` in its start): it runs, and the
/// command does not. `{spec_dir}` and `{peers}` come out as the literal
/// names.
#[test]
fn a_spec_in_a_directory_named_with_a_command_runs_and_the_command_does_not() {
    require_root();
    require_tool("nft");
    let _s = serial();
    let top = TempDir::new("dutfile-quote");
    let marker = std::env::temp_dir().join(format!("lr-pwned-{}", std::process::id()));
    let _ = std::fs::remove_file(&marker);
    let pwned = Path::new("/tmp/pwned");
    let pwned_before = pwned.exists();
    // '/' cannot be in a name: the path holds the substitutions, over
    // several directories, as the shell would see it.
    let d = top.path().join(format!(
        "my duts $(touch /tmp/pwned)/then `touch {m}` $(touch {m}); touch {m}",
        m = marker.display()
    ));
    std::fs::create_dir_all(&d).unwrap();
    std::fs::copy(example("dut-ipfwd-nft.nft"), d.join("dut-ipfwd-nft.nft")).unwrap();
    let text = std::fs::read_to_string(example("dut-ipfwd-nft.toml")).unwrap();
    let mut t: toml::Table = toml::from_str(&text).unwrap();
    let start = t["start"].as_str().unwrap().to_string();
    let stop = t["stop"].as_str().unwrap().to_string();
    t.insert(
        "start".into(),
        format!("touch {{spec_dir}}/started\n{start}").into(),
    );
    t.insert(
        "stop".into(),
        format!("rm {{spec_dir}}/started; {stop}").into(),
    );
    t.insert(
        "version".into(),
        "echo \"nft in {spec_dir}\" {peers}".into(),
    );
    let spec = d.join("nft.toml");
    std::fs::write(&spec, toml::to_string(&t).unwrap()).unwrap();
    let json = top.join("b.json");
    let child = Command::new(EXE)
        .args(["bench", "--dut-file"])
        .arg(&spec)
        .args(QUICK)
        .args(["--trial", "0.1", "--name", "dfq", "--json"])
        .arg(&json)
        .env("LINERATE_PEERS", &d)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = Proc::from(child).wait_output(Duration::from_secs(120), "bench");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !marker.exists(),
        "a command in the directory's name ran: {err}"
    );
    assert!(pwned_before || !pwned.exists(), "/tmp/pwned made: {err}");
    assert!(out.status.success(), "{err}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let r = &v["results"][0];
    assert_eq!(r["status"], "ok", "{r}");
    let dn = d.display().to_string();
    assert_eq!(r["version"], format!("nft in {dn} {dn}"), "{r}");
    assert!(
        r["sizes"][0]["throughput_pps"].as_f64().unwrap() > 1000.0,
        "{r}"
    );
    // Made in the directory by start, removed by stop.
    assert!(!d.join("started").exists(), "stop did not run");
    assert!(netns_with("dfq").is_empty(), "{:?}", netns_with("dfq"));
}

/// The examples parse (their commands are checked by the tests above and
/// by `linerate bench --help`'s users).
#[test]
fn the_example_specs_load() {
    for e in std::fs::read_dir(example("")).unwrap() {
        let p = e.unwrap().path();
        let n = p.file_name().unwrap().to_string_lossy().into_owned();
        if n.starts_with("dut-") && n.ends_with(".toml") {
            let out = Command::new(EXE)
                .args(["bench", "--dut", "no-such-dut", "--dut-file"])
                .arg(&p)
                .output()
                .unwrap();
            // The spec loads; the unknown --dut is what fails (before any bed).
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains("--dut no-such-dut"), "{n}: {err}");
        }
    }
}
