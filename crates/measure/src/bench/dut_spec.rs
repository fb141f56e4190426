//! DuT spec files: a device under test described in a few lines of TOML,
//! the way users bring their own forwarder to `linerate bench --dut-file`.
//! The built-in DuTs that are commands (the Linux bridge, IP forwarding,
//! `linerate fwd`, DPDK testpmd, Open vSwitch) are spec files too
//! (`crates/measure/duts/*.toml`): one way to describe a DuT.
//!
//! ```toml
//! name = "my-router"                       # letters, digits, '-', '_', '.'
//! description = "Linux IPv4 forwarding with my firewall"
//! mode = "l3"                              # l2: frames to the sink's MAC; l3: to d0's MAC
//! start = "nft -f {spec_dir}/fw.nft && sysctl -qw net.ipv4.ip_forward=1"
//! run = "my-forwarder --in {d0} --out {d1} --core {cpu}"   # optional, kept running
//! stop = "nft flush ruleset"               # optional; also run by the watchdog
//! version = "nft --version"                # optional; shown in the report
//! ready_timeout = 10                       # seconds until the first probe frames must come out
//! in_netns = true                          # commands run in the DuT's namespace (default)
//! both_ways = true                         # forwards d1 -> d0 too (default; --direction bi)
//! ```
//!
//! `start` runs to completion (exit 0: started; exit 3: unavailable, the
//! DuT is skipped with its last line of output; anything else: failed).
//! `run` is a process kept running until the DuT is stopped: SIGINT to its
//! process group, SIGKILL 5 s later; if the last line it printed is a JSON
//! object, that is the DuT's own account in the report. Readiness is not
//! slept for: the bench sends probe frames until they come out of d1.
//!
//! Placeholders in `start`, `run` and `stop`: `{ns}`, `{d0}`, `{d1}`,
//! `{cpu}`, `{linerate}` (this binary), `{peers}` (scripts/peers),
//! `{spec_dir}` (the spec file's directory), and `{gen_mac}`, `{d0_mac}`,
//! `{d1_mac}`, `{sink_mac}`, `{gen_ip}`, `{d0_ip}`, `{d1_ip}`, `{sink_ip}`
//! (with `_ip6` for IPv6). `version` knows only `{linerate}`, `{peers}`
//! and `{spec_dir}`. `{{` and `}}` are literal braces. Values are put in
//! as they are (not quoted); every command also sees them in its
//! environment as `DUT_NS`, `DUT_D0`, ... (the name in upper case).

use super::dut::{kernel_release, run_script, Dut, DutEnv, DutError};
use crate::testbed::{DutMode, Testbed};
use serde::Deserialize;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Placeholders and what they stand for (the `--help` and error texts).
pub const PLACEHOLDERS: &[(&str, &str)] = &[
    ("ns", "the DuT's network namespace"),
    ("d0", "the DuT's port facing the generator"),
    ("d1", "the DuT's port facing the sink"),
    ("cpu", "the CPU the DuT may use"),
    ("linerate", "this linerate binary"),
    ("peers", "the scripts/peers directory"),
    ("spec_dir", "the spec file's directory"),
    ("gen_mac", "the generator's MAC"),
    ("d0_mac", "d0's MAC"),
    ("d1_mac", "d1's MAC"),
    ("sink_mac", "the sink's MAC"),
    ("gen_ip", "the generator's IPv4 address"),
    ("d0_ip", "d0's IPv4 address"),
    ("d1_ip", "d1's IPv4 address"),
    ("sink_ip", "the sink's IPv4 address"),
    ("gen_ip6", "the generator's IPv6 address"),
    ("d0_ip6", "d0's IPv6 address"),
    ("d1_ip6", "d1's IPv6 address"),
    ("sink_ip6", "the sink's IPv6 address"),
];

/// The placeholders `version` may use (it runs before any bed exists).
const BEDLESS: &[&str] = &["linerate", "peers", "spec_dir"];

/// Default wait for the first probe frames to come out.
pub const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a `run` process has to exit after SIGINT before SIGKILL.
const RUN_STOP_GRACE: Duration = Duration::from_secs(5);

/// The file as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SpecFile {
    name: String,
    description: String,
    mode: String,
    start: Option<String>,
    run: Option<String>,
    stop: Option<String>,
    version: Option<String>,
    ready_timeout: Option<f64>,
    in_netns: Option<bool>,
    both_ways: Option<bool>,
}

/// A checked DuT spec.
#[derive(Clone, Debug, PartialEq)]
pub struct DutSpec {
    pub name: String,
    pub description: String,
    pub mode: DutMode,
    pub start: Option<String>,
    pub run: Option<String>,
    pub stop: Option<String>,
    pub version: Option<String>,
    pub ready_timeout: Duration,
    pub in_netns: bool,
    /// Forwards d1 -> d0 too (default): measured both ways with `--direction bi`.
    pub both_ways: bool,
    /// Where it came from ("FILE" or "built-in NAME"), for errors.
    pub origin: String,
    /// `{spec_dir}`.
    pub dir: PathBuf,
}

impl DutSpec {
    /// Read and check a spec file; errors are one line naming the file
    /// (and the field where there is one).
    pub fn load(path: &Path) -> Result<DutSpec, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("--dut-file {}: {e}", path.display()))?;
        let dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        let dir = std::fs::canonicalize(&dir).unwrap_or(dir);
        DutSpec::parse(&text, &path.display().to_string(), &dir)
    }

    /// Parse and check the text of a spec; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str, dir: &Path) -> Result<DutSpec, String> {
        let f: SpecFile = toml::from_str(text).map_err(|e| {
            let line = e
                .span()
                .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
            let msg = e.message().replace('\n', " ");
            match line {
                Some(l) => format!("{origin}: line {l}: {msg}"),
                None => format!("{origin}: {msg}"),
            }
        })?;
        let field = |name: &str, msg: String| format!("{origin}: field `{name}`: {msg}");
        if f.name.is_empty()
            || f.name.len() > 40
            || !f
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        {
            return Err(field(
                "name",
                format!(
                    "{:?}: letters, digits, '-', '_' and '.', at most 40 characters",
                    f.name
                ),
            ));
        }
        if f.description.contains('\n') {
            return Err(field("description", "one line, please".into()));
        }
        let mode = match f.mode.as_str() {
            "l2" => DutMode::Bridge,
            "l3" => DutMode::IpForward,
            m => {
                return Err(field(
                    "mode",
                    format!("{m:?}: \"l2\" (frames to the sink's MAC) or \"l3\" (to d0's MAC and the sink's IP)"),
                ))
            }
        };
        if f.start.is_none() && f.run.is_none() {
            return Err(format!(
                "{origin}: no `start` and no `run`: give the command that starts the DuT"
            ));
        }
        let all: Vec<&str> = PLACEHOLDERS.iter().map(|p| p.0).collect();
        for (name, cmd, known) in [
            ("start", &f.start, &all[..]),
            ("run", &f.run, &all[..]),
            ("stop", &f.stop, &all[..]),
            ("version", &f.version, BEDLESS),
        ] {
            if let Some(c) = cmd {
                if c.trim().is_empty() {
                    return Err(field(name, "empty command".into()));
                }
                expand(c, |k| known.contains(&k).then(String::new)).map_err(|e| field(name, e))?;
            }
        }
        let ready_timeout = match f.ready_timeout {
            None => READY_TIMEOUT,
            Some(s) if s.is_finite() && s > 0.0 && s <= 3600.0 => Duration::from_secs_f64(s),
            Some(s) => {
                return Err(field(
                    "ready_timeout",
                    format!("{s}: seconds, over 0 and at most 3600"),
                ))
            }
        };
        Ok(DutSpec {
            name: f.name,
            description: f.description,
            mode,
            start: f.start,
            run: f.run,
            stop: f.stop,
            version: f.version,
            ready_timeout,
            in_netns: f.in_netns.unwrap_or(true),
            both_ways: f.both_ways.unwrap_or(true),
            origin: origin.to_string(),
            dir: dir.to_path_buf(),
        })
    }
}

/// Put the placeholders' values into `template` (`{{`/`}}`: literal
/// braces); an unknown name, an unclosed `{` or a lone `}` is an error.
pub fn expand(template: &str, value: impl Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(i) = rest.find(['{', '}']) {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        if tail.starts_with("{{") || tail.starts_with("}}") {
            out.push_str(&tail[..1]);
            rest = &tail[2..];
            continue;
        }
        if tail.starts_with('}') {
            return Err("a lone `}` (write `}}` for a brace)".into());
        }
        let Some(end) = tail.find('}') else {
            return Err("a `{` without its `}` (write `{{` for a brace)".into());
        };
        let name = &tail[1..end];
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            return Err(format!(
                "a `{{` at byte {} starts no placeholder (write `{{{{` for a brace)",
                template.len() - tail.len()
            ));
        }
        match value(name) {
            Some(v) => out.push_str(&v),
            None => {
                let known: Vec<String> = PLACEHOLDERS
                    .iter()
                    .map(|p| format!("{{{}}}", p.0))
                    .collect();
                return Err(if PLACEHOLDERS.iter().any(|p| p.0 == name) {
                    format!("placeholder {{{name}}} is not known here")
                } else {
                    format!(
                        "unknown placeholder {{{name}}} (known: {})",
                        known.join(" ")
                    )
                });
            }
        }
        rest = &tail[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The last lines a process wrote on one of its pipes (read by a thread,
/// so that a chatty process never blocks on a full pipe).
#[derive(Clone, Default)]
struct Tail(Arc<Mutex<Vec<String>>>);

impl Tail {
    const KEEP: usize = 20;

    fn follow(&self, r: impl Read + Send + 'static) -> std::thread::JoinHandle<()> {
        let t = self.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(r).lines() {
                let Ok(line) = line else { break };
                let mut v = t.0.lock().unwrap_or_else(|p| p.into_inner());
                if v.len() == Self::KEEP {
                    v.remove(0);
                }
                v.push(line);
            }
        })
    }

    fn last(&self, pred: impl Fn(&str) -> bool) -> Option<String> {
        let v = self.0.lock().unwrap_or_else(|p| p.into_inner());
        v.iter().rev().find(|l| pred(l)).cloned()
    }
}

/// The `run` process of a started DuT.
struct Running {
    child: Child,
    out: Tail,
    err: Tail,
    readers: Vec<std::thread::JoinHandle<()>>,
}

/// A DuT described by a [`DutSpec`].
pub struct SpecDut {
    pub spec: DutSpec,
    /// Extra environment of every command (e.g. `OVS_FLOWS_FILE`).
    pub env: Vec<(String, String)>,
    /// The namespace it was started in and the watchdog's stop script.
    started: Option<(String, Option<PathBuf>)>,
    running: Option<Running>,
    /// The values of the placeholders while it runs.
    values: Vec<(String, String)>,
}

impl SpecDut {
    pub fn new(spec: DutSpec) -> Self {
        SpecDut {
            spec,
            env: Vec::new(),
            started: None,
            running: None,
            values: Vec::new(),
        }
    }

    /// A built-in spec (`crates/measure/duts/NAME.toml`).
    pub fn builtin(text: &str, name: &str) -> Self {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("duts");
        match DutSpec::parse(text, &format!("built-in {name}"), &dir) {
            Ok(s) => SpecDut::new(s),
            // The built-in files are checked by a unit test.
            Err(e) => panic!("{e}"),
        }
    }

    fn value(&self, k: &str) -> Option<String> {
        self.values
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.clone())
    }

    /// `sh -c CMD` with the placeholders put in, in the DuT's namespace
    /// (or the root one), with the values and `env` in its environment.
    fn command(&self, field: &str, cmd: &str, ns: &str) -> Result<Command, DutError> {
        let text = expand(cmd, |k| self.value(k))
            .map_err(|e| DutError::Failed(format!("field `{field}`: {e}")))?;
        let mut c = if self.spec.in_netns {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns, "sh", "-c", &text]);
            c
        } else {
            let mut c = Command::new("sh");
            c.args(["-c", &text]);
            c
        };
        c.envs(
            self.values
                .iter()
                .map(|(k, v)| (format!("DUT_{}", k.to_ascii_uppercase()), v.clone())),
        )
        .envs(self.env.iter().map(|(k, v)| (k.clone(), v.clone())));
        Ok(c)
    }

    fn set_values(&mut self, bed: &Testbed, env: &DutEnv) {
        let i = bed.info();
        let path = |p: &Path| p.display().to_string();
        let mut v: Vec<(String, String)> = vec![
            ("ns".into(), i.ns_dut.clone()),
            ("d0".into(), i.dut_in.name.clone()),
            ("d1".into(), i.dut_out.name.clone()),
            ("cpu".into(), env.cpu.to_string()),
            ("linerate".into(), path(&env.linerate)),
            (
                "peers".into(),
                env.peers_dir.as_deref().map(path).unwrap_or_default(),
            ),
            ("spec_dir".into(), path(&self.spec.dir)),
        ];
        for (n, f) in [
            ("gen", &i.gen),
            ("d0", &i.dut_in),
            ("d1", &i.dut_out),
            ("sink", &i.sink),
        ] {
            v.push((format!("{n}_mac"), f.mac.to_string()));
            v.push((format!("{n}_ip"), f.ipv4.to_string()));
            v.push((format!("{n}_ip6"), f.ipv6.to_string()));
        }
        self.values = v;
    }

    /// The watchdog's way to run `stop` if the bench dies: a script
    /// `SCRIPT stop NS` (crate::guard's peer protocol) that runs the
    /// expanded command and removes itself.
    fn write_stop_script(&self, ns: &str) -> Result<Option<PathBuf>, DutError> {
        let Some(stop) = &self.spec.stop else {
            return Ok(None);
        };
        let c = self.command("stop", stop, ns)?;
        let fail = |e: std::io::Error| DutError::Failed(format!("stop script: {e}"));
        let dir = Path::new("/run/linerate/dut-stop");
        std::fs::create_dir_all(dir).map_err(fail)?;
        let quote =
            |s: &std::ffi::OsStr| format!("'{}'", s.to_string_lossy().replace('\'', "'\\''"));
        let argv: Vec<String> = std::iter::once(c.get_program())
            .chain(c.get_args())
            .map(quote)
            .collect();
        let envs: Vec<String> = c
            .get_envs()
            .filter_map(|(k, v)| Some(format!("export {}={}", k.to_string_lossy(), quote(v?))))
            .collect();
        let body = format!(
            "#!/bin/sh\n# linerate bench: the stop command of DuT {} ({}), run by the watchdog if the bench dies.\n[ \"$1\" = stop ] || exit 2\n{}\n{}\nrc=$?\nrm -f \"$0\"\nexit $rc\n",
            self.spec.name,
            self.spec.origin.replace('\n', " "),
            envs.join("\n"),
            argv.join(" ")
        );
        let p = dir.join(format!(
            "{}-{}-{}.sh",
            std::process::id(),
            ns,
            self.spec.name
        ));
        {
            use std::io::Write;
            use std::os::unix::fs::OpenOptionsExt;
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o700)
                .open(&p)
                .map_err(fail)?;
            f.write_all(body.as_bytes()).map_err(fail)?;
        }
        Ok(Some(p))
    }

    /// Run `stop` (if any) and forget the watchdog's script.
    fn run_stop(&mut self) -> Result<(), DutError> {
        let Some((ns, script)) = self.started.take() else {
            return Ok(());
        };
        let mut r = Ok(());
        if let Some(stop) = self.spec.stop.clone() {
            r = self.command("stop", &stop, &ns).and_then(|mut c| {
                let out = run_script(&mut c).map_err(|e| DutError::Failed(e.to_string()))?;
                if out.status.success() {
                    Ok(())
                } else {
                    Err(DutError::Failed(format!(
                        "stop: {}: {}",
                        out.status,
                        last_line(&out)
                    )))
                }
            });
        }
        if let Some(s) = script {
            crate::guard::unregister_peer(&s, &ns);
            let _ = std::fs::remove_file(&s);
        }
        r
    }

    /// Stop the `run` process: SIGINT to its group, SIGKILL after the
    /// grace time; its account (the last JSON line it printed).
    fn stop_running(&mut self) -> Result<Option<serde_json::Value>, DutError> {
        let Some(mut r) = self.running.take() else {
            return Ok(None);
        };
        let pgid = r.child.id() as libc::pid_t;
        let early = r.child.try_wait().ok().flatten();
        // SAFETY: signalling the process group we made for it.
        unsafe { libc::kill(-pgid, libc::SIGINT) };
        let t = Instant::now();
        let status = loop {
            match r.child.try_wait() {
                Ok(Some(s)) => break Some(s),
                Ok(None) if t.elapsed() < RUN_STOP_GRACE => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                _ => {
                    // SAFETY: as above.
                    unsafe { libc::kill(-pgid, libc::SIGKILL) };
                    let _ = r.child.wait();
                    break None;
                }
            }
        };
        // Whatever is left in the group (it may have forked).
        // SAFETY: as above; the group is ours.
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
        crate::guard::unregister_group(pgid as u32);
        for h in r.readers.drain(..) {
            let _ = h.join();
        }
        let what = "run";
        if let Some(s) = early {
            return Err(DutError::Failed(format!(
                "{what}: ended with {s} before the DuT was stopped: {}",
                r.err.last(|l| !l.trim().is_empty()).unwrap_or_default()
            )));
        }
        let Some(s) = status else {
            return Err(DutError::Failed(format!(
                "{what}: still running {} s after SIGINT: killed",
                RUN_STOP_GRACE.as_secs()
            )));
        };
        use std::os::unix::process::ExitStatusExt;
        let by_stop_signal = matches!(s.signal(), Some(libc::SIGINT) | Some(libc::SIGTERM));
        if !(s.success() || by_stop_signal || s.code() == Some(130)) {
            return Err(DutError::Failed(format!(
                "{what}: ended with {s}: {}",
                r.err.last(|l| !l.trim().is_empty()).unwrap_or_default()
            )));
        }
        Ok(r.out
            .last(|l| l.trim_start().starts_with('{'))
            .and_then(|l| serde_json::from_str(&l).ok()))
    }
}

/// The last non-empty line of a command's stderr, else of its stdout.
fn last_line(o: &std::process::Output) -> String {
    let e = String::from_utf8_lossy(&o.stderr);
    let s = String::from_utf8_lossy(&o.stdout);
    e.lines()
        .rev()
        .chain(s.lines().rev())
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
        .to_string()
}

impl Dut for SpecDut {
    fn name(&self) -> String {
        self.spec.name.clone()
    }
    fn describe(&self) -> String {
        self.spec.description.clone()
    }
    fn mode(&self) -> DutMode {
        self.spec.mode
    }
    fn ready_timeout(&self) -> Duration {
        self.spec.ready_timeout
    }
    fn both_ways(&self) -> bool {
        self.spec.both_ways
    }
    fn origin(&self) -> String {
        if self.spec.origin.starts_with("built-in") {
            "built-in".into()
        } else {
            self.spec.origin.clone()
        }
    }
    fn version(&self) -> String {
        let Some(v) = &self.spec.version else {
            return format!("Linux {}", kernel_release());
        };
        let exe = std::env::current_exe().unwrap_or_default();
        let peers = super::dut::find_peers_dir(&exe).unwrap_or_default();
        let text = expand(v, |k| match k {
            "linerate" => Some(exe.display().to_string()),
            "peers" => Some(peers.display().to_string()),
            "spec_dir" => Some(self.spec.dir.display().to_string()),
            _ => None,
        });
        let Ok(text) = text else {
            return "unknown".into();
        };
        match run_script(Command::new("sh").args(["-c", &text])) {
            Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout)
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("unknown")
                .trim()
                .to_string(),
            Ok(o) => format!("unknown (version: {})", last_line(&o)),
            Err(e) => format!("unknown (version: {e})"),
        }
    }
    fn start(&mut self, bed: &mut Testbed, env: &DutEnv) -> Result<(), DutError> {
        self.set_values(bed, env);
        let ns = bed.ns_dut().to_string();
        // Registered before anything starts: the watchdog runs `stop` if we die.
        let script = self.write_stop_script(&ns)?;
        if let Some(s) = &script {
            crate::guard::register_peer(s, &ns);
        }
        self.started = Some((ns.clone(), script));
        if let Some(start) = self.spec.start.clone() {
            let mut c = self.command("start", &start, &ns)?;
            let out = run_script(&mut c).map_err(|e| DutError::Failed(format!("start: {e}")));
            let out = match out {
                Ok(o) => o,
                Err(e) => {
                    let _ = self.run_stop();
                    return Err(e);
                }
            };
            if !out.status.success() {
                // Half-started: whatever `stop` undoes.
                let _ = self.run_stop();
                let line = last_line(&out);
                return Err(if out.status.code() == Some(3) {
                    DutError::Unavailable(line)
                } else {
                    DutError::Failed(format!("start: {}: {line}", out.status))
                });
            }
        }
        if let Some(run) = self.spec.run.clone() {
            use std::os::unix::process::CommandExt;
            let mut c = self.command("run", &run, &ns)?;
            crate::guard::die_with_parent(&mut c);
            super::dut::on_every_cpu(&mut c);
            let spawned = c
                .process_group(0)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn();
            let mut child = match spawned {
                Ok(c) => c,
                Err(e) => {
                    let _ = self.run_stop();
                    return Err(DutError::Failed(format!("run: {e}")));
                }
            };
            crate::guard::register_group(child.id());
            let (out, err) = (Tail::default(), Tail::default());
            let mut readers = Vec::new();
            if let Some(o) = child.stdout.take() {
                readers.push(out.follow(o));
            }
            if let Some(e) = child.stderr.take() {
                readers.push(err.follow(e));
            }
            self.running = Some(Running {
                child,
                out,
                err,
                readers,
            });
        }
        Ok(())
    }
    fn alive(&mut self) -> Result<(), DutError> {
        let Some(r) = &mut self.running else {
            return Ok(());
        };
        if let Ok(Some(s)) = r.child.try_wait() {
            // Let the readers take what it wrote last.
            for h in r.readers.drain(..) {
                let _ = h.join();
            }
            let line = r.err.last(|l| !l.trim().is_empty()).unwrap_or_default();
            return Err(DutError::Failed(format!("run: ended with {s}: {line}")));
        }
        Ok(())
    }
    fn stop(&mut self, _: &Testbed) -> Result<Option<serde_json::Value>, DutError> {
        let acct = self.stop_running();
        let stopped = self.run_stop();
        let acct = acct?;
        stopped?;
        Ok(acct)
    }
}

impl Drop for SpecDut {
    fn drop(&mut self) {
        let _ = self.stop_running();
        let _ = self.run_stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(t: &str) -> Result<DutSpec, String> {
        DutSpec::parse(t, "x.toml", Path::new("/tmp"))
    }

    const OK: &str = "name = \"a\"\ndescription = \"b\"\nmode = \"l3\"\nstart = \"true\"\n";

    #[test]
    fn placeholders_expand_and_braces_escape() {
        let v = |k: &str| (k == "d0").then(|| "eth0".to_string());
        assert_eq!(expand("x {d0} y", v).unwrap(), "x eth0 y");
        assert_eq!(
            expand("awk '{{print}}' {d0}", v).unwrap(),
            "awk '{print}' eth0"
        );
        assert!(expand("{d1}", v).unwrap_err().contains("not known here"));
        assert!(expand("{nope}", v)
            .unwrap_err()
            .contains("unknown placeholder {nope}"));
        assert!(expand("a { b", v).unwrap_err().contains("without its"));
        assert!(expand("a } b", v).unwrap_err().contains("lone"));
        // Found by the fuzzer: text between braces that is no name (here
        // with a newline) is not echoed into the one-line error.
        let e = expand("x {spec_dir(\n} y", v).unwrap_err();
        assert!(
            e.contains("starts no placeholder") && !e.contains('\n'),
            "{e}"
        );
    }

    #[test]
    fn a_good_spec_parses() {
        let s = parse(OK).unwrap();
        assert_eq!(s.name, "a");
        assert_eq!(s.mode, DutMode::IpForward);
        assert_eq!(s.ready_timeout, READY_TIMEOUT);
        assert!(s.in_netns);
    }

    /// Every error is one line naming the file and the field.
    #[test]
    fn bad_specs_name_file_and_field() {
        let cases: &[(&str, &str)] = &[
            ("name = \"a\"\ndescription = \"b\"\nmode = \"l3\"\nstart = \"x {dO}\"\n", "field `start`: unknown placeholder {dO}"),
            ("name = \"a\"\ndescription = \"b\"\nmode = \"l4\"\nstart = \"x\"\n", "field `mode`"),
            ("name = \"a b\"\ndescription = \"b\"\nmode = \"l2\"\nstart = \"x\"\n", "field `name`"),
            ("name = \"a\"\ndescription = \"b\"\nmode = \"l2\"\nstrat = \"x\"\n", "unknown field `strat`"),
            ("name = \"a\"\ndescription = \"b\"\nmode = \"l2\"\n", "no `start` and no `run`"),
            ("name = \"a\"\nmode = \"l2\"\nstart = \"x\"\n", "missing field `description`"),
            ("name = \"a\"\ndescription = \"b\"\nmode = \"l2\"\nstart = \"x\"\nversion = \"{d0}\"\n", "field `version`: placeholder {d0} is not known here"),
            ("name = \"a\"\ndescription = \"b\"\nmode = \"l2\"\nstart = \"x\"\nready_timeout = -1\n", "field `ready_timeout`"),
            ("name = \"a\"\ndescription = \"b\"\nmode = \"l2\"\nstart = \"\"\n", "field `start`: empty"),
            ("name = = \n", "x.toml: line 1"),
        ];
        for (text, want) in cases {
            let e = parse(text).unwrap_err();
            assert!(e.starts_with("x.toml: "), "{e}");
            assert!(e.contains(want), "{e:?} lacks {want:?}");
            assert!(!e.contains('\n'), "{e:?}");
        }
    }
}
