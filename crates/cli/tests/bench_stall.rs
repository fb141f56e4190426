//! A generator that stalls mid-trial never yields a pass at the requested
//! rate: `linerate bench` is stopped (SIGSTOP) for 50 ms at a time while
//! its throughput search runs; the trial that caught a stall must be
//! invalid (the generator's schedule slipped, leaving a gap of more than
//! the 2 % of the trial allowed, or it fell behind further than the DuT's
//! rings can absorb) and repeated, and no trial counted as valid may have
//! done either. Needs root.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod support;
use support::{require_root, Proc, TempDir, EXE};

/// The budget of linerate_measure::bench::rfc2544::LATE_BUDGET_FRAMES.
const BUDGET_FRAMES: f64 = 2048.0;
/// linerate_measure::bench::rfc2544::THROUGHPUT_SLIP_TOLERANCE.
const SLIP_SHARE: f64 = 0.02;

#[test]
fn a_stalled_generator_makes_an_invalid_repeated_trial_never_a_pass() {
    require_root();
    let dir = TempDir::new("bench-stall");
    let json = dir.path().join("b.json");
    let child = Command::new(EXE)
        .args([
            "bench",
            "--final-trial",
            "0",
            "--dut",
            "linux-bridge",
            "--sizes",
            "64",
            "--trial",
            "0.5",
            "--repetitions",
            "1",
            "--no-latency",
            "--frame-loss-sizes",
            "none",
            "--b2b-sizes",
            "none",
            "--no-report",
            "--no-history",
            "--json",
        ])
        .arg(&json)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut p = Proc::from(child);
    let err = p.child_mut().unwrap().stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for l in BufReader::new(err).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    let mut log = Vec::new();
    // Wait for the probe's end: the search's paced trials come next.
    let t = Instant::now();
    loop {
        let l = rx
            .recv_timeout(Duration::from_secs(120).saturating_sub(t.elapsed()))
            .unwrap_or_else(|_| panic!("no top-speed line; log: {log:#?}"));
        log.push(l.clone());
        if l.contains("top speed") {
            break;
        }
    }
    // Stall it 50 ms in every 250 ms until a trial is reported invalid.
    let t = Instant::now();
    let mut stalls = 0;
    'stalling: loop {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "no invalid trial after {stalls} stalls; log: {log:#?}"
        );
        // The shape of the fault (200 ms running, 50 ms stopped), not a
        // wait for something to happen.
        std::thread::sleep(Duration::from_millis(200));
        p.signal(libc::SIGSTOP);
        std::thread::sleep(Duration::from_millis(50));
        p.signal(libc::SIGCONT);
        stalls += 1;
        while let Ok(l) = rx.try_recv() {
            log.push(l.clone());
            if l.contains("invalid") && (l.contains("behind") || l.contains("slipped")) {
                break 'stalling;
            }
        }
    }
    let out = p.wait_output(Duration::from_secs(300), "linerate bench");
    assert!(out.status.success(), "log: {log:#?}");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let trials = v["results"][0]["sizes"][0]["trials"].as_array().unwrap();
    let mut stalled = 0;
    for t in trials {
        let late = t["gen_late_max_us"].as_f64().unwrap();
        let invalid = t["invalid"].as_array().unwrap();
        let Some(rate) = t["requested_pps"].as_f64() else {
            continue; // the probe: not paced
        };
        if late > BUDGET_FRAMES / rate * 1e6 {
            // Beyond what the rings absorb: invalid, whatever it lost.
            assert!(
                invalid
                    .iter()
                    .any(|w| w.as_str().unwrap().contains("behind")),
                "{t:#}"
            );
        }
        // Gaps over 2 % of the trial: invalid.
        let slipped = t["gen_slipped_us"].as_f64().unwrap();
        let tx = t["tx_seconds"].as_f64().unwrap();
        if slipped > SLIP_SHARE * tx * 1e6 {
            assert!(
                invalid
                    .iter()
                    .any(|w| w.as_str().unwrap().contains("slipped")),
                "{t:#}"
            );
        }
        // A stalled trial (a 50 ms gap or catch-up), run again: kept, but
        // not counted.
        let caught = late >= 40_000.0 || slipped >= 40_000.0;
        if !invalid.is_empty() && caught && t["repeated"].as_bool().unwrap() {
            stalled += 1;
        }
    }
    assert!(
        stalled >= 1,
        "no repeated trial caught a 50 ms stall: {trials:#?}"
    );
    // The search still found a throughput.
    let tp = v["results"][0]["sizes"][0]["throughput_pps"].as_f64();
    assert!(tp.is_some_and(|x| x > 0.0), "{:#}", v["results"][0]);
}
