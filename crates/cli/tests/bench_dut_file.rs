//! `linerate bench --dut-file`: a DuT described in a spec file is started,
//! measured and removed like the built-in ones, also when the bench is
//! killed with SIGKILL (the watchdog runs the spec's `stop`); a spec that
//! is malformed, whose start fails, whose DuT never forwards or whose
//! `run` process dies gets one line naming the file (and the field), a
//! non-zero exit, and nothing left behind. Needs root and nft.

use std::io::{BufRead, BufReader};
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
    let out = Proc(Some(child)).wait_output(Duration::from_secs(300), "bench");
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

#[test]
fn a_spec_dut_is_removed_when_the_bench_is_killed() {
    require_root();
    require_tool("nft");
    let _s = serial();
    let dir = TempDir::new("dutfile-kill");
    let spec = nft_spec(&dir);
    let child = Command::new(EXE)
        .args(["bench", "--dut-file"])
        .arg(&spec)
        .args(QUICK)
        .args(["--trial", "1", "--name", "dfk"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut p = Proc(Some(child));
    let pid = p.pid();
    let err = p.0.as_mut().unwrap().stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for l in BufReader::new(err).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    // Killed while its trials run: the DuT started, the firewall loaded.
    let mut log = Vec::new();
    wait_until(
        Duration::from_secs(120),
        "a trial of the spec's DuT",
        || {
            while let Ok(l) = rx.try_recv() {
                log.push(l);
            }
            log.iter().any(|l| l.contains("linux-ipfwd-nft 64 B: "))
        },
    );
    assert!(dir.join("started").exists(), "{log:?}");
    assert!(!stop_scripts(pid).is_empty(), "no stop script registered");
    p.signal(libc::SIGKILL);
    let _ = p.0.take().unwrap().wait();
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
    let out = Proc(Some(child)).wait_output(Duration::from_secs(120), "bench");
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
