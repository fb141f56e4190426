//! Fuzz bodies for the files and protocols this crate reads: the
//! experiment file and its observations (CSV), the bench's history lines,
//! DuT spec files, the watchdog's registration lines and the bench's
//! frame sizes (`--sizes`). Each takes arbitrary bytes and asserts invariants
//! that must hold for any input; a panic is a bug. The cargo-fuzz targets
//! in `fuzz/` call them.

use crate::bench::history::{self, Run};
use crate::experiment::spec::{self, Obs};
use crate::experiment::{self, AnovaOptions, Design, Factor, Observations};

/// Largest design (cells x replications) the experiment body analyses.
const MAX_ANALYSED: usize = 512;

/// Arbitrary text as an experiment file: no panic, one-line errors; a
/// file that parses is a valid design whose cells map to levels and back,
/// made-up observations written as CSV read back the same, and their
/// ANOVA either works or says why in one line.
pub fn fuzz_experiment(data: &[u8]) {
    let Ok(s) = core::str::from_utf8(data) else {
        return;
    };
    let x = match experiment::spec::parse(s) {
        Ok(x) => x,
        Err(e) => {
            assert!(!e.contains('\n'), "multi-line error: {e:?}");
            return;
        }
    };
    let d = &x.design;
    d.validate().expect("a parsed design is valid");
    assert!(!x.response.trim().is_empty());
    assert!(d.replications >= 1);
    let cells = d.cells();
    assert_eq!(d.runs(), cells * d.replications);
    assert!(d.runs() <= experiment::MAX_OBSERVATIONS);
    for c in (0..cells).take(64) {
        let levels = d.levels_of(c);
        assert_eq!(d.cell(&levels).expect("levels of a cell"), c);
        let _ = d.describe(&levels);
    }
    if d.runs() > MAX_ANALYSED {
        return;
    }
    // Observations: positive (the log transform needs them), varying with
    // the cell, the replication and the input.
    let mut h = data.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let values: Vec<f64> = (0..d.runs())
        .map(|_| {
            h ^= h >> 33;
            h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
            1.0 + (h >> 40) as f64 / 1024.0
        })
        .collect();
    let r = d.replications;
    let rows: Vec<Obs> = values
        .iter()
        .enumerate()
        .map(|(i, &y)| Obs {
            run: i + 1,
            levels: d.levels_of(i / r),
            replication: i % r + 1,
            y,
        })
        .collect();
    let csv = spec::data_csv(d, &x.response, &rows);
    match spec::parse_data(&csv, d, &x.response) {
        Ok(back) => assert_eq!(back, rows, "observations written as {csv:?}"),
        Err(e) => panic!("observations written as {csv:?} do not read back: {e:?}"),
    }
    let obs = Observations::from_values(d.clone(), &values).expect("values fit the design");
    let opts = AnovaOptions {
        transform: x.transform,
    };
    match experiment::anova(&obs, &opts) {
        Ok(a) => {
            let _ = a.table();
            let _ = a.effects_table();
            serde_json::to_string(&a).expect("an ANOVA serialises");
        }
        Err(e) => assert!(!e.to_string().contains('\n'), "multi-line error: {e:?}"),
    }
}

/// Arbitrary text as the observations file of a 2 x 2 design with 3
/// replications (the design of `examples/experiment-data.toml`): no panic,
/// one-line errors; observations that read are complete and write back
/// to CSV that reads to the same observations.
pub fn fuzz_data(data: &[u8]) {
    let Ok(s) = core::str::from_utf8(data) else {
        return;
    };
    let d = Design::new(
        vec![
            Factor::new("dut", &["linux-bridge", "linux-ipfwd"]),
            Factor::new("frame_size", &["64", "1518"]),
        ],
        3,
    )
    .expect("a valid design");
    let response = "forwarding_mpps";
    let obs = match spec::parse_data(s, &d, response) {
        Ok(o) => o,
        Err(e) => {
            assert!(!e.msg.contains('\n'), "multi-line error: {e:?}");
            return;
        }
    };
    assert_eq!(obs.len(), d.runs());
    assert!(obs.windows(2).all(|w| w[0].run <= w[1].run));
    let csv = spec::data_csv(&d, response, &obs);
    let back = spec::parse_data(&csv, &d, response)
        .unwrap_or_else(|e| panic!("observations written as {csv:?} do not read back: {e:?}"));
    assert_eq!(back, obs, "observations written as {csv:?}");
}

/// `a` and `b` are the same run, floats equal to within rounding (the JSON
/// reader may be one unit in the last place off).
fn same_run(a: &Run, b: &Run) -> bool {
    a.date == b.date
        && a.machine == b.machine
        && a.settings == b.settings
        && a.results.len() == b.results.len()
        && a.results.iter().zip(&b.results).all(|(p, q)| {
            p.dut == q.dut
                && p.frame_size == q.frame_size
                && p.generator_limited == q.generator_limited
                && (p.throughput_pps == q.throughput_pps
                    || (p.throughput_pps - q.throughput_pps).abs()
                        <= p.throughput_pps.abs() * 1e-15)
        })
}

/// Arbitrary bytes as the bench's history file, read as
/// [`history::load`] does (lossy UTF-8, one JSON [`Run`] per non-blank
/// line): no panic; a run written back parses to the same run; the
/// between-run spread of the first run against the others is None or a
/// finite fraction >= 0, and widening results by it keeps them so.
pub fn fuzz_history(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let mut runs = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let Ok(r) = serde_json::from_str::<Run>(line) else {
            continue;
        };
        let again = serde_json::to_string(&r).expect("a run serialises");
        assert!(!again.contains('\n'), "a history line with a newline");
        let r2: Run = serde_json::from_str(&again)
            .unwrap_or_else(|e| panic!("written run {again:?} does not parse: {e}"));
        assert!(same_run(&r, &r2), "round trip of {again:?}");
        runs.push(r);
    }
    let Some((this, earlier)) = runs.split_first() else {
        return;
    };
    let earlier = &earlier[earlier.len().saturating_sub(history::MAX_RUNS)..];
    let spread = history::between_run_spread(this, earlier);
    if let Some(s) = spread {
        assert!(s.is_finite() && s >= 0.0, "between-run spread {s}");
    }
}

/// Arbitrary bytes as a frame size on the command line (`--sizes`, lossy
/// UTF-8): no panic; an error is one line; a size that parses is valid,
/// has a positive number of bytes on the wire, and its label parses back
/// to it (also with spaces around and in capitals).
pub fn fuzz_frame_size(data: &[u8]) {
    use crate::frame_size::{self, IMIX};
    let s = String::from_utf8_lossy(data);
    let v = match frame_size::parse(&s) {
        Ok(v) => v,
        Err(e) => {
            assert!(
                !e.contains('\n') && !e.contains('\r'),
                "multi-line error: {e:?}"
            );
            return;
        }
    };
    assert!(frame_size::is_valid(v), "{s:?} parsed to {v}");
    let b = frame_size::wire_bytes(v);
    assert!(
        b.is_finite() && (64.0..=1518.0).contains(&b),
        "{v}: {b} bytes"
    );
    let l = frame_size::label(v);
    assert_eq!(frame_size::parse(&l), Ok(v), "label {l:?}");
    assert_eq!(frame_size::parse(&format!(" {} ", l.to_uppercase())), Ok(v));
    assert!(frame_size::label_b(v).starts_with(&l));
    assert_eq!(v == IMIX, l == "imix");
}

/// Arbitrary bytes as a guest's serial console (`--dut vm:NAME`): read
/// without panicking; an account is a JSON object; the cause is one short
/// line without control characters.
pub fn fuzz_guest_console(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let lines: Vec<String> = text.lines().map(String::from).collect();
    let c = crate::bench::dut::vm::read_console(&lines);
    assert!(c.account.as_ref().is_none_or(serde_json::Value::is_object));
    assert!(!c.cause.chars().any(char::is_control), "{:?}", c.cause);
    assert!(c.cause.chars().count() < 600, "{:?}", c.cause);
    assert!(c.boot_s.is_none_or(|b| b.is_finite() && b >= 0.0));
}

/// Arbitrary text as a DuT spec file (`linerate bench --dut-file`): no
/// panic; an error is one line naming the file; a spec that parses expands
/// every command with made-up values and into its `sh` text (placeholders
/// as variable references) without error, and a name that
/// survives is one the watchdog's stop-script names can carry.
pub fn fuzz_dut_spec(data: &[u8]) {
    use crate::bench::dut::spec::{expand, shell_expand, DutSpec, PLACEHOLDERS};
    let text = String::from_utf8_lossy(data);
    match DutSpec::parse(&text, "f.toml", std::path::Path::new("/")) {
        Err(e) => {
            assert!(e.starts_with("f.toml: "), "{e:?}");
            assert!(!e.contains('\n'), "{e:?}");
        }
        Ok(s) => {
            let value = |k: &str| {
                PLACEHOLDERS
                    .iter()
                    .any(|p| p.0 == k)
                    .then(|| "v".to_string())
            };
            for c in [&s.start, &s.run, &s.stop, &s.version]
                .into_iter()
                .flatten()
            {
                expand(c, value).unwrap_or_else(|e| panic!("{c:?} checked but: {e}"));
                let names: Vec<&str> = PLACEHOLDERS.iter().map(|p| p.0).collect();
                let text =
                    shell_expand(c, &names).unwrap_or_else(|e| panic!("{c:?} checked but: {e}"));
                assert!(!text.contains('\0'), "{text:?}");
            }
            assert!(s.start.is_some() || s.run.is_some());
            assert!(s
                .name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)));
            assert!(!s.ready_timeout.is_zero());
        }
    }
}

/// Arbitrary bytes as the watchdog's registration lines (what the parent
/// writes to `linerate __reap`): no panic, and everything the watchdog
/// would act on is safe to act on: every process and process group is a
/// positive pid other than init's (a pid that does not fit `pid_t` turns
/// into another process, or into -1 = every process, once cast for
/// kill(2)), every bed has a valid name, every peer a namespace and a
/// script.
pub fn fuzz_guard(data: &[u8]) {
    let reg = crate::reap::read_registry(data);
    let ok_pid = |p: u32| p > 1 && libc::pid_t::try_from(p).is_ok();
    for &p in reg.pids.keys() {
        assert!(ok_pid(p), "registered pid {p}");
    }
    for &g in &reg.groups {
        assert!(ok_pid(g), "registered process group {g}");
    }
    for b in reg.beds.iter().chain(&reg.kept) {
        assert!(
            !b.is_empty()
                && b.len() <= 24
                && b.bytes()
                    .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_'),
            "registered bed {b:?}"
        );
    }
    for ((ns, script), limit) in &reg.peers {
        assert!(!ns.is_empty() && !script.as_os_str().is_empty());
        assert!(!limit.is_zero() && limit.as_secs() <= 3600, "{limit:?}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_take_examples_and_garbage() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
        for f in ["experiment-data.toml", "experiment-dut-size.toml"] {
            let t = std::fs::read(dir.join(f)).unwrap();
            fuzz_experiment(&t);
            for cut in [0, 1, t.len() / 2, t.len() - 1] {
                fuzz_experiment(&t[..cut]);
            }
        }
        fuzz_data(&std::fs::read(dir.join("experiment-dut-size.csv")).unwrap());
        fuzz_data(b"run,dut\n1,x\n");
        // Three sizes in two runs: the degrees of freedom a spread needs.
        let line = r#"{"date":"d","machine":"m","settings":"s","results":[{"dut":"a","frame_size":64,"throughput_pps":1.5e6,"generator_limited":false},{"dut":"a","frame_size":128,"throughput_pps":1.5e6,"generator_limited":false},{"dut":"a","frame_size":256,"throughput_pps":1.5e-90,"generator_limited":false}]}"#;
        let two = format!("{line}\n{}\n", line.replace("1.5e", "1.7e"));
        fuzz_history(two.as_bytes());
        let r: Vec<history::Run> = two
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert!(history::between_run_spread(&r[0], &r[1..]).is_some());
        // Results 1e200 apart: an infinite spread is none.
        let far = format!("{line}\n{}\n", line.replace("1.5e-90", "1.5e110"));
        let r: Vec<history::Run> = far
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(history::between_run_spread(&r[0], &r[1..]), None);
        fuzz_history(far.as_bytes());
        fuzz_history(b"\xff\n{}\n");
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.file_name().unwrap().to_string_lossy().starts_with("dut-")
                && p.extension().is_some_and(|x| x == "toml")
            {
                let t = std::fs::read(&p).unwrap();
                fuzz_dut_spec(&t);
                fuzz_dut_spec(&t[..t.len() / 2]);
            }
        }
        fuzz_dut_spec(
            b"name = \"a\"\ndescription = \"b\"\nmode = \"l2\"\nstart = \"{{ {d0} }}\"\n",
        );
        // The committed corpus, crashes the fuzzer found included.
        let corpus = dir.join("../fuzz/corpus/dut_spec");
        for e in std::fs::read_dir(corpus).unwrap() {
            fuzz_dut_spec(&std::fs::read(e.unwrap().path()).unwrap());
        }
        fuzz_guard(
            b"bed lr-1\npid 1234 99\ngroup 1234\npeer ns /x.sh\npeerlimit 9 ns /y.sh\nunbed lr-1\ndone\n",
        );
        for s in [
            "64",
            "imix",
            " IMIX ",
            "1518",
            "63",
            "1519",
            "+64",
            "064",
            "6\u{4e00}4",
            "",
        ] {
            fuzz_frame_size(s.as_bytes());
        }
        fuzz_frame_size(b"\xff64");
    }
}
